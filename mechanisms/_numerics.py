"""Small numerical helpers shared by mechanism closed forms (vectorised numpy, log space)."""

from __future__ import annotations

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
