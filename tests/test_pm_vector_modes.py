"""The native vector env in every Gymnasium autoreset mode and with max_episode_steps: trajectory for trajectory
equal to single environments stepped by Gymnasium's own rules (SyncVectorEnv's semantics, by hand)."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import membudget  # noqa: F401
from membudget.envs.pm import PMWeekVectorEnv

N, STEPS = 3, 130


def _actions(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2, (N, 11)).astype(np.int8) for _ in range(STEPS)]


def _singles(max_episode_steps=None):
    return [gym.make("membudget/PMWeek-v0", max_episode_steps=max_episode_steps) for _ in range(N)]


def _same(vobs, sobs, i):
    return all(np.array_equal(vobs[k][i], sobs[k]) for k in sobs)


@pytest.mark.parametrize("max_steps", [None, 37])
def test_next_step_mode_equals_single_envs(max_steps):
    venv = PMWeekVectorEnv(num_envs=N, max_episode_steps=max_steps)
    assert venv.autoreset_mode == AutoresetMode.NEXT_STEP == venv.metadata["autoreset_mode"]
    singles = _singles(max_steps)
    vobs, _ = venv.reset(seed=100)
    sobs = [e.reset(seed=100 + i)[0] for i, e in enumerate(singles)]
    pending = np.zeros(N, dtype=bool)
    for a in _actions():
        vobs, vr, vt, vtr, _ = venv.step(a)
        for i, e in enumerate(singles):
            if pending[i]:
                sobs[i], _ = e.reset()
                r, t, tr = 0.0, False, False
            else:
                sobs[i], r, t, tr, _ = e.step(a[i])
            assert _same(vobs, sobs[i], i) and vr[i] == r and vt[i] == t and vtr[i] == tr
        pending = vt | vtr
    if max_steps:
        assert not venv.step(_actions()[0])[2].any()  # 37-step weeks never reach the horizon


def test_reseeding_a_started_env_equals_single_envs_seeded_so():
    """A reset with seeds after the first reseeds the generators in place; the weeks it draws and the autoreset
    weeks drawn later from the same generators are single environments' reset(seed=...) and reset()."""
    venv = PMWeekVectorEnv(num_envs=N, max_episode_steps=20)
    venv.reset(seed=100)
    for a in _actions()[:7]:
        venv.step(a)
    vobs, _ = venv.reset(seed=[5, None, 9])
    singles = _singles(20)
    sobs = [singles[0].reset(seed=5)[0], None, singles[2].reset(seed=9)[0]]
    pending = np.zeros(N, dtype=bool)
    for a in _actions(1)[:45]:  # two autoresets per week
        vobs, *_ = venv.step(a)
        for i in (0, 2):
            if pending[i]:
                sobs[i], _ = singles[i].reset()
                done = False
            else:
                sobs[i], _, t, tr, _ = singles[i].step(a[i])
                done = t or tr
            assert _same(vobs, sobs[i], i)
            pending[i] = done


def test_same_step_mode_equals_single_envs_and_reports_final_obs():
    venv = PMWeekVectorEnv(num_envs=N, autoreset_mode=AutoresetMode.SAME_STEP, max_episode_steps=50)
    singles = _singles(50)
    vobs, _ = venv.reset(seed=100)
    for i, e in enumerate(singles):
        e.reset(seed=100 + i)
    finals = 0
    for a in _actions(1):
        vobs, vr, vt, vtr, info = venv.step(a)
        for i, e in enumerate(singles):
            sobs, r, t, tr, _ = e.step(a[i])
            assert vr[i] == r and vt[i] == t and vtr[i] == tr
            if t or tr:
                final = info["final_obs"][i]  # Gymnasium's form: an object array of single observations
                assert info["_final_obs"][i] and all(np.array_equal(final[k], sobs[k]) for k in sobs)
                sobs, _ = e.reset()
                finals += 1
            assert _same(vobs, sobs, i)
    assert finals == 2 * N


def test_disabled_mode_waits_for_a_masked_reset():
    venv = PMWeekVectorEnv(num_envs=2, autoreset_mode=AutoresetMode.DISABLED,
                           max_episode_steps=3)
    venv.reset(seed=0)
    for _ in range(3):
        _, _, _, trunc, _ = venv.step(np.zeros((2, 11), dtype=np.int8))
    assert trunc.all()
    with pytest.raises(RuntimeError, match="DISABLED"):
        venv.step(np.zeros((2, 11), dtype=np.int8))
    venv.reset(options={"reset_mask": np.array([True, True])})
    venv.step(np.zeros((2, 11), dtype=np.int8))


def test_bad_mode_and_max_steps_are_refused():
    with pytest.raises(ValueError, match="autoreset_mode"):
        PMWeekVectorEnv(autoreset_mode="sometimes")
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match="max_episode_steps"):
            PMWeekVectorEnv(max_episode_steps=bad)


def test_make_vec_forwards_max_episode_steps_to_the_native_env():
    venv = gym.make_vec("membudget/PMWeek-v0", num_envs=2, vectorization_mode="vector_entry_point",
                        max_episode_steps=5)
    venv.reset(seed=0)
    for _ in range(5):
        _, _, _, trunc, _ = venv.step(np.zeros((2, 11), dtype=np.int8))
    assert trunc.all()


@pytest.mark.parametrize("bad", [1.5, "7", True, -1, [1.5, 2.7], [1, "2", 3]])
def test_seeds_are_refused_not_coerced(bad):
    from membudget.envs import shared_budget

    venv = PMWeekVectorEnv(num_envs=len(bad) if isinstance(bad, list) else 2)
    with pytest.raises(ValueError, match="seed"):
        venv.reset(seed=bad)
    if not isinstance(bad, list):
        with pytest.raises(ValueError, match="seed"):
            shared_budget.parallel_env().reset(seed=bad)


def _assert_same_info(native, sync, where=""):
    """Batched infos equal key by key: the same keys (masks included), dtypes, shapes and values (NaN == NaN);
    object arrays (final_obs) element by element."""
    assert sorted(native) == sorted(sync), (where, sorted(set(native) ^ set(sync)))
    for k, v in sync.items():
        n, at = native[k], f"{where}/{k}"
        if isinstance(v, dict):
            _assert_same_info(n, v, at)
        elif v.dtype == object:
            assert n.dtype == object and n.shape == v.shape, at
            for a, b in zip(n, v):
                assert (a is None and b is None) or _assert_same_info(a, b, at) is None
        else:
            assert n.dtype == v.dtype and n.shape == v.shape, (at, n.dtype, v.dtype, n.shape, v.shape)
            np.testing.assert_array_equal(n, v, err_msg=at)


@pytest.mark.parametrize("autoreset", list(AutoresetMode))
@pytest.mark.parametrize("kwargs", [{}, {"budget": None, "max_episode_steps": 50},
                                    {"cost_profile": "skewed", "per_step_cost_cap": 20, "late_policy": "execute"}])
def test_infos_are_the_single_envs_infos_batched_as_sync_vector_env_batches_them(autoreset, kwargs):
    """Reset and step infos of whole weeks (and the autoresets after them) against Gymnasium's SyncVectorEnv of
    single environments: same keys, masks, dtypes, shapes and values, episode_metrics and final_info included."""
    kwargs = dict(kwargs)
    max_steps = kwargs.pop("max_episode_steps", None)
    native = PMWeekVectorEnv(num_envs=N, autoreset_mode=autoreset, max_episode_steps=max_steps, **kwargs)
    sync = gym.vector.SyncVectorEnv(
        [lambda: gym.make("membudget/PMWeek-v0", max_episode_steps=max_steps, **kwargs)] * N, autoreset_mode=autoreset)
    _, ninfo = native.reset(seed=300)
    _, sinfo = sync.reset(seed=300)
    _assert_same_info(ninfo, sinfo, "reset")
    ended = np.zeros(N, dtype=bool)
    metrics_seen = ends_seen = 0
    for t, a in enumerate(_actions(2)):
        restart = np.array([t == 10, False, t == 20])  # staggers the weeks, so that later ends are partial
        if (autoreset == AutoresetMode.DISABLED and ended.any()) or restart.any():
            mask = ended | restart if autoreset == AutoresetMode.DISABLED else restart
            _, ninfo = native.reset(options={"reset_mask": mask})
            _, sinfo = sync.reset(options={"reset_mask": mask})
            _assert_same_info(ninfo, sinfo, f"masked reset before step {t}")
        nres, sres = native.step(a), sync.step(a)
        for x, y in zip(nres[:4], sres[:4]):
            np.testing.assert_array_equal(x["mask"] if isinstance(x, dict) else x, y["mask"] if isinstance(y, dict) else y)
        _assert_same_info(nres[4], sres[4], f"step {t}")
        metrics_seen += "episode_metrics" in nres[4] or "final_info" in nres[4]
        ended = nres[2] | nres[3]
        ends_seen += ended.any()
    assert ends_seen >= 1 and (metrics_seen >= 1 or max_steps is not None)  # the comparison covered weeks' ends


def test_teachers_read_their_settings_from_either_env():
    from membudget.teachers import HindsightDP

    kw = dict(budget="B20", per_step_cap=3, per_step_cost_cap=7, cost_profile="mild", late_policy="execute")
    single, vector = HindsightDP.from_env(gym.make("membudget/PMWeek-v0", **kw)), HindsightDP.from_env(
        gym.make_vec("membudget/PMWeek-v0", num_envs=2, vectorization_mode="vector_entry_point", **kw))
    assert vars(single) == vars(vector)
    assert (vector.per_step_cap, vector.per_step_cost_cap, vector.late_policy) == (3, 7, "execute")


def _week(seed, **kw):
    from membudget.envs.pm import generate_episode

    return generate_episode(seed, **kw)


def test_given_episodes_are_played_as_single_envs_play_them_and_the_generators_go_on():
    """reset(options={"episodes": ...}): a given Episode is played as PMWeekEnv.reset(options={"episode": ep})
    plays it (one object may fill two weeks), a None entry is drawn from the seed as usual, and the autoreset
    weeks after them come from the seeded generators, as a single env's reset() after reset(seed, episode)."""
    a, b = _week(7), _week(8)
    venv = PMWeekVectorEnv(num_envs=N)
    vobs, _ = venv.reset(seed=100, options={"episodes": [a, None, a]})
    singles = _singles()
    sobs = [singles[0].reset(seed=100, options={"episode": a})[0], singles[1].reset(seed=101)[0],
            singles[2].reset(seed=102, options={"episode": a})[0]]
    assert venv.core.episode(0) is a and venv.core.episode(2) is a
    pending = np.zeros(N, dtype=bool)
    for act in _actions(3):
        vobs, vr, vt, _, _ = venv.step(act)
        for i, e in enumerate(singles):
            if pending[i]:
                sobs[i], r, t = e.reset()[0], 0.0, False
            else:
                sobs[i], r, t, _, _ = e.step(act[i])
            assert _same(vobs, sobs[i], i) and vr[i] == r and vt[i] == t
        pending = vt
    # a started env: only the masked week takes the given one
    vobs, _ = venv.reset(options={"reset_mask": np.array([False, True, False]), "episodes": [None, b, None]})
    assert _same(vobs, singles[1].reset(options={"episode": b})[0], 1) and venv.core.episode(1) is b


@pytest.mark.parametrize("episodes, error, match", [
    ("abc", TypeError, "sequence of 3"),
    ([None, None], ValueError, "3 entries"),
    ([None, 5, None], TypeError, r"\[1\] must be an Episode"),
    ([None, None, "week"], TypeError, r"\[2\] must be an Episode"),
])
def test_bad_episodes_are_refused_before_anything_changes(episodes, error, match):
    venv = PMWeekVectorEnv(num_envs=N)
    before, _ = venv.reset(seed=100)
    with pytest.raises(error, match=match):
        venv.reset(seed=5, options={"episodes": episodes})
    after, *_ = venv.step(np.zeros((N, 11), dtype=np.int8))
    fresh = PMWeekVectorEnv(num_envs=N)
    fresh.reset(seed=100)
    expected, *_ = fresh.step(np.zeros((N, 11), dtype=np.int8))
    assert all(np.array_equal(after[k], expected[k]) for k in after)


def test_an_invalid_or_foreign_episode_or_one_outside_the_mask_is_refused():
    import dataclasses

    from membudget.envs.pm import EpisodeFormatError
    from membudget.envs.pm.world import WorldConfig

    venv = PMWeekVectorEnv(num_envs=N)
    venv.reset(seed=1)
    good = _week(7)
    bad = dataclasses.replace(good, horizon=0)
    with pytest.raises(EpisodeFormatError):
        venv.reset(options={"episodes": [None, bad, None]})
    world = WorldConfig(resources=WorldConfig().resources[:5])
    small = _week(7, config=world)
    with pytest.raises(ValueError, match="5 resources"):
        venv.reset(options={"episodes": [small, None, None]})
    with pytest.raises(ValueError, match="not in reset_mask"):
        venv.reset(options={"reset_mask": np.array([True, False, True]), "episodes": [None, good, None]})
    with pytest.raises(ValueError, match="unknown reset options"):
        venv.reset(options={"episode": good})


@pytest.mark.parametrize("budget", ["B5", "B20", 21, 7, None])
def test_budget_argument_rebuilds_an_envs_budget_and_budget_features(budget):
    from membudget.envs.pm import PMWeekEnv
    from membudget.envs.pm.levels import budget_argument

    env = PMWeekEnv(budget=budget)
    arg = budget_argument(env)
    assert arg == budget
    venv = PMWeekVectorEnv(num_envs=1, budget=arg)
    assert (venv.budget, venv.target_fraction) == (env.budget, env.target_fraction)
    np.testing.assert_array_equal(venv.reset(seed=3)[0]["budget"][0], env.reset(seed=3)[0]["budget"])
