"""ProactiveStream-v0: spaces, checkers, determinism, label isolation, intervention control, budget, rewards,
the stream generator's labels, the hand-written policies and the evaluation entry points."""

import dataclasses
import re
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

import membudget  # noqa: F401
from membudget.studies.execution import Executor
from membudget.studies.proactmem import BASELINES, bootstrap, evaluate, pooled, run_policy
from membudget.baselines.proactive import POLICIES, Always, EventOnly, FullHierarchy, Never
from membudget.envs.proactive import (DEPTHS, FEATURE_NAMES, N_FEATURES, SCOPES, ProactiveStreamEnv, Stream,
                                      episode_metrics, evidence, feasible, generate_stream)
from membudget.envs.proactive.env import F, MODES
from membudget.envs.proactive.memory import event_window

ENV_ID = "membudget/ProactiveStream-v0"
DAY = 1440


def hand_stream(scope, events):
    """events: (absolute minute, fact names, label, object id) in time order; everything observed."""
    spec = SCOPES[scope]
    n = len(events)
    facts = np.array([sum(spec.bit(f) for f in names) for _, names, _, _ in events], np.int64)
    kinds = np.array([next((spec.kinds.index(f[5:]) for f in names if f.startswith("kind=")), 0)
                      for _, names, _, _ in events], np.int64)
    return Stream(scope=scope, stream_id="hand", time=np.array([e[0] for e in events], np.int64), kind=kinds,
                  facts=facts, observed=np.ones(n, bool), values=np.zeros((n, len(spec.values)), np.float32),
                  object_id=np.array([e[3] for e in events], np.int64),
                  label=np.array([e[2] for e in events], np.int64), support=np.zeros(n, np.int64),
                  episode=np.full(n, -1, np.int64), service=np.full(n, -1, np.int64))


SEDENTARY = ("available", "activity=still", "steps=low", "weather=clear", "location=work")


def run_actions(env, actions, **reset):
    """Feed (depth, decision) pairs; returns the per-step (obs, reward, info) after each step."""
    out = []
    env.reset(**reset)
    for depth, decision in actions:
        out.append(env.step(depth))
        out.append(env.step(decision))
    return out


# ------------------------------------------------------------------------------------------- spaces, checkers


def test_documented_spaces_match():
    env = ProactiveStreamEnv()
    assert env.action_space == gym.spaces.Discrete(3) and len(DEPTHS) == len(MODES) == 3
    assert env.observation_space.shape == (N_FEATURES,) == (len(FEATURE_NAMES),)
    doc = ProactiveStreamEnv.__doc__
    assert "``Discrete(3)``" in doc and f"``Box(0, 1, ({N_FEATURES},), float32)``" in doc
    assert len(set(FEATURE_NAMES)) == N_FEATURES
    page = (Path(__file__).parents[1] / "docs" / "envs" / "proactive_stream.md").read_text()
    assert f"`Box(0, 1, ({N_FEATURES},), float32)`" in page


@pytest.mark.parametrize("kwargs", [dict(scope="home"), dict(scope="code", memory="no_replay_gate"),
                                    dict(scope="sports", memory="no_validation", token_budget=20_000)])
def test_checkers_on_every_scope(kwargs):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    env = gym.make(ENV_ID, **kwargs).unwrapped     # made outside: v0 warns that v1 exists
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(env)
    sb3_check_env(gym.make(ENV_ID, **kwargs).unwrapped, warn=True)


@pytest.mark.parametrize("version, scope", [(v, s) for v in (0, 1) for s in sorted(SCOPES)])
def test_same_seed_same_trajectory_and_observations_in_bounds(version, scope):
    from membudget.envs.proactive.env_v1 import ProactiveStreamV1Env

    rng = np.random.default_rng(0)
    actions = rng.integers(0, 3, size=4000)
    cls = (ProactiveStreamEnv, ProactiveStreamV1Env)[version]
    a, b = cls(scope=scope), cls(scope=scope)
    oa, _ = a.reset(seed=7)
    ob, _ = b.reset(seed=7)
    assert np.array_equal(oa, ob)
    for act in actions:
        ra, rb = a.step(int(act)), b.step(int(act))
        assert np.array_equal(ra[0], rb[0]) and ra[1] == rb[1] and ra[2] == rb[2]
        assert a.observation_space.contains(ra[0])
        if ra[2]:
            break
    assert ra[2], "the rollout should reach the end of the stream"
    assert ra[4]["episode_metrics"] == rb[4]["episode_metrics"]


# ---------------------------------------------------------------------------------------------- labels


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_labels_never_leak_into_observations(scope):
    stream = generate_stream(3, scope=scope)
    perm = np.random.default_rng(1).permutation(len(stream))
    shuffled = dataclasses.replace(stream, label=stream.label[perm], support=stream.support[perm],
                                   episode=stream.episode[perm], service=stream.service[perm], routines=())
    actions = np.random.default_rng(2).integers(0, 3, size=2 * len(stream))
    envs = [ProactiveStreamEnv(scope=scope), ProactiveStreamEnv(scope=scope)]
    obs = [env.reset(seed=5, options={"stream": s})[0] for env, s in zip(envs, (stream, shuffled))]
    rewards = [[], []]
    assert np.array_equal(*obs)
    for act in actions:
        (oa, ra, *_), (ob, rb, *_) = (env.step(int(act)) for env in envs)
        assert np.array_equal(oa, ob)
        rewards[0].append(ra)
        rewards[1].append(rb)
    assert rewards[0] != rewards[1], "the labels do matter for the reward"


@pytest.mark.parametrize("scope", sorted(SCOPES))
def test_generator_labels_follow_eq9_novelty_and_support(scope):
    for seed in range(40):
        s = generate_stream(seed, scope=scope)
        assert np.array_equal(s.time, generate_stream(seed, scope=scope).time)
        positives = np.flatnonzero(s.label)
        assert positives.size > 0
        assert np.all(s.support[positives] > 0) and np.all(s.support[s.label == 0] == 0)
        # novelty: one labelled event per episode, and it is the episode's first event
        for ep in np.unique(s.episode[s.episode >= 0]):
            members = np.flatnonzero(s.episode == ep)
            assert s.label[members].sum() <= 1
            if s.label[members].any():
                assert s.label[members[0]] == 1
        for t in positives:
            if s.support[t] & 1:
                assert evidence(s, t) >= 0
            else:
                assert feasible(s, t)
            if s.support[t] == 2:       # history alone: a routine in force, triggered today, behaviour not done
                day, tod = s.day(t), s.minute_of_day(t)
                ok = False
                for r in s.routines:
                    if not (r.first_day <= day < r.last_day and (r.weekdays >> (day % 7)) & 1):
                        continue
                    today = [i for i in range(len(s)) if s.day(i) == day]
                    triggers = [i for i in today if s.has(i, r.trigger) and s.minute_of_day(i) <= r.end]
                    if not triggers:
                        continue
                    done = any(s.has(i, r.behaviour) and r.start <= s.minute_of_day(i) <= r.end
                               for i in today if triggers[0] <= i <= t)
                    ok |= not done and r.start - SCOPES[scope].lead <= tod <= r.end + SCOPES[scope].grace
                assert ok, (scope, seed, t)


# ------------------------------------------------------------------------------- rewards, control, budget


def test_rewards_tokens_and_intervention_control_on_a_hand_built_sports_stream():
    stream = hand_stream("sports", [
        (0 * DAY + 750, SEDENTARY + ("slot=midday",), 1, -1),      # a reference opportunity
        (0 * DAY + 930, SEDENTARY + ("slot=afternoon",), 0, -1),   # same day, same state: a duplicate key
        (0 * DAY + 1000, SEDENTARY + ("slot=afternoon",), 0, -1), # scheduled mode: still the same key
        (1 * DAY + 750, SEDENTARY + ("slot=midday",), 1, -1),      # next local day: a new key
        (1 * DAY + 930, ("available", "activity=walking", "steps=high", "weather=clear", "slot=afternoon"), 0, -1),
    ])
    env = ProactiveStreamEnv(scope="sports", intrusion_penalty=0.5, token_weight=1e-3)
    steps = run_actions(env, [(0, 1), (0, 1), (0, 2), (0, 1), (0, 1)], seed=0, options={"stream": stream})
    infos = [s[4] for s in steps]
    decide = infos[1::2]
    assert [i["suppressed"] for i in decide] == [False, True, True, False, False]
    assert [i["decision"] for i in decide] == [True, False, False, True, True]
    assert [MODES[i["mode"]] for i in decide] == ["immediate", "immediate", "scheduled", "immediate", "immediate"]
    assert [s[1] for s in steps[1::2]] == [1.0, 0.0, 0.0, 1.0, -0.5]
    # depth 0 loads the prior events in the 72-hour window, 60 tokens each
    tokens = [i["tokens"] for i in infos[0::2]]
    assert tokens == [60 * (t - event_window(stream.time, t)) for t in range(5)] == [0, 60, 120, 180, 240]
    assert [s[1] for s in steps[0::2]] == pytest.approx([-1e-3 * x for x in tokens])
    m = infos[-1]["episode_metrics"]
    assert (m["tp"], m["fp"], m["fn"], m["tn"], m["suppressed"]) == (2, 1, 0, 2, 2)
    assert m["total_tokens"] == sum(tokens)
    assert m["return"] == pytest.approx(sum(s[1] for s in steps))


def test_code_control_keys_on_object_and_failure_run():
    push_fail = ("kind=push", "branch=default", "ci=failure", "actor=contributor")
    stream = hand_stream("code", [
        (600, push_fail, 1, 0),
        (660, push_fail, 0, 0),                                     # same failure run: suppressed
        (720, ("kind=push", "branch=default", "ci=success", "actor=bot"), 0, 0),
        (780, push_fail, 1, 0),                                     # a new run after a green build
        (840, push_fail, 0, 0),                                     # scheduled: Code keys carry the mode
    ])
    env = ProactiveStreamEnv(scope="code")
    steps = run_actions(env, [(0, 1)] * 4 + [(0, 2)], seed=0, options={"stream": stream})
    decide = [s[4] for s in steps[1::2]]
    assert [env.scope_spec.services[i["service"]] for i in decide] == ["ci_fix_help", "ci_fix_help", "review_help",
                                                                      "ci_fix_help", "ci_fix_help"]
    assert [i["suppressed"] for i in decide] == [False, True, False, False, False]


def test_duplicate_feature_announces_suppression():
    stream = hand_stream("sports", [(750, SEDENTARY + ("slot=midday",), 1, -1),
                                    (930, SEDENTARY + ("slot=afternoon",), 0, -1)])
    env = ProactiveStreamEnv(scope="sports")
    env.reset(seed=0, options={"stream": stream})
    obs = env.step(0)[0]
    assert obs[F["phase"]] == 1 and obs[F["duplicate"]] == 0 and obs[F["evidence"]] == 1
    env.step(1)
    assert env.step(0)[0][F["duplicate"]] == 1


@pytest.mark.parametrize("budget", [1, 3_000, 40_000])
def test_token_budget_is_never_exceeded_and_downgrades_to_the_deepest_affordable(budget):
    env = ProactiveStreamEnv(scope="code", token_budget=budget)
    rng = np.random.default_rng(budget)
    env.reset(seed=11)
    spent, done = 0, False
    while not done:
        t = env.event_index
        a = int(rng.integers(0, 3))
        costs = env._tokens[t]
        obs, _, _, _, info = env.step(a)
        if info["depth"] >= 0:
            assert info["tokens"] == costs[info["depth"]]
        expected = max([d for d in range(a + 1) if spent + costs[d] <= budget], default=-1)
        assert info["depth"] == expected and info["downgraded"] == (expected != a)
        spent += info["tokens"]
        assert spent <= budget
        assert obs[F["budget_left"]] == pytest.approx(1 - spent / budget, abs=1e-6)
        _, _, done, _, _ = env.step(int(rng.integers(0, 3)))
    assert env.step.__self__._spent == spent


def test_retrieved_features_appear_only_for_consulted_layers():
    env = ProactiveStreamEnv(scope="home")
    env.reset(seed=4)
    for _ in range(600):                      # into the second week, where regularities exist
        env.step(0)
        env.step(0)
    for depth in range(3):
        obs = env.step(depth)[0]
        assert obs[F["loaded_events"]] == 1
        assert obs[F["loaded_trajectories"]] == (depth >= 1) and obs[F["loaded_regularities"]] == (depth == 2)
        if depth < 1:
            assert not obs[F["tr_days"]:F["rg_eligible"]].any()
        if depth < 2:
            assert not obs[F["rg_eligible"]:].any()
        assert not env.step(0)[0][F["loaded_events"]:].any()   # the depth sub-step shows nothing retrieved


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("kwargs, match", [
    (dict(scope="gym"), "unknown scope"), (dict(memory="none"), "unknown memory variant"),
    (dict(intrusion_penalty=-1), "intrusion_penalty"), (dict(token_weight=float("nan")), "token_weight"),
    (dict(token_budget=0), "token_budget"), (dict(token_budget=True), "token_budget"),
    (dict(token_budget=2.5), "token_budget"), (dict(n_days=7), "n_days"), (dict(hallucination_rate=1.5), "[0, 1]"),
])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=re.escape(match)):
        ProactiveStreamEnv(**kwargs)


def test_bad_actions_and_calls_raise():
    env = ProactiveStreamEnv(scope="code")
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"week": 1})
    with pytest.raises(ValueError, match="Stream of scope 'code'"):
        env.reset(options={"stream": generate_stream(0, scope="sports")})
    env.reset(seed=0)
    for bad in (3, -1, 1.0, np.array([0, 1])):
        with pytest.raises(ValueError, match="Discrete"):
            env.step(bad)
    broken = generate_stream(0, scope="code")
    broken.facts[0] = 1 << 40
    with pytest.raises(ValueError, match="vocabulary"):
        env.reset(options={"stream": broken})


def test_episode_metrics_formulas():
    m = episode_metrics(tp=2, fp=1, fn=2, tn=5)
    assert m["relevance"] == pytest.approx(2 / 3) and m["coverage"] == pytest.approx(0.5)
    assert m["effectiveness"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert m["intrusion"] == pytest.approx(1 / 6) and m["balance"] == pytest.approx(0.5 * (0.5 + 5 / 6))
    assert m["frequency"] == pytest.approx(3 / 4)
    assert episode_metrics(0, 0, 0, 0)["effectiveness"] == 0.0


# -------------------------------------------------------------------------------------- policies, runner


def test_policies_choose_their_depth_and_predict_in_batches():
    obs = np.zeros((3, N_FEATURES), np.float32)
    obs[1, F["phase"]] = 1
    obs[2, F["phase"]] = 1
    obs[2, F["evidence"]] = 1
    for name, policy in ((n, cls()) for n, cls in POLICIES.items()):
        actions, _ = policy.predict(obs)
        assert actions.shape == (3,) and actions[0] == policy.depth
        single, _ = policy.predict(obs[2])
        assert np.ndim(single) == 0 and single == actions[2]
    assert FullHierarchy().predict(obs)[0].tolist() == [2, 0, 1]
    assert Never().predict(obs)[0].tolist() == [0, 0, 0] and Always().predict(obs)[0].tolist() == [0, 1, 1]
    with pytest.raises(ValueError, match="observation"):
        EventOnly().predict(np.zeros(5))


def test_full_hierarchy_fires_only_on_an_active_actionable_match():
    obs = np.zeros(N_FEATURES, np.float32)
    obs[F["phase"]], obs[F["feasible"]] = 1, 1
    assert FullHierarchy().predict(obs)[0] == 0
    obs[F["rg_actionable"]] = 1
    assert FullHierarchy().predict(obs)[0] == 1
    obs[F["feasible"]] = 0
    assert FullHierarchy().predict(obs)[0] == 0


def test_runner_metrics_pool_counts_and_paired_bootstrap():
    runs = run_policy(FullHierarchy(), "code", [10_000, 10_001])
    total = {k: sum(r[k] for r in runs) for k in ("tp", "fp", "fn", "tn")}
    assert pooled(runs)["effectiveness"] == pytest.approx(episode_metrics(**total)["effectiveness"])
    diff = bootstrap(runs, 200, other=runs)
    assert all(v == (0.0, 0.0, 0.0) for v in diff.values())
    never = run_policy(Never(), "code", [10_000, 10_001])
    assert pooled(never)["frequency"] == 0 and all(r["depth_share"][1] == 1 for r in never)


def test_evaluate_and_train_entry_points(tmp_path):
    from membudget.evaluate import main as evaluate_main
    from membudget.train import main as train_main

    results = evaluate_main(["proactive", "--scopes", "code", "--streams", "2", "--bootstrap", "100",
                             "--out", str(tmp_path)])
    assert set(results["code"]) == set(POLICIES)
    assert {"proactive_stream.md", "proactive_stream.json", "proactive_ablation.png"} <= {p.name for p in
                                                                                         tmp_path.iterdir()}
    run_dir = train_main(["proactive-ppo", "--scope", "code", "--total-timesteps", "256", "--n-envs", "1",
                          "--n-steps", "128", "--batch-size", "64", "--eval-streams", "1", "--out", str(tmp_path)])
    files = {p.name for p in (tmp_path / "proactive-ppo-code-seed0").iterdir()}
    assert run_dir.endswith("proactive-ppo-code-seed0") and {"model.zip", "config.json", "metrics.csv"} <= files


def test_a_fresh_training_process_records_torchs_cpu_capability(tmp_path):
    """The run directory is started before torch is imported; the record written after training names torch's
    vector capability all the same."""
    import json
    import subprocess
    import sys

    subprocess.run([sys.executable, "-m", "membudget.train", "proactive-ppo", "--scope", "code", "--total-timesteps",
                    "128", "--n-envs", "1", "--n-steps", "128", "--batch-size", "64", "--eval-streams", "1", "--out",
                    str(tmp_path), "--name", "run"], check=True, capture_output=True)
    record = json.loads((tmp_path / "run" / "config.json").read_text())
    assert record["machine"]["torch_cpu_capability"] in ("DEFAULT", "AVX2", "AVX512", "ZVECTOR", "VSX", "SVE256")
    assert record["training"]["env_steps"] >= 128


class _Reversed(Executor):
    """Tasks finishing in the reverse order (as remote workers may)."""

    def _run(self, fn, items, todo):
        for i in reversed(todo):
            yield i, fn(items[i])


@pytest.mark.slow
def test_evaluate_gives_the_same_runs_in_any_task_order_and_split_and_resumes(tmp_path):
    local = evaluate(["code"], 3, ppo_timesteps=128, progress=lambda m: None)
    split = evaluate(["code"], 3, ppo_timesteps=128, progress=lambda m: None, executor=_Reversed(tmp_path),
                     chunk_streams=2)
    np.testing.assert_equal(local, split)
    resumed = Executor(tmp_path)
    np.testing.assert_equal(evaluate(["code"], 3, ppo_timesteps=128, progress=lambda m: None, executor=resumed,
                                     chunk_streams=2), local)
    assert (resumed.computed, resumed.loaded) == (0, 7 * 2 + 1 + 2)  # baselines, the training, PPO's evaluations
    assert list(split["code"]) == [*BASELINES, "PPO"]
    assert [r["seed"] for r in split["code"]["PPO"]] == [10_000, 10_001, 10_002]
    np.testing.assert_equal(split["code"]["EventOnly"], run_policy(EventOnly(), "code", [10_000, 10_001, 10_002]))


def test_evaluate_command_passes_bad_backend_input_to_a_clear_error(tmp_path):
    from membudget.evaluate import main as evaluate_main

    with pytest.raises(ValueError, match="--address needs --backend ray"):
        evaluate_main(["proactive", "--address", "auto", "--out", str(tmp_path)])
    with pytest.raises(SystemExit):
        evaluate_main(["proactive", "--chunk-streams", "-1", "--out", str(tmp_path)])
    assert not list(tmp_path.iterdir())


def test_an_empty_stream_is_refused_with_a_clear_error():
    with pytest.raises(ValueError, match="no events"):
        ProactiveStreamEnv(scope="sports").reset(seed=0, options={"stream": hand_stream("sports", [])})
