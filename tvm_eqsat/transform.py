"""The pass: Relax module in, rewritten Relax module out, never worse by its own estimate.

Per Relax function and dataflow block: model the block as a TensorGraph, load it
into an e-graph, grow it with the rule families, extract the cheapest graph, and
rebuild the block only when the extracted graph differs and is predicted cheaper.
Anything the pass cannot handle is left unchanged with one log line saying why.
With ``speed_check=True`` the rewritten module must also build and time faster than
the original on this machine (``speed_check``), else the original comes back.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple

import tvm
from tvm import relax

from . import cost as cost_mod
from . import te_ops
from .alarms import diagnose
from .describe import census
from .egraph import EGraphError, SoundnessAlarm, TensorEGraph
from .extract import EXTRACTORS, choice_to_graph, chosen_enodes, dag_cost, extract, rewrite_sites, snapshot_node_cost
from .family_defaults import miscompile_risk, off_by_default
from .fold import Folded, fold_constants
from .fusion import fused_reblocks, splits_to_slices
from .graph import (
    TensorGraph,
    Unsupported,
    block_from_graph,
    graph_from_block,
    module_graphs,
    skip_reason,
    weight_params,
)
from .mcts import MCTS_PRESETS
from .report import FunctionReport, Report
from .rules import RuleLibrary, load_library
from .search import SEARCHES, grow
from .validate import suspects, validate

log = logging.getLogger("tvm_eqsat")

SUPPORTED_TARGETS = ("llvm", "cuda")
MIN_GAIN = 1e-6  # relative predicted gain below which a rewrite is not worth a change


@dataclass(frozen=True)
class Options:
    """The pass options (``EqSatPass(target, **options)``), validated up front."""

    search: str = "saturate"
    extractor: str = "ilp"
    cost_model: str = "auto"  # see cost.make_cost_model
    flow: str = "tuned"  # the build the costs are for: "tuned" (MetaSchedule) or "default" (stock untuned / dlight)
    node_limit: int = 20_000
    time_limit_s: float = 30.0
    iter_limit: int = 30
    multi_limit: int | None = None  # saturation iterations that run multi-pattern rules (TENSAT's k_multi); None: all
    seed: int = 0
    rules: tuple[str, ...] | None = None  # rule families or rule names; None = the defaults of family_defaults.py
    mcts_preset: str = "default"  # search="mcts" budgets: "fast", "default", "thorough"
    speed_check: bool = False  # build and time the module before and after; keep the rewrite only if faster
    tune_dir: str | None = None  # speed check with flow="tuned": the MetaSchedule database (None: a cache dir)
    tune_trials: int = 16  # speed check with flow="tuned": MetaSchedule trials per kernel
    validate: bool = True  # check every rewritten block against the original on random inputs
    fold_weights: bool = (
        False  # parameters after num_input are transformed once (LiftTransformParams): weight-only work is free
    )
    fold_constants: bool = True  # compute the constant subgraphs the rewrites create (fold.py); False: TVM folds them

    def to_dict(self) -> dict:
        return asdict(self)


def make_options(**options: Any) -> Options:
    """Options from keyword arguments; a clear ValueError for anything wrong."""
    known = {f.name for f in fields(Options)}
    unknown = set(options) - known
    if unknown:
        raise ValueError(f"unknown option(s) {sorted(unknown)}; known: {sorted(known)}")
    if "rules" in options and options["rules"] is not None:
        rules = options["rules"]
        if isinstance(rules, str):
            rules = (rules,)
        options["rules"] = tuple(rules)
    opts = Options(**options)
    if opts.search not in SEARCHES:
        raise ValueError(f"search={opts.search!r} is not available; available: {SEARCHES}")
    if not isinstance(opts.mcts_preset, str) or opts.mcts_preset not in MCTS_PRESETS:
        raise ValueError(f"mcts_preset={opts.mcts_preset!r} is not available; available: {tuple(MCTS_PRESETS)}")
    if opts.extractor not in EXTRACTORS:
        raise ValueError(f"extractor={opts.extractor!r} is not available; available: {EXTRACTORS}")
    if opts.flow not in cost_mod.FLOWS:
        raise ValueError(f"flow={opts.flow!r} is not available; available: {cost_mod.FLOWS}")
    if not isinstance(opts.cost_model, str):
        raise ValueError(f"cost_model must be a name or a directory path, got {opts.cost_model!r}")
    if opts.cost_model not in cost_mod.COST_MODELS:
        cost_mod.model_directory(opts.cost_model)  # raises for a path without a model (no target yet: no load)
    for name in ("speed_check", "validate", "fold_weights", "fold_constants"):
        if not isinstance(getattr(opts, name), bool):
            raise ValueError(f"{name} must be True or False, got {getattr(opts, name)!r}")
    if opts.tune_dir is not None and not isinstance(opts.tune_dir, str):
        raise ValueError(f"tune_dir must be a directory path or None, got {opts.tune_dir!r}")
    if not isinstance(opts.tune_trials, int) or isinstance(opts.tune_trials, bool) or opts.tune_trials <= 0:
        raise ValueError(f"tune_trials must be a positive integer, got {opts.tune_trials!r}")
    for name in ("node_limit", "iter_limit", "seed"):
        value = getattr(opts, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if opts.node_limit <= 0:
        raise ValueError(f"node_limit must be positive, got {opts.node_limit}")
    if opts.iter_limit < 0:
        raise ValueError(f"iter_limit must not be negative, got {opts.iter_limit}")
    ml = opts.multi_limit
    if ml is not None and (not isinstance(ml, int) or isinstance(ml, bool) or ml < 0):
        raise ValueError(f"multi_limit must be None or a non-negative integer, got {ml!r}")
    if not isinstance(opts.time_limit_s, (int, float)) or not opts.time_limit_s > 0:
        raise ValueError(f"time_limit_s must be a positive number, got {opts.time_limit_s!r}")
    _library(opts)  # raises for unknown rule names
    return opts


def _library(opts: Options, cost=None, target_kind: str = "llvm") -> RuleLibrary:
    """The rules to run: ``opts.rules``, or by default every family less those
    ``family_defaults`` keeps out for this target kind, flow and cost model."""
    library = load_library()
    if opts.rules is not None:
        return library.select(opts.rules)
    layouts = cost_mod.PRICEABLE_LAYOUTS if cost is None else cost_mod.priced_layouts(cost)
    skip = off_by_default(target_kind, opts.flow, layouts)
    return library.select([f for f in library.families if f not in skip])


def resolve_target(target: Any) -> tvm.target.Target:
    """A Target from a Target, a string or a dict; ValueError for unsupported kinds."""
    if isinstance(target, tvm.target.Target):
        tgt = target
    elif isinstance(target, (str, dict)):
        try:
            tgt = tvm.target.Target(target)
        except Exception as err:
            raise ValueError(f"cannot make a TVM target from {target!r}: {err}") from err
    else:
        raise ValueError(f"target must be a tvm.target.Target, str or dict, got {type(target).__name__}")
    if tgt.kind.name not in SUPPORTED_TARGETS:
        raise ValueError(f"target kind {tgt.kind.name!r} is not supported; supported: {SUPPORTED_TARGETS}")
    return tgt


def _target_or_current(target: tvm.target.Target | None) -> tvm.target.Target:
    if target is not None:
        return target
    current = tvm.target.Target.current(allow_none=True)
    if current is not None and current.kind.name in SUPPORTED_TARGETS:
        return current
    log.warning("no supported target given or current (%s); costing for llvm", current)
    return resolve_target("llvm")


# ---------------------------------------------------------------- per block

# The share of the time limit kept for what follows extraction: constant folding, translation
# validation (the interpreter runs both graphs in float64: 6 s of ResNeXt-50's 22 s with a
# tuning beside it on 2 cores) and rebuilding.  Growth and extraction stop before it, so that
# the pass keeps to ``time_limit_s`` unless those alone take more than this share; where growth
# and extraction finish sooner nothing changes.
AFTER_EXTRACTION_SHARE = 0.25


@dataclass
class _Context:
    opts: Options
    library: RuleLibrary
    program: str
    cost: Any
    deadline: float  # when growth and extraction stop: AFTER_EXTRACTION_SHARE of the time limit before its end
    # why kernels that unblock and block again may be miscompiled for this target, or None
    # (family_defaults.miscompile_risk): where it is set, extraction never returns such kernels
    risk: str | None = None


class BlockResult(NamedTuple):
    new_graph: TensorGraph | None  # what the block becomes, constants folded; None: it stays
    before: float  # predicted cost
    after: float
    extracted: TensorGraph  # the graph as extracted, constants unfolded: what the report describes


def _optimize_block(graph: TensorGraph, ctx: _Context, report: FunctionReport, force: bool = False) -> BlockResult:
    """Grow the block's e-graph and extract; a cheaper graph is folded and validated."""
    t = time.perf_counter()
    egraph = TensorEGraph(graph, ctx.program)
    report.add_seconds("build_egraph", time.perf_counter() - t)

    t = time.perf_counter()
    growth = grow(
        egraph,
        ctx.opts.search,
        ctx.library.families,
        node_limit=ctx.opts.node_limit,
        iter_limit=ctx.opts.iter_limit,
        multi_limit=ctx.opts.multi_limit,
        deadline=ctx.deadline,
        cost_model=ctx.cost,
        seed=ctx.opts.seed,
        mcts_preset=ctx.opts.mcts_preset,
    )
    report.add_seconds("grow", time.perf_counter() - t)
    report.iterations += growth.iterations
    report.stop_reason = growth.stop_reason
    for rule, n in growth.rules_applied.items():
        report.rules_applied[rule] = report.rules_applied.get(rule, 0) + n

    t = time.perf_counter()
    snap = egraph.snapshot()
    report.enodes += snap.n_nodes
    report.eclasses += len(snap.classes)
    roots = [snap.root_of[nid] for _, nid in graph.outputs]
    if hasattr(ctx.cost, "prepare"):  # one batched prediction for every e-node
        ctx.cost.prepare(
            [
                (n.op, n.attrs, [snap.ty[k] for k in n.children], snap.ty[c], snap.is_const[c])
                for c, nodes in enumerate(snap.classes)
                for n in nodes
            ]
        )
    node_cost = snapshot_node_cost(snap, ctx.cost, roots)
    new_graph, sites = _extracted_safely(snap, roots, node_cost, graph, ctx, report, force)
    before, after = dag_cost(graph, ctx.cost), dag_cost(new_graph, ctx.cost)
    report.add_seconds("extract", time.perf_counter() - t)

    better = after < before * (1.0 - MIN_GAIN) and new_graph.signature() != graph.signature()
    if better:
        t = time.perf_counter()
        folding = fold_constants(new_graph, graph) if ctx.opts.fold_constants else Folded(new_graph, 0, None)
        report.add_seconds("fold", time.perf_counter() - t)
        folded = folding.graph
        if ctx.opts.validate:
            folded = _validated(graph, new_graph, folding, sites, ctx, report, growth.rules_applied)
        if folded is not new_graph:
            report.constants_folded += folding.count
        return BlockResult(folded, before, after, new_graph)
    if force:
        return BlockResult(new_graph, before, after, new_graph)
    return BlockResult(None, before, before, graph)


# how many times a block at risk is extracted again with the blockings that made its last
# extraction's reblocking kernels priced out, before it is extracted without any blocking
REBLOCK_ROUNDS = 6


def _extracted_safely(snap, roots, node_cost, graph: TensorGraph, ctx: _Context, report: FunctionReport, force: bool):
    """``_extracted``, never with a kernel that unblocks NCHW16c data and blocks it again
    where the target is at risk (``ctx.risk``): LLVM miscompiles some.  Each round prices
    out the e-nodes that blocked again in the last extraction, which keeps the block's other
    blocked regions; after REBLOCK_ROUNDS, every blocking is priced out."""

    def run(cost):
        # the ILP may use what growth left, less a margin for its own overshoot and the rebuild
        budget = max(1.0, 0.9 * (ctx.deadline - time.monotonic()))
        return _extracted(snap, roots, cost, graph, ctx.opts.extractor, budget, force)

    new_graph, sites, enodes = run(node_cost)
    reblocks = fused_reblocks(new_graph) if ctx.risk else []
    if not reblocks:
        return new_graph, sites
    log.warning(
        "the extracted graph held %d kernel(s) that unblock NCHW16c data and block it again, and %s: "
        "extracted again without them",
        len(reblocks),
        ctx.risk,
    )
    priced_out: set[tuple[int, Any]] = set()

    def cost_without(cls: int, node) -> float:
        return math.inf if (cls, node) in priced_out else node_cost(cls, node)

    rounds = 0
    while rounds < REBLOCK_ROUNDS:
        fresh = {enodes[nid] for nid in reblocks} - priced_out
        if not fresh:
            break
        priced_out |= fresh
        rounds += 1
        report.reextracted += 1
        new_graph, sites, enodes = run(cost_without)
        reblocks = fused_reblocks(new_graph)
        if not reblocks:
            return new_graph, sites
    log.warning(
        "after %d round(s) the graph still held such kernels: extracted without channel-blocked regions", rounds
    )
    report.reextracted += 1

    def unblocked_cost(cls: int, node) -> float:
        return math.inf if node.op == "ToBlocked" and not snap.is_const[cls] else node_cost(cls, node)

    new_graph, sites, _ = run(unblocked_cost)
    return new_graph, sites


def _extracted(snap, roots, node_cost, graph: TensorGraph, extractor: str, budget: float, force: bool):
    """(the cheapest graph under ``node_cost``, its rewrite sites, the (e-class, e-node) of
    each of its nodes)."""
    choice = extract(snap, roots, node_cost, extractor, budget)
    new_graph = choice_to_graph(snap, choice, graph)
    sites = rewrite_sites(snap, choice, graph)  # (splits_to_slices keeps node ids)
    if not force:  # (force: the roundtrip, a check of the conversions alone)
        new_graph = splits_to_slices(new_graph)  # the form TVM fuses better, where it is
    return new_graph, sites, chosen_enodes(snap, choice, graph)


class RewriteRejected(Exception):
    """A rewritten block failed translation validation (a rule is wrong)."""


def _validated(
    graph: TensorGraph,
    new_graph: TensorGraph,
    folding: Folded,
    sites: list[tuple[int, int]],
    ctx: _Context,
    report: FunctionReport,
    rules_applied: dict[str, int],
) -> TensorGraph:
    """``folding``'s graph (``new_graph`` with its constants folded) if it computes what
    ``graph`` computes, at the outputs and at the rewrite ``sites``, else ``new_graph`` if
    that does; RewriteRejected if neither does."""
    folded, node_of = folding.graph, folding.node_of
    checkpoints = sites if node_of is None else [(a, node_of[b]) for a, b in sites if b in node_of]
    result = validate(graph, folded, seed=ctx.opts.seed, checkpoints=checkpoints)
    report.add_seconds("validate", result.seconds)
    failed_node = result.failed_node if folded is new_graph else None  # (in new_graph's ids)
    if not result.ok and folded is not new_graph:
        unfolded = validate(graph, new_graph, seed=ctx.opts.seed, checkpoints=sites)
        report.add_seconds("validate", unfolded.seconds)
        failed_node = unfolded.failed_node
        if unfolded.ok:
            log.warning(
                "constant folding changed %s by %.3g of its magnitude; the block keeps its "
                "constant subgraphs for TVM to fold",
                result.failed_output,
                result.max_rel_diff,
            )
            result, folded = unfolded, new_graph
    v = report.validation
    v["blocks"] = v.get("blocks", 0) + 1
    v["max_rel_diff"] = max(v.get("max_rel_diff", 0.0), result.max_rel_diff)
    v["checkpoints"] = v.get("checkpoints", 0) + result.checkpoints
    if not result.ok:
        rules = suspects(ctx.library, rules_applied, graph, new_graph, failed_node) or sorted(rules_applied)
        raise RewriteRejected(
            f"rewrite failed translation validation ({result.failed_output}: relative difference "
            f"{result.max_rel_diff:.3g}); rules that made its new nodes: {', '.join(rules) or 'none'}"
        )
    return folded


def _optimize_function(name: str, func, ctx: _Context, force: bool = False):
    """(new function or None, report) for one function; never raises for bad IR."""
    report = FunctionReport(name)
    start = time.perf_counter()
    reason = skip_reason(func)
    if reason is not None:
        report.skipped.append(reason)
        log.info("%s left unchanged: %s", name, reason)
        return None, report
    weights = weight_params(func, ctx.opts.fold_weights)
    blocks = list(func.body.blocks)
    changed = False
    for i, block in enumerate(blocks):
        if not isinstance(block, relax.DataflowBlock):
            continue
        where = f"{name} block {i}"
        if time.monotonic() >= ctx.deadline and not force:
            report.skipped.append(f"block {i}: time limit reached before it")
            log.info("%s left unchanged: time limit reached", where)
            continue
        try:
            t = time.perf_counter()
            graph = graph_from_block(block, weights)
            report.add_seconds("convert", time.perf_counter() - t)
            result = _optimize_block(graph, ctx, report, force)
            if result.new_graph is not None:
                t = time.perf_counter()
                blocks[i] = block_from_graph(result.new_graph)
                report.add_seconds("rebuild", time.perf_counter() - t)
                report.blocks += 1
                changed = True
            report.cost_before += result.before  # only now: a failed rebuild counts no gain
            report.cost_after += result.after  # equals before when the block stays
            for total, counts in (
                (report.census_before, census(graph)),
                (report.census_after, census(result.extracted)),
            ):
                for key, n in counts.items():
                    total[key] = total.get(key, 0) + n
        except SoundnessAlarm as alarm:  # a rule is unsound: never a skipped block in silence
            message = diagnose(graph, ctx.program, ctx.library, alarm).describe()
            _alarm(report, where, f"block {i}: {message}")
        except RewriteRejected as err:
            _alarm(report, where, f"block {i}: {err}")
        except (Unsupported, EGraphError) as err:
            report.skipped.append(f"block {i}: {err}")
            log.info("%s left unchanged: %s", where, err)
        except Exception as err:  # a bug of ours must not break the user's build
            _alarm(report, where, f"block {i}: internal error {type(err).__name__}: {err}", exc_info=True)
    report.seconds["total"] = time.perf_counter() - start
    if not changed:
        return None, report
    report.changed = True
    return _with_blocks(func, blocks), report


def _alarm(report: FunctionReport, where: str, message: str, exc_info: bool = False) -> None:
    """The block stays unchanged, and the report and the log say why, loudly."""
    report.skipped.append(message)
    report.alarms.append(message)
    log.warning("%s left unchanged: %s", where, message, exc_info=exc_info)


def predicted_cost(
    mod: tvm.IRModule, target: Any = None, cost_model: str = "roofline", flow: str = "tuned", fold_weights: bool = False
) -> float:
    """A module's predicted cost (microseconds): every dataflow block the pass can read,
    each shared node once, under ``cost_model`` for ``target`` (what the report's
    ``cost_before``/``cost_after`` measure).  Blocks it cannot read count nothing."""
    tgt = _target_or_current(resolve_target(target) if target is not None else None)
    cost = cost_mod.make_cost_model(
        cost_model, tgt.kind.name, flow, cost_mod.vector_bits(tgt), cost_mod.target_cpu(tgt)
    )
    graphs = list(module_graphs(mod, fold_weights))
    if hasattr(cost, "prepare"):
        cost.prepare([
            (n.op, n.attrs, [g.nodes[i].ty for i in n.inputs], n.ty, n.is_const) for g in graphs for n in g.nodes
        ])  # fmt: skip
    return sum(dag_cost(g, cost) for g in graphs)


def _with_blocks(func, blocks) -> relax.Function:
    """``func`` with new binding blocks, normalised so every expression has its type."""
    body = relax.SeqExpr(blocks, func.body.body)
    new_func = relax.Function(func.params, body, func.ret_ty, func.is_pure, func.attrs, func.span)
    return relax.BlockBuilder().normalize(new_func)


def _ill_formed(mod: tvm.IRModule) -> str | None:
    """Why the module is not well formed, or None (TVM's check raises on failure)."""
    try:
        relax.analysis.well_formed(mod)
    except Exception as err:
        return str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
    return None


def _run(mod: tvm.IRModule, target: tvm.target.Target, opts: Options, force: bool = False):
    start = time.perf_counter()
    cost = cost_mod.make_cost_model(
        opts.cost_model, target.kind.name, opts.flow, cost_mod.vector_bits(target), cost_mod.target_cpu(target)
    )
    library = _library(opts, cost, target.kind.name)
    risk = miscompile_risk(library.families, target)
    deadline = time.monotonic() + (1.0 - AFTER_EXTRACTION_SHARE) * opts.time_limit_s
    ctx = _Context(opts, library, library.program(), cost, deadline, risk)
    report = Report(str(target), opts.to_dict(), ctx.cost.name)
    new_mod = mod.clone()
    for gv, func in list(mod.functions.items()):
        name = gv.name_hint
        new_func, frep = _optimize_function(name, func, ctx, force)
        if new_func is not None:
            candidate = new_mod.clone()
            candidate[gv] = new_func
            try:
                candidate = te_ops.attach(candidate)  # the TE kernels it calls (fast_math.egg)
                problem = _ill_formed(candidate)
            except ValueError as err:
                problem = str(err)
            if problem is None:
                new_mod = candidate
            else:
                frep.changed = False
                frep.cost_after = frep.cost_before
                _alarm(frep, name, f"rewritten function was not well formed: {problem}")
        report.functions[name] = frep
        if isinstance(func, relax.Function):
            log.info(
                "%s: predicted cost %.1f -> %.1f us, %d e-nodes, %.2f s%s",
                name,
                frep.cost_before,
                frep.cost_after,
                frep.enodes,
                frep.seconds.get("total", 0.0),
                "" if frep.changed else " (unchanged)",
            )
    if opts.speed_check and any(f.changed for f in report.functions.values()):
        new_mod = _speed_checked(mod, new_mod, target, opts, report)
    report.seconds = time.perf_counter() - start
    return new_mod, report


def _speed_checked(
    mod: tvm.IRModule, new_mod: tvm.IRModule, target: tvm.target.Target, opts: Options, report: Report
) -> tvm.IRModule:
    """``new_mod`` if the measured speed check keeps it, else ``mod`` (``speed_check``)."""
    from . import speed_check  # imports MetaSchedule: only when a speed check runs

    result = speed_check.check(mod, new_mod, target, opts.flow, tune_dir=opts.tune_dir, trials=opts.tune_trials)
    report.speed_check = result.to_dict()
    log.info("%s", speed_check.describe(result))
    if result.kept:
        return new_mod
    for frep in report.functions.values():
        if frep.changed:
            frep.changed = False
            frep.skipped.append(speed_check.describe(result))
    return mod


# ---------------------------------------------------------------- public API


def optimize(mod: tvm.IRModule, target: Any = None, **options: Any) -> tuple[tvm.IRModule, Report]:
    """Rewrite ``mod`` for ``target``; returns ``(new_mod, report)``. ``mod`` is not modified."""
    opts = make_options(**options)
    tgt = _target_or_current(None if target is None else resolve_target(target))
    if not isinstance(mod, tvm.IRModule):
        raise ValueError(f"optimize expects a tvm.IRModule, got {type(mod).__name__}")
    return _run(mod, tgt, opts)


def EqSatPass(target: Any = None, **options: Any) -> tvm.ir.transform.Pass:
    """The equality-saturation rewrite as a TVM module pass.

    ``target=None`` uses ``tvm.target.Target.current()`` when the pass runs.
    Options are checked here, so a bad option fails before any work.
    """
    opts = make_options(**options)
    tgt = None if target is None else resolve_target(target)

    def transform(mod: tvm.IRModule, _ctx) -> tvm.IRModule:
        return _run(mod, _target_or_current(tgt), opts)[0]

    return tvm.ir.transform.module_pass(transform, opt_level=0, name="tvm_eqsat.EqSatPass")


def pipeline(target: Any, **options: Any) -> tvm.ir.transform.Pass:
    """The target's stock Relax pipeline with EqSatPass in front (for ``tvm.compile``)."""
    tgt = resolve_target(target)
    return tvm.transform.Sequential(
        [EqSatPass(tgt, **options), relax.get_default_pipeline(tgt)], name="tvm_eqsat.pipeline"
    )


def roundtrip(mod: tvm.IRModule, through_egraph: bool = True) -> tvm.IRModule:
    """Rebuild every modelled block without rewriting (a check of the conversions).

    With ``through_egraph`` the graph goes into the e-graph and is extracted back.
    """
    opts = make_options(rules=(), time_limit_s=3600.0)
    if through_egraph:
        return _run(mod, resolve_target("llvm"), opts, force=True)[0]
    new_mod = mod.clone()
    for gv, func in mod.functions.items():
        if skip_reason(func) is not None:
            continue
        blocks = [
            block_from_graph(graph_from_block(b)) if isinstance(b, relax.DataflowBlock) else b for b in func.body.blocks
        ]
        new_mod[gv] = _with_blocks(func, blocks)
    return new_mod
