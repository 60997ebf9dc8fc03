"""Small numerical helpers shared by mechanism closed forms (vectorised numpy, log space)."""

from __future__ import annotations

import math

import numpy as np


def complex_logsumexp(log_terms: np.ndarray, axis: int = 0) -> np.ndarray:
    """log(sum(exp(z))) for complex z along ``axis`` with a real max-shift (no overflow).

    The branch of the imaginary part is irrelevant to the accountant: only exp(k * log) with integer
    k is ever used.
    """
    z = np.asarray(log_terms, dtype=complex)
    m = np.max(z.real, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(z - m), axis=axis)) + np.squeeze(m, axis=axis)
    return out


def discrete_log_mgf(s, losses: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """log sum_i w_i exp(s l_i) for complex s (array), finite atoms (l_i, w_i), w_i > 0."""
    s = np.asarray(s, dtype=complex)
    keep = masses > 0
    l, w = losses[keep], masses[keep]
    if l.size == 1:
        return math.log(w[0]) + s * l[0]
    if l.size == 2 and np.all(s.real == s.real.flat[0]):
        # log(w0 e^{s l0} + w1 e^{s l1}) = log w0 + s l0 + log1p(w1/w0 e^{s (l1 - l0)}), the atom with
        # the larger |term| on the line first so that the log1p argument has modulus <= 1
        c = float(s.real.flat[0])
        i, j = (0, 1) if math.log(w[0]) + c * l[0] >= math.log(w[1]) + c * l[1] else (1, 0)
        return math.log(w[i]) + s * l[i] + np.log1p(np.exp(math.log(w[j] / w[i]) + s * (l[j] - l[i])))
    terms = np.log(w)[:, None] + np.multiply.outer(l, s.ravel())
    return complex_logsumexp(terms, axis=0).reshape(s.shape)


def log_expm1(x: np.ndarray) -> np.ndarray:
    """log(exp(x) - 1) for x > 0, stable for tiny and large x; -inf for x <= 0."""
    x = np.asarray(x, dtype=float)
    out = np.full(x.shape, -np.inf)
    pos = x > 0
    big = pos & (x > 30)
    small = pos & ~big
    out[big] = x[big] + np.log1p(-np.exp(-x[big]))
    out[small] = np.log(np.expm1(x[small]))
    return out


def one_minus_exp_over(w) -> np.ndarray:
    """g(w) = (1 - e^{-w}) / w for complex w, with a series near 0 (removable singularity)."""
    w = np.asarray(w, dtype=complex)
    out = np.empty_like(w)
    small = np.abs(w) < 0.1
    ws = w[small]
    # 1 - w/2 + w^2/6 - w^3/24 + ... = sum_{n>=0} (-w)^n / (n+1)!
    acc = np.zeros_like(ws)
    term = np.ones_like(ws)
    for n in range(12):
        acc += term / math.factorial(n + 1)
        term = term * (-ws)
    out[small] = acc
    wl = w[~small]
    out[~small] = (1.0 - np.exp(-wl)) / wl
    return out


def exp_pieces_log_mgf(s, lo: np.ndarray, hi: np.ndarray, logw: np.ndarray,
                       rate: np.ndarray) -> np.ndarray:
    """log sum_q int_{lo_q}^{hi_q} e^{logw_q + rate_q l} e^{s l} dl for complex s (array).

    Each integral is e^{(s + r) hi} (hi - lo) g((s + r)(hi - lo)) with g of :func:`one_minus_exp_over`
    (exact; no cancellation for Re(s + r) >= 0).
    """
    s = np.asarray(s, dtype=complex)
    flat = s.ravel()
    if len(lo) == 1:
        z = s + rate[0]
        width = hi[0] - lo[0]
        return logw[0] + z * hi[0] + math.log(width) + np.log(one_minus_exp_over(z * width))
    terms = []
    for a, b, lw, r in zip(lo, hi, logw, rate, strict=True):
        z = flat + r
        width = b - a
        terms.append(lw + z * b + math.log(width) + np.log(one_minus_exp_over(z * width)))
    return complex_logsumexp(np.array(terms), axis=0).reshape(s.shape)
