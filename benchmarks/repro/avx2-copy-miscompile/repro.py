"""A kernel TVM 0.27 miscompiles in AVX2 code once MetaSchedule has fused and split its loops.

``kernel.tvmscript`` is one of Inception-v3's NCHW16c layout copies (Zen 3, the ``nchwc`` family,
2026-12-06): four NCHW16c branches and Winograd F(2, 7) tiles turned back to NCHW, biased,
relu'd, concatenated on channels and blocked again, as FuseOps fused them.  Every one of
the three schedules MetaSchedule measured for it (all its loops' bodies inlined, the loops
fused and split by 64, parallel and vectorized) computes garbage in AVX2 code; built for
generic x86-64, or unscheduled, it is right.  The last two steps are not needed: the inlined
kernel, fused and split, already differs.  It is LLVM's loop vectorizer (TVM 0.27's LLVM 22):
with ``cl-opt=-vectorize-loops=false`` the AVX2 build is right (``minimal.py``: a smaller form).

    python benchmarks/repro/avx2-copy-miscompile/repro.py     # on a CPU with AVX2
"""

from pathlib import Path

import numpy as np
import tvm
from tvm.s_tir import Schedule
from tvm.s_tir import meta_schedule as ms


def run(mod, target, inputs: list[np.ndarray]) -> np.ndarray:
    buffers = [tvm.runtime.tensor(x.copy(), tvm.cpu()) for x in inputs]
    tvm.compile(mod, target=target)(*buffers)
    return buffers[-1].numpy()


def fused_and_split(mod):
    """Every block inlined into the last, its loops fused and split by 64 (as MetaSchedule's
    schedules of the kernel did)."""
    sch = Schedule(mod)
    root = sch.get_sblock("root")
    for block in list(sch.get_child_blocks(root))[:-1][::-1]:
        sch.compute_inline(block)
    (block,) = sch.get_child_blocks(root)
    sch.split(sch.fuse(*sch.get_loops(block)), factors=[None, 64])
    return sch.mod


TARGETS = {
    "generic": {"kind": "llvm"},
    "x86-64-v3": {"kind": "llvm", "mcpu": "x86-64-v3"},
    "znver3": {"kind": "llvm", "mcpu": "znver3"},
    "v3, no loop vectorizer": {"kind": "llvm", "mcpu": "x86-64-v3", "cl-opt": ["-vectorize-loops=false"]},
}


def main() -> None:
    kernel = tvm.script.from_source((Path(__file__).parent / "kernel.tvmscript").read_text())
    rng = np.random.default_rng(0)
    inputs = [
        rng.standard_normal([int(d) for d in a.shape]).astype("float32")
        for a in ms.arg_info.ArgInfo.from_prim_func(kernel["main"])
    ]
    reference = run(kernel, tvm.target.Target("llvm"), inputs)
    for name, config in TARGETS.items():
        target = tvm.target.Target(config)
        for label, mod in (("unscheduled", kernel), ("inlined, fused, split", fused_and_split(kernel))):
            out = run(mod, target, inputs)
            diff = np.abs(out - reference).max() / np.abs(reference).max()
            print(f"{name:22s} {label:22s} max relative difference {diff:.3g}")


if __name__ == "__main__":
    main()
