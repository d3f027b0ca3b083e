"""The same builds timed on several days: each model's eqsat-vs-best-stock ratio per day, and
the ratio of each build's median over the days.

Why: on the 2-core VM the same builds' ratio moved by up to 7% from one day to the next
(SqueezeNet, ResNet-50 and Inception-v3: 1.005x, 1.192x, 1.093x on 2026-12-04, 1.069x, 1.219x,
1.174x on 12-05, every module hash the same), more than some of the gains claimed, so a claim
from one day's timing carries that day's draw.  Each build's latency is its median over the
days it was timed (per day, the median of that run's interleaved samples); the best stock
variant is then chosen among those medians, so no day's luckiest stock build sets the bar
alone, and a combined ratio can sit above every day's own.  A build counts only where every
day that timed the model timed it (its median over other days than its rivals' would mix the
days' speeds; A/A controls only widen the floor) and timed the same module (``module_hash``; the
schedules come from the tuning database, which the CSVs do not fingerprint).

    python scripts/timing_days.py benchmarks/results/llvm-emeraldrapids-tuned-t32-defaults.csv \\
        benchmarks/results/llvm-emeraldrapids-tuned-t32-nhwc-aa.csv \\
        benchmarks/results/llvm-emeraldrapids-tuned-t32-day2.csv \\
        --out benchmarks/results/llvm-emeraldrapids-tuned-t32-days.md
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when a test imports this file
from benchmark import (  # noqa: E402
    AA_VARIANTS,
    EQSAT_VARIANTS,
    STOCK_VARIANTS,
    _by_model,
    fastest,
    geomean,
    noise_floor,
    read_rows,
)


def day_labels(paths: list[Path]) -> list[str]:
    """The results files' names without the dash-separated words they all start with, for the
    table's columns."""
    words = [p.stem.split("-") for p in paths]
    shared = 0
    while len(paths) > 1 and all(len(w) > shared + 1 and w[shared] == words[0][shared] for w in words):
        shared += 1
    return ["-".join(w[shared:]) for w in words]


def combine(days: list[tuple[str, dict[str, dict[str, dict]]]]) -> dict[str, dict]:
    """Per model: each day's best-stock ratio and floor, the builds left out (another module on
    some day, or not timed every day), and the combined ratio: the best stock build's median
    over the days against the best eqsat build's."""
    models = list(dict.fromkeys(m for _, data in days for m in data))  # in the order the files list them
    out = {}
    for model in models:
        timed = [(label, data[model]) for label, data in days if model in data]
        per_day = {}
        for label, vs in timed:
            if "stock" not in vs or not any(v in vs for v in EQSAT_VARIANTS):
                continue
            s, e = fastest(vs, STOCK_VARIANTS), fastest(vs, EQSAT_VARIANTS)
            per_day[label] = {
                "best_stock": s,
                "ratio": float(vs[s]["median_ms"]) / float(vs[e]["median_ms"]),
                "floor": noise_floor(vs),
            }
        variants = sorted({v for _, vs in timed for v in vs})
        medians, moved, fewer = {}, [], []
        for v in variants:
            rows = [vs[v] for _, vs in timed if v in vs]
            if len({r.get("module_hash", "") for r in rows}) > 1:
                moved.append(v)
            elif len(rows) < len(timed) and v not in AA_VARIANTS:
                fewer.append(v)  # its median would be other days' than its rivals'
            else:
                medians[v] = float(np.median([float(r["median_ms"]) for r in rows]))
        entry = {"days": per_day, "moved": moved, "fewer": fewer}
        stock = [v for v in STOCK_VARIANTS if v in medians and v not in AA_VARIANTS]
        eqsat = [v for v in EQSAT_VARIANTS if v in medians]
        if stock and eqsat:
            s = min(stock, key=medians.get)
            e = min(eqsat, key=medians.get)
            entry.update(best_stock=s, ratio=medians[s] / medians[e])
            entry["floor"] = max(d["floor"] for d in per_day.values()) if per_day else None
        out[model] = entry
    return out


def markdown(days: list[str], combined: dict[str, dict], command: str) -> str:
    lines = [
        "# The same builds timed in several runs",
        "",
        f"Produced by `{command}`. Per run (one results file, one column): eqsat against the best stock "
        "variant of that run (the file's own table). Combined: each build's median over the runs, the best "
        "stock variant chosen among those medians; the floor is the widest of the runs' noise floors (timing "
        "spread, A/A controls). A build left out of the combined figure is named beside it.",
        "",
        "| model | " + " | ".join(days) + " | combined | best stock (combined) | floor |",
        "|---|" + "---|" * len(days) + "---|---|---|",
    ]
    ratios = []
    for model, entry in combined.items():
        cells = [
            f"{entry['days'][d]['ratio']:.3f}x ({entry['days'][d]['best_stock']})" if d in entry["days"] else "-"
            for d in days
        ]
        if "ratio" in entry:
            ratios.append(entry["ratio"])
            inside = entry["floor"] is not None and abs(entry["ratio"] - 1.0) <= entry["floor"]
            combined_cell = f"**{entry['ratio']:.3f}x**{' (within noise)' if inside else ''}"
            best, floor = entry["best_stock"], f"±{100 * entry['floor']:.1f}%" if entry["floor"] is not None else "-"
        else:
            combined_cell, best, floor = "-", "-", "-"
        if entry["moved"]:
            combined_cell += " (left out, another module in another run: " + ", ".join(entry["moved"]) + ")"
        if entry["fewer"]:
            combined_cell += " (left out, not timed in every run: " + ", ".join(entry["fewer"]) + ")"
        lines.append(f"| {model} | " + " | ".join(cells) + f" | {combined_cell} | {best} | {floor} |")
    per_day = [geomean([e["days"][d]["ratio"] for e in combined.values() if d in e["days"]]) for d in days]
    lines += [
        "",
        f"Geometric mean of the combined ratios: **{geomean(ratios)}** over {len(ratios)} models "
        f"(each run's own, over the models it timed: {', '.join(f'{d} {g}' for d, g in zip(days, per_day))}).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", type=Path, help="benchmark.py results CSVs of the same builds, one per day")
    p.add_argument("--out", type=Path, default=None, help="markdown file (default: print only)")
    args = p.parse_args(argv)
    missing = [str(r) for r in args.results if not r.is_file()]
    if missing:
        raise SystemExit(f"no such results file: {', '.join(missing)}")
    days = [(label, _by_model(read_rows(path))) for label, path in zip(day_labels(args.results), args.results)]
    text = markdown(
        [label for label, _ in days],
        combine(days),
        "python scripts/timing_days.py "
        + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
    )
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
