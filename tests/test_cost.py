"""Kernel features and the learned cost model: training, saving, loading, fallbacks."""

from __future__ import annotations

import dataclasses
import json
import logging
import time

import numpy as np
import pytest
from helpers import assert_close, const, load_script, module, relax_ops, tensor
from tvm import relax

import tvm_eqsat
from tvm_eqsat import cost, features, models, tune, tuning_db
from tvm_eqsat.graph import TensorTy
from tvm_eqsat.workload import Epilogue, Workload
from tvm_eqsat.xgb_model import KernelModel, Sample, load_dataset, measured_table, train

F32 = "float32"
CONV_ATTRS = ((1, 1), (1, 1, 1, 1), (1, 1), 1, "NCHW", "OIHW", "NCHW", F32)


def _matmul(m: int, k: int, n: int):
    return ("Matmul", (F32,), (TensorTy((m, k), F32), TensorTy((k, n), F32)), TensorTy((m, n), F32))


def _conv(c: int, k: int, groups: int, size: int = 56):
    """A 3x3 NCHW conv node (pad 1): dense for groups=1, depthwise for groups=c=k."""
    attrs = ((1, 1), (1, 1, 1, 1), (1, 1), groups, "NCHW", "OIHW", "NCHW", "float32")
    ins = (TensorTy((1, c, size, size), F32), TensorTy((k, c // groups, 3, 3), F32))
    return ("Conv2d", attrs, ins, TensorTy((1, k, size, size), F32))


def test_feature_vector_describes_the_kernel():
    op, attrs, ins, out = _matmul(64, 128, 32)
    v = features.features(op, attrs, ins, out)
    assert v.shape == (len(features.NAMES),)
    f = dict(zip(features.NAMES, v))
    assert f["op_Matmul"] == 1 and f["op_Conv2d"] == 0
    assert f["log_flops"] == pytest.approx(np.log2(2 * 64 * 128 * 32))
    assert (f["log_m"], f["log_n"], f["log_k"]) == (6, 5, 7)
    assert not any(name.startswith("epi_") for name in features.NAMES)  # the pass asks about bare kernels
    dw_attrs = ((1, 1), (1, 1, 1, 1), (1, 1), 16, "NCHW", "OIHW", "NCHW", F32)
    conv = features.features(
        "Conv2d", dw_attrs, (TensorTy((1, 16, 8, 8), F32), TensorTy((16, 1, 3, 3), F32)), TensorTy((1, 16, 8, 8), F32)
    )
    g = dict(zip(features.NAMES, conv))
    assert g["depthwise"] == 1 and g["kh"] == 3 and g["log_groups"] == 4


def test_a_channel_blocked_conv_has_the_nchw_convs_work_and_geometry_and_its_own_op():
    """nchwc.egg's conv (read back from the module the pass returns) is featured as the NCHW
    conv it replaces, with the same work, GEMM view and window, under its own op column, so
    the learned model prices it once it has seen some."""
    op, attrs, ins, out = _conv(64, 128, 1, 28)
    nchw = dict(zip(features.NAMES, features.features(op, attrs, ins, out)))
    data, weight = TensorTy((1, 4, 28, 28, 16), F32), TensorTy((8, 4, 3, 3, 16, 16), F32)
    blocked_out = TensorTy((1, 8, 28, 28, 16), F32)
    item = ("Conv2dNCHWc", ((1, 1), (1, 1, 1, 1), (1, 1), "float32"), (data, weight), blocked_out)
    b = dict(zip(features.NAMES, features.features(*item)))
    assert b["op_Conv2dNCHWc"] == 1 and b["op_Conv2d"] == 0 and nchw["op_Conv2dNCHWc"] == 0
    same = ("log_flops", "log_bytes_in", "log_bytes_out", "log_m", "log_n", "log_k", "kh", "kw", "stride", "pad")
    assert {k: b[k] for k in same} == {k: nchw[k] for k in same}
    assert b["channels_last"] == 0 and b["out_rank"] == 5
    np.testing.assert_array_equal(features.featurize([item, (op, attrs, ins, out)])[0], features.features(*item))


@pytest.mark.parametrize("flow, mcpu", [(f, "generic") for f in cost.FLOWS] + [("tuned", "znver5")])
def test_shipped_model_never_predicts_a_bigger_kernel_cheaper(flow, mcpu):
    """Rewrites ask about kernels larger than any measured (merged, enlarged); the
    booster is monotone in the work features, so growing a kernel never lowers its
    predicted cost.  (Measured kernels answer with their measurement instead.)  Zen 5's
    model corrects the pass's calibrated roofline, itself monotone within a kind of kernel."""
    model = cost.make_cost_model("xgb", "llvm", flow, cost.cpu_vector_bits(mcpu), mcpu)
    assert isinstance(model, cost.LearnedCostModel)
    sweeps = [
        [
            (
                "Conv2d",
                CONV_ATTRS,
                (TensorTy((1, c_in, hw, hw), F32), TensorTy((o, c_in, 3, 3), F32)),
                TensorTy((1, o, hw, hw), F32),
            )
            for o in (8, 16, 32, 64, 128, 256, 512)
        ]
        for c_in, hw in ((4, 7), (64, 14), (256, 28))
    ] + [[_matmul(m, k, n) for n in (64, 128, 256, 512, 1024, 2048, 4096)] for m, k in ((1, 64), (8, 512), (128, 768))]
    for sweep in sweeps:
        costs = list(model.kernels.predict_items(sweep))
        assert costs == sorted(costs), (sweep[0], costs)


def test_featurize_stacks_rows():
    items = [_matmul(8 * i, 16, 16) for i in range(1, 6)]
    x = features.featurize(items)
    assert x.shape == (5, len(features.NAMES))
    assert np.all(np.diff(x[:, features.INDEX["log_flops"]]) > 0)


def _conv_grid() -> list[tuple]:
    """80 3x3 convs, dense and depthwise, 8-128 channels, 7x7 to 56x56: the residual tests' kernels."""
    return [
        _conv(c, c if dw else k, c if dw else 1, size)
        for c in (8, 16, 32, 64, 128)
        for k in (16, 64)
        for size in (7, 14, 28, 56)
        for dw in (False, True)
    ]


def _synthetic_samples(rng) -> list[Sample]:
    """Latency = launch + work / rate: enough structure for a model to learn the order."""
    out = []
    for i in range(120):
        m, k, n = (int(2 ** rng.integers(3, 10)) for _ in range(3))
        op, attrs, ins, ty = _matmul(m, k, n)
        us = 2.0 + 2.0 * m * k * n / 5e4
        out.append(Sample(f"model{i % 3}", "model", Workload(op, attrs, ins), ty, us, 0.05))
    return out


@pytest.fixture(scope="module")
def trained_dir(tmp_path_factory):
    samples = _synthetic_samples(np.random.default_rng(0))
    model = KernelModel(train(samples, rounds=200), {"features": list(features.NAMES), "target": "llvm"})
    directory = tmp_path_factory.mktemp("model")
    model.save(directory)
    return directory


def test_roofline_from_features_is_the_tuned_rooflines_kernel_cost():
    """The residual objective's baseline, computed from feature rows, equals what the tuned
    roofline charges the same matmuls (both memory tiers); a dense conv, which the pass's
    roofline gives its own measured peak, stays within that peak's share of it (the baseline
    keeps the one peak the shipped residual models learned against)."""
    from tvm_eqsat.xgb_model import roofline_from_features

    roofline = cost.RooflineCostModel("llvm", "tuned")
    items = [_matmul(64, 64, 64), _matmul(2048, 2048, 512), _matmul(1, 4096, 4096)]
    conv = _conv_workload("NCHW", cin=64, cout=64, size=28)
    items.append((conv.op, conv.attrs, conv.inputs, TensorTy((1, 64, 28, 28), F32)))
    want = [roofline.node_cost(op, attrs, ins, out, False) - cost.EPSILON_US for op, attrs, ins, out in items]
    got = roofline_from_features(features.featurize(items))
    np.testing.assert_allclose(got[:3], want[:3], rtol=1e-4)
    share = cost._tuned_llvm_machines(128)["conv"].peak_gflops / cost.MACHINES[("llvm", "tuned")].peak_gflops
    assert want[3] < got[3] <= want[3] * share * (1 + 1e-4)  # compute-bound: the baseline's peak is 1.0


def test_residual_model_learns_a_correction_to_the_roofline(tmp_path):
    """Kernels that run at a third of the roofline's speed: the residual booster learns the
    factor (within 10% on kernels it did not see), survives save/load, and the objective
    is checked."""
    from tvm_eqsat.xgb_model import roofline_from_features

    rng = np.random.default_rng(3)
    items = [_matmul(*(int(2 ** rng.integers(3, 10)) for _ in range(3))) for _ in range(150)]
    slow = 3.0 * roofline_from_features(features.featurize(items))
    samples = [
        Sample("m", "model", Workload(op, attrs, ins), out, float(us), 0.0)
        for (op, attrs, ins, out), us in zip(items, slow)
    ]
    model = KernelModel(train(samples[:100], rounds=200, objective="residual"), {"objective": "residual"})
    model.metadata["features"] = list(features.NAMES)
    model.save(tmp_path)
    loaded = KernelModel.load(tmp_path)
    x = features.featurize(items[100:])
    np.testing.assert_allclose(loaded.predict_us(x), slow[100:], rtol=0.1)
    with pytest.raises(ValueError, match="objective"):
        train(samples, rounds=2, objective="rank")


def test_residual_model_over_the_pass_roofline_prices_what_the_pass_asks(tmp_path):
    """A residual model whose metadata names the pass's own roofline (Zen 5's calibration,
    one peak per kind of kernel) as its ``baseline``: trained where dense convs and depthwise
    convs both run at 2.5x that roofline, it prices unseen ones so (the plain baseline of
    ``roofline_from_features`` has one peak, so the two kinds' corrections would differ); the
    pass's ``LearnedCostModel`` asks it through ``predict_items``; feature rows alone are refused
    (they cannot give that roofline)."""
    from tvm_eqsat.xgb_model import baseline_spec, roofline_baseline

    spec = baseline_spec("llvm", "tuned", 512, "znver5")
    items = _conv_grid()
    slow = 2.5 * roofline_baseline(items, spec)
    samples = [
        Sample("m", "model", Workload(op, attrs, ins), out, float(us), 0.0)
        for (op, attrs, ins, out), us in zip(items, slow)
    ]
    test = np.arange(len(items)) % 4 == 0
    train_on = [s for s, t in zip(samples, test) if not t]
    metadata = {"objective": "residual", "baseline": spec, "features": list(features.NAMES), "target": "llvm"}
    KernelModel(train(train_on, rounds=200, objective="residual", baseline=spec), metadata).save(tmp_path)
    loaded = KernelModel.load(tmp_path)
    unseen = [it for it, t in zip(items, test) if t]
    np.testing.assert_allclose(loaded.predict_items(unseen), slow[test], rtol=0.1)
    with pytest.raises(ValueError, match="predict_items"):
        loaded.predict_us(features.featurize(unseen))
    priced = cost.LearnedCostModel(loaded, "llvm", "tuned", 512, "znver5")
    op, attrs, ins, out = unseen[0]
    assert priced.node_cost(op, attrs, ins, out, False) == pytest.approx(cost.EPSILON_US + slow[test][0], rel=0.1)


def test_pooled_kernels_are_learned_over_their_own_machines_roofline():
    """``--pool``: another machine's kernels teach the correction, each over that machine's
    roofline.  Both machines run every conv 2.5x their own roofline (which differ by
    1.0-1.9x per kernel); trained on a handful of this machine's convs plus the other's, the
    booster prices this machine's unseen convs at 2.5x this roofline.  A pooled row read over
    the wrong roofline would be off by the rooflines' ratio; a latency booster refuses them."""
    from tvm_eqsat.xgb_model import Pooled, baseline_spec, roofline_baseline

    here, there = baseline_spec("llvm", "tuned", 512, "emeraldrapids"), baseline_spec("llvm", "tuned", 512, "znver5")
    items = _conv_grid()

    def timed(spec, chosen):
        us = 2.5 * roofline_baseline(items, spec)
        return [
            Sample("m", "model", Workload(op, attrs, ins), out, float(t), 0.0)
            for (op, attrs, ins, out), t, c in zip(items, us, chosen)
            if c
        ]

    ratio = roofline_baseline(items, here) / roofline_baseline(items, there)
    assert np.median(ratio) > 1.3  # the two rooflines differ: the test can tell them apart
    few = np.arange(len(items)) % 10 == 0
    pooled = Pooled.of("there", timed(there, ~few), there)
    booster = train(timed(here, few), rounds=200, objective="residual", baseline=here, pooled=[pooled])
    metadata = {"objective": "residual", "baseline": here, "features": list(features.NAMES), "target": "llvm"}
    unseen = [it for it, f in zip(items, few) if not f]
    want = 2.5 * roofline_baseline(unseen, here)
    np.testing.assert_allclose(KernelModel(booster, metadata).predict_items(unseen), want, rtol=0.1)
    with pytest.raises(ValueError, match="residual"):
        train(timed(here, few), rounds=5, pooled=[pooled])


def test_a_held_out_model_is_left_out_of_the_pooled_kernels_too():
    """``Fit.without``: held out by model, neither the held-out model's kernels nor any kernel
    with a held-out workload stays in another machine's pooled set; a random fold drops only the
    held-out workloads (their models hold training kernels too)."""
    from tvm_eqsat.xgb_model import Pooled, baseline_spec

    tcm = load_script("train_cost_model")
    samples = _synthetic_samples(np.random.default_rng(3))
    spec = baseline_spec("llvm", "tuned", 512, "znver5")
    elsewhere = [
        dataclasses.replace(s, model="other") for s in samples[:10]
    ]  # the same workloads, filed under another model
    pooled = Pooled.of("there", samples[10:] + elsewhere, spec)
    fit = tcm.Fit(rounds=5, objective="residual", pooled=(pooled,))
    test = [s for s in samples if s.model == "model0"]
    left = fit.without(test, by_model=True).pooled[0]
    keys = {s.workload.key() for s in test}
    assert left.samples and all(s.model != "model0" and s.workload.key() not in keys for s in left.samples)
    assert len(left.features) == len(left.residual) == len(left.samples)
    fold = fit.without(test[:3], by_model=False).pooled[0]
    assert {s.model for s in fold.samples} >= {"model0"} and len(fold.samples) < len(pooled.samples)
    assert tcm.Fit(rounds=5).without(test, by_model=True).pooled == ()


def test_choose_depth_takes_the_depth_that_ranks_held_out_models_best():
    """``train_cost_model.choose_depth`` scores every depth of ``DEPTHS`` held out by model,
    within the samples it is given, and returns the best; with one model, the default."""
    tcm = load_script("train_cost_model")
    samples = _synthetic_samples(np.random.default_rng(5))
    fit = tcm.Fit(rounds=20, max_depth="auto")
    depth, scores = tcm.choose_depth(samples, fit)
    assert set(scores) == set(tcm.DEPTHS) and depth == max(scores, key=scores.get)
    assert all(0.5 < v <= 1.0 for v in scores.values()), scores
    one = [s for s in samples if s.model == "model0"]
    assert tcm.choose_depth(one, fit) == (tcm.PARAMS["max_depth"], {})
    y, pred, _, _ = tcm.held_out_by_model(samples, fit)  # nested: each fold chooses its own depth
    assert pred.shape == y.shape and np.all(pred > 0)


def test_residual_model_stays_monotone_where_its_data_says_otherwise():
    """Small matmuls measured far above the roofline, large ones near it: the correction
    falls with size in the data, yet the predicted latency (roofline times correction) never
    falls as a matmul grows, so a merged kernel is never priced below its parts."""
    from tvm_eqsat.xgb_model import roofline_from_features

    items = [_matmul(m, 64, n) for m in (1, 4, 16, 64, 256) for n in (16, 64, 256, 1024, 4096)]
    roof = roofline_from_features(features.featurize(items))
    measured = roof * np.where(roof < np.median(roof), 20.0, 1.0)
    samples = [
        Sample("m", "model", Workload(op, attrs, ins), out, float(us), 0.0)
        for (op, attrs, ins, out), us in zip(items, measured)
    ]
    model = KernelModel(train(samples, rounds=200, objective="residual"), {"objective": "residual"})
    for m in (1, 16, 256):
        sweep = [_matmul(m, 64, n) for n in (16, 64, 256, 1024, 4096)]
        costs = list(model.predict_us(features.featurize(sweep)))
        assert costs == sorted(costs), (m, costs)


def _conv_samples(us_of_flops) -> list[Sample]:
    """Dense 3x3 convs of 8-64 channels at 7-28 pixels, timed as ``us_of_flops`` says."""
    out = []
    for c in (8, 16, 32, 64):
        for k in (8, 16, 32, 64):
            for size in (7, 14, 28):
                op, attrs, ins, ty = _conv(c, k, 1, size)
                us = us_of_flops(features.flops(op, attrs, ins, ty))
                out.append(Sample("m", "model", Workload(op, attrs, ins), ty, float(us), 0.0))
    return out


def test_a_conv_beyond_the_training_range_grows_with_its_flops(tmp_path):
    """A tree predicts at most its largest training kernel's time for anything larger: a conv
    with 16x the FLOPs came out at the largest conv's time.  With the model's ``extrapolation``
    (saved and loaded with it) time grows beyond the range as the largest convs' did, in
    proportion to FLOPs here; a matmul beyond its range is left to the booster, and inside
    the range nothing changes."""
    from tvm_eqsat.xgb_model import beyond_range, extrapolation

    samples = _conv_samples(lambda flops: 1.0 + flops / 2e4)
    samples += [Sample("m", "model", Workload(*_matmul(n, n, n)[:3]), _matmul(n, n, n)[3], n**3 / 1e4, 0.0)
                for n in (8, 16, 32, 64)]  # fmt: skip
    fit = extrapolation(samples)
    assert set(fit) == {"Conv2d"} and fit["Conv2d"]["log2_us_per_log2_flops"] == pytest.approx(1.0, abs=0.05)
    booster = train(samples, rounds=300)
    KernelModel(booster, {"features": list(features.NAMES), "extrapolation": fit}).save(tmp_path)
    model, plain = KernelModel.load(tmp_path), KernelModel(booster, {})
    big = _conv(128, 256, 1, 28)  # 16x the largest training conv's FLOPs
    truth = 1.0 + features.flops(*big) / 2e4
    x = features.featurize([big, _conv(32, 32, 1, 14), _matmul(512, 512, 512)])
    assert plain.predict_us(x)[0] < truth / 8  # the tree's answer: the largest conv's time
    assert model.predict_us(x)[0] == pytest.approx(truth, rel=0.2)
    np.testing.assert_array_equal(beyond_range(x, fit)[1:], [1.0, 1.0])
    np.testing.assert_allclose(model.predict_us(x)[1:], plain.predict_us(x)[1:])


def test_conv_extrapolation_follows_the_largest_convs_growth():
    """Where the largest convs' time barely grows with FLOPs (launch-bound, as small kernels on
    a GPU are), the fitted slope is near 0 and extrapolation adds little; a slope is kept in
    [0, 1], and with too few convs near the largest, time grows in proportion to FLOPs."""
    from tvm_eqsat.xgb_model import extrapolation

    flat = extrapolation(_conv_samples(lambda flops: 50.0 + flops / 1e9))["Conv2d"]
    assert 0.0 <= flat["log2_us_per_log2_flops"] < 0.05
    sqrt = extrapolation(_conv_samples(lambda flops: flops**0.5))["Conv2d"]
    assert sqrt["log2_us_per_log2_flops"] == pytest.approx(0.5, abs=0.02)
    falling = extrapolation(_conv_samples(lambda flops: 1e9 / flops))["Conv2d"]
    assert falling["log2_us_per_log2_flops"] == 0.0
    one = extrapolation(_conv_samples(lambda flops: flops)[:2])["Conv2d"]
    assert one["log2_us_per_log2_flops"] == 1.0


def test_a_learned_model_without_channels_last_kernels_does_not_price_layouts():
    """The nhwc family needs a model that has measured NHWC convs; one that has not ranks
    both layouts alike (its features differ by one flag it never saw set)."""
    nchw_only = cost.LearnedCostModel(KernelModel(None, {}, {'{"op": "Conv2d", "NCHW": 1}': 5.0}), "llvm")
    assert "NHWC" not in cost.priced_layouts(nchw_only)
    assert "NHWC" not in cost.priced_layouts(cost.make_cost_model("roofline", "llvm"))
    # the Xeon's calibration holds its NHWC ratios (layout_ratios.py): its tuned roofline prices layouts
    assert "NHWC" in cost.priced_layouts(cost.make_cost_model("roofline", "llvm", "tuned", 512, "emeraldrapids"))
    assert "NHWC" not in cost.priced_layouts(cost.make_cost_model("roofline", "llvm", "tuned", 512, "znver5"))
    assert "NHWC" in cost.priced_layouts(cost.make_cost_model("xgb", "llvm", "tuned"))


def test_blocked_convs_are_priced_where_measured_or_calibrated():
    """The nchwc family needs a model that tells a blocked conv from the NCHW one: a CPU
    whose calibration holds ``nchwc_conv`` (the Xeon's, Zen 3's), or a learned model that
    measured ``Conv2dNCHWc`` kernels; the generic roofline and Zen 5's price it alike."""

    def roofline(mcpu, bits):
        return cost.make_cost_model("roofline", "llvm", "tuned", bits, mcpu)

    assert cost.priced_layouts(roofline("emeraldrapids", 512)) == {"NHWC", "NCHW16c"}
    assert cost.priced_layouts(roofline("znver3", 256)) == {"NCHW16c"}
    assert cost.priced_layouts(roofline("znver5", 512)) == set()
    assert cost.priced_layouts(cost.make_cost_model("roofline", "llvm")) == set()
    blocked = cost.LearnedCostModel(KernelModel(None, {}, {'{"op": "Conv2dNCHWc"}': 5.0}), "llvm")
    assert cost.priced_layouts(blocked) == {"NCHW16c"}


def test_trained_model_ranks_kernels_and_round_trips(trained_dir):
    model = KernelModel.load(trained_dir)
    small, big = _matmul(16, 16, 16), _matmul(256, 256, 256)
    x = features.featurize([small, big])
    pred = model.predict_us(x)
    assert pred[0] < pred[1]
    assert pred[1] == pytest.approx(2.0 + 2.0 * 256**3 / 5e4, rel=0.3)


def test_learned_model_costs_kernels_and_falls_back_for_the_rest(trained_dir):
    model = cost.make_cost_model(str(trained_dir), "llvm")
    assert isinstance(model, cost.LearnedCostModel)
    op, attrs, ins, out = _matmul(128, 128, 128)
    c = model.node_cost(op, attrs, ins, out, False)
    model.prepare([(op, attrs, ins, out, False)])
    assert model.node_cost(op, attrs, ins, out, False) == c > 1.0
    assert model.node_cost(op, attrs, ins, out, True) == cost.EPSILON_US  # folded at compile time
    relu = ("Relu", (), (out,), out, False)
    assert model.node_cost(*relu) == cost.RooflineCostModel("llvm").node_cost(*relu)


def test_measured_kernels_answer_for_themselves(tmp_path):
    """A kernel in the model's measured table costs its measurement (its bare rows where
    it has any, else the median over its rows with epilogues), survives save/load, and
    leaves the booster to answer for every other kernel."""
    samples = _synthetic_samples(np.random.default_rng(1))
    op, attrs, ins, out = _matmul(48, 48, 48)
    bare = Workload(op, attrs, ins)
    with_bias = Workload(op, attrs, ins, (Epilogue("Add", (48,)),))
    with_relu = Workload(op, attrs, ins, (Epilogue("Add", (48,)), Epilogue("Relu")))
    samples += [
        Sample("model0", "chosen", bare, out, 100.0, 0.05),
        Sample("model0", "chosen", with_bias, out, 140.0, 0.05),
    ]
    only_fused = _matmul(48, 48, 24)
    samples += [
        Sample("model0", "model", Workload(only_fused[0], only_fused[1], only_fused[2], e), only_fused[3], us, 0.05)
        for e, us in ((with_bias.epilogue, 60.0), (with_relu.epilogue, 80.0))
    ]
    KernelModel(train(samples, rounds=50), {"features": list(features.NAMES)}, measured_table(samples)).save(tmp_path)
    model = cost.make_cost_model(str(tmp_path), "llvm")
    assert model.node_cost(op, attrs, ins, out, False) == pytest.approx(100.0 + cost.EPSILON_US)
    assert model.node_cost(*only_fused, False) == pytest.approx(70.0 + cost.EPSILON_US)
    other = _matmul(40, 48, 48)
    booster_says = float(model.kernels.predict_us(features.featurize([other]))[0])
    assert model.node_cost(*other, False) == pytest.approx(booster_says + cost.EPSILON_US)
    assert booster_says != pytest.approx(120.0, rel=0.05)


def _conv_workload(layout: str, epilogue=(), cin=8, cout=16, size=14, k=3, stride=1, dtype="float32"):
    x = (1, cin, size, size) if layout == "NCHW" else (1, size, size, cin)
    w = (cout, cin, k, k) if layout == "NCHW" else (cout, k, k, cin)
    kernel_layout = "OIHW" if layout == "NCHW" else "OHWI"
    attrs = ((stride, stride), (1, 1, 1, 1), (1, 1), 1, layout, kernel_layout, layout, "")
    return Workload("Conv2d", attrs, (TensorTy(x, dtype), TensorTy(w, dtype)), tuple(epilogue))


def test_layout_pairs_match_one_convolution_in_both_layouts():
    """NCHW and NHWC (or NCHW16c) workloads of the same convolution with the same epilogue ops
    pair up (bias shapes differ between the layouts); another stride, channel count, dtype or
    epilogue does not."""
    from tvm_eqsat.xgb_model import layout_pairs

    relu = Epilogue("Relu")
    bias = {"NCHW": Epilogue("Add", (1, 16, 1, 1)), "NHWC": Epilogue("Add", (1, 1, 1, 16))}
    ws = [
        _conv_workload("NCHW"),  # 0 pairs with 1
        _conv_workload("NHWC"),  # 1
        _conv_workload("NCHW", (bias["NCHW"], relu)),  # 2 pairs with 3
        _conv_workload("NHWC", (bias["NHWC"], relu)),  # 3
        _conv_workload("NHWC", (relu,)),  # 4: no NCHW conv with only a relu
        _conv_workload("NHWC", stride=2),  # 5: no NCHW conv of stride 2
        _conv_workload("NHWC", cin=4),  # 6
        _conv_workload("NHWC", dtype="float16"),  # 7
        Workload(*_matmul(16, 16, 16)[:3]),  # 8: not a conv
    ]
    samples = [Sample("m", "database", w, None, 1.0, 0.0) for w in ws]
    assert sorted(layout_pairs(samples)) == [(0, 1), (2, 3)]
    # nchwc.egg's blocked conv (NCHW16c) pairs with its NCHW conv: 32 channels in, 16 out
    blocked_attrs = ((1, 1), (1, 1, 1, 1), (1, 1), "")
    x, w = TensorTy((1, 2, 14, 14, 16), "float32"), TensorTy((1, 2, 3, 3, 16, 16), "float32")
    ws += [
        _conv_workload("NCHW", (bias["NCHW"], relu), cin=32),  # 9 pairs with 10
        Workload("Conv2dNCHWc", blocked_attrs, (x, w), (Epilogue("Add", (1, 1, 1, 1, 16)), relu)),  # 10
        Workload("Conv2dNCHWc", ((2, 2), *blocked_attrs[1:]), (x, w), ()),  # 11: no NCHW conv of stride 2
    ]
    samples = [Sample("m", "database", w, None, 1.0, 0.0) for w in ws]
    assert sorted(layout_pairs(samples, "NCHW16c")) == [(9, 10)]
    assert sorted(layout_pairs(samples)) == [(0, 1), (2, 3)]
    # and the blocked depthwise conv with the NCHW depthwise one (groups = channels = 32)
    dw_attrs = ((2, 2), (1, 1, 1, 1), (1, 1), 1, "NCHW", "OIHW", "NCHW", "")
    dw = TensorTy((1, 32, 14, 14), "float32"), TensorTy((32, 1, 3, 3), "float32")
    blocked_dw = TensorTy((1, 2, 14, 14, 16), "float32"), TensorTy((1, 2, 3, 3, 16), "float32")
    ws += [
        Workload("Conv2d", dw_attrs[:3] + (32,) + dw_attrs[4:], dw, (relu,)),  # 12 pairs with 13
        Workload("DepthwiseConv2dNCHWc", ((2, 2), *blocked_attrs[1:]), blocked_dw, (relu,)),  # 13
        Workload("DepthwiseConv2dNCHWc", blocked_attrs, blocked_dw, (relu,)),  # 14: no NCHW one of stride 1
    ]
    samples = [Sample("m", "database", w, None, 1.0, 0.0) for w in ws]
    assert sorted(layout_pairs(samples, "NCHW16c")) == [(9, 10), (12, 13)]


def test_layout_decisions_say_whether_each_conv_runs_in_its_fastest_measured_layout():
    """Each conv of a graph whose conv was measured in more than one layout counts once per
    kernel: right where its layout is the fastest measured, else the microseconds it loses;
    a chosen layout the samples lack is timed by ``chosen_us``, and a conv measured in one
    layout only, or not a conv, is no decision."""
    from tvm_eqsat.xgb_model import decision_counts, layout_decisions

    samples = [
        Sample("m", "database", _conv_workload("NCHW"), None, 50.0, 0.0),
        Sample("m", "database", _conv_workload("NHWC"), None, 30.0, 0.0),
        Sample("m", "database", _conv_workload("NCHW", stride=2), None, 20.0, 0.0),  # measured in NCHW only
    ]
    graph = [
        _conv_workload("NHWC"),  # fastest
        _conv_workload("NCHW"),  # loses 20 us
        _conv_workload("NCHW"),  # again: another kernel of the graph
        _conv_workload("NCHW", stride=2),  # one layout measured: no choice
        _conv_workload("NHWC", stride=2),  # the samples lack it: chosen_us times it
        _conv_workload("NHWC", cin=4),  # never measured, not timed: no decision
        Workload(*_matmul(16, 16, 16)[:3]),
    ]
    timed = {_conv_workload("NHWC", stride=2).key(): 26.0}
    decisions = layout_decisions(graph, samples, lambda w: timed.get(w.key()))
    assert [(d["layout"], d["us"]) for d in decisions] == [
        ("NHWC", {"NCHW": 50.0, "NHWC": 30.0}),
        ("NCHW", {"NCHW": 50.0, "NHWC": 30.0}),
        ("NCHW", {"NCHW": 50.0, "NHWC": 30.0}),
        ("NHWC", {"NCHW": 20.0, "NHWC": 26.0}),
    ]
    assert decision_counts(decisions) == {"convs": 4, "fastest": 1, "lost_us": pytest.approx(46.0)}
    assert decision_counts([]) == {"convs": 0, "fastest": 0, "lost_us": 0.0}


def test_epilogue_compute_moves_from_kernels_to_elementwise_nodes(tmp_path):
    """With an element-wise calibration a kernel's measurement loses its epilogue's
    compute (never below KERNEL_FLOOR of it), and the pass charges that compute to the
    element-wise node instead, wherever it stands; folded nodes stay free."""
    from tvm_eqsat.xgb_model import KERNEL_FLOOR, epilogue_us

    op, attrs, ins, out = _matmul(48, 48, 48)
    tanh_ns = 40.0 * 1e3 / out.numel  # a Tanh over the 48x48 output costs 40 us
    calibration = {"flow": "default", "ns_per_element": {"Tanh": tanh_ns}}
    bare = Workload(op, attrs, ins)
    with_tanh = Workload(op, attrs, ins, (Epilogue("Tanh"), Epilogue("Relu")))
    assert epilogue_us(with_tanh, out, calibration["ns_per_element"]) == pytest.approx(40.0)
    assert epilogue_us(bare, out, calibration["ns_per_element"]) == 0.0
    rows = [
        Sample("model0", "chosen", bare, out, 100.0, 0.05, 0.0),
        Sample("model0", "chosen", with_tanh, out, 140.0, 0.05, 40.0),
    ]
    assert [r.kernel_us for r in rows] == pytest.approx([100.0, 100.0])
    assert Sample("m", "chosen", with_tanh, out, 30.0, 0.05, 40.0).kernel_us == pytest.approx(KERNEL_FLOOR * 30.0)
    samples = _synthetic_samples(np.random.default_rng(1)) + rows
    KernelModel(
        train(samples, rounds=50), {"features": list(features.NAMES)}, measured_table(samples), calibration
    ).save(tmp_path)
    model = cost.make_cost_model(str(tmp_path), "llvm")
    assert model.kernels.per_element_ns == {"Tanh": pytest.approx(tanh_ns)}
    assert model.node_cost(op, attrs, ins, out, False) == pytest.approx(100.0 + cost.EPSILON_US)
    roofline = cost.RooflineCostModel("llvm")
    tanh = ("Tanh", (), (out,), out)
    assert model.node_cost(*tanh, False) == pytest.approx(roofline.node_cost(*tanh, False) + 40.0)
    assert model.node_cost(*tanh, True) == roofline.node_cost(*tanh, True)  # folded at compile time
    add = ("Add", (), (out, out), out, False)
    assert model.node_cost(*add) == roofline.node_cost(*add)  # not calibrated: the roofline alone


def test_dataset_prices_epilogues_from_the_calibration_beside_it(tmp_path):
    import csv
    import json

    from tvm_eqsat.xgb_model import DATASET_FIELDS, ELEMENTWISE, dataset_row, load_dataset

    op, attrs, ins, out = _matmul(32, 32, 32)
    w = Workload(op, attrs, ins, (Epilogue("Sigmoid"),))
    with open(tmp_path / "dataset.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=DATASET_FIELDS)
        writer.writeheader()
        writer.writerow(dataset_row("llvm", "default", 0, "m", "model", w, out, 50.0, 45.0, 55.0, 1.0))
    assert load_dataset(tmp_path / "dataset.csv")[0].epilogue_us == 0.0
    (tmp_path / ELEMENTWISE).write_text(json.dumps({"ns_per_element": {"Sigmoid": 2.0}}))
    (sample,) = load_dataset(tmp_path / "dataset.csv")
    assert sample.epilogue_us == pytest.approx(2.0 * out.numel / 1e3)
    assert sample.kernel_us == pytest.approx(50.0 - 2.0 * out.numel / 1e3)


def test_shipped_default_flow_calibration_prices_transcendentals_above_arithmetic():
    model = cost.make_cost_model("auto", "llvm", "default")
    ns = model.kernels.per_element_ns
    assert model.kernels.elementwise["flow"] == "default"
    assert min(ns["Tanh"], ns["Sigmoid"], ns["Exp"]) > 5 * max(ns["Add"], ns["Mul"], ns["Relu"])
    assert all(v >= 0 for v in ns.values())


def _two_steps_by_eight_weights():
    """Full-size NASRNN's input projections: two 1 x 512 rows, each times the same eight
    512 x 512 weights (rows and columns can both be merged, into one 2 x 512 x 4096 matmul)."""
    x0, x1 = tensor("x0", (1, 512)), tensor("x1", (1, 512))

    def body(bb, x0, x1):
        acc = None
        for k in range(8):
            w = const((512, 512), seed=k)
            t = bb.emit(
                relax.op.multiply(relax.op.tanh(relax.op.matmul(x0, w)), relax.op.sigmoid(relax.op.matmul(x1, w)))
            )
            acc = t if acc is None else bb.emit(relax.op.multiply(acc, t))
        return acc

    return module([x0, x1], body)


def _fire_module_expand():
    """Full-size SqueezeNet's first expand: a 1x1 and a 3x3 conv (64 outputs each) on one
    16 x 55 x 55 input, concatenated (the rules can enlarge the 1x1 and merge the two)."""
    x = tensor("x", (1, 16, 55, 55))

    def body(bb, x):
        a = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, const((64, 16, 1, 1), seed=1))))
        b = bb.emit(relax.op.nn.relu(relax.op.nn.conv2d(x, const((64, 16, 3, 3), seed=2), padding=1)))
        return relax.op.concat([a, b], axis=1)

    return module([x], body)


def test_default_flow_model_keeps_an_untuned_fire_module_apart():
    """Untuned, the merged 3x3 conv with 128 outputs takes 48 ms where the 1x1 and 3x3 convs
    it replaces take 0.5 + 21.5 ms (measured); the model trained on small kernels took that
    merge, which made full-size SqueezeNet 0.67x."""
    mod = _fire_module_expand()
    kept, report = tvm_eqsat.optimize(mod, "llvm", flow="default")
    assert {"conv2d-enlarge", "conv2d-merge"} <= set(report.functions["main"].rules_applied)  # on offer
    assert relax_ops(kept)["relax.nn.conv2d"] == 2
    assert_close(mod, kept)


def test_default_flow_model_keeps_untuned_wide_matmuls_apart():
    """Untuned, a matmul slows down faster than its width grows (measured: 2 x 512 x 4096
    takes 17.5 ms where sixteen 1 x 512 x 512 take 16 x 0.6 ms), so the default-flow model
    must not merge what the roofline would; on full-size NASRNN that merge cost 1.6x."""
    mod = _two_steps_by_eight_weights()
    merged, _ = tvm_eqsat.optimize(mod, "llvm", flow="default", cost_model="roofline")
    assert relax_ops(merged)["relax.matmul"] < 16  # the roofline takes the merge
    kept, _ = tvm_eqsat.optimize(mod, "llvm", flow="default")
    assert relax_ops(kept)["relax.matmul"] == 16
    assert_close(mod, kept)


def test_fuse_ops_keeps_a_split_out_of_its_producers_kernel():
    """Why the roofline prices a split as a copy kernel: FuseOps does not put it in its
    producer's kernel; it starts one (here with the relu and add that consume it)."""
    x = tensor("x", (4, 16))
    w = relax.const(np.ones((16, 32), "float32"))

    def body(bb, x):
        y = bb.emit(relax.op.matmul(x, w))
        parts = bb.emit(relax.op.split(y, [16], axis=1))
        a = bb.emit(relax.op.nn.relu(relax.TupleGetItem(parts, 0)))
        return relax.op.add(a, relax.TupleGetItem(parts, 1))

    lowered = tune.fuse_for_tuning(module([x], body), tune.tuning_target({"kind": "llvm"}))
    kernels = [gv.name_hint for gv, f in lowered.functions.items() if not isinstance(f, relax.Function)]
    assert any("split" in k for k in kernels) and any("matmul" in k for k in kernels)
    assert not any("split" in k and "matmul" in k for k in kernels)


def test_roofline_prices_a_split_as_a_copy_kernel_and_a_reshape_as_a_view():
    roofline = cost.RooflineCostModel("llvm")
    whole = TensorTy((64, 512), F32)
    halves = (TensorTy((64, 256), F32),) * 2
    split = roofline.node_cost("Split", ((256,), 1), (whole,), halves, False)
    copy_us = 2 * whole.nbytes * roofline.machine.us_per_byte(2 * whole.nbytes)
    assert split == pytest.approx(cost.EPSILON_US + roofline.machine.launch_us + copy_us)
    reshape = roofline.node_cost("Reshape", ((128, 256),), (whole,), TensorTy((128, 256), F32), False)
    assert reshape < 0.05 * split
    assert roofline.node_cost("Split", ((256,), 1), (whole,), halves, True) == cost.EPSILON_US  # folded


def test_tuned_roofline_tiers_match_the_committed_bandwidth_measurements():
    """The ("llvm", "tuned") machine is calibrated on benchmarks/results/bandwidth-llvm.json:
    its cache tier within the range the cached GEMVs stream at, its memory tier within 25% of
    the GEMVs that overflow the cache (re-measure with scripts/measure_bandwidth.py)."""
    import json
    from pathlib import Path

    rows = json.loads((Path(__file__).resolve().parent.parent / "benchmarks/results/bandwidth-llvm.json").read_text())[
        "rows"
    ]
    machine = cost.MACHINES[("llvm", "tuned")]
    _assert_tiers_fit_gemvs(machine, rows)
    assert machine.us_per_byte(machine.cache_bytes) < machine.us_per_byte(machine.cache_bytes + 1)


def test_transposes_that_move_the_innermost_axis_are_priced_as_the_gathers_they_were_timed_as():
    """A transpose that keeps the innermost axis copies runs; one that moves it gathers.  The
    Zen 5 machine prices the 22 transposes of
    benchmarks/results/bandwidth-llvm-znver5-cold-layout.json (tuned on that VM, timed back to
    back) closer than the copy price alone: a smaller mean log error, and the gathers at their
    time within 2x at the median, where the copy price put them at a third of it (3.3x)."""
    import json
    from pathlib import Path

    assert not cost.gathers((0, 2, 1, 3), (1, 128, 12, 64))  # the innermost axis stays
    assert cost.gathers((0, 2, 3, 1), (1, 64, 56, 56))  # NCHW -> NHWC
    assert not cost.gathers((1, 0, 2), (1, 8, 16))  # only extent-1 axes move
    assert cost.gathers((2, 5, 3, 0, 4, 1), (4, 4, 1, 14, 14, 64))  # Winograd output tiles
    path = Path(__file__).resolve().parent.parent / "benchmarks/results/bandwidth-llvm-znver5-cold-layout.json"
    rows = [r for r in json.loads(path.read_text())["rows"] if r["op"] == "Permute"]
    assert len(rows) == 22
    gathering = cost.RooflineCostModel("llvm", "tuned", 512, "znver5")
    copying = cost.RooflineCostModel("llvm", "tuned", 512, "znver5")
    copying.machine = dataclasses.replace(copying.machine, gather_ns=0.0)
    log_errors: dict[str, list[float]] = {"gathering": [], "copying": []}
    gather_ratios: dict[str, list[float]] = {"gathering": [], "copying": []}  # time over price
    for r in rows:
        x = TensorTy(tuple(r["shapes"][0]), F32)
        out = TensorTy(tuple(x.shape[a] for a in r["attrs"]), F32)
        for name, model in (("gathering", gathering), ("copying", copying)):
            us = model.node_cost("Permute", (tuple(r["attrs"]),), (x,), out, False)
            log_errors[name].append(abs(np.log(us / r["warm_us"])))
            if cost.gathers(r["attrs"], x.shape):
                gather_ratios[name].append(r["warm_us"] / us)
    assert np.mean(log_errors["gathering"]) < 0.8 * np.mean(log_errors["copying"])
    assert np.median(gather_ratios["copying"]) > 3.0
    assert 0.5 < np.median(gather_ratios["gathering"]) < 2.0


def test_the_blocked_layouts_copies_are_priced_as_the_transposes_they_are_built_of():
    """nchwc.egg's ToBlocked and FromBlocked are each a reshape and a transpose that moves the
    innermost axis (ops.py): priced as that transpose, at the gather rate, not as a copy (on Zen
    3 the copies around SqueezeNet's blocked convs cost more than the convs gained,
    family-nchwc-llvm-znver3-cold-tuned-t32.json); a one-pixel image's copy is a reshape, which
    keeps the copy price."""
    model = cost.RooflineCostModel("llvm", "tuned", 256, "znver3")
    assert model.machine.gather_ns > 0
    plain, blocked = TensorTy((1, 128, 55, 55), F32), TensorTy((1, 8, 55, 55, 16), F32)
    permute = model.node_cost("Permute", ((0, 1, 3, 4, 2),), (TensorTy((1, 8, 16, 55, 55), F32),), blocked, False)
    to_blocked = model.node_cost("ToBlocked", (16,), (plain,), blocked, False)
    from_blocked = model.node_cost("FromBlocked", (), (blocked,), plain, False)
    assert to_blocked == from_blocked == pytest.approx(permute)
    copying = cost.RooflineCostModel("llvm", "tuned", 256, "znver3")
    copying.machine = dataclasses.replace(copying.machine, gather_ns=0.0)
    assert to_blocked > 2 * copying.node_cost("ToBlocked", (16,), (plain,), blocked, False)
    assert cost.is_gather("ToBlocked", (16,), (plain,), blocked)
    assert not cost.is_gather("FromBlocked", (), (TensorTy((1, 8, 1, 1, 16), F32),), TensorTy((1, 128, 1, 1), F32))
    assert not cost.is_gather("ToBlocked", (16,), (TensorTy((1, 128, 1, 1), F32),), TensorTy((1, 8, 1, 1, 16), F32))


def test_a_learned_model_prices_lone_reshapes_as_its_roofline_does():
    """Nodes a learned model has no kernel for, a reshape left between two kernels among them,
    cost what the roofline of the same target says (one model prices everything)."""
    learned = cost.make_cost_model("xgb", "llvm", "tuned", 512, "znver5")
    assert isinstance(learned, cost.LearnedCostModel)
    a, b = TensorTy((36, 196, 64), F32), TensorTy((36, 12544), F32)
    roofline = cost.RooflineCostModel("llvm", "tuned", 512, "znver5")
    assert learned.copies_lone_reshapes and roofline.copies_lone_reshapes
    assert learned.reshape_copy_us(a, b) == roofline.reshape_copy_us(a, b) > roofline.machine.launch_us
    assert not cost.make_cost_model("xgb", "llvm", "default").copies_lone_reshapes


def _assert_tiers_fit_gemvs(machine, rows: list[dict]) -> None:
    """A machine's cache tier lies within the range the measured GEMVs that fit it stream
    at, its memory tier within 25% of the median of those that overflow it."""
    from tvm_eqsat.calibration import gemv_rates

    cached, spilled = gemv_rates(rows, machine.cache_bytes)
    assert cached and spilled
    assert min(cached) <= machine.cache_gbs <= max(cached)
    assert machine.bandwidth_gbs == pytest.approx(float(np.median(spilled)), rel=0.25)


def test_tuned_roofline_peak_follows_the_targets_vector_width():
    """Code for an AVX-512 CPU computes faster than generic x86-64 code: a compute-bound
    matmul gets cheaper.  Generic code: each class's peak is the machine's times its share
    of the generic matmuls' measured rate (benchmarks/results/peak-llvm-emeraldrapids.json;
    AVX-512's own rates and memory tiers: the next test).  A depthwise conv computes slower
    than a dense one at either width, and AVX2 lies between the two."""
    import json
    from pathlib import Path

    import tvm

    assert cost.vector_bits(tvm.target.Target("llvm")) == 128  # TVM's plain llvm: generic x86-64
    assert cost.vector_bits(tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512"})) == 512
    assert cost.vector_bits(tvm.target.Target({"kind": "llvm", "mcpu": "haswell"})) == 256
    assert cost.vector_bits(tvm.target.Target("cuda")) == 128
    generic, wide = cost.RooflineCostModel("llvm", "tuned"), cost.RooflineCostModel("llvm", "tuned", 512)
    square = _matmul(512, 512, 512)
    assert wide.node_cost(*square, False) < generic.node_cost(*square, False) / 1.5
    assert cost.RooflineCostModel("llvm", "default", 512).machine == cost.MACHINES[("llvm", "default")]  # not measured
    results = Path(__file__).resolve().parent.parent / "benchmarks/results"
    measured = json.loads((results / "peak-llvm-emeraldrapids.json").read_text())
    rate = {(r["vector_bits"], r["case"]): r["gflop_per_s"] for r in measured["rows"]}
    matmul = np.sqrt(rate[128, "matmul"] * rate[128, "batch-matmul"])
    scale = cost.MACHINES[("llvm", "tuned")].peak_gflops / matmul
    wanted = {"matmul": matmul, "conv": rate[128, "conv"], "depthwise": rate[128, "depthwise"]}
    got = {c: m.peak_gflops for c, m in cost._tuned_llvm_machines(128).items()}
    assert got == pytest.approx({c: r * scale for c, r in wanted.items()}, rel=0.02)
    for bits in (128, 512):
        roof = cost.RooflineCostModel("llvm", "tuned", bits)
        dense, depthwise = _conv(64, 64, 1), _conv(64, 64, 64)
        per_flop = [roof.node_cost(*k, False) / features.flops(*k) for k in (dense, depthwise)]
        assert per_flop[1] > 1.5 * per_flop[0]
    machine = wide._machines["matmul"]
    assert machine == cost._tuned_llvm_machines(512, "emeraldrapids")["matmul"]  # an unnamed CPU: the Xeon
    assert all(m.cache_gbs == machine.cache_gbs for m in [wide.machine, *wide._machines.values()])
    avx2 = cost._tuned_llvm_machines(256)
    for c, m in avx2.items():
        ends = sorted([generic._machines[c].peak_gflops, wide._machines[c].peak_gflops])
        assert ends[0] < m.peak_gflops < ends[1]


def test_each_measured_cpu_is_priced_as_measured_and_others_as_the_xeon_or_between():
    """``measured_cpus`` holds each CPU's own files (peak-llvm-<cpu>.json: compute peaks,
    matmul the geometric mean of the two matmuls; bandwidth-llvm-<cpu>.json: memory tiers
    that fit its GEMVs), at the vector width it was measured at.  The Zen 5's dense conv
    computes faster than the Xeon's, so the same conv is priced cheaper there; an AVX-512
    CPU measured nowhere keeps the Xeon's machine, an AVX2 one the geometric mean of the
    generic machine and the Xeon's, and generic code ignores the CPU."""
    import json
    from pathlib import Path

    results = Path(__file__).resolve().parent.parent / "benchmarks/results"
    assert {"emeraldrapids", "znver5", "znver3"} <= set(cost.measured_cpus())
    for mcpu, (bits, _, _) in cost.measured_cpus().items():
        measured = json.loads((results / f"peak-llvm-{mcpu}.json").read_text())
        rate = {r["case"]: r["gflop_per_s"] for r in measured["rows"] if r["mcpu"] == mcpu}
        assert {r["vector_bits"] for r in measured["rows"] if r["mcpu"] == mcpu} == {bits}
        wanted = {
            "matmul": np.sqrt(rate["matmul"] * rate["batch-matmul"]), "conv": rate["conv"],
            "depthwise": rate["depthwise"],
        }  # fmt: skip
        machines = cost._tuned_llvm_machines(bits, mcpu)
        assert {c: m.peak_gflops for c, m in machines.items()} == pytest.approx(wanted, rel=0.02)
        rows = json.loads((results / f"bandwidth-llvm-{mcpu}.json").read_text())["rows"]
        _assert_tiers_fit_gemvs(machines["matmul"], rows)
    assert cost._tuned_llvm_machines(512, "skylake-avx512") == cost._tuned_llvm_machines(512, "emeraldrapids")
    assert cost._tuned_llvm_machines(128, "znver5") == cost._tuned_llvm_machines(128)
    assert cost._tuned_llvm_machines(256, "haswell") == cost._tuned_llvm_machines(256)  # interpolated
    assert cost._tuned_llvm_machines(256, "znver3") != cost._tuned_llvm_machines(256)
    conv = _conv(64, 64, 1)
    zen, xeon = (cost.make_cost_model("roofline", "llvm", "tuned", 512, m) for m in ("znver5", "emeraldrapids"))
    assert zen.node_cost(*conv, False) < xeon.node_cost(*conv, False) / 1.3


def test_a_model_trained_on_generic_code_says_so_for_a_wider_target(monkeypatch, caplog):
    monkeypatch.setattr(cost, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="tvm_eqsat"):
        cost.make_cost_model("xgb", "llvm", "default")  # generic code, as it was trained on
        assert not caplog.records
        for _ in range(2):
            assert isinstance(cost.make_cost_model("xgb", "llvm", "default", 512), cost.LearnedCostModel)
    assert len(caplog.records) == 1 and "generic x86-64" in caplog.text and "512-bit" in caplog.text


def test_a_cpus_own_tuned_model_is_preferred_and_its_code_is_read_from_its_metadata(
    trained_dir, monkeypatch, caplog, tmp_path
):
    """``cost_models/llvm-<cpu>`` (``train_cost_model.py --mcpu``) prices the tuned flow of
    targets with that ``-mcpu``; other CPUs, the default flow and generic code keep
    ``cost_models/llvm``; a model's vector width comes from the ``mcpu`` it records, so one
    trained for AVX-512 code warns on a generic target and not on its own."""
    import json
    import shutil

    import tvm

    for name, mcpu in (("llvm", None), ("llvm-skylake-avx512", "skylake-avx512")):
        shutil.copytree(trained_dir, tmp_path / name)
        meta = json.loads((trained_dir / "metadata.json").read_text())
        meta.pop("mcpu", None)
        (tmp_path / name / "metadata.json").write_text(json.dumps({**meta, **({"mcpu": mcpu} if mcpu else {})}))
    monkeypatch.setattr(cost, "data_dir", lambda name: tmp_path)
    monkeypatch.setattr(cost, "_warned", set())
    assert cost.shipped_model_dir("llvm", "tuned", "skylake-avx512") == tmp_path / "llvm-skylake-avx512"
    assert cost.shipped_model_dir("llvm", "tuned", "haswell") == tmp_path / "llvm"
    assert cost.shipped_model_dir("llvm", "tuned") == tmp_path / "llvm"
    assert cost.shipped_model_dir("llvm", "default", "skylake-avx512") is None  # no llvm-default here
    target = tvm.target.Target({"kind": "llvm", "mcpu": "skylake-avx512"})
    assert cost.target_cpu(target) == "skylake-avx512" and cost.target_cpu(tvm.target.Target("llvm")) == "generic"
    with caplog.at_level(logging.WARNING, logger="tvm_eqsat"):
        cost.make_cost_model("xgb", "llvm", "tuned", cost.vector_bits(target), cost.target_cpu(target))
        assert not caplog.records  # its own code
        # checking the pass's options, before a target is known, loads nothing and warns of nothing
        # (it had warned that a directory's AVX-512 model met 128-bit code on every such target)
        tvm_eqsat.make_options(cost_model=str(tmp_path / "llvm-skylake-avx512"))
        assert not caplog.records
        cost.make_cost_model(str(tmp_path / "llvm-skylake-avx512"), "llvm", "tuned", 128)
    assert len(caplog.records) == 1 and "skylake-avx512 code (512-bit vectors)" in caplog.text


def test_missing_model_falls_back_to_roofline_with_one_warning(monkeypatch, caplog, tmp_path):
    monkeypatch.setattr(cost, "data_dir", lambda name: tmp_path)
    monkeypatch.setattr(cost, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="tvm_eqsat"):
        a = cost.make_cost_model("xgb", "cuda")
        b = cost.make_cost_model("xgb", "cuda")
    assert isinstance(a, cost.RooflineCostModel) and isinstance(b, cost.RooflineCostModel)
    assert sum("no learned cost model" in r.message for r in caplog.records) == 1


def test_bad_cost_model_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="cost_model"):
        tvm_eqsat.make_options(cost_model=str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="cost_model"):
        tvm_eqsat.make_options(cost_model=3)


@pytest.mark.parametrize("change", ["unknown name", "one fewer"])
def test_model_trained_on_other_features_is_refused(trained_dir, tmp_path, change):
    """A model whose metadata names a feature this version does not compute, or fewer features
    than its booster reads, is refused rather than fed the wrong columns."""
    import json
    import shutil

    shutil.copy(trained_dir / "model.json", tmp_path / "model.json")
    meta = json.loads((trained_dir / "metadata.json").read_text())
    meta["features"] = meta["features"][:-1] + (["log_something_new"] if change == "unknown name" else [])
    (tmp_path / "metadata.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="other features"):
        KernelModel.load(tmp_path)


def _older_booster(samples, rounds: int = 20):
    """A booster trained on ``samples`` without the columns of the ops added since the shipped
    models were trained (the blocked conv, the fast softmax), and those columns' names."""
    import xgboost as xgb

    from tvm_eqsat.xgb_model import sample_features

    older = [n for n in features.NAMES if n not in ("op_Conv2dNCHWc", "op_FastSoftmax")]
    x = sample_features(samples)[:, [features.INDEX[n] for n in older]]
    label = np.log2([s.kernel_us for s in samples])
    return xgb.train({"max_depth": 3}, xgb.DMatrix(x, label=label, feature_names=older), rounds), older


def test_a_model_trained_before_an_op_was_added_reads_its_own_columns_and_leaves_the_op_to_the_roofline(tmp_path):
    """The shipped models were trained before the channel-blocked conv and the fast softmax had
    feature columns: a model trained without those columns (here: ``NAMES`` less them) loads,
    predicts from the columns it was trained on, as trained, and does not claim the new ops,
    which the roofline prices; one trained with them knows them."""
    import xgboost as xgb

    from tvm_eqsat.xgb_model import sample_features

    samples = _synthetic_samples(np.random.default_rng(7))
    x = sample_features(samples)
    y = np.log2([s.kernel_us for s in samples])
    booster, older = _older_booster(samples)
    keep = [features.INDEX[n] for n in older]
    KernelModel(booster, {"features": older}).save(tmp_path)
    model = KernelModel.load(tmp_path)
    expected = np.exp2(booster.predict(xgb.DMatrix(x[:, keep], feature_names=older)))
    np.testing.assert_allclose(model.predict_us(x), expected, rtol=1e-6)
    assert model.knows("Conv2d") and not model.knows("Conv2dNCHWc") and not model.knows("FastSoftmax")
    priced = cost.LearnedCostModel(model, "llvm", "tuned", 512, "znver5")
    data, weight = TensorTy((1, 4, 14, 14, 16), "float32"), TensorTy((4, 4, 3, 3, 16, 16), "float32")
    attrs = ((1, 1), (1, 1, 1, 1), (1, 1), "")
    assert priced.node_cost("Conv2dNCHWc", attrs, (data, weight), data, False) == pytest.approx(
        priced.fallback.node_cost("Conv2dNCHWc", attrs, (data, weight), data, False)
    )
    full = xgb.train({"max_depth": 3}, xgb.DMatrix(x, label=y, feature_names=list(features.NAMES)), 5)
    assert KernelModel(full, {}).knows("Conv2dNCHWc")
    # fine-tuned on a new machine's kernels (train_cost_model.py --finetune-from), it keeps its columns
    fine = train(samples[:20], rounds=5, base=booster)
    assert list(fine.feature_names) == older and fine.num_boosted_rounds() == 25
    assert np.all(np.isfinite(KernelModel(fine, {"features": older}).predict_us(x)))


def test_pass_with_learned_model_keeps_numerics(trained_dir):
    """Three matmuls sharing an input: whatever the learned costs pick, the result is equal."""
    x, w = tensor("x", (32, 64)), [tensor(f"w{i}", (64, 64)) for i in range(3)]

    def body(bb, x, *ws):
        ys = [bb.emit(relax.op.matmul(x, wi)) for wi in ws]
        return bb.emit(relax.op.add(relax.op.add(ys[0], ys[1]), ys[2]))

    mod = module([x, *w], body)
    new, report = tvm_eqsat.optimize(mod, "llvm", cost_model=str(trained_dir))
    assert report.cost_model == "xgb"
    assert report.functions["main"].cost_before > 0
    assert_close(mod, new)


def test_graph_accuracy_summary_counts_orders_and_ties():
    ga = load_script("graph_accuracy")

    def row(model, measured, predicted, reproduced=True, stock_us=100.0, stock_ms=1.0):
        return {
            "model": model,
            "measured_speedup": measured,
            "roofline_speedup": predicted,
            "roofline_stock_us": stock_us,
            "stock_ms": stock_ms,
            "reproduced": reproduced,
        }

    rows = [
        row("a", 1.30, 1.10, stock_us=10, stock_ms=0.1),  # right
        row("b", 0.80, 1.20, stock_us=20, stock_ms=0.3),  # wrong
        row("c", 1.01, 0.90, stock_us=30, stock_ms=0.2),  # a tie: not decided
        row("d", 0.50, 2.00, reproduced=False),  # left out
    ]
    s = ga.summary(rows, "roofline")
    assert (s["pairs"], s["ties"], s["order_right"], s["wrong"]) == (3, 1, 1, ["b"])
    assert s["order_share"] == 0.5
    assert s["spearman_stock"] == pytest.approx(0.5)


def _train_script(dataset, out):
    """scripts/train_cost_model.py on ``dataset`` (30 rounds), in a separate process; its output folder."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent.parent / "scripts" / "train_cost_model.py"
    subprocess.run(
        [sys.executable, str(script), "--dataset", str(dataset), "--out", str(out), "--rounds", "30"],
        check=True,
        capture_output=True,
    )
    return out


def test_training_script_handles_a_one_model_dataset(tmp_path):
    """What ``--from-database`` leaves for one tuned model (one model, no spread): the
    script trains, saves a loadable model, and its report says nothing was held out.
    Rows tuned with fewer trials than ``--min-trials`` are left out, and the report says so."""
    import csv

    from tvm_eqsat.xgb_model import DATASET_FIELDS, TUNED_MIN_TRIALS, dataset_row

    pool = _synthetic_samples(np.random.default_rng(1))
    samples = pool[:40]  # a few repeat: the last row of a kernel wins
    keys = {s.workload.key() for s in samples}
    few_trials = [s for s in pool[40:] if s.workload.key() not in keys][:3]
    assert len(few_trials) == 3
    dataset = tmp_path / "dataset.csv"
    with open(dataset, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=DATASET_FIELDS)
        writer.writeheader()
        for s in samples + few_trials:
            writer.writerow(
                dataset_row(
                    "llvm",
                    "tuned",
                    TUNED_MIN_TRIALS if s in samples else TUNED_MIN_TRIALS // 2,
                    "solo",
                    "database",
                    s.workload,
                    s.out_ty,
                    s.median_us,
                    s.median_us,
                    s.median_us,
                    0.0,
                )
            )
    out = _train_script(dataset, tmp_path / "model")
    model = KernelModel.load(out)
    distinct = len({s.workload.key() for s in samples})
    assert model.metadata["samples"] == distinct and model.metadata["held_out_by_model"] is None
    report = (out / "REPORT.md").read_text()
    assert "one model only" in report and "Held out **by model**" not in report
    assert f"Left out: 3 tuned-flow rows tuned with fewer than {TUNED_MIN_TRIALS} trials" in report
    assert model.metadata["flows"] == [f"tuned ({TUNED_MIN_TRIALS} trials)"]


def test_training_report_scores_the_models_without_the_grid(tmp_path):
    """Held out by model, the grid counts as a model of its own; the report also scores the
    benchmark models' kernels alone, the figure comparable to a dataset without a grid."""
    import csv

    from tvm_eqsat.xgb_model import DATASET_FIELDS, GRID_MODEL, dataset_row

    pool = _synthetic_samples(np.random.default_rng(2))
    unique = list({s.workload.key(): s for s in pool}.values())[:60]
    owners = ["a", "b", GRID_MODEL]
    dataset = tmp_path / "dataset.csv"
    with open(dataset, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=DATASET_FIELDS)
        writer.writeheader()
        for k, s in enumerate(unique):
            m = s.median_us
            writer.writerow(
                dataset_row("llvm", "default", 0, owners[k % 3], "model", s.workload, s.out_ty, m, m, m, 0.0)
            )
    out = _train_script(dataset, tmp_path / "model")
    meta = KernelModel.load(out).metadata
    assert meta["held_out_by_model"]["n"] == 60
    assert meta["held_out_by_model_without_grid"]["n"] == 40
    assert "| **all but the grid** | 40 |" in (out / "REPORT.md").read_text()


def test_flow_picks_the_shipped_model_of_that_build_flow():
    """``flow`` selects the learned model trained on kernels built that way; an unknown
    flow is a clear error, and the roofline does not depend on it."""
    tuned = cost.make_cost_model("xgb", "llvm", "tuned")
    default = cost.make_cost_model("xgb", "llvm", "default")
    assert isinstance(tuned, cost.LearnedCostModel) and isinstance(default, cost.LearnedCostModel)
    assert all(f.startswith("tuned") for f in tuned.kernels.metadata["flows"])
    assert default.kernels.metadata["flows"] == ["default"]
    # auto: the learned model where it ranks kernels better (default flow), else the roofline
    assert isinstance(cost.make_cost_model("auto", "llvm", "default"), cost.LearnedCostModel)
    assert isinstance(cost.make_cost_model("auto", "llvm", "tuned"), cost.RooflineCostModel)
    cuda = cost.make_cost_model("auto", "cuda", "default")  # timed on the H100 through bundles
    assert isinstance(cuda, cost.LearnedCostModel) and cuda.kernels.metadata["target"] == "cuda"
    assert "NHWC" in cost.priced_layouts(cuda)  # NHWC convs measured: the nhwc family runs on CUDA too
    # CUDA's tuned-flow model (the H200's offline tuning) ranks held-out kernels better than the
    # roofline but is far from the issue's targets and unchecked end to end: xgb only when asked
    assert isinstance(cost.make_cost_model("auto", "cuda", "tuned"), cost.RooflineCostModel)
    cuda_tuned = cost.make_cost_model("xgb", "cuda", "tuned")
    assert isinstance(cuda_tuned, cost.LearnedCostModel)
    assert all(f.startswith("tuned") for f in cuda_tuned.kernels.metadata["flows"])
    with pytest.raises(ValueError, match="flow"):
        tvm_eqsat.make_options(flow="fast")
    with pytest.raises(ValueError, match="flow"):
        cost.make_cost_model("xgb", "llvm", "fast")


def test_collect_gathers_the_kernels_the_pass_chose():
    """``collect_kernels.py --sources chosen``: the kernels of the module the pass
    returns for the flow, as FuseOps forms them (so measuring them teaches the model
    exactly where extraction trusted it)."""
    from tvm_eqsat import models
    from tvm_eqsat.measure import module_workloads

    script = load_script("collect_kernels")
    model = models.resnet_block(channels=16, mid=8, size=8)
    chosen = script.chosen_workloads(model, {"kind": "llvm"}, "default")
    new, _ = tvm_eqsat.optimize(model.mod, "llvm", flow="default")
    assert chosen and [w.key() for w in chosen] == [w.key() for w in module_workloads(new)]
    assert all(w.op in features.KERNEL_OPS for w in chosen)


def test_collect_grid_belongs_to_no_model_and_builds():
    """``collect_kernels.py --sources grid``: matmuls and convs over widths under the model
    name ``grid`` (never held out with a benchmark model), no model imported; each is a
    native workload whose one-kernel module Relax accepts, convs keeping their sides and
    coming in both layouts."""
    from tvm_eqsat.measure import kernel_out_ty

    script = load_script("collect_kernels")
    from tvm_eqsat.xgb_model import Sample, layout_pairs

    items = script.gather(["no-such-model"], 0, 0, sources=("grid",))
    convs = [w for _, _, w in items if w.op == "Conv2d"]
    per_layout = len(script.GRID_CONVS) + len(script.GRID_WIDE_CONVS) + 2 * len(script.GRID_GROUPED_CONVS)
    assert len(items) == len(script.GRID_MATMULS) + 2 * per_layout
    assert {(m, s) for m, s, _ in items} == {("grid", "grid")}
    widths = {w.inputs[1].shape[-1] for _, _, w in items if w.op == "Matmul"}
    assert min(widths) * 16 <= max(widths)  # wide enough to show what merges do
    for w in convs:  # same padding: the input's sides over the stride, in its own layout
        ty = kernel_out_ty(w)
        sides = (2, 3) if w.attrs[4] == "NCHW" else (1, 2)
        stride = w.attrs[0][0]
        assert [ty.shape[i] for i in sides] == [-(-w.inputs[0].shape[i] // stride) for i in sides]
    grouped = [w for w in convs if w.attrs[3] > 1]
    assert {w.attrs[3] for w in grouped} >= {2, 4, 8, 32} and any(w.attrs[3] == w.inputs[0].shape[1] for w in grouped)
    assert {len(w.epilogue) for w in grouped} == {0, 2}  # bare, and with a bias add and relu
    # every conv comes in both layouts: layout pairs that belong to no benchmark model
    samples = [Sample("grid", "grid", w, kernel_out_ty(w), 1.0, 0.0) for w in convs]
    assert len(layout_pairs(samples)) == per_layout


def test_bulk_featurize_equals_one_item_at_a_time():
    """Every kernel e-node of a saturated e-graph, plus odd items (tuple outputs, a
    missing input type, 1-D, rank-7 and no operands, equal types in new objects, pooling
    and norms that take the one-at-a-time path)."""
    from tvm_eqsat.egraph import TensorEGraph
    from tvm_eqsat.graph import TensorTy, graph_from_block
    from tvm_eqsat.rules import load_library
    from tvm_eqsat.saturate import saturate

    library = load_library()
    items = []
    for name in ("inception-v3", "bert-base"):
        g = graph_from_block(models.SMALL[name]().mod["main"].body.blocks[0])
        eg = TensorEGraph(g, library.program())
        saturate(eg, library.families, node_limit=20000, iter_limit=30, deadline=time.monotonic() + 60)
        snap = eg.snapshot()
        items += [
            (n.op, n.attrs, [snap.ty[k] for k in n.children], snap.ty[c])
            for c, nodes in enumerate(snap.classes)
            for n in nodes
            if n.op in features.KERNEL_OPS
        ]
    t = TensorTy
    conv = next(i for i in items if i[0] == "Conv2d")
    items += [
        ("Matmul", ("",), [t((4, 8), "float32"), None], t((4, 3), "float32")),
        (
            "BatchNorm",
            (1, 1e-5, True, True, 0.1, False),
            [t((1, 3, 5, 5), "float16")] + [t((3,), "float16")] * 4,
            (t((1, 3, 5, 5), "float16"), t((3,), "float16"), t((3,), "float16")),
        ),
        ("Concat", (0,), [t((2,), "float32"), t((3,), "float32")], None),
        ("Matmul", ("",), [t((5,), "float32"), t((5, 3), "float32")], t((3,), "float32")),  # 1-D operands
        ("Matmul", ("",), [t((2, 4, 5), "float16"), t((5,), "float16")], t((2, 4), "float16")),
        ("Concat", (0,), [t(tuple(range(1, 8)), "float32")] * 2, t((2, *range(2, 8)), "float32")),  # rank 7
        ("Concat", (0,), [], t((0,), "float32")),  # no inputs
        ("Conv2d", conv[1], [t((1, 3, 5, 5), "float32")], t((1, 4, 5, 5), "float32")),  # no weight
        ("Conv2d", conv[1], [t(c.shape, c.dtype) for c in conv[2]], t(conv[3].shape, conv[3].dtype)),  # new objects
    ]
    ops_seen = {i[0] for i in items}
    assert {"Conv2d", "Matmul", "Concat", "MaxPool2d", "LayerNorm", "Softmax"} <= ops_seen
    reference = np.stack([features.features(*i) for i in items])
    np.testing.assert_array_equal(features.featurize(items), reference)


def _save_shipped(directory, samples: list[Sample], metadata: dict, booster=None) -> None:
    """A small "shipped" model trained on ``samples`` (or ``booster``), with the dataset.csv of
    their rows that ``held_out_e2e.held_out_model`` trains again from."""
    import csv

    from tvm_eqsat.xgb_model import DATASET_FIELDS, dataset_row

    KernelModel(booster or train(samples, rounds=20), metadata).save(directory)
    with open(directory / "dataset.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=DATASET_FIELDS)
        writer.writeheader()
        for s in samples:
            us = s.median_us
            writer.writerow(dataset_row("llvm", "default", 0, s.model, "model", s.workload, s.out_ty, us, us, us, 0.0))


def test_held_out_model_never_saw_the_model_it_is_asked_about(tmp_path):
    """``held_out_e2e.py`` trains the shipped model again without one model's rows: that
    model's kernels leave the training set and the measurement table (the pass would
    otherwise answer them from their measurements), the others stay."""
    samples = _synthetic_samples(np.random.default_rng(2))
    shipped = tmp_path / "shipped"
    _save_shipped(shipped, samples, {"features": list(features.NAMES), "target": "llvm"})
    script = load_script("held_out_e2e")
    held = script.held_out_model(shipped, "model0", 20, tmp_path / "held")
    rows = load_dataset(shipped / "dataset.csv")  # a kernel's last row wins
    kept = {s.workload.key() for s in rows if s.model != "model0"}
    dropped = {s.workload.key() for s in rows if s.model == "model0"}
    assert kept and dropped and set(held.measured) == kept
    assert held.metadata["held_out"] == "model0"
    assert KernelModel.load(tmp_path / "held").metadata["samples"] == len(kept)
    assert "extrapolation" not in held.metadata  # extrapolates as the shipped model does: here, not
    # a shipped model that predates some feature columns: trained again, it has this version's
    older_dir = tmp_path / "older"
    booster, older = _older_booster(samples)
    _save_shipped(older_dir, samples, {"features": older, "target": "llvm"}, booster)
    again = script.held_out_model(older_dir, "model0", 20, tmp_path / "held-older")
    assert again.features == list(features.NAMES) and KernelModel.load(tmp_path / "held-older").knows("Conv2dNCHWc")


def test_a_held_out_model_extrapolates_from_its_own_largest_conv(tmp_path):
    """Where the shipped model extrapolates convolutions, the held-out model does too, from
    the largest conv it kept: a held-out model's biggest convs are priced beyond its range."""
    from tvm_eqsat.xgb_model import extrapolation

    samples = _conv_samples(lambda flops: 1.0 + flops / 2e4)
    for s in samples:  # the 64-channel convs are one model's, the rest another's
        s.model = "wide" if 64 in s.workload.inputs[1].shape[:2] else "narrow"
    shipped = tmp_path / "shipped"
    meta = {"features": list(features.NAMES), "target": "llvm", "extrapolation": extrapolation(samples)}
    _save_shipped(shipped, samples, meta)
    held = load_script("held_out_e2e").held_out_model(shipped, "wide", 20, tmp_path / "held")
    kept = held.metadata["extrapolation"]["Conv2d"]["max_log2_flops"]
    assert kept < meta["extrapolation"]["Conv2d"]["max_log2_flops"]
    assert kept == extrapolation([s for s in samples if s.model == "narrow"])["Conv2d"]["max_log2_flops"]


def test_out_of_sample_sections_stay_first_in_the_graph_report(tmp_path):
    """``held_out_e2e.py`` puts its figures at the top of GRAPH_REPORT.md, replacing its own
    earlier section; ``graph_accuracy.py`` finds them again to keep them first."""
    ga = load_script("graph_accuracy")
    report = tmp_path / "GRAPH_REPORT.md"
    report.write_text("# Graph-level accuracy (llvm)\n\nin-sample table\n")
    ga.put_first(report, "held-out-e2e-llvm-default-small", "## old figures")
    ga.put_first(report, "held-out-e2e-llvm-default-small", "## new figures")
    ga.put_first(report, "held-out-e2e-llvm-default", "## full-size figures")
    text = report.read_text()
    assert text.startswith("# Graph-level accuracy (llvm)\n\n<!-- held-out-e2e-llvm-default:")
    assert "old figures" not in text and text.count("new figures") == 1
    assert text.index("full-size figures") < text.index("new figures") < text.index("in-sample table")
    blocks = ga.held_out_blocks(report)
    assert len(blocks) == 2 and "full-size figures" in blocks[0] and blocks[1].endswith("-->")


def _on_new_machine(samples, factor: float):
    """The same kernels timed on a machine ``factor`` times slower."""
    return [Sample(s.model, s.source, s.workload, s.out_ty, s.median_us * factor, s.spread) for s in samples]


def test_few_shot_curve_never_shows_a_model_its_own_kernels():
    """``few_shot.py`` predicts each model's kernels with that model held out on both machines:
    changing its measurements changes none of its predictions, and the fresh kernels of the
    others move the old machine's booster towards the new machine's times."""
    fs = load_script("few_shot")
    old = _synthetic_samples(np.random.default_rng(3))
    new = _on_new_machine(old, 3.0)
    kw = {"ks": (0, 40), "seeds": (0,), "rounds": 60}
    base = fs.curve(old, new, **kw)
    changed = [s if s.model != "model1" else _on_new_machine([s], 7.0)[0] for s in new]
    changed_old = [s if s.model != "model1" else _on_new_machine([s], 0.2)[0] for s in old]
    again = fs.curve(changed_old, changed, **kw)
    mine = np.array([s.model == "model1" for s in new])
    for key in base:
        np.testing.assert_allclose(again[key][mine], base[key][mine], rtol=1e-6)
    scores = fs.score(new, base)
    assert scores[("old", 0, 0)]["within_20pct"] < 0.2  # three times too fast everywhere
    for method in fs.METHODS:
        assert scores[(method, 40, 0)]["within_20pct"] > scores[("old", 0, 0)]["within_20pct"] + 0.3, method
    rows = fs.summary(scores, kw["ks"], kw["seeds"])
    assert [(r["method"], r["k"]) for r in rows] == [("old", 0)] + [(m, 40) for m in fs.METHODS]
    need = fs.kernels_needed(rows, scores["all"], "rescaled")
    assert need["ceiling"] in (40, None) and fs.kernels_needed(rows, {"spearman": 0, "within_20pct": 0}, "scratch") == {
        "targets": fs.kernels_needed(rows, scores["all"], "scratch")["targets"],
        "ceiling": 0,
    }


def test_few_shot_residual_boosters_extrapolate_to_a_larger_model():
    """``few_shot.py --objective residual`` trains every booster on the roofline's correction,
    as the tuned-flow models are trained: where the held-out model's matmuls are all larger
    than any other model's and latency is the roofline times 2.5, the residual ceiling
    predicts them within 20%, where trees on plain latency stop at the largest kernel seen."""
    from tvm_eqsat.xgb_model import roofline_from_features, sample_features

    fs = load_script("few_shot")
    samples = []
    for i, size in enumerate([16, 24, 32, 48, 64, 96, 128, 192] * 3 + [512, 768, 1024] * 3):
        op, attrs, ins, ty = _matmul(size, size + 8 * (i % 3), size)
        samples.append(Sample("big" if size >= 512 else f"model{i % 2}", "model", Workload(op, attrs, ins), ty, 1.0, 0))
    x = sample_features(samples)
    new = [dataclasses.replace(s, median_us=2.5 * float(r)) for s, r in zip(samples, roofline_from_features(x))]
    big = np.array([s.model == "big" for s in new])
    y = np.array([s.median_us for s in new])
    kw = {"ks": (0,), "seeds": (0,), "rounds": 60}
    err = {
        objective: np.abs(fs.curve(new, new, objective=objective, **kw)["all"][big] / y[big] - 1)
        for objective in ("latency", "residual")
    }
    assert err["residual"].max() < 0.2, err["residual"]
    assert err["latency"].max() > 0.5, err["latency"]


def test_few_shot_residual_boosters_learn_over_each_machines_own_roofline():
    """With ``settings`` (each model directory's metadata ``baseline``), the boosters learn
    their correction over the pass's roofline for that machine and predict over the new
    machine's: where every kernel takes 2.5x that roofline (Zen 5's, one peak per kind of
    kernel), the old booster, the fine-tuned one and the ceiling all land within 5%."""
    from tvm_eqsat.xgb_model import baseline_spec, roofline_baseline, sample_items

    fs = load_script("few_shot")
    spec = baseline_spec("llvm", "tuned", 512, "znver5")
    samples = []
    for i, size in enumerate([16, 24, 32, 48, 64, 96, 128, 192] * 3):
        op, attrs, ins, ty = _matmul(size, size + 8 * (i % 3), size)
        samples.append(Sample(f"model{i % 3}", "model", Workload(op, attrs, ins), ty, 1.0, 0))
    roof = roofline_baseline(sample_items(samples), spec)
    new = [dataclasses.replace(s, median_us=2.5 * float(r)) for s, r in zip(samples, roof)]
    y = np.array([s.median_us for s in new])
    preds = fs.curve(
        new,
        new,
        ks=(0, 10),
        seeds=(0,),
        rounds=60,
        objective="residual",
        settings=({"baseline": spec}, {"baseline": spec, "max_depth": 2}),
    )
    for key in ("all", ("old", 0, 0), ("fine-tuned", 10, 0)):
        assert np.abs(preds[key] / y - 1).max() < 0.05, key
    np.testing.assert_allclose(preds[("roofline", 0, 0)], y / 2.5, rtol=1e-6)  # the roofline, nothing learned
    plain = fs.curve(new, new, ks=(0,), seeds=(0,), rounds=60, objective="residual")
    assert ("roofline", 0, 0) not in plain  # a plain baseline is not what the pass prices with


def test_ranking_objective_orders_held_out_kernels():
    """``compare_objectives.py``'s ranking booster, trained on two models' kernels, orders the
    third's by latency (its score is no latency, only an order)."""
    from scipy.stats import spearmanr

    co = load_script("compare_objectives")
    samples = _synthetic_samples(np.random.default_rng(4))
    scores = co.ranking_scores(samples, rounds=60)
    for model in ("model0", "model1", "model2"):
        mine = [i for i, s in enumerate(samples) if s.model == model]
        rho = spearmanr([samples[i].median_us for i in mine], scores[mine]).statistic
        assert rho > 0.8, (model, rho)


def test_linear_correction_extrapolates_a_rooflines_power_law_error():
    """``compare_objectives.linear_correction``: where measured times are the roofline's to a
    power (a peak that falls as kernels grow), the held-out model's kernels, larger than any
    the other models had, are predicted within 2%; the bare roofline misses them by over 20%."""
    co = load_script("compare_objectives")
    samples, roof = [], []
    for i, size in enumerate((16, 32, 64, 128, 256, 512, 1024, 2048, 4096)):
        op, attrs, ins, ty = _matmul(size, size, 64)
        r = 1.0 + size * size * 64 / 2e5
        samples.append(Sample(f"model{i // 3}", "model", Workload(op, attrs, ins), ty, 3.0 * r**1.1, 0.0))
        roof.append(r)
    y, roof = np.array([s.median_us for s in samples]), np.array(roof)
    pred = co.linear_correction(samples, roof, ridge=1e-6)
    held = np.array([s.model == "model2" for s in samples])  # the three largest: predicted from the others
    assert np.all(np.abs(pred[held] / y[held] - 1) < 0.02), pred[held] / y[held]
    assert np.all(np.abs(roof[held] / y[held] - 1) > 0.2)


def test_pair_orders_count_decisive_pairs_and_the_time_choices_cost():
    """``train_cost_model.pair_orders``: near ties (within 5%) leave the decisive count, a
    predictor's tie counts as wrong and as NCHW, and each choice costs what the chosen
    layout measured; always-NCHW and always-NHWC come as baselines."""
    tcm = load_script("train_cost_model")
    y = np.array([10.0, 5.0, 10.0, 10.2, 4.0, 8.0])  # pairs (NCHW, NHWC): NHWC 2x faster, a tie, NCHW 2x faster
    pairs = [(0, 1), (2, 3), (4, 5)]
    pred = np.array([1.0, 2.0, 3.0, 3.0, 1.0, 2.0])  # wrong, tie, right
    out = tcm.pair_orders(pairs, y, {"m": pred})
    assert (out["pairs"], out["nhwc_faster"], out["decisive"]) == (3, 1, 2)
    assert out["m"] == {"right": 1, "ties": 1, "decisive_right": 1, "time_over_best": (10 + 10 + 4) / (5 + 10 + 4)}
    assert out["always NCHW"]["right"] == 2 and out["always NCHW"]["decisive_right"] == 1
    assert out["always NHWC"]["time_over_best"] == pytest.approx((5 + 10.2 + 8) / 19)


def test_an_unset_out_dtype_finds_the_spelled_out_measurement():
    """A module built with ``out_dtype=None`` (attribute "") asks about the same kernel as an
    imported model whose out_dtype is spelled out: the measurement answers both; inputs of
    two dtypes keep their attribute as it is."""
    from tvm_eqsat.xgb_model import bare_key

    ins = [TensorTy((2, 512), "float32"), TensorTy((512, 512), "float32")]
    model = KernelModel(None, {}, {bare_key("Matmul", ("float32",), ins): 1167.5})
    assert model.lookup_us("Matmul", ("",), ins) == 1167.5
    assert bare_key("Conv2d", ("NCHW", ""), ins) == bare_key("Conv2d", ("NCHW", "float32"), ins)
    mixed = [TensorTy((2, 512), "int8"), TensorTy((512, 512), "float32")]
    assert bare_key("Matmul", ("",), mixed) != bare_key("Matmul", ("int8",), mixed)


def test_a_model_that_lost_to_the_roofline_is_its_measurements():
    """Metadata ``unmeasured: roofline`` (a booster that ranked held-out kernels worse than
    the roofline): measured kernels cost their measurements, every other kernel the
    roofline at the target's vector width times ``roofline_scale``; the booster is never
    asked (there is none here)."""
    from tvm_eqsat.xgb_model import bare_key

    op, attrs, ins, out = _matmul(64, 64, 64)
    meta = {"unmeasured": "roofline", "roofline_scale": 3.0}
    model = cost.LearnedCostModel(KernelModel(None, meta, {bare_key(op, attrs, ins): 7.0}), "llvm", "tuned", 512)
    assert model.node_cost(op, attrs, ins, out, False) == pytest.approx(7.0)
    other = _matmul(128, 64, 256)
    roof = cost.RooflineCostModel("llvm", "tuned", 512).node_cost(*other, False)
    assert model.node_cost(*other, False) == pytest.approx(3.0 * roof)
    assert roof != cost.RooflineCostModel("llvm", "tuned", 128).node_cost(*other, False)


def test_the_booster_answers_unmeasured_kernels_only_where_it_beat_the_roofline():
    """``train_cost_model.unmeasured_predictor``: auto keeps the booster where its held-out
    Spearman is at least the roofline's (on the kernels of 10 us or more where there are
    enough of them, ``judged_on``) or nothing was held out; an explicit choice wins;
    ``roofline_scale`` is the median ratio of the bare kernels' measurements to the roofline."""
    tcm = load_script("train_cost_model")
    assert tcm.unmeasured_predictor("auto", {"spearman": 0.45}, {"spearman": 0.6}) == "roofline"
    assert tcm.unmeasured_predictor("auto", {"spearman": 0.9}, {"spearman": 0.6}) == "booster"
    assert tcm.unmeasured_predictor("auto", None, {"spearman": 0.6}) == "booster"
    assert tcm.unmeasured_predictor("roofline", {"spearman": 0.9}, {"spearman": 0.6}) == "roofline"
    # judged on the long kernels where there are enough of them: there the roofline can win
    overall, roof = {"n": 100, "spearman": 0.91}, {"n": 100, "spearman": 0.90}
    big, roof_big = {"n": 40, "spearman": 0.57}, {"n": 40, "spearman": 0.82}
    judged = tcm.judged_on(overall, roof, big, roof_big)
    assert judged[:2] == (big, roof_big) and tcm.unmeasured_predictor("auto", *judged[:2]) == "roofline"
    few = {"n": tcm.MIN_BIG - 1, "spearman": 0.57}
    assert tcm.judged_on(overall, roof, few, roof_big)[:2] == (overall, roof)
    undefined = {"n": 40, "spearman": float("nan")}  # a degenerate split ranks nothing
    assert tcm.judged_on(overall, roof, undefined, roof_big)[:2] == (overall, roof)
    op, attrs, ins, out = _matmul(8, 8, 8)
    samples = [Sample("m", "s", Workload(op, attrs, ins), out, us, 0.0) for us in (2.0, 8.0, 40.0)]
    assert tcm.roofline_scale(samples, np.array([1.0, 2.0, 4.0])) == pytest.approx(4.0)


def test_two_tunings_of_the_same_kernels_give_the_labels_ceiling():
    """``train_cost_model.repeatability``: only kernels both databases tuned are compared,
    one tuning's times as the prediction of the other's, with how far apart their records
    are, and the long kernels apart; fewer than three shared kernels give nothing."""
    tcm = load_script("train_cost_model")

    def samples(times: dict) -> list:
        return [Sample("m", "s", Workload(*_matmul(n, 8, 8)[:3]), None, us, 0.0) for n, us in times.items()]

    first = samples({4: 1.0, 8: 10.0, 16: 20.0, 32: 40.0, 64: 80.0})
    again = samples({4: 1.05, 8: 11.0, 16: 50.0, 32: 40.0, 128: 1.0})  # 128: tuned only the second time
    out = tcm.repeatability(first, again)
    assert out["n"] == 4 and out["spearman"] == pytest.approx(0.8)
    assert out["within_20pct"] == pytest.approx(3 / 4) and out["median_ratio"] == pytest.approx(1.075)
    assert out["over_1_5x"] == pytest.approx(1 / 4) and out["over_2x"] == pytest.approx(1 / 4)
    # the kernels of 10 us or more (by the first tuning) on their own
    assert out["big"]["n"] == 3 and out["big"]["spearman"] == pytest.approx(0.5)
    assert out["big"]["within_20pct"] == pytest.approx(2 / 3)
    assert out["log_ratios"] == pytest.approx(np.log([1.05, 1.1, 2.5, 1.0]).tolist())
    assert tcm.repeatability(first, again[:2]) is None


def test_the_choice_pairs_ceiling_is_how_often_a_second_tuning_keeps_the_order():
    """``train_cost_model.pair_ceiling``: with no lottery a second tuning keeps every
    order; a pair 2x apart survives a lottery of at most 1.3x either way, a near tie is
    decided by it (kept in three draws of four: the two kernels' ratios, +-1.3x with
    both signs counted, cancel in half of them and go the pair's way in a quarter)."""
    tcm = load_script("train_cost_model")
    y = np.array([10.0, 5.0, 10.0, 10.1, 4.0, 8.0])  # NHWC 2x faster, a near tie, NCHW 2x faster
    pairs = [(0, 1), (2, 3), (4, 5)]
    assert tcm.pair_ceiling(pairs, y, [0.0]) == {"right": 1.0, "decisive_right": 1.0}
    out = tcm.pair_ceiling(pairs, y, [np.log(1.3)], draws=4000)
    assert out["decisive_right"] == 1.0
    assert out["right"] == pytest.approx((2 + 0.75) / 3, abs=0.02)


def test_the_choice_pairs_tuned_twice_give_the_measured_ceiling():
    """``train_cost_model.pairs_tuned_twice``: over the pairs whose both kernels the A/A
    database holds, the share the second tuning orders as the first did; a pair with one
    kernel tuned once is left out, and with none tuned twice there is nothing to say."""
    tcm = load_script("train_cost_model")

    def sample(n: int, us: float) -> Sample:
        return Sample("m", "s", Workload(*_matmul(n, 8, 8)[:3]), None, us, 0.0)

    first = [sample(4, 10.0), sample(8, 5.0), sample(16, 10.0), sample(32, 10.2), sample(64, 4.0), sample(128, 8.0)]
    pairs = [(0, 1), (2, 3), (4, 5)]  # NHWC 2x faster, a near tie, NCHW 2x faster
    # the second tuning: the first pair kept, the near tie turned, the third pair's NHWC kernel not tuned again
    again = [sample(4, 12.0), sample(8, 7.0), sample(16, 9.0), sample(32, 8.0), sample(64, 4.0)]
    out = tcm.pairs_tuned_twice(pairs, first, again)
    assert {k: out[k] for k in ("n", "right", "decisive", "decisive_right")} == {
        "n": 2,
        "right": 0.5,
        "decisive": 1,
        "decisive_right": 1.0,
    }
    # NCHW kernels 10 -> 12 and 10 -> 9; NHWC 5 -> 7 and 10.2 -> 8
    assert out["nchw_median_ratio"] == pytest.approx((1.2 + 10 / 9) / 2)
    assert out["nhwc_median_ratio"] == pytest.approx((1.4 + 10.2 / 8) / 2)
    assert out["predictor_max"] == 0.5  # tunings that agree by chance: nothing to predict
    assert tcm.pairs_tuned_twice(pairs, first, again[:1]) is None
    text = "\n".join(tcm._pair_ceiling_lines({"right": 0.75, "decisive_right": 0.77}, out))
    assert "Measured: 2 of these pairs" in text and "ordered 50% of them" in text and "100% of its 1 decisive" in text
    assert "at most 50% of one tuning's pairs" in text
    # 41 of 50 pairs kept: agreement 0.82 = p^2 + (1 - p)^2 at p = 0.9
    many = [sample(2 * k + 1 + i, us) for k in range(50) for i, us in enumerate((10.0, 5.0))]  # NHWC 2x faster
    turned = [
        sample(2 * k + 1 + i, us) for k in range(50) for i, us in enumerate((10.0, 5.0) if k < 41 else (5.0, 10.0))
    ]
    pairs50 = [(2 * k, 2 * k + 1) for k in range(50)]
    assert tcm.pairs_tuned_twice(pairs50, many, turned)["predictor_max"] == pytest.approx(0.9)
    assert tcm.pairs_tuned_twice(pairs50, many, many)["predictor_max"] == 1.0


def test_the_shipped_avx512_model_is_found_for_its_cpu_and_prices_layouts():
    """``cost_models/llvm-emeraldrapids`` (trained on that CPU's committed tuning database)
    is what ``xgb`` loads for an ``-mcpu=emeraldrapids`` target, records its CPU, and has
    measured convs in both layouts, so the layout family runs under it."""
    directory = cost.shipped_model_dir("llvm", "tuned", "emeraldrapids")
    assert directory is not None and directory.name == "llvm-emeraldrapids"
    model = cost.make_cost_model("xgb", "llvm", "tuned", 512, "emeraldrapids")
    assert model.kernels.metadata["mcpu"] == "emeraldrapids"
    assert "NHWC" in cost.priced_layouts(model)


def test_ab_cost_models_times_both_rewrites_and_checks_them(tmp_path):
    """``ab_cost_models.py``: the pass under two cost models, both rewrites built, compared
    with each other and timed in one process; the results name which ran faster."""
    ab = load_script("ab_cost_models")
    stem = tmp_path / "ab"
    assert ab.main(["--a", "roofline", "--b", "xgb", "--small", "--models", "nasrnn", "--repeat", "2", "--min-ms", "1",
                    "--out", str(stem)]) == 0  # fmt: skip
    doc = json.loads(stem.with_suffix(".json").read_text())
    row = doc["rows"]["nasrnn"]
    assert row["a"]["ms"] > 0 and row["b"]["ms"] > 0 and row["max_rel_diff"] < 1e-4
    assert row["b_over_a"] == row["a"]["ms"] / row["b"]["ms"]
    assert "| nasrnn |" in stem.with_suffix(".md").read_text()


def test_ab_cost_models_fails_a_wrong_build_after_writing_its_row(tmp_path, monkeypatch):
    """Two rewrites whose builds compute different things are a failure, not an A/B result:
    the row is written, marked by its difference, and the script returns 1 naming the model."""
    ab = load_script("ab_cost_models")
    arm = {"ms": 1.0, "p10_p90": [1.0, 1.0], "predicted_speedup": 1.0, "changes": [], "module_hash": "h"}
    monkeypatch.setattr(
        ab, "compare", lambda *a, **k: {"a": arm, "b": dict(arm), "b_over_a": 1.0, "max_rel_diff": 2e24}
    )
    stem = tmp_path / "ab"
    assert ab.main(["--a", "roofline", "--b", "xgb", "--small", "--models", "nasrnn", "--out", str(stem)]) == 1
    assert json.loads(stem.with_suffix(".json").read_text())["rows"]["nasrnn"]["max_rel_diff"] == 2e24


def test_ab_cost_models_tunes_both_rewrites_in_the_tuned_flow(tmp_path):
    """``ab_cost_models.py --flow tuned``: both rewrites' kernels are tuned into the one
    database given, the rewrites built from it and timed; a second run tunes nothing more."""
    ab = load_script("ab_cost_models")
    stem, work = tmp_path / "ab", tmp_path / "db"
    argv = ["--flow", "tuned", "--trials", "2", "--work-dir", str(work), "--a", "roofline", "--b", "xgb",
            "--small", "--models", "nasrnn", "--repeat", "2", "--min-ms", "1", "--out", str(stem)]  # fmt: skip
    ab.main(argv)
    doc = json.loads(stem.with_suffix(".json").read_text())
    row = doc["rows"]["nasrnn"]
    assert doc["trials"] == 2 and row["max_rel_diff"] < 1e-4 and row["a"]["ms"] > 0 and row["b"]["ms"] > 0
    records = len(tuning_db.read_database(str(work)).get_all_tuning_records())
    assert records > 0, "nothing was tuned into the work dir"
    ab.main(argv)
    assert len(tuning_db.read_database(str(work)).get_all_tuning_records()) == records
    with pytest.raises(ValueError, match="--work-dir"):
        ab.compare(None, "roofline", "xgb", "tuned", ab.make_target("llvm", "sm_90"), 1, 1.0)


def test_batch_norms_are_priced_at_the_rate_their_tuned_kernels_ran():
    """TVM runs an inference batch norm as a kernel of its own with a square root and a
    divide per element.  Against the NCHW batch norms of the committed Zen 5 database (tuned
    cold, 32 trials, their best records), the Zen 5 machine prices them within 1.5x at the
    median, where their traffic alone put them at under a fifth of their time."""
    import statistics
    from pathlib import Path

    database = tuning_db.read_database(
        str(Path(__file__).resolve().parent.parent / "benchmarks/tuning/llvm-znver5-cold")
    )
    rate = cost.RooflineCostModel("llvm", "tuned", 512, "znver5")
    traffic = cost.RooflineCostModel("llvm", "tuned", 512, "znver5")
    traffic.machine = dataclasses.replace(traffic.machine, batch_norm_ns=0.0)
    attrs = (1, 1e-5, True, True, 0.1, False)
    ratios: dict[str, list[float]] = {"rate": [], "traffic": []}  # time over price
    for record in database.get_all_tuning_records():
        blocks = {str(inst.attrs[0]) for inst in record.trace.insts if inst.kind.name == "GetSBlock"}
        shapes = [tuple(int(d) for d in p.shape) for p in record.workload.mod["main"].params]
        # a batch norm (and any epilogue fused into it): x, gamma, beta, mean, var, the output; NCHW
        if not {"T_divide", "T_multiply"} <= blocks or len(shapes) != 6 or len(shapes[0]) != 4:
            continue
        if shapes[0][2] != shapes[0][3] or not record.run_secs:
            continue
        x, stat = TensorTy(shapes[0], F32), TensorTy((shapes[0][1],), F32)
        us = statistics.median(float(s) for s in record.run_secs) * 1e6
        for name, model in (("rate", rate), ("traffic", traffic)):
            ratios[name].append(
                us / model.node_cost("BatchNorm", attrs, (x, stat, stat, stat, stat), (x, stat, stat), False)
            )
    assert len(ratios["rate"]) >= 30
    assert 1 / 1.5 < np.median(ratios["rate"]) < 1.5
    assert np.median(ratios["traffic"]) > 5.0


@pytest.mark.parametrize("mcpu, rate", [("generic", 6.6), ("znver5", 2.7), ("emeraldrapids", 9.8)])
def test_gelu_and_erf_are_priced_as_a_library_call_per_element(mcpu, rate):
    """The tuned roofline prices a GELU or an erf at its machine's ``libm_ns`` per element, fused
    or not (TVM calls libm's erff for each), and a relu as the epilogue it is: without the rate
    both cost their traffic's tenth, and erf_rational's form would never look cheaper."""
    bits = 128 if mcpu == "generic" else 512
    model = cost.RooflineCostModel("llvm", "tuned", bits, mcpu)
    x = TensorTy((128, 3072), F32)
    for op in ("Gelu", "Erf"):
        assert model.node_cost(op, (), (x,), x, False) == pytest.approx(x.numel * rate / 1e3, rel=1e-3)
    assert model.node_cost("Relu", (), (x,), x, False) < x.numel * 0.05 / 1e3
    assert model.node_cost("Gelu", (), (x,), x, True) == cost.EPSILON_US  # a constant folds


@pytest.mark.parametrize("mcpu, rate", [("generic", 6.6), ("znver5", 2.7)])
def test_a_softmax_is_priced_by_its_exps_and_topis_fast_one_by_its_traffic(mcpu, rate):
    """The tuned roofline prices a softmax (its own kernel) at ``libm_ns`` per element, as it
    does exp, tanh and sigmoid fused: TVM calls libm's expf for each.  TOPI's fast softmax
    (fast_math.egg) costs its launch and traffic, well under a tenth of that."""
    bits = 128 if mcpu == "generic" else 512
    model = cost.RooflineCostModel("llvm", "tuned", bits, mcpu)
    x = TensorTy((12, 128, 128), F32)
    libm_us = x.numel * rate / 1e3
    assert model.node_cost("Softmax", (2,), (x,), x, False) >= libm_us
    assert model.node_cost("FastSoftmax", (2,), (x,), x, False) < libm_us / 10
    for op in ("Exp", "Tanh", "Sigmoid"):
        assert model.node_cost(op, (), (x,), x, False) == pytest.approx(libm_us, rel=1e-3)


@pytest.mark.parametrize("share", [1.0, 0.6])
def test_a_strided_7x7_stem_computes_at_its_measured_share_of_the_conv_rate(monkeypatch, share):
    """A stride-2 7x7 NCHW conv (ResNet-50's stem) costs its FLOPs at ``strided_share`` of the
    conv rate, where a CPU's calibration measured it (an AVX2 CPU's file here; 1.0, no
    penalty, where not measured); a 3x3 stride-2 conv and the stride-1 conv of
    space_to_depth.egg's form are priced at the conv rate either way.  So with the share
    measured below 49/64 the stem's form over the input's phases (64/49 the FLOPs) is cheaper."""
    calibrated = {"znver3": (256, {"matmul": 58.0, "conv": 40.0, "depthwise": 31.0}, {"bandwidth_gbs": 16.0})}
    if share < 1.0:
        calibrated["znver3"][2]["strided_share"] = share
    monkeypatch.setattr(cost, "measured_cpus", lambda: calibrated)
    model = cost.RooflineCostModel("llvm", "tuned", 256, "znver3")
    x, w = TensorTy((1, 3, 224, 224), F32), TensorTy((64, 3, 7, 7), F32)
    y = TensorTy((1, 64, 112, 112), F32)
    attrs = ((2, 2), (3, 3, 3, 3), (1, 1), 1, "NCHW", "OIHW", "NCHW", "")
    strided = model.node_cost("Conv2d", attrs, (x, w), y, False)
    phases, w4 = TensorTy((1, 12, 115, 115), F32), TensorTy((64, 12, 4, 4), F32)
    at_one = ((1, 1), (0, 0, 0, 0), *attrs[2:])
    compact = model.node_cost("Conv2d", at_one, (phases, w4), y, False)
    work = 2 * 64 * 3 * 49 * 112 * 112 / 1e3  # kFLOP: us at GFLOP/s
    assert strided - (compact - work * (64 / 49 - 1) / 40.0) == pytest.approx(
        work / 40.0 * (1 / share - 1), rel=0.05, abs=1.0
    )
    assert (strided > compact) == (share < 49 / 64)
    three = TensorTy((64, 3, 3, 3), F32)
    assert cost.strided_wide("Conv2d", attrs, (x, w)) and not cost.strided_wide("Conv2d", attrs, (x, three))
    assert not cost.strided_wide("Conv2d", at_one, (phases, w4)) and not cost.strided_1x1("Conv2d", attrs, (x, w))
    depthwise = (*attrs[:3], 3, *attrs[4:])  # the share was measured on dense convs only
    assert not cost.strided_wide("Conv2d", depthwise, (x, TensorTy((3, 1, 7, 7), F32)))


@pytest.mark.parametrize("share", [1.0, 0.5])
def test_a_strided_3x3_conv_computes_at_its_measured_share_and_its_polyphase_form_at_the_conv_rate(monkeypatch, share):
    """A stride-2 3x3 NCHW conv costs its FLOPs at ``strided_3x3_share`` of the conv rate where a
    CPU's calibration measured it (1.0 elsewhere); polyphase.egg's four stride-1 sub-convs (2x2,
    2x1, 1x2, 1x1 taps: the same FLOPs) at the conv rate.  So the form, its slices and adds
    included, is cheaper only with the share measured well below 1.  A 7x7, a 1x1, a depthwise or
    a stride-1 conv is not one the figure prices."""
    calibrated = {"znver3": (256, {"matmul": 58.0, "conv": 40.0, "depthwise": 31.0}, {"bandwidth_gbs": 16.0})}
    if share < 1.0:
        calibrated["znver3"][2]["strided_3x3_share"] = share
    monkeypatch.setattr(cost, "measured_cpus", lambda: calibrated)
    model = cost.RooflineCostModel("llvm", "tuned", 256, "znver3")
    x, w, y = TensorTy((1, 128, 56, 56), F32), TensorTy((128, 128, 3, 3), F32), TensorTy((1, 128, 28, 28), F32)
    attrs = ((2, 2), (1, 1, 1, 1), (1, 1), 1, "NCHW", "OIHW", "NCHW", "")
    strided = model.node_cost("Conv2d", attrs, (x, w), y, False)
    form = 0.0
    for (tr, tc), (pt, pl) in zip([(2, 2), (2, 1), (1, 2), (1, 1)], [(1, 1), (1, 0), (0, 1), (0, 0)]):
        phase = TensorTy((1, 128, 28, 28), F32)
        at_one = ((1, 1), (pt, pl, 0, 0), *attrs[2:])
        form += model.node_cost("Conv2d", at_one, (phase, TensorTy((128, 128, tr, tc), F32)), y, False)
        form += model.node_cost("StridedSlice", ((2, 3), (0, 0), (56, 56), (2, 2), 1), (x,), phase, False)
        form += model.node_cost("Add", (), (y, y), y, False)
    work = 2 * 128 * 128 * 9 * 28 * 28 / 1e3  # kFLOP: us at GFLOP/s
    assert strided == pytest.approx(work / 40.0 / share, rel=0.05)
    assert (strided > form) == (share < 1.0)
    assert cost.strided_3x3("Conv2d", attrs, (x, w)) and not cost.strided_wide("Conv2d", attrs, (x, w))
    for kernel in [(7, 7), (1, 1), (5, 3)]:
        assert not cost.strided_3x3("Conv2d", attrs, (x, TensorTy((128, 128, *kernel), F32)))
    assert not cost.strided_3x3("Conv2d", ((1, 1), *attrs[1:]), (x, w))
    depthwise = (*attrs[:3], 128, *attrs[4:])
    assert not cost.strided_3x3("Conv2d", depthwise, (x, TensorTy((128, 1, 3, 3), F32)))
    rgb = TensorTy((1, 3, 299, 299), F32)  # a stem's: its strided form ran faster than its phases
    assert not cost.strided_3x3("Conv2d", attrs, (rgb, TensorTy((32, 3, 3, 3), F32)))
    wide = TensorTy((1, cost.STRIDED_3X3_MIN_CHANNELS, 56, 56), F32)
    assert cost.strided_3x3("Conv2d", attrs, (wide, TensorTy((32, cost.STRIDED_3X3_MIN_CHANNELS, 3, 3), F32)))


@pytest.mark.parametrize("mcpu, share", [("generic", 1.0), ("znver5", 0.69), ("emeraldrapids", 0.69)])
def test_a_strided_1x1_conv_computes_at_its_measured_share_of_the_conv_rate(mcpu, share):
    """A stride-2 1x1 NCHW conv costs its FLOPs at ``strided_1x1_share`` of the conv rate (its
    vectors gather pixels two apart; measured on Zen 5 and the Xeon, 1.0 where not measured): so
    there it costs more than subsample.egg's form, the same conv at stride 1 on the subsampled input
    (plus the slice kernels), and elsewhere less.  A 3x3 or a stride-1 conv is not affected."""
    bits = 128 if mcpu == "generic" else 512
    model = cost.RooflineCostModel("llvm", "tuned", bits, mcpu)
    x, half = TensorTy((1, 256, 56, 56), F32), TensorTy((1, 256, 28, 28), F32)
    w, y = TensorTy((512, 256, 1, 1), F32), TensorTy((1, 512, 28, 28), F32)
    attrs = ((2, 2), (0, 0, 0, 0), (1, 1), 1, "NCHW", "OIHW", "NCHW", "")
    at_one = ((1, 1), *attrs[1:])
    strided = model.node_cost("Conv2d", attrs, (x, w), y, False)
    compact = model.node_cost("Conv2d", at_one, (half, w), y, False)
    rows = TensorTy((1, 256, 28, 56), F32)
    slices = model.node_cost("StridedSlice", ((2,), (0,), (56,), (2,), 1), (x,), rows, False)
    slices += model.node_cost("StridedSlice", ((3,), (0,), (56,), (2,), 1), (rows,), half, False)
    work = 2 * 256 * 512 * 28 * 28 / 1e3  # MFLOP x 1e3 = kFLOP: us at GFLOP/s
    conv_rate = cost._tuned_llvm_machines(bits, mcpu)["conv"].peak_gflops
    assert strided - compact == pytest.approx(work / conv_rate * (1 / share - 1), rel=0.05, abs=1.0)
    assert (strided > compact + slices) == (share < 1.0)
    three = TensorTy((512, 256, 3, 3), F32)
    assert cost.strided_1x1("Conv2d", attrs, (x, w)) and not cost.strided_1x1("Conv2d", at_one, (x, w))
    assert not cost.strided_1x1("Conv2d", attrs, (x, three))
    grouped = (*attrs[:3], 32, *attrs[4:])  # the share was measured on dense convs only
    assert not cost.strided_1x1("Conv2d", grouped, (x, TensorTy((512, 8, 1, 1), F32)))


def test_each_kind_of_strided_conv_names_a_machine_figure_and_a_family_and_a_conv_is_at_most_one():
    """``cost.STRIDED_CONVS``: each kind's share is a ``Machine`` field, its family a rule file,
    and the kinds' kernel sizes are disjoint (``strided_conv`` takes the first that matches, so
    an overlap would price a conv at the wrong figure and report the wrong form)."""
    from tvm_eqsat.rules import load_library

    fields = {f.name for f in dataclasses.fields(cost.Machine)}
    families = load_library().families
    assert len({k.name for k in cost.STRIDED_CONVS}) == len(cost.STRIDED_CONVS)
    for kind in cost.STRIDED_CONVS:
        assert kind.share in fields and kind.family in families, kind
    x = TensorTy((1, 64, 56, 56), F32)
    attrs = ((2, 2), (0, 0, 0, 0), (1, 1), 1, "NCHW", "OIHW", "NCHW", "")
    for side in range(1, 9):
        w = (x, TensorTy((64, 64, side, side), F32))
        matching = [k.name for k in cost.STRIDED_CONVS if k.matches("Conv2d", attrs, w)]
        expected = "strided 1x1" if side == 1 else "strided 3x3" if side <= 4 else "strided wide"
        assert matching == [expected] and cost.strided_conv("Conv2d", attrs, w).name == expected, side
    assert cost.strided_conv("Conv2d", ((1, 1), *attrs[1:]), (x, TensorTy((64, 64, 3, 3), F32))) is None


def test_an_nhwc_conv_costs_its_kinds_measured_ratio_of_the_nchw_one(monkeypatch):
    """``Machine.nhwc_*``: where a CPU's calibration holds a kind's NHWC/NCHW time ratio, an NHWC
    conv of that kind costs the ratio times the NCHW one (its weights OHWI); kinds not measured,
    strided dense convs and NCHW convs keep the roofline's price, the same in both layouts."""
    memory = {"bandwidth_gbs": 16.0, "nhwc_1x1_wide": 0.5, "nhwc_depthwise": 0.8, "nhwc_square_narrow": 1.25}
    calibrated = {"znver3": (256, {"matmul": 58.0, "conv": 40.0, "depthwise": 31.0}, memory)}
    monkeypatch.setattr(cost, "measured_cpus", lambda: calibrated)
    model = cost.RooflineCostModel("llvm", "tuned", 256, "znver3")
    plain = cost.RooflineCostModel("llvm", "tuned", 256, "generic")

    def pair(m, c, k, side, kernel, stride=1, groups=1):
        out = (side + stride - 1) // stride
        pad = (kernel[0] // 2, kernel[1] // 2) * 2
        costs = []
        for layout, wl in (("NCHW", "OIHW"), ("NHWC", "OHWI")):
            x = (1, c, side, side) if layout == "NCHW" else (1, side, side, c)
            y = (1, k, out, out) if layout == "NCHW" else (1, out, out, k)
            w = (k, c // groups, *kernel) if wl == "OIHW" else (k, *kernel, c // groups)
            attrs = ((stride, stride), pad, (1, 1), groups, layout, wl, layout, "")
            xt, wt, yt = TensorTy(x, F32), TensorTy(w, F32), TensorTy(y, F32)
            costs.append(m.node_cost("Conv2d", attrs, (xt, wt), yt, False) - m.machine.launch_us)
            if layout == "NHWC":
                assert cost.layout_class("Conv2d", attrs, (xt, wt), yt) == cost.layout_class(
                    "Conv2d",
                    (*attrs[:4], "NCHW", "OIHW", "NCHW", ""),
                    (TensorTy((1, c, side, side), F32), TensorTy((k, c // groups, *kernel), F32)),
                    TensorTy((1, k, out, out), F32),
                )
        return costs[1] / costs[0]

    assert pair(model, 64, 64, 56, (1, 1)) == pytest.approx(0.5, rel=1e-3)  # 1x1_wide
    assert pair(model, 64, 64, 14, (1, 1)) == pytest.approx(1.0, rel=1e-3)  # 1x1_narrow: not measured here
    assert pair(model, 64, 64, 14, (3, 3)) == pytest.approx(1.25, rel=1e-3)  # square_narrow
    assert pair(model, 64, 64, 56, (3, 3), groups=64) == pytest.approx(0.8, rel=1e-3)  # depthwise
    assert pair(model, 64, 64, 56, (3, 3), stride=2, groups=64) == pytest.approx(0.8, rel=1e-3)
    assert pair(model, 64, 128, 56, (3, 3), stride=2) == pytest.approx(1.0, rel=1e-3)  # strided dense: none
    assert pair(plain, 64, 64, 56, (1, 1)) == pytest.approx(1.0, rel=1e-3)  # uncalibrated: alike
    assert "NHWC" in cost.priced_layouts(model) and "NHWC" not in cost.priced_layouts(plain)  # so the nhwc family runs
    assert cost.layout_kind((1, 7), (1, 1), 1, 128, 17 * 17) == "asymmetric"
    assert cost.layout_kind((6, 1), (4, 1), 64, 1, 56 * 14) is None  # a Winograd input transform
    assert cost.layout_kind((3, 3), (1, 1), 32, 4, 56 * 56) is None  # grouped, not depthwise
    assert cost.layout_class("Matmul", (), (), None) is None


def test_the_tuned_held_out_summary_says_which_rewrite_ran_faster():
    """``held_out_e2e.py --flow tuned`` reads the benchmark's rows: per model the held-out
    model's rewrite (eqsat-learned) against the roofline's (eqsat), a difference inside the
    model's noise floor is no verdict, and the same module is the same graph."""
    script = load_script("held_out_e2e")

    def row(model, variant, ms, h, p=(0.99, 1.01), pred="1.1"):
        return {"model": model, "variant": variant, "median_ms": str(ms), "p10_ms": str(ms * p[0]),
                "p90_ms": str(ms * p[1]), "speedup_vs_stock": str(10 / ms), "predicted_speedup": pred,
                "max_rel_diff": "1e-7", "changes": "", "module_hash": h, "notes": ""}  # fmt: skip

    csv_rows = [
        *(row("a", v, ms, h) for v, ms, h in (("stock", 10, "s"), ("eqsat", 8, "r"), ("eqsat-learned", 6, "l"))),
        *(row("b", v, ms, h) for v, ms, h in (("stock", 10, "s"), ("eqsat", 6, "r"), ("eqsat-learned", 8, "l"))),
        *(row("c", v, ms, h) for v, ms, h in (("stock", 10, "s"), ("eqsat", 8, "r"), ("eqsat-learned", 8.05, "l"))),
        *(row("d", v, ms, h) for v, ms, h in (("stock", 10, "s"), ("eqsat", 8, "r"), ("eqsat-learned", 8, "r"))),
        row("e", "stock", 10, "s"),  # no held-out row: not a model of this evaluation
        *(row("f", v, ms, h) for v, ms, h in (("stock", 10, "s"), ("stock-aa", 8, "a"), ("eqsat", 8, "r"))),
        row("f", "eqsat-learned", 7, "l"),  # 1.14x faster, inside the A/A control's 1.25x
    ]
    rows = {r["model"]: r for r in script.tuned_rows(csv_rows)}
    assert list(rows) == ["a", "b", "c", "d", "f"]
    assert rows["f"]["aa"] and rows["f"]["floor"] == pytest.approx(0.25) and rows["f"]["verdict"] == "within noise"
    assert [rows[m]["verdict"] for m in "abcd"] == ["held out better", "roofline better", "within noise", "same graph"]
    assert rows["a"]["held_out_vs_roofline"] == pytest.approx(8 / 6) and rows["a"]["floor"] == pytest.approx(0.01)
    assert not rows["a"]["aa"] and rows["a"]["held_out"]["speedup"] == pytest.approx(10 / 6)
    same = {"g": {"module_hash": "h", "roofline_predicted": 1.5, "held_out_predicted": 1.25}}  # not timed
    text = script.tuned_section(list(rows.values()), "llvm-x-tuned-held-out", "CPU", "cmd", "2026-12-07T00:00", same)
    assert "| g | not timed (1.250x) | not timed (1.500x) | yes | 1.000x (same graph) | - |" in text
    assert "on 1 more the held-out model chose the roofline's graph" in text
    assert "| a | 1.667x (1.100x) | 1.250x (1.100x) | no | 1.333x (held out better) | ±1.0% (no A/A) |" in text
    assert "of the 5 models timed: **held out 1." in text and "| ±25.0% |" in text


def _tuned_held_out_run(tmp_path, monkeypatch):
    """``held_out_e2e.py``, with the rows of model 'a' (stock, the roofline's and the held-out
    model's rewrites) already in its results file and no training, and its arguments."""
    script = load_script("held_out_e2e")
    monkeypatch.setattr(script, "held_out_model", lambda *a, **k: None)
    monkeypatch.setattr(script.benchmark, "main", lambda argv: 0)  # its rows are already in the file
    rows = [("stock", 10, "s"), ("eqsat", 8, "r"), ("eqsat-learned", 6, "l")]
    with open(tmp_path / "llvm-tuned-held-out.csv", "w") as f:
        f.write(
            "model,variant,median_ms,p10_ms,p90_ms,speedup_vs_stock,predicted_speedup,max_rel_diff,changes,module_hash,notes\n"
        )
        f.writelines(f"a,{v},{ms},{ms * 0.99},{ms * 1.01},{10 / ms},1.1,0,,{h},\n" for v, ms, h in rows)
    monkeypatch.setattr(script.models, "MODELS", {**script.models.MODELS, "a": None})
    argv = ["--flow", "tuned", "--models", "a", "--mcpu", "generic", "--out-dir", str(tmp_path)]
    return script, [*argv, "--report", str(tmp_path / "R.md"), "--held-dir", str(tmp_path / "held")]


def test_a_model_timed_again_leaves_the_same_graph_list(tmp_path, monkeypatch):
    """``held_out_e2e.py --flow tuned``: a model an earlier ``--skip-same`` run listed as the
    roofline's graph, then timed (without it), is reported from its rows, not hidden as listed."""
    import json

    script, argv = _tuned_held_out_run(tmp_path, monkeypatch)
    listed = tmp_path / "held-out-e2e-llvm-tuned-held-out-same.json"
    listed.write_text(json.dumps({"a": {"module_hash": "r", "roofline_predicted": 1.1, "held_out_predicted": 1.1}}))
    assert script.main(argv) == 0
    assert json.loads(listed.read_text()) == {}
    assert (
        "| a | 1.667x (1.100x) | 1.250x (1.100x) | no | 1.333x (held out better) |" in (tmp_path / "R.md").read_text()
    )


def test_held_out_decisions_count_each_rewrites_layouts_without_tuning_or_timing(tmp_path, monkeypatch):
    """``held_out_e2e.py --flow tuned --decisions``: per model, both rewrites' layout decisions
    counted (``layout_choices``), kept beside the results and reported under the timed table;
    the benchmark neither tunes nor times."""
    import json

    script, argv = _tuned_held_out_run(tmp_path, monkeypatch)

    def never(argv):
        raise AssertionError("--decisions ran the benchmark")

    counts = {
        "roofline": {"convs": 40, "fastest": 31, "lost_us": 2500.0},
        "held_out": {"convs": 42, "fastest": 20, "lost_us": 9100.0},
    }
    monkeypatch.setattr(script.benchmark, "main", never)
    monkeypatch.setattr(script, "load_dataset", lambda *a, **k: [])
    monkeypatch.setattr(script, "layout_choices", lambda name, bargs, samples, work_dir, retime, fresh: counts)
    assert script.main([*argv, "--decisions"]) == 0
    kept = {"a": {**counts, "retime": 0}}
    assert json.loads((tmp_path / "held-out-e2e-llvm-tuned-held-out-decisions.json").read_text()) == kept
    text = (tmp_path / "R.md").read_text()
    assert "| a | 20 of 42 (9.10 ms lost) | 31 of 40 (2.50 ms lost) | records |" in text
    assert text.index("held out better") < text.index("Layout decisions")  # the timed table first
    none = {"convs": 0, "fastest": 0, "lost_us": 0.0}
    for wrong in (["--retime", "15"], ["--decisions", "--flow", "default"]):  # a clear error, not ignored
        with pytest.raises(SystemExit):
            script.main([*argv, *wrong])
    lines = script._decision_lines({"r": {"roofline": none, "held_out": none, "retime": 15}})
    assert "| r | no such conv | no such conv | afresh, 15 samples |" in lines


def test_decisions_timed_afresh_time_each_kernel_once_and_drop_what_failed(monkeypatch):
    """``held_out_e2e.py --decisions --retime N``: the kernels of every decision that ``fresh``
    lacks are timed in one batch and kept there; a decision whose chosen kernel failed to run,
    or that a failed kernel leaves with one layout timed, is dropped."""
    from types import SimpleNamespace

    script = load_script("held_out_e2e")
    nchw, nhwc, nchw2, nhwc2 = (_conv_workload(lay, stride=s) for s in (1, 2) for lay in ("NCHW", "NHWC"))
    calls = []

    def retime(found, work_dir, target, repeat, progress=False, database=None):
        calls.append([h.workload.key() for h in found])
        us = {nchw.key(): 40.0, nhwc2.key(): None, nchw2.key(): 9.0}  # nhwc2 failed to run
        return [
            (h, None if us[h.workload.key()] is None else SimpleNamespace(median_us=us[h.workload.key()]))
            for h in found
        ]

    monkeypatch.setattr(script, "retime_kernels", retime)
    decisions = [
        {"layout": "NHWC", "us": {"NCHW": 50.0, "NHWC": 30.0}, "kernels": {"NCHW": nchw, "NHWC": nhwc}},
        {"layout": "NCHW", "us": {"NCHW": 50.0, "NHWC": 30.0}, "kernels": {"NCHW": nchw, "NHWC": nhwc}},
        {"layout": "NHWC", "us": {"NCHW": 8.0, "NHWC": 7.0}, "kernels": {"NCHW": nchw2, "NHWC": nhwc2}},
        {"layout": "NCHW", "us": {"NCHW": 8.0, "NHWC": 7.0}, "kernels": {"NCHW": nchw2, "NHWC": nhwc2}},
    ]
    fresh = {nhwc.key(): 45.0}  # timed for an earlier model
    out = script._timed_afresh(decisions, "db", None, 15, fresh)
    assert calls == [[nchw.key(), nchw2.key(), nhwc2.key()]]
    assert [(d["layout"], d["us"]) for d in out] == [
        ("NHWC", {"NCHW": 40.0, "NHWC": 45.0}),
        ("NCHW", {"NCHW": 40.0, "NHWC": 45.0}),
    ]
    assert fresh == {nhwc.key(): 45.0, nchw.key(): 40.0, nchw2.key(): 9.0, nhwc2.key(): None}
    assert script._timed_afresh(decisions, "db", None, 15, fresh) == out and len(calls) == 1
