"""Strided convs alone, direct and in a rule's stride-1 form, each tuned with several seeds:
does the rewrite pay, above the tuner's lottery, and does the pass choose it?

Three studies (``--study``), each a list of layers (batch 1, constant weights, the bias add a
folded batch norm leaves, the stems' relu):

- ``subsample`` (subsample.egg): the stride-2 1x1 shortcut convs of full-size ResNet-50 and
  ResNeXt-50, against the same conv at stride 1 on a strided slice of the input;
- ``space_to_depth`` (space_to_depth.egg): the stride-2 stems of the suite's CNNs (ResNet-50's
  7x7, Inception-v3's 3x3) and a mid-network 3x3 stride-2 conv of ResNet-50, against a stride-1
  conv over the input's four 2x2 phases as channels;
- ``polyphase`` (polyphase.egg): the stride-2 3x3 convs of ResNet-50's stages and Inception-v3's
  reduction blocks and stem, against four stride-1 convs, one over each 2x2 phase of the input,
  summed (the stem's 3 channels are below ``cost.STRIDED_3X3_MIN_CHANNELS``: not priced).

For each layer the direct conv and the rule's form as the rule writes it (``forms.
rewritten_form``) are tuned with MetaSchedule once per seed (``--seeds``; one database per
layer, form and seed under ``--work-root``, so a rerun tunes nothing), checked against each
other, and all builds timed interleaved.  Beside them: each form's kernels as its builds run
them (``timing.kernel_times``, first seed), the strided conv's rate as a share of the stride-1
conv's (its FLOPs over its time against the other's, the rewrite's copy kernel taken off: the
figure ``cost.Machine`` holds, ``strided_1x1_share``, ``strided_share`` or ``strided_3x3_share``,
is their geometric mean over the layers it prices: the 1x1 convs, the 7x7 stem, the 3x3 convs),
and the pass's choice and predicted speedup for the target (``--calibrate`` writes the figure into this CPU's file):

    python scripts/bench_strided.py --cold-cache [--study space_to_depth] [--calibrate]

to ``benchmarks/results/strided-<1x1|s2d|poly>-<target>[-cold]-t<trials>.{json,md}``.  Run it with
nothing else on the machine.
"""

from __future__ import annotations

import argparse
import dataclasses
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
from tvm_eqsat import calibration, provenance, timing, tune
from tvm_eqsat.cost import STRIDED_CONVS, StridedConv
from tvm_eqsat.forms import rewritten_form
from tvm_eqsat.graph import module_graphs
from tvm_eqsat.paths import data_dir
from tvm_eqsat.verify import wrong_builds_status

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import MS_LOG_LEVEL, machine_info, make_target  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@dataclasses.dataclass(frozen=True)
class Study:
    """One rule's stride-1 form of strided convs, and the layers it is measured on."""

    rule: str
    form: str  # the rewritten form's name in the rows
    strided: StridedConv  # the strided convs its figure prices, which rewritten_form must not keep
    file: str  # the results' file name, before the target's
    # (name, channels in, input side, channels out, kernel side, padding) at stride 2
    layers: tuple[tuple[str, int, int, int, int, int], ...]


_STRIDED = {kind.family: kind for kind in STRIDED_CONVS}
STUDIES = {
    "subsample": Study(
        "conv2d-1x1-strided-subsample",
        "subsample",
        _STRIDED["subsample"],
        "strided-1x1",
        (
            ("resnet50-layer2-shortcut", 256, 56, 512, 1, 0),
            ("resnet50-layer3-shortcut", 512, 28, 1024, 1, 0),
            ("resnet50-layer4-shortcut", 1024, 14, 2048, 1, 0),
        ),
    ),
    "space_to_depth": Study(
        "conv2d-stride2-space-to-depth",
        "s2d",
        _STRIDED["space_to_depth"],
        "strided-s2d",
        (
            ("resnet50-stem", 3, 224, 64, 7, 3),
            ("inception-v3-stem", 3, 299, 32, 3, 0),
            ("resnet50-layer2-3x3", 128, 56, 128, 3, 1),
        ),
    ),
    "polyphase": Study(
        "conv2d-stride2-polyphase",
        "polyphase",
        _STRIDED["polyphase"],
        "strided-poly",
        (
            ("resnet50-layer2-3x3", 128, 56, 128, 3, 1),
            ("resnet50-layer3-3x3", 256, 28, 256, 3, 1),
            ("resnet50-layer4-3x3", 512, 14, 512, 3, 1),
            ("inception-v3-mixed6a-3x3", 288, 35, 384, 3, 0),
            ("inception-v3-mixed7a-3x3", 192, 17, 320, 3, 0),
            ("inception-v3-stem", 3, 299, 32, 3, 0),
        ),
    ),
}


def strided_layer(c: int, size: int, k: int, kernel: int = 1, pad: int = 0, seed: int = 0):
    """conv2d(kernel x kernel, stride 2, padding pad) + a per-channel bias on a (1, c, size, size)
    input, weights bound, then a relu where the conv is a stem (c = 3); and the input."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((k, c, kernel, kernel)) / np.sqrt(c * kernel * kernel)).astype("float32")
    b = rng.standard_normal((1, k, 1, 1)).astype("float32")
    x = relax.Var("x", relax.TensorType((1, c, size, size), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(
                relax.op.add(bb.emit(relax.op.nn.conv2d(x, relax.const(w), strides=2, padding=pad)), relax.const(b))
            )
            if c == 3:
                y = bb.emit(relax.op.nn.relu(y))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get(), rng.standard_normal((1, c, size, size)).astype("float32")


def rewritten(mod: tvm.IRModule, study: Study) -> tvm.IRModule:
    """The layer in the study's form, whatever a cost model would choose."""
    new, applied, changed = rewritten_form(mod, [study.rule], avoid=study.strided.matches)
    if not changed or not applied.get(study.rule):
        raise RuntimeError(f"{study.rule} made no {study.form} form here: {applied}")
    return new


def conv_gflop(mod: tvm.IRModule) -> float:
    """The multiply-adds of the module's convs (polyphase.egg's form has four), times 2, in GFLOP."""
    found = []

    def visit(e):
        if isinstance(e, relax.Call) and getattr(e.op, "name", "") == "relax.nn.conv2d":
            out = [int(d) for d in e.ty.shape]
            w = [int(d) for d in e.args[1].ty.shape]
            found.append(2.0 * np.prod(out) * np.prod(w[1:]) / 1e9)

    relax.analysis.post_order_visit(mod["main"], visit)
    return float(sum(found))


def priced(mod: tvm.IRModule, study: Study) -> bool:
    """Whether the study's figure prices the layer's conv: its cost predicate (``study.strided.matches``)
    on the conv node of the layer's graph, as the roofline sees it."""
    (graph,) = module_graphs(mod)
    return any(study.strided.matches(n.op, n.attrs, [graph.nodes[i].ty for i in n.inputs]) for n in graph.nodes)


def measure(
    layer, study: Study, target, work_root: Path, trials: int, seeds: list[int], cold: bool, repeat: int
) -> dict:
    """One layer's row: each (form, seed) build's median time, and the pass's choice."""
    name, c, size, k, kernel, pad = layer
    mod, x = strided_layer(c, size, k, kernel, pad)
    forms = {"direct": mod, study.form: rewritten(mod, study)}
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
    copy_ms = sum(us for kname, us in kernels[study.form].items() if "conv2d" not in kname) / 1e3

    def geomean(form):
        return float(np.exp(np.mean([np.log(ms[(form, s)]) for s in seeds])))

    flop_ratio = conv_gflop(forms[study.form]) / conv_gflop(mod)
    return {
        "layer": name,
        "shape": [1, c, size, size, k, kernel, pad],
        "ms": {form: [ms[(form, s)] for s in seeds] for form in forms},
        "speedup": geomean("direct") / geomean(study.form),
        "kernels_us": {form: {kn: round(us, 1) for kn, us in ks.items() if us >= 1.0} for form, ks in kernels.items()},
        "copy_ms": copy_ms,
        "flop_ratio": flop_ratio,
        "strided_share": (geomean(study.form) - copy_ms) / geomean("direct") / flop_ratio,
        "priced": priced(mod, study),
        "max_rel_diff": max(float(np.abs(o - ref).max() / np.abs(ref).max()) for o in outs.values()),
    }


def pass_choice(layer, study: Study, target) -> dict:
    """Whether the pass makes the study's rewrite of the layer, and its predicted speedup."""
    mod, _ = strided_layer(*layer[1:])
    _, report = tvm_eqsat.optimize(mod, target, flow="tuned")
    f = report.functions["main"]
    return {
        "pass_rewrites": bool(f.rules_applied.get(study.rule)) and any(study.strided.form in s for s in f.changes),
        "predicted_speedup": f.cost_before / f.cost_after if f.cost_after else None,
    }


def mean_share(rows: list[dict]) -> float | None:
    """The geometric mean of the priced layers' conv shares, to two places: the figure the
    roofline keeps (None: no layer of the rows is one the figure prices)."""
    shares = [r["strided_share"] for r in rows if r["priced"]]
    return round(float(np.exp(np.mean(np.log(shares)))), 2) if shares else None


def markdown(data: dict) -> str:
    study = STUDIES[data["study"]]
    seeds = ", ".join(str(s) for s in data["seeds"])
    share = mean_share(data["rows"])
    lines = [
        f"# Strided convs, direct vs {study.rule}: llvm -mcpu={data['mcpu']}, tuned flow, "
        f"{data['trials']} trials per kernel" + (", tuned and timed with cold caches" if data["cold_cache"] else ""),
        "",
        f"Machine: {data['machine']['machine']}, {data['machine']['cpus']} cores; {data['date']}.  "
        f"Command: `{data['command']}`.  Each form tuned once per seed ({seeds}), every build timed "
        f"interleaved, median of {data['repeat']} samples in ms.  Speedup: the geometric mean over the seeds "
        f"of the direct conv's time over the {study.form} form's (its copy kernel included).  Conv share: the "
        "strided conv's FLOP rate over the stride-1 conv's, the same geometric means with the copy kernel's "
        "time (first seed, as its build ran it) taken off the rewritten form's and the FLOPs each conv does "
        f"(FLOPs: the stride-1 conv's over the direct one's).  Their geometric mean over the layers that "
        f"`{study.strided.share}` prices (priced: yes): **{share if share is not None else '-'}**.  Diff: the largest "
        "difference from the first direct build, relative to its output's largest magnitude.",
        "",
        f"| layer | C, HxW, K, kernel, pad | direct ms | {study.form} ms | speedup | FLOPs | conv share | priced "
        "| diff | pass rewrites (predicted) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["rows"]:
        _, c, s, _, k, kernel, pad = r["shape"]
        d = " / ".join(f"{t:.3f}" for t in r["ms"]["direct"])
        alt = " / ".join(f"{t:.3f}" for t in r["ms"][study.form])
        lines.append(
            f"| {r['layer']} | {c}, {s}x{s}, {k}, {kernel}x{kernel}, {pad} | {d} | {alt} | {r['speedup']:.2f}x | "
            f"{r['flop_ratio']:.2f}x | {r['strided_share']:.2f} | {'yes' if r['priced'] else 'no'} | "
            f"{r['max_rel_diff']:.1e} | "
            f"{'yes' if r['pass_rewrites'] else 'no'} ({r['predicted_speedup']:.2f}x) |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--study", choices=sorted(STUDIES), default="subsample")
    p.add_argument("--layers", nargs="+", help="only these layers of the study (names)")
    p.add_argument("--mcpu", default="host")
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--cold-cache", action="store_true", help="tune and time with the caches flushed")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--work-root", default=os.path.expanduser("~/.cache/tvm_eqsat/strided"))
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    p.add_argument(
        "--calibrate",
        action="store_true",
        help="write the layers' geometric-mean share into this CPU's calibration file (cost_models/machines/)",
    )
    args = p.parse_args(argv)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(MS_LOG_LEVEL)

    study = STUDIES[args.study]
    layers = [layer for layer in study.layers if not args.layers or layer[0] in args.layers]
    if not layers:
        p.error(f"no layer of {args.study} is named {args.layers}: {[layer[0] for layer in study.layers]}")
    tune.use_all_cores()
    mcpu = tune.resolve_mcpu(args.mcpu)
    target = make_target("llvm", "", mcpu)
    name = tune.target_name("llvm", mcpu, args.cold_cache)
    rows, now = [], datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    for layer in layers:
        row = measure(
            layer, study, target, Path(args.work_root) / name, args.trials, args.seeds, args.cold_cache, args.repeat
        )
        rows.append(row)
        print(layer[0], f"{row['speedup']:.2f}x", f"share {row['strided_share']:.2f}", flush=True)
    share = mean_share(rows)
    if args.calibrate and share is None:
        print(f"no layer run is one {study.strided.share} prices: the calibration is left as it was")
    elif args.calibrate:  # before the pass's choices, which it prices
        path = data_dir("cost_models") / "machines" / f"{mcpu}.json"
        results = Path(args.out_dir) / f"{study.file}-{name}-t{args.trials}.json"
        calibration.record_figures(path, {study.strided.share: share}, results, ROOT, now)
        print(f"{study.strided.share} = {share} -> {path}")
    for layer, row in zip(layers, rows, strict=True):
        row.update(pass_choice(layer, study, target))
    data = {
        "command": "python scripts/bench_strided.py " + shlex.join(argv),
        "date": now,
        "machine": machine_info(target),
        "study": args.study,
        "mcpu": mcpu,
        "trials": args.trials,
        "seeds": args.seeds,
        "cold_cache": args.cold_cache,
        "repeat": args.repeat,
        "rows": rows,
    }
    stem = Path(args.out_dir) / f"{study.file}-{name}-t{args.trials}"
    provenance.write_results(stem, data, markdown)
    print(f"written {stem}.json and .md")
    return wrong_builds_status({r["layer"]: r["max_rel_diff"] for r in rows}, "the strided conv")


if __name__ == "__main__":
    sys.exit(main())
