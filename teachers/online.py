"""An online teacher for ``PMWeek-v0``: hindsight optimisation over posterior weeks.

At each step the planner draws ``K`` complete weeks from the posterior given what the agent has seen
(:class:`~membudget.teachers.posterior.PosteriorSampler`), and for every first action it could take now — a
subset of the current candidates within the per-step caps and the remaining budget — solves each week's rest
exactly with the hindsight DP from the state that action leads to. It takes the action with the best mean value
(sample average approximation of the one-step lookahead; "hindsight optimisation", Chong, Givan & Chang 2000;
Yoon et al. 2008). Only resources that some draw lets resolve something now are considered: a query that
resolves nothing changes nothing but the budget, so it is dominated in every draw.

Its Set F1 is that of an online policy, so it is a lower bound on the online optimum; the hindsight DP, which
sees the whole week, is an upper bound. Hindsight optimisation values each action as if the future were then
revealed, so it ignores the value of information (a query that would tell the planner something).
"""

from __future__ import annotations

import itertools

import numpy as np
from gymnasium.vector import AutoresetMode

from membudget.envs.pm.env import scores_of
from membudget.envs.pm.levels import budget_argument
from membudget.envs.pm.vector import PMWeekVectorEnv
from membudget.envs.pm.world import NEVER, POS
from membudget.envs.validation import check_int, check_number, constructor_repr, observation_entry

from .observed import AgentView, Observed
from .posterior import RW, PosteriorSampler


DEFAULT_SAMPLES = 32
"""The planner's default ``K`` (with ``max(64, 2 K)`` = 64 weighted draws): the setting
``python -m membudget.evaluate online-ceiling`` chose on the validation weeks 4000-4029 at B10
(docs/online_ceiling.md)."""


def default_particles(n_samples: int) -> int:
    """The planner's weighted draws per decision when not given: ``max(64, 2 K)``."""
    return max(64, 2 * n_samples)


class HindsightPlanner:
    """Online planner by hindsight optimisation over posterior draws (module docstring), following the policy
    protocol. It reads the agent's view through the :class:`~membudget.teachers.observed.AgentView` wrapper it is
    given (the observation alone summarises the ledger), never the week's hidden fields.

    Parameters
    ----------
    env : AgentView
        The wrapped environment the planner plays (single week; binary actions, or scores +1 / -1).
    n_samples : int
        ``K``, posterior weeks per decision (default :data:`DEFAULT_SAMPLES`, the studies' choice).
    n_particles : int, optional
        Weighted draws behind the ``K`` weeks (default ``max(64, 2 K)``).
    seed : int
        Seed of the planner's own random stream (draws), so that runs repeat.

    Attributes (after :meth:`fit`): ``sampler_``; after each decision ``last_`` (the step, the affordable
    candidates, the actions compared, their mean values, the draws' effective sample size, ``p_resolve``: per
    resource, the share of the ``K`` draws in which a query now resolves a stored intention — the posterior
    probability, estimated — and ``p_tp``: the share in which it resolves one on time, a true positive);
    ``retries_`` (samplings retried with more particles because no draw was consistent with the observations) and
    ``fallbacks_`` (decisions where even 16x the particles found none: the planner then proposes nothing — a
    simplification, counted).
    """

    def __init__(self, *, env, n_samples=DEFAULT_SAMPLES, n_particles=None, seed=0):
        self.env = env
        self.n_samples = n_samples
        self.n_particles = n_particles
        self.seed = seed

    def __repr__(self):
        return constructor_repr(self)

    def fit(self, X=None, y=None):
        """Check the settings and build the posterior sampler for the environment's world (``X``, ``y`` ignored)."""
        if not isinstance(self.env, AgentView):
            raise TypeError(f"env must be an AgentView-wrapped PMWeekEnv, got {type(self.env).__name__}")
        e = self.env.unwrapped
        check_int("n_samples", self.n_samples, 1, 100_000)
        check_int("seed", self.seed, 0)
        particles = default_particles(self.n_samples) if self.n_particles is None else self.n_particles
        check_int("n_particles", particles, 1, 10**6)
        self.sampler_ = PosteriorSampler.from_env(e, n_particles=particles).fit()
        self.rng_ = np.random.default_rng(self.seed)
        self.last_ = None
        self._expected = None
        self.retries_ = 0
        self.fallbacks_ = 0
        return self

    def _check_fitted(self):
        if not hasattr(self, "sampler_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted yet; call fit() first")

    def _mask(self, observation) -> np.ndarray:
        """The candidate mask of ``observation``, once fitted and for one environment (else a clear error)."""
        self._check_fitted()
        mask = np.asarray(observation_entry(observation, "mask"))
        if mask.ndim != 1:
            raise ValueError(f"{type(self).__name__} plays one week (an observation of one environment)")
        return mask

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        """The planner's action for the environment's current step (``observation`` must be its latest one)."""
        mask = self._mask(observation)
        a = self.act(self.env.observed, mask)
        if self.env.unwrapped.action_mode == "scores":  # the set as scores: +1 proposed, -1 not
            return scores_of(a), state
        return a, state

    def _draws(self, observed: Observed, expected):
        """``K`` posterior weeks; when no weighted draw is consistent with the observations (the proposals missed
        them), retried with 4x the particles and no miss guide from the previous step, then with the resources in
        random orders (4x, 4x, 16x the particles); None if all fail."""
        M = self.sampler_.n_particles
        for mult, guide, shuffle in ((1, expected, False), (4, None, False), (4, None, True), (4, None, True),
                                     (16, None, True)):
            self.sampler_.n_particles = M * mult
            try:
                return self.sampler_.sample(observed, self.n_samples, self.rng_, guide, shuffle)
            except ValueError as e:
                if "no draw is consistent" not in str(e):
                    raise
                self.retries_ += 1
            finally:
                self.sampler_.n_particles = M
        return None

    def _now(self, observed: Observed, mask):
        """The posterior at the decision ``observed.t``: the affordable candidates, the ``K`` draws and, per draw
        and resource, what a query now would resolve (true / false positives, anything at all); None where there
        is nothing to decide or no consistent draw."""
        e = self.env.unwrapped
        R = observed.n_resources
        costs = observed.costs
        budget = observed.remaining_budget
        cand = np.flatnonzero(mask)
        if budget is not None:
            cand = cand[costs[cand] <= budget]
        if e.per_step_cost_cap is not None:
            cand = cand[costs[cand] <= e.per_step_cost_cap]
        t = observed.t
        if cand.size == 0 or t >= observed.horizon:
            self.last_ = None
            return None
        # the previous step's expected misses steer this step's proposals (same week, one step on)
        prev = self._expected if self._expected is not None and 0 <= self._expected[0] < t else None
        draws = self._draws(observed, None if prev is None else prev[1])
        if draws is None:  # no consistent draw even with 16x the particles: propose nothing (counted)
            self.fallbacks_ += 1
            self._expected = None
            self.last_ = None
            return None
        self._expected = (t, self.sampler_.expected_misses_)
        # every draw's rows at once: (K, rows) arrays, the rows past a draw's own count masked out
        K = len(draws)
        rows = draws.rows
        valid = np.arange(rows.shape[1])[None, :] < draws.n_rows[:, None]
        r_ = np.where(valid, rows[..., RW.res], 0)
        onset = rows[..., RW.onset]
        now = valid & (rows[..., RW.registered] == 1) & (onset < NEVER) & (onset > observed.last_query[r_]) & \
            (onset <= t) & (t <= rows[..., RW.au])
        on_time = t <= rows[..., RW.deadline]
        pos = rows[..., RW.polarity] == POS
        k_ = np.broadcast_to(np.arange(K)[:, None], r_.shape)
        resolves = np.zeros((K, R), dtype=bool)
        resolves[k_[now], r_[now]] = True
        tp_now = np.zeros((K, R), dtype=np.int64)
        fp_now = np.zeros((K, R), dtype=np.int64)
        for counts, which in ((tp_now, now & pos & on_time),
                              (fp_now, now & ((~pos & on_time) | (pos & ~on_time & (e.late_policy == "execute"))))):
            np.add.at(counts, (k_[which], r_[which]), 1)
        return cand, draws, tp_now, fp_now, resolves

    def _first_actions(self, observed: Observed, cand, resolves) -> list:
        """The actions compared at a decision: the empty one, then every set of the candidates ``cand`` that
        resolve something in some draw (``resolves``, ``(K, R)``) within the per-step caps and the budget."""
        e = self.env.unwrapped
        costs, budget = observed.costs, observed.remaining_budget
        useful = resolves.any(axis=0)  # resolves something in some draw
        useful_c = [int(r) for r in cand if useful[r]]
        cap = len(useful_c) if e.per_step_cap is None else min(e.per_step_cap, len(useful_c))
        actions = [()]
        for n in range(1, cap + 1):
            for combo in itertools.combinations(useful_c, n):
                c = int(costs[list(combo)].sum())
                if (budget is None or c <= budget) and (e.per_step_cost_cap is None or c <= e.per_step_cost_cap):
                    actions.append(combo)
        return actions

    def act(self, observed: Observed, mask) -> np.ndarray:
        """Binary action for the decision at ``observed.t`` with candidate mask ``mask``: the compared action with
        the best mean value (:meth:`_action_values`), the empty one where it is the only one."""
        self._check_fitted()
        action = np.zeros(observed.n_resources, dtype=np.int8)
        now = self._now(observed, mask)
        if now is None:
            return action
        cand, draws, tp_now, _, resolves = now
        actions = self._first_actions(observed, cand, resolves)
        values = np.zeros(1) if len(actions) == 1 else self._action_values(observed, now, actions)
        action[list(actions[int(np.argmax(values))])] = 1
        self.last_ = {"t": observed.t, "candidates": cand, "actions": actions, "values": values, "ess": draws.ess,
                      "p_resolve": resolves.mean(axis=0), "p_tp": (tp_now > 0).mean(axis=0)}
        return action

    def _action_values(self, observed: Observed, now, actions) -> np.ndarray:
        """Each action's mean value over the draws of ``now`` (:meth:`_now`): the Set F1 of its resolutions now
        and the hindsight DP's optimum of the rest of each drawn week."""
        e = self.env.unwrapped
        _, draws, tp_now, fp_now, _ = now
        t, costs, budget = observed.t, observed.costs, observed.remaining_budget
        chosen = np.zeros((len(actions), observed.n_resources), dtype=np.int64)
        for j, combo in enumerate(actions):
            chosen[j, list(combo)] = 1
        # each action's last queries and budget left, the same in every draw
        lqs = np.where(chosen == 1, t, observed.last_query[None, :])
        left = [None if budget is None else budget - int(costs[list(combo)].sum()) for combo in actions]
        # resampled duplicates (one source) share their values
        _, first, which = np.unique(draws.source, return_index=True, return_inverse=True)
        values = draws.rest_values(first, t0=t + 1, budget_left=budget, per_step_cap=e.per_step_cap,
                                   per_step_cost_cap=e.per_step_cost_cap, last_queries=lqs, budgets=left,
                                   tp_add=tp_now[first] @ chosen.T, fp_add=fp_now[first] @ chosen.T)
        return values[which].mean(axis=0)


VENVS_KEPT = 8
"""Vector envs (one per size) a :class:`RolloutPlanner` keeps between decisions."""


class RolloutPlanner(HindsightPlanner):
    """Online planner by Monte-Carlo policy rollout over posterior draws (rollout algorithm: Bertsekas, Tsitsiklis &
    Wu 1997; on-line policy improvement: Tesauro & Galperin 1996), following the policy protocol. At each step it
    draws the ``K`` posterior weeks of :class:`HindsightPlanner` and compares the same first actions, but values
    each by the week's final Set F1 when the ``base`` policy plays the rest of the drawn week after it, instead of
    by the hindsight DP's rest. It takes the action with the best mean.

    The base decides from the drawn week's observations alone, so an action's value estimates what the agent earns
    by acting so now and following the base afterwards: an online value, without hindsight optimisation's optimism
    (the DP plays the rest as if the week were then revealed). With the exact posterior and enough draws, the
    planner does at least as well as its base (policy improvement); how far beyond it one step of lookahead goes
    depends on the base.

    Parameters as :class:`HindsightPlanner`'s, and

    base : policy
        ``predict(observation, state, episode_start, deterministic) -> (action, state)`` on a batch of observations
        (the package's gates and students and SB3's feed-forward policies follow it). A state (a history
        student's) must hold the weeks on its first axis (an array, or a tuple or list of them): the planner
        advances it through the week so far on one drawn week, whose observations are the agent's, and repeats it
        for every week it plays.
    base_action_mode : {"scores", "binary"}
        The action mode the base plays (the package's gates: ``"scores"``; its students: ``"binary"``).

    Each decision resets a :class:`~membudget.envs.pm.PMWeekVectorEnv` of (distinct draws x actions) weeks to the
    drawn weeks (:meth:`Particles.episode <membudget.teachers.posterior.Particles.episode>`, which draws the parts no
    observation touches from their prior with the planner's stream), replays the executed queries so far in every
    one, takes each action in its weeks and plays the base to the end, all weeks in one batch. Attributes as
    :class:`HindsightPlanner`'s; ``last_["values"]`` holds the mean final Set F1 of each action.
    """

    def __init__(self, *, env, base, base_action_mode="scores", n_samples=DEFAULT_SAMPLES, n_particles=None,
                 seed=0):
        super().__init__(env=env, n_samples=n_samples, n_particles=n_particles, seed=seed)
        self.base = base
        self.base_action_mode = base_action_mode

    def fit(self, X=None, y=None):
        """Check the settings (and that ``base`` has a ``predict``) and build the posterior sampler."""
        if self.base_action_mode not in ("scores", "binary"):
            raise ValueError(f"base_action_mode must be 'scores' or 'binary', got {self.base_action_mode!r}")
        if not callable(getattr(self.base, "predict", None)):
            raise TypeError(f"base must be a policy with a predict method, got {type(self.base).__name__}")
        super().fit()
        self.venvs_ = {}
        return self

    def _venv(self, n: int) -> PMWeekVectorEnv:
        """A started vector env of ``n`` weeks with the planner's environment's settings; the last
        :data:`VENVS_KEPT` sizes are kept (one of 300 weeks holds about 23 MB)."""
        venv = self.venvs_.pop(n, None)
        if venv is None:
            while len(self.venvs_) >= VENVS_KEPT:
                self.venvs_.pop(next(iter(self.venvs_)))
            e = self.env.unwrapped
            venv = PMWeekVectorEnv(
                n, budget=budget_argument(e), per_step_cap=e.per_step_cap, per_step_cost_cap=e.per_step_cost_cap,
                cost_profile=e.cost_profile, late_policy=e.late_policy, load=e.load, world=e.world,
                action_mode=self.base_action_mode, autoreset_mode=AutoresetMode.DISABLED)
            venv.reset(seed=0)
        self.venvs_[n] = venv  # the most recent last
        return venv

    def _rows(self, queried) -> np.ndarray:
        """Boolean rows of queries (``(n, R)``) as actions in the base's action mode."""
        if self.base_action_mode == "binary":
            return queried.astype(np.int8)
        return scores_of(queried)

    def _action_values(self, observed: Observed, now, actions) -> np.ndarray:
        """Each action's mean over the draws of ``now`` of the week's final Set F1 when the base plays the rest."""
        _, draws, _, _, _ = now
        t, R = observed.t, observed.n_resources
        _, first, copies = np.unique(draws.source, return_index=True, return_counts=True)
        D, A = first.size, len(actions)
        weeks = [draws.episode(int(k), self.rng_) for k in first]
        venv = self._venv(D * A)
        obs, _ = venv.reset(options={"episodes": [w for w in weeks for _ in range(A)]})
        replay = self._rows(observed.queried)
        chosen = np.zeros((A, R), dtype=bool)
        for j, combo in enumerate(actions):
            chosen[j, list(combo)] = True
        first_step = np.tile(self._rows(chosen), (D, 1))
        state, carries = None, True
        for s in range(t + 1):
            # every drawn week shows the agent's own observations until now, so the base's state is advanced on the
            # first week alone and copied to all (a stateless base returns None on the first step)
            if carries:
                _, state = self.base.predict({k: v[:1] for k, v in obs.items()}, state,
                                             episode_start=np.array([s == 0]), deterministic=True)
                carries = state is not None
            obs, _, done, _, info = venv.step(first_step if s == t else np.broadcast_to(replay[s], (D * A, R)))
        state = _repeat_rows(state, D * A)
        starts = np.zeros(D * A, dtype=bool)
        while not done.all():
            a, state = self.base.predict(obs, state, episode_start=starts, deterministic=True)
            obs, _, done, _, info = venv.step(a)
        return copies @ info["episode_metrics"]["set_f1"].reshape(D, A) / copies.sum()


def _repeat_rows(state, n: int):
    """A base policy's state of one week (an array with the weeks on its first axis, a tuple or list of them, or
    None) repeated for ``n`` weeks."""
    if state is None:
        return None
    if isinstance(state, (tuple, list)):
        return type(state)(_repeat_rows(x, n) for x in state)
    state = np.asarray(state)
    if state.ndim == 0 or state.shape[0] != 1:
        raise TypeError(f"a base policy's state must hold the weeks on its first axis (arrays, or tuples of them); "
                        f"got shape {state.shape} for one week")
    return np.repeat(state, n, axis=0)


class BayesFeatureGate(HindsightPlanner):
    """A threshold gate on the oracle feature: each candidate's posterior probability that a query now resolves a
    stored intention, estimated as the share of the ``K`` posterior draws in which it does (the planner's
    ``p_resolve``), sent as its score where it is at least ``threshold`` and -1 elsewhere; the environment's
    executor then takes the proposals by score within the per-step caps and the budget. It is what perfect
    features could tell a threshold gate such as BudgetPM's Sequential: it decides on the exact posterior but,
    unlike the planner, not on what a query would resolve (true or false positive, on time or late) nor on the
    budget left for later steps.

    Parameters as :class:`HindsightPlanner`'s, and ``threshold`` in (0, 1]. Plays ``action_mode="scores"``
    environments only (the executor's ranking is part of the gate). ``last_`` after each decision: the step, the
    draws' effective sample size and ``p_resolve``.
    """

    def __init__(self, *, env, threshold=0.5, n_samples=DEFAULT_SAMPLES, n_particles=None, seed=0):
        super().__init__(env=env, n_samples=n_samples, n_particles=n_particles, seed=seed)
        self.threshold = threshold

    def fit(self, X=None, y=None):
        """Check the settings (the threshold, the scores action mode) and build the posterior sampler."""
        check_number("threshold", self.threshold, 0, 1, low_open=True)
        if isinstance(self.env, AgentView) and self.env.unwrapped.action_mode != "scores":  # before anything is built
            raise ValueError("env must be an action_mode='scores' environment (BayesFeatureGate's scores are ranked by "
                             f"the executor), got action_mode {self.env.unwrapped.action_mode!r}")
        return super().fit()

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        """Scores for the environment's current step (``observation`` must be its latest one)."""
        mask = self._mask(observation)
        scores = np.full(mask.shape, -1.0, dtype=np.float32)
        now = self._now(self.env.observed, mask)
        if now is not None:
            cand, draws, _, _, resolves = now
            p = resolves.mean(axis=0)
            sent = cand[p[cand] >= self.threshold]
            scores[sent] = p[sent]
            self.last_ = {"t": self.env.observed.t, "ess": draws.ess, "p_resolve": p}
        return scores, state


def play(planner: HindsightPlanner, seed: int) -> dict:
    """Play one week with the planner (or the Bayes-feature gate) on its environment; the week's
    ``episode_metrics``. The planner's posterior draws continue its generator (``rng_``), as a stochastic
    policy's do: a second week played by the same planner depends on the first; ``planner.fit()`` starts the
    generator again from ``seed`` (the studies fit one planner per week, seed = the week)."""
    env = planner.env
    obs, _ = env.reset(seed=int(seed))
    done = False
    info = {}
    while not done:
        action, _ = planner.predict(obs)
        obs, _, done, _, info = env.step(action)
    return info["episode_metrics"]
