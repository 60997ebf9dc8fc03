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
    """[a, b] on [mu/2, inf) outside which the real log-integrand f(x) = -x^2/2 + wr l(x) is below its
    maximum minus ``span``, and that maximum.

    f'(x) = -x + wr l'(x) < 0 for x > max(0, wr mu) (l' <= mu), so the maximum lies in
    [mu/2, x_0], x_0 = max(mu/2, wr mu) + 1; it is located on a grid of step 1/8 there, the window's ends
    are the first and last grid points above fmax - span (one step of margin), and beyond x_0 the window
    is extended until f (decreasing there) drops below fmax - span.
    """
    a0 = 0.5 * mu
    x0 = max(a0, wr * mu) + 1.0
    n = int(math.ceil((x0 - a0) * 8.0)) + 1
    fmax = -np.inf
    for i in range(n + 1):
        x = a0 + (x0 - a0) * i / n
        f = _logf(x, wr, lq, l1q, mu)
        if f > fmax:
            fmax = f
    a = x0
    for i in range(n + 1):
        x = a0 + (x0 - a0) * i / n
        if _logf(x, wr, lq, l1q, mu) > fmax - span:
            a = max(a0, x - (x0 - a0) / n)
            break
    b = x0
    step = 0.25
    while _logf(b, wr, lq, l1q, mu) > fmax - span:
        b += step
        step *= 1.25
    return a, b, fmax


@njit(cache=True)
def half_line_log_j(w_re, w_im, q, mu, span):  # pragma: no cover - compiled
    """log J(w) for arrays of complex w = w_re + i w_im (see the module docstring); returns (re, im).

    Panels of 10 Gauss-Legendre nodes, walked from a to b with length
    h = min(1/2, 3 / (|Im w| l'(x + 1/2)), 2 / sqrt(1 + |Re w| mu^2 / 4)):
    the phase Im(w) l(x) turns by at most 3 radians per panel (l' is increasing), and the curvature of
    the log-magnitude (at most 1 + |Re w| mu^2 / 4, as l'' <= mu^2 / 4) stays small on a panel.
    """
    n = w_re.shape[0]
    out_re = np.empty(n)
    out_im = np.empty(n)
    lq = math.log(q)
    l1q = math.log1p(-q)
    for j in range(n):
        wr = w_re[j]
        wi = w_im[j]
        a, b, fmax = _range(wr, lq, l1q, mu, span)
        hcurv = 2.0 / math.sqrt(1.0 + abs(wr) * mu * mu / 4.0)
        acc_re = 0.0
        acc_im = 0.0
        x = a
        while x < b:
            h = min(0.5, hcurv)
            if wi != 0.0:
                h = min(h, 3.0 / (abs(wi) * _dell(x + 0.5, lq, l1q, mu) + 1e-300))
            if x + h > b:
                h = b - x
            for g in range(10):
                xg = x + (0.5 + 0.5 * _GX[g]) * h
                ell = _ell(xg, lq, l1q, mu)
                mag = math.exp(-0.5 * xg * xg - _HALF_LOG_2PI + wr * ell - fmax) * _GW[g] * 0.5 * h
                acc_re += mag * math.cos(wi * ell)
                acc_im += mag * math.sin(wi * ell)
            x += h
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
