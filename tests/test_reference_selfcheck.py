"""Fast self-checks of the test oracles in ``tests/reference.py``.

Each oracle is checked against something it does not share code with: closed-form identities, limits,
brute-force enumeration, direct mpmath quadrature, or separately computed reference values.
The whole file is meant to run in well under 20 s.
"""

import functools
import itertools
import math
import os
import sys

import mpmath as mp
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as ref  # noqa: E402


def rel(a, b):
    a, b = mp.mpf(a), mp.mpf(b)
    return abs(a - b) / max(abs(b), mp.mpf(10) ** -300)


# ---------------------------------------------------------------------------------------------------
# Gaussian
# ---------------------------------------------------------------------------------------------------

def _gauss_delta_quad(eps, mu, dps=60):
    """int (p - e^eps q)_+ with P = N(mu,1), Q = N(0,1): L(x) = mu x - mu^2/2 > eps iff x > eps/mu + mu/2."""
    with mp.workdps(dps):
        e, m = mp.mpf(eps), mp.mpf(mu)
        xs = e / m + m / 2
        f = lambda x: mp.npdf(x, m, 1) * (-mp.expm1(e - m * x + m * m / 2))  # noqa: E731
        return mp.quad(f, [xs, xs + 1, xs + 10, mp.inf])


@pytest.mark.parametrize("eps,mu", [(0.5, 1.0), (-1.0, 0.5), (3.0, 0.2), (2.0, 4.0), (13.7, 1.0)])
def test_gaussian_closed_form_matches_quadrature(eps, mu):
    d = ref.gaussian_delta(eps, mu, as_mpf=True)
    assert rel(d, _gauss_delta_quad(eps, mu)) < 1e-24  # quadrature itself is ~1e-25


def test_gaussian_tiny_values_and_identities():
    d = ref.gaussian_delta(13.7, 1.0, as_mpf=True)
    assert 1e-41 < d < 1e-38  # a genuinely tiny delta, computed with full relative accuracy (see quad test)
    assert ref.gaussian_delta(50.0, 1.0, as_mpf=True) > 0  # ~1e-536, no underflow in mpf
    with mp.workdps(100):  # the identity below cancels ~ -log10(delta) digits, so evaluate it at 100 digits
        for mu in (0.3, 1.0, 3.0):
            for e in (-2.0, -0.4, 0.0, 0.7, 2.5):
                d = ref.gaussian_delta(e, mu, as_mpf=True)
                # symmetric pair: swap identity H(Q||P) = 1 - a + a H_{1/a}(P||Q) with H(Q||P) = H(P||Q)
                sw = 1 - mp.exp(e) + mp.exp(e) * ref.gaussian_delta(-e, mu, dps=100, as_mpf=True)
                assert rel(d, sw) < 1e-40
                assert d >= max(0, -mp.expm1(e))
    # limits: mu -> 0 gives (1 - e^eps)_+, mu -> inf gives 1
    assert ref.gaussian_delta(0.5, 0.0) == 0.0
    assert abs(ref.gaussian_delta(-0.5, 1e-12) - (1 - math.exp(-0.5))) < 1e-12
    assert abs(ref.gaussian_delta(2.0, 60.0) - 1.0) < 1e-15
    # monotone in eps and in mu
    assert ref.gaussian_delta(1.0, 1.0) > ref.gaussian_delta(1.1, 1.0)
    assert ref.gaussian_delta(1.0, 1.0) < ref.gaussian_delta(1.0, 1.1)


def test_gaussian_epsilon_inverse_and_spec_values():
    for mu, delta in [(1.0, 0.3), (0.2, 1e-4), (2.0, 1e-20), (0.05, 1e-6), (1.0, 0.9)]:
        e = ref.gaussian_epsilon(delta, mu, as_mpf=True)
        assert rel(ref.gaussian_delta(e, mu, as_mpf=True), delta) < 1e-15
    # the Gaussian mechanism (sigma = 1) is (0.276617, 0.3)-DP
    assert abs(ref.gaussian_epsilon(0.3, 1.0) - 0.276617) < 1e-6
    # reference value (delta = 1e-4): sigma = 50, k = 100 -> mu = 0.2
    assert abs(ref.gaussian_epsilon(1e-4, math.sqrt(100) / 50) - 0.601565) < 1e-6
    # reference values (delta = 1e-10): sigma = 30, k = 400 -> 4.2161859486; sigma = 60, k = 1120 ->
    # 3.4826741351
    assert abs(ref.gaussian_epsilon(1e-10, 20 / 30) - 4.2161859486) < 1e-9
    assert abs(ref.gaussian_epsilon(1e-10, math.sqrt(1120) / 60) - 3.4826741351) < 1e-9


# ---------------------------------------------------------------------------------------------------
# Laplace
# ---------------------------------------------------------------------------------------------------

def _laplace_single_direct(eps, b, sens=1.0):
    """int (p - e^eps q)_+ dx for P = Lap(0,b), Q = Lap(sens,b), by quadrature in x-space."""
    with mp.workdps(40):
        e, bb, D = mp.mpf(eps), mp.mpf(b), mp.mpf(sens)
        p = lambda x: mp.exp(-abs(x) / bb) / (2 * bb)  # noqa: E731
        q = lambda x: mp.exp(-abs(x - D) / bb) / (2 * bb)  # noqa: E731
        f = lambda x: max(p(x) - mp.exp(e) * q(x), 0)  # noqa: E731
        xs = (D - e * bb) / 2  # on (0, D): L(x) = (D - 2x)/b = eps
        pts = [-mp.inf, 0] + ([xs] if 0 < xs < D else []) + [D, mp.inf]
        return mp.quad(f, pts)


def test_laplace_single_formula_all_eps():
    # Laplace reference values (b = 1, k = 1)
    for e, v in [(0.0, 0.3934693403), (0.5, 0.2211992169), (0.9, 0.0487705755)]:
        assert abs(ref.laplace_delta(e, 1.0, 1) - v) < 1e-10
        assert abs(ref.laplace_delta_single(e, 1.0) - v) < 1e-10
    for b in (1.0, 2.0):
        a = 1 / b
        for e in (-2.5 * a, -a, -0.6 * a, -0.1, 0.0, 0.3 * a, a, 1.5 * a):
            d = ref.laplace_delta_single(e, b, as_mpf=True)
            assert rel(d, ref.laplace_delta(e, b, 1, as_mpf=True)) < 1e-35 or abs(d) < 1e-35
            assert abs(d - _laplace_single_direct(e, b)) < 1e-25
            if 0 <= e <= a:  # docs/derivations/laplace.md closed form
                assert rel(d, 1 - mp.exp((mp.mpf(e) - a) / 2)) < 1e-30
            if e > a:
                assert d == 0


@pytest.mark.parametrize("b,k", [(1.0, 1), (1.0, 4), (0.5, 7), (2.0, 25)])
def test_laplace_measure_is_normalised(b, k):
    m0, m1 = ref.laplace_composed_moments(b, k)
    assert abs(m0 - 1) < mp.mpf(10) ** -35  # P is a probability measure
    assert abs(m1 - 1) < mp.mpf(10) ** -35  # E_P[e^{-L}] = Q(total) = 1


def test_laplace_two_fold_matches_convolution_quadrature():
    b = 2.0
    with mp.workdps(40):
        a = mp.mpf(1) / b

        def d1(e):
            return ref.laplace_delta_single(e, b, as_mpf=True)

        def d2(e):  # E_{L1}[delta_1(eps - L1)] under the P-measure of one loss
            e = mp.mpf(e)
            atoms = d1(e - a) / 2 + mp.exp(-a) / 2 * d1(e + a)
            f = lambda l: d1(e - l) * mp.exp((l - a) / 2) / 4  # noqa: E731
            pts = sorted({-a, a} | {x for x in (e - a, e + a) if -a < x < a})
            return atoms + mp.quad(f, pts)

        for e in (-1.3, -0.3, 0.0, 0.2, 0.55, 0.9):
            assert abs(ref.laplace_delta(e, b, 2, as_mpf=True) - d2(e)) < mp.mpf(10) ** -30


def test_laplace_spec_values_and_structure():
    # Laplace reference values: k = 10, eps = 2 ~ 0.61284203 (contour limit); k = 50, eps = 2: 0.9945985686
    assert abs(ref.laplace_delta(2.0, 1.0, 10) - 0.61284203) < 1e-8
    assert abs(ref.laplace_delta(2.0, 1.0, 50) - 0.9945985686) < 1e-10
    with mp.workdps(40):
        for e in (-0.4, 0.3, 1.0, 2.2):  # symmetric pair: swap identity at k = 3
            d = ref.laplace_delta(e, 1.0, 3, as_mpf=True)
            sw = 1 - mp.exp(e) + mp.exp(e) * ref.laplace_delta(-e, 1.0, 3, as_mpf=True)
            assert abs(d - sw) < mp.mpf(10) ** -30
    # only Delta / b matters; k = 0 is the empty composition; k = 4 is 0 beyond eps = 4a
    assert abs(ref.laplace_delta(0.7, 3.0, 5, sensitivity=2.0) - ref.laplace_delta(0.7, 1.5, 5)) < 1e-15
    assert ref.laplace_delta(0.3, 1.0, 0) == 0.0
    assert abs(ref.laplace_delta(-0.3, 1.0, 0) - (1 - math.exp(-0.3))) < 1e-15
    assert ref.laplace_delta(4.0 + 1e-9, 1.0, 4) == 0.0
    # composition never decreases delta; delta non-increasing in eps
    ds = [ref.laplace_delta(1.0, 1.0, k) for k in (1, 2, 5, 12)]
    assert all(x < y for x, y in zip(ds, ds[1:], strict=False))
    es = [ref.laplace_delta(e, 1.0, 6) for e in (-1, 0, 0.5, 1.5, 3, 5.5)]
    assert all(x > y for x, y in zip(es, es[1:], strict=False))


# ---------------------------------------------------------------------------------------------------
# Kairouz-Oh-Viswanath / randomized response
# ---------------------------------------------------------------------------------------------------

def _hockey_product(P, Q, k, eps):
    """Brute force: H_{e^eps}(P^k || Q^k) over all len(P)^k outcomes."""
    ee = mp.exp(mp.mpf(eps))
    tot = mp.mpf(0)
    for o in itertools.product(range(len(P)), repeat=k):
        p = mp.fprod(P[i] for i in o)
        q = mp.fprod(Q[i] for i in o)
        tot += max(p - ee * q, 0)
    return tot


def test_kov_reduces_to_rr_and_brute_force():
    with mp.workdps(40):
        for k in (1, 3, 10):
            for e in (-2.0, -0.3, 0.0, 0.5, 1.7):
                a = ref.kov_delta(e, 0.8, 0.0, k, as_mpf=True)
                b = ref.rr_delta_enumerate(e, 0.8, k, as_mpf=True)
                assert abs(a - b) < mp.mpf(10) ** -35
        e0 = mp.mpf(0.8)
        p = mp.exp(e0) / (1 + mp.exp(e0))
        for e in (-1.0, 0.0, 0.9, 2.5):
            brute = _hockey_product([p, 1 - p], [1 - p, p], 6, e)
            assert abs(ref.rr_delta_enumerate(e, 0.8, 6, as_mpf=True) - brute) < mp.mpf(10) ** -35
        # (eps0, delta0) four-point pair, brute force over 4^3 outcomes
        d0 = mp.mpf(0.01)  # the same binary value the oracle receives
        s = 1 + mp.exp(e0)
        P = [d0, (1 - d0) * mp.exp(e0) / s, (1 - d0) / s, mp.mpf(0)]
        Q = [mp.mpf(0), (1 - d0) / s, (1 - d0) * mp.exp(e0) / s, d0]
        for e in (-3.0, -0.5, 0.0, 0.8, 2.0):
            assert abs(ref.kov_delta(e, 0.8, 0.01, 3, as_mpf=True) - _hockey_product(P, Q, 3, e)) < 1e-35


def test_kov_single_step():
    for e0, d0 in [(0.5, 0.0), (1.0, 1e-3), (2.0, 0.1)]:
        for e in (-0.9 * e0, -0.2, 0.0, 0.3 * e0, e0, 3.0):
            v = d0 + (1 - d0) * max(math.exp(e0) - math.exp(e), 0.0) / (1 + math.exp(e0))
            assert abs(ref.kov_delta(e, e0, d0, 1) - v) < 1e-14
        # below -eps0 the second atom contributes too
        e = -1.5 * e0
        v = d0 + (1 - d0) * ((math.exp(e0) - math.exp(e)) + (1 - math.exp(e + e0))) / (1 + math.exp(e0))
        assert abs(ref.kov_delta(e, e0, d0, 1) - v) < 1e-14


def test_kary_rr():
    with mp.workdps(40):
        for e in (-0.5, 0.0, 0.6, 2.0):
            a = ref.kary_rr_delta(e, 0.9, 2, 7, as_mpf=True)
            assert abs(a - ref.rr_delta_enumerate(e, 0.9, 7, as_mpf=True)) < mp.mpf(10) ** -35
        for kcat, k in [(3, 3), (4, 2), (5, 3)]:
            e0 = mp.mpf(1.1)
            Z = mp.exp(e0) + kcat - 1
            P = [mp.exp(e0) / Z] + [1 / Z] * (kcat - 1)  # row of input 0
            Q = [1 / Z, mp.exp(e0) / Z] + [1 / Z] * (kcat - 2)  # row of input 1
            for e in (-1.0, 0.0, 0.7, 2.0):
                a = ref.kary_rr_delta(e, 1.1, kcat, k, as_mpf=True)
                assert abs(a - _hockey_product(P, Q, k, e)) < 1e-35


# ---------------------------------------------------------------------------------------------------
# Subsampled-Gaussian RDP
# ---------------------------------------------------------------------------------------------------

def test_subsampled_rdp_sum_equals_quadrature():
    for al, q, s in [(2, 0.1, 1.0), (7, 0.01, 0.7)]:
        a = ref.subsampled_gaussian_rdp(al, q, s)
        fwd = ref.subsampled_gaussian_rdp_quad(al, q, s, "forward")
        rev = ref.subsampled_gaussian_rdp_quad(al, q, s, "reverse")
        assert abs(a - fwd) <= 1e-13 * a
        assert rev <= fwd
    # subsampled-RDP reference values (numerical integration and the table)
    assert abs(ref.subsampled_gaussian_rdp(5, 0.5, 1.0) - 1.657893866) < 1e-9
    assert abs(ref.subsampled_gaussian_rdp_quad(5, 0.5, 1.0, "add") - 0.3105371748) < 1e-10
    assert abs(ref.subsampled_gaussian_rdp(10, 0.01, 1.0) - 0.0382704188949) < 1e-13
    assert abs(ref.subsampled_gaussian_rdp(100, 0.001, 5.0) / 2.04884750703e-6 - 1) < 1e-11
    assert abs(ref.subsampled_gaussian_rdp(10, 0.5, 0.7) - 9.43391811042) < 1e-10


def test_subsampled_rdp_fractional_limits_and_interpolation():
    # exact fractional orders (sigma = 1, q = 0.1)
    for al, v in [(1.5, 0.0117345922), (2.5, 0.02350372726), (7.5, 1.110289509)]:
        assert abs(ref.subsampled_gaussian_rdp_quad(al, 0.1, 1.0) - v) < 1e-9
    # exact <= linear interpolation of the CGF between integer orders (docs/derivations/subsampling.md)
    al = 2.5
    K2 = 1 * ref.subsampled_gaussian_rdp(2, 0.1, 1.0)
    K3 = 2 * ref.subsampled_gaussian_rdp(3, 0.1, 1.0)
    assert ref.subsampled_gaussian_rdp_quad(al, 0.1, 1.0) <= (0.5 * K2 + 0.5 * K3) / (al - 1)
    # q = 1 is the plain Gaussian alpha/(2 sigma^2); q = 0 gives 0; small-q asymptotics (Mironov, Talwar &
    # Zhang 2019)
    assert abs(ref.subsampled_gaussian_rdp(9, 1.0, 2.0) - 9 / 8) < 1e-15
    assert ref.subsampled_gaussian_rdp(9, 0.0, 2.0) == 0.0
    q, s, al = 1e-7, 1.0, 4
    approx = al / 2 * q * q * math.expm1(1 / s**2)
    assert abs(ref.subsampled_gaussian_rdp(al, q, s) / approx - 1) < 1e-5


# ---------------------------------------------------------------------------------------------------
# RDP -> (eps, delta)
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "q,sigma,T,delta,classic,a_c,balle,a_b",
    [
        (0.01, 1.0, 1000, 1e-5, 2.538347545, 8, 2.107753075, 8),
        (0.1, 2.0, 100, 1e-6, 3.333068662, 9, 2.915592906, 8),
        (1.0, 10.0, 1, 1e-5, 0.4848526139, 49, 0.3752912224, 41),
    ],
)
def test_rdp_conversions_spec_table(q, sigma, T, delta, classic, a_c, balle, a_b):
    f = functools.lru_cache(maxsize=None)(lambda a: T * ref.subsampled_gaussian_rdp(a, q, sigma, as_mpf=True))
    orders = range(2, 257)
    ec, ac = ref.rdp_to_eps_classic(f, delta, orders, return_order=True)
    eb, ab = ref.rdp_to_eps_balle(f, delta, orders, return_order=True)
    assert abs(ec - classic) < 1e-9 and ac == a_c
    assert abs(eb - balle) < 1e-9 and ab == a_b
    assert eb <= ec


def test_rdp_conversion_formulas():
    # plain Gaussian, rdp = alpha * rho: classic at order a equals rho a + log(1/delta)/(a-1)
    rho, delta = 0.01, 1e-6
    orders = [2, 3.5, 10, 20, 40, 80]
    e, a = ref.rdp_to_eps_classic(lambda x: rho * x, delta, orders, return_order=True)
    vals = {o: rho * o + math.log(1 / delta) / (o - 1) for o in orders}
    assert a == min(vals, key=vals.get) == 40 and abs(e - vals[40]) < 1e-15
    eb = ref.rdp_to_eps_balle(lambda x: rho * x, delta, [20])
    v = rho * 20 + math.log(19 / 20) - (math.log(delta) + math.log(20)) / 19
    assert abs(eb - v) < 1e-15
    # infinite RDP at some orders is skipped; Balle result clamped at 0
    assert ref.rdp_to_eps_classic(lambda x: math.inf if x > 5 else x, 0.1, [2, 8]) == 2 + math.log(10)
    assert ref.rdp_to_eps_balle(lambda x: 0.0, 0.9, [2]) == 0.0


# ---------------------------------------------------------------------------------------------------
# Subsampled-Gaussian privacy profile: exact single step and FFT bracket
# ---------------------------------------------------------------------------------------------------

def _sg_single_quad(eps, q, s, direction):
    with mp.workdps(40):
        e, qq, ss = mp.mpf(eps), mp.mpf(q), mp.mpf(s)
        mix = lambda x: (1 - qq) * mp.npdf(x, 0, ss) + qq * mp.npdf(x, 1, ss)  # noqa: E731
        base = lambda x: mp.npdf(x, 0, ss)  # noqa: E731
        P, Q = (mix, base) if direction == "remove" else (base, mix)
        f = lambda x: max(P(x) - mp.exp(e) * Q(x), 0)  # noqa: E731
        pts = [-mp.inf, -12 * ss, 0, 1, 12 * ss + 1, mp.inf]
        r = mp.expm1(e if direction == "remove" else -e) + qq
        if r > 0:
            pts = sorted(set(pts) | {ss**2 * mp.log(r / qq) + mp.mpf(1) / 2})
        return mp.quad(f, pts)


def test_subsampled_single_exact():
    for d in ("remove", "add"):
        for e in (-0.5, 0.0, 0.05, 0.3):
            v = ref.subsampled_gaussian_delta_single(e, 0.2, 1.0, d, as_mpf=True)
            assert abs(v - _sg_single_quad(e, 0.2, 1.0, d)) < 1e-25
    with mp.workdps(40):
        for e in (0.003, 0.05, 0.3, 1.0):  # swap identity: delta_add(eps) = 1 - e^eps + e^eps delta_rem(-eps)
            a = ref.subsampled_gaussian_delta_single(e, 0.1, 1.0, "add", as_mpf=True)
            r = ref.subsampled_gaussian_delta_single(-e, 0.1, 1.0, "remove", as_mpf=True)
            b = 1 - mp.exp(e) + mp.exp(e) * r
            assert abs(a - b) < 1e-35
    # q = 1 is the Gaussian mechanism with mu = 1/sigma
    assert rel(ref.subsampled_gaussian_delta_single(0.4, 1.0, 0.5, as_mpf=True),
               ref.gaussian_delta(0.4, 2.0, as_mpf=True)) < 1e-30


def test_subsampled_bracket_single_step_contains_exact():
    for d in ("remove", "add"):
        for e in (-1.0, -0.005, 0.0, 0.00712, 0.02, 0.1):
            ex = ref.subsampled_gaussian_delta_single(e, 0.01, 2.0, d)
            lo, hi = ref.subsampled_gaussian_delta(e, 0.01, 2.0, 1, d)
            assert lo <= ex <= hi
            assert hi - lo <= 1e-4 * ex + 1e-21  # k = 1: one merged cell straddles eps (O(grid) relative)


def test_subsampled_bracket_gaussian_limit():
    k, s = 10, 2.0
    for e in (-0.5, 2.0, 5.0):
        g = ref.gaussian_delta(e, math.sqrt(k) / s)
        for d in ("remove", "add"):
            lo, hi = ref.subsampled_gaussian_delta(e, 1.0, s, k, d, grid=2e-4)
            assert lo <= g <= hi
            assert hi - lo <= 1e-6 * g


@pytest.mark.parametrize(
    "q,k,eps,direction,value",
    [  # AFA / FFT fixtures (sigma = 2)
        (0.01, 1000, 0.5, "remove", 1.211789744e-04),
        (0.01, 1000, 1.0, "remove", 3.99184962e-10),
        (0.01, 1000, 0.5, "add", 6.546790408e-05),
        (0.01, 1000, 1.0, "add", 6.3313e-12),
        (0.02, 500, 1.0, "remove", 2.846940780e-06),
    ],
)
def test_subsampled_bracket_spec_fixtures(q, k, eps, direction, value):
    lo, hi = ref.subsampled_gaussian_delta(eps, q, 2.0, k, direction)
    assert lo <= value <= hi
    assert (hi - lo) / value <= 1e-3  # observed: <= 3e-5 at grid 1e-5


def test_subsampled_bracket_spec_table_m():
    # reference values (sigma = 1, q = 0.1, k = 20, eps = 1)
    for d, value in (("remove", 0.0228490838), ("add", 0.0007716535)):
        lo, hi = ref.subsampled_gaussian_delta(1.0, 0.1, 1.0, 20, d, grid=5e-5)
        assert lo - 5e-11 <= value <= hi + 5e-11  # the spec prints 10 digits
        assert (hi - lo) / value <= 1e-5


def test_subsampled_bracket_round_method_is_valid_but_wider():
    e, value = 0.5, 1.211789744e-04
    lo, hi = ref.subsampled_gaussian_delta(e, 0.01, 2.0, 1000, "remove", method="round")
    lo2, hi2 = ref.subsampled_gaussian_delta(e, 0.01, 2.0, 1000, "remove")
    assert lo <= value <= hi
    assert lo <= lo2 and hi2 <= hi
    assert (hi - lo) > 100 * (hi2 - lo2)
