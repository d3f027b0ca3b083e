"""rules/RULES.md, the rule set on one page, matches the rule files it is generated from."""

from helpers import load_script

page = load_script("rules_page")


def test_rules_page_is_current():
    assert page.PAGE.read_text() == page.page(), "rules/RULES.md is stale: run python scripts/rules_page.py"


def test_every_rule_has_a_proof_sketch_and_a_test():
    text = page.page()
    assert "**missing**" not in text and "**none**" not in text


def test_a_comment_belongs_to_the_rules_below_it_not_to_the_file_header():
    text = """; the family's header

(rewrite (A x) (B x) :name "one")

; why two holds. More detail.
(rewrite (C x) (D x) :name "two")
(rewrite (E x) (F x) :name "three")
"""
    comments = page.rule_comments(text)
    assert comments == {"one": "", "two": "why two holds. More detail.", "three": "why two holds. More detail."}
    assert page.first_sentence(comments["two"]) == "why two holds."


# how the README's family table says when a family runs by default, as the set of
# (target kind, build flow, the layouts the cost model prices apart from NCHW) where it runs
_PRICED = (frozenset(), frozenset({"NHWC"}), frozenset({"NCHW16c"}), frozenset({"NHWC", "NCHW16c"}))
_COMBOS = [(k, f, p) for k in ("llvm", "cuda") for f in ("tuned", "default") for p in _PRICED]
_WHEN = {
    "on": set(_COMBOS),
    "opt-in": set(),
    "llvm default flow": {c for c in _COMBOS if c[:2] == ("llvm", "default")},
    "both llvm flows": {c for c in _COMBOS if c[0] == "llvm"},
    "llvm tuned flow": {c for c in _COMBOS if c[:2] == ("llvm", "tuned")},
    "llvm tuned flow, where the cost model prices blocked convs": {
        c for c in _COMBOS if c[:2] == ("llvm", "tuned") and "NCHW16c" in c[2]
    },
    "on, except CUDA's default flow": {c for c in _COMBOS if c[:2] != ("cuda", "default")},
    "where the cost model has learned layouts": {c for c in _COMBOS if "NHWC" in c[2]},
}


def test_the_readme_family_table_matches_the_library_and_the_defaults():
    """Every family in the README's table, with its rule count and when it runs by default
    (``family_defaults.default_families``), so the summary cannot drift from the code."""
    from collections import Counter

    from tvm_eqsat.family_defaults import default_families
    from tvm_eqsat.rules import load_library

    text = (page.ROOT / "README.md").read_text()
    lines = text[text.index("| family | rules | default |") :].splitlines()[2:]
    rows = {}
    for line in lines:
        if not line.startswith("|"):
            break
        name, count, when = (c.strip() for c in line.strip("|").split("|")[:3])
        rows[name.strip("`")] = (int(count), when)
    assert {f: n for f, (n, _) in rows.items()} == dict(Counter(r.family for r in load_library().rules))
    for family, (_, when) in rows.items():
        runs = {c for c in _COMBOS if family in default_families(*c)}
        assert runs == _WHEN[when], f"{family}: the README says {when!r}"
