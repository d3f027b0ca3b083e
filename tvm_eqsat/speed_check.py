"""The measured safeguard (``speed_check=True``): keep a rewrite only if its build is faster.

The cost model predicts kernels one at a time; a rewritten graph also changes what
FuseOps groups, what stays in cache and how many calls the VM makes, which no
per-node cost sees.  So, on request, both modules are built with the flow the pass
costs for (``default``: the stock pipeline; ``tuned``: MetaSchedule into one database,
so kernels they share are tuned once, and a later build with that database is cheap)
and timed on this machine's device in interleaved rounds (``timing``).  The rewrite
stays only if its median is at least ``SPEED_MARGIN`` faster: a gain smaller than
the noise is not worth a changed module; and only if its build's outputs are the
original build's (``verify.WRONG_REL``): the pass validates its rewrites untuned, and a
tuned build can still be miscompiled (a layout copy of Inception-v3's, once MetaSchedule
had fused its loops, by LLVM's loop vectorizer in AVX2 code, 2026-12-06).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import tvm

from . import timing, tune
from .verify import _flatten, output_diffs, random_inputs, wrong_outputs

log = logging.getLogger("tvm_eqsat")

SPEED_MARGIN = 0.01  # the rewrite must be this much faster (median) to be kept: about the noise here
ROUNDS = 20
MIN_MS = 5.0  # each sample runs the module until it lasts this long


@dataclass
class SpeedCheck:
    before_ms: float | None = None
    after_ms: float | None = None
    kept: bool = True  # the rewrite survives (also when the check could not run)
    seconds: float = 0.0
    reason: str = ""  # why the check did not run, if it did not
    max_rel_diff: float | None = None  # the builds' outputs apart, relative to their scale

    @property
    def speedup(self) -> float | None:
        return self.before_ms / self.after_ms if self.before_ms and self.after_ms else None

    def to_dict(self) -> dict:
        return {**asdict(self), "speedup": self.speedup}


def default_tune_dir(target: tvm.target.Target) -> str:
    """Where the check keeps its MetaSchedule database when the user names none."""
    return str(Path.home() / ".cache" / "tvm_eqsat" / f"speed-check-{target.kind.name}")


def _device(target: tvm.target.Target):
    dev = tvm.cpu(0) if target.kind.name == "llvm" else tvm.device(target.kind.name, 0)
    if not dev.exist:
        raise RuntimeError(f"no {target.kind.name} device on this machine to time on")
    return dev


def _build(mod: tvm.IRModule, target: tvm.target.Target, flow: str, tune_dir: str, trials: int):
    if flow == "tuned":
        return tune.build(mod, target, tune.tune(mod, target, tune_dir, trials))
    return tune.build(mod, target, None)


def check(
    before: tvm.IRModule,
    after: tvm.IRModule,
    target: tvm.target.Target,
    flow: str,
    *,
    tune_dir: str | None = None,
    trials: int = 16,
    rounds: int = ROUNDS,
    min_ms: float = MIN_MS,
    margin: float = SPEED_MARGIN,
) -> SpeedCheck:
    """Time ``before`` and ``after`` (their ``main``, on random inputs) as ``flow`` builds
    them; ``kept`` says whether ``after`` is worth it.  A check that cannot run (no
    ``main``, symbolic shapes, no device, a failed build) keeps the rewrite and says why."""
    start = time.perf_counter()
    result = SpeedCheck()
    try:
        if "main" not in [gv.name_hint for gv in before.get_global_vars()]:
            raise RuntimeError("the module has no 'main' to time")
        try:
            inputs = random_inputs(before["main"])
        except (AttributeError, TypeError, ValueError) as err:
            raise RuntimeError(f"cannot make inputs for 'main' (symbolic or non-tensor parameters): {err}") from err
        dev = _device(target)
        tune_dir = tune_dir or default_tune_dir(target)
        samplers, outputs = {}, {}
        for name, mod in (("before", before), ("after", after)):
            vm, args, samplers[name], _ = timing.tvm_sampler(
                _build(mod, target, flow, tune_dir, trials), dev, inputs, min_ms
            )
            outputs[name] = _flatten(vm["main"](*args))
        result.max_rel_diff = output_diffs(outputs["before"], outputs["after"])[1]
        times = timing.time_interleaved(samplers, rounds)
        result.before_ms, result.after_ms = (float(np.median(times[k])) for k in ("before", "after"))
        wrong = bool(wrong_outputs({"after": result.max_rel_diff}))
        result.kept = result.after_ms * (1.0 + margin) <= result.before_ms and not wrong
        if wrong:
            log.warning(
                "speed check: the rewrite's build computes other outputs than the original's (%.2g of their "
                "scale apart): rejected, module left unchanged",
                result.max_rel_diff,
            )
    except Exception as err:  # the check is advice: it must never break the user's build
        result.reason = f"{type(err).__name__}: {str(err).strip().splitlines()[0][:300] if str(err).strip() else ''}"
        log.warning("speed check did not run, rewrite kept: %s", result.reason)
    result.seconds = time.perf_counter() - start
    return result


def describe(result: SpeedCheck | dict) -> str:
    """One line for logs and reports; takes a ``SpeedCheck`` or its ``to_dict()`` (as ``Report`` keeps it)."""
    c = result.to_dict() if isinstance(result, SpeedCheck) else result
    if c["reason"]:
        return f"speed check did not run ({c['reason']})"
    wrong = c.get("max_rel_diff") is not None and wrong_outputs({"after": c["max_rel_diff"]})
    verdict = (
        "kept"
        if c["kept"]
        else f"rejected, outputs differ ({c['max_rel_diff']:.2g}), module left unchanged"
        if wrong
        else "rejected, module left unchanged"
    )
    return f"speed check: {c['before_ms']:.4g} ms -> {c['after_ms']:.4g} ms ({c['speedup']:.3f}x), {verdict}"
