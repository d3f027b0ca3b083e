"""Where a result came from: the machine, the library versions and the sources.

Every script that writes results records this beside them (JSON sidecars, model
metadata), so a number can be traced to the machine and the code that made it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import time
from pathlib import Path

from .paths import data_dir

DISTRIBUTIONS = (
    "apache-tvm",
    "apache-tvm-ffi",
    "egglog",
    "numpy",
    "scipy",
    "highspy",
    "xgboost",
    "torch",
    "transformers",
)


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


def machine() -> dict:
    """The machine, as the results depend on it."""
    return {
        "machine": cpu_name(),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def versions() -> dict:
    """The versions of the libraries the numbers depend on ('' where one is not installed)."""
    return {dist: version(dist) for dist in DISTRIBUTIONS}


def sources_hash() -> str:
    """A short hash of the rules, the cost models and the package sources: what decides
    what the pass returns."""
    rules, models, package = data_dir("rules"), data_dir("cost_models"), Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for base, pattern in ((rules, "*.egg"), (models, "*/*.json"), (package, "*.py")):
        for path in sorted(base.glob(pattern)):
            digest.update(str(path.relative_to(base)).encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def source_state() -> dict:
    """The commit, the uncommitted files and ``sources_hash``."""
    root = Path(__file__).resolve().parent.parent
    state = {"sources_sha256": sources_hash()}
    try:

        def git(*cmd: str) -> str:
            return subprocess.run(["git", *cmd], cwd=root, capture_output=True, text=True, timeout=30).stdout.strip()

        state.update(commit=git("rev-parse", "HEAD"), uncommitted=git("status", "--porcelain").splitlines())
    except (OSError, subprocess.SubprocessError):
        pass
    return state


def record() -> dict:
    """Everything above in one dict, with the date: what a results sidecar starts with."""
    return {**machine(), "versions": versions(), **source_state(), "date": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def plain(value):
    """TVM values (target configs, traces, containers, IntImm) as plain JSON values;
    anything else that is not iterable as its string."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(getattr(value, "value", None), (int, float)):  # IntImm, FloatImm
        return value.value
    if hasattr(value, "items"):
        return {str(k): plain(v) for k, v in value.items()}
    try:
        return [plain(v) for v in value]
    except TypeError:
        return str(value)


def write_results(stem, doc, markdown) -> None:
    """A result's JSON sidecar (``stem``.json, ``doc`` as ``plain`` values) and its page
    (``stem``.md, ``markdown(doc)``) side by side, the folder made if need be."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(plain(doc), indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(doc))
