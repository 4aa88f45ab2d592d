"""Behaviour cloning of the online teacher of ``PMWeek-v0`` (:class:`~membudget.teachers.online.HindsightPlanner`,
which decides from what the agent has seen only), beside the same cloning of the hindsight DP.

:func:`online_demonstrations` plays the planner on each training week and records, at every step, the observation
and the planner's action (its labels); :func:`fit_online_bc` fits the same student as
:func:`~membudget.agents.imitation.fit_bc` (:class:`~membudget.agents.per_resource.PerResourceNet`, class-weighted
cross-entropy on the candidates) to those labels. The student reads the observation only (no history), so it can
imitate the planner only as far as the observation summarises the agent's history. :func:`fit_online_dagger` adds
DAgger iterations: the student plays the training weeks, the planner labels every state it reaches (from the
student's own history, through :class:`~membudget.wrappers.OnlineTeacher`), and the student is refitted on all the
labels so far, as :func:`~membudget.agents.imitation.fit_dagger` does with the DP. :func:`fit_online_gru_dagger` runs
the same rounds for the learned-recurrence student (:func:`~membudget.agents.history.fit_gru_student`), refitting
its GRU cell and network together on whole episodes.
"""

from __future__ import annotations

import time

import numpy as np

from membudget.agents.imitation import Demonstrations, StateLog, _net_settings, _settings, fit_net
from membudget.agents.per_resource import StudentPolicy
from membudget.agents.tasks import PMWEEK
from membudget.envs.pm.env import scores_of
from membudget.envs.validation import check_int
from membudget.teachers.online import DEFAULT_SAMPLES


def online_demonstrations(seeds, budget, *, samples=DEFAULT_SAMPLES, seed=0, particles=None, **env_kw) -> tuple:
    """States and labels of the online planner's own rollouts on the weeks ``seeds`` at ``budget`` (``samples``:
    its ``K``, default the studies' 32; ``particles``: its weighted draws per decision, None for its default;
    ``seed``: its random stream, continued across the weeks); ``(Demonstrations, planner)``."""
    from membudget.envs.pm import PMWeekEnv
    from membudget.teachers.observed import AgentView
    from membudget.teachers.online import HindsightPlanner

    check_int("samples", samples, 1)
    env = AgentView(PMWeekEnv(budget=budget, **{"per_step_cap": 2, **env_kw}))
    planner = HindsightPlanner(env=env, n_samples=samples, n_particles=particles, seed=seed).fit()
    log = StateLog()
    for s in seeds:
        obs, _ = env.reset(seed=int(s))
        done = False
        while not done:
            a, _ = planner.predict(obs)
            log.add(obs, a.astype(np.float32))
            obs, _, done, _, _ = env.step(a)
    return log.demonstrations(), planner


def conversation_demonstrations(seeds, budget, *, samples=None, world=None, policy=None, teacher="planner",
                                **env_kw) -> Demonstrations:
    """States of the conversations ``seeds`` at ``budget`` (a level or an int) in ``world`` (None:
    ConversationPM-v1's), each labelled by ``teacher``: ``"planner"``, ConversationPM's online planner
    (:class:`~membudget.teachers.conversation_online.ConversationPlanner`, seeded by each conversation's number, so
    that its play is the conversation-ceiling study's; ``samples``: its ``K``, None for its default), or
    ``"hindsight optimum"`` (:class:`~membudget.teachers.conversation.ConversationOptimum`'s optimal continuation).
    The states are the teacher's own rollouts, or ``policy``'s (a policy-protocol student in ``action_mode="scores"``:
    a DAgger round's states)."""
    from membudget.envs.conversation import ConversationPMEnv
    from membudget.teachers.conversation import ConversationOptimum
    from membudget.teachers.conversation_online import DEFAULT_SAMPLES as CONVERSATION_SAMPLES, ConversationPlanner

    if teacher not in ("planner", "hindsight optimum"):
        raise ValueError(f"teacher must be 'planner' or 'hindsight optimum', got {teacher!r}")
    env = ConversationPMEnv(budget=budget, world=world, action_mode="scores", **{"per_step_cap": 2, **env_kw})
    e = env.unwrapped
    log = StateLog()
    for s in seeds:
        if teacher == "planner":
            labeller = ConversationPlanner(budget=e.budget, per_step_cap=e.per_step_cap,
                                           false_fire_penalty=e.false_fire_penalty, world=e.world,
                                           n_samples=CONVERSATION_SAMPLES if samples is None else samples,
                                           seed=int(s)).fit()
        else:
            labeller = ConversationOptimum(budget=e.budget, per_step_cap=e.per_step_cap,
                                           false_fire_penalty=e.false_fire_penalty)
        obs, _ = env.reset(seed=int(s))
        done, state, start = False, None, True
        while not done:
            label = labeller.act(env).astype(np.float32)
            log.add(obs, label)
            if policy is None:
                action = scores_of(label)
            else:
                action, state = policy.predict(obs, state=state, episode_start=np.array([start]))
                start = False
            obs, _, done, _, _ = env.step(action)
    return log.demonstrations()


def fit_online_bc(train_seeds, budget, *, samples=DEFAULT_SAMPLES, particles=None, epochs=60, hidden=(64, 64),
                  context=True, seed=0, demos=None):
    """Behaviour cloning on the online planner's labels of ``train_seeds`` (or the given ``demos``);
    ``(policy, demos)``."""
    fit = _settings(PMWEEK, seed, None, {"epochs": epochs, "hidden": hidden, "context": context, "calibrate": False})
    start = time.perf_counter()
    if demos is None:
        demos, _ = online_demonstrations(train_seeds, budget, samples=samples, particles=particles, seed=seed)
    net = fit_net(demos, seed=seed, **_net_settings(fit))
    cfg = {"method": "online-bc", "budget": budget, "train_seeds": [int(s) for s in train_seeds], "epochs": epochs,
           "hidden": list(fit["hidden"]), "context": fit["context"], "seed": seed, "samples": samples,
           "particles": particles, "wall_clock": time.perf_counter() - start}
    return StudentPolicy(net, config=cfg), demos


def student_episodes(policy, seeds, budget, *, samples=DEFAULT_SAMPLES, particles=None, **env_kw) -> list:
    """The states ``policy`` reaches on its own rollouts of the weeks ``seeds`` at ``budget``, each labelled by the
    online planner given the student's history (``samples``: its ``K``; ``particles``: its weighted draws; its seed
    on each week: the week's number): one :class:`~membudget.agents.imitation.Demonstrations` per week, its states
    in step order. A policy that carries a state (a recurrent policy, :class:`~membudget.agents.history.HistoryStudent`)
    carries it across the week's steps, restarted at each week's first step."""
    from membudget.wrappers import TEACHER_KEY, OnlineTeacher

    out = []
    for s in seeds:
        env = OnlineTeacher(PMWEEK.make_env(budget, **{"per_step_cap": 2, **env_kw}), samples=samples,
                            n_particles=particles, seed=int(s))
        log = StateLog()
        obs, info = env.reset(seed=int(s))
        done, state, start = False, None, True
        while not done:
            log.add(obs, (np.asarray(info[TEACHER_KEY]) > 0).astype(np.float32))
            action, state = policy.predict(obs, state=state, episode_start=np.array([start]))
            start = False
            obs, _, done, _, info = env.step(action)
        out.append(log.demonstrations())
    return out


def student_demonstrations(policy, seeds, budget, *, samples=DEFAULT_SAMPLES, particles=None,
                            **env_kw) -> Demonstrations:
    """:func:`student_episodes` of the weeks ``seeds`` in one set of demonstrations."""
    return Demonstrations.concatenate(student_episodes(policy, seeds, budget, samples=samples, particles=particles,
                                                       **env_kw))


def fit_online_dagger(train_seeds, budget, *, samples=DEFAULT_SAMPLES, particles=None, iterations=1, seed=0,
                      demos=None):
    """DAgger with the online planner as the teacher, every fit with the package's BC settings
    (:data:`~membudget.agents.configs.DEFAULTS`, uncalibrated): a fit to the planner's labels of ``train_seeds``
    (or the given ``demos``), then ``iterations`` rounds of :func:`student_demonstrations` on ``train_seeds``,
    each followed by a refit on all the labels so far (learner seed ``seed + round``, as
    :func:`~membudget.agents.imitation.fit_dagger`); ``(policy, demos)`` with every label used."""
    check_int("iterations", iterations, 1)
    fit = _net_settings(_settings(PMWEEK, seed, None, {"calibrate": False}))
    if demos is None:
        demos, _ = online_demonstrations(train_seeds, budget, samples=samples, particles=particles, seed=seed)
    cfg = {"method": "online-dagger", "budget": budget, "train_seeds": [int(s) for s in train_seeds], "seed": seed,
           "samples": samples, "particles": particles, "iterations": iterations}
    parts = [demos]
    net = fit_net(demos, seed=seed, **fit)
    for it in range(iterations):
        student = StudentPolicy(net, config=cfg)
        parts.append(student_demonstrations(student, train_seeds, budget, samples=samples, particles=particles))
        net = fit_net(Demonstrations.concatenate(parts), seed=seed + it + 1, **fit)
    return StudentPolicy(net, config=cfg), Demonstrations.concatenate(parts)


def online_episodes(seeds, budget, *, samples=DEFAULT_SAMPLES, particles=None, **env_kw) -> list:
    """The online planner's labels of its own rollouts, one :class:`~membudget.agents.imitation.Demonstrations` per
    week of ``seeds`` (states in step order; the planner's seed on each week: the week's number, as in the
    studies), for students that read whole episodes (:func:`~membudget.agents.history.fit_gru_student`)."""
    return [online_demonstrations([int(w)], budget, samples=samples, particles=particles, seed=int(w), **env_kw)[0]
            for w in seeds]


def fit_online_gru_dagger(train_seeds, budget, *, samples=DEFAULT_SAMPLES, particles=None, iterations=1, seed=0,
                          episodes=None, **gru) -> tuple:
    """DAgger with the online planner as the teacher for the learned-recurrence student: a
    :func:`~membudget.agents.history.fit_gru_student` fit (settings ``gru``) to the planner's labels of
    ``train_seeds`` (:func:`online_episodes`, or the given ``episodes``, one per week), then ``iterations`` rounds
    of :func:`student_episodes` on ``train_seeds`` (the planner labels the states the student reaches, given the
    student's own history), each followed by a refit of the cell and the network together on every episode so far
    (learner seed ``seed + round``, as :func:`fit_online_dagger`); ``(HistoryStudent, episodes)`` with every
    labelled episode used."""
    from membudget.agents.history import fit_gru_student

    check_int("iterations", iterations, 1)
    train_seeds = [int(w) for w in train_seeds]
    if episodes is None:
        episodes = online_episodes(train_seeds, budget, samples=samples, particles=particles)
    episodes = list(episodes)
    cfg = {"method": "online-gru-dagger", "budget": budget, "train_seeds": train_seeds, "samples": samples,
           "particles": particles, "iterations": iterations}
    student = fit_gru_student(episodes, seed=seed, config=cfg, **gru)
    for it in range(iterations):
        episodes += student_episodes(student, train_seeds, budget, samples=samples, particles=particles)
        student = fit_gru_student(episodes, seed=seed + it + 1, config=cfg, **gru)
    return student, episodes
