"""What a rule family adds end to end: one model built three ways in one process, stock,
the pass with the default-flow rule set less the family, and the pass with the family
added, timed interleaved (default schedules: no tuning), each output checked against stock's.

    python scripts/family_gain.py resnet50 --family winograd

appends a row to ``benchmarks/results/family-<family>-llvm-default.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import tvm

from tvm_eqsat import optimize, provenance, timing, tune
from tvm_eqsat.models import MODELS, SMALL
from tvm_eqsat.rules import load_library
from tvm_eqsat.transform import default_families

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--family", default="winograd", choices=load_library().families)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--min-ms", type=float, default=200.0)
    args = ap.parse_args()
    model = (SMALL if args.small else MODELS)[args.model]()
    # the default flow's rule set on llvm (its cost model prices layouts), less the family
    base = [f for f in default_families("llvm", "default") if f != args.family]
    row: dict = {"model": model.name, "flow": "default", "family": args.family, "passes": {}}
    mods = {"stock": model.mod}
    for label, rules in (("eqsat", base), (f"eqsat+{args.family}", base + [args.family])):
        t = time.perf_counter()
        new, report = optimize(model.mod, "llvm", flow="default", rules=rules)
        f = report.functions["main"]
        row["passes"][label] = {
            "seconds": round(time.perf_counter() - t, 1),
            "predicted_speedup": f.cost_before / f.cost_after,
            "changes": f.changes,
        }
        print(label, row["passes"][label], file=sys.stderr, flush=True)
        mods[label] = new
    dev, samplers, outs = tvm.cpu(), {}, {}
    for label, mod in mods.items():
        vm, vm_args, samplers[label], _ = timing.tvm_sampler(
            tune.build(mod, "llvm", None), dev, model.inputs, args.min_ms
        )
        out = vm["main"](*vm_args)
        outs[label] = (out if hasattr(out, "numpy") else out[0]).numpy()
    ref = outs["stock"]
    row["max_rel_diff"] = {k: float(np.abs(v - ref).max() / max(np.abs(ref).max(), 1e-30)) for k, v in outs.items()}
    times = timing.time_interleaved(samplers, args.repeat)
    row["ms"] = {k: float(np.median(v)) for k, v in times.items()}
    row["p10_p90_ms"] = {k: [float(np.percentile(v, 10)), float(np.percentile(v, 90))] for k, v in times.items()}
    row["speedup_vs_stock"] = {k: row["ms"]["stock"] / v for k, v in row["ms"].items()}
    row["machine"] = provenance.machine()
    row["command"] = "python " + " ".join(sys.argv)
    print(json.dumps(row, indent=1))
    path = ROOT / "benchmarks" / "results" / f"family-{args.family}-llvm-default.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    path.write_text(json.dumps([*rows, row], indent=1) + "\n")


if __name__ == "__main__":
    main()
