"""scripts/bench_layers.py builds each layer's forms: the Winograd form is extracted even
where a cost model would not choose it, and computes the direct conv's values."""

import pytest
from helpers import assert_close, load_script, relax_ops

layers = load_script("bench_layers")


@pytest.mark.parametrize("family", sorted(set(layers.FAMILIES) - {"winograd_1d"}))
def test_the_winograd_form_is_extracted_whatever_the_cost(family):
    """A narrow conv with odd sides: no cost model would take Winograd here, the forced
    extraction does (padded to even, cropped back), in each family's form (winograd_nhwc's on
    the layer in NHWC)."""
    mod, _ = layers.conv_layer(4, 7, 6, nhwc=family in layers.NHWC_FAMILIES)
    new = layers.winograd_form(mod, family)
    ops = relax_ops(new)
    assert ops["relax.matmul"] == 3 and ops["relax.strided_slice"] == 1, ops
    # the tile transform (F(4x4)'s in two separable passes); the 3x3 conv is gone
    f4 = family.startswith("winograd_f4") or family in layers.NHWC_FAMILIES
    assert ops["relax.nn.conv2d"] == (2 if f4 else 1)
    assert_close(mod, new, rtol=1e-5)


def test_the_one_dimensional_form_is_extracted_for_its_kernel():
    """winograd_1d on a narrow 3x1 layer with an odd side: its form is extracted (padded to
    the tile, cropped back), the layer's conv is gone, and the values hold."""
    mod, _ = layers.conv_layer(4, 7, 6, kernel=(3, 1))
    new = layers.winograd_form(mod, "winograd_1d", (3, 1))
    ops = relax_ops(new)
    assert ops["relax.matmul"] == 3 and ops["relax.strided_slice"] == 1 and ops["relax.nn.conv2d"] == 1, ops
    assert_close(mod, new, rtol=1e-5)
    assert {layers.kernel_of(s) for s in layers.SHAPES} == {(3, 3), (1, 7), (7, 1), (1, 3), (3, 1)}


def test_markdown_marks_a_wrong_choice():
    row = {
        "layer": "l",
        "shape": [1, 64, 56, 56, 64],
        "direct_ms": 3.0,
        "winograd_ms": 4.0,
        "speedup": 0.75,
        "max_rel_diff": 1e-6,
        "pass_choice": "winograd",
        "cost_model": "roofline",
        "predicted_speedup": 1.5,
        "right_choice": False,
    }
    data = {"flow": "tuned", "trials": 32, "repeat": 15, "commands": ["c"], "machine": {"machine": "m", "cpus": 2}}
    text = layers.markdown({**data, "rows": [row]})
    assert "| l | 64, 56x56, 64 | 3.000 | 4.000 | 0.75x |" in text and "**no**" in text
    assert "cold caches" not in text
    assert "tuned and timed with cold caches" in layers.markdown({**data, "cpu_cache": "cold", "rows": [row]})
    assert "| l | 64, 56x56, 64, 1x7 | 3.000 |" in layers.markdown({**data, "rows": [{**row, "kernel": [1, 7]}]})
    compared = {**row, "compare_family": "winograd", "compare_ms": 5.0, "compare_speedup": 0.6}
    assert "| winograd: 5.000 (0.60x) |" in layers.markdown({**data, "rows": [compared]})


def test_three_way_choice_is_named_and_judged_by_the_fastest_form():
    """With a compared form the pass chooses among three: its described changes name the
    tile size, and the choice is right only where that form ran within 2% of the fastest."""
    f2, f4 = ["3 convs as Winograd F(2x2, 3x3)"], ["1 conv as Winograd F(4x4, 3x3)"]
    assert layers.pass_choice([], "winograd_f4", "winograd") == "direct"
    assert layers.pass_choice(f4, "winograd_f4", "winograd") == "winograd"
    assert layers.pass_choice(f2, "winograd_f4", "winograd") == "compare"
    assert layers.pass_choice(f2, "winograd", "winograd_f4") == "winograd"
    assert layers.pass_choice(f2, "winograd_cl", "winograd") == "winograd"  # two F(2x2) forms: not told apart
    cm = ["1 conv as Winograd F(4x4, 3x3), channel-major"]  # the F(4x4) forms are told apart
    assert layers.pass_choice(cm, "winograd_f4_cm", "winograd_f4") == "winograd"
    assert layers.pass_choice(f4, "winograd_f4_cm", "winograd_f4") == "compare"
    assert layers.pass_choice(cm, "winograd_f4", "winograd_f4_cm") == "compare"
    row = {"direct_ms": 10.0, "winograd_ms": 5.0, "compare_ms": 4.0}
    assert not layers.right_choice({**row, "pass_choice": "winograd"})
    assert layers.right_choice({**row, "pass_choice": "compare"})
    assert layers.right_choice({**row, "compare_ms": 4.95, "pass_choice": "winograd"})  # within 2%
    assert not layers.right_choice({**row, "pass_choice": "direct"})


def test_held_out_choices_scores_each_cost_models_form_against_the_timed_ones():
    """``held_out_choices.py``: a choice is right within 2% of the fastest timed form, and the
    time of the forms chosen is summed over the fastest forms'; the roofline's choice on a
    real layer is one of the forms timed."""
    choices = load_script("held_out_choices")
    layer = {"layer": "vgg19-conv1", "shape": [1, 8, 8, 8, 8], "direct_ms": 3.0, "winograd_ms": 1.0, "compare_ms": 2.0}
    assert choices.source_model(layer["layer"]) == "vgg19"
    picked = choices.choose(layer, "winograd_f4", "winograd", "default", {"kind": "llvm"}, "roofline")
    assert picked in ("direct", "winograd", "compare")
    rows = [
        {**layer, "a": {"choice": "winograd", "right": True}, "b": {"choice": "direct", "right": False}},
        {
            **layer,
            "direct_ms": 1.0,
            "a": {"choice": "compare", "right": False},
            "b": {"choice": "direct", "right": True},
        },
    ]
    assert choices.time_over_best(rows, "a") == (1.0 + 2.0) / (1.0 + 1.0)
    assert choices.time_over_best(rows, "b") == (3.0 + 1.0) / 2.0


def test_cold_cache_is_refused_without_tuning(monkeypatch):
    """Default schedules are not tuned, so there is no cold tuning to ask for."""
    monkeypatch.setattr("sys.argv", ["bench_layers.py", "--flow", "default", "--cold-cache"])
    with pytest.raises(SystemExit) as err:
        layers.main()
    assert err.value.code == 2
