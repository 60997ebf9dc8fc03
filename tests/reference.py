"""Independent high-precision reference implementations ("test oracles") for dpcert.

Nothing in this module imports from ``accountant/``, ``mechanisms/`` or ``conversions/``; every
formula is re-derived here from the literature / the specs and evaluated with mpmath (or, where
stated, with another *independent* exact method).  The functions are meant to be compared against
the library in tests; they favour correctness and clarity over speed.

Conventions (those of the library and of ``docs/derivations``):

* privacy loss ``L = log(p/q)`` distributed under ``P``;
* hockey-stick divergence / privacy profile
  ``delta(eps) = H_{e^eps}(P||Q) = int (p - e^eps q)_+ = E_P[(1 - e^{eps - L})_+]`` for every real ``eps``;
* neighbouring relation add/remove: for the Poisson-subsampled Gaussian the *remove* pair is
  ``P = (1-q) N(0, s^2) + q N(1, s^2)``, ``Q = N(0, s^2)`` and the *add* pair is the swap;
* every public function accepts plain floats and returns a Python ``float`` unless documented
  otherwise (several accept ``as_mpf=True`` to return the mpmath value), and accepts a ``dps`` keyword
  (mpmath decimal digits used internally).

Function index
--------------
gaussian_delta, gaussian_epsilon            closed-form Gaussian profile and its inverse
laplace_delta_single                        exact 1-fold Laplace profile (all real eps)
laplace_delta, laplace_composed_moments     exact k-fold Laplace profile (piecewise polynomial convolution)
kov_delta, rr_delta_enumerate, kary_rr_delta  optimal composition of (eps0, delta0)-DP mechanisms / RR
subsampled_gaussian_rdp                     exact integer-order RDP of the Poisson-subsampled Gaussian
subsampled_gaussian_rdp_quad                same divergences (both directions, any real alpha) by quadrature
subsampled_gaussian_delta_single            exact 1-fold profile of the subsampled Gaussian (add and remove)
subsampled_gaussian_cells                   P- and Q-masses of its privacy-loss cells (the PLD's cell hooks)
subsampled_gaussian_delta                   rigorous (lower, upper) bracket of the k-fold profile (via FFT)
rdp_to_eps_classic, rdp_to_eps_balle        RDP -> (eps, delta) conversions over a finite order list
tiny_sigma_epsilon_lower                    a tight lower bound on eps(delta) of DP-SGD at sigma << 1
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable, Iterable

import mpmath as mp
import numpy as np
from scipy import fft as _fft
from scipy import special as _sp

__all__ = [
    "gaussian_delta",
    "gaussian_epsilon",
    "laplace_delta_single",
    "laplace_delta",
    "laplace_composed_moments",
    "kov_delta",
    "rr_delta_enumerate",
    "kary_rr_delta",
    "subsampled_gaussian_rdp",
    "subsampled_gaussian_rdp_quad",
    "subsampled_gaussian_delta_single",
    "subsampled_gaussian_cells",
    "subsampled_gaussian_delta",
    "rdp_to_eps_classic",
    "rdp_to_eps_balle",
]


def _out(x, as_mpf: bool):
    return x if as_mpf else float(x)


def _pos(x):
    """(x)_+ for mpf."""
    return x if x > 0 else mp.mpf(0)


# ---------------------------------------------------------------------------------------------------
# 1. Gaussian mechanism
# ---------------------------------------------------------------------------------------------------

def _gaussian_delta_mp(eps, mu, dps):
    """delta(eps) of the pair (N(mu,1), N(0,1)) as an mpf, with adaptive extra precision.

    The two terms cancel when delta is tiny relative to Phi(-eps/mu + mu/2); the relative loss is about
    log10(x/mu) digits with x = eps/mu, so the working precision is raised until the result has ``dps``
    significant digits.
    """
    extra = 20
    while True:
        with mp.workdps(dps + extra):
            e = mp.mpf(eps)
            m = mp.mpf(mu)
            if m == 0:
                return _pos(1 - mp.exp(e))
            t1 = mp.ncdf(-e / m + m / 2)
            t2 = mp.exp(e) * mp.ncdf(-e / m - m / 2)
            d = t1 - t2
            if d <= 0:
                # only possible through cancellation; retry with more digits
                lost = dps + extra
            else:
                lost = float(mp.log10(t1 / d)) if t1 > 0 else 0.0
            if lost < extra - 5 or extra > 4000:
                return +d if d > 0 else mp.mpf(0)
            extra = int(2 * extra + lost)


def gaussian_delta(eps, mu, dps=50, as_mpf=False):
    """Exact privacy profile of the Gaussian mechanism with ``mu = sensitivity / sigma``.

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)     (all real eps)

    Source: Balle & Wang 2018 ("Improving the Gaussian mechanism...", Thm 8).
    The pair is P = N(mu, 1), Q = N(0, 1) (L ~ N(mu^2/2, mu^2) under P).  k-fold composition is the
    same formula with mu -> sqrt(k) mu.  Evaluated with mpmath ``ncdf`` (erfc based) at ``dps`` digits plus
    an adaptive margin, so values like 1e-40 or 1e-300 come out with full relative accuracy.
    ``mu == 0`` returns (1 - e^eps)_+.
    """
    if mu < 0:
        raise ValueError("mu must be >= 0")
    return _out(_gaussian_delta_mp(eps, mu, dps), as_mpf)


def gaussian_epsilon(delta, mu, dps=50, as_mpf=False):
    """Inverse of :func:`gaussian_delta` in eps: the unique eps with delta(eps) = ``delta``.

    delta(eps) is continuous and strictly decreasing from 1 (eps -> -inf) to 0 (eps -> inf), so the root is
    bracketed by doubling and found by bisection in mpmath until the bracket is below 1e-(dps-5) relative
    (far below the requested ~1e-15).  The result may be negative when ``delta > gaussian_delta(0, mu)``.
    """
    if not (0 < delta < 1):
        raise ValueError("delta must be in (0, 1)")
    if mu <= 0:
        raise ValueError("mu must be > 0")
    with mp.workdps(dps + 10):
        target = mp.mpf(delta)

        def f(e):
            return _gaussian_delta_mp(e, mu, dps) - target

        lo, hi = mp.mpf(-1), mp.mpf(1)
        while f(lo) < 0:
            lo *= 2
        while f(hi) > 0:
            hi *= 2
        tol = mp.mpf(10) ** (-(dps - 5))
        for _ in range(100000):
            mid = (lo + hi) / 2
            if f(mid) > 0:
                lo = mid
            else:
                hi = mid
            if hi - lo <= tol * max(1, abs(mid)):
                break
        return _out((lo + hi) / 2, as_mpf)


# ---------------------------------------------------------------------------------------------------
# 2. Laplace mechanism: exact k-fold privacy profile
# ---------------------------------------------------------------------------------------------------

def laplace_delta_single(eps, b, sensitivity=1.0, dps=40, as_mpf=False):
    """Exact 1-fold profile of the Laplace pair P = Lap(0, b), Q = Lap(Delta, b), a = Delta/b, any real eps:

        delta(eps) = 1 - e^eps                 for eps < -a
                   = 1 - e^{(eps - a)/2}       for -a <= eps <= a
                   = 0                         for eps > a.

    Derivation (P-measure of L: atom +a mass 1/2, atom -a mass e^{-a}/2, density e^{(l-a)/2}/4 on (-a, a)):
    for -a <= eps <= a, delta = 1/2 (1 - e^{eps-a}) + int_eps^a (1 - e^{eps-l}) e^{(l-a)/2}/4 dl
    = 1/2 (1 - e^{eps-a}) + 1/2 (1 - e^{(eps-a)/2})^2 = 1 - e^{(eps-a)/2}.  The formula on [0, a] is
    the one of docs/derivations/laplace.md; the extension to [-a, 0) is derived here and checked in the
    self-tests against a direct quadrature of int (p - e^eps q)_+ dx.  Continuous at eps = -a (value
    1 - e^{-a}) and at a.
    """
    with mp.workdps(dps + 10):
        a = mp.mpf(sensitivity) / mp.mpf(b)
        e = mp.mpf(eps)
        if e < -a:
            r = -mp.expm1(e)
        elif e <= a:
            r = -mp.expm1((e - a) / 2)
        else:
            r = mp.mpf(0)
        return _out(r, as_mpf)


@functools.lru_cache(maxsize=64)
def _laplace_nu_power(k: int, a_str: str, dps: int):
    """Exact representation of nu^{*k} for the Laplace pair (see :func:`laplace_delta`).

    Units u = l / a.  nu = c (2 delta_{+1} + 2 delta_{-1} + a 1_{(-1,1)}(u) du), c = e^{-a/2}/4 (c is kept
    out: the returned measure is mu_k = (nu/c)^{*k}).  mu_k consists of
      * atoms A[i] at u = 2i - k, i = 0..k;
      * a density which on each length-2 interval [2j - k, 2j - k + 2], j = 0..k-1, is a polynomial of degree
        k-1 stored in the Bernstein basis of the local variable t = (u - (2j - k))/2 in [0, 1].
    All knots stay on the lattice of parity k (atoms at +-1 flip the parity and the indicator has width 2).
    One convolution step mu_{k+1} = mu_k * (2 delta_1 + 2 delta_{-1} + a 1_{(-1,1)}):
      atoms:   A'[i] = 2 (A[i-1] + A[i]);
      density: new piece j = 2 (old piece j-1 + old piece j)       [shifts by +-1, degree-elevated]
                           + 2a (int_t^1 old_{j-1} + int_0^t old_j)  [indicator: F(u+1) - F(u-1)]
                           + a A[j]                                 [atoms spread over (m-1, m+1)].
    In the Bernstein basis every one of these operations combines *non-negative* coefficients with
    non-negative weights (degree elevation, cumulative sums), so there is no cancellation: the arithmetic is
    done with Python's ``decimal`` (correctly rounded, ``dps + 10`` significant digits) which is ~15x faster
    than mpmath's pure-Python backend; the relative rounding error after k steps is <= ~4k 10^-(dps+9).
    Returns (atoms, pieces) as numpy object arrays of ``decimal.Decimal``.
    """
    D = decimal.Decimal
    with decimal.localcontext() as ctx:
        ctx.prec = dps + 10
        a = D(a_str)
        zero = D(0)
        A = np.array([D(1)], dtype=object)
        B = np.zeros((0, 0), dtype=object)
        for kk in range(k):
            npc = kk + 1
            An = np.empty(kk + 2, dtype=object)
            An[0] = 2 * A[0]
            An[-1] = 2 * A[-1]
            if kk >= 1:
                An[1:-1] = 2 * (A[:-1] + A[1:])
            Bn = np.empty((npc, kk + 1), dtype=object)
            aA = a * A
            for j in range(npc):
                Bn[j, :] = aA[j]
            if kk >= 1:
                d = kk - 1  # degree of the old pieces
                w = np.array([D(i) / D(d + 1) for i in range(d + 2)], dtype=object)
                wc = np.array([1 - x for x in w], dtype=object)
                E = np.empty((kk, d + 2), dtype=object)  # degree elevation d -> d+1
                E[:, 0] = B[:, 0]
                E[:, -1] = B[:, -1]
                if d >= 1:
                    E[:, 1:-1] = w[1:-1] * B[:, :-1] + wc[1:-1] * B[:, 1:]
                fac = 2 * a / D(d + 1)
                cs = np.cumsum(B * fac, axis=1)
                G = np.empty((kk, d + 2), dtype=object)  # 2a int_0^t old
                G[:, 0] = zero
                G[:, 1:] = cs
                tot = cs[:, -1:]
                H = np.empty((kk, d + 2), dtype=object)  # 2a int_t^1 old
                H[:, 0] = tot[:, 0]
                H[:, 1:-1] = tot - cs[:, :-1]
                H[:, -1] = zero
                E2 = 2 * E
                Bn[1:, :] += E2 + H
                Bn[:-1, :] += E2 + G
            A, B = An, Bn
    return A, B


@functools.lru_cache(maxsize=64)
def _laplace_tables(k: int, a_str: str, dps: int):
    """mpf tables for the k-fold Laplace P-measure: atoms, per-piece E+ / E- and the Bernstein data."""
    A, B = _laplace_nu_power(k, a_str, dps)
    with mp.workdps(dps + 10):
        a = mp.mpf(a_str)
        logc = -a / 2 - mp.log(4)
        ck = mp.exp(k * logc)
        atoms_u = [2 * i - k for i in range(k + 1)]
        atoms_w = [ck * mp.mpf(str(x)) for x in A]  # nu^{*k} atom weights
        pieces_p = [2 * j - k for j in range(k)]
        Eplus, Eminus = [], []
        if k >= 1:
            n = k - 1
            hp = [mp.hyp1f1(i + 1, n + 2, a) / (n + 1) for i in range(n + 1)]
            hm = [mp.hyp1f1(i + 1, n + 2, -a) / (n + 1) for i in range(n + 1)]
            for j in range(k):
                bj = [mp.mpf(str(x)) for x in B[j]]
                p = pieces_p[j]
                # int over piece of e^{+-l/2} f(u) du, l = a u = a (p + 2t), du = 2 dt
                Eplus.append(ck * 2 * mp.exp(a * p / 2) * mp.fdot(bj, hp))
                Eminus.append(ck * 2 * mp.exp(-a * p / 2) * mp.fdot(bj, hm))
        return {
            "a": a,
            "ck": ck,
            "atoms_u": atoms_u,
            "atoms_w": atoms_w,
            "pieces_p": pieces_p,
            "Eplus": Eplus,
            "Eminus": Eminus,
            "B": B,
        }


def _bernstein_split_right(coefs, t0):
    """Bernstein coefficients of the restriction of sum_i b_i B_{i,n}(t) to [t0, 1] (de Casteljau).

    All weights are convex (t0 in [0, 1]) so positive coefficients stay positive."""
    b = list(coefs)
    n = len(b) - 1
    right = [None] * (n + 1)
    right[n] = b[n]
    s = 1 - t0
    for r in range(1, n + 1):
        b = [s * b[i] + t0 * b[i + 1] for i in range(len(b) - 1)]
        right[n - r] = b[-1]
    return right


def laplace_delta(eps, b, k, sensitivity=1.0, dps=40, as_mpf=False):
    """EXACT privacy profile of the k-fold composition of the Laplace mechanism.

    Pair P = Lap(0, b), Q = Lap(Delta, b), a = Delta / b (Delta = ``sensitivity``); the pair is symmetric, so
    add and remove coincide.  Method (no FFT, no discretisation):

    * The P-measure of one privacy loss is: atom +a (mass 1/2), atom -a (mass e^{-a}/2) and density
      e^{(l-a)/2}/4 on (-a, a) (docs/derivations/laplace.md).  It equals e^{l/2} nu(dl) with
      nu = e^{-a/2}/4 (2 delta_a + 2 delta_{-a} + 1_{(-a,a)}(l) dl); since e^{l/2} is multiplicative,
      the k-fold P-measure is e^{l/2} nu^{*k}.
    * nu^{*k} is computed exactly (see :func:`_laplace_nu_power`): atoms on the lattice a(2i - k) plus a
      density that is a polynomial (Bernstein form) on each interval [a(2j-k), a(2j-k+2)].
    * delta(eps) = sum_atoms w e^{l/2} (1 - e^{eps-l})_+ + sum_pieces int e^{l/2} (1 - e^{eps-l})_+ poly dl.
      For a piece entirely above eps the integral is E+ - e^eps E- with E+- = int e^{+-l/2} poly dl, evaluated
      in closed form through int_0^1 e^{beta t} B_{i,n}(t) dt = 1F1(i+1; n+2; beta)/(n+1).  The piece that
      contains eps is restricted to [eps, end] by de Casteljau subdivision and integrated with the same
      closed form (the integrand becomes e^{eps/2} 2 sinh(beta s) B(s)).

    The representation nu^{*k} is cached per (k, a, dps).  Cost: ~0.3 s for k = 100 on first use (grows like
    k^3), then a few ms per eps.  The convolution itself runs in Python's ``decimal`` at ``dps + 10`` digits
    (see :func:`_laplace_nu_power`: all-positive arithmetic, so no cancellation), the integrals in mpmath.
    Returns a float (or mpf with ``as_mpf=True``); ``k = 0`` gives (1 - e^eps)_+.
    """
    if k < 0 or int(k) != k:
        raise ValueError("k must be a non-negative integer")
    k = int(k)
    if k == 0:
        with mp.workdps(dps):
            return _out(_pos(-mp.expm1(mp.mpf(eps))), as_mpf)
    a_f = float(sensitivity) / float(b)
    if not (a_f > 0 and math.isfinite(a_f)):
        raise ValueError("need 0 < sensitivity/b < inf")
    a_str = repr(a_f)
    T = _laplace_tables(k, a_str, dps)
    with mp.workdps(dps + 10):
        a = T["a"]
        e = mp.mpf(eps)
        ee = mp.exp(e)
        tot = mp.mpf(0)
        for u, w in zip(T["atoms_u"], T["atoms_w"], strict=True):
            lv = a * u
            if lv > e:
                tot += w * mp.exp(lv / 2) * (-mp.expm1(e - lv))
        u0 = e / a  # threshold in u units
        n = k - 1
        for j, p in enumerate(T["pieces_p"]):
            if p >= u0:
                tot += T["Eplus"][j] - ee * T["Eminus"][j]
            elif p + 2 > u0:
                # partial piece: u in [u0, p+2], local t in [t0, 1]
                t0 = (u0 - p) / 2
                with mp.workdps(dps + 30):
                    bj = [mp.mpf(str(x)) for x in T["B"][j]]
                    right = _bernstein_split_right(bj, t0)
                    beta = a * (1 - t0)  # l = a(p + 2t), t = t0 + (1-t0)s -> e^{l/2} = e^{eps/2} e^{beta s}
                    hp = [mp.hyp1f1(i + 1, n + 2, beta) for i in range(n + 1)]
                    hm = [mp.hyp1f1(i + 1, n + 2, -beta) for i in range(n + 1)]
                    integ = mp.fdot(right, [x - y for x, y in zip(hp, hm, strict=True)]) / (n + 1)
                    # du = 2 dt = 2 (1 - t0) ds;
                    # integrand e^{l/2} - e^eps e^{-l/2} = e^{eps/2} (e^{beta s} - e^{-beta s})
                    tot += T["ck"] * 2 * (1 - t0) * mp.exp(e / 2) * integ
        return _out(tot if tot > 0 else mp.mpf(0), as_mpf)


def laplace_composed_moments(b, k, sensitivity=1.0, dps=40):
    """(total P-mass, E_P[e^{-L}]) of the exact k-fold Laplace privacy-loss measure, as mpf.

    Both must equal 1 (P is a probability; E_P[e^{-L}] = Q(total) = 1 since Q has no defect).  Used as a
    self-check of the convolution in :func:`laplace_delta`."""
    T = _laplace_tables(int(k), repr(float(sensitivity) / float(b)), dps)
    with mp.workdps(dps + 10):
        a = T["a"]
        atoms = list(zip(T["atoms_u"], T["atoms_w"], strict=True))
        m0 = mp.fsum(w * mp.exp(a * u / 2) for u, w in atoms) + mp.fsum(T["Eplus"])
        m1 = mp.fsum(w * mp.exp(-a * u / 2) for u, w in atoms) + mp.fsum(T["Eminus"])
        return +m0, +m1


# ---------------------------------------------------------------------------------------------------
# 3. Optimal composition of (eps0, delta0)-DP mechanisms, randomized response
# ---------------------------------------------------------------------------------------------------

def kov_delta(eps, eps0, delta0, k, dps=50, as_mpf=False):
    """Exact optimal k-fold composition of (eps0, delta0)-DP mechanisms (Kairouz, Oh, Viswanath 2015, Thm 3.3,
    written for a continuous eps as in Murtagh & Vadhan 2016):

        delta(eps) = 1 - (1-delta0)^k
                     + (1-delta0)^k sum_{l=0}^{k} C(k,l) (e^{(k-l) eps0} - e^eps e^{l eps0})_+
                                                 / (1 + e^{eps0})^k.

    It is the hockey-stick divergence of the k-fold product of the four-point dominating pair
    P = (delta0, (1-delta0) e^{eps0}/s, (1-delta0)/s, 0), Q = mirror, s = 1 + e^{eps0} (Kairouz, Oh &
    Viswanath 2015),
    and as such is valid for every real eps: term l contributes iff eps < (k - 2l) eps0, so for negative
    eps terms with l >= k/2 appear too; e.g. k = 1 gives
    delta0 + (1-delta0) [(e^{eps0} - e^eps)_+ + (1 - e^{eps+eps0})_+] / (1 + e^{eps0}).
    """
    k = int(k)
    with mp.workdps(dps + 10):
        e0 = mp.mpf(eps0)
        d0 = mp.mpf(delta0)
        ee = mp.exp(mp.mpf(eps))
        s = mp.fsum(
            mp.binomial(k, l) * _pos(mp.exp((k - l) * e0) - ee * mp.exp(l * e0)) for l in range(k + 1)
        )
        keep = (1 - d0) ** k
        r = (1 - keep) + keep * s / (1 + mp.exp(e0)) ** k
        return _out(r, as_mpf)


def rr_delta_enumerate(eps, eps0, k, dps=50, as_mpf=False):
    """Hockey-stick divergence of the k-fold binary randomized response pair by direct enumeration.

    Single use: P = Bern(p) on {correct, flipped} = (p, 1-p), Q = (1-p, p), p = e^{eps0}/(1+e^{eps0}).
    k-fold: the number f of 'flipped' coordinates is a sufficient statistic, P(f) = C(k,f) p^{k-f} (1-p)^f,
    Q(f) = C(k,f) (1-p)^{k-f} p^f, and delta(eps) = sum_f (P(f) - e^eps Q(f))_+ (all real eps).  Probabilities
    are built from p and 1-p directly (not from the e^{l eps0} form used by :func:`kov_delta`).
    """
    k = int(k)
    with mp.workdps(dps + 10):
        e0 = mp.mpf(eps0)
        p = 1 / (1 + mp.exp(-e0))
        pc = 1 / (1 + mp.exp(e0))
        ee = mp.exp(mp.mpf(eps))
        tot = mp.mpf(0)
        for f in range(k + 1):
            c = mp.binomial(k, f)
            P = c * p ** (k - f) * pc**f
            Q = c * pc ** (k - f) * p**f
            tot += _pos(P - ee * Q)
        return _out(tot, as_mpf)


def kary_rr_delta(eps, eps0, kcat, k, dps=50, as_mpf=False):
    """k-fold composition of k-ary randomized response (kcat >= 2 categories) by exact trinomial enumeration.

    One use reports the true value w.p. e^{eps0}/Z and each other value w.p. 1/Z, Z = e^{eps0} + kcat - 1.
    Worst-case pair for inputs x != x': P = row(x), Q = row(x').  Privacy loss under P: +eps0 (mass
    e^{eps0}/Z, output x), -eps0 (mass 1/Z, output x'), 0 (mass (kcat-2)/Z, other outputs).  k-fold: with
    counts (n+, n-, n0), P-mass = multinomial * (e^{eps0}/Z)^{n+} (1/Z)^{n-} ((kcat-2)/Z)^{n0}, loss
    (n+ - n-) eps0, and delta(eps) = sum P-mass (1 - e^{eps - loss})_+.  kcat = 2 is binary RR.
    """
    k = int(k)
    kcat = int(kcat)
    if kcat < 2:
        raise ValueError("kcat >= 2")
    with mp.workdps(dps + 10):
        e0 = mp.mpf(eps0)
        Z = mp.exp(e0) + kcat - 1
        pp, pm, p0 = mp.exp(e0) / Z, 1 / Z, mp.mpf(kcat - 2) / Z
        e = mp.mpf(eps)
        fk = mp.factorial(k)
        tot = mp.mpf(0)
        for npl in range(k + 1):
            for nmi in range(k + 1 - npl):
                n0 = k - npl - nmi
                loss = (npl - nmi) * e0
                if loss <= e:
                    continue
                if n0 > 0 and p0 == 0:
                    continue
                mass = fk / (mp.factorial(npl) * mp.factorial(nmi) * mp.factorial(n0))
                mass *= pp**npl * pm**nmi * (p0**n0 if n0 else 1)
                tot += mass * (-mp.expm1(e - loss))
        return _out(tot, as_mpf)


# ---------------------------------------------------------------------------------------------------
# 4. RDP of the Poisson-subsampled Gaussian
# ---------------------------------------------------------------------------------------------------

_EM1_CACHE: dict = {}


def _expm1_gauss_table(sigma_repr: str, wdps: int, jmax: int):
    """[expm1(j(j-1)/(2 sigma^2)) for j = 0..jmax] at ``wdps`` digits (grown on demand, cached)."""
    key = (sigma_repr, wdps)
    tab = _EM1_CACHE.get(key, [])
    if len(tab) <= jmax:
        with mp.workdps(wdps):
            s2 = mp.mpf(sigma_repr) ** 2
            tab = tab + [mp.expm1(mp.mpf(j * (j - 1)) / (2 * s2)) for j in range(len(tab), jmax + 1)]
        _EM1_CACHE[key] = tab
    return tab


def subsampled_gaussian_rdp(alpha, q, sigma, dps=60, as_mpf=False):
    """Exact RDP of the Poisson-subsampled Gaussian at integer order alpha >= 2 (sensitivity 1):

        eps(alpha) = 1/(alpha-1) log sum_{j=0}^{alpha} C(alpha,j) (1-q)^{alpha-j} q^j e^{j(j-1)/(2 sigma^2)}

    (Zhu & Wang 2019, Thm 2.3.2/2.3.4; Mironov, Talwar, Zhang 2019).  This is the forward
    divergence D_alpha((1-q)N(0,s^2) + qN(1,s^2) || N(0,s^2)) (binomial expansion of E_Q[(p/q)^alpha]),
    which for the Gaussian is also the worst direction.  Exact integer binomials, ``dps`` digits; log1p of
    the (positive) excess sum over j >= 2 keeps relative accuracy for tiny q.
    """
    if int(alpha) != alpha or alpha < 2:
        raise ValueError("integer alpha >= 2 required (use subsampled_gaussian_rdp_quad for real alpha)")
    al = int(alpha)
    with mp.workdps(dps + 10):
        qq = mp.mpf(q)
        if qq == 0:
            return _out(mp.mpf(0), as_mpf)
        # sum_j C(al,j)(1-q)^{al-j} q^j = 1, so
        # A - 1 = sum_{j>=2} C(al,j) (1-q)^{al-j} q^j (e^{j(j-1)/(2 s^2)} - 1)
        em1 = _expm1_gauss_table(repr(float(sigma)), dps + 10, al)
        terms = []
        if qq == 1:  # only j = alpha survives
            terms.append(em1[al])
        else:
            r = qq / (1 - qq)
            rj = r  # r^j, built incrementally
            base = (1 - qq) ** al
            for j in range(2, al + 1):
                rj *= r
                terms.append(mp.mpf(math.comb(al, j)) * base * rj * em1[j])  # exact integer binomial
        excess = mp.fsum(terms)
        return _out(mp.log1p(excess) / (al - 1), as_mpf)


def subsampled_gaussian_rdp_quad(alpha, q, sigma, direction="forward", dps=30, as_mpf=False):
    """Renyi divergences of the Poisson-subsampled Gaussian pair by mpmath quadrature (any real alpha > 1).

    With r(x) = p(x)/q(x) = 1 - q + q exp((2x-1)/(2 sigma^2)) and phi_s the N(0, sigma^2) density
    (Mironov, Talwar & Zhang 2019):
      forward / 'remove':  D_alpha(P||Q) = 1/(alpha-1) log int phi_s(x) r(x)^alpha dx
      reverse / 'add':     D_alpha(Q||P) = 1/(alpha-1) log int phi_s(x) r(x)^{1-alpha} dx
    where P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2).  The integrand of the forward direction peaks near
    x = alpha (tilted Gaussian), so breakpoints include 0, 1/2, 1, alpha/2, alpha and alpha +- 12 sigma.
    """
    if alpha <= 1:
        raise ValueError("alpha > 1 required")
    d = {"forward": 1, "remove": 1, "reverse": -1, "add": -1}.get(direction)
    if d is None:
        raise ValueError("direction must be forward/remove or reverse/add")
    with mp.workdps(dps + 10):
        al = mp.mpf(alpha)
        qq = mp.mpf(q)
        s = mp.mpf(sigma)
        s2 = s * s
        expo = al if d == 1 else 1 - al

        def f(x):
            logr = mp.log1p(qq * mp.expm1((2 * x - 1) / (2 * s2)))
            return mp.npdf(x, 0, s) * mp.exp(expo * logr)

        pts = sorted(
            {mp.mpf(v) for v in [-12 * s, -s, 0, 0.5, 1, 1 + 12 * s]}
            | ({al / 2, al, al - 12 * s, al + 12 * s} if d == 1 else set())
        )
        pts = [-mp.inf] + pts + [mp.inf]
        val = mp.quad(f, pts)
        return _out(mp.log(val) / (al - 1), as_mpf)


# ---------------------------------------------------------------------------------------------------
# 5. Privacy profile of the Poisson-subsampled Gaussian
# ---------------------------------------------------------------------------------------------------

def _normal_interval_mp(a, b):
    """P(a < Z <= b), Z ~ N(0, 1), in mpmath on the side where the difference is small (past |x| = 1e5
    the tail, < e^-5e9, is taken as 0: mpmath's erfc overflows there)."""
    a, b = (mp.mpf("-inf") if v < -1e5 else mp.mpf("inf") if v > 1e5 else v for v in (a, b))
    if not a < b:
        return mp.mpf(0)
    if a >= 0:
        return mp.ncdf(-a) - mp.ncdf(-b)
    if b <= 0:
        return mp.ncdf(b) - mp.ncdf(a)
    return 1 - mp.ncdf(a) - mp.ncdf(-b)


def subsampled_gaussian_cells(edges, q, sigma, direction="remove", sensitivity=1.0, dps=50, as_mpf=False):
    """(P-masses, Q-masses) of the cells (-inf, e_0], (e_0, e_1], ..., (e_{n-1}, inf) of the subsampled
    Gaussian's privacy loss, in noise units mu = sensitivity / sigma (remove: P = (1-q) N(0,1) + q N(mu,1),
    Q = N(0,1), L = l(x) = log(1 - q + q e^{mu x - mu^2/2}); add: the swap, L = -l(x)).  Each edge is
    mapped back to x(e) = (log(1-q) + log(expm1(e - log(1-q))) - log q) / mu + mu/2 (-inf at or below the
    floor log(1 - q)), the masses are normal-CDF differences."""
    with mp.workdps(dps):
        qm, mu = mp.mpf(q), mp.mpf(sensitivity) / mp.mpf(sigma)
        l1q, lq = mp.log1p(-qm), mp.log(qm)

        def x_of(e):
            d = mp.mpf(e) - l1q
            return mp.mpf("-inf") if d <= 0 else (l1q + mp.log(mp.expm1(d)) - lq) / mu + mu / 2

        def mix(a, b):
            return (1 - qm) * _normal_interval_mp(a, b) + qm * _normal_interval_mp(a - mu, b - mu)

        if direction == "remove":
            xs = [mp.mpf("-inf")] + [x_of(e) for e in edges] + [mp.mpf("inf")]
            cells = list(zip(xs[:-1], xs[1:], strict=True))
            p, qq = [mix(a, b) for a, b in cells], [_normal_interval_mp(a, b) for a, b in cells]
        else:  # L = -l(x) in (e_{i-1}, e_i]  <=>  x in [x(-e_i), x(-e_{i-1}))
            xs = [mp.mpf("inf")] + [x_of(-mp.mpf(e)) for e in edges] + [mp.mpf("-inf")]
            cells = list(zip(xs[1:], xs[:-1], strict=True))
            p, qq = [_normal_interval_mp(a, b) for a, b in cells], [mix(a, b) for a, b in cells]
        return [_out(v, as_mpf) for v in p], [_out(v, as_mpf) for v in qq]


def subsampled_gaussian_delta_single(eps, q, sigma, direction="remove", dps=50, as_mpf=False):
    """Exact 1-fold profile of the Poisson-subsampled Gaussian pair (sensitivity 1), any real eps.

    remove: P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2); L(x) = log(1 - q + q e^{(2x-1)/(2s^2)}) increasing,
      inverse x*(l) = s^2 log((e^l - 1 + q)/q) + 1/2 (solving L(x) = l).  For eps <= log(1-q):
      delta = 1 - e^eps; else delta = P(X > x*) - e^eps Q(X > x*)
      = q Pbar((x*-1)/s) - (e^eps - 1 + q) Pbar(x*/s).
    add (swap): P = N(0,s^2), Q = mixture, loss -L(x) decreasing; for eps >= -log(1-q): 0; else with
      x* = x*(-eps): delta = Phi(x*/s) - e^eps [(1-q) Phi(x*/s) + q Phi((x*-1)/s)].
    """
    with mp.workdps(dps + 20):
        e = mp.mpf(eps)
        qq = mp.mpf(q)
        s = mp.mpf(sigma)
        s2 = s * s
        if direction == "remove":
            if qq < 1 and e <= mp.log1p(-qq):
                r = -mp.expm1(e)
            else:
                xs = s2 * mp.log((mp.expm1(e) + qq) / qq) + mp.mpf(1) / 2
                r = qq * mp.ncdf(-(xs - 1) / s) - (mp.expm1(e) + qq) * mp.ncdf(-xs / s)
        elif direction == "add":
            if qq < 1 and e >= -mp.log1p(-qq):
                r = mp.mpf(0)
            else:
                xs = s2 * mp.log((mp.expm1(-e) + qq) / qq) + mp.mpf(1) / 2
                r = mp.ncdf(xs / s) * (1 - mp.exp(e) * (1 - qq)) - mp.exp(e) * qq * mp.ncdf((xs - 1) / s)
        else:
            raise ValueError("direction must be 'remove' or 'add'")
        return _out(r if r > 0 else mp.mpf(0), as_mpf)


def _norm_interval(a, b):
    """P(a < Z <= b), Z ~ N(0,1), vectorised; differences are taken on the side where they are small."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    right = _sp.ndtr(-a) - _sp.ndtr(-b)
    left = _sp.ndtr(b) - _sp.ndtr(a)
    return np.maximum(np.where(a >= 0, right, left), 0.0)


class _SGModel:
    """Single-step subsampled-Gaussian pair written with an increasing loss in a coordinate y.

    remove: y = x, P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2), ell(y) = log(1 + q expm1((2y-1)/(2s^2))).
    add:    y = -x, P = N(0,s^2), Q = (1-q)N(0,s^2) + qN(-1,s^2), ell(y) = -log(1 + q expm1((-2y-1)/(2s^2))).
    """

    def __init__(self, q, sigma, direction):
        self.q, self.s, self.dir = float(q), float(sigma), direction
        q = self.q
        if not (0 < q <= 1):
            raise ValueError("0 < q <= 1 required")
        if direction == "remove":
            self.P = [(1 - q, 0.0), (q, 1.0)] if q < 1 else [(1.0, 1.0)]
            self.Q = [(1.0, 0.0)]
            self.ell_min = math.log1p(-q) if q < 1 else -math.inf
            self.ell_max = math.inf
        elif direction == "add":
            self.P = [(1.0, 0.0)]
            self.Q = [(1 - q, 0.0), (q, -1.0)] if q < 1 else [(1.0, -1.0)]
            self.ell_min = -math.inf
            self.ell_max = -math.log1p(-q) if q < 1 else math.inf
        else:
            raise ValueError("direction must be 'remove' or 'add'")

    def _log_em1_plus_q(self, t):
        """log(e^t - 1 + q), valid for t > log(1-q) (nan / -inf below; callers mask that range)."""
        q = self.q
        t = np.asarray(t, dtype=float)
        if q == 1:
            return t
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            big = t + np.log1p(-(1 - q) * np.exp(-t))
            small = np.log(np.expm1(np.minimum(t, 31.0)) + q)
            return np.where(t > 30, big, small)

    def y_of_ell(self, ell):
        """Inverse of the loss map (vectorised); -inf/+inf outside the loss range."""
        s2 = self.s**2
        ell = np.asarray(ell, dtype=float)
        lq = math.log(self.q)
        with np.errstate(divide="ignore", invalid="ignore"):
            if self.dir == "remove":
                v = s2 * (self._log_em1_plus_q(ell) - lq) + 0.5
                v = np.where(ell <= self.ell_min, -np.inf, v)
            else:
                v = -(s2 * (self._log_em1_plus_q(-ell) - lq) + 0.5)
                v = np.where(ell >= self.ell_max, np.inf, v)
        return v

    def ell_of_y(self, y):
        s2 = self.s**2
        y = np.asarray(y, dtype=float)
        q = self.q
        if self.dir == "remove":
            z = (2 * y - 1) / (2 * s2)
        else:
            z = (-2 * y - 1) / (2 * s2)
        with np.errstate(over="ignore"):
            v = np.where(z > 30, np.log(q) + z + np.log1p((1 - q) * np.exp(-np.minimum(z, 700)) / q),
                         np.log1p(q * np.expm1(np.minimum(z, 30))))
        return v if self.dir == "remove" else -v

    def mass(self, comps, ya, yb):
        s = self.s
        return sum(w * _norm_interval((ya - m) / s, (yb - m) / s) for w, m in comps)


@functools.lru_cache(maxsize=32)
def _sg_single_step(q, sigma, direction, grid, tail, method):
    """Lattice discretisations of one subsampled-Gaussian step.

    Returns dict(upper=(i0, pmf, offset, p_inf), lower=(i0, pmf, offset, 0.0)), where pmf[j] is a P-mass
    at loss (i0 + j) * grid + offset and p_inf a P-mass at loss +inf.

    method 'split' (default, tight):
      upper: every loss in [l_i, l_{i+1}] is split onto the two lattice end points with P-weights that
        preserve both its P-mass and its Q-mass (i.e. E_P[e^{-L}]).  This is a mean-preserving spread of
        e^{-L}; since x -> (1 - e^eps x)_+ is convex and the composed delta is a product-form expectation,
        it can only increase delta(eps), for every eps and every k ("connect the dots", Doroshenko et al.
        2022).  Per-step error O(grid^2).
      lower: the P/Q masses of loss cells around the lattice points are merged (a post-processing, so the
        merged pair is dominated by the true one for all eps, also after composition); each merged loss
        l_b = l_i + r_b is then rounded DOWN to the shifted lattice {j grid + r*}, which can only decrease
        the P-side formula E_P[(1 - e^{eps - sum L})_+].  Any r* is valid; it is chosen to minimise the
        mass-weighted rounding loss (minus a 1e-10 float margin), after the cell boundaries were moved once
        so that all r_b are nearly equal.  Per-step error O(grid^2).
    method 'round' (docs/derivations/discretised-pld.md, sections 1-2): the P-mass of [l_i, l_{i+1}) is
      rounded up to l_{i+1} (upper) or down to l_i (lower).  Per-step error O(grid), i.e. about k * grid
      in eps after k steps.
    Tails: the P-mass beyond the lattice range is <= ``tail`` per side; for the upper bound the high tail
    becomes an atom at +inf (counted fully in delta) and the low tail is rounded up to the first lattice
    point; for the lower bound both are dropped.
    """
    M = _SGModel(q, sigma, direction)
    s = M.s
    ztail = float(-_sp.ndtri(tail))
    y_lo = min(m for _, m in M.P) - s * ztail
    y_hi = max(m for _, m in M.P) + s * ztail
    l_lo = max(float(M.ell_of_y(y_lo)), M.ell_min)
    l_hi = min(float(M.ell_of_y(y_hi)), M.ell_max)
    i_lo = math.floor(l_lo / grid)
    i_hi = math.ceil(l_hi / grid)
    idx = np.arange(i_lo, i_hi + 1)
    lat = idx * grid
    yb = M.y_of_ell(lat)  # boundaries at lattice points
    pb = M.mass(M.P, yb[:-1], yb[1:])
    qb = M.mass(M.Q, yb[:-1], yb[1:])
    p_below = M.mass(M.P, -np.inf, yb[0])
    p_above = M.mass(M.P, yb[-1], np.inf)
    p_below = float(p_below)
    p_above = float(p_above)
    n = len(idx)

    up = np.zeros(n)
    if method == "split":
        with np.errstate(divide="ignore", invalid="ignore"):
            sval = np.log(qb) - np.log(pb) + lat[:-1]  # log(q_b e^{l_i}/p_b) in [-grid, 0]
            frac_hi = np.clip(-np.expm1(sval) / (-math.expm1(-grid)), 0.0, 1.0)
        frac_hi = np.where(pb > 0, frac_hi, 0.0)
        w_hi = pb * frac_hi
        w_lo = pb - w_hi
        up[:-1] += w_lo
        up[1:] += w_hi
    elif method == "round":
        up[1:] += pb
    else:
        raise ValueError("method must be 'split' or 'round'")
    up[0] += p_below
    upper = (i_lo, up, 0.0, p_above)

    if method == "round":
        lo = np.zeros(n)
        lo[:-1] += pb
        lower = (i_lo, lo, 0.0, 0.0)
    else:
        # Pass 1: cells centred on the lattice points i*grid (i = i_lo..i_hi); merged loss = i*grid + r0_i
        # with r0 = O(slope * grid^2).  Pass 2: move the cell boundaries by d ~ -(r0_i + r0_{i+1})/2
        # (|d| < 0.45 grid, so the cells still partition the line), which flattens r to second order.  The
        # boundaries only affect tightness: any partition is a post-processing, and rounding is downwards.
        mids = np.arange(i_lo - 1, i_hi + 1) * grid + grid / 2
        lm, pc = None, None
        for _pass in range(2):
            cb = M.y_of_ell(mids)
            pc = M.mass(M.P, cb[:-1], cb[1:])
            qc = M.mass(M.Q, cb[:-1], cb[1:])
            ok = (pc > 0) & (qc > 0)
            with np.errstate(divide="ignore", invalid="ignore"):
                lm = np.where(ok, np.log(pc) - np.log(qc), np.nan)
            if _pass == 0:
                r0 = np.where(ok, lm - lat, 0.0)
                d = np.empty_like(mids)
                d[1:-1] = -(r0[:-1] + r0[1:]) / 2
                d[0], d[-1] = -r0[0], -r0[-1]
                mids = mids + np.clip(d, -0.45 * grid, 0.45 * grid)
        r = lm - lat
        # Any shift r* is valid (each merged loss is rounded DOWN to the lattice {j grid + r*}); choose it to
        # minimise the P-mass-weighted rounding loss sum_b p_b [(r_b - r*) + grid 1{r_b < r*}].
        rs = r[ok]
        ps = pc[ok]
        order = np.argsort(rs)
        rs, ps = rs[order], ps[order]
        below = np.concatenate(([0.0], np.cumsum(ps)[:-1]))  # mass strictly below candidate r* = rs[i]
        cost = (np.dot(ps, rs) - rs * ps.sum()) + grid * below
        rstar = float(rs[int(np.argmin(cost))]) - 1e-10
        j = np.floor((lm[ok] - rstar) / grid).astype(np.int64)
        j0 = int(j.min())
        lo = np.zeros(int(j.max()) - j0 + 1)
        np.add.at(lo, j - j0, pc[ok])
        lower = (j0, lo, rstar, 0.0)
    return {"upper": upper, "lower": lower}


def _log_mgf(logpmf, losses, theta):
    z = logpmf + theta * losses
    m = float(z.max())
    return m + math.log(float(np.sum(np.exp(z - m))))


def _chernoff_min(fun, smax):
    """min over s in [0, smax] of a convex function (bounded Brent); any s gives a valid bound, so an inexact
    minimiser only loosens the bound."""
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(fun, bounds=(0.0, smax), method="bounded", options={"xatol": 1e-6 * max(1.0, smax)})
    return min(float(res.fun), float(fun(0.0)))


def _composed_delta(step, k, eps, grid):
    """delta contribution of the k-fold convolution of a lattice P-measure, with tail/aliasing bounds.

    Returns (value, alias_bound, upper_tail_bound).  The FFT works on an exponentially tilted copy
    (tilt theta at the Chernoff saddle for eps) so that entries near eps carry full relative precision.
    If the whole support of the k-fold sum has <= 2^20 lattice points the convolution is exact (linear,
    no wrap: both bounds are 0); otherwise it runs on a circular window [t_lo, t_lo + N grid) with
    t_lo <= eps.  Wrapped (aliased) mass only adds, so value >= exact in-window sum and
    value - alias_bound <= exact in-window sum; the untilted mass above the window is <= upper_tail_bound
    (Chernoff bound from an upper bound of the exact lattice MGF).
    """
    i0, pmf, off, _ = step
    nz = pmf > 0
    J = np.nonzero(nz)[0]
    w = pmf[nz]
    lidx = (i0 + J).astype(np.int64)
    losses = lidx * grid + off
    logw = np.log(w)
    lmin, lmax = float(losses.min()), float(losses.max())
    if eps >= k * lmax:
        return 0.0, 0.0, 0.0

    # Coarse rigorous surrogate for the Chernoff bounds: blocks of B consecutive lattice points with their
    # total weight placed at the block's largest loss (t >= 0) or smallest loss (t < 0), so that the
    # surrogate cumulant is >= the exact one for every t.
    n = len(losses)
    B = max(1, n // 4096)
    nb = -(-n // B)
    pad = nb * B - n
    lw_pad = np.concatenate((logw, np.full(pad, -np.inf))).reshape(nb, B)
    bm = lw_pad.max(axis=1)
    blogw = bm + np.log(np.sum(np.exp(lw_pad - bm[:, None]), axis=1))
    starts = np.arange(nb) * B
    bmin = losses[starts]
    bmax = losses[np.minimum(starts + B - 1, n - 1)]
    wb = np.exp(lw_pad - bm[:, None])
    lpad = np.concatenate((losses, np.full(pad, losses[-1]))).reshape(nb, B)
    bmid = np.sum(wb * lpad, axis=1) / np.sum(wb, axis=1)  # block means (only used to pick theta)

    def K(t):  # upper bound on the cumulant of the k-fold sum (finite part)
        return k * _log_mgf(blogw, bmax if t >= 0 else bmin, t)

    def _tilt(t):
        zz = blogw + t * bmid
        p = np.exp(zz - zz.max())
        p /= p.sum()
        m1 = float(np.dot(p, bmid))
        return m1, float(np.dot(p, (bmid - m1) ** 2))

    def Kp(t):  # approximate derivative (block means; only used to choose theta)
        return k * _tilt(t)[0]

    def Kpp(t):
        return k * max(_tilt(t)[1], grid**2)

    # tilt: solve K'(theta) = eps for theta >= 0 (safeguarded Newton; any theta >= 0 is valid, this one makes
    # the tilted k-fold measure peak at eps, so the entries that matter carry full relative precision)
    if Kp(0.0) >= eps:
        theta = 0.0
    else:
        lo_, hi = 0.0, 1.0
        while Kp(hi) < eps and hi < 1e12:
            lo_, hi = hi, 2 * hi
        theta = 0.5 * (lo_ + hi)
        for _ in range(60):
            f = Kp(theta) - eps
            if f < 0:
                lo_ = theta
            else:
                hi = theta
            step = f / max(Kpp(theta), 1e-300)
            nt = theta - step
            if not (lo_ < nt < hi):
                nt = 0.5 * (lo_ + hi)
            if abs(nt - theta) <= 1e-10 * max(1.0, theta):
                theta = nt
                break
            theta = nt
    z = logw + theta * losses
    lm1 = float(_sp.logsumexp(z))
    pt = np.exp(z - lm1)  # tilted single-step pmf (sums to 1)
    mean = float(np.dot(pt, losses))
    var = max(float(np.dot(pt, (losses - mean) ** 2)), (grid**2))
    Ktheta = k * lm1
    cen, sd = k * mean, math.sqrt(k * var)
    imin, imax = int(lidx.min()), int(lidx.max())
    full_W = k * (imax - imin) + 1
    if full_W <= 2**20:
        # the whole support of the k-fold sum fits: exact linear convolution, no wrap-around, no tails
        J_lo, N = k * imin, _fft.next_fast_len(full_W, real=True)
        alias = up_tail = 0.0
    else:
        R = 14.0
        for _ in range(6):
            t_lo = max(min(eps, cen - R * sd), k * lmin) - grid
            t_hi = min(cen + R * sd, k * lmax) + grid
            # composed lattice index: L_J = J grid + k off
            J_lo = math.floor((t_lo - k * off) / grid)
            W = math.ceil((t_hi - k * off) / grid) - J_lo + 1
            N = _fft.next_fast_len(W, real=True)
            t_hi_eff = (J_lo + N - 1) * grid + k * off
            t_lo_eff = J_lo * grid + k * off
            smax = theta + 50.0 * R / sd + 10.0
            th, lo_e = t_hi_eff, t_lo_eff
            up_tail = math.exp(min(0.0, _chernoff_min(lambda s_, th=th: K(s_) - s_ * th, smax)))
            a_hi = _chernoff_min(lambda s_, th=th: K(theta + s_) - Ktheta - s_ * th, smax)
            a_lo = _chernoff_min(lambda s_, tl=lo_e: K(theta - s_) - Ktheta + s_ * tl, smax)
            alias = math.exp(min(Ktheta - theta * eps + np.logaddexp(a_hi, a_lo), 700.0))
            scale = math.exp(min(Ktheta - theta * eps, 700.0))
            if alias <= 1e-9 * scale or N > 2**25:
                break
            R *= 1.5
        if N > 2**26:
            raise MemoryError("FFT window too large; use a coarser grid")
    arr = np.bincount(np.mod(lidx, N), weights=pt, minlength=N)
    c = _fft.rfft(arr)
    c = c**k
    out = _fft.irfft(c, n=N)
    # out[J mod N] is the (wrapped) tilted mass of composed index J; keep J in [Js, J_lo + N) with L_J > eps
    Js = max(J_lo, math.floor((eps - k * off) / grid) - 1)
    jj = np.arange(Js, J_lo + N, dtype=np.int64)
    Ls = jj * grid + k * off
    keep = Ls > eps
    jj, Ls = jj[keep], Ls[keep]
    v = np.maximum(out[jj % N], 0.0)
    # untilt: pi_k(J) = tilted(J) * exp(K(theta) - theta L_J); weight (1 - e^{eps - L_J})
    value = float(np.dot(v, np.exp(Ktheta - theta * Ls) * -np.expm1(eps - Ls)))
    return value, alias, up_tail


def subsampled_gaussian_delta(eps, q, sigma, k, direction="remove", dps=30, grid=1e-5, tail=1e-22,
                              method="split"):
    """Rigorous bracket (lower, upper) of delta(eps) for the k-fold Poisson-subsampled Gaussian.

    Pair (sensitivity 1): remove P = (1-q)N(0,s^2) + qN(1,s^2), Q = N(0,s^2); add = the swapped pair.
    Computed independently of any characteristic-function / contour code:

    1. The single-step privacy loss L(x) = log(1 - q + q e^{(2x-1)/(2s^2)}) is monotone in x, so the exact
       P- and Q-masses of loss intervals come from the normal CDF (scipy ndtr, float64).
    2. The loss is discretised on the lattice ``grid`` * Z (details in :func:`_sg_single_step`).
       ``method='split'`` (default): upper = mean-preserving split of each cell onto its end points (a pair
       that dominates the true one), lower = merged cells (a pair dominated by the true one) with losses
       rounded down to a shifted lattice; both errors are O(grid^2) per step, the bracket is ~1e-5
       relative wide at k = 1000, grid = 1e-5.  ``method='round'`` is
       docs/derivations/discretised-pld.md section 2 (P-side rounding up / down; width ~ k * grid in eps,
       i.e. ~10-30% relative in delta at k = 1000).
    3. The k-fold convolution is one exponentially tilted FFT (scipy, float64), exact when the support
       fits in 2^20 points, else on a window with Chernoff-bounded tails: aliasing only adds mass (upper
       side) and is bounded by a Chernoff bound on the tilted measure (subtracted on the lower side).
       The single-step high tail (P-mass <= ``tail``) is an atom at +inf for the upper bound (adds
       1 - (1-p_inf)^k).
    Rigorous up to float64 rounding, which is covered by a relative margin of 1e-10 applied to both ends
    (observed float errors ~1e-14 relative; the tilt keeps relative accuracy for tiny delta).  ``dps`` is
    accepted for signature uniformity only (the computation is float64).  q = 0 gives (1 - e^eps)_+.
    Returns a tuple of floats (lower, upper).
    """
    if direction not in ("remove", "add"):
        raise ValueError("direction must be 'remove' or 'add'")
    k = int(k)
    eps = float(eps)
    if k == 0 or q == 0:
        v = max(0.0, -math.expm1(eps))
        return v, v
    st = _sg_single_step(float(q), float(sigma), direction, float(grid), float(tail), method)
    i0, pmf, off, pinf = st["upper"]
    val, alias, up_tail = _composed_delta(st["upper"], k, eps, grid)
    inf_part = -math.expm1(k * math.log1p(-pinf)) if pinf > 0 else 0.0
    # finite part of the upper pmf has total mass 1 - pinf: composing it gives P(no +inf atom, S in .)
    # (1 +- 1e-10): margin for float64 rounding in the CDF differences / FFT (observed errors ~1e-14 relative)
    upper = min(1.0, (inf_part + val + up_tail) * (1 + 1e-10) + 1e-300)
    lval, lalias, _ = _composed_delta(st["lower"], k, eps, grid)
    lower = max(0.0, (lval - lalias) * (1 - 1e-10))
    floor = max(0.0, -math.expm1(eps))  # delta(eps) >= (1 - e^eps)_+ always
    lower = max(lower, floor) if floor <= upper else lower
    return lower, upper


# ---------------------------------------------------------------------------------------------------
# 6. RDP -> (eps, delta) conversions
# ---------------------------------------------------------------------------------------------------

def _rdp_minimise(rdp_fn, extra, alphas, dps):
    """(min over the orders of rdp_fn(alpha) + extra(alpha), the minimising order); (None, None) when the
    RDP is infinite at every order.  Orders must be > 1."""
    alphas = [_order(a) for a in alphas]
    if any(a <= 1 for a in alphas):
        raise ValueError("orders must be > 1")
    best, best_a = None, None
    with mp.workdps(dps):
        for a in alphas:
            r = mp.mpf(rdp_fn(a))
            if not mp.isfinite(r):
                continue
            v = r + extra(mp.mpf(a))
            if best is None or v < best:
                best, best_a = v, a
    return best, best_a


def rdp_to_eps_classic(rdp_fn: Callable, delta, alphas: Iterable, dps=50, return_order=False, as_mpf=False):
    """Classic RDP -> DP conversion (Mironov 2017, Prop. 3; with the thesis' indexing typo corrected:
    docs/derivations/rdp-conversion.md):

        eps(delta) = min_{alpha in alphas} rdp_fn(alpha) + log(1/delta)/(alpha - 1)

    ``rdp_fn(alpha)`` returns the (composed) RDP at order alpha (float or mpf; +inf allowed).  Orders must be
    > 1.  With ``return_order=True`` returns (eps, alpha*).
    """
    with mp.workdps(dps):
        ld = mp.log(1 / mp.mpf(delta))
    best, best_a = _rdp_minimise(rdp_fn, lambda am: ld / (am - 1), alphas, dps)
    if best is None:
        best = mp.inf
    res = _out(best, as_mpf)
    return (res, best_a) if return_order else res


def rdp_to_eps_balle(rdp_fn: Callable, delta, alphas: Iterable, dps=50, return_order=False, as_mpf=False):
    """Improved RDP -> DP conversion of Balle, Barthe, Gaboardi, Hsu, Sato 2020 (Thm 21):

        eps(delta) = min_alpha rdp_fn(alpha) + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha - 1),

    clamped at >= 0.  Equivalent to
    delta(eps) = min_alpha (1/alpha) (1-1/alpha)^{alpha-1} e^{(alpha-1)(rdp - eps)}.
    Orders must be > 1.  With ``return_order=True`` returns (eps, alpha*).
    """
    with mp.workdps(dps):
        ld = mp.log(mp.mpf(delta))
    best, best_a = _rdp_minimise(rdp_fn, lambda am: mp.log((am - 1) / am) - (ld + mp.log(am)) / (am - 1),
                                 alphas, dps)
    if best is None:
        best = mp.inf
    elif best < 0:
        best = mp.mpf(0)
    res = _out(best, as_mpf)
    return (res, best_a) if return_order else res


def _order(a):
    """Keep integer orders as int (so exact-binomial RDP functions accept them)."""
    if isinstance(a, (int, np.integer)):
        return int(a)
    fa = float(a)
    if math.isfinite(fa) and fa == int(fa):
        return int(fa)
    return a


def tiny_sigma_epsilon_lower(sigma: float, q: float, n: int, delta: float) -> float:
    """eps(delta) of n Poisson-subsampled Gaussian steps (remove direction) for sigma << 1.

    Independent of the code under test: with mu = 1/sigma >> 1 the privacy loss of a sampled step is
    log q + mu^2/2 + mu W (W ~ N(0, 1)) and an unsampled step's is log(1 - q), up to terms below e^-500
    that only increase the loss; so given K ~ Bin(n, q) sampled steps the loss is Gaussian and
    delta(eps) = sum_k P(K=k) [Phi(a) - e^{eps - m + s^2/2} Phi(a - s)], a = (m - eps)/s.  Dropping the
    tiny terms lowers the loss, so this eps is a (very tight) lower bound on the truth.
    """
    mp.mp.dps = 40
    qm, mu = mp.mpf(q), 1 / mp.mpf(sigma)

    def dl(eps):
        tot = mp.mpf(0)
        for k in range(1, n + 1):
            pk = mp.binomial(n, k) * qm**k * (1 - qm) ** (n - k)
            m = k * mp.log(qm) + k * mu**2 / 2 + (n - k) * mp.log(1 - qm)
            s = mu * mp.sqrt(k)
            a = (m - eps) / s
            tot += pk * (mp.ncdf(a) - mp.exp(eps - m + s**2 / 2 + mp.log(mp.ncdf(a - s))))
        return tot - mp.mpf(delta)

    lo, hi = mp.mpf(0), n * mu**2  # dl(lo) > 0 > dl(hi)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if dl(mid) > 0 else (lo, mid)
    return float(lo)
