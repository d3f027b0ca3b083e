"""Soundness alarms: which rule made the e-graph hold something impossible.

An alarm (``egraph.SoundnessAlarm``) says that one search action (one iteration of
a ruleset) unioned two classes of different types or created a term the analyses
refuse.  The action runs many rules at once; to name the culprit, the block's
e-graph is rebuilt, the actions before the failing one are replayed, and each rule
of the failing action is run alone from there.  A rule that raises the alarm on
its own is the trigger; the rules that fired before it made the members it read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from .egraph import EGraphError, SoundnessAlarm, TensorEGraph
from .graph import TensorGraph
from .rules import RuleLibrary, rule_set

log = logging.getLogger("tvm_eqsat")


@dataclass
class Diagnosis:
    reason: str
    ruleset: str | None  # the action that raised it (None: the graph as loaded)
    triggers: list[str] = field(default_factory=list)  # rules that raise it alone after the history
    earlier: list[str] = field(default_factory=list)  # rules that fired before, in the replayed actions

    def describe(self) -> str:
        if self.ruleset is None:
            return f"soundness alarm on the graph as loaded (an analysis is wrong): {self.reason}"
        rules = ", ".join(self.triggers) if self.triggers else f"a combination of the rules in {self.ruleset}"
        after = f", after {', '.join(self.earlier)}" if self.earlier else ""
        return f"soundness alarm: {self.reason}; raised by {rules}{after}"


def diagnose(graph: TensorGraph, program: str, library: RuleLibrary, alarm: SoundnessAlarm) -> Diagnosis:
    """Name the rules behind ``alarm`` by replaying its history on a fresh e-graph."""
    found = Diagnosis(alarm.reason, alarm.ruleset)
    if alarm.ruleset is None:
        return found
    try:
        eg = TensorEGraph(graph, program)
        earlier: dict[str, None] = {}
        for ruleset in alarm.history:
            counts, _ = eg.run_ruleset(ruleset)
            earlier.update((r, None) for r, n in counts.items() if n)
        found.earlier = list(earlier)
        for rule in library.in_ruleset(alarm.ruleset):
            eg.push()
            try:
                eg.run_ruleset(rule_set(rule.name))
            except SoundnessAlarm:
                found.triggers.append(rule.name)
            finally:
                eg.pop()
    except EGraphError as err:  # the replay itself failed: report what is known
        log.debug("diagnosing a soundness alarm failed: %s", err)
    return found
