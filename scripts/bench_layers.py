"""Single conv layers in each form a family creates, tuned and timed: the measurements
that say whether a family pays, and whether the cost models choose it where it does.

For each 3x3 conv shape of the suite (ResNet-50's and VGG-19's, full size, batch 1, pad 1,
constant weights, followed by a ReLU), the direct conv is timed against its Winograd
F(2x2, 3x3) form as ``winograd.egg`` writes it, or with ``--family winograd_cl`` as
``winograd_cl.egg`` does (tiles laid out channels last), or with ``--family winograd_f4`` as
F(4x4, 3x3) (``winograd_f4.egg``), or with ``--family winograd_f4_cm`` as F(4x4, 3x3) with
channel-major products (``winograd_f4_cm.egg``; ``--compare`` times another form too, in the
same process).  With ``--family winograd_1d`` the layers are Inception-v3's 1x7, 7x1, 1x3 and
3x1 convs instead, against their one-dimensional Winograd forms (``winograd_1d.egg``).  Each
form is extracted with ``forms.rewritten_form`` whatever a cost model would choose.
With ``--family winograd_nhwc`` the layers are built in NHWC (OHWI weights), the direct NHWC
conv against ``winograd_nhwc.egg``'s F(4x4, 3x3) in NHWC.
With ``--compare`` the pass chooses among all three forms, and its choice is right where
that form ran within 2% of the fastest.  All are tuned with MetaSchedule (``--trials`` per
kernel, one work database, so a rerun tunes nothing) or built with default schedules
(``--flow default``), checked against each other, and timed interleaved.  Beside each
measurement: the form the pass chooses with its cost model for that flow (``auto``) and
the speedup that model predicts, so a wrong choice shows.

    python scripts/bench_layers.py --flow tuned --trials 32

Code is generated for this machine's CPU (``--mcpu``, as in ``benchmark.py``; ``--mcpu generic``
for plain x86-64, what the results before 2026-11-27 measured); writes
``benchmarks/results/layers-winograd-<llvm|llvm-cpu>-<flow>[-t<trials>][-<tag>].{json,md}``; shapes
already in the JSON are skipped (the run resumes after an interruption).

A layer timed again and again keeps its weights in the CPU's caches, where a model reads each
weight once per inference; Winograd's batched matmuls gain most from that (ResNet-50's 256-channel
one ran 3.6x slower cold, ``cold_kernels.py``).  ``--cold-cache`` tunes with the weights flushed
(``tune.tune(..., cold_cache=True)``, its own database) and times each run after evicting the
caches (``timing.evict_caches``); its results are named ``<llvm-cpu>-cold``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from tvm_eqsat import optimize, provenance, timing, tune
from tvm_eqsat.forms import rewritten_form
from tvm_eqsat.verify import wrong_builds_status

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import MS_LOG_LEVEL  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# (name, channels in, spatial size, channels out[, kernel]): the distinct 3x3 stride-1 convs of
# full-size ResNet-50 (conv2_x..conv5_x), VGG-19 (conv1..conv5) and Inception-v3 (its stem's
# Conv2d_2b, Mixed_5b's two 3x3 convs, Mixed_7b's 448 -> 384), and (for --family
# winograd_1d) the 1x7, 7x1, 1x3 and 3x1 convs of full-size Inception-v3's Mixed_6b..7c blocks
SHAPES = [
    ("resnet50-conv2", 64, 56, 64),
    ("resnet50-conv3", 128, 28, 128),
    ("resnet50-conv4", 256, 14, 256),
    ("resnet50-conv5", 512, 7, 512),
    ("vgg19-conv3", 256, 56, 256),
    ("vgg19-conv4", 512, 28, 512),
    ("vgg19-conv5", 512, 14, 512),
    ("vgg19-conv2", 128, 112, 128),
    ("vgg19-conv1", 64, 224, 64),
    ("inception-2b-3x3", 32, 147, 64),
    ("inception-5b-3x3", 64, 35, 96),
    ("inception-5b-3x3-96", 96, 35, 96),
    ("inception-7b-3x3", 448, 8, 384),
    ("inception-6b-1x7", 128, 17, 128, (1, 7)),
    ("inception-6b-7x1", 128, 17, 192, (7, 1)),
    ("inception-6c-1x7", 160, 17, 160, (1, 7)),
    ("inception-6e-7x1", 192, 17, 192, (7, 1)),
    ("inception-6e-1x7", 192, 17, 192, (1, 7)),
    ("inception-7b-1x3", 384, 8, 384, (1, 3)),
    ("inception-7b-3x1", 384, 8, 384, (3, 1)),
]


def kernel_of(shape) -> tuple[int, int]:
    """A layer's kernel: its fifth entry, 3x3 where it has none."""
    return tuple(shape[4]) if len(shape) > 4 else (3, 3)


def conv_layer(c: int, size: int, k: int, seed: int = 0, kernel: tuple[int, int] = (3, 3), nhwc: bool = False):
    """conv2d(kernel, padded to keep the size) + relu on a (1, c, size, size) input, weights
    bound; and the input.  ``nhwc``: the layer in NHWC, (1, size, size, c), OHWI weights."""
    rng = np.random.default_rng(seed)
    kh, kw = kernel
    w = (rng.standard_normal((k, c, kh, kw)) / np.sqrt(kh * kw * c)).astype("float32")
    shape, layouts = (1, c, size, size), {}
    if nhwc:
        w, shape, layouts = (
            w.transpose(0, 2, 3, 1).copy(),
            (1, size, size, c),
            {"data_layout": "NHWC", "kernel_layout": "OHWI"},
        )
    x = relax.Var("x", relax.TensorType(shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(w), padding=[kh // 2, kw // 2, kh // 2, kw // 2], **layouts))
            out = bb.emit_output(bb.emit(relax.op.nn.relu(y)))
        bb.emit_func_output(out)
    return bb.get(), rng.standard_normal(shape).astype("float32")


def _direct(kernel: tuple[int, int], nhwc: bool = False):
    """The layer's conv (the direct form, a ``kernel`` conv, OIHW or OHWI): avoided, so that
    the Winograd form is extracted."""
    axes = slice(1, 3) if nhwc else slice(2, 4)
    return lambda op, attrs, in_tys: op == "Conv2d" and tuple(in_tys[1].shape[axes]) == tuple(kernel)


# the Winograd families: the rules each is named with (winograd_cl covers even output
# sides only and takes winograd's rule for odd ones), and the rules that make the form
FAMILIES = {
    "winograd": (["winograd"], ("conv2d-winograd-f2",)),
    "winograd_cl": (["winograd_cl", "conv2d-winograd-f2-even"], ("conv2d-winograd-f2-cl",)),
    "winograd_f4": (["conv2d-winograd-f4-cl", "conv2d-winograd-f4-pad"], ("conv2d-winograd-f4-cl",)),
    "winograd_f4_cm": (["winograd_f4_cm", "conv2d-winograd-f4-pad"], ("conv2d-winograd-f4-cm",)),
    "winograd_nhwc": (["winograd_nhwc"], ("conv2d-winograd-f4-nhwc",)),
    "winograd_1d": (
        ["winograd_1d"],
        ("conv2d-winograd-1x3", "conv2d-winograd-3x1", "conv2d-winograd-1x7", "conv2d-winograd-7x1"),
    ),
}


# the families whose layers are built in NHWC (OHWI weights); the others' are NCHW
NHWC_FAMILIES = ("winograd_nhwc",)

FORM_NAMES = {
    "winograd": "Winograd F(2x2, 3x3)",
    "winograd_cl": "Winograd F(2x2, 3x3), channels-last tiles",
    "winograd_f4": "Winograd F(4x4, 3x3), channels-last tiles",
    "winograd_f4_cm": "Winograd F(4x4, 3x3), channel-major products",
    "winograd_nhwc": "Winograd F(4x4, 3x3) in NHWC",
    "winograd_1d": "one-dimensional Winograd F(4, 3) or F(2, 7)",
}


TIE = 0.02  # a choice within 2% of the fastest form's time counts as right


def pass_choice(changes, family: str, compare: str | None = None) -> str:
    """Which form the pass's changes made: ``direct``, ``winograd`` (``family``'s form) or,
    where ``compare`` makes another form, ``compare`` (described changes name F(2x2, 3x3) or
    F(4x4, 3x3), channel-major or not; two F(2x2) forms cannot be told apart, so both count
    as ``winograd``)."""
    made = {_form(s) for s in changes if "Winograd" in s}
    if not made:
        return "direct"
    if compare and _form(FORM_NAMES[family]) != _form(FORM_NAMES[compare]):
        return "winograd" if _form(FORM_NAMES[family]) in made else "compare"
    return "winograd"


def _form(words: str) -> str:
    """The form a change or a family's name describes, as far as changes tell forms apart:
    the tile size, for F(4x4) whether its products are channel-major, and whether it is NHWC's."""
    tile = "F(4x4" if "F(4x4" in words else "F(2x2"
    return tile + (" channel-major" if "channel-major" in words else "") + (" NHWC" if "NHWC" in words else "")


FORMS = ("direct", "winograd", "compare")  # a row's forms: its times are "<form>_ms"


def fastest_ms(row: dict) -> float:
    """The time of the fastest form the row timed."""
    return min(row[f + "_ms"] for f in FORMS if f + "_ms" in row)


def right_choice(row: dict) -> bool:
    """Whether the chosen form ran within ``TIE`` of the fastest form timed."""
    return row[row["pass_choice"] + "_ms"] <= (1 + TIE) * fastest_ms(row)


def winograd_form(mod, family: str = "winograd", kernel: tuple[int, int] = (3, 3)):
    rules, forms = FAMILIES[family]
    new, applied, changed = rewritten_form(mod, rules, avoid=_direct(kernel, family in NHWC_FAMILIES))
    if not changed or not any(applied.get(rule) for rule in forms):
        raise RuntimeError(f"the {family} rules made no Winograd form here: {applied}")
    return new


def choose(mod, family: str, compare: str | None, flow: str, target: dict, cost_model: str = "auto"):
    """The pass's report on one layer, choosing among every form timed (both families'
    rules where one is compared); ``pass_choice`` reads the form from its changes."""
    rules = FAMILIES[family][0] + (FAMILIES[compare][0] if compare else [])
    _, report = optimize(
        mod, tvm.target.Target(target), flow=flow, cost_model=cost_model, rules=list(dict.fromkeys(rules))
    )
    return report


def measure(
    shape,
    flow: str,
    trials: int,
    work_dir: str,
    repeat: int,
    min_ms: float,
    family: str = "winograd",
    compare: str | None = None,
    target: dict | None = None,
    cold: bool = False,
) -> dict:
    """One layer's row.  ``compare``: another Winograd family whose form is timed too, in the
    same process and rounds (a build's speed varies from process to process here).
    ``target``: the llvm target to cost, tune and build for (default: generic x86-64).
    ``cold``: tuned and timed with the caches flushed before each run."""
    target = target or {"kind": "llvm"}
    name, c, size, k = shape[:4]
    kernel = kernel_of(shape)
    if compare and (compare in NHWC_FAMILIES) != (family in NHWC_FAMILIES):
        raise ValueError(f"{family} and {compare} take layers of different layouts: no one layer to compare them on")
    mod, x = conv_layer(c, size, k, kernel=kernel, nhwc=family in NHWC_FAMILIES)
    forms = {"direct": mod, "winograd": winograd_form(mod, family, kernel)}
    if compare:
        forms["compare"] = winograd_form(mod, compare, kernel)
    report = choose(mod, family, compare, flow, target)
    f = report.functions["main"]
    row = {
        "layer": name,
        "shape": [1, c, size, size, k],
        "kernel": list(kernel),
        "pass_choice": pass_choice(f.changes, family, compare),
        "cost_model": report.cost_model,
        "predicted_speedup": f.cost_before / f.cost_after if f.cost_after else None,
    }
    dev, samplers, outs, build_s, executables = tvm.cpu(), {}, {}, {}, {}
    for form, m in forms.items():
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            db = tune.tune(m, target, work_dir, trials, progress=True, cold_cache=cold) if flow == "tuned" else None
            ex = tune.build(m, target, db)
        build_s[form] = round(time.perf_counter() - t, 1)
        executables[form] = ex
        vm, args, samplers[form], _ = timing.tvm_sampler(ex, dev, [x], min_ms, cold=cold)
        outs[form] = vm["main"](*args).numpy()
    ref = outs["direct"]
    row["max_rel_diff"] = max(
        float(np.abs(outs[form] - ref).max() / max(np.abs(ref).max(), 1e-30)) for form in forms if form != "direct"
    )
    times = timing.time_interleaved(samplers, repeat)
    for form, ts in times.items():
        row[f"{form}_ms"] = float(np.median(ts))
        row[f"{form}_p10_p90"] = [float(np.percentile(ts, 10)), float(np.percentile(ts, 90))]
    row["speedup"] = row["direct_ms"] / row["winograd_ms"]
    if compare:
        row["compare_family"] = compare
        row["compare_speedup"] = row["direct_ms"] / row["compare_ms"]
    # where the time goes, kernel by kernel (for the cost models: which part of a form is slow)
    row["kernels_us"] = {
        form: {k: round(us, 1) for k, us in ks.items() if us >= 1.0}
        for form, ks in timing.kernel_times(executables, dev, [x], cold=cold).items()
    }
    row["right_choice"] = right_choice(row)
    row["tune_and_build_s"] = build_s
    return row


def markdown(data: dict) -> str:
    lines = [
        f"# convs, direct vs {FORM_NAMES[data.get('family', 'winograd')]}: "
        f"{'llvm -mcpu=' + data['mcpu'] if data.get('mcpu', 'generic') != 'generic' else 'llvm'}, {data['flow']} flow"
        + (f", {data['trials']} trials per kernel" if data["flow"] == "tuned" else "")
        + (", tuned and timed with cold caches" if data.get("cpu_cache") == "cold" else ""),
        "",
        f"Machine: {data['machine']['machine']}, {data['machine']['cpus']} cores.  Runs: "
        + "; ".join(f"`{c}`" for c in data["commands"])
        + f".  Median of {data['repeat']} "
        "interleaved samples; conv + ReLU, batch 1, padded to keep the size (3x3 unless the layer says), "
        "constant weights" + (", in NHWC (OHWI weights)." if data.get("family") in NHWC_FAMILIES else "."),
        "",
        "| layer | C, HxW, K | direct ms | Winograd ms | Winograd speedup | max rel diff | pass chooses "
        "(model, predicted) | right | compared form: ms (speedup) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def choice(r) -> str:  # the form by its family's name where two Winograd forms were timed
        if "compare_family" not in r or r["pass_choice"] == "direct":
            return r["pass_choice"]
        return r["compare_family"] if r["pass_choice"] == "compare" else data.get("family", "winograd")

    for r in data["rows"]:
        _, c, s, _, k = r["shape"]
        other = (
            f"{r['compare_family']}: {r['compare_ms']:.3f} ({r['compare_speedup']:.2f}x)" if "compare_ms" in r else ""
        )
        kh, kw = r.get("kernel", (3, 3))
        lines.append(
            f"| {r['layer']} | {c}, {s}x{s}, {k}{'' if (kh, kw) == (3, 3) else f', {kh}x{kw}'} | {r['direct_ms']:.3f} | {r['winograd_ms']:.3f} | "
            f"{r['speedup']:.2f}x | {r['max_rel_diff']:.1e} | {choice(r)} ({r['cost_model']}, "
            f"{r['predicted_speedup']:.2f}x) | {'yes' if r['right_choice'] else '**no**'} | {other} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flow", choices=["default", "tuned"], default="tuned")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument(
        "--layers",
        nargs="+",
        default=None,
        choices=[s[0] for s in SHAPES],
        help="default: every layer the family takes (1x3, 3x1, 1x7, 7x1 for winograd_1d, 3x3 for the others)",
    )
    ap.add_argument(
        "--mcpu", default="host", help="the CPU to compile for (default: this one; 'generic': plain x86-64, SSE2)"
    )
    ap.add_argument(
        "--work-dir", default=None, help="MetaSchedule database (default ~/.cache/tvm_eqsat/layers-<target>)"
    )
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--min-ms", type=float, default=50.0)
    ap.add_argument("--family", default="winograd", choices=sorted(FAMILIES), help="the Winograd form to time")
    ap.add_argument(
        "--compare", default=None, choices=sorted(FAMILIES), help="another Winograd form, timed in the same rounds"
    )
    ap.add_argument("--tag", default=None, help="suffix of the results files")
    ap.add_argument(
        "--cold-cache",
        action="store_true",
        help="tune with the weights flushed and time each run after evicting the caches (tuned flow)",
    )
    args = ap.parse_args()
    if args.layers is None:
        args.layers = [s[0] for s in SHAPES if (kernel_of(s) == (3, 3)) != (args.family == "winograd_1d")]
    if args.cold_cache and args.flow != "tuned":
        ap.error("--cold-cache is for the tuned flow (default schedules are not tuned)")
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(MS_LOG_LEVEL)
    try:
        mcpu = tune.resolve_mcpu(args.mcpu)
    except ValueError as err:
        ap.error(str(err))
    name = tune.target_name("llvm", mcpu, args.cold_cache)
    target = tune.llvm_target(mcpu)
    work_dir = args.work_dir or str(Path.home() / ".cache" / "tvm_eqsat" / f"layers-{name}")
    stem = f"layers-winograd-{name}-{args.flow}" + (f"-t{args.trials}" if args.flow == "tuned" else "")
    stem += f"-{args.tag}" if args.tag else ""
    out = ROOT / "benchmarks" / "results" / stem
    data = json.loads(out.with_suffix(".json").read_text()) if out.with_suffix(".json").exists() else {"rows": []}
    data.update(
        family=args.family,
        mcpu=mcpu,
        flow=args.flow,
        trials=args.trials,
        repeat=args.repeat,
        cpu_cache="cold" if args.cold_cache else "warm",
        machine=provenance.machine(),
    )
    data.setdefault("commands", []).append("python " + " ".join(sys.argv))  # each run that added rows
    done = {r["layer"] for r in data["rows"]}
    for shape in SHAPES:
        if shape[0] not in args.layers or shape[0] in done:
            continue
        print(f"{shape[0]}: C={shape[1]} {shape[2]}x{shape[2]} K={shape[3]}", file=sys.stderr, flush=True)
        row = measure(
            shape,
            args.flow,
            args.trials,
            work_dir,
            args.repeat,
            args.min_ms,
            args.family,
            args.compare,
            target,
            args.cold_cache,
        )
        print(json.dumps(row), flush=True)
        data["rows"].append(row)
        provenance.write_results(out, data, markdown)
    raise SystemExit(wrong_builds_status({r["layer"]: r["max_rel_diff"] for r in data["rows"]}, "the direct conv"))


if __name__ == "__main__":
    main()
