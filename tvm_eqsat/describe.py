"""What a rewrite changed, in words a user reads: the kernels that TVM will build before
and after (convolutions by layout, batch norms, transposes, matmuls, ...), counted on
the graphs the pass started from and returned, not on the rules that fired (a rule can
fire in the e-graph without its result being chosen)."""

from __future__ import annotations

from collections import Counter

from .cost import STRIDED_CONVS, strided_conv
from .fusion import fused_reblocks, fused_slices
from .graph import TensorGraph
from .ops import ERF_OPS

# census key -> (singular, plural) for the sentence
NAMES = {
    "conv2d NCHW": ("NCHW conv", "NCHW convs"),
    "conv2d NHWC": ("NHWC conv", "NHWC convs"),
    "conv2d NCHW16c": ("channel-blocked conv", "channel-blocked convs"),
    "blocking copy": ("layout copy into or out of NCHW16c", "layout copies into or out of NCHW16c"),
    "fused reblock": (
        "kernel that unblocks NCHW16c data and blocks it again",
        "kernels that unblock NCHW16c data and block it again",
    ),
    "batch_norm": ("batch norm", "batch norms"),
    "permute_dims": ("transpose", "transposes"),
    "matmul": ("matmul", "matmuls"),
    "matmul of a conv weight": ("conv as a matmul", "convs as matmuls"),
    "winograd": ("conv as Winograd F(2x2, 3x3)", "convs as Winograd F(2x2, 3x3)"),
    "winograd f4": ("conv as Winograd F(4x4, 3x3)", "convs as Winograd F(4x4, 3x3)"),
    "winograd f4 nhwc": ("conv as Winograd F(4x4, 3x3) in NHWC", "convs as Winograd F(4x4, 3x3) in NHWC"),
    "winograd f4 cm": (
        "conv as Winograd F(4x4, 3x3), channel-major",
        "convs as Winograd F(4x4, 3x3), channel-major",
    ),
    "winograd 1d f4r3": ("conv as Winograd F(4, 3) along one axis", "convs as Winograd F(4, 3) along one axis"),
    "winograd 1d f2r7": ("conv as Winograd F(2, 7) along one axis", "convs as Winograd F(2, 7) along one axis"),
    "concat": ("concat", "concats"),
    "split": ("split", "splits"),
    "fused slice": ("part read in place as a fused slice", "parts read in place as fused slices"),
    "pool NHWC": ("NHWC pool", "NHWC pools"),
    "pool NCHW": ("NCHW pool", "NCHW pools"),
    "pool NCHW16c": ("NCHW16c pool", "NCHW16c pools"),
    "erf call": ("GELU or erf", "GELUs or erfs"),
    "softmax": ("softmax", "softmaxes"),
    "strided 1x1": ("strided 1x1 conv", "strided 1x1 convs"),
    "strided wide": ("wide strided conv", "wide strided convs"),
    "strided 3x3": ("strided 3x3 conv", "strided 3x3 convs"),
}

# the Winograd forms' census keys (``_winograd_key``), in the order ``describe`` names them
WINOGRAD_KEYS = tuple(key for key in NAMES if key.startswith("winograd"))


def census(graph: TensorGraph) -> Counter:
    """How many of each kind of node worth naming the graph holds (constant ones fold away
    at compile time and are not counted; nor are nodes no output reads)."""
    counts: Counter = Counter()
    slices = len(fused_slices(graph))
    if slices:
        counts["fused slice"] = slices
    reblocks = len(fused_reblocks(graph))
    if reblocks:
        counts["fused reblock"] = reblocks
    for nid in graph.reachable():
        node = graph.nodes[nid]
        if node.is_const:
            continue
        if any(_from_table(graph, i) for i in node.inputs):
            # a Winograd conv (winograd*.egg) is counted once, by its output transform; its
            # tile transform (a conv) and its product (a matmul) are not counted again
            table = graph.nodes[node.inputs[0]]
            if node.op == "Matmul" and table.op == "Table":
                counts[_winograd_key(graph, node, table.attrs[0])] += 1
            continue
        if node.op == "Conv2d":
            counts[f"conv2d {node.attrs[4]}"] += 1
            in_tys = [graph.nodes[i].ty for i in node.inputs]
            strided = strided_conv(node.op, node.attrs, in_tys)
            if strided is not None:
                counts[strided.name] += 1
        elif node.op in ("Conv2dNCHWc", "DepthwiseConv2dNCHWc"):  # nchwc.egg
            counts["conv2d NCHW16c"] += 1
        elif node.op in ("ToBlocked", "FromBlocked"):
            counts["blocking copy"] += 1
        elif node.op in ("MaxPool2d", "AvgPool2d"):
            counts[f"pool {node.attrs[6]}"] += 1
        elif node.op == "BatchNorm":
            counts["batch_norm"] += 1
        elif node.op == "Permute":
            counts["permute_dims"] += 1
        elif node.op == "Matmul":
            counts["matmul"] += 1
            if any(_conv_weight(graph, i) for i in node.inputs):
                counts["matmul of a conv weight"] += 1
        elif node.op == "Concat":
            counts["concat"] += 1
        elif node.op == "Split":
            counts["split"] += 1
        elif node.op in ERF_OPS:  # a libm call per element (erf_rational.egg)
            counts["erf call"] += 1
        elif node.op == "Softmax":  # expf per element (fast_math.egg)
            counts["softmax"] += 1
    return counts


def _const_source(graph: TensorGraph, i: int, through: tuple[str, ...]):
    """The node constant ``i`` is computed from, followed back through the ops in
    ``through`` (each by its first operand)."""
    node = graph.nodes[i]
    while node.is_const and node.op in through:
        node = graph.nodes[node.inputs[0]]
    return node


def _conv_weight(graph: TensorGraph, i: int) -> bool:
    """Is node ``i`` a constant 4-D tensor seen through reshapes and transposes (the weight of
    a convolution that the conv_matmul rules turned into a matmul)?"""
    node = _const_source(graph, i, ("Reshape", "Permute"))
    shape = getattr(node.ty, "shape", ())
    return node.is_const and node.op != "Matmul" and len(shape) == 4


def _winograd_key(graph: TensorGraph, out_transform, table: str) -> str:
    """Which Winograd form an output transform ends: F(2x2) or F(4x4), for F(4x4) whether
    its products are channel-major (the transformed weight is their first operand,
    ``conv2d-winograd-f4-cm``) or channels-last (their second), and whether its tiles are
    cut from NHWC data (``winograd_nhwc.egg``); or a one-dimensional one (``winograd_1d.egg``:
    its table names F(m, r), as in ``winograd-1d-f2r7-output``)."""
    if table.startswith("winograd-1d-"):
        return "winograd 1d " + table.split("-")[2]
    if not table.startswith("winograd-f4"):
        return "winograd"
    product = graph.nodes[out_transform.inputs[1]]
    while product.op == "Reshape":
        product = graph.nodes[product.inputs[0]]
    cm = product.op == "Matmul" and _from_table(graph, product.inputs[0])
    if cm:
        return "winograd f4 cm"
    tiles = graph.nodes[product.inputs[0]] if product.op == "Matmul" else product
    while tiles.op in ("Reshape", "Permute"):
        tiles = graph.nodes[tiles.inputs[0]]
    return "winograd f4 nhwc" if tiles.op == "Conv2d" and tiles.attrs[4] == "NHWC" else "winograd f4"


def _from_table(graph: TensorGraph, i: int) -> bool:
    """Is node ``i`` a constant computed from a rule's table (tables.py), seen through
    reshapes, broadcasts and the first operand of matmuls (a transformed weight)?"""
    return _const_source(graph, i, ("Reshape", "Permute", "BroadcastTo", "Matmul")).op == "Table"


def _n(count: int, key: str) -> str:
    one, many = NAMES.get(key, (key, key))
    return f"{count} {one if count == 1 else many}"


def describe(before: Counter, after: Counter) -> list[str]:
    """Sentences for what differs between two censuses, the largest changes first."""
    out = []
    convs_before = before["conv2d NCHW"] + before["conv2d NHWC"] + before["conv2d NCHW16c"]
    convs_after = after["conv2d NCHW"] + after["conv2d NHWC"] + after["conv2d NCHW16c"]
    for layout in ("NHWC", "NCHW16c"):
        if after[f"conv2d {layout}"] > before[f"conv2d {layout}"]:
            out.append(
                f"{after[f'conv2d {layout}'] - before[f'conv2d {layout}']} of {convs_after} convs run in {layout}"
            )
    as_matmuls = max(after["matmul of a conv weight"] - before["matmul of a conv weight"], 0)
    if as_matmuls:
        out.append(_n(as_matmuls, "matmul of a conv weight"))
        convs_before -= as_matmuls
    as_winograd = 0
    for key in WINOGRAD_KEYS:
        n = max(after[key] - before[key], 0)
        if n:
            out.append(_n(n, key))
            convs_before -= n
            as_winograd += n
    if convs_after < convs_before:
        out.append(f"{convs_before} convs merged into {convs_after}")
    if after["batch_norm"] < before["batch_norm"]:
        folded = before["batch_norm"] - after["batch_norm"]
        out.append(f"{_n(folded, 'batch_norm')} folded into the conv{'' if folded == 1 else 's'}")
    matmuls_before, matmuls_after = before["matmul"], after["matmul"] - as_matmuls
    if matmuls_after < matmuls_before:
        out.append(f"{matmuls_before} matmuls merged into {matmuls_after}")
    regions = after["conv2d NHWC"] > before["conv2d NHWC"]
    for key in ("permute_dims", "blocking copy", "pool NHWC", "pool NCHW16c", "concat", "split"):
        d = after[key] - before[key]
        if key == "permute_dims":  # a Winograd conv's two transposes are part of it
            d -= 2 * as_winograd
        if d > 0:
            out.append(f"{_n(d, key)} added" + (" at layout boundaries" if key == "permute_dims" and regions else ""))
        elif d < 0:
            out.append(f"{_n(-d, key)} removed")
    d = after["fused slice"] - before["fused slice"]
    if d > 0:
        out.append(_n(d, "fused slice"))
    if after["fused reblock"]:  # fusion.fused_reblocks: the kernels LLVM may miscompile in AVX2 code
        out.append(_n(after["fused reblock"], "fused reblock"))
    d = before["erf call"] - after["erf call"]
    if d > 0:
        out.append(f"{_n(d, 'erf call')} computed with a rational erf, no libm call")
    d = before["softmax"] - after["softmax"]
    if d > 0:
        out.append(f"{_n(d, 'softmax')} computed with TOPI's fast exp, no libm call")
    for kind in STRIDED_CONVS:
        d = before[kind.name] - after[kind.name]
        if d > 0:
            out.append(f"{_n(d, kind.name)} {kind.form}")
    return out
