"""Runtime-only bundles: compile here, time on a machine that has no TVM.

The lent GPU machine runs batch commands only, has no network, and takes at most
64 MiB with a run.  TVM's compiler library alone is 259 MB, but TVM runs compiled
modules with its runtime only (``TVM_USE_RUNTIME_LIB=1``, or no compiler library
present: ``tvm.base._RUNTIME_ONLY``): ``tvm.runtime.load_module`` and
``tvm.runtime.vm.VirtualMachine`` work without it, ``tvm.relax`` does not.

A bundle is a folder holding:

* one exported library per entry, gzipped (``export_library``: the Relax VM executable
  and its kernels, built with the target's flow: dlight on CUDA, the stock pipeline on
  llvm, or MetaSchedule records), with the expected outputs where asked;
* ``runtime.tar.gz``: the installed tvm package without its compiler library, its C++
  sources and third-party headers (pure Python plus the runtime libraries; 17 MiB, 3.7
  gzipped);
* ``wheels/``: the tvm_ffi wheel for the device's Python (downloaded once from PyPI
  into ``~/.cache/tvm_eqsat/wheels``, or the installed package when the versions match);
* ``run.py`` (``bundle_runner.py``) and ``manifest.json``.

A library can carry its model's weights (``weights="bound"``) or leave them to the
device (``weights="device"``): the target's pipeline runs up to its fusion and constant
folding (so weight-only subgraphs are folded, as in a normal build), then every large
constant left becomes a parameter of ``main``, which the device fills with random data.
The library then carries code only, so full-size models fit; the timing is the same,
but the outputs cannot be compared with this machine's (the weights differ).

What travels with a device run is the project's working tree as well as the bundle:
``room_bytes()`` is what is left for the bundle.

    from tvm_eqsat import bundle
    path = bundle.build_bundle([bundle.Entry("mlp", mod)], "cuda", "out/bundle")
    # device: python out/bundle/run.py --out $OUT   -> $OUT/results.json
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tvm

from . import bundle_runner, provenance

log = logging.getLogger("tvm_eqsat")

LIMIT_BYTES = 64 << 20  # what may travel with one device run, working tree included
LIFT_MIN_BYTES = 4096  # weights="device": constants at least this large become parameters
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
    weights: str = "bound"  # "bound": in the library; "device": random, made on the device (see above)


def var_specs(variables) -> list[tuple[list[int], str]]:
    """(shape, dtype) of each Relax variable: the arguments the runner makes for them."""
    return [([int(d) for d in v.ty.shape.values], str(v.ty.dtype)) for v in variables]


def pack_runtime_package(dest: Path) -> None:
    """The installed tvm package, minus what only the compiler needs, as ``dest``
    (a .tar.gz that the runner unpacks)."""
    src = Path(tvm.__file__).resolve().parent

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        name = Path(info.name).name
        return None if name in _SKIP_DIRS or name in _SKIP_FILES or name.endswith(".pyc") else info

    with tarfile.open(dest, "w:gz") as tar:
        tar.add(src, arcname="tvm", filter=keep)


FATBIN_DIR = "fatbin"  # CUDA kernels compiled here, by the sha256 of their source


SOLID = "solid.tar.xz"  # a solid bundle's libraries and fatbins, compressed together (see solidify)


def _precompile_cuda(out: Path, executable, target: tvm.target.Target) -> None:
    """TVM keeps a CUDA module as source and compiles it when it is loaded, through the
    Python callback ``tvm_callback_cuda_compile``, which the runtime-only package cannot
    run (it needs the compiler's Target).  So compile each CUDA source here with nvcc and
    store the fatbin by the hash of its source: the runner's callback returns it (and
    runs the device's nvcc only for a source it does not find)."""
    import hashlib

    from tvm.support import nvcc

    from .measure import cuda_sources

    arch = str(target.attrs.get("arch", "sm_90"))
    for code in cuda_sources(executable):
        path = out / FATBIN_DIR / f"{hashlib.sha256(code.encode()).hexdigest()}.fatbin.gz"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            with target:
                fatbin = nvcc.compile_cuda(code, target_format="fatbin", arch=arch, compiler="nvcc")
            path.write_bytes(gzip.compress(bytes(fatbin)))


def add_library(out: Path, stem: str, executable, target: tvm.target.Target) -> str:
    """Export ``executable`` into the bundle, gzipped (CUDA libraries shrink about 4x),
    its CUDA kernels compiled (``_precompile_cuda``); returns its file name."""
    if target.kind.name == "cuda":
        _precompile_cuda(out, executable, target)
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / f"{stem}.so"
        executable.export_library(str(lib))
        with open(lib, "rb") as src, gzip.open(out / f"{stem}.so.gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
    return f"{stem}.so.gz"


def room_bytes() -> int:
    """What a bundle may take: the device limit less the project's working tree, which
    travels with every run (the tracked files; all of 64 MiB outside a git checkout)."""
    root = Path(__file__).resolve().parent.parent
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=root, check=True, capture_output=True, timeout=60
        ).stdout.split(b"\0")
    except (OSError, subprocess.SubprocessError):
        return LIMIT_BYTES
    tree = sum((root / n.decode()).stat().st_size for n in listed if n and (root / n.decode()).is_file())
    return LIMIT_BYTES - tree


def _nbytes(ty) -> int:
    return int(np.prod([int(d) for d in ty.shape.values])) * np.dtype(str(ty.dtype)).itemsize


def lift_constants(mod: tvm.IRModule, min_bytes: int = LIFT_MIN_BYTES) -> tuple[tvm.IRModule, list]:
    """``main`` with each constant of at least ``min_bytes`` turned into a new trailing
    parameter: (the module, [(shape, dtype)] of the new parameters, in order)."""
    from tvm import relax

    lifted: list[relax.Var] = []

    @relax.expr_functor.mutator
    class Lift(relax.PyExprMutator):
        def visit_generic_const_(self, op):
            if not hasattr(op.ty, "shape") or _nbytes(op.ty) < min_bytes:
                return op
            var = relax.Var(f"weight{len(lifted)}", op.ty)
            lifted.append(var)
            return var

    func = mod["main"]
    body = Lift(mod).visit_expr(func.body)
    new = relax.Function(list(func.params) + lifted, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    mod = mod.clone()
    mod.update_func(mod.get_global_var("main"), new)
    return mod, var_specs(lifted)


def build_with_device_weights(mod: tvm.IRModule, target: tvm.target.Target, database=None) -> tuple[Any, list]:
    """Build with the target's default pipeline (and ``database``'s tuned kernels, where
    it has them: ``tune.default_pipeline``), the weights left after its constant folding
    lifted out of the library: (executable, their (shape, dtype))."""
    from . import tune

    specs: list = []

    def lift(m: tvm.IRModule) -> tvm.IRModule:
        m, found = lift_constants(m)
        specs.extend(found)
        return m

    with target:
        ex = tvm.compile(mod, target=target, relax_pipeline=tune.default_pipeline(target, database, lift))
    return ex, specs


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
    solid: bool = False,
) -> Path:
    """Compile every entry for ``target`` and write a runtime-only bundle to ``out_dir``.

    ``expected``: also run each module here (llvm, whatever the target) and store its
    outputs, which the device run compares with.  ``rounds``: the device times the
    entries in this many interleaved rounds (each ``repeat`` samples), the order rotating.
    ``solid``: the libraries travel as one xz archive (``solidify``)."""
    from . import tune, verify

    tgt = target if isinstance(target, tvm.target.Target) else tvm.target.Target(target)
    out, manifest = new_bundle(out_dir, tgt)
    with cuda_compile_env(tgt):
        for e in entries:
            stem = e.name.replace("/", "__")
            weights: list = []
            if e.weights == "device":
                ex, weights = build_with_device_weights(e.mod, tgt, e.database)
            else:
                ex = tune.build(e.mod, tgt, e.database)
            row = {
                "name": e.name,
                "file": add_library(out, stem, ex, tgt),
                "inputs": var_specs(e.mod["main"].params) + weights,
                "weights": len(weights),
                "number": e.number,
                "repeat": e.repeat,
            }
            if expected and not weights:
                inputs = bundle_runner.input_values(np, row["inputs"])  # the device run's inputs
                np.save(out / f"{stem}.expected.npy", verify.run(e.mod, inputs)[0])
                row["expected"] = f"{stem}.expected.npy"
            manifest["entries"].append(row)
    manifest["rounds"] = rounds
    return finish_bundle(out, manifest, python_version, solid)


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
    out.mkdir(parents=True)
    return out, {
        "target_kind": target.kind.name,
        "target": str(target),
        "arch": str(target.attrs.get("arch", "")),
        "entries": [],
        "built_with": provenance.record(),
    }


def finish_bundle(out: Path, manifest: dict, python_version: str, solid: bool = False) -> Path:
    """Add the runtime, the runner and the manifest; check the size a run may carry.
    ``solid``: the libraries and fatbins go into one xz archive (``solidify``)."""
    if solid:
        solidify(out, manifest)
    pack_runtime_package(out / "runtime.tar.gz")
    if python_version == f"{sys.version_info.major}.{sys.version_info.minor}":
        _installed_ffi(out / "python")
    else:
        ffi_wheel(python_version, out / "wheels")
    shutil.copy2(Path(__file__).with_name("bundle_runner.py"), out / "run.py")
    manifest["python"] = python_version
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str))
    size, room = bundle_bytes(out), room_bytes()
    if size > room:
        raise ValueError(
            f"bundle {out} is {size / 2**20:.1f} MiB, over the {room / 2**20:.1f} MiB a run may carry "
            f"beside the project's working tree ({LIMIT_BYTES >> 20} MiB in all)"
        )
    log.info("bundle %s: %d entries, %.1f MiB", out, len(manifest["entries"]), size / 2**20)
    return out


def solidify(out: Path, manifest: dict) -> None:
    """The bundle's gzipped libraries and fatbins moved into one xz archive, which the
    runner unpacks first: libraries of one flow share most of their bytes (the VM's code,
    the kernels' preambles), so together they compress 3-5x better (a sampled CUDA
    schedule takes about 20 KiB in the archive)."""
    (out / "libs").mkdir(exist_ok=True)
    for e in manifest["entries"]:
        if e["file"].endswith(".so.gz"):
            plain = f"libs/{e['file'][: -len('.gz')]}"
            if not (out / plain).exists():
                (out / plain).write_bytes(gzip.decompress((out / e["file"]).read_bytes()))
                (out / e["file"]).unlink()
            e["file"] = plain
    for packed in (out / FATBIN_DIR).glob("*.fatbin.gz"):
        packed.with_suffix("").write_bytes(gzip.decompress(packed.read_bytes()))
        packed.unlink()
    parts = [d for d in ("libs", FATBIN_DIR) if (out / d).is_dir()]
    with tarfile.open(out / SOLID, "w:xz", preset=6) as tar:
        for d in parts:
            tar.add(out / d, arcname=d)
    for d in parts:
        shutil.rmtree(out / d)


def bundle_bytes(path: str | os.PathLike) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())
