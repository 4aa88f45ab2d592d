"""The hindsight teacher as a Gymnasium wrapper: ``info["teacher_action"]`` at reset and at every step.

The label is the teacher's action for the state the agent is *in* — after any deviation, the optimum from where
the agent actually is (DAgger's label) — in the wrapped environment's own action space (same shape and dtype), at
every step, so vector environments batch it. At a terminal state, where no action is taken, it is the space's
neutral action (zeros; ``-1`` scores in PMWeek-v0's scores mode). Teachers per environment:

- ``PMWeek-v0``: the hindsight DP's optimal continuation from the visited state
  (:meth:`~membudget.teachers.HindsightDP.continuation`; re-solved only when the agent left the teacher's plan —
  on the plan, the plan's rest is the continuation), or with ``mode="plan"`` the DP's plan fixed at reset. The
  action proposes exactly the resources the teacher queries now (binary mode: 1; scores mode: score 1, -1
  elsewhere).
- ``TierRouting-v0``: the hindsight oracle's tier for the current module (the best combination of the query under
  the environment's objective and cap; ``expected=True``: the expected-quality oracle).
- ``ReplayStream-v0``: the hindsight-best action of the current task (the cheapest correct one).
- ``ProactiveStream-v0``: ProactMem's reference decision (eq. 9): in the decide sub-step intervene now (1) when the
  event is labelled positive, else abstain (0); in the depth sub-step the cheapest depth (0), since a teacher that
  knows the label needs no memory.

The shared-budget PettingZoo environment has no wrapper: the exact team optimum (a mean of per-agent Set F1, a sum
of ratios under a joint budget) is not what the DP computes, so there is no exact per-agent teacher to expose.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from membudget.envs.pm import PMWeekEnv, PMWeekVectorEnv
from membudget.envs.proactive import ProactiveStreamEnv
from membudget.envs.replay import ReplayStreamEnv
from membudget.envs.tiers import TierRoutingEnv
from membudget.envs.validation import check_bool, check_int
from membudget.teachers.hindsight_dp import solve_problem
from membudget.teachers.problem import problem_from_env
from membudget.teachers.tier_oracle import HindsightTierOracle

TEACHER_KEY = "teacher_action"
"""The ``info`` key the wrappers fill."""
MODES = ("continuation", "plan")


def _neutral(space):
    if isinstance(space, gym.spaces.Box):
        return np.full(space.shape, -1.0 if space.low.min() < 0 else 0.0, dtype=space.dtype)
    return np.zeros(space.shape, dtype=space.dtype)


class _PMPlan:
    """The DP teacher of one PM week (one slot of a core): a plan ``{t: [resources]}`` kept while the agent
    follows it, re-solved from the visited state when it does not (``continuation`` mode). With ``exact_cost``
    the plan is the optimum among schedules whose whole-week cost is exactly that (the continuation: exactly what
    is left of it); an empty plan where none exists."""

    def __init__(self, env, slot: int, mode: str, exact_cost=None):
        self.env, self.slot, self.mode, self.exact_cost = env, slot, mode, exact_cost
        self.solves = 0

    def solve(self):
        """The DP continuation from the slot's current state (at reset: the whole week's optimum)."""
        self.plan = {}
        left = None
        if self.exact_cost is not None:
            left = self.exact_cost - int(self.env.core.c_hist[self.slot].sum())
        schedule = solve_problem(problem_from_env(self.env, self.slot), left) if left is None or left >= 0 else None
        for t, r in schedule.schedule if schedule is not None else ():
            self.plan.setdefault(int(t), []).append(int(r))
        self.solves += 1

    def after_step(self, t: int, queried) -> None:
        if self.mode == "continuation" and sorted(int(r) for r in queried) != sorted(self.plan.get(t, [])):
            self.solve()

    def now(self) -> list:
        return self.plan.get(int(self.env.core.t[self.slot]), [])


def _pm_action(resources, space, action_mode):
    if action_mode == "binary":
        a = np.zeros(space.shape, dtype=space.dtype)
        a[resources] = 1
    else:
        a = np.full(space.shape, -1.0, dtype=space.dtype)
        a[resources] = 1.0
    return a


class HindsightTeacher(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Adds the hindsight teacher's action for the current state to ``info["teacher_action"]`` (see the module
    documentation for the teacher of each environment).

    ``mode`` (PMWeek-v0): ``"continuation"`` (default; the optimum from the visited state) or ``"plan"`` (the DP's
    plan fixed at reset, whatever the agent does); ``exact_cost`` (PMWeek-v0): the optimum among schedules whose
    week costs exactly that much (BudgetPM's exact-cost teacher; no proposal where none is left). ``expected``
    (TierRouting-v0, a bool): the expected-quality oracle instead of the hindsight one. ``teacher_solves`` counts
    the DP solves so far (PMWeek-v0)."""

    def __init__(self, env: gym.Env, *, mode: str = "continuation", expected: bool = False, exact_cost=None):
        gym.utils.RecordConstructorArgs.__init__(self, mode=mode, expected=expected, exact_cost=exact_cost)
        gym.Wrapper.__init__(self, env)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode, self.expected = mode, check_bool("expected", expected)
        base = env.unwrapped
        if exact_cost is not None:
            check_int("exact_cost", exact_cost, 0)
            if not isinstance(base, PMWeekEnv):
                raise ValueError("exact_cost applies to PMWeek-v0 only")
        if self.expected and not isinstance(base, TierRoutingEnv):
            raise ValueError("expected=True applies to TierRouting-v0 only")
        if isinstance(base, PMWeekEnv):
            self._kind = "pm"
            self._pm = _PMPlan(base, 0, mode, exact_cost)
        elif isinstance(base, TierRoutingEnv):
            self._kind = "tiers"
            self._oracle = HindsightTierOracle(env, expected=self.expected)
        elif isinstance(base, ReplayStreamEnv):
            self._kind = "replay"
        elif isinstance(base, ProactiveStreamEnv):
            self._kind = "proactive"
        else:
            raise TypeError(f"no hindsight teacher for {type(base).__name__}; supported: PMWeekEnv, TierRoutingEnv, "
                            "ReplayStreamEnv, ProactiveStreamEnv")
        self.teacher_action = _neutral(self.action_space)

    @property
    def teacher_solves(self) -> int:
        return self._pm.solves if self._kind == "pm" else 0

    def _label(self, terminal: bool):
        base = self.env.unwrapped
        if terminal:
            return _neutral(self.action_space)
        if self._kind == "pm":
            return _pm_action(self._pm.now(), self.action_space, base.action_mode)
        if self._kind == "tiers":
            return np.int64(self._oracle.combination()[base.module_index])
        if self._kind == "replay":
            return np.int64(self._replay_best[base.task_index])
        return np.int64(int(base.stream.label[base.event_index]) if base.phase == 1 else 0)

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        if self._kind == "pm":
            self._pm.solve()
        elif self._kind == "replay":
            self._replay_best = self.env.unwrapped.stream.oracle_actions()
        self.teacher_action = self._label(False)
        info[TEACHER_KEY] = self.teacher_action
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if self._kind == "pm" and not terminated:
            self._pm.after_step(info["step"], np.flatnonzero(info["queried"]))
        self.teacher_action = self._label(terminated or truncated)
        info[TEACHER_KEY] = self.teacher_action
        return obs, reward, terminated, truncated, info


class HindsightTeacherVector(gym.vector.VectorWrapper):
    """The batched teacher of the native :class:`~membudget.envs.pm.PMWeekVectorEnv`: ``info["teacher_action"]``
    of shape ``(num_envs, R)`` (with the ``_teacher_action`` mask Gymnasium's vector infos carry), the DP
    continuation of every week from its visited state (``mode`` as in :class:`HindsightTeacher`), in every
    autoreset mode of the native env: a week that ended gets the neutral action and its replacement its new plan
    (with ``SAME_STEP`` at once, the step's observation being the new week's)."""

    def __init__(self, env: PMWeekVectorEnv, *, mode: str = "continuation"):
        super().__init__(env)
        base = env.unwrapped
        if not isinstance(base, PMWeekVectorEnv):
            raise TypeError(f"HindsightTeacherVector wraps a PMWeekVectorEnv, got {type(base).__name__}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self._plans = [_PMPlan(base, i, mode) for i in range(base.num_envs)]
        self.teacher_action = np.stack([_neutral(base.single_action_space)] * base.num_envs)
        self._resetting = np.zeros(base.num_envs, dtype=bool)  # weeks the next step autoresets (NEXT_STEP)

    def _labels(self, done):
        base = self.env.unwrapped
        out = np.stack([_neutral(base.single_action_space) if d else
                        _pm_action(p.now(), base.single_action_space, base.action_mode)
                        for p, d in zip(self._plans, done)])
        self.teacher_action = out
        return out

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        mask = (options or {}).get("reset_mask")
        for i, p in enumerate(self._plans):
            if mask is None or mask[i]:
                p.solve()
        self._resetting &= False if mask is None else ~np.asarray(mask)
        n = self.num_envs
        info = dict(info, **{TEACHER_KEY: self._labels(np.zeros(n, dtype=bool)), f"_{TEACHER_KEY}": np.ones(n, bool)})
        return obs, info

    def step(self, actions):
        base = self.env.unwrapped
        resetting = self._resetting
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        ended = terminated | truncated
        for i in np.flatnonzero(~resetting & ~ended):
            self._plans[i].after_step(int(info["step"][i]), np.flatnonzero(info["queried"][i]))
        same_step = base.autoreset_mode == gym.vector.AutoresetMode.SAME_STEP
        for i in np.flatnonzero(resetting | (ended if same_step else False)):
            self._plans[i].solve()  # a new week began in this step
        self._resetting = ended & (base.autoreset_mode == gym.vector.AutoresetMode.NEXT_STEP)
        n = self.num_envs
        done = np.zeros(n, dtype=bool) if same_step else ended
        info = dict(info, **{TEACHER_KEY: self._labels(done), f"_{TEACHER_KEY}": np.ones(n, bool)})
        return obs, rewards, terminated, truncated, info


class TeacherPolicy:
    """The teacher through the policy protocol: ``predict`` returns the wrapped environment's current
    ``teacher_action`` (batched for :class:`HindsightTeacherVector`), so the teacher is evaluated, recorded (e.g.
    into a Minari dataset with ``minari.DataCollector``) and cloned by the same loops as any policy. Privileged:
    it takes the wrapped environment (or any wrapper around a :class:`HindsightTeacher`)."""

    def __init__(self, env):
        teacher = env
        while not isinstance(teacher, (HindsightTeacher, HindsightTeacherVector)):
            if not hasattr(teacher, "env"):
                raise TypeError("TeacherPolicy reads a HindsightTeacher or HindsightTeacherVector wrapper; wrap the "
                                "environment first")
            teacher = teacher.env
        self.env = teacher

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        """The teacher's action for the wrapped environment's current state, shaped as SB3's ``predict`` shapes
        it: one action for a single observation, ``(n, ...)`` for a batch of ``n``. The batch must be the
        environments the teacher follows: ``num_envs`` of a :class:`HindsightTeacherVector`, one of a
        :class:`HindsightTeacher` (as SB3's ``evaluate_policy`` passes it)."""
        from stable_baselines3.common.utils import is_vectorized_observation

        vector = isinstance(self.env, HindsightTeacherVector)
        space = self.env.single_observation_space if vector else self.env.observation_space
        n = self.env.num_envs if vector else 1
        batched = is_vectorized_observation(observation, space)
        rows = len(next(iter(observation.values())) if isinstance(observation, dict) else observation) \
            if batched else None
        if (rows or 1) != n or (vector and not batched):
            raise ValueError(f"the teacher follows {n} environment{'s' * (n > 1)}: pass "
                             f"{'a batch of ' + str(n) if vector else 'one observation, or a batch of one'}, got "
                             f"{'a batch of ' + str(rows) if batched else 'a single observation'}")
        action = self.env.teacher_action.copy()
        return (action[None] if batched and not vector else action), state
