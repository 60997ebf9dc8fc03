"""The discretised PLD conditioned on the number of large steps (``conversions.pld_split``), against an
independent high-precision reference.

Reference for T = 2 (remove pair P = ((1-q) N(0,1) + q N(mu,1))^2, Q = N(0,1)^2, h(x) = 1 - q + q e^{mu x
- mu^2/2} the one-step likelihood ratio): delta(eps) = E_Q[(h(x) h(y) - e^eps)_+]; for fixed x the set
{y : h(y) > e^eps / h(x)} is a half line y > y*(x) (h is increasing), so the inner integral is closed form,

    int_{y*}^inf phi(y) (h(x) h(y) - e^eps) dy = h(x) ((1-q) Q(y*) + q Q(y* - mu)) - e^eps Q(y*),

and the outer integral is done by mpmath quadrature at 40 digits (no library code).  The reference is
itself checked against T = 1 (where it is the closed form of ``conversions.poisson_gaussian_dp``'s
derivation, evaluated here independently) and against a direct 2-D quadrature at a moderate delta.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from conversions import pld_split
from conversions.pld import pld_delta_bounds, pld_epsilon_bounds
from mechanisms import SubsampledGaussian


def _h(x, q, mu):
    return 1 - q + q * mp.exp(mu * x - mu * mu / 2)


def _ystar(r, q, mu):
    """y with h(y) = r (-inf when every y qualifies: r <= 1 - q)."""
    a = r - 1 + q
    if a <= 0:
        return -mp.inf
    return (mp.log(a / q) + mu * mu / 2) / mu


def delta_t2(eps, q, sigma):
    """delta(eps) of two remove-direction steps, 40 digits (module docstring)."""
    with mp.workdps(40):
        q, mu, ee = mp.mpf(q), 1 / mp.mpf(sigma), mp.exp(mp.mpf(eps))

        def inner(x):
            hx = _h(x, q, mu)
            ys = _ystar(ee / hx, q, mu)
            if ys == -mp.inf:
                return hx - ee  # E_Q[h(y)] = 1
            qs = mp.ncdf(-ys)
            return hx * ((1 - q) * qs + q * mp.ncdf(-(ys - mu))) - ee * qs

        f = lambda x: mp.npdf(x) * inner(x)  # noqa: E731
        # the integrand has a kink where y* leaves -inf (h(x) = e^eps / (1 - q)): a breakpoint there and
        # at +-0.1, +-1 around it (without them the quadrature is off by up to ~1e-5 relative)
        xk = _ystar(ee / (1 - q), q, mu)
        pts = [-mp.inf, -8, -4, 0, 2, 4, 6, 8, 10, 13, 17, mp.inf]
        if xk != -mp.inf:
            pts = sorted(set(pts + [xk - 1, xk - mp.mpf("0.1"), xk, xk + mp.mpf("0.1"), xk + 1]))
        return mp.quad(f, pts, maxdegree=10)


def delta_t1(eps, q, sigma):
    """delta(eps) of one remove-direction step: E_Q[(h - e^eps)_+] on the half line x > x*."""
    with mp.workdps(40):
        q, mu, ee = mp.mpf(q), 1 / mp.mpf(sigma), mp.exp(mp.mpf(eps))
        xs = _ystar(ee, q, mu)
        return (1 - q) * mp.ncdf(-xs) + q * mp.ncdf(-(xs - mu)) - ee * mp.ncdf(-xs)


def test_reference_t1_matches_quadrature():
    """The half-line identity at T = 1 against plain quadrature of E_Q[(h - e^eps)_+]."""
    q, sigma, eps = 0.01, 1.1, 0.1
    with mp.workdps(30):
        mu, ee = 1 / mp.mpf(sigma), mp.exp(mp.mpf(eps))
        xs = _ystar(ee, mp.mpf(q), mu)  # (the integrand's kink: integrate the smooth piece beyond it)
        direct = mp.quad(lambda x: mp.npdf(x) * (_h(x, mp.mpf(q), mu) - ee), [xs, xs + 2, xs + 6, mp.inf])
        assert mp.quad(lambda x: mp.npdf(x) * max(_h(x, mp.mpf(q), mu) - ee, 0), [xs - 4, xs]) == 0
    assert abs(delta_t1(eps, q, sigma) - direct) <= 1e-12 * direct


def test_reference_t2_matches_direct_double_integral():
    """The closed inner integral against scipy's 2-D quadrature of E_Q[(h(x) h(y) - e^eps)_+]."""
    from scipy import integrate

    q, sigma, eps = 0.05, 1.0, 0.3
    mu = 1 / sigma
    h = lambda x: 1 - q + q * math.exp(mu * x - mu * mu / 2)  # noqa: E731
    phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    f = lambda y, x: phi(x) * phi(y) * max(h(x) * h(y) - math.exp(eps), 0.0)  # noqa: E731
    val, err = integrate.dblquad(f, -8, 12, -8, 12, epsabs=1e-13, epsrel=1e-10)
    ref = float(delta_t2(eps, q, sigma))
    assert abs(ref - val) <= 1e-8 * ref + 2 * err


@pytest.mark.parametrize("q,sigma,eps", [(1e-4, 1.0, 0.02), (1e-4, 1.0, 0.04), (1e-3, 2.0, 0.01),
                                         (1e-3, 1.0, 0.05)])
def test_split_brackets_contain_the_two_step_delta(q, sigma, eps):
    """Every term of the decomposition and the remainder bound: delta_lo <= delta_true <= delta_up."""
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    truth = float(delta_t2(eps, q, sigma))
    sp = pld_split.SplitPLD(mech, 2, "remove", 0.5 * eps, eps, max(truth, 1e-300), 1e-3,
                            0.8 * max(1e-3 * eps, 1e-4), 1 << 18)
    lo, up = sp.lower(eps), sp.upper(eps)
    assert lo <= truth * (1 + 1e-12) and truth <= up * (1 + 1e-12), (lo, truth, up)
    assert up - lo <= 0.2 * truth  # and it is informative (the grid's T Delta shift: a few percent)


def test_epsilon_bracket_contains_the_two_step_truth():
    """pld_epsilon_bounds (with the split where the plain grid is wide): delta_true(lower) >= delta and
    delta_true(upper) <= delta, i.e. lower <= eps_true <= upper."""
    q, sigma, delta = 1e-4, 1.0, 1e-12
    r = pld_epsilon_bounds([(SubsampledGaussian(sigma=sigma, sample_rate=q), 2)], delta, "remove")
    assert float(delta_t2(r.upper, q, sigma)) <= delta
    if r.lower > 0:
        assert float(delta_t2(r.lower, q, sigma)) >= delta


def test_split_narrows_the_few_step_tiny_delta_corner():
    """q = 1e-4, sigma = 1, T = 10, delta = 1e-12 (the plain tilted grid certifies about [0.017, 0.067]):
    the split, started from the plain grid's first bracket, and the whole query (whose later passes now
    take the loss's upper tail in closed form) reach the target width (1e-4 absolute below eps = 0.1) and
    stay inside the reference interval computed by tests/reference_dpsgd.py (delta_ref(0.04676884) =
    1.005e-12 > delta and delta_ref(0.04684599) = 9.949e-13 < delta, so eps_true lies in between;
    recomputed live in the slow test below)."""
    ents = [(SubsampledGaussian(sigma=1.0, sample_rate=1e-4), 10)]
    lo, up, info = pld_split.split_epsilon_bracket(ents, 1e-12, "remove", 1e-3, 0.0, 0.4785, 1 << 21)
    r = pld_epsilon_bounds(ents, 1e-12, "remove")
    assert "split_terms" in info and ("split_terms" in r.details or "loss_tail_top" in r.details)
    for a, b in ((lo, up), (r.lower, r.upper)):
        assert b - a <= 1e-4
        assert a <= 0.04684599 and b >= 0.04676884  # necessary for lower <= eps_true <= upper


@pytest.mark.slow
def test_split_bracket_against_the_dpsgd_reference_live():
    """The same setting against the MGF-inversion reference, live (several minutes)."""
    import reference_dpsgd as R

    r = pld_epsilon_bounds([(SubsampledGaussian(sigma=1.0, sample_rate=1e-4), 10)], 1e-12, "remove")
    lo_ref, up_ref = R.deltas_ref([r.lower, r.upper], 1.0, 1e-4, 10, "remove")
    assert lo_ref.value >= 1e-12 and up_ref.value <= 1e-12


def test_parts_partition_the_cell_masses():
    """The two parts' cell masses add up to the mechanism's, on edges that do and do not hold the cut."""
    mech = SubsampledGaussian(sigma=1.0, sample_rate=1e-3)
    for cut, memo in ((0.01, None), (0.0125, None), (0.01, {}), (0.0125, {})):
        core = pld_split._LossPart(base=mech, cut=cut, big=False, memo=memo)
        big = pld_split._LossPart(base=mech, cut=cut, big=True, memo=memo)
        edges = np.arange(-4, 400) * 0.0025
        m, _ = mech.pld_cell_masses(edges, "remove")
        mc, _ = core.pld_cell_masses(edges, "remove")
        mb, _ = big.pld_cell_masses(edges, "remove")
        np.testing.assert_allclose(mc + mb, m, rtol=1e-12, atol=1e-300)
        k = int(np.searchsorted(edges, cut, side="left"))
        assert np.all(mc[k + 1:] == 0) and np.all(mb[:k] == 0)
        if memo is not None:  # the shared memo: the second part reused the first one's base masses,
            assert len(memo["cells"]) == 1  # and other edges or the other direction are not confused
            ma, _ = big.pld_cell_masses(edges, "add")
            np.testing.assert_array_equal(ma, pld_split._LossPart(base=mech, cut=cut, big=True)
                                          .pld_cell_masses(edges, "add")[0])
            mc2, _ = core.pld_cell_masses(edges[:-1], "remove")
            assert mc2.shape == (edges.size,) and len(memo["cells"]) == 3


def test_part_cells_gathered_like_searchsorted_on_any_grid():
    """A part's cells come from the base's masses on the edges with the cut (and top) inserted, each
    refined cell added to the caller's cell holding it.  On a strictly increasing grid the gathering uses
    the insertion positions; on others (a repeated edge) ``searchsorted``.  Both must equal the refined
    masses gathered by ``searchsorted`` of the refined cells' upper ends, computed here directly."""
    mech = SubsampledGaussian(sigma=1.0, sample_rate=1e-3)
    base = np.arange(-4, 400) * 0.0025
    for edges in (base, np.insert(base, 50, base[50]), base[base != 0.0125]):
        for cut, top, big in ((0.01, math.inf, False), (0.0125, math.inf, True), (0.011, 0.0512, True),
                              (0.0125, 0.05, True), (-1.0, 0.05, True)):
            part = pld_split._LossPart(base=mech, cut=cut, big=big, top=top)
            got, got_err = part.pld_cell_masses(edges, "remove")
            e2 = edges
            for end in (cut, top) if top < math.inf else (cut,):
                e2 = np.insert(e2, int(np.searchsorted(e2, end, side="left")), end)
            m, err = mech.pld_cell_masses(e2, "remove")
            lower = np.concatenate([[-math.inf], e2])
            upper = np.concatenate([e2, [math.inf]])
            keep = ((lower >= cut) & (lower < top)) if big else (lower < cut)
            idx = np.searchsorted(edges, upper, side="left")
            np.testing.assert_array_equal(got, np.bincount(idx[keep], weights=m[keep],
                                                           minlength=edges.size + 1))
            err = np.broadcast_to(err, m.shape)
            np.testing.assert_array_equal(got_err, np.bincount(idx[keep], weights=err[keep],
                                                               minlength=edges.size + 1))


def _tails_mp(level, q, sigma):
    """P(L > level), Q(L > level) of one remove-direction step (40 digits): L > level iff x > x*."""
    with mp.workdps(40):
        q, mu = mp.mpf(q), 1 / mp.mpf(sigma)
        xs = _ystar(mp.exp(mp.mpf(level)), q, mu)
        return (1 - q) * mp.ncdf(-xs) + q * mp.ncdf(-(xs - mu)), mp.ncdf(-xs)


@pytest.mark.parametrize("q,sigma,level", [(1e-4, 1.0, 0.097), (1e-3, 0.5, 1.3), (0.3, 2.0, 0.2),
                                           (1e-6, 1.0, 1e-4), (0.01, 1.1, 4.0)])
def test_upper_tail_and_loss_floor_against_mpmath(q, sigma, level):
    """``pld_upper_tail`` brackets the exact P- and Q-masses above a loss level (to 1e-10 relative);
    ``pld_loss_floor`` is at most the loss infimum log(1 - q) and within 1e-15 of it (remove); the add
    direction has neither."""
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    p_lo, p_up, q_lo, q_up = mech.pld_upper_tail(level, "remove")
    p_ref, q_ref = _tails_mp(level, q, sigma)
    assert p_lo <= p_ref <= p_up and p_up - p_lo <= 1e-10 * p_ref
    assert q_lo <= q_ref <= q_up and q_up - q_lo <= 1e-10 * q_ref
    floor = mech.pld_loss_floor("remove")
    with mp.workdps(40):
        inf_loss = mp.log(1 - mp.mpf(q))
    assert floor <= inf_loss and inf_loss - floor <= 1e-15 * max(1.0, abs(floor))
    assert mech.pld_loss_floor("add") == -math.inf and mech.pld_upper_tail(level, "add") is None


def test_bounded_large_part_partitions_the_cell_masses():
    """core (L <= cut) + large part bounded at top (cut < L <= top) + the part above top = the mechanism's
    cells, on edges that do and do not hold cut and top."""
    mech = SubsampledGaussian(sigma=1.0, sample_rate=1e-3)
    for cut, top in ((0.01, 0.05), (0.0125, 0.0512), (0.01, 0.0125)):
        edges = np.arange(-4, 400) * 0.0025
        m, _ = mech.pld_cell_masses(edges, "remove")
        mc, _ = pld_split._LossPart(base=mech, cut=cut, big=False).pld_cell_masses(edges, "remove")
        mb, eb = pld_split._LossPart(base=mech, cut=cut, big=True, top=top).pld_cell_masses(edges,
                                                                                            "remove")
        mt, _ = pld_split._LossPart(base=mech, cut=top, big=True).pld_cell_masses(edges, "remove")
        np.testing.assert_allclose(mc + mb + mt, m, rtol=1e-12, atol=1e-300)
        inside = (np.concatenate([[-np.inf], edges]) >= cut - 0.0025) & (
            np.concatenate([edges, [np.inf]]) <= top + 0.0025)
        assert np.all(mb[~inside] == 0) and np.all(eb >= 0)
        memo: dict = {}  # the two parts of a split insert the same ends: one base evaluation serves both
        for big in (False, True):
            part = pld_split._LossPart(base=mech, cut=cut, big=big, top=top, memo=memo)
            np.testing.assert_array_equal(part.pld_cell_masses(edges, "remove")[0], mb if big else mc)
        assert len(memo["cells"]) == 1
        # ... and so do the Q-masses: the parts' Q-masses (shared) add up to the base's with the part above
        # top, and equal those computed without the memo
        qs = [pld_split._LossPart(base=mech, cut=cut, big=big, top=top, memo=memo).pld_cell_q_masses(
            edges, "remove")[0] for big in (False, True)]
        assert len(memo["q_cells"]) == 1
        for big, qv in zip((False, True), qs, strict=True):
            alone = pld_split._LossPart(base=mech, cut=cut, big=big, top=top)
            np.testing.assert_array_equal(qv, alone.pld_cell_q_masses(edges, "remove")[0])
        qt = pld_split._LossPart(base=mech, cut=top, big=True).pld_cell_q_masses(edges, "remove")[0]
        np.testing.assert_allclose(qs[0] + qs[1] + qt, mech.pld_cell_q_masses(edges, "remove")[0],
                                   rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("q,sigma,eps", [(1e-4, 1.0, 0.02), (1e-4, 1.0, 0.04), (1e-3, 1.0, 0.05),
                                         (0.02, 0.8, 0.3)])
def test_split_with_closed_form_tail_contains_the_two_step_delta(q, sigma, eps):
    """With the large part bounded above (eps_max given) the tail's part of delta is the closed form
    P^T(A) - e^eps Q^T(A); the bracket still holds the T = 2 reference at eps and below, and above
    eps_max (where the closed form does not hold) the bounds stay valid."""
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    eps_max = 1.5 * eps
    sp = pld_split.SplitPLD(mech, 2, "remove", 0.5 * eps, eps, float(delta_t2(eps, q, sigma)), 1e-3,
                            0.8 * max(1e-3 * eps, 1e-4), 1 << 18, eps_max)
    assert sp.tail is not None and sp.cut < sp.top == sp.tail.top < math.inf
    assert sp.top + mech.pld_loss_floor("remove") >= eps_max  # (the tail's condition, T - 1 = 1)
    for e in (0.5 * eps, eps, eps_max, 2.0 * eps_max):
        truth = float(delta_t2(e, q, sigma))
        lo, up = sp.lower(e), sp.upper(e)
        assert lo <= truth * (1 + 1e-12) and truth <= up * (1 + 1e-12), (e, lo, truth, up)
        if e <= eps_max:
            assert up - lo <= 0.2 * truth


def test_closed_form_tail_at_one_step_is_the_exact_delta_above_top():
    """T = 1: top = eps_max and the tail term is P(L > top) - e^eps Q(L > top), the exact contribution of
    the outputs above top to delta(eps) for eps <= top (mpmath)."""
    q, sigma, eps_max = 1e-3, 1.0, 0.8
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    sp = pld_split.SplitPLD(mech, 1, "remove", 0.1, 0.5, 1e-8, 1e-3, 1e-4, 1 << 16, eps_max)
    p_ref, q_ref = _tails_mp(sp.top, q, sigma)
    for e in (0.2, 0.5, eps_max):
        with mp.workdps(40):
            want = p_ref - mp.exp(mp.mpf(e)) * q_ref
        assert sp.tail.delta(e, False) <= want <= sp.tail.delta(e, True)
        assert sp.tail.delta(e, True) - sp.tail.delta(e, False) <= 1e-9 * want


def test_bounded_large_part_narrows_the_t100_tiny_delta_corner():
    """q = 1e-4, sigma = 1, T = 100, delta = 1e-12 (a regimes-sweep setting that was 1.8e-3 wide and took
    1.2 s: the large part's grid reached loss 0.42 and was capped): with the tail in closed form the
    bracket meets the target (1e-4 absolute below eps = 0.1) and lies inside the one the capped grid
    certified, [0.067396, 0.067517] (both certified: the new one must intersect it), and the
    MGF-inversion reference of tests/reference_dpsgd.py (~10 s) confirms both ends: delta_ref(lower) >=
    delta >= delta_ref(upper)."""
    import reference_dpsgd as R

    r = pld_epsilon_bounds([(SubsampledGaussian(sigma=1.0, sample_rate=1e-4), 100)], 1e-12, "remove")
    assert r.upper - r.lower <= 1e-4
    assert r.lower <= 0.067517 and r.upper >= 0.067396
    lo_ref, up_ref = R.deltas_ref([r.lower, r.upper], 1.0, 1e-4, 100, "remove")
    assert lo_ref.value >= 1e-12 >= up_ref.value


def test_delta_query_uses_the_split_and_stays_sound():
    q, sigma, eps = 1e-4, 1.0, 0.03
    truth = float(delta_t2(eps, q, sigma))
    r = pld_delta_bounds([(SubsampledGaussian(sigma=sigma, sample_rate=q), 2)], eps, "remove")
    assert r.lower <= truth <= r.upper


def test_auto_still_reruns_the_deferred_contour_after_a_split():
    """Where the contour's own near-atomic split is exact-grade (q = 1e-3, sigma = 2, T = 100, delta =
    1e-10), a pld answer that needed the large-step split (round-up cells, ~1e-3 wide) does not stop auto
    from re-running the deferred contour: the certificate is the contour's, 1e-5 relative wide, and the
    two certified brackets overlap (each must contain the truth)."""
    from accountant import PrivacyAccountant

    acct = PrivacyAccountant().compose(SubsampledGaussian(sigma=2.0, sample_rate=1e-3), times=100)
    c = acct.certificate(delta=1e-10)
    assert c.method == "cf"
    assert c.epsilon - c.lower_bound <= 1e-5 * c.epsilon
    pld = acct.certificate(delta=1e-10, method="pld")
    assert pld.lower_bound <= c.epsilon and c.lower_bound <= pld.epsilon  # both brackets hold the truth


def test_split_sums_never_certify_from_a_nan_term():
    """A term whose evaluator returns NaN (or more than its mass) counts with its mass bound in the upper
    sum and not at all in the lower sum: the split can only get looser, never unsound."""
    sp = pld_split.SplitPLD(SubsampledGaussian(sigma=1.0, sample_rate=1e-4), 2, "remove", 0.02, 0.04,
                            1e-12, 1e-3, 1e-4, 1 << 16)

    class _NaN:
        def upper(self, eps):
            return math.nan

        def lower(self, eps):
            return math.nan

    sp.terms = [(j, c_up, c_dn, _NaN(), mass) for j, c_up, c_dn, _, mass in sp.terms]
    eps = 0.01  # below T cut: the j = 0 term is not exactly 0 there
    want = sp.rem + sum(c_up * mass for _, c_up, _, _, mass in sp.terms)
    assert sp.upper(eps) == min(1.0, want * (1 + 1e-12))
    assert sp.lower(eps) == 0.0
    assert math.isfinite(sp.upper(0.1)) and sp.lower(0.1) == 0.0
