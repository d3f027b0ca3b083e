"""Extractors on small hand-made e-graphs: exactness, sharing, acyclicity."""

import itertools
import math
import random

import pytest

from tvm_eqsat.egraph import ENode, Snapshot
from tvm_eqsat.extract import _choice_cost, extract, greedy_dag, greedy_tree, ilp


def snap_of(classes):
    return Snapshot(classes=classes, ty=[None] * len(classes), is_const=[False] * len(classes), root_of={})


def cost_by_op(table):
    return lambda cls, node: table[node.op]


def brute_force(snap, roots, node_cost):
    best = math.inf
    for picks in itertools.product(*[range(len(c)) for c in snap.classes]):
        choice = {c: snap.classes[c][k] for c, k in enumerate(picks)}
        best = min(best, _choice_cost(snap, choice, roots, node_cost))
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
    costs = {"Input": 0.0, "Const": 0.0, "MatmulA": 10.0, "MatmulB": 10.0, "TGet": 0.01,
             "Merged": 14.0, "Split": 0.01, "Out": 1.0}
    return snap_of(classes), [7], cost_by_op(costs)


def test_tree_greedy_misses_the_merge_dag_aware_extractors_find_it():
    snap, roots, cost = shared_merge_egraph()
    tree = greedy_tree(snap, cost)
    assert tree[3].op == "MatmulA" and tree[4].op == "MatmulB"  # tree cost counts Merged twice
    exact = brute_force(snap, roots, cost)
    chosen = ilp(snap, cost, roots, time_limit_s=10)
    assert chosen[3].op == "TGet" and chosen[4].op == "TGet"
    assert _choice_cost(snap, chosen, roots, cost) == pytest.approx(exact)
    assert exact < _choice_cost(snap, tree, roots, cost)


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
    by_ilp = _choice_cost(snap, extract(snap, roots, cost, "ilp"), roots, cost)
    by_dag = _choice_cost(snap, extract(snap, roots, cost, "dag_greedy"), roots, cost)
    assert by_ilp == pytest.approx(exact)
    assert math.isfinite(by_dag) and by_dag >= exact - 1e-9  # acyclic, never below the optimum


def test_cycles_are_never_extracted():
    # class 1 = f(class 2) | leaf-ish expensive ; class 2 = g(class 1) cheap: a cheap cycle
    classes = [
        [ENode("leaf", (), ())],
        [ENode("f", (), (2,)), ENode("h", (), (0,))],
        [ENode("g", (), (1,))],
    ]
    costs = cost_by_op({"leaf": 1.0, "f": 0.1, "g": 0.1, "h": 50.0})
    snap = snap_of(classes)
    for method in ("greedy", "dag_greedy", "ilp"):
        choice = extract(snap, [2], costs, method)
        assert math.isfinite(_choice_cost(snap, choice, [2], costs)), method
        assert choice[1].op == "h"


def test_unknown_extractor_is_a_value_error():
    snap, roots, cost = shared_merge_egraph()
    with pytest.raises(ValueError):
        extract(snap, roots, cost, "nope")


# ---- end to end: the merge rules and the extractors on Relax graphs

import tvm_eqsat  # noqa: E402
from tvm.relax import op as R  # noqa: E402
from tvm import relax  # noqa: E402

from helpers import assert_close, const, module, relax_ops, tensor  # noqa: E402


def _qkv():
    x = tensor("x", (16, 64))

    def body(bb, x):
        outs = [bb.emit(R.matmul(x, const((64, 64), seed=i))) for i in range(3)]
        return relax.Tuple(outs)

    return module([x], body)


def _two_convs():
    x = tensor("x", (1, 8, 14, 14))

    def body(bb, x):
        a = bb.emit(R.nn.conv2d(x, const((16, 8, 3, 3), seed=1), padding=1))
        b = bb.emit(R.nn.conv2d(x, const((8, 8, 3, 3), seed=2), padding=1))
        return relax.Tuple([R.nn.relu(a), R.nn.relu(b)])

    return module([x], body)


@pytest.mark.parametrize("make, op", [(_qkv, "relax.matmul"), (_two_convs, "relax.nn.conv2d")])
def test_dag_aware_extractors_choose_the_merge_tree_greedy_does_not(make, op):
    mod = make()
    n_before = relax_ops(mod)[op]
    for method in ("ilp",):
        new, report = tvm_eqsat.optimize(mod, "llvm", extractor=method)
        assert report.functions["main"].changed, method
        assert relax_ops(new)[op] == 1, (method, relax_ops(new))
        assert_close(mod, new)
    # tree cost counts the merged kernel once per part, so it looks more expensive
    new, report = tvm_eqsat.optimize(mod, "llvm", extractor="greedy")
    assert relax_ops(new)[op] == n_before
