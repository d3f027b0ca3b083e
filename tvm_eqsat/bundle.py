"""Runtime-only bundles: compile here, time on a machine that has no TVM.

The lent GPU machine runs batch commands only, has no network, and takes at most
64 MiB with a run.  TVM's compiler library alone is 259 MB, but TVM runs compiled
modules with its runtime only (``TVM_USE_RUNTIME_LIB=1``, or no compiler library
present: ``tvm.base._RUNTIME_ONLY``): ``tvm.runtime.load_module`` and
``tvm.runtime.vm.VirtualMachine`` work without it, ``tvm.relax`` does not.

A bundle is a folder holding:

* one exported library per entry (``export_library``: the Relax VM executable and
  its kernels, built with the target's flow: dlight on CUDA, the stock pipeline on
  llvm, or MetaSchedule records), with the expected outputs where asked;
* ``python/tvm``: the installed tvm package without its compiler library, its C++
  sources and third-party headers (pure Python plus the runtime libraries);
* ``wheels/``: the tvm_ffi wheel for the device's Python (downloaded once from PyPI
  into ``~/.cache/tvm_eqsat/wheels``, or the installed package when the versions match);
* ``run.py`` (``bundle_runner.py``) and ``manifest.json``.

    from tvm_eqsat import bundle
    path = bundle.build_bundle([bundle.Entry("mlp", mod)], "cuda", "out/bundle")
    # device: python out/bundle/run.py --out $OUT   -> $OUT/results.json
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tvm

from . import provenance

log = logging.getLogger("tvm_eqsat")

LIMIT_BYTES = 64 << 20  # what may travel with one device run, working tree included
DEVICE_PYTHON = "3.12"  # the lent GPU machine's Python
WHEEL_CACHE = Path.home() / ".cache" / "tvm_eqsat" / "wheels"
_SKIP_DIRS = {"3rdparty", "src", "include", "__pycache__"}
_SKIP_FILES = {"libtvm_compiler.so"}


@dataclass
class Entry:
    """One module to time: ``main`` is called with random inputs of its parameters' types."""

    name: str
    mod: tvm.IRModule
    database: Any = None  # a MetaSchedule database: build with its records (None: the flow's stock build)
    number: int = 10  # runs per timing sample
    repeat: int = 30  # samples


def _input_specs(func) -> list[tuple[list[int], str]]:
    return [([int(d) for d in p.ty.shape.values], str(p.ty.dtype)) for p in func.params]


def _copy_runtime_package(dest: Path) -> None:
    """The installed tvm package, minus what only the compiler needs."""
    src = Path(tvm.__file__).resolve().parent

    def ignore(folder: str, names: list[str]) -> set[str]:
        return {n for n in names if n in _SKIP_DIRS or n in _SKIP_FILES or n.endswith(".pyc")}

    shutil.copytree(src, dest / "tvm", ignore=ignore)


def ffi_wheel(python_version: str, dest: Path) -> Path:
    """The tvm_ffi wheel of the installed version for ``python_version``, in ``dest``."""
    version = provenance.version("apache-tvm-ffi")
    tag = "cp" + python_version.replace(".", "")
    WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(WHEEL_CACHE.glob(f"apache_tvm_ffi-{version}-{tag}-*.whl"))
    if not found:
        log.info("downloading apache-tvm-ffi %s for Python %s into %s", version, python_version, WHEEL_CACHE)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", f"apache-tvm-ffi=={version}", "--no-deps",
             "--only-binary=:all:", "--python-version", python_version, "--platform", "manylinux_2_28_x86_64",
             "-d", str(WHEEL_CACHE)],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        found = sorted(WHEEL_CACHE.glob(f"apache_tvm_ffi-{version}-{tag}-*.whl"))
    if not found:
        raise FileNotFoundError(f"no apache-tvm-ffi {version} wheel for Python {python_version}")
    dest.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(found[0], dest))


def _installed_ffi(dest: Path) -> None:
    """The installed tvm_ffi package (when the device's Python is this one's)."""
    import tvm_ffi

    src = Path(tvm_ffi.__file__).resolve().parent
    shutil.copytree(src, dest / "tvm_ffi", ignore=lambda d, names: {n for n in names if n == "__pycache__"})


def build_bundle(
    entries: list[Entry],
    target: Any,
    out_dir: str | os.PathLike,
    python_version: str = DEVICE_PYTHON,
    expected: bool = True,
    rounds: int = 1,
) -> Path:
    """Compile every entry for ``target`` and write a runtime-only bundle to ``out_dir``.

    ``expected``: also run each module here (llvm, whatever the target) and store its
    outputs, which the device run compares with.  ``rounds``: the device times the
    entries in this many interleaved rounds (each ``repeat`` samples), the order rotating."""
    from . import tune, verify

    tgt = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    out, manifest = new_bundle(out_dir, tgt)
    with cuda_compile_env(tgt):
        for e in entries:
            stem = e.name.replace("/", "__")
            ex = tune.build(e.mod, tgt, e.database)
            ex.export_library(str(out / f"{stem}.so"))
            row = {
                "name": e.name,
                "file": f"{stem}.so",
                "inputs": _input_specs(e.mod["main"]),
                "number": e.number,
                "repeat": e.repeat,
            }
            if expected:
                rng = np.random.default_rng(0)  # the device run's inputs: the same seed, the same order
                inputs = [
                    rng.standard_normal(s).astype(d) if "float" in d else np.zeros(s, d) for s, d in row["inputs"]
                ]
                np.save(out / f"{stem}.expected.npy", verify.run(e.mod, inputs)[0])
                row["expected"] = f"{stem}.expected.npy"
            manifest["entries"].append(row)
    manifest["rounds"] = rounds
    return finish_bundle(out, manifest, python_version)


@contextlib.contextmanager
def cuda_compile_env(target: tvm.target.Target):
    """CUDA kernels compiled with nvcc (NVRTC needs cuda-bindings, which only a GPU box has)."""
    if target.kind.name != "cuda":
        yield
        return
    old = os.environ.get("TVM_CUDA_COMPILE_MODE")
    os.environ["TVM_CUDA_COMPILE_MODE"] = "nvcc"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TVM_CUDA_COMPILE_MODE", None)
        else:
            os.environ["TVM_CUDA_COMPILE_MODE"] = old


def new_bundle(out_dir: str | os.PathLike, target: tvm.target.Target) -> tuple[Path, dict]:
    """An empty bundle folder and its manifest (entries to be added)."""
    out = Path(out_dir)
    if out.exists():
        shutil.rmtree(out)
    (out / "python").mkdir(parents=True)
    return out, {
        "target_kind": target.kind.name,
        "target": str(target),
        "entries": [],
        "built_with": provenance.record(),
    }


def finish_bundle(out: Path, manifest: dict, python_version: str) -> Path:
    """Add the runtime, the runner and the manifest; check the size a run may carry."""
    _copy_runtime_package(out / "python")
    if python_version == f"{sys.version_info.major}.{sys.version_info.minor}":
        _installed_ffi(out / "python")
    else:
        ffi_wheel(python_version, out / "wheels")
    shutil.copy2(Path(__file__).with_name("bundle_runner.py"), out / "run.py")
    manifest["python"] = python_version
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    size = bundle_bytes(out)
    if size > LIMIT_BYTES:
        raise ValueError(f"bundle {out} is {size / 2**20:.1f} MiB, over the {LIMIT_BYTES >> 20} MiB a run may carry")
    log.info("bundle %s: %d entries, %.1f MiB", out, len(manifest["entries"]), size / 2**20)
    return out


def bundle_bytes(path: str | os.PathLike) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
