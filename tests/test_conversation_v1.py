"""ConversationPM-v1: the agent's base response (exact scores of hand-built conversations with base hits,
recitations and false fires, a verified pair's answer replacing the base response), the leave-one-out Outcome label
given the base responses, the exact optimum and its continuation against enumeration, current-greedy, v0 kept as
the earlier world, the calibration, and conversation files with base responses."""

from __future__ import annotations

import itertools
import warnings

import gymnasium as gym
import numpy as np
import pytest

import membudget  # noqa: F401
from membudget.envs.conversation import (WORLD_V0, WORLD_V1, Conversation, ConversationConfig, ConversationPMEnv,
                                         ConversationPMv0Env,
                                         conversation_from_dict, conversation_score, conversation_to_dict,
                                         generate_conversation, load_conversation, save_conversation,
                                         validate_conversation)
from membudget.envs.conversation.world import BASE_PARAMETERS, pair_probabilities
from membudget.envs.pm import EpisodeFormatError
from membudget.teachers.conversation import (ConversationGreedy, ConversationOptimum, reference_rows,
                                             replay)

from conversation_tiny import play, tiny  # noqa: E402

W_ACT = 0.5 / 3  # one activation of the single trigger test of tiny(); the false-fire penalty is 1 x this


def _queried(infos):
    q = np.zeros((len(infos), infos[0]["queried"].size), dtype=bool)
    for t, info in enumerate(infos):
        q[t] = info["queried"]
    return q


def test_the_base_response_scores_without_calls_and_a_verified_answer_replaces_it():
    # the base recites the quote at reply 1 (step 2) and carries it in reply n (step 5), says the response on
    # activations 4 and 7 and on the lure 6; the verifier confirms reply n and activations 4 and 10 only
    conv = tiny(verifier_pairs=[(5, 0), (4, 1), (10, 1)], candidate_pairs=[(2, 0)],
                base_pairs=[(2, 0), (5, 0), (4, 1), (7, 1), (6, 1)])
    rewards, infos = play(conv, [], budget=None, per_step_cap=None)
    assert infos[-1]["episode_metrics"]["score"] == pytest.approx(0.5 * 2 / 3)  # default: the benchmark's accuracy
    rewards, infos = play(conv, [], budget=None, per_step_cap=None, false_fire_penalty=1.0)
    m = infos[-1]["episode_metrics"]
    assert m["pm_accuracy"] == 0.0 and m["tr_accuracy"] == pytest.approx(2 / 3)  # the recitation zeroes pm1
    assert m["false_fires"] == 2 and m["score"] == pytest.approx(0.5 * 2 / 3 - 2 * W_ACT) and m["queries"] == 0
    assert infos[4]["hits"] == infos[4]["base_fires"] == 1 and infos[6]["false_fires"] == infos[6]["base_fires"] == 1
    assert infos[10]["missed"] == 1 and sum(rewards) == pytest.approx(m["score"])
    # verified: the recitation and the lure fire removed, activation 10 added, activation 7 removed (a miss)
    calls = [(2, 0), (6, 1), (7, 1), (10, 1)]
    rewards, infos = play(conv, calls, budget=None, per_step_cap=None)
    m = infos[-1]["episode_metrics"]
    assert m["pm_accuracy"] == 1.0 and m["tr_accuracy"] == pytest.approx(2 / 3) and m["false_fires"] == 0
    assert m["score"] == pytest.approx(0.5 * (1 + 2 / 3)) and m["queries"] == 4
    assert (infos[2]["rejected"], infos[2]["false_fires"], infos[2]["base_fires"]) == (1, 0, 0)
    assert (infos[5]["hits"], infos[5]["base_fires"]) == (1, 1) and rewards[5] == pytest.approx(0.5)
    assert (infos[7]["hits"], infos[7]["rejected"], infos[7]["missed"]) == (0, 1, 1)
    assert (infos[10]["hits"], infos[10]["base_fires"], infos[10]["rejected"]) == (1, 0, 0)
    assert sum(rewards) == pytest.approx(m["score"])
    one_pass = conversation_score(conv, _queried(infos), 1.0)
    assert one_pass == pytest.approx({k: m[k] for k in one_pass})


@pytest.mark.parametrize("seed", [4000, 4001, 4002])
def test_rewards_sum_to_the_one_pass_score_of_the_calls_made(seed):
    env = ConversationPMEnv(budget="B40")
    obs, _ = env.reset(seed=seed)
    assert env.conversation.base.any()  # v1 conversations have base responses
    rng = np.random.default_rng(seed)
    total, infos, done = 0.0, [], False
    while not done:
        obs, reward, done, _, info = env.step(rng.integers(0, 2, 6).astype(np.int8))
        total += reward
        infos.append(info)
        fired = info["hits"] + info["false_fires"]
        assert 0 <= info["base_fires"] <= fired and info["rejected"] <= info["cost"]
    m = infos[-1]["episode_metrics"]
    one_pass = conversation_score(env.conversation, _queried(infos), env.false_fire_penalty)
    assert one_pass == pytest.approx({k: m[k] for k in one_pass}) and total == pytest.approx(m["score"])


def test_v1_scores_by_the_benchmark_s_accuracy_and_v0_keeps_its_false_fire_penalty():
    conv = tiny(verifier_pairs=[(4, 1), (7, 1), (10, 1)], base_pairs=[(6, 1)])  # the base fires on the lure 6
    for env, penalty in ((ConversationPMEnv(world=ConversationConfig(n_prospective=1, n_trigger=1), budget=None),
                          0.0),
                         (ConversationPMv0Env(world=ConversationConfig(n_prospective=1, n_trigger=1), budget=None),
                          1.0)):
        env.reset(options={"conversation": conv})
        total = sum(env.step(np.zeros(2, dtype=np.int8))[1] for _ in range(conv.horizon))
        assert total == pytest.approx(0.0 - penalty * W_ACT)  # nothing hit, one base false fire


@pytest.mark.parametrize("world, env_cls", [(None, ConversationPMEnv), (WORLD_V0, ConversationPMv0Env)])
def test_label_datasets_score_as_their_environment_does(world, env_cls):
    from membudget.teachers.conversation import build_conversation_dataset

    meta = build_conversation_dataset([2000], ("B20",), world=world).meta
    assert meta["env"] == f"membudget/{env_cls.env_name}"
    assert meta["false_fire_penalty"] == env_cls.default_false_fire_penalty


def test_the_outcome_label_is_the_leave_one_out_effect_given_the_base_responses():
    conv = tiny(verifier_pairs=[(5, 0), (4, 1), (7, 1), (10, 1)], base_pairs=[(3, 0), (4, 1), (6, 1)])
    rows = {(t, r): (out, due) for t, r, _, out, due in reference_rows(conv, false_fire_penalty=1.0)}
    assert rows[(3, 0)] == (1, 0)  # the call removes a recitation before reply n: the test survives
    assert rows[(4, 1)] == (0, 1)  # due, but the base response already says it
    assert rows[(6, 1)] == (1, 0)  # nothing due; the call removes the base response's false fire on the lure
    assert rows[(5, 0)] == rows[(7, 1)] == rows[(10, 1)] == (1, 1)
    # by default the effect on the benchmark's macro accuracy (BudgetPM's task score)
    benchmark = {(t, r): out for t, r, _, out, _ in reference_rows(conv)}
    assert benchmark[(6, 1)] == 0 and benchmark[(3, 0)] == 1  # a trigger false fire costs nothing; a quote does


def _random_conversation(rng):
    """Two prospective tests and a trigger test over 10 messages, random candidates, verifier and base."""
    horizon = 10
    tok = np.zeros((horizon, 3))
    live_from, n = np.array([1, 2, 0]), np.array([rng.integers(2, 5), rng.integers(2, 6), 0])
    live_until = np.array([live_from[0] + n[0] - 1, live_from[1] + n[1] - 1, horizon - 1])
    fires = ((int(live_until[0]),), (int(live_until[1]),),
             tuple(sorted(rng.choice(np.arange(1, horizon), 3, replace=False).tolist())))
    ver, base = np.zeros((horizon, 3), np.int8), np.zeros((horizon, 3), np.int8)
    for j in range(3):
        for t in range(live_from[j], live_until[j] + 1):
            tok[t, j] = 0.5 if (j < 2 and t == fires[j][0]) or rng.random() < 0.5 else 0.01
            ver[t, j] = tok[t, j] >= 0.05 and rng.random() < 0.5
            base[t, j] = rng.random() < 0.35
    conv = Conversation(horizon=horizon, gate=0.05, message_kind=np.zeros(horizon, np.int64),
                        message_test=np.full(horizon, -1), test_ids=("pm1", "pm2", "tr1"),
                        test_kind=np.array([0, 0, 1]), stored=np.zeros(3, np.int64), live_from=live_from,
                        live_until=live_until, ordinal=np.array([n[0], n[1], 0]), fires=fires, token_similarity=tok,
                        fuzzy_similarity=tok.copy(), repeat_fraction=np.zeros((horizon, 3)), verifier=ver, base=base)
    validate_conversation(conv)
    return conv


def _best_by_enumeration(conv, prefix, start, budget, cap, penalty):
    """The best score over every completion (calls at messages >= start) of the calls ``prefix``."""
    pairs = [tuple(p) for p in np.argwhere(conv.candidates()).tolist() if p[0] >= start]
    best = -np.inf
    for k in range(min(budget, len(pairs)) + 1):
        for sub in itertools.combinations(pairs, k):
            steps = [t for t, _ in sub]
            if cap is not None and max((steps.count(t) for t in steps), default=0) > cap:
                continue
            q = np.zeros(conv.candidates().shape, dtype=bool)
            for t, r in (*prefix, *sub):
                q[t, r] = True
            best = max(best, conversation_score(conv, q, penalty)["score"])
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_optimum_and_its_continuation_equal_enumeration_with_base_responses(seed):
    rng = np.random.default_rng(seed)
    for i in range(12):
        conv = _random_conversation(rng)
        budget, cap, penalty = int(rng.integers(1, 5)), [1, 2, None][i % 3], [1.0, 0.0, 2.5][i % 3]
        world = ConversationConfig(n_prospective=2, n_trigger=1)
        opt = ConversationOptimum(budget=budget, per_step_cap=cap, false_fire_penalty=penalty).solve(conv)
        assert opt.score == pytest.approx(_best_by_enumeration(conv, (), 0, budget, cap, penalty))
        greedy = ConversationGreedy(budget=budget, per_step_cap=cap, false_fire_penalty=penalty).solve(conv)
        assert greedy.score <= opt.score + 1e-12 and opt.cost <= budget
        # from a mid-conversation state reached by calling every candidate of the first messages
        env = ConversationPMEnv(world=world, budget=budget + 1, per_step_cap=cap, false_fire_penalty=penalty)
        obs, _ = env.reset(options={"conversation": conv})
        prefix = []
        for t in range(4):
            obs, _, _, _, info = env.step(obs["mask"])
            prefix += [(t, int(r)) for r in np.flatnonzero(info["queried"])]
        plan = ConversationOptimum().continuation(env)
        left = int(env.core.remaining[0])
        m, _ = replay(conv, prefix + plan, budget=budget + 1, per_step_cap=cap, false_fire_penalty=penalty)
        assert m["score"] == pytest.approx(_best_by_enumeration(conv, prefix, 4, left, cap, penalty))


def test_greedy_values_a_call_by_what_it_changes_in_the_base_response():
    # the base response already carries reply n and activation 4; only activation 7 needs the verifier
    conv = tiny(verifier_pairs=[(5, 0), (4, 1), (7, 1)], base_pairs=[(5, 0), (4, 1)])
    greedy = ConversationGreedy(budget=1, per_step_cap=1).solve(conv)
    assert greedy.schedule == [(7, 1)] and greedy.macro_accuracy == pytest.approx(0.5 * (1 + 2 / 3))
    assert ConversationOptimum(budget=1, per_step_cap=1).solve(conv).schedule == [(7, 1)]


def test_the_optimum_removes_every_recitation_or_gives_the_test_up():
    # two recitations before reply n (steps 2 and 3, both removable), the quote missing from reply n
    conv = tiny(verifier_pairs=[(5, 0)], candidate_pairs=[(2, 0)], base_pairs=[(2, 0), (3, 0), (4, 1), (7, 1)])
    assert ConversationOptimum(budget=2, per_step_cap=1, false_fire_penalty=0.0).solve(conv).macro_accuracy == \
        pytest.approx(0.5 * 2 / 3)  # two of the three calls: the test cannot be saved
    three = ConversationOptimum(budget=3, per_step_cap=1, false_fire_penalty=0.0).solve(conv)
    assert three.schedule == [(2, 0), (3, 0), (5, 0)] and three.macro_accuracy == pytest.approx(0.5 * (1 + 2 / 3))


def test_v0_is_kept_as_the_earlier_world():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        v0 = gym.make("membudget/ConversationPM-v0").unwrapped
    assert any("out of date" in str(w.message) for w in caught)  # Gymnasium points at v1
    v1 = gym.make("membudget/ConversationPM-v1").unwrapped
    assert v0.world == WORLD_V0 and v1.world == WORLD_V1 == ConversationConfig() and v0.budget == v1.budget == 31
    assert all(getattr(WORLD_V0, name) == 0 for name in BASE_PARAMETERS)
    v0.reset(seed=4000)
    v1.reset(seed=4000)
    a, b = v0.conversation, v1.conversation
    assert not a.base.any() and b.base.any()
    for name in ("message_kind", "message_test", "live_from", "live_until", "token_similarity", "repeat_fraction"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name  # the base responses are drawn last
    from membudget.baselines.pm import AllRelevant
    from membudget.envs.conversation.rollout import rollout

    every = rollout(AllRelevant(), range(4000, 4030), budget=None, per_step_cap=None, world=WORLD_V0)
    assert round(float(every["macro_accuracy"].mean()), 4) == 0.9519  # v0's published All-semantic figure
    best = [ConversationOptimum(budget=31).solve(generate_conversation(s, WORLD_V0)) for s in range(4000, 4030)]
    assert round(float(np.mean([b.macro_accuracy for b in best])), 4) == 0.9556  # and its hindsight optimum at B60
    assert round(float(np.mean([b.cost for b in best])), 1) == 11.2


def test_the_learners_task_plays_v1():
    from membudget.agents.tasks import CONVERSATION

    assert CONVERSATION.make_env("B60").world == WORLD_V1


def test_the_draws_follow_the_stated_probabilities():
    for seed in (2000, 4000):
        conv = generate_conversation(seed)
        p_ver, p_base = pair_probabilities(conv, WORLD_V1)
        assert not (conv.verifier.astype(bool) & (p_ver == 0)).any()
        assert not (conv.base.astype(bool) & (p_base == 0)).any()
    only_due = ConversationConfig(**{name: 0.0 for name in BASE_PARAMETERS} | {"p_base_due": 1.0})
    conv = generate_conversation(2000, only_due)
    due = conv.truth() & (conv.test_kind == 0)[None, :]
    assert np.array_equal(conv.base.astype(bool), due) and np.array_equal(pair_probabilities(conv, only_due)[1], due)


def test_the_calibration_fits_the_world_and_meets_its_targets():
    from membudget.envs.conversation.calibration import TARGETS, calibrate, fit, report

    fitted = fit()
    assert {k: getattr(WORLD_V1, k) for k in fitted} == pytest.approx(fitted, rel=0.015)
    stats = calibrate()
    for k, (_, ok) in TARGETS.items():
        assert ok(stats.get(k + "_expected", stats[k])), k
    assert " NO" not in report()


def test_the_calibration_command_line(capsys):
    from membudget.envs.conversation import __main__ as cli

    cli.main(["calibrate", "--world", "v0", "--n-conversations", "2"])
    out = capsys.readouterr().out
    assert out.startswith("ConversationPM-v0 world on conversations 2000-2001") and "base_tr_accuracy" in out
    with pytest.raises(SystemExit):
        cli.main(["calibrate", "--world", "v2"])


def test_files_keep_the_base_response_and_read_the_earlier_format(tmp_path):
    conv = generate_conversation(4000)
    save_conversation(conv, tmp_path / "c.json")
    assert np.array_equal(load_conversation(tmp_path / "c.json").base, conv.base)
    old = conversation_to_dict(generate_conversation(4000, WORLD_V0))
    old.pop("base")
    old["format"] = "membudget.conversation-episode/1"
    assert not conversation_from_dict(old).base.any()
    bad = conversation_to_dict(conv)
    bad["base"][0][0] = 1  # message 0: no memory is live yet
    with pytest.raises(EpisodeFormatError, match=r"base\[0\]\[0\]: the base response executes only live memories"):
        conversation_from_dict(bad)
    bad["base"][0][0] = 2
    with pytest.raises(EpisodeFormatError, match=r"base\[0\]\[0\]"):
        conversation_from_dict(bad)
    bad = conversation_to_dict(conv)
    bad.pop("base")
    with pytest.raises(EpisodeFormatError, match="missing field 'base'"):
        conversation_from_dict(bad)


def test_bad_base_parameters_are_refused():
    for name in BASE_PARAMETERS:
        with pytest.raises(ValueError, match=name):
            ConversationConfig(**{name: 1.5})
    with pytest.raises(ValueError, match="p_base_due"):
        ConversationConfig(p_base_due=float("nan"))


def test_the_gates_only_page_states_each_goal_with_its_measured_figure(monkeypatch):
    from membudget.studies import conversation as study
    from membudget.studies.execution import Executor

    monkeypatch.setattr(study, "DEV_SEEDS", (2000, 2001, 2002, 2003))  # the labels and gates; not under test here
    monkeypatch.setattr(study, "CEILING_SEEDS", 3)
    seeds = (4000, 4001)
    levels = study.budget_levels()
    data = study.build_conversation_dataset(study.DEV_SEEDS, study.CALIBRATED)
    gates = study.fit_gates_only(data, levels)
    res, intervals, _ = study.evaluate(gates, seeds, 200, Executor(), diagnostics=False,
                                       keys=study.gates_only_keys())
    assert list(res) == study.gates_only_keys() and len(res) == 1 + 7 * len(study.GATES_ONLY)
    diag = study.gates_diagnostics(gates, seeds)
    uncapped = diag["uncapped"]
    page = study.render_gates(res, data, levels, gates, 200, 1.0, intervals, diag, list(seeds))
    assert page.startswith("# ConversationPM-v1") and "## Why, measured" in page
    over = int(np.sum(uncapped["B60"]["queries"] > levels["B60"]))
    assert f"{over}/{len(seeds)} conversations propose more than the {levels['B60']} calls of B60" in page
    optimum = np.mean([ConversationOptimum(budget=31).solve(generate_conversation(s)).macro_accuracy for s in seeds])
    verdict = "met" if optimum >= 0.975 else "not met"
    assert f"| hindsight optimum at B60 (the ceiling admits the published figures) | >= 0.975 | {optimum:.4f} | " \
           f"{verdict} |" in page
    static = res[("Static", "B60")]["macro_accuracy"].mean()
    assert f"| Static macro accuracy at B60 | 0.946 +- 0.02 | {static:.4f} | " \
           f"{'met' if abs(static - 0.946) <= 0.02 else 'not met'} |" in page
    differ = int(np.sum(data.outcome != data.due))
    assert f"| Outcome and Due labels disagree (development rows) | >= 10% | {differ}/{len(data)} = " in page
    for goal in ("Pacing at B80", "Static - Due gate at B80", "Static pm accuracy at B60", "Static tr accuracy at B60",
                 "Static macro accuracy at B30", "Static macro accuracy at B70"):
        assert f"| {goal}" in page
    # another block than the analysis conversations: named as such, the command that makes it, the goals' block
    assert "## BudgetPM's GoodAI figures on conversations 4000-4001" in page
    assert "The issue's goals are judged on the analysis conversations 4000-4029" in page
    assert "command: python -m membudget.evaluate conversation --gates-only --conversations 4000-4001 " \
           "--resamples 200   (" in page
    assert "conversations 4000-4001 (some of the analysis conversations, 4000-4029)" in page
    monkeypatch.setattr(study, "ANALYSIS_SEEDS", seeds)  # the same conversations as the analysis block
    page = study.render_gates(res, data, levels, gates, study.DEFAULT_RESAMPLES, 1.0, intervals, diag, list(seeds))
    assert "## Reproduction of BudgetPM's GoodAI figures (issue #35's goals)" in page
    assert "command: python -m membudget.evaluate conversation --gates-only   (" in page
    assert "Evaluation on the analysis conversations 4000-4001;" in page
    from membudget.studies.protocol import machine_line

    assert page.endswith(f" s)\n\n{machine_line()}\n")  # the gates-only page: no learned rows, no CPU caveat


def test_a_regenerated_page_keeps_v0_s_study_below(tmp_path):
    from membudget.studies.conversation import V0_MARKER, keep_v0

    path = tmp_path / "conversation.md"
    assert keep_v0("# v1\n", str(path)) == "# v1\n"  # no page yet
    path.write_text("# ConversationPM-v0: study\n\ntext\n\n## Why\n")
    once = keep_v0("# ConversationPM-v1\n", str(path))
    assert once == f"# ConversationPM-v1\n\n{V0_MARKER}\n\n## ConversationPM-v0: study\n\ntext\n\n### Why\n"
    path.write_text(once)
    assert keep_v0("# ConversationPM-v1 again\n", str(path)) == once.replace("v1\n", "v1 again\n", 1)
    path.write_text("# something else\n")
    assert keep_v0("# v1\n", str(path)) == "# v1\n"


def test_the_study_s_command_line_refuses_two_runs_at_once():
    from membudget.studies.conversation import main

    with pytest.raises(SystemExit):
        main(["--quick", "--gates-only", "--out", "/nonexistent/page.md"])


@pytest.mark.parametrize("argv, message", [
    (["--conversations", "6000-6009"], "--conversations goes with --gates-only"),
    (["--gates-only", "--conversations", "2010-2020"], "the development conversations 2000-2011 fit the gates"),
    (["--gates-only", "--conversations", "6000-"], "'6000-' is neither a number nor a range"),
    (["--gates-only", "--conversations", "6000,6000"], "names no number or one twice"),
])
def test_the_gates_only_block_is_checked_before_any_work(capsys, argv, message):
    from membudget.studies.conversation import main

    with pytest.raises(SystemExit) as e:
        main([*argv, "--out", "/nonexistent/page.md"])
    assert e.value.code == 2 and message in capsys.readouterr().err


# --------------------------------------------------------------------------- the informed optimum (an upper bound)
def _redrawn(conv, world, rng):
    """``conv`` with its verifier's answers and base responses drawn again from ``world``'s rates given the rest."""
    import dataclasses

    p_ver, p_base = pair_probabilities(conv, world)
    return dataclasses.replace(conv, verifier=(rng.random(p_ver.shape) < p_ver).astype(np.int8),
                               base=(rng.random(p_base.shape) < p_base).astype(np.int8))


def _mean_score(conv, world, n, act, budget, per_step_cap, seed=0):
    """Mean and standard error of the score of ``act(env)`` over ``n`` redraws of ``conv``'s verifier and base."""
    rng = np.random.default_rng(seed)
    scores = []
    env = ConversationPMEnv(world=world, budget=budget, per_step_cap=per_step_cap)
    for _ in range(n):
        env.reset(options={"conversation": _redrawn(conv, world, rng)})
        done = False
        while not done:
            _, _, done, _, info = env.step(act(env))
        scores.append(info["episode_metrics"]["score"])
    return float(np.mean(scores)), float(np.std(scores) / np.sqrt(n))


def _unconstrained_closed_form(conv, world, penalty=0.0):
    """With no budget and no cap every call stands alone: each pair takes the better of the verifier's and the base
    response's execution probability (a prospective test: the product over its replies)."""
    p_ver, p_base = pair_probabilities(conv, world)
    truth, live, cand = conv.truth(), conv.live(), conv.candidates()
    is_pm = conv.test_kind == 0
    w_act = 0.5 / (3 * int((~is_pm).sum()))
    w_pm, pen = 0.5 / int(is_pm.sum()), penalty * w_act
    hi, lo = np.where(cand, np.maximum(p_ver, p_base), p_base), np.where(cand, np.minimum(p_ver, p_base), p_base)
    total = 0.0
    for t, r in np.argwhere(live).tolist():
        if not is_pm[r]:
            total += w_act * hi[t, r] if truth[t, r] else -pen * lo[t, r]
    for j in np.flatnonzero(is_pm).tolist():
        due = conv.fires[j][0]
        early = range(int(conv.live_from[j]), due)
        total += w_pm * np.prod([1 - lo[k, j] for k in early]) * hi[due, j] - pen * sum(lo[k, j] for k in early)
    return total


@pytest.mark.parametrize("penalty", [0.0, 1.0])
def test_the_informed_optimum_without_budget_or_cap_is_the_closed_form(penalty):
    from membudget.teachers.conversation import InformedOptimum

    small = ConversationConfig(n_prospective=1, n_trigger=1)
    for conv, world in ((tiny([]), small), (generate_conversation(4000), WORLD_V1)):
        io = InformedOptimum(budget=None, per_step_cap=None, false_fire_penalty=penalty, world=world)
        assert io.value(conv) == pytest.approx(_unconstrained_closed_form(conv, world, penalty), abs=1e-12)


def test_the_informed_optimum_s_policy_scores_its_value_and_bounds_other_policies():
    """Played in the environment (its own scoring) over redraws of the verifier and the base response, the informed
    policy's mean score is its value, and policies that see less (here: the first candidates, and the best single
    call) score no more."""
    from membudget.teachers.conversation import InformedOptimum

    small = ConversationConfig(n_prospective=1, n_trigger=1)
    conv = tiny([])
    for budget in (1, 2):
        io = InformedOptimum(budget=budget, per_step_cap=2, world=small)
        tables = io.tables(conv)
        value = io.value(conv)
        mean, se = _mean_score(conv, small, 1500, lambda env: io.act(env, tables), budget, 2)
        assert abs(mean - value) < 4 * se + 1e-9
        for t, r in [(3, 0), (4, 1), (5, 0), (6, 1), (7, 1), (10, 1)]:  # every schedule of one call
            def one(env, t=t, r=r):
                a = np.zeros(2, dtype=np.int8)
                a[r] = int(env.unwrapped.core.t[0] == t)
                return a
            m, s = _mean_score(conv, small, 400, one, budget, 2, seed=1)
            assert m < value + 4 * s
    none = InformedOptimum(budget=1, per_step_cap=2, world=small)
    values = [InformedOptimum(budget=b, per_step_cap=2, world=small).value(conv) for b in (1, 2, 3, None)]
    assert values == sorted(values) and values[0] == none.value(conv)


def test_the_informed_optimum_lies_between_the_online_gates_and_the_hindsight_optimum():
    from membudget.teachers.conversation import InformedOptimum

    conv = generate_conversation(4001)
    io = InformedOptimum(budget=10, per_step_cap=2)
    value = io.value(conv)
    mean, se = _mean_score(conv, WORLD_V1, 200, lambda env: env.unwrapped.conversation.candidates()[
        int(env.unwrapped.core.t[0])].astype(np.int8), 10, 2)  # verify the candidates first come
    assert mean < value + 4 * se
    rng = np.random.default_rng(2)
    optimum = np.mean([ConversationOptimum(budget=10).solve(_redrawn(conv, WORLD_V1, rng)).score for _ in range(100)])
    assert value < optimum


def test_the_informed_optimum_refuses_bad_input():
    from membudget.teachers.conversation import InformedOptimum

    conv = generate_conversation(4000)
    with pytest.raises(TypeError, match="world"):
        InformedOptimum(budget=10, world="v1").value(conv)
    with pytest.raises(ValueError, match="budget"):
        InformedOptimum(budget=0).value(conv)
    from membudget.teachers import conversation as teachers

    with pytest.MonkeyPatch.context() as m:  # its states double with each prospective test: a cap, not a hang
        m.setattr(teachers, "MAX_INFORMED_TESTS", 2)
        with pytest.raises(ValueError, match="at most 2 prospective tests"):
            InformedOptimum(budget=10).value(conv)
    env = ConversationPMEnv(budget=12)
    env.reset(seed=4000)
    with pytest.raises(ValueError, match="budget, per-step cap"):
        InformedOptimum(budget=10).act(env)
