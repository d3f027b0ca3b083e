"""Kernel measurement: one op (plus the element-wise epilogue FuseOps fuses into
it) built as a one-kernel Relax function, scheduled the way deployment does
(MetaSchedule on CPU, dlight defaults on CUDA), compiled and timed with
``time_evaluator``, here or on a device behind TVM's RPC tracker.

The cost model trains on these numbers, so a node's cost is the latency of the
kernel TVM will actually build, not a FLOP count.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tvm
from tvm import relax
from tvm.s_tir import meta_schedule as ms

from . import ops, te_ops
from .cost import FLOWS  # the build flows, named once
from .graph import TensorTy, module_graphs, ty_of
from .tune import RPCDevice, build, random_args, tune, use_all_cores
from .verify import random_inputs
from .workload import Epilogue, Workload

log = logging.getLogger("tvm_eqsat")


@dataclass
class Measurement:
    median_us: float
    p10_us: float
    p90_us: float
    runs: list[float] = field(default_factory=list)


# ---------------------------------------------------------------- building


def workload_module(w: Workload) -> tvm.IRModule:
    """``main(x0, x1, ..., e0, ...)``: the op on fresh parameters, then its epilogue."""
    spec = ops.BY_NAME.get(w.op)
    if spec is None:
        raise ValueError(f"{w.op!r} is not a native op")
    params = [relax.Var(f"x{i}", relax.TensorType(list(t.shape), t.dtype)) for i, t in enumerate(w.inputs)]
    bb = relax.BlockBuilder()
    extra = []
    for k, e in enumerate(w.epilogue):
        if e.operand is not None:
            extra.append(relax.Var(f"e{k}", relax.TensorType(list(e.operand), w.inputs[0].dtype)))
    with bb.function("main", params + extra):
        with bb.dataflow():
            value = bb.emit(ops.build_call(spec, params, w.attrs))
            if isinstance(value.ty, relax.TupleType) or type(value.ty).__name__ == "TupleType":
                value = bb.emit(relax.TupleGetItem(value, 0))
            operands = iter(extra)
            for e in w.epilogue:
                espec = ops.BY_NAME[e.op]
                args = [value] if e.operand is None else [value, next(operands)]
                if e.operand_first:
                    args.reverse()
                value = bb.emit(ops.build_call(espec, args, e.attrs))
            out = bb.emit_output(value)
        bb.emit_func_output(out)
    return te_ops.attach(bb.get())


# ---------------------------------------------------------------- timing


CACHE_FLUSH = "cache_flush_cpu_non_first_arg"  # what tune.COLD_EVALUATOR's time_evaluator runs before each repeat


def time_executable(
    ex,
    target: tvm.target.Target,
    args: Sequence[np.ndarray],
    *,
    repeat: int = 30,
    min_repeat_ms: int = 20,
    rpc: RPCDevice | None = None,
    cold_cache: bool = False,
) -> Measurement:
    """Median and spread of ``main`` over ``repeat`` runs (each at least ``min_repeat_ms``).
    ``cold_cache``: every argument but the first flushed from the CPU's caches before each
    run, one run per sample, as a cold-cache tuning timed its candidates (``tune.COLD_EVALUATOR``):
    a weight is read from memory once per inference, not from the cache."""
    device_type = "cpu" if target.kind.name == "llvm" else target.kind.name
    if cold_cache and device_type != "cpu":
        raise ValueError(f"cold_cache flushes the CPU's caches: for llvm targets, not {target.kind.name}")
    if rpc is None:
        dev = tvm.device(device_type, 0)
        vm = relax.VirtualMachine(ex, dev)
    else:
        session = rpc.connect()
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "kernel.so")
            ex.export_library(path)
            session.upload(path)
        dev = session.device(device_type, 0)
        vm = relax.VirtualMachine(session.load_module("kernel.so"), dev)
    inputs = [tvm.runtime.tensor(a, dev) for a in args]
    vm["main"](*inputs)  # warm-up (first-run allocations, page faults)
    runs = _runs_us(vm, dev, inputs, repeat=repeat, cold_cache=cold_cache, min_repeat_ms=min_repeat_ms)
    return Measurement(float(np.median(runs)), float(np.percentile(runs, 10)), float(np.percentile(runs, 90)), runs)


def _runs_us(runnable, dev, args, *, repeat: int, cold_cache: bool, min_repeat_ms: int) -> list[float]:
    """``repeat`` samples (us) of ``runnable``'s ``main``, one run each: ``cold_cache`` flushes
    every argument but the first before each (``tune.COLD_EVALUATOR``'s way); warm samples
    last at least ``min_repeat_ms``."""
    flush, min_ms = (CACHE_FLUSH, 0) if cold_cache else ("", min_repeat_ms)
    timer = runnable.time_evaluator("main", dev, number=1, repeat=repeat, min_repeat_ms=min_ms, f_preproc=flush)
    return [float(r) * 1e6 for r in timer(*args).results]


def time_best_schedule(
    database,
    kernel: tvm.IRModule,
    target: tvm.target.Target,
    *,
    repeat: int,
    caches: Sequence[str] = ("warm",),
    min_repeat_ms: int = 0,
) -> dict[str, list[float]]:
    """The runs (us) of one tuned kernel (a TIR module, as a tuning task dispatches it) built
    once with ``database``'s best schedule, ``repeat`` samples of one run each per cache state
    in ``caches`` ("warm", "cold": every argument but the first flushed before each run, as
    ``tune.COLD_EVALUATOR`` timed it); warm runs last at least ``min_repeat_ms``.  The scripts
    that set the tuner's records against fresh times share it, so both time a schedule alike."""
    dev = tvm.cpu(0)
    sch = ms.tir_integration.compile_tir(database, kernel, target)
    lib = tvm.compile(sch.mod, target=target)
    args = random_args(ms.arg_info.ArgInfo.from_prim_func(sch.mod["main"]), dev)
    return {
        cache: _runs_us(lib.mod, dev, args, repeat=repeat, cold_cache=cache == "cold", min_repeat_ms=min_repeat_ms)
        for cache in caches
    }


def build_workload(
    w: Workload,
    target: Any,
    *,
    flow: str = "tuned",
    trials: int = 32,
    work_dir: str | None = None,
    rpc: RPCDevice | None = None,
    cold_cache: bool = False,
):
    """``w`` compiled by the deployment flow: ``tuned`` is MetaSchedule with ``trials``
    candidates, records kept in ``work_dir`` (so a kernel is tuned once; ``cold_cache``:
    candidates timed with cold caches, ``tune.tune``); ``default`` is the target's stock
    pipeline (untuned loops on llvm, dlight schedules on CUDA)."""
    if flow not in FLOWS:
        raise ValueError(f"flow must be one of {FLOWS}, got {flow!r}")
    tgt = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    mod = workload_module(w)
    if flow == "tuned":
        if work_dir is None:
            raise ValueError("flow='tuned' needs a work_dir for the MetaSchedule database")
        return build(mod, tgt, tune(mod, tgt, work_dir, trials, rpc=rpc, cold_cache=cold_cache))
    if cold_cache:
        raise ValueError("cold_cache tunes with cold caches: it needs flow='tuned'")
    return build(mod, tgt, None)


def measure(
    w: Workload,
    target: Any,
    *,
    flow: str = "tuned",
    trials: int = 32,
    work_dir: str | None = None,
    rpc: RPCDevice | None = None,
    repeat: int = 30,
) -> Measurement:
    """Build ``w`` with the deployment flow (see ``build_workload``) and time it."""
    use_all_cores()
    tgt = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    ex = build_workload(w, tgt, flow=flow, trials=trials, work_dir=work_dir, rpc=rpc)
    return time_executable(ex, tgt, random_inputs(workload_module(w)["main"]), repeat=repeat, rpc=rpc)


CALIBRATION_SIZES = (4096, 65536)  # elements: small enough to build fast, far enough apart for a slope
# A GPU runs 65,536 elements in one launch's fixed time, so its slope is measured far above that
# (4 MiB and 64 MiB of float32)
CUDA_CALIBRATION_SIZES = (1 << 20, 1 << 24)


def calibration_sizes(target: Any) -> tuple[int, int]:
    """The two tensor sizes ``elementwise_ns`` measures each op at on ``target``."""
    kind = target.kind.name if isinstance(target, tvm.target.Target) else tvm.target.Target(target).kind.name
    return CUDA_CALIBRATION_SIZES if kind == "cuda" else CALIBRATION_SIZES


def elementwise_workloads(
    names: Sequence[str] | None = None, sizes: Sequence[int] = CALIBRATION_SIZES
) -> list[tuple[str, int, Workload]]:
    """``(op, elements, workload)`` for each attribute-free element-wise op (and ``Relu``, the
    copy the others are measured against) at each size: a ``1 x n`` float32 tensor per input."""
    names = list(names or [s.name for s in ops.BY_NAME.values() if s.kind == ops.ELEMWISE and not s.attrs])
    out = []
    for name in dict.fromkeys(["Relu", *names]):
        spec = ops.BY_NAME[name]
        for n in sizes:
            out.append((name, n, Workload(name, (), (TensorTy((1, n), "float32"),) * spec.n_inputs)))
    return out


def elementwise_slopes(times_us: dict[tuple[str, int], float], sizes: Sequence[int]) -> dict[str, float]:
    """ns per element beyond a copy: each op's latency slope between the two sizes (the fixed
    cost of a call cancels) less ``Relu``'s (the memory traffic, which the roofline charges and
    fusion mostly removes), never below zero.  An op timed at one size only is left out."""
    small, large = sizes
    slope = {
        name: (times_us[(name, large)] - times_us[(name, small)]) * 1e3 / (large - small)
        for name in dict.fromkeys(name for name, _ in times_us)
        if (name, small) in times_us and (name, large) in times_us
    }
    if "Relu" not in slope:
        raise ValueError("element-wise calibration needs Relu (the copy) timed at both sizes")
    return {name: max(0.0, s - slope["Relu"]) for name, s in slope.items()}


def elementwise_ns(
    target: Any,
    *,
    flow: str = "tuned",
    trials: int = 8,
    work_dir: str | None = None,
    sizes: Sequence[int] | None = None,
    names: Sequence[str] | None = None,
    repeat: int = 30,
    rpc: RPCDevice | None = None,
) -> dict[str, float]:
    """Compute cost (ns per output element) of each attribute-free element-wise op
    beyond moving its data (``elementwise_slopes``), timed here or behind ``rpc``.
    Fused into a kernel, a tanh still pays its compute per element; the learned cost
    model charges it (``xgb_model.epilogue_us``).  A machine without TVM times the same
    workloads in a bundle (``collect_kernels.py --elementwise --bundle``)."""
    sizes = tuple(sizes or calibration_sizes(target))
    times = {
        (name, n): measure(w, target, flow=flow, trials=trials, work_dir=work_dir, rpc=rpc, repeat=repeat).median_us
        for name, n, w in elementwise_workloads(names, sizes)
    }
    return elementwise_slopes(times, sizes)


def nvcc_compile(ex, target: Any) -> int:
    """Compile the CUDA source of an executable with nvcc (no GPU needed); bytes of fatbin.

    TVM keeps generated CUDA as source until it is loaded on a GPU, so this is the
    check that a GPU-less machine can make that the kernels are valid CUDA."""
    from tvm.support import nvcc

    tgt = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    arch = str(tgt.attrs.get("arch", "sm_90"))
    total = 0
    for code in cuda_sources(ex):
        with tgt:
            total += len(nvcc.compile_cuda(code, target_format="fatbin", arch=arch, compiler="nvcc"))
    return total


def cuda_sources(ex) -> list[str]:
    """The CUDA source of every CUDA module an executable imports (TVM compiles each
    when it is loaded)."""
    out, stack = [], list(ex.mod.imports)
    while stack:
        m = stack.pop()
        stack.extend(m.imports)
        if m.kind == "cuda":
            out.append(m.inspect_source("cuda"))
    return out


# ---------------------------------------------------------------- workloads from graphs


def kernel_workloads(graph) -> list[Workload]:
    """The kernels of a TensorGraph as FuseOps would form them: each KERNEL node with
    the chain of element-wise single-user consumers that follows it."""
    users: dict[int, list[int]] = {}
    for nid in graph.reachable():
        for i in graph.nodes[nid].inputs:
            users.setdefault(i, []).append(nid)
    out = []
    for nid in graph.reachable():
        n = graph.nodes[nid]
        spec = ops.BY_NAME.get(n.op)
        if spec is None or spec.kind != ops.KERNEL or n.is_const:
            continue
        in_tys = tuple(graph.nodes[i].ty for i in n.inputs)
        if not all(isinstance(t, TensorTy) for t in in_tys):
            continue
        epilogue = []
        cur = nid
        consumers = users.get(cur, ())
        if len(consumers) == 1 and graph.nodes[consumers[0]].op == ops.TGET and graph.nodes[consumers[0]].attrs == (0,):
            cur = consumers[0]  # batch norm: its epilogue follows the normalised output
        while len(users.get(cur, ())) == 1:
            nxt = graph.nodes[users[cur][0]]
            nspec = ops.BY_NAME.get(nxt.op)
            if nspec is None or nspec.kind != ops.ELEMWISE or nxt.ty != graph.nodes[cur].ty:
                break
            if nspec.n_inputs == 2:
                other = [i for i in nxt.inputs if i != cur]
                if len(other) != 1 or not isinstance(graph.nodes[other[0]].ty, TensorTy):
                    break
                operand_first = nxt.inputs[0] == other[0]
                epilogue.append(Epilogue(nxt.op, graph.nodes[other[0]].ty.shape, nxt.attrs, operand_first))
            else:
                epilogue.append(Epilogue(nxt.op, None, nxt.attrs))
            cur = users[cur][0]
        out.append(Workload(n.op, n.attrs, in_tys, tuple(epilogue)))
    return out


def module_workloads(mod: tvm.IRModule) -> list[Workload]:
    """The distinct kernels (op + fused epilogue) of a module, in first-seen order."""
    seen: dict[str, Workload] = {}
    for graph in module_graphs(mod):
        for w in kernel_workloads(graph):
            seen.setdefault(w.key(), w)
    return list(seen.values())


def kernel_out_ty(w: Workload):
    """The kernel's own output type (before its epilogue), by Relax's inference on the one-kernel module."""
    first = workload_module(w)["main"].body.blocks[0].bindings[0].var
    return ty_of(first.ty)
