"""scripts/bench_conv_matmul.py: every 1x1 conv as a matmul, and the conv/matmul choice pairs."""

from __future__ import annotations

import numpy as np
import pytest
import tvm
from helpers import load_script
from tvm import relax

from tvm_eqsat import tune, tuning_db

pytest.importorskip("torch")  # the script imports the benchmark, which imports the model zoo


def _convs(c: int = 16, size: int = 8):
    """relu(conv1x1(x)) then a 3x3 conv: the first becomes a matmul, the second stays."""
    rng = np.random.default_rng(0)
    x = relax.Var("x", relax.TensorType((1, c, size, size), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(relax.op.nn.conv2d(x, relax.const(rng.standard_normal((c, c, 1, 1)).astype("float32"))))
            y = bb.emit(relax.op.nn.relu(y))
            w3 = relax.const(rng.standard_normal((c, c, 3, 3)).astype("float32"))
            out = bb.emit_output(bb.emit(relax.op.nn.conv2d(y, w3, padding=[1, 1, 1, 1])))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.slow  # an experiment's script, 26 s of tuning on a 2-core Zen 3
def test_only_the_1x1_conv_becomes_a_matmul_and_its_pair_has_both_forms_records(tmp_path):
    script = load_script("bench_conv_matmul")
    mod = _convs()
    forced, taken = script.as_matmuls(mod)
    assert taken == 1
    text = forced.script()
    assert "R.matmul" in text and text.count("R.nn.conv2d") == 1
    target = tune.tuning_target(tvm.target.Target("llvm"))
    tune.tune(forced, target, tmp_path / "db", trials=2)
    tune.tune(mod, target, tmp_path / "db", trials=2)  # the conv form of the 1x1 conv too
    db = tuning_db.open_database(tmp_path / "db")
    pairs = script.conv_pairs("m", mod, target, db)
    assert len(pairs) == 1  # the 3x3 conv is no pair
    pair = pairs[0]
    assert (pair["x"], pair["w"], pair["calls"], pair["epilogue"]) == ([1, 16, 8, 8], [16, 16, 1, 1], 1, ["Relu"])
    assert len(pair["conv_us"]) == 1 and all(us > 0 for _, us in pair["conv_us"] + pair["matmul_us"])
    assert any("matmul" in name for name, _ in pair["matmul_us"])
    # nothing tuned: no pair (a record missing leaves the conv out, no zero)
    assert script.conv_pairs("m", mod, target, tuning_db.open_database(tmp_path / "empty")) == []
