"""Latency of whole executables, compared fairly: each sample repeats the run until it
lasts ``min_ms``, and variants are sampled in interleaved rounds whose order rotates,
so machine drift hits all of them alike (the benchmark and the pass's speed check)."""

from __future__ import annotations

import math
from typing import Any, Callable

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
