"""Monotone searches shared by the calibrators and the budget filter: the one home of the integer
search (:func:`largest_count`), of the log-scale bisection (:func:`bisect_log`) and of its interpolating
variant for calibrators that see the values (:func:`illinois_log`)."""

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


def illinois_log(value: Callable[[float], float], target: float, lo: float, hi: float, rtol: float,
                 v_lo: float | None = None, v_hi: float | None = None) -> tuple[float, float]:
    """Bracket [lo, hi] of the point where ``value`` crosses ``target``: ``value(lo) > target`` and
    ``value(hi) <= target`` (``value`` positive and decreasing, e.g. certified epsilon as a function of
    sigma), narrowed until ``hi / lo - 1 <= rtol``.

    The same invariant and stopping rule as :func:`bisect_log` (so ``hi`` is a point where the
    predicate ``value <= target`` was checked), but the next point is the regula-falsi interpolation of
    log(value / target) in log(x), with the Illinois modification (the end kept twice in a row has its
    value halved in the interpolation) so that both ends converge; a step that is not finite or not
    inside the bracket is a geometric bisection.  Only the signs of the checks decide the bracket, so a
    value that is not smooth (a route switch) slows the search but cannot break it.  ``v_lo`` /
    ``v_hi`` are the values at the ends when already known.
    """
    def f(v: float) -> float:
        return math.log(v / target) if v > 0.0 and math.isfinite(v) else (math.inf if v > 0 else -math.inf)

    f_lo = f(value(lo) if v_lo is None else v_lo)
    f_hi = f(value(hi) if v_hi is None else v_hi)
    if not (f_lo > 0.0 and f_hi <= 0.0):
        raise ValueError("illinois_log needs value(lo) > target >= value(hi)")
    x_lo, x_hi = math.log(lo), math.log(hi)
    moved, streak = "", 0  # the end moved by the last checks, and how many times in a row
    while hi / lo - 1.0 > rtol:
        # Illinois: the end that stayed put `streak` times has its value halved that many times, minus one
        g_lo = f_lo * 0.5 ** (streak - 1) if moved == "hi" and streak >= 2 else f_lo
        g_hi = f_hi * 0.5 ** (streak - 1) if moved == "lo" and streak >= 2 else f_hi
        x = 0.5 * (x_lo + x_hi)
        if math.isfinite(g_lo) and math.isfinite(g_hi) and g_lo != g_hi:
            xs = x_hi - g_hi * (x_hi - x_lo) / (g_hi - g_lo)
            if x_lo < xs < x_hi:
                x = xs
        mid = math.exp(x)
        if not (lo < mid < hi):
            mid = math.sqrt(lo * hi)
            if not (lo < mid < hi):
                break
            x = math.log(mid)
        fm = f(value(mid))
        end = "hi" if fm <= 0.0 else "lo"
        streak = streak + 1 if end == moved else 1
        moved = end
        if end == "hi":
            hi, x_hi, f_hi = mid, x, fm
        else:
            lo, x_lo, f_lo = mid, x, fm
    return lo, hi
