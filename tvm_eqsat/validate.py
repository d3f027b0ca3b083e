"""Translation validation: the pass checks every rewritten block before returning it.

The original block and its rewrite run on the same random inputs in the reference
interpreter (``evaluate``); a relative difference above ``RTOL`` on any
output rejects the rewrite.  Random inputs can miss a bug that only some inputs
expose (a rule that is wrong only where a value is zero, say); a rule that is
wrong for the shapes and attributes at hand shows on any input.  Ops the pass does
not model (opaque calls) are never rewritten and are stood in for by random
functions of their inputs, so what is checked is everything around them.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from .evaluate import Interpreter, relative_difference
from .graph import TensorGraph
from .rules import RuleLibrary

RTOL = 1e-4  # equal functions agree to ~1e-12 in the interpreter (~1e-7 through a node TVM runs in float32); wrong rewrites differ by far more


@dataclass
class Validation:
    ok: bool
    max_rel_diff: float
    failed_output: str | None  # the first output that differs
    seconds: float
    tvm_nodes: int  # nodes the interpreter ran through TVM


def validate(original: TensorGraph, new: TensorGraph, seed: int = 0, rtol: float = RTOL) -> Validation:
    """Compare ``new`` with ``original`` (same leaf tables) on one set of random inputs."""
    start = time.perf_counter()
    interp = Interpreter(seed)
    ref, got = interp.outputs_of([original, new])
    worst, failed = 0.0, None
    for (var, _), a, b in zip(original.outputs, ref, got):
        diff = relative_difference(a, b)
        worst = max(worst, diff)
        if diff > rtol and failed is None:
            failed = var.name
    return Validation(failed is None, worst, failed, time.perf_counter() - start, interp.tvm_nodes)


def suspects(library: RuleLibrary, rules_applied: dict[str, int], original: TensorGraph, new: TensorGraph) -> list[str]:
    """The rules that fired and create an op the rewrite added (not in the original):
    the candidates for a rewrite that failed validation."""
    old = {(n.op, n.attrs) for n in (original.nodes[i] for i in original.reachable())}
    added = {new.nodes[i].op for i in new.reachable() if (new.nodes[i].op, new.nodes[i].attrs) not in old}
    return [r.name for r in library.rules if rules_applied.get(r.name) and r.creates & added]
