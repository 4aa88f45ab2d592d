"""What the agent of a ``PMWeek-v0`` week has seen: the :class:`Observed` record and the :class:`AgentView` wrapper
that builds it.

The one place that decides what the agent observes. At the decision of step ``t`` (after the observation of step
``t``, before its action) the agent has seen:

- the environment's public arguments (world, prices, budget, caps, late policy) — the sampler is fit with them;
- the retriever's hint of every resource at steps ``0..t`` (``obs["resources"][:, max_relevance]``, float32);
- its **ledger**: every stored (registered) hidden intention once stated (``active_from <= t``), with the fields
  the user gave — kind, resource, statement step, declared window, priority, miss cost, cross-day flag, version —
  and, for a new version, which stored intention it replaced; the registered updates up to ``t`` (the step an
  intention was cancelled or replaced); the step an unresolved intention left the ledger;
- its executed queries (``info["queried"]``) and, for each stored intention a query resolved, the step and what
  the controller did (``env.unwrapped.last_events``: hit, false execution, late miss, late execution, expired
  negative);
- the step counters ``info["tp"]``, ``info["fp"]``, ``info["fn"]`` of steps ``0..t-1`` (visible outcomes and
  hidden misses included: they are what the agent is told) and the remaining budget.

It has *not* seen: onsets, deadlines, polarities, unregistered intentions or updates, intentions not yet stated,
future hints, which misses happened to which intention, the visible intentions themselves, ids (an id names the
generator's row type) or the order of the generator's rows. Ledger entries are therefore numbered canonically
(by statement step, then the public fields), never by id or row.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import gymnasium as gym
import numpy as np

from membudget.envs.pm.core import RF
from membudget.envs.pm.env import PMWeekEnv
from membudget.envs.pm.world import KIND_VISIBLE

EVENT_CODES = {"hit": 1, "false_execution": 2, "late_miss": 3, "late_execution": 4, "expired_negative": 5}
"""Codes of ``Observed.ledger.event`` (the environment's status codes): what a query did to a stored intention."""
EVENT_POSITIVE = (1, 3, 4)
"""Events that show the intention was positive (the others show a negative one)."""
EVENT_ON_TIME = (1, 2)
"""Events of a query at or before the intention's deadline."""

PUBLIC_FIELDS = ("kind", "resource", "active_from", "declared_start", "declared_end", "priority", "miss_cost",
                 "cross_day", "version")
"""The fields of a stored intention that the user stated and the agent sees."""


@dataclass(frozen=True, eq=False)
class Ledger:
    """The agent's stored intentions at the decision of step ``t``, one entry per intention (canonical order)."""

    kind: np.ndarray
    resource: np.ndarray
    active_from: np.ndarray
    declared_start: np.ndarray
    declared_end: np.ndarray
    priority: np.ndarray
    miss_cost: np.ndarray
    cross_day: np.ndarray
    version: np.ndarray
    parent: np.ndarray
    """For a new version, the entry it replaced (-1: none)."""
    cancelled_at: np.ndarray
    """Step of the registered update that cancelled or replaced the entry (-1: none seen)."""
    left_at: np.ndarray
    """First step an unresolved entry was no longer in the ledger (-1: still there, or resolved first)."""
    resolved_at: np.ndarray
    """Step of the query that resolved the entry (-1: unresolved)."""
    event: np.ndarray
    """What that query did (:data:`EVENT_CODES`; 0: unresolved)."""

    def __len__(self) -> int:
        return int(self.kind.size)


@dataclass(frozen=True, eq=False)
class Observed:
    """Everything the agent has seen up to the decision at step ``t`` (see the module docstring)."""

    t: int
    horizon: int
    costs: np.ndarray
    hints: np.ndarray
    """``(t + 1, R)`` float64: the hint of each resource at steps ``0..t`` as observed (float32 values)."""
    queried: np.ndarray
    """``(t, R)`` bool: the executed queries of steps ``0..t-1``."""
    tp: np.ndarray
    """``(t,)`` ``info["tp"]`` of steps ``0..t-1`` (hidden hits and visible hits)."""
    fp: np.ndarray
    fn: np.ndarray
    remaining_budget: int | None
    ledger: Ledger

    @property
    def n_resources(self) -> int:
        return int(self.costs.size)

    @property
    def last_query(self) -> np.ndarray:
        """Per resource, the step of its last executed query before ``t`` (-1: never)."""
        t = self.queried.shape[0]
        steps = np.where(self.queried, np.arange(t)[:, None], -1)
        return steps.max(axis=0, initial=-1).astype(np.int64)

    def equals(self, other: Observed) -> bool:
        """Whether two records hold the same observations (arrays compared exactly)."""
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, Ledger):
                if not all(np.array_equal(getattr(a, g.name), getattr(b, g.name)) for g in fields(a)):
                    return False
            elif isinstance(a, np.ndarray):
                if a.shape != np.shape(b) or not np.array_equal(a, b):
                    return False
            elif a != b:
                return False
        return True


def ledger_rows(episode, t: int) -> np.ndarray:
    """Rows of ``episode`` in the agent's ledger at step ``t`` — stored hidden intentions stated by ``t`` — in the
    canonical order (statement step, then the public fields; never the row or id)."""
    rows = np.flatnonzero((episode.kind != KIND_VISIBLE) & episode.registered & (episode.active_from <= t))
    # lexsort's last key leads: the statement step first, so that entries stated later are appended (stable numbers)
    order = np.lexsort([getattr(episode, name)[rows] for name in reversed(_ORDER)])
    return rows[order]


_ORDER = ("active_from", "kind", "resource", "declared_start", "declared_end", "priority", "miss_cost", "cross_day",
          "version")


class AgentView(gym.Wrapper):
    """Records what the agent of a ``PMWeekEnv`` sees (:attr:`observed`), step by step, from the observations, the
    infos, the step's events and the agent's own ledger; nothing else of the week is read.

    ``AgentView(env).observed`` is the :class:`Observed` record at the current step (after ``reset`` or
    ``step``). The online teachers take this wrapper explicitly (they need the ledger and the events, which the
    observation only summarises)."""

    def __init__(self, env):
        super().__init__(env)
        if not isinstance(env.unwrapped, PMWeekEnv):
            raise TypeError(f"AgentView wraps a PMWeekEnv, got {type(env.unwrapped).__name__}")
        self._observed = None

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        ep = self.env.unwrapped.episode
        self._t = 0
        self._hints = [self._hint_row(obs)]
        self._queried, self._tp, self._fp, self._fn = [], [], [], []
        self._resolved = {}  # row -> (step, event code)
        self._left = {}  # row -> step
        self._row_ids = {ep.ids[i]: int(i) for i in np.flatnonzero(ep.kind != KIND_VISIBLE)}
        self._registered_updates = [u for u in ep.updates if u["registered"]]
        self._present = set()
        self._track_presence(ep, obs)
        self._observed = None
        return obs, info

    @staticmethod
    def _hint_row(obs) -> np.ndarray:
        return np.asarray(obs["resources"][:, RF.max_relevance], dtype=np.float64)

    def _track_presence(self, ep, obs):
        """Entries that left the ledger unresolved by the current step (the observation stops counting them)."""
        t = self._t
        rows = ledger_rows(ep, t)
        for i in rows.tolist():
            if i in self._resolved or i in self._left:
                continue
            if ep.active_until[i] < t:  # seen: it is no longer among the open intentions of the observation
                self._left[i] = int(ep.active_until[i]) + 1

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        t = self._t
        self._queried.append(np.asarray(info["queried"], dtype=bool).copy())
        self._tp.append(int(info["tp"]))
        self._fp.append(int(info["fp"]))
        self._fn.append(int(info["fn"]))
        for ident, name in self.env.unwrapped.last_events:
            code = EVENT_CODES.get(name)
            if code is not None:  # a query resolved one of the agent's stored intentions
                self._resolved[self._row_ids[ident]] = (t, code)
        self._t = t + 1
        if self._t < self.env.unwrapped.episode.horizon:
            self._hints.append(self._hint_row(obs))
            self._track_presence(self.env.unwrapped.episode, obs)
        self._observed = None
        return obs, reward, terminated, truncated, info

    @property
    def observed(self) -> Observed:
        """The :class:`Observed` record at the current step."""
        if self._observed is None:
            self._observed = self._build()
        return self._observed

    def _build(self) -> Observed:
        env = self.env.unwrapped
        ep = env.episode
        if ep is None:
            raise RuntimeError("call reset() first")
        t = self._t
        rows = ledger_rows(ep, t)
        handle = {int(i): k for k, i in enumerate(rows.tolist())}
        n = rows.size
        parent = np.full(n, -1, dtype=np.int64)
        cancelled = np.full(n, -1, dtype=np.int64)
        for u in self._registered_updates:
            if u["step"] > t:
                continue
            target = handle[self._row_ids[u["target"]]]
            cancelled[target] = u["step"]
            if u["new_id"] is not None:
                parent[handle[self._row_ids[u["new_id"]]]] = target
        left = np.array([self._left.get(int(i), -1) for i in rows], dtype=np.int64)
        res = [self._resolved.get(int(i), (-1, 0)) for i in rows]
        ledger = Ledger(
            **{name: getattr(ep, name)[rows].copy() for name in PUBLIC_FIELDS},
            parent=parent, cancelled_at=cancelled, left_at=left,
            resolved_at=np.array([r[0] for r in res], dtype=np.int64),
            event=np.array([r[1] for r in res], dtype=np.int64))
        R = ep.n_resources
        return Observed(
            t=t, horizon=int(ep.horizon), costs=np.asarray(ep.costs, dtype=np.int64).copy(),
            hints=np.array(self._hints[: t + 1], dtype=np.float64).reshape(min(t + 1, ep.horizon), R),
            queried=np.array(self._queried, dtype=bool).reshape(t, R),
            tp=np.array(self._tp, dtype=np.int64), fp=np.array(self._fp, dtype=np.int64),
            fn=np.array(self._fn, dtype=np.int64),
            remaining_budget=None if env.budget is None else int(env.core.remaining[0]),
            ledger=ledger)
