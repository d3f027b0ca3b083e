"""Convs alone in three layouts, each tuned with several seeds: NCHW, NHWC and channel-blocked
NCHW16c (``nchwc.egg``: TOPI's conv2d_NCHWc, the kernel the pass emits), the figure the
roofline prices the blocked form with, and whether the pass takes it.

Each layer (batch 1, constant weights, a ReLU after the conv, as a folded batch norm leaves
ResNet-50's convs) is built with its input already in the layout, so each build times the
conv kernel alone; the layout copies at a region's boundaries are priced apart (the roofline
prices a copy by its traffic).  Each form is tuned with MetaSchedule once per seed
(``--seeds``; one database per layer, form and seed under ``--work-root``, so a rerun tunes
nothing), checked against the NCHW build, and all builds timed interleaved.  The blocked
conv's time over the NCHW one's, geometric mean over the seeds and then the layers, is
``cost.Machine.nchwc_conv``; ``--calibrate`` writes it into this CPU's calibration file:

    python scripts/bench_nchwc.py --trials 64 [--calibrate]

to ``benchmarks/results/layers-nchwc-<target>-t<trials>.{json,md}``.  ``--depthwise`` does the same
for MobileNet-v2's depthwise convs (the blocked one: te_ops.py's kernel), whose ratio is
``Machine.nchwc_depthwise`` (``layers-nchwc-dw-...``).  Run it with nothing else
on the machine.
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
from tvm_eqsat import calibration, provenance, te_ops, timing, tune
from tvm_eqsat.paths import data_dir
from tvm_eqsat.verify import wrong_builds_status

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import MS_LOG_LEVEL, POPULATION, machine_info, make_target  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
BLOCK = 16  # nchwc.egg's block: one AVX-512 vector of float32
FORMS = ("nchw", "nhwc", "nchwc")
# (name, channels in, spatial size, channels out, kernel side): ResNet-50's bottleneck convs,
# full size, stride 1 (its 3x3 ones as the pass leaves them where Winograd does not pay)
LAYERS = [
    ("r50-1x1-256-64-56", 256, 56, 64, 1),
    ("r50-1x1-64-256-56", 64, 56, 256, 1),
    ("r50-1x1-512-128-28", 512, 28, 128, 1),
    ("r50-3x3-128-28", 128, 28, 128, 3),
    ("r50-1x1-1024-256-14", 1024, 14, 256, 1),
    ("r50-3x3-256-14", 256, 14, 256, 3),
    ("r50-1x1-256-1024-14", 256, 14, 1024, 1),
]


# (name, channels, spatial size, stride): MobileNet-v2's depthwise 3x3 convs (``--depthwise``),
# full size, as nchwc.egg's depthwise-conv2d-nchwc blocks them (channels in multiples of 16)
DEPTHWISE_LAYERS = [
    ("mb2-dw-144-56-s1", 144, 56, 1),
    ("mb2-dw-144-56-s2", 144, 56, 2),
    ("mb2-dw-192-28-s1", 192, 28, 1),
    ("mb2-dw-384-14-s1", 384, 14, 1),
    ("mb2-dw-960-7-s1", 960, 7, 1),
]


def conv_layer(form: str, c: int, size: int, k: int, kernel: int, seed: int = 0, stride: int = 1, groups: int = 1):
    """conv2d (padded by half the kernel) + relu with its input in ``form``'s layout, and
    that input; the weights are the same numbers in every form.  ``groups == c == k``: a
    depthwise conv (blocked: te_ops.py's depthwise_conv2d_nchwc)."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, c // groups, kernel, kernel)) / np.sqrt(kernel * kernel * c / groups)).astype(
        "float32"
    )
    x = rng.standard_normal((1, c, size, size)).astype("float32")
    pad = kernel // 2
    if form == "nhwc":
        x, w = x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy()
    elif form == "nchwc":
        x = x.reshape(1, c // BLOCK, BLOCK, size, size).transpose(0, 1, 3, 4, 2).copy()
        if groups == 1:
            w = w.reshape(k // BLOCK, BLOCK, c // BLOCK, BLOCK, kernel, kernel).transpose(0, 2, 4, 5, 3, 1).copy()
        else:  # (C, 1, kh, kw) -> (1, C/b, kh, kw, b)
            w = w.reshape(1, c // BLOCK, BLOCK, kernel, kernel).transpose(0, 1, 3, 4, 2).copy()
    var = relax.Var("x", relax.TensorType(x.shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [var]):
        with bb.dataflow():
            if form == "nchwc":
                name = "conv2d_nchwc" if groups == 1 else "depthwise_conv2d_nchwc"
                call = te_ops.call_n(name, [var, relax.const(w)], (stride, stride), (pad,) * 4, (1, 1), "")
                y = bb.emit(call)
            else:
                layouts = {"data_layout": "NHWC", "kernel_layout": "OHWI"} if form == "nhwc" else {}
                conv = relax.op.nn.conv2d(var, relax.const(w), strides=stride, padding=pad, groups=groups, **layouts)
                y = bb.emit(conv)
            out = bb.emit_output(bb.emit(relax.op.nn.relu(y)))
        bb.emit_func_output(out)
    return te_ops.attach(bb.get()), x


def as_nchw(form: str, out: np.ndarray) -> np.ndarray:
    if form == "nhwc":
        return out.transpose(0, 3, 1, 2)
    if form == "nchwc":
        n, blocks, h, w, b = out.shape
        return out.transpose(0, 1, 4, 2, 3).reshape(n, blocks * b, h, w)
    return out


def geomean(values) -> float:
    return float(np.exp(np.mean(np.log(list(values)))))


def as_layer(depthwise_layer) -> tuple:
    """A ``DEPTHWISE_LAYERS`` entry as a ``LAYERS`` one plus its stride and groups."""
    name, c, size, stride = depthwise_layer
    return (name, c, size, c, 3, stride, c)


def measure(layer, target, work_root: Path, trials: int, seeds: list[int], repeat: int) -> dict:
    """One layer's row: each (form, seed) build's median time, the blocked conv's ratio."""
    name, c, size, k, kernel, *strided = layer
    dev, samplers, outs = tvm.cpu(), {}, {}
    for form in FORMS:
        mod, x = conv_layer(form, c, size, k, kernel, 0, *strided)
        for seed in seeds:
            work = work_root / f"{name}-{form}-t{trials}-s{seed}"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                db = tune.tune(mod, target, work, trials, seed=seed, population=POPULATION, progress=True)
                ex = tune.build(mod, target, db)
            vm, args, samplers[(form, seed)], _ = timing.tvm_sampler(ex, dev, [x], 20.0)
            outs[(form, seed)] = as_nchw(form, vm["main"](*args).numpy())
    ref = outs[("nchw", seeds[0])]
    times = timing.time_interleaved(samplers, repeat)
    ms = {key: float(np.median(ts)) for key, ts in times.items()}
    mean = {form: geomean(ms[(form, s)] for s in seeds) for form in FORMS}
    return {
        "layer": name,
        "shape": [1, c, size, size, k, kernel, *strided],
        "ms": {form: [ms[(form, s)] for s in seeds] for form in FORMS},
        "nchwc_over_nchw": mean["nchwc"] / mean["nchw"],
        "nhwc_over_nchw": mean["nhwc"] / mean["nchw"],
        "speedup_over_best": min(mean["nchw"], mean["nhwc"]) / mean["nchwc"],
        "max_rel_diff": max(float(np.abs(o - ref).max() / np.abs(ref).max()) for o in outs.values()),
    }


def pass_choice(layer, target) -> dict:
    """Whether the pass, with the nchwc family named, runs the NCHW layer blocked."""
    name, c, size, k, kernel, *strided = layer
    mod, _ = conv_layer("nchw", c, size, k, kernel, 0, *strided)
    _, report = tvm_eqsat.optimize(mod, target, flow="tuned", rules=["nchwc"])
    fn = report.functions["main"]
    return {"pass_blocks": any("NCHW16c" in s for s in fn.changes), "predicted_speedup": fn.speedup}


def markdown(data: dict) -> str:
    seeds = ", ".join(str(s) for s in data["seeds"])
    figure = data.get("figure", "nchwc_conv")  # results written before --depthwise name none
    lines = [
        f"# Convs in NCHW, NHWC and NCHW16c: llvm -mcpu={data['mcpu']}, tuned flow, {data['trials']} trials per kernel",
        "",
        f"Machine: {data['machine']['machine']}, {data['machine']['cpus']} cores; {data['date']}.  "
        f"Command: `{data['command']}`.  Each form tuned once per seed ({seeds}) with its input already in "
        f"its layout, every build timed interleaved, median of {data['repeat']} samples in ms.  Ratios: "
        "geometric means over the seeds.  Blocked over NCHW, geometric mean over the layers (`Machine."
        f"{figure}`): **{data[figure]:.3f}**.  Diff: the largest difference from the first NCHW "
        "build, relative to its output's largest magnitude.",
        "",
        "| layer | C, HxW, K, kernel, stride, groups | NCHW ms | NHWC ms | NCHW16c ms | NHWC / NCHW | NCHW16c / NCHW "
        "| NCHW16c speedup over the better other | diff | pass blocks it (predicted) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        _, c, s, _, k, kernel, *strided = r["shape"]
        stride, groups = strided or (1, 1)
        cells = [" / ".join(f"{t:.3f}" for t in r["ms"][form]) for form in FORMS]
        choice = (
            "-" if "pass_blocks" not in r else f"{'yes' if r['pass_blocks'] else 'no'} ({r['predicted_speedup']:.2f}x)"
        )
        lines.append(
            f"| {r['layer']} | {c}, {s}x{s}, {k}, {kernel}x{kernel}, {stride}, {groups} | {' | '.join(cells)} | {r['nhwc_over_nchw']:.2f} "
            f"| {r['nchwc_over_nchw']:.2f} | {r['speedup_over_best']:.2f}x | {r['max_rel_diff']:.1e} | {choice} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", nargs="+", help="only these layers (names)")
    p.add_argument("--mcpu", default="host")
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--work-root", default=os.path.expanduser("~/.cache/tvm_eqsat/nchwc"))
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument(
        "--depthwise",
        action="store_true",
        help="MobileNet-v2's depthwise convs (DEPTHWISE_LAYERS), whose ratio is nchwc_depthwise",
    )
    p.add_argument(
        "--calibrate", action="store_true", help="write nchwc_conv (nchwc_depthwise) into this CPU's calibration file"
    )
    args = p.parse_args(argv)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(MS_LOG_LEVEL)

    known = [as_layer(layer) for layer in DEPTHWISE_LAYERS] if args.depthwise else LAYERS
    layers = [layer for layer in known if not args.layers or layer[0] in args.layers]
    if not layers:
        p.error(f"no layer is named {args.layers}: {[layer[0] for layer in known]}")
    figure = "nchwc_depthwise" if args.depthwise else "nchwc_conv"
    tune.use_all_cores()
    mcpu = tune.resolve_mcpu(args.mcpu)
    target = make_target("llvm", "", mcpu)
    name = tune.target_name("llvm", mcpu)
    rows, now = [], datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    for layer in layers:
        rows.append(measure(layer, target, Path(args.work_root) / name, args.trials, args.seeds, args.repeat))
        print(layer[0], f"blocked {rows[-1]['nchwc_over_nchw']:.2f} of NCHW", flush=True)
    ratio = geomean(r["nchwc_over_nchw"] for r in rows)
    stem = Path(args.out_dir) / f"layers-nchwc{'-dw' if args.depthwise else ''}-{name}-t{args.trials}"
    if args.calibrate:  # before the pass's choices, which it prices
        path = data_dir("cost_models") / "machines" / f"{mcpu}.json"
        calibration.record_figures(path, {figure: round(ratio, 3)}, Path(f"{stem}.json"), ROOT, now)
        print(f"{figure} = {ratio:.3f} -> {path}")
    for layer, row in zip(layers, rows, strict=True):
        row.update(pass_choice(layer, target))
    data = {
        "command": "python scripts/bench_nchwc.py " + shlex.join(argv),
        "date": now,
        "machine": machine_info(target),
        "mcpu": mcpu,
        "trials": args.trials,
        "seeds": args.seeds,
        "repeat": args.repeat,
        "figure": figure,
        figure: ratio,
        "rows": rows,
    }
    provenance.write_results(stem, data, markdown)
    print(f"written {stem}.json and .md")
    return wrong_builds_status({r["layer"]: r["max_rel_diff"] for r in rows}, "the NCHW conv")


if __name__ == "__main__":
    sys.exit(main())
