"""Documentation: every environment documents itself in Gymnasium's structure, the documented spaces are the real
ones, every environment has a page that renders its docstring, and the site builds in strict mode."""

import os
import re
import shutil
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import membudget  # noqa: F401
from membudget.envs import shared_budget
from membudget.envs.registration import ENTRY_POINTS, VARIANTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECTIONS = ("Description", "Action Space", "Observation Space", "Rewards", "Starting State", "Episode End",
            "Arguments", "Version History")
PAGES = {"membudget/PMWeek-v0": "pm_week.md", "membudget/ReplayStream-v0": "replay_stream.md",
         "membudget/ReplayStream-v1": "replay_stream.md",
         "membudget/TierRouting-v0": "tier_routing.md", "membudget/ProactiveStream-v0": "proactive_stream.md",
         "membudget/ProactiveStream-v1": "proactive_stream.md",
         "membudget/ConversationPM-v1": "conversation.md", "shared_budget": "shared_budget.md"}
CLASSES = {env_id: ep.split(":") for env_id, (ep, _) in ENTRY_POINTS.items() if env_id not in VARIANTS}
CLASSES["shared_budget"] = ("membudget.envs.shared_budget", "raw_env")


def _class(env_id):
    import importlib

    module, name = CLASSES[env_id]
    return getattr(importlib.import_module(module), name)


def _spaces(env_id):
    if env_id == "shared_budget":
        env = shared_budget.parallel_env()
        return env.observation_space("agent_0"), env.action_space("agent_0"), len(env.world.resources)
    env = gym.make(env_id).unwrapped
    r = len(env.world.resources) if hasattr(env, "world") else None
    return env.observation_space, env.action_space, r


def _section(doc, name):
    m = re.search(rf"^\s*## {name}\n(.*?)(?=^\s*## |\Z)", doc, re.M | re.S)
    assert m, f"no '## {name}' section"
    return m.group(1)


def _documented(section, n_resources):
    """The first ``...`` span of a section that names a space, with the symbol R replaced by its value."""
    for span in re.findall(r"``([^`]+)``", section):
        if re.match(r"(Box|Discrete|MultiBinary)\(", span):
            return re.sub(r"\bR\b", str(n_resources), span)
    raise AssertionError(f"no space stated in {section[:80]!r}")


def _render(space):
    """A space in the docstrings' notation: ``Discrete(n)``, ``MultiBinary(n)``, ``Box(low, high, shape, dtype)``."""
    if isinstance(space, gym.spaces.Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, gym.spaces.MultiBinary):
        return f"MultiBinary({space.n})"
    assert isinstance(space, gym.spaces.Box) and np.all(space.low == space.low.flat[0]) \
        and np.all(space.high == space.high.flat[0])
    return f"Box({space.low.flat[0]:g}, {space.high.flat[0]:g}, {space.shape}, {space.dtype})"


def test_every_environment_is_documented():
    assert set(PAGES) == set(ENTRY_POINTS) - set(VARIANTS) | {"shared_budget"}
    for variant, base in VARIANTS.items():  # a variant is documented on its base environment's page
        with open(os.path.join(ROOT, "docs", "envs", PAGES[base])) as f:
            assert variant in f.read()


@pytest.mark.parametrize("env_id", sorted(PAGES))
def test_docstring_has_gymnasium_sections_in_order(env_id):
    doc = _class(env_id).__doc__
    positions = [doc.find(f"## {s}\n") for s in SECTIONS]
    assert all(p >= 0 for p in positions), [s for s, p in zip(SECTIONS, positions) if p < 0]
    assert positions == sorted(positions)


@pytest.mark.parametrize("env_id", sorted(PAGES))
def test_documented_spaces_are_the_real_ones(env_id):
    doc = _class(env_id).__doc__
    obs_space, act_space, n_res = _spaces(env_id)
    assert _documented(_section(doc, "Action Space"), n_res) == _render(act_space)
    if isinstance(obs_space, gym.spaces.Dict):  # PMWeek-v0 and the shared budget: every key named with its shape
        obs = _section(doc, "Observation Space")
        for key, sub in obs_space.spaces.items():
            assert f'"{key}"' in obs, key
        assert f"Box(R, {obs_space['resources'].shape[1]})" in obs
        assert f"Box({obs_space['budget'].shape[0]},)" in obs
    else:
        assert _documented(_section(doc, "Observation Space"), n_res) == _render(obs_space)


def test_the_flat_variants_documented_spaces_are_the_real_ones():
    import re

    from membudget.envs.pm.env import PMWeekEnv
    from membudget.envs.pm.flat import FlatObservation, MultiDiscreteProposals

    env = gym.make("membudget/PMWeekFlat-v0")
    base = env.unwrapped.observation_space
    R, F, n_budget = base["resources"].shape + base["budget"].shape
    size = n_budget + (F + 1) * R
    assert env.observation_space.shape == (size,) and env.observation_space.dtype == np.float32
    assert env.action_space == gym.spaces.MultiDiscrete([2] * R)
    for doc in (FlatObservation.__doc__, PMWeekEnv.__doc__):
        assert re.search(rf"``Box\({n_budget} \+ {F + 1} R,\)`` float32,? \(?{size}", doc), doc
    assert "``MultiDiscrete([2] * R)``" in MultiDiscreteProposals.__doc__
    assert "``MultiDiscrete([2] * R)``" in _section(PMWeekEnv.__doc__, "Action Space")


@pytest.mark.parametrize("env_id", sorted(PAGES))
def test_each_page_renders_its_class_docstring(env_id):
    with open(os.path.join(ROOT, "docs", "envs", PAGES[env_id])) as f:
        page = f.read()
    module, name = CLASSES[env_id]
    assert f"::: {module}.{name}" in page


@pytest.mark.slow
def test_site_builds_in_strict_mode(tmp_path):
    mkdocs = shutil.which("mkdocs", path=os.path.dirname(sys.executable)) or shutil.which("mkdocs")
    assert mkdocs, "mkdocs is part of the test extra (pip install -e '.[test]')"
    out = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "site" / "envs" / "pm_week" / "index.html").exists()
    raw = re.compile(r":(class|mod|func|meth|data|attr|obj|exc):(<code>|`)|``")  # Sphinx roles shown literally
    pages = [p for p in (tmp_path / "site").rglob("*.html")]
    assert len(pages) > 20 and [str(p) for p in pages if raw.search(p.read_text())] == []


def _step_infos(env_id):
    """The info dicts of a reset and a few steps (the shared budget's: agent_0's)."""
    if env_id == "shared_budget":
        env = shared_budget.parallel_env()
        obs, infos = env.reset(seed=0)
        out = [infos["agent_0"]]
        for _ in range(3):
            obs, _, _, _, infos = env.step({a: obs[a]["mask"] * 1.0 for a in env.agents})
            out.append(infos["agent_0"])
        return out
    env = gym.make(env_id)
    env.action_space.seed(0)
    _, info = env.reset(seed=0)
    out = [info]
    for _ in range(4):
        _, _, terminated, truncated, info = env.step(env.action_space.sample())
        out.append(info)
        if terminated or truncated:
            break
    return out


@pytest.mark.parametrize("env_id", sorted(PAGES))
def test_every_info_key_and_argument_is_documented(env_id):
    """Each key the env puts in a step's info (episode_metrics' own fields apart) is named in its docstring, and
    each constructor argument in its Arguments section: the docs say what the code does."""
    import inspect

    cls = _class(env_id)
    doc = cls.__doc__
    keys = {k for info in _step_infos(env_id) for k in info if k != "episode_metrics"}
    assert [k for k in sorted(keys) if f"``{k}``" not in doc] == []
    arguments = _section(doc, "Arguments")
    params = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    assert [p for p in params if f"``{p}``" not in arguments] == []


def test_pm_week_budget_feature_bounds_are_the_documented_ones():
    """PMWeek-v0's docstring states the nine budget features' bounds; the space is exactly that, for several
    budgets and caps."""
    from membudget.envs.pm import PMWeekEnv

    doc = _section(PMWeekEnv.__doc__, "Observation Space")
    assert "bounds [0, max(1, b)], [0, 1], [0, 1], [0, 1], [0, max(1, B)], [-1, 1], then [0, c/2] three times" in \
        " ".join(doc.split())
    for kw in ({}, {"budget": "B60", "per_step_cap": 5}, {"budget": None, "per_step_cap": None}):
        env = PMWeekEnv(**kw)
        box, cap = env.observation_space["budget"], min(env.per_step_cap or 11, 11)
        b, B = env.target_fraction, env.budget
        np.testing.assert_array_equal(box.low, np.float32([0, 0, 0, 0, 0, -1, 0, 0, 0]))
        np.testing.assert_array_equal(box.high, np.float32([max(1, b), 1, 1, 1, 1 if B is None else max(1, B), 1,
                                                            cap / 2, cap / 2, cap / 2]))
