"""Compiled kernels of the Gaussian-mixture pair (:mod:`mechanisms.mixture`).

Units: the output x is divided by sigma, so Q = N(0, 1) and P = sum_i w_i N(m_i, 1) with m_i >= 0;
g(x) = p(x)/q(x) = sum_i w_i exp(m_i x - m_i^2/2) and L = log g (remove) or -log g (add).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


@njit(cache=True)
def log_g(x: float, logw: np.ndarray, m: np.ndarray) -> float:  # pragma: no cover - compiled
    """log sum_i exp(logw_i + m_i x - m_i^2 / 2) (max-shifted)."""
    mx = -np.inf
    for i in range(m.shape[0]):
        v = logw[i] + m[i] * x - 0.5 * m[i] * m[i]
        if v > mx:
            mx = v
    acc = 0.0
    for i in range(m.shape[0]):
        acc += math.exp(logw[i] + m[i] * x - 0.5 * m[i] * m[i] - mx)
    return mx + math.log(acc)


@njit(cache=True)
def log_g_prime(x: float, logw: np.ndarray, m: np.ndarray) -> float:  # pragma: no cover - compiled
    """log g'(x) = log sum_{m_i > 0} w_i m_i exp(m_i x - m_i^2/2)."""
    mx = -np.inf
    for i in range(m.shape[0]):
        if m[i] > 0.0:
            v = logw[i] + math.log(m[i]) + m[i] * x - 0.5 * m[i] * m[i]
            if v > mx:
                mx = v
    if mx == -np.inf:
        return -np.inf
    acc = 0.0
    for i in range(m.shape[0]):
        if m[i] > 0.0:
            acc += math.exp(logw[i] + math.log(m[i]) + m[i] * x - 0.5 * m[i] * m[i] - mx)
    return mx + math.log(acc)


@njit(cache=True)
def _max_exponent(a: float, logw: np.ndarray, m: np.ndarray, h: float, x_lo: float,
                  n: int) -> float:  # pragma: no cover - compiled
    """max over the nodes x_j = x_lo + j h, j < n, of the real exponent -x^2/2 + a log g(x_j)."""
    mx = -np.inf
    for j in range(n):
        x = x_lo + j * h
        v = -0.5 * x * x + a * log_g(x, logw, m)
        if v > mx:
            mx = v
    return mx


@njit(cache=True)
def trapezoid_log_mgf(c: float, t: float, add: bool, logw: np.ndarray, m: np.ndarray, h: float,
                      x_lo: float, x_hi: float) -> tuple[float, float]:  # pragma: no cover - compiled
    """(Re, Im) of log of h sum_j phi(x_j) g(x_j)^{a + i b} on x_j = x_lo + j h <= x_hi, where the exponent
    is a + ib = 1 + s (remove) or -s (add), s = c + it."""
    if add:
        a, b = -c, -t
    else:
        a, b = 1.0 + c, t
    n = int(math.floor((x_hi - x_lo) / h)) + 1
    mx = _max_exponent(a, logw, m, h, x_lo, n)  # pass 1: the largest real exponent (max shift)
    acc_r = 0.0
    acc_i = 0.0
    for j in range(n):
        x = x_lo + j * h
        lg = log_g(x, logw, m)
        amp = math.exp(-0.5 * x * x + a * lg - mx)
        ph = b * lg
        acc_r += amp * math.cos(ph)
        acc_i += amp * math.sin(ph)
    mod = math.hypot(acc_r, acc_i)
    if mod == 0.0:
        return -np.inf, 0.0
    return mx + math.log(h * mod) - _LOG_SQRT_2PI, math.atan2(acc_i, acc_r)


@njit(cache=True)
def tv_bound(a1: float, logw: np.ndarray, m: np.ndarray, x_l: float, x_r: float, n_cells: int,
             lam: float) -> float:  # pragma: no cover - compiled
    """Upper bound on the total variation of H(x) = phi(x) g(x)^{a1} / g'(x) over R.

    H is increasing on (-inf, x_l] and decreasing on [x_r, inf) (the caller's bounds on (log H)'), so
    those parts contribute H(x_l) and H(x_r).  On [x_l, x_r], with |(log H)''| <= lam, each cell [u, u+d]
    contributes at most d H(u) e^{(|l'(u)| + lam d) d} (|l'(u)| + lam d), l = log H; l'(u) is evaluated
    from its closed form (log H)' = -x + a1 g'/g - g''/g'.
    """
    tot = 0.0
    d = (x_r - x_l) / n_cells
    for k in range(n_cells + 1):
        u = x_l + k * d
        lg = log_g(u, logw, m)
        lgp = log_g_prime(u, logw, m)
        # g''/g' = sum w m^2 e / sum w m e (positive-m components)
        mx = -np.inf
        for i in range(m.shape[0]):
            if m[i] > 0.0:
                v = logw[i] + 2.0 * math.log(m[i]) + m[i] * u - 0.5 * m[i] * m[i]
                if v > mx:
                    mx = v
        acc = 0.0
        for i in range(m.shape[0]):
            if m[i] > 0.0:
                acc += math.exp(logw[i] + 2.0 * math.log(m[i]) + m[i] * u - 0.5 * m[i] * m[i] - mx)
        lgpp = mx + math.log(acc)
        dl = -u + a1 * math.exp(lgp - lg) - math.exp(lgpp - lgp)
        log_h = -0.5 * u * u - _LOG_SQRT_2PI + a1 * lg - lgp
        if k == 0 or k == n_cells:
            tot += math.exp(log_h)  # the monotone outer parts (and a margin at the end cell)
        if k < n_cells:
            sl = abs(dl) + lam * d
            tot += d * math.exp(log_h + sl * d) * sl
    return tot


@njit(cache=True)
def invert_log_g(targets: np.ndarray, logw: np.ndarray, m: np.ndarray,
                 floor: float) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Bracket [lo, hi] of the root of log g(x) = target, with log g increasing and convex, widened by the
    effect of log g's rounding (8 ulps of 1 + |target| divided by a lower bound of the slope g'/g);
    (-inf, -inf) for targets at or below ``floor`` = inf log g.

    Newton (warm-started at the previous root: the targets are usually sorted) converges to the root;
    the bracket is then *verified* by evaluating log g at both ends (and widened until it holds), so it
    is valid whatever the iteration did.  The slope g'/g is non-decreasing (log g convex), so its value
    at the bracket's left end, halved, bounds it below on the bracket.
    """
    n = targets.shape[0]
    lo_out = np.empty(n)
    hi_out = np.empty(n)
    u = 1.1102230246251565e-16
    warm = 0.0
    for k in range(n):
        tg = targets[k]
        if tg <= floor:
            lo_out[k] = -np.inf
            hi_out[k] = -np.inf
            continue
        x = warm
        fx = log_g(x, logw, m)
        step = 0.0
        for _ in range(200):
            slope = math.exp(log_g_prime(x, logw, m) - fx)
            if not slope > 0.0:
                break
            step = (tg - fx) / slope
            if step < -1e3:
                step = -1e3
            x = x + step
            fx = log_g(x, logw, m)
            # converged: the step or the residual is at the rounding level
            if abs(step) <= 4.0 * u * (1.0 + abs(x)) or abs(fx - tg) <= 4.0 * u * (1.0 + abs(tg)):
                step = 0.0
                break
        d = max(16.0 * u * (1.0 + abs(x)), 4.0 * abs(step)) + 1e-300
        lo, hi = x - d, x + d
        dl = d
        while log_g(lo, logw, m) > tg:
            dl *= 4.0
            lo = x - dl
        dh = d
        while log_g(hi, logw, m) < tg:
            dh *= 4.0
            hi = x + dh
        s_lo = 0.5 * math.exp(log_g_prime(lo, logw, m) - log_g(lo, logw, m))
        err = 8.0 * u * (1.0 + abs(tg))
        if s_lo > 0.0:
            lo_out[k] = lo - err / s_lo - 4.0 * u * abs(lo)
            hi_out[k] = hi + err / s_lo + 4.0 * u * abs(hi)
        else:
            lo_out[k] = -np.inf
            hi_out[k] = np.inf
        warm = x
    return lo_out, hi_out


@njit(cache=True)
def trapezoid_log_mgf_many(c: np.ndarray, t: np.ndarray, add: bool, logw: np.ndarray, m: np.ndarray,
                           h: np.ndarray, x_lo: np.ndarray,
                           x_hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover
    """:func:`trapezoid_log_mgf` for arrays of nodes (each with its own plan)."""
    re = np.empty(c.shape[0])
    im = np.empty(c.shape[0])
    for i in range(c.shape[0]):
        re[i], im[i] = trapezoid_log_mgf(c[i], t[i], add, logw, m, h[i], x_lo[i], x_hi[i])
    return re, im


@njit(cache=True)
def abs_x_moment(c: float, add: bool, logw: np.ndarray, m: np.ndarray, h: float, x_lo: float,
                 x_hi: float) -> float:  # pragma: no cover - compiled
    """sum_j a_j |x_j| / sum_j a_j over the trapezoid nodes x_j = x_lo + j h <= x_hi, with the moduli
    a_j = phi(x_j) g(x_j)^a (a = 1 + c remove, -c add) that :func:`trapezoid_log_mgf` sums on every line
    Re s = c (the tilted mean of |x|, for the phase-rounding bound of ``GaussianMixture``)."""
    a = -c if add else 1.0 + c
    n = int(math.floor((x_hi - x_lo) / h)) + 1
    mx = _max_exponent(a, logw, m, h, x_lo, n)
    num = 0.0
    den = 0.0
    for j in range(n):
        x = x_lo + j * h
        amp = math.exp(-0.5 * x * x + a * log_g(x, logw, m) - mx)
        num += amp * abs(x)
        den += amp
    return num / den
