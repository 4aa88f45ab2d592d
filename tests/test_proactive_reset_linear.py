"""ProactiveStream-v0's episodes do work linear in the stream length, counted (not timed) as Python line events
executed in membudget.envs.proactive over a reset and every step of the episode (the reset builds the memory trace
and the features of the first days, the steps the rest as the episode reaches them). Generation and labels
(world.py, schema.py) do a bounded amount of work per generated event, the features and steps (env.py) per event and
retrieved regularity (at most three per event). The memory
trace (memory.py) does a bounded amount per event, per eligible regularity per day and per record replayed at the
weekly consolidations (at most 28 records per candidate regularity per week); the regularity store is bounded by its
distinct (trigger, behaviour, weekdays, disjoint window) keys, so the trace is linear in the days too. The numba kernels are not
counted: the stream generators loop once over days and their events, the feature kernels over the 99-event context
and the cycle's seven records per event."""

import collections
import os
import sys

import membudget.envs.proactive
import numpy as np
import pytest
from membudget.envs.proactive import ProactiveStreamEnv
from membudget.envs.proactive import memory as memory_module

ROOT = os.path.dirname(membudget.envs.proactive.__file__)


def episode_work(scope, n_days, monkeypatch, seed=3):
    """Python lines one episode (reset, then abstain on events only to the end) executes per module of
    envs/proactive, the events it drew, the regularities retrieved over them, the eligible regularities summed over
    the days and the records the weekly replays went through."""
    env = ProactiveStreamEnv(scope=scope, n_days=n_days)
    env.reset(seed=seed)                               # compile / warm everything first
    lines, replayed = collections.Counter(), [0]
    assess = memory_module.assess

    def counting_assess(reg, records):
        replayed[0] += len(records)
        return assess(reg, records)

    def local(frame, event, arg):
        if event == "line":
            lines[os.path.basename(frame.f_code.co_filename)] += 1
        return local

    def tracer(frame, event, arg):
        return local if frame.f_code.co_filename.startswith(ROOT) else None

    monkeypatch.setattr(memory_module, "assess", counting_assess)
    sys.settrace(tracer)
    try:
        env.reset(seed=seed)
        done = False
        while not done:
            done = env.step(0)[2]
    finally:
        sys.settrace(None)
    monkeypatch.undo()
    _, first_of_day = np.unique(env.stream.time // 1440, return_index=True)
    return (lines, len(env.stream), sum(map(len, env.trace.matches)),
            int(env.trace.n_eligible[first_of_day].sum()) + replayed[0])


@pytest.mark.parametrize("scope, days", [("sports", 56), ("home", 28), ("code", 56)])
def test_episode_work_grows_linearly_with_the_stream(scope, days, monkeypatch):
    """Work per unit on a stream four times as long: at most 5 % more for generation, labels and features (they
    are per event; the labels' former scan of the rest of the stream per routine deviation showed here as +8 % in
    Code and +29 % in Home), at most 15 % more for the memory trace (its per-unit cost drifts up while the store
    matures — replays of triggered days cost more than of untriggered ones — and levels off)."""
    (short, n_short, m_short, r_short), (long, n_long, m_long, r_long) = (
        episode_work(scope, d, monkeypatch) for d in (days, 4 * days))
    assert n_long > 3 * n_short
    for module in ("world.py", "schema.py"):
        assert long[module] / n_long <= 1.05 * short[module] / n_short, (module, short, long)
    assert long["env.py"] / (n_long + m_long) <= 1.05 * short["env.py"] / (n_short + m_short), (short, long)
    assert long["memory.py"] / (n_long + r_long) <= 1.15 * short["memory.py"] / (n_short + r_short), (short, long)
