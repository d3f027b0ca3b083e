"""One block's e-graph at run time: loading a TensorGraph into egglog, growing it by
rulesets with the soundness checks, and reading it back as a plain-Python snapshot.

The language itself (constructors, loader rules, analyses) is ``language.py`` with
``rules/language/*.egg``.  Loading goes through fact files and one rule run: egglog's
top-level commands cost memory superlinear in their number (measured: 2,000
single-term commands take 330 MB; 20,000 nodes loaded from facts take 0.1 s and 60 MB).
"""

from __future__ import annotations

import logging
import os
import tempfile
from dataclasses import dataclass

from egglog import bindings

from . import ops
from .graph import CONST, INPUT, OPAQUE, TensorGraph, TensorTy, Ty
from .language import TLIST, T, language, signatures
from .merge_groups import merge_group_facts

# egglog logs every table size at INFO when sizes are printed; keep users' logs readable
logging.getLogger("egglog").setLevel(logging.WARNING)

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


# ---------------------------------------------------------------- the e-graph


@dataclass(frozen=True)
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

    def digest(self, rounds: int = 3) -> int:
        """A hash of the content, the same for e-graphs equal up to the naming of e-classes.

        Each e-class starts labelled by the loaded nodes it holds (rule-made classes by
        none) and, ``rounds`` times, takes a label from its e-nodes: op, attributes and
        the children's labels (Weisfeiler-Lehman refinement).  Two different e-graphs get
        the same digest only if no class can tell them apart within ``rounds`` steps:
        with every loaded node an anchor, that takes contrived symmetry.  Hashes are
        Python's, so compare digests within one process only."""
        label = [-1] * len(self.classes)
        for nid, c in self.root_of.items():
            label[c] = nid if label[c] < 0 else min(label[c], nid)
        for _ in range(rounds):
            label = [
                hash(
                    (
                        label[c],
                        tuple(sorted(hash((n.op, n.attrs, tuple(label[k] for k in n.children))) for n in members)),
                    )
                )
                for c, members in enumerate(self.classes)
            ]
        return hash(tuple(sorted(label)))


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
        merge_group_facts(graph, facts)
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
