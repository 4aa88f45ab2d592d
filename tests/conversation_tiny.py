"""A small configuration of the conversation study for its backend tests: one budget, two analysis
conversations, gates fitted on two development conversations, and the learned policies (Myopic / Sequential / BC /
DAgger / PPO) stood in for by the fitted Static gate at fixed thresholds, so no learner is trained."""

from __future__ import annotations

SEEDS = (4000, 4001)


def tiny_study(monkeypatch):
    """Shrink the study's table to B60 (no interpolated budgets, two breakdowns, one fixed threshold, two PPO seeds)
    and return its gates."""
    from membudget.agents.gates import StaticGate
    from membudget.baselines.schedules import RelevanceGate
    from membudget.envs.conversation import budget_levels
    from membudget.studies import conversation as study
    from membudget.teachers.conversation import build_conversation_dataset

    for name, value in (("CALIBRATED", ("B60",)), ("INTERPOLATED", ()), ("QUALITY_THRESHOLDS", (0.1,)),
                        ("BREAKDOWN", (("Static", "B60"), ("Pacing", "B60"))), ("PPO_SEEDS", (0, 1))):
        monkeypatch.setattr(study, name, value)
    levels = budget_levels()
    data = build_conversation_dataset([2000, 2001], ("B60",))
    static = StaticGate(n_folds=2).fit(data, levels)
    gates = {"Static": static, "DueGate": StaticGate(label="due", n_folds=2).fit(data, levels),
             "Similarity": RelevanceGate().fit(data, levels)}
    for i, key in enumerate([("myopic", "B60"), ("sequential", "B60"), ("bc", "B60"), ("dagger", "B60"),
                             ("ppo", "B60", 0), ("ppo", "B60", 1)]):
        gates[key] = static if key[0] in ("myopic", "sequential") else study.AtThreshold(static, 0.1 + 0.1 * i)
    return gates
