"""How well one tuning of a kernel predicts another: two databases' best records, kernel by kernel.

The benchmark's database and its A/A control's (another seed, the same budget) tune the same
kernels independently; each kernel's two best times differ by the tuning's lottery.  That
difference is the ceiling of any cost model of one tuning's times (``train_cost_model.py``
reports it for its dataset as "the labels' ceiling") and the noise under every comparison of
two builds.  This script measures it straight from the databases, for the kernels tuned with at
least ``--budget`` trials in both, and with ``--also A B BUDGET`` for the same kernels in a
second pair of databases: a longer tuning against the shorter one it continued from, to see how
much lottery the extra trials remove.

    python scripts/aa_agreement.py ~/.cache/tvm_eqsat/ms-llvm-emeraldrapids-t64 \\
        ~/.cache/tvm_eqsat/ms-llvm-emeraldrapids-t64-aa --budget 64 \\
        --also ~/.cache/tvm_eqsat/ms-llvm-emeraldrapids ~/.cache/tvm_eqsat/ms-llvm-emeraldrapids-aa 32

``--retime N`` also builds each kernel's best schedule from both databases and times it afresh,
N samples, as its database was tuned (cold caches where it was): the lottery of the two searches
without the tuner's measurements, and how far the first database's records are from its
schedules' fresh times (records taken while another process held a core run long).  Needs a
quiet machine and ``--mcpu``, the CPU the databases were tuned for:

    python scripts/aa_agreement.py benchmarks/tuning/llvm-znver3-cold benchmarks/tuning/llvm-znver3-cold-aa \\
        --retime 15 --mcpu znver3

Work dirs and committed (packed) databases read alike.  Kernels under ``--min-us`` (10 us) are
left out: they rank by launch overhead, and most of a model's time is in the others.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import tvm

from tvm_eqsat import measure, tune, tuning_db
from tvm_eqsat.harvest import best_record_us

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_cost_model import metrics  # noqa: E402


def best_us(directory: str, budget: int) -> dict[str, float]:
    """Each kernel's best record as the cost model's labels read it (``harvest.best_record_us``),
    by kernel hash, for the kernels ``directory`` tuned with at least ``budget`` trials."""
    budgets = tuning_db.budgets_by_hash(directory)
    database = tuning_db.read_database(directory)
    kernels = {tuning_db.kernel_hash(r.workload.mod): r.workload.mod for r in database.get_all_tuning_records()}
    best = {h: best_record_us(database, mod) for h, mod in kernels.items() if budgets.get(h, 0) >= budget}
    return {h: found[0] for h, found in best.items() if found is not None}


def kernel_modules(directory: str) -> dict[str, tvm.IRModule]:
    """The kernels ``directory`` holds, by kernel hash."""
    database = tuning_db.read_database(directory)
    return {tuning_db.kernel_hash(r.workload.mod): r.workload.mod for r in database.get_all_tuning_records()}


def fresh_us(directory: str, kernels: dict[str, tvm.IRModule], target, repeat: int) -> dict[str, tuple[float, float]]:
    """Each kernel's best schedule in ``directory`` built and timed afresh, ``repeat`` samples,
    as the database was tuned (every argument but the first flushed from the caches before each
    run where it was tuned cold): (median us, (p90 - p10) / median) by kernel hash."""
    tune.use_all_cores()
    database = tuning_db.read_database(directory)
    cache = tuning_db.database_cache(directory) or "warm"
    out = {}
    for h, mod in kernels.items():
        runs = np.array(
            measure.time_best_schedule(database, mod, target, repeat=repeat, caches=(cache,), min_repeat_ms=20)[cache]
        )
        median = float(np.median(runs))
        out[h] = (median, float(np.percentile(runs, 90) - np.percentile(runs, 10)) / median)
    return out


def agreement(first: dict[str, float], second: dict[str, float], kernels: list[str]) -> dict:
    """``metrics`` of one tuning's times as the prediction of the other's, and their ratios."""
    a, b = np.array([first[k] for k in kernels]), np.array([second[k] for k in kernels])
    ratio = np.maximum(a, b) / np.minimum(a, b)
    return {
        **metrics(a, b),
        "median_ratio": float(np.median(ratio)),
        "over_1_5x": float(np.mean(ratio > 1.5)),
        "over_2x": float(np.mean(ratio > 2.0)),
        # the ratio a model's time feels: each kernel weighted by its time
        "time_weighted_ratio": float(np.exp(np.average(np.log(ratio), weights=a + b))),
    }


def row(name: str, m: dict) -> str:
    return (
        f"| {name} | {m['n']} | {m['spearman']:.3f} | {m['within_20pct']:.0%} | {m['median_ratio']:.3f}x | "
        f"{m['over_1_5x']:.0%} | {m['over_2x']:.0%} | {m['time_weighted_ratio']:.3f}x |"
    )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("first", help="a database (work dir or committed)")
    p.add_argument("second", help="the same kernels tuned again, independently")
    p.add_argument("--budget", type=int, default=32, help="kernels tuned with at least this many trials in both")
    p.add_argument("--also", nargs=3, metavar=("FIRST", "SECOND", "BUDGET"), help="a second pair, same kernels")
    p.add_argument("--min-us", type=float, default=10.0, help="leave out kernels faster than this in either")
    p.add_argument("--retime", type=int, default=0, metavar="N", help="also time both schedules afresh, N samples")
    p.add_argument("--mcpu", default="generic", help="with --retime: the CPU the databases were tuned for")
    args = p.parse_args(argv)
    pairs = [(args.first, args.second, args.budget)]
    if args.also:
        pairs.append((args.also[0], args.also[1], int(args.also[2])))
    tunings = [(best_us(a, n), best_us(b, n)) for a, b, n in pairs]
    shared = set.intersection(*(set(first) & set(second) for first, second in tunings))
    kernels = sorted(k for k in shared if all(min(f[k], s[k]) >= args.min_us for f, s in tunings))
    if len(kernels) < 3:
        sys.exit(f"the databases share {len(kernels)} kernels of {args.min_us:g} us or more (at least 3 needed)")
    print("| databases | kernels | Spearman | within 20% | median ratio | > 1.5x | > 2x | time-weighted ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for (a, b, n), (first, second) in zip(pairs, tunings):
        print(row(f"`{a}` / `{b}`, {n} trials", agreement(first, second, kernels)))
    if args.retime:
        target = tune.tuning_target(tune.llvm_target(args.mcpu))
        mods = {k: m for k, m in kernel_modules(args.first).items() if k in kernels}
        timed = [fresh_us(d, mods, target, args.retime) for d in (args.first, args.second)]
        fresh = [{k: t[0] for k, t in times.items()} for times in timed]
        print(row(f"both timed afresh ({args.retime} samples each)", agreement(*fresh, kernels)))
        print(row("the first's records against its fresh times", agreement(tunings[0][0], fresh[0], kernels)))
        spreads = [t[1] for times in timed for t in times.values()]
        print(
            f"\nFresh samples' spread, (p90 - p10) / median: median {np.median(spreads):.1%}, "
            f"{np.mean(np.array(spreads) < 0.05):.0%} of kernels under 5%."
        )


if __name__ == "__main__":
    main()
