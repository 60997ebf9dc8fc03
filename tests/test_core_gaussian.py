"""Issue 2 acceptance: the k-fold Gaussian mechanism through the characteristic-function ("cf") route.

Reference: the exact mu-GDP privacy profile (Balle & Wang 2018, Thm 8)

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),   mu = sqrt(k) Delta / sigma,

evaluated with mpmath in ``tests/reference.py`` (``gaussian_delta`` / ``gaussian_epsilon``, 50 digits with an
adaptive cancellation margin).  Nothing here compares the library against itself except the invariance tests
(sensitivity scaling), whose statement is an identity.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference as ref

from accountant import PrivacyAccountant
from mechanisms import Gaussian

SIGMAS = [0.3, 0.5, 1.0, 2.0, 10.0, 50.0]
KS = [1, 10, 1_000, 1_000_000]
DELTA = 1e-5
# slack for the float64 rounding of the 50-digit oracle value when checking bracket containment
ULP = 4 * np.finfo(float).eps


def _acct(sigma: float, k: int, sensitivity: float = 1.0) -> PrivacyAccountant:
    return PrivacyAccountant().compose(Gaussian(sigma=sigma, sensitivity=sensitivity), times=k)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_cf_epsilon_matches_gdp(sigma, k):
    """eps(1e-5) within 1e-6 relative of the exact GDP value; the certified bracket contains it."""
    mu = math.sqrt(k) / sigma
    exact = ref.gaussian_epsilon(DELTA, mu)
    cert = PrivacyAccountant().compose(Gaussian(sigma=sigma), times=k).certificate(delta=DELTA, method="cf")
    assert cert.method == "cf"
    assert abs(cert.epsilon - exact) <= 1e-6 * exact
    # never below the exact value by more than the reported numerical error
    assert cert.epsilon >= exact - cert.error
    # certified bracket [lower_bound, epsilon] contains the exact value (the Gaussian pair is tight)
    assert cert.lower_bound is not None
    assert cert.lower_bound <= exact * (1 + ULP)
    assert exact <= cert.epsilon * (1 + ULP)
    assert cert.error >= 0.0


def _eps_points(mu: float) -> list[float]:
    """eps values at which delta spans ~1e-1 .. 1e-14 (so both sides of the 1e-12 threshold are used)."""
    pts = {0.0}
    for d in (1e-1, 1e-3, 1e-6, 1e-10, 1e-14):
        e = ref.gaussian_epsilon(d, mu)
        if e > 0:
            pts.add(float(f"{e:.6g}"))
    return sorted(pts)


# eps above this overflows a naive math.expm1(eps) (regression test: test_cf_delta_large_epsilon_no_overflow)
EXP_OVERFLOW = 709.0


def _check_delta_point(acct: PrivacyAccountant, eps: float, mu: float) -> None:
    exact = ref.gaussian_delta(eps, mu)
    cert = acct.certificate(epsilon=eps, method="cf")
    assert cert.lower_bound is not None
    assert cert.lower_bound <= exact * (1 + ULP), (eps, cert.lower_bound, exact)
    assert exact <= cert.delta * (1 + ULP), (eps, cert.delta, exact)
    assert cert.delta >= exact - cert.error
    if exact >= 1e-12:
        assert abs(cert.delta - exact) <= 1e-6 * exact, (eps, cert.delta, exact)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("sigma", SIGMAS)
def test_cf_delta_matches_gdp(sigma, k):
    """delta(eps) within 1e-6 relative where delta >= 1e-12; certified bracket always contains the truth."""
    mu = math.sqrt(k) / sigma
    acct = _acct(sigma, k)
    for eps in _eps_points(mu):
        if eps < EXP_OVERFLOW:
            _check_delta_point(acct, eps, mu)


def test_cf_delta_large_epsilon_no_overflow():
    """The same delta(eps) checks at eps > 709 (large mu: k up to 1e6, small sigma)."""
    for sigma, k in [(0.3, 1000), (0.5, 1000), (1.0, 1000), (0.3, 10**6), (1.0, 10**6), (2.0, 10**6),
                     (10.0, 10**6)]:
        mu = math.sqrt(k) / sigma
        acct = _acct(sigma, k)
        for eps in _eps_points(mu):
            if eps >= EXP_OVERFLOW:
                _check_delta_point(acct, eps, mu)


@pytest.mark.parametrize("sigma,k", [(1.0, 1), (2.0, 100), (50.0, 1000)])
def test_exact_route_matches_oracle(sigma, k):
    """method='exact' (closed form in float64) agrees with the mpmath oracle and brackets it."""
    mu = math.sqrt(k) / sigma
    acct = _acct(sigma, k)
    exact = ref.gaussian_epsilon(DELTA, mu)
    cert = acct.certificate(delta=DELTA, method="exact")
    assert abs(cert.epsilon - exact) <= 1e-9 * exact
    assert exact <= cert.epsilon * (1 + ULP)
    assert cert.lower_bound <= exact * (1 + ULP)


def test_auto_route_never_worse_than_cf_and_valid():
    """'auto' returns the smallest certified bound among the valid routes, never below the truth."""
    acct = _acct(2.0, 1000)
    mu = math.sqrt(1000) / 2.0
    exact = ref.gaussian_epsilon(DELTA, mu)
    cert = acct.certificate(delta=DELTA)
    assert cert.epsilon <= acct.epsilon(DELTA, method="cf") * (1 + 1e-15)
    assert cert.epsilon <= acct.epsilon(DELTA, method="rdp")
    assert exact <= cert.epsilon * (1 + ULP)
    assert cert.method in cert.candidates
    assert min(cert.candidates.values()) == cert.epsilon


# -------------------------------------------------------------------------------- invariances

@pytest.mark.parametrize("scale", [0.1, 3.7, 1e3])
def test_sensitivity_scaling(scale):
    """Results depend only on sigma / Delta (the pair depends on mu = Delta / sigma only): Gaussian(c s, c)
    == Gaussian(s, 1)."""
    base = _acct(2.0, 50)
    scaled = _acct(2.0 * scale, 50, sensitivity=scale)
    for method in ("cf", "rdp", "rdp_classic", "exact"):
        a = base.epsilon(DELTA, method=method)
        b = scaled.epsilon(DELTA, method=method)
        assert b == pytest.approx(a, rel=1e-9), method
    assert scaled.delta(1.0, method="cf") == pytest.approx(base.delta(1.0, method="cf"), rel=1e-9)
    np.testing.assert_allclose(scaled.rdp([1.5, 2.0, 10.0]), base.rdp([1.5, 2.0, 10.0]), rtol=1e-12)


def test_heterogeneous_gaussians_equal_single_gdp():
    """Composing Gaussians with different sigmas is mu-GDP, mu^2 = sum k_j mu_j^2 (Dong, Roth & Su 2022,
    Cor. 2)."""
    acct = PrivacyAccountant()
    parts = [(0.7, 3), (2.0, 40), (5.0, 200), (1.3, 1)]
    for s, k in parts:
        acct.compose(Gaussian(sigma=s), times=k)
    mu = math.sqrt(sum(k / s**2 for s, k in parts))
    exact = ref.gaussian_epsilon(DELTA, mu)
    cert = acct.certificate(delta=DELTA, method="cf")
    assert abs(cert.epsilon - exact) <= 1e-6 * exact
    assert cert.lower_bound <= exact * (1 + ULP) and exact <= cert.epsilon * (1 + ULP)


# -------------------------------------------------------------------------------- robustness

@pytest.mark.parametrize("sigma,k", [(1.0, 10), (0.5, 1000)])
def test_epsilon_valid_and_monotone_over_tiny_to_large_delta(sigma, k):
    """eps(delta) for delta from 1e-30 to 0.1: within 1e-6 of the truth, bracketed, strictly decreasing."""
    mu = math.sqrt(k) / sigma
    acct = _acct(sigma, k)
    deltas = [1e-30, 1e-20, 1e-14, 1e-10, 1e-5, 1e-2, 0.1]
    eps = []
    for d in deltas:
        cert = acct.certificate(delta=d, method="cf")
        exact = ref.gaussian_epsilon(d, mu)
        assert math.isfinite(cert.epsilon) and cert.epsilon >= 0.0
        assert exact <= cert.epsilon * (1 + ULP)
        assert cert.lower_bound <= exact * (1 + ULP)
        assert abs(cert.epsilon - exact) <= 1e-6 * exact, (d, cert.epsilon, exact)
        eps.append(cert.epsilon)
    assert all(a > b for a, b in zip(eps, eps[1:], strict=False)), eps


@pytest.mark.parametrize("sigma,delta", [(0.05, 1e-5), (0.025, 1e-5), (0.025, 1e-30)])
def test_large_epsilon_small_sigma(sigma, delta):
    """eps of order 100-1000 (sigma << sensitivity): finite, certified, 1e-6 relative."""
    mu = 1.0 / sigma
    exact = ref.gaussian_epsilon(delta, mu)
    cert = _acct(sigma, 1).certificate(delta=delta, method="cf")
    assert exact > 100
    assert abs(cert.epsilon - exact) <= 1e-6 * exact
    assert exact <= cert.epsilon * (1 + ULP)
    assert cert.lower_bound <= exact * (1 + ULP)


def test_delta_tiny_values_relative_accuracy():
    """delta ~ 1e-30 .. 1e-100 at large eps: certified bracket contains the exact value, tight relatively."""
    mu = 1.0
    acct = _acct(1.0, 1)
    for eps in (10.0, 15.0, 20.0):
        exact = ref.gaussian_delta(eps, mu)
        cert = acct.certificate(epsilon=eps, method="cf")
        assert exact < 1e-15
        assert cert.lower_bound <= exact * (1 + ULP) and exact <= cert.delta * (1 + ULP)
        assert abs(cert.delta - exact) <= 1e-6 * exact
