"""A reference interpreter of TensorGraphs in numpy, in exact-as-possible arithmetic.

Translation validation (``validate``) runs the original block and the rewritten one
on the same random inputs.  Floating-point values are held in float64 whatever
their dtype (``astype`` still rounds through its target dtype), so two graphs that
compute the same function agree to ~1e-12, and a wrong rewrite shows as a large
relative difference rather than hiding in fp16 or fp32 rounding.  (In float32, an output
that sums terms which nearly cancel, 0.0035 out of terms near 5, differed by 2e-4 of
itself between a block and its sound conv merge, which failed validation: fuzz seed 3370.)

Values are shared between graphs by structure: a node whose op, attributes and
(recursively) inputs equal a node already evaluated reuses its value, so the
rewritten graph costs only its new nodes.  A native op or attribute the interpreter
does not cover is run through TVM on its own (``run_with_tvm``); an opaque call is a
random function of its inputs (``Interpreter``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import ops, te_ops
from .graph import CONST, INPUT, OPAQUE, TGET, TUPLE_NODE, TensorGraph, TensorTy, Ty, structural_ids, topological_order
from .tables import table


class NotCovered(Exception):
    """The interpreter has no numpy form for this op and attributes."""


def _is_float(dtype: str) -> bool:
    return dtype.startswith("float") or dtype.startswith("bfloat")


FLOAT = np.float64  # every float dtype is held and computed in float64


def as_exact(array: np.ndarray) -> np.ndarray:
    """A value as the interpreter holds it: floats as float64, integers as int64."""
    if array.dtype == bool:
        return array
    if np.issubdtype(array.dtype, np.integer):
        return array.astype(np.int64)
    return array.astype(FLOAT)


def random_value(ty: Ty, rng: np.random.Generator):
    """A random value of type ``ty``: standard normal floats, small non-negative ints."""
    if isinstance(ty, tuple):
        return tuple(random_value(t, rng) for t in ty)
    if ty.dtype == "bool":
        return rng.integers(0, 2, ty.shape).astype(bool)
    if not _is_float(ty.dtype):
        return rng.integers(0, 2, ty.shape).astype(np.int64)
    return rng.standard_normal(ty.shape, dtype=FLOAT)


# ---------------------------------------------------------------- op semantics


def _to_layout(x: np.ndarray, layout: str, canonical: str) -> np.ndarray:
    if sorted(layout) != sorted(canonical) or not layout.isalpha() or not layout.isupper():
        raise NotCovered(f"layout {layout}")
    return np.transpose(x, [layout.index(c) for c in canonical])


def _from_layout(x: np.ndarray, canonical: str, layout: str) -> np.ndarray:
    if sorted(layout) != sorted(canonical):
        raise NotCovered(f"layout {layout}")
    return np.transpose(x, [canonical.index(c) for c in layout])


def _windows(x: np.ndarray, size, strides, padding, dilation, fill: float) -> np.ndarray:
    """(N, C, Ho, Wo, kh, kw) windows of an NCHW tensor padded with ``fill``."""
    top, left, bottom, right = padding
    xp = np.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=fill) if any(padding) else x
    (kh, kw), (sh, sw), (dh, dw) = size, strides, dilation
    win = sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(2, 3))
    return win[:, :, ::sh, ::sw, ::dh, ::dw]


def _conv2d(xs, a):
    strides, padding, dilation, groups, data_layout, kernel_layout, out_layout, _ = a
    x = _to_layout(xs[0], data_layout, "NCHW")
    w = _to_layout(xs[1], kernel_layout, "OIHW")
    o, cg, kh, kw = w.shape
    win = _windows(x, (kh, kw), strides, padding, dilation, 0.0)
    n, c, ho, wo = win.shape[:4]
    if c != cg * groups or o % groups:
        raise ValueError(f"conv2d: {c} channels, weight {w.shape}, groups {groups}")
    og = o // groups
    # im2col: one matrix product per group (BLAS), rows = output positions
    cols = win.reshape(n, groups, cg, ho, wo, kh, kw).transpose(1, 0, 3, 4, 2, 5, 6)
    cols = cols.reshape(groups, n * ho * wo, cg * kh * kw)
    wg = w.reshape(groups, og, cg * kh * kw).transpose(0, 2, 1)
    out = np.matmul(cols, wg)  # (groups, n*ho*wo, og)
    out = out.reshape(groups, n, ho, wo, og).transpose(1, 0, 4, 2, 3).reshape(n, o, ho, wo)
    return _from_layout(out, "NCHW", out_layout)


def _pool(reduce: str):
    def run(xs, a):
        size, strides, padding, dilation, ceil_mode, count_include_pad, layout, out_layout = a
        x = _to_layout(xs[0], layout, "NCHW")
        if ceil_mode:  # windows may run past the end: pad bottom/right by what they need
            if reduce != "max":
                raise NotCovered("average pooling with ceil_mode")
            padding = list(padding)
            for axis, (lo, hi) in ((2, (0, 2)), (3, (1, 3))):
                span = x.shape[axis] + padding[lo] + padding[hi] - dilation[axis - 2] * (size[axis - 2] - 1) - 1
                out = -(-span // strides[axis - 2]) + 1
                if (out - 1) * strides[axis - 2] >= x.shape[axis] + padding[lo]:
                    out -= 1  # the last window must start inside the input or its leading padding
                padding[hi] += max(0, (out - 1) * strides[axis - 2] - span)
        if reduce == "max":
            out = _windows(x, size, strides, padding, dilation, -np.inf).max(axis=(4, 5))
        else:
            total = _windows(x, size, strides, padding, dilation, 0.0).sum(axis=(4, 5))
            if count_include_pad:
                count = size[0] * size[1]
            else:
                ones = np.ones((1, 1) + x.shape[2:])
                count = _windows(ones, size, strides, padding, dilation, 0.0).sum(axis=(4, 5))
            out = total / count
        return _from_layout(out, "NCHW", out_layout)

    return run


def _astype(xs, a):
    dtype = a[0]
    x = xs[0]
    if _is_float(dtype):
        if dtype == "bfloat16":
            raise NotCovered("bfloat16")
        return x.astype(dtype).astype(FLOAT)  # rounds through the target dtype
    if dtype == "bool":
        return x.astype(bool)
    return x.astype(dtype).astype(np.int64)


def _strided_slice(xs, a):
    axes, begin, end, strides, _ = a
    if min(strides, default=1) <= 0:
        raise NotCovered("strided_slice with a non-positive stride")
    index = [slice(None)] * xs[0].ndim
    for ax, b, e, s in zip(axes, begin, end, strides):
        index[ax] = slice(b, e, s)
    return xs[0][tuple(index)]


def _take(xs, a):
    axis, mode = a
    return np.take(xs[0], xs[1], axis=axis, mode={"clip": "clip", "wrap": "wrap"}.get(mode, "raise"))


def _batch_norm(xs, a):
    x, gamma, beta, mean, var = xs
    axis, eps, center, scale, _, training = a
    if training:
        raise NotCovered("batch_norm in training mode")
    shape = [1] * x.ndim
    shape[axis] = -1
    out = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if scale:
        out = out * gamma.reshape(shape)
    if center:
        out = out + beta.reshape(shape)
    return out, mean, var


def _layer_norm(xs, a):
    x, gamma, beta = xs
    axes, eps, center, scale = a
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + eps)
    shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    if scale:
        out = out * gamma.reshape(shape)
    if center:
        out = out + beta.reshape(shape)
    return out


def _softmax(xs, a):
    x = xs[0]
    e = np.exp(x - x.max(axis=a[0], keepdims=True))
    return e / e.sum(axis=a[0], keepdims=True)


def _float_only(fn: Callable) -> Callable:
    def run(xs, a):
        if any(not np.issubdtype(np.asarray(x).dtype, np.floating) for x in xs):
            raise NotCovered("integer operands")
        return fn(xs, a)

    return run


def _erf(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return erf(x)


def _to_blocked(xs, a):
    """(N, C, H, W) -> (N, C/b, H, W, b), as ops' ToBlocked."""
    (b,) = a
    n, c, h, w = xs[0].shape
    return xs[0].reshape(n, c // b, b, h, w).transpose(0, 1, 3, 4, 2)


def _from_blocked(x: np.ndarray) -> np.ndarray:
    """(N, C/b, H, W, b) -> (N, C, H, W), as ops' FromBlocked."""
    n, blocks, h, w, b = x.shape
    return x.transpose(0, 1, 4, 2, 3).reshape(n, blocks * b, h, w)


def _block_weight(xs, a):
    (b,) = a
    o, i, kh, kw = xs[0].shape
    return xs[0].reshape(o // b, b, i // b, b, kh, kw).transpose(0, 2, 4, 5, 3, 1)


def _depthwise_conv2d_nchwc(xs, a):
    """The blocked depthwise conv as the NCHW one (groups = channels) of the unblocked data
    and the (C, 1, kh, kw) weight, blocked again."""
    strides, padding, dilation, out_dtype = a
    x, w = xs
    _, blocks, kh, kw, b = w.shape
    w_oihw = w.transpose(1, 4, 0, 2, 3).reshape(blocks * b, 1, kh, kw)
    attrs = (strides, padding, dilation, blocks * b, "NCHW", "OIHW", "NCHW", out_dtype)
    return _to_blocked([_conv2d([_from_blocked(x), w_oihw], attrs)], (b,))


def _conv2d_nchwc(xs, a):
    """TOPI's conv2d_NCHWc as the NCHW conv of the unblocked data and weight, blocked again."""
    strides, padding, dilation, out_dtype = a
    x, w = xs
    ob, ib, kh, kw, bi, bo = w.shape
    w_oihw = w.transpose(0, 5, 1, 4, 2, 3).reshape(ob * bo, ib * bi, kh, kw)
    out = _conv2d([_from_blocked(x), w_oihw], (strides, padding, dilation, 1, "NCHW", "OIHW", "NCHW", out_dtype))
    return _to_blocked([out], (bo,))


def _kernel_of_tvm(xs, a):
    raise NotCovered("an approximation: its value is what TVM's kernel computes")


SEMANTICS: dict[str, Callable[[list, tuple], Any]] = {
    "Matmul": lambda xs, a: np.matmul(xs[0], xs[1]),
    "Conv2d": _conv2d,
    "Add": lambda xs, a: xs[0] + xs[1],
    "Sub": lambda xs, a: xs[0] - xs[1],
    "Mul": lambda xs, a: xs[0] * xs[1],
    "Div": _float_only(lambda xs, a: xs[0] / xs[1]),
    "Relu": lambda xs, a: np.maximum(xs[0], 0),
    "Gelu": _float_only(lambda xs, a: 0.5 * xs[0] * (1.0 + _erf(xs[0] / math.sqrt(2.0)))),
    "Silu": _float_only(lambda xs, a: xs[0] / (1.0 + np.exp(-xs[0]))),
    "Tanh": _float_only(lambda xs, a: np.tanh(xs[0])),
    "Sigmoid": _float_only(lambda xs, a: 1.0 / (1.0 + np.exp(-xs[0]))),
    "Exp": _float_only(lambda xs, a: np.exp(xs[0])),
    "Sqrt": _float_only(lambda xs, a: np.sqrt(xs[0])),
    "Rsqrt": _float_only(lambda xs, a: 1.0 / np.sqrt(xs[0])),
    "Neg": lambda xs, a: -xs[0],
    "Erf": _float_only(lambda xs, a: _erf(xs[0])),
    "Clip": lambda xs, a: np.clip(xs[0], a[0], a[1]),
    "Astype": _astype,
    "Permute": lambda xs, a: np.transpose(xs[0], a[0]),
    "Reshape": lambda xs, a: np.reshape(xs[0], a[0]),
    "BroadcastTo": lambda xs, a: np.broadcast_to(xs[0], a[0]),
    "ExpandDims": lambda xs, a: np.expand_dims(xs[0], a[0]),
    "Squeeze": lambda xs, a: np.squeeze(xs[0], a[0]),
    "Concat": lambda xs, a: np.concatenate(xs, axis=a[0]),
    "Split": lambda xs, a: tuple(np.split(xs[0], list(a[0]), axis=a[1])),
    "StridedSlice": _strided_slice,
    "Take": _take,
    "BatchNorm": _batch_norm,
    "Pad": lambda xs, a: np.pad(xs[0], [(a[0][2 * i], a[0][2 * i + 1]) for i in range(xs[0].ndim)]),
    "Full": lambda xs, a: np.full(a[0], a[1], dtype=FLOAT),
    "Table": lambda xs, a: table(a[0], tuple(a[1]), FLOAT),
    "LayerNorm": _float_only(_layer_norm),
    "Softmax": _float_only(_softmax),
    "MaxPool2d": _pool("max"),
    "AvgPool2d": _float_only(_pool("avg")),
    "Mean": _float_only(lambda xs, a: np.mean(xs[0], axis=a[0], keepdims=a[1])),
    # TOPI's approximation (fast_math.egg) runs as TVM builds it, so that translation
    # validation measures its error against the exact softmax
    "FastSoftmax": _kernel_of_tvm,
    # the channel-blocked layout (nchwc.egg)
    "ToBlocked": _to_blocked,
    "FromBlocked": lambda xs, a: _from_blocked(xs[0]),
    "BlockWeight": _block_weight,
    "Conv2dNCHWc": _conv2d_nchwc,
    "DepthwiseConv2dNCHWc": _depthwise_conv2d_nchwc,
}


# ---------------------------------------------------------------- TVM for the rest


def _to_dtype(value, ty: Ty):
    if isinstance(ty, tuple):
        return tuple(_to_dtype(v, t) for v, t in zip(value, ty))
    return np.asarray(value).astype(ty.dtype)


def _relax_type(ty: Ty):
    from tvm import relax

    if isinstance(ty, tuple):
        return relax.TupleType([_relax_type(t) for t in ty])
    return relax.TensorType(ty.shape, ty.dtype)


def _compiled(call, params) -> Any:
    """``main(params) = call``, built for the host CPU with the TE kernels it calls."""
    import tvm
    from tvm import relax

    bb = relax.BlockBuilder()
    with bb.function("main", params):
        out = bb.emit(call)
        bb.emit_func_output(out)
    ex = tvm.compile(te_ops.attach(bb.get()), target=tvm.target.Target("llvm"))
    return relax.VirtualMachine(ex, tvm.cpu())["main"]


@functools.lru_cache(maxsize=256)
def _native_kernel(op: str, attrs: tuple, in_tys: tuple) -> Any:
    """A native op built alone, once per op, attributes and input types (a model's twelve
    softmaxes of one shape are one build)."""
    from tvm import relax

    params = [relax.Var(f"x{k}", _relax_type(t)) for k, t in enumerate(in_tys)]
    return _compiled(ops.build_call(ops.BY_NAME[op], params, attrs), params)


def run_with_tvm(graph: TensorGraph, nid: int, inputs: list) -> Any:
    """One node of ``graph`` built alone with stock TVM and run on ``inputs`` (exact values,
    rounded to the node's input dtypes)."""
    import tvm
    from tvm import relax

    from .graph import rebuild_opaque
    from .verify import _flatten

    node = graph.nodes[nid]
    in_tys = [graph.nodes[i].ty for i in node.inputs]
    if node.op == OPAQUE:
        params = [relax.Var(f"x{k}", _relax_type(t)) for k, t in enumerate(in_tys)]
        main = _compiled(rebuild_opaque(graph.opaques[node.attrs[0]], params), params)
    else:
        key = (node.op, node.attrs, tuple(in_tys))
        try:
            hash(key)
        except TypeError:  # an attribute we cannot key on: built for this call only
            main = _native_kernel.__wrapped__(*key)
        else:
            main = _native_kernel(*key)

    def arg(value, ty):
        if isinstance(ty, tuple):
            return [arg(v, t) for v, t in zip(value, ty)]
        return tvm.runtime.tensor(_to_dtype(value, ty))

    result = main(*[arg(v, t) for v, t in zip(inputs, in_tys)])
    flat = [as_exact(x) for x in _flatten(result)]
    if isinstance(node.ty, tuple):
        return tuple(flat)
    return flat[0]


# ---------------------------------------------------------------- evaluation


class Interpreter:
    """Evaluates graphs that share leaf tables (a block and its rewrites) on one set of
    random inputs, sharing the values of structurally equal nodes.

    An opaque call (an op the pass does not model, never rewritten) is evaluated as a
    random function of its inputs: inputs equal to those of an earlier evaluation of the
    same call (to 1e-5) give that evaluation's output, other inputs a fresh random value.
    A sound rewrite hands every opaque call the values the original hands it, so the
    check sees everything around opaque calls without running them."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.inputs: dict[int, Any] = {}  # Input index -> value
        self.ids: dict[tuple, int] = {}  # (op, attrs, child ids) -> structural id
        self.values: dict[int, Any] = {}  # structural id -> value
        self.opaque_calls: dict[int, list[tuple[list, Any]]] = {}  # opaque index -> (inputs, output)
        self.tvm_nodes = 0  # nodes run through TVM (cost accounting)

    def keys(self, graph: TensorGraph) -> dict[int, int]:
        """Structural id of every reachable node of ``graph``."""
        return structural_ids(graph, self.ids)

    def outputs(self, graph: TensorGraph) -> list[Any]:
        """The values of ``graph``'s outputs, in order."""
        return self.outputs_of([graph])[0]

    def outputs_of(
        self,
        graphs: list[TensorGraph],
        pairs: Sequence[tuple[int, int]] = (),
        on_pair: Callable[[int, Any, Any], None] | None = None,
    ) -> list[list[Any]]:
        """The outputs of each graph, evaluating every structurally distinct node once and
        dropping each intermediate value as soon as its last consumer has run.

        ``pairs`` name nodes of ``graphs[0]`` and ``graphs[1]`` that must compute the same
        value: ``on_pair(i, first, second)`` sees the two values of the ``i``-th pair (not
        called for structurally equal pairs, nor for a node no output reaches), and each is
        held only until it has: the first graph's nodes run just before their partners
        (``_schedule``), so the two graphs' values at each pair are held together, not the
        first graph's at every pair until the second graph runs."""
        sids = [self.keys(g) for g in graphs]
        order: list[tuple[int, TensorGraph, int, list[int]]] = []  # children first
        seen: set[int] = set(self.values)
        uses: dict[int, int] = {}
        for gi, nid in _schedule(graphs, pairs):
            g, sid = graphs[gi], sids[gi]
            s = sid[nid]
            if s not in seen:
                seen.add(s)
                kids = [sid[i] for i in g.nodes[nid].inputs]
                order.append((s, g, nid, kids))
                for k in kids:
                    uses[k] = uses.get(k, 0) + 1
        keep = {sid[r] for g, sid in zip(graphs, sids) for _, r in g.outputs}
        pending: dict[int, list[int]] = {}  # structural id -> the unchecked pairs it is in
        sid_pairs = [(sids[0].get(a), sids[1].get(b)) for a, b in pairs]
        for i, (a, b) in enumerate(sid_pairs):
            if a != b and a is not None and b is not None:  # (a node no output reaches is not computed)
                pending.setdefault(a, []).append(i)
                pending.setdefault(b, []).append(i)

        def release(s: int) -> None:
            if not uses.get(s) and s not in keep and not pending.get(s):
                self.values.pop(s, None)

        def check(s: int) -> None:
            for i in pending.pop(s, []):
                a, b = sid_pairs[i]
                other = b if s == a else a
                if other in self.values:
                    on_pair(i, self.values[a], self.values[b])
                    pending[other].remove(i)
                    release(other)
                else:
                    pending.setdefault(s, []).append(i)  # wait for its partner

        with np.errstate(all="ignore"):  # random inputs reach sqrt of negatives, exp overflows: both graphs alike
            for s in [s for s in pending if s in self.values]:  # values held from an earlier call
                check(s)
            for s, g, nid, kids in order:
                self.values[s] = self._eval(g, nid, [self.values[k] for k in kids])
                if s in pending:
                    check(s)
                for k in kids:
                    uses[k] -= 1
                    release(k)
                release(s)  # a value nothing reads, held for a pair already checked
        return [[self.values[sid[r]] for _, r in g.outputs] for g, sid in zip(graphs, sids)]

    def _eval(self, graph: TensorGraph, nid: int, xs: list) -> Any:
        n = graph.nodes[nid]
        if n.op == INPUT:
            return self.inputs.setdefault(n.attrs[0], random_value(n.ty, self.rng))
        if n.op == CONST:
            return as_exact(graph.constants[n.attrs[0]].value.numpy())
        if n.op == TUPLE_NODE:
            return tuple(xs)
        if n.op == TGET:
            return xs[0][n.attrs[0]]
        if n.op == OPAQUE:
            return self._opaque(n, xs)
        try:
            return _held(SEMANTICS[n.op](xs, n.attrs))
        except NotCovered:
            self.tvm_nodes += 1
            return run_with_tvm(graph, nid, xs)

    def _opaque(self, n, xs: list) -> Any:
        calls = self.opaque_calls.setdefault(n.attrs[0], [])
        for inputs, out in calls:
            if all(_close(a, b) for a, b in zip(inputs, xs)):
                return out
        out = random_value(n.ty, self.rng)
        calls.append((xs, out))
        return out


def _schedule(graphs: list[TensorGraph], pairs: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """(graph index, node) for every reachable node of each graph, children first.  Without
    ``pairs``, graph by graph; with them, the second graph drives, and each node of the first
    that is paired with one of the second's runs (with what it reads and has not run yet)
    just before it."""
    if not pairs or len(graphs) < 2:
        return [(gi, nid) for gi, g in enumerate(graphs) for nid in g.reachable()]
    first, second = graphs[0], graphs[1]
    partner: dict[int, list[int]] = {}
    for a, b in pairs:
        partner.setdefault(b, []).append(a)
    first_order = first.reachable()
    reached = set(first_order)
    walked: dict[int, int] = {}  # the first graph's walk, continued at each pair
    seq: list[tuple[int, int]] = []
    for nid in second.reachable():
        for a in partner.get(nid, ()):
            if a in reached:
                seq += [(0, m) for m in topological_order([a], lambda m: first.nodes[m].inputs, walked)]
        seq.append((1, nid))
    seq += [(0, nid) for nid in first_order if nid not in walked]
    return seq + [(gi, nid) for gi, g in enumerate(graphs[2:], 2) for nid in g.reachable()]


def _held(value):
    """Floats as the interpreter holds them (numpy keeps a narrower float in places)."""
    if isinstance(value, tuple):
        return tuple(_held(v) for v in value)
    value = np.asarray(value)
    return value.astype(FLOAT) if np.issubdtype(value.dtype, np.floating) and value.dtype != FLOAT else value


OPAQUE_RTOL = 1e-5  # float inputs of an opaque call that agree to this, relative to their scale, are equal


def _close(a, b) -> bool:
    """Whether an opaque call's inputs ``b`` are those of an earlier call ``a``: integers and
    booleans exactly, floats to OPAQUE_RTOL of the tensor's largest finite magnitude (as
    ``relative_difference`` measures outputs).  Element-wise relative closeness is too strict:
    a sound rewrite that rounds differently (a merged matmul, a reassociated add) moves the
    elements that cancel to near zero by far more than 1e-5 of themselves."""
    fa, fb = flatten(a), flatten(b)
    return len(fa) == len(fb) and all(
        x.shape == y.shape
        and (np.array_equal(x, y, equal_nan=True) if x.dtype != FLOAT else relative_difference(x, y) <= OPAQUE_RTOL)
        for x, y in zip(fa, fb)
    )


def flatten(value) -> list[np.ndarray]:
    if isinstance(value, tuple):
        return [a for v in value for a in flatten(v)]
    return [np.asarray(value)]


def relative_difference(ref: Any, got: Any, atol: float = 0.0) -> float:
    """Largest |ref - got| of each output over the output's largest finite magnitude;
    positions where the reference is not finite must match it exactly.  An output that is
    within ``atol`` of the reference everywhere counts as equal (an approximation's absolute
    error, on an output too small to judge it relative to its own magnitude)."""
    worst = 0.0
    for a, b in zip(flatten(ref), flatten(got)):
        if a.shape != b.shape:
            return math.inf
        if not a.size:
            continue
        a, b = a.astype(np.float64), b.astype(np.float64)
        finite = np.isfinite(a)
        if not np.array_equal(a[~finite], b[~finite], equal_nan=True):
            return math.inf
        if not finite.any():
            continue
        scale = float(np.max(np.abs(a[finite])))
        diff = float(np.max(np.abs(a[finite] - b[finite])))
        if diff <= atol:
            continue
        worst = max(worst, diff / scale if scale > 0 else diff)
    return worst


__all__ = ["Interpreter", "NotCovered", "SEMANTICS", "relative_difference", "run_with_tvm", "TensorTy"]
