"""Tianshou 2's high-level API on the Discrete-action ids: ``EnvFactoryRegistered`` and ``PPOExperimentBuilder``
train a few hundred steps and persist the policy (its state dict); a second experiment restores it and watches an episode.

Tianshou's high-level environments take ``Discrete`` or ``Box`` actions only (``EnvType.from_env``), so the
``MultiBinary`` / ``MultiDiscrete`` PMWeek ids are outside its default path."""

import glob
import os

import pytest

pytest.importorskip("tianshou")

import membudget  # noqa: F401
from tianshou.highlevel.config import OnPolicyTrainingConfig
from tianshou.highlevel.env import EnvFactoryRegistered, VectorEnvType
from tianshou.highlevel.experiment import ExperimentConfig, PPOExperimentBuilder
from tianshou.highlevel.persistence import PolicyPersistence

DISCRETE_IDS = ["membudget/TierRouting-v0", "membudget/ReplayStream-v0", "membudget/ProactiveStream-v0"]


def _experiment(env_id, base_dir, **config):
    training = OnPolicyTrainingConfig(max_epochs=1, epoch_num_steps=256, num_training_envs=2, num_test_envs=1,
                                      collection_step_num_env_steps=128, batch_size=64, test_step_num_episodes=1)
    # the state dict: Tianshou's default (the pickled algorithm) is refused by torch.load's weights_only default
    experiment = ExperimentConfig(seed=0, device="cpu", persistence_base_dir=str(base_dir), watch_num_episodes=1,
                                  policy_persistence_mode=PolicyPersistence.Mode.POLICY_STATE_DICT, **config)
    factory = EnvFactoryRegistered(task=env_id, venv_type=VectorEnvType.DUMMY, render_mode_watch="ansi")
    return PPOExperimentBuilder(factory, experiment, training).build()


@pytest.mark.parametrize("env_id", DISCRETE_IDS)
def test_ppo_trains_persists_restores_and_watches(env_id, tmp_path):
    result = _experiment(env_id, tmp_path, watch=False).run(run_name="train")
    assert result.trainer_result is not None and result.trainer_result.update_step > 0
    saved = glob.glob(str(tmp_path / "train" / "**" / "policy_state_dict.pt"), recursive=True)
    assert len(saved) == 1
    restored = _experiment(env_id, tmp_path, train=False, watch=True,
                           policy_restore_directory=os.path.dirname(saved[0])).run(run_name="watch")
    assert restored.trainer_result is None  # no training: the restored policy only acted in the watch episode
