"""Noisy screening, Poisson-subsampled screening, GNMax and Private-kNN (Zhu, Yu & Wang 2020;
docs/derivations/noisy-screening.md).

Every curve is checked against an independent computation: mpmath evaluation of the binary Renyi
divergence over the candidate set built here from scratch, brute-force enumeration of all Poisson
subsets of tiny kNN datasets, mpmath quadrature of the subsampled-Gaussian divergence, and the
golden values from separate high-precision computations (not the library's code).  No oracle imports the
implementation's helpers.
"""

from __future__ import annotations

import math
import random

import mpmath as mp
import numpy as np
import pytest

from accountant import PrivacyAccountant
from accountant.cli import main as cli_main
from conversions.rdp_to_dp import eps_from_rdp
from mechanisms import Gaussian
from mechanisms._screening_kernels import log_ndtr
from mechanisms._screening_max_kernels import max_binary_rdp, max_binary_rdp_full
from mechanisms.gnmax import GNMax, SubsampledGNMax, subsampled_gaussian_rdp
from mechanisms.private_knn import PrivateKNN
from mechanisms.registry import from_dict
from mechanisms.screening import (
    NoisyScreening,
    SubsampledNoisyScreening,
    max_votes,
    screening_rdp,
    screening_rdp_data_dependent,
    subsampled_screening_rdp,
)

CIFAR = dict(sigma=85.0, threshold=210.0, k=300)  # thesis Fig. 4.5 / CIFAR-10 configuration


# --------------------------------------------------------------------------- independent oracles
def mp_binary_rdp(alpha, p, pb, q, qb):
    """D_alpha(Bern(p) || Bern(q)) with masses given separately (no 1 - p cancellation)."""
    if alpha == math.inf:
        return max(mp.log(p / q), mp.log(pb / qb))
    a = mp.mpf(alpha)
    return mp.log(p**a * q ** (1 - a) + pb**a * qb ** (1 - a)) / (a - 1)


def mp_pi(t, sigma, thr):
    z = (mp.mpf(t) - mp.mpf(thr)) / mp.mpf(sigma)
    return mp.ncdf(z), mp.ncdf(-z)


def mp_screening_rdp(alpha, sigma, thr, k, t_min, dps=40, thesis_set=False):
    """Max binary divergence over the candidate pairs, built from scratch.

    Default: all feasible adjacent pairs t, t' in [t_min, k], both orders.  ``thesis_set=True``:
    the thesis' printed set {(pi(t), pi(t +- 1)) : t_min <= t <= k} (Thm 4.3.1), which also
    contains the two infeasible partners t_min - 1 and k + 1.
    """
    with mp.workdps(dps):
        pis = {t: mp_pi(t, sigma, thr) for t in range(t_min - 1, k + 2)}
        best = mp.mpf(0)
        for t in range(t_min, k + 1):
            for u in (t - 1, t + 1):
                if not thesis_set and not t_min <= u <= k:
                    continue
                (p, pb), (q, qb) = pis[t], pis[u]
                best = max(best, mp_binary_rdp(alpha, p, pb, q, qb))
        return best


def mp_subsampled_screening_rdp(alpha, sigma, thr, k, gamma, t_min=0, dps=40):
    """docs/derivations/noisy-screening.md section 2 on feasible pairs: both directions between Bern(q),
    Bern((1-g) q + g p)."""
    with mp.workdps(dps):
        g = mp.mpf(gamma)
        best = mp.mpf(0)
        for t in range(t_min, k + 1):
            q, qb = mp_pi(t, sigma, thr)
            for u in (t - 1, t + 1):
                if not t_min <= u <= k:
                    continue
                p, pb = mp_pi(u, sigma, thr)
                m, mb = (1 - g) * q + g * p, (1 - g) * qb + g * pb
                best = max(best, mp_binary_rdp(alpha, m, mb, q, qb), mp_binary_rdp(alpha, q, qb, m, mb))
        return best


# ------------------------------------------------------------------- golden values (separate computations)
GOLDEN_41 = {  # k=300, c=10, T=210, sigma=85, t_min = ceil(k/c) = 30; data-independent curve
    1.5: 6.6085202687e-05, 2: 8.8113280084e-05, 4: 1.7623031769e-04, 8: 3.5250233257e-04,
    16: 7.0531872337e-04, 32: 1.4132805765e-03, 64: 2.8481771503e-03, 128: 5.8824619905e-03,
    256: 1.3371310976e-02, 1000: 2.5139974623e-02, math.inf: 2.9212578744e-02,
}


def test_golden_table_thesis_range():
    """Golden values of the data-independent curve (docs/derivations/noisy-screening.md section 1).  They
    were computed with the thesis' printed set, which
    includes the infeasible partner t_min - 1; our feasible-pair curve equals them for alpha <= 128
    and is (validly) slightly smaller above, where the boundary pair (30, 29) is the thesis' argmax."""
    m = NoisyScreening.thesis_range(num_classes=10, **CIFAR)
    assert m.t_min == 30
    al = np.array(list(GOLDEN_41))
    got = m.rdp(al)
    ref = np.array(list(GOLDEN_41.values()))
    low = al <= 128
    np.testing.assert_allclose(got[low], ref[low], rtol=2e-10)
    assert np.all(got[~low] <= ref[~low]) and np.all(got[~low] >= 0.99 * ref[~low])
    assert m.kl() == pytest.approx(4.4056640042e-05, rel=1e-10)  # alpha = 1 (KL) row
    # the golden values themselves come from the thesis' set (independent oracle)
    for a in (256.0, math.inf):
        th = mp_screening_rdp(a, 85.0, 210.0, 300, 30, thesis_set=True)
        assert float(th) == pytest.approx(GOLDEN_41[a], rel=1e-9)
        assert m.rdp(np.array([a]))[0] == pytest.approx(float(mp_screening_rdp(a, 85.0, 210.0, 300, 30)),
                                                        rel=1e-10)


def test_golden_strict_range_and_data_dependent():
    m = NoisyScreening(**CIFAR)  # t_min = 0
    # spec (thesis set, t_min = 0): 2.7953e-02 and 3.2957e-02; feasible pairs are at most that
    big = m.rdp(np.array([1000.0, math.inf]))
    assert np.all(big <= [2.7953e-02 * (1 + 2e-4), 3.2957e-02 * (1 + 2e-4)])
    assert np.all(big >= [0.99 * 2.7953e-02, 0.99 * 3.2957e-02])
    # unchanged below alpha = 256 (docs/derivations/noisy-screening.md section 1)
    al = np.array([2.0, 8.0, 32.0, 128.0])
    np.testing.assert_allclose(m.rdp(al), [GOLDEN_41[a] for a in (2, 8, 32, 128)], rtol=2e-10)
    dd = m.rdp_data_dependent(8.0, [30, 100, 150, 200, 209, 210, 211, 250, 300])
    ref = [6.4272e-05, 1.9709e-04, 3.0184e-04, 3.5204e-04, 3.5236e-04, 3.5224e-04, 3.5236e-04,
           3.3116e-04, 2.4198e-04]
    np.testing.assert_allclose(dd, ref, rtol=2e-4)
    # exact symmetry t -> 2T - t (pass/fail relabelling), golden 3.5235563295e-04
    assert dd[4] == pytest.approx(3.5235563295e-04, rel=1e-10)
    assert dd[6] == pytest.approx(dd[4], rel=1e-12)


GOLDEN_42 = {  # gamma = 0.25, same config, t_min = 30; subsampled screening
    2: (5.5073074707e-06, 5.5073074706e-06, 8.6510802899e-06),
    8: (2.2031503029e-05, 2.2031896068e-05, 3.4609710813e-05),
    32: (8.8170854917e-05, 8.8179261640e-05, 1.3852515986e-04),
    64: (1.7650913445e-04, 1.7654555786e-04, 2.7728090717e-04),
}


def test_golden_subsampled_forms():
    al = np.array(list(GOLDEN_42), dtype=float)
    exact = subsampled_screening_rdp(al, sample_rate=0.25, t_min=30, **CIFAR)
    tight = subsampled_screening_rdp(al, sample_rate=0.25, t_min=30, method="tight", **CIFAR)
    gauss = subsampled_gaussian_rdp(al, 85.0, 0.25)
    np.testing.assert_allclose(exact, [v[0] for v in GOLDEN_42.values()], rtol=1e-9)
    np.testing.assert_allclose(tight, [v[1] for v in GOLDEN_42.values()], rtol=1e-9)
    np.testing.assert_allclose(gauss, [v[2] for v in GOLDEN_42.values()], rtol=1e-9)


def test_fig45_four_curves_at_8192_queries():
    """Thesis Fig. 4.5 end points (delta = 1e-5, standard conversion), recomputed separately."""
    n, d = 8192, 1e-5

    def eps(curve):
        return eps_from_rdp(lambda a: n * curve(a), d, rule="classic").value

    green = eps(lambda a: Gaussian(85.0).rdp(a))
    black = eps(lambda a: subsampled_gaussian_rdp(a, 85.0, 0.25))
    blue = eps(NoisyScreening(**CIFAR).rdp)
    red = eps(SubsampledNoisyScreening(sample_rate=0.25, **CIFAR).rdp)
    red_tight = eps(lambda a: subsampled_screening_rdp(a, sample_rate=0.25, t_min=30, method="tight",
                                                       **CIFAR))
    assert round(green, 4) == 5.6765
    assert round(black, 4) == 1.3132
    assert round(blue, 4) == 4.4380
    assert round(red, 4) == 1.0420
    assert round(red_tight, 4) == 1.0422
    # the accountant reproduces the blue curve through its RDP route
    acct = PrivacyAccountant().compose(NoisyScreening(**CIFAR), 8192)
    assert round(acct.certificate(delta=d, method="rdp_classic").epsilon, 4) == 4.4380


def test_table41_private_knn_recomputation():
    """Thesis Table 4.1, recomputed (screen = T1, aggregation Delta^2 = 2 and 1)."""
    cases = [  # k, T, sigma1, sigma2, gamma, m, A, delta, eps(D^2=2), eps(D^2=1)
        (300, 180, 75, 25, 0.15, 1000, 735, 1e-5, 1.163, 0.834),
        (800, 480, 200, 60, 0.03, 6000, 2939, 1e-6, 0.208, 0.151),
        (300, 210, 85, 20, 0.2, 18000, 3877, 1e-5, 4.832, 3.455),
    ]
    for k, thr, s1, s2, g, m, a, d, e2, e1 in cases:
        for sens, ref in ((math.sqrt(2.0), e2), (1.0, e1)):
            mech = PrivateKNN(s1, thr, k, s2, g, m, a, answer_sensitivity=sens)
            got = eps_from_rdp(mech.rdp, d, rule="classic").value
            # spec used the thesis-style tight form for screening; exact is at most that
            assert got == pytest.approx(ref, abs=1.5e-3)


# --------------------------------------------------------------------------- mpmath agreement
PARAM_SETS = [
    dict(sigma=85.0, threshold=210.0, k=300, t_min=0),
    dict(sigma=5.0, threshold=210.0, k=300, t_min=0),  # deep tails: z down to -42
    dict(sigma=2.0, threshold=12.5, k=20, t_min=0),
    dict(sigma=10.0, threshold=60.0, k=50, t_min=5),  # threshold above every feasible t
    dict(sigma=0.7, threshold=0.3, k=1, t_min=0),
]
ALPHAS = [1.0001, 1.5, 2.0, 3.0, 5.0, 10.0, 32.0, 100.0, 1000.0, math.inf]


@pytest.mark.parametrize("ps", PARAM_SETS)
def test_screening_matches_mpmath(ps):
    got = screening_rdp(np.array(ALPHAS), **ps)
    for a, g in zip(ALPHAS, got, strict=True):
        ref = mp_screening_rdp(a, ps["sigma"], ps["threshold"], ps["k"], ps["t_min"])
        assert g == pytest.approx(float(ref), rel=1e-10, abs=1e-300), (a, ps)


@pytest.mark.parametrize("ps", PARAM_SETS[1:])
@pytest.mark.parametrize("gamma", [1e-4, 0.05, 0.6, 1.0])
def test_subsampled_screening_matches_mpmath(ps, gamma):
    al = [1.0001, 2.0, 7.5, 64.0, 1000.0, math.inf]
    got = subsampled_screening_rdp(np.array(al), sample_rate=gamma, **ps)
    for a, g in zip(al, got, strict=True):
        ref = mp_subsampled_screening_rdp(a, ps["sigma"], ps["threshold"], ps["k"], gamma, ps["t_min"])
        assert g == pytest.approx(float(ref), rel=1e-9, abs=1e-300), (a, gamma, ps)


def test_log_ndtr_against_mpmath():
    for z in [-1e4, -500.0, -40.0, -37.01, -36.99, -20.0, -5.0, -1.0, -1e-8, 0.0, 0.5, 3.0, 8.0, 30.0]:
        ref = mp.log(mp.ncdf(z)) if z < 8 else -mp.ncdf(-z)  # log(1 - x) = -x to 1e-15 for z >= 8
        assert log_ndtr(z) == pytest.approx(float(ref), rel=5e-14, abs=1e-300)


def test_pruned_maximum_equals_full_scan():
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(1, 80))
        z = np.sort(rng.normal(0, 3, n + 1))
        lp = np.array([log_ndtr(x) for x in z[:-1]])
        lpb = np.array([log_ndtr(-x) for x in z[:-1]])
        lq = np.array([log_ndtr(x) for x in z[1:]])
        lqb = np.array([log_ndtr(-x) for x in z[1:]])
        al = rng.permutation(np.concatenate([1 + np.geomspace(1e-5, 1e4, 40), [np.inf, 2.0, 2.0]]))
        a = max_binary_rdp(al, lp, lpb, lq, lqb)
        b = max_binary_rdp_full(al, lp, lpb, lq, lqb)
        np.testing.assert_allclose(a, b, rtol=1e-12)


# --------------------------------------------------------------------------- brute force on kNN data
def _tstat(subset, x, k, c):
    if not subset:
        return 0
    near = sorted(subset, key=lambda r: (abs(r[0] - x), r[2]))[:k]
    counts = [0] * c
    for r in near:
        counts[r[1]] += 1
    return max(counts)


def _pass_prob(data, x, k, c, gamma, sigma, thr):
    """Exact P[pass] of Poisson-subsampled kNN screening by enumerating all 2^n subsets."""
    n = len(data)
    g = mp.mpf(gamma)
    tot = mp.mpf(0)
    for mask in range(1 << n):
        sub = [data[i] for i in range(n) if mask >> i & 1]
        w = g ** len(sub) * (1 - g) ** (n - len(sub))
        if w:
            tot += w * mp.ncdf((_tstat(sub, x, k, c) - mp.mpf(thr)) / sigma)
    return tot


def _observed(alpha, p, q):
    return max(mp_binary_rdp(alpha, p, 1 - p, q, 1 - q), mp_binary_rdp(alpha, q, 1 - q, p, 1 - p))


def test_bruteforce_knn_never_exceeds_bound():
    rng = random.Random(11)
    k, c = 3, 2
    worst = 0.0
    with mp.workdps(30):
        for _ in range(60):
            n = rng.randint(1, 6)
            data = [(rng.random(), rng.randrange(c), i) for i in range(n)]
            new = (rng.random(), rng.randrange(c), n)
            x = rng.random()
            gamma = rng.choice([0.3, 0.7, 1.0])
            sigma = rng.choice([0.3, 0.5, 1.0])
            thr = rng.choice([0.5, 1.5, 2.5, 3.2])
            p = _pass_prob(data + [new], x, k, c, gamma, sigma, thr)
            q = _pass_prob(data, x, k, c, gamma, sigma, thr)
            al = np.array([2.0, 8.0, 64.0])
            bound = subsampled_screening_rdp(al, sigma, thr, k, gamma)
            for a, b in zip(al, bound, strict=True):
                obs = float(_observed(a, p, q))
                assert obs <= b * (1 + 1e-9) + 1e-15
                worst = max(worst, obs / b)
            if gamma == 1.0 and n >= k:  # thesis range valid: >= k records, no subsampling
                th = NoisyScreening.thesis_range(sigma, thr, k, c).rdp(al)
                for a, b in zip(al, th, strict=True):
                    assert float(_observed(a, p, q)) <= b * (1 + 1e-9) + 1e-15
    assert worst > 0.9  # the exact form is attained on some tiny instance


def test_thesis_range_violated_under_subsampling():
    """docs/derivations/noisy-screening.md section 1: with t_min = ceil(k/c) the bound fails on a subsample
    with < k records."""
    data = [(0.309670053476339, 0, 0)]
    new = (0.10811930596651731, 0, 1)
    x, k, c, gamma, sigma, thr = 0.948895493130273, 3, 2, 0.7, 0.5, 2.5
    with mp.workdps(30):
        p = _pass_prob(data + [new], x, k, c, gamma, sigma, thr)
        q = _pass_prob(data, x, k, c, gamma, sigma, thr)
        obs = float(_observed(8.0, p, q))
    thesis = subsampled_screening_rdp(np.array([8.0]), sigma, thr, k, gamma, t_min=2)[0]
    strict = SubsampledNoisyScreening(sigma, thr, k, gamma).rdp(np.array([8.0]))[0]
    assert obs > 1.5 * thesis
    assert obs <= strict * (1 + 1e-12)


# --------------------------------------------------------------------------- properties
def _grid():
    return np.concatenate([1 + np.geomspace(1e-6, 1e5, 80), [np.inf]])


@pytest.mark.parametrize("ps", PARAM_SETS)
def test_properties_monotone_convex_data_processing(ps):
    al = _grid()
    e = screening_rdp(al, **ps)
    assert np.all(np.diff(e) >= -1e-15 * np.abs(e[1:]))
    assert np.all(e[:-1] <= al[:-1] / (2 * ps["sigma"] ** 2) * (1 + 1e-12))  # data processing
    ints = np.arange(2, 200, dtype=float)
    cgf = (ints - 1) * screening_rdp(ints, **ps)
    assert np.all(np.diff(cgf, 2) >= -1e-12 * cgf[2:])
    # alpha -> 1 gives KL, alpha -> inf gives the max log-ratio
    m = NoisyScreening(**ps)
    assert m.rdp(np.array([1 + 1e-7]))[0] == pytest.approx(m.kl(), rel=1e-4)
    big = m.rdp(np.array([1e7]))[0]
    assert big <= m.pure_epsilon * (1 + 1e-12) and big == pytest.approx(m.pure_epsilon, rel=1e-3)


def test_small_alpha_two_over_pi():
    for sigma, ref in ((10.0, 0.636531), (1000.0, 0.636620)):
        k = int(60 * sigma)
        e = screening_rdp(np.array([1.01]), sigma, k // 2, k)[0]  # integer threshold, interior
        assert e / (1.01 / (2 * sigma**2)) == pytest.approx(ref, abs=2e-6)


@pytest.mark.parametrize("ps", PARAM_SETS)
def test_subsampling_properties(ps):
    al = _grid()
    base = screening_rdp(al, **ps)
    prev = np.zeros_like(al)
    for g in (0.0, 1e-3, 0.1, 0.5, 0.9, 1.0):
        cur = subsampled_screening_rdp(al, sample_rate=g, **ps)
        assert np.all(cur <= base * (1 + 1e-12) + 1e-300)  # subsampling never costs more
        assert np.all(cur >= prev * (1 - 1e-12))  # monotone in the rate
        assert np.all(np.diff(cur) >= -1e-15 * np.abs(cur[1:]))
        prev = cur
    np.testing.assert_allclose(prev, base, rtol=1e-12)  # gamma = 1 is the unsubsampled curve
    ints = np.array([2.0, 3.0, 8.0, 20.0])
    ex = subsampled_screening_rdp(ints, sample_rate=0.3, **ps)
    tight = subsampled_screening_rdp(ints, sample_rate=0.3, method="tight", **ps)
    gen = subsampled_screening_rdp(ints, sample_rate=0.3, method="general", **ps)
    assert np.all(ex <= tight * (1 + 1e-10)) and np.all(tight <= gen * (1 + 1e-12))


def test_more_noise_can_cost_more_for_the_bit():
    """'More noise never costs more' is false for screening with a threshold outside the range of t:
    the true divergence (mpmath, t in {0, 1}, T = -5) grows with sigma, and the bound follows it."""
    with mp.workdps(30):
        true = [max(mp_binary_rdp(2.0, *mp_pi(1, s, -5.0), *mp_pi(0, s, -5.0)),
                    mp_binary_rdp(2.0, *mp_pi(0, s, -5.0), *mp_pi(1, s, -5.0))) for s in (0.5, 5.0)]
    assert true[1] > 1e6 * true[0]
    for s, t in zip((0.5, 5.0), true, strict=True):
        assert screening_rdp(np.array([2.0]), s, -5.0, 1)[0] >= float(t) * (1 - 1e-10)
    # the data-processing envelope alpha / (2 sigma^2) is monotone and always above the curve
    al = _grid()[:-1]
    for s in (0.5, 1.0, 5.0):
        assert np.all(screening_rdp(al, s, -5.0, 1) <= al / (2 * s * s))


def test_data_dependent_below_data_independent():
    m = NoisyScreening(**CIFAR)
    al = np.array([1.5, 2.0, 8.0, 64.0, 1000.0])
    di = m.rdp(al)
    ts = np.arange(1, 300, 7)
    dd = m.rdp_data_dependent(al, ts)
    assert dd.shape == (ts.size, al.size)
    assert np.all(dd <= di * (1 + 1e-12))
    # independent check of one value
    ref = max(mp_binary_rdp(8.0, *mp_pi(100, 85, 210), *mp_pi(u, 85, 210)) for u in (99, 101))
    ref = max(ref, *(mp_binary_rdp(8.0, *mp_pi(u, 85, 210), *mp_pi(100, 85, 210)) for u in (99, 101)))
    assert screening_rdp_data_dependent(8.0, 100, 85.0, 210.0) == pytest.approx(float(ref), rel=1e-10)
    assert list(max_votes([[3, 1, 0], [0, 0, 2]])) == [3, 2]


# --------------------------------------------------------------------------- GNMax
def mp_subsampled_gaussian(alpha, sigma, gamma, direction):
    """D_alpha between (1-g) N(0, s^2) + g N(1, s^2) and N(0, s^2) by mpmath quadrature."""
    a, s, g = mp.mpf(alpha), mp.mpf(sigma), mp.mpf(gamma)

    def q(x):
        return mp.npdf(x, 0, s)

    def p(x):
        return (1 - g) * mp.npdf(x, 0, s) + g * mp.npdf(x, 1, s)

    f = (lambda x: p(x) ** a * q(x) ** (1 - a)) if direction == "fwd" else \
        (lambda x: q(x) ** a * p(x) ** (1 - a))
    val = mp.quad(f, [-mp.inf, -10 * s, 0, 1, 10 * s + 1, mp.inf])
    return mp.log(val) / (a - 1)


@pytest.mark.parametrize("sigma,gamma", [(1.0, 0.1), (2.0, 0.5), (0.8, 0.02)])
def test_subsampled_gaussian_against_quadrature(sigma, gamma):
    with mp.workdps(30):
        for a in (2.0, 3.0, 5.0):
            got = subsampled_gaussian_rdp(np.array([a]), sigma, gamma)[0]
            fwd = mp_subsampled_gaussian(a, sigma, gamma, "fwd")
            rev = mp_subsampled_gaussian(a, sigma, gamma, "rev")
            assert got == pytest.approx(float(fwd), rel=1e-9)  # exact at integer orders
            assert float(rev) <= got * (1 + 1e-9)
        for a in (1.5, 2.5, 4.2):  # fractional: interpolation is an upper bound
            got = subsampled_gaussian_rdp(np.array([a]), sigma, gamma)[0]
            for d in ("fwd", "rev"):
                assert float(mp_subsampled_gaussian(a, sigma, gamma, d)) <= got * (1 + 1e-9)


def test_gnmax_curves_and_properties():
    al = _grid()[:-1]
    g = GNMax(sigma=20.0)
    np.testing.assert_allclose(g.rdp(al), al * 2 / (2 * 400.0))  # Delta^2 = 2
    assert GNMax(sigma=20.0, sensitivity=1.0).rdp(np.array([2.0]))[0] == pytest.approx(2 / 800)
    prev = None
    for s in (0.5, 1.0, 3.0, 20.0):  # more noise never costs more
        cur = SubsampledGNMax(sigma=s, sample_rate=0.2).rdp(al)
        assert np.all(cur <= GNMax(sigma=s).rdp(al) * (1 + 1e-12))
        assert np.all(np.diff(cur) >= -1e-14 * cur[1:])
        if prev is not None:
            assert np.all(cur <= prev * (1 + 1e-12))
        prev = cur
    assert np.all(SubsampledGNMax(3.0, 1.0).rdp(al) == pytest.approx(GNMax(3.0).rdp(al), rel=1e-9))
    assert math.isinf(SubsampledGNMax(3.0, 0.2).rdp(np.array([np.inf]))[0])


# --------------------------------------------------------------------------- Private-kNN composite
def test_private_knn_composite():
    m = PrivateKNN(85.0, 210.0, 300, 20.0, 0.2, 1000, 100)
    al = np.array([2.0, 8.0, 30.0])
    scr = SubsampledNoisyScreening(85.0, 210.0, 300, 0.2).rdp(al)
    ans = SubsampledGNMax(20.0, 0.2).rdp(al)
    np.testing.assert_allclose(m.rdp(al), 1000 * scr + 100 * ans, rtol=1e-12)
    capped = [PrivateKNN(85.0, 210.0, 300, 20.0, 0.2, 1000, a).rdp(al) for a in (0, 10, 100, 1000)]
    assert all(np.all(x <= y) for x, y in zip(capped, capped[1:], strict=False))
    assert math.isfinite(PrivateKNN(85.0, 210.0, 300, 20.0, 0.2, 10, 0).pure_epsilon)
    assert math.isinf(m.pure_epsilon)


# --------------------------------------------------------------------------- integration
def test_registry_roundtrip_and_accountant_composition():
    mechs = [NoisyScreening(**CIFAR), NoisyScreening.thesis_range(num_classes=10, **CIFAR),
             SubsampledNoisyScreening(sample_rate=0.25, **CIFAR), GNMax(20.0), SubsampledGNMax(20.0, 0.2),
             PrivateKNN(85.0, 210.0, 300, 20.0, 0.2, 1000, 100)]
    for m in mechs:
        back = from_dict(m.to_dict())
        assert back == m and type(back) is type(m)
    acct = PrivacyAccountant()
    acct.compose(NoisyScreening(**CIFAR), 500).compose(Gaussian(sigma=30.0), 40)
    acct.compose(SubsampledGNMax(20.0, 0.2), 50)
    # independent conversion: classic rule on a fine grid with oracle-free closed forms summed here
    al = np.linspace(1.01, 200, 20000)
    total = (500 * NoisyScreening(**CIFAR).rdp(al) + 40 * al / (2 * 900.0)
             + 50 * SubsampledGNMax(20.0, 0.2).rdp(al))
    np.testing.assert_allclose(acct.rdp(al), total, rtol=1e-12)
    grid_eps = float(np.min(total + math.log(1e5) / (al - 1)))
    cert = acct.certificate(delta=1e-5, method="rdp_classic")
    assert cert.epsilon <= grid_eps * (1 + 1e-9) and cert.epsilon >= grid_eps * (1 - 1e-4)
    auto = acct.certificate(delta=1e-5)
    assert auto.epsilon <= cert.epsilon * (1 + 1e-12) and auto.method == "rdp"


def test_cli(capsys):
    rc = cli_main(["epsilon", "--mechanism", "noisy_screening", "--sigma", "85", "--threshold", "210",
                   "--k", "300", "--times", "8192", "--delta", "1e-5", "--method", "rdp_classic", "--json"])
    assert rc == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert round(out["epsilon"], 4) == 4.4380


def test_bad_input():
    with pytest.raises(ValueError, match="sigma"):
        NoisyScreening(sigma=-1.0, threshold=1.0, k=3)
    with pytest.raises(ValueError, match="threshold"):
        NoisyScreening(sigma=1.0, threshold=math.inf, k=3)
    with pytest.raises(ValueError, match="threshold"):
        NoisyScreening(sigma=1.0, threshold=math.nan, k=3)
    with pytest.raises(ValueError, match="k"):
        NoisyScreening(sigma=1.0, threshold=1.0, k=0)
    with pytest.raises(ValueError, match="t_min"):
        NoisyScreening(sigma=1.0, threshold=1.0, k=3, t_min=4)
    with pytest.raises(TypeError, match="k"):
        NoisyScreening(sigma=1.0, threshold=1.0, k=2.5)
    with pytest.raises(ValueError, match="sample_rate"):
        SubsampledNoisyScreening(1.0, 1.0, 3, sample_rate=1.5)
    with pytest.raises(ValueError, match="answer_cap"):
        PrivateKNN(85.0, 210.0, 300, 20.0, 0.2, 10, 11)
    with pytest.raises(ValueError, match="sample_rate"):
        PrivateKNN(85.0, 210.0, 300, 20.0, 0.0, 10, 1)
    with pytest.raises(ValueError, match="alpha"):
        NoisyScreening(1.0, 1.0, 3).rdp([1.0])
    with pytest.raises(ValueError, match="method"):
        subsampled_screening_rdp([2.0], 1.0, 1.0, 3, 0.5, method="magic")
    with pytest.raises(ValueError, match="sigma"):
        GNMax(sigma=0.0)
    with pytest.raises(ValueError, match="non-negative"):
        max_votes([[1, -2]])
    with pytest.raises(ValueError):
        max_votes(np.zeros((3, 0)))
    with pytest.raises(TypeError):
        screening_rdp_data_dependent(2.0, 1.5, 1.0, 0.0)
    with pytest.raises(ValueError, match="range"):
        NoisyScreening(1.0, 1.0, 3).rdp_data_dependent(2.0, 4)
