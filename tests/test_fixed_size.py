"""Fixed-size batches (sampling without replacement): dominating pairs checked by brute force.

References (tests/reference_sampling.py, independent of the library): every b-subset of small datasets
enumerated, exact hockey-stick divergences of the resulting Gaussian mixtures in mpmath (normal-CDF
masses of the positive set), for orders alpha below and above 1 (composition needs both).
"""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import numpy as np
import pytest
from reference_sampling import Mixture, hs1, hs2, wor_pair_add_remove, wor_pair_replace_one

from accountant import PrivacyAccountant
from mechanisms import SubsampledGaussian
from mechanisms.fixed_size import FixedSizeGaussian, FixedSizeGaussianReplaceOne

ALPHAS = ["0.35", "0.8", "1", "1.7", "3.5"]


def _pair(sigma, gamma, shift=2):
    """(A, B) = ((1 - g) N(0, s^2) + g N(shift, s^2), N(0, s^2)) as reference mixtures."""
    g = mp.mpf(gamma)
    return Mixture({(0,): 1 - g, (shift,): g}, sigma), Mixture({(0,): 1}, sigma)


def _datasets(n_others, values):
    """Multisets of the other records' gradients (order does not matter for the output law)."""
    return [o for o in itertools.product(values, repeat=n_others) if list(o) == sorted(o)]


@pytest.mark.parametrize("n,b,sigma,values", [
    (3, 1, "0.8", (-1, 1)),
    pytest.param(3, 2, "1.3", (-1, 0, 1), marks=pytest.mark.slow),
    pytest.param(4, 2, "0.7", (-1, 0, 1), marks=pytest.mark.slow),
])
def test_add_remove_pair_is_the_tight_dominating_pair(n, b, sigma, values):
    """Zhu-Dong-Wang Thm 10(2) / thesis Thm 3.3.5(2) for the Gaussian sum: sup over datasets of
    H_alpha(M(D) || M(D')) equals H_alpha of the Poisson pair with rate b/n and shift 2C, both
    directions, every order (the brute force attains it: dominating *and* tight)."""
    mp.mp.dps = 15
    s = mp.mpf(sigma)
    A, B = _pair(s, mp.mpf(b) / n)
    for alpha in ALPHAS:
        a = mp.mpf(alpha)
        worst_rem = worst_add = mp.mpf(0)
        for others in _datasets(n - 1, values):
            for x in (-1, 0, 1):
                P, Q = wor_pair_add_remove(others, x, b, s)
                worst_rem = max(worst_rem, hs1(P, Q, a))
                worst_add = max(worst_add, hs1(Q, P, a))
        ref_rem, ref_add = hs1(A, B, a), hs1(B, A, a)
        assert worst_rem <= ref_rem + 1e-12 and worst_add <= ref_add + 1e-12
        assert worst_rem >= ref_rem - 1e-9 and worst_add >= ref_add - 1e-9  # attained


def test_replace_one_needs_the_symmetrised_pair():
    """Replace-one: the supremum over ordered neighbours is H_alpha(A || B) for alpha >= 1 and
    H_alpha(B || A) for alpha < 1 (the symmetrised pair, attained); (A, B) alone is beaten below 1 and
    (B, A) alone above 1, so neither direction dominates on its own."""
    mp.mp.dps = 15
    n, b, s = 3, 1, mp.mpf("0.9")
    A, B = _pair(s, mp.mpf(b) / n)
    beaten_ab = beaten_ba = False
    for alpha in ALPHAS:
        a = mp.mpf(alpha)
        worst = mp.mpf(0)
        for others in _datasets(n - 1, [-1, 1]):
            for x, xp in itertools.product((-1, 0, 1), repeat=2):
                P, Q = wor_pair_replace_one(others, x, xp, b, s)
                worst = max(worst, hs1(P, Q, a))
        sym = hs1(A, B, a) if a >= 1 else hs1(B, A, a)
        assert worst <= sym + 1e-12
        assert worst >= sym - 1e-9
        beaten_ab |= worst > hs1(A, B, a) + 1e-6
        beaten_ba |= worst > hs1(B, A, a) + 1e-6
    assert beaten_ab and beaten_ba


def test_symmetrised_mgf_against_mpmath():
    """log M(s) of the symmetrised pair vs an mpmath quadrature of its definition (A, B densities)."""
    m = FixedSizeGaussianReplaceOne(sigma=1.3, batch_size=16, dataset_size=100)
    q, mu = m.sample_rate, m.mu
    mp.mp.dps = 30

    def ref(sv):
        sv = mp.mpc(sv)
        lo = mu / 2

        def ell(x):
            return mp.log(1 - q + q * mp.exp(mu * x - mu * mu / 2))

        f = lambda x: mp.npdf(x) * (mp.exp((sv + 1) * ell(x)) + mp.exp(-sv * ell(x)))  # noqa: E731
        a0 = 1 - (2 - q) * mp.ncdf(-mu / 2) - q * mp.ncdf(mu / 2)  # 1 - A(L > 0) - B(L > 0)
        return mp.log(a0 + mp.quad(f, [lo, lo + 1, lo + 4, lo + 12, 80]))

    for sv in [0.0, 0.4, 3.0, 9.0, complex(0.3, 1.7), complex(2.0, 25.0), complex(0.0, 7.0)]:
        got = complex(m.log_mgf(np.array([complex(sv)]))[0])
        want = complex(ref(sv))
        assert abs(got.real - want.real) <= m.log_mgf_error
        assert abs(complex(np.exp(1j * got.imag)) - complex(mp.exp(1j * mp.im(want)))) <= 1e-10
    # symmetry of the pair: M(s) = M(-1 - s)
    s = np.array([0.25 + 0j, 2.0 + 0.5j])
    assert np.allclose(m.log_mgf(s), m.log_mgf(-1.0 - s), rtol=0, atol=1e-12)


def test_symmetrised_cells_against_mpmath():
    """Cell masses of the loss = CDF differences computed independently from the mixtures A, B."""
    m = FixedSizeGaussianReplaceOne(sigma=0.9, batch_size=5, dataset_size=20)
    q, mu = m.sample_rate, m.mu
    mp.mp.dps = 30
    edges = np.array([-2.0, -0.7, -0.1, 0.0, 0.3, 1.1, 2.5])
    masses, err = m.pld_cell_masses(edges)

    def x_of(l):  # l(x) = l  <=>  x = (log((e^l - 1 + q) / q) + mu^2 / 2) / mu
        return (mp.log((mp.e ** l - 1 + q) / q) + mu * mu / 2) / mu

    def cdf(e):  # P*(L <= e)
        e = mp.mpf(e)
        a0 = (1 - q) * mp.erf(mu / (2 * mp.sqrt(2)))
        if e >= 0:  # all of the negative part and the atom, plus A(0 < L <= e)
            neg = mp.ncdf(-mu / 2)  # B(x > mu/2) = mass of the negative part
            pos = (1 - q) * (mp.ncdf(x_of(e)) - mp.ncdf(mu / 2)) + q * (mp.ncdf(x_of(e) - mu)
                                                                     - mp.ncdf(mu / 2 - mu))
            return neg + a0 + pos
        # negative part: B(-l(x) <= e) = B(l(x) >= -e) = B(x >= x_of(-e))
        return mp.ncdf(-x_of(-e))

    c = [cdf(e) for e in edges]
    ref = [c[0]] + [c[i] - c[i - 1] for i in range(1, len(c))] + [1 - c[-1]]
    for got, want, e in zip(masses, ref, err, strict=True):
        assert abs(got - float(want)) <= e + 1e-15
    assert abs(masses.sum() - 1.0) <= 1e-13


@pytest.mark.parametrize("eps", [0.0, 0.7, 2.0])
def test_one_step_replace_one_certificate_contains_the_exact_profile(eps):
    """One step under replace-one: the sup over neighbours is H_{e^eps}(A || B) for eps >= 0; the
    certified bracket must contain it (upper) and the attained lower bound must not exceed it."""
    mp.mp.dps = 20
    sigma, b, n = 1.1, 3, 10
    A, B = _pair(mp.mpf(sigma), mp.mpf(b) / n)
    truth = float(hs1(A, B, mp.e ** mp.mpf(eps)))
    acct = PrivacyAccountant(relation="replace_one")
    acct.step(sigma=sigma, batch_size=b, dataset_size=n, sampling="fixed_size")
    cert = acct.certificate(epsilon=eps)
    assert cert.delta >= truth * (1 - 1e-9) - 1e-15
    assert cert.lower_bound is not None and cert.lower_bound <= truth * (1 + 1e-12) + 1e-15


@pytest.mark.slow
def test_two_steps_replace_one_cover_every_switching_adversary():
    """Two steps under replace-one: the adversary may realise (A, B) at one step and the swapped
    configuration at the other.  The certified delta covers AA|BB, BB|AA and AB|BA (2-D brute force);
    the certified lower bound is at most AA|BB (attained)."""
    mp.mp.dps = 12
    sigma, b, n = 1.0, 3, 10
    s = mp.mpf(sigma)
    A, B = _pair(s, mp.mpf(b) / n)

    def prod(m1, m2):
        return Mixture({(a[0], c[0]): wa * wc for a, wa in m1.comps.items() for c, wc in m2.comps.items()}, s)

    acct = PrivacyAccountant(relation="replace_one")
    acct.step(sigma=sigma, batch_size=b, dataset_size=n, sampling="fixed_size", steps=2)
    for eps in (0.3, 1.2):
        a = mp.e ** mp.mpf(eps)
        cases = [hs2(prod(A, A), prod(B, B), a), hs2(prod(B, B), prod(A, A), a),
                 hs2(prod(A, B), prod(B, A), a)]
        cert = acct.certificate(epsilon=eps)
        assert cert.delta >= float(max(cases)) * (1 - 1e-7)
        assert cert.lower_bound <= float(cases[0]) * (1 + 1e-7)


def test_add_remove_is_the_poisson_pair_with_double_shift():
    """FixedSizeGaussian has exactly the curves of SubsampledGaussian(sigma, b/n, 2C)."""
    m = FixedSizeGaussian(sigma=1.7, batch_size=32, dataset_size=1000, sensitivity=0.5)
    ref = SubsampledGaussian(1.7, 32 / 1000, 1.0)
    al = np.array([1.5, 2.0, 8.0, 40.0])
    assert np.array_equal(m.rdp(al), ref.rdp(al))
    s = np.array([0.5 + 0j, 1.0 + 3.0j])
    for d in ("remove", "add"):
        assert np.array_equal(m.log_mgf(s, d), ref.log_mgf(s, d))
    a1, a2 = PrivacyAccountant(), PrivacyAccountant()
    a1.step(sigma=1.7, batch_size=32, dataset_size=1000, sampling="fixed_size", sensitivity=0.5, steps=200)
    a2.compose(ref, 200)
    c1, c2 = a1.certificate(delta=1e-6), a2.certificate(delta=1e-6)
    assert c1.epsilon == c2.epsilon and c1.lower_bound == c2.lower_bound


def test_replace_one_rdp_bound_and_monotonicity():
    """The cheap large-order bound is >= the exact quadrature value where both exist; the curve is
    non-decreasing and below the Gaussian cap alpha mu^2 / 2."""
    m = FixedSizeGaussianReplaceOne(sigma=2.0, batch_size=64, dataset_size=6000)
    al = np.array([1.2, 1.5, 2.0, 4.0, 8.0, 16.0, 31.0])
    exact = m._rdp_exact(al)
    bound = m._rdp_bound(al)
    assert np.all(bound >= exact - 1e-12)
    grid = np.concatenate([np.linspace(1.05, 40, 80), [64.0, 200.0, 1000.0]])
    r = m.rdp(grid)
    assert np.all(np.diff(r) >= -1e-12)
    assert np.all(r <= grid * m.mu**2 / 2 + 1e-12)


def test_bad_parameters():
    with pytest.raises(ValueError, match="batch_size must be <= dataset_size"):
        FixedSizeGaussian(1.0, 11, 10)
    with pytest.raises(TypeError, match="batch_size must be an integer"):
        FixedSizeGaussian(1.0, 2.5, 10)
    with pytest.raises(ValueError, match="sigma"):
        FixedSizeGaussianReplaceOne(0.0, 1, 10)
    acct = PrivacyAccountant(relation="replace_one")
    with pytest.raises(ValueError, match="not defined under"):
        acct.compose(FixedSizeGaussian(1.0, 1, 10))
    assert math.isfinite(FixedSizeGaussianReplaceOne(1.0, 10, 10).rdp(np.array([2.0]))[0])
