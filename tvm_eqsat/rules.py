"""Rewrite rules as data: ``rules/<family>.egg`` files of named egglog rules.

Each file is one family (a unit the search applies as one action).  An entry is
an egglog ``rewrite``, ``birewrite`` or ``rule`` form with a ``:name``; guards use
the e-graph analyses ``shape``, ``dtype`` and ``const``.  The loader checks the
names and adds the ``:ruleset`` clause, so rule files stay free of plumbing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from .paths import data_dir

RULE_FORMS = ("rewrite", "birewrite", "rule")
_NAME = re.compile(r':name\s+"([^"]+)"')


def rules_dir() -> Path:
    """The shipped ``rules/`` folder (beside the package, editable or installed)."""
    return data_dir("rules")


@dataclass(frozen=True)
class Rule:
    name: str
    family: str
    text: str  # the egglog form as written


@dataclass(frozen=True)
class RuleLibrary:
    rules: tuple[Rule, ...]

    @property
    def families(self) -> list[str]:
        return sorted({r.family for r in self.rules})

    def program(self) -> str:
        """egglog text declaring one ruleset per family and adding its rules."""
        lines = [f"(ruleset {f})" for f in self.families]
        for r in self.rules:
            lines.append(r.text[:-1].rstrip() + f" :ruleset {r.family})")
        return "\n".join(lines)

    def select(self, names: Iterable[str]) -> "RuleLibrary":
        """Only the named families or rules."""
        wanted = set(names)
        known = {r.name for r in self.rules} | set(self.families)
        unknown = wanted - known
        if unknown:
            raise ValueError(f"unknown rule or family {sorted(unknown)}; known families: {self.families}")
        return RuleLibrary(tuple(r for r in self.rules if r.name in wanted or r.family in wanted))


def split_forms(text: str) -> list[str]:
    """Top-level s-expressions of a file, comments removed."""
    forms, depth, start, i, n = [], 0, None, 0, len(text)
    out = []
    while i < n:  # strip ; comments outside strings
        c = text[i]
        if c == '"':
            j = text.index('"', i + 1)
            out.append(text[i : j + 1])
            i = j + 1
            continue
        if c == ";":
            while i < n and text[i] != "\n":
                i += 1
            continue
        out.append(c)
        i += 1
    text = "".join(out)
    in_str = False
    for i, c in enumerate(text):
        if c == '"':
            in_str = not in_str
        if in_str:
            continue
        if c == "(":
            if depth == 0:
                start = i
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ')' in rule file")
            if depth == 0:
                forms.append(text[start : i + 1])
    if depth != 0:
        raise ValueError("unbalanced '(' in rule file")
    return forms


def parse_rules(text: str, family: str) -> list[Rule]:
    rules = []
    for form in split_forms(text):
        head = form[1:].split(None, 1)[0]
        if head not in RULE_FORMS:
            raise ValueError(f"family {family}: only {RULE_FORMS} forms are allowed, got ({head} ...)")
        if ":ruleset" in form:
            raise ValueError(f"family {family}: rules must not name a ruleset (the file is the family)")
        m = _NAME.search(form)
        if not m:
            raise ValueError(f"family {family}: rule without :name: {form[:80]}")
        rules.append(Rule(m.group(1), family, form))
    return rules


def load_library(directory: str | Path | None = None) -> RuleLibrary:
    directory = Path(directory) if directory is not None else rules_dir()
    rules: list[Rule] = []
    for path in sorted(directory.glob("*.egg")):
        rules.extend(parse_rules(path.read_text(), path.stem))
    names = [r.name for r in rules]
    dupes = {n for n in names if names.count(n) > 1}
    if dupes:
        raise ValueError(f"duplicate rule names {sorted(dupes)}")
    return RuleLibrary(tuple(rules))
