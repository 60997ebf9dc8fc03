"""Exact convolution of atoms on a common lattice (discrete Gaussian / Laplace, randomized response).

Privacy losses of integer-valued noise lie on a lattice l = l0 + h n (n integer): the discrete Gaussian's
(Delta^2 - 2 Delta x) / (2 sigma^2) has h = Delta / sigma^2.  The product of two such atom sets is again
on the lattice, with at most n_a + n_b - 1 points, so instead of the outer product (n_a n_b atoms, then
a sort to merge equal losses) the masses are convolved directly:

    log w_out[n] = M_n + log sum_i exp(log w_a[i] + log w_b[n - i] - M_n),   M_n = max_i (...),

a sum of non-negative terms per output (relative rounding <= (terms + 3) ulps, no FFT and no
cancellation), in O(n_a n_b) time and O(n_a + n_b) memory.

Floating point: the given losses are only approximately on the lattice; their largest deviation from
l0 + h n (measured) is added to ``loss_err`` together with the rounding of l0 + h n, so the bracket of
:func:`conversions.atoms.log_delta_bounds` still covers the exact composition.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_U = 2.0 ** -53
LATTICE_TOL = 1e-9  # relative deviation from the lattice accepted (measured and carried as loss_err)
MAX_SPAN = 4_000_000  # lattice points of one operand
MAX_WORK = 5e8  # n_a n_b pair terms per convolution


def lattice_of(losses: np.ndarray,
               step: float | None = None) -> tuple[float, float, np.ndarray, float] | None:
    """(l0, h, n, dev): losses = l0 + h n + e with integers n >= 0, |e| <= dev; None if not a lattice.

    ``step`` forces h (to put a second operand on the first one's lattice).
    """
    if losses.size < 2:
        return None
    lo = float(np.min(losses))
    if step is None:
        u = np.unique(losses)
        if u.size < 2:
            return None
        d = np.diff(u)
        h = float(np.min(d))
        if not h > 0.0:
            return None
    else:
        h = float(step)
    span = (float(np.max(losses)) - lo) / h
    if not math.isfinite(span) or span > MAX_SPAN:
        return None
    n = np.rint((losses - lo) / h)
    if step is None and float(np.max(n)) > 1.0:
        # refine the step by least squares (the smallest gap carries the losses' rounding)
        nn = float(np.dot(n, n))
        h = float(np.dot(n, losses - lo)) / nn if nn > 0 else h
        n = np.rint((losses - lo) / h)
    dev = float(np.max(np.abs(losses - (lo + h * n))))
    scale = 1.0 + float(np.max(np.abs(losses)))
    if dev > LATTICE_TOL * scale or dev > 0.01 * h:
        return None
    return lo, h, n.astype(np.int64), dev


@njit(cache=True)
def _dense(n: np.ndarray, logw: np.ndarray, size: int) -> np.ndarray:  # pragma: no cover - compiled
    out = np.full(size, -np.inf)
    for i in range(n.shape[0]):
        j = n[i]
        a, b = out[j], logw[i]
        if a == -np.inf:
            out[j] = b
        else:  # equal losses in one operand: merge (log-add)
            m = max(a, b)
            out[j] = m + math.log(math.exp(a - m) + math.exp(b - m))
    return out


@njit(cache=True)
def _log_convolve(la: np.ndarray, lb: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """log sum_i exp(la[i] + lb[k - i]) for k = 0 .. len(la) + len(lb) - 2 (max-shifted per output)."""
    na, nb = la.shape[0], lb.shape[0]
    out = np.full(na + nb - 1, -np.inf)
    for k in range(na + nb - 1):
        i0 = max(0, k - nb + 1)
        i1 = min(na - 1, k)
        m = -np.inf
        for i in range(i0, i1 + 1):
            v = la[i] + lb[k - i]
            if v > m:
                m = v
        if m == -np.inf:
            continue
        acc = 0.0
        for i in range(i0, i1 + 1):
            v = la[i] + lb[k - i]
            if v > -np.inf:
                acc += math.exp(v - m)
        out[k] = m + math.log(acc)
    return out
