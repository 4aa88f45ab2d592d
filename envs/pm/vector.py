"""Native batched ``PMWeek-v0``: ``num_envs`` weeks stepped together by the same kernels as the single env."""

from __future__ import annotations

from functools import partial

import numpy as np
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..rendering import RENDER_MODES, blank_frame, check_render_mode, render_output
from ..validation import check_bool, check_int, check_options
from ..vector_info import read_only, with_masks
from .core import EV, N_BUDGET_FEATURES, N_RESOURCE_FEATURES, PMWeekCore, StepOutputs, generator_list, step_outputs
from .env import (action_to_scores, check_arguments, episode_metrics_batch, record_step, spaces_for, start_timeline,
                  step_info_batch, week_picture, week_text)
from .episode_io import validate_episode
from .levels import resolve_budget
from .world import Episode, check_generation, episode_from_state


class PMWeekVectorEnv(VectorEnv):
    """``num_envs`` PM weeks in numpy, trajectory-for-trajectory equal to ``num_envs`` :class:`PMWeekEnv`.

    ``reset(seed=s)`` seeds week ``i`` with ``s + i`` (a list of seeds is accepted too). ``autoreset_mode``
    (Gymnasium's ``AutoresetMode``, default ``NEXT_STEP``): with ``NEXT_STEP`` the step after a week ends resets
    it (its action is ignored, reward 0) and returns the first observation of the next week, drawn from that
    sub-environment's own generator, exactly as a single environment's ``reset()`` without a seed would; with
    ``SAME_STEP`` the ending step itself resets the week, returns the next week's first observation and puts the
    final one in ``infos["final_obs"]`` (rows marked by ``infos["_final_obs"]``); with ``DISABLED`` a finished week
    waits for ``reset(options={"reset_mask": ...})`` and stepping it raises. ``max_episode_steps`` truncates every
    week after that many steps (as Gymnasium's ``TimeLimit`` on the single environment).

    ``infos`` (of ``reset`` and ``step``) are exactly the single environment's infos batched the way Gymnasium's
    ``SyncVectorEnv`` batches them: every key of :data:`~membudget.envs.pm.env.STEP_INFO_KEYS` as an array over the
    weeks with its mask ``_key``; for weeks that terminated on this step, ``episode_metrics`` with the same fields
    as the single environment's (``set_f1``, ..., ``spend_per_quarter`` ``(num_envs, 4)``, ``time_due``, ...),
    each with its mask, and ``_episode_metrics`` (``RecordEpisodeStatistics``, which owns ``episode``, can wrap the
    environment); a week autoreset on this step reports its reset info; with ``SAME_STEP``, ``final_obs`` (an object
    array of the ended weeks' last observations) and ``final_info`` (their step infos, ``episode_metrics``
    included). The mask arrays are read-only (one array serves several keys).
    Arguments are those of :class:`PMWeekEnv` plus ``num_envs``; the settings are public attributes as there
    (``budget``, ``per_step_cap``, ``per_step_cost_cap``, ``cost_profile``, ``late_policy``, ``load``, ...).
    ``render()`` gives each week's render as :class:`PMWeekEnv` gives it (``render_mode`` ``"ansi"``, ``"human"`` or
    ``"rgb_array"``), in a tuple over the weeks as ``SyncVectorEnv``'s ``render()`` does; a week reset at an
    autoreset is drawn from its new start.

    One numba kernel call per step advances every week and writes every observation (one pass over each week's
    live intentions); the weeks that start at an autoreset are drawn, from each sub-environment's own generator,
    in one kernel call straight into the kernel's arrays. Their :class:`Episode` objects (which teachers read
    through ``env.unwrapped._core.episode(i)``) are built only when asked for, by drawing the week again from a
    copy of the generator's state.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 8, "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int = 1, budget="B10", per_step_cap=2, per_step_cost_cap=None,
                 cost_profile="unit", late_policy="expire", load=0, world=None, action_mode="binary",
                 observe_counts=False, autoreset_mode=AutoresetMode.NEXT_STEP, max_episode_steps=None,
                 render_mode=None):
        check_int("num_envs", num_envs, 1)
        try:
            self.autoreset_mode = AutoresetMode(autoreset_mode)
        except ValueError:
            raise ValueError(f"autoreset_mode must be one of {[m.value for m in AutoresetMode]}, got "
                             f"{autoreset_mode!r}") from None
        self.metadata = dict(self.metadata, autoreset_mode=self.autoreset_mode)
        self.max_episode_steps = check_int("max_episode_steps", max_episode_steps, 1, none_ok=True)
        self.world = check_arguments(budget, per_step_cap, per_step_cost_cap, cost_profile, late_policy, load,
                                     world, action_mode)
        self.budget, self.target_fraction = resolve_budget(budget, self.world, cost_profile)
        self.per_step_cap, self.per_step_cost_cap = per_step_cap, per_step_cost_cap
        self.cost_profile, self.late_policy, self.load, self.action_mode = cost_profile, late_policy, load, action_mode
        self.render_mode = check_render_mode(render_mode, "PMWeek-v0")
        self.num_envs = int(num_envs)
        self._timelines = [None] * self.num_envs  # each week's picture so far (rgb_array only) and its figure
        self._views = [None] * self.num_envs
        n, r = self.num_envs, len(self.world.resources)
        self.observe_counts = check_bool("observe_counts", observe_counts)
        self.single_observation_space, self.single_action_space = spaces_for(
            r, self.budget, self.target_fraction, per_step_cap, action_mode, self.observe_counts)
        self.observation_space = batch_space(self.single_observation_space, n)
        self.action_space = batch_space(self.single_action_space, n)
        self._core = PMWeekCore(n, r, budget=self.budget, per_step_cap=per_step_cap,
                                per_step_cost_cap=per_step_cost_cap, late_policy=late_policy,
                                b_frac=self.target_fraction)
        self._rngs = [seeding.np_random(None)[0] for _ in range(n)]
        self._np_seeds = [None] * n
        self._all = np.arange(n, dtype=np.int64)
        self._none = np.zeros(n, dtype=bool)
        self._no_scores = np.zeros((n, r))
        _, _, _, self._sel, self._skipped, self._reward, self._events, self._metrics = step_outputs(n, r)
        self._autoreset = np.zeros(n, dtype=bool)
        self._everyone = read_only(np.ones(n, dtype=bool))
        self._generator_list = None
        self._started = False

    def _new_weeks(self, slots: np.ndarray, seeds=None):
        """Draw the next week of each sub-environment in ``slots`` from its own generator straight into the core,
        all in one kernel call. A week's :class:`Episode` is built only if asked for (``self._core.episode(i)``),
        by drawing it again from a copy of the generator's state before the draw."""
        if slots.size == 0:
            return
        if self._generator_list is None:  # numba's list of the generators, so that a call need not convert them
            self._generator_list = generator_list(self._rngs)
        seeds = [None] * len(slots) if seeds is None else seeds
        states = [self._rngs[i].bit_generator.state for i in slots]
        core = self._core
        fitted = core.draw_into(slots, self._generator_list, self.world, self.cost_profile, self.load)
        for j, i in enumerate(slots.tolist()):
            make = partial(episode_from_state, states[j], self.world, self.cost_profile, seeds[j], self.load)
            if fitted[j]:
                core.set_episode(i, make)
            else:  # more intentions than the tables hold: load it as an Episode, which grows them
                core.load(i, make(), self.world.lookahead)

    def __getstate__(self):
        # numba's generator list is rebuilt from the generators when next needed; the figures (whose canvases do not
        # survive copying) are drawn anew from the recorded timelines
        return dict(self.__dict__, _generator_list=None, _views=[None] * self.num_envs)

    def _start_pictures(self, started):
        """New timelines (and figures to come) for the weeks marked in ``started``, just started and observed."""
        if self.render_mode == "rgb_array":
            for i in np.flatnonzero(started).tolist():
                self._timelines[i], self._views[i] = start_timeline(self._core, i), None

    def _record_pictures(self, stepped):
        """Record the step each week marked in ``stepped`` just took (after the kernel stepped and observed it)."""
        if self.render_mode == "rgb_array":
            core = self._core
            for i in np.flatnonzero(stepped).tolist():
                record_step(self._timelines[i], core, i, int(core.t[i]) - 1, self._sel[i],
                            int(self._events[i, EV.n_events]))

    def render(self):
        """Each week's render as :class:`PMWeekEnv` renders it, in a tuple over the weeks (None without a
        ``render_mode``, with Gymnasium's warning)."""
        if self.render_mode is None:
            return render_output(None, None, None)
        if not self._started:
            return tuple(render_output(self.render_mode, lambda: "PMWeek-v0: call reset() first",
                                       lambda: blank_frame("PMWeek-v0: call reset() first"))
                         for _ in range(self.num_envs))
        return tuple(render_output(self.render_mode, partial(week_text, self._core, i, self.budget, self.world),
                                   partial(self._picture, i)) for i in range(self.num_envs))

    def _picture(self, i: int) -> np.ndarray:
        self._views[i], frame = week_picture(self._views[i], self._timelines[i], self._core, i,
                                             self._core.episode(i), self.budget)
        return frame

    @property
    def np_random_seed(self) -> tuple:
        """Each week's seed at its last seeding (``seed + i`` after ``reset(seed=seed)``; the drawn entropy when
        seeded with None), as Gymnasium's ``SyncVectorEnv`` gives its sub-environments' seeds."""
        return tuple(self._np_seeds)

    @property
    def np_random(self) -> tuple:
        """Each week's generator (what its later weeks are drawn from), as ``SyncVectorEnv`` gives them."""
        return tuple(self._rngs)

    def _advance(self, stepping, scores):
        """Step the weeks marked in ``stepping`` and observe every week, into new observation arrays."""
        n, r = self.num_envs, self._core.n_resources
        res = np.empty((n, r, N_RESOURCE_FEATURES), dtype=np.float32)
        bud = np.empty((n, N_BUDGET_FEATURES), dtype=np.float32)
        mask = np.empty((n, r), dtype=np.int8)
        self._core.advance(self._all, stepping, True, scores, StepOutputs(res, bud, mask, self._sel, self._skipped,
                                                                          self._reward, self._events, self._metrics))
        obs = {"budget": bud}  # keys in the Dict space's order (sorted), as the single env gives them
        if self.observe_counts:
            obs["counts"] = self._core.running_counts(self._all)
        obs["mask"], obs["resources"] = mask, res
        return obs

    def _obs(self):
        return self._advance(self._none, self._no_scores)

    def _info_values(self) -> dict:
        """The step infos of every week (arrays, no masks) from the last kernel call: for a week stepped by it, its
        step; for a week (re)started since, its reset info."""
        core = self._core
        step = np.maximum(core.t - 1, 0)
        remaining = core.remaining.copy() if self.budget is not None else np.full(self.num_envs, -1, dtype=np.int64)
        return step_info_batch(step, self._sel.astype(bool), core.c_hist[self._all, step], remaining, self._skipped,
                               self._events)

    def reset(self, *, seed=None, options=None):
        """Start the weeks in ``options["reset_mask"]`` (default: all). ``seed`` as the class docstring says;
        ``options["episodes"]``, a sequence of ``num_envs`` entries, each an :class:`Episode` (that week is played,
        as the single environment's ``reset(options={"episode": ep})`` plays it; its sub-environment's generator is
        still seeded from ``seed`` for the weeks after it) or None (the week drawn as usual). Entries outside the
        reset mask must be None. One Episode object may fill several entries."""
        options = check_options(options, ("reset_mask", "episodes"))
        reset_mask = options.get("reset_mask")
        episodes = options.get("episodes")
        n = self.num_envs
        if reset_mask is None:
            reset_mask = np.ones(n, dtype=bool)
        else:
            reset_mask = np.asarray(reset_mask)
            if reset_mask.shape != (n,) or reset_mask.dtype != np.bool_:
                raise ValueError(f"reset_mask must be a bool array of shape ({n},)")
        if episodes is not None:
            episodes = self._check_episodes(episodes, reset_mask)
        if seed is None:
            seeds = [None] * n
        elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            seeds = [check_int("seed", seed, 0) + i for i in range(n)]
        elif isinstance(seed, (list, tuple, np.ndarray)):
            seeds = [None if x is None else check_int(f"seed[{i}]", x, 0) for i, x in enumerate(seed)]
        else:
            raise ValueError(f"seed must be a non-negative int, a list of them (None entries allowed) or None, "
                             f"got {seed!r}")
        if len(seeds) != n:
            raise ValueError(f"seed list must have {n} entries, got {len(seeds)}")
        if not self._started and not reset_mask.all():
            raise RuntimeError("the first reset must reset every sub-environment")
        check_generation(self.world, self.cost_profile, self.load)
        slots = np.flatnonzero(reset_mask)
        for i in slots:
            if seeds[i] is not None or not self._started:
                # in place, to the state seeding.np_random(seed) starts from: numba's list of the generators (which
                # points at their states) stays valid; rebuilding it cost a third of a 64-week reset
                sequence = np.random.SeedSequence(seeds[i])
                self._rngs[i].bit_generator.state = np.random.PCG64(sequence).state
                self._np_seeds[i] = int(sequence.entropy)
        given = np.zeros(n, dtype=bool) if episodes is None else np.array([ep is not None for ep in episodes])
        drawn = slots[~given[slots]]
        self._new_weeks(drawn, [seeds[i] for i in drawn])
        for i in np.flatnonzero(given).tolist():
            self._core.load(i, episodes[i], self.world.lookahead)
        self._started = True
        self._autoreset[reset_mask] = False
        obs = self._obs()
        self._start_pictures(reset_mask)
        values = _only_rows(reset_mask, self._info_values())
        return obs, with_masks(values, read_only(reset_mask.copy()))

    def _check_episodes(self, episodes, reset_mask) -> list:
        """``options["episodes"]`` checked (length, types, only reset slots, each distinct Episode valid and of this
        environment's resources) as a list."""
        if isinstance(episodes, (str, bytes, dict, Episode)) or not hasattr(episodes, "__len__"):
            raise TypeError(f"options['episodes'] must be a sequence of {self.num_envs} Episodes or None, got "
                            f"{type(episodes).__name__}")
        episodes = list(episodes)
        if len(episodes) != self.num_envs:
            raise ValueError(f"options['episodes'] must have {self.num_envs} entries, got {len(episodes)}")
        checked = set()
        for i, ep in enumerate(episodes):
            if ep is None:
                continue
            if not isinstance(ep, Episode):
                raise TypeError(f"options['episodes'][{i}] must be an Episode or None, got {type(ep).__name__}")
            if not reset_mask[i]:
                raise ValueError(f"options['episodes'][{i}] is given but week {i} is not in reset_mask")
            if id(ep) not in checked:
                validate_episode(ep)
                if ep.n_resources != self._core.n_resources:
                    raise ValueError(f"options['episodes'][{i}] has {ep.n_resources} resources, the environment "
                                     f"{self._core.n_resources}")
                checked.add(id(ep))
        return episodes

    def step(self, actions):
        if not self._started:
            raise RuntimeError("call reset() before step()")
        n, core = self.num_envs, self._core
        if self.autoreset_mode == AutoresetMode.DISABLED and self._autoreset.any():
            raise RuntimeError(f"weeks {np.flatnonzero(self._autoreset).tolist()} have ended; with autoreset_mode "
                               "DISABLED reset them with reset(options={'reset_mask': ...}) first")
        scores = action_to_scores(actions, (n, core.n_resources), self.action_mode)
        resetting = self._autoreset
        self._new_weeks(np.flatnonzero(resetting))
        stepping = ~resetting
        obs = self._advance(stepping, scores)  # a week just reset is observed, not stepped (reward 0)
        self._record_pictures(stepping)
        self._start_pictures(resetting)
        rewards = self._reward.copy()
        terminated = core.t >= core.horizon
        truncated = np.zeros(n, dtype=bool)
        if self.max_episode_steps is not None:
            truncated = (core.t >= self.max_episode_steps) & ~terminated
        values = self._info_values()
        infos = with_masks(values, self._everyone)
        if terminated.any():
            done = read_only(terminated.copy())
            metrics = _only_rows(terminated, episode_metrics_batch(self._metrics, core.vis_counts))
            infos["episode_metrics"], infos["_episode_metrics"] = with_masks(metrics, done), done
        ended = terminated | truncated
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            if ended.any():  # as SyncVectorEnv: the ended weeks' last step goes to final_obs / final_info
                gone = read_only(ended.copy())
                final_obs = np.full(n, None, dtype=object)
                for i in np.flatnonzero(ended):
                    final_obs[i] = {k: v[i].copy() for k, v in obs.items()}
                final = with_masks(_only_rows(ended, values), gone)
                if "episode_metrics" in infos:
                    final["episode_metrics"] = infos.pop("episode_metrics")
                    final["_episode_metrics"] = infos.pop("_episode_metrics")
                self._new_weeks(np.flatnonzero(ended))
                obs = self._obs()
                self._start_pictures(ended)
                fresh = self._info_values()
                infos = with_masks({k: np.where(_rows(ended, v), fresh[k], v) for k, v in values.items()},
                                   self._everyone)
                infos.update(final_obs=final_obs, _final_obs=gone, final_info=final, _final_info=gone)
            ended = np.zeros(n, dtype=bool)
        self._autoreset = ended
        return obs, rewards, terminated, truncated, infos

    @property
    def core(self) -> PMWeekCore:
        """The kernel state of the weeks (step, budget left, intentions and their status, query history, ...), which
        the teachers read to plan from where the agent is. Read it; writing to it is undefined."""
        return self._core

    def action_masks(self) -> np.ndarray:
        """``(num_envs, 2R)`` masks in sb3-contrib's MultiBinary form (see :meth:`PMWeekEnv.action_masks`)."""
        return np.stack([self._core.action_masks(i) for i in range(self.num_envs)])


def _rows(mask: np.ndarray, like: np.ndarray) -> np.ndarray:
    """``mask`` over the first axis, shaped to broadcast against ``like``."""
    return mask.reshape(mask.shape + (1,) * (like.ndim - 1))


def _only_rows(mask: np.ndarray, values: dict) -> dict:
    """``values`` (arrays over the weeks, nested dicts allowed) in the rows of ``mask`` and 0 elsewhere, as
    Gymnasium's batching leaves the sub-environments that did not report a key (new arrays, same dtypes)."""
    return {k: _only_rows(mask, v) if isinstance(v, dict) else np.where(_rows(mask, v), v, np.zeros((), v.dtype))
            for k, v in values.items()}
