"""Collect the kernel dataset the learned cost model trains on.

Workloads (``--sources``): a grid of matmul and conv widths that belongs to no model
(``grid``: see ``GRID_MATMULS``), every kernel (op + the element-wise epilogue FuseOps
fuses into it) of the benchmark models' imports (``model``), every kernel the
rewrite rules create from them (``rewrite``: found in the saturated e-graphs:
merged matmuls/convs, ...), random shape variants around them (``variant``),
the kernels of the module the pass returns for the flow (``chosen``: what
extraction picked with the current cost model; measuring these and retraining
corrects the model exactly where the search trusted it, so repeat until no new
kernel appears), and those of the benchmark's stronger stock variants (``tvm``: TVM's
graph passes, NHWC; e.g. a batch norm folded into a depthwise conv with its fused
epilogue, which dlight on the H100 runs 2-62x slower than the bare conv).  Each is
built with the target's deployment flow (``tuned``: MetaSchedule with --trials
candidates; ``default``: stock pipeline, dlight on CUDA) and timed with ``time_evaluator``.  Rows are appended to the
CSV as they are measured, so an interrupted run resumes where it stopped.

``--elementwise`` instead calibrates what element-wise ops cost per element in the
flow (``measure.elementwise_ns``) and writes ``elementwise.json`` beside the CSV (with
``--bundle`` it builds the calibration's kernels for the device, and ``--from-bundle`` reads
their times back);
training takes each kernel's epilogue off its measurement with it, and the pass
charges those ops where they stand (run it before training).

    python scripts/collect_kernels.py --target llvm --trials 16 --models bert-base resnet50
    python scripts/collect_kernels.py --target cuda --flow default --out $OUT/dataset.csv
    python scripts/collect_kernels.py --flow default --small --sources chosen --models ...
    python scripts/collect_kernels.py --flow default --sources grid --out cost_models/llvm-default/dataset.csv
    python scripts/collect_kernels.py --flow default --out cost_models/llvm-default/dataset.csv --elementwise
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import os
import random
import sys
import time
from pathlib import Path

import tvm
from tqdm import tqdm

from tvm_eqsat import models, ops, optimize
from tvm_eqsat.egraph import TensorEGraph
from tvm_eqsat.graph import TensorTy, module_graphs
from tvm_eqsat.measure import (
    build_workload,
    calibration_sizes,
    elementwise_ns,
    elementwise_slopes,
    elementwise_workloads,
    kernel_out_ty,
    kernel_workloads,
    measure,
    module_workloads,
    nvcc_compile,
    workload_module,
)
from tvm_eqsat.rules import load_library
from tvm_eqsat.saturate import saturate
from tvm_eqsat.workload import Epilogue, Workload
from tvm_eqsat.xgb_model import DATASET_FIELDS, ELEMENTWISE, GRID_MODEL, dataset_row, ty_json

ROOT = Path(__file__).resolve().parent.parent


def rewrite_workloads(graph, node_limit: int = 20000) -> list[Workload]:
    """Kernel e-nodes of the saturated e-graph (what extraction may pick), no epilogue."""
    library = load_library()
    egraph = TensorEGraph(graph, library.program())
    saturate(egraph, library.families, node_limit=node_limit, iter_limit=30, deadline=time.monotonic() + 120)
    snap = egraph.snapshot()
    out = []
    for cls, nodes in enumerate(snap.classes):
        if snap.is_const[cls]:
            continue
        for node in nodes:
            spec = ops.BY_NAME.get(node.op)
            in_tys = tuple(snap.ty[c] for c in node.children)
            if spec is None or spec.kind != ops.KERNEL or not all(isinstance(t, TensorTy) for t in in_tys):
                continue
            out.append(Workload(node.op, node.attrs, in_tys))
    return out


def _scaled(ty: TensorTy, axis: int, factor: float) -> TensorTy:
    shape = list(ty.shape)
    shape[axis] = max(1, int(round(shape[axis] * factor)))
    return TensorTy(tuple(shape), ty.dtype)


def variants(w: Workload, rng: random.Random, count: int) -> list[Workload]:
    """Matmuls and convs with one dimension scaled (rows, columns, channels, image size)."""
    out = []
    for _ in range(count):
        factor = rng.choice([0.25, 0.5, 2.0, 3.0])
        a, b = (w.inputs + (None, None))[:2]
        if w.op == "Matmul" and a is not None and b is not None and len(b.shape) >= 2:
            which = rng.choice(["m", "n", "k"])
            if which == "m" and len(a.shape) >= 2:
                ins = (_scaled(a, -2, factor), b)
            elif which == "n":
                ins = (a, _scaled(b, -1, factor))
            else:
                k = max(1, int(round(a.shape[-1] * factor)))
                ins = (TensorTy(a.shape[:-1] + (k,), a.dtype), TensorTy(b.shape[:-2] + (k,) + b.shape[-1:], b.dtype))
        elif w.op == "Conv2d" and b is not None and w.attrs[4] == "NCHW" and w.attrs[5] == "OIHW" and w.attrs[3] == 1:
            if rng.random() < 0.5:
                ins = (_scaled(_scaled(a, 2, factor), 3, factor), b)
            else:
                ins = (a, _scaled(b, 0, factor))
        else:
            continue
        out.append(Workload(w.op, w.attrs, ins, ()))
    return out


SOURCES = ("model", "rewrite", "variant", "chosen", "tvm", "grid")
GRID = GRID_MODEL  # the model column of the grid's rows: they belong to no benchmark model

# The grid: matmuls and convs over widths, the shapes merges create (several matmuls or convs
# on one input as one wider kernel), swept independently of any benchmark model so that a
# model trained without one benchmark model still sees how width changes a kernel's time.
# Untuned, time grows faster than width (2 x 512 x 4096: 41x the time of 1 x 512 x 512 for
# 16x the work), which a model that learned wide matmuls only from NASRNN's own kernels
# misses on NASRNN (benchmarks/results/held-out-e2e-llvm-default-small*.md).
GRID_MATMULS = [
    (m, k, n) for m in (1, 2, 4) for k in (64, 256, 512, 1024) for n in (64, 256, 512, 1024, 2048, 4096)
] + [(m, k, n) for m in (16, 128) for k in (256, 768) for n in (256, 768, 2304, 3072)]
# Convs in both layouts, down to the few input channels of a stem (3) and of squeeze layers
# (4, 8): held out, a model that had only seen 16 channels and up priced small SqueezeNet's
# 3-channel stem at 11 us in NCHW where it takes 39 (its NHWC form 19), and chose NCHW there
GRID_CONVS = [
    (c, k, side, kernel)
    for kernel in (1, 3)
    for c in (3, 4, 8, 16, 32, 64)
    for k in (16, 32, 64, 128, 256)
    for side in (7, 8, 16, 32)
]
# Convs of the widths the full-size models run (128-512 channels, 7-56 pixels a side), where a
# GPU kernel is no longer launch-bound and NCHW and NHWC part ways
GRID_WIDE_CONVS = [
    (c, k, side, kernel)
    for kernel in (1, 3)
    for c in (128, 256, 512)
    for k in (128, 256, 512)
    for side in (7, 14, 28, 56)
]
# Grouped convs, (channels, groups, side, kernel, stride): depthwise (groups = channels, the
# MobileNet and NASNet separable convs), ResNeXt's 32 groups, and the few groups of parallel
# convs merged into one; each bare and with a bias add and relu fused in.  Held out by model,
# the CUDA model ranked MobileNet-v2's kernels at Spearman 0.61, having seen depthwise convs
# only there and in NASNet-A, and priced ResNeXt-50's merged 2-group convs at 86-187 us in NHWC
# where dlight takes 950-1,280 (12x their NCHW form)
GRID_GROUPED_CONVS = (
    [
        (c, c, side, kernel, stride)
        for c in (32, 96, 192, 384, 768)
        for side in (7, 14, 28, 56)
        for kernel in (3, 5)
        for stride in (1, 2)
    ]
    + [(c, 32, side, 3, 1) for c in (128, 256, 512, 1024) for side in (7, 14, 28, 56)]
    + [
        (c, groups, side, 3, stride)
        for c in (128, 256, 512)
        for groups in (2, 4, 8)
        for side in (14, 28, 56)
        for stride in (1, 2)
    ]
)
GRID_LAYOUTS = (("NCHW", "OIHW"), ("NHWC", "OHWI"))


def _conv(
    c: int, k: int, side: int, kernel: int, stride: int, groups: int, layouts, dtype: str, bias_relu: bool = False
) -> Workload:
    """A batch-1, same-padded conv of ``c`` to ``k`` channels, bare or with a bias add and relu."""
    data, kernel_layout = layouts
    pad = kernel // 2
    attrs = ((stride, stride), (pad, pad, pad, pad), (1, 1), groups, data, kernel_layout, data, dtype)
    x = (1, c, side, side) if data == "NCHW" else (1, side, side, c)
    w = (k, c // groups, kernel, kernel) if kernel_layout == "OIHW" else (k, kernel, kernel, c // groups)
    bias = (1, k, 1, 1) if data == "NCHW" else (1, 1, 1, k)
    epilogue = (Epilogue("Add", bias), Epilogue("Relu")) if bias_relu else ()
    return Workload("Conv2d", attrs, (TensorTy(x, dtype), TensorTy(w, dtype)), epilogue)


def grid_workloads(dtype: str = "float32") -> list[Workload]:
    """``GRID_MATMULS`` (m x k @ k x n), then ``GRID_CONVS`` and ``GRID_WIDE_CONVS`` (stride 1,
    bare) and ``GRID_GROUPED_CONVS`` (bare, then with a bias add and relu) in each of
    ``GRID_LAYOUTS``."""
    out = [Workload("Matmul", (dtype,), (TensorTy((m, k), dtype), TensorTy((k, n), dtype))) for m, k, n in GRID_MATMULS]
    for layouts in GRID_LAYOUTS:
        for c, k, side, kernel in GRID_CONVS + GRID_WIDE_CONVS:
            out.append(_conv(c, k, side, kernel, 1, 1, layouts, dtype))
        for bias_relu in (False, True):
            for c, groups, side, kernel, stride in GRID_GROUPED_CONVS:
                out.append(_conv(c, c, side, kernel, stride, groups, layouts, dtype, bias_relu))
    return out


def tvm_variant_workloads(model: models.Model, target: dict) -> list[Workload]:
    """The kernels of the benchmark's stronger stock variants (TVM's graph passes, and
    ConvertLayout to NHWC): forms such as a batch norm folded into a depthwise conv,
    whose fused epilogue the rules' own kernels (no epilogue) do not show."""
    from benchmark import make_variant

    tgt = tvm.target.Target(target)
    return [
        w for name in ("stock+tvm", "stock+nhwc") for w in module_workloads(make_variant(name, model.mod, tgt, {}).mod)
    ]


def chosen_workloads(model: models.Model, target: dict, flow: str) -> list[Workload]:
    """The distinct kernels of the module the pass returns for ``flow`` (its default cost model)."""
    new, _ = optimize(model.mod, tvm.target.Target(target), flow=flow)
    return module_workloads(new)


def gather(
    model_names: list[str],
    n_variants: int,
    seed: int,
    small: bool = False,
    sources: tuple[str, ...] = SOURCES[:3],
    target: dict | None = None,
    flow: str = "tuned",
) -> list[tuple[str, str, Workload]]:
    """(model, source, workload), deduplicated by workload key in first-seen order."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out = []

    def add(model: str, source: str, w: Workload) -> None:
        if w.key() not in seen:
            seen.add(w.key())
            out.append((model, source, w))

    if GRID in sources:
        for w in grid_workloads():
            add(GRID, GRID, w)
    per_model = set(sources) - {GRID}
    for name in tqdm(model_names if per_model else [], desc="importing models", file=sys.stderr):
        model = models.MODELS[name](small=small)
        for graph in module_graphs(model.mod):
            base = kernel_workloads(graph)
            for w in base if "model" in sources else ():
                add(name, "model", w)
            for w in rewrite_workloads(graph) if "rewrite" in sources else ():
                add(name, "rewrite", w)
            for w in base if "variant" in sources else ():
                for v in variants(w, rng, n_variants):
                    add(name, "variant", v)
        if "chosen" in sources:
            for w in chosen_workloads(model, target or {"kind": "llvm"}, flow):
                add(name, "chosen", w)
        if "tvm" in sources:
            for w in tvm_variant_workloads(model, target or {"kind": "llvm"}):
                add(name, "tvm", w)
    return out


def sample_per_model(items: list, n: int, seed: int) -> list:
    """At most ``n`` items per model: a seeded sample, sources in the order model, chosen, rewrite, variant."""
    rng = random.Random(seed)
    order = {"model": 0, "chosen": 1, "rewrite": 2, "variant": 3}
    out = []
    for model in dict.fromkeys(m for m, _, _ in items):
        mine = [it for it in items if it[0] == model]
        rng.shuffle(mine)
        mine.sort(key=lambda it: order.get(it[1], 3))
        out.extend(mine[:n])
    return out


def dry_run(args, flow: str, target: dict, work_dir: str) -> None:
    items = gather(args.models, args.variants, args.seed, args.small, tuple(args.sources), target, flow)[: args.limit]
    failures = 0
    for _, _, w in tqdm(items, desc=f"compiling for {target['kind']}", file=sys.stderr):
        try:
            ex = build_workload(w, target, flow=flow, trials=args.trials, work_dir=work_dir)
            if target["kind"] == "cuda":
                nvcc_compile(ex, target)
        except Exception as err:
            failures += 1
            logging.warning(
                "%s %s does not build: %s", w.op, [t.shape for t in w.inputs], str(err).splitlines()[0][:200]
            )
    print(f"{len(items) - failures} of {len(items)} workloads compile for {target}")


def write_elementwise(path: Path, args, flow: str, sizes, seconds: float | None, ns: dict[str, float]) -> None:
    """The calibration document ``xgb_model.load_elementwise`` reads (``seconds``: the
    calibration's time, None where a device run did the timing)."""
    doc = {
        "target": args.target,
        "flow": flow,
        "trials": args.trials if flow == "tuned" else None,
        "sizes": list(sizes),
        "date": time.strftime("%Y-%m-%d"),
        "seconds": None if seconds is None else round(seconds, 1),
        "ns_per_element": {k: round(v, 4) for k, v in ns.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    print(f"{len(ns)} element-wise ops calibrated -> {path}")


def calibrate_elementwise(args, flow: str, target: dict, work_dir: str, path: Path) -> None:
    t = time.perf_counter()
    sizes = calibration_sizes(target)
    ns = elementwise_ns(target, flow=flow, trials=args.trials, work_dir=work_dir, sizes=sizes, repeat=args.repeat)
    write_elementwise(path, args, flow, sizes, time.perf_counter() - t, ns)


def elementwise_from_bundle(args, flow: str, bundle_dir: str, results: str, path: Path) -> None:
    """``elementwise.json`` from the device run of an ``--elementwise --bundle`` bundle."""
    info = json.loads((Path(bundle_dir) / WORKLOADS).read_text())
    result = json.loads(Path(results).read_text())
    times = {}
    for row in result["rows"]:
        w = Workload.from_json(info[row["name"]]["workload"])
        times[(w.op, w.inputs[0].shape[-1])] = row["median_ms"] * 1e3
    sizes = sorted({n for _, n in times})
    if len(sizes) != 2:
        raise SystemExit(f"{results}: expected the calibration's two sizes, found {sizes}")
    for failure in result.get("failures", []):
        logging.warning("not calibrated (failed on the device): %s", failure)
    write_elementwise(path, args, flow, sizes, None, elementwise_slopes(times, sizes))


def _budget(flow: str, trials) -> str | None:
    """A row's tuning budget as the CSV holds it; none in the default flow, whose rows say 16
    (collected here) or 0 (from a device's bundle) for the same untuned kernel."""
    return str(trials) if flow == "tuned" else None


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="llvm", choices=["llvm", "cuda"])
    p.add_argument(
        "--flow", default=None, choices=["tuned", "default"], help="default: tuned on llvm, default (dlight) on cuda"
    )
    p.add_argument("--trials", type=int, default=16, help="MetaSchedule candidates per kernel (tuned flow)")
    p.add_argument("--models", nargs="+", default=["bert-base", "resnet50"])
    p.add_argument(
        "--small", action="store_true", help="the kernels of the reduced models (what the quick benchmarks run)"
    )
    p.add_argument(
        "--sources",
        nargs="+",
        default=list(SOURCES[:3]),
        choices=SOURCES,
        help="which workloads to gather (chosen: the kernels the pass picks now; see above)",
    )
    p.add_argument("--variants", type=int, default=1, help="random shape variants per model kernel")
    p.add_argument("--limit", type=int, default=None, help="measure at most this many new workloads")
    p.add_argument(
        "--per-model",
        type=int,
        default=None,
        help="at most this many new workloads per model (a seeded sample, the model's own kernels first)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="CSV (default cost_models/<target>/dataset.csv)")
    p.add_argument("--work-dir", default=None, help="MetaSchedule database (default ~/.cache/tvm_eqsat/ms-<target>)")
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument(
        "--retime",
        action="store_true",
        help="time every kernel already in the CSV again (tuning is cached) and append the new rows; "
        "the last row of a kernel wins. Use on a quiet machine.",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="compile every workload for the target without timing (checks a GPU-less CUDA setup)",
    )
    p.add_argument("--arch", default="sm_90", help="CUDA architecture")
    p.add_argument(
        "--elementwise",
        action="store_true",
        help=f"calibrate element-wise ops (ns per element) and write {ELEMENTWISE} beside the CSV",
    )
    p.add_argument(
        "--bundle",
        default=None,
        metavar="DIR",
        help="do not time here: build the workloads into a runtime-only bundle for a machine without "
        "TVM (the GPU); time them there with DIR/run.py, then --from-bundle",
    )
    p.add_argument(
        "--from-bundle",
        nargs=2,
        default=None,
        metavar=("DIR", "RESULTS"),
        help="append the rows of a bundle's device run (its results.json) to the CSV",
    )
    p.add_argument("--python", default=None, help="--bundle: the device's Python (default: the lent GPU's)")
    args = p.parse_args(argv)
    flow = args.flow or ("tuned" if args.target == "llvm" else "default")
    out = Path(args.out or ROOT / "cost_models" / args.target / "dataset.csv")
    work_dir = args.work_dir or os.path.expanduser(f"~/.cache/tvm_eqsat/ms-{args.target}")
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)

    target = {"kind": args.target} if args.target == "llvm" else {"kind": "cuda", "arch": args.arch}
    if args.dry_run:
        return dry_run(args, flow, target, work_dir)
    if args.elementwise:
        if args.bundle:
            items = [
                ("elementwise", "elementwise", w) for _, _, w in elementwise_workloads(sizes=calibration_sizes(target))
            ]
            return bundle_workloads(items, target, args.bundle, args.python, args.repeat)
        if args.from_bundle:
            return elementwise_from_bundle(args, flow, *args.from_bundle, out.parent / ELEMENTWISE)
        return calibrate_elementwise(args, flow, target, work_dir, out.parent / ELEMENTWISE)
    if args.from_bundle:
        return rows_from_bundle(*args.from_bundle, args.target, flow, out)
    rows = []
    if out.exists():
        with open(out) as f:
            rows = list(csv.DictReader(f))
    budget = _budget(flow, args.trials)
    if args.retime:
        latest = {r["key"]: r for r in rows if (r["flow"], _budget(r["flow"], r["trials"])) == (flow, budget)}
        todo = [(r["model"], r["source"], Workload.from_json(json.loads(r["key"]))) for r in latest.values()]
    else:
        # a grid kernel is measured as the grid's even where a model's row has it: the grid's
        # rows stay in the training set when that model is held out (held_out_e2e.py)
        done = {(r["key"], r["flow"], _budget(r["flow"], r["trials"]), r["model"] == GRID) for r in rows}
        todo = [
            item
            for item in gather(args.models, args.variants, args.seed, args.small, tuple(args.sources), target, flow)
            if (item[2].key(), flow, budget, item[0] == GRID) not in done
        ]
    if args.per_model is not None:
        todo = sample_per_model(todo, args.per_model, args.seed)
    if args.limit is not None:
        todo = todo[: args.limit]
    if not todo:
        print(f"nothing new to measure: every workload asked for has a row in {out}")
        return
    if args.bundle:
        return bundle_workloads(todo, target, args.bundle, args.python, args.repeat)
    out.parent.mkdir(parents=True, exist_ok=True)
    new_file = not out.exists()
    failures = 0
    with open(out, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=DATASET_FIELDS)
        if new_file:
            writer.writeheader()
        budget = f", {args.trials} trials" if flow == "tuned" else ""
        for model, source, w in tqdm(todo, desc=f"measuring ({flow}{budget})", file=sys.stderr):
            t = time.perf_counter()
            try:
                ty = kernel_out_ty(w)
                m = measure(w, target, flow=flow, trials=args.trials, work_dir=work_dir, repeat=args.repeat)
            except Exception as err:  # a workload TVM cannot build is skipped, not fatal
                failures += 1
                logging.warning("skipped %s %s: %s", w.op, [t.shape for t in w.inputs], str(err).splitlines()[0][:200])
                continue
            writer.writerow(
                dataset_row(
                    args.target,
                    flow,
                    args.trials,
                    model,
                    source,
                    w,
                    ty,
                    m.median_us,
                    m.p10_us,
                    m.p90_us,
                    time.perf_counter() - t,
                )
            )
            f.flush()
    print(f"{len(todo) - failures} measured, {failures} skipped -> {out}")


WORKLOADS = "workloads.json"  # kept with a bundle: what each of its entries is


GROUP = 48  # workloads per library in a bundle: one nvcc run each, not one per kernel


def _group_library(out: Path, stem: str, group: list, tgt) -> list[tuple[int, dict]]:
    """Compile the workloads ``[(index, workload)]`` as the functions ``w<index>`` of one
    library (one by one where the group as a whole does not build; a workload that does
    not build alone is skipped); returns ``[(index, manifest row)]``."""
    from tvm_eqsat import bundle, tune

    funcs = {f"w{i}": workload_module(w)["main"].with_attr("global_symbol", f"w{i}") for i, w in group}
    try:
        file = bundle.add_library(out, stem, tune.build(tvm.IRModule(funcs), tgt), tgt)
    except Exception as err:  # noqa: BLE001 - a workload TVM cannot build is skipped, not fatal
        if len(group) == 1:
            logging.warning("skipped %s: %s", stem, str(err).splitlines()[0][:200])
            return []
        return [row for i, w in group for row in _group_library(out, f"{stem}_{i}", [(i, w)], tgt)]
    rows = []
    for i, _ in group:
        specs = bundle.var_specs(funcs[f"w{i}"].params)
        rows.append((i, {"name": f"w{i}", "file": file, "function": f"w{i}", "inputs": specs}))
    return rows


def bundle_workloads(todo, target: dict, out_dir: str, python: str | None, repeat: int) -> None:
    """The workloads compiled (the target's default flow) into a runtime-only bundle,
    ``GROUP`` to a library."""
    from tvm_eqsat import bundle

    tgt = tvm.target.Target(target)
    out, manifest = bundle.new_bundle(out_dir, tgt)
    info = {}
    groups = [list(enumerate(todo))[k : k + GROUP] for k in range(0, len(todo), GROUP)]
    with bundle.cuda_compile_env(tgt):
        for g, group in enumerate(tqdm(groups, desc=f"compiling ({GROUP} to a library)", file=sys.stderr)):
            for i, row in _group_library(out, f"lib{g}", [(i, item[2]) for i, item in group], tgt):
                model, source, w = todo[i]
                manifest["entries"].append({**row, "number": 10, "repeat": repeat})
                info[row["name"]] = {
                    "model": model, "source": source, "workload": w.to_json(), "out_ty": ty_json(kernel_out_ty(w))
                }  # fmt: skip
    manifest["rounds"] = 1
    path = bundle.finish_bundle(out, manifest, python or bundle.DEVICE_PYTHON)
    (path / WORKLOADS).write_text(json.dumps(info))
    print(f"{path}: {len(info)} kernels, {bundle.bundle_bytes(path) / 2**20:.1f} MiB; run {path}/run.py there")


def rows_from_bundle(bundle_dir: str, results: str, target_kind: str, flow: str, out: Path) -> None:
    """Dataset rows from a bundle's device run, appended to ``out``."""
    info = json.loads((Path(bundle_dir) / WORKLOADS).read_text())
    result = json.loads(Path(results).read_text())
    new_file = not out.exists()
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=DATASET_FIELDS)
        if new_file:
            writer.writeheader()
        for row in result["rows"]:
            w = info[row["name"]]
            ty = TensorTy(tuple(w["out_ty"][0]), w["out_ty"][1])
            writer.writerow(
                dataset_row(
                    target_kind,
                    flow,
                    0,
                    w["model"],
                    w["source"],
                    Workload.from_json(w["workload"]),
                    ty,
                    row["median_ms"] * 1e3,
                    row["p10_ms"] * 1e3,
                    row["p90_ms"] * 1e3,
                    0.0,
                )
            )
    print(f"{len(result['rows'])} rows ({len(result['failures'])} failed on the device) -> {out}")


if __name__ == "__main__":
    main()
