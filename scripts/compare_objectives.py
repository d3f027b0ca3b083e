"""Which learning objective ranks held-out kernels best: latency, a roofline correction, or a ranking.

``train_cost_model.py --objective`` fits log2 latency (``latency``) or the log2 of latency
over the tuned roofline (``residual``, the correction MetaSchedule-style models learn).
TLP and MetaSchedule's own models also train ranking objectives; XGBoost's ``rank:pairwise``
(one query of every training kernel, relevance = the latency's quantile, pairs drawn
uniformly) is tried here beside them.  A ranking score has no unit, so it cannot be summed
into a graph's cost as the extractor needs; it would only be worth having if it ordered
kernels and layout pairs better.  ``linear`` is a ridge regression of the same correction on
three features per kind of kernel (``linear_correction``): unlike trees, it extrapolates
past the training kernels' sizes.  All held out by model, as in ``train_cost_model.py``,
over the roofline the model directory's metadata names as its ``baseline`` (the CPU's own
calibration; none: generic x86-64).

    python scripts/compare_objectives.py                      # both llvm datasets
    python scripts/compare_objectives.py --models cost_models/llvm
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from tvm_eqsat.features import NAMES
from tvm_eqsat.xgb_model import (
    PARAMS,
    ROUNDS,
    TUNED_MIN_TRIALS,
    _conv_nchw_form,
    layout_pairs,
    load_dataset,
    roofline_baseline,
    sample_features,
    sample_items,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when a test imports this file
from train_cost_model import Fit, held_out_by_model, metrics, pair_orders, roofline_us  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LEVELS = 32  # relevance grades of the ranking objective (quantiles of the training latencies)
RANK_PARAMS = {"objective": "rank:pairwise", "lambdarank_pair_method": "mean", "lambdarank_num_pair_per_sample": 64}


def ranking_scores(samples, rounds: int = ROUNDS) -> np.ndarray:
    """Held out by model: each model's kernels scored by a ranking booster trained on the
    others' (higher = slower; not a latency).  Unconstrained: XGBoost's ranking objectives
    take no monotone constraints."""
    import xgboost as xgb

    x = sample_features(samples)
    y = np.log2([s.median_us for s in samples])
    groups = np.array([s.model for s in samples])
    params = {k: v for k, v in PARAMS.items() if k not in ("objective", "monotone_constraints")} | RANK_PARAMS
    scores = np.zeros(len(samples))
    for model in sorted(set(groups)):
        test = groups == model
        label = np.argsort(np.argsort(y[~test])) * LEVELS // int((~test).sum())
        data = xgb.DMatrix(x[~test], label=label, feature_names=list(NAMES))
        data.set_group([int((~test).sum())])
        booster = xgb.train(params, data, num_boost_round=rounds)
        scores[test] = booster.predict(xgb.DMatrix(x[test], feature_names=list(NAMES)))
    return scores


RIDGE = 1.0  # the linear correction's penalty on its slopes (not its intercept)
MIN_KIND = 4  # training kernels a kind needs for its own fit; fewer: it shares the all-kinds fit


def _kind(sample) -> tuple:
    """What the linear correction fits apart: the op, and a conv's layout (NCHW, NHWC, NCHW16c)."""
    form = _conv_nchw_form(sample.workload)
    return (sample.workload.op, form[0] if form else None)


def _linear_features(sample, roofline: float) -> list[float]:
    """An intercept, the log of the roofline's estimate, the log of the elements read."""
    read = sum(float(np.prod(t.shape)) for t in sample.workload.inputs)
    return [1.0, float(np.log(max(roofline, 1e-9))), float(np.log(max(read, 1.0)))]


def linear_correction(samples, roofline: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Held out by model: each kernel's roofline estimate times exp of a ridge regression of
    log(measured / roofline) on ``_linear_features``, fitted on the other models' kernels of
    its ``_kind`` (all their kernels where the kind has fewer than ``MIN_KIND``)."""
    y = np.array([s.median_us for s in samples])
    x = np.array([_linear_features(s, r) for s, r in zip(samples, roofline)])
    residual = np.log(y) - np.log(np.maximum(roofline, 1e-9))
    groups = np.array([s.model for s in samples])
    index: dict[tuple, int] = {}
    kinds = np.array([index.setdefault(_kind(s), len(index)) for s in samples])
    penalty = ridge * np.diag([0.0] + [1.0] * (x.shape[1] - 1))
    pred = np.zeros(len(samples))
    for model in sorted(set(groups)):
        test = groups == model
        for kind in set(kinds[test]):
            train = ~test & (kinds == kind)
            if train.sum() < MIN_KIND:
                train = ~test
            w = np.linalg.solve(x[train].T @ x[train] + penalty, x[train].T @ residual[train])
            mine = test & (kinds == kind)
            pred[mine] = roofline[mine] * np.exp(x[mine] @ w)
    return pred


def compare(samples, target: str, flow: str, rounds: int = ROUNDS, baseline: dict | None = None) -> list[dict]:
    """One row per predictor: its held-out metrics and layout pairs ordered right.
    ``baseline``: the roofline the residuals correct (``xgb_model.baseline_spec``; None:
    the generic one of ``target`` and ``flow``)."""
    y = np.array([s.median_us for s in samples])
    roofline = roofline_baseline(sample_items(samples), baseline) if baseline else roofline_us(samples, target, flow)
    predictions = {}
    for objective in ("latency", "residual"):
        predictions[objective] = held_out_by_model(samples, Fit(rounds, objective, baseline=baseline))[1]
    predictions["linear"] = linear_correction(samples, roofline)
    predictions["rank"] = ranking_scores(samples, rounds)
    predictions["roofline (untrained)"] = roofline
    pairs = layout_pairs(samples)
    rows = []
    for name, pred in predictions.items():
        m = metrics(y, pred)
        if name == "rank":  # a score, not a latency
            m.update(median_rel_error=float("nan"), within_20pct=float("nan"))
        right = pair_orders(pairs, y, {"p": pred})["p"]["right"] if pairs else 0
        rows.append({"predictor": name, **m, "pairs": len(pairs), "pairs_right": right})
    return rows


def _cell(v, fmt) -> str:
    return "-" if v != v else fmt(v)


def _pct(v) -> str:
    return f"{v * 100:.0f}%"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", nargs="+", default=["cost_models/llvm", "cost_models/llvm-default"])
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument("--out", default="cost_models/OBJECTIVES.md")
    args = p.parse_args()
    lines = [
        "# Learning objectives compared, held out by model",
        "",
        f"Produced by `python scripts/compare_objectives.py {' '.join(shlex.quote(a) for a in sys.argv[1:])}` "
        f"on {datetime.date.today().isoformat()}. `latency` and `residual` are `train_cost_model.py --objective`; "
        "`rank` is XGBoost's `rank:pairwise` (its score is no latency: it cannot be summed into a graph's cost, "
        "so its error columns are empty); `linear` is a ridge regression of the residual per kind of kernel "
        "(`linear_correction`). Layout pairs: one conv in NCHW and NHWC, ordered right.",
        "",
    ]
    for directory in args.models:
        dataset = ROOT / directory / "dataset.csv"
        samples = load_dataset(dataset, min_trials=TUNED_MIN_TRIALS)
        flow = "default" if "default" in Path(directory).name else "tuned"
        target = Path(directory).name.split("-")[0]
        metadata = ROOT / directory / "metadata.json"
        baseline = json.loads(metadata.read_text()).get("baseline") if metadata.is_file() else None
        rows = compare(samples, target, flow, args.rounds, baseline)
        lines += [
            f"## `{directory}` ({flow} flow, {len(samples)} kernels of {len({s.model for s in samples})} models, "
            f"over the roofline of {(baseline or {}).get('mcpu', 'generic')})",
            "",
            "| predictor | Spearman | pairwise acc. | median rel. err | within 20% | layout pairs right |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            lines.append(
                f"| {r['predictor']} | {r['spearman']:.3f} | {r['pairwise_accuracy']:.3f} | "
                f"{_cell(r['median_rel_error'], _pct)} | {_cell(r['within_20pct'], _pct)} | "
                f"{r['pairs_right']} of {r['pairs']} |"
            )
        lines.append("")
        print("\n".join(lines[-len(rows) - 5 :]), flush=True)
    (ROOT / args.out).write_text("\n".join(lines))


if __name__ == "__main__":
    main()
