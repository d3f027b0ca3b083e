"""The measured safeguard: a rewrite is kept only if its build times faster."""

import logging

import pytest
import tvm
from helpers import module, relax_ops, tensor
from tvm import relax, tirx
from tvm.relax import op as R

from tvm_eqsat import optimize, speed_check
from tvm_eqsat.speed_check import SpeedCheck

TARGET = tvm.target.Target("llvm")


def _matmuls(n: int):
    """``x @ w`` plus zero times ``n - 1`` more chained 192x192 matmuls: one result, a latency
    that grows with ``n``."""
    x = tensor("x", (192, 192))
    w = tensor("w", (192, 192))

    def body(bb, x, w):
        out = h = bb.emit(R.matmul(x, w))
        for _ in range(n - 1):
            h = bb.emit(R.matmul(h, w))
        if n > 1:
            out = bb.emit(R.add(out, R.multiply(h, relax.const(0.0, "float32"))))
        return out

    return module([x, w], body)


def test_faster_build_is_kept_and_slower_one_rejected():
    """Timings far apart (1 matmul against 12) decide both ways, whichever is 'after'."""
    slow, fast = _matmuls(12), _matmuls(1)
    gain = speed_check.check(slow, fast, TARGET, "default", rounds=5, min_ms=1.0)
    assert gain.reason == "" and gain.kept and gain.speedup > 3
    loss = speed_check.check(fast, slow, TARGET, "default", rounds=5, min_ms=1.0)
    assert loss.reason == "" and not loss.kept and loss.speedup < 0.34
    assert "rejected" in speed_check.describe(loss) and loss.to_dict()["speedup"] == loss.speedup


def test_a_rewrite_whose_build_computes_other_outputs_is_rejected(caplog):
    """As fast, but wrong (a miscompiled tuned build looks like this): rejected, and said so."""
    x, w = tensor("x", (192, 192)), tensor("w", (192, 192))
    wrong = module([x, w], lambda bb, x, w: R.nn.relu(R.matmul(x, w)))
    with caplog.at_level(logging.WARNING, logger="tvm_eqsat"):
        result = speed_check.check(_matmuls(12), wrong, TARGET, "default", rounds=3, min_ms=1.0)
    assert result.reason == "" and not result.kept and result.max_rel_diff > 0.1
    assert "outputs differ" in speed_check.describe(result)
    assert "computes other outputs than the original's" in caplog.text


def test_check_that_cannot_run_keeps_the_rewrite_and_says_why(caplog):
    n = tirx.Var("n", "int64")
    x = relax.Var("x", relax.TensorType((n, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.relu(x))
        bb.emit_func_output(out)
    symbolic = bb.get()
    with caplog.at_level(logging.WARNING, logger="tvm_eqsat"):
        result = speed_check.check(symbolic, symbolic, TARGET, "default")
    assert result.kept and "symbolic" in result.reason and result.speedup is None
    assert any("speed check did not run" in r.getMessage() for r in caplog.records)
    no_main = _matmuls(1)
    no_main = tvm.IRModule({tvm.ir.GlobalVar("entry"): no_main["main"]})
    result = speed_check.check(no_main, no_main, TARGET, "default")
    assert result.kept and "no 'main'" in result.reason


def _redundant():
    x = tensor("x", (4, 8))

    def body(bb, x):
        return R.nn.relu(R.nn.relu(x))

    return module([x], body)


@pytest.mark.parametrize("kept", [True, False])
def test_pass_keeps_or_drops_its_rewrite_as_the_check_says(monkeypatch, kept):
    calls = []

    def fake_check(before, after, target, flow, **kwargs):
        calls.append((flow, kwargs))
        return SpeedCheck(1.0, 0.5 if kept else 2.0, kept, 0.1)

    monkeypatch.setattr(speed_check, "check", fake_check)
    mod = _redundant()
    new, report = optimize(mod, "llvm", speed_check=True, flow="default", tune_dir="/tmp/db", tune_trials=4)
    assert calls == [("default", {"tune_dir": "/tmp/db", "trials": 4})]
    assert report.speed_check["kept"] is kept and report.functions["main"].changed is kept
    if kept:
        assert relax_ops(new) == {"relax.nn.relu": 1}
    else:
        tvm.ir.assert_structural_equal(new, mod)
        assert any("rejected" in s for s in report.functions["main"].skipped)
    assert "speed check" in report.summary()


def test_no_check_without_the_option_or_without_a_change(monkeypatch):
    monkeypatch.setattr(speed_check, "check", lambda *a, **k: pytest.fail("the speed check ran"))
    _, report = optimize(_redundant(), "llvm")
    assert report.speed_check is None
    _, report = optimize(_matmuls(1), "llvm", speed_check=True, rules=[])  # nothing to rewrite, nothing to time
    assert report.speed_check is None


@pytest.mark.parametrize("kwargs", [{"speed_check": "yes"}, {"tune_trials": 0}, {"tune_dir": 5}])
def test_bad_speed_check_options_are_clear_errors(kwargs):
    with pytest.raises(ValueError):
        optimize(_redundant(), "llvm", **kwargs)
