"""The near-atomic split's cuts (:mod:`conversions.split`): the losses it may split at, on a 2^(1/2) grid
of multiples of the epsilon of interest, and the further cuts tried when the chosen one leaves a wide
bracket (every cut's bracket is certified, so their intersection is)."""

from __future__ import annotations

import math

from . import contour as C

#: cut candidates, as multiples of the epsilon of interest: the first at which the remainder's Chernoff
#: bound is negligible is taken (then only the core is integrated); when none is, the last one, with both
#: parts integrated (a lower cut keeps the core narrow when the big steps carry epsilon), unless the core
#: is negligible there (then the highest, both integrated).  An integrated pass whose core, integrated
#: alone, had its contour capped is followed by one at the low cut (``conversions.split``).
CUT_FACTORS = (1.0, 2.0, 0.5)
#: when the bracket at the cut chosen by ``CUT_FACTORS`` is still wide, these cuts (multiples of epsilon)
#: are tried too, in order, and the brackets intersected (each is certified); the trial stops at the
#: first that does not halve the width.  Measured: q = 1e-4, sigma = 1, T = 1000, remove, delta(0.0955)
#: ~ 1e-12: relative width 0.23 at the cut eps/2 (no cut leaves a negligible remainder; that low cut,
#: whose core is negligible, is no longer the rule's choice), 1.3e-4 at 1.4 eps, 1e-4 at 2 eps and
#: 2.6 eps; q = 1e-3, sigma = 2, T = 10, delta = 1e-10: the eps bracket 9e-4 wide at the cut 4 eps,
#: 8e-7 after the cut 2 eps.
WIDE_CUT_FACTORS = (2.0, 4.0)


def _grid_cut(x: float) -> float:
    """The cut on the 2^(1/2) grid nearest to ``x`` (as :func:`conversions.split._parts` places it)."""
    return 2.0 ** (round(2.0 * math.log2(max(x, 1e-9))) / 2.0)


def _other_cuts(x: float, chosen: float, lo: float, up: float, narrow, at_cut):
    """Intersect the certified bracket [lo, up] (at the cut ``chosen``) with the brackets at the cuts
    ``WIDE_CUT_FACTORS`` x ``x`` (on the cut grid), in order, until ``narrow(lo, up, payload)`` holds or a
    cut does not halve the width; a cut that cannot be integrated, or the work limit, moves on.
    ``at_cut(cut)`` returns (lower, upper, payload).  Returns (lo, up, payload of the narrowest bracket
    found, or None when none was narrower than the one given)."""
    best = None
    tried = {chosen}
    for f in WIDE_CUT_FACTORS:
        if narrow(lo, up, best):
            break
        cut = _grid_cut(max(x, 1e-9) * f)
        if cut in tried:
            continue
        tried.add(cut)
        try:
            l2, u2, payload = at_cut(cut)
        except (C.WouldBeCapped, C.WorkLimitReached):
            continue
        if u2 - l2 < up - lo:
            best = payload
        halved = min(up, u2) - max(lo, l2) <= 0.5 * (up - lo)
        lo, up = max(lo, l2), min(up, u2)
        lo = min(lo, up)
        if not halved:
            break
    return lo, up, best
