"""Growing the e-graph under budgets.

``saturate`` (the TENSAT baseline) applies every rule family once per iteration
until nothing changes or a budget runs out: iterations, e-nodes, wall clock.
An iteration that overshoots the node limit is rolled back with egglog's
push/pop, so extraction never sees an e-graph above the limit.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from .egraph import TensorEGraph

log = logging.getLogger("tvm_eqsat")

SEARCHES = ("saturate",)


@dataclass
class GrowthResult:
    iterations: int = 0
    stop_reason: str = "saturated"
    rules_applied: dict[str, int] = field(default_factory=dict)


def saturate(
    egraph: TensorEGraph,
    families: list[str],
    *,
    node_limit: int,
    iter_limit: int,
    deadline: float,
) -> GrowthResult:
    result = GrowthResult()
    if not families:
        result.stop_reason = "no rules"
        return result
    for _ in range(iter_limit):
        if time.monotonic() >= deadline:
            result.stop_reason = "time limit"
            return result
        egraph.push()
        matched: dict[str, int] = {}
        updated = False
        for family in families:
            counts, changed = egraph.run_ruleset(family)
            updated |= changed
            for rule, n in counts.items():
                if n:
                    matched[rule] = matched.get(rule, 0) + n
        if egraph.size() > node_limit:
            egraph.pop()
            result.stop_reason = "node limit"
            return result
        result.iterations += 1
        for rule, n in matched.items():
            result.rules_applied[rule] = result.rules_applied.get(rule, 0) + n
        if not updated:
            return result
    result.stop_reason = "iteration limit"
    return result


def grow(egraph: TensorEGraph, method: str, families: list[str], **budgets) -> GrowthResult:
    if method == "saturate":
        return saturate(egraph, families, **budgets)
    raise ValueError(f"unknown search {method!r}; available: {SEARCHES}")
