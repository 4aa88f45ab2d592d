"""Time per decision of the deployed learned allocators on ``PMWeek-v0``, one observation at a time on one core:
the measure of issue 31's deployability goal (at most 0.1 ms per decision), on the machine at hand, without running
the studies that report it (docs/history_students.md, docs/online_ceiling.md).

``python -m membudget.bench.deployed`` fits, with one torch thread, the three classes of those studies on the
hindsight DP's labels of the development weeks ``--train-weeks`` at ``--budget``:

- ``one observation``: BC of a :class:`~membudget.agents.per_resource.PerResourceNet` with the package's defaults
  (:func:`~membudget.agents.imitation.fit_net`), deployed as a :class:`~membudget.agents.per_resource.StudentPolicy`;
- ``frame stack``: the same network over :class:`~membudget.agents.history.History` (4 frames, decay 0.9), deployed
  as a :class:`~membudget.agents.history.HistoryStudent`;
- ``learned recurrence``: :func:`~membudget.agents.history.fit_gru_student` (a GRU cell of 64 units).

The time of a decision depends on the network's shapes and the candidates at each step, not on what the weights
learned, so the students fitted here (few epochs, the DP's labels) time as the studies' students (the planner's
labels) do. Each round times CartPole-v1's ``step`` (the anchor, unwrapped, random actions), then plays every week
of ``--weeks`` with each student, one ``predict`` call per step with its state carried, and keeps the median
milliseconds of the calls (:func:`~membudget.studies.online_ceiling.timed_week`, as the studies time them). The
summary gives, per student, the median over the rounds, the ratio to CartPole's step and the goal's verdict,
beside the CPU capability.

``python -m membudget.bench.deployed [--rounds 3] [--weeks 8000-8009] [--budget B10] [--train-weeks 2000-2039]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from membudget.envs.validation import int_flag, seeds_flag
from membudget.studies.cli import plain

GOAL_MS = 0.1
"""Issue 31's goal for a deployable allocator: milliseconds per decision, one core."""
FRAMES, DECAYS = 4, (0.9,)
"""The frame-stack history the history-students study chose."""


def students(train_weeks, budget) -> dict:
    """The three deployed students (module docstring), fitted on the DP's labels of ``train_weeks``."""
    from membudget.agents.history import History, HistoryStudent, fit_gru_student, history_demonstrations
    from membudget.agents.imitation import Demonstrations, dp_demonstrations, fit_net
    from membudget.agents.per_resource import StudentPolicy

    weeks = [dp_demonstrations([w], budget) for w in train_weeks]
    history = History(FRAMES, DECAYS)
    return {"one observation": StudentPolicy(fit_net(Demonstrations.concatenate(weeks), epochs=5)),
            "frame stack": HistoryStudent(fit_net(history_demonstrations(weeks, history), epochs=5), history),
            "learned recurrence": fit_gru_student(weeks, epochs=3)}


def cartpole_ms(steps=20_000) -> float:
    """Milliseconds per ``CartPoleEnv.step`` (unwrapped, random actions drawn in advance, resets not timed)."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    env = CartPoleEnv()
    env.reset(seed=0)
    actions = np.random.default_rng(0).integers(0, 2, steps).tolist()
    total = 0.0
    for a in actions:
        t0 = time.perf_counter()
        _, _, term, trunc, _ = env.step(a)
        total += time.perf_counter() - t0
        if term or trunc:
            env.reset()
    return 1e3 * total / steps


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m membudget.bench.deployed", description=plain(__doc__),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int_flag(1), default=3)
    parser.add_argument("--weeks", type=seeds_flag("--weeks"), default=list(range(8000, 8010)),
                        help="the weeks played, e.g. 8000-8009 (default)")
    parser.add_argument("--budget", choices=("B5", "B10", "B20"), default="B10")
    parser.add_argument("--train-weeks", type=seeds_flag("--train-weeks"), default=list(range(2000, 2040)),
                        help="the development weeks whose DP labels the students are fitted on (default 2000-2039)")
    args = parser.parse_args(argv)

    import torch

    from membudget.studies.online_ceiling import timed_week

    torch.set_num_threads(1)
    print(f"CPU: torch capability {torch.backends.cpu.get_cpu_capability()}; one torch thread")
    policies = students(args.train_weeks, args.budget)
    for policy in policies.values():  # compiles (or loads) the kernels outside the timing
        timed_week(policy, args.budget, args.weeks[0])
    rows = {name: [] for name in policies}
    anchors = []
    print(f"{'round':>5} {'CartPole step ms':>17} " + " ".join(f"{name + ' ms':>22}" for name in policies))
    for r in range(args.rounds):
        anchors.append(cartpole_ms())
        for name, policy in policies.items():
            rows[name].append(float(np.median([timed_week(policy, args.budget, w)[0] for w in args.weeks])))
        print(f"{r:>5} {anchors[-1]:>17.4f} " + " ".join(f"{rows[name][-1]:>22.4f}" for name in policies))
    anchor = float(np.median(anchors))
    for name, values in rows.items():
        ms = float(np.median(values))
        print(f"{name}: median {ms:.4f} ms per decision, {ms / anchor:.1f}x CartPole's step ({anchor:.4f} ms), "
              f"{args.budget}, weeks {args.weeks[0]}-{args.weeks[-1]} (target <= {GOAL_MS} ms: "
              f"{'met' if ms <= GOAL_MS else 'not met'})")


if __name__ == "__main__":
    main()
