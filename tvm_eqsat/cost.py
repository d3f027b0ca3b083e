"""Node costs: predicted latency (microseconds) of a node as TVM's fused build runs it.

Until the learned per-target model lands, an analytic roofline serves: a kernel
costs a launch plus max(FLOPs / peak, bytes / bandwidth).  It follows how TVM
builds the graph: values computed only from constants/weights are folded at
compile time (zero), reshape-like views are nearly free, and element-wise ops
that FuseOps folds into their producer pay only a small epilogue share.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Sequence

from . import ops
from .graph import CONST, INPUT, OPAQUE, TGET, TUPLE_NODE, TensorTy, Ty

log = logging.getLogger("tvm_eqsat")

EPSILON_US = 1e-6  # every chosen node costs something: ties never make cycles attractive
EPILOGUE_SHARE = 0.1  # share of its own memory traffic that a fused element-wise op pays


@dataclass(frozen=True)
class Machine:
    peak_gflops: float
    bandwidth_gbs: float
    launch_us: float


MACHINES = {
    # 2-core x86 VM with TVM-tuned fp32 kernels (~120 GFLOP/s on a tuned 512^3 matmul)
    "llvm": Machine(peak_gflops=100.0, bandwidth_gbs=10.0, launch_us=2.0),
    # a datacenter GPU under dlight schedules (well below the tensor-core peak)
    "cuda": Machine(peak_gflops=30000.0, bandwidth_gbs=2000.0, launch_us=4.0),
}


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _bytes(ty: Ty | None) -> int:
    if isinstance(ty, TensorTy):
        return ty.nbytes
    if isinstance(ty, tuple):
        return sum(_bytes(t) for t in ty)
    return 0


def flops(op: str, attrs: tuple, in_tys: Sequence[Ty | None], out_ty: Ty | None) -> float:
    """Arithmetic work of one node (multiply-adds count two)."""
    out = out_ty if isinstance(out_ty, TensorTy) else None
    first = in_tys[0] if in_tys and isinstance(in_tys[0], TensorTy) else None
    if op == "Matmul" and out is not None and first is not None:
        return 2.0 * out.numel * first.shape[-1]
    if op == "Conv2d" and out is not None and len(in_tys) > 1 and isinstance(in_tys[1], TensorTy):
        weight = in_tys[1]
        kernel_layout = attrs[5]
        out_channels = weight.shape[kernel_layout.index("O")] if "O" in kernel_layout else 1
        return 2.0 * out.numel * weight.numel / max(out_channels, 1)
    if op in ("MaxPool2d", "AvgPool2d") and out is not None:
        return float(out.numel * _numel(attrs[0]))
    if op in ("LayerNorm", "BatchNorm", "Softmax", "Mean") and first is not None:
        return 5.0 * first.numel
    if out is not None:
        return float(out.numel)
    return 0.0


class RooflineCostModel:
    """FLOPs/bytes against a machine's peaks, shaped by how TVM fuses and folds."""

    name = "roofline"

    def __init__(self, target_kind: str) -> None:
        self.machine = MACHINES.get(target_kind, MACHINES["llvm"])

    def node_cost(
        self, op: str, attrs: tuple, in_tys: Sequence[Ty | None], out_ty: Ty | None, is_const: bool
    ) -> float:
        if is_const or op in (INPUT, CONST, TUPLE_NODE, TGET):
            return EPSILON_US
        m = self.machine
        traffic = _bytes(out_ty) + sum(_bytes(t) for t in in_tys)
        mem_us = traffic / (m.bandwidth_gbs * 1e3)
        spec = ops.BY_NAME.get(op)
        kind = spec.kind if spec is not None else ops.KERNEL  # opaque: assume its own kernel
        if kind == ops.VIEW:
            return EPSILON_US + 0.01 * mem_us
        if kind == ops.ELEMWISE:
            return EPSILON_US + EPILOGUE_SHARE * max(mem_us, flops(op, attrs, in_tys, out_ty) / (m.peak_gflops * 1e3))
        compute_us = flops(op, attrs, in_tys, out_ty) / (m.peak_gflops * 1e3)
        if op == OPAQUE:
            compute_us = 0.0
        return EPSILON_US + m.launch_us + max(compute_us, mem_us)


def make_cost_model(spec: str, target_kind: str) -> RooflineCostModel:
    """The cost model named by the pass option ``cost_model``."""
    if spec == "roofline":
        return RooflineCostModel(target_kind)
    raise ValueError(
        f"cost_model={spec!r} is not available; available: 'roofline' "
        "(the learned XGBoost model is not shipped yet)"
    )
