"""Integer search shared by the calibrators and the budget filter."""

from __future__ import annotations

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
