"""scripts/bench_strided.py: strided convs, direct and in a rule's stride-1 form."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from helpers import load_script
from tvm import relax

pytest.importorskip("torch")  # the script imports the benchmark, which imports the model zoo


def _run(mod, x):
    ex = tvm.compile(mod, "llvm")
    return relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()


def test_each_studys_form_is_the_strided_conv_at_stride_1():
    """The subsample form holds two slices and a stride-1 conv and computes the strided conv's
    values bit for bit (the same products in the same order); the space-to-depth form of a 7x7
    stem holds a stride-1 4x4 conv over 4x the channels, 64/49 of the FLOPs, within rounding; the
    polyphase form of a 3x3 conv four stride-1 convs, no pad kernel, the same FLOPs."""
    script = load_script("bench_strided")
    mod, x = script.strided_layer(8, 10, 16)
    sub = script.rewritten(mod, script.STUDIES["subsample"])
    text = sub.script()
    assert text.count("R.strided_slice") == 2 and "strides=[2, 2]" in mod.script() and "strides=[2, 2]" not in text
    np.testing.assert_array_equal(_run(mod, x), _run(sub, x))
    assert script.conv_gflop(sub) == pytest.approx(script.conv_gflop(mod))

    stem, x = script.strided_layer(3, 20, 8, kernel=7, pad=3)
    s2d = script.rewritten(stem, script.STUDIES["space_to_depth"])
    assert "strides=[2, 2]" not in s2d.script() and "R.nn.relu" in s2d.script()
    np.testing.assert_allclose(_run(s2d, x), _run(stem, x), rtol=1e-5, atol=1e-5)
    assert script.conv_gflop(s2d) / script.conv_gflop(stem) == pytest.approx(64 / 49)

    conv, x = script.strided_layer(8, 14, 8, kernel=3, pad=1)
    poly = script.rewritten(conv, script.STUDIES["polyphase"])
    text = poly.script()
    assert text.count("R.nn.conv2d") == 4 and "strides=[2, 2], padding" not in text and "R.nn.pad" not in text
    np.testing.assert_allclose(_run(poly, x), _run(conv, x), rtol=1e-5, atol=1e-5)
    assert script.conv_gflop(poly) == pytest.approx(script.conv_gflop(conv))  # no zero taps


def test_the_page_names_each_seed_and_the_share_the_roofline_keeps():
    """The page lists each seed's time of each form, and the geometric mean of the shares of the
    layers the figure prices (not the 3x3 one's), the figure ``--calibrate`` writes."""
    script = load_script("bench_strided")
    row = {
        "layer": "l",
        "shape": [1, 3, 10, 10, 16, 7, 3],
        "ms": {"direct": [1.5, 1.25], "s2d": [1.0, 1.125]},
        "speedup": 1.3,
        "flop_ratio": 1.31,
        "strided_share": 0.64,
        "priced": True,
        "max_rel_diff": 3e-7,
        "pass_rewrites": True,
        "predicted_speedup": 1.2,
    }
    data = {
        "study": "space_to_depth",
        "mcpu": "znver3",
        "trials": 32,
        "cold_cache": True,
        "machine": {"machine": "m", "cpus": 2},
        "date": "d",
        "command": "c",
        "seeds": [0, 1],
        "repeat": 15,
        "rows": [row, {**row, "strided_share": 0.81}, {**row, "strided_share": 2.0, "priced": False}],
    }
    page = script.markdown(data)
    line = "| l | 3, 10x10, 16, 7x7, 3 | 1.500 / 1.250 | 1.000 / 1.125 | 1.30x | 1.31x | 0.64 | yes | 3.0e-07 | yes (1.20x) |"
    assert line in page
    assert script.mean_share(data["rows"]) == 0.72 and "**0.72**" in page
    assert script.mean_share(data["rows"][2:]) is None


def test_each_study_prices_its_layers_by_its_cost_predicate():
    """A layer counts towards a study's figure only where the roofline would price it with that
    figure: the space-to-depth study's 3x3 convs do not (its figure is the 7x7 stem's), nor the
    polyphase study's RGB stem (3 channels, below ``cost.STRIDED_3X3_MIN_CHANNELS``: its strided
    form ran faster than its phases); every other layer does."""
    script = load_script("bench_strided")
    unpriced = {
        ("space_to_depth", "inception-v3-stem"),
        ("space_to_depth", "resnet50-layer2-3x3"),
        ("polyphase", "inception-v3-stem"),
    }
    for name, study in script.STUDIES.items():
        for layer in study.layers:
            mod, _ = script.strided_layer(*layer[1:])
            assert script.priced(mod, study) == ((name, layer[0]) not in unpriced), (name, layer)
