"""Tuning and kernel measurement: MetaSchedule works on the pinned wheels, a tuned
kernel beats the untuned build, and timing works locally and through TVM's RPC tracker."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tvm
from helpers import global_pool, global_pool_kernel, load_script, module, tensor
from tvm import relax

from tvm_eqsat import harvest, measure, tune, tuning_db, verify
from tvm_eqsat.graph import TensorTy, graph_from_block
from tvm_eqsat.workload import Epilogue, Workload

F32 = "float32"
MATMUL = Workload("Matmul", (F32,), (TensorTy((128, 128), F32), TensorTy((128, 128), F32)))
CONV = Workload(
    "Conv2d",
    ((2, 2), (1, 1, 1, 1), (1, 1), 1, "NCHW", "OIHW", "NCHW", F32),
    (TensorTy((1, 8, 16, 16), F32), TensorTy((16, 8, 3, 3), F32)),
    (Epilogue("Add", (1, 16, 1, 1)), Epilogue("Relu")),
)


CLIPPED = Workload(
    MATMUL.op, MATMUL.attrs, MATMUL.inputs, (Epilogue("Add", (128, 128), (), True), Epilogue("Clip", None, (0.0, 6.0)))
)


def test_workload_json_roundtrip():
    for w in (MATMUL, CONV, CLIPPED):
        assert Workload.from_json(w.to_json()) == w
        assert Workload.from_json(__import__("json").loads(w.key())) == w


def test_workload_module_computes_the_op_and_epilogue():
    mod = measure.workload_module(CONV)
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(F32) for s in ((1, 8, 16, 16), (16, 8, 3, 3), (1, 16, 1, 1)))
    ex = tvm.compile(mod, target="llvm")
    got = relax.VirtualMachine(ex, tvm.cpu())["main"](*map(tvm.runtime.tensor, (x, w, b))).numpy()
    # reference: the same conv through a second, independently written Relax module
    ref_mod = module(
        [tensor("x", x.shape), tensor("w", w.shape), tensor("b", b.shape)],
        lambda bb, x, w, b: bb.emit(relax.op.nn.relu(relax.op.add(relax.op.nn.conv2d(x, w, strides=2, padding=1), b))),
    )
    ref = relax.VirtualMachine(tvm.compile(ref_mod, target="llvm"), tvm.cpu())["main"](
        *map(tvm.runtime.tensor, (x, w, b))
    ).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
    assert got.shape == (1, 16, 8, 8)


def test_kernel_workloads_follow_fusion():
    """A matmul followed by a bias add and a relu is one kernel with a two-op epilogue;
    the relu's second user stops the chain."""
    mod = module(
        [tensor("x", (4, 8)), tensor("w", (8, 16)), tensor("b", (16,))],
        lambda bb, x, w, b: bb.emit(relax.op.nn.relu(relax.op.add(relax.op.matmul(x, w), b))),
    )
    graph = graph_from_block(mod["main"].body.blocks[0])
    (w,) = measure.kernel_workloads(graph)
    assert w.op == "Matmul" and w.epilogue == (Epilogue("Add", (16,)), Epilogue("Relu"))


def test_kernel_workloads_keep_operand_order_attrs_and_batch_norm_epilogues():
    """What a MetaSchedule database lookup needs to rebuild the fused kernel exactly:
    a residual added on the left, clip's bounds, and the epilogue after a batch norm."""
    c = 8

    def body(bb, x, w, r, g, beta, mean, var):
        y = bb.emit(relax.op.add(r, relax.op.nn.conv2d(x, w, padding=1)))
        y = bb.emit(relax.op.clip(y, 0.0, 6.0))
        bn = bb.emit(relax.op.nn.batch_norm(y, g, beta, mean, var, axis=1))
        return bb.emit(relax.op.nn.relu(relax.TupleGetItem(bn, 0)))

    shapes = [(1, c, 8, 8), (c, c, 3, 3), (1, c, 8, 8), (c,), (c,), (c,), (c,)]
    mod = module([tensor(n, s) for n, s in zip("xwrgbmv", shapes)], body)
    conv, bn = sorted(measure.module_workloads(mod), key=lambda w: w.op != "Conv2d")
    assert conv.epilogue == (Epilogue("Add", (1, c, 8, 8), (), True), Epilogue("Clip", None, (0.0, 6.0)))
    assert bn.op == "BatchNorm" and bn.epilogue == (Epilogue("Relu"),)
    # the one-kernel module computes the same thing, operand on the left
    built = measure.workload_module(conv)
    call = built["main"].body.blocks[0].bindings[1].value
    assert call.op.name == "relax.add" and call.args[0].name == "e0"


def test_harvest_reads_a_tuned_modules_kernels(tmp_path):
    """Kernels of a module tuned into a database come back with the tuner's time;
    a kernel that was never tuned does not; a missing database is a clear error."""

    def mlp(n):
        return module(
            [tensor("x", (4, n)), tensor("w", (n, 64)), tensor("b", (64,))],
            lambda bb, x, w, b: bb.emit(relax.op.nn.relu(relax.op.add(relax.op.matmul(x, w), b))),
        )

    tuned = mlp(32)
    tune.tune(tuned, tvm.target.Target("llvm"), tmp_path, trials=2)
    (found,) = harvest.harvest(str(tmp_path), [tuned], "llvm")
    assert found.workload == measure.module_workloads(tuned)[0]
    assert found.workload.epilogue == (Epilogue("Add", (64,)), Epilogue("Relu"))
    assert 0 < found.median_us < 1e6 and found.trials == 2
    tuning_db.prune_database(tmp_path, tmp_path / "pruned")  # one record kept: the budget still says 2
    assert [h.trials for h in harvest.harvest(str(tmp_path / "pruned"), [tuned], "llvm")] == [2]
    # timed afresh from the pruned records: a spread, and nothing tuned (no record added)
    ((again, m),) = harvest.retime([found], str(tmp_path / "pruned"), "llvm", repeat=5)
    assert again is found and len(m.runs) == 5 and 0 < m.p10_us <= m.median_us <= m.p90_us
    assert len((tmp_path / "pruned" / tuning_db.DATABASE_FILES[1]).read_text().splitlines()) == 1
    assert harvest.harvest(str(tmp_path), [mlp(48)], "llvm") == []
    with pytest.raises(FileNotFoundError, match="database"):
        harvest.harvest(str(tmp_path / "nothing"), [tuned], "llvm")


def test_harvest_finds_the_blocked_convs_the_pass_emitted(tmp_path, monkeypatch):
    """The pass's channel-blocked convs (nchwc.egg, TE kernels of its own) tuned into a
    database come back from the harvest as ``Conv2dNCHWc`` rows with the tuner's time, so the
    learned model is trained on them like any other kernel."""
    from helpers import const

    from tvm_eqsat import cost, optimize

    memory = {"bandwidth_gbs": 16.0, "cache_gbs": 63.0, "nchwc_conv": 0.6}
    monkeypatch.setattr(
        cost, "measured_cpus", lambda: {"znver3": (256, {"matmul": 58.0, "conv": 40.0, "depthwise": 31.0}, memory)}
    )
    x, w = tensor("x", (1, 32, 8, 8)), const((32, 32, 3, 3), seed=1)
    mod = module([x], lambda bb, x: relax.op.nn.relu(bb.emit(relax.op.nn.conv2d(x, w, padding=1))))
    zen3 = tvm.target.Target({"kind": "llvm", "mcpu": "znver3"})
    new, report = optimize(mod, zen3, flow="tuned", rules=["nchwc"])
    assert "1 of 1 convs run in NCHW16c" in report.functions["main"].changes
    tune.tune(new, tvm.target.Target("llvm"), tmp_path, trials=2)  # generic code: the structure is the same
    found = [h for h in harvest.harvest(str(tmp_path), [new], "llvm") if h.workload.op == "Conv2dNCHWc"]
    assert len(found) == 1 and 0 < found[0].median_us < 1e6 and found[0].trials == 2
    assert found[0].workload.inputs[1].shape == (2, 2, 3, 3, 16, 16)


def test_harvest_script_builds_the_small_models_it_is_asked_for(tmp_path):
    """``train_cost_model.py --from-database DIR --small`` builds each model's reduced
    variant, including the zoo entries that are small already (whose builders take no
    ``small`` argument); a database without their kernels is a clear stop."""
    pytest.importorskip("torch")
    train_script = load_script("train_cost_model")
    tuning_db.open_database(tmp_path)  # an empty database
    with pytest.raises(SystemExit, match="none of the kernels"):
        train_script.harvest_dataset(str(tmp_path), ["resnet-block"], True, "llvm", tmp_path / "dataset.csv")


def test_harvest_script_reads_both_sizes_of_a_database(tmp_path, monkeypatch):
    """``--small --full-models M``: a database that holds both sizes of a model is
    harvested at both, each model built once per size it was asked for."""
    from tvm_eqsat import models

    train_script = load_script("train_cost_model")
    built, block = [], models.SMALL["resnet-block"]

    def builder(size):
        return lambda: built.append(size) or block()

    monkeypatch.setitem(models.SMALL, "resnet-block", builder("small"))
    monkeypatch.setitem(models.MODELS, "resnet-block", builder("full"))
    tuning_db.open_database(tmp_path)  # an empty database: every model is built, then the clear stop
    with pytest.raises(SystemExit, match="none of the kernels"):
        train_script.harvest_dataset(
            str(tmp_path), ["resnet-block"], True, "llvm", tmp_path / "d.csv", full=["resnet-block"]
        )
    assert built == ["small", "full"]
    built.clear()
    with pytest.raises(SystemExit):  # full size asked twice: built once
        train_script.harvest_dataset(
            str(tmp_path), ["resnet-block"], False, "llvm", tmp_path / "d.csv", full=["resnet-block"]
        )
    assert built == ["full"]


def test_harvest_script_stops_in_one_line_where_no_database_is(tmp_path, monkeypatch):
    """``--from-database`` naming a directory without a database: a clear stop, no traceback."""
    train_script = load_script("train_cost_model")
    argv = ["train_cost_model.py", "--from-database", str(tmp_path), "--small", "--models", "resnet-block"]
    monkeypatch.setattr(sys, "argv", argv)
    with pytest.raises(SystemExit, match="no MetaSchedule JSON database"):
        train_script.main()


def test_training_reads_the_cpu_of_a_database_from_its_source(tmp_path):
    """``train_cost_model.py``: the CPU whose code the kernels are is ``--mcpu``, else the
    committed database's SOURCE.json, else generic; a CPU LLVM does not know stops it
    before any harvest, and so does a CPU named for CUDA."""
    import argparse
    import json

    train_script = load_script("train_cost_model")

    def args(**kw):
        return argparse.Namespace(**{"target": "llvm", "mcpu": None, "from_database": None, **kw})

    (tmp_path / "SOURCE.json").write_text(json.dumps({"mcpu": "skylake-avx512"}))
    assert train_script._mcpu(args(from_database=str(tmp_path))) == "skylake-avx512"
    assert train_script._mcpu(args(from_database=str(tmp_path), mcpu="generic")) == "generic"
    assert train_script._mcpu(args()) == "generic"
    assert train_script._mcpu(args(mcpu="host")) == tune.host_cpu()
    assert train_script._simd_bits("llvm", "skylake-avx512") == 512
    with pytest.raises(SystemExit, match="does not know"):
        train_script._mcpu(args(mcpu="skylake-avx51"))
    with pytest.raises(SystemExit, match="only llvm"):
        train_script._mcpu(args(target="cuda", mcpu="haswell"))


def test_default_flow_measures_a_kernel():
    m = measure.measure(MATMUL, "llvm", flow="default", repeat=5)
    assert 0 < m.p10_us <= m.median_us <= m.p90_us
    assert len(m.runs) == 5


def test_elementwise_calibration_finds_tanh_dearer_than_a_copy():
    """A tanh pays a libm-like evaluation per element that a copy (Relu, subtracted as
    the memory traffic) does not: tens of microseconds across the calibration sizes."""
    ns = measure.elementwise_ns("llvm", flow="default", names=["Tanh", "Relu"], repeat=5)
    assert set(ns) == {"Tanh", "Relu"}
    assert ns["Relu"] == 0.0 and ns["Tanh"] > 0.5


def test_elementwise_slopes_subtract_the_copy_and_drop_half_timed_ops():
    times = {("Relu", 1000): 10.0, ("Relu", 2000): 20.0, ("Tanh", 1000): 10.0, ("Tanh", 2000): 50.0}
    times[("Exp", 1000)] = 12.0  # its larger size failed on the device
    assert measure.elementwise_slopes(times, (1000, 2000)) == {"Relu": 0.0, "Tanh": 30.0}
    with pytest.raises(ValueError, match="Relu"):
        measure.elementwise_slopes({("Tanh", 1000): 1.0, ("Tanh", 2000): 2.0}, (1000, 2000))


def test_a_gpu_is_calibrated_above_its_launch_bound_sizes():
    assert measure.calibration_sizes("llvm") == measure.CALIBRATION_SIZES
    small, large = measure.calibration_sizes({"kind": "cuda", "arch": "sm_90"})
    assert large > small >= 1 << 20
    names = [name for name, _, _ in measure.elementwise_workloads(["Tanh"], (small, large))]
    assert names == ["Relu", "Relu", "Tanh", "Tanh"]


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (no GPU needed)")
def test_cuda_kernels_generate_and_compile_with_nvcc():
    """The CUDA default flow (dlight schedules) produces CUDA that nvcc accepts."""
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})
    for w in (MATMUL, CONV):
        ex = measure.build_workload(w, target, flow="default")
        assert measure.nvcc_compile(ex, target) > 0


def test_bad_flow_and_missing_work_dir_are_clear_errors():
    with pytest.raises(ValueError, match="flow"):
        measure.measure(MATMUL, "llvm", flow="fast")
    with pytest.raises(ValueError, match="work_dir"):
        measure.measure(MATMUL, "llvm", flow="tuned")
    with pytest.raises(ValueError, match="cold_cache"):  # nothing is tuned, so nothing tuned cold
        measure.build_workload(MATMUL, "llvm", flow="default", cold_cache=True)
    bandwidth = load_script("measure_bandwidth")
    with pytest.raises(SystemExit):
        bandwidth.main(["--flow", "default", "--cold-cache"])


def test_tvmscript_parsed_during_an_import_finds_the_import_frames_modules(tmp_path, monkeypatch):
    """MetaSchedule's tensor intrinsics are TVMScript parsed while their module is imported;
    each parse asks ``inspect`` for the module of every frame, and a frame of the import
    machinery, unnamed, made it scan all of ``sys.modules``: 2 min of a first tuning call
    on a 2-core Zen 3. After ``name_frozen_import_frames`` no such lookup misses."""
    import importlib
    import inspect

    (tmp_path / "tir_at_import.py").write_text(
        "from tvm.script import tirx as T\n\n"
        "@T.prim_func\n"
        "def copy(a: T.Buffer((4,), 'float32'), b: T.Buffer((4,), 'float32')):\n"
        "    for i in range(4):\n"
        "        b[i] = a[i]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    lookups, misses = [], []
    getmodule = inspect.getmodule

    def counting(obj, _filename=None):
        lookups.append(_filename)
        if _filename is not None and _filename.startswith("<frozen") and _filename not in inspect.modulesbyfile:
            misses.append(_filename)
        return getmodule(obj, _filename)

    tune.name_frozen_import_frames()
    monkeypatch.setattr(inspect, "getmodule", counting)
    monkeypatch.delitem(sys.modules, "tir_at_import", raising=False)
    assert importlib.import_module("tir_at_import").copy is not None
    assert any(f and f.startswith("<frozen importlib") for f in lookups)  # the parse did look them up
    assert misses == []


def test_tuning_fills_the_database_and_a_rerun_reuses_it(tmp_path, monkeypatch):
    """MetaSchedule on a 128^3 matmul: records land in the database; a rerun with the
    same budget tunes nothing (no search is started) and builds the same kernels."""
    mod = measure.workload_module(MATMUL)
    target = tvm.target.Target("llvm")
    db = tune.tune(mod, target, tmp_path, trials=8)
    records = (tmp_path / "database_tuning_record.json").read_text()
    assert records.count("\n") >= 1
    monkeypatch.setattr(tune.ms, "tune_tasks", lambda *a, **k: pytest.fail("tuned again"))
    tune.tune(mod, target, tmp_path, trials=8)  # already tuned: nothing to do
    assert (tmp_path / "database_tuning_record.json").read_text() == records
    args = verify.random_inputs(mod["main"])
    vm = relax.VirtualMachine(tune.build(mod, target, db), tvm.cpu())
    tuned = vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()
    np.testing.assert_allclose(tuned, verify.run(mod, args)[0], rtol=1e-4, atol=1e-4)  # the tuned kernel computes it


def test_a_pruned_database_seeds_a_fresh_one_and_nothing_is_tuned_again(tmp_path, monkeypatch):
    """What the benchmark commits (the best record per kernel, with its budget) makes a
    fresh work directory tune nothing at that budget, and builds the same kernel; a larger
    budget tunes the difference."""
    mod = measure.workload_module(MATMUL)
    target = tvm.target.Target("llvm")
    tune.tune(mod, target, tmp_path / "work", trials=8, progress=True)  # with the bar of trials
    assert tuning_db.prune_database(tmp_path / "work", tmp_path / "committed") == 1
    assert tuning_db.prune_database(tmp_path / "work", tmp_path / "longer", min_trials=16) == 0  # tuned with 8 only
    # the kernel as another module names it (its fused function's number differs): found by structure
    path = tmp_path / "committed" / tuning_db.BUDGETS
    budgets = json.loads(path.read_text())
    path.write_text(json.dumps({f"fused_renamed-{key.rsplit('-', 1)[1]}": v for key, v in budgets.items()}))
    assert tuning_db.seed_database(tmp_path / "at-16", tmp_path / "committed", trials=16) == 0  # tuned with 8, not 16
    assert tuning_db.seed_database(tmp_path / "fresh", tmp_path / "committed", trials=8) == 1
    assert tuning_db.seed_database(tmp_path / "fresh", tmp_path / "committed") == 0  # already there
    assert tuning_db.seed_database(tmp_path / "other", tmp_path / "missing") == 0
    # packed in xz, as scripts/export_tuning.py commits it: read back the same
    assert tuning_db.prune_database(tmp_path / "work", tmp_path / "packed", compress=True) == 1
    packed = {p.name for p in (tmp_path / "packed").iterdir()}
    assert {f"{n}.xz" for n in tuning_db.DATABASE_FILES} <= packed and not set(tuning_db.DATABASE_FILES) & packed
    assert tuning_db.has_database(tmp_path / "packed") and not tuning_db.has_database(tmp_path / "missing")
    assert tuning_db.seed_database(tmp_path / "fresh-from-packed", tmp_path / "packed") == 1
    # a database packed before 2026-12-05 is gzipped: it reads the same
    import gzip
    import lzma

    (tmp_path / "gzipped").mkdir()
    for n in tuning_db.DATABASE_FILES:
        data = lzma.decompress((tmp_path / "packed" / f"{n}.xz").read_bytes())
        (tmp_path / "gzipped" / f"{n}.gz").write_bytes(gzip.compress(data))
    assert tuning_db.has_database(tmp_path / "gzipped")
    assert len(tuning_db.read_database(tmp_path / "gzipped").get_all_tuning_records()) == 1
    assert tuning_db.seed_database(tmp_path / "fresh-from-gzipped", tmp_path / "gzipped") == 1
    calls = []
    monkeypatch.setattr(tune.ms, "tune_tasks", lambda *a, **k: calls.append(k["max_trials_per_task"]))
    db = tune.tune(mod, target, tmp_path / "fresh", trials=8)
    tune.tune(mod, target, tmp_path / "fresh-from-packed", trials=8)
    assert calls == []
    tune.tune(mod, target, tmp_path / "fresh", trials=16)
    assert calls == [8]  # a larger budget adds only the trials the kernel lacks
    args = verify.random_inputs(mod["main"])
    vm = relax.VirtualMachine(tune.build(mod, target, db), tvm.cpu())
    got = vm["main"](*[tvm.runtime.tensor(a) for a in args]).numpy()
    np.testing.assert_allclose(got, verify.run(mod, args)[0], rtol=1e-4, atol=1e-4)


def test_export_keeps_the_committed_kernels_the_work_dir_lacks(tmp_path, monkeypatch, capsys):
    """scripts/export_tuning.py over a committed database: a work dir seeded with one budget's
    kernels (as the benchmark seeds it) must not drop the committed kernels of another budget."""
    target = tvm.target.Target("llvm")
    small = measure.workload_module(Workload("Matmul", (F32,), (TensorTy((32, 32), F32), TensorTy((32, 32), F32))))
    tune.tune(small, target, tmp_path / "old", trials=4)
    assert tuning_db.prune_database(tmp_path / "old", tmp_path / "committed" / "llvm", compress=True) == 1
    tune.tune(measure.workload_module(MATMUL), target, tmp_path / "work", trials=2)  # another kernel, budget
    export = load_script("export_tuning")
    argv = ["export_tuning.py", "--mcpu", "generic", "--work-dir", str(tmp_path / "work"), "--trials", "2"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(tmp_path / "committed")])
    export.main()
    assert "1 committed kernels the work dir lacked are kept" in capsys.readouterr().out
    out = tmp_path / "committed" / "llvm"
    assert sorted(tuning_db.read_budgets(out).values()) == [2, 4]
    assert json.loads((out / "SOURCE.json").read_text())["kernels"] == 2
    assert list(tuning_db.read_budgets(tmp_path / "work").values()) == [2]  # the work dir is left as it was
    calls = []
    monkeypatch.setattr(tune.ms, "tune_tasks", lambda *a, **k: calls.append(k["max_trials_per_task"]))
    assert tuning_db.seed_database(tmp_path / "fresh", out) == 2
    tune.tune(small, target, tmp_path / "fresh", trials=4)
    assert calls == []  # the old kernel, at its old budget, is still there to build from


def test_a_seed_at_a_larger_budget_leaves_a_kernel_tuned_here_to_be_tuned_on(tmp_path, monkeypatch):
    """A work dir that tuned a kernel with 2 trials, seeded from a database that holds it at 4
    (a 64-trial database committed apart, seeding a work dir tuned at 32): the work dir's own
    records stay, so its budget must stay too; marked 4, the kernel would be built from its
    2-trial records as if tuned with 4."""
    import shutil

    mod = measure.workload_module(MATMUL)
    target = tvm.target.Target("llvm")
    tune.tune(mod, target, tmp_path / "work", trials=2)
    tuning_db.prune_database(tmp_path / "work", tmp_path / "longer")
    budgets = tuning_db.read_budgets(tmp_path / "longer")
    tuning_db.write_budgets(tmp_path / "longer", {key: 4 for key in budgets})
    shutil.copytree(tmp_path / "work", tmp_path / "before")
    assert tuning_db.seed_database(tmp_path / "work", tmp_path / "longer", trials=4) == 0
    assert tuning_db.read_budgets(tmp_path / "work") == tuning_db.read_budgets(tmp_path / "before")
    calls = []
    monkeypatch.setattr(tune.ms, "tune_tasks", lambda *a, **k: calls.append(k["max_trials_per_task"]))
    tune.tune(mod, target, tmp_path / "work", trials=4)
    assert calls == [2]  # the 2 trials it lacks


def test_export_apart_commits_a_longer_tuning_beside_the_main_database(tmp_path, monkeypatch):
    """``export_tuning.py --apart``: kernels tuned longer than the main database holds them (a
    64-trial run of models committed at 32) go to ``<target>-t<trials>``, where they do not
    replace the main database's records, and what the main database holds at that budget
    is not copied there."""
    import shutil

    target = tvm.target.Target("llvm")
    small = measure.workload_module(Workload("Matmul", (F32,), (TensorTy((32, 32), F32), TensorTy((32, 32), F32))))
    tune.tune(small, target, tmp_path / "main-work", trials=4)
    tune.tune(measure.workload_module(MATMUL), target, tmp_path / "main-work", trials=2)
    main = tmp_path / "committed" / "llvm"
    assert tuning_db.prune_database(tmp_path / "main-work", main, compress=True) == 2
    committed = tuning_db.budgets_by_hash(main)
    assert sorted(committed.values()) == [2, 4]
    shutil.copytree(tmp_path / "main-work", tmp_path / "work")
    tune.tune(measure.workload_module(MATMUL), target, tmp_path / "work", trials=4)  # raised from 2 to 4
    export = load_script("export_tuning")
    argv = ["export_tuning.py", "--mcpu", "generic", "--work-dir", str(tmp_path / "work"), "--trials", "4", "--apart"]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(tmp_path / "committed")])
    export.main()
    assert tuning_db.budgets_by_hash(main) == committed  # the main database as it was
    apart = tmp_path / "committed" / "llvm-t4"
    assert tuning_db.budgets_by_hash(apart) == {h: 4 for h, n in committed.items() if n == 2}
    assert json.loads((apart / "SOURCE.json").read_text())["kernels"] == 1


def test_aa_agreement_compares_the_kernels_both_tunings_hold_at_the_budget(tmp_path):
    """scripts/aa_agreement.py: a database's best time per kernel tuned with the budget, and
    one tuning's times scored as the prediction of the other's."""
    aa = load_script("aa_agreement")
    tune.tune(measure.workload_module(MATMUL), tvm.target.Target("llvm"), tmp_path / "a", trials=2)
    best = aa.best_us(str(tmp_path / "a"), 2)
    assert len(best) == 1 and all(t > 0 for t in best.values())
    assert aa.best_us(str(tmp_path / "a"), 4) == {}  # tuned with 2 trials, not 4
    m = aa.agreement({"k1": 10.0, "k2": 20.0, "k3": 40.0}, {"k1": 10.0, "k2": 30.0, "k3": 20.0}, ["k1", "k2", "k3"])
    assert m["median_ratio"] == 1.5 and m["over_1_5x"] == pytest.approx(1 / 3) and m["over_2x"] == 0
    assert m["within_20pct"] == pytest.approx(1 / 3) and m["n"] == 3


def test_aa_agreement_retimes_a_databases_best_schedules(tmp_path):
    """``--retime``: each kernel's best schedule built from the database and timed afresh (cold
    where the database was tuned cold): a median and its spread per kernel hash."""
    aa = load_script("aa_agreement")
    target = tvm.target.Target("llvm")
    tune.tune(measure.workload_module(MATMUL), target, tmp_path / "a", trials=2, cold_cache=True)
    kernels = aa.kernel_modules(str(tmp_path / "a"))
    assert list(kernels) == list(aa.best_us(str(tmp_path / "a"), 2))
    ((median, spread),) = aa.fresh_us(str(tmp_path / "a"), kernels, tune.tuning_target(target), 3).values()
    assert median > 0 and spread >= 0


def test_cold_tuning_flushes_the_weights_and_keeps_its_database_apart(tmp_path, monkeypatch):
    """``cold_cache=True`` times every candidate with the caches flushed (one run per repeat,
    so each is cold); its database is marked cold, is refused to a warm tuning (and the other
    way round), and its pruned copy and the databases it seeds stay marked."""
    mod = measure.workload_module(MATMUL)
    target = tvm.target.Target("llvm")
    timed = []
    real = tune.run_evaluator_common

    def spy(rt_mod, device, evaluator, repeated_args):
        timed.append(evaluator)
        return real(rt_mod, device, evaluator, repeated_args)

    monkeypatch.setattr(tune, "run_evaluator_common", spy)
    db = tune.tune(mod, target, tmp_path / "cold", trials=4, cold_cache=True)
    assert timed and all(e.enable_cpu_cache_flush and e.number == 1 and e.min_repeat_ms == 0 for e in timed)
    assert tuning_db.database_cache(tmp_path / "cold") == "cold" and tuning_db.tuned_records(db, _task_mod(mod))
    with pytest.raises(ValueError, match="cold caches"):
        tune.tune(mod, target, tmp_path / "cold", trials=4)
    timed.clear()
    tune.tune(mod, target, tmp_path / "warm", trials=4)
    assert timed and not any(e.enable_cpu_cache_flush for e in timed)
    assert tuning_db.database_cache(tmp_path / "warm") == "warm" and tuning_db.database_cache(tmp_path / "none") is None
    with pytest.raises(ValueError, match="warm caches"):
        tune.tune(mod, target, tmp_path / "warm", trials=4, cold_cache=True)
    tuning_db.prune_database(tmp_path / "cold", tmp_path / "committed", compress=True)
    assert tuning_db.database_cache(tmp_path / "committed") == "cold"
    assert tuning_db.seed_database(tmp_path / "seeded", tmp_path / "committed") == 1
    assert tuning_db.database_cache(tmp_path / "seeded") == "cold"
    with pytest.raises(ValueError, match="warm caches; adding kernels timed cold"):
        tuning_db.seed_database(tmp_path / "warm", tmp_path / "committed")
    with pytest.raises(ValueError, match="llvm"):
        tune.tune(
            mod, tvm.target.Target({"kind": "cuda", "arch": "sm_90"}), tmp_path / "gpu", trials=4, cold_cache=True
        )
    assert tune.target_name("llvm", "znver5", cold_cache=True) == "llvm-znver5-cold"
    assert tune.target_name("llvm") == "llvm"


def _task_mod(mod):
    """The one kernel MetaSchedule tunes in ``mod``."""
    fused = tune.fuse_for_tuning(mod, tvm.target.Target("llvm"))
    target = tune.tuning_target(tvm.target.Target("llvm"))
    return tune.ms.relax_integration.extract_tasks(fused, target)[0].dispatched[0]


@pytest.mark.slow
def test_tuning_beats_the_untuned_build(tmp_path):
    """A speed claim, so not in the default suite: the tuned 128^3 matmul is faster."""
    mod = measure.workload_module(MATMUL)
    target = tvm.target.Target("llvm")
    args = verify.random_inputs(mod["main"])
    db = tune.tune(mod, target, tmp_path, trials=8)
    tuned = measure.time_executable(tune.build(mod, target, db), target, args, repeat=10)
    untuned = measure.time_executable(tune.build(mod, target, None), target, args, repeat=10)
    assert tuned.median_us < untuned.median_us, (tuned.median_us, untuned.median_us)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def rpc_tracker():
    """A loopback RPC tracker with two servers, as a user would farm out measurement."""
    port = _free_port()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tvm.exec.rpc_tracker",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--port-end",
                str(port + 1),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    ]
    try:
        time.sleep(1.0)
        for _ in range(2):
            server_port = _free_port()
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "tvm.exec.rpc_server",
                        "--tracker",
                        f"127.0.0.1:{port}",
                        "--key",
                        "test-cpu",
                        "--host",
                        "127.0.0.1",
                        "--port",
                        str(server_port),
                        "--port-end",
                        str(server_port + 1),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
        deadline = time.monotonic() + 60
        while True:
            try:
                summary = tvm.rpc.connect_tracker("127.0.0.1", port).summary()
                free = sum(q["free"] for k, q in summary["queue_info"].items() if k == "test-cpu")
                if free >= 2:
                    break
            except Exception:
                pass
            if time.monotonic() > deadline:
                pytest.fail("RPC servers did not register with the tracker")
            time.sleep(0.5)
        yield tune.RPCDevice("127.0.0.1", port, "test-cpu")
    finally:
        for p in procs:  # each in its own session: its worker children go with it
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            p.wait(timeout=10)


@pytest.mark.slow  # 25 s on a 2-core Zen 3 (a tracker and two servers start); RPC measurement is opt-in
def test_measure_through_rpc_tracker(rpc_tracker, tmp_path):
    """Timing and tuning candidates run on the servers behind the tracker."""
    local = measure.measure(MATMUL, "llvm", flow="default", repeat=5)
    remote = measure.measure(MATMUL, "llvm", flow="default", repeat=5, rpc=rpc_tracker)
    assert remote.median_us > 0
    assert 0.2 < remote.median_us / local.median_us < 5  # same machine, same kernel
    tuned = measure.measure(CONV, "llvm", flow="tuned", trials=4, work_dir=tmp_path, repeat=5, rpc=rpc_tracker)
    assert tuned.median_us > 0


def _candidates(*sizes: int) -> list:
    """MetaSchedule build inputs: one unscheduled n^3 matmul kernel per size."""
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    inputs = []
    for n in sizes:
        a = te.placeholder((n, n), name="a")
        b = te.placeholder((n, n), name="b")
        k = te.reduce_axis((0, n), name="k")
        c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
        kernel = tvm.IRModule({"main": te.create_prim_func([a, b, c])})
        inputs.append(ms.builder.BuilderInput(kernel, tune.tuning_target("llvm")))
    return inputs


def _matmul_size(inp) -> int:
    return next(n for n in (16, 32, 64) if f"T.Buffer(({n}, {n})" in inp.mod.script())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the forked builder is used on Linux only")
def test_forked_builder_builds_and_survives_hanging_or_crashing_candidates(monkeypatch):
    """Candidates compile in forked children; one that hangs is killed at the time-out
    and one that kills its process becomes a failed build, not a dead tuning run."""
    (ok,) = tune.ForkedBuilder(timeout_s=60).build(_candidates(64))
    assert ok.error_msg is None
    a, b = (np.random.default_rng(0).standard_normal((64, 64)).astype(F32) for _ in range(2))
    c = tvm.runtime.tensor(np.zeros((64, 64), F32))
    tvm.runtime.load_module(ok.artifact_path)["main"](tvm.runtime.tensor(a), tvm.runtime.tensor(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)

    real = tune._build_candidate
    candidates = _candidates(16, 32, 64)

    def misbehaving(inp):  # runs in the forked child
        if _matmul_size(inp) == 16:
            time.sleep(600)
        if _matmul_size(inp) == 32:
            os._exit(7)
        return real(inp)

    monkeypatch.setattr(tune, "_build_candidate", misbehaving)
    start = time.monotonic()
    hang, crash, fine = tune.ForkedBuilder(timeout_s=2, jobs=2).build(candidates)
    assert time.monotonic() - start < 60
    assert hang.artifact_path is None and "timed out after 2 s" in hang.error_msg
    assert crash.artifact_path is None and "exit code 7" in crash.error_msg
    assert fine.error_msg is None and os.path.exists(fine.artifact_path)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the forked builder is used on Linux only")
def test_cuda_candidates_are_built_in_process():
    """A child forked after the parent used CUDA cannot build a CUDA kernel (every candidate
    failed on the H100), so CUDA tuning builds in-process; CPU tuning keeps its forks."""
    assert isinstance(tune.default_builder(30.0, {"kind": "cuda", "arch": "sm_90"}), tune.InProcessBuilder)
    assert isinstance(tune.default_builder(30.0, "llvm"), tune.ForkedBuilder)
    assert isinstance(tune.default_builder(30.0), tune.ForkedBuilder)


def test_cuda_tuning_target_gets_the_limits_metaschedule_reads_and_keeps_its_own():
    plain = tune.tuning_target({"kind": "cuda", "arch": "sm_90"})
    assert int(plain.attrs["max_threads_per_block"]) == 1024
    assert int(plain.attrs["max_shared_memory_per_block"]) == 49152
    named = tune.tuning_target({"kind": "cuda", "arch": "sm_90", "max_shared_memory_per_block": 101376})
    assert int(named.attrs["max_shared_memory_per_block"]) == 101376


def test_a_database_goes_before_dlight_so_dlight_schedules_only_what_it_lacks(tmp_path):
    """On CUDA a tuned build applies the database's kernels, then dlight's default
    schedules to the rest: with an empty database it is the stock build, and it compiles."""
    target = tvm.target.Target({"kind": "cuda", "arch": "sm_90"})
    db = tuning_db.open_database(tmp_path / "db")
    names = [p.info.name for p in tune.legalize_passes(target, db)]
    assert names.index("MetaScheduleApplyDatabase") == names.index("ApplyDefaultSchedule") - 1
    assert "MetaScheduleApplyDatabase" not in [p.info.name for p in tune.legalize_passes(target)]
    x = tensor("x", (8, 32))
    mod = module(
        [x], lambda bb, x: relax.op.nn.relu(bb.emit(relax.op.matmul(x, relax.const(np.ones((32, 16), "float32")))))
    )
    assert measure.nvcc_compile(tune.build(mod, target, db), target) > 0


def test_a_record_tvm_cannot_read_back_is_set_aside_and_the_database_still_opens(tmp_path, caplog):
    """MetaSchedule once wrote records whose traces it could not replay on reading, and then
    refused the whole database; ``open_database`` moves such records aside, with a warning,
    and keeps the rest."""
    from tvm import te
    from tvm.s_tir import Schedule

    a = te.placeholder((4, 4), name="A")
    prim = tvm.IRModule({"main": te.create_prim_func([a, te.compute((4, 4), lambda i, j: a[i, j] * 2, name="B")])})
    sch = Schedule(prim)
    sch.fuse(*sch.get_loops(sch.get_sblock("B")))
    db = tuning_db.open_database(tmp_path)
    db.commit_tuning_record(
        tvm.s_tir.meta_schedule.database.TuningRecord(
            sch.trace, db.commit_workload(prim), [1e-3], tvm.target.Target("llvm")
        )
    )
    records = tmp_path / tuning_db.DATABASE_FILES[1]
    good = records.read_text().splitlines()
    assert len(good) == 1 and '"B","main"' in good[0]
    bad = good[0].replace('"B","main"', '"missing","main"')
    records.write_text(f"{good[0]}\n{bad}\n")
    with caplog.at_level("WARNING", logger="tvm_eqsat"):
        assert len(tuning_db.open_database(tmp_path)) == 1
    assert "set aside 1 of 2 tuning records" in caplog.text
    assert records.read_text().splitlines() == good
    assert (tmp_path / tuning_db.REJECTED_RECORDS).read_text().splitlines() == [bad]
    assert len(tuning_db.open_database(tmp_path)) == 1  # opens cleanly now, nothing more set aside
    assert (tmp_path / tuning_db.REJECTED_RECORDS).read_text().splitlines() == [bad]


def test_masks_are_tuned_on_random_zeros_and_ones_and_indices_on_zeros():
    """A where's mask takes both branches while tuning (zeros only timed the masked-out one
    and kept a softmax schedule 200x slower on a real mask); wider integers stay in bounds."""
    fill, dev = tune._random_fill(), tvm.cpu()
    for dtype in ("int8", "bool"):
        got = tune._alloc(("TENSOR", dtype, [256]), dev, fill).numpy().astype(int)
        assert set(np.unique(got)) == {0, 1}
    assert not tune._alloc(("TENSOR", "int64", [256]), dev, fill).numpy().any()
    assert np.ptp(tune._alloc(("TENSOR", "float32", [256]), dev, fill).numpy()) > 0


def test_records_of_mask_kernels_timed_on_zero_masks_are_dropped_once(tmp_path, caplog):
    """A folder tuned before masks were filled at random loses its mask kernels' records and
    budgets (so they are tuned again) and keeps the rest; marked, it is left alone after."""
    from tvm import te

    def prim(dtype):
        m, x = te.placeholder((4, 4), dtype, name="M"), te.placeholder((4, 4), name="X")
        keep = m[0, 0] > tvm.tirx.const(0, dtype) if dtype != "float32" else m[0, 0] > 0.0
        out = te.compute((4, 4), lambda i, j: tvm.tirx.Select(keep, x[i, j], tvm.tirx.const(0.0)), name="B")
        return tvm.IRModule({"main": te.create_prim_func([m, x, out])})

    db = tuning_db.open_database(tmp_path)
    budgets = {}
    for dtype in ("int8", "float32"):
        mod = prim(dtype)
        sch = tvm.s_tir.Schedule(mod)
        args = tvm.s_tir.meta_schedule.arg_info.ArgInfo.from_prim_func(mod["main"])
        db.commit_tuning_record(
            tvm.s_tir.meta_schedule.database.TuningRecord(
                sch.trace, db.commit_workload(mod), [1e-3], tvm.target.Target("llvm"), args
            )
        )
        budgets[f"fused_{dtype}-{tuning_db.kernel_hash(mod)}"] = 8
    tuning_db.write_budgets(tmp_path, budgets)
    with caplog.at_level("WARNING", logger="tvm_eqsat"):
        assert tuning_db.drop_zero_mask_records(tmp_path) == 1
    assert "dropped 1 tuning records of 1 kernels with mask arguments" in caplog.text
    assert len(tuning_db.open_database(tmp_path)) == 1
    kept = (tmp_path / tuning_db.DATABASE_FILES[1]).read_text()
    assert '"float32",[4,4]' in kept and "int8" not in kept
    assert list(tuning_db.read_budgets(tmp_path)) == [f"fused_float32-{tuning_db.kernel_hash(prim('float32'))}"]
    assert tuning_db.drop_zero_mask_records(tmp_path) == 0  # marked: records tuned from now on stay


def test_a_kernel_with_fewer_schedules_than_the_budget_says_so(tmp_path, caplog):
    """An element-wise kernel has a handful of distinct schedules: its search stops before
    the budget, and the log says why the progress bar stopped short (a 2,991-trial Inception-v3
    run measured 59 of the 718 trials it planned and looked cut off)."""
    x = tensor("x", (64, 64))
    mod = module([x], lambda bb, x: relax.op.nn.relu(x))
    with caplog.at_level("INFO", logger="tvm_eqsat"):
        db = tune.tune(mod, tvm.target.Target("llvm"), tmp_path, trials=32)
    assert 0 < len(db) < 32
    assert f"measured {len(db)} of the 32 trials planned" in caplog.text


def test_kernels_without_a_reduction_search_a_smaller_population():
    """A copy or element-wise kernel has a handful of schedules: searched with
    ``INJECTIVE_POPULATION``, where a matmul or a sum keeps the population asked for (and
    a smaller one asked for stays)."""
    from tvm import te, topi

    def kernel(out, *ins):
        return tvm.IRModule({"main": te.create_prim_func([*ins, out])})

    a, b = te.placeholder((64, 64), name="a"), te.placeholder((64, 64), name="b")
    copy = kernel(topi.nn.relu(topi.transpose(a, (1, 0))), a)
    assert tune.search_population(copy, 512) == tune.INJECTIVE_POPULATION == 64
    assert tune.search_population(copy, 16) == 16
    assert tune.search_population(kernel(topi.nn.matmul(a, b), a, b), 512) == 512
    assert tune.search_population(kernel(topi.sum(a, axis=1), a), 512) == 512


def test_the_tuning_estimate_uses_the_pace_the_work_dir_last_measured(tmp_path, monkeypatch, capsys):
    """The estimate a run prints comes from the last run's seconds per trial in that work dir
    (full-size kernels timed cold took 2-3x the built-in guess), and each run records its own."""
    tuning_db.write_pace(tmp_path, 999.0 * 64, 64)
    tuning_db.write_pace(tmp_path, 1.0, tuning_db.PACE_MIN_TRIALS - 1)  # too short to count
    assert tuning_db.read_pace(tmp_path) == 999.0
    monkeypatch.setattr(tuning_db, "PACE_MIN_TRIALS", 1)
    mod = module([tensor("x", (64, 64))], lambda bb, x: relax.op.nn.relu(x))
    tune.tune(mod, tvm.target.Target("llvm"), tmp_path, trials=1, progress=True)
    assert "last pace (999.0 s per trial)" in capsys.readouterr().err
    assert 0 < tuning_db.read_pace(tmp_path) < 999.0


def test_a_kernel_stored_under_other_names_is_tuned_in_its_stored_form(tmp_path, caplog):
    """Two global pools equal but for their reduction block's name (after the input variable):
    MetaSchedule files both under the first one's workload, so tuning the second must trace
    that form, or the database holds records it cannot read back (Inception-v3, Zen 3)."""

    target = tvm.target.Target("llvm")
    tune.tune(global_pool("first"), target, tmp_path, trials=2)
    tune.tune(global_pool("second"), target, tmp_path, trials=4)  # the same kernel, two trials more
    records = (tmp_path / tuning_db.DATABASE_FILES[1]).read_text()
    assert "first_red" in records and "second_red" not in records
    with caplog.at_level("WARNING", logger="tvm_eqsat"):
        assert len(tuning_db.open_database(tmp_path)) == records.count("\n") >= 3
    assert "set aside" not in caplog.text


def test_a_seed_record_traced_on_other_block_names_is_not_copied(tmp_path, caplog):
    """Seeding a work directory that holds a kernel, untuned, under other block names: the
    seed's record would not replay there, so it is not copied, nor its budget (the kernel is
    tuned here); a record traced on the stored names is."""
    from tvm.s_tir import Schedule

    def seed_of(kernel, name):
        db = tuning_db.open_database(tmp_path / name)
        sch = Schedule(kernel)
        sch.fuse(*sch.get_loops(sch.get_sblock(f"{name}_red"))[:2])
        db.commit_tuning_record(
            tvm.s_tir.meta_schedule.database.TuningRecord(
                sch.trace, db.commit_workload(kernel), [1e-3], tvm.target.Target("llvm")
            )
        )
        tuning_db.write_budgets(tmp_path / name, {f"pool-{tuning_db.kernel_hash(kernel)}": 32})
        return tmp_path / name

    first, second = global_pool_kernel("first"), global_pool_kernel("second")
    tuning_db.open_database(tmp_path / "work").commit_workload(first)  # held, never tuned
    with caplog.at_level("WARNING", logger="tvm_eqsat"):
        assert tuning_db.seed_database(tmp_path / "work", seed_of(second, "second")) == 0
    assert "names blocks the kernel stored here lacks" in caplog.text
    assert tuning_db.read_budgets(tmp_path / "work") == {}
    assert tuning_db.seed_database(tmp_path / "work", seed_of(first, "first")) == 1
    assert len(tuning_db.open_database(tmp_path / "work")) == 1
    assert not (tmp_path / "work" / tuning_db.REJECTED_RECORDS).exists()


def test_a_cold_database_is_retimed_with_cold_caches(tmp_path, monkeypatch):
    """A database tuned with cold caches ranked its schedules by their cold time: ``retime``
    times its kernels the same way (every argument but the data flushed before each run),
    a warm database's warm; flushing a GPU's inputs is refused, not ignored."""
    mod = measure.workload_module(MATMUL)
    target = tvm.target.Target("llvm")
    tune.tune(mod, target, tmp_path / "cold", trials=2, cold_cache=True)
    tune.tune(mod, target, tmp_path / "warm", trials=2)
    seen = []
    real = relax.VirtualMachine.time_evaluator

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("f_preproc", ""))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(relax.VirtualMachine, "time_evaluator", spy)
    for kind in ("cold", "warm"):
        (found,) = harvest.harvest(str(tmp_path / kind), [mod], "llvm")
        ((_, m),) = harvest.retime([found], str(tmp_path / kind), "llvm", repeat=3)
        assert len(m.runs) == 3 and m.median_us > 0
    assert seen == [measure.CACHE_FLUSH, ""]
    with pytest.raises(ValueError, match="llvm"):
        measure.time_executable(None, tvm.target.Target("cuda"), [], cold_cache=True)
