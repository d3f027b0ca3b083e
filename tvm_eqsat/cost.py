"""Node costs: predicted latency (microseconds) of a node as TVM's fused build runs it.

Two models: the learned one (``xgb``: XGBoost trained on kernels TVM compiled
and timed, see ``xgb_model``) for kernel nodes, and an analytic roofline (a
kernel costs a launch plus max(FLOPs / peak, bytes / bandwidth)) for the rest
and for targets without a trained model.  Both follow how TVM
builds the graph: values computed only from constants/weights are folded at
compile time (zero), reshape-like views are nearly free (but not a split: FuseOps
starts a kernel at it, which copies the input into the parts; nor, in a tuned CPU build, a
reshape FuseOps leaves alone between two kernels: ``fusion.lone_reshapes``), a transpose
that moves the innermost axis gathers at a measured rate per element, a batch norm's kernel
(a square root and a divide per element) runs at one too, and element-wise ops that FuseOps
folds into their producer pay only a small epilogue share.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import calibration, ops
from .features import KERNEL_OPS, flops, nbytes
from .graph import CONST, INPUT, OPAQUE, TGET, TUPLE_NODE, TensorTy, Ty
from .paths import data_dir

if TYPE_CHECKING:
    import tvm

log = logging.getLogger("tvm_eqsat")

EPSILON_US = 1e-6  # every chosen node costs something: ties never make cycles attractive
FLOWS = ("tuned", "default")  # how the module will be built: MetaSchedule-tuned, or the stock untuned/dlight build
EPILOGUE_SHARE = 0.1  # share of its own memory traffic that a fused element-wise op pays


@dataclass(frozen=True)
class Machine:
    peak_gflops: float
    bandwidth_gbs: float  # from memory: kernels whose traffic fits no cache tier
    launch_us: float
    cache_bytes: int = 0  # a kernel whose traffic fits streams at cache_gbs (weights stay hot across runs)
    cache_gbs: float = 0.0
    gather_ns: float = 0.0  # per element, a transpose that moves the innermost axis (``gathers``)
    batch_norm_ns: float = 0.0  # per element, an inference batch norm as TVM's tuned kernel runs it
    libm_ns: float = 0.0  # per element, ``ops.LIBM_OPS`` as TVM's tuned kernels run them: a libm call each
    strided_1x1_share: float = 1.0  # of its class's compute rate, a strided NCHW 1x1 conv (``strided_1x1``)
    strided_share: float = 1.0  # the same, a strided NCHW conv with a 5x5 or wider kernel (``strided_wide``)
    strided_3x3_share: float = 1.0  # the same, a strided NCHW conv with a 2x2 to 4x4 kernel (``strided_3x3``)
    # an NHWC conv's time over the same conv's in NCHW, per kind of conv (``layout_class``):
    # in-model times of both layouts tuned, averaged over the kind (scripts/layout_ratios.py)
    nhwc_1x1_wide: float = 1.0
    nhwc_1x1_narrow: float = 1.0
    nhwc_square_wide: float = 1.0
    nhwc_square_narrow: float = 1.0
    nhwc_asymmetric: float = 1.0
    nhwc_depthwise: float = 1.0
    # a channel-blocked conv's time (nchwc.egg: TOPI's conv2d_NCHWc, NCHW16c) over the same
    # conv's in NCHW, both tuned alone (scripts/bench_nchwc.py); 1.0: not measured, and then
    # the blocked form, priced like the NCHW one plus its layout copies, is never chosen
    nchwc_conv: float = 1.0
    # the same for a depthwise conv (nchwc.egg's DepthwiseConv2dNCHWc, te_ops.py's kernel) over
    # the NCHW depthwise conv's; 1.0: priced alike, so it is taken only where it saves copies
    nchwc_depthwise: float = 1.0

    def libm_us(self, op: str, out_ty) -> float:
        """The libm calls of one of ``ops.LIBM_OPS``, one per output element (0 for other ops)."""
        if op in ops.LIBM_OPS and self.libm_ns and isinstance(out_ty, TensorTy):
            return out_ty.numel * self.libm_ns / 1e3
        return 0.0

    def us_per_byte(self, traffic: float) -> float:
        """Microseconds per byte for a kernel moving ``traffic`` bytes (the tier it fits)."""
        gbs = self.cache_gbs if traffic <= self.cache_bytes else self.bandwidth_gbs
        return 1.0 / (gbs * 1e3)

    def busy_us(self, flops, traffic):
        """The larger of a kernel's compute and memory time (the roofline, without the launch),
        for scalars or arrays of FLOPs and bytes moved."""
        traffic = np.asarray(traffic, dtype=np.float64)
        in_cache = (traffic <= self.cache_bytes) & (self.cache_gbs > 0)
        per_byte = 1.0 / (np.where(in_cache, self.cache_gbs, self.bandwidth_gbs) * 1e3)
        return np.maximum(np.asarray(flops, dtype=np.float64) / (self.peak_gflops * 1e3), traffic * per_byte)


MACHINES = {  # (target kind, build flow) -> machine
    # 2-core x86 VM, MetaSchedule-tuned fp32 kernels (~120 GFLOP/s on a tuned 512^3 matmul);
    # bandwidths of tuned GEMVs (1 x k @ k x n, 8 trials): 47-75 GB/s with 0.1-8 MB of
    # traffic, which stays in L2/L3 from run to run, 27 GB/s at 32 MB
    # (benchmarks/results/bandwidth-llvm.json, scripts/measure_bandwidth.py)
    # transposes that move the innermost axis (``gathers``): 0.43 ns per element, the geometric
    # mean of the three of bandwidth-llvm-permute.json (0.10-1.49 ns, timed warm)
    ("llvm", "tuned"): Machine(
        peak_gflops=100.0,
        bandwidth_gbs=25.0,
        launch_us=2.0,
        cache_bytes=calibration.CACHE_BYTES,
        cache_gbs=70.0,
        gather_ns=0.43,
        batch_norm_ns=1.1,
        libm_ns=6.6,
    ),
    # the same VM, stock untuned loops: a rough single tier (kernels there are costed by
    # the learned default-flow model; this prices views, splits and epilogues)
    ("llvm", "default"): Machine(peak_gflops=100.0, bandwidth_gbs=10.0, launch_us=2.0),
    # a datacenter GPU under dlight schedules (well below the tensor-core peak)
    ("cuda", "tuned"): Machine(peak_gflops=30000.0, bandwidth_gbs=2000.0, launch_us=4.0),
    ("cuda", "default"): Machine(peak_gflops=30000.0, bandwidth_gbs=2000.0, launch_us=4.0),
}


# The llvm machines above were calibrated on TVM's plain llvm target, which compiles for
# generic x86-64 (SSE2, 128-bit vectors).  Tuned kernels do not all reach the same share of
# the peak, and do not all gain alike from wider vectors (-mcpu naming the CPU).  On a 2-core
# Xeon VM (emeraldrapids, AVX-512), tuned with 32 trials and timed in one process, tuning
# paused, in GFLOP/s (benchmarks/results/peak-llvm-emeraldrapids.json, scripts/measure_peak.py,
# 2026-11-27 23:31; an earlier run under load measured 1.3-1.8x less):
#
#   kernel                                generic   AVX-512
#   512^3 matmul                             53.6     289.7
#   36 x (196x64 @ 64x64) batched matmul     45.6     138.6
#   3x3 conv, 64 ch, 56x56                   50.4     121.0
#   depthwise 6x6/4 conv (Winograd's input)  29.9      48.3
#
# A matmul's peak is the geometric mean of the two matmuls.  Generic code: each class's
# peak is the machine's 100 GFLOP/s times its share of the generic matmuls' (matmul 1.0,
# dense conv 1.02, depthwise 0.60).
#
# AVX-512 code: the whole machine is that Xeon's, measured in one quiet window: those
# peaks, and its memory tiers from tuned AVX-512 GEMVs minutes before
# (benchmarks/results/bandwidth-llvm-emeraldrapids.json: 61-111 GB/s with 0.5-8 MB of
# traffic, 51 GB/s at 32 MB).  Before, the generic machine's 100 GFLOP/s times the shares at
# 512 bits priced a dense conv at 275 GFLOP/s and memory at 25-70 GB/s: 2.3x too fast in
# compute and 1.1-2x too slow in memory.  So it kept ResNet-50's 512-channel 7x7 convs
# direct (priced 843 us, timed 2,168) against a Winograd form timed 1.71x faster, whose
# transformed weights it over-priced (layers-winograd-llvm-emeraldrapids-tuned-t32-f4-cm.md).
# Calibrated, it orders all 7 timed layers of that file right (6 before).  AVX2 CPUs not
# measured (below, Zen 3 is): the geometric mean of the two machines.
#
# AVX-512 CPUs differ more than one machine can stand for.  A 2-core AMD EPYC VM (znver5,
# Zen 5), measured the same way (peak-llvm-znver5.json, bandwidth-llvm-znver5.json,
# 2026-11-28): 512^3 matmul 163.0, batched matmul 241.4, 3x3 conv 209.5, depthwise 94.7
# GFLOP/s.  Its dense conv runs 1.7x and its depthwise 2x the Xeon's, its matmuls alike; so
# a Winograd form, which trades conv work for batched matmuls and depthwise transforms,
# gains less there.  Against the 110 kernels tuned for full-size ResNet-50 on that VM (its
# records, 32 trials), the Zen 5 machine prices convs at 1.05x their time at the median, the
# Xeon's at 1.82x (Spearman 0.923 and 0.918).  A CPU measured here is priced as itself; any
# other AVX-512 CPU as the Xeon, the first one measured.
#
# AVX2.  A 2-core AMD EPYC VM (znver3, Zen 3), measured the same way (peak-llvm-znver3.json,
# bandwidth-llvm-znver3.json, 2026-11-29, nothing else running): 512^3 matmul 68.0, batched
# matmul 49.8, 3x3 conv 40.2, depthwise 31.6 GFLOP/s; GEMVs of 0.5-8 MB streamed at 56-73 GB/s
# (median 62.9), 15.8 at 32 MB.  The geometric mean of the generic machine and the Xeon, which
# had priced every AVX2 CPU, would have priced this one's compute 2.4x (matmuls), 2.8x (dense
# convs) and 1.7x (depthwise) too fast, and its memory 1.2x (cache) and 2.3x (DRAM): here a
# depthwise conv computes at 79% of a dense conv's rate, where the mean said 48%.  Zen 3 is
# priced as itself from its calibration file (cost_models/machines/znver3.json, which
# scripts/calibrate_cpu.py derives from those two results); other AVX2 CPUs keep the mean.
#
# Transposes.  The memory tiers price a transpose as a copy; one that moves the innermost axis
# (``gathers``) builds each output vector from elements a stride apart, and ran 3-5x slower
# than a copy of the same tensor.  Tuned cold at 32 trials on the Zen 5 VM, each run timed
# after its producer would have left it in cache (back to back), the 17 such transposes of
# bandwidth-llvm-znver5-cold-layout.json (Winograd tile layouts, NCHW <-> NHWC boundaries, a
# matrix transpose) took 0.09-1.36 ns per element, 0.27 at the geometric mean, against
# 0.05-0.09 for the five that keep the innermost axis: the Zen 5 machine's gather rate.  The
# rate is one number for a 15x spread (the Winograd input layouts run near 0.1, its output
# layouts, whose rows are 4 elements long, 0.34-0.63), no rule by axes or size fitted better
# on these rows; it corrects the order of magnitude the copy price missed (the output layouts
# of full-size SqueezeNet's Winograd convs, priced at 97 GB/s, ran 3-7x their price).  A
# machine whose transposes were not measured (the Xeon, AVX2) keeps the generic one's rate.
# nchwc.egg's copies into and out of NCHW16c are such transposes (with a reshape) and pay the
# same rate (``is_gather``): priced as copies, the roofline had blocked 16 of full-size
# SqueezeNet's 18 convs on Zen 3 with 24 copies around them, whose kernels took 4.6 ms against
# 1.4 ms without the family, and the model ran 0.861x (family-nchwc-llvm-znver3-cold-tuned-
# t32.json).
#
# Batch norms.  TVM legalizes an inference batch norm to a kernel of its own that computes
# (x - mean) / sqrt(var + eps) * gamma + beta element by element, a square root and a divide
# per element; FuseOps fuses its element-wise readers (a relu) into it, not its producer.
# Tuned at 32-64 trials, the NCHW batch norms of the committed databases (benchmarks/tuning/;
# kernels of x, the four statistics and the output: the batch norm and any epilogue fused
# into it; a /tmp script over their best records) take a median 1.16 ns per element (generic
# code, 49 kernels; 1.01 in its A/A tuning), 1.13 (the Xeon, 18; 1.26) and 0.88 (Zen 5 cold,
# 40; 0.87), each machine's rate the geometric mean of its two tunings: 4-11 GB/s of traffic,
# where the memory tiers priced them at 70-97 GB/s, 8-10x too cheap.  So the roofline missed
# most of what folding them gains: full-size ResNeXt-50 on Zen 5 predicted 1.029x for
# stock+tvm's folds and ran 1.219x faster (llvm-znver5-cold-tuned-t32.md).
#
# Erf.  TVM legalizes nn.gelu and erf to a call of the C library's erff per element, which
# MetaSchedule does not vectorize: the tuned kernels holding one (the committed databases' best
# records, 32-64 trials) take 6.6-6.7 ns per element on generic code, 6.7 and 7.0 on Zen 5
# (BERT's and ViT's GELU) and 7.3-12.7 on the Xeon (9.8 at the geometric mean), where the
# memory tiers priced them as an epilogue at about 0.01.  In the model they ran faster than
# their records: full-size BERT's and ViT's GELU kernels, tuned cold at 32 trials on Zen 5,
# took 3.6 and 2.0 ns per element (``timing.kernel_times``, 2026-12-02), 2.7 at the geometric
# mean, which is Zen 5's rate; the others keep their records' rates.  ``libm_ns`` prices the
# op wherever FuseOps puts it; erf_rational.egg's form of GELU costs what its multiplies and
# adds do (its fused kernel ran 0.11-0.28 ns per element in the same models).  exp (a softmax's,
# a sigmoid's, a SiLU's) and tanh are libm calls too (expf, tanhf): BERT-base's softmax kernels
# ran 1.9 ns per element in the model on Zen 5, near erf's rate, so one rate prices every op of
# ``ops.LIBM_OPS``; TOPI's fast softmax (fast_math.egg) costs its traffic, though in the same
# model it ran 0.83-0.94 ns per element (its reductions): the choice holds, the prediction runs high.
#
# Strided 1x1 convs.  An NCHW conv's vectors run along the image rows, so at stride 2 each
# gathers pixels two apart.  The stride-2 1x1 shortcut convs of ResNet-50 and ResNeXt-50 (256,
# 512 and 1024 channels in, at 56x56, 28x28 and 14x14), tuned cold at 32 trials on Zen 5 with two
# seeds each, computed at 0.74, 0.59 and 0.74 of the rate of the same conv at stride 1 on the
# subsampled input (geometric means over the seeds of interleaved medians, the slice's kernel
# taken off; benchmarks/results/strided-1x1-llvm-znver5-cold-t32.md): ``strided_1x1_share`` is
# their geometric mean, 0.69, which prices subsample.egg's form.  On the Xeon (emeraldrapids, the
# machine of AVX-512 CPUs not measured), the same layers and flow: 0.66, 0.64 and 0.76, geometric
# mean 0.69 again (strided-1x1-llvm-emeraldrapids-cold-t32-run1.md; timed again, 0.70, 0.64 and
# 0.76, the pass taking the form on all three: -t32.md).  Not measured elsewhere: 1.0 there.
# Wider strided kernels gather alike.  On Zen 3, tuned cold at 32 trials with two seeds each, the
# stride-2 convs of ResNet-50's 7x7 stem, Inception-v3's 3x3 stem and a 3x3 conv of 128 channels
# computed at 0.58, 0.63 and 0.59 of the FLOP rate of the stride-1 conv over their inputs' 2x2
# phases (space_to_depth.egg; benchmarks/results/strided-s2d-llvm-znver3-cold-t32.md).
# ``strided_share`` is the 7x7 stem's, the one kernel size whose form paid (1.21x): a conv of a
# 5x5 or wider kernel (``strided_wide``) is priced at it where a CPU's calibration file holds it
# (``scripts/bench_strided.py --study space_to_depth --calibrate``), 1.0 elsewhere.  3x3 convs
# keep the conv rate: their form costs 1.78x the multiplications, more than the gathers cost,
# and the roofline would otherwise price every strided 3x3 conv of every model off one layer.
# The Xeon holds no such figure: alone, tuned and timed cold, its shares were 0.51, 0.68 and 0.49
# and the stem ran 1.40x as fast in the form (strided-s2d-llvm-emeraldrapids-cold-t32.md),
# but in full-size ResNet-50, tuned and timed warm, the direct stem took 1.87 ms and the form
# 1.82 with its copy (the VM's instrumented kernel times), and the model ran 0.984x, 0.988x and
# 0.998x of the pass without the family (family-space_to_depth-llvm-emeraldrapids-tuned-t32.json).
COMPUTE_CLASSES = calibration.COMPUTE_CLASSES
_SHARE_128 = {"matmul": 1.0, "conv": 1.02, "depthwise": 0.60}
# Each CPU measured is priced from its file of cost_models/machines/ (calibration.load), every
# figure above named there with its date and source; the Xeon's file prices other AVX-512 CPUs.
_DEFAULT_512 = "emeraldrapids"  # the machine of AVX-512 CPUs not measured


def measured_cpus() -> dict[str, tuple[int, dict, dict]]:
    """Every CPU the tuned roofline prices as itself: the calibration files of
    ``cost_models/machines/`` (``scripts/calibrate_cpu.py``; the figures measured apart from
    the peaks and memory tiers, and those set by hand, each name their source there)."""
    try:
        return calibration.load(data_dir("cost_models") / "machines")
    except FileNotFoundError:
        return {}


def _tuned_llvm_machines(simd_bits: int, mcpu: str = "generic") -> dict[str, Machine] | None:
    """{compute class: machine} of the llvm tuned flow at a vector width (None where not
    measured): generic code on the generic machine with its class shares; a CPU measured at
    that width its own measurements (``measured_cpus``); another AVX-512 CPU the Xeon's; another
    AVX2 CPU the geometric mean of the generic machine and the Xeon's."""
    generic = MACHINES[("llvm", "tuned")]
    narrow = {c: dataclasses.replace(generic, peak_gflops=generic.peak_gflops * f) for c, f in _SHARE_128.items()}
    if simd_bits == 128:
        return narrow
    known = measured_cpus()
    if mcpu in known and known[mcpu][0] == simd_bits:
        _, peaks, memory = known[mcpu]
        return {c: dataclasses.replace(generic, peak_gflops=p, **memory) for c, p in peaks.items()}
    if _DEFAULT_512 not in known:  # its file missing or unreadable (load warned): the generic machine
        return None
    _, peaks, memory = known[_DEFAULT_512]
    wide = {c: dataclasses.replace(generic, peak_gflops=p, **memory) for c, p in peaks.items()}
    if simd_bits == 512:
        return wide
    if simd_bits == 256:
        mean = ("peak_gflops", "bandwidth_gbs", "cache_gbs")
        return {
            c: dataclasses.replace(
                generic, **{f: float(np.sqrt(getattr(narrow[c], f) * getattr(wide[c], f))) for f in mean}
            )
            for c in COMPUTE_CLASSES
        }
    return None


def gathers(perm: Sequence[int], in_shape: Sequence[int]) -> bool:
    """Whether a transpose puts another input axis innermost (axes of extent 1 aside): then
    each output vector gathers elements a stride apart instead of copying a run."""
    inner = [a for a in range(len(in_shape)) if in_shape[a] > 1]
    moved = [a for a in perm if in_shape[a] > 1]
    return bool(inner) and moved[-1] != inner[-1]


def is_gather(op: str, attrs: tuple, in_tys: Sequence[Ty | None], out_ty: Ty | None) -> bool:
    """Whether a node is a transpose that moves the innermost axis (``gathers``): a permute, or
    one of nchwc.egg's layout copies, each a reshape and such a transpose (ops.py), except where
    the image is one pixel and the copy is a reshape."""
    if not (in_tys and isinstance(in_tys[0], TensorTy) and isinstance(out_ty, TensorTy)):
        return False
    shape = in_tys[0].shape
    if op == "Permute":
        return gathers(attrs[0], shape)
    if op == "ToBlocked" and len(shape) == 4:  # (N, C, H, W) seen as (N, C/b, b, H, W)
        n, c, h, w = shape
        return gathers((0, 1, 3, 4, 2), (n, c // attrs[0], attrs[0], h, w))
    if op == "FromBlocked" and len(shape) == 5:
        return gathers((0, 1, 4, 2, 3), shape)
    return False


def _strided_nchw_kernel(op: str, attrs: tuple, in_tys: Sequence[Ty | None]) -> tuple[int, ...] | None:
    """The kernel's (height, width) of a dense (groups 1) NCHW/OIHW conv at a stride above 1,
    whose vectors, which run along the image rows, each gather pixels a stride apart; None for
    any other node (a grouped or depthwise conv too: the shares were measured on dense ones)."""
    if op != "Conv2d" or len(in_tys) < 2 or not isinstance(in_tys[1], TensorTy):
        return None
    strides, groups, data_layout, kernel_layout = attrs[0], attrs[3], attrs[4], attrs[5]
    if data_layout != "NCHW" or kernel_layout != "OIHW" or groups != 1 or max(strides) <= 1:
        return None
    return tuple(in_tys[1].shape[2:])


def strided_1x1(op: str, attrs: tuple, in_tys: Sequence[Ty | None]) -> bool:
    """Whether a node is a strided NCHW conv with a 1x1 kernel (subsample.egg)."""
    return _strided_nchw_kernel(op, attrs, in_tys) == (1, 1)


def strided_wide(op: str, attrs: tuple, in_tys: Sequence[Ty | None]) -> bool:
    """Whether a node is a strided NCHW conv with a kernel of 5 or more on each side, a stem's
    7x7 (space_to_depth.egg; the kernels ``Machine.strided_share`` was measured on: a 3x3
    one's was not)."""
    kernel = _strided_nchw_kernel(op, attrs, in_tys)
    return kernel is not None and min(kernel) >= 5


STRIDED_3X3_MIN_CHANNELS = 16  # a stem's conv over 3 channels ran its polyphase form 0.71x as fast


def strided_3x3(op: str, attrs: tuple, in_tys: Sequence[Ty | None]) -> bool:
    """Whether a node is a strided NCHW conv with a kernel of 2 to 4 on each side, a 3x3 one
    above all, over at least ``STRIDED_3X3_MIN_CHANNELS`` input channels (polyphase.egg; the
    kernels ``Machine.strided_3x3_share`` was measured on: over an RGB image's 3 channels the
    strided conv ran faster than its four stride-1 phases, benchmarks/results/strided-poly-*)."""
    kernel = _strided_nchw_kernel(op, attrs, in_tys)
    if kernel is None or min(kernel) < 2 or max(kernel) > 4:
        return False
    data = in_tys[0]
    return isinstance(data, TensorTy) and len(data.shape) == 4 and data.shape[1] >= STRIDED_3X3_MIN_CHANNELS


@dataclass(frozen=True)
class StridedConv:
    """A kind of strided NCHW conv whose vectors gather, the ``Machine`` field holding the
    measured share of the compute rate it runs at, and the family whose form avoids it."""

    name: str  # the census key (describe.py)
    matches: Callable[[str, tuple, Sequence[Ty | None]], bool]
    share: str  # a Machine field; 1.0 (unmeasured) prices the conv as any other
    family: str
    form: str  # how the graph runs one the family rewrote, in the pass's report (describe.py)


# disjoint kernel sizes: a conv is at most one kind (a strided 3x3 one lost to space_to_depth.egg,
# where the roofline prefers it, is reported as polyphase's: both run it over the input's phases)
STRIDED_CONVS = (
    StridedConv("strided 1x1", strided_1x1, "strided_1x1_share", "subsample", "run at stride 1 on a subsampled input"),
    StridedConv(
        "strided wide",
        strided_wide,
        "strided_share",
        "space_to_depth",
        "run at stride 1 on the input's 2x2 phases as channels (space to depth)",
    ),
    StridedConv(
        "strided 3x3", strided_3x3, "strided_3x3_share", "polyphase", "run at stride 1 over the input's 2x2 phases"
    ),
)


def strided_conv(op: str, attrs: tuple, in_tys: Sequence[Ty | None]) -> StridedConv | None:
    """The kind of strided conv a node is, if any."""
    return next((kind for kind in STRIDED_CONVS if kind.matches(op, attrs, in_tys)), None)


# Layouts.  The roofline priced an NHWC conv like the NCHW one, but tuned, the two run apart,
# and which is faster depends on the kind of conv.  In-model times of six of the suite's CNNs
# on the Xeon, each built stock in NCHW twice (with and without its batch norms folded: two
# tunings of its convs) and with ConvertLayout in NHWC, 32 trials (scripts/conv_times.py,
# scripts/layout_ratios.py; benchmarks/results/layout-ratios-llvm-emeraldrapids-t32.md): one
# conv's NHWC over NCHW time is at the noise of its tuning (the same NCHW conv tuned twice
# differs by a median 1.11-1.51x per model), but averaged over a kind of conv the ratio holds
# across models: a stride-1 1x1 conv with a 28x28 or larger output runs 0.80x the time in NHWC
# (34 convs of five models), one with a smaller output 1.04x (42), a square (3x3 to 7x7) one
# 1.03x with a wide output (17) and 1.30x with a narrow one (7), Inception's 1x7 and 7x1 convs
# 0.82x (12), MobileNet-v2's depthwise convs 0.64x (10).  ``layout_kind`` names the kind; a CPU's
# calibration file holds the ratios it measured (``Machine.nhwc_*``), 1.0 elsewhere.  Strided
# dense convs have none: the strided NCHW shares already price them (the NHWC ones do not
# gather), and grouped ones were too few.
LAYOUT_CLASSES = calibration.LAYOUT_CLASSES
WIDE_OUTPUT = 28 * 28  # output pixels from which a conv is "wide"


def layout_kind(kernel: Sequence[int], strides: Sequence[int], groups: int, per_group: int, out_pixels: int):
    """The kind of conv whose NHWC/NCHW time ratio ``Machine`` holds (``LAYOUT_CLASSES``), from
    its kernel (height, width), strides, groups, input channels per group and output pixels;
    None for the rest (strided dense convs, grouped ones, a Winograd form's transforms)."""
    kh, kw = kernel
    if groups > 1:  # depthwise: a square kernel of 3 or more, one channel per group, stride 1 or 2
        return "depthwise" if per_group == 1 and kh == kw >= 3 and max(strides) <= 2 else None
    if max(strides) > 1:
        return None
    wide = out_pixels >= WIDE_OUTPUT
    if kh == kw == 1:
        return "1x1_wide" if wide else "1x1_narrow"
    if kh == kw:
        return "square_wide" if wide else "square_narrow"
    return "asymmetric" if min(kh, kw) == 1 else None


def layout_class(op: str, attrs: tuple, in_tys: Sequence[Ty | None], out_ty: Ty | None) -> str | None:
    """``layout_kind`` of a Conv2d node in either layout (None for any other node)."""
    if op != "Conv2d" or len(in_tys) < 2 or not isinstance(in_tys[1], TensorTy) or not isinstance(out_ty, TensorTy):
        return None
    strides, groups, kernel_layout, out_layout = attrs[0], attrs[3], attrs[5], attrs[6]
    w, out = in_tys[1].shape, out_ty.shape
    if len(w) != 4 or len(out) != 4 or not {"H", "W", "I"} <= set(kernel_layout) or "H" not in out_layout:
        return None
    kernel = (w[kernel_layout.index("H")], w[kernel_layout.index("W")])
    pixels = out[out_layout.index("H")] * out[out_layout.index("W")]
    return layout_kind(kernel, strides, groups, w[kernel_layout.index("I")], pixels)


def nhwc_ratio(m: Machine, op: str, attrs: tuple, in_tys: Sequence[Ty | None], out_ty: Ty | None) -> float:
    """What an NHWC or channel-blocked conv's time is over the NCHW one's on machine ``m``
    (1.0: not measured, or not such a conv)."""
    if op == "Conv2dNCHWc":
        return m.nchwc_conv
    if op == "DepthwiseConv2dNCHWc":
        return m.nchwc_depthwise
    if op != "Conv2d" or attrs[4] != "NHWC":
        return 1.0
    kind = layout_class(op, attrs, in_tys, out_ty)
    return getattr(m, f"nhwc_{kind}") if kind is not None else 1.0


def compute_class(op: str, attrs: tuple, in_tys: Sequence[Ty | None]) -> str | None:
    """Which measured kind of compute kernel a node is (``_tuned_llvm_machines``), None for the rest."""
    if op == "Matmul":
        return "matmul"
    if op == "Conv2dNCHWc":  # groups 1 (nchwc.egg)
        return "conv"
    if op == "DepthwiseConv2dNCHWc":
        return "depthwise"
    if op == "Conv2d" and len(in_tys) > 1 and isinstance(in_tys[1], TensorTy):
        kernel_layout, groups = attrs[5], attrs[3]
        per_group = in_tys[1].shape[kernel_layout.index("I")] if "I" in kernel_layout else 0
        return "depthwise" if groups > 1 and per_group == 1 else "conv"
    return None


def vector_bits(target: tvm.target.Target | None) -> int:
    """The widest vectors an llvm target's code may use on x86 (128 elsewhere): what its
    tuned kernels' compute peak scales with."""
    if target is None or target.kind.name != "llvm":
        return 128
    from tvm.target import codegen

    features = codegen.llvm_get_cpu_features(target)
    return 512 if "avx512f" in features else 256 if "avx2" in features else 128


def cpu_vector_bits(mcpu: str) -> int:
    """``vector_bits`` of the llvm target that names ``mcpu`` ('generic': 128)."""
    if mcpu == "generic":
        return 128
    import tvm

    return vector_bits(tvm.target.Target({"kind": "llvm", "mcpu": mcpu}))


class RooflineCostModel:
    """FLOPs/bytes against a machine's peaks, shaped by how TVM fuses and folds; in the llvm
    tuned flow, the compute peak of the kernel's class at the target's vector width, and at
    512 bits the memory tiers of the CPU (``mcpu``) as measured (``_tuned_llvm_machines``)."""

    name = "roofline"

    def __init__(self, target_kind: str, flow: str = "tuned", simd_bits: int = 128, mcpu: str = "generic") -> None:
        if flow not in FLOWS:
            raise ValueError(f"flow={flow!r} is not known; known: {FLOWS}")
        self.machine = MACHINES.get((target_kind, flow), MACHINES[("llvm", flow)])
        # a reshape FuseOps leaves alone is a view in the stock build (RewriteDataflowReshape);
        # a tuned llvm build applies the tuned schedules before that pass, and the scheduled
        # reshape stays a copy kernel (``reshape_copy_us``)
        self.copies_lone_reshapes = target_kind == "llvm" and flow == "tuned"
        # a kernel's machine: the peak of its class (the others: the classes' geometric mean)
        self._machines: dict[str | None, Machine] = {}
        if target_kind == "llvm" and flow == "tuned":
            self._machines = dict(_tuned_llvm_machines(simd_bits, mcpu) or {})
        if self._machines:
            rest = np.exp(np.mean(np.log([m.peak_gflops for m in self._machines.values()])))
            self.machine = dataclasses.replace(next(iter(self._machines.values())), peak_gflops=float(rest))

    def node_cost(self, op: str, attrs: tuple, in_tys: Sequence[Ty | None], out_ty: Ty | None, is_const: bool) -> float:
        if is_const or op in (INPUT, CONST, TUPLE_NODE, TGET):
            return EPSILON_US
        m = self.machine
        traffic = nbytes(out_ty) + sum(nbytes(t) for t in in_tys)
        spec = ops.BY_NAME.get(op)
        kind = spec.kind if spec is not None else ops.KERNEL  # opaque: assume its own kernel
        if kind == ops.VIEW:
            return EPSILON_US + 0.01 * traffic * m.us_per_byte(traffic)
        if kind == ops.ELEMWISE:
            mem_us = traffic * m.us_per_byte(traffic)
            us = EPILOGUE_SHARE * max(mem_us, flops(op, attrs, in_tys, out_ty) / (m.peak_gflops * 1e3))
            return EPSILON_US + max(us, m.libm_us(op, out_ty))  # its libm calls, wherever FuseOps puts it
        work = 0.0 if op == OPAQUE else flops(op, attrs, in_tys, out_ty)
        m = self._machines.get(compute_class(op, attrs, in_tys), m) if self._machines else m
        strided = strided_conv(op, attrs, in_tys)
        share = getattr(m, strided.share) if strided is not None else 1.0
        if share < 1.0:  # as before the table: a share above 1 measured nothing slower; priced as any conv
            work /= share
        busy = float(m.busy_us(work, traffic)) * nhwc_ratio(m, op, attrs, in_tys, out_ty)
        if m.gather_ns and is_gather(op, attrs, in_tys, out_ty):
            busy = max(busy, out_ty.numel * m.gather_ns / 1e3)
        busy = max(busy, m.libm_us(op, out_ty))  # a softmax: an exp each
        if op == "BatchNorm" and m.batch_norm_ns and in_tys and isinstance(in_tys[0], TensorTy):
            busy = max(busy, in_tys[0].numel * m.batch_norm_ns / 1e3)
        return EPSILON_US + m.launch_us + busy

    def reshape_copy_us(self, in_ty: Ty | None, out_ty: Ty | None) -> float:
        """What a reshape that FuseOps leaves alone (``fusion.lone_reshapes``) costs where the
        build copies it (``copies_lone_reshapes``): a copy kernel."""
        traffic = nbytes(in_ty) + nbytes(out_ty)
        return EPSILON_US + self.machine.launch_us + float(self.machine.busy_us(0.0, traffic))


class LearnedCostModel:
    """Kernel nodes costed by the XGBoost model trained on TVM-measured kernels (by
    their measured latency where the kernel is one of them); everything else
    (element-wise epilogues, views, constants, opaque calls) as the roofline of the
    target's vector width costs it, plus, for element-wise ops, their measured compute
    per element (a tanh is no cheaper fused than alone).  Predictions are memoised;
    ``prepare`` batches them.

    A model whose booster ranked held-out kernels worse than the roofline (metadata
    ``unmeasured: "roofline"``, set by ``train_cost_model.py``) answers for its measured
    kernels only: the rest cost the roofline at the target's vector width times
    ``roofline_scale``, the median ratio of the measurements to it, so that measured and
    estimated kernels compare on one scale.  That is a tuning database read back as
    costs: the pass picks, kernel by kernel, the form (an NCHW or NHWC conv) that was
    measured faster."""

    name = "xgb"

    def __init__(
        self, kernel_model, target_kind: str, flow: str = "tuned", simd_bits: int = 128, mcpu: str = "generic"
    ) -> None:
        self.kernels = kernel_model
        self.fallback = RooflineCostModel(target_kind, flow, simd_bits, mcpu)
        meta = getattr(kernel_model, "metadata", None) or {}
        # None: the booster prices unmeasured kernels; else the fallback roofline times this
        self.roofline_scale: float | None = (
            float(meta.get("roofline_scale", 1.0)) if meta.get("unmeasured") == "roofline" else None
        )
        self._memo: dict[tuple, float] = {}

    def _is_kernel(self, op: str, in_tys, out_ty, is_const: bool) -> bool:
        return (
            not is_const
            and op in KERNEL_OPS
            and self.kernels.knows(op)
            and out_ty is not None
            and all(isinstance(t, TensorTy) for t in in_tys)
        )

    def prepare(self, items: Sequence[tuple]) -> None:
        """Predict many ``node_cost`` argument tuples in one call, filling the memo."""
        todo = {}
        for op, attrs, in_tys, out_ty, is_const in items:
            key = (op, attrs, tuple(in_tys), out_ty)
            if key not in self._memo and key not in todo and self._is_kernel(op, in_tys, out_ty, is_const):
                measured = self.kernels.lookup_us(op, attrs, in_tys)
                if measured is not None:
                    self._memo[key] = measured
                else:
                    todo[key] = (op, attrs, in_tys, out_ty)
        if todo and self.roofline_scale is not None:
            r = self.fallback
            self._memo.update({k: self.roofline_scale * r.node_cost(*item, False) for k, item in todo.items()})
        elif todo:
            costs = self.kernels.predict_items(list(todo.values()))
            self._memo.update(zip(todo, (float(c) for c in costs)))

    @property
    def copies_lone_reshapes(self) -> bool:
        return self.fallback.copies_lone_reshapes

    def reshape_copy_us(self, in_ty: Ty | None, out_ty: Ty | None) -> float:
        return self.fallback.reshape_copy_us(in_ty, out_ty)

    def node_cost(self, op: str, attrs: tuple, in_tys: Sequence[Ty | None], out_ty: Ty | None, is_const: bool) -> float:
        if not self._is_kernel(op, in_tys, out_ty, is_const):
            base = self.fallback.node_cost(op, attrs, in_tys, out_ty, is_const)
            per_element = self.kernels.per_element_ns.get(op, 0.0)
            if per_element and not is_const and isinstance(out_ty, TensorTy):
                base += per_element * out_ty.numel / 1e3  # its compute, wherever FuseOps puts it
            return base
        key = (op, attrs, tuple(in_tys), out_ty)
        if key not in self._memo:
            self.prepare([(op, attrs, in_tys, out_ty, is_const)])
        return EPSILON_US + self._memo[key]


# the layouts besides NCHW whose convs a cost model can price apart from the NCHW conv
PRICEABLE_LAYOUTS = ("NHWC", "NCHW16c")


def priced_layouts(cost_model) -> frozenset[str]:
    """Which of ``PRICEABLE_LAYOUTS`` ``cost_model`` can tell from NCHW: those a learned model
    has measured convs in (channels-last convs; ``Conv2dNCHWc`` kernels), or those a tuned
    roofline's CPU calibration holds ratios for (``Machine.nhwc_*``; ``Machine.nchwc_conv``);
    without them the roofline prices every layout's conv alike."""
    kernels = getattr(cost_model, "kernels", None)
    if kernels is not None:
        keys = getattr(kernels, "measured", {})
        found = {"NHWC": any('"NHWC"' in k for k in keys), "NCHW16c": any('"Conv2dNCHWc"' in k for k in keys)}
    else:
        machines = (getattr(cost_model, "_machines", None) or {}).values()
        found = {
            "NHWC": any(getattr(m, f"nhwc_{kind}") != 1.0 for m in machines for kind in LAYOUT_CLASSES),
            "NCHW16c": any(m.nchwc_conv != 1.0 for m in machines),
        }
    return frozenset(layout for layout, yes in found.items() if yes)


COST_MODELS = ("auto", "xgb", "roofline")
_warned: set[tuple[str, str]] = set()


def target_cpu(target: tvm.target.Target | None) -> str:
    """The CPU an llvm target's code is built for (its ``mcpu``), 'generic' where it names none."""
    if target is None or target.kind.name != "llvm":
        return "generic"
    return str(target.attrs.get("mcpu", "") or "generic")


def shipped_model_dir(target_kind: str, flow: str = "tuned", mcpu: str = "generic") -> Path | None:
    """``cost_models/<target>`` holds the tuned-flow model, ``cost_models/<target>-<flow>``
    the others, ``cost_models/llvm-<cpu>`` the tuned-flow model of one CPU's code (its
    kernels tuned with ``-mcpu=<cpu>``), preferred for that CPU; None when nothing is
    shipped for that pair."""
    names = [target_kind if flow == "tuned" else f"{target_kind}-{flow}"]
    if target_kind == "llvm" and flow == "tuned" and mcpu != "generic":
        names.insert(0, f"llvm-{mcpu}")
    try:
        root = data_dir("cost_models")
    except FileNotFoundError:
        return None
    return next((root / n for n in names if (root / n / "model.json").is_file()), None)


def _trained_code(directory: Path) -> tuple[str, int]:
    """The CPU and vector width of the code a learned llvm model's kernels were timed as:
    its metadata's ``mcpu`` (none: TVM's plain llvm target, generic x86-64, 128 bits)."""
    meta = directory / "metadata.json"
    mcpu = json.loads(meta.read_text()).get("mcpu", "generic") if meta.is_file() else "generic"
    return mcpu, cpu_vector_bits(mcpu)


def _warn_if_other_code(directory: Path, target_kind: str, simd_bits: int) -> None:
    """Say once when a learned llvm model's kernels were timed as code of another vector
    width than the target's (every model trained before ``--mcpu`` was generic x86-64, TVM's
    plain llvm target): the kernels it ranks are not the ones that will run."""
    if target_kind != "llvm":
        return
    mcpu, trained_bits = _trained_code(directory)
    key = (str(directory), str(simd_bits))
    if trained_bits != simd_bits and key not in _warned:
        _warned.add(key)
        log.warning(
            "%s was trained on kernels built as %s code (%d-bit vectors); this target's use %d-bit vectors, "
            "so its costs may misorder them (cost_model='roofline' scales with the vector width)",
            directory,
            "generic x86-64" if mcpu == "generic" else mcpu,
            trained_bits,
            simd_bits,
        )


def make_cost_model(spec: str, target_kind: str, flow: str = "tuned", simd_bits: int = 128, mcpu: str = "generic"):
    """The cost model named by the pass option ``cost_model``: ``"roofline"``,
    ``"xgb"`` (the model shipped for the target and build ``flow``; the roofline if
    there is none, logged once), ``"auto"`` (the one that predicts that flow better:
    xgb for the default flow, where it ranks held-out kernels far better than the
    roofline; the roofline for the tuned flow, where the learned model ranks held-out
    kernels no better (Spearman 0.966 against 0.968) and is far from its targets, see
    ``cost_models/llvm/REPORT.md``), or a path to a directory holding model.json +
    metadata.json.  ``simd_bits``: the target's vector width (``vector_bits``), which
    scales the roofline's tuned compute peak; ``mcpu``: its CPU (``target_cpu``), whose own
    tuned-flow model, where one is shipped, is the one ``"xgb"`` loads, and whose measured
    AVX-512 machine, where there is one, the roofline's."""
    from .xgb_model import KernelModel

    if flow not in FLOWS:
        raise ValueError(f"flow={flow!r} is not known; known: {FLOWS}")
    if spec == "auto":
        spec = "xgb" if flow == "default" and shipped_model_dir(target_kind, flow, mcpu) is not None else "roofline"
    if spec == "roofline":
        return RooflineCostModel(target_kind, flow, simd_bits, mcpu)
    if spec == "xgb":
        directory = shipped_model_dir(target_kind, flow, mcpu)
        if directory is None:
            if (target_kind, flow) not in _warned:
                _warned.add((target_kind, flow))
                log.warning("no learned cost model shipped for %s (%s flow); using the roofline", target_kind, flow)
            return RooflineCostModel(target_kind, flow, simd_bits, mcpu)
        _warn_if_other_code(directory, target_kind, simd_bits)
        return LearnedCostModel(KernelModel.load(directory), target_kind, flow, simd_bits, mcpu)
    path = model_directory(spec)
    _warn_if_other_code(path, target_kind, simd_bits)
    return LearnedCostModel(KernelModel.load(path), target_kind, flow, simd_bits, mcpu)


def model_directory(spec: str) -> Path:
    """The directory a ``cost_model`` that names no model holds its learned model in; a
    ValueError where it holds none (the pass's option check, before any target is known)."""
    path = Path(spec)
    if path.is_dir() and (path / "model.json").is_file():
        return path
    raise ValueError(f"cost_model={spec!r}: expected one of {COST_MODELS} or a directory with model.json")
