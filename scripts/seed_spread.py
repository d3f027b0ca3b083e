"""Separate the tuner's lottery from a rewrite's effect: tune stock and eqsat with several seeds.

With a few MetaSchedule trials per kernel, a kernel's tuned latency depends on which
schedules the search happened to sample.  The pass changes kernels (a conv with a folded
batch norm is a new workload), so stock and eqsat draw different tickets, and one
benchmark run can show a loss that is the draw, not the rewrite.  This script tunes
both modules of one model into a database per seed (``--work-root/<model>-t<trials>-s<seed>``;
rerunning with the same seed reuses it), builds them, times them interleaved and
writes one row per seed (with ``--per-kernel``, also each build's time per kernel):

    python scripts/seed_spread.py --model resnet50 --small --trials 8 --seeds 0 1 2 --per-kernel

to ``benchmarks/results/seeds-<target>-<model>[-small]-t<trials>.json``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import tvm

from tvm_eqsat import models, timing, tune

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import MS_LOG_LEVEL, device_for, machine_info, make_target, make_variant, module_hash  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def spread(rows: list[dict]) -> dict:
    """Median, lowest and highest eqsat speedup over the seeds."""
    xs = [r["speedup"] for r in rows]
    return {"seeds": len(xs), "median": float(np.median(xs)), "min": min(xs), "max": max(xs)}


def one_seed(
    name: str, mods: dict, inputs, target, work_dir: str, trials: int, seed: int, repeat: int, per_kernel: bool = False
) -> dict:
    """Tune (or reuse) both modules with ``seed``, build, time interleaved (and per kernel)."""
    dev = device_for(target)
    executables, samplers, tune_s = {}, {}, 0.0
    for variant, mod in mods.items():
        t = time.perf_counter()
        logging.getLogger("tvm.s_tir.meta_schedule").setLevel(MS_LOG_LEVEL)
        db = tune.tune(mod, target, work_dir, trials, seed=seed)
        tune_s += time.perf_counter() - t
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            executables[variant] = tune.build(mod, target, db)
        _, _, samplers[variant], _ = timing.tvm_sampler(executables[variant], dev, inputs, 20.0)
    times = timing.time_interleaved(samplers, repeat)
    med = {v: float(np.median(ts)) for v, ts in times.items()}
    kernels = {}
    if per_kernel:
        for variant, us in timing.kernel_times(executables, dev, inputs).items():
            kernels[variant] = {k: round(v, 2) for k, v in sorted(us.items())}
    return {
        "model": name,
        "seed": seed,
        "work_dir": work_dir,
        "tune_s": round(tune_s, 1),
        "stock_ms": med["stock"],
        "eqsat_ms": med["eqsat"],
        "speedup": med["stock"] / med["eqsat"],
        **({"kernel_us": kernels} if per_kernel else {}),
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, choices=sorted(models.MODELS))
    p.add_argument("--small", action="store_true")
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"])
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--trials", type=int, default=8)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--repeat", type=int, default=30, help="interleaved samples per variant and seed")
    p.add_argument(
        "--per-kernel",
        action="store_true",
        help="also record each build's microseconds per kernel (VM call instrumentation)",
    )
    p.add_argument("--work-root", default=os.path.expanduser("~/.cache/tvm_eqsat/seeds"))
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args(argv)

    target = make_target(args.target, args.arch)
    model = (models.SMALL if args.small else models.MODELS)[args.model]()
    eqsat = make_variant("eqsat", model.mod, target, {"flow": "tuned", "time_limit_s": 30.0})
    mods = {"stock": model.mod, "eqsat": eqsat.mod}
    tag = f"{args.model}{'-small' if args.small else ''}-t{args.trials}"
    rows = []
    for seed in args.seeds:
        work_dir = os.path.join(args.work_root, f"{args.target}-{tag}-s{seed}")
        rows.append(
            one_seed(args.model, mods, model.inputs, target, work_dir, args.trials, seed, args.repeat, args.per_kernel)
        )
        r = rows[-1]
        print(
            f"{tag} seed {seed}: stock {r['stock_ms']:.4g} ms, eqsat {r['eqsat_ms']:.4g} ms, {r['speedup']:.3f}x",
            flush=True,
        )
    result = {
        "command": "python scripts/seed_spread.py " + shlex.join(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(target),
        "tvm": tvm.__version__,
        "target": str(target.kind.name),
        "flow": "tuned",
        "trials": args.trials,
        "eqsat_module_hash": module_hash(eqsat.mod),
        "predicted_speedup": eqsat.predicted_speedup,
        "rows": rows,
        "spread": spread(rows),
    }
    out = Path(args.out_dir) / f"seeds-{args.target}-{tag}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    s = result["spread"]
    print(
        f"eqsat speedup over {s['seeds']} seeds: median {s['median']:.3f}x, "
        f"{s['min']:.3f}x-{s['max']:.3f}x (predicted {result['predicted_speedup']:.3f}x); {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
