"""Tianshou 2's high-level API: ``PPOExperimentBuilder`` trains a few hundred steps and persists the policy (its
state dict); a second experiment restores it and watches an episode.

The Discrete-action ids go through ``EnvFactoryRegistered`` as they are. Tianshou's high-level environments take
``Discrete`` or ``Box`` actions and ``Box`` observations only (``EnvType.from_env``), so PMWeek-v0 runs with
``action_mode="scores"`` (a ``Box`` of priority scores) under Gymnasium's ``FlattenObservation``."""

import glob
import os

import gymnasium as gym
import pytest

pytest.importorskip("tianshou")

import membudget  # noqa: F401
from tianshou.highlevel.config import OnPolicyTrainingConfig
from tianshou.highlevel.env import (
    EnvFactory,
    EnvFactoryRegistered,
    EnvMode,
    VectorEnvType,
)
from tianshou.highlevel.experiment import ExperimentConfig, PPOExperimentBuilder
from tianshou.highlevel.persistence import PolicyPersistence

DISCRETE_IDS = ["membudget/TierRouting-v0", "membudget/ReplayStream-v0", "membudget/ReplayStream-v1",
                "membudget/ProactiveStream-v0", "membudget/ProactiveStream-v1"]


DICT_IDS = ["membudget/PMWeek-v0", "membudget/ConversationPM-v0", "membudget/ConversationPM-v1"]


class FlatScores(EnvFactory):
    """A ``Dict``-observation id (PMWeek-v0, ConversationPM-v0) with ``Box`` score actions and the flattened
    observation."""

    def __init__(self, env_id):
        super().__init__(VectorEnvType.DUMMY)
        self.env_id = env_id

    def _create_env(self, mode):
        render_mode = "ansi" if mode == EnvMode.WATCH else None
        return gym.wrappers.FlattenObservation(gym.make(self.env_id, action_mode="scores", render_mode=render_mode))


def _experiment(env_id, base_dir, **config):
    training = OnPolicyTrainingConfig(max_epochs=1, epoch_num_steps=256, num_training_envs=2, num_test_envs=1,
                                      collection_step_num_env_steps=128, batch_size=64, test_step_num_episodes=1)
    # the state dict: Tianshou's default (the pickled algorithm) is refused by torch.load's weights_only default
    experiment = ExperimentConfig(seed=0, device="cpu", persistence_base_dir=str(base_dir), watch_num_episodes=1,
                                  policy_persistence_mode=PolicyPersistence.Mode.POLICY_STATE_DICT, **config)
    if env_id in DICT_IDS:
        factory = FlatScores(env_id)
    else:
        factory = EnvFactoryRegistered(task=env_id, venv_type=VectorEnvType.DUMMY, render_mode_watch="ansi")
    return PPOExperimentBuilder(factory, experiment, training).build()


@pytest.mark.parametrize("env_id", [*DISCRETE_IDS, *DICT_IDS])
def test_ppo_trains_persists_restores_and_watches(env_id, tmp_path):
    result = _experiment(env_id, tmp_path, watch=False).run(run_name="train")
    assert result.trainer_result is not None and result.trainer_result.update_step > 0
    saved = glob.glob(str(tmp_path / "train" / "**" / "policy_state_dict.pt"), recursive=True)
    assert len(saved) == 1
    restored = _experiment(env_id, tmp_path, train=False, watch=True,
                           policy_restore_directory=os.path.dirname(saved[0])).run(run_name="watch")
    assert restored.trainer_result is None  # no training: the restored policy only acted in the watch episode
