"""Monte Carlo tree search over rule families (tensor-eqs-mcts, Hartmann, He, Yoneki,
PACT 2024).

The order in which rule families are applied matters once the node limit cuts
growth short: a state is the e-graph after a sequence of actions, an action is one
iteration of one rule family, and the reward of a state is the relative drop of
its extracted DAG cost (the pass's cost model, a fast extractor).  UCT selects,
a rollout policy plays on to a terminal state, and the search plans with a
number of simulations, commits the first action of the best trajectory found,
and repeats (receding horizon) until no action improves the cost or a budget
(node limit, wall clock, steps) runs out.  The final e-graph is the end of the
best trajectory found, which never exceeds the node limit; the pass then
extracts from it with its own extractor, as after saturation.

Cheap state handling (:class:`~tvm_eqsat.mcts_states.States`): states are reached by replaying
actions from saved egglog copies (``push``), kept at the search root and,
adaptively, wherever replaying would cost more than a copy; transitions are
remembered by e-graph fingerprint (the sizes of all egglog tables and a digest of
the content, equal for e-graphs equal up to e-class names), so an
action already tried in a state is not run again, and rewards are cached by
fingerprint.  When saturation's order reaches the rules' fixpoint within the
node limit, that fixpoint holds every reachable state and the search stops at
once (``saturated``).

The search is deterministic for a seed unless a time limit cuts it short
(the budget, or the reward extractor's own limit on a large e-graph).
"""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from .egraph import TensorEGraph
from .mcts_states import Outcome, States
from .search import GrowthResult

log = logging.getLogger("tvm_eqsat")


# ---------------------------------------------------------------- MCTS: configuration

ROLLOUT_POLICIES = ("matched", "random", "lookahead", "ordered")
STATE_METHODS = ("auto", "replay", "stack")


@dataclass(frozen=True)
class MctsConfig:
    """Budgets and knobs of the MCTS search (per dataflow block).

    ``simulations``: simulations per committed step; ``rollout_depth``: actions a
    rollout plays at most; ``exploration``: the UCT constant (on rewards scaled
    to the best so far); ``discount``: per action, so a shorter way to the same
    cost scores higher; ``time_s``: wall clock for the search (also capped by the
    pass's deadline); ``max_steps``: committed actions at most (None: the pass's
    ``iter_limit`` times the number of families); ``rollout``: the default policy
    (``matched``: actions that changed the e-graph more often are more likely,
    ``random``: uniform, ``lookahead``: the action whose result extracts cheapest,
    ``ordered``: families in turn, as saturation applies them); ``warm_start``:
    the first simulation plays the ``ordered`` policy to the end, so the search
    starts from what saturation (with per-action rollback) reaches;
    ``state``: how states are restored (:class:`~tvm_eqsat.mcts_states.States`); ``reward_time_s``:
    the fast extractor's time limit per reward.
    """

    simulations: int = 24
    rollout_depth: int = 16
    exploration: float = 0.5
    discount: float = 0.99
    time_s: float = 20.0
    max_steps: int | None = None
    rollout: str = "matched"
    warm_start: bool = True
    state: str = "auto"
    reward_time_s: float = 2.0
    reward_extractor: str | None = None  # None: the fastest good one available (see _reward_extractor)

    def __post_init__(self) -> None:
        for name in ("simulations", "rollout_depth"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"mcts {name} must be a positive integer, got {value!r}")
        if self.max_steps is not None and (not isinstance(self.max_steps, int) or self.max_steps < 0):
            raise ValueError(f"mcts max_steps must be a non-negative integer or None, got {self.max_steps!r}")
        if not isinstance(self.exploration, (int, float)) or not self.exploration >= 0:
            raise ValueError(f"mcts exploration must be >= 0, got {self.exploration!r}")
        if not isinstance(self.discount, (int, float)) or not 0 < self.discount <= 1:
            raise ValueError(f"mcts discount must be in (0, 1], got {self.discount!r}")
        for name in ("time_s", "reward_time_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"mcts {name} must be a positive number, got {value!r}")
        if not isinstance(self.warm_start, bool):
            raise ValueError(f"mcts warm_start must be True or False, got {self.warm_start!r}")
        if self.rollout not in ROLLOUT_POLICIES:
            raise ValueError(f"mcts rollout={self.rollout!r}; available: {ROLLOUT_POLICIES}")
        if self.state not in STATE_METHODS:
            raise ValueError(f"mcts state={self.state!r}; available: {STATE_METHODS}")
        if self.reward_extractor is not None:
            from .extract import EXTRACTORS

            if self.reward_extractor not in EXTRACTORS or self.reward_extractor == "ilp":
                raise ValueError(f"mcts reward_extractor={self.reward_extractor!r}; a fast one of {EXTRACTORS}")


MCTS_PRESETS: dict[str, MctsConfig] = {
    # <= 5 s per small model on 2 cores, e-graph building and extraction included
    "fast": MctsConfig(simulations=8, rollout_depth=8, time_s=3.0, reward_time_s=0.5),
    # <= 30 s
    "default": MctsConfig(simulations=24, rollout_depth=16, time_s=20.0, reward_time_s=2.0),
    # minutes: wide planning, deep rollouts, the one-step look-ahead policy
    "thorough": MctsConfig(simulations=64, rollout_depth=32, time_s=300.0, rollout="lookahead", reward_time_s=5.0),
}


def mcts_config(preset: str | MctsConfig = "default", **overrides: Any) -> MctsConfig:
    """A preset by name (or a config), with fields overridden; ValueError for unknown names."""
    if isinstance(preset, MctsConfig):
        config = preset
    elif isinstance(preset, str) and preset in MCTS_PRESETS:
        config = MCTS_PRESETS[preset]
    else:
        raise ValueError(f"mcts_preset={preset!r} is not available; available: {tuple(MCTS_PRESETS)}")
    unknown = set(overrides) - set(asdict(config))
    if unknown:
        raise ValueError(f"unknown mcts setting(s) {sorted(unknown)}; known: {sorted(asdict(config))}")
    return replace(config, **overrides) if overrides else config


# ---------------------------------------------------------------- MCTS: the search


class _Node:
    __slots__ = ("fp", "size", "children", "untried", "n", "w", "best", "done")

    def __init__(self, fp: tuple, size: int, untried: list[int]) -> None:
        self.fp = fp
        self.size = size
        self.children: dict[int, _Node] = {}
        self.untried = untried  # actions not expanded yet, in the order they will be tried
        self.n = 0
        self.w = 0.0  # sum of discounted rewards
        self.best = -math.inf  # best discounted reward below
        self.done = False  # every path below is in the tree: nothing left to learn


def _reward_extractor() -> str:
    """The fastest good extractor available for rewards."""
    from .extract import EXTRACTORS

    for name in ("fast", "dag_local", "dag_greedy"):
        if name in EXTRACTORS:
            return name
    return "greedy"


class _Mcts:
    def __init__(
        self,
        egraph: TensorEGraph,
        families: list[str],
        config: MctsConfig,
        *,
        node_limit: int,
        max_len: int,
        max_steps: int,
        deadline: float,
        cost_model: Any,
        seed: int,
    ) -> None:
        self.eg = egraph
        self.families = list(families)
        self.actions = list(range(len(self.families)))
        self.cfg = config
        self.node_limit = node_limit
        self.max_len = max_len  # actions in a path from the loaded e-graph, at most
        self.max_steps = max_steps
        self.deadline = deadline
        self.rng = random.Random(seed)
        if cost_model is None:
            from .cost import RooflineCostModel

            cost_model = RooflineCostModel("llvm")
        self.cost_model = cost_model
        self.extractor = config.reward_extractor or _reward_extractor()
        self.states = States(egraph, self.families, config.state, node_limit)
        self.transitions: dict[tuple[tuple, int], Outcome] = {}
        self.costs: dict[tuple, float] = {}
        self.node_costs: dict[tuple, float] = {}
        self.tries = [0] * len(self.families)  # per action: runs, and how many changed the e-graph
        self.changes = [0] * len(self.families)
        self.committed: list[int] = []
        self.base_cost = math.inf
        self.best_key: tuple = (math.inf,)
        self.best_path: list[int] = []
        self.stats: dict[str, Any] = {
            "simulations": 0, "steps": 0, "evaluations": 0, "eval_s": 0.0, "cache_hits": 0,
            "transitions": 0, "known_transitions": 0, "extractor": self.extractor, "state": config.state,
        }  # fmt: skip

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline

    def room(self, path: list[int]) -> bool:
        return len(self.committed) + len(path) < self.max_len

    # ---- transitions and rewards
    def step(self, fp: tuple, path: list[int], action: int) -> Outcome:
        """The outcome of ``action`` in the state ``fp`` reached by ``path`` (from the table when known)."""
        key = (fp, action)
        out = self.transitions.get(key)
        if out is not None:
            self.stats["known_transitions"] += 1
            return out
        self.states.goto(path)
        out = self.states.apply(action)
        self.transitions[key] = out
        self.stats["transitions"] += 1
        self.tries[action] += 1
        self.changes[action] += out.kind != "noop"
        return out

    def cost(self, fp: tuple, path: list[int]) -> float:
        """Extracted DAG cost of the state (fast extractor, cached by fingerprint)."""
        got = self.costs.get(fp)
        if got is not None:
            self.stats["cache_hits"] += 1
            return got
        from .extract import choice_cost, extract, lone_reshape_costs
        from .graph import Unsupported

        t = time.perf_counter()
        self.states.goto(path)
        snap = self.eg.snapshot()
        roots = [snap.root_of[nid] for _, nid in self.eg.graph.outputs]
        model, memo = self.cost_model, self.node_costs
        if hasattr(model, "prepare"):  # one batched prediction for the new e-nodes
            model.prepare(
                [
                    (n.op, n.attrs, [snap.ty[k] for k in n.children], snap.ty[c], snap.is_const[c])
                    for c, nodes in enumerate(snap.classes)
                    for n in nodes
                ]
            )

        lone = lone_reshape_costs(snap, roots, model)

        def node_cost(c: int, n) -> float:
            if lone and (c, n) in lone:
                return lone[(c, n)]
            in_tys = tuple(snap.ty[k] for k in n.children)
            key = (n.op, n.attrs, in_tys, snap.ty[c], snap.is_const[c])
            value = memo.get(key)
            if value is None:
                value = memo[key] = model.node_cost(n.op, n.attrs, list(in_tys), snap.ty[c], snap.is_const[c])
            return value

        try:
            choice = extract(snap, roots, node_cost, self.extractor, self.cfg.reward_time_s)
            value = choice_cost(snap, choice, roots, node_cost)
        except Unsupported:
            value = math.inf
        self.costs[fp] = value
        self.stats["evaluations"] += 1
        self.stats["eval_s"] += time.perf_counter() - t
        return value

    # ---- policies
    def _weight(self, action: int) -> float:
        """How often the action changed the e-graph so far (Laplace-smoothed)."""
        return (self.changes[action] + 1.0) / (self.tries[action] + 2.0)

    def _live_actions(self, fp: tuple) -> list[int]:
        """Actions not known to change nothing or to overshoot in this state."""
        live = []
        for a in self.actions:
            out = self.transitions.get((fp, a))
            if out is None or out.kind == "ok":
                live.append(a)
        return live

    def _order(self, fp: tuple) -> list[int]:
        """Expansion order: actions known to work here first, then those that changed the e-graph more often."""
        keys = {a: (self.transitions.get((fp, a)) is None, -self._weight(a), self.rng.random()) for a in self.actions}
        return sorted(self._live_actions(fp), key=keys.__getitem__)

    def _pick(self, policy: str, fp: tuple, path: list[int], candidates: list[int], last: int | None) -> int:
        if policy == "random":
            return self.rng.choice(candidates)
        if policy == "ordered":  # the family after the last one applied, as saturation cycles through them
            start = -1 if last is None else last
            return min(candidates, key=lambda a: (a - start - 1) % len(self.families))
        if policy == "lookahead":  # apply each, extract, keep the cheapest (ties: the likelier to change)
            best, best_key = candidates[0], (math.inf,)
            for a in candidates:
                out = self.step(fp, path, a)
                if out.kind != "ok":
                    continue
                key = (self.cost(out.fp, path + [a]), -self._weight(a), a)
                if key < best_key:
                    best, best_key = a, key
            return best
        return self.rng.choices(candidates, [self._weight(a) for a in candidates])[0]  # matched

    # ---- one simulation
    def rollout(self, fp: tuple, size: int, path: list[int], policy: str, depth: int):
        """Play the policy from the state ``path`` for ``depth`` actions at most: (fp, size, path) at the end."""
        path = list(path)
        last = path[-1] if path else (self.committed[-1] if self.committed else None)
        for _ in range(depth):
            if self.out_of_time() or not self.room(path):
                break
            candidates = self._live_actions(fp)
            while candidates:
                a = self._pick(policy, fp, path, candidates, last)
                out = self.step(fp, path, a)
                if out.kind == "ok":
                    fp, size, last = out.fp, out.size, a
                    path.append(a)
                    break
                candidates.remove(a)
            else:
                break  # no action changes the state within the node limit: terminal
        return fp, size, path

    def simulate(self, root: _Node, policy: str, depth: int) -> tuple | None:
        """One simulation from ``root``: the fingerprint and path where its rollout ended (None: out of time)."""
        node, path, trail = root, [], [root]
        while not node.untried and node.children and not node.done:  # selection (UCT)
            action = self._select(node)
            if action is None:
                break
            node = node.children[action]
            path.append(action)
            trail.append(node)
        if policy == "ordered" and node.untried:  # the warm start expands in saturation's order too
            last = path[-1] if path else (self.committed[-1] if self.committed else -1)
            node.untried.sort(key=lambda a: (a - last - 1) % len(self.families))
        while node.untried and self.room(path) and not self.out_of_time():  # expansion
            a = node.untried.pop(0)
            out = self.step(node.fp, path, a)
            if out.kind == "ok":
                child = _Node(out.fp, out.size, self._order(out.fp))
                node.children[a] = child
                node, path = child, path + [a]
                trail.append(node)
                break
        if self.out_of_time():
            return None
        if not self.room(path):
            node.untried = []
        end_fp, end_size, end_path = self.rollout(node.fp, node.size, path, policy, depth)
        if self.out_of_time() and end_fp not in self.costs:
            return None
        cost = self.cost(end_fp, end_path)
        self.stats["simulations"] += 1
        reward = (self.base_cost - cost) / self.base_cost if self.base_cost > 0 else 0.0
        # the best trajectory: cheapest, then the larger e-graph (more for the final extractor), then shorter
        key = (cost, -end_size, len(self.committed) + len(end_path))
        if key < self.best_key:
            self.best_key, self.best_path = key, self.committed + end_path
        for k, n in enumerate(trail):  # backpropagation, discounted by the actions still to come
            value = reward * self.cfg.discount ** (len(end_path) - k)
            n.n += 1
            n.w += value
            n.best = max(n.best, value)
        for n in reversed(trail):  # a node is done once everything below it is in the tree
            if n.untried or not all(c.done for c in n.children.values()):
                break
            n.done = True
        return end_fp, end_path

    def saturated(self, fp: tuple) -> bool:
        """No action changes this state: the fixpoint of the rules, which holds every state reachable."""
        return all(getattr(self.transitions.get((fp, a)), "kind", None) == "noop" for a in self.actions)

    def _select(self, node: _Node) -> int | None:
        best_reward = (self.base_cost - self.best_key[0]) / self.base_cost if self.base_cost > 0 else 0.0
        scale = best_reward if best_reward > 1e-12 else 1.0
        log_n = math.log(max(node.n, 1))
        best, best_score = None, -math.inf
        for a, child in node.children.items():
            if child.done:
                continue
            if child.n == 0:
                return a
            score = child.w / child.n / scale + self.cfg.exploration * math.sqrt(log_n / child.n)
            if score > best_score:
                best, best_score = a, score
        return best

    # ---- the receding-horizon loop
    def run(self) -> GrowthResult:
        result = GrowthResult()
        root_fp, root_size = self.states.fingerprint()
        self.root_fp = root_fp
        if root_size > self.node_limit:
            result.stop_reason = "node limit"
            return result
        self.base_cost = self.cost(root_fp, [])
        self.best_key, self.best_path = (self.base_cost, -root_size, 0), []
        root = _Node(root_fp, root_size, self._order(root_fp))
        stop = None
        if self.cfg.warm_start and not self.out_of_time():
            end = self.simulate(root, "ordered", self.max_len)
            if end is not None and self.saturated(end[0]):
                # saturation's order reached the fixpoint within the node limit: every other
                # order reaches a subset of it, so there is nothing to search for
                self.best_key, self.best_path = (self.costs[end[0]], 0, 0), end[1]
                stop = "saturated"
        while stop is None:
            if self.out_of_time():
                stop = "time limit"
                break
            if len(self.committed) >= self.max_steps:
                stop = "step limit"
                break
            for _ in range(self.cfg.simulations):
                if root.done or self.out_of_time():
                    break
                self.simulate(root, self.cfg.rollout, self.cfg.rollout_depth)
            if root.done:
                stop = "search complete"  # every sequence from here is known: the best one is final
                break
            root_cost = self.cost(root.fp, [])
            rest = self.best_path[len(self.committed) :]
            if not rest or self.best_key[0] >= root_cost - 1e-9 * max(1.0, abs(root_cost)):
                stop = "time limit" if self.out_of_time() else "no improvement"
                break
            action = rest[0]
            child = root.children.get(action)
            if child is None:  # the best trajectory left the tree at the root: add its first step
                out = self.transitions[(root.fp, action)]
                child = root.children[action] = _Node(out.fp, out.size, self._order(out.fp))
            if not self.states.commit(action, child.fp):
                self.best_path = list(self.committed)
                stop = "nondeterministic replay"
                break
            self.committed.append(action)
            self.stats["steps"] += 1
            root = child
        final = self.best_path[len(self.committed) :]  # the end of the best trajectory
        self.states.goto(final)
        size = self.eg.size()
        if size > self.node_limit:  # only if egglog were not deterministic
            log.warning("mcts: the best trajectory replays to %d e-nodes; keeping the committed state", size)
            self.states.goto([])
            final = []
        path = self.committed + final
        fp = self.root_fp
        for a in path:  # rules applied along the path, from the transitions that made it
            out = self.transitions.get((fp, a))
            if out is None:
                break
            for rule, n in out.matches:
                result.rules_applied[rule] = result.rules_applied.get(rule, 0) + n
            fp = out.fp
        result.iterations = len(path)
        result.actions = [self.families[a] for a in path]
        result.stop_reason = stop
        self.stats.update(self.states.stats)
        self.stats.update(base_cost=self.base_cost, best_cost=self.best_key[0], final_size=self.eg.size())
        result.stats = self.stats
        log.debug(
            "mcts: %s after %d simulations (%d rewards), DAG cost %.6g -> %.6g, %d e-nodes: %s",
            stop, self.stats["simulations"], self.stats["evaluations"], self.base_cost, self.best_key[0],
            self.stats["final_size"], " ".join(result.actions),
        )  # fmt: skip
        return result


def mcts(
    egraph: TensorEGraph,
    families: list[str],
    *,
    node_limit: int,
    iter_limit: int,
    deadline: float,
    cost_model: Any = None,
    seed: int = 0,
    mcts_preset: str | MctsConfig = "default",
    multi_limit: int | None = None,
    **overrides: Any,
) -> GrowthResult:
    """Grow the e-graph by MCTS over rule families (see the module docstring).

    ``multi_limit`` is saturation's and is ignored: MCTS chooses when each family
    (multi-pattern rules included) runs, within its action budget.

    ``iter_limit`` bounds a path at ``iter_limit * len(families)`` actions, the
    work of ``iter_limit`` saturation iterations; ``overrides`` change fields of
    the preset (:class:`MctsConfig`).
    """
    config = mcts_config(mcts_preset, **overrides)
    if not families:
        return GrowthResult(stop_reason="no rules")
    if time.monotonic() >= deadline:
        return GrowthResult(stop_reason="time limit")
    max_len = iter_limit * len(families)
    search = _Mcts(
        egraph, families, config, node_limit=node_limit, max_len=max_len,
        max_steps=max_len if config.max_steps is None else min(config.max_steps, max_len),
        deadline=min(deadline, time.monotonic() + config.time_s), cost_model=cost_model, seed=seed,
    )  # fmt: skip
    return search.run()
