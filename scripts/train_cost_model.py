"""Train the kernel-latency XGBoost model of a target and write its accuracy report.

Reads the dataset of ``collect_kernels.py``, evaluates held out *by model*
(train on the kernels of the other models, predict this model's kernels), then
trains on everything and saves ``cost_models/<target>/model.json``,
``metadata.json``, ``REPORT.md`` and ``predicted_vs_measured.png``.

    python scripts/train_cost_model.py --target llvm
    # adapt the shipped model to a new machine with a few hundred fresh measurements
    python scripts/train_cost_model.py --target llvm --dataset my.csv --finetune-from cost_models/llvm --out my_model
    # learn from a MetaSchedule database you already have (no new measurements):
    # the kernels of the named models (the benchmark's variants: stock, TVM's passes, NHWC,
    # tvm-eqsat) are looked up in it
    python scripts/train_cost_model.py --target llvm --from-database ~/.cache/tvm_eqsat/ms-llvm \
        --models bert-base resnet50 --out my_model [--finetune-from cost_models/llvm]
    # the same, each kernel timed afresh with its tuned schedule (15 samples; a quiet machine):
    # the tuner's records lack the VM's call (~1 us) and a few are orders of magnitude off
    python scripts/train_cost_model.py --target llvm --from-database benchmarks/tuning/llvm --small \
        --models squeezenet resnet50 mobilenet-v2 --retime 15 --out my_model
    # a database that holds small models and some full-size ones (benchmark.py with and
    # without --small into one work directory)
    python scripts/train_cost_model.py --from-database benchmarks/tuning/llvm-emeraldrapids --small \
        --models resnet50 squeezenet --full-models vgg19 resnet50 --out my_model
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from tvm_eqsat import provenance
from tvm_eqsat.features import NAMES
from tvm_eqsat.tune import target_name
from tvm_eqsat.xgb_model import (
    DATASET_FIELDS,
    GRID_MODEL,
    OBJECTIVES,
    PARAMS,
    ROUNDS,
    TUNED_MIN_TRIALS,
    KernelModel,
    Pooled,
    baseline_spec,
    below_budget,
    dataset_row,
    extrapolation,
    finetune_rounds,
    layout_pairs,
    load_dataset,
    load_elementwise,
    load_pooled,
    measured_table,
    roofline_baseline,
    sample_items,
    train,
)

ROOT = Path(__file__).resolve().parent.parent


def metrics(measured: np.ndarray, predicted: np.ndarray) -> dict:
    """Rank and error metrics of predicted vs measured latencies."""
    rel = np.abs(predicted - measured) / measured
    i, j = np.triu_indices(len(measured), 1)
    differs = measured[i] != measured[j]
    pairs = np.sign(measured[i] - measured[j])[differs] == np.sign(predicted[i] - predicted[j])[differs]
    return {
        "n": int(len(measured)),
        "spearman": float(spearmanr(measured, predicted).statistic) if len(measured) > 2 else float("nan"),
        "pairwise_accuracy": float(pairs.mean()) if pairs.size else float("nan"),
        "median_rel_error": float(np.median(rel)),
        "p90_rel_error": float(np.percentile(rel, 90)),
        "within_10pct": float(np.mean(rel <= 0.10)),
        "within_20pct": float(np.mean(rel <= 0.20)),
    }


@dataclass(frozen=True)
class Fit:
    """How a booster is trained: rounds, objective (and a residual's roofline, ``baseline``),
    whether convolutions extrapolate, the tree depth (``"auto"``: chosen by ``choose_depth``
    on the training kernels alone), and other machines' kernels learned beside this one's
    (``pooled``, ``--pool``; a held-out evaluation leaves the held-out kernels out of them too)."""

    rounds: int = ROUNDS
    objective: str = "latency"
    extrapolate: bool = True
    baseline: dict | None = None
    max_depth: int | str = PARAMS["max_depth"]
    pooled: tuple[Pooled, ...] = ()

    def without(self, test, by_model: bool) -> Fit:
        """This fit with the ``test`` kernels (and, ``by_model``, their models' kernels) left out
        of its pooled machines' kernels: nothing the evaluation predicts is learned elsewhere."""
        if not self.pooled:
            return self
        models = {s.model for s in test} if by_model else set()
        keys = {s.workload.key() for s in test}
        return replace(self, pooled=tuple(p.without(models, keys) for p in self.pooled))


DEPTHS = (2, 3, 4, 6)  # the tree depths --max-depth auto chooses among


def _fit_predict(training, test, fit: Fit) -> np.ndarray:
    """The whole predicted time of the ``test`` samples (the booster's bare kernel plus its
    calibrated epilogue) from a model trained on ``training`` alone, priced as the pass
    prices them: convolutions beyond the training kernels' FLOPs extrapolated
    (``xgb_model.extrapolation``) unless ``fit.extrapolate`` is off."""
    depth = choose_depth(training, fit)[0] if fit.max_depth == "auto" else fit.max_depth
    metadata = {
        "objective": fit.objective,
        **({"baseline": fit.baseline} if fit.baseline else {}),
        **({"extrapolation": extrapolation(training)} if fit.extrapolate else {}),
    }
    booster = train(
        training, fit.rounds, {"max_depth": depth}, objective=fit.objective, baseline=fit.baseline, pooled=fit.pooled
    )
    epilogue = np.array([s.epilogue_us for s in test])
    return KernelModel(booster, metadata).predict_items(sample_items(test)) + epilogue


def choose_depth(samples, fit: Fit) -> tuple[int, dict[int, float]]:
    """The tree depth of ``DEPTHS`` whose boosters rank the kernels of each of ``samples``'
    models best (Spearman) when trained on the other models' (held out by model, within
    ``samples`` only), and each depth's score; the default depth for a single model."""
    if len({s.model for s in samples}) < 2:
        return PARAMS["max_depth"], {}
    scores = {}
    for depth in DEPTHS:
        y, pred, _, _ = held_out_by_model(samples, replace(fit, max_depth=depth))
        scores[depth] = float(spearmanr(y, pred).statistic)
    return max(scores, key=scores.get), scores


def held_out_by_model(samples, fit: Fit) -> tuple[np.ndarray, np.ndarray, list[str], dict]:
    """Predictions for each model's kernels from a model trained without them (the
    booster's bare kernel plus its calibrated epilogue, against the whole measurement)."""
    y = np.array([s.median_us for s in samples])
    groups = np.array([s.model for s in samples])
    pred = np.zeros(len(samples))
    per_model = {}
    for model in sorted(set(groups)):
        test = groups == model
        training = [s for s, t in zip(samples, test) if not t]
        tested = [s for s, t in zip(samples, test) if t]
        pred[test] = _fit_predict(training, tested, fit.without(tested, by_model=True))
        per_model[model] = metrics(y[test], pred[test])
    return y, pred, list(groups), per_model


def roofline_us(samples, target: str, flow: str = "tuned", simd_bits: int = 128, mcpu: str = "generic") -> np.ndarray:
    """The analytic model's costs for the same kernels (its baseline ranking), with the
    compute peak of the code's vector width and CPU, as the pass prices them."""
    return roofline_baseline(sample_items(samples), baseline_spec(target, flow, simd_bits, mcpu))


BIG_US = 10.0  # kernels at least this long: where most of a model's time is, and where 64 trials leave most to chance
MIN_BIG = 10  # long kernels needed to judge the predictors on them alone


def judged_on(held_out: dict | None, roofline: dict, held_out_big: dict | None, roofline_big: dict | None):
    """The held-out and roofline scores the predictors are judged on: the kernels of
    ``BIG_US`` or more where there are ``MIN_BIG`` of them (most of a model's time is
    there; tiny kernels rank by launch overhead), else all.  Returns (held out, roofline,
    what they cover).  A subset whose rank is undefined (NaN: a split where one side is
    constant) judges nothing, so all kernels are judged instead."""
    scored = held_out_big is not None and roofline_big is not None and held_out_big["n"] >= MIN_BIG
    if scored and np.isfinite(held_out_big["spearman"]) and np.isfinite(roofline_big["spearman"]):
        return held_out_big, roofline_big, f"the kernels of {BIG_US:g} us or more"
    return held_out, roofline, "all kernels"


def unmeasured_predictor(choice: str, held_out: dict | None, roofline: dict) -> str:
    """Who answers for kernels the model has not measured: ``choice`` unless "auto"; then
    the booster where it ranks held-out kernels at least as well as the roofline (or where
    nothing could be held out), else the roofline (the model is then its measurements,
    and the roofline, scaled to them, prices the rest).  The scores are ``judged_on``'s."""
    if choice != "auto":
        return choice
    if held_out is None or not np.isfinite(held_out["spearman"]):
        return "booster"
    return "booster" if held_out["spearman"] >= roofline["spearman"] else "roofline"


def roofline_scale(samples, roofline_pred: np.ndarray) -> float:
    """The median ratio of the bare kernels' measurements to the roofline's estimates: the
    roofline's launch cost and peaks are rough (0.34 on the emeraldrapids database's small
    kernels, which its launch cost overprices), so multiplied in, it puts estimated kernels
    on the measured ones' scale."""
    kernel = np.array([s.kernel_us for s in samples])
    return float(np.exp(np.median(np.log(kernel / np.maximum(roofline_pred, 1e-9)))))


DECISIVE = 0.05  # layout pairs whose two measurements differ by more than this are the ones that matter


def repeatability(samples, again) -> dict | None:
    """How well one tuning's record of a kernel predicts another, independent tuning's
    (``again``: the same kernels from a database tuned with another seed, the benchmark's
    A/A control): the ceiling of any model of a single tuning's time, since the tuning
    lottery is in every label.  None when the two share fewer than 3 kernels."""
    first = {s.workload.key(): s.median_us for s in samples}
    common = [(first[k], s.median_us) for s in again if (k := s.workload.key()) in first]
    if len(common) < 3:
        return None
    a, b = np.array(common).T
    ratio = np.maximum(a, b) / np.minimum(a, b)
    return {
        **metrics(a, b),
        "big": _big(a, b),
        "median_ratio": float(np.median(ratio)),
        "over_1_5x": float(np.mean(ratio > 1.5)),
        "over_2x": float(np.mean(ratio > 2.0)),
        "log_ratios": np.log(b / a).tolist(),  # for pair_ceiling; dropped from the metadata
    }


def pair_ceiling(pairs, y: np.ndarray, log_ratios, draws: int = 1000, seed: int = 0) -> dict:
    """How often a second, independent tuning of both kernels of a (NCHW, NHWC) pair
    would order them as the first did: the choice pairs' counterpart of
    ``repeatability``.  Only stock's kernels were tuned twice, so the second tuning is
    simulated: each kernel's time is multiplied by a ratio drawn from the two tunings'
    ratios (``log_ratios``, both signs, since which tuning comes first is arbitrary),
    each kernel independently; the mean over ``draws``.  Its assumption: a kernel's
    lottery does not depend on its layout."""
    rng = np.random.default_rng(seed)
    r = np.concatenate([np.asarray(log_ratios), -np.asarray(log_ratios)])
    i, j = (np.array(v, dtype=int) for v in zip(*pairs))
    gap = np.log(y[j] / y[i])  # > 0: NCHW measured faster
    decisive = np.abs(gap) > np.log1p(DECISIVE)
    agree = (gap[None, :] + rng.choice(r, (draws, len(pairs))) - rng.choice(r, (draws, len(pairs))) > 0) == (gap > 0)
    return {
        "right": float(agree.mean()),
        "decisive_right": float(agree[:, decisive].mean()) if decisive.any() else None,
    }


def pairs_tuned_twice(pairs, samples, again) -> dict | None:
    """How often a second, independent tuning of both kernels of a (NCHW, NHWC) pair
    ordered them as the first did, over the pairs whose two kernels ``again`` (the A/A
    database's samples: stock-aa and stock+nhwc-aa) holds too: ``pair_ceiling`` measured
    instead of simulated.  ``n``, the share kept (``right``), the decisive pairs (the first
    tuning's two times more than ``DECISIVE`` apart) and the share of those kept; how far
    each layout's two times lie apart (median ratio); and ``predictor_max``, the most a
    predictor of the expected order can get right of one tuning's orders: with p its
    chance per pair, two independent tunings agree with chance p^2 + (1 - p)^2, and for a
    given mean agreement the mean p is largest when p is the same for every pair (p is a
    concave function of p(1 - p)).  None when no pair was tuned twice."""
    second = {s.workload.key(): s.median_us for s in again}
    first = [(samples[i].median_us, samples[j].median_us, second.get(samples[i].workload.key()),
              second.get(samples[j].workload.key())) for i, j in pairs]  # fmt: skip
    both = np.array([t for t in first if t[2] is not None and t[3] is not None], dtype=np.float64).reshape(-1, 4)
    if not len(both):
        return None
    gap, gap_again = np.log(both[:, 1] / both[:, 0]), np.log(both[:, 3] / both[:, 2])
    kept = (gap > 0) == (gap_again > 0)
    decisive = np.abs(gap) > np.log1p(DECISIVE)
    ratio = np.exp(np.abs(np.log(both[:, 2:] / both[:, :2])))  # each kernel's two times, larger over smaller
    return {
        "n": int(len(both)),
        "right": float(kept.mean()),
        "decisive": int(decisive.sum()),
        "decisive_right": float(kept[decisive].mean()) if decisive.any() else None,
        "nchw_median_ratio": float(np.median(ratio[:, 0])),
        "nhwc_median_ratio": float(np.median(ratio[:, 1])),
        "predictor_max": float((1 + np.sqrt(max(2 * kept.mean() - 1, 0.0))) / 2),
    }


def pair_orders(pairs, y: np.ndarray, predictions: dict[str, np.ndarray], other: str = "NHWC") -> dict:
    """How each predictor orders the (NCHW, ``other``) pairs (``layout_pairs``): the share
    ordered as measured (a tie counts as wrong: it leaves the choice to chance), the ties, the
    share right among the *decisive* pairs (measured more than ``DECISIVE`` apart: many pairs
    are near ties, where either choice costs little and either order is noise), and the
    time of its choices over the best choices' (a tie taken as NCHW).  The same for
    always answering NCHW and always ``other``, the baselines a model must beat."""
    i, j = (np.array(v, dtype=int) for v in zip(*pairs)) if pairs else (np.zeros(0, int),) * 2
    decisive = np.abs(np.log(y[j] / y[i])) > np.log1p(DECISIVE)
    best = np.minimum(y[i], y[j]).sum()
    out = {"pairs": len(pairs), f"{other.lower()}_faster": int((y[j] < y[i]).sum()), "decisive": int(decisive.sum())}
    constant = {"always NCHW": np.zeros(len(pairs), bool), f"always {other}": np.ones(len(pairs), bool)}
    for name, takes_other in {
        **{n: np.asarray(p)[j] < np.asarray(p)[i] for n, p in predictions.items()},
        **constant,
    }.items():
        pred = np.asarray(predictions.get(name, np.arange(len(y))))  # a constant answer has no ties
        tie = pred[i] == pred[j]
        right = (takes_other == (y[j] < y[i])) & ~tie
        out[name] = {
            "right": int(right.sum()),
            "ties": int(np.sum(tie)),
            "decisive_right": int(right[decisive].sum()),
            "time_over_best": float(np.where(takes_other, y[j], y[i]).sum() / best) if len(pairs) else float("nan"),
        }
    return out


BLOCKED = "NCHW16c"  # nchwc.egg's layout: the blocked conv's choice pairs


def _pair_lines(choices: dict, other: str, split: str) -> list[str]:
    """The report's table of how each predictor orders the (NCHW, ``other``) choice pairs."""
    n, d = choices["pairs"], choices["decisive"]
    return [
        f"**Choice pairs: NCHW or {other}.** {n} convolutions of the dataset were measured in both "
        f"layouts (same shapes, attributes and epilogue ops); {other} measured faster in "
        f"{choices[f'{other.lower()}_faster']}; {d} pairs differ by more than {DECISIVE * 100:.0f}% (the rest are "
        f"near ties, where the order is noise and either choice costs little). Ordered as measured ({split}; a tie "
        "counts as wrong), beside always answering one layout (a model must beat both to be worth asking); the last "
        "column is the total time of each predictor's choices over the best choices' (a tie taken as NCHW):",
        "",
        f"| predictor | ordered right | ties | right, {d} decisive pairs | time over the best |",
        "|---|---|---|---|---|",
        *(
            f"| {name} | {c['right']} of {n} ({c['right'] / n * 100:.0f}%) | {c['ties']} | "
            f"{c['decisive_right']} ({c['decisive_right'] / max(d, 1) * 100:.0f}%) | {c['time_over_best']:.3f} |"
            for name, c in ((k, choices[k]) for k in ("model", "roofline", "always NCHW", f"always {other}"))
        ),
        "",
    ]


def k_fold(samples, fit: Fit, k: int = 5, seed: int = 0) -> tuple[dict, np.ndarray]:
    """Random k-fold over kernels (in-distribution accuracy): metrics and predictions."""
    y = np.array([s.median_us for s in samples])
    fold = np.random.default_rng(seed).permutation(len(samples)) % k
    pred = np.zeros(len(samples))
    for f in range(k):
        test = fold == f
        training = [s for s, t in zip(samples, test) if not t]
        tested = [s for s, t in zip(samples, test) if t]
        pred[test] = _fit_predict(training, tested, fit.without(tested, by_model=False))
    return metrics(y, pred), pred


HARVESTED_VARIANTS = ("stock", "stock+tvm", "stock+nhwc", "eqsat")


def harvest_dataset(
    work_dir: str | dict,
    names: list[str],
    small: bool,
    target: str,
    path: Path,
    retime: int = 0,
    rules: list[str] | None = None,
    mcpu: str = "generic",
    full: list[str] | None = None,
    saved: str | None = None,
    also_rules: Sequence[Sequence[str]] = (),
) -> None:
    """Write the kernels of the zoo models ``names`` that the MetaSchedule database
    ``work_dir`` has tuned (or a device's offline tuning timed: a ``batch_tune.kernel_times``
    mapping) to ``path`` as dataset rows: the kernels of every variant the
    benchmark tunes (``HARVESTED_VARIANTS``: stock, TVM's graph passes, ConvertLayout to
    NHWC, tvm-eqsat), so the same convolution comes in both layouts where both were tuned.
    ``retime``: label each with ``retime`` fresh samples of its tuned schedule instead of the
    tuner's record (``harvest.retime``: a spread, no outliers; needs a quiet machine).
    ``rules``: the eqsat variant's rule families or rules, where the benchmark was run with
    ``--rules`` (its kernels are those of that module).  ``mcpu``: the CPU an llvm database
    was tuned for (``benchmark.py --mcpu``; its kernels are looked up under that target).
    ``full``: zoo models also tuned into it at full size (with ``small``, a database that
    holds both sizes); their rows carry the model's name, so held out by model, a model's
    two sizes leave together.  ``saved``: the folder of modules ``device_bench.py variants``
    saved (the modules an offline tuning tuned), read instead of building the variants again.
    ``also_rules``: rule sets of more eqsat variants whose kernels are harvested too (the
    opt-in forms a benchmark run tuned with ``--rules``: nchwc's blocked convs)."""
    import csv

    import tvm

    if str(ROOT / "scripts") not in sys.path:  # imported as a module (the tests), not run
        sys.path.insert(0, str(ROOT / "scripts"))
    from benchmark import make_variant  # the benchmark's variants, built the same way

    from tvm_eqsat import models
    from tvm_eqsat.harvest import harvest
    from tvm_eqsat.harvest import retime as retime_kernels
    from tvm_eqsat.measure import kernel_out_ty
    from tvm_eqsat.tune import llvm_target

    tgt = tvm.target.Target(llvm_target(mcpu) if target == "llvm" else target)
    where = work_dir if isinstance(work_dir, str) else "the device's timings"
    rows, seen, off = [], set(), []
    sized = dict.fromkeys([(name, small) for name in names] + [(name, False) for name in full or ()])
    for name, reduced in sized:
        if saved:
            from device_bench import _saved_modules

            mods = list(_saved_modules(saved, list(HARVESTED_VARIANTS), [name]).values())
        else:
            model = (models.SMALL if reduced else models.MODELS)[name]()
            options = {"flow": "tuned", **({"rules": tuple(rules)} if rules is not None else {})}
            mods = [make_variant(v, model.mod, tgt, options).mod for v in HARVESTED_VARIANTS]
            mods += [
                make_variant("eqsat", model.mod, tgt, {"flow": "tuned", "rules": tuple(r)}).mod for r in also_rules
            ]
        found = []
        for h in harvest(work_dir, mods, tgt, progress=True):
            if h.workload.key() not in seen:
                seen.add(h.workload.key())
                found.append(h)
        timed = retime_kernels(found, work_dir, tgt, retime, progress=True) if retime else [(h, None) for h in found]
        for h, m in timed:
            if retime and m is None:
                continue
            label = (h.median_us,) * 3 if m is None else (m.median_us, m.p10_us, m.p90_us)
            rows.append(
                dataset_row(
                    target, "tuned", h.trials, name, "database", h.workload, kernel_out_ty(h.workload), *label, 0.0
                )
            )
            if m is not None and not 0.5 <= h.median_us / m.median_us <= 2.0:
                off.append((name, h.workload.op, h.median_us, m.median_us))
        print(f"{name}{' (small)' if reduced else ''}: {len(rows)} kernels so far", file=sys.stderr)
    if not rows:
        raise SystemExit(f"{where}: none of the kernels of {names} is in this database")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=DATASET_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} kernels harvested from {where} -> {path}", file=sys.stderr)
    if retime:
        print(f"{len(off)} tuner records more than 2x off their fresh time:", file=sys.stderr)
        for name, op, record, fresh in off:
            print(f"  {name} {op}: record {record:.2f} us, timed {fresh:.2f} us", file=sys.stderr)


def plot(y, pred, groups, path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 5))
    for model in sorted(set(groups)):
        sel = np.array(groups) == model
        ax.scatter(y[sel], pred[sel], s=12, alpha=0.7, label=model)
    lo, hi = min(y.min(), pred.min()) * 0.8, max(y.max(), pred.max()) * 1.25
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.fill_between([lo, hi], [lo * 0.8, hi * 0.8], [lo * 1.2, hi * 1.2], color="grey", alpha=0.15, label="+-20%")
    ax.set(
        xscale="log",
        yscale="log",
        xlim=(lo, hi),
        ylim=(lo, hi),
        xlabel="measured (us)",
        ylabel="predicted (us)",
        title=title,
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _row(name: str, m: dict) -> str:
    return (
        f"| {name} | {m['n']} | {m['spearman']:.3f} | {m['pairwise_accuracy']:.3f} | {m['median_rel_error'] * 100:.1f}% "
        f"| {m['p90_rel_error'] * 100:.1f}% | {m['within_10pct'] * 100:.0f}% | {m['within_20pct'] * 100:.0f}% |"
    )


def main() -> None:
    from tvm_eqsat import models

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"])
    p.add_argument(
        "--mcpu",
        default=None,
        help="llvm: the CPU whose code the kernels are ('generic': TVM's plain llvm target; 'host': this "
        "machine's; default: the --from-database directory's SOURCE.json, else generic). The model goes "
        "to cost_models/llvm-<cpu>, which the pass prefers for targets of that -mcpu",
    )
    p.add_argument(
        "--dataset",
        default=None,
        help="default cost_models/<target>/dataset.csv (with --from-database: <out>/dataset.csv, rewritten)",
    )
    p.add_argument("--out", default=None, help="default cost_models/<target> (with --from-database: DIR/cost_model)")
    p.add_argument("--rounds", type=int, default=ROUNDS)
    p.add_argument(
        "--finetune-from",
        default=None,
        help="continue boosting this model directory on the dataset (adapts a model to a new machine)",
    )
    p.add_argument(
        "--from-database",
        metavar="DIR",
        default=None,
        help="harvest the dataset from this MetaSchedule database instead of measuring",
    )
    p.add_argument(
        "--from-device",
        nargs="+",
        metavar="BUNDLE RESULTS",
        default=None,
        help="harvest the dataset from an offline tuning's device runs instead (device_bench.py candidates "
        "bundles, each with its results.json): a kernel's label is what the tuned build runs, the faster of "
        "its stock schedule and its best candidate (batch_tune.kernel_times); give --out",
    )
    p.add_argument(
        "--modules",
        metavar="DIR",
        default=None,
        help="the folder of modules device_bench.py variants saved (what was tuned), harvested instead of "
        "building the variants again (with --from-device, or a database of them)",
    )
    p.add_argument(
        "--aa-device",
        nargs="+",
        metavar="BUNDLE RESULTS",
        default=None,
        help="with --from-device: the A/A control's bundles and results (as --aa-database does for a database)",
    )
    p.add_argument(
        "--models",
        nargs="+",
        default=None,
        choices=sorted(models.MODELS),
        help="with --from-database: the zoo models that were tuned into it (default: all)",
    )
    p.add_argument("--small", action="store_true", help="with --from-database: the reduced models were tuned")
    p.add_argument(
        "--full-models",
        nargs="+",
        default=[],
        choices=sorted(models.MODELS),
        metavar="MODEL",
        help="with --from-database --small: zoo models also tuned into the database at full size (harvested "
        "beside the small ones; held out by model, both sizes of a model leave together)",
    )
    p.add_argument(
        "--rules",
        nargs="+",
        default=None,
        help="with --from-database: the eqsat variant's rule families or rules, as given to benchmark.py --rules",
    )
    p.add_argument(
        "--also-rules",
        nargs="+",
        action="append",
        metavar="RULE",
        help="with --from-database: also harvest the eqsat variant built with these rule families or rules "
        "(given again: another variant), e.g. the opt-in families a benchmark run tuned with --rules",
    )
    p.add_argument(
        "--aa-database",
        metavar="DIR",
        default=None,
        help="with --from-database: a second database of the same models tuned independently (the benchmark's "
        "stock-aa); the report says how well one tuning's records predict the other's, the labels' ceiling "
        "(with --retime, both timed afresh: the search's lottery without the tuner's measurement noise)",
    )
    p.add_argument(
        "--retime",
        type=int,
        default=0,
        metavar="N",
        help="with --from-database: label each kernel with N fresh samples of its tuned schedule, not the "
        "tuner's record (a spread, no outliers; see tvm_eqsat/harvest.py; use a quiet machine)",
    )
    p.add_argument(
        "--objective",
        default="latency",
        choices=OBJECTIVES,
        help="what the booster learns: log2 latency, or log2 of latency over the tuned roofline (residual)",
    )
    p.add_argument(
        "--max-depth",
        default=str(PARAMS["max_depth"]),
        help=f"the boosted trees' depth, or auto: the one of {DEPTHS} that ranks each training model's kernels "
        "best when trained on the others' (held out by model, nested inside the held-out evaluation; "
        "default: %(default)s)",
    )
    p.add_argument(
        "--pool",
        nargs="+",
        metavar="DIR",
        default=[],
        help="with --objective residual: other machines' residual model directories whose kernels the booster "
        "also learns, each over its own machine's roofline (another draw of each kernel's tuning; held-out "
        "figures leave the held-out model's kernels out of them too)",
    )
    p.add_argument(
        "--extrapolate",
        default="flops",
        choices=["flops", "none"],
        help="beyond its largest training conv, a latency model's time grows with FLOPs as its largest "
        "convs' times did (flops, the default: xgb_model.extrapolation) or stays that conv's (none)",
    )
    p.add_argument(
        "--unmeasured",
        default="auto",
        choices=["auto", "booster", "roofline"],
        help="who prices kernels the model has not measured: the booster, or the roofline scaled to the "
        "measurements (auto: the booster where it ranks held-out kernels at least as well as the roofline)",
    )
    p.add_argument(
        "--min-trials",
        type=int,
        default=TUNED_MIN_TRIALS,
        help="leave out tuned-flow rows tuned with fewer MetaSchedule trials (default: %(default)s, the "
        "benchmark's smallest budget; a kernel's tuned time depends on the budget)",
    )
    p.add_argument(
        "--measured-on",
        default=None,
        help="the machine the dataset was timed on, for the report (default: this one; say it for a device's data)",
    )
    args = p.parse_args()
    if args.max_depth != "auto" and not args.max_depth.isdigit():  # before a harvest of minutes
        raise SystemExit(f"--max-depth {args.max_depth}: a whole number or auto")
    if args.pool and args.objective != "residual":
        raise SystemExit(
            "--pool: other machines' times are learned as corrections to their rooflines; give --objective residual"
        )
    try:
        pooled = tuple(load_pooled(d, args.min_trials) for d in args.pool)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    mcpu = _mcpu(args)
    name = target_name(args.target, mcpu)

    def harvest(database, path: Path) -> None:
        """One database's kernels (or device run's: a mapping) of the models asked for, as dataset rows at ``path``."""
        names = args.models or sorted(models.MODELS)
        try:
            harvest_dataset(
                database,
                names,
                args.small,
                args.target,
                path,
                args.retime,
                args.rules,
                mcpu,
                args.full_models,
                args.modules,
                args.also_rules or (),
            )
        except FileNotFoundError as err:  # a wrong directory: say so, not a traceback
            raise SystemExit(str(err)) from None

    if args.from_device and (args.from_database or args.retime or not args.out):
        raise SystemExit("--from-device: give --out, and neither --from-database nor --retime (nothing is rebuilt)")
    source = args.from_database or _device_times(args.from_device, "--from-device")
    aa_source = args.aa_database or _device_times(args.aa_device, "--aa-device")
    if source is not None:
        out = Path(args.out or Path(args.from_database) / "cost_model")
        dataset = Path(args.dataset or out / "dataset.csv")
        harvest(source, dataset)
    else:
        out = Path(args.out or ROOT / "cost_models" / name)
        dataset = Path(args.dataset or ROOT / "cost_models" / name / "dataset.csv")
    samples = load_dataset(dataset, min_trials=args.min_trials)
    again, again_samples = None, []
    if aa_source is not None:
        if source is None or (args.aa_device is None) != (args.from_device is None):
            raise SystemExit("--aa-database compares two databases (--aa-device two device runs): give the first too")
        aa_dataset = dataset.with_name(dataset.stem + "-aa.csv")
        harvest(aa_source, aa_dataset)
        again_samples = load_dataset(aa_dataset, min_trials=args.min_trials)
        again = repeatability(samples, again_samples)
    left_out = len(load_dataset(dataset)) - len(samples)
    if len(samples) < 10:
        raise SystemExit(
            f"{dataset}: {len(samples)} samples; collect more with scripts/collect_kernels.py"
            + (
                f" ({left_out} rows tuned with fewer than --min-trials {args.min_trials} trials left out)"
                if left_out
                else ""
            )
        )
    flows = _flows(dataset, args.min_trials)

    extrapolate = args.extrapolate == "flops"
    roofline_flow = "default" if all(f == "default" for f in flows) else "tuned"
    simd_bits = _simd_bits(args.target, mcpu)
    fit = Fit(
        args.rounds,
        args.objective,
        extrapolate,
        # a residual corrects the roofline the pass prices this target with (xgb_model.roofline_baseline)
        baseline_spec(args.target, roofline_flow, simd_bits, mcpu) if args.objective == "residual" else None,
        args.max_depth if args.max_depth == "auto" else int(args.max_depth),
        pooled,
    )
    depth, depth_scores = choose_depth(samples, fit) if fit.max_depth == "auto" else (fit.max_depth, {})
    kfold, kfold_pred = k_fold(samples, replace(fit, max_depth=depth))
    groups = [s.model for s in samples]
    if len(set(groups)) > 1:
        y, pred, groups, per_model = held_out_by_model(samples, fit)
        overall = metrics(y, pred)
        # the grid's kernels belong to no model the pass rewrites, and most of them are near ties
        # on a GPU (launch-bound), so the benchmark models' kernels are also scored alone
        models_only = np.array(groups) != GRID_MODEL
        without_grid = (
            metrics(y[models_only], pred[models_only]) if GRID_MODEL in groups and models_only.any() else None
        )
        split = "held out by model"
    else:  # one model: nothing to hold out, so the random folds stand in
        y, pred, per_model, overall = np.array([s.median_us for s in samples]), kfold_pred, {}, None
        without_grid = None
        split = "random 5-fold (one model only)"
    roofline_pred = roofline_us(samples, args.target, roofline_flow, simd_bits, mcpu)
    roofline = metrics(y, roofline_pred)
    pairs = layout_pairs(samples)
    choices = pair_orders(pairs, y, {"model": pred, "roofline": roofline_pred}) if pairs else None
    blocked_pairs = layout_pairs(samples, BLOCKED)
    blocked = (
        pair_orders(blocked_pairs, y, {"model": pred, "roofline": roofline_pred}, BLOCKED) if blocked_pairs else None
    )
    if choices and again:
        choices["ceiling"] = pair_ceiling(pairs, y, again.pop("log_ratios"))
        choices["tuned_twice"] = pairs_tuned_twice(pairs, samples, again_samples)
    big, roofline_big = _big(y, pred), _big(y, roofline_pred)  # the kernels of BIG_US or more alone
    judged = judged_on(overall, roofline, big if overall else None, roofline_big)
    unmeasured = unmeasured_predictor(args.unmeasured, judged[0], judged[1])
    base = KernelModel.load(args.finetune_from).booster if args.finetune_from else None
    booster = train(
        samples,
        args.rounds if base is None else finetune_rounds(args.rounds),
        {"max_depth": depth},
        base=base,
        objective=args.objective,
        baseline=fit.baseline,
        pooled=pooled,
    )
    metadata = {
        "target": args.target,
        **({"mcpu": mcpu} if mcpu != "generic" else {}),
        "features": list(booster.feature_names or NAMES),  # a fine-tuned old model keeps its own columns
        "samples": len(samples),
        "models": sorted(set(groups)),
        "flows": flows,
        "dataset": str(dataset.relative_to(ROOT)) if dataset.is_relative_to(ROOT) else str(dataset),
        "from_database": args.from_database,
        **({"from_device": args.from_device} if args.from_device else {}),
        "tvm": provenance.version("apache-tvm"),
        "xgboost": provenance.version("xgboost"),
        "machine": args.measured_on or provenance.cpu_name(),
        "cores": None if args.measured_on else _cores(),
        "date": datetime.date.today().isoformat(),
        "finetuned_from": args.finetune_from,
        "objective": args.objective,
        **({"baseline": fit.baseline} if fit.baseline else {}),
        **(
            {"pooled": [{"directory": p.name, "kernels": len(p.samples), "baseline": p.baseline} for p in pooled]}
            if pooled
            else {}
        ),
        "max_depth": depth,
        **({"max_depth_scores": depth_scores} if depth_scores else {}),
        **({"extrapolation": extrapolation(samples)} if extrapolate else {}),
        "min_trials": args.min_trials,
        "held_out_by_model": overall,
        "held_out_by_model_without_grid": without_grid,
        "layout_pairs": choices,
        **({"blocked_pairs": blocked} if blocked else {}),
        "random_5_fold": kfold,
        "unmeasured": unmeasured,
        "unmeasured_judged_on": judged[2] if args.unmeasured == "auto" else None,
        "roofline_scale": roofline_scale(samples, roofline_pred),
        "aa_database": args.aa_database,
        **({"aa_device": args.aa_device} if args.aa_device else {}),
        "tuned_twice": again and {k: v for k, v in again.items() if k != "log_ratios"},
    }
    model = KernelModel(booster, metadata, measured_table(samples), load_elementwise(dataset.parent))
    model.save(out)
    plot(y, pred, groups, out / "predicted_vs_measured.png", f"{name}: {split}")

    command = "python scripts/train_cost_model.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    lines = [
        f"# Cost model report: {args.target}" + (f" -mcpu={mcpu}" if mcpu != "generic" else ""),
        "",
        f"Produced by `{command}` on {metadata['date']} "
        f"from `{metadata['dataset']}` ({len(samples)} kernels; flows: {', '.join(flows)}; "
        f"measured on: {metadata['machine']}"
        + (f", {metadata['cores']} cores" if metadata["cores"] else "")
        + f"; TVM {metadata['tvm']})."
        + (
            f" Left out: {left_out} tuned-flow rows tuned with fewer than {args.min_trials} trials (`--min-trials`)."
            if left_out
            else ""
        )
        + (f" Fine-tuned from `{args.finetune_from}`." if args.finetune_from else "")
        + _pooled_words(pooled, samples)
        + (
            " The booster learns the log of latency over the roofline the pass prices this target with "
            f"({mcpu if args.target == 'llvm' else args.target}, {roofline_flow} flow; `--objective residual`)."
            if args.objective == "residual"
            else ""
        )
        + (
            f" Trees of depth {depth}, chosen by `--max-depth auto` among {', '.join(map(str, DEPTHS))}: the depth "
            "whose boosters rank each model's kernels best when trained on the others' (Spearman "
            + ", ".join(f"{d}: {v:.4f}" for d, v in depth_scores.items())
            + "); the held-out figures below choose it again without the held-out model's kernels."
            if depth_scores
            else f" Trees of depth {depth}."
        ),
        "",
    ]
    if per_model:
        lines += [
            "Held out **by model**: each model's kernels are predicted by a model trained on the other models' kernels only.",
            "",
            "| held-out model | kernels | Spearman | pairwise acc. | median rel. err | p90 rel. err | within 10% | within 20% |",
            "|---|---|---|---|---|---|---|---|",
            *(_row(name, m) for name, m in per_model.items()),
            _row("**all**", overall),
            *([_row(f"**all, kernels >= {BIG_US:g} us**", big)] if big else []),
            *([_row("**all but the grid**", without_grid)] if without_grid else []),
            "",
        ]
    if choices:
        lines += [
            *_pair_lines(choices, "NHWC", split),
            *_pair_ceiling_lines(choices.get("ceiling"), choices.get("tuned_twice")),
        ]
    if blocked:
        lines += _pair_lines(blocked, BLOCKED, split)
    lines += [
        "Random 5-fold over kernels (a kernel's own model is in the training set):",
        "",
        "| split | kernels | Spearman | pairwise acc. | median rel. err | p90 rel. err | within 10% | within 20% |",
        "|---|---|---|---|---|---|---|---|",
        _row("5-fold", kfold),
        _row("roofline (no training)", roofline),
        *([_row(f"roofline, kernels >= {BIG_US:g} us", roofline_big)] if roofline_big else []),
        "",
        "Targets (issue): held out by model, Spearman >= 0.95 and >= 80% within 20%; choice pairs >= 90% ordered right.",
        "",
        *_tuned_twice_lines(again, args.aa_database or (args.aa_device and " ".join(args.aa_device))),
        (
            "These figures are the booster's (monotone in the work features, see `tvm_eqsat/features.py`)"
            + (
                ", with convolutions beyond the largest training conv's FLOPs extrapolated as the pass prices "
                "them (`xgb_model.extrapolation`; this model: "
                + ", ".join(
                    f"{op} beyond 2^{fit['max_log2_flops']:.1f} FLOPs, time as FLOPs^{fit['log2_us_per_log2_flops']:.2f}"
                    for op, fit in metadata["extrapolation"].items()
                )
                + "). "
                if metadata.get("extrapolation")
                else ". "
            )
            if args.objective == "latency"
            else "These figures are the roofline times the booster's correction (the correction monotone in the work features, so the product is too). "
        )
        + f"The pass answers the {len(model.measured)} bare kernels of this dataset from their measurements "
        + (
            "(`measured.json`) and asks the booster about the rest"
            + (
                f", which ranked held-out kernels at least as well as the roofline ({judged[2]}: Spearman "
                f"{judged[0]['spearman']:.3f} against {judged[1]['spearman']:.3f})."
                if args.unmeasured == "auto" and judged[0] is not None
                else "."
            )
            if unmeasured == "booster"
            else f"(`measured.json`) and prices the rest with the roofline times {metadata['roofline_scale']:.2f} "
            "(the median ratio of the measurements to it), not the booster"
            + (
                f", which ranked held-out kernels worse than the roofline ({judged[2]}: Spearman "
                f"{judged[0]['spearman']:.3f} against {judged[1]['spearman']:.3f})."
                if args.unmeasured == "auto"
                else " (`--unmeasured roofline`)."
            )
        ),
        "",
        (
            f"Element-wise epilogues are priced per element from `elementwise.json` "
            f"(flow {model.elementwise.get('flow')}, {model.elementwise.get('date')}): the booster learns each kernel "
            "with its epilogue's compute taken off, the pass charges that compute to the element-wise nodes, and the "
            "figures above compare booster + epilogue with the whole measurement."
            if model.per_element_ns
            else "No `elementwise.json` beside the dataset: epilogues stay in the kernels' measurements "
            "(`collect_kernels.py --elementwise` calibrates them)."
        ),
        "",
        f"![predicted vs measured ({split})](predicted_vs_measured.png)",
        "",
        "Kernels per source: " + ", ".join(f"{k} {v}" for k, v in _count(s.source for s in samples).items()) + ".",
        "Kernels per op: " + ", ".join(f"{k} {v}" for k, v in _count(s.workload.op for s in samples).items()) + ".",
        f"Median spread of the measurements ((p90 - p10) / median): {np.median([s.spread for s in samples]) * 100:.1f}%"
        + (
            " (harvested rows carry the tuner's best time only, no spread)."
            if source is not None and not args.retime
            else "."
        ),
        "",
    ]
    (out / "REPORT.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _pooled_words(pooled: tuple[Pooled, ...], samples) -> str:
    """The report's sentence on the other machines' kernels the booster learned beside these."""
    if not pooled:
        return ""
    here = {s.workload.key() for s in samples}
    parts = [
        f"`{p.name}` ({len(p.samples)} kernels, {sum(s.workload.key() in here for s in p.samples)} of them also in "
        f"this dataset; over the roofline for `{p.baseline.get('mcpu', 'generic')}` code)"
        for p in pooled
    ]
    return (
        " The booster also learns other machines' kernels (`--pool`), each as its time over its own machine's "
        f"roofline: {', '.join(parts)}; held out by model, the held-out model's kernels are left out of them too."
    )


def _device_times(pairs: list[str] | None, flag: str) -> dict | None:
    """``batch_tune.kernel_times`` of ``BUNDLE RESULTS`` pairs given to ``flag`` (None: none given)."""
    if pairs is None:
        return None
    if len(pairs) % 2:
        raise SystemExit(f"{flag} takes BUNDLE RESULTS pairs")
    from tvm_eqsat import batch_tune

    return batch_tune.kernel_times(list(zip(pairs[::2], pairs[1::2])))


def _tuned_twice_lines(again: dict | None, aa_database: str | None) -> list[str]:
    """The report's paragraph on the labels' own repeatability (``--aa-database``)."""
    if aa_database is None:
        return []
    if again is None:
        return [f"`{aa_database}` (`--aa-database`) shares fewer than 3 kernels with this dataset.", ""]
    return [
        f"**The labels' ceiling.** {again['n']} of these kernels were also tuned independently, with another "
        f"seed and the same budget (`{aa_database}`). One tuning's time taken as the prediction of the other's "
        "(as well as a model can do that is asked before the tuning draws its schedules) scores:",
        "",
        "| split | kernels | Spearman | pairwise acc. | median rel. err | p90 rel. err | within 10% | within 20% |",
        "|---|---|---|---|---|---|---|---|",
        _row("one tuning for the other", again),
        *([_row(f"the same, kernels >= {BIG_US:g} us", again["big"])] if again["big"] else []),
        "",
        f"The two times of a kernel differ by {again['median_ratio']:.2f}x at the median; "
        f"{again['over_1_5x'] * 100:.0f}% differ by more than 1.5x and {again['over_2x'] * 100:.0f}% by more than 2x. "
        "No model of one tuning's times scores above this row; a target above it asks for labels with less "
        "lottery in them (the best of several tunings, or more trials), not for a better model."
        + (
            f" The kernels of {BIG_US:g} us or more, where most of a model's time is, agree least: "
            f"{again['big']['within_20pct'] * 100:.0f}% within 20% ({again['big']['n']} kernels)."
            if again["big"]
            else ""
        ),
        "",
    ]


def _pair_ceiling_lines(ceiling: dict | None, twice: dict | None = None) -> list[str]:
    """The choice pairs' ceiling (``pair_ceiling``), where the labels' own is known, and
    as measured on the pairs whose both kernels were tuned twice (``pairs_tuned_twice``)."""
    if ceiling is None:
        return []
    decisive = (
        f" ({ceiling['decisive_right'] * 100:.0f}% of the decisive ones)"
        if ceiling["decisive_right"] is not None
        else ""
    )
    lines = [
        f"A second tuning of both kernels would order an estimated {ceiling['right'] * 100:.0f}% of these pairs as "
        f"the first did{decisive}: each kernel's time multiplied by a ratio drawn from the A/A control's (below), "
        "independently, 1,000 draws (this assumes an NHWC kernel's lottery is like the NCHW kernels' that the "
        "estimate draws from). That is the choice pairs' counterpart of the labels' ceiling below: a target "
        "above it asks for labels with less lottery in them.",
        "",
    ]
    if twice is not None:
        kept = (
            f" ({twice['decisive_right'] * 100:.0f}% of its {twice['decisive']} decisive ones)"
            if twice["decisive_right"] is not None
            else ""
        )
        lines[-1:-1] = [
            f"Measured: {twice['n']} of these pairs had both kernels tuned a second time (the A/A database: stock-aa "
            f"and stock+nhwc-aa), and the second tuning ordered {twice['right'] * 100:.0f}% of them as the first "
            f"did{kept}; a kernel's two times differ by {twice['nchw_median_ratio']:.2f}x at the median in NCHW and "
            f"{twice['nhwc_median_ratio']:.2f}x in NHWC. So even a predictor that knew each pair's expected order "
            f"would order at most {twice['predictor_max'] * 100:.0f}% of one tuning's pairs as measured (two tunings "
            "agree with chance p^2 + (1 - p)^2 where p is that predictor's, `pairs_tuned_twice`)."
        ]
    return lines


def _big(y: np.ndarray, pred: np.ndarray) -> dict | None:
    """``metrics`` of the kernels measured at ``BIG_US`` or longer (None for fewer than 3)."""
    big = y >= BIG_US
    return metrics(y[big], pred[big]) if big.sum() > 2 else None


def _flows(dataset: Path, min_trials: int = 0) -> list[str]:
    """The build flows (and tuning budgets) of the rows ``load_dataset`` keeps."""
    import csv

    with open(dataset) as f:
        return sorted(
            {
                f"{r['flow']}" + (f" ({r['trials']} trials)" if r["flow"] == "tuned" else "")
                for r in csv.DictReader(f)
                if not below_budget(r, min_trials)
            }
        )


def _count(values) -> dict:
    out: dict = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def _mcpu(args) -> str:
    """The CPU whose code the dataset's kernels are: ``--mcpu``, else the one the database
    directory's ``SOURCE.json`` (``export_tuning.py``) names, else generic x86-64."""
    import json

    from tvm_eqsat.tune import resolve_mcpu

    if args.target != "llvm":
        if args.mcpu not in (None, "generic"):
            raise SystemExit(f"--mcpu {args.mcpu}: only llvm targets name a CPU")
        return "generic"
    mcpu = args.mcpu
    if mcpu is None and args.from_database:
        source = Path(args.from_database) / "SOURCE.json"
        mcpu = json.loads(source.read_text()).get("mcpu") if source.is_file() else None
    try:
        return resolve_mcpu(mcpu or "generic")  # a misspelt CPU fails here, not after the harvest
    except ValueError as err:
        raise SystemExit(str(err)) from None


def _simd_bits(target: str, mcpu: str) -> int:
    """The vector width of the code the kernels are (what the roofline's peak scales with)."""
    from tvm_eqsat.cost import cpu_vector_bits

    return cpu_vector_bits(mcpu) if target == "llvm" else 128


def _cores() -> int:
    from tvm_eqsat.tune import available_cores

    return available_cores()


if __name__ == "__main__":
    main()
