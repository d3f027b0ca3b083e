"""MetaSchedule's per-kernel search overhead, and whether a smaller evolutionary population
removes it without weakening the tuning (issue #28, item 5).

For a few representative kernels (3x3 conv, 1x1 conv, depthwise conv, dense), each search
setting tunes every kernel from scratch with the same trial budget and seed; the script
records the wall time, then builds each setting's best schedule and times the kernels
against each other in interleaved rounds (so the comparison is not the tuner's own noisy
measurement).  Resumable: a (setting, kernel, seed) whose database exists is not tuned
again.  ``--seeds``: each setting tuned once per seed, so a setting's spread over seeds (the
tuning lottery, which a benchmark's A/A control measures) shows beside its mean.

    python scripts/ms_overhead.py --trials 64 --settings 512/16 128/16 512/64
    python scripts/ms_overhead.py --trials 64 --settings 128/16 512/16 --kernels stem --seeds 0 1 2 \
        --mcpu emeraldrapids --out benchmarks/results/ms-overhead-llvm-emeraldrapids-stem
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from tvm_eqsat import provenance, timing, tune, tuning_db

ROOT = Path(__file__).resolve().parent.parent


def _module(build) -> tvm.IRModule:
    bb = relax.BlockBuilder()
    x_shape, w_shape, op = build
    x = relax.Var("x", relax.TensorType(x_shape, "float32"))
    w = relax.Var("w", relax.TensorType(w_shape, "float32"))
    with bb.function("main", [x, w]):
        with bb.dataflow():
            out = bb.emit_output(op(x, w))
        bb.emit_func_output(out)
    return bb.get()


KERNELS = {
    "conv3x3": ((1, 64, 28, 28), (64, 64, 3, 3), lambda x, w: relax.op.nn.conv2d(x, w, padding=1)),
    "conv1x1": ((1, 256, 14, 14), (64, 256, 1, 1), lambda x, w: relax.op.nn.conv2d(x, w)),
    "depthwise": ((1, 96, 28, 28), (96, 1, 3, 3), lambda x, w: relax.op.nn.conv2d(x, w, padding=1, groups=96)),
    "dense": ((128, 256), (256, 1024), lambda x, w: relax.op.matmul(x, w)),
    # small ResNet-50's stem: its A/A control differed 3x here (329 against 107 us in the model)
    "stem": ((1, 3, 64, 64), (32, 3, 7, 7), lambda x, w: relax.op.nn.conv2d(x, w, strides=2, padding=3)),
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=64)
    p.add_argument(
        "--settings",
        nargs="+",
        default=["512/16", "128/16", "512/64"],
        help="population/trials-per-round pairs (MetaSchedule's defaults: 512/64; ours: 512/16)",
    )
    p.add_argument("--kernels", nargs="+", default=[k for k in KERNELS if k != "stem"], choices=list(KERNELS))
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="MetaSchedule seeds, each tuned apart")
    p.add_argument("--mcpu", default="generic", help="llvm: the CPU to tune for ('host': this one)")
    p.add_argument("--work-dir", default=str(Path.home() / ".cache/tvm_eqsat/ms-overhead"))
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--out", default=str(ROOT / "benchmarks/results/ms-overhead-llvm"))
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    mcpu = tune.resolve_mcpu(args.mcpu)
    target = tvm.target.Target(tune.llvm_target(mcpu))
    dev = tvm.cpu()
    rng = np.random.default_rng(0)
    work = Path(args.work_dir)
    seconds_file = work / "seconds.json"
    seconds = json.loads(seconds_file.read_text()) if seconds_file.is_file() else {}
    rows = []
    for name in args.kernels:
        mod = _module(KERNELS[name])
        inputs = [rng.standard_normal(s).astype("float32") for s in KERNELS[name][:2]]
        samplers = {}
        for setting in args.settings:
            pop, per_iter = (int(v) for v in setting.split("/"))
            for seed in args.seeds:
                key = (
                    f"p{pop}-t{args.trials}-{name}"
                    + ("" if per_iter == 16 else f"-i{per_iter}")
                    + ("" if seed == 0 else f"-s{seed}")
                    + ("" if mcpu == "generic" else f"-{mcpu}")
                )
                if key not in seconds:
                    t0 = time.perf_counter()
                    tune.tune(mod, target, work / key, args.trials, population=pop, trials_per_iter=per_iter, seed=seed)
                    seconds[key] = time.perf_counter() - t0
                    work.mkdir(parents=True, exist_ok=True)
                    seconds_file.write_text(json.dumps(seconds, indent=1))
                logging.info("%s: %.0f s", key, seconds[key])
                ex = tune.build(mod, target, tuning_db.open_database(work / key))
                samplers[(setting, seed)] = (key, timing.tvm_sampler(ex, dev, inputs, 10.0)[2])
        samples = timing.time_interleaved({k: f for k, (_, f) in samplers.items()}, args.repeat)
        for (setting, seed), (key, _) in samplers.items():
            rows.append(
                {
                    "kernel": name,
                    "setting": setting,
                    "seed": seed,
                    "trials": args.trials,
                    "tune_seconds": round(seconds[key], 1),
                    "median_us": round(statistics.median(samples[(setting, seed)]) * 1e3, 2),
                }
            )
            logging.info("%s", rows[-1])
    result = {
        "command": "python scripts/ms_overhead.py " + shlex.join(sys.argv[1:]),  # as run, --out included
        "provenance": provenance.record(),
        "rows": rows,
    }
    Path(args.out + ".json").write_text(json.dumps(result, indent=1))
    lines = [
        "# MetaSchedule search settings: tuning time and the kernels found",
        "",
        f"`{result['command']}` on {provenance.cpu_name()}, {tune.available_cores()} cores, code for {mcpu}; "
        f"seeds {', '.join(map(str, args.seeds))}; each setting and seed tunes every kernel from scratch; the best "
        f"kernels are then timed against each other in {args.repeat} interleaved rounds (median).",
        "",
        "| kernel | population / trials per round | seed | tune s | best kernel µs |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['kernel']} | {r['setting']} | {r['seed']} | {r['tune_seconds']} | {r['median_us']} |" for r in rows
    ]
    if len(args.seeds) > 1:
        lines += ["", "Over the seeds (the tuning lottery): slowest / fastest, and geometric mean.", ""]
        for name in args.kernels:
            for setting in args.settings:
                us = [r["median_us"] for r in rows if r["kernel"] == name and r["setting"] == setting]
                gmean = float(np.exp(np.mean(np.log(us))))
                lines.append(f"- {name}, {setting}: {max(us) / min(us):.2f}x apart, geometric mean {gmean:.1f} µs")
    Path(args.out + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
