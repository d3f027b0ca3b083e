"""The learned kernel-latency model: XGBoost on ``features`` -> log2(microseconds).

Trained on kernels TVM compiled and timed (``scripts/collect_kernels.py``),
one model per target, saved as ``cost_models/<target>/model.json`` with a
``metadata.json`` that says where the data came from.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .features import INDEX, NAMES, WORK_FEATURES, featurize
from .graph import TensorTy
from .workload import Workload


def _monotone(names) -> str:
    """XGBoost's monotone constraints for feature columns ``names``: rising in the work features."""
    return "(" + ",".join("1" if n in WORK_FEATURES else "0" for n in names) + ")"


PARAMS = {
    "objective": "reg:squarederror",
    "max_depth": 6,
    "eta": 0.05,
    "subsample": 0.9,
    "colsample_bytree": 0.9,
    "min_child_weight": 1.0,
    # one thread: OpenMP's threads spin while they wait, so beside any other busy process
    # (a tuning run) two threads trained 10x slower than one (held out by model, 145
    # kernels: 15.6 s against 1.6 s, same predictions; 2026-11-27)
    "nthread": 1,
    "seed": 0,
    # non-decreasing in every work feature (see features.WORK_FEATURES)
    "monotone_constraints": _monotone(NAMES),
}
ROUNDS = 600
# The fewest MetaSchedule trials a tuned-flow training row may have: the benchmark's smallest
# budget (full-size models at 32, small ones at 64).  The 181 rows tuned at 16 trials that the
# first collection made disagree with the 32-trial database on the same full-size convs by up
# to 5.6x (512x14x14, 3x3: 33.4 ms against 6.0 ms); with them, held-out ResNet-50's median
# error was 325%, without them 57% (cost_models/llvm/REPORT.md)
TUNED_MIN_TRIALS = 32


DATASET_FIELDS = [
    "target",
    "flow",
    "trials",
    "model",
    "source",
    "op",
    "key",
    "out_ty",
    "median_us",
    "p10_us",
    "p90_us",
    "seconds",
]


def ty_json(ty) -> list:
    """A TensorTy (or a tuple of them) as the dataset's ``out_ty`` column holds it."""
    if isinstance(ty, TensorTy):
        return [list(ty.shape), ty.dtype]
    return [ty_json(t) for t in ty]


def dataset_row(
    target: str,
    flow: str,
    trials: int,
    model: str,
    source: str,
    w: Workload,
    out_ty,
    median_us: float,
    p10_us: float,
    p90_us: float,
    seconds: float,
) -> dict:
    """One CSV row of the kernel dataset (``collect_kernels.py``, ``train_cost_model.py --from-database``)."""
    return {
        "target": target,
        "flow": flow,
        "trials": trials,
        "model": model,
        "source": source,
        "op": w.op,
        "key": w.key(),
        "out_ty": json.dumps(ty_json(out_ty)),
        "median_us": f"{median_us:.3f}",
        "p10_us": f"{p10_us:.3f}",
        "p90_us": f"{p90_us:.3f}",
        "seconds": f"{seconds:.1f}",
    }


MEASURED = "measured.json"
GRID_MODEL = "grid"  # the model column of rows that belong to no benchmark model (collect_kernels.py --sources grid)
ELEMENTWISE = "elementwise.json"  # per-element compute costs of element-wise ops (``measure.elementwise_ns``)
KERNEL_FLOOR = 0.25  # a kernel keeps at least this share of its measured time when its epilogue is taken off


def epilogue_us(w: Workload, out_ty, per_element_ns: dict[str, float]) -> float:
    """Compute time of ``w``'s fused element-wise epilogue: its ops' calibrated costs per
    element times the kernel's output size.  Untuned, a tanh or sigmoid costs several
    nanoseconds per element (a libm call), which for a small matmul is more than the
    matmul; the pass costs those ops as nodes of their own, so the kernel must not."""
    if not w.epilogue or not isinstance(out_ty, TensorTy):
        return 0.0
    return sum(per_element_ns.get(e.op, 0.0) for e in w.epilogue) * out_ty.numel / 1e3


OUT_DTYPE_LAST = ("Matmul", "Conv2d")  # kernels whose last attribute is out_dtype ("" = the inputs')


def bare_key(op: str, attrs: tuple, in_tys) -> str:
    """The kernel without its epilogue: what the pass asks about (``Workload.key`` form).
    An unset out_dtype ("": a module built with ``out_dtype=None``) reads as the inputs'
    dtype when they share one, which is what TVM computes in, so such a module finds the
    measurements of imported models, which spell it out."""
    dtypes = {getattr(t, "dtype", None) for t in in_tys}
    if op in OUT_DTYPE_LAST and attrs and attrs[-1] == "" and len(dtypes) == 1 and None not in dtypes:
        attrs = (*attrs[:-1], dtypes.pop())
    return Workload(op, attrs, tuple(in_tys)).key()


def measured_table(samples: Sequence[Sample]) -> dict[str, float]:
    """Bare kernel -> its measurement: the median of its rows measured bare where there
    are any (exact), else of its rows with their epilogues taken off (``Sample.kernel_us``,
    the quantity the booster learns; the calibration misses what each fused op costs
    besides its per-element compute, so those rows stay a little high)."""
    bare: dict[str, list[float]] = {}
    fused: dict[str, list[float]] = {}
    for s in samples:
        key = bare_key(s.workload.op, s.workload.attrs, s.workload.inputs)
        (fused if s.workload.epilogue else bare).setdefault(key, []).append(s.kernel_us)
    return {k: float(np.median(bare.get(k) or fused[k])) for k in {**fused, **bare}}


@dataclass
class Sample:
    model: str
    source: str
    workload: Workload
    out_ty: object
    median_us: float
    spread: float  # (p90 - p10) / median
    epilogue_us: float = 0.0  # estimated compute of the fused epilogue (``epilogue_us``)

    @property
    def kernel_us(self) -> float:
        """The bare kernel's share of the measurement: what the pass asks the model about."""
        return max(self.median_us - self.epilogue_us, KERNEL_FLOOR * self.median_us)


def _ty(value):
    if len(value) == 2 and isinstance(value[1], str):
        return TensorTy(tuple(value[0]), value[1])
    return tuple(_ty(v) for v in value)


def below_budget(row: dict, min_trials: int) -> bool:
    """Whether a dataset row is a tuned-flow kernel tuned with fewer than ``min_trials`` trials."""
    return row["flow"] == "tuned" and int(row["trials"] or 0) < min_trials


def load_dataset(
    path: str | Path, flow: str | None = None, per_element_ns: dict[str, float] | None = None, min_trials: int = 0
) -> list[Sample]:
    """Rows of a ``collect_kernels.py`` CSV (the last measurement of each workload wins);
    ``per_element_ns`` (default: the ``elementwise.json`` beside the CSV) prices their epilogues.

    ``min_trials`` leaves out tuned-flow rows tuned with fewer trials: a kernel's tuned time
    depends on the budget, and a model asked about the benchmark's budget must not learn from
    a smaller one (see ``TUNED_MIN_TRIALS``)."""
    if per_element_ns is None:
        per_element_ns = load_elementwise(Path(path).parent).get("ns_per_element", {})
    by_key: dict[str, Sample] = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if flow is not None and row["flow"] != flow:
                continue
            if below_budget(row, min_trials):
                continue
            median = float(row["median_us"])
            w, out_ty = Workload.from_json(json.loads(row["key"])), _ty(json.loads(row["out_ty"]))
            by_key[row["key"]] = Sample(
                row["model"],
                row["source"],
                w,
                out_ty,
                median,
                (float(row["p90_us"]) - float(row["p10_us"])) / max(median, 1e-9),
                epilogue_us(w, out_ty, per_element_ns),
            )
    return list(by_key.values())


def _conv_nchw_form(w: Workload) -> tuple[str, tuple] | None:
    """A convolution workload's layout and its identity in NCHW terms (input NCHW, weight
    OIHW, attributes, dtype, the epilogue's ops): equal for one convolution in every layout
    (NCHW, NHWC, and channel-blocked ``NCHW<b>c``, nchwc.egg's ``Conv2dNCHWc`` and
    ``DepthwiseConv2dNCHWc``)."""
    if w.op in ("Conv2dNCHWc", "DepthwiseConv2dNCHWc") and len(w.inputs) == 2:
        strides, padding, dilation, out_dtype = w.attrs
        # (N, C/b, H, W, b); the weight (O/b, C/b, kh, kw, b, b), or depthwise (1, C/b, kh, kw, b)
        x, k = w.inputs[0].shape, w.inputs[1].shape
        layout, c = f"NCHW{x[4]}c", x[1] * x[4]
        if w.op == "Conv2dNCHWc":
            groups, k = 1, (k[0] * k[5], k[1] * k[4], k[2], k[3])
        else:  # one filter per channel
            groups, k = c, (c, 1, k[2], k[3])
        x = (x[0], c, x[2], x[3])
    elif w.op == "Conv2d" and len(w.inputs) >= 2:
        strides, padding, dilation, groups, layout, kernel_layout, _out_layout, out_dtype = w.attrs
        x, k = w.inputs[0].shape, w.inputs[1].shape
        if (layout, kernel_layout) == ("NHWC", "OHWI"):
            x, k = (x[0], x[3], x[1], x[2]), (k[0], k[3], k[1], k[2])
        elif (layout, kernel_layout) != ("NCHW", "OIHW"):
            return None
    else:
        return None
    epilogue = tuple(e.op for e in w.epilogue)
    return layout, (x, k, strides, padding, dilation, groups, out_dtype, w.inputs[0].dtype, epilogue)


def layout_pairs(samples: Sequence[Sample], other: str = "NHWC") -> list[tuple[int, int]]:
    """(NCHW, ``other``) index pairs of ``samples`` that are one convolution in both layouts
    (``other``: NHWC, or NCHW16c, the blocked conv), with the same epilogue ops: the choice
    the pass's layout rules leave to the cost model."""
    return [(d["NCHW"], d[other]) for d in _conv_layouts(samples).values() if "NCHW" in d and other in d]


def _conv_layouts(samples: Sequence[Sample]) -> dict[tuple, dict[str, int]]:
    """The convolutions among ``samples`` by their identity in NCHW terms (``_conv_nchw_form``):
    the index of the first sample of each in each layout it was measured in."""
    by_form: dict[tuple, dict[str, int]] = {}
    for i, s in enumerate(samples):
        form = _conv_nchw_form(s.workload)
        if form is not None:
            by_form.setdefault(form[1], {}).setdefault(form[0], i)
    return by_form


def layout_decisions(
    workloads: Iterable[Workload],
    samples: Sequence[Sample],
    chosen_us: Callable[[Workload], float | None] = lambda w: None,
) -> list[dict]:
    """Whether a graph's layout choices were right, kernel by kernel: for each convolution
    among ``workloads`` (one per kernel of the graph) whose convolution ``samples`` measured in
    more than one layout, the layout the graph runs it in (``layout``), the measured
    microseconds in each (``us``; ``chosen_us`` times the chosen one where the samples lack it:
    its tuning database record, say) and each layout's kernel (``kernels``, to time again).
    The copies at layout boundaries are not counted."""
    by_form = _conv_layouts(samples)
    out = []
    for w in workloads:
        form = _conv_nchw_form(w)
        if form is None:
            continue
        layout, measured = form[0], by_form.get(form[1], {})
        times = {k: samples[i].median_us for k, i in measured.items()}
        kernels = {k: samples[i].workload for k, i in measured.items()}
        if layout not in times and (t := chosen_us(w)) is not None:
            times[layout], kernels[layout] = t, w
        if layout in times and len(times) > 1:
            out.append({"layout": layout, "us": times, "kernels": kernels})
    return out


def decision_counts(decisions: Sequence[dict]) -> dict:
    """``layout_decisions`` summed up: how many convs, how many run in their fastest measured
    layout, and the microseconds the others lose to it."""
    lost = [d["us"][d["layout"]] - min(d["us"].values()) for d in decisions]
    return {"convs": len(decisions), "fastest": sum(x <= 0 for x in lost), "lost_us": float(sum(lost))}


def load_elementwise(directory: str | Path) -> dict:
    """The ``elementwise.json`` calibration document in ``directory`` (empty if there is none)."""
    path = Path(directory) / ELEMENTWISE
    return json.loads(path.read_text()) if path.is_file() else {}


def sample_features(samples: Sequence[Sample]) -> np.ndarray:
    return featurize(sample_items(samples))


# What the booster learns: ``latency`` is log2 of the kernel's microseconds; ``residual`` is the
# log2 of its microseconds over the roofline's (the correction to the analytic model that
# MetaSchedule-style learned models fit).  The roofline is the one the pass itself prices the
# target with (``roofline_baseline``: the CPU's own calibrated peaks per kind of kernel) where
# the model's metadata names it as its ``baseline``; models trained before that (no ``baseline``)
# learned over the plain roofline of ``RESIDUAL_MACHINE`` computed from the features.  Over the
# calibrated one, Zen 5's 737 tuned kernels held out by model ranked at Spearman 0.951 against
# 0.948 (docs/cost-model.md)
OBJECTIVES = ("latency", "residual")
RESIDUAL_MACHINE = ("llvm", "tuned")


def baseline_spec(target: str, flow: str, simd_bits: int, mcpu: str = "generic") -> dict:
    """The roofline a residual model learns over, as its metadata's ``baseline`` names it.
    The model corrects that roofline as ``cost.py`` calibrated it when it was trained: retrain
    it after changing the calibration of its CPU."""
    return {"target": target, "flow": flow, "simd_bits": int(simd_bits), "mcpu": mcpu}


def roofline_baseline(items: Sequence[tuple], spec: dict) -> np.ndarray:
    """The microseconds the pass's roofline (``cost.RooflineCostModel`` of ``spec``) prices
    each bare kernel ``(op, attrs, in_tys, out_ty)`` at."""
    from .cost import RooflineCostModel

    model = RooflineCostModel(spec["target"], spec["flow"], int(spec["simd_bits"]), spec.get("mcpu", "generic"))
    return np.array(
        [model.node_cost(op, attrs, list(tys), out, False) for op, attrs, tys, out in items], dtype=np.float64
    )


def sample_items(samples: Sequence[Sample]) -> list[tuple]:
    """The ``(op, attrs, in_tys, out_ty)`` items of samples, as ``featurize`` and the roofline take them."""
    return [(s.workload.op, s.workload.attrs, s.workload.inputs, s.out_ty) for s in samples]


def roofline_from_features(x: np.ndarray, machine: tuple[str, str] = RESIDUAL_MACHINE) -> np.ndarray:
    """The roofline's microseconds for kernels from their feature rows (FLOPs and bytes are
    features, as log2): launch + max(compute, memory at the tier the traffic fits), as
    ``cost.RooflineCostModel`` prices a kernel node, with the machine's one compute peak for
    every kernel: the baseline the shipped residual models learned against (the pass's
    roofline gives each kind of kernel its own peak since 2026-11-27, ``cost._tuned_llvm_machines``;
    a model's correction absorbs the difference, a changed baseline would shift it)."""
    from .cost import MACHINES

    flops, traffic = _log_work(x)
    m = MACHINES[machine]
    return m.launch_us + m.busy_us(np.exp2(flops), np.exp2(traffic))


def _log_flops(x: np.ndarray) -> np.ndarray:
    return x[:, NAMES.index("log_flops")].astype(np.float64)


def _log_work(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log2 FLOPs and log2 bytes moved (in plus out) of feature rows."""
    traffic = np.exp2(x[:, NAMES.index("log_bytes_in")].astype(np.float64)) + np.exp2(
        x[:, NAMES.index("log_bytes_out")].astype(np.float64)
    )
    return _log_flops(x), np.log2(traffic)


def _op_of(x: np.ndarray) -> np.ndarray:
    """Each feature row's kernel op (its one-hot column), "" where it has none."""
    cols = [i for i, n in enumerate(NAMES) if n.startswith("op_")]
    onehot, ops = x[:, cols], np.array([NAMES[i][3:] for i in cols], dtype=object)
    return np.where(onehot.max(axis=1) > 0, ops[onehot.argmax(axis=1)], "")


# A tree cannot extrapolate: beyond its largest training kernel it predicts that kernel's time,
# however much more work is asked.  Held out by model, the default-flow model priced VGG-19's
# direct 3x3 convs (up to 2.4x the FLOPs of any other model's) at most like the largest other
# conv (the 14 held-out convs beyond the range: all underestimated, median |log2 error| 1.24) and
# chose them over Winograd on three wide layers, 1.5 s against 0.47 s measured
# (``scripts/held_out_choices.py``).  For convolutions the model therefore lets time grow with
# FLOPs beyond its range, as its own largest kernels' times grew (``extrapolation``): there the
# error fell to 0.19 (llvm) and from 0.76 to 0.48 on the 4 CUDA ones.  Not for the other ops:
# the held-out matmuls beyond the range were predicted well as they were (0.28, CUDA 0.11) and
# extrapolating in proportion to FLOPs overpriced them (0.85, 0.51); so it did concats,
# softmaxes, slices, norms and gathers, 1.4-15x (docs/cost-model.md).
EXTRAPOLATED_OPS = ("Conv2d",)
TAIL_LOG2_FLOPS = 3.0  # the growth is fitted on the kernels within 8x of the largest one's FLOPs
MIN_TAIL = 8  # kernels needed to fit it; with fewer, time grows in proportion to FLOPs


def extrapolation(samples: Sequence[Sample]) -> dict[str, dict[str, float]]:
    """For each op of ``EXTRAPOLATED_OPS`` in the training kernels: the largest log2 FLOPs among
    them, and the slope of log2 time on log2 FLOPs among those within ``TAIL_LOG2_FLOPS`` of it
    (kept in [0, 1]: time neither falls nor grows faster than the work).  Saved in a model's
    metadata and read by ``KernelModel.predict_us`` (through ``beyond_range``)."""
    x = sample_features(samples)
    flops, op_of = _log_flops(x), _op_of(x)
    log_us = np.log2([s.kernel_us for s in samples])
    out = {}
    for op in EXTRAPOLATED_OPS:
        rows = op_of == op
        if not rows.any():
            continue
        top = float(flops[rows].max())
        tail = rows & (flops >= top - TAIL_LOG2_FLOPS)
        slope = 1.0
        if tail.sum() >= MIN_TAIL and np.ptp(flops[tail]) > 0.5:
            slope = float(np.clip(np.polyfit(flops[tail], log_us[tail], 1)[0], 0.0, 1.0))
        out[op] = {"max_log2_flops": round(top, 4), "log2_us_per_log2_flops": round(slope, 4)}
    return out


def beyond_range(x: np.ndarray, extrapolated: dict[str, dict[str, float]]) -> np.ndarray:
    """The factor that extrapolates each row's predicted time beyond the largest training
    kernel of its op, from ``extrapolation``'s figures: (FLOPs over that kernel's) ** slope;
    1 within the range and for the ops not extrapolated."""
    flops, op_of = _log_flops(x), _op_of(x)
    factor = np.ones(len(x))
    for op, fit in extrapolated.items():
        rows = op_of == op
        excess = np.maximum(flops[rows] - fit["max_log2_flops"], 0.0)
        factor[rows] = np.exp2(fit["log2_us_per_log2_flops"] * excess)
    return factor


@dataclass(frozen=True, eq=False)
class Pooled:
    """Another machine's kernels that a residual booster also learns from: each one's log2 time
    over *that* machine's roofline (``baseline``), the correction the booster learns for this
    machine's.  Why: one 32-trial tuning is a lottery per kernel (a second tuning of the Xeon's
    kernels differs 1.2-1.34x at the median), and the same kernel tuned on another machine is
    another draw of how well MetaSchedule handles that kind of kernel, relative to the roofline."""

    name: str  # where it came from (a model directory)
    samples: tuple[Sample, ...]
    baseline: dict
    features: np.ndarray  # sample_features(samples)
    residual: np.ndarray  # log2(kernel_us / roofline_baseline(samples, baseline))

    @classmethod
    def of(cls, name: str, samples: Sequence[Sample], baseline: dict) -> Pooled:
        samples = tuple(samples)
        roofline = roofline_baseline(sample_items(samples), baseline) if samples else np.zeros(0)
        kernel_us = np.array([s.kernel_us for s in samples], dtype=np.float64)
        features = sample_features(samples) if samples else np.zeros((0, len(NAMES)))
        return cls(name, samples, baseline, features, np.log2(kernel_us) - np.log2(roofline))

    def without(self, models: set[str] = frozenset(), keys: set[str] = frozenset()) -> Pooled:
        """The kernels of neither the named models nor with those workload keys: what a held-out
        evaluation may train on (a held-out model's kernels stay unseen on every machine)."""
        keep = np.array([s.model not in models and s.workload.key() not in keys for s in self.samples], dtype=bool)
        if keep.all():
            return self
        samples = tuple(s for s, k in zip(self.samples, keep) if k)
        return Pooled(self.name, samples, self.baseline, self.features[keep], self.residual[keep])


def load_pooled(directory: str | Path, min_trials: int = TUNED_MIN_TRIALS) -> Pooled:
    """A residual model directory's kernels (``dataset.csv``, its ``elementwise.json``, the
    roofline its ``metadata.json`` names) as ``Pooled`` rows for another machine's model."""
    directory = Path(directory)
    meta = directory / "metadata.json"
    baseline = json.loads(meta.read_text()).get("baseline") if meta.is_file() else None
    if not baseline or not (directory / "dataset.csv").is_file():
        raise ValueError(
            f"{directory}: pooling needs a residual model's dataset.csv and a metadata.json naming its roofline "
            "(train_cost_model.py --objective residual)"
        )
    samples = load_dataset(
        directory / "dataset.csv",
        per_element_ns=load_elementwise(directory).get("ns_per_element", {}),
        min_trials=min_trials,
    )
    return Pooled.of(str(directory), samples, baseline)


def train(
    samples: Sequence[Sample],
    rounds: int = ROUNDS,
    params: dict | None = None,
    base=None,
    objective: str = "latency",
    baseline: dict | None = None,
    pooled: Sequence[Pooled] = (),
):
    """A booster fitted to log2 latency (``objective="residual"``: to log2 of latency over the
    roofline that ``baseline`` names, ``roofline_baseline``; None: the plain one of
    ``RESIDUAL_MACHINE``); ``base`` continues an existing booster (adapting a shipped model to
    a new machine with a few hundred measurements); ``pooled``: other machines' kernels learned
    beside these, each over its own machine's roofline (residual only, ``Pooled``).

    Both stay monotone in the work features.  For the residual that keeps the product
    monotone too (the roofline is, and the correction never falls as a kernel grows), at
    little cost in fit: on the tuned flow's 426 kernels, held out by model, the median error
    was 47.1% with the constraint and 46.4% without, and the unconstrained correction
    predicted a 4096-column matmul cheaper than the 2048-column one."""
    import xgboost as xgb

    if objective not in OBJECTIVES:
        raise ValueError(f"objective={objective!r}; known: {OBJECTIVES}")
    x = sample_features(samples)
    y = np.log2(np.array([s.kernel_us for s in samples]))
    params = {**PARAMS, **(params or {})}
    if objective == "residual":
        y = y - np.log2(roofline_baseline(sample_items(samples), baseline) if baseline else roofline_from_features(x))
    elif pooled:
        raise ValueError(
            "pooling other machines' kernels needs objective='residual' (their times are not this machine's)"
        )
    pooled = [p for p in pooled if len(p.samples)]
    if pooled:
        x = np.vstack([x, *(p.features for p in pooled)])
        y = np.concatenate([y, *(p.residual for p in pooled)])
    names = list(NAMES)
    if base is not None and base.feature_names and list(base.feature_names) != names:
        # a booster trained before some columns existed continues on its own columns
        names = list(base.feature_names)
        x = x[:, [INDEX[n] for n in names]]
        params["monotone_constraints"] = _monotone(names)
    data = xgb.DMatrix(x, label=y, feature_names=names)
    return xgb.train(params, data, num_boost_round=rounds, xgb_model=base)


def finetune_rounds(rounds: int) -> int:
    """Boosting rounds added when a trained booster continues on a new machine's kernels
    (``train_cost_model.py --finetune-from``): a quarter of a full training, at least 50."""
    return max(rounds // 4, 50)


class KernelModel:
    """A trained booster, its metadata, and the kernels it was trained on.

    ``measured`` maps a bare kernel (``bare_key``) to its measured latency: where the
    pass asks about a kernel that was measured, the measurement answers, as a tuning
    database's record would, and the booster answers the rest.  The booster is kept
    monotone (see ``PARAMS``), which costs it some fit on the training kernels; the
    table gives those back exactly, and ``collect_kernels.py --sources chosen`` adds
    the kernels the pass picked for a user's own models.

    ``elementwise`` is the calibration document of ``measure.elementwise_ns`` (its
    ``ns_per_element`` prices element-wise nodes; empty: they cost what the roofline says)."""

    def __init__(
        self, booster, metadata: dict, measured: dict[str, float] | None = None, elementwise: dict | None = None
    ) -> None:
        self.booster = booster
        self.metadata = metadata
        self.measured = dict(measured or {})
        self.elementwise = dict(elementwise or {})
        self.features: list[str] = list(metadata.get("features") or getattr(booster, "feature_names", None) or NAMES)
        unknown = [n for n in self.features if n not in INDEX]
        if unknown:
            raise ValueError(
                f"trained on other features, ones this version does not compute ({unknown[:3]}); retrain it"
            )
        if booster is not None and booster.num_features() != len(self.features):
            raise ValueError(
                f"trained on other features: the booster reads {booster.num_features()}, its metadata names "
                f"{len(self.features)}; retrain it"
            )
        # the columns of ``featurize``'s rows the booster reads: fewer than all of them for a
        # model trained before an op was added (it knows only its own ops: ``knows``)
        self.columns = None if self.features == list(NAMES) else np.array([INDEX[n] for n in self.features])
        self._ops = {n[3:] for n in self.features if n.startswith("op_")}

    @property
    def per_element_ns(self) -> dict[str, float]:
        return self.elementwise.get("ns_per_element", {})

    @staticmethod
    def load(directory: str | Path) -> KernelModel:
        import xgboost as xgb

        directory = Path(directory)
        booster = xgb.Booster()
        booster.load_model(str(directory / "model.json"))
        metadata = json.loads((directory / "metadata.json").read_text())
        if not metadata.get("features"):
            raise ValueError(f"{directory}: metadata.json does not name the model's features; retrain it")
        booster.set_param({"nthread": 1})  # small batches: threads cost more than they save
        table = directory / MEASURED
        measured = json.loads(table.read_text()) if table.is_file() else {}
        try:
            return KernelModel(booster, metadata, measured, load_elementwise(directory))
        except ValueError as err:
            raise ValueError(f"{directory}: {err}") from None

    def knows(self, op: str) -> bool:
        """Was the booster trained with ``op`` among its kernels (else the roofline prices it)?"""
        return op in self._ops

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.booster.save_model(str(directory / "model.json"))
        (directory / MEASURED).write_text(json.dumps(self.measured, indent=0, sort_keys=True) + "\n")
        if self.elementwise:
            (directory / ELEMENTWISE).write_text(json.dumps(self.elementwise, indent=2, sort_keys=True) + "\n")
        (directory / "metadata.json").write_text(json.dumps(self.metadata, indent=2, sort_keys=True) + "\n")

    def lookup_us(self, op: str, attrs: tuple, in_tys) -> float | None:
        """The measured latency of this bare kernel, if it was measured."""
        return self.measured.get(bare_key(op, attrs, in_tys))

    def predict_us(self, x: np.ndarray, baseline_us: np.ndarray | None = None) -> np.ndarray:
        """Predicted microseconds of feature rows ``x``.  A residual model over the pass's
        roofline (metadata ``baseline``) needs that roofline's prices, ``baseline_us``
        (``predict_items`` computes them)."""
        if len(x) == 0:
            return np.zeros(0)
        seen = x if self.columns is None else x[:, self.columns]
        out = np.exp2(self.booster.inplace_predict(seen, validate_features=False)).astype(np.float64)
        if self.metadata.get("objective") == "residual":
            if baseline_us is None:
                if self.metadata.get("baseline"):
                    raise ValueError("this model corrects the pass's roofline: price items with predict_items")
                baseline_us = roofline_from_features(x)
            out *= baseline_us  # the roofline extrapolates already
        elif self.metadata.get("extrapolation"):
            out *= beyond_range(x, self.metadata["extrapolation"])
        return out

    def predict_items(self, items: Sequence[tuple]) -> np.ndarray:
        """Predicted microseconds of bare kernels ``(op, attrs, in_tys, out_ty)``."""
        spec = self.metadata.get("baseline") if self.metadata.get("objective") == "residual" else None
        return self.predict_us(featurize(items), roofline_baseline(items, spec) if spec and items else None)
