"""Parallel-merge groups: the facts that ``rules/merges.egg``'s ``*-merge-all`` rules need.

A merge-all rule turns every compatible kernel on one input into one kernel on the
concatenated weights and a split.  Which kernels form a group, the split indices and
the attributes they share are computed here from the loaded graph, and given to the
e-graph as facts (declared in ``rules/language/core.egg``): the rules bind every
operand and attribute from these facts, never from another member of a part's
e-class (an enlarged conv read that way was the soundness issue's miscompile).
"""

from __future__ import annotations

from .graph import TensorGraph, TensorTy


def _merge_key(graph: TensorGraph, n) -> tuple | None:
    """(group key, weight-concat axis, split axis) for a kernel that a parallel merge
    can take in (a matmul or an ungrouped NCHW conv on a constant weight), else None.
    The key starts with the input and holds everything the group's kernels must share."""
    if n.op not in ("Matmul", "Conv2d") or len(n.inputs) != 2:
        return None
    x, w = (graph.nodes[i] for i in n.inputs)
    if not w.is_const or not isinstance(w.ty, TensorTy) or not isinstance(x.ty, TensorTy):
        return None
    if n.op == "Matmul":
        if len(w.ty.shape) != 2 or len(x.ty.shape) < 1:
            return None
        return (n.inputs[0], n.op, n.attrs, w.ty.shape[0], w.ty.dtype), 1, len(x.ty.shape) - 1
    groups, layouts = n.attrs[3], n.attrs[4:7]
    if groups != 1 or layouts != ("NCHW", "OIHW", "NCHW"):
        return None
    return (n.inputs[0], n.op, n.attrs, w.ty.shape[1:], w.ty.dtype), 0, 1


def merge_groups(graph: TensorGraph) -> list[tuple[int, list[int], list[int], int]]:
    """TVM's CombineParallelMatmul, generalised to convs, as data: for each input read
    by two or more compatible kernels on constant weights, (input, kernels, split
    indices, split axis).  The ``*-merge-all`` rules turn a group into one kernel on
    the concatenated weights and a split, in one step: the pairwise merge rules reach
    that form only through every subset of the group, which blows up the e-graph."""
    groups: dict[tuple, list[int]] = {}
    axes: dict[tuple, tuple[int, int]] = {}
    for nid in graph.reachable():
        found = _merge_key(graph, graph.nodes[nid])
        if found is not None:
            key, w_axis, split_axis = found
            groups.setdefault(key, []).append(nid)
            axes[key] = (w_axis, split_axis)
    out = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        w_axis, split_axis = axes[key]
        widths = [graph.nodes[graph.nodes[m].inputs[1]].ty.shape[w_axis] for m in members]
        indices = [sum(widths[: i + 1]) for i in range(len(widths) - 1)]
        out.append((key[0], members, indices, split_axis))
    return out


def merge_group_facts(graph: TensorGraph, facts) -> None:
    """The groups as rows of core.egg's ``load-merge-*`` relations (``facts``: the loader's rows)."""
    for g, (x, members, indices, axis) in enumerate(merge_groups(graph)):
        weights = tuple(graph.nodes[m].inputs[1] for m in members)
        weight_list, index_vec = facts.lst(weights), facts.vec(tuple(indices))
        facts.add("load-merge-group", str(g), str(x), str(weight_list), str(index_vec), str(axis))
        for k, (m, w) in enumerate(zip(members, weights)):
            facts.add("load-merge-part", str(g), str(k), str(m), str(w))
        first = graph.nodes[members[0]]  # the group key holds the attributes: all members share them
        if first.op == "Matmul":
            facts.add("load-merge-matmul", str(g), first.attrs[0])
        else:
            strides, padding, dilation = (str(facts.vec(v)) for v in first.attrs[:3])
            facts.add("load-merge-conv", str(g), strides, padding, dilation, first.attrs[7])
