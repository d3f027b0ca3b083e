"""Growing the e-graph under budgets: which search, and what it reports.

Two searches, each in a module of its own: ``saturate`` (``tvm_eqsat/saturate.py``,
the TENSAT baseline: every rule family once per iteration until nothing changes or a
budget runs out) and ``mcts`` (``tvm_eqsat/mcts.py``, tensor-eqs-mcts: Monte Carlo
tree search over which family to apply next).  Both stop at the node limit without
ever handing extraction an e-graph above it, and report a ``GrowthResult``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .egraph import TensorEGraph

SEARCHES = ("saturate", "mcts")


@dataclass
class GrowthResult:
    iterations: int = 0
    stop_reason: str = "saturated"
    rules_applied: dict[str, int] = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)  # mcts: the rule families applied, in order
    stats: dict[str, Any] = field(default_factory=dict)  # mcts: simulations, evaluations, timings


def grow(egraph: TensorEGraph, method: str, families: list[str], **budgets) -> GrowthResult:
    if method == "saturate":
        from .saturate import saturate

        return saturate(egraph, families, **budgets)
    if method == "mcts":
        from .mcts import mcts

        return mcts(egraph, families, **budgets)
    raise ValueError(f"unknown search {method!r}; available: {SEARCHES}")
