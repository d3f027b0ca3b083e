"""Rules on the e-graph alone, no TVM: a TensorGraph written by hand, every family
loaded, saturated, then facts checked with egglog's ``check`` (milliseconds each).
``Ref i`` names the e-class of the graph's node ``i``."""

import time

import pytest

from tvm_eqsat.egraph import EGraphError, TensorEGraph
from tvm_eqsat.graph import CONST, INPUT, TGET, Node, TensorGraph, TensorTy
from tvm_eqsat.rules import load_library
from tvm_eqsat.saturate import saturate

F32 = "float32"
PROGRAM = load_library().program()
FAMILIES = load_library().families


def t(*shape, dtype=F32):
    return TensorTy(tuple(shape), dtype)


def saturated(nodes: list[Node], outputs: list[int]) -> TensorEGraph:
    g = TensorGraph()
    for n in nodes:
        g.nodes.append(n)
    g.outputs = [(None, o) for o in outputs]
    eg = TensorEGraph(g, PROGRAM)
    saturate(eg, FAMILIES, node_limit=20000, iter_limit=10, deadline=time.monotonic() + 30)
    return eg


def holds(eg: TensorEGraph, fact: str) -> bool:
    """Does ``fact`` hold?  A fact egglog cannot read (a typo) raises, so a negative
    check can never pass for the wrong reason."""
    try:
        eg.run(f"(check {fact})")
        return True
    except EGraphError as err:
        if "Check failed" not in str(err):
            raise
        return False


def x(shape, index=0):
    return Node(INPUT, (index,), (), t(*shape), False)


def const(shape, index):
    return Node(CONST, (index,), (), t(*shape), True)


def conv(data, weight, out_shape, stride=1, pad=0):
    attrs = ((stride, stride), (pad,) * 4, (1, 1), 1, "NCHW", "OIHW", "NCHW", "")
    return Node("Conv2d", attrs, (data, weight), t(*out_shape), False)


def test_identities_hold_with_every_family_loaded():
    eg = saturated(
        [
            x((2, 3)),
            Node("Reshape", ((2, 3),), (0,), t(2, 3), False),
            Node("Relu", (), (1,), t(2, 3), False),
            Node("Relu", (), (2,), t(2, 3), False),
        ],
        [3],
    )
    assert holds(eg, "(= (Ref 1) (Ref 0))")  # reshape to its own shape
    assert holds(eg, "(= (Ref 3) (Ref 2))")  # relu is idempotent
    assert not holds(eg, "(= (Ref 2) (Ref 0))")  # relu is not the identity


@pytest.mark.parametrize("stride", [1, 2, 3])
def test_merged_siblings_keep_each_convs_own_padding(stride):
    """Two 1x1 convs and a 3x3 (padding 1) on one input: after every family, each 1x1
    conv's class still has its own shape (an unsound merge would have raised), and
    the merge of the two 1x1s uses padding 0."""
    size = 13
    out = (size - 1) // stride + 1
    eg = saturated(
        [
            x((1, 8, size, size)),
            const((4, 8, 1, 1), 0),
            const((4, 8, 1, 1), 1),
            const((4, 8, 3, 3), 2),
            conv(0, 1, (1, 4, out, out), stride),
            conv(0, 2, (1, 4, out, out), stride),
            conv(0, 3, (1, 4, out, out), stride, pad=1),
        ],
        [4, 5, 6],
    )
    assert holds(eg, f"(= (shape (Ref 4)) (vec-of 1 4 {out} {out}))")
    merged = (
        f"(Conv2d (Ref 0) (Concat (TCons (Ref 1) (TCons (Ref 2) (TNil))) 0) (vec-of {stride} {stride}) "
        f'(vec-of 0 0 0 0) (vec-of 1 1) 1 "NCHW" "OIHW" "NCHW" "")'
    )
    assert holds(eg, merged)


@pytest.mark.parametrize("long_biases", [True, False])
def test_biases_are_concatenated_over_a_split_only_when_as_long_as_the_parts(long_biases):
    b0, b1 = ((5,), (1,)) if long_biases else ((1,), (1,))
    eg = saturated(
        [
            x((3, 6)),
            Node("Split", ((5,), 1), (0,), (t(3, 5), t(3, 1)), False),
            Node(TGET, (0,), (1,), t(3, 5), False),
            Node(TGET, (1,), (1,), t(3, 1), False),
            const(b0, 0),
            const(b1, 1),
            Node("Add", (), (2, 4), t(3, 5), False),
            Node("Add", (), (3, 5), t(3, 1), False),
        ],
        [6, 7],
    )
    assert holds(eg, "(Concat (TCons (Ref 4) (TCons (Ref 5) (TNil))) 0)") == long_biases


@pytest.mark.parametrize("channels_in", [3, 1])
def test_a_bias_is_absorbed_into_batch_norm_only_when_it_keeps_the_shape(channels_in):
    bn_attrs = (1, 1e-5, True, True, 0.1, False)
    eg = saturated(
        [
            x((1, channels_in, 5, 5)),
            const((1, 3, 1, 1), 0),
            Node("Add", (), (0, 1), t(1, 3, 5, 5), False),  # channels_in 1: the bias grows x
            const((3,), 1),
            const((3,), 2),
            const((3,), 3),
            const((3,), 4),
            Node("BatchNorm", bn_attrs, (2, 3, 4, 5, 6), (t(1, 3, 5, 5), t(3), t(3)), False),
            Node(TGET, (0,), (7,), t(1, 3, 5, 5), False),
        ],
        [8],
    )
    absorbed = (
        "(BatchNorm (Ref 0) (Ref 3) (Ref 4) (Sub (Ref 5) (Reshape (Ref 1) (vec-of 3))) (Ref 6) 1 1e-05 1 1 0.1 0)"
    )
    assert holds(eg, absorbed) == (channels_in == 3)


def test_a_batch_norm_made_by_a_rule_has_a_type_for_the_cost_model():
    bn_attrs = (1, 1e-5, True, True, 0.1, False)
    eg = saturated(
        [
            x((1, 3, 5, 5)),
            const((1, 3, 1, 1), 0),
            Node("Add", (), (0, 1), t(1, 3, 5, 5), False),
            const((3,), 1),
            const((3,), 2),
            const((3,), 3),
            const((3,), 4),
            Node("BatchNorm", bn_attrs, (2, 3, 4, 5, 6), (t(1, 3, 5, 5), t(3), t(3)), False),
            Node(TGET, (0,), (7,), t(1, 3, 5, 5), False),
        ],
        [8],
    )
    snap = eg.snapshot()
    made = [
        c
        for c, members in enumerate(snap.classes)
        if any(n.op == "BatchNorm" for n in members) and c != snap.root_of[7]
    ]
    assert made  # batch-norm-absorb-bias made a batch norm of x itself
    assert all(snap.ty[c] == (t(1, 3, 5, 5), t(3), t(3)) for c in made)


@pytest.mark.parametrize("dtype, folds", [("float32", True), ("float16", False)])
def test_constant_matmul_chains_fold_only_above_half_precision(dtype, folds):
    """matmul-assoc-const folds b @ c at compile time; in fp16 that product can cancel
    (fuzzer seed 8372: 0.45% -> 3.4% error against exact arithmetic), so not there."""
    eg = saturated(
        [
            Node(INPUT, (0,), (), t(4, 5, dtype=dtype), False),
            Node(CONST, (0,), (), t(5, 1, dtype=dtype), True),
            Node(CONST, (1,), (), t(1, 5, dtype=dtype), True),
            Node("Matmul", ("",), (0, 1), t(4, 1, dtype=dtype), False),
            Node("Matmul", ("",), (3, 2), t(4, 5, dtype=dtype), False),
        ],
        [4],
    )
    assert holds(eg, '(= (Ref 4) (Matmul (Ref 0) (Matmul (Ref 1) (Ref 2) "") ""))') == folds
