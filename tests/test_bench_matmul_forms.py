"""scripts/bench_matmul_forms.py: a linear layer in the forms the study times."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from helpers import load_script
from tvm import relax

pytest.importorskip("torch")  # the script imports the benchmark, which imports the model zoo


def test_every_form_computes_the_linear_layer_and_pads_or_packs_as_named():
    """Padded rows and a packed weight give x @ W + b (within rounding); the padded form's
    product has the padded rows, the packed form's weight is (N/B, K, B); a bad form is refused."""
    script = load_script("bench_matmul_forms")
    rng = np.random.default_rng(0)
    m, k, n = 5, 8, 12
    w = rng.standard_normal((k, n)).astype("float32")
    b = rng.standard_normal((n,)).astype("float32")
    x = rng.standard_normal((1, m, k)).astype("float32")
    for form, mark in (("plain", None), ("pad:8", "R.Tensor((1, 8, 12)"), ("pack:4", "R.Tensor((3, 5, 4)")):
        mod = script.form_module(form, m, w, b)
        if mark:
            assert mark in mod.script()
        ex = tvm.compile(mod, "llvm")
        got = relax.VirtualMachine(ex, tvm.cpu())["main"](tvm.runtime.tensor(x)).numpy()
        np.testing.assert_allclose(got, x @ w + b, rtol=1e-5, atol=1e-5)
    for bad in ("pad:4", "pack:5", "blocked:4"):
        with pytest.raises(ValueError):
            script.form_module(bad, m, w, b)


def test_the_page_gives_each_seed_and_the_median_against_plain(tmp_path):
    script = load_script("bench_matmul_forms")
    forms = {
        "plain": {
            "ms_per_seed": [2.0, 3.0, 4.0],
            "median_ms": 3.0,
            "best_ms": 2.0,
            "gflop_per_s_median": 1.0,
            "max_rel_err": 1e-6,
        },
        "pack:16": {
            "ms_per_seed": [1.5, 2.5, 5.0],
            "median_ms": 2.5,
            "best_ms": 1.5,
            "gflop_per_s_median": 1.2,
            "max_rel_err": 1e-6,
        },
    }
    doc = {
        "target_name": "llvm-x",
        "trials": 64,
        "machine": {"machine": "cpu"},
        "shapes": [
            {
                "shape": [4, 8, 16],
                "seeds": [1, 2, 3],
                "repeat": 5,
                "date": "2026-12-06T00:00:00",
                "command": "c",
                "forms": forms,
            }
        ],
    }
    script.write_markdown(tmp_path / "page.md", doc)
    page = (tmp_path / "page.md").read_text()
    assert "| pack:16 | 1.500, 2.500, 5.000 | 2.500 | 1.500 | 1.200x |" in page
    assert "| plain | 2.000, 3.000, 4.000 | 3.000 | 2.000 | 1.000x |" in page
