"""scripts/seed_spread.py: one row per seed, the spread over them, the module it timed."""

from __future__ import annotations

import json

import pytest
from helpers import load_script

pytest.importorskip("torch")


def test_spread_is_median_min_max_of_the_seeds():
    spread = load_script("seed_spread").spread
    got = spread([{"speedup": 0.87}, {"speedup": 1.09}, {"speedup": 1.06}])
    assert got == {"seeds": 3, "median": 1.06, "min": 0.87, "max": 1.09}


def test_main_writes_one_row_per_seed_and_the_timed_module(tmp_path, monkeypatch):
    script = load_script("seed_spread")
    timed = []

    def fake_one_seed(name, mods, inputs, target, work_dir, trials, seed, repeat, per_kernel):
        # the tuning and timing are tune.tune and timing's (tested there); here: what reaches them
        timed.append((work_dir, seed, trials, script.module_hash(mods["eqsat"])))
        return {
            "model": name,
            "seed": seed,
            "work_dir": work_dir,
            "tune_s": 0.0,
            "stock_ms": 1.0,
            "eqsat_ms": 1.0 / (1.0 + seed),
            "speedup": 1.0 + seed,
        }

    monkeypatch.setattr(script, "one_seed", fake_one_seed)
    argv = [
        "--model",
        "nasrnn",
        "--small",
        "--trials",
        "2",
        "--seeds",
        "3",
        "5",
        "--work-root",
        str(tmp_path / "dbs"),
        "--out-dir",
        str(tmp_path),
    ]
    assert script.main(argv) == 0
    result = json.loads((tmp_path / "seeds-llvm-nasrnn-small-t2.json").read_text())
    assert [(r["seed"], r["speedup"]) for r in result["rows"]] == [(3, 4.0), (5, 6.0)]
    assert result["spread"] == {"seeds": 2, "median": 5.0, "min": 4.0, "max": 6.0}
    # a database per seed, and the hash recorded is the module that was timed
    assert [w for w, *_ in timed] == [str(tmp_path / "dbs" / f"llvm-nasrnn-small-t2-s{s}") for s in (3, 5)]
    assert {h for *_, h in timed} == {result["eqsat_module_hash"]}
    assert result["predicted_speedup"] > 1.0  # the pass changes nasrnn-small
    assert result["command"].endswith(" ".join(argv))
