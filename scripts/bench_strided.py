"""Strided 1x1 convs alone, direct and in subsample.egg's form, each tuned with several seeds:
does subsampling first pay, above the tuner's lottery, and does the pass choose it?

For each layer (the stride-2 1x1 shortcut convs of full-size ResNet-50 and ResNeXt-50, batch
1, constant weights, a bias add after it as the folded batch norm leaves), the direct conv and
its subsample form as the rule writes it (``forms.rewritten_form``) are tuned with MetaSchedule
once per seed (``--seeds``; one database per layer, form and seed under ``--work-root``, so a
rerun tunes nothing), checked against each other, and all builds timed interleaved.  Beside
them: each form's kernels as its builds run them (``timing.kernel_times``, first seed), the
strided conv's rate as a share of the stride-1 conv's (the figure ``cost.Machine.
strided_1x1_share`` holds: their geometric mean over the layers), and the pass's choice and predicted speedup for the target:

    python scripts/bench_strided.py --cold-cache

to ``benchmarks/results/strided-1x1-<target>[-cold]-t<trials>.{json,md}``.  Run it with nothing
else on the machine.
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

import tvm_eqsat
from tvm_eqsat import provenance, timing, tune
from tvm_eqsat.cost import strided_1x1
from tvm_eqsat.forms import rewritten_form

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import MS_LOG_LEVEL, machine_info, make_target  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RULE = "conv2d-1x1-strided-subsample"
# (name, channels in, input side, channels out): the stride-2 1x1 convs of both models
LAYERS = [
    ("resnet50-layer2-shortcut", 256, 56, 512),
    ("resnet50-layer3-shortcut", 512, 28, 1024),
    ("resnet50-layer4-shortcut", 1024, 14, 2048),
]
FORMS = ("direct", "subsample")


def strided_layer(c: int, size: int, k: int, seed: int = 0):
    """conv2d(1x1, stride 2) + a per-channel bias on a (1, c, size, size) input, weights bound;
    and the input."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, c, 1, 1)) / np.sqrt(c)).astype("float32")
    b = rng.standard_normal((1, k, 1, 1)).astype("float32")
    x = relax.Var("x", relax.TensorType((1, c, size, size), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w), strides=2))
            out = bb.emit_output(bb.emit(relax.op.add(y, relax.const(b))))
        bb.emit_func_output(out)
    return bb.get(), rng.standard_normal((1, c, size, size)).astype("float32")


def subsample_form(mod: tvm.IRModule) -> tvm.IRModule:
    new, applied, changed = rewritten_form(mod, [RULE], avoid=strided_1x1)
    if not changed or not applied.get(RULE):
        raise RuntimeError(f"{RULE} made no subsample form here: {applied}")
    return new


def measure(layer, target, work_root: Path, trials: int, seeds: list[int], cold: bool, repeat: int) -> dict:
    """One layer's row: each (form, seed) build's median time, and the pass's choice."""
    name, c, size, k = layer
    mod, x = strided_layer(c, size, k)
    forms = {"direct": mod, "subsample": subsample_form(mod)}
    _, report = tvm_eqsat.optimize(mod, target, flow="tuned")
    f = report.functions["main"]
    dev, samplers, outs, first = tvm.cpu(), {}, {}, {}
    for form, m in forms.items():
        for seed in seeds:
            work = work_root / f"{name}-{form}-t{trials}-s{seed}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                db = tune.tune(m, target, work, trials, seed=seed, cold_cache=cold, progress=True)
                ex = tune.build(m, target, db)
            vm, args, samplers[(form, seed)], _ = timing.tvm_sampler(ex, dev, [x], 20.0, cold=cold)
            outs[(form, seed)] = vm["main"](*args).numpy()
            first.setdefault(form, ex)
    ref = outs[("direct", seeds[0])]
    times = timing.time_interleaved(samplers, repeat)
    ms = {key: float(np.median(ts)) for key, ts in times.items()}
    kernels = timing.kernel_times(first, dev, [x], cold=cold)
    slice_ms = sum(us for kname, us in kernels["subsample"].items() if "strided_slice" in kname) / 1e3

    def geomean(form):
        return float(np.exp(np.mean([np.log(ms[(form, s)]) for s in seeds])))

    return {
        "layer": name,
        "shape": [1, c, size, size, k],
        "ms": {form: [ms[(form, s)] for s in seeds] for form in FORMS},
        "speedup": geomean("direct") / geomean("subsample"),
        "kernels_us": {form: {kn: round(us, 1) for kn, us in ks.items() if us >= 1.0} for form, ks in kernels.items()},
        "slice_ms": slice_ms,
        "strided_share": (geomean("subsample") - slice_ms) / geomean("direct"),
        "max_abs_diff": max(float(np.abs(o - ref).max()) for o in outs.values()),
        "pass_subsamples": bool(f.rules_applied.get(RULE)) and any("subsampled" in s for s in f.changes),
        "predicted_speedup": f.cost_before / f.cost_after if f.cost_after else None,
    }


def markdown(data: dict) -> str:
    seeds = ", ".join(str(s) for s in data["seeds"])
    lines = [
        f"# Strided 1x1 convs, direct vs subsampled first: llvm -mcpu={data['mcpu']}, tuned flow, "
        f"{data['trials']} trials per kernel" + (", tuned and timed with cold caches" if data["cold_cache"] else ""),
        "",
        f"Machine: {data['machine']['machine']}, {data['machine']['cpus']} cores; {data['date']}.  "
        f"Command: `{data['command']}`.  Each form tuned once per seed ({seeds}), every build timed "
        f"interleaved, median of {data['repeat']} samples in ms.  Speedup: the geometric mean over the seeds "
        "of the direct conv's time over the subsample form's (its slice kernel included).  Conv share: the "
        "strided conv's rate over the stride-1 conv's, the same geometric means with the slice kernel's time "
        "(first seed, as its build ran it) taken off the subsample form's.",
        "",
        "| layer | C, HxW, K | direct ms | subsample ms | speedup | conv share | max abs diff | pass subsamples "
        "(predicted) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        _, c, s, _, k = r["shape"]
        d = " / ".join(f"{t:.3f}" for t in r["ms"]["direct"])
        sub = " / ".join(f"{t:.3f}" for t in r["ms"]["subsample"])
        lines.append(
            f"| {r['layer']} | {c}, {s}x{s}, {k} | {d} | {sub} | {r['speedup']:.2f}x | {r['strided_share']:.2f} | "
            f"{r['max_abs_diff']:.1e} | {'yes' if r['pass_subsamples'] else 'no'} ({r['predicted_speedup']:.2f}x) |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mcpu", default="host")
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--cold-cache", action="store_true", help="tune and time with the caches flushed")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--work-root", default=os.path.expanduser("~/.cache/tvm_eqsat/strided-1x1"))
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args(argv)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(MS_LOG_LEVEL)

    tune.use_all_cores()
    mcpu = tune.resolve_mcpu(args.mcpu)
    target = make_target("llvm", "", mcpu)
    name = tune.target_name("llvm", mcpu, args.cold_cache)
    rows = []
    for layer in LAYERS:
        row = measure(layer, target, Path(args.work_root) / name, args.trials, args.seeds, args.cold_cache, args.repeat)
        rows.append(row)
        print(layer[0], f"{row['speedup']:.2f}x", f"share {row['strided_share']:.2f}", flush=True)
    data = {
        "command": "python scripts/bench_strided.py " + shlex.join(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(target),
        "mcpu": mcpu,
        "trials": args.trials,
        "seeds": args.seeds,
        "cold_cache": args.cold_cache,
        "repeat": args.repeat,
        "rows": rows,
    }
    stem = Path(args.out_dir) / f"strided-1x1-{name}-t{args.trials}"
    provenance.write_results(stem, data, markdown)
    print(f"written {stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
