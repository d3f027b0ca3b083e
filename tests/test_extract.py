"""Extractors on small hand-made e-graphs: exactness, sharing, acyclicity."""

import csv
import itertools
import math
import random

import pytest

from tvm_eqsat.egraph import ENode, Snapshot
from tvm_eqsat.extract import EXTRACTORS, choice_cost, dag_local, extract, greedy_dag, greedy_tree
from tvm_eqsat.graph import Unsupported
from tvm_eqsat.ilp import PRESOLVE_LIGHT, StallWatch, ilp


def snap_of(classes):
    return Snapshot(classes=classes, ty=[None] * len(classes), is_const=[False] * len(classes), root_of={})


def cost_by_op(table):
    return lambda cls, node: table[node.op]


def brute_force(snap, roots, node_cost):
    best = math.inf
    for picks in itertools.product(*[range(len(c)) for c in snap.classes]):
        choice = {c: snap.classes[c][k] for c, k in enumerate(picks)}
        best = min(best, choice_cost(snap, choice, roots, node_cost))
    return best


def shared_merge_egraph():
    """Two outputs: each its own matmul (cost 10), or halves of one merged matmul (cost 14)."""
    x, w1, w2 = 0, 1, 2
    classes = [
        [ENode("Input", (0,), ())],
        [ENode("Const", (0,), ())],
        [ENode("Const", (1,), ())],
        # 3: q = matmul(x, w1) | first half of the merged split
        [ENode("MatmulA", (), (x, w1)), ENode("TGet", (0,), (6,))],
        # 4: k = matmul(x, w2) | second half
        [ENode("MatmulB", (), (x, w2)), ENode("TGet", (1,), (6,))],
        [ENode("Merged", (), (x, 1))],  # 5: merged matmul (weights concat, folded)
        [ENode("Split", (), (5,))],  # 6
        [ENode("Out", (), (3, 4))],  # 7: uses both
    ]
    costs = {
        "Input": 0.0,
        "Const": 0.0,
        "MatmulA": 10.0,
        "MatmulB": 10.0,
        "TGet": 0.01,
        "Merged": 14.0,
        "Split": 0.01,
        "Out": 1.0,
    }
    return snap_of(classes), [7], cost_by_op(costs)


def test_tree_greedy_misses_the_merge_dag_aware_extractors_find_it():
    snap, roots, cost = shared_merge_egraph()
    tree = greedy_tree(snap, cost)
    assert tree[3].op == "MatmulA" and tree[4].op == "MatmulB"  # tree cost counts Merged twice
    exact = brute_force(snap, roots, cost)
    chosen = ilp(snap, cost, roots, time_limit_s=10)
    assert chosen[3].op == "TGet" and chosen[4].op == "TGet"
    assert choice_cost(snap, chosen, roots, cost) == pytest.approx(exact)
    assert exact < choice_cost(snap, tree, roots, cost)


def test_dag_local_finds_the_merge_dag_greedy_misses():
    snap, roots, cost = shared_merge_egraph()
    greedy = greedy_dag(snap, cost, roots)
    assert greedy[3].op == "MatmulA"  # one user alone does not pay for the merged matmul
    chosen = dag_local(snap, cost, roots)
    assert chosen[3].op == "TGet" and chosen[4].op == "TGet"
    assert choice_cost(snap, chosen, roots, cost) == pytest.approx(brute_force(snap, roots, cost))


def qkv_egraph(n=3):
    """n outputs on one input: n matmuls (10 each), every pair merged (17), and the n-way merge (5 + 5 n)."""
    classes = [[ENode("Input", (0,), ())]]
    outs = []
    for i in range(n):
        classes.append([ENode("Matmul", (i,), (0,))])
        outs.append(len(classes) - 1)
    costs = {("Matmul", 1): 10.0, ("Merged", 2): 17.0, ("Merged", n): 5.0 + 5.0 * n}
    for group in [*itertools.combinations(range(n), 2), tuple(range(n))]:
        classes.append([ENode("Merged", group, (0,))])
        classes.append([ENode("Split", group, (len(classes) - 1,))])
        for part, i in enumerate(group):
            classes[outs[i]].append(ENode("TGet", (part,), (len(classes) - 1,)))
    classes.append([ENode("Out", (), tuple(outs))])

    def cost(cls, node):
        if node.op in ("Matmul", "Merged"):
            return costs[(node.op, max(1, len(node.attrs)))]
        return {"Input": 0.0, "Split": 0.01, "TGet": 0.01, "Out": 1.0}[node.op]

    return snap_of(classes), [len(classes) - 1], cost


def test_dag_local_takes_the_three_way_merge_over_pairs():
    snap, roots, cost = qkv_egraph(3)
    chosen = dag_local(snap, cost, roots)
    merged = {chosen[c].attrs for c in _live(snap, chosen, roots) if chosen[c].op == "Merged"}
    assert merged == {(0, 1, 2)}
    exact = choice_cost(snap, ilp(snap, cost, roots), roots, cost)
    assert choice_cost(snap, chosen, roots, cost) == pytest.approx(exact)


def _live(snap, choice, roots):
    from tvm_eqsat.graph import topological_order

    return topological_order(roots, lambda c: choice[c].children)


def random_egraph(rng, n_classes=7, max_nodes=3):
    classes = [[ENode("leaf", (0,), ())]]
    for c in range(1, n_classes):
        nodes = []
        for k in range(rng.randint(1, max_nodes)):
            arity = rng.randint(0 if k == 0 and rng.random() < 0.2 else 1, 2)
            # mostly earlier classes; sometimes later ones, which can make cycles
            kids = tuple(rng.randrange(n_classes) if rng.random() < 0.2 else rng.randrange(c) for _ in range(arity))
            nodes.append(ENode(f"op{c}_{k}", (), kids))
        classes.append(nodes)
    costs = {n.op: rng.choice([0.5, 1.0, 2.0, 3.0, 5.0]) for cls in classes for n in cls}
    costs["leaf"] = 0.1
    return snap_of(classes), [n_classes - 1, n_classes - 2], cost_by_op(costs)


@pytest.mark.parametrize("seed", range(40))
def test_ilp_equals_brute_force_and_dag_greedy_is_never_better(seed):
    rng = random.Random(seed)
    snap, roots, cost = random_egraph(rng)
    exact = brute_force(snap, roots, cost)
    if not math.isfinite(exact):
        pytest.skip("no acyclic term for this random e-graph")
    by_ilp = choice_cost(snap, extract(snap, roots, cost, "ilp"), roots, cost)
    by_dag = choice_cost(snap, extract(snap, roots, cost, "dag_greedy"), roots, cost)
    by_local = choice_cost(snap, extract(snap, roots, cost, "dag_local"), roots, cost)
    by_light = choice_cost(snap, ilp(snap, cost, roots, presolve=PRESOLVE_LIGHT), roots, cost)  # forms' ILP
    assert by_ilp == pytest.approx(exact) and by_light == pytest.approx(exact)
    assert math.isfinite(by_dag) and by_dag >= exact - 1e-9  # acyclic, never below the optimum
    assert math.isfinite(by_local) and exact - 1e-9 <= by_local <= by_dag + 1e-9


def random_shared_egraph(rng, n_classes=40):
    """Bigger random e-graphs with what shrinking looks for: free leaves, duplicate nodes, single-node chains, cycles."""
    classes = [[ENode("leaf", (i,), ())] for i in range(3)]
    for c in range(3, n_classes):
        nodes = []
        for k in range(rng.choice([1, 1, 2, 3])):
            kids = tuple(
                rng.randrange(n_classes) if rng.random() < 0.05 else rng.randrange(c) for _ in range(rng.randint(1, 3))
            )
            nodes.append(ENode(f"op{c}_{k}", (), kids))
            if rng.random() < 0.2:  # a commuted twin: same children, same cost
                nodes.append(ENode(f"op{c}_{k}", (1,), tuple(reversed(kids))))
        classes.append(nodes)
    costs = {n.op: rng.choice([0.0, 0.5, 1.0, 2.0, 5.0, 20.0]) for cls in classes for n in cls}
    costs["leaf"] = 0.0
    roots = rng.sample(range(n_classes // 2, n_classes), 3)
    return snap_of(classes), roots, cost_by_op(costs)


@pytest.mark.parametrize("seed", range(40))
def test_shrinking_keeps_the_ilp_optimum_and_dag_local_stays_above_it(seed):
    snap, roots, cost = random_shared_egraph(random.Random(seed))
    plain, shrunk = {}, {}
    by_plain = choice_cost(snap, ilp(snap, cost, roots, shrink=False, info=plain), roots, cost)
    by_shrunk = choice_cost(snap, ilp(snap, cost, roots, info=shrunk), roots, cost)
    if not math.isfinite(by_plain):
        pytest.skip("no acyclic term for this random e-graph")
    assert plain["status"] == shrunk["status"] == "Optimal"
    assert by_shrunk == pytest.approx(by_plain)
    assert shrunk["ilp_nodes"] <= plain["ilp_nodes"]
    by_local = choice_cost(snap, dag_local(snap, cost, roots), roots, cost)
    by_dag = choice_cost(snap, greedy_dag(snap, cost, roots), roots, cost)
    assert by_plain - 1e-9 <= by_local <= by_dag + 1e-9


def test_ilp_starts_from_the_local_search_answer():
    snap, roots, cost = qkv_egraph(3)
    info = {}
    chosen = ilp(snap, cost, roots, info=info)
    assert info["status"] == "Optimal" and info["warm_start"]  # highspy took dag_local's answer as incumbent
    assert choice_cost(snap, chosen, roots, cost) == pytest.approx(5.0 + 15.0 + 0.01 + 3 * 0.01 + 1.0)


def test_ilp_stops_when_it_stalls_on_its_start():
    """With no time to improve on its start (``stall_s=0``) the solver is interrupted and the
    start's answer (or better) comes back; with the default stall limit it proves the optimum,
    here well below the start."""
    snap, roots, cost = random_shared_egraph(random.Random(5), n_classes=120)
    start = greedy_dag(snap, cost, roots)
    start_cost = choice_cost(snap, start, roots, cost)
    stalled, patient = {}, {}
    quick = choice_cost(snap, ilp(snap, cost, roots, start=start, stall_s=0.0, info=stalled), roots, cost)
    best = choice_cost(snap, ilp(snap, cost, roots, start=start, info=patient), roots, cost)
    assert stalled["stalled"] and stalled["status"] == "Interrupted by user" and quick <= start_cost
    assert patient["status"] == "Optimal" and not patient["stalled"] and best < 0.8 * start_cost


def test_the_stall_clock_restarts_at_each_better_solution():
    """A solve that improved once must still stop when it stalls after (full-size squeezenet ran
    the pass's whole time limit for one improvement found at 1.2 s)."""
    watch = StallWatch(best=10.0, stall_s=5.0)
    assert not watch.stalled(4.9) and watch.stalled(5.1)
    watch.found(9.0, 3.0)  # better than the start: the clock restarts
    assert not watch.stalled(7.9) and watch.stalled(8.1)
    watch.found(9.0, 8.0)  # no better than the best so far: it does not
    assert watch.stalled(8.1) and watch.improvements == 1


def test_dag_local_out_of_time_returns_the_dag_greedy_answer():
    snap, roots, cost = shared_merge_egraph()
    assert dag_local(snap, cost, roots, time_limit_s=0.0) == greedy_dag(snap, cost, roots)


def test_cycles_are_never_extracted():
    # class 1 = f(class 2) | leaf-ish expensive ; class 2 = g(class 1) cheap: a cheap cycle
    classes = [
        [ENode("leaf", (), ())],
        [ENode("f", (), (2,)), ENode("h", (), (0,))],
        [ENode("g", (), (1,))],
    ]
    costs = cost_by_op({"leaf": 1.0, "f": 0.1, "g": 0.1, "h": 50.0})
    snap = snap_of(classes)
    for method in EXTRACTORS:
        choice = extract(snap, [2], costs, method)
        assert math.isfinite(choice_cost(snap, choice, [2], costs)), method
        assert choice[1].op == "h"


def test_a_node_of_infinite_cost_is_never_extracted():
    """A form the caller rules out (the pass prices nchwc's copies infinitely where LLVM may
    miscompile them) is priced at infinity: every extractor takes the dearer finite form, and
    one with nothing else fails as having no finite-cost term."""
    snap, roots, cost = shared_merge_egraph()
    ruled_out = lambda cls, node: math.inf if node.op == "Merged" else cost(cls, node)  # noqa: E731
    assert extract(snap, roots, cost, "ilp")[3].op == "TGet"  # the merge, where it may be taken
    for method in EXTRACTORS:
        choice = extract(snap, roots, ruled_out, method)
        assert (choice[3].op, choice[4].op) == ("MatmulA", "MatmulB"), method
        assert choice_cost(snap, choice, roots, ruled_out) == pytest.approx(21.0)
    only = lambda cls, node: math.inf if node.op == "MatmulB" else ruled_out(cls, node)  # noqa: E731
    for method in EXTRACTORS:
        with pytest.raises(Unsupported):
            extract(snap, roots, only, method)


def test_unknown_extractor_is_a_value_error():
    snap, roots, cost = shared_merge_egraph()
    with pytest.raises(ValueError):
        extract(snap, roots, cost, "nope")


# ---- end to end: the merge rules and the extractors on Relax graphs

from helpers import assert_close, const, load_script, module, relax_ops, tensor  # noqa: E402
from tvm import relax  # noqa: E402
from tvm.relax import op as R  # noqa: E402

import tvm_eqsat  # noqa: E402


def _qkv():
    x = tensor("x", (16, 64))

    def body(bb, x):
        outs = [bb.emit(R.matmul(x, const((64, 64), seed=i))) for i in range(3)]
        return relax.Tuple(outs)

    return module([x], body)


def _two_convs():
    # memory-bound 1x1 convs on an input too large for the cache (the tuned roofline's
    # memory tier): reading it once pays for the split's copy kernel
    x = tensor("x", (1, 64, 256, 256))

    def body(bb, x):
        a = bb.emit(R.nn.conv2d(x, const((2, 64, 1, 1), seed=1)))
        b = bb.emit(R.nn.conv2d(x, const((1, 64, 1, 1), seed=2)))
        return relax.Tuple([R.nn.relu(a), R.nn.relu(b)])

    return module([x], body)


@pytest.mark.parametrize("make, op", [(_qkv, "relax.matmul"), (_two_convs, "relax.nn.conv2d")])
def test_dag_aware_extractors_choose_the_merge_tree_greedy_does_not(make, op):
    mod = make()
    n_before = relax_ops(mod)[op]
    for method in ("ilp", "dag_local"):
        new, report = tvm_eqsat.optimize(mod, "llvm", extractor=method)
        assert report.functions["main"].changed, method
        assert relax_ops(new)[op] == 1, (method, relax_ops(new))
        assert_close(mod, new)
    # tree cost counts the merged kernel once per part, so it looks more expensive
    new, report = tvm_eqsat.optimize(mod, "llvm", extractor="greedy")
    assert relax_ops(new)[op] == n_before


def _layout_chain_snapshot(layers: int):
    """The e-graph of ``layers`` 3x3 convs with relus and residual adds, grown with the
    layout rules: every tensor in NCHW and in NHWC, each the other's permutation."""
    import time

    from tvm_eqsat import graph
    from tvm_eqsat.egraph import TensorEGraph
    from tvm_eqsat.rules import load_library
    from tvm_eqsat.saturate import saturate

    x = tensor("x", (1, 4, 8, 8))

    def body(bb, x):
        y = x
        for i in range(layers):
            c = bb.emit(R.nn.relu(bb.emit(R.nn.conv2d(y, const((4, 4, 3, 3), seed=i), padding=1))))
            y = bb.emit(R.add(c, y)) if i % 2 else c
        return y

    g = graph.graph_from_block(module([x], body)["main"].body.blocks[0])
    library = load_library().select(["nhwc", "layout"])
    eg = TensorEGraph(g, library.program())
    saturate(eg, library.families, node_limit=20000, iter_limit=20, deadline=time.monotonic() + 60)
    snap = eg.snapshot()
    return snap, [snap.root_of[nid] for _, nid in g.outputs]


def test_ilp_runs_a_whole_chain_in_the_cheaper_layout_with_one_transpose_each_way():
    """The layout rules give every tensor an NCHW and an NHWC form, each the other's
    permutation (cycles the extractor must not take).  With NHWC convs cheaper, the optimum
    runs the whole chain (relus and residual adds included) in NHWC, with one transpose in
    and one out, and the solver proves it."""
    snap, roots = _layout_chain_snapshot(12)

    def cost(cls, node):
        if node.op == "Conv2d":
            return 1.0 if node.attrs[4] == "NHWC" else 2.0
        return 0.3 if node.op == "Permute" and not snap.is_const[cls] else 0.01

    info: dict = {}
    choice = ilp(snap, cost, roots, time_limit_s=20.0, info=info)
    assert info["status"] == "Optimal", info
    chosen = [choice[c] for c in _live_classes(choice, roots)]
    convs = [n for n in chosen if n.op == "Conv2d"]
    assert len(convs) == 12 and all(n.attrs[4] == "NHWC" for n in convs)
    assert (
        sum(
            n.op == "Permute" and n.children and not snap.is_const[c]
            for c, n in ((c, choice[c]) for c in _live_classes(choice, roots))
        )
        == 2
    )


def _live_classes(choice, roots):
    seen, todo = set(), list(roots)
    while todo:
        c = todo.pop()
        if c not in seen:
            seen.add(c)
            todo.extend(choice[c].children)
    return seen


def test_bench_extract_prices_the_pass_own_egraphs(tmp_path):
    """``bench_extract.py --from-pass`` extracts from the snapshot and costs the pass extracted
    from (its own families and cost model), and leaves the pass's extractor as it found it."""
    from tvm_eqsat import transform

    bench = load_script("bench_extract")
    before = transform.extract
    out = tmp_path / "x.csv"
    bench.main(["--from-pass", "--models", "resnet-block", "--flow", "default", "--ilps", "ilp", "--repeat", "1",
                "--ilp-limit", "10", "--out", str(out)])  # fmt: skip
    assert transform.extract is before
    rows = {r["extractor"]: r for r in csv.DictReader(out.open())}
    assert {r["kind"] for r in rows.values()} == {"pass"} and set(rows) == {*bench.HEURISTICS, "ilp"}
    assert float(rows["ilp"]["dag_cost_us"]) <= float(rows["dag_local"]["dag_cost_us"]) + 1e-6
    assert float(rows["dag_local"]["dag_cost_us"]) <= float(rows["greedy"]["dag_cost_us"]) + 1e-6
    assert int(rows["ilp"]["enodes"]) > 0 and rows["ilp"]["ilp_improvements"] != ""
