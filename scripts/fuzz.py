"""Interaction fuzzer: random graphs, every rule family loaded at once, each result
checked numerically through TVM against the unrewritten module.

Rules tested one at a time can still combine into a wrong module (a merge rule that
read the padding of an enlarged conv in the same e-class).  Each random graph is
rewritten twice:

* ``pass``: ``tvm_eqsat.optimize`` as a user runs it, with the flow, extractor,
  search, rule set and target (generic x86-64, or AVX-512 from seed 512 on, in
  alternate runs of 512 seeds: Zen 5's roofline and the Xeon's learned model in turn)
  rotating over the cases (translation validation on: a rejected rewrite is
  reported by the pass as an alarm, and counts as a finding here);
* ``adversarial``: the e-graph grown with every family, then the graph that uses the
  most rule-made nodes extracted (no cost model would choose it; it exercises every
  right-hand side that fired), no validation.

Both modules are built with stock TVM and compared with the original on random
inputs, relative to each output's largest magnitude: within 1e-4 for fp32; for fp16,
whose rounding a reassociating rewrite changes, the rewritten build's error against
exact arithmetic must stay within 4x the original build's error plus 16 fp16 ulps.
A finding is a difference, an alarm or a crash; each is shrunk (outputs and steps
dropped while it still fails) and printed as TVMScript.

    python scripts/fuzz.py --seeds 2000                 # writes benchmarks/results/fuzz-llvm.md
    python scripts/fuzz.py --seeds 200 --start 5000 --jobs 2 --no-write
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FLOWS = ("default", "tuned")
EXTRACTORS = ("ilp", "dag_local", "dag_greedy", "greedy")
SEARCHES = ("saturate", "mcts")
BLOCKED_CHANNELS = 16  # nchwc.egg's block
RTOL_FP32 = 1e-4  # fp32: the rewritten build against the original build, relative to each output's magnitude
# ... or within ATOL_FP32 of it everywhere: erf_rational's GELU is within 1.2e-6 of GELU, and an
# output holding only GELU's negative tail (x < -4, values below 1.3e-4; fuzz seed 7356: a
# column of three near -5.5, about 5e-7 each) cannot be judged relative to its own magnitude
# (TVM's own float32 GELU was 13% off exact arithmetic there); translation validation's own floor,
# validate.ATOL, is the same 2e-6 for the same reason (fuzz seed 13373)
ATOL_FP32 = 2e-6
# fp16 rounds at every op, and a rewrite that reassociates (merges matmuls, gathers
# constants) rounds differently: on an output with cancellation the original's own error
# against exact arithmetic reaches a few percent. The rewritten build's error against
# exact arithmetic (the reference interpreter) must stay within FP16_FACTOR times the
# original's plus FP16_FLOOR, 16 fp16 ulps of the output's magnitude; a wrong rewrite is
# off by 10-100% (a wrong padding: 33%). The fp16 findings so far (seeds 1469, 1674, 8372:
# 3.0% -> 6.7%, 0.19% -> 0.99%, 0.45% -> 3.4%) all came from matmul-assoc-const folding
# constant matmul chains in fp16, which it no longer does; they now pass even at a 2e-3 floor.
FP16_FACTOR, FP16_FLOOR = 4.0, 16 * 2.0**-10
# The same judgement for float32 where the builds differ by more than RTOL_FP32 and ATOL_FP32: an
# output whose terms nearly cancel (fuzz seed 13755: a stride-2 conv's output of 0.015 from
# terms of about 1, the builds 2.0e-4 apart) rounds differently under a sound rewrite that
# reorders the sum (the conv split over its input's phases); there the original build was 1.3e-4
# off exact arithmetic and the rewrite 7.6e-5. The floor is 16 float32 ulps of the output's magnitude.
FP32_FACTOR, FP32_FLOOR = 4.0, 16 * 2.0**-23


# ---------------------------------------------------------------- random programs


@dataclass
class Step:
    """One Relax call: ``op`` over earlier values ``args`` (indices) with ``attrs``."""

    op: str
    args: tuple[int, ...]
    attrs: dict = field(default_factory=dict)


@dataclass
class Program:
    """A random dataflow block: inputs, steps, and the values it returns."""

    dtype: str
    inputs: list[tuple[int, ...]]  # shapes of the function's parameters
    steps: list[Step]
    outputs: list[int]  # value indices (inputs first, then one value per step)
    seed: int = 0
    shapes: list[tuple[int, ...]] = field(default_factory=list)  # every value's (a split's: ())


class _Builder:
    """Grows a Program step by step, tracking every value's shape."""

    def __init__(self, rng: np.random.Generator, dtype: str, channel_unit: int = 1) -> None:
        self.rng, self.dtype = rng, dtype
        self.channel_unit = channel_unit  # input and conv channels come in multiples of it
        self.inputs: list[tuple[int, ...]] = []
        self.steps: list[Step] = []
        self.shapes: list[tuple[int, ...]] = []

    def value(self, shape) -> int:
        self.shapes.append(tuple(int(d) for d in shape))
        return len(self.shapes) - 1

    def input(self, shape) -> int:
        assert not self.steps, "inputs come first"
        self.inputs.append(tuple(shape))
        return self.value(shape)

    def step(self, op: str, args, shape, **attrs) -> int:
        self.steps.append(Step(op, tuple(args), attrs))
        return self.value(shape)

    def const(self, shape, positive: bool = False) -> int:
        return self.step("const", (), shape, seed=int(self.rng.integers(1 << 30)), positive=positive)

    def weight(self, shape) -> int:
        """A constant weight, or (one time in five) a parameter made of another input."""
        if self.rng.random() < 0.8:
            return self.const(shape)
        return self.step("param", (), shape)

    def pick(self, rank: int | None = None, channels_first: bool = True) -> int | None:
        cands = [i for i, s in enumerate(self.shapes) if rank is None or len(s) == rank]
        if not cands:
            return None
        return int(self.rng.choice(cands))


def _conv_out(h: int, k: int, s: int, p0: int, p1: int, d: int) -> int:
    return (h + p0 + p1 - d * (k - 1) - 1) // s + 1


def _conv(b: _Builder, x: int, oc: int, k: tuple[int, int], stride, pad, dil, groups) -> int | None:
    n, c, h, w = b.shapes[x]
    ho = _conv_out(h, k[0], stride[0], pad[0], pad[2], dil[0])
    wo = _conv_out(w, k[1], stride[1], pad[1], pad[3], dil[1])
    if ho < 1 or wo < 1 or c % groups or oc % groups:
        return None
    wt = b.weight((oc, c // groups, k[0], k[1]))
    return b.step("conv2d", (x, wt), (n, oc, ho, wo), strides=stride, padding=pad, dilation=dil, groups=groups)


def _random_conv_attrs(rng, c: int):
    if rng.random() < 0.2:  # a factorised 1 x r or r x 1 conv, stride 1 (Inception's: winograd_1d's)
        r = int(rng.choice([3, 7]))
        p = int(rng.integers(0, r // 2 + 1))
        return (
            ((1, r), (1, 1), (0, p, 0, p), (1, 1), 1)
            if rng.random() < 0.5
            else ((r, 1), (1, 1), (p, 0, p, 0), (1, 1), 1)
        )
    k = int(rng.choice([1, 1, 3, 3, 5]))
    kh, kw = (k, k) if rng.random() < 0.8 else (k, int(rng.choice([1, 3])))
    s = int(rng.integers(1, 4))
    stride = (s, s) if rng.random() < 0.85 else (s, int(rng.integers(1, 4)))
    p = int(rng.integers(0, 3))
    pad = (p, p, p, p) if rng.random() < 0.7 else tuple(int(v) for v in rng.integers(0, 3, 4))
    d = int(rng.choice([1, 1, 1, 2]))
    divisors = [g for g in range(1, c + 1) if c % g == 0]
    groups = 1 if rng.random() < 0.6 else int(rng.choice(divisors))
    return (kh, kw), stride, pad, (d, d), groups


def _conv_steps(b: _Builder, rng) -> None:
    x = b.pick(4)
    n, c, h, w = b.shapes[x]
    kind = rng.random()
    if kind < 0.35:  # sibling convs on one input: the merges and enlargements
        (kh, kw), stride, pad, dil, groups = _random_conv_attrs(rng, c)
        for _ in range(int(rng.integers(2, 4))):
            k = int(rng.choice([1, 3]))
            p = (k // 2,) * 4 if rng.random() < 0.5 else pad
            oc = int(rng.integers(1, 5)) * (groups if rng.random() < 0.5 else 1) * b.channel_unit
            g = groups if oc % groups == 0 else 1
            y = _conv(b, x, oc, (k, k), stride, p, dil, g)
            if y is not None and rng.random() < 0.6:
                b.step(str(rng.choice(["relu", "relu", "clip", "sigmoid", "silu"])), (y,), b.shapes[y])
    elif kind < 0.5:
        k, stride, pad, dil, groups = _random_conv_attrs(rng, c)
        oc = int(rng.integers(1, 4)) * groups * b.channel_unit
        if b.channel_unit == BLOCKED_CHANNELS and kind < 0.42:  # depthwise, one filter a channel (MobileNet's)
            oc = groups = c
        _conv(b, x, oc, k, stride, pad, dil, groups)
    elif kind < 0.6:  # per-channel bias, or a bias that broadcasts another way
        shape = (1, c, 1, 1) if rng.random() < 0.6 else ((c, 1, 1) if rng.random() < 0.5 else (1, 1, h, w))
        y = b.step("add", (x, b.const(shape)), (n, c, h, w))
        if rng.random() < 0.5 and b.dtype == "float32":
            b.step(
                "batch_norm", (y,), (n, c, h, w), seed=int(rng.integers(1 << 30)), eps=float(rng.choice([1e-5, 1e-3]))
            )
    elif kind < 0.68 and b.dtype == "float32":  # TVM's legalized fp16 batch norm does not build
        b.step("batch_norm", (x,), (n, c, h, w), seed=int(rng.integers(1 << 30)), eps=float(rng.choice([1e-5, 1e-3])))
    elif kind < 0.74:
        b.step("multiply", (x, b.const((1, c, 1, 1))), (n, c, h, w))
    elif kind < 0.82:  # concat of values of one spatial size along channels
        same = [i for i, s in enumerate(b.shapes) if len(s) == 4 and s[0] == n and s[2:] == (h, w)]
        parts = [int(i) for i in rng.choice(same, size=min(len(same), int(rng.integers(2, 4))), replace=True)]
        if len(parts) > 1:
            b.step("concat", parts, (n, sum(b.shapes[i][1] for i in parts), h, w), axis=1)
    elif kind < 0.88 and c > 1:
        at = int(rng.integers(1, c))
        parts = b.step("split", (x,), (), indices=(at,), axis=1)
        b.step("tget", (parts,), (n, at, h, w), index=0)
        b.step("tget", (parts,), (n, c - at, h, w), index=1)
    elif kind < 0.93:  # residual add of two values of one shape (or a broadcast one)
        same = [i for i, s in enumerate(b.shapes) if s == (n, c, h, w) and i != x]
        if same:
            b.step("add", (x, int(rng.choice(same))), (n, c, h, w))
    elif kind < 0.95:  # global average pooling, as the CNNs end
        keep = bool(rng.random() < 0.5)
        b.step("mean", (x,), (n, c, 1, 1) if keep else (n, c), axes=(2, 3), keepdims=keep)
    else:
        op = str(rng.choice(["max_pool2d", "avg_pool2d"]))
        k, s = int(rng.choice([1, 2, 3])), int(rng.integers(1, 3))
        p = int(rng.integers(0, k // 2 + 1))
        ho, wo = _conv_out(h, k, s, p, p, 1), _conv_out(w, k, s, p, p, 1)
        if ho >= 1 and wo >= 1:
            b.step(op, (x,), (n, c, ho, wo), pool=k, stride=s, pad=p)


def _matmul_steps(b: _Builder, rng) -> None:
    x = b.pick(int(rng.choice([2, 3]))) if any(len(s) in (2, 3) for s in b.shapes) else None
    if x is None:
        return
    shape = b.shapes[x]
    k = shape[-1]
    kind = rng.random()
    if kind < 0.4:  # sibling matmuls, each maybe with a bias
        for _ in range(int(rng.integers(2, 4))):
            n_out = int(rng.integers(1, 6))
            y = b.step("matmul", (x, b.weight((k, n_out))), shape[:-1] + (n_out,))
            if rng.random() < 0.6:
                bias = (n_out,) if rng.random() < 0.8 else (1,)
                y = b.step("add", (y, b.const(bias)), b.shapes[y])
            if rng.random() < 0.4:
                b.step(str(rng.choice(["relu", "gelu", "softmax"])), (y,), b.shapes[y])
    elif kind < 0.55:  # matmuls sharing a weight on two inputs (the row merges)
        other = [i for i, s in enumerate(b.shapes) if len(s) == len(shape) and s[-1] == k and s[:-2] == shape[:-2]]
        wt = b.weight((k, int(rng.integers(1, 5))))
        for i in {x, int(rng.choice(other))}:
            b.step("matmul", (i, wt), b.shapes[i][:-1] + (b.shapes[wt][1],))
    elif kind < 0.7 and k > 1:  # split the last axis, add a bias to each part
        at = int(rng.integers(1, k))
        parts = b.step("split", (x,), (), indices=(at,), axis=len(shape) - 1)
        for idx, width in ((0, at), (1, k - at)):
            part = b.step("tget", (parts,), shape[:-1] + (width,), index=idx)
            b.step("add", (part, b.const((width,) if rng.random() < 0.7 else (1,))), shape[:-1] + (width,))
    elif kind < 0.8:
        perm = tuple(range(len(shape) - 2)) + (len(shape) - 1, len(shape) - 2)
        t = b.step("permute_dims", (x,), shape[:-2] + (shape[-1], shape[-2]), axes=perm)
        b.step("permute_dims", (t,), shape, axes=perm)
    elif kind < 0.9:  # a scale: per column, or a scalar (the attention scale), maybe of a reshape
        if rng.random() < 0.5:
            b.step("multiply", (x, b.const((k,))), shape)
        else:
            if len(shape) == 3 and rng.random() < 0.5:
                flat = (shape[0] * shape[1], k)
                x = b.step("reshape", (x,), flat, newshape=flat)
            b.step("multiply", (x, b.const(())), b.shapes[x])
    else:
        b.step("matmul", (x, b.weight((k, k))), shape)


def random_program(seed: int) -> Program:
    """A random block: conv (NCHW) and/or matmul values, 4-14 steps."""
    rng = np.random.default_rng(seed)
    dtype = "float16" if rng.random() < 0.25 else "float32"
    # one graph in six has channels in multiples of 16, which nchwc.egg blocks (drawn apart, so
    # that every other seed makes the graph it made before)
    b = _Builder(rng, dtype, BLOCKED_CHANNELS if np.random.default_rng([seed, 16]).random() < 1 / 6 else 1)
    world = rng.random()
    if world < 0.6:
        c, hw = int(rng.integers(1, 7)) * b.channel_unit, int(rng.integers(3, 12))
        b.input((1, c, hw, hw + int(rng.integers(0, 3))))
    if world >= 0.4:
        k = int(rng.integers(2, 9))
        b.input((int(rng.integers(1, 5)), k) if rng.random() < 0.6 else (2, int(rng.integers(1, 4)), k))
    for _ in range(int(rng.integers(4, 15))):
        has4 = any(len(s) == 4 for s in b.shapes)
        has23 = any(len(s) in (2, 3) for s in b.shapes)
        if has4 and (not has23 or rng.random() < 0.5):
            _conv_steps(b, rng)
        else:
            _matmul_steps(b, rng)
    leaves = {i for i, s in enumerate(b.steps) if s.op in ("const", "param", "split")}
    used = {a for s in b.steps for a in s.args}
    n_in = len(b.inputs)
    outputs = [n_in + i for i in range(len(b.steps)) if i not in leaves and n_in + i not in used]
    return Program(dtype, b.inputs, b.steps, outputs or [len(b.shapes) - 1], seed, b.shapes)


# ---------------------------------------------------------------- Program -> Relax


def to_module(prog: Program, name: str = "main"):
    """The program as a one-function Relax module (parameters: inputs, then "param" weights)."""
    from tvm import relax
    from tvm.relax import op as R

    dt = prog.dtype
    n_in = len(prog.inputs)
    params = [relax.Var(f"x{i}", relax.TensorType(s, dt)) for i, s in enumerate(prog.inputs)]
    extra = [
        relax.Var(f"w{k}", relax.TensorType(prog.shapes[n_in + i], dt))
        for k, i in enumerate(i for i, s in enumerate(prog.steps) if s.op == "param")
    ]
    bb = relax.BlockBuilder()

    def const(shape, seed, positive=False):
        r = np.random.default_rng(seed)
        v = np.abs(r.standard_normal(shape)) + 0.5 if positive else r.standard_normal(shape)
        return relax.const(v.astype(dt))

    with bb.function(name, params + extra):
        with bb.dataflow():
            vals: list = list(params)
            k = 0
            for j, s in enumerate(prog.steps):
                a = [vals[i] for i in s.args]
                at = s.attrs
                if s.op == "const":
                    v = const(prog.shapes[n_in + j], at["seed"], at.get("positive", False))
                elif s.op == "param":
                    v = extra[k]
                    k += 1
                elif s.op == "conv2d":
                    v = bb.emit(
                        R.nn.conv2d(
                            a[0],
                            a[1],
                            strides=at["strides"],
                            padding=at["padding"],
                            dilation=at["dilation"],
                            groups=at["groups"],
                        )
                    )
                elif s.op == "batch_norm":
                    c = prog.shapes[s.args[0]][1]
                    gm, bt, mn = (const((c,), at["seed"] + i) for i in range(3))
                    vr = const((c,), at["seed"] + 3, positive=True)
                    v = bb.emit(
                        relax.TupleGetItem(
                            bb.emit(R.nn.batch_norm(a[0], gm, bt, mn, vr, axis=1, epsilon=at["eps"], training=False)), 0
                        )
                    )
                elif s.op == "concat":
                    v = bb.emit(R.concat(a, axis=at["axis"]))
                elif s.op == "split":
                    v = bb.emit(R.split(a[0], list(at["indices"]), axis=at["axis"]))
                elif s.op == "tget":
                    v = bb.emit(relax.TupleGetItem(a[0], at["index"]))
                elif s.op in ("max_pool2d", "avg_pool2d"):
                    v = bb.emit(
                        getattr(R.nn, s.op)(a[0], pool_size=at["pool"], strides=at["stride"], padding=at["pad"])
                    )
                elif s.op == "reshape":
                    v = bb.emit(R.reshape(a[0], list(at["newshape"])))
                elif s.op == "permute_dims":
                    v = bb.emit(R.permute_dims(a[0], list(at["axes"])))
                elif s.op in ("relu", "gelu", "silu"):
                    v = bb.emit(getattr(R.nn, s.op)(a[0]))
                elif s.op == "softmax":
                    v = bb.emit(R.nn.softmax(a[0], axis=-1))
                elif s.op == "clip":
                    v = bb.emit(R.clip(a[0], 0.0, 6.0))
                elif s.op == "sigmoid":
                    v = bb.emit(R.sigmoid(a[0]))
                elif s.op == "mean":
                    v = bb.emit(R.mean(a[0], list(at["axes"]), keepdims=at["keepdims"]))
                else:  # add, multiply, matmul
                    v = bb.emit(getattr(R, s.op)(*a))
                vals.append(v)
            outs = [vals[i] for i in prog.outputs]
            gv = bb.emit_output(relax.Tuple(outs) if len(outs) > 1 else outs[0])
        bb.emit_func_output(gv)
    return bb.get()


# ---------------------------------------------------------------- checking


@dataclass
class Finding:
    seed: int
    kind: str  # "difference", "alarm", "crash"
    mode: str  # "pass" or "adversarial"
    detail: str
    options: dict = field(default_factory=dict)
    script: str = ""


def pass_options(k: int, cost_target: str = "llvm") -> dict:
    """The pass options for the ``k``-th batch: every flow x extractor x search in turn, with
    the default rules and with every family (the opt-in ones too) in alternate rounds, costed
    for generic x86-64 code and, in alternate rounds of 32, for an AVX-512 CPU (Zen 5, whose
    tuned roofline has other compute peaks and prices libm calls and strided convs, so
    extraction chooses differently; every other roofline round the Xeon's, with its own peaks
    and strided-conv shares); every other AVX-512
    round is costed by the Xeon's learned model (``cost_model="xgb"``: the booster prices NCHW
    and NHWC convs apart, where the roofline ties them, so extraction can mix layouts).
    ``cost_target="cuda"``: every batch costed for CUDA instead (its own default families, and
    in the default flow the model learned on the H100's dlight kernels), the rest rotating
    alike; the rewritten graphs are still built and compared on this CPU."""
    from tvm_eqsat.rules import load_library

    avx512 = (k // 32) % 2 == 1
    learned = avx512 and (k // 64) % 2 == 1
    roofline = AVX512_ROOFLINE[(k // 128) % 2]
    if cost_target not in COST_TARGETS:
        raise ValueError(f"cost_target={cost_target!r}: expected one of {COST_TARGETS}")
    return {
        "target": CUDA if cost_target == "cuda" else (AVX512 if learned else roofline) if avx512 else "llvm",
        "cost_model": "xgb" if cost_target == "llvm" and learned else "auto",
        "flow": FLOWS[k % 2],
        "extractor": EXTRACTORS[(k // 2) % 4],
        "search": SEARCHES[(k // 8) % 2],
        "rules": None if (k // 16) % 2 == 0 else tuple(load_library().families),
        "mcts_preset": "fast",
        "time_limit_s": 60.0,
    }


def _name(prog: Program) -> str:
    return f"f{prog.seed}"


def _combined(progs: list[Program]):
    """One module with a function per program (one TVM build for all of them)."""
    import tvm

    mod = tvm.IRModule()
    for p in progs:
        mod[_name(p)] = to_module(p, _name(p))[_name(p)]
    return mod


# what the pass costs for (it never builds for it): an AVX-512 CPU whose learned model is shipped,
# for the rounds costed by a learned model; for the roofline's, in turn, the two AVX-512 CPUs whose
# tuned rooflines hold measured figures (libm calls, gathers, strided convs: their strided 1x1
# shares make the pass take subsample.egg's form; the Xeon's strided 3x3 share prices convs of 16
# or more input channels, which the generator's graphs seldom hold, so polyphase.egg's form is
# checked by the adversarial extraction)
AVX512 = {"kind": "llvm", "mcpu": "emeraldrapids"}
AVX512_ROOFLINE = ({"kind": "llvm", "mcpu": "znver5"}, {"kind": "llvm", "mcpu": "emeraldrapids"})
CUDA = {"kind": "cuda", "arch": "sm_90"}  # what the pass costs for with --cost-target cuda
COST_TARGETS = ("llvm", "cuda")
BUILD_TARGET = {"kind": "llvm", "opt-level": 0}  # LLVM's -O0: a quarter of the build time, same arithmetic


def _run_all(mod, names: list[str], inputs: dict) -> dict:
    """Every named function of ``mod`` run on its inputs (one build, one VM); a name
    ``f@mode`` is function ``f`` rewritten by ``mode`` and takes ``f``'s inputs."""
    import tvm
    from tvm import relax

    from tvm_eqsat import verify

    vm = relax.VirtualMachine(tvm.compile(mod, target=tvm.target.Target(BUILD_TARGET)), tvm.cpu())
    return {n: verify._flatten(vm[n](*[tvm.runtime.tensor(x) for x in inputs[n.split("@")[0]]])) for n in names}


def check(
    progs,
    modes=("pass", "adversarial"),
    options: dict | None = None,
    cost_target: str = "llvm",
    stats: Counter | None = None,
) -> list[Finding]:
    """Findings for programs checked together (empty: every mode computed what each
    original computes).  A batch whose rewritten module fails to build as a whole is
    checked again one program at a time, so a finding names its program.  ``options``:
    the pass's, else the batch's turn of ``pass_options`` for ``cost_target``.  ``stats``
    counts the graphs the pass changed (a graph it leaves alone tests no rewrite)."""
    import tvm

    import tvm_eqsat
    from tvm_eqsat import te_ops, verify
    from tvm_eqsat.rules import load_library

    progs = [progs] if isinstance(progs, Program) else list(progs)
    opts = options or pass_options(progs[0].seed // len(progs), cost_target)  # batches rotate through the options
    mod = _combined(progs)
    names = [_name(p) for p in progs]
    inputs = {_name(p): verify.random_inputs(mod[_name(p)], p.seed) for p in progs}
    by_name = {_name(p): p for p in progs}
    try:
        ref = _run_all(mod, names, inputs)
    except Exception as err:  # noqa: BLE001 - TVM cannot build an original: the generator's bug, not ours
        if len(progs) > 1:
            return [f for p in progs for f in check([p], modes, opts)]
        return [Finding(progs[0].seed, "invalid", "original", f"{type(err).__name__}: {str(err)[:300]}")]
    found: list[Finding] = []
    rewritten = tvm.IRModule()  # every changed function of every mode: one build for all
    for mode in modes:
        try:
            if mode == "pass":
                target, rest = opts.get("target", "llvm"), {k: v for k, v in opts.items() if k != "target"}
                new, report = tvm_eqsat.optimize(mod, target, **rest)
                for name, f in report.functions.items():
                    if f.alarms:
                        found.append(Finding(by_name[name].seed, "alarm", mode, "; ".join(f.alarms), opts))
                changed = [n for n, f in report.functions.items() if f.changed]
                if stats is not None:
                    stats["changed by the pass"] += len(changed)
                    stats["checkpoints validated"] += sum(
                        f.validation.get("checkpoints", 0) for f in report.functions.values()
                    )
            else:
                library = load_library()
                family_of = {r.name: r.family for r in library.rules}
                new = mod
                for n in names:
                    new, applied, _ = rewritten_variant(new, library.families, n)
                    if stats is not None:  # which families the adversarial variants exercised
                        for family in {family_of[r] for r, k in applied.items() if k and r in family_of}:
                            stats[f"graphs where {family} fired"] += 1
                changed = names
            for n in changed:
                rewritten[f"{n}@{mode}"] = new[n].with_attr("global_symbol", f"{n}@{mode}")
        except Exception as err:  # noqa: BLE001 - a crash is a finding; isolate it
            found += _isolate(progs, mode, opts, err)
    try:
        if len(rewritten.functions):
            names = [gv.name_hint for gv in rewritten.functions]
            got = _run_all(te_ops.attach(rewritten), names, inputs)  # with the TE kernels they call
            for key, out in got.items():
                n, mode = key.split("@")
                problem = _difference(by_name[n], mod[n], inputs[n], ref[n], out)
                if problem:
                    found.append(Finding(by_name[n].seed, "difference", mode, problem, opts if mode == "pass" else {}))
    except Exception as err:  # noqa: BLE001 - a rewritten module that does not build
        found += [f for mode in modes for f in _isolate(progs, mode, opts, err)]
    return found


def _difference(prog: Program, func, inputs: list, ref: list, got: list) -> str | None:
    """Why the rewritten build's outputs ``got`` are not the original's ``ref`` (None if they are)."""
    from tvm_eqsat import verify

    diff, rel = verify.output_diffs(ref, got)
    if prog.dtype != "float16":
        if rel <= RTOL_FP32 or diff <= ATOL_FP32:
            return None
        factor, floor = FP32_FACTOR, FP32_FLOOR
    elif rel <= FP16_FLOOR:
        return None
    else:
        factor, floor = FP16_FACTOR, FP16_FLOOR
    exact = _exact(func, inputs)
    for i, (e, a, b) in enumerate(zip(exact, ref, got)):
        scale = float(np.max(np.abs(e))) or 1.0
        err_ref, err_got = (float(np.max(np.abs(e - x.astype(np.float64)))) / scale for x in (a, b))
        if err_got > factor * err_ref + floor:
            return (
                f"output {i}: error against exact arithmetic {err_got:.3g}, the original build's {err_ref:.3g} "
                f"(builds differ by {rel:.3g}, absolute {diff:.3g})"
            )
    return None


def _exact(func, inputs: list) -> list[np.ndarray]:
    """``func``'s outputs on ``inputs`` by the reference interpreter (float64 arithmetic)."""
    from tvm_eqsat.evaluate import Interpreter, as_exact, flatten
    from tvm_eqsat.graph import graph_from_block

    g = graph_from_block(func.body.blocks[0])
    interp = Interpreter()
    params = list(func.params)
    interp.inputs = {
        k: as_exact(inputs[next(i for i, p in enumerate(params) if p.same_as(v))]) for k, v in enumerate(g.inputs)
    }
    return [a.astype(np.float64) for v in interp.outputs(g) for a in flatten(v)]


def _isolate(progs: list[Program], mode: str, opts: dict, err: Exception) -> list[Finding]:
    """The findings behind a batch's failure: each program checked alone (or this one's crash)."""
    if len(progs) > 1:
        return [f for p in progs for f in check([p], (mode,), opts)]
    return [
        Finding(progs[0].seed, "crash", mode, f"{type(err).__name__}: {str(err)[:300]}", opts if mode == "pass" else {})
    ]


def rewritten_variant(mod, families, func: str):
    """``mod`` with ``func``'s block replaced by its most rewritten equivalent."""
    from tvm_eqsat.forms import rewritten_form

    return rewritten_form(mod, families, func)


# ---------------------------------------------------------------- shrinking


def _live(prog: Program, outputs: list[int]) -> Program:
    """Drop steps no output needs, renumbering values."""
    n_in = len(prog.inputs)
    need = set(outputs)
    for i in range(len(prog.steps) - 1, -1, -1):
        if n_in + i in need:
            need.update(prog.steps[i].args)
    keep = [i for i in range(len(prog.steps)) if n_in + i in need]
    new_index = {i: i for i in range(n_in)}
    for j, i in enumerate(keep):
        new_index[n_in + i] = n_in + j
    steps = [Step(prog.steps[i].op, tuple(new_index[a] for a in prog.steps[i].args), prog.steps[i].attrs) for i in keep]
    shapes = prog.shapes[:n_in] + [prog.shapes[n_in + i] for i in keep]
    return Program(prog.dtype, prog.inputs, steps, [new_index[o] for o in outputs], prog.seed, shapes)


def shrink(prog: Program, fails, budget_s: float = 300.0) -> Program:
    """A smaller program for which ``fails(program)`` still holds: outputs dropped one by
    one, an intermediate value made the only output, then steps bypassed (a step's uses
    read one of its same-shaped inputs)."""
    deadline = time.monotonic() + budget_s
    best = _live(prog, list(prog.outputs))
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        for o in list(best.outputs):
            if len(best.outputs) > 1:
                cand = _live(best, [x for x in best.outputs if x != o])
                if fails(cand):
                    best, progress = cand, True
                    break
        if progress:
            continue
        n_in = len(best.inputs)
        for i, s in enumerate(best.steps):  # an intermediate value as the only output
            if s.op in ("const", "param", "split"):
                continue
            cand = _live(best, [n_in + i])
            if len(cand.steps) < len(best.steps) and fails(cand):
                best, progress = cand, True
                break
        if progress:
            continue
        for i, s in enumerate(best.steps):
            same = [a for a in s.args if best.shapes[a] == best.shapes[n_in + i]]
            if not same or s.op in ("tget",):
                continue
            sub = {n_in + i: same[0]}
            steps = [Step(t.op, tuple(sub.get(a, a) for a in t.args), t.attrs) for t in best.steps]
            cand = Program(
                best.dtype, best.inputs, steps, [sub.get(o, o) for o in best.outputs], best.seed, best.shapes
            )
            cand = _live(cand, cand.outputs)
            if len(cand.steps) < len(best.steps) and fails(cand):
                best, progress = cand, True
                break
    return best


# ---------------------------------------------------------------- driver


def run_cases(
    seeds, modes=("pass", "adversarial"), shrink_s: float = 300.0, progress=None, batch: int = 16, cost_target="llvm"
) -> dict:
    """Check the seeds' programs ``batch`` at a time (the pass costed for ``cost_target``,
    see ``pass_options``); shrink and script every finding."""
    stats: Counter = Counter()
    findings: list[Finding] = []
    seeds = list(seeds)
    for i in range(0, len(seeds), batch):
        progs = [random_program(seed) for seed in seeds[i : i + batch]]
        for prog in progs:
            stats["graphs"] += 1
            stats[f"dtype {prog.dtype}"] += 1
            stats["steps"] += len(prog.steps)
        for f in check(progs, modes, cost_target=cost_target, stats=stats):
            if f.kind == "invalid":  # the generator made a program stock TVM cannot build
                stats["invalid programs (not built by stock TVM)"] += 1
                continue
            prog = random_program(f.seed)
            opts = f.options or None
            small = shrink(
                prog,
                lambda p, f=f: any(
                    g.kind == f.kind and g.mode == f.mode for g in check(p, (f.mode,), opts, cost_target)
                ),
                shrink_s,
            )
            f.script = to_module(small).script()
            findings.append(f)
            stats[f"finding {f.kind}"] += 1
        if progress is not None:
            progress(stats)
    return {"stats": dict(stats), "findings": [f.__dict__ for f in findings]}


def _worker(args) -> dict:
    seeds, modes, cost_target = args
    logging.getLogger("tvm_eqsat").setLevel(logging.ERROR)
    start = time.time()
    result = run_cases(seeds, modes, cost_target=cost_target)
    result["seconds"] = round(time.time() - start, 1)
    return result


def write_results(result: dict, args, seconds: float, path: Path) -> None:
    stats = result["stats"]
    from tvm_eqsat import provenance

    state = provenance.source_state()
    lines = [
        "# Interaction fuzzer, llvm",
        "",
        f"Written {time.strftime('%Y-%m-%d')} at commit {state.get('commit', '?')[:10]} on a {os.cpu_count()}-core "
        f"{provenance.cpu_name()}.",
        "",
        f"`python scripts/fuzz.py --seeds {args.seeds} --start {args.start} --jobs {args.jobs}"
        f"{' --cost-target ' + args.cost_target if args.cost_target != 'llvm' else ''}`: "
        f"{stats.get('graphs', 0)} random graphs (seeds {args.start}..{args.start + args.seeds - 1}), "
        f"every rule family loaded, {seconds / 60:.0f} min of work (one process) on a {os.cpu_count()}-core machine.",
        "",
        "Each graph: the pass as a user runs it (flow, extractor and search rotating: "
        f"{', '.join(FLOWS)} x {', '.join(EXTRACTORS)} x {', '.join(SEARCHES)}; translation validation on) "
        "and the most rewritten extraction of the saturated e-graph; both built with TVM and "
        f"compared with the original (fp32: relative difference at most {RTOL_FP32:g}; fp16: error against exact "
        f"arithmetic at most {FP16_FACTOR:g}x the original build's plus {FP16_FLOOR:g}).",
        "",
        "| what | count |",
        "|---|---|",
    ]
    for key in sorted(stats):
        lines.append(f"| {key} | {stats[key]} |")
    lines += ["", f"Findings: {len(result['findings'])}.", ""]
    for f in result["findings"]:
        lines += [
            f"## seed {f['seed']}: {f['kind']} ({f['mode']})",
            "",
            f["detail"],
            "",
            f"options: `{json.dumps(f['options'])}`",
            "",
            "```python",
            f["script"],
            "```",
            "",
        ]
    path.write_text("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=1000, help="number of random graphs")
    ap.add_argument("--start", type=int, default=0, help="first seed")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--modes", nargs="+", default=["pass", "adversarial"], choices=["pass", "adversarial"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "fuzz-llvm.md"))
    ap.add_argument(
        "--log",
        default=str(Path.home() / ".cache" / "tvm_eqsat" / "fuzz-llvm.jsonl"),
        help="one JSON line per finished chunk of seeds; a rerun skips the chunks already there",
    )
    ap.add_argument("--no-write", action="store_true", help="do not write the Markdown results")
    ap.add_argument(
        "--cost-target",
        default="llvm",
        choices=COST_TARGETS,
        help="what the pass costs for: llvm (generic x86-64 and AVX-512 in turn) or cuda (sm_90); the graphs are "
        "built and compared here either way (use a --log of its own: a log's chunks are known by their seeds)",
    )
    args = ap.parse_args()
    from tqdm import tqdm

    log_path = Path(args.log)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    done = {}
    if log_path.exists():
        for line in log_path.read_text().splitlines():
            part = json.loads(line)
            done[tuple(part["seeds"])] = part
    size = 64  # seeds per chunk (a worker task, a line of the log)
    seeds = list(range(args.start, args.start + args.seeds))
    chunks = [seeds[i : i + size] for i in range(0, len(seeds), size)]
    todo = [c for c in chunks if (c[0], c[-1]) not in done]
    start = time.time()
    bar = tqdm(total=len(seeds), initial=len(seeds) - sum(map(len, todo)), unit="graph")
    with open(log_path, "a") as log_file:

        def record(chunk, part):
            part = {"seeds": [chunk[0], chunk[-1]], **part}
            done[(chunk[0], chunk[-1])] = part
            log_file.write(json.dumps(part) + "\n")
            log_file.flush()
            bar.update(len(chunk))
            # this run's seeds only: the log also holds earlier runs' chunks, with their findings
            bar.set_postfix(findings=sum(len(done[c[0], c[-1]]["findings"]) for c in chunks if (c[0], c[-1]) in done))

        if args.jobs > 1:
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(args.jobs) as pool:
                for chunk, part in zip(
                    todo, pool.map(_worker, [(c, tuple(args.modes), args.cost_target) for c in todo])
                ):
                    record(chunk, part)
        else:
            for chunk in todo:
                record(chunk, _worker((chunk, tuple(args.modes), args.cost_target)))
    bar.close()
    parts = [done[(c[0], c[-1])] for c in chunks]
    total = {
        "stats": dict(sum((Counter(p["stats"]) for p in parts), Counter())),
        "findings": [f for p in parts for f in p["findings"]],
    }
    seconds = sum(p.get("seconds", 0.0) for p in parts)
    print(
        f"{total['stats'].get('graphs', 0)} graphs, {len(total['findings'])} findings, "
        f"{time.time() - start:.0f} s this run"
    )
    for f in total["findings"]:
        print(f"seed {f['seed']}: {f['kind']} ({f['mode']}): {f['detail']}\n{f['script']}")
    if not args.no_write:
        write_results(total, args, seconds, Path(args.out))
    sys.exit(1 if total["findings"] else 0)


if __name__ == "__main__":
    main()
