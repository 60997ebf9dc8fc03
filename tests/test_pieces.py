"""Closed-form low-order terms of exponential-piece compositions (``conversions.pieces``).

References: mpmath quadrature of the defining integrals, the exact k-fold Laplace profile of
``tests/reference.py`` (piecewise-polynomial convolution in decimal arithmetic), and the contour route
with the closed forms switched off (the numerical inversion they replace).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import reference as ref

from conversions import pieces
from conversions._kernels import _quad_integral, _segment_integral
from conversions.contour import ComposedPLD, delta_bounds, epsilon_bounds
from mechanisms import Gaussian, Laplace, RandomizedResponse, SubsampledLaplace
from mechanisms._numerics import discrete_log_mgf, exp_pieces_log_mgf

GL_X, GL_W = np.polynomial.legendre.leggauss(8)


def _lam(kind, anchor, s):
    return anchor if kind == 0 else (s - anchor if kind == 1 else anchor - s)


@pytest.mark.parametrize("kind", [0, 1, 2])
@pytest.mark.parametrize("r", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("lo,hi", [(-0.05, 0.05), (-0.4, 0.5), (0.2, 3.0), (-6.0, 4.0)])
def test_segment_integral_matches_mpmath(kind, r, lo, hi):
    """int_lo^hi e^{r (s - hi)} lam(s) (1 - e^{theta - s})_+ ds for theta below, inside, near the top."""
    anchor = {0: 1.7, 1: lo, 2: hi}[kind]
    width = hi - lo
    thetas = [lo - 3.0, lo - 1e-3, lo, lo + 0.1 * width, lo + 0.5 * width, hi - 0.6, hi - 1e-2,
              hi - 1e-6, hi, hi + 1.0]
    with mp.workdps(40):
        for theta in thetas:
            a = max(lo, theta)
            if a >= hi:
                exact = mp.mpf(0)
            else:
                def f(s, th=theta):
                    return mp.e ** (r * (s - hi)) * _lam(kind, mp.mpf(anchor), s) * -mp.expm1(th - s)

                exact = mp.quad(f, [a, (a + hi) / 2, hi])
            got = _segment_integral(kind, anchor, r, lo, hi, theta, GL_X, GL_W)
            assert got >= 0.0
            assert abs(got - float(exact)) <= 1e-13 * float(exact) + 1e-300, (theta, got, exact)


@pytest.mark.parametrize("r", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("lo,hi", [(-0.05, 0.05), (-0.4, 0.5), (1.0, 1.9), (0.2, 3.0), (-30.0, 10.0)])
def test_quadratic_segment_integral_matches_mpmath(r, lo, hi):
    """int_lo^hi e^{r (s - hi)} Q(s) (1 - e^{theta - s})_+ ds, Q in Bernstein form (order-3 terms)."""
    width = hi - lo
    thetas = [lo - 3.0, lo - 1e-3, lo, lo + 0.1 * width, lo + 0.5 * width, hi - 0.6, hi - 1e-2,
              hi - 1e-6, hi, hi + 1.0]
    for b in [(1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0), (0.3, 2.0, 0.7)]:
        with mp.workdps(40):
            wm = mp.mpf(hi) - mp.mpf(lo)
            for theta in thetas:
                a = max(lo, theta)
                if a >= hi:
                    exact = mp.mpf(0)
                else:
                    def f(x, th=theta, b=b, wm=wm):
                        v = (x - lo) / wm
                        q = b[0] * (1 - v) ** 2 + 2 * b[1] * v * (1 - v) + b[2] * v ** 2
                        return mp.e ** (r * (x - hi)) * q * -mp.expm1(th - x)

                    exact = mp.quad(f, [a, (a + hi) / 2, hi])
                got = _quad_integral(*b, r, lo, hi, theta, GL_X, GL_W)
                assert got >= 0.0
                assert abs(got - float(exact)) <= 1e-13 * float(exact) + 1e-300, (b, theta, got, exact)


def test_triple_segments_are_the_convolution():
    """MGF of the quadratic segments = product of three pieces' MGFs; Bernstein coefficients >= 0."""
    ps = [pieces.check_pieces(Laplace(scale=b).pld_exp_pieces(), "p") for b in (1.0, 0.4, 2.5)]
    for p1, p2, p3 in [(ps[0], ps[0], ps[0]), (ps[0], ps[1], ps[2]), (ps[1], ps[1], ps[2])]:
        q = pieces.triple_segments(pieces.pair_segments(p1, p2), p3)
        assert q is not None and q.lo.size >= 3
        assert np.all(q.b0 >= 0) and np.all(q.b1 >= 0) and np.all(q.b2 >= 0)
        assert np.all(q.hi > q.lo)
        for s in (0.3, 1.0 + 2j, 0.5 - 7j):
            with mp.workdps(30):
                tot = mp.mpc(0)
                for i in range(q.lo.size):
                    lo, hi = float(q.lo[i]), float(q.hi[i])
                    wm = mp.mpf(hi) - mp.mpf(lo)

                    def f(x, i=i, lo=lo, wm=wm, q=q, s=s):
                        v = (x - lo) / wm
                        qq = (float(q.b0[i]) * (1 - v) ** 2 + 2 * float(q.b1[i]) * v * (1 - v)
                              + float(q.b2[i]) * v ** 2)
                        return mp.e ** (float(q.logw[i]) + (float(q.rate[i]) + s) * x) * qq

                    tot += mp.quad(f, [lo, hi])
            prod = np.exp(sum(exp_pieces_log_mgf(np.array([s]), *p) for p in (p1, p2, p3)))[0]
            assert abs(complex(tot) - prod) <= 1e-13 * abs(prod)


def test_laplace_pieces_are_its_continuous_part():
    """exp-piece MGF = log_mgf minus the atoms, at complex s on several lines (both are closed forms)."""
    for b in (0.3, 1.0, 7.0):
        m = Laplace(scale=b)
        s = np.array([0.0, 0.5 + 3j, 2.0 - 40j, 10.0 + 0.1j, 0.01 + 500j])
        total = np.exp(m.log_mgf(s))
        atoms = np.exp(discrete_log_mgf(s, *m.pld_atoms()))
        cont = np.exp(exp_pieces_log_mgf(s, *m.pld_exp_pieces()))
        np.testing.assert_allclose(atoms + cont, total, rtol=1e-13)
        # the piece mass is the continuous mass (1 - e^{-a}) / 2
        assert cont[0].real == pytest.approx(-math.expm1(-m.a) / 2, rel=1e-14)


def test_pair_segments_are_the_convolution():
    """MGF of the trapezoid segments = product of the two pieces' MGFs (different widths, same rate)."""
    p1 = pieces.check_pieces(Laplace(scale=1.0).pld_exp_pieces(), "p1")
    p2 = pieces.check_pieces(Laplace(scale=0.4).pld_exp_pieces(), "p2")
    segs = pieces.pair_segments(p1, p2)
    assert segs is not None and segs.kind.tolist() == [1, 0, 2]
    for s in (0.3, 1.0 + 2j, 0.5 - 7j):
        with mp.workdps(30):
            tot = mp.mpc(0)
            for q in range(segs.kind.size):
                def f(u, q=q, s=s):
                    return (mp.e ** (float(segs.logw[q]) + (float(segs.rate[q]) + s) * u)
                            * _lam(int(segs.kind[q]), float(segs.anchor[q]), u))
                tot += mp.quad(f, [float(segs.lo[q]), float(segs.hi[q])])
        prod = np.exp(exp_pieces_log_mgf(np.array([s]), *p1) + exp_pieces_log_mgf(np.array([s]), *p2))[0]
        assert abs(complex(tot) - prod) <= 1e-13 * abs(prod)


def test_unequal_rates_have_no_pair_segments():
    p1 = (np.array([0.0]), np.array([1.0]), np.array([0.0]), np.array([0.5]))
    p2 = (np.array([0.0]), np.array([1.0]), np.array([0.0]), np.array([0.25]))
    assert pieces.pair_segments(p1, p2) is None


@pytest.mark.parametrize("bad", [
    (np.array([1.0]), np.array([0.0]), np.array([0.0]), np.array([0.5])),   # lo > hi
    (np.array([0.0]), np.array([1.0]), np.array([0.0]), np.array([1.5])),   # rate > 1
    (np.array([0.0]), np.array([np.inf]), np.array([0.0]), np.array([0.5])),  # infinite end
    (np.array([0.0, 1.0]), np.array([1.0]), np.array([0.0]), np.array([0.5])),  # ragged
])
def test_invalid_pieces_raise(bad):
    with pytest.raises(ValueError, match="pieces"):
        pieces.check_pieces(bad, "mech")


@pytest.mark.parametrize("b,k", [(1.0, 1), (2.0, 1), (1.0, 2), (0.5, 2), (1.0, 3), (0.3, 3), (4.0, 3)])
def test_up_to_three_fold_laplace_is_closed_form_and_exact(b, k):
    """k <= 3: no contour at all; delta(eps) equals the exact profile to ~1e-13 at every eps."""
    pld = ComposedPLD([(Laplace(scale=b), k)])
    assert pld.purely_atomic and pld.closed_order == 3
    a = 1.0 / b
    for eps in np.linspace(-k * a - 0.5, k * a + 0.1, 23):
        exact = ref.laplace_delta(float(eps), b, k)
        got = delta_bounds(pld, float(eps))
        assert got.lower <= exact <= got.upper, (eps, got, exact)
        assert got.upper - got.lower <= 1e-12 * max(exact, 1e-300) + 1e-300


@pytest.mark.parametrize("b,k,eps", [(1.0, 4, 1.0), (1.0, 10, 4.0), (2.0, 10, 4.9), (5.0, 100, 3.0),
                                     (0.7, 30, 12.0)])
def test_laplace_with_closed_terms_matches_exact(b, k, eps):
    """k >= 4: atoms + closed orders 1-3 + contour for the rest; bracket contains the exact profile."""
    exact = ref.laplace_delta(eps, b, k)
    got = delta_bounds(ComposedPLD([(Laplace(scale=b), k)]), eps)
    assert got.lower <= exact <= got.upper, (got, exact)
    assert got.upper - got.lower <= 1e-8 * exact


def _without_pieces(monkeypatch):
    monkeypatch.setattr(Laplace, "pld_exp_pieces", lambda self, direction="remove": None)


@pytest.mark.parametrize("entries,eps", [
    ([(Laplace(scale=1.0), 3), (Laplace(scale=0.4), 2)], 3.0),       # two widths, same rate
    ([(Laplace(scale=2.0), 4), (RandomizedResponse(epsilon=0.7), 5)], 1.5),  # with a lattice factor
    ([(Laplace(scale=1.0), 5), (SubsampledLaplace(scale=1.0, sample_rate=0.5), 2)], 2.0),  # non-piece
    ([(Laplace(scale=1.0), 5), (Gaussian(sigma=3.0), 2)], 2.0),       # no atoms: nothing closed-form
])
def test_mixtures_agree_with_plain_inversion(entries, eps, monkeypatch):
    """The closed-form route and the plain contour route (closed forms off) give overlapping brackets."""
    fast = delta_bounds(ComposedPLD(entries), eps)
    _without_pieces(monkeypatch)
    plain_pld = ComposedPLD(entries)
    assert not plain_pld.closed_terms
    plain = delta_bounds(plain_pld, eps)
    assert fast.lower <= plain.upper and plain.lower <= fast.upper, (fast, plain)
    # the closed forms never widen the bracket (with a work-capped factor both are wide)
    assert fast.upper - fast.lower <= 1.01 * (plain.upper - plain.lower) + 1e-15
    assert abs(fast.estimate - plain.estimate) <= max(1e-7 * plain.estimate, plain.upper - plain.lower)


@pytest.mark.parametrize("entries", [
    [(Laplace(scale=2.0), 30)],
    [(Laplace(scale=1.0), 3), (Laplace(scale=0.5), 4), (RandomizedResponse(epsilon=0.3), 2)],
    [(Laplace(scale=1.0), 6), (SubsampledLaplace(scale=1.0, sample_rate=0.3), 1)],
])
def test_remainder_envelope_bounds_the_remainder(entries):
    """|M - A - F|(c + it') <= exp(log_env_r(c, t)) for t' >= t (F: the closed-form terms)."""
    pld = ComposedPLD(entries)
    assert pld.closed_terms
    # orders 1-3 closed-form when at most two distinct piece mechanisms (the first two ledgers)
    assert pld.closed_order == (3 if len(pld._closed_set) <= pieces.MAX_THIRD_ORDER_FACTORS else 2)
    for c in (0.3, 1.0, 4.0):
        for t in (0.5, 5.0, 60.0, 900.0):
            tp = t + np.array([0.0, 0.37, 1.9, 13.0, 101.0])
            s = c + 1j * tp
            r = np.exp(pld.log_mgf(s)[0]) - np.exp(pld.log_atoms_mgf(s)) - pld.closed_mgf_scaled(s)
            bound = math.exp(pld.log_env_r(c, t))
            assert np.all(np.abs(r) <= bound * (1 + 1e-9) + 1e-12 * math.exp(pld.log_mgf_real(c)))


def test_epsilon_bracket_contains_exact_laplace():
    """eps(delta) for k = 7: the certified upper bound is >= the exact eps, the lower bound <= it."""
    b, k, delta = 1.5, 7, 1e-6
    res = epsilon_bounds(ComposedPLD([(Laplace(scale=b), k)]), delta)
    assert ref.laplace_delta(res.upper, b, k) <= delta * (1 + 1e-12)
    assert ref.laplace_delta(res.lower, b, k) >= delta * (1 - 1e-12)
    assert res.upper - res.lower <= 1e-8 * res.upper


def test_nan_never_leaves_the_closed_forms_or_the_tv_cap(monkeypatch):
    """Soundness guards: a NaN in the closed-form sum raises (never a silent NaN bound), and a plug-in's
    total variation outside [0, 1] (which would cap delta below the truth) is rejected."""
    pld = ComposedPLD([(Laplace(scale=1.0), 5)])
    with pytest.raises(FloatingPointError, match="NaN"):
        pieces.log_delta(pld.closed_terms, float("nan"))
    for bad in (-0.1, 1.5, float("nan")):
        monkeypatch.setattr(Laplace, "total_variation", lambda self, direction="remove", _b=bad: _b)
        with pytest.raises(ValueError, match="total_variation"):
            ComposedPLD([(Laplace(scale=1.0), 5)])


def test_negligible_exact_parts_are_bounded_not_enumerated():
    """Laplace(b = 0.5) x 100 at delta ~ 1e-4: the atoms (mass e^-57) and the closed-form terms (mass
    <= e^-43) are below 1e-14 of the contour part, so they are bounded by their mass instead of
    enumerated and integrated; the certified bracket still contains the exact profile."""
    pld = ComposedPLD([(Laplace(scale=0.5), 100)])
    eps = 155.8433369844271  # eps(1e-4) of this composition
    exact = ref.laplace_delta(eps, 0.5, 100)
    got = delta_bounds(pld, eps)
    assert got.lower <= exact <= got.upper, (got, exact)
    assert got.upper - got.lower <= 1e-8 * exact
    assert pld.closed_terms and all("atoms" not in t.__dict__ for t in pld.closed_terms)  # never built


def test_term_whose_atoms_cannot_be_enumerated_is_bounded_by_its_mass():
    """If a closed-form term's atoms cannot be enumerated, its delta (already subtracted from the
    contour's integrand) is bounded by its exact mass on the upper side: still a valid bracket."""
    import dataclasses

    b, k, eps = 2.0, 10, 2.0
    exact = ref.laplace_delta(eps, b, k)
    normal = delta_bounds(ComposedPLD([(Laplace(scale=b), k)]), eps)
    pld = ComposedPLD([(Laplace(scale=b), k)])
    first = dataclasses.replace(pld.closed_terms[0], atoms_fn=lambda: None)
    pld.closed_terms = [first] + pld.closed_terms[1:]
    got = delta_bounds(pld, eps)
    assert got.lower <= exact <= got.upper, (got, exact)
    # the term's delta left the lower side and at most its mass joined the upper side
    mass = math.exp(first.log_bound)
    assert got.lower < normal.lower and normal.upper < got.upper <= normal.upper + mass * (1 + 1e-9)


@pytest.mark.parametrize("entries", [
    [(Laplace(scale=2.0), 30)],
    [(Laplace(scale=1.0), 3), (Laplace(scale=0.5), 4), (RandomizedResponse(epsilon=0.3), 2)],
    [(Laplace(scale=1.0), 6), (SubsampledLaplace(scale=1.0, sample_rate=0.3), 1)],
    [(Laplace(scale=1.0), 5), (Gaussian(sigma=3.0), 2)],
])
def test_fused_grid_equals_the_plain_remainder(entries):
    """The contour grid's one-pass kernel (grid_assemble) gives the remainder M - A - F of the plain
    numpy evaluation (sum of log-MGFs, atom MGF, closed terms summed one by one), scaled by e^-shift."""
    from conversions.contour import _Grid, _Plan

    pld = ComposedPLD(entries)
    for c in (0.5, 2.0):
        grid = _Grid(pld, _Plan(c, 0.37, c + 1.0, 0.37 * 200))
        s = c + 1j * grid.t
        plain = np.exp(pld.log_mgf(s)[0] - grid.shift)
        if pld.has_atoms:
            plain = plain - np.exp(pld.log_atoms_mgf(s) - grid.shift)
        if pld.closed_terms:
            plain = plain - pld.closed_mgf_scaled(s, grid.shift)
        got = grid.r_re + 1j * grid.r_im
        # rounding of the differences is relative to the terms (each |term| <= M(c) = e^shift)
        np.testing.assert_allclose(got, plain, rtol=0, atol=1e-12)


def test_nan_log_mgf_on_the_contour_raises(monkeypatch):
    """A NaN (or inf) log-MGF value at a contour node must stop the query with FloatingPointError; the
    fused grid kernel must not turn it into a finite (possibly too small) delta."""
    entries = [(Laplace(scale=1.0), 5), (Gaussian(sigma=3.0), 2)]  # the Gaussian goes through log_mgf
    orig = Gaussian.log_mgf
    for bad in (float("nan"), float("inf")):
        def poisoned(self, s, direction="remove", _bad=bad):
            out = np.array(orig(self, s, direction), dtype=complex)
            if out.size > 3:
                out[3] = complex(_bad, 0.0)
            return out

        monkeypatch.setattr(Gaussian, "log_mgf", poisoned)
        with pytest.raises(FloatingPointError):
            delta_bounds(ComposedPLD(entries), 2.0)
        with pytest.raises(FloatingPointError):
            epsilon_bounds(ComposedPLD(entries), 1e-5)
