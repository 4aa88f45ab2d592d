"""The SB3 learners' configs (issue 30): one frozen typed config per learner, the command line generated from it with
the same defaults, keyword overrides by field name (unknown names refused), and a run's recorded config resolving
to the same config."""

import argparse
import dataclasses
import inspect
import json
import os
import tempfile

import pytest
import torch

from membudget import train
from membudget.agents import proactive_ppo, replay_ppo, rl, tier_router
from membudget.studies.runs import add_fields, load_config_file, resolve_config, start_run

LEARNERS = {  # subcommand: (the learner's config, its training function, the command's own short-run defaults)
    "sb3-ppo": (rl.PPOAllocatorConfig, rl.train_ppo_allocator, {"total_timesteps": 20_000}),
    "sb3-maskable-ppo": (rl.PPOAllocatorConfig, rl.train_ppo_allocator, {"total_timesteps": 20_000}),
    "sb3-ppo-conditioned": (rl.ConditionedPPOAllocatorConfig, rl.train_conditioned_ppo, {"total_timesteps": 40_000}),
    "tiers": (tier_router.TierRouterConfig, tier_router.train_router, {}),
    "proactive-ppo": (proactive_ppo.ProactiveStreamPPOConfig, proactive_ppo.train_ppo, {}),
    "replay-ppo": (replay_ppo.ReplayStreamPPOConfig, replay_ppo.train_ppo, {}),
}


def _cli_defaults(cmd) -> dict:
    parser = argparse.ArgumentParser()
    add_fields(parser, cmd.config, defaults=cmd.defaults)
    return vars(parser.parse_args([]))


@pytest.mark.parametrize("sub", sorted(LEARNERS))
def test_the_command_line_s_defaults_are_the_learner_config_s(sub):
    learner, fn, short = LEARNERS[sub]
    cmd = train.commands()[sub]
    assert issubclass(cmd.config, learner) and cmd.defaults == short
    cli = _cli_defaults(cmd)
    expected = dataclasses.asdict(learner())
    expected.update(short)
    assert {name: cli[name] for name in expected} == expected
    # one source: the training function keeps no default of a setting
    fields = {f.name for f in dataclasses.fields(learner)}
    assert not fields & set(inspect.signature(fn).parameters)
    assert dataclasses.is_dataclass(learner) and learner.__dataclass_params__.frozen


def test_the_settings_are_defined_once_and_the_studies_read_their_defaults():
    from membudget.studies.budgetmem import ResultsConfig, TiersConfig

    for cls in {c for c, _, _ in LEARNERS.values()}:
        assert issubclass(cls, rl.SB3PPOSettings)
    router = tier_router.TierRouterConfig()
    study = ResultsConfig()
    assert (study.timesteps, study.bc_queries, study.bc_teacher) == (router.total_timesteps, router.bc_queries,
                                                                       router.bc_teacher)
    assert tier_router.TierRouterConfig.of(TiersConfig()) == router


CASES = {
    "sb3-ppo": lambda **kw: rl.train_ppo_allocator("B5", **kw),
    "sb3-ppo-conditioned": lambda **kw: rl.train_conditioned_ppo(("B5",), **kw),
    "tiers": lambda **kw: tier_router.train_router(**kw),
    "bc_warm_start": lambda **kw: tier_router.bc_warm_start(None, None, **kw),
    "proactive-ppo": lambda **kw: proactive_ppo.train_ppo("code", **kw),
    "replay-ppo": lambda **kw: replay_ppo.train_ppo("db", "mid", **kw),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_unknown_overrides_and_wrong_configs_are_refused_by_name(name):
    with pytest.raises(TypeError, match="n_stepz"):
        CASES[name](n_stepz=64, batch_size=32)
    with pytest.raises(TypeError, match="config must be"):
        CASES[name](config=dataclasses.asdict(rl.PPOAllocatorConfig()))


def test_settings_are_validated_when_the_config_is_made():
    with pytest.raises(ValueError, match="gamma"):
        rl.PPOAllocatorConfig(gamma=1.5)
    with pytest.raises(ValueError, match="net_arch"):
        replay_ppo.ReplayStreamPPOConfig(net_arch=(64, 0))
    with pytest.raises(ValueError, match="bc_teacher"):
        tier_router.TierRouterConfig(bc_teacher="oracle")
    with pytest.raises(ValueError, match="envs_per_budget"):
        rl.ConditionedPPOAllocatorConfig(envs_per_budget=0)
    with pytest.raises(ValueError, match="use_beta"):
        tier_router.TierRouterConfig(use_beta="off")
    with pytest.raises(dataclasses.FrozenInstanceError):
        rl.PPOAllocatorConfig().n_steps = 64
    assert tier_router.TierRouterConfig(max_cost_per_query=None).max_cost_per_query == 0.0   # the old "no cap"
    assert rl.PPOAllocatorConfig(net_arch=[32, 16]).net_arch == (32, 16)
    assert rl.PPOAllocatorConfig.resolve(n_envs=4) == rl.PPOAllocatorConfig(n_envs=4)


NON_DEFAULT = {
    "sb3-ppo": dict(budget="B5", policy="mlp", net_arch=(32, 16), learning_rate=1e-3, late_policy="execute"),
    "sb3-ppo-conditioned": dict(budgets="B5,B20", envs_per_budget=2, gae_lambda=0.9, cost_profile="mild"),
    "tiers": dict(lam_conditioned=True, use_beta=False, max_cost_per_query=0.0015, net_arch=(32,), bc_teacher="hindsight",
                  strategy="reasoning", bc_learning_rate=1e-3),
    "proactive-ppo": dict(scope="code", memory="no_validation", token_weight=1e-5, n_envs=2, net_arch=(16, 16)),
    "replay-ppo": dict(family="os", profile="weak", eval_seeds="42", cost_weight=0.25, gamma=0.5),
}


@pytest.mark.parametrize("sub", sorted(NON_DEFAULT))
def test_a_run_s_recorded_config_is_a_config_file_that_resolves_to_the_same_config(tmp_path, sub):
    cmd = train.commands()[sub]
    cfg = resolve_config(cmd.config, dict(NON_DEFAULT[sub], out=str(tmp_path), seed=3), {}, cmd.defaults)
    run_dir = start_run(sub, cfg, "test", "run")
    with open(os.path.join(run_dir, "config.json")) as f:
        recorded = json.load(f)["config"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(recorded))
    assert resolve_config(cmd.config, {}, load_config_file(str(path)), cmd.defaults) == cfg


def _weights(model):
    return model.policy.state_dict()


def _same(a, b):
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


TINY = {  # the same short run through the library and the command line
    "sb3-ppo": (dict(total_timesteps=256, n_envs=4, n_steps=32, batch_size=64, n_epochs=1, eval_every=0),
                lambda kw: rl.train_ppo_allocator("B10", seed=1, **kw)[0], ["--seed", "1", "--eval-weeks", "1",
                                                                             "--learning-curve", "off"]),
    "tiers": (dict(total_timesteps=250, n_steps=250, batch_size=50, bc_queries=20, bc_epochs=1, lam=0.5),
              lambda kw: tier_router.train_router(seed=2, **kw), ["--seed", "2", "--eval-queries", "1"]),
    "proactive-ppo": (dict(total_timesteps=128, n_envs=1, n_steps=128, batch_size=64, n_epochs=1),
                      lambda kw: proactive_ppo.train_ppo("code", **kw), ["--scope", "code", "--eval-streams", "1"]),
    "replay-ppo": (dict(total_timesteps=128, n_steps=128, batch_size=64, n_epochs=1, n_tasks=50),
                   lambda kw: replay_ppo.train_ppo("db", "weak", **kw), ["--profile", "weak", "--eval-seeds", "42"]),
}


@pytest.mark.parametrize("sub", sorted(TINY))
def test_the_library_and_the_command_line_train_the_same_model(tmp_path, monkeypatch, sub):
    from stable_baselines3 import PPO

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.delenv("SB3_LOGDIR", raising=False)   # SB3's default: its folders in the temporary directory
    settings, library, flags = TINY[sub]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)   # the replay PPO leaves torch's threads alone (torch_threads=0)
        lib = library(settings)
        argv = [sub, *flags, "--out", str(tmp_path)]
        for k, v in settings.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        run_dir = train.main(argv + (["--progress-bar", "off"] if sub == "sb3-ppo" else []))
    finally:
        torch.set_num_threads(threads)
    cli = PPO.load(os.path.join(run_dir, "model.zip"), device="cpu")
    _same(_weights(lib), _weights(cli))
    # SB3's default logger would leave an empty SB3-<date> folder in the temporary directory per learn()
    assert not [p.name for p in scratch.iterdir() if p.name.startswith("SB3-")]
    assert lib.logger.name_to_value and "train/loss" in lib.logger.name_to_value


def test_the_shared_budget_ppo_leaves_no_logger_folder(tmp_path, monkeypatch):
    from membudget.agents.multiagent import train_shared_ppo

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    train_shared_ppo(2, "B10", total_timesteps=64, n_copies=1)
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith("SB3-")]
