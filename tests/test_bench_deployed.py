"""The deployed students' decision-time bench: its three students decide as their classes do, and its summary
states each figure against the goal."""

import re

import pytest

from membudget.bench import deployed


def test_the_bench_times_the_three_deployed_classes_and_states_the_goal(capsys):
    deployed.main(["--rounds", "1", "--weeks", "8000", "--train-weeks", "2000-2001"])
    out = capsys.readouterr().out
    lines = {m.group(1): (float(m.group(2)), m.group(3)) for m in re.finditer(
        r"^(one observation|frame stack|learned recurrence): median ([0-9.]+) ms per decision.*target <= 0.1 ms: "
        r"(met|not met)\)$", out, re.M)}
    assert set(lines) == {"one observation", "frame stack", "learned recurrence"}
    for ms, verdict in lines.values():
        assert ms > 0 and verdict == ("met" if ms <= deployed.GOAL_MS else "not met")
    assert out.startswith("CPU: torch capability ")


def test_the_bench_s_students_are_the_studies_classes():
    from membudget.agents.history import GRUHistory, History, HistoryStudent
    from membudget.agents.per_resource import PerResourceNet, StudentPolicy

    s = deployed.students([2000], "B10")
    assert isinstance(s["one observation"], StudentPolicy) and isinstance(s["one observation"].net, PerResourceNet)
    stack, gru = s["frame stack"], s["learned recurrence"]
    assert isinstance(stack, HistoryStudent) and type(stack.history) is History
    assert (stack.history.frames, stack.history.decays) == (deployed.FRAMES, deployed.DECAYS)
    assert isinstance(gru, HistoryStudent) and isinstance(gru.history, GRUHistory) and gru.history.hidden == 64


@pytest.mark.parametrize("flag,value", [("--weeks", "8009-8000"), ("--train-weeks", "x"), ("--budget", "B7")])
def test_the_bench_refuses_bad_flags_before_any_work(capsys, flag, value):
    with pytest.raises(SystemExit) as e:
        deployed.main([flag, value])
    assert e.value.code == 2 and flag in capsys.readouterr().err
