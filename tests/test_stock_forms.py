"""scripts/stock_forms.py: TVM's graph passes run in fresh processes, each distinct module kept."""

import pytest
import tvm
from helpers import load_script

sf = load_script("stock_forms")


@pytest.mark.slow  # an experiment's script, two fresh TVM processes: 24 s on a 2-core Zen 3
def test_each_distinct_module_is_kept_once_under_its_hash(tmp_path):
    """Two fresh processes on small NASRNN: one or two distinct modules (TVM's
    CombineParallelMatmul picks one of two in each process), each saved under its module hash
    and loadable, and the hashes are those of the modules."""
    forms = sf.stock_tvm_forms("nasrnn", "generic", 2, str(tmp_path), small=True)
    assert 1 <= len(forms) <= 2
    for digest, path in forms.items():
        mod = tvm.ir.load_json(open(path).read())
        assert isinstance(mod, tvm.IRModule) and sf.benchmark.module_hash(mod) == digest


def test_the_page_compares_eqsat_with_the_fastest_stock_tvm_module():
    rows = [
        {"variant": "stock", "module_hash": "a" * 16, "median_ms": 0.6, "p10_ms": 0.59, "p90_ms": 0.62},
        {"variant": "stock+tvm (1)", "module_hash": "b" * 16, "median_ms": 0.48, "p10_ms": 0.47, "p90_ms": 0.5},
        {"variant": "stock+tvm (2)", "module_hash": "c" * 16, "median_ms": 0.54, "p10_ms": 0.53, "p90_ms": 0.6},
        {"variant": "eqsat", "module_hash": "d" * 16, "median_ms": 0.4, "p10_ms": 0.39, "p90_ms": 0.41},
    ]
    doc = {"model": "m", "target": "t", "command": "c", "date": "d", "machine": "x", "processes": 6, "forms": 2}
    page = sf.markdown({**doc, "work_dir": "w", "trials": 32, "repeat": 40, "rows": rows})
    assert "tvm-eqsat ran 1.200x" in page and "| stock+tvm (2) | cccccccccc | 0.5400 |" in page
