"""Exact semantics of the PMWeek-v0 executor, controller and scoring on small hand-built weeks."""

import numpy as np
import pytest

from membudget.envs.pm import RESOURCE_FEATURE_NAMES, PMWeekEnv, WorldConfig, episode_from_dict
from membudget.envs.pm.episode_io import FORMAT

RESOURCES = (("clock", "clock"), ("a", "snapshot"), ("b", "delta"))


def intention(iid, **kw):
    row = dict(id=iid, kind="channel", resource="a", active_from=0, active_until=None, declared_start=0,
               declared_end=None, onset=0, deadline=None, polarity="positive", registered=True, priority=1,
               miss_cost=1.0, cross_day=False, update_sensitive=False, version=0, visible_outcome="none")
    row.update(kw)
    return row


def week(rows, horizon=6, costs=(1, 1, 1), updates=()):
    rows = [dict(r) for r in rows]
    for r in rows:
        for k in ("active_until", "declared_end", "deadline"):
            if r[k] is None:
                r[k] = horizon - 1
        if r["onset"] is None:
            r["deadline"] = None
    vis = {k: sum(r["visible_outcome"] == k for r in rows) for k in ("tp", "fp", "fn")}
    return episode_from_dict({
        "format": FORMAT, "horizon": horizon,
        "calendar": {"day": [0] * horizon, "hour": [8.0 + i for i in range(horizon)], "weekday": [0] * horizon},
        "cost_profile": "custom",
        "resources": [{"name": n, "class": c, "cost": x} for (n, c), x in zip(RESOURCES, costs)],
        "intentions": rows, "updates": list(updates), "visible_outcomes": vis,
        "hints": [[0.0] * len(RESOURCES) for _ in range(horizon)], "meta": {},
    })


def make_env(episode, budget=None, per_step_cap=None, per_step_cost_cap=None, late_policy="expire",
             action_mode="binary"):
    world = WorldConfig(horizon=episode.horizon, n_days=1, resources=RESOURCES, lookahead=0)
    env = PMWeekEnv(budget=budget, per_step_cap=per_step_cap, per_step_cost_cap=per_step_cost_cap,
                    late_policy=late_policy, world=world, action_mode=action_mode)
    obs, _ = env.reset(options={"episode": episode})
    return env, obs


def play(env, plan, horizon):
    """Query ``plan[t]`` (resource indices) at each step; return the list of step infos and rewards."""
    infos, rewards = [], []
    for t in range(horizon):
        a = np.zeros(len(RESOURCES), dtype=np.int8)
        a[list(plan.get(t, ()))] = 1
        _, r, term, _, info = env.step(a)
        infos.append(dict(info, events=env.unwrapped.last_events))
        rewards.append(r)
    assert term
    return infos, rewards


def f1(tp, fp, fn):
    return 0.0 if 2 * tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def test_on_time_query_is_a_true_positive():
    ep = week([intention("C1", onset=2, deadline=3)])
    env, _ = make_env(ep)
    infos, rewards = play(env, {2: [1]}, 6)
    assert infos[2]["events"] == [("C1", "hit")] and infos[2]["tp"] == 1
    assert rewards[2] == 1.0 and sum(rewards) == 1.0
    assert infos[-1]["episode_metrics"]["tp"] == 1 and infos[-1]["episode_metrics"]["fn"] == 0


def test_query_before_onset_resolves_nothing_and_counts_as_unchanged():
    ep = week([intention("C1", onset=3, deadline=4)])
    env, _ = make_env(ep)
    env.step(np.array([0, 1, 0]))
    obs, _, _, _, info = env.step(np.array([0, 1, 0]))
    assert env.unwrapped.last_events == [] and np.flatnonzero(info["queried"]).tolist() == [1]
    unchanged = obs["resources"][1, RESOURCE_FEATURE_NAMES.index("unchanged_count")]
    assert unchanged == pytest.approx(2 / 3)  # two unproductive queries, squashed n / (1 + n)


@pytest.mark.parametrize("late_policy, fp", [("expire", 0), ("execute", 1)])
def test_late_query_of_a_positive(late_policy, fp):
    ep = week([intention("C1", onset=1, deadline=2)])
    env, _ = make_env(ep, late_policy=late_policy)
    infos, rewards = play(env, {4: [1]}, 6)
    # the miss is charged at the end of the last on-time step
    assert infos[2]["fn"] == 1 and infos[2]["events"] == [("C1", "miss")] and rewards[2] == 0.0
    expected = "late_execution" if late_policy == "execute" else "late_miss"
    assert infos[4]["events"] == [("C1", expected)]
    assert infos[4]["fp"] == fp
    end = infos[-1]["episode_metrics"]
    assert (end["tp"], end["fp"], end["fn"], end["late_execution"]) == (0, fp, 1, fp)


@pytest.mark.parametrize("polarity, counter", [("lure", "false_alarm"), ("stale", "update_violation")])
def test_negative_inside_its_deadline_is_a_false_positive(polarity, counter):
    ep = week([intention("L1", polarity=polarity, onset=1, deadline=3),
               intention("C1", resource="b", onset=0, deadline=5)])
    env, _ = make_env(ep)
    infos, rewards = play(env, {0: [2], 2: [1]}, 6)
    assert infos[2]["events"] == [("L1", "false_execution")] and infos[2]["fp"] == 1
    assert rewards[2] == pytest.approx(f1(1, 1, 0) - f1(1, 0, 0))
    assert infos[-1]["episode_metrics"][counter] == 1


def test_negative_after_its_deadline_resolves_without_action():
    ep = week([intention("L1", polarity="lure", onset=1, deadline=2)])
    env, _ = make_env(ep)
    infos, _ = play(env, {3: [1]}, 6)
    assert infos[3]["events"] == [("L1", "expired_negative")] and infos[3]["fp"] == 0
    # resolved: no longer a candidate afterwards
    assert env.unwrapped.core.mask_state[0, 1] == 0


def test_only_active_intentions_resolve():
    ep = week([intention("C1", onset=0, deadline=5, active_from=2, active_until=3, declared_start=0,
                         declared_end=5)])
    env, obs = make_env(ep)
    assert obs["mask"][1] == 0  # not yet in the ledger at step 0
    infos, _ = play(env, {0: [1], 1: [1], 4: [1]}, 6)
    assert all(not i["events"] or i["events"] == [("C1", "miss")] for i in infos)
    assert infos[0]["skipped_non_candidate"] == 1  # proposals on non-candidates are never queried
    assert infos[-1]["episode_metrics"]["fn"] == 1


def test_unregistered_positive_is_an_unavoidable_miss():
    ep = week([intention("C1", onset=1, deadline=2, registered=False)])
    env, obs = make_env(ep)
    assert obs["mask"].sum() == 0
    infos, _ = play(env, {1: [1]}, 6)
    assert np.flatnonzero(infos[1]["queried"]).size == 0 and infos[2]["fn"] == 1


def test_one_query_resolves_every_triggered_intention_on_the_resource():
    ep = week([intention("C1", onset=1, deadline=4), intention("C2", onset=2, deadline=4),
               intention("L1", polarity="lure", onset=0, deadline=4), intention("C3", onset=4, deadline=5)])
    env, _ = make_env(ep)
    infos, _ = play(env, {3: [1]}, 6)
    assert sorted(infos[3]["events"]) == [("C1", "hit"), ("C2", "hit"), ("L1", "false_execution")]
    assert infos[-1]["episode_metrics"]["fn"] == 1  # C3 never queried after its onset


def test_trigger_that_never_holds_is_not_due():
    ep = week([intention("C1", onset=None)])
    env, _ = make_env(ep)
    infos, rewards = play(env, {0: [1], 5: [1]}, 6)
    end = infos[-1]["episode_metrics"]
    assert (end["tp"], end["fp"], end["fn"]) == (0, 0, 0) and sum(rewards) == 0.0


def test_visible_outcomes_enter_set_f1_at_their_steps():
    vis = dict(kind="visible", resource=None)
    ep = week([intention("V1", onset=1, deadline=1, visible_outcome="tp", **vis),
               intention("V2", onset=2, deadline=3, visible_outcome="fn", **vis),
               intention("V3", polarity="lure", onset=4, deadline=4, visible_outcome="fp", **vis),
               intention("V4", polarity="lure", onset=4, deadline=4, visible_outcome="tn", **vis)])
    env, obs = make_env(ep)
    assert obs["mask"].sum() == 0
    infos, rewards = play(env, {}, 6)
    assert [(i["tp"], i["fp"], i["fn"]) for i in infos] == [(0, 0, 0), (1, 0, 0), (0, 0, 0), (0, 0, 1),
                                                            (0, 1, 0), (0, 0, 0)]
    assert sum(rewards) == pytest.approx(f1(1, 1, 1)) and infos[-1]["episode_metrics"]["false_alarm"] == 1


def test_positive_due_at_the_last_step_is_missed_at_the_end():
    ep = week([intention("C1", onset=5, deadline=5)])
    env, _ = make_env(ep)
    infos, _ = play(env, {}, 6)
    assert infos[5]["fn"] == 1


def test_executor_skips_the_unaffordable_and_keeps_scanning():
    rows = [intention("C1", resource="b", onset=0, deadline=5), intention("C2", resource="a", onset=0, deadline=5),
            intention("T1", kind="time", resource="clock", onset=0, deadline=5)]
    # prices clock 1, a 2, b 4; budget 3: b (4) is skipped, then a (2) and clock (1) fit
    env, _ = make_env(week(rows, costs=(1, 2, 4)), budget=3)
    _, _, _, _, info = env.step(np.array([1, 1, 1]))
    assert np.flatnonzero(info["queried"]).tolist() == [0, 1] and info["skipped_budget"] == 1
    assert info["cost"] == 3 and info["remaining_budget"] == 0


def test_count_cap_and_cost_cap():
    rows = [intention("C1", resource="b", onset=0, deadline=5), intention("C2", resource="a", onset=0, deadline=5),
            intention("T1", kind="time", resource="clock", onset=0, deadline=5)]
    env, _ = make_env(week(rows), per_step_cap=2)
    _, _, _, _, info = env.step(np.array([1, 1, 1]))
    assert np.flatnonzero(info["queried"]).tolist() == [0, 1] and info["skipped_count_cap"] == 1  # unit costs: index order
    env, _ = make_env(week(rows, costs=(1, 2, 4)), per_step_cost_cap=5)
    _, _, _, _, info = env.step(np.array([1, 1, 1]))
    # unequal prices: cheaper first (clock 1, a 2 -> 3), then b (4) would exceed L = 5
    assert np.flatnonzero(info["queried"]).tolist() == [0, 1] and info["skipped_cost_cap"] == 1


def test_scores_order_by_score_over_cost_with_ties_to_lower_cost_then_index():
    rows = [intention("C1", resource="b", onset=0, deadline=5), intention("C2", resource="a", onset=0, deadline=5),
            intention("T1", kind="time", resource="clock", onset=0, deadline=5)]
    ep = week(rows, costs=(1, 2, 4))
    env, _ = make_env(ep, per_step_cap=1, action_mode="scores")
    # score / cost: clock 0.2, a 0.3, b 0.2 -> a first
    _, _, _, _, info = env.step(np.array([0.2, 0.6, 0.8], dtype=np.float32))
    assert np.flatnonzero(info["queried"]).tolist() == [1]
    env, _ = make_env(ep, per_step_cap=1, action_mode="scores")
    # tie on score / cost (0.2 each for clock and b): lower cost wins
    _, _, _, _, info = env.step(np.array([0.2, -1.0, 0.8], dtype=np.float32))
    assert np.flatnonzero(info["queried"]).tolist() == [0]
    env, _ = make_env(week(rows), per_step_cap=1, action_mode="scores")
    # unit prices, equal scores: lower index wins; a score <= 0 is no proposal
    _, _, _, _, info = env.step(np.array([0.0, 0.5, 0.5], dtype=np.float32))
    assert np.flatnonzero(info["queried"]).tolist() == [1]


def test_candidate_window_is_widened_by_the_lookahead():
    ep = week([intention("C1", onset=4, deadline=5, declared_start=3, declared_end=5)])
    world = WorldConfig(horizon=6, n_days=1, resources=RESOURCES, lookahead=2)
    env = PMWeekEnv(budget=None, per_step_cap=None, world=world)
    masks = [env.reset(options={"episode": ep})[0]["mask"][1]]
    for _ in range(6):
        masks.append(env.step(np.zeros(3, dtype=np.int8))[0]["mask"][1])
    assert masks == [0, 1, 1, 1, 1, 1, 0]  # steps 1-5 (window 3-5 widened by 2); 0 in the terminal observation


def test_budget_features_follow_appendix_a2():
    ep = week([intention("C1", onset=0, deadline=5), intention("C2", resource="b", onset=0, deadline=5)])
    env, obs = make_env(ep, budget=4)
    b = obs["budget"]
    T = 6
    assert b[1] == 1.0 and b[2] == 0.0 and b[3] == 1.0 and b[4] == pytest.approx(4 / T) and b[5] == 0.0
    obs, _, _, _, _ = env.step(np.array([0, 1, 1]))
    b = obs["budget"]
    # t = 2 (one-indexed), R = 2 left of B = 4
    assert b[1] == 0.5 and b[2] == pytest.approx(1 / (T - 1)) and b[3] == pytest.approx((T - 1) / T)
    assert b[4] == pytest.approx(2 / (T - 1)) and b[5] == pytest.approx(0.5 - 1 / (T - 1))
    assert b[6] == pytest.approx(2 / 10) and b[7] == pytest.approx(2 / 20) and b[8] == pytest.approx(2 / 2)


def test_world_of_the_clock_alone():
    world = WorldConfig(resources=(("clock", "clock"),), horizon=12, n_days=2)
    env = PMWeekEnv(budget=3, world=world)
    obs, _ = env.reset(seed=0)
    assert obs["resources"].shape == (1, 27)
    assert all(r == 0 for r in env.episode.resource[env.episode.kind != 2])
    for _ in range(12):
        obs, _, term, _, _ = env.step(obs["mask"])
    assert term
    with pytest.raises(ValueError, match="no channel"):
        PMWeekEnv(budget=3, world=world, load=1).reset(seed=0)


@pytest.mark.parametrize("kw, match", [
    (dict(n_time=-3.0), "n_time"), (dict(n_time=float("nan")), "n_time"),
    (dict(channel_window=(10, 3)), "channel_window"), (dict(channel_slack=(4, 1)), "channel_slack"),
    (dict(time_grace=(-3, -3)), "time_grace"), (dict(hint_width=0.0), "hint_width"),
    (dict(ledger_expiry=-20), "ledger_expiry"), (dict(lookahead=-1), "lookahead"),
    (dict(resources=(("clock", "clock"), ("a", "delta"), ("a", "snapshot"))), "unique"),
])
def test_world_config_rejects_impossible_values(kw, match):
    with pytest.raises(ValueError, match=match):
        WorldConfig(**kw)


def test_world_config_accepts_lists_as_tuples():
    w = WorldConfig(resources=[["clock", "clock"], ["a", "delta"]], channel_window=[3, 5], horizon=12, n_days=2)
    assert w.resources == (("clock", "clock"), ("a", "delta")) and w.channel_window == (3, 5)
    PMWeekEnv(budget="B10", world=w).reset(seed=0)
