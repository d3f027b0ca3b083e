"""scripts/family_gain.py: which kernels its --kernels option records."""

from __future__ import annotations

from helpers import load_script


def test_differing_kernels_keeps_the_kernels_one_build_lacks_and_the_largest_differences():
    times = {
        "eqsat": {"conv": 900.0, "relu": 50.0, "pool": 10.0, "slice": 5.0},
        "eqsat+subsample": {"conv": 600.0, "relu": 49.0, "pool": 30.0, "copy": 70.0},
    }
    kept = load_script("family_gain").differing_kernels(times, 2)
    assert list(kept) == ["eqsat", "eqsat+subsample"]
    assert kept["eqsat"] == {"copy": 0.0, "slice": 5.0, "conv": 900.0, "pool": 10.0}
    assert kept["eqsat+subsample"] == {"copy": 70.0, "slice": 0.0, "conv": 600.0, "pool": 30.0}
