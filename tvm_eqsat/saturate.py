"""Saturation (the TENSAT baseline): every rule family once per iteration until nothing
changes or a budget runs out (iterations, e-nodes, wall clock).

Rolling back what overshoots the node limit costs one saved copy of the e-graph,
not one per iteration: the state before the first iteration is kept (egglog's
``push``), and an overshoot restores it and runs again the steps that were kept
(egglog runs them the same way again).  ``rollback`` says what is undone: the
whole ``iteration`` that overshot (and growth stops), or only the ``family`` step
that overshot (that family is dropped and the others go on until nothing changes),
which reaches further at a tight node limit.
"""

from __future__ import annotations

import time
from typing import Any

from .egraph import TensorEGraph
from .rules import single
from .search import GrowthResult

ROLLBACKS = ("iteration", "family")


def saturate(
    egraph: TensorEGraph,
    families: list[str],
    *,
    node_limit: int,
    iter_limit: int,
    deadline: float,
    multi_limit: int | None = None,
    rollback: str = "iteration",
    **_ignored: Any,
) -> GrowthResult:
    """Run every family once per iteration until nothing changes or a limit is hit.

    ``multi_limit`` (TENSAT's ``k_multi``): the iterations in which multi-pattern
    rules run; later iterations run only the single-pattern rules.  ``None``: all.
    """
    if rollback not in ROLLBACKS:
        raise ValueError(f"rollback={rollback!r}; available: {ROLLBACKS}")
    result = GrowthResult()
    if not families:
        result.stop_reason = "no rules"
        return result
    egraph.push()  # the one saved copy: what an overshoot returns to
    kept: list[str] = []  # the rulesets run since that copy, in order
    dropped: set[str] = set()  # families that overshot (rollback="family")
    for it in range(iter_limit):
        if time.monotonic() >= deadline:
            result.stop_reason = "time limit"
            return result
        live = [f for f in families if f not in dropped]
        steps = live if multi_limit is None or it < multi_limit else [single(f) for f in live]
        matched: dict[str, int] = {}
        updated = False
        for family, ruleset in zip(live, steps):
            counts, changed = egraph.run_ruleset(ruleset)
            if rollback == "family":
                if egraph.size() > node_limit:
                    _restore(egraph, kept)
                    dropped.add(family)
                    continue
                kept.append(ruleset)
            updated |= changed
            for rule, n in counts.items():
                if n:
                    matched[rule] = matched.get(rule, 0) + n
        if rollback == "iteration":
            if egraph.size() > node_limit:
                _restore(egraph, kept)
                result.stop_reason = "node limit"
                return result
            kept.extend(steps)
        result.iterations += 1
        for rule, n in matched.items():
            result.rules_applied[rule] = result.rules_applied.get(rule, 0) + n
        if not updated:
            if dropped:
                result.stop_reason = "node limit"
            return result
    result.stop_reason = "iteration limit"
    return result


def _restore(egraph: TensorEGraph, kept: list[str]) -> None:
    """Back to the saved copy, then the kept steps again (the saved copy stays saved)."""
    egraph.pop()
    egraph.push()
    for ruleset in kept:
        egraph.run_ruleset(ruleset)
