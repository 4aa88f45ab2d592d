"""Behaviour cloning of the online teacher of ``PMWeek-v0`` (:class:`~membudget.teachers.online.HindsightPlanner`,
which decides from what the agent has seen only), beside the same cloning of the hindsight DP.

:func:`online_demonstrations` plays the planner on each training week and records, at every step, the observation
and the planner's action (its labels); :func:`fit_online_bc` fits the same student as
:func:`~membudget.agents.imitation.fit_bc` (:class:`~membudget.agents.per_resource.PerResourceNet`, class-weighted
cross-entropy on the candidates) to those labels. The student reads the observation only (no history), so it can
imitate the planner only as far as the observation summarises the agent's history.
"""

from __future__ import annotations

import time

import numpy as np

from membudget.agents.imitation import Demonstrations, _net_settings, _settings, _state, fit_net
from membudget.agents.per_resource import StudentPolicy
from membudget.agents.tasks import PMWEEK
from membudget.envs.validation import check_int


def online_demonstrations(seeds, budget, *, samples=4, seed=0, particles=None, **env_kw) -> tuple:
    """States and labels of the online planner's own rollouts on the weeks ``seeds`` at ``budget`` (``samples``:
    its ``K``; ``particles``: its weighted draws per decision, None for its default; ``seed``: its random stream,
    continued across the weeks); ``(Demonstrations, planner)``."""
    from membudget.envs.pm import PMWeekEnv
    from membudget.teachers.observed import AgentView
    from membudget.teachers.online import HindsightPlanner

    check_int("samples", samples, 1)
    env = AgentView(PMWeekEnv(budget=budget, **{"per_step_cap": 2, **env_kw}))
    planner = HindsightPlanner(env=env, n_samples=samples, n_particles=particles, seed=seed).fit()
    out = {k: [] for k in ("resources", "budget", "mask", "labels")}
    for s in seeds:
        obs, _ = env.reset(seed=int(s))
        done = False
        while not done:
            a, _ = planner.predict(obs)
            _state(obs, a.astype(np.float32), out)
            obs, _, done, _, _ = env.step(a)
    return Demonstrations(*(np.stack(out[k]) for k in ("resources", "budget", "mask", "labels"))), planner


def fit_online_bc(train_seeds, budget, *, samples=4, particles=None, epochs=60, hidden=(64, 64), context=True,
                  seed=0, demos=None):
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
