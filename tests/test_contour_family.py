"""The contour inversion of a family of compositions sharing per-mechanism values
(conversions.contour_family).

References: the mechanisms' own log-MGFs (the caches must hand back the numbers the mechanism computes
at the same arguments: exactly for a closed form; for a quadrature, whose value at a node may depend on
the other nodes of the call (a shared grid), to within twice its declared error), the composed PLD of
conversions.contour (the same sums), the mu-GDP closed form (scipy) for the certified brackets of a
family of Gaussian compositions, and a Gaussian + Laplace family against a fresh standalone contour
query.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from conversions import contour, contour_family
from conversions.contour_family import FamilyPLD, SharedTerms, family_epsilon_bounds
from mechanisms import Gaussian, Laplace
from mechanisms.subsampled import SubsampledGaussian


def gdp_epsilon(mu: float, delta: float) -> float:
    def f(e):
        return norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta
    return brentq(f, 0.0, 100.0 + 10 * mu * mu, xtol=1e-14, rtol=1e-14)


def _no_meter(units: float) -> None:
    return None


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_node_cache_returns_the_mechanism_values(direction):
    m = SubsampledGaussian(1.1, 0.05)
    sh = SharedTerms(direction)
    c, h = 2.0, 0.3

    def direct(step: float, n: int) -> np.ndarray:
        return m.log_mgf(c + 1j * (step * np.arange(n, dtype=float)), direction)

    # the quadrature's value at a node depends on the other nodes of its call (the line kernel's shared
    # grid) within the declared error e: |M~ - M| <= (e^e - 1) M(c) for each of two computations
    tol = 2.0 * math.expm1(m.log_mgf_error) * math.exp(m.log_mgf_real(c, direction)) * (1 + 1e-9)

    def same(got: np.ndarray, want: np.ndarray) -> None:
        assert got.shape == want.shape
        assert np.all(np.abs(np.exp(got) - np.exp(want)) <= tol)

    first = sh.nodes(m, c, h, 40, _no_meter)
    same(first, direct(h, 40))
    assert sh.calls["nodes"] == 1
    # a prefix and a coarser step (every other node) are served without a mechanism call
    np.testing.assert_array_equal(sh.nodes(m, c, h, 25, _no_meter), first[:25])
    np.testing.assert_array_equal(sh.nodes(m, c, 2 * h, 20, _no_meter), first[::2])
    same(sh.nodes(m, c, h, 25, _no_meter), direct(h, 25))
    same(sh.nodes(m, c, 2 * h, 20, _no_meter), direct(2 * h, 20))
    assert sh.calls["nodes"] == 1
    # longer: only the new nodes are computed; finer: the even nodes come from the cache
    longer = sh.nodes(m, c, h, 70, _no_meter)
    np.testing.assert_array_equal(longer[:40], first)
    same(longer, direct(h, 70))
    finer = sh.nodes(m, c, h / 2, 139, _no_meter)
    np.testing.assert_array_equal(finer[::2], longer)
    same(finer, direct(h / 2, 139))
    same(sh.nodes(m, c, h / 2, 30, _no_meter), direct(h / 2, 30))
    assert sh.calls["nodes"] == 3
    # another line, and a step that is not a power-of-two multiple, are computed afresh
    same(sh.nodes(m, c, 0.7, 10, _no_meter), direct(0.7, 10))
    assert sh.calls["nodes"] == 4


def test_steps_of_a_line_share_nodes():
    sh = SharedTerms()
    assert sh.step(1.0, 0.3) == 0.3  # the first step sets the line's family H 2^-r
    for h in (0.29, 0.2, 0.151, 0.15, 0.07, 1.0):
        hs = sh.step(1.0, h)
        r = math.log2(0.3 / hs)
        assert hs <= h < 2 * hs and r == round(r)
    assert sh.step(2.0, 0.29) == 0.29  # (per line)


def test_pow2_ratio_is_exact():
    assert contour_family._pow2_ratio(0.75, 0.1875) == 4
    assert contour_family._pow2_ratio(0.3, 0.3) == 1
    assert contour_family._pow2_ratio(0.3, 0.6) is None
    assert contour_family._pow2_ratio(math.nextafter(0.6, 1.0), 0.3) is None
    assert contour_family._pow2_ratio(0.9, 0.3) is None


def test_family_pld_sums_equal_the_composed_pld():
    entries = [(SubsampledGaussian(1.1, 0.05), 300), (Laplace(3.0), 7), (Gaussian(5.0), 11)]
    sh = SharedTerms("remove")
    fam, ref = FamilyPLD(entries, "remove", sh), contour.ComposedPLD(entries, "remove")
    for c in (0.3, 1.0, 2.5):
        assert fam.log_mgf_real(c) == ref.log_mgf_real(c)
    s = 1.0 + 1j * (0.25 * np.arange(50, dtype=float))
    for a, b in zip(fam.log_mgf_j(s), ref.log_mgf_j(s), strict=True):
        np.testing.assert_array_equal(a, b)
    for t in (0.5, 3.0, 40.0):
        assert fam.log_env_r(1.0, t) == ref.log_env_r(1.0, t)
    # a second member with other counts reuses the values: no new real evaluations at the same lines
    n_real = sh.calls["real"]
    other = FamilyPLD([(m, 2 * k) for m, k in entries], "remove", sh)
    assert other.log_mgf_real(2.5) == contour.ComposedPLD([(m, 2 * k) for m, k in entries]).log_mgf_real(2.5)
    assert sh.calls["real"] == n_real
    with pytest.raises(ValueError, match="direction"):
        FamilyPLD(entries, "add", sh)


def test_gaussian_family_brackets_contain_the_closed_form():
    sh, warm = SharedTerms(), {}
    for k in (1, 2, 5, 9, 14, 20, 27, 35):
        res = family_epsilon_bounds(FamilyPLD([(Gaussian(3.0), k)], "remove", sh), 1e-6, warm=warm)
        ref = gdp_epsilon(math.sqrt(k) / 3.0, 1e-6)
        assert res.lower <= ref <= res.upper <= ref * (1 + 1e-8)
    assert sh.calls["envelope"] <= 8


def test_mixed_family_agrees_with_standalone_queries():
    sh, warm = SharedTerms(), {}
    for k in (3, 6, 9, 12):
        entries = [(Laplace(2.0), k), (Gaussian(4.0), 2 * k)]
        res = family_epsilon_bounds(FamilyPLD(entries, "remove", sh), 1e-5, warm=warm)
        ref = contour.epsilon_bounds(contour.ComposedPLD(entries, "remove"), 1e-5)
        assert res.lower <= ref.upper and ref.lower <= res.upper
        assert abs(res.upper - ref.upper) <= max(ref.upper - ref.lower, 1e-9 * ref.upper)


def test_capped_plans_and_the_work_limit_raise():
    # near-atomic losses: the plain contour would be capped (the standalone query splits the loss)
    near_atomic = FamilyPLD([(SubsampledGaussian(1.0, 0.001), 100)], "remove", SharedTerms())
    with pytest.raises(contour.WouldBeCapped):
        family_epsilon_bounds(near_atomic, 1e-5)
    dpsgd = FamilyPLD([(SubsampledGaussian(1.0, 0.1), 100)], "remove", SharedTerms())
    with pytest.raises(contour.WorkLimitReached):
        family_epsilon_bounds(dpsgd, 1e-5, work_limit=1e4)
