"""End-to-end benchmark: the strongest stock TVM against tvm-eqsat, per model.

For each model and target these variants are built and timed against each other:

* ``stock``      the module as imported, then ``relax.get_default_pipeline(target)``;
* ``stock+cpm``  ``relax.transform.CombineParallelMatmul()`` first (TVM's nearest built-in
                 graph rewrite), then the same build.  CPM only matches weights that are
                 function parameters and matmuls that read the very same variable, so it is
                 given the preparation TVM users give it: ``FoldConstant`` and
                 ``EliminateCommonSubexpr``, bound weights lifted to parameters for the pass
                 and bound back after it;
* ``stock+tvm``  TVM's graph-level passes for inference first (``TVM_PASSES``: batch-norm
                 folding, decomposition, constant folding, CSE, CPM, transposed-matmul fusion;
                 the row says which changed the model);
* ``stock+fast`` stock+tvm's passes, then ``FastMathTransform``: TVM's approximate exp,
                 erf, tanh and softmax (not exact, as the pass's ``erf_rational`` and
                 ``fast_math`` are not: the stock variant to beat where the pass approximates).
                 Asked for only (``--variants``), not by default: on full-size NASRNN,
                 whose fused cells nest tanh in tanh, MetaSchedule stalled for 16 min
                 before its first trial of two such kernels (2026-12-02, Zen 5);
* ``stock+nhwc`` ``ConvertLayout`` of every conv to NHWC (models with convolutions);
* ``stock-aa``   stock tuned again, independently (another seed, its own database): the
                 A/A control of the tuned flow;
* ``stock+nhwc-aa`` stock+nhwc tuned the same way (asked for only): the A/A control of the
                 NHWC kernels, where stock+nhwc is the variant to beat, and the second
                 tuning of each conv in NHWC that the cost model's NCHW/NHWC choice pairs
                 need for their measured ceiling (``train_cost_model.py --aa-database``);
* ``eqsat``      ``tvm_eqsat.optimize(mod, target)`` first (its report is recorded: pass
                 seconds, e-nodes, rules applied, predicted cost before/after), then the same build;
* ``eqsat+tvm``  TVM's graph passes, then the pass (a user who turns on both gets both).
* ``eqsat-learned``  the pass with ``--learned-model`` as its cost model (default ``xgb``, the
                 learned model shipped for the target) instead of ``--cost-model``: whether that
                 model chooses better end to end than the default, in the same run.  Asked for
                 only; never the headline's eqsat variant (``held_out_e2e.py --flow tuned`` times
                 a model trained without the model it rewrites this way).

A variant whose module is another's (stock+nhwc without convolutions, an A/A control untuned, a
rewrite that changed nothing) is neither built nor timed again: its row is that variant's,
marked in ``notes``.  The Markdown compares the fastest eqsat variant with the fastest stock
variant of each model and marks the speedups inside the model's noise floor (the p10-p90
half-spread of stock's samples; in the tuned flow also stock against stock-aa, and
stock+nhwc against stock+nhwc-aa where both were timed).

Flows: ``default`` builds with the stock pipeline (untuned loops on llvm, dlight on CUDA);
``tuned`` tunes every variant's kernels with MetaSchedule (same per-kernel trial budget for
all variants, one shared database in ``--work-dir`` so kernels common to the variants are
tuned once and reruns are cheap) and builds with the database.

Every variant runs on the model's (random) example inputs: its outputs are compared with
stock's (max abs / relative diff) and with PyTorch eager's where the model has a torch
source.  Latency comes from ``time_evaluator`` after a warm-up, the variants (and PyTorch
eager, as context) interleaved in rounds whose order rotates (A B C, B C A, ...), so that
machine drift hits all of them alike; each sample repeats the model until it lasts
``--min-ms``; the median, p10 and p90 of ``--repeat`` samples are reported.

``--speed-check`` runs the pass with its measured safeguard (``speed_check=True``: the
rewrite is kept only if its build times faster than the original's on this machine; the
check's building, tuning and timing count in the pass time).

On llvm, code is generated for this machine's CPU (``--mcpu``, default: the CPU as LLVM names
it, e.g. ``emeraldrapids``; its vector units, AVX-512 there): TVM's plain ``llvm`` target
compiles for generic x86-64 (SSE2), which is what ``--mcpu generic`` and every llvm result
before 2026-11-27 measured.  ``<target>`` below is then ``llvm-<cpu>`` (``llvm`` for generic
code), in the names of the results files and of the tuning databases: a kernel tuned for one
instruction set is not the other's.  Rows are never added to a results file timed on another CPU.

Results go to ``benchmarks/results/<target>-<flow>[-small][-checked][-<tag>].{csv,json,md,png}`` (or
``--out-dir``): one CSV row per model and variant, appended as each model finishes; models
whose rows are all there are skipped unless ``--force``.  A model that runs again (``--force``,
or a variant asked for that it lacks) has all its rows replaced by the new run's once they are
in, so an interrupted re-run loses nothing, and a model's variants are always timed in one
process (a variant added later is not set against rows timed in another).  A model that fails to import or
to build is logged and skipped.  The console shows progress (model, variant, phase, tuning
trials with the time left) and the results; what TVM's C++ code prints (thousands of
repeated warnings while MetaSchedule tunes) goes to ``<stem>.log`` beside the results.

The tuned flow starts from the committed databases in ``benchmarks/tuning/`` (the kernels we
measured, pruned to the best record each: ``scripts/export_tuning.py``; a longer tuning of
kernels the main database holds at a shorter budget is committed apart, as
``<target>-t<trials>[-aa]``), so their kernels are not tuned again at their budget
(``--no-seed`` to tune everything here).  ``--tune-only``
tunes every variant's kernels and stops (the long part, for a background job).

    python scripts/benchmark.py --quick                                  # small SqueezeNet, tuned (committed kernels, generic x86-64)
    python scripts/benchmark.py --small --flow default                   # ten small models, llvm
    python scripts/benchmark.py --small --flow tuned --trials 8 --models nasrnn bert-base
    python scripts/benchmark.py --small --flow tuned --trials 64 --tune-only --variants stock stock+tvm stock+nhwc stock-aa
    python scripts/benchmark.py --small --flow default --rules identities algebra merges layout conv matmul nhwc --tag nhwc
    python scripts/benchmark.py --flow tuned --trials 64                 # full-size suite (hours)
    python scripts/benchmark.py --target cuda --small --dry-run          # compile for sm_90 here (no GPU)
    python scripts/benchmark.py --target cuda --flow default --out-dir $OUT   # on the GPU machine
"""

from __future__ import annotations

import os

# PyTorch eager (timed as context) reads this when it starts its OpenMP pool: without it
# the idle OpenMP threads spin and steal the 2 cores from TVM's threads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import csv  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import logging  # noqa: E402
import math  # noqa: E402
import shlex  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any

import numpy as np  # noqa: E402
import tvm  # noqa: E402
from tqdm import tqdm  # noqa: E402
from tvm import relax  # noqa: E402

import tvm_eqsat  # noqa: E402
from tvm_eqsat import console, models, provenance, timing, tune, tuning_db  # noqa: E402
from tvm_eqsat.verify import WRONG_REL, output_diffs, wrong_outputs  # noqa: E402

log = logging.getLogger("benchmark")

ROOT = Path(__file__).resolve().parent.parent
MS_LOG_LEVEL = logging.WARNING  # MetaSchedule's console output; INFO with --verbose
STOCK_VARIANTS = ("stock", "stock+cpm", "stock+tvm", "stock+fast", "stock+nhwc", "stock-aa", "stock+nhwc-aa")
EQSAT_VARIANTS = ("eqsat", "eqsat+tvm")
# the pass with --learned-model instead of --cost-model: whether a learned model chooses better
# end to end than the default one, in the same run (an evaluation: never the headline's eqsat)
LEARNED = "eqsat-learned"
VARIANTS = (*STOCK_VARIANTS, *EQSAT_VARIANTS, LEARNED)
# the A/A controls: a variant tuned again (another seed, its own database), never a stock variant of its own
AA_VARIANTS = {"stock-aa": "stock", "stock+nhwc-aa": "stock+nhwc"}
DEFAULT_VARIANTS = tuple(v for v in VARIANTS if v not in ("stock+fast", "stock+nhwc-aa", LEARNED))  # see above
# TVM's own graph-level passes for an inference model with bound weights, in the order a
# user applies them: batch norms folded into convs before the rest are decomposed into
# element-wise ops, constants folded, common subexpressions merged, parallel matmuls
# combined (with the cpm variant's preparation), transposed matmuls fused
TVM_PASSES = (
    "FoldBatchnormToConv2D",
    "DecomposeOpsForInference",
    "FoldConstant",
    "EliminateCommonSubexpr",
    "CombineParallelMatmul",
    "FuseTransposeMatmul",
    "FoldConstant",
)
NHWC = {"relax.nn.conv2d": ["NHWC", "OHWI"]}  # stock+nhwc: TVM's ConvertLayout, every conv
# MetaSchedule's evolutionary population (--population): 128 instead of its 512 halves the
# search's time per round at no loss measured (4 kernels, 64 trials: 129 s instead of 274 s,
# kernel time 0.977x in geometric mean; benchmarks/results/ms-overhead-llvm.md)
POPULATION = 128
COLD_CACHE = False  # --cold-cache: kernels timed with their weights flushed from the caches while tuning
AA_SEED = 1  # the A/A controls (AA_VARIANTS): tuned again, independently (their own database, another seed)
FIELDS = [
    "model", "variant", "median_ms", "p10_ms", "p90_ms", "max_abs_diff", "pass_seconds",
    "max_rel_diff", "torch_max_rel_diff", "speedup_vs_stock", "predicted_speedup", "changed",
    "enodes", "rules_fired", "torch_ms", "trials", "build_seconds", "tune_seconds",
    "repeat", "number", "config", "notes", "sources", "module_hash", "changes",
]  # fmt: skip


# ---------------------------------------------------------------- variants


@dataclass
class Variant:
    """One rewritten module and what the rewrite did."""

    name: str
    mod: tvm.IRModule
    pass_seconds: float = 0.0
    changed: bool = False
    predicted_speedup: float | None = None
    enodes: int | None = None
    rules_fired: str = ""
    notes: str = ""  # why the pass stopped or left blocks alone
    changes: str = ""  # what the pass changed, in words (report.FunctionReport.changes)
    report: dict | None = None
    ex: Any = None  # the executable, once built
    build_seconds: float = 0.0
    tune_seconds: float = 0.0


def module_hash(mod: tvm.IRModule) -> str:
    """The module's structural hash (stable across processes): a later script can tell
    whether the pass still produces the module that was timed."""
    import tvm_ffi

    return format(tvm_ffi.structural_hash(mod) & (2**64 - 1), "016x")


def _count_op(mod: tvm.IRModule, op_name: str) -> int:
    n = 0
    for _, func in mod.functions.items():
        if isinstance(func, relax.Function) and isinstance(func.body, relax.SeqExpr):
            for block in func.body.blocks:
                for b in block.bindings:
                    v = b.value
                    n += isinstance(v, relax.Call) and getattr(v.op, "name", "") == op_name
    return n


@relax.expr_functor.mutator
class _LiftConstants(relax.expr_functor.PyExprMutator):
    """Bound tensor constants -> fresh variables (CombineParallelMatmul only merges weights
    that are variables; on a bound constant it stops with "Cannot treat ir.GenericConst as ir.Var")."""

    def __init__(self) -> None:
        super().__init__()
        self.lifted: list[tuple[relax.Var, Any]] = []

    def visit_generic_const_(self, op):
        data = op.value
        if len(data.shape) == 0:
            return op
        var = relax.Var(f"cpm_w{len(self.lifted)}", relax.TensorType(list(data.shape), str(data.dtype)))
        self.lifted.append((var, data))
        return var


def combine_parallel_matmul(mod: tvm.IRModule, target: tvm.target.Target) -> tvm.IRModule:
    """TVM's CombineParallelMatmul with its preparation (see the module docstring)."""
    with target, tvm.transform.PassContext(opt_level=3):
        mod = relax.transform.EliminateCommonSubexpr()(relax.transform.FoldConstant()(mod))
    out = mod.clone()
    for gv, func in mod.functions.items():
        if not isinstance(func, relax.Function) or func.attrs and "num_input" in func.attrs:
            continue
        lift = _LiftConstants()
        body = lift.visit_expr(func.body)
        if not lift.lifted:
            continue
        lifted = relax.Function(
            [*func.params, *(v for v, _ in lift.lifted)], body, func.ret_ty, func.is_pure, func.attrs
        )
        one = tvm.IRModule({gv: lifted.with_attr("num_input", len(func.params))})
        one = relax.transform.CombineParallelMatmul()(one)
        one = relax.transform.BindParams(gv.name_hint, dict(lift.lifted))(one)
        out[gv] = one[gv].without_attr("num_input")
    return out


def tvm_graph_passes(
    mod: tvm.IRModule, target: tvm.target.Target, passes: tuple[str, ...] = TVM_PASSES
) -> tuple[tvm.IRModule, list[str]]:
    """``passes`` (names in ``relax.transform``) in order: the module, and the passes that changed it."""
    import tvm_ffi

    applied = []
    for name in passes:
        if name == "CombineParallelMatmul":
            new = combine_parallel_matmul(mod, target)
        else:
            with target, tvm.transform.PassContext(opt_level=3):
                new = getattr(relax.transform, name)()(mod)
        if not tvm_ffi.structural_equal(new, mod):
            applied.append(name)
        mod = new
    return mod, applied


def _twin(v: Variant, built: dict[str, Variant], flow: str) -> str | None:
    """The variant already built whose executable ``v`` would be: stock-aa without
    tuning is stock; a variant whose rewrite changed nothing is what it started from
    (eqsat+tvm: stock+tvm when the pass changed nothing more, eqsat when TVM's passes did
    nothing)."""
    import tvm_ffi

    if v.name == "stock-aa":
        return "stock" if flow != "tuned" else None
    if v.name == "stock+nhwc-aa":  # untuned: stock+nhwc; no convolution to convert: stock-aa
        if flow != "tuned":
            return "stock+nhwc"
        return "stock-aa" if not v.changed and "stock-aa" in built else None
    if v.name == "stock+nhwc" and not v.changed:  # no convolution to convert
        return "stock"
    bases = {
        "stock+tvm": ("stock",),
        "stock+fast": ("stock+tvm", "stock"),
        "stock+nhwc": ("stock",),
        "stock+cpm": ("stock",),
        "eqsat": ("stock",),
        "eqsat+tvm": ("stock+tvm", "eqsat"),
        LEARNED: ("eqsat", "stock"),
    }.get(v.name, ())
    return next((b for b in bases if b in built and tvm_ffi.structural_equal(v.mod, built[b].mod)), None)


def make_variant(name: str, mod: tvm.IRModule, target: tvm.target.Target, eqsat_options: dict) -> Variant:
    """The module of one variant (before the build), with what its rewrite did;
    ``eqsat_options`` are the pass options of the eqsat variants.  ``eqsat+tvm`` runs
    TVM's graph passes first, then the pass (a user who turns on both gets both)."""
    if name in ("stock", "stock-aa"):
        return Variant(name, mod)
    t = time.perf_counter()
    if name == "stock+tvm":
        new, applied = tvm_graph_passes(mod, target)
        return Variant(name, new, time.perf_counter() - t, changed=bool(applied), rules_fired=";".join(applied))
    if name == "stock+fast":
        new, applied = tvm_graph_passes(mod, target, (*TVM_PASSES, "FastMathTransform"))
        return Variant(name, new, time.perf_counter() - t, changed=bool(applied), rules_fired=";".join(applied))
    if name in ("stock+nhwc", "stock+nhwc-aa"):
        with target, tvm.transform.PassContext(opt_level=3):
            new = relax.transform.ConvertLayout(NHWC)(mod)
        convs = _count_op(mod, "relax.nn.conv2d")
        return Variant(name, new, time.perf_counter() - t, changed=convs > 0, rules_fired=f"convs:{convs}")
    if name == "eqsat+tvm":
        first, applied = tvm_graph_passes(mod, target)
        v = make_variant("eqsat", first, target, eqsat_options)
        v.name, v.pass_seconds = name, time.perf_counter() - t
        v.changes = "; ".join([*(f"TVM: {p}" for p in applied), *([v.changes] if v.changes else [])])
        v.rules_fired = ";".join(applied + ([v.rules_fired] if v.rules_fired else []))
        return v
    if name == "stock+cpm":
        new = combine_parallel_matmul(mod, target)
        before, after = _count_op(mod, "relax.matmul"), _count_op(new, "relax.matmul")
        return Variant(
            name, new, time.perf_counter() - t, changed=after != before, rules_fired=f"matmuls:{before}->{after}"
        )
    if name in ("eqsat", LEARNED):
        new, report = tvm_eqsat.optimize(mod, target, **eqsat_options)
        if report.alarms:  # never a number from a run the pass itself flagged
            raise RuntimeError(f"{name}: the pass raised alarms: {'; '.join(report.alarms)}")
        fns = report.functions.values()
        rules: dict[str, int] = {}
        for f in fns:
            for rule, n in f.rules_applied.items():
                rules[rule] = rules.get(rule, 0) + n
        before, after = sum(f.cost_before for f in fns), sum(f.cost_after for f in fns)
        return Variant(
            name,
            new,
            report.seconds,
            changed=any(f.changed for f in fns),
            predicted_speedup=before / after if after > 0 else 1.0,
            enodes=sum(f.enodes for f in fns),
            rules_fired=";".join(f"{r}:{n}" for r, n in sorted(rules.items(), key=lambda kv: (-kv[1], kv[0]))),
            notes=" | ".join(s for f in fns for s in [f.stop_reason, *f.skipped] if s)[:500],
            changes="; ".join(c for f in fns for c in f.changes),
            report=report.to_dict(),
        )
    raise ValueError(f"unknown variant {name!r}")


# ---------------------------------------------------------------- building


def make_target(kind: str, arch: str, mcpu: str = "generic") -> tvm.target.Target:
    """llvm with ``num-cores`` (MetaSchedule needs it; the default flow ignores it) and
    ``mcpu`` unless 'generic' (then the target string of the committed databases), or CUDA."""
    if kind == "llvm":
        return tune.tuning_target(tune.llvm_target(mcpu))
    return tvm.target.Target({"kind": "cuda", "arch": arch})


def target_name(args) -> str:
    return tune.target_name(args.target, args.mcpu, args.cold_cache)


def default_work_dir(name: str) -> str:
    """The MetaSchedule database the benchmark tunes target ``name`` (``tune.target_name``) into
    when no ``--work-dir`` is given; the scripts that build with its kernels read it there."""
    return os.path.expanduser(f"~/.cache/tvm_eqsat/ms-{name}")


def tune_variant(v: Variant, target: tvm.target.Target, trials: int, work_dir: str, dry_run: bool = False):
    """Tune ``v.mod``'s kernels into the variant's database (an A/A control: its own, another seed)."""
    # MetaSchedule gives its console handler the level its logger has when tuning starts,
    # and leaves the logger at DEBUG afterwards: put ours back before every call.
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(MS_LOG_LEVEL)
    t = time.perf_counter()
    seed, where = (AA_SEED, f"{work_dir}-aa") if v.name in AA_VARIANTS else (0, work_dir)
    db = (
        tuning_db.open_database(where)
        if dry_run
        else tune.tune(
            v.mod, target, where, trials, seed=seed, population=POPULATION, progress=True, cold_cache=COLD_CACHE
        )
    )
    v.tune_seconds = time.perf_counter() - t
    return db


def build_variant(
    v: Variant, target: tvm.target.Target, flow: str, trials: int, work_dir: str, dry_run: bool = False
) -> None:
    """Compile ``v.mod`` with the flow (tuning first for ``tuned``, except in a dry run).
    An A/A control tunes into a database of its own with another seed: the tuning lottery."""
    db = tune_variant(v, target, trials, work_dir, dry_run) if flow == "tuned" else None
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        v.ex = tune.build(v.mod, target, db)
    v.build_seconds = time.perf_counter() - t


# ---------------------------------------------------------------- running and timing


def device_for(target: tvm.target.Target):
    return tvm.cpu(0) if target.kind.name == "llvm" else tvm.cuda(0)


def _flatten(value) -> list[np.ndarray]:
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return [a for v in value for a in _flatten(v)]
    return [value.numpy() if hasattr(value, "numpy") else np.asarray(value)]


def torch_sampler(model: models.Model, target: tvm.target.Target, min_ms: float):
    """PyTorch eager on the same inputs (all cores; on CUDA only if torch sees a GPU), or None."""
    import copy

    import torch

    torch.set_num_threads(tune.available_cores())
    module, device = model.source, "cpu"
    if target.kind.name == "cuda":
        if not torch.cuda.is_available():
            return None
        module, device = copy.deepcopy(model.source).to("cuda"), "cuda"
    module.eval()
    inputs = [torch.from_numpy(x).to(device) for x in model.inputs]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def sample(number: int) -> float:
        with torch.inference_mode():
            sync()
            t = time.perf_counter()
            for _ in range(number):
                module(*inputs)
            sync()
        return (time.perf_counter() - t) / number * 1e3

    sample(1)  # warm-up
    return timing.calibrated(sample, min_ms)[0]


# ---------------------------------------------------------------- one model


def _short(err: Exception) -> str:
    """An exception in one line (TVM errors run to pages)."""
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0][:300] if text else ''}"


def _fmt(x: float | None, spec: str = ".6g") -> str:
    return "" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def status(text: str) -> None:
    """Where the run is, on the models bar (``run`` points this at it)."""
    log.info("%s", text)


def bench_model(
    name: str, model: models.Model, variants: list[str], args, target, work_dir: str, failures: dict[str, str]
) -> list[dict]:
    """Build, check and time the variants of one model; the CSV rows (empty if stock fails)."""
    dev = device_for(target)
    sources = provenance.sources_hash()  # before the pass reads the rules
    built: dict[str, Variant] = {}
    twins: dict[str, str] = {}  # variant -> the variant whose executable it is (not built or timed twice)
    for vname in variants:
        try:
            status(f"{name}: {vname}: {'pass' if vname.startswith('eqsat') else 'graph passes'}")
            v = make_variant(vname, model.mod, target, pass_options(args, vname))
            twin = _twin(v, built, args.flow)
            if twin is None:
                status(f"{name}: {vname}: {'tuning and building' if args.flow == 'tuned' else 'building'}")
                build_variant(v, target, args.flow, args.trials, work_dir)
            else:
                twins[vname], v.ex, v.notes = twin, built[twin].ex, f"the same module as {twin}"
            built[vname] = v
        except Exception as err:  # a variant TVM cannot build is reported, not fatal
            failures[f"{name}/{vname}"] = _short(err)
            log.warning("%s/%s does not build: %s", name, vname, _short(err))
            log.debug("%s", traceback.format_exc())
            if vname == "stock":
                return []

    samplers: dict[str, Callable[[], float]] = {}
    numbers: dict[str, int] = {}
    outputs: dict[str, list[np.ndarray]] = {}
    for vname, v in built.items():
        if vname in twins:
            continue
        vm, vargs, samplers[vname], numbers[vname] = timing.tvm_sampler(v.ex, dev, model.inputs, args.min_ms)
        outputs[vname] = _flatten(vm["main"](*vargs))
    reference = None
    if model.source is not None:
        try:
            reference = model.reference()
            torch_sample = torch_sampler(model, target, args.min_ms)
            if torch_sample is not None:
                samplers["torch"] = torch_sample
        except Exception as err:
            log.warning("%s: PyTorch eager failed: %s", name, err)
    status(
        f"{name}: timing, {args.repeat} interleaved rounds of {len(samplers)}"
        + (" (PyTorch eager included)" if "torch" in samplers else "")
    )
    times = timing.time_interleaved(samplers, args.repeat)
    for vname, twin in twins.items():
        times[vname], outputs[vname], numbers[vname] = times[twin], outputs[twin], numbers[twin]
    torch_ms = float(np.median(times["torch"])) if "torch" in times else None
    stock_ms = float(np.median(times["stock"]))

    rows = []
    for vname, v in built.items():
        ms = np.asarray(times[vname])
        max_abs, max_rel = output_diffs(outputs["stock"], outputs[vname])
        torch_rel = None
        if reference is not None:
            try:
                torch_rel = output_diffs(reference, outputs[vname])[1]
            except ValueError as err:
                log.warning("%s/%s: cannot compare with PyTorch: %s", name, vname, err)
        rows.append(
            {
                "model": name,
                "variant": vname,
                "config": model.name,
                "median_ms": _fmt(float(np.median(ms))),
                "p10_ms": _fmt(float(np.percentile(ms, 10))),
                "p90_ms": _fmt(float(np.percentile(ms, 90))),
                "max_abs_diff": _fmt(max_abs, ".3g"),
                "max_rel_diff": _fmt(max_rel, ".3g"),
                "torch_max_rel_diff": _fmt(torch_rel, ".3g"),
                "speedup_vs_stock": _fmt(stock_ms / float(np.median(ms)), ".4f"),
                "predicted_speedup": _fmt(v.predicted_speedup, ".4f"),
                "changed": int(v.changed),
                "enodes": "" if v.enodes is None else v.enodes,
                "rules_fired": v.rules_fired,
                "pass_seconds": _fmt(v.pass_seconds, ".3f"),
                "build_seconds": _fmt(v.build_seconds, ".2f"),
                "tune_seconds": _fmt(v.tune_seconds, ".1f") if args.flow == "tuned" else "",
                "torch_ms": _fmt(torch_ms),
                "trials": args.trials if args.flow == "tuned" else "",
                "repeat": args.repeat,
                "number": numbers[vname],
                "notes": v.notes,
                "sources": sources,
                "module_hash": module_hash(v.mod),
                "changes": v.changes,
            }
        )
    return [{k: str(v) for k, v in r.items()} for r in rows]  # as they read back from the CSV


def tune_model(
    name: str, model: models.Model, variants: list[str], args, target, work_dir: str, failures: dict[str, str]
) -> None:
    """``--tune-only``: tune every variant's kernels into the databases, nothing built or timed
    (the long part of the tuned flow, run in the background; the timing run then tunes nothing)."""
    built: dict[str, Variant] = {}
    for vname in variants:
        try:
            v = make_variant(vname, model.mod, target, pass_options(args, vname))
            if _twin(v, built, "tuned") is None:
                tune_variant(v, target, args.trials, work_dir)
                tqdm.write(f"{name}/{vname}: tuned in {v.tune_seconds:.0f} s")
            built[vname] = v
        except Exception as err:
            failures[f"{name}/{vname}"] = _short(err)
            log.warning("%s/%s does not tune: %s", name, vname, _short(err))


def dry_run_model(
    name: str, model: models.Model, variants: list[str], args, target, work_dir: str, failures: dict[str, str]
) -> None:
    """Compile every variant for the target, no timing; CUDA sources also go through nvcc if it exists."""
    import shutil

    from tvm_eqsat.measure import nvcc_compile

    for vname in variants:
        try:
            v = make_variant(vname, model.mod, target, pass_options(args, vname))
            build_variant(v, target, args.flow, args.trials, work_dir, dry_run=True)
            extra = ""
            if target.kind.name == "cuda" and shutil.which("nvcc"):
                extra = f", nvcc: {nvcc_compile(v.ex, target)} bytes of fatbin"
            tqdm.write(f"{name}/{vname}: compiled for {target.kind.name} in {v.build_seconds:.1f} s{extra}")
        except Exception as err:
            failures[f"{name}/{vname}"] = _short(err)
            log.warning("%s/%s does not build: %s", name, vname, _short(err))


# ---------------------------------------------------------------- results files


def read_rows(path: Path) -> list[dict]:
    if not path.exists():
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_rows(path: Path, rows: list[dict], append: bool = True) -> None:
    """Append rows (header first in a new file); ``append=False``, or a file written with other
    columns (an older version of this script), rewrites the file with its old rows kept."""
    if append and path.exists() and path.stat().st_size:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != FIELDS:
            rows, append = [*read_rows(path), *rows], False
    new = not append or not path.exists() or path.stat().st_size == 0
    with open(path, "a" if append else "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore", restval="")
        if new:
            writer.writeheader()
        writer.writerows(rows)


def machine_info(target: tvm.target.Target) -> dict:
    info = {**provenance.machine(), "cores_used": tune.available_cores()}
    if target.kind.name == "cuda":
        try:
            info["gpu"] = tvm.cuda(0).device_name if tvm.cuda(0).exist else None
        except Exception:
            info["gpu"] = None
    return info


def write_sidecar(
    path: Path, args, target, argv: list[str], elapsed_s: float, failures: dict, eqsat_options, source: dict
) -> dict:
    """The JSON sidecar: this run's settings and machine, plus the history of earlier runs."""
    old = json.loads(path.read_text()) if path.exists() else {}
    run = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": shlex.join(["python", "scripts/benchmark.py", *argv]),
        "sources": source,
        "models": args.models,
        "elapsed_s": round(elapsed_s, 1),
        "failures": failures,
    }
    sidecar = {
        "machine": machine_info(target),
        "versions": {**provenance.versions(), "tvm": tvm.__version__, "tvm_eqsat": tvm_eqsat.__version__},
        "target": provenance.plain(target.export()),
        "flow": args.flow,
        "trials": args.trials if args.flow == "tuned" else None,
        "work_dir": args.work_dir if args.flow == "tuned" else None,
        "cpu_cache": ("cold" if args.cold_cache else "warm")
        if args.flow == "tuned" and args.target == "llvm"
        else None,
        "small": args.small,
        "repeat": args.repeat,
        "min_ms": args.min_ms,
        "eqsat_options": eqsat_options or old.get("eqsat_options"),
        "cpm_preparation": "FoldConstant, EliminateCommonSubexpr, bound weights lifted to parameters and bound back",
        "env": {k: os.environ.get(k) for k in ("TVM_NUM_THREADS", "OMP_WAIT_POLICY")},
        "torch_threads": tune.available_cores(),
        **run,
        "runs": [*old.get("runs", []), run],
    }
    path.write_text(json.dumps(sidecar, indent=2, default=str) + "\n")
    return sidecar


def _by_model(rows: list[dict]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for r in rows:
        out.setdefault(r["model"], {})[r["variant"]] = r
    return out


def geomean(xs: list[float]) -> str:
    return f"{float(np.exp(np.mean(np.log(xs)))):.3f}x" if xs else "-"


def _f(r: dict | None, key: str) -> float | None:
    if r is None or r.get(key, "") in ("", None):
        return None
    return float(r[key])


def _md_row(model: str, vs: dict[str, dict]) -> str:
    """One table row: medians (p10-p90), speedups, the eqsat report, the output checks."""
    stock, cpm, eq = vs.get("stock"), vs.get("stock+cpm"), vs.get("eqsat")

    def ms(r):
        return "-" if r is None else f"{float(r['median_ms']):.4g} ({float(r['p10_ms']):.3g}-{float(r['p90_ms']):.3g})"

    def x(v):
        return "-" if v is None else f"{v:.3f}x"

    def worst(key, among):
        vals = [_f(r, key) for r in among if r is not None and _f(r, key) is not None]
        return f"{max(vals):.1e}" if vals else "-"

    label = model if eq is None or eq.get("changed") == "1" else f"{model} (eqsat: unchanged)"
    cells = [
        label,
        ms(stock),
        ms(cpm),
        ms(eq),
        x(_f(cpm, "speedup_vs_stock")),
        x(_f(eq, "speedup_vs_stock")),
        x(_f(eq, "predicted_speedup")),
        eq["pass_seconds"] if eq else "-",
        (eq["enodes"] or "-") if eq else "-",
        worst("max_rel_diff", (cpm, eq)),
        worst("torch_max_rel_diff", (stock, cpm, eq)),
        stock["torch_ms"] or "-" if stock else "-",
    ]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def summary_line(data: dict[str, dict[str, dict]]) -> str:
    """The geometric means over stock.  The headline counts a model the pass left
    unchanged as 1.000x: its build is stock's, so its measured ratio is only noise
    (shown beside it, and in the table, as a gauge of that noise)."""
    eq = [vs["eqsat"] for vs in data.values() if "eqsat" in vs]
    cpm = [float(vs["stock+cpm"]["speedup_vs_stock"]) for vs in data.values() if "stock+cpm" in vs]
    measured = [float(r["speedup_vs_stock"]) for r in eq]
    changed = [float(r["speedup_vs_stock"]) for r in eq if r["changed"] == "1"]
    headline = [float(r["speedup_vs_stock"]) if r["changed"] == "1" else 1.0 for r in eq]
    return (
        f"Geometric-mean speedup over stock: **eqsat {geomean(headline)}** over {len(eq)} models, "
        f"counting the {len(eq) - len(changed)} it left unchanged as 1.000x "
        f"({geomean(measured)} as measured); {geomean(changed)} over the {len(changed)} it changed; "
        f"stock+cpm {geomean(cpm)} over {len(cpm)} models."
    )


def noise_floor(vs: dict[str, dict]) -> float:
    """How far from 1.0 a speedup must be to count, for one model: the larger of the
    timing floor (half the p10-p90 spread of stock's samples, relative to its median) and
    the tuning lottery (stock tuned again independently, ``stock-aa``, against stock; and
    stock+nhwc against ``stock+nhwc-aa`` where that was tuned on its own too)."""
    stock = vs["stock"]
    floor = (float(stock["p90_ms"]) - float(stock["p10_ms"])) / (2 * float(stock["median_ms"]))
    for aa, first in AA_VARIANTS.items():
        if has_aa(vs, aa) and first in vs:
            floor = max(floor, abs(float(vs[first]["median_ms"]) / float(vs[aa]["median_ms"]) - 1.0))
    return floor


def fastest(vs: dict[str, dict], names) -> str:
    """The fastest of ``names`` (variants) that a model has rows for; an A/A control is
    never a stock variant of its own."""
    return min((v for v in names if v in vs and v not in AA_VARIANTS), key=lambda v: float(vs[v]["median_ms"]))


def has_aa(vs: dict[str, dict], name: str = "stock-aa") -> bool:
    """Whether a model has the A/A control ``name`` tuned on its own (not its first
    variant's module timed twice, as in the default flow)."""
    aa = vs.get(name)
    return aa is not None and not aa.get("notes", "").startswith("the same module")


def best_stock_table(data: dict[str, dict[str, dict]], tuned: bool = False) -> list[str]:
    """Per model: the fastest stock variant against the fastest eqsat variant, with the
    model's noise floor; and the geometric mean of those speedups (the headline).  With
    ``tuned``, a model without its A/A control has a floor that leaves out the tuning
    lottery: it is marked "no A/A", and the headline says how many such models it holds."""
    lines = [
        "| model | best stock variant | its ms | best eqsat variant | its ms | eqsat vs best stock | noise floor |",
        "|---|---|---|---|---|---|---|",
    ]
    speedups, inside, unmeasured = [], 0, 0
    for model, vs in data.items():
        if "stock" not in vs or not any(v in vs for v in EQSAT_VARIANTS):
            continue
        best_s, best_e = fastest(vs, STOCK_VARIANTS), fastest(vs, EQSAT_VARIANTS)
        s_ms, e_ms = float(vs[best_s]["median_ms"]), float(vs[best_e]["median_ms"])
        speedup, floor = s_ms / e_ms, noise_floor(vs)
        speedups.append(speedup)
        within = abs(speedup - 1.0) <= floor
        inside += within
        no_aa = tuned and not has_aa(vs)
        unmeasured += no_aa
        lines.append(
            f"| {model} | {best_s} | {s_ms:.4g} | {best_e} | {e_ms:.4g} | {speedup:.3f}x"
            f"{' (within noise)' if within else ''} | ±{100 * floor:.1f}%{' (no A/A)' if no_aa else ''} |"
        )
    lottery = (
        f"; {unmeasured} without an A/A control, whose floor is the timing spread only, not the tuning lottery"
        if unmeasured
        else ""
    )
    lines += [
        "",
        f"Geometric-mean speedup of the best eqsat variant over the best stock variant: "
        f"**{geomean(speedups)}** over {len(speedups)} models ({inside} within their noise floor{lottery}).",
    ]
    return lines


def learned_vs_eqsat(vs: dict[str, dict]) -> tuple[float, float, bool]:
    """One model's eqsat median over its eqsat-learned median, the model's noise floor, and
    whether the two rewrites are one module."""
    eq, le = vs["eqsat"], vs[LEARNED]
    same = le.get("module_hash") == eq.get("module_hash")
    return float(eq["median_ms"]) / float(le["median_ms"]), noise_floor(vs), same


def learned_table(data: dict[str, dict[str, dict]]) -> list[str]:
    """Where the ``eqsat-learned`` variant ran: its time against eqsat's, the same run (empty
    otherwise).  Inside the model's noise floor neither cost model chose better."""
    pairs = {m: vs for m, vs in data.items() if LEARNED in vs and "eqsat" in vs}
    if not pairs:
        return []
    lines = [
        "",
        f"## The pass with --learned-model ({LEARNED}) against eqsat",
        "",
        "| model | eqsat ms (predicted speedup) | eqsat-learned ms (predicted speedup) | same module | "
        "learned vs eqsat | noise floor |",
        "|---|---|---|---|---|---|",
    ]
    for model, vs in pairs.items():
        eq, le = vs["eqsat"], vs[LEARNED]
        ratio, floor, same = learned_vs_eqsat(vs)
        lines.append(
            f"| {model} | {float(eq['median_ms']):.4g} ({eq['predicted_speedup'] or '-'}) | "
            f"{float(le['median_ms']):.4g} ({le['predicted_speedup'] or '-'}) | {'yes' if same else 'no'} | "
            f"{ratio:.3f}x{' (within noise)' if abs(ratio - 1) <= floor else ''} | ±{100 * floor:.1f}% |"
        )
    changed = [
        f"- {m}: {vs[LEARNED].get('changes') or 'nothing'}" for m, vs in pairs.items() if not learned_vs_eqsat(vs)[2]
    ]
    if changed:
        lines += ["", f"What {LEARNED} changed, where its module is not eqsat's:", "", *changed]
    return lines


def write_markdown(path: Path, rows: list[dict], sidecar: dict) -> str:
    """The results table (one row per model) and the geometric-mean speedups over stock."""
    flow, m = sidecar["flow"], sidecar["machine"]
    kind, mcpu = sidecar["target"]["kind"], sidecar["target"].get("mcpu")
    code = f" -mcpu={mcpu}" if mcpu else " (generic x86-64 code, no -mcpu)" if kind == "llvm" else ""
    title = f"# {kind}{code}, {flow} flow"
    title += f", {sidecar['trials']} trials per kernel" if flow == "tuned" else ""
    title += ", tuned with cold caches" if sidecar.get("cpu_cache") == "cold" else ""
    title += " (small models)" if sidecar["small"] else ""
    data = _by_model(rows)
    lines = [
        title,
        "",
        f"{m.get('machine') or m['cpu']}, {m['cores_used']} cores{', ' + str(m['gpu']) if m.get('gpu') else ''}; "
        f"TVM {sidecar['versions']['tvm']}, egglog {sidecar['versions']['egglog']}, "
        f"torch {sidecar['versions']['torch']}; {sidecar['date']}. Last command: `{sidecar['command']}`.",
        "",
        f"Latency in ms: median of {sidecar['repeat']} interleaved samples (p10-p90). "
        "Speedup: stock median / variant median. Diff: the largest output difference relative to the "
        "output's largest magnitude, vs. stock and vs. PyTorch eager (torch ms: eager, as context).",
        "",
        "| model | stock ms | stock+cpm ms | eqsat ms | cpm speedup | eqsat speedup | eqsat predicted | "
        "pass s | e-nodes | diff vs stock | diff vs torch | torch ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *(_md_row(model, vs) for model, vs in data.items()),
    ]
    lines += ["", summary_line(data)]
    if any(v in vs for vs in data.values() for v in ("stock+tvm", "stock+nhwc", "eqsat+tvm")):
        lines += [
            "",
            "## Against the best stock variant",
            "",
            "Stock variants: stock, stock+cpm, stock+tvm (TVM's graph passes: "
            f"{', '.join(dict.fromkeys(TVM_PASSES))}), stock+fast (those, then FastMathTransform, where "
            "timed), stock+nhwc (ConvertLayout to NHWC); eqsat "
            "variants: eqsat, eqsat+tvm (TVM's graph passes, then the pass). A gain or loss counts "
            "only outside the model's noise floor (stock's p10-p90 half-spread, and stock tuned "
            "again with another seed in the tuned flow).",
            "",
            *best_stock_table(data, tuned=flow == "tuned"),
        ]
        passes = [
            f"{model}: {name} `{vs[name]['rules_fired'] or 'none'}`"
            for model, vs in data.items()
            for name in ("stock+tvm", "stock+fast")
            if name in vs
        ]
        lines += ["", "TVM passes that changed each model: " + "; ".join(passes) + "."]
    lines += learned_table(data)
    changed = [
        f"- {model}: {vs['eqsat']['changes']}" for model, vs in data.items() if vs.get("eqsat", {}).get("changes")
    ]
    if changed:
        lines += ["", "What eqsat changed (counted on the graphs it returned):", "", *changed]
    rules = [
        f"{model}: `{vs['eqsat']['rules_fired']}`"
        for model, vs in data.items()
        if "eqsat" in vs and vs["eqsat"]["rules_fired"]
    ]
    if rules:
        lines += ["", "Rules applied by eqsat (rule:times): " + "; ".join(rules) + "."]
    if sidecar.get("failures"):
        lines += ["", "Failed in the last run: " + "; ".join(f"{k}: {v}" for k, v in sidecar["failures"].items())]
    text = "\n".join(lines) + "\n"
    path.write_text(text)
    return text


def explain(rows: list[dict], args) -> str:
    """The main job's answer: per model, the variants' times, then one paragraph on what
    the pass changed, the predicted and measured speedup over the best stock variant, and
    how the outputs were checked."""
    out = []
    for model, vs in _by_model(rows).items():
        if "stock" not in vs or "eqsat" not in vs:
            continue
        best, eq = fastest(vs, STOCK_VARIANTS), vs["eqsat"]
        flow = f"MetaSchedule, {args.trials} trials per kernel" if args.flow == "tuned" else "TVM's default schedules"
        flow += ", tuned with cold caches" if args.cold_cache else ""
        code = (
            f"llvm -mcpu={args.mcpu}"
            if args.mcpu != "generic"
            else "llvm, generic x86-64 code (no -mcpu: the committed kernels' target; --mcpu host for this CPU's)"
        )
        out += [f"{model} ({vs['stock']['config']}), {code}, {flow}, median of {args.repeat} interleaved samples:", ""]
        for v in vs:
            out.append(
                f"  {v:<11} {float(vs[v]['median_ms']):9.3f} ms   {float(vs[v]['speedup_vs_stock']):.3f}x vs stock"
            )
        speedup = float(vs[best]["median_ms"]) / float(eq["median_ms"])
        floor = noise_floor(vs)
        diffs = [_f(r, "max_rel_diff") for r in vs.values() if _f(r, "max_rel_diff") is not None]
        torch = [_f(r, "torch_max_rel_diff") for r in vs.values() if _f(r, "torch_max_rel_diff") is not None]
        out += [
            "",
            (
                f"The pass changed: {eq.get('changes') or 'nothing'} ({float(eq['pass_seconds']):.1f} s). "
                f"Against the best stock variant ({best}) it measured {speedup:.2f}x"
                f"{' (within' if abs(speedup - 1) <= floor else ' (outside'} the noise floor of ±{floor * 100:.1f}%"
                f"{': stock spread, and stock tuned again with another seed' if has_aa(vs) else ''}"
                f"{', and stock+nhwc' if has_aa(vs) and has_aa(vs, 'stock+nhwc-aa') else ''}"
                f"{'; no A/A control, so the tuning lottery is not in it' if args.flow == 'tuned' and not has_aa(vs) else ''}); "
                f"its cost model predicted "
                f"{float(eq['predicted_speedup'] or 1):.2f}x over stock. Every variant's outputs were checked against "
                f"stock's (largest relative difference {max(diffs):.1e})"
                + (f" and PyTorch eager's ({max(torch):.1e})." if torch else ".")
            ),
            "",
        ]
    return "\n".join(out)


def write_chart(path: Path, rows: list[dict], sidecar: dict) -> None:
    """Bars of each variant's speedup over stock per model (whiskers: stock median / variant p90..p10)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = _by_model(rows)
    names = list(data)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(names) + 2), 4))
    shown = [v for v in VARIANTS if v != "stock" and v not in AA_VARIANTS and any(v in vs for vs in data.values())]
    width = 0.8 / max(len(shown), 1)
    for k, variant in enumerate(shown):
        heights, lo, hi = [], [], []
        for model in names:
            r, stock = data[model].get(variant), data[model].get("stock")
            if r is None or stock is None:
                heights.append(0.0), lo.append(0.0), hi.append(0.0)
                continue
            s = float(stock["median_ms"])
            h = s / float(r["median_ms"])
            heights.append(h)
            lo.append(max(0.0, h - s / float(r["p90_ms"])))
            hi.append(max(0.0, s / float(r["p10_ms"]) - h))
        pos = np.arange(len(names)) + (k - (len(shown) - 1) / 2) * width
        ax.bar(pos, heights, width, yerr=[lo, hi], capsize=2, label=variant)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel("speedup over stock (median)")
    title = f"{sidecar['target']['kind']}, {sidecar['flow']} flow" + (" (small models)" if sidecar["small"] else "")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------- main


QUICK = ["--models", "squeezenet", "--small", "--flow", "tuned", "--trials", "64", "--repeat", "30",
         "--min-ms", "10", "--force", "--mcpu", "generic", "--variants", "stock", "stock+tvm", "stock+nhwc", "stock-aa", "eqsat"]  # fmt: skip
"""``--quick``: one small conv model against TVM's strongest stock variants, at the budget of the
committed databases and for their generic x86-64 target (so they apply on any x86 CPU), so a first run tunes nothing (tests/test_benchmark.py checks that they hold
every kernel it builds); a few minutes on 2 cores."""
QUICK_DIR = Path(os.path.expanduser("~/.cache/tvm_eqsat/quick"))
TUNING_DIR = ROOT / "benchmarks" / "tuning"  # committed pruned databases (scripts/export_tuning.py)


def seed_databases(args) -> None:
    """Start the tuned flow from the committed databases (the kernels we measured): their
    kernels are not tuned again at their budget.  Says where they were tuned.  Only the
    kernels tuned with this run's budget: seeded stock kernels tuned longer than the kernels
    only eqsat has would bias the comparison (a run at 4 trials against the committed 64).
    Kernels tuned longer than the main databases' budget for them (a 64-trial run of models
    committed at 32) live apart, in ``<target>-t<trials>[-aa]`` (``export_tuning.py --apart``),
    where they would not replace the records of the main database's other budget."""
    main, apart = target_name(args), f"{target_name(args)}-t{args.trials}"
    seeds = [(args.work_dir, TUNING_DIR / main), (f"{args.work_dir}-aa", TUNING_DIR / f"{main}-aa")]
    seeds += [(w, TUNING_DIR / f"{apart}{aa}") for w, aa in ((args.work_dir, ""), (f"{args.work_dir}-aa", "-aa"))]
    for work, seed in seeds:
        if seed.name.startswith(apart) and not seed.is_dir():
            continue
        source = json.loads((seed / "SOURCE.json").read_text()) if (seed / "SOURCE.json").is_file() else {}
        budgets = set(source.get("trial_budgets", ()))
        if budgets and args.trials not in budgets:
            print(
                f"not starting from {seed.relative_to(ROOT)}: tuned with {sorted(budgets)} trials per kernel, "
                f"this run {args.trials} (every variant's kernels get the same budget)"
            )
            continue
        n = tuning_db.seed_database(work, seed, args.trials)
        if not n:
            continue
        here = provenance.cpu_name()
        print(
            f"{n} tuned kernels from {seed.relative_to(ROOT)} (tuned on {source.get('cpu', 'an unrecorded CPU')}"
            f"{'' if source.get('cpu') in (None, here) else f'; this machine: {here}, use --no-seed to tune here'})"
        )


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=None, help=f"names from {sorted(models.MODELS)} (default: the suite)")
    p.add_argument("--small", action="store_true", help="the reduced models (results in <target>-<flow>-small.*)")
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"])
    p.add_argument("--arch", default="sm_90", help="CUDA architecture")
    p.add_argument(
        "--mcpu",
        default="host",
        help="llvm: the CPU to generate code for (default: this machine's, as LLVM names it); 'generic' "
        "compiles for plain x86-64 (SSE2, no AVX), as every llvm result before 2026-11-27 did",
    )
    p.add_argument("--flow", default="default", choices=["default", "tuned"])
    p.add_argument("--trials", type=int, default=64, help="MetaSchedule trials per kernel (tuned flow)")
    p.add_argument("--work-dir", default=None, help="MetaSchedule database (default ~/.cache/tvm_eqsat/ms-<target>)")
    p.add_argument(
        "--cold-cache",
        action="store_true",
        help="tuned flow on llvm: time each candidate with its weights flushed from the CPU's caches, as "
        "they are in a model (tune.COLD_EVALUATOR); databases and results are named <target>-cold",
    )
    p.add_argument(
        "--variants",
        nargs="+",
        default=list(DEFAULT_VARIANTS),
        choices=VARIANTS,
        help="stock is always included; stock+fast only when named",
    )
    p.add_argument("--repeat", type=int, default=30, help="timed samples per variant (interleaved rounds)")
    p.add_argument("--min-ms", type=float, default=10.0, help="a sample repeats the model until it lasts this long")
    p.add_argument("--time-limit", type=float, default=30.0, help="tvm-eqsat pass time limit (s)")
    p.add_argument(
        "--cost-model",
        default="auto",
        help="the pass's cost_model (auto, roofline, xgb, or a model directory); it costs for --flow",
    )
    p.add_argument(
        "--learned-model",
        default="xgb",
        help=f"the cost_model of the {LEARNED} variant (default xgb: the learned model shipped for the target "
        "and flow; or a model directory): timed beside eqsat, it says whether that model chooses better",
    )
    p.add_argument(
        "--rules",
        nargs="+",
        default=None,
        help="the pass's rule families or rules (default: its default set; e.g. the opt-in nhwc family: "
        "--rules identities algebra merges layout conv matmul nhwc)",
    )
    p.add_argument("--tag", default=None, help="suffix of the results files (<target>-<flow>[-small]-<tag>.*)")
    p.add_argument(
        "--speed-check",
        action="store_true",
        help="run the pass with speed_check=True: it builds and times the module before and after its "
        "rewrite (this flow, the --work-dir database, --trials) and keeps the rewrite only if "
        "measurably faster; results in <target>-<flow>[-small]-checked.*",
    )
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument("--force", action="store_true", help="re-run models that already have rows")
    p.add_argument("--dry-run", action="store_true", help="compile every variant, no timing, no results files")
    p.add_argument(
        "--tune-only",
        action="store_true",
        help="tuned flow: tune every variant's kernels into the databases, nothing built or timed "
        "(stock's first: it is always one of the variants)",
    )
    p.add_argument(
        "--no-seed",
        action="store_true",
        help=f"tuned flow: do not start from the committed databases in {TUNING_DIR.relative_to(ROOT)}",
    )
    p.add_argument(
        "--population",
        type=int,
        default=POPULATION,
        help="MetaSchedule's evolutionary population (its default: 512; ours: 128, "
        "see benchmarks/results/ms-overhead-llvm.md)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument(
        "--quick", action="store_true",
        help=f"the README's main job: {' '.join(QUICK)} (explicit options win), results and its own tuning database in {QUICK_DIR}",
    )  # fmt: skip
    args = p.parse_args(argv)
    if args.quick:
        given = {a.split("=")[0] for a in argv if a.startswith("--")}
        defaults = p.parse_args(QUICK)
        for key in ("models", "small", "flow", "trials", "repeat", "min_ms", "force", "mcpu", "variants"):
            if f"--{key.replace('_', '-')}" not in given:
                setattr(args, key, getattr(defaults, key))
        if "--out-dir" not in given:
            args.out_dir = str(QUICK_DIR)
    args.models = args.models or list(models.SUITE)
    try:
        args.mcpu = tune.resolve_mcpu(args.mcpu) if args.target == "llvm" else "generic"
    except ValueError as err:
        p.error(str(err))
    unknown = [m for m in args.models if m not in models.MODELS]
    if unknown:
        p.error(f"unknown models {unknown}; choose from {sorted(models.MODELS)}")
    args.variants = ["stock", *(v for v in VARIANTS if v in args.variants and v != "stock")]
    if args.quick and args.work_dir is None:  # what it tunes (a kernel the committed databases lack) stays its own
        args.work_dir = str(QUICK_DIR / f"ms-{target_name(args)}")
    args.work_dir = args.work_dir or default_work_dir(target_name(args))
    if args.tune_only and args.flow != "tuned":
        p.error("--tune-only needs --flow tuned")
    if args.cold_cache and (args.flow != "tuned" or args.target != "llvm"):
        p.error("--cold-cache is for the tuned flow on llvm (it flushes the CPU's caches)")
    if args.cold_cache and args.speed_check:
        p.error("--cold-cache with --speed-check: the pass's own check tunes with warm caches")
    return args


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    log_path = Path(args.out_dir) / f"{_stem(args)}.log"
    with console.native_output_to(log_path) as (stream, log_file):
        handlers = [logging.StreamHandler(stream), logging.StreamHandler(log_file)]
        logging.basicConfig(
            level=logging.INFO if args.verbose else logging.WARNING,
            format="%(name)s: %(message)s",
            handlers=handlers,
            force=True,
        )
        try:
            status = run(args, argv)
        finally:
            for handler in handlers:  # their streams close with the context
                logging.getLogger().removeHandler(handler)
    print(f"TVM's and MetaSchedule's messages: {log_path}")
    return status


def _stem(args) -> str:
    return (
        f"{target_name(args)}-{args.flow}{'-small' if args.small else ''}{'-checked' if args.speed_check else ''}"
        f"{'-' + args.tag if args.tag else ''}"
    )


def check_same_machine(csv_path: Path) -> None:
    """Refuse to add rows to a results file timed on another CPU: its geometric means and
    its noise floors would mix machines."""
    sidecar = csv_path.with_suffix(".json")
    was = json.loads(sidecar.read_text()).get("machine", {}).get("machine") if sidecar.is_file() else None
    here = provenance.cpu_name()
    if was and was != here:
        raise SystemExit(
            f"{csv_path} was timed on {was}; this machine is {here}. Write another file (--tag or "
            "--out-dir), or re-run all of its models here with --force."
        )


def run(args, argv: list[str]) -> int:
    """The benchmark (``main`` without the console set-up)."""
    global MS_LOG_LEVEL
    MS_LOG_LEVEL = logging.INFO if args.verbose else logging.WARNING
    global POPULATION, COLD_CACHE
    POPULATION, COLD_CACHE = args.population, args.cold_cache
    logging.getLogger("tvm_eqsat").setLevel(MS_LOG_LEVEL)
    tune.use_all_cores()
    start, source = time.perf_counter(), provenance.source_state()
    target = make_target(args.target, args.arch, args.mcpu)
    builders = models.SMALL if args.small else models.MODELS
    out_dir = Path(args.out_dir)
    stem = _stem(args)
    csv_path = out_dir / f"{stem}.csv"
    failures: dict[str, str] = {}

    rows = [] if args.dry_run or args.tune_only else read_rows(csv_path)
    # a model's old rows are replaced only once its new ones are measured: an interrupted or
    # failing re-run keeps the results it did not replace
    stale = set(args.models) if args.force else set()
    done = {(r["model"], r["variant"]) for r in rows if r["model"] not in stale}
    if done:
        check_same_machine(csv_path)
    todo = [m for m in args.models if not all((m, v) in done for v in args.variants)]
    if len(todo) < len(args.models):
        print(f"{len(args.models) - len(todo)} models already in {csv_path} (use --force to re-run them)")
    if args.flow == "tuned" and not args.no_seed and not args.dry_run:
        seed_databases(args)
    eqsat_options = _eqsat_options(args) if "eqsat" in args.variants else None
    bar = tqdm(todo, desc=f"{stem}{' (dry run)' if args.dry_run else ''}", unit="model", file=sys.stderr)
    global status
    status = bar.set_postfix_str
    for name in bar:
        bar.set_postfix_str(f"{name}: import")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = builders[name]()
        except Exception as err:  # an import that fails is reported, not fatal
            failures[name] = f"import: {_short(err)}"
            log.warning("%s does not import: %s", name, failures[name])
            continue
        if args.dry_run:
            dry_run_model(name, model, args.variants, args, target, args.work_dir, failures)
            continue
        if args.tune_only:
            tune_model(name, model, args.variants, args, target, args.work_dir, failures)
            continue
        try:
            new = bench_model(name, model, args.variants, args, target, args.work_dir, failures)
        except Exception as err:  # running or checking failed (build failures are handled inside)
            failures[name] = f"run: {_short(err)}"
            log.warning("%s failed: %s", name, failures[name])
            continue
        if new:  # every variant was timed again in this process: its rows replace all of the model's
            out_dir.mkdir(parents=True, exist_ok=True)
            earlier = [r["variant"] for r in rows if r["model"] == name]
            rows = [r for r in rows if r["model"] != name] + new
            write_rows(csv_path, rows, append=False)
            if earlier:
                tqdm.write(f"{name}: its earlier rows ({', '.join(earlier)}) replaced by this run's")
            eq = next((r for r in new if r["variant"] == "eqsat"), None)
            tqdm.write(
                f"{name}: stock {new[0]['median_ms']} ms"
                + (
                    f", eqsat {eq['median_ms']} ms ({eq['speedup_vs_stock']}x, predicted {eq['predicted_speedup']}x)"
                    if eq
                    else ""
                )
            )
    elapsed = time.perf_counter() - start
    if args.tune_only:
        print(
            f"tuned in {elapsed:.0f} s: {len(failures)} failures"
            + "".join(f"\n  {k}: {v}" for k, v in failures.items())
        )
        return 1 if failures else 0
    if args.dry_run:
        print(f"dry run: {len(failures)} failures" + "".join(f"\n  {k}: {v}" for k, v in failures.items()))
        return 1 if failures else 0
    if not rows:
        print(f"no results ({len(failures)} failures)")
        return 1
    out_dir.mkdir(parents=True, exist_ok=True)
    source_end = provenance.source_state()
    if source_end.get("sources_sha256") != source.get("sources_sha256"):
        source["changed_during_run"] = source_end
        log.warning("rules/ or tvm_eqsat/ changed during the run: the rows of this run may mix versions")
    sidecar = write_sidecar(out_dir / f"{stem}.json", args, target, argv, elapsed, failures, eqsat_options, source)
    text = write_markdown(out_dir / f"{stem}.md", rows, sidecar)
    print(explain(rows, args) if args.quick else text)
    write_chart(out_dir / f"{stem}.png", rows, sidecar)
    print(f"{csv_path} and .json/.md/.png written in {elapsed:.0f} s; {len(failures)} failures")
    alarmed = [k for k, v in failures.items() if "the pass raised alarms" in v]
    if alarmed:  # a soundness alarm, a failed validation or an internal error fails the run
        print(f"FAILED: the pass raised alarms on {', '.join(alarmed)}")
        return 1
    diffs = {f"{r['model']}/{r['variant']}": _f(r, "max_rel_diff") for r in rows}
    wrong = wrong_outputs({k: v for k, v in diffs.items() if v is not None})
    if wrong:  # a build that computes something else (TVM or its tuning miscompiled it) fails the run
        print(f"FAILED: outputs differ from stock's by over {WRONG_REL:g} of their scale: {', '.join(wrong)}")
        return 1
    return 0


def pass_options(args, variant: str = "eqsat") -> dict:
    """The options given to the pass for an eqsat variant: costs for the build flow being run
    (``eqsat-learned``: with ``--learned-model``)."""
    cost_model = args.learned_model if variant == LEARNED else args.cost_model
    options = {"time_limit_s": args.time_limit, "cost_model": cost_model, "flow": args.flow}
    if getattr(args, "rules", None) is not None:  # device_bench.py passes a Namespace without it
        options["rules"] = tuple(args.rules)
    if args.speed_check:
        options.update(speed_check=True, tune_dir=args.work_dir, tune_trials=args.trials)
    return options


def _eqsat_options(args) -> dict:
    """All the pass options the eqsat variant runs with (defaults plus ``pass_options``)."""
    return tvm_eqsat.make_options(**pass_options(args)).to_dict()


if __name__ == "__main__":
    sys.exit(main())
