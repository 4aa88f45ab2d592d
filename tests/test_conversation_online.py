"""The ConversationPM posterior sampler and online planner (membudget.teachers.conversation_online)."""

from __future__ import annotations

import dataclasses
import math

import numba
import numpy as np
import pytest
from scipy import stats

from membudget.envs.conversation import WORLD_V0, ConversationConfig, ConversationPMEnv, generate_conversation
from membudget.envs.conversation.env import N_FEATURES
from membudget.envs.conversation.world import PROSPECTIVE, _draw, _kernel_arguments, kernel_ranges
from membudget.teachers.conversation import InformedOptimum
from membudget.teachers.conversation_online import (ConversationPlanner, ConversationPosterior, ConversationView,
                                                    trigger_densities)

TINY = ConversationConfig(horizon=16, n_prospective=1, n_trigger=1, ordinal=(2, 3), quote_gap=(1, 2),
                          trigger_span=(4, 6), lures=1.0)


def view_at(conv, t, called=None):
    return ConversationView.from_features(conv.goodai_features()[:t + 1], horizon=conv.horizon,
                                          n_prospective=int(np.sum(conv.test_kind == PROSPECTIVE)), called=called)


def discrete_view(conv, t):
    """The view's discrete facts straight from the conversation's hidden fields (an independent statement)."""
    started = conv.live_from <= t
    ended = started & (conv.live_until < t)
    is_pm = conv.test_kind == PROSPECTIVE
    return (started, ended, np.where(started, conv.stored, -1), np.where(started, conv.live_from, -1),
            np.where(ended, conv.live_until, -1), np.where(started & is_pm, conv.ordinal, 0))


def test_the_view_is_what_the_observations_carry():
    """The view built from the observations an agent receives (their last seven columns) holds each started test's
    stored step, live span and n exactly."""
    for seed in (4000, 4001, 4002):
        env = ConversationPMEnv(budget="B60")
        obs, _ = env.reset(seed=seed)
        conv, seen = env.unwrapped.conversation, []
        for t in range(conv.horizon):
            seen.append(obs["resources"][:, N_FEATURES - 7:])
            view = ConversationView.from_features(np.stack(seen), horizon=conv.horizon, n_prospective=3)
            got = (view.started, view.ended, view.stored, view.live_from, view.live_until, view.ordinal)
            for a, b in zip(got, discrete_view(conv, t)):
                np.testing.assert_array_equal(a, b)
            obs, *_ = env.step(env.action_space.sample() * 0)


@numba.njit(cache=True)
def _integrals(n, p_overlap):
    """Midpoint-rule integrals of the four densities over the unit cube, ``n`` points per side."""
    out = np.zeros(4)
    for a in range(n):
        for b in range(n):
            for c in range(n):
                d = trigger_densities((a + 0.5) / n, (b + 0.5) / n, (c + 0.5) / n, p_overlap)
                for k in range(4):
                    out[k] += d[k]
    return out / n ** 3


def test_trigger_densities_are_the_generators():
    """Each density integrates to 1 over the feature cube, and every live trigger pair of generated conversations
    has a positive density under its true kind."""
    np.testing.assert_allclose(_integrals(400, 0.28), 1.0, atol=0.01)
    n = 0
    for seed in range(2000, 2012):
        conv = generate_conversation(seed)
        kinds = conv.pair_kinds()
        truth, live = conv.truth(), conv.live()
        for t, j in np.argwhere(live & (conv.test_kind != PROSPECTIVE)[None, :]).tolist():
            d = trigger_densities(float(np.float32(conv.token_similarity[t, j])),
                                  float(np.float32(conv.fuzzy_similarity[t, j])),
                                  float(np.float32(conv.repeat_fraction[t, j])), 0.28)
            if truth[t, j]:
                k = 0 if t == conv.fires[j][0] else 1
            else:
                k = 2 if kinds[t, j] == 4 else 3
            assert d[k] > 0, (seed, t, j, k)
            n += 1
    assert n > 500


def _weighted_draws(sampler, view, n, seed):
    return sampler.sample(view, n, np.random.default_rng(seed))


def test_draws_with_nothing_observed_have_the_generators_marginals():
    """At message 0 nothing is live: the draws' placements, spans, n and lure counts against the generator's
    (two-sample chi-square per statistic)."""
    n = 3000
    conv = generate_conversation(7)
    draws = _weighted_draws(ConversationPosterior(n_particles=n).fit(), view_at(conv, 0), n, 0)
    assert draws.ess == pytest.approx(n)  # no observation: every particle weighs the same
    ref = [generate_conversation(s) for s in range(100_000, 100_000 + n)]
    stats_a = {"pm stored": draws.stored[:, 0], "pm n": draws.ordinal[:, 1], "pm due": draws.fires[:, 2, 0],
               "tr setup": draws.stored[:, 3], "tr span": draws.fires[:, 4, 2] - draws.stored[:, 4],
               "tr first": draws.fires[:, 5, 0] - draws.stored[:, 5], "lures": draws.lure[:, :, 3].sum(axis=1)}
    stats_b = {"pm stored": [c.stored[0] for c in ref], "pm n": [c.ordinal[1] for c in ref],
               "pm due": [c.fires[2][0] for c in ref], "tr setup": [c.stored[3] for c in ref],
               "tr span": [c.fires[4][2] - c.stored[4] for c in ref],
               "tr first": [c.fires[5][0] - c.stored[5] for c in ref],
               "lures": [int(((c.message_kind == 6) & (c.message_test == 3)).sum()) for c in ref]}
    from tests.test_posterior import chi2_pvalue

    p = {k: chi2_pvalue(list(stats_a[k]), list(stats_b[k])) for k in stats_a}
    assert min(p.values()) > 1e-3, p


def _agrees(draws, i, view, conv, world):
    """Whether draw ``i`` reproduces the view and gives every observed trigger feature a positive density."""
    R, t = conv.n_resources, view.t
    n_pm = world.n_prospective
    for j in range(R):
        lf, lu = draws.live_from[i, j], draws.live_until[i, j]
        if view.started[j]:
            if (draws.stored[i, j], lf) != (view.stored[j], view.live_from[j]):
                return False
            if view.ended[j] != (lu < t) or (view.ended[j] and lu != view.live_until[j]):
                return False
            if j < n_pm and draws.ordinal[i, j] != view.ordinal[j]:
                return False
        elif lf <= t:
            return False
        if j >= n_pm:
            for tau in range(max(lf, 0), min(lu, t) + 1):
                d = trigger_densities(view.tok[tau, j], view.fuzzy[tau, j], view.rep[tau, j], world.p_overlap)
                fires = list(draws.fires[i, j])
                k = (0 if fires.index(tau) == 0 else 1) if tau in fires else (2 if draws.lure[i, tau, j] else 3)
                if d[k] <= 0:
                    return False
    return True


@pytest.mark.parametrize("world", [ConversationConfig(), WORLD_V0], ids=["v1", "v0"])
def test_every_draw_agrees_with_the_view(world):
    sampler = ConversationPosterior(world=world, n_particles=64).fit()
    for seed in (4000, 4003, 4007):
        conv = generate_conversation(seed, world)
        for t in (5, 20, 40, 65):
            view = view_at(conv, t)
            particles = sampler.weighted(view, seed + t)
            alive = np.flatnonzero(particles.weights > 0)
            assert alive.size > 0
            assert all(_agrees(particles, i, view, conv, world) for i in alive)
            # the truth is among the possibilities: the true conversation's kinds give the features positive density
            truth = [min(f) for f in conv.fires]
            assert all(conv.live_from[j] > t or conv.stored[j] >= 0 for j in range(conv.n_resources)), truth


@numba.njit(cache=True)
def _oracle_kernel(rng, n, T, ranges, probs, base_probs, started, ended, stored, live_from, live_until, ordinal, t,
                   tok, fuzzy, rep, p_overlap):
    """``n`` draws of the generator's own kernel (one prospective, one trigger test); per draw whose discrete facts
    are the view's: (activations, lure bit set, quote step, reply-n step) and the observed features' log density
    under its pair kinds."""
    keys = np.zeros((n, 6), dtype=np.int64)
    logw = np.zeros(n)
    m = 0
    for _ in range(n):
        ok, kind, owner, st, live, ordn, fires, _tok, _fz, _rp, _ver, _base = _draw(rng, T, 1, 1, ranges, probs,
                                                                                    base_probs)
        if not ok:
            continue
        match = True
        for j in range(2):
            s_j = live[j, 0] <= t
            e_j = s_j and live[j, 1] < t
            if s_j != started[j] or e_j != ended[j]:
                match = False
            elif s_j and (st[j] != stored[j] or live[j, 0] != live_from[j] or (e_j and live[j, 1] != live_until[j])
                          or (j == 0 and ordn[0] != ordinal[0])):
                match = False
        if not match:
            continue
        lw, lures = 0.0, 0
        for tau in range(live[1, 0], live[1, 1] + 1):
            is_lure = kind[tau] == 6 and owner[tau] == 1
            if is_lure:
                lures |= 1 << tau
            if tau > t:
                continue
            d = trigger_densities(tok[tau], fuzzy[tau], rep[tau], p_overlap)
            k = 3
            if tau == fires[1, 0]:
                k = 0
            elif tau == fires[1, 1] or tau == fires[1, 2]:
                k = 1
            elif is_lure:
                k = 2
            lw += math.log(d[k]) if d[k] > 0 else -np.inf
        if np.isinf(lw):
            continue
        keys[m, 0], keys[m, 1], keys[m, 2], keys[m, 3] = fires[1, 0], fires[1, 1], fires[1, 2], lures
        keys[m, 4], keys[m, 5] = st[0], fires[0, 0]
        logw[m] = lw
        m += 1
    return keys[:m], logw[:m]


def _oracle(view, world, n, seed):
    """The exact posterior by likelihood weighting of the generator's own draws (its kernel): each conversation
    drawn from the prior is kept when its discrete facts are the view's and weighted by the observed features'
    density under its pair kinds. Keys: (activations, lures, quote step, (reply-n step,))."""
    ranges = kernel_ranges(world)
    probs, base_probs = _kernel_arguments(world)
    keys, logw = _oracle_kernel(np.random.default_rng(seed), n, world.horizon, ranges, probs, base_probs,
                                view.started, view.ended, view.stored, view.live_from, view.live_until, view.ordinal,
                                view.t, view.tok[:, 1].copy(), view.fuzzy[:, 1].copy(), view.rep[:, 1].copy(),
                                world.p_overlap)
    w = np.exp(logw - logw.max())
    out = [((int(a), int(b), int(c)), tuple(i for i in range(world.horizon) if (lures >> i) & 1), int(q), (int(d),))
           for a, b, c, lures, q, d in keys.tolist()]
    return out, w / w.sum()


def _two_sample_p(keys, w, got):
    """Chi-square two-sample test of the draws ``got`` against the weighted exact sample ``(keys, w)``, the
    weighted one counted at its effective size: categories in decreasing exact probability (an order independent
    of the draws), pooled until each bin expects 5 in both, the draws' categories the exact sample lacks in the
    last bin."""
    exact = {}
    for k, x in zip(keys, w):
        exact[k] = exact.get(k, 0.0) + x
    ess = 1.0 / np.sum(np.asarray(w) ** 2)
    counts = {}
    for k in got:
        counts[k] = counts.get(k, 0) + 1
    scale = min(ess, len(got))
    bins, acc = [], [0.0, 0.0]
    for k in sorted(exact, key=lambda k: -exact[k]):
        acc = [acc[0] + exact[k], acc[1] + counts.pop(k, 0)]
        if acc[0] * scale >= 5:
            bins.append(acc)
            acc = [0.0, 0.0]
    acc[1] += sum(counts.values())
    bins[-1] = [bins[-1][0] + acc[0], bins[-1][1] + acc[1]]
    table = np.array([[b[0] * ess for b in bins], [b[1] for b in bins]])
    return 1.0 if len(bins) < 2 else float(stats.chi2_contingency(table, correction=False)[1])


@pytest.mark.slow
@pytest.mark.parametrize("seed,t", [(5, 7), (19, 6), (12, 9)])
def test_posterior_on_a_tiny_world_matches_the_exact_one(seed, t):
    """On a 16-message world with one test of each kind, at a message where features of the trigger memory have
    been observed: the draws against the exact posterior (likelihood weighting of 3,000,000 draws of the
    generator's kernel) in the
    trigger's activations, its lures, their number with its span, and the prospective test's placement
    (two-sample chi-square, the exact sample at its effective size)."""
    conv = generate_conversation(seed, TINY)
    view = view_at(conv, t)
    assert view.started[1] and view.t - view.live_from[1] >= 1  # features of the trigger memory are observed
    keys, w = _oracle(view, TINY, 3_000_000, seed)
    assert 1.0 / np.sum(w ** 2) > 1000
    draws = _weighted_draws(ConversationPosterior(world=TINY, n_particles=20_000).fit(), view, 20_000, seed)
    got = [(tuple(int(x) for x in draws.fires[i, 1]), tuple(np.flatnonzero(draws.lure[i, :, 1]).tolist()),
            int(draws.stored[i, 0]), (int(draws.fires[i, 0, 0]),)) for i in range(len(draws))]
    statistics = {"activations": lambda k: k[0], "lures": lambda k: k[1],
                  "span and lure count": lambda k: (k[0][2] - k[0][0], len(k[1])),
                  "prospective placement": lambda k: (int(k[2]), k[3])}
    p = {name: _two_sample_p([f(k) for k in keys], w, [f(k) for k in got]) for name, f in statistics.items()}
    assert min(p.values()) > 1e-3, p


def _play(planner, conv, world, budget, penalty):
    env = ConversationPMEnv(budget=budget, per_step_cap=2, false_fire_penalty=penalty, world=world)
    env.reset(options={"conversation": conv})
    actions = []
    for _ in range(conv.horizon):
        a = planner.act(env)
        actions.append(a)
        env.step(a)
    return np.array(actions)


def test_the_planner_reads_only_what_the_agent_sees():
    """Two conversations alike in everything the agent observes, different in the verifier's answers, the base
    responses and which messages truly fire (beyond the features): the same actions."""
    conv = generate_conversation(4001)
    other = dataclasses.replace(conv, verifier=1 - conv.verifier, base=1 - conv.base,
                                fires=tuple(tuple(min(t + 1, conv.live_until[j]) for t in f) if j >= 3 else f
                                            for j, f in enumerate(conv.fires)))
    other.verifier *= other.candidates()
    other.base *= other.live()
    a = _play(ConversationPlanner(budget=20, n_samples=4, seed=1).fit(), conv, None, 20, 0.0)
    b = _play(ConversationPlanner(budget=20, n_samples=4, seed=1).fit(), other, None, 20, 0.0)
    np.testing.assert_array_equal(a, b)
    assert a.sum() == 20


def test_the_planner_repeats_with_its_seed_and_respects_the_budget():
    conv = generate_conversation(4002)
    a = _play(ConversationPlanner(budget=12, n_samples=4, seed=3).fit(), conv, None, 12, 0.0)
    b = _play(ConversationPlanner(budget=12, n_samples=4, seed=3).fit(), conv, None, 12, 0.0)
    np.testing.assert_array_equal(a, b)
    assert a.sum() <= 12 and a.sum(axis=1).max() <= 2


def test_one_planner_solves_a_conversation_alike_every_time():
    conv = generate_conversation(4002)
    planner = ConversationPlanner(budget=12, n_samples=2, seed=3).fit()
    first, again = planner.solve(conv), planner.solve(conv)
    assert (first.score, first.cost, first.schedule) == (again.score, again.cost, again.schedule)


@pytest.mark.slow
def test_the_planner_lies_between_a_first_come_policy_and_the_informed_optimum():
    """v0's world at B20 over 24 conversations: the planner's mean score is at most the informed optimum's
    expectation (an upper bound on every online policy; 4 standard errors of the paired difference) and above
    the score of verifying candidates first come, first served."""
    world, budget = WORLD_V0, 13
    planner, informed, first = [], [], []
    for seed in range(4000, 4024):
        conv = generate_conversation(seed, world)
        planner.append(ConversationPlanner(budget=budget, false_fire_penalty=1.0, world=world, n_samples=8,
                                           seed=seed).fit().solve(conv).score)
        informed.append(InformedOptimum(budget=budget, false_fire_penalty=1.0, world=world).value(conv))
        env = ConversationPMEnv(budget=budget, false_fire_penalty=1.0, world=world)
        obs, _ = env.reset(options={"conversation": conv})
        done = False
        while not done:
            obs, _, done, _, info = env.step(obs["mask"])
        first.append(info["episode_metrics"]["score"])
    d = np.array(informed) - np.array(planner)
    assert d.mean() > -4 * d.std(ddof=1) / np.sqrt(d.size)
    assert np.mean(planner) > np.mean(first) + 0.02


def test_bad_input_is_refused():
    conv = generate_conversation(4000)
    env = ConversationPMEnv(budget=20)
    env.reset(options={"conversation": conv})
    with pytest.raises(RuntimeError, match="fit"):
        ConversationPlanner(budget=20).act(env)
    with pytest.raises(ValueError, match="budget"):
        ConversationPlanner(budget=21).fit().act(env)
    with pytest.raises(ValueError, match="n_samples"):
        ConversationPlanner(budget=20, n_samples=0).fit()
    with pytest.raises(TypeError, match="ConversationConfig"):
        ConversationPlanner(budget=20, world="v1").fit()
    with pytest.raises(TypeError, match="ConversationPM"):
        ConversationPlanner(budget=20).fit().act(object())
    sampler = ConversationPosterior(n_particles=8)
    with pytest.raises(RuntimeError, match="fit"):
        sampler.weighted(view_at(conv, 3))
    with pytest.raises(ValueError, match="n_particles"):
        ConversationPosterior(n_particles=0).fit()
    with pytest.raises(ValueError, match="memories"):
        ConversationPosterior(world=TINY).fit().weighted(view_at(conv, 3))
    with pytest.raises(ValueError, match=r"\(t \+ 1, R, 7\)"):
        ConversationView.from_features(np.zeros((3, 6)), horizon=66, n_prospective=3)
    with pytest.raises(ValueError, match="called"):
        view_at(conv, 3, called=np.zeros((2, 6), dtype=bool))
    bad = conv.goodai_features()[:4].copy()
    bad[1, 0, 2] = np.nan
    with pytest.raises(ValueError, match="finite"):
        ConversationView.from_features(bad, horizon=66, n_prospective=3)
    with pytest.raises(ValueError, match="horizon"):
        ConversationView.from_features(conv.goodai_features()[:4], horizon=3, n_prospective=3)
    with pytest.raises(ValueError, match="n_prospective"):
        ConversationView.from_features(conv.goodai_features()[:4], horizon=66, n_prospective=7)
    view = view_at(conv, 3)
    view.called = np.zeros((1, 6), dtype=bool)
    with pytest.raises(ValueError, match="calls"):
        ConversationPosterior(n_particles=8).fit().weighted(view)


@pytest.mark.slow
def test_the_study_runs_and_its_page_states_the_bracket(tmp_path):
    """``python -m membudget.evaluate conversation-ceiling --quick``: the page names the chosen K among the curve's,
    a row per setting and per students' run (each teacher labelling every message of its n conversations), every
    planner score between 0 and 1; a second run loads every task from the checkpoints and writes the same page."""
    from membudget.evaluate import main
    from membudget.studies import conversation_ceiling as cc

    args = ["conversation-ceiling", "--quick", "--checkpoint-dir", str(tmp_path / "cache"), "--out"]
    res = main(args + [str(tmp_path / "a.md")])
    assert res["chosen"] in cc.QUICK.curve
    text = (tmp_path / "a.md").read_text()
    assert f"**K = {res['chosen']}**" in text
    for name, level in cc.QUICK.settings:
        assert f"| {name} | {level} |" in text
        assert 0.0 <= res["settings"][(name, level)]["Planner"]["score"].mean() <= 1.0
    for name, level, n in cc.QUICK.students:
        assert f"| {name} | {level} | {n} |" in text
        fitted = res["students"][(name, level, n)]
        assert fitted["planner"]["states"] == fitted["hindsight optimum"]["states"] == n * 66
    for name, level, n in cc.QUICK.dagger:
        assert all(r["states"] == 2 * n * 66 for t in cc.TEACHERS for r in res["dagger"][(name, level, n)][t])
        assert "One DAgger round further" in text
    for level, n in cc.QUICK.finetune:
        assert len(res["finetune"][(level, n)]) == len(cc.QUICK.learner_seeds)
        assert "## PPO started from the planner's students" in text
    main(args + [str(tmp_path / "b.md")])
    assert (tmp_path / "b.md").read_text() == text


@pytest.mark.filterwarnings("ignore:.*is different from the unwrapped version")  # a wrapper is what is checked
def test_the_online_teacher_wrapper_labels_a_conversation_with_the_planner():
    """``OnlineTeacher`` on ConversationPM: ``info["teacher_action"]`` is the planner's action (the same seed played
    directly), in the environment's action mode; ``p_resolve`` is a probability, 0 off the candidates; a seeded
    reset repeats the labels; Gymnasium's checker passes."""
    from gymnasium.utils.env_checker import check_env

    from membudget.wrappers import P_RESOLVE_KEY, TEACHER_KEY, OnlineTeacher

    conv = generate_conversation(4004)
    env = OnlineTeacher(ConversationPMEnv(budget="B40", action_mode="scores"), samples=2, seed=5, oracle_feature=True)
    direct_env = ConversationPMEnv(budget="B40")
    direct = ConversationPlanner(budget=direct_env.budget, n_samples=2, seed=5).fit()
    obs, info = env.reset(options={"conversation": conv})
    direct_env.reset(options={"conversation": conv})
    labels = []
    for _ in range(conv.horizon):
        a = direct.act(direct_env)
        np.testing.assert_array_equal(info[TEACHER_KEY], np.where(a > 0, 1.0, -1.0))
        p = obs[P_RESOLVE_KEY]
        assert p.dtype == np.float32 and np.all((0 <= p) & (p <= 1)) and np.all(p[obs["mask"] == 0] == 0)
        labels.append(info[TEACHER_KEY])
        obs, _, done, _, info = env.step(info[TEACHER_KEY])
        direct_env.step(a)
    assert done and np.array(labels).max() == 1.0
    check_env(OnlineTeacher(ConversationPMEnv(budget="B20"), samples=1, oracle_feature=True), skip_render_check=True)


def test_conversation_demonstrations_are_the_planners_play():
    """``conversation_demonstrations``: one state per message, each labelled with the planner's action (the planner
    seeded by the conversation, as the study plays it), only candidates labelled."""
    from membudget.agents.online_imitation import conversation_demonstrations

    demos = conversation_demonstrations([4005], "B20", samples=2)
    res, bud, mask, y = demos.arrays()
    conv = generate_conversation(4005)
    assert len(demos) == conv.horizon and np.all(y <= mask)
    env = ConversationPMEnv(budget="B20")
    planned = _play(ConversationPlanner(budget=env.budget, n_samples=2, seed=4005).fit(), conv, None, env.budget, 0.0)
    np.testing.assert_array_equal(y, planned)


def test_conversation_demonstrations_label_a_students_states():
    """With a ``policy`` the states are the student's (it acts), each labelled by the teacher from there: the
    hindsight optimum's optimal continuation at that state; an unknown teacher is refused."""
    from membudget.agents.online_imitation import conversation_demonstrations
    from membudget.baselines.pm import RandomFeasible
    from membudget.teachers.conversation import ConversationOptimum

    student = RandomFeasible(per_step_cap=2, seed=1)
    demos = conversation_demonstrations([4006], "B20", policy=student, teacher="hindsight optimum")
    _, _, _, y = demos.arrays()
    env = ConversationPMEnv(budget="B20", action_mode="scores")
    obs, _ = env.reset(seed=4006)
    twin = RandomFeasible(per_step_cap=2, seed=1)
    optimum = ConversationOptimum(budget=env.budget, per_step_cap=2)
    for t in range(env.unwrapped.conversation.horizon):
        np.testing.assert_array_equal(y[t], optimum.act(env))
        action, _ = twin.predict(obs, episode_start=np.array([t == 0]))
        obs, *_ = env.step(action)
    with pytest.raises(ValueError, match="teacher"):
        conversation_demonstrations([4006], "B20", teacher="oracle")
