"""One Poisson-subsampled Gaussian step: the exact profile (``conversions.poisson_gaussian_dp``) and
its route, against mpmath integration of the two mixture densities (an independent computation: the
crossing point of the likelihood ratio is found by bisection on the densities themselves and the
hockey-stick integrand is integrated on both sides of it)."""

from __future__ import annotations

import math

import mpmath as mp
import pytest

from accountant import PrivacyAccountant
from conversions import poisson_gaussian_dp as P


def _hockey_stick(eps: float, mu: float, q: float, direction: str) -> mp.mpf:
    """delta(eps) = int (p - e^eps q)_+ for the pair of one step, by mpmath quadrature (40 digits)."""
    with mp.workdps(40):
        eps, mu, q = mp.mpf(eps), mp.mpf(mu), mp.mpf(q)

        def pair(x):
            p0, mix = mp.npdf(x), (1 - q) * mp.npdf(x) + q * mp.npdf(x, mu, 1)
            return (mix, p0) if direction == "remove" else (p0, mix)

        def f(x):
            a, b = pair(x)
            return max(a - mp.exp(eps) * b, 0)

        def g(x):
            a, b = pair(x)
            return mp.log(a / b) - eps

        lo, hi = mp.mpf(-60), mp.mpf(60)
        glo = g(lo)
        if (glo > 0) == (g(hi) > 0):  # no crossing in range: integrand of one sign
            return mp.quad(f, [-mp.inf, -10, 0, 10, mp.inf])
        for _ in range(200):
            m = (lo + hi) / 2
            lo, hi = (m, hi) if (g(m) > 0) == (glo > 0) else (lo, m)
        k = (lo + hi) / 2
        return mp.quad(f, [-mp.inf, k - 10, k - 1, k, k + 1, k + 10, mp.inf])


CASES = [(0.1, 1.1, 0.01), (0.5, 1.0, 0.1), (0.005, 2.0, 1e-3), (1.0, 0.5, 0.05), (0.0, 1.0, 0.3),
         (2.0, 0.7, 0.5), (0.001, 0.8, 0.01), (3e-5, 2.0, 1e-4), (4.0, 0.3, 0.2)]


@pytest.mark.parametrize("eps,sigma,q", CASES)
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_delta_bracket_contains_mpmath(eps, sigma, q, direction):
    lo, up = P.delta_bounds(eps, 1.0 / sigma, q, direction)
    ref = _hockey_stick(eps, 1.0 / sigma, q, direction)
    assert lo <= ref <= up
    if ref > 1e-300:
        assert up - lo <= 1e-11 * float(ref)


@pytest.mark.parametrize("delta,sigma,q", [(1e-5, 1.1, 0.01), (1e-10, 2.0, 1e-3), (1e-5, 2.0, 1e-4),
                                           (1e-5, 0.5, 0.1), (1e-3, 1.0, 0.3)])
def test_epsilon_bracket_brackets_the_root(delta, sigma, q):
    """eps(delta): at the upper end the true delta is <= delta, just below the lower end it is > delta
    (both checked with the mpmath integral), and the bracket is ~1e-12 relative."""
    mu = 1.0 / sigma
    ups = {d: P.epsilon_bounds(delta, mu, q, d) for d in ("remove", "add")}
    for d, (lo, up) in ups.items():
        assert 0.0 <= lo <= up
        assert _hockey_stick(up, mu, q, d) <= delta
        if lo > 0.0:
            assert _hockey_stick(lo * (1 - 1e-9), mu, q, d) > delta
            assert up - lo <= 1e-11 * up


def test_issue_value_one_dpsgd_step():
    """The issue's one-step example (q = 0.01, sigma = 1.1, delta = 1e-5, truth 0.1423): the accountant
    answers exactly, not with a wide numerical bracket."""
    c = PrivacyAccountant().step(sigma=1.1, sample_rate=0.01).certificate(delta=1e-5)
    assert c.method == "exact"
    assert c.lower_bound <= c.epsilon <= c.lower_bound * (1 + 1e-10)
    assert round(c.epsilon, 4) == 0.1423
    # delta at that epsilon, both ends checked by quadrature
    d = PrivacyAccountant().step(sigma=1.1, sample_rate=0.01).certificate(epsilon=c.epsilon)
    ref = max(_hockey_stick(c.epsilon, 1 / 1.1, 0.01, x) for x in ("remove", "add"))
    assert d.lower_bound <= ref <= d.delta


def test_limits_and_monotone_chain():
    """q = 1 is the Gaussian (mu-GDP closed form); eps grows from 1 step (exact) to 2 steps (cf) to 10."""
    from conversions import gaussian_dp

    lo, up = P.epsilon_bounds(1e-5, 0.8, 1.0, "remove")
    g, err = gaussian_dp.gaussian_epsilon(1e-5, 0.8)
    assert lo - 1e-12 <= g and g - err <= up + 1e-12
    prev = 0.0
    for t in (1, 2, 10):
        e = PrivacyAccountant().step(sigma=1.1, sample_rate=0.01, steps=t).epsilon(1e-5)
        assert e > prev
        prev = e


def test_add_direction_vanishes_beyond_log_one_minus_q():
    q = 0.01
    e0 = -math.log1p(-q)
    assert P.delta_bounds(e0 * 1.001, 1.0, q, "add") == (0.0, 0.0)
    assert P.delta_bounds(e0 * 0.5, 1.0, q, "add")[0] > 0.0


@pytest.mark.parametrize("eps", [709.0, 710.0, 1e6, 1e300])
def test_huge_epsilon_answers(eps):
    """No overflow at huge epsilon: the add pair's delta is 0, the remove pair's a tiny upper bound."""
    for d in ("remove", "add"):
        lo, up = P.delta_bounds(eps, 1.0, 0.01, d)
        assert 0.0 <= lo <= up <= 1e-300
    c = PrivacyAccountant().step(sigma=1.1, sample_rate=0.01).certificate(epsilon=eps)
    assert c.method == "exact" and 0.0 <= c.delta <= 1e-300


@pytest.mark.parametrize("bad", [dict(mu=0.0), dict(mu=math.nan), dict(q=0.0), dict(q=1.5),
                                 dict(direction="both")])
def test_bad_input(bad):
    kw = dict(mu=1.0, q=0.1, direction="remove") | bad
    with pytest.raises(ValueError):
        P.delta_bounds(0.5, kw["mu"], kw["q"], kw["direction"])
    with pytest.raises(ValueError):
        P.epsilon_bounds(1e-5, kw["mu"], kw["q"], kw["direction"])
