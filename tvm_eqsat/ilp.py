"""Exact DAG extraction: a mixed-integer program solved by HiGHS.

One binary per e-node (or chain of e-nodes after shrinking), a row per root, per
class (at most one node) and per child (a chosen node needs its children), and
ordering variables that forbid cycles, only inside strongly connected components.
The start (``dag_local``'s answer) is handed to HiGHS as its first incumbent
(``highspy``'s ``setSolution``; scipy's ``milp`` takes none), so the solver spends
its time on the bound, and is returned when the solver finds nothing better.
"""

from __future__ import annotations

import logging
import math
import time

import numpy as np

from .egraph import ENode, Snapshot
from .extract import FREE_COST, ClassGraph, NodeCost, choice_cost, components, gc_paused, greedy_dag_start, improve
from .graph import Unsupported, topological_order

log = logging.getLogger("tvm_eqsat")


class _IlpNode:
    """One binary of the ILP: an e-node, or a chain of them after collapsing single-use classes."""

    __slots__ = ("cls", "cost", "kids", "members")

    def __init__(self, cls: int, cost: float, kids: set[int], members: list[tuple[int, int]]) -> None:
        self.cls, self.cost, self.kids, self.members = cls, cost, kids, members


def _ilp_nodes(g: ClassGraph, productive: set[int], shrink: bool) -> tuple[list[_IlpNode], dict[int, int]]:
    """The ILP's nodes, and the classes fixed outside it (class -> node index).

    Without ``shrink``: every usable node of every class below the roots.  With it:
    1. free classes (computable from leaves through nodes of cost <= FREE_COST:
       inputs, weights and what folds from them) are fixed and drop out;
    2. nodes reading a class with no acyclic term are dropped;
    3. a node is dropped when another node of its class costs no more and reads a
       subset of its children (any solution can swap one for the other);
    4. classes no longer reachable from the roots are dropped;
    5. a class with one node is folded into the nodes that read it when there is
       one reader (it is computed exactly when its reader is) or when the node is
       free (a split, a tuple item: paying it once per reader costs nothing).
    """
    if not shrink:
        nodes = [
            _IlpNode(c, g.cost[c][k], set(kids), [(c, k)])
            for c in g.classes
            for k, kids in enumerate(g.kids[c])
            if g.usable(c, k)
        ]
        return nodes, {}
    free: dict[int, int] = {}
    changed = True
    while changed:
        changed = False
        for c in g.classes:
            if c in free:
                continue
            for k, kids in enumerate(g.kids[c]):
                if g.cost[c][k] <= FREE_COST and g.usable(c, k) and all(d in free for d in kids):
                    free[c] = k
                    changed = True
                    break
    by_class: dict[int, list[_IlpNode]] = {}
    for c in g.classes:
        if c in free:
            continue
        options = []
        for k, kids in enumerate(g.kids[c]):
            if g.usable(c, k) and all(d in productive for d in kids):
                options.append(_IlpNode(c, g.cost[c][k], {d for d in kids if d not in free}, [(c, k)]))
        kept = []  # drop dominated nodes (ties: the earlier node stays)
        for i, a in enumerate(options):
            if not any(
                b.cost <= a.cost and b.kids <= a.kids and (b.cost < a.cost or b.kids < a.kids or j < i)
                for j, b in enumerate(options)
                if j != i
            ):
                kept.append(a)
        by_class[c] = kept
    roots = [r for r in g.roots if r not in free]
    seen, stack = set(roots), list(roots)  # reachable through the kept nodes
    while stack:
        for node in by_class[stack.pop()]:
            for d in node.kids - seen:
                seen.add(d)
                stack.append(d)
    by_class = {c: by_class[c] for c in seen}
    readers: dict[int, set[int]] = {c: set() for c in by_class}
    nodes: dict[int, _IlpNode] = {}
    for nodes_of_c in by_class.values():
        for node in nodes_of_c:
            nodes[id(node)] = node
            for d in node.kids:
                readers[d].add(id(node))
    work, root_set = list(by_class), set(roots)
    while work:
        s = work.pop()
        if s in root_set or s not in by_class or len(by_class[s]) != 1 or not readers[s]:
            continue
        (single,) = by_class[s]
        if len(readers[s]) > 1 and single.cost > FREE_COST:
            continue
        targets = [nodes[r] for r in readers[s]]
        if any(reader.cls in single.kids for reader in targets):
            continue
        for d in single.kids:
            readers[d].discard(id(single))
            readers[d].update(id(reader) for reader in targets)
            work.append(d)
        for reader in targets:
            reader.kids = (reader.kids - {s}) | single.kids
            reader.cost += single.cost
            reader.members = reader.members + single.members
        del by_class[s], readers[s], nodes[id(single)]
    return [node for nodes_of_c in by_class.values() for node in nodes_of_c], free


# Seconds the solver may run without finding a better graph, since its start or its last
# improvement, before it stops.  Where the relaxation is weak (every tensor in two layouts, each
# the other's permutation: a cycle the LP can half-take both ways; and readers in alternative
# forms of one tensor that share a child, which the LP pays for once at a fraction), HiGHS spends
# its whole budget on the bound: small squeezenet, inception-v3 and mobilenet-v2, default flow
# with the nhwc family, all 30 s to the time limit with the start as the answer (gaps 92%, 3%,
# 52%); full NASRNN, tuned flow, the same at 33 s.  Every improvement it found on these and the
# other small models came in under 2 s (2026-11-25, /tmp traces of HiGHS's improving-solution
# callback).  Until 2026-12-05 the clock stopped counting at the first improvement, so a solve
# that improved once ran to the pass's time limit: full-size squeezenet, Xeon tuned flow, 26 s
# of its 27.6 s pass, its one improvement (0.55%) at 1.2 s and nothing better in 60 s; now a
# 9.2 s pass, the same module (`bench_extract.py --from-pass`, docs/rules.md).
STALL_S = 5.0

# HiGHS's presolve modes: its default (0), and "light" (2), without probing.  The probing of
# the default presolve is where a solve can spend its time before the stall rule can act (the
# rule acts in the branch and bound): on the e-graph of three sibling stride-2 convs with every
# family loaded (tests/test_soundness.py's merge test; 3,061 binaries, 8,273 rows) presolve
# took 29.5 s, then the start was returned; light, 0.16 s, then the same start after 5 s.  On
# the e-graphs the pass extracts from (seven full-size models, the Xeon's tuned flow,
# 2026-12-07, bench_extract.py --from-pass, other work running) light found the graphs the
# default had found (extract-pass-llvm-emeraldrapids-tuned.csv, none better than its start) and
# stopped no sooner, so the pass keeps the default and ``forms.rewritten_form`` (the fuzzer's and the
# tests' extraction) uses light.
PRESOLVE_DEFAULT, PRESOLVE_LIGHT = 0, 2


class StallWatch:
    """When to give up on a solve: ``stall_s`` seconds after the start or the last solution
    better than the best so far (the start's ``best`` cost)."""

    def __init__(self, best: float, stall_s: float) -> None:
        self.best, self.stall_s, self.last_s, self.improvements = best, stall_s, 0.0, 0
        self.interrupted = False  # set by the solver callback that acted on ``stalled``

    def found(self, value: float, now_s: float) -> None:
        """A solution of cost ``value`` at ``now_s`` seconds into the solve."""
        if value < self.best * (1 - 1e-9) - 1e-12:
            self.best, self.last_s = value, now_s
            self.improvements += 1

    def stalled(self, now_s: float) -> bool:
        return now_s - self.last_s > self.stall_s


def _stall_stop(h, start_cost: float, stall_s: float) -> StallWatch:
    """Interrupt the solve once ``stall_s`` seconds have passed without a solution better than
    the best so far.  Returns the watch."""
    import highspy

    kinds = highspy.cb.HighsCallbackType
    watch = StallWatch(start_cost, stall_s)
    t0 = time.perf_counter()

    def callback(kind, _message, data_out, data_in, _user):
        if kind == kinds.kCallbackMipImprovingSolution:
            watch.found(data_out.objective_function_value, time.perf_counter() - t0)
        elif kind == kinds.kCallbackMipInterrupt and watch.stalled(time.perf_counter() - t0):
            watch.interrupted = True
            data_in.user_interrupt = True

    h.setCallback(callback, None)
    h.startCallback(kinds.kCallbackMipImprovingSolution)
    h.startCallback(kinds.kCallbackMipInterrupt)
    return watch


def _solve(cost, a, lo, hi, n_x, upper, time_limit_s, x0, rel_gap, stall_s=math.inf, presolve=PRESOLVE_DEFAULT):
    """Solve the MILP with HiGHS, starting from ``x0`` when given: (x or None, outcome).
    With a start, the solve stops once ``stall_s`` seconds pass without a better solution."""
    import highspy

    csc = a.tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = csc.shape[1], csc.shape[0]
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = cost, np.zeros(len(cost)), upper
    lp.row_lower_, lp.row_upper_ = np.asarray(lo, float), np.asarray(hi, float)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = csc.shape[1], csc.shape[0]
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = csc.indptr, csc.indices, csc.data
    lp.integrality_ = [highspy.HighsVarType.kInteger] * n_x + [highspy.HighsVarType.kContinuous] * (len(cost) - n_x)
    h = highspy._Highs()  # the binding's core class: highspy.Highs() prints a banner when made
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", max(time_limit_s, 0.01))
    h.setOptionValue("mip_rel_gap", rel_gap)
    h.setOptionValue("presolve_mode", presolve)
    h.passModel(lp)
    watch = None
    if x0 is not None:
        start = highspy.HighsSolution()
        start.col_value, start.value_valid = list(x0), True
        h.setSolution(start)
        if math.isfinite(stall_s):
            watch = _stall_stop(h, float(np.dot(cost, x0)), stall_s)
    h.run()
    status, info, solution = h.getModelStatus(), h.getInfo(), h.getSolution()
    x = np.asarray(solution.col_value) if solution.value_valid else None
    outcome = {
        "status": h.modelStatusToString(status),
        "gap": info.mip_gap,
        "bound": info.mip_dual_bound,
        "warm_start": x0 is not None,
    }
    if watch is not None:
        outcome["stalled"], outcome["improvements"] = watch.interrupted, watch.improvements
    return x, outcome


@gc_paused
def ilp(
    snap: Snapshot,
    node_cost: NodeCost,
    roots: list[int],
    time_limit_s: float = 30.0,
    start: dict[int, ENode] | None = None,
    shrink: bool = True,
    info: dict | None = None,
    rel_gap: float = 1e-4,
    stall_s: float = STALL_S,
    presolve: int = PRESOLVE_DEFAULT,
) -> dict[int, ENode]:
    """The DAG-cost optimum by mixed-integer programming (HiGHS).

    The solver stops once its answer is within ``rel_gap`` of its bound (HiGHS's
    default 1e-4: optimal for our purposes; 1e-2 is much faster on large e-graphs),
    or after ``stall_s`` seconds without a better solution than the best so far (see ``STALL_S``).
    ``presolve`` is HiGHS's presolve mode (``PRESOLVE_DEFAULT`` or ``PRESOLVE_LIGHT``).

    The start (by default ``dag_local``'s answer) is the solver's first
    incumbent, and what comes back when the solver finds nothing better in time.
    ``info``, when given, is filled with the problem size and the solver's outcome.
    """
    from scipy.sparse import coo_matrix

    deadline = time.perf_counter() + time_limit_s
    g = ClassGraph(snap, node_cost, roots)
    greedy, best = greedy_dag_start(g)
    if start is None:
        start = g.choice(improve(g, greedy, best, min(1.0, time_limit_s / 10)))
    start_cost = choice_cost(snap, start, roots, node_cost)
    nodes, fixed = _ilp_nodes(g, set(greedy), shrink)
    classes = sorted({node.cls for node in nodes})
    n_x = len(nodes)
    by_class: dict[int, list[int]] = {c: [] for c in classes}
    for j, node in enumerate(nodes):
        by_class[node.cls].append(j)
    # ordering variables (acyclicity) only where a cycle is possible: inside a component
    if shrink:
        comp = components(classes, lambda c: [d for j in by_class[c] for d in nodes[j].kids if d in by_class])
        sizes: dict[int, int] = {}
        for c in classes:
            sizes[comp[c]] = sizes.get(comp[c], 0) + 1
        ordered = [c for c in classes if sizes[comp[c]] > 1]
    else:
        comp, ordered = {c: 0 for c in classes}, classes
    order = {c: n_x + i for i, c in enumerate(ordered)}
    n_t = len(ordered)
    big_m = float(max(n_t, 1))
    cost = np.array([node.cost for node in nodes] + [0.0] * n_t)
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

    infeasible = False
    for root in set(roots) - set(fixed):  # every root class is computed
        if root not in by_class:
            infeasible = True
            break
        add_row([(j, 1.0) for j in by_class[root]], 1.0, math.inf)
    for c in classes:  # at most one node per class
        if len(by_class[c]) > 1:
            add_row([(j, 1.0) for j in by_class[c]], 0.0, 1.0)
    for j, node in enumerate(nodes):
        for child in node.kids:
            # a chosen node needs its child class computed ...
            add_row([(j, -1.0)] + [(k, 1.0) for k in by_class.get(child, [])], 0.0, math.inf)
            # ... and earlier in a topological order: t_c - t_child >= 1 - M (1 - x_j)
            if node.cls in order and comp.get(child) == comp[node.cls]:
                add_row([(order[node.cls], 1.0), (order[child], -1.0), (j, -big_m)], 1.0 - big_m, math.inf)
    # two nodes that read each other's class never both hold (x_j + x_k <= 1): implied by
    # the ordering rows for integral x, but those rows, relaxed, let both forms of a tensor
    # pay for each other (the layout rules give every tensor a form that is the other's
    # permutation).  Small mobilenet-v2, default flow, every family: without these rows the
    # solver stops at its 30 s limit with a 27% gap; with them it proves the optimum in
    # 22 s.  (Requiring the other class to be computed by a third node, a stronger cut on
    # paper, left a 50% gap.)
    readers: dict[tuple[int, int], set[int]] = {}
    for j, node in enumerate(nodes):
        for child in node.kids:
            if node.cls in order and comp.get(child) == comp[node.cls] and child != node.cls:
                readers.setdefault((node.cls, child), set()).add(j)
    for (a, b), js in readers.items():
        if a < b:
            for j in js:
                for k in readers.get((b, a), ()):
                    add_row([(j, 1.0), (k, 1.0)], -math.inf, 1.0)
    stats = {"ilp_nodes": n_x, "ilp_classes": len(classes), "ilp_rows": r, "fixed_classes": len(fixed)}
    x, t = None, time.perf_counter()
    if n_x and not infeasible:
        a = coo_matrix((vals, (rows, cols)), shape=(r, n_x + n_t)).tocsr()
        x0 = _start_vector(start, roots, nodes, by_class, order, n_t, a, lo, hi)
        upper = np.concatenate([np.ones(n_x), np.full(n_t, big_m)])
        x, outcome = _solve(cost, a, lo, hi, n_x, upper, deadline - t, x0, rel_gap, stall_s, presolve)
        stats.update(outcome)
    stats["solve_s"] = round(time.perf_counter() - t, 3)
    log.debug("ILP: %s", stats)
    if info is not None:
        info.update(stats)
    chosen_index = dict(fixed)
    if x is not None:
        for j, node in enumerate(nodes):
            if x[j] > 0.5:
                chosen_index.update(node.members)
    chosen = g.choice(chosen_index)
    if choice_cost(snap, chosen, roots, node_cost) < start_cost:
        return chosen
    return start


def _start_vector(start, roots, nodes, by_class, order, n_t, a, lo, hi):
    """The start as a solution of the ILP, or None where it is not one.

    A class of the start's DAG takes a column whose child classes are all in the
    start's DAG (its own node, or what replaced it when shrinking), the cheapest.
    """
    try:
        live = topological_order(roots, lambda c: start[c].children)
    except Unsupported:
        return None
    rank = {c: i for i, c in enumerate(live)}
    x0 = np.zeros(len(nodes) + n_t)
    for c in live:
        if c not in by_class:
            continue
        fits = [j for j in by_class[c] if all(d in rank and rank[d] < rank[c] for d in nodes[j].kids)]
        if not fits:
            return None
        x0[min(fits, key=lambda j: nodes[j].cost)] = 1.0
    for i, c in enumerate(c for c in live if c in order):  # children first, within 0..n_t-1
        x0[order[c]] = i
    ax = a @ x0
    if np.any(ax < np.asarray(lo) - 1e-9) or np.any(ax > np.asarray(hi) + 1e-9):
        return None
    return x0
