"""Issue 3 acceptance: the Poisson-subsampled Gaussian (DP-SGD), RDP and characteristic-function routes.

Independent references (``tests/reference.py`` and the mpmath code below):

* ``subsampled_gaussian_rdp``: exact integer-order RDP, exact binomials in mpmath (Zhu & Wang 2019;
Mironov, Talwar & Zhang 2019);
* ``subsampled_gaussian_rdp_quad``: both Renyi divergences (remove = D(P||Q), add = D(Q||P)) at real alpha by
  mpmath quadrature;
* ``_mgf_quad`` (here): E_P[e^{sL}] of both dominating pairs at complex s by mpmath quadrature;
* ``subsampled_gaussian_delta``: a rigorous [lower, upper] bracket of the k-fold privacy profile from an
  independent lattice discretisation + FFT (no characteristic function);
* ``rdp_to_eps_balle``: the improved RDP conversion over a finite list of integer orders;
* reference values: the subsampled-RDP table (mpmath) and the AFA / FFT fixtures of Zhu, Dong & Wang 2022
  (sigma = 2), with their delta fixtures.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import reference as ref

from accountant import PrivacyAccountant
from conversions import contour
from mechanisms import Gaussian, SubsampledGaussian
from mechanisms.sg_envelope import envelope_mass_margin

# -------------------------------------------------------------------------------- RDP

Q_GRID = [1e-4, 0.01, 0.1, 0.5, 1.0]
SIGMA_GRID = [0.5, 1.0, 2.0, 5.0]
ALPHA_GRID = [2, 3, 8, 32, 256]


@pytest.mark.parametrize("sigma", SIGMA_GRID)
@pytest.mark.parametrize("q", Q_GRID)
def test_rdp_matches_exact_integer_formula(q, sigma):
    """Library RDP == mpmath exact binomial formula to 1e-8 relative (integer orders)."""
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    got = np.asarray(mech.rdp(np.array(ALPHA_GRID, dtype=float)))
    want = np.array([ref.subsampled_gaussian_rdp(a, q, sigma) for a in ALPHA_GRID])
    np.testing.assert_allclose(got, want, rtol=1e-8, atol=0)


SPEC01_TIGHT = [  # subsampled-RDP reference table, Gaussian rows (tight L(alpha)), (sigma, q, alpha, value)
    (1.0, 0.001, 2, 1.71828035221e-6), (1.0, 0.001, 10, 8.78532529337e-6), (1.0, 0.001, 100, 43.0224694152),
    (1.0, 0.01, 3, 2.64637574585e-4), (1.0, 0.01, 10, 0.0382704188949), (1.0, 0.01, 32, 11.246275937),
    (1.0, 0.1, 10, 2.44281637338), (1.0, 0.5, 2, 0.357374019509), (1.0, 0.5, 10, 4.22997371075),
    (5.0, 0.001, 100, 2.04884750703e-6), (5.0, 0.01, 100, 2.12710937836e-4), (5.0, 0.1, 100, 0.0371026976762),
    (5.0, 0.5, 100, 1.31969891623), (0.7, 0.01, 5, 0.0225105655789), (0.7, 0.5, 10, 9.43391811042),
]


@pytest.mark.parametrize("sigma,q,alpha,value", SPEC01_TIGHT)
def test_rdp_spec01_reference_values(sigma, q, alpha, value):
    got = float(SubsampledGaussian(sigma=sigma, sample_rate=q).rdp(float(alpha))[()])
    assert got == pytest.approx(value, rel=1e-9)


@pytest.mark.parametrize("sigma", [0.3, 1.0, 4.0])
def test_q1_equals_gaussian(sigma):
    """q = 1 reduces to the Gaussian mechanism: RDP (integer and fractional), log-MGF, certificates."""
    sub = SubsampledGaussian(sigma=sigma, sample_rate=1.0)
    gau = Gaussian(sigma=sigma)
    al = np.array([1.01, 1.5, 2.0, 2.5, 3.0, 7.25, 32.0, 256.0, 1e4])
    np.testing.assert_allclose(sub.rdp(al), gau.rdp(al), rtol=4e-16, atol=0)
    s = np.array([0.5, 2.0, 1 + 3j, 0.2 + 40j, 7j])
    for d in ("remove", "add"):
        np.testing.assert_allclose(sub.log_mgf(s, d), gau.log_mgf(s, d), rtol=1e-15, atol=0)
    a = PrivacyAccountant().compose(sub, times=30)
    b = PrivacyAccountant().compose(gau, times=30)
    for m in ("cf", "rdp"):
        assert a.epsilon(1e-6, method=m) == pytest.approx(b.epsilon(1e-6, method=m), rel=1e-10)
    assert a.epsilon(1e-6, method="cf") >= ref.gaussian_epsilon(1e-6, math.sqrt(30) / sigma)


@pytest.mark.parametrize("sigma", [0.5, 1.1, 5.0])
@pytest.mark.parametrize("q", [1e-5, 0.003, 0.2, 0.9])
def test_rdp_monotone_in_alpha(q, sigma):
    al = np.concatenate([1 + np.geomspace(1e-3, 1.0, 30), np.linspace(2.0, 40.0, 300),
                         np.geomspace(40.0, 3e3, 80)])
    v = np.asarray(SubsampledGaussian(sigma=sigma, sample_rate=q).rdp(al))
    assert np.all(np.isfinite(v)) and np.all(v >= 0)
    assert np.all(np.diff(v) >= -1e-13 * np.abs(v[1:])), np.min(np.diff(v))


@pytest.mark.parametrize("sigma", [0.5, 1.1, 5.0])
def test_rdp_monotone_in_q(sigma):
    qs = np.concatenate([[0.0], np.geomspace(1e-7, 1.0, 60)])
    al = np.array([1.5, 2.0, 3.7, 8.0, 32.0, 256.0])
    rows = np.array([np.asarray(SubsampledGaussian(sigma=sigma, sample_rate=float(q)).rdp(al)) for q in qs])
    assert np.all(rows[0] == 0.0)
    assert np.all(np.diff(rows, axis=0) >= -1e-13 * np.abs(rows[1:])), np.min(np.diff(rows, axis=0))


@pytest.mark.parametrize("q,sigma,alpha,fwd,rev", [
    (0.5, 1.0, 5, 1.657893866, 0.3105371748),   # numerically integrated divergences
    (0.01, 0.7, 12, 7.221075957, 0.001893946114),
    (0.1, 2.0, 4.5, None, None),
    (0.9, 0.8, 3.0, None, None),
])
def test_add_direction_below_remove_and_below_library(q, sigma, alpha, fwd, rev):
    """Quadrature: D(Q||P) (add) <= D(P||Q) (remove) <= library RDP (the worst case over both)."""
    d_rem = ref.subsampled_gaussian_rdp_quad(alpha, q, sigma, "remove")
    d_add = ref.subsampled_gaussian_rdp_quad(alpha, q, sigma, "add")
    if fwd is not None:
        assert d_rem == pytest.approx(fwd, rel=1e-9) and d_add == pytest.approx(rev, rel=1e-9)
    lib = float(SubsampledGaussian(sigma=sigma, sample_rate=q).rdp(float(alpha))[()])
    assert d_add <= d_rem
    assert d_rem <= lib * (1 + 1e-12)
    if float(alpha).is_integer():
        assert lib == pytest.approx(d_rem, rel=1e-9)


@pytest.mark.parametrize("q,sigma,alpha,exact_spec,interp_spec", [
    (0.1, 1.0, 1.5, 0.0117345922, 0.01703686324),   # numerically integrated
    (0.1, 1.0, 2.5, 0.02350372726, 0.02682048795),
    (0.1, 1.0, 7.5, 1.110289509, 1.132062427),
    (0.01, 2.0, 3.3, None, None),
    (0.5, 0.8, 4.75, None, None),
    (0.003, 1.1, 17.2, None, None),
])
def test_fractional_alpha_interpolation_is_upper_bound(q, sigma, alpha, exact_spec, interp_spec):
    """Exact (quadrature) divergences at fractional alpha <= the library's CGF interpolation
    (docs/derivations/subsampling.md section 2)."""
    lib = float(SubsampledGaussian(sigma=sigma, sample_rate=q).rdp(alpha)[()])
    d_rem = ref.subsampled_gaussian_rdp_quad(alpha, q, sigma, "remove")
    d_add = ref.subsampled_gaussian_rdp_quad(alpha, q, sigma, "add")
    assert max(d_rem, d_add) <= lib
    # the interpolation itself, from exact integer orders (R10)
    lo, hi = math.floor(alpha), math.ceil(alpha)
    k_lo = 0.0 if lo == 1 else (lo - 1) * ref.subsampled_gaussian_rdp(lo, q, sigma)
    k_hi = (hi - 1) * ref.subsampled_gaussian_rdp(hi, q, sigma)
    interp = ((hi - alpha) * k_lo + (alpha - lo) * k_hi) / (alpha - 1)
    assert lib == pytest.approx(min(interp, alpha / (2 * sigma**2)), rel=1e-9)
    if exact_spec is not None:
        assert d_rem == pytest.approx(exact_spec, rel=1e-8)
        assert lib == pytest.approx(interp_spec, rel=1e-9)


# -------------------------------------------------------------------------------- log-MGF

def _mgf_quad(s, q, sigma, direction, dps=20):
    """E_P[e^{sL}] of the dominating pair by mpmath quadrature (sensitivity 1), complex s, Re s >= 0.

    r(x) = p(x)/q(x) = 1 - q + q e^{(2x-1)/(2 sigma^2)} with x ~ N(0, sigma^2) under Q:
      remove (P = mixture, Q = N(0, s^2), L = log r):   M(s) = E_Q[r^{s+1}]
      add    (P = N(0, s^2), Q = mixture, L = -log r):  M(s) = E_{N(0,s^2)}[r^{-s}]
    Gauss-Legendre on many short pieces (breakpoints at 0, 1/2, 1 and around the tilted peak x ~ Re(s + 1)),
    so that the oscillation e^{i Im(s) log r} is resolved; checked against tanh-sinh to ~1e-17.
    """
    with mp.workdps(dps):
        s = mp.mpc(s)
        qq, sg = mp.mpf(q), mp.mpf(sigma)
        expo = s + 1 if direction == "remove" else -s

        def f(x):
            logr = mp.log1p(qq * mp.expm1((2 * x - 1) / (2 * sg * sg)))
            return mp.npdf(x, 0, sg) * mp.exp(expo * logr)

        beta = max(float(mp.re(expo)), 0.0)
        width = 14 * float(sg)
        pts = sorted({-width, 0.0, 0.5, 1.0, beta, beta - width, beta + width, width + 1.0})
        n = max(2, int(4 * (1 + abs(float(mp.im(s))) / sigma**2 / 5)))
        pieces = [np.linspace(a, b, n) for a, b in zip(pts[:-1], pts[1:], strict=False)]
        fine = np.unique(np.concatenate(pieces))
        return mp.quad(f, [-mp.inf] + [mp.mpf(float(x)) for x in fine] + [mp.inf], method="gauss-legendre")


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("q,sigma", [(0.01, 0.8), (0.3, 2.0), (0.9, 1.1)])
def test_log_mgf_matches_quadrature(q, sigma, direction):
    """Numerical log-MGF vs mpmath at real and complex s, both directions.

    Tolerance: the declared ``log_mgf_error`` (2e-13), relative to M(Re s), which the contour's
    floating-point bound relies on (measured: <= 1.1e-15)."""
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    svals = [0.5, 3.0, 6j, 0.5 + 3j, 2 + 10j, 1.3 - 0.7j]
    got = mech.log_mgf(np.array(svals, dtype=complex), direction)
    m_real = {}
    for s, lg in zip(svals, got, strict=True):
        c = complex(s).real
        m_ref = _mgf_quad(s, q, sigma, direction) if complex(s).imag else None
        if c not in m_real:
            m_real[c] = _mgf_quad(c, q, sigma, direction)
        m_ref = m_real[c] if m_ref is None else m_ref
        diff = abs(mp.exp(mp.mpc(complex(lg))) - m_ref)
        assert diff <= math.expm1(mech.log_mgf_error) * abs(m_real[c]), (s, complex(lg), m_ref)
    # M(0) = 1: no infinite-loss mass
    assert abs(mech.log_mgf(np.array([0j]), direction)[0]) <= 1e-12


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("q,sigma", [(0.01, 0.8), (0.3, 2.0)])
def test_log_mgf_on_a_line_matches_quadrature(q, sigma, direction):
    """Nodes on one line (the contour's grids) go through the line kernel (150 equally spaced nodes: its
    NUFFT path; the direct path, blocks of 64 nodes with phases by rotation, is compared with it in
    tests/test_nufft.py): against mpmath at nodes spread over the line, within the declared
    ``log_mgf_error`` relative to M(Re s)."""
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    c, h, n = 2.0, 0.5, 150
    got = mech.log_mgf(c + 1j * h * np.arange(n), direction)
    m_c = _mgf_quad(c, q, sigma, direction)
    for k in (0, 1, 15, 17, 63, 64, 100, 149):
        m_ref = _mgf_quad(complex(c, h * k), q, sigma, direction)
        diff = abs(mp.exp(mp.mpc(complex(got[k]))) - m_ref)
        assert diff <= math.expm1(mech.log_mgf_error) * abs(m_c), (k, complex(got[k]), m_ref)


def test_log_mgf_integer_orders_equal_exact_rdp():
    """Remove direction at real s = alpha - 1: log M(s) = (alpha - 1) eps(alpha), exact binomial formula."""
    for q, sigma in ((0.01, 0.8), (0.3, 2.0)):
        mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
        al = np.array([2, 3, 8, 20])
        got = np.real(mech.log_mgf((al - 1).astype(complex), "remove"))
        want = [(a - 1) * ref.subsampled_gaussian_rdp(int(a), q, sigma) for a in al]
        # log M is certified to the declared absolute error (plus rounding of the larger values)
        np.testing.assert_allclose(got, want, rtol=1e-15, atol=mech.log_mgf_error)


# -------------------------------------------------------------------------------- DP-SGD settings

DPSGD = [
    (0.01, 1.1, 10_000),
    (0.004, 1.1, 100_000),
    (0.1, 2.0, 1_000),
    (0.001, 0.8, 100_000),
    (256 / 60000, 1.1, 14_100),
]


@pytest.mark.parametrize("q,sigma,T", DPSGD, ids=lambda x: f"{x:.4g}")
def test_dpsgd_settings_cf_tight_and_below_rdp(q, sigma, T):
    """cf eps upper within 0.1% of its certified lower bound and below the RDP eps; RDP eps within 0.1% of the
    best integer-order RDP accountant value (exact RDP at orders 2..256 + Balle et al. 2020 conversion)."""
    delta = 1e-5
    acct = PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=T)
    cf = acct.certificate(delta=delta, method="cf")
    rdp = acct.certificate(delta=delta, method="rdp")
    assert cf.lower_bound is not None and cf.lower_bound <= cf.epsilon
    assert cf.epsilon - cf.lower_bound <= 1e-3 * cf.epsilon
    assert cf.epsilon < rdp.epsilon
    published = ref.rdp_to_eps_balle(lambda a: T * ref.subsampled_gaussian_rdp(a, q, sigma), delta,
                                     range(2, 257))
    assert rdp.epsilon <= published * (1 + 1e-9)  # continuous alpha can only help
    assert rdp.epsilon >= published * (1 - 1e-3)
    auto = acct.certificate(delta=delta)
    assert auto.method == "cf" and auto.epsilon == cf.epsilon


# AFA / FFT reference values (sigma = 2, delta = 1e-5): (gamma, k, AFA remove, FFT remove, AFA add, FFT add)
TABLE_H = [
    (0.01, 100, 0.189794, (0.189544, 0.190044), 0.155229, (0.154979, 0.155479)),
    (0.01, 200, 0.269126, (0.268626, 0.269626), 0.232468, (0.231968, 0.232968)),
    (0.01, 500, 0.431982, (0.430732, 0.433232), 0.392264, (0.391014, 0.393514)),
    (0.01, 1000, 0.622030, (0.619530, 0.624530), 0.579691, (0.577191, 0.582191)),
    (0.01, 1500, 0.771645, (0.767895, 0.775395), 0.727605, (0.723855, 0.731355)),
    (0.02, 100, 0.404725, (0.404475, 0.404975), 0.328249, (0.327999, 0.328499)),
    (0.02, 200, 0.573248, (0.572748, 0.573748), 0.491951, (0.491451, 0.492451)),
    (0.02, 500, 0.920922, (0.919672, 0.922172), 0.832126, (0.830876, 0.833376)),
    (0.02, 1000, 1.329675, (1.327175, 1.332175), 1.233976, (1.231476, 1.236476)),
    (0.02, 1500, 1.653765, (1.650016, 1.657516), 1.553332, (1.549583, 1.557083)),
]


@pytest.mark.parametrize("gamma,k,afa_rem,fft_rem,afa_add,fft_add", TABLE_H,
                         ids=[f"g{r[0]}-k{r[1]}" for r in TABLE_H])
def test_spec02_table_h(gamma, k, afa_rem, fft_rem, afa_add, fft_add):
    """Per direction: certified [lower, upper] inside the FFT interval, matches the AFA value to 1e-6;
    the accountant reports the worse (remove) direction."""
    mech = SubsampledGaussian(sigma=2.0, sample_rate=gamma)
    for direction, afa, (lo, hi) in (("remove", afa_rem, fft_rem), ("add", afa_add, fft_add)):
        b = contour.epsilon_bounds(contour.ComposedPLD([(mech, k)], direction), 1e-5)
        assert lo <= b.lower <= b.upper <= hi
        assert b.upper == pytest.approx(afa, abs=1.5e-6)
    cert = PrivacyAccountant().compose(mech, times=k).certificate(delta=1e-5, method="cf")
    assert cert.details["direction"] == "remove"
    assert cert.epsilon == pytest.approx(afa_rem, abs=1.5e-6)


# delta fixtures of the same settings (sigma = 2): (gamma, k, eps, delta_remove, delta_add, rel. tolerance
# of add)
DELTA_FIXTURES = [
    (0.01, 1000, 0.5, 1.211789744e-04, 6.546790408e-05, 1e-8),
    (0.01, 1000, 1.0, 3.99184962e-10, 6.3313e-12, 1e-4),
    (0.02, 500, 0.5, 2.281701315e-03, 1.589988494e-03, 1e-8),
    (0.02, 500, 1.0, 2.846940780e-06, 3.206158311e-07, 1e-8),
    (0.02, 1500, 1.5, 4.078140890e-05, 1.749636401e-05, 1e-8),
]
_REF_BRACKET = {(0.01, 1000, 1.0)}  # FFT oracle (~1 s per direction) on one row (tiny add delta 6.3e-12)


@pytest.mark.parametrize("gamma,k,eps,d_rem,d_add,tol_add", DELTA_FIXTURES)
def test_spec02_delta_fixtures(gamma, k, eps, d_rem, d_add, tol_add):
    mech = SubsampledGaussian(sigma=2.0, sample_rate=gamma)
    for direction, val, tol in (("remove", d_rem, 1e-8), ("add", d_add, tol_add)):
        b = contour.delta_bounds(contour.ComposedPLD([(mech, k)], direction), eps)
        assert b.lower <= b.upper
        assert b.estimate == pytest.approx(val, rel=max(tol, 3e-8))
        if (gamma, k, eps) in _REF_BRACKET:
            lo, hi = ref.subsampled_gaussian_delta(eps, gamma, 2.0, k, direction)
            assert b.lower <= hi and lo <= b.upper  # brackets intersect (both rigorous)
            assert lo <= b.estimate <= hi
    cert = PrivacyAccountant().compose(mech, times=k).certificate(epsilon=eps, method="cf")
    assert cert.delta == pytest.approx(max(d_rem, d_add), rel=1e-7)


def test_certified_eps_valid_against_fft_oracle():
    """For a DP-SGD setting: the FFT oracle's LOWER bound on delta at the certified eps is <= delta (the
    certificate is not violated), and its UPPER bound at the certified lower eps is >= delta (the lower bound
    is sound)."""
    q, sigma, T, delta = 0.05, 1.5, 300, 1e-6
    cert = PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=T).certificate(delta=delta, method="cf")
    dirs = ("remove", "add")
    worst_lo = max(ref.subsampled_gaussian_delta(cert.epsilon, q, sigma, T, d)[0] for d in dirs)
    worst_hi = max(ref.subsampled_gaussian_delta(cert.lower_bound, q, sigma, T, d)[1] for d in dirs)
    assert worst_lo <= delta <= worst_hi


# -------------------------------------------------------------------------------- schedules

def _distinct_sigma_schedule(sigmas, steps_each: int, q: float = 0.01):
    """The same schedule recorded three ways: one step() call per step, step(steps=n) per segment, and a
    separate accountant composing the parts."""
    a = PrivacyAccountant()
    for s in sigmas:  # training loop: one step() call per step
        for _ in range(steps_each):
            a.step(sigma=s, sample_rate=q)
    b = PrivacyAccountant()
    for s in sigmas:
        b.step(sigma=s, sample_rate=q, steps=steps_each)
    c = PrivacyAccountant()
    for s in sigmas:
        c.compose(SubsampledGaussian(sigma=s, sample_rate=q), times=steps_each)
    return a, b, c


def test_heterogeneous_schedule_equals_composition_of_parts():
    """sigma changing every 100 steps: per-step step() calls == batched parts == a separate accountant
    composing the parts (same ledger, same certificates); the composed RDP equals the sum of the parts'
    exact RDP; the certified eps lies strictly between the homogeneous schedules with the smallest and the
    largest sigma."""
    q = 0.01
    sigmas = [1.0, 1.4, 2.0]
    a, b, c = _distinct_sigma_schedule(sigmas, 100, q)
    assert a.ledger == b.ledger == c.ledger
    assert a.certificate(delta=1e-5, method="cf") == c.certificate(delta=1e-5, method="cf")
    ra = a.certificate(delta=1e-5, method="rdp")
    assert ra == b.certificate(delta=1e-5, method="rdp") == c.certificate(delta=1e-5, method="rdp")
    for n in (2, 5, 16):
        want = sum(100 * ref.subsampled_gaussian_rdp(n, q, s) for s in sigmas)
        assert float(a.rdp(float(n))[()]) == pytest.approx(want, rel=1e-9)
    eps = a.epsilon(1e-5, method="cf")
    lo = PrivacyAccountant().step(sigma=max(sigmas), sample_rate=q, steps=300).epsilon(1e-5, method="cf")
    hi = PrivacyAccountant().step(sigma=min(sigmas), sample_rate=q, steps=300).epsilon(1e-5, method="cf")
    assert lo < eps < hi


@pytest.mark.slow
def test_100_distinct_sigmas_same_certificate():
    """100 distinct sigma values (50 step() calls each) == batched composition.  Marked slow (two cf queries
    on 100 distinct mechanisms, ~13 s); the fast version is the 3-sigma schedule test above."""
    a, b, c = _distinct_sigma_schedule([float(s) for s in np.linspace(0.8, 2.0, 100)], 50)
    assert a.ledger == b.ledger == c.ledger
    for method in ("cf", "rdp"):
        assert a.certificate(delta=1e-5, method=method) == c.certificate(delta=1e-5, method=method)


def test_1e5_individual_steps_same_certificate():
    a = PrivacyAccountant()
    for _ in range(100_000):
        a.step(sigma=1.1, sample_rate=0.01)
    b = PrivacyAccountant().step(sigma=1.1, sample_rate=0.01, steps=100_000)
    c = PrivacyAccountant().compose(SubsampledGaussian(sigma=1.1, sample_rate=0.01), times=100_000)
    assert a.ledger == b.ledger == c.ledger
    for method in ("cf", "rdp"):
        ca = a.certificate(delta=1e-5, method=method)
        assert ca == b.certificate(delta=1e-5, method=method) == c.certificate(delta=1e-5, method=method)


# -------------------------------------------------------------------------------- robustness

def test_epsilon_valid_and_monotone_from_1e_30_to_0_1():
    """DP-SGD (q = 0.01, sigma = 1.1, T = 1e4): eps(delta) finite, bracketed to 0.1%, below the RDP route,
    strictly decreasing in delta, for delta from 1e-30 to 0.1."""
    acct = PrivacyAccountant().step(sigma=1.1, sample_rate=0.01, steps=10_000)
    deltas = [1e-30, 1e-20, 1e-14, 1e-10, 1e-5, 1e-2, 0.1]
    ups, lows = [], []
    for d in deltas:
        c = acct.certificate(delta=d, method="cf")
        assert math.isfinite(c.epsilon) and c.epsilon > 0
        assert c.lower_bound <= c.epsilon <= c.lower_bound * (1 + 1e-3)
        assert c.epsilon <= acct.epsilon(d, method="rdp")
        ups.append(c.epsilon)
        lows.append(c.lower_bound)
    assert all(a > b for a, b in zip(ups, ups[1:], strict=False))
    # brackets are consistent with monotonicity: a larger delta never has a larger true eps
    assert all(lo_next <= up for up, lo_next in zip(ups, lows[1:], strict=False))


@pytest.mark.slow
def test_small_sample_rate_few_steps_is_tight():
    """Regression (was a strict xfail): q=0.001, sigma=1, T=100, delta=1e-5: the cf route certified only
    its Chernoff bound 0.628 (the composed characteristic function decays only beyond t ~ 1/(q mu)); the
    near-atomic split now gives [0.0551618, 0.0551665].  Checked against the FFT oracle of
    ``tests/reference.py`` (true eps below 0.06) and for width."""
    q, sigma, T, delta = 0.001, 1.0, 100, 1e-5
    # independent oracle: the true eps(1e-5) is below 0.06 (both directions' rigorous upper delta < 1e-5)
    assert max(ref.subsampled_gaussian_delta(0.06, q, sigma, T, d)[1] for d in ("remove", "add")) < delta
    cert = PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=T).certificate(delta=delta, method="cf")
    assert cert.epsilon <= 0.06
    assert cert.epsilon - cert.lower_bound <= 1e-3 * cert.epsilon


def test_large_epsilon_dpsgd():
    """A weak-noise DP-SGD run (eps ~ 137) stays finite, bracketed and below the RDP route (~277)."""
    acct = PrivacyAccountant().step(sigma=0.5, sample_rate=0.5, steps=100)
    c = acct.certificate(delta=1e-5, method="cf")
    assert 100 < c.epsilon < 1e3
    assert c.lower_bound <= c.epsilon <= c.lower_bound * (1 + 1e-3)
    assert c.epsilon <= acct.epsilon(1e-5, method="rdp")
    # more steps / smaller delta never decrease eps
    assert acct.epsilon(1e-10, method="cf") > c.epsilon


# -------------------------------------------------------------------------------- persistence

def test_save_resume_after_crash_is_exact(tmp_path, monkeypatch):
    """Save mid-training, crash (also *during* a later save), load, continue: identical result."""
    q, T1, T2 = 0.01, 3000, 7000
    sched = [(1.1, T1), (1.3, T2)]
    full = PrivacyAccountant()
    for s, n in sched:
        for _ in range(n):
            full.step(sigma=s, sample_rate=q)

    path = tmp_path / "acct.json"
    run = PrivacyAccountant()
    run.step(sigma=1.1, sample_rate=q, steps=T1)
    run.save(path)
    saved = path.read_text()
    # keep training, then crash while writing the next checkpoint: the old checkpoint must survive intact
    run.step(sigma=1.3, sample_rate=q, steps=1234)
    import accountant.state as state_mod

    def boom(*_a, **_k):
        raise OSError("simulated crash during rename")

    monkeypatch.setattr(state_mod.os, "replace", boom)
    with pytest.raises(OSError):
        run.save(path)
    monkeypatch.undo()
    assert path.read_text() == saved
    assert [p.name for p in tmp_path.iterdir()] == ["acct.json"]  # no temp file left behind
    del run
    # resume from the checkpoint and redo the lost steps
    resumed = PrivacyAccountant.load(path)
    for _ in range(T2):
        resumed.step(sigma=1.3, sample_rate=q)
    assert resumed.ledger == full.ledger
    queries = ({"delta": 1e-5, "method": "cf"}, {"delta": 1e-5, "method": "rdp"},
               {"epsilon": 1.0, "method": "cf"})
    for kw in queries:
        assert resumed.certificate(**kw) == full.certificate(**kw)


def _log_mgf_floor(m, s, direction: str, lmc: float) -> float:
    """log of a lower bound on max |M(s)| over the points ``s`` (one real part, log M there ``lmc``) from
    the quadrature: its value minus its declared errors (value, phase rounding) times M(Re s); -inf where
    the error covers the value (the quadrature cannot resolve |M| there: at large t the envelope's
    contour-shift bound goes far below that floor, checked against mpmath separately)."""
    s = np.asarray(s, dtype=complex)
    rel = np.exp(m.log_mgf(s, direction).real - lmc)
    # (plus the phase rounding, which grows with t: ~1e-11 at t = 1e4)
    err = m.log_mgf_error + m.log_mgf_phase_error(float(s.real.flat[0]), float(np.max(np.abs(s.imag))),
                                                  direction)
    low = float(np.max(rel)) - math.expm1(err)
    return math.log(low) + lmc if low > 0.0 else -math.inf


def _check_envelope(m, c: float, direction: str, ts: np.ndarray):
    """The envelope at line c is non-increasing on ``ts`` and, at each t, above the resolved |M| at
    t x (1, 1.003, 1.05, 1.3, 2, 5) (``_log_mgf_floor``); returns (envelope, log M(c))."""
    env = m.log_envelope_fn(c, direction)
    lmc = m.log_mgf_real(c, direction)
    vals = np.array([env(t) for t in ts])
    assert np.all(np.diff(vals) <= 1e-12)
    for t, e in zip(ts, vals, strict=True):
        true = _log_mgf_floor(m, c + 1j * t * np.array([1.0, 1.003, 1.05, 1.3, 2.0, 5.0]), direction, lmc)
        assert true <= e + 1e-12, (c, t, true, e)
    return env, lmc


@pytest.mark.parametrize("q,sigma", [(1e-3, 0.8), (0.01, 1.1), (0.2, 2.0), (0.5, 1.0), (0.9, 0.7)])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_envelope_bounds_the_mgf_and_is_not_weak(q, sigma, direction):
    """log_envelope_fn(c)(t) >= log|M(c + it')| for every t' >= t (the truncation bound relies on it),
    is non-increasing, and (small q, where t = 3 lies in the curvature regime t <= 2 TV / M(c))
    captures the curvature: at t = 3 its log-decay is >= 1/4 of the true one.

    |M| comes from the log-MGF quadrature, itself checked against mpmath in this file."""
    from mechanisms import SubsampledGaussian

    m = SubsampledGaussian(sigma=sigma, sample_rate=q)
    for c in (0.5, 4.0):
        env, lmc = _check_envelope(m, c, direction, np.geomspace(0.01, 3000.0, 120))
        if q <= 0.2:
            true3 = float(m.log_mgf(np.array([c + 3j]), direction)[0].real) - lmc
            assert env(3.0) - lmc <= 0.25 * true3


@pytest.mark.parametrize("q,sigma,c,direction", [
    (1e-3, 0.3, 0.18, "remove"), (1e-3, 0.3, 0.5, "add"), (1e-5, 0.4, 0.5, "remove"),
    (1e-2, 0.05, 0.02, "remove"), (1e-2, 0.05, 0.5, "add")])
def test_envelope_split_bound_near_atomic(q, sigma, c, direction):
    """Near-atomic laws (small q and sigma: almost all tilted mass within ~q e^{-mu^2} of log(1 - q),
    where the loss density peaks at ~1e7 or overflows): the curvature bands cannot resolve the atom and
    TV / t only acts past t ~ 1e7, so the bound comes from the split of the law at an output x_k (mass
    on one side, integration by parts on the other).  It must stay above log|M| (quadrature, checked
    against mpmath in this file and below at t = 30) for every t' >= t, be non-increasing, and decay:
    at t = 1000 at least 1/100 of the true log-decay (it was 0 before the split bound: a contour at
    q = 1e-3, sigma = 0.3, T = 1e5 needed its whole node cap for a 1 % bracket)."""
    m = SubsampledGaussian(sigma=sigma, sample_rate=q)
    env, lmc = _check_envelope(m, c, direction, np.geomspace(0.01, 2000.0, 36))
    true_1000 = float(m.log_mgf(np.array([c + 1000j]), direction)[0].real) - lmc
    # (the envelope's M(c) carries the rounding margin of its grid sum, ~1e-12 here)
    margin = envelope_mass_margin(c, q, 1.0 / sigma, direction == "add", min(0.004, 0.04 * sigma), 0.0, 1.0,
                                  -1, lmc)
    assert env(1000.0) - lmc - margin <= 0.01 * true_1000 < 0.0
    if sigma == 0.3:
        ref = _mgf_quad(c + 30j, q, sigma, direction)
        assert float(mp.log(abs(ref))) <= env(30.0) + 1e-12


def test_contour_shift_bound_drops_rows_it_cannot_read():
    """``sg_shift_bound``: a row with a NaN is dropped, never read as a negligible point; so is a row
    whose exponent jumps to -inf inside its bulk (the resolution rule); with no usable row the bound is
    +inf (the other bounds then stand)."""
    from mechanisms._sg_envelope_kernels import sg_shift_bound

    x = np.linspace(-8.0, 8.0, 801)
    a = np.vstack([-0.5 * x * x, -0.5 * x * x])
    b = np.zeros_like(a)
    clean = sg_shift_bound(10.0, a[:1], b[:1], x[1] - x[0])
    assert clean >= 0.5 * math.log(2.0 * math.pi)  # (1.1 x the Gaussian integral, in log)
    a[1, 400] = np.nan
    assert sg_shift_bound(10.0, a, b, x[1] - x[0]) == clean
    assert sg_shift_bound(10.0, a[1:], b[1:], x[1] - x[0]) == math.inf
    b[0, 1] = np.inf  # (exponent -inf in the far tail: a valid point (integrand 0), counted as e^-60)
    assert abs(sg_shift_bound(10.0, a[:1], b[:1], x[1] - x[0]) - clean) < 1e-12
    b[0, 200] = np.inf  # (... but inside the bulk the rule cannot read the row: dropped)
    assert sg_shift_bound(10.0, a[:1], b[:1], x[1] - x[0]) == math.inf


def _part_mgf_quad(s, q, sigma, xcut, tau, part, direction, dps=30):
    """M(s) of a split part by mpmath: int phi(x) e^{w l(x)} W(x) dx with w = s + 1 (remove) or -s (add),
    W(x) = Phi((x - xcut) / tau) (big part) or Phi((xcut - x) / tau) (core), Gauss-Legendre on pieces
    short enough for the phase t l'(x) <= t mu (a few nodes per oscillation), [xcut - 14 tau, xcut + 12]
    (the weight is below e^-98 left of it, the Gaussian below e^-60 right of it, for xcut >= 5)."""
    with mp.workdps(dps):
        qq, mu, xc, ta = mp.mpf(q), 1 / mp.mpf(sigma), mp.mpf(xcut), mp.mpf(tau)
        w = mp.mpc(s) + 1 if direction == "remove" else -mp.mpc(s)

        def f(x):
            weight = mp.ncdf((x - xc) / ta) if part == 1 else mp.ncdf((xc - x) / ta)
            return mp.npdf(x) * mp.exp(w * mp.log(1 - qq + qq * mp.exp(mu * x - mu * mu / 2))) * weight

        a, b = xcut - 14 * tau, xcut + 12
        n = int(max(200, (b - a) * abs(complex(s).imag) / sigma / 2))
        pts = [mp.mpf(a) + (mp.mpf(b) - mp.mpf(a)) * k / n for k in range(n + 1)]
        return mp.quad(f, [-mp.inf] + pts + [mp.inf], method="gauss-legendre")


def test_envelope_contour_shift_bound_matches_mpmath_far_out():
    """Far out in t the envelope's contour-shift bound must hold where |M| is below the quadrature's floor
    of 2e-13 M(c) (only mpmath resolves it there): the unsplit pair at t = 2183 (|M| ~ e^-36, the
    bound ~ e^-35); and for a split part (weight width tau = 0.017), both directions, at t = 1000-1500
    against mpmath too.  Before that bound the envelope fell like 1/t there (-4.6 at t = 1000 for a
    big part whose |M| is ~e^-34 of M(c))."""
    from mechanisms.subsampled_part import SubsampledGaussianPart

    m = SubsampledGaussian(sigma=2.0, sample_rate=0.2)
    t = 2182.9438638682273
    ref = float(mp.log(abs(_mgf_quad(0.5 + 1j * t, 0.2, 2.0, "remove"))))
    lmc = m.log_mgf_real(0.5)
    assert ref < lmc + math.log(2e-13)  # (beyond the quadrature: the case this test is for)
    assert ref <= m.log_envelope_fn(0.5)(t) <= lmc - 30.0
    args = (1.9234942846287977, 0.007797471118141787, 5.1493612926637775, 0.01719237282291593, 1)
    part = SubsampledGaussianPart(args[0], args[1], 1.0, args[2], args[3], args[4])
    for direction, c, t in (("add", 0.26, 1500.0), ("remove", 1.5, 1000.0)):
        ref = float(mp.log(abs(_part_mgf_quad(c + 1j * t, args[1], args[0], *args[2:], direction, dps=20))))
        lmc = part.log_mgf_real(c, direction)
        env = part.log_envelope_fn(c, direction)(t)
        assert ref <= env <= lmc - 1.5, (direction, ref, env, lmc)
    # a deep claim: a big part (sigma = 0.27, tau = 0.034) whose bound at t = 100 is ~e^-53 of M(c), far
    # below every other bound; mpmath at 45 digits resolves |M| ~ e^-88 of M(c)
    q, sigma, c, xcut, tau = 0.03982660034226334, 0.2685133654145676, 0.19688988948193517, 5.4235, 0.03443
    part = SubsampledGaussianPart(sigma, q, 1.0, xcut, tau, 1)
    ref = float(mp.log(abs(_part_mgf_quad(c + 100j, q, sigma, xcut, tau, 1, "remove", dps=45))))
    lmc = part.log_mgf_real(c)
    env = part.log_envelope_fn(c)
    assert ref <= env(100.0) <= lmc - 40.0
    assert env(math.inf) <= env(1e30) <= env(1e6) <= env(100.0)  # (bounded walk up to any t)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_envelope_bounds_the_mgf_on_random_settings(seed):
    """The decay envelope of the subsampled Gaussian and of its split parts never falls below log|M|
    (by the quadrature, itself checked against mpmath in this file and in test_split.py) on random
    settings: q in [1e-6, 0.8], sigma in [0.25, 5], c in [0.1, 20], both directions, parts with cuts in
    [-1, 4] and tau down to 0.05; t from 0.01 to 3000, each against |M| at t x (1, 1.01, 1.1, 1.5, 2, 4).
    A property test of the whole construction (TV, curvature bands, margins); the premise that every
    histogram mass lies inside its bin is tested exactly below."""
    from mechanisms.subsampled_part import SubsampledGaussianPart

    rng = np.random.default_rng(seed)
    ts = np.geomspace(0.01, 3000.0, 40)
    for _ in range(40):
        q, sigma = 10 ** rng.uniform(-6, -0.1), 10 ** rng.uniform(-0.6, 0.7)
        c, direction = 10 ** rng.uniform(-1, 1.3), ("remove", "add")[int(rng.integers(0, 2))]
        if rng.random() < 0.5:
            m = SubsampledGaussian(sigma=sigma, sample_rate=q)
        else:
            cut, tau = float(rng.uniform(-1, 4)), float(10 ** rng.uniform(-1.3, 0.3))
            m = SubsampledGaussianPart(sigma, q, 1.0, cut, tau, int(rng.integers(0, 2)))
        env = m.log_envelope_fn(c, direction)
        lmc = m.log_mgf_real(c, direction)
        for t in ts:
            true = _log_mgf_floor(m, c + 1j * t * np.array([1.0, 1.01, 1.1, 1.5, 2.0, 4.0]), direction, lmc)
            assert true <= float(env(t)) + 1e-12, (type(m).__name__, q, sigma, c, direction, t)


@pytest.mark.parametrize("part,xcut,tau", [(-1, 0.0, 1.0), (0, 1.5, 0.3), (1, 1.5, 0.3)])
@pytest.mark.parametrize("add", [False, True])
def test_envelope_constants_cached_passes_equal_streaming(part, xcut, tau, add):
    """The envelope constants keep per-point values between their passes on grids up to
    ``cache_points``; past it they recompute them (bounded memory).  Both paths must give the same
    constants and histograms bit for bit (the bound tested above holds for either)."""
    from mechanisms._sg_envelope_kernels import sg_envelope_constants

    for q, mu, c in ((1e-3, 1.25, 4.0), (0.01, 1 / 1.1, 6.7), (0.3, 0.5, 0.4), (0.01, 5.0, 2.0)):
        args = (c, q, mu, add, min(0.004, 0.04 / mu), xcut, tau, part)
        outs = []
        for cache_points in (1 << 22, 0):
            bins, hist, cuts = np.zeros(1 << 14), np.zeros(1 << 13), np.zeros((256, 4))
            outs.append((sg_envelope_constants(*args, bins, hist, cuts, cache_points), bins, hist, cuts))
        (r1, b1, h1, k1), (r2, b2, h2, k2) = outs
        assert np.isfinite(r1[1]) and h1.sum() > 0.0  # the case builds its histogram
        assert r1 == r2, args
        assert np.array_equal(b1, b2) and np.array_equal(h1, h2) and np.array_equal(k1, k2), args


@pytest.mark.parametrize("part,xcut,tau", [(-1, 0.0, 1.0), (0, 1.5, 0.3), (1, 1.5, 0.3)])
@pytest.mark.parametrize("add", [False, True])
def test_envelope_curvature_constant_is_the_binned_pair_sum(part, xcut, tau, add):
    """V, the curvature constant of the envelope, is 2 sum_{d=2}^{63} ((d - 1) b)^2 sum_i m_i m_{i+d} over
    the normalised fine-bin masses m the kernel leaves in ``bins``, with b = r / 64 and r = pi / (2 TV).
    Recomputed here by numpy (dot products of shifted slices, pairwise summation: a different order than
    the kernel's), so equal to ~1e-13 relative."""
    from mechanisms._sg_envelope_kernels import sg_envelope_constants

    for q, mu, c in ((1e-3, 1.25, 4.0), (0.01, 1 / 1.1, 6.7), (0.3, 0.5, 0.4), (1e-5, 2.5, 1.7)):
        bins, hist, cuts = np.zeros(1 << 14), np.zeros(1 << 13), np.zeros((256, 4))
        _, tv_norm, v, *_ = sg_envelope_constants(c, q, mu, add, min(0.004, 0.04 / mu), xcut, tau, part,
                                                  bins, hist, cuts)
        assert np.isfinite(tv_norm) and np.count_nonzero(bins) > 64
        b = math.pi / (2.0 * tv_norm) / 64.0
        ref = sum(2.0 * ((d - 1) * b) ** 2 * float(np.dot(bins[:-d], bins[d:])) for d in range(2, 64))
        assert v == pytest.approx(ref, rel=1e-12, abs=0.0), (q, mu, c)


@pytest.mark.parametrize("q,mu,c,add,part,xcut,tau", [
    (1e-3, 1.25, 4.0, False, -1, 0.0, 1.0), (0.01, 1 / 1.1, 6.7, True, -1, 0.0, 1.0),
    (0.2, 2.0, 0.5, False, -1, 0.0, 1.0), (0.01, 1.0, 3.0, False, 1, 1.5, 0.3),
    (0.01, 1.0, 3.0, True, 0, 1.5, 0.3)])
def test_loss_histogram_bins_hold_the_mass_of_their_loss_range(q, mu, c, add, part, xcut, tau):
    """The envelope's curvature bands assume every histogram mass lies inside its bin.  On bins far
    narrower than a grid cell's loss span (where placing a cell at one bin would be off by several
    bins), each bin's mass must equal the integral of the tilted density over the outputs whose loss
    falls in the bin: pre-images of the bin edges by brentq on the loss, masses by scipy quad, the split
    weight by scipy's log_ndtr (none of it shares code with the kernel)."""
    from scipy import integrate, optimize, special

    from mechanisms._sg_envelope_kernels import sg_loss_histogram

    wr = -c if add else c + 1.0
    loss = lambda x: np.logaddexp(np.log1p(-q), np.log(q) + mu * x - mu * mu / 2)  # noqa: E731

    def log_dens(x):
        w = 0.0 if part < 0 else special.log_ndtr(((xcut - x) if part == 0 else (x - xcut)) / tau)
        return -x * x / 2 - 0.5 * np.log(2 * np.pi) + wr * loss(x) + w

    xs = np.linspace(-20.0, 25.0, 200001)
    lg = log_dens(xs)
    gmax = float(lg.max())
    keep = xs[lg - gmax > -40.0]
    x_first, x_last = float(keep[0]), float(keep[-1])
    dx = min(0.004, 0.04 / mu)
    # the window: the loss over the central outputs, in 4096 bins
    us = -loss(keep) if add else loss(keep)
    umin, umax = float(np.quantile(us, 0.3)), float(np.quantile(us, 0.7))
    hist = np.zeros(4096)
    b = sg_loss_histogram(c, q, mu, add, dx, gmax, umin, umax, x_first, x_last, xcut, tau, part, hist)
    assert b == pytest.approx((umax - umin) / 4096, rel=1e-12)
    # the bins are far narrower than a grid cell's loss span somewhere in the window
    slope = mu / (1 + np.exp(-(np.log(q) + mu * keep - mu * mu / 2 - np.log1p(-q))))
    assert float(np.max(slope[(us >= umin) & (us <= umax)])) * dx > 3 * b

    def x_of(u):
        target = -u if add else u
        return optimize.brentq(lambda x: loss(x) - target, -60.0, 60.0, xtol=1e-14, rtol=1e-15)

    checked = 0
    for k in range(0, 4096, 17):
        xa, xb = sorted((x_of(umin + k * b), x_of(umin + (k + 1) * b)))
        ref, err = integrate.quad(lambda x: np.exp(log_dens(x) - gmax), xa, xb, epsabs=0, epsrel=1e-10)
        if ref > 1e-8 * float(hist.sum()):
            assert hist[k] == pytest.approx(ref, rel=1e-4), (k, xa, xb)
            checked += 1
    assert checked >= 40
    # and the whole window's mass
    xa, xb = sorted((x_of(umin), x_of(umax)))
    ref = integrate.quad(lambda x: np.exp(log_dens(x) - gmax), xa, xb, epsabs=0, epsrel=1e-10, limit=200)[0]
    assert float(hist.sum()) == pytest.approx(ref, rel=1e-5)


def test_total_variation_matches_mpmath_and_caps_delta():
    """TV of the pairs (mpmath quadrature of int (p - q)_+) and the composed cap on delta(eps >= 0)."""
    from accountant import PrivacyAccountant
    from conversions.contour import ComposedPLD
    from mechanisms import Gaussian, Laplace, SubsampledGaussian

    with mp.workdps(30):
        for mu in (0.3, 1.0, 4.0):
            def gap(x, mu=mu):
                return max(mp.npdf(x, mu, 1) - mp.npdf(x, 0, 1), 0)

            ref_tv = mp.quad(gap, [-mp.inf, mu / 2, mp.inf])
            assert Gaussian(sigma=1 / mu).total_variation() == pytest.approx(float(ref_tv), rel=1e-13)
            for q in (1e-6, 0.3):
                assert SubsampledGaussian(sigma=1 / mu, sample_rate=q).total_variation("add") == \
                    pytest.approx(q * float(ref_tv), rel=1e-13)
        for b in (0.5, 3.0):
            def lap_gap(x, b=b):
                return max(mp.exp(-abs(x) / b) - mp.exp(-abs(x - 1) / b), 0) / (2 * b)

            ref_tv = mp.quad(lap_gap, [-mp.inf, 0, 0.5, 1, mp.inf])
            assert Laplace(scale=b).total_variation() == pytest.approx(float(ref_tv), rel=1e-13)
    # q = 1e-6, 10 steps: T * TV = 3.8e-6 < 1e-5, so eps(1e-5) = 0 is certified (and instant)
    acct = PrivacyAccountant().step(sigma=1.0, sample_rate=1e-6, steps=10)
    assert acct.epsilon(1e-5, method="cf") == 0.0
    with mp.workdps(40):
        tv = float(1 - (1 - mp.mpf(SubsampledGaussian(sigma=1.0, sample_rate=1e-6).total_variation())) ** 10)
    for direction in ("remove", "add"):
        pld = ComposedPLD([(SubsampledGaussian(sigma=1.0, sample_rate=1e-6), 10)], direction)
        assert tv <= pld.tv_bound <= tv * (1 + 1e-9)
    # where the contour is cheap the cap is consistent with it: delta(0) <= cap
    g = PrivacyAccountant().compose(Gaussian(sigma=2.0), times=3)
    assert g.delta(0.0, method="cf") <= 1 - (1 - Gaussian(sigma=2.0).total_variation()) ** 3


def _quadrature_nodes(s: complex, q: float, mu: float, add: bool, span: float = 80.0) -> int:
    """The work (in quadrature nodes; a coarse point, one l(x) and no exp/cos/sin, counts as half a node) of
    the subsampled-Gaussian MGF quadrature at one point s, by the rule of
    its docstring rewritten here with numpy: 3 x 601 coarse points locate the window where
    -x^2/2 + Re(w) l(x) is within ``span`` of its maximum (one coarse step of margin each side), then a
    trapezoid rule with step min(dx_max, 0.5 / (|Im w| mu sig), 0.5 / sqrt(1 + |Re w| mu^2 s2)), sig and
    s2 = sig (1 - sig) (0.25 past sig = 1/2) at the window's top + 1, and at least 64 nodes."""
    lq, l1q = math.log(q), math.log1p(-q)
    wr, wi = (-s.real, -s.imag) if add else (s.real + 1.0, s.imag)

    def f(x):
        return -0.5 * x * x + wr * np.logaddexp(l1q, lq + mu * x - 0.5 * mu * mu)

    if wr <= 0.0:
        xs = np.linspace(-wr * mu - 1.0, 0.0, 200001)
        xp = xs[np.argmax(f(xs))]  # the add peak (concave exponent)
        lo, hi = xp - 14.0 - math.sqrt(2 * span), xp + 14.0 + math.sqrt(2 * span)
    else:
        lo, hi = -14.0 - wr * mu, 14.0 + wr * mu + mu
    step = (hi - lo) / 600
    x = lo + step * np.arange(601)
    fx = f(x)
    inside = np.nonzero(fx > fx.max() - span)[0]
    a, b = x[inside[0]] - step, x[inside[-1]] + step
    y = lq + mu * (b + 1.0) - 0.5 * mu * mu - l1q
    sig = 1.0 / (1.0 + math.exp(-y)) if y > -700 else 0.0
    s2 = sig * (1.0 - sig) if sig <= 0.5 else 0.25
    dx = min(0.125, 0.25 / mu)
    if abs(wi) * mu * sig > 0:
        dx = min(dx, 0.5 / (abs(wi) * mu * sig))
    dx = min(dx, 0.5 / math.sqrt(1.0 + abs(wr) * mu * mu * s2))
    return max(math.ceil((b - a) / dx), 64) + 0.5 * 3 * 601


def test_cost_hint_window_covers_the_coarse_scan():
    """``SubsampledGaussian._window`` (the kernel's own scan, for the cost hint) against the coarse scan
    rewritten with numpy: the window [top - width, top] holds every coarse point within the span of the
    maximum, with its step of margin each side plus one more (to 1e-12 of the width)."""
    from mechanisms._poisson_kernels import _add_peak
    from mechanisms.subsampled import _SPAN

    for q, sigma in ((1e-4, 1.0), (0.01, 0.3), (0.3, 2.0), (0.9, 0.05)):
        m = SubsampledGaussian(sigma=sigma, sample_rate=q)
        mu, lq, l1q = m.mu, math.log(q), math.log1p(-q)
        for wr in (-300.0, -2.0, -1e-3, 1.001, 5.0, 80.0):
            if wr > 0:
                lo, hi = -(14.0 + wr * mu), 14.0 + wr * mu + mu
            else:
                xp = _add_peak(-wr, q, mu, lq, l1q)
                lo, hi = xp - 14.0 - math.sqrt(2 * _SPAN), xp + 14.0 + math.sqrt(2 * _SPAN)
            step = (hi - lo) / 600
            x = lo + step * np.arange(601)
            fx = -0.5 * x * x + wr * np.logaddexp(l1q, lq + mu * x - 0.5 * mu * mu)
            inside = x[fx > fx.max() - _SPAN]
            width, top = m._window(wr)
            tol = 1e-12 * width
            assert top >= inside[-1] + 2 * step - tol, (q, sigma, wr)
            assert top - width <= inside[0] - 2 * step + tol, (q, sigma, wr)
            assert width <= inside[-1] - inside[0] + 4 * step + tol  # (not looser than the rule)


@pytest.mark.parametrize("sigma", [10.0, 1.1, 0.2, 0.05])
@pytest.mark.parametrize("q", [1e-3, 0.3])
def test_cost_hint_grows_with_the_quadrature_work(sigma, q):
    """The work meter of the contour route trusts ``mgf_cost(t, c)``: per point it must cover the
    quadrature's evaluations (at ~8 per unit) on every line Re s = c, also far from the usual range
    (c = 1e5: seconds per point at small sigma, which a hint ignoring c would hide from the meter)."""
    m = SubsampledGaussian(sigma=sigma, sample_rate=q)
    for c in (0.5, 4.0, 50.0, 1e3, 1e5):
        for t in (0.0, 10.0, 300.0):
            for add in (False, True):
                assert 8.0 * m.mgf_cost(t, c) >= _quadrature_nodes(complex(c, t), q, m.mu, add), (c, t, add)
    # the envelope walks its whole fine grid, whose width grows with c
    assert m.envelope_cost(1e5) >= 4.0 * (2.0 * (16.0 + 1e5 * m.mu)) / min(0.004, 0.04 / m.mu)
