"""Whole models with every 1x1 conv as a matmul (``conv_matmul``'s NCHW rule), tuned and
timed against the pass's own module: does the family pay in the tuned flow, whatever a
cost model would choose?

For each model, the eqsat variant as ``benchmark.py`` makes it (default options, tuned
flow) and the same module with every NCHW, batch-1, groups-1 1x1 conv in the form
``conv2d-1x1-nchw-matmul`` writes (``forms.rewritten_form``).  The new kernels are tuned
with MetaSchedule (``--trials``, cold caches with ``--cold-cache``) into a work database
(``--work-dir``; by default a copy of the benchmark's, made once, so the kernels the two
modules share keep the benchmark's schedules and only the matmul forms are tuned); both
modules are built from it, checked against each other and timed interleaved, with each
build's time per kernel (``timing.kernel_times``).  Then, for every distinct 1x1 conv, the
tuner's records of its kernel as a conv and of the kernels of its matmul form (the choice
pairs a cost model would have to order; a conv whose kernels are not found alone is left
out):

    python scripts/bench_conv_matmul.py --cold-cache --models resnet50 nasnet-a mobilenet-v2

to ``benchmarks/results/conv-matmul-<target>[-cold]-t<trials>.{json,md}``.  Run it with
nothing else on the machine.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import logging
import os
import shlex
import shutil
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

import tvm_eqsat
from tvm_eqsat import harvest, models, provenance, timing, tune, tuning_db
from tvm_eqsat.evaluate import relative_difference
from tvm_eqsat.forms import rewritten_form
from tvm_eqsat.measure import kernel_workloads, module_graphs, module_workloads, workload_module
from tvm_eqsat.verify import wrong_builds_status

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import (  # noqa: E402
    MS_LOG_LEVEL,
    POPULATION,
    default_work_dir,
    machine_info,
    make_target,
    make_variant,
)

ROOT = Path(__file__).resolve().parent.parent
RULE = "conv2d-1x1-nchw-matmul"


def is_1x1_conv(op: str, attrs: tuple, in_tys) -> bool:
    """A dense 1x1 conv: the node ``RULE`` rewrites, avoided so that its form is extracted."""
    return op == "Conv2d" and attrs[3] == 1 and tuple(in_tys[1].shape[2:]) == (1, 1)


def as_matmuls(mod: tvm.IRModule) -> tuple[tvm.IRModule, int]:
    """``mod`` with every 1x1 conv the rule takes in its matmul form, and how many it took."""
    new, applied, _ = rewritten_form(mod, [RULE], avoid=is_1x1_conv)
    return new, applied.get(RULE, 0)


def records_us(mod: tvm.IRModule, target, database) -> list[tuple[str, float | None]]:
    """Each kernel of ``mod`` as tuning fuses it: its name and best tuned record (us; None if
    untuned or failed, as ``harvest`` reads records)."""
    from tvm.s_tir import meta_schedule as ms

    out = []
    for task in ms.relax_integration.extract_tasks(tune.fuse_for_tuning(mod, target), target):
        best = harvest.best_record_us(database, task.dispatched[0])
        out.append((task.task_name, None if best is None else best[0]))
    return out


def conv_pairs(name: str, mod: tvm.IRModule, target, database) -> list[dict]:
    """Every distinct 1x1 conv of ``mod`` (with its fused epilogue): its records as a conv
    and as the matmul form, built alone with a constant weight as in the model."""
    calls = collections.Counter(w.key() for g in module_graphs(mod) for w in kernel_workloads(g))
    rows = []
    for w in module_workloads(mod):
        if w.op != "Conv2d" or w.attrs[4] != "NCHW" or not is_1x1_conv(w.op, w.attrs, w.inputs):
            continue
        alone = workload_module(w)
        weight = np.random.default_rng(0).standard_normal(w.inputs[1].shape).astype(w.inputs[1].dtype)
        alone = relax.transform.BindParams("main", {"x1": weight})(alone)
        form, taken = as_matmuls(alone)
        if not taken:
            continue
        conv, matmul = records_us(alone, target, database), records_us(form, target, database)
        if any(us is None for _, us in conv + matmul):  # fused otherwise alone than in the model
            continue
        rows.append(
            {
                "model": name,
                "calls": calls[w.key()],
                "x": list(w.inputs[0].shape),
                "w": list(w.inputs[1].shape),
                "epilogue": [e.op for e in w.epilogue],
                "conv_us": conv,
                "matmul_us": matmul,
            }
        )
    return rows


def measure(name: str, target, work_dir: str, trials: int, cold: bool, repeat: int) -> tuple[dict, list[dict]]:
    """One model's row (both modules timed) and its conv pairs."""
    model = models.MODELS[name]()
    eqsat = make_variant("eqsat", model.mod, target, tvm_eqsat.make_options(flow="tuned").to_dict()).mod
    forced, taken = as_matmuls(eqsat)
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(MS_LOG_LEVEL)
    t = time.perf_counter()
    db = tune.tune(forced, target, work_dir, trials, population=POPULATION, progress=True, cold_cache=cold)
    tune_s = time.perf_counter() - t
    dev, exes, samplers, outs = tvm.cpu(), {}, {}, {}
    for form, mod in (("eqsat", eqsat), ("matmul", forced)):
        exes[form] = tune.build(mod, target, db)
        vm, args, samplers[form], _ = timing.tvm_sampler(exes[form], dev, model.inputs, 50.0)
        outs[form] = vm["main"](*args)
    times = timing.time_interleaved(samplers, repeat)
    row = {
        "model": name,
        "convs_as_matmuls": taken,
        "tune_s": round(tune_s, 1),
        "max_rel_diff": relative_difference(_numpy(outs["eqsat"]), _numpy(outs["matmul"])),
        **{f"{f}_ms": float(np.median(ts)) for f, ts in times.items()},
        **{f"{f}_p10_p90": [float(np.percentile(ts, q)) for q in (10, 90)] for f, ts in times.items()},
        "kernels_us": timing.kernel_times(exes, dev, model.inputs),
    }
    row["speedup"] = row["eqsat_ms"] / row["matmul_ms"]
    return row, conv_pairs(name, eqsat, target, db)


def _numpy(value):
    """A VM result as numpy arrays, tuples kept as tuples (what ``relative_difference`` takes)."""
    if hasattr(value, "numpy"):
        return value.numpy()
    return tuple(_numpy(v) for v in value)


def markdown(data: dict) -> str:
    rows, pairs = data["rows"], data["pairs"]
    lines = [
        f"# Every 1x1 conv as a matmul: llvm -mcpu={data['mcpu']}, tuned flow, {data['trials']} trials per kernel"
        + (", tuned with cold caches" if data["cold_cache"] else ""),
        "",
        f"Machine: {data['machine']['machine']}, {data['machine']['cpus']} cores; {data['date']}. "
        f"Command: `{data['command']}`. Median of {data['repeat']} interleaved samples (p10-p90). "
        "eqsat: the pass's module (default options); matmul: the same with every NCHW 1x1 conv in "
        f"`{RULE}`'s form, its new kernels tuned into a copy of the benchmark's database (the tuning call's "
        "seconds: task extraction alone where nothing was left to tune).",
        "",
        "| model | convs as matmuls | eqsat ms | matmul ms | speedup | max rel diff | tuning call s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['convs_as_matmuls']} | {r['eqsat_ms']:.3f} ({r['eqsat_p10_p90'][0]:.3f}-"
            f"{r['eqsat_p10_p90'][1]:.3f}) | {r['matmul_ms']:.3f} ({r['matmul_p10_p90'][0]:.3f}-"
            f"{r['matmul_p10_p90'][1]:.3f}) | {r['speedup']:.3f}x | {r['max_rel_diff']:.1e} | {r['tune_s']:.0f} |"
        )
    if rows:
        gm = float(np.exp(np.mean([np.log(r["speedup"]) for r in rows])))
        lines += ["", f"Geometric mean: {gm:.3f}x over {len(rows)} models."]
    if pairs:
        faster = sum(1 for p in pairs if _total(p["matmul_us"]) < _total(p["conv_us"]))
        lines += [
            "",
            f"**Choice pairs** (the tuner's records; the matmul form's kernels summed): the matmul form is faster "
            f"for {faster} of {len(pairs)} distinct 1x1 convs.",
            "",
            "| model | C, HxW, K | calls | conv us | matmul form us | conv / matmul |",
            "|---|---|---|---|---|---|",
            *(
                f"| {p['model']} | {p['x'][1]}, {p['x'][2]}x{p['x'][3]}, {p['w'][0]} | {p['calls']} | "
                f"{_total(p['conv_us']):.1f} | {_total(p['matmul_us']):.1f} | "
                f"{_total(p['conv_us']) / _total(p['matmul_us']):.2f} |"
                for p in pairs
            ),
        ]
    return "\n".join(lines) + "\n"


def _total(kernels) -> float:
    return sum(us for _, us in kernels)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", required=True, choices=sorted(models.MODELS))
    p.add_argument("--mcpu", default="host")
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--cold-cache", action="store_true", help="tune with the caches flushed (benchmark.py's flag)")
    p.add_argument("--repeat", type=int, default=30)
    p.add_argument("--work-dir", default=None, help="the database to tune into (default: a copy of the benchmark's)")
    p.add_argument("--out-dir", default=str(ROOT / "benchmarks" / "results"))
    args = p.parse_args(argv)

    tune.use_all_cores()
    mcpu = tune.resolve_mcpu(args.mcpu)
    target = make_target("llvm", "", mcpu)
    name = tune.target_name("llvm", mcpu, args.cold_cache)
    work = args.work_dir or os.path.expanduser(f"~/.cache/tvm_eqsat/conv-matmul-{name}")
    benchmark_db = Path(default_work_dir(name))
    if args.work_dir is None and not tuning_db.has_database(work) and tuning_db.has_database(benchmark_db):
        shutil.copytree(benchmark_db, work)
    stem = Path(args.out_dir) / f"conv-matmul-{name}-t{args.trials}"
    old = json.loads(stem.with_suffix(".json").read_text()) if stem.with_suffix(".json").is_file() else {}
    rows = [r for r in old.get("rows", []) if r["model"] not in args.models]
    pairs = [r for r in old.get("pairs", []) if r["model"] not in args.models]
    for model in args.models:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            row, model_pairs = measure(model, target, work, args.trials, args.cold_cache, args.repeat)
        rows.append(row)
        pairs += model_pairs
        print(model, f"{row['speedup']:.3f}x", f"{len(model_pairs)} conv pairs", flush=True)
    data = {
        "command": "python scripts/bench_conv_matmul.py " + shlex.join(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_info(target),
        "mcpu": mcpu,
        "trials": args.trials,
        "cold_cache": args.cold_cache,
        "repeat": args.repeat,
        "rows": rows,
        "pairs": pairs,
    }
    provenance.write_results(stem, data, markdown)
    print(f"written {stem}.json and .md")
    return wrong_builds_status({r["model"]: r["max_rel_diff"] for r in rows}, "the pass's without the matmul form")


if __name__ == "__main__":
    sys.exit(main())
