"""Hindsight oracle of ``TierRouting-v0``: every tier combination's outcome is fixed per query, so enumerating the
3^5 = 243 combinations gives the exact per-query quality–cost Pareto front and the best combination for any λ or
hard cap. Used as the upper bound of evaluation and as a teacher (:func:`demonstrations`).

Privileged: it reads the outcome table (``env.unwrapped.outcome_table()``), never available to a router.
"""

from __future__ import annotations

import numpy as np

from membudget.envs.tiers.world import COMBOS, N_COMBOS


def _table(r_task, cost):
    r, c = np.asarray(r_task, dtype=np.float64), np.asarray(cost, dtype=np.float64)
    if r.shape != (N_COMBOS,) or c.shape != (N_COMBOS,):
        raise ValueError(f"r_task and cost must have shape ({N_COMBOS},), got {r.shape} and {c.shape}")
    return r, c


def pareto_front(r_task, cost) -> np.ndarray:
    """Indices of the non-dominated combinations (no other has ≥ quality at ≤ cost with one strict), by increasing
    cost (and strictly increasing quality). Among exact duplicates the lowest index is kept."""
    r, c = _table(r_task, cost)
    order = np.lexsort((np.arange(N_COMBOS), -r, c))       # cost ascending, then quality descending, then index
    front, best = [], -np.inf
    for i in order:
        if r[i] > best:
            front.append(i)
            best = r[i]
    return np.asarray(front, dtype=np.int64)


def best_combination(r_task, cost, *, lam=None, cost_ref=None, cap=None, mu=None) -> int:
    """Index of the best combination of one query. Objective: ``r_task + lam · (1 − clip(cost / cost_ref, 0, 1))``
    (the environment's static reward; needs ``cost_ref``), or ``r_task − mu · cost`` (a Lagrange multiplier in
    1/dollar), or ``r_task`` alone; restricted to ``cost ≤ cap`` when ``cap`` is given. Ties go to the lower cost,
    then the lower index."""
    r, c = _table(r_task, cost)
    if lam is not None and mu is not None:
        raise ValueError("give lam or mu, not both")
    if lam is not None:
        if cost_ref is None or not cost_ref > 0:
            raise ValueError("lam needs cost_ref > 0 (env.unwrapped.cost_ref)")
        score = r + lam * (1.0 - np.clip(c / cost_ref, 0.0, 1.0))
    elif mu is not None:
        score = r - mu * c
    else:
        score = r.copy()
    if cap is not None:
        feasible = c <= cap + 1e-15
        if not feasible.any():
            raise ValueError(f"no combination costs at most cap={cap}")
        score = np.where(feasible, score, -np.inf)
    best = np.flatnonzero(score == score.max())
    return int(best[np.argmin(c[best])])


def lagrangian_frontier(tables, mus, rank=None) -> np.ndarray:
    """Set-level oracle frontier over many queries: for each multiplier ``mu`` every query takes its
    ``argmax r_task − mu · cost``; returns rows ``(mu, mean cost, mean r_task)``. These are the vertices of the
    upper concave hull of the achievable (mean cost, mean quality) pairs; linear interpolation between them is
    achievable by mixing (:func:`frontier_at`). ``rank``: one (243,) array per query to choose by in place of its
    ``r_task`` (e.g. ``outcome_table(expected=True)``'s, for the expected-quality oracle); the mean quality is still
    the realised ``r_task``."""
    r = np.stack([np.asarray(t[0], float) for t in tables])
    c = np.stack([np.asarray(t[1], float) for t in tables])
    by = r if rank is None else np.stack([np.asarray(x, float) for x in rank])
    if by.shape != r.shape:
        raise ValueError(f"rank must hold one ({N_COMBOS},) array per table, got shape {by.shape}")
    rows = []
    for mu in mus:
        idx = np.argmax(by - mu * c - 1e-12 * c, axis=1)   # ties to the cheaper
        pick = np.arange(len(r))
        rows.append((float(mu), float(c[pick, idx].mean()), float(r[pick, idx].mean())))
    return np.asarray(rows)


def frontier_at(frontier: np.ndarray, cost: float) -> float:
    """Oracle mean quality at mean cost ``cost`` (linear interpolation on the frontier of
    :func:`lagrangian_frontier`; clamped to its ends)."""
    f = frontier[np.argsort(frontier[:, 1])]
    return float(np.interp(cost, f[:, 1], f[:, 2]))


class HindsightTierOracle:
    """Policy-protocol teacher that plays the best combination of the current query. **Privileged**: it takes the
    environment (``env``, a ``TierRoutingEnv`` or a wrapper of one) and reads its outcome table; the objective is
    that of :func:`best_combination` (``lam`` uses ``env.cost_ref``; ``cap`` defaults to the environment's
    ``max_cost_per_query``). ``expected=True`` ranks combinations by their answer probability before judge noise
    (the *expected-quality oracle*: it knows the query's hidden needs and hardness but not the noise, which no
    router can observe); the default ranks them by the realised ``r_task``. A single, unbatched observation per
    call."""

    def __init__(self, env=None, *, lam=None, mu=None, cap=None, expected=False):
        self.env, self.lam, self.mu, self.cap, self.expected = env, lam, mu, cap, expected

    def combination(self) -> tuple:
        if self.env is None:
            raise ValueError("HindsightTierOracle needs the environment (privileged): pass env=...")
        u = self.env.unwrapped
        r, c = u.outcome_table(expected=self.expected)
        cap = self.cap if self.cap is not None else u.max_cost_per_query
        lam = self.lam
        if lam is None and self.mu is None and u.lam_conditioned:
            lam = u.current_lam
        i = best_combination(r, c, lam=lam, cost_ref=u.cost_ref if lam is not None else None, cap=cap, mu=self.mu)
        return tuple(int(a) for a in COMBOS[i])

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        """The oracle's tier for the module about to be routed: one action for a single observation ``(d,)``, a
        ``(1,)`` array for a batch of one ``(1, d)`` (the oracle follows one environment)."""
        shape = np.shape(observation)
        if len(shape) not in (1, 2) or (len(shape) == 2 and shape[0] != 1):
            raise ValueError(f"HindsightTierOracle acts on one environment: pass one observation (d,) or a batch of "
                             f"one (1, d), got shape {shape}")
        if self.env is None:
            raise ValueError("HindsightTierOracle needs the environment (privileged): pass env=...")
        a = np.int64(self.combination()[self.env.unwrapped.module_index])
        return (a if len(shape) == 1 else np.array([a])), state


def demonstrations(env, seeds, **objective) -> tuple:
    """Teacher data: ``(observations (n, d) float32, actions (n,) int64)`` from playing the oracle on the queries
    ``seeds`` of ``env`` (5 steps per query), for behaviour cloning. ``objective``: the keyword arguments of
    :class:`HindsightTierOracle` (``lam``, ``mu``, ``cap``, ``expected``)."""
    oracle = HindsightTierOracle(env, **objective)
    obs_l, act_l = [], []
    for s in seeds:
        obs, _ = env.reset(seed=int(s))
        done = False
        while not done:
            a, _ = oracle.predict(obs)
            obs_l.append(obs)
            act_l.append(int(a))
            obs, _, term, trunc, _ = env.step(a)
            done = term or trunc
    return np.asarray(obs_l, dtype=np.float32), np.asarray(act_l, dtype=np.int64)


__all__ = ["HindsightTierOracle", "best_combination", "demonstrations", "frontier_at", "lagrangian_frontier",
           "pareto_front"]
