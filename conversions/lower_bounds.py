"""Certified lower bounds on delta(eps) and eps(delta) by post-processing (the max statistic; the sum
and threshold-count statistics in :mod:`conversions.lower_bounds_sum` and
:mod:`conversions.lower_bounds_count`).

Setting: a composition of Poisson-subsampled Gaussian steps (add/remove relation), entry i having noise
sigma_i, sensitivity Delta_i, sampling rate q_i and count k_i (a plain Gaussian is q_i = 1).  In the
normalised outputs y = x / Delta_i the dominating pair of one step is (Zhu, Dong & Wang 2022, Thm 3.3.5 of
the thesis)

    remove:  P_i = (1 - q_i) N(0, s_i^2) + q_i N(1, s_i^2),   Q_i = N(0, s_i^2),   s_i = sigma_i / Delta_i;
    add:     the swap (P_i and Q_i exchanged).

Data processing (any statistic g of the outputs): H_{e^eps}(g(P) || g(Q)) <= H_{e^eps}(P || Q) = delta(eps).
We use the maximum M = max_j y_j over all T = sum_i k_i outputs (docs/derivations/lower-bounds.md), whose
CDFs are exact products (T enters only as an exponent):

    remove:  F_Q(m) = prod_i Phi(m / s_i)^{k_i},
             F_P(m) = prod_i [(1 - q_i) Phi(m / s_i) + q_i Phi((m - 1) / s_i)]^{k_i};
    add:     the same two functions with the roles of P and Q exchanged.

For any union A of intervals, P_M(A) - e^eps Q_M(A) <= delta(eps).  A is chosen as the set where the
density ratio of M exceeds e^eps (located on a grid of 2048 points and refined by Brent's method; the
location only affects tightness, never validity), so the bound is the exact hockey-stick divergence of
the statistic up to floating point: at T = 1 (M = y_1) it equals the true delta(eps).  In the add
direction the positive set is a lower interval {M < m*} ("no output stands out"); the add direction
uses the same statistic M with the roles of the two products exchanged (not the minimum: under both
pairs the likelihood ratio of one step is monotone in y, and for small q the record's presence shows in
the largest output, not the smallest).

Floating point (the result is certified): per step, log G_i (G_i the step CDF) is evaluated as
log1p(-Gbar_i) where Gbar_i <= 1/2, else as logaddexp of scipy ``log_ndtr`` terms; its relative error
is below ``step_log_rel_err(z, q)`` = 8 u (z^2 + 64 + |log q|) (scipy's ndtr / log_ndtr lose ~z^2 ulps
to the rounding of their argument; checked against mpmath with a 4x margin in
tests/test_lower_bounds.py).  The sum log F = sum_i k_i log G_i of same-signed terms keeps that
relative error (plus (n + 3) ulps), underflow of Gbar_i is covered by an absolute 1e-300 per step, and
every exp / expm1 / product / difference is rounded outward by a few ulps: P-masses down, Q-masses up,
the result down.

Source: our derivation (docs/derivations/lower-bounds.md; data processing inequality); the max statistic's
exact CDFs are elementary.  Lower bounds.
"""

from __future__ import annotations

import math

import numpy as np

from ._lower_steps import (
    _check_direction,
    _check_eps,
    _empty_delta,
    _Steps,  # noqa: F401 (tests build statistics directly)
    _steps_from_entries,
    homogeneous,
    step_log_rel_err,
)
from .lower_bounds_count import CountStatistic, count_auto
from .lower_bounds_max import _max_epsilon_lower, _MaxStatistic
from .lower_bounds_sum import SUM_AUTO_MAX_TERMS, _sum_auto, _sum_statistic, _SumStatistic  # noqa: F401

__all__ = ["max_statistic_delta_lower", "sum_statistic_delta_lower", "delta_lower", "epsilon_lower",
           "step_log_rel_err", "SUM_AUTO_MAX_TERMS"]


def max_statistic_delta_lower(entries, eps: float, direction: str = "remove") -> float:
    """Certified lower bound on delta(eps) of the composed dominating pair, from the max statistic.

    Parameters
    ----------
    entries : Ledger or iterable of (mechanism, count) or of mechanisms
        Every mechanism a :class:`mechanisms.subsampled.SubsampledGaussian` or a
        :class:`mechanisms.gaussian.Gaussian` (q = 1); add/remove relation.
    eps : float
        Any finite real.
    direction : {"remove", "add"}
        Which dominating pair (remove: P = mixture, Q = Gaussian; add: the swap).

    Returns
    -------
    float
        delta_M(eps) = sup_A P_M(A) - e^eps Q_M(A) for M = max of the normalised outputs (see the module
        docstring), rounded down: a certified **lower bound** on the true delta(eps); exact up to float
        at T = 1.  (1 - e^eps)_+ for an empty ledger (or all q = 0).
    """
    eps = _check_eps(eps)
    add = _check_direction(direction)
    st = _steps_from_entries(entries)
    if st.s.size == 0:
        return _empty_delta(eps)
    return _MaxStatistic(st, add).delta_lower(eps)[0]


def epsilon_lower(entries, delta: float, direction: str = "remove", statistic: str = "best", *,
                  eps_hint: float | None = None) -> float:
    """Certified lower bound on eps(delta) = inf{eps >= 0 : delta(eps) <= delta}.

    ``statistic``: "max" (max statistic), "sum" (sum statistic; homogeneous ledgers only), "count"
    (threshold-count statistic, :mod:`conversions.lower_bounds_count`; homogeneous subsampled ledgers,
    remove direction) or "best" (the largest of them, the sum statistic only where the ledger is
    homogeneous, the count statistic only where it is also noise-dominated: sigma / sensitivity <= 1/8).

    For a statistic and a set A with certified masses P_lo(A) > delta and Q_hi(A), the value
    eps_A = log((P_lo(A) - delta) / Q_hi(A)), rounded down, satisfies delta(eps_A) >= P(A) - e^{eps_A} Q(A)
    >= delta, hence eps(delta) >= eps_A (delta(.) is non-increasing).  Max statistic: A = the set where
    its density ratio exceeds e^eps*, eps* the root of delta_M(eps) = delta (Brent); sum statistic: the
    half line maximising eps_A.  The returned value is verified with the same certified masses.
    Returns 0.0 when no statistic certifies delta(0) >= delta (0 is always a valid lower bound on an
    eps(delta) >= 0).  Lower bound.

    ``eps_hint`` (optional, > 0): an estimate of eps(delta), e.g. a certified upper bound from a route,
    where the max statistic's root search starts (q = 1e-4, sigma = 1, T = 10, delta = 1e-12, hint = the
    routes' upper bound: 34 instead of 47 evaluations over both directions); only the work depends on
    it, the value returned is certified either way.
    """
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)):
        raise TypeError(f"delta must be a real number, got {type(delta).__name__}")
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    if eps_hint is not None:
        if isinstance(eps_hint, bool) or not isinstance(eps_hint, (int, float, np.integer, np.floating)):
            raise TypeError(f"eps_hint must be a real number or None, got {type(eps_hint).__name__}")
        eps_hint = float(eps_hint)
        if not (math.isfinite(eps_hint) and eps_hint > 0.0):
            raise ValueError(f"eps_hint must be finite and > 0, got {eps_hint}")
    add = _check_direction(direction)
    if statistic not in ("best", "max", "sum", "count"):
        raise ValueError(f"statistic must be 'best', 'max', 'sum' or 'count', got {statistic!r}")
    st = _steps_from_entries(entries)
    if st.s.size == 0:
        return 0.0
    best = 0.0
    if statistic in ("best", "max"):
        best = _max_epsilon_lower(_MaxStatistic(st, add), delta, eps_hint)
    if statistic == "sum" or (statistic == "best" and _sum_auto(st)):
        best = max(best, _sum_statistic(st, add).epsilon_lower(delta))
    if not add and (statistic == "count" or (statistic == "best" and count_auto(st.s, st.q))):
        best = max(best, _count_statistic(st).epsilon_lower(delta))
    return best


def _count_statistic(st) -> CountStatistic:
    return CountStatistic(*homogeneous(st, "the count statistic"))


def sum_statistic_delta_lower(entries, eps: float, direction: str = "remove") -> float:
    """Certified lower bound on delta(eps) from the sum statistic S = sum_j y_j (homogeneous ledgers).

    S is a Gaussian mixture over K ~ Bin(T, q): remove P_S = sum_K b_K N(K, T s^2), Q_S = N(0, T s^2);
    add: the swap.  The likelihood ratio of S is monotone, so delta_S(eps) = P_S(A) - e^eps Q_S(A) with
    A a half line at the crossing point; by data processing delta_S <= delta
    (docs/derivations/lower-bounds.md; good in the smooth regime T q^2 >> 1, where the max statistic is
    weak).  Exact at T = 1.  All masses are bounded with declared float errors (see :class:`_SumStatistic`)
    and rounded to the safe side.

    Raises ValueError unless every entry is the same (sigma / sensitivity, sample_rate) after merging.
    """
    eps = _check_eps(eps)
    add = _check_direction(direction)
    st = _steps_from_entries(entries)
    if st.s.size == 0:
        return _empty_delta(eps)
    return _sum_statistic(st, add).delta_lower(eps)


def delta_lower(entries, eps: float, direction: str = "remove") -> float:
    """The largest of the max-statistic, (homogeneous ledgers) sum-statistic and (homogeneous, s <= 1/8,
    remove) count-statistic lower bounds on delta(eps).
    Certified lower bound; arguments as :func:`max_statistic_delta_lower`."""
    eps = _check_eps(eps)
    add = _check_direction(direction)
    st = _steps_from_entries(entries)
    if st.s.size == 0:
        return _empty_delta(eps)
    v = _MaxStatistic(st, add).delta_lower(eps)[0]
    if _sum_auto(st):
        v = max(v, _sum_statistic(st, add).delta_lower(eps))
    if not add and count_auto(st.s, st.q):
        v = max(v, _count_statistic(st).delta_lower(eps))
    return v
