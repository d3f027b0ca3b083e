"""Each convolution's time inside the model, per build: the variants of one model built
(tuned flow: from one MetaSchedule database), their kernels timed in place
(``timing.kernel_times``), and each conv matched across the builds by its shape in NCHW
terms, whatever layout it runs in and whatever epilogue is fused into it.

A tuner's record times a kernel alone, in a loop, with its weights hot in the caches; in
the model the weights come from memory and the kernel's neighbours evict each other. On the
Xeon at 32 trials, Inception-v3's 448 -> 384 Winograd product was recorded at 519 us and ran
2.18 ms a call in the model. These in-model times are the labels a layout or algorithm
choice needs (is this conv faster in NHWC, or with its batch norm folded, where it runs?):

    python scripts/conv_times.py inception-v3 --flow tuned --mcpu emeraldrapids \\
        --variants stock stock+nhwc eqsat --out benchmarks/results/conv-times-inception-v3
    python scripts/conv_times.py resnet50 --small --variants stock stock+nhwc   # default schedules

The tuned flow first copies in the committed kernels of this target at ``--trials``
(``benchmarks/tuning/``, unless ``--no-seed``) and tunes whatever kernel the database
still lacks (``--trials`` each), as ``benchmark.py`` does. Writes ``<out>.json`` and ``<out>.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import tvm
from tvm import relax

from tvm_eqsat import make_options, models, timing, tune, tuning_db

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import AA_VARIANTS, TUNING_DIR, VARIANTS, default_work_dir, make_variant  # noqa: E402

LETTER = {"NCHW": "C", "NHWC": "H"}


def kernel_args(mod: tvm.IRModule, target) -> dict[str, list[tuple[int, ...] | None]]:
    """Kernel name -> the shapes of its arguments and then of its result, as the build names
    its kernels (the target's legalization phase, ``tune.legalize_passes``, whose fusion the
    MetaSchedule and default builds share)."""
    tgt = tvm.target.Target(target)
    with tgt, tvm.transform.PassContext(opt_level=3):
        fused = tvm.transform.Sequential(tune.legalize_passes(tgt))(mod)

    def shape(expr):
        s = getattr(expr.ty, "shape", None)
        return tuple(int(d) for d in s) if s is not None else None

    out = {}
    for block in fused["main"].body.blocks:
        for b in block.bindings:
            call = b.value
            if isinstance(call, relax.Call) and getattr(call.op, "name", "") == "relax.call_tir":
                out[call.args[0].name_hint] = [*(shape(a) for a in call.args[1].fields), shape(b.var)]
    return out


def conv_key(args: list[tuple[int, ...] | None]) -> tuple[tuple[int, ...], str] | None:
    """A conv kernel's identity in NCHW terms (in channels, out channels, kernel height and
    width, input and output height and width, groups) and its layout ('NCHW' or 'NHWC'), read
    from its data, weight (OIHW or OHWI) and result shapes; None where the shapes do not say."""
    if len(args) < 3 or any(a is None or len(a) != 4 for a in (args[0], args[1], args[-1])):
        return None
    x, w, y = args[0], args[1], args[-1]
    nchw = y[1] == w[0] and x[1] % w[1] == 0
    nhwc = y[3] == w[0] and x[3] % w[3] == 0
    if nchw == nhwc:
        return None
    if nchw:
        return (x[1], w[0], w[2], w[3], x[2], x[3], y[2], y[3], x[1] // w[1]), "NCHW"
    return (x[3], w[0], w[1], w[2], x[1], x[2], y[1], y[2], x[3] // w[3]), "NHWC"


def conv_table(times: dict[str, dict[str, float]], args: dict[str, dict]) -> dict:
    """Per conv identity, per build: its microseconds per run (its kernels' sum) and layouts;
    beside it, each build's total and what its conv kernels and the rest took."""
    rows: dict[tuple, dict] = defaultdict(dict)
    totals = {}
    for build, kernels in times.items():
        conv_us = unmatched_us = 0.0
        for name, us in kernels.items():
            if "conv2d" not in name:
                continue
            key = conv_key(args[build].get(name, []))
            if key is None:
                unmatched_us += us
                continue
            cell = rows[key[0]].setdefault(build, {"us": 0.0, "layouts": []})
            cell["us"] += us
            cell["layouts"].append(key[1])
            conv_us += us
        totals[build] = {"total_us": sum(kernels.values()), "conv_us": conv_us, "unmatched_conv_us": unmatched_us}
    shared = [k for k, r in rows.items() if len(r) == len(times)]
    for build in times:
        totals[build]["shared_conv_us"] = sum(rows[k][build]["us"] for k in shared)
    return {"rows": [{"conv": list(k), "builds": r} for k, r in rows.items()], "totals": totals, "shared": len(shared)}


def markdown(doc: dict) -> str:
    builds = list(doc["totals"])
    head = "| conv (cin, cout, kh, kw, in h, w, out h, w, groups) | " + " | ".join(f"{b} us" for b in builds) + " |"
    lines = [
        f"# In-model conv times: {doc['model']}, {doc['target_name']}, {doc['flow']} flow",
        "",
        f"Command: `{doc['command']}`. Microseconds per run in each build (the VM's instrumented calls, "
        f"median of {doc['rounds']} interleaved rounds); the layout each ran in: C NCHW, H NHWC.",
        "",
        head,
        "|" + "---|" * (len(builds) + 1),
    ]
    order = sorted(doc["rows"], key=lambda r: -max(c["us"] for c in r["builds"].values()))
    for r in order:
        cells = []
        for b in builds:
            c = r["builds"].get(b)
            cells.append(f"{c['us']:.0f} {''.join(LETTER[x] for x in c['layouts'])}" if c else "-")
        lines.append(f"| {tuple(r['conv'])} | " + " | ".join(cells) + " |")
    lines += ["", f"Totals, ms (the convs all {len(builds)} builds hold: {doc['shared']}):", ""]
    lines += ["| build | whole run | convs | convs all builds hold |", "|---|---|---|---|"]
    for b, t in doc["totals"].items():
        lines.append(
            f"| {b} | {t['total_us'] / 1e3:.2f} | {t['conv_us'] / 1e3:.2f} | {t['shared_conv_us'] / 1e3:.2f} |"
        )
    return "\n".join(lines) + "\n"


def seed(work_dir: str, name: str, trials: int) -> int:
    """Copy into ``work_dir`` the committed kernels of target ``name`` (``benchmarks/tuning/``)
    tuned at ``trials``, as ``benchmark.py`` does, so a build on a new machine tunes only what
    they lack.  Returns how many were copied."""
    n = tuning_db.seed_database(work_dir, TUNING_DIR / name, trials)
    if n:
        print(f"{n} tuned kernels from benchmarks/tuning/{name}")
    return n


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", choices=sorted(models.MODELS))
    ap.add_argument("--small", action="store_true")
    # not the A/A controls: built here from the one work dir, each would be its first variant's kernels
    built_here = [v for v in VARIANTS if v not in AA_VARIANTS]
    ap.add_argument("--variants", nargs="+", choices=built_here, default=["stock", "stock+nhwc", "eqsat"])
    ap.add_argument("--flow", choices=["default", "tuned"], default="default")
    ap.add_argument("--trials", type=int, default=32, help="tuned flow: MetaSchedule trials a kernel lacking one gets")
    ap.add_argument("--mcpu", default="generic", help="the CPU to compile for ('host': this one)")
    ap.add_argument("--work-dir", default=None, help="tuned flow: the database (default: benchmark.py's)")
    ap.add_argument("--no-seed", action="store_true", help="tuned flow: do not copy in the committed kernels")
    ap.add_argument("--cost-model", default="auto", help="the eqsat variants' cost model")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--out", default=None, help="stem of the .json and .md written (default: print only)")
    args = ap.parse_args(argv)

    mcpu = tune.resolve_mcpu(args.mcpu)
    target = tune.tuning_target(tune.llvm_target(mcpu))
    name = tune.target_name("llvm", mcpu)
    model = (models.SMALL if args.small else models.MODELS)[args.model]()
    options = make_options(cost_model=args.cost_model, flow=args.flow).to_dict()
    work_dir = args.work_dir or default_work_dir(name)
    if args.flow == "tuned" and not args.no_seed:
        seed(work_dir, name, args.trials)
    exes, shapes = {}, {}
    for variant in args.variants:
        v = make_variant(variant, model.mod, target, options)
        db = tune.tune(v.mod, target, work_dir, args.trials, progress=True) if args.flow == "tuned" else None
        exes[variant] = tune.build(v.mod, target, db)
        shapes[variant] = kernel_args(v.mod, target)
    times = timing.kernel_times(exes, tvm.cpu(), model.inputs, rounds=args.rounds, runs=args.runs)
    doc = {
        "model": args.model + ("-small" if args.small else ""),
        "target_name": name,
        "flow": args.flow,
        "trials": args.trials if args.flow == "tuned" else None,
        "rounds": args.rounds,
        "command": "python scripts/conv_times.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        **conv_table(times, shapes),
    }
    text = markdown(doc)
    if args.out:
        Path(args.out).with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
        Path(args.out).with_suffix(".md").write_text(text)
    print(text)
    return doc


if __name__ == "__main__":
    main()
