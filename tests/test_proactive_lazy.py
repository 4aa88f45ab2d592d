"""ProactiveStream-v0 builds its memory trace and features a chunk of days at a time (the first week at reset, the
rest as the episode reaches it): reading ``env.trace`` early, which builds the rest at once, changes nothing."""

import numpy as np
import pytest
from membudget.envs.proactive import ProactiveStreamEnv
from membudget.envs.proactive.env import FIRST_CHUNK_DAYS


def rollout(env, actions, read_trace_at):
    """Observations and rewards of one episode, reading ``env.trace`` before the step ``read_trace_at``."""
    obs, _ = env.reset(seed=7)
    out, done, i = [obs], False, 0
    while not done:
        if i == read_trace_at:
            assert len(env.trace.matches) == len(env.stream)   # the whole trace, built now
        obs, reward, done, _, _ = env.step(int(actions[i]))
        out.append(np.append(obs, reward))
        i += 1
    return np.array(out[1:]), out[0], env.trace


@pytest.mark.parametrize("scope", ["sports", "home", "code"])
def test_reading_the_trace_early_gives_the_same_episode_and_trace(scope):
    actions = np.random.default_rng(1).integers(0, 3, size=10_000)
    env = ProactiveStreamEnv(scope=scope)
    env.reset(seed=7)
    day = env.stream.time // 1440
    assert env._memory.ready == np.searchsorted(day, day[0] + FIRST_CHUNK_DAYS) < len(env.stream)
    lazy, first_lazy, trace_lazy = rollout(ProactiveStreamEnv(scope=scope), actions, read_trace_at=-1)
    eager, first_eager, trace_eager = rollout(ProactiveStreamEnv(scope=scope), actions, read_trace_at=0)
    np.testing.assert_array_equal(first_lazy, first_eager)
    np.testing.assert_array_equal(lazy, eager)
    assert trace_lazy.matches == trace_eager.matches and trace_lazy.records == trace_eager.records
    assert trace_lazy.regularities == trace_eager.regularities and trace_lazy.rejected == trace_eager.rejected
    for field in ("event_lo", "n_eligible", "n_segments"):
        np.testing.assert_array_equal(getattr(trace_lazy, field), getattr(trace_eager, field))
    assert [tuple(r.day for r in rs) for rs in trace_lazy.cycle_records] == \
           [tuple(r.day for r in rs) for rs in trace_eager.cycle_records]
