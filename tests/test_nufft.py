"""The type-1 NUFFT by Gaussian gridding (``mechanisms._nufft_kernels``) behind the subsampled
Gaussian's line kernel: against direct sums (exact phases, small modes) within its proven error bound,
and the line kernel's NUFFT path against mpmath quadrature and against its direct (rotation) path."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from mechanisms._nufft_kernels import NU_SPREAD, ifft_pow2_py, nufft1_error, nufft1_py
from mechanisms._sg_line_kernels import sg_line_log_mgf


def _direct(a: np.ndarray, theta: np.ndarray, nm: int) -> np.ndarray:
    """sum_i a_i e^{i k' theta_i}, k' = k - nm // 2, in extended precision (mpmath, 30 digits)."""
    out = np.empty(nm, dtype=complex)
    with mp.workdps(30):
        th = [mp.mpf(float(t)) for t in theta]
        aa = [mp.mpc(complex(x)) for x in a]
        for k in range(nm):
            kk = k - nm // 2
            out[k] = complex(mp.fsum(x * mp.expj(kk * t) for x, t in zip(aa, th, strict=True)))
    return out


def test_fft_matches_numpy():
    rng = np.random.default_rng(0)
    for n in (1, 2, 8, 1024):
        x = rng.normal(size=n) + 1j * rng.normal(size=n)
        re, im = ifft_pow2_py(x.real.copy(), x.imag.copy())
        np.testing.assert_allclose(re + 1j * im, n * np.fft.ifft(x), rtol=0, atol=1e-13 * n)


@pytest.mark.parametrize("nm", [1, 2, 7, 64, 129])
def test_nufft_error_is_within_its_bound(nm):
    """At reduced spreading widths (where the algorithmic error dominates rounding) the error never
    exceeds the bound, and the bound is not loose by more than ~1000x; at the default width both the
    bound and the error are at the rounding level (<= 2e-14 of sum |a_i|)."""
    rng = np.random.default_rng(nm)
    n = 300
    a = rng.random(n) * np.exp(1j * rng.uniform(0, 2 * np.pi, n))
    theta = rng.uniform(-40.0, 60.0, n)  # (phases beyond 2 pi: the kernel reduces them)
    ref = _direct(a, theta, nm)
    mass = float(np.sum(np.abs(a)))
    for msp in (3, 5, 8):
        re, im = nufft1_py(a.real.copy(), a.imag.copy(), theta, nm, msp)
        err = float(np.max(np.abs(re + 1j * im - ref))) / mass
        bound = nufft1_error(nm, msp)
        assert err <= bound, (msp, err, bound)
        assert err >= 1e-3 * bound or bound < 1e-13, (msp, err, bound)
    re, im = nufft1_py(a.real.copy(), a.imag.copy(), theta, nm)
    assert nufft1_error(nm, NU_SPREAD) <= 2e-15
    assert float(np.max(np.abs(re + 1j * im - ref))) <= 2e-14 * mass


def _mp_line_value(q, sigma, add, c, t, window, dx):
    """M(c + it) / M(c) of the subsampled Gaussian by a 30-digit trapezoid rule in the output x (step
    ``dx`` well inside the kernel's own, window where the tilted density is above e^{-90} of its peak)."""
    with mp.workdps(30):
        qq, mu = mp.mpf(q), 1 / mp.mpf(sigma)

        def total(s):
            w = -s if add else s + 1
            a, b = (mp.mpf(v) for v in window)
            n = int(math.ceil(float((b - a) / dx)))
            h = (b - a) / n
            acc = mp.mpc(0)
            for i in range(n + 1):
                x = a + i * h
                ell = mp.log(1 - qq + qq * mp.exp(mu * x - mu * mu / 2))
                acc += (mp.mpf(0.5) if i in (0, n) else 1) * mp.exp(-x * x / 2 + w * ell)
            return acc

        return complex(total(mp.mpc(c, t)) / total(mp.mpf(c)))


@pytest.mark.parametrize("q,sigma,add,c,h", [(0.01, 0.8, False, 3.0, 0.9), (0.2, 0.5, True, 4.0, 1.3)])
def test_line_kernel_nufft_path_matches_mpmath(q, sigma, add, c, h):
    """Lines of >= NUFFT_MIN_NODES equally spaced nodes go through the NUFFT: M(c + it) at the first,
    middle and last of 200 nodes (t up to ~260) against a 30-digit trapezoid reference, within the
    declared error relative to M(c)."""
    from mechanisms import SubsampledGaussian

    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    direction = "add" if add else "remove"
    ts = h * np.arange(200)
    got = mech.log_mgf(c + 1j * ts, direction)
    lmc = mech.log_mgf_real(c, direction)
    mu = 1 / sigma
    xs = np.linspace(-40.0, 40.0, 80001)
    f = -xs**2 / 2 + (-c if add else c + 1) * np.logaddexp(np.log1p(-q), np.log(q) + mu * xs - mu * mu / 2)
    keep = xs[f > f.max() - 90.0]
    window = (float(keep[0]) - 0.5, float(keep[-1]) + 0.5)
    for k in (0, 100, 199):
        dx = min(0.02, 0.25 / (ts[k] * mu + 1.0))
        ref = _mp_line_value(q, sigma, add, c, float(ts[k]), window, dx)
        val = np.exp(got[k] - lmc)
        assert abs(val - ref) <= math.expm1(mech.log_mgf_error), (k, val, ref)


def test_line_kernel_nufft_and_direct_paths_agree():
    """The NUFFT path and the direct (rotation) path of the line kernel evaluate the same trapezoid sums:
    on random lines (q, sigma, c, both directions, unsplit and split parts, 48..2049 nodes) they agree
    within twice the declared error relative to M(c)."""
    rng = np.random.default_rng(5)
    for _ in range(24):
        q, sigma = 10 ** rng.uniform(-5, -0.3), 10 ** rng.uniform(-0.4, 0.8)
        mu, c, add = 1 / sigma, 10 ** rng.uniform(-1, 1.0), bool(rng.integers(0, 2))
        part, xcut = int(rng.integers(-1, 2)), float(rng.uniform(-1, 4))
        tau = float(10 ** rng.uniform(-1.3, 0.3))
        n = int(rng.choice([48, 65, 300, 1025, 2049]))
        ts = float(rng.choice([0.0, 10.0])) + 10 ** rng.uniform(-2, 0) * np.arange(n)
        dx = min(0.125, 0.25 / mu, 0.25 * tau) if part >= 0 else min(0.125, 0.25 / mu)
        args = (q, mu, add, dx, 80.0, xcut, tau, part)
        r1, i1 = sg_line_log_mgf(c, ts, *args)
        r2, i2 = sg_line_log_mgf(c, ts, *args, 10**9)
        lmc = sg_line_log_mgf(c, np.zeros(1), *args, 10**9)[0][0]
        diff = np.abs(np.exp(r1 - lmc + 1j * i1) - np.exp(r2 - lmc + 1j * i2))
        assert float(diff.max()) <= 4e-13, (q, sigma, c, add, part, n)


def test_phase_moment_matches_numpy():
    """The phase-rounding weight E[5 |l| + 4 sig (|log q| + mu |x| + mu^2/2)] under the kernels' tilted
    weights (unsplit and split parts), against the same expectation by numpy on a fine grid with
    scipy's log_ndtr."""
    from scipy.special import log_ndtr

    from mechanisms._poisson_kernels import sg_phase_moment

    for q, mu, c, add, part, xcut, tau in ((1e-3, 2.0, 3.0, False, -1, 0.0, 1.0),
                                           (0.2, 1.0, 1.5, True, -1, 0.0, 1.0),
                                           (0.01, 1.0, 4.0, False, 0, 2.0, 0.3),
                                           (0.01, 1.0, 4.0, True, 1, 2.0, 0.3)):
        xs = np.linspace(-40.0, 40.0, 400001)
        ell = np.logaddexp(np.log1p(-q), np.log(q) + mu * xs - mu * mu / 2)
        w = 0.0 if part < 0 else log_ndtr(((xcut - xs) if part == 0 else (xs - xcut)) / tau)
        lg = -xs**2 / 2 + (-c if add else c + 1) * ell + w
        g = np.exp(lg - lg.max())
        sig = 1 / (1 + np.exp(-(np.log(q) + mu * xs - mu * mu / 2 - np.log1p(-q))))
        weight = 5 * np.abs(ell) + 4 * sig * (abs(np.log(q)) + mu * np.abs(xs) + mu * mu / 2)
        ref = float(np.sum(g * weight) / np.sum(g))
        got = sg_phase_moment(c, q, mu, add, min(0.125, 0.25 / mu, 0.25 * tau), 80.0, xcut, tau, part)
        assert got == pytest.approx(ref, rel=1e-3), (q, mu, c, add, part)


def test_phase_error_is_never_nan(monkeypatch):
    """A non-finite phase-rounding weight raises (FloatingPointError: the routes treat the line as failed)
    instead of entering the error bound as a NaN; a finite one gives a finite, positive term."""
    import mechanisms.subsampled as sub
    from mechanisms import SubsampledGaussian

    m = SubsampledGaussian(sigma=1.0, sample_rate=1e-3)
    assert 0.0 < m.log_mgf_phase_error(2.0, 100.0, "remove") < 1e-10
    monkeypatch.setattr(sub, "sg_phase_moment", lambda *a: float("nan"))
    with pytest.raises(FloatingPointError):
        m.log_mgf_phase_error(2.0, 100.0, "remove")


@pytest.mark.slow
@pytest.mark.parametrize("nufft_min", [128, 10**9])
def test_line_kernel_phase_rounding_is_covered_at_large_t(nufft_min):
    """At t ~ 1200 on a line where the loss reaches |l| ~ 8, the line kernel's direct path is off by
    2.4e-13 of M(c) against a 30-digit reference (more than the constant declared error 2e-13): both
    paths must stay within the constant plus the declared phase rounding (``log_mgf_phase_error``).
    (~1 min: the reference resolves the oscillation at t ~ 1200.)"""
    from mechanisms import SubsampledGaussian

    q, sigma, c = 0.27347365084339703, 0.36263465484451407, 11.591093233351838
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    h, n, k = 0.4947743002458352, 4096, 2431
    args = mech._kernel_args("add")
    ts = h * np.arange(n)
    re, im = sg_line_log_mgf(c, ts, *args, nufft_min)
    lmc = mech.log_mgf_real(c, "add")
    val = np.exp(re[k] - lmc + 1j * im[k])
    mu = 1 / sigma
    xs = np.linspace(-40.0, 40.0, 80001)
    f = -xs**2 / 2 - c * np.logaddexp(np.log1p(-q), np.log(q) + mu * xs - mu * mu / 2)
    keep = xs[f > f.max() - 90.0]
    window = (float(keep[0]) - 0.5, float(keep[-1]) + 0.5)
    ref = _mp_line_value(q, sigma, True, c, float(ts[k]), window, 0.25 / (ts[k] * mu))
    allowed = math.expm1(mech.log_mgf_error + mech.log_mgf_phase_error(c, float(ts[-1]), "add"))
    assert abs(val - ref) <= allowed
    assert mech.log_mgf_phase_error(c, float(ts[-1]), "add") > 1e-13  # (the term matters here)


def _ld_line_value(q, mu, add, c, t, window, dx, xcut, tau, part):
    """M(c + it) / M(c) of the subsampled Gaussian (or one split part: weight Phi((xcut - x) / tau) for
    part 0, Phi((x - xcut) / tau) for part 1) by one uniform trapezoid grid of step <= ``dx`` on
    ``window``, in numpy's extended precision (losses and phases to ~1e-19, so t l ~ 1e4 keeps ~1e-15):
    no pieces, no NUFFT, nothing of the kernel's."""
    from scipy.special import log_ndtr

    a, b = window
    n = int(math.ceil((b - a) / dx))
    xs = np.linspace(a, b, n + 1, dtype=np.longdouble)
    ell = np.logaddexp(np.longdouble(math.log1p(-q)), np.log(np.longdouble(q)) + mu * xs - mu * mu / 2)
    w = -c if add else c + 1
    lg = -xs * xs / 2 + w * ell
    if part >= 0:
        z = ((xcut - xs) if part == 0 else (xs - xcut)) / tau
        lg = lg + log_ndtr(z.astype(float)).astype(np.longdouble)
    wt = np.exp(lg - lg.max())
    wt[0] *= 0.5
    wt[-1] *= 0.5
    ph = (-t if add else t) * ell
    val = np.sum(wt * np.cos(ph)) + 1j * np.sum(wt * np.sin(ph))
    return complex(val / np.sum(wt))


@pytest.mark.parametrize("add,n_nodes", [(False, 65), (True, 65), (False, 20)])
def test_line_kernel_pieces_match_extended_precision_reference(add, n_nodes):
    """A near-atomic split core (q = 1e-5, sigma = 0.4, cut at x = 5.05: the atom near loss 0 and the
    tilted mass at the cut carry comparable weight) on a line up to t = 300: the x-window is ~20 units,
    and the phase rate t l'(x) is large only near its right end.  The kernel sums it on pieces of a
    partition of unity with coarser steps to the left (4-6x fewer points than one uniform grid), on the
    NUFFT path (65 nodes) and the direct path (20 nodes); the values at the first, middle and last node
    agree with a uniform-grid reference in extended precision within the declared error relative to
    M(c), and with the kernel's own uniform grid (pieces disabled) within twice that."""
    from mechanisms._sg_line_kernels import sg_line_points

    q, mu, c, xcut, tau, part = 1e-5, 2.5, 20.0, 5.05, 0.099, 0
    args = (q, mu, add, 0.125, 80.0, xcut, tau, part)
    ts = np.linspace(0.0, 300.0, n_nodes)
    uniform, pieces = sg_line_points(c, 300.0, *args)
    assert pieces * 4 < uniform, (uniform, pieces)  # (the pieces are in use)
    re, im = sg_line_log_mgf(c, ts, *args)
    re_u, im_u = sg_line_log_mgf(c, ts, *args, 48, 10**12)
    lmc = sg_line_log_mgf(c, np.zeros(1), *args)[0][0]
    w = -c if add else c + 1
    xs = np.linspace(-40.0, 40.0, 160001)
    from scipy.special import log_ndtr
    f = -xs**2 / 2 + w * np.logaddexp(np.log1p(-q), np.log(q) + mu * xs - mu * mu / 2) \
        + log_ndtr((xcut - xs) / tau)
    keep = xs[f > f.max() - 90.0]
    window = (float(keep[0]) - 0.5, float(keep[-1]) + 0.5)
    declared = math.expm1(2e-13)
    for k in (0, n_nodes // 2, n_nodes - 1):
        t = float(ts[k])
        ref = _ld_line_value(q, mu, add, c, t, window, min(0.01, 0.1 / (t * mu + 1.0)), xcut, tau, part)
        val = np.exp(re[k] - lmc + 1j * im[k])
        assert abs(val - ref) <= declared, (k, val, ref)
        assert abs(val - np.exp(re_u[k] - lmc + 1j * im_u[k])) <= 2 * declared


def test_line_kernel_pieces_and_one_grid_agree():
    """Pieces (forced: ``piece_min`` = 0) and the one uniform grid evaluate the same integral: on random
    lines (q, sigma, c, both directions, unsplit and split parts, NUFFT and direct paths, t up to 1e3)
    they agree within twice the declared error relative to M(c)."""
    from mechanisms._sg_line_kernels import sg_line_points

    rng = np.random.default_rng(11)
    used = 0
    for _ in range(60):
        q, sigma = 10 ** rng.uniform(-6, -0.5), 10 ** rng.uniform(-0.5, 0.6)
        mu, c, add = 1 / sigma, 10 ** rng.uniform(-0.5, 1.8), bool(rng.integers(0, 2))
        part, xcut = int(rng.integers(-1, 2)), float(rng.uniform(0, 8))
        tau = float(10 ** rng.uniform(-1.3, -0.5))
        n = int(rng.choice([20, 65, 257]))
        ts = 10 ** rng.uniform(0.5, 3.0) / n * np.arange(n)
        dx = min(0.125, 0.25 / mu, 0.25 * tau) if part >= 0 else min(0.125, 0.25 / mu)
        args = (q, mu, add, dx, 80.0, xcut, tau, part)
        uniform, pieces = sg_line_points(c, float(ts[-1]), *args, 0)
        used += pieces < uniform
        r1, i1 = sg_line_log_mgf(c, ts, *args, 48, 0)
        r2, i2 = sg_line_log_mgf(c, ts, *args, 48, 10**12)
        lmc = sg_line_log_mgf(c, np.zeros(1), *args)[0][0]
        diff = np.abs(np.exp(r1 - lmc + 1j * i1) - np.exp(r2 - lmc + 1j * i2))
        assert float(diff.max()) <= 4e-13, (q, sigma, c, add, part, xcut, tau, n, float(diff.max()))
    assert used >= 10  # (the draw exercises the pieces)
