"""Poisson-subsampled Laplace: both dominating pairs, spec 02 table L, and a regression for the
scaled-contour underflow that once lost the exact atom part (it reported eps = 0 for the add pair)."""

import math

import pytest

from accountant import PrivacyAccountant
from conversions.contour import ComposedPLD, delta_bounds, epsilon_bounds
from mechanisms import Laplace, PoissonSubsampled, SubsampledLaplace

# spec 02 section 4.2 table L: b = 1, gamma = 0.1, k = 1 (closed-form references)
TABLE_L = [(0.05, 0.0254013898, 0.0082179484), (0.10, 0.0131218309, 0.0)]


@pytest.mark.parametrize("eps, d_rem, d_add", TABLE_L)
def test_table_l_inside_certified_brackets(eps, d_rem, d_add):
    m = SubsampledLaplace(scale=1.0, sample_rate=0.1)
    for direction, ref in (("remove", d_rem), ("add", d_add)):
        b = delta_bounds(ComposedPLD([(m, 1)], direction), eps, rtol=1e-6)
        assert b.lower - 1e-10 <= ref <= b.upper + 1e-10
        # the quadrature work cap limits this single-step, atom-heavy case to a few percent
        assert b.upper - b.lower <= 3e-2 * max(ref, 1e-3)


def test_add_pair_never_reports_zero_and_accountant_takes_max():
    m = SubsampledLaplace(scale=2.0, sample_rate=0.9)
    eps = {d: epsilon_bounds(ComposedPLD([(m, 10)], d), 1e-5, rtol=1e-6) for d in ("remove", "add")}
    # the loss of 10 steps is at most 10 * log(1 - q + q e^{a}) (remove) / 10 * -log(1 - q + q e^{-a})
    a, q = 0.5, 0.9
    for d, top in (("remove", math.log1p(q * math.expm1(a))), ("add", -math.log1p(q * math.expm1(-a)))):
        assert 0.9 * 10 * top < eps[d].lower <= eps[d].upper <= 10 * top
    acct = PrivacyAccountant(rtol=1e-6).compose(m, 10)
    assert acct.epsilon(1e-5, method="cf") == max(eps["remove"].upper, eps["add"].upper)


def test_rdp_matches_tight_poisson_laplace_and_pure_cap():
    m = SubsampledLaplace(scale=2.0, sample_rate=0.3)
    ref = PoissonSubsampled(Laplace(2.0), 0.3)
    alphas = [1.5, 2.0, 7.0, 40.0]
    assert list(m.rdp(alphas)) == list(ref.rdp(alphas))
    assert m.pure_epsilon == pytest.approx(math.log1p(0.3 * math.expm1(0.5)), rel=1e-15)
