"""A frozen PM week (or the rest of one) as the scheduling problem the teachers solve.

Under PMWeek-v0's dynamics the effect of querying resource ``r`` at step ``q`` depends only on the previous query
of ``r`` (at ``p``): it resolves exactly the registered intentions on ``r`` with ``p < start <= q <= active_until``,
where ``start = max(active_from, onset)`` — everything that started earlier and is still active was resolved by
the query at ``p``. Likewise ``r`` is a candidate at ``q`` after a query at ``p`` iff some registered intention on
``r`` whose (widened) declared window and ledger period contain ``q`` has ``start > p``. So a schedule is one
chain of query times per resource, and each link ``p -> q`` has a fixed (TP, FP) effect.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from membudget.envs.pm.episode_io import EpisodeFormatError, validate_episode
from membudget.envs.pm.world import (KIND_VISIBLE, MAX_BUDGET, MAX_HORIZON, MAX_RESOURCES, NEVER, POS,
                                     VISIBLE_OUTCOMES, Episode)
from membudget.envs.validation import check_int, constructor_repr


@dataclass
class Problem:
    """Everything a teacher needs, from step ``t0`` on."""

    horizon: int
    costs: np.ndarray
    t0: int
    last_query: np.ndarray
    """Per resource, the step of its last executed query before ``t0`` (-1: never)."""
    budget_left: int | None
    n_max: int | None
    cost_cap: int | None
    late_execute: bool
    tp_fixed: int
    """TP that no future query changes: visible hits plus hidden hits before ``t0``."""
    fp_fixed: int
    """FP that no future query changes: visible false alarms plus hidden false executions before ``t0``."""
    due: int
    """Positives that become due in the episode (visible and hidden, registered or not)."""
    res: np.ndarray
    start: np.ndarray
    until: np.ndarray
    deadline: np.ndarray
    positive: np.ndarray
    cand_lo: np.ndarray
    cand_hi: np.ndarray
    weight: np.ndarray | None = None
    """TP weight of each registered hidden intention in a linear objective (None: 1 each; Set F1 counts TP)."""

    @property
    def n_resources(self) -> int:
        return self.costs.size

    def f1(self, tp_future: int, fp_future: int) -> float:
        return f1_of_counts(self.tp_fixed + tp_future, self.fp_fixed + fp_future, self.due)

    def counts(self, tp_future: int, fp_future: int):
        tp = self.tp_fixed + tp_future
        return tp, self.fp_fixed + fp_future, self.due - tp


def f1_of_counts(tp, fp, due):
    """Set F1 of a week with ``tp`` true and ``fp`` false positives among ``due`` due positives (0 if all are 0).
    Integers give a float; integer arrays (broadcast together) an array of them, each as its integers would."""
    d = 2 * tp + fp + (due - tp)
    if np.ndim(d) == 0:
        return 0.0 if d == 0 else 2.0 * tp / d
    tp, d = np.broadcast_arrays(tp, d)
    return np.divide(2.0 * tp, d, out=np.zeros(d.shape), where=d != 0)


def due_positives(ep: Episode) -> np.ndarray:
    """Mask of the positives that become due inside the horizon (onset <= min(deadline, T-1))."""
    return (ep.polarity == POS) & (ep.onset <= np.minimum(ep.deadline, ep.horizon - 1))


def problem_from_episode(ep: Episode, *, budget, per_step_cap, per_step_cost_cap, late_policy, lookahead,
                         t0: int = 0, last_query=None, hidden_status=None) -> Problem:
    """The problem of ``ep`` from step ``t0``. ``hidden_status`` (the environment's status codes of the hidden
    intentions, 1 = hit, 2 = false execution, 4 = late execution) fixes what happened before ``t0``."""
    vis = ep.kind == KIND_VISIBLE
    hidden = np.flatnonzero(~vis)
    tp_fixed = int(np.sum(vis & (ep.visible_outcome == VISIBLE_OUTCOMES.index("tp"))))
    fp_fixed = int(np.sum(vis & (ep.visible_outcome == VISIBLE_OUTCOMES.index("fp"))))
    if hidden_status is not None:
        tp_fixed += int(np.sum(hidden_status == 1))
        fp_fixed += int(np.sum((hidden_status == 2) | (hidden_status == 4)))
    reg = hidden[ep.registered[hidden]]
    start = np.where(ep.onset[reg] >= NEVER, NEVER, np.maximum(ep.active_from[reg], ep.onset[reg]))
    return Problem(
        horizon=ep.horizon, costs=np.asarray(ep.costs, dtype=np.int64), t0=int(t0),
        last_query=np.full(ep.n_resources, -1, dtype=np.int64) if last_query is None
        else np.asarray(last_query, dtype=np.int64),
        budget_left=None if budget is None else int(budget), n_max=per_step_cap, cost_cap=per_step_cost_cap,
        late_execute=late_policy == "execute", tp_fixed=tp_fixed, fp_fixed=fp_fixed,
        due=int(np.sum(due_positives(ep))), res=ep.resource[reg].astype(np.int64), start=start.astype(np.int64),
        until=ep.active_until[reg].astype(np.int64), deadline=ep.deadline[reg].astype(np.int64),
        positive=ep.polarity[reg] == POS,
        cand_lo=np.maximum(ep.active_from[reg], ep.declared_start[reg] - lookahead).astype(np.int64),
        cand_hi=np.minimum(ep.active_until[reg], ep.declared_end[reg]).astype(np.int64),
    )


def env_week(env, slot: int = 0):
    """``(unwrapped env, its core)`` after checking that ``env`` is a PM-week environment (``PMWeekEnv``,
    ``ConversationPM``, or with ``slot`` a ``PMWeekVectorEnv``; wrappers are unwrapped), that ``slot`` is one of
    its weeks and that the week has started (``reset``)."""
    e = getattr(env, "unwrapped", env)
    core = getattr(e, "core", None)
    if core is None or not hasattr(core, "episode"):
        raise TypeError(f"a PM-week teacher plays a PMWeek-v0 or ConversationPM environment (single or native "
                        f"vector), got {type(e).__name__}")
    check_int("slot", slot, 0, core.n - 1)
    if core.episode(slot) is None:
        raise RuntimeError("call reset() before asking a teacher about the week")
    return e, core


def problem_from_env(env, slot: int = 0) -> Problem:
    """The rest of the week an environment is in (what DAgger queries). ``env`` is a ``PMWeekEnv`` or, with
    ``slot``, a ``PMWeekVectorEnv`` (wrappers are unwrapped), after ``reset``."""
    env, core = env_week(env, slot)
    ep = core.episode(slot)
    k = int(core.n_int[slot])
    return problem_from_episode(
        ep, budget=None if core.budget_value < 0 else int(core.remaining[slot]),
        per_step_cap=None if core.n_max < 0 else core.n_max,
        per_step_cost_cap=None if core.cost_cap < 0 else core.cost_cap,
        late_policy="execute" if core.late_execute else "expire", lookahead=env.world.lookahead,
        t0=int(core.t[slot]), last_query=core.last_q[slot].copy(), hidden_status=core.status[slot, :k].copy())


class PMTeacher:
    """Shared arguments of the PM-week teachers (keyword-only, stored as given; checked when solving)."""

    def __init__(self, *, budget=None, per_step_cap=2, per_step_cost_cap=None, late_policy="expire", lookahead=2):
        self.budget = budget
        self.per_step_cap = per_step_cap
        self.per_step_cost_cap = per_step_cost_cap
        self.late_policy = late_policy
        self.lookahead = lookahead

    def __repr__(self):
        return constructor_repr(self)

    @classmethod
    def from_env(cls, env):
        """The teacher for an environment's budget, caps, late policy and world."""
        e = env.unwrapped
        return cls(budget=e.budget, per_step_cap=e.per_step_cap, per_step_cost_cap=e.per_step_cost_cap,
                   late_policy=e.late_policy, lookahead=e.world.lookahead)

    def _check(self, episode):
        """Every bad argument (in the bounds of ``PMWeekEnv`` and ``WorldConfig``: budget and cost cap
        1..MAX_BUDGET, count cap 1..MAX_RESOURCES, lookahead 0..MAX_HORIZON) and the episode's first bad field
        (:func:`validate_episode`'s order: horizon, resources, intentions, calendar, costs, hints, then each
        intention) in one error: an :class:`EpisodeFormatError` when the episode is among them, else a
        ``ValueError``."""
        problems, error = [], ValueError
        for name, low, high in (("budget", 1, MAX_BUDGET), ("per_step_cap", 1, MAX_RESOURCES),
                                ("per_step_cost_cap", 1, MAX_BUDGET), ("lookahead", 0, MAX_HORIZON)):
            try:
                check_int(name, getattr(self, name), low, high, none_ok=name != "lookahead")
            except ValueError as e:
                problems.append(str(e))
        if self.late_policy not in ("expire", "execute"):
            problems.append(f"late_policy must be 'expire' or 'execute', got {self.late_policy!r}")
        try:
            validate_episode(episode)
        except EpisodeFormatError as e:
            problems.append(str(e) if str(e).startswith("episode") else f"episode {e}")
            error = EpisodeFormatError
        if problems:
            raise error("; ".join(problems))


@dataclass
class Schedule:
    """A teacher's schedule and the episode counts it produces."""

    schedule: list
    """``(step, resource)`` pairs in step order."""
    f1: float
    tp: int
    fp: int
    fn: int
    cost: int
    """Cost of the schedule (from ``t0`` on for a continuation)."""
    tp_future: int = field(default=0, repr=False)
    fp_future: int = field(default=0, repr=False)

    def queries_at(self, t: int) -> list:
        return [r for s, r in self.schedule if s == t]
