"""Discretised-PLD route (conversions.pld) and the ``pld_cell_masses`` hook, against independent references.

References: mpmath closed forms (Gaussian profile, normal CDFs of the inverse-image cells), exact
enumeration (randomized response, (eps, delta) blocks), the exact k-fold Laplace profile of
``tests.reference``, and mpmath quadrature for the subsampled Gaussian (one and two steps).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from conversions import pld, pld_fft, pld_grid
from mechanisms.gaussian import Gaussian
from mechanisms.laplace import Laplace
from mechanisms.poisson_subsampled import PoissonSubsampled
from mechanisms.randomized_response import ApproxDP, PureDP, RandomizedResponse
from mechanisms.subsampled import SubsampledGaussian
from tests import reference as R

# ----------------------------------------------------------------------------- mpmath helpers


def _ncdf_diff(a, b):
    """P(a < Z <= b) for Z ~ N(0, 1) in mpmath, on the accurate side (no cancellation in tails)."""
    if a >= 0:
        return mp.ncdf(-a) - mp.ncdf(-b)
    return mp.ncdf(b) - mp.ncdf(a)


def _check_cells(m, err, ref):
    m = np.asarray(m)
    err = np.broadcast_to(np.asarray(err, dtype=float), m.shape) if np.ndim(err) else None
    tot_dev = mp.mpf(0)
    for i, (a, b) in enumerate(zip(m, ref, strict=True)):
        dev = abs(mp.mpf(float(a)) - b)
        tot_dev += dev
        if err is not None:
            assert dev <= err[i], (i, float(a), float(b), float(err[i]))
            # the error bounds are honest but not absurd: relative 1e-9 or the subnormal floor
            assert err[i] <= 1e-9 * float(b) + 1e-299, (i, float(err[i]), float(b))
    return tot_dev


# ----------------------------------------------------------------------------- cell masses


@pytest.mark.parametrize("q,sigma,sens", [(0.01, 1.1, 1.0), (0.001, 0.5, 1.0), (0.3, 2.0, 3.0),
                                          (0.9, 0.7, 1.0)])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_subsampled_gaussian_cells_match_mpmath(q, sigma, sens, direction):
    mp.mp.dps = 80
    m = SubsampledGaussian(sigma, q, sens)
    fine = np.linspace(-0.02, 0.02, 41)  # the near-atomic band around log(1 - q) / -log(1 - q)
    wide = np.linspace(0.02, 12.0, 25)[1:]  # up to tails ~1e-40 and below
    edges = np.concatenate([fine, wide]) if direction == "remove" else np.concatenate([-wide[::-1], fine])
    masses, err = m.pld_cell_masses(edges, direction)
    assert masses.shape == (edges.size + 1,)
    ref = R.subsampled_gaussian_cells(edges, q, sigma, direction, sens, dps=80, as_mpf=True)[0]
    _check_cells(masses, err, ref)
    assert abs(masses.sum() - 1.0) < 1e-13


@pytest.mark.parametrize("z0", [-6.0, -0.3, 0.0, 2.0, 5.0, 12.0])
def test_narrow_cells_have_errors_relative_to_their_own_mass(z0):
    """Cells far narrower than the tail's scale (the fine grids of few-step queries): the mass and its
    bound come from the Hermite series, so the bound is a few ulps of the cell's own mass, not of the
    tail probability (a CDF difference there has ~1e-13 / (z h) relative error: ~1e-9 at h = 2e-5)."""
    from mechanisms._cells import normal_cells

    mp.mp.dps = 60
    x = z0 + np.arange(0.0, 0.02, 2e-5)  # the edges themselves: exact floats (no inverse-map rounding)
    m, e = np.zeros(x.size + 1), np.zeros(x.size + 1)
    normal_cells(x, m, e, 1.0)
    for i in range(1, x.size):  # the finite cells
        a, b = mp.mpf(float(x[i - 1])), mp.mpf(float(x[i]))
        ref = mp.ncdf(-a) - mp.ncdf(-b) if a > 0 else mp.ncdf(b) - mp.ncdf(a)
        dev = abs(mp.mpf(float(m[i])) - ref)
        assert dev <= e[i], (i, float(m[i]), float(ref), float(e[i]))
        assert e[i] <= 1e-13 * float(ref) + 1e-299, (i, float(e[i]), float(ref))


def test_narrow_mass_series_against_mpmath():
    """``_narrow_mass`` (the Hermite series of a narrow N(0, 1) cell) on random cells, z up to 37:
    within its own bound, and that bound within 1e-12 of the mass."""
    from mechanisms._cells import NARROW_RHO, _narrow_mass

    mp.mp.dps = 50
    rng = np.random.default_rng(7)
    for _ in range(400):
        mid = rng.uniform(-37.0, 37.0) * rng.choice([1.0, 0.1, 0.01])
        hh = rng.uniform(0.0, NARROW_RHO) / (abs(mid) + 1.0)
        a, b = mid - hh, mid + hh
        got, err = _narrow_mass(a, b)
        a_, b_ = mp.mpf(a), mp.mpf(b)
        ref = mp.ncdf(b_) - mp.ncdf(a_) if mid < 0 else mp.ncdf(-a_) - mp.ncdf(-b_)
        if ref < 1e-290:
            continue
        assert abs(mp.mpf(got) - ref) <= err, (a, b, got, ref, err)
        assert err <= 1e-12 * ref


def test_subsampled_gaussian_cells_edge_cases():
    edges = np.array([-0.5, 0.0, 0.25, 1.0])
    m0, e0 = SubsampledGaussian(1.0, 0.0).pld_cell_masses(edges)  # L = 0 a.s.: the atom sits on an edge
    assert m0.tolist() == [0.0, 1.0, 0.0, 0.0, 0.0] and np.all(np.asarray(e0) <= 1e-15)
    # q = 1 is the Gaussian mechanism
    m1, _ = SubsampledGaussian(0.8, 1.0, 2.0).pld_cell_masses(edges, "add")
    mg, _ = Gaussian(0.8, 2.0).pld_cell_masses(edges)
    assert np.allclose(m1, mg, rtol=1e-14, atol=0)
    # every mass below the lower end of the remove loss log(1 - q) is zero; an edge at the rounded floor
    # may lie above the true one (tests/test_cell_rounding_soundness.py): its cell's mass, tiny here, is
    # covered by its error bound
    m2, e2 = SubsampledGaussian(1.0, 0.1).pld_cell_masses(np.array([-0.2, math.log1p(-0.1)]))
    assert m2[0] == 0.0 and m2[1] <= e2[1] < 1e-250 and abs(m2[2] - 1.0) <= e2[2] + 1e-15


def test_gaussian_cells_match_mpmath_including_tiny_tails():
    mp.mp.dps = 60
    g = Gaussian(1.3, 0.7)
    mu = mp.mpf(0.7) / mp.mpf(1.3)
    edges = np.linspace(-12.0, 12.0, 241)  # z up to ~22: masses down to ~1e-108
    m, err = g.pld_cell_masses(edges)
    zs = [-mp.inf] + [(mp.mpf(float(e)) - mu**2 / 2) / mu for e in edges] + [mp.inf]
    ref = [_ncdf_diff(a, b) for a, b in zip(zs[:-1], zs[1:], strict=True)]
    _check_cells(m, err, ref)
    assert min(float(r) for r in ref) < 1e-100


def test_laplace_cells_match_quadrature_and_atoms():
    mp.mp.dps = 40
    a = 0.8  # sensitivity / scale
    lap = Laplace(1.25, 1.0)
    edges = np.array([-1.0, -0.8, -0.3, 0.0, 0.1, 0.79, 0.8, 2.0])  # atoms at -0.8 and 0.8 sit on edges
    m, err = lap.pld_cell_masses(edges)

    def dens(l):
        return mp.exp((l - a) / 2) / 4

    A = mp.mpf(a)
    ref = []
    ext = [-mp.inf] + [mp.mpf(float(e)) for e in edges] + [mp.inf]
    for lo, hi in zip(ext[:-1], ext[1:], strict=True):
        c_lo, c_hi = max(lo, -A), min(hi, A)
        v = mp.quad(dens, [c_lo, c_hi]) if c_hi > c_lo else mp.mpf(0)
        if lo < -A <= hi:
            v += mp.exp(-A) / 2
        if lo < A <= hi:
            v += mp.mpf(1) / 2
        ref.append(v)
    _check_cells(m, err, ref)
    assert m[1] > mp.exp(-A) / 2 * 0.999  # the atom -a (on an edge) is in (-1, -0.8]
    assert m[6] > 0.5  # the atom a = 0.8 (on an edge) is in (0.79, 0.8]
    assert abs(m.sum() - 1.0) < 1e-14


@pytest.mark.parametrize("mech,atoms", [
    (RandomizedResponse(1.0, 3),
     [(1.0, math.e / (math.e + 2)), (-1.0, 1 / (math.e + 2)), (0.0, 1 / (math.e + 2))]),
    (PureDP(0.5), [(0.5, 1 / (1 + math.exp(-0.5))), (-0.5, 1 / (1 + math.exp(0.5)))]),
    (ApproxDP(0.5, 1e-3),
     [(0.5, (1 - 1e-3) / (1 + math.exp(-0.5))), (-0.5, (1 - 1e-3) / (1 + math.exp(0.5)))]),
])
def test_atomic_cells_exact(mech, atoms):
    edges = np.array([-0.5, 0.0, 0.2, 0.5])
    m, err = mech.pld_cell_masses(edges)
    ref = np.zeros(5)
    for loss, w in atoms:
        ref[int(np.searchsorted(edges, loss, side="left"))] += w  # on an edge: the cell below
    assert np.allclose(m, ref, rtol=1e-15, atol=0)
    assert abs(m.sum() - (1 - mech.infinite_loss_mass)) < 1e-15


def test_cells_bad_input_and_unavailable():
    g = Gaussian(1.0)
    with pytest.raises(ValueError, match="sorted"):
        g.pld_cell_masses(np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="length"):
        g.pld_cell_masses(np.array([]))
    with pytest.raises(ValueError, match="finite"):
        g.pld_cell_masses(np.array([0.0, np.inf]))
    with pytest.raises(ValueError, match="direction"):
        g.pld_cell_masses(np.array([0.0]), "both")
    assert PoissonSubsampled(Gaussian(1.0), 0.1).pld_cell_masses(np.array([0.0])) is None


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_probe_range_zooms_into_a_narrow_loss_law(direction):
    """q = 1e-6: every loss lies within ~2e-3 of 0, i.e. within a few cells of the first 4097-point
    probe grid (cells 4.9e-4 wide).  The range is probed again inside, so its end at the law's hard edge
    (remove: L > log(1 - q); add: L < -log(1 - q)) sits within a fine cell of that edge instead of up to
    4.9e-4 away (empty cells, T times as many in the composed support); and it still obeys its rules,
    checked by mpmath: P(L > hi) <= tgt_hi, and the bulk (median) above lo."""
    q, theta, tgt_lo, tgt_hi = 1e-6, 150.0, 1e-11, 1e-15
    m = SubsampledGaussian(1.0, q)
    lo, hi = pld_grid._probe_range(m, direction, theta, tgt_lo, tgt_hi)
    edge = math.log1p(-q)
    if direction == "remove":
        assert edge - 1e-6 <= lo <= edge
    else:
        assert -edge <= hi <= -edge + 1e-6
    above = R.subsampled_gaussian_cells([hi], q, 1.0, direction, dps=mp.mp.dps, as_mpf=True)[0][1]
    below = R.subsampled_gaussian_cells([lo], q, 1.0, direction, dps=mp.mp.dps, as_mpf=True)[0][0]
    assert above <= tgt_hi and below <= 0.5


# ----------------------------------------------------------------------------- route: Gaussian


@pytest.mark.parametrize("sigma,k,eps", [(1.0, 1, 0.5), (2.0, 1, 3.0), (0.7, 1, 4.0), (3.0, 10, 1.0),
                                         (5.0, 100, 1.5), (20.0, 1000, 1.0), (1.0, 4, 8.0)])
def test_gaussian_delta_bracket_contains_closed_form(sigma, k, eps):
    b = pld.pld_delta_bounds([(Gaussian(sigma), k)], eps)
    ref = R.gaussian_delta(eps, math.sqrt(k) / sigma)
    assert b.lower <= ref <= b.upper, (b.lower, ref, b.upper)
    # width T Delta in loss: large T needs more points than the cap (the contour route's regime)
    assert b.upper - b.lower <= (5e-2 if b.details["capped"] else 2e-3) * ref, (b.lower, ref, b.upper)


@pytest.mark.parametrize("sigma,k,delta", [(1.0, 1, 1e-5), (2.0, 10, 1e-10), (0.8, 1, 1e-12),
                                           (10.0, 1000, 1e-6), (4.0, 3, 1e-12)])
def test_gaussian_epsilon_bracket_contains_closed_form(sigma, k, delta):
    b = pld.pld_epsilon_bounds([(Gaussian(sigma), k)], delta)
    ref = R.gaussian_epsilon(delta, math.sqrt(k) / sigma)
    assert b.lower <= ref <= b.upper, (b.lower, ref, b.upper)
    tol = 5e-2 if b.details["capped"] else 1e-3
    assert b.upper - b.lower <= max(tol * b.upper, 1e-4) * 1.001, (b.lower, b.upper, b.details)


def test_gaussian_mixed_ledger_is_one_gaussian():
    # N(0, 2^2) once and N(0, 4^2) five times: mu^2 = 1/4 + 5/16
    ents = [(Gaussian(2.0), 1), (Gaussian(4.0), 5)]
    mu = math.sqrt(0.25 + 5 / 16)
    for eps in (0.3, 2.0):
        b = pld.pld_delta_bounds(ents, eps)
        ref = R.gaussian_delta(eps, mu)
        assert b.lower <= ref <= b.upper
        assert b.upper - b.lower <= 2e-3 * ref


# ----------------------------------------------------------------------------- route: lattices, Laplace


@pytest.mark.parametrize("eps0,k,eps", [(0.5, 1, 0.2), (0.5, 7, 1.2), (0.1, 50, 0.35), (1.0, 20, 3.0)])
def test_randomized_response_bracket_contains_enumeration(eps0, k, eps):
    ref = R.rr_delta_enumerate(eps, eps0, k)
    for mech in (RandomizedResponse(eps0), PureDP(eps0)):
        b = pld.pld_delta_bounds([(mech, k)], eps)
        assert b.lower <= ref <= b.upper, (b.lower, ref, b.upper)


def test_approx_dp_bracket_contains_kov():
    for eps0, d0, k, eps in [(0.3, 1e-6, 10, 2.0), (1.0, 1e-4, 3, 1.5)]:
        ref = R.kov_delta(eps, eps0, d0, k)
        b = pld.pld_delta_bounds([(ApproxDP(eps0, d0), k)], eps)
        assert b.lower <= ref <= b.upper, (b.lower, ref, b.upper)
        e = pld.pld_epsilon_bounds([(ApproxDP(eps0, d0), k)], 2 * ref)
        assert R.kov_delta(e.upper, eps0, d0, k) <= 2 * ref


@pytest.mark.parametrize("scale,eps", [(1.0, 0.3), (0.5, 1.0), (2.0, 0.0)])
def test_laplace_one_use_closed_form(scale, eps):
    # delta = 1 - e^{(eps - a)/2} on [0, a] (docs/derivations/laplace.md), checked by mpmath quadrature of
    # the loss measure
    a = 1.0 / scale
    ref = R.laplace_delta_single(eps, scale)
    quad = mp.mpf(0.5) * (1 - mp.exp(eps - a)) + mp.quad(
        lambda l: (1 - mp.exp(eps - l)) * mp.exp((l - a) / 2) / 4, [eps, a])
    assert abs(quad - ref) < 1e-15
    b = pld.pld_delta_bounds([(Laplace(scale), 1)], eps)
    assert b.lower <= ref <= b.upper and b.upper - b.lower <= 2e-3 * ref


def test_laplace_composed_exact_profile():
    ref = R.laplace_delta(2.0, 1.0, 5)
    b = pld.pld_delta_bounds([(Laplace(1.0), 5)], 2.0)
    assert b.lower <= ref <= b.upper and b.upper - b.lower <= 2e-3 * ref


# ----------------------------------------------------------------------------- route: subsampled Gaussian


def _sg_delta2(eps, q, sigma, direction):
    """Two-step profile: delta_2(eps) = E_{x1 ~ P}[delta_1(eps - L(x1))] by mpmath quadrature in x1,
    with the exact one-step profile delta_1 of tests.reference (both directions)."""
    mp.mp.dps = 20
    s2 = mp.mpf(sigma) ** 2
    qq = mp.mpf(q)

    def ell(x):
        return mp.log(1 - qq + qq * mp.exp((2 * x - 1) / (2 * s2)))

    def d1(e):
        return R.subsampled_gaussian_delta_single(e, q, sigma, direction, dps=20, as_mpf=True)

    def npdf(x, m=0):
        return mp.npdf(x, m, mp.sqrt(s2))

    if direction == "remove":
        def f(x):
            return ((1 - qq) * npdf(x) + qq * npdf(x, 1)) * d1(eps - ell(x))
    else:
        def f(x):
            return npdf(x) * d1(eps + ell(x))
    pts = [-mp.inf, -10 * mp.sqrt(s2), -2, 0, 0.5, 1, 2, 4, 10 * mp.sqrt(s2) + 1, mp.inf]
    # delta_1 has a kink where its argument crosses the support's end, log(1 - q) (remove) or -log(1 - q)
    # (add): split there, or the quadrature errs by ~1e-7 relative (q = 0.05, sigma = 0.9, eps = 0.4:
    # 1.97975958e-3 without the split, 1.97975941890e-3 with it and by the MGF-inversion reference)
    e_kink = eps - mp.log(1 - qq) if direction == "remove" else -mp.log(1 - qq) - eps
    if e_kink > mp.log(1 - qq):  # ell(x) = e_kink has a root
        pts.append((mp.log((mp.exp(e_kink) - (1 - qq)) / qq) * 2 * s2 + 1) / 2)
    return mp.quad(f, sorted(pts))


@pytest.mark.parametrize("direction,q,sigma,eps", [
    ("remove", 0.01, 1.1, 0.1), ("remove", 0.2, 0.8, 1.0), ("remove", 0.001, 0.5, 1.5),
    # the add loss is below -log(1 - q): eps inside its support
    ("add", 0.01, 1.1, 0.005), ("add", 0.2, 0.8, 0.1), ("add", 0.001, 0.5, 0.0005), ("add", 0.5, 1.0, 0.3)])
def test_subsampled_gaussian_one_step(direction, q, sigma, eps):
    ref = R.subsampled_gaussian_delta_single(eps, q, sigma, direction)
    b = pld.pld_delta_bounds([(SubsampledGaussian(sigma, q), 1)], eps, direction)
    assert b.lower <= ref <= b.upper, (b.lower, ref, b.upper)
    assert b.upper - b.lower <= 2e-3 * ref, (b.lower, ref, b.upper)


def test_subsampled_gaussian_sensitivity_scales_sigma():
    ref = R.subsampled_gaussian_delta_single(0.5, 0.05, 0.6)  # sigma / sensitivity = 0.6
    b = pld.pld_delta_bounds([(SubsampledGaussian(1.8, 0.05, 3.0), 1)], 0.5)
    assert b.lower <= ref <= b.upper


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_subsampled_gaussian_two_steps_quadrature(direction):
    q, sigma = 0.05, 0.9
    eps = 0.4 if direction == "remove" else 0.05
    ref = _sg_delta2(eps, q, sigma, direction)
    assert ref > 1e-8
    b = pld.pld_delta_bounds([(SubsampledGaussian(sigma, q), 2)], eps, direction)
    assert b.lower <= ref <= b.upper, (b.lower, ref, b.upper)
    assert b.upper - b.lower <= 2e-3 * ref


@pytest.mark.parametrize("direction,q,sigma,eps", [("remove", 0.05, 0.9, 0.4), ("add", 0.05, 0.9, 0.05),
                                                   ("remove", 0.01, 1.1, 0.1)])
def test_two_steps_upper_bound_is_second_order(direction, q, sigma, eps):
    # the cells split between their ends by their Q-mass (connect the dots): the upper end is within
    # 2e-6 relative of the quadrature (cells moved up whole: 1.5e-4 .. 4.8e-4 at the default rtol)
    ref = _sg_delta2(eps, q, sigma, direction)
    b = pld.pld_delta_bounds([(SubsampledGaussian(sigma, q), 2)], eps, direction)
    assert ref <= b.upper <= ref * (1 + 2e-6), (float(ref), b.upper)
    assert b.lower <= ref


def test_two_steps_bracket_holds_the_quadrature_on_a_seeded_sample():
    """Soundness of the split cells (upper end) and of the lower end on 12 seeded subsampled-Gaussian
    settings, two steps, both directions, eps up to 2 (beyond the add loss's support too): the mpmath
    quadrature of the two-step profile lies in every bracket (60 of 60 in a longer run)."""
    rng = np.random.default_rng(2026)
    for _ in range(12):
        q = float(10 ** rng.uniform(-4, -0.5))
        sigma = float(rng.uniform(0.4, 3.0))
        direction = str(rng.choice(["remove", "add"]))
        eps = float(rng.choice([rng.uniform(0, 1) * q * 3 / sigma, rng.uniform(0, 2)]))
        ref = _sg_delta2(eps, q, sigma, direction)
        b = pld.pld_delta_bounds([(SubsampledGaussian(sigma, q), 2)], eps, direction)
        assert b.lower <= ref <= b.upper, (q, sigma, direction, eps, b.lower, float(ref), b.upper)


def test_whole_cell_lower_end_is_sound_and_higher(monkeypatch):
    """At few steps the lower end also comes from the whole cells moved up (a second composition on the
    same lattice): it holds the quadrature, is never below the split's own lower end, and here is higher
    (the split's is ~T Delta below the truth, the whole cells' ~T Delta / 2)."""
    from conversions import pld_eval

    q, sigma, eps = 0.05, 0.9, 0.4
    ref = _sg_delta2(eps, q, sigma, "remove")
    m = SubsampledGaussian(sigma, q)
    both = pld.pld_delta_bounds([(m, 2)], eps)
    monkeypatch.setattr(pld_eval, "_whole_cells", lambda *a: None)
    split_only = pld.pld_delta_bounds([(m, 2)], eps)
    assert split_only.lower < both.lower <= ref <= both.upper == split_only.upper


def _sg_x_cells(edges, q, sigma, direction):
    """(P, Q) masses of the loss cells of the subsampled Gaussian by mpmath (x-space normal CDFs)."""
    mu, qq = mp.mpf(1) / sigma, mp.mpf(q)
    l1q = mp.log1p(-qq)

    def xinv(l_):
        return (mp.log(mp.expm1(l_ - l1q)) + l1q - mp.log(qq)) / mu + mu / 2

    def mix(a, b):
        return (1 - qq) * (mp.ncdf(b) - mp.ncdf(a)) + qq * (mp.ncdf(b - mu) - mp.ncdf(a - mu))

    def std(a, b):
        return mp.ncdf(b) - mp.ncdf(a)

    out = []
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        if direction == "remove":
            xa, xb = (xinv(mp.mpf(v)) if v > l1q else -mp.inf for v in (a, b))
            out.append((mix(xa, xb), std(xa, xb)))
        elif -a <= l1q:  # L = -ell(x) in (a, b]  <=>  ell(x) in [-b, -a); ell > log(1 - q)
            out.append((mp.mpf(0), mp.mpf(0)))
        else:
            xa = xinv(-mp.mpf(b)) if -b > l1q else -mp.inf
            xb = xinv(-mp.mpf(a))
            out.append((std(xa, xb), mix(xa, xb)))
    return out


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_q_masses_and_dots_split_match_mpmath(direction):
    from conversions.pld_grid import _split_from_q

    mp.mp.dps = 30
    q, sigma, step = 1e-3, 0.8, 2.0**-14
    m = SubsampledGaussian(sigma, q)
    lo = -0.0009 if direction == "remove" else -2.0
    edges = np.arange(math.floor(lo / step), math.floor(lo / step) + 40, dtype=float) * step
    edges = np.concatenate([edges, np.arange(8192, 8202, dtype=float) * step])  # L near 0.5
    pm, perr, qm, qerr = m.pld_cells_and_q_masses(edges, direction)
    assert np.array_equal(qm, m.pld_cell_q_masses(edges, direction)[0])
    pi, pi_lo = _split_from_q(pm, perr, qm, qerr, edges, step)
    ref = _sg_x_cells(edges, q, sigma, direction)
    for i in range(1, edges.size):
        if edges[i] - edges[i - 1] != step:
            continue
        p_ref, q_ref = ref[i - 1]
        assert abs(pm[i] - p_ref) <= perr[i] and abs(qm[i] - q_ref) <= qerr[i], i
        if p_ref > 0:
            # the exact split: E_P[1 - e^{a - L} | cell] / (1 - e^{-Delta}) = (1 - e^a Q / P) / (...)
            a = mp.mpf(edges[i - 1])
            pi_ref = (1 - mp.e**a * q_ref / p_ref) / -mp.expm1(-mp.mpf(step))
            # (slack: the masses' float error over the cell's 1 - e^{-Delta}; 2e-5 near L = 0.5)
            assert pi_lo[i] <= pi_ref <= pi[i] <= pi_ref + 1e-4, (i, pi_lo[i], pi[i], float(pi_ref))
            assert pi[i] - pi_lo[i] <= 2e-4
    assert pi[0] == 1.0


def _eps_single(delta, q, sigma):
    """eps(delta) of one subsampled-Gaussian step (remove) by mpmath bisection on the exact profile."""
    lo, hi = mp.mpf(0), mp.mpf(5)
    for _ in range(80):
        mid = (lo + hi) / 2
        if R.subsampled_gaussian_delta_single(mid, q, sigma, "remove", dps=30, as_mpf=True) > delta:
            lo = mid
        else:
            hi = mid
    return float((lo + hi) / 2)


# (q, sigma, T, reference eps at delta = 1e-5, add/remove max = remove); near-atomic reference table
# (6 digits; the T = 1 row is recomputed exactly here)
TABLE = [(0.01, 1.1, 1, None), (0.01, 1.1, 10, 0.271736), (0.001, 1.0, 100, 0.055165),
         (0.001, 0.5, 100, 2.108645)]


@pytest.mark.parametrize("q,sigma,T,ref", TABLE)
def test_near_atomic_table(q, sigma, T, ref):
    if ref is None:
        ref = _eps_single(1e-5, q, sigma)
        assert abs(ref - 0.142291) < 1e-6
        tol = 1e-12
    else:
        tol = 1e-6  # the table's rounding
    up = pld.pld_epsilon_bounds([(SubsampledGaussian(sigma, q), T)], 1e-5, "remove")
    add = pld.pld_epsilon_bounds([(SubsampledGaussian(sigma, q), T)], 1e-5, "add")
    assert add.upper < up.lower  # remove dominates add for the Gaussian
    assert up.lower - tol <= ref <= up.upper + tol, (up.lower, ref, up.upper)
    width = up.upper - up.lower
    if up.details["capped"]:
        assert width <= 1e-2 * up.upper
    else:
        assert width <= max(1e-3 * up.upper, 1e-4) * 1.001, (up.lower, up.upper, up.details)


def test_certified_eps_consistent_in_T():
    m = SubsampledGaussian(1.1, 0.01)
    lowers, uppers = [], []
    for t in range(1, 21):
        b = pld.pld_epsilon_bounds([(m, t)], 1e-5, rtol=3e-3)
        lowers.append(b.lower)
        uppers.append(b.upper)
    # the true eps is non-decreasing in T: every certified upper bound is above all earlier lower bounds
    run_max = np.maximum.accumulate(lowers)
    assert np.all(run_max <= np.array(uppers))
    # and the certified values themselves increase here (the brackets are far narrower than the steps)
    assert np.all(np.diff(uppers) > 0) and np.all(np.diff(lowers) > 0)


def test_tiny_deltas_keep_relative_accuracy():
    g = Gaussian(3.0)
    for eps in (8.0, 12.0):
        ref = R.gaussian_delta(eps, 1 / 3.0 * math.sqrt(5))
        b = pld.pld_delta_bounds([(g, 5)], eps)
        assert ref < 1e-6
        assert b.lower <= ref <= b.upper and b.upper - b.lower <= 2e-3 * ref


# ----------------------------------------------------------------------------- API, bad input, cost


def test_bad_input():
    g = [(Gaussian(1.0), 1)]
    with pytest.raises(ValueError, match="delta"):
        pld.pld_epsilon_bounds(g, 0.0)
    with pytest.raises(ValueError, match="delta"):
        pld.pld_epsilon_bounds(g, 1.5)
    with pytest.raises(ValueError, match="eps"):
        pld.pld_delta_bounds(g, math.nan)
    with pytest.raises(ValueError, match="rtol"):
        pld.pld_delta_bounds(g, 1.0, rtol=0.0)
    with pytest.raises(ValueError, match="max_points"):
        pld.pld_delta_bounds(g, 1.0, max_points=10)
    with pytest.raises(ValueError, match="direction"):
        pld.pld_delta_bounds(g, 1.0, "sideways")
    with pytest.raises(ValueError, match="count"):
        pld.pld_delta_bounds([(Gaussian(1.0), -1)], 1.0)
    with pytest.raises(TypeError):
        pld.pld_delta_bounds([("gaussian", 1)], 1.0)
    with pytest.raises(ValueError, match="pld_cell_masses"):
        pld.pld_delta_bounds([(PoissonSubsampled(Gaussian(1.0), 0.1), 1)], 1.0)
    for bad in (math.nan, -1.0, True, "0"):
        with pytest.raises(ValueError, match="stop_below"):
            pld.pld_epsilon_bounds(g, 1e-5, stop_below=bad)
    # past MAX_STEPS the FFT powers' rounding bound (1 + sqrt5 u)^(T - 1) - 1 alone is over 0.1 %: refused
    # at once (at 1e15 steps it took ~1 s of grids to fail with a ZeroDivisionError)
    huge = [(SubsampledGaussian(1.1, 0.01), pld.MAX_STEPS + 1)]
    assert math.expm1(pld.MAX_STEPS * math.log1p(math.sqrt(5.0) * 2.0**-53)) > 1e-3
    with pytest.raises(ValueError, match="at most"):
        pld.pld_epsilon_bounds(huge, 1e-5)
    assert pld.pld_cost(huge) == math.inf


def _cf_bracket(q, sigma, T, delta):
    """The contour route's certified bracket (exact-grade here: ~1e-5 relative), an independent method."""
    from accountant import PrivacyAccountant

    c = PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=T).certificate(delta=delta, method="cf")
    return c.lower_bound, c.epsilon


def test_refines_past_the_absolute_target_while_cheap():
    """q = 1e-3, sigma = 5, T = 10, delta = 1e-5 (eps ~ 0.0012): the absolute target 1e-4 is met by a
    bracket 4 % wide; one more pass (predicted small: ``CHEAP_FFT`` / ``CHEAP_CELLS``) narrows it to
    ~1e-3 relative.  Both brackets must hold the contour route's certified bracket (~1e-5 wide)."""
    ents = [(SubsampledGaussian(5.0, 1e-3), 10)]
    r = pld.pld_epsilon_bounds(ents, 1e-5, "remove")
    lo, up = _cf_bracket(1e-3, 5.0, 10, 1e-5)
    assert r.lower <= up and lo <= r.upper
    assert r.upper - r.lower <= 2e-3 * r.upper
    # without room for the cheap pass the bracket stops at the absolute target, and is wider
    old = pld.CHEAP_CELLS
    try:
        pld.CHEAP_CELLS = 0
        wide = pld.pld_epsilon_bounds(ents, 1e-5, "remove")
    finally:
        pld.CHEAP_CELLS = old
    assert r.lower <= up and lo <= r.upper and wide.upper - wide.lower > 5 * (r.upper - r.lower)
    assert wide.upper - wide.lower <= 1e-4


def test_stop_below_ends_refinement_of_a_direction_that_cannot_matter():
    """q = 1e-4, sigma = 0.8, T = 100: the add direction's eps (~0.003) is below the remove direction's
    certified lower bound (~0.0073).  Given that bound (``stop_below``) the add query stops at its first
    bracket whose upper end is below it: fewer passes, still certified (it holds the full query's
    bracket), and the worst-direction answer is unchanged."""
    ents = [(SubsampledGaussian(0.8, 1e-4), 100)]
    rem = pld.pld_epsilon_bounds(ents, 1e-5, "remove")
    full = pld.pld_epsilon_bounds(ents, 1e-5, "add")
    short = pld.pld_epsilon_bounds(ents, 1e-5, "add", stop_below=rem.lower)
    assert full.upper <= rem.lower and short.upper <= rem.lower
    assert short.details["passes"] < full.details["passes"]
    assert short.lower <= full.upper and full.lower <= short.upper


@pytest.mark.filterwarnings("error::RuntimeWarning")  # (no inf - inf noise at extreme tilts)
def test_extreme_eps_gives_a_valid_bracket_not_an_overflow():
    """q = 8e-4, sigma = 3.26, T = 286 (a DP-SGD setting) at eps from 0.5 to 800: delta falls below
    1e-100, the tilt is huge and the discretisation's error terms leave float range.  Each query returns
    a certified bracket (trivial [0, 1] where the error terms are infinite; no OverflowError, no NaN),
    and where the contour route is tight its bracket lies inside ours."""
    from accountant import PrivacyAccountant

    ents = [(SubsampledGaussian(3.26, 8e-4), 286)]
    acct = PrivacyAccountant().step(sigma=3.26, sample_rate=8e-4, steps=286)
    for eps in (0.5, 1.0, 3.0, 8.0, 800.0):
        b = pld.pld_delta_bounds(ents, eps)
        assert 0.0 <= b.lower <= b.upper <= 1.0, (eps, b.lower, b.upper)
        if eps <= 3.0:
            c = acct.certificate(epsilon=eps, method="cf")
            assert b.lower <= c.delta and c.delta <= b.upper, (eps, b.lower, b.upper, c.delta)
            assert b.upper < 1e-30
    assert pld.pld_delta_bounds(ents, 800.0).upper == 1.0


@pytest.mark.filterwarnings("error::RuntimeWarning")  # (no inf - inf noise at extreme tilts)
def test_few_step_brackets_meet_the_contour_at_extreme_eps():
    """q = 0.01, sigma = 1.1, T = 10 (split cells, the whole-cell lower end): from eps = 0 to 800, where
    delta falls below 1e-190 and the error terms leave float range, each direction's bracket is a valid
    [lower, upper] in [0, 1] (no NaN) that intersects the contour route's certified one."""
    from conversions import contour

    ents = [(SubsampledGaussian(1.1, 0.01), 10)]
    for direction in ("remove", "add"):
        for eps in (0.0, 3.0, 40.0, 800.0):
            b = pld.pld_delta_bounds(ents, eps, direction)
            c = contour.delta_bounds(contour.ComposedPLD(ents, direction), eps, 1e-3)
            assert 0.0 <= b.lower <= b.upper <= 1.0, (direction, eps, b.lower, b.upper)
            assert b.lower <= c.upper * (1 + 1e-9) and c.lower <= b.upper * (1 + 1e-9), \
                (direction, eps, b.lower, b.upper, c.lower, c.upper)


def test_scaled_error_terms_never_lose_an_unknown_error():
    """``pld_fft._scaled`` (an error term times its scale, in the composition and in the evaluator): an
    exactly-zero term stays 0 even at an infinite scale, and a term that is not finite (inf, or the NaN of
    inf / inf) becomes inf whatever the scale, also 0 -- never NaN and never 0, which would narrow a
    bracket by an error that is unknown."""
    assert pld_fft._scaled(math.inf, 0.0) == 0.0 and pld_fft._scaled(0.0, 0.0) == 0.0
    for scale in (0.0, 1e-300, 1.0, math.inf):
        assert pld_fft._scaled(scale, math.inf) == math.inf
        assert pld_fft._scaled(scale, math.nan) == math.inf
    assert pld_fft._scaled(2.0, 3.0) == 6.0 and pld_fft._scaled(math.inf, 1e-300) == math.inf


def test_applicable_and_cost():
    assert pld.pld_applicable([(SubsampledGaussian(1.0, 0.01), 10), (Gaussian(2.0), 3)])
    assert not pld.pld_applicable([(PoissonSubsampled(Gaussian(1.0), 0.1), 1)])
    assert not pld.pld_applicable([])
    few = pld.pld_cost([(SubsampledGaussian(1.1, 0.01), 10)])
    many = pld.pld_cost([(SubsampledGaussian(1.1, 0.01), 1000)])
    assert 0 < few < many < math.inf
    assert pld.pld_cost([(PoissonSubsampled(Gaussian(1.0), 0.1), 1)]) == math.inf


def test_capped_query_is_wider_but_certified():
    m = SubsampledGaussian(1.1, 0.01)
    b = pld.pld_epsilon_bounds([(m, 10)], 1e-5, max_points=1 << 12)
    assert b.details["capped"]
    assert b.lower <= 0.271736 + 1e-6 and b.upper >= 0.271736 - 1e-6


def test_empty_ledger():
    assert pld.pld_epsilon_bounds([], 1e-5).upper == 0.0
    b = pld.pld_delta_bounds([], 0.5)
    assert b.lower == b.upper == 0.0


# ----------------------------------------------------------------------------- numerical constants


@pytest.mark.parametrize("n", [1000, 1024, 1080, 2048])
def test_fft_error_constant_holds(n):
    """The FFT rounding constant c_N = 16 u (log2 N + 4) of conversions.pld, checked against a DFT in
    extended precision (numpy longdouble, 64-bit mantissa): ||fft(x) - F x||_2 <= c_N sqrt(N) ||x||_2
    and the same for the inverse transform."""
    import scipy.fft as sfft

    if np.finfo(np.longdouble).eps > 1e-18:
        pytest.skip("no extended precision on this platform")
    rng = np.random.default_rng(n)
    for x in (rng.random(n), np.exp(-0.5 * ((np.arange(n) - n / 3) / (n / 50)) ** 2)):
        x = x / x.sum()
        xl = x.astype(np.longdouble)
        ki = np.arange(n // 2 + 1)
        ji = np.arange(n)
        kj = np.outer(ki, ji) % n  # exact integer reduction: the longdouble angles stay below 2 pi
        two_pi = 2 * np.arccos(np.longdouble(-1))
        ang = -two_pi * kj.astype(np.longdouble) / n
        ref_re = (np.cos(ang) * xl).sum(axis=1)
        ref_im = (np.sin(ang) * xl).sum(axis=1)
        got = sfft.rfft(x)
        err2 = (got.real - ref_re) ** 2 + (got.imag - ref_im) ** 2
        full = float(np.sqrt(2 * err2.sum()))
        c_n = 16 * 2.0**-53 * (math.log2(n) + 4)
        bound = c_n * math.sqrt(n) * float(np.sqrt((x * x).sum()))
        assert full <= bound, (full, bound)
        assert full <= bound / 20  # the factor-2 margin is far from binding in practice
        # inverse: irfft of the computed spectrum vs the exact inverse of that spectrum
        y = sfft.irfft(got, n)
        zl_re = got.real.astype(np.longdouble)
        zl_im = got.imag.astype(np.longdouble)
        w = np.full(n // 2 + 1, 2.0, dtype=np.longdouble)
        w[0] = 1
        if n % 2 == 0:
            w[-1] = 1
        ang2 = two_pi * (np.outer(ji, ki) % n).astype(np.longdouble) / n
        yref = ((np.cos(ang2) * (w * zl_re)) - (np.sin(ang2) * (w * zl_im))).sum(axis=1) / n
        e_inv = float(np.sqrt(((y - yref) ** 2).sum()))
        assert e_inv <= c_n * float(np.sqrt((y * y).sum())) * 1.01


def test_cpow_error_bound():
    """Binary powering z^k against mpmath: relative error <= (1 + sqrt5 u)^{k-1} - 1."""
    mp.mp.dps = 40
    rng = np.random.default_rng(1)
    z = rng.random(200) * np.exp(2j * np.pi * rng.random(200))
    for k in (2, 3, 7, 100, 1001, 65537):
        got = pld_fft._cpow(z, k)
        rel = math.expm1((k - 1) * math.log1p(math.sqrt(5) * 2.0**-53)) * 1.01
        for zi, gi in zip(z[:40], got[:40], strict=True):
            exact = mp.mpc(zi.real, zi.imag) ** k
            if abs(exact) > 1e-290:
                assert abs(mp.mpc(gi.real, gi.imag) - exact) <= rel * abs(exact) * 1.0000001


@pytest.mark.parametrize("direction,eps", [("remove", 6.0), ("remove", 8.0), ("remove", 9.5),
                                           ("add", 0.2)])
def test_subsampled_gaussian_tiny_delta(direction, eps):
    # one step, q = 0.2, sigma = 0.7: delta(eps) from ~1e-7 down to ~1e-14 keeps its relative accuracy
    q, sigma = 0.2, 0.7
    ref = R.subsampled_gaussian_delta_single(eps, q, sigma, direction)
    assert 0 < ref < 2e-3
    b = pld.pld_delta_bounds([(SubsampledGaussian(sigma, q), 1)], eps, direction)
    assert b.lower <= ref <= b.upper, (b.lower, ref, b.upper)
    assert b.upper - b.lower <= 2e-3 * ref
    e = pld.pld_epsilon_bounds([(SubsampledGaussian(sigma, q), 1)], ref, direction)
    assert e.lower <= eps <= e.upper


# ----------------------------------------------------------------------------- subsampled Laplace


def _sl_parts(q, a, direction):
    """mpmath description of the subsampled-Laplace loss under P: atoms and (density on (0,1), l(x))."""
    q, a = mp.mpf(q), mp.mpf(a)

    def ell(x):
        return mp.log(1 - q + q * mp.exp(a * (2 * x - 1)))

    l_lo, l_hi = ell(0), ell(1)
    if direction == "remove":
        atoms = [(l_lo, (1 - q) / 2 + q * mp.exp(-a) / 2), (l_hi, (1 - q) * mp.exp(-a) / 2 + q / 2)]

        def dens(x):
            return (1 - q) * a / 2 * mp.exp(-a * x) + q * a / 2 * mp.exp(-a * (1 - x))

        return atoms, dens, ell
    atoms = [(-l_lo, mp.mpf(1) / 2), (-l_hi, mp.exp(-a) / 2)]
    return atoms, (lambda x: a / 2 * mp.exp(-a * x)), (lambda x: -ell(x))


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_subsampled_laplace_cells_match_mpmath(direction):
    from mechanisms.poisson_subsampled import SubsampledLaplace

    mp.mp.dps = 40
    q, scale, sens = 0.1, 0.8, 1.2
    a = sens / scale
    mech = SubsampledLaplace(scale, q, sens)
    atoms, dens, loss = _sl_parts(q, a, direction)
    edges = np.linspace(-1.5, 1.5, 31)
    m, err = mech.pld_cell_masses(edges, direction)
    # inverse image of each cell in x (loss monotone on (0, 1)) by mpmath root finding, then quadrature
    sgn = 1 if direction == "remove" else -1

    def xof(e):
        lo_l, hi_l = loss(0), loss(1)
        if sgn * (mp.mpf(e) - lo_l) <= 0:
            return mp.mpf(0)
        if sgn * (mp.mpf(e) - hi_l) >= 0:
            return mp.mpf(1)
        return mp.findroot(lambda x: loss(x) - mp.mpf(e), (mp.mpf(0), mp.mpf(1)), solver="bisect")

    xs = [xof(e) for e in edges]
    ref = []
    ext = [-mp.inf] + [mp.mpf(float(e)) for e in edges] + [mp.inf]
    for i, (lo, hi) in enumerate(zip(ext[:-1], ext[1:], strict=True)):
        if sgn > 0:
            u = mp.mpf(0) if i == 0 else xs[i - 1]
            v = mp.mpf(1) if i == len(edges) else xs[i]
        else:
            u = mp.mpf(0) if i == len(edges) else xs[i]
            v = mp.mpf(1) if i == 0 else xs[i - 1]
        val = mp.quad(dens, [u, v]) if v > u else mp.mpf(0)
        val += sum(w for l0, w in atoms if lo < l0 <= hi)
        ref.append(val)
    for i, (mi, ri) in enumerate(zip(m, ref, strict=True)):
        assert abs(mp.mpf(float(mi)) - ri) <= err[i] + 1e-14 * ri, (i, float(mi), float(ri), err[i])
    assert abs(m.sum() - 1.0) < 1e-14


@pytest.mark.parametrize("direction,eps", [("remove", 0.3), ("remove", 0.45), ("add", 0.05)])
def test_subsampled_laplace_one_step(direction, eps):
    from mechanisms.poisson_subsampled import SubsampledLaplace

    mp.mp.dps = 30
    q, scale = 0.2, 0.7
    atoms, dens, loss = _sl_parts(q, 1 / scale, direction)
    e = mp.mpf(eps)
    ref = sum(w * max(mp.mpf(0), 1 - mp.exp(e - l0)) for l0, w in atoms)
    ref += mp.quad(lambda x: dens(x) * max(mp.mpf(0), 1 - mp.exp(e - loss(x))), mp.linspace(0, 1, 9))
    b = pld.pld_delta_bounds([(SubsampledLaplace(scale, q), 1)], eps, direction)
    assert b.lower <= ref <= b.upper, (b.lower, float(ref), b.upper)
    assert b.upper - b.lower <= 2e-3 * ref


def _atomic_mix_delta(eps, parts):
    """delta(eps) of a composition of binary randomized responses (eps0, count) by full enumeration."""
    import itertools

    e = mp.mpf(eps)
    dists = []
    for eps0, cnt in parts:
        p = 1 / (1 + mp.exp(-mp.mpf(eps0)))
        dists += [((mp.mpf(eps0), p), (-mp.mpf(eps0), 1 - p))] * cnt
    tot = mp.mpf(0)
    for combo in itertools.product(*dists):
        loss = sum(c[0] for c in combo)
        w = mp.fprod(c[1] for c in combo)
        if loss > e:
            tot += w * (1 - mp.exp(e - loss))
    return tot


def test_mixed_lattice_ledger_near_the_top_of_the_support():
    # bounded losses (max 4*0.3 + 3*0.5 = 2.7); small delta puts eps close to the top, where the
    # lower bound is not monotone in eps (its error terms grow at small eps)
    mp.mp.dps = 30
    parts = [(0.3, 4), (0.5, 3)]
    ents = [(RandomizedResponse(0.3), 4), (PureDP(0.5), 3)]
    for eps in (0.5, 2.0, 2.5):
        ref = _atomic_mix_delta(eps, parts)
        b = pld.pld_delta_bounds(ents, eps)
        assert b.lower <= ref <= b.upper, (eps, b.lower, ref, b.upper)
    for delta in (1e-3, 1e-5):
        e = pld.pld_epsilon_bounds(ents, delta)
        assert 0 < e.lower <= e.upper < 2.71 and e.upper - e.lower <= 1e-3 * e.upper * 1.001
        assert _atomic_mix_delta(e.upper, parts) <= delta
        assert _atomic_mix_delta(e.lower, parts) > delta


# ----------------------------------------------------------------------------- mean-preserving rounding


def _sg_cond_offset(a, b, q, sigma, direction):
    """E[L - a | a < L <= b] / (b - a) for the subsampled Gaussian by mpmath quadrature in x."""
    mu = 1 / mp.mpf(sigma)
    q = mp.mpf(q)
    l1q = mp.log1p(-q)

    def loss(x):
        v = mp.log(1 - q + q * mp.e ** (mu * x - mu**2 / 2))
        return -v if direction == "add" else v

    def dens(x):
        return mp.npdf(x) if direction == "add" else (1 - q) * mp.npdf(x) + q * mp.npdf(x - mu)

    def xinv(l_):
        return (mp.log(mp.expm1(l_ - l1q)) + l1q - mp.log(q)) / mu + mu / 2

    a, b = mp.mpf(a), mp.mpf(b)
    xa, xb = (xinv(-b), xinv(-a)) if direction == "add" else (xinv(a), xinv(b))
    m = mp.quad(dens, [xa, xb])
    return (mp.quad(lambda x: (loss(x) - a) * dens(x), [xa, xb]) / m) / (b - a)


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("q,sigma", [(1e-3, 0.8), (0.05, 2.0)])
def test_cell_offsets_contain_quadrature(direction, q, sigma):
    mp.mp.dps = 30
    m = SubsampledGaussian(sigma, q)
    l1q = math.log1p(-q)
    if direction == "remove":
        edges = np.array([l1q + 1e-7, l1q + 1e-5, l1q + 2e-5, l1q + 1e-3, l1q + 1.001e-3, 0.3, 0.3 + 2**-20,
                          0.3 + 2**-19, 2.0, 2.0 + 2**-16])
    else:
        edges = np.array([-3.0, -3.0 + 2**-18, -0.4, -0.4 + 2**-20, -0.01, -0.01 + 1e-6, -l1q - 1e-4,
                          -l1q - 0.5e-4])
    lo, hi = m.pld_cell_offsets(edges, direction)
    assert lo.shape == hi.shape == (edges.size + 1,)
    for i in range(1, edges.size):
        ref = float(_sg_cond_offset(edges[i - 1], edges[i], q, sigma, direction))
        assert lo[i] <= ref <= hi[i], (i, lo[i], ref, hi[i])
        d = edges[i] - edges[i - 1]
        if d < 1e-5 and edges[i - 1] - l1q > 1e-4 and direction == "remove":
            assert hi[i] - lo[i] < 0.01, (i, lo[i], hi[i])  # second order in the cell width


def test_gaussian_cell_offsets_contain_quadrature():
    mp.mp.dps = 30
    mu = 0.5
    edges = np.array([-2.0, -2.0 + 2**-20, 0.1, 0.1 + 2**-10, 3.0, 3.25])
    lo, hi = Gaussian(2.0).pld_cell_offsets(edges)
    for i in range(1, edges.size):
        a, b = ((mp.mpf(e) - mp.mpf(mu) ** 2 / 2) / mu for e in (edges[i - 1], edges[i]))
        m = mp.ncdf(b) - mp.ncdf(a)
        ref = float((mp.quad(lambda z, a=a: (z - a) * mp.npdf(z), [a, b]) / m) / (b - a))
        assert lo[i] <= ref <= hi[i], (i, lo[i], ref, hi[i])
    assert hi[1] - lo[1] < 1e-9  # tiny cell: nearly uniform inside


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_split_bias_bound_contains_the_exact_mean_bias(direction):
    # the Chernoff lower end needs E[Y - L] of the split from above: per cell pi' Delta - E[L - a | cell]
    # (E[L - a | cell] by mpmath quadrature), averaged over cells 1..n-1 with their masses
    from conversions.pld_grid import _make_step, _split_from_q

    mp.mp.dps = 30
    q, sigma, step = 1e-3, 0.8, 2.0**-9
    m = SubsampledGaussian(sigma, q)
    lo, hi = (math.log1p(-q), 0.06) if direction == "remove" else (-0.06, -math.log1p(-q) - step)
    st = _make_step(m, 1, direction, step, lo, hi)
    edges = (st.lo + np.arange(st.n)) * step
    pm, perr, qm, qerr = m.pld_cells_and_q_masses(edges, direction)
    pi, _ = _split_from_q(pm, perr, qm, qerr, edges, step)
    num = den = mp.mpf(0)
    for i in range(1, edges.size):
        if pm[i] <= 0 or direction == "remove" and edges[i - 1] <= math.log1p(-q):
            continue  # (no mass, or the cell at the floor: no inverse there; its bias is >= 0 anyway)
        r = _sg_cond_offset(edges[i - 1], edges[i], q, sigma, direction)
        num += pm[i] * (pi[i] - r) * step
        den += pm[i]
    exact = float(num / den)
    mu, v2 = st.lo_tail
    assert exact <= mu <= exact + step * step / 4, (exact, mu)  # second order in Delta
    assert exact * exact <= v2 <= step * mu * 1.01  # (E b^2 >= (E b)^2; 0 <= b <= Delta)


@pytest.mark.parametrize("T", [10, 200, 5000])
def test_lower_tail_bound_dominates_exact_tail(T):
    # D = +-Delta/2 with probability 1/2 (two values Delta apart, bias 0: the Hoeffding-lemma extreme);
    # sum D = Delta (Bin(T, 1/2) - T/2) exactly
    from scipy.stats import binom

    class _S:
        k = T
        lo_tail = (0.0, 0.0)

    step = 0.25
    for j in (1, 3, int(math.sqrt(T)) + 1, T // 3):
        eta = j * step - 1e-9
        exact = binom.sf(math.floor(T / 2 + eta / step), T, 0.5)  # P(sum D > eta)
        bound = math.exp(pld_grid._lo_log_tail([_S()], step, eta))
        assert exact <= bound * (1 + 1e-9), (j, exact, bound)
    # the eta solver meets its target
    eta = pld_grid._lo_eta([_S()], step, math.log(1e-9))
    assert math.exp(pld_grid._lo_log_tail([_S()], step, eta)) <= 1e-9
    assert binom.sf(math.floor(T / 2 + eta / step), T, 0.5) <= 1e-9


@pytest.mark.parametrize("sigma,k,delta", [(10.0, 1000, 1e-6), (300.0, 20000, 1e-5), (50.0, 5000, 1e-10)])
def test_mean_rounding_gaussian_many_steps(sigma, k, delta):
    b = pld.pld_epsilon_bounds([(Gaussian(sigma), k)], delta)
    ref = R.gaussian_epsilon(delta, math.sqrt(k) / sigma)
    assert b.details["lower_shift"] == "chernoff"
    assert b.lower <= ref <= b.upper, (b.lower, ref, b.upper)
    # the window grows like sqrt(T) x the per-step spread / Delta ~ T: large T caps (contour territory)
    tol = 1e-2 if b.details["capped"] else 1e-3
    assert b.upper - b.lower <= max(tol * b.upper, 1e-4) * 1.001, (b.lower, b.upper, b.details)
    d = pld.pld_delta_bounds([(Gaussian(sigma), k)], ref)
    assert d.lower <= delta <= d.upper


def test_mean_rounding_mixed_gaussian_ledger():
    ents = [(Gaussian(40.0), 300), (SubsampledGaussian(60.0, 1.0), 400)]  # q = 1: the Gaussian
    mu = math.sqrt(300 / 1600 + 400 / 3600)
    for eps in (0.5, 2.0):
        b = pld.pld_delta_bounds(ents, eps)
        ref = R.gaussian_delta(eps, mu)
        assert b.details["lower_shift"] == "chernoff"
        tol = 1e-2 if b.details["capped"] else 2e-3
        assert b.lower <= ref <= b.upper and b.upper - b.lower <= tol * ref, (b.lower, ref, b.upper)


def test_mean_rounding_dp_sgd_spec_row_and_contour():
    # near-atomic reference table (dp-accounting PLD at grid 1e-5): q = 0.01, sigma = 1.1, T = 1000, delta
    # = 1e-5 -> 1.515362 (6 digits)
    from conversions import contour

    m = SubsampledGaussian(1.1, 0.01)
    for direction in ("remove", "add"):
        b = pld.pld_epsilon_bounds([(m, 1000)], 1e-5, direction)
        assert b.details["lower_shift"] == "chernoff"
        assert b.upper - b.lower <= 1e-3 * b.upper * 1.001
        c = contour.epsilon_bounds(contour.ComposedPLD([(m, 1000)], direction), 1e-5, 1e-4)
        assert max(b.lower, c.lower) <= min(b.upper, c.upper), (b.lower, b.upper, c.lower, c.upper)
        if direction == "remove":
            assert b.lower - 1e-6 <= 1.515362 <= b.upper + 1e-6


@pytest.mark.parametrize("sigma,q,k,delta", [(2.0, 1e-4, 100, 1e-5), (1.0, 1e-4, 1000, 1e-5),
                                             (1.0, 1e-5, 100, 1e-8)])
def test_dp_sgd_small_sample_rate_bracket_against_independent_bounds(sigma, q, k, delta):
    """Regression: at small q the tilt of pass 2 put the grid's lower cut above the bulk of P (near
    log(1 - q)), leaving all finite mass in cell 0 ("no mass on the finite cells").  The bracket must be
    finite and consistent with two independent certified bounds: the characteristic-function upper
    bound of the accountant (both directions) and the hypothesis-test lower bounds of
    ``conversions.lower_bounds`` (per direction): lower_bounds <= pld.upper, pld.lower <= cf, and the
    cf certificate's own lower bound (its near-atomic split is now the tighter of the two) stays below
    the larger of the two directions' pld upper bounds: the certified brackets overlap."""
    from accountant import PrivacyAccountant
    from conversions.lower_bounds import epsilon_lower

    ents = [(SubsampledGaussian(sigma=sigma, sample_rate=q), k)]
    cf = PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=k).certificate(delta=delta, method="cf")
    uppers = []
    for direction in ("remove", "add"):
        b = pld.pld_epsilon_bounds(ents, delta, direction, 1e-3)
        assert math.isfinite(b.upper) and 0.0 < b.lower <= b.upper
        assert b.lower <= cf.epsilon
        assert epsilon_lower(ents, delta, direction) <= b.upper
        assert b.upper - b.lower <= 0.3 * b.upper  # reasonably tight
        uppers.append(b.upper)
    assert cf.lower_bound is not None and cf.lower_bound <= max(uppers)


@pytest.mark.parametrize("q,k,delta", [(1e-5, 10_000, 1e-8), (1e-6, 100_000, 1e-5)])
def test_dp_sgd_many_tiny_steps_bracket_is_near_the_hypothesis_test_bound(q, k, delta):
    """Regression: with many steps of tiny losses (q <= 1e-5, T >= 1e4) the 64-cell blocks' top-edge
    MGF bounds were off by T x 64 cells, which placed the tilt and the window far from the answer
    (certified 0.56 where the truth is ~0.005).  The bracket must stay above the independent
    hypothesis-test lower bound and within 1.6x of it (the statistic bound is itself below the truth)."""
    from conversions.lower_bounds import epsilon_lower

    ents = [(SubsampledGaussian(sigma=1.0, sample_rate=q), k)]
    for direction in ("remove", "add"):
        b = pld.pld_epsilon_bounds(ents, delta, direction, 1e-3)
        ref = epsilon_lower(ents, delta, direction)
        assert 0.0 < ref <= b.upper <= 1.6 * ref, (direction, ref, b.lower, b.upper)
        assert b.lower <= b.upper


def test_pld_route_falls_back_to_the_pure_dp_bound_next_to_the_largest_atom():
    """Three Laplace steps at delta = 1e-6: eps sits 8e-6 below the largest loss 3a, where the grid
    cannot certify an end, and the route answered inf (a stress run's finding, then at delta = 4e-5,
    which the grid now certifies: [0.353978, 0.354253] around the contour's [0.3539998, 0.3539998]);
    the pure-DP bound 3a holds for every delta >= the infinite-loss mass (0 here) and is the answer,
    above the contour's certified bracket (an independent computation)."""
    import warnings

    from accountant import PrivacyAccountant

    acct = PrivacyAccountant()
    lap = Laplace(scale=8.466670867060822)
    acct.compose(lap, 3)
    for delta, capped in ((1e-6, True), (4.134922178455354e-05, False)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = acct.certificate(delta=delta, method="pld")
            ref = acct.certificate(delta=delta, method="cf")
        assert got.epsilon <= 3 * lap.a * (1 + 1e-14)
        assert bool(got.details.get("pure_dp_cap")) is capped
        if capped:
            assert 3 * lap.a <= got.epsilon and ref.epsilon <= got.epsilon
        assert ref.lower_bound <= got.epsilon and got.lower_bound <= ref.epsilon
    # below the infinite-loss mass no finite eps holds, and the pure-DP bound is not offered there
    approx = PrivacyAccountant()
    approx.compose(ApproxDP(1.0, 1e-3), 2)  # infinite-loss mass 1 - (1 - 1e-3)^2 ~ 2e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        below = approx.certificate(delta=1e-5, method="pld")
    assert below.epsilon == math.inf and not below.details.get("pure_dp_cap")


def test_few_steps_lower_end_from_the_whole_cells_beats_a_wide_chernoff_shift():
    """q = 0.02, sigma = 0.6, T = 10, delta = 1e-3: the split vector's lower end takes the Chernoff shift
    eta ~ Delta sqrt(T log(1/beta) / 2), larger than T Delta / 2 at ten steps, so the whole cells moved
    up (~T Delta / 2 below the truth) are composed too and give the lower end: the bracket was 2.0e-4 wide
    (4.0e-4 with the Chernoff end alone; 1.0e-4 since the cheap pass at half the width).  Both ends
    hold against the near-atomic split's exact-grade
    bracket (the contour route, an independent computation)."""
    from accountant import PrivacyAccountant

    acct = PrivacyAccountant().step(sigma=0.6, sample_rate=0.02, steps=10)
    p = acct.certificate(delta=1e-3, method="pld")
    cf = acct.certificate(delta=1e-3, method="cf")
    assert cf.epsilon - cf.lower_bound <= 1e-6 * cf.epsilon
    assert p.lower_bound <= cf.epsilon and cf.lower_bound <= p.epsilon
    assert p.epsilon - p.lower_bound <= 2.5e-4 * p.epsilon


def test_a_bracket_within_target_gets_one_cheap_pass_at_half_the_width(monkeypatch):
    """The same ledger: its bracket meets the target after two passes, and one more pass at
    ``POLISH_FACTOR`` of it (predicted cheap) halves the grid: the bracket narrows to ~1e-4 and the upper
    end moves towards the truth (1.4968230254 -> 1.4968230012, the near-atomic split's exact-grade
    bracket, an independent computation, being [1.49682295, 1.49682300]).  Without the cheap pass
    (``CHEAP_FFT`` = 0) the bracket is the wider one, which contains the polished one."""
    from accountant import PrivacyAccountant

    acct = PrivacyAccountant().step(sigma=0.6, sample_rate=0.02, steps=10)
    cf = acct.certificate(delta=1e-3, method="cf")
    ents = acct._ledger.items()
    fine = pld.pld_epsilon_bounds(ents, 1e-3, "remove", 1e-3)
    monkeypatch.setattr(pld, "CHEAP_FFT", 0)
    rough = pld.pld_epsilon_bounds(ents, 1e-3, "remove", 1e-3)
    assert rough.lower <= fine.lower <= fine.upper <= rough.upper
    assert fine.upper - fine.lower <= 0.6 * (rough.upper - rough.lower)
    assert fine.lower <= cf.epsilon and cf.lower_bound <= fine.upper
    assert fine.upper - cf.epsilon < 0.5 * (rough.upper - cf.epsilon)


@pytest.mark.parametrize("name, args, k, delta, rel_gap", [
    ("DiscreteGaussian", (2.1421379279211674,), 50, 1e-6, 1e-6),
    ("DiscreteLaplace", (3.0, 4), 30, 1e-6, 1e-6),
    ("GeneralizedPTR", (0.1, 1e-6, 0.2, 1e-7), 10, 1e-4, 1e-6),
    ("DiscreteLaplace", (0.1932424194245547, 2), 5, 1e-6, None),
])
def test_lattice_atoms_split_by_their_offsets_against_the_contour(name, args, k, delta, rel_gap):
    """Every atomic mechanism gives its atoms' offsets inside the PLD cells, so a cell is split between
    its edges where its atoms sit instead of moving up whole: the PLD's upper end comes within 1e-6 of
    the contour's exact-grade one (it was 4.7e-4 to 4.9e-4 above for these three).  Five discrete-Laplace
    steps at delta below the top atom's mass (the root 1e-6 below the support's top, a tilt of 300)
    keep a lower end: the suffix sums' rounding bound is taken from the moduli above eps only.  Both
    brackets are certified, so they overlap."""
    import mechanisms
    from accountant import PrivacyAccountant

    acct = PrivacyAccountant().compose(getattr(mechanisms, name)(*args), k)
    p = acct.certificate(delta=delta, method="pld")
    c = acct.certificate(delta=delta, method="cf")
    assert p.lower_bound is None or p.lower_bound <= c.epsilon
    assert c.lower_bound is None or c.lower_bound <= p.epsilon
    if rel_gap is not None:
        assert p.epsilon <= c.epsilon * (1 + rel_gap)
    else:
        assert p.lower_bound is not None and p.lower_bound > 0.999 * c.epsilon
