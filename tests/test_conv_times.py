"""scripts/conv_times.py: each conv's in-model time per build, matched across layouts."""

from __future__ import annotations

import json

from helpers import load_script

from tvm_eqsat import models, tune

conv_times = load_script("conv_times")


def test_a_conv_reads_as_one_identity_in_either_layout_and_an_ambiguous_one_as_none():
    nchw = [(1, 64, 56, 56), (128, 64, 3, 3), (1, 128, 28, 28)]  # stride 2
    nhwc = [(1, 56, 56, 64), (128, 3, 3, 64), (1, 28, 28, 128)]
    assert conv_times.conv_key(nchw) == ((64, 128, 3, 3, 56, 56, 28, 28, 1), "NCHW")
    assert conv_times.conv_key(nhwc) == ((64, 128, 3, 3, 56, 56, 28, 28, 1), "NHWC")
    # a depthwise conv: one input channel per group
    assert conv_times.conv_key([(1, 32, 28, 28), (32, 1, 3, 3), (1, 32, 28, 28)])[0][-1] == 32
    assert conv_times.conv_key([(1, 28, 28, 32), (32, 3, 3, 1), (1, 28, 28, 32)]) == (
        (32, 32, 3, 3, 28, 28, 28, 28, 32),
        "NHWC",
    )
    # a fused epilogue's bias between the weight and the result does not change the reading
    assert conv_times.conv_key([nhwc[0], nhwc[1], (1, 1, 1, 128), nhwc[2]])[1] == "NHWC"
    # every axis 8 wide: both readings fit, so the shapes do not say
    assert conv_times.conv_key([(1, 8, 8, 8), (8, 8, 1, 1), (1, 8, 8, 8)]) is None
    assert conv_times.conv_key([(1, 64), (64, 64), (1, 64)]) is None


def test_stock_and_stock_nhwc_convs_are_matched_and_timed_in_their_layouts(tmp_path):
    stem = tmp_path / "ct"
    doc = conv_times.main(
        ["resnet50", "--small", "--variants", "stock", "stock+nhwc", "--rounds", "2", "--runs", "2", "--out", str(stem)]
    )
    mod = models.SMALL["resnet50"]().mod
    kernels = conv_times.kernel_args(mod, tune.tuning_target(tune.llvm_target("generic")))
    n_conv_kernels = sum("conv2d" in name for name in kernels)
    rows = doc["rows"]
    # every conv kernel of the build is matched (none left over), each identity in both builds
    assert n_conv_kernels >= 10 and sum(len(r["builds"]["stock"]["layouts"]) for r in rows) == n_conv_kernels
    assert all(set(r["builds"]) == {"stock", "stock+nhwc"} for r in rows) and doc["shared"] == len(rows)
    assert {x for r in rows for x in r["builds"]["stock"]["layouts"]} == {"NCHW"}
    assert {x for r in rows for x in r["builds"]["stock+nhwc"]["layouts"]} == {"NHWC"}
    for t in doc["totals"].values():
        assert 0 < t["shared_conv_us"] <= t["conv_us"] <= t["total_us"] and t["unmatched_conv_us"] == 0
    assert json.loads(stem.with_suffix(".json").read_text())["shared"] == doc["shared"]
    assert "| stock+nhwc |" in stem.with_suffix(".md").read_text()


def test_the_tuned_flow_starts_from_the_committed_kernels(tmp_path):
    """On a new machine the tuned flow must not tune from scratch what benchmarks/tuning holds
    (unseeded, a full-size NASNet-A build tunes all 53 of its kernels again)."""
    target = tune.tuning_target(tune.llvm_target("generic"))
    mod = models.SMALL["squeezenet"]().mod
    work = str(tmp_path / "ms")
    assert conv_times.seed(work, tune.target_name("llvm", "generic"), 64) > 0
    todo, n = tune.pending_tasks(mod, target, work, 64)
    assert n > 0 and not todo
