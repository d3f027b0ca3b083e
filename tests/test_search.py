"""Growing the e-graph: MCTS over rule families against saturation, budgets, determinism."""

import time

import pytest
from helpers import assert_close, const, module, tensor
from tvm.relax import op as R

import tvm_eqsat
from tvm_eqsat.cost import make_cost_model
from tvm_eqsat.egraph import TensorEGraph
from tvm_eqsat.extract import choice_cost, extract, snapshot_node_cost
from tvm_eqsat.graph import graph_from_block
from tvm_eqsat.mcts import MCTS_PRESETS, mcts_config
from tvm_eqsat.rules import load_library
from tvm_eqsat.search import SEARCHES, grow

COST = make_cost_model("roofline", "llvm")


def merge_module(n_adds: int = 12, m: int = 32, k: int = 32):
    """Three matmuls on one input (merging them pays) and a chain of constant-first adds
    (``algebra`` commutes each: the e-graph grows, the cost does not drop)."""
    x = tensor("x", (m, k))

    def body(bb, x):
        q, kk, v = (bb.emit(R.matmul(x, const((k, k), seed=i))) for i in range(3))
        h = bb.emit(R.add(R.add(q, kk), v))
        for i in range(n_adds):
            h = bb.emit(R.add(const((m, k), seed=100 + i), h))
        return h

    return module([x], body)


def layered_module(groups: int = 3, n_adds: int = 4, m: int = 16, k: int = 16):
    """Several merge groups in a row: more orders to choose from."""
    x = tensor("x", (m, k))

    def body(bb, x):
        h = x
        for g in range(groups):
            q, kk, v = (bb.emit(R.matmul(h, const((k, k), seed=10 * g + i))) for i in range(3))
            h = bb.emit(R.add(R.add(q, kk), v))
            for i in range(n_adds):
                h = bb.emit(R.add(const((m, k), seed=100 + 10 * g + i), h))
        return h

    return module([x], body)


def _graph(mod):
    return graph_from_block(mod["main"].body.blocks[0])


def _grow(mod, method, node_limit, families=None, seconds=60.0, **kwargs):
    """(e-graph, growth result, ILP cost of the grown e-graph)."""
    library = load_library() if families is None else load_library().select(families)
    graph = _graph(mod)
    egraph = TensorEGraph(graph, library.program())
    start = time.perf_counter()
    result = grow(
        egraph, method, library.families, node_limit=node_limit, iter_limit=30,
        deadline=time.monotonic() + seconds, cost_model=COST, **kwargs,
    )  # fmt: skip
    result.stats["grow_s"] = time.perf_counter() - start
    snap = egraph.snapshot()
    roots = [snap.root_of[nid] for _, nid in graph.outputs]
    node_cost = snapshot_node_cost(snap, COST, roots)
    cost = choice_cost(snap, extract(snap, roots, node_cost, "ilp", 30), roots, node_cost)
    return egraph, result, cost


def test_mcts_is_a_search():
    assert "mcts" in SEARCHES and "saturate" in SEARCHES
    assert set(MCTS_PRESETS) == {"fast", "default", "thorough"}


@pytest.mark.parametrize("limit", [55, 60])  # merges alone: 54 e-nodes; with algebra: 68
def test_mcts_beats_saturation_where_the_order_matters(limit):
    """algebra + merges in one saturation iteration overshoot the limit (nothing is
    kept); merging first fits, and is what pays."""
    families = ["algebra", "merges"]
    mod = merge_module()
    _, sat, sat_cost = _grow(mod, "saturate", limit, families)
    eg, res, mcts_cost = _grow(mod, "mcts", limit, families)
    assert sat.stop_reason == "node limit" and sat.iterations == 0
    assert eg.size() <= limit
    assert mcts_cost < sat_cost * (1 - 1e-6)
    assert "merges" in res.actions and res.rules_applied.get("matmul-merge", 0) > 0


def test_mcts_matches_saturation_when_the_limit_does_not_bind():
    families = ["algebra", "merges"]
    mod = merge_module()
    sat_eg, _, sat_cost = _grow(mod, "saturate", 20000, families)
    eg, res, mcts_cost = _grow(mod, "mcts", 20000, families)
    assert res.stop_reason == "saturated"  # saturation's order reached the fixpoint: nothing to search
    assert mcts_cost <= sat_cost * (1 + 1e-9) and eg.size() == sat_eg.size()


@pytest.mark.parametrize("state", ["auto", "replay", "stack"])
def test_mcts_respects_the_node_limit(state):
    mod = layered_module()  # 49 e-nodes loaded, 139 saturated
    for limit in (55, 100):
        eg, res, _ = _grow(mod, "mcts", limit, state=state, mcts_preset="fast", time_s=30.0)
        assert eg.size() <= limit, (limit, res.stop_reason, res.actions)
        assert res.iterations > 0
    # an e-graph already above the limit is left as it is
    eg, res, _ = _grow(mod, "mcts", 1)
    assert res.stop_reason == "node limit" and res.iterations == 0 and res.actions == []


def test_mcts_respects_the_time_limit():
    mod = layered_module()
    # a deadline already passed: nothing happens
    _, res, _ = _grow(mod, "mcts", 120, seconds=-1.0)
    assert res.stop_reason == "time limit" and res.iterations == 0
    # a search that would take seconds, cut at 0.1 s (the preset's time_s and the pass deadline alike)
    _, full, _ = _grow(mod, "mcts", 120, simulations=10_000, warm_start=False)
    assert full.stop_reason == "search complete"
    for kwargs in ({"time_s": 0.1}, {"seconds": 0.1}):
        eg, res, _ = _grow(mod, "mcts", 120, simulations=10_000, warm_start=False, **kwargs)
        assert res.stop_reason == "time limit" and res.stats["simulations"] < full.stats["simulations"]
        assert eg.size() <= 120


@pytest.mark.slow
def test_mcts_stops_soon_after_its_deadline():
    """Wall-clock bound (so not in the default suite): an action or a reward may finish
    past the deadline, not much more."""
    for kwargs in ({"time_s": 0.1}, {"seconds": 0.1}):
        _, res, _ = _grow(layered_module(), "mcts", 120, simulations=10_000, warm_start=False, **kwargs)
        assert res.stats["grow_s"] < 0.1 + 1.0


def test_mcts_is_deterministic_for_a_seed():
    mod = layered_module()
    runs = [_grow(mod, "mcts", 100, seed=7, rollout="random") for _ in range(2)]
    (eg1, r1, c1), (eg2, r2, c2) = runs
    assert r1.actions == r2.actions and r1.stop_reason == r2.stop_reason
    assert eg1.size() == eg2.size() and c1 == c2
    assert r1.stats["simulations"] == r2.stats["simulations"]


def test_state_methods_give_the_same_search():
    mod = layered_module()
    _, a, ca = _grow(mod, "mcts", 100, seed=3, state="replay")
    _, b, cb = _grow(mod, "mcts", 100, seed=3, state="stack")
    _, c, cc = _grow(mod, "mcts", 100, seed=3, state="auto")
    assert a.actions == b.actions == c.actions and ca == cb == cc
    assert a.stats["simulations"] == b.stats["simulations"] == c.stats["simulations"]
    assert b.stats["pushes"] > a.stats["pushes"] and a.stats["runs"] > b.stats["runs"]


@pytest.fixture(scope="module")
def saturated_at_55():
    return _grow(merge_module(), "saturate", 55, ["algebra", "merges"])[2]


@pytest.mark.parametrize("rollout", ["matched", "random", "lookahead", "ordered"])
def test_every_rollout_policy_finds_the_merge(rollout, saturated_at_55):
    families = ["algebra", "merges"]
    sat_cost = saturated_at_55
    eg, res, cost = _grow(merge_module(), "mcts", 55, families, rollout=rollout, warm_start=False)
    assert eg.size() <= 55 and cost < sat_cost * (1 - 1e-3)


def test_optimize_with_mcts_keeps_the_numbers():
    mod = merge_module(n_adds=3)
    new, report = tvm_eqsat.optimize(mod, "llvm", search="mcts", mcts_preset="fast", node_limit=45)
    f = report.functions["main"]
    assert f.changed and f.cost_after < f.cost_before
    assert f.enodes <= 45
    assert_close(mod, new)
    assert report.to_dict()["options"]["mcts_preset"] == "fast"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"search": "mcts", "mcts_preset": "bogus"},
        {"search": "mcts", "mcts_preset": 3},
        {"search": "mcts-ish"},
    ],
)
def test_bad_search_options_raise_value_error(kwargs):
    with pytest.raises(ValueError):
        tvm_eqsat.optimize(merge_module(n_adds=1), "llvm", **kwargs)


@pytest.mark.parametrize(
    "overrides",
    [
        {"simulations": 0},
        {"rollout_depth": -1},
        {"exploration": -0.1},
        {"discount": 0.0},
        {"discount": 1.5},
        {"time_s": 0},
        {"rollout": "greedy-ish"},
        {"state": "copy"},
        {"reward_extractor": "ilp"},
        {"max_steps": -2},
        {"warm_start": "yes"},
        {"no_such_setting": 1},
    ],
)
def test_bad_mcts_settings_raise_value_error(overrides):
    with pytest.raises(ValueError):
        mcts_config("default", **overrides)
    with pytest.raises(ValueError):
        mcts_config("nope")


# ---- multi-pattern rules and their iteration limit (TENSAT's k_multi)


def test_query_roots_counts_separate_tensor_terms():
    from tvm_eqsat.rules import query_roots

    assert query_roots('(rewrite (Relu (Relu x)) (Relu x) :name "r")') == ["lhs"]
    two = '(rule ((= e1 (Matmul x w1 od)) (= e2 (Matmul x w2 od)) (const w1)) () :name "m")'
    assert sorted(query_roots(two)) == ["e1", "e2"]
    nested = '(rule ((= e (Add c1 c2)) (= c1 (Conv2d x w1 s p d g l1 l2 l3 od)) (= c2 (Relu x))) () :name "n")'
    assert query_roots(nested) == ["e"]
    # a list destructuring and a relation are not tensor terms
    walk = '(rule ((= e (Relu c)) (concat-walk c l 1 0) (= l (TCons h t))) () :name "w")'
    assert query_roots(walk) == ["e"]


def test_merges_are_multi_pattern_and_the_rest_mostly_not():
    lib = load_library()
    multi = {r.name for r in lib.rules if r.multi}
    assert {"matmul-merge", "conv2d-merge-extend", "conv2d-merge", "conv2d-enlarge"} <= multi
    assert "matmul-merge-all" not in multi  # one pattern over a group found at load time
    assert not multi & {"conv2d-batch-norm-fold", "conv2d-add-weights", "strided-slice-of-concat", "mul-factor"}


@pytest.mark.parametrize("multi_limit, merges", [(0, False), (1, True), (None, True)])
def test_multi_limit_stops_multi_pattern_rules(multi_limit, merges):
    library = load_library().select(["algebra", "merges"])
    graph = graph_from_block(merge_module()["main"].body.blocks[0])
    egraph = TensorEGraph(graph, library.program())
    result = grow(egraph, "saturate", library.families, node_limit=20000, iter_limit=30,
                  deadline=time.monotonic() + 60, multi_limit=multi_limit)  # fmt: skip
    assert (result.rules_applied.get("matmul-merge", 0) > 0) == merges
    assert result.rules_applied.get("add-commute", 0) > 0  # single-pattern rules run regardless


def test_multi_limit_is_validated():
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError):
            tvm_eqsat.make_options(multi_limit=bad)
    assert tvm_eqsat.make_options(multi_limit=2).multi_limit == 2


def test_saturation_keeps_one_saved_copy_whatever_the_iterations():
    eg, res, _ = _grow(layered_module(), "saturate", 20000)
    assert res.iterations >= 3 and len(eg._saved) == 1


@pytest.mark.parametrize("limit", [55, 60])
def test_family_rollback_keeps_what_fits_and_mcts_still_chooses_better(limit):
    families = ["algebra", "merges"]
    mod = merge_module()
    whole_eg, whole, whole_cost = _grow(mod, "saturate", limit, families)
    eg, per_family, family_cost = _grow(mod, "saturate", limit, families, rollback="family")
    assert whole.iterations == 0 and per_family.iterations >= 1  # the whole iteration kept nothing
    assert whole_eg.size() < eg.size() <= limit and per_family.stop_reason == "node limit"
    assert per_family.rules_applied.get("add-commute") and not per_family.rules_applied.get("matmul-merge")
    assert family_cost <= whole_cost
    # algebra fits first and leaves no room for the merges; MCTS merges first
    _, _, mcts_cost = _grow(mod, "mcts", limit, families)
    assert mcts_cost < family_cost * (1 - 1e-6)


def test_saturate_rollback_is_validated():
    with pytest.raises(ValueError, match="rollback"):
        _grow(merge_module(), "saturate", 100, rollback="everything")


def _two_branch_graph(first: str, second: str):
    """x -> first, y -> second (same sizes whichever op goes where)."""
    x, y = tensor("x", (4, 8)), tensor("y", (4, 8))
    ops_by_name = {"relu": R.nn.relu, "sigmoid": R.sigmoid}
    return _graph(
        module([x, y], lambda bb, x, y: bb.emit(R.add(bb.emit(ops_by_name[first](x)), bb.emit(ops_by_name[second](y)))))
    )


def test_mcts_states_are_told_apart_by_content_not_table_sizes():
    from tvm_eqsat.mcts_states import States

    def identity(graph):
        return States(TensorEGraph(graph, load_library().program()), [], "replay", 10_000).fingerprint()

    (sizes_a, digest_a), _ = identity(_two_branch_graph("relu", "sigmoid"))
    (sizes_b, digest_b), _ = identity(_two_branch_graph("sigmoid", "relu"))
    assert sizes_a == sizes_b  # what the sizes alone took for one state
    assert digest_a != digest_b
    assert identity(_two_branch_graph("relu", "sigmoid"))[0] == (sizes_a, digest_a)


def test_the_content_digest_ignores_how_e_classes_are_numbered():
    import random

    from tvm_eqsat.egraph import ENode, Snapshot

    eg = TensorEGraph(_graph(merge_module(n_adds=3)), load_library().program())
    for family in ("merges", "algebra"):
        eg.run_ruleset(family)
    snap = eg.snapshot()
    perm = list(range(len(snap.classes)))
    random.Random(0).shuffle(perm)
    renamed = [None] * len(perm)
    for c, members in enumerate(snap.classes):
        renamed[perm[c]] = [ENode(n.op, n.attrs, tuple(perm[k] for k in n.children)) for n in reversed(members)]
    same = Snapshot(renamed, snap.ty, snap.is_const, {nid: perm[c] for nid, c in snap.root_of.items()})
    assert same.digest() == snap.digest()
    c = next(c for c, members in enumerate(renamed) if members and members[0].op == "Add")
    renamed[c] = [ENode("Mul", n.attrs, n.children) if n.op == "Add" else n for n in renamed[c]]
    assert Snapshot(renamed, snap.ty, snap.is_const, same.root_of).digest() != snap.digest()
