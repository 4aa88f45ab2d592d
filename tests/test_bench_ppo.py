"""The engine comparison of bench/ppo.py: seed lists, resumable per-seed results, Fisher's exact test and the
failed-seed count on hand-built results (training a population is the benchmark's job, not the tests'), and the
bfloat16 numerics probe on three updates."""

import json

import numpy as np
import pytest
from scipy.stats import fisher_exact as scipy_fisher

from membudget.bench.ppo import compare, fisher_exact, quality
from membudget.envs.validation import parse_seeds, seeds_flag


def test_parse_seeds():
    assert parse_seeds("0,1,2") == [0, 1, 2]
    assert parse_seeds("12-15") == [12, 13, 14, 15]
    assert parse_seeds("0-2, 7") == [0, 1, 2, 7]


@pytest.mark.parametrize("bad", ["", "a", "3-", "-3", "1,1", "5-3", "0-2,2", "1.5"])
def test_parse_seeds_refuses(bad):
    import argparse

    with pytest.raises(ValueError, match="--seeds"):
        parse_seeds(bad)
    with pytest.raises(argparse.ArgumentTypeError) as e:  # as an argparse type: argparse names the flag itself
        seeds_flag("--weeks")(bad)
    assert not str(e.value).startswith("--weeks")


@pytest.mark.parametrize("table", [(1, 12, 0, 9), (0, 30, 0, 30), (3, 40, 0, 30), (5, 10, 1, 10), (10, 10, 0, 10),
                                   (2, 5, 7, 9), (0, 1, 1, 1)])
def test_fisher_exact_equals_scipy(table):
    a, n_a, b, n_b = table
    expected = scipy_fisher([[a, n_a - a], [b, n_b - b]], alternative="two-sided")[1]
    assert fisher_exact(*table) == pytest.approx(expected, rel=1e-9, abs=1e-12)


def _write(path, engine, scores, budget="B10"):
    with open(path, "a") as f:
        for seed, f1 in scores.items():
            f.write(json.dumps({"budget": budget, "engine": engine, "seed": seed, "held_out_set_f1": f1}) + "\n")


def test_compare_counts_failures_and_differences(tmp_path):
    compiled = {0: 0.76, 1: 0.77, 2: 0.66, 3: 0.765, 4: 0.64}
    autograd = {0: 0.764, 1: 0.766, 2: 0.762, 3: 0.768}
    out = tmp_path / "seeds.jsonl"
    _write(out, "compiled", compiled)
    _write(out, "autograd", autograd)
    _write(out, "autograd", {0: 0.1}, budget="B5")  # another budget: compared on its own
    result = compare(out, fail_margin=0.05, n_resamples=2000)
    row = result["B10"]
    assert result["B5"]["autograd"]["seeds"] == 1 and "fisher_p" not in result["B5"]
    pooled = np.median(list(compiled.values()) + list(autograd.values()))
    assert row["fail_below"] == pytest.approx(pooled - 0.05)
    assert row["compiled"]["failed_seeds"] == [2, 4] and row["autograd"]["failed_seeds"] == []
    assert row["compiled"]["seeds"] == 5 and row["autograd"]["median"] == pytest.approx(0.765)
    assert row["fisher_p"] == pytest.approx(scipy_fisher([[2, 3], [0, 4]])[1])
    mean, lo, hi = row["mean_diff"]
    assert mean == pytest.approx(np.mean(list(compiled.values())) - np.mean(list(autograd.values())))
    assert lo < mean < hi
    kept, lo, hi = row["mean_diff_not_failed"]
    assert kept == pytest.approx(np.mean([0.76, 0.77, 0.765]) - np.mean(list(autograd.values())))
    assert lo <= kept <= hi


def test_quality_reads_seeds_already_run(tmp_path):
    out = tmp_path / "seeds.jsonl"
    _write(out, "compiled", {3: 0.7123, 4: 0.7456})
    # both seeds are on file, so nothing trains (4M steps each otherwise)
    assert quality("B10", [3, 4], "compiled", out=out) == [0.7123, 0.7456]


@pytest.mark.slow
def test_numerics_follows_train_ppo_and_bf16_stays_inside_minibatch_noise():
    import torch

    from membudget.agents.ppo import train_ppo
    from membudget.bench.ppo import numerics
    from membudget.studies.rl_vs_distillation import BENCH_FULL

    rows, actor = numerics("B10", seed=3, checkpoints=(0, 2), updates=3)
    # the measurements play on their own stream: training is train_ppo's, weight for weight
    policy, _ = train_ppo("B10", BENCH_FULL["ppo"], seed=3, eval_every=0, eval_seeds=[4000],
                          total_timesteps=3 * 64 * 80, keep_best=False, engine="compiled", critic_dtype="bfloat16")
    assert all(torch.equal(a, b) for a, b in zip(actor.state_dict().values(), policy.net.state_dict().values()))
    assert [r["update"] for r in rows] == [0, 2] and rows[1]["env_steps"] == 2 * 64 * 80
    for r in rows:
        assert 0 < r["values"] < 0.02 and 0 < r["advantages"] < 0.01
        for part in ("actor", "critic"):
            assert 0 < r[f"{part}_grad"] < 0.05 * r[f"{part}_noise"]


def test_breakdown_times_train_ppo_s_own_updates(capsys):
    import torch

    from membudget.agents.ppo import train_ppo
    from membudget.bench.ppo import (ACTOR, BREAKDOWN_PARTS, CRITIC, EPOCHS, LR, MINIBATCHES, N_ENVS, breakdown,
                                     main)

    parts, actor = breakdown(updates=2, warmup=1, critic_dtype="float32", repeats=1)
    # the timed loop is the bench's training run, weight for weight
    policy, _ = train_ppo("B10", total_timesteps=3 * N_ENVS * 80, seed=0, n_envs=N_ENVS, n_epochs=EPOCHS,
                          n_minibatches=MINIBATCHES, learning_rate=LR, hidden=ACTOR, critic_arch=CRITIC,
                          eval_every=0, eval_seeds=[4000], engine="compiled", critic_dtype="float32",
                          reward_scale=1.0, ent_coef=0.0, keep_best=False)
    assert all(torch.equal(a, b) for a, b in zip(actor.state_dict().values(), policy.net.state_dict().values()))
    assert tuple(parts) == BREAKDOWN_PARTS
    assert all(ms > 0 for ms, _ in parts.values())
    assert parts["gae"][1] == 0 and all(parts[p][1] > 0 for p in ("rollout", "values", "learn"))
    with pytest.raises(ValueError, match="updates >= 1"):
        breakdown(updates=0)
    main(["--breakdown", "1", "--critic-dtype", "float32"])
    out = capsys.readouterr().out
    assert "critic products in float32" in out and "env steps/s; the products alone would give" in out
    assert all(name in out for name in ("rollout", "values", "GAE", "learn", "total"))


@pytest.mark.slow
def test_backend_pairs_times_both_backends_in_alternation(capsys):
    from membudget.bench.ppo import HORIZON, N_ENVS, backend_pairs

    ratios = backend_pairs(N_ENVS * HORIZON, 2)
    out = capsys.readouterr().out
    assert len(ratios) == 2 and all(r > 0 for r in ratios)
    assert "pair 0: inductor" in out and "pair 1: inductor" in out and "aoti / inductor, float32" in out


@pytest.mark.parametrize("argv", [["--breakdown", "0"], ["--breakdown", "x"], ["--rounds", "0"], ["--steps", "-5"],
                                  ["--cold-start", "0"], ["--backends", "0"]])
def test_bench_refuses_bad_counts_before_any_work(argv, capsys):
    from membudget.bench.ppo import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "must be an integer >= 1" in capsys.readouterr().err
