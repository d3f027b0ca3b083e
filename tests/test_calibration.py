"""A CPU's calibration of the tuned roofline: derived from its measurements, read back by the
roofline for targets with that -mcpu, and shipped with the package."""

from __future__ import annotations

import configparser
import json
import logging
from pathlib import Path

import pytest

from tvm_eqsat import calibration, cost
from tvm_eqsat.graph import TensorTy

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def _conv(c: int, k: int, size: int = 56):
    """A dense 3x3 NCHW conv node (pad 1), compute-bound."""
    attrs = ((1, 1), (1, 1, 1, 1), (1, 1), 1, "NCHW", "OIHW", "NCHW", "float32")
    ins = (TensorTy((1, c, size, size), "float32"), TensorTy((k, c, 3, 3), "float32"))
    return ("Conv2d", attrs, ins, TensorTy((1, k, size, size), "float32"))


def _results(cpu: str) -> tuple[dict, dict]:
    return tuple(json.loads((RESULTS / f"{kind}-llvm-{cpu}.json").read_text()) for kind in ("peak", "bandwidth"))


def _bench_strided():
    from helpers import load_script

    return load_script("bench_strided")


def _strided_studies() -> list[dict]:
    return [{"study": k, "figure": v.strided.share} for k, v in _bench_strided().STUDIES.items()]


def test_shipped_calibrations_are_what_their_measurements_derive():
    """Every file of cost_models/machines/ is ``derive`` of the results it names (rerun
    ``scripts/calibrate_cpu.py --from-results`` after measuring again), each figure measured
    apart is the share of the ``bench_strided.py`` results it names (an NHWC / NCHW ratio, the
    ``layout_ratios.py`` results' ratio of its kind; ``bench_nchwc.py``'s blocked-conv ratios),
    and each figure no script
    gives (``by_hand``) names a source that is shipped and says why; nothing else is priced."""
    files = sorted((ROOT / "cost_models" / "machines").glob("*.json"))
    assert {"emeraldrapids", "znver5", "znver3"} <= {p.stem for p in files}
    figures = {s["study"]: s["figure"] for s in _strided_studies()}
    for path in files:
        doc = json.loads(path.read_text())
        assert path.stem == doc["mcpu"] and doc["vector_bits"] == cost.cpu_vector_bits(doc["mcpu"])
        peak, bandwidth = (json.loads((ROOT / s).read_text()) for s in doc["sources"][:2])
        derived = calibration.derive(peak, bandwidth)
        assert {k: doc[k] for k in ("mcpu", "vector_bits", "peak_gflops")} == {
            k: derived[k] for k in ("mcpu", "vector_bits", "peak_gflops")
        }, path.name
        by_hand = doc.get("by_hand", {})
        for key, why in by_hand.items():
            assert key in doc["memory"] and (ROOT / why["source"]).exists() and why["why"], (path.name, key)
        assert {k: doc["memory"][k] for k in derived["memory"] if k not in by_hand} == {
            k: v for k, v in derived["memory"].items() if k not in by_hand
        }, path.name
        # the figures measured apart: each the mean share of the bench_strided.py results it names
        measured_apart = set()
        for source in doc["sources"][2:]:
            results = json.loads((ROOT / source).read_text())
            if "kinds" in results:  # layout_ratios.py: each calibrated kind's NHWC / NCHW ratio
                for kind, row in results["kinds"].items():
                    if row["calibrated"]:
                        assert doc["memory"][f"nhwc_{kind}"] == row["ratio"], (path.name, kind)
                        measured_apart.add(f"nhwc_{kind}")
                continue
            blocked = results.get("figure", "nchwc_conv")  # bench_nchwc.py: the blocked conv's time over NCHW's
            if blocked in results:  # (--depthwise: the depthwise conv's, nchwc_depthwise)
                assert doc["memory"][blocked] == round(results[blocked], 3), path.name
                measured_apart.add(blocked)
                continue
            figure = figures[results["study"]]
            assert doc["memory"][figure] == _bench_strided().mean_share(results["rows"]), (path.name, figure)
            measured_apart.add(figure)
        assert not measured_apart & set(by_hand), path.name
        assert set(doc["memory"]) - set(derived["memory"]) == measured_apart | (set(by_hand) - set(derived["memory"]))


def test_derive_takes_the_matmul_mean_and_the_gemv_medians():
    peak, bandwidth = _results("znver3")
    doc = calibration.derive(peak, bandwidth)
    rate = {r["case"]: r["gflop_per_s"] for r in peak["rows"] if r["mcpu"] == "znver3"}
    assert doc["mcpu"] == "znver3" and doc["vector_bits"] == 256
    assert doc["peak_gflops"]["matmul"] == pytest.approx((rate["matmul"] * rate["batch-matmul"]) ** 0.5, abs=0.05)
    assert doc["peak_gflops"]["depthwise"] == rate["depthwise"]
    cached, spilled = calibration.gemv_rates(bandwidth["rows"])
    assert min(cached) <= doc["memory"]["cache_gbs"] <= max(cached) and spilled
    with pytest.raises(ValueError, match="GEMVs"):
        calibration.derive(peak, {"rows": [r for r in bandwidth["rows"] if r["bytes"] <= calibration.CACHE_BYTES]})
    with pytest.raises(ValueError, match="lack"):
        calibration.derive({"rows": [r for r in peak["rows"] if r["case"] != "conv"]}, bandwidth)


def test_the_roofline_prices_a_calibrated_cpu_as_itself(tmp_path, monkeypatch, caplog):
    """A calibration file for a CPU prices its target's kernels with its own peaks and tiers
    (a file wins over the built-in machines); without one an AVX2 CPU is priced between the
    generic machine and the Xeon; a broken file is skipped with a warning."""
    peak, bandwidth = _results("znver3")
    doc = calibration.derive(peak, bandwidth)
    machines = tmp_path / "machines"
    machines.mkdir()
    (machines / "haswell.json").write_text(json.dumps({**doc, "mcpu": "haswell"}))
    slow = {**doc, "mcpu": "znver5", "vector_bits": 512, "peak_gflops": {c: 10.0 for c in cost.COMPUTE_CLASSES}}
    (machines / "znver5.json").write_text(json.dumps(slow))
    (machines / "broken.json").write_text(json.dumps({"mcpu": "x", "vector_bits": 256, "memory": {}}))
    (machines / "odd.json").write_text(json.dumps({**doc, "mcpu": "y", "memory": {"latency_ns": 1.0}}))
    xeon = ROOT / "cost_models" / "machines" / "emeraldrapids.json"  # it prices the CPUs not measured
    (machines / xeon.name).write_text(xeon.read_text())
    before = cost._tuned_llvm_machines(256, "haswell")
    conv = _conv(64, 64)
    mean_us = cost.make_cost_model("roofline", "llvm", "tuned", 256, "haswell").node_cost(*conv, False)
    monkeypatch.setattr(cost, "data_dir", lambda name: tmp_path)
    with caplog.at_level(logging.WARNING, logger="tvm_eqsat"):
        known = cost.measured_cpus()
    assert "broken.json" in caplog.text and "odd.json" in caplog.text and {"x", "y"}.isdisjoint(known)
    got = cost._tuned_llvm_machines(256, "haswell")
    assert (
        {c: m.peak_gflops for c, m in got.items()}
        == doc["peak_gflops"]
        != {c: m.peak_gflops for c, m in before.items()}
    )
    assert all(m.cache_gbs == doc["memory"]["cache_gbs"] for m in got.values())
    assert {m.peak_gflops for m in cost._tuned_llvm_machines(512, "znver5").values()} == {10.0}
    assert cost._tuned_llvm_machines(256, "skylake") == before  # not calibrated: the mean
    # the compute-bound conv at 40.2 GFLOP/s, not the mean's 111
    calibrated_us = cost.make_cost_model("roofline", "llvm", "tuned", 256, "haswell").node_cost(*conv, False)
    assert calibrated_us > 2.5 * mean_us
    # without the Xeon's file, a CPU not measured falls back to the generic machine, no error
    (machines / xeon.name).unlink()
    calibration.load.cache_clear()
    assert cost._tuned_llvm_machines(512, "skylake-avx512") is None
    plain = cost.make_cost_model("roofline", "llvm", "tuned", 512, "skylake-avx512")
    assert plain.machine == cost.MACHINES[("llvm", "tuned")] and plain.node_cost(*conv, False) > 0
    calibration.load.cache_clear()


def test_every_shipped_cost_model_folder_is_installed():
    """A regular install copies cost_models/ through setup.cfg's data_files: every folder the
    pass reads (trained models, CPU calibrations) must be listed, or an install prices with
    less than the checkout does."""
    cfg = configparser.ConfigParser()
    cfg.read(ROOT / "setup.cfg")
    listed = {k.removeprefix("share/tvm_eqsat/") for k in cfg["options.data_files"]}
    folders = {
        f"cost_models/{d.name}"
        for d in (ROOT / "cost_models").iterdir()
        if (d / "model.json").is_file() or d.name == "machines"
    }
    assert folders <= listed, folders - listed


def test_a_figure_measured_apart_is_recorded_and_survives_a_new_calibration(tmp_path):
    """``set_figure`` adds a strided share with its source and date, refuses an unknown figure or
    a CPU not calibrated, and ``kept_figures`` carries it into a calibration derived again."""
    derived = calibration.derive(*_results("znver3"))
    derived["sources"] = ["peak.json", "bandwidth.json"]
    path = tmp_path / "znver3.json"
    with pytest.raises(FileNotFoundError):
        calibration.set_figure(path, "strided_share", 0.6, "s2d.json", "d")
    path.write_text(json.dumps(derived))
    with pytest.raises(ValueError):
        calibration.set_figure(path, "strided_rate", 0.6, "s2d.json", "d")
    doc = calibration.set_figure(path, "strided_share", 0.6, "s2d.json", "d")
    assert doc["memory"]["strided_share"] == 0.6 and doc["measured"]["strided_share"] == "d"
    assert doc["sources"] == ["peak.json", "bandwidth.json", "s2d.json"]
    again = calibration.kept_figures(doc, {**derived, "memory": {**derived["memory"], "cache_gbs": 1.0}})
    assert again["memory"] == {**derived["memory"], "cache_gbs": 1.0, "strided_share": 0.6}
    assert again["sources"] == doc["sources"] and again["measured"]["strided_share"] == "d"
    assert calibration.kept_figures(derived, derived) == derived
    # figures set by hand keep their reasons, but a memory tier derived again replaces its own
    hand = {"cache_gbs": {"source": "bw.json", "why": "w"}, "libm_ns": {"source": "db", "why": "w"}}
    old = {**doc, "memory": {**doc["memory"], "cache_gbs": 80.0, "libm_ns": 9.8}, "by_hand": hand}
    again = calibration.kept_figures(old, derived)
    assert again["memory"] == {**derived["memory"], "strided_share": 0.6, "libm_ns": 9.8}
    assert again["by_hand"] == {"libm_ns": hand["libm_ns"]}
    path.write_text(json.dumps({**old, "by_hand": {"strided_share": {"source": "x", "why": "w"}}}))
    assert "strided_share" not in calibration.set_figure(path, "strided_share", 0.5, "s2d.json", "e")["by_hand"]


def test_the_scripts_record_figures_with_their_results_named_from_the_repository(tmp_path):
    """``record_figures`` (the scripts' ``--calibrate``) sets every figure it is given and names
    the results file relative to the repository root where it lies inside it, else whole."""
    derived = calibration.derive(*_results("znver3"))
    derived["sources"] = ["peak.json", "bandwidth.json"]
    path = tmp_path / "znver3.json"
    path.write_text(json.dumps(derived))
    inside = tmp_path / "repo" / "benchmarks" / "results" / "layers.json"
    figures = {"nchwc_conv": 0.8, "nchwc_depthwise": 0.7}
    calibration.record_figures(path, figures, inside, tmp_path / "repo", "d")
    doc = json.loads(path.read_text())
    assert {k: doc["memory"][k] for k in figures} == figures
    assert doc["sources"][-1] == "benchmarks/results/layers.json"
    outside = tmp_path / "elsewhere.json"
    calibration.record_figures(path, {"strided_share": 0.6}, outside, tmp_path / "repo", "e")
    assert json.loads(path.read_text())["sources"][-1] == str(outside.resolve())


def test_calibrate_cpu_script_writes_what_derive_says(tmp_path, capsys):
    """``calibrate_cpu.py --from-results`` (no measuring) writes the calibration of the two
    results with their paths, and refuses results whose vector width is not the CPU's."""
    from helpers import load_script

    script = load_script("calibrate_cpu")
    peak, bandwidth = (RESULTS / f"{kind}-llvm-znver3.json" for kind in ("peak", "bandwidth"))
    out = tmp_path / "znver3.json"
    assert script.main(["--from-results", str(peak), str(bandwidth), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert {k: doc[k] for k in ("mcpu", "peak_gflops", "memory")} == {
        k: v for k, v in calibration.derive(*_results("znver3")).items() if k in ("mcpu", "peak_gflops", "memory")
    }
    assert doc["sources"] == [
        "benchmarks/results/peak-llvm-znver3.json",
        "benchmarks/results/bandwidth-llvm-znver3.json",
    ]
    assert "znver3 (256-bit code)" in capsys.readouterr().out
    wrong = json.loads(peak.read_text())
    for r in wrong["rows"]:
        r["vector_bits"] = 512 if r["mcpu"] == "znver3" else r["vector_bits"]
    (tmp_path / "peak.json").write_text(json.dumps(wrong))
    with pytest.raises(SystemExit):
        script.main(["--from-results", str(tmp_path / "peak.json"), str(bandwidth), "--out", str(out)])
