"""Every rule: it fires on random shapes that satisfy its guards and the rewritten
graph computes the same values through TVM; it does not fire where a guard is false."""

import numpy as np
import pytest
from helpers import assert_close, const, module, relax_ops, rewritten_variant, tensor
from tvm import relax
from tvm.relax import op as R

import tvm_eqsat
from tvm_eqsat import graph
from tvm_eqsat.rules import load_library


def _rng(seed):
    return np.random.default_rng(seed)


# ---- builders: (seed, positive) -> (module, rules to enable)


def relu_idempotent(seed, positive):
    x = tensor("x", (3, 5))
    inner = R.nn.relu if positive else R.sigmoid
    return module([x], lambda bb, x: R.nn.relu(bb.emit(inner(x)))), ["relu-idempotent"]


def reshape_identity(seed, positive):
    shape = tuple(int(d) for d in _rng(seed).integers(1, 5, 3))
    x = tensor("x", shape)
    target = shape if positive else (shape[0], shape[1] * shape[2])
    return module([x], lambda bb, x: R.nn.relu(bb.emit(R.reshape(x, target)))), ["reshape-identity"]


def reshape_chain(seed, positive):
    x = tensor("x", (4, 6))

    def body(bb, x):
        y = bb.emit(R.reshape(x, (2, 12)))
        if not positive:
            y = bb.emit(R.nn.relu(y))
        return R.reshape(y, (3, 8))

    return module([x], body), ["reshape-chain"]


def broadcast_identity(seed, positive):
    x = tensor("x", (2, 3))
    target = (2, 3) if positive else (4, 2, 3)
    return module([x], lambda bb, x: R.nn.relu(bb.emit(R.broadcast_to(x, target)))), ["broadcast-identity"]


def astype_identity(seed, positive):
    x = tensor("x", (2, 3))
    dtype = "float32" if positive else "float16"
    return module([x], lambda bb, x: R.nn.relu(bb.emit(R.astype(x, dtype)))), ["astype-identity"]


def _tuple_get(index, name):
    def build(seed, positive):
        """An item of a tuple built in the block, read back; negative: the same item of a
        split, whose tuple no Tuple node builds."""
        shape = (2, 4 + 2 * seed)
        x = tensor("x", shape)

        def body(bb, x):
            if positive:
                items = bb.emit(relax.Tuple([bb.emit(R.sigmoid(x)), bb.emit(R.nn.relu(x)), bb.emit(R.tanh(x))]))
            else:
                items = bb.emit(R.split(x, 2, axis=1))
            return R.nn.relu(bb.emit(relax.TupleGetItem(items, index)))

        return module([x], body), [name]

    return build


def _commute(op, name):
    def build(seed, positive):
        x = tensor("x", (2, 3))
        y = tensor("y", (3,))  # broadcast: commuting keeps the (2, 3) result
        other = R.subtract if op is R.add else R.divide  # negative: not commutative
        return module([x, y], lambda bb, x, y: (op if positive else other)(y, x)), [name]

    return build


def _assoc(op, name):
    def build(seed, positive):
        shapes = [(2, 3), (3,), (1, 3)][seed % 2 :] + [(2, 3)] * (seed % 2)
        a = tensor("a", shapes[0])
        bt = tensor("b", shapes[1])
        b = const(shapes[1], seed=seed) if positive else bt  # negative: b is an input, not a constant
        c = const(shapes[2], seed=seed + 1)

        def body(bb, a, *_):
            return R.nn.relu(bb.emit(op(bb.emit(op(a, b)), c)))

        return module([a] + ([] if positive else [bt]), body), [name]

    return build


def mul_factor(seed, positive):
    a, b, c, d = tensor("a", (2, 4)), tensor("b", (2, 4)), tensor("c", (4,)), tensor("d", (4,))
    other = c if positive else d  # negative: the two products scale by different tensors

    def body(bb, a, b, c, d):
        return R.add(bb.emit(R.multiply(a, c)), bb.emit(R.multiply(b, other)))

    return module([a, b, c, d], body), ["mul-factor"]


def mul_distribute_const(seed, positive):
    x, kt = tensor("x", (1, 4, 3, 3)), tensor("k", (1, 4, 1, 1))
    k = const((1, 4, 1, 1), seed=seed + 1) if positive else kt  # negative: the scale is an input

    def body(bb, x, *_):
        return R.multiply(bb.emit(R.add(x, const((1, 4, 1, 1), seed=seed))), k)

    return module([x] + ([] if positive else [kt]), body), ["mul-distribute-const"]


def _matmuls(seed, positive, n):
    rng = _rng(seed)
    k = int(rng.integers(3, 9))
    rank = int(rng.integers(2, 4))
    xshape = (2, 5, k) if rank == 3 else (5, k)
    x = tensor("x", xshape)
    widths = [int(w) for w in rng.integers(2, 7, n)]
    ws = [tensor(f"w{i}", (k, widths[i])) for i in range(n)]
    weights = [const((k, widths[i]), seed=seed + i) for i in range(n)] if positive else ws

    def body(bb, x, *_):
        outs = [bb.emit(R.matmul(x, w)) for w in weights]
        return relax.Tuple(outs)

    return module([x] + ([] if positive else ws), body)


def matmul_merge(seed, positive):
    return _matmuls(seed, positive, 2), ["matmul-merge"]


def matmul_merge_all(seed, positive):
    return _matmuls(seed, positive, 4), ["matmul-merge-all"]


def _convs(seed, positive, n, bias=False):
    rng = _rng(seed)
    cin, size = int(rng.integers(2, 5)), int(rng.integers(6, 10))
    kernel = int(rng.choice([1, 3]))
    stride, pad = int(rng.integers(1, 3)), int(rng.integers(0, 2))
    x = tensor("x", (1, cin, size, size))
    outs_c = [int(c) for c in rng.integers(2, 6, n)]
    weights = [const((c, cin, kernel, kernel), seed=seed + i) for i, c in enumerate(outs_c)]
    strides = [stride] * n if positive or bias else [stride] + [stride + 1] * (n - 1)
    biases = [const((1, c, 1, 1), seed=seed + 10 + i) for i, c in enumerate(outs_c)]
    if bias and not positive:
        biases = [tensor(f"b{i}", (1, c, 1, 1)) for i, c in enumerate(outs_c)]

    def body(bb, x, *bs):
        outs = []
        for i, w in enumerate(weights):
            y = bb.emit(R.nn.conv2d(x, w, strides=strides[i], padding=pad))
            if bias:
                y = bb.emit(R.add(y, (biases if positive else bs)[i]))
            outs.append(y)
        return relax.Tuple(outs)

    params = [x] + (biases if bias and not positive else [])
    return module(params, body)


def conv2d_merge(seed, positive):
    return _convs(seed, positive, 2), ["conv2d-merge"]


def conv2d_merge_extend(seed, positive):
    return _convs(seed, positive, 3), ["conv2d-merge", "conv2d-merge-extend"]


def conv2d_merge_all(seed, positive):
    # negative: two convs with different strides, no group to merge
    return _convs(seed, positive, 4 if positive else 2), ["conv2d-merge-all"]


def add_over_split(seed, positive):
    return _convs(seed, positive, 2, bias=True), ["conv2d-merge", "add-over-split"]


def add_over_split_last_axis(seed, positive):
    rng = _rng(seed)
    k, n1, n2 = (int(v) for v in rng.integers(2, 7, 3))
    x = tensor("x", (4, k))
    bs = [tensor("b0", (n1,)), tensor("b1", (n2,))]
    biases = [const((n1,), seed=seed + 5), const((n2,), seed=seed + 6)] if positive else bs

    def body(bb, x, *_):
        a = bb.emit(R.add(R.matmul(x, const((k, n1), seed=seed)), biases[0]))
        b = bb.emit(R.add(biases[1], R.matmul(x, const((k, n2), seed=seed + 1))))  # constant first
        return relax.Tuple([a, b])

    rules = ["matmul-merge", "add-commute", "add-over-split-last-axis"]
    return module([x] + ([] if positive else bs), body), rules


def _over_split(act, name):
    def build(seed, positive):
        x = tensor("x", (3, 8))

        def body(bb, x):
            src = bb.emit(R.split(x, [3], axis=1)) if positive else None
            parts = [bb.emit(relax.TupleGetItem(src, i)) for i in range(2)] if positive else [x, x]
            return relax.Tuple([bb.emit(act(p)) for p in parts])

        return module([x], body), [name]

    return build


def _permute_identity(rank):
    def build(seed, positive):
        shape = tuple(range(2, 2 + rank))
        x = tensor("x", shape)
        axes = list(range(rank)) if positive else list(reversed(range(rank)))
        return module([x], lambda bb, x: R.nn.relu(bb.emit(R.permute_dims(x, axes)))), [f"permute-identity-{rank}"]

    return build


def _permute_compose(rank):
    def build(seed, positive):
        rng = _rng(seed)
        shape = tuple(int(d) for d in rng.integers(2, 5, rank))
        x = tensor("x", shape)
        p, q = list(rng.permutation(rank)), list(rng.permutation(rank))

        def body(bb, x):
            y = bb.emit(R.permute_dims(x, [int(a) for a in p]))
            if not positive:
                y = bb.emit(R.nn.relu(y))
            return R.permute_dims(y, [int(a) for a in q])

        return module([x], body), [f"permute-compose-{rank}"]

    return build


def split_of_concat(seed, positive):
    a, b = tensor("a", (3, 2)), tensor("b", (3, 4))

    def body(bb, a, b):
        cat = bb.emit(R.concat([a, b], axis=1))
        parts = bb.emit(R.split(cat, [2 if positive else 3], axis=1))
        return relax.Tuple([R.nn.relu(relax.TupleGetItem(parts, 0)), R.nn.relu(relax.TupleGetItem(parts, 1))])

    return module([a, b], body), ["split-of-concat"]


def concat_of_split(seed, positive):
    x = tensor("x", (3, 6))

    def body(bb, x):
        parts = bb.emit(R.split(x, [2], axis=1))
        first, second = relax.TupleGetItem(parts, 0), relax.TupleGetItem(parts, 1)
        pieces = [first, second] if positive else [second, first]
        return R.nn.relu(bb.emit(R.concat(pieces, axis=1)))

    return module([x], body), ["concat-of-split"]


# ---- conv family


def conv2d_enlarge(seed, positive):
    """A smaller-kernel conv and a sibling with a larger kernel whose padding exceeds
    its own by the kernel difference (split asymmetrically, times the dilation)."""
    rng = _rng(seed)
    cin, size = int(rng.integers(2, 5)), int(rng.integers(8, 12))
    stride, dil = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    k1 = [int(k) for k in rng.integers(1, 3, 2)]
    grow = [2, int(rng.integers(0, 3))]  # at least one axis grows
    k2 = [a + g for a, g in zip(k1, grow)]
    pad1 = [int(p) for p in rng.integers(0, 2, 4)]  # top, left, bottom, right
    before = [int(rng.integers(0, g + 1)) for g in grow]
    pad2 = [
        pad1[0] + before[0] * dil,
        pad1[1] + before[1] * dil,
        pad1[2] + (grow[0] - before[0]) * dil,
        pad1[3] + (grow[1] - before[1]) * dil,
    ]
    if not positive:  # the sibling's padding does not cover the kernel difference
        pad2 = list(pad1)
    x = tensor("x", (1, cin, size, size))
    w1 = const((3, cin, *k1), seed=seed)
    w2 = const((4, cin, *k2), seed=seed + 1)

    def body(bb, x):
        a = bb.emit(R.nn.conv2d(x, w1, strides=stride, padding=pad1, dilation=dil))
        b = bb.emit(R.nn.conv2d(x, w2, strides=stride, padding=pad2, dilation=dil))
        return relax.Tuple([a, b])

    return module([x], body), ["conv2d-enlarge"]


def conv2d_add_weights(seed, positive):
    rng = _rng(seed)
    cin, size = int(rng.integers(2, 5)), int(rng.integers(6, 10))
    stride, pad = int(rng.integers(1, 3)), int(rng.integers(0, 2))
    x = tensor("x", (1, cin, size, size))
    ws = [tensor("w1", (4, cin, 3, 3)), tensor("w2", (4, cin, 3, 3))]
    # seed 0: constant weights; seed 1: weights as parameters (the rule needs no constants)
    weights = [const((4, cin, 3, 3), seed=seed + i) for i in range(2)] if seed == 0 else ws
    # negative: the second conv has a 1x1 kernel without padding (same output shape)
    w2, pad2 = (weights[1], pad) if positive else (const((4, cin, 1, 1), seed=seed + 5), 0)
    pad1 = pad if positive else 1

    def body(bb, x, *_):
        a = bb.emit(R.nn.conv2d(x, weights[0], strides=stride, padding=pad1))
        b = bb.emit(R.nn.conv2d(x, w2, strides=stride, padding=pad2))
        return R.add(a, b)

    return module([x] + (ws if seed != 0 else []), body), ["conv2d-add-weights"]


def conv2d_mul_channel(seed, positive):
    rng = _rng(seed)
    cin, cout, size = int(rng.integers(2, 5)), int(rng.integers(2, 6)), int(rng.integers(6, 10))
    groups = 1 if seed == 0 else cin
    cout = cout * groups
    x = tensor("x", (1, cin, size, size))
    w = const((cout, cin // groups, 3, 3), seed=seed)
    # negative: a scale that varies over space, not per channel
    scale = const((1, cout, 1, 1) if positive else (1, cout, size - 2, size - 2), seed=seed + 1)

    def body(bb, x):
        y = bb.emit(R.nn.conv2d(x, w, groups=groups))
        return R.multiply(y, scale)

    return module([x], body), ["conv2d-mul-channel"]


def _bn_consts(c, seed):
    rng = _rng(seed)
    gamma, beta, mean = (relax.const(rng.standard_normal(c).astype("float32")) for _ in range(3))
    var = relax.const(rng.uniform(0.5, 2.0, c).astype("float32"))
    return gamma, beta, mean, var


def conv2d_batch_norm_fold(seed, positive):
    rng = _rng(seed)
    cin, cout, size = int(rng.integers(2, 5)), int(rng.integers(2, 6)), int(rng.integers(6, 10))
    stride, eps = int(rng.integers(1, 3)), [1e-5, 1e-3][seed % 2]
    x = tensor("x", (1, cin, size, size))
    wt = tensor("w", (cout, cin, 3, 3))
    w = const((cout, cin, 3, 3), seed=seed) if positive else wt  # negative: weight not constant

    def body(bb, x, *_):
        y = bb.emit(R.nn.conv2d(x, w, strides=stride, padding=1))
        bn = bb.emit(R.nn.batch_norm(y, *_bn_consts(cout, seed + 1), axis=1, epsilon=eps, training=False))
        return R.nn.relu(relax.TupleGetItem(bn, 0))

    return module([x] + ([] if positive else [wt]), body), ["conv2d-batch-norm-fold"]


def conv2d_batch_norm_fold_grouped(seed, positive):
    """Depthwise (even seeds) or grouped by 2; negative: a dense conv, which the grouped
    rule must leave to conv2d-batch-norm-fold."""
    rng = _rng(seed)
    groups_per = int(rng.integers(1, 3))  # channels per group: 1 = depthwise
    g, size = int(rng.integers(2, 4)), int(rng.integers(6, 10))
    c = g * groups_per
    groups = g if positive else 1
    x = tensor("x", (1, c, size, size))
    w = const((c, c // groups, 3, 3), seed=seed)

    def body(bb, x):
        y = bb.emit(R.nn.conv2d(x, w, strides=1, padding=1, groups=groups))
        bn = bb.emit(R.nn.batch_norm(y, *_bn_consts(c, seed + 1), axis=1, epsilon=1e-5, training=False))
        return R.clip(relax.TupleGetItem(bn, 0), 0.0, 6.0)

    return module([x], body), ["conv2d-batch-norm-fold-grouped"]


# ---- scale family


def _scalar(positive, seed):
    """A rank-0 constant (the scale), or for the negative case a per-column (1-D) one."""
    return relax.const(np.float32(0.125 + seed)) if positive else const((4,), seed=seed)


def scale_through_reshape(seed, positive):
    x = tensor("x", (2, 3, 4))
    return module([x], lambda bb, x: R.multiply(bb.emit(R.reshape(x, (6, 4))), _scalar(positive, seed))), [
        "scale-through-reshape"
    ]


def scale_through_permute(seed, positive):
    x = tensor("x", (2, 4, 3))
    body = lambda bb, x: R.multiply(bb.emit(R.permute_dims(x, [0, 2, 1])), _scalar(positive, seed))  # noqa: E731
    return module([x], body), ["scale-through-permute"]


def _scale_into_matmul(side):
    name = f"scale-into-matmul-{side}"

    def build(seed, positive):
        a, b = tensor("a", (2, 5, 3)), tensor("b", (2, 3, 4))
        return module([a, b], lambda bb, a, b: R.multiply(bb.emit(R.matmul(a, b)), _scalar(positive, seed))), [name]

    return build


# ---- matmul family


def _matmul_factor(side):
    name = f"matmul-factor-{side}"

    def build(seed, positive):
        rng = _rng(seed)
        m, k, n = (int(v) for v in rng.integers(2, 7, 3))
        batched = seed == 1
        a = tensor("a", (2, m, k) if batched else (m, k))
        b = tensor("b", (k, n))
        if side == "left":  # a @ b + a @ c; negative: c is (k, 1), the add broadcasts
            c = tensor("c", (k, n) if positive else (k, 1))
            body = lambda bb, a, b, c: R.add(bb.emit(R.matmul(a, b)), bb.emit(R.matmul(a, c)))  # noqa: E731
        else:  # a @ b + c @ b; negative: c is (1, k) (a broadcast row), the add broadcasts
            c = tensor("c", a.ty.shape if positive else (1, k))
            body = lambda bb, a, b, c: R.add(bb.emit(R.matmul(a, b)), bb.emit(R.matmul(c, b)))  # noqa: E731
        return module([a, b, c], body), [name]

    return build


def matmul_assoc_const(seed, positive):
    rng = _rng(seed)
    m, k, r, n = (int(v) for v in rng.integers(2, 7, 4))
    x = tensor("x", (2, m, k) if seed == 1 else (m, k))
    ct = tensor("c", (r, n))
    c = const((r, n), seed=seed + 1) if positive else ct  # negative: c is not constant

    def body(bb, x, *_):
        return R.matmul(bb.emit(R.matmul(x, const((k, r), seed=seed))), c)

    return module([x] + ([] if positive else [ct]), body), ["matmul-assoc-const"]


def _matmul_transpose(rank):
    def build(seed, positive):
        rng = _rng(seed)
        m, k, n = (int(v) for v in rng.integers(2, 7, 3))
        batch = tuple(int(v) for v in rng.integers(1, 4, rank - 2))
        a, b = tensor("a", batch + (m, k)), tensor("b", batch + (k, n))
        swap = list(range(rank - 2)) + [rank - 1, rank - 2]
        # negative: a permutation other than swapping the last two axes
        axes = swap if positive else ([0, 1] if rank == 2 else [1, 0] + list(range(2, rank)))
        body = lambda bb, a, b: R.permute_dims(bb.emit(R.matmul(a, b)), axes)  # noqa: E731
        return module([a, b], body), [f"matmul-transpose-{rank}"]

    return build


# ---- slices


def strided_slice_of_concat(seed, positive):
    a, b, c = tensor("a", (3, 2)), tensor("b", (3, 5)), tensor("c", (3, 4))
    if seed == 0:  # inside b, stride 2
        begin, end, stride = 3, 7, 2
    else:  # the tail of c, end past the axis (clamped)
        begin, end, stride = 8, 2**63 - 1, 1
    if not positive:  # straddles a and b
        begin, end, stride = 1, 4, 1

    def body(bb, a, b, c):
        cat = bb.emit(R.concat([a, b, c], axis=1))
        return R.nn.relu(bb.emit(R.strided_slice(cat, axes=[1], begin=[begin], end=[end], strides=[stride])))

    return module([a, b, c], body), ["strided-slice-of-concat"]


def strided_slice_identity(seed, positive):
    x = tensor("x", (3, 6))
    end = [6, 2**63 - 1][seed % 2]
    begin = 0 if positive else 1

    def body(bb, x):
        return R.nn.relu(bb.emit(R.strided_slice(x, axes=[1], begin=[begin], end=[end])))

    return module([x], body), ["strided-slice-identity"]


def _matmul_rows(n, name):
    """n matmuls of different inputs by one weight (rank 2, or 3 with a shared batch)."""

    def build(seed, positive):
        rng = _rng(seed)
        k, width, lead = 5, 4, ((2,) if seed % 2 else ())
        xs = [tensor(f"x{i}", lead + (int(rng.integers(1, 4)), k)) for i in range(n)]
        w, w2 = tensor("w", (k, width)), tensor("w2", (k, width))

        def body(bb, *args):
            # negative: the last matmul uses another weight
            outs = [R.matmul(x, w if positive or i < n - 1 else w2) for i, x in enumerate(xs)]
            return relax.Tuple([bb.emit(o) for o in outs])

        rules = [name] if n == 2 else ["matmul-merge-rows", name]
        return module(xs + [w, w2], body), rules

    return build


def batch_norm_absorb_bias(seed, positive):
    rng = _rng(seed)
    cin, cout, size = int(rng.integers(2, 5)), int(rng.integers(2, 6)), int(rng.integers(5, 8))
    x = tensor("x", (1, cin, size, size))
    # negative: the bias varies over space, so it is not a shift of the channel mean
    bshape = (1, cout, 1, 1) if positive else (1, cout, size, size)

    def body(bb, x):
        y = bb.emit(R.nn.conv2d(x, const((cout, cin, 3, 3), seed=seed), padding=1))
        yb = bb.emit(R.add(y, const(bshape, seed=seed + 2)))
        bn = bb.emit(R.nn.batch_norm(yb, *_bn_consts(cout, seed + 1), axis=1, epsilon=1e-5, training=False))
        return R.nn.relu(relax.TupleGetItem(bn, 0))

    return module([x], body), ["batch-norm-absorb-bias"]


def conv2d_merge_groups(seed, positive):
    rng = _rng(seed)
    groups = [4, 2][seed % 2] if positive else 3  # negative: an odd number of groups
    cg, og, size = int(rng.integers(2, 4)), int(rng.integers(1, 3)), int(rng.integers(6, 9))
    stride, pad, dil = int(rng.integers(1, 3)), int(rng.integers(0, 2)), int(rng.integers(1, 3))
    x = tensor("x", (1, groups * cg, size, size))
    w = const((groups * og, cg, 3, 3), seed=seed)

    def body(bb, x):
        y = bb.emit(R.nn.conv2d(x, w, strides=stride, padding=pad, dilation=dil, groups=groups))
        return R.nn.relu(y)

    return module([x], body), ["conv2d-merge-groups"]


def relu_over_concat(seed, positive):
    a, b = tensor("a", (2, 3, 4)), tensor("b", (2, 5, 4))
    second = R.nn.relu if positive else R.sigmoid  # negative: different activations

    def body(bb, a, b):
        return R.concat([bb.emit(R.nn.relu(a)), bb.emit(second(b))], axis=1)

    return module([a, b], body), ["relu-over-concat"]


# ---- nhwc: layout regions (P takes NCHW to NHWC, Q takes it back)

P, Q = [0, 2, 3, 1], [0, 3, 1, 2]


def conv2d_nhwc(seed, positive):
    """Any stride, padding, dilation and groups; negative: the conv is NHWC already."""
    rng = _rng(seed)
    groups = [1, 2, 4][seed % 3]
    cg, og, size = int(rng.integers(1, 4)), int(rng.integers(1, 3)), int(rng.integers(6, 10))
    stride, dil = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pad = [int(p) for p in rng.integers(0, 3, 4)]
    cin, cout = groups * cg, groups * og
    if positive:
        x, w, layouts = tensor("x", (1, cin, size, size)), const((cout, cg, 3, 3), seed=seed), {}
    else:
        x, w = tensor("x", (1, size, size, cin)), const((cout, 3, 3, cg), seed=seed)
        layouts = {"data_layout": "NHWC", "kernel_layout": "OHWI"}

    def body(bb, x):
        return R.nn.relu(
            bb.emit(R.nn.conv2d(x, w, strides=stride, padding=pad, dilation=dil, groups=groups, **layouts))
        )

    return module([x], body), ["conv2d-nhwc"]


def _unary_of_permute(op, name):
    def build(seed, positive):
        rng = _rng(seed)
        x = tensor("x", tuple(int(d) for d in rng.integers(2, 5, 4)))

        def body(bb, x):
            y = bb.emit(R.permute_dims(x, Q))
            if not positive:  # the op reads the permute through another op
                y = bb.emit(R.reshape(y, [int(d) for d in y.ty.shape]))
            return R.add(bb.emit(op(y)), y)

        return module([x], body), [name]

    return build


def _binary_of_permutes(op, name):
    def build(seed, positive):
        rng = _rng(seed)
        shape = tuple(int(d) for d in rng.integers(2, 5, 4))
        a = tensor("a", shape)
        # negative: the second operand is not permuted (given in the permuted shape)
        b = tensor("b", shape if positive else tuple(shape[i] for i in Q))

        def body(bb, a, b):
            pb = bb.emit(R.permute_dims(b, Q)) if positive else b
            return R.nn.relu(bb.emit(op(bb.emit(R.permute_dims(a, Q)), pb)))

        return module([a, b], body), [name]

    return build


def _const_of_permute(op, name, const_first=False):
    def build(seed, positive):
        rng = _rng(seed)
        n, h, w, c = (int(d) for d in rng.integers(2, 5, 4))
        x = tensor("x", (n, h, w, c))
        k = const((1, c, 1, 1) if positive else (c, 1, 1), seed=seed)  # negative: rank 3

        def body(bb, x):
            y = bb.emit(R.permute_dims(x, Q))
            return R.nn.relu(bb.emit(op(k, y) if const_first else op(y, k)))

        return module([x], body), [name]

    return build


def concat_of_permutes(seed, positive):
    """Two to four NHWC parts of different channel counts, each seen as NCHW, concatenated
    on channels; negative: the last part is an NCHW tensor, not a permute."""
    rng = _rng(seed)
    n, h, w = (int(d) for d in rng.integers(1, 4, 3))
    chans = [int(c) for c in rng.integers(1, 5, 2 + seed % 3)]
    xs = [tensor(f"x{i}", (n, h, w, c)) for i, c in enumerate(chans[:-1])]
    last = (n, h, w, chans[-1]) if positive else (n, chans[-1], h, w)
    xs.append(tensor(f"x{len(chans) - 1}", last))

    def body(bb, *xs):
        parts = [bb.emit(R.permute_dims(x, Q)) for x in xs[:-1]]
        parts.append(bb.emit(R.permute_dims(xs[-1], Q)) if positive else xs[-1])
        return R.nn.relu(bb.emit(R.concat(parts, axis=1)))

    return module(xs, body), ["concat-of-permutes"]


def split_of_permute(seed, positive):
    """Split an NHWC tensor seen as NCHW along channels (at two indices for seed 1);
    negative: the split tensor is read through a reshape, not a permute."""
    rng = _rng(seed)
    n, h, w = (int(d) for d in rng.integers(1, 4, 3))
    c = 6
    x = tensor("x", (n, h, w, c))
    ind = [2] if seed % 2 == 0 else [1, 4]

    def body(bb, x):
        y = bb.emit(R.permute_dims(x, Q))
        if not positive:
            y = bb.emit(R.reshape(y, [n, c, h, w]))
        parts = bb.emit(R.split(y, ind, axis=1))
        outs = [R.nn.relu(relax.TupleGetItem(parts, k)) for k in range(len(ind) + 1)]
        return relax.Tuple(outs)

    return module([x], body), ["split-of-permute"]


def _pool_nhwc(op, name):
    def build(seed, positive):
        rng = _rng(seed)
        size, c = int(rng.integers(6, 10)), int(rng.integers(2, 5))
        k, stride, pad = int(rng.integers(2, 4)), int(rng.integers(1, 3)), int(rng.integers(0, 2))
        x = tensor("x", (1, size, size, c))

        def body(bb, x):
            y = bb.emit(R.permute_dims(x, Q))
            return R.nn.relu(bb.emit(op(y, k, stride, pad, ceil_mode=not positive)))  # negative: ceil mode

        return module([x], body), [name]

    return build


def _mean_nhwc(keepdims, name):
    def build(seed, positive):
        rng = _rng(seed)
        x = tensor("x", tuple(int(d) for d in rng.integers(2, 5, 4)))

        def body(bb, x):
            y = bb.emit(R.permute_dims(x, Q if positive else P))  # negative: the other permutation
            return R.nn.relu(bb.emit(R.mean(y, [2, 3], keepdims=keepdims)))

        return module([x], body), [name]

    return build


# ---- conv_matmul: convolutions as matmuls


def conv2d_1x1_nhwc_matmul(seed, positive):
    """Any batch and dilation; negative: stride 2."""
    rng = _rng(seed)
    n, size, c, o = 1 + seed % 2, int(rng.integers(3, 7)), int(rng.integers(2, 6)), int(rng.integers(2, 6))
    x, w = tensor("x", (n, size, size, c)), const((o, 1, 1, c), seed=seed)
    stride, dil = (1 if positive else 2), 1 + seed % 2

    def body(bb, x):
        y = R.nn.conv2d(x, w, strides=stride, dilation=dil, data_layout="NHWC", kernel_layout="OHWI")
        return R.nn.relu(bb.emit(y))

    return module([x], body), ["conv2d-1x1-nhwc-matmul"]


def conv2d_1x1_nchw_matmul(seed, positive):
    """Batch 1, padding 0; negative: batch 2."""
    rng = _rng(seed)
    size, c, o = int(rng.integers(3, 7)), int(rng.integers(2, 6)), int(rng.integers(2, 6))
    x, w = tensor("x", (1 if positive else 2, c, size, size + 1)), const((o, c, 1, 1), seed=seed)
    return module([x], lambda bb, x: R.nn.relu(bb.emit(R.nn.conv2d(x, w)))), ["conv2d-1x1-nchw-matmul"]


def conv2d_1x1_strided_subsample(seed, positive):
    """Stride (2, 2) over even sides at batch 1 and (2, 3) over odd ones at batch 2 with
    dilation 2 and two groups (the slices' lengths are ceil(H / s)); negative: padding 1."""
    rng = _rng(seed)
    n, stride, groups, dil = (1, (2, 2), 1, 1) if seed % 2 == 0 else (2, (2, 3), 2, 2)
    size = (6, 8) if seed % 2 == 0 else (7, 11)
    c, o = 2 * int(rng.integers(1, 3)), 2 * int(rng.integers(1, 3))
    x, w = tensor("x", (n, c, *size)), const((o, c // groups, 1, 1), seed=seed)
    pad = 0 if positive else 1

    def body(bb, x):
        return R.nn.relu(bb.emit(R.nn.conv2d(x, w, strides=stride, padding=pad, dilation=dil, groups=groups)))

    return module([x], body), ["conv2d-1x1-strided-subsample"]


def conv2d_stride2_polyphase(seed, positive):
    """Seed 0: a 3x3 conv, padding 1, even sides, batch 1; seed 1: a 4x3 kernel with uneven
    padding (top 1, left 0, bottom 2, right 1) over odd sides, two groups, batch 2, whose last
    padded row the conv never reads.  Negative: a 7x7 kernel (the form was not measured there)."""
    rng = _rng(seed)
    c, o = 2 * int(rng.integers(1, 3)), 2 * int(rng.integers(1, 3))
    if not positive:
        n, size, kernel, pad, groups = 1, (14, 12), (7, 7), 3, 1
    elif seed % 2 == 0:
        n, size, kernel, pad, groups = 1, (10, 12), (3, 3), 1, 1
    else:
        n, size, kernel, pad, groups = 2, (11, 9), (4, 3), (1, 0, 2, 1), 2
    x, w = tensor("x", (n, c, *size)), const((o, c // groups, *kernel), seed=seed)

    def body(bb, x):
        return R.nn.relu(bb.emit(R.nn.conv2d(x, w, strides=2, padding=pad, groups=groups)))

    return module([x], body), ["conv2d-stride2-polyphase"]


def conv2d_stride2_space_to_depth(seed, positive):
    """Seed 0: a 7x7 stem-like conv, padding 3, even sides, batch 1; seed 1: a 4x3 kernel with
    uneven padding (top 1, left 0, bottom 2, right 1) at batch 2, over 12 rows, whose last
    padded row the conv never reads (the phases pad one row, not two).  Negative: a bottom row that the conv never reads and that
    no pad covers (the phases would need a crop): a 2x2 kernel over 9 rows, no padding."""
    rng = _rng(seed)
    c, o = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    if not positive:
        n, size, kernel, pad = 1, (9, 9), (2, 2), 0
    elif seed % 2 == 0:
        n, size, kernel, pad = 1, (14, 12), (7, 7), 3
    else:
        n, size, kernel, pad = 2, (12, 9), (4, 3), (1, 0, 2, 1)
    x, w = tensor("x", (n, c, *size)), const((o, c, *kernel), seed=seed)

    def body(bb, x):
        return R.nn.relu(bb.emit(R.nn.conv2d(x, w, strides=2, padding=pad)))

    return module([x], body), ["conv2d-stride2-space-to-depth"]


def conv2d_patchify_matmul(seed, positive):
    """A (p, q) kernel at stride (p, q) over a multiple of it (square and not);
    negative: a stride smaller than the kernel (overlapping patches)."""
    rng = _rng(seed)
    p, q = (4, 4) if seed % 2 == 0 else (2, 3)
    c, o, hp, vq = int(rng.integers(1, 4)), int(rng.integers(2, 5)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    x, w = tensor("x", (1, c, hp * p, vq * q)), const((o, c, p, q), seed=seed)
    stride = (p, q) if positive else (1, 1)
    return module([x], lambda bb, x: R.nn.relu(bb.emit(R.nn.conv2d(x, w, strides=stride)))), ["conv2d-patchify-matmul"]


# ---- winograd: 3x3 convs as Winograd F(2x2, 3x3)


def _winograd_direct(out: tuple[int, int], rule: str, nhwc: bool = False):
    """Cases for a Winograd form's rule: batch 1 and 2, padding 1 and 0, an ``out`` output
    either way (square or not); negative: stride 2.  ``nhwc``: the conv in NHWC (OHWI
    weights)."""

    def build(seed, positive):
        rng = _rng(seed)
        n, c, k = 1 + seed % 2, int(rng.integers(2, 6)), int(rng.integers(2, 6))
        pad = 1 - seed % 2
        size = tuple(d + 2 * (1 - pad) for d in out)
        x, w = _winograd_operands(n, c, k, size, seed, nhwc)
        stride = 1 if positive else 2

        def body(bb, x):
            return R.nn.relu(bb.emit(R.nn.conv2d(x, w, strides=stride, padding=pad, **_winograd_layouts(nhwc))))

        return module([x], body), [rule]

    return build


def _winograd_padded(inputs: tuple[tuple[int, int], ...], negative: tuple[int, int], rule: str, nhwc: bool = False):
    """Cases for the rule that computes a conv on the next size a Winograd form tiles:
    inputs ``inputs[seed % 2]`` (outputs one row and one column smaller), asymmetric padding
    (top 0, left 1, bottom 1, right 0); negative: input ``negative``, whose output the form
    tiles already.  ``nhwc``: the conv in NHWC (OHWI weights)."""

    def build(seed, positive):
        rng = _rng(seed)
        c, k = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        h, v = inputs[seed % 2] if positive else negative
        x, w = _winograd_operands(1, c, k, (h, v), seed, nhwc)

        def body(bb, x):
            return R.nn.relu(bb.emit(R.nn.conv2d(x, w, padding=(0, 1, 1, 0), **_winograd_layouts(nhwc))))

        return module([x], body), [rule]

    return build


def _winograd_operands(n: int, c: int, k: int, size: tuple[int, int], seed: int, nhwc: bool):
    """A Winograd case's input and constant 3x3 weights, NCHW / OIHW or NHWC / OHWI."""
    if nhwc:
        return tensor("x", (n, *size, c)), const((k, 3, 3, c), seed=seed)
    return tensor("x", (n, c, *size)), const((k, c, 3, 3), seed=seed)


def _winograd_layouts(nhwc: bool) -> dict:
    """The conv2d layout arguments of a Winograd case."""
    return {"data_layout": "NHWC", "kernel_layout": "OHWI"} if nhwc else {}


# ---- erf_rational: GELU's erf as a rational function


def gelu_as_erf(seed, positive):
    """A GELU of a random 3-D float32 tensor; negative: float64, which the rule leaves alone."""
    shape = tuple(int(d) for d in _rng(seed).integers(2, 9, 3))
    x = tensor("x", shape, "float32" if positive else "float64")
    return module([x], lambda bb, x: R.nn.gelu(x)), ["gelu-as-erf"]


def erf_rational(seed, positive):
    """An erf of values spread past the clamp at +-4 (x * 3 of a standard normal); negative:
    float64."""
    shape = tuple(int(d) for d in _rng(seed).integers(2, 9, 2))
    dtype = "float32" if positive else "float64"
    x = tensor("x", shape, dtype)
    return module([x], lambda bb, x: R.erf(bb.emit(R.multiply(x, relax.const(3.0, dtype))))), ["erf-rational"]


# ---- fast_math: TOPI's fast softmax


def softmax_fast(seed, positive):
    """A softmax of spread-out float32 values (x * 8) along a random axis of a 3-D tensor;
    negative: float64."""
    rng = _rng(seed)
    shape, axis = tuple(int(d) for d in rng.integers(2, 9, 3)), int(rng.integers(-3, 3))
    dtype = "float32" if positive else "float64"
    x = tensor("x", shape, dtype)
    return module([x], lambda bb, x: R.nn.softmax(bb.emit(R.multiply(x, relax.const(8.0, dtype))), axis)), [
        "softmax-fast"
    ]


# F(2x2): a 6x8 output; an odd output height (7x6) or width (6x5), negative 6x6
conv2d_winograd_f2 = _winograd_direct((6, 8), "conv2d-winograd-f2")
conv2d_winograd_f2_cl = _winograd_direct((6, 8), "conv2d-winograd-f2-cl")  # winograd_cl.egg's form
conv2d_winograd_f2_even = _winograd_padded(((8, 7), (7, 6)), (7, 7), "conv2d-winograd-f2-even")
# F(4x4): an 8x12 output; outputs 7x6 and 5x8, negative 8x4 (both multiples of 4)
conv2d_winograd_f4_cl = _winograd_direct((8, 12), "conv2d-winograd-f4-cl")
conv2d_winograd_f4_cm = _winograd_direct((8, 12), "conv2d-winograd-f4-cm")  # channel-major
conv2d_winograd_f4_pad = _winograd_padded(((8, 7), (6, 9)), (9, 5), "conv2d-winograd-f4-pad")
# the same in NHWC (winograd_nhwc.egg)
conv2d_winograd_f4_nhwc = _winograd_direct((8, 12), "conv2d-winograd-f4-nhwc", nhwc=True)
conv2d_winograd_f4_nhwc_pad = _winograd_padded(((8, 7), (6, 9)), (9, 5), "conv2d-winograd-f4-nhwc-pad", nhwc=True)


def _winograd_1d(kernel: tuple[int, int], m: int, rule: str, padded: bool = False):
    """Cases for a winograd_1d.egg rule on a ``kernel`` conv (1 x r along the rows, r x 1
    down the columns), batch 1 and 2, 5 wide across its axis.  The form's rule: an output
    2m long along the axis, padded to keep the size or not at all; negative: stride 2.  The
    pad rule (``padded``): padding r // 2 before and none after, an output not a multiple of
    m along the axis; negative: one that is."""
    r, along_rows = max(kernel), kernel[0] == 1

    def build(seed, positive):
        rng = _rng(seed)
        n, c, k = 1 + seed % 2, int(rng.integers(2, 6)), int(rng.integers(2, 6))
        if padded:
            lo, hi, stride = r // 2, 0, 1
            out = 2 * m + (1 + seed % (m - 1) if positive else 0)
        else:
            lo = hi = r // 2 if seed % 2 == 0 else 0
            out, stride = 2 * m, 1 if positive else 2
        size = out + r - 1 - lo - hi
        x = tensor("x", (n, c, 5, size) if along_rows else (n, c, size, 5))
        w = const((k, c, *kernel), seed=seed)
        pad = (0, lo, 0, hi) if along_rows else (lo, 0, hi, 0)
        conv = R.nn.conv2d(x, w, strides=stride, padding=pad)
        return module([x], lambda bb, x: R.nn.relu(bb.emit(conv))), [rule]

    return build


# one-dimensional Winograd: F(4, 3) for 1x3 and 3x1 kernels, F(2, 7) for 1x7 and 7x1
WINOGRAD_1D = {
    name: _winograd_1d(kernel, m, name, name.endswith("-pad"))
    for name, kernel, m in (
        ("conv2d-winograd-1x3", (1, 3), 4),
        ("conv2d-winograd-1x3-pad", (1, 3), 4),
        ("conv2d-winograd-3x1", (3, 1), 4),
        ("conv2d-winograd-3x1-pad", (3, 1), 4),
        ("conv2d-winograd-1x7", (1, 7), 2),
        ("conv2d-winograd-1x7-pad", (1, 7), 2),
        ("conv2d-winograd-7x1", (7, 1), 2),
        ("conv2d-winograd-7x1-pad", (7, 1), 2),
    )
}


# ---- nchwc: channel-blocked regions (NCHW16c), behind a conv the conv2d-nchwc rule blocks


def _blocked_conv(bb, x, seed, out=16):
    """A 3x3 conv of ``x`` (16 or 32 channels) with ``out`` outputs, padding 1: blockable."""
    return bb.emit(R.nn.conv2d(x, const((out, int(x.ty.shape[1]), 3, 3), seed=seed), padding=1))


def _nchwc_input(seed):
    rng = _rng(seed)
    return tensor("x", (1, int(rng.choice([16, 32])), int(rng.integers(5, 9)), int(rng.integers(5, 9))))


def conv2d_nchwc(seed, positive):
    """Any stride, padding and dilation, a 1x1 or 3x3 kernel; negative: 24 outputs, no block."""
    rng = _rng(seed)
    c, size, kernel = int(rng.choice([16, 32])), int(rng.integers(7, 11)), int(rng.choice([1, 3]))
    stride, dil = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pad = [int(p) for p in rng.integers(0, 3, 4)]
    x, w = tensor("x", (1, c, size, size)), const((16 if positive else 24, c, kernel, kernel), seed=seed)
    body = lambda bb, x: R.nn.relu(bb.emit(R.nn.conv2d(x, w, strides=stride, padding=pad, dilation=dil)))  # noqa: E731
    return module([x], body), ["conv2d-nchwc"]


def depthwise_conv2d_nchwc(seed, positive):
    """A depthwise 3x3 or 5x5 conv, any stride, padding and dilation; negative: a channel
    multiplier of 2 (32 outputs of 16 channels), which the blocked kernel does not compute."""
    rng = _rng(seed)
    c, size, kernel = int(rng.choice([16, 32])), int(rng.integers(7, 11)), int(rng.choice([3, 5]))
    stride, dil = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pad = [int(p) for p in rng.integers(0, 3, 4)]
    x, w = tensor("x", (1, c, size, size)), const((c if positive else 2 * c, 1, kernel, kernel), seed=seed)
    body = lambda bb, x: R.nn.relu(  # noqa: E731
        bb.emit(R.nn.conv2d(x, w, strides=stride, padding=pad, dilation=dil, groups=c))
    )
    return module([x], body), ["depthwise-conv2d-nchwc"]


def block_of_unblock(seed, positive):
    """Two blocked convs in a row; negative: a sigmoid between them, which no rule moves."""

    def body(bb, x):
        y = _blocked_conv(bb, x, seed, 32)
        if not positive:
            y = bb.emit(R.sigmoid(y))
        return _blocked_conv(bb, y, seed + 1)

    return module([_nchwc_input(seed)], body), ["conv2d-nchwc", "block-of-unblock"]


def _unary_of_unblock(op, name):
    def build(seed, positive):
        def body(bb, x):
            y = _blocked_conv(bb, x, seed)
            if not positive:  # the op reads the conv through another op
                y = bb.emit(R.reshape(y, [int(d) for d in y.ty.shape]))
            return op(y)

        return module([_nchwc_input(seed)], body), ["conv2d-nchwc", name]

    return build


def add_of_unblocks(seed, positive):
    """Two blocked convs of one input added; negative: a conv plus another input, which
    nothing blocks."""
    x = _nchwc_input(seed)
    other = tensor("y", (1, 16, *[int(d) for d in x.ty.shape][2:]))

    def body(bb, x, y):
        return R.add(_blocked_conv(bb, x, seed), _blocked_conv(bb, x, seed + 1) if positive else y)

    return module([x, other], body), ["conv2d-nchwc", "add-of-unblocks"]


def unblock_of_block(seed, positive):
    """A blocked conv plus its own input (a residual): the input is the unblocking of the
    conv's blocked input, so the add runs blocked too; negative: no conv blocks the input
    (24 channels out)."""

    def body(bb, x):
        c = int(x.ty.shape[1])
        w = const((c if positive else 24, c, 3, 3), seed=seed)
        y = bb.emit(R.nn.conv2d(x, w, padding=1))
        return R.add(y, x) if positive else R.nn.relu(y)

    return module([_nchwc_input(seed)], body), ["conv2d-nchwc", "unblock-of-block", "add-of-unblocks"]


def _const_of_unblock(op, name, const_first=False):
    def build(seed, positive):
        k = const((1, 16, 1, 1) if positive else (16, 1, 1), seed=seed)  # negative: rank 3

        def body(bb, x):
            y = _blocked_conv(bb, x, seed)
            return R.nn.relu(bb.emit(op(k, y) if const_first else op(y, k)))

        return module([_nchwc_input(seed)], body), ["conv2d-nchwc", name]

    return build


def _pool_nchwc(op, name):
    def build(seed, positive):
        """A 2x2 or 3x3 pool, stride 1 or 2; negative: ceil mode, which the rule leaves."""
        rng = _rng(seed)
        k, st = int(rng.choice([2, 3])), int(rng.integers(1, 3))

        def body(bb, x):
            return op(_blocked_conv(bb, x, seed), k, st, ceil_mode=not positive)

        return module([_nchwc_input(seed)], body), ["conv2d-nchwc", name]

    return build


def concat_of_unblocks(seed, positive):
    """Two or three blocked convs of one input (16 or 32 outputs each) concatenated on the
    channels, then a relu; negative: the last part has 24 outputs, which nothing blocks."""
    outs = [16, 32, 16][: 2 + seed % 2]

    def body(bb, x):
        parts = [_blocked_conv(bb, x, seed + i, out) for i, out in enumerate(outs[:-1])]
        parts.append(_blocked_conv(bb, x, seed + 9, outs[-1] if positive else 24))
        return R.nn.relu(bb.emit(R.concat(parts, axis=1)))

    return module([_nchwc_input(seed)], body), ["conv2d-nchwc", "concat-of-unblocks"]


def block_concat_parts(seed, positive):
    """A blocked conv concatenated with a part no rule blocks (a sigmoid of the input, 16 or
    32 channels), then a relu: the sigmoid gets a copy into the block and the concat runs
    blocked; negative: that part has 8 channels more (24 or 40), which do not divide by the block."""

    def body(bb, x):
        other = bb.emit(R.sigmoid(x))
        if not positive:
            other = bb.emit(R.concat([other, bb.emit(R.strided_slice(other, [1], [0], [8]))], axis=1))
        parts = [_blocked_conv(bb, x, seed), other][:: 1 if seed % 2 == 0 else -1]
        return R.nn.relu(bb.emit(R.concat(parts, axis=1)))

    return module([_nchwc_input(seed)], body), ["conv2d-nchwc", "concat-of-unblocks", "block-concat-parts"]


def _mean_nchwc(keepdims, name):
    def build(seed, positive):
        """The spatial mean; negative: the mean over the channels."""
        body = lambda bb, x: R.mean(_blocked_conv(bb, x, seed), [2, 3] if positive else [1], keepdims=keepdims)  # noqa: E731
        return module([_nchwc_input(seed)], body), ["conv2d-nchwc", name]

    return build


BUILDERS = {
    **{f"permute-identity-{r}": _permute_identity(r) for r in (2, 3, 4)},
    **{f"permute-compose-{r}": _permute_compose(r) for r in (2, 3, 4)},
    "split-of-concat": split_of_concat,
    "concat-of-split": concat_of_split,
    "relu-idempotent": relu_idempotent,
    "reshape-identity": reshape_identity,
    "reshape-chain": reshape_chain,
    "broadcast-identity": broadcast_identity,
    "astype-identity": astype_identity,
    "tuple-get-0": _tuple_get(0, "tuple-get-0"),
    "tuple-get-1": _tuple_get(1, "tuple-get-1"),
    "add-commute": _commute(R.add, "add-commute"),
    "mul-commute": _commute(R.multiply, "mul-commute"),
    "add-assoc-const": _assoc(R.add, "add-assoc-const"),
    "mul-assoc-const": _assoc(R.multiply, "mul-assoc-const"),
    "mul-factor": mul_factor,
    "mul-distribute-const": mul_distribute_const,
    "batch-norm-absorb-bias": batch_norm_absorb_bias,
    "conv2d-merge-groups": conv2d_merge_groups,
    "relu-over-concat": relu_over_concat,
    "matmul-merge-rows": _matmul_rows(2, "matmul-merge-rows"),
    "matmul-merge-rows-extend": _matmul_rows(3, "matmul-merge-rows-extend"),
    "matmul-merge": matmul_merge,
    "matmul-merge-all": matmul_merge_all,
    "conv2d-merge": conv2d_merge,
    "conv2d-merge-all": conv2d_merge_all,
    "conv2d-merge-extend": conv2d_merge_extend,
    "add-over-split": add_over_split,
    "add-over-split-last-axis": add_over_split_last_axis,
    "relu-over-split": _over_split(R.nn.relu, "relu-over-split"),
    "gelu-over-split": _over_split(R.nn.gelu, "gelu-over-split"),
    "conv2d-enlarge": conv2d_enlarge,
    "conv2d-add-weights": conv2d_add_weights,
    "conv2d-mul-channel": conv2d_mul_channel,
    "conv2d-batch-norm-fold": conv2d_batch_norm_fold,
    "conv2d-batch-norm-fold-grouped": conv2d_batch_norm_fold_grouped,
    "scale-through-reshape": scale_through_reshape,
    "scale-through-permute": scale_through_permute,
    "scale-into-matmul-left": _scale_into_matmul("left"),
    "scale-into-matmul-right": _scale_into_matmul("right"),
    "matmul-factor-left": _matmul_factor("left"),
    "matmul-factor-right": _matmul_factor("right"),
    "matmul-assoc-const": matmul_assoc_const,
    **{f"matmul-transpose-{r}": _matmul_transpose(r) for r in (2, 3, 4)},
    "strided-slice-of-concat": strided_slice_of_concat,
    "strided-slice-identity": strided_slice_identity,
    "conv2d-nhwc": conv2d_nhwc,
    "relu-of-permute": _unary_of_permute(R.nn.relu, "relu-of-permute"),
    "clip-of-permute": _unary_of_permute(lambda y: R.clip(y, 0.0, 6.0), "clip-of-permute"),
    "sigmoid-of-permute": _unary_of_permute(R.sigmoid, "sigmoid-of-permute"),
    "silu-of-permute": _unary_of_permute(R.nn.silu, "silu-of-permute"),
    "add-of-permutes": _binary_of_permutes(R.add, "add-of-permutes"),
    "mul-of-permutes": _binary_of_permutes(R.multiply, "mul-of-permutes"),
    "add-const-of-permute": _const_of_permute(R.add, "add-const-of-permute"),
    "const-add-of-permute": _const_of_permute(R.add, "const-add-of-permute", const_first=True),
    "mul-const-of-permute": _const_of_permute(R.multiply, "mul-const-of-permute"),
    "concat-of-permutes": concat_of_permutes,
    "split-of-permute": split_of_permute,
    "max-pool-nhwc": _pool_nhwc(R.nn.max_pool2d, "max-pool-nhwc"),
    "avg-pool-nhwc": _pool_nhwc(R.nn.avg_pool2d, "avg-pool-nhwc"),
    "mean-nhwc": _mean_nhwc(False, "mean-nhwc"),
    "mean-nhwc-keepdims": _mean_nhwc(True, "mean-nhwc-keepdims"),
    "conv2d-1x1-nhwc-matmul": conv2d_1x1_nhwc_matmul,
    "conv2d-1x1-nchw-matmul": conv2d_1x1_nchw_matmul,
    "conv2d-patchify-matmul": conv2d_patchify_matmul,
    "conv2d-1x1-strided-subsample": conv2d_1x1_strided_subsample,
    "conv2d-stride2-space-to-depth": conv2d_stride2_space_to_depth,
    "conv2d-stride2-polyphase": conv2d_stride2_polyphase,
    "conv2d-winograd-f2": conv2d_winograd_f2,
    "conv2d-winograd-f2-even": conv2d_winograd_f2_even,
    "conv2d-winograd-f2-cl": conv2d_winograd_f2_cl,
    "conv2d-winograd-f4-cl": conv2d_winograd_f4_cl,
    "conv2d-winograd-f4-cm": conv2d_winograd_f4_cm,
    "conv2d-winograd-f4-pad": conv2d_winograd_f4_pad,
    "conv2d-winograd-f4-nhwc": conv2d_winograd_f4_nhwc,
    "conv2d-winograd-f4-nhwc-pad": conv2d_winograd_f4_nhwc_pad,
    **WINOGRAD_1D,
    "conv2d-nchwc": conv2d_nchwc,
    "depthwise-conv2d-nchwc": depthwise_conv2d_nchwc,
    "block-of-unblock": block_of_unblock,
    "unblock-of-block": unblock_of_block,
    "relu-of-unblock": _unary_of_unblock(R.nn.relu, "relu-of-unblock"),
    "clip-of-unblock": _unary_of_unblock(lambda y: R.clip(y, 0.0, 6.0), "clip-of-unblock"),
    "add-of-unblocks": add_of_unblocks,
    "add-const-of-unblock": _const_of_unblock(R.add, "add-const-of-unblock"),
    "const-add-of-unblock": _const_of_unblock(R.add, "const-add-of-unblock", const_first=True),
    "mul-const-of-unblock": _const_of_unblock(R.multiply, "mul-const-of-unblock"),
    "max-pool-nchwc": _pool_nchwc(R.nn.max_pool2d, "max-pool-nchwc"),
    "avg-pool-nchwc": _pool_nchwc(R.nn.avg_pool2d, "avg-pool-nchwc"),
    "mean-nchwc": _mean_nchwc(False, "mean-nchwc"),
    "mean-nchwc-keepdims": _mean_nchwc(True, "mean-nchwc-keepdims"),
    "concat-of-unblocks": concat_of_unblocks,
    "block-concat-parts": block_concat_parts,
    "gelu-as-erf": gelu_as_erf,
    "erf-rational": erf_rational,
    "softmax-fast": softmax_fast,
}
# rules that are not exact, with the relative difference they are tested within (each
# rule's file states it); every other rule is tested within 1e-5
TOLERANCE = {"conv2d-winograd-f4-cl": 1e-4, "conv2d-winograd-f4-cm": 1e-4, "conv2d-winograd-f4-nhwc": 1e-4}
TOLERANCE.update({name: 1e-4 for name in WINOGRAD_1D if not name.endswith("-pad")})


def test_every_rule_has_a_test():
    assert {r.name for r in load_library().rules} == set(BUILDERS)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_rule_fires_and_preserves_values(name, seed):
    mod, rules = BUILDERS[name](seed, True)
    new, applied, changed = rewritten_variant(mod, rules)
    assert applied.get(name, 0) > 0, applied
    assert changed
    assert_close(mod, new, rtol=TOLERANCE.get(name, 1e-5))


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_rule_does_not_fire_when_guard_is_false(name):
    mod, rules = BUILDERS[name](0, False)
    _, applied, _ = rewritten_variant(mod, rules)
    assert applied.get(name, 0) == 0, applied


@pytest.mark.parametrize(
    "rules, pad, form, rtol, transforms",
    [
        (["winograd"], "conv2d-winograd-f2-even", "conv2d-winograd-f2", 1e-5, 1),
        (["winograd_cl", "conv2d-winograd-f2-even"], "conv2d-winograd-f2-even", "conv2d-winograd-f2-cl", 1e-5, 1),
        (["winograd_f4"], "conv2d-winograd-f4-pad", "conv2d-winograd-f4-cl", 1e-4, 2),
        (["winograd_f4_cm", "conv2d-winograd-f4-pad"], "conv2d-winograd-f4-pad", "conv2d-winograd-f4-cm", 1e-4, 2),
        (["nhwc", "winograd_nhwc"], "conv2d-winograd-f4-nhwc-pad", "conv2d-winograd-f4-nhwc", 1e-4, 2),
    ],
)
def test_winograd_family_on_odd_sides_and_batch_two(rules, pad, form, rtol, transforms):
    """Each Winograd form with its rule for other sides, through the pass: the roofline
    takes Winograd for a wide conv with an odd-sided output, computed on the next size the
    form tiles (even; a multiple of 4 for F(4x4, 3x3)) and cropped; the values are the
    direct conv's within the form's tolerance.  ``transforms``: the convs of its input
    transform (F(4x4)'s is separable: down the rows, then along them, each side's padding
    in its own pass).  Two matmuls: the tile product and the output transform (the
    weight transform is folded by the pass)."""
    x, w = tensor("x", (2, 96, 15, 14)), const((96, 96, 3, 3), seed=3)
    mod = module([x], lambda bb, x: R.nn.relu(bb.emit(R.nn.conv2d(x, w, padding=1))))
    new, report = tvm_eqsat.optimize(mod, "llvm", rules=rules, cost_model="roofline")
    applied = report.functions["main"].rules_applied
    assert applied.get(pad) and applied.get(form), applied
    ops = relax_ops(new)
    assert ops["relax.strided_slice"] == 1 and ops["relax.nn.conv2d"] == transforms and ops["relax.matmul"] == 2, ops
    assert_close(mod, new, rtol=rtol)


@pytest.mark.parametrize("kernel, tile", [((1, 7), "F(2, 7)"), ((3, 1), "F(4, 3)")])
def test_one_dimensional_winograd_through_the_pass(kernel, tile):
    """winograd_1d through the pass: the roofline takes the form of a wide 1 x r (r x 1)
    conv whose output is 15 long along the kernel's axis, computed on the next multiple of
    the tile and cropped, at batch 2; the report names the form, and the values are the
    direct conv's within the family's tolerance.  One conv left: the input transform.  (Both
    tables and both axes here; every rule alone: test_rule_fires_and_preserves_values.)"""
    r, along_rows = max(kernel), kernel[0] == 1
    x = tensor("x", (2, 96, 9, 15) if along_rows else (2, 96, 15, 9))
    w = const((96, 96, *kernel), seed=3)
    pad = (0, r // 2) if along_rows else (r // 2, 0)
    mod = module([x], lambda bb, x: R.nn.relu(bb.emit(R.nn.conv2d(x, w, padding=pad))))
    new, report = tvm_eqsat.optimize(mod, "llvm", rules=["winograd_1d"], cost_model="roofline")
    f = report.functions["main"]
    name = f"conv2d-winograd-{kernel[0]}x{kernel[1]}"
    assert f.rules_applied.get(name) and f.rules_applied.get(name + "-pad"), f.rules_applied
    assert f"1 conv as Winograd {tile} along one axis" in f.changes, f.changes
    ops = relax_ops(new)
    assert ops["relax.strided_slice"] == 1 and ops["relax.nn.conv2d"] == 1 and ops["relax.matmul"] == 2, ops
    assert_close(mod, new, rtol=1e-4)


def test_toom_cook_tables_compute_the_correlation_exactly():
    """tables.toom_cook's F(m, r) at the family's points: A^T [(G g) * (B^T d)] is the
    correlation of d with g (to float64 rounding); repeated points are refused."""
    from tvm_eqsat.tables import toom_cook

    rng = _rng(0)
    for points, m, r in (([0, 1, -1, 2, -2], 4, 3), ([0, 1, -1, 2, -2, 0.5, -0.5], 2, 7), ([0, 1, -1], 2, 3)):
        at, g, bt = toom_cook(points, m, r)
        d, w = rng.standard_normal(m + r - 1), rng.standard_normal(r)
        direct = np.array([w @ d[i : i + r] for i in range(m)])
        np.testing.assert_allclose(at @ ((g @ w) * (bt @ d)), direct, atol=1e-12)
    with pytest.raises(ValueError, match="distinct"):
        toom_cook([0, 1, 1, 2, -2], 4, 3)


def test_tables_refuse_an_unknown_name_or_shape():
    from tvm_eqsat.tables import table

    assert table("winograd-f2-output", (4, 16), "float32").dtype == np.float32
    with pytest.raises(ValueError, match="unknown table"):
        table("winograd-f6", (4, 16), "float32")
    with pytest.raises(ValueError, match="has shape"):
        table("winograd-f2-output", (16, 4), "float32")


def test_merge_groups_are_the_compatible_kernels_on_one_input():
    """The groups the *-merge-all rules act on: matmuls on one input with constant 2-D
    weights, in graph order, with cumulative split indices; a matmul on a runtime
    weight, or on another input, stays out."""
    from tvm_eqsat.merge_groups import merge_groups

    x, y, wt = tensor("x", (3, 4)), tensor("y", (3, 4)), tensor("w", (4, 7))

    def body(bb, x, y, w):
        outs = [
            R.matmul(x, const((4, 2), seed=0)),
            R.matmul(x, const((4, 3), seed=1)),
            R.matmul(x, w),
            R.matmul(x, const((4, 5), seed=2)),
            R.matmul(y, const((4, 2), seed=3)),
        ]
        return relax.Tuple([bb.emit(o) for o in outs])

    g = graph.graph_from_block(module([x, y, wt], body)["main"].body.blocks[0])
    groups = merge_groups(g)
    assert len(groups) == 1, groups
    inp, members, indices, axis = groups[0]
    assert g.nodes[inp].op == "Input" and g.inputs[g.nodes[inp].attrs[0]].name == "x"
    widths = [g.nodes[g.nodes[m].inputs[1]].ty.shape[1] for m in members]
    assert widths == [2, 3, 5] and indices == [2, 5] and axis == 1


# ---- more guard violations for the rules with several guards: (rule, builder) pairs


def _enlarge_pair(stride2=1, const1=True, dil=1, k1=1, pad1=0, pad2=1):
    x, wt = tensor("x", (1, 3, 9, 9)), tensor("w", (2, 3, k1, k1))
    w1 = const((2, 3, k1, k1)) if const1 else wt

    def body(bb, x, *_):
        a = bb.emit(R.nn.conv2d(x, w1, padding=pad1, dilation=dil))
        b = bb.emit(R.nn.conv2d(x, const((4, 3, 3, 3), seed=1), strides=stride2, padding=pad2, dilation=dil))
        return relax.Tuple([a, b])

    return module([x] + ([] if const1 else [wt]), body), ["conv2d-enlarge"]


def _bn_variant(training=False, axis=1, const_var=True):
    x, vt = tensor("x", (1, 3, 6, 6)), tensor("v", (4 if axis == 1 else 6,))
    c = 4 if axis == 1 else 6
    gamma, beta, mean, var = _bn_consts(c, 0)
    var = var if const_var else vt

    def body(bb, x, *_):
        y = bb.emit(R.nn.conv2d(x, const((4, 3, 3, 3)), padding=1))
        bn = bb.emit(R.nn.batch_norm(y, gamma, beta, mean, var, axis=axis, training=training))
        return R.nn.relu(relax.TupleGetItem(bn, 0))

    return module([x] + ([] if const_var else [vt]), body), ["conv2d-batch-norm-fold"]


def _slice_variant(axis, begin):
    a, b = tensor("a", (3, 2)), tensor("b", (3, 5))

    def body(bb, a, b):
        cat = bb.emit(R.concat([a, b], axis=1))
        return R.nn.relu(bb.emit(R.strided_slice(cat, axes=[axis], begin=[begin], end=[begin + 1])))

    return module([a, b], body), ["strided-slice-of-concat"]


def _assoc_nonconst_middle():
    x, bt = tensor("x", (3, 4)), tensor("b", (4, 5))
    body = lambda bb, x, b: R.matmul(bb.emit(R.matmul(x, b)), const((5, 2)))  # noqa: E731
    return module([x, bt], body), ["matmul-assoc-const"]


def _add_weights_other_inputs():
    x, y = tensor("x", (1, 3, 6, 6)), tensor("y", (1, 3, 6, 6))
    w = const((4, 3, 3, 3))
    body = lambda bb, x, y: R.add(bb.emit(R.nn.conv2d(x, w)), bb.emit(R.nn.conv2d(y, w)))  # noqa: E731
    return module([x, y], body), ["conv2d-add-weights"]


def _rows_other_batch():
    x1, x2, w = tensor("x1", (2, 3, 5)), tensor("x2", (3, 3, 5)), tensor("w", (5, 4))
    body = lambda bb, x1, x2, w: relax.Tuple([bb.emit(R.matmul(x1, w)), bb.emit(R.matmul(x2, w))])  # noqa: E731
    return module([x1, x2, w], body), ["matmul-merge-rows"]


def _depthwise():
    x = tensor("x", (1, 4, 6, 6))
    body = lambda bb, x: R.nn.conv2d(x, const((8, 1, 3, 3)), groups=4)  # noqa: E731
    return module([x], body), ["conv2d-merge-groups"]


def _grouped_convs():
    x = tensor("x", (1, 4, 6, 6))

    def body(bb, x):
        return relax.Tuple([bb.emit(R.nn.conv2d(x, const((8, 1, 3, 3), seed=i), groups=4)) for i in range(3)])

    return module([x], body), ["conv2d-merge-all"]


def _matmul_other_out_dtype():
    x = tensor("x", (3, 4))

    def body(bb, x):
        a = bb.emit(R.matmul(x, const((4, 5), seed=0)))
        b = bb.emit(R.matmul(x, const((4, 6), seed=1), out_dtype="float64"))
        return relax.Tuple([a, b])

    return module([x], body), ["matmul-merge-all"]


MORE_NEGATIVES = {
    "merge-all-grouped-convs": _grouped_convs,
    "merge-all-other-out-dtype": _matmul_other_out_dtype,
    "enlarge-other-stride": lambda: _enlarge_pair(stride2=2),
    "enlarge-weight-not-constant": lambda: _enlarge_pair(const1=False),
    "enlarge-pad-not-a-multiple-of-dilation": lambda: _enlarge_pair(dil=2, pad2=3),
    "enlarge-odd-difference-symmetric-pad": lambda: _enlarge_pair(k1=2, pad1=0, pad2=1),
    "bn-fold-training": lambda: _bn_variant(training=True),
    "bn-fold-axis-not-channels": lambda: _bn_variant(axis=2),
    "bn-fold-var-not-constant": lambda: _bn_variant(const_var=False),
    "slice-other-axis": lambda: _slice_variant(0, 1),
    "slice-negative-begin": lambda: _slice_variant(1, -3),
    "assoc-middle-not-constant": _assoc_nonconst_middle,
    "add-weights-other-inputs": _add_weights_other_inputs,
    "merge-groups-depthwise": _depthwise,
    "merge-rows-other-batch": _rows_other_batch,
}


@pytest.mark.parametrize("case", sorted(MORE_NEGATIVES))
def test_rule_does_not_fire_on_other_guard_violations(case):
    mod, rules = MORE_NEGATIVES[case]()
    _, applied, _ = rewritten_variant(mod, rules)
    assert not any(applied.get(r, 0) for r in rules), applied


def _fire(x_shape=(1, 8, 9, 9), squeeze=4, expand=(6, 5), seed=0):
    """SqueezeNet's fire module as PyTorch imports it: squeeze 1x1 + bias + relu, then
    expand 1x1 and expand 3x3 (padding 1), each + bias + relu, concatenated."""
    x = tensor("x", x_shape)
    cin = x_shape[1]

    def conv_relu(bb, inp, cout, cin, k, s):
        y = bb.emit(R.nn.conv2d(inp, const((cout, cin, k, k), seed=s), padding=k // 2))
        bias = bb.emit(R.reshape(const((cout,), seed=s + 100), (1, cout, 1, 1)))
        return bb.emit(R.nn.relu(bb.emit(R.add(y, bias))))

    def body(bb, x):
        s = conv_relu(bb, x, squeeze, cin, 1, seed)
        e1 = conv_relu(bb, s, expand[0], squeeze, 1, seed + 1)
        e3 = conv_relu(bb, s, expand[1], squeeze, 3, seed + 2)
        return R.concat([e1, e3], axis=1)

    return module([x], body)


def _runtime_ops(mod) -> dict[str, int]:
    """Native ops of main's block that are not computed from constants alone."""
    g = graph.graph_from_block(mod["main"].body.blocks[0])
    counts: dict[str, int] = {}
    for nid in g.reachable():
        n = g.nodes[nid]
        if not n.is_const and n.op not in ("Input", "Const"):
            counts[n.op] = counts.get(n.op, 0) + 1
    return counts


@pytest.mark.parametrize("seed", [0, 1])
def test_fire_module_expands_become_one_conv(seed):
    """conv2d-enlarge pads the 1x1 expand to 3x3, conv2d-merge merges it with the 3x3,
    the biases and relus move before the split (add-over-split, relu-over-split) and
    concat-of-split removes the split/concat pair: squeeze conv + one expand conv."""
    mod = _fire(seed=seed)
    assert _runtime_ops(mod)["Conv2d"] == 3
    new, report = tvm_eqsat.optimize(mod, "llvm")
    fn = report.functions["main"]
    assert fn.changed and fn.cost_after < fn.cost_before
    for rule in ("conv2d-enlarge", "conv2d-merge", "add-over-split", "relu-over-split", "concat-of-split"):
        assert fn.rules_applied.get(rule, 0) > 0, fn.rules_applied
    ops = _runtime_ops(new)
    assert ops["Conv2d"] == 2 and "Concat" not in ops and "Split" not in ops, ops
    assert ops["Relu"] == 2 and ops["Add"] == 2, ops
    assert_close(mod, new, rtol=1e-5)


@pytest.mark.parametrize("target", ["llvm", {"kind": "llvm", "mcpu": "znver5"}])
def test_the_pass_takes_the_rational_gelu_where_erf_is_a_library_call(target):
    """A matmul and its GELU (BERT's feed-forward): on llvm, where the erf is a libm call per
    element (``cost.Machine.libm_ns``), the pass returns the GELU as multiplies, adds and a
    divide, within erf_rational's tolerance; on CUDA the family is off and the GELU stays."""
    import tvm

    x, w = tensor("x", (16, 32)), const((32, 64), seed=1)
    mod = module([x], lambda bb, x: R.nn.gelu(bb.emit(R.matmul(x, w))))
    new, report = tvm_eqsat.optimize(mod, tvm.target.Target(target), flow="tuned")
    fn = report.functions["main"]
    assert fn.changed and fn.rules_applied.get("erf-rational", 0) > 0
    assert "1 GELU or erf computed with a rational erf, no libm call" in fn.changes
    ops = relax_ops(new)
    assert "relax.nn.gelu" not in ops and "relax.erf" not in ops and "relax.divide" in ops
    assert_close(mod, new, rtol=1e-5)
    cuda, _ = tvm_eqsat.optimize(mod, tvm.target.Target({"kind": "cuda", "arch": "sm_90"}), flow="tuned")
    assert "relax.nn.gelu" in relax_ops(cuda)


@pytest.mark.parametrize("target", ["llvm", {"kind": "llvm", "mcpu": "znver5"}])
def test_the_pass_takes_tvms_fast_softmax_where_exp_is_a_library_call(target):
    """Attention's scores and softmax: on llvm, where each exp is a libm call
    (``cost.Machine.libm_ns``), the pass calls TOPI's fast softmax, the very kernel TVM's
    FastMathTransform makes (so one tuning record serves both), within its tolerance; a second
    softmax of the same type calls the same kernel, and both read back as fast softmaxes; on
    CUDA the family is off."""
    import tvm
    import tvm_ffi

    from tvm_eqsat.graph import module_graphs

    x, w = tensor("x", (2, 4, 8, 16)), const((16, 8), seed=1)

    def body(bb, x):
        scores = bb.emit(R.matmul(x, w))
        first = bb.emit(R.nn.softmax(scores, -1))
        return R.add(first, bb.emit(R.nn.softmax(bb.emit(R.multiply(scores, relax.const(2.0))), 3)))

    mod = module([x], body)
    new, report = tvm_eqsat.optimize(mod, tvm.target.Target(target), flow="tuned")
    fn = report.functions["main"]
    assert fn.changed and fn.rules_applied.get("softmax-fast", 0) > 0
    assert "2 softmaxes computed with TOPI's fast exp, no libm call" in fn.changes
    ops = relax_ops(new)
    assert "relax.nn.softmax" not in ops and ops["relax.call_tir"] == 2, ops
    kernels = [gv for gv in new.get_global_vars() if gv.name_hint.startswith("eqsat_fast_softmax")]
    assert len(kernels) == 1, new.get_global_vars()
    stock = relax.transform.FastMathTransform()(mod)
    assert tvm_ffi.structural_equal(new[kernels[0]], stock[stock.get_global_var("fast_softmax")])
    assert_close(mod, new, rtol=1e-5)
    (graph,) = module_graphs(new)  # read back as the op (te_ops.made_call), with its axis
    assert sorted(graph.nodes[i].attrs for i in graph.reachable() if graph.nodes[i].op == "FastSoftmax") == [(3,), (3,)]
    cuda, _ = tvm_eqsat.optimize(mod, tvm.target.Target({"kind": "cuda", "arch": "sm_90"}), flow="tuned")
    assert relax_ops(cuda)["relax.nn.softmax"] == 2


def test_a_fast_softmax_whose_kernel_name_is_taken_leaves_the_function_unchanged():
    """A module that already holds a function under the name of the pass's fast-softmax
    kernel (an earlier run's output, made in another process): the rewrite is refused, loudly,
    and the module comes back as it was."""
    import tvm

    from tvm_eqsat import te_ops

    x = tensor("x", (4, 16))
    mod = module([x], lambda bb, x: R.nn.softmax(x, -1))
    gv = te_ops.call("fast_softmax", relax.Var("y", relax.TensorType((4, 16), "float32")), 1).args[0]
    taken = mod.clone()
    taken[tvm.ir.GlobalVar(gv.name_hint)] = te_ops._BY_NAME[gv.name_hint]
    new, report = tvm_eqsat.optimize(taken, "llvm", flow="tuned")
    fn = report.functions["main"]
    assert not fn.changed and any("already has a function named" in a for a in report.alarms), report.alarms
    assert relax_ops(new)["relax.nn.softmax"] == 1


def test_only_a_call_of_the_kernel_this_process_made_reads_back_as_its_op():
    """``te_ops.made_call`` knows the pass's own TE kernels by their GlobalVar: a call of
    another function under the same name (another process's output, a user's function) is not
    read as a fast softmax, and stays an opaque call."""
    import tvm

    from tvm_eqsat import ops, te_ops

    x = relax.Var("x", relax.TensorType((4, 16), "float32"))
    ours = te_ops.call("fast_softmax", x, 1)
    other = relax.call_tir(tvm.ir.GlobalVar(ours.args[0].name_hint), ours.args[1], ours.ty_args[0])
    assert te_ops.made_call(ours)[0] == "fast_softmax" and te_ops.made_call(ours)[2] == (1,)
    assert ops.native_spec(ours).name == "FastSoftmax"
    assert te_ops.made_call(other) is None and ops.native_spec(other) is None


def test_erf_rational_writes_the_fit_scripts_coefficients_and_error():
    """rules/erf_rational.egg's coefficients are scripts/fit_erf.py's fit, as it prints them, and
    evaluated in float32 as the rule's ops compute them they stay within 5e-7 of erf, and the
    GELU they make within 1.5e-6 of GELU, however far out."""
    import re
    from pathlib import Path

    from helpers import load_script
    from scipy.special import erf

    fit_erf = load_script("fit_erf")
    text = (Path(__file__).resolve().parent.parent / "rules" / "erf_rational.egg").read_text()
    rule = text[text.index("(rule ((= e (Erf x))") :]
    written = [float(v) for v in re.findall(r"\(Full \(vec-empty\) (-?[0-9.e+-]+) \"float32\"\)", rule)]
    p, q = fit_erf.fit()
    # Horner's form writes each polynomial from its highest coefficient down; the fit's least
    # squares round differently on different CPUs (LAPACK's kernels: 7e-7 relative apart between
    # the Zen 5 VM that wrote them and a Zen 3 one), so the same to 1e-5; the bounds below are exact
    np.testing.assert_allclose(written, [float(f"{c:.9e}") for c in (*p[::-1], *q[::-1])], rtol=1e-5, atol=0)
    x = np.linspace(-6, 6, 200_001).astype(np.float32)
    got = fit_erf.evaluate(x, written[6::-1], written[:6:-1], np.float32).astype(np.float64)
    assert np.abs(got - erf(x.astype(np.float64))).max() < 5e-7
    # the result is clipped to [-1, 1], as the rule writes it: far out, GELU is x * 0 or x * 1
    # exactly (unclipped, 4e-7 past -1 made GELU's error grow as 2e-7 * |x|), and within 1.5e-6
    assert "(Clip (Div (Mul z p) q) -1.0 1.0)" in rule
    far = fit_erf.evaluate(np.array([-1e4, 1e4], np.float32), written[6::-1], written[:6:-1], np.float32)
    assert far.tolist() == [-1.0, 1.0]
    assert fit_erf.gelu_error(written[6::-1], written[:6:-1]) < 1.5e-6


@pytest.mark.parametrize("share", [None, 0.5])
def test_the_pass_splits_a_strided_3x3_conv_into_phases_where_its_strided_rate_was_measured(monkeypatch, share):
    """A stride-2 3x3 conv (ResNet-50's layer-3 one, half size): where a CPU's calibration holds
    ``strided_3x3_share`` (0.5 here), the pass runs it as four stride-1 convs over the input's
    2x2 phases; TVM makes four slice kernels and four conv kernels, the last with the three adds
    fused, and the values are the strided conv's within rounding.  Without the figure the conv
    stays as it is."""
    import tvm

    from tvm_eqsat import cost, tune

    memory = {"bandwidth_gbs": 16.0, "cache_gbs": 63.0, **({"strided_3x3_share": share} if share else {})}
    monkeypatch.setattr(
        cost, "measured_cpus", lambda: {"znver3": (256, {"matmul": 58.0, "conv": 40.0, "depthwise": 31.0}, memory)}
    )
    x, w = tensor("x", (1, 128, 28, 28)), const((128, 128, 3, 3), seed=3)
    mod = module([x], lambda bb, x: R.nn.relu(bb.emit(R.nn.conv2d(x, w, strides=2, padding=1))))
    zen3 = tvm.target.Target({"kind": "llvm", "mcpu": "znver3"})
    new, report = tvm_eqsat.optimize(mod, zen3, flow="tuned")
    fn = report.functions["main"]
    if share is None:
        assert not fn.changed and "relax.strided_slice" not in relax_ops(new), fn.changes
        return
    assert fn.rules_applied.get("conv2d-stride2-polyphase") and fn.changed, fn.rules_applied
    assert "1 strided 3x3 conv run at stride 1 over the input's 2x2 phases" in fn.changes
    ops = relax_ops(new)
    assert ops["relax.strided_slice"] == 4 and ops["relax.nn.conv2d"] == 4 and ops["relax.add"] == 3, ops
    kernels = sorted(gv.name_hint for gv in tune.fuse_for_tuning(new, zen3).get_global_vars() if gv.name_hint != "main")
    assert sum(k.startswith("strided_slice") for k in kernels) == 4 and len(kernels) == 8, kernels
    assert any("conv2d" in k and k.count("add") == 3 and "relu" in k for k in kernels), kernels
    assert_close(mod, new, rtol=1e-5)


def test_the_pass_subsamples_a_strided_1x1_conv_where_its_strided_rate_was_measured():
    """A stride-2 1x1 shortcut conv (ResNet-50's 256 -> 512 at 28x28, half size here): on Zen 5,
    whose strided rate was measured (``cost.Machine.strided_1x1_share``), the pass subsamples
    the input and runs the conv at stride 1; TVM fuses the two slices into one copy kernel and
    the values are the strided conv's; on generic x86-64, not measured, the conv stays."""
    import tvm

    from tvm_eqsat import tune

    x, w = tensor("x", (1, 256, 28, 28)), const((512, 256, 1, 1), seed=2)
    mod = module([x], lambda bb, x: R.nn.relu(bb.emit(R.nn.conv2d(x, w, strides=2))))
    zen5 = tvm.target.Target({"kind": "llvm", "mcpu": "znver5"})
    new, report = tvm_eqsat.optimize(mod, zen5, flow="tuned")
    fn = report.functions["main"]
    assert fn.rules_applied.get("conv2d-1x1-strided-subsample") and fn.changed, fn.rules_applied
    assert "1 strided 1x1 conv run at stride 1 on a subsampled input" in fn.changes, fn.changes
    ops = relax_ops(new)
    assert ops["relax.strided_slice"] == 2 and ops["relax.nn.conv2d"] == 1, ops
    kernels = [gv.name_hint for gv in tune.fuse_for_tuning(new, zen5).get_global_vars()]
    assert sorted(k for k in kernels if k != "main") == ["fused_conv2d_relu", "fused_strided_slice_strided_slice1"]
    assert_close(mod, new, rtol=1e-5)
    generic, _ = tvm_eqsat.optimize(mod, tvm.target.Target("llvm"), flow="tuned")
    assert "relax.strided_slice" not in relax_ops(generic)


@pytest.mark.parametrize("ratio", [None, 0.6])
def test_the_pass_runs_a_residual_block_channel_blocked_where_the_blocked_conv_was_measured(monkeypatch, ratio):
    """A bottleneck block (1x1, 3x3, 1x1 convs, bias adds, ReLUs, the residual add): where a
    CPU's calibration holds ``nchwc_conv`` (0.6 here), the pass with the nchwc family runs
    the whole block in NCHW16c, with one layout copy in and one out (a reshape and a
    transpose each, which FuseOps fuses with the element-wise ops beside them); the three
    convs are TOPI's conv2d_NCHWc, the bias adds, ReLUs and the residual add fused into them
    or into the copy out (five kernels: three convs, two copies), and the values are the
    NCHW block's within rounding.
    Without the figure, nothing changes."""
    import tvm
    import tvm_ffi

    from tvm_eqsat import cost, tune
    from tvm_eqsat.graph import block_from_graph, module_graphs
    from tvm_eqsat.measure import module_workloads

    memory = {"bandwidth_gbs": 16.0, "cache_gbs": 63.0, **({"nchwc_conv": ratio} if ratio else {})}
    monkeypatch.setattr(
        cost, "measured_cpus", lambda: {"znver3": (256, {"matmul": 58.0, "conv": 40.0, "depthwise": 31.0}, memory)}
    )
    x = tensor("x", (1, 32, 14, 14))

    def body(bb, x):
        y = x
        for i, (k, out) in enumerate([(1, 64), (3, 64), (1, 32)]):
            w, b = const((out, int(y.ty.shape[1]), k, k), seed=i), const((1, out, 1, 1), seed=10 + i)
            y = bb.emit(R.add(bb.emit(R.nn.conv2d(y, w, padding=k // 2)), b))
            y = bb.emit(R.nn.relu(y) if i < 2 else R.nn.relu(bb.emit(R.add(y, x))))
        return y

    mod = module([x], body)
    zen3 = tvm.target.Target({"kind": "llvm", "mcpu": "znver3"})
    new, report = tvm_eqsat.optimize(mod, zen3, flow="tuned", rules=["nchwc"])
    fn = report.functions["main"]
    if ratio is None:
        assert not fn.changed, fn.changes
        return
    assert "3 of 3 convs run in NCHW16c" in fn.changes, fn.changes
    assert "2 layout copies into or out of NCHW16c added" in fn.changes, fn.changes
    ops = relax_ops(new)
    assert "relax.nn.conv2d" not in ops and ops["relax.call_tir"] == 3, ops
    kernels = sorted(gv.name_hint for gv in tune.fuse_for_tuning(new, zen3).get_global_vars() if gv.name_hint != "main")
    assert len(kernels) == 5 and sum("eqsat_conv2d_nchwc" in k for k in kernels) == 3, kernels
    assert_close(mod, new, rtol=1e-5)
    # read back (the harvest of a tuning database, the learned model): the three calls are
    # blocked convs again, the first two with their bias add and ReLU after them, and the graph
    # rebuilds the same block
    (graph,) = module_graphs(new)
    counts = graph.op_counts()
    assert counts["Conv2dNCHWc"] == 3 and not any(k.startswith("Opaque") for k in counts), counts
    convs = [w for w in module_workloads(new) if w.op == "Conv2dNCHWc"]
    assert len(convs) == 3 and sum(bool(w.epilogue) for w in convs) >= 2, convs
    assert tvm_ffi.structural_equal(block_from_graph(graph), new["main"].body.blocks[0], map_free_vars=True)


def test_the_pass_runs_an_inverted_residual_block_channel_blocked_depthwise_conv_included(monkeypatch):
    """MobileNet-v2's block (a 1x1 expand conv, a depthwise 3x3, a 1x1 projection, bias adds,
    ReLU6s, the residual add): where a CPU's calibration holds ``nchwc_conv``, the pass with
    the nchwc family blocks the depthwise conv too (depthwise-conv2d-nchwc, priced as the NCHW
    one), so the whole block runs in NCHW16c with one copy in and one out, where a depthwise
    conv left in NCHW costs two more.  The values are the NCHW block's within rounding, and the
    depthwise call reads back as its op."""
    import tvm

    from tvm_eqsat import cost
    from tvm_eqsat.graph import module_graphs

    memory = {"bandwidth_gbs": 16.0, "cache_gbs": 63.0, "nchwc_conv": 0.6}
    monkeypatch.setattr(
        cost, "measured_cpus", lambda: {"znver3": (256, {"matmul": 58.0, "conv": 40.0, "depthwise": 31.0}, memory)}
    )
    x = tensor("x", (1, 32, 14, 14))

    def body(bb, x):
        y = x
        for i, (k, out, groups) in enumerate([(1, 96, 1), (3, 96, 96), (1, 32, 1)]):
            c = int(y.ty.shape[1])
            w, b = const((out, c // groups, k, k), seed=i), const((1, out, 1, 1), seed=10 + i)
            y = bb.emit(R.add(bb.emit(R.nn.conv2d(y, w, padding=k // 2, groups=groups)), b))
            y = bb.emit(R.clip(y, 0.0, 6.0) if i < 2 else R.add(y, x))
        return y

    mod = module([x], body)
    zen3 = tvm.target.Target({"kind": "llvm", "mcpu": "znver3"})
    new, report = tvm_eqsat.optimize(mod, zen3, flow="tuned", rules=["nchwc"])
    fn = report.functions["main"]
    assert fn.rules_applied.get("depthwise-conv2d-nchwc"), fn.rules_applied
    assert "3 of 3 convs run in NCHW16c" in fn.changes, fn.changes
    assert "2 layout copies into or out of NCHW16c added" in fn.changes, fn.changes
    assert "relax.nn.conv2d" not in relax_ops(new)
    assert_close(mod, new, rtol=1e-5)
    (graph,) = module_graphs(new)
    counts = graph.op_counts()
    assert counts["DepthwiseConv2dNCHWc"] == 1 and counts["Conv2dNCHWc"] == 2, counts
