"""Graph-level accuracy of the cost models against the end-to-end benchmark.

For every model the pass changed in the benchmark results given (``scripts/benchmark.py`` CSVs and
their JSON sidecars): rebuild the stock module and the eqsat module (the pass with
the options the benchmark used; a row whose eqsat module is not the one that was
timed is marked and left out: rows record the timed module's structural hash, and
older rows without one must reproduce the benchmark's predicted speedup within 1%),
cost both with each cost model, and compare
with the measured latencies:

* pair order: does the model predict correctly whether the rewritten graph is
  faster than the original (predicted speedup > 1 iff measured speedup > 1)?
  Pairs whose measured speedup lies within +-2% of 1 are ties, counted apart.
* whole graphs: Spearman rank correlation of the predicted stock cost with the
  measured stock latency across models, and the median measured/predicted ratio.

Writes ``cost_models/<target>/GRAPH_REPORT.md`` and ``graph_accuracy.csv``.  These pairs are in
sample where the learned model was trained on the benchmark models' kernels; the out-of-sample
figures (``held_out_e2e.py``: the pass with a model that never saw the model it rewrites) go
first in the report, and a rerun of this script keeps them there.

    python scripts/graph_accuracy.py            # llvm, every benchmarks/results/llvm-*.csv
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

import tvm_eqsat
from tvm_eqsat import models
from tvm_eqsat.cost import make_cost_model
from tvm_eqsat.transform import predicted_cost

sys.path.insert(0, str(Path(__file__).resolve().parent))  # also when a test imports this file
from benchmark import module_hash  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
COST_MODELS = ("roofline", "xgb")
TIE = 0.02  # measured speedups within 2% of 1 are ties
FIELDS = ["results", "flow", "model", "stock_ms", "eqsat_ms", "measured_speedup", "benchmark_predicted",
          "reproduced"] + [f"{c}_{k}" for c in COST_MODELS for k in ("stock_us", "eqsat_us", "speedup")]  # fmt: skip


def _read(path: Path) -> tuple[list[dict], dict]:
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    sidecar = json.loads(path.with_suffix(".json").read_text())
    return rows, sidecar


def rows_for(path: Path, target: str) -> list[dict]:
    rows, sidecar = _read(path)
    options = {k: v for k, v in (sidecar.get("eqsat_options") or {}).items() if v is not None}
    options["rules"] = tuple(options["rules"]) if "rules" in options else None
    for name in ("speed_check", "tune_dir", "tune_trials"):  # rows it rejected read unchanged and are
        options.pop(name, None)  # skipped; the rewrites it kept need no re-timing
    builders = models.SMALL if sidecar.get("small") else models.MODELS
    flow = sidecar.get("flow") or "tuned"
    used = make_cost_model(options.get("cost_model", "roofline"), "llvm", flow).name  # what the benchmark's pass used
    by_model: dict[str, dict[str, dict]] = {}
    for r in rows:
        by_model.setdefault(r["model"], {})[r["variant"]] = r
    out = []
    for name, variants in by_model.items():
        if "stock" not in variants or "eqsat" not in variants or variants["eqsat"].get("changed") in ("0", "False"):
            continue  # an unchanged module is no (original, rewritten) pair
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = builders[name]()
        new, _ = tvm_eqsat.optimize(model.mod, target, **options)
        stock_ms, eqsat_ms = float(variants["stock"]["median_ms"]), float(variants["eqsat"]["median_ms"])
        row = {
            "results": path.name, "flow": sidecar.get("flow"), "model": name,
            "stock_ms": stock_ms, "eqsat_ms": eqsat_ms, "measured_speedup": round(stock_ms / eqsat_ms, 4),
            "benchmark_predicted": float(variants["eqsat"]["predicted_speedup"] or 1.0),
        }  # fmt: skip
        for c in COST_MODELS:  # the learned model for the flow the benchmark built with
            before, after = predicted_cost(model.mod, target, c, flow), predicted_cost(new, target, c, flow)
            row.update({f"{c}_stock_us": round(before, 3), f"{c}_eqsat_us": round(after, 3),
                        f"{c}_speedup": round(before / after, 4) if after > 0 else 1.0})  # fmt: skip
        timed_hash = variants["eqsat"].get("module_hash")
        if timed_hash:  # the benchmark recorded the module it timed
            row["reproduced"] = module_hash(new) == timed_hash
        else:  # older rows: the same module gives the same prediction
            row["reproduced"] = (
                used in COST_MODELS and abs(row[f"{used}_speedup"] / row["benchmark_predicted"] - 1) < 0.01
            )
        out.append(row)
    return out


def summary(rows: list[dict], cost_model: str) -> dict:
    kept = [r for r in rows if r["reproduced"]]
    decided = [r for r in kept if abs(r["measured_speedup"] - 1) > TIE]
    right = [r for r in decided if (r[f"{cost_model}_speedup"] > 1) == (r["measured_speedup"] > 1)]
    pred = np.array([r[f"{cost_model}_stock_us"] for r in kept])
    meas = np.array([r["stock_ms"] * 1e3 for r in kept])
    rho = float(spearmanr(pred, meas).statistic) if len(kept) > 2 else float("nan")
    return {
        "pairs": len(kept), "ties": len(kept) - len(decided), "order_right": len(right),
        "order_share": len(right) / len(decided) if decided else float("nan"),
        "spearman_stock": rho, "median_measured_over_predicted": float(np.median(meas / pred)) if kept else float("nan"),
        "wrong": [r["model"] for r in decided if r not in right],
    }  # fmt: skip


def _num(x: float, spec: str) -> str:
    """A figure, or "-" where there is none (no decided pair; Spearman over fewer than 3 models)."""
    return "-" if np.isnan(x) else format(x, spec)


def report(rows: list[dict], target: str, command: str) -> str:
    lines = [
        f"# Graph-level accuracy ({target})",
        "",
        f"Produced by `{command}` on {time.strftime('%Y-%m-%d')}. Measured latencies come from the "
        "benchmark results named below (stock and eqsat variants, same machine and flow); predicted "
        "costs are the pass's DAG costs of the same two modules. See the script's docstring for the definitions.",
        "",
        "| results | flow | cost model | pairs | ties (+-2%) | order right | share | Spearman (stock cost vs latency) "
        "| median measured/predicted | wrong order |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for results in sorted({r["results"] for r in rows}):
        sub = [r for r in rows if r["results"] == results]
        for c in COST_MODELS:
            s = summary(sub, c)
            lines.append(
                f"| {results} | {sub[0]['flow']} | {c} | {s['pairs']} | {s['ties']} | {s['order_right']} "
                f"| {_num(s['order_share'], '.0%')} | {_num(s['spearman_stock'], '.3f')} "
                f"| {_num(s['median_measured_over_predicted'], '.2f')} "
                f"| {', '.join(s['wrong']) or '-'} |"
            )
    lines += ["", "Per model (speedups: stock / eqsat):", "",
              "| results | model | measured | roofline | xgb | reproduced |", "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(
            f"| {r['results']} | {r['model']} | {r['measured_speedup']:.3f}x | {r['roofline_speedup']:.3f}x "
            f"| {r['xgb_speedup']:.3f}x | {'yes' if r['reproduced'] else 'no (left out)'} |"
        )
    return "\n".join(lines) + "\n"


def _block_marks(key: str) -> tuple[str, str]:
    return f"<!-- {key}: written by scripts/held_out_e2e.py -->", f"<!-- /{key} -->"


def put_first(path: Path, key: str, section: str) -> None:
    """Put ``section`` (out-of-sample figures, ``held_out_e2e.py``) at the top of the report in
    ``path``, under its title, replacing that ``key``'s earlier section; ``main`` keeps them
    there when it rewrites the rest."""
    begin, end = _block_marks(key)
    text = path.read_text() if path.exists() else ""
    if begin in text:
        head, rest = text.split(begin, 1)
        text = head + rest.split(end, 1)[1].lstrip("\n")
    title, _, body = text.partition("\n") if text.startswith("# ") else ("", "", text)
    block = f"{begin}\n{section.strip()}\n{end}\n"
    path.write_text((f"{title}\n\n" if title else "") + block + ("\n" + body.lstrip("\n") if body.strip() else ""))


def held_out_blocks(path: Path) -> list[str]:
    """The out-of-sample sections ``put_first`` wrote into the report at ``path``, marks included."""
    text = path.read_text() if path.exists() else ""
    blocks = []
    while (start := text.find("<!-- held-out-e2e")) >= 0:
        end_mark = _block_marks(text[start + len("<!-- ") : text.index(":", start)])[1]
        end = text.index(end_mark, start) + len(end_mark)
        blocks.append(text[start:end])
        text = text[end:]
    return blocks


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"])
    p.add_argument(
        "--results",
        nargs="+",
        default=None,
        help="benchmark CSVs (default benchmarks/results/<target>-*.csv but the -checked ones, "
        "whose kept rewrites repeat the unchecked runs' pairs)",
    )
    p.add_argument("--out", default=None, help="default cost_models/<target>")
    args = p.parse_args(argv)
    paths = [Path(x) for x in args.results] if args.results else sorted(
        q for q in (ROOT / "benchmarks" / "results").glob(f"{args.target}-*.csv")
        if q.with_suffix(".json").exists() and not q.stem.endswith("-checked")
    )  # fmt: skip
    rows = [row for path in paths for row in rows_for(path, args.target)]
    if not rows:
        print("no benchmark rows with stock and eqsat variants")
        return 1
    out = Path(args.out) if args.out else ROOT / "cost_models" / args.target
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "graph_accuracy.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    command = " ".join(["python scripts/graph_accuracy.py", *(sys.argv[1:] if argv is None else argv)])
    text = report(rows, args.target, command)
    kept = held_out_blocks(out / "GRAPH_REPORT.md")  # the out-of-sample figures stay first
    if kept:
        title, _, body = text.partition("\n")
        text = title + "\n\n" + "\n".join(b + "\n" for b in kept) + body
    (out / "GRAPH_REPORT.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
