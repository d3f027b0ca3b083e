"""MetaSchedule tuning that works on the pinned wheels, with a database on disk.

The stock ``tune_relax`` fails here in ways that are not about the kernels: the
default LocalBuilder's worker processes time out on every candidate, and the
default runner uses the same worker pool.  This module builds each candidate in
a forked child with a time-out, runs it in-process (or times it on a remote
device through TVM's RPC tracker), keeps one JSON database per work directory so nothing is tuned
twice (``tuning_db``), and sets ``TVM_NUM_THREADS`` and the target's ``num-cores`` to the cores at hand.

    db = tune(mod, "llvm", work_dir="ms_db", trials=64)
    ex = build(mod, "llvm", database=db)
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
from tvm.s_tir.meta_schedule.runner import EvaluatorConfig, PyRunner
from tvm.s_tir.meta_schedule.runner.local_runner import LocalRunnerFuture
from tvm.s_tir.meta_schedule.runner.utils import run_evaluator_common

from .tuning_db import (
    MASK_DTYPES,
    budgets_by_hash,
    claim_cache,
    drop_zero_mask_records,
    kernel_hash,
    open_database,
    read_budgets,
    read_pace,
    stored_form,
    tuned_records,
    write_budgets,
    write_pace,
)

log = logging.getLogger("tvm_eqsat")


def available_cores() -> int:
    """Physical cores this process may use (affinity-aware), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def use_all_cores() -> int:
    """Set TVM_NUM_THREADS (TVM uses one thread without it) unless the user did."""
    if "TVM_NUM_THREADS" not in os.environ:
        os.environ["TVM_NUM_THREADS"] = str(available_cores())
    return int(os.environ["TVM_NUM_THREADS"])


# What MetaSchedule's GPU rules read and a plain {"kind": "cuda"} target lacks: the limits
# every CUDA GPU since compute capability 3.0 has (48 KiB of static shared memory per block,
# 64 Ki registers per block); a target that names its own keeps them.
CUDA_LIMITS = {"max_shared_memory_per_block": 49152, "registers_per_block": 65536}


def host_cpu() -> str:
    """LLVM's name for this machine's CPU, for ``-mcpu``: without it TVM's llvm target
    compiles for generic x86-64 (SSE2 only, no AVX), which no user who wants speed ships.
    'generic' where LLVM does not know the CPU."""
    from tvm.target import codegen

    cpu, triple = codegen.llvm_get_system_cpu(), codegen.llvm_get_system_triple()
    return cpu if cpu and cpu != "generic" and codegen.llvm_is_valid_cpu(cpu, triple) else "generic"


def resolve_mcpu(mcpu: str) -> str:
    """``mcpu`` as a target takes it: 'host' becomes this machine's CPU; a CPU LLVM does not
    know raises ValueError (TVM would otherwise build generic code for it with a log line)."""
    from tvm.target import codegen

    if mcpu == "host":
        return host_cpu()
    if mcpu != "generic" and not codegen.llvm_is_valid_cpu(mcpu, codegen.llvm_get_system_triple()):
        raise ValueError(f"--mcpu {mcpu}: LLVM does not know this CPU (this machine's: {host_cpu()})")
    return mcpu


def llvm_target(mcpu: str = "generic") -> dict:
    """The llvm target of ``mcpu`` ('generic': TVM's plain llvm, generic x86-64 code; 'host':
    this machine's CPU; else a CPU as LLVM names it)."""
    mcpu = host_cpu() if mcpu == "host" else mcpu
    return {"kind": "llvm", **({} if mcpu == "generic" else {"mcpu": mcpu})}


def target_name(kind: str, mcpu: str = "generic", cold_cache: bool = False) -> str:
    """The name of a target's tuning databases and results files: 'llvm' for generic x86-64
    code, 'llvm-<cpu>' for one CPU's instructions (a kernel tuned for one is not the other's);
    '-cold' appended for kernels timed with cold caches (``tune(..., cold_cache=True)``: their
    records rank schedules differently, and the two must not share a database)."""
    name = f"llvm-{mcpu}" if kind == "llvm" and mcpu != "generic" else kind
    return f"{name}-cold" if cold_cache else name


def tuning_target(target: Any) -> tvm.target.Target:
    """The target with what MetaSchedule needs set: ``num-cores`` for CPU (it refuses llvm
    targets without it), the thread, shared-memory and register limits for CUDA."""
    tgt = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    config = dict(tgt.export())
    if tgt.kind.name == "llvm":
        config.setdefault("num-cores", available_cores())
    elif tgt.kind.name == "cuda":
        config.setdefault("max_threads_per_block", int(tgt.attrs.get("max_num_threads", 1024)))
        for key, value in CUDA_LIMITS.items():
            config.setdefault(key, value)
    else:
        return tgt
    return tgt if config == dict(tgt.export()) else tvm.target.Target(config)


@dataclass(frozen=True)
class RPCDevice:
    """A device reached through TVM's RPC tracker (``python -m tvm.exec.rpc_tracker``)."""

    tracker_host: str
    tracker_port: int
    key: str
    session_timeout_s: float = 60.0

    def connect(self):
        tracker = tvm.rpc.connect_tracker(self.tracker_host, self.tracker_port)
        return tracker.request(self.key, priority=1, session_timeout=int(self.session_timeout_s))


# ---------------------------------------------------------------- builder / runner


def _build_candidate(inp) -> tuple[str | None, str | None]:
    """(artifact path, None) or (None, error) for one MetaSchedule candidate."""
    from tvm.s_tir.meta_schedule.builder.local_builder import default_build, default_export

    try:
        return default_export(default_build(inp.mod, inp.target, None)), None
    except Exception as err:  # a candidate that fails to build is a tuning result, not an error
        return None, f"{type(err).__name__}: {err}"


@derived_object
class InProcessBuilder(PyBuilder):
    """Compiles each candidate in this process; used where ``fork`` is unavailable."""

    def build(self, build_inputs):
        results = []
        for inp in build_inputs:
            path, err = _build_candidate(inp)
            results.append(BuilderResult(path, None if err is None else f"InProcessBuilder: {err}"))
        return results


def _build_in_child(inp, conn) -> None:
    try:
        conn.send(_build_candidate(inp))
    finally:
        conn.close()


@derived_object
class ForkedBuilder(PyBuilder):
    """Compiles each candidate in a forked child, killed after ``timeout_s``.

    TVM's own worker-pool builder times out on every candidate here (its workers
    start a fresh interpreter), and compiling in-process has no time-out: one
    candidate spent 40 minutes in TIR's simplifier while tuning MobileNet-v2.  A
    forked child needs no re-import, and a candidate that hangs or crashes becomes
    a failed build, which the search skips.
    """

    def __init__(self, timeout_s: float = 30.0, jobs: int | None = None) -> None:
        super().__init__()
        self.timeout_s = float(timeout_s)
        self.jobs = jobs or available_cores()

    def build(self, build_inputs):
        # default_build imports this on its first call (30 s of TVMScript parsing):
        # import it here once, or every child would repeat it
        import tvm.s_tir.tensor_intrin  # noqa: F401

        ctx = multiprocessing.get_context("fork")
        results: list[BuilderResult | None] = [None] * len(build_inputs)
        queue = list(enumerate(build_inputs))[::-1]
        running: dict = {}  # read end of the pipe -> (index, process, deadline)
        while queue or running:
            while queue and len(running) < self.jobs:
                i, inp = queue.pop()
                read, write = ctx.Pipe(duplex=False)
                child = ctx.Process(target=_build_in_child, args=(inp, write), daemon=True)
                child.start()
                write.close()
                running[read] = (i, child, time.monotonic() + self.timeout_s)
            first_deadline = min(deadline for _, _, deadline in running.values())
            for read in wait(list(running), timeout=max(0.0, first_deadline - time.monotonic())):
                i, child, _ = running.pop(read)
                try:
                    path, err = read.recv()
                except EOFError:  # the child died before answering (a crash in the compiler)
                    path, err = None, None
                child.join()
                if path is None and err is None:
                    err = f"the build process died (exit code {child.exitcode})"
                read.close()
                results[i] = BuilderResult(path, None if err is None else f"ForkedBuilder: {err}")
            now = time.monotonic()
            for read, (i, child, deadline) in list(running.items()):
                if deadline <= now:
                    child.kill()
                    child.join()
                    read.close()
                    del running[read]
                    log.warning("a tuning candidate took over %.0f s to build; skipped", self.timeout_s)
                    results[i] = BuilderResult(None, f"ForkedBuilder: build timed out after {self.timeout_s:.0f} s")
        return results


def default_builder(timeout_s: float = 30.0, target: Any = None) -> PyBuilder:
    """The forked builder where the platform forks safely (Linux), else the in-process one.

    CUDA candidates are built in-process: on a machine with a GPU, TVM's build of a CUDA
    kernel calls into CUDA (the compile callback asks the device for its architecture), and
    a child forked from a process that has used CUDA cannot (on the lent H100 every forked
    build failed with ``cudaErrorInitializationError``; built in-process, all 16 candidates
    of a conv ran, ``benchmarks/results/cuda-ms-probe.json``)."""
    kind = None if target is None else tuning_target(target).kind.name
    if kind != "cuda" and sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return ForkedBuilder(timeout_s)
    return InProcessBuilder()


def _alloc(info, device, fill):
    """Random floats; random 0s and 1s for masks (``MASK_DTYPES``: a ``where`` runs both
    of its branches); zeros for wider integers, which are often indices (random ones would
    read out of bounds and crash this process, as ``take`` in fast mode does)."""
    _, dtype, shape = info
    arr = tvm.runtime.empty(shape=shape, dtype=dtype, device=device)
    if dtype in MASK_DTYPES:
        arr.copyfrom(np.random.default_rng(0).integers(0, 2, size=shape).astype(dtype))
    elif "int" in dtype:
        arr.copyfrom(np.zeros(shape, dtype=dtype))
    else:
        fill(arr)
    return arr


def _random_fill():
    return tvm.get_global_func("tvm.contrib.random.random_fill", True)


def random_args(args_info, device, fill=None) -> list:
    """Arrays for a kernel's arguments (MetaSchedule's ``ArgInfo``s) on ``device``, as the
    tuning runner makes them (``_alloc``); ``fill``: the random fill to use (here: TVM's)."""
    fill = fill or _random_fill()
    return [_alloc(info.as_json(), device, fill) for info in args_info]


# How a candidate is timed while tuning.  WARM, MetaSchedule's usual way: the kernel runs
# again and again on the same arrays, so its weights stay in the CPU's caches.  COLD: every
# argument but the first (the data a producer has just written) is flushed from the caches
# before each timed run, as a model's weights are when a kernel's turn comes (each is read
# once per inference, and the weights of a model outgrow the caches).  A schedule that is
# fast warm can be slow cold: in ResNet-50 on Zen 5, 32 trials, the best warm schedule of a
# Winograd batched matmul (36 x 16x256 @ 256x256) ran 245 us warm and 880 us cold; the best
# cold one 263 us cold (benchmarks/results/cold-kernels-llvm-znver5-resnet50.md).  Cold
# timing is for CPU targets only.
WARM_EVALUATOR = EvaluatorConfig(number=3, repeat=1, min_repeat_ms=40)
COLD_EVALUATOR = EvaluatorConfig(number=1, repeat=10, min_repeat_ms=0, enable_cpu_cache_flush=True)


@derived_object
class InProcessRunner(PyRunner):
    """Times each candidate with ``time_evaluator``, here or on an RPC device."""

    def __init__(self, evaluator: EvaluatorConfig | None = None, rpc: RPCDevice | None = None) -> None:
        super().__init__()
        self.evaluator = EvaluatorConfig._normalized(evaluator or WARM_EVALUATOR)
        self.rpc = rpc

    def run(self, runner_inputs):
        futures = []
        for inp in runner_inputs:
            try:
                futures.append(LocalRunnerFuture(res=self._time(inp), error_message=None))
            except Exception as err:  # a candidate that fails to run is a tuning result
                log.debug("candidate failed to run: %s", err)
                futures.append(
                    LocalRunnerFuture(res=None, error_message=f"InProcessRunner: {type(err).__name__}: {err}")
                )
        return futures

    def _time(self, inp) -> list[float]:
        if self.rpc is None:
            rt_mod = tvm.runtime.load_module(inp.artifact_path)
            device = tvm.runtime.device(inp.device_type, 0)
            fill = _random_fill()
        else:
            session = self.rpc.connect()
            session.upload(inp.artifact_path)
            rt_mod = session.load_module(os.path.basename(inp.artifact_path))
            device = session.device(inp.device_type, 0)
            fill = session.get_function("tvm.contrib.random.random_fill")
        args = random_args(inp.args_info, device, fill)
        return [float(c) for c in run_evaluator_common(rt_mod, device, self.evaluator, [args])]


# ---------------------------------------------------------------- tuning


def fuse_for_tuning(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """The fused TIR that the tuned build will schedule: the build's own library dispatch and
    legalization phase (``legalize_passes``) without the default schedules (dlight on CUDA),
    so that every kernel tuned is one the build looks up."""
    dispatch = list(pipeline_phases(target).library_dispatch_passes(target))
    passes = [p for p in legalize_passes(target) if p.info.name != "ApplyDefaultSchedule"]
    with target, tvm.transform.PassContext(opt_level=3):
        return tvm.transform.Sequential(dispatch + passes)(mod)


# seconds per candidate, building and timing, on 2 cores (small models' kernels, 64 trials,
# population 128: 0.8-1.3 s on the 2-core EPYC and Xeon VMs): the estimate a tuning run prints
# until a run in its work dir has measured the pace there (full-size kernels timed cold on the
# 2-core Zen 3: 2-3 s)
SECONDS_PER_TRIAL = 1.0


def _estimate(work_dir, trials: int) -> str:
    """How long ``trials`` will take, and from what: the work dir's last measured pace, else
    ``SECONDS_PER_TRIAL`` scaled to the cores at hand."""
    cores = available_cores()
    pace = read_pace(work_dir)
    if pace is not None:
        return f"about {trials * pace / 60:.0f} min at this work dir's last pace ({pace:.1f} s per trial)"
    return f"about {trials * SECONDS_PER_TRIAL * 2 / cores / 60:.0f} min on {cores} cores"


def _task_key(task) -> str:
    return f"{task.task_name}-{kernel_hash(task.dispatched[0])}"


def _tuned_trials(database: ms.Database, task_mod: tvm.IRModule) -> int:
    return len(tuned_records(database, task_mod))


@derived_object
class _Progress(ms.measure_callback.PyMeasureCallback):
    """Moves a tqdm bar by the candidates measured: the tuning shows where it is."""

    def __init__(self, bar) -> None:
        self.bar = bar

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
        self.bar.update(len(runner_results))


def import_tensor_intrinsics() -> None:
    """Import MetaSchedule's tensor intrinsics (its first TuneContext does) in a tenth of the time.

    The module parses about 250 TVMScript functions, and each parse calls ``inspect.stack()``,
    which looks up the module of every frame on the stack. The frames of frozen modules, the
    import machinery's among them, name no real file (``<frozen importlib._bootstrap>``), so
    each lookup scanned all of ``sys.modules`` (2,000+ with TVM loaded): 110-125 s on a
    2-core Zen 3 with a tuning running beside it, 12-14 s once ``inspect`` knows which
    modules those names are. ``inspect`` answers as before (a frozen module has no source)."""
    if "tvm.s_tir.tensor_intrin" not in sys.modules:
        name_frozen_import_frames()
        import tvm.s_tir.tensor_intrin  # noqa: F401


def name_frozen_import_frames() -> None:
    """Tell ``inspect`` which modules the frames of frozen modules (the import machinery's,
    and ``runpy``'s under ``python -m``) belong to: their code names ``<frozen NAME>``."""
    import inspect

    for name, module in list(sys.modules.items()):
        if getattr(getattr(module, "__spec__", None), "origin", None) == "frozen":
            inspect.modulesbyfile.setdefault(f"<frozen {module.__name__}>", name)


# The evolutionary search's population for a kernel without a reduction (a layout copy, an
# element-wise op): its schedules differ only in how its loops are parallelised, vectorised and
# unrolled, two or three distinct ones that 64 samples find as well as 512.  Each search samples
# and evolves its whole population, and MetaSchedule searches 5 more times after the last new
# schedule before it gives up on a kernel: for Inception-v3's 20 fused NCHW16c copies (Zen 3,
# 2026-12-06) a search took 30 s to 4 min at 512, and an hour went by with 20 of the 600 trials
# planned measured; at 64 the whole tuning ended in 10 min, with three schedules each.
INJECTIVE_POPULATION = 64


def search_population(kernel: tvm.IRModule, population: int) -> int:
    """The population to search ``kernel``'s schedules with: ``population``, or at most
    ``INJECTIVE_POPULATION`` where no block of it reduces (a kernel it cannot read: ``population``)."""
    from tvm.s_tir import Schedule

    try:
        sch = Schedule(kernel)
        blocks = sch.get_child_blocks(sch.get_sblock("root"))
        reduces = any(int(iv.iter_type) != 0 for b in blocks for iv in sch.get(b).iter_vars)
    except Exception:  # a form this cannot read gets the full search
        return population
    return population if reduces else min(population, INJECTIVE_POPULATION)


def _tune_contexts(tasks, num_threads: int, seed: int, population: int = 512, database: ms.Database | None = None):
    """TuneContexts logging to ``tvm_eqsat.meta_schedule`` (MetaSchedule's own per-task
    file loggers break on a second call in a process that has other log handlers).

    A kernel ``database`` already holds is tuned in the form it holds: MetaSchedule files
    structurally equal kernels under one workload, but a trace names blocks, and a reduction's
    block is named after its input variable (``lv415_red`` in one variant of Inception-v3,
    ``lv448_red`` in another), so records traced on the other form could not be replayed on the stored one."""
    from tvm.s_tir.meta_schedule.utils import fork_seed

    import_tensor_intrinsics()

    logger = logging.getLogger("tvm_eqsat.meta_schedule")
    contexts, weights = [], []
    for task, rand_state in zip(tasks, fork_seed(seed, n=len(tasks))):
        kernel = task.dispatched[0] if database is None else stored_form(database, task.dispatched[0])
        contexts.append(
            ms.TuneContext(
                mod=kernel,
                target=task.target,
                space_generator="post-order-apply",
                search_strategy=ms.search_strategy.EvolutionarySearch(
                    population_size=search_population(kernel, population)
                ),
                task_name=task.task_name,
                logger=logger,
                rand_state=rand_state,
                num_threads=num_threads,
            ).clone()
        )
        weights.append(float(task.weight))
    return contexts, weights


def _pending(
    mod: tvm.IRModule, target: Any, work_dir: str | os.PathLike, trials: int, database: ms.Database
) -> tuple[list[tuple[Any, int]], int]:
    """The fused kernels of ``mod`` tuned with fewer than ``trials``, each with the trials it
    has had (its recorded budget, or its records where a run was interrupted), and how many
    kernels ``mod`` has."""
    target = tuning_target(target)
    tasks = ms.relax_integration.extract_tasks(fuse_for_tuning(mod, target), target)
    budgets = budgets_by_hash(work_dir)
    pending = []
    for task in tasks:
        spent = budgets.get(kernel_hash(task.dispatched[0]), 0)
        if spent < trials:
            spent = max(spent, _tuned_trials(database, task.dispatched[0]))
        if spent < trials:
            pending.append((task, spent))
    return pending, len(tasks)


def pending_tasks(
    mod: tvm.IRModule, target: Any, work_dir: str | os.PathLike, trials: int, database: ms.Database | None = None
) -> tuple[list, int]:
    """The fused kernels of ``mod`` that ``work_dir`` has not tuned with ``trials`` (what
    ``tune`` would tune), and how many kernels ``mod`` has."""
    database = database if database is not None else open_database(work_dir)
    pending, n_tasks = _pending(mod, target, work_dir, trials, database)
    return [task for task, _ in pending], n_tasks


def tune(
    mod: tvm.IRModule,
    target: Any,
    work_dir: str | os.PathLike,
    trials: int = 64,
    *,
    trials_per_iter: int = 16,
    rpc: RPCDevice | None = None,
    seed: int = 0,
    build_timeout_s: float = 30.0,
    population: int = 512,
    progress: bool = False,
    cold_cache: bool = False,
) -> ms.Database:
    """Tune every fused kernel of ``mod`` with ``trials`` candidates each.

    Kernels already tuned with at least ``trials`` (records in the database, or a
    recorded budget for kernels with fewer possible schedules) are skipped, so
    re-running with the same budget is free; a kernel tuned with fewer (a smaller budget,
    or a run that was interrupted) gets only the trials it lacks.
    A candidate whose compilation takes over ``build_timeout_s`` is skipped.
    ``population`` is the evolutionary search's population (MetaSchedule's default, 512).
    ``progress`` shows a bar of the trials measured, with the time left.
    ``cold_cache`` (CPU targets): time candidates with their weights flushed from the caches
    (``COLD_EVALUATOR``), as they are in a model; a database holds one kind (``claim_cache``).
    """
    use_all_cores()
    target = tuning_target(target)
    if cold_cache and target.kind.name != "llvm":
        raise ValueError(
            f"cold_cache times kernels with the CPU's caches flushed: for llvm targets, not {target.kind.name}"
        )
    claim_cache(work_dir, "cold" if cold_cache else "warm")
    drop_zero_mask_records(work_dir)
    database = open_database(work_dir)
    pending, n_tasks = _pending(mod, target, work_dir, trials, database)
    if not pending:
        log.info("tuning 0 of %d kernels: all tuned with %d trials", n_tasks, trials)
        return database
    # a kernel tuned before keeps its trials (the search starts from the database's best
    # schedules) and gets only the ones it lacks, in one MetaSchedule run per count
    groups: dict[int, list] = {}
    for task, spent in pending:
        groups.setdefault(trials - spent, []).append(task)
    todo = [task for task, _ in pending]
    total = sum(left * len(group) for left, group in groups.items())
    log.info("tuning %d of %d kernels, %d trials in all", len(todo), n_tasks, total)
    evaluator = COLD_EVALUATOR if cold_cache else WARM_EVALUATOR
    callbacks = ms.measure_callback.MeasureCallback.create("default")
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=total, desc=f"tuning {len(todo)} kernels", unit="trial", file=sys.stderr, leave=False)
        bar.write(
            f"tuning {len(todo)} of {n_tasks} kernels that {work_dir} lacks, {total} trials to reach {trials} each: "
            f"{_estimate(work_dir, total)}",
            file=sys.stderr,
        )
        callbacks = [*callbacks, _Progress(bar)]
    records_before = len(database)
    started = time.monotonic()
    try:
        for left, group in sorted(groups.items()):
            contexts, weights = _tune_contexts(group, available_cores(), seed, population, database)
            ms.tune_tasks(
                tasks=contexts,
                task_weights=weights,
                work_dir=str(work_dir),
                max_trials_global=left * len(group),
                max_trials_per_task=left,
                num_trials_per_iter=min(trials_per_iter, left),
                builder=default_builder(build_timeout_s, target),
                runner=InProcessRunner(evaluator, rpc),
                database=database,
                measure_callbacks=callbacks,
                task_scheduler="round-robin",
            )
    finally:
        if bar is not None:
            bar.close()
    measured = len(database) - records_before
    write_pace(work_dir, time.monotonic() - started, measured)
    if measured < total:  # the bar stops short of its end: say why, not leave it looking cut off
        log.info(
            "measured %d of the %d trials planned: kernels with fewer distinct schedules than %d "
            "(element-wise ones often have one or two) stop when their search finds nothing new",
            measured,
            total,
            trials,
        )
    # kernels with fewer schedules than ``trials`` never fill the database: remember the budget
    budgets = read_budgets(work_dir)
    budgets.update({_task_key(t): max(trials, budgets.get(_task_key(t), 0)) for t in todo})
    write_budgets(work_dir, budgets)
    return database


def build(mod: tvm.IRModule, target: Any, database: ms.Database | None = None):
    """Compile with the tuned kernels of ``database``, or with the stock pipeline if None.

    On CUDA the kernels the database lacks keep the stock pipeline's dlight schedules
    (``default_pipeline``); on CPU MetaSchedule's own ``compile_relax`` builds them."""
    tgt = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    if database is None or tgt.kind.name == "cuda":
        with tgt:  # the CUDA compile callback reads the architecture from the current target
            pipeline = relax.get_default_pipeline(tgt) if database is None else default_pipeline(tgt, database)
            return tvm.compile(mod, target=tgt, relax_pipeline=pipeline)
    return ms.relax_integration.compile_relax(database, mod, tuning_target(tgt), params=None)


def pipeline_phases(target: tvm.target.Target):
    """The target's default Relax pipeline as its four phases (the module that holds them)."""
    from tvm.relax.backend import cpu_generic, cuda

    return {"cuda": cuda.pipeline, "llvm": cpu_generic.pipeline}[target.kind.name]


def legalize_passes(target: tvm.target.Target, database: ms.Database | None = None) -> list:
    """The target's legalization phase; with ``database``, its kernels are applied after
    fusion and before the target's default schedules (dlight on CUDA), which then
    schedule only the kernels the database has no record of."""
    passes = list(pipeline_phases(target).legalize_passes(target))
    if database is None:
        return passes
    at = next((i for i, p in enumerate(passes) if p.info.name == "ApplyDefaultSchedule"), len(passes))
    with target:  # the pass reads the current target when it is made
        apply = relax.transform.MetaScheduleApplyDatabase(enable_warning=False)
    return passes[:at] + [apply] + passes[at:]


def default_pipeline(target: tvm.target.Target, database: ms.Database | None = None, after_legalize=None):
    """The target's default pipeline, with ``database``'s kernels where it has them
    (``legalize_passes``); ``after_legalize(mod) -> mod`` runs between legalization
    (fusion, constant folding, schedules) and lowering, as the bundle's weight lifting does."""
    phases = pipeline_phases(target)

    @tvm.transform.module_pass(opt_level=0)
    def pipeline(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        with target:
            with database if database is not None else contextlib.nullcontext():
                mod = tvm.transform.Sequential(
                    phases.library_dispatch_passes(target) + legalize_passes(target, database)
                )(mod)
            if after_legalize is not None:
                mod = after_legalize(mod)
            return tvm.transform.Sequential(phases.dataflow_lower_passes(target) + phases.finalize_passes(target))(mod)

    return pipeline


def scratch_dir(prefix: str = "tvm_eqsat_tune_") -> str:
    return tempfile.mkdtemp(prefix=prefix)
