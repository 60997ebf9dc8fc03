"""Certified lower bounds for ledgers whose dominating pairs are not attained (shuffling, balls-in-bins,
fixed-size batches under replace-one).

A mechanism may declare ``attained_lower_pair()``: a mechanism (with ``pld_cell_masses``) whose pair is
realised -- exactly, or after a post-processing of the outputs -- by explicit neighbouring datasets, so
that its composed privacy profile is at most the mechanism's true one.  Tight mechanisms are their own
attained pair.  In the adaptive-query model of DP-SGD (every step's gradient map is arbitrary, Chua et
al. 2024) the constructions of different ledger entries are realised by one pair of datasets at once, so
the composition of the attained pairs lower-bounds the composed mechanism.  Epochs still in progress
(a partial epoch is charged in full to the upper bound) are left out, which only lowers the bound
(dropping releases is post-processing).

The lower bound is the certified lower end of the discretised-PLD bracket (:mod:`conversions.pld`) of
the attained ledger, the larger of its two directions (each direction is a pair of explicit datasets).
"""

from __future__ import annotations

import math

from mechanisms.base import Mechanism
from mechanisms.max_statistic import attained_lower_mechanism

#: target relative width of the lower-bound computation (the bound is certified whatever the width)
RTOL = 1e-3


def attained_entries(items, partial: dict | None = None) -> list[tuple[Mechanism, int]] | None:
    """The attained ledger: ``[(attained mechanism, count)]``, or None if some entry has none.

    ``partial`` maps a mechanism to 1 when its last charged epoch is still in progress (left out).
    """
    partial = partial or {}
    out: list[tuple[Mechanism, int]] = []
    for m, k in items:
        a = attained_lower_mechanism(m)
        if a is None:
            return None
        k = int(k) - int(partial.get(m, 0))
        if k > 0:
            if getattr(a, "pld_cell_masses", None) is None or not getattr(a, "pld_available", False):
                return None
            out.append((a, k))
    return out


def lower_bound(items, query: str, value: float, partial: dict | None = None) -> float | None:
    """Certified lower bound on epsilon(delta = value) or delta(epsilon = value), or None.

    Only for ledgers with at least one entry that declares an attained pair (otherwise the tight routes
    give the lower bounds).
    """
    items = list(items)
    if not any(hasattr(m, "attained_lower_pair") for m, _ in items):
        return None
    ents = attained_entries(items, partial)
    if ents is None:
        return None
    if not ents:
        return 0.0
    from conversions import pld

    best = None
    for direction in ("remove", "add"):
        try:
            if query == "epsilon":
                r = pld.pld_epsilon_bounds(ents, value, direction, RTOL)
            else:
                r = pld.pld_delta_bounds(ents, value, direction, RTOL)
        except (ValueError, ArithmeticError, OverflowError):
            continue
        lo = float(r.lower)
        if math.isfinite(lo) and (best is None or lo > best):
            best = lo
    return best
