"""Compiled closed-form RDP curves of the two basic pairs, rounded up: the Laplace pair and k-ary
randomized response (Mironov 2017, "Renyi differential privacy", Table II; for k = 2 the tight RDP of
a pure eps-DP mechanism).

The one home of these formulas: :class:`mechanisms.laplace.Laplace`, the lattice mechanisms
(:mod:`mechanisms.lattice`) and the sparse-vector curves (:mod:`mechanisms.svt`) all evaluate them here.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_RDP_ULPS = 64.0 * 2.0 ** -53  # final upward margin of the RDP curves (their rounding is <= ~16 ulps)


@njit(cache=True)
def _exp_rem(y: float) -> float:  # pragma: no cover - compiled
    """e^y - 1 - y >= 0 for real y, to a few ulps relative (series for |y| < 1)."""
    if abs(y) < 1.0:
        term = 0.5 * y * y
        tot = term
        n = 2
        while abs(term) > 1e-18 * tot:
            n += 1
            term *= y / n
            tot += term
        return tot
    return math.expm1(y) - y


@njit(cache=True)
def _round_up(v: float, cap: float) -> float:  # pragma: no cover - compiled
    """v rounded up by the RDP margin, then capped at ``cap`` (a true upper bound of the curve)."""
    if v < 0.0:
        v = 0.0
    v = v * (1.0 + _RDP_ULPS) + 1e-300
    return cap if v > cap else v


@njit(cache=True)
def laplace_rdp_scalar(alpha: float, a: float) -> float:  # pragma: no cover - compiled
    """RDP of the Laplace mechanism with normalised sensitivity a = sens / b (alpha > 1), rounded up.

    Mironov 2017: eps(alpha) = log S / (alpha-1),
    S = [alpha e^{(alpha-1)a} + (alpha-1) e^{-alpha a}]/(2alpha-1).
    With u = alpha - 1 and g(y) = e^y - 1 - y >= 0: S - 1 = [alpha g(u a) + u g(-alpha a)] / (2 alpha - 1),
    a sum of non-negative terms (no cancellation as alpha -> 1 or a -> 0), so
    eps(alpha) = log1p(S - 1) / u.  For u a > 30, the form a + log1p(-u (1 - e^{-(2alpha-1)a})/(2alpha-1))/u
    (no overflow).  Upper bound: a few ulps of margin, capped at eps(inf) = a.
    """
    if a == 0.0:
        return 0.0
    if math.isinf(alpha):
        return a
    u = alpha - 1.0
    w = 2.0 * alpha - 1.0
    if u * a <= 30.0 and alpha * a <= 700.0:
        x = (alpha * _exp_rem(u * a) + u * _exp_rem(-alpha * a)) / w
        return _round_up(math.log1p(x) / u, a)
    e = -math.expm1(-w * a)
    t = math.log1p(-u * e / w) / u
    v = a + t
    return _round_up(v + 8.0 * 2.0 ** -53 * (a + abs(t)), a)


@njit(cache=True)
def rr_k_rdp_scalar(alpha: float, eps: float, k: int) -> float:  # pragma: no cover - compiled
    """RDP of k-ary randomized response RR(eps) (k = 2: the tight RDP of any eps-DP mechanism), rounded up.

    With s = alpha - 1 and Z = e^eps + k - 1 the privacy-loss MGF is
    M(s) = (e^{(s+1)eps} + e^{-s eps} + k - 2)/Z
    and M(s) - 1 = [4 sinh^2(s eps / 2) + expm1(eps) expm1(s eps)] / Z (non-negative terms: accurate
    as alpha -> 1 and for tiny eps), eps(alpha) = log1p(M(s) - 1) / s.  For large s eps or eps, the
    log-sum-exp form (no cancellation there).  Exact up to the upward margin; capped at eps(inf) = eps.
    For k = 2 this equals the "sinh" form of Zhu & Wang 2020.
    """
    if eps == 0.0:
        return 0.0
    if math.isinf(alpha):
        return eps
    s = alpha - 1.0
    se = s * eps
    if se <= 600.0 and eps <= 600.0:
        sh = math.sinh(0.5 * se)
        z = math.exp(eps) + (k - 1.0)
        x = (4.0 * sh * sh + math.expm1(eps) * math.expm1(se)) / z
        return _round_up(math.log1p(x) / s, eps)
    # log-space: log(e^{(s+1)eps} + e^{-s eps} + k - 2) - log Z
    m = eps + se
    tot = 1.0 + math.exp(-se - m)
    if k > 2:
        tot += (k - 2.0) * math.exp(-m)
    lz = eps + math.log1p((k - 1.0) * math.exp(-eps))
    v = (m + math.log(tot) - lz) / s
    return _round_up(v + 8.0 * 2.0 ** -53 * (m + lz) / s, eps)


@njit(cache=True)
def rr_k_curve(alpha: np.ndarray, eps: float, k: int) -> np.ndarray:  # pragma: no cover - compiled
    out = np.empty(alpha.shape[0])
    for i in range(alpha.shape[0]):
        out[i] = rr_k_rdp_scalar(alpha[i], eps, k)
    return out


@njit(cache=True)
def laplace_curve(alpha: np.ndarray, a: float) -> np.ndarray:  # pragma: no cover - compiled
    out = np.empty(alpha.shape[0])
    for i in range(alpha.shape[0]):
        out[i] = laplace_rdp_scalar(alpha[i], a)
    return out
