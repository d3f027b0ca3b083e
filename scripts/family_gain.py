"""What a rule family adds end to end: one model built three ways in one process, stock,
the pass with the flow's default rule set less the family, and the pass with the family
added, timed interleaved, each output checked against stock's.

    python scripts/family_gain.py resnet50 --family winograd

builds with default schedules (no tuning) for generic x86-64 and appends a row to
``benchmarks/results/family-<family>-llvm-default.json``.  ``--flow tuned`` tunes the two
pass outputs with MetaSchedule instead (``--trials`` per kernel, ``--cold-cache`` as in
``benchmark.py``, one database per target in ``--work-dir``, so a rerun tunes only what is
new), for this machine's CPU (``--mcpu``), and leaves stock out of the timing (its tuning
would not tell what the family adds; it is built untuned, to check the outputs against); its
rows go to ``family-<family>-<llvm-cpu[-cold]>-tuned-t<trials>.json``.
``--kernels N`` adds the kernels that tell the builds apart (``differing_kernels``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import tvm

from tvm_eqsat import optimize, provenance, timing, tune
from tvm_eqsat.cost import cpu_vector_bits, make_cost_model, priced_layouts
from tvm_eqsat.family_defaults import default_families
from tvm_eqsat.models import MODELS, SMALL
from tvm_eqsat.rules import load_library
from tvm_eqsat.verify import executable_outputs, output_diffs, wrong_builds_message, wrong_outputs

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--family", default="winograd", choices=load_library().families)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--min-ms", type=float, default=200.0)
    ap.add_argument("--flow", choices=["default", "tuned"], default="default")
    ap.add_argument("--trials", type=int, default=32, help="tuned flow: MetaSchedule trials per kernel")
    ap.add_argument("--cold-cache", action="store_true", help="tuned flow: tune and time with the caches flushed")
    ap.add_argument("--mcpu", default="host", help="tuned flow: the CPU to compile for (default: this one)")
    ap.add_argument(
        "--work-dir",
        default=None,
        help="tuned flow: MetaSchedule database (default ~/.cache/tvm_eqsat/family-<target>)",
    )
    ap.add_argument(
        "--cost-model",
        default="auto",
        help="the pass's cost_model (auto, roofline, xgb, or a model directory): it also decides the base "
        "rule set, which holds the nhwc family only under a model that prices layouts",
    )
    ap.add_argument(
        "--kernels",
        type=int,
        default=0,
        metavar="N",
        help="also record the N kernels whose instrumented times differ most between the builds, "
        "and every kernel only one build has (timing.kernel_times)",
    )
    args = ap.parse_args()
    if args.cold_cache and args.flow != "tuned":
        ap.error("--cold-cache is for the tuned flow")
    tuned = args.flow == "tuned"
    mcpu = tune.resolve_mcpu(args.mcpu) if tuned else "generic"
    target, name = tune.llvm_target(mcpu), tune.target_name("llvm", mcpu, args.cold_cache)
    work_dir = args.work_dir or str(Path.home() / ".cache" / "tvm_eqsat" / f"family-{name}")
    model = (SMALL if args.small else MODELS)[args.model]()
    # the flow's default rule set on llvm (as the pass picks it with --cost-model), less the family
    cost = make_cost_model(args.cost_model, "llvm", args.flow, cpu_vector_bits(mcpu), mcpu)
    base = [f for f in default_families("llvm", args.flow, priced_layouts(cost)) if f != args.family]
    row: dict = {
        "model": model.name,
        "flow": args.flow,
        "family": args.family,
        "cost_model": args.cost_model,
        "passes": {},
    }
    if tuned:
        row.update(mcpu=mcpu, trials=args.trials, cpu_cache="cold" if args.cold_cache else "warm")
    mods = {} if tuned else {"stock": model.mod}
    for label, rules in (("eqsat", base), (f"eqsat+{args.family}", base + [args.family])):
        t = time.perf_counter()
        new, report = optimize(
            model.mod, tvm.target.Target(target), flow=args.flow, rules=rules, cost_model=args.cost_model
        )
        f = report.functions["main"]
        row["passes"][label] = {
            "seconds": round(time.perf_counter() - t, 1),
            "predicted_speedup": f.cost_before / f.cost_after,
            "changes": f.changes,
        }
        print(label, row["passes"][label], file=sys.stderr, flush=True)
        mods[label] = new
    dev, samplers, outs, exes = tvm.cpu(), {}, {}, {}
    for label, mod in mods.items():
        t = time.perf_counter()
        db = tune.tune(mod, target, work_dir, args.trials, progress=True, cold_cache=args.cold_cache) if tuned else None
        ex = exes[label] = tune.build(mod, target, db)
        row.setdefault("tune_and_build_s", {})[label] = round(time.perf_counter() - t, 1)
        samplers[label] = timing.tvm_sampler(ex, dev, model.inputs, args.min_ms, cold=args.cold_cache)[2]
        outs[label] = executable_outputs(ex, model.inputs, dev)
    ref_label = "eqsat" if tuned else "stock"
    # every build's outputs against stock's; in the tuned flow stock is built untuned for this
    # alone: a tuned build of either pass output can be miscompiled (Inception-v3 with nchwc:
    # LLVM's loop vectorizer, once MetaSchedule had fused a layout copy's loops)
    truth = outs["stock"] if not tuned else executable_outputs(tune.build(model.mod, target, None), model.inputs, dev)
    row["max_rel_diff"] = {k: output_diffs(truth, v)[1] for k, v in outs.items()}
    wrong = wrong_outputs(row["max_rel_diff"])
    if wrong:
        row["wrong_outputs"] = wrong
    times = timing.time_interleaved(samplers, args.repeat)
    row["ms"] = {k: float(np.median(v)) for k, v in times.items()}
    row["p10_p90_ms"] = {k: [float(np.percentile(v, 10)), float(np.percentile(v, 90))] for k, v in times.items()}
    row[f"speedup_vs_{ref_label}"] = {k: row["ms"][ref_label] / v for k, v in row["ms"].items()}
    if args.kernels:  # the two pass outputs (the default flow also built stock)
        pair = {k: exes[k] for k in ("eqsat", f"eqsat+{args.family}")}
        row["kernel_us"] = differing_kernels(
            timing.kernel_times(pair, dev, model.inputs, cold=args.cold_cache), args.kernels
        )
    row["machine"] = provenance.machine()
    row["command"] = "python " + " ".join(sys.argv)
    print(json.dumps(row, indent=1))
    stem = f"family-{args.family}-" + (f"{name}-tuned-t{args.trials}" if tuned else "llvm-default")
    path = ROOT / "benchmarks" / "results" / f"{stem}.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([*rows, row], indent=1) + "\n")
    if wrong:  # the row stays, marked, so the failure is on record; its times mean nothing
        raise SystemExit(wrong_builds_message(row["max_rel_diff"], "stock"))


def differing_kernels(times: dict[str, dict[str, float]], n: int) -> dict[str, dict[str, float]]:
    """Of two builds' per-kernel microseconds, the ``n`` kernels whose times differ most and
    every kernel only one of them calls (0 for the other): where a family's gain or loss is.
    Names are TVM's numbering, so a name both builds call is most often, not always, one kernel."""
    (a, ta), (b, tb) = times.items()
    names = set(ta) | set(tb)
    only = {k for k in names if (k in ta) != (k in tb)}
    top = sorted(names - only, key=lambda k: -abs(ta[k] - tb[k]))[:n]
    keep = sorted(only) + top
    return {a: {k: round(ta.get(k, 0.0), 1) for k in keep}, b: {k: round(tb.get(k, 0.0), 1) for k in keep}}


if __name__ == "__main__":
    main()
