"""Last-digit soundness of closed-form RDP curves, pure epsilons and log-MGFs against mpmath.

Every reference below is written here from the formulas (mpmath at 60-200 digits, the mechanisms'
float parameters taken as exact reals); nothing of the library's numerics is reused.  A certified curve
must never be below its reference, down to the last digit, and must not be loose beyond the stated
relative margins (a few ulps where the closed form allows it).  The cases named R6-R13 are the
violations found by an independent re-check (they failed before the fixes); the seeded random cases
sample the same families.
"""

from __future__ import annotations

import math
import random

import mpmath as mp
import numpy as np
import pytest

import mechanisms as M
from mechanisms import lattice
from mechanisms.fixed_size import FixedSizeGaussianReplaceOne
from mechanisms.lattice import DiscreteMechanism
from mechanisms.screening import screening_rdp_data_dependent, subsampled_screening_rdp

U = 2.0 ** -53
ORDERS = (1.0001, 1.5, 2.0, 3.7, 10.0, 100.0, 1e4)


def mpf(x) -> mp.mpf:
    return mp.mpf(float(x))


# ------------------------------------------------------------------------------------------ references
def rr_rdp_ref(eps, alpha):
    """Binary randomized response RR(eps): log((e^{a eps} + e^{-(a-1) eps}) / (e^eps + 1)) / (a - 1)."""
    e, a = mp.mpf(eps), mpf(alpha)
    return mp.log((mp.exp(a * e) + mp.exp(-(a - 1) * e)) / (mp.exp(e) + 1)) / (a - 1)


def atoms_rdp_ref(losses, masses, alpha):
    """log(sum w e^{(a-1) l} / sum w) / (a - 1) for exact (float) atoms."""
    a = mpf(alpha)
    w = [mpf(x) for x in masses]
    tot = mp.fsum(wi * mp.exp((a - 1) * mpf(li)) for li, wi in zip(losses, w, strict=True))
    return mp.log(tot / mp.fsum(w)) / (a - 1)


def dg_rdp_ref(sigma, delta, alpha):
    """Discrete Gaussian: a Delta^2 / (2 s^2) + log(Z((1 - a) Delta) / Z(0)) / (a - 1), Z(t) = sum_x
    e^{-(x - t)^2 / (2 s^2)} summed directly (the terms beyond the window are below e^{-800})."""
    s, a, d = mpf(sigma), mpf(alpha), mp.mpf(delta)
    theta = (1 - a) * d
    n = int(math.ceil(abs(float(theta)) + 45 * float(sigma) + 45))

    def z(t):
        return mp.fsum(mp.exp(-(x - t) ** 2 / (2 * s * s)) for x in range(-n, n + 1))

    return a * d * d / (2 * s * s) + mp.log(z(theta) / z(0)) / (a - 1)


def bernoulli_rdp_ref(x, xb, y, yb, alpha):
    """D_alpha(Bern(x) || Bern(y)) with the complements given separately (alpha = inf: max-divergence)."""
    if alpha == math.inf:
        return max(mp.log(x / y), mp.log(xb / yb))
    a = mpf(alpha)
    return mp.log(x ** a * y ** (1 - a) + xb ** a * yb ** (1 - a)) / (a - 1)


def screening_rdp_ref(sigma, threshold, k, t_min, alpha, gamma=None):
    """max over adjacent t (both orders) of the Bernoulli divergence of Phi((t - T) / sigma); with
    ``gamma`` the exact subsampled form (mixture p' = (1 - gamma) q + gamma p against q, both orders)."""
    s, th = mpf(sigma), mpf(threshold)
    best = mp.mpf(0)
    for t in range(t_min, k):
        p, pb = mp.ncdf((t + 1 - th) / s), mp.ncdf(-(t + 1 - th) / s)
        q, qb = mp.ncdf((t - th) / s), mp.ncdf(-(t - th) / s)
        if gamma is None:
            cases = ((p, pb, q, qb), (q, qb, p, pb))
        else:
            g = mpf(gamma)
            cases = []
            for (u, ub, v, vb) in ((p, pb, q, qb), (q, qb, p, pb)):  # p' mixes u into v
                m, mb = (1 - g) * v + g * u, (1 - g) * vb + g * ub
                cases += [(m, mb, v, vb), (v, vb, m, mb)]
        for c in cases:
            best = max(best, bernoulli_rdp_ref(*c, alpha))
    return best


def br_log_mgf_ref(eps, c):
    """Bounded range pair: log M(c) = c eps + log(g((2c + 1) eps) / g(eps)), g(w) = (1 - e^{-w}) / w."""
    e, cc = mpf(eps), mpf(c)

    def g(w):
        return -mp.expm1(-w) / w

    return cc * e + mp.log(g((2 * cc + 1) * e) / g(e))


def assert_upper(got, ref, rel, what):
    """got >= ref (exactly, as rationals) and got <= ref (1 + rel) (+ 1e-300)."""
    assert mpf(got) >= ref, f"{what}: {got!r} below the exact {mp.nstr(ref, 20)}"
    assert mpf(got) <= ref * (1 + mp.mpf(rel)) + mp.mpf(1e-300), \
        f"{what}: {got!r} looser than {rel} relative above {mp.nstr(ref, 20)}"


# ------------------------------------------------------------------------------------------ R6
R6_CASES = [M.SampledWithoutReplacement(2.2019741441429339e-07, 0.00035795789986867914,
                                        0.0024577382162931038),
            M.GeneralizedPTR(0.01), M.SampledWithoutReplacement(0.01, 0.0, 1.0), M.GeneralizedPTR(3e-9),
            M.GeneralizedPTR(1e-5),
            M.GeneralizedPTR(30.3282789169425, 8.955823895113212e-10, 2.9798830462314405,
                             3.740732704876209e-16)]


def _exact_eps(m) -> mp.mpf:
    """The exact real epsilon of a PTR / sampling-without-replacement block (its float parameters)."""
    with mp.workdps(80):
        if isinstance(m, M.GeneralizedPTR):
            return mpf(m.epsilon) + mpf(m.test_epsilon)
        return mp.log1p(mpf(m.sample_rate) * mp.expm1(mpf(m.epsilon)))


def _exact_delta(m) -> mp.mpf:
    if isinstance(m, M.GeneralizedPTR):
        return mpf(m.test_delta) + max(mpf(m.delta), mpf(m.false_positive))
    return mpf(m.sample_rate) * mpf(m.delta)


def _random_blocks(n: int, seed: int):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        eps = 10 ** rng.uniform(-9, 1.6)
        if rng.random() < 0.5:
            out.append(M.GeneralizedPTR(eps, rng.choice([0.0, 10 ** rng.uniform(-12, -3)]),
                                        10 ** rng.uniform(-9, 0.5), 10 ** rng.uniform(-16, -4)))
        else:
            out.append(M.SampledWithoutReplacement(eps, 10 ** rng.uniform(-12, -3), 10 ** rng.uniform(-5, 0)))
    return out


@pytest.mark.parametrize("m", R6_CASES + _random_blocks(12, 620), ids=repr)
def test_atom_blocks_rdp_and_parameters_are_upper_bounds(m):
    """R6: GeneralizedPTR / SampledWithoutReplacement went through the generic atoms RDP (log-sum-exp,
    not rounded): 1e-12 relative low at eps = 0.01 and 0.0 for a positive 2.9e-19.  Now the closed form of
    randomized response at the block's epsilon, which is itself rounded up, as is the block's delta."""
    mp.mp.dps = 80
    e = _exact_eps(m)
    assert mpf(m.pure_epsilon) >= e and mpf(m.pure_epsilon) <= e * (1 + 12 * mp.mpf(U))  # (8 u and one step)
    assert mpf(m.infinite_loss_mass) >= _exact_delta(m)
    got = m.rdp(list(ORDERS))
    for a, g in zip(ORDERS, got, strict=True):
        ref = rr_rdp_ref(e, a)
        assert g > 0.0
        assert_upper(g, ref, 1e-13, f"{m!r} alpha={a}")


class _ThreeAtoms(DiscreteMechanism):
    """A plug-in with its own atoms and no closed form: the generic (certified) atoms path."""

    name = "_three_atoms_test"

    def __init__(self, eps: float, mass: float = 0.3):
        self.eps, self.mass = eps, mass

    @property
    def pure_epsilon(self) -> float:
        return 2.0 * self.eps

    def _atoms(self):
        e = self.eps
        z = math.exp(2 * e) + self.mass + 1.0
        return np.array([2 * e, 0.0, -2 * e]), np.array([math.exp(2 * e) / z, self.mass / z, 1.0 / z])


@pytest.mark.parametrize("eps", [1e-9, 2.2e-7, 1e-4, 0.01, 0.7, 3.0, 40.0])
def test_generic_atoms_rdp_is_an_upper_bound(eps):
    """The generic atoms path (plug-ins without a closed form) bounds the exact RDP of its atoms from above
    at every order and is never 0 for a positive divergence (the old log-sum-exp returned 0 below ~1e-8
    and was ~1e-12 relative low at eps = 0.01).  Tight where the losses are not tiny: the atoms' contract
    allows 4 ulps of 1 + |l| in each loss, which dominates below ~1e-6 (then within 16 ulps absolute)."""
    mp.mp.dps = 60
    m = _ThreeAtoms(eps)
    l, w = m._atoms()
    got = m.rdp(list(ORDERS))
    for a, g in zip(ORDERS, got, strict=True):
        ref = atoms_rdp_ref(l, w, a)
        assert g > 0.0 and mpf(g) >= ref, (eps, a, g, mp.nstr(ref, 17))
        if eps >= 0.01:
            assert mpf(g) <= ref * (1 + mp.mpf(1e-10)) or g == 2 * eps, (eps, a, g)
        else:
            assert mpf(g) <= ref + 16 * U, (eps, a, g)
    # mass errors declared by the plug-in are covered too
    got2 = lattice.atoms_rdp_upper(np.array(ORDERS), l, w, 2 * eps, mass_rel_err=1e-12)
    assert np.all(got2 >= got)


# ------------------------------------------------------------------------------------------ R9
@pytest.mark.parametrize("eps", [1e-8, 1e-12, 3.6e-12, 4.1e-8, 1e-5, 0.19, 7.0, 500.0, 1e-100])
def test_exponential_mechanism_log_mgf_zero_within_declared_error(eps):
    """R9: log M(0) of the bounded-range pair was -3.1e-15 at eps = 1e-8 (log eps - log(1 - e^{-eps})
    cancels) with a declared error of 0.  Now exact at 0 and the declared error covers the closed form's
    rounding beyond the ulps of its own terms."""
    m = M.ExponentialMechanism(eps)
    err = m.log_mgf_error
    assert abs(m.log_mgf_real(0.0)) <= err
    assert abs(complex(m.log_mgf(np.array([0j]))[0])) <= err
    mp.mp.dps = 50
    rng = random.Random(int(eps * 1e6) % 1000 + 9)
    for c in [0.0, 1e-3, 0.2, 1.0, 30.0] + [10 ** rng.uniform(-3, 3) for _ in range(10)]:
        ref = br_log_mgf_ref(eps, c)
        e = float(mp.fabs(ref)) + abs(c * eps)  # the terms' own size: ulps of it are the routes' allowance
        for v in (m.log_mgf_real(c), float(np.real(m.log_mgf(np.array([complex(c)]))[0]))):
            assert abs(mpf(v) - ref) <= err + 4 * U * e, (eps, c, v, mp.nstr(ref, 17))


# ------------------------------------------------------------------------------------------ R10
@pytest.mark.parametrize("sigma,delta", [(4.798511158783347, 1), (3.0, 1), (0.4450576766905452, 7), (0.3, 1),
                                         (0.52, 2), (1.7, 3), (12.5, 1), (2.1421379279211674, 1)])
def test_discrete_gaussian_rdp_is_an_upper_bound(sigma, delta):
    """R10: the capped closed form was 1-1.4 ulps short (alpha Delta^2 / (2 sigma^2) rounded down)."""
    mp.mp.dps = 60
    m = M.DiscreteGaussian(sigma, delta)
    got = m.rdp(list(ORDERS[:-1]))
    for a, g in zip(ORDERS[:-1], got, strict=True):
        # (sigma < 1/2 sums the theta function directly: its rounding divided by alpha - 1 near alpha = 1)
        assert_upper(g, dg_rdp_ref(sigma, delta, a), 1e-11, f"{m!r} alpha={a}")


# ------------------------------------------------------------------------------------------ R11
def _gaussians(n: int, seed: int):
    rng = random.Random(seed)
    return [(10 ** rng.uniform(-3, 3), 10 ** rng.uniform(-2, 1)) for _ in range(n)]


@pytest.mark.parametrize("sigma,sens", [(0.0106279391989474, 0.7216307596701564), (2.3, 1.0), (0.1, 1.0)]
                         + _gaussians(10, 1111))
def test_gaussian_family_rdp_is_an_upper_bound(sigma, sens):
    """R11: GNMax (the Gaussian pair at the float mu = Delta / sigma) was 1.75 ulps short; the Gaussian caps
    of the amplified curves (random allocation, fixed-size and Poisson-subsampled Gaussian) likewise."""
    mp.mp.dps = 60
    alphas = [1.0001, 2.0, 30.86710413870422, 100.0, 1e4]
    ref = [mpf(a) * mpf(sens) ** 2 / (2 * mpf(sigma) ** 2) for a in alphas]
    for m in (M.Gaussian(sigma, sens), M.GNMax(sigma, sens), M.BallsInBinsGaussian(sigma, 1, sens),
              M.RandomAllocationGaussian(sigma, 3, 3, sens), FixedSizeGaussianReplaceOne(sigma, 8, 8, sens)):
        k = {M.RandomAllocationGaussian: 3, FixedSizeGaussianReplaceOne: 4}.get(type(m), 1)  # (shift 2 Delta)
        for a, g, r in zip(alphas, m.rdp(alphas), ref, strict=True):
            assert_upper(g, k * r, 16 * U, f"{m!r} alpha={a}")


def test_gaussian_rdp_exact_where_the_float_is_exact():
    assert M.Gaussian(2.0).rdp([2.0, 10.0]).tolist() == [0.25, 1.25]


# ------------------------------------------------------------------------------------------ R12
def _svts(n: int, seed: int):
    rng = random.Random(seed)
    return [(10 ** rng.uniform(-6, 1.8), 10 ** rng.uniform(-6, 1.8), rng.choice([1.0, 0.3, 2.7]),
             rng.choice([1, 2, 5]), rng.random() < 0.5) for _ in range(n)]


@pytest.mark.parametrize("e1,e2,sens,c,resample", [(48.26451180928053, 0.2793170611832668, 1.0, 1, True),
                                                   (0.1, 0.2, 1.0, 1, False)] + _svts(16, 1212))
def test_laplace_svt_pure_epsilon_rounds_up(e1, e2, sens, c, resample):
    """R12: eps1 + eps2 rounded to nearest was below the exact sum; now every Laplace parameter of the
    plan and the pure epsilon are rounded up (also bounding the pair at the float noise scales)."""
    m = M.LaplaceSVT(e1, e2, sens, c, resample)
    exact = (c * (mpf(e1) + mpf(e2))) if resample else (mpf(e1) + c * mpf(e2))
    assert_upper(m.pure_epsilon, exact, 16 * U, repr(m))
    a_rho, a_nu = mpf(sens) / mpf(m.threshold_scale), 2 * mpf(sens) / mpf(m.query_scale)
    assert mpf(m.pure_epsilon) >= (c * (a_rho + a_nu) if resample else a_rho + c * a_nu)
    # the curve's alpha = inf end equals the pure epsilon (rr curve), never below it
    assert mpf(m.rdp([math.inf])[0]) >= exact


@pytest.mark.parametrize("scale,sens", [(0.1, 1.0), (3.3, 1.0), (0.7, 2.2)]
                         + [(10 ** random.Random(i).uniform(-2, 3), random.Random(i + 99).uniform(0.1, 9))
                            for i in range(8)])
def test_laplace_and_lattice_pure_epsilons_round_up(scale, sens):
    """The same pattern in the Laplace pair (a = Delta / b), discrete Laplace and stage-wise SVT."""
    assert mpf(M.Laplace(scale, sens).pure_epsilon) >= mpf(sens) / mpf(scale)
    assert mpf(M.DiscreteLaplace(scale, 3).pure_epsilon) >= 3 / mpf(scale)
    st = M.StageWiseSVT("laplace", scale, "laplace", 2 * scale, 7, 3, 1e-9)
    assert mpf(st.pure_epsilon) >= st.stages * mpf(st.stage_epsilon)
    assert mpf(st.rdp([2.0])[0]) >= st.stages * rr_rdp_ref(mpf(st.stage_epsilon), 2.0)
    for a in (1.5, 2.0, 10.0):
        assert mpf(M.DiscreteLaplace(scale, 1).rdp([a])[0]) >= rr_rdp_ref(1 / mpf(scale), a)


# ------------------------------------------------------------------------------------------ R13
R13 = [(3.0223740303688773, -24.043753858502967, 2, 0, 13.62617556975296),
       (0.08552864064133278, -2.4336235362888035, 21, 0, 2.0),
       (0.0732133728018127, 3.5427092516823873, 1, 0, 2.0)]


def _screenings(n: int, seed: int):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 12)
        out.append((10 ** rng.uniform(-1.3, 1), rng.uniform(-10, k + 10), k, rng.randint(0, min(k, 2)),
                    rng.choice([1.0001, 1.5, 2.0, 6.3, 64.0, 1000.0, math.inf])))
    return out


@pytest.mark.parametrize("sigma,threshold,k,t_min,alpha", R13 + _screenings(14, 1313))
def test_noisy_screening_rdp_is_an_upper_bound(sigma, threshold, k, t_min, alpha):
    """R13: the per-order supremum was 5.7e-14 .. 5.7e-13 relative short (z = (t - T) / sigma and log Phi
    rounded, the kernel's own rounding).  Now the pairs are moved outwards by those errors and the maximum
    is rounded up; at most 1e-10 relative above the exact supremum."""
    mp.mp.dps = 200
    ref = screening_rdp_ref(sigma, threshold, k, t_min, alpha)
    got = float(M.NoisyScreening(sigma, threshold, k, t_min).rdp([alpha])[0])
    if ref == 0:
        assert got >= 0.0
        return
    assert_upper(got, ref, 1e-10, f"NoisyScreening({sigma}, {threshold}, {k}, {t_min}) alpha={alpha}")


@pytest.mark.parametrize("gamma", [1e-4, 0.05, 0.6])
@pytest.mark.parametrize("sigma,threshold,k", [(3.0, 5.5, 6), (0.8, 2.2, 4), (5.0, 21.0, 9)])
def test_subsampled_screening_rdp_is_an_upper_bound(sigma, threshold, k, gamma):
    """The exact subsampled form (mixture pairs) under the same treatment."""
    mp.mp.dps = 120
    alphas = [1.0001, 2.0, 7.5, 64.0, math.inf]
    got = subsampled_screening_rdp(np.array(alphas), sigma, threshold, k, gamma)
    for a, g in zip(alphas, got, strict=True):
        ref = screening_rdp_ref(sigma, threshold, k, 0, a, gamma)
        assert_upper(g, ref, 1e-9, f"gamma={gamma} alpha={a}")


def test_data_dependent_screening_rdp_is_an_upper_bound():
    mp.mp.dps = 120
    sigma, threshold = 0.9, 3.3
    alphas = [1.5, 2.0, 20.0]
    got = screening_rdp_data_dependent(np.array(alphas), [2, 4], sigma, threshold, 0, 6)
    for row, t in zip(got, (2, 4), strict=True):
        for a, g in zip(alphas, row, strict=True):
            s, th = mpf(sigma), mpf(threshold)
            pi = {u: (mp.ncdf((u - th) / s), mp.ncdf(-(u - th) / s)) for u in (t - 1, t, t + 1)}
            ref = max(bernoulli_rdp_ref(*pi[t], *pi[u], a) for u in (t - 1, t + 1))
            ref = max(ref, max(bernoulli_rdp_ref(*pi[u], *pi[t], a) for u in (t - 1, t + 1)))
            assert_upper(g, ref, 1e-10, f"t={t} alpha={a}")


# ------------------------------------------------------------------ Poisson-subsampled RDP (integer sums)
def sg_rdp_int_ref(q, sigma, sens, alpha: int):
    """Subsampled Gaussian, integer alpha (remove direction, Mironov, Talwar & Zhang 2019):
    log(sum_k C(alpha, k) (1 - q)^{alpha - k} q^k e^{k (k - 1) mu^2 / 2}) / (alpha - 1), mu = Delta / s
    with the float parameters as exact reals."""
    q, mu2 = mpf(q), (mpf(sens) / mpf(sigma)) ** 2
    tot = mp.fsum(mp.binomial(alpha, k) * (1 - q) ** (alpha - k) * q**k * mp.exp(k * (k - 1) * mu2 / 2)
                  for k in range(alpha + 1))
    return mp.log(tot) / (alpha - 1)


def sg_rdp_chord_ref(q, sigma, sens, alpha: float):
    """The chord of K(a) = (a - 1) eps(a) between the integers around alpha, over alpha - 1, or the
    unsubsampled Gaussian's alpha mu^2 / 2 where smaller (the bound the curve certifies at a non-integer
    order: K is convex, and subsampling never increases the divergence)."""
    a = mpf(alpha)
    lo, hi = math.floor(alpha), math.ceil(alpha)
    k_lo = 0 if lo <= 1 else (lo - 1) * sg_rdp_int_ref(q, sigma, sens, lo)
    k_hi = (hi - 1) * sg_rdp_int_ref(q, sigma, sens, hi)
    f = a - lo
    cap = a * (mpf(sens) / mpf(sigma)) ** 2 / 2  # (the unsubsampled Gaussian's RDP, also a valid bound)
    return min(((1 - f) * k_lo + f * k_hi) / (a - 1), cap)


_SG_CASES = [(1e-3, 0.8, 1.0), (0.01, 1.1, 1.0), (0.3, 0.7, 1.0), (1.0 - 2**-20, 0.3, 1.0), (0.02, 2.5, 0.7)]
_rng_sg = random.Random(20261129)
_SG_CASES += [(10 ** _rng_sg.uniform(-6, -0.01), _rng_sg.uniform(0.3, 5.0), _rng_sg.uniform(0.5, 2.0))
              for _ in range(6)]


@pytest.mark.parametrize("q, sigma, sens", _SG_CASES)
def test_subsampled_gaussian_rdp_is_an_upper_bound(q, sigma, sens):
    """``SubsampledGaussian.rdp`` at integer orders (the binomial sum, summed in floats with lgamma) and
    between them (the chord of the CGF) is never below the mpmath sum, and within 1e-10 of it; the
    Poisson-subsampled Gaussian of the generic subsampling wrapper likewise (its K(l) a product, rounded
    up).  Before: sub-ulp short (q = 1 - 2^-20, sigma = 0.3, alpha = 3: 3e-18 relative)."""
    m = M.SubsampledGaussian(sigma=sigma, sample_rate=q, sensitivity=sens)
    g = M.PoissonSubsampled(M.Gaussian(sigma=sigma, sensitivity=sens), q)
    ints = [2, 3, 5, 16, 64]
    with mp.workdps(60):
        for a in ints:
            ref = sg_rdp_int_ref(q, sigma, sens, a)
            for mech in (m, g):
                got = float(mech.rdp([float(a)])[0])
                assert mp.mpf(got) >= ref, (mech, a, got, mp.nstr(ref, 20))
                assert got <= float(ref) * (1 + 1e-10) + 1e-300, (mech, a, got)
        for a in (1.5, 2.5, 7.3, 33.9):
            ref = sg_rdp_chord_ref(q, sigma, sens, a)
            got = float(m.rdp([a])[0])
            assert mp.mpf(got) >= ref, (a, got, mp.nstr(ref, 20))
            assert got <= float(ref) * (1 + 1e-10) + 1e-300, (a, got)


@pytest.mark.parametrize("eps, q", [(1.0, 0.01), (1e-9, 0.3), (30.0, 1e-4), (0.5, 0.5 + 2**-30)])
def test_poisson_subsampled_pure_epsilon_rounds_up(eps, q):
    """log(1 + q (e^eps - 1)) of the base's pure epsilon: never below the mpmath value, within 8 ulps."""
    m = M.PoissonSubsampled(M.Laplace(scale=1.0 / eps), q)
    with mp.workdps(60):
        ref = mp.log(1 + mpf(q) * mp.expm1(mpf(m.base.pure_epsilon)))
    got = m.pure_epsilon
    assert mp.mpf(got) >= ref
    assert got <= float(ref) * (1 + 8 * U) + 1e-300


def test_gnss_upper_bound_adds_its_gaussian_term_rounded_up():
    """GNSSUpperBound: the core GNSS curve (its own certified value, taken as given) plus
    alpha / (2 sigma_2^2) is never below the exact real sum of those two (mpmath), and within 4 ulps."""
    rng = random.Random(7)
    core_cls = M.GNSS
    for _ in range(40):
        beta, s_s, s_2 = rng.uniform(1e-3, 0.05), rng.uniform(0.5, 5.0), rng.uniform(0.3, 7.0)
        m = M.GNSSUpperBound(beta=beta, sigma_s=s_s, sigma_2=s_2, delta_2=1e-6)
        al = np.array([rng.uniform(1.01, 9.0) for _ in range(4)])
        core = core_cls(sigma=s_s, beta=beta).rdp(al)
        got = m.rdp(al)
        with mp.workdps(50):
            for a, c, g in zip(al, core, got, strict=True):
                ref = mpf(c) + mpf(a) / (2 * mpf(s_2) ** 2)
                assert mp.mpf(float(g)) >= ref, (beta, s_s, s_2, a)
                assert float(g) <= float(ref) * (1 + 4 * U)


@pytest.mark.parametrize("q, sigma, sens", _SG_CASES[:6])
def test_binomial_subsampling_transform_is_an_upper_bound(q, sigma, sens):
    """``gnmax.poisson_subsampled_rdp`` (the binomial transform of a base curve; here the Gaussian's, for
    which the tight form is the subsampled Gaussian's exact sum) at integer orders: never below the mpmath
    sum, within 1e-9 of it."""
    from mechanisms.gnmax import subsampled_gaussian_rdp

    with mp.workdps(60):
        for a in (2, 3, 5, 16, 64):
            ref = sg_rdp_int_ref(q, sigma, sens, a)
            got = float(subsampled_gaussian_rdp([float(a)], sigma, q, sens)[0])
            assert mp.mpf(got) >= ref, (a, got, mp.nstr(ref, 20))
            assert got <= float(ref) * (1 + 1e-9) + 1e-300, (a, got)
