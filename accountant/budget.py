"""Privacy budgets: a target (epsilon, delta) that refuses compositions exceeding it, and the cheap
certified check behind ``PrivacyAccountant(budget=...)`` (an RDP head start, then an allowance of
further uses certified once by the tight routes: O(1) per training step)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from conversions import rdp_to_dp
from mechanisms import validation as V
from mechanisms.base import Mechanism

from ._search import largest_count

if TYPE_CHECKING:  # annotations only (privacy_accountant imports this module)
    from .privacy_accountant import PrivacyAccountant

# budget allowance search: from the RDP-certified count, at most this many doublings, then an exact
# bisection (a few tight queries once, then O(1) checks); the RDP head start uses these orders
_ALLOWANCE_DOUBLINGS = 16
_ALLOWANCE_ORDERS = np.concatenate([1.0 + np.geomspace(1e-3, 0.9, 12), np.arange(2.0, 65.0),
                                    np.array([80.0, 96.0, 128.0, 192.0, 256.0])])


class BudgetExceeded(RuntimeError):
    """Raised when a composition would exceed the accountant's privacy budget (nothing is recorded)."""


@dataclass(frozen=True)
class PrivacyBudget:
    """A target (epsilon, delta): a filter that refuses any composition that would exceed it.

    The check uses the certified epsilon (an upper bound), so an accepted composition is guaranteed
    to be (epsilon, delta)-DP.
    """

    epsilon: float
    delta: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", V.real("budget epsilon", self.epsilon, low=0.0))
        object.__setattr__(self, "delta", V.delta(self.delta, "budget delta"))


def check_budget(acct: PrivacyAccountant, mechanism: Mechanism, times: int) -> None:
    """Raise :class:`BudgetExceeded` unless ``times`` more uses of ``mechanism`` fit the budget.

    Sound and cheap in training loops: the true epsilon of a composition never decreases when
    mechanisms are added (dropping outputs is post-processing), so once the ledger plus ``n`` uses of
    ``mechanism`` is certified within the budget, any ``times <= n`` is within it too.  The first
    accepted check therefore also certifies a larger count (RDP head start, doubling, then an
    interpolation search: a few tight queries); later checks of the same mechanism only compare with
    that allowance (O(1)).
    """
    if acct._allowance.get(mechanism, 0) >= times:
        return
    budget = acct.budget
    assert budget is not None

    def eps_at(n: int) -> float:
        return acct._copy_with(mechanism, n).epsilon(budget.delta)

    # a cheap certified head start: counts that fit under the RDP bound (an upper bound of the
    # tight route's epsilon, hence of the truth) fit for sure
    good, e_good = rdp_allowance(acct, mechanism), None
    if good < times:
        e_good = eps_at(times)
        if e_good > budget.epsilon:
            raise BudgetExceeded(
                f"composing {times} x {mechanism.describe()} would give epsilon {e_good:.6g} > budget "
                f"{budget.epsilon:.6g} at delta {budget.delta:.3g}; nothing recorded")
        good = times
    bad = e_bad = None
    for _ in range(_ALLOWANCE_DOUBLINGS):
        e = eps_at(2 * good)
        if e <= budget.epsilon:
            good, e_good = 2 * good, e
        else:
            bad, e_bad = 2 * good, e
            break
    # largest certified count in (good, bad): interpolation steps on eps(n) (smooth in n), with a
    # bisection whenever an interpolation step fails to halve the interval
    stalled = 0
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        if stalled < 2 and e_good is not None and math.isfinite(e_bad) and e_bad > e_good:
            frac = (budget.epsilon - e_good) / (e_bad - e_good)
            mid = min(max(good + int(round(frac * (bad - good))), good + 1), bad - 1)
        width = bad - good
        e = eps_at(mid)
        if e <= budget.epsilon:
            good, e_good = mid, e
        else:
            bad, e_bad = mid, e
        stalled = stalled + 1 if (bad - good) > width // 2 else 0
    acct._allowance = {mechanism: good}

def rdp_allowance(acct: PrivacyAccountant, mechanism: Mechanism) -> int:
    """Largest n with RDP-certified epsilon(ledger + n x mechanism) <= budget (0 if none or unknown).

    The improved conversion (Balle et al. 2020, Thm 21) on a fixed order grid, with a float margin of
    1e-10 (1 + |eps|); the composed curve is linear in n, so this is a cheap bisection.
    """
    budget = acct.budget
    if budget is None or acct._ledger.infinite_loss_mass > 0 or mechanism.infinite_loss_mass > 0:
        return 0
    alphas = _ALLOWANCE_ORDERS
    try:
        base = np.asarray(acct._ledger.rdp(alphas), dtype=float)
        per = np.asarray(mechanism.rdp(alphas), dtype=float)
    except (ValueError, TypeError, ArithmeticError):
        return 0
    term = rdp_to_dp.eps_at_orders(alphas, np.zeros_like(alphas), budget.delta)
    def fits(n: int) -> bool:
        with np.errstate(invalid="ignore", over="ignore"):
            v = base + n * per + term
        v = v[np.isfinite(v)]
        if not v.size:
            return False
        e = float(v.min())
        return e + 1e-10 * (1.0 + abs(e)) <= budget.epsilon  # float slack of the summed curve

    return largest_count(fits, V.MAX_COUNT)
