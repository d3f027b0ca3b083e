"""Runtime-only bundles: built here, run in a separate process with TVM's runtime only."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import tvm
from helpers import const, global_pool_kernel, load_script, module, tensor
from tvm.relax import op as R

from tvm_eqsat import batch_tune, bundle, tune, tuning_db


def _mlp():
    x = tensor("x", (8, 32))
    return module([x], lambda bb, x: R.nn.relu(bb.emit(R.matmul(x, const((32, 16))))))


def _run_bundle(bundle_dir: Path, out: Path) -> None:
    """The bundle's runner in a separate process, as the device runs it."""
    env = {k: v for k, v in os.environ.items() if k != "TVM_USE_RUNTIME_LIB"}
    subprocess.run(
        [sys.executable, str(bundle_dir / "run.py"), "--out", str(out)],
        check=True,
        env=env,
        capture_output=True,
        timeout=600,
    )


def test_llvm_bundle_runs_with_the_runtime_only(tmp_path):
    path = bundle.build_bundle(
        [bundle.Entry("mlp", _mlp(), number=2, repeat=5)],
        "llvm",
        tmp_path / "b",
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
    )
    assert bundle.bundle_bytes(path) < bundle.room_bytes() < bundle.LIMIT_BYTES
    packed = [Path(n).name for n in tarfile.open(path / "runtime.tar.gz").getnames()]
    assert "libtvm_runtime.so" in packed and "libtvm_compiler.so" not in packed
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "TVM_USE_RUNTIME_LIB"}
    subprocess.run(
        [sys.executable, str(path / "run.py"), "--out", str(out)], check=True, env=env, capture_output=True, timeout=300
    )
    result = json.loads((out / "results.json").read_text())
    assert result["runtime_only"] and result["tvm_file"].startswith(str(path))
    assert not result["failures"], result["failures"]
    (row,) = result["rows"]
    assert row["name"] == "mlp" and row["median_ms"] > 0 and row["samples"] == 5
    assert row["max_rel_diff"] < 1e-5  # the device run computes what this machine computed


def test_lifted_weights_compute_what_the_bound_ones_did():
    """lift_constants only moves the large constants into parameters: fed the same
    values, main computes the same; small constants stay."""
    import numpy as np

    from tvm_eqsat import verify

    x = tensor("x", (8, 32))
    w, bias = const((32, 16)), const((16,))
    mod = module([x], lambda bb, x: R.add(bb.emit(R.matmul(x, w)), bias))
    lifted, specs = bundle.lift_constants(mod, min_bytes=32 * 16 * 4)
    assert specs == [([32, 16], "float32")] and len(lifted["main"].params) == 2
    args = verify.random_inputs(mod["main"])
    got = verify.run(lifted, args + [w.value.numpy()])[0]
    np.testing.assert_allclose(got, verify.run(mod, args)[0], rtol=1e-6)
    assert len(mod["main"].params) == 1  # the input module is left as it was


def test_device_weights_leave_the_library_and_are_made_by_the_runner(tmp_path):
    x = tensor("x", (8, 256))
    mod = module([x], lambda bb, x: R.nn.relu(bb.emit(R.matmul(x, const((256, 512))))))  # 512 KiB of weights
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    sizes = {}
    for weights in ("bound", "device"):
        path = bundle.build_bundle(
            [bundle.Entry("m", mod, number=1, repeat=2, weights=weights)], "llvm", tmp_path / weights, python_version=py
        )
        sizes[weights] = (path / "m.so.gz").stat().st_size
    assert sizes["device"] < sizes["bound"] - 400_000
    (entry,) = json.loads((path / "manifest.json").read_text())["entries"]
    assert entry["weights"] == 1 and entry["inputs"][-1] == [[256, 512], "float32"] and "expected" not in entry
    env = {k: v for k, v in os.environ.items() if k != "TVM_USE_RUNTIME_LIB"}
    subprocess.run(
        [sys.executable, str(path / "run.py"), "--out", str(tmp_path / "out")],
        check=True, env=env, capture_output=True, timeout=300,
    )  # fmt: skip
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    assert not result["failures"], result["failures"]
    assert result["rows"][0]["median_ms"] > 0 and "max_rel_diff" not in result["rows"][0]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_bundle_for_the_device_fits_and_carries_its_python(tmp_path):
    """CUDA kernels compiled with nvcc, the tvm_ffi wheel for the device's Python 3.12
    (downloaded from PyPI once): what a device run takes, under its 64 MiB."""
    path = bundle.build_bundle([bundle.Entry("mlp", _mlp())], {"kind": "cuda", "arch": "sm_90"}, tmp_path / "b")
    assert bundle.bundle_bytes(path) < bundle.room_bytes()
    assert "libtvm_runtime_cuda.so" in [Path(n).name for n in tarfile.open(path / "runtime.tar.gz").getnames()]
    assert list((path / "fatbin").glob("*.fatbin.gz"))  # compiled here: the runtime-only device cannot
    assert list((path / "wheels").glob("apache_tvm_ffi-*-cp312-*.whl"))
    manifest = json.loads((path / "manifest.json").read_text())
    assert manifest["target_kind"] == "cuda" and manifest["python"] == "3.12"


@pytest.mark.slow  # 28 s on a 2-core Zen 3: the GPU sessions' tool, run before each device run
def test_offline_tuning_round_trip_on_the_cpu(tmp_path):
    """Candidates built here, timed by the runtime-only runner in another process,
    recorded as measured records; the tuned build then uses them and computes the same."""
    import numpy as np
    import tvm

    from tvm_eqsat import batch_tune, verify

    mod = _mlp()
    path = batch_tune.candidate_bundle(
        mod,
        "llvm",
        tmp_path / "b",
        n=2,
        number=2,
        repeat=2,
        python_version=f"{sys.version_info.major}.{sys.version_info.minor}",
    )
    kernels = [e for e in json.loads((path / "manifest.json").read_text())["entries"] if e["kind"] == "kernel"]
    assert len(kernels) >= 2
    env = {k: v for k, v in os.environ.items() if k != "TVM_USE_RUNTIME_LIB"}
    subprocess.run(
        [sys.executable, str(path / "run.py"), "--out", str(tmp_path / "out")],
        check=True,
        env=env,
        capture_output=True,
        timeout=600,
    )
    result = json.loads((tmp_path / "out" / "results.json").read_text())
    assert result["runtime_only"] and not result["failures"] and len(result["rows"]) == len(kernels)
    bases = {e["name"] for e in kernels if "baseline" not in e}
    assert bases and all(e.get("baseline") in bases for e in kernels if e["name"] not in bases)
    report: list = []
    db = batch_tune.record_results(path, tmp_path / "out" / "results.json", tmp_path / "db", report)
    assert len(report) == len(bases)  # one row per kernel: its stock schedule against its best candidate
    records = db.get_all_tuning_records()
    # only a candidate faster than the kernel's stock schedule is recorded, one per kernel
    assert len(records) == sum(r["best_ms"] < r["baseline_ms"] for r in report)
    won = sorted(r["best_ms"] for r in report if r["best_ms"] < r["baseline_ms"])
    assert sorted(round(float(r.run_secs[0]) * 1e3, 9) for r in records) == [round(t, 9) for t in won]
    # the training labels: what the tuned build runs each kernel in, dlight's wins included,
    # found by the harvest under the model's own kernels
    from tvm_eqsat import harvest

    times = batch_tune.kernel_times([(path, tmp_path / "out" / "results.json")])
    assert sorted(round(us, 6) for us, _ in times.values()) == sorted(
        round(min(r["best_ms"], r["baseline_ms"]) * 1e3, 6) for r in report
    )
    assert all(n == r["timed"] + 1 for (_, n), r in zip(times.values(), report))
    found = harvest.harvest(times, [mod], "llvm")
    assert found and {round(h.median_us, 6) for h in found} <= {round(us, 6) for us, _ in times.values()}
    target = tune.tuning_target("llvm")
    vm = tvm.relax.VirtualMachine(tune.build(mod, target, db), tvm.cpu())
    args = verify.random_inputs(mod["main"])
    got = vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()
    np.testing.assert_allclose(got, verify.run(mod, args)[0], rtol=1e-4, atol=1e-4)


CUDA = {"kind": "cuda", "arch": "sm_90"}


def _kernel_bodies(cuda_text: str) -> dict[str, str]:
    """Each CUDA kernel's code in ``cuda_text`` (a library's bytes or a module's source),
    by its function's name (``k0_c1`` for ``k0_c1_kernel``), its own name taken out."""
    pattern = r"__global__ void __launch_bounds__\(\d+\) (\w+)_kernel(\([^;]*?\{.*?\n\})"
    return dict(re.findall(pattern, cuda_text, re.S))


def test_the_stock_schedule_is_made_on_a_copy_of_the_kernel():
    """dlight's pass schedules the module it is given in place.  The baseline must not
    touch the task's workload, which MetaSchedule samples next and the records name: that
    sharing once made every CUDA candidate dlight's own schedule (no GPU needed)."""
    from tvm_eqsat import batch_tune

    (task,) = batch_tune.extract_tasks([_mlp()], CUDA, batch_tune.heavy)
    workload = task.dispatched[0]
    before = workload.script()
    base = batch_tune.default_scheduled(workload, tvm.target.Target(CUDA))
    assert workload.script() == before
    assert "threadIdx" in base.script() and "threadIdx" not in before


@pytest.mark.slow  # 7-22 s on a 2-core Zen 3 (nvcc): the GPU sessions' tool, run before each device run
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
def test_cuda_candidates_are_sampled_schedules_and_their_records_name_the_kernel(tmp_path):
    """A CUDA candidate bundle (compiled here, not run): each candidate is a schedule
    MetaSchedule sampled, not the stock one, and a candidate recorded from (made-up)
    device times is found under the unscheduled kernel, where the tuned build looks."""
    import gzip

    from tvm_eqsat import batch_tune

    (task,) = batch_tune.extract_tasks([_mlp()], CUDA, batch_tune.heavy)
    path = batch_tune.candidate_bundle([task], CUDA, tmp_path / "b", n=4)
    info = json.loads(gzip.decompress((path / batch_tune.CANDIDATES).read_bytes()))
    (fresh,) = batch_tune.extract_tasks([_mlp()], CUDA, batch_tune.heavy)  # the kernel as the tuned build sees it
    kernel = fresh.dispatched[0]
    assert tvm.ir.load_json(info["workloads"][0]).script() == kernel.script()
    names = [c["name"] for c in info["candidates"]]
    assert len(names) >= 2 and len({json.dumps(c["trace"]) for c in info["candidates"]}) == len(names)
    with tarfile.open(path / bundle.SOLID) as tar:
        tar.extractall(tmp_path / "x", filter="data")
    bodies = _kernel_bodies(b"".join(lib.read_bytes() for lib in (tmp_path / "x").rglob("*.so")).decode("latin-1"))
    assert set(bodies) == {"k0_base", *names}
    assert all(bodies[n] != bodies["k0_base"] for n in names)  # a sampled schedule, not dlight's
    rows = [{"name": "k0_base", "median_ms": 1.0}] + [
        {"name": n, "median_ms": 0.5 + i / 10} for i, n in enumerate(names)
    ]
    (tmp_path / "results.json").write_text(json.dumps({"rows": rows}))
    db = batch_tune.record_results(path, tmp_path / "results.json", tmp_path / "db")
    assert len(db.get_all_tuning_records()) == 1
    assert db.has_workload(kernel) and tuning_db.tuned_records(db, kernel)
    assert batch_tune.unmatched_records(db, [fresh]) == 0 and batch_tune.unmatched_records(db, []) == 1
    # the tuned build compiles the recorded candidate (the fastest), not dlight's schedule
    from tvm_eqsat.measure import cuda_sources

    with bundle.cuda_compile_env(tvm.target.Target(CUDA)):
        built = "".join(cuda_sources(tune.build(_mlp(), tvm.target.Target(CUDA), db)))
    (body,) = _kernel_bodies(built).values()
    assert body == bodies[names[0]] != bodies["k0_base"]


def test_a_candidate_budget_goes_where_the_work_is(monkeypatch):
    """``allot`` shares a total by each kernel's work, within [least, most], and spends all
    of it that the caps allow."""
    from tvm_eqsat import batch_tune

    work = {"big": 1000.0, "mid": 10.0, "small": 1.0, "none": 0.0}
    monkeypatch.setattr(batch_tune, "task_flops", lambda t: work[t])
    assert batch_tune.allot(list(work), 60, least=4, most=32) == [32, 19, 5, 4]
    assert batch_tune.allot(list(work), 16) == [4, 4, 4, 4]
    assert batch_tune.allot(list(work), 300, most=64) == [64, 64, 64, 4]  # no more than the caps allow
    with pytest.raises(ValueError):
        batch_tune.allot(list(work), 15)


def test_a_kernels_work_is_its_flops_times_its_uses():
    from tvm_eqsat import batch_tune

    x = tensor("x", (8, 64))
    mod = module([x], lambda bb, x: R.matmul(bb.emit(R.matmul(x, const((64, 256)))), const((256, 256))))
    small, big = sorted(batch_tune.extract_tasks([mod], "llvm", batch_tune.heavy), key=batch_tune.task_flops)
    assert batch_tune.task_flops(small) == 2 * 8 * 64 * 256 and batch_tune.task_flops(big) == 2 * 8 * 256 * 256
    assert batch_tune.allot([small, big], 20) == [6, 14]  # 12 over the 4 each, shared 1:4


@pytest.mark.slow  # 66 s on a 2-core Zen 3; build is checked by the packing test, run and collect by the offline one
def test_device_bench_builds_runs_and_collects_on_the_cpu(tmp_path):
    bench = load_script("device_bench")
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    bench.main(
        [
            "build",
            "--small",
            "--models",
            "resnet50",
            "--target",
            "llvm",
            "--python",
            py,
            "--variants",
            "stock",
            "stock+tvm",
            "eqsat",
            "--rounds",
            "2",
            "--repeat",
            "2",
            "--number",
            "1",
            "--out",
            str(tmp_path / "b"),
        ]
    )  # weights made by the runner: the libraries carry code only
    _run_bundle(tmp_path / "b", tmp_path / "out")
    (tmp_path / "res").mkdir()
    bench.main(
        [
            "collect",
            str(tmp_path / "b"),
            str(tmp_path / "out" / "results.json"),
            "--small",
            "--out-dir",
            str(tmp_path / "res"),
        ]
    )
    rows = {r["variant"]: r for r in csv.DictReader(open(tmp_path / "res" / "llvm-default-small.csv"))}
    assert {"stock", "stock+tvm", "eqsat"} <= set(rows)  # both rewrite resnet50 (batch-norm folding)
    assert all(float(r["median_ms"]) > 0 and r["max_rel_diff"] == "" for r in rows.values())
    md = (tmp_path / "res" / "llvm-default-small.md").read_text()
    assert "| resnet50 |" in md and "over the best stock variant" in md


@pytest.mark.slow  # 19 s on a 2-core Zen 3: the GPU sessions' tool, run before each device run
def test_kernel_dataset_through_a_bundle_on_the_cpu(tmp_path):
    """collect_kernels.py --bundle builds the kernels for a machine without TVM; the
    device run's results.json becomes dataset rows (--from-bundle)."""
    collect = load_script("collect_kernels")
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    common = [
        "--target",
        "llvm",
        "--flow",
        "default",
        "--small",
        "--models",
        "resnet50",
        "--sources",
        "model",
        "--limit",
        "3",
        "--out",
        str(tmp_path / "dataset.csv"),
    ]
    collect.main([*common, "--bundle", str(tmp_path / "b"), "--python", py, "--repeat", "2"])
    _run_bundle(tmp_path / "b", tmp_path / "out")
    collect.main([*common, "--from-bundle", str(tmp_path / "b"), str(tmp_path / "out" / "results.json")])
    rows = list(csv.DictReader(open(tmp_path / "dataset.csv")))
    assert len(rows) == 3 and all(float(r["median_us"]) > 0 and r["source"] == "model" for r in rows)
    # the device's rows count as measured: asked again, the next bundle holds other kernels (a
    # bundle's rows say 0 trials where this machine's default-flow rows say 16; the flow has no budget)
    collect.main([*common, "--bundle", str(tmp_path / "b2"), "--python", py])
    again = json.loads((tmp_path / "b2" / "workloads.json").read_text()).values()
    measured = {r["key"] for r in rows}
    assert again and not measured & {json.dumps(w["workload"], sort_keys=True) for w in again}


@pytest.mark.slow  # 10 s on a 2-core Zen 3: the GPU sessions' tool, run before each device run
def test_elementwise_calibration_through_a_bundle_on_the_cpu(tmp_path):
    """collect_kernels.py --elementwise --bundle builds the calibration's kernels; the device
    run's times become elementwise.json beside the dataset (--from-bundle)."""
    collect = load_script("collect_kernels")
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    common = ["--target", "llvm", "--flow", "default", "--elementwise", "--out", str(tmp_path / "m" / "dataset.csv")]
    collect.main([*common, "--bundle", str(tmp_path / "b"), "--python", py, "--repeat", "3"])
    _run_bundle(tmp_path / "b", tmp_path / "out")
    collect.main([*common, "--from-bundle", str(tmp_path / "b"), str(tmp_path / "out" / "results.json")])
    doc = json.loads((tmp_path / "m" / "elementwise.json").read_text())
    assert doc["sizes"] == [4096, 65536] and doc["seconds"] is None
    ns = doc["ns_per_element"]
    assert ns["Relu"] == 0.0 and ns["Tanh"] > 0.5  # as measured in-process (test_measure.py)
    assert {"Add", "Exp", "Sigmoid"} <= set(ns)


@pytest.mark.slow  # 18 s on a 2-core Zen 3: the GPU sessions' tool, run before each device run
def test_device_bench_packs_models_into_parts_that_fit(tmp_path, monkeypatch):
    bench = load_script("device_bench")
    monkeypatch.setattr(bench, "RUNTIME_MIB", bundle.room_bytes() / 2**20 - 0.7)  # room for 0.7 MiB of libraries
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    bench.main(
        [
            "build",
            "--small",
            "--models",
            "nasrnn",
            "squeezenet",
            "--target",
            "llvm",
            "--python",
            py,
            "--variants",
            "stock",
            "--weights",
            "bound",
            "--out",
            str(tmp_path / "b"),
        ]
    )  # 2 x (0.2 MiB of weights + 0.3 MiB of code)
    parts = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert parts == ["part0", "part1"]
    names = [json.loads((tmp_path / "b" / p / "manifest.json").read_text())["entries"][0]["name"] for p in parts]
    assert names == ["nasrnn/stock", "squeezenet/stock"]


@pytest.mark.slow  # 42 s on a 2-core Zen 3: the GPU sessions' tool, run before each device run
def test_device_bench_tuned_flow_offline_on_the_cpu(tmp_path):
    """The offline tuned flow end to end on llvm: the variants' modules saved, candidates of
    their matmul kernels (and the A/A control's, another seed) timed by the runtime-only
    runner, recorded, the tuned bundle built with them and timed, collected."""
    bench = load_script("device_bench")
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    common = ["--small", "--target", "llvm", "--python", py]
    env = {k: v for k, v in os.environ.items() if k != "TVM_USE_RUNTIME_LIB"}

    def run(bundle_dir: Path) -> Path:
        out = bundle_dir.parent / f"{bundle_dir.name}-out"
        subprocess.run([sys.executable, str(bundle_dir / "run.py"), "--out", str(out)], check=True, env=env,
                       capture_output=True, timeout=600)  # fmt: skip
        return out / "results.json"

    bench.main(
        ["variants", *common, "--models", "nasrnn", "--variants", "stock", "eqsat", "--out", str(tmp_path / "v")]
    )
    assert (tmp_path / "v" / "modules" / "nasrnn__stock.json").exists()
    for tag, extra in (("main", ["--seed", "0"]), ("aa", ["--seed", "7", "--only", "stock"])):
        bench.main(["candidates", *common, "--modules", str(tmp_path / "v"), "--n", "2", "--number", "2",
                    "--repeat", "1", *extra, "--out", str(tmp_path / tag)])  # fmt: skip
    manifest = json.loads((tmp_path / "main" / "manifest.json").read_text())
    assert (tmp_path / "main" / bundle.SOLID).exists() and all(
        e["file"].startswith("libs/") for e in manifest["entries"]
    )
    timed = {tag: str(run(tmp_path / tag)) for tag in ("main", "aa")}
    # the A/A bundle also given as a second main bundle: several bundles' records go into one database
    bench.main(["tuned", *common, "--modules", str(tmp_path / "v"), "--main", str(tmp_path / "main"), timed["main"],
                str(tmp_path / "aa"), timed["aa"], "--aa", str(tmp_path / "aa"), timed["aa"], "--rounds", "1",
                "--repeat", "2", "--number", "1", "--out", str(tmp_path / "t")])  # fmt: skip
    kernels = json.loads((tmp_path / "t" / "kernels.json").read_text())
    assert kernels["aa"]  # each kernel: its stock schedule against its best candidate

    def with_candidates(results: str) -> int:  # kernels with a timed candidate: one report row each
        names = [r["name"] for r in json.loads(Path(results).read_text())["rows"]]
        return len({n.split("_")[0] for n in names if "_c" in n})

    assert len(kernels["aa"]) == with_candidates(timed["aa"])
    assert len(kernels["main"]) == with_candidates(timed["main"]) + with_candidates(timed["aa"])
    (tmp_path / "res").mkdir()
    bench.main(["collect", str(tmp_path / "t"), str(run(tmp_path / "t")), "--small", "--flow", "tuned", "--out-dir",
                str(tmp_path / "res")])  # fmt: skip
    rows = {r["variant"]: r for r in csv.DictReader(open(tmp_path / "res" / "llvm-tuned-small.csv"))}
    assert {"stock", "stock-aa"} <= set(rows) and all(float(r["median_ms"]) > 0 for r in rows.values())
    assert "tuned flow offline" in (tmp_path / "res" / "llvm-tuned-small.md").read_text()


def test_a_candidate_far_slower_than_its_stock_schedule_is_not_timed_further():
    from tvm_eqsat import bundle_runner as runner

    rows = {"k0_base": {"probe_ms": 1.0}, "k0_c0": {"probe_ms": 2.9}, "k0_c1": {"probe_ms": 3.2}}
    rows |= {"k1_base": {"probe_ms": 0.01}, "k1_c0": {"probe_ms": 0.1}}
    assert not runner.too_slow({"name": "k0_c0", "baseline": "k0_base"}, rows)
    assert runner.too_slow({"name": "k0_c1", "baseline": "k0_base"}, rows)
    assert not runner.too_slow({"name": "k1_c0", "baseline": "k1_base"}, rows)  # within 0.1 ms: probes are noisy
    assert not runner.too_slow({"name": "k0_base"}, rows)


@pytest.mark.slow  # 12 s on a 2-core Zen 3: the GPU sessions' tool, run before each device run
def test_the_runner_stops_at_its_deadline_and_writes_what_it_timed(tmp_path):
    """A device run has a hard time limit: past ``--deadline-s`` the runner times nothing
    more and still writes results.json, listing what it left."""
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    path = bundle.build_bundle(
        [bundle.Entry("mlp", _mlp(), number=1, repeat=2)], "llvm", tmp_path / "b", python_version=py
    )
    env = {k: v for k, v in os.environ.items() if k != "TVM_USE_RUNTIME_LIB"}
    for deadline, timed in (("0", 0), ("600", 1)):
        subprocess.run([sys.executable, str(path / "run.py"), "--out", str(tmp_path / deadline), "--deadline-s", deadline],
                       check=True, env=env, capture_output=True, timeout=600)  # fmt: skip
        result = json.loads((tmp_path / deadline / "results.json").read_text())
        assert len(result["rows"]) == timed and result["untimed"] == ([] if timed else ["mlp"])


def _pack_for_device_tuning(tmp_path):
    script = load_script("device_tune")
    script.main(
        ["pack", "--models", "squeezenet", "--small", "--top", "1", "--no-compiler", "--out", str(tmp_path / "dt")]
    )
    return script


def test_device_tuning_packs_the_dearest_kernels_and_the_runtime(tmp_path):
    """device_tune.py pack: the kernels to tune there as Relax JSON, with the runtime, the
    tvm_ffi wheel and the unpacking script (the compiler, 61 MB, left out here)."""
    _pack_for_device_tuning(tmp_path)
    b = tmp_path / "dt" / "b"
    (kernel,) = json.loads((b / "kernels.json").read_text())
    assert kernel["model"] == "squeezenet" and json.loads(kernel["key"])["op"] in ("Conv2d", "Matmul")
    assert {"runtime.tar.gz", "unpack.sh"} <= {f.name for f in b.iterdir()}
    assert any(f.name.startswith("apache_tvm_ffi") and f.name.endswith(".whl") for f in b.iterdir())
    assert "../a/compiler.xz.part" in (b / "unpack.sh").read_text()


def test_device_tuning_loads_tune_and_its_database_module_without_the_package():
    """The device has TVM but no egglog: device_tune.py loads ``tune`` (and ``tuning_db``,
    which it imports) without ``tvm_eqsat/__init__``.  Splitting ``tuning_db`` out of ``tune``
    broke this once, and only the slow test below tunes on that path."""
    script = Path(__file__).resolve().parent.parent / "scripts" / "device_tune.py"
    code = (
        "import sys\n"
        "sys.modules['egglog'] = None  # as on the device: importing it fails\n"
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('device_tune', {str(script)!r})\n"
        "script = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(script)\n"
        "tune = script._load_tune()\n"
        "assert callable(tune.tune) and 'tvm_eqsat' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]  # the ImportError, where it fails


@pytest.mark.slow  # 32 s on a 2-core Zen 3 (90 s before tune.import_tensor_intrinsics): it tunes and times
def test_device_tuning_tunes_kernels_against_the_stock_build(tmp_path, capsys):
    """device_tune.py run tunes each packed kernel and times it against the stock build (llvm
    here, with the installed TVM); report tabulates the result."""
    script = _pack_for_device_tuning(tmp_path)
    out = tmp_path / "out"
    script.main(
        ["run", "--kernels", str(tmp_path / "dt" / "b" / "kernels.json"), "--out", str(out), "--target", "llvm",
         "--trials", "2", "--work-dir", str(tmp_path / "db")]
    )  # fmt: skip
    (row,) = json.loads((out / "tuned.json").read_text())["rows"]
    assert "error" not in row, row
    assert row["dlight_ms"] > 0 and row["tuned_ms"] > 0 and row["speedup"] == row["dlight_ms"] / row["tuned_ms"]
    assert (out / "msdb.tar.gz").exists()
    script.main(["report", str(out / "tuned.json")])
    assert "| k0 | squeezenet |" in capsys.readouterr().out


def test_aa_candidates_sample_each_stock_kernel_as_often_as_the_main_bundle(tmp_path, monkeypatch):
    """With ``--budget``, ``--only stock`` gives each stock kernel the count it has in the
    main bundle (the share among every variant's kernels), not a share of its own budget:
    the A/A control searches as hard as the run it controls."""
    bench = load_script("device_bench")
    common = ["--small", "--target", "llvm", "--python", f"{sys.version_info.major}.{sys.version_info.minor}"]
    bench.main(["variants", *common, "--models", "resnet-block", "--variants", "stock", "stock+nhwc",
                "--out", str(tmp_path / "v")])  # fmt: skip
    counts: dict[str, dict] = {}

    def capture(tasks, target, out_dir, n, **_):
        counts[Path(out_dir).name] = dict(zip((tuning_db.kernel_hash(t.dispatched[0]) for t in tasks), n))
        return Path(out_dir)

    monkeypatch.setattr(batch_tune, "candidate_bundle", capture)
    monkeypatch.setattr(bundle, "bundle_bytes", lambda path: 0)
    for tag, extra in (("main", []), ("aa", ["--only", "stock", "--seed", "7"])):
        bench.main(["candidates", *common, "--modules", str(tmp_path / "v"), "--budget", "200", *extra,
                    "--out", str(tmp_path / tag)])  # fmt: skip
    main, aa = counts["main"], counts["aa"]
    assert aa and set(aa) < set(main)  # stock's kernels, a strict subset (NHWC convs are others)
    assert all(aa[k] == main[k] for k in aa)
    assert sum(aa.values()) < 200


def test_a_timed_candidate_is_recorded_only_where_its_trace_replays_on_the_stored_kernel(tmp_path, caplog):
    """The database files equal kernels under the first one's block names (a reduction is
    named after its input variable): a candidate traced on other names is not recorded, as
    it would make the database unreadable; one traced on the stored names is."""
    import gzip

    from tvm.s_tir import Schedule

    from tvm_eqsat import provenance

    first, second = global_pool_kernel("first"), global_pool_kernel("second")
    tuning_db.open_database(tmp_path / "db").commit_workload(first)

    def bundle_of(workload, name):
        sch = Schedule(workload)
        sch.fuse(*sch.get_loops(sch.get_sblock(f"{name}_red"))[:2])
        info = {
            "target": {"kind": "llvm"},
            "workloads": [tvm.ir.save_json(workload)],
            "candidates": [{"name": "c0", "kernel": 0, "task": "pool", "trace": provenance.plain(sch.trace.as_json())}],
        }
        out = tmp_path / name
        out.mkdir()
        (out / batch_tune.CANDIDATES).write_bytes(gzip.compress(json.dumps(info).encode()))
        (out / "results.json").write_text(json.dumps({"rows": [{"name": "c0", "median_ms": 0.1}]}))
        return out

    with caplog.at_level("WARNING", logger="tvm_eqsat"):
        other = bundle_of(second, "second")
        assert len(batch_tune.record_results(other, other / "results.json", tmp_path / "db")) == 0
    assert "under other block names" in caplog.text
    same = bundle_of(first, "first")
    assert len(batch_tune.record_results(same, same / "results.json", tmp_path / "db")) == 1
    assert len(tuning_db.open_database(tmp_path / "db")) == 1


def test_device_inputs_fill_masks_with_zeros_and_ones_and_indices_with_zeros():
    """A zero mask times only a ``where``'s masked-out branch (BERT's softmax kept a schedule
    200x slower on a real mask), so the device's inputs, like the tuner's, fill masks at random."""
    import numpy as np

    from tvm_eqsat import bundle_runner as runner
    from tvm_eqsat import tuning_db

    specs = [((64, 64), "float32"), ((64, 64), "bool"), ((64, 64), "int8"), ((8,), "int64"), ((4, 4), "float32")]
    a, mask, mask8, ids, w = runner.input_values(np, specs, weights=1)
    again = runner.input_values(np, specs, weights=1)
    assert all(np.array_equal(x, y) for x, y in zip([a, mask, mask8, ids, w], again))  # build side == device side
    assert mask.dtype == np.bool_ and 0.3 < mask.mean() < 0.7
    assert set(np.unique(mask8)) == {0, 1} and not ids.any()
    assert a.std() > 0.5 and w.std() < 0.2  # weights scaled down
    assert tuning_db.MASK_DTYPES == runner.MASK_DTYPES


def test_device_bench_collect_fails_a_wrong_build_after_writing_its_rows(tmp_path, capsys):
    """A device run whose compared outputs are garbage (one variant 2e24 of the scale off) is
    written to the results files and then fails the command; one without a difference passes."""
    bench = load_script("device_bench")
    bundle_dir = tmp_path / "b"
    bundle_dir.mkdir()
    (bundle_dir / "variants.json").write_text("{}")
    manifest = {"target_kind": "cuda", "built_with": {"commit": "0" * 40}, "entries": []}
    (bundle_dir / "manifest.json").write_text(json.dumps(manifest))

    def collect(eqsat_diff: float | None, tag: str) -> int:
        rows = [{"name": "m/stock", "median_ms": 2.0, "p10_ms": 1.9, "p90_ms": 2.1, "max_rel_diff": 0.0}]
        rows.append({"name": "m/eqsat", "median_ms": 1.0, "p10_ms": 0.9, "p90_ms": 1.1})
        if eqsat_diff is not None:
            rows[-1]["max_rel_diff"] = eqsat_diff
        result = {"device": "test", "python": "3.11", "runtime_only": True, "date": "today", "rounds": 1,
                  "failures": {}, "rows": rows}  # fmt: skip
        (tmp_path / f"{tag}.json").write_text(json.dumps(result))
        return bench.main(["collect", str(bundle_dir), str(tmp_path / f"{tag}.json"), "--tag", tag, "--out-dir",
                           str(tmp_path)])  # fmt: skip

    assert collect(2e24, "wrong") == 1
    assert "FAILED: the outputs of m/eqsat differ" in capsys.readouterr().out
    assert {r["variant"] for r in csv.DictReader(open(tmp_path / "cuda-default-wrong.csv"))} == {"stock", "eqsat"}
    assert collect(3e-7, "right") == 0 and collect(None, "uncompared") == 0
    assert "FAILED" not in capsys.readouterr().out
