"""Constant folding in the pass's rebuild (fold.py): the weight-only subgraphs of a
rewritten block become constants computed in numpy, with the values TVM would fold
them to, and nothing else changes."""

from __future__ import annotations

import logging

import numpy as np
import pytest
import tvm
from helpers import assert_close, const, module, relax_ops, tensor
from tvm import relax
from tvm.script import relax as R

from tvm_eqsat import fold, optimize
from tvm_eqsat.graph import block_from_graph, graph_from_block


def _folded_module(mod: tvm.IRModule, weights=()) -> tuple[tvm.IRModule, int]:
    """``mod`` with its one block's constants folded by ``fold_constants``."""
    func = mod["main"]
    block = func.body.blocks[0]
    g, n, _ = fold.fold_constants(graph_from_block(block, weights))
    body = relax.SeqExpr([block_from_graph(g)], func.body.body)
    new = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs)
    out = mod.clone()
    out["main"] = relax.BlockBuilder().normalize(new)
    return out, n


def _batch_norm_folded_by_hand(x):
    """A conv whose weight and bias are a batch norm's, computed from constants at run time."""

    def body(bb, x):
        gamma, beta, mean = (const((8,), seed=s) for s in (1, 2, 3))
        var = relax.const(np.linspace(0.5, 2.0, 8, dtype="float32"))
        scale = bb.emit(R.divide(gamma, R.sqrt(bb.emit(R.add(var, relax.const(1e-5, "float32"))))))
        w = bb.emit(R.multiply(const((8, 4, 3, 3), seed=4), bb.emit(R.reshape(scale, (8, 1, 1, 1)))))
        b = bb.emit(R.subtract(beta, bb.emit(R.multiply(mean, scale))))
        y = bb.emit(R.nn.conv2d(x, w, padding=1))
        return R.nn.relu(bb.emit(R.add(y, bb.emit(R.reshape(b, (1, 8, 1, 1))))))

    return module([x], body)


def test_weight_only_subgraphs_become_constants_with_the_values_tvm_computes():
    mod = _batch_norm_folded_by_hand(tensor("x", (1, 4, 10, 10)))
    new, n = _folded_module(mod)
    assert n == 2  # the weight and the bias: what the conv and the add read
    assert relax_ops(new) == {"relax.nn.conv2d": 1, "relax.add": 1, "relax.nn.relu": 1}
    assert_close(mod, new, rtol=1e-6)


def test_nothing_that_reads_a_parameter_is_folded():
    """A weight parameter (``fold_weights``) is constant but not known: it stays an op."""
    x, w = tensor("x", (2, 8)), tensor("w", (8, 8))
    mod = module([x, w], lambda bb, x, w: R.matmul(x, bb.emit(R.multiply(w, const((8, 8))))))
    block = mod["main"].body.blocks[0]
    g = graph_from_block(block, [w])
    assert fold.fold_constants(g) == (g, 0, None)


def test_a_constant_split_folds_part_by_part():
    x = tensor("x", (4, 3))

    def body(bb, x):
        parts = bb.emit(R.split(R.exp(const((4, 6))), 2, axis=1))
        return R.add(R.multiply(x, relax.TupleGetItem(parts, 0)), relax.TupleGetItem(parts, 1))

    mod = module([x], body)
    new, n = _folded_module(mod)
    assert n == 2 and "relax.split" not in relax_ops(new) and "relax.exp" not in relax_ops(new)
    assert_close(mod, new, rtol=1e-6)


def test_the_constant_parts_of_a_tuple_a_runtime_value_reads_fold():
    x = tensor("x", (4,))

    def body(bb, x):
        parts = bb.emit(relax.Tuple([bb.emit(R.exp(const((4,), seed=s))) for s in (1, 2)]))  # all constant
        return relax.Tuple([bb.emit(R.add(x, x)), parts])

    mod = module([x], body)
    new, n = _folded_module(mod)
    assert n == 2 and "relax.exp" not in relax_ops(new)
    assert_close(mod, new, rtol=1e-6)


@pytest.mark.parametrize(
    "make, reason",
    [
        (lambda: R.sqrt(relax.const(np.full((4,), -1.0, "float32"))), "not finite"),
        (
            lambda: R.multiply(relax.const(np.full((4,), 300.0, "float16")), relax.const(300.0, "float16")),
            "fp16 overflow",
        ),
        (lambda: R.add(relax.const(np.ones(4, "int32")), relax.const(np.ones(4, "int32"))), "integer arithmetic"),
        (lambda: R.cumsum(const((4,)), axis=0), "an op the pass does not model"),
        (lambda: R.multiply(R.astype(const((4,)), "bfloat16"), relax.const(2.0, "bfloat16")), "bfloat16"),
    ],
)
def test_what_cannot_be_folded_exactly_stays_for_tvm(make, reason):
    def body(bb, x):
        c = bb.emit(make())
        return R.add(x, R.astype(c, "float32"))

    mod = module([tensor("x", (4,))], body)
    new, n = _folded_module(mod)
    assert n == 0, reason
    assert relax_ops(new) == relax_ops(mod)


def test_a_bfloat16_constant_stays_for_tvm():
    """numpy reads bfloat16 (and float8) only through ml_dtypes, which TVM does not require:
    a subgraph reading such a constant is left to TVM, the way the pass leaves bfloat16 ops."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    c = relax.const(np.linspace(-1, 1, 4).astype(ml_dtypes.bfloat16))
    mod = module([tensor("x", (4,))], lambda bb, x: R.add(x, bb.emit(R.astype(c, "float32"))))
    new, n = _folded_module(mod)
    assert n == 0 and relax_ops(new) == relax_ops(mod)


def _bn_conv_module():
    x = tensor("x", (1, 8, 12, 12))

    def body(bb, x):
        c = bb.emit(R.nn.conv2d(x, const((8, 8, 3, 3)), padding=1))
        var = relax.const(np.linspace(0.5, 2.0, 8, dtype="float32"))
        bn = bb.emit(R.nn.batch_norm(c, *(const((8,), seed=k) for k in (1, 2, 3)), var, axis=1, training=False))
        return R.nn.relu(relax.TupleGetItem(bn, 0))

    return module([x], body)


def test_the_pass_returns_batch_norms_folded_into_constant_weights():
    """Before fold.py the pass left the folded weight as ops for TVM's FoldConstant,
    which compiles a kernel per op."""
    mod = _bn_conv_module()
    new, report = optimize(mod, "llvm", cost_model="roofline")
    f = report.functions["main"]
    assert f.changed and f.constants_folded == 2 and not report.alarms
    assert "1 batch norm folded into the conv" in f.changes
    assert set(relax_ops(new)) <= {"relax.nn.conv2d", "relax.add", "relax.nn.relu"}, relax_ops(new)
    assert_close(mod, new, rtol=1e-5)


def test_fold_constants_false_leaves_the_folding_to_tvm():
    mod = _bn_conv_module()
    new, report = optimize(mod, "llvm", cost_model="roofline", fold_constants=False)
    f = report.functions["main"]
    assert f.changed and f.constants_folded == 0 and "1 batch norm folded into the conv" in f.changes
    assert {"relax.multiply", "relax.sqrt"} <= set(relax_ops(new)) and "relax.nn.batch_norm" not in relax_ops(new)
    assert_close(mod, new, rtol=1e-5)


def test_a_fold_that_fails_validation_leaves_the_subgraph_for_tvm(monkeypatch, caplog):
    """Defence in depth: were a folded value wrong, validation would catch it and the
    block would keep its constant subgraph (still rewritten, still right)."""
    real = fold._as_constant
    monkeypatch.setattr(fold, "_as_constant", lambda value, ty: real(np.asarray(value) * 2.0, ty))
    mod = _bn_conv_module()
    with caplog.at_level(logging.WARNING, logger="tvm_eqsat"):
        new, report = optimize(mod, "llvm", cost_model="roofline")
    f = report.functions["main"]
    assert f.changed and f.constants_folded == 0 and not report.alarms
    assert "constant folding changed" in caplog.text
    assert "relax.nn.batch_norm" not in relax_ops(new) and "relax.multiply" in relax_ops(new)
    assert_close(mod, new, rtol=1e-5)


def test_only_what_the_rewrite_created_is_folded():
    """A constant subgraph the user's block already held (a transposed weight) stays as the
    user wrote it, for TVM; the batch norm the pass folds into the conv is computed."""
    x = tensor("x", (1, 8, 12, 12))

    def body(bb, x):
        c = bb.emit(R.nn.conv2d(x, const((8, 8, 3, 3)), padding=1))
        var = relax.const(np.linspace(0.5, 2.0, 8, dtype="float32"))
        bn = bb.emit(R.nn.batch_norm(c, *(const((8,), seed=k) for k in (1, 2, 3)), var, axis=1, training=False))
        flat = bb.emit(R.reshape(R.nn.relu(relax.TupleGetItem(bn, 0)), (1, 8 * 12 * 12)))
        return R.matmul(flat, bb.emit(R.permute_dims(const((10, 8 * 12 * 12), seed=5))))

    mod = module([x], body)
    g = graph_from_block(mod["main"].body.blocks[0])
    assert fold.fold_constants(g, g) == (g, 0, None)
    new, report = optimize(mod, "llvm", cost_model="roofline")
    assert report.functions["main"].constants_folded == 2
    assert relax_ops(new).get("relax.permute_dims") == 1 and "relax.multiply" not in relax_ops(new)
    assert_close(mod, new, rtol=1e-5)


@pytest.mark.slow  # 18 s on a 2-core Zen 3 (three builds); run by scripts/build_time.py at scale
def test_build_time_script_builds_the_three_modules_and_compares_them():
    from helpers import load_script

    bench = load_script("build_time")
    row = bench.measure("resnet-block", True, tvm.target.Target({"kind": "llvm", "opt-level": 0}))
    assert row["changed"] and row["constants_folded"] >= 4 and row["max_rel_diff"] < 1e-5
    assert all(row[f"build_{k}_s"] > 0 for k in ("original", "unfolded", "folded"))
