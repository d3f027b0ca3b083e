"""The learned kernel-latency model: XGBoost on ``features`` -> log2(microseconds).

Trained on kernels TVM compiled and timed (``scripts/collect_kernels.py``),
one model per target, saved as ``cost_models/<target>/model.json`` with a
``metadata.json`` that says where the data came from.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from .features import NAMES, featurize
from .graph import TensorTy
from .workload import Workload

PARAMS = {
    "objective": "reg:squarederror",
    "max_depth": 6,
    "eta": 0.05,
    "subsample": 0.9,
    "colsample_bytree": 0.9,
    "min_child_weight": 1.0,
    "nthread": 2,
    "seed": 0,
}
ROUNDS = 600


DATASET_FIELDS = [
    "target", "flow", "trials", "model", "source", "op", "key", "out_ty", "median_us", "p10_us", "p90_us", "seconds",
]


def ty_json(ty) -> list:
    """A TensorTy (or a tuple of them) as the dataset's ``out_ty`` column holds it."""
    if isinstance(ty, TensorTy):
        return [list(ty.shape), ty.dtype]
    return [ty_json(t) for t in ty]


def dataset_row(target: str, flow: str, trials: int, model: str, source: str, w: Workload, out_ty,
                median_us: float, p10_us: float, p90_us: float, seconds: float) -> dict:
    """One CSV row of the kernel dataset (``collect_kernels.py``, ``train_cost_model.py --from-database``)."""
    return {
        "target": target, "flow": flow, "trials": trials, "model": model, "source": source,
        "op": w.op, "key": w.key(), "out_ty": json.dumps(ty_json(out_ty)),
        "median_us": f"{median_us:.3f}", "p10_us": f"{p10_us:.3f}", "p90_us": f"{p90_us:.3f}",
        "seconds": f"{seconds:.1f}",
    }


@dataclass
class Sample:
    model: str
    source: str
    workload: Workload
    out_ty: object
    median_us: float
    spread: float  # (p90 - p10) / median


def _ty(value):
    if len(value) == 2 and isinstance(value[1], str):
        return TensorTy(tuple(value[0]), value[1])
    return tuple(_ty(v) for v in value)


def load_dataset(path: str | Path, flow: str | None = None) -> list[Sample]:
    """Rows of a ``collect_kernels.py`` CSV (the last measurement of each workload wins)."""
    by_key: dict[str, Sample] = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            if flow is not None and row["flow"] != flow:
                continue
            median = float(row["median_us"])
            by_key[row["key"]] = Sample(
                row["model"], row["source"], Workload.from_json(json.loads(row["key"])),
                _ty(json.loads(row["out_ty"])), median,
                (float(row["p90_us"]) - float(row["p10_us"])) / max(median, 1e-9),
            )
    return list(by_key.values())


def sample_features(samples: Sequence[Sample]) -> np.ndarray:
    return featurize([
        (s.workload.op, s.workload.attrs, s.workload.inputs, s.out_ty, [(e.op, e.operand) for e in s.workload.epilogue])
        for s in samples
    ])


def train(samples: Sequence[Sample], rounds: int = ROUNDS, params: dict | None = None, base=None):
    """A booster fitted to log2 latency; ``base`` continues an existing booster
    (adapting a shipped model to a new machine with a few hundred measurements)."""
    import xgboost as xgb

    x = sample_features(samples)
    y = np.log2(np.array([s.median_us for s in samples]))
    data = xgb.DMatrix(x, label=y, feature_names=list(NAMES))
    return xgb.train({**PARAMS, **(params or {})}, data, num_boost_round=rounds, xgb_model=base)


class KernelModel:
    """A trained booster and its metadata; ``predict_us`` over a feature matrix."""

    def __init__(self, booster, metadata: dict) -> None:
        self.booster = booster
        self.metadata = metadata

    @staticmethod
    def load(directory: str | Path) -> "KernelModel":
        import xgboost as xgb

        directory = Path(directory)
        booster = xgb.Booster()
        booster.load_model(str(directory / "model.json"))
        metadata = json.loads((directory / "metadata.json").read_text())
        if metadata.get("features") != list(NAMES):
            raise ValueError(f"{directory}: model was trained on other features; retrain it")
        booster.set_param({"nthread": 1})  # small batches: threads cost more than they save
        return KernelModel(booster, metadata)

    def save(self, directory: str | Path) -> None:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.booster.save_model(str(directory / "model.json"))
        (directory / "metadata.json").write_text(json.dumps(self.metadata, indent=2, sort_keys=True) + "\n")

    def predict_us(self, x: np.ndarray) -> np.ndarray:
        if len(x) == 0:
            return np.zeros(0)
        return np.exp2(self.booster.inplace_predict(x, validate_features=False)).astype(np.float64)
