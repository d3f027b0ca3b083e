"""Latency of whole executables, compared fairly: each sample repeats the run until it
lasts ``min_ms``, and variants are sampled in interleaved rounds whose order rotates,
so machine drift hits all of them alike (the benchmark and the pass's speed check).
``kernel_times`` splits one executable's run by the functions it calls, to see where
two builds differ."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import tvm
from tvm import relax


def calibrated(sample_once: Callable[[int], float], min_ms: float) -> tuple[Callable[[], float], int]:
    """A sampler that runs the model ``number`` times per sample (mean ms per run) so that a
    sample lasts at least ``min_ms``; ``number`` from the fastest of three probe runs."""
    one = min(sample_once(1) for _ in range(3))
    number = max(1, math.ceil(min_ms / max(one, 1e-4)))
    return (lambda: sample_once(number)), number


def tvm_sampler(ex, dev, inputs: list[np.ndarray], min_ms: float):
    """(VM, args, sampler, number) for one executable; the first run is the warm-up."""
    vm = relax.VirtualMachine(ex, dev)
    args = [tvm.runtime.tensor(x, dev) for x in inputs]
    vm["main"](*args)
    evaluators: dict[int, Any] = {}

    def sample(number: int) -> float:
        if number not in evaluators:
            evaluators[number] = vm.time_evaluator("main", dev, number=number, repeat=1)
        return evaluators[number](*args).mean * 1e3

    sampler, number = calibrated(sample, min_ms)
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
    executables: dict[str, Any], dev, inputs: list[np.ndarray], rounds: int = 5, runs: int = 10
) -> dict[str, dict[str, float]]:
    """Per executable, the microseconds per run of ``main`` spent in each function the VM
    calls (kernels and builtins), from the VM's call instrumentation: per round, the median
    call time times the calls per run; the median over ``rounds`` rounds that alternate
    between the executables (like ``time_interleaved``), so drift hits them alike.  For
    finding which kernels two builds differ in; host timers around each call, so small
    kernels carry a little call overhead."""
    import time

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
                vm["main"](*args)
            for name, ts in calls.items():
                per_round[label].setdefault(name, []).append(float(np.median(ts)) * len(ts) / runs)
    return {label: {name: float(np.median(v)) for name, v in names.items()} for label, names in per_round.items()}
