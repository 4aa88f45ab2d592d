"""ProactiveStream-v1: checkers, determinism, bad input, v0's draws kept, the carried opportunities' exact
semantics on hand-built streams, the rolling trajectory view, and the policies' use of the carried features."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env

import membudget  # noqa: F401
from membudget.baselines.proactive import EventOnly, EventTrajectory, FullHierarchy
from membudget.envs.proactive import Stream, generate_stream
from membudget.envs.proactive.env_v1 import FEATURE_NAMES_V1, N_FEATURES_V1, ProactiveStreamV1Env
from membudget.envs.proactive.memory import CYCLE_DAYS, ProactiveMemory
from membudget.envs.proactive import world, world_v1
from membudget.envs.proactive.memory import DailyRecord, Proposal, Segment, propose
from membudget.envs.proactive.schema import WORKDAYS
from membudget.envs.proactive.world_v1 import (CARRIED_FACTS, CODE_SKIP_V1, CODE_TEMPLATES_V1, SCOPES_V1,
                                               SPORTS_SKIP_V1, carried_support, generate_stream_v1)

V1 = "membudget/ProactiveStream-v1"
DAY = 1440
F1 = {name: i for i, name in enumerate(FEATURE_NAMES_V1)}


def hand_stream(scope, events):
    """events: (absolute minute, fact names, object id) in time order; everything observed, no labels."""
    spec = SCOPES_V1[scope]
    n = len(events)
    facts = np.array([sum(spec.bit(f) for f in names) for _, names, _ in events], np.int64)
    kinds = np.array([next((spec.kinds.index(f[5:]) for f in names if f.startswith("kind=")), 0)
                      for _, names, _ in events], np.int64)
    return Stream(scope=scope, stream_id="hand", time=np.array([e[0] for e in events], np.int64), kind=kinds,
                  facts=facts, observed=np.ones(n, bool), values=np.zeros((n, len(spec.values)), np.float32),
                  object_id=np.array([e[2] for e in events], np.int64), label=np.zeros(n, np.int64),
                  support=np.zeros(n, np.int64), episode=np.full(n, -1, np.int64), service=np.full(n, -1, np.int64))


def daily(scope, n_days, names=("slot=morning",)):
    """One plain event at 8:00 of every day (so every day has a record)."""
    return [(d * DAY + 480, names, -1) for d in range(n_days)]


@pytest.mark.parametrize("kwargs", [dict(scope="home", n_days=14), dict(scope="code", memory="no_replay_gate"),
                                    dict(scope="sports", memory="no_validation", token_budget=20_000)])
def test_checkers_on_every_scope(kwargs):
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(gym.make(V1, **kwargs).unwrapped)
    sb3_check_env(gym.make(V1, **kwargs).unwrapped, warn=True)


def test_spaces_and_docstring():
    env = gym.make(V1).unwrapped
    assert env.observation_space.shape == (N_FEATURES_V1,) == (127,)
    assert f"``Box(0, 1, ({N_FEATURES_V1},), float32)``" in ProactiveStreamV1Env.__doc__
    assert len(set(FEATURE_NAMES_V1)) == N_FEATURES_V1
    ansi = gym.make(V1, render_mode="ansi", n_days=14)
    ansi.reset(seed=0)
    assert ansi.render().startswith("ProactiveStream-v1 (sports)")


@pytest.mark.parametrize("kwargs, match", [(dict(scope="garden"), "unknown scope"), (dict(n_days=3), "n_days"),
                                           (dict(memory="none"), "memory variant")])
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gym.make(V1, **kwargs)


def test_bad_streams_and_actions_raise():
    env = ProactiveStreamV1Env(scope="code")
    with pytest.raises(RuntimeError):
        env.step(0)
    with pytest.raises(ValueError, match="scope"):
        env.reset(options={"stream": generate_stream_v1(0, scope="home", n_days=14)})
    env.reset(seed=0)
    for bad in (3, -1, 1.5):
        with pytest.raises((ValueError, TypeError)):
            env.step(bad)


@pytest.mark.parametrize("scope", sorted(SCOPES_V1))
def test_v0_draws_are_kept_and_carried_labels_hold(scope, monkeypatch):
    spec = SCOPES_V1[scope]
    anchor_bit, follow_bit = (spec.bit(f) for f in CARRIED_FACTS[scope])
    n_carried = n_decoys = 0
    for seed in range(4):
        v0 = generate_stream(seed, scope=scope)
        if scope == "sports":                        # v1's Sports skips due routines more often than v0's
            skips = {r.skip_prob for r in generate_stream_v1(seed, scope=scope).routines}
            assert skips and skips <= set(SPORTS_SKIP_V1.values())
            assert not {r.skip_prob for r in v0.routines} & set(SPORTS_SKIP_V1.values())
            with monkeypatch.context() as m:         # v0's generator at v1's skip probabilities
                m.setitem(world._GENERATORS, "sports", world_v1._GENERATORS_V1["sports"])
                v0 = generate_stream(seed, scope=scope)
        if scope == "code":                          # v1's Code routines: review sessions, skipped less often
            assert {(r.start, r.end) for r in generate_stream_v1(seed, scope=scope).routines} <= {
                window for _, _, window in CODE_TEMPLATES_V1.values()}
            with monkeypatch.context() as m:
                m.setitem(world._GENERATORS, "code", world_v1._GENERATORS_V1["code"])
                v0 = generate_stream(seed, scope=scope)
            assert {r.skip_prob for r in v0.routines} == {CODE_SKIP_V1}
        v1 = generate_stream_v1(seed, scope=scope)
        added = (v1.facts & (anchor_bit | follow_bit)) != 0
        assert not (v0.facts & (anchor_bit | follow_bit)).any()
        v0_facts = v0.facts
        if scope == "code":                          # v1: a maintainer's review is no longer also a "response"
            review, response = v0.kind == spec.kinds.index("pr_review"), spec.bit("response=maintainer")
            assert (v0.facts[review] & response).any()
            assert not (v1.facts[v1.kind == spec.kinds.index("pr_review")] & response).any()
            v0_facts = np.where(review, v0.facts & ~response, v0.facts)
        for name in ("time", "kind", "facts", "observed", "object_id"):
            v0_values = v0_facts if name == "facts" else getattr(v0, name)
            assert np.array_equal(getattr(v1, name)[~added], v0_values), name
        assert [r.__dict__ for r in v1.routines] == [r.__dict__ for r in v0.routines]
        carried = np.flatnonzero(v1.support & 4)
        assert np.all(v1.label[carried] == 1) and all(carried_support(v1, t) for t in carried)
        decoys = [t for t in np.flatnonzero(v1.facts & follow_bit) if not carried_support(v1, t)]
        assert np.all(v1.label[decoys] == (v1.support[decoys] > 0))     # no anchor: only v0's own reasons
        n_carried, n_decoys = n_carried + carried.size, n_decoys + len(decoys)
    assert n_carried > 0 and n_decoys > 0


def test_code_proposer_pairs_a_review_with_the_merge_that_follows():
    """v1's Code proposer takes ``kind=pr_review`` as a trigger (the afternoon-merge routine's); v0's never did."""
    v0, v1 = world.CODE, SCOPES_V1["code"]
    review, merged = v1.fact("kind=pr_review"), v1.fact("kind=pr_merged")

    def record(day, claims):
        segments = [Segment(day, day * DAY + tod, day * DAY + tod, 1 << f, ((f, day * DAY + tod),), (0,))
                    for f, tod in claims]
        return DailyRecord(day, segments, 0, (), tuple(day * DAY + tod for _, tod in claims))

    cycle = [record(0, [(review, 900), (merged, 960)]), record(1, [(review, 910), (merged, 1000)]),
             record(2, [(merged, 980)]), record(5, [])]       # Wednesday: a merge without a review
    assert propose(cycle, v1) == [Proposal(review, merged, 930, 1030, WORKDAYS, (0, 1))]
    assert propose(cycle, v0) == []


def test_carried_support_exact_window_and_entity():
    a, f = CARRIED_FACTS["code"]
    s = hand_stream("code", [(0 * DAY + 600, ("kind=issue_comment", a), 7),
                             (6 * DAY + 100, ("kind=push", f), 7),      # day 6: anchor on day 0 >= 6 − 7
                             (6 * DAY + 200, ("kind=push", f), 8),      # another pull request
                             (8 * DAY + 100, ("kind=push", f), 7)])     # day 8: anchor day 0 < 8 − 7
    assert [carried_support(s, t) for t in range(4)] == [False, True, False, False]


def _decide_obs(env, t, depth):
    """The decide-sub-step observation at event ``t`` after consulting ``depth`` (abstaining before it)."""
    obs, _ = env.reset(options={"stream": env._hand})
    for _ in range(t):
        env.step(0)
        env.step(0)
    obs, *_ = env.step(depth)
    return obs


def test_carried_features_come_from_the_consulted_layers():
    anchor, follow = CARRIED_FACTS["sports"]
    events = daily("sports", 8)
    events.insert(1, (0 * DAY + 600, ("slot=midday", anchor), -1))            # a setback on day 0
    events += [(5 * DAY + 700, ("slot=midday", follow), -1),                   # 5 days later: beyond 72 h
               (7 * DAY + 700, ("slot=midday", follow), -1)]
    events.sort()
    env = ProactiveStreamV1Env(scope="sports", hallucination_rate=0.0)
    env._hand = hand_stream("sports", events)
    t5 = [i for i, e in enumerate(events) if e[0] == 5 * DAY + 700][0]
    t7 = [i for i, e in enumerate(events) if e[0] == 7 * DAY + 700][0]
    at5 = {d: _decide_obs(env, t5, d) for d in range(3)}
    assert at5[0][F1["ev_carried"]] == 0 and at5[0][F1["tr_carried"]] == 0      # the window lost it
    assert at5[1][F1["tr_carried"]] == 1 and at5[2][F1["tr_carried"]] == 1      # the trajectories hold it
    assert not EventOnly().decide(at5[0]) and EventTrajectory().decide(at5[1]) and FullHierarchy().decide(at5[2])
    at7 = _decide_obs(env, t7, 1)
    assert at7[F1["tr_carried"]] == 1                     # day 0 is still among the last seven completed days
    depth_step = env.reset(options={"stream": env._hand})[0]
    assert depth_step[F1["ev_carried"]] == depth_step[F1["tr_carried"]] == 0
    near = hand_stream("sports", [(0, ("slot=night", anchor), -1), (DAY, ("slot=night", follow), -1)])
    env._hand = near
    assert _decide_obs(env, 1, 0)[F1["ev_carried"]] == 1          # within 72 hours the event layer holds it


def test_rolling_view_holds_the_last_seven_records():
    s = hand_stream("sports", daily("sports", 11))
    spec = SCOPES_V1["sports"]
    cycle = ProactiveMemory(s, spec, hallucination_rate=0.0).trace()
    rolling = ProactiveMemory(s, spec, hallucination_rate=0.0, rolling_view=True).trace()
    assert [r.day for r in rolling.cycle_records[10]] == list(range(10 - CYCLE_DAYS, 10))
    assert [r.day for r in cycle.cycle_records[10]] == [7, 8, 9]
    assert len(cycle.records) == len(rolling.records) == 10


def test_policies_refuse_other_shapes_and_keep_v0_behaviour():
    with pytest.raises(ValueError, match="127"):
        EventOnly().predict(np.zeros(126, np.float32))
    obs = np.zeros(N_FEATURES_V1, np.float32)
    obs[F1["phase"]], obs[F1["tr_carried"]] = 1, 1
    assert EventTrajectory().predict(obs)[0] == 1 and EventOnly().predict(obs)[0] == 0
    assert EventTrajectory().predict(obs[:125])[0] == 0            # the same rule on v0's observation


def test_study_page_keeps_v0_tables_below(tmp_path):
    from membudget.studies.proactmem import main

    common = ["--scopes", "code", "--streams", "2", "--bootstrap", "100", "--out", str(tmp_path)]
    main(["--env-version", "0", *common])
    assert not (tmp_path / "proactive_stream.md").exists() and (tmp_path / "proactive_ablation_v0.png").exists()
    main(common)
    page = (tmp_path / "proactive_stream.md").read_text()
    v1, v0 = page.split("## ProactiveStream-v0 (kept)")
    assert v1.startswith("# ProactiveStream-v1 results") and "ProactiveStream-v1, held-out streams" in v1
    assert "| code | " in v1.split("| scope | sources kept |")[1]      # the rule restricted to break-even sources
    assert "ProactiveStream-v0, held-out streams 10000-10001" in v0 and "--env-version 0" in v0
    assert v0.count("| FullHierarchy |") == 2          # code and pooled


def test_rule_sources_split_the_full_rules_interventions():
    from membudget.studies.proactmem import rule_sources, run_policy

    sources = rule_sources("code", [0, 1])
    runs = run_policy(FullHierarchy(), "code", [0, 1])
    assert sum(tp for tp, _ in sources.values()) == sum(r["tp"] for r in runs)
    assert sum(fp for _, fp in sources.values()) == sum(r["fp"] for r in runs)
    assert sources["carried"][0] > 0
    assert rule_sources("code", [0, 1], version=0)["carried"] == [0, 0]


def test_restricted_full_rule_acts_only_on_its_sources():
    from membudget.studies.proactmem import break_even_sources

    env, full, carried = ProactiveStreamV1Env(scope="code"), FullHierarchy(), FullHierarchy(("carried",))
    obs, _ = env.reset(seed=2)
    fired, done = set(), False
    while not done:
        if obs[F1["phase"]]:
            source = full.source(obs)
            fired.add(source)
            assert carried.decide(obs) == (source == "carried")
            assert full.decide(obs) == (source is not None)
        obs, _, done, _, _ = env.step(2 if not obs[F1["phase"]] else int(full.decide(obs)))
    assert {"evidence", "carried"} <= fired
    with pytest.raises(ValueError, match="unknown sources"):
        FullHierarchy(("routine", "hunch"))
    counts = {"evidence": [1, 2], "carried": [9, 1], "routine": [0, 0]}
    assert break_even_sources(counts) == ("carried",)                  # 1/3 is not above the break-even 1/3
    assert break_even_sources(counts, intrusion_penalty=0.25) == ("evidence", "carried")
    assert break_even_sources(counts, intrusion_penalty=10.0) == ()


def test_rule_steps_are_the_rules_own_play():
    from membudget.agents.proactive_ppo import rule_steps

    obs, actions = rule_steps(FullHierarchy(), "code", [3], intrusion_penalty=0.25)
    env = ProactiveStreamV1Env(scope="code", intrusion_penalty=0.25)
    o, _ = env.reset(seed=3)
    for k in range(len(actions)):
        np.testing.assert_array_equal(obs[k], o)
        assert actions[k] == FullHierarchy().predict(o)[0]
        o, _, done, _, _ = env.step(int(actions[k]))
        assert done == (k == len(actions) - 1)
    assert obs.dtype == np.float32 and actions.dtype == np.int64


def test_behaviour_clone_tells_the_rules_interventions_from_its_abstentions_and_repeats():
    import torch
    from stable_baselines3.common.vec_env import DummyVecEnv

    from membudget.agents.behaviour_cloning import behaviour_clone
    from membudget.agents.proactive_ppo import ProactiveStreamPPOConfig, make_env, rule_steps

    obs, actions = rule_steps(FullHierarchy(), "code", [0, 1])
    decide = obs[:, F1["phase"]] == 1
    intervene = decide & (actions > 0)
    assert 0 < intervene.sum() < 0.1 * decide.sum()       # the rare class a warm start is for
    cfg = ProactiveStreamPPOConfig(total_timesteps=1024)

    def cloned(epochs):
        model = cfg.new_model("MlpPolicy", DummyVecEnv([lambda: make_env("code")]), 0)
        critic = [p.detach().clone() for p in model.policy.value_net.parameters()]
        agreement = behaviour_clone(model, obs, actions, epochs=epochs, batch_size=512, learning_rate=1e-3,
                                    seed=0) if epochs else None
        with torch.no_grad():
            p_act = 1 - model.policy.get_distribution(torch.as_tensor(obs)).distribution.probs[:, 0].numpy()
        assert all(torch.equal(a, b) for a, b in zip(critic, model.policy.value_net.parameters()))  # actor only
        return p_act, agreement, [p.detach().clone() for p in model.policy.parameters()]

    before, _, _ = cloned(0)
    after, agreement, weights = cloned(40)
    _, _, again = cloned(40)
    # SB3's initial policy acts alike on both; the clone acts where the rule does and abstains where it abstains
    assert abs(before[intervene].mean() - before[decide & ~intervene].mean()) < 0.05
    assert after[intervene].mean() > 0.6 and after[decide & ~intervene].mean() < 0.1
    assert agreement > 0.95 and all(torch.equal(a, b) for a, b in zip(weights, again))


def test_warm_start_settings_are_checked_before_any_work():
    from membudget.agents.proactive_ppo import ProactiveStreamPPOConfig, train_ppo
    from membudget.studies.proactmem import ProactivePPOConfig

    with pytest.raises(ValueError, match="warm_start must be one of"):
        ProactiveStreamPPOConfig(total_timesteps=1024, warm_start="rule")
    with pytest.raises(ValueError, match="warm_start_streams"):
        ProactiveStreamPPOConfig(total_timesteps=1024, warm_start_streams=0)
    with pytest.raises(ValueError, match="warm_start_epochs"):
        ProactiveStreamPPOConfig(total_timesteps=1024, warm_start_epochs=0)
    # the clone's streams count as training streams: they may not reach the held-out ones
    with pytest.raises(ValueError, match=r"9991\.\.10000 would reach the held-out streams"):
        train_ppo("home", seed=9991, total_timesteps=1024, warm_start="full-hierarchy")
    ProactiveStreamPPOConfig(total_timesteps=1024, warm_start="none", warm_start_streams=10)
    with pytest.raises(ValueError, match="would reach the held-out streams"):
        ProactivePPOConfig(total_timesteps=1024, seed=9998)
    assert ProactivePPOConfig(total_timesteps=1024, seed=9991).seed == 9991      # no warm start: 4 streams


def test_the_study_trains_and_reports_each_ppo_warm_start(tmp_path):
    from membudget.studies.proactmem import PPO_NAMES, evaluate, main

    with pytest.raises(ValueError, match="ppo_starts must be distinct warm starts"):
        evaluate(["code"], 2, ppo_timesteps=128, ppo_starts=("none", "rule"))
    with pytest.raises(ValueError, match="ppo_starts must be distinct warm starts"):
        evaluate(["code"], 2, ppo_timesteps=128, ppo_starts=("none", "none"))
    main(["--scopes", "code", "--streams", "2", "--bootstrap", "100", "--ppo-timesteps", "128", "--ppo-starts", "none",
          "full-hierarchy", "--out", str(tmp_path)])
    page = (tmp_path / "proactive_stream.md").read_text()
    assert page.count("| PPO | ") == 2 and page.count("| PPO (warm start) | ") == 2       # code and pooled
    assert "| PPO effectiveness, return | PPO (warm start) effectiveness, return |" in page
    assert PPO_NAMES == {"none": "PPO", "full-hierarchy": "PPO (warm start)"}
