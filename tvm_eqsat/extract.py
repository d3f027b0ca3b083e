"""Extraction: pick one e-node per needed e-class, and read the choice back as a graph.

Four extractors, all returning a choice (class -> e-node) for the classes the
roots need, never a cyclic one:

* ``greedy``: the classic tree cost (a class's best node by its own cost plus
  its children's best costs, to a fixed point).  A sub-graph shared by two
  users is counted twice, so merges (two split halves reading one matmul) look
  twice as expensive: kept as the baseline.
* ``dag_greedy``: the cost of a class is the sum over the *set* of classes in
  its best sub-DAG, each counted once.  Classes are settled cheapest first
  (Dijkstra/Knuth order), so every node is costed once, when its last child is
  settled, and the choice is acyclic by construction.
* ``dag_local``: the DAG-greedy answer improved by local search on the true DAG
  cost (shared classes paid once): single switches, and merge moves that make
  a new shared class pay off by switching all its would-be users at once.  A
  merge only pays when several users share the merged node, which is exactly
  what a greedy that costs one class at a time cannot see.  Fast enough to be
  called many times (a search's reward); never worse than ``dag_greedy``.
* ``ilp``: the exact optimum of the DAG cost as a mixed-integer program solved by
  HiGHS: one binary per e-node, child-class constraints, ordering variables for
  acyclicity, a wall-clock limit, and ``dag_local``'s answer as the first
  incumbent (the cut-off) and the answer when the solver stops without a better
  one.  The problem is shrunk first (negligible-cost sub-graphs such as
  weights fixed, dominated nodes dropped, single-use classes folded into their
  reader, ordering only inside strongly connected components).
"""

from __future__ import annotations

import functools
import gc
import heapq
import itertools
import logging
import math
import time
from collections.abc import Callable

import numpy as np

from . import fusion
from .cost import EPSILON_US
from .egraph import ENode, Snapshot
from .graph import Node, TensorGraph, Unsupported, topological_order

log = logging.getLogger("tvm_eqsat")

EXTRACTORS = ("greedy", "dag_greedy", "dag_local", "ilp")

NodeCost = Callable[[int, ENode], float]  # (class id, e-node) -> cost

# A class computable from leaves through nodes this cheap counts as free: the cost
# models charge EPSILON_US for what folds at compile time, views and inputs.
FREE_COST = 10 * EPSILON_US


def gc_paused(fn):
    """Run fn with the cyclic garbage collector paused.

    The extractors allocate many small objects, which triggers collections; in a
    process holding TVM and torch a full collection takes 0.1-0.3 s, more than
    extracting a 2k-node e-graph.  The extractors make no reference cycles.
    """

    @functools.wraps(fn)
    def paused(*args, **kwargs):
        enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if enabled:
                gc.enable()

    return paused


def lone_reshape_costs(snap: Snapshot, roots: list[int], cost_model) -> dict[tuple[int, ENode], float]:
    """What the reshapes FuseOps leaves alone cost where the build copies them
    (``fusion.lone_reshape_nodes``, ``reshape_copy_us``); empty where they stay views."""
    if not getattr(cost_model, "copies_lone_reshapes", False):
        return {}
    return {
        (c, node): cost_model.reshape_copy_us(snap.ty[node.children[0]], snap.ty[c])
        for c, node in fusion.lone_reshape_nodes(snap, roots)
    }


def snapshot_node_cost(snap: Snapshot, cost_model, roots: list[int] | None = None) -> NodeCost:
    """Cost of an e-node from the e-graph analyses of its class and children (with
    ``roots``, a reshape FuseOps leaves alone as what the build makes of it)."""
    lone = lone_reshape_costs(snap, roots, cost_model) if roots is not None else {}

    def cost(cls: int, node: ENode) -> float:
        if lone and (cls, node) in lone:
            return lone[(cls, node)]
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


class ClassGraph:
    """The e-graph below the roots as flat lists (costs computed once), shared by the DAG extractors.

    ``kids[c][k]`` are the distinct child classes of node k of class c; a node that
    needs its own class, or costs infinitely much (a form the caller rules out), is never
    usable and is left out of ``parents``.
    """

    def __init__(self, snap: Snapshot, node_cost: NodeCost, roots: list[int]) -> None:
        n = len(snap.classes)
        self.snap = snap
        self.roots = list(dict.fromkeys(roots))
        self.classes = _reachable_classes(snap, self.roots)
        self.cost: list[list[float]] = [[] for _ in range(n)]
        self.kids: list[list[tuple[int, ...]]] = [[] for _ in range(n)]
        self.parents: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        for c in self.classes:
            for k, node in enumerate(snap.classes[c]):
                kids = tuple(dict.fromkeys(node.children))
                self.cost[c].append(node_cost(c, node))
                self.kids[c].append(kids)
                if self.usable(c, k):
                    for d in kids:
                        self.parents[d].append((c, k))

    def usable(self, c: int, k: int) -> bool:
        return c not in self.kids[c][k] and self.cost[c][k] < math.inf

    def choice(self, index: dict[int, int]) -> dict[int, ENode]:
        return {c: self.snap.classes[c][k] for c, k in index.items()}


def _bits_cost(bits: int, own: list[float], own_np: np.ndarray, nbytes: int) -> float:
    """Sum of ``own`` over the classes in a bit set (a Python int)."""
    if bits.bit_count() <= 32:
        total = 0.0
        while bits:
            low = bits & -bits
            total += own[low.bit_length() - 1]
            bits ^= low
        return total
    mask = np.unpackbits(np.frombuffer(bits.to_bytes(nbytes, "little"), np.uint8), bitorder="little")
    return float(own_np[np.flatnonzero(mask)].sum())


def greedy_dag_start(g: ClassGraph) -> tuple[dict[int, int], dict[int, float]]:
    """DAG-greedy on a ClassGraph: (class -> node index, class -> DAG cost of its sub-DAG).

    Sub-DAGs are bit sets of classes.  A node is costed once, when its last child
    class is settled: own cost plus the union of its children's sets, each class
    paid once.  The unsettled class with the cheapest offer is settled next; its
    set only holds classes settled before it, so no choice can reach its own class.
    """
    n = len(g.snap.classes)
    nbytes = (n + 7) // 8
    own = [0.0] * n
    own_np = np.zeros(n)
    bits: dict[int, int] = {}
    best: dict[int, float] = {}
    choice: dict[int, int] = {}
    offered: dict[int, float] = {}
    pending: dict[tuple[int, int], int] = {}
    heap: list = []
    order = itertools.count()

    def offer(c: int, k: int) -> None:
        kids = sorted(g.kids[c][k], key=lambda d: -best[d])
        sub, total = 0, 0.0
        if kids:
            sub, total = bits[kids[0]], best[kids[0]]
            for d in kids[1:]:
                extra = bits[d] & ~sub
                if extra:
                    total += _bits_cost(extra, own, own_np, nbytes)
                    sub |= extra
        total += g.cost[c][k]
        if total < offered.get(c, math.inf):
            offered[c] = total
            heapq.heappush(heap, (total, next(order), c, k, sub))

    for c in g.classes:
        for k, kids in enumerate(g.kids[c]):
            if not g.usable(c, k):
                continue
            if kids:
                pending[(c, k)] = len(kids)
            else:
                offer(c, k)
    while heap:
        total, _, c, k, sub = heapq.heappop(heap)
        if c in choice:
            continue
        choice[c], best[c], bits[c] = k, total, sub | (1 << c)
        own[c] = own_np[c] = g.cost[c][k]
        for parent in g.parents[c]:
            pending[parent] -= 1
            if pending[parent] == 0 and parent[0] not in choice:
                offer(*parent)
    return choice, best


@gc_paused
def greedy_dag(snap: Snapshot, node_cost: NodeCost, roots: list[int]) -> dict[int, ENode]:
    """Best node per class under DAG cost: each class in a sub-DAG is paid once."""
    g = ClassGraph(snap, node_cost, roots)
    return g.choice(greedy_dag_start(g)[0])


def components(classes, kids_of) -> dict[int, int]:
    """Strongly connected components (iterative Tarjan): class -> component id.

    A cycle can only run inside one component, so acyclicity needs checking
    (local search) or ordering variables (ILP) there only.  The keys come in
    Tarjan's completion order: a class after every class it reaches outside its
    own component.
    """
    index: dict[int, int] = {}
    low: dict[int, int] = {}
    comp: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    counter = itertools.count()
    for start in classes:
        if start in index:
            continue
        index[start] = low[start] = next(counter)
        stack.append(start)
        on_stack.add(start)
        work = [(start, iter(kids_of(start)))]
        while work:
            c, it = work[-1]
            advanced = False
            for d in it:
                if d not in index:
                    index[d] = low[d] = next(counter)
                    stack.append(d)
                    on_stack.add(d)
                    work.append((d, iter(kids_of(d))))
                    advanced = True
                    break
                if d in on_stack:
                    low[c] = min(low[c], index[d])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[c])
            if low[c] == index[c]:
                while True:
                    d = stack.pop()
                    on_stack.discard(d)
                    comp[d] = c
                    if d == c:
                        break
    return comp


class _LocalSearch:
    """A choice for every class, the DAG it induces from the roots, and moves on it.

    ``users[c]`` counts the roots and pins at c plus the classes in the DAG whose
    chosen node reads c; c is in the DAG iff it is positive, and ``total`` is the
    DAG cost.  A switch updates both incrementally (only the sub-DAG that enters
    or leaves is visited), refuses to close a cycle, and is logged so that a
    move that does not pay can be undone.
    """

    def __init__(self, g: ClassGraph, choice: dict[int, int], best: dict[int, float]) -> None:
        n = len(g.snap.classes)
        self.g = g
        self.best = best
        self.choice = [-1] * n
        for c, k in choice.items():
            self.choice[c] = k
        # the nodes a class may switch to: not reading itself, every child has a term
        self.options = [[] for _ in range(n)]
        for c in g.classes:
            self.options[c] = [
                k for k, kids in enumerate(g.kids[c]) if g.usable(c, k) and all(self.choice[d] >= 0 for d in kids)
            ]
        self.users = [0] * n
        self.total = 0.0
        self.log: list[tuple[int, int]] = []  # (class, previous node) per switch, to undo a move
        self.touched: list[int] = []  # classes that switched or entered/left the DAG (kept moves only)
        kids_of = lambda c: [d for k, kids in enumerate(g.kids[c]) if g.usable(c, k) for d in kids]  # noqa: E731
        self.comp = components(g.classes, kids_of)
        sizes: dict[int, int] = {}
        for c in g.classes:
            sizes[self.comp[c]] = sizes.get(self.comp[c], 0) + 1
        self.cyclic = {c for c in g.classes if sizes[self.comp[c]] > 1}
        # a merge needs a class that nodes of two or more classes read
        self.anchors = [c for c in g.classes if len({p for p, _ in g.parents[c]}) > 1]
        for r in g.roots:
            self.add(r)
        self.tol = 1e-10 * max(1.0, abs(self.total))

    # ---- the DAG and its cost
    def add(self, c: int) -> None:
        stack = [c]
        while stack:
            c = stack.pop()
            self.users[c] += 1
            if self.users[c] == 1:
                k = self.choice[c]
                self.total += self.g.cost[c][k]
                self.touched.append(c)
                stack.extend(self.g.kids[c][k])

    def remove(self, c: int) -> None:
        stack = [c]
        while stack:
            c = stack.pop()
            self.users[c] -= 1
            if self.users[c] == 0:
                k = self.choice[c]
                self.total -= self.g.cost[c][k]
                self.touched.append(c)
                stack.extend(self.g.kids[c][k])

    def _closes_cycle(self, c: int) -> bool:
        if c not in self.cyclic:
            return False
        comp, seen = self.comp[c], set()
        stack = list(self.g.kids[c][self.choice[c]])
        while stack:
            d = stack.pop()
            if d == c:
                return True
            if d not in seen and self.comp.get(d) == comp:
                seen.add(d)
                stack.extend(self.g.kids[d][self.choice[d]])
        return False

    def _set(self, c: int, k: int) -> None:
        old, self.choice[c] = self.choice[c], k
        self.touched.append(c)
        if self.users[c]:
            for d in self.g.kids[c][k]:
                self.add(d)
            for d in self.g.kids[c][old]:
                self.remove(d)
            self.total += self.g.cost[c][k] - self.g.cost[c][old]

    def switch(self, c: int, k: int) -> bool:
        """Choose node k for class c unless that closes a cycle."""
        old, self.choice[c] = self.choice[c], k
        cycle = self._closes_cycle(c)
        self.choice[c] = old
        if cycle:
            return False
        self.log.append((c, old))
        self._set(c, k)
        return True

    def begin(self) -> tuple[int, float, int]:
        """A mark to undo to: where the log, the cost and the touched list stand."""
        return len(self.log), self.total, len(self.touched)

    def undo(self, mark: tuple[int, float, int]) -> None:
        while len(self.log) > mark[0]:
            self._set(*self.log.pop())
        self.total = mark[1]
        del self.touched[mark[2] :]

    def keep_if_better(self, mark: tuple[int, float, int]) -> bool:
        if self.total < mark[1] - self.tol:
            del self.log[mark[0] :]
            return True
        self.undo(mark)
        return False

    # ---- moves
    def switch_sweep(self, deadline: float) -> bool:
        """Try every other node of every class in the DAG; keep what lowers the DAG cost."""
        g, improved = self.g, False
        for c in g.classes:
            if not self.users[c] or len(g.kids[c]) < 2:
                continue
            if time.perf_counter() > deadline:
                break
            for k in self.options[c]:
                cur = self.choice[c]
                if k == cur or not self.users[c]:
                    continue
                # nothing below the current node would be freed, and k is not cheaper itself
                if g.cost[c][k] >= g.cost[c][cur] and all(self.users[d] > 1 for d in g.kids[c][cur]):
                    continue
                mark = self.begin()
                self.switch(c, k)
                improved |= self.keep_if_better(mark)
        return improved

    def _cone(self, x: int, depth: int = 4, limit: int = 64) -> tuple[list[int], list[tuple[int, int]]]:
        """Classes above x not in the DAG (nearest first), and the nodes of DAG classes that read them."""
        cone, seen, level, moves = [x], {x}, [x], []
        for _ in range(depth):
            above = []
            for c in level:
                for p, k in self.g.parents[c]:
                    if self.users[p]:
                        moves.append((p, k))
                    elif p not in seen and self.choice[p] >= 0:
                        seen.add(p)
                        above.append(p)
            cone.extend(above)
            level = above
            if not level or len(cone) > limit:
                break
        return cone, list(dict.fromkeys(moves))

    def _freed(self, users) -> float:
        """What the DAG loses if these classes drop their current nodes: a bound on what a move can save."""
        before, touched = self.total, len(self.touched)
        nodes = [(p, self.choice[p]) for p in users]
        for p, k in nodes:
            for d in self.g.kids[p][k]:
                self.remove(d)
        freed = before - self.total + sum(self.g.cost[p][k] for p, k in nodes)
        for p, k in nodes:
            for d in self.g.kids[p][k]:
                self.add(d)
        self.total = before
        del self.touched[touched:]
        return freed

    def merge_sweep(self, deadline: float, near: set[int] | None = None) -> bool:
        """Merge moves: pay for a class x not in the DAG once, then switch every class that can use it.

        The classes between x and its users take their cheapest node given that x is
        paid; each user switches to its cheapest node reading them; users that do
        better back on their old node return to it; the move is kept if the DAG
        cost drops.  Skipped when all the users could free does not pay for x, and,
        given ``near``, when none of x, its children, the cone or the users is in it
        (a move that did not pay last round will not pay if nothing near it changed).
        """
        g, improved = self.g, False
        for x in self.anchors:
            if self.users[x] or self.choice[x] < 0:
                continue
            if time.perf_counter() > deadline:
                break
            cone, moves = self._cone(x)
            options: dict[int, list[int]] = {}
            for p, k in moves:
                if k != self.choice[p] and k in self.options[p]:
                    options.setdefault(p, []).append(k)
            if len(options) < 2:
                continue
            if near is not None and near.isdisjoint(itertools.chain(cone, options, g.kids[x][self.choice[x]])):
                continue
            mark = self.begin()
            before = self.total
            self.add(x)  # pinned: paid whether or not anything uses it yet
            pin = self.total - before
            if pin <= FREE_COST or self._freed(options) <= pin + self.tol:  # free: single switches do it
                self.remove(x)
                self.undo(mark)  # nothing switched: restores the cost, forgets the pin
                continue
            extra = {x: 0.0}  # cost to bring a cone class into the DAG, given x is paid

            def price(c: int, k: int) -> float:
                return g.cost[c][k] + sum(
                    extra.get(d, 0.0 if self.users[d] else self.best.get(d, math.inf)) for d in g.kids[c][k]
                )

            for c in cone[1:]:
                k = min(self.options[c], key=lambda k: price(c, k))
                if k == self.choice[c] or self.switch(c, k):
                    extra[c] = price(c, self.choice[c])
            old = {p: self.choice[p] for p in options}
            for p, ks in options.items():
                self.switch(p, min(ks, key=lambda k: price(p, k)))
            for p, k in old.items():  # users that do better on their old node go back
                if self.choice[p] != k:
                    step = self.begin()
                    if self.switch(p, k) and self.total >= step[1] - self.tol:
                        self.undo(step)  # otherwise kept in the log: the whole move may still be undone
            self.remove(x)
            improved |= self.keep_if_better(mark)
        return improved


def improve(g: ClassGraph, start: dict[int, int], best: dict[int, float], time_limit_s: float, max_rounds: int = 8):
    """Local search from a DAG-greedy choice (class -> node index) until no move pays or time is up."""
    deadline = time.perf_counter() + time_limit_s
    if any(r not in start for r in g.roots):
        return start
    search = _LocalSearch(g, start, best)
    first, near = search.total, None
    for rounds in range(1, max_rounds + 1):  # noqa: B007 (logged after the loop)
        search.touched.clear()
        improved = search.switch_sweep(deadline)
        improved |= search.merge_sweep(deadline, near)
        if not improved or time.perf_counter() > deadline:
            break
        near = set(search.touched)
    choice = {c: search.choice[c] for c in start}
    try:  # the moves keep the choice acyclic; checked once more because the pass depends on it
        topological_order(g.roots, lambda c: g.kids[c][choice[c]])
    except Unsupported:
        log.warning("dag_local produced a cyclic choice; using the DAG-greedy answer")
        return start
    log.debug("dag_local: DAG cost %.6g -> %.6g in %d rounds", first, search.total, rounds)
    return choice


@gc_paused
def dag_local(snap: Snapshot, node_cost: NodeCost, roots: list[int], time_limit_s: float = 1.0) -> dict[int, ENode]:
    """DAG-greedy, then local search on the DAG cost until no move pays (or the time is up)."""
    t = time.perf_counter()
    g = ClassGraph(snap, node_cost, roots)
    start, best = greedy_dag_start(g)
    return g.choice(improve(g, start, best, time_limit_s - (time.perf_counter() - t)))


def choice_cost(snap: Snapshot, choice: dict[int, ENode], roots: list[int], node_cost: NodeCost) -> float:
    """DAG cost of a choice from the roots; inf if it is cyclic or incomplete."""
    try:
        order = topological_order(roots, lambda c: choice[c].children)
    except Unsupported:
        return math.inf
    return sum(node_cost(c, choice[c]) for c in order)


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
    elif method == "dag_local":
        choice = dag_local(snap, node_cost, roots, time_limit_s)
    elif method == "ilp":
        from .ilp import ilp

        choice = ilp(snap, node_cost, roots, time_limit_s)
    else:
        raise ValueError(f"unknown extractor {method!r}; available: {EXTRACTORS}")
    missing = [r for r in roots if r not in choice]
    if missing:
        raise Unsupported(f"no finite-cost term for e-classes {missing[:5]}")
    return choice


def _chosen_classes(snap: Snapshot, choice: dict[int, ENode], original: TensorGraph) -> list[int]:
    """The classes the chosen terms for the original outputs reach, children first: the
    rebuilt graph's node ids, in order."""
    roots = [snap.root_of[nid] for _, nid in original.outputs]
    return topological_order(roots, lambda c: choice[c].children)


def choice_to_graph(snap: Snapshot, choice: dict[int, ENode], original: TensorGraph) -> TensorGraph:
    """The chosen terms for the original outputs as a TensorGraph (cycle-checked)."""
    nodes: list[Node] = []
    made: dict[int, int] = {}
    for c in _chosen_classes(snap, choice, original):
        node = choice[c]
        inputs = tuple(made[k] for k in node.children)
        nodes.append(Node(node.op, node.attrs, inputs, snap.ty[c], snap.is_const[c]))
        made[c] = len(nodes) - 1
    return original.with_nodes(nodes, [(var, made[snap.root_of[nid]]) for var, nid in original.outputs])


def chosen_enodes(snap: Snapshot, choice: dict[int, ENode], original: TensorGraph) -> list[tuple[int, ENode]]:
    """(e-class, e-node) of each node of ``choice_to_graph``'s graph, by node id: where a
    node of the extracted graph came from in the e-graph."""
    return [(c, choice[c]) for c in _chosen_classes(snap, choice, original)]


def rewrite_sites(snap: Snapshot, choice: dict[int, ENode], original: TensorGraph) -> list[tuple[int, int]]:
    """(original node, node of ``choice_to_graph``'s graph) for each e-class that both
    graphs compute but where the choice is another e-node than the original's (another
    op, attributes or input classes): where the rewrite claims an equality, so where
    translation validation checks values, not only at the outputs."""
    made = {c: i for i, c in enumerate(_chosen_classes(snap, choice, original))}
    sites = []
    for nid in original.reachable():
        c = snap.root_of.get(nid)
        if c not in made:
            continue
        chosen = choice[c]
        if (chosen.op, chosen.attrs, chosen.children) != loaded_enode(snap, original.nodes[nid]):
            sites.append((nid, made[c]))
    return sites


def loaded_enode(snap: Snapshot, node: Node) -> tuple:
    """(op, attributes, input e-classes) of a node of the graph the e-graph was loaded from:
    the e-node it is in the snapshot."""
    return node.op, node.attrs, tuple(snap.root_of.get(i) for i in node.inputs)


def dag_cost(graph: TensorGraph, cost_model) -> float:
    """Total cost of a graph counting each reachable node once; a strided slice that
    FuseOps fuses into its readers costs nothing of its own, a reshape it leaves alone what
    the build makes of it (``fusion``)."""
    total = 0.0
    free = fusion.fused_slices(graph)
    lone = fusion.lone_reshapes(graph) if getattr(cost_model, "copies_lone_reshapes", False) else set()
    for nid in graph.reachable():
        if nid in free:
            total += EPSILON_US
            continue
        n = graph.nodes[nid]
        in_tys = [graph.nodes[i].ty for i in n.inputs]
        if nid in lone:
            total += cost_model.reshape_copy_us(in_tys[0], n.ty)
        else:
            total += cost_model.node_cost(n.op, n.attrs, in_tys, n.ty, n.is_const)
    return total
