"""The comparison's work: :func:`run_benchmark` trains every learner of
:data:`~membudget.studies.rl_vs_distillation.configs.LEARNER_SPECS` at every budget and learner seed
(:func:`training_job`, one per run, through a study executor or local processes) and evaluates them and the
references on the held-out weeks."""

from __future__ import annotations

import dataclasses
import functools
import time

import numpy as np

from membudget.agents.configs import TRAIN_SEEDS, PPOConfig
from membudget.agents.imitation import fit_bc, fit_dagger
from membudget.agents.rl import as_policy, train_ppo_allocator
from membudget.envs.pm import budget_levels, generate_episode
from membudget.envs.pm.world import WorldConfig
from membudget.studies.protocol import evaluate_policy, rollout
from membudget.studies.rl_vs_distillation.configs import BENCH_FULL, BENCH_QUICK, LEARNER_SPECS, PER_STEP_CAP
from membudget.studies.rl_vs_distillation.results import Results
from membudget.studies.suite import fit_suite
from membudget.teachers import CurrentGreedy, HindsightDP, SchedulePolicy


def training_job(spec):
    """One training run of the comparison (picklable, seeded by its own key; runs in a worker process):
    ``(label, budget, seed, params, init)`` -> ``{key, per_week, history, net, training}``; ``label`` names a
    :data:`~membudget.studies.rl_vs_distillation.configs.LEARNER_SPECS` entry, ``init`` the student (``net``) of the
    learner it starts from."""
    import torch

    label, budget, seed, P, init = spec
    learner = LEARNER_SPECS[label]
    torch.set_num_threads(1)
    test = list(P["eval_seeds"])
    start = time.perf_counter()
    calls, net, mode = 0, None, {"action_mode": "scores"}
    if learner.family == "ppo":
        policy, history = _train_ppo(learner, budget, seed, P, init)
        calls = init["teacher_calls"] if init else 0
    elif learner.family in ("bc", "dagger"):
        fit = fit_bc if learner.family == "bc" else functools.partial(fit_dagger, iterations=P["dagger_iterations"])
        policy, history = fit(list(TRAIN_SEEDS)[: P["imitation_weeks"]], budget, epochs=P["epochs"], seed=seed)
        calls = policy.config["teacher_calls"]
        net = {"net": policy.net, "env_steps": history[-1]["env_steps"], "teacher_calls": calls}  # torch modules pickle
    else:
        model, history = train_ppo_allocator(budget, total_timesteps=P["sb3_steps"], seed=seed, eval_every=0)
        policy, mode = as_policy(model), {}
    per_week = rollout(policy, test, budget=budget, per_step_cap=PER_STEP_CAP, **mode)
    steps = model.num_timesteps if learner.family == "sb3-ppo" else history[-1]["env_steps"]
    if learner.family != "ppo":
        history[-1]["test_set_f1"] = float(per_week["set_f1"].mean())
    return {"key": (label, budget, seed), "per_week": per_week, "history": history, "net": net,
            "training": {"env_steps": int(steps), "teacher_calls": int(calls),
                         "wall_clock": float(history[-1]["wall_clock"]), "job_seconds": time.perf_counter() - start}}


def _train_ppo(learner, budget, seed, P, init):
    """Native PPO as ``learner`` says; distil-then-RL's curve starts where its student's training ended."""
    from membudget.agents.ppo import train_ppo

    kw = {}
    if learner.counts_critic:
        kw.update(total_timesteps=P["counts_steps"], critic_counts=True)
    if learner.actor != "per-resource":
        kw.update(actor=learner.actor, engine="autograd")  # the compiled engine trains the per-resource actor only
    policy, history = train_ppo(budget, P[learner.settings], seed=seed, eval_seeds=P["val_seeds"],
                                test_seeds=list(P["eval_seeds"]), init=init["net"] if init else None, **kw)
    if init:
        for row in history:
            row["env_steps"] += init["env_steps"]
    return policy, history


def run_jobs(specs, workers, say):
    if workers <= 1 or len(specs) <= 1:
        return [training_job(s) for s in specs]
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    out = []
    with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as ex:
        for r in ex.map(training_job, specs):
            say(f"done {r['key']}")
            out.append(r)
    return out


def run_benchmark(quick: bool = False, progress=None, executor=None, **overrides) -> Results:
    """Train every learner at every budget and learner seed, evaluate everything on the held-out weeks; returns
    their :class:`~membudget.studies.rl_vs_distillation.results.Results` (``executor``: a study executor, e.g. Ray;
    default: ``workers`` local processes; ``overrides``: entries of the settings)."""
    P = dict(BENCH_QUICK if quick else BENCH_FULL)
    P.update(overrides)
    say = progress or (lambda msg: None)
    jobs = (functools.partial(executor.map, training_job) if executor
            else lambda specs: run_jobs(specs, P["workers"], say))
    budgets, seeds, lseeds = list(P["budgets"]), list(P["eval_seeds"]), list(P["learner_seeds"])
    levels = budget_levels()
    t_start = time.perf_counter()
    say("imitation students (BC, DAgger)")
    students = [k for k, learner in LEARNER_SPECS.items() if learner.family in ("bc", "dagger")]
    first = jobs([(k, b, s, P, None) for b in budgets for s in lseeds for k in students])
    nets = {r["key"]: r["net"] for r in first}
    say("PPO, distil-then-RL, ablations")
    specs = [(k, b, s, P, nets[(learner.init, b, s)] if learner.init else None) for b in budgets for s in lseeds
             for k, learner in LEARNER_SPECS.items() if learner.family not in ("bc", "dagger")
             and (not learner.b10_only or b == "B10")]
    results = first + jobs(specs)
    per_seed, curves, training = {}, {}, {}
    for r in results:
        kind, b, _ = r["key"]
        per_seed.setdefault((b, kind), []).append(r["per_week"])
        curves.setdefault((kind, b), []).append(r["history"])
        training.setdefault((kind, b), []).append(r["training"])
    training = {k: {f: float(np.mean([t[f] for t in v])) for f in v[0]} for k, v in training.items()}
    per_week = {k: {m: np.mean([run[m] for run in v], axis=0) for m in v[0]} for k, v in per_seed.items()}
    say("teachers and references")
    suite = fit_suite(**(P["suite"] or {}), progress=lambda m: say(f"fit: {m}"),
                      **({"map": executor.map} if executor else {}))
    n_res = len(WorldConfig().resources)
    for b in budgets:
        weeks = [generate_episode(s) for s in seeds]
        dp = [HindsightDP(budget=levels[b], per_step_cap=PER_STEP_CAP).solve(w) for w in weeks]
        per_week[(b, "HindsightDP")] = rollout(SchedulePolicy([s.schedule for s in dp], n_res), seeds,
                                               budget=b, per_step_cap=PER_STEP_CAP)
        gap = float(np.max(np.abs(per_week[(b, "HindsightDP")]["set_f1"] - np.array([s.f1 for s in dp]))))
        if gap > 1e-9:
            raise RuntimeError(f"replaying the DP's schedules does not reproduce its Set F1 at {b} (gap {gap})")
        greedy = [CurrentGreedy(budget=levels[b], per_step_cap=PER_STEP_CAP).solve(w) for w in weeks]
        per_week[(b, "CurrentGreedy")] = rollout(SchedulePolicy([s.schedule for s in greedy], n_res), seeds,
                                                 budget=b, per_step_cap=PER_STEP_CAP)
        for name in ("Sequential", "Myopic", "Static"):
            if name == "Static" or (name.lower(), b) in suite.temporal:
                per_week[(b, name)] = evaluate_policy(suite, name, b, seeds)
    params = {k: dataclasses.asdict(v) if isinstance(v, PPOConfig) else v for k, v in P.items()}
    return Results(params=params, quick=quick, budgets=budgets, seeds=seeds, learner_seeds=lseeds,
                   per_week=per_week, per_seed=per_seed, training=training, curves=curves,
                   seconds=time.perf_counter() - t_start)
