"""scripts/cold_kernels.py: each kernel under the warm and the cold database, run warm and cold."""

from __future__ import annotations

import pytest
import tvm
from helpers import load_script

from tvm_eqsat import measure, tune, tuning_db
from tvm_eqsat.graph import TensorTy
from tvm_eqsat.workload import Workload

pytest.importorskip("torch")  # the script imports the benchmark, which imports the model zoo

F32 = "float32"
MATMUL = Workload("Matmul", (F32,), (TensorTy((128, 128), F32), TensorTy((128, 128), F32)))


def test_every_kernel_gets_each_databases_record_and_both_runs_and_the_sums_count_calls(tmp_path):
    script = load_script("cold_kernels")
    mod = measure.workload_module(MATMUL)
    target = tvm.target.Target("llvm")
    databases = {
        "warm": tune.tune(mod, target, tmp_path / "warm", trials=2),
        "cold": tune.tune(mod, target, tmp_path / "cold", trials=2, cold_cache=True),
    }
    rows = script.variant_kernels(mod, target, databases, 3)
    assert len(rows) == 1 and rows[0]["calls"] == 1
    assert all(rows[0][c] > 0 for c in script.COLUMNS)
    doubled = [{**rows[0], "calls": 2}]
    assert script.totals(doubled) == {c: round(2 * rows[0][c] / 1e3, 3) for c in script.COLUMNS}
    # a kernel one database lacks: no total for that database, the other's still summed
    partial = script.variant_kernels(
        mod, target, {"warm": databases["warm"], "cold": tuning_db.open_database(tmp_path / "empty")}, 3
    )
    t = script.totals(partial)
    assert t["cold_run_cold"] is None and t["warm_run_cold"] > 0
    md = script.markdown(
        {
            "model": "m",
            "target": "llvm",
            "machine": {"machine": "CPU", "cores_used": 2},
            "date": "d",
            "command": "c",
            "repeat": 3,
            "totals": {"v": script.totals(rows)},
            "kernels": {"v": rows},
        }
    )
    assert "| v |" in md and rows[0]["kernel"] in md
