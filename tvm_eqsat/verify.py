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
    return executable_outputs(tvm.compile(mod, target=tvm.target.Target(target)), inputs, func=func)


def executable_outputs(ex, inputs: list[np.ndarray], dev=None, func: str = "main") -> list[np.ndarray]:
    """The outputs of ``func`` of a built executable on ``inputs``, flattened, on ``dev`` (CPU)."""
    dev = tvm.cpu() if dev is None else dev
    return _flatten(relax.VirtualMachine(ex, dev)[func](*[tvm.runtime.tensor(x, dev) for x in inputs]))


# A build whose outputs differ from the reference's by more than this share of their scale is
# wrong, not rounded: the 1,035 outputs the results files recorded up to 2026-12-06 (Winograd
# F(4x4) among them) differed by 1.9e-5 at most, while a tuned build whose NCHW16c layout copy
# LLVM's loop vectorizer miscompiled once MetaSchedule had fused its loops differed by 2e24
# (Inception-v3, AVX2 code; benchmarks/repro/avx2-copy-miscompile)
WRONG_REL = 1e-3


def wrong_outputs(max_rel: dict[str, float]) -> list[str]:
    """The builds of ``max_rel`` (name -> ``output_diffs``' relative difference) whose outputs
    are wrong (over ``WRONG_REL``, or NaN): a benchmark must not time them as if they were right."""
    return [name for name, rel in max_rel.items() if not rel <= WRONG_REL]


def wrong_builds_message(max_rel: dict[str, float], reference: str) -> str | None:
    """The failure a benchmark script ends with when some of ``max_rel``'s builds are wrong
    (``wrong_outputs``), after it has written its rows; None when all are right."""
    wrong = wrong_outputs(max_rel)
    if not wrong:
        return None
    diffs = ", ".join(format(max_rel[k], ".2g") for k in wrong)
    return (
        f"FAILED: the outputs of {', '.join(wrong)} differ from {reference}'s by over {WRONG_REL:g} of their "
        f"scale ({diffs}): a wrong build, not a speedup"
    )


def wrong_builds_status(max_rel: dict[str, float], reference: str) -> int:
    """A benchmark script's exit status once its rows are written: 0 when every build of
    ``max_rel`` is right, else 1, the failure printed (``wrong_builds_message``)."""
    failed = wrong_builds_message(max_rel, reference)
    if failed:
        print(failed)
    return 1 if failed else 0


def output_diffs(ref: list[np.ndarray], got: list[np.ndarray]) -> tuple[float, float]:
    """(max abs diff, max relative diff): each output's error relative to its largest magnitude
    (random weights can make activations huge; element-wise relative error is meaningless).
    ValueError when the outputs' number or shapes differ."""
    if len(ref) != len(got):
        raise ValueError(f"{len(got)} outputs, the reference has {len(ref)}")
    max_abs = max_rel = 0.0
    for a, b in zip(ref, got):
        if a.shape != b.shape:
            raise ValueError(f"output shape {b.shape}, the reference has {a.shape}")
        if not a.size:
            continue
        a64, b64 = a.astype(np.float64), b.astype(np.float64)
        diff = float(np.max(np.abs(a64 - b64)))
        scale = float(np.max(np.abs(a64)))
        max_abs = max(max_abs, diff)
        max_rel = max(max_rel, diff / scale if scale > 0 else diff)
    return max_abs, max_rel


def compare(a: tvm.IRModule, b: tvm.IRModule, func: str = "main", seed: int = 0) -> Comparison:
    inputs = random_inputs(a[func], seed)
    ra, rb = run(a, inputs, func), run(b, inputs, func)
    try:
        max_abs, max_rel = output_diffs(ra, rb)
    except ValueError as err:
        raise AssertionError(str(err)) from err
    return Comparison(max_abs, max_rel, len(ra))


def assert_equivalent(
    a: tvm.IRModule, b: tvm.IRModule, func: str = "main", rtol: float = 1e-5, seed: int = 0
) -> Comparison:
    cmp = compare(a, b, func, seed)
    if cmp.max_rel_diff > rtol:
        raise AssertionError(f"modules differ: max relative diff {cmp.max_rel_diff:.3g} (abs {cmp.max_abs_diff:.3g})")
    return cmp
