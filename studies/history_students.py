"""Students that see their history (issue 31, item 4): BC on the online planner's labels of ``PMWeek-v0`` with a
history-aware input (:class:`~membudget.agents.history.History`: each resource's last steps and decayed means)
against the same fit on the current observation alone, and both against BudgetPM's Sequential gate.

The planner (:class:`~membudget.teachers.online.HindsightPlanner` at the online-ceiling study's chosen setting)
decides from the whole history the agent has seen; a student of one observation can imitate it only as far as that
observation summarises the history. The study:

- chooses the history on the validation weeks 4000-4029 at :attr:`HistoryConfig.choose_budget` (one learner seed,
  :attr:`HistoryConfig.choose_weeks` development weeks of labels): the candidate of :attr:`HistoryConfig.grid`
  with the best mean Set F1 there;
- fits that history's student and the no-history student (the same :class:`PerResourceNet`, the package's BC
  settings :data:`~membudget.agents.configs.DEFAULTS`, uncalibrated) on the same development weeks, learner seeds
  0, 1, 2, and scores both on the held-out weeks 8000-8029 + 9000-9029, paired over the weeks (a student's Set F1
  per week: the mean over the seeds), against Sequential there;
- reports milliseconds per decision (one observation, one core).

The planner's labels are the online-ceiling study's tasks (:func:`~membudget.studies.online_ceiling.planner_labels`,
each development week one task) and are loaded from its checkpoint folder, ``runs/online-ceiling/cache`` by default
(``--checkpoint-dir``), where this study's tasks are checkpointed too. ``--quick``: two development weeks, two
weeks per set, one seed (a check that the study runs).

``python -m membudget.evaluate history-students [--quick] [--out docs/history_students.md]``
"""

from __future__ import annotations

import dataclasses

import numpy as np

from membudget.studies.protocol import seed_ranges
from membudget.studies.rl_vs_distillation.configs import BENCH_FULL, BENCH_QUICK
from membudget.studies.online_ceiling import (CACHE, FULL as CEILING, curve_lines, page_study_main, paired_ci,
                                              planner_labels, ppo_curve, references, scores, seed_mean, timed_week)


NO_HISTORY = (1, ())
"""``(frames, decays)`` of the current observation alone: the online-ceiling study's student."""


@dataclasses.dataclass(frozen=True)
class HistoryConfig:
    validation: tuple = CEILING.validation
    held_out: tuple = CEILING.held_out
    planner: tuple = (32, 64)
    """``(K, particles)`` of the planner whose labels are fitted (the online-ceiling study's choice)."""
    grid: tuple = ((2, ()), (4, ()), (8, ()), (1, (0.9,)), (4, (0.9,)), (4, (0.5, 0.9, 0.98)))
    """History candidates ``(frames, decays)``."""
    choose_budget: str = "B10"
    choose_weeks: int = 200
    runs: tuple = (("B10", 200), ("B5", 200), ("B20", 200), ("B10", 400))
    """``(budget, n)``: both students fitted on development weeks 2000..2000+n-1 at ``budget``."""
    learner_seeds: tuple = (0, 1, 2)
    dagger_seeds: tuple = (0, 1, 2)
    """One online-DAgger round (:func:`history_dagger`) for the history student of these learner seeds of the first
    run: the planner labels the states the BC student reaches on the same development weeks."""
    finetune_seeds: tuple = (0, 1, 2)
    """PPO (:attr:`finetune_ppo`, PPO seed = the learner seed; the validation weeks pick the kept actor) started from
    the history student of these learner seeds of the first run, through
    :class:`~membudget.agents.history.HistoryTask`."""
    finetune_ppo: object = BENCH_FULL["finetune"]
    """The fair comparison's distil-then-RL settings (its DAgger→PPO's)."""
    gru: tuple = (64, 30)
    """``(hidden, epochs)`` of the learned-recurrence student (:func:`~membudget.agents.history.fit_gru_student`,
    its other settings the function's defaults), fitted for the learner seeds; ``()``: none."""
    gru_runs: tuple = (("B10", 200), ("B5", 200), ("B20", 200))
    """The runs (of :attr:`runs`, the first first: its student is timed) the learned-recurrence student is fitted
    for."""
    gru_dagger_seeds: tuple = (0, 1, 2)
    """One online-DAgger round for the learned-recurrence student of these learner seeds of the first of
    :attr:`gru_runs` (:func:`~membudget.agents.online_imitation.fit_online_gru_dagger`'s round: the cell and the
    network refitted together)."""
    gru_finetune_seeds: tuple = (0, 1, 2)
    """PPO (:attr:`finetune_ppo`) started from the learned-recurrence student of these learner seeds of the first of
    :attr:`gru_runs`, its cell frozen (PPO trains the network reading the cell's state)."""
    gru_finetune_lambdas: tuple = (0.95, 1.0)
    """The GAE lambdas of those PPO runs (:attr:`finetune_ppo`'s otherwise): its 0.95 and 1.0, Monte Carlo advantages
    (on the validation weeks PPO from the history student fell below its start with lambda 0.95 at every setting
    tried and stayed level with 1.0: docs/online_teacher.md)."""


FULL = HistoryConfig()
QUICK = HistoryConfig(validation=(4000, 4001), held_out=(8000, 9000), planner=(2, 8), grid=((2, ()), (1, (0.9,))),
                      choose_weeks=2, runs=(("B10", 2),), learner_seeds=(0,), dagger_seeds=(0,), finetune_seeds=(0,),
                      finetune_ppo=BENCH_QUICK["finetune"], gru=(8, 2), gru_runs=(("B10", 2),), gru_dagger_seeds=(0,),
                      gru_finetune_seeds=(0,))


def _fit(episodes, h, seed):
    """The network BC fits with learner seed ``seed`` to the labels ``episodes`` (one Demonstrations per week, in
    step order) over the history ``h = (frames, decays)``."""
    from membudget.agents.history import History, history_demonstrations
    from membudget.agents.imitation import fit_net

    return fit_net(history_demonstrations(episodes, History(*h)), seed=seed)


def history_student(item) -> dict:
    """Task: BC with learner seed ``seed`` on the planner's labels ``episodes`` (one Demonstrations per week, in
    step order) over the history ``(frames, decays)``, scored on ``weeks``
    (:func:`~membudget.studies.online_ceiling.scores`). ``item = (episodes, budget, (frames, decays), seed,
    weeks)``."""
    from membudget.agents.history import History, HistoryStudent

    episodes, budget, h, seed, weeks = item
    return scores(HistoryStudent(_fit(episodes, h, seed), History(*h), config={"method": "bc"}), budget, weeks)


def history_net(item):
    """Task: the network of :func:`history_student` (the same fit). ``item = (episodes, (frames, decays), seed)``."""
    return _fit(*item)


def _visited(student, budget, planner, week):
    """The states ``student`` reaches on its own rollout of ``week``, labelled by the planner at ``planner = (K,
    particles)`` given the student's history (:func:`~membudget.agents.online_imitation.student_episodes`)."""
    from membudget.agents.online_imitation import student_episodes

    k, m = planner
    return student_episodes(student, [week], budget, samples=k, particles=m)[0]


def student_labels(item):
    """Task: the states the history student (network ``net`` over the history ``(frames, decays)``) reaches on its
    own rollout of development week ``week`` at ``budget``, labelled by the planner at ``(K, particles)`` given
    the student's history; one Demonstrations. ``item = (net, (frames, decays), budget, (K, particles), week)``."""
    from membudget.agents.history import History, HistoryStudent

    net, h, budget, planner, week = item
    return _visited(HistoryStudent(net, History(*h)), budget, planner, week)


def history_dagger(item) -> dict:
    """Task: the DAgger round's refit (learner seed ``seed + 1``, as
    :func:`~membudget.agents.online_imitation.fit_online_dagger`) on the planner's labels of its own rollouts
    ``episodes`` and of the BC student's ``visited``, over the history ``(frames, decays)``, scored on ``weeks``;
    with the number of labelled states. ``item = (episodes, visited, budget, (frames, decays), seed, weeks)``."""
    from membudget.agents.history import History, HistoryStudent

    episodes, visited, budget, h, seed, weeks = item
    net = _fit(list(episodes) + list(visited), h, seed + 1)
    out = scores(HistoryStudent(net, History(*h), config={"method": "dagger"}), budget, weeks)
    out["states"] = int(sum(len(e.labels) for e in list(episodes) + list(visited)))
    return out


def history_finetune(item) -> dict:
    """Task: PPO (settings ``ppo``, seed ``seed``; the weeks ``val`` pick the kept actor) started from the history
    student :func:`history_student` fits with learner seed ``seed``, trained through
    :class:`~membudget.agents.history.HistoryTask`, scored on ``weeks``, with the training steps of the kept actor,
    the engine and the validation curve (``(env steps, Set F1 on val)`` at each recorded point, the start first).
    ``item = (episodes, budget, (frames, decays), seed, ppo, val, weeks)``."""
    from membudget.agents.history import History, HistoryTask

    episodes, budget, h, seed, ppo, val, weeks = item
    return _finetune(HistoryTask(History(*h)), _fit(episodes, h, seed), budget, seed, ppo, val, weeks)


def _finetune(task, init, budget, seed, ppo, val, weeks) -> dict:
    """PPO from the network ``init`` through ``task``, scored as :func:`history_finetune` says."""
    from membudget.agents.ppo import train_ppo

    policy, rows = train_ppo(budget, ppo, seed=seed, task=task, init=init, eval_seeds=list(val))
    out = scores(task.deployed(policy), budget, weeks)
    out.update(selected_env_steps=int(policy.config["selected_env_steps"]), engine=policy.config["engine"],
               curve=ppo_curve(rows))
    return out


def decision_speed(item) -> dict:
    """Task: milliseconds per decision of the deployed student (:class:`~membudget.agents.history.HistoryStudent`,
    compiled inference on one observation, its history carried from step to step) fitted as :func:`history_student`
    fits it, over one week's decisions (one core): the median, and the week's Set F1 (its decisions are those of
    the batched rollout). ``item = (episodes, budget, (frames, decays), seed, week)``."""
    from membudget.agents.history import History, HistoryStudent

    episodes, budget, h, seed, week = item
    ms, f1 = timed_week(HistoryStudent(_fit(episodes, h, seed), History(*h)), budget, week)
    return {"ms_per_step": ms, "set_f1": f1}


def gru_student(item) -> dict:
    """Task: the learned-recurrence student (:func:`~membudget.agents.history.fit_gru_student`, learner seed
    ``seed``) on the planner's labels ``episodes``, scored on ``weeks``, with the deployed form's milliseconds per
    decision and Set F1 on ``weeks[0]`` (:func:`~membudget.studies.online_ceiling.timed_week`).
    ``item = (episodes, budget, (hidden, epochs), seed, weeks)``."""
    episodes, budget, gru, seed, weeks = item
    student = gru_fit((episodes, gru, seed))
    out = scores(student, budget, weeks)
    out["ms_per_step"], out["timed_set_f1"] = timed_week(student, budget, weeks[0])
    return out


def gru_fit(item):
    """Task: the learned-recurrence student :func:`gru_student` fits (the same fit). ``item = (episodes, (hidden,
    epochs), seed)``."""
    from membudget.agents.history import fit_gru_student

    episodes, (hidden, epochs), seed = item
    return fit_gru_student(episodes, hidden=hidden, epochs=epochs, seed=seed)


def gru_labels(item):
    """Task: the states the learned-recurrence student ``student`` reaches on its own rollout of development week
    ``week``, labelled by the planner given its history; one Demonstrations. ``item = (student, budget, (K,
    particles), week)``."""
    return _visited(*item)


def gru_dagger(item) -> dict:
    """Task: the DAgger round's refit of the learned-recurrence student, cell and network together (learner seed
    ``seed + 1``, as :func:`~membudget.agents.online_imitation.fit_online_gru_dagger`), on the planner's labels of
    its own rollouts ``episodes`` and of the BC student's ``visited``, scored on ``weeks``; with the number of
    labelled states. ``item = (episodes, visited, budget, (hidden, epochs), seed, weeks)``."""
    episodes, visited, budget, gru, seed, weeks = item
    both = list(episodes) + list(visited)
    out = scores(gru_fit((both, gru, seed + 1)), budget, weeks)
    out["states"] = int(sum(len(e.labels) for e in both))
    return out


def gru_finetune(item) -> dict:
    """Task: PPO (settings ``ppo``, seed ``seed``; the weeks ``val`` pick the kept actor) started from the
    learned-recurrence student :func:`gru_student` fits with learner seed ``seed``, through
    :class:`~membudget.agents.history.HistoryTask` over its cell (frozen: PPO trains the network reading the
    cell's state), scored as :func:`history_finetune`. ``item = (episodes, budget, (hidden, epochs), seed, ppo,
    val, weeks)``."""
    from membudget.agents.history import HistoryTask

    episodes, budget, gru, seed, ppo, val, weeks = item
    student = gru_fit((episodes, gru, seed))
    return _finetune(HistoryTask(student.history), student.policy.net, budget, seed, ppo, val, weeks)


def measure(cfg: HistoryConfig, progress=print, executor=None) -> dict:
    run = executor.map

    loaded = {}

    def labels(budget, n):  # each run's labels loaded once, though several parts of the study read them
        if (budget, n) not in loaded:
            progress(f"planner labels at {budget} ({n} development weeks)")
            loaded[(budget, n)] = [x["demos"] for x in run(planner_labels, [(budget, *cfg.planner, w)
                                                                           for w in range(2000, 2000 + n)])]
        return loaded[(budget, n)]

    out = {"validation": {}, "runs": {}}
    episodes = labels(cfg.choose_budget, cfg.choose_weeks)
    for h in (NO_HISTORY, *cfg.grid):
        progress(f"validation: history {h}")
        out["validation"][h] = run(history_student, [(episodes, cfg.choose_budget, h, cfg.learner_seeds[0],
                                                      cfg.validation)])[0]
    out["ref_validation"] = run(references, [(cfg.choose_budget, cfg.validation)])[0]
    chosen = max(cfg.grid, key=lambda h: float(np.mean(out["validation"][h]["set_f1"])))
    out["chosen"] = chosen
    for budget, n in cfg.runs:
        episodes = labels(budget, n)
        progress(f"held-out students at {budget} ({n} weeks)")
        out["runs"][(budget, n)] = {
            h: run(history_student, [(episodes, budget, h, s, cfg.held_out) for s in cfg.learner_seeds])
            for h in (chosen, NO_HISTORY)}
        out["runs"][(budget, n)]["Sequential"] = run(references, [(budget, cfg.held_out)])[0]["Sequential"]
        if (budget, n) == cfg.runs[0]:
            progress(f"milliseconds per decision of the deployed students at {budget} ({n} weeks)")
            out["speed"] = {"run": (budget, n), **dict(zip((chosen, NO_HISTORY), run(decision_speed, [
                (episodes, budget, h, cfg.learner_seeds[0], cfg.held_out[0]) for h in (chosen, NO_HISTORY)])))}
    if cfg.dagger_seeds:
        budget, n = cfg.runs[0]
        episodes = labels(budget, n)
        out["dagger"] = []
        for s in cfg.dagger_seeds:
            progress(f"DAgger for the history student of learner seed {s} at {budget} ({n} weeks)")
            net = run(history_net, [(episodes, chosen, s)])[0]
            visited = run(student_labels, [(net, chosen, budget, cfg.planner, w) for w in range(2000, 2000 + n)])
            out["dagger"].append(run(history_dagger, [(episodes, visited, budget, chosen, s, cfg.held_out)])[0])
    if cfg.gru:
        out["gru"] = {}
        for budget, n in cfg.gru_runs:
            episodes = labels(budget, n)
            progress(f"the learned-recurrence students at {budget} ({n} weeks)")
            out["gru"][(budget, n)] = run(gru_student, [(episodes, budget, cfg.gru, s, cfg.held_out)
                                                        for s in cfg.learner_seeds])
        budget, n = cfg.gru_runs[0]
        episodes = labels(budget, n)
        out["gru_dagger"] = []
        for s in cfg.gru_dagger_seeds:
            progress(f"DAgger for the learned-recurrence student of learner seed {s} at {budget} ({n} weeks)")
            student = run(gru_fit, [(episodes, cfg.gru, s)])[0]
            visited = run(gru_labels, [(student, budget, cfg.planner, w) for w in range(2000, 2000 + n)])
            out["gru_dagger"].append(run(gru_dagger, [(episodes, visited, budget, cfg.gru, s, cfg.held_out)])[0])
        if cfg.gru_finetune_seeds:
            progress(f"PPO from the learned-recurrence students at {budget} ({n} weeks)")
            out["gru_finetune"] = {
                lam: run(gru_finetune, [(episodes, budget, cfg.gru, s, dataclasses.replace(cfg.finetune_ppo,
                                                                                           gae_lambda=lam),
                                         cfg.validation, cfg.held_out) for s in cfg.gru_finetune_seeds])
                for lam in cfg.gru_finetune_lambdas}
    if cfg.finetune_seeds:
        budget, n = cfg.runs[0]
        progress(f"PPO from the history students at {budget} ({n} weeks)")
        episodes = labels(budget, n)
        out["finetune"] = run(history_finetune, [(episodes, budget, chosen, s, cfg.finetune_ppo, cfg.validation,
                                                  cfg.held_out) for s in cfg.finetune_seeds])
    return out


def _name(h) -> str:
    frames, decays = h
    parts = [f"{frames} frame{'s' if frames > 1 else ''}"] + ([f"decays {', '.join(map(str, decays))}"] if decays
                                                              else [])
    return ", ".join(parts)


def render(cfg: HistoryConfig, res: dict, command: str) -> str:
    k, m = cfg.planner
    seeds = ", ".join(map(str, cfg.learner_seeds))
    lines = ["# Students that see their history (PMWeek-v0)", "",
             f"Generated by `{command}` (tasks checkpointed under `{CACHE}` by default, beside the online-ceiling "
             "study's planner labels, which it loads). Module: `membudget.studies.history_students`; the class: "
             "`membudget.agents.history` (`History`, `HistoryStudent`, `HistoryTask`).", "",
             f"Every student is BC (`fit_net`, the package's `DEFAULTS`, uncalibrated) on the online planner's labels "
             f"of its own rollouts of development weeks 2000.. (K = {k}, {m} particles: the online-ceiling study's "
             "setting). The history student's input per resource is its 27 features at the current step, at the "
             "previous frames - 1 steps, and their exponentially decayed means (`History`); the no-history student "
             "reads the current step only (1 frame: the online-ceiling study's student). Same network class "
             "(`PerResourceNet`, per-resource-equivariant), same labels, same settings.", "",
             f"## The history, chosen on the validation weeks {min(cfg.validation)}-{max(cfg.validation)} "
             f"({cfg.choose_budget}, {cfg.choose_weeks} development weeks, learner seed {cfg.learner_seeds[0]})", "",
             f"Sequential {np.mean(res['ref_validation']['Sequential']):.4f} on these weeks. Chosen: "
             f"{_name(res['chosen'])} (the best mean Set F1 among the candidates with history).", "",
             "| history | features per resource | Set F1 | vs Sequential (paired 95% interval) |", "|---|---|---|---|"]
    seq = np.asarray(res["ref_validation"]["Sequential"])
    for h, r in res["validation"].items():
        f1 = np.asarray(r["set_f1"])
        lines.append(f"| {_name(h)} | {27 * (h[0] + len(h[1]))} | {f1.mean():.4f} | {paired_ci(f1 - seq)[0]} |")
    n_held = len(cfg.held_out)
    lines += ["", f"## Held-out weeks ({n_held}: {seed_ranges(cfg.held_out)}), learner seeds {seeds}", "",
              "A student's Set F1 per week is the mean over the learner seeds; paired 95% percentile-bootstrap "
              "intervals over the weeks.", "",
              "| budget | n weeks | Sequential | no history | history | history - no history | history - Sequential "
              "| no history - Sequential | per seed (history / no history) |",
              "|---|---|---|---|---|---|---|---|---|"]
    goals, speed = [], res.get("speed")
    deployed_ms = speed[res["chosen"]]["ms_per_step"] if speed else None
    for (budget, n), r in res["runs"].items():
        seq = np.asarray(r["Sequential"])
        h, o = seed_mean(r[res["chosen"]]), seed_mean(r[NO_HISTORY])
        per_seed = "; ".join(f"{np.mean(a['set_f1']):.4f} / {np.mean(b['set_f1']):.4f}"
                             for a, b in zip(r[res["chosen"]], r[NO_HISTORY]))
        hs, lo, hi = paired_ci(h - seq)
        gh = paired_ci(h - o)
        lines.append(f"| {budget} | {n} | {seq.mean():.4f} | {o.mean():.4f} | {h.mean():.4f} | {gh[0]} | "
                     f"{hs} | {paired_ci(o - seq)[0]} | {per_seed} |")
        goals.append(f"- History beats no history at {budget}, {n} weeks: {gh[0]} — "
                     f"{'met' if gh[1] > 0 else 'not met'}.")
        if budget == "B10":
            met = h.mean() - seq.mean() >= 0.01 and lo > 0 and deployed_ms is not None and deployed_ms <= 0.1
            ms = "not measured" if deployed_ms is None else f"{deployed_ms:.3f} ms"
            goals.append(f"- Deployable allocator >= Sequential + 0.01 with an interval excluding 0 and <= 0.1 ms per "
                         f"decision at B10 ({n} weeks): {hs}, {ms} — {'met' if met else 'not met'}.")
        else:
            goals.append(f"- Deployable allocator >= Sequential at {budget} ({n} weeks): {hs} — "
                         f"{'met' if h.mean() >= seq.mean() else 'not met'}.")
    if speed:
        (budget, n), week = speed["run"], cfg.held_out[0]
        batched = [float(np.asarray(res["runs"][speed["run"]][h][0]["set_f1"])[0]) for h in (res["chosen"], NO_HISTORY)]
        lines += ["", f"Deployed form (`HistoryStudent` on one observation: the history carried from step to step, "
                  f"the network's layers in one compiled call on the candidates' rows; one core), {budget}, {n} weeks, learner "
                  f"seed {cfg.learner_seeds[0]}, the median over week {week}'s decisions: history student "
                  f"{speed[res['chosen']]['ms_per_step']:.3f} ms, no-history student "
                  f"{speed[NO_HISTORY]['ms_per_step']:.3f} ms per decision. Their Set F1 on that week, "
                  f"{speed[res['chosen']]['set_f1']:.4f} and {speed[NO_HISTORY]['set_f1']:.4f}, against "
                  f"{batched[0]:.4f} and {batched[1]:.4f} in the batched rollout (torch) of the table. The goals "
                  "below take the deployed form's time (the same network class at every budget and n)."]
    for more, more_goals in (_dagger_section(cfg, res, deployed_ms), _gru_section(cfg, res),
                             _gru_dagger_section(cfg, res), _finetune_section(cfg, res),
                             _gru_finetune_section(cfg, res)):
        lines += more
        goals += more_goals
    lines += ["", "## The issue's goals, measured", ""] + goals
    return "\n".join(lines) + "\n"


def _dagger_section(cfg: HistoryConfig, res: dict, deployed_ms) -> tuple:
    """The page's lines and goal lines on the DAgger round of the history student (none if it was not run)."""
    if not res.get("dagger"):
        return [], []
    budget, n = cfg.runs[0]
    starts = res["runs"][(budget, n)][res["chosen"]]
    return _dagger_lines(cfg, res["runs"][(budget, n)], (budget, n), cfg.dagger_seeds,
                         [starts[cfg.learner_seeds.index(s)] for s in cfg.dagger_seeds], res["dagger"],
                         "the history student", "BC history student", deployed_ms,
                         "the student is refitted on the planner's labels of its own rollouts and these (learner seed "
                         "+ 1, as `fit_online_dagger`). Same class, history and settings as the BC student.")


def _gru_dagger_section(cfg: HistoryConfig, res: dict) -> tuple:
    """The same for the learned-recurrence student (none if it was not run)."""
    if not res.get("gru_dagger"):
        return [], []
    run = cfg.gru_runs[0]
    starts = res["gru"][run]
    return _dagger_lines(cfg, res["runs"][run], run, cfg.gru_dagger_seeds,
                         [starts[cfg.learner_seeds.index(s)] for s in cfg.gru_dagger_seeds], res["gru_dagger"],
                         "the learned-recurrence student", "BC GRU student", starts[0]["ms_per_step"],
                         "its GRU cell and network are refitted together on the planner's labels of its own rollouts "
                         "and these (learner seed + 1, as `fit_online_gru_dagger`). Same class and settings as the "
                         "BC GRU student.")


def _dagger_lines(cfg, r, run, seeds, starts, dagger, student, start_name, deployed_ms, refit) -> tuple:
    """A DAgger round's table and goals: ``starts`` (the BC students' results) and ``dagger`` (the refits') per
    learner seed of ``seeds``, against Sequential's ``r``."""
    k, m = cfg.planner
    budget, n = run
    seq = np.asarray(r["Sequential"])
    bc = [np.asarray(x["set_f1"]) for x in starts]
    dag = [np.asarray(x["set_f1"]) for x in dagger]
    lines = ["", f"## One DAgger round for {student} ({budget}, {n} weeks, held-out weeks)", "",
             f"The {start_name} of each learner seed plays the same {n} development weeks; the planner "
             f"(K = {k}, {m} particles, seeded by the week) labels every state it reaches, given the student's "
             f"own history (`student_episodes`); {refit}", "",
             f"| learner seed | states | {start_name} | DAgger | DAgger - BC | DAgger - Sequential |",
             "|---|---|---|---|---|---|"]
    for s, b, d, x in zip(seeds, bc, dag, dagger):
        lines.append(f"| {s} | {x['states']:,} | {b.mean():.4f} | {d.mean():.4f} | {paired_ci(d - b)[0]} | "
                     f"{paired_ci(d - seq)[0]} |")
    b, d = np.mean(bc, axis=0), np.mean(dag, axis=0)
    gain, (ds, lo, _) = paired_ci(d - b), paired_ci(d - seq)
    lines.append(f"| mean | | {b.mean():.4f} | {d.mean():.4f} | {gain[0]} | {ds} |")
    met = d.mean() - seq.mean() >= 0.01 and lo > 0 and deployed_ms is not None and deployed_ms <= 0.1
    goals = [f"- Deployable allocator >= Sequential + 0.01 with an interval excluding 0 at {budget} ({student} "
             f"after one DAgger round, {n} weeks; the same class as the BC student's "
             f"{'not measured' if deployed_ms is None else f'{deployed_ms:.3f} ms'}): {ds} — "
             f"{'met' if met else 'not met'}.",
             f"- One DAgger round beats BC for {student} at {budget}: {gain[0]} — "
             f"{'met' if gain[1] > 0 else 'not met'}."]
    return lines, goals


def _gru_section(cfg: HistoryConfig, res: dict) -> tuple:
    """The page's lines and goal lines on the learned-recurrence student (none if it was not run)."""
    if not res.get("gru"):
        return [], []
    hidden, epochs = cfg.gru
    first = res["gru"][cfg.gru_runs[0]][0]
    ms = first["ms_per_step"]
    lines = ["", "## A learned recurrence (held-out weeks)", "",
             f"`fit_gru_student`: one GRU cell of {hidden} units, shared by the resources, reads each resource's "
             "standardised features step by step, and a `PerResourceNet` (64, 64, with context) reads those "
             "features and the cell's state (`GRUHistory`); both are fitted together through time on the same "
             f"labels as the students above ({epochs} epochs, 16 weeks per step, Adam 0.003, gradients clipped at "
             f"norm 5, the BC student's class weights), learner seeds {', '.join(map(str, cfg.learner_seeds))}. "
             "Its size and epochs were taken from a few trials on the validation weeks 4000-4029 (learner seed 0): "
             "a scratch version with the budget features standardised at the input scored 0.7830-0.7837 there "
             "with a GRU of 32 or 64 units and 30 or 60 epochs, this one 0.7846 at 64 units and 30 epochs; not "
             "searched further. It is deployed as a `HistoryStudent` whose history is the cell (compiled with "
             f"numba): {ms:.3f} ms per decision over week {cfg.held_out[0]}'s decisions ({cfg.gru_runs[0][0]}, "
             f"{cfg.gru_runs[0][1]} weeks, learner seed {cfg.learner_seeds[0]}; Set F1 {first['timed_set_f1']:.4f} "
             f"there, {float(np.asarray(first['set_f1'])[0]):.4f} in the batched rollout). A student's Set F1 per "
             "week is the mean over the learner seeds; paired 95% intervals over the weeks.", "",
             "| budget | n weeks | GRU student | per seed | vs Sequential | vs the frame-stack history student |",
             "|---|---|---|---|---|---|"]
    goals = []
    for (budget, n), runs in res["gru"].items():
        r = res["runs"][(budget, n)]
        seq = np.asarray(r["Sequential"])
        frames, gru = seed_mean(r[res["chosen"]]), seed_mean(runs)
        per_seed = "; ".join(f"{np.mean(x['set_f1']):.4f}" for x in runs)
        (gs, lo, _), vs_frames = paired_ci(gru - seq), paired_ci(gru - frames)
        lines.append(f"| {budget} | {n} | {gru.mean():.4f} | {per_seed} | {gs} | {vs_frames[0]} |")
        if budget == "B10":
            met = gru.mean() - seq.mean() >= 0.01 and lo > 0 and ms <= 0.1
            goals.append(f"- Deployable allocator >= Sequential + 0.01 with an interval excluding 0 and <= 0.1 ms per "
                         f"decision at B10 (the learned-recurrence student, {n} weeks, {ms:.3f} ms): {gs} — "
                         f"{'met' if met else 'not met'}.")
        else:
            goals.append(f"- Deployable allocator >= Sequential at {budget} (the learned-recurrence student, {n} "
                         f"weeks): {gs} — {'met' if gru.mean() >= seq.mean() else 'not met'}.")
    return lines, goals


def _finetune_section(cfg: HistoryConfig, res: dict) -> tuple:
    """The page's lines and goal lines on PPO from the history students (none if it was not run)."""
    if not res.get("finetune"):
        return [], []
    starts = res["runs"][cfg.runs[0]][res["chosen"]]
    return _finetune_lines(cfg, res["runs"][cfg.runs[0]], cfg.runs[0], cfg.finetune_seeds,
                           [starts[cfg.learner_seeds.index(s)] for s in cfg.finetune_seeds], res["finetune"],
                           "the history student", "through `HistoryTask`", cfg.finetune_ppo)


def _gru_finetune_section(cfg: HistoryConfig, res: dict) -> tuple:
    """The same for the learned-recurrence student (none if it was not run)."""
    if not res.get("gru_finetune"):
        return [], []
    run = cfg.gru_runs[0]
    starts = [res["gru"][run][cfg.learner_seeds.index(s)] for s in cfg.gru_finetune_seeds]
    lines, goals = [], []
    for lam, runs in res["gru_finetune"].items():
        more = _finetune_lines(cfg, res["runs"][run], run, cfg.gru_finetune_seeds, starts, runs,
                               "the learned-recurrence student", "through `HistoryTask` over its GRU cell, which "
                               "stays frozen (PPO trains the network that reads the cell's state)",
                               dataclasses.replace(cfg.finetune_ppo, gae_lambda=lam))
        lines += more[0]
        goals += more[1]
    return lines, goals


def _finetune_lines(cfg, r, run, seeds, starts, runs, student, how, ppo_cfg) -> tuple:
    """PPO's table, validation curves and goal: ``starts`` (the BC students' results) and ``runs`` (PPO's, with
    ``ppo_cfg``) per learner seed of ``seeds``, against Sequential's ``r``."""
    budget, n = run
    seq = np.asarray(r["Sequential"])
    ppo, start = seed_mean(runs), seed_mean(starts)
    steps = ", ".join(str(x["selected_env_steps"]) for x in runs)
    ppo_seq, ppo_start = paired_ci(ppo - seq), paired_ci(ppo - start)
    lam = ppo_cfg.gae_lambda
    fair = lam == cfg.finetune_ppo.gae_lambda
    tag = "" if fair else f", GAE lambda {lam}"
    lines = ["", f"## PPO from {student} ({budget}, {n} weeks, held-out weeks{tag})", "",
             f"PPO with the fair comparison's distil-then-RL settings ({ppo_cfg.total_timesteps:,} "
             f"steps, critic warm-up {ppo_cfg.critic_warmup} updates, GAE lambda {lam}"
             + ("" if fair else f" instead of {cfg.finetune_ppo.gae_lambda}: Monte Carlo advantages")
             + ", the kept actor the best on the validation weeks), started from "
             f"{student} of learner seed(s) {', '.join(map(str, seeds))}, {how} "
             f"(engine {runs[0]['engine']}); kept actor at {steps} env steps"
             + (": PPO found no actor better than its start on the validation weeks, so the figures below are "
                "its BC start's." if all(x["selected_env_steps"] == 0 for x in runs) else "."), "",
             "| Set F1 | vs its BC start | vs Sequential |", "|---|---|---|",
             f"| {ppo.mean():.4f} | {ppo_start[0]} | {ppo_seq[0]} |"]
    lines += curve_lines([(f"seed {seed}", x.get("curve")) for seed, x in zip(seeds, runs)],
                         ppo_cfg.eval_every)
    goals = [f"- PPO from {student}{tag} >= its BC start with an interval excluding 0 at {budget}: {ppo_start[0]} — "
             f"{'met' if ppo_start[1] > 0 else 'not met'}."]
    return lines, goals


def main(argv=None):
    return page_study_main(argv, study="history-students", page="history_students.md", doc=__doc__,
                           quick_help="two development weeks, two weeks per set, one seed", configs=(FULL, QUICK),
                           measure=measure, render=render)
