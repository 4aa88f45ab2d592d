"""PPO / MaskablePPO on PMWeek-v0: executed actions are always feasible, the budget-conditioned VecEnv gives each
slot its budget, training weeks are development weeks, and the benchmark's --quick path runs."""

import numpy as np
import pytest

from membudget.agents.rl import (ConcatBudgetVecEnv, DevWeeksVecEnv, MaskedPolicy, masks_from_obs,
                                 train_ppo_allocator)
from membudget.envs.pm import PMWeekEnv, PMWeekVectorEnv, budget_levels

TINY = dict(total_timesteps=512, n_envs=4, n_steps=64, batch_size=128, n_epochs=1, eval_every=0)


@pytest.fixture(scope="module")
def models():
    return {algo: train_ppo_allocator("B5", algo=algo, seed=1, **TINY)[0] for algo in ("ppo", "maskable_ppo")}


@pytest.mark.parametrize("algo", ["ppo", "maskable_ppo"])
def test_executed_actions_are_feasible(models, algo):
    model = models[algo]
    policy = MaskedPolicy(model) if algo == "maskable_ppo" else model
    cap = budget_levels()["B5"]
    proposed_non_candidates = 0
    for seed in (8000, 8001, 9000):
        env = PMWeekEnv(budget="B5", per_step_cap=2)
        obs, info = env.reset(seed=seed)
        remaining, done, spent = cap, False, 0
        while not done:
            action, _ = policy.predict(obs, deterministic=False)
            proposed_non_candidates += int(np.sum(action.astype(bool) & ~obs["mask"].astype(bool)))
            mask = obs["mask"].astype(bool)
            obs, _, done, _, info = env.step(action)
            q = np.asarray(np.flatnonzero(info["queried"]))
            assert np.all(mask[q]), "queried a non-candidate"
            assert np.all(action[q] == 1), "queried a resource the policy did not propose"
            assert len(q) <= 2, "broke the per-step cap"
            assert info["cost"] == len(q) <= remaining, "spent more than the remaining budget"
            remaining -= info["cost"]
            spent += info["cost"]
            assert info["remaining_budget"] == remaining >= 0
        assert spent == info["episode_metrics"]["realized_cost"] <= cap
    if algo == "maskable_ppo":
        assert proposed_non_candidates == 0  # the mask keeps its proposals to candidates
    else:
        assert proposed_non_candidates > 0  # PPO proposes non-candidates; the executor skips them


def test_masks_from_obs_matches_env():
    env = PMWeekVectorEnv(num_envs=3)
    obs, _ = env.reset(seed=8000)
    for _ in range(5):
        np.testing.assert_array_equal(masks_from_obs(obs), env.action_masks())
        obs, *_ = env.step(obs["mask"])


def test_conditioned_vec_env_gives_each_slot_its_budget():
    budgets = ("B5", "B10", "B15", "B20")
    venv = ConcatBudgetVecEnv(budgets, envs_per_budget=3, seed=0)
    assert venv.num_envs == 12 and venv.slot_budgets == [b for b in budgets for _ in range(3)]
    levels = budget_levels()
    obs = venv.reset()
    fractions = obs["budget"][:, 0]
    np.testing.assert_allclose(fractions, venv.slot_target_fractions, rtol=1e-6)
    np.testing.assert_allclose(fractions, np.repeat([0.05, 0.10, 0.15, 0.20], 3), atol=1e-6)
    assert venv.observation_space.contains({k: v[0] for k, v in obs.items()})
    rng = np.random.default_rng(0)
    for t in range(80):
        obs, _, dones, infos = venv.step(rng.integers(0, 2, (12, 11)))
    caps = levels_of(venv, levels)
    assert dones.all()
    for i, inf in enumerate(infos):  # every slot spent within its own budget, and the tighter budgets ran out
        assert inf["episode_metrics"]["realized_cost"] <= caps[i]
    assert all(infos[i]["episode_metrics"]["realized_cost"] == caps[i] for i in range(3))
    np.testing.assert_allclose(fractions, obs["budget"][:, 0], rtol=1e-6)  # the new weeks keep their budgets
    masks = np.stack(venv.env_method("action_masks"))
    assert masks.shape == (12, 22)
    np.testing.assert_array_equal(masks, masks_from_obs(obs))


def levels_of(venv, levels):
    return np.array([levels[b] for b in venv.get_attr("budget")], dtype=float)


def test_training_weeks_are_development_weeks():
    venv = DevWeeksVecEnv(4, seed=5)
    assert set(venv.weeks.tolist()) == set(range(2000, 4000))
    venv.reset()
    first = list(venv.weeks[:4])
    ref = PMWeekVectorEnv(num_envs=4)
    o_ref, _ = ref.reset(seed=[int(s) for s in first])
    o = venv.reset()  # a second reset plays the next four weeks
    assert venv.weeks_played == 8
    venv2 = DevWeeksVecEnv(4, seed=5)
    np.testing.assert_array_equal(venv2.reset()["resources"], o_ref["resources"])
    for _ in range(80):
        o, _, d, _ = venv2.step(np.zeros((4, 11), dtype=np.int8))
    assert d.all() and venv2.weeks_played == 8
    o_next, _ = ref.reset(seed=[int(s) for s in venv2.weeks[4:8]])
    np.testing.assert_array_equal(o["resources"], o_next["resources"])


@pytest.mark.slow
def test_benchmark_quick(tmp_path, capsys):
    from membudget import evaluate

    out = tmp_path / "rl.md"
    res = evaluate.main(["rl-vs-distillation", "--quick", "--progress-bar", "off", "--out", str(out)])
    text = out.read_text()
    assert (tmp_path / "rl_vs_distillation_curves.png").exists()  # the figure the page links is written
    assert "**Smoke run**" in text and "**Goals**" not in text and "**met**" not in text  # no verdicts on a smoke run
    from membudget.studies.protocol import machine_line

    assert f"\n{machine_line()} (this process's; the learners repeat exactly only on the same kind of CPU" in text
    for m in ("HindsightDP", "CurrentGreedy", "PPO", "DAgger→PPO", "BC", "DAgger", "PPO + counts critic",
              "PPO, flat MLP", "SB3 PPO", "Sequential", "Myopic", "Static"):
        assert f"| B10 | {m} |" in text
    pw, ps = res.per_week, res.per_seed
    dp = pw[("B10", "HindsightDP")]["set_f1"]
    for (b, m), r in pw.items():  # the hindsight DP is an upper bound on every week
        assert np.all(r["set_f1"] <= dp + 1e-9), m
    for m in ("PPO", "BC", "DAgger", "DAgger→PPO"):  # one run per learner seed, averaged week by week
        assert len(ps[("B10", m)]) == 2
        np.testing.assert_allclose(pw[("B10", m)]["set_f1"], np.mean([r["set_f1"] for r in ps[("B10", m)]], axis=0))
    steps = res.training[("DAgger→PPO", "B10")]["env_steps"]
    assert steps == res.training[("DAgger", "B10")]["env_steps"] + 640  # the student's steps are counted too
    assert "**Smoke run**" in capsys.readouterr().out
    # the saved results render the same page again without training
    again = tmp_path / "again.md"
    evaluate.main(["rl-vs-distillation", "--render", str(tmp_path / "rl_vs_distillation.json"), "--out", str(again)])
    assert again.read_text() == text


def test_ppo_losses_match_the_closed_form():
    """The native loop's minibatch losses against a direct numpy computation: per-sample log-probabilities and
    entropies summed over the sample's candidate rows, advantages normalised with the unbiased std, the clipped
    surrogate, half the mean squared value error (a sample without candidates has log-probability 0)."""
    import torch

    from membudget.agents.ppo import ppo_losses

    logits, proposed = np.array([0.5, -1.0, 2.0, 0.3]), np.array([1.0, 0.0, 1.0, 0.0])
    sample = np.array([0, 0, 1, 1])
    old_logp, adv = np.array([-1.2, -0.9, -0.2]), np.array([1.0, -2.0, 0.5])
    values, returns = np.array([0.1, 0.4, -0.3]), np.array([0.0, 1.0, 0.2])
    t = [torch.tensor(x, dtype=torch.float64) for x in (logits, proposed)]
    pg, v_loss, entropy = ppo_losses(t[0], t[1], torch.tensor(sample), torch.tensor(old_logp), torch.tensor(adv),
                                     torch.tensor(values), torch.tensor(returns), 0.2)

    def log_sig(x):
        return -np.log1p(np.exp(-x))

    row_logp = proposed * log_sig(logits) + (1 - proposed) * log_sig(-logits)
    p = 1 / (1 + np.exp(-logits))
    row_ent = -(p * np.log(p) + (1 - p) * np.log(1 - p))
    new_logp = np.array([row_logp[sample == i].sum() for i in range(3)])
    ratio = np.exp(new_logp - old_logp)
    a = (adv - adv.mean()) / (adv.std(ddof=1) + 1e-8)
    expected_pg = np.mean(np.maximum(-a * ratio, -a * np.clip(ratio, 0.8, 1.2)))
    assert ratio[2] == pytest.approx(np.exp(0.2))  # the empty sample: log-probability 0
    assert float(pg) == pytest.approx(expected_pg, rel=1e-12)
    assert float(v_loss) == pytest.approx(0.5 * np.mean((values - returns) ** 2), rel=1e-12)
    assert float(entropy) == pytest.approx(sum(row_ent[sample == i].sum() for i in range(3)) / 3, rel=1e-12)
