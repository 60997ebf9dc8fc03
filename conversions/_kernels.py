"""numba kernels of the characteristic-function route (hot loops only; the math lives in contour.py)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def trapezoid_sum(t, r_re, r_im, c, eps):  # pragma: no cover - compiled
    """Sum_{n>=0}' Re[R_n e^{-i t_n eps} / ((c + i t_n)(c + 1 + i t_n))] and the sum of moduli.

    The n = 0 term has weight 1/2 (one side of a symmetric trapezoid rule; the integrand at -t is the
    complex conjugate).  Returns (signed sum, absolute sum); the caller multiplies by h / pi.
    """
    s = 0.0
    sa = 0.0
    cc = c * (c + 1.0)
    b = 2.0 * c + 1.0
    for n in range(t.shape[0]):
        tn = t[n]
        zr = cc - tn * tn
        zi = tn * b
        den = zr * zr + zi * zi
        ph = tn * eps
        co = math.cos(ph)
        si = math.sin(ph)
        wr = r_re[n] * co + r_im[n] * si
        wi = r_im[n] * co - r_re[n] * si
        val = (wr * zr + wi * zi) / den
        mag = math.sqrt((r_re[n] * r_re[n] + r_im[n] * r_im[n]) / den)
        if n == 0:
            val *= 0.5
            mag *= 0.5
        s += val
        sa += mag
    return s, sa


@njit(cache=True)
def atoms_log_delta(losses, logw, eps):  # pragma: no cover - compiled
    """log sum_i w_i (1 - e^{eps - l_i})_+ (``-inf`` if no atom lies above eps)."""
    m = -np.inf
    n = losses.shape[0]
    vals = np.empty(n)
    for i in range(n):
        if losses[i] > eps:
            vals[i] = logw[i] + math.log(-math.expm1(eps - losses[i]))
            if vals[i] > m:
                m = vals[i]
        else:
            vals[i] = -np.inf
    if m == -np.inf:
        return -np.inf
    acc = 0.0
    for i in range(n):
        if vals[i] > -np.inf:
            acc += math.exp(vals[i] - m)
    return m + math.log(acc)


def warm_up() -> None:
    """Compile (or load from cache) every kernel once."""
    t = np.linspace(0.0, 1.0, 4)
    trapezoid_sum(t, np.ones(4), np.zeros(4), 0.5, 0.1)
    atoms_log_delta(np.array([1.0, -1.0]), np.array([-0.5, -1.5]), 0.2)
