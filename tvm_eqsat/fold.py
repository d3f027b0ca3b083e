"""Constant folding of a rewritten block: the weight-only subgraphs that rules create
(batch norms folded into conv weights, Winograd weight transforms, merged weights)
are computed here, once, in numpy, and the block holds their values as constants.

Why: TVM folds a constant subgraph by legalising each op, compiling its kernel and
running it.  Small MobileNet-v2 with its 52 batch norms folded into the convs took
30 s to build at LLVM -O0 instead of 2 s, nearly all of it in ``FoldConstant``.  Here
the interpreter's ops (``evaluate``) compute each op in float64 and round its result to
the op's dtype, as TVM's kernel stores it (ops that only move values run on them as
they are): the values TVM would fold to, up to the rounding inside each op (an fp16
product that overflows is inf here too).

What is folded: a float-valued native op whose inputs are all bound constants (or
folded values), at the frontier where a runtime op reads it: what ``FoldConstant``
folds (broadcasts included, which it materialises too), less what the block held before
the rewrite (VGG-19's transposed 100M-element classifier weight: one kernel for TVM, and
seconds of copying here).  Nothing that reads a function
parameter is folded, not even a weight the user folds with ``LiftTransformParams``
(``fold_weights``): its value is not known here.  A frontier node whose value the
interpreter cannot compute, or is not finite in its dtype, stays an op, with its whole
constant subgraph, for TVM to fold as before.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from tvm import relax

from .evaluate import SEMANTICS, NotCovered, as_exact
from .graph import CONST, INPUT, OPAQUE, TGET, TUPLE_NODE, Node, TensorGraph, TensorTy, structural_ids

FOLDED_DTYPES = ("float16", "float32", "float64")  # numpy holds them; bfloat16 it does not
KEPT_AS_IS = (CONST, "Table")  # already constants in the rebuilt block


def _foldable_op(node: Node) -> bool:
    """An op the interpreter computes exactly as TVM does, with a float result."""
    if node.op in (TUPLE_NODE, TGET):
        return True
    if node.op not in SEMANTICS:
        return False
    tys = node.ty if isinstance(node.ty, tuple) else (node.ty,)
    return all(isinstance(t, TensorTy) and t.dtype in FOLDED_DTYPES for t in tys)


def _readable_constant(node: Node) -> bool:
    """A bound constant numpy reads without ml_dtypes: a float dtype it holds, an integer or a
    bool (not bfloat16 or float8)."""
    dtype = node.ty.dtype if isinstance(node.ty, TensorTy) else ""
    return dtype in FOLDED_DTYPES or dtype == "bool" or dtype.startswith(("int", "uint"))


def _constant_nodes(graph: TensorGraph, order: list[int]) -> set[int]:
    """Every reachable node computed from bound constants alone, by ops that can be folded."""
    constant: set[int] = set()
    for nid in order:
        n = graph.nodes[nid]
        if n.op == CONST:
            if _readable_constant(n):
                constant.add(nid)
        elif n.op not in (INPUT, OPAQUE) and _foldable_op(n) and all(i in constant for i in n.inputs):
            constant.add(nid)
    return constant


def _frontier(graph: TensorGraph, order: list[int], constant: set[int]) -> list[int]:
    """Constant tensor nodes, not constants already, that a runtime node or an output reads."""
    read = {nid for _, nid in graph.outputs}
    for nid in order:
        if nid not in constant:
            read.update(graph.nodes[nid].inputs)
    for nid in reversed(order):  # a constant tuple that is read: its parts are
        if nid in read and nid in constant and not isinstance(graph.nodes[nid].ty, TensorTy):
            read.update(graph.nodes[nid].inputs)
    return [
        nid
        for nid in order
        if nid in read
        and nid in constant
        and graph.nodes[nid].op not in KEPT_AS_IS
        and isinstance(graph.nodes[nid].ty, TensorTy)
    ]


def _values(graph: TensorGraph, order: list[int], constant: set[int], wanted: set[int]) -> dict[int, Any]:
    """The value of each ``wanted`` node that can be computed (others are missing), each
    intermediate value dropped once its last reader has run."""
    needed: set[int] = set()
    for nid in reversed(order):
        if nid in wanted or nid in needed:
            needed.update(graph.nodes[nid].inputs)
    needed |= wanted
    uses: dict[int, int] = {}
    for nid in order:
        if nid in needed:
            for i in graph.nodes[nid].inputs:
                uses[i] = uses.get(i, 0) + 1
    values: dict[int, Any] = {}
    with np.errstate(all="ignore"):
        for nid in order:
            if nid not in needed or nid not in constant:
                continue
            n = graph.nodes[nid]
            if all(i in values for i in n.inputs):
                values[nid] = _value(graph, n, [values[i] for i in n.inputs])
                if values[nid] is None:
                    del values[nid]
            for i in n.inputs:
                uses[i] -= 1
                if not uses[i] and i not in wanted:
                    values.pop(i, None)
    return {nid: v for nid, v in values.items() if nid in wanted}


MOVES = frozenset(
    ("Permute", "Reshape", "BroadcastTo", "ExpandDims", "Squeeze", "Concat", "Split", "StridedSlice", "Take", "Pad")
)
"""Ops that only move or copy values: run on the values as they are, with no float64 copy
(a model's weight transposes run to 100M elements)."""


def _value(graph: TensorGraph, n: Node, xs: list) -> Any:
    """The node's value, held in its own dtype (as TVM's kernel stores it), or None."""
    if n.op == CONST:
        return graph.constants[n.attrs[0]].value.numpy()
    if n.op == TUPLE_NODE:
        return tuple(xs)
    if n.op == TGET:
        return xs[0][n.attrs[0]]
    try:
        value = SEMANTICS[n.op](xs if n.op in MOVES else [as_exact(x) for x in xs], n.attrs)
    except (NotCovered, ValueError, IndexError, TypeError):  # (Take with an index out of range raises)
        return None
    return _rounded(value, n.ty)


def _rounded(value: Any, ty) -> Any:
    """``value`` rounded to the dtype TVM's kernel would store it in."""
    if isinstance(ty, tuple):
        return tuple(_rounded(v, t) for v, t in zip(value, ty))
    return np.asarray(value).astype(ty.dtype, copy=False)


def _as_constant(value: np.ndarray, ty: TensorTy):
    """The Relax constant of a folded value, or None where it is not finite in ``ty``."""
    if value.shape != ty.shape or not np.isfinite(value).all():
        return None
    return relax.const(np.ascontiguousarray(value), ty.dtype)


class Folded(NamedTuple):
    graph: TensorGraph
    count: int  # constant subgraphs folded
    node_of: dict[int, int] | None  # each kept node's id in ``graph``; None: ids unchanged


def fold_constants(graph: TensorGraph, original: TensorGraph | None = None) -> Folded:
    """``graph`` with its foldable constant subgraphs replaced by their values.  With
    ``original`` (the block ``graph`` was rewritten from, same leaf tables), only subgraphs
    the rewrite created are folded.  The graph is returned as it is when there is nothing
    to fold."""
    order = graph.reachable()
    constant = _constant_nodes(graph, order)
    frontier = _frontier(graph, order, constant)
    if original is not None and frontier:
        table: dict[tuple, int] = {}
        before = set(structural_ids(original, table).values())
        ids = structural_ids(graph, table)
        frontier = [nid for nid in frontier if ids[nid] not in before]
    if not frontier:
        return Folded(graph, 0, None)
    values = _values(graph, order, constant, set(frontier))
    constants = list(graph.constants)
    folded: dict[int, int] = {}  # node -> index of its value in ``constants``
    for nid in frontier:
        if nid in values:
            value = _as_constant(values.pop(nid), graph.nodes[nid].ty)
            if value is not None:
                constants.append(value)
                folded[nid] = len(constants) - 1
    if not folded:
        return Folded(graph, 0, None)
    # keep the ids topological (``block_from_graph`` emits in id order): each node in
    # its old place, a folded node as a Const there, and what only folded nodes read dropped
    kept: set[int] = set()
    stack = [nid for _, nid in graph.outputs]
    while stack:
        nid = stack.pop()
        if nid not in kept:
            kept.add(nid)
            if nid not in folded:
                stack.extend(graph.nodes[nid].inputs)
    nodes: list[Node] = []
    new_id: dict[int, int] = {}
    for nid in sorted(kept):
        n = graph.nodes[nid]
        if nid in folded:
            nodes.append(Node(CONST, (folded[nid],), (), n.ty, True))
        else:
            nodes.append(Node(n.op, n.attrs, tuple(new_id[i] for i in n.inputs), n.ty, n.is_const))
        new_id[nid] = len(nodes) - 1
    outputs = [(var, new_id[nid]) for var, nid in graph.outputs]
    return Folded(TensorGraph(nodes, graph.inputs, constants, graph.opaques, outputs), len(folded), new_id)


__all__ = ["Folded", "fold_constants"]
