"""Record any policy's rollouts as a Minari dataset (the optional ``minari`` extra: ``pip install
"membudget[minari]"``; creating a dataset needs JAX).

The environment's step infos are not recorded: Minari needs the same info structure at every step, and the
end-of-episode summary (``info["episode_metrics"]``) exists only at termination — rewards sum to each episode's
score (Set F1 on PMWeek-v0), so the summary is recoverable from the dataset.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np


def record_minari(env: gym.Env, act, seeds, dataset_id: str, **create_kwargs):
    """Play one episode per seed of ``env`` (made with ``gym.make``, so the dataset can recover it), choosing
    actions with ``act(env, obs, info)``, and create the Minari dataset ``dataset_id`` (keyword arguments go to
    ``DataCollector.create_dataset``: ``algorithm_name``, ``author``, ...; by default ``eval_env`` is ``env``'s spec
    and ``requirements`` names this membudget version). Returns the dataset."""
    try:
        from minari import DataCollector
    except ImportError:  # named, so that the command lines' optional_extras print the install line
        raise ModuleNotFoundError("recording a Minari dataset needs the minari extra: "
                                  'pip install "membudget[minari]"', name="minari") from None
    collector = DataCollector(env, record_infos=False)
    for seed in seeds:
        obs, info = collector.reset(seed=int(seed))
        done = False
        while not done:
            obs, _, terminated, truncated, info = collector.step(act(collector.unwrapped, obs, info))
            done = terminated or truncated
    from membudget import __version__

    # the environment that recorded the data evaluates it, and the package that recreates it is named (Minari's
    # defaults leave both unset and warn)
    create_kwargs = {"eval_env": env.spec, "requirements": [f"membudget=={__version__}"], **create_kwargs}
    dataset = collector.create_dataset(dataset_id=dataset_id, **create_kwargs)
    collector.close()
    return dataset


def policy_actor(policy):
    """``act`` for :func:`record_minari` from a policy-protocol policy (``predict(obs) -> (action, state)``)."""
    def act(env, obs, info):
        return np.asarray(policy.predict(obs, deterministic=True)[0])
    return act
