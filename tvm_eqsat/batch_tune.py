"""MetaSchedule without a live runner: candidates built here, timed in one batch run on
another machine, written back into the database as measured records.

The lent GPU machine takes batch commands only (no RPC can reach it), so tuning there
is offline: ``candidate_bundle`` extracts the kernels of a module, samples ``n``
schedules of each from MetaSchedule's design space (the ``replay-trace`` strategy:
random decisions, no feedback between rounds), compiles each candidate to a library
and writes a runtime-only bundle (``tvm_eqsat.bundle``) whose runner times them all;
``record_results`` then turns the run's ``results.json`` into tuning records, so
``tune.build(mod, target, database)`` builds with the fastest candidate of each kernel.
One round is a random search of ``n`` trials per kernel; rounds can be repeated with
other seeds (records accumulate in the database).

    path = batch_tune.candidate_bundle(mod, "cuda", "out/cands", n=32)
    # device: python out/cands/run.py --out $OUT
    db = batch_tune.record_results("out/cands", "<files_at>/results.json", "ms_db")
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import tvm
from tvm.s_tir import meta_schedule as ms

from . import bundle, provenance, tune

log = logging.getLogger("tvm_eqsat")

CANDIDATES = "candidates.json"  # kept with the bundle: what each timed library is, to record it


def _sample(task, target, n: int, seed: int) -> list:
    ctx = ms.TuneContext(
        mod=task.dispatched[0],
        target=target,
        space_generator="post-order-apply",
        search_strategy="replay-trace",
        task_name=task.task_name,
        rand_state=seed,
        num_threads=tune.available_cores(),
    )
    spaces = ctx.generate_design_space()
    strategy = ctx.search_strategy
    strategy.pre_tuning(max_trials=n, num_trials_per_iter=n, design_spaces=spaces, database=None, cost_model=None)
    candidates = list(strategy.generate_measure_candidates() or [])
    strategy.post_tuning()
    return candidates


def candidate_bundle(
    mod: tvm.IRModule,
    target: Any,
    out_dir: str | os.PathLike,
    n: int = 16,
    seed: int = 0,
    python_version: str = bundle.DEVICE_PYTHON,
    number: int = 10,
    repeat: int = 5,
) -> Path:
    """A bundle timing ``n`` sampled schedules of every kernel of ``mod``."""
    target = tune.tuning_target(target)
    tasks = ms.relax_integration.extract_tasks(tune.fuse_for_tuning(mod, target), target)
    out, manifest = bundle.new_bundle(out_dir, target)
    kept = []
    with bundle.cuda_compile_env(target):
        for t, task in enumerate(tasks):
            for c, cand in enumerate(_sample(task, target, n, seed + t)):
                name = f"k{t}_c{c}"
                try:
                    file = bundle.add_library(out, name, tvm.compile(cand.sch.mod, target=target), target)
                except Exception as err:  # a candidate that does not build is skipped, as tuning does
                    log.info("candidate %s of %s does not build: %s", c, task.task_name, err)
                    continue
                args = [provenance.plain(a.as_json()) for a in cand.args_info]  # ["TENSOR", dtype, shape]
                specs = [[a[2], a[1]] for a in args]
                manifest["entries"].append(
                    {
                        "kind": "kernel",
                        "name": name,
                        "file": file,
                        "function": "main",
                        "inputs": specs,
                        "number": number,
                        "repeat": repeat,
                    }
                )
                kept.append(
                    {
                        "name": name,
                        "task": task.task_name,
                        "workload": tvm.ir.save_json(task.dispatched[0]),
                        "trace": provenance.plain(cand.sch.trace.as_json()),
                        "args_info": args,
                    }
                )
    (out / CANDIDATES).write_text(json.dumps({"target": provenance.plain(target.export()), "candidates": kept}))
    log.info("%d candidates of %d kernels", len(kept), len(tasks))
    return bundle.finish_bundle(out, manifest, python_version)


def record_results(bundle_dir: str | os.PathLike, results: str | os.PathLike, work_dir: str | os.PathLike):
    """Commit every timed candidate of a bundle to the database in ``work_dir`` as a
    measured tuning record (its median time); returns the database."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo
    from tvm.s_tir.schedule import Schedule, Trace

    info = json.loads((Path(bundle_dir) / CANDIDATES).read_text())
    target = tvm.target.Target(info["target"])
    timed = {row["name"]: row for row in json.loads(Path(results).read_text())["rows"]}
    database = tune.open_database(work_dir)
    committed = 0
    for cand in info["candidates"]:
        row = timed.get(cand["name"])
        if row is None:
            continue
        workload_mod = tvm.ir.load_json(cand["workload"])
        sch = Schedule(workload_mod)
        Trace.apply_json_to_schedule(cand["trace"], sch)
        record = ms.database.TuningRecord(
            trace=sch.trace,
            workload=database.commit_workload(workload_mod),
            run_secs=[row["median_ms"] / 1e3],
            target=target,
            args_info=[ArgInfo.from_json(a) for a in cand["args_info"]],
        )
        database.commit_tuning_record(record)
        committed += 1
    log.info("%d measured records committed to %s", committed, work_dir)
    return database
