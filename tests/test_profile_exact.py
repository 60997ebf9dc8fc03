"""Certified one-dimensional privacy profiles (``mechanisms._profile``) and the single-use exact route of
one-dimensional Gaussian pairs and Gaussian mixtures, against independent mpmath references (normal
CDFs at 50 digits, roots of L = eps by mpmath, hockey-stick integrals by mpmath quadrature)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from accountant.privacy_accountant import PrivacyAccountant
from mechanisms import GaussianMixture, GaussianPair
from mechanisms._profile import epsilon_bracket, hockey_bounds, log_normal_mass, log_sum_bounds

mp.mp.dps = 50


def _mp_ncdf(x):
    return mp.ncdf(mp.mpf(x)) if mp.isfinite(x) else (mp.mpf(1) if x > 0 else mp.mpf(0))


# ------------------------------------------------------------------------------------- building blocks
@pytest.mark.parametrize("a,b", [(-math.inf, -40.0), (-math.inf, 3.0), (2.0, math.inf), (-38.0, -37.5),
                                 (-5.0, -4.999999), (1.0, 1.5), (30.0, 30.25), (-0.3, 0.7),
                                 (-1e-9, 2e-9), (-2.0, math.inf), (-math.inf, math.inf), (0.0, 1e-12)])
def test_log_normal_mass_vs_mpmath(a, b):
    v, err = log_normal_mass(a, b)
    true = mp.log(_mp_ncdf(b) - _mp_ncdf(a)) if b == math.inf or a == -math.inf or b <= 0 \
        else mp.log(mp.ncdf(-mp.mpf(a)) - mp.ncdf(-mp.mpf(b))) if a >= 0 \
        else mp.log(_mp_ncdf(b) - _mp_ncdf(a))
    assert abs(mp.mpf(v) - true) <= err, (v, err, true)
    assert err < 1e-6


def test_log_normal_mass_with_endpoint_errors_covers_perturbed_intervals():
    a, b, ea, eb = -3.0, -2.5, 1e-10, 2e-10
    v, err = log_normal_mass(a, b, ea, eb)
    for da in (-ea, 0.0, ea):
        for db in (-eb, 0.0, eb):
            true = mp.log(mp.ncdf(mp.mpf(b) + db) - mp.ncdf(mp.mpf(a) + da))
            assert abs(mp.mpf(v) - true) <= err


def test_log_sum_and_hockey_bounds_bracket_mpmath():
    terms = [(-1.0, 1e-12), (-30.0, 1e-3), (-2.5, 0.0)]
    v, err = log_sum_bounds(terms)
    true = mp.log(sum(mp.e ** mp.mpf(t) for t, _ in terms))
    assert abs(mp.mpf(v) - true) <= err
    for lp, lq, eps in [(-0.1, -0.9, 0.5), (-20.0, -21.0, 0.7), (-2.0, -2.0, 0.0), (-700.5, -705.0, 3.0)]:
        lo, hi = hockey_bounds(lp, 1e-13, lq, 1e-13, eps)
        true = max(mp.mpf(0), mp.e ** mp.mpf(lp) - mp.e ** (mp.mpf(eps) + lq))
        assert lo <= true <= hi
        assert hi - lo <= 1e-10 * hi + 1e-12 * math.exp(lp)  # absolute: cancellation at lp = eps + lq


def test_hockey_bounds_underflow_rounds_up_to_a_subnormal():
    lo, hi = hockey_bounds(-2000.0, 0.0, -math.inf, 0.0, 0.0)  # true value e^-2000 > 0
    assert lo == 0.0 and hi > 0.0


def test_epsilon_bracket_inverts_a_known_profile():
    # Laplace profile delta(eps) = 1 - e^{(eps - a)/2} on [0, a] (closed form, Laplace pair)
    a = 2.0

    def prof(e):
        d = max(0.0, -math.expm1((e - a) / 2.0))
        return max(d - 1e-15, 0.0), d + 1e-15

    lo, hi = epsilon_bracket(prof, 0.1)
    true = a + 2.0 * math.log(0.9)
    assert lo <= true <= hi and hi - lo < 1e-9


# -------------------------------------------------------------------------------- Gaussian pairs, d = 1
def _pair_ref(shift, prec, eps, direction):
    """delta(eps) of (N(0, 1), N(shift, 1/prec)) (remove) or the swapped pair (add): roots of the quadratic
    loss in mpmath, normal masses of the set {loss > eps}; and the same by quadrature."""
    a, d, eps = mp.mpf(prec), mp.mpf(shift), mp.mpf(eps)

    def logp(v):
        return -v * v / 2

    def logq(v):
        return mp.log(mp.sqrt(a)) - a * (v - d) ** 2 / 2

    sgn = 1 if direction == "remove" else -1

    def f(v):
        return sgn * (logp(v) - logq(v)) - eps

    # f(v) = A2 v^2 + A1 v + A0
    a2 = sgn * (a - 1) / 2
    a1 = sgn * (-a * d)
    a0 = sgn * (a * d * d / 2 - mp.log(a) / 2) - eps
    pts = []
    if a2 == 0:
        pts = [-a0 / a1]
    else:
        disc = a1 * a1 - 4 * a2 * a0
        if disc > 0:
            pts = sorted([(-a1 - mp.sqrt(disc)) / (2 * a2), (-a1 + mp.sqrt(disc)) / (2 * a2)])
    edges = [-mp.inf] + pts + [mp.inf]
    total = mp.mpf(0)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if mp.isfinite(lo) and mp.isfinite(hi):
            mid = (lo + hi) / 2
        else:
            mid = hi - 1 if mp.isfinite(hi) else (lo + 1 if mp.isfinite(lo) else 0)
        if f(mid) > 0:
            mp_ = mp.ncdf(hi) - mp.ncdf(lo)
            mq = mp.ncdf(mp.sqrt(a) * (hi - d)) - mp.ncdf(mp.sqrt(a) * (lo - d))
            total += (mp_ - mp.e ** eps * mq) if direction == "remove" else (mq - mp.e ** eps * mp_)
    return total, edges


@pytest.mark.parametrize("shift,prec", [(1.0, 1.5), (0.7, 0.4), (2.0, 1.0), (0.0, 3.0), (0.3, 1.0)])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_gaussian_pair_1d_exact_delta_vs_mpmath(shift, prec, direction):
    m = GaussianPair(shifts=[shift], precisions=[prec])
    for eps in (0.0, 0.3, 1.0, 2.5):
        ref, edges = _pair_ref(shift, prec, eps, direction)
        lo, hi = m.exact_delta(eps, direction)
        assert lo <= ref <= hi, (eps, lo, float(ref), hi)
        assert hi - lo <= 1e-9 * max(hi, 1e-300) + 1e-300
        # the same value by quadrature of (p - e^eps q)_+ (breakpoints at the roots)
        if eps == 1.0:
            a, d = mp.mpf(prec), mp.mpf(shift)

            def integrand(v, a=a, d=d, eps=eps):
                p = mp.npdf(v)
                q = mp.sqrt(a) * mp.npdf(mp.sqrt(a) * (v - d))
                first, second = (p, q) if direction == "remove" else (q, p)
                return max(mp.mpf(0), first - mp.e ** eps * second)

            quad = mp.quad(integrand, edges)
            assert abs(quad - ref) <= 1e-12 * max(ref, mp.mpf(1e-30))


def test_gaussian_pair_1d_exact_epsilon_and_certificate():
    m = GaussianPair(shifts=[1.0], precisions=[1.5])
    delta = 1e-5
    # eps(delta) of the mpmath profile by bisection (worst direction)
    def ref_delta(e):
        return max(_pair_ref(1.0, 1.5, e, d)[0] for d in ("remove", "add"))

    lo_e, hi_e = mp.mpf(0), mp.mpf(30)
    for _ in range(80):
        mid = (lo_e + hi_e) / 2
        lo_e, hi_e = (mid, hi_e) if ref_delta(mid) > delta else (lo_e, mid)
    cert = PrivacyAccountant().compose(m).certificate(delta=delta)
    assert cert.method == "exact"
    assert cert.epsilon >= hi_e - mp.mpf(1e-25)
    assert cert.epsilon <= hi_e * (1 + 1e-9)
    assert cert.lower_bound <= lo_e + mp.mpf(1e-25)


def test_multidimensional_pair_has_no_single_use_exact_route():
    m = GaussianPair(shifts=[1.0, 0.5], precisions=[1.5, 0.8])
    assert not m.exact_profile
    with pytest.raises(ValueError, match="closed-form"):
        m.exact_delta(1.0)


# ------------------------------------------------------------------------------------ Gaussian mixtures
def _mixture_ref(sigma, sens, probs, eps, direction):
    """delta(eps) of (sum_i p_i N(s_i, sigma^2), N(0, sigma^2)) (remove) or the swapped pair (add) by
    mpmath quadrature of (first - e^eps second)_+ split at the root of L = +-eps (found by mpmath)."""
    s = [mp.mpf(x) / sigma for x in sens]
    p = [mp.mpf(x) for x in probs]
    p = [x / sum(p) for x in p]
    eps = mp.mpf(eps)

    def mix(x):
        return sum(pi * mp.npdf(x - si) for pi, si in zip(p, s, strict=True))

    def first_second(x):
        return (mix(x), mp.npdf(x)) if direction == "remove" else (mp.npdf(x), mix(x))

    def h(x):
        f, g = first_second(x)
        return f - mp.e ** eps * g

    def loss(x):  # log g(x), increasing
        return mp.log(sum(pi * mp.e ** (si * x - si * si / 2) for pi, si in zip(p, s, strict=True)))

    target = eps if direction == "remove" else -eps
    lo, hi = mp.mpf(-200), mp.mpf(200)
    if direction == "add" and loss(lo) >= target:
        return mp.mpf(0)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if loss(mid) < target else (lo, mid)
    root = (lo + hi) / 2
    if direction == "remove":
        return mp.quad(lambda x: max(mp.mpf(0), h(x)), [root, root + 10, mp.inf])
    return mp.quad(lambda x: max(mp.mpf(0), h(x)), [-mp.inf, root - 10, root])


@pytest.mark.parametrize("sigma,sens,probs", [(1.0, [0.0, 1.0], [0.5, 0.5]),
                                              (0.8, [0.5, 1.0, 2.0], [0.2, 0.5, 0.3]),
                                              (2.0, [1.0], [1.0])])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_gaussian_mixture_exact_delta_vs_mpmath_quadrature(sigma, sens, probs, direction):
    m = GaussianMixture(sigma=sigma, sensitivities=sens, probabilities=probs)
    for eps in (0.0, 0.2, 1.0, 3.0):
        ref = _mixture_ref(sigma, sens, probs, eps, direction)
        lo, hi = m.exact_delta(eps, direction)
        assert lo <= ref + mp.mpf(1e-40) and ref <= hi + mp.mpf(1e-40), (eps, lo, float(ref), hi)
        assert hi - lo <= 1e-9 * max(hi, 1e-300) + 1e-300


def test_gaussian_mixture_single_use_certificate_vs_mpmath():
    sigma, sens, probs = 1.0, [0.0, 1.0], [0.5, 0.5]
    m = GaussianMixture(sigma=sigma, sensitivities=sens, probabilities=probs)
    delta = 1e-5

    def ref_delta(e):
        return max(_mixture_ref(sigma, sens, probs, e, d) for d in ("remove", "add"))

    lo_e, hi_e = mp.mpf(0), mp.mpf(10)
    for _ in range(45):
        mid = (lo_e + hi_e) / 2
        lo_e, hi_e = (mid, hi_e) if ref_delta(mid) > delta else (lo_e, mid)
    acct = PrivacyAccountant().compose(m)
    cert = acct.certificate(delta=delta)
    assert cert.method == "exact" and cert.details["single_use"]
    assert cert.epsilon >= lo_e and abs(cert.epsilon - hi_e) <= 1e-6 * hi_e
    # delta at eps: bracket contains the reference, and agrees with the pld route's bracket
    c2 = acct.certificate(epsilon=1.0)
    ref = ref_delta(1.0)
    assert c2.lower_bound <= ref <= c2.delta
    pld = acct.certificate(epsilon=1.0, method="pld")
    assert pld.lower_bound <= c2.delta and c2.lower_bound <= pld.delta


def test_gaussian_mixture_exact_delta_is_monotone_and_bounded_by_tv():
    m = GaussianMixture(sigma=0.7, sensitivities=[0.0, 0.5, 1.0], probabilities=[0.3, 0.3, 0.4])
    for direction in ("remove", "add"):
        vals = [m.exact_delta(e, direction) for e in np.linspace(0.0, 4.0, 9)]
        his = [v[1] for v in vals]
        assert all(x >= y for x, y in zip(his, his[1:], strict=False))
        assert vals[0][0] <= m.total_variation(direction)


def test_exact_method_needs_one_use():
    m = GaussianMixture(sigma=1.0, sensitivities=[0.0, 1.0], probabilities=[0.5, 0.5])
    acct = PrivacyAccountant().compose(m, 2)
    with pytest.raises(ValueError, match="exact single-use profile"):
        acct.certificate(delta=1e-5, method="exact")
    # two uses: the numerical routes; never below the one-use exact value (composition only adds loss)
    one = PrivacyAccountant().compose(m).certificate(delta=1e-5)
    assert acct.certificate(delta=1e-5).epsilon >= one.epsilon
