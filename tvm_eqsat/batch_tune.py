"""MetaSchedule without a live runner: candidates built here, timed in one batch run on
another machine, written back into the database as measured records.

The lent GPU machine takes batch commands only (no RPC can reach it), so tuning there
is offline: ``candidate_bundle`` extracts the kernels of a module, samples ``n``
schedules of each from MetaSchedule's design space (the ``replay-trace`` strategy:
random decisions, no feedback between rounds), compiles them, beside the kernel as the
stock pipeline schedules it (dlight on CUDA), into a runtime-only bundle
(``tvm_eqsat.bundle``) whose runner times them all; ``record_results`` then turns the
run's ``results.json`` into tuning records: the fastest candidate of each kernel, where
it beat the stock schedule, so ``tune.build(mod, target, database)`` uses it there and
the stock schedule elsewhere.  One round is a random search of ``n`` trials per kernel;
rounds can be repeated with other seeds (records accumulate in the database).

    path = batch_tune.candidate_bundle(mod, "cuda", "out/cands", n=16)
    # device: python out/cands/run.py --out $OUT
    db = batch_tune.record_results("out/cands", "<files_at>/results.json", "ms_db")
"""

from __future__ import annotations

import gzip
import json
import logging
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import tvm
from tqdm import tqdm
from tvm.s_tir import meta_schedule as ms

from . import bundle, provenance, tune, tuning_db

log = logging.getLogger("tvm_eqsat")

CANDIDATES = "candidates.json.gz"  # kept with the bundle: what each timed library is, to record it


def _sample(task, target, n: int, seed: int) -> list:
    tune.import_tensor_intrinsics()
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


def extract_tasks(mods: list[tvm.IRModule], target: Any, select=None) -> list:
    """The kernels of ``mods`` as the tuned build fuses them, each workload once (the
    first module that has it names it); ``select(task) -> bool`` keeps a subset."""
    target = tune.tuning_target(target)
    found: dict[Any, Any] = {}
    for mod in mods:
        for task in ms.relax_integration.extract_tasks(tune.fuse_for_tuning(mod, target), target):
            if select is None or select(task):
                found.setdefault(tuning_db.kernel_hash(task.dispatched[0]), task)
    return list(found.values())


def heavy(task) -> bool:
    """Kernels worth a GPU search: convolutions and matrix products.  The others are
    memory-bound element-wise and reduction kernels, which dlight already schedules at
    close to bandwidth."""
    return any(op in task.task_name for op in HEAVY_OPS)


HEAVY_OPS = ("conv2d", "matmul", "dense")


def task_flops(task) -> float:
    """A kernel's floating-point work in the model: its TIR's FLOPs times the number of
    times the model runs it (MetaSchedule's task weight)."""
    from tvm.s_tir.analysis import estimate_tir_flops

    return float(estimate_tir_flops(task.dispatched[0])) * max(int(task.weight), 1)


def allot(tasks: list, total: int, least: int = 4, most: int = 64) -> list[int]:
    """Schedules to sample per kernel when ``total`` candidates are to be built in all:
    each kernel gets its share of ``total`` by its work (``task_flops``), at least ``least``
    and at most ``most``.  A model's time is in its few dear convolutions and matmuls, and
    compiling candidates here is what a round costs (about 1.2 s each for CUDA), so the search
    goes where the time is, as MetaSchedule's task scheduler weighs tasks."""
    if not tasks:
        return []
    if total < least * len(tasks):
        raise ValueError(f"{total} candidates cannot give {len(tasks)} kernels {least} each")
    work = [task_flops(t) for t in tasks]
    n = [least] * len(tasks)
    room, open_ = total - least * len(tasks), set(range(len(tasks)))
    while room > 0 and open_ and sum(work[i] for i in open_) > 0:
        whole = sum(work[i] for i in open_)
        full = {i for i in open_ if n[i] + room * work[i] / whole >= most}
        if full:  # capped kernels first; their leftover share goes round again
            for i in full:
                room -= most - n[i]
                n[i] = most
            open_ -= full
            continue
        shares = {i: int(room * work[i] / whole) for i in open_}
        for i, extra in shares.items():
            n[i] += extra
        room -= sum(shares.values())
        for i in sorted(open_, key=lambda i: -work[i])[:room]:  # what rounding left, to the dearest
            n[i] += 1
        room = 0
    return n


def default_scheduled(workload: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """The kernel as the target's stock pipeline schedules it (dlight on CUDA, nothing on
    CPU, where the default lowering compiles it): the baseline a candidate must beat.

    dlight's pass writes its schedules into the module it is given, so it gets a copy:
    scheduled in place, the task's own workload was what MetaSchedule then sampled and
    what the records named, and every candidate came out as dlight's schedule."""
    passes = [p for p in tune.legalize_passes(target) if p.info.name == "ApplyDefaultSchedule"]
    if not passes:
        return workload
    with target:
        return tvm.transform.Sequential(passes)(tvm.IRModule(dict(workload.functions_items()), attrs=workload.attrs))


def _arg_specs(func) -> list:
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    return [provenance.plain(a.as_json()) for a in ArgInfo.from_prim_func(func)]  # ["TENSOR", dtype, shape]


def _compile_group(out: Path, stem: str, funcs: dict, target) -> dict[str, str]:
    """The functions of one kernel compiled into one library (one nvcc run), or one by one
    where the group does not build; {function: library file} of those that build."""
    try:
        ex = tvm.compile(tvm.IRModule(funcs), target=target)
        return dict.fromkeys(funcs, bundle.add_library(out, stem, ex, target))
    except Exception as err:  # noqa: BLE001 - a candidate that does not build is skipped, as tuning does
        if len(funcs) == 1:
            log.info("%s does not build: %s", stem, str(err).splitlines()[0][:200])
            return {}
        built = {}
        for name, func in funcs.items():
            built.update(_compile_group(out, f"{stem}_{name}", {name: func}, target))
        return built


def _compile_job(out: str, stem: str, module_json: str, target_config: dict) -> dict[str, str]:
    """``_compile_group`` in a worker process (TVM's compiler holds the GIL, so threads
    would compile one kernel at a time); the functions travel as JSON."""
    mod = tvm.ir.load_json(module_json)
    target = tvm.target.Target(target_config)
    with bundle.cuda_compile_env(target):
        return _compile_group(Path(out), stem, {gv.name_hint: mod[gv] for gv in mod.get_global_vars()}, target)


def candidate_bundle(
    mod: tvm.IRModule | list,
    target: Any,
    out_dir: str | os.PathLike,
    n: int | list[int] = 16,
    seed: int = 0,
    python_version: str = bundle.DEVICE_PYTHON,
    number: int = 10,
    repeat: int = 5,
    baseline: bool = True,
) -> Path:
    """A bundle timing ``n`` sampled schedules of every kernel of ``mod`` (or of the
    tasks ``extract_tasks`` gave; ``n`` a list: that many of each, see ``allot``), and
    with ``baseline`` the kernel as the stock pipeline schedules it, which
    ``record_results`` then requires a candidate to beat.  Each kernel's functions share
    one library (one nvcc run), compiled in worker processes while the next kernels are
    sampled; the libraries travel as one xz archive (``bundle.solidify``: about 20 KiB a
    sampled CUDA schedule, so about 1,400 fit one run's 64 MiB beside the project)."""
    user_target = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    target = tune.tuning_target(user_target)
    tasks = extract_tasks([mod], target) if isinstance(mod, tvm.IRModule) else list(mod)
    counts = list(n) if isinstance(n, (list, tuple)) else [n] * len(tasks)
    if len(counts) != len(tasks):
        raise ValueError(f"{len(counts)} candidate counts for {len(tasks)} kernels")
    out, manifest = bundle.new_bundle(out_dir, user_target)
    kept, jobs, workloads = [], [], []

    def entry(name: str, file: str, specs: list, base: str | None) -> dict:
        row = {"kind": "kernel", "name": name, "file": file, "function": name, "number": number, "repeat": repeat}
        return {**row, "inputs": [[a[2], a[1]] for a in specs], **({"baseline": base} if base else {})}

    workers = ProcessPoolExecutor(tune.available_cores(), mp_context=multiprocessing.get_context("fork"))
    with bundle.cuda_compile_env(target), workers as pool:
        for t, task in enumerate(tqdm(tasks, desc=f"sampling {sum(counts)} schedules", file=sys.stderr)):
            workload = task.dispatched[0]
            specs = _arg_specs(workload["main"])
            funcs, rows = {}, []
            base = f"k{t}_base" if baseline else None
            if base:
                funcs[base] = default_scheduled(workload, user_target)["main"].with_attr("global_symbol", base)
                rows.append((base, specs, None))
            for c, cand in enumerate(_sample(task, target, counts[t], seed + t)):
                name = f"k{t}_c{c}"
                funcs[name] = cand.sch.mod["main"].with_attr("global_symbol", name)
                rows.append((name, specs, base))  # a schedule keeps its kernel's arguments
                trace = provenance.plain(cand.sch.trace.as_json())
                kept.append({"name": name, "task": task.task_name, "kernel": t, "baseline": base, "trace": trace})
            workloads.append(tvm.ir.save_json(workload))
            job = pool.submit(
                _compile_job, str(out), f"k{t}", tvm.ir.save_json(tvm.IRModule(funcs)), user_target.export()
            )
            jobs.append((job, rows))
        for job, rows in tqdm(jobs, desc="compiling (a library a kernel)", file=sys.stderr):
            files = job.result()
            manifest["entries"] += [entry(name, files[name], args, b) for name, args, b in rows if name in files]
    built = {e["name"] for e in manifest["entries"]}
    kept = [k for k in kept if k["name"] in built]
    (out / CANDIDATES).write_bytes(
        gzip.compress(
            json.dumps(
                {
                    "target": provenance.plain(target.export()),
                    "workloads": workloads,
                    "candidates": kept,
                    "seed": seed,
                    "n": counts,
                }
            ).encode()
        )
    )
    log.info("%d candidates of %d kernels", len(kept), len(tasks))
    return bundle.finish_bundle(out, manifest, python_version, solid=True)


def unmatched_records(database, tasks: list) -> int:
    """How many kernels ``database`` has records for that none of ``tasks`` looks up: the
    tuned build of those modules would never use them.  Zero for records made from the
    same modules' candidates; a past bug recorded every CUDA candidate under dlight's
    scheduled module, which this counts."""
    looked_up = {
        tuning_db.kernel_hash(t.dispatched[0]) for t in tasks if tuning_db.tuned_records(database, t.dispatched[0])
    }
    named = {tuning_db.kernel_hash(r.workload.mod) for r in database.get_all_tuning_records()}
    return len(named - looked_up)


def _timed_kernels(bundle_dir: str | os.PathLike, results: str | os.PathLike):
    """The kernels of a candidate bundle's device run: for each, its workload's index in the
    bundle, its stock schedule's row (None where the bundle timed none) and its timed
    candidates, fastest first; with the bundle's info and the rows by name."""
    info = json.loads(gzip.decompress((Path(bundle_dir) / CANDIDATES).read_bytes()))
    timed = {row["name"]: row for row in json.loads(Path(results).read_text())["rows"]}
    by_kernel: dict[str, list] = {}
    for cand in info["candidates"]:
        if cand["name"] in timed:
            by_kernel.setdefault(cand.get("baseline") or cand["name"], []).append(cand)
    kernels = []
    for key, cands in by_kernel.items():
        cands.sort(key=lambda c: timed[c["name"]]["median_ms"])
        kernels.append((cands[0]["kernel"], timed.get(key) if cands[0].get("baseline") else None, cands))
    return info, timed, kernels


def kernel_times(pairs: list[tuple[str, str]]) -> dict[str, tuple[float, int]]:
    """What the tuned flow runs each kernel of these (bundle, results) device runs in: the
    faster of its stock schedule and its best candidate, in microseconds, and how many
    schedules were timed, by kernel structure (``tuning_db.kernel_hash``).  These are the
    training labels of a target tuned offline: its database holds only the kernels a
    candidate won, and the tuned build runs the others as the stock pipeline schedules them."""
    out: dict[str, tuple[float, int]] = {}
    for bundle_dir, results in pairs:
        info, timed, kernels = _timed_kernels(bundle_dir, results)
        for index, base, cands in kernels:
            times = [timed[cands[0]["name"]]["median_ms"]] + ([base["median_ms"]] if base else [])
            key = tuning_db.kernel_hash(tvm.ir.load_json(info["workloads"][index]))
            out[key] = (min(times) * 1e3, len(cands) + (base is not None))
    return out


def record_results(
    bundle_dir: str | os.PathLike, results: str | os.PathLike, work_dir: str | os.PathLike, report: list | None = None
):
    """Commit the timed candidates of a bundle to the database in ``work_dir`` as measured
    tuning records (their median times); returns the database.

    Where the bundle timed the kernel's stock schedule (``baseline``), only the fastest
    candidate is committed, and only if it beats that schedule: a kernel without a record
    keeps its stock schedule in ``tune.build``.  ``report`` (a list) receives one row per
    kernel: its task, baseline and best candidate times, candidates timed."""
    from tvm.s_tir.meta_schedule.arg_info import ArgInfo

    info, timed, kernels = _timed_kernels(bundle_dir, results)
    target = tvm.target.Target(info["target"])
    database = tuning_db.open_database(work_dir)
    committed = 0
    for _, base, cands in kernels:
        if base is not None:
            best = timed[cands[0]["name"]]["median_ms"]
            if report is not None:
                report.append(
                    {"task": cands[0]["task"], "baseline_ms": base["median_ms"], "best_ms": best, "timed": len(cands)}
                )
            cands = cands[:1] if best < base["median_ms"] else []
        for cand in cands:
            workload_mod = tvm.ir.load_json(info["workloads"][cand["kernel"]])
            # the trace is replayed on the form the database files this kernel under, which
            # can differ in block names (see tuning_db.open_database): a record that does not
            # replay there would make the database unreadable
            workload = database.commit_workload(workload_mod)
            sch = tuning_db.replay(cand["trace"], workload.mod)
            if sch is None:
                log.warning("%s: the database holds this kernel under other block names; not recorded", cand["name"])
                continue
            record = ms.database.TuningRecord(
                trace=sch.trace,
                workload=workload,
                run_secs=[timed[cand["name"]]["median_ms"] / 1e3],
                target=target,
                args_info=ArgInfo.from_prim_func(workload_mod["main"]),
            )
            database.commit_tuning_record(record)
            committed += 1
    log.info("%d measured records committed to %s", committed, work_dir)
    return database
