"""conversions.lower_bounds (max-statistic certified lower bounds) against independent references:
the T <= 3 subsampled-Gaussian reference (tests/reference_subsampled.py), the Gaussian closed form
(tests/reference.py, mpmath) and the near-atomic DP-SGD reference table (dp-accounting's pessimistic PLD at
grid 1e-5, 6 stable digits)."""

import math
import time

import mpmath as mp
import numpy as np
import pytest
import reference as REF
import reference_subsampled as R

from accountant.ledger import Ledger
from conversions import lower_bounds as LB
from mechanisms.gaussian import Gaussian
from mechanisms.laplace import Laplace
from mechanisms.subsampled import SubsampledGaussian as SG

DIRS = ("remove", "add")


def test_step_log_error_bound_holds():
    """The declared relative error of the computed log G_i (one step's CDF) holds with a 4x margin
    against mpmath, over |z| <= 39 and q from 1e-300 to 1 (mixture and Gaussian)."""
    m = np.r_[np.linspace(-40.0, 41.0, 163), -0.3, 0.5, 1.7]
    mp.mp.dps = 60
    for s in (0.5, 1.0, 3.0):
        for q in (1e-300, 1e-6, 0.01, 0.5, 1.0):
            st = LB._MaxStatistic(LB._Steps(np.array([s]), np.array([q]), np.array([1.0])), False)
            for gaussian in (False, True):
                val, eta = st._log_step_cdf(m, gaussian, with_error=True)
                for mi, v, e in zip(m, val[0], eta[0], strict=True):
                    z0, z1 = mp.mpf(mi) / s, (mp.mpf(mi) - 1) / s
                    gbar = mp.ncdf(-z0) if gaussian else (1 - mp.mpf(q)) * mp.ncdf(-z0) + q * mp.ncdf(-z1)
                    g = mp.ncdf(z0) if gaussian else (1 - mp.mpf(q)) * mp.ncdf(z0) + q * mp.ncdf(z1)
                    true = mp.log1p(-gbar) if gbar < 0.5 else mp.log(g)
                    # (+ 1e-300: the declared absolute allowance for underflow of Gbar)
                    assert abs(v - true) <= e * abs(true) / 4 + 1e-300, (s, q, mi, gaussian, v, true)


@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("q,sigma", [(0.01, 1.1), (0.3, 0.5), (1.0, 1.0), (1e-4, 2.0)])
def test_exact_at_T1(direction, q, sigma):
    """T = 1: the statistic is the output itself, so the bound is the true delta (to 1e-9 relative), and
    never above it."""
    for eps in (-0.5, 0.0, 0.005, 0.1, 1.0):
        ref = R.sg_delta_ref(eps, sigma, q, 1, direction)
        v = LB.max_statistic_delta_lower([(SG(sigma, q), 1)], eps, direction)
        assert v <= ref
        if ref > 1e-300:
            assert v == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("T", [2, 3])
@pytest.mark.parametrize("q,sigma", [(0.01, 1.1), (0.2, 0.8), (0.5, 1.0)])
def test_below_reference_T23(T, q, sigma):
    cases = (("remove", (0.0, 0.2, 1.0)), ("add", (0.0, 0.005, 0.1))) if T == 2 else \
        (("remove", (0.2,)), ("add", (0.005,)))
    for direction, eps_list in cases:
        for eps in eps_list:
            ref = R.sg_delta_ref(eps, sigma, q, T, direction, method="float")
            v = LB.max_statistic_delta_lower([(SG(sigma, q), T)], eps, direction)
            assert v <= ref * (1 + 1e-12)  # reference error <= 1e-13 relative
            assert v >= 0.5 * ref  # and not vacuous here


@pytest.mark.parametrize("direction", DIRS)
def test_gaussian_closed_form(direction):
    """q = 1 (plain Gaussian entries, heterogeneous sensitivities): below the mu-GDP closed form with
    mu = sqrt(sum k_i (Delta_i / sigma_i)^2) (Balle & Wang 2018; mpmath), equal at T = 1."""
    for eps in (0.0, 0.5, 3.0):
        assert LB.max_statistic_delta_lower([(Gaussian(1.3), 1)], eps, direction) == pytest.approx(
            REF.gaussian_delta(eps, 1 / 1.3), rel=1e-10)
    ledger = [(Gaussian(1.0), 1), (Gaussian(2.0, sensitivity=3.0), 2), (SG(4.0, 1.0), 5)]
    mu = math.sqrt(1.0 + 2 * 2.25 + 5 / 16)
    for eps in (0.0, 0.5, 3.0, 8.0):
        assert LB.max_statistic_delta_lower(ledger, eps, direction) <= REF.gaussian_delta(eps, mu)
    for T in (10, 10**4, 10**7):
        for eps in (0.5, 5.0, 50.0):
            ref = REF.gaussian_delta(eps, math.sqrt(T) / 2.0)
            assert LB.max_statistic_delta_lower([(Gaussian(2.0), T)], eps, direction) <= ref


def test_sensitivity_only_through_sigma_over_sensitivity():
    a = LB.max_statistic_delta_lower([(SG(1.1, 0.01), 7)], 0.3)
    b = LB.max_statistic_delta_lower([(SG(2.2, 0.01, sensitivity=2.0), 7)], 0.3)
    assert a == b


def test_accepts_ledger_and_bare_mechanisms():
    led = Ledger()
    led.add(SG(1.1, 0.01), 3)
    a = LB.max_statistic_delta_lower(led, 0.2)
    assert a == LB.max_statistic_delta_lower([(SG(1.1, 0.01), 3)], 0.2)
    assert a == LB.max_statistic_delta_lower([SG(1.1, 0.01)] * 3, 0.2)


def test_empty_and_q0():
    assert LB.max_statistic_delta_lower([], 0.5) == 0.0
    assert LB.max_statistic_delta_lower([(SG(1.0, 0.0), 5)], -1.0) <= -math.expm1(-1.0)
    assert LB.max_statistic_delta_lower([(SG(1.0, 0.0), 5)], -1.0) == pytest.approx(-math.expm1(-1.0))
    assert LB.epsilon_lower([], 1e-5) == 0.0


def test_monotone_in_eps():
    ledger = [(SG(1.1, 0.01), 100)]
    for d in DIRS:
        vals = [LB.max_statistic_delta_lower(ledger, e, d) for e in np.linspace(0, 2, 21)]
        assert all(b <= a for a, b in zip(vals, vals[1:], strict=False))


# near-atomic reference table (dp-accounting PLD at grid 1e-5): eps at delta = 1e-5, max over the directions
SPEC08 = [(0.01, 1.1, 1, 0.142291, 1e-6), (0.01, 1.1, 10, 0.254027, 1e-6), (0.01, 1.1, 1000, 0.583837, 1e-6),
          (0.001, 1.0, 100, 0.042935, 1e-6), (0.001, 0.5, 100, 2.09963, 1e-5)]


@pytest.mark.parametrize("q,sigma,T,value,unit", SPEC08)
def test_spec08_values(q, sigma, T, value, unit):
    e = max(LB.epsilon_lower([(SG(sigma, q), T)], 1e-5, d, statistic="max") for d in DIRS)
    assert abs(e - value) <= 0.5 * unit  # agrees to the printed digits (~1e-5 relative or better)


@pytest.mark.parametrize("q,sigma,T", [(0.01, 1.1, 1), (0.01, 1.1, 2), (0.2, 0.8, 2), (0.5, 1.0, 1)])
def test_epsilon_lower_certified(q, sigma, T):
    """delta_lower(eps_lower) >= delta (verified with the certified function) and eps_lower <= the reference
    eps (<=> reference delta at eps_lower >= delta); equal to the reference eps at T = 1 (1e-9)."""
    for d in DIRS:
        for delta in (1e-5, 1e-3):
            e = LB.epsilon_lower([(SG(sigma, q), T)], delta, d, statistic="max")
            if e > 0:
                assert LB.max_statistic_delta_lower([(SG(sigma, q), T)], e, d) >= delta
                assert R.sg_delta_ref(e, sigma, q, T, d) >= delta * (1 - 1e-13)
            if T == 1:
                ref = R.sg_eps_ref(delta, sigma, q, 1, d)
                assert e == pytest.approx(max(ref, 0.0), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("q,sigma,T", [(0.01, 1.1, 1), (0.01, 1.1, 2), (0.5, 1.0, 1)])
@pytest.mark.parametrize("factor", [1e-6, 0.5, 0.9999, 1.0, 1.0001, 1.5, 300.0])
def test_epsilon_lower_with_a_hint_is_certified_and_the_same(q, sigma, T, factor):
    """The root search may start from a hint (a route's upper bound): at any hint, far below, near or far
    above the answer, the bound is certified (the reference delta at it >= delta), equal to the unhinted
    bound up to the root's stationary error, and at T = 1 equal to the reference eps."""
    for d in DIRS:
        ref = R.sg_eps_ref(1e-5, sigma, q, T, d) if T == 1 else None
        plain = LB.epsilon_lower([(SG(sigma, q), T)], 1e-5, d, statistic="max")
        hint = factor * max(plain, 1e-3)
        e = LB.epsilon_lower([(SG(sigma, q), T)], 1e-5, d, statistic="max", eps_hint=hint)
        assert e == pytest.approx(plain, rel=1e-9, abs=1e-12), (d, hint)
        if e > 0:
            assert R.sg_delta_ref(e, sigma, q, T, d) >= 1e-5 * (1 - 1e-13)
        if ref is not None:
            assert e == pytest.approx(max(ref, 0.0), rel=1e-9, abs=1e-12)


def test_epsilon_lower_rejects_a_bad_hint():
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ValueError, match="eps_hint"):
            LB.epsilon_lower([(SG(1.0, 0.1), 1)], 1e-5, eps_hint=bad)
    with pytest.raises(TypeError, match="eps_hint"):
        LB.epsilon_lower([(SG(1.0, 0.1), 1)], 1e-5, eps_hint="1")


def test_epsilon_lower_T3():
    e = LB.epsilon_lower([(SG(1.1, 0.01), 3)], 1e-5, "remove")
    assert R.sg_delta_ref(e, 1.1, 0.01, 3, "remove") >= 1e-5


def test_bad_input():
    with pytest.raises(ValueError, match="direction"):
        LB.max_statistic_delta_lower([(SG(1.0, 0.1), 1)], 0.1, "both")
    with pytest.raises(ValueError, match="eps"):
        LB.max_statistic_delta_lower([(SG(1.0, 0.1), 1)], math.nan)
    with pytest.raises(TypeError, match="eps"):
        LB.max_statistic_delta_lower([(SG(1.0, 0.1), 1)], "0.1")
    with pytest.raises(ValueError, match="delta"):
        LB.epsilon_lower([(SG(1.0, 0.1), 1)], 1.5)
    with pytest.raises(ValueError, match="delta"):
        LB.epsilon_lower([(SG(1.0, 0.1), 1)], 0.0)
    with pytest.raises(ValueError, match="SubsampledGaussian or Gaussian"):
        LB.max_statistic_delta_lower([(Laplace(1.0), 1)], 0.1)
    with pytest.raises(ValueError, match="count"):
        LB.max_statistic_delta_lower([(SG(1.0, 0.1), -1)], 0.1)
    with pytest.raises(TypeError, match="entries"):
        LB.max_statistic_delta_lower(3, 0.1)


def test_timing_large_T():
    """T only enters as an exponent: T = 1e7 costs the same as T = 1 (budget ~20 ms per call; asserted
    loosely at 200 ms because the test machine is shared)."""
    ledger = [(SG(1.1, 0.01), 10**7)]
    LB.max_statistic_delta_lower(ledger, 1.0)
    t = time.perf_counter()
    for d in DIRS:
        LB.delta_lower(ledger, 1.0, d)
        LB.epsilon_lower(ledger, 1e-5, d)
    assert (time.perf_counter() - t) / 4 < 0.3


# ------------------------------------------------------------------------------------- the sum statistic
def test_sum_phi_error_bound_holds():
    """The sum statistic's declared ndtr error (relative, plus 1e-300 absolute) holds with a 4x margin."""
    from scipy.special import ndtr

    mp.mp.dps = 40
    z = np.r_[np.linspace(-45.0, 45.0, 1201), 1e3, -1e3]
    bound = LB._SumStatistic._phi_rel(z)
    for zi, v, e in zip(z, ndtr(z), bound, strict=True):
        true = mp.ncdf(mp.mpf(zi))
        assert abs(v - true) <= e * true / 4 + 1e-300, zi


@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("q,sigma", [(0.01, 1.1), (0.3, 0.5), (1e-4, 2.0)])
def test_sum_exact_at_T1(direction, q, sigma):
    for eps in (-0.5, 0.0, 0.005, 0.1, 1.0):
        ref = R.sg_delta_ref(eps, sigma, q, 1, direction)
        v = LB.sum_statistic_delta_lower([(SG(sigma, q), 1)], eps, direction)
        assert v <= ref
        if ref > 1e-300:
            assert v == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("direction", DIRS)
def test_sum_exact_for_gaussians(direction):
    """q = 1: the sum is sufficient, so the bound is the mu-GDP closed form (mu = sqrt(T)/sigma) at every T
    (1e-9 relative), and never above it."""
    for T in (1, 10, 10**4, 10**7):
        for eps in (0.5, 5.0, 50.0):
            ref = REF.gaussian_delta(eps, math.sqrt(T) / 2.0)
            v = LB.sum_statistic_delta_lower([(Gaussian(2.0), T)], eps, direction)
            assert v <= ref
            if ref > 1e-200:
                assert v == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("T", [2, 3])
@pytest.mark.parametrize("q,sigma", [(0.01, 1.1), (0.2, 0.8), (0.5, 1.0)])
def test_sum_below_reference_T23(T, q, sigma):
    for direction, eps in (("remove", 0.0), ("remove", 0.2), ("add", 0.005)):
        ref = R.sg_delta_ref(eps, sigma, q, T, direction, method="float")
        assert LB.sum_statistic_delta_lower([(SG(sigma, q), T)], eps, direction) <= ref * (1 + 1e-12)
        assert LB.delta_lower([(SG(sigma, q), T)], eps, direction) <= ref * (1 + 1e-12)


@pytest.mark.parametrize("q,sigma,T", [(0.2, 0.8, 2), (0.5, 1.0, 2), (0.01, 1.1, 2)])
def test_sum_epsilon_lower_certified(q, sigma, T):
    for d in DIRS:
        e = LB.epsilon_lower([(SG(sigma, q), T)], 1e-3, d, statistic="sum")
        assert R.sg_delta_ref(e, sigma, q, T, d, method="float") >= 1e-3 * (1 - 1e-13)
        if e > 0:
            assert LB.sum_statistic_delta_lower([(SG(sigma, q), T)], e, d) >= 1e-3 * (1 - 1e-9)
        best = LB.epsilon_lower([(SG(sigma, q), T)], 1e-3, d)
        assert best == max(e, LB.epsilon_lower([(SG(sigma, q), T)], 1e-3, d, statistic="max"))


def test_sum_better_in_smooth_regime_and_below_library():
    """T q^2 >> 1: the sum statistic beats the max statistic (docs/derivations/lower-bounds.md); both stay
    below the
    library's certified upper bound (an independent route: contour integral)."""
    import accountant

    ledger = [(SG(1.1, 0.01), 10**4)]
    e_sum = max(LB.epsilon_lower(ledger, 1e-5, d, statistic="sum") for d in DIRS)
    e_max = max(LB.epsilon_lower(ledger, 1e-5, d, statistic="max") for d in DIRS)
    assert e_sum > 2 * e_max
    up = accountant.PrivacyAccountant().step(sigma=1.1, sample_rate=0.01, steps=10**4).epsilon(1e-5)
    assert e_sum <= up


def test_sum_bad_input():
    with pytest.raises(ValueError, match="homogeneous"):
        LB.sum_statistic_delta_lower([(SG(1.0, 0.1), 1), (SG(2.0, 0.1), 1)], 0.1)
    with pytest.raises(ValueError, match="statistic"):
        LB.epsilon_lower([(SG(1.0, 0.1), 1)], 1e-5, statistic="median")
    # a heterogeneous ledger silently uses the max statistic only in "best" mode
    het = [(SG(1.0, 0.1), 1), (SG(2.0, 0.1), 1)]
    assert LB.delta_lower(het, 0.1) == LB.max_statistic_delta_lower(het, 0.1)


@pytest.mark.slow
@pytest.mark.parametrize("T", [2, 3])
@pytest.mark.parametrize("q", [0.001, 0.05, 0.3, 0.9])
@pytest.mark.parametrize("sigma", [0.6, 1.0, 2.0])
def test_below_reference_grid_slow(T, q, sigma):
    for direction in DIRS:
        for eps in (0.0, 0.01, 0.3, 1.0, 2.5):
            ref = R.sg_delta_ref(eps, sigma, q, T, direction, method="float")
            led = [(SG(sigma, q), T)]
            assert LB.delta_lower(led, eps, direction) <= ref * (1 + 1e-12) + 1e-300
            assert LB.max_statistic_delta_lower(led, eps, direction) <= ref * (1 + 1e-12) + 1e-300
        e = LB.epsilon_lower([(SG(sigma, q), T)], 1e-6, direction)
        if e > 0:
            assert R.sg_delta_ref(e, sigma, q, T, direction, method="float") >= 1e-6 * (1 - 1e-12)
