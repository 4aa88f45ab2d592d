"""The online planner (:class:`~membudget.teachers.online.HindsightPlanner`, hindsight optimisation over posterior
weeks; it sees only what the agent sees) against BudgetPM's Sequential gate, the current-greedy oracle and the
hindsight DP on ``PMWeek-v0`` weeks, per week and paired.

Sequential is fitted as in the study suite (the label dataset of development weeks 2000-2019, one budget); the DP
and current-greedy replay their schedules. Prints each week's Set F1 of every method, the means, the planner's
paired difference to Sequential with a percentile bootstrap 95% interval, the share of the DP − Sequential gap it
closes, and the planner's time per week.

With ``--students N``, also two BC students of one class fitted on development weeks 2000..2000+N-1, one to the
online planner's labels and one to the hindsight DP's (the imitation gap at equal data and class).

With ``--label-speed``, only the labelling speed (after a line naming the CPU): the planner plays the weeks (its own
rollouts, as the BC labels are made) and the bench prints its CPU and wall seconds per week, the minutes 1,000 weeks
of labels take on 2 cores (CPU seconds per week × 1,000 / 2 / 60) and the ratio to the hindsight DP's seconds per
week (one solve of each whole week); no references, no Set F1 comparison. With ``--workers N`` (N > 1) the
planner's figure is instead that of the online-ceiling study's own label task run on the weeks in N processes at
once (all cores busy, as in a study): the wall clock per 1,000 weeks.

With ``--planner-seeds S``, the planner's column is the online-ceiling study's own measure (its held-out bracket):
the study's planner task (:func:`~membudget.studies.online_ceiling.planner_week`: a planner fitted per week, seed =
the week + s × the study's stride) plays each week once per planner seed s, and a week's Set F1 is the mean over
the seeds; per seed means and the CPU seconds per week are printed too. ``--workers N`` runs the tasks in N
processes. This regenerates the page's held-out row of one budget at any ``K`` and ``--particles``.

With ``--rollout``, the rollout planner over Sequential (:class:`~membudget.teachers.online.RolloutPlanner`: each
first action valued by Sequential's play of the rest of each drawn week) beside the hindsight-optimisation planner
at the same ``K``, both with planner seed = the week (as the studies seed them), paired with each other.

``python -m membudget.bench.online [--weeks 8000-8009,9000-9009] [--samples K] [--particles M] [--budget B10]
[--students N] [--label-speed [--workers N]] [--planner-seeds 0,1,2 [--workers N]] [--rollout]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from membudget.envs.validation import int_flag, parse_seeds, seeds_flag
from membudget.studies.cli import plain
from membudget.studies.online_ceiling import dp_seconds, reference_scores
from membudget.teachers.online import DEFAULT_SAMPLES, default_particles


def parse_samples(text: str) -> list:
    """``"1,4,16"`` -> ``[1, 4, 16]`` (each in 1..4096)."""
    try:
        ks = [int(k) for k in text.split(",") if k.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not ks or any(not 1 <= k <= 4096 for k in ks):
        raise argparse.ArgumentTypeError(f"each K must lie in 1..4096, got {text!r}")
    return ks


def planner_scores(seeds, budget, samples, seed=0, particles=None, cpu=False):
    """Per-week Set F1 of the online planner (one planner, its random stream continued across the weeks;
    ``particles``: its weighted draws per decision, None for its default) and the seconds per week (with ``cpu``,
    also the CPU seconds per week: ``(f1, wall, cpu)``)."""
    from membudget.envs.pm import PMWeekEnv
    from membudget.teachers.observed import AgentView
    from membudget.teachers.online import HindsightPlanner, play

    planner = HindsightPlanner(env=AgentView(PMWeekEnv(budget=budget, per_step_cap=2)), n_samples=samples,
                               n_particles=particles, seed=seed).fit()
    f1, secs, cpus = [], [], []
    for s in seeds:
        t0, c0 = time.perf_counter(), time.process_time()
        f1.append(play(planner, s)["set_f1"])
        secs.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    print(f"planner: {planner.retries_} samplings retried with more particles, {planner.fallbacks_} decisions "
          "without a consistent draw (nothing proposed)")
    if cpu:
        return np.array(f1), np.array(secs), np.array(cpus)
    return np.array(f1), np.array(secs)


def label_speed(seeds, budget, samples, seed=0, particles=None, workers=1):
    """Prints the planner's labelling speed on ``seeds`` for each ``K`` in ``samples`` (module docstring); with
    ``workers`` > 1, that of the study's label task in that many processes (:func:`label_wall_clock`)."""
    from membudget.bench.report import machine
    from membudget.envs.pm import PMWeekEnv
    from membudget.teachers.observed import AgentView
    from membudget.teachers.online import HindsightPlanner, play

    print(f"machine: {machine()}")
    # the numba kernels compiled or loaded before the clock starts
    play(HindsightPlanner(env=AgentView(PMWeekEnv(budget=budget, per_step_cap=2)), n_samples=1, n_particles=8,
                          seed=seed).fit(), seeds[0])
    dp = dp_seconds(seeds, budget).mean()
    print(f"hindsight DP: {1e3 * dp:.1f} ms CPU per week ({len(seeds)} weeks at {budget})")
    if workers > 1:
        label_wall_clock(seeds, budget, samples, particles, workers, dp)
        return
    for k in samples:
        f1, wall, cpu = planner_scores(seeds, budget, k, seed, particles, cpu=True)
        m = "default" if particles is None else particles
        print(f"K={k} (particles {m}): {cpu.mean():.2f} s CPU per week (max {cpu.max():.2f}), {wall.mean():.2f} s "
              f"wall; labels for 1,000 weeks on 2 cores: {cpu.mean() * 1000 / 2 / 60:.1f} min; "
              f"{cpu.mean() / dp:.0f} times the DP's time per week; Set F1 {f1.mean():.4f} ({len(seeds)} weeks)")


def _map(fn, items, workers: int) -> list:
    """``[fn(item) for item in items]``, in ``workers`` fresh (spawned) processes, one item per task, where
    ``workers`` > 1 (each process compiles or loads the kernels on its first item, as a study's workers do)."""
    if workers == 1:
        return [fn(item) for item in items]
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        return pool.map(fn, items, chunksize=1)


def label_wall_clock(seeds, budget, samples, particles, workers, dp):
    """Prints, for each ``K`` in ``samples``, the wall clock of the online-ceiling study's own label task
    (:func:`~membudget.studies.online_ceiling.planner_labels`: a planner fitted per week, seed = the week, its
    demonstrations recorded) on ``seeds`` in ``workers`` processes at once, from their start (each compiles or loads
    the kernels on its first week, as a study's workers do), and its CPU seconds per week (``dp``: the hindsight
    DP's, for the ratio)."""
    from membudget.studies.online_ceiling import planner_labels

    for k in samples:
        m = default_particles(k) if particles is None else particles
        t0 = time.perf_counter()
        cpu = np.array([out["cpu"] for out in _map(planner_labels, [(budget, k, m, s) for s in seeds], workers)])
        wall = time.perf_counter() - t0
        print(f"K={k} (particles {m}), the study's label task in {workers} processes: {wall:.1f} s wall for "
              f"{len(seeds)} weeks, {wall / len(seeds) * 1000 / 60:.2f} min per 1,000 weeks; CPU per week median "
              f"{np.median(cpu):.3f} s, mean {cpu.mean():.3f} s, max {cpu.max():.2f} s; the median "
              f"{np.median(cpu) / dp:.0f} times the DP's time per week")


def study_planner_scores(seeds, budget, samples, particles, planner_seeds, workers=1):
    """Per-week Set F1 of the online-ceiling study's planner task at ``K = samples`` (module docstring), the mean
    over ``planner_seeds``, and its mean CPU seconds per week; prints each seed's mean."""
    from membudget.studies.online_ceiling import planner_week

    out = _map(planner_week, [(budget, samples, particles, w, s) for s in planner_seeds for w in seeds], workers)
    f1 = np.array([o["set_f1"] for o in out]).reshape(len(planner_seeds), len(seeds))
    cpu = np.array([o["cpu"] for o in out]).reshape(len(planner_seeds), len(seeds))
    print(f"Planner K={samples}: planner seeds {', '.join(map(str, planner_seeds))}: Set F1 per seed "
          f"{'; '.join(f'{m:.4f}' for m in f1.mean(axis=1))}; "
          f"{sum(o['fallbacks'] for o in out)} decisions without a consistent draw")
    return f1.mean(axis=0), cpu.mean(axis=0)


def student_scores(seeds, budget, train_weeks, samples, seed=0, particles=None):
    """Per-week Set F1 of two students of one class (:class:`~membudget.agents.per_resource.PerResourceNet`, BC,
    60 epochs) fitted on the same development weeks ``2000..`` — one to the online planner's labels, one to the
    hindsight DP's — and the seconds the online labels took."""
    from membudget.agents.imitation import dp_demonstrations, fit_net
    from membudget.agents.online_imitation import fit_online_bc
    from membudget.agents.per_resource import StudentPolicy
    from membudget.envs.pm.rollout import rollout

    train = list(range(2000, 2000 + train_weeks))
    t0 = time.perf_counter()
    online, demos = fit_online_bc(train, budget, samples=samples, particles=particles, seed=seed)
    secs = time.perf_counter() - t0
    dp = StudentPolicy(fit_net(dp_demonstrations(train, budget), seed=seed), config={"method": "bc"})
    kw = {"budget": budget, "per_step_cap": 2, "action_mode": "scores"}
    return rollout(online, seeds, **kw)["set_f1"], rollout(dp, seeds, **kw)["set_f1"], secs, len(demos)


def main(argv=None):
    from membudget.studies.protocol import bootstrap_ci

    p = argparse.ArgumentParser(prog="python -m membudget.bench.online", description=plain(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weeks", type=seeds_flag("--weeks"), default=parse_seeds("8000-8009,9000-9009", "--weeks"))
    p.add_argument("--samples", type=parse_samples, default=[DEFAULT_SAMPLES],
                   help="K, posterior weeks per decision (default: the planner's, the studies' choice); several "
                        "(comma-separated) give the planner's curve in K (the students use the first)")
    p.add_argument("--budget", default="B10")
    p.add_argument("--seed", type=int_flag(0), default=0, help="the planner's random stream")
    p.add_argument("--students", type=int_flag(0), default=0,
                   help="also fit BC students on this many development weeks (2000..) labelled by the online "
                        "planner and by the hindsight DP (0: none)")
    p.add_argument("--particles", type=int_flag(1), default=None,
                   help="the planner's weighted draws per decision (default: its own, max(64, 2 K))")
    p.add_argument("--no-planner", action="store_true", help="leave out the planner's own rollouts")
    p.add_argument("--rollout", action="store_true",
                   help="the rollout planner over Sequential beside the planner, each seeded with the week")
    p.add_argument("--label-speed", action="store_true",
                   help="only time the planner's labels (CPU s per week, minutes per 1,000 weeks on 2 cores, ratio "
                        "to the DP's time per week)")
    p.add_argument("--workers", type=int_flag(1, 64), default=1,
                   help="with --label-speed: time the study's label task in this many processes at once (wall "
                        "clock per 1,000 weeks) instead of one planner in this process; with --planner-seeds: run "
                        "the study's planner tasks in this many processes")
    p.add_argument("--planner-seeds", type=seeds_flag("--planner-seeds"), default=None,
                   help="play each week with the study's planner task once per planner seed (e.g. 0,1,2) and take "
                        "the mean per week, as the online-ceiling study's held-out bracket does")
    a = p.parse_args(argv)
    seeds = a.weeks
    if a.workers > 1 and not (a.label_speed or a.planner_seeds):
        p.error("--workers needs --label-speed or --planner-seeds")
    if a.planner_seeds and (a.rollout or a.no_planner or a.label_speed):
        p.error("--planner-seeds sets how the planner plays: not with --rollout, --no-planner or --label-speed")
    if a.label_speed:
        label_speed(seeds, a.budget, a.samples, a.seed, a.particles, a.workers)
        return
    ref = reference_scores(seeds, a.budget)
    names, cols, timing = [], [], []
    if a.rollout:
        from membudget.studies.online_ceiling import planner_week, rollout_week

        for k in a.samples:
            for name, task in (("Planner", planner_week), ("Rollout", rollout_week)):
                weeks = [task((a.budget, k, a.particles, s)) for s in seeds]
                names.append(f"{name} K={k}")
                cols.append(np.array([w["set_f1"] for w in weeks]))
                timing.append((k, np.array([w["cpu"] for w in weeks])))
    elif a.planner_seeds:
        for k in a.samples:
            f1, cpu = study_planner_scores(seeds, a.budget, k, a.particles, a.planner_seeds, a.workers)
            names.append(f"Planner K={k}")
            cols.append(f1)
            timing.append((k, cpu))
    elif not a.no_planner:
        for k in a.samples:
            f1, secs = planner_scores(seeds, a.budget, k, a.seed, a.particles)
            names.append(f"Planner K={k}")
            cols.append(f1)
            timing.append((k, secs))
    if a.students:
        s_on, s_dp, label_secs, n_states = student_scores(seeds, a.budget, a.students, a.samples[0], a.seed,
                                                          a.particles)
        names += ["BC(online)", "BC(DP)"]
        cols += [s_on, s_dp]
        print(f"students: {a.students} development weeks, {n_states} states; online labels took {label_secs:.0f} s")
    names += ["Sequential", "CurrentGreedy", "HindsightDP"]
    cols += [ref["Sequential"], ref["CurrentGreedy"], ref["HindsightDP"]]
    print("week  " + "  ".join(f"{n:>14}" for n in names))
    for i, s in enumerate(seeds):
        print(f"{s:<5} " + "  ".join(f"{c[i]:14.4f}" for c in cols))
    print("mean  " + "  ".join(f"{c.mean():14.4f}" for c in cols))
    for name, col in zip(names, cols):
        if name != "Sequential":
            m, lo, hi = bootstrap_ci(col - ref["Sequential"], n_resamples=100_000)
            print(f"{name} - Sequential: {m:+.4f} [{lo:+.4f}, {hi:+.4f}] (paired, {len(seeds)} weeks)")
    if a.students:
        m, lo, hi = bootstrap_ci(s_on - s_dp, n_resamples=100_000)
        print(f"BC(online) - BC(DP): {m:+.4f} [{lo:+.4f}, {hi:+.4f}]")
    if a.rollout:
        for k in a.samples:
            diff = cols[names.index(f"Rollout K={k}")] - cols[names.index(f"Planner K={k}")]
            m, lo, hi = bootstrap_ci(diff, n_resamples=100_000)
            print(f"Rollout K={k} - Planner K={k}: {m:+.4f} [{lo:+.4f}, {hi:+.4f}] (paired, {len(seeds)} weeks)")
    gap = ref["HindsightDP"].mean() - ref["Sequential"].mean()
    for (k, secs), name in zip(timing, names):
        f1 = cols[names.index(name)]
        share = (f1.mean() - ref["Sequential"].mean()) / gap if gap > 0 else float("nan")
        print(f"{name}: share of the DP - Sequential gap closed {share:.2f}; {secs.mean():.1f} s per week "
              f"(max {secs.max():.1f}{', CPU' if a.rollout or a.planner_seeds else ''}); {len(seeds)} weeks at "
              f"{a.budget}")


if __name__ == "__main__":
    main()
