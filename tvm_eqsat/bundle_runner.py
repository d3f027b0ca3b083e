"""Times the compiled modules of a bundle (``tvm_eqsat.bundle``) with TVM's runtime only.

This file is copied into every bundle as ``run.py`` and runs on the device machine,
which has Python, numpy and a GPU driver but no TVM: it imports nothing from
tvm_eqsat.  It unpacks the bundled tvm_ffi wheel and ``tvm`` package (runtime
libraries only, no compiler), puts them first on ``sys.path``, loads the target's
runtime library (``libtvm_runtime_cuda.so``: the runtime-only ``import tvm`` does not),
loads each exported library into a Relax VM, checks it against the expected outputs
when the bundle has them, and times it with ``time_evaluator``.  Weights left to the
device (an entry's ``weights``: its trailing inputs) are random.

    python run.py [--out DIR]     # writes DIR/results.json (DIR: $OUT, else the bundle)
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import glob
import gzip
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
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
    runtime = HERE / "runtime.tar.gz"
    if runtime.exists() and not (HERE / "python" / "tvm").exists():
        with tarfile.open(runtime) as tar:
            tar.extractall(HERE / "python")
    solid = HERE / "solid.tar.xz"  # libraries and fatbins compressed together (bundle.finish_bundle)
    if solid.exists() and not (HERE / ".solid").exists():
        with tarfile.open(solid) as tar:
            tar.extractall(HERE)
        (HERE / ".solid").touch()
    os.environ["TVM_USE_RUNTIME_LIB"] = "1"
    sys.path[:0] = [str(site), str(HERE / "python")]


def _load_target_runtime(tvm, kind: str) -> None:
    """The runtime-only ``import tvm`` loads libtvm_runtime.so alone; CUDA modules need
    libtvm_runtime_cuda.so (and CUDA's runtime library, which it links)."""
    if kind != "cuda":
        return
    lib = Path(tvm.__file__).parent / "lib" / "libtvm_runtime_cuda.so"
    try:
        ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
        return
    except OSError:
        pass  # libcudart.so.13 not on the loader's path: look where CUDA and PyTorch keep it
    patterns = ["/usr/local/cuda*/lib64/libcudart.so.1*", "/usr/local/cuda*/lib/libcudart.so.1*"]
    patterns += [f"{p}/nvidia/cu*/lib/libcudart.so.1*" for p in sys.path if p.endswith("-packages")]
    patterns += [f"{p}/nvidia/cuda_runtime/lib/libcudart.so.1*" for p in sys.path if p.endswith("-packages")]
    for found in sorted({f for p in patterns for f in glob.glob(p)}):
        try:
            ctypes.CDLL(found, mode=ctypes.RTLD_GLOBAL)
            ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
            return
        except OSError:
            continue
    ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)  # raises with the loader's own message


COMPILES = {"cached": 0, "compiled_here": 0}  # CUDA sources loaded from the bundle's fatbins / nvcc run here


def _register_cuda_compile(arch: str) -> None:
    """TVM compiles a CUDA module's source when it loads it, through a Python callback
    that needs the compiler; this one returns the fatbin the bundle holds for that
    source (by its sha256), or runs this machine's nvcc when there is none."""
    import tvm_ffi

    def compile_cuda(code: str) -> bytes:
        cached = HERE / "fatbin" / f"{hashlib.sha256(code.encode()).hexdigest()}.fatbin"
        if cached.exists():  # from a solid bundle's archive
            COMPILES["cached"] += 1
            return cached.read_bytes()
        if cached.with_suffix(".fatbin.gz").exists():
            COMPILES["cached"] += 1
            return gzip.decompress(cached.with_suffix(".fatbin.gz").read_bytes())
        nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
        with tempfile.TemporaryDirectory() as tmp:
            src, fatbin = Path(tmp) / "kernels.cu", Path(tmp) / "kernels.fatbin"
            src.write_text(code)
            subprocess.run([nvcc, "--fatbin", "-O3", f"-arch={arch}", "-o", str(fatbin), str(src)], check=True)
            COMPILES["compiled_here"] += 1
            return fatbin.read_bytes()

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", compile_cuda, override=True)


@functools.cache
def _load(tvm, name: str):
    """A bundled library, loaded once however many entries it holds (a kernel bundle
    puts 48 functions in each)."""
    return tvm.runtime.load_module(_library(name))


def _library(name: str) -> str:
    """The path of a bundled library, unpacked first if it was gzipped."""
    path = HERE / name
    if name.endswith(".gz"):
        plain = HERE / "libs" / name[: -len(".gz")]
        if not plain.exists():
            plain.parent.mkdir(exist_ok=True)
            with gzip.open(path, "rb") as src, open(plain, "wb") as dst:
                shutil.copyfileobj(src, dst)
        path = plain
    return str(path)


def _device(tvm, kind: str):
    return tvm.cuda(0) if kind == "cuda" else tvm.cpu(0)


MASK_DTYPES = ("bool", "int8", "uint8")  # arguments filled with random 0s and 1s (tuning_db reads it)


def input_values(np, specs, weights: int = 0) -> list:
    """Random inputs for ``specs`` ((shape, dtype) pairs), the same on the build machine
    (the expected outputs) and on the device: floats from a normal, the last ``weights``
    scaled down to keep deep models finite; masks (``MASK_DTYPES``) random 0s and 1s, so
    a ``where`` takes both branches (a zero mask times only the masked-out one); zeros for
    wider integers, which are often indices."""
    rng = np.random.default_rng(0)
    out = []
    for i, (shape, dtype) in enumerate(specs):
        if dtype in MASK_DTYPES:
            value = rng.integers(0, 2, size=shape).astype(dtype)
        elif "float" not in dtype:
            value = np.zeros(shape, dtype)
        else:
            value = rng.standard_normal(shape).astype(dtype)
            if i >= len(specs) - weights:
                value *= np.asarray(0.05, dtype)
        out.append(value)
    return out


def _args(tvm, np, specs, dev, weights: int = 0) -> list:
    """``input_values`` on the device (the build's expected outputs used the same)."""
    return [tvm.runtime.tensor(v, dev) for v in input_values(np, specs, weights)]


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
    lib = _load(tvm, entry["file"])
    args = _args(tvm, np, entry["inputs"], dev, entry.get("weights", 0))
    number, repeat = entry.get("number", 10), entry.get("repeat", 30)
    row = {"name": entry["name"]}
    if entry.get("kind") == "kernel":  # a compiled kernel (a MetaSchedule candidate, or the stock schedule)
        lib[entry["function"]](*args)  # the first call loads the kernel: not part of the probe
        row["probe_ms"] = lib.time_evaluator(entry["function"], dev, number=1, repeat=1)(*args).mean * 1e3
        return row, lib.time_evaluator(entry["function"], dev, number=number, repeat=repeat), args
    vm = VirtualMachine(lib, dev)
    function = entry.get("function", "main")
    out = vm[function](*args)
    expected = HERE / entry["expected"] if entry.get("expected") else None
    if expected is not None and expected.exists():
        ref = np.load(expected)
        got = out.numpy() if hasattr(out, "numpy") else out[0].numpy()
        scale = float(np.max(np.abs(ref))) or 1.0
        row["max_rel_diff"] = float(np.max(np.abs(got.astype(np.float64) - ref))) / scale
    return row, vm.time_evaluator(function, dev, number=number, repeat=repeat), args


def too_slow(entry: dict, rows: dict) -> bool:
    """A candidate whose one probe run took over 3x its kernel's stock schedule (and 0.1
    ms more) cannot be the one kept: it is not timed further, so a bad random schedule
    cannot spend the run's minutes."""
    base = rows.get(entry.get("baseline") or "")
    probe = rows.get(entry["name"], {}).get("probe_ms")
    return base is not None and probe is not None and probe > max(3 * base["probe_ms"], base["probe_ms"] + 0.1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT") or str(HERE))
    ap.add_argument(
        "--deadline-s", type=float, default=None, help="stop timing after this many seconds; write what was timed"
    )
    args = ap.parse_args()
    start = time.monotonic()
    manifest = json.loads((HERE / "manifest.json").read_text())
    _runtime_path()
    import numpy as np
    import tvm
    from tvm.runtime.vm import VirtualMachine

    _load_target_runtime(tvm, manifest["target_kind"])
    if manifest["target_kind"] == "cuda":
        _register_cuda_compile(manifest.get("arch") or "sm_90")
    dev = _device(tvm, manifest["target_kind"])
    prepared, failures = {}, {}

    def late() -> bool:
        return args.deadline_s is not None and time.monotonic() - start > args.deadline_s

    for entry in manifest["entries"]:
        if late():
            break
        try:
            prepared[entry["name"]] = prepare(tvm, VirtualMachine, entry, dev, np)
        except Exception as err:  # noqa: BLE001 - one failing entry must not lose the others
            failures[entry["name"]] = f"{type(err).__name__}: {err}"[:500]
    first = {name: p[0] for name, p in prepared.items()}
    capped = {e["name"] for e in manifest["entries"] if e["name"] in prepared and too_slow(e, first)}
    # interleaved rounds, their order rotating, so drift hits every entry alike
    names, samples = [n for n in prepared if n not in capped], {name: [] for name in prepared}
    for name in capped:
        samples[name] = [first[name]["probe_ms"]]
    for r in range(manifest.get("rounds", 1)):
        k = r % max(len(names), 1)
        for name in names[k:] + names[:k]:
            if late():
                break
            _, timer, targs = prepared[name]
            samples[name] += [t * 1e3 for t in timer(*targs).results]
    rows = [
        {**first[name], **_stats(samples[name]), **({"capped": True} if name in capped else {})}
        for name in prepared
        if samples[name]
    ]
    untimed = [e["name"] for e in manifest["entries"] if not samples.get(e["name"]) and e["name"] not in failures]
    result = {
        "rows": rows,
        "failures": failures,
        "untimed": untimed,  # left when the deadline came
        "deadline_hit": bool(untimed),
        "capped": len(capped),
        "runtime_only": bool(getattr(tvm.base, "_RUNTIME_ONLY", False)),
        "tvm_file": tvm.__file__,
        "python": platform.python_version(),
        "device": str(dev),
        "rounds": manifest.get("rounds", 1),
        "cuda_sources": COMPILES,
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(result, indent=1))
    shown = result if len(rows) <= 100 else {k: v for k, v in result.items() if k != "rows"}
    print(json.dumps(shown, indent=1))
    print(f"{len(rows)} entries timed, {len(failures)} failed, {len(capped)} stopped after one run (too slow)")


if __name__ == "__main__":
    main()
