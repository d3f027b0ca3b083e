"""What TVM's FuseOps makes of a strided slice or a reshape, which a node's own cost cannot
see: the slice fuses into its reader when that reader is element-wise or injective, so it
moves no bytes of its own; read by a matmul, a conv or a reduction it is a copy kernel.

A reshape fuses into an injective or element-wise neighbour.  Between two kernels that
FuseOps fuses no injective op into (matmul, conv, pooling, reductions: ``ANCHORS``) it is a
function of its own, which the stock build's ``RewriteDataflowReshape`` turns into a view; a
tuned CPU build applies the tuned schedules first and runs it as a copy kernel
(``lone_reshapes``; the cost model says what that costs, ``reshape_copy_us``).  Measured in
the pass's Winograd form of full-size SqueezeNet, tuned cold on Zen 5: 178 us of such copies,
priced as views, where the stock pipeline makes the same reshapes views.

A split is always a copy kernel (FuseOps never fuses a tuple-valued op into its
readers).  The pass therefore emits a split whose parts all fuse into their readers as
one strided slice per part (``splits_to_slices``), and prices such slices as free
(``fused_slices``, used by ``extract.dag_cost``).  Extraction, which prices each e-node
alone, still prices a split as the copy kernel: it can under-value a merge, never
over-value one.  Measured on the merges the pass makes (small models, MetaSchedule, 64
trials, EPYC, interleaved against the split form): BERT 1.043x, ViT 1.119x, NASRNN 1.013x.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from . import ops
from .egraph import ENode, Snapshot
from .graph import CONST, INPUT, OPAQUE, TGET, Node, TensorGraph

# ops FuseOps fuses no injective op into, before or after them (TVM's out-element-wise-
# fusable and reduction patterns); a graph input starts no fused group either.  Opaque calls
# are not among them: an unknown op may be element-wise to FuseOps (``where``), so a reshape
# beside one may fuse (priced as the view, the lower bound)
ANCHORS = frozenset(
    {
        "Matmul",
        "Conv2d",
        "Conv2dNCHWc",
        "DepthwiseConv2dNCHWc",
        "BatchNorm",
        "LayerNorm",
        "Softmax",
        "MaxPool2d",
        "AvgPool2d",
        "Mean",
    }
)
_ANCHOR_DEPTH = 4  # element-wise epilogue ops followed back to their kernel

# the ops a strided slice before them fuses into (TVM's rule: a path of element-wise and
# injective ops to an element-wise or injective dominator); a split or concat takes a
# tuple, where FuseOps stops
_NOT_SLICE_READERS = ("Split", "Concat")


def _fuses_slice(op: str) -> bool:
    spec = ops.BY_NAME.get(op)
    return spec is not None and spec.kind in (ops.ELEMWISE, ops.INJECTIVE) and op not in _NOT_SLICE_READERS


def _readers(g: TensorGraph, live: list[int]) -> dict[int, list[int]]:
    readers: dict[int, list[int]] = {nid: [] for nid in live}
    for nid in live:
        for i in g.nodes[nid].inputs:
            readers[i].append(nid)
    return readers


def _all_fuse(g: TensorGraph, readers: list[int]) -> bool:
    return bool(readers) and all(_fuses_slice(g.nodes[r].op) for r in readers)


def fused_slices(g: TensorGraph) -> set[int]:
    """The StridedSlice nodes that FuseOps fuses into every one of their readers (not
    outputs of the block, not weight-only: those fold)."""
    live = g.reachable()
    readers = _readers(g, live)
    outputs = {nid for _, nid in g.outputs}
    return {
        nid
        for nid in live
        if g.nodes[nid].op == "StridedSlice"
        and not g.nodes[nid].is_const
        and nid not in outputs
        and _all_fuse(g, readers[nid])
    }


def splits_to_slices(g: TensorGraph) -> TensorGraph:
    """``g`` with each split whose parts are all read only by slice-fusing ops replaced
    by one strided slice of its input per part; ``g`` itself when there is none."""
    live = g.reachable()
    readers = _readers(g, live)
    outputs = {nid for _, nid in g.outputs}
    parts_of: dict[int, list[int]] = {}
    for nid in live:
        n = g.nodes[nid]
        if n.op != "Split" or n.is_const or nid in outputs or not readers[nid]:
            continue
        parts = readers[nid]
        if all(g.nodes[t].op == TGET and t not in outputs and _all_fuse(g, readers[t]) for t in parts):
            parts_of[nid] = parts
    if not parts_of:
        return g
    nodes = list(g.nodes)
    for split_id, parts in parts_of.items():
        split = g.nodes[split_id]
        indices, axis = split.attrs
        bounds = [0, *indices, g.nodes[split.inputs[0]].ty.shape[axis]]
        for t in parts:
            k = g.nodes[t].attrs[0]
            attrs = ((axis,), (bounds[k],), (bounds[k + 1],), (1,), True)
            nodes[t] = Node("StridedSlice", attrs, split.inputs, g.nodes[t].ty, False)
    # the parts now read the split's input, an earlier node: ids stay topological
    return g.with_nodes(nodes, list(g.outputs))


def _ends_a_kernel(op: str, first_input: Callable[[int], bool], depth: int) -> bool:
    """Whether a value made by ``op`` leaves a fused group that no injective op joins: an
    anchor's, an input, or an element-wise epilogue of one of those (``first_input(depth)``:
    the same question of the op's first input)."""
    if op in ANCHORS or op == INPUT:
        return True
    spec = ops.BY_NAME.get(op)
    return depth > 0 and spec is not None and spec.kind == ops.ELEMWISE and first_input(depth - 1)


def _joins_no_reader(reader_ops: Iterable[str]) -> bool:
    return all(op in ANCHORS for op in reader_ops)


def lone_reshapes(g: TensorGraph) -> set[int]:
    """The Reshape nodes FuseOps leaves as functions of their own: made from a kernel's
    output (or an input) and read only by kernels, or an output of the block."""
    live = g.reachable()
    readers = _readers(g, live)

    def ends_a_kernel(nid: int, depth: int = _ANCHOR_DEPTH) -> bool:
        n = g.nodes[nid]
        return _ends_a_kernel(n.op, lambda d: bool(n.inputs) and ends_a_kernel(n.inputs[0], d), depth)

    return {
        nid
        for nid in live
        if g.nodes[nid].op == "Reshape"
        and not g.nodes[nid].is_const
        and ends_a_kernel(g.nodes[nid].inputs[0])
        and _joins_no_reader(g.nodes[r].op for r in readers[nid])
    }


def lone_reshape_nodes(snap: Snapshot, roots: Iterable[int]) -> set[tuple[int, ENode]]:
    """``lone_reshapes`` in an e-graph, whatever the extraction picks: (class, e-node) of the
    Reshape nodes whose input class holds only kernel outputs and whose class only kernels
    read (or a root).  Where some choice could fuse the reshape it counts as a view."""
    readers: dict[int, list[str]] = {}
    for nodes in snap.classes:
        for n in nodes:
            for k in n.children:
                readers.setdefault(k, []).append(n.op)
    root_set = set(roots)
    memo: dict[tuple[int, int], bool] = {}

    def ends_a_kernel(c: int, depth: int = _ANCHOR_DEPTH) -> bool:
        if (c, depth) not in memo:
            memo[(c, depth)] = False  # a cycle ends nothing
            memo[(c, depth)] = all(
                _ends_a_kernel(n.op, lambda d, n=n: bool(n.children) and ends_a_kernel(n.children[0], d), depth)
                for n in snap.classes[c]
            )
        return memo[(c, depth)]

    return {
        (c, n)
        for c, nodes in enumerate(snap.classes)
        if not snap.is_const[c] and (c in readers or c in root_set) and _joins_no_reader(readers.get(c, ()))
        for n in nodes
        if n.op == "Reshape" and n.children and ends_a_kernel(n.children[0])
    }


# what a value passes through on its way into one fused group: every op but the anchors, the
# block's leaves and opaque calls (FuseOps fuses element-wise and injective ops, concats and
# slices among them, into one kernel)
_GROUP_STOPS = frozenset(ANCHORS | {INPUT, CONST, OPAQUE, TGET})


def fused_reblocks(g: TensorGraph) -> list[int]:
    """The ToBlocked nodes whose input comes, through ops FuseOps fuses with them, from a
    FromBlocked node: one kernel that unblocks a tensor and blocks it again (with a bias
    add or a concat between, say).  TVM 0.27's LLVM miscompiles some such kernels in AVX2
    code once MetaSchedule fuses and splits their loops (benchmarks/repro/avx2-copy-
    miscompile/minimal.py: unblock, bias, concat, block), so the pass counts them."""
    live = g.reachable()
    unblocked: dict[int, bool] = {}  # node -> an unblocking reaches it inside the group
    for nid in live:  # children first
        n = g.nodes[nid]
        if n.op == "FromBlocked" and not n.is_const:
            unblocked[nid] = True
        elif n.op in _GROUP_STOPS or n.is_const:
            unblocked[nid] = False
        else:
            unblocked[nid] = any(unblocked.get(i, False) for i in n.inputs)
    return [nid for nid in live if g.nodes[nid].op == "ToBlocked" and unblocked[g.nodes[nid].inputs[0]]]
