"""CleanRL's single-file DQN (``cleanrl/dqn.py`` of the cleanrl 1.2.0 wheel, unmodified) on the Discrete-action ids.

The scripts are taken from the wheel, not installed (its pins are old): ``.ci/interop`` downloads it with
``pip download --no-deps`` and points ``MEMBUDGET_CLEANRL_SCRIPTS`` at the unpacked wheel. The id is given as
``membudget:membudget/<Id>``, Gymnasium's ``module:id`` form, which imports the package (and so registers its ids)
inside the unmodified script."""

import glob
import os
import subprocess
import sys

import pytest

SCRIPTS = os.environ.get("MEMBUDGET_CLEANRL_SCRIPTS")
if not SCRIPTS:
    pytest.skip("MEMBUDGET_CLEANRL_SCRIPTS (an unpacked cleanrl wheel) is not set", allow_module_level=True)
pytest.importorskip("torch.utils.tensorboard")

DISCRETE_IDS = ["membudget/TierRouting-v0", "membudget/ReplayStream-v0", "membudget/ReplayStream-v1",
                "membudget/ProactiveStream-v0", "membudget/ProactiveStream-v1"]


@pytest.mark.parametrize("env_id", DISCRETE_IDS)
def test_unmodified_dqn_script_trains(env_id, tmp_path):
    script = os.path.join(SCRIPTS, "cleanrl", "dqn.py")
    out = subprocess.run([sys.executable, script, "--env-id", f"membudget:{env_id}", "--total-timesteps", "600",
                          "--learning-starts", "200", "--cuda", "False"], check=False, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    assert "SPS:" in out.stdout  # printed at every 100th step once learning has started: the Q-network trained
    assert glob.glob(str(tmp_path / "runs" / "**" / "events.out.tfevents.*"), recursive=True)
