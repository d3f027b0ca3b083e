"""Each kernel of a model's builds, as tuned warm and as tuned cold, run warm and run cold.

MetaSchedule usually times a candidate again and again on the same arrays, so its weights
sit in the CPU's caches; in a model each weight is read once per inference, from memory.
A schedule chosen warm can be slow cold (``tune.COLD_EVALUATOR``).  For every kernel of
the variants' modules, this script takes the best schedule of the warm database
(``~/.cache/tvm_eqsat/ms-<target>``, what ``benchmark.py --flow tuned`` fills) and of the
cold one (``ms-<target>-cold``, ``--cold-cache``), builds it alone and times it with warm
caches and with every argument but the first flushed before each run (medians of
``--repeat`` runs, this machine's cores), then sums each variant's kernels by their calls
per inference:

    python scripts/cold_kernels.py --model resnet50 --variants stock+tvm eqsat

to ``benchmarks/results/cold-kernels-<target>-<model>.{json,md}``.  Run it with nothing
else on the machine, like every timing.
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np
from tvm.s_tir import meta_schedule as ms

import tvm_eqsat
from tvm_eqsat import measure, models, provenance, tune, tuning_db

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import default_work_dir, machine_info, make_target, make_variant  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
COLUMNS = ("warm_record", "warm_run_warm", "warm_run_cold", "cold_record", "cold_run_warm", "cold_run_cold")


def time_kernel(task_mod, database, target, repeat: int) -> dict[str, float] | None:
    """The database's best schedule of one kernel: its record and its run warm and cold (us)."""
    records = tuning_db.tuned_records(database, task_mod)
    if not records:
        return None
    out = {"record": float(np.mean([float(x) for x in records[0].run_secs])) * 1e6}
    runs = measure.time_best_schedule(database, task_mod, target, repeat=repeat, caches=("warm", "cold"))
    out.update({f"run_{cache}": float(np.median(r)) for cache, r in runs.items()})
    return out


def variant_kernels(mod, target, databases: dict, repeat: int) -> list[dict]:
    """One row per kernel of ``mod``: its calls per inference and each database's times."""
    tt = tune.tuning_target(target)
    rows = []
    for task in ms.relax_integration.extract_tasks(tune.fuse_for_tuning(mod, target), tt):
        row = {"kernel": task.task_name, "calls": int(task.weight)}
        for kind, db in databases.items():
            times = time_kernel(task.dispatched[0], db, tt, repeat)
            for key, us in (times or {}).items():
                row[f"{kind}_{key}"] = round(us, 2)
        rows.append(row)
    return rows


def totals(rows: list[dict]) -> dict[str, float | None]:
    """Milliseconds per inference in each column (None where a database lacks a kernel)."""
    out = {}
    for col in COLUMNS:
        have = [r[col] * r["calls"] for r in rows if col in r]
        out[col] = round(sum(have) / 1e3, 3) if len(have) == len(rows) else None
    return out


def markdown(result: dict) -> str:
    lines = [
        f"# {result['model']}: kernels tuned warm and cold, run warm and cold ({result['target']})",
        "",
        f"{result['machine']['machine']}, {result['machine']['cores_used']} cores, {result['date']}. "
        f"`{result['command']}`. Medians of {result['repeat']} runs of each kernel alone; cold: every argument "
        "but the first flushed from the caches before each run. Sums in ms per inference (calls counted).",
        "",
        "| variant | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for variant, t in result["totals"].items():
        lines.append(f"| {variant} | " + " | ".join("-" if t[c] is None else f"{t[c]:.2f}" for c in COLUMNS) + " |")
    lines += ["", "Kernels whose two schedules differ most run cold (us per call):", ""]
    lines += ["| variant | kernel | calls | " + " | ".join(COLUMNS) + " |", "|---|---|---|" + "---|" * len(COLUMNS)]
    flat = [
        (v, r) for v, rows in result["kernels"].items() for r in rows if "warm_run_cold" in r and "cold_run_cold" in r
    ]
    flat.sort(key=lambda vr: -abs(vr[1]["warm_run_cold"] - vr[1]["cold_run_cold"]) * vr[1]["calls"])
    for v, r in flat[:15]:
        lines.append(f"| {v} | {r['kernel']} | {r['calls']} | " + " | ".join(f"{r[c]:.0f}" for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, choices=sorted(models.MODELS))
    p.add_argument("--small", action="store_true")
    p.add_argument("--mcpu", default="host", help="the CPU the databases were tuned for (default: this one)")
    p.add_argument("--variants", nargs="+", default=["stock+tvm", "eqsat"])
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args(argv)

    tune.use_all_cores()
    mcpu = tune.resolve_mcpu(args.mcpu)
    target = make_target("llvm", "", mcpu)
    databases = {}
    for kind, cold in (("warm", False), ("cold", True)):
        work = Path(default_work_dir(tune.target_name("llvm", mcpu, cold)))
        if tuning_db.has_database(work):
            databases[kind] = tuning_db.open_database(work)
    if not databases:
        p.error(f"no tuning database for llvm -mcpu={mcpu}: run scripts/benchmark.py --flow tuned first")
    model = (models.SMALL if args.small else models.MODELS)[args.model]()
    options = tvm_eqsat.make_options(flow="tuned").to_dict()
    kernels = {}
    for name in args.variants:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = make_variant(name, model.mod, target, options).mod
            kernels[name] = variant_kernels(mod, target, databases, args.repeat)
        print(name, totals(kernels[name]), flush=True)
    name = tune.target_name("llvm", mcpu)
    result = {
        "command": "python scripts/cold_kernels.py " + shlex.join(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(target),
        "target": name,
        "model": args.model + ("-small" if args.small else ""),
        "repeat": args.repeat,
        "totals": {v: totals(rows) for v, rows in kernels.items()},
        "kernels": kernels,
    }
    stem = Path(args.out_dir) / f"cold-kernels-{name}-{result['model']}"
    provenance.write_results(stem, result, markdown)
    print(f"written {stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
