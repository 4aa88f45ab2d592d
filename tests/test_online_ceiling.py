"""The online-ceiling study (membudget.studies.online_ceiling): the planner's setting is chosen on the validation
weeks alone, the page's figures and verdicts follow from the per-week results, and a re-run loads its tasks."""

import numpy as np
import pytest

from membudget.studies import online_ceiling as oc

CFG = oc.CeilingConfig(validation=(1, 2), held_out=(3, 4, 5), curve=((1, 8), (2, 8)), curve_only=((64, 128),),
                       budgets=("B5", "B10"),
                       students=(("bc", "B10", 2), ("bc", "B10", 1), ("dagger", "B10", 1)),
                       learner_seeds=(0, 1), bayes_grid=(0.2, 0.4, 0.6, 0.8), finetune=(("bc", "B10", 1),))
SEQ = np.array([0.70, 0.72, 0.74])
DP = np.array([0.80, 0.82, 0.84])


class FakeExecutor:
    """Canned per-week results for the study's tasks; records every item asked for."""

    def __init__(self, planner_f1, student_f1, gate_f1=lambda b, th, w: 0.7, seed_step=0.0):
        self.planner_f1, self.student_f1, self.gate_f1, self.asked = planner_f1, student_f1, gate_f1, []
        self.seed_step = seed_step  # planner seed s adds s * seed_step to a week's Set F1

    def map(self, fn, items):
        from membudget.agents.imitation import dp_demonstrations

        items = list(items)
        self.asked += [(fn.__name__, it) for it in items]
        if fn is oc.references:
            return [{"Sequential": SEQ[:len(weeks)], "CurrentGreedy": DP[:len(weeks)] - 0.01,
                     "HindsightDP": DP[:len(weeks)], "dp_cpu": 0.002} for _, weeks in items]
        if fn is oc.planner_week:
            return [{"set_f1": self.planner_f1(b, k, m, w) + self.seed_step * sum(s), "cpu": 1.0, "fallbacks": 0}
                    for b, k, m, w, *s in items]
        if fn is oc.planner_labels:
            return [{"demos": dp_demonstrations([w], b), "cpu": 2.0} for b, k, m, w in items]
        if fn is oc.bayes_gate_week:
            return [{"set_f1": self.gate_f1(b, th, w), "queries": 4.0 + th, "cpu": 1.5} for b, k, m, th, w in items]
        if fn is oc.finetune_task:
            return [{"set_f1": self.student_f1 + 0.01 * (1 + seed), "selected_env_steps": 5120, "engine": "compiled"}
                    for _, _, seed, *_ in items]
        if fn is oc.decision_ms:
            return [0.08 for _ in items]
        if fn in (oc.student_task, oc.dagger_task):
            return [{"set_f1": self.student_f1} for _ in items]
        raise AssertionError(fn)


def test_the_setting_is_chosen_on_validation_and_used_on_held_out():
    # (2, 8) is the best candidate on validation weeks (1, 2); (1, 8) would be better on the held-out weeks, which
    # never choose; (64, 128), best of all on validation, is measured for the curve alone
    def f1(b, k, m, w):
        return 0.9 if k == 64 else 0.75 + (0.01 if (k == 2) == (w < 3) else 0.0)

    ex = FakeExecutor(f1, np.full(3, 0.7))
    res = oc.measure(CFG, progress=lambda m: None, executor=ex)
    assert res["chosen"] == (2, 8)
    assert list(res["curve"]) == [(1, 8), (2, 8), (64, 128)]
    text = oc.render(CFG, res, "cmd")  # the curve-only row against the chosen setting, paired over the weeks
    assert "Against the chosen setting on the same weeks (paired): K = 64, 128 particles +0.1400 [+0.1400, " \
        "+0.1400]." in text
    planner = [it for name, it in ex.asked if name == "planner_week"]
    assert planner[-2:] == [("B10", 64, 128, 1), ("B10", 64, 128, 2)]  # measured last
    held = [it for name, it in ex.asked if name == "planner_week" and it[3] >= 3]
    # planner seed 0's items keep four fields (their checkpoints), seeds 1 and 2 add theirs
    assert sorted(held) == sorted((b, 2, 8, w, *((s,) if s else ())) for b in ("B5", "B10") for w in (3, 4, 5)
                                  for s in (0, 1, 2))
    assert all(len(it) == 4 for name, it in ex.asked if name == "planner_week" and it[3] < 3)
    labels = [it for name, it in ex.asked if name == "planner_labels"]
    assert labels == [("B10", 2, 8, 2000), ("B10", 2, 8, 2001)] + [("B10", 2, 8, 2000)] * 2  # 2 weeks, 1, 1
    order = [it[0] for name, it in ex.asked if name in ("planner_week", "planner_labels") and it[3] >= 3]
    # held-out B10 (3 planner seeds), the first students' labels (2 weeks), held-out B5, the other students' labels
    assert order == ["B10"] * 9 + ["B10"] * 2 + ["B5"] * 9 + ["B10"] * 2
    assert list(res["held_out"]) == ["B5", "B10"]  # the page's order, whatever order they ran in
    assert list(res["students"]) == [("bc", "B10", 2), ("bc", "B10", 1), ("dagger", "B10", 1)]
    assert res["students"][("bc", "B10", 1)]["states"] == 80 and res["students"][("bc", "B10", 2)]["states"] == 160
    dagger = [it for name, it in ex.asked if name == "dagger_task"]
    assert [(t, seed, train) for t, _, _, seed, train, _, _ in dagger] == [
        ("online", 0, (2000,)), ("online", 1, (2000,)), ("dp", 0, (2000,)), ("dp", 1, (2000,))]
    assert all(it[5] == (2, 8) and (it[1] is None) == (it[0] == "dp") for it in dagger)


def test_the_page_states_the_figures_and_the_verdicts():
    # B10: the planner plays the DP's scores (gap closed 1, +0.10 over Sequential); B5: Sequential - 0.01
    def f1(b, k, m, w):
        return 0.9 if w < 3 else float(DP[w - 3] if b == "B10" else SEQ[w - 3] - 0.01)

    ex = FakeExecutor(f1, np.array([0.70, 0.72, 0.74]))
    res = oc.measure(CFG, progress=lambda m: None, executor=ex)
    for st in res["students"].values():  # mean over the learner seeds: Sequential + 0.04
        st["online"] = [{"set_f1": SEQ + 0.05}, {"set_f1": SEQ + 0.03}]
    text = oc.render(CFG, res, "cmd")
    assert "| B10 | 0.7200 | 0.8200 | +0.1000 [+0.1000, +0.1000] | 1.00 |" in text
    assert "| B5 | 0.7200 | 0.7100 | -0.0100 [-0.0100, -0.0100] | -0.10 |" in text
    assert "above Sequential's at B10 and not at B5." in text
    assert "Planner >= Sequential + 0.015 at B10 with an interval excluding 0: +0.1000, interval excludes 0 — met." \
        in text
    assert "B5 -0.10, B10 1.00 — not met" in text
    # labels: 2 s CPU a week (16.7 min per 1,000 weeks on 2 cores); the curve's settings: 1 s (8.3 min)
    assert "at the chosen K: 16.7 min — not met; settings of the curve within it (median CPU s per validation " \
        "week): K = 1, 8 particles (1.00 s), K = 2, 8 particles (1.00 s), K = 64, 128 particles (1.00 s)." in text
    assert "equal data and class (bc, B10, 1 weeks): +0.0400 [+0.0400, +0.0400] — met." in text
    assert "equal data and class (dagger, B10, 1 weeks): +0.0400 [+0.0400, +0.0400] — met." in text
    assert "ms per decision at B10 (the bc student of the planner, 2 weeks, 0.080 ms per decision): " \
        "+0.0400 [+0.0400, +0.0400] — met." in text
    assert "| BC | B10 | 1 | 80 | 0.7600 | 0.7200 |" in text and "| DAgger | B10 | 1 | 80 | 0.7600 | 0.7200 |" in text
    assert "0.7700 / 0.7200; 0.7500 / 0.7200 |\n" in text  # per learner seed
    assert "this class (and of PPO started from one, the same network) takes 0.080 ms" in text
    # PPO from the students: seed 0 ends at the student + 0.01, seed 1 at + 0.02 (both starts, canned alike)
    assert "| planner's BC student | B10 | 1 | 0.7600 | 0.7350 | +0.0150 [+0.0150, +0.0150] | " \
        "-0.0250 [-0.0250, -0.0250] | 0.7300; 0.7400 | 5,120, 5,120 | compiled |" in text
    assert "| DP's BC student | B10 | 1 | 0.7200 | 0.7350 | +0.0150 [+0.0150, +0.0150] | " \
        "+0.0150 [+0.0150, +0.0150] |" in text
    assert "(PPO from the planner's BC student, 1 weeks, 0.080 ms per decision): +0.0150 [+0.0150, +0.0150] — met." \
        in text


def test_the_planner_on_a_held_out_week_is_the_mean_over_its_seeds():
    # planner seeds 0, 1, 2 play 0.00, +0.03, +0.06 above the DP's Set F1 at B10: the page's planner is +0.03
    def f1(b, k, m, w):
        return 0.8 if w < 3 else float(DP[w - 3])

    res = oc.measure(CFG, progress=lambda m: None, executor=FakeExecutor(f1, np.full(3, 0.7), seed_step=0.03))
    assert list(res["held_out"]["B10"]) == [0, 1, 2]
    np.testing.assert_allclose(oc.planner_f1(res["held_out"]["B10"]), DP + 0.03)
    text = oc.render(CFG, res, "cmd")
    assert "| B10 | 0.7200 | 0.8500 | +0.1300 [+0.1300, +0.1300] | 1.30 | 0.8100 | 0.8200 | " \
        "-0.0300 [-0.0300, -0.0300] | 0.8200; 0.8500; 0.8800 | 1.00 |" in text
    assert "on the held-out weeks the planner plays with seeds 0, 1, 2 and its Set F1 per week is their mean" in text


def test_finetune_entries_must_be_bc_students_of_the_study():
    ex = FakeExecutor(lambda b, k, m, w: 0.8, np.full(3, 0.7))
    for bad in (("dagger", "B10", 1), ("bc", "B10", 3)):
        with pytest.raises(ValueError, match="finetune entries must be BC students"):
            oc.measure(oc.CeilingConfig(**{**CFG.__dict__, "finetune": (bad,)}), progress=lambda m: None, executor=ex)
    assert ex.asked == []  # refused before any work


def test_the_bayes_gate_threshold_is_chosen_on_validation_per_budget():
    # validation weeks (1, 2): 0.8 is best at B10, 0.2 at B5 (ties go to the higher threshold); the held-out weeks,
    # where 0.4 would win everywhere, never choose
    def gate_f1(b, th, w):
        if w >= 3:
            return 0.9 if th == 0.4 else float(SEQ[w - 3] + 0.02)
        return {"B10": {0.8: 0.8, 0.6: 0.8}, "B5": {0.2: 0.8}}[b].get(th, 0.6)

    ex = FakeExecutor(lambda b, k, m, w: float(DP[w - 3]) if w >= 3 else 0.8 + 0.01 * (k == 2), np.full(3, 0.7),
                      gate_f1)
    res = oc.measure(CFG, progress=lambda m: None, executor=ex)
    assert {b: res["bayes"][b]["threshold"] for b in CFG.budgets} == {"B5": 0.2, "B10": 0.8}
    asked = [it for name, it in ex.asked if name == "bayes_gate_week"]
    assert sorted(it for it in asked if it[4] >= 3) == sorted((b, 2, 8, th, w) for b, th in (("B5", 0.2), ("B10", 0.8))
                                                              for w in (3, 4, 5))
    assert sorted(it for it in asked if it[4] < 3) == sorted((b, 2, 8, th, w) for b in CFG.budgets
                                                             for th in CFG.bayes_grid for w in (1, 2))
    text = oc.render(CFG, res, "cmd")
    # held-out: Sequential + 0.02 (gap closed 0.02 / 0.10), the planner (= the DP) 0.08 above it
    assert "| B10 | 0.2: 0.6000; 0.4: 0.6000; 0.6: 0.8000; 0.8: 0.8000 | 0.8 | 0.7400 | +0.0200 [+0.0200, +0.0200] " \
        "| -0.0800 [-0.0800, -0.0800] | 0.20 | 4.80 | 1.50 |" in text
    assert "above Sequential with an interval excluding 0 at B5, B10, and below the planner with an interval " \
        "excluding 0 at B5, B10." in text


@pytest.mark.slow
def test_quick_study_runs_and_a_rerun_loads_its_tasks(tmp_path):
    from membudget import evaluate

    cache, out = tmp_path / "cache", tmp_path / "page.md"
    args = ["online-ceiling", "--quick", "--checkpoint-dir", str(cache), "--out", str(out)]
    res = evaluate.main(args)
    text = out.read_text()
    for b in oc.QUICK.budgets:
        dp = res["ref_held_out"][b]["HindsightDP"]
        assert list(res["held_out"][b]) == list(oc.QUICK.planner_seeds) == [0, 1]
        for rows in res["held_out"][b].values():
            assert np.all(np.array([r["set_f1"] for r in rows]) <= dp + 1e-9)  # the DP bounds the planner
    n = len(list(cache.glob("*.pkl")))
    # references, curve, held-out weeks (two planner seeds), label weeks, students, the Bayes gate's thresholds and
    # held-out weeks, PPO from each teacher's student, the class's decision time
    assert n == 2 + 2 * 2 + 2 * 2 + 2 + 2 + 2 * 2 + 2 + 2 + 1
    evaluate.main(args[:-1] + [str(tmp_path / "again.md")])
    assert len(list(cache.glob("*.pkl"))) == n
    assert (tmp_path / "again.md").read_text() == text  # CPU times included: nothing was recomputed
