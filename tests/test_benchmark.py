"""scripts/benchmark.py end to end on one small model: every variant timed and checked,
results files written, a second run resumes instead of re-measuring."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from helpers import load_script

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    bench = load_script("benchmark")
    out = tmp_path_factory.mktemp("results")
    # the roofline merges nasrnn's matmuls (the default flow's learned model leaves it unchanged),
    # so the eqsat row is a changed module
    argv = [
        "--small",
        "--models",
        "nasrnn",
        "--flow",
        "default",
        "--cost-model",
        "roofline",
        "--repeat",
        "3",
        "--min-ms",
        "2",
        "--mcpu",  # TVM's plain llvm target: the results files are llvm-*
        "generic",
        "--out-dir",
        str(out),
    ]
    assert bench.main(argv) == 0
    return bench, out, argv


def _rows(path: Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_csv_has_every_variant_checked(run):
    bench, out, _ = run
    rows = {r["variant"]: r for r in _rows(out / "llvm-default-small.csv")}
    assert list(rows) == list(bench.DEFAULT_VARIANTS)
    for r in rows.values():
        assert r["model"] == "nasrnn"
        for key in ("median_ms", "p10_ms", "p90_ms"):
            assert math.isfinite(float(r[key])) and float(r[key]) > 0, (r["variant"], key, r[key])
        assert float(r["p10_ms"]) <= float(r["median_ms"]) <= float(r["p90_ms"])
        assert float(r["max_rel_diff"]) <= 1e-4 and math.isfinite(float(r["max_abs_diff"]))
        assert float(r["torch_max_rel_diff"]) <= 1e-4  # nasrnn has a PyTorch source
        assert float(r["pass_seconds"]) >= 0 and float(r["torch_ms"]) > 0
    eqsat = rows["eqsat"]
    assert int(eqsat["enodes"]) > 0 and float(eqsat["predicted_speedup"]) >= 1.0
    assert eqsat["changed"] == "1" and "matmul-merge" in eqsat["rules_fired"]
    assert rows["stock+cpm"]["rules_fired"].startswith("matmuls:")  # CombineParallelMatmul merged something
    assert float(rows["stock"]["speedup_vs_stock"]) == 1.0
    # nasrnn has no convolution, and the default flow does not tune: those rows are stock's build
    for twin in ("stock+nhwc", "stock-aa"):
        assert (
            rows[twin]["notes"] == "the same module as stock" and rows[twin]["median_ms"] == rows["stock"]["median_ms"]
        )
    assert rows["stock+tvm"]["rules_fired"]  # which of TVM's passes changed the model
    hashes = [r["module_hash"] for r in rows.values()]  # graph_accuracy.py checks the timed module by it
    assert all(len(h) == 16 for h in hashes) and rows["eqsat"]["module_hash"] != rows["stock"]["module_hash"]


def test_noise_floor_and_best_stock_headline():
    bench = load_script("benchmark")

    def row(ms, p10, p90, notes=""):
        return {"median_ms": str(ms), "p10_ms": str(p10), "p90_ms": str(p90), "notes": notes}

    data = {
        "a": {
            "stock": row(10, 9, 11),
            "stock+tvm": row(8, 7.8, 8.2),
            "stock-aa": row(9.6, 9, 10),
            "eqsat": row(7, 6.9, 7.1),
            "eqsat+tvm": row(7.5, 7, 8),
        },
        "b": {"stock": row(4, 3.9, 4.1), "stock+nhwc": row(4.2, 4, 4.4), "eqsat": row(3.96, 3.9, 4.0)},
    }
    assert bench.noise_floor(data["a"]) == pytest.approx(max(0.1, 10 / 9.6 - 1))  # the A/A control is larger
    assert bench.noise_floor(data["b"]) == pytest.approx(0.025)
    lines = "\n".join(bench.best_stock_table(data))
    assert "| a | stock+tvm | 8 | eqsat | 7 | 1.143x | ±10.0% |" in lines  # against stock+tvm, not stock
    assert "| b | stock | 4 | eqsat | 3.96 | 1.010x (within noise) | ±2.5% |" in lines
    assert "over 2 models (1 within their noise floor)" in lines
    assert "no A/A" not in lines  # the default flow has no tuning lottery
    tuned = "\n".join(bench.best_stock_table(data, tuned=True))
    assert "| ±2.5% (no A/A) |" in tuned and "| ±10.0% |" in tuned  # b's floor lacks the lottery; a's has it
    assert "(1 within their noise floor; 1 without an A/A control" in tuned


def test_the_nhwc_aa_control_widens_the_floor_and_is_no_stock_variant(tmp_path, monkeypatch):
    """``stock+nhwc-aa`` (stock+nhwc tuned again) is never the best stock variant, widens the
    floor by its distance from stock+nhwc where it was tuned on its own, tunes into the A/A
    database with the A/A seed, and is asked for only (not a default variant)."""
    bench = load_script("benchmark")

    def row(ms, notes=""):
        return {"median_ms": str(ms), "p10_ms": str(ms * 0.99), "p90_ms": str(ms * 1.01), "notes": notes}

    vs = {"stock": row(10), "stock-aa": row(9.8), "stock+nhwc": row(8), "stock+nhwc-aa": row(6.4), "eqsat": row(7)}
    assert bench.fastest(vs, bench.STOCK_VARIANTS) == "stock+nhwc"  # not the faster A/A control
    assert bench.noise_floor(vs) == pytest.approx(8 / 6.4 - 1)
    vs["stock+nhwc-aa"] = row(10, notes="the same module as stock-aa")  # no conv: stock-aa's build
    assert bench.noise_floor(vs) == pytest.approx(10 / 9.8 - 1)
    assert "stock+nhwc-aa" not in bench.DEFAULT_VARIANTS and "stock+nhwc-aa" in bench.VARIANTS
    asked = []
    monkeypatch.setattr(bench.tune, "tune", lambda mod, target, where, trials, **kw: asked.append((where, kw["seed"])))
    bench.tune_variant(bench.Variant("stock+nhwc-aa", None), None, 4, str(tmp_path / "ms"))
    assert asked == [(str(tmp_path / "ms-aa"), bench.AA_SEED)]


def test_sidecar_markdown_and_chart(run):
    _, out, argv = run
    sidecar = json.loads((out / "llvm-default-small.json").read_text())
    for key in ("machine", "versions", "target", "flow", "trials", "date", "command", "repeat", "runs"):
        assert key in sidecar, key
    assert sidecar["machine"]["machine"] and sidecar["machine"]["cores_used"] >= 1
    assert {"tvm", "egglog", "torch"} <= set(sidecar["versions"])
    assert sidecar["target"]["kind"] == "llvm" and sidecar["flow"] == "default" and sidecar["small"] is True
    assert sidecar["command"].endswith(" ".join(argv[-2:]))
    md = (out / "llvm-default-small.md").read_text()
    assert md.startswith("# llvm (generic x86-64 code, no -mcpu), default flow (small models)")
    assert "| nasrnn" in md and "Geometric-mean speedup over stock" in md
    assert "## Against the best stock variant" in md and "over the best stock variant" in md
    assert (out / "llvm-default-small.png").read_bytes()[:4] == b"\x89PNG"


def test_module_hash_is_structural_and_sees_weights():
    import numpy as np
    from tvm import relax

    bench = load_script("benchmark")

    def module(weight: float):
        bb = relax.BlockBuilder()
        x = relax.Var("x", relax.TensorType((2,), "float32"))
        with bb.function("main", [x]):
            with bb.dataflow():
                out = bb.emit_output(bb.emit(relax.op.add(x, relax.const(np.full((2,), weight, "float32")))))
            bb.emit_func_output(out)
        return bb.get()

    assert bench.module_hash(module(1.0)) == bench.module_hash(module(1.0))  # built twice, same structure
    assert bench.module_hash(module(1.0)) != bench.module_hash(module(2.0))


def test_rerun_resumes(run):
    bench, out, argv = run
    before = _rows(out / "llvm-default-small.csv")
    assert bench.main(argv) == 0  # nothing left to measure: no model is imported or built again
    assert _rows(out / "llvm-default-small.csv") == before
    assert len(json.loads((out / "llvm-default-small.json").read_text())["runs"]) == 2


def test_quick_is_one_small_tuned_model_and_explicit_options_win():
    bench = load_script("benchmark")
    args = bench.parse_args(["--quick"])
    assert (args.models, args.small, args.flow, args.trials, args.force) == (["squeezenet"], True, "tuned", 64, True)
    assert args.variants == ["stock", "stock+tvm", "stock+nhwc", "stock-aa", "eqsat"]
    assert args.out_dir == str(bench.QUICK_DIR)
    args = bench.parse_args(["--quick", "--trials", "2", "--models", "nasrnn", "--out-dir", "/tmp/x"])
    assert (args.models, args.trials, args.out_dir, args.flow) == (["nasrnn"], 2, "/tmp/x", "tuned")
    assert bench.parse_args([]).flow == "default"  # --quick's settings are not the defaults


def test_headline_geomean_counts_unchanged_models_as_stock():
    bench = load_script("benchmark")

    def variants(eq_speedup: float, changed: bool) -> dict:
        return {
            "stock": {"speedup_vs_stock": "1.0"},
            "stock+cpm": {"speedup_vs_stock": "1.0"},
            "eqsat": {"speedup_vs_stock": str(eq_speedup), "changed": "1" if changed else "0"},
        }

    # a model the pass changed (1.21x) and one it left alone whose stock-identical build measured 1.10x
    line = bench.summary_line({"a": variants(1.21, True), "b": variants(1.10, False)})
    assert "**eqsat 1.100x** over 2 models, counting the 1 it left unchanged as 1.000x" in line
    assert "(1.154x as measured)" in line and "1.210x over the 1 it changed" in line


def test_forced_rerun_that_fails_keeps_the_old_rows(run, monkeypatch):
    bench, out, argv = run
    before = _rows(out / "llvm-default-small.csv")

    def interrupted(*_args, **_kwargs):
        raise RuntimeError("interrupted")

    monkeypatch.setattr(bench, "bench_model", interrupted)
    assert bench.main([*argv, "--force"]) == 0  # the failure is reported; the old rows still make a table
    assert _rows(out / "llvm-default-small.csv") == before


def test_a_variant_added_later_retimes_the_whole_model(run, monkeypatch):
    """A model that lacks one asked variant runs again, and the new run's rows replace all
    of its rows: a model's variants are never timed in different processes."""
    bench, out, argv = run
    path = out / "llvm-default-small.csv"
    before = _rows(path)
    bench.write_rows(path, [r for r in before if r["variant"] != "stock-aa"], append=False)

    def retimed(name, model, variants, *_args, **_kwargs):
        return [{**r, "median_ms": "999"} for r in before if r["variant"] in variants]

    monkeypatch.setattr(bench, "bench_model", retimed)
    try:
        assert bench.main(argv) == 0
        after = _rows(path)
        assert sorted(r["variant"] for r in after) == sorted(r["variant"] for r in before)
        assert all(r["median_ms"] == "999" for r in after)  # stock too, though its row was there
    finally:  # the module-scoped fixture's file as it was, for the tests after this one
        bench.write_rows(path, before, append=False)


def test_a_build_whose_outputs_differ_fails_the_run(run, monkeypatch, capsys):
    """A variant whose outputs differ from stock's by more than rounding (a miscompiled tuned
    build: 2e24 on Inception-v3) fails the run, naming it, though its row is written."""
    bench, out, argv = run
    path = out / "llvm-default-small.csv"
    before = _rows(path)

    def miscompiled(name, model, variants, *_args, **_kwargs):
        return [{**r, "max_rel_diff": "2.0e+24" if r["variant"] == "eqsat" else r["max_rel_diff"]} for r in before]

    monkeypatch.setattr(bench, "bench_model", miscompiled)
    try:
        assert bench.main([*argv, "--force"]) == 1
        assert (
            "FAILED: outputs differ from stock's by over 0.001 of their scale: nasrnn/eqsat" in capsys.readouterr().out
        )
        assert {r["variant"]: r["max_rel_diff"] for r in _rows(path)}["eqsat"] == "2.0e+24"
    finally:
        bench.write_rows(path, before, append=False)


def test_tuned_flow_starts_from_the_committed_databases(tmp_path, monkeypatch, capsys):
    """The benchmark's own database and the A/A control's are seeded from
    benchmarks/tuning/<target>[-aa]; where they were tuned is said."""
    bench = load_script("benchmark")
    seeded = []
    monkeypatch.setattr(bench.tuning_db, "seed_database", lambda work, seed, trials: seeded.append((work, seed)) or 3)
    monkeypatch.setattr(bench, "TUNING_DIR", tmp_path / "tuning")
    (tmp_path / "tuning" / "llvm").mkdir(parents=True)
    (tmp_path / "tuning" / "llvm" / "SOURCE.json").write_text(json.dumps({"cpu": "Some CPU"}))
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    args = bench.parse_args(["--flow", "tuned", "--mcpu", "generic", "--work-dir", str(tmp_path / "ms")])
    bench.seed_databases(args)
    assert seeded == [
        (str(tmp_path / "ms"), tmp_path / "tuning" / "llvm"),
        (f"{tmp_path / 'ms'}-aa", tmp_path / "tuning" / "llvm-aa"),
    ]
    out = capsys.readouterr().out
    assert "3 tuned kernels from tuning/llvm (tuned on Some CPU" in out
    assert "--no-seed" in out or "Some CPU" == bench.provenance.cpu_name()


def test_committed_databases_seed_only_a_run_at_their_budget(tmp_path, monkeypatch, capsys):
    """Stock kernels tuned at 64 trials beside eqsat's tuned at 4 would favour stock."""
    bench = load_script("benchmark")
    seeded = []
    monkeypatch.setattr(bench.tuning_db, "seed_database", lambda work, seed, trials: seeded.append((seed, trials)) or 3)
    monkeypatch.setattr(bench, "TUNING_DIR", tmp_path / "tuning")
    monkeypatch.setattr(bench, "ROOT", tmp_path)
    (tmp_path / "tuning" / "llvm").mkdir(parents=True)
    source = {"cpu": "Some CPU", "trial_budgets": [32, 64]}
    (tmp_path / "tuning" / "llvm" / "SOURCE.json").write_text(json.dumps(source))
    generic = ["--mcpu", "generic", "--work-dir", str(tmp_path / "ms")]
    bench.seed_databases(bench.parse_args(["--flow", "tuned", "--trials", "4", *generic]))
    assert not [seed for seed, _ in seeded if seed == tmp_path / "tuning" / "llvm"]
    assert "not starting from tuning/llvm: tuned with [32, 64] trials per kernel, this run 4" in capsys.readouterr().out
    # a database with kernels at several budgets seeds a run with the kernels at its budget only
    bench.seed_databases(bench.parse_args(["--flow", "tuned", "--trials", "64", *generic]))
    assert (tmp_path / "tuning" / "llvm", 64) in seeded
    assert not [seed for seed, _ in seeded if seed.name.startswith("llvm-t")]  # none committed apart
    # kernels tuned longer than the main database's budget for them are committed apart
    # (export_tuning.py --apart): a run at that budget seeds from both
    (tmp_path / "tuning" / "llvm-t64").mkdir()
    (tmp_path / "tuning" / "llvm-t64" / "SOURCE.json").write_text(json.dumps({"trial_budgets": [64]}))
    seeded.clear()
    bench.seed_databases(bench.parse_args(["--flow", "tuned", "--trials", "64", *generic]))
    assert {(tmp_path / "tuning" / "llvm", 64), (tmp_path / "tuning" / "llvm-t64", 64)} <= set(seeded)


def test_the_quick_job_tunes_into_its_own_database():
    bench = load_script("benchmark")
    assert bench.parse_args(["--quick"]).work_dir == str(bench.QUICK_DIR / "ms-llvm")
    assert bench.parse_args(["--quick", "--work-dir", "/x"]).work_dir == "/x"
    assert bench.parse_args(["--mcpu", "generic"]).work_dir.endswith("tvm_eqsat/ms-llvm")
    host = bench.tune.host_cpu()  # by default, kernels for this CPU: a database of their own
    assert bench.parse_args([]).work_dir.endswith("tvm_eqsat/ms-llvm" + ("" if host == "generic" else f"-{host}"))


def test_llvm_code_is_for_this_cpu_unless_generic():
    """TVM's plain llvm target compiles for generic x86-64 (SSE2): the benchmark names the
    CPU, and says which code it timed in the files' names and the Markdown's title."""
    bench = load_script("benchmark")
    host = bench.tune.host_cpu()
    generic = bench.make_target("llvm", "sm_90", "generic")
    features = bench.tvm.target.codegen.llvm_get_cpu_features
    gained = features(bench.make_target("llvm", "", host)) - features(generic)
    assert host == "generic" or any(f.startswith(("avx", "sve", "neon")) for f in gained)  # vector units
    assert "mcpu" not in generic.export() and generic.kind.name == "llvm"  # the committed databases' target
    assert bench.make_target("llvm", "sm_90", "skylake-avx512").attrs["mcpu"] == "skylake-avx512"
    args = bench.parse_args(["--mcpu", "skylake-avx512", "--flow", "tuned", "--small", "--tag", "t"])
    assert bench._stem(args) == "llvm-skylake-avx512-tuned-small-t"
    assert bench._stem(bench.parse_args(["--mcpu", "generic"])) == "llvm-default"
    assert bench.parse_args(["--quick"]).mcpu == "generic"  # the committed kernels' target
    assert bench._stem(bench.parse_args(["--target", "cuda"])) == "cuda-default"
    with pytest.raises(SystemExit):  # a misspelt CPU would build generic code under its name
        bench.parse_args(["--mcpu", "skylake-avx51"])


def test_cold_cache_names_its_own_databases_and_results_and_tunes_cold(tmp_path, monkeypatch):
    """--cold-cache: kernels timed with flushed caches go to <target>-cold databases and
    results (never mixed with warm ones), the tuning is asked to flush, and the flag is
    refused where it means nothing (untuned, CUDA) or would be undone (the pass's speed check)."""
    bench = load_script("benchmark")
    args = bench.parse_args(["--mcpu", "znver5", "--flow", "tuned", "--tag", "t32", "--cold-cache"])
    assert bench._stem(args) == "llvm-znver5-cold-tuned-t32"
    assert args.work_dir.endswith("tvm_eqsat/ms-llvm-znver5-cold")
    asked = []
    monkeypatch.setattr(bench.tune, "tune", lambda mod, target, where, trials, **kw: asked.append((where, kw)))
    monkeypatch.setattr(bench, "COLD_CACHE", True)
    for name in ("stock", "stock-aa"):
        bench.tune_variant(bench.Variant(name, None), None, 4, str(tmp_path / "ms-cold"))
    assert [(w, kw["cold_cache"]) for w, kw in asked] == [
        (str(tmp_path / "ms-cold"), True),
        (str(tmp_path / "ms-cold-aa"), True),
    ]
    for bad in (["--cold-cache"], ["--cold-cache", "--flow", "tuned", "--target", "cuda"]):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)
    with pytest.raises(SystemExit):
        bench.parse_args(["--cold-cache", "--flow", "tuned", "--speed-check"])


def test_rows_are_not_added_to_a_file_timed_on_another_cpu(run):
    bench, out, argv = run
    sidecar = json.loads((out / "llvm-default-small.json").read_text())
    bench.check_same_machine(out / "llvm-default-small.csv")  # this machine's: fine
    sidecar["machine"]["machine"] = "Another CPU"
    (out / "llvm-default-small.json").write_text(json.dumps(sidecar))
    with pytest.raises(SystemExit, match="timed on Another CPU"):
        bench.main([*argv[:2], "squeezenet", *argv[3:]])
    sidecar["machine"]["machine"] = bench.provenance.cpu_name()
    (out / "llvm-default-small.json").write_text(json.dumps(sidecar))


def test_the_quick_job_tunes_nothing_with_the_committed_databases(tmp_path):
    """Every kernel of every variant the quick job builds is in benchmarks/tuning at its
    budget, so a first run builds from the committed databases and tunes nothing (the
    pass must keep making the kernels that were tuned: a change to what it extracts for
    the quick model shows up here, and the databases need the new kernels)."""
    import tvm

    bench = load_script("benchmark")
    args = bench.parse_args(["--quick", "--work-dir", str(tmp_path / "ms")])
    bench.seed_databases(args)
    target = tvm.target.Target(args.target)
    model = bench.models.SMALL[args.models[0]]()
    for name in args.variants:
        v = bench.make_variant(name, model.mod, target, bench.pass_options(args))
        where = f"{args.work_dir}-aa" if name == "stock-aa" else args.work_dir  # the A/A control's own
        todo, n = bench.tune.pending_tasks(v.mod, target, where, args.trials)
        assert n > 0 and not todo, f"{name}: {len(todo)} of {n} kernels not in {bench.TUNING_DIR}"


def test_explain_says_what_changed_and_against_which_stock(run):
    bench, out, _ = run
    rows = _rows(out / "llvm-default-small.csv")
    args = bench.parse_args(["--quick", "--flow", "default"])
    text = bench.explain(rows, args)
    assert "nasrnn" in text and "best stock variant" in text and "The pass changed:" in text
    assert "matmuls merged into" in text  # the roofline merges nasrnn's matmuls
    assert "checked against stock's" in text


def test_stock_fast_is_tvms_graph_passes_then_its_fast_math_and_only_when_asked_for():
    """``stock+fast``: TVM's graph passes, then ``FastMathTransform`` (its softmax becomes TOPI's
    fast_softmax, and the row says so); ``--variants`` leaves it out unless named."""
    from helpers import module, relax_ops, tensor
    from tvm.relax import op as R

    bench = load_script("benchmark")
    mod = module([tensor("x", (4, 16))], lambda bb, x: R.nn.softmax(x, -1))
    v = bench.make_variant("stock+fast", mod, bench.make_target("llvm", ""), {})
    assert v.changed and v.rules_fired.endswith("FastMathTransform"), v.rules_fired
    assert "relax.nn.softmax" not in relax_ops(v.mod) and any(
        gv.name_hint == "fast_softmax" for gv in v.mod.get_global_vars()
    )
    assert "stock+fast" not in bench.parse_args([]).variants
    assert "stock+fast" in bench.parse_args(["--variants", "stock+fast"]).variants


def test_timing_days_compares_each_builds_median_over_the_days(tmp_path):
    """``timing_days.py``: each build's median over the days, the best stock variant chosen
    among those medians (not each day's luckiest), each day's own ratio beside it; a build whose
    module changed between days, or that some day did not time, is left out and named."""
    bench, days = load_script("benchmark"), load_script("timing_days")

    def rows(model, times, moved=()):
        return [
            {"model": model, "variant": v, "median_ms": ms, "p10_ms": ms * 0.98, "p90_ms": ms * 1.02,
             "module_hash": "other" if v in moved else f"{model}-{v}", "notes": ""}
            for v, ms in times.items()
        ]  # fmt: skip

    one, two = tmp_path / "run-day1.csv", tmp_path / "run-day2.csv"
    bench.write_rows(one, rows("a", {"stock": 10, "stock+tvm": 9, "eqsat": 8}) + rows("b", {"stock": 4, "eqsat": 3}))
    bench.write_rows(
        two,
        rows("a", {"stock": 10, "stock+tvm": 11, "stock+nhwc": 5, "eqsat": 9})  # stock+nhwc: this day only
        + rows("b", {"stock": 4, "eqsat": 2}, ("eqsat",)),
    )
    out = tmp_path / "days.md"
    assert days.main([str(one), str(two), "--out", str(out)]) == 0
    text = out.read_text()
    # a: day 1 9/8 against stock+tvm, day 2 5/9 against stock+nhwc; medians: stock 10, stock+tvm 10, eqsat 8.5
    left_out = "(left out, not timed in every run: stock+nhwc)"
    assert f"| a | 1.125x (stock+tvm) | 0.556x (stock+nhwc) | **1.176x** {left_out} | stock | ±2.0% |" in text
    assert (
        "| b | 1.333x (stock) | 2.000x (stock) | - (left out, another module in another run: eqsat) | - | - |" in text
    )
    assert "**1.176x** over 1 models" in text and "| model | day1 | day2 |" in text
    with pytest.raises(SystemExit, match="no such results file"):
        days.main([str(tmp_path / "missing.csv")])


def test_eqsat_learned_runs_the_pass_with_the_learned_model_and_is_asked_for():
    """``eqsat-learned`` is the pass with ``--learned-model`` instead of ``--cost-model`` (how
    ``held_out_e2e.py --flow tuned`` times a held-out model beside the roofline); it is never a
    default variant nor the headline's eqsat, and a module equal to eqsat's is not built twice."""
    bench = load_script("benchmark")
    assert bench.LEARNED not in bench.DEFAULT_VARIANTS and bench.LEARNED not in bench.EQSAT_VARIANTS
    args = bench.parse_args(["--variants", "eqsat", bench.LEARNED, "--learned-model", "/models/held"])
    assert args.variants == ["stock", "eqsat", bench.LEARNED]
    assert bench.pass_options(args)["cost_model"] == "auto"
    assert bench.pass_options(args, bench.LEARNED)["cost_model"] == "/models/held"
    assert bench.parse_args([]).learned_model == "xgb"  # the shipped learned model by default
    model = bench.models.SMALL["nasrnn"]()
    target = bench.make_target("llvm", "sm_90", "generic")
    same = bench.parse_args(["--cost-model", "roofline", "--learned-model", "roofline", "--flow", "tuned"])
    built = {"eqsat": bench.make_variant("eqsat", model.mod, target, bench.pass_options(same))}
    learned = bench.make_variant(bench.LEARNED, model.mod, target, bench.pass_options(same, bench.LEARNED))
    assert learned.name == bench.LEARNED and learned.changed and learned.predicted_speedup > 1
    assert bench._twin(learned, built, "tuned") == "eqsat"


def test_the_learned_table_compares_each_model_with_eqsat_inside_its_floor():
    bench = load_script("benchmark")

    def row(ms, p10, p90, h, pred="1.2"):
        return {"median_ms": str(ms), "p10_ms": str(p10), "p90_ms": str(p90), "module_hash": h, "notes": "",
                "predicted_speedup": pred}  # fmt: skip

    data = {
        "a": {"stock": row(10, 9.8, 10.2, "s"), "eqsat": row(8, 7.9, 8.1, "x"), bench.LEARNED: row(6, 5.9, 6.1, "y")},
        "b": {"stock": row(10, 9, 11, "s"), "eqsat": row(8, 7.9, 8.1, "x"), bench.LEARNED: row(8.4, 8, 9, "z")},
        "c": {"stock": row(10, 9.8, 10.2, "s"), "eqsat": row(8, 7.9, 8.1, "x"), bench.LEARNED: row(8, 7.9, 8.1, "x")},
        "d": {"stock": row(10, 9.8, 10.2, "s"), "eqsat": row(8, 7.9, 8.1, "x")},
    }
    lines = "\n".join(bench.learned_table(data))
    assert "| a | 8 (1.2) | 6 (1.2) | no | 1.333x | ±2.0% |" in lines
    assert "| b | 8 (1.2) | 8.4 (1.2) | no | 0.952x (within noise) | ±10.0% |" in lines
    assert "| c | 8 (1.2) | 8 (1.2) | yes | 1.000x (within noise) |" in lines
    assert "| d |" not in lines
    assert "- a: nothing" in lines and "- c:" not in lines  # what it changed, where not eqsat's module
    assert bench.learned_table({"d": data["d"]}) == []
