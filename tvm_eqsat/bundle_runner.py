"""Times the compiled modules of a bundle (``tvm_eqsat.bundle``) with TVM's runtime only.

This file is copied into every bundle as ``run.py`` and runs on the device machine,
which has Python, numpy and a GPU driver but no TVM: it imports nothing from
tvm_eqsat.  It unpacks the bundled tvm_ffi wheel, puts the bundled ``tvm`` package
(runtime libraries only, no compiler) first on ``sys.path``, loads each exported
library into a Relax VM, checks it against the expected outputs when the bundle has
them, and times it with ``time_evaluator``.

    python run.py [--out DIR]     # writes DIR/results.json (DIR: $OUT, else the bundle)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _runtime_path() -> None:
    """The bundled tvm (runtime only) and tvm_ffi, ahead of anything installed."""
    site = HERE / "site"
    for wheel in sorted(HERE.glob("wheels/*.whl")):
        marker = site / f".{wheel.name}"
        if not marker.exists():
            with zipfile.ZipFile(wheel) as z:
                z.extractall(site)
            marker.touch()
    os.environ["TVM_USE_RUNTIME_LIB"] = "1"
    sys.path[:0] = [str(site), str(HERE / "python")]


def _device(tvm, kind: str):
    return tvm.cuda(0) if kind == "cuda" else tvm.cpu(0)


def _args(tvm, np, specs, dev) -> list:
    rng = np.random.default_rng(0)
    return [
        tvm.runtime.tensor(
            rng.standard_normal(shape).astype(dtype) if "float" in dtype else np.zeros(shape, dtype), dev
        )
        for shape, dtype in specs
    ]


def _stats(samples_ms: list[float]) -> dict:
    samples_ms = sorted(samples_ms)
    return {
        "median_ms": samples_ms[len(samples_ms) // 2],
        "p10_ms": samples_ms[len(samples_ms) // 10],
        "p90_ms": samples_ms[(9 * len(samples_ms)) // 10],
        "samples": len(samples_ms),
    }


def prepare(tvm, VirtualMachine, entry: dict, dev, np) -> tuple[dict, object, list]:
    """Load one entry, run it once (checking its outputs against the expected ones, where
    the bundle has them): (its result row so far, its timer, its arguments)."""
    lib = tvm.runtime.load_module(str(HERE / entry["file"]))
    args = _args(tvm, np, entry["inputs"], dev)
    number, repeat = entry.get("number", 10), entry.get("repeat", 30)
    row = {"name": entry["name"]}
    if entry.get("kind") == "kernel":  # a compiled kernel (a MetaSchedule candidate)
        return row, lib.time_evaluator(entry["function"], dev, number=number, repeat=repeat), args
    vm = VirtualMachine(lib, dev)
    out = vm["main"](*args)
    expected = HERE / entry["expected"] if entry.get("expected") else None
    if expected is not None and expected.exists():
        ref = np.load(expected)
        got = out.numpy() if hasattr(out, "numpy") else out[0].numpy()
        scale = float(np.max(np.abs(ref))) or 1.0
        row["max_rel_diff"] = float(np.max(np.abs(got.astype(np.float64) - ref))) / scale
    return row, vm.time_evaluator("main", dev, number=number, repeat=repeat), args


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT") or str(HERE))
    args = ap.parse_args()
    manifest = json.loads((HERE / "manifest.json").read_text())
    _runtime_path()
    import numpy as np
    import tvm
    from tvm.runtime.vm import VirtualMachine

    dev = _device(tvm, manifest["target_kind"])
    prepared, failures = {}, {}
    for entry in manifest["entries"]:
        try:
            prepared[entry["name"]] = prepare(tvm, VirtualMachine, entry, dev, np)
        except Exception as err:  # noqa: BLE001 - one failing entry must not lose the others
            failures[entry["name"]] = f"{type(err).__name__}: {err}"[:500]
    # interleaved rounds, their order rotating, so drift hits every entry alike
    names, samples = list(prepared), {name: [] for name in prepared}
    for r in range(manifest.get("rounds", 1)):
        k = r % max(len(names), 1)
        for name in names[k:] + names[:k]:
            _, timer, targs = prepared[name]
            samples[name] += [t * 1e3 for t in timer(*targs).results]
    rows = [{**prepared[name][0], **_stats(samples[name])} for name in names]
    result = {
        "rows": rows,
        "failures": failures,
        "runtime_only": bool(getattr(tvm.base, "_RUNTIME_ONLY", False)),
        "tvm_file": tvm.__file__,
        "python": platform.python_version(),
        "device": str(dev),
        "rounds": manifest.get("rounds", 1),
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
