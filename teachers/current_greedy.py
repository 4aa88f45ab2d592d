"""The future-blind current-greedy oracle (BudgetPM §4 "Future-aware supervision controls")."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np

from membudget.envs.pm.core import (F_AF, F_AU, F_DL, F_DUE_END, F_ON, F_POL, F_REG, F_RES, METRIC_NAMES,
                                    N_BUDGET_FEATURES, N_RESOURCE_FEATURES, S_HIT, S_OPEN, PMWeekCore, M)
from membudget.envs.pm.world import POS

from .problem import PMTeacher, Schedule, env_week


def firing(core: PMWeekCore, i: int = 0):
    """Week ``i``'s intention table, its statuses and which intentions a query of their resource would resolve now
    (open, registered, active and past their onset): ``(table, status, fires)``."""
    k = int(core.n_int[i])
    t = int(core.t[i])
    tab, st = core.table[i, :k], core.status[i, :k]
    fires = (st == S_OPEN) & (tab[:, F_REG] == 1) & (tab[:, F_AF] <= t) & (t <= tab[:, F_AU]) & (tab[:, F_ON] <= t)
    return tab, st, fires


def _step_effects(core: PMWeekCore, i: int):
    """Per resource, what querying it alone now would do: (TP, FP, misses avoided), plus the misses that are
    charged this step if nothing is queried. Knows only the current step's outcomes."""
    t = int(core.t[i])
    tab, st, fires = firing(core, i)
    pos = tab[:, F_POL] == POS
    on_time = t <= tab[:, F_DL]
    tp = fires & pos & on_time
    fp = fires & ((~pos & on_time) | (pos & ~on_time & core.late_execute))
    saved = tp & (tab[:, F_DUE_END] == t)
    R = core.n_resources
    res = tab[:, F_RES]
    count = lambda m: np.bincount(res[m], minlength=R)  # noqa: E731
    misses = int(np.sum(pos & (tab[:, F_DUE_END] == t) & (st != S_HIT)))
    return count(tp), count(fp), count(saved), misses


def greedy_subset(core: PMWeekCore, i: int = 0) -> tuple:
    """The feasible subset of current candidates that maximises the running Set F1 after this step; ties to
    lower cost, then fewer queries, then lower indices.

    The running Set F1 is a ratio whose numerator and denominator are linear in the chosen set, so its
    unconstrained maximum is found exactly by Dinkelbach's iteration: at the best ratio every candidate of positive
    weight is in, every other out, and that set is the cheapest optimum. When it fits the caps and the budget it is
    the answer; only when it does not are the feasible subsets enumerated, by size up to the most that the
    cheapest candidates' costs allow (without a per-step count cap that enumeration can still grow as 2^n in the
    number n of firing candidates)."""
    t = int(core.t[i])
    tp0, fp0, fn0 = (int(core.counters[i, j]) for j in range(3))
    vtp, vfp, vfn = (int(v) for v in core.vis_step[i, t])
    dtp, dfp, dsaved, misses = _step_effects(core, i)
    cands = [r for r in np.flatnonzero(core.mask_state[i]).tolist() if dtp[r] or dfp[r]]
    costs = core.costs[i]
    n_max = core.n_max if core.n_max >= 0 else len(cands)
    budget = core.remaining[i] if core.budget[i] >= 0 else None
    limit = min(x for x in (budget, core.cost_cap if core.cost_cap >= 0 else None, np.inf) if x is not None)
    # Set F1 after the step = num / den, each the base plus the chosen candidates' terms
    num0, rest0 = 2 * (tp0 + vtp), fp0 + vfp + fn0 + vfn + misses
    dnum = {r: 2 * int(dtp[r]) for r in cands}
    dden = {r: 2 * int(dtp[r]) + int(dfp[r]) - int(dsaved[r]) for r in cands}

    def f1(sub):
        n = num0 + sum(dnum[r] for r in sub)
        d = n + rest0 + sum(dden[r] - dnum[r] for r in sub)
        return Fraction(n, d) if d else Fraction(0)

    ratio = f1(())
    while True:  # Dinkelbach: the positive-weight set at the current ratio, until the ratio stops rising
        best = tuple(r for r in cands if dnum[r] - ratio * dden[r] > 0)
        value = f1(best)
        if value <= ratio:
            break  # ratio is the maximum, and best (weights positive at it) its cheapest set
        ratio = value
    if value < ratio:  # nothing counted yet, so no query scores 0, not the ratio: the cheapest one reaching it
        best = (min((r for r in cands if dnum[r] == ratio * dden[r]), key=lambda r: (costs[r], r)),)
    if len(best) <= n_max and sum(int(costs[r]) for r in best) <= limit:
        return best
    k_fit = int(np.searchsorted(np.cumsum(np.sort(costs[cands])), limit, side="right")) if cands else 0
    best, best_key = (), None
    for size in range(0, min(n_max, len(cands), k_fit) + 1):
        for sub in itertools.combinations(cands, size):
            cost = int(sum(costs[r] for r in sub))
            if cost > limit:
                continue
            key = (f1(sub), -cost, -size)
            if best_key is None or key > best_key:  # combinations come in lexicographic order
                best, best_key = sub, key
    return best


class CurrentGreedy(PMTeacher):
    """Future-blind oracle: at each step the feasible subset with the best immediate effect on Set F1, knowing
    the current step's outcomes only (privileged: it reads the week's hidden onsets of the current step).
    Arguments as for :class:`~membudget.teachers.HindsightDP`."""

    def solve(self, episode) -> Schedule:
        """Play the whole week greedily; the schedule and its counts."""
        self._check(episode)
        core = PMWeekCore(1, episode.n_resources, budget=self.budget, per_step_cap=self.per_step_cap,
                          per_step_cost_cap=self.per_step_cost_cap, late_policy=self.late_policy, b_frac=1.0)
        core.load(0, episode, self.lookahead)
        rows = np.zeros(1, dtype=np.int64)
        R = episode.n_resources
        res, bud, mask = (np.zeros((1, R, N_RESOURCE_FEATURES), np.float32),
                          np.zeros((1, N_BUDGET_FEATURES), np.float32), np.zeros((1, R), np.int8))
        sel, skipped, reward = np.zeros((1, R), np.int8), np.zeros((1, 4), np.int64), np.zeros(1)
        events, metrics = np.zeros((1, 7), np.int64), np.zeros((1, len(METRIC_NAMES)))
        schedule = []
        for t in range(episode.horizon):
            core.observe(rows, res, bud, mask)
            scores = np.zeros((1, R))
            sub = greedy_subset(core)
            scores[0, list(sub)] = 1.0
            core.step(rows, scores, sel, skipped, reward, events, metrics)
            schedule += [(t, int(r)) for r in np.flatnonzero(sel[0])]
        m = metrics[0]
        return Schedule(schedule=schedule, f1=float(m[M["set_f1"]]), tp=int(m[M["tp"]]), fp=int(m[M["fp"]]),
                        fn=int(m[M["fn"]]), cost=int(m[M["realized_cost"]]))

    def act(self, env) -> np.ndarray:
        """The greedy binary action for an environment's current step (reads its hidden state)."""
        _, core = env_week(env)
        if core.t[0] >= core.horizon[0]:
            raise RuntimeError("the week has ended; call reset() before asking for an action")
        action = np.zeros(core.n_resources, dtype=np.int8)
        action[list(greedy_subset(core))] = 1
        return action
