"""numba kernels for Bernoulli Renyi divergences, log Phi and Poisson-subsampled binomial sums.

Used by :mod:`mechanisms.screening` (noisy screening, docs/derivations/noisy-screening.md §§1-2) and
:mod:`mechanisms.gnmax` (Poisson-subsampled Gaussian, docs/derivations/subsampling.md).

Numerical design (docs/derivations/noisy-screening.md §6):

* ``log_ndtr`` is a jit-able log Phi(z) with full relative accuracy on the whole real line: the
  complementary error function where it is representable and the asymptotic series
  log Phi(z) = -z^2/2 - log(-z) - log(2 pi)/2 + log(1 - 1/z^2 + 3/z^4 - ...) for z <= -37, where
  erfc underflows.  log(1 - Phi(z)) is always computed as log Phi(-z), never as log1p(-Phi(z)).
* The binary Renyi divergence of order alpha = 1 + beta,
      (alpha - 1) D_alpha(Bern(p) || Bern(q)) = log(1 + s),
  is evaluated through the identity (derived here; each term is a non-negative number, so no
  cancellation happens anywhere, for every alpha > 1 including alpha -> 1):
      s = sum over the two atoms (a, b) in {(p, q), (1 - p, 1 - q)} of
          a * [ expm1mx(beta * r) + beta * expm1mx(-r) ],   r = log(a / b),
  where expm1mx(y) = e^y - 1 - y >= 0.  (Proof: with a = b(1 + u), the atom contributes
  b[(1 + u)^alpha - 1 - alpha u]; the linear terms of the two atoms cancel exactly because
  p - q = -((1 - p) - (1 - q)); expanding (1 + u)^alpha = e^{alpha r} gives the bracket.)
  This replaces the expm1/log1p recipe of that section (which still cancels at first order,
  losing digits when the log-ratios are tiny) by an expression that has full relative accuracy.
* Binomial sums of the Poisson-subsampling theorems are evaluated as A - 1 = sum_{l >= 2} w_l
  expm1((l - 1) eps(l)) (all terms non-negative, the "expm1 form" of docs/derivations/subsampling.md), then
  log1p.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._numerics import log_expm1_scalar

_SQRT1_2 = 0.7071067811865476
_HALF_LOG_2PI = 0.9189385332046728
_LOG2 = 0.6931471805599453
_INF = math.inf


@njit(cache=True)
def log_ndtr(z: float) -> float:
    """log Phi(z) for real z (standard normal CDF), full relative accuracy; -inf at z = -inf."""
    if z != z:
        return z
    if z >= 0.0:
        return math.log1p(-0.5 * math.erfc(z * _SQRT1_2))
    if z > -37.0:
        return math.log(0.5 * math.erfc(-z * _SQRT1_2))
    if z == -_INF:
        return -_INF
    # asymptotic series: Phi(z) = phi(z)/(-z) * (1 - 1/z^2 + 3/z^4 - 15/z^6 + ...); |z| >= 37, so
    # 12 terms leave a truncation error below 1e-30 relative.
    x = 1.0 / (z * z)
    term = 1.0
    acc = 1.0
    for n in range(1, 13):
        term *= -(2 * n - 1) * x
        acc += term
    return -0.5 * z * z - math.log(-z) - _HALF_LOG_2PI + math.log(acc)


@njit(cache=True)
def log_ndtr_array(z: np.ndarray) -> np.ndarray:
    out = np.empty(z.shape[0])
    for i in range(z.shape[0]):
        out[i] = log_ndtr(z[i])
    return out


@njit(cache=True)
def log_expm1mx(y: float) -> float:
    """log(e^y - 1 - y) for real y (-inf at y = 0), full relative accuracy."""
    if y == 0.0:
        return -_INF
    if y == _INF or y == -_INF:
        return _INF
    ay = abs(y)
    if ay < 0.1:
        # e^y - 1 - y = (y^2/2) * sum_{n>=0} 2 y^n / (n+2)!
        s = 0.0
        c = 2.0 / 3628800.0  # 2/10!
        for n in range(8, 0, -1):
            s = (s + c) * y
            c *= (n + 2)
        s += 1.0
        return 2.0 * math.log(ay) - _LOG2 + math.log(s)
    if y > 30.0:
        return y + math.log1p(-(1.0 + y) * math.exp(-y))
    return math.log(math.expm1(y) - y)


@njit(cache=True)
def _logaddexp(a: float, b: float) -> float:
    if a == -_INF:
        return b
    if b == -_INF:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@njit(cache=True)
def _log1p_exp(x: float) -> float:
    """log(1 + e^x)."""
    if x < 0.0:
        return math.log1p(math.exp(x))
    return x + math.log1p(math.exp(-x))


@njit(cache=True)
def atom_const(la: float, lb: float) -> float:
    """alpha-independent part log(a * expm1mx(-r)), r = la - lb, of one atom's term (see module doc)."""
    if la == -_INF:
        return -_INF
    return la + log_expm1mx(-(la - lb))


@njit(cache=True)
def atom_log_term(beta: float, logbeta: float, la: float, lb: float, cst: float) -> float:
    """log of a * [expm1mx(beta r) + beta expm1mx(-r)] (r = la - lb); +inf if b = 0 < a."""
    if la == -_INF:
        # a = 0: the atom contributes b * beta
        return logbeta + lb
    if lb == -_INF:
        return _INF
    r = la - lb
    if r == 0.0:
        return -_INF
    return _logaddexp(la + log_expm1mx(beta * r), logbeta + cst)


@njit(cache=True)
def binary_rdp(beta: float, lp: float, lpb: float, lq: float, lqb: float,
               cp: float, cpb: float) -> float:
    """D_{1+beta}(Bern(p) || Bern(q)) from logs of p, 1-p, q, 1-q and the atom constants.

    ``beta = alpha - 1`` in (0, inf); ``beta = inf`` gives the max-divergence.
    """
    if beta == _INF:
        v = -_INF
        if lp > -_INF:
            v = lp - lq
        if lpb > -_INF:
            v = max(v, lpb - lqb)
        return max(v, 0.0)
    logbeta = math.log(beta)
    t1 = atom_log_term(beta, logbeta, lp, lq, cp)
    t2 = atom_log_term(beta, logbeta, lpb, lqb, cpb)
    ls = _logaddexp(t1, t2)
    if ls == _INF:
        return _INF
    if ls == -_INF:
        return 0.0
    return _log1p_exp(ls) / beta


@njit(cache=True)
def expm1mx(y: float) -> float:
    """e^y - 1 - y >= 0 in linear space (series for |y| < 0.1, full relative accuracy)."""
    if abs(y) < 0.1:
        s = 0.0
        c = 2.0 / 3628800.0
        for n in range(8, 0, -1):
            s = (s + c) * y
            c *= (n + 2)
        return 0.5 * y * y * (s + 1.0)
    if y < -700.0:
        return -1.0 - y
    return math.expm1(y) - y


@njit(cache=True)
def mixture_pairs(lp: np.ndarray, lpb: np.ndarray, lq: np.ndarray, lqb: np.ndarray, gamma: float):
    """logs of p' = (1-gamma) q + gamma p and 1 - p' (stable log-ratio form, see log_mix_ratio)."""
    n = lp.shape[0]
    lm = np.empty(n)
    lmb = np.empty(n)
    lg = math.log(gamma)
    l1g = math.log1p(-gamma) if gamma < 1.0 else -_INF
    for i in range(n):
        r1 = lp[i] - lq[i] if lp[i] > -_INF else -_INF
        r2 = lpb[i] - lqb[i] if lpb[i] > -_INF else -_INF
        lm[i] = lq[i] + log_mix_ratio(r1, lg, l1g, gamma)
        lmb[i] = lqb[i] + log_mix_ratio(r2, lg, l1g, gamma)
    return lm, lmb


@njit(cache=True)
def max_binary_kl(lp: np.ndarray, lpb: np.ndarray, lq: np.ndarray, lqb: np.ndarray) -> float:
    """max over pairs of KL(Bern(p) || Bern(q)) = alpha -> 1 limit, via the same non-negative terms.

    KL = sum over atoms of a * expm1mx(-r) ... written as b * [(1+u) log(1+u) - u] >= 0.
    """
    best = 0.0
    for j in range(lp.shape[0]):
        t1 = _kl_atom(lp[j], lq[j])
        t2 = _kl_atom(lpb[j], lqb[j])
        tot = t1 + t2
        if tot > best:
            best = tot
    return best


@njit(cache=True)
def _kl_atom(la: float, lb: float) -> float:
    """a log(a/b) - a + b = a expm1mx(-r) >= 0 (one atom of the KL divergence)."""
    if la == -_INF:
        return math.exp(lb)
    if lb == -_INF:
        return _INF
    r = la - lb
    if r == 0.0:
        return 0.0
    return math.exp(la + log_expm1mx(-r))


@njit(cache=True)
def log_mix_ratio(r: float, loggamma: float, log1mgamma: float, gamma: float) -> float:
    """log((1 - gamma) + gamma e^r): log-ratio of the mixture (1-gamma) q + gamma p to q (r = log p/q)."""
    if r == -_INF:
        return log1mgamma
    if r <= 1.0:
        return math.log1p(gamma * math.expm1(r))
    return _logaddexp(log1mgamma, loggamma + r)


# --------------------------------------------------------------------------- Poisson subsampling sums
@njit(cache=True)
def subsampled_cgf_int(orders: np.ndarray, gamma: float, log_em1: np.ndarray, general: bool) -> np.ndarray:
    """Poisson-subsampled CGF K(a) = (a-1) eps_sub(a) at the integer orders ``orders`` (each >= 2).

    ``log_em1[l]`` = log expm1((l - 1) eps(l)) of the base mechanism for l = 2..max(orders)
    (entries 0, 1 unused).  Tight form (Zhu & Wang 2019; Zhu 2023 thesis, Thms 2.3.2/2.3.4):
        A(a) - 1 = sum_{l=2..a} C(a, l) (1-gamma)^{a-l} gamma^l expm1((l-1) eps(l)),
    a sum of non-negative terms (the l = 0, 1 terms of the binomial identity cancel exactly), and
    K(a) = log1p(A(a) - 1).  General form (``general=True``, thesis Thm 2.3.1): the
    l >= 3 terms use 3 e^{(l-1) eps(l)} - 1 = 2 + 3 expm1(...) instead.  Cost: sum of the orders.
    Rounded up by a bound on the floating point of the sum (below; ``log_em1``'s own rounding, 4 ulps of
    its magnitude, included), the base curve's values taken as upper bounds.
    """
    nord = orders.shape[0]
    out = np.zeros(nord)
    if gamma <= 0.0 or nord == 0:
        return out
    amax = 2
    for i in range(nord):
        if orders[i] > amax:
            amax = orders[i]
    lg = math.log(gamma)
    l1g = math.log1p(-gamma) if gamma < 1.0 else -_INF
    logint = np.zeros(amax + 2)
    for i in range(1, amax + 2):
        logint[i] = math.log(i)
    buf = np.empty(amax + 1)
    log2 = math.log(2.0)
    log3 = math.log(3.0)
    for i in range(nord):
        a = orders[i]
        logc = logint[a] + logint[a - 1] - log2  # log C(a, 2)
        m = -_INF
        nb = 0
        for ll in range(2, a + 1):
            if ll > 2:
                logc += logint[a - ll + 1] - logint[ll]
            if a - ll > 0:
                lw = logc + (a - ll) * l1g + ll * lg
            else:
                lw = logc + ll * lg
            if general and ll >= 3:
                v = lw + _logaddexp(log2, log3 + log_em1[ll])
            else:
                v = lw + log_em1[ll]
            buf[nb] = v
            nb += 1
            if v > m:
                m = v
        if m == -_INF:
            out[i] = 0.0
            continue
        if m == _INF:
            out[i] = _INF
            continue
        acc = 0.0
        lem = 0.0  # (the largest finite |log_em1| among the summands' inputs)
        for j in range(nb):
            acc += math.exp(buf[j] - m)
            x = abs(log_em1[j + 2])
            if x < _INF and x > lem:
                lem = x
        # rounded up: log C(a, l) by its recurrence carries <= 2 ulps of the running value per step (<= 2 a
        # u lgamma(a + 1) after a steps: |log C| <= log a! and each logint within half an ulp), the products
        # with log(1 - gamma), log gamma 2 ulps of a |log(1 - gamma)|, a |log gamma|, the base's log_em1 (and
        # the general form's logaddexp) 4 ulps of its magnitude plus 2, the additions one ulp each of the
        # summand's size; exp(v - m) 2 ulps plus |v - m| u (<= 1/e per summand, relative to acc >= 1), the
        # sum (n + 2) ulps, log, the sum m + log and log1p(e^x) one ulp each, and x within err moves it by
        # at most err (its slope <= 1)
        mag = math.lgamma(a + 1.0) + a * (abs(lg) + (abs(l1g) if l1g > -_INF else 0.0)) + lem + 3.0
        err = (2.0 * a + 16.0) * 2.0 ** -53 * mag + (3.0 * a + 3.0) * 2.0 ** -53
        x = m + math.log(acc)
        x += err + 2.0 ** -52 * (abs(x) + abs(m) + 1.0)
        v = _log1p_exp(x)
        out[i] = np.nextafter(v * (1.0 + 4.0 * 2.0 ** -53), np.inf)
    return out


@njit(cache=True)
def gaussian_log_em1(amax: int, c: float) -> np.ndarray:
    """log expm1((l-1) eps(l)) for the Gaussian eps(l) = c l, l = 0..amax."""
    out = np.full(amax + 1, -_INF)
    for ll in range(2, amax + 1):
        out[ll] = log_expm1_scalar((ll - 1.0) * ll * c)
    return out
