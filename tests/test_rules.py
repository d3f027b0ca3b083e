"""Every rule: it fires on random shapes that satisfy its guards and the rewritten
graph computes the same values through TVM; it does not fire where a guard is false."""

import numpy as np
import pytest
from tvm import relax
from tvm.relax import op as R

from tvm_eqsat.rules import load_library

from helpers import assert_close, const, module, rewritten_variant, tensor


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


def _commute(op, name):
    def build(seed, positive):
        x = tensor("x", (2, 3))
        y = tensor("y", (2, 3))
        first = const((2, 3), seed=seed) if positive else y
        return module([x, y], lambda bb, x, y: op(first, x)), [name]

    return build


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


def matmul_merge_extend(seed, positive):
    return _matmuls(seed, positive, 3), ["matmul-merge", "matmul-merge-extend"]


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

    rules = ["matmul-merge", "add-commute-const", "add-over-split-last-axis"]
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
    "add-commute-const": _commute(R.add, "add-commute-const"),
    "mul-commute-const": _commute(R.multiply, "mul-commute-const"),
    "matmul-merge": matmul_merge,
    "matmul-merge-extend": matmul_merge_extend,
    "conv2d-merge": conv2d_merge,
    "conv2d-merge-extend": conv2d_merge_extend,
    "add-over-split": add_over_split,
    "add-over-split-last-axis": add_over_split_last_axis,
    "relu-over-split": _over_split(R.nn.relu, "relu-over-split"),
    "gelu-over-split": _over_split(R.nn.gelu, "gelu-over-split"),
}


def test_every_rule_has_a_test():
    assert {r.name for r in load_library().rules} == set(BUILDERS)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_rule_fires_and_preserves_values(name, seed):
    mod, rules = BUILDERS[name](seed, True)
    new, applied, changed = rewritten_variant(mod, rules)
    assert applied.get(name, 0) > 0, applied
    assert changed
    assert_close(mod, new, rtol=1e-5)


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_rule_does_not_fire_when_guard_is_false(name):
    mod, rules = BUILDERS[name](0, False)
    _, applied, _ = rewritten_variant(mod, rules)
    assert applied.get(name, 0) == 0, applied
