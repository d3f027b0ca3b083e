"""Commit the tuning: the best record of every kernel the benchmark tuned (its own
database and the A/A control's), with their budgets and where they were tuned, and the
kernels already committed there that the work dir lacks (tuned at another budget), as
``benchmarks/tuning/<target>[-aa]/`` (``<target>``: ``llvm-<cpu>``, or ``llvm`` for generic
x86-64 code, as in ``scripts/benchmark.py --mcpu``; the database packed in xz, ``tuning_db.PACKED``:
it travels with every device run, where room is short).  ``scripts/benchmark.py`` starts the tuned flow
from them, so anyone rebuilds the kernels we measured without tuning, and the cost
model can learn from them (``train_cost_model.py --from-database``).

    python scripts/export_tuning.py                      # ~/.cache/tvm_eqsat/ms-llvm-<this cpu>[-aa]
    python scripts/export_tuning.py --mcpu generic       # ~/.cache/tvm_eqsat/ms-llvm[-aa]
    python scripts/export_tuning.py --cold-cache         # ~/.cache/tvm_eqsat/ms-llvm-<this cpu>-cold[-aa]
    python scripts/export_tuning.py --work-dir DIR --target llvm
    python scripts/export_tuning.py --work-dir ~/.cache/tvm_eqsat/ms-llvm-emeraldrapids-t64 --trials 64 --apart
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import tempfile
from pathlib import Path

from tvm_eqsat import provenance, tune, tuning_db

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"])
    p.add_argument("--mcpu", default="host", help="llvm: the CPU the kernels were tuned for (default: this one's)")
    p.add_argument("--work-dir", default=None, help="default ~/.cache/tvm_eqsat/ms-<target>")
    p.add_argument("--cold-cache", action="store_true", help="the databases tuned with cold caches (<target>-cold)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "tuning"))
    p.add_argument(
        "--trials",
        type=int,
        default=32,
        help="keep the kernels tuned with at least this many trials (the benchmark's smallest budget: "
        "32 for the full-size models, 64 for the small ones; kernels tuned less, by a quick run, would "
        "be retuned anyway)",
    )
    p.add_argument(
        "--apart",
        action="store_true",
        help="write <target>-t<trials>[-aa]: kernels tuned longer than the main database's budget for "
        "them (a 64-trial run of models committed at 32), whose records would replace the main "
        "database's; benchmark.py --trials <trials> seeds from both",
    )
    args = p.parse_args()
    try:
        mcpu = tune.resolve_mcpu(args.mcpu) if args.target == "llvm" else "generic"
    except ValueError as err:
        p.error(str(err))
    target = tune.target_name(args.target, mcpu, args.cold_cache)
    work = args.work_dir or os.path.expanduser(f"~/.cache/tvm_eqsat/ms-{target}")
    stem = f"{target}-t{args.trials}" if args.apart else target
    for src, name in ((work, stem), (f"{work}-aa", f"{stem}-aa")):
        if not (Path(src) / "database_tuning_record.json").is_file():
            continue
        out = Path(args.out) / name
        with tempfile.TemporaryDirectory() as tmp:
            # the committed kernels the work dir lacks stay: a benchmark seeds its work dir with
            # its own budget's kernels only (32 trials), and the export would drop the rest (64).
            # Merged in a copy: in the work dir they would give a later run's kernels another budget
            merged = Path(tmp) / "merged"
            shutil.copytree(src, merged)
            kept = tuning_db.seed_database(merged, out)
            if kept:
                print(f"{out}: {kept} committed kernels the work dir lacked are kept")
            if args.apart:  # apart: only what the main database lacks at that budget
                main = tuning_db.budgets_by_hash(Path(args.out) / name.replace(stem, target, 1))
                budgets = tuning_db.read_budgets(merged)
                tuning_db.write_budgets(
                    merged, {k: n for k, n in budgets.items() if main.get(k.rsplit("-", 1)[1]) != n}
                )
            n = tuning_db.prune_database(merged, out, args.trials, compress=True)
        budgets = json.loads((out / tuning_db.BUDGETS).read_text())
        (out / "SOURCE.json").write_text(
            json.dumps(
                {
                    "cpu": provenance.cpu_name(),
                    "mcpu": mcpu if args.target == "llvm" else None,
                    "cores": tune.available_cores(),
                    "date": datetime.date.today().isoformat(),
                    "kernels": n,
                    "cpu_cache": tuning_db.database_cache(out),
                    "trial_budgets": sorted(set(budgets.values())),
                    **provenance.source_state(),
                },
                indent=1,
            )
            + "\n"
        )
        size = sum(f.stat().st_size for f in out.iterdir()) / 1e6
        print(f"{out}: {n} kernels, {size:.1f} MB")


if __name__ == "__main__":
    main()
