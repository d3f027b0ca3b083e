"""Out of sample, end to end: the pass with a learned model that never saw the model it rewrites.

The shipped default-flow model was trained on the benchmark models' own kernels, and the
pass answers most of their kernels from its measurements (``measured.json``), so the
benchmark's speedups are in-sample.  Here, for each model: a booster is trained on the
shipped dataset without that model's rows, with a measurement table that lacks them too
(a kernel another model also has keeps that model's measurement: the pass would find it
there), and the pass runs with it.  Stock, the pass with the shipped model (in sample) and
the pass with the held-out model are built with the stock default pipeline, checked against
stock on the model's inputs and timed in interleaved rounds.  Where the two rewrites differ,
the measurement says which model chose better.

Default flow only: the tuned flow's rewrites need their new kernels tuned first.

    python scripts/held_out_e2e.py --small              # llvm, the ten small models
    python scripts/held_out_e2e.py --small --models resnet50 vgg19 --repeat 20
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import tvm
from scipy.stats import gmean

import tvm_eqsat
from tvm_eqsat import models, provenance, timing, tune
from tvm_eqsat.cost import shipped_model_dir
from tvm_eqsat.verify import output_diffs, wrong_builds_status
from tvm_eqsat.xgb_model import (
    ROUNDS,
    KernelModel,
    extrapolation,
    load_dataset,
    load_elementwise,
    measured_table,
    train,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when a test imports this file
from benchmark import _flatten, device_for, module_hash  # noqa: E402
from graph_accuracy import put_first  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FLOW = "default"
TIE = 0.02  # measured differences within 2% are ties (the benchmark's graph-accuracy convention)


def held_out_model(directory: Path, model: str, rounds: int, out: Path) -> KernelModel:
    """The booster of the shipped model in ``directory`` trained again without ``model``'s rows
    (same objective and its roofline, tree depth, calibration and features), saved to ``out``."""
    shipped = KernelModel.load(directory)
    samples = [s for s in load_dataset(directory / "dataset.csv") if s.model != model]
    objective = shipped.metadata.get("objective", "latency")
    depth = {"max_depth": shipped.metadata["max_depth"]} if "max_depth" in shipped.metadata else None
    booster = train(samples, rounds, depth, objective=objective, baseline=shipped.metadata.get("baseline"))
    metadata = {
        **shipped.metadata,
        "held_out": model,
        "samples": len(samples),
        "objective": objective,
        "features": list(booster.feature_names),  # this version's columns, which the shipped model may predate
        # extrapolating as the shipped model does (see xgb_model.beyond_range), from its own kernels
        **({"extrapolation": extrapolation(samples)} if "extrapolation" in shipped.metadata else {}),
    }
    kept = KernelModel(booster, metadata, measured_table(samples), load_elementwise(directory))
    kept.save(out)
    return kept


def rewrite(
    mod: tvm.IRModule, target: tvm.target.Target, cost_model: str, flow: str = FLOW
) -> tuple[tvm.IRModule, dict]:
    """The pass's module for ``flow`` and what it reported (predicted speedup, changes, seconds)."""
    new, report = tvm_eqsat.optimize(mod, target, flow=flow, cost_model=cost_model)
    if report.alarms:
        raise RuntimeError(f"the pass raised alarms: {'; '.join(report.alarms)}")
    fns = list(report.functions.values())
    before, after = sum(f.cost_before for f in fns), sum(f.cost_after for f in fns)
    return new, {
        "predicted_speedup": before / after if after > 0 else 1.0,
        "changes": "; ".join(c for f in fns for c in f.changes),
        "pass_seconds": round(report.seconds, 3),
        "module_hash": module_hash(new),
    }


def evaluate(name: str, small: bool, target: tvm.target.Target, args, work: Path) -> dict:
    """One model: stock, in-sample and held-out rewrites, built, checked and timed."""
    model = (models.SMALL if small else models.MODELS)[name]()
    directory = shipped_model_dir(target.kind.name, FLOW)
    held_dir = work / name
    held_out_model(directory, name, args.rounds, held_dir)
    mods = {"stock": model.mod}
    row: dict = {"model": name}
    for variant, spec in (("in_sample", "xgb"), ("held_out", str(held_dir))):
        mods[variant], row[variant] = rewrite(model.mod, target, spec)
    same = row["in_sample"]["module_hash"] == row["held_out"]["module_hash"]
    row["same_graph"] = same
    dev = device_for(target)
    samplers, outputs = {}, {}
    for variant, mod in mods.items():
        if variant == "held_out" and same:
            continue  # the same module: timed once
        ex = tune.build(mod, target)
        vm, vargs, samplers[variant], _ = timing.tvm_sampler(ex, dev, model.inputs, args.min_ms)
        outputs[variant] = _flatten(vm["main"](*vargs))
    times = timing.time_interleaved(samplers, args.repeat)
    if same:
        times["held_out"], outputs["held_out"] = times["in_sample"], outputs["in_sample"]
    stock = float(np.median(times["stock"]))
    row["stock_ms"] = stock
    row["floor"] = float((np.percentile(times["stock"], 90) - np.percentile(times["stock"], 10)) / 2 / stock)
    for variant in ("in_sample", "held_out"):
        ms = float(np.median(times[variant]))
        row[variant].update(ms=ms, speedup=stock / ms, max_rel_diff=output_diffs(outputs["stock"], outputs[variant])[1])
    ratio = row["in_sample"]["ms"] / row["held_out"]["ms"]
    row["held_out_vs_in_sample"] = ratio
    row["verdict"] = verdict(same, ratio)
    return row


def verdict(same: bool, ratio: float) -> str:
    """Which pass chose better, from in-sample ms over held-out ms (within ``TIE``: neither)."""
    if same:
        return "same graph"
    if abs(ratio - 1) <= TIE:
        return "tie"
    return "held out better" if ratio > 1 else "in sample better"


def markdown(doc: dict) -> str:
    rows = doc["rows"]
    lines = [
        f"# Out of sample, end to end: {doc['target']}, {FLOW} flow{' (small models)' if doc['small'] else ''}",
        "",
        f"{doc['machine']}; TVM {doc['versions']['tvm']}; {doc['date']}. Command: `{doc['command']}`.",
        "",
        "Per model, the pass ran twice: with the shipped default-flow model (trained on this model's kernels too: "
        "in sample) and with a model trained without this model's rows and measurements (held out). Latency: median "
        f"of {doc['repeat']} interleaved samples, stock's default build of each module; floor: stock's p10-p90 "
        "half-spread. Predicted: the pass's own predicted speedup over stock.",
        "",
        "| model | stock ms | in sample: speedup (predicted) | held out: speedup (predicted) | same graph | "
        "held out vs in sample | max rel diff (held out) | floor |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        i, h = r["in_sample"], r["held_out"]
        lines.append(
            f"| {r['model']} | {r['stock_ms']:.4g} | {i['speedup']:.3f}x ({i['predicted_speedup']:.3f}x) | "
            f"{h['speedup']:.3f}x ({h['predicted_speedup']:.3f}x) | {'yes' if r['same_graph'] else 'no'} | "
            f"{r['held_out_vs_in_sample']:.3f}x ({r['verdict']}) | {h['max_rel_diff']:.1e} | ±{r['floor'] * 100:.1f}% |"
        )
    s = doc["summary"]
    lines += [
        "",
        f"Geometric-mean speedup over stock: **held out {s['held_out_geomean']:.3f}x**, in sample "
        f"{s['in_sample_geomean']:.3f}x, over {len(rows)} models. The held-out model chose the same graph on "
        f"{s['same_graph']} of {len(rows)}; where it differed: {s['verdicts']}.",
        "",
        "What each rewrite changed (held out | in sample, where they differ):",
        "",
        *(
            f"- {r['model']}: {r['held_out']['changes'] or 'nothing'}"
            + ("" if r["same_graph"] else f" | {r['in_sample']['changes'] or 'nothing'}")
            for r in rows
        ),
        "",
    ]
    return "\n".join(lines)


def report_section(doc: dict, name: str) -> str:
    """The summary ``GRAPH_REPORT.md`` gives first: these are the figures that were not trained on."""
    s, rows = doc["summary"], doc["rows"]
    return "\n".join(
        [
            f"## Out of sample, end to end: {FLOW} flow{', small models' if doc['small'] else ''} "
            f"(`{name}.md`, {doc['date'][:10]})",
            "",
            "The pass ran with a model trained without the model it rewrote (its rows and measurements left "
            f"out), beside the shipped model (in sample); measured speedups over stock, {doc['machine']}, "
            f"median of {doc['repeat']} interleaved samples (`scripts/held_out_e2e.py`).",
            "",
            "| model | held out | in sample | same graph | held out vs in sample |",
            "|---|---|---|---|---|",
            *(
                f"| {r['model']} | {r['held_out']['speedup']:.3f}x | {r['in_sample']['speedup']:.3f}x | "
                f"{'yes' if r['same_graph'] else 'no'} | {r['held_out_vs_in_sample']:.3f}x ({r['verdict']}) |"
                for r in rows
            ),
            "",
            f"Geometric mean over stock: **held out {s['held_out_geomean']:.3f}x**, in sample "
            f"{s['in_sample_geomean']:.3f}x; same graph on {s['same_graph']} of {len(rows)} models.",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=None, choices=sorted(models.MODELS), help="default: the suite")
    p.add_argument("--small", action="store_true", help="the reduced models")
    p.add_argument("--target", default="llvm", choices=["llvm"])
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--min-ms", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=None, help="boosting rounds (default: xgb_model.ROUNDS)")
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument(
        "--report",
        default=None,
        help="the graph report that gives these figures first (default cost_models/<target>/GRAPH_REPORT.md)",
    )
    args = p.parse_args(argv)
    args.rounds = args.rounds or ROUNDS
    target = tvm.target.Target(args.target)
    if shipped_model_dir(target.kind.name, FLOW) is None:
        raise SystemExit(f"no {FLOW}-flow model shipped for {args.target}: nothing to hold out")
    tune.use_all_cores()
    names = args.models or list(models.SUITE)
    rows = []
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            print(f"{name} ...", file=sys.stderr, flush=True)
            rows.append(evaluate(name, args.small, target, args, Path(work)))
            r = rows[-1]
            print(
                f"{name}: held out {r['held_out']['speedup']:.3f}x, in sample {r['in_sample']['speedup']:.3f}x, "
                f"{r['verdict']}",
                file=sys.stderr,
                flush=True,
            )
    verdicts: dict[str, int] = {}
    for r in rows:
        if not r["same_graph"]:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
    doc = {
        "target": args.target,
        "small": args.small,
        "repeat": args.repeat,
        "machine": provenance.cpu_name(),
        "versions": {"tvm": provenance.version("apache-tvm"), "xgboost": provenance.version("xgboost")},
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": "python scripts/held_out_e2e.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "elapsed_s": round(time.perf_counter() - start, 1),
        "rows": rows,
        "summary": {
            "held_out_geomean": float(gmean([r["held_out"]["speedup"] for r in rows])),
            "in_sample_geomean": float(gmean([r["in_sample"]["speedup"] for r in rows])),
            "same_graph": sum(r["same_graph"] for r in rows),
            "verdicts": ", ".join(f"{k} {v}" for k, v in sorted(verdicts.items())) or "none",
        },
    }
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"held-out-e2e-{args.target}-{FLOW}{'-small' if args.small else ''}"
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    text = markdown(doc)
    (out / f"{stem}.md").write_text(text)
    report = Path(args.report or ROOT / "cost_models" / args.target / "GRAPH_REPORT.md")
    put_first(report, stem, report_section(doc, stem))
    print(text)
    diffs = {f"{r['model']} {v}": r[v]["max_rel_diff"] for r in rows for v in ("in_sample", "held_out")}
    return wrong_builds_status(diffs, "stock")


if __name__ == "__main__":
    sys.exit(main())
