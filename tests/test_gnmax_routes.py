"""GNMax and SubsampledGNMax reuse the Gaussian-family routes (exact mu-GDP, cf, PLD) as upper bounds.

Reference: the closed-form Gaussian profile in mpmath (``reference.gaussian_epsilon``) and the
subsampled Gaussian's own certificates (the same dominating pairs)."""

from __future__ import annotations

import math

import pytest
import reference as ref

from accountant import PrivacyAccountant
from mechanisms import GNMax, SubsampledGaussian, SubsampledGNMax
from mechanisms.conformance import check_mechanism
from mechanisms.gnmax import subsampled_gaussian_rdp


def test_gnmax_exact_route_is_upper_bound_only():
    c = PrivacyAccountant().compose(GNMax(40.0), times=286).certificate(delta=1e-5)
    mu = math.sqrt(286) * math.sqrt(2) / 40.0
    exact = ref.gaussian_epsilon(1e-5, mu)
    assert c.method == "exact"
    assert exact <= c.epsilon <= exact * (1 + 1e-9)
    assert c.lower_bound is None and c.bound == "upper bound"
    assert GNMax(40.0).gdp_mu == pytest.approx(math.sqrt(2) / 40.0)


def test_subsampled_gnmax_gains_the_cf_route():
    m = SubsampledGNMax(25.0, 0.15)
    acct = PrivacyAccountant().compose(m, times=100)
    c = acct.certificate(delta=1e-5)
    sg = PrivacyAccountant().compose(SubsampledGaussian(25.0, 0.15, math.sqrt(2)), times=100)
    sg = sg.certificate(delta=1e-5)
    assert c.method in ("cf", "pld") and c.lower_bound is None and c.bound == "upper bound"
    assert c.epsilon == pytest.approx(sg.epsilon, rel=1e-9)
    assert c.epsilon < acct.epsilon(1e-5, method="rdp")
    # the RDP curve is the subsampled Gaussian's, never above the older binomial transform
    a = [1.5, 2.0, 10.0, 64.0, 3e4]
    assert all(m.rdp(a) <= subsampled_gaussian_rdp(a, 25.0, 0.15, math.sqrt(2)) * (1 + 1e-12))


@pytest.mark.parametrize("mech", [GNMax(40.0), GNMax(1.0, 1.0), SubsampledGNMax(25.0, 0.15)])
def test_conformance(mech):
    check_mechanism(mech)
