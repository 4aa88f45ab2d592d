"""The online ceiling of ``ConversationPM`` (issue 31, items 1, 2 and 5 for the conversation world): the online planner
(:class:`~membudget.teachers.conversation_online.ConversationPlanner`: posterior conversations given what the agent
has seen, hindsight optimisation over them) bracketed with the informed optimum
(:class:`~membudget.teachers.conversation.InformedOptimum`), against BudgetPM's gates.

The planner is an online policy: its score bounds the online optimum from below. The informed optimum knows every
message's kind and similarity and learns only the verifier's answers and the base responses as it replies; its
expected score bounds every online policy's from above. The hindsight optimum, which also reads the answers, is
above both.

The study:

- chooses the planner's ``K`` (posterior conversations per decision, ``4 K`` particles) on the validation
  conversations 3000-3059 (used by nothing else) at ConversationPM-v1 B60: the ``K`` of :attr:`CeilingConfig.curve`
  with the best mean score (ties: the smaller);
- plays the planner at that ``K`` on the analysis conversations 4000-4029 at v1 B20 / B40 / B60 / B80 and v0 B20 /
  B40 (v0: its own world and false-fire penalty 1), and on conversations 5000-5299 at :attr:`CeilingConfig.large`,
  beside Static, Pacing and the Due gate (fitted on the development conversations 2000-2011 of that world, as
  ``python -m membudget.evaluate conversation`` fits them), the informed optimum's expected score and the hindsight
  optimum's; paired 95% percentile-bootstrap intervals over the conversations;
- reports the planner's CPU seconds per conversation;
- fits students of the planner and of the hindsight optimum (the conversation study's BC, one class and fit, on
  the same conversations 2000..2000+n-1, each teacher labelling its own rollouts) at v1 B20 / B60 and v0 B20 and
  compares them on conversations 5000-5299 (the imitation gap, measured);
- runs the conversation study's PPO from the planner's students at v1 B60 and B20 (distil, then RL).

Planner seed = the conversation's number. Every (setting, block of 10 conversations) is one task of the execution
backend, checkpointed under ``--checkpoint-dir`` (default ``runs/online-ceiling/cache``).
``--quick``: two conversations per set, K = 1 and 2, one setting per world, one student fit per teacher on two
conversations, a short PPO run from the planner's (a check that the study runs).

``python -m membudget.evaluate conversation-ceiling [--quick] [--out docs/conversation_ceiling.md]``
"""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from membudget.agents.imitation import Demonstrations, defaults, dp_demonstrations, fit_net
from membudget.agents.online_imitation import conversation_demonstrations
from membudget.agents.per_resource import StudentPolicy
from membudget.agents.tasks import CONVERSATION
from membudget.envs.conversation import (DEV_SEEDS, WORLD_V0, ConversationConfig, budget_levels,
                                         generate_conversation)
from membudget.envs.conversation.rollout import rollout
from membudget.agents.ppo import train_ppo
from membudget.studies.conversation import (CALIBRATED, PPO_SETTINGS, QUICK_PPO_STEPS, fit_gates_only, policy)
from membudget.studies.online_ceiling import page_study_main, paired_ci, seed_mean
from membudget.teachers.conversation import ConversationOptimum, InformedOptimum, build_conversation_dataset
from membudget.teachers import conversation_online
from membudget.teachers.conversation_online import ConversationPlanner

WORLDS = {"v1": (ConversationConfig(), 0.0), "v0": (WORLD_V0, 1.0)}
"""World name -> (world, false-fire penalty) of ``ConversationPM-v1`` / ``-v0``."""
GATE_ROWS = ("Static", "Pacing", "DueGate")
BLOCK = 10


@dataclasses.dataclass(frozen=True)
class CeilingConfig:
    validation: tuple = (3000, 3060)
    """Conversations ``[lo, hi)`` on which ``K`` is chosen."""
    choose: tuple = ("v1", "B60")
    curve: tuple = (1, 4, 16, 64)
    """The ``K`` compared on the validation conversations."""
    analysis: tuple = (4000, 4030)
    settings: tuple = (("v1", "B20"), ("v1", "B40"), ("v1", "B60"), ("v1", "B80"), ("v0", "B20"), ("v0", "B40"))
    large_block: tuple = (5000, 5300)
    large: tuple = (("v1", "B20"), ("v1", "B60"), ("v0", "B20"))
    students: tuple = (("v1", "B20", 12), ("v1", "B60", 12), ("v1", "B20", 200), ("v1", "B60", 200),
                       ("v0", "B20", 200))
    """``(world, budget, n)``: students of the planner and of the hindsight optimum fitted on the teachers' own
    rollouts of conversations 2000..2000+n-1 (12: the development conversations), evaluated on
    :attr:`large_block`."""
    learner_seeds: tuple = (0, 1, 2)
    finetune: tuple = (("B60", 200), ("B20", 200))
    """``(budget, n)`` of :attr:`students` on v1 whose planner's students PPO starts from (the conversation study's
    PPO settings, ``PPO_SETTINGS``; PPO seed = the learner seed; the validation conversations 3000-3009 pick the
    kept actor)."""
    ppo_steps: int = PPO_SETTINGS.total_timesteps
    dagger: tuple = (("v1", "B20", 200),)
    """``(world, budget, n)`` of :attr:`students` run one DAgger round further for both teachers: each student of
    the table plays the same conversations, its teacher labels the states it reaches, and the same fit is run on
    all the labels."""


FULL = CeilingConfig()
QUICK = CeilingConfig(validation=(3000, 3002), curve=(1, 2), analysis=(4000, 4002), settings=(("v1", "B60"),
                      ("v0", "B20")), large_block=(5000, 5002), large=(("v1", "B60"),),
                      students=(("v1", "B60", 2),), learner_seeds=(0,), finetune=(("B60", 2),),
                      ppo_steps=QUICK_PPO_STEPS, dagger=(("v1", "B60", 2),))
TEACHERS = ("planner", "hindsight optimum")


def planner_task(item) -> dict:
    """``(world name, budget level, K, first, last)`` -> the planner's score, queries and CPU seconds per
    conversation of ``first..last-1`` (seed = the conversation), and its retries / fallbacks."""
    name, level, k, lo, hi = item
    world, penalty = WORLDS[name]
    budget = budget_levels(world)[level]
    out = {"score": [], "queries": [], "cpu": [], "retries": 0, "fallbacks": 0}
    for seed in range(lo, hi):
        start = time.process_time()
        planner = ConversationPlanner(budget=budget, false_fire_penalty=penalty, world=world, n_samples=k,
                                      seed=seed).fit()
        played = planner.solve(generate_conversation(seed, world))
        out["cpu"].append(time.process_time() - start)
        out["score"].append(played.score)
        out["queries"].append(played.cost)
        out["retries"] += planner.retries_
        out["fallbacks"] += planner.fallbacks_
    return out


def reference_task(gates, item) -> dict:
    """``(world name, budget level, row, first, last)`` -> per-conversation score and queries of a gate of
    :data:`GATE_ROWS` (fitted on that world's development conversations), the informed optimum (its expected
    score) or the hindsight optimum."""
    name, level, row, lo, hi = item
    world, penalty = WORLDS[name]
    budget = budget_levels(world)[level]
    seeds = range(lo, hi)
    if row == "InformedOptimum":
        io = InformedOptimum(budget=budget, false_fire_penalty=penalty, world=world)
        return {"score": [io.value(generate_conversation(s, world)) for s in seeds], "queries": [np.nan] * len(seeds)}
    if row == "HindsightOptimum":
        played = [ConversationOptimum(budget=budget, false_fire_penalty=penalty).solve(generate_conversation(s, world))
                  for s in seeds]
        return {"score": [p.score for p in played], "queries": [p.cost for p in played]}
    p, kw = policy(row, level, gates[name], world=world)
    m = rollout(p, list(seeds), **dict(kw, false_fire_penalty=penalty))
    return {"score": m["score"].tolist(), "queries": m["queries"].tolist()}


def dp_seconds_task(item) -> list:
    """``(world name, budget level, first, last)`` -> the hindsight optimum's CPU seconds per conversation (its solve
    and the replay of its schedule), to put the planner's time beside."""
    name, level, lo, hi = item
    world, penalty = WORLDS[name]
    teacher = ConversationOptimum(budget=budget_levels(world)[level], false_fire_penalty=penalty)
    out = []
    for seed in range(lo, hi):
        conv = generate_conversation(seed, world)
        start = time.process_time()
        teacher.solve(conv)
        out.append(time.process_time() - start)
    return out


def demonstrations_task(item):
    """``(teacher, world name, budget level, n)`` -> that teacher's :class:`~membudget.agents.imitation.
    Demonstrations` on its own rollouts of conversations 2000..2000+n-1 of that world (the planner at its default
    K)."""
    teacher, name, level, n = item
    world, penalty = WORLDS[name]
    seeds = range(2000, 2000 + n)
    if teacher == "planner":
        return conversation_demonstrations(seeds, level, world=world, false_fire_penalty=penalty)
    return dp_demonstrations(seeds, level, task=CONVERSATION, world=world, false_fire_penalty=penalty)


def _student_net(demos, seed):
    """The conversation study's BC (a :class:`PerResourceNet` with :data:`~membudget.agents.configs.
    CONVERSATION_DEFAULTS`, uncalibrated) fitted to ``demos``, one torch thread."""
    import torch

    torch.set_num_threads(1)
    settings = defaults(CONVERSATION)
    return fit_net(demos, seed=seed, hidden=settings.hidden, context=settings.context, epochs=settings.epochs,
                   lr=settings.lr, batch=settings.batch, standardize=settings.standardize)


def _scores(policy, name, level, lo, hi) -> dict:
    world, penalty = WORLDS[name]
    m = CONVERSATION.rollout(policy, range(lo, hi), budget=level, action_mode="scores", world=world,
                             false_fire_penalty=penalty)
    return {"score": m["score"].tolist(), "queries": m["queries"].tolist()}


def student_task(item) -> dict:
    """``(demonstrations, world name, budget level, learner seed, first, last)`` -> the student's score and queries
    per conversation of ``first..last-1`` (:func:`_student_net`)."""
    demos, name, level, seed, lo, hi = item
    return _scores(StudentPolicy(_student_net(demos, seed)), name, level, lo, hi)


def dagger_task(item) -> dict:
    """``(demonstrations, teacher, world name, budget level, learner seed, n, first, last)`` -> one DAgger round:
    the student of :func:`_student_net` plays conversations 2000..2000+n-1, ``teacher`` labels the states it
    reaches (:func:`~membudget.agents.online_imitation.conversation_demonstrations`), the same fit on all the
    labels; its score and queries per conversation of ``first..last-1`` and the number of states."""
    demos, teacher, name, level, seed, n, lo, hi = item
    world, penalty = WORLDS[name]
    visited = conversation_demonstrations(range(2000, 2000 + n), level, world=world, false_fire_penalty=penalty,
                                          policy=StudentPolicy(_student_net(demos, seed)), teacher=teacher)
    both = Demonstrations.concatenate([demos, visited])
    return {**_scores(StudentPolicy(_student_net(both, seed)), name, level, lo, hi), "states": len(both)}


def finetune_task(item) -> dict:
    """``(demonstrations, budget level, learner seed, PPO steps, first, last)`` -> PPO on ConversationPM-v1 (the
    conversation study's settings for that many steps, PPO seed = the learner seed) started from the student of
    :func:`_student_net`: its score and queries per conversation of ``first..last-1``, the env steps of the kept
    actor and the validation curve."""
    demos, level, seed, steps, lo, hi = item
    settings = PPO_SETTINGS if steps == PPO_SETTINGS.total_timesteps else dataclasses.replace(
        PPO_SETTINGS, total_timesteps=steps, n_envs=16, eval_every=0, keep_best=False)
    policy, rows = train_ppo(level, settings, seed=seed, task=CONVERSATION, init=_student_net(demos, seed))
    return {**_scores(policy, "v1", level, lo, hi), "kept": int(policy.config["selected_env_steps"]),
            "curve": [(int(r["env_steps"]), float(r[f"val_{CONVERSATION.quality}"])) for r in rows]}


def _blocks(lo, hi):
    return [(a, min(a + BLOCK, hi)) for a in range(lo, hi, BLOCK)]


def _joined(parts) -> dict:
    out = {k: np.concatenate([np.asarray(p[k], dtype=float) for p in parts]) for k in ("score", "queries")}
    if "cpu" in parts[0]:
        out["cpu"] = np.concatenate([p["cpu"] for p in parts])
        out["retries"] = sum(p["retries"] for p in parts)
        out["fallbacks"] = sum(p["fallbacks"] for p in parts)
    return out


def measure(cfg: CeilingConfig, progress=print, executor=None) -> dict:
    run = executor.map

    def planner(name, level, k, span):
        items = [(name, level, k, a, b) for a, b in _blocks(*span)]
        return _joined(run(planner_task, items))

    names = sorted({n for n, _ in cfg.settings + cfg.large} | {cfg.choose[0]})
    gates = {}
    for name in names:
        progress(f"fitting BudgetPM's gates on the development conversations of ConversationPM-{name}")
        world, penalty = WORLDS[name]
        data = build_conversation_dataset(DEV_SEEDS, CALIBRATED, world=world, false_fire_penalty=penalty)
        gates[name] = fit_gates_only(data, budget_levels(world))

    def references(name, level, span):
        rows = GATE_ROWS + ("InformedOptimum", "HindsightOptimum")
        items = [(name, level, row, a, b) for row in rows for a, b in _blocks(*span)]
        parts = run(functools.partial(reference_task, gates), items)
        n = len(_blocks(*span))
        return {row: _joined(parts[i * n:(i + 1) * n]) for i, row in enumerate(rows)}

    out = {"curve": {}, "settings": {}, "large": {}, "students": {}, "large_block": cfg.large_block}
    progress(f"the planner's curve in K on conversations {cfg.validation[0]}-{cfg.validation[1] - 1}")
    for k in cfg.curve:
        out["curve"][k] = planner(*cfg.choose, k, cfg.validation)
    out["curve_refs"] = references(*cfg.choose, cfg.validation)
    chosen = max(cfg.curve, key=lambda k: (round(float(out["curve"][k]["score"].mean()), 12), -k))
    out["chosen"] = chosen
    for key, span, store in ((cfg.settings, cfg.analysis, out["settings"]), (cfg.large, cfg.large_block, out["large"])):
        for name, level in key:
            progress(f"ConversationPM-{name} {level} on conversations {span[0]}-{span[1] - 1}")
            store[(name, level)] = {"Planner": planner(name, level, chosen, span), **references(name, level, span)}
    out["dp_cpu"] = np.concatenate(run(dp_seconds_task, [(name, level, a, b) for name, level in cfg.large
                                                          for a, b in _blocks(*cfg.large_block)]))
    if chosen != conversation_online.DEFAULT_SAMPLES:
        progress(f"note: the students' planner runs at its default K = {conversation_online.DEFAULT_SAMPLES}, not "
                 f"the K = {chosen} this run's curve chose (the default is the full study's choice)")
    lo, hi = cfg.large_block
    k = len(cfg.learner_seeds)
    for name, level, n in cfg.students:
        progress(f"students of the planner and of the hindsight optimum at {name} {level} ({n} conversations)")
        demos = run(demonstrations_task, [(teacher, name, level, n) for teacher in TEACHERS])
        fitted = run(student_task, [(d, name, level, seed, lo, hi) for d in demos for seed in cfg.learner_seeds])
        out["students"][(name, level, n)] = {
            teacher: {"states": len(d), "seeds": [{x: np.asarray(f[x], dtype=float) for x in f}
                                                  for f in fitted[i * k:(i + 1) * k]]}
            for i, (teacher, d) in enumerate(zip(TEACHERS, demos))}
        if (name, level, n) in cfg.dagger:
            progress(f"one DAgger round for both teachers' students at {name} {level} ({n} conversations)")
            rounds = run(dagger_task, [(d, teacher, name, level, seed, n, lo, hi) for teacher, d in zip(TEACHERS, demos)
                                       for seed in cfg.learner_seeds])
            out.setdefault("dagger", {})[(name, level, n)] = {
                teacher: rounds[i * k:(i + 1) * k] for i, teacher in enumerate(TEACHERS)}
        if name == "v1" and (level, n) in cfg.finetune:
            progress(f"PPO from the planner's students at v1 {level} ({n} conversations)")
            out.setdefault("finetune", {})[(level, n)] = run(finetune_task, [
                (demos[0], level, seed, cfg.ppo_steps, lo, hi) for seed in cfg.learner_seeds])
    return out


def _bracket_table(rows: dict, cfg) -> list:
    lines = ["| world | budget | Static | Pacing | Due gate | planner | planner - best gate | planner queries | "
             "informed optimum (expected) | informed - planner | hindsight optimum | "
             "planner CPU s per conversation (median) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (name, level), r in rows.items():
        mean = {row: float(np.mean(v["score"])) for row, v in r.items()}
        best = _best_gate(r)
        p = r["Planner"]["score"]
        lines.append(f"| {name} | {level} | {mean['Static']:.4f} | {mean['Pacing']:.4f} | {mean['DueGate']:.4f} | "
                     f"{mean['Planner']:.4f} | {paired_ci(p - r[best]['score'])[0]} ({best}) | "
                     f"{np.mean(r['Planner']['queries']):.2f} | {mean['InformedOptimum']:.4f} | "
                     f"{paired_ci(r['InformedOptimum']['score'] - p)[0]} | {mean['HindsightOptimum']:.4f} | "
                     f"{np.median(r['Planner']['cpu']):.2f} |")
    return lines


def render(cfg: CeilingConfig, res: dict, command: str) -> str:
    import torch

    v = cfg.validation
    refs = res["curve_refs"]
    chosen = res["chosen"]
    static = refs["Static"]["score"]
    lines = ["# The online ceiling of ConversationPM: the planner and the informed optimum", "",
             f"Generated by `{command}` (tasks checkpointed under `runs/online-ceiling/cache` by default). Module: "
             "`membudget.studies.conversation_ceiling`. CPU: "
             f"`torch.backends.cpu.get_cpu_capability()` = {torch.backends.cpu.get_cpu_capability()}.", "",
             "The online planner (`teachers.conversation_online.ConversationPlanner`) decides from what the agent "
             "has seen: the observations' GoodAI features of every message so far, and its own calls.", "",
             "- At every message it draws K conversations from the posterior (`ConversationPosterior`: sequential "
             "importance sampling over the generator's own draws, with exact weights).",
             "- It values each draw with the informed optimum's dynamic program from that message on, and takes the "
             "first action with the best mean value. This is hindsight optimisation over the messages' kinds, with "
             "an exact expectation over the verifier's answers and the base responses.",
             "- It is an online policy, so its score is a lower bound on the online optimum.", "",
             "The informed optimum knows every message's kind and learns the rest as it replies. Its expected score "
             "is an upper bound on every online policy's.", "",
             "The planner's and the gates' scores are realised on each conversation. The informed optimum's is its "
             "expectation over the verifier's answers and base responses given the conversation. On a block whose "
             "answers drew worse than the world's rates, realised scores lie lower. Planner seed = the "
             "conversation.", "",
             f"## The planner's curve in K (validation conversations {v[0]}-{v[1] - 1}, ConversationPM-"
             f"{cfg.choose[0]} {cfg.choose[1]})", "",
             f"Static {static.mean():.4f}, Pacing {refs['Pacing']['score'].mean():.4f}, Due gate "
             f"{refs['DueGate']['score'].mean():.4f}, informed optimum {refs['InformedOptimum']['score'].mean():.4f} "
             f"(expected), hindsight optimum {refs['HindsightOptimum']['score'].mean():.4f} on these "
             f"{static.size} conversations. The K with the best mean score is chosen (ties: the smaller): "
             f"**K = {chosen}** ({4 * chosen} particles).", "",
             "| K | particles | score | vs Static | vs the chosen K | queries | CPU s per conversation (median) | "
             "decisions sampled again / without a draw |",
             "|---|---|---|---|---|---|---|---|"]
    for k, r in res["curve"].items():
        vs_chosen = "" if k == chosen else paired_ci(r["score"] - res["curve"][chosen]["score"])[0]
        lines.append(f"| {k} | {4 * k} | {r['score'].mean():.4f} | {paired_ci(r['score'] - static)[0]} | "
                     f"{vs_chosen} | {r['queries'].mean():.2f} | {np.median(r['cpu']):.2f} | "
                     f"{r['retries']} / {r['fallbacks']} |")
    a = cfg.analysis
    lines += ["", f"## The bracket on the analysis conversations {a[0]}-{a[1] - 1}", "",
              "Gates fitted on the development conversations 2000-2011 of each world (as the conversation study "
              "fits them); v0 with its false-fire penalty 1. Paired 95% percentile-bootstrap intervals over the "
              "conversations; \"best gate\": the gate with the best mean on this block.", ""]
    lines += _bracket_table(res["settings"], cfg)
    lb = cfg.large_block
    lines += ["", f"## The bracket on conversations {lb[0]}-{lb[1] - 1}", "",
              f"{lb[1] - lb[0]} conversations of the frozen worlds (the conversation study's `--gates-only` page "
              "of v1 on this block: docs/conversation_5000.md), the same policies and intervals.", ""]
    lines += _bracket_table(res["large"], cfg)
    lines += ["", f"## Students of the planner and of the hindsight optimum (conversations {lb[0]}-{lb[1] - 1})", "",
              "One class and fit (the conversation study's BC: `PerResourceNet`, `CONVERSATION_DEFAULTS`, "
              "uncalibrated) on the same n conversations 2000..2000+n-1 of the world, labelled by the planner at K = "
              f"{conversation_online.DEFAULT_SAMPLES} or by the hindsight optimum on each teacher's own rollouts. "
              f"Learner seeds {', '.join(map(str, cfg.learner_seeds))}; a student's score per conversation is the "
              "mean over the seeds, paired over the conversations. The gates and the planner are the bracket's "
              "rows on the same conversations (blank where the bracket has no such row).", "",
              "| world | budget | n | states (planner's / DP's) | student of the planner | student of the DP | "
              "planner's - DP's | planner's - best gate | planner - planner's student | per seed (planner's / DP's) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for (name, level, n), r in res["students"].items():
        mean = _student_means(r)
        ref = res["large"].get((name, level))
        best = _vs_best_gate(mean["planner"], ref)
        gap = "" if ref is None else paired_ci(ref["Planner"]["score"] - mean["planner"])[0]
        seeds = "; ".join(f"{np.mean(a['score']):.4f} / {np.mean(b['score']):.4f}"
                          for a, b in zip(r["planner"]["seeds"], r["hindsight optimum"]["seeds"]))
        lines.append(f"| {name} | {level} | {n} | {r['planner']['states']} / {r['hindsight optimum']['states']} | "
                     f"{mean['planner'].mean():.4f} | {mean['hindsight optimum'].mean():.4f} | "
                     f"{paired_ci(mean['planner'] - mean['hindsight optimum'])[0]} | {best} | {gap} | {seeds} |")
    if res.get("dagger"):
        lines += ["", "One DAgger round further (each student of the table plays the same n conversations, its teacher "
                  "labels the states it reaches, the same fit on all the labels):", "",
                  "| world | budget | n | states after the round | DAgger student of the planner | of the DP | "
                  "planner's - DP's | planner's - its BC student | planner's - best gate |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for (name, level, n), r in res["dagger"].items():
            mean = {t: seed_mean(r[t], "score") for t in TEACHERS}
            bc = _student_means(res["students"][(name, level, n)])["planner"]
            best = _vs_best_gate(mean["planner"], res["large"].get((name, level)))
            lines.append(f"| {name} | {level} | {n} | {r['planner'][0]['states']} | {mean['planner'].mean():.4f} | "
                         f"{mean['hindsight optimum'].mean():.4f} | "
                         f"{paired_ci(mean['planner'] - mean['hindsight optimum'])[0]} | "
                         f"{paired_ci(mean['planner'] - bc)[0]} | {best} |")
    if res.get("finetune"):
        lines += ["", f"## PPO started from the planner's students (ConversationPM-v1, conversations "
                  f"{lb[0]}-{lb[1] - 1})", "",
                  f"The conversation study's PPO (`PPO_SETTINGS`, {cfg.ppo_steps:,} env steps) started from each "
                  "planner's student of the table above (PPO seed = its learner seed); the validation conversations "
                  "3000-3009 pick the kept actor (the start included). Scores per conversation averaged over the "
                  "seeds, paired over the conversations.", "",
                  "| budget | n | planner's student | PPO | PPO - student | PPO - planner | PPO - best gate | "
                  "per seed | kept at env steps |", "|---|---|---|---|---|---|---|---|---|"]
        for (level, n), runs in res["finetune"].items():
            student = _student_means(res["students"][("v1", level, n)])["planner"]
            ppo = seed_mean(runs, "score")
            ref = res["large"].get(("v1", level))
            vs_ref = ("" if ref is None else paired_ci(ppo - ref["Planner"]["score"])[0], _vs_best_gate(ppo, ref))
            per_seed = "; ".join(f"{np.mean(r['score']):.4f}" for r in runs)
            kept = ", ".join(f"{r['kept']:,}" for r in runs)
            lines.append(f"| {level} | {n} | {student.mean():.4f} | {ppo.mean():.4f} | {paired_ci(ppo - student)[0]} | "
                         f"{vs_ref[0]} | {vs_ref[1]} | {per_seed} | {kept} |")
    lines += ["", "## Reading", ""] + _reading(res)
    return "\n".join(lines) + "\n"


def _student_means(r) -> dict:
    """Per teacher, its students' score per conversation averaged over the learner seeds."""
    return {t: seed_mean(r[t]["seeds"], "score") for t in TEACHERS}


def _best_gate(rows) -> str:
    """The gate of :data:`GATE_ROWS` with the best mean score among ``rows`` (one setting's references)."""
    return max(GATE_ROWS, key=lambda g: float(np.mean(rows[g]["score"])))


def _vs_best_gate(x, rows) -> str:
    """``x`` minus the best gate of ``rows``, paired, with the gate's name ("" without references)."""
    if rows is None:
        return ""
    g = _best_gate(rows)
    return f"{paired_ci(x - rows[g]['score'])[0]} ({g})"


def _sign(lo, hi) -> str:
    return "above" if lo > 0 else ("below" if hi < 0 else "the interval includes 0")


def _reading(res) -> list:
    out = []
    for (name, level), r in res["large"].items():
        p, io = r["Planner"]["score"], r["InformedOptimum"]["score"]
        lo, hi = res["large_block"]
        out.append(f"- The online optimum of ConversationPM-{name} at {level} (conversations {lo}-{hi - 1}): between "
                   f"the planner's {p.mean():.4f} and the informed optimum's {io.mean():.4f}, "
                   + (f"a bracket {io.mean() - p.mean():.4f} wide" if io.mean() >= p.mean() else
                      f"the planner above the informed optimum by {p.mean() - io.mean():.4f} on these {p.size} "
                      f"conversations (the optimum is an expectation over the draws, the planner's score one draw)")
                   + f" ({paired_ci(io - p)[0]}).")
    for (name, level, n), r in res["students"].items():
        mean = _student_means(r)
        text, lo, hi = paired_ci(mean["planner"] - mean["hindsight optimum"])
        out.append(f"- Students at {name} {level} from {n} conversations: the planner's minus the hindsight "
                   f"optimum's {text} ({_sign(lo, hi)}).")
    for (name, level, n), r in res.get("dagger", {}).items():
        text, lo, hi = paired_ci(seed_mean(r["planner"], "score") - seed_mean(r["hindsight optimum"], "score"))
        out.append(f"- After one DAgger round at {name} {level} ({n} conversations): the planner's student minus the "
                   f"hindsight optimum's {text} ({_sign(lo, hi)}).")
    for (level, n), runs in res.get("finetune", {}).items():
        ref = res["large"].get(("v1", level))
        if ref is None:
            continue
        ppo = seed_mean(runs, "score")
        best = _best_gate(ref)
        text, lo, hi = paired_ci(ppo - ref[best]["score"])
        out.append(f"- PPO from the planner's students at v1 {level} ({n} conversations): {ppo.mean():.4f}, minus the "
                   f"best gate ({best}) {text} ({_sign(lo, hi)}); minus the planner "
                   f"{paired_ci(ppo - ref['Planner']['score'])[0]}.")
    cpu = np.concatenate([r["Planner"]["cpu"] for rows in (res["settings"], res["large"]) for r in rows.values()])
    dp = float(np.median(res["dp_cpu"]))
    out.append(f"- The planner at K = {res['chosen']}: a median {np.median(cpu):.2f} CPU s per conversation over "
               f"every setting's conversations, so its labels of 1,000 conversations take "
               f"{1000 * np.median(cpu) / 2 / 60:.1f} min on 2 cores; {np.median(cpu) / dp:.0f} times the hindsight "
               f"optimum's {1000 * dp:.1f} ms (its solve and replay, median over the conversations "
               f"{'-'.join(map(str, (res['large_block'][0], res['large_block'][1] - 1)))} of the large settings).")
    for block, rows in (("analysis", res["settings"]), ("large", res["large"])):
        for (name, level), r in rows.items():
            p = r["Planner"]["score"]
            best = _best_gate(r)
            text, lo, _ = paired_ci(p - r[best]["score"])
            io = float(np.mean(r["InformedOptimum"]["score"]))
            share = (p.mean() - np.mean(r[best]["score"])) / max(io - np.mean(r[best]["score"]), 1e-12)
            verdict = "above it with an interval excluding 0" if lo > 0 else "not above it with an interval excluding 0"
            out.append(f"- {block} block, {name} {level}: the planner {p.mean():.4f} against the best gate ({best}) "
                       f"{text}, {verdict}; it covers {share:.0%} of the distance from that gate to the informed "
                       f"optimum's expected {io:.4f}.")
    return out


def main(argv=None):
    return page_study_main(argv, study="conversation-ceiling", page="conversation_ceiling.md", doc=__doc__,
                           quick_help="two conversations per set, K = 1 and 2, one setting per world, one student "
                                      "fit, DAgger round and short PPO run",
                           configs=(FULL, QUICK), measure=measure, render=render)
