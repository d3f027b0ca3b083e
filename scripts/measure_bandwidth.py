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

``--cold-cache`` tunes with cold caches (its own database) and times each kernel alone after
evicting the caches (``timing.kernel_times``), as a kernel runs inside a model whose other
kernels pushed its data out; ``--ops Permute Reshape --cold-cache`` gives the transposes and
reshapes the rules create, the source of the roofline's gather rate (``cost.GATHER_NS``):
``bandwidth-llvm-znver5-cold-layout.json``.
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

from tvm_eqsat import timing
from tvm_eqsat.features import nbytes
from tvm_eqsat.graph import TensorTy
from tvm_eqsat.measure import build_workload, kernel_out_ty, measure, random_inputs, workload_module
from tvm_eqsat.tune import use_all_cores
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
    # Winograd F(4x4, 3x3) tiles, NCHW: the input transform's (1, C, 36, th, tw) laid out as
    # (36, 1, th, tw, C) for the batched matmul, and its output (4, 4, 1, th, tw, C) back to
    # (1, C, th, 4, tw, 4); at SqueezeNet's and ResNet-50's shapes
    ("Permute", ((2, 0, 3, 4, 1),), (_t(1, 16, 36, 14, 14),)),
    ("Permute", ((2, 0, 3, 4, 1),), (_t(1, 32, 36, 7, 7),)),
    ("Permute", ((2, 0, 3, 4, 1),), (_t(1, 64, 36, 4, 4),)),
    ("Permute", ((2, 0, 3, 4, 1),), (_t(1, 64, 36, 14, 14),)),
    ("Permute", ((2, 0, 3, 4, 1),), (_t(1, 128, 36, 7, 7),)),
    ("Permute", ((2, 0, 3, 4, 1),), (_t(1, 512, 36, 2, 2),)),
    ("Permute", ((2, 5, 3, 0, 4, 1),), (_t(4, 4, 1, 14, 14, 64),)),
    ("Permute", ((2, 5, 3, 0, 4, 1),), (_t(4, 4, 1, 7, 7, 128),)),
    ("Permute", ((2, 5, 3, 0, 4, 1),), (_t(4, 4, 1, 4, 4, 256),)),
    ("Permute", ((2, 5, 3, 0, 4, 1),), (_t(4, 4, 1, 2, 2, 512),)),
    # NCHW <-> NHWC boundaries at more shapes, and a permute that keeps the innermost axis
    ("Permute", ((0, 2, 3, 1),), (_t(1, 256, 56, 56),)),
    ("Permute", ((0, 2, 3, 1),), (_t(1, 1024, 14, 14),)),
    ("Permute", ((0, 3, 1, 2),), (_t(1, 56, 56, 64),)),
    ("Permute", ((0, 3, 1, 2),), (_t(1, 28, 28, 512),)),
    ("Permute", ((0, 2, 1, 3),), (_t(1, 128, 12, 64),)),
    # reshapes between two kernels (a tuned build copies them, a view elsewhere)
    ("Reshape", ((36, 12544),), (_t(36, 196, 64),)),
    ("Reshape", ((1, 1000),), (_t(1, 1000, 1, 1),)),
]


def kernel_us(ex, w: Workload, repeat: int, cold: bool) -> tuple[list[float], dict[str, float]]:
    """Three medians (of ``repeat // 3`` runs each) of the kernels' time per run (``cold``:
    each run after evicting the caches), and the kernels it was spent in (VM builtins apart)."""
    inputs = random_inputs(workload_module(w)["main"])
    medians, kernels = [], {}
    for _ in range(3):
        times = timing.kernel_times({"k": ex}, tvm.cpu(), inputs, rounds=max(1, repeat // 3), runs=1, cold=cold)
        kernels = {k: round(us, 3) for k, us in times["k"].items() if not k.startswith("vm.builtin")}
        medians.append(sum(kernels.values()))
    return sorted(medians), kernels


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
    p.add_argument(
        "--cold-cache",
        action="store_true",
        help="tune and time with cold caches (tuned flow; the work dir gets a -cold suffix)",
    )
    p.add_argument("--out", type=Path, default=None, help="default: benchmarks/results/bandwidth-<target>.json")
    args = p.parse_args(argv)
    if args.cold_cache and args.flow != "tuned":
        p.error("--cold-cache is for the tuned flow (default schedules are not tuned)")
    if args.cold_cache and not args.work_dir.endswith("-cold"):
        args.work_dir += "-cold"  # MetaSchedule records of warm and cold timing never share a database
    target = tvm.target.Target(args.target)
    out = args.out or Path(__file__).resolve().parent.parent / f"benchmarks/results/bandwidth-{target.kind.name}.json"

    use_all_cores()
    rows = []
    cases = [c for c in CASES if args.ops is None or c[0] in args.ops]
    for op, attrs, ins in tqdm(cases, unit="kernel"):
        w = Workload(op, attrs, ins)
        traffic = nbytes(kernel_out_ty(w)) + sum(nbytes(t) for t in ins)
        row = {"op": op, "attrs": list(attrs[0]) if op in ("Permute", "Reshape") else None}
        row["shapes"] = [list(t.shape) for t in ins]
        if args.cold_cache:
            ex = build_workload(w, target, trials=args.trials, work_dir=args.work_dir, cold_cache=True)
            (lo, median, hi), kernels = kernel_us(ex, w, args.repeat, cold=True)
            row.update(bytes=traffic, median_us=round(median, 3), p10_us=round(lo, 3), p90_us=round(hi, 3))
            row["kernels"] = kernels
            row["warm_us"] = round(kernel_us(ex, w, args.repeat, cold=False)[0][1], 3)  # run back to back
        else:
            m = measure(w, target, flow=args.flow, trials=args.trials, work_dir=args.work_dir, repeat=args.repeat)
            row.update(bytes=traffic, median_us=round(m.median_us, 3), p10_us=round(m.p10_us, 3))
            row["p90_us"] = round(m.p90_us, 3)
        row["gb_per_s"] = round(traffic / max(row["median_us"], 1e-3) / 1e3, 1)
        rows.append(row)
        tqdm.write(
            f"{op:7s} {str([list(t.shape) for t in ins]):28s} {traffic / 1024:8.0f} KB "
            f"{row['median_us']:9.2f} us  {rows[-1]['gb_per_s']:6.1f} GB/s"
        )
    out.write_text(
        json.dumps(
            {
                "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
                "command": shlex.join(["python", "scripts/measure_bandwidth.py", *argv]),
                "target": str(target),
                "flow": args.flow,
                "trials": args.trials,
                "cpu_cache": "cold" if args.cold_cache else "warm",
                "spread": "p10_us/p90_us: the lowest and highest of three medians"
                if args.cold_cache
                else "p10_us/p90_us: percentiles of the runs",
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
