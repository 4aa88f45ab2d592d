"""Pictures: every environment's ``render_mode="rgb_array"`` (fixed size, follows the state, records nothing when
off), Gymnasium's RecordVideo on a PMWeek-v0 week, and ``python -m membudget.evaluate show``."""

import os
import struct
import sys
import types

import gymnasium as gym
import numpy as np
import pytest

import membudget  # noqa: F401
from membudget import evaluate
from membudget.envs import shared_budget
from membudget.envs.pm import PMWeekEnv
from membudget.envs.registration import ENV_IDS
from membudget.envs.rendering import FRAME_SIZE

SHAPE = (*FRAME_SIZE, 3)
RECORDS = {"membudget/PMWeek-v0": "_timeline", "membudget/PMWeekFlat-v0": "_timeline",
           "membudget/ConversationPM-v0": "_timeline", "membudget/ConversationPM-v1": "_timeline",
           "membudget/ReplayStream-v0": "_chosen", "membudget/ReplayStream-v1": "_chosen",
           "membudget/ProactiveStream-v0": "_drawn", "membudget/ProactiveStream-v1": "_drawn"}
"""What each environment records for its picture (TierRouting-v0 draws from the state it keeps anyway)."""


def _frame_ok(frame):
    assert isinstance(frame, np.ndarray) and frame.shape == SHAPE and frame.dtype == np.uint8
    assert frame.min() < 128 < frame.max()  # something is drawn on the white background


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_every_env_draws_a_fixed_size_picture_that_follows_the_state(env_id):
    env = gym.make(env_id, render_mode="rgb_array")
    assert "rgb_array" in env.metadata["render_modes"] and env.metadata["render_fps"] > 0
    _frame_ok(env.unwrapped.render())  # before the first reset: a frame that says so
    env.reset(seed=3)
    first = env.render()
    _frame_ok(first)
    env.action_space.seed(3)
    for _ in range(3):
        env.step(env.action_space.sample())
    later = env.render()
    _frame_ok(later)
    assert not np.array_equal(first, later)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_text_modes_and_no_mode_record_nothing_for_pictures(env_id):
    for mode in (None, "ansi"):
        env = gym.make(env_id, render_mode=mode)
        env.reset(seed=3)
        env.action_space.seed(3)
        for _ in range(3):
            env.step(env.action_space.sample())
        if env_id in RECORDS:
            assert getattr(env.unwrapped, RECORDS[env_id]) is None


@pytest.mark.parametrize("autoreset_mode", ["NextStep", "SameStep"])
def test_the_native_vector_env_renders_every_week_as_sync_vector_env_does(autoreset_mode):
    """``gym.make_vec``'s default (the native vector env) renders as ``SyncVectorEnv`` of single envs: the same
    frames and texts, through autoresets (weeks cut at 6 steps) and a pickle round trip; none without a mode."""
    import pickle

    from gymnasium.vector import AutoresetMode

    mode = AutoresetMode(autoreset_mode)
    for render_mode in ("ansi", "rgb_array"):
        native = gym.make_vec("membudget/PMWeek-v0", num_envs=2, vectorization_mode="vector_entry_point",
                              render_mode=render_mode, autoreset_mode=mode, max_episode_steps=6)
        sync = gym.make_vec("membudget/PMWeek-v0", num_envs=2, vectorization_mode="sync", render_mode=render_mode,
                            vector_kwargs={"autoreset_mode": mode}, max_episode_steps=6)
        assert "rgb_array" in native.metadata["render_modes"]
        obs, _ = native.reset(seed=5)
        sync.reset(seed=5)
        rng = np.random.default_rng(0)
        for step in range(14):
            frames, expected = native.render(), sync.render()
            assert type(frames) is tuple and len(frames) == 2
            for got, want in zip(frames, expected):
                if render_mode == "rgb_array":
                    assert got.shape == SHAPE and np.array_equal(got, want), step
                else:
                    assert got == want, step
            action = (rng.random(obs["mask"].shape) < 0.4).astype(np.int8) * obs["mask"]
            obs, *_ = native.step(action)
            sync.step(action)
        copy = pickle.loads(pickle.dumps(native.unwrapped))
        assert all(np.array_equal(a, b) for a, b in zip(copy.render(), native.render()))
    none = gym.make_vec("membudget/PMWeek-v0", num_envs=2, vectorization_mode="vector_entry_point")
    none.reset(seed=0)
    with pytest.warns(UserWarning, match="without a render_mode"):
        assert none.render() is None


def test_the_shared_budget_env_draws_every_agent():
    env = shared_budget.parallel_env(n_agents=3, render_mode="rgb_array")
    assert "rgb_array" in env.metadata["render_modes"] and env.metadata["render_fps"] > 0
    obs, _ = env.reset(seed=6000)
    first = env.render()
    _frame_ok(first)
    for _ in range(5):
        obs, *_ = env.step({a: o["mask"].astype(np.float32) for a, o in obs.items()})
    later = env.render()
    _frame_ok(later)
    assert not np.array_equal(first, later)
    aec = shared_budget.env(n_agents=2, render_mode="rgb_array")
    aec.reset(seed=0)
    _frame_ok(aec.render())
    off = shared_budget.parallel_env(n_agents=2)
    off.reset(seed=0)
    off.step({a: np.ones(11, np.float32) for a in off.agents})
    assert off._timelines is None


def test_the_pm_timeline_is_the_week_the_infos_report():
    """Candidates, queries and events by resource add up, with the visible intentions' outcomes, to the infos."""
    env = PMWeekEnv(budget="B40", render_mode="rgb_array")
    obs, _ = env.reset(seed=9000)
    masks, queried, counts = [obs["mask"]], [], []
    done = False
    while not done:
        obs, _, done, _, info = env.step(obs["mask"])
        masks.append(obs["mask"])
        queried.append(info["queried"])
        counts.append([info["tp"], info["fp"], info["fn"]])
    tl, core = env.timeline, env.core
    np.testing.assert_array_equal(tl.candidate, np.array(masks[:-1]).T.astype(bool))
    np.testing.assert_array_equal(tl.queried, np.array(queried).T)
    np.testing.assert_array_equal(tl.events.sum(axis=1).T + core.vis_step[0, :80], counts)
    assert tl.events[0].sum() > 0 and tl.events[2].sum() > 0
    assert PMWeekEnv().timeline is None


@pytest.mark.parametrize("steps", [pytest.param(10, id="first-10-steps"),
                                   pytest.param(80, id="whole-week", marks=pytest.mark.slow)])
def test_record_video_records_a_pmweek_week(steps, tmp_path, monkeypatch):
    from gymnasium.wrappers import RecordVideo

    try:
        import moviepy  # noqa: F401
        writes = True
    except ImportError:  # RecordVideo's constructor only checks that the import works
        writes = False
        monkeypatch.setitem(sys.modules, "moviepy", types.ModuleType("moviepy"))
    env = RecordVideo(gym.make("membudget/PMWeek-v0", render_mode="rgb_array"), str(tmp_path / "video"),
                      episode_trigger=lambda e: e == 0, disable_logger=True)
    obs, _ = env.reset(seed=9000)
    for _ in range(steps):
        obs, _, terminated, truncated, _ = env.step(obs["mask"])
    assert terminated == (steps == 80)
    frames = env.recorded_frames
    assert len(frames) == steps + 1 and env.frames_per_sec == 8  # the reset and each step, at render_fps
    for f in frames[::5]:
        _frame_ok(f)
    assert not np.array_equal(frames[0], frames[-1])
    if not writes:
        env.recording, env.recorded_frames = False, []
        env.close()
        pytest.skip(f"moviepy is not installed: RecordVideo collected the {steps + 1} frames (checked); writing the "
                    ".mp4 needs moviepy (pip install 'membudget[video]')")
    env.close()
    video = tmp_path / "video" / "rl-video-episode-0.mp4"
    assert video.exists() and video.stat().st_size > 1000


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR"
    width, height = struct.unpack(">II", head[16:24])
    return height, width


def _show(argv, capsys):
    """``evaluate show`` with ``argv``: (exit status, stdout, stderr)."""
    try:
        evaluate.main(["show", *argv])
        code = 0
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_show_writes_the_week_of_a_named_policy_beside_the_dp(tmp_path, capsys, monkeypatch):
    from membudget.studies.show import SHOW_SIZE

    monkeypatch.chdir(tmp_path)
    code, out, _ = _show(["--policy", "AllRelevant", "--week", "9000"], capsys)
    path = tmp_path / "runs" / "show" / "AllRelevant-B10-week9000.png"  # the default, under runs/
    assert code == 0 and path.exists() and _png_size(path) == SHOW_SIZE
    assert "AllRelevant" in out and "hindsight DP" in out and "Set F1" in out


def test_show_plays_a_saved_model(tmp_path, capsys):
    import torch

    from membudget.agents.per_resource import PerResourceNet, StudentPolicy
    from membudget.studies.show import SHOW_SIZE

    torch.manual_seed(0)
    StudentPolicy(PerResourceNet(hidden=(8,))).save(tmp_path / "student.npz")
    png = tmp_path / "student.png"
    code, out, _ = _show(["--model", str(tmp_path / "student.npz"), "--budget", "15", "--week", "9001",
                          "--out", str(png)], capsys)
    assert code == 0 and _png_size(png) == SHOW_SIZE
    assert "model student.npz" in out and "budget used" in out


@pytest.mark.slow
def test_show_fits_only_the_gate_a_policy_needs(tmp_path, capsys):
    from membudget.studies.show import SHOW_SIZE

    png = tmp_path / "static.png"
    code, out, _ = _show(["--policy", "Static", "--budget", "B10", "--week", "9000", "--out", str(png)], capsys)
    assert code == 0 and _png_size(png) == SHOW_SIZE
    assert "fitted Static" in out


@pytest.mark.parametrize("argv, message", [
    (["--policy", "Nope"], "unknown policy 'Nope'; choose one of AllRelevant, RandomFeasible"),
    (["--policy", "Static", "--budget", "B7"], "--budget: budget 'B7' is not a level; the levels are B5, B10"),
    (["--policy", "Static", "--budget", "0"], "--budget: budget must be an int in"),
    (["--policy", "Static", "--week", "-1"], "--week: must be an integer >= 0"),
    (["--policy", "Static", "--week", "x"], "--week: must be an integer >= 0"),
    (["--policy", "Myopic", "--budget", "B40"], "Myopic is fitted at B5, B10, B15, B20 only"),
    (["--model", "no/such/model.npz"], "--model: no model at"),
    (["--policy", "Static", "--out", "week.jpg"], "--out: must name a .png file"),
    ([], "one of the arguments --policy --model is required"),
])
def test_show_refuses_bad_arguments_in_one_line_before_any_work(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _show(argv, capsys)
    assert code == 2 and message in err and err.count("\n") == 1 and not out
    assert not os.listdir(tmp_path)
