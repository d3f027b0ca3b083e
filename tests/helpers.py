"""Shared helpers: small Relax modules built with the BlockBuilder, and checks."""

from __future__ import annotations

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
