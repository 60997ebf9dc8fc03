"""zCDP blocks: composition with everything else through the RDP curve; conversion against an independent
mpmath minimisation of the Canonne-Kamath-Steinke (2020) bound (``reference_mechlib.zcdp_delta``)."""

from __future__ import annotations

import math

import pytest
import reference as ref
import reference_mechlib as R

from accountant import PrivacyAccountant
from mechanisms import ZCDP, Gaussian
from mechanisms.conformance import check_mechanism
from mechanisms.zcdp import zcdp_epsilon_classic, zcdp_of_gaussian, zcdp_of_pure_dp


@pytest.mark.parametrize("rho,k,eps", [(0.3, 5, 3.0), (0.01, 1, 0.5), (2.0, 10, 60.0), (0.5, 1, 0.1)])
def test_zcdp_delta_matches_cks_conversion(rho, k, eps):
    c = PrivacyAccountant().compose(ZCDP(rho), times=k).certificate(epsilon=eps)
    exact = float(R.zcdp_delta(eps, rho * k))
    assert exact <= c.delta <= exact * (1 + 1e-6)
    assert c.method == "rdp" and c.bound == "upper bound"


def test_zcdp_beats_classic_conversion_and_is_above_gaussian():
    """rho-zCDP contains the Gaussian with mu^2/2 = rho, whose exact eps is a lower bound for the class."""
    rho, delta = 0.125, 1e-5
    eps = PrivacyAccountant().compose(ZCDP(rho)).epsilon(delta)
    assert eps < zcdp_epsilon_classic(rho, delta)
    assert eps >= ref.gaussian_epsilon(delta, math.sqrt(2 * rho))


def test_zcdp_composes_with_other_mechanisms():
    """A rho block plus a Gaussian equals the RDP route on the summed curve rho' alpha."""
    g = Gaussian(sigma=2.0)  # rho_g = 1/8
    acct = PrivacyAccountant().compose(ZCDP(0.2), times=3).compose(g, times=4)
    c = acct.certificate(epsilon=2.0, method="rdp")
    assert c.delta == pytest.approx(float(R.zcdp_delta(2.0, 0.6 + 0.5)), rel=1e-6)


def test_approximate_zcdp_adds_failure_probability():
    d0 = 1e-6
    c = PrivacyAccountant().compose(ZCDP(0.1, delta=d0), times=3).certificate(epsilon=2.0)
    p_inf = 1 - (1 - d0) ** 3
    expect = p_inf + (1 - p_inf) * float(R.zcdp_delta(2.0, 0.3))
    assert expect <= c.delta <= expect * (1 + 1e-6)


def test_xi_offset_and_pure_end():
    z = ZCDP(rho=0.0, xi=0.7)
    assert z.pure_epsilon == 0.7
    assert float(z.rdp([2.0])[0]) == pytest.approx(0.7)
    assert ZCDP(0.1, xi=0.2).rdp([3.0])[0] == pytest.approx(0.5)


def test_helpers():
    assert zcdp_of_gaussian(2.0, 1.0).rho == pytest.approx(0.125, rel=1e-15)
    assert zcdp_of_gaussian(2.0).rho >= 0.125
    assert zcdp_of_pure_dp(1.0).rho >= 0.5


@pytest.mark.parametrize("kw,match", [({"rho": -1.0}, "rho"), ({"rho": 1.0, "delta": 1.0}, "delta"),
                                      ({"rho": 1.0, "xi": float("inf")}, "xi"), ({"rho": "a"}, "rho")])
def test_bad_input(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        ZCDP(**kw)


def test_conformance():
    for z in (ZCDP(0.5), ZCDP(0.1, xi=0.3, delta=1e-7), ZCDP(0.0)):
        check_mechanism(z)
