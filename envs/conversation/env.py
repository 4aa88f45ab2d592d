"""``membudget/ConversationPM-v1`` (and the earlier world ``-v0``): which stored memories to check the current user
message against with a budgeted semantic verifier (BudgetPM's GoodAI LTM setting)."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from ..pm.core import M, RESOURCE_FEATURE_NAMES, S_FALSE, S_HIT
from ..pm.world import MAX_RESOURCES
from ..pm.env import ACTION_MODES, OneWeekEnv, record_step, spaces_for, spent_so_far, start_timeline
from ..rendering import (RENDER_MODES, Timeline, TimelineView, blank_frame, check_render_mode, figure_array, new_figure,
                         timeline_legend)
from ..validation import check_int, check_number
from .episode_io import validate_conversation
from .levels import resolve_budget
from .world import (ACTIVATIONS, GOODAI_FEATURE_NAMES, MESSAGE_KINDS, PROSPECTIVE, TEST_KINDS, WORLD_V0, Conversation,
                    ConversationConfig, generate_conversation, to_pm_episode)

FEATURE_NAMES = RESOURCE_FEATURE_NAMES + GOODAI_FEATURE_NAMES
N_FEATURES = len(FEATURE_NAMES)
FALSE_FIRE_PENALTY = 0.0
"""ConversationPM-v1's false-fire penalty (in units of one activation's value): 0, so that the score is BudgetPM's
GoodAI task score, the benchmark's macro accuracy, which does not penalise a trigger response said on the wrong
message (a quote recited before reply n still zeroes its test). BudgetPM's Outcome label is the leave-one-out effect
of a verifier call on that task score. ``membudget/ConversationPM-v0`` keeps its penalty of 1."""
NEUTRALISED = (slice(RESOURCE_FEATURE_NAMES.index("sin_time_of_day"), RESOURCE_FEATURE_NAMES.index("cos_weekday") + 1),
               slice(RESOURCE_FEATURE_NAMES.index("age_since_query"), RESOURCE_FEATURE_NAMES.index("ever_queried") + 1))
"""PMWeek-v0 features set to 0 for semantic resources: the wall-clock calendar (runner time is not task evidence,
BudgetPM A.2) and the query history of the resource (the verifier's answers on earlier messages say nothing about
the current one: every (message, memory) pair is its own check; on the All-semantic reference trajectory the
history also differs systematically from any budgeted deployment)."""
N_WEEK_FEATURES = len(RESOURCE_FEATURE_NAMES)
KEPT = ~np.isin(np.arange(N_WEEK_FEATURES), np.r_[NEUTRALISED])
"""The PMWeek-v0 feature columns not :data:`NEUTRALISED` (the observation copies these, the rest stay 0)."""


class Scorecard:
    """GoodAI scoring of one conversation, step by step.

    Prospective memory (a test per memory): 1 if the quote is in reply n and in no other counted reply (replies 1
    .. n), else 0. Trigger response: hits / 3. Macro accuracy = mean of the two components' mean accuracies. Every
    false fire (the memory executed on a message that does not fire it, whether by a verified call or by the base
    response) costs ``false_fire_penalty`` times the value of one trigger activation, and a false fire of a
    prospective memory before reply n also zeroes that test (the benchmark's rule). Score = macro accuracy -
    penalties. :func:`conversation_score` is the same score of a whole conversation at once.
    """

    def __init__(self, test_kind: np.ndarray, false_fire_penalty: float):
        self.is_pm = np.asarray(test_kind) == PROSPECTIVE
        n_pm, n_tr = int(self.is_pm.sum()), int((~self.is_pm).sum())
        self.weight = np.where(self.is_pm, 0.5 / n_pm, 0.5 / (ACTIVATIONS * n_tr))
        self.penalty = false_fire_penalty * 0.5 / (ACTIVATIONS * n_tr)
        self.hits = np.zeros(self.is_pm.size, dtype=np.int64)
        self.spoiled = np.zeros(self.is_pm.size, dtype=bool)
        self.false_fires = np.zeros(self.is_pm.size, dtype=np.int64)

    def effect(self, test: int, code: int) -> float:
        """Change of the score if memory ``test`` is executed with controller outcome ``code`` now."""
        if code == S_HIT:
            return 0.0 if self.is_pm[test] and self.spoiled[test] else float(self.weight[test])
        return -self.penalty if code == S_FALSE else 0.0

    def apply(self, test: int, code: int) -> float:
        """Record the outcome; returns its change of the score."""
        delta = self.effect(test, code)
        if code == S_HIT and delta > 0:
            self.hits[test] += 1
        elif code == S_FALSE:
            self.false_fires[test] += 1
            if self.is_pm[test]:
                self.spoiled[test] = True
        return delta

    def summary(self) -> dict:
        pm = float(np.mean(self.hits[self.is_pm]))
        tr = float(np.mean(self.hits[~self.is_pm] / ACTIVATIONS))
        macro = 0.5 * (pm + tr)
        ff = int(self.false_fires.sum())
        return {"score": macro - self.penalty * ff, "macro_accuracy": macro, "pm_accuracy": pm, "tr_accuracy": tr,
                "hits": int(self.hits.sum()), "false_fires": ff}


def conversation_score(conv: Conversation, queried, false_fire_penalty: float) -> dict:
    """:meth:`Scorecard.summary` of ``conv`` played with the verifier calls ``queried`` (``(T, R)`` bool, each a
    candidate pair), in one pass: the teachers' leave-one-out effects are differences of it."""
    fired = conv.executed(queried)
    truth, live = conv.truth(), conv.live()
    false = fired & ~truth & live
    is_pm = conv.test_kind == PROSPECTIVE
    pm = np.array([fired[conv.fires[j][0], j] and not false[:conv.fires[j][0], j].any()
                   for j in np.flatnonzero(is_pm)], dtype=float)
    hits = (fired & truth)[:, ~is_pm].sum(axis=0)
    card = Scorecard(conv.test_kind, false_fire_penalty)
    card.hits[is_pm], card.hits[~is_pm] = pm.astype(np.int64), hits
    card.false_fires[:] = false.sum(axis=0)
    return card.summary()


def leave_one_out_effects(conv: Conversation, false_fire_penalty: float) -> np.ndarray:
    """``(T, R)``: BudgetPM's leave-one-out effect for GoodAI of each candidate pair on the All-semantic reference
    (every candidate verified): the conversation's score with the reference calls minus its score without the
    pair's call, the base responses held fixed (0 on non-candidates). The Outcome label is ``effect > 0``."""
    reference = conv.candidates()
    score = conversation_score(conv, reference, false_fire_penalty)["score"]
    out = np.zeros(reference.shape)
    for t, r in np.argwhere(reference).tolist():
        reference[t, r] = False
        out[t, r] = score - conversation_score(conv, reference, false_fire_penalty)["score"]
        reference[t, r] = True
    return out


def ceiling_calls(conv: Conversation) -> np.ndarray:
    """``(T, R)`` bool: the calls of the unconstrained hindsight optimum (no budget, no per-step cap) — every
    candidate pair on which the verifier is right and the base response wrong, so that every reply is right
    wherever either is (each test's score only grows as more of its pairs are right)."""
    truth = conv.truth()
    return conv.candidates() & ((conv.verifier > 0) == truth) & ((conv.base > 0) != truth)


def check_arguments(per_step_cap, false_fire_penalty, world, action_mode):
    world = ConversationConfig() if world is None else world
    if not isinstance(world, ConversationConfig):
        raise TypeError(f"world must be a ConversationConfig, got {type(world).__name__}")
    if action_mode not in ACTION_MODES:
        raise ValueError(f"action_mode must be one of {ACTION_MODES}, got {action_mode!r}")
    check_int("per_step_cap", per_step_cap, 1, MAX_RESOURCES, none_ok=True)
    check_number("false_fire_penalty", false_fire_penalty, 0, 100)
    return world


class ConversationPMEnv(OneWeekEnv):
    """
    ## Description

    BudgetPM's second benchmark (GoodAI LTM: prospective memory and trigger response) as a budgeted decision
    problem. One long user-agent conversation of ``T`` user messages (default 66, BudgetPM's development-median
    horizon) interleaves prospective-memory tests (a quote, later an instruction to append it to the n-th reply,
    n uniform in 2-8) and trigger-response tests (a condition stated abstractly, then 3 paraphrased activations
    at >= 30 / 60 / 90 % of the test's span), with trivia filler, other tests' lines and lures (lines lexically
    close to a stored condition) between them. Each test's memory is a queryable resource while it is live. A
    (message, memory) pair whose cheap similarity passes the gate (0.05) is a candidate; verifying it costs 1
    and reveals, with the verifier's error model, whether the message fires the memory.

    The agent replies to every message whether or not it verifies anything: its *base response* (drawn with the
    conversation) already carries some quotes and trigger responses, misses others, and sometimes fires falsely
    (a quote recited in the wrong reply, a response said on a lure). BudgetPM's frozen recomposition makes the
    reply: a verified pair follows the verifier's answer (adding the memory's action to the reply, or removing
    it), every unverified live pair keeps the base response. A verifier call is worth something only where the
    verifier and the base response differ. Budgets and the hard-cap executor are PMWeek-v0's (the conversation
    runs as a PM week of verifier resources, :func:`membudget.envs.conversation.to_pm_episode`).

    ## Action Space

    ``action_mode="binary"`` (default): ``MultiBinary(R)``, the proposal set over the ``R`` memory slots (default
    6: pm1-pm3, tr1-tr3). ``action_mode="scores"``: ``Box(-1, 1, (R,), float32)``, a priority score per memory
    (> 0 proposes). The executor is PMWeek-v0's: proposals by score, non-candidates never verified, skipped when
    the episode budget ``B`` or the per-step cap ``N_max`` cannot afford them. Malformed actions raise.

    ## Observation Space

    ``Dict`` with
    - ``"resources"``: ``Box(R, 34)`` float32: PMWeek-v0's 27 pre-query features (the calendar and
      query-history features neutralised to 0, ``NEUTRALISED``; the hint is the pair's token similarity)
      followed by BudgetPM's 7 GoodAI features:
      semantic-resource identity, semantic-trigger fraction, token and fuzzy similarity, memory age, repeat
      fraction, active-memory count. Names in ``membudget.envs.conversation.env.FEATURE_NAMES``. The base
      response is not observed: the features are built before the agent replies.
    - ``"budget"``: ``Box(9,)`` float32, PMWeek-v0's nine budget features.
    - ``"mask"``: ``MultiBinary(R)``, the candidate mask (live memory, similarity >= gate).

    ## Rewards

    The change of the conversation's score, so that rewards sum to it: macro accuracy (the mean of
    prospective-memory accuracy — quote in reply n and in no other counted reply — and trigger-response accuracy
    — hits / 3) minus ``false_fire_penalty`` x (value of one activation) per false fire, verified or base. By
    default (``FALSE_FIRE_PENALTY`` = 0) the score is the benchmark's macro accuracy, BudgetPM's GoodAI task
    score, which does not penalise false fires: the agent fires only where its base response or a confirming
    verifier does, so firing on everything is not open to it. ``membudget/ConversationPM-v0`` penalises each false
    fire by one activation.

    ## Starting State

    ``reset(seed=s)`` draws conversation ``s`` (:func:`membudget.envs.conversation.generate_conversation`),
    independent of the agent's actions. ``reset(options={"conversation": c})`` replays a given
    :class:`~membudget.envs.conversation.Conversation` (validated).

    ## Episode End

    Terminates after the ``T``-th message; never truncates. The final ``info["episode_metrics"]`` holds score,
    macro accuracy, the two component accuracies, hits, false fires, queries, realized cost, candidates (the
    All-semantic cost), exhaustion step (-1: never) and spend per quarter (an array of 4) — numbers only.

    ``info`` at every step has the same keys, fixed shapes and numeric dtypes: ``step``; ``queried`` (``(R,)``
    bool); ``cost``; ``remaining_budget`` (-1 without a budget); ``skipped_non_candidate``, ``skipped_budget``,
    ``skipped_count_cap``, ``skipped_cost_cap`` (proposals skipped, by reason); ``hits`` (true fires the reply
    executes) and ``false_fires`` (executions on a message that does not fire the memory), each by a confirmed
    call or by the base response; ``base_fires`` (how many of those executions came from the base response);
    ``rejected`` (verified pairs the verifier declined) and ``missed`` (true fires of this message the reply
    does not execute).

    ## Arguments

    - ``budget``: ``B`` — an int, a level ``"B10"``, ``"B20"``, ``"B30"``...``"B80"`` (q% of the mean All-semantic
      cost over development conversations 2000-2011) or ``None``. Default ``"B60"``.
    - ``per_step_cap``: ``N_max``, verifier calls per message (default 2; ``None`` for no cap).
    - ``false_fire_penalty``: cost of a false fire in units of one activation's value (default 0, the
      benchmark's rule; ``membudget/ConversationPM-v0``: 1).
    - ``world``: a :class:`~membudget.envs.conversation.ConversationConfig` (default: this version's world,
      :data:`~membudget.envs.conversation.WORLD_V1`; ``membudget/ConversationPM-v0`` defaults to
      :data:`~membudget.envs.conversation.WORLD_V0`).
    - ``action_mode``: ``"binary"`` or ``"scores"``.
    - ``render_mode``: ``"ansi"``, ``"human"``, ``"rgb_array"`` (the conversation so far as a picture: memories
      × messages with candidates, verifier calls, hits, false fires and missed true fires, and the budget left) or
      None.

    ## Version History

    - v1: the world of BudgetPM's GoodAI pipeline, calibrated on the development conversations 2000-2011: the
      agent's base response to every message (quotes and trigger responses that succeed without a verifier call,
      and false ones), a verified pair's answer replacing the base response, the verifier's errors per memory
      kind recalibrated, the score BudgetPM's GoodAI task score, the benchmark's macro accuracy
      (``false_fire_penalty`` defaults to 0; v0: 1), and the teachers' Outcome label the leave-one-out effect on
      it given the base responses. In v0 the agent acted only through verified calls, so the Outcome and Due
      labels differed on 4 of 620 development rows and the hindsight optimum (0.956 on conversations 4000-4029)
      was below BudgetPM's published Pacing figures. In v1 they differ on 100 of 620 rows and the hindsight
      optimum reaches 0.995 on the development conversations (``docs/conversation.md``). The base response
      recites a quote before reply n in 2.5% of the prospective tests, the share BudgetPM's Due gate figure
      implies (revised in place before release: GoodAI's plain-LLM 16 of 39 left the Due gate near 0.75 at
      B60). The info gains ``base_fires`` (in v0 too, always 0).
    - v0: the agent acts only through verified calls (:data:`~membudget.envs.conversation.WORLD_V0`; still
      registered as ``membudget/ConversationPM-v0``). Since 0.2.0 the skipped proposals are flat info keys
      (``skipped_budget``, ...; they were the nested dict ``info["skipped"]``); dynamics, observation and reward
      are unchanged.
    """

    env_name = "ConversationPM-v1"
    default_world = None
    """The world when ``world`` is not given (None: :data:`~membudget.envs.conversation.WORLD_V1`)."""
    default_false_fire_penalty = FALSE_FIRE_PENALTY
    """The false-fire penalty when ``false_fire_penalty`` is not given."""

    metadata = {"render_modes": list(RENDER_MODES), "render_fps": 8}

    def __init__(self, budget="B60", per_step_cap=2, false_fire_penalty=None, world=None, action_mode="binary",
                 render_mode=None):
        if false_fire_penalty is None:
            false_fire_penalty = self.default_false_fire_penalty
        self.world = check_arguments(per_step_cap, false_fire_penalty, self.default_world if world is None else world,
                                     action_mode)
        self.budget, self.target_fraction = resolve_budget(budget, self.world)
        self.per_step_cap, self.false_fire_penalty, self.action_mode = per_step_cap, false_fire_penalty, action_mode
        self.render_mode = check_render_mode(render_mode, self.env_name)
        n_res = len(self.world.resources)
        obs, self.action_space = spaces_for(n_res, self.budget, self.target_fraction, per_step_cap, action_mode)
        box = obs["resources"]
        low = np.concatenate([box.low, np.zeros((n_res, len(GOODAI_FEATURE_NAMES)), np.float32)], axis=1)
        high = np.concatenate([box.high, np.ones((n_res, len(GOODAI_FEATURE_NAMES)), np.float32)], axis=1)
        self.observation_space = spaces.Dict({"resources": spaces.Box(low, high, dtype=np.float32),
                                              "budget": obs["budget"], "mask": obs["mask"]})
        self._new_week(n_res, budget=self.budget, per_step_cap=per_step_cap, per_step_cost_cap=None,
                       late_policy="expire", b_frac=self.target_fraction)
        self.conversation: Conversation | None = None

    def _obs(self, observe=True):
        out = self._observed(observe)
        week = out.resources[0]
        res = np.zeros((week.shape[0], N_FEATURES), np.float32)
        np.copyto(res[:, :N_WEEK_FEATURES], week, where=KEPT)
        res[:, N_WEEK_FEATURES:] = self._goodai[self._week.core.t[0]]
        return {"budget": out.budget[0].copy(), "mask": out.mask[0].copy(), "resources": res}  # the space's order

    def reset(self, *, seed=None, options=None):
        seed = check_int("seed", seed, 0, none_ok=True)
        conv = self._reset_option(options, "conversation", Conversation, "a Conversation")
        if conv is not None:
            validate_conversation(conv)
            if conv.n_resources != len(self.world.resources):
                raise ValueError(f"the conversation has {conv.n_resources} tests, this environment "
                                 f"{len(self.world.resources)} memory slots")
        super().reset(seed=seed)  # after the checks: a refused reset leaves the generator as it was
        if conv is None:
            conv = generate_conversation(seed, self.world, rng=self.np_random)
        self.pm_episode = to_pm_episode(conv)
        self._week.core.load(0, self.pm_episode, 0)
        self.conversation = conv
        self._goodai = conv.goodai_features()
        truth = conv.truth()
        self._truth = truth.sum(axis=1).tolist()
        self._base_at = [[] for _ in range(conv.horizon)]  # the base response's executions, by message
        t_idx, r_idx = np.nonzero(conv.base > 0)
        for t, r, fires in zip(t_idx.tolist(), r_idx.tolist(), truth[t_idx, r_idx].tolist()):
            self._base_at[t].append((r, S_HIT if fires else S_FALSE))
        self._test_of = self.pm_episode.resource.tolist()
        self.scorecard = Scorecard(conv.test_kind, self.false_fire_penalty)
        n_res = conv.n_resources
        obs = self._obs()
        if self._pictures:
            self._timeline, self._view = start_timeline(self._week.core, 0), None
        return obs, self._info(0, np.zeros(n_res, dtype=bool), 0, np.zeros(4, np.int64), 0, 0, 0, 0, 0)

    def _info(self, step, queried, cost, skipped, hits, false_fires, base_fires, rejected, missed) -> dict:
        info = self._step_info(step, queried, cost, skipped)
        info["hits"], info["false_fires"], info["base_fires"] = hits, false_fires, base_fires
        info["rejected"], info["missed"] = rejected, missed
        return info

    def step(self, action):
        t, out = self._step_week(action, started=self.conversation is not None)
        core = self._week.core
        # the reply: a verified pair executes its memory iff the verifier confirms (the core's events), every
        # other live pair as the base response does
        n_events, selected = int(out.events[0, 6]), out.selected[0]
        fired = [(self._test_of[m], code) for m, code in core.ev_list[0, :n_events].tolist()
                 if code == S_HIT or code == S_FALSE] if n_events else []
        confirmed = len(fired)
        if self._base_at[t]:
            fired += [(r, code) for r, code in self._base_at[t] if not selected[r]]
        reward, hits = 0.0, 0
        for r, code in fired:
            reward += self.scorecard.apply(r, code)
            hits += code == S_HIT
        n_sel = int(core.q_hist[0, t])
        terminated = bool(core.t[0] >= core.horizon[0])
        if self._timeline is not None:
            record_step(self._timeline, core, 0, t, out.selected[0], 0)
            for r, code in fired:
                self._timeline.events[int(code == S_FALSE), r, t] += 1
        info = self._info(t, selected.astype(bool), n_sel, out.skipped[0], hits, len(fired) - hits,
                          len(fired) - confirmed, n_sel - confirmed, self._truth[t] - hits)
        if terminated:
            info["episode_metrics"] = self._summary()
        return self._obs(observe=False), reward, terminated, False, info

    def _summary(self) -> dict:
        m = self._week.out.metrics[0]
        out = self.scorecard.summary()
        out.update(queries=int(m[M["queries"]]), realized_cost=int(m[M["realized_cost"]]),
                   candidates=int(self.pm_episode.n_intentions), exhaustion_step=int(m[M["exhaustion_step"]]),
                   spend_per_quarter=np.array([m[M[f"spend_q{q}"]] for q in range(1, 5)], dtype=np.float64))
        return out

    def _text(self) -> str:
        if self.conversation is None:
            return f"{self.env_name}: call reset() first"
        core, conv, card = self._week.core, self.conversation, self.scorecard
        t = int(core.t[0])
        budget = "none" if self.budget is None else f"{int(core.remaining[0])}/{self.budget}"
        s = card.summary()
        msg = "(end)" if t >= conv.horizon else MESSAGE_KINDS[conv.message_kind[t]]
        lines = [(f"{self.env_name} message {t}/{conv.horizon} ({msg})  budget left {budget}  "
                  f"score {s['score']:.3f}  hits {s['hits']}  false fires {s['false_fires']}"),
                 f"{'memory':<8}{'kind':<13}{'live':>10}{'candidate':>10}{'similarity':>11}{'hits':>5}"]
        for r, name in enumerate(conv.test_ids):
            sim = conv.token_similarity[t, r] if t < conv.horizon else 0.0
            lines.append(f"{name:<8}{TEST_KINDS[conv.test_kind[r]]:<13}"
                         f"{f'{conv.live_from[r]}-{conv.live_until[r]}':>10}{'yes' if core.mask_state[0, r] else '':>10}"
                         f"{sim:>11.2f}{int(card.hits[r]):>5}")
        return "\n".join(lines)

    def _picture(self) -> np.ndarray:
        if self.conversation is None:
            return blank_frame(f"{self.env_name}: call reset() first")
        core, conv, card = self._week.core, self.conversation, self.scorecard
        t = int(core.t[0])
        timeline = self._timeline
        # a miss is any true fire without a hit, as in info["missed"] (the core's misses are only the fires the
        # verifier would have confirmed)
        hits = timeline.events[0] > 0
        missed = np.zeros_like(hits)
        missed[:, :t] = conv.truth()[:t].T & ~hits[:, :t]
        drawn = Timeline(*hits.shape)
        drawn.candidate, drawn.queried = timeline.candidate, timeline.queried
        drawn.events[:2], drawn.events[2] = timeline.events[:2], missed
        s, seed = card.summary(), conv.meta.get("seed")
        spent = spent_so_far(core, 0)
        title = (f"{self.env_name}{'' if seed is None else f' conversation {seed}'}  message {t}/{conv.horizon}, "
                 f"verifier calls {int(spent[-1])}" + ("" if self.budget is None else f"/{self.budget}")
                 + f"\nscore {s['score']:.3f} (macro accuracy {s['macro_accuracy']:.3f}): hits {s['hits']}, "
                 f"false fires {s['false_fires']}, missed true fires {int(missed.sum())}")
        if self._view is None:
            fig = new_figure()
            labels = [f"{name} ({TEST_KINDS[k]})" for name, k in zip(conv.test_ids, conv.test_kind)]
            self._view = TimelineView(fig, fig.add_gridspec(1, 1, left=0.15, right=0.985, top=0.9, bottom=0.15)[0],
                                      labels, conv.horizon, self.budget, step_name="user message")
            timeline_legend(fig, events=("hit (confirmed true fire)", "false fire", "missed true fire"))
        self._view.update(drawn, t, spent, title)
        return figure_array(self._view.fig)



class ConversationPMv0Env(ConversationPMEnv):
    """``membudget/ConversationPM-v0``: :class:`ConversationPMEnv` in the earlier world
    :data:`~membudget.envs.conversation.WORLD_V0`, where the agent acts only through verified calls (no base
    response). Kept registered for comparison; see the Version History of :class:`ConversationPMEnv`."""

    env_name = "ConversationPM-v0"
    default_world = WORLD_V0
    default_false_fire_penalty = 1.0
