"""How well the posterior's probabilities predict the true week (``PMWeek-v0``). Along the online planner's own play
(:class:`~membudget.teachers.online.HindsightPlanner`, seed = the week), at each of its decisions and for each
affordable candidate, two of its estimates are set against what a query of that resource would do now in the
true week: ``p_resolve``, the share of its ``K`` draws in which the query resolves a stored intention, and
``p_tp``, the share in which it resolves one on time (a true positive).

An exact posterior is calibrated: among the candidates where it says p, the event happens with frequency p. The
``K`` draws' Monte-Carlo error pulls the frequencies of the extreme bins towards the overall mean, less so as
``K`` grows. The planner's candidates at a decision share its draws, so the standard errors (binomial, per bin)
are a guide, not an interval.

Prints, per estimate, a reliability table (bins of p: exactly 0, (0, 0.1), [0.1, 0.3), ..., [0.9, 1), exactly 1;
the number of candidates, their mean p, the event's frequency and its standard error), then the mean p against
the frequency over all candidates, the Brier score and the share of decisions whose draws' effective sample size
is below 4.

``python -m membudget.bench.posterior_calibration [--weeks 4000-4029] [--budget B10] [--samples 32]
[--particles 64]``
"""

from __future__ import annotations

import argparse

import numpy as np

from membudget.envs.validation import int_flag, parse_seeds, seeds_flag
from membudget.studies.cli import plain

BIN_EDGES = (0.1, 0.3, 0.5, 0.7, 0.9)
"""Inner edges of the reliability bins; p = 0 and p = 1 have bins of their own."""


def calibration_rows(weeks, budget: str, samples: int, particles: int) -> dict:
    """Per affordable candidate at each of the planner's decisions: ``p_resolve``, ``resolves`` (true week: a query
    now resolves a stored intention), ``p_tp``, ``tp`` (true week: it resolves one on time); and ``ess`` per
    decision."""
    from membudget.envs.pm import PMWeekEnv
    from membudget.envs.pm.core import F_RES
    from membudget.teachers.current_greedy import _step_effects, firing
    from membudget.teachers.observed import AgentView
    from membudget.teachers.online import HindsightPlanner
    from membudget.teachers.problem import env_week

    out = {k: [] for k in ("p_resolve", "resolves", "p_tp", "tp", "ess")}
    for w in weeks:
        planner = HindsightPlanner(env=AgentView(PMWeekEnv(budget=budget, per_step_cap=2)), n_samples=samples,
                                   n_particles=particles, seed=w).fit()
        env = planner.env
        obs, _ = env.reset(seed=w)
        _, core = env_week(env)
        done = False
        while not done:
            t = int(core.t[0])
            action, _ = planner.predict(obs)
            last = planner.last_
            if last is not None and last["t"] == t:
                tab, _, fires = firing(core)
                R = core.n_resources
                resolves = np.bincount(tab[fires, F_RES], minlength=R) > 0
                tp = _step_effects(core, 0)[0] > 0
                c = last["candidates"]
                for key, values in (("p_resolve", last["p_resolve"]), ("resolves", resolves),
                                    ("p_tp", last["p_tp"]), ("tp", tp)):
                    out[key].append(np.asarray(values)[c])
                out["ess"].append(np.array([last["ess"]]))
            obs, _, done, _, _ = env.step(action)
    return {k: np.concatenate(v) if v else np.zeros(0) for k, v in out.items()}


def reliability(p: np.ndarray, event: np.ndarray) -> list:
    """``(bin label, n, mean p, frequency, standard error)`` per non-empty bin of :data:`BIN_EDGES`, with p = 0 and
    p = 1 apart."""
    event = event.astype(float)
    edges = (0.0,) + BIN_EDGES + (1.0,)
    bins = [("0", p == 0)]
    for lo, hi in zip(edges[:-1], edges[1:]):  # the first bin leaves out p = 0, which has its own
        bins.append((f"{'(' if lo == 0 else '['}{lo:g}, {hi:g})", ((p > lo) if lo == 0 else (p >= lo)) & (p < hi)))
    bins.append(("1", p == 1))
    rows = []
    for label, m in bins:
        n = int(m.sum())
        if n:
            f = float(event[m].mean())
            rows.append((label, n, float(p[m].mean()), f, float(np.sqrt(f * (1 - f) / n))))
    return rows


def main(argv=None):
    from membudget.envs.pm import budget_levels
    from membudget.studies.protocol import machine_line

    ap = argparse.ArgumentParser(prog="python -m membudget.bench.posterior_calibration", description=plain(__doc__),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--weeks", type=seeds_flag("--weeks"), default=parse_seeds("4000-4029", "--weeks"))
    ap.add_argument("--budget", choices=sorted(budget_levels()), default="B10")
    ap.add_argument("--samples", type=int_flag(1), default=32, help="K, draws per decision")
    ap.add_argument("--particles", type=int_flag(1), default=64,
                    help="weighted draws behind the K")
    a = ap.parse_args(argv)
    r = calibration_rows(a.weeks, a.budget, a.samples, a.particles)
    print(f"weeks {a.weeks[0]}..{a.weeks[-1]} ({len(a.weeks)}), {a.budget}, K = {a.samples}, {a.particles} particles; "
          f"{r['p_resolve'].size} candidates at {r['ess'].size} decisions")
    for name, p, event in (("p_resolve", r["p_resolve"], r["resolves"]), ("p_tp", r["p_tp"], r["tp"])):
        print(f"\n{name}: mean p {p.mean():.4f}, frequency {event.mean():.4f}, Brier {np.mean((p - event) ** 2):.4f}")
        print("| p | candidates | mean p | frequency | standard error |")
        print("|---|---|---|---|---|")
        for label, n, mp, f, se in reliability(p, event):
            print(f"| {label} | {n} | {mp:.3f} | {f:.3f} | {se:.3f} |")
    print(f"\ndecisions whose draws' effective sample size is below 4: {np.mean(r['ess'] < 4):.3f}")
    print(machine_line())


if __name__ == "__main__":
    main()
