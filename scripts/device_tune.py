"""MetaSchedule's own search on the lent GPU: TVM's compiler carried there, kernels tuned there.

Random schedules compiled here and timed there (``device_bench.py candidates``) never beat
dlight by more than 1.17x on the H100/H200: a search that learns from each round's timings has
to run where the GPU is.  The GPU machine has no TVM and takes 64 MiB per run, working tree
included; TVM's compiler library is 259 MB, 61 MB xz-compressed.  So ``pack`` splits it in two
folders carried by two runs in a row (a warm machine keeps the first folder for the second run):

    python scripts/device_tune.py pack --models resnet50 --top 8 --out out/dt
    # device, run 1 (carry out/dt/a): true
    # device, run 2 (carry out/dt/b), within the machine's 30 s warm window:
    #   bash out/dt/b/unpack.sh && PYTHONPATH=/tmp/tvm:/tmp/site python3 scripts/device_tune.py run \\
    #       --kernels out/dt/b/kernels.json --out $OUT --deadline 400
    python scripts/device_tune.py report <files_at>/tuned.json   # the table

``run`` tunes each kernel with ``tvm_eqsat.tune`` (MetaSchedule's evolutionary search, XGBoost
cost model, candidates built in-process: see ``tune.default_builder``) and times its tuned
build against its dlight build, largest kernels first, until the deadline; it writes
``tuned.json`` and the database (``msdb.tar.gz``) after each kernel.  On the H100 (2026-11-26),
16 trials took 65 s and made ResNet-50's 512-channel 3x3 conv 2.05x faster than dlight
(``benchmarks/results/cuda-ms-probe.json``).
"""

from __future__ import annotations

import argparse
import csv
import importlib
import json
import lzma
import shutil
import sys
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEVICE_PACKAGE = "eqsat_device"  # tvm_eqsat's folder as a package without its __init__ (``_load_tune``)
CHUNK = 31_000_000  # bytes of the compressed compiler per folder: each run's carry stays under 64 MiB
UNPACK = """set -e
here=$(dirname "$0")
cat "$here/../a/compiler.xz.part" "$here/compiler.xz.part" | xz -dc -T0 > /tmp/libtvm_compiler.so
mkdir -p /tmp/tvm && tar xzf "$here/runtime.tar.gz" -C /tmp/tvm && mv /tmp/libtvm_compiler.so /tmp/tvm/tvm/lib/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$here"/*.whl
"""


def measured_us(dataset: Path) -> dict[str, float]:
    """Each kernel's latest dlight time in the CUDA dataset (what orders the kernels)."""
    if not dataset.exists():
        return {}
    with open(dataset) as f:
        return {r["key"]: float(r["median_us"]) for r in csv.DictReader(f)}


def pack(args) -> None:
    import tvm

    from tvm_eqsat import bundle, models
    from tvm_eqsat.measure import module_workloads, workload_module

    out = Path(args.out)
    a, b = out / "a", out / "b"
    for d in (a, b):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    known = measured_us(ROOT / "cost_models" / "cuda-default" / "dataset.csv")
    kernels = {}
    for name in args.models:
        model = (models.SMALL if args.small else models.MODELS)[name]()
        for w in module_workloads(model.mod):
            if w.op in ("Conv2d", "Matmul"):
                kernels.setdefault(w.key(), (name, w))
    ranked = sorted(kernels.items(), key=lambda kv: -known.get(kv[0], 0.0))[: args.top]
    doc = [
        {"name": f"k{i}", "model": m, "key": key, "dlight_us_dataset": known.get(key),
         "mod": tvm.ir.save_json(workload_module(w))}
        for i, (key, (m, w)) in enumerate(ranked)
    ]  # fmt: skip
    (b / "kernels.json").write_text(json.dumps(doc))
    if not args.no_compiler:
        lib = Path(tvm.__file__).parent / "lib" / "libtvm_compiler.so"
        packed = lzma.compress(lib.read_bytes(), preset=6)
        (a / "compiler.xz.part").write_bytes(packed[:CHUNK])
        (b / "compiler.xz.part").write_bytes(packed[CHUNK:])
    bundle.pack_runtime_package(b / "runtime.tar.gz")
    bundle.ffi_wheel(bundle.DEVICE_PYTHON, b)
    for wheel in args.wheel or []:
        shutil.copy(wheel, b)
    (b / "unpack.sh").write_text(UNPACK)
    sizes = {d.name: sum(f.stat().st_size for f in d.iterdir()) / 2**20 for d in (a, b)}
    print(f"{len(doc)} kernels; {out}/a {sizes['a']:.1f} MiB, {out}/b {sizes['b']:.1f} MiB (each run adds the tree)")
    if not args.wheel:
        print("no --wheel given: the device has no xgboost; pass xgboost-cpu's wheel for Python 3.12")


def _load_tune():
    """``tvm_eqsat/tune.py`` and the module it imports (``tuning_db.py``) without the package's
    ``__init__``: the package's other modules need egglog, which the device lacks.  A bare
    package module whose path is ``tvm_eqsat/`` lets ``tune``'s relative import find its sibling."""
    package = types.ModuleType(DEVICE_PACKAGE)
    package.__path__ = [str(ROOT / "tvm_eqsat")]
    sys.modules.setdefault(DEVICE_PACKAGE, package)
    return importlib.import_module(f"{DEVICE_PACKAGE}.tune")


def _time_ms(tvm, ex, mod, dev, np) -> float:
    from tvm import relax

    vm = relax.VirtualMachine(ex, dev)
    args = [
        tvm.runtime.tensor(np.random.rand(*[int(d) for d in p.ty.shape.values]).astype(str(p.ty.dtype)), dev)
        for p in mod["main"].params
    ]
    return float(np.median(vm.time_evaluator("main", dev, number=20, repeat=10)(*args).results)) * 1e3


def run(args) -> None:
    import numpy as np
    import tvm

    start = time.monotonic()
    tune = _load_tune()
    target = tvm.target.Target({"kind": "cuda", "arch": args.arch} if args.target == "cuda" else {"kind": args.target})
    dev = tvm.cuda(0) if args.target == "cuda" else tvm.cpu(0)
    out, work = Path(args.out), Path(args.work_dir)
    out.mkdir(parents=True, exist_ok=True)
    result = {"target": str(target), "trials": args.trials, "tvm": tvm.__version__, "rows": []}
    for k in json.loads(Path(args.kernels).read_text()):
        if time.monotonic() - start > args.deadline:
            break
        row = {key: k[key] for key in ("name", "model", "key", "dlight_us_dataset")}
        try:
            mod = tvm.ir.load_json(k["mod"])
            row["dlight_ms"] = _time_ms(tvm, tune.build(mod, target, None), mod, dev, np)
            t = time.monotonic()
            db = tune.tune(mod, target, work_dir=work / k["name"], trials=args.trials)
            row["tune_s"] = round(time.monotonic() - t, 1)
            row["tuned_ms"] = _time_ms(tvm, tune.build(mod, target, db), mod, dev, np)
            row["speedup"] = row["dlight_ms"] / row["tuned_ms"]
        except Exception as err:  # noqa: BLE001 - one kernel's failure must not lose the others
            row["error"] = f"{type(err).__name__}: {err}"[:1000]
        result["rows"].append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "key"}), flush=True)
        result["seconds"] = round(time.monotonic() - start, 1)
        (out / "tuned.json").write_text(json.dumps(result, indent=1))
        if work.exists():  # not where the first kernel failed before tuning
            shutil.make_archive(str(out / "msdb"), "gztar", work)


def report(args) -> None:
    doc = json.loads(Path(args.results).read_text())
    print(f"{doc['target']}, {doc['trials']} trials per kernel, TVM {doc['tvm']}, {doc.get('seconds')} s")
    print("| kernel | model | dlight ms | tuned ms | speedup | tuning s |")
    print("|---|---|---|---|---|---|")
    for r in doc["rows"]:
        if "error" in r:
            print(f"| {r['name']} | {r['model']} | failed: {r['error'][:80]} | | | |")
        else:
            print(
                f"| {r['name']} | {r['model']} | {r['dlight_ms']:.4g} | {r['tuned_ms']:.4g} "
                f"| {r['speedup']:.2f}x | {r['tune_s']} |"
            )


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("pack", help="here: the compiler in two carry folders, and the kernels to tune")
    k.add_argument("--models", nargs="+", default=["resnet50"])
    k.add_argument("--small", action="store_true")
    k.add_argument("--top", type=int, default=8, help="the dearest conv and matmul kernels (dlight times measured)")
    k.add_argument("--wheel", nargs="*", help="wheels the device lacks (xgboost-cpu for Python 3.12)")
    k.add_argument("--no-compiler", action="store_true", help="leave the compiler out (tests)")
    k.add_argument("--out", required=True)
    r = sub.add_parser("run", help="there: tune each kernel, time it against dlight")
    r.add_argument("--kernels", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--work-dir", default="/tmp/msdb")
    r.add_argument("--trials", type=int, default=16)
    r.add_argument("--deadline", type=float, default=400, help="start no kernel after this many seconds")
    r.add_argument("--target", default="cuda")
    r.add_argument("--arch", default="sm_90")
    t = sub.add_parser("report", help="the table of a run's tuned.json")
    t.add_argument("results")
    args = p.parse_args(argv)
    {"pack": pack, "run": run, "report": report}[args.cmd](args)


if __name__ == "__main__":
    main()
