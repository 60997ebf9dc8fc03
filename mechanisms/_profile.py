"""Exact privacy profiles of one use of a one-dimensional pair, certified in floating point.

For a pair (P, Q) with privacy loss L = log(dP/dQ) the privacy profile is

    delta(eps) = sup_S P(S) - e^eps Q(S) = P(A) - e^eps Q(A),    A = {L > eps}

(the Neyman-Pearson lemma; Balle & Wang 2018, Thm 5 / Balle et al. 2020, section 2).  For the
one-dimensional Gaussian-type pairs of this package A is a finite union of intervals whose end points are
the roots of L = eps.  Two facts make a certified bracket cheap:

* any set S gives a lower bound P(S) - e^eps Q(S) <= delta(eps) (so approximate end points suffice);
* with certified brackets of the end points, A_narrow <= A <= A_wide, and
  delta(eps) <= P(A_wide) - e^eps Q(A_narrow) (monotonicity of measures).

Both differences are evaluated in log space, ``e^{l_P} (1 - e^{eps + l_Q - l_P})``, from the logs of normal
tail / interval probabilities with absolute error bounds (:func:`log_normal_mass`), so they keep full
relative accuracy down to tiny delta; :func:`hockey_bounds` rounds the result outward.

:func:`epsilon_bracket` inverts a certified delta bracket: eps(delta) = inf{eps >= 0: delta(eps) <= delta}
is at most any eps whose upper bound is <= delta and above any eps whose lower bound exceeds delta.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from scipy.special import erf

from ._numerics import log_ndtr_bounds

__all__ = ["log_normal_mass", "log_sum_bounds", "hockey_bounds", "hockey_bounds_array", "epsilon_bracket"]

U = 2.0 ** -53
_ERF_ULPS = 8.0  # scipy's erf (Cephes): a few ulps relative; checked against mpmath in the tests
_SQRT1_2 = math.sqrt(0.5)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def log_normal_mass(a: float, b: float, a_err: float = 0.0, b_err: float = 0.0) -> tuple[float, float]:
    """(log P(a < Z < b), absolute error bound) for Z ~ N(0, 1) and end points a <= b (floats, +-inf)
    known to within ``a_err`` / ``b_err`` (the bound covers every interval with such end points).

    Tails are log Phi directly; an interval on one side of 0 is log Phi(b) + log(1 - e^{log Phi(a) -
    log Phi(b)}) (mirrored for a >= 0), whose error is that of the logs divided by e^{|x|} - 1 (x the
    log ratio); an interval around 0 is (erf(b / sqrt 2) + erf(-a / sqrt 2)) / 2, a sum of non-negative
    terms.  Returns (-inf, 0) for an empty interval and an infinite error when the end points' errors
    swamp the interval (the caller's bound is then vacuous, never wrong).
    """
    if not a <= b:
        raise ValueError(f"interval end points must satisfy a <= b, got {a!r}, {b!r}")
    if a == b and a_err == 0.0 and b_err == 0.0:
        return -math.inf, 0.0
    if a == -math.inf or b == math.inf:
        if a == -math.inf and b == math.inf:
            return 0.0, 0.0
        z, ze = (b, b_err) if a == -math.inf else (-a, a_err)
        lz, e = log_ndtr_bounds(np.array([z]), ze)
        return float(lz[0]), float(e[0])
    if b <= 0.0 or a >= 0.0:
        # same side of 0: work on the side where the CDF is small
        hi, lo, ehi, elo = (b, a, b_err, a_err) if b <= 0.0 else (-a, -b, a_err, b_err)
        (lh, ll), (eh, el) = log_ndtr_bounds(np.array([hi, lo]), np.array([ehi, elo]))
        lh, ll, eh, el = float(lh), float(ll), float(eh), float(el)
        x = ll - lh  # <= 0
        ex = eh + el + 2.0 * U * (abs(ll) + abs(lh))
        if not x + ex < 0.0:
            return (lh + math.log(-math.expm1(x)) if x < 0.0 else -math.inf), math.inf
        v = lh + math.log(-math.expm1(x))
        err = eh + ex / math.expm1(min(-(x + ex), 700.0)) + 4.0 * U * (1.0 + abs(v))
        if hi - lo < 1e-3:  # narrow: the density bracket may be sharper than the difference of logs
            vd, errd = _narrow_log_mass(lo, hi, elo, ehi)
            if errd < err:
                return vd, errd
        return v, err
    # around 0: Phi(b) - Phi(a) = (erf(b / sqrt2) + erf(-a / sqrt2)) / 2; erf(x) / x decreases, so an
    # argument error dx moves erf(x) by at most erf(x) |dx| / x (relative |dx| / x)
    tb, ta = erf(b * _SQRT1_2), erf(-a * _SQRT1_2)
    s = float(tb + ta)
    if s <= 0.0:
        return -math.inf, math.inf
    rel = (_ERF_ULPS + 4.0) * U
    rel_b = rel + (b_err / b if b > 0 else math.inf)
    rel_a = rel + (a_err / -a if a < 0 else math.inf)
    e_abs = tb * rel_b + ta * rel_a if (b_err or a_err) else (tb + ta) * rel
    if not e_abs < s:
        return math.log(0.5 * s), math.inf
    v = math.log(0.5 * s)
    return v, -math.log1p(-e_abs / s) + 4.0 * U * (1.0 + abs(v))


def _narrow_log_mass(lo: float, hi: float, elo: float, ehi: float) -> tuple[float, float]:
    """(log P(lo < Z < hi), error bound) for lo < hi <= 0 by the density: the normal density increases
    on (-inf, 0], so the mass lies between (hi - lo) phi(lo) and (hi - lo) phi(hi) (end points moved
    outward / inward by their errors ``elo`` / ``ehi``; the width carries one rounding)."""
    w = hi - lo
    w_lo, w_hi = (w - elo - ehi) * (1.0 - 2.0 * U), (w + elo + ehi) * (1.0 + 2.0 * U)
    if not w_lo > 0.0:
        return math.log(w), math.inf
    far, near = lo - elo, min(hi + ehi, 0.0)
    l_lo = math.log(w_lo) - 0.5 * far * far - _HALF_LOG_2PI
    l_hi = math.log(w_hi) - 0.5 * near * near - _HALF_LOG_2PI
    v = 0.5 * (l_lo + l_hi)
    return v, 0.5 * (l_hi - l_lo) + 8.0 * U * (1.0 + abs(v) + 0.5 * far * far)


def log_sum_bounds(terms: list[tuple[float, float]]) -> tuple[float, float]:
    """(log sum_i e^{l_i}, error bound) for terms (l_i, e_i) with |l_i - true_i| <= e_i: the log-sums of
    the terms moved up and down by their errors (a negligible term's large error stays negligible), plus
    the rounding of the sums (a few ulps of each term and of the result)."""
    keep = [t for t in terms if t[0] > -math.inf]
    if not keep:
        return -math.inf, 0.0
    ls = np.array([t[0] for t in keep])
    es = np.array([t[1] for t in keep])
    if not np.all(np.isfinite(es)):
        return float(np.logaddexp.reduce(ls)), math.inf
    v = float(np.logaddexp.reduce(ls))
    up = float(np.logaddexp.reduce(ls + es)) - v
    down = v - float(np.logaddexp.reduce(ls - es))
    return v, max(up, down) + 8.0 * (len(ls) + 1) * U * (1.0 + abs(v) + float(np.max(es)))


def hockey_bounds_array(lp, ep, lq, eq, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Certified (lower, upper) of max(0, e^{lp} - e^eps e^{lq}) elementwise, when the logs (arrays,
    lp <= 0) are within ``ep`` and ``eq`` of the true values.

    Computed as e^{lp} (1 - e^{x}), x = eps + lq - lp, with x moved outward by the errors and by its
    own rounding; the product is rounded outward by 8 ulps and one float step.  An infinite error gives
    the trivial bracket [0, e^{lp + ep}].
    """
    lp, ep, lq, eq = (np.asarray(v, dtype=float) for v in np.broadcast_arrays(lp, ep, lq, eq))
    fin_q = np.isfinite(lq)
    with np.errstate(invalid="ignore", over="ignore"):
        r = 4.0 * U * (abs(eps) + np.where(fin_q, np.abs(lq), 0.0) + np.abs(lp) + ep + eq)

        def part(l_p, l_q, sign):
            x = eps + l_q - l_p + sign * r
            x = np.where(np.isnan(x), -np.inf, x)  # lq = -inf: no second term
            v = np.exp(np.minimum(l_p, 700.0)) * -np.expm1(np.minimum(x, 0.0))
            pos = (x < 0.0) & (l_p > -np.inf)
            return np.where(pos, v, 0.0), pos

        hi, pos = part(lp + ep, lq - eq, -1.0)
        # a possibly positive value rounds up to at least the smallest subnormal (e^{lp} may underflow)
        hi = np.where(pos, np.nextafter(hi * (1.0 + 8.0 * U), np.inf), 0.0)
        lo = part(lp - ep, lq + eq, 1.0)[0]
        lo = np.maximum(np.nextafter(lo * (1.0 - 8.0 * U), 0.0), 0.0)
        bad = ~(np.isfinite(ep) & np.isfinite(eq))
        if bad.any():
            triv = np.where(lp > -np.inf, np.nextafter(np.exp(np.minimum(lp + ep, 0.0)), np.inf), 0.0)
            hi = np.where(bad, triv, hi)
            lo = np.where(bad, 0.0, lo)
    hi = np.minimum(hi, 1.0)
    return np.minimum(lo, hi), hi


def hockey_bounds(lp: float, ep: float, lq: float, eq: float, eps: float) -> tuple[float, float]:
    """Scalar :func:`hockey_bounds_array`: certified (lower, upper) of max(0, e^{lp} - e^eps e^{lq})."""
    lo, hi = hockey_bounds_array(lp, ep, lq, eq, eps)
    return float(lo), float(hi)


def epsilon_bracket(delta_fn: Callable[[float], tuple[float, float]], delta: float, *,
                    start: float = 1.0, rtol: float = 1e-12, max_evals: int = 240) -> tuple[float, float]:
    """Certified (lower, upper) of eps(delta) = inf{eps >= 0 : delta(eps) <= delta} for a non-increasing
    profile given by ``delta_fn(eps) -> (lower, upper)`` of delta(eps).

    ``upper``: an eps whose certified upper bound of delta is <= ``delta`` (inf if none is found below
    2^60); ``lower``: the largest eps whose certified lower bound exceeds ``delta`` (0 if none).  Secant
    steps on log delta inside the bracket, bisection when they stall; when the target falls inside the
    numerical band of one point the two ends are then tightened separately by bisection.
    """
    def logmid(d: tuple[float, float]) -> float:
        lo, hi = d
        v = math.sqrt(lo * hi) if lo > 0.0 else 0.5 * hi
        return math.log(v) if v > 0.0 else -745.0

    d0 = delta_fn(0.0)
    if d0[1] <= delta:
        return 0.0, 0.0
    lo, hi = 0.0, start
    f_lo = logmid(d0)
    evals = 1
    while True:
        d = delta_fn(hi)
        evals += 1
        if d[1] <= delta:
            f_hi = logmid(d)
            break
        if d[0] > delta:
            lo, f_lo = hi, logmid(d)
        if hi > 2.0 ** 60:
            return lo, math.inf
        hi *= 2.0
    target = math.log(delta)
    ambiguous = None
    stall = 0
    while hi - lo > rtol * hi and evals < max_evals:
        w = hi - lo
        x = 0.5 * (lo + hi)
        if stall < 2 and f_lo > target > f_hi and f_lo - f_hi > 0.0:
            x = lo + (f_lo - target) / (f_lo - f_hi) * w
            x = min(max(x, lo + 0.02 * w), hi - 0.02 * w)
        d = delta_fn(x)
        evals += 1
        if d[1] <= delta:
            hi, f_hi = x, logmid(d)
        elif d[0] > delta:
            lo, f_lo = x, logmid(d)
        else:
            ambiguous = x
            break
        stall = stall + 1 if hi - lo > 0.5 * w else 0
    if ambiguous is not None:
        a, b = ambiguous, hi  # smallest certified upper end in (ambiguous, hi]
        while b - a > rtol * b and evals < max_evals:
            m = 0.5 * (a + b)
            evals += 1
            if delta_fn(m)[1] <= delta:
                b = m
            else:
                a = m
        hi = b
        a, b = lo, ambiguous  # largest certified lower end in [lo, ambiguous)
        while b - a > rtol * max(b, 1e-300) and evals < max_evals:
            m = 0.5 * (a + b)
            evals += 1
            if delta_fn(m)[0] > delta:
                a = m
            else:
                b = m
        lo = a
    return lo, hi
