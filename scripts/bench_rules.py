"""Rule-library benchmark: what saturation does on each benchmark model.

For every model (small and full-size variants) and every multi-pattern limit
asked for (TENSAT's ``k_multi``; ``none`` = no separate limit, the default): run
the whole pass (``tvm_eqsat.optimize``, saturation, ILP extraction, roofline
costs, llvm) and record the e-graph size, the iterations, the growth and pass
times, why growth stopped, the predicted speedup and how often each rule fired.

Writes ``benchmarks/results/rules-llvm.csv`` (one row per model and limit) and
``.md`` (the default-limit table, rules fired per model, the k_multi study).

    python scripts/bench_rules.py                       # all models, k_multi none
    python scripts/bench_rules.py --k-multi 1 2 3 none  # the k_multi study
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections import Counter

from tqdm import tqdm

import tvm_eqsat
from tvm_eqsat import models, provenance
from tvm_eqsat.rules import load_library

FIELDS = [
    "model", "scale", "k_multi", "enodes", "iterations", "stop_reason", "grow_s", "extract_s", "pass_s",
    "cost_before_us", "cost_after_us", "predicted_speedup", "changed", "rules",
]  # fmt: skip


def parse_limit(text: str) -> int | None:
    return None if text.lower() == "none" else int(text)


def run_model(name: str, scale: str, limits: list[int | None]) -> list[dict]:
    model = (models.MODELS if scale == "full" else models.SMALL)[name]()
    rows = []
    for k in limits:
        t = time.perf_counter()
        _, report = tvm_eqsat.optimize(model.mod, "llvm", multi_limit=k)
        wall = time.perf_counter() - t
        funcs = list(report.functions.values())
        rules: Counter = Counter()
        for f in funcs:
            rules.update(f.rules_applied)
        before, after = sum(f.cost_before for f in funcs), sum(f.cost_after for f in funcs)
        rows.append({
            "model": name, "scale": scale, "k_multi": "none" if k is None else k,
            "enodes": sum(f.enodes for f in funcs), "iterations": max((f.iterations for f in funcs), default=0),
            "stop_reason": ";".join(sorted({f.stop_reason for f in funcs if f.stop_reason})),
            "grow_s": round(sum(f.seconds.get("grow", 0.0) for f in funcs), 3),
            "extract_s": round(sum(f.seconds.get("extract", 0.0) for f in funcs), 3),
            "pass_s": round(wall, 3), "cost_before_us": round(before, 3), "cost_after_us": round(after, 3),
            "predicted_speedup": round(before / after, 4) if after > 0 else 1.0,
            "changed": any(f.changed for f in funcs),
            "rules": ";".join(f"{r}:{n}" for r, n in rules.most_common()),
        })  # fmt: skip
    return rows


def markdown(rows: list[dict], sidecar: dict) -> str:
    out = [
        "# Rule library on the benchmark models (llvm, roofline costs)",
        "",
        f"{sidecar['machine']}, {sidecar['cpus']} cores; TVM {sidecar['versions']['apache-tvm']}, "
        f"egglog {sidecar['versions']['egglog']}; "
        f"{sidecar['date']}. Command: `{sidecar['command']}`.",
        "",
        f"Rules: {sidecar['rules']} in {len(sidecar['families'])} families: "
        + ", ".join(f"{f} {n}" for f, n in sidecar["families"].items())
        + f"; multi-pattern rules: {', '.join(sidecar['multi_pattern'])}.",
        "",
        "Pass defaults (node limit 20000, 30 iterations, 30 s), saturation, ILP extraction. "
        "pass s: the whole `optimize` call (import excluded); grow s: saturation only.",
        "",
        "| model | scale | k_multi | e-nodes | iterations | stop | grow s | extract s | pass s | predicted speedup |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        out.append(
            f"| {r['model']} | {r['scale']} | {r['k_multi']} | {r['enodes']} | {r['iterations']} | {r['stop_reason']} "
            f"| {r['grow_s']} | {r['extract_s']} | {r['pass_s']} | {r['predicted_speedup']:.3f}x |"
        )
    out += ["", "## Rules fired (matches during saturation, k_multi none)", ""]
    for r in rows:
        if r["k_multi"] == "none":
            out.append(f"- {r['model']} ({r['scale']}): {r['rules'].replace(';', ', ') or 'none'}")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=list(models.SUITE))
    p.add_argument("--scales", nargs="+", default=["small", "full"], choices=["small", "full"])
    p.add_argument("--k-multi", nargs="+", default=["none"], help="multi-pattern iteration limits ('none': no limit)")
    p.add_argument("--out", default="benchmarks/results/rules-llvm.csv")
    args = p.parse_args(argv)
    limits = [parse_limit(k) for k in args.k_multi]
    rows = []
    todo = [(m, s) for s in args.scales for m in args.models]
    for name, scale in tqdm(todo, desc="models"):
        rows.extend(run_model(name, scale, limits))
    library = load_library()
    sidecar = {
        **provenance.record(),
        "command": " ".join(["python scripts/bench_rules.py", *(sys.argv[1:] if argv is None else argv)]),
        "rules": len(library.rules),
        "families": dict(sorted(Counter(r.family for r in library.rules).items())),
        "multi_pattern": [r.name for r in library.rules if r.multi],
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    base = os.path.splitext(args.out)[0]
    with open(base + ".json", "w") as f:
        json.dump(sidecar, f, indent=2)
    text = markdown(rows, sidecar)
    with open(base + ".md", "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
