"""The tensor language in egglog, loading a TensorGraph into it, and reading it back.

Every Relax value is an e-class of sort ``T``.  Native ops are constructors whose
arguments are their tensor inputs followed by their attributes (ints, floats,
strings, ``IVec`` integer vectors; booleans as 0/1).  Variadic inputs (concat,
tuples, opaque children) are cons lists of sort ``TList``.  Three analyses live
in the e-graph so rules can be guarded by them: ``shape`` and ``dtype`` (functions
without a merge, so an unsound union fails loudly instead of silently), and the
``const`` relation (the value depends only on constants and weights).

Loading goes through fact files and one rule run: egglog's top-level commands
cost memory superlinear in their number (measured: 2,000 single-term commands
take 330 MB; 20,000 nodes loaded from facts take 0.1 s and 60 MB).
"""

from __future__ import annotations

import functools
import logging
import os
import re
import tempfile
from dataclasses import dataclass

from egglog import bindings

from . import ops
from .graph import CONST, INPUT, OPAQUE, TGET, TUPLE_NODE, TensorGraph, TensorTy, Ty

# egglog logs every table size at INFO when sizes are printed; keep users' logs readable
logging.getLogger("egglog").setLevel(logging.WARNING)

T, TLIST = "T", "TList"
ALIAS = ("Ref", "LRef")  # naming constructors used by the loader, never extracted
LIST_OPS = ("TCons", "TNil")


def egglog_sort(kind: str) -> str:
    return "i64" if kind == ops.BOOL else kind


@functools.lru_cache(maxsize=None)
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


def _arg_sorts(name: str) -> list[str]:
    children, attrs = signatures()[name]
    if name == OPAQUE:  # (Opaque index children)
        return [ops.I64, TLIST]
    return list(children) + [egglog_sort(a) for a in attrs]


# ---------------------------------------------------------------- language text


def _shape_rules() -> list[str]:
    """Shape and dtype inference for the ops that rewrites create."""
    rules = []
    shape_from_attr = ("Reshape", "BroadcastTo")  # the output shape is the attribute
    same_as_first = [
        s.name
        for s in ops.SPECS
        if s.kind == ops.ELEMWISE and s.n_inputs == 1 and s.name not in shape_from_attr
    ]
    for name in same_as_first:
        nattr = len(signatures()[name][1])
        pat = f"({name} x{''.join(f' _a{i}' for i in range(nattr))})"
        rules.append(f"(rule ((= e {pat}) (= s (shape x))) ((set (shape e) s)) :ruleset analysis)")
        if name != "Astype":
            rules.append(f"(rule ((= e {pat}) (= d (dtype x))) ((set (dtype e) d)) :ruleset analysis)")
    rules.append("(rule ((= e (Astype x d))) ((set (dtype e) d)) :ruleset analysis)")
    rules.append("(relation binop (T T T))")
    for spec in ops.SPECS:
        if spec.kind == ops.ELEMWISE and spec.n_inputs == 2:
            rules.append(f"(rule ((= e ({spec.name} x y))) ((binop e x y)) :ruleset analysis)")
    rules.append("(rule ((binop e x y) (= d (dtype x))) ((set (dtype e) d)) :ruleset analysis)")
    rules.extend(_broadcast_rules())
    for name in shape_from_attr:
        rules.append(f"(rule ((= e ({name} x s))) ((set (shape e) s)) :ruleset analysis)")
        rules.append(f"(rule ((= e ({name} x s)) (= d (dtype x))) ((set (dtype e) d)) :ruleset analysis)")
    for name in ("Permute", "Squeeze", "ExpandDims"):
        rules.append(f"(rule ((= e ({name} x _a)) (= d (dtype x))) ((set (dtype e) d)) :ruleset analysis)")
    for rank in range(1, 7):  # permute_dims: gather the input dims by the axes
        dims = " ".join(f"(vec-get s (vec-get p {i}))" for i in range(rank))
        rules.append(
            f"(rule ((= e (Permute x p)) (= s (shape x)) (= {rank} (vec-length p))) "
            f"((set (shape e) (vec-of {dims}))) :ruleset analysis)"
        )
    # matmul: (..., m, k) x (k, n) and equal-rank batched (..., m, k) x (..., k, n)
    rules.append(
        "(rule ((= e (Matmul x y od)) (= sx (shape x)) (= sy (shape y)) (= 2 (vec-length sy)) "
        "(>= (vec-length sx) 2)) "
        "((set (shape e) (vec-set sx (- (vec-length sx) 1) (vec-get sy 1)))) :ruleset analysis)"
    )
    rules.append(
        "(rule ((= e (Matmul x y od)) (= sx (shape x)) (= sy (shape y)) (= n (vec-length sy)) "
        "(= n (vec-length sx)) (> n 2) (= (vec-pop (vec-pop sx)) (vec-pop (vec-pop sy)))) "
        "((set (shape e) (vec-set sx (- n 1) (vec-get sy (- n 1))))) :ruleset analysis)"
    )
    for rank in range(1, 7):  # pad: each dim grows by its (before, after) widths
        dims = " ".join(
            f"(+ (vec-get s {i}) (+ (vec-get p {2 * i}) (vec-get p {2 * i + 1})))" for i in range(rank)
        )
        rules.append(
            f"(rule ((= e (Pad x p)) (= s (shape x)) (= {rank} (vec-length s))) "
            f"((set (shape e) (vec-of {dims}))) :ruleset analysis)"
        )
    rules.append("(rule ((= e (Pad x p)) (= d (dtype x))) ((set (dtype e) d)) :ruleset analysis)")
    rules.append("(rule ((= e (Full s v d))) ((set (shape e) s) (set (dtype e) d)) :ruleset analysis)")
    rules.extend(_structural_shape_rules())
    rules.append('(rule ((= e (Matmul x y "")) (= d (dtype x))) ((set (dtype e) d)) :ruleset analysis)')
    rules.append(
        '(rule ((= e (Matmul x y od)) (!= od "")) ((set (dtype e) od)) :ruleset analysis)'
    )
    rules.extend(_refusal_rules())
    return rules


def _refusal_rules(max_rank: int = 6) -> list[str]:
    """``type-error`` facts for terms no valid Relax program holds (the soundness alarm).

    The shape rules compute a type for every term a rule creates; these rules flag
    the terms whose operands do not fit together: broadcast dimensions that are
    neither equal nor 1, binary ops and matmuls over two dtypes, a matmul whose
    contracted dimensions differ, a convolution whose channels do not match its
    weight, a concat whose parts differ off its axis, a reshape that changes the
    number of elements.  A rewrite that creates such a term is unsound; the search
    stops at the first one (``TensorEGraph.run_ruleset``).
    """
    a = ":ruleset analysis"
    rules = []
    for i in range(1, max_rank + 1):  # the i-th dimension from the right
        rules.append(
            f"(rule ((binop e x y) (= sx (shape x)) (= sy (shape y)) (<= {i} (vec-length sx)) "
            f"(<= {i} (vec-length sy)) (= p (vec-get sx (- (vec-length sx) {i}))) "
            f"(= q (vec-get sy (- (vec-length sy) {i}))) (!= p q) (!= (min p q) 1)) "
            f'((type-error e "broadcast dimensions differ")) {a})'
        )
    rules += [
        f'(rule ((binop e x y) (= dx (dtype x)) (= dy (dtype y)) (!= dx dy)) ((type-error e "operand dtypes differ")) {a})',
        f'(rule ((= e (Matmul x y od)) (= dx (dtype x)) (= dy (dtype y)) (!= dx dy)) ((type-error e "matmul dtypes differ")) {a})',
        f"(rule ((= e (Matmul x y od)) (= sx (shape x)) (= sy (shape y)) (>= (vec-length sy) 2) "
        f"(!= (vec-get sx (- (vec-length sx) 1)) (vec-get sy (- (vec-length sy) 2)))) "
        f'((type-error e "matmul inner dimensions differ")) {a})',
        f'(rule ((= e (Conv2d x w st pd dl g l1 l2 l3 od)) (= dx (dtype x)) (= dw (dtype w)) (!= dx dw)) '
        f'((type-error e "conv2d dtypes differ")) {a})',
        f'(rule ((= e (Conv2d x w st pd dl g "NCHW" "OIHW" l3 od)) (= sx (shape x)) (= sw (shape w)) '
        f"(!= (vec-get sx 1) (* g (vec-get sw 1)))) "
        f'((type-error e "conv2d input channels differ from the weight")) {a})',
        f'(rule ((= e (Conv2d x w st pd dl g "NHWC" "OHWI" l3 od)) (= sx (shape x)) (= sw (shape w)) '
        f"(!= (vec-get sx 3) (* g (vec-get sw 3)))) "
        f'((type-error e "conv2d input channels differ from the weight")) {a})',
        f'(rule ((= e (Conv2d x w st pd dl g l1 "OIHW" l3 od)) (= sw (shape w)) (!= 0 (% (vec-get sw 0) g))) '
        f'((type-error e "conv2d output channels not divisible by groups")) {a})',
        f'(rule ((= e (Conv2d x w st pd dl g l1 l2 l3 od)) (= s (shape e)) (<= (vec-get s 2) 0)) '
        f'((type-error e "conv2d output is empty")) {a})',
        f'(rule ((= e (Conv2d x w st pd dl g l1 l2 l3 od)) (= s (shape e)) (<= (vec-get s 3) 0)) '
        f'((type-error e "conv2d output is empty")) {a})',
        # concat: every part equals the first off the axis, with the first's dtype
        "(relation concat-check (T TList i64 IVec String))",
        f"(rule ((= e (Concat l ax)) (= l (TCons h t)) (= s (shape h)) (= d (dtype h))) "
        f"((concat-check e t ax (vec-set s ax 0) d)) {a})",
        f"(rule ((concat-check e l ax k d) (= l (TCons h t))) ((concat-check e t ax k d)) {a})",
        f"(rule ((concat-check e l ax k d) (= l (TCons h t)) (= s (shape h)) (!= k (vec-set s ax 0))) "
        f'((type-error e "concat parts differ off the axis")) {a})',
        f"(rule ((concat-check e l ax k d) (= l (TCons h t)) (= dh (dtype h)) (!= d dh)) "
        f'((type-error e "concat parts differ in dtype")) {a})',
        # reshape keeps the number of elements
        "(relation need-numel (IVec))",
        "(function numel (IVec) i64 :no-merge)",
        f"(rule ((= e (Reshape x s)) (= sx (shape x))) ((need-numel s) (need-numel sx)) {a})",
        f"(rule ((= e (Reshape x s)) (= sx (shape x)) (!= (numel s) (numel sx))) "
        f'((type-error e "reshape changes the number of elements")) {a})',
    ]
    for rank in range(max_rank + 1):
        prod = "1"
        for i in range(rank):
            prod = f"(* {prod} (vec-get v {i}))"
        rules.append(f"(rule ((need-numel v) (= {rank} (vec-length v))) ((set (numel v) {prod})) {a})")
    return rules


def _broadcast_rules(max_rank: int = 6) -> list[str]:
    """Numpy broadcasting of binary element-wise ops, one rule per pair of ranks.

    Dimensions are right-aligned; a missing or unit dimension takes the other's,
    so each output dimension is the max of the two (the inputs were valid Relax).
    """
    rules = []
    for rx in range(max_rank + 1):
        for ry in range(max_rank + 1):
            r = max(rx, ry)
            if r == 0:
                dims = ""
            else:
                parts = []
                for i in range(r):
                    xi = f"(vec-get sx {i - (r - rx)})" if i >= r - rx else None
                    yi = f"(vec-get sy {i - (r - ry)})" if i >= r - ry else None
                    parts.append(f"(max {xi} {yi})" if xi and yi else (xi or yi))
                dims = " ".join(parts)
            rules.append(
                f"(rule ((binop e x y) (= sx (shape x)) (= sy (shape y)) (= {rx} (vec-length sx)) "
                f"(= {ry} (vec-length sy))) ((set (shape e) (vec-of {dims}))) :ruleset analysis)"
            )
    return rules


def _pool_and_mean_shape_rules() -> list[str]:
    """Shapes of the pools (floor mode) and channel means the layout rules create."""
    a = ":ruleset analysis"
    rules = []
    for layout, (h, w) in (("NCHW", (2, 3)), ("NHWC", (1, 2))):
        out = ["(vec-get sx 0)", "(vec-get sx 1)", "(vec-get sx 2)", "(vec-get sx 3)"]
        for axis, i in ((h, 0), (w, 1)):  # padding is (top, left, bottom, right)
            out[axis] = (f"(+ (/ (- (+ (vec-get sx {axis}) (+ (vec-get pd {i}) (vec-get pd {i + 2}))) "
                         f"(+ (* (vec-get dl {i}) (- (vec-get k {i}) 1)) 1)) (vec-get st {i})) 1)")
        for pool in ("MaxPool2d", "AvgPool2d"):
            rules.append(f'(rule ((= e ({pool} x k st pd dl 0 cip "{layout}" "{layout}")) (= sx (shape x))) '
                         f"((set (shape e) (vec-of {' '.join(out)}))) {a})")
    for pool in ("MaxPool2d", "AvgPool2d"):
        rules.append(f"(rule ((= e ({pool} x k st pd dl c cip l1 l2)) (= d (dtype x))) ((set (dtype e) d)) {a})")
    for axes, keep in (((1, 2), (0, 3)), ((2, 3), (0, 1))):  # spatial means of rank-4 tensors
        rules.append(f"(rule ((= e (Mean x (vec-of {axes[0]} {axes[1]}) 0)) (= sx (shape x)) (= 4 (vec-length sx))) "
                     f"((set (shape e) (vec-of (vec-get sx {keep[0]}) (vec-get sx {keep[1]})))) {a})")
        kept = " ".join("1" if i in axes else f"(vec-get sx {i})" for i in range(4))
        rules.append(f"(rule ((= e (Mean x (vec-of {axes[0]} {axes[1]}) 1)) (= sx (shape x)) (= 4 (vec-length sx))) "
                     f"((set (shape e) (vec-of {kept}))) {a})")
    rules.append(f"(rule ((= e (Mean x ax kd)) (= d (dtype x))) ((set (dtype e) d)) {a})")
    return rules


def _structural_shape_rules() -> list[str]:
    """Shapes of concat, split parts and NCHW convolutions (what merge rules create)."""
    a = ":ruleset analysis"
    return [
        # concat: the sum of the parts along the axis, computed along the list
        "(relation need-axis-sum (TList i64))",
        "(function axis-sum (TList i64) i64 :no-merge)",
        f"(rule ((= e (Concat l ax))) ((need-axis-sum l ax)) {a})",
        f"(rule ((need-axis-sum l ax) (= l (TCons h t))) ((need-axis-sum t ax)) {a})",
        f"(rule ((need-axis-sum l ax) (= l (TNil))) ((set (axis-sum l ax) 0)) {a})",
        f"(rule ((need-axis-sum l ax) (= l (TCons h t)) (= s (shape h)) (= r (axis-sum t ax))) "
        f"((set (axis-sum l ax) (+ r (vec-get s ax)))) {a})",
        f"(rule ((= e (Concat l ax)) (= l (TCons h t)) (= s (shape h)) (= n (axis-sum l ax))) "
        f"((set (shape e) (vec-set s ax n))) {a})",
        f"(rule ((= e (Concat l ax)) (= l (TCons h t)) (= d (dtype h))) ((set (dtype e) d)) {a})",
        # the parts of a concat with their offsets along its axis: (concat-walk e l ax off)
        # says the list suffix l of concat e starts at offset off (for slice rules)
        "(relation concat-walk (T TList i64 i64))",
        f"(rule ((= e (Concat l ax))) ((concat-walk e l ax 0)) {a})",
        f"(rule ((concat-walk e l ax off) (= l (TCons h t)) (= s (shape h))) "
        f"((concat-walk e t ax (+ off (vec-get s ax)))) {a})",
        # split parts: [0, i0), [i0, i1), ..., [i_last, dim)
        f"(rule ((= e (TGet p 0)) (= p (Split x ind ax)) (= s (shape x)) (> (vec-length ind) 0)) "
        f"((set (shape e) (vec-set s ax (vec-get ind 0)))) {a})",
        f"(rule ((= e (TGet p k)) (= p (Split x ind ax)) (= s (shape x)) (> k 0) (< k (vec-length ind))) "
        f"((set (shape e) (vec-set s ax (- (vec-get ind k) (vec-get ind (- k 1)))))) {a})",
        f"(rule ((= e (TGet p k)) (= p (Split x ind ax)) (= s (shape x)) (= k (vec-length ind)) (> k 0)) "
        f"((set (shape e) (vec-set s ax (- (vec-get s ax) (vec-get ind (- k 1)))))) {a})",
        f"(rule ((= e (TGet p k)) (= p (Split x ind ax)) (= d (dtype x))) ((set (dtype e) d)) {a})",
        # inference batch norm: (normalised x, mean, var), as the loaded ones
        f"(rule ((= e (TGet p 0)) (= p (BatchNorm x gm bt mn vr ax eps cn sc mom tr)) (= s (shape x)) (= d (dtype x))) "
        f"((set (shape e) s) (set (dtype e) d)) {a})",
        f"(rule ((= e (TGet p 1)) (= p (BatchNorm x gm bt mn vr ax eps cn sc mom tr)) (= s (shape mn)) (= d (dtype mn))) "
        f"((set (shape e) s) (set (dtype e) d)) {a})",
        f"(rule ((= e (TGet p 2)) (= p (BatchNorm x gm bt mn vr ax eps cn sc mom tr)) (= s (shape vr)) (= d (dtype vr))) "
        f"((set (shape e) s) (set (dtype e) d)) {a})",
        # a one-axis slice with a non-negative begin and a positive stride (what rules make):
        # ceil((min(end, dim) - begin) / stride) elements, at least 0
        f"(rule ((= e (StridedSlice x axes b en st ib)) (= 1 (vec-length axes)) (= sx (shape x)) "
        f"(= ax (vec-get axes 0)) (= b0 (vec-get b 0)) (>= b0 0) (= s0 (vec-get st 0)) (> s0 0)) "
        f"((set (shape e) (vec-set sx ax (max 0 (/ (+ (- (min (vec-get en 0) (vec-get sx ax)) b0) (- s0 1)) s0))))) {a})",
        f"(rule ((= e (StridedSlice x axes b en st ib)) (= d (dtype x))) ((set (dtype e) d)) {a})",
        # conv2d, NCHW data / OIHW kernel; padding is (top, left, bottom, right)
        f'(rule ((= e (Conv2d x w st pd dl g "NCHW" "OIHW" "NCHW" od)) (= sx (shape x)) (= sw (shape w))) '
        "((set (shape e) (vec-of (vec-get sx 0) (vec-get sw 0) "
        "(+ (/ (- (+ (vec-get sx 2) (+ (vec-get pd 0) (vec-get pd 2))) "
        "(+ (* (vec-get dl 0) (- (vec-get sw 2) 1)) 1)) (vec-get st 0)) 1) "
        "(+ (/ (- (+ (vec-get sx 3) (+ (vec-get pd 1) (vec-get pd 3))) "
        f"(+ (* (vec-get dl 1) (- (vec-get sw 3) 1)) 1)) (vec-get st 1)) 1)))) {a})",
        # conv2d, NHWC data / OHWI kernel (the layout rules' form)
        f'(rule ((= e (Conv2d x w st pd dl g "NHWC" "OHWI" "NHWC" od)) (= sx (shape x)) (= sw (shape w))) '
        "((set (shape e) (vec-of (vec-get sx 0) "
        "(+ (/ (- (+ (vec-get sx 1) (+ (vec-get pd 0) (vec-get pd 2))) "
        "(+ (* (vec-get dl 0) (- (vec-get sw 1) 1)) 1)) (vec-get st 0)) 1) "
        "(+ (/ (- (+ (vec-get sx 2) (+ (vec-get pd 1) (vec-get pd 3))) "
        f"(+ (* (vec-get dl 1) (- (vec-get sw 2) 1)) 1)) (vec-get st 1)) 1) (vec-get sw 0)))) {a})",
        f'(rule ((= e (Conv2d x w st pd dl g l1 l2 l3 "")) (= d (dtype x))) ((set (dtype e) d)) {a})',
        f'(rule ((= e (Conv2d x w st pd dl g l1 l2 l3 od)) (!= od "")) ((set (dtype e) od)) {a})',
        *_pool_and_mean_shape_rules(),
        # the loaded node a class came from: orders operands so merges fire once per set
        f"(rule ((= e (Ref i))) ((set (orig-id e) i)) {a})",
        f"(rule ((= l (TCons h t)) (= i (orig-id h))) ((set (first-id l) i)) {a})",
    ]


@functools.lru_cache(maxsize=None)
def language() -> str:
    """Declarations, loader rules and analyses: the fixed prelude of every e-graph."""
    out = [
        "(sort IVec (Vec i64))",
        f"(sort {T})",
        f"(sort {TLIST})",
        f"(constructor TNil () {TLIST})",
        f"(constructor TCons ({T} {TLIST}) {TLIST})",
        f"(constructor Ref (i64) {T})",
        f"(constructor LRef (i64 i64) {TLIST})",
        f"(function shape ({T}) IVec :no-merge)",
        f"(function dtype ({T}) String :no-merge)",
        f"(relation const ({T}))",
        f"(relation const-list ({TLIST}))",
        f"(relation type-error ({T} String))",  # a term no valid program holds: the soundness alarm
        f"(function orig-id ({T}) i64 :merge (min old new))",
        f"(function first-id ({TLIST}) i64 :merge (min old new))",
        "(ruleset load-vec)",
        "(ruleset load)",
        "(ruleset analysis)",
        # integer vectors, built element by element from the fact files
        "(relation load-vec-len (i64 i64))",
        "(relation load-vec-elem (i64 i64 i64))",
        "(function IVP (i64 i64) IVec :no-merge)",
        "(function IV (i64) IVec :no-merge)",
        "(rule ((load-vec-len v n)) ((set (IVP v 0) (vec-empty))) :ruleset load-vec)",
        "(rule ((= p (IVP v k)) (load-vec-elem v k x)) ((set (IVP v (+ k 1)) (vec-push p x)))"
        " :ruleset load-vec)",
        "(rule ((load-vec-len v n) (= p (IVP v n))) ((set (IV v) p)) :ruleset load-vec)",
        # lists of children: LRef(list, k) names the suffix starting at k
        "(relation load-list-len (i64 i64))",
        "(relation load-list-elem (i64 i64 i64))",
        "(rule ((load-list-len l n)) ((union (LRef l n) (TNil))) :ruleset load)",
        "(rule ((load-list-elem l k x)) ((union (LRef l k) (TCons (Ref x) (LRef l (+ k 1)))))"
        " :ruleset load)",
        "(relation load-shape (i64 i64))",
        "(relation load-dtype (i64 String))",
        "(relation load-const (i64))",
        "(rule ((load-shape i v) (= s (IV v))) ((set (shape (Ref i)) s)) :ruleset load)",
        "(rule ((load-dtype i d)) ((set (dtype (Ref i)) d)) :ruleset load)",
        "(rule ((load-const i)) ((const (Ref i))) :ruleset load)",
        # parallel-merge groups (``merge_groups``): the kernels on one input whose
        # constant weights can be concatenated, with the split indices of the merge,
        # each part's kernel and weight, and the attributes every kernel of the group
        # has: a merge rule binds all of them from these facts, never from whatever
        # other member a rule put into a part's e-class (an enlarged conv, say)
        "(relation load-merge-group (i64 i64 i64 i64 i64))",
        "(relation load-merge-part (i64 i64 i64 i64))",
        "(relation load-merge-matmul (i64 String))",
        "(relation load-merge-conv (i64 i64 i64 i64 String))",
        f"(relation merge-group (i64 {T} {TLIST} IVec i64))",
        f"(relation merge-part (i64 i64 {T} {T}))",
        "(relation merge-matmul (i64 String))",
        "(relation merge-conv (i64 IVec IVec IVec String))",
        "(rule ((load-merge-group g x l v ax) (= ind (IV v))) ((merge-group g (Ref x) (LRef l 0) ind ax))"
        " :ruleset load)",
        "(rule ((load-merge-part g k m w)) ((merge-part g k (Ref m) (Ref w))) :ruleset load)",
        "(rule ((load-merge-matmul g od)) ((merge-matmul g od)) :ruleset load)",
        "(rule ((load-merge-conv g a b c od) (= st (IV a)) (= pd (IV b)) (= dl (IV c)))"
        " ((merge-conv g st pd dl od)) :ruleset load)",
        "(rule ((= l (TNil))) ((const-list l)) :ruleset analysis)",
        "(rule ((= l (TCons h t)) (const h) (const-list t)) ((const-list l)) :ruleset analysis)",
    ]
    for name in signatures():
        sorts = _arg_sorts(name)
        out.append(f"(constructor {name} ({' '.join(sorts)}) {T})")
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
        out.append(f"(relation load-{name} (i64 {' '.join(cols)}))")
        out.append(
            f"(rule ((load-{name} id {' '.join(load_args)}) {' '.join(guards)}) "
            f"((union (Ref id) ({name} {' '.join(pattern)}))) :ruleset load)"
        )
        match_args = " ".join(f"c{i}" if s in (T, TLIST) else f"_x{i}" for i, s in enumerate(sorts))
        if const_conds:  # a value computed only from constants is constant
            out.append(
                f"(rule ((= e ({name} {match_args})) {' '.join(const_conds)}) ((const e))"
                " :ruleset analysis)"
            )
        elif name in ops.BY_NAME:  # an op without tensor inputs (full) is a constant
            out.append(f"(rule ((= e ({name} {match_args}))) ((const e)) :ruleset analysis)")
    out.extend(_shape_rules())
    return "\n".join(out)


def typed_constructors() -> set[str]:
    """Constructors whose shape the analyses compute from their operands (a rule that
    creates any other has no type for it: the soundness checks cannot see it)."""
    names = set(signatures())
    typed: set[str] = set()
    for line in language().splitlines():
        if line.startswith("(rule (") and "(set (shape e)" in line:
            query = line[: line.index("(set (shape e)")]
            typed.update(re.findall(r"\((\w+)", query))
            if "(binop e x y)" in query:
                typed.update(s.name for s in ops.SPECS if s.kind == ops.ELEMWISE and s.n_inputs == 2)
    return typed & names


# ---------------------------------------------------------------- facts


def _fmt(value, kind: str) -> str:
    if kind == ops.BOOL:
        return "1" if value else "0"
    if kind == ops.F64:
        return repr(float(value))
    if kind == ops.STR:
        if "\t" in value or "\n" in value:
            raise ValueError(f"attribute string {value!r} has a tab or newline")
        return value
    return str(int(value))


class _Facts:
    """Rows of the loader relations, written as tab-separated fact files."""

    def __init__(self) -> None:
        self.rows: dict[str, list[str]] = {}
        self.vecs: dict[tuple[int, ...], int] = {}
        self.n_lists = 0

    def add(self, relation: str, *cols) -> None:
        self.rows.setdefault(relation, []).append("\t".join(cols))

    def vec(self, values: tuple[int, ...]) -> int:
        vid = self.vecs.get(values)
        if vid is None:
            vid = self.vecs[values] = len(self.vecs)
            self.add("load-vec-len", str(vid), str(len(values)))
            for k, x in enumerate(values):
                self.add("load-vec-elem", str(vid), str(k), str(int(x)))
        return vid

    def lst(self, items: tuple[int, ...]) -> int:
        lid = self.n_lists
        self.n_lists += 1
        self.add("load-list-len", str(lid), str(len(items)))
        for k, x in enumerate(items):
            self.add("load-list-elem", str(lid), str(k), str(x))
        return lid


def _node_facts(graph: TensorGraph, facts: _Facts) -> None:
    sigs = signatures()
    for nid in graph.reachable():
        n = graph.nodes[nid]
        children, attr_kinds = sigs[n.op]
        if children == (TLIST,):
            child_cols = [str(facts.lst(n.inputs))]
        else:
            child_cols = [str(c) for c in n.inputs]
        attr_cols = []
        for value, kind in zip(n.attrs, attr_kinds):
            attr_cols.append(str(facts.vec(value)) if kind == ops.IVEC else _fmt(value, kind))
        cols = attr_cols + child_cols if n.op == OPAQUE else child_cols + attr_cols
        facts.add(f"load-{n.op}", str(nid), *cols)
        if isinstance(n.ty, TensorTy):
            facts.add("load-shape", str(nid), str(facts.vec(n.ty.shape)))
            facts.add("load-dtype", str(nid), n.ty.dtype)
        if n.is_const and n.op in (INPUT, CONST):
            facts.add("load-const", str(nid))


def split_parts(in_ty: Ty | None, indices: tuple[int, ...], axis: int) -> tuple[TensorTy, ...] | None:
    """The tuple type of ``split(x, indices, axis)`` for ``x`` of type ``in_ty`` (None if unknown):
    the cost of a split made by a rule counts the parts it writes."""
    if not isinstance(in_ty, TensorTy):
        return None
    bounds = (0, *indices, in_ty.shape[axis])
    return tuple(
        TensorTy(in_ty.shape[:axis] + (hi - lo,) + in_ty.shape[axis + 1 :], in_ty.dtype)
        for lo, hi in zip(bounds, bounds[1:])
    )


def tuple_type(node: ENode, ty: list) -> tuple | None:
    """The type of a tuple-valued node a rule made (a split, an inference batch norm)
    from its inputs' types, or None: costs count what the tuple's kernel writes."""
    if node.op == "Split":
        return split_parts(ty[node.children[0]], *node.attrs)
    if node.op == "BatchNorm":
        x, mean, var = (ty[node.children[i]] for i in (0, 3, 4))
        return (x, mean, var) if all(isinstance(t, TensorTy) for t in (x, mean, var)) else None
    return None


def _merge_key(graph: TensorGraph, n) -> tuple | None:
    """(group key, weight-concat axis, split axis) for a kernel that a parallel merge
    can take in (a matmul or an ungrouped NCHW conv on a constant weight), else None.
    The key starts with the input and holds everything the group's kernels must share."""
    if n.op not in ("Matmul", "Conv2d") or len(n.inputs) != 2:
        return None
    x, w = (graph.nodes[i] for i in n.inputs)
    if not w.is_const or not isinstance(w.ty, TensorTy) or not isinstance(x.ty, TensorTy):
        return None
    if n.op == "Matmul":
        if len(w.ty.shape) != 2 or len(x.ty.shape) < 1:
            return None
        return (n.inputs[0], n.op, n.attrs, w.ty.shape[0], w.ty.dtype), 1, len(x.ty.shape) - 1
    groups, layouts = n.attrs[3], n.attrs[4:7]
    if groups != 1 or layouts != ("NCHW", "OIHW", "NCHW"):
        return None
    return (n.inputs[0], n.op, n.attrs, w.ty.shape[1:], w.ty.dtype), 0, 1


def merge_groups(graph: TensorGraph) -> list[tuple[int, list[int], list[int], int]]:
    """TVM's CombineParallelMatmul, generalised to convs, as data: for each input read
    by two or more compatible kernels on constant weights, (input, kernels, split
    indices, split axis).  The ``*-merge-all`` rules turn a group into one kernel on
    the concatenated weights and a split, in one step: the pairwise merge rules reach
    that form only through every subset of the group, which blows up the e-graph."""
    groups: dict[tuple, list[int]] = {}
    axes: dict[tuple, tuple[int, int]] = {}
    for nid in graph.reachable():
        found = _merge_key(graph, graph.nodes[nid])
        if found is not None:
            key, w_axis, split_axis = found
            groups.setdefault(key, []).append(nid)
            axes[key] = (w_axis, split_axis)
    out = []
    for key, members in groups.items():
        if len(members) < 2:
            continue
        w_axis, split_axis = axes[key]
        widths = [graph.nodes[graph.nodes[m].inputs[1]].ty.shape[w_axis] for m in members]
        indices = [sum(widths[: i + 1]) for i in range(len(widths) - 1)]
        out.append((key[0], members, indices, split_axis))
    return out


def _merge_group_facts(graph: TensorGraph, facts: _Facts) -> None:
    for g, (x, members, indices, axis) in enumerate(merge_groups(graph)):
        weights = tuple(graph.nodes[m].inputs[1] for m in members)
        weight_list, index_vec = facts.lst(weights), facts.vec(tuple(indices))
        facts.add("load-merge-group", str(g), str(x), str(weight_list), str(index_vec), str(axis))
        for k, (m, w) in enumerate(zip(members, weights)):
            facts.add("load-merge-part", str(g), str(k), str(m), str(w))
        first = graph.nodes[members[0]]  # the group key holds the attributes: all members share them
        if first.op == "Matmul":
            facts.add("load-merge-matmul", str(g), first.attrs[0])
        else:
            strides, padding, dilation = (str(facts.vec(v)) for v in first.attrs[:3])
            facts.add("load-merge-conv", str(g), strides, padding, dilation, first.attrs[7])


# ---------------------------------------------------------------- the e-graph


@dataclass
class ENode:
    op: str
    attrs: tuple
    children: tuple[int, ...]  # e-class ids (lists flattened)


@dataclass
class Snapshot:
    """A frozen e-graph in plain Python: what the extractors work on."""

    classes: list[list[ENode]]
    ty: list[Ty | None]
    is_const: list[bool]
    root_of: dict[int, int]  # graph node id -> e-class id

    @property
    def n_nodes(self) -> int:
        return sum(len(c) for c in self.classes)


class EGraphError(RuntimeError):
    """egglog rejected a program or a rule."""


class SoundnessAlarm(EGraphError):
    """The e-graph holds something no valid program holds: a union of two e-classes of
    different shapes or dtypes (egglog refuses it), or a term the analyses flag
    (``type-error``).  Some rule is unsound; ``ruleset`` is the action that raised it
    (None: the graph as loaded) and ``history`` the actions run before it, which is
    what ``alarms.diagnose`` needs to name the rule."""

    def __init__(self, reason: str, ruleset: str | None, history: tuple[str, ...]) -> None:
        super().__init__(reason)
        self.reason = reason
        self.ruleset = ruleset
        self.history = history


_PARSED: dict[str, list] = {}  # egglog text -> parsed commands, shared by every e-graph
_PARSED_MAX = 256


class TensorEGraph:
    """One block's e-graph: loaded from a TensorGraph, grown by rulesets, snapshotted."""

    def __init__(self, graph: TensorGraph, rule_program: str = "") -> None:
        self.graph = graph
        self.egraph = bindings.EGraph()
        facts = _Facts()
        _node_facts(graph, facts)
        _merge_group_facts(graph, facts)
        self.run(language())
        if rule_program:
            self.run(rule_program)
        with tempfile.TemporaryDirectory(prefix="tvm_eqsat_") as tmp:
            inputs = []
            for relation, rows in facts.rows.items():
                with open(os.path.join(tmp, f"{relation}.tsv"), "w") as f:
                    f.write("\n".join(rows) + "\n")
                inputs.append(f'(input {relation} "{os.path.join(tmp, relation)}.tsv")')
            self.run("\n".join(inputs), cache=False)  # temporary paths: never seen again
        self.run("(run-schedule (saturate load-vec))\n(run load 1)")
        self.history: list[str] = []  # the rulesets run, in order (what a replay needs)
        self._saved: list[int] = []  # history lengths at each push
        self.saturate_analysis()
        self.check(None)

    def run(self, program: str, cache: bool = True) -> list:
        """Run egglog text (parsed once per distinct text and process: parsed commands
        run on any e-graph, and parsing the prelude and rules is half of building one)."""
        cmds = _PARSED.get(program)
        try:
            if cmds is None:
                cmds = self.egraph.parse_program(program)
                if cache:
                    if len(_PARSED) >= _PARSED_MAX:
                        _PARSED.clear()
                    _PARSED[program] = cmds
            return self.egraph.run_program(*cmds)
        except bindings.EggSmolError as err:
            raise EGraphError(str(err)) from err

    def saturate_analysis(self) -> None:
        self.run("(run-schedule (saturate analysis))")

    def run_ruleset(self, name: str) -> tuple[dict[str, int], bool]:
        """One iteration of a ruleset, then the analyses: (matches per rule, changed?).

        Raises ``SoundnessAlarm`` when the step unions classes of different types or
        creates a term the analyses refuse; the e-graph is then unusable (pop it)."""
        history = tuple(self.history)
        self.history.append(name)
        try:
            report = self.run(f"(run {name} 1)")[0].report
            self.saturate_analysis()
        except EGraphError as err:
            if "Illegal merge" not in str(err):
                raise
            raise SoundnessAlarm(f"union of e-classes of different types ({err})", name, history) from err
        self.check(name, history)
        return dict(report.num_matches_per_rule), bool(report.updated)

    def check(self, ruleset: str | None, history: tuple[str, ...] = ()) -> None:
        """Raise ``SoundnessAlarm`` if the analyses flagged a term (``type-error``)."""
        if self.run("(print-size type-error)")[0].size:
            raise SoundnessAlarm(self.type_errors()[0], ruleset, history)

    def type_errors(self) -> list[str]:
        """What the analyses flagged: one line per term (its op and the reason)."""
        frozen = self.egraph.freeze().functions
        owner = {}
        for name in signatures():
            for row in frozen[name].rows if name in frozen else ():
                owner.setdefault(row.output, name)
        return sorted(
            f"{owner.get(r.inputs[0], 'a term')}: {self.egraph.value_to_string(r.inputs[1])}"
            for r in frozen["type-error"].rows
        )

    def push(self) -> None:
        self.run("(push)")
        self._saved.append(len(self.history))

    def pop(self) -> None:
        self.run("(pop)")
        del self.history[self._saved.pop() :]

    def size(self) -> int:
        """Number of tensor e-nodes (language constructors, not loader aliases)."""
        sizes = self.run("(print-size)")[0].sizes
        names = signatures()
        return sum(n for name, n in sizes if name in names)

    def snapshot(self) -> Snapshot:
        eg = self.egraph
        frozen = eg.freeze().functions
        cid: dict = {}

        def cls(value) -> int:
            got = cid.get(value)
            if got is None:
                got = cid[value] = len(cid)
            return got

        lists: dict = {}
        for row in frozen["TNil"].rows:
            lists.setdefault(row.output, ())
        cons = {row.output: (row.inputs[0], row.inputs[1]) for row in frozen["TCons"].rows}

        def flat(value) -> tuple[int, ...]:
            items = []
            seen = set()
            while value not in lists:
                if value in seen or value not in cons:
                    raise EGraphError("malformed child list in e-graph")
                seen.add(value)
                head, value = cons[value]
                items.append(cls(head))
            return tuple(items)

        decoders = {
            ops.I64: eg.value_to_i64,
            ops.BOOL: lambda v: bool(eg.value_to_i64(v)),
            ops.F64: eg.value_to_f64,
            ops.STR: eg.value_to_string,
            ops.IVEC: lambda v: tuple(eg.value_to_i64(x) for x in eg.value_to_vec(v)),
        }
        nodes: list[tuple[int, ENode]] = []
        for name, (child_sorts, attr_kinds) in signatures().items():
            fn = frozen.get(name)
            if fn is None:
                continue
            kinds = [ops.I64, TLIST] if name == OPAQUE else list(child_sorts) + list(attr_kinds)
            for row in fn.rows:
                if row.subsumed:
                    continue
                children: list[int] = []
                attrs = []
                for value, kind in zip(row.inputs, kinds):
                    if kind == T:
                        children.append(cls(value))
                    elif kind == TLIST:
                        children.extend(flat(value))
                    else:
                        attrs.append(decoders[kind](value))
                nodes.append((cls(row.output), ENode(name, tuple(attrs), tuple(children))))
        root_of = {eg.value_to_i64(r.inputs[0]): cls(r.output) for r in frozen["Ref"].rows}
        classes: list[list[ENode]] = [[] for _ in range(len(cid))]
        for c, node in nodes:
            classes[c].append(node)
        ty: list[Ty | None] = [None] * len(cid)
        shapes = {r.inputs[0]: r.output for r in frozen["shape"].rows}
        for r in frozen["dtype"].rows:
            if r.inputs[0] in shapes and r.inputs[0] in cid:
                shape = decoders[ops.IVEC](shapes[r.inputs[0]])
                ty[cid[r.inputs[0]]] = TensorTy(shape, eg.value_to_string(r.output))
        for nid, c in root_of.items():  # tuple types are only known for loaded nodes
            if ty[c] is None:
                ty[c] = self.graph.nodes[nid].ty
        for c, members in enumerate(classes):  # ... and for tuples rules make, from their inputs
            if ty[c] is None:
                ty[c] = next((t for t in (tuple_type(n, ty) for n in members) if t is not None), None)
        is_const = [False] * len(cid)
        for r in frozen["const"].rows:
            if r.inputs[0] in cid:
                is_const[cid[r.inputs[0]]] = True
        return Snapshot(classes, ty, is_const, root_of)
