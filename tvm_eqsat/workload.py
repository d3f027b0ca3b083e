"""A kernel instance: an op with its attributes and input types, plus the
element-wise epilogue FuseOps fuses into it.  What the cost model is asked about
and what ``measure`` builds and times; its JSON form keys the dataset."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .graph import TensorTy


@dataclass(frozen=True)
class Epilogue:
    """One element-wise op applied to the kernel's output; binary ops take a second
    operand of ``operand`` shape (a bias or per-channel scale), broadcast by Relax."""

    op: str
    operand: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Workload:
    """An op instance: what the cost model is asked about and what gets measured."""

    op: str  # an ops.BY_NAME name
    attrs: tuple
    inputs: tuple[TensorTy, ...]
    epilogue: tuple[Epilogue, ...] = ()

    def key(self) -> str:
        """A stable text key (dataset rows, caches)."""
        return json.dumps(self.to_json(), sort_keys=True)

    def to_json(self) -> dict:
        return {
            "op": self.op,
            "attrs": _jsonable(self.attrs),
            "inputs": [[list(t.shape), t.dtype] for t in self.inputs],
            "epilogue": [[e.op, list(e.operand) if e.operand is not None else None] for e in self.epilogue],
        }

    @staticmethod
    def from_json(d: dict) -> "Workload":
        return Workload(
            d["op"],
            _hashable(d["attrs"]),
            tuple(TensorTy(tuple(s), dt) for s, dt in d["inputs"]),
            tuple(Epilogue(op, tuple(o) if o is not None else None) for op, o in d["epilogue"]),
        )


def _jsonable(value):
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value
