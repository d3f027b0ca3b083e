"""scripts/layout_ratios.py: each kind of conv's NHWC over NCHW time, into a CPU's calibration."""

from __future__ import annotations

import json

import pytest
from helpers import load_script

from tvm_eqsat import calibration

layout_ratios = load_script("layout_ratios")


def _cell(us: float, layout: str) -> dict:
    return {"us": us, "layouts": [layout]}


def _doc(model: str, rows: list[tuple[list[int], float, float, float]]) -> dict:
    """A conv_times document: each conv's two NCHW builds' and its NHWC build's microseconds."""
    return {
        "model": model,
        "target_name": "llvm-testcpu",
        "rows": [
            {
                "conv": conv,
                "builds": {
                    "stock": _cell(a, "NCHW"),
                    "stock+tvm": _cell(b, "NCHW"),
                    "stock+nhwc": _cell(h, "NHWC"),
                },
            }
            for conv, a, b, h in rows
        ],
    }


def test_convs_are_sorted_into_kinds_and_averaged_and_written_into_the_calibration(tmp_path, monkeypatch):
    wide_1x1 = [64, 64, 1, 1, 56, 56, 56, 56, 1]
    narrow_1x1 = [64, 64, 1, 1, 14, 14, 14, 14]  # no groups field: an older file, groups 1
    depthwise_s2 = [32, 32, 3, 3, 112, 112, 56, 56, 32]
    strided = [64, 128, 3, 3, 56, 56, 28, 28, 1]
    grouped = [128, 128, 3, 3, 56, 56, 56, 56, 32]
    assert [layout_ratios.conv_kind(c) for c in (wide_1x1, narrow_1x1, depthwise_s2, strided, grouped)] == [
        "1x1_wide",
        "1x1_narrow",
        "depthwise",
        None,
        None,
    ]
    a = _doc("a", [(wide_1x1, 100, 100, 50), (narrow_1x1, 100, 400, 400), (strided, 10, 10, 5), (grouped, 1, 1, 2)])
    b = _doc("b", [(wide_1x1, 200, 200, 200), (depthwise_s2, 30, 30, 15)])
    for name, doc in (("a", a), ("b", b)):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
    machines = tmp_path / "cost_models" / "machines"
    machines.mkdir(parents=True)
    base = {"mcpu": "testcpu", "vector_bits": 512, "peak_gflops": {"matmul": 1, "conv": 1, "depthwise": 1}}
    (machines / "testcpu.json").write_text(json.dumps({**base, "memory": {"bandwidth_gbs": 10.0}}))
    monkeypatch.setattr(layout_ratios, "data_dir", lambda name: tmp_path / name)
    out = tmp_path / "ratios"
    files = [str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    doc = layout_ratios.main([*files, "--min-convs", "2", "--out", str(out), "--calibrate"])
    kinds = doc["kinds"]
    # NHWC over the geometric mean of the NCHW builds: 0.5 and 1.0, averaged geometrically
    assert kinds["1x1_wide"]["ratio"] == pytest.approx(0.707, abs=1e-3) and kinds["1x1_wide"]["convs"] == 2
    assert kinds["1x1_wide"]["models"] == ["a", "b"] and kinds["1x1_wide"]["calibrated"]
    assert kinds["1x1_narrow"]["ratio"] == pytest.approx(2.0) and not kinds["1x1_narrow"]["calibrated"]
    assert doc["unclassified"] == 2 and set(kinds) == {"1x1_wide", "1x1_narrow", "depthwise"}
    # the noise: the two NCHW builds of model a differ by 1x, 4x, 1x, 1x (median 1x)
    assert doc["noise"]["a"] == {"convs": 4, "median_factor": 1.0}
    written = json.loads((machines / "testcpu.json").read_text())
    assert written["memory"] == {"bandwidth_gbs": 10.0, "nhwc_1x1_wide": kinds["1x1_wide"]["ratio"]}
    assert written["sources"] == [str(out.with_suffix(".json").resolve())]
    assert "| 1x1_wide | 2 | a, b | 0.707 |" in out.with_suffix(".md").read_text()
    assert calibration.MEMORY_KEYS >= {f"nhwc_{kind}" for kind in calibration.LAYOUT_CLASSES}
    with pytest.raises(SystemExit):  # a calibration names the results it came from
        layout_ratios.main([*files, "--calibrate"])
