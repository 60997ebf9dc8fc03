"""numba kernels for the symmetrised fixed-size-batch pair (replace-one): half-line integrals.

The math is documented in :mod:`mechanisms.fixed_size`; these are only the hot loops.  With
l(x) = log(1 - q + q e^{mu x - mu^2/2}) (the loss of the Poisson pair ((1-q) N(0,1) + q N(mu,1), N(0,1))),
which is >= 0 exactly for x >= mu/2, the kernels evaluate

    J(w) = int_{mu/2}^{inf} phi(x) e^{w l(x)} dx        (complex w)

by composite 10-point Gauss-Legendre panels on [mu/2, X], X where the integrand has fallen below e^{-span}
of its maximum (beyond it the integrand is log-concave-dominated: phi(x) e^{Re w l(x)} <= phi(x) e^{Re w
(mu x - mu^2/2 + log q)}_+ ... see ``_upper_end``), with panels short enough to resolve the phase
Im(w) l(x) and the growth Re(w) l(x).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_GX = np.array([-0.9739065285171717, -0.8650633666889845, -0.6794095682990244, -0.4333953941292472,
                -0.1488743389816312, 0.1488743389816312, 0.4333953941292472, 0.6794095682990244,
                0.8650633666889845, 0.9739065285171717])
_GW = np.array([0.0666713443086881, 0.1494513491505806, 0.2190863625159820, 0.2692667193099963,
                0.2955242247147529, 0.2955242247147529, 0.2692667193099963, 0.2190863625159820,
                0.1494513491505806, 0.0666713443086881])
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@njit(cache=True)
def _ell(x, lq, l1q, mu):  # pragma: no cover - compiled
    """l(x) = logaddexp(log(1 - q), log q + mu x - mu^2/2)."""
    y = lq + mu * x - 0.5 * mu * mu
    if y > l1q:
        return y + math.log1p(math.exp(l1q - y))
    return l1q + math.log1p(math.exp(y - l1q))


@njit(cache=True)
def _dell(x, lq, l1q, mu):  # pragma: no cover - compiled
    """l'(x) = mu sigmoid(log q + mu x - mu^2/2 - log(1 - q))."""
    y = lq + mu * x - 0.5 * mu * mu - l1q
    if y > 0:
        return mu / (1.0 + math.exp(-y))
    e = math.exp(y)
    return mu * e / (1.0 + e)


@njit(cache=True)
def _logf(x, wr, lq, l1q, mu):  # pragma: no cover - compiled
    return -0.5 * x * x - _HALF_LOG_2PI + wr * _ell(x, lq, l1q, mu)


@njit(cache=True)
def _range(wr, lq, l1q, mu, span):  # pragma: no cover - compiled
    """[a, b] and the max of the real log-integrand on [mu/2, inf): a = mu/2, b where it has fallen by span.

    The real log-integrand f(x) = -x^2/2 + wr l(x) is concave for wr <= 0 and, for wr > 0, has
    f'' = -1 + wr l''(x) with l'' <= mu^2/4; beyond x_0 = max(a, wr mu) + 1 it is decreasing (l' <= mu
    so f' <= -x + wr mu < 0).  The maximum is located on a grid of [a, x_0] and the end b is found by
    stepping beyond x_0 until f < fmax - span (f is decreasing there).
    """
    a = 0.5 * mu
    x0 = max(a, wr * mu) + 1.0
    n = 400
    fmax = -np.inf
    for i in range(n + 1):
        x = a + (x0 - a) * i / n
        f = _logf(x, wr, lq, l1q, mu)
        if f > fmax:
            fmax = f
    b = x0
    step = 0.25
    while _logf(b, wr, lq, l1q, mu) > fmax - span:
        b += step
        step *= 1.25
    return a, b, fmax


@njit(cache=True)
def half_line_log_j(w_re, w_im, q, mu, span):  # pragma: no cover - compiled
    """log J(w) for arrays of complex w = w_re + i w_im (see the module docstring); returns (re, im)."""
    n = w_re.shape[0]
    out_re = np.empty(n)
    out_im = np.empty(n)
    lq = math.log(q)
    l1q = math.log1p(-q)
    for j in range(n):
        wr = w_re[j]
        wi = w_im[j]
        a, b, fmax = _range(wr, lq, l1q, mu, span)
        # panel length: the phase wi l(x) changes by at most |wi| mu per unit x, the log-magnitude by at
        # most |x| + |wr| mu; keep both below ~1 per panel of 10 nodes (Gauss-Legendre then converges far
        # below 1e-15 relative for these entire integrands)
        rate = abs(wi) * mu + abs(wr) * mu + max(abs(a), abs(b)) + 1.0
        panels = int(math.ceil((b - a) * rate)) + 4
        h = (b - a) / panels
        acc_re = 0.0
        acc_im = 0.0
        for p in range(panels):
            for g in range(10):
                x = a + (p + 0.5 + 0.5 * _GX[g]) * h
                ell = _ell(x, lq, l1q, mu)
                mag = math.exp(-0.5 * x * x - _HALF_LOG_2PI + wr * ell - fmax) * _GW[g] * 0.5 * h
                acc_re += mag * math.cos(wi * ell)
                acc_im += mag * math.sin(wi * ell)
        mod = math.sqrt(acc_re * acc_re + acc_im * acc_im)
        out_re[j] = (math.log(mod) if mod > 0.0 else -np.inf) + fmax
        out_im[j] = math.atan2(acc_im, acc_re)
    return out_re, out_im


@njit(cache=True)
def half_line_tv(c, q, mu, side, npts):  # pragma: no cover - compiled
    """Total variation (plus the end value at l = 0) of the e^{cL}-tilted loss density of one side.

    side +1: the positive part, density g(l) = phi(x) r^{c+1} / l'(x) at l = l(x), x >= mu/2;
    side -1: the negative part (the add pair's loss -l(x) under N(0, 1)), g = phi(x) r^{-c} / l'(x).
    Evaluated on a fine grid in x over [mu/2, b] (b from ``_range``); the caller applies a margin.
    Returns (g(0), TV over the grid, log of the scale used).
    """
    lq = math.log(q)
    l1q = math.log1p(-q)
    wr = c + 1.0 if side > 0 else -c
    a, b, fmax = _range(wr, lq, l1q, mu, 60.0)
    prev = 0.0
    first = 0.0
    tv = 0.0
    for i in range(npts + 1):
        x = a + (b - a) * i / npts
        lg = _logf(x, wr, lq, l1q, mu) - fmax - math.log(_dell(x, lq, l1q, mu))
        g = math.exp(lg) if lg < 700.0 else np.inf
        if i == 0:
            first = g
        else:
            tv += abs(g - prev)
        prev = g
    return first, tv + prev, fmax
