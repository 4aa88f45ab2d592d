"""The compiled PPO engine (membudget.agents.ppo_compiled) against autograd, torch's Adam and the network class."""

import os

import numpy as np
import pytest
import torch

from membudget.agents.per_resource import N_INPUT, PerResourceNet, candidate_rows, obs_tensors
from membudget.agents.ppo import PPOConfig, _bernoulli_log_prob, _mlp, _per_sample, new_actor, ppo_losses, train_ppo
from membudget.agents.ppo_compiled import (AOTIUpdate, Buffer, CompiledPPO, Minibatch, adam_, clip_grads,
                                           compiled_backend_name, critic_values, critic_values_only, gathered_update,
                                           minibatch_grads, rollout_actor, sigmoid_tanh)
from membudget.agents.tasks import PMWEEK


def _minibatch(n=48, k=120, obs_width=30, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(k, N_INPUT, generator=gen)
    sample = torch.sort(torch.randint(0, n - 3, (k,), generator=gen)).values  # the last 3 samples: no candidates
    proposed = (torch.rand(k, generator=gen) < 0.4).float()
    obs = torch.randn(n, obs_width, generator=gen)
    adv, ret = torch.randn(n, generator=gen), torch.randn(n, generator=gen)
    return x, sample, proposed, obs, adv, ret, gen


@pytest.mark.parametrize("with_actor", [True, False])
@pytest.mark.parametrize("ent_coef", [0.0, 0.01])
@pytest.mark.parametrize("critic_arch", [(16,), (24, 20)])
def test_grads_equal_autograd(ent_coef, critic_arch, with_actor):
    torch.manual_seed(1)
    n = 48
    x, sample, proposed, obs, adv, ret, gen = _minibatch(n)
    actor, critic = PerResourceNet((32, 16)), _mlp(obs.shape[1], critic_arch)
    with torch.no_grad():
        logits = actor.forward_rows(x, sample, n)[:, 0]
        # old log-probabilities off by up to ±0.5, so that ratios fall outside the clip range on both sides
        old_logp = (_per_sample(_bernoulli_log_prob(logits, proposed), sample, n)
                    + (torch.rand(n, generator=gen) - 0.5))
    pg, v_loss, entropy = ppo_losses(actor.forward_rows(x, sample, n)[:, 0], proposed, sample, old_logp, adv,
                                     critic(obs)[:, 0], ret, 0.2)
    (pg + 0.5 * v_loss - ent_coef * entropy if with_actor else 0.5 * v_loss).backward()
    count = torch.bincount(sample, minlength=n).clamp(min=1).float()
    with torch.no_grad():
        actor_grads, critic_grads = minibatch_grads(
            [p.detach() for p in actor.parameters()], [p.detach() for p in critic.parameters()],
            Minibatch(x, obs, sample, (1 / count)[:, None], proposed, old_logp, adv, ret), clip_coef=torch.tensor(0.2),
            vf_coef=0.5, ent_coef=ent_coef, with_actor=with_actor)
    assert (actor_grads is None) == (not with_actor)
    pairs = list(zip(critic.parameters(), critic_grads))
    if with_actor:
        pairs += list(zip(actor.parameters(), actor_grads))
    else:
        assert all(p.grad is None for p in actor.parameters())
    assert len(pairs) == len(list(critic.parameters())) + (len(list(actor.parameters())) if with_actor else 0)
    for param, grad in pairs:
        assert grad.shape == param.shape
        torch.testing.assert_close(grad, param.grad, rtol=1e-4, atol=1e-6)


def test_bf16_critic_products_stay_close():
    torch.manual_seed(1)
    n = 48
    x, sample, proposed, obs, adv, ret, _ = _minibatch(n)
    actor, critic = PerResourceNet((32, 16)), _mlp(obs.shape[1], (64, 64))
    args = ([p.detach() for p in actor.parameters()], [p.detach() for p in critic.parameters()],
            Minibatch(x, obs, sample, torch.ones(n, 1), proposed, torch.zeros(n), adv, ret))
    exact = minibatch_grads(*args, clip_coef=0.2, vf_coef=0.5, ent_coef=0.0)
    bf16 = minibatch_grads(*args, clip_coef=0.2, vf_coef=0.5, ent_coef=0.0, critic_dtype=torch.bfloat16)
    for a, b in zip(exact[0], bf16[0]):
        torch.testing.assert_close(a, b)  # the actor's products stay float32
    for a, b in zip(exact[1], bf16[1]):
        assert float((a - b).norm() / b.norm()) < 0.02


def test_clip_grads_equals_clip_grad_norm():
    gen = torch.Generator().manual_seed(5)
    for scale in (0.01, 10.0):
        grads = [torch.randn(4, 3, generator=gen) * scale, torch.randn(6, generator=gen) * scale]
        params = [torch.zeros_like(g, requires_grad=True) for g in grads]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        for ours, p in zip(clip_grads(grads, torch.tensor(0.5)), params):
            torch.testing.assert_close(ours, p.grad)


def test_adam_equals_torch_adam():
    torch.manual_seed(4)
    params = [torch.randn(5, 3), torch.randn(7)]
    reference = [p.clone().requires_grad_() for p in params]
    opt = torch.optim.Adam(reference, lr=3e-3, eps=1e-5)
    exp_avgs, exp_avg_sqs = [torch.zeros_like(p) for p in params], [torch.zeros_like(p) for p in params]
    for t in range(1, 8):
        grads = [torch.randn_like(p) for p in params]
        for p, g in zip(reference, grads):
            p.grad = g.clone()
        opt.step()
        adam_(params, grads, exp_avgs, exp_avg_sqs, torch.tensor(3e-3 / (1 - 0.9 ** t)),
              torch.tensor((1 - 0.999 ** t) ** 0.5))
    for p, r in zip(params, reference):
        torch.testing.assert_close(p, r.detach(), rtol=1e-5, atol=1e-7)


def test_sigmoid_tanh_equals_tanh():
    z = torch.linspace(-12, 12, 10001)
    torch.testing.assert_close(sigmoid_tanh(z.clone()), torch.tanh(z), rtol=0, atol=2e-7)


def test_rollout_actor_equals_the_network():
    torch.manual_seed(2)
    n = 10
    x, sample, _, _, _, _, _ = _minibatch(n, k=25)
    actor = PerResourceNet((64, 64))
    with torch.no_grad():
        actor.head.weight.mul_(200)  # logits of ±100 and beyond: the sigmoid must not overflow
    weights = [p.detach().numpy() for p in actor.parameters()]
    with np.errstate(all="raise"):
        p, proposed, logp = rollout_actor(weights, x.numpy(), sample.numpy(), n, np.random.default_rng(0))
    with torch.no_grad():
        logits = actor.forward_rows(x, sample, n)[:, 0]
        expected = _per_sample(_bernoulli_log_prob(logits, torch.as_tensor(proposed, dtype=torch.float32)), sample,
                               n)
    np.testing.assert_allclose(p, torch.sigmoid(logits).numpy(), rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(logp, expected.numpy(), rtol=1e-5, atol=1e-5)
    assert logp.dtype == np.float32 and logp.shape == (n,) and (logp[-3:] == 0).all()


def test_rollout_and_minibatches_keep_each_state_with_its_candidates():
    torch.manual_seed(0)
    venv = PMWEEK.vector_env(8, "B10", **PMWEEK.env_kwargs())
    n_res, n_features = venv.single_observation_space["resources"].shape
    obs_width = sum(int(np.prod(s.shape)) for s in venv.single_observation_space.spaces.values())
    engine = CompiledPPO(new_actor("per-resource", (16, 16), True, n_res, n_features), _mlp(obs_width, (8,)),
                         PPOConfig(ent_coef=0.0, n_epochs=1, n_minibatches=5), np.random.default_rng(0),
                         compile=False)
    first, _ = venv.reset(seed=list(range(2000, 2008)))
    batch, T = engine.rollout(venv, first, 100.0, False)
    x, sample, _ = candidate_rows(*obs_tensors(first)[:3])  # the first step's rows, as the network class builds them
    assert torch.equal(batch["rows"][:len(sample)], x) and np.array_equal(batch["row_sample"][:len(sample)], sample)
    n = T * 8
    ids = torch.arange(n, dtype=torch.float32)  # each state's index, carried as its advantage
    row_sample, seen = torch.as_tensor(batch["row_sample"]), []
    for x, obs, local, inv_count, proposed, old_logp, adv, ret in engine.minibatches(batch, ids, -ids):
        assert torch.equal(ret, -adv)
        for i, state in enumerate(adv.long().tolist()):
            own = row_sample == state
            assert torch.equal(x[local == i], batch["rows"][own])
            own_proposed = torch.as_tensor(batch["proposed"][own.numpy()], dtype=torch.float32)
            assert torch.equal(proposed[local == i], own_proposed)
            assert old_logp[i] == batch["old_logp"][state] and torch.equal(obs[i], batch["obs"][state])
            assert inv_count[i, 0] == pytest.approx(1 / max(1, int(own.sum())))
        seen += adv.long().tolist()
    assert sorted(seen) == list(range(n))


@pytest.mark.slow
@pytest.mark.parametrize("kwargs", [{}, {"critic_counts": True, "critic_warmup": 1, "ent_coef": 0.01,
                                         "anneal_lr": True, "init": "student"}])
def test_compiled_engine_trains_and_is_reproducible(kwargs):
    kwargs = dict(kwargs)
    if kwargs.get("init") == "student":
        torch.manual_seed(7)
        kwargs["init"] = PerResourceNet((64, 64))
    runs = [train_ppo("B10", total_timesteps=2 * 4 * 80, seed=3, n_envs=4, n_minibatches=2, eval_every=0,
                      eval_seeds=[4000], engine="compiled", keep_best=False, **kwargs) for _ in range(2)]
    (policy, history), (again, _) = runs
    assert [row["env_steps"] for row in history] == [0, 2 * 4 * 80]
    assert policy.config["engine"] == "compiled"
    start = kwargs.get("init") or PerResourceNet((64, 64))
    assert any(not torch.equal(a, b) for a, b in zip(policy.net.state_dict().values(), start.state_dict().values()))
    for a, b in zip(policy.net.state_dict().values(), again.net.state_dict().values()):
        assert torch.equal(a, b)


@pytest.mark.slow
def test_compiled_critic_warmup_keeps_the_actor():
    torch.manual_seed(7)
    init = PerResourceNet((64, 64))
    policy, _ = train_ppo("B10", total_timesteps=4 * 80, seed=3, n_envs=4, n_minibatches=2, eval_every=0,
                          eval_seeds=[4000], engine="compiled", init=init, critic_warmup=1, keep_best=False)
    for a, b in zip(policy.net.state_dict().values(), init.state_dict().values()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("bad, message", [
    ({"actor": "flat-mlp"}, "two hidden layers and context"),
    ({"context": False}, "two hidden layers and context"),
    ({"hidden": (64,)}, "two hidden layers and context"),
    ({"hidden": (64, 64, 64)}, "two hidden layers and context"),
    ({"bc_coef": 0.1, "bc_data": (0, 0, 0, 0)}, "bc_coef"),
    ({"task": "conversation"}, "PMWeek-v0 only"),
    ({"engine": "jax"}, "engine must be one of"),
])
def test_compiled_engine_refuses_what_it_does_not_train(bad, message):
    kwargs = {"engine": "compiled", **bad}
    with pytest.raises(ValueError, match=message):
        train_ppo("B10", total_timesteps=1, n_envs=2, **kwargs)


def test_auto_picks_the_compiled_engine_only_where_it_trains_the_run_and_pays_for_its_compilation():
    from membudget.agents.ppo import AUTO_COMPILED_STEPS, PPOConfig, choose_engine
    from membudget.agents.tasks import CONVERSATION, PMWEEK

    net, flat = PerResourceNet((64, 64)), PerResourceNet((64, 64), context=False)
    long, short = PPOConfig(), PPOConfig(total_timesteps=AUTO_COMPILED_STEPS - 1)
    assert long.total_timesteps >= AUTO_COMPILED_STEPS
    assert choose_engine(long, PMWEEK, net) == "compiled"
    assert choose_engine(short, PMWEEK, net) == "autograd"  # the first compilation would cost more than it saves
    assert choose_engine(long, CONVERSATION, net) == "autograd"
    assert choose_engine(long, PMWEEK, flat) == "autograd"
    assert choose_engine(PPOConfig(bc_coef=0.1), PMWEEK, net) == "autograd"
    assert choose_engine(PPOConfig(engine="autograd"), PMWEEK, net) == "autograd"
    assert choose_engine(PPOConfig(engine="compiled", total_timesteps=1), PMWEEK, net) == "compiled"


def test_the_critic_s_dtype_follows_the_cpu_unless_set():
    from membudget.agents.ppo_compiled import critic_dtype_name, native_bf16

    assert isinstance(native_bf16(), bool) and native_bf16() is native_bf16()  # measured once per process
    assert critic_dtype_name("auto") == ("bfloat16" if native_bf16() else "float32")
    assert critic_dtype_name("float32") == "float32" and critic_dtype_name("bfloat16") == "bfloat16"
    with pytest.raises(ValueError, match="critic_dtype"):
        critic_dtype_name("float16")


@pytest.mark.slow
def test_the_float32_compiled_path_trains_reproducibly_and_records_its_dtype():
    kw = dict(total_timesteps=2 * 4 * 80, seed=3, n_envs=4, n_minibatches=2, eval_every=0, eval_seeds=[4000],
              engine="compiled", critic_dtype="float32", keep_best=False)
    (a, _), (b, _) = train_ppo("B10", **kw), train_ppo("B10", **kw)
    assert a.config["engine"] == "compiled" and a.config["critic_dtype"] == "float32"
    assert a.config["compiled_backend"] == "aoti"  # auto: AOTInductor with float32 products
    assert all(torch.equal(x, y) for x, y in zip(a.net.state_dict().values(), b.net.state_dict().values()))
    bf16, _ = train_ppo("B10", **dict(kw, critic_dtype="bfloat16"))
    assert bf16.config["critic_dtype"] == "bfloat16" and bf16.config["compiled_backend"] == "aoti"
    assert any(not torch.equal(x, y) for x, y in zip(a.net.state_dict().values(), bf16.net.state_dict().values()))


def test_the_compiled_backend_is_aoti_unless_set():
    assert compiled_backend_name("auto") == "aoti"
    assert compiled_backend_name("inductor") == "inductor"
    assert compiled_backend_name("aoti") == "aoti"
    for bad in ("eager", "", None):
        with pytest.raises(ValueError, match="compiled_backend"):
            compiled_backend_name(bad)
        with pytest.raises(ValueError, match="compiled_backend"):
            PPOConfig(compiled_backend=bad)
    with pytest.raises(ValueError, match="backend"):
        CompiledPPO(PerResourceNet((8, 8)), _mlp(4, (4,)), PPOConfig(), np.random.default_rng(0), backend="eager")


def _update_case(n=48, seed=8):
    """A minibatch (indices into its epoch's arrays), those arrays, and an actor's and a critic's Adam state."""
    torch.manual_seed(seed)
    x, sample, proposed, obs, adv, ret, gen = _minibatch(n, seed=seed)
    count = torch.bincount(sample, minlength=n).clamp(min=1).float()
    minibatch = Minibatch(torch.arange(x.shape[0]), torch.arange(n), sample, (1 / count)[:, None], proposed,
                          torch.randn(n, generator=gen), adv, ret)
    state = []
    for net in (PerResourceNet((16, 8)), _mlp(obs.shape[1], (12,))):
        params = [p.detach().clone() for p in net.parameters()]
        state.append((params, [torch.rand_like(p) for p in params], [torch.rand_like(p) for p in params]))
    steps = [(torch.tensor(0.03), torch.tensor(0.999 ** 0.5)), (torch.tensor(0.01), torch.tensor(0.5))]
    loss = dict(max_grad_norm=torch.tensor(0.5), clip_coef=torch.tensor(0.2), vf_coef=torch.tensor(0.5),
                ent_coef=torch.tensor(0.01), critic_dtype=torch.float32, tanh=sigmoid_tanh)
    return state, steps, x, obs, minibatch, loss


def _copy(state):
    return [tuple([t.clone() for t in part] for part in net) for net in state]


@pytest.mark.slow
@pytest.mark.parametrize("with_actor", [True, False])
@pytest.mark.parametrize("critic_dtype", [torch.float32, torch.bfloat16])
def test_the_aoti_update_is_the_update_up_to_rounding_and_is_built_once(with_actor, critic_dtype, tmp_path,
                                                                        monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    state, steps, x, obs, minibatch, loss = _update_case()
    loss["critic_dtype"] = critic_dtype
    eager, first, again = _copy(state), _copy(state), _copy(state)
    with torch.no_grad():
        gathered_update(eager, steps, x, obs, minibatch, with_actor=with_actor, **loss)
        AOTIUpdate()(first, steps, x, obs, minibatch, with_actor=with_actor, **loss)
        assert len(list(tmp_path.rglob("update-*.pt2"))) == 1  # the package, under the inductor cache directory

        def no_export(*args, **kwargs):
            raise AssertionError("a second engine with the same networks must load the package, not build one")

        monkeypatch.setattr(torch.export, "export", no_export)
        AOTIUpdate()(again, steps, x, obs, minibatch, with_actor=with_actor, **loss)
    for net_eager, net_first, net_again, net_start in zip(eager, first, again, state):
        for part_eager, part_first, part_again, part_start in zip(net_eager, net_first, net_again, net_start):
            for e, f, a, s in zip(part_eager, part_first, part_again, part_start):
                assert torch.equal(f, a)  # the same package, the same numbers
                torch.testing.assert_close(f, e, rtol=1e-5, atol=1e-7)
    actor_moved = any(not torch.equal(f, s) for f, s in zip(first[0][0], state[0][0]))
    assert actor_moved == with_actor and any(not torch.equal(f, s) for f, s in zip(first[1][0], state[1][0]))


@pytest.mark.slow
def test_a_damaged_package_is_built_again_and_a_failed_build_leaves_nothing(tmp_path, monkeypatch):
    from membudget.agents import ppo_compiled

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(ppo_compiled, "_LOADED", {})
    state, steps, x, obs, minibatch, loss = _update_case()
    first, again = _copy(state), _copy(state)
    with torch.no_grad():
        AOTIUpdate()(first, steps, x, obs, minibatch, with_actor=False, **loss)
        (package,) = tmp_path.rglob("update-*.pt2")
        umask = os.umask(0)
        os.umask(umask)
        assert package.stat().st_mode & 0o777 == 0o666 & ~umask   # readable by whoever shares the cache
        with open(package, "r+b") as f:   # a crash or a full disk while another process wrote it
            f.truncate(package.stat().st_size // 2)
        monkeypatch.setattr(ppo_compiled, "_LOADED", {})   # a new process
        with pytest.warns(RuntimeWarning, match="could not be loaded.*building it again"):
            AOTIUpdate()(again, steps, x, obs, minibatch, with_actor=False, **loss)
    assert all(torch.equal(f, a) for nf, na in zip(first, again) for pf, pa in zip(nf, na) for f, a in zip(pf, pa))
    assert [p.name for p in tmp_path.rglob("update-*")] == [package.name]

    def crash(program, package_path):
        with open(package_path, "wb") as f:
            f.write(b"half a package")
        raise RuntimeError("the compiler died")

    monkeypatch.setattr(ppo_compiled, "_LOADED", {})
    package.unlink()
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", crash)
    with torch.no_grad(), pytest.raises(RuntimeError, match="the compiler died"):
        AOTIUpdate()(_copy(state), steps, x, obs, minibatch, with_actor=False, **loss)
    assert not list(tmp_path.rglob("update-*"))   # no staging file left behind


def test_auto_trains_with_autograd_where_nothing_can_be_compiled_and_compiled_is_refused(tmp_path, monkeypatch):
    from membudget.agents.ppo import PPOConfig, choose_engine
    from membudget.agents.ppo_compiled import compile_blocker
    from membudget.agents.tasks import PMWEEK

    net = PerResourceNet((64, 64))
    assert compile_blocker("aoti") is None   # this machine builds packages
    (tmp_path / "a-file").write_text("")   # a cache home that no user can create folders under
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    assert "cannot be created" in compile_blocker("aoti") and compile_blocker("inductor") is None
    with pytest.warns(RuntimeWarning, match="engine='auto' trains with the autograd engine: the AOTInductor"):
        assert choose_engine(PPOConfig(), PMWEEK, net) == "autograd"
    with pytest.raises(ValueError, match="engine='compiled' cannot be built here"):
        choose_engine(PPOConfig(engine="compiled"), PMWEEK, net)
    assert choose_engine(PPOConfig(engine="compiled", compiled_backend="inductor"), PMWEEK, net) == "compiled"


def test_no_compiler_means_autograd_for_auto_and_a_refusal_for_compiled(monkeypatch):
    from torch._inductor import config as inductor_config

    from membudget.agents.ppo import PPOConfig, choose_engine
    from membudget.agents.tasks import PMWEEK

    monkeypatch.setattr(inductor_config.cpp, "cxx", (None, "/nonexistent/g++"))
    net = PerResourceNet((64, 64))
    with pytest.warns(RuntimeWarning, match="no working C\\+\\+ compiler"):
        assert choose_engine(PPOConfig(), PMWEEK, net) == "autograd"
    for backend in ("aoti", "inductor"):
        with pytest.raises(ValueError, match="no working C\\+\\+ compiler"):
            choose_engine(PPOConfig(engine="compiled", compiled_backend=backend), PMWEEK, net)


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch):
    from membudget.agents.ppo_compiled import package_root

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert package_root() == os.path.join(os.path.expanduser("~/.cache"), "membudget", "aoti")


def test_the_packages_stay_in_the_user_s_cache_whatever_inductor_wrote_into_its_variable(tmp_path, monkeypatch):
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    from membudget.agents.ppo_compiled import package_root

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    user_cache = str(tmp_path / "xdg" / "membudget" / "aoti")
    assert package_root() == user_cache
    # what inductor itself writes into the variable on a process's first compilation: still the user's cache
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", default_cache_dir())
    assert package_root() == user_cache
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))  # the user's own choice
    assert package_root() == str(tmp_path / "inductor" / "membudget-aoti")


def test_a_minibatch_below_the_package_s_sizes_runs_the_update_uncompiled(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    state, steps, x, obs, minibatch, loss = _update_case()
    # one candidate row (of the first of two samples)
    one = minibatch._replace(x=minibatch.x[:1], sample=torch.zeros(1, dtype=torch.int64),
                             proposed=minibatch.proposed[:1], obs=minibatch.obs[:2], inv_count=torch.ones(2, 1),
                             old_logp=minibatch.old_logp[:2], adv=minibatch.adv[:2], ret=minibatch.ret[:2])
    eager, aoti = _copy(state), _copy(state)
    with torch.no_grad():
        gathered_update(eager, steps, x, obs, one, with_actor=True, **loss)
        AOTIUpdate()(aoti, steps, x, obs, one, with_actor=True, **loss)
    assert not list(tmp_path.rglob("*.pt2"))  # nothing built
    assert all(torch.equal(a, e) for na, ne in zip(aoti, eager) for pa, pe in zip(na, ne) for a, e in zip(pa, pe))


def test_buffer_keeps_every_block_across_growth_and_returns_them_contiguous():
    rng = np.random.default_rng(0)
    buf, blocks = Buffer((3, 2), capacity=4), []
    for n in (3, 0, 5, 1, 9):  # grows twice, once past double the capacity
        block = rng.random((n, 3, 2)).astype(np.float32)
        buf.take(n)[:] = block
        blocks.append(block)
    filled = buf.filled()
    assert filled.flags.c_contiguous and filled.dtype == np.float32
    np.testing.assert_array_equal(filled, np.concatenate(blocks))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_values_only_pass_equals_the_critic_to_the_bit(dtype):
    gen = torch.Generator().manual_seed(0)
    critic = _mlp(29, (16, 8))
    params = [p.detach() * 3 for p in critic.parameters()]  # pre-activations well outside tanh's linear part
    obs = (torch.randn(257, 29, generator=gen) * 4).to(dtype)
    with torch.no_grad():
        values = critic_values_only(params, obs, dtype)
        assert torch.equal(values, critic_values(params, obs, dtype, sigmoid_tanh)[0])
        assert not torch.equal(values, critic_values(params, obs, dtype, torch.tanh)[0])  # the test can tell them apart
