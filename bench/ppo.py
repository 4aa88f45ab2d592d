"""Training throughput of PPO on ``PMWeek-v0`` with the per-resource actor: the package's native PPO
(:func:`membudget.agents.ppo.train_ppo`) in its two engines — ``compiled`` (the study's; hand-written gradients,
the update compiled ahead of time by AOTInductor, critic products in bfloat16 where the CPU has them natively,
else float32: what ``engine="auto"`` trains long runs with) and ``autograd`` (eager float32) — against
Stable-Baselines3 PPO with the same actor (:class:`~membudget.agents.per_resource.PerResourceActorCriticPolicy`),
in one process, one torch thread each.

All run the same algorithm settings — 64 weeks × 80 steps per update (SB3: ``n_envs=64, n_steps=80``), 4 epochs,
16 minibatches of 320, Adam 1e-3, the same actor and critic widths — so the ratios measure the implementations,
not the hyperparameters. One untimed run of each comes first (the compiled engine compiles on its first update);
then rounds alternate so that machine noise hits all alike, each round in an order rotated by one so that no loop
always runs in the same place. Training wall clock only: the native loop's learning-curve evaluations are excluded,
SB3 runs without callbacks.

The fp32 GEMM floor bounds what any float32 implementation of these settings can reach on the machine: the time
of the matrix products alone (forward, and backward's weight and input gradients) that one update of the native
loop must do — the critic on every state, the actor on the candidates (their count measured on a rollout of
development weeks) — timed as bare ``torch.mm`` calls at the same shapes, with no autograd, elementwise work,
optimizer or environment. ``fp32 floor / SB3`` is the highest ratio a float32 loop with no overhead at all could
show against this SB3 run.

``--torchrl`` also times TorchRL's PPO with the same actor, critic and settings (:func:`torchrl_rate`; TorchRL is in
the interop extra). ``--bf16`` also times the products in bfloat16 and one autograd minibatch in fp32 and under
bfloat16 autocast (:func:`minibatch_ms`). ``--quality B10`` instead trains PPO with the full study's settings
(:func:`quality`; ``--engine``, ``--seeds``) and prints each seed's held-out Set F1; with ``--out FILE`` it keeps one
line per seed there, and ``--compare FILE`` compares the engines over those seeds (:func:`compare`: failed seeds,
Fisher's exact test of the failure rates, bootstrap intervals of the difference of the means). ``--numerics B10``
measures how far the compiled engine's bfloat16 critic moves the values, advantages and gradients PPO learns from,
against the spread of PPO's own minibatch gradients (:func:`numerics`). ``--breakdown 40`` times the parts of 40
updates of the compiled engine (rollout, values, GAE, the minibatch calls) beside the time of each part's matrix
products alone (:func:`breakdown`; ``--critic-dtype``): where an update's time goes on this CPU.

``python -m membudget.bench.ppo [--steps N] [--rounds K] [--torchrl] [--bf16]``;
``python -m membudget.bench.ppo --quality B10 [--engine compiled|autograd] [--seeds 0-2] [--out FILE]``;
``python -m membudget.bench.ppo --compare FILE [--fail-margin 0.05]``;
``python -m membudget.bench.ppo --numerics B10 [--seeds 0] [--checkpoints 0,10,25,50,100,200]``;
``python -m membudget.bench.ppo --breakdown 40 [--critic-dtype auto|float32|bfloat16]``
"""

from __future__ import annotations

import argparse
import itertools
import time

from membudget.envs.validation import int_flag, parse_seeds
from membudget.studies.cli import check_extras, optional_extras, plain


N_ENVS, HORIZON, EPOCHS, MINIBATCHES, LR = 64, 80, 4, 16, 1e-3
ACTOR, CRITIC = (64, 64), (128, 128)


def native_rate(steps: int, seed: int = 0, engine: str = "autograd", critic_dtype: str = "auto",
                compiled_backend: str = "auto") -> float:
    from membudget.agents.ppo import train_ppo

    _, history = train_ppo("B10", total_timesteps=steps, seed=seed, n_envs=N_ENVS, n_epochs=EPOCHS,
                           n_minibatches=MINIBATCHES, learning_rate=LR, hidden=ACTOR, critic_arch=CRITIC, eval_every=0,
                           eval_seeds=[4000], engine=engine, critic_dtype=critic_dtype, reward_scale=1.0, ent_coef=0.0,
                           keep_best=False, compiled_backend=compiled_backend)
    return history[-1]["env_steps"] / history[-1]["wall_clock"]


def cpu_line() -> str:
    """The CPU a figure was measured on: torch's capability, whether bf16 products are native, what auto picks."""
    import torch

    from membudget.agents.ppo import AUTO_COMPILED_STEPS
    from membudget.agents.ppo_compiled import compiled_backend_name, critic_dtype_name, native_bf16

    dtype = critic_dtype_name("auto")
    return (f"CPU: torch capability {torch.backends.cpu.get_cpu_capability()}, native bf16 products "
            f"{'yes' if native_bf16() else 'no'}; engine='auto' trains runs of >= {AUTO_COMPILED_STEPS:,} steps with "
            f"the compiled engine, critic products in {dtype}, backend {compiled_backend_name('auto')}")


def backend_pairs(steps: int, pairs: int) -> list:
    """The float32 compiled engine's two backends against each other: ``pairs`` pairs of training runs of ``steps``
    env steps in this process, ``aoti`` and ``inductor`` alternating which goes first, after one untimed run of each
    (the first builds or loads the AOTInductor package); each pair's ratio of env steps per second, aoti over
    inductor. A pair's two runs share the machine's state of the moment, so their ratio is steadier than a ratio of
    rates measured minutes apart (the bench's rounds)."""
    for backend in ("inductor", "aoti"):
        native_rate(N_ENVS * HORIZON, 0, "compiled", "float32", backend)
    ratios = []
    for k in range(pairs):
        order = ("inductor", "aoti") if k % 2 == 0 else ("aoti", "inductor")
        rate = {backend: native_rate(steps, k, "compiled", "float32", backend) for backend in order}
        ratios.append(rate["aoti"] / rate["inductor"])
        print(f"pair {k}: inductor {rate['inductor']:,.0f}, aoti {rate['aoti']:,.0f} env steps/s, "
              f"aoti / inductor {ratios[-1]:.3f}", flush=True)
    ordered = sorted(ratios)
    print(f"{cpu_line()}\naoti / inductor, float32 critic products: median {ordered[len(ordered) // 2]:.3f} "
          f"(min {ordered[0]:.3f}, max {ordered[-1]:.3f}; aoti faster in {sum(r > 1 for r in ratios)} of {pairs})")
    return ratios


def check_auto(steps: int, rounds: int) -> float:
    """CI's check: the engine ``engine="auto"`` picks for a long run on this machine (the compiled engine with this
    CPU's critic dtype) against the autograd engine, env steps per second after one untimed run of each; the
    median ratio over ``rounds`` (raises ``SystemExit`` when below 1)."""
    native_rate(N_ENVS * HORIZON, rounds, "compiled"), native_rate(N_ENVS * HORIZON, rounds)
    ratios = sorted(native_rate(steps, k, "compiled") / native_rate(steps, k) for k in range(rounds))
    median = ratios[len(ratios) // 2]
    print(f"{cpu_line()}\nauto's long-run engine / autograd, env steps per second, rounds "
          f"{', '.join(f'{r:.2f}' for r in ratios)}: median {median:.2f} (must be >= 1)")
    if median < 1:
        raise SystemExit(f"engine='auto' picks an engine slower than autograd on this CPU ({median:.2f}x)")
    return median


def cold_start(steps: int) -> dict:
    """Seconds to train ``steps`` env steps in a fresh process with an empty inductor cache, per engine setting
    (``autograd``, ``compiled``, ``auto``): what a user's first run costs."""
    import os
    import subprocess
    import sys
    import tempfile

    out = {}
    for engine in ("autograd", "compiled", "auto"):
        with tempfile.TemporaryDirectory() as cache:
            code = (f"import time; t = time.perf_counter(); from membudget.agents.ppo import train_ppo; "
                    f"p, _ = train_ppo('B10', total_timesteps={steps}, eval_every=0, eval_seeds=[4000], "
                    f"engine={engine!r}, keep_best=False); print(time.perf_counter() - t, p.config['engine'])")
            run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                 env=dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache))
            seconds, chosen = run.stdout.split()[-2:]
            out[engine] = (float(seconds), chosen)
            print(f"{engine:>9}: {float(seconds):6.1f} s to {steps:,} env steps from an empty inductor cache "
                  f"(trained with {chosen})", flush=True)
    print(cpu_line())
    return out


def sb3_rate(steps: int, seed: int = 0) -> float:
    from stable_baselines3 import PPO

    from membudget.agents.configs import silent_logger
    from membudget.agents.per_resource import PerResourceActorCriticPolicy
    from membudget.agents.rl import DevWeeksVecEnv

    venv = DevWeeksVecEnv(N_ENVS, seed=seed, budget="B10", action_mode="binary")
    model = PPO(PerResourceActorCriticPolicy, venv, n_steps=HORIZON, batch_size=N_ENVS * HORIZON // MINIBATCHES,
                n_epochs=EPOCHS, learning_rate=LR, gamma=1.0, gae_lambda=0.95, seed=seed, device="cpu", verbose=0,
                policy_kwargs={"hidden": ACTOR, "critic_arch": CRITIC})
    model.set_logger(silent_logger())
    start = time.perf_counter()
    model.learn(steps)
    return model.num_timesteps / (time.perf_counter() - start)


def torchrl_rate(steps: int, seed: int = 0) -> float:
    """TorchRL's PPO — its ``Collector``, ``GAE``, ``ClipPPOLoss`` and a replay buffer sampled without replacement,
    the loop of its PPO tutorial with the advantages computed once per update as SB3 does — with the SB3 side's
    actor (:class:`PerResourceNet`, a Bernoulli per resource) and critic, on the native vector env through
    TorchRL's ``GymWrapper`` (binary mode; same-step autoreset, the mode TorchRL accepts)."""
    try:
        from tensordict.nn import TensorDictModule
        from torchrl.collectors import Collector
        from torchrl.data import LazyTensorStorage, ReplayBuffer
        from torchrl.data.replay_buffers.samplers import SamplerWithoutReplacement
        from torchrl.envs import GymWrapper
        from torchrl.modules import ProbabilisticActor, ValueOperator
        from torchrl.objectives import ClipPPOLoss
        from torchrl.objectives.value import GAE
    except ImportError:
        raise SystemExit('--torchrl needs TorchRL: pip install "membudget[interop]"') from None
    import numpy as np
    import torch
    from gymnasium.vector import AutoresetMode
    from torch import nn

    from membudget.agents.per_resource import PerResourceNet
    from membudget.agents.ppo import _mlp
    from membudget.envs.pm import PMWeekVectorEnv

    class Logits(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = PerResourceNet(ACTOR)
            nn.init.orthogonal_(self.net.head.weight, gain=0.01)  # as PerResourceActorCriticPolicy
            nn.init.zeros_(self.net.head.bias)

        def forward(self, resources, budget, mask):
            return self.net(resources, budget, mask).squeeze(-1)

    class Critic(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.mlp = _mlp(width, CRITIC)

        def forward(self, budget, mask, resources):  # SB3's CombinedExtractor order: the keys sorted
            return self.mlp(torch.cat([budget, mask.to(budget.dtype), resources.flatten(-2)], dim=-1))

    def bernoullis(logits):
        return torch.distributions.Independent(torch.distributions.Bernoulli(logits=logits), 1)

    torch.manual_seed(seed)
    vec = PMWeekVectorEnv(num_envs=N_ENVS, budget="B10", action_mode="binary", autoreset_mode=AutoresetMode.SAME_STEP)
    env = GymWrapper(vec)
    env.set_seed(seed)
    width = sum(int(np.prod(s.shape)) for s in vec.single_observation_space.spaces.values())
    actor = ProbabilisticActor(TensorDictModule(Logits(), in_keys=["resources", "budget", "mask"], out_keys=["logits"]),
                               in_keys=["logits"], spec=env.action_spec, distribution_class=bernoullis,
                               return_log_prob=True)
    critic = ValueOperator(Critic(width), in_keys=["budget", "mask", "resources"])
    loss = ClipPPOLoss(actor, critic, clip_epsilon=0.2, entropy_coeff=0.0, critic_coeff=0.5, normalize_advantage=True)
    gae = GAE(gamma=1.0, lmbda=0.95, value_network=critic)
    optim = torch.optim.Adam(loss.parameters(), lr=LR, eps=1e-5)
    batch = N_ENVS * HORIZON
    buffer = ReplayBuffer(storage=LazyTensorStorage(batch), sampler=SamplerWithoutReplacement(),
                          batch_size=batch // MINIBATCHES)
    collector = Collector(env, actor, frames_per_batch=batch, total_frames=steps,
                          auto_register_policy_transforms=False)
    start, frames = time.perf_counter(), 0
    for data in collector:
        with torch.no_grad():
            gae(data)
        buffer.extend(data.reshape(-1))
        for _ in range(EPOCHS * MINIBATCHES):
            out = loss(buffer.sample())
            total = out["loss_objective"] + out["loss_critic"] + out["loss_entropy"]
            optim.zero_grad()
            total.backward()
            nn.utils.clip_grad_norm_(loss.parameters(), 0.5)
            optim.step()
        frames += data.numel()
    collector.shutdown()
    return frames / (time.perf_counter() - start)


def _layers(n_in, widths):
    dims = (n_in, *widths, 1)
    return list(itertools.pairwise(dims))


def gemm_shapes(actor_rows_per_step: float, obs_width: int, n_actor_inputs: int):
    """The ``(m, k, n)`` matrix products of one update (``N_ENVS × HORIZON`` states): the rollout's forward passes,
    then per minibatch the forward pass, the weight gradients and the input gradients (none for the first layer)
    of the critic (``CRITIC`` over ``obs_width`` inputs, one row per state) and the per-resource actor (``ACTOR``
    with its context layer, ``actor_rows_per_step`` rows per state)."""
    critic, actor = _network_layers(obs_width, n_actor_inputs)
    mb = N_ENVS * HORIZON // MINIBATCHES
    rollout = _passes(N_ENVS, critic, False) + _passes(round(N_ENVS * actor_rows_per_step), actor, False)
    minibatch = _passes(mb, critic, True) + _passes(round(mb * actor_rows_per_step), actor, True)
    return rollout * HORIZON + minibatch * (EPOCHS * MINIBATCHES)


def _passes(rows, layers, backward):
    """The ``(m, k, n)`` products of ``rows`` rows through ``layers``: the forward pass, and with ``backward`` the
    weight gradients and the input gradients (none for the first layer)."""
    out = [(rows, k, n) for k, n in layers]
    if backward:
        out += [(k, rows, n) for k, n in layers]
        out += [(rows, n, k) for k, n in layers[1:]]
    return out


def candidates_per_state(seed: int = 0) -> float:
    """Mean number of candidates per state over one week of ``N_ENVS`` development weeks with no proposals (the
    candidate set does not depend on the proposals: 2.8 on PMWeek-v0 whatever is proposed)."""
    import numpy as np

    from membudget.agents.rl import TRAIN_SEEDS, week_order
    from membudget.envs.pm import PMWeekVectorEnv

    venv = PMWeekVectorEnv(num_envs=N_ENVS, budget="B10", action_mode="scores")
    obs, _ = venv.reset(seed=[int(w) for w in week_order(seed, TRAIN_SEEDS)[:N_ENVS]])
    total, steps, done = 0, 0, np.zeros(N_ENVS, dtype=bool)
    while not done.all():
        total, steps = total + int(obs["mask"].sum()), steps + 1
        obs, _, terminated, truncated, _ = venv.step(np.full(obs["mask"].shape, -1.0, dtype=np.float32))
        done = terminated | truncated
    return total / (steps * N_ENVS)


def products_seconds(shapes, repeats: int = 3, dtype=None) -> float:
    """Seconds the matrix products ``shapes`` (``(m, k, n)`` each) take as bare ``torch.mm`` calls one after the
    other, in ``dtype`` (default float32): the best of ``repeats``."""
    import torch

    dtype = dtype or torch.float32
    operands = [(torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype), torch.empty(m, n, dtype=dtype))
                for m, k, n in shapes]
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for a, b, out in operands:
            torch.mm(a, b, out=out)
        best = min(best, time.perf_counter() - start)
    return best


def gemm_floor_rate(shapes, repeats: int = 3, dtype=None) -> float:
    """Env steps per second if one update cost only the matrix products ``shapes`` (best of ``repeats``), in
    ``dtype`` (default float32)."""
    return N_ENVS * HORIZON / products_seconds(shapes, repeats, dtype)


def _replay_start(cfg, budget: str, seed: int):
    """What ``train_ppo(budget, cfg, seed=seed)`` sets up before its first update, for a bench that replays its
    updates: torch on one thread and seeded, the loop's random stream, the vector env, the order of the training
    weeks, and the new actor and critic in train_ppo's order of draws: ``(rng, venv, weeks, actor, critic)``."""
    import numpy as np
    import torch

    from membudget.agents.ppo import _networks
    from membudget.agents.rl import week_order
    from membudget.agents.tasks import PMWEEK

    if cfg.anneal_lr or cfg.critic_warmup or cfg.critic_counts:
        raise ValueError("the bench replays train_ppo without a learning-rate schedule, critic warm-up or counts")
    torch.set_num_threads(1)  # train_ppo's default (torch_threads=1): products on more threads round otherwise
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    venv = PMWEEK.vector_env(cfg.n_envs, budget, **PMWEEK.env_kwargs(
        per_step_cap=cfg.per_step_cap, cost_profile=cfg.cost_profile, late_policy=cfg.late_policy))
    actor, critic = _networks(cfg, venv, None, PMWEEK.name)
    return rng, venv, week_order(seed, PMWEEK.train_seeds), actor, critic


def _network_layers(obs_width: int, n_actor_inputs: int):
    """The ``(in, out)`` layers of the bench's critic (``CRITIC`` over ``obs_width`` inputs) and of its per-resource
    actor (``ACTOR`` with its context layer): ``(critic, actor)``."""
    return _layers(obs_width, CRITIC), [(n_actor_inputs, ACTOR[0]), *_layers(2 * ACTOR[0], ACTOR[1:])]


BREAKDOWN_WARMUP = 3
"""Untimed updates before :func:`breakdown` times (the first compiles the minibatch graph)."""

BREAKDOWN_PARTS = ("rollout", "values", "gae", "learn")
"""The parts of one update of the compiled engine, in order (:func:`breakdown`)."""


def breakdown(updates: int = 20, warmup: int = BREAKDOWN_WARMUP, critic_dtype: str = "auto", seed: int = 0,
              repeats: int = 30):
    """Where one update of the compiled engine spends its time on this CPU, at the bench's settings.

    The loop is :func:`native_rate`'s training run: the same networks, weeks and random streams as ``train_ppo``
    with the compiled engine, so the actor it returns is that run's after ``warmup + updates`` updates. Each
    update's parts are timed (wall clock): the rollout (the environment's steps, the numpy actor and the loop's
    arrays), the critic's values on every state, GAE, and the epochs of compiled minibatch calls. Beside each part:
    the seconds of its matrix products alone, as bare ``torch.mm`` calls at the same shapes (best of ``repeats``;
    the candidate rows counted on the last update's rollout).

    Returns ``({part: (ms per update, products ms per update)}, actor)``; GAE has no products (0)."""
    import dataclasses

    from threadpoolctl import threadpool_limits

    from membudget.agents.configs import PPOConfig
    from membudget.agents.ppo import CompiledEngine, gae
    from membudget.agents.rl import update_weeks

    if updates < 1 or warmup < 0:
        raise ValueError(f"breakdown needs updates >= 1 and warmup >= 0, got {updates} and {warmup}")
    cfg = dataclasses.replace(PPOConfig(), n_envs=N_ENVS, n_epochs=EPOCHS, n_minibatches=MINIBATCHES,
                              learning_rate=LR, hidden=ACTOR, critic_arch=CRITIC, engine="compiled",
                              critic_dtype=critic_dtype, reward_scale=1.0, ent_coef=0.0, keep_best=False)
    rng, venv, weeks, actor, critic = _replay_start(cfg, "B10", seed)
    engine = CompiledEngine(actor, critic, cfg, rng).ppo
    spent = dict.fromkeys(BREAKDOWN_PARTS, 0.0)
    with threadpool_limits(limits=1, user_api="blas"):
        for update in range(warmup + updates):
            obs, _ = venv.reset(seed=update_weeks(weeks, update, cfg.n_envs))
            clock = [time.perf_counter()]
            batch, T = engine.rollout(venv, obs, cfg.reward_scale, False)
            clock.append(time.perf_counter())
            values = engine.values(batch)
            clock.append(time.perf_counter())
            adv = gae(batch["rewards"], values, cfg.gamma, cfg.gae_lambda)
            clock.append(time.perf_counter())
            engine.learn(batch, adv.reshape(-1), (adv + values).reshape(-1), learning_rate=cfg.learning_rate)
            clock.append(time.perf_counter())
            if update >= warmup:
                for part, a, b in zip(BREAKDOWN_PARTS, clock, clock[1:]):
                    spent[part] += b - a
    venv.close()
    states = T * cfg.n_envs
    rows_per_state = batch["rows"].shape[0] / states
    critic_layers, actor_layers = _network_layers(batch["obs"].shape[1], batch["rows"].shape[1])
    minibatch = (_passes(states // MINIBATCHES, critic_layers, True)
                 + _passes(round(states * rows_per_state / MINIBATCHES), actor_layers, True))
    products = {"rollout": T * products_seconds(_passes(round(cfg.n_envs * rows_per_state), actor_layers, False),
                                                repeats),
                "values": products_seconds(_passes(states, critic_layers, False), repeats),
                "gae": 0.0,
                "learn": EPOCHS * MINIBATCHES * products_seconds(minibatch, repeats)}
    return {part: (1000 * spent[part] / updates, 1000 * products[part]) for part in BREAKDOWN_PARTS}, actor


def minibatch_ms(rows_per_state: float, obs_width: int, bf16: bool, repeats: int = 200) -> float:
    """Milliseconds of one native minibatch update — the per-resource actor on the candidate rows, the critic,
    :func:`~membudget.agents.ppo.ppo_losses`, backward, gradient clipping and Adam, at the bench's widths and
    minibatch size on random inputs — with the forward passes in fp32 or under bfloat16 autocast (mean of
    ``repeats`` after 20 untimed)."""
    import torch

    from membudget.agents.per_resource import N_INPUT, PerResourceNet
    from membudget.agents.ppo import _mlp, ppo_losses

    gen = torch.Generator().manual_seed(0)
    actor, critic = PerResourceNet(ACTOR), _mlp(obs_width, CRITIC)
    params = [*actor.parameters(), *critic.parameters()]
    opt = torch.optim.Adam(params, lr=LR, eps=1e-5)
    n = N_ENVS * HORIZON // MINIBATCHES
    k = round(n * rows_per_state)
    x, critic_in = torch.randn(k, N_INPUT, generator=gen), torch.randn(n, obs_width, generator=gen)
    sample = torch.sort(torch.randint(0, n, (k,), generator=gen)).values
    proposed = (torch.rand(k, generator=gen) < 0.3).float()
    old_logp, adv, ret = (torch.randn(n, generator=gen) for _ in range(3))

    def update():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = actor.forward_rows(x, sample, n)[:, 0].float()
            values = critic(critic_in)[:, 0].float()
        pg, v_loss, _ = ppo_losses(logits, proposed, sample, old_logp, adv, values, ret, 0.2)
        opt.zero_grad()
        (pg + 0.5 * v_loss).backward()
        torch.nn.utils.clip_grad_norm_(params, 0.5)
        opt.step()

    for _ in range(20):
        update()
    start = time.perf_counter()
    for _ in range(repeats):
        update()
    return 1000 * (time.perf_counter() - start) / repeats


QUALITY_ENGINES = {"compiled": {"engine": "compiled", "critic_dtype": "bfloat16", "compiled_backend": "inductor"},
                   "compiled-float32": {"engine": "compiled", "critic_dtype": "float32",
                                        "compiled_backend": "inductor"},
                   "compiled-float32-aoti": {"engine": "compiled", "critic_dtype": "float32",
                                             "compiled_backend": "aoti"},
                   "compiled-bfloat16-aoti": {"engine": "compiled", "critic_dtype": "bfloat16",
                                              "compiled_backend": "aoti"},
                   "autograd": {"engine": "autograd"}}
"""The engine populations of ``--quality`` (their labels in the results file) and their PPOConfig settings."""


def quality(budget: str, seeds, engine: str, out=None) -> list:
    """Held-out Set F1 (weeks 8000-8029, 9000-9029) of PPO trained with the full study's settings
    (``BENCH_FULL["ppo"]``: 4M steps, early stopping on validation weeks 4000-4029) per learner seed.

    With ``out`` (a JSON-lines file), each seed's result is appended to it as one line (budget, engine, seed,
    held-out Set F1, training wall clock, the selected checkpoint, the validation curve and the machine: a seed
    trains alike only on the same kind of CPU) and a seed already there is read, not trained again: a population of
    seeds can be run in pieces, by concurrent processes, and compared by :func:`compare`."""
    import json

    import numpy as np

    from membudget.agents.ppo import train_ppo
    from membudget.agents.tasks import PMWEEK
    from membudget.studies.protocol import machine
    from membudget.studies.rl_vs_distillation import BENCH_FULL

    held_out = list(BENCH_FULL["eval_seeds"])
    scores = []
    for seed in seeds:
        done = {(r["budget"], r["engine"], r["seed"]): r for r in read_results(out)} if out else {}
        if (budget, engine, seed) in done:
            scores.append(done[budget, engine, seed]["held_out_set_f1"])
            continue
        policy, history = train_ppo(budget, BENCH_FULL["ppo"], seed=seed, eval_seeds=list(BENCH_FULL["val_seeds"]),
                                    **QUALITY_ENGINES[engine])
        scores.append(PMWEEK.validate(policy, budget, held_out, **PMWEEK.env_kwargs(
            per_step_cap=2, cost_profile="unit", late_policy="expire")))
        print(f"{budget} {engine} seed {seed}: held-out Set F1 {scores[-1]:.4f}, training "
              f"{history[-1]['wall_clock']:.0f} s", flush=True)
        if out:
            line = json.dumps({
                "budget": budget, "engine": engine, "seed": seed, "held_out_set_f1": scores[-1],
                "wall_clock": history[-1]["wall_clock"], "selected_env_steps": policy.config["selected_env_steps"],
                "curve": [[r["env_steps"], r["val_set_f1"]] for r in history], "machine": machine()})
            with open(out, "a") as f:  # one write of one line: concurrent processes may share the file
                f.write(line + "\n")
    print(f"{budget} {engine}: mean {np.mean(scores):.4f} ± {np.std(scores, ddof=1) if len(scores) > 1 else 0:.4f}")
    return scores


def numerics(budget: str = "B10", seed: int = 0, checkpoints=(0, 50, 200), updates=None) -> tuple:
    """How far the compiled engine's bfloat16 critic moves what PPO learns from, against the noise PPO has anyway.

    Trains PPO with the compiled engine and the study's settings (``BENCH_FULL["ppo"]``; the same networks, weeks
    and random streams as ``train_ppo(budget, seed=seed, engine="compiled", critic_dtype="bfloat16", ...)``, so the
    same trajectory) for ``updates`` updates (default: the last checkpoint). Before each update in ``checkpoints`` it plays one more
    rollout of that update's weeks with the current networks (its own random stream, so training is unchanged)
    and compares, on it, the critic's products in bfloat16 on the bf16-rounded observation (what the engine trains
    with) against float32:

    - ``values``, ``advantages``: RMS difference over RMS of the float32 ones (the advantages normalised as the
      loss does, over the whole rollout);
    - ``actor_grad``, ``critic_grad``: per minibatch of one epoch, ``|g_bf16 - g_fp32| / |g_fp32|`` (median over
      the minibatches), each from its own values, advantages and returns;
    - ``actor_noise``, ``critic_noise``: the spread PPO's minibatch sampling puts on the same float32 gradients,
      ``|g_minibatch - g_epoch| / |g_minibatch|`` (median), ``g_epoch`` the mean over the epoch's minibatches.

    Returns one row per checkpoint (``update``, ``env_steps`` and the ratios above) and the trained actor."""
    import dataclasses

    import numpy as np
    import torch
    from threadpoolctl import threadpool_limits

    from membudget.agents.ppo import compiled_update, gae
    from membudget.agents.ppo_compiled import (CompiledPPO, Minibatch, compiled_backend_name, minibatch_grads,
                                               sigmoid_tanh)
    from membudget.agents.rl import update_weeks
    from membudget.studies.rl_vs_distillation import BENCH_FULL

    cfg = dataclasses.asdict(BENCH_FULL["ppo"])
    n_envs, updates = cfg["n_envs"], max(checkpoints) + 1 if updates is None else updates
    rng, venv, weeks, actor, critic = _replay_start(BENCH_FULL["ppo"], budget, seed)
    engine = CompiledPPO(actor, critic, BENCH_FULL["ppo"], rng,
                         backend=compiled_backend_name(BENCH_FULL["ppo"].compiled_backend))
    # the float32 twin: the same parameter tensors, float32 products; it only plays and measures
    twin = CompiledPPO(actor, critic, dataclasses.replace(BENCH_FULL["ppo"], n_epochs=1),
                       np.random.default_rng([seed, 1]), critic_dtype=torch.float32, compile=False)
    loss = {k: cfg[k] for k in ("clip_coef", "ent_coef", "vf_coef")}
    rows, steps = [], 0

    def rel(a, b):
        return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))

    def measure(batch):
        v32 = twin.values(batch)
        v16 = engine.values({**batch, "obs": batch["obs"].to(torch.bfloat16)})
        adv = [gae(batch["rewards"], v, cfg["gamma"], cfg["gae_lambda"]) for v in (v32, v16)]
        norm = [(a - a.mean()) / a.std() for a in adv]
        both_adv = torch.stack([a.reshape(-1) for a in adv], 1)  # carried through one epoch's minibatches together
        both_ret = torch.stack([(a + v).reshape(-1) for a, v in zip(adv, (v32, v16))], 1)
        grads = []  # per minibatch: [(actor, critic) in fp32, (actor, critic) in bf16], each flattened
        for x, obs, *rest, a, r in twin.minibatches(batch, both_adv, both_ret):
            grads.append([[torch.cat([g.reshape(-1) for g in part]) for part in minibatch_grads(
                twin.state[0][0], twin.state[1][0],
                Minibatch(x, obs.to(dtype), *rest, a[:, j].contiguous(), r[:, j].contiguous()), critic_dtype=dtype,
                tanh=sigmoid_tanh, **loss)]
                for j, dtype in enumerate((torch.float32, torch.bfloat16))])
        row = {"values": rel(v16, v32), "advantages": rel(norm[1], norm[0])}
        for k, part in enumerate(("actor", "critic")):
            mean = torch.stack([g[0][k] for g in grads]).mean(0)
            row[f"{part}_grad"] = float(np.median([rel(g[1][k], g[0][k]) for g in grads]))
            row[f"{part}_noise"] = float(np.median([rel(mean, g[0][k]) for g in grads]))
        return row

    # numpy's BLAS on one thread, as in train_ppo: the rollout's products then round alike
    with threadpool_limits(limits=1, user_api="blas"), torch.no_grad():
        for update in range(updates):
            week_ids = update_weeks(weeks, update, n_envs)
            if update in checkpoints:
                obs, _ = venv.reset(seed=week_ids)
                rows.append({"update": update, "env_steps": steps,
                             **measure(twin.rollout(venv, obs, cfg["reward_scale"], False)[0])})
                print(f"seed {seed}  " + "  ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                                   for k, v in rows[-1].items()), flush=True)
            obs, _ = venv.reset(seed=week_ids)
            steps += n_envs * compiled_update(engine, venv, obs, critic_counts=False, **{
                k: cfg[k] for k in ("reward_scale", "gamma", "gae_lambda", "learning_rate")})
    venv.close()
    return rows, actor


def read_results(path) -> list:
    """The seeds' results in a JSON-lines file written by :func:`quality` (none if it does not exist yet)."""
    import json
    import pathlib

    path = pathlib.Path(path)
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def fisher_exact(a: int, n_a: int, b: int, n_b: int) -> float:
    """Two-sided p-value of Fisher's exact test that ``a`` of ``n_a`` and ``b`` of ``n_b`` come from one rate: the
    probability, given the total count, of a split no more likely than the one observed."""
    from math import comb

    k, total = a + b, comb(n_a + n_b, a + b)
    p = [comb(n_a, i) * comb(n_b, k - i) / total for i in range(max(0, k - n_b), min(k, n_a) + 1)]
    observed = comb(n_a, a) * comb(n_b, b) / total
    return min(1.0, sum(q for q in p if q <= observed * (1 + 1e-9)))


def compare(out, fail_margin: float = 0.05, n_resamples: int = 10000, seed: int = 0) -> dict:
    """The engines' held-out Set F1 over the seeds in the file ``out`` (written by :func:`quality`), per budget: seeds,
    mean, s.d., median, the failed seeds — more than ``fail_margin`` below the median of both engines' seeds
    pooled — with Fisher's exact test of the failure rates, and compiled − autograd differences of the means
    (all seeds, and the seeds that did not fail) with percentile bootstrap intervals (each engine's seeds
    resampled on their own)."""
    import numpy as np

    runs = {}
    for r in read_results(out):
        runs.setdefault(r["budget"], {}).setdefault(r["engine"], {})[r["seed"]] = r["held_out_set_f1"]
    rng = np.random.default_rng(seed)

    def diff_ci(x, y):
        dx = x[rng.integers(0, x.size, (n_resamples, x.size))].mean(1)
        dy = y[rng.integers(0, y.size, (n_resamples, y.size))].mean(1)
        d = dx - dy
        return float(x.mean() - y.mean()), float(np.quantile(d, 0.025)), float(np.quantile(d, 0.975))

    result = {}
    for budget, engines in sorted(runs.items()):
        scores = {e: np.array([v for _, v in sorted(s.items())]) for e, s in engines.items()}
        floor = float(np.median(np.concatenate(list(scores.values())))) - fail_margin
        row = {"fail_below": floor}
        for e, x in sorted(scores.items()):
            failed = sorted(s for s, v in engines[e].items() if v < floor)
            row[e] = {"seeds": int(x.size), "mean": float(x.mean()), "sd": float(x.std(ddof=1)) if x.size > 1 else 0.0,
                      "median": float(np.median(x)), "failed_seeds": failed}
            print(f"{budget} {e:>8}: {x.size} seeds, mean {x.mean():.4f}, s.d. {row[e]['sd']:.4f}, median "
                  f"{np.median(x):.4f}, {len(failed)} failed (below {floor:.4f}): {failed}")
        for e in sorted(set(scores) - {"autograd"}) if "autograd" in scores else ():
            c, a = row[e], row["autograd"]
            p = fisher_exact(len(c["failed_seeds"]), c["seeds"], len(a["failed_seeds"]), a["seeds"])
            kept = {k: scores[k][scores[k] >= floor] for k in (e, "autograd")}
            vs = {"fisher_p": p, "mean_diff": diff_ci(scores[e], scores["autograd"]),
                  "mean_diff_not_failed": diff_ci(kept[e], kept["autograd"])}
            row.update(vs) if e == "compiled" else row.setdefault("versus_autograd", {}).update({e: vs})
            print(f"{budget}: failure rates {e} {len(c['failed_seeds'])}/{c['seeds']} vs autograd "
                  f"{len(a['failed_seeds'])}/{a['seeds']}, Fisher's exact p = {p:.3f}; {e} − autograd mean "
                  "{:+.4f} [{:+.4f}, {:+.4f}], seeds that did not fail {:+.4f} [{:+.4f}, {:+.4f}]".format(
                      *vs["mean_diff"], *vs["mean_diff_not_failed"]))
        result[budget] = row
    return result


def print_breakdown(updates: int, critic_dtype: str = "auto") -> dict:
    """:func:`breakdown`, printed as a table with the CPU's line; returns its dictionary."""
    from membudget.agents.ppo_compiled import compiled_backend_name, critic_dtype_name

    parts, _ = breakdown(updates, critic_dtype=critic_dtype)
    dtype = critic_dtype_name(critic_dtype)
    names = {"rollout": "rollout (the environment, the numpy actor, the loop's arrays)",
             "values": "values (the critic on every state)", "gae": "GAE",
             "learn": f"learn ({EPOCHS} epochs x {MINIBATCHES} compiled minibatch calls)"}
    print(f"{cpu_line()}\ncompiled engine ({compiled_backend_name('auto')}), critic products in {dtype}; "
          f"one update = {N_ENVS} weeks x {HORIZON} steps = {N_ENVS * HORIZON:,} env steps, mean of {updates} "
          f"updates after {BREAKDOWN_WARMUP} untimed")
    print(f"{'part':<66} {'ms':>8} {'products ms':>12} {'rest ms':>8}")
    for part, (ms, products) in parts.items():
        print(f"{names[part]:<66} {ms:>8.1f} {products:>12.1f} {ms - products:>8.1f}")
    total, floor = (sum(v[i] for v in parts.values()) for i in (0, 1))
    print(f"{'total':<66} {total:>8.1f} {floor:>12.1f} {total - floor:>8.1f}\n"
          f"{N_ENVS * HORIZON / total * 1000:,.0f} env steps/s; the products alone would give "
          f"{N_ENVS * HORIZON / floor * 1000:,.0f}")
    return parts


def main(argv=None):
    import numpy as np
    import torch

    parser = argparse.ArgumentParser(prog="python -m membudget.bench.ppo", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int_flag(1), default=10 * N_ENVS * HORIZON, help="environment steps per run")
    parser.add_argument("--rounds", type=int_flag(1), default=3)
    parser.add_argument("--torchrl", action="store_true",
                        help="also time TorchRL's PPO with the same actor and critic (needs the interop extra)")
    parser.add_argument("--quality", choices=("B5", "B10", "B20"),
                        help="instead: train PPO with the study's settings at this budget (--engine, --seeds) and "
                             "print its held-out Set F1 per seed")
    parser.add_argument("--engine", default="compiled", choices=QUALITY_ENGINES,
                        help="for --quality: compiled (the torch.compile/inductor backend, bfloat16 critic products), "
                             "compiled-float32 (float32 products), compiled-float32-aoti and compiled-bfloat16-aoti "
                             "(the same through AOTInductor, the training default's backend) or autograd")
    parser.add_argument("--seeds", default="0,1,2", help="learner seeds for --quality: 0,1,2 or ranges, 12-60")
    parser.add_argument("--out", metavar="FILE", help="for --quality: a JSON-lines file of the seeds' results "
                                                      "(seeds already there are read, not trained)")
    parser.add_argument("--compare", metavar="FILE",
                        help="instead: compare the engines over the seeds that --quality --out wrote to FILE")
    parser.add_argument("--fail-margin", type=float, default=0.05,
                        help="for --compare: a seed failed when it is more than this below the pooled median")
    parser.add_argument("--numerics", choices=("B5", "B10", "B20"),
                        help="instead: how far the compiled engine's bfloat16 critic moves the values, advantages "
                             "and gradients at this budget, against PPO's minibatch noise (--seeds, --checkpoints)")
    parser.add_argument("--checkpoints", default="0,10,25,50,100,200",
                        help="for --numerics: the updates (of 5,120 env steps) before which to measure")
    parser.add_argument("--bf16", action="store_true",
                        help="also time the native update's products and one minibatch in bfloat16")
    parser.add_argument("--check-auto", action="store_true",
                        help="instead: CI's check that the engine engine='auto' picks for long runs is not slower "
                             "than the autograd engine on this CPU (exit status 1 if it is)")
    parser.add_argument("--cold-start", type=int_flag(1), metavar="STEPS",
                        help="instead: seconds to STEPS env steps per engine setting, each in a fresh process with "
                             "an empty inductor cache")
    parser.add_argument("--backends", type=int_flag(1), metavar="PAIRS",
                        help="instead: PAIRS pairs of --steps runs of the float32 compiled engine with each backend "
                             "(aoti, inductor), alternating, and each pair's ratio")
    parser.add_argument("--breakdown", type=int_flag(1), metavar="UPDATES",
                        help=f"instead: time the parts of UPDATES updates of the compiled engine (after "
                             f"{BREAKDOWN_WARMUP} untimed) beside their matrix products alone: where an update's time "
                             "goes on this CPU")
    parser.add_argument("--critic-dtype", default="auto", choices=("auto", "float32", "bfloat16"),
                        help="for --breakdown: the compiled engine's critic products (auto: what this CPU does "
                             "natively)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    if args.breakdown is not None:
        return print_breakdown(args.breakdown, args.critic_dtype)
    if args.backends is not None:
        return backend_pairs(args.steps, args.backends)
    if args.check_auto:
        return check_auto(args.steps, args.rounds)
    if args.cold_start:
        return cold_start(args.cold_start)
    if args.compare:
        return compare(args.compare, args.fail_margin)
    if args.numerics:
        checkpoints = tuple(parse_seeds(args.checkpoints, "--checkpoints"))
        return [numerics(args.numerics, seed, checkpoints)[0] for seed in parse_seeds(args.seeds)]
    if args.quality:
        return quality(args.quality, parse_seeds(args.seeds), args.engine, args.out)
    if args.torchrl:  # the timing mode, the one that uses it: before its warm-up runs
        with optional_extras(parser.prog):
            check_extras(["torchrl", "tensordict"])
    from membudget.agents.per_resource import N_INPUT
    from membudget.envs.pm import PMWeekVectorEnv

    space = PMWeekVectorEnv(num_envs=1).single_observation_space
    obs_width = sum(int(np.prod(s.shape)) for s in space.spaces.values())
    rows = candidates_per_state()
    native_shapes = gemm_shapes(rows, obs_width, N_INPUT)
    # one untimed run of each loop first: the compiled engine compiles its update (seconds; inductor caches it on
    # disk), and every loop's first run in a process is slower while its allocations grow
    native_rate(N_ENVS * HORIZON, args.rounds, "compiled"), native_rate(args.steps, args.rounds)
    native_rate(N_ENVS * HORIZON, args.rounds, "compiled", "float32", "inductor")
    native_rate(N_ENVS * HORIZON, args.rounds, "compiled", "float32", "aoti")  # builds or loads its package
    sb3_rate(args.steps, args.rounds)
    print(cpu_line())
    print(f"{'round':>5} {'compiled':>9} {'fp32 cmp':>9} {'fp32 aoti':>9} {'autograd':>9} {'SB3':>7} "
          f"{'compiled/SB3':>13} {'fp32 cmp/SB3':>13} {'fp32 aoti/SB3':>14} {'autograd/SB3':>13} {'fp32 floor/SB3':>15}"
          + (f" {'TorchRL':>8} {'TorchRL/SB3':>12}" if args.torchrl else "") + "   (env steps/s)")
    ratios, fp32_ratios, aoti_ratios, autograd_ratios, bounds, others = [], [], [], [], [], []
    loops = {"compiled": lambda k: native_rate(args.steps, k, "compiled"),
             "autograd": lambda k: native_rate(args.steps, k),
             "fp32": lambda k: native_rate(args.steps, k, "compiled", "float32", "inductor"),
             "aoti": lambda k: native_rate(args.steps, k, "compiled", "float32", "aoti"),
             "sb3": lambda k: sb3_rate(args.steps, k)}
    if args.torchrl:
        loops["torchrl"] = lambda k: torchrl_rate(args.steps, k)
    for k in range(args.rounds):
        # the loops in an order rotated each round: in a fixed order (right after the GEMM floor and SB3's loop) the
        # compiled engine was the slower of two identical float32 runs in 6 of 6 rounds under AVX2
        names = list(loops)[k % len(loops):] + list(loops)[:k % len(loops)]
        rate = {name: loops[name](k) for name in names}
        ours, autograd, fp32, aoti, theirs = (rate[n] for n in ("compiled", "autograd", "fp32", "aoti", "sb3"))
        other = rate.get("torchrl")
        floor = gemm_floor_rate(native_shapes)
        ratios.append(ours / theirs)
        fp32_ratios.append(fp32 / theirs)
        aoti_ratios.append(aoti / theirs)
        autograd_ratios.append(autograd / theirs)
        bounds.append(floor / theirs)
        line = (f"{k:>5} {ours:>9,.0f} {fp32:>9,.0f} {aoti:>9,.0f} {autograd:>9,.0f} {theirs:>7,.0f} "
                f"{ratios[-1]:>13.2f} {fp32_ratios[-1]:>13.2f} {aoti_ratios[-1]:>14.2f} {autograd_ratios[-1]:>13.2f} "
                f"{bounds[-1]:>15.2f}")
        if other is not None:
            others.append(other / theirs)
            line += f" {other:>8,.0f} {others[-1]:>12.2f}"
        print(line, flush=True)
    ratios.sort()
    fp32_ratios.sort()
    aoti_ratios.sort()
    autograd_ratios.sort()
    bounds.sort()
    others.sort()
    if others:
        print(f"TorchRL / SB3, median {others[len(others) // 2]:.2f}")
    if args.bf16:
        fp32, bf16 = gemm_floor_rate(native_shapes), gemm_floor_rate(native_shapes, dtype=torch.bfloat16)
        print(f"bfloat16: native GEMM floor {bf16:,.0f} env steps/s ({bf16 / fp32:.1f}x the fp32 floor "
              f"{fp32:,.0f}); one native minibatch {minibatch_ms(rows, obs_width, False):.2f} ms in fp32, "
              f"{minibatch_ms(rows, obs_width, True):.2f} ms under bfloat16 autocast")
    print(f"candidates per state {rows:.2f}; median compiled (critic auto) / SB3 {ratios[len(ratios) // 2]:.2f} "
          f"(target ≥ 4), compiled with float32 critic products / SB3 {fp32_ratios[len(ratios) // 2]:.2f} "
          f"(compiled_backend='aoti': {aoti_ratios[len(ratios) // 2]:.2f}), "
          f"autograd / SB3 {autograd_ratios[len(ratios) // 2]:.2f}; the most an fp32 loop could reach (fp32 GEMM "
          f"floor / SB3 measured), median {bounds[len(bounds) // 2]:.2f}\n{cpu_line()}")
    return ratios, bounds


if __name__ == "__main__":
    main()
