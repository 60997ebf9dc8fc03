"""Renyi-DP curve -> (epsilon, delta), optimised over continuous alpha
(docs/derivations/rdp-conversion.md).

Rules (both valid upper bounds for every alpha > 1; the optimum over alpha is taken numerically, and
a non-optimal alpha only costs tightness, never soundness):

* ``classic`` (Mironov 2017, Prop. 3):
      eps(delta) = min_alpha  eps(alpha) + log(1/delta) / (alpha - 1)
      delta(eps) = min_alpha  exp((alpha - 1)(eps(alpha) - eps))
* ``improved`` (Balle, Barthe, Gaboardi, Hsu & Sato 2020, Thm 21; Canonne, Kamath & Steinke 2020):
      eps(delta) = min_alpha  eps(alpha) + log((alpha - 1)/alpha) - (log delta + log alpha)/(alpha - 1)
      delta(eps) = min_alpha  exp((alpha - 1)(eps(alpha) - eps)) * (1/alpha) (1 - 1/alpha)^(alpha - 1)
  Always <= classic.

The pure-DP end eps(inf) is always a candidate (valid for every delta >= 0).  An infinite-loss mass
p_inf (from (eps, delta) blocks) enters as delta_total = p_inf + (1 - p_inf) delta_rdp.

The printed thesis formulas (1.1)/(1.2) use eps(alpha - 1); that is a typo which under-reports eps
(docs/derivations/rdp-conversion.md).  We implement the standard form.

This module imports nothing of dpcert: it sits at the bottom of the floor order because a plug-in's own
analysis converts an RDP curve (:class:`mechanisms.svt.StageWiseSVT` certifies each stage this way).
The conversions and the accountant use it through :mod:`conversions.rdp_to_dp`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

RULES = ("classic", "improved")
# relative safety margin for floating-point error in evaluating the objective
SAFETY_REL = 1e-12
_U = 2.0 ** -53


def default_orders(alpha_max: float = 1e4) -> np.ndarray:
    """Order grid: fractional orders in (1, 2), all integers 2..256, geometric up to ``alpha_max``
    (a choice: every order gives a valid bound, docs/derivations/rdp-conversion.md)."""
    frac = 1.0 + np.geomspace(1e-4, 0.95, 40)
    ints = np.arange(2, 257, dtype=float)
    geo = np.unique(np.round(np.geomspace(257, alpha_max, 120))) if alpha_max > 257 else np.empty(0)
    return np.unique(np.concatenate([frac, ints, geo]))


@dataclass(frozen=True)
class RDPConversion:
    """Result of an RDP conversion: the value, the order that achieved it and the rule."""

    value: float
    alpha: float
    rule: str


def _eps_objective(alpha: np.ndarray, rdp: np.ndarray, log_delta: float, rule: str) -> np.ndarray:
    am1 = alpha - 1.0
    if rule == "classic":
        return rdp - log_delta / am1
    return rdp + np.log1p(-1.0 / alpha) - (log_delta + np.log(alpha)) / am1


def eps_at_orders(alpha: np.ndarray, rdp: np.ndarray, delta: float, rule: str = "improved") -> np.ndarray:
    """epsilon(delta) certified by each order: the conversion of ``rdp`` (RDP values at ``alpha`` > 1)
    with ``rule`` ("improved": Balle et al. 2020, Thm 21; "classic": Mironov 2017, Prop. 3).  Every
    entry is a valid upper bound (no infinite-loss mass); the minimum is the best on these orders."""
    return _eps_objective(np.asarray(alpha, dtype=float), np.asarray(rdp, dtype=float), math.log(delta),
                          _check_rule(rule))


def _log_delta_objective(alpha: np.ndarray, rdp: np.ndarray, eps: float, rule: str) -> np.ndarray:
    am1 = alpha - 1.0
    val = am1 * (rdp - eps)
    if rule == "improved":
        val = val + am1 * np.log1p(-1.0 / alpha) - np.log(alpha)
    return val


def _check_rule(rule: str) -> str:
    if rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    return rule


def _minimise(obj: Callable[[np.ndarray], np.ndarray], orders: np.ndarray) -> tuple[float, float]:
    """Grid search, then five vectorised zooms (33 points each, log(alpha - 1) scale) between the
    neighbours of the best order; returns (min value, argmin).  Every alpha gives a valid bound, so
    the refinement only tightens (the bracket shrinks 16x per zoom)."""
    vals = obj(orders)
    vals = np.where(np.isnan(vals), np.inf, vals)
    i = int(np.argmin(vals))
    best, best_a = float(vals[i]), float(orders[i])
    if not math.isfinite(best):
        return best, best_a
    lo = orders[max(i - 1, 0)]
    hi = orders[min(i + 1, len(orders) - 1)]
    for _ in range(5):
        if not hi > lo:
            break
        xs = 1.0 + np.exp(np.linspace(math.log(lo - 1.0), math.log(hi - 1.0), 33))
        v = obj(xs)
        v = np.where(np.isnan(v), np.inf, v)
        j = int(np.argmin(v))
        if float(v[j]) < best:
            best, best_a = float(v[j]), float(xs[j])
        lo, hi = xs[max(j - 1, 0)], xs[min(j + 1, xs.size - 1)]
    return best, best_a


_TINY = math.nextafter(0.0, 1.0)
_LOG_TINY = math.log(_TINY)


def _orders_for(rdp_fn, obj_factory, alpha_max: float, stop_below: float = -math.inf) -> tuple[float, float]:
    """Minimise with a grid that grows (x10) while the optimum sits in its upper half.

    Both objectives are quasi-convex in alpha for a convex composed K (docs/derivations/rdp-conversion.md),
    so a grid optimum below the top is global on the grid's range and beyond; starting small (2..256) keeps
    the costly large orders of numerically evaluated curves (O(alpha) each) out of the common case.
    """
    am = alpha_max
    while True:
        orders = default_orders(am)
        rdp = np.asarray(rdp_fn(orders), dtype=float)

        def obj(a: np.ndarray) -> np.ndarray:
            return obj_factory(a, np.asarray(rdp_fn(a), dtype=float))

        # grow on the grid alone; the continuous refinement runs once, on the final grid
        vals = np.asarray(obj_factory(orders, rdp), dtype=float)
        vals = np.where(np.isnan(vals), np.inf, vals)
        i = int(np.argmin(vals))
        if (orders[i] < 0.5 * orders[-1] or am >= 1e8 or not math.isfinite(float(vals[i]))
                or vals[i] < stop_below):
            return _minimise(obj, orders)
        am *= 10.0


def eps_from_rdp(rdp_fn: Callable[[np.ndarray], np.ndarray], delta: float, *, pure_eps: float = math.inf,
                 inf_mass: float = 0.0, rule: str = "improved", alpha_max: float = 256.0) -> RDPConversion:
    """Smallest certified eps for ``delta`` from a composed RDP curve (upper bound).

    Parameters
    ----------
    rdp_fn : callable
        alpha (float array, > 1) -> composed RDP eps(alpha) (array); ``inf`` allowed.
    delta : float in (0, 1)
    pure_eps : float
        eps(inf) of the composed curve (``inf`` if not pure DP).
    inf_mass : float in [0, 1)
        Composed infinite-loss mass p_inf; delta must exceed it.
    rule : {"improved", "classic"}
    """
    _check_rule(rule)
    if delta <= inf_mass:
        return RDPConversion(math.inf, math.nan, rule)
    d_rdp = (delta - inf_mass) / (1.0 - inf_mass)
    if d_rdp >= 1.0:
        return RDPConversion(0.0, math.nan, rule)
    ld = math.log(d_rdp)
    val, arg = _orders_for(rdp_fn, lambda a, r: _eps_objective(a, r, ld, rule), alpha_max)
    if pure_eps <= val:
        val, arg = pure_eps, math.inf
    val = max(val, 0.0)
    return RDPConversion(val * (1.0 + SAFETY_REL) + 1e-300 if val > 0 else 0.0, arg, rule)


def delta_from_rdp(rdp_fn: Callable[[np.ndarray], np.ndarray], eps: float, *, pure_eps: float = math.inf,
                   inf_mass: float = 0.0, rule: str = "improved", alpha_max: float = 256.0) -> RDPConversion:
    """Smallest certified delta at ``eps`` from a composed RDP curve (upper bound)."""
    _check_rule(rule)
    if pure_eps <= eps:
        d_rdp, arg = 0.0, math.inf
    else:
        # below log(5e-324) - 5 the bound rounds to the smallest subnormal whatever larger orders give,
        # so the grid stops growing there (larger orders cost O(alpha) each for numerical curves)
        lval, arg = _orders_for(rdp_fn, lambda a, r: _log_delta_objective(a, r, eps, rule), alpha_max,
                                stop_below=_LOG_TINY - 5.0)
        # floating point: (alpha - 1)(eps(alpha) - eps) cancels when eps(alpha) ~ eps at large alpha, so
        # the margin is a few ulps of the summands' size (not of lval), on top of the relative one
        lerr = SAFETY_REL * (1.0 + abs(lval))
        if math.isfinite(arg) and math.isfinite(lval):
            r = float(np.asarray(rdp_fn(np.array([arg])), dtype=float)[0])
            am1 = arg - 1.0
            lerr = max(lerr, 16.0 * _U * (am1 * (abs(r) + abs(eps)) + abs(am1 * math.log1p(-1.0 / arg))
                                          + abs(math.log(arg)) + abs(lval) + 1.0))
        d_rdp = min(1.0, math.nextafter(math.exp(min(lval + lerr, 0.0)) * (1.0 + 4.0 * _U), math.inf))
    delta = inf_mass + (1.0 - inf_mass) * d_rdp
    if delta > 0.0:
        delta = math.nextafter(delta, math.inf)
    return RDPConversion(min(delta, 1.0), arg, rule)
