"""What the pass did, per function: predicted costs, e-graph size, rules, timings."""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field

from .describe import describe


@dataclass
class FunctionReport:
    name: str
    changed: bool = False
    cost_before: float = 0.0  # predicted microseconds, the pass's cost model
    cost_after: float = 0.0
    enodes: int = 0
    eclasses: int = 0
    blocks: int = 0  # dataflow blocks optimised
    iterations: int = 0
    constants_folded: int = 0  # constants the pass computed (fold.py), each for a weight-only subgraph TVM would fold
    # extractions done again because the graph held kernels that unblock NCHW16c data and block it
    # again, which this target's LLVM may miscompile (family_defaults.miscompile_risk): one per round
    # that priced out the blockings at fault, one more if the last went without any blocking
    reextracted: int = 0
    stop_reason: str = ""
    rules_applied: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # why blocks or the function were left alone
    # what must never happen, each also in ``skipped`` (the block was left unchanged):
    # soundness alarms (naming the rules), rewrites that failed translation validation,
    # internal errors.  Tests and benchmarks fail on any.
    alarms: list[str] = field(default_factory=list)
    validation: dict[str, float] = field(default_factory=dict)  # blocks checked, seconds, worst relative error
    # kernels worth naming (convs by layout, batch norms, transposes, ...) in the blocks
    # before and after: what ``changes`` puts in words
    census_before: dict[str, int] = field(default_factory=dict)
    census_after: dict[str, int] = field(default_factory=dict)

    @property
    def changes(self) -> list[str]:
        """What the rewrite changed, in words ("40 of 52 convs run in NHWC", ...)."""
        return describe(Counter(self.census_before), Counter(self.census_after)) if self.changed else []

    def add_seconds(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    @property
    def speedup(self) -> float:
        return self.cost_before / self.cost_after if self.cost_after > 0 else 1.0


@dataclass
class Report:
    target: str
    options: dict
    cost_model: str = ""  # the model actually used ("xgb" falls back to "roofline" without a shipped model)
    functions: dict[str, FunctionReport] = field(default_factory=dict)
    seconds: float = 0.0
    speed_check: dict | None = None  # ``speed_check.SpeedCheck.to_dict()`` when the option ran it

    @property
    def alarms(self) -> list[str]:
        """Every function's alarms, each prefixed with the function name."""
        return [f"{f.name}: {a}" for f in self.functions.values() for a in f.alarms]

    def to_dict(self) -> dict:
        return {
            "target": self.target,
            "options": dict(self.options),
            "cost_model": self.cost_model,
            "seconds": self.seconds,
            "functions": {k: {**asdict(v), "changes": v.changes} for k, v in self.functions.items()},
            "speed_check": self.speed_check,
            "alarms": self.alarms,
        }

    def summary(self) -> str:
        lines = [
            f"{'function':<20} {'changed':>7} {'cost before':>12} {'cost after':>12} "
            f"{'pred. speedup':>13} {'e-nodes':>8} {'seconds':>8}"
        ]
        for f in self.functions.values():
            lines.append(
                f"{f.name:<20} {str(f.changed):>7} {f.cost_before:>12.1f} {f.cost_after:>12.1f} "
                f"{f.speedup:>12.3f}x {f.enodes:>8} {f.seconds.get('total', 0.0):>8.2f}"
            )
            if f.changes:
                lines.append(f"  changed: {'; '.join(f.changes)}")
            for reason in f.skipped:
                lines.append(f"  left unchanged: {reason}")
            for alarm in f.alarms:
                lines.append(f"  ALARM: {alarm}")
        if self.speed_check is not None:
            from .speed_check import describe

            lines.append(describe(self.speed_check))
        return "\n".join(lines)
