"""Calibrate the tuned llvm roofline to this CPU, so the pass prices it as itself.

Runs ``measure_peak.py`` (tuned compute peaks of a matmul, a batched matmul, a dense and a
depthwise conv, for generic x86-64 code and for this CPU's) and ``measure_bandwidth.py`` (tuned
GEMVs of growing size, this CPU's code), then writes their calibration
(``tvm_eqsat.calibration.derive``) to ``cost_models/machines/<cpu>.json``, where the roofline
reads it for targets with that ``-mcpu``.  About 25 minutes on a 2-core VM; run it with
nothing else on the machine, since what it times is what the pass will believe:

    python scripts/calibrate_cpu.py                                   # this CPU
    python scripts/calibrate_cpu.py --from-results benchmarks/results/peak-llvm-znver3.json \\
        benchmarks/results/bandwidth-llvm-znver3.json                # from earlier measurements
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import measure_bandwidth  # noqa: E402
import measure_peak  # noqa: E402

from tvm_eqsat import calibration, cost, tune  # noqa: E402
from tvm_eqsat.paths import data_dir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mcpu", default="host", help="the CPU to calibrate (default: this one, as LLVM names it)")
    p.add_argument("--trials", type=int, default=32, help="MetaSchedule trials per compute kernel (the peaks)")
    p.add_argument(
        "--from-results",
        nargs=2,
        type=Path,
        metavar=("PEAK", "BANDWIDTH"),
        help="derive from these measure_peak.py and measure_bandwidth.py results instead of measuring",
    )
    p.add_argument("--out", type=Path, default=None, help="default: cost_models/machines/<cpu>.json")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    if args.from_results:
        peak_path, bandwidth_path = args.from_results
    else:
        try:
            cpu = tune.resolve_mcpu(args.mcpu)
        except ValueError as err:
            p.error(str(err))
        if cpu == "generic":
            p.error("generic x86-64 code is priced by the generic machine; name a CPU")
        peak_path, bandwidth_path = RESULTS / f"peak-llvm-{cpu}.json", RESULTS / f"bandwidth-llvm-{cpu}.json"
        measure_peak.main(["--mcpu", cpu, "--trials", str(args.trials), "--out", str(peak_path)])
        target = json.dumps({"kind": "llvm", "mcpu": cpu})
        work_dir = Path.home() / ".cache" / "tvm_eqsat" / f"ms-bandwidth-{cpu}"
        measure_bandwidth.main(["--target", target, "--work-dir", str(work_dir), "--out", str(bandwidth_path)])
    doc = calibration.derive(json.loads(peak_path.read_text()), json.loads(bandwidth_path.read_text()))
    doc["sources"] = [str(p.resolve().relative_to(ROOT)) if p.resolve().is_relative_to(ROOT) else str(p) for p in
                      (peak_path, bandwidth_path)]  # fmt: skip
    expected_bits = cost.cpu_vector_bits(doc["mcpu"])
    if doc["vector_bits"] != expected_bits:
        p.error(f"{doc['mcpu']}'s code uses {expected_bits}-bit vectors; the results say {doc['vector_bits']}")
    out = args.out or data_dir("cost_models") / "machines" / f"{doc['mcpu']}.json"
    if out.is_file():  # the figures measured apart (a strided conv's share) stay
        doc = calibration.kept_figures(json.loads(out.read_text()), doc)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    calibration.load.cache_clear()  # this process prices with it from now on too
    peaks = ", ".join(f"{c} {v:g}" for c, v in doc["peak_gflops"].items())
    memory = ", ".join(f"{k} {v:g}" for k, v in doc["memory"].items())
    print(f"{doc['mcpu']} ({doc['vector_bits']}-bit code): GFLOP/s {peaks}; GB/s {memory} -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
