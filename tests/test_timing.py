"""timing.kernel_times: where a build's time goes, per function the VM calls."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from helpers import module, tensor
from tvm import relax

from tvm_eqsat import timing


def test_kernel_times_names_each_kernel_and_weighs_them():
    a, b, c = tensor("a", (256, 256)), tensor("b", (256, 256)), tensor("c", (4,))
    mod = module(
        [a, b, c], lambda bb, a, b, c: relax.Tuple([bb.emit(relax.op.matmul(a, b)), bb.emit(relax.op.add(c, c))])
    )
    target = tvm.target.Target("llvm")
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype("float32") for s in ((256, 256), (256, 256), (4,))]
    both = timing.kernel_times({"a": ex, "b": ex}, tvm.cpu(0), inputs, rounds=3, runs=5)
    assert set(both) == {"a", "b"} and set(both["a"]) == set(both["b"])
    us = both["a"]
    matmul = [k for k in us if "matmul" in k]
    add = [k for k in us if k.startswith("add")]
    assert len(matmul) == 1 and len(add) == 1, sorted(us)
    assert all(t >= 0 for t in us.values())
    # 2 x 256^3 FLOPs against 4 additions: the matmul must dominate
    assert us[matmul[0]] > 10 * us[add[0]]


def _bias_add(n: int = 1 << 16):
    """A module adding a constant vector to its input: a run reads the constant's memory."""
    x = relax.Var("x", relax.TensorType((n,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            w = relax.const(np.arange(n, dtype="float32"))
            out = bb.emit_output(bb.emit(relax.op.add(x, w)))
        bb.emit_func_output(out)
    return tvm.compile(bb.get(), target="llvm"), [np.ones(n, dtype="float32")]


def test_cold_timing_evicts_the_caches_before_every_timed_run(monkeypatch):
    ex, inputs = _bias_add()
    evictions = []
    monkeypatch.setattr(timing, "evict_caches", lambda: evictions.append(1))
    vm, args, sampler, number = timing.tvm_sampler(ex, tvm.cpu(0), inputs, min_ms=1000.0, cold=True)
    assert number == timing.COLD_MAX_RUNS  # a 1 s sample of a microsecond kernel, capped
    probes = len(evictions)
    assert probes == 3  # the three one-run probes that calibrate ``number``
    ms = sampler()
    assert len(evictions) == probes + number and ms > 0
    np.testing.assert_allclose(vm["main"](*args).numpy(), inputs[0] + np.arange(1 << 16))
    # warm timing evicts nothing; kernel_times evicts before each run only when cold
    timing.tvm_sampler(ex, tvm.cpu(0), inputs, min_ms=1.0)[2]()
    timing.kernel_times({"a": ex}, tvm.cpu(0), inputs, rounds=1, runs=2)
    assert len(evictions) == probes + number
    timing.kernel_times({"a": ex}, tvm.cpu(0), inputs, rounds=2, runs=3, cold=True)
    assert len(evictions) == probes + number + 6


def test_cold_timing_is_refused_off_the_cpu_and_the_eviction_spans_the_last_level_cache():
    ex, inputs = _bias_add()
    with pytest.raises(ValueError, match="CPU caches"):
        timing.tvm_sampler(ex, tvm.cuda(0), inputs, min_ms=1.0, cold=True)
    assert timing.last_level_cache_bytes() >= 1 << 20
    timing.evict_caches()
    timing.evict_caches()
    buffer = timing._evictor[1].numpy()  # every element touched, by whichever thread
    assert buffer.nbytes == 2 * timing.last_level_cache_bytes() and (buffer == buffer[0]).all() and buffer[0] >= 2
