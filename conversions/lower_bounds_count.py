"""Certified lower bound from the threshold-count statistic: tiny noise (the remove direction).

Homogeneous ledger: T Poisson-subsampled Gaussian steps with normalised noise s = sigma / Delta and rate
q.  The statistic N_t = #{j : y_j > t} counts the outputs above a threshold t; the outputs are
independent, so under the remove pair (P = (1 - q) N(0, s^2) + q N(1, s^2) per step, Q = N(0, s^2))

    N_t ~ Bin(T, p1) under P,  N_t ~ Bin(T, p0) under Q,  p0 = Phi(-t/s),  p1 = (1-q) p0 + q Phi((1-t)/s),

and by data processing P(N_t >= n) - e^eps Q(N_t >= n) <= delta(eps) for every t and n.  So
eps(delta) >= log(P(N_t >= n) - delta) - log Q(N_t >= n) whenever P(N_t >= n) > delta.  At tiny s,
where a sampled step's loss ~ 1/(2 s^2) dwarfs log(1/q), the count of outputs near 1 carries almost all
of the information and this is close to the truth (q = 0.01, sigma = 0.00985, T = 1000, delta = 1e-5:
1.287e5 against the sample-count upper bound 1.340e5); at sigma ~ 1 it is weak (the max and sum
statistics of :mod:`conversions.lower_bounds` serve there).  t runs over 1 - z s, z in a grid of
[-7, 9]; the location of the set only affects tightness, never validity.

Floating point (certified): log p0 and log Phi((1 - t)/s) with ``log_ndtr``'s declared error (16 ulps,
``mechanisms._numerics.log_ndtr_bounds``) and the rounding of their arguments; binomial coefficients by
lgamma with a relative allowance of 1e-12 of lgamma(T + 1); P-masses rounded down (the P tail summed
over n..n_max only), Q-masses up (the Q tail past n_max by Chernoff's bound); the result rounded down.
Q(N_t >= n) is kept in log space (it is far below the float range at tiny s).  Source: data processing
inequality (our derivation, as for the max and sum statistics).  Lower bound; the add direction gets none
here (0 / the trivial bound).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import gammaln

from mechanisms._numerics import log_ndtr_bounds

_U = 2.0**-52  # (2 u: generous outward rounding, as in conversions._lower_steps)
#: the statistic is used in "best" mode for homogeneous ledgers with s <= this (mu >= 8)
COUNT_AUTO_MAX_S = 0.125
#: thresholds t = 1 - z s
Z_GRID = np.linspace(-7.0, 9.0, 65)
#: at most this many counts n are summed (a window around T q when T is larger; the Q tail past it is
#: bounded by Chernoff)
MAX_COUNTS = 1 << 14


def _log_tail_upper(steps: int, log_p: float, m: float) -> float:
    """log of a bound on P(Bin(T, p) >= m) for m >= T p (Chernoff, exp(-T D(m/T || p))), with p given
    by an upper bound of its log; 0 (the trivial bound) otherwise."""
    if m > steps:
        return -math.inf
    p = math.exp(log_p)
    a = m / steps
    if not (p < a < 1.0):
        return 0.0 if a <= p else steps * log_p + 1e-12 * (1.0 + abs(steps * log_p))
    t1 = a * (math.log(a) - log_p)
    t2 = (1.0 - a) * math.log1p((p - a) / (1.0 - p))
    d = t1 + t2
    return min(0.0, -steps * d + 16.0 * _U * steps * (abs(t1) + abs(t2)) + 1e-12)


def _log1m_exp(lp: np.ndarray | float):
    """log(1 - e^lp) for lp < 0 (log1p(-e^lp) near 0, log(-expm1(lp)) otherwise)."""
    lp = np.asarray(lp, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(lp < -0.693, np.log1p(-np.exp(lp)), np.log(-np.expm1(lp)))


class CountStatistic:
    """The threshold-count statistic of a homogeneous ledger (remove direction): certified
    log P(N_t >= n) (lower) and log Q(N_t >= n) (upper) for each threshold of ``Z_GRID``."""

    def __init__(self, s: float, q: float, steps: int):
        if not (s > 0.0 and math.isfinite(s)):
            raise ValueError(f"s (sigma / sensitivity) must be positive and finite, got {s!r}")
        if not (0.0 < q <= 1.0):
            raise ValueError(f"sample_rate must lie in (0, 1], got {q!r}")
        if isinstance(steps, bool) or not isinstance(steps, int | np.integer) or steps < 1:
            raise ValueError(f"steps must be an integer >= 1, got {steps!r}")
        self.s, self.q, self.steps = float(s), float(q), int(steps)
        t = int(steps)
        lgt = math.lgamma(t + 1.0)
        # the sets {N_t >= n} tried: n in a window around the sampled count K ~ Bin(T, q) (outside it a
        # set is not considered, which only costs tightness; the P tail is summed over the window, the
        # Q tail too plus Chernoff's bound past it)
        if t + 1 <= MAX_COUNTS:
            n_min, n_max = 0, t
        else:
            sd = math.sqrt(t * q)
            n_min = max(0, int(math.floor(t * q - 10.0 * sd - 10.0)))
            n_max = min(t, int(math.ceil(t * q + 40.0 * sd + 200.0)))
        if n_max - n_min + 1 > MAX_COUNTS:
            raise ValueError("the count statistic would sum too many counts")
        n = np.arange(n_min, n_max + 1, dtype=float)
        lc = lgt - gammaln(n + 1.0) - gammaln(t - n + 1.0)
        lc_err = 1e-12 * (1.0 + lgt)
        self.n = n
        self.log_p_tail_lo = []  # per threshold: log P(N >= n) rounded down, n = n_min..n_max
        self.log_q_tail_hi = []  # per threshold: log Q(N >= n) rounded up
        lq, l1q = math.log(q), math.log1p(-q) if q < 1.0 else -math.inf
        for z in Z_GRID:
            thr = 1.0 - z * s
            a0 = -thr / s
            a1 = (1.0 - thr) / s
            l0, e0 = log_ndtr_bounds(a0, 4.0 * _U * (abs(a0) + 1.0))
            l1, e1 = log_ndtr_bounds(a1, 4.0 * _U * (abs(a1) + 2.0 / s))
            l0, e0, l1, e1 = float(l0), float(e0), float(l1), float(e1)
            # log p1 = logaddexp(log(1-q) + log p0, log q + log Phi(a1)), with its error
            parts = (l1q + l0, lq + l1)
            lp1 = float(np.logaddexp(*parts))
            ep1 = max(e0, e1) + 4.0 * _U * (1.0 + sum(abs(x) for x in parts if math.isfinite(x)))
            lp0_hi, lp1_lo = l0 + e0, lp1 - ep1
            if not (lp0_hi < 0.0 and math.isfinite(lp1_lo)):
                self.log_p_tail_lo.append(np.full(n.shape, -np.inf))
                self.log_q_tail_hi.append(np.zeros(n.shape))
                continue
            # log(1 - p) is decreasing in p: P uses the largest p1, Q the smallest p0
            l1m_p = float(_log1m_exp(min(lp1 + ep1, -1e-300)))
            l1m_q = float(_log1m_exp(l0 - e0))
            body_p = n * lp1_lo + (t - n) * l1m_p
            body_q = n * lp0_hi + (t - n) * l1m_q
            slack_p = lc_err + 8.0 * _U * (np.abs(n * lp1_lo) + np.abs((t - n) * l1m_p))
            slack_q = lc_err + 8.0 * _U * (np.abs(n * lp0_hi) + np.abs((t - n) * l1m_q))
            log_pp = lc + body_p - slack_p
            log_qq = lc + body_q + slack_q
            # tails n..n_max (suffix log-sum-exp), the Q one plus Chernoff past n_max
            # (each log-add-exp rounds by <= u |result| + 2u: n_max + 2 of them at most)
            acc = (n_max + 2.0) * 4.0 * _U
            lp_tail = np.logaddexp.accumulate(log_pp[::-1])[::-1]
            lp_tail = lp_tail - acc * (1.0 + np.abs(lp_tail))
            rest = _log_tail_upper(t, lp0_hi, n_max + 1.0)
            lq_tail = np.logaddexp(np.logaddexp.accumulate(log_qq[::-1])[::-1], rest)
            lq_tail = lq_tail + acc * (1.0 + np.abs(lq_tail))
            self.log_p_tail_lo.append(lp_tail)
            self.log_q_tail_hi.append(lq_tail)

    def epsilon_lower(self, delta: float) -> float:
        """max over thresholds and counts of log(P(N >= n) - delta) - log Q(N >= n), rounded down; 0
        when no set certifies delta(0) >= delta."""
        best = 0.0
        ld = math.log(delta)
        for lp, lqt in zip(self.log_p_tail_lo, self.log_q_tail_hi, strict=True):
            ok = lp > ld + 1e-12
            if not np.any(ok):
                continue
            with np.errstate(divide="ignore", invalid="ignore"):
                # log(P - delta) = lp + log(1 - e^{ld - lp}), rounded down
                lnum = lp[ok] + _log1m_exp(ld - lp[ok]) - 1e-12 * (1.0 + np.abs(lp[ok]))
                cand = lnum - lqt[ok]
            cand = cand - 1e-12 * (1.0 + np.abs(cand))
            cand = cand[np.isfinite(cand)]
            if cand.size:
                best = max(best, float(np.max(cand)))
        return best

    def delta_lower(self, eps: float) -> float:
        """max over thresholds and counts of P(N >= n) - e^eps Q(N >= n), rounded down (>= 0)."""
        best = 0.0
        for lp, lqt in zip(self.log_p_tail_lo, self.log_q_tail_hi, strict=True):
            with np.errstate(over="ignore", invalid="ignore"):
                # P - e^eps Q = P (1 - e^{eps + lq - lp}) where eps + lq < lp; x rounded up (its terms
                # can be ~1e5 at tiny sigma: an absolute rounding of a few u times their size)
                x = eps + lqt - lp
                x = x + 4.0 * _U * (abs(eps) + np.abs(lqt) + np.abs(lp)) + 1e-12
                v = np.where(x < 0.0, np.exp(lp) * -np.expm1(np.minimum(x, 0.0)), 0.0)
            v = v[np.isfinite(v)]
            if v.size:
                best = max(best, float(np.max(v)) * (1.0 - 1e-12))
        return best


def count_auto(s: np.ndarray, q: np.ndarray) -> bool:
    """Whether "best" mode uses the count statistic: one group of steps, subsampled, s <= 1/8."""
    return s.size == 1 and float(s[0]) <= COUNT_AUTO_MAX_S and 0.0 < float(q[0]) < 1.0
