"""Extraction: pick one e-node per needed e-class, and read the choice back as a graph.

``greedy`` is the classic tree-cost extractor (each class's best node by its own
cost plus its children's best costs, iterated to a fixed point).  It counts a
shared sub-graph once per use, so the result is always re-costed as a DAG
(each node once) before the pass decides whether to keep it.
"""

from __future__ import annotations

import math
from typing import Callable

from .egraph import ENode, Snapshot
from .graph import Node, TensorGraph, Unsupported

EXTRACTORS = ("greedy",)

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


def extract(snap: Snapshot, roots: list[int], node_cost: NodeCost, method: str = "greedy") -> dict[int, ENode]:
    if method == "greedy":
        choice = greedy_tree(snap, node_cost)
    else:
        raise ValueError(f"unknown extractor {method!r}; available: {EXTRACTORS}")
    missing = [r for r in roots if r not in choice]
    if missing:
        raise Unsupported(f"no finite-cost term for e-classes {missing[:5]}")
    return choice


def choice_to_graph(
    snap: Snapshot, choice: dict[int, ENode], original: TensorGraph
) -> TensorGraph:
    """The chosen terms for the original outputs as a TensorGraph (cycle-checked)."""
    nodes: list[Node] = []
    made: dict[int, int] = {}
    on_stack: set[int] = set()

    def build(cls: int) -> int:
        stack = [(cls, False)]
        while stack:
            c, expanded = stack.pop()
            if c in made:
                continue
            node = choice[c]
            if not expanded:
                if c in on_stack:
                    raise Unsupported("extracted term is cyclic")
                on_stack.add(c)
                stack.append((c, True))
                for child in reversed(node.children):  # first child is emitted first
                    if child not in made:
                        if child in on_stack:
                            raise Unsupported("extracted term is cyclic")
                        stack.append((child, False))
                continue
            on_stack.discard(c)
            inputs = tuple(made[k] for k in node.children)
            nodes.append(Node(node.op, node.attrs, inputs, snap.ty[c], snap.is_const[c]))
            made[c] = len(nodes) - 1
        return made[cls]

    outputs = [(var, build(snap.root_of[nid])) for var, nid in original.outputs]
    return original.with_nodes(nodes, outputs)


def dag_cost(graph: TensorGraph, cost_model) -> float:
    """Total cost of a graph counting each reachable node once."""
    total = 0.0
    for nid in graph.reachable():
        n = graph.nodes[nid]
        in_tys = [graph.nodes[i].ty for i in n.inputs]
        total += cost_model.node_cost(n.op, n.attrs, in_tys, n.ty, n.is_const)
    return total
