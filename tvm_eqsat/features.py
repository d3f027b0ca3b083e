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

# kernels the model knows; anything else is costed by the roofline.  The TE kernels the rules
# make (TOPI's fast softmax, the channel-blocked conv) read back from a module the pass returned
# (``ops.BY_TE_KERNEL``), so a tuning database's records of them are training rows like any other
_TE_KERNELS = {spec.name for spec in ops.BY_TE_KERNEL.values()}
KERNEL_OPS = tuple(
    s.name for s in ops.BY_NAME.values() if s.kind == ops.KERNEL and (s.relax_op or s.name in _TE_KERNELS)
)
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
    if op == "Conv2dNCHWc" and out is not None and len(in_tys) > 1 and isinstance(in_tys[1], TensorTy):
        weight = in_tys[1]  # (O/b, I/b, kh, kw, b, b): each output sums over I * kh * kw
        return 2.0 * out.numel * weight.numel / max(weight.shape[0] * weight.shape[5], 1)
    if op == "DepthwiseConv2dNCHWc" and out is not None and len(in_tys) > 1 and isinstance(in_tys[1], TensorTy):
        return 2.0 * out.numel * in_tys[1].shape[2] * in_tys[1].shape[3]  # each output sums kh * kw taps
    if op in ("MaxPool2d", "AvgPool2d") and out is not None:
        return float(out.numel * _numel(attrs[0]))
    if op in ("LayerNorm", "BatchNorm", "Softmax", "FastSoftmax", "Mean") and first is not None:
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
    if op == "Conv2dNCHWc" and len(in_tys) == 2:
        weight = in_tys[1]  # (O/b, C/b, kh, kw, b, b)
        o = weight.shape[0] * weight.shape[5]
        return out.numel / max(o, 1), o, weight.numel / max(o, 1), 1
    if op == "DepthwiseConv2dNCHWc" and len(in_tys) == 2:
        weight = in_tys[1]  # (1, C/b, kh, kw, b): as the NCHW depthwise conv's view
        o = weight.shape[1] * weight.shape[4]
        return out.numel / max(o, 1), o, weight.shape[2] * weight.shape[3], 1
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
    elif op in ("Conv2dNCHWc", "DepthwiseConv2dNCHWc") and len(tensors) == 2:  # channels blocked: not last
        strides, padding, dilation = attrs[:3]
        v[INDEX["kh"]], v[INDEX["kw"]] = tensors[1].shape[2:4]
        v[INDEX["stride"]], v[INDEX["dilation"]] = max(strides), max(dilation)
        v[INDEX["pad"]] = sum(padding)
        if op == "DepthwiseConv2dNCHWc":  # groups = channels (the conv: groups 1)
            v[INDEX["log_groups"]] = _log(tensors[1].shape[1] * tensors[1].shape[4])
            v[INDEX["depthwise"]] = 1.0
    elif op in ("MaxPool2d", "AvgPool2d"):
        pool, strides, padding, dilation = attrs[:4]
        v[INDEX["kh"]], v[INDEX["kw"]] = pool
        v[INDEX["stride"]], v[INDEX["dilation"]] = max(strides), max(dilation)
        v[INDEX["pad"]] = sum(padding)
        v[INDEX["channels_last"]] = float(attrs[6].endswith("C"))
    if op in ("Softmax", "FastSoftmax", "LayerNorm", "Mean") and tensors:
        shape = tensors[0].shape
        axes = (attrs[0],) if op in ("Softmax", "FastSoftmax") else tuple(attrs[0])
        axes = tuple(a % len(shape) for a in axes) if shape else ()
        v[INDEX["reduce_log_len"]] = _log(_numel([shape[a] for a in axes]))
        v[INDEX["last_axis"]] = float(len(shape) - 1 in axes)
    return v


INDEX_OP = {name: INDEX[f"op_{name}"] for name in KERNEL_OPS}


# the kernels done in bulk, by how their work and GEMM view are computed (the rest, pools
# and norms with reduction features, go through ``features`` one by one)
_MATMUL, _CONV, _BATCH_NORM, _PLAIN = range(4)
_BULK_OPS = {
    "Matmul": _MATMUL,
    "Conv2d": _CONV,
    "BatchNorm": _BATCH_NORM,
    "Concat": _PLAIN,
    "StridedSlice": _PLAIN,
    "Take": _PLAIN,
}
_OUT_D, _IN0_D = INDEX["log_out_d0"], INDEX["log_in0_d0"]
_CONV_COLUMNS = [
    INDEX[k] for k in ("kh", "kw", "stride", "dilation", "log_groups", "pad", "depthwise", "channels_last")
]
_SIZE_COLUMNS = [
    INDEX[k]
    for k in ("log_flops", "log_bytes_in", "log_bytes_out", "log_out_numel", "log_m", "log_n", "log_k", "log_batch")
]


def _conv_geometry(attrs: tuple) -> tuple:
    """What a conv's attributes give its features, once per distinct attrs: the weight's O,
    H and W axes, the output's and input's C axes, the groups, then stride, dilation, log
    groups, padding and channels-last."""
    strides, padding, dilation, groups, data_layout, kernel_layout = attrs[:6]
    return (
        kernel_layout.index("O"),
        (attrs[6] or data_layout).index("C"),
        kernel_layout.index("H"),
        kernel_layout.index("W"),
        data_layout.index("C"),
        groups,
        max(strides),
        max(dilation),
        _log(groups),
        sum(padding),
        float(data_layout.endswith("C")),
    )


def _type_table(types: list) -> dict[str, np.ndarray]:
    """Per distinct tensor type, the numbers the features read, as columns; one extra last
    row (index -1) stands for a missing first input (no dims, rank 0)."""
    n = len(types) + 1
    head = np.ones((n, _MAX_RANK))  # the first dims (conv axes), padded with 1
    tail = np.zeros((n, _MAX_RANK))  # log2 of the last dims, 0 past the rank
    numel, nbytes, rank = np.zeros(n), np.zeros(n), np.zeros(n)
    last, second_last = np.ones(n), np.ones(n)
    for j, t in enumerate(types):
        shape = t.shape
        numel[j], nbytes[j], rank[j] = t.numel, t.nbytes, len(shape)
        head[j, : min(len(shape), _MAX_RANK)] = shape[:_MAX_RANK]
        dims = shape[-_MAX_RANK:]
        tail[j, : len(dims)] = [_log(d) for d in dims]
        if shape:
            last[j] = shape[-1]
        if len(shape) > 1:
            second_last[j] = shape[-2]
    return {
        "head": head,
        "tail": tail,
        "numel": numel,
        "nbytes": nbytes,
        "rank": rank,
        "last": last,
        "second_last": second_last,
    }


def featurize(items: Sequence[tuple]) -> np.ndarray:
    """``features(*item)`` for many items, as one (n, len(NAMES)) matrix.

    The common kernels (matmuls, convolutions, concats, batch norms) are done in bulk: one
    light pass in Python numbers their tensor types and records, per item, integers only
    (its category, its types' numbers, its conv attributes' number); numpy then computes
    every feature from per-type and per-attrs tables.  The rest go through ``features``
    one by one.  Equal to stacking ``features`` (tested)."""
    n = len(items)
    x = np.zeros((n, len(NAMES)), dtype=np.float32)
    if not n:
        return x
    type_of: dict[int, int] = {}  # id of a type object -> its number (the items hold them for the whole call)
    number: dict = {}  # (shape, dtype) -> the number of that type
    types: list = []  # by number
    geo_of: dict = {}  # a conv's attrs -> its number in geos
    geos: list[tuple] = []
    rows, cats, outs, in0, in1, geo, opcol, counts = [], [], [], [], [], [], [], []
    flat: list[int] = []  # every bulk item's input types, in order
    for i, (op, attrs, in_tys, out_ty) in enumerate(items):
        cat = _BULK_OPS.get(op)
        out = out_ty if type(out_ty) is TensorTy else _main_out(out_ty)
        if out is None:
            continue
        if cat is None:
            x[i] = features(op, attrs, in_tys, out_ty)
            continue
        idx = []
        for t in (out, *in_tys):
            if type(t) is not TensorTy:
                break
            j = type_of.get(id(t))
            if j is None:  # a new object: an equal type seen before shares its number
                j = type_of[id(t)] = number.setdefault((t.shape, t.dtype), len(types))
                if j == len(types):
                    types.append(t)
            idx.append(j)
        else:
            k = len(idx) - 1
            if cat is _MATMUL and k != 2 or cat is _CONV and k != 2 or cat is _BATCH_NORM and not k:
                cat = _PLAIN  # the odd arities feature only their sizes
            g = -1
            if cat is _CONV:
                g = geo_of.get(attrs)
                if g is None:
                    g = geo_of[attrs] = len(geos)
                    geos.append(_conv_geometry(attrs))
            rows.append(i)
            cats.append(cat)
            outs.append(idx[0])
            in0.append(idx[1] if k else -1)
            in1.append(idx[2] if k > 1 else -1)
            geo.append(g)
            opcol.append(INDEX_OP.get(op, -1))
            counts.append(k)
            flat.extend(idx[1:])
            continue
        x[i] = features(op, attrs, in_tys, out_ty)  # an input without a tensor type
    if not rows:
        return x
    tt = _type_table(types)
    r, cat, o, a, b = (np.asarray(v, dtype=np.int64) for v in (rows, cats, outs, in0, in1))
    count = np.asarray(counts, dtype=np.int64)
    o_numel = tt["numel"][o]
    bytes_in = np.zeros(len(r))
    has = count > 0
    if flat:
        starts = np.concatenate(([0], np.cumsum(count)[:-1]))
        bytes_in[has] = np.add.reduceat(tt["nbytes"][np.asarray(flat, dtype=np.int64)], starts[has])
    work, m, nn, kk, batch = o_numel.copy(), np.ones(len(r)), np.ones(len(r)), np.ones(len(r)), np.ones(len(r))
    sel = cat == _MATMUL
    if sel.any():
        sa, sb, on = a[sel], b[sel], o_numel[sel]
        k = tt["last"][sa]
        mm, n_ = tt["second_last"][sa], np.where(tt["rank"][sb] > 1, tt["last"][sb], 1.0)
        work[sel], m[sel], nn[sel], kk[sel] = 2.0 * on * k, mm, n_, k
        batch[sel] = np.maximum(on / np.maximum(mm * n_, 1), 1)
    sel = cat == _CONV
    if sel.any():
        gs = np.asarray(geos, dtype=np.float64)[np.asarray(geo, dtype=np.int64)[sel]]
        ax = gs[:, :5].astype(np.int64)
        sw, sx, so, on = b[sel], a[sel], o[sel], o_numel[sel]
        heads = tt["head"]
        oc = heads[sw, ax[:, 0]]
        w_numel = tt["numel"][sw]
        work[sel] = 2.0 * on * w_numel / np.maximum(oc, 1)
        m[sel], nn[sel], kk[sel] = on / np.maximum(heads[so, ax[:, 1]], 1), oc, w_numel / np.maximum(oc, 1)
        depthwise = (gs[:, 5] == heads[sx, ax[:, 4]]) & (gs[:, 5] > 1)
        x[r[sel][:, None], _CONV_COLUMNS] = np.column_stack(
            (heads[sw, ax[:, 2]], heads[sw, ax[:, 3]], gs[:, 6:10], depthwise, gs[:, 10])
        )
    sel = cat == _BATCH_NORM
    work[sel] = 5.0 * tt["numel"][a[sel]]
    sizes = np.column_stack((work, bytes_in, tt["nbytes"][o], o_numel, m, nn, kk, batch))
    x[r[:, None], _SIZE_COLUMNS] = np.log2(np.maximum(sizes, 1.0))
    x[r, INDEX["n_inputs"]], x[r, INDEX["out_rank"]] = count, tt["rank"][o]
    x[r, INDEX["dtype_bytes"]] = tt["nbytes"][o] / np.maximum(o_numel, 1)
    col = np.asarray(opcol, dtype=np.int64)
    x[r[col >= 0], col[col >= 0]] = 1.0
    x[r, _OUT_D : _OUT_D + _MAX_RANK] = tt["tail"][o]
    x[r, _IN0_D : _IN0_D + _MAX_RANK] = tt["tail"][a]
    return x
