"""An upper bound on the privacy profile of T Poisson-subsampled Gaussian steps by conditioning on the
number of sampled steps (add/remove relation, both directions).

With K ~ Binomial(T, q) the number of steps whose batch holds the differing record and mu = Delta /
sigma, the remove pair of the composition is P = sum_k Bin(k; T, q) P_k against Q, where P_k is the
average, over the C(T, k) sets S of k steps, of N(mu 1_S, I) and Q = N(0, I) (unit noise scale).  The
hockey-stick divergence H_eps(A || B) = sup_E A(E) - e^eps B(E) is jointly convex, so

    delta(eps) = H_eps(sum_k w_k P_k || sum_k w_k Q) <= sum_k w_k H_eps(P_k || Q)
               <= sum_k w_k delta_G(eps; sqrt(k) mu),                                           (*)

with delta_G(eps; m) = Phi(-eps/m + m/2) - e^eps Phi(-eps/m - m/2) the profile of a Gaussian shift of
norm m (Balle & Wang 2018, Thm 8; a shift of norm sqrt(k) mu is sqrt(k) mu-GDP) and delta_G(eps; 0) =
(1 - e^eps)_+.  The add pair (Q against P) gives the same bound (joint convexity the other way round
and the symmetry of the Gaussian profile).  (*) drops the amplification by the mixing over K, so it is
an **upper bound only**: loose where that amplification matters (sigma around 1 and above), nearly
tight where it does not -- tiny sigma, where a sampled step's loss ~ 1/(2 sigma^2) dwarfs log(1/q):
q = 0.01, sigma = 0.00985, T = 1000, delta = 1e-5: 1.34e5 where the discretised PLD, its grid capped by
the loss span, certified 1.0e6 and RDP 5.2e6.  Generic (no seed): conditioning on the batch count plus
joint convexity of f-divergences.

Certified in floating point: the binomial weights are upper bounds (lgamma with a generous relative
allowance), delta_G is evaluated at mu_k rounded up (it is increasing in the shift) by
:func:`conversions.gaussian_dp.gaussian_log_delta_upper_array` (``log_ndtr`` to 16 ulps), the sum
carries a 1e-9 relative allowance, and the counts outside the summed window [k_lo, k_hi] are bounded by
Chernoff's binomial tails: the upper tail with delta_G <= 1, the lower tail with delta_G at k_lo (the
profile grows with k).
"""

from __future__ import annotations

import bisect
import math

import numpy as np
from scipy.special import gammaln

from .gaussian_dp import gaussian_log_delta_upper_array

_U = 2.0 ** -53
#: at most this many sample counts are summed (bounded work; a ledger needing more is declined)
MAX_TERMS = 1 << 16
#: the counts outside the window may add at most this fraction of the target delta
TAIL_FRACTION = 1e-6
#: relative allowance for the rounding of the sum (far above its n u for n <= MAX_TERMS terms)
SUM_SLACK = 1e-9


def _check(q: float, mu: float, steps: int) -> tuple[float, float, int]:
    if isinstance(q, bool) or not isinstance(q, int | float) or not (0.0 <= q <= 1.0):
        raise ValueError(f"sample_rate must lie in [0, 1], got {q!r}")
    if isinstance(mu, bool) or not isinstance(mu, int | float) or not (0.0 < mu < math.inf):
        raise ValueError(f"mu must be a positive finite number, got {mu!r}")
    if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
    return float(q), float(mu), int(steps)


def _log_tail(steps: int, q: float, m: float) -> float:
    """log of a bound on P(K >= m) (m >= T q) or P(K <= m) (m <= T q), K ~ Bin(T, q): Chernoff's
    exp(-T D(m/T || q)), D the binary relative entropy, with an allowance for its rounding; 0 (the
    trivial bound 1) when m is on the other side of the mean."""
    a = m / steps
    if q == 0.0:
        return 0.0 if m <= 0 else -math.inf
    if q == 1.0:
        return 0.0 if m >= steps else -math.inf
    if a <= 0.0:  # P(K <= 0) = (1 - q)^T, rounded up
        v = steps * math.log1p(-q)
        return v + 4.0 * _U * abs(v)
    if a >= 1.0:  # P(K >= T) = q^T, rounded up
        v = steps * math.log(q)
        return v + 4.0 * _U * abs(v)
    t1 = a * math.log(a / q)
    t2 = (1.0 - a) * math.log1p((q - a) / (1.0 - q))
    d = t1 + t2
    if d <= 0.0:
        return 0.0
    return -steps * d + 16.0 * _U * steps * (abs(t1) + abs(t2)) + 1e-12


def _log_pmf_upper(steps: int, q: float, ks: np.ndarray) -> np.ndarray:
    """Upper bounds on log Bin(k; T, q) for the counts ``ks`` (lgamma with a relative allowance of
    1e-12 of the largest lgamma, and 16 ulps of the power terms)."""
    if q == 0.0:
        return np.where(ks == 0, 0.0, -np.inf)
    if q == 1.0:
        return np.where(ks == steps, 0.0, -np.inf)
    lq, l1q = math.log(q), math.log1p(-q)
    lgt = math.lgamma(steps + 1.0)
    body = ks * lq + (steps - ks) * l1q
    lc = lgt - gammaln(ks + 1.0) - gammaln(steps - ks + 1.0)
    return lc + body + 1e-12 * (1.0 + lgt) + 16.0 * _U * (np.abs(ks * lq) + np.abs((steps - ks) * l1q))


class CountBound:
    """delta(eps) <= :meth:`delta_upper` (eq. (*) of the module docstring) for ``steps`` uses of the
    Poisson-subsampled Gaussian with rate ``q`` and mu = sensitivity / sigma, summing the counts whose
    binomial tails are above ``tail`` (the caller's budget for the neglected counts)."""

    def __init__(self, q: float, mu: float, steps: int, tail: float):
        q, mu, steps = _check(q, mu, steps)
        self.q, self.mu, self.steps = q, mu, steps
        log_tail = math.log(max(tail, 1e-300))
        mean = steps * q
        # the window: the upper tail P(K > k_hi) and the lower one P(K < k_lo) below ``tail``
        k_hi = self._edge(math.ceil(mean), steps, lambda m: _log_tail(steps, q, m + 1.0) <= log_tail)
        k_lo = 0 if mean < 1.0 else self._edge(
            math.floor(mean), 0, lambda m: m <= 0 or _log_tail(steps, q, m - 1.0) <= log_tail)
        if k_hi - k_lo + 1 > MAX_TERMS:
            raise ValueError(f"the count bound would sum {k_hi - k_lo + 1} sample counts (more than "
                             f"{MAX_TERMS}): too many steps at this sample rate")
        self.k_lo, self.k_hi = k_lo, k_hi
        self.ks = np.arange(k_lo, k_hi + 1, dtype=float)
        self.log_w = _log_pmf_upper(steps, q, self.ks)
        # shifts sqrt(k) mu rounded up (delta_G grows with the shift): two roundings and the sqrt
        self.mus = np.sqrt(self.ks) * mu * (1.0 + 4.0 * _U)
        self.tail_hi = math.exp(min(_log_tail(steps, q, k_hi + 1.0), 0.0)) if k_hi < steps else 0.0
        self.tail_lo = math.exp(min(_log_tail(steps, q, k_lo - 1.0), 0.0)) if k_lo > 0 else 0.0

    @staticmethod
    def _edge(start: int, stop: int, ok) -> int:
        """The first m from ``start`` towards ``stop`` with ok(m), by bisection (ok is monotone along the
        way, false then true; ``stop`` when none is ok)."""
        step = 1 if stop >= start else -1
        span = range(start, stop + step, step)
        return span[min(bisect.bisect_left(span, True, key=ok), len(span) - 1)]

    def log_terms(self, eps: float) -> np.ndarray:
        """Upper bounds on log(w_k delta_G(eps; sqrt(k) mu)) over the window."""
        out = np.full(self.ks.shape, -np.inf)
        pos = self.ks > 0
        if np.any(pos):
            out[pos] = self.log_w[pos] + gaussian_log_delta_upper_array(eps, self.mus[pos])
        if not pos[0] and eps < 0.0:  # k = 0: delta_G(eps; 0) = 1 - e^eps
            out[0] = self.log_w[0] + math.log(-math.expm1(eps)) + 4.0 * _U
        return out

    def delta_upper(self, eps: float) -> float:
        """A certified upper bound on delta(eps) (every real eps)."""
        lt = self.log_terms(eps)
        top = float(np.max(lt))
        body = 0.0 if top == -math.inf else math.exp(top) * float(np.sum(np.exp(lt - top)))
        body *= 1.0 + SUM_SLACK
        low = 0.0
        if self.tail_lo > 0.0:
            lg = float(gaussian_log_delta_upper_array(eps, self.mus[:1])[0])
            low = self.tail_lo * math.exp(min(lg, 0.0))
        return min(1.0, math.nextafter((body + self.tail_hi + low) * (1.0 + 4.0 * _U), math.inf))


def delta_upper(eps: float, q: float, mu: float, steps: int) -> tuple[float, dict]:
    """Certified upper bound on delta(eps) of ``steps`` Poisson-subsampled Gaussian steps (add/remove,
    both directions; module docstring).  The counts left out of the sum add at most ~1e-300."""
    if isinstance(eps, bool) or not isinstance(eps, int | float) or math.isnan(eps):
        raise ValueError(f"epsilon must be a real number, got {eps!r}")
    tail = 1e-300
    cb = CountBound(q, mu, steps, tail)
    d = cb.delta_upper(float(eps))
    return d, _details(cb)


def epsilon_upper(delta: float, q: float, mu: float, steps: int) -> tuple[float, dict]:
    """Smallest eps >= 0 (to ~1e-12 relative, rounded up) whose certified :meth:`CountBound.delta_upper`
    is <= ``delta``: an upper bound on epsilon(delta) (module docstring)."""
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    delta = float(delta)
    cb = CountBound(q, mu, steps, TAIL_FRACTION * delta)

    def fits(e: float) -> bool:
        return cb.delta_upper(e) <= delta

    if fits(0.0):
        return 0.0, _details(cb)
    m = float(cb.mus[-1])
    # delta_G(eps; m) <= e^{-(eps - m^2/2)^2 / (2 m^2)}: past this every term is below delta / 4
    hi = 0.5 * m * m + m * math.sqrt(2.0 * math.log(4.0 * (cb.k_hi - cb.k_lo + 1) / delta)) + 1.0
    while not fits(hi):
        hi *= 2.0
        if hi > 1e300:
            return math.inf, _details(cb)
    lo = 0.0
    while hi - lo > 1e-12 * hi:
        mid = 0.5 * (lo + hi)
        if fits(mid):
            hi = mid
        else:
            lo = mid
    return hi, _details(cb)


def _details(cb: CountBound) -> dict:
    return {"route": "count", "counts": [cb.k_lo, cb.k_hi], "tail_upper": cb.tail_hi + cb.tail_lo,
            "bound": "upper only (conditioning on the sample count; no amplification by mixing)"}
