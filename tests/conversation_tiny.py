"""Small conversations for the ConversationPM tests: :func:`tiny`, a hand-built conversation with exact scores, and
:func:`play`; and a small configuration of the conversation study for its backend tests (one budget, two analysis
conversations, gates fitted on two development conversations, and the learned policies — Myopic / Sequential / BC
/ DAgger / PPO — stood in for by the fitted Static gate at fixed thresholds, so no learner is trained)."""

from __future__ import annotations

import numpy as np

SEEDS = (4000, 4001)
T = 12


def tiny(verifier_pairs, candidate_pairs=(), base_pairs=()):
    """One prospective test (pm1: live 2..5, n = 4, fires at 5) and one trigger test (tr1: live 2..10, fires at
    4, 7, 10). Candidates: the true fires, (3, pm1), (6, tr1) (a lure) plus ``candidate_pairs``; the verifier says
    "fires" on ``verifier_pairs``; the base response executes ``base_pairs``."""
    from membudget.envs.conversation import Conversation

    tok = np.zeros((T, 2))
    tok[2:6, 0] = 0.01  # live, below the gate
    for t, r in [(3, 0), (5, 0), (4, 1), (7, 1), (10, 1), (6, 1), *candidate_pairs]:
        tok[t, r] = 0.5
    ver, base = np.zeros((T, 2), dtype=np.int8), np.zeros((T, 2), dtype=np.int8)
    for t, r in verifier_pairs:
        ver[t, r] = 1
    for t, r in base_pairs:
        base[t, r] = 1
    kinds = np.zeros(T, dtype=np.int64)
    return Conversation(horizon=T, gate=0.05, message_kind=kinds, message_test=np.full(T, -1),
                        test_ids=("pm1", "tr1"), test_kind=np.array([0, 1]), stored=np.array([0, 1]),
                        live_from=np.array([2, 2]), live_until=np.array([5, 10]), ordinal=np.array([4, 0]),
                        fires=((5,), (4, 7, 10)), token_similarity=tok, fuzzy_similarity=tok.copy(),
                        repeat_fraction=np.zeros((T, 2)), verifier=ver, base=base)


def play(conv, queries, **kw):
    """Play ``conv`` proposing the ``(step, memory)`` pairs ``queries``; ``(rewards, infos)`` of every step."""
    from membudget.envs.conversation import ConversationConfig, ConversationPMEnv

    env = ConversationPMEnv(world=ConversationConfig(n_prospective=1, n_trigger=1), **kw)
    env.reset(options={"conversation": conv})
    rewards, infos = [], []
    for t in range(T):
        a = np.zeros(2, dtype=np.int8)
        a[[r for s, r in queries if s == t]] = 1
        _, reward, term, _, info = env.step(a)
        rewards.append(reward)
        infos.append(info)
    assert term
    return rewards, infos


def tiny_study(monkeypatch):
    """Shrink the study's table to B60 (no interpolated budgets, two breakdowns, one fixed threshold, Static uncapped
    at B60, two PPO seeds)
    and return its gates."""
    from membudget.agents.gates import StaticGate
    from membudget.baselines.schedules import RelevanceGate
    from membudget.envs.conversation import budget_levels
    from membudget.studies import conversation as study
    from membudget.teachers.conversation import build_conversation_dataset

    for name, value in (("CALIBRATED", ("B60",)), ("INTERPOLATED", ()), ("QUALITY_THRESHOLDS", (0.1,)),
                        ("BREAKDOWN", (("Static", "B60"), ("Pacing", "B60"))), ("PPO_SEEDS", (0, 1)),
                        ("UNCAPPED", ("B60",))):
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
