"""Structural properties of the characteristic-function (contour) route (Zhu, Dong & Wang 2022;
conversions.contour).

Every "bracket contains the truth" check uses an independent oracle: the GDP closed form, the exact
Laplace profile, randomized-response enumeration, the exact single-step subsampled-Gaussian profile, a
binomial mixture of shifted Gaussian profiles (Gaussian + RR) and closed-form
subsampled-Laplace values.  The remaining tests are identities (monotonicity,
convexity in e^eps, order independence, swap identity, independence of the numerical parameters).
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
import reference as ref

from accountant import PrivacyAccountant
from conversions import contour
from mechanisms import (
    ApproxDP,
    Gaussian,
    Laplace,
    RandomizedResponse,
    SubsampledGaussian,
)

ULP = 4 * np.finfo(float).eps


def _acct(*parts):
    a = PrivacyAccountant()
    for m, k in parts:
        a.compose(m, times=k)
    return a


def _bounds(parts, eps, direction="remove", rtol=contour.DEFAULT_RTOL):
    return contour.delta_bounds(contour.ComposedPLD(list(parts), direction), eps, rtol)


# -------------------------------------------------------------------------------- oracles

def _gm_rr_delta(eps, sigma, eps0, i):
    """i x Gaussian(sigma) composed with i x binary RR(eps0): delta(eps) = E_{L_RR}[delta_G(eps - L_RR)].

    For a product pair, E_P[(1 - e^{eps - L_G - L_R})_+] = sum_f P_RR(f) delta_G(eps - L_f), with f the number
    of flipped RR coordinates (L_f = (i - 2f) eps0, P_RR(f) = C(i,f) p^{i-f} (1-p)^f) and delta_G the exact
    sqrt(i)/sigma-GDP profile, valid for every real argument."""
    with mp.workdps(40):
        p = 1 / (1 + mp.exp(-mp.mpf(eps0)))
        mu = math.sqrt(i) / sigma
        tot = mp.mpf(0)
        for f in range(i + 1):
            w = mp.binomial(i, f) * p ** (i - f) * (1 - p) ** f
            tot += w * ref.gaussian_delta(eps - (i - 2 * f) * eps0, mu, as_mpf=True)
        return float(tot)


ANALYTIC = [  # (id, parts, eps, oracle)
    ("gauss-k10", [(Gaussian(sigma=1.0), 10)], 2.0, lambda e: ref.gaussian_delta(e, math.sqrt(10))),
    ("gauss-k1-neg", [(Gaussian(sigma=0.7), 1)], -0.5, lambda e: ref.gaussian_delta(e, 1 / 0.7)),
    ("gauss-tiny", [(Gaussian(sigma=2.0), 4)], 10.0, lambda e: ref.gaussian_delta(e, 1.0)),
    ("laplace-k100", [(Laplace(scale=5.0), 100)], 1.0, lambda e: ref.laplace_delta(e, 5.0, 100)),
    ("rr-k7", [(RandomizedResponse(epsilon=0.8), 7)], 0.5, lambda e: ref.rr_delta_enumerate(e, 0.8, 7)),
    ("approx-k4", [(ApproxDP(0.3, 1e-4), 4)], 0.4, lambda e: ref.kov_delta(e, 0.3, 1e-4, 4)),
    ("gm+rr-i10", [(Gaussian(sigma=5.0), 10), (RandomizedResponse(epsilon=math.log(0.52 / 0.48)), 10)], 2.0,
     lambda e: _gm_rr_delta(e, 5.0, math.log(0.52 / 0.48), 10)),
]


@pytest.mark.parametrize("case", ANALYTIC, ids=[c[0] for c in ANALYTIC])
def test_bracket_contains_oracle(case):
    """lower <= delta_true <= upper for every analytic case (honest error bounds)."""
    _, parts, eps, oracle = case
    b = _bounds(parts, eps)
    truth = oracle(eps)
    assert b.lower <= truth * (1 + ULP) + 1e-300
    assert truth <= b.upper * (1 + ULP) + 1e-300
    assert b.lower <= b.estimate <= b.upper
    if truth > 1e-250:
        assert b.upper - b.lower <= 1e-6 * truth + 1e-15


def test_subsampled_gaussian_single_step_both_directions():
    """k = 1: exact profile of both pairs (reference.subsampled_gaussian_delta_single), eps of both signs.

    Only containment is asserted: for a single step the decay envelope is weak and the bracket can be wide
    (e.g. add direction at eps = -0.3)."""
    mech = SubsampledGaussian(sigma=0.9, sample_rate=0.2)
    for direction in ("remove", "add"):
        for eps in (-0.3, 0.3):
            truth = ref.subsampled_gaussian_delta_single(eps, 0.2, 0.9, direction)
            b = _bounds([(mech, 1)], eps, direction)
            assert b.lower <= truth * (1 + ULP) and truth <= b.upper * (1 + ULP), (direction, eps, b, truth)


def test_subsampled_gaussian_few_steps_against_fft_oracle():
    """k = 5, add direction (the remove one is covered by the DP-SGD tests in test_subsampled.py): certified
    bracket intersects the independent FFT bracket and the estimate lies inside it."""
    mech = SubsampledGaussian(sigma=0.9, sample_rate=0.2)
    for direction in ("add",):
        lo, hi = ref.subsampled_gaussian_delta(0.3, 0.2, 0.9, 5, direction)
        b = _bounds([(mech, 5)], 0.3, direction)
        assert b.lower <= hi and lo <= b.upper
        assert lo <= b.estimate <= hi


def test_gm_rr_mixture_spec02_table_f():
    """[GM(sigma=5), RR(p=.52)] x i at eps = 2 (independent binomial-mixture oracle)."""
    eps0 = math.log(0.52 / 0.48)
    for i, spec in ((10, 8.3136397895e-04), (50, 1.5020164212e-01)):
        truth = _gm_rr_delta(2.0, 5.0, eps0, i)
        assert truth == pytest.approx(spec, rel=1e-9)
        cert = _acct((Gaussian(sigma=5.0), i), (RandomizedResponse(epsilon=eps0), i)).certificate(
            epsilon=2.0, method="cf")
        assert cert.lower_bound <= truth <= cert.delta
        assert cert.delta == pytest.approx(truth, rel=1e-7)


def _sub_laplace_remove_delta(eps: float, q: float, b: float) -> float:
    """Exact delta of the remove pair ((1-q) Lap(0, b) + q Lap(1, b), Lap(0, b)) for
    log(1-q+q e^{-1/b}) < eps < log(1-q+q e^{1/b}): the ratio is 1-q+q e^{(2x-1)/b} on (0, 1), so the region
    p > e^eps q is x > x* with e^{(2x*-1)/b} = (e^eps - 1 + q)/q, and
    delta = q P_{Lap(1)}(X > x*) + (1 - q - e^eps) P_{Lap(0)}(X > x*)."""
    with mp.workdps(40):
        e, q, b = mp.mpf(eps), mp.mpf(q), mp.mpf(b)
        xs = (b * mp.log((mp.exp(e) - 1 + q) / q) + 1) / 2
        assert 0 < xs < 1
        return float(q * (1 - mp.exp(-(1 - xs) / b) / 2) + (1 - q - mp.exp(e)) * mp.exp(-xs / b) / 2)


def test_subsampled_laplace_spec02_table_l():
    """Closed-form subsampled Laplace (b = 1, gamma = .1, k = 1): the certified brackets of both directions
    contain the
    closed-form values (printed to 10 digits; the remove ones re-derived here)."""
    from mechanisms import SubsampledLaplace

    mech = SubsampledLaplace(scale=1.0, sample_rate=0.1)
    table = [(0.05, 0.0254013898, 0.0082179484), (0.10, 0.0131218309, 0.0)]
    for eps, d_rem, d_add in table:
        assert _sub_laplace_remove_delta(eps, 0.1, 1.0) == pytest.approx(d_rem, abs=1e-10)
        for direction, val in (("remove", d_rem), ("add", d_add)):
            b = _bounds([(mech, 1)], eps, direction)
            assert b.lower - 1e-10 <= val <= b.upper + 1e-10, (eps, direction, b)


def test_subsampled_laplace_table_l_near_atom():
    """eps = 0.15, just below the upper atom log(1 - q + q e) = 0.1586 (regression: with the line c = 936 the
    error bound was under-reported and the bracket excluded the exact value)."""
    from mechanisms import SubsampledLaplace

    truth = _sub_laplace_remove_delta(0.15, 0.1, 1.0)
    assert truth == pytest.approx(0.0018554969, abs=1e-10)
    b = _bounds([(SubsampledLaplace(scale=1.0, sample_rate=0.1), 1)], 0.15, "remove")
    assert b.lower <= truth <= b.upper, b


# -------------------------------------------------------------------------------- shape

SHAPE_CASES = [
    ("gauss", [(Gaussian(sigma=1.0), 10)], [0.0, 0.5, 1.0, 2.0, 4.0, 8.0]),
    ("gm+rr", [(Gaussian(sigma=5.0), 20), (RandomizedResponse(epsilon=0.3), 20)], [0.0, 0.5, 1.0, 2.0, 4.0]),
    ("subsampled", [(SubsampledGaussian(sigma=2.0, sample_rate=0.02), 500)], [0.0, 0.25, 0.5, 1.0, 1.5, 2.5]),
    ("laplace", [(Laplace(scale=5.0), 100)], [0.0, 1.5, 4.0]),
]


@pytest.mark.parametrize("case", SHAPE_CASES, ids=[c[0] for c in SHAPE_CASES])
def test_delta_non_increasing_and_convex_in_exp_eps(case):
    """delta(eps) is non-increasing; delta as a function of x = e^eps is convex (a hockey-stick divergence
    in e^eps);
    delta in [max(0, 1 - e^eps), 1]."""
    _, parts, grid = case
    acct = _acct(*parts)
    certs = {e: acct.certificate(epsilon=e, method="cf") for e in grid}
    up = [certs[e].delta for e in grid]
    lo = [certs[e].lower_bound for e in grid]
    for i in range(len(grid) - 1):
        assert up[i + 1] <= up[i] * (1 + 1e-12)
        assert lo[i + 1] <= up[i]
    for c in certs.values():
        assert max(0.0, -math.expm1(c.epsilon)) <= c.lower_bound <= c.delta <= 1.0
    # convexity in x = e^eps at the midpoint x_m = (x_0 + x_2) / 2 of consecutive grid points
    for e0, e2 in zip(grid[:-1], grid[1:], strict=True):
        em = math.log((math.exp(e0) + math.exp(e2)) / 2)
        mid = acct.certificate(epsilon=em, method="cf").lower_bound
        assert mid <= (certs[e0].delta + certs[e2].delta) / 2 * (1 + 1e-12)


def test_eps_of_delta_non_increasing():
    acct = _acct((SubsampledGaussian(sigma=1.5, sample_rate=0.05), 300), (Gaussian(sigma=20.0), 5))
    eps = [acct.epsilon(d, method="cf") for d in (1e-12, 1e-8, 1e-5, 1e-3, 0.1, 0.5)]
    assert all(a > b for a, b in zip(eps, eps[1:], strict=False)), eps
    assert eps[-1] >= 0.0


# -------------------------------------------------------------------------------- composition algebra

def test_empty_accountant():
    """No composition: delta(eps) = (1 - e^eps)_+ (0 for eps >= 0), eps(delta) = 0, for every route."""
    acct = PrivacyAccountant()
    for e in (0.0, 0.3, 5.0):
        for m in ("auto", "cf", "rdp"):
            assert acct.delta(e, method=m) == 0.0
    for d in (1e-10, 0.5):
        for m in ("auto", "cf", "rdp"):
            assert acct.epsilon(d, method=m) == 0.0
    assert PrivacyAccountant().compose(Gaussian(sigma=1.0), times=0).epsilon(1e-5) == 0.0
    for e in (-2.0, -0.1, 0.0, 1.0):
        b = contour.delta_bounds(contour.ComposedPLD([], "remove"), e)
        exact = float(mp.mpf(0) if e >= 0 else -mp.expm1(mp.mpf(e)))
        assert b.lower <= exact <= b.upper  # the float value of 1 - e^eps, rounded outwards
        assert b.upper - b.lower <= 4e-15 * exact


def test_order_of_composition_irrelevant():
    parts = [(SubsampledGaussian(sigma=1.2, sample_rate=0.05), 100), (Gaussian(sigma=8.0), 3),
             (RandomizedResponse(epsilon=0.2, k=3), 4)]
    results = []
    for perm in itertools.permutations(parts):
        c = _acct(*perm).certificate(delta=1e-6, method="cf")
        results.append((c.epsilon, c.lower_bound))
    e0, l0 = results[0]
    for e, lb in results[1:]:
        assert e == pytest.approx(e0, rel=1e-10)
        assert lb <= e0 and l0 <= e


def test_k_copies_equal_multiplicity():
    """Composing k copies one by one == one entry with multiplicity k."""
    m = SubsampledGaussian(sigma=1.0, sample_rate=0.03)
    a = PrivacyAccountant()
    for _ in range(40):
        a.compose(m)
    b = PrivacyAccountant().compose(m, times=40)
    assert a.certificate(delta=1e-5, method="cf") == b.certificate(delta=1e-5, method="cf")


def test_symmetric_pairs_add_equals_remove():
    for parts in ([(Gaussian(sigma=1.3), 5)], [(Laplace(scale=5.0), 100)],
                  [(RandomizedResponse(epsilon=0.5), 6)]):
        for eps in (0.2, 1.0):
            r = _bounds(parts, eps, "remove")
            a = _bounds(parts, eps, "add")
            assert a.estimate == pytest.approx(r.estimate, rel=1e-9, abs=1e-15)


def test_swap_identity_subsampled_gaussian():
    """delta_add(eps) = 1 - e^eps + e^eps delta_rem(-eps) (the add/remove duality of dominating pairs, Zhu,
    Dong & Wang 2022), sigma = 1, gamma = .1,
    k = 20; reference values: delta_rem(1) = 0.0228490838, delta_add(1) = 0.0007716535."""
    parts = [(SubsampledGaussian(sigma=1.0, sample_rate=0.1), 20)]
    assert _bounds(parts, 1.0, "remove").estimate == pytest.approx(0.0228490838, rel=1e-8)
    assert _bounds(parts, 1.0, "add").estimate == pytest.approx(0.0007716535, rel=1e-7)
    for eps in (0.1, 0.4, 1.0):
        add = _bounds(parts, eps, "add")
        rem = _bounds(parts, -eps, "remove")
        lo = -math.expm1(eps) + math.exp(eps) * rem.lower
        hi = -math.expm1(eps) + math.exp(eps) * rem.upper
        assert add.lower <= hi + 1e-15 and lo <= add.upper + 1e-15  # the two rigorous brackets intersect
        assert add.estimate == pytest.approx(-math.expm1(eps) + math.exp(eps) * rem.estimate, abs=1e-10)


def test_subsampling_limits_and_monotonicity():
    """q = 0 gives (1 - e^eps)_+; delta is monotone in q, in k and in sigma (post-processing and
    composition)."""
    eps = 0.5

    def d(sigma, q, k):
        return PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=k).delta(eps, method="cf")

    assert PrivacyAccountant().step(sigma=1.0, sample_rate=0.0, steps=100).delta(eps, method="cf") == 0.0
    assert d(1.0, 0.01, 100) < d(1.0, 0.02, 100) < d(1.0, 0.05, 100)
    assert d(1.0, 0.02, 50) < d(1.0, 0.02, 100) < d(1.0, 0.02, 400)
    assert d(2.0, 0.02, 100) < d(1.5, 0.02, 100) < d(1.0, 0.02, 100)


# -------------------------------------------------------------------------------- numerics

@pytest.mark.parametrize("parts,eps", [
    ([(Gaussian(sigma=1.0), 10)], 3.0),
    ([(SubsampledGaussian(sigma=1.1, sample_rate=0.01), 1000)], 1.0),
    ([(Gaussian(sigma=4.0), 2), (RandomizedResponse(epsilon=0.4), 3)], 0.7),
], ids=["gauss", "subsampled", "gm+rr"])
def test_independent_of_numerical_parameters(parts, eps):
    """Different rtol => different line / step / truncation; the rigorous brackets must overlap and the
    estimates agree within the looser bracket (Cauchy: the result does not depend on the line c)."""
    a = _bounds(parts, eps, rtol=1e-5)
    b = _bounds(parts, eps, rtol=1e-11)
    assert a.lower <= b.upper and b.lower <= a.upper
    assert a.lower <= b.estimate <= a.upper


def test_independent_of_line_c():
    """Explicitly vary the integration line c (contour internals): brackets from c/2, c and 2c all contain the
    exact Gaussian value."""
    mu = math.sqrt(10)
    pld = contour.ComposedPLD([(Gaussian(sigma=1.0), 10)], "remove")
    eps = 3.0
    truth = ref.gaussian_delta(eps, mu)
    c0 = pld.saddle(eps)
    log_target = math.log(truth) + math.log(1e-9)
    for c in (0.5 * c0, c0, 2.0 * c0):
        plan = contour._plan(pld, c, eps, log_target)
        assert plan is not None
        grid = contour._Grid(pld, plan)
        est, lo, up, _ = contour._combine(pld, grid, eps)
        assert lo <= truth * (1 + ULP) and truth <= up * (1 + ULP), (c, lo, truth, up)
        assert est == pytest.approx(truth, rel=1e-7)


def test_independent_of_line_c_with_atoms():
    """Same as above for a mechanism with atoms next to eps: every admissible line gives a valid bracket."""
    from mechanisms import SubsampledLaplace

    pld = contour.ComposedPLD([(SubsampledLaplace(scale=1.0, sample_rate=0.1), 1)], "remove")
    eps = 0.15
    truth = _sub_laplace_remove_delta(eps, 0.1, 1.0)
    log_target = math.log(truth) + math.log(1e-8) - math.log(8.0)
    for c in (200.0, 936.0, 1500.0):
        plan = contour._plan(pld, c, eps, log_target)
        assert plan is not None
        est, lo, up, _ = contour._combine(pld, contour._Grid(pld, plan), eps)
        assert lo <= truth <= up, (c, lo, truth, up)


@pytest.mark.parametrize("parts", [
    [(Gaussian(sigma=2.0), 30)],
    [(SubsampledGaussian(sigma=1.0, sample_rate=0.02), 800)],
    [(Laplace(scale=5.0), 100)],
    [(RandomizedResponse(epsilon=0.3), 40), (Gaussian(sigma=6.0), 10)],
    [(ApproxDP(0.1, 1e-6), 20), (SubsampledGaussian(sigma=1.5, sample_rate=0.05), 100)],
], ids=["gauss", "subsampled", "laplace", "rr+gauss", "approx+subsampled"])
def test_cf_never_worse_than_rdp(parts):
    """delta_cf(eps) <= delta_rdp-improved(eps) and eps_cf(delta) <= eps_rdp(delta) (the cf route is tight,
    the RDP conversion an upper bound)."""
    acct = _acct(*parts)
    for eps in (0.5, 2.0):
        assert acct.delta(eps, method="cf") <= acct.delta(eps, method="rdp") * (1 + 1e-12)
    assert acct.epsilon(1e-6, method="cf") <= acct.epsilon(1e-6, method="rdp")


def test_spec02_fig31_and_table_d_numbers():
    """Reference values: eps_GM(0.3) = 0.276617 (sigma = 1), eps_RR(0.3) = 0.471750 (p = e/(1+e));
    (delta = 1e-10) sigma = 30, k = 400: 4.2161859486 and sigma = 60, k = 1120: 3.4826741351."""
    assert PrivacyAccountant().compose(Gaussian(sigma=1.0)).epsilon(0.3, method="cf") == pytest.approx(
        0.276617, abs=1e-6)
    rr = PrivacyAccountant().compose(RandomizedResponse(epsilon=1.0)).epsilon(0.3, method="cf")
    p = math.e / (1 + math.e)
    assert rr == pytest.approx(math.log((p - 0.3) / (1 - p)), rel=1e-10)
    assert rr == pytest.approx(0.471750, abs=1e-6)
    for sigma, k, val in ((30.0, 400, 4.2161859486), (60.0, 1120, 3.4826741351)):
        e = _acct((Gaussian(sigma=sigma), k)).epsilon(1e-10, method="cf")
        assert e == pytest.approx(val, abs=2e-10)


# ------------------------------------------------------------------ scalar solvers of the cf route
def test_bounded_minimiser_finds_the_minimum():
    """Brent's method on unimodal functions: within xatol of the true minimiser (also at a bound)."""
    from conversions.contour import _minimize_bounded

    cases = [(lambda x: (x - 1.3) ** 2, -5.0, 5.0, 1.3),
             (lambda x: math.cosh(x - 0.2) + 0.1 * x, -10.0, 10.0, 0.2 + math.asinh(-0.1)),
             (lambda x: abs(x + 2.0) ** 1.5, -4.0, 3.0, -2.0),
             (lambda x: math.exp(x), -3.0, 2.0, -3.0)]  # minimum at the lower bound
    for f, a, b, want in cases:
        for tol in (1e-2, 1e-4, 1e-8):
            x, fx = _minimize_bounded(f, a, b, tol)
            assert abs(x - want) <= 2 * tol + 1e-7 * abs(want), (want, x, tol)
            assert fx == f(x)


def test_root_bracket_returns_a_certified_upper_end():
    """For non-increasing f with f(a) > 0 >= f(b): f(result) <= 0 and f > 0 just below it, also for
    kinks, jumps and the -800 'delta = 0' sentinel past a support end."""
    from conversions.contour import _root_bracket

    root = 1.2345678901
    fns = [lambda x: root - x,
           lambda x: math.log(max(1e-300, 2.0 - x)) - math.log(2.0 - root),           # log-type
           lambda x: (root - x) * (3.0 if x < root else 0.1),                          # kink
           lambda x: (-800.0 if x >= 1.5 else math.log(1.5 - x) - math.log(1.5 - root))]  # sentinel
    for f in fns:
        tol = 1e-11
        b = _root_bracket(f, 0.0, f(0.0), 4.0, f(4.0), tol)
        assert f(b) <= 0.0
        assert f(b - tol) > 0.0 or b - tol <= root - 1e-12
        assert b - root <= tol * 1.01


def test_atoms_too_many_to_enumerate_stay_in_the_integrand(monkeypatch):
    """Regression: when the composed atoms cannot be enumerated (more than atoms.MAX_ATOMS distinct
    losses), their MGF must not be subtracted from the contour's integrand (their delta would be lost:
    a certified delta of 1.7e-13 where the truth is ~1).  With the cap lowered, the certified bracket
    still contains the exact value obtained by enumeration."""
    from conversions import atoms as atoms_mod

    entries = [(RandomizedResponse(epsilon=1.0), 30), (RandomizedResponse(epsilon=0.7317), 30)]
    exact = {eps: contour.delta_bounds(contour.ComposedPLD(entries), eps) for eps in (5.0, 20.0)}
    # enumerated: exact up to the atoms' masses' rounding (~3e-15 each, carried through 60 steps)
    assert all(e.upper - e.lower <= 1e-11 for e in exact.values())
    monkeypatch.setattr(atoms_mod, "MAX_ATOMS", 100)
    pld = contour.ComposedPLD(entries)
    assert not pld.atoms_exact and not pld.has_atoms
    for eps, ex in exact.items():
        got = contour.delta_bounds(pld, eps)
        assert got.lower <= ex.upper and ex.lower <= got.upper, (eps, got, ex)


def _rr_mix_delta_ref(eps: float, k1: int, e1: float, k2: int, e2: float) -> float:
    """delta(eps) of k1 x RR(e1) composed with k2 x RR(e2), remove direction, by the direct 2-D sum over
    the binomial counts (K, J) of +e1 and +e2 losses: no atom merging, no sorting, no contour; the
    masses by scipy's binomial pmf, the sum in float64 with the terms in log space."""
    from scipy.stats import binom

    p1, p2 = 1.0 / (1.0 + math.exp(-e1)), 1.0 / (1.0 + math.exp(-e2))
    kk, jj = np.arange(k1 + 1), np.arange(k2 + 1)
    l1, l2 = (2.0 * kk - k1) * e1, (2.0 * jj - k2) * e2
    lw1, lw2 = binom.logpmf(kk, k1, p1), binom.logpmf(jj, k2, p2)
    loss = l1[:, None] + l2[None, :]
    gap = np.maximum(loss - eps, 0.0)  # (atoms at or below eps contribute nothing)
    with np.errstate(divide="ignore"):
        lt = np.where(loss > eps, lw1[:, None] + lw2[None, :] + np.log(-np.expm1(-gap)), -np.inf)
    m = float(np.max(lt))
    return math.exp(m) * float(np.sum(np.exp(lt - m)))


def test_issue_rr_lattice_row_is_enumerated_exactly():
    """The issue's row 1000 x RR(1) + 1000 x RR(0.7317) (two incommensurate lattices, 1.0e6 distinct
    losses, more than the old 4e5 enumeration cap): the composed atoms are enumerated (``MAX_ATOMS``),
    so delta(10) and delta at the 1e-5 tail come out exact (relative width <= 1e-9) and contain the direct
    2-D binomial sum; the eps query's bracket brackets the root of that reference."""
    entries = [(RandomizedResponse(epsilon=1.0), 1000), (RandomizedResponse(epsilon=0.7317), 1000)]
    pld = contour.ComposedPLD(entries)
    assert pld.atoms_exact and pld.purely_atomic and pld.atoms.size > 400_000
    for eps in (10.0, 866.0):
        ref = _rr_mix_delta_ref(eps, 1000, 1.0, 1000, 0.7317)
        got = contour.delta_bounds(pld, eps)
        assert got.lower <= ref * (1 + 1e-10) and ref * (1 - 1e-10) <= got.upper, (eps, got, ref)
        assert got.upper - got.lower <= 1e-9 * got.upper
    acct = PrivacyAccountant()
    acct.compose(RandomizedResponse(epsilon=1.0), times=1000)
    acct.compose(RandomizedResponse(epsilon=0.7317), times=1000)
    c = acct.certificate(delta=1e-5)
    assert c.epsilon - c.lower_bound <= 1e-9 * c.epsilon
    assert _rr_mix_delta_ref(c.lower_bound * (1 - 1e-9), 1000, 1.0, 1000, 0.7317) >= 1e-5
    assert _rr_mix_delta_ref(c.epsilon * (1 + 1e-9), 1000, 1.0, 1000, 0.7317) <= 1e-5


def test_trapezoid_phase_rotation_stays_within_its_rounding_allowance():
    """trapezoid_sum rotates e^{-i h eps} between exact anchors: against phases computed node by node
    (numpy), the sum differs by less than the allowance of the certified error: 4 PHASE_ANCHOR ulps
    per node plus the phase rounding 4 u (t_max |eps| + c |eps|) both computations share."""
    from conversions._kernels import PHASE_ANCHOR, trapezoid_sum

    rng = np.random.default_rng(7)
    for n, h, eps, c in [(1025, 1.064, 3.65, 5.6), (513, 0.53, 9.38, 2.8), (17, 40.6, 4.99, 215.0),
                         (200_001, 0.0037, 31.0, 0.5), (4097, 2.9, 1e3, 40.0)]:
        t = h * np.arange(n)
        rr, ri = rng.normal(size=n), rng.normal(size=n)
        s, sa = trapezoid_sum(t, rr, ri, c, eps)
        w = (rr + 1j * ri) * np.exp(-1j * (t * eps)) / ((c + 1j * t) * (c + 1 + 1j * t))
        w[0] *= 0.5
        u = 1.12e-16
        allowance = 4 * PHASE_ANCHOR * u + 4 * u * (t[-1] * abs(eps) + c * abs(eps))
        assert abs(s - float(np.sum(w.real))) <= allowance * float(np.sum(np.abs(w)))
        assert sa == pytest.approx(float(np.sum(np.abs(w))), rel=1e-12)


@pytest.mark.parametrize("w0,w1", [(0.5, 0.5 * math.exp(-1.0)), (0.5, 0.5 * math.exp(-0.05)),
                                   (0.5, 0.5 * math.exp(-0.01)), (0.7, 0.3)])
@pytest.mark.parametrize("k", [10, 2048, 2049, 5000, 30_000])
def test_binomial_power_window_equals_full_enumeration(w0, w1, k):
    """Two-atom powers: for large k only the window of atoms above the pruning floor is built; it must
    hold exactly the atoms the full binomial enumeration keeps (masses to 1e-9 in log), and the
    dropped-mass bound must cover every pruned atom."""
    from scipy.special import gammaln

    from conversions import atoms as atoms_mod

    base = atoms_mod.single(np.array([1.0, -1.0]), np.array([w0, w1]))
    got = atoms_mod.power(base, k)
    j = np.arange(k + 1, dtype=float)
    logw = (gammaln(k + 1.0) - gammaln(j + 1.0) - gammaln(k - j + 1.0)
            + j * math.log(w0) + (k - j) * math.log(w1))
    keep = logw >= atoms_mod.LOG_PRUNE
    want_l, want_w = (j - (k - j))[keep], logw[keep]
    order = np.argsort(got.losses)
    assert got.size == int(keep.sum())
    np.testing.assert_allclose(got.losses[order], np.sort(want_l), atol=1e-9)
    np.testing.assert_allclose(got.logw[order], want_w[np.argsort(want_l)], atol=1e-9, rtol=0)
    pruned = np.exp(logw[~keep]).sum() if (~keep).any() else 0.0
    assert got.dropped_mass >= pruned


def test_plug_in_cost_hints_with_the_older_signatures_are_accepted():
    """Cost hints written before ``c`` and ``direction`` existed (``mgf_cost(t_max)``,
    ``mgf_cost(t_max, c)``, ``envelope_cost(c)``) still drive the contour's work meter; the bracket
    contains the mu-GDP closed form (Dong, Roth & Su 2022, Cor. 2; mpmath)."""
    from dataclasses import dataclass

    from mechanisms.base import cost_hint, envelope_cost

    @dataclass(frozen=True)
    class OneArg(Gaussian):
        def mgf_cost(self, t_max):
            return 1.0

        def envelope_cost(self, c):
            return 64.0

    @dataclass(frozen=True)
    class TwoArgs(Gaussian):
        def mgf_cost(self, t_max, c):
            return 1.0 + 0.0 * c

    mu, eps = math.sqrt(3.0), 1.0
    e = mp.mpf(eps)
    truth = float(mp.ncdf(-e / mu + mu / 2) - mp.exp(e) * mp.ncdf(-e / mu - mu / 2))
    for cls in (OneArg, TwoArgs):
        m = cls(sigma=1.0)
        assert cost_hint(m)(10.0, 2.0, "add") == 1.0 and envelope_cost(m, 2.0, "add") == 64.0
        for direction in ("remove", "add"):
            b = contour.delta_bounds(contour.ComposedPLD([(m, 3)], direction), eps)
            assert b.lower <= truth * (1 + ULP) and truth * (1 - ULP) <= b.upper
