"""The history-aware student (membudget.agents.history) and its study (membudget.studies.history_students): the
history of a hand-made episode, equivariance under a permutation of the resources, restarts at episode starts in a
batch, bad input refused, the history chosen on validation weeks alone."""

import dataclasses

import numpy as np
import pytest
import torch

from membudget.agents.history import History, HistoryEnv, HistoryStudent, HistoryTask, HistoryVectorEnv, \
    history_demonstrations
from membudget.agents.imitation import Demonstrations
from membudget.agents.per_resource import PerResourceNet

# one episode of 3 steps, 2 resources, 2 features
EPISODE = np.array([[[1, 10], [2, 20]],
                    [[3, 30], [4, 40]],
                    [[5, 50], [6, 60]]], dtype=np.float32)


def test_history_of_a_three_step_episode():
    h = History(frames=2, decays=(0.5,), n_features=2).episode(EPISODE)
    assert h.shape == (3, 2, 6)
    # resource 0: (now, previous step (the first step before it), decayed mean m_t = 0.5 m_{t-1} + 0.5 x_t, m_0 = x_0)
    assert h[0, 0].tolist() == [1, 10, 1, 10, 1, 10]
    assert h[1, 0].tolist() == [3, 30, 1, 10, 2, 20]
    assert h[2, 0].tolist() == [5, 50, 3, 30, 3.5, 35]
    assert h[2, 1].tolist() == [6, 60, 4, 40, 4.5, 45]
    # three frames: the oldest before the start is the first step
    assert History(frames=3, n_features=2).episode(EPISODE)[1, 1].tolist() == [4, 40, 2, 20, 2, 20]
    assert History(n_features=2).episode(EPISODE).tolist() == EPISODE.tolist()


def _episode(rng, T=5, R=4):
    res = rng.normal(size=(T, R, 27)).astype(np.float32)
    mask = (rng.random((T, R)) < 0.7).astype(np.float32)
    return res, rng.normal(size=(T, 9)).astype(np.float32), mask


def _student(history, seed=0):
    torch.manual_seed(seed)
    return HistoryStudent(PerResourceNet((8, 8), context=True, n_resource_features=history.n_features), history)


def test_permuting_resources_permutes_the_actions():
    history = History(frames=3, decays=(0.8,))
    student = _student(history)
    res, bud, mask = _episode(np.random.default_rng(0))
    perm = np.array([2, 0, 3, 1])
    state_a = state_b = None
    for t in range(len(res)):
        a, state_a = student.predict({"resources": res[t], "budget": bud[t], "mask": mask[t]}, state_a, t == 0)
        b, state_b = student.predict({"resources": res[t][perm], "budget": bud[t], "mask": mask[t][perm]}, state_b,
                                     t == 0)
        assert np.allclose(a[perm], b, atol=1e-6)
        assert np.all(a[mask[t] == 0] == -1)
    feats = history.episode(res)
    assert np.allclose(history.episode(res[:, perm]), feats[:, perm])


@pytest.mark.parametrize("context,hidden", [(True, (8, 6, 5)), (False, (8, 6, 5)), (True, (8,)), (False, (8,))])
def test_one_observation_in_numpy_acts_as_the_torch_batch_of_one(context, hidden):
    history = History(frames=2, decays=(0.9,))
    torch.manual_seed(3)
    net = PerResourceNet(hidden, context=context, n_resource_features=history.n_features)
    student = HistoryStudent(net, history)
    res, bud, mask = _episode(np.random.default_rng(3), T=6)
    mask[2] = 0  # a step without candidates
    s1 = s2 = None
    for t in range(len(res)):
        a, s1 = student.predict({"resources": res[t], "budget": bud[t], "mask": mask[t]}, s1, t == 0)
        b, s2 = student.predict({"resources": res[t][None], "budget": bud[t][None], "mask": mask[t][None]}, s2,
                                np.array([t == 0]))
        assert np.allclose(a, b[0], atol=1e-5) and np.array_equal(a > 0, b[0] > 0)
    with pytest.raises(ValueError, match="budget"):
        student.predict({"resources": res[0], "budget": bud[0, :8], "mask": mask[0]})
    with pytest.raises(ValueError, match="finite"):
        student.predict({"resources": np.full_like(res[0], np.nan), "budget": bud[0], "mask": mask[0]})


def test_a_batch_restarts_each_row_at_its_episode_start():
    history = History(frames=2, decays=(0.5,))
    student = _student(history)
    rng = np.random.default_rng(1)
    (r1, b1, m1), (r2, b2, m2) = _episode(rng), _episode(rng)
    # row 0 plays episode 1 then episode 2; row 1 plays episode 2 throughout its first 5 steps
    state, rows = None, []
    for t in range(10):
        e1 = (r1, b1, m1) if t < 5 else (r2, b2, m2)
        e2 = (r2, b2, m2) if t < 5 else (r1, b1, m1)
        obs = {k: np.stack([e1[i][t % 5], e2[i][t % 5]]) for i, k in enumerate(("resources", "budget", "mask"))}
        a, state = student.predict(obs, state, np.array([t % 5 == 0, t % 5 == 0]))
        rows.append(a)
    ref = {}
    for name, (r, b, m) in (("1", (r1, b1, m1)), ("2", (r2, b2, m2))):
        s, out = None, []
        for t in range(5):
            a, s = student.predict({"resources": r[t], "budget": b[t], "mask": m[t]}, s, t == 0)
            out.append(a)
        ref[name] = out
    for t in range(10):
        assert np.allclose(rows[t][0], ref["1" if t < 5 else "2"][t % 5], atol=1e-6)
        assert np.allclose(rows[t][1], ref["2" if t < 5 else "1"][t % 5], atol=1e-6)


def test_history_demonstrations_build_each_episode_from_its_own_start():
    history = History(frames=2, decays=(0.9,), n_features=27)
    rng = np.random.default_rng(2)
    parts = []
    for _ in range(2):
        res, bud, mask = _episode(rng)
        parts.append(Demonstrations(res, bud, mask, mask * (rng.random(mask.shape) < 0.5)))
    d = history_demonstrations(parts, history)
    assert d.resources.shape == (10, 4, 81)
    assert np.array_equal(d.resources[5:], history.episode(parts[1].resources))
    assert np.array_equal(d.labels, np.concatenate([p.labels for p in parts]))


def test_the_task_s_environments_emit_each_week_s_history():
    from membudget.envs.pm import PMWeekEnv, PMWeekVectorEnv

    history = History(frames=3, decays=(0.7,))
    plain = PMWeekVectorEnv(num_envs=2, budget="B10")
    wrapped = HistoryVectorEnv(PMWeekVectorEnv(num_envs=2, budget="B10"), history)
    assert wrapped.single_observation_space["resources"].shape == (11, 27 * 4)
    seen, got = [], []
    obs_p, _ = plain.reset(seed=[2000, 2001])
    obs_w, _ = wrapped.reset(seed=[2000, 2001])
    rng = np.random.default_rng(0)
    for _ in range(6):
        seen.append(obs_p["resources"].copy())
        got.append(obs_w["resources"].copy())
        a = (rng.random((2, 11)) < 0.3).astype(np.int8)
        obs_p, *_ = plain.step(a)
        obs_w, *_ = wrapped.step(a)
    seen, got = np.stack(seen), np.stack(got)
    for i in range(2):
        assert np.allclose(got[:, i], history.episode(seen[:, i]))
    single = HistoryEnv(PMWeekEnv(budget="B10"), history)
    obs, _ = single.reset(seed=2001)
    assert single.observation_space.contains(obs)
    assert np.allclose(obs["resources"], got[0, 1])
    # a week cut short (truncated after 3 steps) restarts its history at the autoreset, the step after
    kw = {"num_envs": 1, "budget": "B10", "max_episode_steps": 3}
    plain, wrapped = PMWeekVectorEnv(**kw), HistoryVectorEnv(PMWeekVectorEnv(**kw), history)
    obs_p, _ = plain.reset(seed=2000)
    obs_w, _ = wrapped.reset(seed=2000)
    seen, got = [obs_p["resources"][0].copy()], [obs_w["resources"][0].copy()]
    for t in range(6):
        obs_p, _, _, trunc, _ = plain.step(np.zeros((1, 11), np.int8))
        obs_w, _, _, trunc_w, _ = wrapped.step(np.zeros((1, 11), np.int8))
        assert trunc[0] == trunc_w[0] == (t == 2)
        seen.append(obs_p["resources"][0].copy())
        got.append(obs_w["resources"][0].copy())
    assert np.allclose(np.stack(got), np.concatenate([history.episode(np.stack(seen[:4])),
                                                      history.episode(np.stack(seen[4:]))]))


def test_bc_dagger_and_ppo_train_through_the_history_task():
    from membudget.agents.imitation import fit_dagger
    from membudget.agents.ppo import train_ppo

    task = HistoryTask(History(frames=2))
    policy, hist = fit_dagger(range(2000, 2002), "B10", task=task, epochs=1, calibrate=False)
    assert policy.net.n_resource_features == 54 and len(hist) == 2
    ppo, _ = train_ppo("B10", task=task, n_envs=2, total_timesteps=160, eval_episodes=1, init=policy.net)
    assert ppo.config["engine"] == "autograd" and ppo.net.n_resource_features == 54
    f1 = task.rollout(ppo, [4000], budget="B10", action_mode="scores")["set_f1"]
    assert np.allclose(f1, task.rollout(task.deployed(ppo), [4000], budget="B10", action_mode="scores")["set_f1"])


@pytest.mark.parametrize("kw", [{"frames": 0}, {"frames": 1.5}, {"decays": (1.0,)}, {"decays": (-0.1,)},
                                {"decays": 0.5}, {"n_features": 0}])
def test_bad_history_settings_raise(kw):
    with pytest.raises(ValueError):
        History(**kw)


def test_bad_input_raises():
    history = History(frames=2)
    with pytest.raises(ValueError, match="shape"):
        history.episode(np.zeros((3, 4, 26)))
    with pytest.raises(ValueError, match="episode_start"):
        history.step(history.step(None, np.zeros((2, 4, 27)), None)[1], np.zeros((2, 4, 27)), [True])
    with pytest.raises(ValueError, match="state holds"):
        history.step(history.step(None, np.zeros((2, 4, 27)), None)[1], np.zeros((3, 4, 27)), [True] * 3)
    with pytest.raises(ValueError, match="features per resource"):
        HistoryStudent(PerResourceNet(n_resource_features=27), history)
    with pytest.raises(ValueError, match="History"):
        HistoryStudent(PerResourceNet(n_resource_features=54), (2, ()))
    with pytest.raises(ValueError, match="Demonstrations"):
        history_demonstrations([], history)
    with pytest.raises(ValueError, match="History"):
        HistoryTask((2, ()))


def test_student_episodes_carry_a_history_student_s_history_across_the_week():
    """DAgger's visited states for a history student are those of its own rollout with its history carried from
    step to step and restarted at each week's first step, one episode per week."""
    from membudget.agents.online_imitation import student_episodes
    from membudget.envs.pm import PMWeekEnv

    student = _student(History(frames=2, decays=(0.9,)), seed=1)
    calls = []

    class Recorder:
        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            calls.append((state is None, bool(np.reshape(episode_start, -1)[0])))
            return student.predict(obs, state, episode_start)

    episodes = student_episodes(Recorder(), [2003, 2004], "B10", samples=1, particles=8)
    assert len(episodes) == 2 and all(isinstance(e, Demonstrations) for e in episodes)
    T = len(episodes[0].labels)
    assert calls == ([(True, True)] + [(False, False)] * (T - 1)) * 2
    env = PMWeekEnv(budget="B10", per_step_cap=2, action_mode="scores")
    obs, _ = env.reset(seed=2003)
    done, state, seen = False, None, []
    while not done:
        seen.append(obs["resources"])
        action, state = student.predict(obs, state, len(seen) == 1)
        obs, _, done, _, _ = env.step(action)
    np.testing.assert_array_equal(episodes[0].resources, np.stack(seen))
    assert set(np.unique(episodes[0].labels)) <= {0.0, 1.0}


def _gru(seed=0, F=27, H=8):
    from membudget.agents.history import GRUHistory

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    return GRUHistory(torch.nn.GRUCell(F, H), rng.normal(size=F), rng.uniform(0.5, 2.0, size=F))


def test_gru_history_steps_as_torch_s_cell_and_restarts_at_episode_starts():
    """The compiled step equals ``torch.nn.GRUCell`` on the standardised features; the state restarts at zero where
    ``episode_start`` is set and continues elsewhere; permuting the resources permutes the features."""
    g = _gru()
    rng = np.random.default_rng(1)
    x, h = rng.normal(size=(3, 5, 27)).astype(np.float32), rng.normal(size=(3, 5, 8)).astype(np.float32)
    feats, h1 = g.step(h, x, [False, True, False])
    xs = (x - g.mean) / g.scale
    h_ref = h.copy()
    h_ref[1] = 0.0
    with torch.no_grad():
        ref = g.cell(torch.from_numpy(xs.reshape(15, 27)), torch.from_numpy(h_ref.reshape(15, 8))).numpy()
    np.testing.assert_allclose(h1, ref.reshape(3, 5, 8), atol=1e-6)
    np.testing.assert_allclose(feats, np.concatenate([xs, h1], axis=-1), atol=1e-6)
    assert feats.shape == (3, 5, g.n_features) and g.n_features == 35
    first, _ = g.step(None, x, None)  # no state: every row starts
    np.testing.assert_array_equal(first, g.step(np.zeros_like(h), x, [True] * 3)[0])
    perm = [4, 0, 3, 1, 2]
    np.testing.assert_allclose(g.step(h[:, perm], x[:, perm], [False] * 3)[0], feats_no_start(g, h, x)[:, perm],
                               atol=1e-6)
    with pytest.raises(ValueError, match="state must have shape"):
        g.step(h[:, :4], x, [False] * 3)
    with pytest.raises(ValueError, match="resources must have shape"):
        g.step(None, x[..., :26], None)


def test_gru_history_survives_being_sent_to_another_process():
    """Torch moves a parameter's memory to shared memory when a process pool sends the cell to a worker; the
    history's arrays are copies, so both the sender's and the received history still step as before."""
    import pickle
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401 (registers torch's reductions, as a pool's workers do)

    g = _gru()
    x = np.random.default_rng(2).normal(size=(2, 3, 27)).astype(np.float32)
    before = g.step(None, x, None)[0]
    received = pickle.loads(ForkingPickler.dumps(g))
    np.testing.assert_array_equal(g.step(None, x, None)[0], before)
    np.testing.assert_array_equal(received.step(None, x, None)[0], before)


def test_a_student_s_numpy_layers_follow_its_parameters_to_shared_memory():
    """A per-resource student's one-observation path reads views of its network's parameters; after the network
    is sent to another process (torch moves the parameters to shared memory) it still decides as before."""
    from multiprocessing.reduction import ForkingPickler

    import torch.multiprocessing  # noqa: F401 (registers torch's reductions, as a pool's workers do)

    from membudget.agents.per_resource import StudentPolicy

    torch.manual_seed(0)
    student = StudentPolicy(PerResourceNet((8, 8)))
    rng = np.random.default_rng(3)
    obs = {"resources": rng.normal(size=(11, 27)).astype(np.float32), "budget": rng.uniform(size=9),
           "mask": np.ones(11)}
    before = student.predict(obs)[0]
    ForkingPickler.dumps(student.net)
    np.testing.assert_array_equal(student.predict(obs)[0], before)


def feats_no_start(g, h, x):
    return g.step(h, x, [False] * len(x))[0]


@pytest.mark.slow  # about 10 s: two fits
def test_gru_student_learns_what_one_observation_cannot_show():
    """Labels that depend on the previous step only (query resource r at t iff its feature 0 was above 0.5 at t - 1):
    the learned recurrence fits them, a student of one observation (the same class without history) cannot."""
    from membudget.agents.history import fit_gru_student
    from membudget.agents.imitation import fit_net

    rng = np.random.default_rng(0)
    T, R, F = 10, 4, 27

    def episode():
        x = rng.uniform(size=(T, R, F)).astype(np.float32)
        y = np.zeros((T, R), np.float32)
        y[1:] = x[:-1, :, 0] > 0.5
        return Demonstrations(x, rng.uniform(size=(T, 9)), np.ones((T, R)), y)

    train, test = [episode() for _ in range(64)], [episode() for _ in range(16)]
    student = fit_gru_student(train, hidden=16, width=32, epochs=40, seed=0)
    assert isinstance(student, HistoryStudent) and student.config["method"] == "gru-bc"
    flat = Demonstrations.concatenate(train)
    plain = fit_net(flat, hidden=(32, 32), epochs=40, seed=0)

    def accuracy(policy, carry):
        right = total = 0
        for e in test:
            state = None
            for t in range(T):
                obs = {"resources": e.resources[t], "budget": e.budget[t], "mask": e.mask[t]}
                a, state = policy.predict(obs, state if carry else None, episode_start=np.array([t == 0]))
                right += int(((a > 0) == (e.labels[t] > 0)).sum())
                total += R
        return right / total

    from membudget.agents.per_resource import StudentPolicy

    with_history, without = accuracy(student, True), accuracy(StudentPolicy(plain), False)
    assert with_history >= 0.9 and without <= 0.7, (with_history, without)


def test_gru_student_refuses_bad_input():
    from membudget.agents.history import GRUHistory, fit_gru_student

    ep = Demonstrations(np.zeros((3, 2, 27)), np.zeros((3, 9)), np.ones((3, 2)), np.zeros((3, 2)))
    with pytest.raises(ValueError, match="episodes"):
        fit_gru_student([])
    with pytest.raises(ValueError, match="hidden"):
        fit_gru_student([ep], hidden=0)
    with pytest.raises(ValueError, match="lr"):
        fit_gru_student([ep], lr=0.0)
    other = Demonstrations(np.zeros((3, 3, 27)), np.zeros((3, 9)), np.ones((3, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="same resources"):
        fit_gru_student([ep, other])
    with pytest.raises(ValueError, match="GRUCell"):
        GRUHistory(torch.nn.GRU(27, 8), np.zeros(27), np.ones(27))
    with pytest.raises(ValueError, match="scale > 0"):
        GRUHistory(torch.nn.GRUCell(27, 8), np.zeros(27), np.zeros(27))


def test_the_history_is_chosen_on_validation_weeks_and_the_page_follows():
    from membudget.studies import history_students as hs
    from membudget.studies import online_ceiling as oc

    cfg = hs.HistoryConfig(validation=(1, 2), held_out=(3, 4, 5), grid=((2, ()), (1, (0.9,))), choose_weeks=1,
                           runs=(("B10", 1),), learner_seeds=(0, 1), dagger_seeds=(1,), finetune_seeds=(0,),
                           gru_runs=(("B10", 1),), gru_dagger_seeds=(1,), gru_finetune_seeds=(0,))
    seq = np.full(3, 0.72)
    # on validation the 2-frame history is best; on the held-out weeks it is 0.01 above no history
    f1 = {((2, ()), (1, 2)): 0.8, ((1, (0.9,)), (1, 2)): 0.7, (hs.NO_HISTORY, (1, 2)): 0.75,
          ((2, ()), (3, 4, 5)): 0.73, (hs.NO_HISTORY, (3, 4, 5)): 0.72, ((1, (0.9,)), (3, 4, 5)): 0.99}
    asked = []

    class Fake:
        def map(self, fn, items):
            items = list(items)
            asked.extend((fn.__name__, it) for it in items)
            if fn is oc.planner_labels:
                return [{"demos": None, "cpu": 1.0} for _ in items]
            if fn is oc.references:
                return [{"Sequential": seq[:len(w)]} for _, w in items]
            if fn is hs.history_finetune:
                return [{"set_f1": np.full(3, 0.74), "selected_env_steps": 100, "engine": "autograd",
                         "curve": [(0, 0.75), (100, 0.7625)]} for _ in items]
            if fn is hs.history_net:
                return [f"net of seed {it[2]}" for it in items]
            if fn is hs.student_labels:
                return [("visited", it[0], it[4]) for it in items]
            if fn is hs.history_dagger:
                return [{"set_f1": np.full(3, 0.745), "states": 160} for _ in items]
            if fn is hs.gru_student:
                return [{"set_f1": np.full(3, 0.75 + 0.001 * it[3]), "ms_per_step": 0.08, "timed_set_f1": 0.5}
                        for it in items]
            if fn is hs.gru_fit:
                return [f"gru of seed {it[2]}" for it in items]
            if fn is hs.gru_labels:
                return [("gru visited", it[0], it[3]) for it in items]
            if fn is hs.gru_dagger:
                return [{"set_f1": np.full(3, 0.76), "states": 160} for _ in items]
            if fn is hs.gru_finetune:
                return [{"set_f1": np.full(3, 0.748), "selected_env_steps": 0, "engine": "autograd",
                         "curve": [(0, 0.75), (100, 0.74)]} for _ in items]
            if fn is hs.decision_speed:
                return [{"ms_per_step": 0.05 if it[2] == (2, ()) else 0.04, "set_f1": 0.5} for it in items]
            return [{"set_f1": np.full(len(it[4]), f1[(it[2], tuple(it[4]))] + 0.001 * it[3]),
                     "ms_per_step": 0.2} for it in items]

    res = hs.measure(cfg, progress=lambda m: None, executor=Fake())
    assert res["chosen"] == (2, ())
    held = [it for name, it in asked if name == "history_student" and it[4] == cfg.held_out]
    assert sorted((it[2], it[3]) for it in held) == sorted((h, s) for h in ((2, ()), hs.NO_HISTORY) for s in (0, 1))
    text = hs.render(cfg, res, "cmd")
    assert "| 2 frames | 54 | 0.8000 |" in text
    assert "| B10 | 1 | 0.7200 | 0.7205 | 0.7305 | +0.0100 [+0.0100, +0.0100] | +0.0105 [+0.0105, +0.0105] " \
        "| +0.0005 [+0.0005, +0.0005] |" in text
    assert "History beats no history at B10, 1 weeks: +0.0100 [+0.0100, +0.0100] — met." in text
    assert [it[2] for name, it in asked if name == "decision_speed"] == [(2, ()), hs.NO_HISTORY]
    assert "history student 0.050 ms, no-history student 0.040 ms per decision" in text
    assert "+0.0105 [+0.0105, +0.0105], 0.050 ms — met." in text
    # DAgger: the seed-1 BC student labelled on the development week it plays, refitted with seed 1 (+1 inside)
    assert [it for name, it in asked if name == "student_labels"] == [("net of seed 1", (2, ()), "B10",
                                                                      cfg.planner, 2000)]
    (dag,) = [it for name, it in asked if name == "history_dagger"]
    assert dag[1] == [("visited", "net of seed 1", 2000)] and dag[2:5] == ("B10", (2, ()), 1)
    assert "| 1 | 160 | 0.7310 | 0.7450 | +0.0140 [+0.0140, +0.0140] | +0.0250 [+0.0250, +0.0250] |" in text
    assert "One DAgger round beats BC for the history student at B10: +0.0140 [+0.0140, +0.0140] — met." in text
    # the learned recurrence: one student per learner seed on the first run's labels, against Sequential (0.72) and
    # the frame-stack student (0.7305 over the seeds)
    assert [(it[2], it[3], it[4]) for name, it in asked if name == "gru_student"] == [
        (cfg.gru, s, cfg.held_out) for s in (0, 1)]
    assert "| B10 | 1 | 0.7505 | 0.7500; 0.7510 | +0.0305 [+0.0305, +0.0305] | +0.0200 [+0.0200, +0.0200] |" in text
    assert "(the learned-recurrence student, 1 weeks, 0.080 ms): +0.0305 [+0.0305, +0.0305] — met." in text
    # PPO from the seed-0 history student (0.7300 on the held-out weeks): 0.74
    assert "| 0.7400 | +0.0100 [+0.0100, +0.0100] | +0.0200 [+0.0200, +0.0200] |" in text
    assert "| run | 0 | 100 |\n|---|---|---|\n| seed 0 | 0.7500 | 0.7625 |" in text  # its validation curve
    assert "PPO from the history student >= its BC start with an interval excluding 0 at B10: +0.0100 " \
        "[+0.0100, +0.0100] — met." in text
    # DAgger for the learned recurrence: the seed-1 GRU student's own week labelled, both refitted with seed 1 (+1
    # inside); its start 0.7510 (seed 1's GRU student)
    assert [it for name, it in asked if name == "gru_labels"] == [("gru of seed 1", "B10", cfg.planner, 2000)]
    (gdag,) = [it for name, it in asked if name == "gru_dagger"]
    assert gdag[1] == [("gru visited", "gru of seed 1", 2000)] and gdag[2:5] == ("B10", cfg.gru, 1)
    assert "| 1 | 160 | 0.7510 | 0.7600 | +0.0090 [+0.0090, +0.0090] | +0.0400 [+0.0400, +0.0400] |" in text
    assert "One DAgger round beats BC for the learned-recurrence student at B10: +0.0090 [+0.0090, +0.0090] — met." \
        in text
    # PPO from the seed-0 GRU student (0.7500), its cell frozen, with GAE lambda 0.95 (the fair comparison's) and
    # 1.0: below its start, kept at 0 steps
    gft = [it for name, it in asked if name == "gru_finetune"]
    assert [(it[2:4], it[4].gae_lambda) for it in gft] == [((cfg.gru, 0), 0.95), ((cfg.gru, 0), 1.0)]
    assert gft[1][4] == dataclasses.replace(cfg.finetune_ppo, gae_lambda=1.0)
    assert text.count("| 0.7480 | -0.0020 [-0.0020, -0.0020] | +0.0280 [+0.0280, +0.0280] |") == 2
    assert text.count("each later point lies below the start") == 2  # the GRU runs fell, the history student's rose
    assert text.count("no actor better") == 2
    assert "held-out weeks, GAE lambda 1.0)" in text
    assert "GAE lambda 1.0 instead of 0.95: Monte Carlo advantages, the " \
        "kept actor the best on the validation weeks), started from the learned-recurrence student of learner " \
        "seed(s) 0, through `HistoryTask` over its GRU cell" in text
    for tag in ("", ", GAE lambda 1.0"):
        assert f"PPO from the learned-recurrence student{tag} >= its BC start with an interval excluding 0 at B10: " \
            "-0.0020 [-0.0020, -0.0020] — not met." in text


@pytest.mark.slow
def test_quick_study_runs_and_a_rerun_loads_its_tasks(tmp_path):
    from membudget import evaluate

    cache, out = tmp_path / "cache", tmp_path / "page.md"
    args = ["history-students", "--quick", "--checkpoint-dir", str(cache), "--out", str(out)]
    evaluate.main(args)
    n = len(list(cache.glob("*.pkl")))
    evaluate.main(args[:-1] + [str(tmp_path / "again.md")])
    assert len(list(cache.glob("*.pkl"))) == n
    assert (tmp_path / "again.md").read_text().replace("again.md", "") == out.read_text().replace("page.md", "")


@pytest.mark.slow  # the planner's numba sampler compiles on a cold cache
def test_online_gru_dagger_refits_cell_and_network_on_the_students_own_states():
    """One round: the BC GRU student's own rollouts, labelled by the planner given its history, are added to the
    planner's episodes, and the refit is fit_gru_student on all of them with learner seed + 1."""
    from membudget.agents.history import fit_gru_student
    from membudget.agents.online_imitation import fit_online_gru_dagger, online_episodes, student_episodes

    kw = {"samples": 1, "particles": 8}
    gru = {"hidden": 4, "width": 8, "epochs": 1}
    episodes = online_episodes([2002], "B10", **kw)
    assert len(episodes) == 1 and len(episodes[0].labels) == 80
    student, every = fit_online_gru_dagger([2002], "B10", seed=3, episodes=episodes, **kw, **gru)
    assert len(every) == 2 and every[0] is episodes[0]
    start = fit_gru_student(episodes, seed=3, **gru)
    visited = student_episodes(start, [2002], "B10", **kw)[0]
    for name in ("resources", "mask", "labels"):
        np.testing.assert_array_equal(getattr(every[1], name), getattr(visited, name))
    refit = fit_gru_student(every, seed=4, **gru)
    for a, b in zip(student.history.cell.parameters(), refit.history.cell.parameters()):
        assert torch.equal(a, b)
    for a, b in zip(student.policy.net.parameters(), refit.policy.net.parameters()):
        assert torch.equal(a, b)
    assert student.config["method"] == "online-gru-dagger" and student.config["iterations"] == 1
    with pytest.raises(ValueError, match="iterations"):
        fit_online_gru_dagger([2002], "B10", iterations=0, episodes=episodes, **kw)


def test_ppo_trains_the_network_over_a_frozen_gru_cell_through_the_history_task():
    from membudget.agents.history import fit_gru_student
    from membudget.agents.ppo import train_ppo

    rng = np.random.default_rng(0)
    eps = [Demonstrations(rng.uniform(size=(80, 11, 27)), rng.uniform(size=(80, 9)), np.ones((80, 11)),
                          (rng.uniform(size=(80, 11)) < 0.1).astype(np.float32)) for _ in range(2)]
    student = fit_gru_student(eps, hidden=4, width=8, epochs=1, seed=0)
    cell = [p.detach().clone() for p in student.history.cell.parameters()]
    task = HistoryTask(student.history)
    ppo, _ = train_ppo("B10", task=task, n_envs=2, total_timesteps=320, eval_episodes=1, init=student.policy.net,
                       hidden=(8, 8), keep_best=False)
    assert ppo.net.n_resource_features == 27 + 4
    assert any(not torch.equal(a, b) for a, b in zip(ppo.net.parameters(), student.policy.net.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(cell, student.history.cell.parameters()))
    f1 = task.rollout(ppo, [4000], budget="B10", action_mode="scores")["set_f1"]
    assert np.allclose(f1, task.rollout(task.deployed(ppo), [4000], budget="B10", action_mode="scores")["set_f1"])


def test_fitting_a_student_leaves_the_callers_torch_stream_as_it_was():
    """fit_net and fit_gru_student seed the initial weights inside a forked generator: the same seed gives the same
    network, and the caller's global torch stream continues as if nothing had been fitted."""
    import torch

    from membudget.agents.history import fit_gru_student
    from membudget.agents.imitation import fit_net

    rng = np.random.default_rng(0)
    episodes = [Demonstrations(rng.uniform(size=(5, 3, 27)).astype(np.float32), rng.uniform(size=(5, 9)),
                               np.ones((5, 3)), (rng.uniform(size=(5, 3)) > 0.5).astype(np.float32))
                for _ in range(4)]
    fits = (lambda: fit_net(Demonstrations.concatenate(episodes), hidden=(8, 8), epochs=1, seed=4).state_dict(),
            lambda: fit_gru_student(episodes, hidden=4, width=8, epochs=1, seed=4).policy.net.state_dict())
    for fit in fits:
        torch.manual_seed(123)
        expected = torch.rand(3)
        torch.manual_seed(123)
        first = fit()
        assert torch.equal(torch.rand(3), expected)
        second = fit()
        assert all(torch.equal(first[k], second[k]) for k in first)
