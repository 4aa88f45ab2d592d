"""Teachers and labels for ``ConversationPM-v0`` (BudgetPM's GoodAI setting).

The conversation runs as a PM week of verifier resources (:func:`membudget.envs.conversation.to_pm_episode`): one
intention per candidate (message, memory) pair, active at its own step only, so pairs never interact through the
controller. Hence:

- **Hindsight optimum** (:class:`ConversationOptimum`): PMWeek-v0's exact DP (:mod:`.hindsight_dp`: chain DP,
  knapsack, branch and bound on the per-step caps) on the linear objective ``sum of hit weights - FP``, each
  confirmed true fire weighted by its value in macro accuracy (a prospective test 1/(2 n_pm), an activation
  1/(6 n_tr), scaled to integers). This is exact for the conversation score: removing a false fire from a feasible
  schedule keeps it feasible and never lowers the score (it drops the penalty and cannot spoil a prospective
  test), so an optimal schedule has no false fire, and on such schedules the score equals the linear objective.
  From any mid-conversation state the optimal continuation (:meth:`ConversationOptimum.continuation`, DAgger's
  label) is simpler still: the pairs worth anything are the confirmed true fires still ahead (of tests not already
  spoiled), each with its own weight, and the constraints — at most ``N_max`` per step, at most the remaining
  budget in all — make the feasible sets a truncated partition matroid, so taking them by weight (ties: the
  earlier step) while both constraints allow is exact.
- **Current-greedy** (:class:`ConversationGreedy`): at each message, the feasible subset of current candidates
  with the best immediate effect on the score — the positive-effect pairs, largest first, up to the per-step cap
  and the remaining budget (effects of distinct memories add up within a step).
- **Labels** (:func:`build_conversation_dataset`), on the All-semantic reference trajectory (every candidate
  verified, no budget, no caps): ``outcome`` is BudgetPM's leave-one-out effect for GoodAI (``A_ref = A_t \\ {r}``):
  1 iff the score after the step with all of ``A_t`` exceeds that with ``A_t`` minus ``r`` (additive effects make
  this the pair's own effect); ``due`` is 1 iff the message truly fires the memory (trigger need, whatever the
  verifier says); ``myopic`` / ``sequential`` mark the current-greedy / hindsight-optimum schedules at each budget.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

import numpy as np

from membudget.envs.conversation import ConversationConfig, ConversationPMEnv, budget_levels, generate_conversation
from membudget.envs.conversation.world import PROSPECTIVE, TRIGGER, world_for
from membudget.envs.pm.core import S_FALSE, S_HIT
from membudget.envs.pm.world import NEVER, POS
from membudget.envs.validation import check_int, check_number

from .hindsight_dp import _LinearSolver
from .labels import SCHEMA_VERSION, LabelDataset, play_schedule
from .problem import problem_from_episode


@dataclass
class ConversationSchedule:
    """A teacher's schedule of one conversation and what it scores (replayed in the environment)."""

    schedule: list
    """``(step, memory)`` pairs in step order."""
    score: float
    macro_accuracy: float
    cost: int


def _pair_codes(env: ConversationPMEnv) -> np.ndarray:
    """Per memory, the controller's outcome if it is verified at the current step: ``S_HIT`` (a confirmed true
    fire), ``S_FALSE`` (a confirmed false fire) or 0 (not a candidate, or the verifier declines)."""
    ep, t = env.pm_episode, int(env.core.t[0])
    codes = np.zeros(ep.n_resources, dtype=np.int64)
    lo, hi = np.searchsorted(ep.active_from, [t, t + 1])
    for m in range(lo, hi):
        if ep.onset[m] < NEVER:
            codes[ep.resource[m]] = S_HIT if ep.polarity[m] == POS else S_FALSE
    return codes


def _env(conv, **kwargs):
    """An environment for ``conv`` (budget levels of the default world; teachers take integer budgets)."""
    return ConversationPMEnv(world=world_for(conv), **kwargs)


def replay(conv, schedule, *, budget, per_step_cap, false_fire_penalty=1.0):
    """Play ``schedule`` in the environment; ``(episode metrics, (T, 9) budget features seen before each step)``.
    Raises if the executor does not execute the schedule as given."""
    env = _env(conv, budget=budget, per_step_cap=per_step_cap, false_fire_penalty=false_fire_penalty)
    feats, info = play_schedule(env, {"conversation": conv}, schedule, conv.horizon)
    return info["episode_metrics"], feats


class _Teacher:
    def __init__(self, *, budget=None, per_step_cap=2, false_fire_penalty=1.0):
        self.budget = budget
        self.per_step_cap = per_step_cap
        self.false_fire_penalty = false_fire_penalty

    def _check(self):
        check_int("budget", self.budget, 1, none_ok=True)
        check_int("per_step_cap", self.per_step_cap, 1, none_ok=True)
        check_number("false_fire_penalty", self.false_fire_penalty, 0, 100)

    def _result(self, conv, schedule):
        m, _ = replay(conv, schedule, budget=self.budget, per_step_cap=self.per_step_cap,
                      false_fire_penalty=self.false_fire_penalty)
        return ConversationSchedule(schedule=sorted(schedule), score=m["score"], macro_accuracy=m["macro_accuracy"],
                                    cost=m["realized_cost"])


class ConversationOptimum(_Teacher):
    """Exact hindsight optimum of a conversation under the budget (an int or None) and the per-step cap: PMWeek-v0's
    DP on hit-weighted pairs (see the module docstring for why this is exact)."""

    def solve(self, conv) -> ConversationSchedule:
        from membudget.envs.conversation import to_pm_episode

        self._check()
        ep = to_pm_episode(conv)
        prob = problem_from_episode(ep, budget=self.budget, per_step_cap=self.per_step_cap, per_step_cost_cap=None,
                                    late_policy="expire", lookahead=0)
        n_pm = int(np.sum(conv.test_kind == PROSPECTIVE))
        n_tr = int(np.sum(conv.test_kind == TRIGGER))
        # macro weights x 6 n_pm n_tr: a prospective test 3 n_tr, an activation n_pm
        prob.weight = np.where(conv.test_kind[ep.resource] == PROSPECTIVE, 3 * n_tr, n_pm).astype(np.int64)
        _, plan, _, _, _ = _LinearSolver(prob).solve(1, 1)
        return self._result(conv, [(t, r) for r, steps in plan.items() for t in steps])

    def continuation(self, env) -> list:
        """An exact optimal continuation from ``env``'s current state (its step, remaining budget, per-step cap and
        scorecard): ``(step, memory)`` pairs in step order (see the module docstring for why this is exact)."""
        e = env.unwrapped
        core, ep, card = e.core, e.pm_episode, e.scorecard
        t = int(core.t[0])
        ahead = np.arange(np.searchsorted(ep.active_from, t), ep.n_intentions)
        ahead = ahead[(ep.onset[ahead] < NEVER) & (ep.polarity[ahead] == POS)]
        gain = np.array([card.effect(int(r), S_HIT) for r in ep.resource[ahead]])
        left = ahead.size if e.budget is None else int(core.remaining[0])
        used, plan = {}, []
        order = np.lexsort((ep.active_from[ahead], -gain))
        for m in ahead[order][gain[order] > 0]:
            if len(plan) == left:
                break
            step = int(ep.active_from[m])
            if e.per_step_cap is None or used.get(step, 0) < e.per_step_cap:
                used[step] = used.get(step, 0) + 1
                plan.append((step, int(ep.resource[m])))
        return sorted(plan)

    def act(self, env) -> np.ndarray:
        """The binary action of an optimal continuation at ``env``'s current step (DAgger's label)."""
        e = env.unwrapped
        action = np.zeros(e.core.n_resources, dtype=np.int8)
        t = int(e.core.t[0])
        action[[r for s, r in self.continuation(env) if s == t]] = 1
        return action


class ConversationGreedy(_Teacher):
    """Future-blind current-greedy oracle (privileged: it reads the verifier's answers of the current message)."""

    def act(self, env) -> np.ndarray:
        """The greedy binary action for an environment's current step."""
        e = env.unwrapped
        card, core = e.scorecard, e.core
        codes = _pair_codes(e)
        gain = np.array([card.effect(r, c) for r, c in enumerate(codes)])
        order = [r for r in np.argsort(-gain, kind="stable").tolist() if gain[r] > 0 and core.mask_state[0, r]]
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
        env = _env(conv, budget=self.budget, per_step_cap=self.per_step_cap,
                   false_fire_penalty=self.false_fire_penalty)
        env.reset(options={"conversation": conv})
        schedule = []
        for t in range(conv.horizon):
            _, _, _, _, info = env.step(self.act(env))
            schedule += [(t, int(r)) for r in np.flatnonzero(info["queried"])]
        return self._result(conv, schedule)


def reference_rows(conv, false_fire_penalty=1.0):
    """(step, memory, features, outcome, due) of the All-semantic reference rollout of ``conv``."""
    env = _env(conv, budget=None, per_step_cap=None, false_fire_penalty=false_fire_penalty)
    obs, _ = env.reset(options={"conversation": conv})
    truth = conv.truth()
    out = []
    for t in range(conv.horizon):
        codes = _pair_codes(env)
        for r in np.flatnonzero(obs["mask"]).tolist():
            loo = env.scorecard.effect(r, codes[r])  # score(A_t) - score(A_t minus r): effects add up
            out.append((t, r, obs["resources"][r], int(loo > 0), int(truth[t, r])))
        obs, _, _, _, _ = env.step(obs["mask"])
    return out


def build_conversation_dataset(seeds, budgets=("B20", "B40", "B60", "B80"), *, world=None, per_step_cap=2,
                               false_fire_penalty=1.0) -> LabelDataset:
    """Label rows of the conversations ``seeds`` (a :class:`~membudget.teachers.LabelDataset` whose ``features``
    have the environment's 34 columns; ``meta["env"]`` names the environment)."""
    world = world or ConversationConfig()
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
        "schema_version": SCHEMA_VERSION, "env": "membudget/ConversationPM-v0", "reference": "all_semantic",
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
