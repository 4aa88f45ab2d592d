"""Play a policy-protocol policy on ConversationPM-v0 conversations: the loop the gates' threshold selection and the
study share."""

from __future__ import annotations

import numpy as np

from .env import ConversationPMEnv


def rollout(policy, seeds, **env_kwargs) -> dict:
    """Run ``policy`` (``predict(obs, state, episode_start, deterministic)``) once on each conversation in
    ``seeds``; returns ``{metric: array over conversations}`` of the scalar end-of-episode metrics."""
    seeds = list(seeds)
    env = ConversationPMEnv(**env_kwargs)
    out = {}
    for i, seed in enumerate(seeds):
        obs, _ = env.reset(seed=int(seed))
        state, start, done = None, np.ones(1, dtype=bool), False
        while not done:
            action, state = policy.predict(obs, state=state, episode_start=start, deterministic=True)
            obs, _, done, _, info = env.step(action)
            start = np.zeros(1, dtype=bool)
        for k, v in info["episode_metrics"].items():
            if np.ndim(v) == 0:
                out.setdefault(k, np.zeros(len(seeds)))[i] = v
    return out
