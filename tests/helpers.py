"""Shared helpers: small Relax modules built with the BlockBuilder, and checks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from tvm_eqsat import graph, ops, verify


def tensor(name: str, shape, dtype: str = "float32"):
    return relax.Var(name, relax.TensorType(tuple(shape), dtype))


def const(shape, dtype: str = "float32", seed: int = 0):
    rng = np.random.default_rng(seed)
    if "int" in dtype:
        return relax.const(rng.integers(0, 3, shape).astype(dtype))
    return relax.const(rng.standard_normal(shape).astype(dtype))


def module(params, body, name: str = "main") -> tvm.IRModule:
    """A one-function module: ``body(*params)`` emits into a dataflow block and returns outputs."""
    bb = relax.BlockBuilder()
    with bb.function(name, params):
        with bb.dataflow():
            out = body(bb, *params)
            gv = bb.emit_output(out)
        bb.emit_func_output(gv)
    return bb.get()


def native_ops(mod: tvm.IRModule, func: str = "main") -> dict[str, int]:
    counts: dict[str, int] = {}
    for block in mod[func].body.blocks:
        if isinstance(block, relax.DataflowBlock):
            for k, v in graph.graph_from_block(block).op_counts().items():
                counts[k] = counts.get(k, 0) + v
    return counts


def relax_ops(mod: tvm.IRModule, func: str = "main") -> dict[str, int]:
    counts: dict[str, int] = {}
    for block in mod[func].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
                counts[v.op.name] = counts.get(v.op.name, 0) + 1
    return counts


def assert_close(a: tvm.IRModule, b: tvm.IRModule, func: str = "main", rtol: float = 1e-5):
    return verify.assert_equivalent(a, b, func, rtol=rtol)


__all__ = ["tensor", "const", "module", "native_ops", "relax_ops", "assert_close", "ops"]


def rewritten_variant(mod: tvm.IRModule, rules, func: str = "main"):
    """The term of ``func``'s first block using the most rewritten nodes (``forms.
    rewritten_form``): rebuilt as Relax, it must compute what the original computes, a
    check of the rules' right-hand sides that does not depend on a cost model choosing
    them.  Returns (new module, rules applied, whether the graph changed)."""
    from tvm_eqsat.forms import rewritten_form

    return rewritten_form(mod, rules, func)


def load_script(name: str):
    """``scripts/<name>.py`` imported as a module (the scripts are not a package)."""
    path = Path(__file__).resolve().parent.parent / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"{name}_script", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def global_pool(name: str) -> tvm.IRModule:
    """A global average pool whose input is ``name``: legalization names its reduction block
    ``<name>_red``, so two names make two kernels equal but for their block names."""
    x = tensor(name, (1, 64, 8, 8))
    return module([x], lambda bb, x: relax.op.mean(x, axis=[2, 3], keepdims=True))


def global_pool_kernel(name: str) -> tvm.IRModule:
    """The fused TIR kernel that ``global_pool(name)`` is tuned and built as."""
    from tvm_eqsat import batch_tune

    (task,) = batch_tune.extract_tasks([global_pool(name)], "llvm")
    return task.dispatched[0]
