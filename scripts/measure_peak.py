"""Tuned GFLOP/s of compute-bound kernels, for generic x86-64 code and for this CPU's.

TVM's plain ``llvm`` target compiles for generic x86-64 (SSE2): the roofline's llvm peak
(``tvm_eqsat.cost.MACHINES``) was calibrated on such code.  With ``-mcpu`` set to the
machine's CPU, MetaSchedule's kernels use its wider vector units, and compute-bound kernels
run several times faster while memory-bound ones barely change, matmuls more than convs and
depthwise convs least.  The roofline's per-kernel peaks (``cost._tuned_llvm_machines``) are,
for generic code, the Xeon's rates over its generic matmuls' (times the machine's peak); for
a CPU measured at its own width (AVX-512, AVX2), its rates themselves (its file of ``cost_models/machines/``), beside
``measure_bandwidth.py``'s memory tiers from the same machine and hour
(``bandwidth-llvm-<cpu>.json``).  Both builds are tuned with the same budget and timed in
one process, on one machine, with nothing else running:

    python scripts/measure_peak.py --trials 32      # benchmarks/results/peak-llvm-<cpu>.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from pathlib import Path

from tqdm import tqdm

from tvm_eqsat import cost, tune
from tvm_eqsat.features import flops
from tvm_eqsat.graph import TensorTy
from tvm_eqsat.measure import kernel_out_ty, measure
from tvm_eqsat.workload import Workload

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import machine_info  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _t(*shape: int) -> TensorTy:
    return TensorTy(tuple(shape), "float32")


# (case, op, attrs, inputs): a square matmul and a ResNet 3x3 conv, compute-bound at any
# vector width; and the kernels a Winograd F(4x4, 3x3) form of that conv runs, which do
# not vectorise alike: its input transform, a depthwise 6x6 stride-4 conv (one channel
# per group), and its batched matmul over channels, one small matmul per tile position
CASES = [
    ("matmul", "Matmul", ("",), (_t(512, 512), _t(512, 512))),
    (
        "conv",
        "Conv2d",
        ((1, 1), (1, 1, 1, 1), (1, 1), 1, "NCHW", "OIHW", "NCHW", "float32"),
        (_t(1, 64, 56, 56), _t(64, 64, 3, 3)),
    ),
    (
        "depthwise",
        "Conv2d",
        ((4, 4), (1, 1, 1, 1), (1, 1), 64, "NCHW", "OIHW", "NCHW", "float32"),
        (_t(1, 64, 56, 56), _t(2304, 1, 6, 6)),
    ),
    ("batch-matmul", "Matmul", ("",), (_t(36, 196, 64), _t(36, 64, 64))),
]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=32, help="MetaSchedule trials per kernel")
    p.add_argument("--mcpu", default="host", help="the CPU to compare with generic x86-64 (default: this one)")
    p.add_argument("--work-dir", default=str(Path.home() / ".cache/tvm_eqsat/ms-peak"))
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--out", default=None, help="default: benchmarks/results/peak-llvm-<cpu>.json")
    args = p.parse_args(argv)
    try:
        host = tune.resolve_mcpu(args.mcpu)
    except ValueError as err:
        p.error(str(err))
    out = Path(args.out or ROOT / "benchmarks" / "results" / f"peak-llvm-{host}.json")
    rows = []
    for mcpu in tqdm(["generic", host], desc="code", unit="target"):
        target = tune.tuning_target(tune.llvm_target(mcpu))
        for case, op, attrs, ins in tqdm(CASES, desc=mcpu, unit="kernel", leave=False):
            w = Workload(op, attrs, ins)
            m = measure(w, target, trials=args.trials, work_dir=f"{args.work_dir}-{mcpu}", repeat=args.repeat)
            work = flops(op, attrs, ins, kernel_out_ty(w))
            rows.append({
                "mcpu": mcpu, "vector_bits": cost.vector_bits(target), "case": case, "op": op,
                "shapes": [list(t.shape) for t in ins], "gflop": round(work / 1e9, 4),
                "median_us": round(m.median_us, 3), "p10_us": round(m.p10_us, 3), "p90_us": round(m.p90_us, 3),
                "gflop_per_s": round(work / m.median_us / 1e3, 1),
            })  # fmt: skip
            tqdm.write(f"{mcpu:>14} {case:12} {rows[-1]['gflop_per_s']:7.1f} GFLOP/s")
    speedups = {
        case: round(
            next(r for r in rows if r["mcpu"] == host and r["case"] == case)["gflop_per_s"]
            / next(r for r in rows if r["mcpu"] == "generic" and r["case"] == case)["gflop_per_s"],
            2,
        )
        for case, *_ in CASES
    }
    result = {
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": shlex.join(["python", "scripts/measure_peak.py", *argv]),
        "machine": machine_info(tune.tuning_target({"kind": "llvm"})),
        "trials": args.trials,
        "rows": rows,
        "speedup_over_generic": speedups,
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{host} over generic x86-64: {speedups} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
