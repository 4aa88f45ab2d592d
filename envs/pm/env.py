"""``membudget/PMWeek-v0``: which external-state resources to check now for stored intentions."""

from __future__ import annotations

import numpy as np
import gymnasium as gym
from gymnasium import spaces

from ..rendering import (RENDER_MODES, Render, Timeline, TimelineView, blank_frame, check_render_mode, figure_array,
                         new_figure, timeline_legend)
from ..validation import check_bool, check_int, check_options
from ..vector_info import info_row
from .core import (BF, C_FN, C_FP, C_TP, EV, EV_MISS, F_RES, M, METRIC_NAMES, N_BUDGET_FEATURES, N_RESOURCE_FEATURES, RF,
                   S_FALSE, S_HIT, S_LATE_EXEC, SKIP_NAMES, VIS_DUE, VIS_HIT, OneWeek, PMWeekCore)
from .episode_io import validate_episode
from .levels import resolve_budget
from .world import (KIND_VISIBLE, MAX_BUDGET, MAX_RESOURCES, Episode, WorldConfig,
                    check_generation, generate_episode)

ACTION_MODES = ("binary", "scores")
LATE_POLICIES = ("expire", "execute")
SKIPPED_KEYS = tuple(f"skipped_{name}" for name in SKIP_NAMES)
"""Info keys of the proposals the executor skipped this step, by reason."""
EVENT_KEYS = ("tp", "fp", "fn", "late_execution", "late_miss", "expired_negative")
"""Info keys of this step's events, in the order of the core's event counts."""
STEP_INFO_KEYS = ("step", "queried", "cost", "remaining_budget", *SKIPPED_KEYS, *EVENT_KEYS)
"""The keys of ``info`` at every step and at reset, single and vector env alike."""
TRIGGER_TYPES = ("time", "channel", "cross_day", "update_sensitive", "visible")
"""The trigger types of ``episode_metrics``' breakdown: ``{type}_due``, ``{type}_hit`` (due and on-time counts) and
``{type}_recall`` (NaN where nothing was due)."""
INT_METRICS = ("tp", "fp", "fn", "realized_cost", "queries", "exhaustion_step", "on_time_hit", "late_execution", "miss",
               "false_alarm", "update_violation")
"""``episode_metrics`` entries that are counts (int); the others are floats."""


def check_arguments(budget, per_step_cap, per_step_cost_cap, cost_profile, late_policy, load, world, action_mode):
    """Validate constructor arguments shared by the single and the vector environment; returns the world."""
    world = WorldConfig() if world is None else world
    if not isinstance(world, WorldConfig):
        raise TypeError(f"world must be a WorldConfig, got {type(world).__name__}")
    if late_policy not in LATE_POLICIES:
        raise ValueError(f"late_policy must be one of {LATE_POLICIES}, got {late_policy!r}")
    if action_mode not in ACTION_MODES:
        raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {action_mode!r}")
    check_int("per_step_cap", per_step_cap, 1, MAX_RESOURCES, none_ok=True)
    check_int("per_step_cost_cap", per_step_cost_cap, 1, MAX_BUDGET, none_ok=True)
    check_generation(world, cost_profile, load)  # the cost profile, the load and what the world can draw with them
    return world


def spaces_for(n_res, budget, b_frac, per_step_cap, action_mode, observe_counts=False):
    """Single-week observation and action spaces (with ``observe_counts``: the ``"counts"`` key too)."""
    low = np.zeros((n_res, N_RESOURCE_FEATURES), dtype=np.float32)
    low[:, [RF.sin_time_of_day, RF.cos_time_of_day, RF.sin_weekday, RF.cos_weekday, RF.signed_window_distance]] = -1.0
    high = np.ones((n_res, N_RESOURCE_FEATURES), dtype=np.float32)
    cap = n_res if per_step_cap is None else min(per_step_cap, n_res)
    b_low = np.zeros(N_BUDGET_FEATURES, dtype=np.float32)
    b_low[BF.spend_minus_progress] = -1.0
    b_high = np.ones(N_BUDGET_FEATURES, dtype=np.float32)
    b_high[BF.target_fraction] = max(1.0, b_frac)
    b_high[BF.remaining_per_step] = 1.0 if budget is None else max(1.0, budget)
    b_high[[BF.queries_last5, BF.queries_last10, BF.queries_prev]] = cap * 5 / 10, cap * 10 / 20, cap / 2
    obs = {
        "resources": spaces.Box(low, high, dtype=np.float32),
        "budget": spaces.Box(b_low, b_high, dtype=np.float32),
        "mask": spaces.MultiBinary(n_res),
    }
    if observe_counts:
        obs["counts"] = spaces.Box(0.0, 1.0, (3,), dtype=np.float32)
    obs = spaces.Dict(obs)
    if action_mode == "binary":
        act = spaces.MultiBinary(n_res)
    else:
        act = spaces.Box(-1.0, 1.0, (n_res,), dtype=np.float32)
    return obs, act


def scores_of(proposed) -> np.ndarray:
    """The score action (float32: +1 proposed, -1 not) that proposes the set ``proposed`` (a binary action or a
    boolean mask, any shape)."""
    return np.where(np.asarray(proposed) > 0, 1.0, -1.0).astype(np.float32)


_BINARY = frozenset((0.0, 1.0))


def action_to_scores(action, shape: tuple, action_mode: str) -> np.ndarray:
    """Priority scores (<= 0: not proposed) from a policy action of ``shape``; raises on anything malformed."""
    try:
        a = np.asarray(action)
    except (ValueError, TypeError) as e:
        raise ValueError(f"action must be an array of shape {shape}, got {type(action).__name__} ({e})") from None
    if a.shape != shape:
        raise ValueError(f"action must have shape {shape}, got {a.shape}")
    if a.dtype.kind not in "biuf":
        raise TypeError(f"action must be numeric or bool, got dtype {a.dtype}")
    s = a.astype(np.float64)
    if action_mode == "binary":
        # one environment's few values: a set test costs less than three ufunc calls; a batch: s(1 - s) is zero
        # exactly for 0 and 1 (NaN fails both tests)
        if (not _BINARY.issuperset(s.ravel().tolist())) if s.size <= 64 else np.count_nonzero(s * (1.0 - s)):
            raise ValueError(f"binary action values must be 0 or 1, got {a}")
    elif np.count_nonzero(np.abs(s) <= 1.0) != s.size:
        raise ValueError(f"score action values must lie in [-1, 1] (<= 0: not proposed), got {a}")
    return s


def episode_metrics_batch(metrics: np.ndarray, visible: np.ndarray) -> dict:
    """The ``info["episode_metrics"]`` of several weeks as arrays over the weeks (without masks), from their rows of
    the core's metric vectors ``metrics`` (``(n, len(METRIC_NAMES))``) and visible counts ``visible`` (``(n, 2)``,
    the core's ``vis_counts``): Set F1 and the other totals (:data:`INT_METRICS` as int64, the rest float64;
    ``exhaustion_step`` -1: never exhausted), ``spend_per_quarter`` ``(n, 4)`` and, per type of
    :data:`TRIGGER_TYPES`, flat keys ``{type}_due``, ``{type}_hit`` (int64) and ``{type}_recall`` (NaN where
    nothing was due)."""
    skip = {f"{t}_{k}" for t in TRIGGER_TYPES[:4] for k in ("due", "hit")} | {f"spend_q{q}" for q in range(1, 5)}
    out = {name: metrics[:, i].astype(np.int64) if name in INT_METRICS else metrics[:, i].copy()
           for i, name in enumerate(METRIC_NAMES) if name not in skip}
    out["spend_per_quarter"] = metrics[:, [M[f"spend_q{q}"] for q in range(1, 5)]]
    counts = {t: (metrics[:, M[f"{t}_due"]].astype(np.int64), metrics[:, M[f"{t}_hit"]].astype(np.int64))
              for t in TRIGGER_TYPES[:4]}
    counts["visible"] = (visible[:, VIS_DUE].astype(np.int64), visible[:, VIS_HIT].astype(np.int64))
    with np.errstate(invalid="ignore", divide="ignore"):
        for t, (due, hit) in counts.items():
            out[f"{t}_due"], out[f"{t}_hit"] = due, hit
            out[f"{t}_recall"] = np.where(due > 0, hit / due, np.nan)
    return out


def episode_summary(metrics: np.ndarray, visible: np.ndarray) -> dict:
    """The end-of-episode ``info["episode_metrics"]`` dict of one week (numbers, ``spend_per_quarter`` an array of 4,
    the breakdown per trigger type in flat keys), from its metric vector and visible counts: one row of
    :func:`episode_metrics_batch`, so the single and vector envs report the same fields."""
    return info_row(episode_metrics_batch(metrics[None], np.asarray(visible)[None]), 0)


def step_info_batch(step, queried, cost, remaining_budget, skipped, events) -> dict:
    """The step ``info`` of several weeks as arrays over the weeks (without masks), keys :data:`STEP_INFO_KEYS`:
    ``step`` (the step the action was taken at), ``queried`` ``(n, R)`` bool, ``cost``, ``remaining_budget`` (-1
    without a budget), the skipped proposals by reason (``skipped`` ``(n, 4)``) and the step's events (``events``
    ``(n, >= 6)``)."""
    out = {"step": step, "queried": queried, "cost": cost, "remaining_budget": remaining_budget}
    out.update(zip(SKIPPED_KEYS, skipped.T.astype(np.int64)))
    out.update(zip(EVENT_KEYS, events[:, :EV.n_events].T.astype(np.int64)))
    return out


TIMELINE_EVENTS = {S_HIT: 0, S_FALSE: 1, S_LATE_EXEC: 1, EV_MISS: 2}
"""The :class:`~membudget.envs.rendering.Timeline` event of each controller event code. A late miss draws nothing
at the late query: the positive is drawn as missed at its last on-time step."""


def record_step(timeline: Timeline, core: PMWeekCore, slot: int, t: int, selected, n_events: int):
    """Step ``t`` of the core's week ``slot`` into ``timeline`` (after the core stepped and observed): the queries
    ``selected``, the step's ``n_events`` events by resource, and the candidates of step ``t + 1``."""
    timeline.queried[:, t] = selected
    if n_events:
        for m, code in core.ev_list[slot, :n_events].tolist():
            k = TIMELINE_EVENTS.get(code)
            if k is not None:
                timeline.events[k, core.table[slot, m, F_RES], t] += 1
    if t + 1 < timeline.horizon:
        timeline.candidate[:, t + 1] = core.mask_state[slot]


def start_timeline(core: PMWeekCore, slot: int) -> Timeline:
    """The timeline of the week just loaded into slot ``slot`` (observed): its candidates at step 0."""
    timeline = Timeline(core.n_resources, int(core.horizon[slot]))
    timeline.candidate[:, 0] = core.mask_state[slot]
    return timeline


def week_title(core: PMWeekCore, slot: int, budget) -> str:
    """Two lines: the step, Set F1 so far, queries and budget used; TP / FP / FN and how many of them came from
    visible intentions (which need no query and so have no marker)."""
    t = int(core.t[slot])
    tp, fp, fn = (int(core.counters[slot, c]) for c in (C_TP, C_FP, C_FN))
    vtp, vfp, vfn = (int(x) for x in core.vis_step[slot, :t].sum(axis=0))
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0
    spent = int(core.c_hist[slot, :t].sum())
    b = f"cost {spent} (no budget)" if budget is None else f"budget used {spent}/{budget}"
    return (f"step {t}/{int(core.horizon[slot])}: Set F1 {f1:.3f}, {int(core.q_hist[slot, :t].sum())} queries, {b}\n"
            f"TP {tp}, FP {fp}, FN {fn} (of which visible intentions, which need no query: TP {vtp}, FP {vfp}, "
            f"FN {vfn})")


def resource_labels(ep: Episode) -> list:
    """Row labels of a week's resources (with their prices when they differ)."""
    unequal = ep.costs.min() != ep.costs.max()
    return [f"{name} ({int(c)})" if unequal else name for name, c in zip(ep.resource_names, ep.costs)]


WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def week_days(ep: Episode) -> list:
    """``(first step, weekday name)`` of each day of the week."""
    starts = [0] + [int(t) for t in np.flatnonzero(np.diff(ep.step_day)) + 1]
    return [(t, WEEKDAYS[int(ep.weekday[t])]) for t in starts]


def week_view(fig, spec, ep: Episode, budget) -> TimelineView:
    """A resources × steps view of week ``ep`` in the subplot spec ``spec`` of ``fig``."""
    return TimelineView(fig, spec, resource_labels(ep), ep.horizon, budget, week_days(ep),
                        step_name=f"day ({ep.horizon} steps)")


def spent_so_far(core: PMWeekCore, slot: int) -> np.ndarray:
    """Cumulative cost of week ``slot`` after each step played (0 first)."""
    return np.concatenate([[0], np.cumsum(core.c_hist[slot, :int(core.t[slot])])])


def week_text(core: PMWeekCore, slot: int, budget, world: WorldConfig) -> str:
    """``render_mode="ansi"``'s text of the core's week ``slot``: the step, the budget left, the counts and each
    resource's cost, candidacy and last query."""
    tp, fp, fn = (int(x) for x in core.counters[slot, [C_TP, C_FP, C_FN]])
    left = "none" if budget is None else f"{int(core.remaining[slot])}/{budget}"
    lines = [f"PMWeek-v0 step {int(core.t[slot])}/{int(core.horizon[slot])}  budget left {left}  "
             f"TP {tp} FP {fp} FN {fn}", f"{'resource':<22}{'cost':>5}{'candidate':>10}{'last query':>11}"]
    for r, (name, _) in enumerate(world.resources):
        last = int(core.last_q[slot, r])
        lines.append(f"{name:<22}{int(core.costs[slot, r]):>5}{'yes' if core.mask_state[slot, r] else '':>10}"
                     f"{last if last >= 0 else '-':>11}")
    return "\n".join(lines)


def week_picture(view: TimelineView | None, timeline: Timeline, core: PMWeekCore, slot: int, ep: Episode,
                 budget) -> tuple[TimelineView, np.ndarray]:
    """``render_mode="rgb_array"``'s frame of the core's week ``slot`` (episode ``ep``, recorded in ``timeline``):
    ``(view, frame)``, the figure ``view`` drawn anew when None (a new week) and kept for the next frame."""
    if view is None:
        fig = new_figure()
        view = week_view(fig, fig.add_gridspec(1, 1, left=0.17, right=0.985, top=0.9, bottom=0.15)[0], ep, budget)
        timeline_legend(fig)
    seed = ep.meta.get("seed")
    title = f"PMWeek-v0{'' if seed is None else f' week {seed}'}, " + week_title(core, slot, budget)
    view.update(timeline, int(core.t[slot]), spent_so_far(core, slot), title)
    return view, figure_array(view.fig)


class OneWeekEnv(Render, gym.Env):
    """What the single environments over one week of the core (:class:`~membudget.envs.pm.core.OneWeek` in
    ``self._week``) share: the week and the picture's state, the reset option that replays a given week, the
    week's observation, the checks and the core's step of :meth:`step`, the info keys every step has, and the
    ``core`` and action mask they expose."""

    def _new_week(self, n_resources: int, **settings):
        """The constructor's week (``settings``: the core's keyword arguments), with no picture recorded yet."""
        self._week = OneWeek(n_resources, **settings)
        self._timeline: Timeline | None = None
        self._view: TimelineView | None = None

    @staticmethod
    def _reset_option(options, key: str, cls, what: str):
        """``options[key]`` (``what``: an instance of ``cls`` named with its article), or None if not given; no
        other option is accepted."""
        options = check_options(options, (key,))
        if key not in options:
            return None
        value = options[key]
        if not isinstance(value, cls):
            raise TypeError(f"options['{key}'] must be {what}, got {type(value).__name__}")
        return value

    def _observed(self, observe: bool):
        """The week's :class:`~membudget.envs.pm.core.StepOutputs`, with the observation of its current step
        written first if ``observe``."""
        if observe:
            self._week.observe()
        return self._week.out

    def _step_week(self, action, started: bool):
        """The week stepped with ``action`` and its next step observed (``started``: the environment was reset):
        ``(t, out)``, the step's index and its :class:`~membudget.envs.pm.core.StepOutputs`."""
        if not started:
            raise RuntimeError("call reset() before step()")
        core = self._week.core
        if core.t[0] >= core.horizon[0]:
            raise RuntimeError("the episode has terminated; call reset()")
        scores = action_to_scores(action, (core.n_resources,), self.action_mode)[None, :]
        t = int(core.t[0])
        self._week.step(scores)
        return t, self._week.out

    def _step_info(self, step, queried, cost, skipped) -> dict:
        """The keys of the info that every step has."""
        info = {"step": step, "queried": queried, "cost": cost,
                "remaining_budget": -1 if self.budget is None else int(self._week.core.remaining[0])}
        info.update(zip(SKIPPED_KEYS, skipped.tolist()))
        return info

    @property
    def core(self) -> PMWeekCore:
        """The kernel state of the week (step, budget left, intentions and their status, query history, ...), which
        the teachers read to plan from where the agent is. Read it; writing to it is undefined."""
        return self._week.core

    def action_masks(self) -> np.ndarray:
        """Flat ``(2R,)`` mask in sb3-contrib MaskablePPO's MultiBinary form: ``[r0=0, r0=1, r1=0, r1=1, ...]``;
        setting a bit to 1 is allowed only for current candidates."""
        return self._week.core.action_masks(0)


class PMWeekEnv(OneWeekEnv):
    """
    ## Description

    A budgeted prospective-memory week (BudgetPM, PM-Bench). An upstream memory system has stored intentions
    ("release the order when the inspection passes"); each of the ``T`` steps (default 80 over 7 days) the agent
    decides which of ``R`` external-state resources (default 11: a ``clock`` and ten channels such as
    ``email``, ``shipment_status``) to query. A query of resource ``r`` at step ``t`` lets the controller resolve
    every unresolved stored intention on ``r`` whose trigger has occurred: a positive intention on time is
    executed (TP), one past its deadline is a miss (``late_policy="expire"``) or a late execution that also counts
    as a false positive (``"execute"``), and a negative one — a look-alike *lure* or a *stale* version whose
    update the compiler missed — is executed wrongly (FP) if still inside its deadline. Visible intentions need
    no query; their outcomes are fixed at reset and enter Set F1. Queries cost budget; a hard-cap executor
    (BudgetPM Algorithm 1) keeps every step feasible.

    ## Action Space

    ``action_mode="binary"`` (default): ``MultiBinary(R)``, the proposal set. ``action_mode="scores"``:
    ``Box(-1, 1, (R,), float32)``, a priority score per resource; a score > 0 proposes the resource, a score
    <= 0 abstains (a gate with threshold λ sends its score where it is >= λ and -1 elsewhere). The executor scans
    proposals by score (score / cost when prices differ; ties to lower cost, then lower index), skips a proposal
    that is not a candidate or that the remaining episode budget ``B``, the per-step count cap ``N_max`` or the
    per-step cost cap ``L`` cannot afford, and keeps scanning. Actions of the wrong shape, dtype or range raise.
    ``membudget/PMWeekFlat-v0`` (:mod:`membudget.envs.pm.flat`) takes ``MultiDiscrete([2] * R)`` instead.

    ## Observation Space

    ``Dict`` with
    - ``"resources"``: ``Box(R, 27)`` float32 pre-query features per resource (after BudgetPM appendix A.2):
      sinusoidal time of day and weekday, urgency, signed/absolute distance to the nearest declared window, cost,
      clock flag, candidate and open-intention counts, max/sum hint relevance, resolvability, mean/max priority,
      max miss cost, unknown-condition count, trigger-type fractions, age and unchanged-count since the last
      query, ever-queried flag and two utility combinations. Names in ``RESOURCE_FEATURE_NAMES``.
    - ``"budget"``: ``Box(9,)`` float32, the nine budget features of appendix A.2 (target fraction, remaining/B,
      progress, remaining horizon, remaining per step, spend minus progress, queries over the last 5 and 10
      steps and the previous step), with bounds [0, max(1, b)], [0, 1], [0, 1], [0, 1], [0, max(1, B)], [-1, 1],
      then [0, c/2] three times (``b`` the target fraction, ``B`` the budget, 1 without one, ``c`` the per-step
      cap, at most R). Names in ``BUDGET_FEATURE_NAMES``.
    - ``"mask"``: ``MultiBinary(R)``, the candidate mask (a resource serving at least one active, unresolved
      stored intention whose declared window, widened by a lookahead, contains ``t``).
    - with ``observe_counts=True`` only (not in BudgetPM's observation): ``"counts"``: ``Box(0, 1, (3,))``, the
      episode's running TP, FP and FN so far (visible outcomes included), each divided by the week's number of
      intentions: the reward depends on them.

    ``membudget/PMWeekFlat-v0`` observes this ``Dict`` flattened (``gymnasium.spaces.flatten``: ``budget``,
    ``mask``, ``resources``): ``Box(9 + 28 R,)`` float32, 317 values for the default 11 resources.

    ## Rewards

    The change of the episode's running Set F1 = 2TP / (2TP + FP + FN), so the rewards of an episode sum to its
    final Set F1. A positive counts as FN at the end of its last on-time step if it was not executed on time.

    ## Starting State

    ``reset(seed=s)`` draws week ``s`` (:func:`membudget.envs.pm.generate_episode`); everything in the week is
    independent of the agent's actions. ``reset(options={"episode": ep})`` replays a given :class:`Episode`.

    ## Episode End

    Terminates after step ``T``; never truncates. The final ``info["episode_metrics"]`` holds Set F1, on-time recall,
    realized cost, queries, exhaustion step (-1: never exhausted), spend per quarter (an array of 4), the PM-Bench
    diagnostic counters and a breakdown per trigger type in flat keys (``time_due``, ``time_hit``,
    ``time_recall``, ... for the types of :data:`TRIGGER_TYPES`) — numbers only, no nested dict.

    ``info`` at every step (and at reset, with nothing queried) has the same flat keys, fixed shapes and numeric
    dtypes (so vector environments batch it): ``step``; ``queried`` (a ``(R,)`` bool array of the resources
    queried at this step); ``cost``; ``remaining_budget`` (-1 without a budget); ``skipped_non_candidate``,
    ``skipped_budget``, ``skipped_count_cap``, ``skipped_cost_cap`` (proposals the executor skipped, by reason);
    ``tp``, ``fp``, ``fn``, ``late_execution``, ``late_miss``, ``expired_negative`` (this step's events). Which
    intentions they were: ``env.unwrapped.last_events``. The native vector env returns exactly these infos batched.

    ## Arguments

    - ``budget``: episode budget ``B`` — an int, a level ``"B5"``, ``"B10"``, ``"B15"``, ``"B20"``, ``"B40"``,
      ``"B60"`` or ``"B80"`` (q% of the mean All-relevant cost over development weeks 2000-2019 for this world and
      cost profile: the levels the package's gates are calibrated for; another budget is an int) or ``None`` for no
      budget. Default "B10".
    - ``per_step_cap``: ``N_max``, queries per step (default 2; ``None`` for no cap).
    - ``per_step_cost_cap``: ``L``, cost per step (default ``None``).
    - ``cost_profile``: ``"unit"`` (default: every price 1), ``"mild"`` (clock / snapshot / delta resources 1 / 2 / 4)
      or ``"skewed"`` (1 / 4 / 16); prices and budget levels are in these integer units.
    - ``late_policy``: ``"expire"`` (default) or ``"execute"`` (PM-Bench behaviour).
    - ``load``: ``k`` extra hidden-channel trigger opportunities per day, drawn after the base week, so the weeks of
      ``k=0`` and ``k=3`` are paired.
    - ``world``: a :class:`WorldConfig`.
    - ``action_mode``: ``"binary"`` or ``"scores"``.
    - ``observe_counts``: add the running ``"counts"`` to the observation (default False).
    - ``render_mode``: ``"ansi"`` (``render()`` returns the step, budget, counts and each resource's cost,
      candidacy and last query as text), ``"human"`` (prints it), ``"rgb_array"`` (the week so far as a picture:
      resources × steps with candidates, queries, on-time executions, false executions and misses, and the budget
      left) or None.

    ## Version History

    - v0: initial version. Before 0.1.0 ``info["queried"]`` was an index array of varying length, ``remaining_budget``
      and ``exhaustion_step`` could be None and ``info["events"]`` held the step's events (now ``last_events``).
      Since 0.2.0 the skipped proposals are flat keys (``skipped_budget``, ...; they were the nested dict
      ``info["skipped"]``, which TorchRL's batched info reader cannot read), and so is the breakdown per trigger
      type (``time_due``, ...; it was the dict of dicts ``episode_metrics["per_trigger_type"]``); dynamics,
      observation and reward are unchanged.
    """

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 8}

    def __init__(self, budget="B10", per_step_cap=2, per_step_cost_cap=None, cost_profile="unit",
                 late_policy="expire", load=0, world=None, action_mode="binary", observe_counts=False,
                 render_mode=None):
        self.world = check_arguments(budget, per_step_cap, per_step_cost_cap, cost_profile, late_policy, load,
                                     world, action_mode)
        self.budget, self.target_fraction = resolve_budget(budget, self.world, cost_profile)
        self.per_step_cap, self.per_step_cost_cap = per_step_cap, per_step_cost_cap
        self.cost_profile, self.late_policy, self.load, self.action_mode = cost_profile, late_policy, load, action_mode
        self.render_mode = check_render_mode(render_mode, "PMWeek-v0")
        n_res = len(self.world.resources)
        self.observe_counts = check_bool("observe_counts", observe_counts)
        self.observation_space, self.action_space = spaces_for(n_res, self.budget, self.target_fraction,
                                                               per_step_cap, action_mode, self.observe_counts)
        self._new_week(n_res, budget=self.budget, per_step_cap=per_step_cap, per_step_cost_cap=per_step_cost_cap,
                       late_policy=late_policy, b_frac=self.target_fraction)
        self.episode: Episode | None = None

    def _obs(self, observe=True):
        out = self._observed(observe)
        # keys in the Dict space's order (sorted), as Gymnasium's vector envs and batch_space lay them out
        obs = {"budget": out.budget[0].copy()}
        if self.observe_counts:
            obs["counts"] = self._week.core.running_counts(self._week.rows)[0]
        obs["mask"], obs["resources"] = out.mask[0].copy(), out.resources[0].copy()
        return obs

    def reset(self, *, seed=None, options=None):
        seed = check_int("seed", seed, 0, none_ok=True)
        ep = self._reset_option(options, "episode", Episode, "an Episode")
        if ep is not None:
            validate_episode(ep)
        super().reset(seed=seed)  # after the checks: a refused reset leaves the generator as it was
        if ep is None:
            ep = generate_episode(seed, config=self.world, cost_profile=self.cost_profile, load=self.load,
                                  rng=self.np_random)
        self._week.core.load(0, ep, self.world.lookahead)
        self.episode = ep
        self._hidden_ids = [ep.ids[i] for i in np.flatnonzero(ep.kind != KIND_VISIBLE)]
        self.last_events = []
        obs = self._obs()
        if self._pictures:
            self._timeline, self._view = start_timeline(self._week.core, 0), None
        return obs, self._info(0, np.zeros(len(self.world.resources), dtype=bool), 0,
                               np.zeros(len(SKIPPED_KEYS), np.int64), np.zeros(len(EVENT_KEYS), np.int64))

    def _info(self, step, queried, cost, skipped, events) -> dict:
        """The per-step info (the reset info has the same keys, with nothing queried): a row of
        :func:`step_info_batch`, built directly (it is on every step's path)."""
        info = self._step_info(step, queried, cost, skipped)
        info.update(zip(EVENT_KEYS, events[:EV.n_events].tolist()))
        return info

    def step(self, action):
        t, out = self._step_week(action, started=self.episode is not None)
        core = self._week.core
        terminated = bool(core.t[0] >= core.horizon[0])
        n_events = int(out.events[0, EV.n_events])
        info = self._info(t, out.selected[0].astype(bool), int(core.c_hist[0, t]), out.skipped[0], out.events[0])
        self.last_events = [(self._hidden_ids[m], name) for m, name in core.events(0, n_events)] if n_events else []
        if self._timeline is not None:
            record_step(self._timeline, core, 0, t, out.selected[0], n_events)
        if terminated:
            info["episode_metrics"] = episode_summary(out.metrics[0], core.vis_counts[0])
        return self._obs(observe=False), float(out.reward[0]), terminated, False, info

    def _text(self) -> str:
        if self.episode is None:
            return "PMWeek-v0: call reset() first"
        return week_text(self._week.core, 0, self.budget, self.world)

    def _picture(self) -> np.ndarray:
        if self.episode is None:
            return blank_frame("PMWeek-v0: call reset() first")
        self._view, frame = week_picture(self._view, self._timeline, self._week.core, 0, self.episode, self.budget)
        return frame

    @property
    def timeline(self) -> Timeline | None:
        """The week so far as its picture shows it (candidates, queries and events by resource and step); recorded
        with ``render_mode="rgb_array"`` only, None otherwise."""
        return self._timeline
