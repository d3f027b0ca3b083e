"""The native operator table: which Relax ops the e-graph understands, and how.

Each :class:`OpSpec` says how to read a Relax call into canonical Python attribute
values (negative axes normalised, defaults made explicit, so equal computations
hash-cons to one e-node), how the attributes are typed in egglog, and how to build
the Relax call back.  Any call not in this table becomes an opaque node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tvm
from tvm import relax

from . import te_ops
from .tables import table

# egglog sorts used for attributes
I64, F64, STR, BOOL, IVEC = "i64", "f64", "String", "bool", "IVec"

# kinds drive the cost model: how TVM will build the op
KERNEL = "kernel"  # a real kernel of its own (matmul, conv, pooling, norms, reductions)
ELEMWISE = "elemwise"  # fused into its producer by FuseOps
VIEW = "view"  # reshape-like; becomes a view or a trivial copy
TUPLE = "tuple"  # tuple plumbing, no code
# a kernel of its own that the learned model was not trained on (pad, full, split): the
# roofline costs it; pad and full mostly apply to constants, which fold to nothing; a
# split is a view in Relax, but FuseOps never fuses it into its producer: it starts a
# kernel (with its element-wise consumers, if any) that reads the input and writes the parts;
# permute_dims is no view either: a transpose is a copy kernel (FuseOps fuses the
# element-wise ops after it, but never fuses it into a conv or matmul before or after)
INJECTIVE = "injective"
# ops TVM computes with a C library call per element (erff, expf, tanhf; a softmax's
# exponentials, a sigmoid's exp), which MetaSchedule does not vectorize: priced at
# ``cost.Machine.libm_ns`` per element; erf_rational.egg rewrites GELU and erf, fast_math.egg
# softmax
ERF_OPS = ("Gelu", "Erf")  # erff: erf_rational.egg's
LIBM_OPS = (*ERF_OPS, "Exp", "Tanh", "Sigmoid", "Silu", "Softmax")


class NotNative(Exception):
    """The call uses a form of the op that the native encoding does not cover."""


@dataclass(frozen=True)
class OpSpec:
    name: str  # egglog constructor
    relax_op: str  # Relax operator name
    n_inputs: int | None  # tensor inputs; None means a variadic list (concat)
    attrs: tuple[tuple[str, str], ...]  # (field, egglog sort), in constructor order
    read: Callable[[Any], tuple[list[Any], tuple]]  # call -> (tensor args, attr values)
    build: Callable[[list[Any], tuple], Any]  # (tensor exprs, attr values) -> Relax expr
    kind: str


# ---------------------------------------------------------------- attr helpers


def to_int(value) -> int:
    """An IntImm / PrimValue / Python int as int; symbolic values are not native."""
    for _ in range(3):  # PrimValue -> IntImm -> int
        if isinstance(value, (bool, int)):
            return int(value)
        value = getattr(value, "value", None)
    raise NotNative("non-constant integer")


def to_ints(values) -> tuple[int, ...]:
    if values is None:
        raise NotNative("missing integer list")
    if isinstance(values, relax.ShapeExpr):
        values = values.values
    elif isinstance(values, relax.Tuple):
        values = values.fields
    return tuple(to_int(v) for v in values)


def to_float(value) -> float:
    """A FloatImm / PrimValue / Python number as float."""
    for _ in range(3):
        if isinstance(value, (bool, int, float)):
            return float(value)
        value = getattr(value, "value", None)
    raise NotNative("non-constant float")


def dtype_str(value) -> str:
    """A dtype attribute as a string; '' for 'same as input' (None / void)."""
    if value is None:
        return ""
    text = str(value)
    return "" if text in ("", "void") else text


def _shape(expr) -> tuple[int, ...]:
    ty = expr.ty
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise NotNative("input without a static shape")
    return to_ints(ty.shape)


def _rank(expr) -> int:
    ty = expr.ty
    if not isinstance(ty, relax.TensorType) or ty.ndim < 0:
        raise NotNative("input of unknown rank")
    return ty.ndim


def _axis(axis, rank: int) -> int:
    axis = to_int(axis)
    if not -rank <= axis < max(rank, 1):
        raise NotNative(f"axis {axis} out of range for rank {rank}")
    return axis % rank if rank else 0


def _axes(axes, rank: int) -> tuple[int, ...]:
    return tuple(_axis(a, rank) for a in axes)


def _op(path: str) -> Callable:
    obj = relax.op
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


# ---------------------------------------------------------------- readers


def _read_plain(n: int):
    def read(call):
        return list(call.args[:n]), ()

    return read


def _read_dtype_attr(call):
    return [call.args[0], call.args[1]], (dtype_str(call.attrs.out_dtype),)


def _read_conv2d(call):
    a = call.attrs
    padding = to_ints(a.padding)
    if len(padding) == 2:
        padding = padding * 2
    attrs = (
        to_ints(a.strides),
        padding,
        to_ints(a.dilation),
        to_int(a.groups),
        str(a.data_layout),
        str(a.kernel_layout),
        str(a.out_layout or a.data_layout),
        dtype_str(a.out_dtype),
    )
    return [call.args[0], call.args[1]], attrs


def _read_clip(call):
    return [call.args[0]], (to_float(call.args[1]), to_float(call.args[2]))


def _read_permute(call):
    rank = _rank(call.args[0])
    axes = call.attrs.axes
    axes = tuple(reversed(range(rank))) if axes is None else _axes(to_ints(axes), rank)
    return [call.args[0]], (axes,)


def _read_shape_arg(call):
    return [call.args[0]], (to_ints(call.args[1]),)


def _read_concat(call):
    tensors = call.args[0]
    if not isinstance(tensors, relax.Tuple) or call.attrs.axis is None:
        raise NotNative("concat of a tuple variable or with axis=None")
    return list(tensors.fields), (_axis(call.attrs.axis, _rank(tensors.fields[0])),)


def _read_split(call):
    x = call.args[0]
    shape = _shape(x)
    axis = _axis(call.attrs.axis, len(shape))
    ios = call.attrs.indices_or_sections
    if not hasattr(ios, "__len__"):  # a number of equal sections
        sections = to_int(ios)
        if sections <= 0 or shape[axis] % sections:
            raise NotNative("split into unequal sections")
        step = shape[axis] // sections
        indices = tuple(step * i for i in range(1, sections))
    else:
        indices = to_ints(ios)
    return [x], (indices, axis)


def _read_strided_slice(call):
    x = call.args[0]
    rank = _rank(x)
    axes = _axes(to_ints(call.args[1]), rank)
    begin = to_ints(call.args[2])
    end = to_ints(call.args[3])
    strides = to_ints(call.args[4]) if len(call.args) > 4 else (1,) * len(axes)
    return [x], (axes, begin, end, strides, bool(call.attrs.assume_inbound))


def _read_batch_norm(call):
    a = call.attrs
    rank = _rank(call.args[0])
    attrs = (
        _axis(a.axis, rank),
        to_float(a.epsilon),
        bool(a.center),
        bool(a.scale),
        to_float(a.momentum),
        bool(a.training),
    )
    return list(call.args[:5]), attrs


def _read_pad(call):
    """Zero padding in constant mode only; other values and modes stay opaque."""
    a = call.attrs
    if str(a.pad_mode) != "constant" or to_float(a.pad_value) != 0.0:
        raise NotNative("pad with a mode other than constant zero")
    width = to_ints(a.pad_width)
    if len(width) != 2 * _rank(call.args[0]) or min(width, default=0) < 0:
        raise NotNative("pad widths not one non-negative (before, after) pair per axis")
    return [call.args[0]], (width,)


def _read_full(call):
    """A tensor filled with a scalar float constant of the result's dtype."""
    fill = call.args[1]
    if not isinstance(fill, tvm.ir.GenericConst):
        raise NotNative("full with a non-constant fill value")
    value = fill.value.numpy()
    dtype = dtype_str(call.attrs.dtype) or str(value.dtype)
    if value.ndim != 0 or str(value.dtype) != dtype or not dtype.startswith("float"):
        raise NotNative("full with a fill value that is not a float scalar of the result dtype")
    return [], (to_ints(call.args[0]), float(value), dtype)


def _read_layer_norm(call):
    a = call.attrs
    rank = _rank(call.args[0])
    attrs = (_axes(to_ints(a.axes), rank), to_float(a.epsilon), bool(a.center), bool(a.scale))
    return list(call.args[:3]), attrs


def _read_axis_attr(call):
    return [call.args[0]], (_axis(call.attrs.axis, _rank(call.args[0])),)


def _read_pool2d(call):
    a = call.attrs
    padding = to_ints(a.padding)
    if len(padding) == 2:
        padding = padding * 2
    attrs = (
        to_ints(a.pool_size),
        to_ints(a.strides),
        padding,
        to_ints(a.dilation),
        bool(a.ceil_mode),
        bool(a.count_include_pad),
        str(a.layout),
        str(a.out_layout or a.layout),
    )
    return [call.args[0]], attrs


def _read_mean(call):
    rank = _rank(call.args[0])
    axis = call.attrs.axis
    axes = tuple(range(rank)) if axis is None else tuple(sorted(_axes(to_ints(axis), rank)))
    return [call.args[0]], (axes, bool(call.attrs.keepdims))


def _read_astype(call):
    return [call.args[0]], (str(call.attrs.dtype),)


def _read_expand_dims(call):
    out_rank = _rank(call.args[0]) + len(call.attrs.axis)
    return [call.args[0]], (tuple(sorted(_axes(to_ints(call.attrs.axis), out_rank))),)


def _read_squeeze(call):
    x = call.args[0]
    axis = call.attrs.axis
    if axis is None:
        axes = tuple(i for i, d in enumerate(_shape(x)) if d == 1)
    else:
        axes = tuple(sorted(_axes(to_ints(axis), _rank(x))))
    return [x], (axes,)


def _read_take(call):
    if call.attrs.axis is None:
        raise NotNative("take with axis=None")
    x = call.args[0]
    return [x, call.args[1]], (_axis(call.attrs.axis, _rank(x)), str(call.attrs.mode))


# ---------------------------------------------------------------- builders


def _build_plain(path: str):
    fn = _op(path)
    return lambda xs, attrs: fn(*xs)


def _build_conv2d(xs, a):
    strides, padding, dilation, groups, dl, kl, ol, out_dtype = a
    return relax.op.nn.conv2d(xs[0], xs[1], strides, padding, dilation, groups, dl, kl, ol, out_dtype or None)


def _build_pool(path: str):
    fn = _op(path)

    def build(xs, a):
        pool, strides, padding, dilation, ceil, cip, layout, out_layout = a
        return fn(xs[0], pool, strides, padding, dilation, ceil, cip, layout, out_layout)

    return build


def _build_strided_slice(xs, a):
    axes, begin, end, strides, inbound = a
    return relax.op.strided_slice(xs[0], axes, begin, end, strides, assume_inbound=inbound)


def _read_nothing(call):
    raise NotNative("no Relax call is read as this op")


def _read_te_kernel(te_name: str):
    """The reader of an op the pass emits as a TE kernel (te_ops.py): a ``call_tir`` of the
    kernel ``te_name`` made in this process reads back as the op, with the attrs it was made
    with."""

    def read(call):
        made = te_ops.made_call(call)
        if made is None or made[0] != te_name:
            raise NotNative(f"not a call of this process's {te_name} kernel")
        return made[1], made[2]

    return read


def _build_to_blocked(xs, a):
    """(N, C, H, W) -> (N, C/b, H, W, b): channel c in block c // b, at lane c % b.  A reshape
    and a transpose, which FuseOps fuses with the element-wise ops beside them (a
    ``layout_transform`` it leaves alone, a kernel of its own)."""
    (b,) = a
    n, c, h, w = _shape(xs[0])
    return relax.op.permute_dims(relax.op.reshape(xs[0], [n, c // b, b, h, w]), [0, 1, 3, 4, 2])


def _build_from_blocked(xs, a):
    """(N, C/b, H, W, b) -> (N, C, H, W), ``_build_to_blocked``'s inverse."""
    n, blocks, h, w, b = _shape(xs[0])
    return relax.op.reshape(relax.op.permute_dims(xs[0], [0, 1, 4, 2, 3]), [n, blocks * b, h, w])


def _build_block_weight(xs, a):
    """OIHW -> (O/b, I/b, kh, kw, b_i, b_o), the weight layout of TOPI's conv2d_NCHWc."""
    (b,) = a
    o, i, kh, kw = _shape(xs[0])
    return relax.op.permute_dims(relax.op.reshape(xs[0], [o // b, b, i // b, b, kh, kw]), [0, 2, 4, 5, 3, 1])


def _build_table(xs, a):
    name, shape, dtype = a
    return relax.const(table(name, tuple(shape), dtype))


# ---------------------------------------------------------------- the table


def _spec(name, relax_op, n_inputs, attrs, read, build, kind) -> OpSpec:
    return OpSpec(name, relax_op, n_inputs, tuple(attrs), read, build, kind)


def _unary(name: str, path: str) -> OpSpec:
    return _spec(name, "relax." + path, 1, (), _read_plain(1), _build_plain(path), ELEMWISE)


def _binary(name: str, path: str) -> OpSpec:
    return _spec(name, "relax." + path, 2, (), _read_plain(2), _build_plain(path), ELEMWISE)


def _pool(name: str, path: str) -> OpSpec:
    attrs = [
        ("pool_size", IVEC),
        ("strides", IVEC),
        ("padding", IVEC),
        ("dilation", IVEC),
        ("ceil_mode", BOOL),
        ("count_include_pad", BOOL),
        ("layout", STR),
        ("out_layout", STR),
    ]
    return _spec(name, "relax." + path, 1, attrs, _read_pool2d, _build_pool(path), KERNEL)


SPECS: tuple[OpSpec, ...] = (
    _spec(
        "Matmul",
        "relax.matmul",
        2,
        [("out_dtype", STR)],
        _read_dtype_attr,
        lambda xs, a: relax.op.matmul(xs[0], xs[1], a[0] or None),
        KERNEL,
    ),
    _spec(
        "Conv2d",
        "relax.nn.conv2d",
        2,
        [
            ("strides", IVEC),
            ("padding", IVEC),
            ("dilation", IVEC),
            ("groups", I64),
            ("data_layout", STR),
            ("kernel_layout", STR),
            ("out_layout", STR),
            ("out_dtype", STR),
        ],
        _read_conv2d,
        _build_conv2d,
        KERNEL,
    ),
    _binary("Add", "add"),
    _binary("Sub", "subtract"),
    _binary("Mul", "multiply"),
    _binary("Div", "divide"),
    _unary("Relu", "nn.relu"),
    _unary("Gelu", "nn.gelu"),
    _unary("Silu", "nn.silu"),
    _unary("Tanh", "tanh"),
    _unary("Sigmoid", "sigmoid"),
    _unary("Exp", "exp"),
    _unary("Sqrt", "sqrt"),
    _unary("Rsqrt", "rsqrt"),
    _unary("Neg", "negative"),
    _unary("Erf", "erf"),
    _spec(
        "Clip",
        "relax.clip",
        1,
        [("min", F64), ("max", F64)],
        _read_clip,
        lambda xs, a: relax.op.clip(xs[0], a[0], a[1]),
        ELEMWISE,
    ),
    _spec(
        "Astype",
        "relax.astype",
        1,
        [("dtype", STR)],
        _read_astype,
        lambda xs, a: relax.op.astype(xs[0], a[0]),
        ELEMWISE,
    ),
    _spec(
        "Permute",
        "relax.permute_dims",
        1,
        [("axes", IVEC)],
        _read_permute,
        lambda xs, a: relax.op.permute_dims(xs[0], list(a[0])),
        INJECTIVE,  # a transpose copies (a kernel of its own unless it folds into a constant)
    ),
    _spec(
        "Reshape",
        "relax.reshape",
        1,
        [("shape", IVEC)],
        _read_shape_arg,
        lambda xs, a: relax.op.reshape(xs[0], a[0]),
        VIEW,
    ),
    _spec(
        "BroadcastTo",
        "relax.broadcast_to",
        1,
        [("shape", IVEC)],
        _read_shape_arg,
        lambda xs, a: relax.op.broadcast_to(xs[0], a[0]),
        ELEMWISE,
    ),
    _spec(
        "ExpandDims",
        "relax.expand_dims",
        1,
        [("axes", IVEC)],
        _read_expand_dims,
        lambda xs, a: relax.op.expand_dims(xs[0], list(a[0])),
        VIEW,
    ),
    _spec(
        "Squeeze",
        "relax.squeeze",
        1,
        [("axes", IVEC)],
        _read_squeeze,
        lambda xs, a: relax.op.squeeze(xs[0], list(a[0])),
        VIEW,
    ),
    _spec(
        "Concat",
        "relax.concat",
        None,
        [("axis", I64)],
        _read_concat,
        lambda xs, a: relax.op.concat(list(xs), a[0]),
        KERNEL,
    ),
    _spec(
        "Split",
        "relax.split",
        1,
        [("indices", IVEC), ("axis", I64)],
        _read_split,
        lambda xs, a: relax.op.split(xs[0], list(a[0]), a[1]),
        INJECTIVE,
    ),
    _spec(
        "StridedSlice",
        "relax.strided_slice",
        1,
        [("axes", IVEC), ("begin", IVEC), ("end", IVEC), ("strides", IVEC), ("assume_inbound", BOOL)],
        _read_strided_slice,
        _build_strided_slice,
        KERNEL,
    ),
    _spec(
        "Take",
        "relax.take",
        2,
        [("axis", I64), ("mode", STR)],
        _read_take,
        lambda xs, a: relax.op.take(xs[0], xs[1], a[0], a[1]),
        KERNEL,
    ),
    _spec(
        "BatchNorm",
        "relax.nn.batch_norm",
        5,
        [
            ("axis", I64),
            ("epsilon", F64),
            ("center", BOOL),
            ("scale", BOOL),
            ("momentum", F64),
            ("training", BOOL),
        ],
        _read_batch_norm,
        lambda xs, a: relax.op.nn.batch_norm(*xs, *a),
        KERNEL,
    ),
    _spec(
        "Pad",
        "relax.nn.pad",
        1,
        [("pad_width", IVEC)],
        _read_pad,
        lambda xs, a: relax.op.nn.pad(xs[0], list(a[0])),
        INJECTIVE,
    ),
    _spec(
        "Full",
        "relax.full",
        0,
        [("shape", IVEC), ("value", F64), ("dtype", STR)],
        _read_full,
        lambda xs, a: relax.op.full(a[0], relax.const(a[1], a[2]), a[2]),
        INJECTIVE,
    ),
    _spec(
        "LayerNorm",
        "relax.nn.layer_norm",
        3,
        [("axes", IVEC), ("epsilon", F64), ("center", BOOL), ("scale", BOOL)],
        _read_layer_norm,
        lambda xs, a: relax.op.nn.layer_norm(xs[0], xs[1], xs[2], list(a[0]), a[1], a[2], a[3]),
        KERNEL,
    ),
    _spec(
        "Softmax",
        "relax.nn.softmax",
        1,
        [("axis", I64)],
        _read_axis_attr,
        lambda xs, a: relax.op.nn.softmax(xs[0], a[0]),
        KERNEL,
    ),
    _pool("MaxPool2d", "nn.max_pool2d"),
    _pool("AvgPool2d", "nn.avg_pool2d"),
    _spec(
        "Mean",
        "relax.mean",
        1,
        [("axes", IVEC), ("keepdims", BOOL)],
        _read_mean,
        lambda xs, a: relax.op.mean(xs[0], list(a[0]), a[1]),
        KERNEL,
    ),
    # TOPI's softmax with a polynomial exp, as TVM's FastMathTransform makes it (te_ops.py);
    # fast_math.egg introduces it, no Relax op reads back as one
    _spec(
        "FastSoftmax",
        "",
        1,
        [("axis", I64)],
        _read_te_kernel("fast_softmax"),
        lambda xs, a: te_ops.call("fast_softmax", xs[0], a[0]),
        KERNEL,
    ),
    # the channel-blocked layout of nchwc.egg (NeoCPU's NCHW[b]c): a tensor into and out of
    # it, a conv weight into it, and TOPI's conv2d_NCHWc (te_ops.py; TVM's legalization has no
    # rule for a blocked conv2d); no Relax op reads back as one
    _spec("ToBlocked", "", 1, [("block", I64)], _read_nothing, _build_to_blocked, INJECTIVE),
    _spec("FromBlocked", "", 1, (), _read_nothing, _build_from_blocked, INJECTIVE),
    _spec("BlockWeight", "", 1, [("block", I64)], _read_nothing, _build_block_weight, INJECTIVE),
    _spec(
        "Conv2dNCHWc",
        "",
        2,
        [("strides", IVEC), ("padding", IVEC), ("dilation", IVEC), ("out_dtype", STR)],
        _read_te_kernel("conv2d_nchwc"),
        lambda xs, a: te_ops.call_n("conv2d_nchwc", xs, *a),
        KERNEL,
    ),
    # a depthwise conv on blocked data, (1, C/b, kh, kw, b) weights (te_ops.py: TOPI has no
    # compute for it); groups = channels, one filter each
    _spec(
        "DepthwiseConv2dNCHWc",
        "",
        2,
        [("strides", IVEC), ("padding", IVEC), ("dilation", IVEC), ("out_dtype", STR)],
        _read_te_kernel("depthwise_conv2d_nchwc"),
        lambda xs, a: te_ops.call_n("depthwise_conv2d_nchwc", xs, *a),
        KERNEL,
    ),
    # a constant matrix a rule introduces (tables.py); no Relax op reads back as one
    _spec("Table", "", 0, [("name", STR), ("shape", IVEC), ("dtype", STR)], _read_nothing, _build_table, INJECTIVE),
)

BY_NAME: dict[str, OpSpec] = {s.name: s for s in SPECS}
BY_RELAX_OP: dict[str, OpSpec] = {s.relax_op: s for s in SPECS if s.relax_op}
# the ops emitted as TE kernels (te_ops.py), by the kernel's TE name: read back from their call_tir
BY_TE_KERNEL: dict[str, OpSpec] = {
    "fast_softmax": BY_NAME["FastSoftmax"],
    "conv2d_nchwc": BY_NAME["Conv2dNCHWc"],
    "depthwise_conv2d_nchwc": BY_NAME["DepthwiseConv2dNCHWc"],
}

# Structural node kinds of the tensor language (not Relax operators).
INPUT, CONST, OPAQUE, TUPLE_NODE, TGET = "Input", "Const", "Opaque", "Tuple", "TGet"
STRUCTURAL = (INPUT, CONST, OPAQUE, TUPLE_NODE, TGET)


def native_spec(call) -> OpSpec | None:
    """The spec for a call to a Relax operator we model natively (or to a TE kernel the pass
    made in this process), else None."""
    op = call.op
    if not isinstance(op, tvm.ir.Op):
        return None
    if op.name == "relax.call_tir":
        made = te_ops.made_call(call)
        return BY_TE_KERNEL.get(made[0]) if made is not None else None
    return BY_RELAX_OP.get(op.name)


def native_op_names() -> list[str]:
    return sorted(s.relax_op for s in SPECS if s.relax_op)


def read_call(spec: OpSpec, call) -> tuple[list[Any], tuple]:
    """Tensor args and canonical attrs of a call; NotNative if this form is not modelled."""
    try:
        args, attrs = spec.read(call)
    except NotNative:
        raise
    except Exception as err:  # an attribute form we did not foresee: treat as opaque
        raise NotNative(f"{spec.relax_op}: {err}") from err
    if spec.n_inputs is not None and len(args) != spec.n_inputs:
        raise NotNative(f"{spec.relax_op} with {len(args)} tensor args")
    return args, attrs


def build_call(spec: OpSpec, inputs: Sequence[Any], attrs: tuple):
    return spec.build(list(inputs), attrs)
