"""Which learning objective ranks held-out kernels best: latency, a roofline correction, or a ranking.

``train_cost_model.py --objective`` fits log2 latency (``latency``) or the log2 of latency
over the tuned roofline (``residual``, the correction MetaSchedule-style models learn).
TLP and MetaSchedule's own models also train ranking objectives; XGBoost's ``rank:pairwise``
(one query of every training kernel, relevance = the latency's quantile, pairs drawn
uniformly) is tried here beside them.  A ranking score has no unit, so it cannot be summed
into a graph's cost as the extractor needs; it would only be worth having if it ordered
kernels and layout pairs better.  All held out by model, as in ``train_cost_model.py``.

    python scripts/compare_objectives.py                      # both llvm datasets
    python scripts/compare_objectives.py --models cost_models/llvm
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
from pathlib import Path

import numpy as np

from tvm_eqsat.features import NAMES
from tvm_eqsat.xgb_model import PARAMS, ROUNDS, TUNED_MIN_TRIALS, layout_pairs, load_dataset, sample_features

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


def compare(samples, target: str, flow: str, rounds: int = ROUNDS) -> list[dict]:
    """One row per predictor: its held-out metrics and layout pairs ordered right."""
    y = np.array([s.median_us for s in samples])
    predictions = {}
    for objective in ("latency", "residual"):
        predictions[objective] = held_out_by_model(samples, Fit(rounds, objective))[1]
    predictions["rank"] = ranking_scores(samples, rounds)
    predictions["roofline (untrained)"] = roofline_us(samples, target, flow)
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
        "so its error columns are empty). Layout pairs: one conv in NCHW and NHWC, ordered right.",
        "",
    ]
    for directory in args.models:
        dataset = ROOT / directory / "dataset.csv"
        samples = load_dataset(dataset, min_trials=TUNED_MIN_TRIALS)
        flow = "default" if "default" in Path(directory).name else "tuned"
        target = Path(directory).name.split("-")[0]
        rows = compare(samples, target, flow, args.rounds)
        lines += [
            f"## `{directory}` ({flow} flow, {len(samples)} kernels of {len({s.model for s in samples})} models)",
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
