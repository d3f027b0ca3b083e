"""scripts/bench_strided.py: a strided 1x1 conv, direct and subsampled first."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from helpers import load_script
from tvm import relax

pytest.importorskip("torch")  # the script imports the benchmark, which imports the model zoo


def test_the_subsample_form_is_the_strided_conv_and_the_page_names_each_seed():
    """The layer's forced subsample form holds two slices and a stride-1 conv and computes the
    strided conv's values (bit-equal here: the same products in the same order); the page
    lists each seed's time of each form."""
    script = load_script("bench_strided")
    mod, x = script.strided_layer(8, 10, 16)
    sub = script.subsample_form(mod)
    text = sub.script()
    assert text.count("R.strided_slice") == 2 and "strides=[2, 2]" in mod.script() and "strides=[2, 2]" not in text
    outs = []
    for m in (mod, sub):
        ex = tvm.compile(m, "llvm")
        outs.append(relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    row = {
        "layer": "l",
        "shape": [1, 8, 10, 10, 16],
        "ms": {"direct": [1.5, 1.25], "subsample": [1.0, 1.125]},
        "speedup": 1.3,
        "strided_share": 0.7,
        "max_abs_diff": 0.0,
        "pass_subsamples": True,
        "predicted_speedup": 1.2,
    }
    page = script.markdown(
        {
            "mcpu": "znver5",
            "trials": 32,
            "cold_cache": True,
            "machine": {"machine": "m", "cpus": 2},
            "date": "d",
            "command": "c",
            "seeds": [0, 1],
            "repeat": 15,
            "rows": [row],
        }
    )
    assert "| l | 8, 10x10, 16 | 1.500 / 1.250 | 1.000 / 1.125 | 1.30x | 0.70 | 0.0e+00 | yes (1.20x) |" in page
