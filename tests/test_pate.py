"""GNSS, data-dependent GNMax RDP, its smooth sensitivity and PATE with generalized PTR (Papernot et al. 2018;
Redberg, Zhu & Wang 2023; docs/derivations/generalized-ptr.md section 6).

Oracles: exact GNMax output probabilities and Renyi divergences by mpmath quadrature; Gaussian Renyi
divergences by mpmath quadrature; brute-force local sensitivity over the whole vote simplex (C = 3);
Monte-Carlo coverage of the private upper bound; the spec's reference values.
"""

import math

import mpmath as mp
import numpy as np
import pytest
from scipy import integrate
from scipy.special import erfc, ndtr

from accountant import PrivacyAccountant
from accountant.adaptive.pate_ptr import (
    PATEPTRParameters,
    check_conditions,
    gnmax_data_independent_epsilon,
    local_sensitivity_profile,
    log_q0,
    log_q_tilde,
    pate_ptr,
    rdp_gnmax_data_dependent,
    rdp_gnmax_piecewise,
    smooth_sensitivity,
    validate_votes,
)
from accountant.adaptive.ptr import BOTTOM
from mechanisms import from_dict
from mechanisms.gnss import GNSS, GNSSUpperBound, gnss_rdp_exact, gnss_rdp_thm23

MC = 200_000


def _mc_upper(p, n):
    return p + 4.0 * math.sqrt(p * (1 - p) / n) + 10.0 / n


# ---------------------------------------------------------------------------- synthetic votes
def synthetic_votes(consensus: str, *, num_queries=100, num_teachers=400, num_classes=10, seed=0):
    """High consensus: top count in [300, 390); low consensus: top count in [100, 150) (seeded numpy)."""
    rng = np.random.default_rng(seed)
    lo, hi = (300, 390) if consensus == "high" else (100, 150)
    votes = np.zeros((num_queries, num_classes), dtype=np.int64)
    for i in range(num_queries):
        top = int(rng.integers(lo, hi))
        rest = rng.multinomial(num_teachers - top, np.ones(num_classes - 1) / (num_classes - 1))
        rest = np.minimum(rest, top - 1)
        rest[0] += num_teachers - top - rest.sum()  # keep the row sum (top stays the unique max)
        votes[i, 0] = top
        votes[i, 1:] = rest
        votes[i] = rng.permutation(votes[i])
    assert np.all(votes.sum(axis=1) == num_teachers)
    return votes


# ---------------------------------------------------------------------------- GNSS
def _gauss_rd_mp(lam, m1, s1, m2, s2):
    """D_lam(N(m1, s1^2) || N(m2, s2^2)) by mpmath quadrature of p^lam q^{1-lam}."""
    mp.mp.dps = 30
    lam, m1, s1, m2, s2 = (mp.mpf(x) for x in (lam, m1, s1, m2, s2))

    def f(x):
        return mp.exp(lam * mp.log(mp.npdf(x, m1, s1)) + (1 - lam) * mp.log(mp.npdf(x, m2, s2)))

    c = (lam * m1 / s1**2 - (lam - 1) * m2 / s2**2) / (lam / s1**2 - (lam - 1) / s2**2)
    w = 40 * max(s1, s2)
    val = mp.quad(f, [c - w, c - w / 4, c, c + w / 4, c + w])
    return float(mp.log(val) / (lam - 1))


def _gauss_rd(lam, dm2, v1, v2):
    vl = lam * v2 + (1 - lam) * v1
    with np.errstate(invalid="ignore", divide="ignore"):
        val = 0.5 * np.log(v2 / v1) + np.log(v2 / vl) / (2 * (lam - 1)) + lam * dm2 / (2 * vl)
    return np.where(vl > 0, val, np.inf)


def _gnss_sup_dense(lam, beta, sigma, n=200_001):
    c = np.linspace(-beta, beta, n)
    m = np.minimum(1.0, np.exp(c)) / sigma
    u = np.exp(2 * c)
    return float(max(_gauss_rd(lam, m * m, 1.0, u).max(), _gauss_rd(lam, m * m, u, 1.0).max()))


def test_gauss_closed_form_oracle_matches_quadrature():
    cases = ((3.0, 0.0, 1.0, 0.2, 1.05), (10.0, 0.1, 1.0, 0.0, 0.97), (1.5, 0.0, 2.0, 0.5, 2.1))
    for lam, m1, s1, m2, s2 in cases:
        ref = _gauss_rd_mp(lam, m1, s1, m2, s2)
        got = float(_gauss_rd(lam, (m1 - m2) ** 2, s1**2, s2**2))
        assert got == pytest.approx(ref, rel=1e-9)


@pytest.mark.parametrize("lam, beta, sigma", [(13.206, 0.2 / 13.206, 15.0), (42.964, 0.2 / 42.964, 15.0),
                                              (45.0, 0.01, 15.0), (9.0, 0.05, 1.0), (2.0, 0.1, 3.0),
                                              (1.3, 0.3, 2.0)])
def test_gnss_exact_is_the_supremum(lam, beta, sigma):
    # the float oracle's own rounding (naive closed form, ~1e-14 relative) is allowed for here; the
    # last-digit comparison with mpmath is tests/test_gnss_certified.py
    got = float(gnss_rdp_exact([lam], beta, sigma)[0])
    dense = _gnss_sup_dense(lam, beta, sigma)
    assert got >= dense * (1 - 1e-12)
    assert got <= dense * (1 + 1e-7)


def test_gnss_reference_values_and_thm23_violation():
    # reference values (mpmath): sigma = 15, beta = 0.2/alpha: exact / Thm 23 / shortcut
    for a, ex, t23, sc in ((13.206, 0.05111, 0.09781, 0.06314), (22.0, 0.08203, 0.12126, 0.10222),
                           (42.964, 0.15845, 0.20359, 0.19540)):
        assert float(gnss_rdp_exact([a], 0.2 / a, 15.0)[0]) == pytest.approx(ex, abs=1e-5)
        assert float(gnss_rdp_thm23([a], 0.2 / a, 15.0)[0]) == pytest.approx(t23, abs=1e-5)
        assert (a + 1) / 15.0**2 == pytest.approx(sc, abs=1e-5)
    # Thm 23 under-reports near alpha * beta -> 1/2; the mechanism reports the exact value
    for a, beta, sigma, ex, t23 in ((45.0, 0.01, 15.0, 0.9147, 0.2404), (9.0, 0.05, 1.0, 28.43, 10.15)):
        assert float(GNSS(sigma, beta).rdp([a])[0]) == pytest.approx(ex, rel=2e-4)
        assert float(gnss_rdp_thm23([a], beta, sigma)[0]) == pytest.approx(t23, rel=2e-3)
    # a point of the worst configuration, by quadrature: S(X') = e^{-beta}, shift e^{-beta}
    a, beta, sigma = 45.0, 0.01, 15.0
    q = _gauss_rd_mp(a, 0.0, sigma, math.exp(-beta), math.exp(-beta) * sigma)
    assert float(GNSS(sigma, beta).rdp([a])[0]) >= q


def test_gnss_properties_and_errors():
    m = GNSS(sigma=10.0, beta=0.01)
    a = np.array([1.5, 2, 5, 10, 30, 49.9, 50, 80])
    r = m.rdp(a)
    assert np.all(np.isinf(r[a * 0.01 >= 0.5])) and np.all(np.isfinite(r[a * 0.01 < 0.5]))
    fin = r[np.isfinite(r)]
    assert np.all(np.diff(fin) > 0)  # non-decreasing in the order
    assert np.all(GNSS(20.0, 0.01).rdp(a[:5]) <= m.rdp(a[:5]))  # more noise never costs more
    assert np.all(GNSS(10.0, 0.005).rdp(a[:5]) <= m.rdp(a[:5]))  # smoother never costs more
    assert from_dict(m.to_dict()) == m
    for bad in ({"sigma": 1.0, "beta": 0.0}, {"sigma": 1.0, "beta": -0.1}, {"sigma": 0.0, "beta": 0.1}):
        with pytest.raises(ValueError):
            GNSS(**bad)
    ub = GNSSUpperBound(beta=0.01, sigma_s=15.0, sigma_2=15.0, delta_2=1e-3)
    rng = np.random.default_rng(0)
    for ss in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="smooth_sensitivity"):
            ub.release(1.0, ss, rng)
    with pytest.raises(ValueError):
        GNSSUpperBound(beta=0.0, sigma_s=1.0, sigma_2=1.0, delta_2=0.1)
    with pytest.raises(ValueError):
        GNSSUpperBound(beta=0.1, sigma_s=1.0, sigma_2=1.0, delta_2=1.0)


def test_alg4_parameters_and_lemma55_on_manifold():
    # reference values of the Alg 4 parameters: (eps_hat, delta) -> (alpha, sigma_s, beta)
    table = (((0.5, 1e-5), (49.824, 17.4053, 0.00401)), ((1.0, 1e-5), (25.412, 8.8451, 0.00787)),
             ((2.0, 1e-5), (13.206, 4.5617, 0.01514)), ((1.0, 1e-6), (30.017, 9.5944, 0.00666)))
    for (eh, d), (al, ss, be) in table:
        p = PATEPTRParameters.from_budget(eh, d)
        assert p.alpha == pytest.approx(al, abs=1e-3) and p.sigma_s == pytest.approx(ss, abs=1e-4)
        assert p.beta == pytest.approx(be, abs=1e-5)
        # Redberg, Zhu & Wang 2023, Lemma 5.5
        assert math.log(2 / d) / (p.alpha - 1) == pytest.approx(eh / 2, rel=1e-12)
        assert (3 * p.alpha + 2) / (2 * p.sigma_s**2) == pytest.approx(eh / 2, rel=1e-12)
        # Lemma 5.5's value holds with the exact GNSS RDP on the manifold
        # (docs/derivations/generalized-ptr.md section 6)
        g = p.gnss
        assert float(g.rdp([p.alpha])[0]) <= float(g.lemma55_rdp([p.alpha])[0])
        # the certified test epsilon never exceeds the nominal eps_hat
        acct = PrivacyAccountant().compose(g)
        assert acct.epsilon(d / 2) <= eh


@pytest.mark.parametrize("delta_2, ref_fail", [(0.5, 1.96e-2), (0.1, 6.95e-4), (0.01, 5.5e-6)])
def test_gnss_coverage_by_simulation(delta_2, ref_fail):
    """P[U < f(X)] <= delta_2 (reference values: beta=0.01, sigma's=15, SS=0.37, the MC failure rates)."""
    ub = GNSSUpperBound(beta=0.01, sigma_s=15.0, sigma_2=15.0, delta_2=delta_2)
    rng = np.random.default_rng(12)
    n = 2_000_000 if delta_2 == 0.01 else MC
    rel = ub.release(3.0, 0.37, rng, size=n)
    fail = float(np.mean(rel.upper < 3.0))
    assert fail <= _mc_upper(delta_2, n)
    assert fail <= _mc_upper(ref_fail, n)
    assert fail >= ref_fail - 4 * math.sqrt(ref_fail / n) - 3.0 / n
    # e^mu covers SS with probability >= 1 - delta_2/2
    assert float(np.mean(np.exp(rel.mu) < 0.37)) <= _mc_upper(delta_2 / 2, n)


# ---------------------------------------------------------------------------- votes / q~ / Thm 6
@pytest.mark.parametrize("bad, err", [
    ([[3, -1, 2]], ValueError), ([[1.5, 2, 3]], ValueError), ([[np.nan, 1, 2]], ValueError),
    ([[True, False]], TypeError), ([[5]], ValueError), (np.zeros((2, 3, 2)), ValueError),
    ([["a", "b"]], TypeError),
])
def test_vote_validation(bad, err):
    with pytest.raises(err):
        validate_votes(bad)
    with pytest.raises(err):
        log_q_tilde(bad, 2.0)


def test_vote_validation_teachers():
    with pytest.raises(ValueError, match="num_teachers"):
        validate_votes([[3, 4]], num_teachers=5)
    v, k = validate_votes([[3.0, 4.0], [1, 2]])
    assert v.dtype == np.int64 and k == 7
    with pytest.raises(ValueError):
        pate_ptr([[3, -1]], sigma_1=2.0, test_epsilon=1.0, budget_epsilon=1.0, delta=1e-5,
                 rng=np.random.default_rng(0))


def test_log_q_tilde_union_bound():
    v = np.array([[30, 5, 0], [10, 10, 3], [7, 0, 0], [100, 99, 98, 0]], dtype=object)
    for row in v:
        row = np.array(row)
        s = 3.0
        top = row.max()
        i = int(np.argmax(row))
        ref = sum(0.5 * float(mp.erfc((top - row[j]) / (2 * s))) for j in range(len(row)) if j != i)
        ref = min(ref, 1 - 1 / len(row))
        assert float(log_q_tilde(row[None, :], s)[0]) == pytest.approx(math.log(ref), rel=1e-12)


def _gnmax_probs(n, sigma):
    """P[argmax_j (n_j + sigma Z_j) = j] = int phi(z) prod_{k != j} Phi((n_j - n_k)/sigma + z) dz.

    Adaptive quadrature (relative tolerance 1e-12) with a breakpoint at the integrand's bulk for every
    non-top class; the top class gets 1 - the others (its integral is 1 - O(tiny)).  Cross-checked
    against 60-digit mpmath in ``test_gnmax_oracle_precision``."""
    n = [float(x) for x in n]
    out = [0.0] * len(n)
    top = int(np.argmax(n))
    for j in range(len(n)):
        if j == top:
            continue

        def f(z, j=j):
            r = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
            for k in range(len(n)):
                if k != j:
                    r *= ndtr((n[j] - n[k]) / sigma + z)
            return r

        c = max((n[k] - n[j]) / sigma for k in range(len(n)) if k != j)
        pts = sorted({0.0, c / 2, c, c + 3})
        out[j], _ = integrate.quad(f, -40, 40 + c, points=pts, epsabs=0, epsrel=1e-12, limit=500)
    out[top] = 1.0 - sum(out)
    return out


def _gnmax_probs_mp(n, sigma, dps=60):
    mp.mp.dps = dps
    out = []
    for j in range(len(n)):
        def f(z, j=j):
            r = mp.npdf(z)
            for k in range(len(n)):
                if k != j:
                    r *= mp.ncdf((n[j] - n[k]) / mp.mpf(sigma) + z)
            return r
        c = max((n[k] - n[j]) / sigma for k in range(len(n)) if k != j)
        out.append(mp.quad(f, sorted({-40, -10, 0, c / 2, c, c + 5, 40 + c})))
    return out


def test_gnmax_oracle_precision():
    for n, s in (((36, 2, 2), 2.0),):
        a = _gnmax_probs(n, s)
        b = _gnmax_probs_mp(n, s, dps=40)
        for x, y in zip(a, b, strict=True):
            assert x == pytest.approx(float(y), rel=1e-9)


def _renyi_discrete(p, q, a):
    mp.mp.dps = 30
    terms = (mp.mpf(pi) ** a * mp.mpf(qi) ** (1 - a) for pi, qi in zip(p, q, strict=True) if pi > 0)
    return float(mp.log(mp.fsum(terms)) / (a - 1))


def _neighbours3(n):
    out = []
    for i in range(3):
        for j in range(3):
            if i != j and n[i] > 0:
                m = list(n)
                m[i] -= 1
                m[j] += 1
                out.append(tuple(m))
    return out


@pytest.mark.parametrize("sigma", [2.0, 4.0, 8.0])
def test_thm6_bound_vs_exact_divergence(sigma):
    alphas = [2.0, 5.0, 10.0, 20.0]
    for n in ((30, 5, 0), (25, 10, 5), (35, 3, 2), (20, 15, 5)):
        p = _gnmax_probs(n, sigma)
        qs = [_gnmax_probs(m, sigma) for m in _neighbours3(n)]
        lq = log_q_tilde(np.array([n]), sigma)
        for a in alphas:
            exact = max(_renyi_discrete(p, q, a) for q in qs)
            bound = float(rdp_gnmax_data_dependent(lq, sigma, a)[0])
            assert bound >= exact * (1 - 1e-9)
            assert bound <= a / sigma**2 * (1 + 1e-12)


def test_thm6_reference_values_r51():
    # reference values (sigma, n, alpha=10): exact / bound.  For (2, (35, 3, 2)) the reference is 0.8229;
    # our quadrature (double and 60-digit mpmath agree) gives 0.82620 (neighbour (36, 2, 2)): the tiny
    # outcome probabilities (~1e-33) need breakpoints at the integrand's bulk.  The bound holds either way.
    for s, n, ex, bd in ((4.0, (30, 5, 0), 0.3437, 0.4550), (8.0, (25, 10, 5), 0.1009, 0.1562),
                         (2.0, (35, 3, 2), 0.8262, 0.9741)):
        p = _gnmax_probs(n, s)
        exact = max(_renyi_discrete(p, _gnmax_probs(m, s), 10.0) for m in _neighbours3(n))
        assert exact == pytest.approx(ex, abs=1e-4)
        assert float(rdp_gnmax_data_dependent(log_q_tilde(np.array([n]), s), s, 10.0)[0]) == pytest.approx(
            bd, abs=1e-4)


def test_thm6_limits():
    s = 5.0
    assert float(rdp_gnmax_data_dependent([-np.inf], s, 3.0)[0]) == 0.0
    assert float(rdp_gnmax_data_dependent([math.log(0.5)], s, 3.0)[0]) == pytest.approx(3.0 / 25)
    lq = np.linspace(-400, -0.01, 500)
    r = rdp_gnmax_data_dependent(lq, s, 3.0)
    assert np.all(r <= 3.0 / 25 + 1e-15) and np.all(r >= 0)
    with pytest.raises(ValueError):
        rdp_gnmax_data_dependent([0.5], s, 3.0)
    lq0 = log_q0(s, 3.0)
    assert float(rdp_gnmax_piecewise([lq0 * (1 + 1e-9)], s, 3.0)[0]) == pytest.approx(3.0 / 25, rel=1e-6)


# ---------------------------------------------------------------------------- smooth sensitivity, brute force
def _oracle_rdp_fn(sigma, alpha):
    """Independent numpy implementation of Thm 6 (direct, not log-space) and its log q0 by bisection."""
    def dd(q):
        mu2 = sigma * np.sqrt(np.log(1 / q))
        mu1 = mu2 + 1
        e1, e2 = mu1 / sigma**2, mu2 / sigma**2
        A = (1 - q) / (1 - (q * np.exp(e2)) ** ((mu2 - 1) / mu2))
        B = np.exp(e1) / q ** (1 / (mu1 - 1))
        return np.log((1 - q) * A ** (alpha - 1) + q * B ** (alpha - 1)) / (alpha - 1)

    ind = alpha / sigma**2
    hi = min(-(1 + 1 / sigma) ** 2, -((alpha - 0.99) / sigma) ** 2, -1 / sigma**2)
    if dd(math.exp(hi)) < ind:
        lq0 = hi
    else:
        lo = 2 * hi
        while dd(math.exp(lo)) > ind:
            lo *= 1.5
        for _ in range(200):
            mid = (lo + hi) / 2
            if dd(math.exp(mid)) > ind:
                hi = mid
            else:
                lo = mid
        lq0 = lo

    def f(counts):
        c = np.asarray(counts, dtype=float)
        top = c.max(axis=1, keepdims=True)
        terms = 0.5 * erfc((top - c) / (2 * sigma))
        idx = np.argmax(c, axis=1)
        terms[np.arange(len(c)), idx] = 0.0
        q = np.minimum(terms.sum(axis=1), 1 - 1 / c.shape[1])
        with np.errstate(all="ignore"):
            v = dd(q)
        return np.where(np.log(q) < lq0, v, ind)

    return f


def _simplex(k):
    return np.array([(a, b, k - a - b) for a in range(k + 1) for b in range(k + 1 - a)])


@pytest.mark.parametrize("k, sigma, alpha", [(40, 4.0, 2.0), (60, 6.0, 5.0)])
def test_smooth_sensitivity_profile_vs_brute_force(k, sigma, alpha):
    assert check_conditions(sigma, 3, alpha, k) == (True, True)
    h = _simplex(k)
    f = _oracle_rdp_fn(sigma, alpha)
    vals = f(h)
    index = {tuple(x): i for i, x in enumerate(h)}
    ls = np.zeros(len(h))
    for i, x in enumerate(h):
        for m in _neighbours3(tuple(x)):
            ls[i] = max(ls[i], abs(vals[i] - vals[index[m]]))
    # implementation's released function equals the oracle
    np.testing.assert_allclose(rdp_gnmax_piecewise(log_q_tilde(h, sigma), sigma, alpha), vals, rtol=1e-8,
                               atol=1e-14)
    dist = np.abs(h[:, None, :] - h[None, :, :]).sum(axis=2) // 2
    rng = np.random.default_rng(1)
    starts = rng.choice(len(h), size=60, replace=False)
    for s in starts:
        prof = local_sensitivity_profile(h[s][None, :], sigma, alpha, k)[0]
        for d in range(0, 25):
            true = ls[dist[s] <= d].max()
            assert prof[d] >= true * (1 - 1e-9) - 1e-15, (h[s], d, prof[d], true)


def test_smooth_sensitivity_refused_when_c6_fails():
    """(K, sigma, alpha) = (30, 3, 8): C6 is false and the profile under-reports
    (docs/derivations/generalized-ptr.md section 6)."""
    k, sigma, alpha = 30, 3.0, 8.0
    c5, c6 = check_conditions(sigma, 3, alpha, k)
    assert c5 and not c6
    with pytest.raises(ValueError, match="C5/C6"):
        smooth_sensitivity(np.array([[26, 3, 1]]), sigma, alpha, 0.01)
    # and the refusal is needed: from (26, 3, 1) the profile is below the true max LS at d = 1
    h = _simplex(k)
    f = _oracle_rdp_fn(sigma, alpha)
    vals = f(h)
    index = {tuple(x): i for i, x in enumerate(h)}
    ls = np.array([max(abs(vals[i] - vals[index[m]]) for m in _neighbours3(tuple(x)))
                   for i, x in enumerate(h)])
    dist = np.abs(h - np.array([26, 3, 1])).sum(axis=1) // 2
    prof = local_sensitivity_profile(np.array([[26, 3, 1]]), sigma, alpha, k)[0]
    true1 = ls[dist <= 1].max()
    assert prof[1] < true1
    assert prof[1] == pytest.approx(0.149, abs=1e-3) and true1 == pytest.approx(0.159, abs=1e-3)


def test_smooth_sensitivity_is_smooth_on_neighbours():
    """SS_beta(X) <= e^beta SS_beta(X') for neighbouring vote sets (one teacher changes every vote)."""
    rng = np.random.default_rng(3)
    sigma, alpha, beta = 40.0, 25.412, 0.2 / 25.412
    for trial in range(6):
        x = synthetic_votes("high" if trial % 2 else "low", num_queries=8, num_teachers=400, seed=trial)
        xp = x.copy()
        for i in range(len(x)):  # one teacher moves its vote on every query
            frm = int(rng.choice(np.flatnonzero(xp[i] > 0)))
            to = int(rng.integers(x.shape[1]))
            xp[i, frm] -= 1
            xp[i, to] += 1
        s, sp = smooth_sensitivity(x, sigma, alpha, beta), smooth_sensitivity(xp, sigma, alpha, beta)
        assert s <= math.exp(beta) * sp * (1 + 1e-9) and sp <= math.exp(beta) * s * (1 + 1e-9)


# ---------------------------------------------------------------------------- PATE-PTR end to end
def test_pate_ptr_high_and_low_consensus():
    delta, eh, s1 = 1e-5, 1.0, 40.0
    res = {}
    for c in ("high", "low"):
        v = synthetic_votes(c, seed=5)
        res[c] = pate_ptr(v, sigma_1=s1, test_epsilon=eh, budget_epsilon=3.0, delta=delta,
                          rng=np.random.default_rng(8))
    # certificate: public parameters only, identical for both data sets, (eps' + eps_hat, delta)
    assert res["high"].mechanism == res["low"].mechanism
    m = res["high"].mechanism
    assert m.total_delta == pytest.approx(delta, rel=1e-12)
    assert m.test_epsilon <= eh and m.total_epsilon == pytest.approx(3.0 + m.test_epsilon)
    # high consensus passes with a small data-dependent epsilon; low consensus does not at this budget
    assert res["high"].passed and len(res["high"].labels) == 100
    assert res["high"].epsilon_sigma1 < 3.0
    assert not res["low"].passed and res["low"].labels is BOTTOM
    # the labels are mostly the plurality votes
    v = synthetic_votes("high", seed=5)
    assert np.mean(res["high"].labels == np.argmax(v, axis=1)) > 0.95
    acct = PrivacyAccountant().compose(m)
    assert acct.epsilon(delta * 1.0001) <= m.total_epsilon + 1e-9


def test_pate_data_independent_baseline_r61():
    # classic conversion of T Gaussian steps (Mironov 2017, Prop. 3): T/sigma^2 + 2 sqrt(T
    # log(1/delta))/sigma with T = 100, delta = 1e-5
    grid = [1.3**x for x in (10.0, 11.2, 14.8)]
    want = [5.4487, 3.8733, 1.4396]
    for s, w in zip(grid, want, strict=True):
        assert gnmax_data_independent_epsilon(100, s, 1e-5) == pytest.approx(w, abs=1e-4)


def test_pate_ptr_soundness_by_simulation():
    """The released U covers RDP_sigma1(alpha, X) w.p. >= 1 - delta_2, and an insufficient budget
    (eps' below the true data-dependent epsilon) passes with frequency <= delta_2."""
    v = synthetic_votes("low", num_queries=40, seed=2)
    s1 = 30.0
    for delta_2 in (0.2, 0.02):
        p = PATEPTRParameters.from_budget(1.0, 1e-5)
        p = PATEPTRParameters(alpha=p.alpha, sigma_s=p.sigma_s, sigma_2=p.sigma_2, beta=p.beta,
                              delta_2=delta_2)
        r = float(np.sum(rdp_gnmax_piecewise(log_q_tilde(v, s1), s1, p.alpha)))
        ss = smooth_sensitivity(v, s1, p.alpha, p.beta)
        rel = p.gnss.release(r, ss, np.random.default_rng(21), size=MC)
        assert float(np.mean(rel.upper < r)) <= _mc_upper(delta_2, MC)
        conv = math.log(1 / 5e-6) / (p.alpha - 1)
        budget = r + conv - 1e-9  # the proposal is insufficient: true eps_sigma1 > eps'
        assert float(np.mean(rel.upper + conv <= budget)) <= _mc_upper(delta_2, MC)


def test_pate_ptr_fallback_when_conditions_fail():
    v = np.array([[26, 3, 1], [20, 5, 5]])
    p = PATEPTRParameters(alpha=8.0, sigma_s=10.0, sigma_2=10.0, beta=0.01, delta_2=5e-6)
    r = pate_ptr(v, sigma_1=3.0, test_epsilon=1.0, budget_epsilon=50.0, delta=1e-5,
                 rng=np.random.default_rng(0), parameters=p)
    assert r.fallback and r.passed and r.release is None
    assert r.mechanism.total_epsilon == 50.0 and r.mechanism.total_delta == 1e-5


@pytest.mark.parametrize("kw", [{"beta": 0.0}, {"beta": -0.01}, {"sigma_s": 0.0}, {"delta_2": 1.0},
                                {"alpha": 1.0}, {"beta": 0.05}])
def test_pate_parameters_bad_inputs(kw):
    base = {"alpha": 10.0, "sigma_s": 5.0, "sigma_2": 5.0, "beta": 0.02, "delta_2": 1e-6}
    base.update(kw)
    with pytest.raises(ValueError):
        PATEPTRParameters(**base)
    with pytest.raises(ValueError, match="beta"):
        smooth_sensitivity(np.array([[30, 5, 0]]), 4.0, 2.0, 0.0)
