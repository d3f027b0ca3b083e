"""What translation validation adds to the pass: for each model of the suite, the pass
time with ``validate=True`` (the default), the share spent validating, and how many
checkpoints (rewritten nodes compared with the original node of their e-class) it compared.

    python scripts/validation_cost.py --small               # the ten small models
    python scripts/validation_cost.py --models resnet50 vgg19

Writes ``benchmarks/results/validation-llvm[-small].md`` (and a JSON sidecar).  The
pass runs once per model and flow; the validation share is measured inside that run
(``report.functions[...].seconds["validate"]`` over ``seconds["total"]``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def measure(name: str, small: bool, flow: str) -> dict:
    import tvm_eqsat
    from tvm_eqsat import models

    model = models.SMALL[name]() if small else models.MODELS[name]()
    t = time.perf_counter()
    _, report = tvm_eqsat.optimize(model.mod, "llvm", flow=flow)
    wall = time.perf_counter() - t
    fns = report.functions.values()
    total = sum(f.seconds.get("total", 0.0) for f in fns)
    validate = sum(f.seconds.get("validate", 0.0) for f in fns)
    return {
        "model": name,
        "flow": flow,
        "changed": any(f.changed for f in fns),
        "pass_s": round(wall, 3),
        "validate_s": round(validate, 3),
        "share": round(validate / (total - validate), 4) if total > validate else 0.0,
        "max_rel_diff": max((f.validation.get("max_rel_diff", 0.0) for f in fns), default=0.0),
        "checkpoints": sum(f.validation.get("checkpoints", 0) for f in fns),
        "alarms": report.alarms,
    }


def main() -> None:
    from tvm_eqsat import models

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=list(models.SUITE))
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--flows", nargs="+", default=["default", "tuned"])
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    rows = []
    for name in args.models:
        for flow in args.flows:
            row = measure(name, args.small, flow)
            rows.append(row)
            print(json.dumps(row), flush=True)
    from tvm_eqsat import provenance

    stem = "validation-llvm" + ("-small" if args.small else "")
    out = ROOT / "benchmarks" / "results"
    changed = [r for r in rows if r["changed"]]
    added = sum(r["validate_s"] for r in rows)
    base = sum(r["pass_s"] - r["validate_s"] for r in rows)
    lines = [
        f"# Translation validation cost, llvm{' (small models)' if args.small else ''}",
        "",
        f"`python scripts/validation_cost.py {' '.join(sys.argv[1:])}` on a {os.cpu_count()}-core "
        f"{provenance.cpu_name()}, {time.strftime('%Y-%m-%d')}.",
        "",
        f"Validation ran on {len(changed)} of {len(rows)} (model, flow) pairs (only a changed block is "
        f"validated) and added {added:.2f} s to {base:.2f} s of pass time without it "
        f"({100 * added / base if base else 0:.1f}% over the suite).",
        "",
        "| model | flow | changed | pass s (with validation) | validation s | added | checkpoints | max rel. diff |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['flow']} | {r['changed']} | {r['pass_s']:.2f} | {r['validate_s']:.2f} | "
            f"{100 * r['share']:.1f}% | {r['checkpoints']} | {r['max_rel_diff']:.2g} |"
        )
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    sidecar = {
        **provenance.record(),
        "command": " ".join(["python scripts/validation_cost.py", *sys.argv[1:]]),
        "rows": rows,
    }
    (out / f"{stem}.json").write_text(json.dumps(sidecar, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
