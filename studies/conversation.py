"""BudgetPM's GoodAI comparison on ``ConversationPM-v1`` (BudgetPM, §5.2, appendices B.4-B.7).

``python -m membudget.evaluate conversation`` builds the labels of the 12 development conversations 2000-2011,
fits the gates (Static and the Due gate: standardised class-balanced logistic regression, target-count
thresholds on 4 whole-conversation out-of-fold folds; Similarity: the token similarity with the same calibration;
Myopic / Sequential: the 36-feature gates on the current-greedy / hindsight-optimum labels; BC / DAgger: PMWeek-v0's
per-resource students imitating the exact hindsight optimum), evaluates every
policy at B20-B80 and the interpolation budgets B30/B50/B70 (linear threshold interpolation) on the analysis
conversations 4000-4029, and writes ``docs/conversation.md``: macro accuracy with the paired bootstrap difference
to Static, component accuracies, verifier queries and false fires, and the reproduction targets beside BudgetPM's
published GoodAI figures.

With ``--backend ray`` (or ``--checkpoint-dir``) the study's independent work runs as tasks of the execution backend
(:mod:`membudget.studies.execution`): the 12 PPO trainings (one task per budget and learner seed), the evaluations
(one task per policy and budget, and per diagnostic rollout) and the paired intervals (one task per row). Every
task seeds itself from its key, so the page's numbers do not depend on the backend.

``--gates-only`` fits only BudgetPM's gates (Static on the Outcome label, the Due gate, Similarity; Pacing on
Static's scorer), evaluates them with All-semantic, RandomFeasible and the two privileged teachers at every budget on
the analysis conversations 4000-4029, and writes the reproduction verdicts of issue #35's goals with the measured
reasons (:func:`render_gates`); the learners (Myopic / Sequential / BC / DAgger / PPO) are not trained. When the
page already holds ConversationPM-v0's study, that study is kept below the new one for comparison.

``--quick`` is a smoke run of the same pipeline (every gate and learner fitted, PPO for :data:`QUICK_PPO_STEPS`
steps with one learner seed, the analysis conversations 4000-4004, 1,000 resamples): a page with the main table
only, marked as a smoke run, without the reproduction verdicts or the diagnostics.
"""

from __future__ import annotations

import argparse
import os
import dataclasses
import functools
import time

import numpy as np

from membudget.agents.gates import StaticGate, TemporalGate
from membudget.agents.imitation import fit_bc, fit_dagger
from membudget.agents.ppo import PPOConfig, train_ppo
from membudget.agents.tasks import CONVERSATION
from membudget.baselines.pm import AllRelevant, RandomFeasible
from membudget.baselines.schedules import FractionPacing, RelevanceGate
from membudget.envs.conversation import (DEV_SEEDS, ConversationPMEnv, budget_levels, generate_conversation,
                                         mean_all_semantic_cost)
from membudget.envs.conversation.env import FALSE_FIRE_PENALTY
from membudget.envs.conversation.rollout import rollout
from membudget.envs.conversation.world import PAIR_KINDS, TRIGGER
from membudget.envs.validation import int_flag, seeds_flag
from membudget.studies.cli import add_page_flag, evaluate_command, page_path, resolve_quick
from membudget.studies.execution import Executor, add_backend_flags, executor_from_flags
from membudget.studies.protocol import bootstrap_ci, machine_line, seed_ranges, write_page
from membudget.teachers.conversation import (ConversationGreedy, ConversationOptimum, InformedOptimum,
                                             build_conversation_dataset)

ANALYSIS_SEEDS = range(4000, 4030)
CALIBRATED = ("B20", "B40", "B60", "B80")
INTERPOLATED = ("B30", "B50", "B70")
N_FOLDS = 4
PACING_HORIZON = 66
"""BudgetPM's development-median GoodAI horizon; the conversations have exactly this many messages, so Pacing's
remaining-horizon feature is the true one."""
GATES = ("Similarity", "DueGate", "Static", "Pacing", "Myopic", "Sequential")
LEARNED = ("BC", "DAgger", "PPO")
"""PMWeek-v0's learners, unchanged, with the same :class:`~membudget.agents.per_resource.PerResourceNet` (34
features per memory), one per budget, trained on the 12 development conversations: BC and DAgger from the exact
hindsight optimum, the native PPO from the reward (learner seed 0 in the table; :data:`PPO_SEEDS` in its own
table)."""
IMITATION = LEARNED[:2]
DAGGER_ITERATIONS = 2
PPO_SEEDS = (0, 1, 2)
PPO_SETTINGS = PPOConfig(total_timesteps=300_000, eval_every=50_000, eval_episodes=10, engine="autograd")
"""PMWeek-v0's chosen PPO settings (:class:`~membudget.agents.ppo.PPOConfig`'s defaults) with a shorter run;
early stopping on the validation conversations 3000-3009 (never the analysis conversations)."""
LOSSES = ("declined", "not_candidate", "not_proposed", "budget", "count_cap")
"""Why a true fire goes unexecuted when the base response misses it too: verified but declined by the verifier,
below the similarity gate, not proposed, skipped for the episode budget, skipped for the per-step cap."""
BREAKDOWN = (("Static", "B60"), ("Pacing", "B60"), ("DueGate", "B60"), ("Static", "B80"), ("Pacing", "B80"))
QUICK_SEEDS = range(4000, 4005)
QUICK_PPO_STEPS = 2 * 16 * PACING_HORIZON
"""Two updates of 16 conversations each."""
DEFAULT_RESAMPLES = 100_000
"""Paired bootstrap resamples of the study's intervals unless ``--resamples`` says otherwise."""
QUICK_RESAMPLES = 1_000
CEILING_SEEDS = 300
"""Conversations over which the study states the expected share of activations All-semantic hits."""
QUALITY_THRESHOLDS = (0.1, 0.2)
"""Fixed thresholds at which Static's scorer also runs at B60: is the scorer or the target count what costs?"""
UNCAPPED = ("B60", "B80")
"""Budgets whose Static threshold also runs without the episode budget (per-step cap kept): how many proposals the
calibrated threshold makes, against BudgetPM C.1 (every above-threshold Static proposal fits within the cap)."""


class AtThreshold:
    """A fitted per-resource gate run at a given threshold (policy protocol, ``action_mode="scores"``)."""

    def __init__(self, gate, threshold):
        self.gate, self.threshold = gate, threshold

    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        return self.gate.action_for(observation, self.threshold), state


class ConversationTemporalGate(TemporalGate):
    """Myopic / Sequential gate whose threshold is selected by out-of-fold conversation score."""

    quality = "score"

    def rollout_at(self, dataset, weeks, threshold) -> dict:
        """The conversations ``weeks`` played by this gate at ``threshold``."""
        return rollout(AtThreshold(self, threshold), [int(w) for w in weeks], budget=self.budget,
                       per_step_cap=self.per_step_cap, action_mode="scores")


def threshold(gate, budget: str) -> float:
    """A calibrated threshold, or the linear interpolation (in q) between the two calibrated neighbours."""
    if budget in gate.thresholds_:
        return gate.thresholds_[budget]
    qs = sorted(int(b[1:]) for b in gate.thresholds_)
    q = int(budget[1:])
    return float(np.interp(q, qs, [gate.thresholds_[f"B{k}"] for k in qs]))


def fit_gates(dataset, levels, progress=print, executor=None, ppo_settings=None, ppo_seeds=None):
    """Every gate and learner of the study by key; the PPO trainings (:func:`train_task`, one per budget and
    learner seed of ``ppo_seeds``, default :data:`PPO_SEEDS`, with ``ppo_settings``, default :data:`PPO_SETTINGS`)
    are tasks of ``executor`` (default: this process)."""
    ppo_seeds = PPO_SEEDS if ppo_seeds is None else tuple(ppo_seeds)
    gates = {"Static": StaticGate(n_folds=N_FOLDS).fit(dataset, levels),
             "DueGate": StaticGate(label="due", n_folds=N_FOLDS).fit(dataset, levels),
             "Similarity": RelevanceGate().fit(dataset, levels)}
    for teacher in ("myopic", "sequential"):
        for b in CALIBRATED:
            progress(f"fitting {teacher} gate at {b}")
            gates[(teacher, b)] = ConversationTemporalGate(teacher=teacher, budget=b, n_folds=N_FOLDS).fit(dataset)
    for b in CALIBRATED:
        progress(f"fitting BC and DAgger students at {b}")
        gates[("bc", b)], _ = fit_bc(DEV_SEEDS, b, task=CONVERSATION)
        gates[("dagger", b)], _ = fit_dagger(DEV_SEEDS, b, iterations=DAGGER_ITERATIONS, task=CONVERSATION)
    progress(f"training PPO at {', '.join(CALIBRATED)}, learner seeds {ppo_seeds}")
    items = [(b, seed) for b in CALIBRATED for seed in ppo_seeds]
    trained = (executor or Executor()).map(functools.partial(train_task, ppo_settings or PPO_SETTINGS), items)
    for (b, seed), (net, history) in zip(items, trained):
        gates[("ppo", b, seed)], gates[("ppo-history", b, seed)] = net, history
    return gates


def train_task(settings: PPOConfig, item):
    """One PPO training as a task: ``(budget, learner seed)`` -> ``(policy, history)`` of :func:`train_ppo` with
    ``settings`` (seeded by the learner seed, one torch thread)."""
    budget, seed = item
    return train_ppo(budget, settings, seed=seed, task=CONVERSATION)


def policy(name, budget, gates, seed=0, world=None):
    """``(policy, env kwargs)`` of a policy name at a budget level, in ``world`` (None: ConversationPM-v1's)."""
    p, kwargs = _policy(name, budget, gates, seed)
    return p, dict(kwargs, world=world)


def _policy(name, budget, gates, seed):
    if name == "AllSemantic":
        return AllRelevant(), {"budget": None, "per_step_cap": None}
    if name == "RandomFeasible":
        return RandomFeasible(per_step_cap=2, seed=seed), {"budget": budget}
    if name == "Pacing":
        return FractionPacing(scorer=gates["Static"], fraction=int(budget[1:]) / 100.0,
                              thresholds=gates["Static"].thresholds_), {"budget": budget, "action_mode": "scores"}
    if name == "PPO":
        return gates[("ppo", budget, seed)], {"budget": budget, "action_mode": "scores"}
    if name in LEARNED:
        return gates[(name.lower(), budget)], {"budget": budget, "action_mode": "scores"}
    if name in ("Myopic", "Sequential"):
        gate = gates[(name.lower(), budget)]
        return AtThreshold(gate, gate.thresholds_[budget]), {"budget": budget, "action_mode": "scores"}
    gate = gates[name]
    return AtThreshold(gate, threshold(gate, budget)), {"budget": budget, "action_mode": "scores"}


def call_breakdown(policy, seeds, **env_kwargs) -> dict:
    """Where a policy's verifier calls go and why true fires go unexecuted, as means per conversation over
    ``seeds``: ``calls`` (pair kind of :data:`~membudget.envs.conversation.world.PAIR_KINDS` -> verified pairs),
    ``changed`` (calls whose answer differs from the base response: the only calls that change the reply),
    ``lost`` (cause of :data:`LOSSES` -> true fires neither the verifier nor the base response executes),
    ``recitations`` (base recitations of a quote before reply n left in the reply: each zeroes its test) and
    ``spend`` (calls per quarter, 4)."""
    seeds = list(seeds)
    env = ConversationPMEnv(**env_kwargs)
    calls, lost, spend = np.zeros(len(PAIR_KINDS)), np.zeros(len(LOSSES)), np.zeros(4)
    changed = recitations = 0
    for seed in seeds:
        obs, _ = env.reset(seed=int(seed))
        conv = env.conversation
        kinds, truth, base = conv.pair_kinds(), conv.truth(), conv.base > 0
        state, start = None, np.ones(1, dtype=bool)
        for t in range(conv.horizon):
            action, state = policy.predict(obs, state=state, episode_start=start, deterministic=True)
            obs, _, _, _, info = env.step(action)
            start = np.zeros(1, dtype=bool)
            q = info["queried"]
            np.add.at(calls, kinds[t, q], 1)
            changed += int(np.sum(q & ((conv.verifier[t] > 0) != base[t])))
            recitations += int(np.sum(~q & base[t] & (kinds[t] == PAIR_KINDS.index("pm_other"))))
            for r in np.flatnonzero(truth[t] & ~np.where(q, conv.verifier[t] > 0, base[t])):
                cause = ("declined" if q[r] else "not_candidate" if kinds[t, r] == 0 else "not_proposed"
                         if action[r] <= 0 else "budget" if info["remaining_budget"] == 0 else "count_cap")
                lost[LOSSES.index(cause)] += 1
        spend += info["episode_metrics"]["spend_per_quarter"]
    n = len(seeds)
    return {"calls": dict(zip(PAIR_KINDS, (calls / n).tolist())), "changed": changed / n,
            "lost": dict(zip(LOSSES, (lost / n).tolist())), "recitations": recitations / n, "spend": spend / n}


def teacher_metrics(teacher_cls, budget, seeds, world=None):
    out = {"macro_accuracy": [], "score": [], "queries": []}
    convs = [generate_conversation(s, world) for s in seeds]
    for c in convs:
        s = teacher_cls(budget=budget).solve(c)
        out["macro_accuracy"].append(s.macro_accuracy)
        out["score"].append(s.score)
        out["queries"].append(s.cost)
    return {k: np.array(v) for k, v in out.items()}


def informed_metrics(budget, seeds, world=None):
    """Per conversation the informed optimum's expected score (:class:`~membudget.teachers.conversation.
    InformedOptimum`: an upper bound on every online policy's expected score; with the study's false-fire penalty 0
    the score is the macro accuracy)."""
    io = InformedOptimum(budget=budget, false_fire_penalty=FALSE_FIRE_PENALTY, world=world)
    value = np.array([io.value(generate_conversation(s, world)) for s in seeds])
    return {"macro_accuracy": value, "score": value}


def results(n_resamples=DEFAULT_RESAMPLES, progress=print, executor=None, quick=False):
    """The page's text; the PPO trainings, the evaluations and the paired intervals run as tasks of ``executor``
    (default: this process). ``quick``: the smoke run of the module docstring (``n_resamples`` is then
    :data:`QUICK_RESAMPLES`)."""
    start = time.time()
    executor = executor or Executor()
    levels = budget_levels()
    progress("labels of the development conversations")
    data = build_conversation_dataset(DEV_SEEDS, CALIBRATED)
    if quick:
        n_resamples, seeds = QUICK_RESAMPLES, QUICK_SEEDS
        settings = dataclasses.replace(PPO_SETTINGS, total_timesteps=QUICK_PPO_STEPS, n_envs=16, eval_every=0,
                                       keep_best=False)
        gates = fit_gates(data, levels, progress, executor, settings, PPO_SEEDS[:1])
    else:
        seeds, gates = ANALYSIS_SEEDS, fit_gates(data, levels, progress, executor, PPO_SETTINGS)
    progress("evaluating")
    res, intervals, diag = evaluate(gates, seeds, n_resamples, executor, diagnostics=not quick)
    if quick:
        return render_quick(res, len(data), levels, n_resamples, time.time() - start, intervals)
    return render(res, data, levels, gates, n_resamples, time.time() - start, diag, intervals)


GATES_ONLY = ("RandomFeasible", "Similarity", "DueGate", "Static", "Pacing", "InformedOptimum", "CurrentGreedy",
              "HindsightOptimum")
"""The rows of ``--gates-only`` at every budget (besides All-semantic, uncapped)."""
V0_MARKER = "<!-- ConversationPM-v0's study, kept for comparison -->"
LEARNED_ROWS_NOTE = ("the learned rows (BC, DAgger, PPO) repeat exactly only on this kind of CPU; the gates, "
                     "teachers and bounds on any (docs/speed.md, \"Same seed, another CPU\")")
"""What the main page and the smoke run's say beside their machine line."""


def gates_only_keys() -> list:
    """``(policy, budget)`` of the ``--gates-only`` table's rows in order."""
    return [("AllSemantic", None)] + [(name, b) for b in CALIBRATED + INTERPOLATED for name in GATES_ONLY]


def fit_gates_only(dataset, levels) -> dict:
    """BudgetPM's gates alone: Static (Outcome label), the Due gate and Similarity (Pacing uses Static's scorer)."""
    return {"Static": StaticGate(n_folds=N_FOLDS).fit(dataset, levels),
            "DueGate": StaticGate(label="due", n_folds=N_FOLDS).fit(dataset, levels),
            "Similarity": RelevanceGate().fit(dataset, levels)}


def gates_results(n_resamples=DEFAULT_RESAMPLES, progress=print, executor=None, seeds=ANALYSIS_SEEDS) -> str:
    """The ``--gates-only`` page's text (:func:`render_gates`)."""
    start = time.time()
    executor = executor or Executor()
    levels = budget_levels()
    progress("labels of the development conversations")
    data = build_conversation_dataset(DEV_SEEDS, CALIBRATED)
    gates = fit_gates_only(data, levels)
    progress("evaluating")
    res, intervals, _ = evaluate(gates, seeds, n_resamples, executor, diagnostics=False, keys=gates_only_keys())
    return render_gates(res, data, levels, gates, n_resamples, time.time() - start, intervals,
                        gates_diagnostics(gates, seeds), list(seeds))


def gates_diagnostics(gates, seeds) -> dict:
    """What :func:`why_section` reads, for the gates alone: ``breakdown`` (:func:`call_breakdown` per key of
    :data:`BREAKDOWN`) and ``uncapped`` (:func:`uncapped_static` per budget of :data:`UNCAPPED`) on ``seeds``."""
    breakdown = {}
    for key in BREAKDOWN:
        p, kwargs = policy(*key, gates)
        breakdown[key] = call_breakdown(p, list(seeds), **kwargs)
    return {"breakdown": breakdown, "uncapped": {b: uncapped_static(gates, b, seeds) for b in UNCAPPED}}


def _world_rates(seeds) -> dict:
    """Drawn rates of a set of conversations: the verifier's declines of candidate activations and the base
    response's share of activations."""
    n_cand = declined = n_act = base = 0
    for c in map(generate_conversation, seeds):
        act = c.truth() & (c.test_kind == TRIGGER)[None, :]
        cand = act & c.candidates()
        n_cand, declined = n_cand + int(cand.sum()), declined + int((cand & (c.verifier == 0)).sum())
        n_act, base = n_act + int(act.sum()), base + int((act & (c.base > 0)).sum())
    return {"candidate_activations": n_cand, "declined": declined, "declined_rate": declined / max(n_cand, 1),
            "base_tr": base / max(n_act, 1)}


def _is_analysis(seeds) -> bool:
    """Whether ``seeds`` are the analysis conversations (the block issue #35's goals are judged on)."""
    return list(seeds) == list(ANALYSIS_SEEDS)


def goals_section(res, data, levels, seeds=ANALYSIS_SEEDS) -> list:
    """The verdicts of issue #35's goals beside BudgetPM's figures (tolerances: the issue's), on the conversations
    ``seeds`` (the goals are judged on the analysis conversations; another block's verdicts say how far the analysis
    block's draws decide them)."""
    def mean(name, b, key="macro_accuracy"):
        return mean_of(res, name, b, key)

    def near(x, target, tol):
        return "met" if abs(x - target) <= tol else "not met"

    rows = [("hindsight optimum at B60 (the ceiling admits the published figures)", ">= 0.975",
             f"{mean('HindsightOptimum', 'B60'):.4f}",
             "met" if mean("HindsightOptimum", "B60") >= 0.975 else "not met")]
    for b, target in (("B60", 0.946), ("B80", 0.951)):
        x = mean("Static", b)
        rows.append((f"Static macro accuracy at {b}", f"{target:.3f} +- 0.02", f"{x:.4f}", near(x, target, 0.02)))
    for b, target in (("B60", 0.967), ("B80", 0.971)):
        x = mean("Pacing", b)
        extra = mean("Pacing", b, "queries") - mean("Static", b, "queries")
        ok = "met" if abs(x - target) <= 0.02 and extra < 0.5 else "not met"
        rows.append((f"Pacing at {b}: accuracy / extra queries", f"{target:.3f} +- 0.02 / < 0.5",
                     f"{x:.4f} / {extra:+.2f}", ok))
    for b, pts, fewer in (("B60", 1.33, 0.24), ("B80", 1.67, 0.44)):
        d = 100 * (mean("Static", b) - mean("DueGate", b))
        q = mean("DueGate", b, "queries") - mean("Static", b, "queries")
        rows.append((f"Static - Due gate at {b}: points / fewer queries", f"+{pts:.2f} / {fewer:.2f}",
                     f"{d:+.2f} / {q:.2f}", "met (sign)" if d > 0 and q > 0 else "not met"))
    differ = int(np.sum(data.outcome != data.due))
    rows.append(("Outcome and Due labels disagree (development rows)", ">= 10%",
                 f"{differ}/{len(data)} = {100 * differ / len(data):.1f}%",
                 "met" if differ >= 0.1 * len(data) else "not met"))
    for key, target in (("pm_accuracy", 0.99), ("tr_accuracy", 0.90)):
        x = mean("Static", "B60", key)
        rows.append((f"Static {key.replace('_', ' ')} at B60", f"{target:.2f} +- 0.03", f"{x:.4f}",
                     near(x, target, 0.03)))
    for b, target in (("B30", 0.904), ("B50", 0.956), ("B70", 0.953)):
        x = mean("Static", b)
        rows.append((f"Static macro accuracy at {b} (interpolated threshold)", f"{target:.3f} +- 0.03", f"{x:.4f}",
                     near(x, target, 0.03)))
    rows.append(("candidate rows over 12 development conversations", "670 +- 10%", f"{len(data)}",
                 "met" if abs(len(data) - 670) <= 0.1 * 670 else "not met"))
    rows.append(("budgets B20/B40/B60/B80", "10/21/31/41", "/".join(str(levels[b]) for b in CALIBRATED),
                 "met" if [levels[b] for b in CALIBRATED] == [10, 21, 31, 41] else "not met"))
    head = ["## Reproduction of BudgetPM's GoodAI figures (issue #35's goals)", ""]
    if not _is_analysis(seeds):
        head = [f"## BudgetPM's GoodAI figures on conversations {seeds[0]}-{seeds[-1]}", "",
                f"The issue's goals are judged on the analysis conversations {ANALYSIS_SEEDS[0]}-{ANALYSIS_SEEDS[-1]} "
                "([conversation.md](conversation.md)); the same verdicts on this block say how far those 30 "
                "conversations' draws decide them.", ""]
    return [*head, "| target | BudgetPM / goal | ours | |", "|---|---|---|---|",
            *[f"| {x} | {y} | {z} | {w} |" for x, y, z, w in rows]]


def why_section(res, diag, seeds) -> list:
    """The measured reasons: the ceiling, the calls that change the reply and the losses by cause of Static, Pacing
    and the Due gate (``diag["breakdown"]``: :func:`call_breakdown` per key of :data:`BREAKDOWN`), and how the
    analysis conversations' verifier and base-response draws compare with the development conversations' and the
    world's; ``diag["uncapped"]``: :func:`uncapped_static` per budget of :data:`UNCAPPED`."""
    breakdown, uncapped = diag["breakdown"], diag["uncapped"]
    from membudget.envs.conversation.calibration import calibrate

    def mean(name, b, key="macro_accuracy"):
        return mean_of(res, name, b, key)

    n, span = len(seeds), seed_ranges(seeds)
    dev = calibrate()
    here, world = _world_rates(seeds), _world_rates(range(5000, 5000 + CEILING_SEEDS))
    devr = _world_rates(DEV_SEEDS)
    harder = here["declined_rate"] > world["declined_rate"]
    a = res[("AllSemantic", None)]
    st, pa, du = breakdown[("Static", "B60")], breakdown[("Pacing", "B60")], breakdown[("DueGate", "B60")]
    lines = ["## Why, measured", "",
             f"- The ceiling: the unconstrained hindsight optimum reaches "
             f"{dev['ceiling_macro_accuracy']:.3f} on the development conversations and the budgeted one "
             f"{mean('HindsightOptimum', 'B60'):.4f} at B60 here with only "
             f"{mean('HindsightOptimum', 'B60', 'queries'):.1f} calls per conversation "
             f"({'at or above' if mean('HindsightOptimum', 'B60') >= 0.967 else 'below'} BudgetPM's Pacing 0.967 "
             f"at B60): the base response already carries most quotes and responses, and a call is worth something "
             f"only where the verifier and the base response differ. For online policies the bound is lower: the "
             f"informed optimum (it knows every message's kind, not the verifier's answers or the base responses) "
             f"expects {mean('InformedOptimum', 'B60'):.4f} at B60 and {mean('InformedOptimum', 'B80'):.4f} at B80, "
             f"so BudgetPM's Pacing figures (0.967 / 0.971) would be "
             f"{0.967 / mean('InformedOptimum', 'B60'):.1%} / {0.971 / mean('InformedOptimum', 'B80'):.1%} of what "
             f"an agent knowing every kind expects here.",
             "- What the gates see: BudgetPM's gates score pre-query features only (§3.4: \"Before any external call, "
             "BudgetPM constructs x_{t,r} from h_t\"; A.2: GoodAI's seven features are semantic-resource identity, "
             "semantic-trigger fraction, token and fuzzy trigger similarity, mean memory age, repeat fraction and "
             "active-memory count; A.3: the base response is held fixed only in the label's recomposition), so "
             "ConversationPM-v1's gates do not observe the base response either, and most of their calls change "
             f"nothing: of Static's {sum(st['calls'].values()):.1f} calls per conversation at B60 "
             f"{st['changed']:.1f} change the reply (Pacing {pa['changed']:.1f} of {sum(pa['calls'].values()):.1f}, "
             f"the Due gate {du['changed']:.1f} of {sum(du['calls'].values()):.1f}). A call on an activation the base "
             f"response had right follows the verifier's answer, so each verifier miss there loses a hit: "
             f"{st['lost']['declined']:.2f} true fires per conversation are lost to verifier declines under Static at "
             f"B60, {st['lost']['budget']:.2f} to the budget, {st['lost']['not_proposed']:.2f} not proposed; "
             f"{st['recitations']:.2f} base recitations of a quote before reply n are left in (each zeroes its test; "
             f"Due gate: {du['recitations']:.2f}).",
             "- The count calibration and the cap: " + "; ".join(
                 f"Static's {b} threshold without the episode budget proposes {np.median(u['queries']):.0f} calls in "
                 f"the median conversation here (90th percentile {np.percentile(u['queries'], 90):.0f}), "
                 f"{int(np.sum(u['queries'] > budget_levels()[b]))}/{n} conversations propose more than the "
                 f"{budget_levels()[b]} calls of {b}, and uncapped it reaches {u['macro_accuracy'].mean():.4f} "
                 f"(capped: {mean('Static', b):.4f})" for b, u in uncapped.items()) +
             ". Eq. 4 sets the mean out-of-fold count over the development conversations to the budget, so some "
             "conversations propose more than the cap and spend it before their last quotes and activations; "
             "BudgetPM reports (C.1, for its Llama-3-8B analysis and confirmation traces, GoodAI's budgets not "
             "named) that every above-threshold Static proposal fits within the cap at B20-B80, which the literal "
             "count rule cannot give when the count varies across conversations.",
             f"- Per goal: Static's prospective-memory accuracy at B60 ({mean('Static', 'B60', 'pm_accuracy'):.3f}) "
             f"loses its tests to the {st['recitations']:.2f} base recitations per conversation it leaves in and to "
             f"the budget ({exhausted_of(res[('Static', 'B60')])}/{n} conversations exhausted). Pacing "
             f"({mean('Pacing', 'B60'):.4f} / {mean('Pacing', 'B80'):.4f} at B60 / B80) exhausts the budget in "
             f"{exhausted_of(res[('Pacing', 'B60')])}/{n} and {exhausted_of(res[('Pacing', 'B80')])}/{n} "
             f"conversations and loses {pa['lost']['declined']:.2f} true fires per conversation to verifier declines "
             f"at B60; All-semantic itself reaches {a['macro_accuracy'].mean():.4f} here"
             + (", so a gate that verifies the activations cannot come within 0.02 of 0.967. "
                if a['macro_accuracy'].mean() < 0.947 else ". ") +
             f"The Due gate (Due label 0 on every reply before n) "
             f"verifies {du['calls']['pm_other']:.2f} such replies per conversation at B60 against Static's "
             f"{st['calls']['pm_other']:.2f}, so it leaves {du['recitations']:.2f} base recitations per conversation "
             f"in (Static: {st['recitations']:.2f}) and spends the calls on distractors "
             f"({du['calls']['distractor']:.2f} against {st['calls']['distractor']:.2f}); Static exhausts the budget "
             f"in {exhausted_of(res[('Static', 'B60')])}/{n} conversations, the Due gate in "
             f"{exhausted_of(res[('DueGate', 'B60')])}/{n} (Static - Due gate "
             f"{100 * (mean('Static', 'B60') - mean('DueGate', 'B60')):+.2f} points with "
             f"{mean('DueGate', 'B60', 'queries') - mean('Static', 'B60', 'queries'):+.2f} fewer queries; BudgetPM "
             f"+1.33 with 0.24 fewer). At the interpolation budgets Static exhausts the budget in "
             + ", ".join(f"{exhausted_of(res[('Static', b)])}/{n} ({b})" for b in INTERPOLATED) + " conversations.",
             f"- {'The analysis conversations' if _is_analysis(seeds) else f'Conversations {span}'}"
             f" are {'harder than' if harder else 'no harder than'} the world's average: All-semantic reaches "
             f"{a['macro_accuracy'].mean():.4f} here (trigger response {a['tr_accuracy'].mean():.3f})"
             f"{', because the' if harder else '; the'} verifier declines "
             f"{here['declined']} of the {here['candidate_activations']} candidate activations of "
             f"conversations {span} ({100 * here['declined_rate']:.1f}%), against "
             f"{100 * devr['declined_rate']:.1f}% on the development conversations and "
             f"{100 * world['declined_rate']:.1f}% over conversations "
             f"5000-{5000 + CEILING_SEEDS - 1} (the world's p_miss_trigger is "
             f"{ConversationPMEnv().world.p_miss_trigger:.3f}); the base response hits "
             f"{here['base_tr']:.3f} of the activations here, {world['base_tr']:.3f} over 5000-"
             f"{5000 + CEILING_SEEDS - 1}. The world was not retuned on these conversations.",
             "", "Calls per conversation by pair kind, calls that change the reply, true fires lost by cause, base "
             f"recitations left in, and calls per quarter (conversations {span}):", "",
             "| policy | budget | " + " | ".join(PAIR_KINDS[1:]) + " | changed | lost: " + " | ".join(LOSSES) +
             " | recitations left | spend per quarter | exhausted |",
             "|---|---|" + "---|" * (len(PAIR_KINDS) - 1 + len(LOSSES) + 5)]
    for (name, b), d in breakdown.items():
        lines.append(f"| {name} | {b} | " + " | ".join(f"{d['calls'][x]:.2f}" for x in PAIR_KINDS[1:]) +
                     f" | {d['changed']:.2f} | " + " | ".join(f"{d['lost'][x]:.2f}" for x in LOSSES) +
                     f" | {d['recitations']:.2f} | " + " / ".join(f"{x:.1f}" for x in d["spend"]) +
                     f" | {exhausted_of(res[(name, b)])}/{n} |")
    return lines


def page_command(*flags, n_resamples) -> str:
    """The command line a page records: ``flags``, and ``--resamples`` where it is not the default."""
    resamples = [] if n_resamples == DEFAULT_RESAMPLES else ["--resamples", str(n_resamples)]
    return evaluate_command("conversation", [*flags, *resamples])


def render_gates(res, data, levels, gates, n_resamples, seconds, intervals, diag, seeds) -> str:
    """The ``--gates-only`` page: the main table, the verdicts of issue #35's goals beside BudgetPM's figures and the
    measured reasons for each one not met."""
    span = seed_ranges(seeds)
    analysis = _is_analysis(seeds)
    shared = set(seeds) & set(ANALYSIS_SEEDS)
    part = "including" if len(shared) == len(ANALYSIS_SEEDS) else ("some of" if shared else "not")
    where = f"the analysis conversations {span}" if analysis else \
        f"conversations {span} ({part} the analysis conversations, {ANALYSIS_SEEDS[0]}-{ANALYSIS_SEEDS[-1]})"
    command = page_command("--gates-only", *([] if analysis else ["--conversations", span.replace(", ", ",")]),
                           n_resamples=n_resamples)
    intro = (f"Generated by `{command}` (the environment: "
             f"[ConversationPM-v1](envs/conversation.md); its world calibrated on the development conversations "
             f"2000-2011 only: `python -m membudget.envs.conversation calibrate`). BudgetPM's gates fitted on the 12 "
             f"development conversations ({len(data)} candidate rows, 4 whole-conversation folds): Static on the "
             f"Outcome label (the leave-one-out effect of a call on the score given the base responses), the Due "
             f"gate on the Due label (the trigger is due), Similarity on the token similarity; Pacing is Static's "
             f"scorer paced (BudgetPM B.6). Evaluation on {where}; paired bootstrap over "
             f"conversations with {n_resamples} resamples. Budgets: "
             f"{', '.join(f'{k} = {levels[k]}' for k in _studied())} verifier calls. Per-step cap 2, false-fire "
             f"penalty {FALSE_FIRE_PENALTY:g} (the score is the benchmark's macro accuracy). {REFERENCES}. "
             "The learners (Myopic, Sequential, BC, DAgger, PPO) are not part of this run "
             "(`python -m membudget.evaluate conversation` trains them).")
    thresholds = ", ".join(f"{b} {threshold(gates['Static'], b):.4f}" for b in CALIBRATED + INTERPOLATED)
    lines = ["# ConversationPM-v1: BudgetPM's GoodAI comparison (the gates)", "", intro, "", *_table(res, intervals),
             "", *goals_section(res, data, levels, seeds), "", *why_section(res, diag, seeds), "",
             f"Thresholds (Static): {thresholds}.", "",
             f"command: {command}   ({seconds:.0f} s)", "", machine_line(), ""]
    return "\n".join(lines)


def keep_v0(text: str, path: str) -> str:
    """``text`` followed by ConversationPM-v0's study from the page at ``path`` (below :data:`V0_MARKER`, or the
    whole page when it is v0's own, its headings one level down), when there is one."""
    if not os.path.exists(path):
        return text
    with open(path) as f:
        old = f.read()
    if V0_MARKER in old:
        kept = old[old.index(V0_MARKER):]
    elif old.startswith("# ConversationPM-v0"):
        kept = V0_MARKER + "\n\n" + "\n".join("#" + line if line.startswith("#") else line
                                                  for line in old.splitlines()) + "\n"
    else:
        return text
    return text.rstrip("\n") + "\n\n" + kept


REFERENCES = ("HindsightOptimum and CurrentGreedy are privileged teachers (they read the verifier's answers and the "
              "base responses), shown as references. InformedOptimum is the exact expected score of the best policy "
              "that knows everything about a conversation except the verifier's answers and the base responses "
              "(it learns them as it replies): an upper bound on the expected score of every online policy (an "
              "expectation over those draws, not a played row: no calls counted)")
"""The main table's note on its reference rows (both pages)."""


def table_keys() -> list:
    """``(policy, budget)`` of the main table's rows in order (AllSemantic's budget None: uncapped)."""
    keys = [("AllSemantic", None)]
    for b in CALIBRATED + INTERPOLATED:
        names = GATES_ONLY
        if b in CALIBRATED:
            names += ("Myopic", "Sequential", *LEARNED)
        keys += [(name, b) for name in names]
    return keys


def diagnostic_keys() -> list:
    """The diagnostics' rollouts: the call breakdowns, Static's scorer at fixed thresholds, PPO per learner seed
    after the first (the table's PPO row is learner seed 0)."""
    return ([("breakdown", name, b) for name, b in BREAKDOWN] + [("quality", thr) for thr in QUALITY_THRESHOLDS]
            + [("uncapped", b) for b in UNCAPPED] + [("ppo", b, seed) for b in CALIBRATED for seed in PPO_SEEDS[1:]])


def evaluate(gates, seeds, n_resamples, executor, diagnostics=True, keys=None, world=None) -> tuple:
    """``(res, intervals, diag)`` on the conversations ``seeds`` of ``world`` (None: ConversationPM-v1's) as two
    maps of ``executor``: one task per row of ``keys`` (default :func:`table_keys`) and per diagnostic rollout
    (:func:`evaluation_task`; none with ``diagnostics=False``, ``diag`` is then None), then one task per paired
    interval (a row's macro accuracy minus Static's at its budget)."""
    seeds = tuple(int(s) for s in seeds)
    table, diagnostics_ = keys or table_keys(), diagnostic_keys() if diagnostics else []
    items = [("run", *key) for key in table] + diagnostics_
    out = dict(zip(items, executor.map(functools.partial(evaluation_task, gates, seeds, world=world), items)))
    res = {key: out[("run", *key)] for key in table}
    diag = None if not diagnostics else {"breakdown": {key: out[("breakdown", *key)] for key in BREAKDOWN},
            "quality": {thr: out[("quality", thr)] for thr in QUALITY_THRESHOLDS},
            "uncapped": {b: out[("uncapped", b)] for b in UNCAPPED},
            # learner seed 0's rollout is the table's PPO row (policy("PPO", b, gates), seed 0)
            "ppo": {(b, s): res[("PPO", b)] if s == PPO_SEEDS[0] else out[("ppo", b, s)]
                    for b in CALIBRATED for s in PPO_SEEDS}}
    paired = [(name, b) for name, b in table if b is not None and name != "Static"]
    diffs = [res[(name, b)]["macro_accuracy"] - res[("Static", b)]["macro_accuracy"] for name, b in paired]
    intervals = dict(zip(paired, executor.map(functools.partial(bootstrap_ci, n_resamples=n_resamples), diffs)))
    return res, intervals, diag


def evaluation_task(gates, seeds, item, world=None):
    """One evaluation as a task, in ``world`` (None: ConversationPM-v1's): ``("run", policy, budget)`` ->
    :func:`_run`'s per-conversation metrics (budget None: AllSemantic uncapped); ``("breakdown", policy, budget)``
    -> :func:`call_breakdown`; ``("quality", threshold)`` -> Static's scorer at a fixed threshold at B60;
    ``("uncapped", budget)`` -> :func:`uncapped_static`; ``("ppo", budget, learner seed)`` -> that PPO learner's
    rollout."""
    kind, *key = item
    if kind == "run":
        name, budget = key
        return _run(name, budget or "B60", gates, list(seeds), world)
    if kind == "breakdown":
        p, kw = policy(*key, gates, world=world)
        return call_breakdown(p, seeds, **kw)
    if kind == "quality":
        return rollout(AtThreshold(gates["Static"], key[0]), list(seeds), budget="B60", action_mode="scores",
                       world=world)
    if kind == "uncapped":
        return uncapped_static(gates, key[0], seeds, world)
    budget, seed = key
    p, kw = policy("PPO", budget, gates, seed, world)
    return rollout(p, list(seeds), **kw)


def uncapped_static(gates, budget, seeds, world=None) -> dict:
    """Static at ``budget``'s threshold without the episode budget (the per-step cap kept): its proposals' metrics
    per conversation (:data:`UNCAPPED`)."""
    return rollout(AtThreshold(gates["Static"], threshold(gates["Static"], budget)), list(seeds), budget=None,
                   action_mode="scores", world=world)


def _run(name, budget, gates, seeds, world=None):
    """Per-conversation metrics of one policy at one budget (RandomFeasible: the mean of 3 seeds)."""
    if name == "InformedOptimum":
        return informed_metrics(budget_levels(world)[budget], seeds, world)
    if name in ("HindsightOptimum", "CurrentGreedy"):
        cls = ConversationOptimum if name == "HindsightOptimum" else ConversationGreedy
        return teacher_metrics(cls, budget_levels(world)[budget], seeds, world)
    reps = []
    for r in range(3 if name == "RandomFeasible" else 1):
        p, kw = policy(name, budget, gates, seed=r, world=world)
        reps.append(rollout(p, seeds, **kw))
    return {k: np.mean([rep[k] for rep in reps], axis=0) for k in reps[0]}


def _studied() -> list:
    """The budgets the study evaluates, in increasing order."""
    return sorted(CALIBRATED + INTERPOLATED, key=lambda b: int(b[1:]))


def _fmt(x, d=3):
    return f"{x:.{d}f}"


def _table(res, intervals) -> list:
    """The main table's lines: macro accuracy, the paired difference to Static, components, queries, false fires,
    score and exhausted conversations per policy and budget."""
    header = ("| budget | policy | macro accuracy | vs Static [95% CI] | PM accuracy | TR accuracy | queries | "
              "false fires | score | exhausted |")
    lines = [header, "|---|---|---|---|---|---|---|---|---|---|"]
    a = res[("AllSemantic", None)]
    lines.append(f"| none | AllSemantic | {_fmt(a['macro_accuracy'].mean(), 4)} | | "
                 f"{_fmt(a['pm_accuracy'].mean())} | {_fmt(a['tr_accuracy'].mean())} | {_fmt(a['queries'].mean(), 2)} "
                 f"| {_fmt(a['false_fires'].mean(), 2)} | {_fmt(a['score'].mean(), 4)} | |")
    for b in CALIBRATED + INTERPOLATED:
        for (name, bb), r in res.items():
            if bb != b:
                continue
            if name == "Static":
                diff = "reference"
            else:
                m, lo, hi = intervals[(name, b)]
                diff = f"{m:+.4f} [{lo:+.4f}, {hi:+.4f}]"
            comp = (f"{_fmt(r['pm_accuracy'].mean())} | {_fmt(r['tr_accuracy'].mean())} | "
                    if "pm_accuracy" in r else "| | ")
            ff = _fmt(r["false_fires"].mean(), 2) if "false_fires" in r else ""
            ex = f"{exhausted_of(r)}/{r['score'].size}" if "exhaustion_step" in r else ""
            q = _fmt(r["queries"].mean(), 2) if "queries" in r else ""  # the informed optimum: an expectation
            lines.append(f"| {b} | {name} | {_fmt(r['macro_accuracy'].mean(), 4)} | {diff} | {comp}"
                         f"{q} | {ff} | {_fmt(r['score'].mean(), 4)} | {ex} |")
    return lines


def render_quick(res, n_rows, levels, n_resamples, seconds, intervals) -> str:
    """The smoke run's page: the main table alone, saying it is a smoke run."""
    intro = (f"**Smoke run** (`--quick`): the study's pipeline at toy scale — PPO trained for {QUICK_PPO_STEPS:,} "
             f"steps (one learner seed), evaluation on conversations {QUICK_SEEDS[0]}-{QUICK_SEEDS[-1]} only, "
             f"{n_resamples:,} resamples. Its figures are not the study's and carry no verdicts; "
             f"`python -m membudget.evaluate conversation` runs the study. Gates fitted on the 12 development "
             f"conversations 2000-2011 ({n_rows} candidate rows). Budgets: "
             f"{', '.join(f'{k} = {levels[k]}' for k in _studied())} verifier calls.")
    lines = ["# ConversationPM-v1: BudgetPM's GoodAI comparison (smoke run)", "", intro, "", *_table(res, intervals),
             "", f"command: python -m membudget.evaluate conversation --quick   ({seconds:.0f} s)", "",
             f"{machine_line()}: {LEARNED_ROWS_NOTE}.", ""]
    return "\n".join(lines)


def render(res, data, levels, gates, n_resamples, seconds, diag, intervals) -> str:
    command = page_command(n_resamples=n_resamples)
    intro = (f"Generated by `{command}` (the environment: "
             "[ConversationPM-v1](envs/conversation.md)). Gates fitted on the 12 development conversations "
             f"2000-2011 ({len(data)} candidate rows, 4 whole-conversation folds); evaluation on the analysis "
             f"conversations 4000-4029; paired bootstrap over conversations with {n_resamples} resamples. "
             f"Budgets: {', '.join(f'{k} = {levels[k]}' for k in _studied())} verifier calls "
             f"(q% of the mean All-semantic cost, {mean_all_semantic_cost():.2f}). "
             f"Per-step cap 2, false-fire penalty {FALSE_FIRE_PENALTY:g} (the score is the benchmark's macro accuracy, "
             f"BudgetPM's GoodAI task score). {REFERENCES}; 'exhausted' counts the conversations whose budget ran "
             "out.")
    lines = ["# ConversationPM-v1: BudgetPM's GoodAI comparison", "", intro, "", *_table(res, intervals)]
    thresholds = ", ".join(f"{b} {threshold(gates['Static'], b):.4f}" for b in CALIBRATED + INTERPOLATED)
    lines += ["", *goals_section(res, data, levels), "", *why_section(res, diag, list(ANALYSIS_SEEDS)),
              "", *ppo_seeds(res, gates, diag), "",
              f"Thresholds (Static): {thresholds}.",
              "", f"command: {command}   ({seconds:.0f} s)", "",
              f"{machine_line()}: {LEARNED_ROWS_NOTE}.", ""]
    return "\n".join(lines)


def ppo_seeds(res, gates, diag) -> list:
    """PPO's learner seeds: macro accuracy per seed, mean and spread, the validation point kept and the training
    time, beside the imitation students and the hindsight optimum."""
    out = ["## PPO across learner seeds", "",
           f"The native PPO of PMWeek-v0, unchanged ({PPO_SETTINGS.total_timesteps:,} conversation steps per run, "
           f"{PPO_SETTINGS.n_envs} conversations per update, learning rate {PPO_SETTINGS.learning_rate}, reward "
           f"scale {PPO_SETTINGS.reward_scale:.0f}, entropy bonus {PPO_SETTINGS.ent_coef}), trained on the 12 "
           "development conversations and kept at its best point on the validation conversations 3000-3009 "
           f"(learning-curve points every {PPO_SETTINGS.eval_every:,} steps). Macro accuracy on the analysis "
           "conversations 4000-4029; the main table's PPO row is learner seed 0.", "",
           "| budget | " + " | ".join(f"seed {s}" for s in PPO_SEEDS) + " | mean ± sd | kept at (steps) | training s "
           "| BC | DAgger | HindsightOptimum |", "|---" * (len(PPO_SEEDS) + 7) + "|"]
    for b in CALIBRATED:
        acc = [float(diag["ppo"][(b, s)]["macro_accuracy"].mean()) for s in PPO_SEEDS]
        kept = "/".join(f"{gates[('ppo', b, s)].config['selected_env_steps'] // 1000}k" for s in PPO_SEEDS)
        secs = "/".join(f"{gates[('ppo-history', b, s)][-1]['wall_clock']:.0f}" for s in PPO_SEEDS)
        out.append(f"| {b} | " + " | ".join(f"{a:.4f}" for a in acc) + f" | {np.mean(acc):.4f} ± {np.std(acc):.4f} "
                   f"| {kept} | {secs} | {mean_of(res, 'BC', b):.4f} | {mean_of(res, 'DAgger', b):.4f} | "
                   f"{mean_of(res, 'HindsightOptimum', b):.4f} |")

    def gap(b, other):
        return np.mean([diag["ppo"][(b, s)]["macro_accuracy"].mean() for s in PPO_SEEDS]) - other

    out += ["", "Mean over the seeds minus the better imitation student: " + ", ".join(
        f"{b} {gap(b, max(mean_of(res, 'BC', b), mean_of(res, 'DAgger', b))):+.4f}" for b in CALIBRATED)
        + "; minus Static: " + ", ".join(f"{b} {gap(b, mean_of(res, 'Static', b)):+.4f}" for b in CALIBRATED)
        + ". Conversations whose budget ran out, BC / DAgger / PPO (learner seed 0): " + ", ".join(
            f"{b} {exhausted_of(res[('BC', b)])}/{exhausted_of(res[('DAgger', b)])}/{exhausted_of(res[('PPO', b)])}"
            for b in CALIBRATED)
        + " of 30 (the students propose every candidate whose probability reaches 0.5, whatever the budget; PPO "
        "learns from the reward). PPO trains on the same 12 conversations as the students."]
    return out


def exhausted_of(metrics) -> int:
    """Conversations whose budget ran out, of per-conversation ``metrics``."""
    return int(np.sum(metrics["exhaustion_step"] >= 0))


def mean_of(res, name, budget, key="macro_accuracy") -> float:
    return float(res[(name, budget)][key].mean())


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.evaluate conversation")
    parser.add_argument("--resamples", type=int_flag(1), default=None,
                        help=f"paired bootstrap resamples (default {DEFAULT_RESAMPLES}; --quick: {QUICK_RESAMPLES})")
    add_page_flag(parser, "conversation", "conversation.md")
    parser.add_argument("--quick", action="store_true",
                        help=f"a smoke run: PPO for {QUICK_PPO_STEPS} steps, one learner seed, conversations "
                             f"{QUICK_SEEDS[0]}-{QUICK_SEEDS[-1]}, {QUICK_RESAMPLES} resamples; the main table only")
    parser.add_argument("--gates-only", action="store_true",
                        help="BudgetPM's gates (Static, Due gate, Similarity, Pacing) and the teachers only, on "
                             "conversations 4000-4029, with issue #35's verdicts; no learner is trained")
    parser.add_argument("--conversations", type=seeds_flag("--conversations"), default=None,
                        help="with --gates-only: the conversations to evaluate on, e.g. 6000-6299 (default: the "
                             f"analysis conversations {ANALYSIS_SEEDS[0]}-{ANALYSIS_SEEDS[-1]}, on which issue #35's "
                             "goals are judged)")
    add_backend_flags(parser)
    args = parser.parse_args(argv)
    if args.quick and args.gates_only:
        parser.error("--quick and --gates-only are two different runs; give one")
    resolve_quick(parser, args, {"resamples": QUICK_RESAMPLES}, {"resamples": DEFAULT_RESAMPLES})
    if args.conversations is not None and not args.gates_only:
        parser.error("--conversations goes with --gates-only (the full study evaluates on the analysis conversations)")
    if args.conversations is not None and set(args.conversations) & set(DEV_SEEDS):
        parser.error(f"--conversations: the development conversations {DEV_SEEDS[0]}-{DEV_SEEDS[-1]} fit the gates; "
                     "evaluate on others")
    args.out = page_path(args.out, "conversation", "conversation.md")
    with executor_from_flags(args) as executor:
        progress = lambda m: print(m, flush=True)  # noqa: E731
        if args.gates_only:
            text = gates_results(args.resamples, progress=progress, executor=executor,
                                 seeds=args.conversations or ANALYSIS_SEEDS)
        else:
            text = results(args.resamples, progress=progress, executor=executor, quick=args.quick)
    if not args.quick:
        text = keep_v0(text, args.out)
    print(text)
    write_page(args.out, text)


if __name__ == "__main__":
    main()
