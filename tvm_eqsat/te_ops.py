"""Ops the pass emits as TE kernels: TOPI's fast softmax and its conv2d on channel-blocked
data (``conv2d_NCHWc``), and a depthwise conv2d on such data.

TVM computes the exponentials inside ``nn.softmax`` with a C library call per element,
which MetaSchedule does not vectorize.  ``FastMathTransform`` replaces every softmax (and
exp, erf and tanh) of a module by TOPI's polynomial forms (``topi.nn.fast_softmax``).  The
rule of ``fast_math.egg`` offers the same kernel as an alternative in the e-graph, so
extraction chooses it where it is cheaper, and the rebuilt block calls it with ``call_tir``.

TVM's Relax legalization has no rule for a conv2d whose layout blocks the channels
(``NCHW16c``, NeoCPU's layout), so ``nchwc.egg``'s convs are TOPI's ``conv2d_NCHWc`` the
same way, and its depthwise convs a TE compute of ours (TOPI has none for that layout).

Each kernel is made once per process for each input type and attribute values, as
``BlockBuilder.emit_te`` makes it (the PrimFunc is the one ``FastMathTransform`` makes, so
a tuning database holds one record for both), under a name of its own
(``eqsat_<op>_<digest>``).  ``attach`` adds the kernels a module calls to it, and
``made_call`` reads a call to one back (its kernel, inputs and attributes), so a module the
pass returned is read as the ops it was built from (``ops.native_spec``): the harvest of a
tuning database finds these kernels and the learned model is trained on them like any other.
Only the calls of this process's kernels are known (by their GlobalVar); another's stay
opaque calls.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import tvm
from tvm import relax

PREFIX = "eqsat_"
_MADE: dict[tuple, tuple[tvm.ir.GlobalVar, relax.TensorType]] = {}  # (name, type, attrs) -> its call's parts
_BY_NAME: dict[str, tvm.tirx.PrimFunc] = {}
_MADE_AS: dict[str, tuple[str, tuple, tvm.ir.GlobalVar]] = {}  # a kernel's name -> (TE name, attrs, its GlobalVar)


def _conv2d_nchwc(data, kernel, strides, padding, dilation, out_dtype):
    """TOPI's conv2d on (N, C/b, H, W, b) data and (O/b, C/b, kh, kw, b, b) weights; its
    compute asks for a current target, which it does not otherwise read."""
    from tvm import topi

    block = int(data.shape[-1])
    layout = f"NCHW{block}c"
    with tvm.target.Target("llvm"):
        return topi.nn.conv2d_NCHWc(
            data, kernel, list(strides), list(padding), list(dilation), layout, layout, out_dtype or data.dtype
        )


def _depthwise_conv2d_nchwc(data, kernel, strides, padding, dilation, out_dtype):
    """A depthwise conv (one filter per channel) on (N, C/b, H, W, b) data and (1, C/b, kh, kw,
    b) weights (the OIHW weight as a (1, C, kh, kw) tensor, blocked like the data), padding
    (top, left, bottom, right) as Relax's.  Written here: TOPI declares
    ``depthwise_conv2d_NCHWc`` but registers no compute for it in the wheels we pin."""
    from tvm import te, topi

    n, blocks, h, w, b = (int(d) for d in data.shape)
    kh, kw = (int(d) for d in kernel.shape[2:4])
    (sh, sw), (dh, dw) = strides, dilation
    top, left, bottom, right = padding
    padded = topi.nn.pad(data, [0, 0, top, left, 0], [0, 0, bottom, right, 0]) if any(padding) else data
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (w + left + right - dw * (kw - 1) - 1) // sw + 1
    dtype = out_dtype or data.dtype
    ry, rx = te.reduce_axis((0, kh), "ry"), te.reduce_axis((0, kw), "rx")
    return te.compute(
        (n, blocks, oh, ow, b),
        lambda i, c, y, x, lane: te.sum(
            padded[i, c, y * sh + ry * dh, x * sw + rx * dw, lane].astype(dtype)
            * kernel[0, c, ry, rx, lane].astype(dtype),
            axis=[ry, rx],
        ),
        name="depthwise_conv2d_nchwc",
    )


def _topi(name: str) -> Callable:
    from tvm import topi

    return {
        "fast_softmax": topi.nn.fast_softmax,
        "conv2d_nchwc": _conv2d_nchwc,
        "depthwise_conv2d_nchwc": _depthwise_conv2d_nchwc,
    }[name]


def _tensor_type(expr) -> relax.TensorType:
    ty = expr.ty
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        raise TypeError(f"a TE kernel needs an input of static shape, got {ty}")
    return ty


def call(name: str, x, *attrs) -> relax.Call:
    """``call_tir`` of TOPI's ``name`` (fast_softmax) on ``x``, with ``attrs`` (its axis)."""
    return call_n(name, [x], *attrs)


def call_n(name: str, inputs, *attrs) -> relax.Call:
    """``call_tir`` of ``name`` (fast_softmax, conv2d_nchwc, depthwise_conv2d_nchwc) on the
    tensors ``inputs``, with ``attrs``."""
    types = [_tensor_type(x) for x in inputs]
    signature = tuple((tuple(int(d) for d in ty.shape.values), str(ty.dtype)) for ty in types)
    key = (name, *signature[0], attrs) if len(inputs) == 1 else (name, signature, attrs)
    if key not in _MADE:
        digest = hashlib.sha1(repr(key).encode()).hexdigest()[:10]
        bb = relax.BlockBuilder()
        names = ["x"] if len(signature) == 1 else [f"x{i}" for i in range(len(signature))]
        params = [relax.Var(n, relax.TensorType(shape, dtype)) for n, (shape, dtype) in zip(names, signature)]
        with bb.function("main", params):
            out = bb.emit_te(_topi(name), *params, *attrs, primfunc_name_hint=f"{PREFIX}{name}_{digest}")
            bb.emit_func_output(out)
        made = bb.get()
        made_call = made["main"].body.blocks[0].bindings[0].value
        gv = made_call.args[0]
        _MADE[key] = (gv, made_call.ty_args[0])
        _BY_NAME[gv.name_hint] = made[gv]
        _MADE_AS[gv.name_hint] = (name, attrs, gv)
    gv, out_ty = _MADE[key]
    return relax.call_tir(gv, relax.Tuple(list(inputs)), out_ty)


def made_call(call) -> tuple[str, list, tuple] | None:
    """For a ``call_tir`` of a kernel ``call_n`` made in this process (the very GlobalVar it
    made, not only its name): its TE name (fast_softmax, conv2d_nchwc), its tensor inputs and
    its attrs; else None."""
    op = getattr(call, "op", None)
    if not isinstance(op, tvm.ir.Op) or op.name != "relax.call_tir" or len(call.args) != 2:
        return None
    gv, args = call.args[0], call.args[1]
    made = _MADE_AS.get(gv.name_hint) if isinstance(gv, tvm.ir.GlobalVar) else None
    if made is None or not made[2].same_as(gv) or not isinstance(args, relax.Tuple):
        return None
    return made[0], list(args.fields), made[1]


def _called(func) -> set[tvm.ir.GlobalVar]:
    found: set[tvm.ir.GlobalVar] = set()

    def visit(expr) -> None:
        if isinstance(expr, relax.Call) and isinstance(expr.op, tvm.ir.Op) and expr.op.name == "relax.call_tir":
            gv = expr.args[0]
            if isinstance(gv, tvm.ir.GlobalVar) and gv.name_hint in _BY_NAME:
                found.add(gv)

    relax.analysis.post_order_visit(func.body, visit)
    return found


def attach(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with the TE kernels its Relax functions call added (the same module if none
    is missing).  A name the module already uses for another function is an error: the
    caller leaves the rewrite out (``transform``'s well-formedness check)."""
    present = set(mod.get_global_vars())
    names = {gv.name_hint for gv in present}
    called = set().union(*(_called(f) for _, f in mod.functions.items() if isinstance(f, relax.Function)))
    missing = called - present
    if not missing:
        return mod
    out = mod.clone()
    for gv in sorted(missing, key=lambda g: g.name_hint):
        if gv.name_hint in names:
            raise ValueError(f"the module already has a function named {gv.name_hint}")
        out[gv] = _BY_NAME[gv.name_hint]
    return out
