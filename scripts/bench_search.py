"""Search benchmark: saturation against MCTS at the same node limits.

For every model and dataflow block: grow the e-graph with ``saturate`` and with
``mcts`` (each preset or variant asked for, several seeds) under the same node
limit, extract with the pass's final extractor (ILP; roofline costs, or ``--cost-model``) and
record the predicted cost, the e-graph size, the search time and, for MCTS, the
rule families it applied in order.

Node limits (``--limits``): ``20000`` is the pass default; ``half`` and
``quarter`` are tighter limits where the order of the rules matters:
``initial + (saturated - initial) / 2`` (or ``/ 4``) e-nodes, with ``saturated``
the size saturation reaches under 20000 (a limit of the saturated size divided
by 2 would be below the loaded e-graph for every model here).  Blocks that no
rule grows get no tighter limit.

Runs are interleaved (saturate, mcts seed 0, saturate, mcts seed 1, ...) because
this machine's speed drifts; times are medians, seeds give mean and spread.
``--state-ab`` also runs MCTS with each state-handling method (``replay``,
``stack``, ``auto``; same seeds, so the same search) and records where the time goes.

Writes ``benchmarks/results/search-llvm.csv`` (one row per run), ``.json``
(machine, versions, rules, presets, command, summary) and ``.md`` (tables).

    python scripts/bench_search.py                # small models, all limits, 3 seeds
    python scripts/bench_search.py --full         # the full-size models too
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import time
from collections import Counter
from dataclasses import asdict

from tqdm import tqdm

from tvm_eqsat import models, provenance
from tvm_eqsat.cost import cpu_vector_bits, make_cost_model, priced_layouts
from tvm_eqsat.egraph import TensorEGraph
from tvm_eqsat.extract import choice_cost, extract, snapshot_node_cost
from tvm_eqsat.family_defaults import default_families
from tvm_eqsat.graph import Unsupported, graph_from_block
from tvm_eqsat.mcts import MCTS_PRESETS, mcts_config
from tvm_eqsat.rules import load_library
from tvm_eqsat.search import grow
from tvm_eqsat.tune import llvm_target

SMALL = [
    "bert-small", "resnext50", "inception-v3", "nasnet-a", "nasrnn",
    "squeezenet", "vgg19", "resnet50", "mobilenet-v2", "vit-b16",
]  # fmt: skip
FULL = [
    "bert-base", "resnext50", "inception-v3", "nasnet-a", "nasrnn",
    "squeezenet", "vgg19", "resnet50", "mobilenet-v2", "vit-b16",
]  # fmt: skip
FIELDS = [
    "model", "scale", "limit_rule", "node_limit", "search", "seed", "initial_enodes", "saturated_enodes",
    "cost_before_us", "cost_after_us", "gain_pct", "enodes", "grow_s", "extract_s", "stop_reason",
    "iterations", "actions", "simulations", "rewards", "reward_s", "push_s", "pop_s", "run_s",
    "pushes", "pops", "runs",
]  # fmt: skip
DEFAULT_LIMIT = 20000
TOL = 1e-6  # relative: costs closer than this are equal


def parse_variant(spec: str) -> tuple[str, dict]:
    """``saturate`` (an overshooting iteration is rolled back whole, the pass's default),
    ``saturate:family`` (only the family that overshot is rolled back) or
    ``mcts:<preset>[:key=value,...]`` -> (search, grow keyword arguments)."""
    if spec == "saturate":
        return "saturate", {}
    if spec == "saturate:family":
        return "saturate", {"rollback": "family"}
    parts = spec.split(":")
    if parts[0] != "mcts" or len(parts) not in (2, 3):
        raise SystemExit(f"bad variant {spec!r}: saturate, saturate:family or mcts:<preset>[:key=value,...]")
    kwargs: dict = {"mcts_preset": parts[1]}
    if len(parts) == 3:
        for item in parts[2].split(","):
            key, value = item.split("=")
            kwargs[key] = json.loads(value) if value[:1] in "0123456789.-[{tfn" else value
    mcts_config(kwargs["mcts_preset"], **{k: v for k, v in kwargs.items() if k != "mcts_preset"})
    return "mcts", kwargs


def model_blocks(name: str, full: bool):
    """(block index, TensorGraph) for the modelled dataflow blocks of ``main``."""
    from tvm import relax

    model = (models.MODELS if full else models.SMALL)[name]()
    func = model.mod["main"]
    weights = []
    if func.attrs is not None and "num_input" in func.attrs:
        weights = list(func.params[int(func.attrs["num_input"]) :])
    out = []
    for i, block in enumerate(func.body.blocks):
        if isinstance(block, relax.DataflowBlock):
            try:
                out.append((i, graph_from_block(block, weights)))
            except Unsupported:
                pass
    return out


def run_once(graph, library, search: str, kwargs: dict, limit: int, seed: int, cost, ilp_s: float) -> dict:
    egraph = TensorEGraph(graph, library.program())
    t = time.perf_counter()
    result = grow(
        egraph, search, library.families, node_limit=limit, iter_limit=30,
        deadline=time.monotonic() + 3600, cost_model=cost, seed=seed, **kwargs,
    )  # fmt: skip
    grow_s = time.perf_counter() - t
    t = time.perf_counter()
    snap = egraph.snapshot()
    roots = [snap.root_of[nid] for _, nid in graph.outputs]
    node_cost = snapshot_node_cost(snap, cost, roots)
    choice = extract(snap, roots, node_cost, "ilp", ilp_s)
    after = choice_cost(snap, choice, roots, node_cost)
    stats = result.stats
    return {
        "cost_after_us": after, "enodes": egraph.size(), "grow_s": grow_s, "extract_s": time.perf_counter() - t,
        "stop_reason": result.stop_reason, "iterations": result.iterations, "actions": " ".join(result.actions),
        "simulations": stats.get("simulations", ""), "rewards": stats.get("evaluations", ""),
        "reward_s": stats.get("eval_s", ""), "push_s": stats.get("push_s", ""), "pop_s": stats.get("pop_s", ""),
        "run_s": stats.get("run_s", ""), "pushes": stats.get("pushes", ""), "pops": stats.get("pops", ""),
        "runs": stats.get("runs", ""),
    }  # fmt: skip


def block_limits(graph, library, rules: list[str]) -> tuple[int, int, dict[str, int]]:
    """(initial e-nodes, saturated e-nodes under the default limit, limit rule -> limit)."""
    egraph = TensorEGraph(graph, library.program())
    initial = egraph.size()
    grow(
        egraph, "saturate", library.families, node_limit=DEFAULT_LIMIT, iter_limit=30, deadline=time.monotonic() + 3600
    )
    saturated = egraph.size()
    limits = {}
    for rule in rules:
        if rule == "half":
            limit = initial + (saturated - initial) // 2
        elif rule == "quarter":
            limit = initial + (saturated - initial) // 4
        else:
            limit = int(rule)
        if rule in ("half", "quarter") and saturated - initial < 4:
            continue  # nothing grows: no tighter limit to speak of
        limits[rule] = limit
    return initial, saturated, limits


def bench_model(
    name, full, library, variants, rules, seeds, repeat, cost, ilp_s, cache, cache_path, prefix=""
) -> list[dict]:
    """Rows of every variant at every limit on one model; ``prefix`` keys the cache by the
    cost model and rules (empty for the roofline with every family)."""
    scale = "full" if full else "small"
    blocks = model_blocks(name, full)
    if not blocks:
        return []
    info = [block_limits(g, library, rules) for _, g in blocks]
    base = sum(_choice_cost_of(g, cost) for _, g in blocks)
    rows = []
    for rule in rules:
        if not all(rule in lim for _, _, lim in info):
            continue
        jobs = []  # interleaved: rep 0 of every variant, then rep 1, ...
        for rep in range(max(repeat, seeds)):
            for spec in variants:
                search, kwargs = parse_variant(spec)
                if rep < (repeat if search == "saturate" else seeds):
                    jobs.append((spec, search, kwargs, rep))
        for spec, search, kwargs, rep in jobs:
            key = f"{prefix}{scale}|{name}|{rule}|{spec}|{rep}"
            if key in cache:
                rows.append(cache[key])
                continue
            parts = [
                run_once(g, library, search, kwargs, lim[rule], rep, cost, ilp_s)
                for (_, g), (_, _, lim) in zip(blocks, info)
            ]
            row = {
                "model": name, "scale": scale, "limit_rule": rule,
                "node_limit": "+".join(str(lim[rule]) for _, _, lim in info), "search": spec, "seed": rep,
                "initial_enodes": sum(i for i, _, _ in info), "saturated_enodes": sum(s for _, s, _ in info),
                "cost_before_us": round(base, 4),
            }  # fmt: skip
            for field in ("cost_after_us", "enodes", "grow_s", "extract_s", "iterations", "simulations",
                          "rewards", "reward_s", "push_s", "pop_s", "run_s", "pushes", "pops", "runs"):  # fmt: skip
                values = [p[field] for p in parts]
                row[field] = sum(values) if all(isinstance(v, (int, float)) for v in values) else ""
            row["cost_after_us"] = round(row["cost_after_us"], 4)
            row["gain_pct"] = round(100 * (1 - row["cost_after_us"] / base), 3) if base else 0.0
            for field in ("grow_s", "extract_s", "reward_s", "push_s", "pop_s", "run_s"):
                if row[field] != "":
                    row[field] = round(row[field], 4)
            row["stop_reason"] = " | ".join(p["stop_reason"] for p in parts)
            row["actions"] = " | ".join(p["actions"] for p in parts)
            rows.append(row)
            cache[key] = row
            if cache_path:
                with open(cache_path, "a") as f:
                    f.write(json.dumps({"key": key, "row": row}) + "\n")
    return rows


PASS_FIELDS = [
    "model", "limit_rule", "node_limit", "search", "seed", "wall_s", "pass_s", "grow_s", "extract_s",
    "cost_before_us", "cost_after_us", "changed", "enodes", "stop_reason",
]  # fmt: skip


def pass_check(name: str, library, rules: list[str], variants: list[str], setup: dict | None = None) -> list[dict]:
    """The whole pass (``tvm_eqsat.optimize``) on a small model with each search: end-to-end seconds.
    ``setup``: the target, cost model and rule families the pass runs with (None: its defaults)."""
    import tvm_eqsat

    setup = setup or {"target": "llvm"}

    model = models.SMALL[name]()
    blocks = model_blocks(name, False)
    if not blocks:
        return []
    _, _, limits = block_limits(blocks[0][1], library, rules)
    rows = []
    for rule, limit in limits.items():
        for spec in variants:
            search, kwargs = parse_variant(spec)
            if set(kwargs) - {"mcts_preset"}:
                continue  # the pass takes a preset, not single settings
            t = time.perf_counter()
            _, report = tvm_eqsat.optimize(model.mod, search=search, node_limit=limit, **setup, **kwargs)
            wall = time.perf_counter() - t
            f = report.functions["main"]
            rows.append({
                "model": name, "limit_rule": rule, "node_limit": limit, "search": spec, "seed": 0,
                "wall_s": round(wall, 3), "pass_s": round(f.seconds.get("total", 0.0), 3),
                "grow_s": round(f.seconds.get("grow", 0.0), 3), "extract_s": round(f.seconds.get("extract", 0.0), 3),
                "cost_before_us": round(f.cost_before, 4), "cost_after_us": round(f.cost_after, 4),
                "changed": f.changed, "enodes": f.enodes, "stop_reason": f.stop_reason,
            })  # fmt: skip
    return rows


PUSHPOP_FIELDS = ["egraph", "enodes", "push_ms", "pop_ms", "run_ms_median", "run_ms_max", "families"]


def pushpop_micro(names: list[str], library, reps: int = 21) -> list[dict]:
    """What a push, a pop and one iteration of one family cost, from an empty egglog
    e-graph to grown model e-graphs (medians of ``reps``)."""
    from egglog import bindings

    from tvm_eqsat.language import language

    def timed(egraph, text: str) -> float:
        cmds = egraph.parse_program(text)
        t = time.perf_counter()
        egraph.run_program(*cmds)
        return time.perf_counter() - t

    def measure(raw, label: str, enodes: int, runs: list[float] | None = None) -> dict:
        push, pop = [], []
        for _ in range(reps):
            push.append(timed(raw, "(push)"))
            pop.append(timed(raw, "(pop)"))
        row = {"egraph": label, "enodes": enodes, "push_ms": round(1e3 * statistics.median(push), 3),
               "pop_ms": round(1e3 * statistics.median(pop), 3), "run_ms_median": "", "run_ms_max": "",
               "families": len(library.families)}  # fmt: skip
        if runs:
            row["run_ms_median"] = round(1e3 * statistics.median(runs), 3)
            row["run_ms_max"] = round(1e3 * max(runs), 3)
        return row

    rows = []
    raw = bindings.EGraph()
    rows.append(measure(raw, "empty egglog e-graph", 0))
    timed(raw, language())
    rows.append(measure(raw, "tensor language, no rules", 0))
    timed(raw, library.program())
    rows.append(measure(raw, "language + rule library", 0))
    for name in names:
        graph = model_blocks(name, False)[0][1]
        egraph = TensorEGraph(graph, library.program())
        for it in range(4):
            runs = []  # each family once on this state, undone
            for family in library.families:
                egraph.push()
                t = time.perf_counter()
                egraph.run_ruleset(family)
                runs.append(time.perf_counter() - t)
                egraph.pop()
            rows.append(measure(egraph.egraph, f"{name} (small), after {it} iteration(s)", egraph.size(), runs))
            for family in library.families:
                egraph.run_ruleset(family)
    return rows


def _choice_cost_of(graph, cost) -> float:
    from tvm_eqsat.extract import dag_cost

    return dag_cost(graph, cost)


def compress(actions: str) -> str:
    """'merges merges layout' -> 'merges x2, layout' (runs of one family collapsed)."""
    out = []
    for block in actions.split(" | "):
        words, parts = block.split(), []
        i = 0
        while i < len(words):
            j = i
            while j < len(words) and words[j] == words[i]:
                j += 1
            parts.append(words[i] + (f" x{j - i}" if j - i > 1 else ""))
            i = j
        out.append(", ".join(parts) or "-")
    return " | ".join(out)


def summarise(rows: list[dict], variants: list[str], baseline: str = "saturate") -> tuple[list[dict], dict]:
    """One line per (scale, model, limit rule): the baseline search against each other variant."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["scale"], r["model"], r["limit_rule"]), []).append(r)
    lines, verdicts = [], {v: Counter() for v in variants if v != baseline}
    for (scale, model, rule), rs in groups.items():
        sat = [r for r in rs if r["search"] == baseline]
        if not sat:
            continue
        sat_cost = sat[0]["cost_after_us"]
        line = {
            "scale": scale, "model": model, "limit_rule": rule, "node_limit": rs[0]["node_limit"],
            "initial": rs[0]["initial_enodes"], "saturated": rs[0]["saturated_enodes"],
            "before": rs[0]["cost_before_us"], "sat_cost": sat_cost, "sat_enodes": sat[0]["enodes"],
            "sat_s": statistics.median(r["grow_s"] for r in sat), "mcts": {},
        }  # fmt: skip
        for v in verdicts:
            ms = [r for r in rs if r["search"] == v]
            if not ms:
                continue
            costs = [r["cost_after_us"] for r in ms]
            mean = statistics.mean(costs)
            worst = max(costs)
            if worst > sat_cost * (1 + TOL):
                verdict = "worse"
            elif worst < sat_cost * (1 - TOL):
                verdict = "better"
            else:
                verdict = "equal" if min(costs) >= sat_cost * (1 - TOL) else "better (some seeds)"
            verdicts[v][verdict] += 1
            line["mcts"][v] = {
                "mean": mean, "spread": worst - min(costs), "worst": worst, "verdict": verdict,
                "s_median": statistics.median(r["grow_s"] for r in ms),
                "s_min": min(r["grow_s"] for r in ms), "s_max": max(r["grow_s"] for r in ms),
                "enodes": statistics.median(r["enodes"] for r in ms),
                "actions": compress(ms[0]["actions"]), "stop": ms[0]["stop_reason"],
                "same_actions_all_seeds": len({r["actions"] for r in ms}) == 1,
            }  # fmt: skip
        lines.append(line)
    return lines, {v: dict(c) for v, c in verdicts.items()}


def markdown(lines, verdicts, state_rows, pass_rows, pushpop_rows, sidecar) -> str:
    out = [
        f"# Search: saturation vs. MCTS ({sidecar['cost_model']} costs, ILP extraction)",
        "",
        f"Command: `{sidecar['command']}`  ",
        f"Machine: {sidecar['machine']}, {sidecar['cpus']} cores, shared with other jobs "
        f"(load average {sidecar['load_average_at_start'][0]:.1f} at start); times are medians over seeds/repeats "
        "and noisy.  ",
        f"Rule families: {', '.join(f'{k} ({v})' for k, v in sidecar['rule_families'].items())}.  ",
        "Costs: predicted microseconds after ILP extraction (the pass's final extractor). "
        "`half`/`quarter`: node limit = initial + (saturated - initial) / 2 (or / 4).",
        "",
    ]
    base = sidecar.get("baseline", "saturate")
    for v, counts in verdicts.items():
        out.append(f"**{v}** vs {base} over all rows: " + ", ".join(f"{k}: {n}" for k, n in sorted(counts.items())))
        out.append("")
    variants = list(verdicts)[:2]
    head = ["scale", "model", "limit", "e-nodes init/sat", "cost before", f"{base} cost", f"{base} s"]
    for v in variants:
        head += [f"{v} cost (mean ± spread)", f"{v} s (median [min-max])", f"vs {base}"]
    head += [f"{variants[0]} actions (seed 0)" if variants else "actions"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    for ln in lines:
        cells = [
            ln["scale"], ln["model"], f"{ln['limit_rule']} ({ln['node_limit']})", f"{ln['initial']}/{ln['saturated']}",
            f"{ln['before']:.2f}", f"{ln['sat_cost']:.2f}", f"{ln['sat_s']:.2f}",
        ]  # fmt: skip
        for v in variants:
            m = ln["mcts"].get(v)
            if m is None:
                cells += ["", "", ""]
                continue
            cells += [
                f"{m['mean']:.2f} ± {m['spread']:.2f}",
                f"{m['s_median']:.2f} [{m['s_min']:.2f}-{m['s_max']:.2f}]",
                m["verdict"],
            ]
        first = ln["mcts"].get(variants[0]) if variants else None
        cells.append(
            (first["actions"] + ("" if first["same_actions_all_seeds"] else " (seeds differ)")) if first else ""
        )
        out.append("| " + " | ".join(cells) + " |")
    others = list(verdicts)[2:]
    if others:
        out += ["", "## Other variants", ""]
        head = ["scale", "model", "limit", f"{base} cost", f"{base} s"]
        for v in others:
            head += [f"{v} cost (mean ± spread)", f"{v} s (median [min-max])", f"vs {base}"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "---|" * len(head))
        for ln in lines:
            cells = [ln["scale"], ln["model"], f"{ln['limit_rule']} ({ln['node_limit']})", f"{ln['sat_cost']:.2f}",
                     f"{ln['sat_s']:.2f}"]  # fmt: skip
            for v in others:
                m = ln["mcts"].get(v)
                cells += ["", "", ""] if m is None else [
                    f"{m['mean']:.2f} ± {m['spread']:.2f}",
                    f"{m['s_median']:.2f} [{m['s_min']:.2f}-{m['s_max']:.2f}]",
                    m["verdict"],
                ]  # fmt: skip
            out.append("| " + " | ".join(cells) + " |")
    if state_rows:
        out += [
            "",
            "## State handling: replay from the root checkpoint, a push per tree level, or adaptive",
            "",
            "Same searches (same seeds, same actions); seconds summed over the search.",
            "",
            "| model | limit | method | search s (median) | push + pop + runs s | push s | pop s | ruleset runs s "
            "| pushes | pops | runs | ms/push | ms/pop | ms/run |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        groups: dict[tuple, list[dict]] = {}
        for r in state_rows:
            groups.setdefault((r["scale"], r["model"], r["limit_rule"], r["search"]), []).append(r)
        for (scale, model, rule, spec), rs in groups.items():
            med = {
                k: statistics.median(float(r[k]) for r in rs)
                for k in ("grow_s", "push_s", "pop_s", "run_s", "pushes", "pops", "runs")
            }
            state_s = statistics.median(float(r["push_s"]) + float(r["pop_s"]) + float(r["run_s"]) for r in rs)
            per = {k: 1e3 * sum(float(r[f"{k}_s"]) for r in rs) / max(1, sum(int(r[f"{k}es" if k == "push" else f"{k}s"]) for r in rs))
                   for k in ("push", "pop", "run")}  # fmt: skip
            out.append(
                f"| {model} ({scale}) | {rule} | {spec.split('state=')[-1].split(',')[0]} | {med['grow_s']:.2f} | "
                f"{state_s:.2f} | {med['push_s']:.2f} | {med['pop_s']:.2f} | {med['run_s']:.2f} | {med['pushes']:.0f} | "
                f"{med['pops']:.0f} | {med['runs']:.0f} | {per['push']:.1f} | {per['pop']:.1f} | {per['run']:.1f} |"
            )
    if pushpop_rows:
        out += [
            "",
            "## What a saved copy costs: egglog push/pop against one iteration of one family",
            "",
            "Medians; `run` = one iteration of one rule family (and the analyses) on that state.",
            "",
            "| e-graph | e-nodes | push ms | pop ms | run ms (median over families) | run ms (max) |",
            "|---|---|---|---|---|---|",
        ]
        for r in pushpop_rows:
            out.append(
                f"| {r['egraph']} | {r['enodes']} | {r['push_ms']} | {r['pop_ms']} | {r['run_ms_median']} | "
                f"{r['run_ms_max']} |"
            )
    if pass_rows:
        out += [
            "",
            "## The whole pass (`tvm_eqsat.optimize`, small models, seed 0)",
            "",
            "Wall seconds of `optimize(mod, target, search=..., mcts_preset=..., node_limit=...)` (with the "
            "default options, the pass's own rules and cost model; else those above): conversion, e-graph "
            "building, growth, ILP extraction and rebuilding.",
            "",
            "| model | limit | search | wall s | grow s | extract s | cost before | cost after | e-nodes | stop |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in pass_rows:
            out.append(
                f"| {r['model']} | {r['limit_rule']} ({r['node_limit']}) | {r['search']} | {r['wall_s']:.2f} | "
                f"{r['grow_s']:.2f} | {r['extract_s']:.2f} | {r['cost_before_us']:.2f} | {r['cost_after_us']:.2f} | "
                f"{r['enodes']} | {r['stop_reason']} |"
            )
    return "\n".join(out) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=SMALL, help="small variants (tvm_eqsat.models.SMALL)")
    parser.add_argument("--full", nargs="*", default=None, help="full-size models too (no names: all of FULL)")
    parser.add_argument(
        "--variants", nargs="+",
        default=["saturate:family", "saturate", "mcts:fast", "mcts:default", "mcts:thorough",
                 "mcts:default:rollout=random,warm_start=false"],
        help="saturate, saturate:family, mcts:<preset>[:key=value,...] (MctsConfig fields)",
    )  # fmt: skip
    parser.add_argument(
        "--baseline", default="saturate:family",
        help="the variant the others are judged against: saturation that rolls back only the family that "
        "overshot the node limit keeps what fits (the whole-iteration rollback can keep nothing)",
    )  # fmt: skip
    parser.add_argument("--limits", nargs="+", default=[str(DEFAULT_LIMIT), "half", "quarter"])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3, help="saturation runs per limit (median time)")
    parser.add_argument("--ilp-limit", type=float, default=30.0)
    parser.add_argument(
        "--state-ab",
        nargs="*",
        default=[],
        metavar="MODEL:LIMIT",
        help="also compare state=replay, stack and auto (mcts:default) on these small models",
    )
    parser.add_argument(
        "--pushpop",
        nargs="*",
        default=[],
        metavar="MODEL",
        help="also time push, pop and one family iteration on these small models' e-graphs",
    )
    parser.add_argument(
        "--no-pass-check",
        action="store_true",
        help="skip running the whole pass (optimize) on each small model with each preset",
    )
    parser.add_argument(
        "--cost-model",
        default="roofline",
        help="what extraction and MCTS's rewards price nodes with: roofline, xgb (the shipped tuned-flow model of "
        "--mcpu's code, which prices layouts where it has measured them) or a model directory",
    )
    parser.add_argument("--mcpu", default="generic", help="the llvm target's CPU (its vector width and shipped model)")
    parser.add_argument(
        "--rules",
        nargs="+",
        default=["all"],
        help="rule families or rules: 'all' (every family in rules/), 'default' (the pass's default set for the "
        "llvm tuned flow and this cost model), or names",
    )
    parser.add_argument("--cache", default="/tmp/bench_search_cache.jsonl", help="resume from here ('' for none)")
    parser.add_argument("--out", default="benchmarks/results/search-llvm.csv")
    args = parser.parse_args(argv)
    for spec in args.variants:
        parse_variant(spec)
    cost = make_cost_model(args.cost_model, "llvm", "tuned", cpu_vector_bits(args.mcpu), args.mcpu)
    library = load_library()
    if args.rules == ["default"]:
        library = library.select(default_families("llvm", "tuned", priced_layouts(cost)))
    elif args.rules != ["all"]:
        library = library.select(args.rules)
    # the defaults keep the earlier runs' cache keys, and their pass check: the pass as users run it
    as_before = (args.cost_model, args.mcpu, args.rules) == ("roofline", "generic", ["all"])
    prefix = "" if as_before else f"{args.cost_model}|{args.mcpu}|{','.join(library.families)}|"
    setup = None if as_before else {
        "target": llvm_target(args.mcpu), "cost_model": args.cost_model, "rules": tuple(library.families)
    }  # fmt: skip
    cache = {}
    if args.cache and os.path.exists(args.cache):
        with open(args.cache) as f:
            for line in f:
                item = json.loads(line)
                cache[item["key"]] = item["row"]
    load_start = os.getloadavg()
    todo = [(m, False) for m in args.models]
    if args.full is not None:
        todo += [(m, True) for m in (args.full or FULL)]
    rows = []
    for name, full in tqdm(todo, desc="models"):
        rows.extend(
            bench_model(name, full, library, args.variants, args.limits, args.seeds, args.repeat, cost,
                        args.ilp_limit, cache, args.cache, prefix)
        )  # fmt: skip
    state_rows = []
    for item in tqdm(args.state_ab, desc="state a/b"):
        name, rule = item.split(":")
        specs = ["mcts:default:state=replay", "mcts:default:state=stack", "mcts:default:state=auto"]
        state_rows.extend(
            bench_model(
                name, False, library, specs, [rule], args.seeds, 0, cost, args.ilp_limit, cache, args.cache, prefix
            )
        )
    pass_rows = []
    if not args.no_pass_check:
        specs = [v for v in args.variants if set(parse_variant(v)[1]) <= {"mcts_preset"}]
        for name in tqdm(args.models, desc="pass"):
            pass_rows.extend(pass_check(name, library, args.limits, specs, setup))
    pushpop_rows = pushpop_micro(args.pushpop, library) if args.pushpop else []
    for r in state_rows:  # the same search either way: same actions, same cost
        twin = [s for s in state_rows if s["model"] == r["model"] and s["seed"] == r["seed"] and s is not r]
        if any(t["actions"] != r["actions"] for t in twin):
            print(f"warning: {r['model']} seed {r['seed']}: the state methods chose different actions", file=sys.stderr)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    base = os.path.splitext(args.out)[0]
    outputs = (
        (args.out, rows, FIELDS),
        (base + "-state.csv", state_rows, FIELDS),
        (base + "-pass.csv", pass_rows, PASS_FIELDS),
        (base + "-pushpop.csv", pushpop_rows, PUSHPOP_FIELDS),
    )
    for path, data, fields in outputs:
        if data:
            with open(path, "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=fields)
                writer.writeheader()
                writer.writerows(data)
    if args.baseline not in args.variants:
        parser.error(f"--baseline {args.baseline} is not among --variants")
    lines, verdicts = summarise(rows, args.variants, args.baseline)
    sidecar = {
        **provenance.record(),
        "load_average_at_start": load_start,
        "cost_model": f"{args.cost_model} (llvm, mcpu {args.mcpu})",
        "final_extractor": f"ilp ({args.ilp_limit} s limit)",
        "rule_families": dict(sorted(Counter(r.family for r in library.rules).items())),
        "presets": {k: asdict(v) for k, v in MCTS_PRESETS.items()},
        "variants": args.variants,
        "baseline": args.baseline,
        "limits": args.limits,
        "seeds": args.seeds,
        "saturate_repeats": args.repeat,
        "command": " ".join(["python scripts/bench_search.py", *(sys.argv[1:] if argv is None else argv)]),
        "verdicts_vs_saturate": verdicts,
        "summary": lines,
    }
    with open(base + ".json", "w") as f:
        json.dump(sidecar, f, indent=2, default=str)
    with open(base + ".md", "w") as f:
        f.write(markdown(lines, verdicts, state_rows, pass_rows, pushpop_rows, sidecar))
    print(open(base + ".md").read())


if __name__ == "__main__":
    main()
