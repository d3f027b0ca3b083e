"""How many fresh kernels a learned model needs on a new machine (the few-shot curve).

A user's machine is not the one the shipped model was timed on.  ``train_cost_model.py
--finetune-from`` continues the shipped booster on a few fresh measurements; this script
says, measured, how many it takes.  It needs one set of kernels timed on two machines: the
*old* machine's dataset (what the shipped model learned) and the *new* one's.

For each model of the new dataset in turn (held out, as in ``train_cost_model.py``):

- ``old``: a booster trained on the old machine's kernels of the other models (none of the
  held-out model's kernels, whichever model the old dataset filed them under);
- for k fresh kernels, drawn at random from the new machine's kernels of the other models
  (three draws; a larger k extends the same draw):
  - ``fine-tuned``: ``old`` boosted further on them (``train_cost_model.py --finetune-from``);
  - ``rescaled``: ``old`` times one factor, the median of measured over predicted on them;
  - ``scratch``: a booster trained on them alone;
- ``all``: a booster trained on every new-machine kernel of the other models (the ceiling).

The held-out model's kernels are predicted by each and scored against the new machine's
measurements, pooled over the held-out models: Spearman, the share within 20%, and the
share of NCHW/NHWC pairs ordered right (the layout choice moves between machines).  Every
predictor prices epilogues with the new machine's element-wise calibration (``measure.
elementwise_ns``, under a minute), so k counts kernels only.

    # the default-flow dataset was timed on a Xeon VM (commit fdf6cae) and again on an EPYC
    python scripts/few_shot.py --old-rev fdf6cae --new cost_models/llvm-default
    # tuned flow: the generic-code model's kernels (EPYC, tuned warm) to Zen 5 code tuned cold
    python scripts/few_shot.py --old cost_models/llvm --new cost_models/llvm-znver5 --objective residual
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tvm_eqsat import provenance
from tvm_eqsat.xgb_model import (
    OBJECTIVES,
    PARAMS,
    ROUNDS,
    TUNED_MIN_TRIALS,
    KernelModel,
    finetune_rounds,
    layout_pairs,
    load_dataset,
    load_elementwise,
    roofline_baseline,
    sample_features,
    sample_items,
    train,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when a test imports this file
from train_cost_model import metrics, pair_orders  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
KS = (0, 10, 25, 50, 100, 200, 400, 800, 1200)
SEEDS = (0, 1, 2)
METHODS = ("fine-tuned", "rescaled", "scratch")
OBJECTIVE_WORDS = {"latency": "the log of latency", "residual": "the log of latency over the tuned roofline"}
# The targets for held-out kernels (#30): Spearman and the share within 20%
TARGET_SPEARMAN, TARGET_WITHIN_20 = 0.95, 0.80


def curve(
    old,
    new,
    ks=KS,
    seeds=SEEDS,
    rounds: int = ROUNDS,
    progress=None,
    objective: str = "latency",
    settings: tuple[dict, dict] = ({}, {}),
) -> dict:
    """Predictions of each method for every kernel of ``new`` (its model held out), per k
    and draw, and the ceiling's: ``{"all": array, (method, k, seed): array}``.

    A fine-tuned booster gets ``finetune_rounds(rounds)`` more, as ``train_cost_model.py
    --finetune-from`` gives it; ``scratch`` needs 2 kernels.  ``objective``: what every
    booster learns (``train_cost_model.py --objective``; the tuned-flow models learn the
    roofline's correction).  ``settings``: how each machine's model was trained (``_settings``
    of its metadata): the roofline its residual boosters learn over (``baseline``; absent: the
    plain one) and their ``max_depth``; a booster from the old machine corrects the new
    machine's roofline when it predicts there, and boosting on new kernels goes on with the
    new machine's settings."""
    old_set, new_set = settings
    new_spec = new_set.get("baseline")

    def fit(samples, n, base=None, machine=new_set):
        params = {"max_depth": machine["max_depth"]} if "max_depth" in machine else None
        return train(samples, n, params, base=base, objective=objective, baseline=machine.get("baseline"))

    x = sample_features(new)
    new_roofline = roofline_baseline(sample_items(new), new_spec) if objective == "residual" and new_spec else None

    def predict(booster, features, rows=slice(None)):
        model = KernelModel(booster, {"objective": objective})
        return model.predict_us(features, None if new_roofline is None else new_roofline[rows])

    epilogue = np.array([s.epilogue_us for s in new])
    kernel = np.array([s.kernel_us for s in new])
    groups = np.array([s.model for s in new])
    preds: dict = {"all": np.zeros(len(new))}
    for key in [("old", 0, seed) if k == 0 else (m, k, seed) for k in ks for seed in seeds for m in METHODS]:
        preds[key] = np.full(len(new), np.nan)
    if new_roofline is not None:  # what the pass prices the new machine with before learning anything
        preds.update({("roofline", 0, seed): new_roofline.copy() for seed in seeds})
    for g in sorted(set(groups)):
        test = groups == g
        unseen = {s.workload.key() for s, t in zip(new, test) if t}
        base = fit([s for s in old if s.model != g and s.workload.key() not in unseen], rounds, machine=old_set)
        base_kernel = predict(base, x)
        preds["all"][test] = predict(fit([s for s, t in zip(new, test) if not t], rounds), x[test], test)
        for seed in seeds:
            order = np.random.default_rng(seed).permutation(np.flatnonzero(~test))
            for k in ks:
                pick = order[:k]
                if k == 0:
                    preds[("old", 0, seed)][test] = base_kernel[test]
                    continue
                picked = [new[i] for i in pick]
                fine = fit(picked, finetune_rounds(rounds), base=base)
                preds[("fine-tuned", k, seed)][test] = predict(fine, x[test], test)
                preds[("rescaled", k, seed)][test] = base_kernel[test] * np.median(kernel[pick] / base_kernel[pick])
                if k >= 2:
                    preds[("scratch", k, seed)][test] = predict(fit(picked, rounds), x[test], test)
        if progress:
            progress(g)
    return {key: p + epilogue for key, p in preds.items()}


def score(new, predictions: dict) -> dict:
    """Pooled metrics of each prediction set (NaN sets skipped), with the share of layout
    pairs ordered right: ``{key: metrics + {"pairs_right": share}}``."""
    y = np.array([s.median_us for s in new])
    pairs = layout_pairs(new)
    out = {}
    for key, pred in predictions.items():
        if np.isnan(pred).any():
            continue
        m = metrics(y, pred)
        if pairs:
            m["pairs_right"] = pair_orders(pairs, y, {"p": pred})["p"]["right"] / len(pairs)
        out[key] = m
    return out


def summary(scores: dict, ks, seeds) -> list[dict]:
    """One row per (method, k), the new machine's roofline and the old-machine booster first
    (k = 0): the median over draws of each figure, and its range."""
    rows = []
    for method in ("roofline", "old", *METHODS):
        for k in [0] if method in ("roofline", "old") else ks:
            draws = [scores[(method, k, s)] for s in seeds if (method, k, s) in scores]
            if not draws:
                continue
            row = {"method": method, "k": k, "draws": len(draws)}
            for name in ("spearman", "within_20pct", "median_rel_error", "pairs_right"):
                values = [d[name] for d in draws if name in d]
                if values:
                    row[name] = float(np.median(values))
                    row[name + "_range"] = [float(min(values)), float(max(values))]
            rows.append(row)
    return rows


def kernels_needed(rows: list[dict], ceiling: dict, method: str) -> dict:
    """The fewest fresh kernels with which ``method`` (median over draws) reaches the issue's
    targets, and with which it comes within 0.01 Spearman and 5 points within-20% of the
    ceiling (0: the old-machine booster already does; None: not within the k tried)."""

    def first(ok) -> int | None:
        return next((r["k"] for r in rows if r["method"] in ("old", method) and ok(r)), None)

    return {
        "targets": first(lambda r: r["spearman"] >= TARGET_SPEARMAN and r["within_20pct"] >= TARGET_WITHIN_20),
        "ceiling": first(
            lambda r: (
                r["spearman"] >= ceiling["spearman"] - 0.01 and r["within_20pct"] >= ceiling["within_20pct"] - 0.05
            )
        ),
    }


def _git_show(rev: str, path: Path, out: Path) -> Path:
    out.write_bytes(
        subprocess.run(["git", "show", f"{rev}:{path.as_posix()}"], cwd=ROOT, check=True, capture_output=True).stdout
    )
    return out


def _settings(model_dir: Path) -> dict:
    """How a model directory's booster was trained, as ``curve`` repeats it: the roofline its
    residual learns over (``baseline``) and its trees' ``max_depth``, where its metadata names them."""
    meta = model_dir / "metadata.json"
    meta = json.loads(meta.read_text()) if meta.exists() else {}
    return {k: meta[k] for k in ("baseline", "max_depth") if meta.get(k) is not None}


def _settings_words(report: dict) -> str:
    """How each machine's boosters were trained, for the report."""

    def words(machine: dict) -> str:
        spec = machine.get("baseline")
        over = f"over the pass's roofline for `{spec.get('mcpu', 'generic')}` code" if spec else "over the plain one"
        depth = f"trees of depth {machine.get('max_depth', PARAMS['max_depth'])}"
        return f"{over}, {depth}" if report["objective"] == "residual" else depth

    settings = report.get("settings", {})
    return f" (on the old machine {words(settings.get('old', {}))}; on the new one {words(settings.get('new', {}))})"


def _pct(v) -> str:
    return f"{v * 100:.0f}%"


def markdown(report: dict) -> str:
    ceiling = report["ceiling"]
    lines = [
        "# Few-shot adaptation to a new machine",
        "",
        f"Produced by `{report['command']}` on {report['date']} in {report['seconds']:.0f} s.",
        "",
        f"Old machine: {report['old']} ({report['old_kernels']} kernels). New machine: {report['new']} "
        f"({report['new_kernels']} kernels, {report['shared_kernels']} of them timed on both; the same kernel runs a "
        f"median {report['new_over_old']:.2f}x as long on the new one, Spearman {report['machines_spearman']:.3f} "
        "between the two machines' times).",
        "",
        "Each model's kernels are predicted with the model held out (no method saw them on either machine); "
        f"k fresh kernels are drawn at random from the other models' new-machine kernels, {len(report['seeds'])} draws "
        "per k (figures: the median over draws, the range in brackets). `old` is the old machine's booster as it is; `fine-tuned` continues the old-machine "
        "booster on them (`train_cost_model.py --finetune-from`), `rescaled` multiplies it by one factor, "
        "`scratch` trains on them alone; `roofline`, where the new machine's model learns over the pass's "
        "roofline, is that roofline with nothing learned (it prices a conv's two layouts alike: its layout "
        "pairs are ties, counted wrong). "
        f"Every booster learns {OBJECTIVE_WORDS[report['objective']]}{_settings_words(report)}; tuned-flow kernels tuned with "
        f"fewer than {report['min_trials']} trials are left out on both machines. Layout pairs: the NCHW/NHWC pairs of one conv, ordered right "
        f"({report['pairs']} pairs; always answering NCHW is right in {_pct(report['nchw_right'])}).",
        "",
        "| method | fresh kernels | Spearman | within 20% | median error | layout pairs right |",
        "|---|---|---|---|---|---|",
    ]

    def cell(row, name, fmt):
        lo, hi = row[name + "_range"]
        return fmt(row[name]) + ("" if lo == hi else f" ({fmt(lo)}-{fmt(hi)})")

    for row in report["rows"]:
        lines.append(
            f"| {row['method']} | {row['k']} | {cell(row, 'spearman', lambda v: f'{v:.3f}')} | "
            f"{cell(row, 'within_20pct', _pct)} | {cell(row, 'median_rel_error', _pct)} | "
            + (cell(row, "pairs_right", _pct) if "pairs_right" in row else "-")
            + " |"
        )
    lines.append(
        f"| all (ceiling) | every other model's | {ceiling['spearman']:.3f} | {_pct(ceiling['within_20pct'])} | "
        f"{_pct(ceiling['median_rel_error'])} | {_pct(ceiling.get('pairs_right', float('nan')))} |"
    )
    lines += ["", "Fresh kernels needed (median over draws):", ""]
    for method, need in report["needed"].items():
        target = "not within the k tried" if need["targets"] is None else f"{need['targets']} kernels"
        near = "not within the k tried" if need["ceiling"] is None else f"{need['ceiling']} kernels"
        lines.append(
            f"- `{method}`: the issue's targets (Spearman >= {TARGET_SPEARMAN}, {_pct(TARGET_WITHIN_20)} within 20%): "
            f"{target}; within 0.01 Spearman and 5 points of the ceiling: {near}."
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--new", default="cost_models/llvm-default", help="model directory with the new machine's dataset")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--old", help="model directory (dataset.csv, elementwise.json) timed on the old machine")
    src.add_argument("--old-rev", help="git revision at which --new's directory held the old machine's data")
    p.add_argument("--old-name", default=None, help="the old machine, for the report (default: the revision)")
    p.add_argument("--ks", type=int, nargs="+", default=list(KS))
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument("--out", default=None, help="report stem (default: <new>/FEW_SHOT, .md and .json)")
    p.add_argument(
        "--objective",
        default="latency",
        choices=OBJECTIVES,
        help="what every booster learns (train_cost_model.py --objective; the tuned-flow models: residual)",
    )
    p.add_argument(
        "--min-trials",
        type=int,
        default=TUNED_MIN_TRIALS,
        help="leave out tuned-flow rows tuned with fewer trials, on both machines (as train_cost_model.py does)",
    )
    args = p.parse_args()
    started = time.time()
    new_dir = ROOT / args.new
    with tempfile.TemporaryDirectory() as tmp:
        if args.old_rev:
            old_dir = Path(tmp)
            for name in ("dataset.csv", "elementwise.json"):
                _git_show(args.old_rev, Path(args.new) / name, old_dir / name)
            try:
                _git_show(args.old_rev, Path(args.new) / "metadata.json", old_dir / "metadata.json")
            except subprocess.CalledProcessError:
                pass  # no metadata then: a plain baseline
        else:
            old_dir = Path(args.old)
        old_settings = _settings(old_dir)
        old = load_dataset(
            old_dir / "dataset.csv",
            per_element_ns=load_elementwise(old_dir).get("ns_per_element", {}),
            min_trials=args.min_trials,
        )
    new = load_dataset(new_dir / "dataset.csv", min_trials=args.min_trials)
    old_us = {s.workload.key(): s.median_us for s in old}
    shared = [(old_us[s.workload.key()], s.median_us) for s in new if s.workload.key() in old_us]
    if len(shared) < 10:
        raise SystemExit(f"only {len(shared)} kernels timed on both machines: not the same kernel set")

    from scipy.stats import spearmanr

    predictions = curve(
        old,
        new,
        args.ks,
        args.seeds,
        args.rounds,
        progress=lambda g: print(f"held out {g}", flush=True),
        objective=args.objective,
        settings=(old_settings, _settings(new_dir)),
    )
    scores = score(new, predictions)
    rows = summary(scores, args.ks, args.seeds)
    y = np.array([s.median_us for s in new])
    pairs = layout_pairs(new)
    old_name = args.old_name or (f"`{args.new}` at {args.old_rev}" if args.old_rev else args.old)
    report = {
        "command": "python scripts/few_shot.py " + " ".join(shlex.quote(a) for a in sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "seconds": time.time() - started,
        "old": old_name,
        "new": f"`{args.new}`, timed on {KernelModel.load(new_dir).metadata.get('machine', 'unknown')}",
        "old_kernels": len(old),
        "new_kernels": len(new),
        "shared_kernels": len(shared),
        "new_over_old": float(np.median([b / a for a, b in shared])),
        "machines_spearman": float(spearmanr(*zip(*shared)).statistic),
        "seeds": list(args.seeds),
        "objective": args.objective,
        "settings": {"old": old_settings, "new": _settings(new_dir)},
        "min_trials": args.min_trials,
        "pairs": len(pairs),
        "nchw_right": float(np.mean([y[i] < y[j] for i, j in pairs])) if pairs else float("nan"),
        "rows": rows,
        "ceiling": scores["all"],
        "needed": {m: kernels_needed(rows, scores["all"], m) for m in METHODS},
        "provenance": provenance.record(),
    }
    stem = ROOT / (args.out or Path(args.new) / "FEW_SHOT")
    provenance.write_results(stem, report, markdown)
    print(markdown(report))


if __name__ == "__main__":
    main()
