"""The states of the MCTS search (``mcts.py``): moving one live egglog e-graph between
them, and telling them apart.

A state is the e-graph after a path of actions (one iteration of one rule family) from
the search root.  egglog copies an e-graph only by ``push``, so states are reached by
restoring a saved copy and replaying actions; where copies are saved is the method
(``replay``, ``stack``, ``auto``).  A state's identity is its egglog table sizes and a
digest of its content, so that two paths reaching one e-graph share what was learned
about it, and two e-graphs with equal table sizes do not.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from .egraph import TensorEGraph
from .language import signatures

log = logging.getLogger("tvm_eqsat")


@dataclass(frozen=True)
class Outcome:
    """What one action does to a state: ``noop`` (nothing changed), ``over`` (the
    node limit would be exceeded: undone), or ``ok`` (a new state)."""

    kind: str
    fp: tuple = ()
    size: int = 0
    matches: tuple[tuple[str, int], ...] = ()


class States:
    """Moves the live e-graph to the state named by an action path from the search root.

    egglog cannot copy an e-graph except by ``push`` (a saved copy on its stack,
    restored and dropped by ``pop``).  The search root always has a saved copy
    (the checkpoint).  Reaching a path that does not extend the live one means
    restoring the deepest saved copy on the way (popping the ones below it) and
    running the rest of the path's actions again.  Where copies are saved:

    * ``replay``: nowhere but the root: every move replays from the root;
    * ``stack``: before every action, so a move replays nothing but pops down
      to the deepest common ancestor;
    * ``auto``: before an action once the actions run since the last saved copy
      took longer than a push and a pop (both measured as the search goes), so
      a replay never costs much more than a copy would have.

    A push or pop costs about the same whatever the e-graph holds (it copies
    egglog's whole state, program included: ~10 ms for this language and rule
    library, from an empty e-graph to 6k e-nodes), while one iteration of one
    family on a small e-graph takes 0.2-5 ms: replaying is cheaper there, saving
    copies pays where iterations are slow.  An action that overshoots the node
    limit is undone the same way.  Committing an action makes its state the new
    root (one checkpoint, whatever the depth).
    """

    def __init__(self, egraph: TensorEGraph, families: list[str], method: str, node_limit: int) -> None:
        self.eg = egraph
        self.families = families
        self.method = method
        self.node_limit = node_limit
        self.live: list[int] = []  # actions applied on top of the root
        self.live_s: list[float] = []  # the seconds each of them took to run
        self.saved: list[int] = []  # prefix lengths of ``live`` with a saved copy (>= 1), increasing
        self.names = set(signatures())
        self.stats = {
            "runs": 0,
            "run_s": 0.0,
            "pushes": 0,
            "push_s": 0.0,
            "pops": 0,
            "pop_s": 0.0,
            "digests": 0,
            "digest_s": 0.0,
        }
        self._push()  # the root checkpoint

    # ---- egglog primitives, timed
    def _push(self) -> None:
        t = time.perf_counter()
        self.eg.push()
        self.stats["pushes"] += 1
        self.stats["push_s"] += time.perf_counter() - t

    def _pop(self) -> None:
        t = time.perf_counter()
        self.eg.pop()
        self.stats["pops"] += 1
        self.stats["pop_s"] += time.perf_counter() - t

    def fingerprint(self) -> tuple[tuple, int]:
        """(the state's identity, its tensor e-nodes).  The identity is the sizes of every
        egglog table and, within the node limit, a digest of the content
        (``Snapshot.digest``): equal sizes do not make equal e-graphs.  A state over
        the limit is never a search state, so its content is not read."""
        sizes = tuple(sorted(self.eg.run("(print-size)")[0].sizes))
        size = sum(n for name, n in sizes if name in self.names)
        if size > self.node_limit:
            return (sizes, None), size
        t = time.perf_counter()
        digest = self.eg.snapshot().digest()
        self.stats["digests"] += 1
        self.stats["digest_s"] += time.perf_counter() - t
        return (sizes, digest), size

    def _run(self, action: int) -> tuple[dict[str, int], bool]:
        t = time.perf_counter()
        counts, updated = self.eg.run_ruleset(self.families[action])
        self.last_run_s = time.perf_counter() - t
        self.stats["runs"] += 1
        self.stats["run_s"] += self.last_run_s
        return counts, updated

    def _checkpoint(self) -> None:
        """Save a copy of the live state before running an action on it, if the method says so."""
        depth = len(self.live)
        if depth == 0 or (self.saved and self.saved[-1] == depth) or self.method == "replay":
            return  # the root has its copy; so may this state already
        if self.method == "auto":
            since = sum(self.live_s[self.saved[-1] if self.saved else 0 :])  # what a replay to here costs
            push = self.stats["push_s"] / self.stats["pushes"]
            pop = self.stats["pop_s"] / self.stats["pops"] if self.stats["pops"] else push
            if since < push + pop:
                return
        self._push()
        self.saved.append(depth)

    # ---- moving between states
    def _restore(self, keep: int) -> None:
        """Make the live state the deepest saved prefix of ``live`` of length <= keep."""
        if len(self.live) <= keep:
            return
        while self.saved and self.saved[-1] > keep:
            self._pop()  # restores that copy, discarded: not an ancestor of where we go
            self.saved.pop()
        if self.saved:
            length = self.saved.pop()
            self._pop()
        else:
            length = 0
            self._pop()
            self._push()  # the root keeps its checkpoint
        del self.live[length:]
        del self.live_s[length:]

    def goto(self, path: list[int]) -> None:
        """Bring the live e-graph to ``path`` (all of whose transitions are known to be ``ok``)."""
        common = 0
        for a, b in zip(self.live, path):
            if a != b:
                break
            common += 1
        self._restore(common)
        for action in path[len(self.live) :]:
            self._checkpoint()
            self._run(action)
            self.live.append(action)
            self.live_s.append(self.last_run_s)

    def apply(self, action: int) -> Outcome:
        """Run one action on the live state; undo it when it overshoots the node limit."""
        self._checkpoint()  # a copy to undo to (still valid if the action changes nothing)
        counts, updated = self._run(action)
        if not updated:
            return Outcome("noop")
        fp, size = self.fingerprint()
        matches = tuple(sorted((r, n) for r, n in counts.items() if n))
        before = list(self.live)
        self.live.append(action)
        self.live_s.append(self.last_run_s)
        if size > self.node_limit:
            self.goto(before)  # back to the deepest saved copy, and replay from there
            return Outcome("over", fp, size, matches)
        return Outcome("ok", fp, size, matches)

    def commit(self, action: int, expected: tuple) -> bool:
        """Make the state after ``action`` (known ``ok``, fingerprint ``expected``) the search root.

        The action is run once on a copy of the root to check that it gives the
        expected state within the node limit (False, root unchanged, otherwise),
        then again for good, so only one checkpoint is ever kept.
        """
        self._restore(0)  # live = root, its checkpoint on top
        self._run(action)
        fp, size = self.fingerprint()
        self._pop()  # back to the root, the checkpoint dropped
        if fp != expected or size > self.node_limit:
            log.warning("mcts: replaying an action gave a different e-graph (%d e-nodes); not committed", size)
            self._push()
            return False
        self._run(action)
        self._push()
        self.live, self.live_s, self.saved = [], [], []
        return True
