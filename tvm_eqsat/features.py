"""Features of a kernel for the learned cost model: what it is (op kind, layout),
how big (shapes and their logs), how much work (FLOPs, bytes), and its
conv/pool geometry.

The element-wise epilogue that FuseOps fuses into a kernel is not a feature: the
pass costs each e-node on its own (the epilogue's share is charged where the
epilogue node is), so the model is asked only about bare kernels.  Training rows
measured with an epilogue teach it the kernel with its usual epilogue (a small
double count with that share, alike for the original and the rewritten graph); with
epilogue features it learned the bare kernel only from the few rows measured
without one, and guessed far too low for the rest (squeezenet's merged 3x3 conv:
13 us predicted, 24 us measured).

One fixed-length float vector per kernel; ``featurize`` stacks many of them so
the model predicts thousands of e-nodes in one call.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from . import ops
from .graph import TensorTy

# kernels the model knows; anything else is costed by the roofline
KERNEL_OPS = tuple(s.name for s in ops.BY_NAME.values() if s.kind == ops.KERNEL)
_MAX_RANK = 6

NAMES: tuple[str, ...] = (
    *(f"op_{name}" for name in KERNEL_OPS),
    "log_flops",
    "log_bytes_in",
    "log_bytes_out",
    "log_out_numel",
    "dtype_bytes",
    "n_inputs",
    "out_rank",
    *(f"log_out_d{i}" for i in range(_MAX_RANK)),
    *(f"log_in0_d{i}" for i in range(_MAX_RANK)),
    "log_m",
    "log_n",
    "log_k",
    "log_batch",  # matmul view of the op (conv: implicit GEMM)
    "kh",
    "kw",
    "stride",
    "dilation",
    "log_groups",
    "pad",
    "depthwise",
    "channels_last",
    "reduce_log_len",
    "last_axis",
)
INDEX = {name: i for i, name in enumerate(NAMES)}

# Features that measure how much work a kernel does: with everything else equal, more
# of any of them never makes a kernel faster.  The model is trained monotone in them,
# because the rewrites (merged, enlarged, concatenated kernels) ask it about kernels
# larger than any it saw, where an unconstrained tree can predict a bigger kernel to
# be cheaper than a smaller one (squeezenet: a 3x3 conv with 32 output channels
# predicted faster than the same conv with 16) and the extractor then picks it.
# Arithmetic intensity is left out of the features for the same reason: it is
# flops / bytes, so it rises with the work and lets a tree undo the constraint.
WORK_FEATURES = frozenset(
    {
        "log_flops",
        "log_bytes_in",
        "log_bytes_out",
        "log_out_numel",
        *(f"log_out_d{i}" for i in range(_MAX_RANK)),
        *(f"log_in0_d{i}" for i in range(_MAX_RANK)),
        "log_m",
        "log_n",
        "log_k",
        "log_batch",
        "kh",
        "kw",
        "reduce_log_len",
    }
)


def _log(x: float) -> float:
    return math.log2(max(float(x), 1.0))


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def flops(op: str, attrs: tuple, in_tys: Sequence, out_ty) -> float:
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


def nbytes(ty) -> int:
    """Bytes of a tensor type, or of all tensors in a tuple type."""
    if isinstance(ty, TensorTy):
        return ty.nbytes
    if isinstance(ty, tuple):
        return sum(nbytes(t) for t in ty)
    return 0


def _main_out(out_ty):
    """A tuple-valued kernel (batch_norm) is measured and costed by its first output."""
    while isinstance(out_ty, tuple) and out_ty:
        out_ty = out_ty[0]
    return out_ty if isinstance(out_ty, TensorTy) else None


def _gemm_view(op: str, attrs: tuple, in_tys: Sequence, out: TensorTy) -> tuple[float, float, float, float]:
    """(m, n, k, batch) of the op seen as a matrix product; ones where it is not one."""
    if op == "Matmul" and len(in_tys) == 2:
        a, b = in_tys
        k = a.shape[-1]
        m = a.shape[-2] if len(a.shape) > 1 else 1
        n = b.shape[-1] if len(b.shape) > 1 else 1
        return m, n, k, max(out.numel / max(m * n, 1), 1)
    if op == "Conv2d" and len(in_tys) == 2:
        weight = in_tys[1]
        kl, ol = attrs[5], attrs[6] or attrs[4]
        o = weight.shape[kl.index("O")]
        spatial = out.numel / max(out.shape[ol.index("C")], 1)
        k = weight.numel / max(o, 1)
        return spatial, o, k, 1
    return 1, 1, 1, 1


def features(op: str, attrs: tuple, in_tys: Sequence, out_ty) -> np.ndarray:
    """The feature vector of one kernel."""
    v = np.zeros(len(NAMES), dtype=np.float32)
    out = _main_out(out_ty)
    if out is None:
        return v
    tensors = [t for t in in_tys if isinstance(t, TensorTy)]
    if op in INDEX_OP:
        v[INDEX_OP[op]] = 1.0
    work = flops(op, attrs, in_tys, out)
    bytes_in = sum(t.nbytes for t in tensors)
    bytes_out = nbytes(out)
    v[INDEX["log_flops"]] = _log(work)
    v[INDEX["log_bytes_in"]] = _log(bytes_in)
    v[INDEX["log_bytes_out"]] = _log(bytes_out)
    v[INDEX["log_out_numel"]] = _log(out.numel)
    v[INDEX["dtype_bytes"]] = out.nbytes / max(out.numel, 1)
    v[INDEX["n_inputs"]] = len(tensors)
    v[INDEX["out_rank"]] = len(out.shape)
    for i, d in enumerate(out.shape[-_MAX_RANK:]):
        v[INDEX[f"log_out_d{i}"]] = _log(d)
    if tensors:
        for i, d in enumerate(tensors[0].shape[-_MAX_RANK:]):
            v[INDEX[f"log_in0_d{i}"]] = _log(d)
    m, n, k, batch = _gemm_view(op, attrs, tensors, out)
    v[INDEX["log_m"]], v[INDEX["log_n"]], v[INDEX["log_k"]], v[INDEX["log_batch"]] = map(_log, (m, n, k, batch))
    if op == "Conv2d" and len(tensors) == 2:
        strides, padding, dilation, groups, data_layout, kernel_layout = attrs[:6]
        w = tensors[1].shape
        v[INDEX["kh"]], v[INDEX["kw"]] = w[kernel_layout.index("H")], w[kernel_layout.index("W")]
        v[INDEX["stride"]], v[INDEX["dilation"]] = max(strides), max(dilation)
        v[INDEX["log_groups"]] = _log(groups)
        v[INDEX["pad"]] = sum(padding)
        channels = tensors[0].shape[data_layout.index("C")]
        v[INDEX["depthwise"]] = float(groups == channels and groups > 1)
        v[INDEX["channels_last"]] = float(data_layout.endswith("C"))
    elif op in ("MaxPool2d", "AvgPool2d"):
        pool, strides, padding, dilation = attrs[:4]
        v[INDEX["kh"]], v[INDEX["kw"]] = pool
        v[INDEX["stride"]], v[INDEX["dilation"]] = max(strides), max(dilation)
        v[INDEX["pad"]] = sum(padding)
        v[INDEX["channels_last"]] = float(attrs[6].endswith("C"))
    if op in ("Softmax", "LayerNorm", "Mean") and tensors:
        shape = tensors[0].shape
        axes = (attrs[0],) if op == "Softmax" else tuple(attrs[0])
        axes = tuple(a % len(shape) for a in axes) if shape else ()
        v[INDEX["reduce_log_len"]] = _log(_numel([shape[a] for a in axes]))
        v[INDEX["last_axis"]] = float(len(shape) - 1 in axes)
    return v


INDEX_OP = {name: INDEX[f"op_{name}"] for name in KERNEL_OPS}


_BULK_OPS = frozenset({"Matmul", "Conv2d", "Concat", "BatchNorm", "StridedSlice", "Take"})  # no reduce/pool features
_OUT_D, _IN0_D = INDEX["log_out_d0"], INDEX["log_in0_d0"]


def _shape_info(ty: TensorTy, cache: dict) -> tuple:
    """(numel, nbytes, rank, last dims padded with 1, shape) of a type, computed once per
    type object (keyed by identity: the items hold their types for the whole call)."""
    info = cache.get(id(ty))
    if info is None:
        dims = ty.shape[-_MAX_RANK:]
        info = cache[id(ty)] = (ty.numel, ty.nbytes, len(ty.shape), dims + (1,) * (_MAX_RANK - len(dims)), ty.shape)
    return info


def _conv_geometry(attrs: tuple) -> tuple:
    """What a conv's attributes give its features, once per distinct attrs: the weight's O,
    H and W axes, the output's and input's C axes, (stride, dilation, log groups, padding)
    and channels-last."""
    strides, padding, dilation, groups, data_layout, kernel_layout = attrs[:6]
    return (
        kernel_layout.index("O"),
        (attrs[6] or data_layout).index("C"),
        kernel_layout.index("H"),
        kernel_layout.index("W"),
        data_layout.index("C"),
        (max(strides), max(dilation), _log(groups), sum(padding)),
        float(data_layout.endswith("C")),
    )


def featurize(items: Sequence[tuple]) -> np.ndarray:
    """``features(*item)`` for many items, as one (n, len(NAMES)) matrix.

    The common kernels (matmuls, convolutions, concats, batch norms) are done in bulk:
    one light pass in Python gathers their sizes into lists, numpy turns them into
    columns; the rest go through ``features`` one by one.  Equal to stacking
    ``features`` (tested)."""
    n = len(items)
    x = np.zeros((n, len(NAMES)), dtype=np.float32)
    if not n:
        return x
    rows: list[int] = []  # items done in bulk, and per item: the raw sizes, dims, counts
    raw: list[tuple] = []  # flops, bytes in, bytes out, out numel, m, n, k, batch
    out_dims: list[tuple] = []
    in0_dims: list[tuple] = []
    counts: list[tuple] = []  # op column, n_inputs, out rank, in0 rank, dtype bytes
    conv: list[tuple] = []  # (row, kh, kw, stride, dilation, groups, pad, depthwise, channels_last)
    cache: dict = {}
    conv_attrs: dict = {}  # a conv's attrs -> _conv_geometry (many convs share them)
    ones = (1,) * _MAX_RANK
    for i, (op, attrs, in_tys, out_ty) in enumerate(items):
        out = out_ty if type(out_ty) is TensorTy else _main_out(out_ty)
        if out is None:
            continue
        if op not in _BULK_OPS or not all(type(t) is TensorTy for t in in_tys):
            x[i] = features(op, attrs, in_tys, out_ty)
            continue
        o_numel, o_bytes, o_rank, o_dims, _ = _shape_info(out, cache)
        infos = [_shape_info(t, cache) for t in in_tys]
        if op == "Matmul" and len(infos) == 2:  # flops and the GEMM view from the cached sizes
            a, b = infos[0][4], infos[1][4]
            k = a[-1]
            m, nn = (a[-2] if len(a) > 1 else 1), (b[-1] if len(b) > 1 else 1)
            work, gemm = 2.0 * o_numel * k, (m, nn, k, max(o_numel / max(m * nn, 1), 1))
        elif op == "Conv2d" and len(infos) == 2:
            geo = conv_attrs.get(attrs)
            if geo is None:
                geo = conv_attrs[attrs] = _conv_geometry(attrs)
            w = infos[1][4]
            o = w[geo[0]]
            work = 2.0 * o_numel * infos[1][0] / max(o, 1)
            spatial = o_numel / max(out.shape[geo[1]], 1)
            gemm = (spatial, o, infos[1][0] / max(o, 1), 1)
        else:
            work, gemm = (5.0 * infos[0][0] if op == "BatchNorm" and infos else float(o_numel)), (1, 1, 1, 1)
        rows.append(i)
        raw.append((work, sum(info[1] for info in infos), o_bytes, o_numel, *gemm))
        out_dims.append(o_dims)
        in0_dims.append(infos[0][3] if infos else ones)
        counts.append(
            (
                INDEX_OP.get(op, -1),
                len(infos),
                min(o_rank, _MAX_RANK),
                min(infos[0][2], _MAX_RANK) if infos else 0,
                o_bytes / max(o_numel, 1),
            )
        )
        if op == "Conv2d" and len(infos) == 2:
            groups = attrs[3]
            depthwise = float(groups == infos[0][4][geo[4]] and groups > 1)
            conv.append((i, w[geo[2]], w[geo[3]], *geo[5], depthwise, geo[6]))
    if not rows:
        return x
    r = np.asarray(rows)
    logs = np.log2(np.maximum(np.asarray(raw, dtype=np.float64), 1.0))
    c = np.asarray(counts, dtype=np.float64)
    cols = [
        INDEX[k]
        for k in ("log_flops", "log_bytes_in", "log_bytes_out", "log_out_numel", "log_m", "log_n", "log_k", "log_batch")
    ]
    x[r[:, None], cols] = logs
    x[r, INDEX["n_inputs"]], x[r, INDEX["out_rank"]], x[r, INDEX["dtype_bytes"]] = c[:, 1], c[:, 2], c[:, 4]
    has_op = c[:, 0] >= 0
    x[r[has_op], c[has_op, 0].astype(np.int64)] = 1.0
    rank = np.arange(_MAX_RANK)
    dims_out = np.log2(np.maximum(np.asarray(out_dims, dtype=np.float64), 1.0))
    dims_in0 = np.log2(np.maximum(np.asarray(in0_dims, dtype=np.float64), 1.0))
    x[r, _OUT_D : _OUT_D + _MAX_RANK] = np.where(rank < c[:, 2:3], dims_out, 0.0)
    x[r, _IN0_D : _IN0_D + _MAX_RANK] = np.where(rank < c[:, 3:4], dims_in0, 0.0)
    if conv:
        g = np.asarray(conv, dtype=np.float64)
        names = ("kh", "kw", "stride", "dilation", "log_groups", "pad", "depthwise", "channels_last")
        x[g[:, 0].astype(np.int64)[:, None], [INDEX[k] for k in names]] = g[:, 1:]
    return x
