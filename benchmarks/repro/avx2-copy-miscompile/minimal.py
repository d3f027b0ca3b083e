"""The smallest form of the miscompile in ``repro.py``: LLVM's loop vectorizer, not TVM's.

A (1, 192, 8, 8) tensor unblocked from NCHW16c and biased, concatenated on channels with a
(1, 16, 8, 8) one, and blocked again (a copy the ``nchwc`` family's layout boundaries become
once FuseOps fuses them), with every block inlined and the loops fused and split by 64.
Built for AVX2 (``x86-64-v3``) it computes garbage; for generic x86-64, for AVX2 with LLVM's
loop vectorizer off (``cl-opt=-vectorize-loops=false``) or at LLVM opt level 1 it is right.
The sizes matter erratically: with 64 or 512 channels unblocked the same kernel is right
(2026-12-07, TVM 0.27.0.post1, its LLVM 22).
Not reported upstream yet (no GitHub access from where it was found).  An open LLVM report of a
vectorized copy loop miscompiled for some ``target-cpu`` values in LLVM 21 and 22
(llvm/llvm-project#186922, znver4) may be the same bug; not checked.

    python benchmarks/repro/avx2-copy-miscompile/minimal.py     # on a CPU with AVX2
"""

import numpy as np
import tvm
from repro import fused_and_split  # this folder's: python puts it on the path
from tvm import te, topi


def kernel(unblocked: int, plain: int) -> tuple[tvm.IRModule, list[list[int]]]:
    """The copy kernel, unscheduled, and its buffers' shapes (the output last)."""
    x = te.placeholder((1, unblocked // 16, 8, 8, 16), name="x")  # NCHW16c
    bias = te.placeholder((1, unblocked, 1, 1), name="bias")
    y = te.placeholder((1, plain, 8, 8), name="y")
    z = topi.add(topi.reshape(topi.transpose(x, (0, 1, 4, 2, 3)), (1, unblocked, 8, 8)), bias)
    cat = topi.concatenate([z, y], axis=1)
    c = unblocked + plain
    out = topi.transpose(topi.reshape(cat, (1, c // 16, 16, 8, 8)), (0, 1, 3, 4, 2))
    tensors = [x, bias, y, out]
    return tvm.IRModule({"main": te.create_prim_func(tensors)}), [[int(d) for d in t.shape] for t in tensors]


def run(mod: tvm.IRModule, shapes: list[list[int]], target: dict) -> np.ndarray:
    rng = np.random.default_rng(0)
    buffers = [tvm.runtime.tensor(rng.standard_normal(s).astype("float32"), tvm.cpu()) for s in shapes]
    tvm.compile(mod, target=tvm.target.Target(target))(*buffers)
    return buffers[-1].numpy()


TARGETS = {
    "generic x86-64": {"kind": "llvm"},
    "AVX2 (x86-64-v3)": {"kind": "llvm", "mcpu": "x86-64-v3"},
    "AVX2, no loop vectorizer": {"kind": "llvm", "mcpu": "x86-64-v3", "cl-opt": ["-vectorize-loops=false"]},
}
for unblocked in (192, 64):
    mod, shapes = kernel(unblocked, 16)
    reference = run(mod, shapes, {"kind": "llvm"})
    for name, target in TARGETS.items():
        out = run(fused_and_split(mod), shapes, target)
        diff = np.abs(out - reference).max() / np.abs(reference).max()
        print(f"{unblocked} channels unblocked, {name:26s} max relative difference {diff:.3g}")
