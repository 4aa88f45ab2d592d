"""The imitation-gap study (membudget.studies.imitation_gap): both teachers label the same weeks, both classes are
fitted to each teacher's labels with the same seeds, and the page's paired figures are those of the tasks."""

import numpy as np
import pytest


def test_each_class_is_fitted_to_each_teachers_labels_of_the_same_weeks_and_the_page_follows():
    from membudget.agents.imitation import Demonstrations
    from membudget.studies import imitation_gap as ig
    from membudget.studies import online_ceiling as oc

    cfg = ig.GapConfig(held_out=(3, 4, 5), planner=(2, 8), runs=(("B10", 2), ("B5", 2)), learner_seeds=(0, 1),
                       gru=(8, 2))
    seq = np.array([0.70, 0.72, 0.74])
    asked = []

    def demos(tag):
        z = np.zeros((1, 2), np.float32)
        return Demonstrations(np.zeros((1, 2, 27), np.float32), np.zeros((1, 9), np.float32), z + 1, z + tag)

    class Fake:
        computed = 0

        def map(self, fn, items):
            items = list(items)
            asked.extend((fn.__name__, it) for it in items)
            self.computed += len(items)
            if fn is oc.references:
                return [{"Sequential": seq, "HindsightDP": seq + 0.05, "dp_cpu": 0.001} for _ in items]
            if fn is oc.planner_week:
                return [{"set_f1": 0.71 + 0.02 * (it[-1] - 3)} for it in items]
            if fn is oc.planner_labels:
                return [{"demos": demos(1.0), "cpu": 1.5} for _ in items]
            if fn is ig.dp_labels:
                return [demos(0.0) for _ in items]
            if fn is oc.student_task:  # equal students: no gap
                return [{"set_f1": seq + 0.001} for _ in items]
            if fn is ig.gru_student:  # the planner's labels (all 1) give a student 0.01 higher, seed by seed
                return [{"set_f1": seq + 0.01 * float(it[0][0].labels.max()) + 0.001 * it[3]} for it in items]
            raise AssertionError(fn)

    res = ig.measure(cfg, progress=lambda m: None, executor=Fake())
    for budget in ("B10", "B5"):
        labels = [it for fn, it in asked if fn == "planner_labels" and it[0] == budget]
        assert labels == [(budget, 2, 8, 2000), (budget, 2, 8, 2001)]
        assert [it for fn, it in asked if fn == "dp_labels" and it[0] == budget] == [(budget, 2000), (budget, 2001)]
        assert [it[-1] for fn, it in asked if fn == "planner_week" and it[0] == budget] == [3, 4, 5]
        for teacher, tag in (("online", 1.0), ("dp", 0.0)):
            gru = [it for fn, it in asked if fn == "gru_student" and it[1] == budget and
                   it[0][0].labels.max() == tag]
            assert [(it[2], it[3], it[4]) for it in gru] == [((8, 2), 0, (3, 4, 5)), ((8, 2), 1, (3, 4, 5))]
            assert all(len(it[0]) == 2 for it in gru)  # one Demonstrations per week for the recurrence
        one = [it for fn, it in asked if fn == "student_task" and it[1] == budget]
        assert [(float(it[0].labels.max()), it[2]) for it in one] == [(1.0, 0), (1.0, 1), (0.0, 0), (0.0, 1)]
        assert all(len(it[0].labels) == 2 for it in one)  # both weeks in one set of demonstrations
    run = res["runs"][("B10", 2)]
    assert run["states"] == {"online": 2, "dp": 2} and run["label_wall"][1] == 2

    text = ig.render(cfg, res, "python -m membudget.evaluate imitation-gap")
    assert "| B10 | 0.7200 | 0.7300 | 0.7700 | +0.0100 [+0.0100, +0.0100] |" in text
    assert "| B10 | 2 | learned recurrence | 0.7305 | 0.7205 | +0.0100 [+0.0100, +0.0100] |" in text
    assert "0.7300 / 0.7200; 0.7310 / 0.7210 |" in text
    assert "| B10 | 2 | one observation | 0.7210 | 0.7210 | +0.0000 [+0.0000, +0.0000] |" in text
    assert ("Distilling the online teacher beats distilling the DP at equal data and class (learned recurrence, "
            "B5, 2 weeks): +0.0100 [+0.0100, +0.0100] — met.") in text
    assert ("Distilling the online teacher beats distilling the DP at equal data and class (one observation, "
            "B10, 2 weeks): +0.0000 [+0.0000, +0.0000] — not met.") in text
    assert "| B10 | 2 | 2 / 2 | 1.50 (1.50, 1.50) | 12.5 min |" in text
    res["runs"][("B10", 2)]["label_wall"] = (3.0, 1)
    res["runs"][("B5", 2)]["label_wall"] = (1.0, 0)
    text = ig.render(cfg, res, "python -m membudget.evaluate imitation-gap")
    assert "| 3 s for the 1 weeks computed (50.0 min per 1,000), 1 loaded |" in text
    assert "| every week loaded from checkpoints |" in text


@pytest.mark.slow
def test_quick_run_bounds_every_student_by_the_dp_and_a_rerun_loads_every_task(tmp_path):
    from membudget import evaluate
    from membudget.studies import imitation_gap as ig

    cache = tmp_path / "cache"
    args = ["imitation-gap", "--quick", "--checkpoint-dir", str(cache), "--out"]
    res = evaluate.main(args + [str(tmp_path / "a.md")])
    (budget, n), = ig.QUICK.runs
    dp = np.asarray(res["teachers"][budget]["dp"])
    assert np.all(res["teachers"][budget]["online"] <= dp + 1e-9)  # the DP is each week's optimum
    for c in ig.CLASSES:
        for t in ig.TEACHERS:
            assert all(np.all(np.asarray(r["set_f1"]) <= dp + 1e-9) for r in res["runs"][(budget, n)][(c, t)])
    assert res["runs"][(budget, n)]["label_wall"][1] == n
    # references, the planner's held-out weeks, each teacher's label weeks, each class's student of each teacher
    assert len(list(cache.glob("*.pkl"))) == 1 + 2 + 2 * n + 2 * 2 * len(ig.QUICK.learner_seeds)
    again = evaluate.main(args + [str(tmp_path / "b.md")])
    assert again["runs"][(budget, n)]["label_wall"][1] == 0 and len(list(cache.glob("*.pkl"))) == 1 + 2 + 2 * n + 4
    a, b = ((tmp_path / f).read_text().splitlines() for f in ("a.md", "b.md"))
    differ = [(x, y) for x, y in zip(a, b) if x != y]
    assert len(a) == len(b) and len(differ) == 1  # only the labels' wall clock, measured in the first run alone
    assert f"{n} weeks computed" in differ[0][0] and "every week loaded from checkpoints" in differ[0][1]
