"""Closed-form ("exact") routes and the route selection of method="auto".

References: the single-Laplace profile is recomputed here by mpmath quadrature of
int (p - e^eps q)_+ dx over the two Laplace densities (independent of the closed form it checks);
the auto selection is checked against every route evaluated separately (compare=True).
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from accountant import PrivacyAccountant
from accountant.privacy_accountant import AUTO_SKIP_RTOL
from conversions import laplace_dp
from mechanisms import Gaussian, Laplace, PureDP, RandomizedResponse


def _laplace_delta_quad(eps: float, a: float, dps: int = 40):
    """delta(eps) = int (p(x) - e^eps q(x))_+ dx, p = Lap(0, 1), q = Lap(a, 1), by mpmath quadrature
    (b = 1 and sensitivity a, so that the float a is used exactly; only a = Delta / b matters)."""
    with mp.workdps(dps):
        b, sens, e = mp.mpf(1), mp.mpf(a), mp.mpf(eps)

        def p(x):
            return mp.exp(-abs(x) / b) / (2 * b)

        def q(x):
            return mp.exp(-abs(x - sens) / b) / (2 * b)

        # p / q = e^{a} left of 0, e^{(sens - 2x)/b} on (0, sens), e^{-a} right of sens: p > e^eps q
        # exactly left of x* = (sens - eps b) / 2 (for 0 <= eps < a)
        x_star = (sens - e * b) / 2
        if x_star <= 0:
            return mp.mpf(0)
        pts = [-mp.inf, 0, min(x_star, sens)]
        return mp.quad(lambda x: p(x) - mp.exp(e) * q(x), pts)


@pytest.mark.parametrize("b,sens", [(1.0, 1.0), (0.2, 1.0), (10.0, 1.0), (3.0, 7.0), (100.0, 0.5)])
def test_single_laplace_closed_form_matches_quadrature(b, sens):
    a = sens / b
    for frac in (0.0, 1e-6, 0.1, 0.5, 0.9, 0.999, 1.0, 1.5):
        eps = frac * a
        d, err = laplace_dp.laplace_delta(eps, a)
        want = float(_laplace_delta_quad(eps, a))
        assert d - err <= want * (1 + 1e-15) + 1e-300 and want <= (d + err) * (1 + 1e-15), (eps, d, want)
        assert err <= 1e-15 * d  # the declared error is a few ulps, not a loose bracket


@pytest.mark.parametrize("a", [1e-4, 0.05, 1.0, 4.0, 40.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-5, 0.01, 0.3])
def test_single_laplace_epsilon_brackets_the_true_inverse(a, delta):
    """eps(delta) upper bound and its error bracket contain the mpmath root of delta(eps) = target."""
    eps_up, err = laplace_dp.laplace_epsilon(delta, a)
    with mp.workdps(40):
        am, dm = mp.mpf(a), mp.mpf(delta)
        tv = -mp.expm1(-am / 2)
        true = mp.mpf(0) if dm >= tv else am + 2 * mp.log1p(-dm)  # solves 1 - e^{(eps - a)/2} = delta
        if true > 0:
            # the closed form really inverts the quadrature profile
            assert abs(_laplace_delta_quad(true, a) - dm) <= mp.mpf(10) ** -30 + 1e-25 * dm
    true = float(true)
    assert eps_up - err <= true <= eps_up
    assert eps_up - true <= 1e-14 * max(a, 1.0)
    d_at, d_err = laplace_dp.laplace_delta(eps_up, a)
    assert d_at - d_err <= delta * (1 + 1e-15)  # delta(eps_up) never exceeds the target (up to rounding)


def test_laplace_closed_form_rejects_bad_input():
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="a ="):
            laplace_dp.laplace_delta(0.1, bad)
    with pytest.raises(ValueError, match="delta"):
        laplace_dp.laplace_epsilon(0.0, 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        laplace_dp.laplace_delta(-0.1, 1.0)


def test_single_laplace_auto_uses_the_closed_form():
    acct = PrivacyAccountant().compose(Laplace(scale=1.0))
    cert = acct.certificate(delta=1e-5)
    assert cert.method == "exact" and cert.bound == "exact"
    cf = acct.certificate(delta=1e-5, method="cf")
    assert cf.lower_bound <= cert.epsilon <= cf.epsilon * (1 + 1e-15)
    assert cert.epsilon == pytest.approx(1.0 + 2 * math.log1p(-1e-5), rel=1e-15)
    dcert = acct.certificate(epsilon=0.5)
    assert dcert.method == "exact"
    assert dcert.lower_bound <= -math.expm1(-0.25) <= dcert.delta
    # the closed form covers one use only: two uses go through the contour
    acct2 = PrivacyAccountant().compose(Laplace(scale=1.0), times=2)
    with pytest.raises(ValueError, match="exact"):
        acct2.epsilon(1e-5, method="exact")
    assert acct2.certificate(delta=1e-5).method == "cf"
    # mixed with a Gaussian: no closed form either
    mixed = PrivacyAccountant().compose(Laplace(scale=1.0)).compose(Gaussian(sigma=3.0))
    assert "exact" not in mixed._valid_methods()


LEDGERS = [
    [(Laplace(scale=1.0), 1)],
    [(Laplace(scale=2.0), 10)],
    [(Laplace(scale=5.0), 100)],
    [(Gaussian(sigma=2.0), 30), (Gaussian(sigma=0.7), 2)],
    [(RandomizedResponse(epsilon=1.0), 20)],
    [(Laplace(scale=3.0), 4), (PureDP(epsilon=0.3), 5)],
]


@pytest.mark.parametrize("entries", LEDGERS, ids=lambda e: "+".join(f"{k}x{m.name}" for m, k in e))
def test_auto_skipping_never_costs_more_than_the_skip_tolerance(entries):
    """auto (which skips routes that cannot win by more than AUTO_SKIP_RTOL) agrees with the full
    comparison up to that tolerance, never goes below any certified lower bound, and names what it
    skipped."""
    acct = PrivacyAccountant()
    for m, k in entries:
        acct.compose(m, k)
    for delta in (1e-5, 1e-10):
        fast = acct.certificate(delta=delta)
        full = acct.certificate(delta=delta, compare=True)
        assert set(full.candidates) >= {"rdp"} | ({"cf"} if acct.ledger.pld_available else set())
        assert min(full.candidates.values()) == full.epsilon
        assert full.epsilon <= fast.epsilon <= full.epsilon + AUTO_SKIP_RTOL * fast.epsilon
        lowers = [c.lower_bound for c in (fast, full) if c.lower_bound is not None]
        assert all(lo <= min(fast.epsilon, full.epsilon) for lo in lowers)
        skipped = fast.details.get("skipped_routes", "")
        assert set(fast.candidates) | set(filter(None, skipped.split(","))) == set(full.candidates)
        assert fast.method in fast.candidates
        for m in filter(None, skipped.split(",")):
            # a skipped route could not have improved the answer by more than the tolerance
            assert full.candidates[m] >= fast.epsilon * (1 - AUTO_SKIP_RTOL)
    for eps in (0.5, 2.0):
        fast = acct.certificate(epsilon=eps)
        full = acct.certificate(epsilon=eps, compare=True)
        assert full.delta <= fast.delta <= full.delta + AUTO_SKIP_RTOL * fast.delta + 1e-300
