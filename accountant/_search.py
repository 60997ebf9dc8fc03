"""Monotone searches shared by the calibrators and the budget filter: the one home of the integer
search (:func:`largest_count`) and of the log-scale bisection (:func:`bisect_log`)."""

from __future__ import annotations

import math
from collections.abc import Callable


def largest_count(fits: Callable[[int], bool], limit: int) -> int:
    """Largest n in [1, ``limit``] with ``fits(n)``, or 0 when ``fits(1)`` is false.

    ``fits`` must be monotone (true up to some count, false after), as "the certified epsilon of n uses
    is within the target" is.  Doubling from 1, then bisection: O(log n) evaluations, and ``limit``
    itself is returned only after ``fits(limit)`` was checked.
    """
    if limit < 1 or not fits(1):
        return 0
    lo, hi = 1, 2
    while hi <= limit and fits(hi):
        lo, hi = hi, 2 * hi
    hi = min(hi, limit + 1)  # the first count known (or assumed, past the limit) not to fit
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def bisect_log(switched: Callable[[float], bool], lo: float, hi: float, rtol: float) -> tuple[float, float]:
    """Bracket [lo, hi] of the switch of a monotone predicate, False at ``lo`` > 0 and True at ``hi``.

    Bisection at geometric midpoints until ``hi / lo - 1 <= rtol`` (or until lo and hi are adjacent
    floats).  The invariant is kept throughout, so ``hi`` is a point where the predicate holds (the safe
    end of a calibration whose predicate is "certified epsilon <= target").
    """
    while hi / lo - 1.0 > rtol:
        mid = math.sqrt(lo * hi)
        if mid <= lo or mid >= hi:
            break
        if switched(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi
