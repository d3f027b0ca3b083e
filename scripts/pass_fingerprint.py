"""What the pass returns on the benchmark models, as fingerprints: a refactor's proof.

For each model, flow and search, runs the pass (ILP extraction by default, node and
iteration limits, a time limit far above what a small model needs, so the result does
not depend on the machine's speed) and records the predicted costs before and after, the rules that
fired and the structural hash of the module it returned.  Two runs compared with
``--compare`` say whether a change altered anything the pass decides.

    python scripts/pass_fingerprint.py --small --out /tmp/before.json
    python scripts/pass_fingerprint.py --small --out /tmp/after.json --compare /tmp/before.json
    python scripts/pass_fingerprint.py --extractor dag_greedy --configs tuned/saturate default/saturate --out F
    python scripts/pass_fingerprint.py --target cuda --configs default/saturate --out F   # no GPU needed
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

import tvm_ffi

import tvm_eqsat
from tvm_eqsat import models, provenance

CONFIGS = (("tuned", "saturate"), ("default", "saturate"), ("tuned", "mcts"), ("default", "mcts"))


def fingerprint(
    model: models.Model,
    flow: str,
    search: str,
    time_limit_s: float,
    extractor: str = "ilp",
    node_limit: int = 20_000,
    target: str = "llvm",
) -> dict:
    """The pass's decisions on one model, without timings."""
    new_mod, report = tvm_eqsat.optimize(
        model.mod, target, flow=flow, search=search, time_limit_s=time_limit_s, extractor=extractor,
        node_limit=node_limit,
    )  # fmt: skip
    functions = {
        f.name: {
            "changed": f.changed,
            "cost_before": round(f.cost_before, 6),
            "cost_after": round(f.cost_after, 6),
            "rules_applied": dict(sorted(f.rules_applied.items())),
            "alarms": f.alarms,
            "stop_reason": f.stop_reason,  # a search cut by the clock is not deterministic
        }
        for f in report.functions.values()
    }
    return {
        "module_hash": f"{tvm_ffi.structural_hash(new_mod, map_free_vars=True) & 0xFFFFFFFFFFFFFFFF:016x}",
        "cost_model": report.cost_model,
        "functions": functions,
    }


def compare(old: dict, new: dict) -> list[str]:
    """The keys whose decisions differ (seconds and provenance aside)."""
    diffs = []
    for key in sorted(set(old["runs"]) | set(new["runs"])):
        a, b = old["runs"].get(key), new["runs"].get(key)
        if a is None or b is None:
            diffs.append(f"{key}: only in {'new' if a is None else 'old'}")
            continue
        for field in ("module_hash", "cost_model", "functions"):
            if a[field] != b[field]:
                diffs.append(f"{key}: {field} differs")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="the reduced models (default: full size)")
    ap.add_argument("--models", nargs="*", default=list(models.SUITE))
    ap.add_argument(
        "--configs",
        nargs="*",
        default=[f"{f}/{s}" for f, s in CONFIGS],
        help="flow/search pairs (default: both flows, saturation and MCTS)",
    )
    ap.add_argument("--time-limit", type=float, default=3600.0)
    ap.add_argument("--node-limit", type=int, default=20_000, help="tight limits make MCTS search instead of saturate")
    ap.add_argument(
        "--extractor",
        default="ilp",
        help="ilp (the default); dag_greedy for models whose ILP would not finish by proof",
    )
    ap.add_argument("--target", default="llvm", help="the target the pass optimises for (llvm, cuda)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare", help="an earlier run's JSON: exit 1 if any decision differs")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    builders = models.SMALL if args.small else models.MODELS
    runs = {}
    for name in args.models:
        model = builders[name]()
        for config in args.configs:
            flow, search = config.split("/")
            start = time.perf_counter()
            runs[f"{name}/{config}"] = fp = fingerprint(
                model, flow, search, args.time_limit, args.extractor, args.node_limit, args.target
            )
            fp["seconds"] = round(time.perf_counter() - start, 2)
            print(f"{name:14s} {config:18s} {fp['module_hash']:>22s} {fp['seconds']:7.1f} s", flush=True)
    out = {
        "provenance": provenance.record(),
        "small": args.small,
        "target": args.target,
        "extractor": args.extractor,
        "node_limit": args.node_limit,
        "runs": runs,
    }
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    if args.compare:
        with open(args.compare) as f:
            diffs = compare(json.load(f), out)
        print("\n".join(diffs) if diffs else f"identical to {args.compare}: {len(runs)} runs")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
