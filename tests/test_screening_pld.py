"""Noisy screening on the characteristic-function / PLD routes and the single-use exact route, against
independent mpmath references: brute force over every adjacent Bernoulli pair and every output set, the
envelope pair rebuilt in mpmath from its exact vertices and composed by enumeration, and lower bounds from
one fixed neighbouring pair composed exactly (binomial sums, closed-form Gaussian hockey stick)."""

from __future__ import annotations

import itertools
import math

import mpmath as mp
import pytest

from accountant.privacy_accountant import PrivacyAccountant
from mechanisms import GNMax, NoisyScreening
from mechanisms.conformance import check_mechanism

mp.mp.dps = 40


def _pi(t, sigma, threshold):
    return mp.ncdf((mp.mpf(t) - threshold) / sigma)


def _family_delta(sigma, threshold, k, t_min, eps):
    """max over adjacent pairs (t, t + 1), both orders, and all output sets S of P(S) - e^eps Q(S)."""
    e = mp.e ** mp.mpf(eps)
    best = mp.mpf(0)
    for t in range(t_min, k):
        a, b = _pi(t, sigma, threshold), _pi(t + 1, sigma, threshold)
        for p, q in ((b, a), (a, b)):  # P(pass), Q(pass)
            for s_p, s_q in ((p, q), (1 - p, 1 - q), (mp.mpf(1), mp.mpf(1))):
                best = max(best, s_p - e * s_q)
    return best


def _envelope_pair(sigma, threshold, k, t_min):
    """Atoms (P-mass, Q-mass) of the envelope pair, from the exact vertices (mpmath), after checking that
    the points are in concave position (each is a vertex of the upper hull)."""
    pts = []
    for t in range(t_min, k):
        za, zb = (mp.mpf(t) - threshold) / sigma, (mp.mpf(t) + 1 - threshold) / sigma
        pts += [(mp.ncdf(za), mp.ncdf(zb)), (mp.ncdf(-zb), mp.ncdf(-za))]  # (Q(S), P(S)), both orders
    pts = sorted(set(pts)) + [(mp.mpf(1), mp.mpf(1))]
    pts = [(mp.mpf(0), mp.mpf(0))] + pts
    atoms = [(w1 - w0, u1 - u0) for (u0, w0), (u1, w1) in zip(pts[:-1], pts[1:], strict=True)]
    slopes = [p / q for p, q in atoms if q > 0]
    assert all(x >= y for x, y in zip(slopes, slopes[1:], strict=False))
    return atoms


def _composed_delta(atoms, n, eps):
    e = mp.e ** mp.mpf(eps)
    total = mp.mpf(0)
    for combo in itertools.combinations_with_replacement(range(len(atoms)), n):
        mult = mp.factorial(n)
        for j in set(combo):
            mult /= mp.factorial(combo.count(j))
        p = mp.fprod(atoms[j][0] for j in combo)
        q = mp.fprod(atoms[j][1] for j in combo)
        total += mult * max(mp.mpf(0), p - e * q)
    return total


def _fixed_pair_lower(sigma, threshold, k, t_min, n, eps, gauss_mu=0.0):
    """delta(eps) of n uses of one fixed adjacent pair (worst t and order), optionally composed with a
    Gaussian pair N(mu, 1) vs N(0, 1): a lower bound on the mechanism's true composed delta."""
    e = mp.mpf(eps)
    mu = mp.mpf(gauss_mu)

    def h_gauss(x):
        if mu == 0:
            return max(mp.mpf(0), 1 - mp.e ** x)
        return mp.ncdf(-x / mu + mu / 2) - mp.e ** x * mp.ncdf(-x / mu - mu / 2)

    best = mp.mpf(0)
    for t in range(t_min, k):
        a, b = _pi(t, sigma, threshold), _pi(t + 1, sigma, threshold)
        for p, q in ((b, a), (a, b)):
            tot = mp.mpf(0)
            for j in range(n + 1):
                pj = mp.binomial(n, j) * p ** j * (1 - p) ** (n - j)
                qj = mp.binomial(n, j) * q ** j * (1 - q) ** (n - j)
                if pj > 0:
                    tot += pj * h_gauss(e - mp.log(pj / qj))
            best = max(best, tot)
    return best


def _eps_of(delta_fn, delta, hi=20.0, iters=60):
    lo, hi = mp.mpf(0), mp.mpf(hi)
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_fn(mid) > delta else (lo, mid)
    return lo, hi


PARAMS = [(2.0, 5.0, 10, 0), (40.0, 200.0, 300, 0), (0.5, 5.0, 40, 0), (5.0, 2.5, 5, 0), (3.0, 7.0, 12, 4)]
EXTREME = [(0.3, -50.0, 30, 0), (0.01, 3.0, 10, 0), (0.2, 100.0, 130, 0), (0.5, 5.0, 300, 0)]


@pytest.mark.parametrize("params", PARAMS + EXTREME)
def test_single_use_exact_delta_matches_brute_force(params):
    m = NoisyScreening(*params)
    for eps in (0.0, 0.05, 0.5, 2.0):
        ref = _family_delta(*params, eps)
        for direction in ("remove", "add"):
            lo, hi = m.exact_delta(eps, direction)
            assert lo <= ref <= hi, (eps, direction, lo, float(ref), hi)
            assert hi - lo <= 1e-9 * hi + 1e-14  # absolute: log_ndtr near 0 (probabilities near 1)


@pytest.mark.parametrize("params", PARAMS + EXTREME)
def test_envelope_atoms_dominate_every_pair(params):
    m = NoisyScreening(*params)
    losses, masses = m.pld_atoms("remove")
    assert float(math.fsum(masses)) <= 1.0 + 1e-12
    for eps in (0.0, 0.01, 0.1, 0.7, 3.0):
        env = mp.fsum(mp.mpf(w) * max(mp.mpf(0), 1 - mp.e ** (mp.mpf(eps) - mp.mpf(l)))
                      for l, w in zip(losses.tolist(), masses.tolist(), strict=True))
        ref = _family_delta(*params, eps)
        # dominance up to the masses' declared relative error; equality up to e^-650 of merged mass
        assert env * mp.e ** mp.mpf(m.log_mgf_error) >= ref
        assert env <= ref + mp.mpf(1e-9) * ref + mp.mpf(1e-13)  # 1e-13: losses rounded up (near 0)


@pytest.mark.parametrize("params,n", [((2.0, 5.0, 10, 0), 3), ((5.0, 2.5, 5, 0), 4)])
def test_composed_screening_cf_and_pld_vs_mpmath_envelope(params, n):
    atoms = _envelope_pair(*params)
    acct = PrivacyAccountant().compose(NoisyScreening(*params), n)
    ref1 = _composed_delta(atoms, n, 0.5)
    assert ref1 > 1e-3
    for method in ("cf", "pld"):
        c = acct.certificate(epsilon=0.5, method=method)
        assert c.delta >= ref1, (method, c.delta, float(ref1))
        rtol = 1e-6 if method == "cf" else 1e-3  # the discretised PLD route: grid-width accuracy
        assert c.delta <= ref1 * (1 + rtol), (method, c.delta, float(ref1))
    delta = 1e-3
    lo, hi = _eps_of(lambda e: _composed_delta(atoms, n, e), delta, iters=40)
    c = acct.certificate(delta=delta, method="cf")
    assert c.epsilon >= lo and abs(c.epsilon - hi) <= 1e-6 * hi
    # never below a lower bound from one fixed neighbouring pair composed n times
    auto = acct.certificate(epsilon=0.5)
    assert auto.delta >= _fixed_pair_lower(*params, n, 0.5)


def test_screening_with_gnmax_improves_on_rdp_and_stays_above_a_lower_bound():
    scr, g = NoisyScreening(sigma=2.0, threshold=5.0, k=10), GNMax(sigma=4.0)
    acct = PrivacyAccountant().compose(scr, 3).compose(g, 3)
    c = acct.certificate(epsilon=1.0)
    rdp = acct.certificate(epsilon=1.0, method="rdp")
    assert c.method in ("cf", "pld") and c.delta < rdp.delta
    mu = math.sqrt(3.0) * g.sensitivity / g.sigma
    assert c.delta >= _fixed_pair_lower(2.0, 5.0, 10, 0, 3, 1.0, gauss_mu=mu)


def test_single_use_certificate_is_exact_and_brackets_the_reference():
    params = (2.0, 5.0, 10, 0)
    acct = PrivacyAccountant().compose(NoisyScreening(*params))
    c = acct.certificate(epsilon=0.5)
    ref = _family_delta(*params, 0.5)
    assert c.method == "exact" and c.bound == "exact"
    assert c.lower_bound <= ref <= c.delta
    lo, hi = _eps_of(lambda e: _family_delta(*params, e), 1e-4)
    ce = acct.certificate(delta=1e-4)
    assert ce.lower_bound <= hi and ce.epsilon >= lo and abs(ce.epsilon - hi) <= 1e-9 * hi


def test_screening_conforms_and_round_trips():
    m = NoisyScreening(sigma=3.0, threshold=7.0, k=12, t_min=4)
    check_mechanism(m)
    acct = PrivacyAccountant().compose(m, 2)
    again = PrivacyAccountant.from_state(acct.to_state())
    assert again.certificate(epsilon=1.0).delta == acct.certificate(epsilon=1.0).delta


def test_conformance_checks_the_exact_profile():
    from dataclasses import dataclass

    m = NoisyScreening(sigma=3.0, threshold=7.0, k=12, t_min=4)
    assert "exact profile" in check_mechanism(m).checks

    @dataclass(frozen=True)
    class Increasing(NoisyScreening):  # a broken plug-in: its profile increases in eps
        def exact_delta(self, epsilon, direction="remove"):
            v = min(1.0, 0.1 + 0.1 * epsilon)
            return v, v

    rep = check_mechanism(Increasing(sigma=3.0, threshold=7.0, k=12), strict=False)
    assert any("exact_delta increases" in p for p in rep.problems)


def test_far_ranges_keep_the_rdp_route_only():
    # the statistic's range reaches 25000 sigma beyond the threshold: the envelope's merged far tail would
    # carry a loss of order 3e8, which the numerical routes cannot resolve; RDP as before, and one use
    # still gets the exact profile
    m = NoisyScreening(sigma=40.0, threshold=100.0, k=10 ** 6)
    assert not m.pld_available and NoisyScreening(40.0, 200.0, 300).pld_available
    acct = PrivacyAccountant().compose(m, 5)
    assert acct.certificate(delta=1e-6).method == "rdp"
    assert PrivacyAccountant().compose(m).certificate(delta=1e-6).method == "exact"
