"""Teachers and labels for ``ConversationPM-v1`` (BudgetPM's GoodAI setting; ``-v0``'s conversations, which have no
base response, are the special case ``base = 0``).

The reply to each message is BudgetPM's frozen recomposition
(:meth:`~membudget.envs.conversation.Conversation.executed`): a verified pair follows the verifier's answer, every
other live pair the agent's base response. A verifier call changes the score only where the two differ, and pairs
interact only through the per-step cap, the budget and the prospective-memory rule (a quote recited before reply n
zeroes the test). Hence:

- **Hindsight optimum** (:class:`ConversationOptimum`), exact: a trigger-response pair's call is worth the change
  it makes to the reply on its own (an activation the base misses and the verifier confirms: one activation's
  value; a base false fire the verifier removes: the false-fire penalty), and so is a prospective pair's, except
  that a prospective test scores only if *all* of its base recitations before reply n are removed and reply n
  carries the quote. The optimum enumerates the set ``C`` of prospective tests it completes (only tests that need
  calls: at most ``2^n_pm``); a completed test forces its calls (each removal of a base recitation, and reply n's
  call when the base misses the quote) and forbids the others on it; every other pair keeps its own value (the
  tests outside ``C`` counted as lost: a lower bound, exact for the ``C`` that the schedule really completes).
  Given ``C``, the feasible schedules — at most ``N_max`` calls per message and at most the budget in all,
  containing the forced calls — are the independent sets of a truncated partition matroid contracted by the
  forced calls, so taking the remaining pairs by value (ties: the earlier message, then the lower memory) while
  both constraints allow is exact. The best ``C`` (ties: fewer calls) gives the optimum. The same computation from
  any mid-conversation state (its step, budget left and spoiled tests) is the optimal continuation
  (:meth:`ConversationOptimum.continuation`, DAgger's label).
- **Informed optimum** (:class:`InformedOptimum`), an upper bound on every online policy: the best adaptive
  policy of an agent that knows the whole conversation — every message's kind, which pairs truly fire, every
  similarity — except the verifier's answers and the base responses, which it learns as they happen (its own
  replies). Given the rest, those are independent Bernoulli draws per pair (:func:`pair_probabilities`), so a
  call's effect on a trigger test is additive and only the prospective tests carry state (spoiled or not): an
  exact dynamic program over (message, calls left, spoiled tests). An online agent sees less (features drawn
  from the same conversation, its verified answers, its replies), so its expected score is at most this; the
  hindsight optimum, which also reads the draws, is above it.
- **Current-greedy** (:class:`ConversationGreedy`): at each message, the feasible subset of current candidates
  with the best immediate effect on the score — the call's effect on this message's score change (the verifier's
  answer instead of the base response), positive effects largest first, up to the per-step cap and the remaining
  budget.
- **Labels** (:func:`build_conversation_dataset`), on the All-semantic reference trajectory (every candidate
  verified, no budget, no caps): ``outcome`` is BudgetPM's leave-one-out effect for GoodAI (``A_ref = A_t \\ {r}``):
  1 iff the conversation's score with the reference calls exceeds its score with the reference calls minus
  ``(t, r)`` — the base responses held fixed, so a pair whose base response already does what the verifier would
  do is 0 however due it is, and a pair whose call removes a base false fire is 1 though nothing is due; ``due``
  is 1 iff the message truly fires the memory (the trigger is due, whatever the verifier or the base response
  says); ``myopic`` / ``sequential`` mark the current-greedy / hindsight-optimum schedules at each budget.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from dataclasses import dataclass

import numba
import numpy as np

from membudget.envs.conversation import (WORLD_V0, ConversationConfig, ConversationPMEnv, budget_levels,
                                         generate_conversation, leave_one_out_effects)
from membudget.envs.conversation.env import FALSE_FIRE_PENALTY, ConversationPMv0Env
from membudget.envs.conversation.world import ACTIVATIONS, PROSPECTIVE, pair_probabilities, world_for
from membudget.envs.pm.core import S_FALSE, S_HIT
from membudget.envs.validation import check_int, check_number, constructor_repr

from .labels import SCHEMA_VERSION, LabelDataset, play_schedule

MAX_COSTLY_TESTS = 16
"""The optimum enumerates the prospective tests that need calls to score; more than this many is refused."""
MAX_INFORMED_TESTS = 12
""":class:`InformedOptimum`'s states hold a spoiled flag per prospective test (2 ** n of them); more is refused."""
MAX_INFORMED_CANDIDATES = 16
""":class:`InformedOptimum` compares every subset of a message's candidates; more candidates on one message (or more
than 62 memories, its bit sets' width) are refused."""


@dataclass
class ConversationSchedule:
    """A teacher's schedule of one conversation and what it scores (replayed in the environment)."""

    schedule: list
    """``(step, memory)`` pairs in step order."""
    score: float
    macro_accuracy: float
    cost: int


def _codes(conv, t: int) -> tuple:
    """Per memory, the controller's outcome on message ``t`` if the pair is verified and if it is not: ``S_HIT``
    (executed, truly fires), ``S_FALSE`` (executed, does not fire) or 0 (not executed); ``(verified, unverified)``.
    A non-candidate cannot be verified: both are its base response."""
    truth = conv.truth()[t]
    live, cand = conv.live()[t], conv.candidates()[t]
    code = np.where(truth, S_HIT, S_FALSE)
    unverified = np.where(live & (conv.base[t] > 0), code, 0)
    verified = np.where(cand, np.where(conv.verifier[t] > 0, code, 0), unverified)
    return verified, unverified


def _env(conv, **kwargs):
    """An environment for ``conv`` (budget levels of the default world; teachers take integer budgets)."""
    return ConversationPMEnv(world=world_for(conv), **kwargs)


def replay(conv, schedule, *, budget, per_step_cap, false_fire_penalty=FALSE_FIRE_PENALTY):
    """Play ``schedule`` in the environment; ``(episode metrics, (T, 9) budget features seen before each step)``.
    Raises if the executor does not execute the schedule as given."""
    env = _env(conv, budget=budget, per_step_cap=per_step_cap, false_fire_penalty=false_fire_penalty)
    feats, info = play_schedule(env, {"conversation": conv}, schedule, conv.horizon)
    return info["episode_metrics"], feats


class _Teacher:
    def __init__(self, *, budget=None, per_step_cap=2, false_fire_penalty=FALSE_FIRE_PENALTY):
        self.budget = budget
        self.per_step_cap = per_step_cap
        self.false_fire_penalty = false_fire_penalty

    def __repr__(self):
        return constructor_repr(self)

    def _check(self):
        check_int("budget", self.budget, 1, none_ok=True)
        check_int("per_step_cap", self.per_step_cap, 1, none_ok=True)
        check_number("false_fire_penalty", self.false_fire_penalty, 0, 100)

    def _played(self, conv, env) -> ConversationSchedule:
        """``conv`` played in ``env`` by the teacher's ``act`` at every message: its schedule and score."""
        env.reset(options={"conversation": conv})
        schedule = []
        for t in range(conv.horizon):
            _, _, _, _, info = env.step(self.act(env))
            schedule += [(t, int(r)) for r in np.flatnonzero(info["queried"])]
        return self._result(conv, schedule)

    def _result(self, conv, schedule):
        m, _ = replay(conv, schedule, budget=self.budget, per_step_cap=self.per_step_cap,
                      false_fire_penalty=self.false_fire_penalty)
        return ConversationSchedule(schedule=sorted(schedule), score=m["score"], macro_accuracy=m["macro_accuracy"],
                                    cost=m["realized_cost"])


def _weights(conv, penalty):
    """Macro-accuracy weights: a prospective test, an activation, and the penalty of one false fire."""
    n_pm = int(np.sum(conv.test_kind == PROSPECTIVE))
    return score_weights(n_pm, conv.n_resources - n_pm, penalty)


def score_weights(n_prospective: int, n_trigger: int, penalty: float) -> tuple:
    """Macro-accuracy weights of a conversation with these tests: a prospective test, an activation, and the
    penalty of one false fire."""
    w_act = 0.5 / (ACTIVATIONS * n_trigger)
    return 0.5 / n_prospective, w_act, penalty * w_act


def optimal_plan(conv, start=0, remaining=None, per_step_cap=None, false_fire_penalty=FALSE_FIRE_PENALTY,
                 spoiled=None) -> list:
    """An optimal set of verifier calls from message ``start`` on (``(step, memory)`` pairs in step order), with
    ``remaining`` calls left (None: no budget), ``per_step_cap`` calls per message (None: no cap) and the
    prospective tests ``spoiled`` (bool per memory) already zeroed by an earlier false fire. See the module
    docstring for why it is exact."""
    is_pm = conv.test_kind == PROSPECTIVE
    spoiled = np.zeros(conv.n_resources, dtype=bool) if spoiled is None else np.asarray(spoiled, dtype=bool)
    w_pm, w_act, pen = _weights(conv, false_fire_penalty)
    cand, truth, base, ver = conv.candidates(), conv.truth(), conv.base > 0, conv.verifier > 0
    cand[:start] = False
    # a pair's own value: the reply's worth with the verifier's answer minus with the base response (a prospective
    # hit counted only through C below)
    hit_value = np.where(is_pm, 0.0, w_act)[None, :]
    value = np.where(truth, hit_value, -pen)
    gain = np.where(cand, value * ver - value * base, 0.0)
    ts, rs = np.nonzero(cand & (gain > 1e-12))
    order = np.lexsort((rs, ts, -gain[ts, rs]))
    items = list(zip(ts[order].tolist(), rs[order].tolist()))
    free, costly = [], []  # prospective tests completed with no call / with the forced calls of costly[i]
    for j in np.flatnonzero(is_pm & ~spoiled).tolist():
        due = conv.fires[j][0]
        if due < start:
            continue
        early = np.arange(max(start, int(conv.live_from[j])), due)
        recited = early[base[early, j]]
        if np.any(ver[recited, j] | ~cand[recited, j]) or not (base[due, j] or (ver[due, j] and cand[due, j])):
            continue  # a recitation no call can remove, or reply n without the quote whatever happens
        forced = [(int(t), j) for t in recited] + ([] if base[due, j] else [(due, j)])
        (costly if forced else free).append((j, forced, w_pm + pen * len(recited)))
    if len(costly) > MAX_COSTLY_TESTS:
        raise ValueError(f"{len(costly)} prospective tests need calls to score; the exact optimum enumerates at most "
                         f"{MAX_COSTLY_TESTS}")
    base_value = sum(v for _, _, v in free)
    best = None
    for k in range(len(costly) + 1):
        for chosen in itertools.combinations(costly, k):
            plan = [p for _, forced, _ in chosen for p in forced]
            used = {}
            for t, _ in plan:
                used[t] = used.get(t, 0) + 1
            left = None if remaining is None else remaining - len(plan)
            if (left is not None and left < 0) or (per_step_cap is not None and max(used.values(), default=0)
                                                   > per_step_cap):
                continue
            total = base_value + sum(v for _, _, v in chosen)
            done = {j for j, _, _ in chosen} | {j for j, _, _ in free}
            for t, r in items:  # the matroid greedy on what the forced calls leave
                if left == 0:
                    break
                if r in done or (per_step_cap is not None and used.get(t, 0) >= per_step_cap):
                    continue
                plan.append((t, r))
                used[t] = used.get(t, 0) + 1
                total += gain[t, r]
                left = None if left is None else left - 1
            if best is None or total > best[0] + 1e-12 or (total > best[0] - 1e-12 and len(plan) < len(best[1])):
                best = (total, plan)
    return sorted(best[1])


class ConversationOptimum(_Teacher):
    """Exact hindsight optimum of a conversation under the budget (an int or None) and the per-step cap (see the
    module docstring for the method and why it is exact)."""

    def solve(self, conv) -> ConversationSchedule:
        self._check()
        plan = optimal_plan(conv, 0, self.budget, self.per_step_cap, self.false_fire_penalty)
        return self._result(conv, plan)

    def continuation(self, env) -> list:
        """An exact optimal continuation from ``env``'s current state (its step, remaining budget, per-step cap and
        the prospective tests already spoiled): ``(step, memory)`` pairs in step order."""
        e = env.unwrapped
        return optimal_plan(e.conversation, int(e.core.t[0]), None if e.budget is None else int(e.core.remaining[0]),
                            e.per_step_cap, e.false_fire_penalty, e.scorecard.spoiled)

    def act(self, env) -> np.ndarray:
        """The binary action of an optimal continuation at ``env``'s current step (DAgger's label)."""
        e = env.unwrapped
        action = np.zeros(e.core.n_resources, dtype=np.int8)
        t = int(e.core.t[0])
        action[[r for s, r in self.continuation(env) if s == t]] = 1
        return action


@numba.njit(cache=True)
def _option(t, mask, s, live, truth, pm_bit, due, p_ver, p_base, w_pm, w_act, pen, outcome_p, outcome_s):
    """What verifying the memories of bit set ``mask`` on message ``t`` gives with the prospective tests of bit set
    ``s`` spoiled, whatever the calls left: its expected immediate value, and the recitations' outcomes (the first
    returned count of ``outcome_p`` / ``outcome_s``: each outcome's probability and the spoiled set it leads to)."""
    R = live.shape[1]
    imm = 0.0
    n_sp = 0
    outcome_p[0], outcome_s[0] = 1.0, s
    for r in range(R):
        if not live[t, r]:
            continue
        on = (mask >> r) & 1
        if pm_bit[r] < 0:  # a trigger test: the call's effect, additive
            if on:
                imm += (p_ver[t, r] - p_base[t, r]) * (w_act if truth[t, r] else -pen)
            continue
        e = p_ver[t, r] if on else p_base[t, r]  # the reply executes the memory
        bit = 1 << pm_bit[r]
        if t == due[r]:
            if not s & bit:
                imm += w_pm * e
        else:  # a recitation before reply n: a false fire, which spoils the test (outcomes independent)
            imm -= pen * e
            if not s & bit and e > 0.0:
                n = 1 << n_sp
                for o in range(n):
                    outcome_p[n + o] = outcome_p[o] * e
                    outcome_s[n + o] = outcome_s[o] | bit
                    outcome_p[o] *= 1.0 - e
                n_sp += 1
    return imm, 1 << n_sp


@numba.njit(cache=True)
def _informed_tables(cand, live, truth, pm_bit, due, p_ver, p_base, w_pm, w_act, pen, budget, cap):
    """Backward induction of :class:`InformedOptimum`: ``V[t, b, s]`` the best expected score still to come from
    message ``t`` with ``b`` calls left and the prospective tests of bit set ``s`` spoiled (the trigger tests' base
    responses counted outside), ``P[t, b, s]`` the bit set of memories to verify there (first best in bit order)."""
    T, R = cand.shape
    n_pm = 0
    for r in range(R):
        if pm_bit[r] >= 0:
            n_pm += 1
    S = 1 << n_pm
    V = np.zeros((T + 1, budget + 1, S))
    P = np.zeros((T, budget + 1, S), dtype=np.int64)
    outcome_p = np.empty(S)  # at most one recitation outcome per prospective test
    outcome_s = np.empty(S, dtype=np.int64)
    best = np.empty(budget + 1)
    for t in range(T - 1, -1, -1):
        cmask = 0
        for r in range(R):
            if cand[t, r]:
                cmask |= 1 << r
        for s in range(S):
            best[:] = -np.inf
            mask = 0
            while True:  # every subset of the candidates, in increasing bit order
                c = 0
                for r in range(R):
                    if (mask >> r) & 1:
                        c += 1
                if c <= cap and c <= budget:
                    imm, n_out = _option(t, mask, s, live, truth, pm_bit, due, p_ver, p_base, w_pm, w_act, pen,
                                         outcome_p, outcome_s)
                    for b in range(c, budget + 1):
                        nxt = 0.0
                        for o in range(n_out):
                            nxt += outcome_p[o] * V[t + 1, b - c, outcome_s[o]]
                        val = imm + nxt
                        if val > best[b] + 1e-12:
                            best[b] = val
                            P[t, b, s] = mask
                if mask == cmask:
                    break
                mask = (mask - cmask) & cmask  # the next subset of cmask
            for b in range(budget + 1):
                V[t, b, s] = best[b]
    return V, P


class InformedOptimum(_Teacher):
    """The best expected score of an agent that knows the whole conversation except the verifier's answers and the
    base responses (it learns them as it replies): an upper bound on the expected score of every online policy,
    below the hindsight optimum's (module docstring). ``world``: the :class:`ConversationConfig` whose verifier and
    base-response rates the conversation was drawn with (None: ConversationPM-v1's)."""

    def __init__(self, *, budget=None, per_step_cap=2, false_fire_penalty=FALSE_FIRE_PENALTY, world=None):
        super().__init__(budget=budget, per_step_cap=per_step_cap, false_fire_penalty=false_fire_penalty)
        self.world = world

    def tables(self, conv) -> tuple:
        """``(constant, V, P)``: the trigger tests' expected score from their base responses alone, and
        :func:`_informed_tables`' value and policy tables for ``conv``."""
        return self._tables(conv, world_for(conv) if self.world is None else self.world)

    def _tables(self, conv, world) -> tuple:
        self._check()
        if not isinstance(world, ConversationConfig):
            raise TypeError(f"world must be a ConversationConfig, got {type(world).__name__}")
        is_pm = conv.test_kind == PROSPECTIVE
        live, truth, cand = conv.live(), conv.truth(), conv.candidates()
        if int(is_pm.sum()) > MAX_INFORMED_TESTS or conv.n_resources > 62 or \
                int(cand.sum(axis=1).max(initial=0)) > MAX_INFORMED_CANDIDATES:
            raise ValueError(f"the informed optimum takes at most {MAX_INFORMED_TESTS} prospective tests, 62 memories "
                             f"and {MAX_INFORMED_CANDIDATES} candidates per message")
        p_ver, p_base = pair_probabilities(conv, world)
        w_pm, w_act, pen = _weights(conv, self.false_fire_penalty)
        trig = live & ~is_pm[None, :]
        constant = float(np.sum(np.where(truth, w_act, -pen)[trig] * p_base[trig]))
        pm_bit = np.full(conv.n_resources, -1, dtype=np.int64)
        pm_bit[is_pm] = np.arange(int(is_pm.sum()))
        due = np.array([conv.fires[j][0] if is_pm[j] else -1 for j in range(conv.n_resources)], dtype=np.int64)
        budget = int(cand.sum()) if self.budget is None else self.budget
        cap = conv.n_resources if self.per_step_cap is None else self.per_step_cap
        V, P = _informed_tables(cand, live, truth, pm_bit, due, p_ver, p_base, w_pm, w_act, pen, budget, cap)
        return constant, V, P

    def value(self, conv) -> float:
        """The informed optimum's expected score on ``conv`` (the environment's ``score``; with the default
        false-fire penalty 0, its macro accuracy)."""
        constant, V, _ = self.tables(conv)
        return constant + float(V[0, -1, 0])

    def act(self, env, tables=None) -> np.ndarray:
        """The informed optimum's binary action at ``env``'s current step (privileged: it reads the conversation and
        which prospective tests are spoiled; the rates of the teacher's world, else the environment's);
        ``tables``: :meth:`tables` of the env's conversation, reused."""
        e = env.unwrapped
        if (e.budget, e.per_step_cap, e.false_fire_penalty) != \
                (self.budget, self.per_step_cap, self.false_fire_penalty):
            raise ValueError("the environment's budget, per-step cap and false-fire penalty must be the teacher's")
        if tables is None:  # the environment's world unless the teacher names one
            tables = self._tables(e.conversation, e.world if self.world is None else self.world)
        _, _, P = tables
        is_pm = e.conversation.test_kind == PROSPECTIVE
        s = int(np.sum((1 << np.arange(int(is_pm.sum())))[e.scorecard.spoiled[is_pm]]))
        left = P.shape[1] - 1 if e.budget is None else int(e.core.remaining[0])
        mask = int(P[int(e.core.t[0]), left, s])
        return np.array([(mask >> r) & 1 for r in range(e.conversation.n_resources)], dtype=np.int8)


class ConversationGreedy(_Teacher):
    """Future-blind current-greedy oracle (privileged: it reads the verifier's answers and the base response of the
    current message)."""

    def act(self, env) -> np.ndarray:
        """The greedy binary action for an environment's current step."""
        e = env.unwrapped
        card, core = e.scorecard, e.core
        verified, unverified = _codes(e.conversation, int(core.t[0]))
        gain = np.array([card.effect(r, v) - card.effect(r, u) for r, (v, u) in enumerate(zip(verified, unverified))])
        order = [r for r in np.argsort(-gain, kind="stable").tolist() if gain[r] > 1e-12 and core.mask_state[0, r]]
        k = len(order)
        if e.per_step_cap is not None:
            k = min(k, e.per_step_cap)
        if e.budget is not None:
            k = min(k, int(core.remaining[0]))
        action = np.zeros(core.n_resources, dtype=np.int8)
        action[order[:k]] = 1
        return action

    def solve(self, conv) -> ConversationSchedule:
        self._check()
        return self._played(conv, _env(conv, budget=self.budget, per_step_cap=self.per_step_cap,
                                       false_fire_penalty=self.false_fire_penalty))


def reference_rows(conv, false_fire_penalty=FALSE_FIRE_PENALTY):
    """(step, memory, features, outcome, due) of the All-semantic reference rollout of ``conv``: ``outcome`` the
    leave-one-out effect of each verified pair on the conversation's score
    (:func:`~membudget.envs.conversation.leave_one_out_effects`, base responses held fixed) is positive."""
    env = _env(conv, budget=None, per_step_cap=None, false_fire_penalty=false_fire_penalty)
    obs, _ = env.reset(options={"conversation": conv})
    truth, effect = conv.truth(), leave_one_out_effects(conv, false_fire_penalty)
    out = []
    for t in range(conv.horizon):
        for r in np.flatnonzero(obs["mask"]).tolist():
            out.append((t, r, obs["resources"][r], int(effect[t, r] > 1e-12), int(truth[t, r])))
        obs, _, _, _, _ = env.step(obs["mask"])
    return out


def build_conversation_dataset(seeds, budgets=("B20", "B40", "B60", "B80"), *, world=None, per_step_cap=2,
                               false_fire_penalty=None) -> LabelDataset:
    """Label rows of the conversations ``seeds`` (a :class:`~membudget.teachers.LabelDataset` whose ``features``
    have the environment's 34 columns; ``meta["env"]`` names the environment). ``false_fire_penalty`` defaults to
    that environment's (v1: 0, v0: 1)."""
    world = world or ConversationConfig()
    env_cls = ConversationPMv0Env if world == WORLD_V0 else ConversationPMEnv
    if false_fire_penalty is None:
        false_fire_penalty = env_cls.default_false_fire_penalty
    levels = budget_levels(world)
    values = [levels[b] if isinstance(b, str) else int(b) for b in budgets]
    rows, week_of = [], []
    labels = {k: [[] for _ in values] for k in ("myopic", "sequential")}
    feats = {k: [[] for _ in values] for k in ("myopic", "sequential")}
    for seed in seeds:
        conv = generate_conversation(seed, world)
        ref = reference_rows(conv, false_fire_penalty)
        rows += ref
        week_of += [seed] * len(ref)
        for j, b in enumerate(values):
            kw = {"budget": b, "per_step_cap": per_step_cap, "false_fire_penalty": false_fire_penalty}
            for name, teacher in (("myopic", ConversationGreedy(**kw)), ("sequential", ConversationOptimum(**kw))):
                sched = teacher.solve(conv).schedule
                chosen = set(sched)
                labels[name][j] += [int((t, r) in chosen) for t, r, *_ in ref]
                _, bf = replay(conv, sched, **kw)
                feats[name][j] += [bf[t] for t, *_ in ref]
    n = len(rows)
    meta = json.loads(json.dumps({
        "schema_version": SCHEMA_VERSION, "reference": "all_semantic",
        "env": f"membudget/{env_cls.env_name}",
        "world": dataclasses.asdict(world), "per_step_cap": per_step_cap, "false_fire_penalty": false_fire_penalty,
        "seeds": [int(s) for s in seeds]}))
    return LabelDataset(
        features=np.stack([r[2] for r in rows]).astype(np.float32), week=np.array(week_of, dtype=np.int64),
        step=np.array([r[0] for r in rows], dtype=np.int64), resource=np.array([r[1] for r in rows], dtype=np.int64),
        outcome=np.array([r[3] for r in rows], dtype=np.int8), due=np.array([r[4] for r in rows], dtype=np.int8),
        budgets=np.array(values, dtype=np.int64), budget_names=np.array(list(budgets)),
        myopic=np.array(labels["myopic"], dtype=np.int8).reshape(len(values), n),
        sequential=np.array(labels["sequential"], dtype=np.int8).reshape(len(values), n),
        budget_features_myopic=np.array(feats["myopic"], dtype=np.float32).reshape(len(values), n, 9),
        budget_features_sequential=np.array(feats["sequential"], dtype=np.float32).reshape(len(values), n, 9),
        meta=meta)
