"""The posterior sampler of PMWeek-v0 (teachers/posterior.py) against references computed without it: the hint
log-density table against the noise model's exact density, the draws with nothing observed against the generator's
own weeks, the draws given an agent's record on a tiny world against rejection sampling from the generator, and
the kernels' shortcuts (deadline sums from a guide table or kept once per call) and the weights' normalisation and
resampling against their direct forms."""

from collections import Counter
from dataclasses import replace

import numba
import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad
from scipy.special import log_ndtr

from membudget.envs.pm import PMWeekEnv, generate_episode
from membudget.envs.pm.world import (GB, GI, KIND_CHANNEL, KIND_VISIBLE, NEVER, OUTCOME, POS, STALE, WorldConfig,
                                     _draw_week, draw_arguments)
from membudget.teachers.observed import AgentView

ALPHA = 1e-4
"""Significance of each two-sample test (fixed seeds; about 30 tests per check, so a family-wise level of 0.3%)."""


# ------------------------------------------------------------------------ the hint noise model, independently
def log_density(x, sigma):
    """log density at ``x`` of ``X = 0.1 U + N(0, sigma²)``: ``10 (Φ(x/σ) - Φ((x - 0.1)/σ))``, each difference
    taken on the side where it does not cancel."""
    a, z = x / sigma, (x - 0.1) / sigma
    la, lz = (log_ndtr(a), log_ndtr(z)) if x < 0.05 else (log_ndtr(-z), log_ndtr(-a))
    return np.log(10.0) + la + np.log1p(-np.exp(lz - la))


def log_tail(c, sigma, upper):
    """log P(X <= c) (``upper`` False) or log P(X >= c), by quadrature over U of the normal's tail."""
    def g(u):
        return log_ndtr((c - 0.1 * u) / sigma) if not upper else log_ndtr(-(c - 0.1 * u) / sigma)

    ref = max(g(0.0), g(1.0))
    v, _ = quad(lambda u: np.exp(g(u) - ref), 0.0, 1.0, epsabs=0.0, epsrel=1e-13, limit=200)
    return ref + np.log(v)


def exact_hint_loglik(h, b, sigma):
    """The generator's hint is clip01(0.1 U + N(0, σ²) + b): an atom at 0 and at 1, a density between."""
    if h <= 0.0:
        return log_tail(-b, sigma, upper=False)
    if h >= 1.0:
        return log_tail(1.0 - b, sigma, upper=True)
    return log_density(h - b, sigma)


@pytest.mark.parametrize("sigma", [0.12, 0.3])
def test_hint_table_matches_the_exact_density(sigma):
    """``_ll`` (the table the sampler reads, linear interpolation) is within 1e-6 of the exact log-density of a hint
    (measured: 1.25e-7, the interpolation's dx²/8 · 1/σ² at dx = 1e-3 σ), over hints in [0, 1] — the clipped
    atoms included — and bump sums from 0 past the table's end; and finite wherever the density is representable."""
    from membudget.teachers.posterior import PosteriorSampler, _ll

    s = PosteriorSampler(world=WorldConfig(hint_noise=sigma)).fit()
    tabs, x0, dx, x_hi = s.tables_[8:12]
    rng = np.random.default_rng(0)
    hs = np.concatenate([[0.0, 1.0, 1e-9, 0.05, 0.5, 1.0 - 1e-9], rng.random(150)])
    bs = np.concatenate([[0.0, 0.7, 1.4], rng.random(150) * 4.0])
    err, n_checked = 0.0, 0
    for h in hs:
        for b in bs:
            ref = exact_hint_loglik(h, b, sigma)
            got = _ll(h, b, sigma, tabs, x0, dx, x_hi)
            if ref < -700.0:  # exp underflows in double precision: the sampler may say -inf
                assert got < -690.0
                continue
            assert np.isfinite(got), (h, b, ref)
            err = max(err, abs(got - ref))
            n_checked += 1
    assert n_checked > 20_000
    assert err < 1e-6, err


# ------------------------------------------------------------ the kernels' shortcuts, against their direct forms
def test_deadline_sums_from_the_guide_table_equal_the_direct_sums():
    """A draw reads its miss guides from a table it updates as it places misses (``_guide_sum``); stage one keeps an
    entry's deadline sum once per call, and stage two one sum for every onset, where no deadline lies before ``t``
    or the row cannot miss. Each equals ``_slack_sum`` to the bit, over onsets, slack ranges, deadline constraints,
    counters with misses placed and steps, the corners included."""
    from membudget.teachers.posterior import MU_FLOOR, _fn_guide, _guide_sum, _slack_sum

    rng = np.random.default_rng(3)
    T, last = 40, 39
    n_shortcut = 0
    for t in (0, 1, 7, 25, last):
        tl = max(t, 1)
        fn = rng.integers(0, 4, tl).astype(np.float64)
        Mfn = rng.integers(0, 3, tl)
        mu = np.where(rng.random(tl) < 0.2, MU_FLOOR / 2, rng.random(tl) * 2.0)
        G = np.array([_fn_guide(fn, Mfn, mu, t, d) for d in range(tl)])
        for o in range(T):
            for lo, hi in ((0, 0), (1, 4), (0, 6), (3, 3)):
                for dl_req, dl_q in ((0, 0), (1, t), (2, t), (1, o + 2), (2, o + 1)):
                    direct = _slack_sum(o, lo, hi, last, dl_req, dl_q, True, fn, Mfn, mu, t)
                    assert _guide_sum(o, lo, hi, last, dl_req, dl_q, G, t) == direct
                    if dl_req == 0 and o + lo >= t:  # every deadline at or after t: any onset's sum, any counters
                        assert direct == _slack_sum(0, lo, hi, last, 0, 0, False, fn, Mfn, mu, t)
                        n_shortcut += 1
                    cannot_miss = _slack_sum(o, lo, hi, last, dl_req, dl_q, False, fn, Mfn, mu, t)
                    assert cannot_miss == _slack_sum(o, lo, hi, last, dl_req, dl_q, False, fn * 0, Mfn * 0, mu, t)
    assert n_shortcut > 100


def test_normalise_and_systematic_resampling_equal_their_closed_forms():
    """``_normalise`` is exp(l - max) / sum within rounding, 0 for -inf and nan, and refuses all -inf;
    ``systematic_resample`` picks, for each of n evenly spaced points (u + i) / n, the first index whose cumulative
    weight exceeds it (numpy's searchsorted), exactly."""
    from membudget.teachers.posterior import _normalise, systematic_resample

    rng = np.random.default_rng(4)
    for n in (1, 2, 7, 64, 300):
        logw = rng.normal(0.0, 30.0, n)
        logw[rng.random(n) < 0.2] = -np.inf
        if n > 2:
            logw[1] = np.nan
        logw[0] = 5.0
        w = _normalise(logw)
        finite = np.isfinite(logw)
        ref = np.where(finite, np.exp(np.where(finite, logw, 0.0) - logw[finite].max()), 0.0)
        np.testing.assert_allclose(w, ref / ref.sum(), rtol=1e-13, atol=0.0)
        assert np.all(w[~finite] == 0.0)
        for m in (1, 5, n, 2 * n + 1):
            u = np.random.default_rng(n + m).random()
            got = systematic_resample(w, m, np.random.default_rng(n + m))
            c = np.cumsum(w)
            c[-1] = 1.0
            want = np.minimum(np.searchsorted(c, (u + np.arange(m)) / m, side="right"), n - 1)
            np.testing.assert_array_equal(got, want)
    with pytest.raises(ValueError, match="no draw is consistent"):
        _normalise(np.full(4, -np.inf))


# ------------------------------------------------------------------------------------ two-sample tests
def chi2_pvalue(a, b, min_expected=5.0):
    """Two-sample chi-square test of two samples of a discrete quantity: categories from the most frequent down,
    the rare ones pooled until each pooled category expects ``min_expected`` draws in the smaller sample."""
    ca, cb = Counter(a), Counter(b)
    cats = sorted(set(ca) | set(cb), key=lambda k: -(ca[k] + cb[k]))
    small = min(len(a), len(b)) / (len(a) + len(b))
    table, acc = [], np.zeros(2)
    for k in cats:
        acc += (ca[k], cb[k])
        if acc.sum() * small >= min_expected:
            table.append(acc.copy())
            acc[:] = 0
    if not table:
        return 1.0
    table[-1] += acc
    if len(table) < 2:
        return 1.0
    return float(stats.chi2_contingency(np.array(table).T, correction=False)[1])


def total_variation(a, b):
    ca, cb = Counter(a), Counter(b)
    return 0.5 * sum(abs(ca[k] / len(a) - cb[k] / len(b)) for k in set(ca) | set(cb))


# ---------------------------------------------------------------- 1. nothing observed: the generator's marginals
def week_statistics(ep):
    """Per week (one value each) and per row (pooled over the week's rows) statistics of an Episode."""
    hid = ep.kind != KIND_VISIBLE
    base = np.array([i[0] in "TCL" and not i.endswith("v2") for i in ep.ids])
    prefix = np.array([i[0] for i in ep.ids])
    vo, upd = ep.visible_outcome, ep.updates
    on, dl = ep.onset[hid], ep.deadline[hid]
    due = on < NEVER
    chan = hid & (ep.kind == KIND_CHANNEL)
    per_week = dict(
        n_time=np.sum(base & (prefix == "T")), n_channel=np.sum(base & (prefix == "C")),
        n_lure=np.sum(base & (prefix == "L")), n_new_version=sum(i.endswith("v2") for i in ep.ids),
        n_registered=np.sum(hid & ep.registered), n_unregistered=np.sum(hid & ~ep.registered),
        n_updates=len(upd), n_updates_registered=sum(u["registered"] for u in upd),
        n_cancel=sum(u["kind"] == "cancel" for u in upd), n_never=np.sum(~due),
        n_stale=np.sum(ep.polarity[hid] == STALE), n_due=np.sum(hid & (ep.polarity == POS) & (ep.onset < NEVER)),
        n_cross=np.sum(ep.cross_day[hid]), tp=np.sum(vo == OUTCOME.tp), fn=np.sum(vo == OUTCOME.fn),
        fp=np.sum(vo == OUTCOME.fp), tn=np.sum(vo == OUTCOME.tn),
        clock_hint=float(ep.hints[:, 0].mean()), channel_hint=float(ep.hints[:, 1:].mean()),
        max_hint=float(ep.hints.max(axis=0).mean()))
    per_row = dict(
        onset=on[due], deadline=dl[dl < NEVER], slack=(dl - on)[due], active_from=ep.active_from[hid],
        channel_onset_after_start=np.minimum(ep.onset[chan & (ep.onset < NEVER)] - ep.declared_start[
            chan & (ep.onset < NEVER)], 20),
        window=(ep.declared_end - ep.declared_start)[hid], update_step=[u["step"] for u in upd],
        resource=ep.resource[hid], priority=ep.priority[hid], miss_cost=ep.miss_cost[hid],
        visible_onset=ep.onset[~hid])
    return per_week, per_row


def marginal_pvalues(eps_a, eps_b):
    """p-value per statistic of :func:`week_statistics` (chi-square for integers, Kolmogorov-Smirnov for reals)."""
    def collect(eps):
        weeks, rows = {}, {}
        for ep in eps:
            w, r = week_statistics(ep)
            for k, v in w.items():
                weeks.setdefault(k, []).append(v)
            for k, v in r.items():
                rows.setdefault(k, []).append(np.asarray(v))
        return {**{k: np.array(v) for k, v in weeks.items()}, **{"row " + k: np.concatenate(v) for k, v in
                                                                  rows.items()}}

    a, b = collect(eps_a), collect(eps_b)
    return {k: float(stats.ks_2samp(a[k], b[k]).pvalue) if a[k].dtype.kind == "f"
            else chi2_pvalue(a[k].tolist(), b[k].tolist()) for k in a}


@pytest.mark.slow  # about 25 s (2,000 draws completed to Episodes), plus the sampler's compilation on a cold cache
def test_draws_with_nothing_observed_have_the_generators_marginals():
    """With nothing observed (``observed=None``: no step of the week has been seen) the sampler's complete weeks
    are the generator's: 2,000 draws against 2,000 weeks of ``generate_episode``, about 30 statistics (counts of
    each row type, registrations, updates, visible outcomes, onset / deadline / slack / statement histograms,
    hints, miss costs) each by a two-sample test at level 1e-4. The same check tells a world with one parameter
    changed apart (a mean of 24 time tasks instead of 26; in-window onsets 0.55 instead of 0.65)."""
    from membudget.teachers.posterior import PosteriorSampler

    world = WorldConfig()
    n, batch = 2000, 250
    sampler = PosteriorSampler(world=world, n_particles=batch).fit()
    drawn = []
    for k in range(n // batch):
        p = sampler.sample(None, batch, np.random.default_rng(100 + k))
        assert p.ess > 0.99 * batch  # nothing to condition on: the weights are (nearly) equal
        drawn += [p.episode(i, np.random.default_rng([k, i])) for i in range(batch)]

    def generated(config):
        return [generate_episode(rng=np.random.default_rng([7, i]), config=config) for i in range(n)]

    pvalues = marginal_pvalues(drawn, generated(world))
    assert len(pvalues) >= 30
    worst = min(pvalues, key=pvalues.get)
    assert pvalues[worst] > ALPHA, f"{worst}: p = {pvalues[worst]:.3g}"
    for wrong in (replace(world, n_time=24.0), replace(world, p_onset_in_window=0.55)):
        pvalues = marginal_pvalues(drawn, generated(wrong))
        assert min(pvalues.values()) < ALPHA, f"the check does not tell {wrong} apart"


# ----------------------------------------------------------- 2. given a record, on a tiny world: rejection sampling
TINY = WorldConfig(horizon=8, n_days=1, resources=(("clock", "clock"), ("inbox", "delta")), n_time=0.7,
                   n_channel=1.2, n_visible=0.4, n_visible_lures=0.4, n_channel_lures=1.0, n_updates=0.6,
                   p_update_registered=0.7, channel_window=(2, 3), channel_slack=(1, 2), time_grace=(0, 1),
                   lookahead=1, ledger_expiry=2, hint_noise=0.3, hint_width=1.0)
"""Two resources, eight steps, about four hidden rows a week; hint noise 0.3, so that hints inform without making
the rejection sampler's acceptance vanish."""
QUERY_STEPS = {1: (1,), 3: (0, 1), 4: (1,)}
"""The agent's policy: at these steps, query these resources where the mask allows (a function of what it sees)."""


def _policy(obs, step):
    a = np.zeros(obs["mask"].size, dtype=np.int8)
    for r in QUERY_STEPS.get(step, ()):
        a[r] = obs["mask"][r] > 0
    return a


def _record(env, ep, t):
    obs, _ = env.reset(options={"episode": ep})
    for step in range(t):
        obs, *_ = env.step(_policy(obs, step))
    return env.observed


@numba.njit
def _public_code(kind, res, af, ds, de, version, cross, T):
    """One integer for a ledger entry's public fields that the hidden part can depend on (priority and miss cost are
    drawn independently of everything hidden, so the reference does not condition on them)."""
    return (((((kind * 4 + res) * T + af) * T + ds) * T + de) * 8 + version) * 2 + cross


def _codes(observed):
    L = observed.ledger
    return [_public_code(*v, observed.horizon) for v in zip(
        L.kind.tolist(), L.resource.tolist(), L.active_from.tolist(), L.declared_start.tolist(),
        L.declared_end.tolist(), L.version.tolist(), L.cross_day.astype(int).tolist())]


def _signature(observed):
    """The record less priorities and miss costs, its entries by their public code."""
    L = observed.ledger
    codes = _codes(observed)
    entries = sorted((codes[e], int(L.cancelled_at[e]), int(L.left_at[e]), int(L.resolved_at[e]), int(L.event[e]),
                      codes[L.parent[e]] if L.parent[e] >= 0 else -1) for e in range(len(L)))
    return (observed.t, entries, observed.hints.tobytes(), observed.queried.tobytes(), observed.tp.tolist(),
            observed.fp.tolist(), observed.fn.tolist(), observed.remaining_budget)


@numba.njit
def _scan(rng, args, n, t, codes, focus, R, T, width):
    """``n`` weeks from the generator (``_draw_week``, the stream ``generate_episode(rng=...)`` reads): the index of
    each whose ledger at ``t`` has the record's public codes, the bump sum of its hidden rows on the observed steps
    and its quantities (the focus entry's polarity and onset (-1: never), the number of hidden rows outside the
    ledger, of those the number with an onset within t + 6)."""
    idx = np.empty(n, np.int64)
    bumps = np.zeros((n, t + 1, R))
    q = np.zeros((n, 4), np.int64)
    bump = np.empty(8)
    for k in range(-6, 2):
        bump[k + 6] = 0.7 * np.exp(-0.5 * (k / width) ** 2)
    m = 0
    mine = np.empty(codes.size + 1, np.int64)
    for i in range(n):
        I, B, _, _, _, _ = _draw_week(rng, args)
        c = 0
        for j in range(I.shape[0]):
            if I[j, GI.kind] != KIND_VISIBLE and B[j, GB.registered] and I[j, GI.active_from] <= t:
                if c > codes.size:
                    break
                mine[c] = _public_code(I[j, GI.kind], I[j, GI.resource], I[j, GI.active_from],
                                       I[j, GI.declared_start], I[j, GI.declared_end], I[j, GI.version],
                                       1 if B[j, GB.cross_day] else 0, T)
                c += 1
        if c != codes.size or np.any(np.sort(mine[:c]) != codes):
            continue
        n_hidden = 0
        for j in range(I.shape[0]):
            if I[j, GI.kind] == KIND_VISIBLE:
                continue
            n_hidden += 1
            o = I[j, GI.onset]
            if B[j, GB.registered] and I[j, GI.active_from] <= t:
                if _public_code(I[j, GI.kind], I[j, GI.resource], I[j, GI.active_from], I[j, GI.declared_start],
                                I[j, GI.declared_end], I[j, GI.version], 1 if B[j, GB.cross_day] else 0,
                                T) == focus:
                    q[m, 0] = I[j, GI.polarity]
                    q[m, 1] = o if o < NEVER else -1
            elif o <= t + 6:
                q[m, 3] += 1
            if o < NEVER:
                for s in range(max(0, o - 6), min(t, o + 1) + 1):
                    bumps[m, s, I[j, GI.resource]] += bump[s - o + 6]
        q[m, 2] = n_hidden - codes.size
        idx[m] = i
        m += 1
    return idx[:m], bumps[:m], q[:m]


@numba.njit
def _skip(rng, args, n):
    for _ in range(n):
        _draw_week(rng, args)


def rejection_draws(record, focus, n, seed=12345, block=4000, max_weeks=8_000_000):
    """``n`` exact draws from the posterior of the tiny world's weeks given ``record``, by rejection: weeks from the
    generator whose ledger has the record's public fields, accepted with probability Π p(hint | bumps) / sup_b
    p(hint | b) (the record's hints, by the exact density above; no hint of the record may be 1), then kept if
    replayed with those hints and the agent's policy they give the same record. Returns ``(posterior quantities,
    quantities given the ledger's public fields only)`` (the columns of :func:`_scan`)."""
    t, R, T, sigma = record.t, record.n_resources, record.horizon, TINY.hint_noise
    assert record.hints.max() < 1.0
    codes = _codes(record)
    assert len(set(codes)) == len(codes)
    want = _signature(record)
    args = draw_arguments(TINY)
    rng, accept = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    env = AgentView(PMWeekEnv(budget=None, per_step_cap=2, world=TINY))
    # per observed hint, its largest likelihood over bump sums b >= 0: b = 0 at the atom 0, else the density's mode
    # 0.05 where h - b can reach it (the density of h - b is unimodal about 0.05)
    bound = sum(log_tail(0.0, sigma, False) if h <= 0 else log_density(min(h, 0.05), sigma)
                for h in record.hints.ravel())
    memo = {}
    post, prior, n_weeks = [], [], 0
    while len(post) < n:
        assert n_weeks < max_weeks, f"the reference is too slow for this record ({len(post)} draws in {n_weeks} weeks)"
        state = rng.bit_generator.state
        idx, bumps, q = _scan(rng, args, block, t, np.sort(np.array(codes, dtype=np.int64)), codes[focus], R, T,
                              TINY.hint_width)
        n_weeks += block
        prior.append(q)
        for j, b, qj in zip(idx, bumps, q):
            logr = -bound
            for key in zip(record.hints.ravel().tolist(), b.ravel().tolist()):
                if key not in memo:
                    memo[key] = exact_hint_loglik(*key, sigma)
                logr += memo[key]
            if accept.random() >= np.exp(logr):
                continue
            g = np.random.Generator(np.random.PCG64())
            g.bit_generator.state = state
            _skip(g, args, int(j))
            ep = generate_episode(config=TINY, rng=g)
            ep.hints[: t + 1] = record.hints
            if _signature(_record(env, ep, t)) == want:
                post.append(qj)
    return np.array(post[:n]), np.concatenate(prior)


def sampler_draws(record, focus, n, seed=500, batch=250):
    """The sampler's quantities (as :func:`_scan`'s): ``batch`` resampled from 4 x ``batch`` weighted draws per call."""
    from membudget.teachers.posterior import RW, PosteriorSampler

    sampler = PosteriorSampler(world=TINY, n_particles=4 * batch).fit()
    out = []
    for k in range(n // batch):
        p = sampler.sample(record, batch, np.random.default_rng(seed + k))
        assert p.ess > 0.5 * 4 * batch
        for i in range(batch):
            rows = p.table(i)
            entry = rows[rows[:, RW.ledger] == focus][0]
            unseen = rows[rows[:, RW.ledger] < 0]
            out.append((entry[RW.polarity], entry[RW.onset] if entry[RW.onset] < NEVER else -1, len(unseen),
                        int(np.sum(unseen[:, RW.onset] <= record.t + 6))))
    return np.array(out)


@pytest.mark.slow  # about 15 s and 40 s (the reference draws 0.5 and 3.5 million weeks)
@pytest.mark.parametrize("week, t, n_exact, min_tv", [(12, 4, 2000, 0.3), (512, 3, 500, 0.1)])
def test_posterior_on_a_tiny_world_matches_rejection_sampling(week, t, n_exact, min_tv):
    """Given the record of an agent (a fixed query policy) at step ``t`` of a tiny week — week 12: one channel entry
    queried at steps 1 and 3 without result; week 512: one channel entry a query resolved as a hit — 2,000 draws of
    the sampler and ``n_exact`` exact draws by rejection have the same distribution of the entry's (polarity, onset), of
    the number of hidden rows outside the ledger and of those whose hint bump reaches the observed steps
    (two-sample chi-square, rare categories pooled, level 1e-4). The record conditions: the entry's (polarity,
    onset) is at least ``min_tv`` in total variation from its distribution given the ledger's public fields."""
    record = _record(AgentView(PMWeekEnv(budget=None, per_step_cap=2, world=TINY)), generate_episode(week, TINY), t)
    assert len(record.ledger) == 1 and record.queried.any()
    ref, prior = rejection_draws(record, 0, n_exact)
    got = sampler_draws(record, 0, 2000)

    def entry(q):
        return [(int(a), int(b)) for a, b in q[:, :2]]

    assert total_variation(entry(prior), entry(ref)) > min_tv
    for name, col in (("entry (polarity, onset)", None), ("hidden rows outside the ledger", 2),
                      ("of those, onset within t + 6", 3)):
        a, b = (entry(got), entry(ref)) if col is None else (got[:, col].tolist(), ref[:, col].tolist())
        p = chi2_pvalue(a, b)
        assert p > ALPHA, f"{name}: p = {p:.3g}, sampler {sorted(Counter(a).items())}, " \
                          f"exact {sorted(Counter(b).items())}"

