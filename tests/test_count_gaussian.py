"""The sample-count bound of T Poisson-subsampled Gaussian steps (conversions.count_gaussian, route
"count").

References: the bound's own formula sum_k Bin(k; T, q) delta_G(eps; sqrt(k) mu) evaluated independently
in mpmath (40 digits, every count); the mu-GDP closed form at q = 1; the exact one-step profile of the
subsampled Gaussian (conversions.poisson_gaussian_dp) and the discretised PLD's certified bracket as
the truth it must never undercut; monotonicity in steps, rate and noise.
"""

from __future__ import annotations

import math
import warnings

import mpmath as mp
import numpy as np
import pytest

from accountant import PrivacyAccountant
from conversions import count_gaussian as cg
from conversions import poisson_gaussian_dp


def _count_delta_mp(eps: float, q: float, mu: float, steps: int) -> mp.mpf:
    with mp.workdps(40):
        e, qq, m = mp.mpf(eps), mp.mpf(q), mp.mpf(mu)
        tot = mp.mpf(0)
        for k in range(steps + 1):
            w = mp.binomial(steps, k) * qq**k * (1 - qq) ** (steps - k)
            if k == 0:
                d = max(mp.mpf(0), 1 - mp.exp(e))
            else:
                mk = mp.sqrt(k) * m
                d = mp.ncdf(-e / mk + mk / 2) - mp.exp(e) * mp.ncdf(-e / mk - mk / 2)
            tot += w * d
        return tot


@pytest.mark.parametrize("eps,q,sigma,steps", [
    (1.0, 0.01, 1.0, 50), (5.0, 0.1, 0.5, 20), (0.3, 0.5, 2.0, 7), (600.0, 0.01, 0.05, 40),
    (-0.5, 0.2, 1.0, 5)])
def test_delta_upper_is_the_formula_rounded_up(eps, q, sigma, steps):
    ref = _count_delta_mp(eps, q, 1.0 / sigma, steps)
    got, det = cg.delta_upper(eps, q, 1.0 / sigma, steps)
    assert got >= ref
    assert got <= ref * (1 + 1e-8) + 1e-290
    assert det["route"] == "count" and "upper only" in det["bound"]


def test_full_rate_is_the_gaussian_closed_form():
    """q = 1: every step sampled, the bound is delta_G(eps; sqrt(T) mu) (mu-GDP, exact)."""
    mu, steps = 0.7, 9
    with mp.workdps(40):
        m = mp.sqrt(steps) * mu
        for eps in (0.5, 2.0, 6.0):
            ref = mp.ncdf(-eps / m + m / 2) - mp.exp(eps) * mp.ncdf(-eps / m - m / 2)
            got = cg.delta_upper(eps, 1.0, mu, steps)[0]
            assert ref <= got <= ref * (1 + 1e-8)


def test_epsilon_upper_inverts_the_certified_delta():
    q, mu, steps, delta = 0.01, 1 / 0.05, 300, 1e-6
    eps, _ = cg.epsilon_upper(delta, q, mu, steps)
    cb = cg.CountBound(q, mu, steps, cg.TAIL_FRACTION * delta)
    assert cb.delta_upper(eps) <= delta < cb.delta_upper(eps * (1 - 1e-9))
    # and the formula itself (mpmath) is below delta there
    assert _count_delta_mp(eps, q, mu, steps) <= delta


@pytest.mark.parametrize("sigma", [2.0, 0.8, 0.3, 0.05, 0.01])
@pytest.mark.parametrize("q", [0.3, 0.01])
def test_never_below_the_exact_one_step_profile(q, sigma):
    """T = 1: the truth is the exact profile of the worst direction; the bound may not undercut it."""
    mu = 1.0 / sigma
    for delta in (1e-3, 1e-6, 1e-10):
        truth_lo = max(poisson_gaussian_dp.epsilon_bounds(delta, mu, q, d)[0] for d in ("remove", "add"))
        up, _ = cg.epsilon_upper(delta, q, mu, 1)
        assert up >= truth_lo


def test_never_below_the_pld_bracket_and_nearly_tight_at_small_sigma():
    """sigma = 0.03 (mu = 33): the discretised PLD certifies a bracket around the truth; the count bound
    is above its lower end (sound) and within 1.5% of its upper end (the mixing it ignores is tiny)."""
    acct = PrivacyAccountant().step(sigma=0.03, sample_rate=0.01, steps=1000)
    pld = acct.certificate(delta=1e-5, method="pld")
    up, _ = cg.epsilon_upper(1e-5, 0.01, 1 / 0.03, 1000)
    assert up >= pld.lower_bound
    assert up <= 1.015 * pld.epsilon


def test_monotone_in_steps_rate_and_noise():
    def eps(q, sigma, steps):
        return cg.epsilon_upper(1e-5, q, 1.0 / sigma, steps)[0]

    assert eps(0.01, 0.05, 10) <= eps(0.01, 0.05, 100) <= eps(0.01, 0.05, 1000)
    assert eps(0.001, 0.05, 100) <= eps(0.01, 0.05, 100) <= eps(0.1, 0.05, 100)
    assert eps(0.01, 0.1, 100) <= eps(0.01, 0.05, 100) <= eps(0.01, 0.01, 100)


def test_bad_input_and_bounded_work():
    with pytest.raises(ValueError, match="sample_rate"):
        cg.epsilon_upper(1e-5, 1.5, 1.0, 10)
    with pytest.raises(ValueError, match="mu"):
        cg.epsilon_upper(1e-5, 0.1, math.inf, 10)
    with pytest.raises(ValueError, match="steps"):
        cg.epsilon_upper(1e-5, 0.1, 1.0, 0)
    with pytest.raises(ValueError, match="delta"):
        cg.epsilon_upper(0.0, 0.1, 1.0, 10)
    with pytest.raises(ValueError, match="epsilon"):
        cg.delta_upper(math.nan, 0.1, 1.0, 10)
    with pytest.raises(ValueError, match="sample counts"):
        cg.epsilon_upper(1e-5, 0.5, 1.0, 10**12)


def test_auto_uses_the_route_at_small_sigma_only():
    """sigma = 0.00985, q = 0.01, T = 1000: the discretised PLD's grid is capped by the loss span (1.0e6)
    and RDP gives 5.2e6; the count bound (1.34e5) is the answer.  At sigma = 1 auto does not evaluate it
    (the amplification by mixing it ignores dominates)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cert = PrivacyAccountant().step(sigma=0.0098534294, sample_rate=0.01, steps=1000).certificate(
            delta=1e-5)
    assert cert.method == "count" and cert.epsilon < 0.2 * cert.candidates["pld"]
    assert cert.epsilon < 0.05 * cert.candidates["rdp"]
    cert = PrivacyAccountant().step(sigma=1.0, sample_rate=0.01, steps=100).certificate(delta=1e-5)
    assert "count" not in cert.candidates
    # an explicit method="count" works at any sigma (a valid, looser upper bound there)
    acct = PrivacyAccountant().step(sigma=1.0, sample_rate=0.01, steps=100)
    c = acct.certificate(delta=1e-5, method="count")
    assert c.epsilon >= cert.lower_bound and c.method == "count"


# ------------------------------------------------------------------ the threshold-count lower bound
from conversions import lower_bounds  # noqa: E402
from conversions.lower_bounds_count import Z_GRID, CountStatistic  # noqa: E402


def test_count_statistic_masses_are_on_the_safe_side():
    """Against mpmath (40 digits): P(N_t >= n) of Bin(T, p1) from below, Q(N_t >= n) of Bin(T, p0) from
    above, both within 1e-9 relative, for a few thresholds and counts."""
    s, q, steps = 0.05, 0.01, 60
    st = CountStatistic(s, q, steps)
    with mp.workdps(40):
        for i in (0, 12, 30, 40):
            t = 1 - mp.mpf(float(Z_GRID[i])) * mp.mpf(s)
            p0 = mp.ncdf(-t / s)
            p1 = (1 - mp.mpf(q)) * p0 + mp.mpf(q) * mp.ncdf((1 - t) / s)
            for n in (1, 2, 4, 7):
                def tail(p, n=n):
                    return mp.fsum(mp.binomial(steps, m) * p**m * (1 - p) ** (steps - m)
                                   for m in range(n, steps + 1))
                lp, lq = mp.log(tail(p1)), mp.log(tail(p0))
                assert st.log_p_tail_lo[i][n] <= lp and lp - st.log_p_tail_lo[i][n] <= 1e-9 * (1 + abs(lp))
                assert st.log_q_tail_hi[i][n] >= lq and st.log_q_tail_hi[i][n] - lq <= 1e-9 * (1 + abs(lq))


@pytest.mark.parametrize("sigma", [0.1, 0.03, 0.005])
def test_count_lower_bound_is_below_the_exact_one_step_profile(sigma):
    """T = 1: the exact profile (remove direction) is the truth; the statistic may not exceed it."""
    for delta in (1e-3, 1e-6, 1e-10):
        truth_up = poisson_gaussian_dp.epsilon_bounds(delta, 1 / sigma, 0.01, "remove")[1]
        lo = CountStatistic(sigma, 0.01, 1).epsilon_lower(delta)
        assert 0.0 < lo <= truth_up
        assert lo >= 0.9 * truth_up  # (one output: the threshold set is nearly the optimal one)


def test_count_lower_bound_brackets_the_truth_with_the_upper_bound():
    """sigma = 0.03, T = 1000: below the discretised PLD's certified upper end (the truth is below it)
    and within 12% of its lower end; sigma = 0.00985: a 4% bracket with the sample-count upper bound
    where the other routes certify nothing better than 1.0e6; delta_lower agrees with epsilon_lower."""
    acct = PrivacyAccountant().step(sigma=0.03, sample_rate=0.01, steps=1000)
    pld = acct.certificate(delta=1e-5, method="pld")
    lo = lower_bounds.epsilon_lower(acct._ledger.items(), 1e-5, "remove", statistic="count")
    assert 0.88 * pld.lower_bound <= lo <= pld.epsilon
    st = CountStatistic(0.0098534294, 0.01, 1000)
    lo = st.epsilon_lower(1e-5)
    up = cg.epsilon_upper(1e-5, 0.01, 1 / 0.0098534294, 1000)[0]
    assert lo <= up <= 1.05 * lo
    assert st.delta_lower(lo) >= 1e-5 * (1 - 1e-9)
    assert st.delta_lower(lo * 1.001) < 1e-5
    # the add direction gets nothing from this statistic, and "best" uses it at small sigma only
    led = acct._ledger.items()
    assert lower_bounds.epsilon_lower(led, 1e-5, "add", statistic="count") == 0.0


def test_max_statistic_at_tiny_sigma_no_longer_overflows():
    """The max statistic's delta at eps > 709 (e^eps overflowed: at tiny sigma no statistic lower bound
    was given at all): now evaluated in log space; its eps is a valid lower bound (below the count one
    bracket's upper end)."""
    led = PrivacyAccountant().step(sigma=0.0098534294, sample_rate=0.01, steps=1000)._ledger.items()
    lo_max = lower_bounds.epsilon_lower(led, 1e-5, "remove", statistic="max")
    assert 600.0 < lo_max <= cg.epsilon_upper(1e-5, 0.01, 1 / 0.0098534294, 1000)[0]
    assert lower_bounds.epsilon_lower(led, 1e-5, "remove") >= 1.2e5  # ("best": the count statistic)


def test_tiny_sigma_against_an_independent_reference():
    """sigma = 0.03, q = 0.01, T = 10: the conditional-Gaussian reference (tests/reference.py
    (an mpmath lower bound on the truth, tight at mu >> 1): the count bound and auto's answer are above
    it, and the count bound within 2% of it."""
    import reference

    ref = reference.tiny_sigma_epsilon_lower(0.03, 0.01, 10, 1e-5)
    up, _ = cg.epsilon_upper(1e-5, 0.01, 1 / 0.03, 10)
    assert ref <= up <= 1.02 * ref
    cert = PrivacyAccountant().step(sigma=0.03, sample_rate=0.01, steps=10).certificate(delta=1e-5)
    assert cert.epsilon >= ref and cert.lower_bound <= cert.epsilon


def test_count_lower_bound_at_many_steps_uses_a_window_of_counts():
    """T = 1e5, q = 0.1 (10^5 counts, more than the statistic sums): the sets {N >= n} are tried for n in
    a window around T q; the bound stays below the sample-count upper bound and within 15% of it (the
    other statistics gave 1.05e4 here)."""
    st = CountStatistic(0.02, 0.1, 100_000)
    assert st.n[0] > 0 and st.n.size <= 1 << 14
    lo = st.epsilon_lower(1e-5)
    up = cg.epsilon_upper(1e-5, 0.1, 1 / 0.02, 100_000)[0]
    assert 0.85 * up <= lo <= up


def test_auto_skips_a_contour_that_cannot_fit_its_work_limit():
    """sigma = 0.0036 (mu = 278): one real MGF evaluation costs ~1.2e6 units, so a contour (more than
    128 evaluations) cannot finish within auto's work limit; auto declines it up front (it ran ~0.8 s
    into the limit for the trivial bound) and answers by the count route.  Named, it still runs."""
    acct = PrivacyAccountant().step(sigma=0.0036, sample_rate=0.01, steps=1000)
    cert = acct.certificate(delta=1e-5)
    assert cert.method == "count" and "cf" not in cert.candidates
    assert "cf unavailable" in cert.details["route_notes"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        named = acct.certificate(delta=1e-5, method="cf")
    assert named.epsilon >= cert.lower_bound  # (a valid, here trivial or Chernoff, bound)


def test_vectorised_gaussian_upper_bound_matches_its_scalar_twin_and_mpmath():
    """conversions.gaussian_dp.gaussian_log_delta_upper_array (the count bound's per-count profile) is
    the formula of gaussian_log_delta_bounds' upper end, vectorised, with log_ndtr_bounds' sharper model
    of the arguments' rounding: never looser than the scalar twin, and never below the mu-GDP profile
    evaluated in mpmath (40 digits, compared exactly), from tiny to huge shifts and eps."""
    from conversions.gaussian_dp import gaussian_log_delta_bounds, gaussian_log_delta_upper_array

    mus = np.array([1e-3, 0.3, 1.0, 4.0, 30.0, 300.0])
    for eps in (-1.0, 0.0, 0.5, 3.0, 60.0, 5000.0):
        got = gaussian_log_delta_upper_array(eps, mus)
        for m, g in zip(mus, got, strict=True):
            up = gaussian_log_delta_bounds(eps, float(m))[2]
            assert g <= up + 1e-13 * (1.0 + abs(up))
            with mp.workdps(40):
                e, mm = mp.mpf(eps), mp.mpf(float(m))
                ref = mp.ncdf(-e / mm + mm / 2) - mp.exp(e) * mp.ncdf(-e / mm - mm / 2)
                assert ref <= 0 or mp.mpf(float(g)) >= mp.log(ref), (eps, m, g)
