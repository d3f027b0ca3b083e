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
