"""Stable-Baselines3 on the native batched ``PMWeek-v0``.

SB3 cannot consume a Gymnasium ``VectorEnv``: it expects its own ``VecEnv`` with *same-step* autoreset (a finished
sub-environment is reset inside ``step``, the returned observation is the next episode's first one and the final
observation travels in ``infos[i]["terminal_observation"]``). :class:`PMWeekSB3VecEnv` adapts
:class:`~membudget.envs.pm.PMWeekVectorEnv` (NEXT_STEP autoreset) to that contract; it produces exactly what SB3's
``DummyVecEnv`` of single ``PMWeekEnv`` instances produces (tested), while stepping every week in one kernel call.
``env_method("action_masks")`` serves sb3-contrib's ``MaskablePPO``.
"""

from __future__ import annotations

import warnings

import numpy as np
from stable_baselines3.common.vec_env import VecEnv

from membudget.envs.pm import PMWeekVectorEnv
from membudget.envs.vector_info import info_row


class NativeVecEnv(VecEnv):
    """What SB3 ``VecEnv`` adapters of native vector envs share: actions are buffered by ``step_async``; the
    sub-environments are slots of one batched environment, so they are never wrapped, share their attributes and
    answer only ``env_method("action_masks")`` (from :meth:`action_masks`, ``(num_envs, ...)``)."""

    _actions = None

    def step_async(self, actions):
        self._actions = np.asarray(actions)

    def action_masks(self) -> np.ndarray:
        raise NotImplementedError

    def set_attr(self, attr_name, value, indices=None):
        raise AttributeError("the sub-environments of a native vector env share their attributes")

    def env_method(self, method_name, *args, indices=None, **kwargs):
        if method_name == "action_masks":
            masks = self.action_masks()
            return [masks[i] for i in self._get_indices(indices)]
        raise AttributeError(f"{method_name!r} is not available per sub-environment of a native vector env")

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._get_indices(indices)]


class PMWeekSB3VecEnv(NativeVecEnv):
    """``num_envs`` PM weeks as an SB3 ``VecEnv``; keyword arguments are those of ``PMWeekEnv``."""

    def __init__(self, num_envs: int = 8, **env_kwargs):
        self.venv = PMWeekVectorEnv(num_envs=num_envs, **env_kwargs)
        super().__init__(num_envs, self.venv.single_observation_space, self.venv.single_action_space)

    def reset(self):
        seeds = [s for s in self._seeds] if any(s is not None for s in self._seeds) else None
        obs, _ = self.venv.reset(seed=seeds)
        self._reset_seeds()
        return obs

    def step_wait(self):
        obs, rewards, terminated, truncated, info = self.venv.step(self._actions)
        dones = terminated | truncated
        infos = [info_row(info, i) for i in range(self.num_envs)]
        for i, row in enumerate(infos):  # as DummyVecEnv: on every step
            row["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
        if dones.any():
            for i in np.flatnonzero(dones):
                infos[i]["terminal_observation"] = {k: v[i].copy() for k, v in obs.items()}
            fresh, _ = self.venv.reset(seed=self._autoreset_seeds(dones), options={"reset_mask": dones})
            for k in obs:
                obs[k][dones] = fresh[k][dones]
        return obs, rewards.astype(np.float32), dones, infos

    def _autoreset_seeds(self, dones):
        """Seeds of the weeks that replace the finished ones (None: continue each slot's own generator)."""
        return None

    def close(self):
        self.venv.close()

    def get_attr(self, attr_name, indices=None):
        return [getattr(self.venv, attr_name) for _ in self._get_indices(indices)]

    def get_images(self):
        """Each week's frame (``render_mode="rgb_array"``), as SB3's ``DummyVecEnv`` gives them: what
        ``VecEnv.render`` tiles and SB3's ``VecVideoRecorder`` records."""
        if self.venv.render_mode != "rgb_array":
            warnings.warn(f"The render mode is {self.venv.render_mode}, but this method assumes it is `rgb_array` "
                          "to obtain images.")
            return [None] * self.num_envs
        return list(self.venv.render())

    def env_method(self, method_name, *args, indices=None, **kwargs):
        if method_name == "render":  # SB3's VecEnv.render in the text modes
            out = self.venv.render()
            return [None if out is None else out[i] for i in self._get_indices(indices)]
        return super().env_method(method_name, *args, indices=indices, **kwargs)

    def action_masks(self) -> np.ndarray:
        return self.venv.action_masks()
