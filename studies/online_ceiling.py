"""Past the best gate (issue 31): the online planner against BudgetPM's Sequential gate and the hindsight DP on
``PMWeek-v0``, and students distilled from it against students distilled from the DP.

The online planner (:class:`~membudget.teachers.online.HindsightPlanner`, hindsight optimisation over posterior
weeks) sees only what the agent sees, so its Set F1 is a lower bound on the online optimum; the hindsight DP,
which sees the whole week, an upper bound. The study measures:

- the planner's curve in ``K`` (posterior weeks per decision, with its particles) on the validation weeks
  4000-4029 at B10, and the setting it chooses (the best mean Set F1 there);
- the bracket on the held-out weeks 8000-8029 + 9000-9029 at B5, B10 and B20: Sequential <= planner <= online
  optimum <= hindsight DP, with paired 95% intervals and the share of the DP - Sequential gap the planner closes
  (B5 and B20 use B10's chosen setting);
- students of one class (:class:`~membudget.agents.per_resource.PerResourceNet`, BC with the package's settings
  :data:`~membudget.agents.configs.DEFAULTS`, uncalibrated) fitted on the same development weeks, one to the
  planner's labels (its own rollouts at the chosen setting) and one to the DP's, each with several learner seeds,
  on the held-out weeks (the imitation gap at equal data and class);
- the labels' speed: CPU seconds per week of the planner at the chosen setting against the DP's;
- the Bayes-feature gate (:class:`~membudget.teachers.online.BayesFeatureGate`): a threshold gate on the exact
  posterior probability that a query now resolves something (estimated from the planner's draws), its threshold
  chosen per budget on the validation weeks, on the held-out weeks: what perfect features give a threshold gate;
- PPO started from the planner's BC student and from the DP's (the fair comparison's distil-then-RL settings),
  on the held-out weeks.

Every week's planner run and labels is one task (planner seed = the week's number, so a task does not depend on
the others; on the held-out weeks the planner also plays with seeds 1 and 2, and its figure per week is the mean of
the three); the tasks are checkpointed under ``--checkpoint-dir`` (default ``runs/online-ceiling/cache``), so a
re-run of the page loads them instead of recomputing. ``--quick``: two weeks of each set, small ``K``, one budget,
two planner seeds and one learner seed (a check that the study runs, about a minute).

``python -m membudget.evaluate online-ceiling [--quick] [--out docs/online_ceiling.md]``
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import time

import numpy as np

from membudget.studies.cli import add_page_flag, page_path, plain
from membudget.studies.rl_vs_distillation.configs import BENCH_FULL, BENCH_QUICK
from membudget.studies.execution import add_backend_flags, run_with_flags
from membudget.studies.protocol import bootstrap_ci, write_page

CACHE = "runs/online-ceiling/cache"
"""Default checkpoint folder of the study's tasks."""


@dataclasses.dataclass(frozen=True)
class CeilingConfig:
    validation: tuple = tuple(range(4000, 4030))
    held_out: tuple = tuple(range(8000, 8030)) + tuple(range(9000, 9030))
    curve: tuple = ((4, 8), (8, 16), (16, 32), (32, 64))
    """``(K, particles)`` settings of the planner's curve on the validation weeks at :attr:`curve_budget`."""
    curve_budget: str = "B10"
    curve_only: tuple = ((64, 128), (32, 32), (16, 16), (1, 8))
    """Settings measured on the validation weeks last, for the curve alone, not candidates for the held-out runs:
    twice the chosen K (each doubles the planner's time), K with as many particles as draws (the sampler's share
    of the time halved), and a single posterior draw (K = 1, from 8 particles)."""
    budgets: tuple = ("B5", "B10", "B20")
    planner_seeds: tuple = (0, 1, 2)
    """Planner seeds of the held-out runs (:func:`planner_week`): the planner's Set F1 on a held-out week is the mean
    over them. Seed 0 is the week itself, as on the validation weeks and for the labels."""
    students: tuple = (("bc", "B10", 40), ("bc", "B5", 40), ("bc", "B20", 40), ("dagger", "B10", 40),
                       ("bc", "B10", 200), ("bc", "B10", 400), ("bc", "B5", 200), ("bc", "B20", 200))
    """``(method, budget, n)``: students fitted on the development weeks 2000..2000+n-1 at ``budget``, ``bc`` on
    each teacher's labels of its own rollouts, ``dagger`` with one more round on the states the BC student reaches
    there; run in this order, the first before the held-out planner at the budgets other than
    :attr:`curve_budget`."""
    learner_seeds: tuple = (0, 1, 2)
    bayes_grid: tuple = (0.1, 0.2, 0.4, 0.6, 0.8, 0.9, 1.0)
    """Thresholds of the Bayes-feature gate (:class:`~membudget.teachers.online.BayesFeatureGate` at the planner's
    chosen K and particles); per budget the one with the best mean Set F1 on the validation weeks is taken (ties
    to the higher threshold)."""
    finetune: tuple = (("bc", "B10", 200),)
    """BC students ``(method, budget, n)`` of :attr:`students` whose networks (each learner seed's, of both
    teachers) start PPO with :attr:`finetune_ppo` and PPO seed = the learner seed, its validation weeks picking the
    kept actor: distil-then-RL from the planner's student against the same from the DP's."""
    finetune_ppo: object = BENCH_FULL["finetune"]
    """The PPO settings of the fine-tuning (:class:`~membudget.agents.configs.PPOConfig`): the fair comparison's
    distil-then-RL ones (its DAgger→PPO's)."""


FULL = CeilingConfig()
QUICK = CeilingConfig(validation=(4000, 4001), held_out=(8000, 9000), curve=((1, 8), (2, 8)), curve_only=(),
                      budgets=("B10",), planner_seeds=(0, 1),
                      students=(("bc", "B10", 2),), learner_seeds=(0,), bayes_grid=(0.3, 0.6),
                      finetune=(("bc", "B10", 2),), finetune_ppo=BENCH_QUICK["finetune"])


def sequential_gate(budget):
    """BudgetPM's Sequential gate at ``budget`` fitted on development weeks 2000-2019 (as the study suite does)."""
    from membudget.envs.pm import budget_levels
    from membudget.studies.suite import DEV_SEEDS, fit_gate
    from membudget.teachers.labels import build_label_dataset

    ds = build_label_dataset(DEV_SEEDS, [budget])
    return fit_gate(ds, budget_levels(), ("sequential", budget))


def reference_scores(seeds, budget) -> dict:
    """Per-week Set F1 of Sequential, current-greedy and the hindsight DP on ``seeds`` at ``budget``."""
    from membudget.envs.pm import budget_levels, generate_episode
    from membudget.envs.pm.rollout import rollout
    from membudget.envs.pm.world import WorldConfig
    from membudget.teachers import CurrentGreedy, HindsightDP, SchedulePolicy

    cap = budget_levels()[budget]
    n_res = len(WorldConfig().resources)
    weeks = [generate_episode(s) for s in seeds]
    out = {}
    for name, teacher in (("HindsightDP", HindsightDP), ("CurrentGreedy", CurrentGreedy)):
        sols = [teacher(budget=cap, per_step_cap=2).solve(w) for w in weeks]
        out[name] = rollout(SchedulePolicy([s.schedule for s in sols], n_res), seeds, budget=budget,
                            per_step_cap=2)["set_f1"]
    out["Sequential"] = rollout(sequential_gate(budget), seeds, budget=budget, per_step_cap=2,
                                action_mode="scores")["set_f1"]
    return out


def dp_seconds(seeds, budget) -> np.ndarray:
    """CPU seconds of the hindsight DP's solve of each whole week (what the online planner's speed is compared
    with)."""
    from membudget.envs.pm import budget_levels, generate_episode
    from membudget.teachers import HindsightDP

    dp = HindsightDP(budget=budget_levels()[budget], per_step_cap=2)
    dp.solve(generate_episode(seeds[0]))  # compiled or loaded before the clock starts
    out = []
    for s in seeds:
        ep = generate_episode(s)
        c0 = time.process_time()
        dp.solve(ep)
        out.append(time.process_time() - c0)
    return np.array(out)


PLANNER_SEED_STRIDE = 1_000_000
"""Planner seed ``s`` plays week ``w`` with its stream seeded ``w + s * PLANNER_SEED_STRIDE``."""


def planner_week(item) -> dict:
    """Task: the planner (``K``, particles) plays one week at ``budget``; its Set F1, CPU seconds and the decisions
    it could not draw for. ``item = (budget, K, particles, week)`` (planner seed 0: the week seeds the planner) or
    ``(budget, K, particles, week, s)`` (planner seed ``s``, :data:`PLANNER_SEED_STRIDE`)."""
    from membudget.envs.pm import PMWeekEnv
    from membudget.teachers.observed import AgentView
    from membudget.teachers.online import HindsightPlanner

    budget, k, particles, week, *rest = item
    seed = week + (rest[0] if rest else 0) * PLANNER_SEED_STRIDE
    return _timed_week(HindsightPlanner(env=AgentView(PMWeekEnv(budget=budget, per_step_cap=2)), n_samples=k,
                                        n_particles=particles, seed=seed).fit(), week)


def _timed_week(planner, week) -> dict:
    """``planner`` plays ``week``: its Set F1, CPU seconds and the decisions it could not draw for."""
    from membudget.teachers.online import play

    c0 = time.process_time()
    f1 = play(planner, week)["set_f1"]
    return {"set_f1": float(f1), "cpu": time.process_time() - c0, "fallbacks": planner.fallbacks_}


@functools.lru_cache(maxsize=None)
def _sequential_base(budget):
    """:func:`sequential_gate` fitted once per process and budget (the rollout planner's base)."""
    return sequential_gate(budget)


def rollout_week(item) -> dict:
    """Task: the rollout planner over BudgetPM's Sequential gate (:class:`~membudget.teachers.online.RolloutPlanner`,
    ``K``, particles; seed = the week) plays one week at ``budget``; its Set F1, CPU seconds (the gate's fit, once
    per process, not counted) and the decisions it could not draw for. ``item = (budget, K, particles, week)``."""
    from membudget.envs.pm import PMWeekEnv
    from membudget.teachers.observed import AgentView
    from membudget.teachers.online import RolloutPlanner

    budget, k, particles, week = item
    return _timed_week(RolloutPlanner(env=AgentView(PMWeekEnv(budget=budget, per_step_cap=2)),
                                      base=_sequential_base(budget), n_samples=k, n_particles=particles,
                                      seed=week).fit(), week)


def bayes_gate_week(item) -> dict:
    """Task: the Bayes-feature gate (``K``, particles, threshold; seed = the week) plays one week at ``budget``;
    its Set F1, queries and CPU seconds. ``item = (budget, K, particles, threshold, week)``."""
    from membudget.envs.pm import PMWeekEnv
    from membudget.teachers.observed import AgentView
    from membudget.teachers.online import BayesFeatureGate, play

    budget, k, particles, threshold, week = item
    gate = BayesFeatureGate(env=AgentView(PMWeekEnv(budget=budget, per_step_cap=2, action_mode="scores")),
                            threshold=threshold, n_samples=k, n_particles=particles, seed=week).fit()
    c0 = time.process_time()
    m = play(gate, week)
    return {"set_f1": float(m["set_f1"]), "queries": float(m["queries"]), "cpu": time.process_time() - c0}


def planner_labels(item) -> dict:
    """Task: the planner's labels of its own rollout of one development week (seed = the week) and their CPU
    seconds. ``item = (budget, K, particles, week)``."""
    from membudget.agents.online_imitation import online_episodes

    budget, k, particles, week = item
    c0 = time.process_time()
    (demos,) = online_episodes([week], budget, samples=k, particles=particles)
    return {"demos": demos, "cpu": time.process_time() - c0}


def references(item) -> dict:
    """Task: per-week Set F1 of Sequential, current-greedy and the hindsight DP, and the DP's CPU seconds per
    week. ``item = (budget, weeks)``."""
    budget, weeks = item
    out = {k: np.asarray(v) for k, v in reference_scores(list(weeks), budget).items()}
    out["dp_cpu"] = float(dp_seconds(list(weeks), budget).mean())
    return out


def student_task(item) -> dict:
    """Task: a BC student fitted with learner seed ``seed`` to ``demos``, scored on ``weeks`` (:func:`scores`).
    ``item = (demos, budget, seed, weeks)``."""
    from membudget.agents.imitation import fit_net
    from membudget.agents.per_resource import StudentPolicy

    demos, budget, seed, weeks = item
    return scores(StudentPolicy(fit_net(demos, seed=seed), config={"method": "bc"}), budget, weeks)


def dagger_task(item) -> dict:
    """Task: a DAgger student (one round after BC, learner seed ``seed``) of the ``teacher`` (``"online"``: the
    planner at ``(K, particles)``, its labels of the training weeks ``demos``; ``"dp"``: the hindsight DP) on the
    development weeks ``train``, scored on ``weeks`` (:func:`scores`).
    ``item = (teacher, demos, budget, seed, train, (K, particles), weeks)``."""
    from membudget.agents.imitation import fit_dagger
    from membudget.agents.online_imitation import fit_online_dagger

    teacher, demos, budget, seed, train, (k, m), weeks = item
    if teacher == "online":
        policy, _ = fit_online_dagger(train, budget, samples=k, particles=m, seed=seed, demos=demos)
    else:
        policy, _ = fit_dagger(train, budget, seed=seed, calibrate=False, iterations=1)
    return scores(policy, budget, weeks)


def finetune_task(item) -> dict:
    """Task: PPO (settings ``ppo``, seed ``seed``; validation weeks ``val`` pick the kept actor) started from the
    BC student of learner seed ``seed`` fitted to ``demos``, scored on ``weeks`` (:func:`scores`), with the
    training steps of the kept actor and the engine. ``item = (demos, budget, seed, ppo, val, weeks)``."""
    from membudget.agents.imitation import fit_net
    from membudget.agents.ppo import train_ppo

    demos, budget, seed, ppo, val, weeks = item
    policy, rows = train_ppo(budget, ppo, seed=seed, init=fit_net(demos, seed=seed), eval_seeds=list(val))
    out = scores(policy, budget, weeks)
    out.update(selected_env_steps=int(policy.config["selected_env_steps"]), engine=policy.config["engine"],
               curve=ppo_curve(rows))
    return out


def ppo_curve(rows) -> list:
    """``(env steps, Set F1 on the validation weeks)`` at each point of a :func:`~membudget.agents.ppo.train_ppo`
    history, the start first."""
    return [(int(r["env_steps"]), float(r["val_set_f1"])) for r in rows]


def curve_lines(runs, every: int) -> list:
    """Page lines: the validation Set F1 along PPO runs (``runs``: ``(label, curve)`` pairs of :func:`ppo_curve`s
    recorded at the same steps, every ``every`` env steps), and, where every later point of every run lies below
    its start, by how much the best of them does."""
    runs = [(label, curve) for label, curve in runs if curve]
    if not runs:
        return []
    steps = [s for s, _ in runs[0][1]]
    lines = ["", f"The validation weeks' Set F1 along each run (the start, then every {every:,} env steps):", "",
             "| run | " + " | ".join(f"{s:,}" for s in steps) + " |", "|---|" + "---|" * len(steps)]
    lines += [f"| {label} | " + " | ".join(f"{v:.4f}" for _, v in curve) + " |" for label, curve in runs]
    drop = [curve[0][1] - max(v for _, v in curve[1:]) for _, curve in runs if len(curve) > 1]
    if drop and min(drop) > 0:
        lines += ["", f"In every run each later point lies below the start: the best of them by {min(drop):.4f} "
                  f"to {max(drop):.4f}."]
    return lines


def scores(policy, budget, weeks) -> dict:
    """A learner's per-week Set F1 on ``weeks``."""
    from membudget.envs.pm.rollout import rollout

    return {"set_f1": rollout(policy, list(weeks), budget=budget, per_step_cap=2, action_mode="scores")["set_f1"]}


def decision_ms(item) -> float:
    """Task: the median milliseconds of one decision (:func:`timed_week`) of the learners' class, a
    :class:`~membudget.agents.per_resource.StudentPolicy` of a ``PerResourceNet(hidden)``, over one week at
    ``budget``; the time depends on the class, not on the weights. ``item = (hidden, budget, week)``."""
    import torch

    from membudget.agents.per_resource import PerResourceNet, StudentPolicy

    hidden, budget, week = item
    torch.manual_seed(0)
    return timed_week(StudentPolicy(PerResourceNet(hidden)), budget, week)[0]


def timed_week(policy, budget, week) -> tuple[float, float]:
    """``policy`` plays one week at ``budget``, one observation at a time (its ``state`` carried, one torch
    thread): the median milliseconds of its ``predict`` calls and the week's Set F1."""
    import torch

    from membudget.envs.pm import PMWeekEnv

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        env = PMWeekEnv(budget=budget, per_step_cap=2, action_mode="scores")
        obs, _ = env.reset(seed=int(week))
        done, state, ms, start = False, None, [], True
        while not done:
            t0 = time.perf_counter()
            a, state = policy.predict(obs, state, start)
            ms.append(1e3 * (time.perf_counter() - t0))
            obs, _, done, _, info = env.step(a)
            start = False
    finally:
        torch.set_num_threads(threads)
    return float(np.median(ms)), float(info["episode_metrics"]["set_f1"])


def measure(cfg: CeilingConfig, progress=print, executor=None) -> dict:
    """Every figure of the page (module docstring), as arrays per week."""
    from membudget.agents.imitation import Demonstrations, dp_demonstrations

    run = executor.map
    for key in cfg.finetune:
        if key[0] != "bc" or key not in cfg.students:
            raise ValueError(f"finetune entries must be BC students of the study, got {key!r}")
    out = {"curve": {}, "held_out": {}, "students": {}}
    demos = {}
    progress("references")
    out["ref_validation"] = run(references, [(cfg.curve_budget, cfg.validation)])[0]
    out["ref_held_out"] = dict(zip(cfg.budgets, run(references, [(b, cfg.held_out) for b in cfg.budgets])))
    for k, m in cfg.curve:
        progress(f"validation curve: K={k}, {m} particles")
        rows = run(planner_week, [(cfg.curve_budget, k, m, w) for w in cfg.validation])
        out["curve"][(k, m)] = rows
    chosen = max(cfg.curve, key=lambda km: np.mean([r["set_f1"] for r in out["curve"][km]]))
    out["chosen"] = chosen

    def held_out(b):
        progress(f"held-out planner at {b}: K={chosen[0]}, {chosen[1]} particles")
        # seed 0's items keep their four fields (and so their checkpoints)
        out["held_out"][b] = {s: run(planner_week, [(b, *chosen, w, *((s,) if s else ())) for w in cfg.held_out])
                              for s in cfg.planner_seeds}

    def students(method, b, n):
        train = range(2000, 2000 + n)
        progress(f"online labels at {b} ({n} development weeks)")
        labels = run(planner_labels, [(b, *chosen, w) for w in train])
        online = Demonstrations.concatenate([x["demos"] for x in labels])
        progress(f"{method} students at {b} ({n} weeks)")
        if method == "bc":
            dp = dp_demonstrations(train, b)
            demos[(method, b, n)] = {"online": online, "dp": dp}
            on = run(student_task, [(online, b, s, cfg.held_out) for s in cfg.learner_seeds])
            off = run(student_task, [(dp, b, s, cfg.held_out) for s in cfg.learner_seeds])
        else:
            on, off = (run(dagger_task, [(t, online if t == "online" else None, b, s, tuple(train), chosen,
                                          cfg.held_out) for s in cfg.learner_seeds]) for t in ("online", "dp"))
        out["students"][(method, b, n)] = {"online": on, "dp": off, "states": len(online.labels),
                                           "label_cpu": np.array([x["cpu"] for x in labels])}

    # the validated budget first, then the first students, the other budgets, the other students
    if cfg.curve_budget in cfg.budgets:
        held_out(cfg.curve_budget)
    for st in cfg.students[:1]:
        students(*st)
    for b in cfg.budgets:
        if b != cfg.curve_budget:
            held_out(b)
    for st in cfg.students[1:]:
        students(*st)
    out["students"] = {st: out["students"][st] for st in cfg.students}
    for k, m in cfg.curve_only:
        progress(f"validation curve (not a candidate): K={k}, {m} particles")
        out["curve"][(k, m)] = run(planner_week, [(cfg.curve_budget, k, m, w) for w in cfg.validation])
    out["held_out"] = {b: out["held_out"][b] for b in cfg.budgets}
    out["bayes"] = {}
    for b in cfg.budgets:
        progress(f"Bayes-feature gate at {b}: thresholds {cfg.bayes_grid} on the validation weeks")
        rows = run(bayes_gate_week, [(b, *chosen, th, w) for th in cfg.bayes_grid for w in cfg.validation])
        nv = len(cfg.validation)
        val = {th: rows[i * nv:(i + 1) * nv] for i, th in enumerate(cfg.bayes_grid)}
        th = max(cfg.bayes_grid, key=lambda x: (round(float(np.mean([r["set_f1"] for r in val[x]])), 12), x))
        progress(f"Bayes-feature gate at {b}: threshold {th} on the held-out weeks")
        out["bayes"][b] = {"validation": val, "threshold": th,
                           "held_out": run(bayes_gate_week, [(b, *chosen, th, w) for w in cfg.held_out])}
    from membudget.agents.configs import DEFAULTS

    out["decision_ms"] = run(decision_ms, [(tuple(DEFAULTS.hidden), cfg.curve_budget, cfg.held_out[0])])[0]
    out["finetune"] = {}
    for key in cfg.finetune:
        progress(f"PPO from the {key[0]} students at {key[1]} ({key[2]} weeks)")
        out["finetune"][key] = {
            t: run(finetune_task, [(d, key[1], s, cfg.finetune_ppo, cfg.validation, cfg.held_out)
                                   for s in cfg.learner_seeds]) for t, d in demos[key].items()}
    return out


def planner_f1(by_seed: dict) -> np.ndarray:
    """The held-out planner's Set F1 per week: the mean over its planner seeds (``{seed: rows}``)."""
    return np.mean([[x["set_f1"] for x in rows] for rows in by_seed.values()], axis=0)


def seed_mean(runs, key="set_f1") -> np.ndarray:
    """A learner's figure per week (or conversation): the mean over its runs (the learner seeds) of ``key``."""
    return np.mean([np.asarray(r[key]) for r in runs], axis=0)


def paired_ci(x) -> tuple:
    """The mean of paired differences ``x`` with its 95% percentile-bootstrap interval: ``(text, lo, hi)``."""
    m, lo, hi = bootstrap_ci(np.asarray(x), n_resamples=100_000)
    return f"{m:+.4f} [{lo:+.4f}, {hi:+.4f}]", lo, hi


def render(cfg: CeilingConfig, res: dict, command: str) -> str:
    span = lambda ws: ", ".join(f"{a}-{b}" if a != b else f"{a}" for a, b in _runs(ws))  # noqa: E731
    lines = ["# Past the best gate: the online planner and its students (PMWeek-v0)", "",
             f"Generated by `{command}` (tasks checkpointed under `{CACHE}` by default; a re-run loads them). "
             "Module: `membudget.studies.online_ceiling`.", "",
             "The online planner (`HindsightPlanner`: at each step K weeks drawn from the posterior given what the "
             "agent has seen, every first action valued by the hindsight DP on each draw, the best mean taken) is "
             "an online policy, so its Set F1 is a lower bound on the online optimum; the hindsight DP, which sees "
             "the whole week, an upper bound. Planner seed 0 is the week's number (each week one task); on the held-out "
             f"weeks the planner plays with seeds {', '.join(map(str, cfg.planner_seeds))} and its Set F1 per week is "
             "their mean.", ""]
    goal = {}
    lines += _curve_section(cfg, res, span)
    lines += _bracket_section(cfg, res, span, goal)
    if res.get("bayes"):
        lines += _bayes_section(cfg, res, span)
    cpu = None
    if res["students"]:
        section, cpu = _students_section(cfg, res, goal)
        lines += section
    if res.get("finetune"):
        lines += _finetune_section(cfg, res, goal)
    lines += _goals_section(cfg, res, goal, cpu)
    return "\n".join(lines) + "\n"


def _curve_section(cfg, res, span) -> list:
    """The planner's Set F1 against K on the validation weeks."""
    k0, m0 = res["chosen"]
    nv = len(cfg.validation)
    lines = []
    ref = res["ref_validation"]
    seq = ref["Sequential"]
    lines += [f"## The planner's curve in K (validation weeks {span(cfg.validation)}, {cfg.curve_budget})", "",
              f"Sequential {seq.mean():.4f}, current-greedy {ref['CurrentGreedy'].mean():.4f}, hindsight DP "
              f"{ref['HindsightDP'].mean():.4f} on these {nv} weeks. The setting with the best mean Set F1 here is "
              f"chosen for the held-out weeks: K = {k0}, {m0} particles"
              + (f" (among the first {len(cfg.curve)} rows; the rows after them were measured for the curve alone, "
                 "after everything else, not as candidates: twice the chosen K, which doubles the planner's time, "
                 "as many particles as draws, and a single posterior draw)" if cfg.curve_only else "")
              + ". The CPU seconds are each row's own run; rows run at different times shared the machine with "
              "different loads, so their times compare only roughly.", "",
              "| K, particles | Set F1 | vs Sequential (paired 95% interval) | gap closed | CPU s per week "
              "(median) | steps without a consistent draw |", "|---|---|---|---|---|---|"]
    gap_v = ref["HindsightDP"].mean() - seq.mean()
    for (k, m), rows in res["curve"].items():
        f1 = np.array([r["set_f1"] for r in rows])
        lines.append(f"| {k}, {m} | {f1.mean():.4f} | {paired_ci(f1 - seq)[0]} | "
                     f"{(f1.mean() - seq.mean()) / gap_v:.2f} "
                     f"| {np.median([r['cpu'] for r in rows]):.2f} | {sum(r['fallbacks'] for r in rows)} |")
    chosen = np.array([r["set_f1"] for r in res["curve"][(k0, m0)]])
    others = [(k, m) for k, m in cfg.curve_only if (k, m) in res["curve"]]
    if others:
        lines += ["", "Against the chosen setting on the same weeks (paired): " + "; ".join(
            f"K = {k}, {m} particles {paired_ci(np.array([r['set_f1'] for r in res['curve'][(k, m)]]) - chosen)[0]}"
            for k, m in others) + "."]
    return lines


def _bracket_section(cfg, res, span, goal) -> list:
    """Planner, Sequential, current-greedy and the DP on the held-out weeks per budget (``goal[b]`` filled)."""
    k0, m0 = res["chosen"]
    nh = len(cfg.held_out)
    lines = []
    lines += ["", f"## The bracket on the held-out weeks ({span(cfg.held_out)}, {nh} weeks)", "",
              f"The planner at K = {k0}, {m0} particles (chosen on validation at {cfg.curve_budget}; the same "
              "setting at every budget). Paired 95% percentile-bootstrap intervals over the weeks; gap closed = "
              "(planner - Sequential) / (DP - Sequential).", "",
              "| budget | Sequential | planner | planner - Sequential | gap closed | current-greedy | hindsight DP "
              "| DP - planner | planner per seed | planner CPU s per week (median) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for b in cfg.budgets:
        r = res["ref_held_out"][b]
        s, dp = r["Sequential"], r["HindsightDP"]
        f1 = planner_f1(res["held_out"][b])
        d, lo, _ = paired_ci(f1 - s)
        above = lo > 0
        share = (f1.mean() - s.mean()) / (dp.mean() - s.mean())
        goal[b] = (f1.mean() - s.mean(), above, share)
        lines.append(f"| {b} | {s.mean():.4f} | {f1.mean():.4f} | {d} | {share:.2f} | "
                     f"{r['CurrentGreedy'].mean():.4f} | {dp.mean():.4f} | {paired_ci(dp - f1)[0]} | "
                     + "; ".join(f"{np.mean([x['set_f1'] for x in rows]):.4f}" for rows in res["held_out"][b].values())
                     + f" | {np.median([x['cpu'] for rows in res['held_out'][b].values() for x in rows]):.2f} |")
    above = [b for b in cfg.budgets if goal[b][0] > 0]
    lines += ["", "At each budget the online optimum lies between the planner's and the DP's Set F1. A tighter upper "
              "bound than the DP, an information relaxation with a penalty (`membudget.teachers.dual_bound`), is not "
              "run by this study: `python -m membudget.bench.dual_bound` measures it (docs/online_teacher.md). The "
              "planner's mean is above "
              f"Sequential's at {', '.join(above) or 'no budget'}"
              + (f" and not at {', '.join(b for b in cfg.budgets if b not in above)}." if len(above) < len(cfg.budgets)
                 else "."), ""]
    return lines


def _bayes_section(cfg, res, span) -> list:
    """The Bayes-feature gate per budget: its validation Set F1 per threshold and the held-out comparison."""
    k0, m0 = res["chosen"]
    lines = ["## The Bayes-feature gate: perfect features, a threshold rule", "",
             "`BayesFeatureGate` scores each candidate by the posterior probability that a query now resolves a "
             f"stored intention, estimated from K = {k0} posterior draws ({m0} particles) as the planner's "
             "`p_resolve`, proposes it when that probability is at least the threshold, and leaves the order to the "
             "executor (by score, within the per-step cap and the budget), as BudgetPM's gates do with their "
             "scores. The threshold is chosen per budget on the validation weeks "
             f"({span(cfg.validation)}; best mean Set F1), then the held-out weeks are played once. Seed = the "
             "week. Paired 95% intervals over the held-out weeks.", "",
             "| budget | validation Set F1 per threshold | threshold | held-out Set F1 | gate - Sequential | "
             "gate - planner | gap closed | queries per week | CPU s per week (median) |",
             "|---|---|---|---|---|---|---|---|---|"]
    above, below = [], []
    for b in cfg.budgets:
        g = res["bayes"][b]
        r = res["ref_held_out"][b]
        s, dp = r["Sequential"], r["HindsightDP"]
        f1 = np.array([x["set_f1"] for x in g["held_out"]])
        planner = planner_f1(res["held_out"][b])
        curve = "; ".join(f"{th}: {np.mean([x['set_f1'] for x in rows]):.4f}" for th, rows in g["validation"].items())
        d_seq, lo, _ = paired_ci(f1 - s)
        d_pl, _, hi = paired_ci(f1 - planner)
        if lo > 0:
            above.append(b)
        if hi < 0:
            below.append(b)
        lines.append(f"| {b} | {curve} | {g['threshold']} | {f1.mean():.4f} | {d_seq} | {d_pl} | "
                     f"{(f1.mean() - s.mean()) / (dp.mean() - s.mean()):.2f} | "
                     f"{np.mean([x['queries'] for x in g['held_out']]):.2f} | "
                     f"{np.median([x['cpu'] for x in g['held_out']]):.2f} |")
    lines += ["", "The gate is above Sequential with an interval excluding 0 at "
              f"{', '.join(above) or 'no budget'}, and below the planner with an interval excluding 0 at "
              f"{', '.join(below) or 'no budget'}.", ""]
    return lines


def _students_section(cfg, res, goal) -> tuple:
    """The students of the planner against the DP's, and the labels' speed: ``(lines, label CPU s per week)``
    (``goal`` filled per student)."""
    k0, m0 = res["chosen"]
    nh = len(cfg.held_out)
    lines = []
    lines += [f"## Students: the online teacher's labels against the DP's (held-out weeks, {nh})", "",
              "One class (`PerResourceNet`, fitted with the package's `DEFAULTS`, uncalibrated) on the same "
              "n development weeks (2000..2000+n-1), labelled by the planner "
              f"at K = {k0}, {m0} particles, or by the hindsight DP: BC on each teacher's labels of its own "
              "rollouts; DAgger adds one round, the teacher labelling the states the BC student reaches on "
              "those weeks (the planner from the student's own history), and refits on all. States: the "
              "planner's BC labels. Learner seeds "
              f"{', '.join(map(str, cfg.learner_seeds))}; a student's Set F1 per week is the mean over the seeds, "
              "paired over the weeks. One decision of a student of this class (and of PPO started from one, the "
              f"same network) takes {res['decision_ms']:.3f} ms: the median of one week's `predict` calls, one "
              "observation, one core.", "",
              "| method | budget | n weeks | states | student of the planner | student of the DP | planner's vs "
              "Sequential | DP's vs Sequential | planner's - DP's | per seed (planner's / DP's) |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for (method, b, n), st in res["students"].items():
        s = res["ref_held_out"][b]["Sequential"] if b in res["ref_held_out"] else None
        on, dp = seed_mean(st["online"]), seed_mean(st["dp"])
        per = "; ".join(f"{np.mean(a['set_f1']):.4f} / {np.mean(c['set_f1']):.4f}"
                        for a, c in zip(st["online"], st["dp"]))
        vs = (lambda x: paired_ci(x - s)[0]) if s is not None else (lambda x: "")
        lines.append(f"| {'BC' if method == 'bc' else 'DAgger'} | {b} | {n} | {st['states']} | {on.mean():.4f} | "
                     f"{dp.mean():.4f} | {vs(on)} | {vs(dp)} | {paired_ci(on - dp)[0]} | {per} |")
        goal[("students", method, b, n)] = (on, dp, s)
    _, b, n = max(res["students"], key=lambda st: st[2])
    cpu = max((st for key, st in res["students"].items() if key[1:] == (b, n)), key=lambda st: st["states"])[
        "label_cpu"]
    dp_cpu = res["ref_held_out"].get(b, res["ref_validation"])["dp_cpu"]
    lines += ["", f"## Speed of the labels ({b}, {n} development weeks, K = {k0}, {m0} particles)", "",
              f"The planner's labels took a median {np.median(cpu):.2f} s CPU per development week (mean "
              f"{cpu.mean():.2f}, max {cpu.max():.2f}, the first task of a process including the kernels' "
              "compilation; one core shared with other jobs): at the median, 1,000 weeks on 2 cores take "
              f"{minutes_per_1000_weeks(cpu):.1f} min (the issue's goal: 10 min), "
              f"{np.median(cpu) / dp_cpu:.0f} times the hindsight DP's {1e3 * dp_cpu:.1f} ms CPU per week."]
    return lines, cpu


def _finetune_section(cfg, res, goal) -> list:
    """PPO started from each teacher's BC student (``goal`` filled per start)."""
    p = cfg.finetune_ppo
    lines = ["", f"## PPO started from the students (held-out weeks, {len(cfg.held_out)})", "",
             "The fair comparison's distil-then-RL (its DAgger→PPO settings: "
             f"{p.total_timesteps:,} env steps, learning rate {p.learning_rate:g}, critic warm-up "
             f"{p.critic_warmup} updates, the actor of the best validation point kept, validation weeks "
             "4000-4029) started from the BC student of each teacher, PPO seed = the student's learner seed. "
             "A learner's Set F1 per week is the mean over the seeds, paired over the weeks.", "",
             "| start | budget | n weeks | student | PPO | PPO - Sequential | PPO - student | per seed | kept at env "
             "steps | engine |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (method, b, n), runs in res["finetune"].items():
        s = res["ref_held_out"][b]["Sequential"]
        st = res["students"][(method, b, n)]
        for teacher, name in (("online", "planner's BC student"), ("dp", "DP's BC student")):
            rows = runs[teacher]
            f1, student = seed_mean(rows), seed_mean(st[teacher])
            per = "; ".join(f"{np.mean(r['set_f1']):.4f}" for r in rows)
            kept = ", ".join(f"{r['selected_env_steps']:,}" for r in rows)
            engines = ", ".join(sorted({r["engine"] for r in rows}))
            lines.append(f"| {name} | {b} | {n} | {student.mean():.4f} | {f1.mean():.4f} | {paired_ci(f1 - s)[0]} | "
                         f"{paired_ci(f1 - student)[0]} | {per} | {kept} | {engines} |")
            goal[("finetune", teacher, b, n)] = (f1, s)
    lines += curve_lines([(f"{name}, {b}, {n} weeks, seed {seed}", r.get("curve"))
                          for (_, b, n), runs in res["finetune"].items()
                          for teacher, name in (("online", "planner's"), ("dp", "DP's"))
                          for seed, r in zip(cfg.learner_seeds, runs[teacher])], p.eval_every)
    return lines


def _goals_section(cfg, res, goal, cpu) -> list:
    """The issue's goals, each with its measured figure."""
    lines = []
    lines += ["", "## The issue's goals, measured", ""]
    if "B10" in goal:
        d, above, share = goal["B10"]
        lines.append(f"- Planner >= Sequential + 0.015 at B10 with an interval excluding 0: {d:+.4f}, interval "
                     f"{'excludes' if above else 'includes'} 0 — {'met' if d >= 0.015 and above else 'not met'}.")
    shares = {b: goal[b][2] for b in cfg.budgets}
    lines.append("- Planner closes >= 50% of the DP - Sequential gap at " + ", ".join(cfg.budgets) + ": " +
                 ", ".join(f"{b} {v:.2f}" for b, v in shares.items()) + " — " +
                 ("met." if all(v >= 0.5 for v in shares.values()) else
                  "not met; the online optimum lies between the planner and the DP here (the information-relaxation "
                  "bound of docs/online_teacher.md narrows the DP's side)."))
    if res["students"]:
        minutes = minutes_per_1000_weeks(cpu)
        fast = [f"K = {k}, {m} particles ({np.median([r['cpu'] for r in rows]):.2f} s)"
                for (k, m), rows in res["curve"].items() if minutes_per_1000_weeks([r["cpu"] for r in rows]) <= 10]
        lines.append(f"- Labels for 1,000 weeks in <= 10 min on 2 cores at the chosen K: "
                     f"{minutes:.1f} min — {'met' if minutes <= 10 else 'not met'}"
                     "; settings of the curve within it (median CPU s per validation week): "
                     f"{', '.join(fast) or 'none'}.")
    for (method, b, n) in res["students"]:
        on, dp, s = goal[("students", method, b, n)]
        text, lo, _ = paired_ci(on - dp)
        lines.append(f"- Distilling the online teacher beats distilling the DP at equal data and class ({method}, {b},"
                     f" {n} weeks): {text} — {'met' if lo > 0 else 'not met'}.")
    candidates = []  # every learner of the planner is a candidate: all listed
    for method, b, n in res["students"]:
        on, _, s = goal[("students", method, b, n)]
        candidates.append((f"the {method} student of the planner, {n} weeks", b, on, s))
    candidates += [(f"PPO from the {'planner' if t == 'online' else 'DP'}'s BC student, {n} weeks", b,
                    *goal[("finetune", t, b, n)])
                   for (_, b, n) in res.get("finetune", {}) for t in ("online", "dp")]
    ms = res["decision_ms"]
    for name, b, on, s in candidates:
        if s is None:
            continue
        m, lo, hi = bootstrap_ci(on - s, n_resamples=100_000)
        if b == "B10":
            ok = m >= 0.01 and lo > 0 and ms <= 0.1
            aim = "Sequential + 0.01 with an interval excluding 0, <= 0.1 ms per decision"
        else:
            ok, aim = m >= 0, "Sequential"
        lines.append(f"- A deployable learned allocator >= {aim} at {b} ({name}, {ms:.3f} ms per decision): "
                     f"{m:+.4f} [{lo:+.4f}, {hi:+.4f}] — "
                     f"{'met' if ok else 'not met'}.")
    return lines


def minutes_per_1000_weeks(cpu_seconds) -> float:
    """Minutes 1,000 weeks of labels take on 2 cores at the median CPU seconds per week ``cpu_seconds``."""
    return float(np.median(cpu_seconds)) * 1000 / 2 / 60


def _runs(ws):
    ws = sorted(ws)
    out, start = [], ws[0]
    for a, b in zip(ws, ws[1:] + [None]):
        if b != a + 1:
            out.append((start, a))
            start = b
    return out


def page_study_main(argv, *, study, page, doc, quick_help, configs, measure, render):
    """``main`` of a checkpointed page study (this one, history-students): ``--quick`` runs ``configs[1]``
    instead of ``configs[0]``; tasks are checkpointed under :data:`CACHE` unless ``--checkpoint-dir`` says
    otherwise; the page goes to ``--out`` (default a new run folder) and to standard output."""
    p = argparse.ArgumentParser(prog=f"python -m membudget.evaluate {study}", description=plain(doc),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help=quick_help)
    add_page_flag(p, study, page)
    add_backend_flags(p)
    a = p.parse_args(argv)
    a.checkpoint_dir = a.checkpoint_dir or CACHE
    cfg = configs[1] if a.quick else configs[0]
    a.out = page_path(a.out, study, page)
    res = run_with_flags(a, lambda progress, executor: measure(cfg, progress, executor))
    text = render(cfg, res, f"python -m membudget.evaluate {study}" + (" --quick" if a.quick else ""))
    write_page(a.out, text)
    print(text)
    return res


def main(argv=None):
    return page_study_main(argv, study="online-ceiling", page="online_ceiling.md", doc=__doc__,
                           quick_help="two weeks per set, small K, B10 only, one learner seed",
                           configs=(FULL, QUICK), measure=measure, render=render)
