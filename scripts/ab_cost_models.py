"""A/B of two cost models end to end: the pass run on each model with cost model A and
with cost model B, both rewrites built with the stock pipeline of the flow's build (the
default flow: untuned; the tuned flow: MetaSchedule, each rewrite's kernels tuned into one
database with the same budget, those already there at that budget not again), checked
against each other, and timed in interleaved rounds in one process.  How a change to a
shipped model (another objective, more data) is judged on what it makes the pass choose,
not only on its held-out kernel scores.

    python scripts/ab_cost_models.py --a cost_models/llvm-default --b /tmp/residual --models nasnet-a squeezenet
    # the tuned flow, from the benchmark's database (its eqsat variants tuned there first cost nothing)
    python scripts/ab_cost_models.py --flow tuned --trials 32 --mcpu emeraldrapids \
        --work-dir ~/.cache/tvm_eqsat/ms-llvm-emeraldrapids --a roofline --b xgb --models resnet50 --out /tmp/ab
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np
import tvm

from tvm_eqsat import models, provenance, timing, tune, verify

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import POPULATION, device_for, make_target  # noqa: E402
from held_out_e2e import rewrite  # noqa: E402


def build(mod: tvm.IRModule, target: tvm.target.Target, flow: str, trials: int, work_dir: str | None):
    """``mod`` compiled as the flow builds it: the default flow untuned; the tuned flow with
    its kernels tuned into ``work_dir`` (as ``benchmark.py``'s variants are: same population,
    seed 0), then built from that database."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if flow == "default":
            return tvm.compile(mod, target)
        db = tune.tune(mod, target, work_dir, trials, population=POPULATION, progress=True)
        return tune.build(mod, target, db)


def compare(
    model: models.Model,
    a: str,
    b: str,
    flow: str,
    target: tvm.target.Target,
    repeat: int,
    min_ms: float,
    trials: int = 32,
    work_dir: str | None = None,
) -> dict:
    """One model's row: each rewrite's median time (p10-p90), prediction and changes."""
    if flow == "tuned" and not work_dir:
        raise ValueError("the tuned flow needs --work-dir: the database its kernels are tuned into")
    inputs = verify.random_inputs(model.mod["main"], 0)
    dev, samplers, outs, row = device_for(target), {}, {}, {}
    for tag, cost_model in (("a", a), ("b", b)):
        mod, info = rewrite(model.mod, target, cost_model, flow)
        ex = build(mod, target, flow, trials, work_dir)
        vm, args, samplers[tag], _ = timing.tvm_sampler(ex, dev, inputs, min_ms)
        out = vm["main"](*args)
        outs[tag] = out.numpy() if hasattr(out, "numpy") else out[0].numpy()
        row[tag] = {k: info[k] for k in ("predicted_speedup", "changes", "module_hash")}
    times = timing.time_interleaved(samplers, repeat)
    for tag, ts in times.items():
        row[tag] |= {"ms": float(np.median(ts)), "p10_p90": [float(np.percentile(ts, q)) for q in (10, 90)]}
    row["b_over_a"] = row["a"]["ms"] / row["b"]["ms"]  # > 1: B's rewrite runs faster
    row["max_rel_diff"] = float(np.abs(outs["a"] - outs["b"]).max() / max(np.abs(outs["a"]).max(), 1e-30))
    return row


def markdown(doc: dict) -> str:
    lines = [
        f"# A/B of two cost models end to end: {doc['flow']} flow, {doc['target']}",
        "",
        f"A: `{doc['a']}`; B: `{doc['b']}`"
        + (f"; MetaSchedule, {doc['trials']} trials per kernel" if doc["flow"] == "tuned" else "")
        + f". {doc['machine']}, {doc['date']}, commit {doc['commit'][:10]}; "
        f"median of {doc['repeat']} interleaved rounds (p10-p90). Command: `{doc['command']}`.",
        "",
        "| model | A ms | B ms | B over A | A predicted | B predicted | max rel diff |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, r in doc["rows"].items():
        a, b = r["a"], r["b"]
        lines.append(
            f"| {name} | {a['ms']:.4g} ({a['p10_p90'][0]:.4g}-{a['p10_p90'][1]:.4g}) | {b['ms']:.4g} "
            f"({b['p10_p90'][0]:.4g}-{b['p10_p90'][1]:.4g}) | {r['b_over_a']:.3f}x | {a['predicted_speedup']:.3f}x | "
            f"{b['predicted_speedup']:.3f}x | {r['max_rel_diff']:.1e} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="cost model A (a directory, or roofline/xgb/auto)")
    ap.add_argument("--b", required=True, help="cost model B")
    ap.add_argument("--models", nargs="+", default=list(models.SUITE))
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--flow", default="default", choices=["default", "tuned"])
    ap.add_argument("--target", default="llvm", choices=["llvm", "cuda"])
    ap.add_argument("--arch", default="sm_90", help="cuda: the architecture")
    ap.add_argument("--mcpu", default="generic", help="llvm: the CPU to build for, as LLVM names it ('host': this one)")
    ap.add_argument("--trials", type=int, default=32, help="tuned flow: MetaSchedule trials per kernel")
    ap.add_argument("--work-dir", help="tuned flow: the database to tune into and build from")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--min-ms", type=float, default=50.0, help="a sample runs the model for at least this long")
    ap.add_argument("--out", required=True, help="results stem: writes STEM.json and STEM.md")
    args = ap.parse_args(argv)
    doc = {
        "a": args.a,
        "b": args.b,
        "flow": args.flow,
        "target": args.target if args.mcpu == "generic" else f"{args.target} -mcpu={args.mcpu}",
        "repeat": args.repeat,
        "trials": args.trials if args.flow == "tuned" else None,
        "work_dir": args.work_dir,
        "machine": f"{provenance.cpu_name()}",
        "date": datetime.date.today().isoformat(),
        "commit": provenance.source_state().get("commit", "?"),
        "command": " ".join(["python scripts/ab_cost_models.py", *map(shlex.quote, argv or sys.argv[1:])]),
        "rows": {},
    }
    target = make_target(args.target, args.arch, args.mcpu)  # benchmark.py's, for both flows
    for name in args.models:
        model = (models.SMALL if args.small else models.MODELS)[name]()
        doc["rows"][name] = row = compare(
            model, args.a, args.b, args.flow, target, args.repeat, args.min_ms, args.trials, args.work_dir
        )
        print(
            f"{name}: A {row['a']['ms']:.4g} ms, B {row['b']['ms']:.4g} ms, B over A {row['b_over_a']:.3f}x", flush=True
        )
        provenance.write_results(Path(args.out), doc, markdown)
    return verify.wrong_builds_status({k: r["max_rel_diff"] for k, r in doc["rows"].items()}, "A's rewrite")


if __name__ == "__main__":
    sys.exit(main())
