"""Which rule families the pass runs by default, per target kind and build flow, and the
measurements that decided each exception: a family stays in the default set only where it
was timed to pay and a cost model keeps it out where it loses (see docs/rules.md)."""

from __future__ import annotations

from collections.abc import Collection

from .cost import PRICEABLE_LAYOUTS
from .rules import load_library

# families whose choices only a cost model that prices their layout apart from NCHW can make
# (``cost.priced_layouts``): without one they run only when named in ``rules``.  nhwc: under the
# roofline (which prices an NHWC conv like the NCHW one) small mobilenet-v2, tuned flow, spent 27 s
# in extraction and chose the same graph; with the default-flow model they lifted the small
# conv models from 0.950x to 0.994x of the best stock build (resnet50 0.80x -> 1.01x) and stayed
# out of mobilenet-v2, where stock's whole-model NHWC loses
# (benchmarks/results/llvm-default-small[-nhwc].md).  A tuned roofline prices layouts where its
# CPU's calibration holds NHWC ratios (cost.py, Layouts): on the Xeon, full-size MobileNet-v2 and
# ResNet-50 with the family ran 1.173x and 1.188x over stock+tvm, the best stock variant
# (llvm-emeraldrapids-tuned-t32-layout.md); against the pass without it, SqueezeNet 1.004x and
# VGG-19 1.007x, no timed model slower (family-nhwc-llvm-emeraldrapids-tuned-t32.json).  nchwc
# (channel-blocked convs, TOPI's conv2d_NCHWc): the blocked conv ran 1.25-1.65x as fast as the
# better of NCHW and NHWC on six of ResNet-50's seven stride-1 bottleneck convs alone and 0.97x
# on the seventh (Xeon, 64 trials, two seeds a form: layers-nchwc-llvm-emeraldrapids-t64.md);
# the roofline prices it with one figure for all convs (Machine.nchwc_conv).  With it full-size
# ResNet-50 and ResNeXt-50 ran 1.520x and 1.531x over stock+tvm, their best stock variant (64
# trials, llvm-emeraldrapids-tuned-t64-nchwc.md; the defaults alone 1.052x and 1.044x).  On Zen 3
# (layers 0.57-0.93x of NCHW, layers-nchwc-llvm-znver3-t32.md; 32 trials, cold) ResNet-50 ran
# 1.949x and VGG-19 1.970x over stock+tvm, the roofline keeping VGG-19's Winograd convs in NHWC
# (llvm-znver3-cold-tuned-t32-nchwc.md); but SqueezeNet ran 0.861x of the pass without it
# (family-nchwc-llvm-znver3-cold-tuned-t32.json): its convs 1.37x faster blocked, its layout
# copies around the fire modules' concats 3.3x dearer than the roofline's traffic price let it
# see.  With the copies priced as gathers (cost.is_gather), concats kept blocked and depthwise
# convs blocked too, SqueezeNet ran 1.032x (within the noise) and MobileNet-v2 1.207x of the pass
# without it, 1.272x with Zen 3's nchwc_depthwise (same file, rows 2-4;
# layers-nchwc-dw-llvm-znver3-t32.md).  Inception-v3's tuned build with it
# (45 of 48 convs blocked, 54 copies) ran 1.28x faster and computed garbage, the LLVM loop
# vectorizer of TVM 0.27 miscompiling two of its fused layout copies in AVX2 code once
# MetaSchedule fuses and splits their loops (benchmarks/repro/avx2-copy-miscompile; the rewrite
# is right untuned; with the vectorizer off it gains 1.09x net, LOOP_VECTORIZER_OFF below; with
# nchwc.egg's block-concat-parts, which keeps its concats blocked, it computed right built as
# usual and ran 1.138x, spreads overlapping, family-nchwc-llvm-znver3-cold-tuned-t32.json row 6).
# Against every stock variant on Zen 3 (llvm-znver3-cold-tuned-t32-nchwc.md), NASNet-A (all 216
# blocked, 2 copies) ran 1.349x over stock+nhwc, MobileNet-v2 1.364x over stock+tvm and ResNeXt-50
# 1.597x over stock+nhwc (36 of 53 blocked), each its best; the six conv models timed there 1.501x
# in geometric mean (SqueezeNet's 1.015x inside its noise).  Since the pass re-extracts a block
# that would hold a reblocking kernel for a target at risk (miscompile_risk below), the family is
# on in the llvm tuned flow (FLOW_ONLY), where the cost model prices blocked convs: a CPU whose
# calibration measured nchwc_conv (the Xeon, the AVX-512 CPUs priced as it, Zen 3), or a learned
# model that measured Conv2dNCHWc kernels; elsewhere the roofline prices both forms alike and the
# family would only grow the e-graph.  Not measured in the default flow (untuned TOPI
# conv2d_NCHWc), nor on CUDA.
NEEDS_LAYOUT_COSTS = {"nhwc": "NHWC", "nchwc": "NCHW16c"}
# families whose choices no cost model has been checked on yet (their forms' kernels measured
# and the choices timed end to end): they run only when named in ``rules``.  winograd_cl
# (Winograd with channels-last tiles) pays on single layers in the tuned flow, where
# winograd's form does not at 64 channels (layers-winograd-llvm-tuned-t32[-tiles-c-last].md),
# and full ResNet-50 with it ran 1.099x faster than its best stock variant (32 trials,
# llvm-tuned-wino-t32.md); but the roofline also takes it on the 64-channel layers, where it
# lost alone (0.82x), and no small model has been timed tuned with it.  winograd_f4_cm
# (F(4x4) with channel-major products) ran 1.11-2.20x as fast as winograd_f4's form on three of
# seven single layers and 0.71-0.96x on the other four (AVX-512, 32 trials, layers-winograd-llvm-
# emeraldrapids-tuned-t32-f4-cm.md), and the roofline prices the two alike.  scale (attention's
# scale into the projection weights) changed nothing measurable: TVM fuses the multiply it
# removes into the transpose before it (small BERT and ViT, default flow: 0.996x and 0.997x of
# the pass without it, inside the spread; benchmarks/results/family-scale-llvm-default.json).
# conv_matmul in the tuned flow (Zen 5, 32 trials, cold), every 1x1 conv as a matmul: 0.914-1.124x
# of the pass without it on six models, 0.994x in geometric mean; the matmul form faster for 15 of
# 49 convs, no shape pattern above the tuning lottery (benchmarks/results/conv-matmul-llvm-znver5-
# cold-t32.md).
OPT_IN = ("conv_matmul", "winograd_cl", "winograd_f4_cm", "scale")
# families on by default only for some (target kind, build flow) pairs, where their choices
# were checked end to end; elsewhere they run only when named.  winograd, llvm default flow:
# 1.26x on full ResNet-50, 3.94x small VGG-19, 1.44x small Inception-v3, no loss (benchmarks/
# results/family-winograd-llvm-default.json); llvm tuned flow: the roofline also takes it on a
# 64-channel layer that loses (0.75x, layers-winograd-llvm-tuned-t32.md); CUDA: not measured.
# winograd_f4 (F(4x4, 3x3), channels-last tiles), llvm default flow: beside winograd, the
# default-flow model picked the fastest of direct, F(2x2) and F(4x4) on all nine 3x3 layers of
# ResNet-50 and VGG-19 (layers-winograd-llvm-default-f4-choice.md), full ResNet-50 1.328x ->
# 1.363x over stock, the small models unchanged (family-winograd_f4-llvm-default.json).  llvm
# tuned flow: 1.36-2.89x over the direct conv on ResNet-50's four 3x3 layers, each taken by the
# roofline (layers-winograd-llvm-tuned-t32-f4.md); end to end at 32 trials over the best stock
# variant, full ResNet-50 1.213x, VGG-19 2.020x, SqueezeNet 1.245x (llvm-tuned-wino-f4-t32.md);
# on the small models the roofline takes it for one conv of ResNet-50 only, which ran as fast as
# stock+tvm's (0.992x at 64 trials, llvm-tuned-small-t64.md).  CUDA: not measured.
# winograd_1d (F(4, 3) and F(2, 7) along one axis: Inception's 1x3, 3x1, 1x7, 7x1 convs), llvm
# default flow: 1.53-2.24x over the direct conv on seven of full Inception-v3's layers, each
# taken by the default-flow model (layers-winograd-llvm-znver3-default-1d.md); full Inception-v3
# 1.168x over the pass without it (family-winograd_1d-llvm-default.json).  llvm tuned flow (32
# trials, cold): 0.94-2.31x on the same layers, 1.40x in geometric mean, the roofline taking it on
# all seven (layers-winograd-llvm-znver3-cold-tuned-t32-1d.md); end to end, Inception-v3's Mixed_6c
# block 1.075x and 1.146x, whole Inception-v3 1.085x and 1.073x, each timing inside the other
# form's p10-p90 spread (family-winograd_1d-llvm-znver3-cold-tuned-t32.json): a gain, likely, but
# not one that VM's cold timing could separate from noise.  On the Xeon (emeraldrapids, 32 trials,
# tuned and timed warm), whole Inception-v3 ran 85.84 against 95.11 ms without it (1.108x, p10-p90
# ranges apart; 26 convs as F(2, 7), 8 as F(4, 3); family-winograd_1d-llvm-emeraldrapids-tuned-
# t32.json), so it is on in the llvm tuned flow too.  CUDA: not measured.
# erf_rational (GELU's erf as a rational function: no libm call per element), llvm tuned flow:
# full-size BERT-base 1.072x and ViT-B/16 1.053x over their best stock variants (Zen 5, 32 trials,
# cold; before it 0.998x and 1.001x), their GELU kernels 17.0 -> 0.5-1.3 ms and 14.2 -> 0.85 ms
# (llvm-znver5-cold-tuned-t32-erf.md).  Default flow: untuned matmuls take nearly all the time
# (full BERT-base 25 s a run), the default-flow model predicts 1.0006x, and small BERT and ViT ran
# 0.988x and 0.998x of the pass without it, inside their spreads (family-erf_rational-llvm-
# default.json): no gain shown, so off there.  CUDA computes erf without a library call.
# fast_math (TOPI's fast softmax, the kernel TVM's FastMathTransform makes), llvm tuned flow: the
# stock variant with FastMathTransform (stock+fast) ran full-size BERT-base 1.052x and ViT-B/16
# 1.054x faster than stock+tvm, and the pass with the family 1.138x and 1.049x faster than
# stock+fast (Zen 5, 32 trials, cold; llvm-znver5-cold-tuned-t32-fast.md; timed twice more, 1.140x
# and 1.068x, 1.134x and 1.104x over the best stock variant).  Not measured in the default flow, nor
# on CUDA.
# subsample (a strided 1x1 conv as a subsample, then the conv at stride 1), llvm tuned flow: the
# stride-2 shortcut convs of ResNet-50 and ResNeXt-50 alone, 1.28x, 1.62x and 1.34x as fast this way
# (Zen 5, 32 trials, cold, two seeds each, every subsample build faster than every direct one;
# strided-1x1-llvm-znver5-cold-t32.md), and the roofline takes it only where a CPU's strided rate
# was measured (``Machine.strided_1x1_share``).  End to end, full ResNet-50 1.015x and 1.047x and
# ResNeXt-50 0.988x and 0.992x of the pass without it (two runs), inside their spreads (the
# benchmark's database: 0.7 ms saved by its records in both models, whose shortcut convs are the
# same kernels; family-subsample-llvm-znver5-cold-tuned-t32.json).  On the Xeon the layers alone
# 1.24-1.41x (strided-1x1-llvm-emeraldrapids-cold-t32.md), ResNet-50 tuned warm 1.019x, 1.014x and
# 1.003x of the pass without it (family-subsample-llvm-emeraldrapids-tuned-t32.json).  Not measured
# in the default flow, nor on CUDA.
# space_to_depth (a stride-2 conv as a stride-1 conv over its input's 2x2 phases), llvm tuned
# flow: ResNet-50's 7x7 stem alone 1.21x as fast (Zen 3, 32 trials, cold, two seeds; 3x3 stride-2
# convs lost, 0.70x and 0.91x, and the roofline never takes their form); taken where a CPU's
# calibration measured ``Machine.strided_share`` (Zen 3).  End to end, full ResNet-50 1.025x and
# 1.013x of the pass without it (two runs, same database), inside their spreads (about ±5%;
# family-space_to_depth-llvm-znver3-cold-tuned-t32.json).  On the Xeon the stem alone ran 1.40x
# (cold), but ResNet-50 tuned warm 0.984x, 0.988x and 0.998x of the pass without it, so the Xeon's
# roofline holds no ``strided_share`` and never takes it.  Not measured in the default flow, nor on CUDA.
# polyphase (a stride-2 3x3 conv as four stride-1 convs over its input's 2x2 phases), llvm tuned
# flow: on the Xeon, tuned warm at 32 trials with two seeds, ResNet-50's stage convs alone 1.05x,
# 1.33x and 1.33x, Inception-v3's Mixed_6a and Mixed_7a convs 1.63x and 1.29x, its RGB stem 0.71x
# (strided-poly-llvm-emeraldrapids-t32.md); taken where a CPU's calibration holds
# ``Machine.strided_3x3_share`` (the Xeon's 0.71), for 16 or more input channels.  End to end,
# ResNet-50 1.004x, 1.020x and 1.004x of the pass without it (three runs, inside their spreads;
# family-polyphase-llvm-emeraldrapids-tuned-t32.json).  Not measured on Zen, in the default flow,
# nor on CUDA.
# winograd_nhwc (F(4x4, 3x3) for NHWC convs, channels last end to end), llvm tuned flow: it fires
# only on NHWC convs, those of nhwc's regions (a cost model that prices layouts) or of an NHWC
# model.  NHWC layers alone, over the direct NHWC conv: 1.83x and 3.38x on ResNet-50's 64- and
# 128-channel layers, 1.08x, 1.51x, 1.11x and 0.99x on Inception-v3's four, the roofline's choice
# right on all six (Xeon, 32 trials, layers-winograd-llvm-emeraldrapids-tuned-t32-nhwc.md); full
# Inception-v3 with the Xeon's learned model, 1.022x over the pass without it (9 of its 11
# Winograd convs in NHWC, 27 boundary transposes where 37; family-winograd_nhwc-llvm-emeraldrapids-
# tuned-t32.json), and 1.008x over stock+nhwc, where it had been 0.966x (llvm-emeraldrapids-tuned-
# t32-wnhwc.md).  Not measured in the default flow, nor on CUDA.
FLOW_ONLY = {
    "nchwc": (("llvm", "tuned"),),  # see NEEDS_LAYOUT_COSTS above
    "winograd_nhwc": (("llvm", "tuned"),),
    "erf_rational": (("llvm", "tuned"),),
    "subsample": (("llvm", "tuned"),),
    "space_to_depth": (("llvm", "tuned"),),
    "polyphase": (("llvm", "tuned"),),
    "fast_math": (("llvm", "tuned"),),
    "winograd": (("llvm", "default"),),
    "winograd_f4": (("llvm", "default"), ("llvm", "tuned")),
    "winograd_1d": (("llvm", "default"), ("llvm", "tuned")),
}
# families off for some (target kind, build flow), where they were measured to lose and no
# cost model can see why (see each family's file)
NOT_FOR = {"bn_fold_grouped": (("cuda", "default"),)}


def off_by_default(target_kind: str, flow: str, priced_layouts: Collection[str]) -> set[str]:
    """The families the policy tables above keep out of the default rule set here, where
    the cost model prices ``priced_layouts`` (``cost.priced_layouts``) apart from NCHW."""
    skip = set(OPT_IN) | {f for f, where in FLOW_ONLY.items() if (target_kind, flow) not in where}
    skip |= {f for f, where in NOT_FOR.items() if (target_kind, flow) in where}
    skip |= {f for f, layout in NEEDS_LAYOUT_COSTS.items() if layout not in priced_layouts}
    return skip


# the llvm option that keeps ``nchwc``'s fused layout copies right on AVX2 CPUs: TVM 0.27's LLVM
# (22) loop vectorizer miscompiles some of them once MetaSchedule fuses and splits their loops
# (benchmarks/repro/avx2-copy-miscompile/minimal.py: a copy that unblocks, biases, concatenates
# and blocks again).  Full-size Inception-v3, Zen 3, 32 trials cold, timed interleaved in one
# process (2026-12-07, option_cost.py in that folder): with it, the pass's build with nchwc
# computed right (6.2e-7) and ran 216.3 ms, the pass's without nchwc 257.8 ms; the latter built
# as usual ran 234.9 ms (the option costs it 1.10x), so the family gains 1.09x net there,
# inside the spread.
LOOP_VECTORIZER_OFF = "-vectorize-loops=false"


def miscompile_risk(families: Collection[str], target) -> str | None:
    """Why a build of the pass's output for ``target`` may compute garbage where it holds a
    kernel that unblocks and blocks again (``fusion.fused_reblocks``), or None: ``nchwc`` on an
    llvm target that emits vector code beyond generic x86-64 (an ``mcpu`` or ``mattr``), unless
    its ``cl-opt`` turns LLVM's loop vectorizer off (``LOOP_VECTORIZER_OFF``)."""
    if "nchwc" not in families or target.kind.name != "llvm":
        return None
    attrs = target.attrs
    if not attrs.get("mcpu") and not attrs.get("mattr"):
        return None
    if LOOP_VECTORIZER_OFF in [str(o) for o in attrs.get("cl-opt", [])]:
        return None
    return (
        "LLVM's loop vectorizer can miscompile such kernels in AVX2 code (TVM 0.27; "
        f"benchmarks/repro/avx2-copy-miscompile), unless the llvm target has 'cl-opt': ['{LOOP_VECTORIZER_OFF}']"
    )


def default_families(
    target_kind: str = "llvm", flow: str = "tuned", priced_layouts: Collection[str] = PRICEABLE_LAYOUTS
) -> list[str]:
    """The rule families the pass runs by default for a target kind and build flow, with a
    cost model that prices ``priced_layouts`` apart from NCHW (by default all it can): what
    a script that adds or removes one family starts from."""
    skip = off_by_default(target_kind, flow, priced_layouts)
    return [f for f in load_library().families if f not in skip]
