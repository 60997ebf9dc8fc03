"""Dominated directions: a cheap certified bracket for a dominating-pair direction that cannot matter.

A certificate reports the worst of the two directions of the dominating pair (remove and add):
eps = max(eps_remove, eps_add), and its certified bracket is [max of the lowers, max of the uppers].
Once one direction has a certified bracket [l_A, u_A], a direction B whose *upper* bound satisfies
u_B <= l_A can change neither end: any refinement of B lowers u_B (the maximum of the uppers stays u_A)
and keeps l_B <= u_B <= l_A (the maximum of the lowers stays l_A).  So B needs no more than one
rigorous upper bound below l_A; the optimised Chernoff bound of the whole ledger,

    delta_B(eps) <= p_inf + min_c kappa(c) M_B(c) e^{-c eps},   kappa(c) = c^c / (c + 1)^(c + 1)

(the same bound as :func:`conversions.contour.epsilon_bounds` falls back to; exact MGFs, its rounding
and the mechanisms' declared MGF errors added on the safe side), costs a few dozen real-axis MGF
evaluations where the integrated routes cost hundreds (at small sample rates the add direction's
epsilon is often a tenth of the remove direction's: q = 1e-3, sigma = 0.5, T = 100: 0.067 against 2.1).
The bracket returned for B is [0, bound] (0 is a valid lower bound of eps and delta) and is marked
``details["dominated"]`` (the other directions' details name it in ``"dominated_directions"``, which a
certificate shows); the certificate's numbers are the same as with B evaluated in full.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

from .contour import ComposedPLD, DeltaBounds, EpsilonBounds, chernoff_delta_upper, chernoff_epsilon_upper


def chernoff_upper(entries, query: str, value: float, direction: str) -> float | None:
    """A rigorous upper bound on eps(delta = value) (``query="epsilon"``) or delta(eps = value)
    (``"delta"``) of one direction: the optimised Chernoff bound of the composed ledger, rounded up
    (:func:`conversions.contour.chernoff_epsilon_upper`, :func:`~conversions.contour.chernoff_delta_upper`;
    module docstring).  None when it is not finite or costs more than the contour's fallback budget."""
    try:
        pld = ComposedPLD(entries, direction)
    except (ValueError, TypeError):  # (a mechanism without a loss distribution: no cheap bound here)
        return None
    if not pld.entries or (query == "epsilon" and not value > pld.p_inf):
        return None
    try:
        if query == "epsilon":
            return chernoff_epsilon_upper(pld, value)
        return chernoff_delta_upper(pld, value)
    except (ValueError, ArithmeticError):
        return None


def each_direction(entries, dirs: Sequence[str], query: str, value: float,
                   run: Callable[..., EpsilonBounds | DeltaBounds], floor: float | None = None,
                   pass_ceiling: bool = False) -> list:
    """``[run(d) for d in dirs]``, except that a direction whose Chernoff bound (:func:`chernoff_upper`)
    is at most the largest certified lower bound found so far (the earlier directions' lower bounds, and
    ``floor``: a certified lower bound on the worst direction's value from elsewhere, e.g. another route)
    gets the bracket [0, that bound] instead.  It cannot change the worst-direction certificate (module
    docstring; with ``floor`` from another route: that direction's value is then at most ``floor``,
    which already bounds the combined answer from below).  With ``pass_ceiling``, ``run(d, ceiling)``
    receives that lower bound (0 when none): a route may stop refining direction d once its certified
    upper end is at most ``ceiling`` -- for the same reason, the certificate's numbers are then those
    of d refined in full."""
    res: list = []
    for d in dirs:
        ceiling = max([r.lower for r in res] + [floor or 0.0])
        if ceiling > 0.0:
            up = chernoff_upper(entries, query, value, d)
            if up is not None and up <= ceiling:
                det = {"dominated": True, "reason": "Chernoff bound below the other direction's certified "
                       "lower bound"}
                cls = EpsilonBounds if query == "epsilon" else DeltaBounds
                res.append(cls(value, up, 0.0, up, d, det))
                continue
        res.append(run(d, ceiling) if pass_ceiling else run(d))
    skipped = ",".join(r.direction for r in res if r.details.get("dominated"))
    if skipped:  # (so the certificate, which shows the worst direction's details, names them)
        res = [r if r.details.get("dominated") else
               dataclasses.replace(r, details={**r.details, "dominated_directions": skipped}) for r in res]
    return res


def intersect(a, b):
    """Two certified brackets of the same quantity (one direction): the tighter ends of both, and the
    details of the narrower one."""
    narrow = a if a.upper - a.lower <= b.upper - b.lower else b
    up, lo = min(a.upper, b.upper), max(a.lower, b.lower)
    lo = min(lo, up)
    return dataclasses.replace(narrow, upper=up, lower=lo, estimate=min(max(narrow.estimate, lo), up))
