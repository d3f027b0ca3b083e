"""Latency of whole executables, compared fairly: each sample repeats the run until it
lasts ``min_ms``, and variants are sampled in interleaved rounds whose order rotates,
so machine drift hits all of them alike (the benchmark and the pass's speed check).
``kernel_times`` splits one executable's run by the functions it calls, to see where
two builds differ.  ``cold=True`` evicts the CPU caches before each run: a layer run again
and again keeps its weights in cache, where in a model each weight is read once per inference."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tvm
from tvm import relax


def calibrated(
    sample_once: Callable[[int], float], min_ms: float, max_number: int | None = None
) -> tuple[Callable[[], float], int]:
    """A sampler that runs the model ``number`` times per sample (mean ms per run) so that a
    sample lasts at least ``min_ms`` (at most ``max_number`` runs); ``number`` from the
    fastest of three probe runs."""
    one = min(sample_once(1) for _ in range(3))
    number = max(1, math.ceil(min_ms / max(one, 1e-4)))
    number = min(number, max_number) if max_number else number
    return (lambda: sample_once(number)), number


COLD_MAX_RUNS = 20  # cold runs per sample: each costs an eviction, and one run is timed alone
_evictor: list = []  # (compiled kernel, its buffer), made on first use


def last_level_cache_bytes() -> int:
    """The largest CPU cache of this machine (sysfs), 64 MiB where Linux does not say."""
    sizes = []
    for path in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = path.read_text().strip()
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * scale)
    return max(sizes, default=64 << 20)


def _touch_kernel():
    """A TIR kernel adding one to every element of a buffer, its loop split across TVM's
    thread pool, so that each core's private caches are replaced, not only the caller's."""
    from tvm.script import tirx as T

    @T.prim_func
    def touch(a: T.handle):
        T.func_attr({"global_symbol": "touch", "tir.noalias": True})
        n = T.int64()
        A = T.match_buffer(a, (n,), "int64")
        for i in T.parallel(n):
            A[i] = A[i] + T.int64(1)

    return tvm.compile(tvm.IRModule({"touch": touch}), target="llvm")["touch"]


def evict_caches() -> None:
    """Read and write a buffer twice the size of the last-level cache on every thread of TVM's
    pool, so whatever a run touched before (weights included: constants of a VM function that
    no argument flush reaches) comes from memory in the next."""
    if not _evictor:
        _evictor.extend([_touch_kernel(), tvm.runtime.tensor(np.zeros(2 * last_level_cache_bytes() // 8, "int64"))])
    kernel, buffer = _evictor
    kernel(buffer)


def tvm_sampler(ex, dev, inputs: list[np.ndarray], min_ms: float, cold: bool = False):
    """(VM, args, sampler, number) for one executable; the first run is the warm-up.  A warm
    sample is the mean of ``number`` back-to-back runs lasting ``min_ms`` (TVM's time
    evaluator); a cold one (``cold``, CPU only) the mean of ``number`` runs (at most
    ``COLD_MAX_RUNS``), each timed alone by the host clock after ``evict_caches``, which is
    not timed.  (Not TVM's evaluator with a Python ``f_preproc`` hook: on a 2-core VM, idle,
    that timed a 0.25 ms run at 3.6 ms, even with a hook that did nothing.)"""
    if cold and dev.dlpack_device_type() != tvm.cpu().dlpack_device_type():
        raise ValueError("cold timing evicts CPU caches; it has no meaning on a GPU")
    vm = relax.VirtualMachine(ex, dev)
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    main = vm["main"]
    main(*args)
    evaluators: dict[int, Any] = {}

    def sample_cold(number: int) -> float:
        total = 0.0
        for _ in range(number):
            evict_caches()
            start = time.perf_counter()
            main(*args)
            total += time.perf_counter() - start
        return total / number * 1e3

    def sample(number: int) -> float:
        if number not in evaluators:
            evaluators[number] = vm.time_evaluator("main", dev, number=number, repeat=1)
        return evaluators[number](*args).mean * 1e3

    sampler, number = calibrated(sample_cold if cold else sample, min_ms, COLD_MAX_RUNS if cold else None)
    return vm, args, sampler, number


def time_interleaved(samplers: dict[str, Callable[[], float]], repeat: int) -> dict[str, list[float]]:
    """``repeat`` rounds, each sampling every variant once, the order rotating by one per round;
    one discarded round first."""
    names = list(samplers)
    for n in names:
        samplers[n]()
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeat):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            out[n].append(samplers[n]())
    return out


def kernel_times(
    executables: dict[str, Any], dev, inputs: list[np.ndarray], rounds: int = 5, runs: int = 10, cold: bool = False
) -> dict[str, dict[str, float]]:
    """Per executable, the microseconds per run of ``main`` spent in each function the VM
    calls (kernels and builtins), from the VM's call instrumentation: per round, the median
    call time times the calls per run; the median over ``rounds`` rounds that alternate
    between the executables (like ``time_interleaved``), so drift hits them alike.  For
    finding which kernels two builds differ in; host timers around each call, so small
    kernels carry a little call overhead.  ``cold``: the caches are evicted before each run."""

    started: dict[str, float] = {}
    calls: dict[str, list[float]] = {}

    def instrument(func, name, before_run, ret_value, *call_args):
        if before_run:
            started[name] = time.perf_counter()
        else:
            calls.setdefault(name, []).append((time.perf_counter() - started[name]) * 1e6)
        return relax.VMInstrumentReturnKind.NO_OP

    vms = {}
    for label, ex in executables.items():
        vm = relax.VirtualMachine(ex, dev)
        args = [tvm.runtime.tensor(x, dev) for x in inputs]
        vm["main"](*args)  # warm-up, uninstrumented
        vm.set_instrument(instrument)
        vms[label] = (vm, args)
    per_round: dict[str, dict[str, list[float]]] = {label: {} for label in executables}
    labels = list(executables)
    for r in range(rounds):
        k = r % len(labels)
        for label in labels[k:] + labels[:k]:
            vm, args = vms[label]
            calls.clear()
            for _ in range(runs):
                if cold:
                    evict_caches()
                vm["main"](*args)
            for name, ts in calls.items():
                per_round[label].setdefault(name, []).append(float(np.median(ts)) * len(ts) / runs)
    return {label: {name: float(np.median(v)) for name, v in names.items()} for label, names in per_round.items()}
