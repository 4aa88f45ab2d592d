"""TorchRL on every id: ``GymEnv`` and ``SerialEnv`` pass ``check_env_specs``; a ``Collector`` feeds a few
hundred frames to ``ClipPPOLoss`` with GAE; the trained actor's ``state_dict`` saves, loads and acts the same."""

import pytest

torchrl = pytest.importorskip("torchrl")

import membudget  # noqa: F401
import torch
from membudget.envs.registration import ENV_IDS
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.envs import (
    CatTensors,
    FlattenObservation,
    GymEnv,
    SerialEnv,
    TransformedEnv,
)
from torchrl.envs.utils import ExplorationType, check_env_specs, set_exploration_type
from torchrl.modules import MLP, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE


DICT_IDS = ("membudget/PMWeek-v0", "membudget/ConversationPM-v0", "membudget/ConversationPM-v1")


def make(env_id):
    env = GymEnv(env_id)
    if env_id in DICT_IDS:  # TorchRL's models take one tensor: its transforms join the Dict's keys
        env = TransformedEnv(env, FlattenObservation(-2, -1, in_keys=["resources"]))
        env.append_transform(CatTensors(["budget", "mask", "resources"], "observation"))
    return env


def actor_for(env):
    spec = env.action_spec_unbatched
    n_in = env.observation_spec["observation"].shape[-1]
    logits = TensorDictModule(MLP(in_features=n_in, out_features=spec.shape, num_cells=[32]),
                              in_keys=["observation"], out_keys=["logits"])
    dist = torch.distributions.Bernoulli if spec.__class__.__name__ == "Binary" else \
        torchrl.modules.OneHotCategorical
    return ProbabilisticActor(logits, in_keys=["logits"], spec=env.action_spec, distribution_class=dist,
                              return_log_prob=True)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_specs_collector_ppo_and_state_dict(env_id, tmp_path):
    torch.manual_seed(0)
    check_env_specs(make(env_id), seed=0)
    venv = SerialEnv(2, lambda: make(env_id))
    check_env_specs(venv, seed=0)
    actor = actor_for(venv)
    critic = ValueOperator(MLP(in_features=venv.observation_spec["observation"].shape[-1], out_features=1,
                               num_cells=[32]), in_keys=["observation"])
    loss = ClipPPOLoss(actor, critic)
    gae = GAE(gamma=0.99, lmbda=0.95, value_network=critic)
    optim = torch.optim.Adam(loss.parameters(), lr=3e-4)
    collector = Collector(venv, actor, frames_per_batch=128, total_frames=384)
    for batch in collector:
        gae(batch)
        losses = loss(batch.reshape(-1))
        total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
        optim.zero_grad()
        total.backward()
        optim.step()
        assert torch.isfinite(total)
    collector.shutdown()
    torch.save(actor.state_dict(), tmp_path / "actor.pt")
    again = actor_for(venv)
    again.load_state_dict(torch.load(tmp_path / "actor.pt"))
    td = venv.reset(seed=3)
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        a, b = actor(td.clone()), again(td.clone())
    assert torch.equal(a["action"], b["action"])
    assert venv.action_spec.is_in(a["action"].to(venv.action_spec.dtype))  # (Bernoulli samples are float)
    venv.step(a)  # the actor's action steps every slot


def test_ppo_bench_times_torchrl_with_the_same_actor():
    """The TorchRL side of ``membudget.bench.ppo --torchrl`` runs one update (64 weeks × 80 steps)."""
    from membudget.bench.ppo import HORIZON, N_ENVS, torchrl_rate

    rate = torchrl_rate(N_ENVS * HORIZON, seed=0)
    assert 0 < rate < float("inf")
