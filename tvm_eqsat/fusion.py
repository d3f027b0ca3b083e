"""What TVM's FuseOps makes of a strided slice, which a node's own cost cannot see: the
slice fuses into its reader when that reader is element-wise or injective, so it moves
no bytes of its own; read by a matmul, a conv or a reduction it is a copy kernel.

A split is always a copy kernel (FuseOps never fuses a tuple-valued op into its
readers).  The pass therefore emits a split whose parts all fuse into their readers as
one strided slice per part (``splits_to_slices``), and prices such slices as free
(``fused_slices``, used by ``extract.dag_cost``).  Extraction, which prices each e-node
alone, still prices a split as the copy kernel: it can under-value a merge, never
over-value one.  Measured on the merges the pass makes (small models, MetaSchedule, 64
trials, EPYC, interleaved against the split form): BERT 1.043x, ViT 1.119x, NASRNN 1.013x.
"""

from __future__ import annotations

from . import ops
from .graph import TGET, Node, TensorGraph

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
