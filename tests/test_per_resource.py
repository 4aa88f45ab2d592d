"""One policy class for every PMWeek learner: the per-resource network is permutation-equivariant, serves SB3 PPO /
MaskablePPO and the native PPO, and the native PPO is reproducible, feasible and can start from a student."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from membudget.agents.per_resource import (MaskablePerResourceActorCriticPolicy, PerResourceActorCriticPolicy,
                                           PerResourceNet, StudentPolicy, candidate_outputs)
from membudget.agents.ppo import train_ppo
from membudget.envs.pm import PMWeekEnv, PMWeekVectorEnv

PERM = np.random.default_rng(3).permutation(11)
TINY = dict(total_timesteps=2 * 4 * 80, n_envs=4, n_minibatches=2, eval_every=0, eval_seeds=[4000], engine="autograd",
            keep_best=False)  # the mechanics under test, on the eager engine


def _batch(seed=8000, n=3, steps=15):
    env = PMWeekVectorEnv(num_envs=n, action_mode="scores")
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        obs, *_ = env.step(np.where(obs["mask"] > 0, rng.uniform(-1, 1, (n, 11)), -1).astype(np.float32))
    return obs


def _permuted(obs):
    return {"resources": obs["resources"][:, PERM], "budget": obs["budget"], "mask": obs["mask"][:, PERM]}


@pytest.mark.parametrize("context", [True, False])
def test_net_permuting_resources_permutes_outputs(context):
    torch.manual_seed(0)
    net = PerResourceNet((16, 8), context=context, n_out=2)
    obs = _batch()
    t = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in obs.items()}
    tp = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in _permuted(obs).items()}
    out, out_p = net(t["resources"], t["budget"], t["mask"]), net(tp["resources"], tp["budget"], tp["mask"])
    torch.testing.assert_close(out[:, PERM], out_p, rtol=1e-5, atol=1e-6)
    assert out.shape == (3, 11, 2)


@pytest.mark.parametrize("context", [True, False])
def test_forward_candidates_equals_forward_at_the_candidates(context):
    torch.manual_seed(0)
    net = PerResourceNet((16, 8), context=context, n_out=2)
    obs = _batch()
    res, bud, mask = (torch.as_tensor(obs[k], dtype=torch.float32) for k in ("resources", "budget", "mask"))
    mask[1] = 0.0  # a sample without candidates contributes no rows
    out, sample, resource = net.forward_candidates(res, bud, mask)
    expected_rows = np.argwhere(mask.numpy() > 0)
    np.testing.assert_array_equal(np.stack([sample.numpy(), resource.numpy()], axis=1), expected_rows)
    torch.testing.assert_close(out, net(res, bud, mask)[sample, resource], rtol=1e-5, atol=1e-6)
    assert out.shape == (len(expected_rows), 2)


@pytest.mark.parametrize("hidden,context", [((16, 8), True), ((16, 8), False), ((12,), True), ((8, 8, 8), True)])
def test_candidate_outputs_equal_forward_and_follow_the_parameters(hidden, context):
    torch.manual_seed(1)
    net = PerResourceNet(hidden, context=context, n_out=2)
    obs = _batch()
    i = int(np.argmax(obs["mask"].sum(axis=1)))  # the observation with the most candidates
    res, bud, mask = (np.asarray(obs[k][i], dtype=np.float32) for k in ("resources", "budget", "mask"))
    rows = np.flatnonzero(mask)
    assert rows.size >= 2

    def both():
        with torch.no_grad():
            want = net(*(torch.as_tensor(a)[None] for a in (res, bud, mask)))[0, rows].numpy()
        return candidate_outputs(net.numpy_layers(), res, bud, rows), want

    got, want = both()
    assert got.shape == want.shape == (rows.size, 2) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    layers = net.numpy_layers()
    with torch.no_grad():  # an optimizer's in-place step, then a load: both show through the same views
        net.head.bias += 1.0
        net.first.weight.mul_(0.5)
    np.testing.assert_allclose(candidate_outputs(layers, res, bud, rows), both()[1], rtol=1e-5, atol=1e-6)
    net.load_state_dict(PerResourceNet(hidden, context=context, n_out=2).state_dict())
    np.testing.assert_allclose(candidate_outputs(layers, res, bud, rows), both()[1], rtol=1e-5, atol=1e-6)


def test_student_acts_on_one_observation_as_on_a_batch():
    torch.manual_seed(2)
    policy = StudentPolicy(PerResourceNet((16, 8)), threshold=0.45)
    obs = _batch(n=6, steps=25)
    batched, _ = policy.predict(obs)
    assert batched.shape == (6, 11)
    for i in range(6):
        single, _ = policy.predict({k: v[i] for k, v in obs.items()})
        assert single.shape == (11,) and single.dtype == np.float32
        np.testing.assert_array_equal(single > 0, batched[i] > 0)
        np.testing.assert_allclose(single, batched[i], rtol=1e-5, atol=1e-6)
    import copy
    import pickle

    twin = pickle.loads(pickle.dumps(policy))  # its layers made again from the copy's own parameters
    deep = copy.deepcopy(policy)
    with torch.no_grad():
        for p in (*twin.net.parameters(), *deep.net.parameters()):
            p.mul_(-1.0)
    one = {k: v[0] for k, v in obs.items()}
    flipped, _ = StudentPolicy(twin.net, threshold=0.45).predict({k: v[None] for k, v in one.items()})
    np.testing.assert_allclose(twin.predict(one)[0], flipped[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(deep.predict(one)[0], flipped[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("hidden,context", [((16, 8), True), ((16, 8), False), ((12,), True), ((12,), False)])
@pytest.mark.parametrize("n_candidates", [0, 1, 11])
def test_one_observation_at_the_candidate_corners_decides_as_the_batch(hidden, context, n_candidates):
    """No candidate, one (the context's mean is its own row) and all eleven, with and without the context and with
    the head reading the pool directly (one hidden layer): the compiled one-observation path proposes what the
    torch batch of one proposes, with its probabilities."""
    torch.manual_seed(3)
    policy = StudentPolicy(PerResourceNet(hidden, context=context), threshold=0.5)
    rng = np.random.default_rng(n_candidates)
    mask = np.zeros(11, np.int8)
    mask[rng.permutation(11)[:n_candidates]] = 1
    obs = {"resources": rng.normal(size=(11, 27)).astype(np.float32), "budget": rng.uniform(size=9), "mask": mask}
    if n_candidates:  # a bias that puts the candidates' median logit at the threshold
        p = policy.probabilities({k: v[None] for k, v in obs.items()})[0, mask == 1]
        with torch.no_grad():
            policy.net.head.bias -= float(np.median(np.log(p / (1 - p)))) - 1e-3
    single, _ = policy.predict(obs)
    batched, _ = policy.predict({k: v[None] for k, v in obs.items()})
    assert single.shape == (11,) and single.dtype == np.float32
    np.testing.assert_array_equal(single == -1, batched[0] == -1)
    assert (single[mask == 0] == -1).all()
    if n_candidates == 11:
        assert 0 < (single > 0).sum() < 11
    np.testing.assert_allclose(single, batched[0], rtol=1e-5, atol=1e-6)


def test_native_ppo_minibatch_rows_are_the_batch_samples_candidates():
    from membudget.agents.ppo import _minibatch_rows

    rng = np.random.default_rng(0)
    mask = torch.as_tensor(rng.random((40, 11)) < 0.3)
    row_sample, row_resource = mask.nonzero(as_tuple=True)
    batch = torch.as_tensor(rng.permutation(40)[:13])
    rows, local = _minibatch_rows(batch, row_sample, 40)
    expected = [(i, int(r)) for i, s in enumerate(batch.tolist()) for r in np.flatnonzero(mask[s].numpy())]
    got = sorted(zip(local.tolist(), row_resource[rows].tolist()))
    assert got == sorted(expected)
    assert all(int(batch[i]) == int(row_sample[j]) for i, j in zip(local.tolist(), rows.tolist()))


def test_context_lets_resources_see_each_other():
    torch.manual_seed(0)
    obs = _batch()
    res, bud, mask = (torch.as_tensor(obs[k], dtype=torch.float32) for k in ("resources", "budget", "mask"))
    other = res.clone()
    j = int(np.flatnonzero(obs["mask"][0])[0])
    k = next(i for i in range(11) if i != j)
    mask[0, j] = 1.0
    other[0, j] += 1.0  # change one candidate's features only
    for context, moves in ((True, True), (False, False)):
        net = PerResourceNet((16, 8), context=context)
        changed = not torch.allclose(net(res, bud, mask)[0, k], net(other, bud, mask)[0, k])
        assert changed == moves


def test_bad_net_arguments_are_refused():
    with pytest.raises(ValueError, match="hidden"):
        PerResourceNet(())
    with pytest.raises(ValueError, match="n_out"):
        PerResourceNet((8,), n_out=0)


@pytest.mark.parametrize("algo,mode", [("ppo", "binary"), ("ppo", "scores"), ("maskable_ppo", "binary")])
def test_sb3_policies_use_the_per_resource_actor(algo, mode, tmp_path):
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    from membudget.agents.rl import DevWeeksVecEnv

    cls, pol = (PPO, PerResourceActorCriticPolicy) if algo == "ppo" else (MaskablePPO,
                                                                          MaskablePerResourceActorCriticPolicy)
    venv = DevWeeksVecEnv(4, seed=0, budget="B10", action_mode=mode)
    model = cls(pol, venv, n_steps=32, batch_size=64, n_epochs=1, seed=0, device="cpu",
                policy_kwargs=dict(hidden=(16, 16), critic_arch=(32,)))
    model.learn(128)
    assert isinstance(model.policy.action_net, torch.nn.Identity)
    assert isinstance(model.policy.mlp_extractor.net, PerResourceNet)
    obs = venv.reset()
    o, _ = model.policy.obs_to_tensor(obs)
    op, _ = model.policy.obs_to_tensor(_permuted(obs))

    def params(o):  # SB3 reuses one distribution object: read its parameters before the next call
        d = model.policy.get_distribution(o)
        if algo == "maskable_ppo":
            return torch.stack([x.logits for x in d.distributions], 1)
        return d.distribution.probs if mode == "binary" else d.distribution.mean

    torch.testing.assert_close(params(o)[:, PERM], params(op), rtol=1e-5, atol=1e-6)
    if mode == "scores":
        assert model.policy.log_std.shape == (1,)  # one standard deviation for every resource
    model.save(tmp_path / "m.zip")
    back = cls.load(tmp_path / "m.zip", device="cpu")
    np.testing.assert_array_equal(back.predict(obs, deterministic=True)[0], model.predict(obs, deterministic=True)[0])


def test_native_ppo_same_seed_same_policy_and_history():
    a, ha = train_ppo("B10", seed=4, **TINY)
    b, hb = train_ppo("B10", seed=4, **TINY)
    obs = _batch()
    np.testing.assert_array_equal(a.probabilities(obs), b.probabilities(obs))
    assert [h["val_set_f1"] for h in ha] == [h["val_set_f1"] for h in hb]
    assert [h["env_steps"] for h in ha] == [0, 640]
    c, _ = train_ppo("B10", seed=5, **TINY)
    assert not np.array_equal(a.probabilities(obs), c.probabilities(obs))


def test_native_ppo_leaves_the_callers_torch_stream_as_it_was():
    """train_ppo seeds torch's global generator in a forked one (as fitting a student does): the caller's stream
    continues as if nothing had been trained, and the run is the same whatever the caller's stream was."""
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    a, _ = train_ppo("B10", seed=4, **TINY)
    assert torch.equal(torch.rand(3), expected)
    b, _ = train_ppo("B10", seed=4, **TINY)
    assert all(torch.equal(x, y) for x, y in zip(a.net.state_dict().values(), b.net.state_dict().values()))


def test_native_ppo_policy_acts_feasibly_and_round_trips(tmp_path):
    policy, _ = train_ppo("B5", seed=0, **TINY)
    env = PMWeekEnv(budget="B5", action_mode="scores")
    obs, _ = env.reset(seed=8000)
    done, spent = False, 0
    while not done:
        action, _ = policy.predict(obs)
        assert np.all(action[obs["mask"] == 0] == -1.0)  # only candidates are proposed
        obs, _, done, _, info = env.step(action)
        spent += info["cost"]
        assert len(np.flatnonzero(info["queried"])) <= 2
    assert spent == info["episode_metrics"]["realized_cost"] <= env.budget
    policy.save(tmp_path / "p.npz")
    np.testing.assert_array_equal(StudentPolicy.load(tmp_path / "p.npz").predict(obs)[0], policy.predict(obs)[0])


def test_distil_then_rl_starts_from_the_student():
    from membudget.agents.imitation import fit_bc

    student, _ = fit_bc([2000, 2001], "B10", epochs=3, hidden=16)
    policy, history = train_ppo("B10", seed=0, init=student.net, **dict(TINY, eval_seeds=[4000, 4001]))
    from membudget.envs.pm.rollout import rollout

    start = rollout(student, [4000, 4001], budget="B10", action_mode="scores")["set_f1"].mean()
    assert history[0]["val_set_f1"] == pytest.approx(start)
    assert policy.net is not student.net and policy.net.hidden == (16, 16)


def test_keep_best_returns_the_best_validation_checkpoint():
    kw = dict(TINY, eval_every=4 * 80)  # a point after each of the 2 updates
    last, history = train_ppo("B10", seed=3, **kw)
    best, _ = train_ppo("B10", seed=3, **dict(kw, keep_best=True))
    scores = [h["val_set_f1"] for h in history]
    k = int(np.argmax(scores))
    assert best.config["selected_env_steps"] == history[k]["env_steps"]
    from membudget.envs.pm.rollout import rollout

    assert rollout(best, [4000], budget="B10", action_mode="scores")["set_f1"].mean() == pytest.approx(scores[k])
    if k == len(scores) - 1:
        np.testing.assert_array_equal(best.probabilities(_batch()), last.probabilities(_batch()))


def test_critic_warmup_keeps_the_actor_fixed():
    from membudget.agents.imitation import fit_bc

    student, _ = fit_bc([2000, 2001], "B10", epochs=3, hidden=16)
    kw = dict(TINY, eval_seeds=[4000])  # TINY: 2 updates
    frozen, _ = train_ppo("B10", seed=0, init=student.net, critic_warmup=2, **kw)
    moved, _ = train_ppo("B10", seed=0, init=student.net, critic_warmup=1, **kw)
    obs = _batch()
    np.testing.assert_array_equal(frozen.probabilities(obs), student.probabilities(obs))
    assert not np.array_equal(moved.probabilities(obs), student.probabilities(obs))


def test_native_ppo_refuses_bad_settings():
    for bad in (dict(learning_rate=float("nan")), dict(gamma=5.0), dict(n_epochs=-5), dict(total_timesteps=0),
                dict(clip_coef=0.0), dict(bc_coef=1.0), dict(critic_warmup=-1)):
        with pytest.raises(ValueError):
            train_ppo("B10", **dict(TINY, **bad))


def test_observe_counts_is_the_running_tp_fp_fn():
    env = PMWeekEnv(budget="B10", observe_counts=True)
    assert env.observation_space["counts"].shape == (3,)
    obs, _ = env.reset(seed=9001)
    assert "counts" not in PMWeekEnv().observation_space.spaces  # BudgetPM's observation by default
    vec = PMWeekVectorEnv(num_envs=1, budget="B10", observe_counts=True)
    vobs, _ = vec.reset(seed=9001)
    done = False
    while not done:
        a = obs["mask"]
        obs, _, done, _, info = env.step(a)
        vobs, _, _, _, _ = vec.step(a[None])
        np.testing.assert_array_equal(vobs["counts"][0], obs["counts"])
    m = info["episode_metrics"]
    n = env.episode.kind.size
    np.testing.assert_allclose(obs["counts"], np.float32([m["tp"], m["fp"], m["fn"]]) / np.float32(n), rtol=1e-6)


def test_observe_counts_passes_the_checkers():
    import warnings

    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make("membudget/PMWeek-v0", observe_counts=True).unwrapped)


def test_flat_mlp_ablation_trains_in_the_native_loop_and_round_trips(tmp_path):
    from membudget.agents.per_resource import FlatMLPNet

    policy, _ = train_ppo("B10", seed=0, actor="flat-mlp", **TINY)
    assert isinstance(policy.net, FlatMLPNet) and policy.config["actor"] == "flat-mlp"
    obs = _batch()
    t = [torch.as_tensor(obs[k], dtype=torch.float32) for k in ("resources", "budget", "mask")]
    out, sample, resource = policy.net.forward_candidates(*t)
    torch.testing.assert_close(out, policy.net(*t)[sample, resource])
    policy.save(tmp_path / "flat.npz")
    again = StudentPolicy.load(tmp_path / "flat.npz")
    assert isinstance(again.net, FlatMLPNet)
    np.testing.assert_array_equal(again.probabilities(obs), policy.probabilities(obs))
    with pytest.raises(ValueError, match="actor"):
        train_ppo("B10", actor="mlp", **TINY)
