"""The info contract of every environment: at reset and at every step the same keys with fixed shapes and numeric
dtypes, so Gymnasium's vector environments batch it in every autoreset mode."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import membudget  # noqa: F401
from membudget.envs import shared_budget
from membudget.envs.registration import ENV_IDS


def _signature(info):
    """``{key: (shape, dtype kind)}`` of every (nested) entry; fails on anything that is not a number or array."""
    out = {}
    for k, v in info.items():
        if isinstance(v, dict):
            out.update({f"{k}.{kk}": vv for kk, vv in _signature(v).items()})
        else:
            a = np.asarray(v)
            assert a.dtype.kind in "biuf", f"{k}: {v!r} is not numeric"
            out[k] = (a.shape, a.dtype.kind)
    return out


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_reset_and_step_infos_have_one_signature(env_id):
    kwargs = {"budget": None} if env_id == "membudget/PMWeek-v0" else {}
    env = gym.make(env_id, **kwargs)
    _, info = env.reset(seed=1)
    sigs = {tuple(sorted(_signature(info).items()))}
    env.action_space.seed(1)
    done = False
    while not done:
        _, _, done, _, info = env.step(env.action_space.sample())
        metrics = info.pop("episode_metrics", None)
        sigs.add(tuple(sorted(_signature(info).items())))
    assert len(sigs) == 1, sigs
    _signature(metrics)  # the end-of-episode summary is numeric too
    assert not [k for k, v in metrics.items() if isinstance(v, dict)]  # and flat: batched info readers take it
    if env_id == "membudget/PMWeek-v0":
        assert metrics["exhaustion_step"] == -1 and metrics["spend_per_quarter"].shape == (4,)


def test_the_breakdown_per_trigger_type_is_flat_and_its_recall_is_hit_over_due():
    from membudget.envs.pm.env import TRIGGER_TYPES

    env = gym.make("membudget/PMWeek-v0")
    obs, _ = env.reset(seed=2000)
    done = False
    while not done:
        obs, _, done, _, info = env.step(obs["mask"].astype(np.int8))  # every candidate
    m = info["episode_metrics"]
    for t in TRIGGER_TYPES:
        due, hit, recall = m[f"{t}_due"], m[f"{t}_hit"], m[f"{t}_recall"]
        assert isinstance(due, (int, np.integer)) and isinstance(hit, (int, np.integer)) and 0 <= hit <= due
        assert recall == hit / due if due else np.isnan(recall)
    assert sum(m[f"{t}_hit"] for t in ("time", "channel", "visible")) == m["tp"]  # types that partition the TPs


def test_shared_budget_infos_have_one_signature():
    env = shared_budget.parallel_env(n_agents=2, budget=None)
    env.reset(seed=2)
    sigs = set()
    while env.agents:
        _, _, _, _, infos = env.step({a: env.action_space(a).sample() for a in env.agents})
        for info in infos.values():
            info.pop("episode_metrics", None)
            sigs.add(tuple(sorted(_signature(info).items())))
    assert len(sigs) == 1


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("mode", ["sync", "async-fork", pytest.param("async-spawn", marks=pytest.mark.slow)])
@pytest.mark.parametrize("autoreset", list(AutoresetMode))
def test_every_env_batches_in_gymnasium_vector_envs(env_id, mode, autoreset):
    kind, _, context = mode.partition("-")
    kwargs = {"autoreset_mode": autoreset}
    if kind == "async":
        kwargs["context"] = context
    steps = 3 if env_id == "membudget/TierRouting-v0" else 30  # a query has only 5 steps
    venv = gym.make_vec(env_id, num_envs=2, vectorization_mode=kind, vector_kwargs=kwargs,
                        max_episode_steps=steps)
    try:
        _, first = venv.reset(seed=0)
        venv.action_space.seed(0)
        for t in range(2 * steps + 5):  # two truncations and their resets
            _, _, term, trunc, info = venv.step(venv.action_space.sample())
            assert set(first) <= set(info)  # every reset key is batched at every step
            assert not term.any()
            if autoreset == AutoresetMode.DISABLED and trunc.any():
                venv.reset(options={"reset_mask": trunc})
    finally:
        venv.close()
