"""Compiled kernels of the integer-valued noise mechanisms (:mod:`mechanisms.discrete`).

* ``atoms_log_mgf``: log sum_i exp(logw_i + s l_i) for complex s, one max-shift per node (no temporaries
  of size atoms x nodes; the lattice mechanisms have up to ~2.6e5 atoms);
* ``atoms_log_mgf_real``: the same at one real s;
* ``atoms_log1p_expm1``: log sum_i w_i e^{s l_i} as log1p(sum_i w_i expm1(s l_i)) when sum_i w_i = 1
  (accurate as s -> 0, where the RDP curve divides by s);
* ``bessel_backward``: Miller's backward recurrence for I_m(z) (Skellam pmf), all terms positive.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def atoms_log_mgf(s_re: np.ndarray, s_im: np.ndarray, losses: np.ndarray,
                  logw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """(Re, Im) of log sum_i exp(logw_i + s l_i) for every complex s = s_re + i s_im (1-d arrays)."""
    n = losses.shape[0]
    re = np.empty(s_re.shape[0])
    im = np.empty(s_re.shape[0])
    for j in range(s_re.shape[0]):
        c, t = s_re[j], s_im[j]
        m = -np.inf
        for i in range(n):
            v = logw[i] + c * losses[i]
            if v > m:
                m = v
        if m == -np.inf:
            re[j] = -np.inf
            im[j] = 0.0
            continue
        acc_r = 0.0
        acc_i = 0.0
        for i in range(n):
            a = math.exp(logw[i] + c * losses[i] - m)
            ph = t * losses[i]
            acc_r += a * math.cos(ph)
            acc_i += a * math.sin(ph)
        mod = math.hypot(acc_r, acc_i)
        re[j] = m + (math.log(mod) if mod > 0.0 else -np.inf)
        im[j] = math.atan2(acc_i, acc_r)
    return re, im


@njit(cache=True)
def atoms_log_mgf_real(c: float, losses: np.ndarray, logw: np.ndarray) -> float:  # pragma: no cover
    """log sum_i exp(logw_i + c l_i) for one real c (max-shifted)."""
    m = -np.inf
    for i in range(losses.shape[0]):
        v = logw[i] + c * losses[i]
        if v > m:
            m = v
    if m == -np.inf:
        return -np.inf
    acc = 0.0
    for i in range(losses.shape[0]):
        acc += math.exp(logw[i] + c * losses[i] - m)
    return m + math.log(acc)


@njit(cache=True)
def atoms_log1p_expm1(s: float, losses: np.ndarray, w: np.ndarray) -> tuple[float, float]:  # pragma: no cover
    """(log1p(sum_i w_i expm1(s l_i)), sum_i w_i |expm1(s l_i)|) for real s (masses w summing to 1).

    The second value bounds the rounding: the sum is off by at most ~(n + 2) u times it.
    """
    acc = 0.0
    mag = 0.0
    for i in range(losses.shape[0]):
        v = w[i] * math.expm1(s * losses[i])
        acc += v
        mag += abs(v)
    if acc <= -1.0:
        return -np.inf, mag
    return math.log1p(acc), mag


@njit(cache=True)
def bessel_backward(z: float, n_top: int, start_ratio: float) -> np.ndarray:  # pragma: no cover - compiled
    """log J_m for m = 0..n_top, J proportional to I_m(z) (Miller's backward recurrence).

    J_{n_top} = 1, J_{n_top + 1} = ``start_ratio`` (a value of I_{n+1}/I_n at n = n_top), then
    J_{m-1} = (2m / z) J_m + J_{m+1}: additions of non-negative terms only, so every step adds at most
    ~3 ulps of relative error; the values are rescaled (by exact powers of two) before they overflow.
    The result depends monotonically on ``start_ratio`` (the recurrence is linear with non-negative
    coefficients), which the caller uses to bracket the exact ratios.
    """
    out = np.empty(n_top + 1)
    jp1 = start_ratio  # J_{m+1}
    jm = 1.0  # J_m
    log_scale = 0.0
    out[n_top] = 0.0
    for m in range(n_top, 0, -1):
        jm1 = (2.0 * m / z) * jm + jp1
        jp1 = jm
        jm = jm1
        if jm > 1e250:
            jm *= 2.0 ** -800
            jp1 *= 2.0 ** -800
            log_scale += 800.0 * math.log(2.0)
        out[m - 1] = math.log(jm) + log_scale
    return out
