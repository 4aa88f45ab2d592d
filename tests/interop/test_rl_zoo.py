"""RL Baselines3 Zoo's command line on every id: ``rl_zoo3.train`` with the package's hyperparameter module
(``membudget.agents.zoo``), then ``rl_zoo3.enjoy`` with its default (human) render mode on the saved model."""

import subprocess
import sys

import pytest

pytest.importorskip("rl_zoo3")

from membudget.envs.registration import ENV_IDS


def _zoo(command, *args, cwd):
    out = subprocess.run([sys.executable, "-m", f"rl_zoo3.{command}", "--algo", "ppo", *args], check=False,
                         cwd=cwd,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return out.stdout


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_train_then_enjoy(env_id, tmp_path):
    common = ["--env", env_id, "--gym-packages", "membudget", "-f", "logs", "--seed", "0"]
    _zoo("train", *common, "--conf-file", "membudget.agents.zoo", "-n", "256", "--eval-freq", "-1",
         "--hyperparams", "n_envs:2", "n_steps:64", "batch_size:64", "n_epochs:2", cwd=tmp_path)
    name = env_id.replace("/", "-")
    assert (tmp_path / "logs" / "ppo" / f"{name}_1" / f"{name}.zip").is_file()
    shown = _zoo("enjoy", *common, "-n", "100", cwd=tmp_path)
    assert "Loading running average" in shown or env_id != "membudget/PMWeek-v0"  # VecNormalize statistics
    assert env_id.split("/")[1].replace("Flat", "") in shown  # the human render printed the state
