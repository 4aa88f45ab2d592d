"""Several assistants, one observation quota: PM weeks sharing one hard-cap executor (PettingZoo).

Module conventions of PettingZoo: :func:`parallel_env` (the native form), :func:`env` (AEC, through PettingZoo's
``parallel_to_aec`` converter, whose ``step`` checks each action as it is given) and :class:`raw_env`, documented
there.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding
from pettingzoo import ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec_wrapper

from membudget.envs.pm.core import EV, PMWeekCore, step_outputs
from membudget.envs.pm.env import (EVENT_KEYS, SKIPPED_KEYS, action_to_scores, check_arguments, episode_summary,
                                   record_step, resource_labels, spaces_for, start_timeline, week_days)
from membudget.envs.pm.levels import resolve_budget
from membudget.envs.pm.world import MAX_RESOURCES, generate_episode
from membudget.envs.rendering import (RENDER_MODES, Render, Timeline, TimelineView, blank_frame, check_render_mode,
                                      figure_array, new_figure, timeline_legend)
from membudget.envs.validation import check_bool, check_int, check_options


def parallel_env(**kwargs) -> "raw_env":
    """The shared-budget environment in PettingZoo's parallel form (its native one): a :class:`raw_env` built with
    ``kwargs`` (``n_agents``, ``budget``, ``per_step_cap``, ... and ``render_mode``; see :class:`raw_env` for the
    arguments, spaces, rewards and episode end). Step it with one action per agent: ``env.step({agent: action})``."""
    return raw_env(**kwargs)


def env(**kwargs) -> "AECSharedBudget":
    """The shared-budget environment in PettingZoo's AEC form: :func:`parallel_env` with ``kwargs`` (the
    :class:`raw_env` arguments) wrapped in PettingZoo's ``parallel_to_aec`` converter (an :class:`AECSharedBudget`,
    which checks each action as it is given). Agents act one at a time: ``env.step(action)`` for
    ``env.agent_selection``."""
    return AECSharedBudget(parallel_env(**kwargs))


API_TEST_OPTIONS = {"options": 1}
"""The reset ``options`` PettingZoo's ``api_test`` and ``parallel_api_test`` pass to check that ``reset`` takes
them: accepted and ignored. Every other key is refused, as by the single-agent environments (none is supported)."""


class AECSharedBudget(parallel_to_aec_wrapper):
    """The AEC form: PettingZoo's converter, whose ``step`` refuses with a ``ValueError`` naming the agent what
    the converter only asserts or lets pass — an action for an agent that has terminated (its remaining step takes
    None), any step once every agent is done, a malformed action (checked when given, not when the last agent
    acts)."""

    def step(self, action):
        agent = getattr(self, "agent_selection", None)
        if agent is None:
            raise ValueError("call reset() before step()")
        if not self.agents:
            raise ValueError(f"the episode is over: every agent has terminated and left (the last was {agent!r}); "
                             f"call reset(), got the action {action!r}")
        if self.terminations[agent] or self.truncations[agent]:
            if action is not None:
                raise ValueError(f"agent {agent!r} has terminated: its remaining step takes None (PettingZoo's dead "
                                 f"step), got the action {action!r}")
        else:
            try:
                action_to_scores(action, self.action_space(agent).shape, "scores")
            except (ValueError, TypeError) as e:
                raise ValueError(f"agent {agent!r}: {e}") from None
        super().step(action)


class raw_env(Render, ParallelEnv):
    """
    ## Description

    Several assistants, one observation quota. Each agent ``agent_i`` owns a PM week (its own intentions and
    resources; week seed ``seed + i``, so with one agent the trajectories equal ``PMWeek-v0``'s exactly) and
    proposes a score per resource each step. One shared executor scans every agent's proposals by score (score /
    cost when prices differ), ties to lower cost, then to a random agent order drawn each step (so no agent index
    is favoured), then to the lower resource index; it skips non-candidates and whatever the shared episode
    budget, the shared per-step count cap or the per-step cost cap cannot afford, and keeps scanning. With
    ``floor = k`` each agent's own ``k`` best proposals are scanned first (in the random agent order;
    ``k * n_agents`` may not exceed the per-step cap).

    ## Action Space

    Per agent ``Box(-1, 1, (R,), float32)``, as ``PMWeek-v0`` with ``action_mode="scores"``: a score > 0 proposes
    the resource (``R`` = 11 resources by default).

    ## Observation Space

    Per agent a ``Dict``: the agent's own ``"resources"`` (``Box(R, 27)``) and ``"mask"`` (``MultiBinary(R)``),
    ``"budget"`` (``Box(9,)``): the budget features of the *shared* budget (its own query counts in the last
    three), and ``"others"`` (``Box(max(1, n_agents - 1),)``): every other agent's queries over the last five
    steps / 10 (one zero entry for a single agent). ``state()`` (``state_space``: a ``Box`` of
    ``n_agents * (27 R + 9 + R)`` float32) concatenates every agent's resources, budget and mask arrays.

    ## Rewards

    The agent's own change of running Set F1 (rewards sum to its episode Set F1), or the team mean with
    ``cooperative=True``.

    ## Starting State

    ``reset(seed=s)`` draws agent ``i``'s week from seed ``s + i`` (and the executor's tie order from an
    independent stream); the whole shared budget is available. ``reset`` takes no options (any key of ``options``
    raises ``ValueError``, as in ``PMWeek-v0``; PettingZoo's api-test probe ``{"options": 1}`` is ignored).

    ## Episode End

    All agents terminate together after the horizon ``T`` (80 steps by default); there is no truncation.
    ``infos[agent]`` at reset (nothing queried) and at every step has ``PMWeek-v0``'s step-info keys, numbers and
    fixed shapes (:data:`~membudget.envs.pm.env.STEP_INFO_KEYS`): ``step``, ``queried`` (``(R,)`` bool), ``cost``,
    ``remaining_budget`` (the shared budget left, -1 without one), ``skipped_non_candidate``, ``skipped_budget``,
    ``skipped_count_cap``, ``skipped_cost_cap`` (the agent's proposals the executor skipped, by reason) and the
    agent's own events of the step, ``tp``, ``fp``, ``fn``, ``late_execution``, ``late_miss``,
    ``expired_negative``; ``infos[agent]["episode_metrics"]``
    then holds the agent's end-of-episode summary, as in ``PMWeek-v0`` (its ``exhaustion_step`` the shared
    budget's).

    ## Arguments

    ``n_agents`` (default 2); ``budget`` — the shared episode budget: an int, a level name (``"B10"`` means the
    sum of the agents' B10 levels) or None; ``per_step_cap`` (shared, default 2 per agent: ``2 * n_agents``) and
    ``per_step_cost_cap`` (shared); ``floor`` (default 0); ``cooperative`` (default False); ``cost_profile``,
    ``late_policy``, ``load``, ``world`` as for ``PMWeek-v0``; ``render_mode``: ``"ansi"``, ``"human"``,
    ``"rgb_array"`` or None.

    ## Version History

    - v0: initial version. Since 0.2.0 the skipped proposals are flat info keys (``skipped_budget``, ...; they were
      the nested dict ``info["skipped"]``), and an agent's info has ``PMWeek-v0``'s other step-info keys too
      (``step``, ``late_execution``, ``late_miss``, ``expired_negative``); the episode metrics' breakdown per
      trigger type is flat keys (``time_due``, ...; it was the dict of dicts ``per_trigger_type``); dynamics,
      observation and reward are unchanged.
    """

    metadata = {"name": "membudget_shared_budget_v0", "render_modes": list(RENDER_MODES), "render_fps": 8,
                "is_parallelizable": True}

    def __init__(self, n_agents=2, budget="B10", per_step_cap="per_agent", per_step_cost_cap=None, floor=0,
                 cooperative=False, cost_profile="unit", late_policy="expire", load=0, world=None,
                 render_mode=None):
        check_int("n_agents", n_agents, 1)
        if per_step_cap == "per_agent":  # the default cap, 2 per agent, must stay within the executor's bound
            if n_agents > MAX_RESOURCES // 2:
                raise ValueError(f"per_step_cap='per_agent' (2 per agent) allows at most {MAX_RESOURCES // 2} "
                                 f"agents, got n_agents={n_agents}; pass a per_step_cap up to {MAX_RESOURCES} (or "
                                 "None) for more")
            per_step_cap = 2 * n_agents
        self.world = check_arguments(budget, per_step_cap, per_step_cost_cap, cost_profile, late_policy, load, world,
                                     "scores")
        check_int("floor", floor, 0)
        if floor and per_step_cap is not None and floor * n_agents > per_step_cap:
            raise ValueError(f"floor {floor} for {n_agents} agents needs a per-step cap of at least "
                             f"{floor * n_agents}, got {per_step_cap}")
        check_render_mode(render_mode, "the shared-budget environment")
        level, frac = resolve_budget(budget, self.world, cost_profile)
        self.budget = None if level is None else level * (n_agents if isinstance(budget, str) else 1)
        if not isinstance(budget, str) and budget is not None:
            frac /= n_agents  # an int is the shared total: the target fraction is per agent
        self.target_fraction = frac
        self.n_agents, self.per_step_cap, self.per_step_cost_cap = int(n_agents), per_step_cap, per_step_cost_cap
        self.floor, self.cooperative = int(floor), check_bool("cooperative", cooperative)
        self.cost_profile, self.late_policy, self.load, self.render_mode = cost_profile, late_policy, load, render_mode
        self.possible_agents = [f"agent_{i}" for i in range(self.n_agents)]
        self.agents = []
        R = len(self.world.resources)
        obs_space, act_space = spaces_for(R, self.budget, frac, per_step_cap, "scores")
        cap = R if per_step_cap is None else min(per_step_cap, R)
        # one zero entry for a single agent, so that the observation stays a non-empty array
        obs_space = spaces.Dict({**obs_space.spaces, "others": spaces.Box(
            0.0, cap * 5 / 10, (max(1, self.n_agents - 1),), dtype=np.float32)})
        # PettingZoo's per-agent dicts; a method cache (functools.lru_cache) would keep every instance alive
        self.observation_spaces = {a: obs_space for a in self.possible_agents}
        self.action_spaces = {a: act_space for a in self.possible_agents}
        res, bud = obs_space["resources"], obs_space["budget"]
        low = np.concatenate([np.tile(res.low.ravel(), n_agents), np.tile(bud.low, n_agents), np.zeros(n_agents * R)])
        high = np.concatenate([np.tile(res.high.ravel(), n_agents), np.tile(bud.high, n_agents), np.ones(n_agents * R)])
        self.state_space = spaces.Box(low.astype(np.float32), high.astype(np.float32), dtype=np.float32)
        # Slots of the core enforce nothing themselves: the shared executor below selects.
        self._core = PMWeekCore(self.n_agents, R, budget=self.budget, per_step_cap=None, per_step_cost_cap=None,
                                late_policy=late_policy, b_frac=frac)
        self._rows = np.arange(self.n_agents, dtype=np.int64)
        n = self.n_agents
        (self._res, self._bud, self._mask, self._sel, self._skipped, self._reward, self._events,
         self._metrics) = step_outputs(n, R)
        self._rngs = [seeding.np_random(None)[0] for _ in range(n)]
        self._tie_rng = np.random.default_rng()
        self.episodes = [None] * n
        self._timelines: list | None = None
        self._view: TimelineView | None = None

    def observation_space(self, agent):
        """The same space object for every call (``KeyError`` for a name not in ``possible_agents``)."""
        return self.observation_spaces[agent]

    def action_space(self, agent):
        """The same space object for every call (``KeyError`` for a name not in ``possible_agents``)."""
        return self.action_spaces[agent]

    def reset(self, seed=None, options=None):
        """Draw every agent's week (``seed``: agent ``i``'s week is ``seed + i``); the environment has no reset
        options: ``options`` is None or ``{}`` (any key raises ``ValueError``, a non-dict ``TypeError``), bar
        :data:`API_TEST_OPTIONS`, which PettingZoo's api tests pass to check the signature and which is ignored."""
        if not (isinstance(options, dict) and options == API_TEST_OPTIONS):
            check_options(options, ())
        seed = check_int("seed", seed, 0, none_ok=True)
        if seed is not None:
            self._rngs = [seeding.np_random(int(seed) + i)[0] for i in range(self.n_agents)]
            self._tie_rng = np.random.default_rng([int(seed), 1 << 20])  # independent of the weeks
        for i in range(self.n_agents):
            ep = generate_episode(None if seed is None else int(seed) + i, config=self.world,
                                  cost_profile=self.cost_profile, load=self.load, rng=self._rngs[i])
            self._core.load(i, ep, self.world.lookahead)
            self.episodes[i] = ep
        self.remaining = self.budget
        self.agents = list(self.possible_agents)
        obs = self._observe()
        if self._pictures:
            self._timelines = [start_timeline(self._core, i) for i in range(self.n_agents)]
            self._view = None
        n_res = len(self.world.resources)
        return obs, {a: self._info(0, np.zeros(n_res, dtype=bool), 0, [0] * len(SKIPPED_KEYS), [0] * len(EVENT_KEYS))
                     for a in self.agents}

    def _info(self, step, queried, cost, skipped, events) -> dict:
        """An agent's info: ``PMWeek-v0``'s step-info keys, the same numbers and shapes at reset (nothing queried)
        and at every step."""
        info = {"step": step, "queried": queried, "cost": cost,
                "remaining_budget": -1 if self.remaining is None else int(self.remaining)}
        info.update(zip(SKIPPED_KEYS, skipped))
        info.update(zip(EVENT_KEYS, events))
        return info

    def _observe(self):
        core = self._core
        if self.budget is not None:
            core.remaining[:] = self.remaining
        core.observe(self._rows, self._res, self._bud, self._mask)
        t = int(core.t[0])
        q5 = core.q_hist[:, max(0, t - 5): t].sum(axis=1) / 10.0
        obs = {}
        for i, a in enumerate(self.possible_agents):
            obs[a] = {"budget": self._bud[i].copy(), "mask": self._mask[i].copy(),  # the space's (sorted) key order
                      "others": (np.delete(q5, i) if self.n_agents > 1 else np.zeros(1)).astype(np.float32),
                      "resources": self._res[i].copy()}
        return obs

    def _execute(self, scores):
        """The shared hard-cap executor; returns the (agent, resource) selections and the skip counts."""
        core = self._core
        costs = core.costs
        unequal = costs.min() != costs.max()
        rank = np.empty(self.n_agents, dtype=np.int64)
        rank[self._tie_rng.permutation(self.n_agents)] = np.arange(self.n_agents)
        props = [(-(s / costs[i, r] if unequal else s), int(costs[i, r]), int(rank[i]), r, i)
                 for i in range(self.n_agents) for r, s in enumerate(scores[i]) if s > 0]
        props.sort()
        if self.floor:
            first, taken = [], {}
            for p in sorted(props, key=lambda p: (p[2], p[:2], p[3])):
                if taken.get(p[4], 0) < self.floor and core.mask_state[p[4], p[3]]:
                    first.append(p)
                    taken[p[4]] = taken.get(p[4], 0) + 1
            chosen = set(first)
            props = first + [p for p in props if p not in chosen]
        skipped = np.zeros((self.n_agents, 4), dtype=np.int64)
        selected, n_sel, cost = [], 0, 0
        for _, c, _, r, i in props:
            if not core.mask_state[i, r]:
                skipped[i, 0] += 1
            elif self.remaining is not None and c > self.remaining - cost:
                skipped[i, 1] += 1
            elif self.per_step_cap is not None and n_sel >= self.per_step_cap:
                skipped[i, 2] += 1
            elif self.per_step_cost_cap is not None and cost + c > self.per_step_cost_cap:
                skipped[i, 3] += 1
            else:
                selected.append((i, r))
                n_sel += 1
                cost += c
        return selected, skipped, cost

    def step(self, actions):
        if not isinstance(actions, dict):
            raise TypeError(f"actions must be a dict {{agent: action}} (PettingZoo's parallel API), got "
                            f"{type(actions).__name__}")
        if self.episodes[0] is None:
            raise RuntimeError("call reset() before step()")
        if not self.agents:
            raise ValueError(f"the episode is over: every agent has terminated; call reset(), got actions for "
                             f"{sorted(map(str, actions))}")
        missing = set(self.agents) - set(actions)
        if missing:
            raise ValueError(f"actions missing for {sorted(missing)}")
        unknown = set(actions) - set(self.agents)
        if unknown:
            raise ValueError(f"actions for {sorted(map(str, unknown))}, which are not agents of this episode "
                             f"{self.agents}")
        core, R = self._core, self._core.n_resources
        scores = np.empty((self.n_agents, R))
        for i, a in enumerate(self.possible_agents):
            try:
                scores[i] = action_to_scores(actions[a], (R,), "scores")
            except (ValueError, TypeError) as e:
                raise ValueError(f"agent {a!r}: {e}") from None
        selected, skipped, cost = self._execute(scores)
        chosen = np.zeros((self.n_agents, R))
        own = np.zeros(self.n_agents, dtype=core.remaining.dtype)
        for i, r in selected:
            chosen[i, r] = 1.0
            own[i] += core.costs[i, r]
        t = int(core.t[0])
        if self.budget is not None:
            # the budget is shared: each slot starts the step with the shared remainder less the other agents'
            # spending now, so that the core, subtracting its agent's own, ends it at the shared remainder (and
            # records the exhaustion step when that runs out)
            core.remaining[:] = self.remaining - (cost - own)
        core.step(self._rows, chosen, self._sel, self._skipped, self._reward, self._events, self._metrics)
        if self.budget is not None:
            self.remaining -= cost
        done = bool(core.t[0] >= core.horizon[0])
        rewards = self._reward.copy()
        if self.cooperative:
            rewards[:] = rewards.mean()
        obs = self._observe()
        if self._timelines is not None:
            for i, timeline in enumerate(self._timelines):
                record_step(timeline, core, i, t, self._sel[i], int(self._events[i, EV.n_events]))
        infos = {}
        for i, a in enumerate(self.possible_agents):
            infos[a] = self._info(t, self._sel[i].astype(bool), int(core.c_hist[i, t]), skipped[i].tolist(),
                                  self._events[i, :EV.n_events].tolist())
            if done:
                infos[a]["episode_metrics"] = episode_summary(self._metrics[i], core.vis_counts[i])
        out_rewards = {a: float(rewards[i]) for i, a in enumerate(self.possible_agents)}
        terms = {a: done for a in self.possible_agents}
        truncs = {a: False for a in self.possible_agents}
        if done:
            self.agents = []
        return obs, out_rewards, terms, truncs, infos

    def _text(self) -> str:
        if self.episodes[0] is None:
            return "shared budget: call reset() first"
        core = self._core
        budget = "none" if self.budget is None else f"{self.remaining}/{self.budget}"
        lines = [f"shared budget, {self.n_agents} agents, step {int(core.t[0])}/{int(core.horizon[0])}, "
                 f"shared budget left {budget}"]
        for i, a in enumerate(self.possible_agents):
            tp, fp, fn = (int(x) for x in core.counters[i, :3])
            lines.append(f"  {a}: TP {tp} FP {fp} FN {fn}, candidates "
                         f"{[name for r, (name, _) in enumerate(self.world.resources) if core.mask_state[i, r]]}")
        return "\n".join(lines)

    def _picture(self) -> np.ndarray:
        if self.episodes[0] is None:
            return blank_frame("shared budget: call reset() first")
        core, n = self._core, self.n_agents
        t = int(core.t[0])
        timeline = Timeline(n * core.n_resources, int(core.horizon[0]))
        for name in ("candidate", "queried", "events"):
            setattr(timeline, name, np.concatenate([getattr(tl, name) for tl in self._timelines], axis=-2))
        spent = np.concatenate([[0], np.cumsum(core.c_hist[:, :t].sum(axis=0))])
        f1 = []
        for i in range(n):
            tp, fp, fn = (int(x) for x in core.counters[i, :3])
            f1.append(f"{i}: {2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0:.3f}")
        budget = "no budget" if self.budget is None else f"shared budget used {int(spent[-1])}/{self.budget}"
        title = (f"shared budget, {n} agents  step {t}/{int(core.horizon[0])}, {budget}, "
                 f"{int(core.q_hist[:, :t].sum())} queries\nSet F1 by agent (visible intentions included): "
                 + ", ".join(f1))
        if self._view is None:
            fig = new_figure()
            labels = [f"{i}: {name}" for i in range(n) for name in resource_labels(self.episodes[i])]
            self._view = TimelineView(fig, fig.add_gridspec(1, 1, left=0.19, right=0.985, top=0.9, bottom=0.15)[0],
                                      labels, timeline.horizon, self.budget, week_days(self.episodes[0]),
                                      step_name=f"day ({timeline.horizon} steps)", group_size=core.n_resources)
            timeline_legend(fig)
        self._view.update(timeline, t, spent, title)
        return figure_array(self._view.fig)

    def state(self):
        """Global state (``state_space``): every agent's resources, then every agent's budget features, then every
        agent's mask, concatenated."""
        return np.concatenate([self._res.ravel(), self._bud.ravel(), self._mask.ravel().astype(np.float32)])


def jain_index(values) -> float:
    """Jain's fairness index (Σx)² / (n Σx²) of non-negative values (1 = perfectly even)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0 or np.any(x < 0):
        raise ValueError("Jain's index needs a non-empty array of non-negative values")
    s2 = np.sum(x ** 2)
    return 1.0 if s2 == 0 else float(np.sum(x) ** 2 / (x.size * s2))
