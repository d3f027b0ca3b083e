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

    python scripts/held_out_e2e.py --small              # llvm, the ten small models
    python scripts/held_out_e2e.py --small --models resnet50 vgg19 --repeat 20

The tuned flow (``--flow tuned``): what ``auto`` ships there is the roofline, so the held-out
model's rewrite is timed against the roofline's, each with its kernels tuned first.  Per model
it runs ``benchmark.py`` with the variants stock, eqsat (``--cost-model auto``) and
eqsat-learned (``--learned-model``: the held-out model), passing on the benchmark's own options
(the CPU, trials, cold caches, rules, repeats; ``--tune-only`` to tune first in the background):

    python scripts/held_out_e2e.py --flow tuned --models squeezenet resnet50 --mcpu znver3 \
        --trials 32 --cold-cache --repeat 20 [--rules ...] [--tune-only]

Whether each decision was right (``--decisions``, same options; nothing tuned, no model timed):
per rewrite, its conv kernels whose conv was tuned in more than one layout, and how many run in
the fastest, by the tuner's records or, with ``--retime 15``, each kernel timed afresh.
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
from tvm_eqsat.graph import module_graphs
from tvm_eqsat.harvest import Harvested, lookup
from tvm_eqsat.harvest import retime as retime_kernels
from tvm_eqsat.measure import kernel_workloads
from tvm_eqsat.tune import tuning_target
from tvm_eqsat.tuning_db import read_database
from tvm_eqsat.verify import output_diffs, wrong_builds_status
from tvm_eqsat.xgb_model import (
    ROUNDS,
    KernelModel,
    decision_counts,
    extrapolation,
    layout_decisions,
    load_dataset,
    load_elementwise,
    measured_table,
    train,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when a test imports this file
import benchmark  # noqa: E402
from benchmark import LEARNED, _flatten, device_for, module_hash  # noqa: E402
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


def tuned_rows(csv_rows: list[dict]) -> list[dict]:
    """Per model the benchmark timed: stock, the roofline's rewrite (eqsat, what ``auto`` ships
    for the tuned flow) and the held-out model's (eqsat-learned), with the model's noise floor
    (with the A/A control, stock tuned again, where ``--aa`` timed it)."""
    out = []
    for name, vs in benchmark._by_model(csv_rows).items():
        if not {"stock", "eqsat", LEARNED} <= set(vs):
            continue
        stock, roof, held = vs["stock"], vs["eqsat"], vs[LEARNED]
        ratio, floor, same = benchmark.learned_vs_eqsat(vs)
        if same:
            word = "same graph"
        elif abs(ratio - 1) <= floor:
            word = "within noise"
        else:
            word = "held out better" if ratio > 1 else "roofline better"
        out.append(
            {
                "model": name,
                "stock_ms": float(stock["median_ms"]),
                "floor": floor,
                "aa": benchmark.has_aa(vs),
                **{
                    key: {
                        "ms": float(r["median_ms"]),
                        "speedup": float(r["speedup_vs_stock"]),
                        "predicted_speedup": float(r["predicted_speedup"] or 1.0),
                        "max_rel_diff": float(r["max_rel_diff"] or 0.0),
                        "changes": r["changes"],
                    }
                    for key, r in (("roofline", roof), ("held_out", held))
                },
                "same_graph": same,
                "held_out_vs_roofline": ratio,
                "verdict": word,
            }
        )
    return out


def tuned_section(
    rows: list[dict],
    stem: str,
    machine: str,
    command: str,
    date: str,
    same: dict | None = None,
    decisions: dict | None = None,
) -> str:
    """The tuned flow's out-of-sample figures, for the top of the shipped model's graph report;
    ``same``: the models whose held-out rewrite was the roofline's (``same_rewrite``), not timed;
    ``decisions``: each model's layout decisions per rewrite (``layout_choices``)."""
    same = same or {}
    return "\n".join([*_timed_lines(rows, stem, machine, command, date, same), *_decision_lines(decisions or {})])


def _decision_lines(decisions: dict) -> list[str]:
    """The layout decisions of each rewrite, counted against the measured kernels."""
    if not decisions:
        return []

    def cell(d: dict) -> str:
        return f"{d['fastest']} of {d['convs']} ({d['lost_us'] / 1000:.2f} ms lost)" if d["convs"] else "no such conv"

    def times(d: dict) -> str:
        return f"afresh, {d['retime']} samples" if d.get("retime") else "records"

    return [
        "",
        "Layout decisions, kernel by kernel (`held_out_e2e.py --decisions`): of each rewrite's conv kernels "
        "(Winograd's transforms, grouped convs, among them) whose conv was tuned in more than one layout "
        "(NCHW, NHWC, NCHW16c), how many run in the layout "
        "measured fastest, and the kernel time the others lose to it (the shipped dataset's times, the "
        "tuning database's for a kernel it lacks; layout copies not counted). Times: the tuner's records "
        "(a record taken while another process ran is long, and one long record makes a large loss), or "
        "each kernel built with its tuned schedule and timed afresh (`--retime`); either way one 32-trial "
        "tuning per kernel, whose lottery decides close pairs.",
        "",
        "| model | held out: fastest layout | roofline: fastest layout | times |",
        "|---|---|---|---|",
        *(f"| {m} | {cell(d['held_out'])} | {cell(d['roofline'])} | {times(d)} |" for m, d in decisions.items()),
    ]


def _timed_lines(rows: list[dict], stem: str, machine: str, command: str, date: str, same: dict) -> list[str]:
    """The timed models' table and geometric means."""
    return [
        f"## Out of sample, end to end: tuned flow (`{stem}.md`, {date[:10]})",
        "",
        "Per model, the pass ran with a model trained without that model's kernels (its rows and "
        'measurements left out) and with the roofline, which `cost_model="auto"` uses for the tuned '
        f"flow; each rewrite's kernels tuned, all timed in the same run, {machine} "
        f"(last command: `{command}`; each model's in the results file's sidecar). Floor: the model's "
        "noise floor (stock's p10-p90 half-spread, and its A/A control where tuned).",
        "",
        "| model | held out: speedup (predicted) | roofline: speedup (predicted) | same graph | "
        "held out vs roofline | floor |",
        "|---|---|---|---|---|---|",
        *(
            f"| {r['model']} | {r['held_out']['speedup']:.3f}x ({r['held_out']['predicted_speedup']:.3f}x) | "
            f"{r['roofline']['speedup']:.3f}x ({r['roofline']['predicted_speedup']:.3f}x) | "
            f"{'yes' if r['same_graph'] else 'no'} | {r['held_out_vs_roofline']:.3f}x ({r['verdict']}) | "
            f"±{100 * r['floor']:.1f}%{'' if r['aa'] else ' (no A/A)'} |"
            for r in rows
        ),
        *(
            f"| {m} | not timed ({d['held_out_predicted']:.3f}x) | not timed ({d['roofline_predicted']:.3f}x) | "
            "yes | 1.000x (same graph) | - |"
            for m, d in same.items()
        ),
        "",
        (
            f"Geometric mean over stock of the {len(rows)} models timed: **held out "
            f"{gmean([r['held_out']['speedup'] for r in rows]):.3f}x**, roofline "
            f"{gmean([r['roofline']['speedup'] for r in rows]):.3f}x"
            if rows
            else "No model timed"
        )
        + (f"; on {len(same)} more the held-out model chose the roofline's graph." if same else "."),
    ]


def rewrites(name: str, bargs) -> tuple[benchmark.Variant, benchmark.Variant]:
    """``name`` rewritten by the pass with the roofline (eqsat) and with the held-out model
    (``bargs.learned_model``), as the benchmark runs them."""
    model = (models.SMALL if bargs.small else models.MODELS)[name]()
    target = benchmark.make_target(bargs.target, bargs.arch, bargs.mcpu)
    roof, held = (
        benchmark.make_variant(v, model.mod, target, benchmark.pass_options(bargs, v)) for v in ("eqsat", LEARNED)
    )
    return roof, held


def same_rewrite(name: str, bargs) -> dict | None:
    """Where the held-out model (``bargs.learned_model``) rewrites ``name`` as the roofline does
    (one module: nothing to tune or time), the module's hash and both predicted speedups; else None."""
    vs = rewrites(name, bargs)
    hashes = {module_hash(v.mod) for v in vs}
    if len(hashes) > 1:
        return None
    return {
        "module_hash": hashes.pop(),
        "roofline_predicted": vs[0].predicted_speedup,
        "held_out_predicted": vs[1].predicted_speedup,
    }


def layout_choices(name: str, bargs, samples, work_dir: str, retime: int = 0, fresh: dict | None = None) -> dict:
    """Per rewrite of ``name`` (the roofline's, the held-out model's): its layout decisions
    counted against the measured kernels (``xgb_model.decision_counts``): ``samples``, the
    shipped dataset's tuned kernels, else the tuning database in ``work_dir`` for a chosen
    kernel the dataset lacks (the held-out rewrites' own).  ``retime``: each kernel of a
    decision built with its tuned schedule and timed afresh, ``retime`` samples, instead of its
    record (a record taken while another process ran is long); ``fresh`` keeps those times by
    kernel, so a kernel is timed once."""
    target = benchmark.make_target(bargs.target, bargs.arch, bargs.mcpu)
    fresh = {} if fresh is None else fresh
    database, tgt = read_database(work_dir), tuning_target(target)  # read once: it takes seconds

    def recorded_us(w) -> float | None:  # a chosen kernel the dataset lacks: its database record
        try:
            found = lookup(database, w, tgt)
        except Exception:  # noqa: BLE001 - a kernel TVM cannot lower is in no database (as harvest skips it)
            return None
        return None if found is None else found.median_us

    out = {}
    for key, variant in zip(("roofline", "held_out"), rewrites(name, bargs), strict=True):
        kernels = [w for graph in module_graphs(variant.mod) for w in kernel_workloads(graph)]
        decisions = layout_decisions(kernels, samples, recorded_us)
        if retime:
            decisions = _timed_afresh(decisions, work_dir, target, retime, fresh, database)
        out[key] = decision_counts(decisions)
    return out


def _timed_afresh(decisions: list[dict], work_dir: str, target, repeat: int, fresh: dict, database=None) -> list[dict]:
    """``decisions`` with their kernels' fresh times (``harvest.retime``, the kernels not in
    ``fresh`` yet, in one batch), less those whose chosen kernel, or every other, failed to
    build or run."""
    todo = {w.key(): w for d in decisions for w in d["kernels"].values() if w.key() not in fresh}
    if todo:
        found = [Harvested(w, 0.0, 0) for w in todo.values()]
        timed = retime_kernels(found, work_dir, target, repeat, progress=True, database=database)
        fresh.update({h.workload.key(): None if m is None else m.median_us for h, m in timed})
    out = []
    for d in decisions:
        us = {layout: fresh[w.key()] for layout, w in d["kernels"].items() if fresh[w.key()] is not None}
        if d["layout"] in us and len(us) > 1:
            out.append({**d, "us": us})
    return out


def main_tuned(args, passthrough: list[str], argv: list[str]) -> int:
    """``--flow tuned``: per model, train the held-out model, then ``benchmark.py`` with stock,
    eqsat and eqsat-learned (tuning what it lacks; a model already timed is skipped unless
    ``--force``); then the summary at the top of the shipped model's graph report."""
    names = args.models or list(models.SUITE)
    common = ["--flow", "tuned", "--tag", args.tag, "--repeat", str(args.repeat), "--min-ms", str(args.min_ms)]
    common += ["--out-dir", args.out_dir, *(["--small"] if args.small else []), *passthrough]
    bargs = benchmark.parse_args(["--models", *names, *common])
    directory = shipped_model_dir("llvm", "tuned", bargs.mcpu)
    if directory is None:
        raise SystemExit(f"no tuned-flow model shipped for llvm -mcpu={bargs.mcpu}: nothing to hold out")
    held_root = Path(args.held_dir).expanduser() / directory.name
    stem = benchmark._stem(bargs)
    same_path = Path(args.out_dir) / f"held-out-e2e-{stem}-same.json"
    same = json.loads(same_path.read_text()) if same_path.is_file() else {}
    status = 0
    decisions_path = Path(args.out_dir) / f"held-out-e2e-{stem}-decisions.json"
    decisions = json.loads(decisions_path.read_text()) if decisions_path.is_file() else {}
    fresh_path = Path(args.out_dir) / f"held-out-e2e-{stem}-fresh.json"  # --retime's times, by kernel
    fresh = json.loads(fresh_path.read_text()) if args.retime and fresh_path.is_file() else {}
    samples = load_dataset(directory / "dataset.csv", flow="tuned") if args.decisions else []
    work_dir = bargs.work_dir or benchmark.default_work_dir(benchmark.target_name(bargs))
    for name in names:
        held = held_root / name
        held_out_model(directory, name, args.rounds, held)
        print(f"{name}: held-out model in {held}", file=sys.stderr, flush=True)
        bargs.learned_model = str(held)
        if args.decisions:  # counted from the measured kernels: nothing tuned or the models timed
            decisions[name] = {
                **layout_choices(name, bargs, samples, work_dir, args.retime, fresh),
                "retime": args.retime,
            }
            decisions_path.write_text(json.dumps(decisions, indent=1) + "\n")
            if args.retime:
                fresh_path.write_text(json.dumps(fresh) + "\n")
            continue
        found = same_rewrite(name, bargs) if args.skip_same else None
        listed = same.pop(name, None)  # a model timed now is no longer listed as the same graph
        if found:
            same[name] = found
        if found or listed:
            same_path.write_text(json.dumps(same, indent=1) + "\n")
        if found:
            print(f"{name}: the held-out model's rewrite is the roofline's: not timed", file=sys.stderr)
            continue
        variants = ["stock", *(["stock-aa"] if args.aa else []), "eqsat", LEARNED]
        bench_argv = ["--models", name, "--variants", *variants, "--learned-model", str(held)]
        status = max(status, benchmark.main([*bench_argv, *common]))
    if bargs.tune_only and not args.decisions:
        return status
    rows = tuned_rows(benchmark.read_rows(Path(args.out_dir) / f"{stem}.csv"))  # every model the file holds
    rows = [r for r in rows if r["model"] not in same]  # timed earlier, found the same since
    if not rows and not same:
        print("no model has all three variants timed", file=sys.stderr)
        return status or 1
    sidecar_path = Path(args.out_dir) / f"{stem}.json"
    sidecar = json.loads(sidecar_path.read_text()) if sidecar_path.is_file() else {"machine": {}, "date": ""}
    command = "python scripts/held_out_e2e.py " + " ".join(shlex.quote(a) for a in argv)
    key = f"held-out-e2e-{stem}"
    when = sidecar["date"] or datetime.datetime.now(datetime.UTC).isoformat()
    section = tuned_section(rows, stem, sidecar["machine"].get("machine") or "", command, when, same, decisions)
    report = Path(args.report or directory / "GRAPH_REPORT.md")
    if not report.exists():  # the first section of a model's report: under a title of its own
        report.write_text(f"# Graph-level accuracy ({directory.name})\n")
    put_first(report, key, section)
    print(section)
    return status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=None, choices=sorted(models.MODELS), help="default: the suite")
    p.add_argument("--small", action="store_true", help="the reduced models")
    p.add_argument("--target", default="llvm", choices=["llvm"])
    p.add_argument("--flow", default=FLOW, choices=["default", "tuned"])
    p.add_argument("--tag", default="held-out", help="tuned flow: the benchmark's results files' suffix")
    p.add_argument(
        "--aa",
        action="store_true",
        help="tuned flow: time stock tuned again too (the A/A control; its kernels tuned if missing), "
        "so that a model's floor holds the tuning lottery",
    )
    p.add_argument(
        "--skip-same",
        action="store_true",
        help="tuned flow: run the pass with both cost models first and neither tune nor time a model "
        "whose two rewrites are one module (it is listed as the same graph)",
    )
    p.add_argument(
        "--decisions",
        action="store_true",
        help="tuned flow: instead of tuning and timing, count each rewrite's layout decisions against "
        "the measured kernels (the shipped dataset, else the tuning database): how many convs run in "
        "their fastest layout, and the time the others lose",
    )
    p.add_argument(
        "--retime",
        type=int,
        default=0,
        metavar="N",
        help="with --decisions: time each kernel of a decision afresh with its tuned schedule, N samples "
        "(a quiet machine), instead of the tuner's records",
    )
    p.add_argument(
        "--held-dir",
        default="~/.cache/tvm_eqsat/held-out",
        help="tuned flow: where the held-out models are kept (a --tune-only run and the timing run share them)",
    )
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--min-ms", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=None, help="boosting rounds (default: xgb_model.ROUNDS)")
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument(
        "--report",
        default=None,
        help="the graph report that gives these figures first (default cost_models/<target>/GRAPH_REPORT.md)",
    )
    args, passthrough = p.parse_known_args(argv)
    args.rounds = args.rounds or ROUNDS
    if args.retime and not args.decisions:
        p.error("--retime times the kernels of --decisions: give both")
    if args.decisions and args.flow != "tuned":
        p.error("--decisions counts the tuned flow's layout decisions: give --flow tuned")
    if args.flow == "tuned":
        return main_tuned(args, passthrough, list(sys.argv[1:] if argv is None else argv))
    if passthrough:
        p.error(f"unrecognized arguments: {' '.join(passthrough)} (the benchmark's options are for --flow tuned)")
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
