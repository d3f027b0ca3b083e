"""Each kind of conv's NHWC over NCHW time on this CPU, from in-model conv times: the figures
``cost.Machine.nhwc_*`` hold, so that the tuned roofline prices an NHWC conv as it runs.

One conv's ratio, from one tuning of each layout, is at the noise of its tuning: the same NCHW
conv tuned twice (a model built with and without its batch norms folded) differs by a median
1.14-1.47x on the Xeon at 32 trials.  Averaged over a kind of conv (``cost.layout_kind``: 1x1,
square or 1 x k kernels, wide or narrow outputs, depthwise) across models, the ratio holds.
Reads ``conv_times.py``'s JSON files, each a model built in NCHW (several builds: stock,
stock+tvm) and in NHWC (stock+nhwc), tuned from one database:

    python scripts/conv_times.py resnet50 --flow tuned --mcpu emeraldrapids \\
        --variants stock stock+tvm stock+nhwc --out benchmarks/results/conv-times-llvm-emeraldrapids-t32-resnet50
    python scripts/layout_ratios.py benchmarks/results/conv-times-llvm-emeraldrapids-t32-*.json \\
        --out benchmarks/results/layout-ratios-llvm-emeraldrapids-t32 [--calibrate]

Per conv: its NHWC time over the geometric mean of its NCHW builds' times.  Per kind: the
geometric mean over its convs, the factor of its standard error, and how many convs and models
it rests on; beside them, the NCHW builds' spread against each other (the tuning's noise).
``--calibrate`` writes the ratio of each kind held by at least ``--min-convs`` convs into the
CPU's calibration file (``cost_models/machines/<mcpu>.json``); the others stay 1.0.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from tvm_eqsat import calibration
from tvm_eqsat.cost import LAYOUT_CLASSES, layout_kind
from tvm_eqsat.paths import data_dir

ROOT = Path(__file__).resolve().parent.parent


def conv_kind(conv: list[int]) -> str | None:
    """``cost.layout_kind`` of a ``conv_times.conv_key`` identity (in channels, out channels,
    kernel height and width, input and output height and width[, groups])."""
    cin, _cout, kh, kw, h, w, oh, ow = conv[:8]
    groups = conv[8] if len(conv) > 8 else 1
    strides = (max(1, round(h / oh)), max(1, round(w / ow)))
    return layout_kind((kh, kw), strides, groups, cin // groups, oh * ow)


def conv_ratios(doc: dict) -> tuple[list[dict], list[float]]:
    """Each conv of one ``conv_times`` document that both layouts ran, with its kind and its
    log NHWC/NCHW ratio; and the log ratios of its NCHW builds against each other (per conv,
    the first two NCHW builds that hold it)."""
    out, noise = [], []
    for row in doc["rows"]:
        by_layout = defaultdict(list)
        for cell in row["builds"].values():
            if len(set(cell["layouts"])) == 1:
                by_layout[cell["layouts"][0]].append(cell["us"])
        nchw, nhwc = by_layout.get("NCHW", []), by_layout.get("NHWC", [])
        if not nchw or not nhwc:
            continue
        if len(nchw) > 1:
            noise.append(float(np.log(nchw[1] / nchw[0])))
        log_ratio = float(np.mean(np.log(nhwc)) - np.mean(np.log(nchw)))
        out.append({"conv": row["conv"], "kind": conv_kind(row["conv"]), "log_ratio": log_ratio, "model": doc["model"]})
    return out, noise


def summarise(convs: list[dict], min_convs: int) -> dict[str, dict]:
    """Per kind of conv: convs, models, the geometric-mean ratio and its standard-error factor,
    and whether it is held by enough convs to calibrate."""
    out = {}
    for kind in LAYOUT_CLASSES:
        logs = np.array([c["log_ratio"] for c in convs if c["kind"] == kind])
        if not len(logs):
            continue
        se = float(np.std(logs, ddof=1) / np.sqrt(len(logs))) if len(logs) > 1 else float("inf")
        out[kind] = {
            "convs": len(logs),
            "models": sorted({c["model"] for c in convs if c["kind"] == kind}),
            "ratio": round(float(np.exp(logs.mean())), 3),
            "se_factor": round(float(np.exp(se)), 3),
            "calibrated": len(logs) >= min_convs,
        }
    return out


def markdown(doc: dict) -> str:
    lines = [
        f"# NHWC over NCHW conv times per kind of conv: {doc['target_name']}",
        "",
        f"Command: `{doc['command']}` ({doc['date']}). In-model times (`scripts/conv_times.py`) of "
        f"{', '.join(doc['models'])}; per conv, its NHWC time over the geometric mean of its NCHW builds'; "
        "per kind (`cost.layout_kind`), the geometric mean over its convs, with its standard error as a factor.",
        "",
        "| kind | convs | models | NHWC / NCHW | standard error | calibrated |",
        "|---|---|---|---|---|---|",
    ]
    for kind, k in doc["kinds"].items():
        lines.append(
            f"| {kind} | {k['convs']} | {', '.join(k['models'])} | {k['ratio']:.3f} | x{k['se_factor']:.3f} | "
            f"{'yes' if k['calibrated'] else 'no'} |"
        )
    noise = "; ".join(f"{m} {n['median_factor']:.3f}x ({n['convs']} convs)" for m, n in doc["noise"].items())
    lines += [
        "",
        f"Convs of no kind (strided dense, grouped): {doc['unclassified']}. The tuning's noise, one conv in two "
        f"NCHW builds (the first two that hold it) as a median factor per model: {noise}. A model whose builds "
        "tune the same kernels (no batch norms to fold) shows its timing's noise only.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+", help="conv_times.py JSON files, one target")
    ap.add_argument("--min-convs", type=int, default=6, help="convs a kind needs to be calibrated")
    ap.add_argument("--out", default=None, help="stem of the .json and .md written (default: print only)")
    ap.add_argument("--calibrate", action="store_true", help="write the ratios into the CPU's calibration file")
    args = ap.parse_args(argv)
    if args.calibrate and not args.out:
        ap.error("--calibrate needs --out: the calibration names the results it came from")
    docs = [json.loads(Path(f).read_text()) for f in args.files]
    targets = {d["target_name"] for d in docs}
    if len(targets) != 1:
        ap.error(f"the files name {sorted(targets)}: one target per run")
    convs, noise = [], {}
    for d in docs:
        c, n = conv_ratios(d)
        convs += c
        if n:  # a model without batch norms builds the same kernels twice: no second tuning to compare
            noise[d["model"]] = {"convs": len(n), "median_factor": round(float(np.exp(np.median(np.abs(n)))), 3)}
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    doc = {
        "command": "python scripts/layout_ratios.py " + shlex.join(argv),
        "date": now,
        "target_name": targets.pop(),
        "models": [d["model"] for d in docs],
        "kinds": summarise(convs, args.min_convs),
        "unclassified": sum(c["kind"] is None for c in convs),
        "noise": noise,
        "convs": convs,
    }
    text = markdown(doc)
    print(text)
    if args.out:
        Path(args.out).with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
        Path(args.out).with_suffix(".md").write_text(text)
    if args.calibrate:
        mcpu = doc["target_name"].removeprefix("llvm-").removesuffix("-cold")
        path = data_dir("cost_models") / "machines" / f"{mcpu}.json"
        figures = {f"nhwc_{kind}": k["ratio"] for kind, k in doc["kinds"].items() if k["calibrated"]}
        calibration.record_figures(path, figures, Path(args.out).with_suffix(".json"), ROOT, now)
        for key, value in figures.items():
            print(f"{key} = {value} -> {path}")
    return doc


if __name__ == "__main__":
    main()
