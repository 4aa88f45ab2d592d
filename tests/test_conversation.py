"""ConversationPM (v1 and the earlier world v0): exact scores of small hand-built conversations without base
responses (the prospective-memory rule, trigger hits / 3,
the false-fire penalty), the caps, conversation files and their validator, bad arguments, and the teachers (the
hindsight optimum against enumeration, current-greedy, the leave-one-out labels)."""

from __future__ import annotations

import copy
import functools
import itertools
import json

import numpy as np
import pytest

import membudget  # noqa: F401
from membudget.envs.conversation import (ConversationConfig, ConversationPMEnv, conversation_from_dict,
                                         conversation_to_dict, generate_conversation, load_conversation,
                                         save_conversation, validate_conversation)
from membudget.envs.conversation.world import MESSAGE_KINDS
from membudget.envs.pm import EpisodeFormatError
from membudget.studies.execution import Executor
from membudget.teachers.conversation import (ConversationGreedy, ConversationOptimum, reference_rows, replay)

from conversation_tiny import play, tiny  # noqa: E402


ALL_TRUE = [(5, 0), (4, 1), (7, 1), (10, 1)]


def test_hits_score_the_goodai_rules_and_rewards_sum_to_the_score():
    conv = tiny(verifier_pairs=[(5, 0), (4, 1), (7, 1)])  # the verifier misses activation 3
    rewards, infos = play(conv, ALL_TRUE, budget=None)
    m = infos[-1]["episode_metrics"]
    assert m["pm_accuracy"] == 1.0 and m["tr_accuracy"] == pytest.approx(2 / 3)
    assert m["macro_accuracy"] == pytest.approx(0.5 + 1 / 3) and m["score"] == pytest.approx(0.5 + 1 / 3)
    assert rewards[5] == pytest.approx(0.5) and rewards[4] == pytest.approx(1 / 6) and rewards[10] == 0.0
    assert sum(rewards) == pytest.approx(m["score"])
    assert infos[10]["rejected"] == 1 and infos[10]["missed"] == 1 and infos[4]["hits"] == 1


def test_an_early_prospective_fire_zeroes_the_test_and_costs_the_penalty():
    conv = tiny(verifier_pairs=[(3, 0), (5, 0), (4, 1), (7, 1), (10, 1)])
    rewards, infos = play(conv, [(3, 0), *ALL_TRUE], budget=None, false_fire_penalty=2.0)
    m = infos[-1]["episode_metrics"]
    assert m["pm_accuracy"] == 0.0 and m["tr_accuracy"] == 1.0 and m["false_fires"] == 1
    assert rewards[3] == pytest.approx(-2 * 0.5 / 3) and rewards[5] == 0.0  # the quote in reply 4 no longer counts
    assert m["score"] == pytest.approx(0.5 - 1 / 3) and sum(rewards) == pytest.approx(m["score"])


def test_a_lure_fire_costs_the_penalty_only_and_penalty_zero_is_the_benchmark_rule():
    conv = tiny(verifier_pairs=[(6, 1), (5, 0), (4, 1), (7, 1), (10, 1)])
    for penalty, score in ((1.0, 1.0 - 1 / 6), (0.0, 1.0)):
        rewards, infos = play(conv, [(6, 1), *ALL_TRUE], budget=None, false_fire_penalty=penalty)
        m = infos[-1]["episode_metrics"]
        assert m["macro_accuracy"] == 1.0 and m["false_fires"] == 1 and m["score"] == pytest.approx(score)
        assert rewards[6] == pytest.approx(-penalty / 6)
        assert infos[6]["false_fires"] == 1


def test_non_candidates_are_never_verified_and_caps_hold():
    conv = tiny(verifier_pairs=[(5, 0), (4, 1), (7, 1), (10, 1)], candidate_pairs=[(4, 0)])
    _, infos = play(conv, [(2, 0), (2, 1), (4, 0), (4, 1), (5, 0), (7, 1), (10, 1)], budget=3, per_step_cap=1)
    assert not infos[2]["queried"].any() and infos[2]["skipped_non_candidate"] == 2
    assert infos[4]["queried"].sum() == 1 and infos[4]["skipped_count_cap"] == 1
    assert sum(int(i["cost"]) for i in infos) == 3 and infos[10]["skipped_budget"] == 1


@pytest.mark.parametrize("seed", [4000, 4001])
def test_budget_and_per_step_cap_are_never_exceeded_on_random_proposals(seed):
    env = ConversationPMEnv(budget="B40", per_step_cap=2)
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    spent, done = 0, False
    while not done:
        mask = obs["mask"].astype(bool)
        obs, _, done, _, info = env.step(rng.integers(0, 2, 6).astype(np.int8))
        assert info["queried"].sum() <= 2 and not (info["queried"] & ~mask).any()
        spent += info["cost"]
        assert info["remaining_budget"] == env.budget - spent >= 0
    assert info["episode_metrics"]["realized_cost"] == spent <= env.budget == 21


def test_conversation_files_round_trip_and_replay_exactly(tmp_path):
    conv = generate_conversation(4000)
    path = tmp_path / "c.json"
    save_conversation(conv, path)
    back = load_conversation(path)
    assert conversation_to_dict(back) == json.loads(path.read_text())
    a, b = ConversationPMEnv(), ConversationPMEnv()
    oa, _ = a.reset(seed=4000)
    ob, _ = b.reset(options={"conversation": back})
    for _ in range(conv.horizon):
        for k in oa:
            np.testing.assert_array_equal(oa[k], ob[k])
        oa, ra, *_ = a.step(oa["mask"])
        ob, rb, *_ = b.step(ob["mask"])
        assert ra == rb


def test_generated_conversations_follow_the_goodai_schedule():
    cfg = ConversationConfig()
    lures = 0
    for seed in range(2000, 2012):
        conv = generate_conversation(seed, cfg)
        validate_conversation(conv)
        for j in range(conv.n_resources):
            if conv.test_kind[j] == 0:
                assert 2 <= conv.ordinal[j] <= 8 and conv.message_kind[conv.live_from[j]] == \
                    MESSAGE_KINDS.index("pm_instruction")
            else:
                assert len(conv.fires[j]) == 3 and conv.message_kind[conv.stored[j]] == MESSAGE_KINDS.index("tr_setup")
                sims = conv.token_similarity[list(conv.fires[j]), j]
                assert len(set(sims.tolist())) == 3  # paraphrased: no two activations look alike to a string cache
        lures += int(np.sum(conv.message_kind == MESSAGE_KINDS.index("tr_lure")))
    assert lures >= 12


def _bad(mutate):
    d = conversation_to_dict(generate_conversation(4000))
    mutate(d)
    return d


@pytest.mark.parametrize("mutate, field", [
    (lambda d: d.update(format="x"), "format"),
    (lambda d: d.update(horizon=10 ** 30), "horizon"),
    (lambda d: d.update(horizon=True), "horizon"),
    (lambda d: d.update(gate=float("nan")), "gate"),
    (lambda d: d.pop("verifier"), "verifier"),
    (lambda d: d["token_similarity"][0].__setitem__(0, float("nan")), "token_similarity[0][0]"),
    (lambda d: d["fuzzy_similarity"][0].__setitem__(0, 2.0), "fuzzy_similarity[0][0]"),
    (lambda d: d["verifier"][0].__setitem__(0, 2), "verifier[0][0]"),
    (lambda d: d["messages"][0].update(kind="joke"), "messages[0].kind"),
    (lambda d: d["messages"][0].update(test="nobody"), "messages[0].test"),
    (lambda d: d["tests"][0].update(live_from=10 ** 20), "tests[0] (pm1).live_from"),
    (lambda d: d["tests"][0].update(ordinal=None), "tests[0] (pm1).ordinal"),
    (lambda d: d["tests"][0].update(fires=[d["tests"][0]["fires"][0] - 1]), "tests[0] (pm1).fires"),
    (lambda d: d["tests"][3].update(fires=d["tests"][3]["fires"][:2]), "tests[3] (tr1).fires"),
    (lambda d: d["tests"][3].update(kind="joke"), "tests[3] (tr1).kind"),
    (lambda d: d["tests"][1].update(id="pm1"), "tests.id"),
])
def test_the_validator_names_the_offending_field(mutate, field):
    with pytest.raises(EpisodeFormatError, match=field.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        conversation_from_dict(_bad(mutate))


def test_the_verifier_answers_only_candidates():
    conv = generate_conversation(4000)
    conv.verifier[0, :] = 1
    with pytest.raises(EpisodeFormatError, match="verifier"):
        validate_conversation(conv)
    with pytest.raises(EpisodeFormatError):
        ConversationPMEnv().reset(options={"conversation": conv})


@pytest.mark.parametrize("kwargs, error", [
    ({"budget": 0}, ValueError), ({"budget": "B0"}, ValueError), ({"budget": 2.5}, TypeError),
    ({"per_step_cap": 0}, ValueError), ({"false_fire_penalty": float("nan")}, ValueError),
    ({"action_mode": "x"}, ValueError), ({"world": {}}, TypeError),
])
def test_bad_arguments_raise(kwargs, error):
    with pytest.raises(error):
        ConversationPMEnv(**kwargs)


def test_bad_config_actions_and_calls_raise():
    for kw in ({"horizon": 1.5}, {"ordinal": (3, 2)}, {"p_false": 1.5}, {"gate": 0.0}, {"n_trigger": 0}):
        with pytest.raises(ValueError):
            ConversationConfig(**kw)
    env = ConversationPMEnv()
    with pytest.raises(RuntimeError):
        env.step(np.zeros(6))
    env.reset(seed=0)
    for bad in (np.zeros(5), np.full(6, 0.5), np.array(["a"] * 6)):
        with pytest.raises((ValueError, TypeError)):
            env.step(bad)
    with pytest.raises(ValueError):
        env.reset(options={"episode": None})
    with pytest.raises(TypeError):
        env.reset(options={"conversation": {}})


@pytest.mark.parametrize("world, shortest, tight", [
    # (quote_gap[0] + ordinal[0], ceil(0.9 trigger_span[0]) or 3 activations, + 1, 2 lines per pm + 4 per trigger)
    (dict(ordinal=(3, 6), quote_gap=(2, 5), trigger_span=(4, 9), n_prospective=1, n_trigger=1), 6, True),
    (dict(ordinal=(3, 6), quote_gap=(9, 12), trigger_span=(4, 4), n_prospective=1, n_trigger=1), 12, True),
    (dict(ordinal=(1, 1), quote_gap=(1, 1), trigger_span=(20, 30), n_prospective=1, n_trigger=1), 19, True),
    (dict(ordinal=(1, 1), quote_gap=(1, 1), trigger_span=(4, 4), n_prospective=3, n_trigger=3), 18, False),
    ({}, 23, False),   # the default world: its three trigger tests of span 24-44 crowd 23 messages
])
def test_a_horizon_that_cannot_hold_the_tests_is_refused_when_the_world_is_made(world, shortest, tight):
    assert ConversationConfig(**world).shortest_horizon == shortest
    with pytest.raises(ValueError, match=f"need at least {shortest} messages"):
        ConversationConfig(**world, horizon=shortest - 1)
    drawn = 0
    for seed in range(300):
        try:
            drawn += generate_conversation(seed, ConversationConfig(**world, horizon=shortest)).horizon == shortest
        except RuntimeError as e:   # a crowded world: the placement's random draws missed every fit
            assert f"seed {seed}" in str(e) and f"needs at least {shortest}" in str(e)
    assert (drawn > 0) == tight     # the bound is attained where one test of each kind sets it


def _enumerate_best(conv, budget, cap, penalty):
    cands = [tuple(p) for p in np.argwhere(conv.candidates()).tolist()]
    best = -np.inf
    for k in range(min(budget, len(cands)) + 1):
        for sub in itertools.combinations(cands, k):
            steps = [t for t, _ in sub]
            if max((steps.count(t) for t in steps), default=0) > cap:
                continue
            m, _ = replay(conv, sub, budget=budget, per_step_cap=cap, false_fire_penalty=penalty)
            best = max(best, m["score"])
    return best


@pytest.mark.parametrize("budget, cap, penalty", [(2, 1, 1.0), (3, 1, 0.0), (4, 2, 1.0)])
def test_hindsight_optimum_equals_enumeration_and_beats_greedy(budget, cap, penalty):
    conv = tiny(verifier_pairs=[(3, 0), (5, 0), (4, 1), (7, 1), (6, 1)], candidate_pairs=[(5, 1)])
    opt = ConversationOptimum(budget=budget, per_step_cap=cap, false_fire_penalty=penalty).solve(conv)
    greedy = ConversationGreedy(budget=budget, per_step_cap=cap, false_fire_penalty=penalty).solve(conv)
    assert opt.score == pytest.approx(_enumerate_best(conv, budget, cap, penalty))
    assert opt.score >= greedy.score - 1e-12 and opt.cost <= budget


def test_greedy_spends_on_the_first_fires_and_the_optimum_saves_for_the_quote():
    conv = tiny(verifier_pairs=[(5, 0), (4, 1), (7, 1), (10, 1)])
    greedy = ConversationGreedy(budget=1, per_step_cap=1).solve(conv)
    opt = ConversationOptimum(budget=1, per_step_cap=1).solve(conv)
    assert greedy.schedule == [(4, 1)] and greedy.score == pytest.approx(1 / 6)
    assert opt.schedule == [(5, 0)] and opt.score == pytest.approx(0.5)


def test_leave_one_out_outcome_and_due_labels():
    conv = tiny(verifier_pairs=[(3, 0), (5, 0), (4, 1), (6, 1), (10, 1)])
    rows = {(t, r): (out, due) for t, r, _, out, due in reference_rows(conv)}
    assert set(rows) == {tuple(p) for p in np.argwhere(conv.candidates()).tolist()}
    # (5, pm1): a confirmed quote, but the reference already fired it at (3, pm1), so deleting it changes nothing
    assert rows[(5, 0)] == (0, 1) and rows[(3, 0)] == (0, 0)
    assert rows[(4, 1)] == (1, 1) and rows[(7, 1)] == (0, 1) and rows[(6, 1)] == (0, 0) and rows[(10, 1)] == (1, 1)


def test_copies_are_independent():
    conv = generate_conversation(1)
    other = copy.deepcopy(conv)
    other.verifier[:] = 0
    assert conv.verifier.any()


class _Identity:
    """A scorer whose score is the first feature."""

    def score(self, X):
        return np.asarray(X)[:, 0]


def test_fraction_pacing_scales_the_target_fraction_by_the_pace_of_spending():
    from membudget.baselines.schedules import FractionPacing

    pacing = FractionPacing(scorer=_Identity(), fraction=0.6, thresholds={"B20": 0.8, "B40": 0.6, "B80": 0.2})
    res = np.zeros((4, 34), dtype=np.float32)
    res[:, 0] = [0.1, 0.45, 0.55, 0.9]

    def act(remaining, horizon_left):
        budget = np.zeros(9, dtype=np.float32)
        budget[1], budget[3] = remaining, horizon_left
        return pacing.predict({"resources": res, "budget": budget, "mask": np.ones(4, np.int8)})[0] > 0

    assert act(1.0, 1.0).tolist() == [False, True, True, True]     # on pace: fraction 0.6, threshold 0.4
    assert act(0.5, 1.0).tolist() == [False, False, False, True]   # behind: 0.3 -> threshold 0.7
    assert act(1.0, 0.25).tolist() == [True, True, True, True]     # far ahead: fraction 1 proposes everything
    assert not act(0.0, 0.5).any()                                 # nothing left: fraction 0 proposes nothing


def test_default_world_is_calibrated_to_budgetpm_goodai_budgets():
    from membudget.envs.conversation import budget_levels, mean_all_semantic_cost

    levels = budget_levels()
    assert [levels[b] for b in ("B20", "B40", "B60", "B80")] == [10, 21, 31, 41]  # BudgetPM §4 (mean 51.5)
    assert mean_all_semantic_cost() == np.mean([generate_conversation(s).candidates().sum()
                                                for s in range(2000, 2012)])
    assert ConversationPMEnv(budget="B60").budget == 31


def test_interpolated_thresholds_are_linear_between_calibrated_budgets():
    from types import SimpleNamespace

    from membudget.studies.conversation import threshold

    gate = SimpleNamespace(thresholds_={"B20": 0.8, "B40": 0.4, "B60": 0.1, "B80": 0.05})
    assert threshold(gate, "B40") == 0.4
    assert threshold(gate, "B30") == pytest.approx(0.6) and threshold(gate, "B70") == pytest.approx(0.075)


def test_pair_kinds_name_every_candidate():
    from membudget.envs.conversation.world import M_LURE, PAIR_KINDS

    conv = tiny(verifier_pairs=[], candidate_pairs=[(8, 1)])
    conv.message_kind[6], conv.message_test[6] = M_LURE, 1  # (6, tr1) is one of tr1's lures; (8, tr1) is not
    kinds = conv.pair_kinds()
    named = {(t, r): PAIR_KINDS[k] for t, r in np.argwhere(kinds > 0).tolist() for k in [kinds[t, r]]}
    assert named == {(3, 0): "pm_other", (5, 0): "pm_due", (4, 1): "activation", (7, 1): "activation",
                     (10, 1): "activation", (6, 1): "lure", (8, 1): "distractor"}
    assert np.array_equal(kinds > 0, conv.candidates())


class _Never:
    def predict(self, observation, state=None, episode_start=None, deterministic=True):
        return np.zeros_like(observation["mask"]), state


def test_call_breakdown_counts_calls_by_kind_and_losses_by_cause():
    from membudget.baselines.pm import AllRelevant
    from membudget.envs.conversation.world import PAIR_KINDS
    from membudget.studies.conversation import call_breakdown

    conv = generate_conversation(4000)
    kinds, truth, cand = conv.pair_kinds(), conv.truth(), conv.candidates()
    ver, base = conv.verifier > 0, conv.base > 0
    every = call_breakdown(AllRelevant(), [4000], budget=None, per_step_cap=None)
    assert list(every["calls"].values()) == np.bincount(kinds[cand], minlength=len(PAIR_KINDS)).tolist()
    assert every["changed"] == (cand & (ver != base)).sum() and every["recitations"] == 0
    assert every["lost"] == {"declined": (truth & cand & ~ver).sum(), "not_candidate": (truth & ~cand & ~base).sum(),
                             "not_proposed": 0, "budget": 0, "count_cap": 0}
    assert every["spend"].sum() == cand.sum()
    never = call_breakdown(_Never(), [4000], budget="B60")
    assert sum(never["calls"].values()) == 0 and never["lost"]["not_proposed"] == (truth & cand & ~base).sum()
    reciting = ConversationConfig(p_base_early=1.0)  # v1's base recites too rarely for one conversation to show it
    recited = generate_conversation(4000, reciting)
    never = call_breakdown(_Never(), [4000], budget="B60", world=reciting)
    assert never["recitations"] == (recited.base.astype(bool) & (recited.pair_kinds() == PAIR_KINDS.index("pm_other"))
                                    ).sum() > 0
    two = call_breakdown(AllRelevant(), [4000], budget=2, per_step_cap=None)
    assert sum(two["calls"].values()) == 2 and two["lost"]["count_cap"] == 0
    first_two = np.zeros_like(cand)
    first_two[tuple(np.argwhere(cand)[:2].T)] = True  # the executor takes candidates in (message, memory) order
    assert sum(two["lost"].values()) == (truth & ~conv.executed(first_two)).sum()


def test_optimal_continuation_skips_spoiled_tests_and_matches_the_dp():
    conv = tiny(verifier_pairs=[(3, 0), (5, 0), (4, 1), (7, 1), (10, 1)])
    env = ConversationPMEnv(world=ConversationConfig(n_prospective=1, n_trigger=1), budget=2)
    env.reset(options={"conversation": conv})
    teacher = ConversationOptimum(budget=2)
    assert teacher.continuation(env) == [(4, 1), (5, 0)]  # the quote first, then the earliest activation
    env = ConversationPMEnv(world=ConversationConfig(n_prospective=1, n_trigger=1), budget=3)
    env.reset(options={"conversation": conv})
    for t in range(4):
        env.step(np.array([int(t == 3), 0], dtype=np.int8))  # a false fire at reply 2 spoils pm1
    assert env.scorecard.spoiled[0] and ConversationOptimum(budget=3).continuation(env) == [(4, 1), (7, 1)]
    assert ConversationOptimum(budget=3).act(env).tolist() == [0, 1]
    for seed, budget, cap in ((4000, 10, 2), (4001, 21, 1), (4002, None, None)):
        c = generate_conversation(seed)
        e = ConversationPMEnv(budget=budget, per_step_cap=cap)
        e.reset(options={"conversation": c})
        plan = ConversationOptimum(budget=budget, per_step_cap=cap).continuation(e)
        m, _ = replay(c, plan, budget=budget, per_step_cap=cap)
        assert m["score"] == pytest.approx(ConversationOptimum(budget=budget, per_step_cap=cap).solve(c).score)


def test_imitation_on_conversations_labels_the_optimum_and_fits_a_34_feature_student(tmp_path, monkeypatch):
    from membudget.agents.imitation import StudentPolicy, dp_demonstrations, fit_bc, fit_dagger
    from membudget.agents.tasks import CONVERSATION

    monkeypatch.setattr(CONVERSATION, "validation_seeds", (3000,))  # validation is not under test here

    demos = dp_demonstrations([2000], 10, task=CONVERSATION)
    env = ConversationPMEnv(budget=10, action_mode="scores")
    obs, _ = env.reset(seed=2000)
    plan = ConversationOptimum(budget=10).continuation(env)  # an optimum: equal to the DP's score (tested above)
    best = ConversationOptimum(budget=10).solve(env.conversation).score
    assert len(demos) == 66 and demos.resources.shape == (66, 6, 34)
    assert sorted(map(tuple, np.argwhere(demos.labels > 0).tolist())) == plan
    assert not (demos.labels > demos.mask).any()
    policy, history = fit_bc([2000], 10, epochs=300, hidden=16, task=CONVERSATION)
    played, done, score = [], False, 0.0
    while not done:
        obs, reward, done, _, info = env.step(policy.predict(obs)[0])
        played += [(int(info["step"]), int(r)) for r in np.flatnonzero(info["queried"])]
        score += reward
    # the student makes the optimum's calls; any extra call is one where the verifier agrees with the base response
    assert set(plan) <= set(played) and score == pytest.approx(best)
    assert policy.net.n_resource_features == 34 and "val_score" in history[0]
    policy.save(tmp_path / "student.npz")
    np.testing.assert_array_equal(StudentPolicy.load(tmp_path / "student.npz").predict(obs)[0], policy.predict(obs)[0])
    dagger, history = fit_dagger([2000], 10, iterations=1, epochs=2, hidden=8, task=CONVERSATION)
    assert [h["env_steps"] for h in history] == [66, 132] and dagger.config["teacher_calls"] == 1 + 66


def test_native_ppo_trains_on_conversations_with_the_same_loop(tmp_path):
    from membudget.agents.per_resource import FlatMLPNet, PerResourceNet, StudentPolicy
    from membudget.agents.ppo import train_ppo
    from membudget.agents.tasks import CONVERSATION

    kw = dict(total_timesteps=2 * 4 * 66, n_envs=4, n_minibatches=2, eval_every=0, eval_seeds=[3000],
              task=CONVERSATION)
    a, ha = train_ppo("B40", seed=2, **kw)
    b, hb = train_ppo("B40", seed=2, **kw)
    env = ConversationPMEnv(budget="B40", action_mode="scores")
    obs, _ = env.reset(seed=4000)
    np.testing.assert_array_equal(a.probabilities(obs), b.probabilities(obs))
    assert ha == [dict(h, wall_clock=g["wall_clock"]) for h, g in zip(hb, ha)]
    assert [h["env_steps"] for h in ha] == [0, 2 * 4 * 66] and set(ha[-1]) == {"env_steps", "wall_clock", "val_score"}
    assert ha[-1]["val_score"] == CONVERSATION.validate(a, "B40", [3000])
    assert a.net.n_resource_features == 34 and a.config["env"] == CONVERSATION.name
    done, spent = False, 0
    while not done:
        action, _ = a.predict(obs)
        assert np.all(action[obs["mask"] == 0] == -1.0)
        obs, _, done, _, info = env.step(action)
        spent += info["cost"]
        assert info["queried"].sum() <= 2
    assert spent == info["episode_metrics"]["realized_cost"] <= env.budget
    flat, _ = train_ppo("B40", seed=2, actor="flat-mlp", **kw)
    assert isinstance(flat.net, FlatMLPNet) and flat.net.n_resource_features == 34
    flat.save(tmp_path / "flat.npz")
    np.testing.assert_array_equal(StudentPolicy.load(tmp_path / "flat.npz").probabilities(obs),
                                  flat.probabilities(obs))
    with pytest.raises(ValueError, match="unit verifier costs"):
        train_ppo("B40", cost_profile="skewed", **kw)
    with pytest.raises(ValueError, match="observe_counts"):
        train_ppo("B40", critic_counts=True, **kw)
    with pytest.raises(ValueError, match="34"):  # a PMWeek-v0 network (27 features) cannot start a conversation run
        train_ppo("B40", init=PerResourceNet(), **kw)
    with pytest.raises(ValueError, match="task must be one of"):
        train_ppo("B40", **dict(kw, task="goodai"))
    again, _ = train_ppo("B40", seed=2, **dict(kw, task="conversation"))
    np.testing.assert_array_equal(again.probabilities(obs), a.probabilities(obs))


class _Reversed(Executor):
    """Tasks finishing in the reverse order (as remote workers may)."""

    def _run(self, fn, items, todo):
        for i in reversed(todo):
            yield i, fn(items[i])


def test_the_study_s_evaluations_do_not_depend_on_the_task_order(monkeypatch):
    from conversation_tiny import SEEDS, tiny_study
    from membudget.studies import conversation as study

    gates = tiny_study(monkeypatch)
    res, intervals, diag = study.evaluate(gates, SEEDS, 500, Executor())
    again, intervals_again, diag_again = study.evaluate(gates, SEEDS, 500, _Reversed())
    assert list(res) == list(again) == study.table_keys() and len(res) == 14
    for key, r in res.items():
        assert set(r) == set(again[key]) and all(np.array_equal(r[m], again[key][m]) for m in r)
    assert intervals == intervals_again and len(intervals) == 12  # every row but AllSemantic's and Static's
    m, _, _ = intervals[("Pacing", "B60")]
    pacing, static = res[("Pacing", "B60")], res[("Static", "B60")]
    assert m == pytest.approx(np.mean(pacing["macro_accuracy"] - static["macro_accuracy"]))
    assert diag.keys() == diag_again.keys() == {"breakdown", "quality", "uncapped", "ppo"}
    assert list(diag["ppo"]) == [("B60", 0), ("B60", 1)] and list(diag["quality"]) == [0.1]
    # Static's B60 threshold without the episode budget: the same proposals, never fewer calls than capped
    uncapped = diag["uncapped"]["B60"]
    assert np.all(uncapped["queries"] >= res[("Static", "B60")]["queries"]) and np.all(uncapped["exhaustion_step"] < 0)
    assert np.array_equal(uncapped["queries"], diag_again["uncapped"]["B60"]["queries"])
    for (b, seed), r in diag["ppo"].items():
        assert np.array_equal(r["macro_accuracy"], diag_again["ppo"][(b, seed)]["macro_accuracy"])
    seed0 = res[("PPO", "B60")]  # the table's PPO row is learner seed 0's rollout
    assert np.array_equal(seed0["macro_accuracy"], diag["ppo"][("B60", 0)]["macro_accuracy"])
    for key, d in diag["breakdown"].items():
        assert np.array_equal(d["spend"], diag_again["breakdown"][key]["spend"]) and d["calls"] == \
            diag_again["breakdown"][key]["calls"]


def test_the_quick_page_is_the_main_table_marked_as_a_smoke_run(monkeypatch):
    from conversation_tiny import SEEDS, tiny_study

    from membudget.envs.conversation import budget_levels
    from membudget.studies import conversation as study

    gates = tiny_study(monkeypatch)
    res, intervals, diag = study.evaluate(gates, SEEDS, 500, Executor(), diagnostics=False)
    assert diag is None and list(res) == study.table_keys()
    page = study.render_quick(res, 620, budget_levels(), 500, 1.0, intervals)
    assert "(smoke run)" in page.splitlines()[0] and "not the study's and carry no verdicts" in page
    assert " met" not in page and "## " not in page  # no verdicts, no diagnostics sections
    assert page.count("\n| B60 | ") == len(res) - 1  # every row but AllSemantic's, at the one budget left
    m, lo, hi = intervals[("Pacing", "B60")]
    assert f"| B60 | Pacing | {res[('Pacing', 'B60')]['macro_accuracy'].mean():.4f} | {m:+.4f} [{lo:+.4f}, {hi:+.4f}]" in page
    from membudget.studies.protocol import machine_line

    assert f"\n{machine_line()}: the learned rows (BC, DAgger, PPO) repeat exactly only on this kind of CPU" in page


def test_ppo_trainings_seed_themselves_from_their_key():
    from membudget.agents.ppo import PPOConfig
    from membudget.studies.conversation import train_task

    settings = PPOConfig(total_timesteps=4 * 66, n_envs=4, n_minibatches=2, eval_every=0, eval_episodes=1)
    fn = functools.partial(train_task, settings)
    items = [("B40", 0), ("B40", 1)]
    forward, backward = Executor().map(fn, items), _Reversed().map(fn, items)
    env = ConversationPMEnv(budget="B40", action_mode="scores")
    obs, _ = env.reset(seed=4000)
    for (a, _), (b, _) in zip(forward, backward):
        np.testing.assert_array_equal(a.probabilities(obs), b.probabilities(obs))
    assert not np.array_equal(forward[0][0].probabilities(obs), forward[1][0].probabilities(obs))


def test_the_study_s_command_line_passes_bad_backend_input_to_make_executor():
    from membudget.studies.conversation import main

    with pytest.raises(ValueError, match="--address needs --backend ray"):
        main(["--address", "auto", "--out", "/nonexistent/page.md"])
    with pytest.raises(SystemExit):
        main(["--backend", "spark"])


def _goodai_by_definition(conv):
    """BudgetPM's seven GoodAI features written out with NumPy, independently of the environment's kernel."""
    T, live = conv.horizon, conv.live()
    out = np.zeros((T + 1, conv.n_resources, 7), dtype=np.float32)
    out[:T, :, 0] = live
    out[:T, :, 1] = live & (conv.test_kind == 1)[None, :]
    out[:T, :, 2] = conv.token_similarity
    out[:T, :, 3] = conv.fuzzy_similarity
    out[:T, :, 4] = np.where(live, np.clip((np.arange(T)[:, None] - conv.stored[None, :]) / T, 0.0, 1.0), 0.0)
    out[:T, :, 5] = conv.repeat_fraction
    out[:T, :, 6] = (live.sum(axis=1) / conv.n_resources)[:, None] * live
    return out


def test_goodai_features_by_hand_and_by_definition():
    f = tiny(verifier_pairs=[]).goodai_features()
    assert f.shape == (13, 2, 7) and f.dtype == np.float32 and not f[12].any() and not f[0].any()
    np.testing.assert_array_equal(f[3, 0], np.float32([1, 0, 0.5, 0.5, 3 / 12, 0, 1]))  # both memories live
    np.testing.assert_array_equal(f[3, 1], np.float32([1, 1, 0, 0, 2 / 12, 0, 1]))
    np.testing.assert_array_equal(f[7, 0], np.zeros(7, np.float32))  # pm1 no longer live
    np.testing.assert_array_equal(f[7, 1], np.float32([1, 1, 0.5, 0.5, 6 / 12, 0, 0.5]))
    for config in (None, ConversationConfig(horizon=120, n_prospective=4, n_trigger=2)):
        for seed in range(20):
            conv = generate_conversation(seed, config)
            assert conv.goodai_features().tobytes() == _goodai_by_definition(conv).tobytes()


def test_config_numbers_keep_the_generator_kernels_argument_types():
    """A ConversationConfig stores each number as the int or float it is checked as: ints given for the
    probabilities (a world without base responses written with 0s) give the generator's kernel the same float
    arguments as the defaults (an int array compiled it anew: seconds on a first reset) and the same
    conversation."""
    from membudget.envs.conversation.world import BASE_PARAMETERS, _kernel_arguments, kernel_ranges

    ints = ConversationConfig(horizon=np.int32(66), lures=2, ordinal=(np.int64(2), 8),
                              **dict.fromkeys(BASE_PARAMETERS, 0))
    floats = ConversationConfig(**dict.fromkeys(BASE_PARAMETERS, 0.0))
    assert ints == floats and type(ints.horizon) is int and type(ints.lures) is float
    assert [a.dtype for a in (*_kernel_arguments(ints), kernel_ranges(ints))] == [np.float64, np.float64, np.int64]
    a, b = generate_conversation(5, ints), generate_conversation(5, floats)
    assert np.array_equal(a.verifier, b.verifier) and np.array_equal(a.message_kind, b.message_kind)


def test_a_conversation_temporal_gate_selects_its_threshold_by_conversation_score():
    from membudget.studies.conversation import ConversationTemporalGate
    from membudget.teachers.conversation import build_conversation_dataset

    data = build_conversation_dataset([2000, 2001, 2002, 2003], ("B20",))
    gate = ConversationTemporalGate(teacher="myopic", budget="B20", n_folds=2, grid=(0.2, 0.5, 0.8)).fit(data)
    assert gate.thresholds_["B20"] in (0.2, 0.5, 0.8) and gate.n_features == 34 + 9
    assert gate.oof_set_f1_.shape == (3,) and np.isfinite(gate.oof_set_f1_).all()   # mean score per threshold
