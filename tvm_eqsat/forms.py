"""The forms a rule family creates, extracted whatever a cost model would choose: for
checking a family's right-hand sides (the rule tests) and for timing its forms against
the original (``scripts/bench_layers.py``), which is how a cost model's choices are judged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import tvm

from . import graph, te_ops
from .egraph import TensorEGraph
from .extract import choice_to_graph, loaded_enode
from .ilp import PRESOLVE_LIGHT, ilp
from .rules import load_library
from .saturate import saturate
from .transform import _with_blocks

# (op, attrs, input types) -> True for an e-node the extraction must avoid where it can
Avoid = Callable[[str, tuple, Sequence[Any]], bool]


def rewritten_form(mod: tvm.IRModule, rules, func: str = "main", avoid: Avoid | None = None):
    """Grow ``func``'s first block with ``rules`` and extract the term using the most
    rewritten nodes.

    Every e-node that is not one of the original graph's nodes costs 0.1, an original
    one 10 (a node ``avoid`` names: 1000), so the exact extractor picks rewritten forms
    wherever they exist (a form of up to 100 new nodes, such as a Winograd conv, for one
    original node).  Returns (new module, rules applied, whether the graph changed).
    """
    f = mod[func]
    g = graph.graph_from_block(f.body.blocks[0])
    library = load_library().select(rules)
    eg = TensorEGraph(g, library.program())
    grown = saturate(eg, library.families, node_limit=20000, iter_limit=8, deadline=time.monotonic() + 60)
    snap = eg.snapshot()
    original = {loaded_enode(snap, n) for nid, n in enumerate(g.nodes) if nid in snap.root_of}

    def cost(cls, node):
        if not node.children:
            return 0.001
        if avoid is not None and avoid(node.op, node.attrs, [snap.ty[c] for c in node.children]):
            return 1000.0
        return 10.0 if (node.op, node.attrs, node.children) in original else 0.1

    roots = [snap.root_of[nid] for _, nid in g.outputs]
    choice = ilp(snap, cost, roots, 60, presolve=PRESOLVE_LIGHT)  # light: see ilp.PRESOLVE_LIGHT
    if any(r not in choice for r in roots):
        raise graph.Unsupported("no finite-cost term for an output")
    new_graph = choice_to_graph(snap, choice, g)
    new_func = _with_blocks(f, [graph.block_from_graph(new_graph)] + list(f.body.blocks[1:]))
    new_mod = mod.clone()
    new_mod[mod.get_global_var(func)] = new_func
    new_mod = te_ops.attach(new_mod)
    return new_mod, grown.rules_applied, new_graph.signature() != g.signature()
