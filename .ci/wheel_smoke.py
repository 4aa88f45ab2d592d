"""The installed-package smoke test of .ci/wheel: run from a directory outside the source tree, against membudget
installed from its wheel (non-editable), so nothing is imported from the checkout.

Checks: the package comes from site-packages with the metadata's version; every registered id makes, resets and
steps (single env, and the native vector env where there is one); the PettingZoo env steps; every
``python -m membudget...`` entry point answers ``--help``."""

import importlib.metadata
import os
import pkgutil
import subprocess
import sys
import sysconfig
from concurrent.futures import ThreadPoolExecutor

import gymnasium as gym
import numpy as np

import membudget
from membudget.envs import shared_budget
from membudget.envs.registration import ENTRY_POINTS


def check_installed():
    site = os.path.realpath(sysconfig.get_paths()["purelib"])
    where = os.path.realpath(membudget.__file__)
    assert where.startswith(site + os.sep), f"membudget imported from {where}, not from {site}"
    assert importlib.metadata.version("membudget") == membudget.__version__
    print(f"membudget {membudget.__version__} from {os.path.dirname(where)}")


def check_ids():
    for env_id, (_, vector_entry_point) in ENTRY_POINTS.items():
        env = gym.make(env_id)
        env.action_space.seed(0)
        env.reset(seed=0)
        for _ in range(3):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
        env.close()
        if vector_entry_point:
            venv = gym.make_vec(env_id, num_envs=4, vectorization_mode="vector_entry_point")
            venv.action_space.seed(0)
            venv.reset(seed=0)
            venv.step(venv.action_space.sample())
            venv.close()
        print(f"{env_id}: make, reset, step" + (" (and its native vector env)" if vector_entry_point else ""))
    env = shared_budget.parallel_env()
    obs, _ = env.reset(seed=0)
    env.step({a: np.asarray(obs[a]["mask"], dtype=np.float32) for a in env.agents})
    print("membudget.envs.shared_budget: reset, step")


def entry_points():
    """Every module of the installed package that runs as ``python -m``: packages with a ``__main__`` and modules
    with a ``__main__`` block."""
    out = []
    for info in pkgutil.walk_packages(membudget.__path__, "membudget."):
        if info.name.endswith(".__main__"):  # its package runs it
            continue
        if info.ispkg:
            if importlib.util.find_spec(info.name + ".__main__"):
                out.append(info.name)
            continue
        with open(importlib.util.find_spec(info.name).origin) as f:
            if 'if __name__ == "__main__":' in f.read():
                out.append(info.name)
    return out


def check_help():
    """Every entry point's ``--help``, one process per core at a time."""
    modules = entry_points()
    assert {"membudget.train", "membudget.evaluate", "membudget.teachers"} <= set(modules), modules

    def run(module):
        return subprocess.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(max_workers=len(os.sched_getaffinity(0))) as pool:
        for module, out in zip(modules, pool.map(run, modules)):
            assert out.returncode == 0 and out.stdout.strip(), f"{module} --help: {out.stdout}{out.stderr}"
            print(f"python -m {module} --help: ok")


if __name__ == "__main__":
    import importlib.util

    check_installed()
    check_ids()
    check_help()
