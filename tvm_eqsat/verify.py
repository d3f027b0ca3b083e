"""Numerical equivalence of two Relax modules, checked by running both through TVM."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm
from tvm import relax


@dataclass
class Comparison:
    max_abs_diff: float
    max_rel_diff: float  # relative to the largest magnitude of each reference output
    outputs: int


def random_inputs(func, seed: int = 0) -> list[np.ndarray]:
    """Random arrays matching the function's parameters (small ints for int dtypes)."""
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        ty = p.ty
        shape = tuple(int(d) for d in ty.shape.values)
        dtype = str(ty.dtype)
        if dtype == "bool":
            out.append(rng.integers(0, 2, shape).astype(bool))
        elif "int" in dtype:
            out.append(rng.integers(0, 4, shape).astype(dtype))
        else:
            out.append(rng.standard_normal(shape).astype(dtype))
    return out


def _flatten(value) -> list[np.ndarray]:
    if isinstance(value, (list, tuple)) or type(value).__name__ == "Array":
        return [a for v in value for a in _flatten(v)]
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [np.asarray(value)]


def run(mod: tvm.IRModule, inputs: list[np.ndarray], func: str = "main", target="llvm") -> list[np.ndarray]:
    """Compile with stock TVM and run ``func`` on CPU."""
    ex = tvm.compile(mod, target=tvm.target.Target(target))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    args = [tvm.runtime.tensor(x) for x in inputs]
    return _flatten(vm[func](*args))


def compare(a: tvm.IRModule, b: tvm.IRModule, func: str = "main", seed: int = 0) -> Comparison:
    inputs = random_inputs(a[func], seed)
    ra, rb = run(a, inputs, func), run(b, inputs, func)
    if len(ra) != len(rb):
        raise AssertionError(f"{len(ra)} outputs vs {len(rb)}")
    max_abs = max_rel = 0.0
    for x, y in zip(ra, rb):
        if x.shape != y.shape:
            raise AssertionError(f"output shapes differ: {x.shape} vs {y.shape}")
        diff = float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))) if x.size else 0.0
        scale = float(np.max(np.abs(x.astype(np.float64)))) if x.size else 0.0
        max_abs = max(max_abs, diff)
        max_rel = max(max_rel, diff / scale if scale > 0 else diff)
    return Comparison(max_abs, max_rel, len(ra))


def assert_equivalent(a: tvm.IRModule, b: tvm.IRModule, func: str = "main", rtol: float = 1e-5, seed: int = 0) -> Comparison:
    cmp = compare(a, b, func, seed)
    if cmp.max_rel_diff > rtol:
        raise AssertionError(f"modules differ: max relative diff {cmp.max_rel_diff:.3g} (abs {cmp.max_abs_diff:.3g})")
    return cmp
