"""``membudget/PMWeekFlat-v0``: PMWeek-v0 for libraries that take neither Dict observations nor MultiBinary
actions (Tianshou's and RLlib's default models, CleanRL-style MLP scripts).

The observation is the ``Dict`` flattened as ``gymnasium.spaces.flatten`` does — ``budget`` (9), ``mask`` (R),
``resources`` (R × 27), in that order: a ``Box`` of ``9 + 28 R`` float32 — and the action is
``MultiDiscrete([2] * R)`` (propose resource ``r`` or not), mapped one to one onto the binary proposal set. The
candidate mask stays in the observation and in ``env.unwrapped.action_masks()`` (sb3-contrib's per-dimension form,
which a ``MultiDiscrete([2] * R)`` shares). Everything else is PMWeek-v0's.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from .env import PMWeekEnv


class FlatObservation(gym.ObservationWrapper):
    """The observation flattened by ``gymnasium.spaces.flatten`` (Gymnasium's ``FlattenObservation`` holds a
    lambda and does not pickle).

    ## Observation Space

    ``Box(9 + 28 R,)`` float32 (317 for the default 11 resources): PMWeek-v0's ``budget`` (9), ``mask`` (R) and
    ``resources`` (R × 27) in that order, each part with its own bounds (``gymnasium.spaces.flatten_space``).
    """

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = gym.spaces.flatten_space(env.observation_space)

    def observation(self, observation):
        return gym.spaces.flatten(self.env.observation_space, observation)


class MultiDiscreteProposals(gym.ActionWrapper):
    """``MultiDiscrete([2] * R)`` actions for PMWeek-v0's binary proposal set.

    ## Action Space

    ``MultiDiscrete([2] * R)``: 1 proposes resource ``r``, 0 does not (sb3-contrib's per-dimension masks come from
    ``env.unwrapped.action_masks()``); anything else raises ``ValueError``.
    """

    def __init__(self, env):
        super().__init__(env)
        if env.unwrapped.action_mode != "binary":
            raise ValueError("MultiDiscreteProposals wraps PMWeek-v0 in action_mode='binary'")
        self.action_space = gym.spaces.MultiDiscrete([2] * env.action_space.n)

    def action(self, action):
        a = np.asarray(action)
        if a.shape != self.action_space.shape or a.dtype.kind not in "biu" or not np.isin(a, (0, 1)).all():
            raise ValueError(f"action must be {self.action_space.shape} integers in {{0, 1}}, got {action!r}")
        return a.astype(np.int8)


def make_flat(**kwargs) -> gym.Env:
    """The flat PMWeek-v0: keyword arguments are ``PMWeekEnv``'s (``action_mode`` is binary)."""
    if kwargs.get("action_mode", "binary") != "binary":
        raise ValueError("PMWeekFlat-v0 proposes with MultiDiscrete([2] * R): action_mode must be 'binary'")
    return MultiDiscreteProposals(FlatObservation(PMWeekEnv(**kwargs)))
