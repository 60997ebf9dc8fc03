"""Exact privacy profile of a single Laplace mechanism (closed form, no numerical inversion).

For noise Lap(0, b) on a query of L1 sensitivity Delta, with a = Delta / b, the dominating pair
P = Lap(0, b), Q = Lap(Delta, b) is symmetric (delta_add = delta_remove) and

    delta(eps) = 1 - e^{(eps - a)/2}   for 0 <= eps <= a,     0 for eps >= a,
    eps(delta) = max(0, a + 2 log(1 - delta))                  for 0 < delta < 1.

Source: our derivation (docs/derivations/laplace.md) from the privacy-loss measure of the Laplace pair
(atom 1/2 at +a, atom e^{-a}/2 at -a, density (1/4) e^{(l - a)/2} on (-a, a)); the tests re-derive it
from the mpmath integral of (1 - e^{eps - L})_+ against that measure.  Exact for one use of the
mechanism; the only error is floating point (a few ulps), bounded by ``LAPLACE_REL_ERR`` and
reported.  Compositions of two or more Laplace mechanisms have no such form here (they go through
``conversions.contour``).
"""

from __future__ import annotations

import math

# expm1 / log1p / one addition: each a few ulps; bounded generously
LAPLACE_REL_ERR = 1e-15


def _check(a: float) -> None:
    if not (math.isfinite(a) and a > 0.0):
        raise ValueError(f"a = sensitivity / scale must be finite and > 0, got {a!r}")


def laplace_delta(eps: float, a: float) -> tuple[float, float]:
    """(delta(eps), absolute error bound) for one Laplace mechanism with a = Delta / b; eps >= 0."""
    _check(a)
    if not eps >= 0.0:
        raise ValueError(f"epsilon must be >= 0, got {eps!r}")
    if eps >= a:
        return 0.0, 0.0
    d = -math.expm1(0.5 * (eps - a))
    return d, d * LAPLACE_REL_ERR


def laplace_epsilon(delta: float, a: float) -> tuple[float, float]:
    """(eps(delta) rounded up, error bound) for one Laplace mechanism: the smallest eps >= 0 with
    delta(eps) <= ``delta``.  ``err`` bounds eps - eps_true (floating point only)."""
    _check(a)
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    two_log = 2.0 * math.log1p(-delta)  # <= 0
    v = a + two_log
    if v <= 0.0:  # delta >= TV = 1 - e^{-a/2}: eps = 0 (up to rounding of the comparison)
        slack = LAPLACE_REL_ERR * (a - two_log)
        return (0.0, 0.0) if v < -slack else (slack, slack)
    err = LAPLACE_REL_ERR * (a - two_log)  # rounding relative to the terms, not to their difference
    return v + err, 2.0 * err
