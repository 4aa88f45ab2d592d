"""Batched PM-week dynamics: the hard-cap executor, the controller, scoring and the observation features.

:class:`PMWeekCore` holds ``n`` weeks side by side in padded numpy arrays and advances them with numba kernels.
The single environment is a core of one week and the vector environment a core of ``num_envs`` weeks, so both
run exactly the same code.
"""

from __future__ import annotations

import warnings
from collections import namedtuple
from typing import NamedTuple

import numba
import numpy as np
from numba.core import types
from numba.core.errors import NumbaPendingDeprecationWarning
from numba.experimental import structref

from ..jit import njit_leaf
from .world import (GB, GC, GI, KIND_CHANNEL, KIND_TIME, KIND_VISIBLE, LURE, OUTCOME, POS,
                    Episode, WorldConfig, _draw_week, _world_constants, draw_arguments, named_indices)

N_RESOURCE_FEATURES = 27
N_BUDGET_FEATURES = 9

RESOURCE_FEATURE_NAMES = (
    "sin_time_of_day", "cos_time_of_day", "sin_weekday", "cos_weekday", "urgency", "signed_window_distance",
    "abs_window_distance", "cost", "is_clock", "candidate_count", "open_count", "max_relevance",
    "sum_relevance", "resolvability", "mean_priority", "max_priority", "max_miss_cost", "unknown_conditions",
    "frac_time", "frac_channel", "frac_cross_day", "frac_revised", "age_since_query", "unchanged_count",
    "ever_queried", "legacy_utility", "calibrated_utility",
)
BUDGET_FEATURE_NAMES = (
    "target_fraction", "remaining_fraction", "progress", "remaining_horizon", "remaining_per_step",
    "spend_minus_progress", "queries_last5", "queries_last10", "queries_prev",
)
assert len(RESOURCE_FEATURE_NAMES) == N_RESOURCE_FEATURES and len(BUDGET_FEATURE_NAMES) == N_BUDGET_FEATURES
RF = named_indices("ResourceFeature", RESOURCE_FEATURE_NAMES)
"""Column of each resource feature in ``obs["resources"]``: ``RF.urgency == 4``."""
BF = named_indices("BudgetFeature", BUDGET_FEATURE_NAMES)
"""Column of each budget feature in ``obs["budget"]``."""
N_CALENDAR = 4
"""The calendar features (``PMWeekCore.cal``) are the first resource features, in the same columns."""
assert RF.cos_weekday == N_CALENDAR - 1

# Columns of the per-intention integer table.
(F_RES, F_AF, F_AU, F_DS, F_DE, F_ON, F_DL, F_POL, F_KIND, F_PRIO, F_CROSS, F_REV, F_REG, F_DUE_END,
 F_US) = range(15)
N_FIELDS = 15
L_INDEX = N_FIELDS  # the column of a live row (see _advance) that holds the intention's index

_NEVER_LIVE = np.iinfo(np.int32).max

# Intention status codes (0 = unresolved).
S_OPEN, S_HIT, S_FALSE, S_LATE_MISS, S_LATE_EXEC, S_EXPIRED_NEG = range(6)

EV_MISS = 6
EVENT_NAMES = ("", "hit", "false_execution", "late_miss", "late_execution", "expired_negative", "miss")
"""Names of the codes in ``PMWeekCore.ev_list`` (the status codes, then EV_MISS)."""
EVL = named_indices("EventListColumn", ("intention", "code"))
"""Columns of ``PMWeekCore.ev_list``: a step's events as (hidden intention index, EVENT_NAMES code)."""

EVENT_COLUMNS = ("tp", "fp", "fn", "late_execution", "late_miss", "expired_negative", "n_events")
EV = named_indices("EventColumn", EVENT_COLUMNS)
"""Columns of the step's ``events`` output: counts per kind, then the number of ``ev_list`` entries."""

VIS_DUE, VIS_HIT = range(2)
"""Columns of ``PMWeekCore.vis_counts``: a week's visible positives due within the horizon, and executed."""

# Skip reasons of the executor: the columns of the step's ``skipped`` output.
SKIP_NAMES = ("non_candidate", "budget", "count_cap", "cost_cap")
SK = named_indices("SkipColumn", SKIP_NAMES)

# Episode metrics vector.
METRIC_NAMES = (
    "set_f1", "tp", "fp", "fn", "on_time_recall", "realized_cost", "queries", "exhaustion_step",
    "spend_q1", "spend_q2", "spend_q3", "spend_q4", "on_time_hit", "late_execution", "miss", "false_alarm",
    "update_violation", "time_due", "time_hit", "channel_due", "channel_hit", "cross_day_due", "cross_day_hit",
    "update_sensitive_due", "update_sensitive_hit",
)
M = {name: i for i, name in enumerate(METRIC_NAMES)}
MT = named_indices("MetricColumn", METRIC_NAMES)  # M for the kernels

VIS_STEP = named_indices("VisibleStep", ("tp", "fp", "fn"))
"""Columns of ``PMWeekCore.vis_step``: a step's fixed visible outcomes."""
# Columns of the kernel's per-resource scratch counts over the open intentions.
CNT = named_indices("ResourceCount", ("open", "candidate", "in_window", "max_urgency", "sum_priority", "max_priority",
                                      "max_miss_cost", "unknown", "time", "channel", "cross_day", "revised"))

# Running counters per week.
C_TP, C_FP, C_FN, C_COST, C_QUERIES, C_EXHAUST, C_LATE_EXEC, C_FALSE_ALARM, C_UPDATE_VIOL = range(9)
N_COUNTERS = 9

INTENTION_COLUMNS = ("kind", "resource", "active_from", "active_until", "declared_start", "declared_end", "onset",
                     "deadline", "polarity", "priority", "cross_day", "version", "registered", "update_sensitive",
                     "miss_cost", "visible_outcome")
"""The intention fields of an Episode that :func:`_fill_slot` loads, in the order it takes them."""

# The attributes of PMWeekCore that the kernels work in (the last six are their scratch buffers): the fields of a
# CoreState, without the underscore.
_KERNEL_STATE = (
    "t", "horizon", "n_int", "n_total", "table", "live_from", "live_order", "n_entered", "live", "live_miss", "n_live",
    "status", "miss_cost", "costs", "unequal", "max_cost", "min_cost", "is_clock", "cost_ratio", "cal", "hints",
    "lookahead", "mask_state", "budget", "remaining", "b_frac", "n_max", "cost_cap", "late_execute", "vis_step",
    "vis_counts", "counters", "q_hist", "c_hist", "last_q", "unchanged", "ev_list",
    "_cnt", "_best", "_order", "_key", "_resolved", "_misses",
)
CoreState = namedtuple("CoreState", [name.lstrip("_") for name in _KERNEL_STATE])


@structref.register
class CoreRefType(types.StructRef):
    """numba's type of a :class:`CoreRef`."""


class CoreRef(structref.StructRefProxy):
    """A CoreState that the kernels take by reference, in its field ``state``: a kernel call types and unboxes this
    one object, where numba would check the type of each of some forty arrays at every call."""


structref.define_proxy(CoreRef, CoreRefType, ["state"])


@numba.njit(cache=True)
def _new_core_ref(state):
    return CoreRef(state)  # cached here: numba compiles StructRefProxy's own constructor anew in every process


@numba.njit(cache=True, inline="always")
def _f1(tp, fp, fn):
    d = 2 * tp + fp + fn
    return 0.0 if d == 0 else 2.0 * tp / d


# error_model="numpy" drops numba's zero check before each division: every divisor here is non-zero by the
# validated arguments (horizons, prices and budgets >= 1), so the results are the same bits.
@numba.njit(cache=True, error_model="numpy")
def _advance(core, rows, stepping, observe, scores, out):
    """For each week ``n = rows[k]`` of the ``core`` (a CoreRef): if ``stepping[k]``, one step
    (executor, controller, scoring) into the ``k``-th rows of the step outputs (zeros otherwise); then, if
    ``observe``, the pre-query features of the week's (new) current step into the ``k``-th rows of ``res_out``,
    ``bud_out`` and ``mask_out``. ``out`` holds the outputs in the order of :meth:`PMWeekCore.advance`.

    One pass over the week's intentions does both: the controller resolves intention ``m`` at step ``t``, the
    miss check reads its status after that, and the observation counts it at ``t + 1`` with the updated status
    and last-query steps. The pass covers only the week's *live* intentions, whose table rows (with their index
    in column ``L_INDEX``) and miss costs are kept side by side in ``live[n, :n_live[n]]`` and ``live_miss``, in
    index order, so that ties and event lists come out as in a pass over all of them: an intention joins when the
    step reaches its ``live_from`` (intentions in ``live_order``, ``n_entered[n]`` of them joined so far) and
    leaves once no later step can read it. ``cnt``, ``best``, ``order``, ``key``, ``resolved`` and ``misses``
    are scratch buffers, so the kernel allocates nothing."""
    s = core.state  # read once: a field read through the struct at each use is reloaded in every loop
    selected_out, skipped_out, reward_out, events_out, metrics_out, res_out, bud_out, mask_out = out
    n_res = s.costs.shape[1]
    for k in range(rows.shape[0]):
        n = rows[k]
        t = s.t[n]
        T = s.horizon[n]
        step = stepping[k]
        cntr = s.counters[n]
        ev = events_out[k]
        for j in range(len(EVENT_COLUMNS)):
            ev[j] = 0
        for j in range(len(SKIP_NAMES)):
            skipped_out[k, j] = 0
        reward_out[k] = 0.0
        n_sel = 0
        step_cost = 0
        f1_before = 0.0
        if step:
            f1_before = _f1(cntr[C_TP], cntr[C_FP], cntr[C_FN])
            # --- hard-cap executor (BudgetPM Algorithm 1) ---
            n_prop = 0
            for r in range(n_res):
                s.resolved[r] = False
                score = scores[k, r]
                if score > 0.0:
                    s.key[r] = score / s.costs[n, r] if s.unequal[n] else score
                    # insertion by (key desc, cost asc, index asc)
                    j = n_prop
                    while j > 0:
                        p = s.order[j - 1]
                        if s.key[p] > s.key[r] or (s.key[p] == s.key[r] and s.costs[n, p] <= s.costs[n, r]):
                            break
                        s.order[j] = p
                        j -= 1
                    s.order[j] = r
                    n_prop += 1
            for r in range(n_res):
                selected_out[k, r] = 0
            for j in range(n_prop):
                r = s.order[j]
                c = s.costs[n, r]
                if s.mask_state[n, r] == 0:
                    skipped_out[k, SK.non_candidate] += 1
                elif s.budget[n] >= 0 and c > s.remaining[n] - step_cost:
                    skipped_out[k, SK.budget] += 1
                elif s.n_max >= 0 and n_sel >= s.n_max:
                    skipped_out[k, SK.count_cap] += 1
                elif s.cost_cap >= 0 and step_cost + c > s.cost_cap:
                    skipped_out[k, SK.cost_cap] += 1
                else:
                    selected_out[k, r] = 1
                    n_sel += 1
                    step_cost += c
        else:
            for r in range(n_res):
                selected_out[k, r] = 0
        to = t + 1 if step else t  # the step observed
        if observe:
            s.cnt[:] = 0.0
            s.best[:] = T + 1.0
        n_miss = 0
        nl = s.n_live[n]
        e0 = s.n_entered[n]
        e = e0
        while e < s.n_int[n] and s.live_from[n, e] <= to:
            e += 1
        n_new = e - e0
        if n_new > 0:
            # the intentions joining now, merged into the live rows by index from the back: each row moves once
            # (inserting them one by one shifted every later row per intention, quadratic in a dense week)
            new = s.misses  # scratch until the misses are collected below
            for j in range(n_new):
                new[j] = s.live_order[n, e0 + j]
            for j in range(1, n_new):
                if new[j - 1] > new[j]:  # joins of one step come in index order; sort otherwise
                    new[:n_new].sort()
                    break
            i = nl - 1
            j = n_new - 1
            w = nl + n_new - 1
            while j >= 0:
                m = new[j]
                if i >= 0 and s.live[n, i, L_INDEX] > m:
                    _copy_live(s.live, s.live_miss, n, i, w)
                    i -= 1
                else:
                    for f in range(N_FIELDS):
                        s.live[n, w, f] = s.table[n, m, f]
                    s.live[n, w, L_INDEX] = m
                    s.live_miss[n, w] = s.miss_cost[n, m]
                    j -= 1
                w -= 1
            nl += n_new
        s.n_entered[n] = e
        kept = 0
        for q in range(nl):
            m = s.live[n, q, L_INDEX]
            r = s.live[n, q, F_RES]
            reg = s.live[n, q, F_REG]
            af = s.live[n, q, F_AF]
            au = s.live[n, q, F_AU]
            pol = s.live[n, q, F_POL]
            if step:
                # --- controller ---
                if (r >= 0 and s.status[n, m] == S_OPEN and reg != 0 and selected_out[k, r] != 0 and af <= t <= au
                        and s.live[n, q, F_ON] <= t):
                    s.resolved[r] = True
                    on_time = t <= s.live[n, q, F_DL]
                    s.ev_list[n, ev[EV.n_events], EVL.intention] = m
                    if pol == POS:
                        if on_time:
                            s.status[n, m] = S_HIT
                            cntr[C_TP] += 1
                            ev[EV.tp] += 1
                        elif s.late_execute:
                            s.status[n, m] = S_LATE_EXEC
                            cntr[C_FP] += 1
                            cntr[C_LATE_EXEC] += 1
                            ev[EV.fp] += 1
                            ev[EV.late_execution] += 1
                        else:
                            s.status[n, m] = S_LATE_MISS
                            ev[EV.late_miss] += 1
                    elif on_time:
                        s.status[n, m] = S_FALSE
                        cntr[C_FP] += 1
                        ev[EV.fp] += 1
                        if pol == LURE:
                            cntr[C_FALSE_ALARM] += 1
                        else:
                            cntr[C_UPDATE_VIOL] += 1
                    else:
                        s.status[n, m] = S_EXPIRED_NEG
                        ev[EV.expired_negative] += 1
                    s.ev_list[n, ev[EV.n_events], EVL.code] = s.status[n, m]
                    ev[EV.n_events] += 1
                # Positives whose last on-time step is now and that were not executed on time are misses.
                if pol == POS and s.live[n, q, F_DUE_END] == t and s.status[n, m] != S_HIT:
                    cntr[C_FN] += 1
                    ev[EV.fn] += 1
                    s.misses[n_miss] = m
                    n_miss += 1
            if observe and reg != 0 and s.status[n, m] == S_OPEN and af <= to <= au and r >= 0:
                s.cnt[r, CNT.open] += 1
                ds = s.live[n, q, F_DS]
                de = s.live[n, q, F_DE]
                if ds - s.lookahead[n] <= to <= de:
                    s.cnt[r, CNT.candidate] += 1
                if ds <= to <= de:
                    s.cnt[r, CNT.in_window] += 1
                urg = 1.0 / (1.0 + max(0, de - to))
                if urg > s.cnt[r, CNT.max_urgency]:
                    s.cnt[r, CNT.max_urgency] = urg
                sd = 0.0
                if to < ds:
                    sd = ds - to
                elif to > de:
                    sd = de - to
                if abs(sd) < abs(s.best[r]):
                    s.best[r] = sd
                prio = s.live[n, q, F_PRIO]
                s.cnt[r, CNT.sum_priority] += prio
                if prio > s.cnt[r, CNT.max_priority]:
                    s.cnt[r, CNT.max_priority] = prio
                if s.live_miss[n, q] > s.cnt[r, CNT.max_miss_cost]:
                    s.cnt[r, CNT.max_miss_cost] = s.live_miss[n, q]
                lq = t if step and selected_out[k, r] != 0 else s.last_q[n, r]
                if lq < af:
                    s.cnt[r, CNT.unknown] += 1
                kind = s.live[n, q, F_KIND]
                if kind == KIND_TIME:
                    s.cnt[r, CNT.time] += 1
                elif kind == KIND_CHANNEL:
                    s.cnt[r, CNT.channel] += 1
                s.cnt[r, CNT.cross_day] += s.live[n, q, F_CROSS]
                s.cnt[r, CNT.revised] += s.live[n, q, F_REV]
            # steps from `to` on read it only while it is open in the ledger or may still be missed
            if ((reg != 0 and s.status[n, m] == S_OPEN and au >= to)
                    or (pol == POS and s.live[n, q, F_DUE_END] >= to and s.status[n, m] != S_HIT)):
                if kept != q:
                    _copy_live(s.live, s.live_miss, n, q, kept)
                kept += 1
        s.n_live[n] = kept
        if step:
            for j in range(n_miss):
                s.ev_list[n, ev[EV.n_events], EVL.intention] = s.misses[j]
                s.ev_list[n, ev[EV.n_events], EVL.code] = EV_MISS
                ev[EV.n_events] += 1
            for r in range(n_res):
                if selected_out[k, r]:
                    s.last_q[n, r] = t
                    s.unchanged[n, r] = 0 if s.resolved[r] else s.unchanged[n, r] + 1
            cntr[C_TP] += s.vis_step[n, t, VIS_STEP.tp]
            cntr[C_FP] += s.vis_step[n, t, VIS_STEP.fp]
            cntr[C_FN] += s.vis_step[n, t, VIS_STEP.fn]
            cntr[C_FALSE_ALARM] += s.vis_step[n, t, VIS_STEP.fp]
            ev[EV.tp] += s.vis_step[n, t, VIS_STEP.tp]
            ev[EV.fp] += s.vis_step[n, t, VIS_STEP.fp]
            ev[EV.fn] += s.vis_step[n, t, VIS_STEP.fn]
            # --- budget and history ---
            if s.budget[n] >= 0:
                s.remaining[n] -= step_cost
                if cntr[C_EXHAUST] < 0 and s.remaining[n] < s.min_cost[n]:
                    cntr[C_EXHAUST] = t + 1
            cntr[C_COST] += step_cost
            cntr[C_QUERIES] += n_sel
            s.q_hist[n, t] = n_sel
            s.c_hist[n, t] = step_cost
            reward_out[k] = _f1(cntr[C_TP], cntr[C_FP], cntr[C_FN]) - f1_before
            s.t[n] = to
            if to == T:
                _metrics(s, n, metrics_out[k])
        if observe:
            _write_observation(s, k, n, to, res_out, bud_out, mask_out)


@njit_leaf
def _copy_live(live, live_miss, n, src, dst):
    for f in range(N_FIELDS + 1):
        live[n, dst, f] = live[n, src, f]
    live_miss[n, dst] = live_miss[n, src]


@njit_leaf(error_model="numpy")
def _write_observation(s, k, n, t, res_out, bud_out, mask_out):
    """The features of week ``n`` at step ``t`` from its per-resource counts ``s.cnt`` and nearest windows
    ``s.best``, into row ``k`` of the outputs (and the candidate mask into ``s.mask_state``). A resource without
    open intentions has all counts 0: its count features are written as the values the general formulas give for
    zero counts (the same bits), without their divisions."""
    n_res = s.is_clock.shape[1]
    T = s.horizon[n]
    tc = min(t, T - 1)
    res = res_out[k]
    for r in range(n_res):
        c = s.cnt[r]
        n_open = c[CNT.open]
        n_cand = c[CNT.candidate]
        hint = s.hints[n, t, r] if t < T else 0.0
        for j in range(N_CALENDAR):
            res[r, j] = s.cal[n, tc, j]
        res[r, RF.cost] = s.cost_ratio[n, r]
        res[r, RF.is_clock] = s.is_clock[n, r]
        res[r, RF.max_relevance] = hint
        res[r, RF.age_since_query] = 1.0 if s.last_q[n, r] < 0 else min(1.0, (t - s.last_q[n, r]) / T)
        res[r, RF.unchanged_count] = s.unchanged[n, r] / (1.0 + s.unchanged[n, r])
        res[r, RF.ever_queried] = 0.0 if s.last_q[n, r] < 0 else 1.0
        if n_open > 0:
            res[r, RF.urgency] = c[CNT.max_urgency]
            res[r, RF.signed_window_distance] = s.best[r] / T
            res[r, RF.abs_window_distance] = abs(s.best[r]) / T
            res[r, RF.candidate_count] = n_cand / (1.0 + n_cand)
            res[r, RF.open_count] = n_open / (1.0 + n_open)
            res[r, RF.sum_relevance] = hint * n_cand / (1.0 + hint * n_cand)
            res[r, RF.resolvability] = c[CNT.in_window] / n_open
            mean_prio = c[CNT.sum_priority] / n_open / 3.0
            res[r, RF.mean_priority] = mean_prio
            res[r, RF.max_priority] = c[CNT.max_priority] / 3.0
            res[r, RF.max_miss_cost] = c[CNT.max_miss_cost] / 3.0
            res[r, RF.unknown_conditions] = c[CNT.unknown] / (1.0 + c[CNT.unknown])
            res[r, RF.frac_time] = c[CNT.time] / n_open
            res[r, RF.frac_channel] = c[CNT.channel] / n_open
            res[r, RF.frac_cross_day] = c[CNT.cross_day] / n_open
            res[r, RF.frac_revised] = c[CNT.revised] / n_open
            res[r, RF.legacy_utility] = hint * c[CNT.max_urgency]
            res[r, RF.calibrated_utility] = hint * mean_prio * res[r, RF.resolvability]
        else:
            zero_hint = hint * 0.0  # what hint * count gives for a zero count (and x / 1.0 == x)
            res[r, RF.urgency] = 0.0
            res[r, RF.signed_window_distance] = 0.0
            res[r, RF.abs_window_distance] = 1.0
            res[r, RF.candidate_count] = 0.0
            res[r, RF.open_count] = 0.0
            res[r, RF.sum_relevance] = zero_hint
            for j in range(RF.resolvability, RF.frac_revised + 1):
                res[r, j] = 0.0
            res[r, RF.legacy_utility] = zero_hint
            res[r, RF.calibrated_utility] = zero_hint * 0.0
        is_cand = 1 if (n_cand > 0 and t < T) else 0
        mask_out[k, r] = is_cand
        s.mask_state[n, r] = is_cand
    # Budget features of BudgetPM appendix A.2, with one-indexed step t1.
    t1 = tc + 1
    bud = bud_out[k]
    prog = (t1 - 1) / max(1, T - 1)
    left = T - t1 + 1
    if s.budget[n] >= 0:
        bud[BF.target_fraction] = s.b_frac[n]
        bud[BF.remaining_fraction] = s.remaining[n] / s.budget[n]
        bud[BF.remaining_per_step] = s.remaining[n] / max(1, left)
        bud[BF.spend_minus_progress] = (s.budget[n] - s.remaining[n]) / s.budget[n] - prog
    else:
        bud[BF.target_fraction] = 1.0
        bud[BF.remaining_fraction] = 1.0
        bud[BF.remaining_per_step] = 1.0
        bud[BF.spend_minus_progress] = -prog
    bud[BF.progress] = prog
    bud[BF.remaining_horizon] = (T - t) / T
    q5 = 0.0
    q10 = 0.0
    for j in range(max(0, t - 10), t):
        q10 += s.q_hist[n, j]
        if j >= t - 5:
            q5 += s.q_hist[n, j]
    bud[BF.queries_last5] = q5 / 10.0
    bud[BF.queries_last10] = q10 / 20.0
    bud[BF.queries_prev] = s.q_hist[n, t - 1] / 2.0 if t >= 1 else 0.0


@numba.njit(cache=True, error_model="numpy")
def _metrics(s, n, out):
    """The episode metrics (``METRIC_NAMES``) of week ``n``, into ``out``."""
    T = s.horizon[n]
    cnt = s.counters[n]
    out[:] = 0.0
    out[MT.set_f1] = _f1(cnt[C_TP], cnt[C_FP], cnt[C_FN])
    out[MT.tp] = cnt[C_TP]
    out[MT.fp] = cnt[C_FP]
    out[MT.fn] = cnt[C_FN]
    out[MT.realized_cost] = cnt[C_COST]
    out[MT.queries] = cnt[C_QUERIES]
    out[MT.exhaustion_step] = cnt[C_EXHAUST]
    for t in range(T):
        out[MT.spend_q1 + min(3, (4 * t) // T)] += s.c_hist[n, t]
    out[MT.on_time_hit] = cnt[C_TP]
    out[MT.late_execution] = cnt[C_LATE_EXEC]
    out[MT.miss] = cnt[C_FN]
    out[MT.false_alarm] = cnt[C_FALSE_ALARM]
    out[MT.update_violation] = cnt[C_UPDATE_VIOL]
    due = 0
    hit = 0
    for m in range(s.n_int[n]):
        row = s.table[n, m]
        if row[F_POL] != POS or row[F_DUE_END] < 0:
            continue
        h = 1 if s.status[n, m] == S_HIT else 0
        due += 1
        hit += h
        if row[F_KIND] == KIND_TIME:
            out[MT.time_due] += 1
            out[MT.time_hit] += h
        else:
            out[MT.channel_due] += 1
            out[MT.channel_hit] += h
        if row[F_CROSS]:
            out[MT.cross_day_due] += 1
            out[MT.cross_day_hit] += h
        if row[F_US]:
            out[MT.update_sensitive_due] += 1
            out[MT.update_sensitive_hit] += h
    out[MT.on_time_recall] = hit / due if due > 0 else np.nan


@numba.njit(cache=True)
def _calendar_features(step_hour, weekday):
    """Sine and cosine of the time of day and of the weekday at every step."""
    out = np.empty((step_hour.size, N_CALENDAR))
    for t in range(step_hour.size):
        tod = 2 * np.pi * step_hour[t] / 24.0
        wd = 2 * np.pi * weekday[t] / 7.0
        out[t, RF.sin_time_of_day], out[t, RF.cos_time_of_day] = np.sin(tod), np.cos(tod)
        out[t, RF.sin_weekday], out[t, RF.cos_weekday] = np.sin(wd), np.cos(wd)
    return out


@numba.njit(cache=True)
def _fill_slot(core, i, intentions, week):
    """Load a week into slot ``i`` and reset the slot's state: its hidden intentions (``intentions``, the columns
    :data:`INTENTION_COLUMNS` of its intentions) into row ``i`` of the intention table, its visible outcomes,
    calendar features and hints into the per-step arrays, and its visible positives due and executed into
    ``vis_counts[i]``. ``week`` is (horizon, hints, prices, calendar features, clock flags, lookahead)."""
    s = core.state
    kind, resource, af, au, ds, de, onset, deadline, polarity, priority, cross, version, registered, \
        update_sensitive, miss, visible_outcome = intentions
    T, ep_hints, ep_costs, ep_cal, ep_is_clock, lookahead = week
    s.table[i] = 0
    s.vis_step[i] = 0
    s.vis_counts[i] = 0
    k = 0
    for j in range(kind.size):
        if kind[j] == KIND_VISIBLE:
            code = visible_outcome[j]
            if polarity[j] == POS:
                s.vis_counts[i, VIS_DUE] += onset[j] <= T - 1
                s.vis_counts[i, VIS_HIT] += code == OUTCOME.tp
            if code == OUTCOME.tp:
                s.vis_step[i, onset[j], VIS_STEP.tp] += 1
            elif code == OUTCOME.fp:
                s.vis_step[i, onset[j], VIS_STEP.fp] += 1
            elif code == OUTCOME.fn:
                s.vis_step[i, min(deadline[j], T - 1), VIS_STEP.fn] += 1
            continue
        row = s.table[i, k]
        row[F_RES], row[F_AF], row[F_AU], row[F_DS], row[F_DE] = resource[j], af[j], au[j], ds[j], de[j]
        row[F_ON], row[F_DL], row[F_POL], row[F_KIND], row[F_PRIO] = onset[j], deadline[j], polarity[j], kind[j], \
            priority[j]
        row[F_CROSS], row[F_REV], row[F_REG], row[F_US] = cross[j], version[j] > 0, registered[j], update_sensitive[j]
        due_end = min(deadline[j], T - 1)
        row[F_DUE_END] = due_end if onset[j] <= due_end else -1
        # the first step that reads it: in the ledger, or due to be missed
        first = af[j] if registered[j] else _NEVER_LIVE
        if polarity[j] == POS and row[F_DUE_END] >= 0:
            first = min(first, row[F_DUE_END])
        s.live_from[i, k] = first
        s.miss_cost[i, k] = miss[j]
        k += 1
    order = np.argsort(s.live_from[i, :k], kind="mergesort")
    for j in range(k):
        s.live_order[i, j] = order[j]
    s.live_from[i, :k] = s.live_from[i, :k][order]
    s.n_entered[i] = 0
    s.n_live[i] = 0
    for t in range(T):
        for j in range(N_CALENDAR):
            s.cal[i, t, j] = ep_cal[t, j]
        for r in range(ep_hints.shape[1]):
            s.hints[i, t, r] = ep_hints[t, r]
    s.status[i] = 0
    s.n_int[i] = k
    s.n_total[i] = max(1, kind.size)
    s.horizon[i] = T
    s.t[i] = 0
    s.costs[i] = ep_costs
    s.is_clock[i] = ep_is_clock
    s.max_cost[i] = ep_costs.max()
    for r in range(ep_costs.size):
        s.cost_ratio[i, r] = ep_costs[r] / s.max_cost[i]
    s.min_cost[i] = ep_costs.min()
    s.unequal[i] = ep_costs.min() != ep_costs.max()
    s.lookahead[i] = lookahead
    s.remaining[i] = s.budget[i]
    s.counters[i] = 0
    s.counters[i, C_EXHAUST] = -1
    s.last_q[i] = -1
    s.unchanged[i] = 0
    s.q_hist[i] = 0
    s.c_hist[i] = 0


@numba.njit(cache=True)
def _generator_list(gens):
    out = numba.typed.List()
    for g in gens:
        out.append(g)
    return out


def generator_list(gens: list):
    """numba's own list of the generators ``gens`` (converted once here, not at each kernel call)."""
    with warnings.catch_warnings():
        # numba deprecates reflecting a list argument's changes back to Python; this one is only read
        warnings.simplefilter("ignore", NumbaPendingDeprecationWarning)
        return _generator_list(gens)


@numba.njit(cache=True)
def _draw_into(core, gens, slots, draw_args, world):
    """Draw the next week of each slot ``i`` in ``slots`` from its generator ``gens[i]`` (``_draw_week`` with
    ``draw_args``) and load it into the slot (``_fill_slot``; ``world``: the prices, calendar features, clock flags
    and lookahead), all in one call; returns whether each week fitted the core's tables (one that did not is left
    unloaded)."""
    fitted = np.zeros(slots.size, dtype=np.bool_)
    capacity = core.state.table.shape[1]
    for j in range(slots.size):
        I, B, mc, _, hints, counts = _draw_week(gens[slots[j]], draw_args)
        if counts.sum() - counts[GC.visible] <= capacity:
            fitted[j] = True
            intentions = (I[:, GI.kind], I[:, GI.resource], I[:, GI.active_from], I[:, GI.active_until],
                          I[:, GI.declared_start], I[:, GI.declared_end], I[:, GI.onset], I[:, GI.deadline],
                          I[:, GI.polarity], I[:, GI.priority], B[:, GB.cross_day], I[:, GI.version],
                          B[:, GB.registered], B[:, GB.update_sensitive], mc, I[:, GI.visible_outcome])
            _fill_slot(core, slots[j], intentions, (hints.shape[0], hints) + world)
    return fitted


class StepOutputs(NamedTuple):
    """The arrays :meth:`PMWeekCore.advance` writes, one row per week (``rows``' order): the observation, then the
    step's outputs."""

    resources: np.ndarray
    budget: np.ndarray
    mask: np.ndarray
    selected: np.ndarray
    skipped: np.ndarray
    reward: np.ndarray
    events: np.ndarray
    """Columns :data:`EVENT_COLUMNS`."""
    metrics: np.ndarray
    """Columns :data:`METRIC_NAMES`."""


def step_outputs(n: int, n_resources: int) -> StepOutputs:
    """Output arrays of :meth:`PMWeekCore.advance` for ``n`` week slots."""
    return StepOutputs(np.zeros((n, n_resources, N_RESOURCE_FEATURES), dtype=np.float32),
                       np.zeros((n, N_BUDGET_FEATURES), dtype=np.float32), np.zeros((n, n_resources), dtype=np.int8),
                       np.zeros((n, n_resources), dtype=np.int8), np.zeros((n, len(SKIP_NAMES)), dtype=np.int64),
                       np.zeros(n), np.zeros((n, len(EVENT_COLUMNS)), dtype=np.int64),
                       np.zeros((n, len(METRIC_NAMES))))


class PMWeekCore:
    """``n`` PM weeks stepped together. All arrays are indexed by week slot first."""

    def __init__(self, n: int, n_resources: int, *, budget, per_step_cap, per_step_cost_cap, late_policy,
                 b_frac: float):
        self.n = n
        self.n_resources = n_resources
        self.budget_value = -1 if budget is None else int(budget)
        self.n_max = -1 if per_step_cap is None else int(per_step_cap)
        self.cost_cap = -1 if per_step_cost_cap is None else int(per_step_cost_cap)
        self.late_execute = late_policy == "execute"
        self.t = np.zeros(n, dtype=np.int64)
        self.horizon = np.ones(n, dtype=np.int64)
        self.n_int = np.zeros(n, dtype=np.int64)
        self.n_total = np.ones(n, dtype=np.int64)
        self.costs = np.ones((n, n_resources), dtype=np.int64)
        self.is_clock = np.zeros((n, n_resources))
        self.max_cost = np.ones(n)
        self.n_entered = np.zeros(n, dtype=np.int64)
        self.n_live = np.zeros(n, dtype=np.int64)
        self.cost_ratio = np.ones((n, n_resources))
        self.min_cost = np.ones(n, dtype=np.int64)
        self.unequal = np.zeros(n, dtype=np.bool_)
        self.lookahead = np.zeros(n, dtype=np.int64)
        self.budget = np.full(n, self.budget_value, dtype=np.int64)
        self.remaining = np.zeros(n, dtype=np.int64)
        self.b_frac = np.full(n, b_frac)
        self.counters = np.zeros((n, N_COUNTERS), dtype=np.int64)
        self.last_q = np.full((n, n_resources), -1, dtype=np.int64)
        self.unchanged = np.zeros((n, n_resources), dtype=np.int64)
        self.mask_state = np.zeros((n, n_resources), dtype=np.int8)
        self.vis_counts = np.zeros((n, VIS_HIT + 1), dtype=np.int64)
        self.metrics = np.zeros((n, len(METRIC_NAMES)))
        self._episodes: list = [None] * n  # an Episode, or a callable that builds it when first asked for
        # scratch of the kernel, and stand-ins for the outputs that a call does not produce
        self._cnt = np.zeros((n_resources, len(CNT)))
        self._best = np.zeros(n_resources)
        self._order = np.zeros(n_resources, dtype=np.int64)
        self._key = np.zeros(n_resources)
        self._resolved = np.zeros(n_resources, dtype=np.bool_)
        self._never = np.zeros(n, dtype=np.bool_)
        self._always = np.ones(n, dtype=np.bool_)
        self._no_scores = np.zeros((n, n_resources))
        self._sel = np.zeros((n, n_resources), dtype=np.int8)
        self._skipped = np.zeros((n, len(SKIP_NAMES)), dtype=np.int64)
        self._reward = np.zeros(n)
        self._events = np.zeros((n, len(EVENT_COLUMNS)), dtype=np.int64)
        self._res = np.zeros((1, n_resources, N_RESOURCE_FEATURES), dtype=np.float32)
        self._bud = np.zeros((1, N_BUDGET_FEATURES), dtype=np.float32)
        self._mask = np.zeros((1, n_resources), dtype=np.int8)
        self._alloc(1, 1)

    def _core_ref(self) -> CoreRef:
        """The arrays and settings the kernels work in, gathered once per allocation."""
        if self._ref is None:
            self._ref = _new_core_ref(CoreState(*(getattr(self, name) for name in _KERNEL_STATE)))
        return self._ref

    def __getstate__(self):
        return dict(self.__dict__, _ref=None)  # numba's struct does not pickle; it is gathered again when needed

    def _alloc(self, max_t: int, max_int: int):
        self._alloc_steps(max_t)
        self._alloc_intentions(max_int)

    def _alloc_steps(self, max_t: int):
        """The arrays with a row per step (new, zeroed) for weeks of up to ``max_t`` steps."""
        n, r = self.n, self.n_resources
        self._ref = None  # the arrays below are new: _core_ref() gathers them again
        self.cal = np.zeros((n, max_t, N_CALENDAR))
        self.hints = np.zeros((n, max_t, r))
        self.vis_step = np.zeros((n, max_t, len(VIS_STEP)), dtype=np.int64)
        self.q_hist = np.zeros((n, max_t), dtype=np.int64)
        self.c_hist = np.zeros((n, max_t), dtype=np.int64)

    def _alloc_intentions(self, max_int: int):
        """The arrays with a row per hidden intention (new, zeroed) for weeks of up to ``max_int`` of them."""
        n = self.n
        self._ref = None
        self.table = np.zeros((n, max_int, N_FIELDS), dtype=np.int32)
        self.live_from = np.zeros((n, max_int), dtype=np.int32)  # sorted
        self.live_order = np.zeros((n, max_int), dtype=np.int32)
        self.live = np.zeros((n, max_int, N_FIELDS + 1), dtype=np.int32)
        self.live_miss = np.zeros((n, max_int))
        self.miss_cost = np.zeros((n, max_int))
        self.status = np.zeros((n, max_int), dtype=np.int8)
        self.ev_list = np.zeros((n, max_int, len(EVL)), dtype=np.int64)
        self._misses = np.zeros(max_int, dtype=np.int64)

    def _grow(self, max_t: int, max_int: int):
        """Room for weeks of ``max_t`` steps and ``max_int`` hidden intentions, the slots' contents kept. Only the
        arrays of the dimension that grows are replaced: a week with more intentions than any before does not
        copy the per-step arrays (at long horizons most of the memory), nor a longer week the intention tables."""
        groups = ((("cal", "hints", "vis_step", "q_hist", "c_hist"), max_t, self.cal.shape[1], self._alloc_steps),
                  (("table", "live_from", "live_order", "live", "live_miss", "miss_cost", "status", "ev_list"),
                   max_int, self.table.shape[1], self._alloc_intentions))
        for names, size, current, alloc in groups:
            if size > current:
                old = {k: getattr(self, k) for k in names}
                alloc(size)
                for k, v in old.items():
                    getattr(self, k)[tuple(slice(0, s) for s in v.shape)] = v

    def load(self, i: int, ep: Episode, lookahead: int):
        """Place episode ``ep`` into slot ``i`` and reset that slot's state."""
        if ep.n_resources != self.n_resources:
            raise ValueError(f"episode has {ep.n_resources} resources, environment expects {self.n_resources}")
        n_hidden = int(np.count_nonzero(ep.kind != KIND_VISIBLE))
        if ep.horizon > self.cal.shape[1] or n_hidden > self.table.shape[1]:
            self._grow(ep.horizon, n_hidden)
        is_clock = np.array([c == "clock" for c in ep.resource_classes], dtype=np.float64)
        _fill_slot(self._core_ref(), i, tuple(getattr(ep, name) for name in INTENTION_COLUMNS),
                   (ep.horizon, ep.hints, ep.costs, _calendar_features(ep.step_hour, ep.weekday), is_clock, lookahead))
        self._episodes[i] = ep

    def draw_into(self, slots: np.ndarray, gens, world: WorldConfig, cost_profile: str, load: int) -> np.ndarray:
        """Draw the next week of each slot ``i`` in ``slots`` from its generator ``gens[i]`` into the slot, all in
        one kernel call: what :meth:`load` of ``generate_episode(None, world, cost_profile, load, rng=gens[i])``
        does week by week, without building the Episodes (:meth:`set_episode` says how to build one). Returns,
        per slot, whether its week was loaded; one that did not fit the tables is not (load it with :meth:`load`,
        which grows them)."""
        if world.horizon > self.cal.shape[1]:
            self._grow(world.horizon, 1)
        w = _world_constants(world)
        is_clock = np.array([c == "clock" for c in w["classes"]], dtype=np.float64)
        return _draw_into(self._core_ref(), gens, slots, draw_arguments(world, load),
                          (w["costs"][cost_profile], _calendar_features(w["step_hour"], w["weekday"]), is_clock,
                           world.lookahead))

    def set_episode(self, i: int, make_episode):
        """Slot ``i`` holds the week that ``make_episode()`` builds (called when :meth:`episode` first asks)."""
        self._episodes[i] = make_episode

    def episode(self, i: int) -> Episode | None:
        """The :class:`Episode` in slot ``i`` (None before the first load)."""
        ep = self._episodes[i]
        if callable(ep):
            ep = self._episodes[i] = ep()
        return ep

    def advance(self, rows, stepping, observe: bool, scores, out: StepOutputs):
        """Step the weeks ``rows[k]`` with ``stepping[k]`` (scores ``scores[k]``), then, if ``observe``, write
        every week's observation (see :func:`_advance`), into ``out``."""
        _advance(self._core_ref(), rows, stepping, observe, scores,
                 (out.selected, out.skipped, out.reward, out.events, out.metrics, out.resources, out.budget, out.mask))

    def observe(self, rows, res_out, bud_out, mask_out):
        """Observation of the weeks ``rows`` at their current step."""
        k = len(rows)
        self.advance(rows, self._never[:k], True, self._no_scores[:k],
                     StepOutputs(res_out, bud_out, mask_out, self._sel[:k], self._skipped[:k], self._reward[:k],
                                 self._events[:k], self.metrics[:k]))

    def step(self, rows, scores, selected_out, skipped_out, reward_out, events_out, metrics_out):
        """One step of the weeks ``rows`` (no observation)."""
        self.advance(rows, self._always[: len(rows)], False, scores,
                     StepOutputs(self._res, self._bud, self._mask, selected_out, skipped_out, reward_out, events_out,
                                 metrics_out))

    def events(self, i: int, n_events: int):
        """``(hidden intention index, event name)`` pairs of slot ``i``'s last step."""
        return [(int(m), EVENT_NAMES[c]) for m, c in self.ev_list[i, :n_events].tolist()]

    def running_counts(self, rows) -> np.ndarray:
        """``(len(rows), 3)`` float32: the running TP, FP and FN of each week in ``rows``, each divided by the
        week's number of intentions (so each lies in [0, 1]; Set F1 is invariant to the common scale)."""
        return (self.counters[rows][:, [C_TP, C_FP, C_FN]] / self.n_total[rows][:, None]).astype(np.float32)

    def action_masks(self, i: int) -> np.ndarray:
        """sb3-contrib's flat MultiBinary mask for slot ``i``: [bit0=0, bit0=1, bit1=0, bit1=1, ...]."""
        out = np.ones(2 * self.n_resources, dtype=bool)
        out[1::2] = self.mask_state[i].astype(bool)
        return out


class OneWeek:
    """A one-slot :class:`PMWeekCore` and its output arrays ``out``: how a single environment over the core
    (``PMWeek-v0``, ``ConversationPM``) observes and steps its week. ``settings``: the core's keyword arguments."""

    def __init__(self, n_resources: int, **settings):
        self.core = PMWeekCore(1, n_resources, **settings)
        self.out = step_outputs(1, n_resources)
        self.rows = np.zeros(1, dtype=np.int64)
        self._stepping = np.ones(1, dtype=bool)

    def observe(self):
        """The observation of the week's current step, into ``out``."""
        self.core.observe(self.rows, self.out.resources, self.out.budget, self.out.mask)

    def step(self, scores):
        """One step of the week with ``scores`` (``(1, n_resources)``), then the observation of the next, into
        ``out``."""
        self.core.advance(self.rows, self._stepping, True, scores, self.out)
