"""Rewrite rules as data: ``rules/<family>.egg`` files of named egglog rules.

Each file is one family (a unit the search applies as one action).  An entry is
an egglog ``rewrite``, ``birewrite`` or ``rule`` form with a ``:name``; guards use
the e-graph analyses ``shape``, ``dtype`` and ``const``.  The loader checks the
names and adds the ``:ruleset`` clause, so rule files stay free of plumbing.

A rule whose query matches two or more separate tensor terms (two kernels on one
input, say) is a *multi-pattern* rule, TENSAT's costly kind.  Each family ``F`` is
declared as ``F.single`` and ``F.multi`` combined into ``F``, so saturation can
stop the multi-pattern rules after a number of rounds (TENSAT's ``k_multi``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .language import signatures
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

    @property
    def creates(self) -> set[str]:
        """The tensor constructors on the rule's right-hand side (what it can add)."""
        expr = _sexpr(self.text)
        rhs = expr[2] if len(expr) > 2 else []
        names = set(signatures())
        found: set[str] = set()

        def walk(term) -> None:
            if isinstance(term, list):
                if term and isinstance(term[0], str) and term[0] in names:
                    found.add(term[0])
                for t in term:
                    walk(t)

        walk(rhs)
        return found

    @property
    def multi(self) -> bool:
        """Does the query match more than one separate tensor term?"""
        return len(query_roots(self.text)) > 1


@dataclass(frozen=True)
class RuleLibrary:
    rules: tuple[Rule, ...]

    @property
    def families(self) -> list[str]:
        return sorted({r.family for r in self.rules})

    def program(self) -> str:
        """egglog text declaring the rulesets and adding the rules.

        Each rule is a ruleset of its own (``rule_set``), so one rule can be run
        alone (to find which one an alarm comes from); ``F.single`` and ``F.multi``
        combine a family's single- and multi-pattern rules, and ``F`` combines both."""
        lines = []
        for r in self.rules:
            lines.append(f"(ruleset {rule_set(r.name)})")
            lines.append(r.text[:-1].rstrip() + f" :ruleset {rule_set(r.name)})")
        for f in self.families:
            for part, is_multi in ((single(f), False), (multi(f), True)):
                members = " ".join(rule_set(r.name) for r in self.rules if r.family == f and r.multi == is_multi)
                lines.append(f"(unstable-combined-ruleset {part} {members})")
            lines.append(f"(unstable-combined-ruleset {f} {single(f)} {multi(f)})")
        return "\n".join(lines)

    def in_ruleset(self, ruleset: str) -> list[Rule]:
        """The rules a ruleset runs: a family, its single or multi part, or one rule."""
        family, _, part = ruleset.partition(".")
        return [
            r
            for r in self.rules
            if ruleset == rule_set(r.name)
            or (r.family == family and (not part or part == ("multi" if r.multi else "single")))
        ]

    def select(self, names: Iterable[str]) -> RuleLibrary:
        """Only the named families or rules."""
        wanted = set(names)
        known = {r.name for r in self.rules} | set(self.families)
        unknown = wanted - known
        if unknown:
            raise ValueError(f"unknown rule or family {sorted(unknown)}; known families: {self.families}")
        return RuleLibrary(tuple(r for r in self.rules if r.name in wanted or r.family in wanted))


def rule_set(name: str) -> str:
    """The ruleset holding only the rule ``name``."""
    return f"{name}.rule"


def single(family: str) -> str:
    """The ruleset of a family's single-pattern rules."""
    return f"{family}.single"


def multi(family: str) -> str:
    """The ruleset of a family's multi-pattern rules."""
    return f"{family}.multi"


def _sexpr(text: str):
    """Parse one s-expression into nested lists of atoms (strings kept whole)."""
    tokens = re.findall(r'"[^"]*"|[()]|[^\s()]+', text)
    stack: list[list] = [[]]
    for tok in tokens:
        if tok == "(":
            stack.append([])
        elif tok == ")":
            done = stack.pop()
            stack[-1].append(done)
        else:
            stack[-1].append(tok)
    return stack[0][0]


def query_roots(form: str) -> list[str]:
    """Variables bound to tensor-constructor patterns that no other pattern contains.

    A ``rewrite`` has one root; a ``rule`` query ``(= e1 (Matmul x w1 od)) (= e2
    (Matmul x w2 od))`` has two (e1, e2).  Patterns on lists (``TCons``) and facts
    on analyses or relations are not tensor terms.
    """
    expr = _sexpr(form)
    if expr[0] != "rule":
        return ["lhs"]
    tensor_ctors = set(signatures())
    bound: dict[str, list] = {}
    for fact in expr[1]:
        if isinstance(fact, list) and len(fact) == 3 and fact[0] == "=":
            a, b = fact[1], fact[2]
            var, term = (a, b) if isinstance(a, str) else (b, a)
            if isinstance(var, str) and isinstance(term, list) and term and term[0] in tensor_ctors:
                bound[var] = term

    def atoms(term):
        for t in term:
            if isinstance(t, list):
                yield from atoms(t)
            else:
                yield t

    inside = {a for term in bound.values() for a in atoms(term[1:])}
    return [v for v in bound if v not in inside]


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
