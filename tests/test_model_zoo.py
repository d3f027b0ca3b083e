"""The benchmark model zoo: every small variant imports, compiles, matches PyTorch
eager, and survives the pass with unchanged numbers; the full-size models (slow)
import with the op mix their architecture implies."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import tvm  # noqa: E402
from tvm import relax  # noqa: E402

import tvm_eqsat  # noqa: E402
from tvm_eqsat import models  # noqa: E402

# LLVM -O0 builds the same Relax/TIR ~4x faster (inception-v3 small: 1.2 s instead of
# 6.5 s), which keeps this file within a minute; the O3 build is checked in a slow test.
TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2, "opt-level": 0})
TARGET_O3 = tvm.target.Target({"kind": "llvm", "num-cores": 2})
SUITE = list(models.SUITE)


@functools.cache
def small(name: str) -> models.Model:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return models.SMALL[name]()


def run(mod: tvm.IRModule, inputs, target=TARGET) -> list[np.ndarray]:
    """The stock fused pipeline of the target (what benchmarks compare against)."""
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    vm = relax.VirtualMachine(ex, tvm.cpu())
    out = vm["main"](*[tvm.runtime.tensor(x) for x in inputs])
    if isinstance(out, tvm.runtime.Tensor):
        return [out.numpy()]
    return [o.numpy() for o in out]


@functools.cache
def tvm_outputs(name: str) -> tuple:
    m = small(name)
    return tuple(run(m.mod, m.inputs))


def assert_close(ref, got, rtol: float):
    """Relative to each output's largest magnitude: random weights make activations large."""
    assert len(ref) == len(got)
    for a, b in zip(ref, got):
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        scale = max(float(np.abs(a).max()), 1e-30)
        err = float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max()) / scale
        assert err <= rtol, f"relative error {err:.3g}"


def test_registry():
    assert len(SUITE) == 10 and set(SUITE) <= set(models.MODELS)
    assert set(models.SMALL) == set(models.MODELS)
    assert {"bert-small", "resnet-block"} <= set(models.MODELS)


@pytest.mark.parametrize("name", SUITE)
def test_small_matches_pytorch(name):
    m = small(name)
    assert all(x.shape[0] == 1 for x in m.inputs)  # batch 1
    ref = m.reference()
    assert all(r.dtype == np.float32 for r in ref)
    assert_close(ref, list(tvm_outputs(name)), rtol=1e-4)


@pytest.mark.parametrize("name", SUITE)
def test_small_optimize_keeps_numbers(name):
    m = small(name)
    new, report = tvm_eqsat.optimize(m.mod, "llvm")
    fn = report.functions["main"]
    assert not report.alarms, report.alarms  # soundness alarms, failed validations, internal errors
    assert fn.enodes > 0 and fn.cost_after <= fn.cost_before
    # saturation reaches its fixpoint under the default node and time limits
    assert fn.stop_reason == "saturated" and fn.enodes <= 20000, (fn.stop_reason, fn.enodes)
    if not fn.changed:
        tvm.ir.assert_structural_equal(new, m.mod)
        return
    assert_close(list(tvm_outputs(name)), run(new, m.inputs), rtol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITE)
def test_small_matches_pytorch_llvm_o3(name):
    m = small(name)
    assert_close(m.reference(), run(m.mod, m.inputs, TARGET_O3), rtol=1e-4)


def test_small_variants_are_deterministic():
    a, b = models.SMALL["nasrnn"](), models.SMALL["nasrnn"]()
    tvm.ir.assert_structural_equal(a.mod, b.mod)
    assert all(np.array_equal(x, y) for x, y in zip(a.inputs, b.inputs))


# ------------------------------------------------------------------ full size, import only


def _calls(mod: tvm.IRModule) -> list:
    return [
        b.value
        for block in mod["main"].body.blocks
        for b in block.bindings
        if isinstance(b.value, relax.Call) and isinstance(b.value.op, tvm.ir.Op)
    ]


def _counts(calls) -> dict[str, int]:
    """Relax op counts (without the ``relax.`` prefix) and a few architecture markers."""
    out: dict[str, int] = {}
    lhs: dict = {}
    for c in calls:
        name = c.op.name[len("relax.") :]
        out[name] = out.get(name, 0) + 1
        if name == "nn.conv2d":
            groups = int(c.attrs.groups)
            if groups == 32:
                out["conv2d groups=32"] = out.get("conv2d groups=32", 0) + 1
            if groups > 1 and groups == int(c.args[0].ty.shape[1]):
                out["depthwise conv2d"] = out.get("depthwise conv2d", 0) + 1
        if name == "matmul":
            lhs.setdefault(c.args[0], []).append(c)
    out["matmuls sharing their input, 8 at a time"] = sum(1 for v in lhs.values() if len(v) == 8)
    return out


def _input_shapes(mod: tvm.IRModule) -> list[tuple]:
    return [tuple(int(d) for d in p.ty.shape.values) for p in mod["main"].params]


EXPECT = {
    "bert-base": {"matmul": 97, "nn.softmax": 12, "nn.layer_norm": 25, "nn.gelu": 12},
    "resnet50": {"nn.conv2d": 53, "nn.batch_norm": 53, "nn.max_pool2d": 1},
    "mobilenet-v2": {"nn.conv2d": 52, "depthwise conv2d": 17, "nn.batch_norm": 52, "clip": 35},
    "resnext50": {"nn.conv2d": 53, "conv2d groups=32": 16, "nn.batch_norm": 53, "matmul": 1},
    "inception-v3": {"nn.conv2d": 94, "nn.batch_norm": 94, "concat": 15, "nn.avg_pool2d": 9, "nn.max_pool2d": 4},
    "squeezenet": {"nn.conv2d": 26, "concat": 8, "nn.max_pool2d": 3, "nn.batch_norm": 0},
    "vgg19": {"nn.conv2d": 16, "matmul": 3, "nn.relu": 18, "nn.max_pool2d": 5, "nn.batch_norm": 0},
    "nasnet-a": {
        "nn.conv2d": 216,
        "depthwise conv2d": 90,
        "add": 90,
        "concat": 18,
        "nn.avg_pool2d": 51,
        "nn.max_pool2d": 6,
    },
    "nasrnn": {
        "matmul": 80,
        "matmuls sharing their input, 8 at a time": 10,
        "tanh": 40,
        "sigmoid": 25,
        "nn.relu": 10,
        "multiply": 20,
    },
    "vit-b16": {"nn.conv2d": 1, "matmul": 97, "nn.softmax": 12, "nn.layer_norm": 25, "nn.gelu": 12},
}

INPUT = {
    "bert-base": [(1, 128), (1, 128)],
    "resnet50": [(1, 3, 224, 224)],
    "mobilenet-v2": [(1, 3, 224, 224)],
    "resnext50": [(1, 3, 224, 224)],
    "inception-v3": [(1, 3, 299, 299)],
    "squeezenet": [(1, 3, 224, 224)],
    "vgg19": [(1, 3, 224, 224)],
    "nasnet-a": [(1, 128, 56, 56)],
    "nasrnn": [(1, 512)] * 5,
    "vit-b16": [(1, 3, 224, 224)],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", SUITE)
def test_full_size_import_op_mix(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = models.MODELS[name]()
    assert _input_shapes(m.mod) == INPUT[name]
    counts = _counts(_calls(m.mod))
    assert {k: counts.get(k, 0) for k in EXPECT[name]} == EXPECT[name]
