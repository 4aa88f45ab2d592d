"""Every registered id, with its default arguments: the ecosystem's checkers, seeding and pickling
(in the manner of Gymnasium's own environment tests)."""

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

import membudget  # noqa: F401
from membudget.envs.registration import ENV_IDS, VARIANTS

# SB3 recommends flat observations; PMWeek-v0 keeps its per-resource (R, 27) block on purpose (README).
KNOWN_SB3_WARNINGS = ("unconventional shape",)


def test_every_id_is_registered():
    assert set(ENV_IDS) <= set(gym.registry)
    assert all(isinstance(gym.spec(i).entry_point, str) for i in ENV_IDS)


def test_the_rl_zoo_conf_file_covers_every_id():
    """tests/interop/test_rl_zoo.py trains every id with these (in the interop environment only)."""
    from membudget.agents.zoo import hyperparams

    assert set(hyperparams) == set(ENV_IDS)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_checkers(env_id):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    # gym.make warns that a kept older version (ReplayStream-v0, ConversationPM-v0) is out of date: Gymnasium's own notice,
    # outside the checkers
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is out of date.*")
        first, second = gym.make(env_id).unwrapped, gym.make(env_id).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(first)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sb3_check_env(second, warn=True)
    unexpected = [str(w.message) for w in caught if not any(k in str(w.message) for k in KNOWN_SB3_WARNINGS)]
    assert not unexpected, unexpected


def _rollout(env, seed, n=60):
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    out = [obs]
    for _ in range(n):
        obs, r, term, trunc, _ = env.step(env.action_space.sample())
        out += [obs, r, term]
        if term or trunc:
            obs, _ = env.reset()
            out.append(obs)
    return out


def _equal(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return np.array_equal(a, b)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_same_seed_same_trajectory_and_pickle_round_trip(env_id):
    a, b = gym.make(env_id), gym.make(env_id)
    ra, rb = _rollout(a, 3), _rollout(b, 3)
    assert all(_equal(x, y) for x, y in zip(ra, rb))
    clone = pickle.loads(pickle.dumps(a))
    a.action_space.seed(9)
    clone.action_space.seed(9)
    for _ in range(20):
        act = a.action_space.sample()
        clone.action_space.sample()
        x, y = a.step(act), clone.step(act)
        assert _equal(x[0], y[0]) and x[1] == y[1] and x[2] == y[2]
        if x[2] or x[3]:
            break


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_episode_statistics_wrappers_coexist_with_our_metrics(env_id):
    """Gymnasium's RecordEpisodeStatistics and SB3's Monitor own info["episode"]; our summaries live elsewhere."""
    from stable_baselines3.common.monitor import Monitor

    for wrap in (gym.wrappers.RecordEpisodeStatistics, Monitor):
        env = wrap(gym.make(env_id))
        env.reset(seed=0)
        env.action_space.seed(0)
        done = False
        while not done:
            _, _, term, trunc, info = env.step(env.action_space.sample())
            done = term or trunc
        assert "episode" in info and "episode_metrics" in info


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_text_render_modes_and_unsupported_modes_are_refused(env_id, capsys):
    env = gym.make(env_id, render_mode="ansi")
    env.reset(seed=3)
    first = env.render()
    names = {env_id.split("/")[1], VARIANTS.get(env_id, env_id).split("/")[1]}  # its own name or its base's
    assert isinstance(first, str) and any(name in first for name in names)
    env.action_space.seed(3)
    env.step(env.action_space.sample())
    assert env.render() != first  # the text follows the state
    human = gym.make(env_id, render_mode="human")
    human.reset(seed=3)
    assert human.render() is None
    out = capsys.readouterr().out
    assert any(name in out for name in names)
    # refused by the constructor, not ignored by render() (Gymnasium's make only warns first, where it can read the
    # metadata: not for PMWeekFlat-v0's entry point, a function)
    with warnings.catch_warnings(), pytest.raises(
            ValueError, match=r"^render_mode must be None or one of .*metadata\['render_modes'\].*'depth_array'"):
        warnings.simplefilter("ignore")
        gym.make(env_id, render_mode="depth_array")


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_sb3_make_vec_env_with_its_default_render_mode(env_id):
    from stable_baselines3.common.env_util import make_vec_env

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        venv = make_vec_env(env_id, n_envs=2, seed=0)  # passes render_mode="rgb_array"
    venv.reset()
    venv.close()


def test_flat_variant_is_pmweek_with_flat_spaces_and_trains_with_an_mlp():
    from stable_baselines3 import PPO

    flat, base = gym.make("membudget/PMWeekFlat-v0"), gym.make("membudget/PMWeek-v0")
    fo, _ = flat.reset(seed=9)
    bo, _ = base.reset(seed=9)
    np.testing.assert_array_equal(fo, gym.spaces.flatten(base.observation_space, bo))
    rng = np.random.default_rng(0)
    for _ in range(80):
        a = rng.integers(0, 2, 11)
        fo, fr, ft, _, fi = flat.step(a)
        bo, br, bt, _, bi = base.step(a.astype(np.int8))
        assert fr == br and ft == bt and np.array_equal(fi["queried"], bi["queried"])
    with pytest.raises(ValueError, match="integers in"):
        flat.step(np.full(11, 2))
    with pytest.raises(ValueError, match="action_mode"):
        gym.make("membudget/PMWeekFlat-v0", action_mode="scores")
    PPO("MlpPolicy", flat, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu").learn(128)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_dict_observations_keep_their_space_s_key_order(env_id):
    """Code that reads a Dict observation in order (``np.concatenate(list(obs.values()))``) gets the same vector from
    the single env, Gymnasium's vector envs and the native one: the keys come in the space's (sorted) order."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is out of date.*")
        env = gym.make(env_id)
    if not isinstance(env.observation_space, gym.spaces.Dict):
        pytest.skip("not a Dict observation")
    obs, _ = env.reset(seed=0)
    assert list(obs) == list(env.observation_space.spaces)
    obs, *_ = env.step(env.action_space.sample())
    assert list(obs) == list(env.observation_space.spaces)
    if gym.spec(env_id).vector_entry_point is not None:
        for kwargs in ({}, {"observe_counts": True}):
            venv = gym.make_vec(env_id, num_envs=2, vectorization_mode="vector_entry_point", **kwargs)
            assert list(venv.reset(seed=0)[0]) == list(venv.single_observation_space.spaces)


REWARD_WEIGHTS = [  # (id, argument, its largest allowed value, what the episode needs besides)
    ("membudget/ReplayStream-v0", "cost_weight", "MAX_REWARD_WEIGHT", {"n_tasks": 60}),
    ("membudget/ReplayStream-v1", "cost_weight", "MAX_REWARD_WEIGHT", {"n_tasks": 60}),
    ("membudget/ProactiveStream-v0", "intrusion_penalty", "MAX_REWARD_WEIGHT", {"n_days": 14}),
    ("membudget/ProactiveStream-v0", "token_weight", "MAX_REWARD_WEIGHT", {"n_days": 14}),
    ("membudget/ProactiveStream-v1", "token_weight", "MAX_REWARD_WEIGHT", {"n_days": 14}),
    ("membudget/TierRouting-v0", "lam", "MAX_LAMBDA", {}),
]


@pytest.mark.parametrize("env_id, name, bound, kwargs", REWARD_WEIGHTS)
def test_reward_weights_are_bounded_so_rewards_and_returns_stay_finite(env_id, name, bound, kwargs):
    from membudget.envs.tiers.env import MAX_LAMBDA
    from membudget.envs.validation import MAX_REWARD_WEIGHT

    largest = {"MAX_REWARD_WEIGHT": MAX_REWARD_WEIGHT, "MAX_LAMBDA": MAX_LAMBDA}[bound]
    with pytest.raises(ValueError, match=name):
        gym.make(env_id, **kwargs, **{name: np.nextafter(largest, np.inf)})
    env = gym.make(env_id, **kwargs, **{name: largest})
    env.reset(seed=0)
    env.action_space.seed(0)
    rewards, done = [], False
    while not done:
        _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        rewards.append(reward)
        done = terminated or truncated
    assert np.isfinite(rewards).all() and np.isfinite(np.sum(rewards))
    assert np.abs(rewards).max() > 1.0   # the weight reaches the reward: the bound is not vacuous here


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_a_refused_reset_leaves_the_generator_as_it_was(env_id):
    a, b = gym.make(env_id).unwrapped, gym.make(env_id).unwrapped
    a.reset(seed=1)
    b.reset(seed=1)
    with pytest.raises(ValueError):
        a.reset(seed=99, options={"bogus": 1})
    assert a.np_random.bit_generator.state == b.np_random.bit_generator.state
    assert a.np_random_seed == b.np_random_seed == 1


def test_the_native_vector_env_reports_its_weeks_seeds_and_generators_as_sync_does():
    native = gym.make_vec("membudget/PMWeek-v0", num_envs=3, vectorization_mode="vector_entry_point")
    sync = gym.make_vec("membudget/PMWeek-v0", num_envs=3, vectorization_mode="sync")
    for seed in (3, [None, 7, 11]):
        native.reset(seed=seed)
        sync.reset(seed=seed)
        assert native.np_random_seed == sync.np_random_seed
        assert [g.bit_generator.state for g in native.np_random] == [g.bit_generator.state for g in sync.np_random]
    assert native.np_random_seed == (3, 7, 11)


def test_copies_render_their_own_picture_and_the_shared_budget_env_is_freed():
    import copy
    import gc
    import weakref

    from membudget.envs import shared_budget

    for env_id in ("membudget/PMWeek-v0", "membudget/ConversationPM-v1"):
        env = gym.make(env_id, render_mode="rgb_array")
        env.reset(seed=0)
        env.step(env.action_space.sample())
        frame = env.render()
        assert np.array_equal(copy.deepcopy(env).render(), frame)
        assert np.array_equal(pickle.loads(pickle.dumps(env)).render(), frame)
    par = shared_budget.parallel_env(n_agents=2)
    assert par.observation_space("agent_0") is par.observation_space("agent_0")
    with pytest.raises(KeyError):
        par.observation_space("nobody")
    ref = weakref.ref(par)
    del par
    gc.collect()
    assert ref() is None   # no cache keeps the environment alive
