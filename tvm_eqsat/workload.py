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
    operand of ``operand`` shape (a bias or per-channel scale, or a residual),
    broadcast by Relax, on the right unless ``operand_first``; ``attrs`` are the
    op's own (clip's bounds).  Operand order and attrs matter for matching the
    kernel against a MetaSchedule database, not for its cost."""

    op: str
    operand: tuple[int, ...] | None = None
    attrs: tuple = ()
    operand_first: bool = False

    def to_json(self) -> list:
        """[op, operand] (the form older dataset keys use), then attrs and the order flag when set."""
        out = [self.op, list(self.operand) if self.operand is not None else None]
        if self.attrs or self.operand_first:
            out.append(_jsonable(self.attrs))
        if self.operand_first:
            out.append(True)
        return out

    @staticmethod
    def from_json(d: list) -> Epilogue:
        op, operand, *rest = d
        return Epilogue(
            op,
            tuple(operand) if operand is not None else None,
            _hashable(rest[0]) if rest else (),
            bool(rest[1]) if len(rest) > 1 else False,
        )


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
            "epilogue": [e.to_json() for e in self.epilogue],
        }

    @staticmethod
    def from_json(d: dict) -> Workload:
        return Workload(
            d["op"],
            _hashable(d["attrs"]),
            tuple(TensorTy(tuple(s), dt) for s, dt in d["inputs"]),
            tuple(Epilogue.from_json(e) for e in d["epilogue"]),
        )


def _jsonable(value):
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    return value


def _hashable(value):
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value
