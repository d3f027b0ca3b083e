"""Translation validation: the pass checks every rewritten block before returning it.

The original block and its rewrite run on the same random inputs in the reference
interpreter (``evaluate``); a relative difference above ``RTOL`` (and an absolute one
above ``ATOL``) on any output rejects the rewrite.  So does one at a *checkpoint*: a node
of the original and a node of the rewrite that the e-graph holds in one e-class (the pass
names the pairs where the rewrite chose another e-node, ``rewrite_sites``).  Outputs alone
can hide a wrong rewrite: through 16 layers of VGG-19 with random weights the signal shrinks until the
biases decide the logits, and a direct conv and its Winograd form gave bit-equal float64
outputs.  Random inputs can miss a bug that only some inputs
expose (a rule that is wrong only where a value is zero, say); a rule that is
wrong for the shapes and attributes at hand shows on any input.  Ops the pass does
not model (opaque calls) are never rewritten and are stood in for by random
functions of their inputs, so what is checked is everything around them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from .evaluate import Interpreter, relative_difference
from .graph import TensorGraph, topological_order
from .rules import RuleLibrary

RTOL = 1e-4  # equal functions agree to ~1e-12 in the interpreter (~1e-7 through a node TVM runs in float32); wrong rewrites differ by far more
# ... or within ATOL of it everywhere: the rules that are not exact are within 1.2e-6 absolute
# (erf_rational's GELU), and an output or checkpoint holding only GELU's negative tail cannot be
# judged relative to its own magnitude (fuzz seed 13373: a GELU of three values near -3e-4, its
# rational erf 1e-7 off, 3.6e-4 relative, rejected the rewrite). A wrong rewrite on inputs of unit
# scale is off by far more than 2e-6; the fuzzer's float32 builds use the same floor (ATOL_FP32).
ATOL = 2e-6


@dataclass
class Validation:
    ok: bool
    max_rel_diff: float
    failed_output: str | None  # the first output or checkpoint that differs
    seconds: float
    tvm_nodes: int  # nodes the interpreter ran through TVM
    checkpoints: int = 0  # checkpoint pairs compared (structurally equal pairs are not)
    failed_node: int | None = None  # the new graph's node at the first checkpoint that differs


def validate(
    original: TensorGraph,
    new: TensorGraph,
    seed: int = 0,
    rtol: float = RTOL,
    checkpoints: Sequence[tuple[int, int]] = (),
    atol: float = ATOL,
) -> Validation:
    """Compare ``new`` with ``original`` (same leaf tables) on one set of random inputs: the
    outputs, and each ``(original node, new node)`` pair of ``checkpoints``; a pair differs
    where it is more than ``rtol`` apart relative to its magnitude and more than ``atol``
    apart somewhere (``max_rel_diff`` reports the relative difference either way)."""
    start = time.perf_counter()
    interp = Interpreter(seed)
    worst, failed, failed_node, compared = 0.0, None, None, 0

    def record(a, b, where: str, node: int | None = None) -> None:
        nonlocal worst, failed, failed_node
        diff = relative_difference(a, b)
        worst = max(worst, diff)
        if diff > rtol and failed is None and relative_difference(a, b, atol) > rtol:
            failed, failed_node = where, node

    def compare(i: int, a, b) -> None:
        nonlocal compared
        compared += 1
        nid, new_nid = checkpoints[i]
        record(a, b, f"intermediate {original.nodes[nid].op} (node {nid})", new_nid)

    ref, got = interp.outputs_of([original, new], checkpoints, compare)
    for (var, _), a, b in zip(original.outputs, ref, got):
        record(a, b, f"output {var.name}")
    seconds = time.perf_counter() - start
    return Validation(failed is None, worst, failed, seconds, interp.tvm_nodes, compared, failed_node)


def suspects(
    library: RuleLibrary,
    rules_applied: dict[str, int],
    original: TensorGraph,
    new: TensorGraph,
    below: int | None = None,
) -> list[str]:
    """The rules that fired and create an op the rewrite added (not in the original):
    the candidates for a rewrite that failed validation.  With ``below`` (the new node at
    a checkpoint that failed), only the ops added in that node's inputs count."""
    old = {(n.op, n.attrs) for n in (original.nodes[i] for i in original.reachable())}
    cone = new.reachable() if below is None else topological_order([below], lambda nid: new.nodes[nid].inputs)
    added = {new.nodes[i].op for i in cone if (new.nodes[i].op, new.nodes[i].attrs) not in old}
    return [r.name for r in library.rules if rules_applied.get(r.name) and r.creates & added]
