"""The privacy loss's upper tail in closed form, for the discretised PLD (:mod:`conversions.pld`,
:mod:`conversions.pld_split`).

A grid must reach every loss that matters; for a step whose loss has a long upper tail (Poisson
subsampling at a small rate q and small sigma: losses up to ~10 while eps ~ 0.05) the point cap then
coarsens the whole grid.  Where every step's loss is bounded below, the tail can be taken out exactly.

Let T steps of one mechanism (one direction, dominating pair (P, Q), loss L = log dP/dQ) have losses
>= f (``pld_loss_floor(direction)``; e.g. log(1 - q) for the remove direction of Poisson subsampling),
eps_max a certified upper end for the eps of interest, top = eps_max - (T - 1) f, and A the event that
some step's loss exceeds top.  On A the total loss S is > top + (T - 1) f >= eps_max >= eps, so
(1 - e^{eps - S})_+ = 1 - e^{eps - S} there and, by the change of measure e^{-S} dP^T = dQ^T,

    delta(eps) = delta_lo(eps) + H(eps),   H(eps) = (1 - (1 - p)^T) - e^eps (1 - (1 - q)^T)   (exact)

for eps <= eps_max, with delta_lo the hockey-stick integral of the sub-probability measure mu_lo^{*T},
mu_lo = the P-law of L restricted to L <= top, and p = P(L > top), q = Q(L > top)
(``pld_upper_tail(top, direction)``).  The discretised PLD brackets delta_lo (its couplings and error
terms hold for sub-probability measures); H is bracketed from the bracketed p and q.  Past eps_max:
the part of delta on A is non-increasing in eps, so H_up(eps_max) still bounds it, and it is >= 0.
Neighbouring relation: the mechanism's; the result is a rigorous bracket.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mechanisms.base import Mechanism


@dataclass(frozen=True)
class LossTail:
    """The closed-form tail of ``times`` steps above ``top`` (module docstring): bounds p_lo <= p <= p_up,
    q_lo <= q <= q_up of one step's P- and Q-mass above ``top``, valid for eps <= ``eps_max``."""

    times: int
    top: float
    eps_max: float
    p_lo: float
    p_up: float
    q_lo: float
    q_up: float

    def delta(self, eps: float, upper: bool) -> float:
        """H_up(min(eps, eps_max)) (``upper``) or H_lo(eps) (0 past eps_max): the tail's part of delta."""
        t = self.times

        def at_least_one(x: float) -> float:  # 1 - (1 - x)^T, a few ulps (allowed for by 1e-12 below)
            return -math.expm1(t * math.log1p(-x)) if x < 1.0 else 1.0

        def scaled(x: float, e: float, up: bool) -> float:
            """e^e (1 - (1 - x)^T) rounded up or down, in log space (no overflow at large e)."""
            a = at_least_one(x)
            if a <= 0.0:
                return 0.0
            lv = e + math.log(a)
            rel = 1e-12 + 4.0 * 2.0**-52 * (abs(e) + abs(math.log(a)) + 2.0)  # (exp of a rounded sum)
            if lv > 709.0:
                return math.inf
            v = math.exp(lv)
            if up:  # (an underflow to 0 is rounded up to the smallest subnormal)
                return v * (1.0 + rel) if v > 0.0 else 5e-324
            return v * (1.0 - rel)

        if upper:
            return max(at_least_one(self.p_up) * (1 + 1e-12)
                       - scaled(self.q_lo, min(eps, self.eps_max), False), 0.0)
        if eps > self.eps_max:
            return 0.0
        return max(at_least_one(self.p_lo) * (1 - 1e-12) - scaled(self.q_up, eps, True), 0.0)


def loss_tail(mech: Mechanism, times: int, direction: str, eps_max: float,
              above: float = -math.inf) -> LossTail | None:
    """The tail of ``times`` uses of ``mech`` above top = eps_max - (T - 1) f (rounded up), or None when
    the mechanism has no ``pld_loss_floor`` / ``pld_upper_tail`` hooks or no finite floor, ``eps_max`` is
    negative (a delta query at eps < 0 keeps the whole grid) or not finite, top would not exceed
    ``above``, or more than half of a step's mass lies above top (top below the loss's bulk)."""
    floor_fn, tail_fn = getattr(mech, "pld_loss_floor", None), getattr(mech, "pld_upper_tail", None)
    if floor_fn is None or tail_fn is None or not (0.0 <= eps_max < math.inf):
        return None
    floor = floor_fn(direction)
    if not math.isfinite(floor):
        return None
    # (any larger top is valid too: round up by far more than the few ulps of the two operations)
    top = eps_max - (times - 1) * floor
    top += 1e-12 * (abs(eps_max) + (times - 1) * abs(floor)) + 1e-300
    if not top > above:
        return None
    masses = tail_fn(top, direction)
    # a NaN or out-of-range bound certifies nothing; a thin upper tail only (the grid needs the bulk)
    if masses is None or not all(0.0 <= float(x) <= 1.0 for x in masses) or not masses[1] <= 0.5:
        return None
    return LossTail(int(times), top, eps_max, *(float(x) for x in masses))


class TailEvaluator:
    """A discretised-PLD evaluator of delta_lo (the grid of mu_lo^{*T}) plus the closed-form tail: the
    same interface (``upper``, ``lower``; every other attribute is the grid's)."""

    def __init__(self, ev, tail: LossTail):
        self.ev, self.tail = ev, tail

    def __getattr__(self, name):
        return getattr(self.ev, name)

    def upper(self, eps: float) -> float:
        return min(1.0, self.ev.upper(eps) + self.tail.delta(eps, True))

    def lower(self, eps: float) -> float:
        if eps < 0.0:
            # the grid's floor 1 - e^eps holds for the whole measure, not for mu_lo: a grid value above
            # it is the grid's own bound (add the tail's); otherwise the whole measure's floor stands
            floor = -math.expm1(eps)
            g = self.ev.lower(eps)
            own = g + self.tail.delta(eps, False) if g > floor else 0.0
            return max(own, floor * (1 - 1e-15))
        return self.ev.lower(eps) + self.tail.delta(eps, False)


__all__ = ["LossTail", "TailEvaluator", "loss_tail"]
