"""The binned-maximum lower-bound pair: bin masses against mpmath, and the lower bound against the
exact hockey-stick divergence of the continuous maximum (mpmath quadrature of its densities)."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from reference_sampling import Mixture, eps_from_delta_fn

from accountant.attained import lower_bound
from mechanisms.max_statistic import MASS_REL_ERR, MaxStatisticPair
from mechanisms.random_allocation import BallsInBinsGaussian
from mechanisms.shuffling import ShuffledGaussian


def _mp_cdf(x, m, t):
    return mp.ncdf(x - m) * mp.ncdf(x) ** (t - 1)


@pytest.mark.parametrize("mp_,mq,t", [(2.0, 1.0, 10), (1.0, 0.0, 1000), (3.0, 0.0, 3)])
def test_bin_masses_against_mpmath(mp_, mq, t):
    mp.mp.dps = 40
    pair = MaxStatisticPair(mp_, mq, t)
    (lp, rp), (lq, rq) = pair._bins
    assert abs(math.fsum(np.exp(lp)) - 1.0) < 1e-12 and abs(math.fsum(np.exp(lq)) - 1.0) < 1e-12
    from mechanisms.max_statistic import BIN_WIDTH, _inverse_low

    lo = -8.0 if t == 1 else _inverse_low(t)
    hi = max(mp_, mq, math.sqrt(2.0 * math.log(max(t, 2)))) + 12.0
    edges = np.arange(lo, hi + BIN_WIDTH, BIN_WIDTH)
    rng = np.random.default_rng(1)
    for j in rng.choice(len(edges) - 1, 25, replace=False):
        want = _mp_cdf(mp.mpf(edges[j + 1]), mp_, t) - _mp_cdf(mp.mpf(edges[j]), mp_, t)
        got = math.exp(lp[j + 1])
        if want > 1e-300:
            assert abs(got - float(want)) <= rp[j + 1] * float(want)
    mp.mp.dps = 150  # 1 - F(x_K) can be ~1e-55
    top = 1 - _mp_cdf(mp.mpf(edges[-1]), mq, t)
    assert abs(math.exp(lq[-1]) - float(top)) <= rq[-1] * float(top) + 1e-300
    assert np.all(rp >= MASS_REL_ERR)


def _max_pair_delta(mp_, mq, t, eps):
    """Exact hockey-stick divergence of the continuous maximum, (law under MoG(mp_)) vs (MoG(mq)):
    int (f_p - e^eps f_q)_+ by mpmath quadrature of the densities (sign changes located by bisection)."""
    mp.mp.dps = 25

    def dens(x, m):
        return (mp.npdf(x - m) * mp.ncdf(x) ** (t - 1)
                + (t - 1) * mp.ncdf(x - m) * mp.npdf(x) * mp.ncdf(x) ** (t - 2))

    a = mp.e ** mp.mpf(eps)
    g = lambda x: dens(x, mp_) - a * dens(x, mq)  # noqa: E731
    xs = [mp.mpf(-10) + i * mp.mpf("0.05") for i in range(600)]
    brackets = [(xs[i], xs[i + 1]) for i in range(len(xs) - 1) if (g(xs[i]) > 0) != (g(xs[i + 1]) > 0)]
    roots = [mp.findroot(g, br, solver="bisect") for br in brackets]
    pts = [mp.mpf(-10)] + roots + [mp.mpf(25)]
    return sum(mp.quad(g, [u, v]) for u, v in zip(pts[:-1], pts[1:], strict=True) if g((u + v) / 2) > 0)


@pytest.mark.parametrize("kind", ["shuffle", "bnb"])
def test_lower_bound_below_the_statistic_profile(kind):
    """One epoch: the certified lower bound (binned statistic, PLD lower coupling) is at most the exact
    profile of the continuous maximum, which is at most the mechanism's (data processing)."""
    sigma, t = 0.8, 6
    mech = ShuffledGaussian(sigma, t) if kind == "shuffle" else BallsInBinsGaussian(sigma, t)
    pair = mech.attained_lower_pair()
    for eps in (0.3, 1.2):
        exact = float(_max_pair_delta(pair.mu_p, pair.mu_q, t, eps))
        got = lower_bound([(mech, 1)], "delta", eps)
        assert got <= exact
        assert got >= 0.9 * exact  # binning loses little


@pytest.mark.slow
def test_two_epochs_lower_bound_vs_exact_product():
    """Two epochs: lower bound <= delta of the product of the two continuous-maximum pairs (mpmath 2-D
    by Fubini over the first coordinate's loss)."""
    sigma, t, eps = 1.0, 4, 1.0
    mech = ShuffledGaussian(sigma, t)
    pair = mech.attained_lower_pair()
    mp.mp.dps = 15

    def dens(x, m):
        return (mp.npdf(x - m) * mp.ncdf(x) ** (t - 1)
                + (t - 1) * mp.ncdf(x - m) * mp.npdf(x) * mp.ncdf(x) ** (t - 2))

    def d1(e):  # one-epoch delta of the statistic at eps = e (any real e)
        a = mp.e ** e
        g = lambda x: dens(x, pair.mu_p) - a * dens(x, pair.mu_q)  # noqa: E731
        xs = [mp.mpf(-8) + i * mp.mpf("0.1") for i in range(300)]
        br = [(xs[i], xs[i + 1]) for i in range(len(xs) - 1) if (g(xs[i]) > 0) != (g(xs[i + 1]) > 0)]
        pts = [mp.mpf(-8)] + [mp.findroot(g, b_, solver="bisect") for b_ in br] + [mp.mpf(22)]
        return sum(mp.quad(g, [u, v]) for u, v in zip(pts[:-1], pts[1:], strict=True) if g((u + v) / 2) > 0)

    loss = lambda x: mp.log(dens(x, pair.mu_p) / dens(x, pair.mu_q))  # noqa: E731
    # delta_2(eps) = int f_p(x) delta_1(eps - L(x)) dx
    exact = mp.quad(lambda x: dens(x, pair.mu_p) * d1(mp.mpf(eps) - loss(x)), [-6, -1, 1, 3, 6, 12])
    got = lower_bound([(mech, 2)], "delta", eps)
    assert got <= float(exact)


def test_lower_bound_epsilon_query_consistent():
    """epsilon lower bound: delta_lower(eps_lower) >= delta (it is a point no valid epsilon goes below)."""
    mech = ShuffledGaussian(1.0, 10)
    e_lo = lower_bound([(mech, 3)], "epsilon", 1e-5)
    assert e_lo > 0
    d = lower_bound([(mech, 3)], "delta", e_lo * (1 - 1e-3))
    assert d >= 1e-5 * 0.999
    _ = Mixture, eps_from_delta_fn  # references used elsewhere
