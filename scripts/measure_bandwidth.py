"""Effective memory bandwidth of TVM-built GEMVs, concats and transposes by traffic size.

The roofline cost model (``tvm_eqsat.cost.MACHINES``) prices a memory-bound kernel by
the bytes it moves.  A batch-1 matmul (``1 x k @ k x n``) is all weight traffic, and in
a model that runs again and again its weights stay in L2/L3: one DRAM bandwidth for all
of them under-prices big merged GEMVs against the kernel launches they save.  This
script measures what a kernel of each size really streams at, with the same build flow
as the pass targets, and writes one row per kernel:

    python scripts/measure_bandwidth.py --flow tuned --trials 8

The committed ``benchmarks/results/bandwidth-llvm.json`` is the source of the
``("llvm", "tuned")`` machine's two tiers, ``bandwidth-llvm-permute.json`` (``--ops Permute
--trials 32``) of its transpose bandwidth.  ``bandwidth-llvm-emeraldrapids.json``
(``--target '{"kind": "llvm", "mcpu": "emeraldrapids"}' --work-dir ~/.cache/tvm_eqsat/ms-bandwidth-emeraldrapids``,
on the Xeon VM) is the source of the AVX-512 machine's (``cost._tuned_llvm_machines``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

import tvm
from tqdm import tqdm

from tvm_eqsat.features import nbytes
from tvm_eqsat.graph import TensorTy
from tvm_eqsat.measure import kernel_out_ty, measure
from tvm_eqsat.workload import Workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import machine_info  # noqa: E402


def _t(*shape: int) -> TensorTy:
    return TensorTy(tuple(shape), "float32")


# GEMVs from 16 KB to 32 MB of weights (past this VM's 32 MB L3), a batch-2 pair, and concats
CASES = [
    ("Matmul", ("",), (_t(1, 64), _t(64, 64))),
    ("Matmul", ("",), (_t(1, 64), _t(64, 256))),
    ("Matmul", ("",), (_t(1, 64), _t(64, 512))),
    ("Matmul", ("",), (_t(2, 64), _t(64, 512))),
    ("Matmul", ("",), (_t(1, 256), _t(256, 512))),
    ("Matmul", ("",), (_t(1, 512), _t(512, 1024))),
    ("Matmul", ("",), (_t(1, 512), _t(512, 4096))),
    ("Matmul", ("",), (_t(2, 512), _t(512, 4096))),
    ("Matmul", ("",), (_t(1, 1024), _t(1024, 8192))),
    ("Concat", (0,), (_t(1, 64), _t(1, 64))),
    ("Concat", (0,), (_t(1, 512), _t(1, 512))),
    ("Concat", (0,), (_t(256, 512), _t(256, 512))),
    # transposes the rules create: a Winograd conv's tiles laid out for its batched matmul
    # (the four layers of ResNet-50), an NCHW <-> NHWC region boundary, a matrix transpose
    ("Permute", ((2, 1, 0, 3),), (_t(1, 64, 16, 784),)),
    ("Permute", ((2, 1, 0, 3),), (_t(1, 128, 16, 196),)),
    ("Permute", ((2, 1, 0, 3),), (_t(1, 256, 16, 49),)),
    ("Permute", ((2, 1, 0, 3),), (_t(1, 512, 16, 16),)),
    ("Permute", ((0, 2, 3, 1),), (_t(1, 64, 56, 56),)),
    ("Permute", ((0, 3, 1, 2),), (_t(1, 14, 14, 256),)),
    ("Permute", ((1, 0),), (_t(768, 3072),)),
]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", default="llvm")
    p.add_argument("--flow", choices=("tuned", "default"), default="tuned")
    p.add_argument("--trials", type=int, default=8, help="MetaSchedule trials per kernel (tuned flow)")
    p.add_argument(
        "--work-dir",
        default=str(Path.home() / ".cache/tvm_eqsat/ms-bandwidth"),
        help="MetaSchedule database, so re-runs only re-time",
    )
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--ops", nargs="+", default=None, help="only these ops' cases (e.g. Permute)")
    p.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/bandwidth-<target>.json")
    args = p.parse_args(argv)
    target = tvm.target.Target(args.target)
    out = args.out or Path(__file__).resolve().parent.parent / f"benchmarks/results/bandwidth-{target.kind.name}.json"

    rows = []
    cases = [c for c in CASES if args.ops is None or c[0] in args.ops]
    for op, attrs, ins in tqdm(cases, unit="kernel"):
        w = Workload(op, attrs, ins)
        m = measure(w, target, flow=args.flow, trials=args.trials, work_dir=args.work_dir, repeat=args.repeat)
        traffic = nbytes(kernel_out_ty(w)) + sum(nbytes(t) for t in ins)
        rows.append(
            {
                "op": op,
                "shapes": [list(t.shape) for t in ins],
                "bytes": traffic,
                "median_us": round(m.median_us, 3),
                "p10_us": round(m.p10_us, 3),
                "p90_us": round(m.p90_us, 3),
                "gb_per_s": round(traffic / m.median_us / 1e3, 1),
            }
        )
        tqdm.write(
            f"{op:7s} {str([list(t.shape) for t in ins]):28s} {traffic / 1024:8.0f} KB "
            f"{m.median_us:9.2f} us  {rows[-1]['gb_per_s']:6.1f} GB/s"
        )
    out.write_text(
        json.dumps(
            {
                "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "command": shlex.join(["python", "scripts/measure_bandwidth.py", *argv]),
                "target": str(target),
                "flow": args.flow,
                "trials": args.trials,
                "tvm": tvm.__version__,
                "machine": machine_info(target),
                "rows": rows,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
