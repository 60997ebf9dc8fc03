"""SVT noise calibration on the accountant floor (accountant.svt_calibration): the route choice.

Independent reference: a Laplace SVT with cut-off 1 is pure (eps1 + eps2)-DP and its dominating pair is
randomized response, so T uses are dominated by RR(eps1 + eps2)^T, whose exact epsilon(delta) is the
optimal composition theorem (Kairouz, Oh & Viswanath 2015), computed here by ``kov_epsilon`` from the
closed-form hockey-stick sum (not by a route of the accountant).
"""

from __future__ import annotations

import pytest

from accountant import calibrate_gaussian_svt, calibrate_laplace_svt
from accountant.svt_calibration import certified_epsilon
from mechanisms.svt import GaussianSVT, kov_epsilon

TARGET, DELTA, USES = 2.0, 1e-6, 20


@pytest.fixture(scope="module")
def calibrated():
    rdp = calibrate_laplace_svt(TARGET, DELTA, times=USES, rtol=1e-4)
    auto = calibrate_laplace_svt(TARGET, DELTA, times=USES, rtol=1e-4, method="auto")
    return rdp, auto


def test_default_is_the_rdp_route_and_method_auto_needs_less_noise(calibrated):
    rdp, auto = calibrated
    assert certified_epsilon(rdp, DELTA, USES) == certified_epsilon(rdp, DELTA, USES, method="rdp")
    # the characteristic-function route composes RR atoms exactly: a tighter certificate, so less noise
    assert auto.threshold_scale < rdp.threshold_scale * (1 - 1e-3)


def test_calibrated_noise_meets_the_target_by_exact_composition(calibrated):
    for mech in calibrated:
        exact = kov_epsilon(mech.epsilon1 + mech.epsilon2, 0.0, USES, DELTA)
        assert exact <= TARGET
        cert = certified_epsilon(mech, DELTA, USES, method="auto")
        assert exact - 1e-9 <= cert <= TARGET
    # with the tight route the certificate is the exact value up to its numerical error
    auto = calibrated[1]
    exact = kov_epsilon(auto.epsilon1 + auto.epsilon2, 0.0, USES, DELTA)
    assert certified_epsilon(auto, DELTA, USES, method="auto") == pytest.approx(exact, rel=1e-6)


def test_method_and_rule_are_checked():
    with pytest.raises(ValueError, match="rule"):
        certified_epsilon(GaussianSVT(2.0, 4.0, max_length=10), DELTA, rule="best")
    with pytest.raises(ValueError, match="method"):
        calibrate_gaussian_svt(1.0, DELTA, max_length=10, method="fastest")
