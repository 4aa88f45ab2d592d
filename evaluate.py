"""Evaluation entry point (``python -m membudget.evaluate`` or ``python evaluate.py``): a thin command line over
the studies in :mod:`membudget.studies`.

``python -m membudget.evaluate [--quick] [flags]`` (no subcommand): BudgetPM's headline table on PMWeek-v0
(:mod:`membudget.studies.budgetpm`; ``--quick`` is the README's main job). Subcommands, each with its own
``--help``:

- ``report``: every BudgetPM finding re-measured (the page reproduction.md);
- ``structure``: its structural part alone (greedy Set F1, exact-cost DP headroom, load intervention);
- ``rl-vs-distillation [--quick]``: PPO, DAgger→PPO, BC and DAgger (and, at B10, PPO with a counts critic, a
  flat-MLP PPO and SB3's PPO) against the hindsight DP, current-greedy and the gates (rl_vs_distillation.md);
- ``replay``: LIMBO's comparison on ReplayStream-v1 (``--env-version 0``: v0); ``replay-alpha``: LinUCB's alpha
  (its decay and model) on development streams; ``replay-diagnose``: why LinUCB chooses what it does, on development
  streams (replay_stream.md);
- ``tiers [--quick]``: BudgetMem's tier routers on TierRouting-v0;
- ``proactive``: ProactMem's memory-layer comparison on ProactiveStream-v1, v0's tables kept (proactive_stream.md);
- ``shared-budget``: the shared-quota comparison (2, 3, 5 agents) (shared_budget.md);
- ``conversation``: BudgetPM's GoodAI comparison on ConversationPM-v1, v0's study kept (conversation.md);
- ``online-ceiling [--quick]``: the online planner (posterior draws, hindsight optimisation) bracketed between
  Sequential and the hindsight DP, and students distilled from it against students of the DP (online_ceiling.md);
- ``history-students [--quick]``: students of the online planner that see their history against students of one
  observation (history_students.md);
- ``imitation-gap [--quick]``: students of the online planner against students of the hindsight DP at equal data,
  for a student of one observation and a learned-recurrence student (imitation_gap.md);
- ``conversation-ceiling [--quick]``: ConversationPM's online planner bracketed with the informed optimum, against
  BudgetPM's gates (conversation_ceiling.md);
- ``labels``: the imitation-label dataset in week-chunk tasks;
- ``demonstrations``: the hindsight DP's demonstrations as a Minari dataset, one DP task per week;
- ``show --policy NAME|--model PATH [--budget B10] [--week 9000] [--out FILE.png]``: a picture of one week played
  by a policy beside the hindsight DP's schedule.

A study writes its page into a new run folder, ``runs/<study>/<time>/``, unless ``--out`` names another place
(``--out docs/<page>`` regenerates the documentation's page); it never writes over docs/ by default. The main job
and ``structure`` print their tables (the main job's ``--out`` writes them too).
``--backend local|ray`` (and ``--address`` for an existing Ray cluster) on every study and generator runs its work
as deterministic tasks, on Ray with the same numbers as locally (docs/ray.md).
"""

from __future__ import annotations

import importlib
import sys

DEFAULT = "membudget.studies.budgetpm:main"
"""The study run without a subcommand."""

SUBCOMMANDS = {
    "report": "membudget.studies.budgetpm_reproduction:main",
    "structure": "membudget.studies.budgetpm_reproduction:structure_main",
    "rl-vs-distillation": "membudget.studies.rl_vs_distillation.report:benchmark_main",
    "replay": "membudget.studies.limbo:replay_main",
    "replay-alpha": "membudget.studies.limbo:select_alpha_main",
    "replay-diagnose": "membudget.studies.limbo:diagnose_main",
    "tiers": "membudget.studies.budgetmem:main",
    "proactive": "membudget.studies.proactmem:main",
    "shared-budget": "membudget.studies.shared_quota:main",
    "conversation": "membudget.studies.conversation:main",
    "online-ceiling": "membudget.studies.online_ceiling:main",
    "history-students": "membudget.studies.history_students:main",
    "imitation-gap": "membudget.studies.imitation_gap:main",
    "conversation-ceiling": "membudget.studies.conversation_ceiling:main",
    "labels": "membudget.studies.generate:labels_main",
    "demonstrations": "membudget.studies.generate:demonstrations_main",
    "show": "membudget.studies.show:main",
}
"""``python -m membudget.evaluate <name> ...``: the entry point (``module:function``, imported on use) that takes
the remaining arguments. A new study adds one line here."""


def entry_point(target: str):
    module, function = target.split(":")
    return getattr(importlib.import_module(module), function)


def main(argv=None):
    from membudget.studies.cli import optional_extras, plain, usage_error

    prog = "python -m membudget.evaluate"
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] and argv[0] in SUBCOMMANDS:
        with optional_extras(f"{prog} {argv[0]}"):  # a missing extra (ray, minari, ...): one line, its install
            return entry_point(SUBCOMMANDS[argv[0]])(argv[1:])
    if argv[:1] and not argv[0].startswith("-"):
        usage_error(prog, f"unknown study {argv[0]!r}; the studies are {', '.join(SUBCOMMANDS)} (none: BudgetPM's "
                          "headline table)")
    if argv[:1] in (["-h"], ["--help"]):
        print(plain(__doc__))
    with optional_extras(prog):
        return entry_point(DEFAULT)(argv)


if __name__ == "__main__":
    main()
