"""Amplified banded matrix factorisation (cyclic Poisson sampling) against exact brute-force references.

References, independent of the factorisation argument the mechanism relies on:

* Renyi divergence of the true output: for n <= 4 steps the output C X + Z of one record's participation
  pattern is a Gaussian mixture in R^n, P = sum_B w_B N(C B, sigma^2 I) vs Q = N(0, sigma^2 I) (B the
  0/1 draws of the record's steps, w_B = q^|B| (1 - q)^(k - |B|)); at integer alpha,
  E_Q[(P/Q)^alpha] = sum over count vectors (c_B) of multinomial(alpha; c) prod w_B^c_B
  exp(sum_{B < B'} c_B c_B' <m_B, m_B'> / sigma^2 + sum_B c_B (c_B - 1) |m_B|^2 / (2 sigma^2))
  (the Gaussian MGF), summed in mpmath -- no product structure assumed;
* delta(eps) of the true output (both directions): the mixture reduced to the span of its means
  (Gram-Schmidt; components orthogonal to the span are the same noise under P and Q), the set where
  P - e^eps Q > 0 found per line by root finding and the integral done by Gaussian CDFs and quadrature;
* the closed-form Gaussian profile (q = 1) and the mu-GDP MatrixMechanism (un-amplified);
* reduction to DP-SGD (bands = 1, diagonal C), monotonicity in q and sigma, the conformance check.
"""

from __future__ import annotations

import itertools
import json
import math

import mpmath as mp
import numpy as np
import pytest
import reference as ref
from scipy import integrate, optimize
from scipy.special import log_ndtr, logsumexp

from accountant import PrivacyAccountant
from mechanisms import (
    AmplifiedBandedMF,
    AmplifiedBandedToeplitzMF,
    MatrixMechanism,
    SubsampledGaussian,
    registry,
)
from mechanisms.conformance import check_mechanism


# ---------------------------------------------------------------------------------------- references
def _banded(rng, n, b, normalise):
    c = np.tril(rng.uniform(0.2, 1.5, size=(n, n)))
    c *= np.subtract.outer(np.arange(n), np.arange(n)) < b
    if normalise:
        c /= np.sqrt(np.sum(c * c, axis=0))
    return c


def _compositions(total, parts):
    """All tuples of ``parts`` non-negative integers summing to ``total``."""
    if parts == 1:
        yield (total,)
        return
    for first in range(total + 1):
        for rest in _compositions(total - first, parts - 1):
            yield (first,) + rest


def _mixture_remove_rdp(c, sigma, q, steps, alpha, signs=None, dps=40):
    """D_alpha(P || Q) for P = sum_B w_B N(sum_j B_j s_j C e_{steps_j}, sigma^2 I), Q = N(0, sigma^2 I)."""
    with mp.workdps(dps):
        k = len(steps)
        s = signs or [1] * k
        cols = [[mp.mpf(float(c[r, i])) for r in range(c.shape[0])] for i in steps]
        pats = list(itertools.product([0, 1], repeat=k))
        means = [[sum((s[j] * bj * cols[j][r] for j, bj in enumerate(bb)), mp.mpf(0))
                  for r in range(c.shape[0])] for bb in pats]
        qq = mp.mpf(q)
        w = [qq ** sum(bb) * (1 - qq) ** (k - sum(bb)) for bb in pats]
        dot = [[mp.fsum(a * b for a, b in zip(means[x], means[y], strict=True))
                for y in range(len(pats))] for x in range(len(pats))]
        s2 = mp.mpf(sigma) ** 2
        total = mp.mpf(0)
        for cnt in _compositions(alpha, len(pats)):
            coef = mp.factorial(alpha)
            expo = mp.mpf(0)
            for x, cx in enumerate(cnt):
                if cx == 0:
                    continue
                coef = coef * w[x] ** cx / mp.factorial(cx)
                expo += cx * (cx - 1) * dot[x][x] / (2 * s2)
                for y in range(x + 1, len(pats)):
                    expo += cx * cnt[y] * dot[x][y] / s2
            total += coef * mp.exp(expo)
        return float(mp.log(total) / (alpha - 1))


def _true_rdp(c, sigma, q, b, alpha):
    """Worst group: max over g of the true remove-direction Renyi divergence of the record's output."""
    n = c.shape[0]
    return max(_mixture_remove_rdp(c, sigma, q, list(range(g, n, b)), alpha) for g in range(min(b, n)))


def _true_delta(c, sigma, q, steps, eps):
    """max(delta_remove, delta_add)(eps) of the true output mixture of a record taking part in ``steps``
    (at most 2 of them), by exact reduction to the 2-d span of the means and quadrature."""
    cols = np.array([c[:, i] for i in steps]).T  # n x k
    qm, rr = np.linalg.qr(cols)
    rr = rr * np.sign(np.diag(rr))[:, None]  # R with positive diagonal (same span)
    if rr.shape[0] == 1:
        rr = np.array([[rr[0, 0], 0.0], [0.0, 0.0]])
    assert rr[0, 1] >= -1e-15  # every mean's first coordinate >= 0: the likelihood ratio is monotone in y1
    k = len(steps)
    pats = np.array(list(itertools.product([0, 1], repeat=k)), dtype=float)
    if k == 1:
        pats = np.hstack([pats, np.zeros((2, 1))])
    m = pats @ rr.T  # means in the (y1, y2) coordinates
    logw = pats.sum(1) * math.log(q) + (k - pats.sum(1)) * math.log1p(-q) if q < 1 else \
        np.where(pats.sum(1) == k, 0.0, -np.inf)
    s = sigma

    def log_ratio(y1, y2):
        return logsumexp(logw + (m[:, 0] * y1 + m[:, 1] * y2) / s**2 - (m * m).sum(1) / (2 * s**2))

    def root(y2, level):
        lo_term = m[:, 0] == 0  # the part of the ratio constant in y1
        base = (logsumexp(logw[lo_term] + m[lo_term, 1] * y2 / s**2 - m[lo_term, 1] ** 2 / (2 * s**2))
                if lo_term.any() else -np.inf)
        if base >= level:
            return -np.inf
        a, bb = -1.0, 1.0
        while log_ratio(a, y2) > level:
            a *= 2
        while log_ratio(bb, y2) < level:
            bb *= 2
        return optimize.brentq(lambda y: log_ratio(y, y2) - level, a, bb, xtol=1e-14, rtol=1e-15)

    def logphi(x):
        return -0.5 * (x / s) ** 2 - math.log(s * math.sqrt(2 * math.pi))

    def remove_inner(y2):
        t = root(y2, eps)
        p = sum(math.exp(lw + logphi(y2 - mb[1]) + log_ndtr(-(t - mb[0]) / s))
                for lw, mb in zip(logw, m, strict=True))
        return p - math.exp(eps + logphi(y2) + log_ndtr(-t / s))

    def add_inner(y2):
        t = root(y2, -eps)
        if t == -np.inf:
            return 0.0
        p = sum(math.exp(lw + logphi(y2 - mb[1]) + log_ndtr((t - mb[0]) / s))
                for lw, mb in zip(logw, m, strict=True))
        return math.exp(logphi(y2) + log_ndtr(t / s)) - math.exp(eps) * p

    lo, hi = -40 * s, 40 * s + float(m[:, 1].max())
    pts = [0.0, float(m[:, 1].max())]
    d_rem = integrate.quad(remove_inner, lo, hi, points=pts, limit=400, epsabs=1e-15, epsrel=1e-12)[0]
    d_add = integrate.quad(add_inner, lo, hi, points=pts, limit=400, epsabs=1e-15, epsrel=1e-12)[0]
    return max(d_rem, d_add)


# ---------------------------------------------------------------------------------------- RDP vs brute force
@pytest.mark.parametrize("seed", range(8))
def test_rdp_dominates_true_mixture(seed):
    """Certified k * RDP >= the true Renyi divergence of the output (worst group), at integer orders;
    equal (within rounding) for column-normalised C, where the product pair is attained."""
    rng = np.random.default_rng(seed)
    n, b = (4, 2) if seed < 6 else (3, 2)
    normalise = seed % 2 == 0
    sigma, q = [0.7, 1.3][seed % 3 == 0], [0.2, 0.6][seed % 4 < 2]
    c = _banded(rng, n, b, normalise)
    m = AmplifiedBandedMF(c.tolist(), sigma, q, b)
    assert m.rounds == 2 and m.tight == normalise
    for alpha in (2, 3, 5, 8):
        true = _true_rdp(c, sigma, q, b, alpha)
        cert = m.rounds * float(m.rdp(np.array([float(alpha)]))[0])
        assert cert >= true * (1 - 1e-12)
        if normalise:
            assert cert == pytest.approx(true, rel=1e-9)
        else:
            assert cert > true * (1 + 1e-6)  # unequal norms: a strict upper bound


@pytest.mark.parametrize("n", [2, 3])
def test_bands_one_rdp_matches_mixture(n):
    """b = 1 (each record in every step; C diagonal, the only 1-banded lower-triangular form): brute force
    over the 2^n participation patterns against n subsampled Gaussians of the largest |C_ii|."""
    c = np.diag([1.0, 0.6, 0.8][:n])
    m = AmplifiedBandedMF(c.tolist(), 1.1, 0.3, 1)
    assert m.rounds == n and not m.tight
    for alpha in (2, 4):
        true = _true_rdp(c, 1.1, 0.3, 1, alpha)
        assert n * float(m.rdp(np.array([float(alpha)]))[0]) >= true
    eq = AmplifiedBandedMF(np.eye(n).tolist(), 1.1, 0.3, 1)
    assert eq.tight
    for alpha in (2, 4, 6):
        assert n * float(eq.rdp(np.array([float(alpha)]))[0]) == pytest.approx(
            _true_rdp(np.eye(n), 1.1, 0.3, 1, alpha), rel=1e-9)


def test_overlapping_columns_break_the_product():
    """Negative control: where two participations' columns share rows (not b-banded), the true output
    is not the product pair, and the product formula with the largest column norm understates it."""
    c = np.zeros((4, 4))
    c[2, 0] = c[2, 2] = 1.0  # columns 0 and 2 (both in group 0 for b = 2) on the same row, norm 1 each
    c[1, 1] = c[3, 3] = 1.0
    with pytest.raises(ValueError, match="b-banded"):
        AmplifiedBandedMF(c.tolist(), 1.0, 0.3, 2)
    sg = SubsampledGaussian(1.0, 0.3)
    for alpha in (2, 4, 8):
        true = _mixture_remove_rdp(c, 1.0, 0.3, [0, 2], alpha)
        assert true > 2 * float(sg.rdp(np.array([float(alpha)]))[0]) * (1 + 1e-3)


# ---------------------------------------------------------------------------------------- delta(eps) vs exact
@pytest.mark.parametrize("normalise,sigma,q,eps,method", [
    (True, 0.9, 0.3, 0.5, "pld"),
    pytest.param(True, 0.9, 0.3, 0.5, "auto", marks=pytest.mark.slow),
    pytest.param(True, 1.5, 0.6, 0.2, "auto", marks=pytest.mark.slow),
    pytest.param(False, 0.8, 0.4, 0.7, "auto", marks=pytest.mark.slow),
    pytest.param(True, 0.6, 1.0, 1.0, "auto", marks=pytest.mark.slow),
])
def test_delta_against_exact_mixture(normalise, sigma, q, eps, method):
    """The certificate's delta(eps) brackets the exact delta of the true output (worst group and
    direction) for column-normalised C, and is above it otherwise."""
    rng = np.random.default_rng(11)
    n, b = 4, 2
    c = _banded(rng, n, b, normalise)
    m = AmplifiedBandedMF(c.tolist(), sigma, q, b)
    exact = max(_true_delta(c, sigma, q, list(range(g, n, b)), eps) for g in range(b))
    cert = PrivacyAccountant().compose(m, times=m.rounds).certificate(epsilon=eps, method=method)
    assert cert.delta >= exact - 1e-12
    if normalise:
        # the true output is exactly the 2-fold product pair: the independent FFT bracket of the
        # composed subsampled Gaussian (tests/reference.py) and the certificate's bracket contain it
        if q == 1.0:  # the Gaussian of mu = sqrt(2) / sigma (closed form, mpmath)
            lo = up = ref.gaussian_delta(eps, math.sqrt(2.0) / sigma)
        else:
            lo, up = map(max, *(ref.subsampled_gaussian_delta(eps, q, sigma, 2, d, grid=1e-4)
                                for d in ("remove", "add")))
        assert lo - 1e-11 <= exact <= up + 1e-11
        assert cert.lower_bound is not None and cert.lower_bound <= exact + 1e-12
        assert cert.delta - cert.lower_bound <= 1e-3 * exact
    else:
        assert cert.delta > exact * (1 + 1e-3)


def test_three_steps_groups_of_unequal_length():
    """n = 3, b = 2: group 0 takes part twice (steps 0, 2), group 1 once; k = 2 is the worst group."""
    rng = np.random.default_rng(3)
    c = _banded(rng, 3, 2, True)
    m = AmplifiedBandedMF(c.tolist(), 1.0, 0.5, 2)
    assert m.rounds == 2 and m.tight
    d0 = _true_delta(c, 1.0, 0.5, [0, 2], 0.4)
    d1 = _true_delta(c, 1.0, 0.5, [1], 0.4)
    assert d1 < d0
    cert = PrivacyAccountant().compose(m, times=m.rounds).certificate(epsilon=0.4, method="pld")
    assert cert.lower_bound <= d0 + 1e-12 <= cert.delta + 2e-12
    assert cert.delta - cert.lower_bound <= 1e-3 * d0


# ---------------------------------------------------------------------------------------- reductions
def test_diagonal_bands_one_is_dp_sgd():
    """b = 1 and C = I: exactly n steps of DP-SGD (the subsampled Gaussian composed n times)."""
    m = AmplifiedBandedMF(np.eye(50).tolist(), 1.2, 0.05, 1)
    assert m.rounds == 50 and m.tight
    ours = PrivacyAccountant().compose(m, times=m.rounds).certificate(delta=1e-6)
    sgd = PrivacyAccountant().compose(SubsampledGaussian(1.2, 0.05), times=50).certificate(delta=1e-6)
    assert ours.epsilon == pytest.approx(sgd.epsilon, rel=1e-12)
    alphas = np.array([2.0, 3.0, 7.0])
    for a, v in zip(alphas, m.rdp(alphas), strict=True):  # the tight integer-order formula (mpmath reference)
        assert v == pytest.approx(ref.subsampled_gaussian_rdp(int(a), 0.05, 1.2), rel=1e-10)


def test_dp_sgd_equivalent_entry():
    rng = np.random.default_rng(4)
    m = AmplifiedBandedMF(_banded(rng, 9, 3, False).tolist(), 0.9, 0.2, 3)
    sg, k = m.dp_sgd_equivalent()
    assert k == m.rounds == 3 and isinstance(sg, SubsampledGaussian) and sg.sensitivity == m.sensitivity
    norms = np.sqrt(np.sum(np.array(m.C) ** 2, axis=0))
    assert norms.max() <= m.column_norm <= norms.max() * (1 + 1e-15)
    a = PrivacyAccountant().compose(m, times=m.rounds).certificate(delta=1e-6, method="pld")
    b = PrivacyAccountant().compose(sg, times=k).certificate(delta=1e-6, method="pld")
    assert a.epsilon == b.epsilon


def test_full_sampling_is_the_unamplified_matrix_mechanism():
    """q = 1: no amplification; for a column-normalised C the run is one Gaussian of mu = sqrt(k) / sigma,
    the MatrixMechanism of the cyclic (b-min-sep, k participations) pattern, and the closed form."""
    rng = np.random.default_rng(5)
    n, b, sigma = 12, 3, 2.0
    c = _banded(rng, n, b, True)
    m = AmplifiedBandedMF(c.tolist(), sigma, 1.0, b)
    k = m.rounds
    assert k == 4
    mm = MatrixMechanism(c.tolist(), sigma, {"min_separation": b, "max_participations": k})
    assert mm.sensitivity == pytest.approx(math.sqrt(k), rel=1e-12)
    ours = PrivacyAccountant().compose(m, times=k).certificate(delta=1e-6)
    theirs = PrivacyAccountant().compose(mm).certificate(delta=1e-6)
    exact = ref.gaussian_epsilon(1e-6, math.sqrt(k) / sigma)
    assert exact <= ours.epsilon <= exact * (1 + 1e-6)
    assert ours.epsilon == pytest.approx(theirs.epsilon, rel=1e-6)
    # unequal column norms: the cyclic pattern is one b-min-sep pattern, so ours (largest norm) >= it
    c2 = _banded(rng, n, b, False)
    m2 = AmplifiedBandedMF(c2.tolist(), sigma, 1.0, b)
    mm2 = MatrixMechanism(c2.tolist(), sigma, {"min_separation": b, "max_participations": k})
    assert m2.sensitivity * math.sqrt(k) >= mm2.sensitivity
    e2 = PrivacyAccountant().compose(m2, times=k).certificate(delta=1e-6).epsilon
    assert e2 >= PrivacyAccountant().compose(mm2).certificate(delta=1e-6).epsilon * (1 - 1e-9)


def test_monotone_in_sample_rate_and_sigma():
    rng = np.random.default_rng(8)
    c = _banded(rng, 16, 4, True).tolist()
    eps_q = [PrivacyAccountant().compose(m, times=m.rounds).epsilon(1e-6, method="pld")
             for m in (AmplifiedBandedMF(c, 1.0, q, 4) for q in (0.01, 0.05, 0.2, 0.5, 1.0))]
    assert all(a < b for a, b in zip(eps_q, eps_q[1:], strict=False))
    eps_s = [PrivacyAccountant().compose(m, times=m.rounds).epsilon(1e-6, method="pld")
             for m in (AmplifiedBandedMF(c, s, 0.1, 4) for s in (0.6, 0.9, 1.5, 3.0))]
    assert all(a > b for a, b in zip(eps_s, eps_s[1:], strict=False))


def test_more_bands_fewer_rounds():
    """The same C (2-banded) under cycle lengths 2, 4, 8: rounds = ceil(n / b) and epsilon falls with b."""
    rng = np.random.default_rng(9)
    c = _banded(rng, 16, 2, True).tolist()
    ms = [AmplifiedBandedMF(c, 1.0, 0.1, b) for b in (2, 4, 8, 16, 40)]
    assert [m.rounds for m in ms] == [8, 4, 2, 1, 1]
    eps = [PrivacyAccountant().compose(m, times=m.rounds).epsilon(1e-6) for m in ms]
    assert all(a > b for a, b in zip(eps[:3], eps[1:4], strict=True)) and eps[3] == eps[4]


# ---------------------------------------------------------------------------------------- contract
def test_conformance_and_json_round_trip():
    rng = np.random.default_rng(2)
    for m in (AmplifiedBandedMF.example(),
              AmplifiedBandedMF(_banded(rng, 6, 3, False).tolist(), 0.8, 0.25, 3, clip=2.0)):
        check_mechanism(m)
        back = registry.from_dict(json.loads(json.dumps(m.to_dict())))
        assert back == m and hash(back) == hash(m)
    assert "bandmf_cyclic_poisson" in registry.available()


def test_clip_scales_the_sensitivity():
    c = np.eye(3).tolist()
    a = AmplifiedBandedMF(c, 2.0, 0.1, 1, clip=2.0)
    b = AmplifiedBandedMF(c, 1.0, 0.1, 1)
    alphas = np.array([2.0, 5.0, 20.0])
    assert np.allclose(a.rdp(alphas), b.rdp(alphas), rtol=1e-12)


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"C": [[1.0, 0.5], [0.0, 1.0]]}, ValueError, "lower-triangular"),
    ({"C": [[1.0, 0, 0], [1.0, 1.0, 0], [1.0, 1.0, 1.0]], "bands": 2}, ValueError,
     "b-banded.*C\\[2\\]\\[0\\]"),
    ({"C": [[1.0, 0.0]]}, ValueError, "square"),
    ({"C": [[1.0, 0.0], [0.0]]}, ValueError, "square"),
    ({"C": [[0.0, 0.0], [0.0, 0.0]]}, ValueError, "non-zero"),
    ({"C": [[float("nan"), 0.0], [0.0, 1.0]]}, ValueError, "finite"),
    ({"C": [[1.0, 0.0], [0.0, "x"]]}, TypeError, "C"),
    ({"C": "eye"}, TypeError, "C must be"),
    ({"C": []}, TypeError, "C must be"),
    ({"sample_rate": 0.0}, ValueError, "sample_rate"),
    ({"sample_rate": 1.5}, ValueError, "sample_rate"),
    ({"sample_rate": float("nan")}, ValueError, "sample_rate"),
    ({"bands": 0}, ValueError, "bands"),
    ({"bands": 1.5}, TypeError, "bands"),
    ({"sigma": 0.0}, ValueError, "sigma"),
    ({"sigma": -1.0}, ValueError, "sigma"),
    ({"clip": 0.0}, ValueError, "clip"),
])
def test_bad_inputs(kwargs, exc, match):
    args = {"C": [[1.0, 0.0], [0.5, 1.0]], "sigma": 1.0, "sample_rate": 0.1, "bands": 2} | kwargs
    with pytest.raises(exc, match=match):
        AmplifiedBandedMF(**args)


def test_describe_is_short():
    m = AmplifiedBandedMF(np.eye(300).tolist(), 1.0, 0.1, 1)
    assert m.describe() == "bandmf_cyclic_poisson(C=300x300, sigma=1, sample_rate=0.1, bands=1, clip=1)"


# ---------------------------------------------------------------------------------------- Toeplitz form
@pytest.mark.parametrize("coefs,n,b", [([1.0, 0.5, 0.25], 10, 3), ([1.0, 0.5, 0.25], 10, 4),
                                       ([1.0, 0.0, 0.5], 7, 3), ([0.3, 1.0, 0.0, 0.0], 9, 2),
                                       ([1.0, 0.9, 0.8, 0.7, 0.6], 3, 5), ([2.0], 5, 1), ([1.0, 1e-9], 8, 2)])
def test_toeplitz_matches_explicit_matrix(coefs, n, b):
    """The Toeplitz form against the explicit n x n matrix: same rounds, column norm, tightness, curves."""
    c = [[coefs[r - i] if 0 <= r - i < len(coefs) else 0.0 for i in range(n)] for r in range(n)]
    t = AmplifiedBandedToeplitzMF(coefs, n, 0.9, 0.2, b)
    m = AmplifiedBandedMF(c, 0.9, 0.2, b)
    assert t.rounds == m.rounds
    exact_norm = math.sqrt(sum(x * x for x in coefs[:n]))
    assert exact_norm <= t.column_norm <= exact_norm * (1 + 1e-14)
    assert t.column_norm == pytest.approx(m.column_norm, rel=1e-14)
    assert t.tight == m.tight
    alphas = np.array([1.5, 2.0, 9.0, 100.0])
    assert np.allclose(t.rdp(alphas), m.rdp(alphas), rtol=1e-12, atol=0)


def test_toeplitz_tightness_by_group():
    """n = 10, b = 3, p = 3: k = 4 only for group 0 (steps 0, 3, 6, 9), whose last column (9) holds one
    coefficient of three: not attained; n = 12: group 0's last column is 9 (three rows left): attained."""
    assert not AmplifiedBandedToeplitzMF([1.0, 0.5, 0.25], 10, 1.0, 0.1, 3).tight
    assert AmplifiedBandedToeplitzMF([1.0, 0.5, 0.25], 12, 1.0, 0.1, 3).tight
    assert AmplifiedBandedToeplitzMF([1.0, 0.5, 0.0], 10, 1.0, 0.1, 3).rounds == 4


def test_toeplitz_large_run_and_contract():
    t = AmplifiedBandedToeplitzMF([0.5**j for j in range(16)], 10**6, 1.0, 0.01, 16)
    assert t.rounds == 62500 and t.tight
    check_mechanism(AmplifiedBandedToeplitzMF.example())
    back = registry.from_dict(json.loads(json.dumps(t.to_dict())))
    assert back == t and hash(back) == hash(t)
    # q = 1 and one band: the Gaussian of mu = c_0 sqrt(n) / sigma (closed form)
    g = AmplifiedBandedToeplitzMF([2.0], 100, 5.0, 1.0, 1)
    e = PrivacyAccountant().compose(g, times=g.rounds).epsilon(1e-6)
    exact = ref.gaussian_epsilon(1e-6, 2.0 * 10 / 5.0)
    assert exact <= e <= exact * (1 + 1e-6)


@pytest.mark.parametrize("kwargs,exc,match", [
    ({"coefficients": [1.0, 0.5, 0.25], "bands": 2}, ValueError, "bands must be >= .*3"),
    ({"coefficients": [1.0, 0.5, 0.0, 0.0], "bands": 1}, ValueError, "bands must be >= .*2"),
    ({"coefficients": [0.0, 0.0]}, ValueError, "non-zero"),
    ({"coefficients": []}, TypeError, "coefficients"),
    ({"coefficients": [1.0, float("inf")]}, ValueError, "coefficients\\[1\\]"),
    ({"coefficients": [1.0, "a"]}, TypeError, "coefficients\\[1\\]"),
    ({"steps": 0}, ValueError, "steps"),
    ({"sample_rate": 0.0}, ValueError, "sample_rate"),
    ({"sigma": float("nan")}, ValueError, "sigma"),
])
def test_toeplitz_bad_inputs(kwargs, exc, match):
    args = {"coefficients": [1.0, 0.5], "steps": 10, "sigma": 1.0, "sample_rate": 0.1, "bands": 2} | kwargs
    with pytest.raises(exc, match=match):
        AmplifiedBandedToeplitzMF(**args)


def test_replace_one_is_refused():
    with pytest.raises(ValueError, match="replace_one"):
        PrivacyAccountant("replace_one").compose(AmplifiedBandedMF.example())
