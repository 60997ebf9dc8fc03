"""Selection by score (mechanisms.score_selection) against independent references.

References (``tests/reference_mechlib.py``): the binary pairs B_t of Dong, Durfee & Rogers (2020) built
from their definition, their Renyi divergences maximised over t by golden-section search (mpmath), the
family's hockey-stick profile as a grid supremum over t, exact k-fold products of B_t by enumeration, and
the output distributions of concrete exponential mechanisms on score vectors.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import reference as ref
import reference_mechlib as R

from accountant import PrivacyAccountant
from mechanisms import PureDP, registry
from mechanisms.conformance import check_mechanism
from mechanisms.score_selection import (
    BoundedRangeMechanism,
    ExponentialMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
    br_rdp,
)


@pytest.mark.parametrize("eps", [0.5, 3.0, 8.0])
@pytest.mark.parametrize("alpha", [1.01, 2.0, 5.0, 200.0])
def test_br_rdp_is_the_supremum_over_t(eps, alpha):
    exact = float(R.br_rdp_sup_golden(alpha, eps))
    v = br_rdp(alpha, eps)
    assert exact <= v <= exact * (1 + 1e-9)


@pytest.mark.parametrize("alpha", [1.01, 2.0, 200.0])
def test_br_rdp_small_eps_within_target(alpha):
    exact = float(R.br_rdp_sup_golden(alpha, 0.01))
    assert exact <= br_rdp(alpha, 0.01) <= exact * (1 + 1e-6)


def test_br_rdp_below_cesar_rogers_zcdp_and_pure():
    for eps in (0.1, 1.0, 5.0):
        for a in (1.5, 3.0, 50.0):
            v = br_rdp(a, eps)
            assert v <= a * eps * eps / 8 * (1 + 1e-12) and v <= eps
            assert v <= float(PureDP(eps).rdp([a])[0])


@pytest.mark.parametrize("eps,x", [(0.5, 0.0), (0.5, 0.3), (2.0, 0.0), (2.0, 0.3), (2.0, 1.0)])
def test_single_use_profile_is_sup_over_the_family(eps, x):
    d = PrivacyAccountant().compose(ExponentialMechanism(eps)).certificate(epsilon=x).delta
    sup_grid = float(R.br_delta_sup(x, eps, grid=1000))  # a lower bound on the supremum
    closed = (math.exp(eps / 2) - math.exp(x / 2)) ** 2 / math.expm1(eps)
    assert sup_grid <= d and closed <= d <= closed * (1 + 1e-6)
    assert sup_grid >= closed * (1 - 1e-6)


def test_exponential_mechanism_instances_are_dominated():
    """Concrete exponential mechanisms (random score vectors, neighbours changing scores by <= 1) never
    exceed the certified delta, one use and two uses."""
    rng = random.Random(7)
    eps = 1.2
    acct1 = PrivacyAccountant().compose(ExponentialMechanism(eps))
    acct2 = PrivacyAccountant().compose(ExponentialMechanism(eps), times=2)
    d1 = {x: acct1.certificate(epsilon=x).delta for x in (0.0, 0.4)}
    d2 = {x: acct2.certificate(epsilon=x).delta for x in (0.0, 0.4)}
    for _ in range(12):
        n = rng.randint(2, 6)
        u = [rng.uniform(0, 5) for _ in range(n)]
        v = [x + rng.choice((-1.0, 1.0)) * rng.random() for x in u]
        p, q = R.em_pair(u, v, eps)
        for x in (0.0, 0.4):
            assert float(R.pair_delta(x, p, q)) <= d1[x] * (1 + 1e-9)
            p2 = {(i, j): p[i] * p[j] for i in p for j in p}
            q2 = {(i, j): q[i] * q[j] for i in q for j in q}
            assert float(R.pair_delta(x, p2, q2)) <= d2[x] * (1 + 1e-9)


@pytest.mark.parametrize("eps,k", [(0.5, 4), (1.0, 3)])
def test_composition_dominates_every_binary_family_member(eps, k):
    acct = PrivacyAccountant().compose(ExponentialMechanism(eps), times=k)
    for x in (0.2, 1.0):
        d = acct.certificate(epsilon=x).delta
        for t in np.linspace(0.0, eps, 9):
            assert float(R.br_composed_delta(x, eps, [float(t)] * k)) <= d * (1 + 1e-9)
        mixed = [0.1 * eps, 0.5 * eps, 0.9 * eps][:k] + [0.3 * eps] * (k - 3)
        assert float(R.br_composed_delta(x, eps, mixed)) <= d * (1 + 1e-9)


def test_br_tighter_than_pure_dp_composition():
    for eps, k in ((0.5, 10), (0.1, 100)):
        br = PrivacyAccountant().compose(ExponentialMechanism(eps), times=k).epsilon(1e-6)
        pure = PrivacyAccountant().compose(PureDP(eps), times=k).epsilon(1e-6)
        assert br < pure
        # and never below the exact optimal composition of identical B_t at the midpoint t (a lower bound)
        assert R.br_composed_delta(br, eps, [eps / 2] * min(k, 10)) <= 1e-6 or k > 10


def test_report_noisy_max_variants():
    eps = 0.7
    g = ReportNoisyMax(eps, "gumbel")
    np.testing.assert_array_equal(g.rdp([2.0, 9.0]), ExponentialMechanism(eps).rdp([2.0, 9.0]))
    for m in (ReportNoisyMax(eps, "laplace"), ReportNoisyMax(eps, "exponential"), PermuteAndFlip(eps)):
        d = PrivacyAccountant().compose(m, times=3).certificate(epsilon=0.5).delta
        assert d == pytest.approx(ref.kov_delta(0.5, eps, 0.0, 3), rel=1e-9)
        assert m.pure_epsilon == eps


def test_total_variation_is_tanh():
    m = ExponentialMechanism(2.0)
    assert m.total_variation() == pytest.approx(math.tanh(0.5), rel=1e-14)
    assert m.total_variation() >= math.tanh(0.5)


@pytest.mark.parametrize("mech", [ExponentialMechanism(0.5), ExponentialMechanism(0.0),
                                  BoundedRangeMechanism(3.0), ReportNoisyMax(1.0),
                                  ReportNoisyMax(1.0, "laplace"), PermuteAndFlip(2.0)])
def test_conformance(mech):
    check_mechanism(mech)
    assert registry.from_dict(mech.to_dict()) == mech


@pytest.mark.parametrize("cls,kw,match", [(ExponentialMechanism, {"epsilon": -1.0}, "epsilon"),
                                          (ReportNoisyMax, {"epsilon": 1.0, "noise": "cauchy"}, "noise"),
                                          (PermuteAndFlip, {"epsilon": float("inf")}, "epsilon")])
def test_bad_input(cls, kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        cls(**kw)
