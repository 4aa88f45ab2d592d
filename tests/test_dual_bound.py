"""The information-relaxation bound (teachers.dual_bound): its conditional probabilities against the generator's
own frequencies, the bound against the hindsight DP and against the penalised value of any schedule, bad input."""

import numpy as np
import pytest

from membudget.envs.pm import budget_levels, generate_episode
from membudget.envs.pm.world import POS, WorldConfig
from membudget.teachers import HindsightDP
from membudget.teachers.dual_bound import (InformationRelaxationBound, penalised_rows, penalty_tables,
                                           resolution_probabilities, resolutions)

B10 = budget_levels()["B10"]


def test_resolution_probabilities_are_probabilities_of_what_can_happen():
    ep = generate_episode(4000)
    rows = penalised_rows(ep)
    assert rows.size > 5
    for i in rows[:6]:
        pi_tp, pi_fp = resolution_probabilities(ep, i, WorldConfig())
        both = pi_tp + pi_fp
        assert both.min() >= 0 and both.max() <= 1 + 1e-12
        assert not pi_tp[:int(ep.declared_start[i])].any()  # no onset before the declared window
        assert not both[int(ep.active_until[i]) + 1:].any()  # nothing after the row left the ledger
        assert not np.triu(both[:, 1:]).any()  # only links p < q
        if ep.version[i] > 0:  # a new version is a task
            assert not pi_fp.any()


@pytest.mark.slow
def test_resolution_probabilities_match_the_generators_frequencies():
    """Along rules the agent could follow from 4 steps before the declared window (a query at the first step whose
    hint reaches 0.6, or 3 or 8 steps later), the mean of π equals the frequency of what happens, rule by rule, for
    tasks and lures: a wrong conditional would give the penalty a non-zero mean. The hint rule is what a
    conditional that ignored the hints would fail (checked by mutation)."""
    world = WorldConfig()
    out = {}
    for s in range(3200, 3280):
        ep = generate_episode(s)
        for i in penalised_rows(ep):
            pi_tp, pi_fp = resolution_probabilities(ep, i, world)
            x = resolutions(ep, i)
            start = max(int(ep.active_from[i]), int(ep.onset[i]))
            p = max(-1, int(ep.declared_start[i]) - 4)
            if start <= p:
                continue
            hints = ep.hints[:, ep.resource[i]]
            rules = {"hint": next((q for q in range(p + 1, ep.horizon) if hints[q] >= 0.6), None),
                     "3 steps": p + 3, "8 steps": p + 8}
            task = ep.polarity[i] == POS
            for rule, q in rules.items():
                if q is not None and q < ep.horizon:
                    for kind, hit, pi in (("tp", task, pi_tp), ("fp", not task, pi_fp)):
                        out.setdefault((rule, kind), []).append(x[q, p + 1] * hit - pi[q, p + 1])
    for key, d in out.items():
        d = np.array(d)
        assert d.size > 300
        assert abs(d.mean()) < 4 * d.std() / np.sqrt(d.size) + 1e-4, key


@pytest.mark.parametrize("week", [4000, 4003])
def test_without_penalty_the_bound_lies_at_or_above_the_dp(week):
    ep = generate_episode(week)
    dp = HindsightDP(budget=B10, per_step_cap=2).solve(ep).f1
    free = InformationRelaxationBound(budget=B10, c_tp=0, c_fp=0).fit().solve(ep).value
    assert free >= dp - 1e-9
    assert free - dp < 0.01  # the split of Set F1 and the dropped caps cost little


def test_the_bound_lies_above_every_schedules_penalised_value():
    """The inner maximum is bounded, so the week's bound is at least Set F1 - Z of any schedule within the
    budget; here the DP's and a few random ones, Z summed over their links independently of the bound's code."""
    ep = generate_episode(4001)
    bound = InformationRelaxationBound(budget=B10).fit()
    value = bound.solve(ep).value
    z_tp, z_fp = penalty_tables(ep, WorldConfig())
    dp = HindsightDP(budget=B10, per_step_cap=2)
    schedules = [dp.solve(ep).schedule]
    rng = np.random.default_rng(0)
    for _ in range(5):
        steps = np.sort(rng.choice(ep.horizon, size=B10, replace=False))
        schedules.append([(int(t), int(rng.integers(ep.n_resources))) for t in steps])
    for schedule in schedules:
        f1, z = _penalised(ep, schedule, z_tp, z_fp, bound)
        assert value >= f1 - z - 1e-9


def _penalised(ep, schedule, z_tp, z_fp, bound):
    """Set F1 of a schedule replayed on the week by the DP's problem tables, and its penalty."""
    from membudget.teachers.hindsight_dp import _rest_tables
    from membudget.teachers.problem import f1_of_counts, problem_from_episode

    prob = problem_from_episode(ep, budget=B10, per_step_cap=None, per_step_cost_cap=None, late_policy="expire",
                                lookahead=2)
    tp_t, fp_t, ms = _rest_tables(ep.horizon, ep.n_resources, 0, prob.res, prob.start, prob.until, prob.deadline,
                                  prob.positive, False, prob.cand_lo, prob.cand_hi)
    last = np.full(ep.n_resources, -1)
    tp = fp = 0
    z = 0.0
    for q, r in schedule:
        if ms[r, q] > last[r]:  # a candidate: the query runs (else the executor skips it)
            p = last[r]
            tp += tp_t[r, q, p + 1]
            fp += fp_t[r, q, p + 1]
            z += bound.c_tp * z_tp[r, q, p + 1] + bound.c_fp * z_fp[r, q, p + 1]
            last[r] = q
    return f1_of_counts(prob.tp_fixed + tp, prob.fp_fixed + fp, prob.due), z


def test_bad_settings_and_weeks_are_refused():
    with pytest.raises(RuntimeError, match="not fitted"):
        InformationRelaxationBound(budget=B10).solve(generate_episode(0))
    for kwargs in ({"budget": 0}, {"budget": B10, "c_tp": float("nan")}, {"budget": B10, "c_fp": "0.1"}):
        with pytest.raises(ValueError):
            InformationRelaxationBound(**kwargs).fit()
    bound = InformationRelaxationBound(budget=B10).fit()
    for ep in (generate_episode(0, cost_profile="mild"), generate_episode(0, load=1)):
        with pytest.raises(ValueError, match="default world"):
            bound.solve(ep)
    assert repr(bound) == "InformationRelaxationBound(budget=21, c_tp=0.0075, c_fp=-0.005)"


def test_bench_prints_the_bound_beside_the_dp_and_refuses_bad_flags(capsys):
    from membudget.bench.dual_bound import main

    main(["--weeks", "4000", "--budgets", "B10"])
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| B10 |"))
    dp, free, bound = (float(x) for x in row.split("|")[2:5])
    assert dp == pytest.approx(HindsightDP(budget=B10, per_step_cap=2).solve(generate_episode(4000)).f1, abs=1e-4)
    assert free >= dp and bound < dp  # week 4000: the penalty lowers the bound below the DP
    for flags in (["--c-tp", "nan"], ["--budgets", "B7"], ["--weeks", "x"]):
        with pytest.raises(SystemExit) as e:
            main(flags)
        assert e.value.code == 2
