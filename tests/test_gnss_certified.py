"""Core GNSS's certified worst-case RDP (mechanisms/gnss.py, "Certified evaluation"): never below an
independent mpmath supremum in the last digit and within 1e-10 of it, the interval bound as a property
(>= the function at points of random intervals), and the lemmas and rounding steps it rests on."""

from __future__ import annotations

import math
import random
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest

from mechanisms import _gnss_kernels as G
from mechanisms._numerics import two_product_scalar
from mechanisms.gnss import GNSS, gnss_rdp_exact

DPS = 50


def _f_mp(lam, u, sigma):
    """F at u = e^{2c}: the larger of D_lam(N(0, s2) || N(m_c, u s2)) and the reverse, m_c^2 = min(1, u),
    by the closed form in mpmath (+inf where it diverges)."""
    lam, s2 = mp.mpf(lam), mp.mpf(sigma) ** 2
    d = min(mp.mpf(1), u) / s2
    best = -mp.inf
    for v1, v2 in ((mp.mpf(1), u), (u, mp.mpf(1))):
        vl = lam * v2 + (1 - lam) * v1
        if vl <= 0:
            return mp.inf
        best = max(best, mp.log(v2 / v1) / 2 + mp.log(v2 / vl) / (2 * (lam - 1)) + lam * d / (2 * vl))
    return best


def _sup_mp(lam, beta, sigma, n=2001):
    """sup over c in [-beta, beta] of F(e^{2c}) in mpmath: a 2001-point grid in c (the ends and c = 0
    included), every grid local maximum refined by mpmath's findroot on the numerical derivative where
    the derivative changes sign from + to - around it."""
    with mp.workdps(DPS):
        b = mp.mpf(beta)

        def f(c):
            return _f_mp(lam, mp.exp(2 * c), sigma)

        def df(c):
            return mp.diff(f, c)

        cs = [b * (2 * mp.mpf(k) / (n - 1) - 1) for k in range(n)]
        vals = [f(c) for c in cs]
        best = max(vals)
        if best == mp.inf:
            return best
        for k in range(n):
            left = vals[k - 1] if k > 0 else -mp.inf
            right = vals[k + 1] if k < n - 1 else -mp.inf
            if vals[k] >= left and vals[k] >= right:
                lo, hi = cs[max(k - 1, 0)], cs[min(k + 1, n - 1)]
                if lo < hi and df(lo) > 0 > df(hi):
                    try:
                        r = mp.findroot(df, (lo, hi), solver="anderson")
                    except (ValueError, ZeroDivisionError):  # the kink at c = 0 (a grid node)
                        continue
                    if lo <= r <= hi:
                        best = max(best, f(r))
        return best


CASES = [
    (45.0, 0.01, 15.0),             # l beta = 0.45, Thm 23 under-reports here
    (49.9, 0.01, 15.0),             # l beta = 0.499
    (4991.0, 1e-4, 0.5),            # l beta = 0.4991, v_B(e^{2 beta}) ~ 2e-3: ill-conditioned in e^{2 beta}
    (4991.0, 1e-4, 50.0),
    (1.5, 0.33, 0.5),               # l beta = 0.495
    (13.206, 0.2 / 13.206, 15.0),
    (9.0, 0.05, 1.0),
    (2.0, 0.1, 3.0),
    (1.3, 0.3, 2.0),
    (1.001, 1e-3, 50.0),            # flat in c: the termwise bound alone does not converge here
    (1.001, 1e-4, 50.0),
    (100.0, 0.004999, 50.0),
    (3.0, 1e-4, 1.0),
    (1e16, 1e-18, 1.0),             # l >= 2^53: l - 1 rounds
]


def _random_cases(k, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(k):
        sigma = 10 ** rng.uniform(math.log10(0.5), math.log10(50.0))
        beta = 10 ** rng.uniform(-4, math.log10(0.45))
        lam = 1.0 + (0.5 / beta - 1.0) * rng.random() ** 2 if beta < 0.499 else 1.5
        out.append((lam, beta, sigma))
    return out


@pytest.mark.parametrize("lam, beta, sigma", CASES + _random_cases(8, 5))
def test_certified_gnss_is_never_below_the_mpmath_supremum(lam, beta, sigma):
    got = float(gnss_rdp_exact([lam], beta, sigma)[0])
    ref = _sup_mp(lam, beta, sigma)
    assert math.isfinite(got)
    with mp.workdps(DPS):
        assert mp.mpf(got) >= ref, (got, ref)
        assert mp.mpf(got) <= ref * (1 + mp.mpf("1e-10")), float(mp.mpf(got) / ref - 1)


@pytest.mark.parametrize("lam, beta, sigma", [(45.0, 0.01, 15.0), (4991.0, 1e-4, 0.5), (1.5, 0.33, 0.5),
                                              (9.0, 0.05, 1.0), (1.3, 0.3, 2.0), (100.0, 0.004999, 50.0)])
def test_termwise_branch_and_bound_alone_reaches_the_same_supremum(lam, beta, sigma):
    """The verification mode (termwise bound only, golden-section candidate, bisection) does not use the
    quasi-convexity lemma; where it converges it brackets the same mpmath supremum."""
    tw = G._gnss_certified_kernel(np.array([lam]), beta, sigma, G._GRID, G._GOLDEN_ITERS, G._MAX_EVALS,
                                  False)[0]
    ref = _sup_mp(lam, beta, sigma, n=401)
    with mp.workdps(DPS):
        assert mp.mpf(tw) >= ref
        assert mp.mpf(tw) <= ref * (1 + mp.mpf("1e-10"))
    assert float(gnss_rdp_exact([lam], beta, sigma)[0]) <= tw * (1 + 1e-12)


def _random_interval_setting(rng):
    sigma = 10 ** rng.uniform(-0.3, 1.7)
    beta = 10 ** rng.uniform(-5, math.log10(0.45))
    kind = rng.random()
    if kind < 0.2:  # near the divergence order 1/(1 - e^{-2 beta}): v_A, v_B close to 0
        lam = 1.0 / (-math.expm1(-2 * beta)) * (1 - 10 ** rng.uniform(-9, -2))
    elif kind < 0.4:
        lam = 1.0 + 10 ** rng.uniform(-4, -1)
    else:
        lam = 1.0 + (0.5 / beta) * rng.random()
    ca, cb = sorted(rng.uniform(-beta, beta) for _ in range(2))
    if rng.random() < 0.3:  # a narrow interval
        cb = min(beta, ca + beta * 10 ** rng.uniform(-12, -4))
    if rng.random() < 0.15:  # an interval straddling c = 0
        ca, cb = -abs(ca), abs(cb)
    return lam, sigma, math.expm1(2 * ca), math.expm1(2 * cb)


def test_interval_bound_dominates_the_function_at_points_of_random_intervals():
    """Property: for random (lam, sigma) and float intervals [wa, wb] of w = e^{2c} - 1, the interval
    bound (and the termwise bound it is capped by) is >= F at the ends, at c = 0 if inside, and at random
    points inside, F evaluated exactly (mpmath, 50 digits) at those float points."""
    rng = random.Random(20260511)
    n_inf = 0
    with mp.workdps(DPS):
        for _ in range(300):
            lam, sigma, wa, wb = _random_interval_setting(rng)
            inv_up = G._inv_s2_up(sigma)
            ib = G._interval_bound(wa, wb, lam, inv_up)
            tw = G._termwise_bound(wa, wb, lam, inv_up)
            assert ib <= tw
            n_inf += not math.isfinite(ib)
            pts = [wa, wb] + [min(max(wa + (wb - wa) * rng.random(), wa), wb) for _ in range(6)]
            if wa < 0.0 < wb:
                pts.append(0.0)
            for w in pts:
                f = _f_mp(lam, 1 + mp.mpf(w), sigma)
                assert mp.mpf(ib) >= f, (lam, sigma, wa, wb, w)
    assert n_inf < 30  # the property is not checked vacuously


def _directions_mp(lam, u, sigma):
    """(F_A, F_B) at u in mpmath: A = D(N(0, 1) || N(m, u)), B = D(N(m, u) || N(0, 1)), m^2 = min(1, u)."""
    lam, s2 = mp.mpf(lam), mp.mpf(sigma) ** 2
    d = min(mp.mpf(1), u) / s2
    out = []
    for v1, v2 in ((mp.mpf(1), u), (u, mp.mpf(1))):
        vl = lam * v2 + (1 - lam) * v1
        out.append(mp.inf if vl <= 0 else
                   mp.log(v2 / v1) / 2 + mp.log(v2 / vl) / (2 * (lam - 1)) + lam * d / (2 * vl))
    return out


def test_termwise_bound_dominates_each_direction_at_points_of_random_intervals():
    """Property, per direction (the quasi-convexity cap cannot hide a wrong endpoint here): A's bound
    T1_A(wb) + G_A(wa) >= F_A and B's bound T1_B(wa) + G_B(wb) >= F_B at points of [wa, wb]."""
    rng = random.Random(77)
    with mp.workdps(DPS):
        for _ in range(300):
            lam, sigma, wa, wb = _random_interval_setting(rng)
            inv_up = G._inv_s2_up(sigma)
            lm1 = lam - 1.0
            dl = G._U * lam if lam >= 2.0**53 else 0.0
            ga, gaa, _gb, _gba = G._node_terms(wa, lam, lm1, dl, inv_up)
            _ga, _gaa, gb, gba = G._node_terms(wb, lam, lm1, dl, inv_up)
            t1a, t1b = 0.5 * math.log1p(wa), 0.5 * math.log1p(wb)
            # _bound with the other direction's part at -inf isolates one direction
            bound_a = G._bound(t1a, t1b, ga, gaa, -np.inf, 0.0)
            bound_b = G._bound(t1a, t1b, -np.inf, 0.0, gb, gba)
            for w in [wa, wb] + [min(max(wa + (wb - wa) * rng.random(), wa), wb) for _ in range(6)]:
                fa, fb = _directions_mp(lam, 1 + mp.mpf(w), sigma)
                assert mp.mpf(bound_a) >= fa, (lam, sigma, wa, wb, w)
                assert mp.mpf(bound_b) >= fb, (lam, sigma, wa, wb, w)


def test_direction_symmetry_f_a_at_minus_c_is_f_b_at_c():
    """Affine invariance of the Renyi divergence (scale by e^{c}, reflect): F_A(-c) = F_B(c), so F is even
    in c; the certified values at the two end nodes agree to the rounding allowance."""
    rng = random.Random(12)
    with mp.workdps(DPS):
        for _ in range(30):
            lam, sigma, c = 1 + 10 ** rng.uniform(-2, 1.5), 10 ** rng.uniform(-0.3, 1.7), rng.uniform(0, 0.01)
            fa, _ = _directions_mp(lam, mp.exp(-2 * mp.mpf(c)), sigma)
            _, fb = _directions_mp(lam, mp.exp(2 * mp.mpf(c)), sigma)
            assert fa == mp.inf or abs(fa - fb) <= mp.mpf(10) ** (-40) * abs(fa)


def test_point_bound_is_within_a_few_dozen_ulps_of_the_exact_value():
    """The rounding allowance is small: the bound on [w, w] exceeds F(w) by < 1e-12 relative (and is
    never below it), also near the divergence and for l close to 1 (the largest, ~1.6e-13, is at
    l - 1 ~ 1e-3, sigma ~ 30, where |T1| ~ |T2| ~ 45 F cancel: 32 ulps of 45 F)."""
    rng = random.Random(3)
    worst = 0.0
    with mp.workdps(DPS):
        for _ in range(300):
            lam, sigma, wa, _wb = _random_interval_setting(rng)
            got = G._interval_bound(wa, wa, lam, G._inv_s2_up(sigma))
            f = _f_mp(lam, 1 + mp.mpf(wa), sigma)
            if f == mp.inf:
                continue
            assert mp.mpf(got) >= f
            worst = max(worst, float(mp.mpf(got) / f - 1))
    assert worst < 1e-12


def test_quasi_convexity_lemma_derivative_and_sign_pattern():
    """The lemma of the module docstring: F_A' = l/(2 v_A) k_A and F_B' = l/(2 v_B) k_B (checked against
    mpmath's numerical derivative), with k_A, k_B increasing on each side of u = 1, k_A < 0 below 1 and
    k_B > 0 above 1."""
    rng = random.Random(8)

    def parts(lam, u, s2):
        d = min(1, u) / s2
        va, vb = lam * u - (lam - 1), lam - (lam - 1) * u
        fa = mp.log(u) / 2 + mp.log(u / va) / (2 * (lam - 1)) + lam * d / (2 * va)
        fb = -mp.log(u) / 2 - mp.log(vb) / (2 * (lam - 1)) + lam * d / (2 * vb)
        ka = (u - 1) / u - ((lam - 1) if u < 1 else lam) / (s2 * va)
        kb = (u - 1) / u + (lam if u < 1 else (lam - 1)) / (s2 * vb)
        return fa, fb, ka, kb, va, vb

    with mp.workdps(40):
        for _ in range(60):
            lam = mp.mpf(1 + 10 ** rng.uniform(-2, 2))
            s2 = mp.mpf(10 ** rng.uniform(-1, 3))
            side = rng.choice((-1, 1))
            us = sorted(1 + side * mp.mpf(rng.uniform(1e-3, 0.2)) for _ in range(4))
            prev_a = prev_b = None
            for u in us:
                fa, fb, ka, kb, va, vb = parts(lam, u, s2)
                if va > 0:
                    da = mp.diff(lambda x: parts(lam, x, s2)[0], u)  # noqa: B023
                    assert da == pytest.approx(lam / (2 * va) * ka, rel=1e-25)
                    if side < 0:
                        assert ka < 0
                    if prev_a is not None:
                        assert ka >= prev_a
                    prev_a = ka
                if vb > 0:
                    db = mp.diff(lambda x: parts(lam, x, s2)[1], u)  # noqa: B023
                    assert db == pytest.approx(lam / (2 * vb) * kb, rel=1e-25)
                    if side > 0:
                        assert kb > 0
                    if prev_b is not None:
                        assert kb >= prev_b
                    prev_b = kb


def test_end_nodes_contain_the_exact_range_and_nodes_are_ordered():
    rng = random.Random(4)
    with mp.workdps(DPS):
        for beta in [5e-324, 1e-300, 1e-12, 1e-4, 0.01, 0.3, 0.499, 5.0, 19.9] + [10 ** rng.uniform(-8, 1)
                                                                                   for _ in range(40)]:
            _cs, ws = G._w_nodes(beta, G._GRID)
            assert mp.mpf(ws[0]) <= mp.expm1(-2 * mp.mpf(beta))
            assert mp.mpf(ws[-1]) >= mp.expm1(2 * mp.mpf(beta))
            assert np.all(np.diff(ws) >= 0.0)
            assert ws[(G._GRID - 1) // 2] == 0.0


def test_two_prod_is_error_free_and_inverse_variance_is_rounded_up():
    rng = random.Random(6)
    for _ in range(2000):
        a = 1.0 + 10 ** rng.uniform(-15, 15)
        b = rng.choice((-1, 1)) * 10 ** rng.uniform(-17, 17)
        p, e = two_product_scalar(a, b)
        assert Fraction(p) + Fraction(e) == Fraction(a) * Fraction(b)
    for sigma in [1e-150, 1e-3, 0.5, 1.0, 3.0, math.pi, 50.0, 1e100, 1e160, 1e300]:
        assert Fraction(G._inv_s2_up(sigma)) >= 1 / Fraction(sigma) ** 2


def test_infinite_where_it_diverges_and_finite_just_below():
    for beta, sigma in [(0.01, 15.0), (0.1, 1.0), (1e-4, 0.5)]:
        with mp.workdps(DPS):
            lam_inf = 1 / (1 - mp.exp(-2 * mp.mpf(beta)))  # v_B(e^{2 beta}) = 0
        above = float(lam_inf * (1 + mp.mpf("1e-6")))
        assert gnss_rdp_exact([above], beta, sigma)[0] == np.inf
        # v_B(e^{2 beta}) ~ gap: the end node, two floats outside e^{2 beta} - 1, moves F by ~ 4 ulps / gap
        # relative (inherent to a float end node; the old nearest-rounded node could move it down as much)
        for gap, tol in (("1e-3", "1e-10"), ("1e-6", "1e-8")):
            below = float(lam_inf * (1 - mp.mpf(gap)))
            got = float(gnss_rdp_exact([below], beta, sigma)[0])
            ref = _sup_mp(below, beta, sigma, n=201)
            with mp.workdps(DPS):
                assert mp.mpf(got) >= ref
                assert mp.mpf(got) <= ref * (1 + mp.mpf(tol))
    assert np.all(gnss_rdp_exact([1.0001, 2.0], 20.0, 1.0) == np.inf)  # e^{40} > l/(l-1) for all l
    assert gnss_rdp_exact([2.0**901], 1e-300, 1.0)[0] == np.inf


def test_gnss_mechanism_curve_is_the_certified_one_and_monotone():
    a = np.linspace(1.01, 49.0, 60)
    m = GNSS(sigma=15.0, beta=0.01)
    got = m.rdp(a)
    assert np.array_equal(got, gnss_rdp_exact(a, 0.01, 15.0))
    assert np.all(np.diff(got) > 0)  # RDP is non-decreasing in the order; here strictly
