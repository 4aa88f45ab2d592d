"""Play a policy-protocol policy (``predict(obs, state, episode_start, deterministic)``) on PMWeek-v0 weeks with
the native vector env: the one rollout loop every learner's validation, the studies and the benchmarks share."""

from __future__ import annotations

import numpy as np

from .vector import PMWeekVectorEnv


def rollout(policy, seeds, **env_kwargs) -> dict:
    """Run ``policy`` (policy protocol) once on each week in ``seeds`` with the native vector env; returns
    ``{metric: array over weeks}`` of the end-of-episode metrics (the numbers of ``info["episode_metrics"]``,
    ``spend_per_quarter`` of shape ``(weeks, 4)``; not the per-trigger-type breakdown) and ``exhaustion_progress``."""
    seeds = list(seeds)
    env = PMWeekVectorEnv(num_envs=len(seeds), **env_kwargs)
    obs, _ = env.reset(seed=seeds)
    done = np.zeros(len(seeds), dtype=bool)
    out = {}
    state, episode_start = None, np.ones(len(seeds), dtype=bool)
    while not done.all():
        action, state = policy.predict(obs, state=state, episode_start=episode_start, deterministic=True)
        obs, _, terminated, truncated, info = env.step(action)
        episode_start = terminated | truncated
        if "episode_metrics" in info:
            first = info["_episode_metrics"] & ~done
            for k, v in info["episode_metrics"].items():
                if not k.startswith("_") and not isinstance(v, dict):
                    out.setdefault(k, np.zeros(v.shape))[first] = v[first]
            done |= info["_episode_metrics"]
    env.close()
    horizon = env.world.horizon
    ex = out["exhaustion_step"]
    out["exhaustion_progress"] = np.where(ex > 0, ex / horizon, np.nan)
    return out
