"""Integer-valued noise (mechanisms.discrete) against independent mpmath enumeration.

References (``tests/reference_mechlib.py``): the pmfs from their definitions (discrete Gaussian
normalised by direct summation, discrete Laplace geometric pmf, Skellam e^{-mu} I_k(mu) with mpmath's
Bessel function), exact hockey-stick divergences by enumeration / convolution, Renyi divergences by
summation, eps(delta) by bisection on the exact delta.
"""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest
import reference as ref
import reference_mechlib as R

from accountant import PrivacyAccountant
from mechanisms import DiscreteGaussian, DiscreteLaplace, RandomizedResponse, Skellam, registry
from mechanisms.conformance import check_mechanism
from mechanisms.discrete import skellam_rdp_akl

RTOL = 1e-6  # issue target; the lattice routes are exact to ~1e-11


def _eps(mech, k, delta, method="auto"):
    return PrivacyAccountant().compose(mech, times=k).certificate(delta=delta, method=method)


# ------------------------------------------------------------------------------------------ discrete Gaussian
@pytest.mark.parametrize("sigma,sens,delta", [(1.0, 1, 1e-3), (1.0, 1, 1e-9), (0.7, 2, 1e-5), (3.0, 1, 1e-6),
                                              (10.0, 3, 1e-8), (0.3, 1, 1e-3)])
def test_dg_single_epsilon_matches_cks_theorem7(sigma, sens, delta):
    exact = float(R.epsilon_from_delta(lambda e: R.dg_delta_single(e, sigma, sens, dps=30), delta, hi=80))
    c = _eps(DiscreteGaussian(sigma, sens), 1, delta)
    assert c.method == "cf"
    assert abs(c.epsilon - exact) <= RTOL * exact
    assert c.epsilon >= exact * (1 - 1e-12)
    assert c.lower_bound is not None and c.lower_bound <= exact * (1 + 1e-12)


@pytest.mark.parametrize("sigma,sens,k,eps", [(1.0, 1, 3, 1.5), (0.8, 2, 2, 4.0), (2.0, 1, 4, 0.8)])
def test_dg_composed_delta_matches_convolution(sigma, sens, k, eps):
    exact = float(R.dg_delta_composed(eps, sigma, sens, k))
    c = PrivacyAccountant().compose(DiscreteGaussian(sigma, sens), times=k).certificate(epsilon=eps)
    assert c.lower_bound <= exact * (1 + 1e-12) and exact <= c.delta
    assert c.delta - exact <= RTOL * exact


@pytest.mark.parametrize("sigma,sens,alpha", [(1.0, 1, 1.5), (0.5, 1, 3.3), (0.3, 2, 10.0), (2.0, 1, 1.01),
                                              (0.45, 1, 2.5), (0.55, 3, 7.7), (4.0, 2, 40.0)])
def test_dg_rdp_exact(sigma, sens, alpha):
    m = DiscreteGaussian(sigma, sens)
    v = float(m.rdp([alpha])[0])
    exact = float(R.dg_rdp(alpha, sigma, sens))
    assert exact <= v <= exact * (1 + 1e-12) + 1e-15
    assert v <= alpha * m.mu**2 / 2 * (1 + 1e-15)  # the CKS (mu^2/2)-zCDP bound


def test_dg_rdp_integer_shift_attains_cks_bound():
    """(alpha - 1) Delta integer: Z((1 - alpha) Delta) = Z(0), so eps(alpha) = alpha Delta^2 / (2 sigma^2)."""
    m = DiscreteGaussian(1.3, 2)
    for a in (1.5, 2.0, 3.0):
        assert float(m.rdp([a])[0]) == pytest.approx(a * 4 / (2 * 1.69), rel=1e-14)


@pytest.mark.parametrize("sigma", [0.4, 1.0, 2.5])
def test_dg_largest_shift_dominates(sigma):
    """The module's claim that a shift d < Delta is dominated by Delta (checked here by enumeration)."""
    for eps in (-0.5, 0.0, 0.5, 2.0):
        ds = [R.dg_delta_shift(eps, sigma, d, dps=25) for d in (1, 2, 3)]
        assert ds[0] <= ds[1] <= ds[2]


def test_dg_tail_mass_is_an_upper_bound():
    m = DiscreteGaussian(2.0)
    l, w = m.pld_atoms()
    x_max = (l.size - 1) // 2
    with mp.workdps(40):
        s2 = mp.mpf(4)
        z = mp.fsum(mp.exp(-mp.mpf(x) ** 2 / (2 * s2)) for x in range(-200, 201))
        tail = 2 * mp.fsum(mp.exp(-mp.mpf(x) ** 2 / (2 * s2)) for x in range(x_max + 1, 200)) / z
    assert float(tail) <= m.infinite_loss_mass <= float(tail) * 1.01 + 1e-300
    assert m.tight


# ------------------------------------------------------------------------------------------ discrete Laplace
def test_dlap_unit_sensitivity_is_randomized_response():
    for t, k in ((2.0, 7), (0.5, 3)):
        d = PrivacyAccountant().compose(DiscreteLaplace(t), times=k).certificate(epsilon=0.3).delta
        assert d == pytest.approx(ref.rr_delta_enumerate(0.3, 1.0 / t, k), rel=1e-10)
        np.testing.assert_allclose(DiscreteLaplace(t).rdp([1.5, 4.0]),
                                   RandomizedResponse(1.0 / t).rdp([1.5, 4.0]))


@pytest.mark.parametrize("t,sens,k", [(2.0, 1, 3), (1.5, 3, 2), (1.0, 2, 5)])
def test_dlap_composed_epsilon(t, sens, k):
    exact = float(R.epsilon_from_delta(lambda e: R.dlap_delta(e, t, sens, k, dps=30), 1e-6, hi=60))
    c = _eps(DiscreteLaplace(t, sens), k, 1e-6)
    assert exact * (1 - 1e-12) <= c.epsilon <= exact * (1 + RTOL)


@pytest.mark.parametrize("t,sens,alpha", [(2.0, 1, 1.5), (1.5, 3, 3.3), (0.5, 2, 10.0), (4.0, 5, 1.001)])
def test_dlap_rdp_exact(t, sens, alpha):
    v = float(DiscreteLaplace(t, sens).rdp([alpha])[0])
    exact = float(R.dlap_rdp(alpha, t, sens))
    assert exact <= v <= exact * (1 + 1e-12)
    assert v <= sens / t


# ------------------------------------------------------------------------------------------ Skellam
@pytest.mark.parametrize("mu,sens,k", [(10.0, 1, 1), (3.0, 2, 1), (50.0, 1, 1), (0.5, 1, 1), (10.0, 1, 2)])
def test_skellam_epsilon_matches_bessel_enumeration(mu, sens, k):
    exact = float(R.epsilon_from_delta(lambda e: R.skellam_delta(e, mu, sens, k, dps=25), 1e-6, hi=60,
                                       iters=60))
    c = _eps(Skellam(mu, sens), k, 1e-6)
    assert c.method == "cf"
    assert exact * (1 - 1e-12) <= c.epsilon <= exact * (1 + RTOL)


@pytest.mark.parametrize("mu", [0.3, 1.0, 5.0, 40.0])
@pytest.mark.parametrize("sens", [1, 3])
def test_skellam_published_rdp_bounds_exact_divergence(mu, sens):
    m = Skellam(mu, sens)
    for a in (1.5, 2, 3, 7.5, 30):
        exact = float(R.skellam_rdp(a, mu, sens, dps=25, width=int(60 * mu**0.5 + 1500)))
        assert float(m.rdp([a])[0]) >= exact
        if float(a).is_integer():
            assert skellam_rdp_akl(a, mu, sens) >= exact


def test_skellam_pmf_atoms_match_bessel():
    m = Skellam(7.0, 2)
    l, w = m.pld_atoms()
    p = R.skellam_pmf(7.0)
    mid = (l.size - 1) // 2
    for k in (-5, 0, 3, 20):
        assert w[mid + k] == pytest.approx(float(p[k]), rel=1e-11)
        assert w[mid + k] >= float(p[k]) * (1 - 1e-15)  # masses rounded up
        exact_loss = float(mp.log(p[k] / p[k - 2]))
        assert exact_loss <= l[mid + k] <= exact_loss + 1e-10 * (1 + abs(exact_loss))


# ------------------------------------------------------------------------------------------ plumbing
@pytest.mark.parametrize("mech", [DiscreteGaussian(1.0), DiscreteGaussian(0.3, 2), DiscreteGaussian(200.0, 3),
                                  DiscreteLaplace(2.0), DiscreteLaplace(1.5, 3), Skellam(10.0),
                                  Skellam(0.5, 2), Skellam(1e4, 5)])
def test_conformance(mech):
    check_mechanism(mech)
    assert registry.from_dict(json.loads(json.dumps(mech.to_dict()))) == mech


@pytest.mark.parametrize("cls,kw,match", [
    (DiscreteGaussian, {"sigma": 0.0}, "sigma"),
    (DiscreteGaussian, {"sigma": 1.0, "sensitivity": 1.5}, "sensitivity"),
    (DiscreteGaussian, {"sigma": 1.0, "sensitivity": 0}, "sensitivity"),
    (DiscreteLaplace, {"scale": -1.0}, "scale"),
    (DiscreteLaplace, {"scale": 1e-3, "sensitivity": 1}, "sensitivity / scale"),
    (Skellam, {"mu": float("nan")}, "mu"),
    (Skellam, {"mu": 1e-9}, "mu"),
])
def test_bad_input(cls, kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        cls(**kw)


def test_sigma_past_the_window_is_refused_with_a_clear_error():
    """Past DG_MAX_SIGMA the lattice window leaves more than ~1e-3 of the mass out (counted as infinite
    loss): at sigma = 2e5 that bound reached 1 and a query died in log1p(-1) (math domain error)."""
    from mechanisms.discrete import DG_MAX_SIGMA

    assert DiscreteGaussian(DG_MAX_SIGMA).infinite_loss_mass < 1e-3
    with pytest.raises(ValueError, match="sigma must be <="):
        DiscreteGaussian(2e5)


def test_large_sigma_window_reports_tail():
    m = DiscreteGaussian(5000.0)
    assert m.pld_atoms()[0].size <= (1 << 18) + 1
    assert 0 < m.infinite_loss_mass < 1e-15
    assert not m.tight
    assert math.isfinite(_eps(m, 1, 1e-6, method="cf").epsilon)
