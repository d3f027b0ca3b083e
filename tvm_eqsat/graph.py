"""TensorGraph: a plain Python DAG of one Relax dataflow block, and the conversions.

The graph is the meeting point of Relax and the e-graph: nodes carry the op, its
canonical attributes, input node ids, static type and whether the value depends
only on constants/weights.  Values from outside the block (function parameters,
earlier blocks) are ``Input`` leaves; constants are ``Const`` leaves; calls we do
not model are ``Opaque`` nodes that keep the exact original call as a template
whose variable leaves are the node's children, so they are rebuilt as they were.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import tvm
from tvm import relax

from . import ops
from .ops import CONST, INPUT, OPAQUE, TGET, TUPLE_NODE


class Unsupported(Exception):
    """The block cannot be modelled; the caller leaves it unchanged."""


@dataclass(frozen=True)
class TensorTy:
    shape: tuple[int, ...]
    dtype: str

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * dtype_bytes(self.dtype)


Ty = TensorTy | tuple  # a tuple of Ty for tuple-valued nodes


@functools.lru_cache(maxsize=64)
def dtype_bytes(dtype: str) -> int:
    if dtype == "bool":
        return 1
    digits = "".join(c for c in dtype if c.isdigit())
    return max(1, int(digits) // 8) if digits else 4


@dataclass(frozen=True)
class Node:
    op: str  # an OpSpec name or one of ops.STRUCTURAL
    attrs: tuple  # canonical attr values (Input/Const/Opaque: an index into the tables)
    inputs: tuple[int, ...]
    ty: Ty
    is_const: bool  # depends only on constants / weights


@dataclass
class Opaque:
    """An unmodelled expression: ``template`` with its variable leaves as children."""

    template: Any
    leaves: tuple  # the relax.Var objects the template reads, in child order


@dataclass
class TensorGraph:
    nodes: list[Node] = field(default_factory=list)
    inputs: list[Any] = field(default_factory=list)  # relax.Var per Input index
    constants: list[Any] = field(default_factory=list)  # relax constant per Const index
    opaques: list[Opaque] = field(default_factory=list)
    outputs: list[tuple[Any, int]] = field(default_factory=list)  # (output relax.Var, node)
    _memo: dict = field(default_factory=dict, repr=False)

    def add(self, node: Node) -> int:
        """Add a node, hash-consing identical modelled nodes (CSE)."""
        key = (node.op, node.attrs, node.inputs)
        if node.op != OPAQUE and key in self._memo:
            return self._memo[key]
        self.nodes.append(node)
        self._memo[key] = len(self.nodes) - 1
        return len(self.nodes) - 1

    def with_nodes(self, nodes: list[Node], outputs: list[tuple[Any, int]]) -> TensorGraph:
        """A graph over the same leaf tables with other nodes (an extraction result)."""
        return TensorGraph(nodes, self.inputs, self.constants, self.opaques, outputs)

    def reachable(self) -> list[int]:
        """Node ids reachable from the outputs, children before parents."""
        return topological_order([r for _, r in self.outputs], lambda nid: self.nodes[nid].inputs)

    def signature(self) -> tuple:
        """A canonical structural form, equal for graphs computing the same terms."""
        canon: dict[int, int] = {}
        table: dict[tuple, int] = {}
        for nid in self.reachable():
            n = self.nodes[nid]
            key = (n.op, n.attrs, tuple(canon[i] for i in n.inputs))
            canon[nid] = table.setdefault(key, len(table))
        return tuple(sorted(table, key=table.get)), tuple(canon[r] for _, r in self.outputs)

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for nid in self.reachable():
            n = self.nodes[nid]
            name = n.op
            if n.op == OPAQUE:
                name = "Opaque:" + _expr_name(self.opaques[n.attrs[0]].template)
            counts[name] = counts.get(name, 0) + 1
        return counts


def structural_ids(graph: TensorGraph, table: dict[tuple, int]) -> dict[int, int]:
    """An id per reachable node, equal for nodes of the same op, attributes and (recursively)
    inputs, across every graph numbered with the same ``table`` (which grows)."""
    sid: dict[int, int] = {}
    for nid in graph.reachable():
        n = graph.nodes[nid]
        sid[nid] = table.setdefault((n.op, n.attrs, tuple(sid[i] for i in n.inputs)), len(table))
    return sid


def topological_order(roots: Iterable[int], children, state: dict[int, int] | None = None) -> list[int]:
    """Everything reachable from ``roots``, children before parents (first child first).
    Pass the ``state`` of an earlier walk over the same graph to continue it: what that walk
    reached is left out.

    Raises Unsupported on a cycle or on a missing entry (``children`` raising KeyError).
    """
    order: list[int] = []
    state = {} if state is None else state  # 1: on the current path, 2: done
    for root in roots:
        stack = [(root, False)]
        while stack:
            item, expanded = stack.pop()
            if expanded:
                state[item] = 2
                order.append(item)
                continue
            if state.get(item) == 2:
                continue
            if state.get(item) == 1:
                raise Unsupported("cycle in graph")
            state[item] = 1
            stack.append((item, True))
            try:
                kids = children(item)
            except KeyError as err:
                raise Unsupported(f"no choice for {err}") from err
            for child in reversed(kids):
                if state.get(child) == 1:
                    raise Unsupported("cycle in graph")
                if state.get(child) != 2:
                    stack.append((child, False))
    return order


# ---------------------------------------------------------------- types


def ty_of(relax_ty) -> Ty:
    """A static TensorTy / tuple of them from a Relax type; Unsupported otherwise."""
    if isinstance(relax_ty, relax.TensorType):
        if relax_ty.shape is None or relax_ty.ndim < 0:
            raise Unsupported(f"tensor of unknown shape {relax_ty}")
        dtype = str(relax_ty.dtype)
        if dtype in ("", "void"):
            raise Unsupported(f"tensor of unknown dtype {relax_ty}")
        try:
            return TensorTy(ops.to_ints(relax_ty.shape), dtype)
        except ops.NotNative as err:
            raise Unsupported(f"symbolic shape {relax_ty.shape}") from err
    fields = getattr(relax_ty, "fields", None)
    if isinstance(relax_ty, tvm.ir.TupleType) and fields is not None:
        return tuple(ty_of(f) for f in fields)
    raise Unsupported(f"value of type {relax_ty} (not a static tensor or tuple)")


def _expr_name(expr) -> str:
    op = getattr(expr, "op", None)
    if op is not None:
        return getattr(op, "name", None) or getattr(op, "name_hint", None) or type(op).__name__
    return type(expr).__name__


def _is_const_expr(expr) -> bool:
    """A Relax tensor constant (IntImm/FloatImm also derive from ir.Constant: not these)."""
    return isinstance(expr, tvm.ir.GenericConst)


# ---------------------------------------------------------------- opaque templates


def _leaves(expr, out: list) -> None:
    """Collect the variable leaves of a call's arguments (through tuples)."""
    if isinstance(expr, relax.Var):
        out.append(expr)
    elif isinstance(expr, relax.Tuple):
        for f in expr.fields:
            _leaves(f, out)
    elif isinstance(expr, relax.Call):
        raise Unsupported("nested call in arguments")


def opaque_leaves(expr) -> tuple:
    out: list = []
    if isinstance(expr, relax.Call):
        for a in expr.args:
            _leaves(a, out)
    else:
        _leaves(expr, out)
    return tuple(out)


def _substitute(expr, values: dict):
    if isinstance(expr, relax.Var):
        return values[expr]
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_substitute(f, values) for f in expr.fields])
    return expr


def rebuild_opaque(opaque: Opaque, children: list):
    values = dict(zip(opaque.leaves, children))
    t = opaque.template
    if isinstance(t, relax.Call):
        args = [_substitute(a, values) for a in t.args]
        return relax.Call(t.op, args, t.attrs, t.ty_args)
    return _substitute(t, values)


# ---------------------------------------------------------------- Relax -> graph


def graph_from_block(block, weights: Iterable[Any] = ()) -> TensorGraph:
    """Model one dataflow block; ``weights`` are outer variables known to be constant."""
    if not isinstance(block, relax.DataflowBlock):
        raise Unsupported("not a dataflow block")
    weight_set = set(weights)
    g = TensorGraph()
    env: dict[Any, int] = {}
    outer: dict[Any, int] = {}
    consts: dict[Any, int] = {}

    def leaf(expr) -> int:
        if isinstance(expr, relax.Var):
            if expr in env:
                return env[expr]
            if expr not in outer:
                ty = ty_of(expr.ty)
                g.inputs.append(expr)
                node = Node(INPUT, (len(g.inputs) - 1,), (), ty, expr in weight_set)
                outer[expr] = g.add(node)
            return outer[expr]
        if _is_const_expr(expr):
            if expr not in consts:
                g.constants.append(expr)
                consts[expr] = g.add(Node(CONST, (len(g.constants) - 1,), (), ty_of(expr.ty), True))
            return consts[expr]
        if isinstance(expr, relax.Tuple):
            kids = tuple(leaf(f) for f in expr.fields)
            ty = tuple(g.nodes[k].ty for k in kids)
            return g.add(Node(TUPLE_NODE, (), kids, ty, all(g.nodes[k].is_const for k in kids)))
        raise Unsupported(f"argument {type(expr).__name__} not modelled")

    def opaque(expr, ty) -> int:
        leaves = opaque_leaves(expr)
        kids = tuple(leaf(v) for v in leaves)
        g.opaques.append(Opaque(expr, leaves))
        const = all(g.nodes[k].is_const for k in kids)
        return g.add(Node(OPAQUE, (len(g.opaques) - 1,), kids, ty, const))

    for binding in block.bindings:
        if not isinstance(binding, relax.VarBinding):
            raise Unsupported(f"{type(binding).__name__} in dataflow block")
        var, value = binding.var, binding.value
        ty = ty_of(var.ty)
        if isinstance(value, (relax.Var, relax.Tuple)) or _is_const_expr(value):
            env[var] = leaf(value)
        elif isinstance(value, relax.TupleGetItem):
            src = leaf(value.tuple_value)
            node = Node(TGET, (int(value.index),), (src,), ty, g.nodes[src].is_const)
            env[var] = g.add(node)
        elif isinstance(value, relax.Call):
            spec = ops.native_spec(value)
            nid = None
            if spec is not None:
                try:
                    args, attrs = ops.read_call(spec, value)
                    kids = tuple(leaf(a) for a in args)
                    const = all(g.nodes[k].is_const for k in kids)
                    nid = g.add(Node(spec.name, attrs, kids, ty, const))
                except ops.NotNative:
                    nid = None
            env[var] = opaque(value, ty) if nid is None else nid
        else:
            env[var] = opaque(value, ty)
        if not isinstance(var, relax.DataflowVar):
            g.outputs.append((var, env[var]))
    return g


# ---------------------------------------------------------------- graph -> Relax


def block_from_graph(g: TensorGraph) -> Any:
    """Emit the nodes reachable from the outputs as a new DataflowBlock.

    Output variables keep their identity (later code refers to them); every other
    value gets a fresh DataflowVar.  Types come from Relax's own inference.
    """
    bb = relax.BlockBuilder()
    exprs: dict[int, Any] = {}
    bindings = []
    out_var_of: dict[int, Any] = {}
    for var, nid in g.outputs:
        out_var_of.setdefault(nid, var)
    emitted_outputs = set()
    counter = 0
    # node ids are topological (children are added first), so ascending ids keep
    # the original binding order for everything that was not rewritten
    for nid in sorted(g.reachable()):
        n = g.nodes[nid]
        if n.op == INPUT:
            exprs[nid] = g.inputs[n.attrs[0]]
            continue
        if n.op == CONST:
            exprs[nid] = g.constants[n.attrs[0]]
            continue
        kids = [exprs[i] for i in n.inputs]
        if n.op == OPAQUE:
            value = rebuild_opaque(g.opaques[n.attrs[0]], kids)
        elif n.op == TUPLE_NODE:
            value = relax.Tuple(kids)
        elif n.op == TGET:
            value = relax.TupleGetItem(kids[0], n.attrs[0])
        else:
            value = ops.build_call(ops.BY_NAME[n.op], kids, n.attrs)
        value, counter = _bind_inner_calls(bb, value, bindings, counter)
        value = bb.normalize(value)
        var = out_var_of.get(nid)
        if var is None:
            var = relax.DataflowVar(f"lv{counter}", value.ty)
            counter += 1
        else:
            emitted_outputs.add(var)
        bindings.append(relax.VarBinding(var, value))
        exprs[nid] = var
    for var, nid in g.outputs:  # outputs that alias an input, a constant or another output
        if var not in emitted_outputs:
            bindings.append(relax.VarBinding(var, exprs[nid]))
            emitted_outputs.add(var)
    return relax.DataflowBlock(bindings)


def _bind_inner_calls(bb, value, bindings: list, counter: int):
    """``value`` with each call among its arguments bound to a variable of its own first (an
    op that is built as two Relax calls, such as nchwc.egg's layout copies: a reshape, then a
    transpose): a binding holds one call."""
    if not isinstance(value, relax.Call) or not any(isinstance(a, relax.Call) for a in value.args):
        return value, counter
    args = []
    for arg in value.args:
        if isinstance(arg, relax.Call):
            arg, counter = _bind_inner_calls(bb, arg, bindings, counter)
            arg = bb.normalize(arg)
            var = relax.DataflowVar(f"lv{counter}", arg.ty)
            counter += 1
            bindings.append(relax.VarBinding(var, arg))
            arg = var
        args.append(arg)
    return relax.Call(value.op, args, value.attrs, value.ty_args), counter


# ---------------------------------------------------------------- modules

SKIP_ATTRS = ("Primitive", "Codegen", "Composite")


def skip_reason(func) -> str | None:
    if not isinstance(func, relax.Function):
        return "not a Relax function"
    attrs = func.attrs
    for key in SKIP_ATTRS:
        if attrs is not None and key in attrs:
            return f"function has attribute {key} (already lowered or offloaded)"
    if not isinstance(func.body, relax.SeqExpr):
        return "body is not a sequence of binding blocks"
    if not any(isinstance(b, relax.DataflowBlock) for b in func.body.blocks):
        return "no dataflow block (non-dataflow code is left unchanged)"
    return None


def weight_params(func, fold_weights: bool = False) -> list:
    """Parameters costed as constants: those after ``num_input`` when the user says the
    deployment transforms them once (``fold_weights``, e.g. with ``LiftTransformParams``);
    otherwise none, since the default pipeline folds only bound constants."""
    attrs = func.attrs
    if not fold_weights or attrs is None or "num_input" not in attrs:
        return []
    return list(func.params[int(attrs["num_input"]) :])


def module_graphs(mod: tvm.IRModule, fold_weights: bool = False):
    """The TensorGraph of every dataflow block of every function the pass would read,
    with the same weights (blocks it cannot model are skipped): what the pass costs."""
    for _, func in mod.functions.items():
        if skip_reason(func) is not None:
            continue
        weights = weight_params(func, fold_weights)
        for block in func.body.blocks:
            if isinstance(block, relax.DataflowBlock):
                try:
                    yield graph_from_block(block, weights)
                except Unsupported:
                    continue
