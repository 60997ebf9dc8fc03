"""Soundness at the floating-point edges of the PLD cell hooks and of the split parts' windows, each case
one that random stress runs against mpmath found violated (2026-11-29), checked against an independent
mpmath reference (the loss map inverted and the normal / Laplace masses integrated in mpmath; the split
part's MGF by mpmath quadrature).

* an edge at the subsampled Gaussian's loss floor log(1 - q) within its rounding: fl(log1p(-q)) can lie
  above the true floor, and at large mu most of the mass sits between them;
* edges beyond 1e154: the error bounds were NaN (inf x 0);
* a subsampled-Laplace atom within an ulp or two of an edge: its computed loss (log1p / expm1) may be on
  the other side of the edge than the true one;
* randomized response's masses: the rounding of their closed forms was not counted;
* a split part whose cut lies beyond the MGF kernel's coarse range: the window stopped 12 tau + 1 past
  the cut, where the integrand was still within e^-24 of its maximum (MGF 1e-10 .. 2e-8 low against a
  declared 2e-13), and so did the decay envelope's flat part M(c);
* lattice atoms (2026-11-30, an mpmath re-check of every atomic mechanism's cells): a float loss an ulp or
  three off its real value across an edge (randomized-response powers of the SVT plug-ins, discrete
  Gaussian / Laplace), the SVT's and PTR's pair epsilon an ulp below the real sum, and closed-form masses
  (RR powers, the four-point pairs of PTR and sampling without replacement) with unaccounted rounding.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from mechanisms import RandomizedResponse, SubsampledGaussian, SubsampledLaplace
from mechanisms.subsampled_part import SubsampledGaussianPart
from tests import reference as R

mp.mp.dps = 40


def _assert_within(computed, err, truth, what):
    for i, (m, e, t) in enumerate(zip(computed, err, truth, strict=True)):
        assert math.isfinite(m) and math.isfinite(e), f"{what}: cell {i} is not finite ({m}, {e})"
        assert abs(mp.mpf(m) - t) <= mp.mpf(e), f"{what}: cell {i}: {m} +- {e} misses the true {t}"


# (q, sigma, edges): q = 1 - e^{-1/8} has fl(log1p(-q)) = -0.125, 3.7e-18 above the true floor; the
# second case is the stress run's (fl(log1p(-q)) 2.5e-20 above it, 88 % of the mass in between)
FLOOR_CASES = [
    (-math.expm1(-0.125), 0.1, [-0.1255, -0.125, -0.1245]),
    (0.001, 0.1, [-0.0010005003335835337, -0.0010005003335835335, -0.0010005003335835333]),
]


@pytest.mark.parametrize("q, sigma, edges", FLOOR_CASES)
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_subsampled_gaussian_edge_at_the_loss_floor_keeps_its_masses_within_their_errors(q, sigma, edges,
                                                                                          direction):
    e = np.array(edges) if direction == "remove" else -np.array(edges)[::-1]
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    truth_p, truth_q = R.subsampled_gaussian_cells(e, q, sigma, direction, dps=40, as_mpf=True)
    # the misplaced mass is large: the case would fail with the old zero error bounds
    assert max(float(t) for t in truth_p) > 0.5
    _assert_within(*mech.pld_cell_masses(e, direction), truth_p, "P-masses")
    _assert_within(*mech.pld_cell_q_masses(e, direction), truth_q, "Q-masses")


@pytest.mark.parametrize("q, sigma, edges", FLOOR_CASES)
def test_subsampled_gaussian_upper_tail_at_the_floor_brackets_the_truth(q, sigma, edges):
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    level = edges[1]
    p_lo, p_up, q_lo, q_up = mech.pld_upper_tail(level)
    truth_p, truth_q = R.subsampled_gaussian_cells([level], q, sigma, "remove", dps=40, as_mpf=True)
    assert p_lo <= truth_p[1] <= p_up and q_lo <= truth_q[1] <= q_up


def test_huge_edges_give_finite_error_bounds_that_hold():
    mech = SubsampledGaussian(sigma=1.0, sample_rate=0.01)
    e = np.array([0.0, 1e155])
    m, err = mech.pld_cell_masses(e, "remove")
    truth_p, _ = R.subsampled_gaussian_cells(e, 0.01, 1.0, "remove", dps=40, as_mpf=True)
    _assert_within(m, err, truth_p, "P-masses")
    assert err[1] < 1e-12  # (a useful bound, not only a finite one)
    tail = mech.pld_upper_tail(1e155)
    assert all(math.isfinite(v) for v in tail) and tail[0] <= 0.0 <= tail[1] < 1e-290


def _sl_cells(mech: SubsampledLaplace, edges, direction: str):
    """Masses of the subsampled-Laplace loss cells in mpmath: the pair at the library's float a (the
    convention of ``Laplace.a``), the atoms' losses and the continuous part's inverse map exact."""
    a, q = mp.mpf(mech.a), mp.mpf(mech.sample_rate)
    lo, hi = mp.log1p(q * mp.expm1(-a)), mp.log1p(q * mp.expm1(a))

    def x_of(ell):  # x in [0, 1] with l(x) = ell (clipped)
        v = (mp.exp(ell) - (1 - q)) / q
        return mp.mpf(0) if v <= 0 else min(max((mp.log(v) / a + 1) / 2, mp.mpf(0)), mp.mpf(1))

    def lap0(u, v):
        return (mp.exp(-a * u) - mp.exp(-a * v)) / 2

    def lap1(u, v):
        return (mp.exp(-a * (1 - v)) - mp.exp(-a * (1 - u))) / 2

    sgn = 1 if direction == "remove" else -1
    if direction == "remove":
        atoms = [(lo, (1 - q) / 2 + q * mp.exp(-a) / 2), (hi, (1 - q) * mp.exp(-a) / 2 + q / 2)]
    else:
        atoms = [(-lo, mp.mpf(1) / 2), (-hi, mp.exp(-a) / 2)]
    big = [mp.mpf("-inf")] + [mp.mpf(x) for x in edges] + [mp.mpf("inf")]
    out = []
    for e0, e1 in zip(big[:-1], big[1:], strict=True):
        m = sum((w for ell, w in atoms if e0 < ell <= e1), mp.mpf(0))
        # the continuous part: x in (0, 1), loss sgn l(x) in (e0, e1]
        u, v = (x_of(e0), x_of(e1)) if sgn > 0 else (x_of(-e1), x_of(-e0))
        if u < v:
            m += (1 - q) * lap0(u, v) + q * lap1(u, v) if sgn > 0 else lap0(u, v)
        out.append(m)
    return out


def _around(x: float, k: int = 1) -> list[float]:
    lo = hi = x
    for _ in range(k):
        lo, hi = math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf)
    return [lo, x, hi]


@pytest.mark.parametrize("scale, q, direction", [(0.3646818964222308, 2.845385129141694e-06, "add"),
                                                  (85.654635093165, 0.000556175812238757, "remove"),
                                                  (0.5, 0.01, "remove"), (0.5, 0.01, "add")])
def test_subsampled_laplace_atoms_next_to_an_edge_stay_within_their_errors(scale, q, direction):
    mech = SubsampledLaplace(scale=scale, sample_rate=q)
    atoms, _ = mech.pld_atoms(direction)
    edges = sorted(_around(float(atoms[0])) + _around(float(atoms[1])))
    e = np.array(edges)
    _assert_within(*mech.pld_cell_masses(e, direction), _sl_cells(mech, e, direction), "masses")


@pytest.mark.parametrize("eps, k", [(25.884480059209125, 4), (4.460548416215617, 10), (0.3, 2), (60.0, 3)])
def test_randomized_response_masses_include_their_rounding(eps, k):
    mech = RandomizedResponse(epsilon=eps, k=k)
    e = np.array([-eps, 0.0, eps])
    m, err = mech.pld_cell_masses(e, "remove")
    E = mp.mpf(eps)
    z = mp.exp(E) + k - 1
    truth = [1 / z, (k - 2) / z, mp.exp(E) / z, mp.mpf(0)]  # cells (-inf, -eps], (-eps, 0], (0, eps], top
    _assert_within(m, err, truth, "masses")
    assert mech.log_mgf_error > 0.0  # (the contour route carries the same rounding)


def _part_log_mgf(q, sigma, c, direction, x_cut, tau, lo, hi):
    """log of E[w(x) e^{c L}] under P for the big split part (weight Phi((x - x_cut) / tau)), mpmath."""
    qm, mu, cm = mp.mpf(q), mp.mpf(1.0 / sigma), mp.mpf(c)
    w = cm + 1 if direction == "remove" else -cm
    xc, tm = mp.mpf(x_cut), mp.mpf(tau)

    def f(x):
        ell = mp.log(1 - qm + qm * mp.exp(mu * x - mu * mu / 2))
        return mp.npdf(x) * mp.ncdf((x - xc) / tm) * mp.exp(w * ell)

    pts = list(mp.linspace(xc - 20 * tm, xc + 20 * tm, 81)) + list(mp.linspace(xc + 21 * tm, hi, 60))
    pts = [mp.mpf(lo)] + pts
    return mp.log(mp.quad(f, sorted(set(pts))))


# (q, sigma, c, direction, x_cut, tau, lo, hi): cuts beyond the kernels' coarse range
PART_CASES = [(0.0045117545737905955, 0.650928480917647, 18.4760222556874, "remove", 44.671236749909546,
               0.011192884647435073, 44.0, 51.0),
              (0.0001939967772421728, 4.3662133053864185, 9.079297642328276, "add", 15.349217153968493,
               0.03257495121637044, 14.5, 21.0)]


@pytest.mark.parametrize("case", PART_CASES)
def test_split_part_past_the_coarse_range_is_integrated_to_its_declared_error(case):
    q, sigma, c, direction, x_cut, tau, lo, hi = case
    with mp.workdps(30):
        ref = _part_log_mgf(q, sigma, c, direction, x_cut, tau, lo, hi)
    part = SubsampledGaussianPart(sigma, q, 1.0, x_cut, tau, 1)
    got = part.log_mgf_real(c, direction)
    assert abs(got - float(ref)) <= part.log_mgf_error, (got, float(ref))
    # the decay envelope bounds |M(c + it')| for |t'| >= t: at t = 0 that is M(c) itself
    assert part.log_envelope_fn(c, direction)(0.0) >= float(ref)


def test_discrete_gaussian_cell_masses_include_their_rounding():
    """A far-tail cell of the discrete Gaussian's loss lattice (mass 1.2e-253) was 1.7e-13 (relative)
    off with only the summation counted: the log-masses' declared error now bounds each mass too.
    Reference: the lattice in mpmath, L(x) = (1 - 2x) / (2 sigma^2) under P(x) = e^{-x^2/(2 sigma^2)} / Z."""
    from mechanisms import DiscreteGaussian

    sigma = 2.1421379279211674
    mech = DiscreteGaussian(sigma)
    e = np.array([-15.904250761761233, -15.690530772275164])
    m, err = mech.pld_cell_masses(e)
    s2 = 2 * mp.mpf(sigma) ** 2
    z = mp.nsum(lambda x: mp.exp(-x * x / s2), [-mp.inf, mp.inf])
    cell = sum((mp.exp(-mp.mpf(x) ** 2 / s2) / z for x in range(-400, 401)
                if mp.mpf(e[0]) < (1 - 2 * mp.mpf(x)) / s2 <= mp.mpf(e[1])), mp.mpf(0))
    assert cell > 0 and abs(mp.mpf(m[1]) - cell) <= mp.mpf(err[1])


# ------------------------------------------------------------------ lattice atoms: positions and masses
# (2026-11-30, an independent mpmath re-check of every atomic mechanism's cells: an atom's float loss can
# lie on the other side of an edge than its real loss, and closed-form masses carried unaccounted rounding)
def _lattice_cells(edges, atoms):
    """Cells (-inf, e_0], (e_0, e_1], ..., (e_last, inf) of exact atoms [(loss, mass)] (mpmath)."""
    es = [mp.mpf(e) for e in edges]
    out = [mp.mpf(0)] * (len(es) + 1)
    for ell, w in atoms:
        out[sum(1 for e in es if e < ell)] += w
    return out


def _rr_power_exact(eps, m, scale=1):
    """The atoms of scale x RR(eps)^m at the float eps, exactly: losses (m - 2j) eps, masses
    scale C(m, j) p^{m-j} q^j with p = 1 / (1 + e^-eps)."""
    e = mp.mpf(eps)
    p, q = 1 / (1 + mp.exp(-e)), 1 / (1 + mp.exp(e))
    return [((m - 2 * j) * e, scale * mp.binomial(m, j) * p ** (m - j) * q**j) for j in range(m + 1)]


def _edges_around(losses, picks, k=1):
    """Edges at the chosen float atoms and their k neighbours either side: a real loss off its float by
    < 1 ulp lies strictly between the neighbours, on one side of the float."""
    return sorted({x for i in picks for x in _around(float(losses[i]), k)})


def _svt_real_eps(mech):
    """The unit's real pure epsilon at the float parameters (exact rationals): eps1 + c eps2."""
    from fractions import Fraction

    c = 1 if (mech.resample or mech.cutoff == 1) else mech.cutoff
    return Fraction(mech.epsilon1) + c * Fraction(mech.epsilon2)


@pytest.mark.parametrize("args, edges", [
    ((1e-06, 0.44599179749347306, 3.0, 10, True, None), [-4.459927974934731, -4.45992797493473]),
    ((0.011514820588913673, 8.079826473624337, 1.0, 225, True, None), None),
])
def test_laplace_svt_cells_hold_at_the_pairs_epsilon(args, edges):
    """LaplaceSVT's RR(eps)^m pair: eps is at least the real eps1 + eps2 (the float sum was an ulp below at
    eps1 = 1e-6), an atom one ulp from its real position next to an edge counts on both sides (-10 eps put
    8e-5 in the wrong cell with error 0), and far-tail masses carry their closed forms' rounding (1.7e-13
    relative at m = 225, 782x the old bound).  Edges: the report's, then the float atoms and their
    neighbours, then one cell per atom (midpoints: the masses alone)."""
    from fractions import Fraction

    from mechanisms import LaplaceSVT

    with mp.workdps(80):
        mech = LaplaceSVT(*args)
        eps, m, _ = mech._rr_power()
        assert Fraction(eps) >= _svt_real_eps(mech)
        atoms = _rr_power_exact(eps, m)
        l, _ = mech.pld_atoms()
        grids = [] if edges is None else [edges]
        grids.append(_edges_around(l, range(0, m + 1, max(1, m // 12))))
        grids.append(list(0.5 * (l[:-1] + l[1:])[::-1]))
        for e in grids:
            _assert_within(*mech.pld_cell_masses(np.array(e)), _lattice_cells(e, atoms), "LaplaceSVT")


def test_laplace_svt_random_pairs_next_to_their_atoms():
    """Seeded random LaplaceSVT pairs, edges at float atoms and their neighbours (mpmath reference)."""
    from fractions import Fraction

    from mechanisms import LaplaceSVT

    rng = np.random.default_rng(20261130)
    with mp.workdps(60):
        for _ in range(12):
            e1, e2 = 10.0 ** rng.uniform(-3, 0.5, 2)
            mech = LaplaceSVT(float(e1), float(e2), float(rng.choice([1.0, 2.0, 3.0, 0.7])),
                              int(rng.integers(2, 40)), True, None)
            eps, m, _ = mech._rr_power()
            assert Fraction(eps) >= _svt_real_eps(mech)
            l, _ = mech.pld_atoms()
            e = _edges_around(l, rng.choice(m + 1, size=min(m + 1, 6), replace=False))
            _assert_within(*mech.pld_cell_masses(np.array(e)), _lattice_cells(e, _rr_power_exact(eps, m)),
                           repr(mech))


def test_laplace_svt_log_mgf_carries_its_masses_rounding():
    """log M(c) of the closed form within ``log_mgf_error`` of mpmath, also for one RR factor (m = 1, where
    the error was 0 and log M(0) came out 1.8e-15 above 0 at eps = 34)."""
    from mechanisms import LaplaceSVT

    with mp.workdps(60):
        for mech in (LaplaceSVT(27.11331664029298, 2.28127315149919, 1.0, 3, False, 91674),
                     LaplaceSVT(0.011514820588913673, 8.079826473624337, 1.0, 225, True, None)):
            eps, m, _ = mech._rr_power()
            atoms = _rr_power_exact(eps, m)
            for c in (0.0, 0.5, 2.0):
                ref = mp.log(mp.fsum(w * mp.exp(c * ell) for ell, w in atoms))
                got = float(np.real(mech.log_mgf(np.array([complex(c)]))[0]))
                assert abs(mp.mpf(got) - ref) <= mech.log_mgf_error, (mech, c, got, ref)


def test_stagewise_svt_atoms_next_to_an_edge_stay_within_their_errors():
    """StageWiseSVT: the pair with infinite-loss mass p >= 1 - (1 - delta')^m and RR(eps_s)^m scaled by
    1 - p; the atom -15 eps_s an ulp off its product sat across the edge -38.85020490862114 (5e-18 in the
    wrong cell, error 0)."""
    from mechanisms import StageWiseSVT

    with mp.workdps(60):
        mech = StageWiseSVT("laplace", 2.8962934891845875, "laplace", 0.8909698796687001, 17, 1,
                            5.695040917674785e-09, 1.0, None, True)
        eps, m, _ = mech._rr_power()
        p_inf = mp.mpf(mech.infinite_loss_mass)
        assert p_inf >= 1 - (1 - mp.mpf(mech.stage_delta)) ** m
        atoms = _rr_power_exact(eps, m, 1 - p_inf)
        l, _ = mech.pld_atoms()
        for e in ([-38.85020490862114, -38.85020490862113], _edges_around(l, range(m + 1))):
            _assert_within(*mech.pld_cell_masses(np.array(e)), _lattice_cells(e, atoms), "StageWiseSVT")


def _dg_exact(sigma, delta, x_max):
    """The discrete Gaussian's atoms on |x| <= x_max (the library's window; the rest is its infinite-loss
    mass): L = Delta (Delta - 2x) / (2 sigma^2), mass e^{-x^2 / (2 sigma^2)} / Z, Z over all of Z."""
    s2 = 2 * mp.mpf(sigma) ** 2
    z = mp.nsum(lambda x: mp.exp(-x * x / s2), [-mp.inf, mp.inf])
    return [(delta * (delta - 2 * mp.mpf(x)) / s2, mp.exp(-mp.mpf(x) ** 2 / s2) / z)
            for x in range(-x_max, x_max + 1)]


def _dlap_exact(scale, delta):
    """The discrete Laplace's Delta + 1 atoms (module docstring of mechanisms.discrete), exactly."""
    t = mp.mpf(scale)
    r = mp.exp(-1 / t)
    out = [(delta / t, 1 / (1 + r)), (-delta / t, r**delta / (1 + r))]
    out += [((delta - 2 * x) / t, (1 - r) * r**x / (1 + r)) for x in range(1, delta)]
    return out


def _assert_lattice_edges(mech, atoms, edges, picks):
    """The mechanism's cell masses and errors against the exact atoms' cells, on the given edges (if any)
    and on edges placed around the picked atoms (``_edges_around``)."""
    l, _ = mech.pld_atoms()
    for e in ([] if edges is None else [edges]) + [_edges_around(l, picks)]:
        _assert_within(*mech.pld_cell_masses(np.array(e)), _lattice_cells(e, atoms), repr(mech))


@pytest.mark.parametrize("sigma, delta, edges", [
    (0.4450576766905452, 7, [-441.74888304179194, -441.7488830417919]),
    (2.1421379279211674, 1, None), (0.3, 2, None), (7.3, 3, None),
])
def test_discrete_gaussian_atoms_next_to_an_edge_stay_within_their_errors(sigma, delta, edges):
    """The float loss Delta (Delta - 2x) / (2 sigma^2) is up to 3 ulps off the real one: at sigma = 0.445,
    Delta = 7 the atom of 1.9e-281 sat across -441.7488830417919 with error 0."""
    from mechanisms import DiscreteGaussian

    with mp.workdps(60):
        mech = DiscreteGaussian(sigma, delta)
        l, _ = mech.pld_atoms()
        atoms = _dg_exact(sigma, delta, (l.size - 1) // 2)
        rng = np.random.default_rng(int(sigma * 1000) + delta)
        _assert_lattice_edges(mech, atoms, edges, rng.choice(l.size, size=min(l.size, 10), replace=False))


@pytest.mark.parametrize("scale, delta, edges", [
    (0.1932424194245547, 2, [-10.349694471615928, -10.349694471615926]),
    (0.7318, 5, None), (3.3, 9, None), (0.0451, 1, None),
])
def test_discrete_laplace_atoms_next_to_an_edge_stay_within_their_errors(scale, delta, edges):
    """The float loss (Delta - 2x) fl(1 / t) is up to 2 ulps off the real (Delta - 2x) / t: at t = 0.193,
    Delta = 2 the atom of 3.2e-5 sat across -10.349694471615928 with error 0."""
    from mechanisms import DiscreteLaplace

    with mp.workdps(60):
        mech = DiscreteLaplace(scale, delta)
        _assert_lattice_edges(mech, _dlap_exact(scale, delta), edges, range(mech.pld_atoms()[0].size))


@pytest.mark.parametrize("name, args", [
    ("DiscreteGaussian", (1.0,)), ("DiscreteGaussian", (0.5, 3)), ("DiscreteGaussian", (0.1,)),
    ("DiscreteGaussian", (2.0**0.5,)), ("DiscreteLaplace", (1.0, 4)), ("DiscreteLaplace", (0.1,)),
    ("DiscreteLaplace", (0.5,)), ("LaplaceSVT", (0.5, 0.5, 1.0, 20, True, None)),
    ("LaplaceSVT", (0.1, 0.9, 1.0, 40, True, None)),
])
def test_atoms_on_the_edges_cost_nothing(name, args):
    """Guard (passes before and after the fix): an edge on a float atom costs nothing where the float loss
    is exact (sigma = 1, t = 1 or 0.5, eps1 + eps2 = 1) or placed by its real value (the rounding residual
    of (m - 2j) eps; DiscreteLaplace(0.1)'s float 10.0 of the real 9.99999999999999944 as a rational):
    the errors stay at the masses' rounding, and the masses at the mpmath reference."""
    import mechanisms as M

    mech = getattr(M, name)(*args)
    l, _ = mech.pld_atoms()
    e = np.unique(l)
    m, err = mech.pld_cell_masses(e)
    assert np.all(err <= 1e-11 * m + 1e-290), repr(mech)
    if isinstance(mech, M.DiscreteLaplace):
        _assert_within(m, err, _lattice_cells(e, _dlap_exact(mech.scale, mech.sensitivity)), repr(mech))


def _four_point_cells(edges, eps, p_inf):
    """The finite atoms of the four-point pair at (eps, p_inf): +-eps with (1 - p_inf) e^eps / (1 + e^eps),
    (1 - p_inf) / (1 + e^eps)."""
    e, s = mp.mpf(eps), 1 - mp.mpf(p_inf)
    return _lattice_cells(edges, [(e, s / (1 + mp.exp(-e))), (-e, s / (1 + mp.exp(e)))])


def _check_four_point(mech, real_eps, real_delta, edges):
    """The pair's eps (its atoms +-eps) and infinite-loss mass are at least the real values, its cells and
    log M(0) within their declared errors of the pair at those floats."""
    eps, p_inf = float(np.max(mech.pld_atoms()[0])), mech.infinite_loss_mass
    assert mp.mpf(eps) >= real_eps and mp.mpf(p_inf) >= real_delta, (eps, p_inf)
    for e in (edges, [-eps, 0.0, eps], _around(eps) + _around(-eps)):
        e = sorted(e)
        _assert_within(*mech.pld_cell_masses(np.array(e)), _four_point_cells(e, eps, p_inf), repr(mech))
    # log M(0) = log(1 - p_inf): the masses' rounding is in log_mgf_error (it was 0, 3.5e-15 off at eps = 33)
    got = float(np.real(mech.log_mgf(np.array([0j]))[0]))
    assert abs(mp.mpf(got) - mp.log(1 - mp.mpf(p_inf))) <= mech.log_mgf_error


@pytest.mark.parametrize("args, edges", [
    ((30.3282789169425, 8.955823895113212e-10, 2.9798830462314405, 3.740732704876209e-16, 0.0, "max"),
     [33.30816196317394, 33.308161963173944]),
    ((1.0, 1e-6, 0.5, 2e-6, 3e-6, "max"), [1.5]), ((0.1, 1e-7, 0.2, 0.0, 2e-7, "sum"), [0.3]),
])
def test_generalized_ptr_four_point_pair_within_its_errors(args, edges):
    """GeneralizedPTR: randomized response's masses at eps = 33.3 times (1 - delta) were 3.5e-15 off
    relatively with 2.2e-16 declared; the pair's eps and delta are the real sums rounded up."""
    from mechanisms import GeneralizedPTR

    with mp.workdps(60):
        mech = GeneralizedPTR(*args)
        eps, delta, test_eps, test_delta, fp = (mp.mpf(a) for a in args[:5])
        combine = args[5]
        real_delta = test_delta + (delta + fp if combine == "sum" else max(delta, fp))
        _check_four_point(mech, eps + test_eps, real_delta, edges)


@pytest.mark.parametrize("args, edges", [
    ((41.20373210550379, 2.137891603281804e-13, 0.00031253968453005083),
     [-33.13295299914954, -33.13295299914953]),
    ((1.0, 1e-6, 0.01), [0.0]), ((750.0, 1e-9, 1e-250), [0.0]), ((2.0, 1e-5, 1.0), [2.0]),
])
def test_sampled_without_replacement_four_point_pair_within_its_errors(args, edges):
    """SampledWithoutReplacement: masses at eps' = 33.1 times (1 - gamma delta) were 3.1e-15 off with
    2.2e-16 declared; eps' = log1p(gamma expm1(eps)) is rounded up past its real value (mpmath)."""
    from mechanisms import SampledWithoutReplacement

    with mp.workdps(60):
        mech = SampledWithoutReplacement(*args)
        e, d, g = (mp.mpf(a) for a in args)
        _check_four_point(mech, mp.log1p(g * mp.expm1(e)), g * d, edges)


def test_four_point_pairs_random():
    """Seeded random PTR / without-replacement pairs at large eps (where the masses lose the most)."""
    from mechanisms import GeneralizedPTR, SampledWithoutReplacement

    rng = np.random.default_rng(1130)
    with mp.workdps(60):
        for _ in range(10):
            e1, e2 = rng.uniform(0.0, 30.0, 2)
            d1, d2 = 10.0 ** rng.uniform(-16, -4, 2)
            mech = GeneralizedPTR(float(e1), float(d1), float(e2), float(d2))
            _check_four_point(mech, mp.mpf(e1) + mp.mpf(e2), mp.mpf(d1) + mp.mpf(d2), [float(e1 + e2)])
            g = float(10.0 ** rng.uniform(-6, 0))
            mech = SampledWithoutReplacement(float(e1 + e2), float(d1), g)
            e, d, gm = mp.mpf(float(e1 + e2)), mp.mpf(d1), mp.mpf(g)
            _check_four_point(mech, mp.log1p(gm * mp.expm1(e)), gm * d, [mech.amplified_epsilon])


# ------------------------------------------------------------------ where atoms sit inside their cells
def test_atom_cell_offsets_bound_the_exact_conditional_means():
    """``atoms_cell_offsets``: for random atoms (some on edges, some next to them, some with a declared
    position error) every finite cell of positive mass has lo <= E[L - e_{i-1} | cell] / Delta_i <= hi,
    the conditional mean computed in exact rationals from the atoms' real positions (floats, and for
    the atoms with a position error, any point of their interval: both ends are checked)."""
    from fractions import Fraction

    from mechanisms._cells import atoms_cell_masses, atoms_cell_offsets

    rng = np.random.default_rng(11)
    for trial in range(60):
        step = float(rng.choice([0.125, 0.1, 1.0 / 3.0, 1e-3]))
        edges = np.arange(-20, 21) * step
        n_at = int(rng.integers(1, 40))
        losses = rng.uniform(edges[0] - step, edges[-1] + step, n_at)
        k = rng.integers(0, n_at, n_at // 3)
        losses[k] = edges[rng.integers(0, edges.size, k.size)]  # on an edge
        k2 = rng.integers(0, n_at, n_at // 3)
        side = rng.choice([-1.0, 1.0]) * np.inf
        losses[k2] = np.nextafter(edges[rng.integers(0, edges.size, k2.size)], side)  # next to an edge
        masses = rng.uniform(0.0, 1.0, n_at)
        loss_err = 0.0 if trial % 2 else rng.uniform(0.0, 3.0, n_at) * 2.0**-52 * np.abs(losses)
        lo, hi = atoms_cell_offsets(edges, losses, loss_err=loss_err)
        m, _ = atoms_cell_masses(edges, losses, masses, loss_err=loss_err)
        assert np.all((0.0 <= lo) & (lo <= hi) & (hi <= 1.0))
        le = np.broadcast_to(loss_err, losses.shape)
        for shift in (-1, 1):
            real = [Fraction(float(x)) + shift * Fraction(float(d)) for x, d in zip(losses, le, strict=True)]
            for i in range(1, edges.size):
                a, b = Fraction(float(edges[i - 1])), Fraction(float(edges[i]))
                inside = [(x, Fraction(float(w))) for x, w in zip(real, masses, strict=True) if a < x <= b]
                if not inside or m[i] <= 0.0:
                    continue
                mean = sum((x - a) * w for x, w in inside) / sum(w for _, w in inside) / (b - a)
                assert Fraction(float(lo[i])) <= mean <= Fraction(float(hi[i])), (trial, i, shift)


@pytest.mark.parametrize("args, times, delta, rtol", [
    ((0.1, 0.9, 1.0, 5, True, None), 4, 1e-3, 1e-9),
    ((0.1, 0.9, 1.0, 5, True, None), 4, 1e-6, 1e-3),
    ((0.5, 0.5, 1.0, 10, True, None), 5, 1e-6, 1e-3),
    ((1e-6, 0.44599179749347306, 3.0, 10, True, None), 3, 1e-6, 1e-3),
])
def test_pld_of_an_rr_power_one_ulp_above_the_grid_stays_tight(args, times, delta, rtol):
    """LaplaceSVT(0.1, 0.9, cutoff 5, resampling) x 4 is RR(eps)^20 at eps = 1.0000000000000002 (the
    smallest float >= the real eps1 + eps2): its atoms lie just above the PLD grid's points. Rounded up as
    whole cells they moved a full step (1.0e-4 relative at delta = 1e-3); with the atoms' offsets in their
    cells the PLD's upper end is within 1e-9 of the exact epsilon of that pair there, and never below
    it (mpmath enumeration of the pair's atoms; also for other SVT powers, within the PLD's 1e-3)."""
    import warnings

    from accountant import PrivacyAccountant
    from mechanisms import LaplaceSVT

    mech = LaplaceSVT(*args)
    eps1, mult, _ = mech._rr_power()
    m = times * mult
    with mp.workdps(60):
        e = mp.mpf(eps1)
        p = 1 / (1 + mp.exp(-e))
        atoms = [((m - 2 * j) * e, mp.binomial(m, j) * p ** (m - j) * (1 - p) ** j) for j in range(m + 1)]

        def delta_of(x):
            return mp.fsum(w * (1 - mp.exp(x - ell)) for ell, w in atoms if ell > x)

        top = m * e
        ref = mp.findroot(lambda x: delta_of(x) - delta, (top / 2, top * (1 - mp.mpf(10) ** -12)),
                          solver="anderson")
    acct = PrivacyAccountant().compose(mech, times=times)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        c = acct.certificate(delta=delta, method="pld")
    assert mp.mpf(c.epsilon) >= ref
    assert c.epsilon <= float(ref) * (1 + rtol)


def test_atom_cell_offsets_keep_atoms_whose_mass_underflowed():
    """An atom whose computed mass underflowed to 0 still has a positive real mass: its offset bounds the
    cell's mean like any other's (edges 0, 1, 2; atoms at 1.2 with mass 1 and at 1.9 with mass 0 -> the
    cell (1, 2] gets hi >= 0.9 and lo <= 0.2)."""
    from mechanisms._cells import atoms_cell_offsets

    lo, hi = atoms_cell_offsets(np.array([0.0, 1.0, 2.0]), np.array([1.2, 1.9]))
    assert lo[2] <= 0.2 and hi[2] >= 0.9
