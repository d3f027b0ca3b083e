"""The tensor language in egglog: its constructors, loader and analyses, as one prelude.

Every Relax value is an e-class of sort ``T``.  Native ops are constructors whose
arguments are their tensor inputs followed by their attributes (ints, floats,
strings, ``IVec`` integer vectors; booleans as 0/1).  Variadic inputs (concat,
tuples, opaque children) are cons lists of sort ``TList``.  Three analyses live in
the e-graph so rules can be guarded by them: ``shape`` and ``dtype`` (functions
without a merge, so an unsound union fails loudly instead of silently), and the
``const`` relation (the value depends only on constants and weights).

The fixed parts are egglog files (``rules/language/core.egg``: sorts, loader,
analysis declarations; ``analysis.egg``: shape, dtype and refusal rules).  What is
one rule per op or per rank is generated here: a constructor, loader rule and
constant propagation for every op of ``ops.SPECS``, and the per-rank rules of numpy
broadcasting, permute_dims, pad and element counts.
"""

from __future__ import annotations

import functools
import re

from . import ops
from .graph import CONST, INPUT, OPAQUE, TGET, TUPLE_NODE
from .paths import data_dir

T, TLIST = "T", "TList"
MAX_RANK = 6  # the per-rank rules cover tensors up to this rank


def egglog_sort(kind: str) -> str:
    return "i64" if kind == ops.BOOL else kind


@functools.cache
def signatures() -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """Constructor name -> (child sorts, attribute kinds) for the whole language."""
    sigs: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
        INPUT: ((), (ops.I64,)),
        CONST: ((), (ops.I64,)),
        OPAQUE: ((TLIST,), (ops.I64,)),
        TUPLE_NODE: ((TLIST,), ()),
        TGET: ((T,), (ops.I64,)),
    }
    for spec in ops.SPECS:
        children = (TLIST,) if spec.n_inputs is None else (T,) * spec.n_inputs
        sigs[spec.name] = (children, tuple(kind for _, kind in spec.attrs))
    return sigs


def arg_sorts(name: str) -> list[str]:
    """The egglog sorts of a constructor's arguments, in order (Opaque: index first)."""
    children, attrs = signatures()[name]
    if name == OPAQUE:  # (Opaque index children)
        return [ops.I64, TLIST]
    return list(children) + [egglog_sort(a) for a in attrs]


def _egg(name: str) -> str:
    return (data_dir("rules") / "language" / name).read_text()


# ---------------------------------------------------------------- generated: one per op


def _op_rules(name: str) -> list[str]:
    """A constructor's declaration, its loader rule (a row of ``load-NAME`` becomes the
    term, its children named by Ref / LRef) and its constant propagation."""
    sorts = arg_sorts(name)
    cols, load_args, guards, const_conds, pattern = [], [], [], [], []
    for i, sort in enumerate(sorts):
        var = f"a{i}"
        cols.append("i64" if sort in (T, TLIST, "IVec") else sort)
        load_args.append(var)
        if sort == T:
            pattern.append(f"(Ref {var})")
            const_conds.append(f"(const c{i})")
        elif sort == TLIST:
            pattern.append(f"(LRef {var} 0)")
            const_conds.append(f"(const-list c{i})")
        elif sort == "IVec":
            guards.append(f"(= v{i} (IV {var}))")
            pattern.append(f"v{i}")
        else:
            pattern.append(var)
    out = [
        f"(constructor {name} ({' '.join(sorts)}) {T})",
        f"(relation load-{name} (i64 {' '.join(cols)}))",
        f"(rule ((load-{name} id {' '.join(load_args)}) {' '.join(guards)}) "
        f"((union (Ref id) ({name} {' '.join(pattern)}))) :ruleset load)",
    ]
    match_args = " ".join(f"c{i}" if s in (T, TLIST) else f"_x{i}" for i, s in enumerate(sorts))
    if const_conds:  # a value computed only from constants is constant
        out.append(f"(rule ((= e ({name} {match_args})) {' '.join(const_conds)}) ((const e)) :ruleset analysis)")
    elif name in ops.BY_NAME:  # an op without tensor inputs (full) is a constant
        out.append(f"(rule ((= e ({name} {match_args}))) ((const e)) :ruleset analysis)")
    return out


def _elementwise_rules() -> list[str]:
    """Unary element-wise ops keep their input's shape and dtype (astype: its shape);
    binary ones are ``binop`` facts, typed by analysis.egg and the broadcast rules."""
    a = ":ruleset analysis"
    rules = []
    for spec in ops.SPECS:
        if spec.kind != ops.ELEMWISE or spec.name in ("Reshape", "BroadcastTo"):  # shape from the attribute
            continue
        if spec.n_inputs == 1:
            pat = f"({spec.name} x{''.join(f' _a{i}' for i in range(len(spec.attrs)))})"
            rules.append(f"(rule ((= e {pat}) (= s (shape x))) ((set (shape e) s)) {a})")
            if spec.name != "Astype":
                rules.append(f"(rule ((= e {pat}) (= d (dtype x))) ((set (dtype e) d)) {a})")
        elif spec.n_inputs == 2:
            rules.append(f"(rule ((= e ({spec.name} x y))) ((binop e x y)) {a})")
    return rules


# ---------------------------------------------------------------- generated: one per rank


def _broadcast_rules(max_rank: int = MAX_RANK) -> list[str]:
    """Numpy broadcasting of binary element-wise ops, one rule per pair of ranks, and a
    refusal per dimension.

    Dimensions are right-aligned; a missing or unit dimension takes the other's, so each
    output dimension is the max of the two; two dimensions that are neither equal nor 1
    are a ``type-error`` (no valid Relax program broadcasts them)."""
    a = ":ruleset analysis"
    rules = []
    for rx in range(max_rank + 1):
        for ry in range(max_rank + 1):
            r = max(rx, ry)
            parts = []
            for i in range(r):
                xi = f"(vec-get sx {i - (r - rx)})" if i >= r - rx else None
                yi = f"(vec-get sy {i - (r - ry)})" if i >= r - ry else None
                parts.append(f"(max {xi} {yi})" if xi and yi else (xi or yi))
            rules.append(
                f"(rule ((binop e x y) (= sx (shape x)) (= sy (shape y)) (= {rx} (vec-length sx)) "
                f"(= {ry} (vec-length sy))) ((set (shape e) (vec-of {' '.join(parts)}))) {a})"
            )
    for i in range(1, max_rank + 1):  # the i-th dimension from the right
        rules.append(
            f"(rule ((binop e x y) (= sx (shape x)) (= sy (shape y)) (<= {i} (vec-length sx)) "
            f"(<= {i} (vec-length sy)) (= p (vec-get sx (- (vec-length sx) {i}))) "
            f"(= q (vec-get sy (- (vec-length sy) {i}))) (!= p q) (!= (min p q) 1)) "
            f'((type-error e "broadcast dimensions differ")) {a})'
        )
    return rules


def _rank_rules(max_rank: int = MAX_RANK) -> list[str]:
    """permute_dims gathers its input's dimensions by the axes; pad grows each dimension
    by its (before, after) widths; ``numel`` multiplies a vector's elements."""
    a = ":ruleset analysis"
    rules = []
    for rank in range(1, max_rank + 1):
        dims = " ".join(f"(vec-get s (vec-get p {i}))" for i in range(rank))
        rules.append(
            f"(rule ((= e (Permute x p)) (= s (shape x)) (= {rank} (vec-length p))) "
            f"((set (shape e) (vec-of {dims}))) {a})"
        )
    for rank in range(1, max_rank + 1):
        dims = " ".join(f"(+ (vec-get s {i}) (+ (vec-get p {2 * i}) (vec-get p {2 * i + 1})))" for i in range(rank))
        rules.append(
            f"(rule ((= e (Pad x p)) (= s (shape x)) (= {rank} (vec-length s))) ((set (shape e) (vec-of {dims}))) {a})"
        )
    for rank in range(max_rank + 1):
        prod = "1"
        for i in range(rank):
            prod = f"(* {prod} (vec-get v {i}))"
        rules.append(f"(rule ((need-numel v) (= {rank} (vec-length v))) ((set (numel v) {prod})) {a})")
    return rules


# ---------------------------------------------------------------- the prelude


@functools.cache
def language() -> str:
    """Declarations, loader rules and analyses: the fixed prelude of every e-graph."""
    out = [_egg("core.egg")]
    for name in signatures():
        out.extend(_op_rules(name))
    out.append(_egg("analysis.egg"))
    out.extend(_elementwise_rules())
    out.extend(_broadcast_rules())
    out.extend(_rank_rules())
    return "\n".join(out)


def typed_constructors() -> set[str]:
    """Constructors whose shape the analyses compute from their operands (a rule that
    creates any other has no type for it: the soundness checks cannot see it)."""
    names = set(signatures())
    typed: set[str] = set()
    for form in _one_line(language()).splitlines():
        if form.startswith("(rule (") and "(set (shape e)" in form:
            query = form[: form.index("(set (shape e)")]
            typed.update(re.findall(r"\((\w+)", query))
            if "(binop e x y)" in query:
                typed.update(s.name for s in ops.SPECS if s.kind == ops.ELEMWISE and s.n_inputs == 2)
    return typed & names


def _one_line(text: str) -> str:
    """The text with comments dropped and each top-level form on one line."""
    lines = [line.split(";", 1)[0].rstrip() for line in text.splitlines()]
    return "".join(" " + line.strip() if line.startswith(" ") else "\n" + line for line in lines if line.strip())
