"""Extraction: pick one e-node per needed e-class, and read the choice back as a graph.

Three extractors, all returning a choice (class -> e-node) for the classes the
roots need, never a cyclic one:

* ``greedy``: the classic tree cost (a class's best node by its own cost plus
  its children's best costs, to a fixed point).  A sub-graph shared by two
  users is counted twice, so merges (two split halves reading one matmul) look
  twice as expensive: kept as the baseline.
* ``dag_greedy``: the cost of a choice is the sum over the *set* of classes in
  its sub-DAG, each counted once, to a fixed point.
* ``ilp``: the exact optimum of the DAG cost as a mixed-integer program solved by
  HiGHS (``scipy.optimize.milp``): one binary per e-node, child-class
  constraints, ordering variables for acyclicity, a wall-clock limit, the
  DAG-greedy cost as a cut-off, and the greedy answer when the solver stops
  without a better solution.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Callable

import numpy as np

from .egraph import ENode, Snapshot
from .graph import Node, TensorGraph, Unsupported, topological_order

log = logging.getLogger("tvm_eqsat")

EXTRACTORS = ("greedy", "dag_greedy", "ilp")

NodeCost = Callable[[int, ENode], float]  # (class id, e-node) -> cost


def snapshot_node_cost(snap: Snapshot, cost_model) -> NodeCost:
    """Cost of an e-node from the e-graph analyses of its class and children."""

    def cost(cls: int, node: ENode) -> float:
        in_tys = [snap.ty[c] for c in node.children]
        return cost_model.node_cost(node.op, node.attrs, in_tys, snap.ty[cls], snap.is_const[cls])

    return cost


def greedy_tree(snap: Snapshot, node_cost: NodeCost) -> dict[int, ENode]:
    """Best node per class under tree cost (Bellman-Ford style fixed point)."""
    costs = [[node_cost(c, n) for n in nodes] for c, nodes in enumerate(snap.classes)]
    best = [math.inf] * len(snap.classes)
    choice: dict[int, ENode] = {}
    changed = True
    while changed:
        changed = False
        for c, nodes in enumerate(snap.classes):
            for k, node in enumerate(nodes):
                total = costs[c][k]
                for child in node.children:
                    total += best[child]
                    if total >= best[c]:
                        break
                if total < best[c]:
                    best[c] = total
                    choice[c] = node
                    changed = True
    return choice


def _reachable_classes(snap: Snapshot, roots: list[int]) -> list[int]:
    seen, stack = set(roots), list(roots)
    while stack:
        for node in snap.classes[stack.pop()]:
            for child in node.children:
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
    return sorted(seen)


def greedy_dag(snap: Snapshot, node_cost: NodeCost, roots: list[int]) -> dict[int, ENode]:
    """Best node per class under DAG cost: each class in a sub-DAG is paid once.

    Each class keeps the cost set {class: own cost} of its best sub-DAG; a node's
    cost is its own cost plus the union of its children's sets.  Worklist to a
    fixed point; a node whose sub-DAG contains its own class (a cycle) is skipped.
    """
    classes = _reachable_classes(snap, roots)
    parents: dict[int, list[tuple[int, int]]] = {c: [] for c in classes}
    costs: dict[int, list[float]] = {}
    for c in classes:
        costs[c] = [node_cost(c, n) for n in snap.classes[c]]
        for k, node in enumerate(snap.classes[c]):
            for child in set(node.children):
                parents[child].append((c, k))
    best: dict[int, float] = {}
    best_set: dict[int, dict[int, float]] = {}
    choice: dict[int, ENode] = {}
    # start from the leaves; a node with children is queued when one of them improves
    work = [(c, k) for c in classes for k, n in enumerate(snap.classes[c]) if not n.children]
    queued = set(work)
    while work:
        c, k = work.pop()
        queued.discard((c, k))
        node = snap.classes[c][k]
        if any(child not in best for child in node.children):
            continue
        merged: dict[int, float] = {}
        for child in node.children:
            child_set = best_set[child]
            if len(child_set) > len(merged):
                child_set, merged = merged, dict(child_set)
            merged.update(child_set)
        if c in merged:  # choosing this node would make the class reach itself
            continue
        own = costs[c][k]
        total = own + sum(merged.values())
        if total < best.get(c, math.inf) - 1e-12:
            merged[c] = own
            best[c], best_set[c], choice[c] = total, merged, node
            for parent in parents[c]:
                if parent not in queued:
                    queued.add(parent)
                    work.append(parent)
    return choice


def _choice_cost(snap: Snapshot, choice: dict[int, ENode], roots: list[int], node_cost: NodeCost) -> float:
    """DAG cost of a choice from the roots; inf if it is cyclic or incomplete."""
    try:
        order = topological_order(roots, lambda c: choice[c].children)
    except Unsupported:
        return math.inf
    return sum(node_cost(c, choice[c]) for c in order)


def ilp(
    snap: Snapshot,
    node_cost: NodeCost,
    roots: list[int],
    time_limit_s: float = 30.0,
    start: dict[int, ENode] | None = None,
) -> dict[int, ENode]:
    """The DAG-cost optimum by mixed-integer programming (HiGHS via scipy)."""
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    start = start if start is not None else greedy_dag(snap, node_cost, roots)
    start_cost = _choice_cost(snap, start, roots, node_cost)
    classes = _reachable_classes(snap, roots)
    index = {c: i for i, c in enumerate(classes)}
    nodes: list[tuple[int, ENode]] = []
    for c in classes:
        for node in snap.classes[c]:
            if c not in node.children:  # a node that needs its own class never helps
                nodes.append((c, node))
    n_x, n_t = len(nodes), len(classes)
    big_m = float(n_t)
    cost = np.array([node_cost(c, n) for c, n in nodes] + [0.0] * n_t)
    rows, cols, vals, lo, hi = [], [], [], [], []
    r = 0

    def add_row(entries: list[tuple[int, float]], low: float, high: float) -> None:
        nonlocal r
        for col, val in entries:
            rows.append(r)
            cols.append(col)
            vals.append(val)
        lo.append(low)
        hi.append(high)
        r += 1

    by_class: dict[int, list[int]] = {c: [] for c in classes}
    for j, (c, _) in enumerate(nodes):
        by_class[c].append(j)
    for root in set(roots):  # every root class is computed
        add_row([(j, 1.0) for j in by_class[root]], 1.0, math.inf)
    for c in classes:  # at most one node per class
        if len(by_class[c]) > 1:
            add_row([(j, 1.0) for j in by_class[c]], 0.0, 1.0)
    for j, (c, node) in enumerate(nodes):
        for child in set(node.children):
            # a chosen node needs its child class computed ...
            add_row([(j, -1.0)] + [(k, 1.0) for k in by_class[child]], 0.0, math.inf)
            # ... and earlier in a topological order: t_c - t_child >= 1 - M (1 - x_j)
            add_row([(n_x + index[c], 1.0), (n_x + index[child], -1.0), (j, -big_m)], 1.0 - big_m, math.inf)
    if math.isfinite(start_cost):  # the greedy answer bounds the search
        add_row([(j, cost[j]) for j in range(n_x)], -math.inf, start_cost + 1e-9)
    a = coo_matrix((vals, (rows, cols)), shape=(r, n_x + n_t)).tocsr()
    integrality = np.concatenate([np.ones(n_x), np.zeros(n_t)])
    bounds = Bounds(np.zeros(n_x + n_t), np.concatenate([np.ones(n_x), np.full(n_t, big_m)]))
    t = time.perf_counter()
    res = milp(
        cost,
        constraints=[LinearConstraint(a, lo, hi)],
        integrality=integrality,
        bounds=bounds,
        options={"time_limit": max(time_limit_s, 0.01), "disp": False},
    )
    log.debug("ILP: %d nodes, %d classes, status %s in %.2f s", n_x, n_t, res.status, time.perf_counter() - t)
    if res.x is None:
        return start
    chosen: dict[int, ENode] = {}
    for j, (c, node) in enumerate(nodes):
        if res.x[j] > 0.5:
            chosen[c] = node
    if _choice_cost(snap, chosen, roots, node_cost) < start_cost:
        return chosen
    return start


def extract(
    snap: Snapshot,
    roots: list[int],
    node_cost: NodeCost,
    method: str = "greedy",
    time_limit_s: float = 30.0,
) -> dict[int, ENode]:
    if method == "greedy":
        choice = greedy_tree(snap, node_cost)
    elif method == "dag_greedy":
        choice = greedy_dag(snap, node_cost, roots)
    elif method == "ilp":
        choice = ilp(snap, node_cost, roots, time_limit_s)
    else:
        raise ValueError(f"unknown extractor {method!r}; available: {EXTRACTORS}")
    missing = [r for r in roots if r not in choice]
    if missing:
        raise Unsupported(f"no finite-cost term for e-classes {missing[:5]}")
    return choice


def choice_to_graph(snap: Snapshot, choice: dict[int, ENode], original: TensorGraph) -> TensorGraph:
    """The chosen terms for the original outputs as a TensorGraph (cycle-checked)."""
    roots = [snap.root_of[nid] for _, nid in original.outputs]
    nodes: list[Node] = []
    made: dict[int, int] = {}
    for c in topological_order(roots, lambda c: choice[c].children):
        node = choice[c]
        inputs = tuple(made[k] for k in node.children)
        nodes.append(Node(node.op, node.attrs, inputs, snap.ty[c], snap.is_const[c]))
        made[c] = len(nodes) - 1
    return original.with_nodes(nodes, [(var, made[snap.root_of[nid]]) for var, nid in original.outputs])


def dag_cost(graph: TensorGraph, cost_model) -> float:
    """Total cost of a graph counting each reachable node once."""
    total = 0.0
    for nid in graph.reachable():
        n = graph.nodes[nid]
        in_tys = [graph.nodes[i].ty for i in n.inputs]
        total += cost_model.node_cost(n.op, n.attrs, in_tys, n.ty, n.is_const)
    return total
