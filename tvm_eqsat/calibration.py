"""A CPU's own calibration of the tuned llvm roofline, so the pass prices that CPU as itself.

The roofline gives each kind of kernel its own compute peak and the machine its memory tiers
(``cost._tuned_llvm_machines``).  A CPU measured by ``scripts/measure_peak.py`` (tuned compute
peaks) and ``scripts/measure_bandwidth.py`` (tuned GEMVs of growing size) can be priced as
itself: ``derive`` turns the two results into a calibration, ``scripts/calibrate_cpu.py``
writes it to ``cost_models/machines/<cpu>.json``, and ``load`` reads every such file back for
the roofline.  A CPU without one is priced as the nearest machine the roofline knows.
Figures measured apart (a strided conv's share, ``set_figure``) name their results in
``sources``; figures no script writes (a rate read off tuning records) are set by hand and
say so under ``by_hand``, each with its source and why.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

import numpy as np

log = logging.getLogger("tvm_eqsat")

COMPUTE_CLASSES = ("matmul", "conv", "depthwise")
# the kinds of conv whose NHWC over NCHW time a calibration may hold (``cost.layout_kind``)
LAYOUT_CLASSES = ("1x1_wide", "1x1_narrow", "square_wide", "square_narrow", "asymmetric", "depthwise")
# the figures besides the compute peaks a calibration may set (``cost.Machine``'s fields)
MEMORY_KEYS = frozenset(
    {
        "bandwidth_gbs",
        "cache_gbs",
        "gather_ns",
        "batch_norm_ns",
        "libm_ns",
        "strided_1x1_share",
        "strided_share",
        "strided_3x3_share",
        *(f"nhwc_{kind}" for kind in LAYOUT_CLASSES),
        "nchwc_conv",
        "nchwc_depthwise",
    }
)
CACHE_BYTES = 16 << 20  # the tuned llvm machines' cache tier: a kernel whose traffic fits streams at cache_gbs
MIN_GEMV_BYTES = 512 << 10  # smaller GEMVs measure the call, not the memory


def gemv_rates(bandwidth_rows: list[dict], cache_bytes: int = CACHE_BYTES) -> tuple[list[float], list[float]]:
    """GB/s of the one-row matmuls (GEMVs) of ``measure_bandwidth.py``'s rows that move at least
    ``MIN_GEMV_BYTES``: those whose traffic fits the cache tier, and those that overflow it."""
    gemvs = [
        r for r in bandwidth_rows if r["op"] == "Matmul" and r["shapes"][0][0] == 1 and r["bytes"] >= MIN_GEMV_BYTES
    ]
    cached = [float(r["gb_per_s"]) for r in gemvs if r["bytes"] <= cache_bytes]
    spilled = [float(r["gb_per_s"]) for r in gemvs if r["bytes"] > cache_bytes]
    return cached, spilled


def derive(peak: dict, bandwidth: dict) -> dict:
    """A calibration from one CPU's ``measure_peak.py`` and ``measure_bandwidth.py`` results:
    the compute peak of each kind of kernel (matmuls: the geometric mean of the square and the
    batched matmul; dense and depthwise convs as measured) and the memory tiers (the median
    GEMV rate within the cache tier and beyond it)."""
    rows = [r for r in peak["rows"] if r["mcpu"] != "generic"]
    cpus = {r["mcpu"] for r in rows}
    if len(cpus) != 1:
        raise ValueError(f"the peak results name {sorted(cpus) or 'no'} CPU besides generic code; one is needed")
    rate = {r["case"]: float(r["gflop_per_s"]) for r in rows}
    missing = {"matmul", "batch-matmul", "conv", "depthwise"} - set(rate)
    if missing:
        raise ValueError(f"the peak results lack {sorted(missing)}")
    cached, spilled = gemv_rates(bandwidth["rows"])
    if not cached or not spilled:
        raise ValueError(
            f"the bandwidth results need GEMVs of {MIN_GEMV_BYTES >> 10} KB to {CACHE_BYTES >> 20} MB and beyond"
        )
    return {
        "mcpu": cpus.pop(),
        "vector_bits": int(rows[0]["vector_bits"]),
        "peak_gflops": {
            "matmul": round(float(np.sqrt(rate["matmul"] * rate["batch-matmul"])), 1),
            "conv": rate["conv"],
            "depthwise": rate["depthwise"],
        },
        "memory": {
            "bandwidth_gbs": round(float(np.median(spilled)), 1),
            "cache_gbs": round(float(np.median(cached)), 1),
        },
        "measured": {"peak": peak.get("date"), "bandwidth": bandwidth.get("date")},
    }


def set_figure(path: Path, key: str, value: float, source: str, date: str) -> dict:
    """Record one figure measured apart from the peaks and the memory tiers (a strided conv's
    share of the conv rate, ``scripts/bench_strided.py``) in a CPU's calibration file, with the
    results it came from; ``calibrate_cpu.py`` keeps such figures when it measures again."""
    if key not in MEMORY_KEYS:
        raise ValueError(f"{key} is not a figure of cost.Machine: {sorted(MEMORY_KEYS)}")
    if not Path(path).is_file():
        raise FileNotFoundError(f"{path}: calibrate this CPU first (scripts/calibrate_cpu.py)")
    doc = json.loads(Path(path).read_text())
    doc["memory"][key] = value
    doc.setdefault("measured", {})[key] = date
    doc.get("by_hand", {}).pop(key, None)  # measured now: its source is the results'
    doc["sources"] = [s for s in doc.get("sources", []) if s != source] + [source]  # the peaks' and memory's first
    Path(path).write_text(json.dumps(doc, indent=1) + "\n")
    load.cache_clear()
    return doc


def record_figures(path: Path, figures: dict[str, float], results: Path, root: Path, date: str) -> None:
    """``set_figure`` for each of ``figures``, measured in the results file ``results``, which
    the calibration names relative to ``root`` (the repository) where it lies inside it: what
    the scripts' ``--calibrate`` does (bench_strided, bench_nchwc, layout_ratios)."""
    source = Path(results).resolve()
    source = str(source.relative_to(root)) if source.is_relative_to(root) else str(source)
    for key, value in figures.items():
        set_figure(path, key, value, source, date)


def kept_figures(old: dict, new: dict) -> dict:
    """``new`` (a calibration just derived) with the figures of ``old`` (the CPU's file before)
    that the peaks and memory tiers do not give: ``set_figure``'s, with their dates and sources,
    and those set by hand (``by_hand``: {figure: {source, why}}), which keep their reasons.  A
    figure set by hand that ``derive`` gives (a memory tier) is measured again instead."""
    extra = {k: v for k, v in old.get("memory", {}).items() if k not in new["memory"]}
    if not extra:
        return new
    sources = [s for s in old.get("sources", []) if s not in new.get("sources", [])]
    measured = {k: v for k, v in old.get("measured", {}).items() if k in extra}
    by_hand = {k: v for k, v in old.get("by_hand", {}).items() if k in extra}
    return {
        **new,
        "memory": {**new["memory"], **extra},
        "measured": {**new.get("measured", {}), **measured},
        "sources": list(new.get("sources", [])) + sources,
        **({"by_hand": by_hand} if by_hand else {}),
    }


@functools.cache
def load(directory: Path) -> dict[str, tuple[int, dict, dict]]:
    """``{mcpu: (vector bits, GFLOP/s per compute class, memory tiers)}`` of every calibration
    file in ``directory`` (none if it does not exist); a file that cannot be read is skipped
    with a warning, so a broken calibration never stops a build."""
    out = {}
    for path in sorted(Path(directory).glob("*.json")) if Path(directory).is_dir() else []:
        try:
            doc = json.loads(path.read_text())
            peaks = {c: float(doc["peak_gflops"][c]) for c in COMPUTE_CLASSES}
            memory = {k: float(v) for k, v in doc["memory"].items()}
            if not memory.keys() <= MEMORY_KEYS:
                raise ValueError(f"unknown memory figures {sorted(memory.keys() - MEMORY_KEYS)}")
            out[str(doc["mcpu"])] = (int(doc["vector_bits"]), peaks, memory)
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.warning("tvm_eqsat: CPU calibration %s skipped: %s", path, err)
    return out
