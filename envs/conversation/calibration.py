"""Measured statistics of a conversation world on the development conversations beside the figures it is calibrated
to (``python -m membudget.envs.conversation calibrate``; ``--world v0`` for the earlier world).

The targets: BudgetPM's published world-level GoodAI figures (candidate rows per 12 development trajectories, the
all-semantic mean cost 51.5 behind B20/B40/B60/B80 = 10/21/31/41, the 66-message development-median horizon), the
component accuracies its unconstrained reference must reach for its budgeted figures to be possible, and — for the
base response, which BudgetPM does not report — GoodAI's own measured agent results at the 1k-token span, the span
whose spacing of scripted lines our conversations have (``/work/shared/refs/goodai_ltm.md``: quote to instruction
14 [1-17] user messages, trigger-response lines 7 [0-9] apart), except the quotes recited before reply n, whose
share BudgetPM's Due gate figure bounds (:data:`RECITED_ELSEWHERE`). Never the analysis conversations 4000-4029.
"""

from __future__ import annotations

import numpy as np

from .env import FALSE_FIRE_PENALTY, ceiling_calls, conversation_score, leave_one_out_effects
from .levels import DEV_SEEDS, budget_levels
from .world import PROSPECTIVE, WORLD_V0, WORLD_V1, ConversationConfig, generate_conversation, pair_probabilities

WORLDS = {"v1": WORLD_V1, "v0": WORLD_V0}


def _pm_outcomes(fired_p, conv, j):
    """(P(correct), P(recited elsewhere)) of prospective test ``j`` when the reply executes it on each message with
    probability ``fired_p[:, j]`` independently: GoodAI's failure modes — the quote recited in an earlier counted
    reply, else in reply n (correct), else nowhere (omitted)."""
    due = conv.fires[j][0]
    recited = 1.0 - np.prod(1.0 - fired_p[conv.live_from[j]:due, j])
    return (1.0 - recited) * fired_p[due, j], recited


def conversation_statistics(conv, config: ConversationConfig | None = None,
                            false_fire_penalty: float = FALSE_FIRE_PENALTY) -> dict:
    """One conversation's world-level statistics (see :data:`TARGETS`) as drawn; with ``config``, also their
    expectations over ``config``'s draws of the verifier and the base response given the conversation's messages
    (keys ending in ``_expected``)."""
    cand = conv.candidates()
    is_pm = conv.test_kind == PROSPECTIVE
    acts = conv.truth() & ~is_pm[None, :]
    out = {"horizon": conv.horizon, "candidate_rows": int(cand.sum())}
    drawn = {"": (conv.verifier > 0, conv.base > 0)}
    if config is not None:
        drawn["_expected"] = pair_probabilities(conv, config)
    for suffix, (ver, base) in drawn.items():
        ver, base = ver.astype(float), base.astype(float)
        every = np.where(cand, ver, base)  # All-semantic's reply
        pm = [_pm_outcomes(every, conv, j) for j in np.flatnonzero(is_pm)]
        alone = [_pm_outcomes(base, conv, j) for j in np.flatnonzero(is_pm)]
        out.update({
            "all_semantic_pm_accuracy" + suffix: float(np.mean([c for c, _ in pm])),
            "all_semantic_tr_accuracy" + suffix: float(every[acts].mean()),
            "base_pm_correct" + suffix: float(np.mean([c for c, _ in alone])),
            "base_pm_recited_elsewhere" + suffix: float(np.mean([r for _, r in alone])),
            "base_pm_omitted" + suffix: float(np.mean([1.0 - c - r for c, r in alone])),
            "base_tr_accuracy" + suffix: float(base[acts].mean())})
    effect = leave_one_out_effects(conv, false_fire_penalty)[cand]
    out["outcome_due_disagreement"] = float(np.mean((effect > 1e-12) != conv.truth()[cand]))
    out["ceiling_macro_accuracy"] = conversation_score(conv, ceiling_calls(conv), false_fire_penalty)["macro_accuracy"]
    return out


def _within(target, tol):
    return lambda v: abs(v - target) <= tol


TARGETS = {
    "horizon_median": ("66 (BudgetPM B.6)", lambda v: v == 66),
    "candidate_rows_12": ("670 +- 10% (BudgetPM A.3)", lambda v: abs(v - 670) <= 67),
    "all_semantic_cost": ("[51.25, 51.875): 10/21/31/41 (51.5)", lambda v: 51.25 <= v < 51.875),
    "all_semantic_pm_accuracy": ("0.99 +- 0.01 (implied)", _within(0.99, 0.01)),
    "all_semantic_tr_accuracy": ("0.95 +- 0.015 (implied)", _within(0.95, 0.015)),
    "base_pm_correct": ("0.26 +- 0.05 (GoodAI 1k, 10/39)", _within(0.26, 0.05)),
    "base_pm_recited_elsewhere": ("0.025 +- 0.01 (Due gate, implied)", _within(0.025, 0.01)),
    "base_pm_omitted": ("0.715 +- 0.05 (the rest)", _within(0.715, 0.05)),
    "base_tr_accuracy": ("0.79 +- 0.03 (GoodAI 1k)", _within(0.79, 0.03)),
    "outcome_due_disagreement": (">= 0.10 of the rows (issue #35)", lambda v: v >= 0.10),
    "ceiling_macro_accuracy": (">= 0.975 (issue #35)", lambda v: v >= 0.975),
}
"""``statistic: (target, met)``. "Implied": the unconstrained reference must reach at least BudgetPM's best budgeted
figures — Static's prospective-memory accuracy 0.99 at B60 and Pacing's macro accuracy 0.971 at B80, so
trigger response >= 2 x 0.971 - 0.99 = 0.952; the base recitations before reply n: :data:`RECITED_ELSEWHERE`. The
base response and the leave-one-out Outcome label are the
world's; the ceiling is the unconstrained hindsight optimum (:func:`~membudget.envs.conversation.ceiling_calls`)."""


DRAWN_ONLY = ("horizon_median", "candidate_rows_12", "all_semantic_cost", "outcome_due_disagreement",
              "ceiling_macro_accuracy")
"""Statistics without an expectation column: the structure (the same in every draw of the verifier and the base
response), the labels and the ceiling (measured on the drawn conversations)."""


def calibrate(seeds=DEV_SEEDS, config: ConversationConfig | None = None) -> dict:
    """Statistics over the conversations ``seeds`` (default: development conversations 2000-2011): means (the
    median horizon; candidate rows scaled to 12 conversations), as drawn and — keys ending in ``_expected`` — in
    expectation over the world's draws of the verifier and the base response on those conversations."""
    config = config or WORLD_V1
    seeds = list(seeds)
    stats = [conversation_statistics(generate_conversation(s, config), config) for s in seeds]
    rows = np.array([s["candidate_rows"] for s in stats])
    out = {"horizon_median": float(np.median([s["horizon"] for s in stats])),
           "candidate_rows_12": float(rows.mean() * 12), "all_semantic_cost": float(rows.mean())}
    for k in stats[0]:
        if k not in ("horizon", "candidate_rows"):
            out[k] = float(np.mean([s[k] for s in stats]))
    return out


def report(seeds=DEV_SEEDS, config: ConversationConfig | None = None, name: str = "v1") -> str:
    seeds = list(seeds)
    config = config or WORLDS[name]
    stats = calibrate(seeds, config)
    lines = [f"ConversationPM-{name} world on conversations {seeds[0]}-{seeds[-1]} ({len(seeds)} conversations): "
             "'expected' over the world's draws of", "the verifier and the base response given these conversations' "
             "messages (what the parameters are fitted to), 'drawn' as drawn", "",
             f"{'statistic':<28}{'expected':>9}{'drawn':>9}  {'target':<38}{'met':>4}"]
    for k, (target, ok) in TARGETS.items():
        value = stats[k] if k in DRAWN_ONLY else stats[k + "_expected"]
        expected = "" if k in DRAWN_ONLY else f"{value:.3f}"
        lines.append(f"{k:<28}{expected:>9}{stats[k]:>9.3f}  {target:<38}{'yes' if ok(value) else 'NO':>4}")
    lines += ["", "budget levels: " + ", ".join(f"{k}={v}" for k, v in budget_levels(config).items()),
              "BudgetPM:      B20=10, B40=21, B60=31, B80=41",
              "", "world parameters: " + ", ".join(f"{k}={v}" for k, v in vars(config).items())]
    return "\n".join(lines)


RECITED_ELSEWHERE = 0.025
"""Share of prospective tests whose quote the base response recites before reply n, implied by BudgetPM's Due gate:
it reaches 0.946 - 0.0133 = 0.933 at B60 (Table 9) and, trained on "the trigger is due", verifies no reply before
n, so it leaves every such recitation in. With its trigger response at Static's 0.90 its prospective-memory accuracy
is 2 x 0.933 - 0.90 = 0.965, 0.025 below Static's 0.99, which verifies those replies. (GoodAI's plain LLM at the 1k
span recites elsewhere in 16 of 39 tests; with that rate the Due gate could not exceed about 0.8.) The base
response's correct share stays GoodAI's 10/39; the omitted share is the rest."""

GOODAI_TRIGGER_DECAY = 0.0029
"""Fall of the base trigger-response probability per user message between setup and activation: the least-squares
slope of GoodAI's measured trigger-response accuracy (0.79 / 0.52 / 0.65 / 0.65 / 0.45 at the 1k / 32k / 120k /
200k / 500k spans) against the mean setup-to-activation distance, 2 x (median messages between scripted lines
7 / 25 / 32 / 36.5 / 57 + 1)."""


def fit(seeds=DEV_SEEDS, start: ConversationConfig = WORLD_V0) -> dict:
    """The base-response and verifier parameters that put the expectations of :func:`calibrate` on the development
    conversations ``seeds`` at their targets, each solved in closed form or by bisection (the conversations'
    messages and similarities do not depend on them): ``p_base_early`` -> recited elsewhere
    :data:`RECITED_ELSEWHERE`,
    ``p_base_due`` -> correct 10/39, ``p_base_trigger`` (with :data:`GOODAI_TRIGGER_DECAY`) -> base trigger
    response 0.79, ``p_miss_trigger`` -> All-semantic trigger response 0.952, ``p_miss_prospective`` and
    ``p_false_prospective`` (in v0's ratio 10 : 3) -> All-semantic prospective memory 0.99. The rest stay
    ``start``'s; the base response's false fires on lures and other candidates take the verifier's rates (no
    published figure)."""
    from scipy.optimize import brentq

    convs = [generate_conversation(s, start) for s in seeds]
    pm = [(c, j) for c in convs for j in np.flatnonzero(c.test_kind == PROSPECTIVE)]
    acts = [(c, t, j) for c in convs for t, j in np.argwhere(c.truth() & (c.test_kind != PROSPECTIVE)).tolist()]

    def early_share(p):  # P(recited elsewhere) with p_base_early = p; the reply counter's similarity is c's tok
        return np.mean([1.0 - np.prod(1.0 - p * c.token_similarity[c.live_from[j]:c.fires[j][0], j]) for c, j in pm])

    early = brentq(lambda p: early_share(p) - RECITED_ELSEWHERE, 0.0, 1.0)
    due = (10 / 39) / (1.0 - early_share(early))
    distance = np.mean([t - c.stored[j] for c, t, j in acts])
    trigger = 0.79 + GOODAI_TRIGGER_DECAY * distance  # the decay never reaches 0 on these conversations
    below = [trigger - GOODAI_TRIGGER_DECAY * (t - c.stored[j]) for c, t, j in acts if not c.candidates()[t, j]]
    miss_tr = 1.0 - (0.952 * len(acts) - sum(below)) / (len(acts) - len(below))  # base answers below the gate
    replies = [c.fires[j][0] - c.live_from[j] for c, j in pm]
    ratio = start.p_false_prospective / start.p_miss_prospective
    miss_pm = brentq(lambda m: (1.0 - m) * np.mean([(1.0 - ratio * m) ** n for n in replies]) - 0.99, 0.0, 0.5)
    return {"p_base_due": due, "p_base_early": early, "p_base_trigger": trigger,
            "base_trigger_decay": GOODAI_TRIGGER_DECAY, "p_base_lure": start.p_false_lure,
            "p_base_false": start.p_false, "p_miss_trigger": miss_tr, "p_miss_prospective": miss_pm,
            "p_false_prospective": ratio * miss_pm}
