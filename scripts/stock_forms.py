"""stock+tvm is not one module: TVM's graph passes (``benchmark.TVM_PASSES``) return one of
several modules for some models from process to process.  Found on NASRNN (2026-11-29): its
``CombineParallelMatmul`` merges the gate matmuls and keeps the bias adds after the split in
some processes, fused into the merged matmul in others, and the two tuned builds differ by 11-13%.
The benchmark times whichever module its process builds; the strongest stock baseline is
the fastest of them.

This script runs the passes in ``--processes`` fresh processes, keeps each distinct module,
then builds every one (and stock, and the pass's module) with the benchmark's tuned database,
tuning whatever kernels it lacks as the benchmark would, and times them interleaved in one
process.  Writes ``benchmarks/results/stock-forms-<target>-<model>.json`` and ``.md``.

    python scripts/stock_forms.py --model nasrnn --mcpu znver5 --cold-cache
"""

from __future__ import annotations

import argparse
import datetime
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchmark  # noqa: E402

from tvm_eqsat import provenance  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

_ONE = """
import sys, tvm
sys.path.insert(0, {scripts!r})
from benchmark import make_target, module_hash, tvm_graph_passes
from tvm_eqsat import models
model = (models.SMALL if {small!r} else models.MODELS)[{model!r}]()
mod, _ = tvm_graph_passes(model.mod, make_target("llvm", "", {mcpu!r}))
path = {folder!r} + "/" + module_hash(mod) + ".json"
open(path, "w").write(tvm.ir.save_json(mod))
print(path)
"""


def stock_tvm_forms(model: str, mcpu: str, processes: int, folder: str, small: bool = False) -> dict[str, str]:
    """The distinct modules ``benchmark.tvm_graph_passes`` returned for ``model`` over
    ``processes`` fresh processes: module hash -> the file its JSON was saved to."""
    code = _ONE.format(scripts=str(ROOT / "scripts"), small=small, model=model, mcpu=mcpu, folder=folder)
    forms: dict[str, str] = {}
    for _ in range(processes):
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
        path = out.stdout.strip().splitlines()[-1]
        forms.setdefault(Path(path).stem, path)
    return forms


def markdown(doc: dict) -> str:
    rows = doc["rows"]
    best = min(r["median_ms"] for r in rows if r["variant"].startswith("stock+tvm"))
    eqsat = next(r for r in rows if r["variant"] == "eqsat")
    lines = [
        f"# stock+tvm's modules from process to process: {doc['model']}, {doc['target']}",
        "",
        f"`{doc['command']}`; {doc['date']}, {doc['machine']}. TVM's graph passes ran in {doc['processes']} fresh "
        f"processes and returned {doc['forms']} distinct modules; each was built with the tuned database "
        f"`{doc['work_dir']}` (kernels it lacked tuned first, {doc['trials']} trials) and timed with stock and "
        f"tvm-eqsat, {doc['repeat']} interleaved samples in one process (median, p10-p90).",
        "",
        "| variant | module hash | ms | p10-p90 | eqsat's speedup over it |",
        "|---|---|---|---|---|",
        *(
            f"| {r['variant']} | {r['module_hash'][:10]} | {r['median_ms']:.4f} | {r['p10_ms']:.4f}-{r['p90_ms']:.4f} | "
            f"{r['median_ms'] / eqsat['median_ms']:.3f}x |"
            for r in rows
        ),
        "",
        f"Against the fastest stock+tvm module, tvm-eqsat ran {best / eqsat['median_ms']:.3f}x.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="nasrnn")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--mcpu", default="generic")
    ap.add_argument("--cold-cache", action="store_true", help="the benchmark's database tuned with cold caches")
    ap.add_argument("--trials", type=int, default=32)
    ap.add_argument("--processes", type=int, default=6, help="fresh processes to run TVM's passes in")
    ap.add_argument("--repeat", type=int, default=40)
    ap.add_argument("--work-dir", default=None, help="the tuned database (default: the benchmark's)")
    ap.add_argument("--out", default=None, help="results stem (default: benchmarks/results/stock-forms-...)")
    args = ap.parse_args(argv)

    import tvm

    from tvm_eqsat import models, timing, tune

    benchmark.COLD_CACHE = args.cold_cache
    name = tune.target_name("llvm", args.mcpu, args.cold_cache)
    work = args.work_dir or benchmark.default_work_dir(name)
    target = benchmark.make_target("llvm", "", args.mcpu)
    model = (models.SMALL if args.small else models.MODELS)[args.model]()
    with tempfile.TemporaryDirectory() as folder:
        forms = stock_tvm_forms(args.model, args.mcpu, args.processes, folder, args.small)
        mods = {"stock": model.mod}
        mods.update(
            {f"stock+tvm ({i + 1})": tvm.ir.load_json(Path(p).read_text()) for i, p in enumerate(forms.values())}
        )
    mods["eqsat"] = benchmark.make_variant("eqsat", model.mod, target, {"flow": "tuned"}).mod  # the benchmark's
    samplers = {}
    for variant, mod in mods.items():
        v = benchmark.Variant(variant, mod)
        benchmark.build_variant(v, target, "tuned", args.trials, work)
        samplers[variant] = timing.tvm_sampler(v.ex, benchmark.device_for(target), model.inputs, 10.0)[2]
    times = timing.time_interleaved(samplers, args.repeat)
    rows = [
        {
            "variant": variant,
            "module_hash": benchmark.module_hash(mods[variant]),
            "median_ms": float(np.median(t)),
            "p10_ms": float(np.percentile(t, 10)),
            "p90_ms": float(np.percentile(t, 90)),
        }
        for variant, t in times.items()
    ]
    doc = {
        "model": args.model + (" (small)" if args.small else ""),
        "target": name,
        "command": "python scripts/stock_forms.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:])),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": provenance.cpu_name(),
        "processes": args.processes,
        "forms": len(forms),
        "work_dir": work,
        "trials": args.trials,
        "repeat": args.repeat,
        "rows": rows,
        "provenance": provenance.record(),
    }
    stem = Path(args.out) if args.out else RESULTS / f"stock-forms-{name}-{args.model}"
    provenance.write_results(stem, doc, markdown)
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
