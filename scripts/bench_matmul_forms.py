"""Does a matmul with a constant weight tune faster in another form?  Measured before a
rule family is written for it: each form tuned with several seeds (the tuner's lottery is
as large as the effects in question), timed interleaved.

The layer is a transformer's linear layer, ``x (1, M, K) @ W (K, N) + b``, W and b constant.
Forms:
  - ``plain``: as the model imports it;
  - ``pad:P``: the rows padded with zeros to P (ViT-B/16 has M = 197 tokens, a prime, and
    MetaSchedule tiles a loop only by factors of its extent), the product cropped back;
  - ``pack:B``: the weight laid out (N/B, K, B) at compile time (TVM's old x86 ``dense_pack``
    layout), a batched product (N/B, M, B) put back in place by one permute.

    python scripts/bench_matmul_forms.py --shape 197 768 3072 --forms plain pad:208 pack:16 \
        --trials 64 --seeds 1 2 3

Each (shape, form, seed) is tuned into its own database under ``--work-root`` (rerun: nothing
is tuned again).  Writes ``benchmarks/results/matmul-forms-<target>-t<trials>.{json,md}``
(``--out`` for another stem); a shape already in the JSON is timed again and replaced.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import shlex
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import tvm
from tvm import relax

from tvm_eqsat import timing, tune

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchmark import MS_LOG_LEVEL, POPULATION, machine_info  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MAX_REL_ERR = 1e-4  # every form sums the same products; float32 rounding stays near 1e-6


def form_module(form: str, m: int, w: np.ndarray, b: np.ndarray) -> tvm.IRModule:
    """``x @ w + b`` for x of shape (1, m, k), written in ``form``."""
    k, n = w.shape
    kind, _, arg = form.partition(":")
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((1, m, k), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            if kind == "plain":
                y = bb.emit(relax.op.matmul(x, relax.const(w)))
            elif kind == "pad":
                rows = int(arg)
                if rows < m:
                    raise ValueError(f"{form}: pads {m} rows to fewer")
                xp = bb.emit(relax.op.nn.pad(x, [0, 0, 0, rows - m, 0, 0]))
                yp = bb.emit(relax.op.matmul(xp, relax.const(w)))
                y = bb.emit(relax.op.strided_slice(yp, [1], [0], [m]))
            elif kind == "pack":
                block = int(arg)
                if n % block:
                    raise ValueError(f"{form}: {n} columns are not a multiple of {block}")
                packed = np.ascontiguousarray(w.reshape(k, n // block, block).transpose(1, 0, 2))
                x2 = bb.emit(relax.op.reshape(x, (m, k)))
                y3 = bb.emit(relax.op.matmul(x2, relax.const(packed)))  # (n / block, m, block)
                y = bb.emit(relax.op.reshape(relax.op.permute_dims(y3, [1, 0, 2]), (1, m, n)))
            else:
                raise ValueError(f"unknown form {form!r}: plain, pad:ROWS or pack:BLOCK")
            out = bb.emit_output(bb.emit(relax.op.add(y, relax.const(b))))
        bb.emit_func_output(out)
    return bb.get()


def bench_shape(shape, forms, seeds, trials: int, target, work_root: Path, repeat: int) -> dict:
    """Tune every form with every seed, check each against numpy, time all interleaved."""
    m, k, n = shape
    rng = np.random.default_rng(0)
    w = rng.standard_normal((k, n)).astype("float32")
    b = rng.standard_normal((n,)).astype("float32")
    x = rng.standard_normal((1, m, k)).astype("float32")
    ref = x[0] @ w + b
    dev = tvm.cpu()
    samplers, tune_s, err = {}, {}, {}
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(MS_LOG_LEVEL)
    for form in forms:
        mod = form_module(form, m, w, b)
        for seed in seeds:
            started = time.perf_counter()
            work_dir = work_root / f"{m}x{k}x{n}-{form.replace(':', '')}-s{seed}"
            db = tune.tune(mod, target, work_dir, trials, seed=seed, population=POPULATION)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ex = tune.build(mod, target, db)
            vm, args, samplers[(form, seed)], _ = timing.tvm_sampler(ex, dev, [x], 50.0)
            got = vm["main"](*args).numpy()[0]
            rel = float(np.abs(got - ref).max() / np.abs(ref).max())
            if rel > MAX_REL_ERR:  # a form that computes something else is not timed
                raise RuntimeError(f"{form} (seed {seed}) is {rel:.1e} off x @ W + b")
            err[form] = max(err.get(form, 0.0), rel)
            elapsed = time.perf_counter() - started
            tune_s[form] = tune_s.get(form, 0.0) + elapsed
            print(f"  {m}x{k}x{n} {form} seed {seed}: {elapsed:.0f} s", file=sys.stderr)
    times = timing.time_interleaved(samplers, repeat)
    ms = {key: float(np.median(ts)) for key, ts in times.items()}
    rows = {}
    for form in forms:
        per_seed = [ms[(form, s)] for s in seeds]
        rows[form] = {
            "ms_per_seed": [round(t, 4) for t in per_seed],
            "median_ms": float(np.median(per_seed)),
            "best_ms": min(per_seed),
            "gflop_per_s_median": round(2 * m * k * n / float(np.median(per_seed)) / 1e6, 1),
            "max_rel_err": err[form],
            "tune_s": round(tune_s[form], 1),
        }
    return {"shape": [m, k, n], "seeds": list(seeds), "repeat": repeat, "forms": rows}


def write_markdown(path: Path, doc: dict) -> None:
    """One table per shape: each form's time per seed, median and best, against plain's."""
    lines = [
        f"# Matmul forms, tuned: {doc['target_name']}, {doc['trials']} trials per kernel",
        "",
        f"{doc['machine']['machine']}; each form tuned once per seed, each tuning its own database; a time is "
        "the median of the interleaved samples; 'median' and 'best' are over the seeds.",
        "",
    ]
    for entry in doc["shapes"]:
        m, k, n = entry["shape"]
        plain = entry["forms"].get("plain")
        lines += [
            f"## x (1, {m}, {k}) @ W ({k}, {n}) + b",
            "",
            f"{entry['date'][:10]}, seeds {entry['seeds']}, {entry['repeat']} samples. Command: `{entry['command']}`.",
            "",
            "| form | ms per seed | median | best | median vs plain | GFLOP/s | max rel err |",
            "|---|---|---|---|---|---|---|",
        ]
        for form, r in entry["forms"].items():
            vs = f"{plain['median_ms'] / r['median_ms']:.3f}x" if plain else "-"
            seeds = ", ".join(f"{t:.3f}" for t in r["ms_per_seed"])
            lines.append(
                f"| {form} | {seeds} | {r['median_ms']:.3f} | {r['best_ms']:.3f} | {vs} | "
                f"{r['gflop_per_s_median']} | {r['max_rel_err']:.1e} |"
            )
        lines.append("")
    path.write_text("\n".join(lines))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", nargs=3, type=int, action="append", metavar=("M", "K", "N"), required=True)
    ap.add_argument("--forms", nargs="+", default=["plain", "pad:208", "pack:16"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--mcpu", default="host", help="the CPU to compile for (as benchmark.py)")
    ap.add_argument("--work-root", default=str(Path.home() / ".cache" / "tvm_eqsat" / "matmul-forms"))
    ap.add_argument("--out", default=None, help="stem of the .json and .md (default under benchmarks/results)")
    args = ap.parse_args(argv)
    if "plain" not in args.forms:
        args.forms.insert(0, "plain")
    mcpu = tune.resolve_mcpu(args.mcpu)
    target = tune.tuning_target(tune.llvm_target(mcpu))
    name = tune.target_name("llvm", mcpu)
    stem = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"matmul-forms-{name}-t{args.trials}"
    json_path = stem.with_suffix(".json")
    doc = json.loads(json_path.read_text()) if json_path.is_file() else {"shapes": []}
    work_root = Path(args.work_root) / f"{name}-t{args.trials}"
    for shape in args.shape:
        entry = bench_shape(tuple(shape), args.forms, args.seeds, args.trials, target, work_root, args.repeat)
        entry["date"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
        entry["command"] = "python scripts/bench_matmul_forms.py " + shlex.join(sys.argv[1:] if argv is None else argv)
        doc["shapes"] = [e for e in doc["shapes"] if e["shape"] != entry["shape"]] + [entry]
        doc.update(target_name=name, trials=args.trials, machine=machine_info(target))
        json_path.write_text(json.dumps(doc, indent=1) + "\n")
        write_markdown(stem.with_suffix(".md"), doc)
        for form, r in entry["forms"].items():
            print(f"{shape} {form:10s} median {r['median_ms']:.3f} ms  best {r['best_ms']:.3f}  {r['ms_per_seed']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
