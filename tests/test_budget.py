"""Budget filters: a composition is accepted exactly when its certified epsilon is within the budget.

The filter answers most checks from a certified allowance (a larger count already certified within the
budget); these tests compare every decision with an independent fresh accountant queried at the same
ledger, and check that nothing is recorded on refusal.
"""

from __future__ import annotations

import pytest

from accountant import BudgetExceeded, PrivacyAccountant, PrivacyBudget
from mechanisms import Gaussian, Laplace, SubsampledGaussian


def _eps(entries, delta):
    a = PrivacyAccountant()
    for m, k in entries:
        a.compose(m, k)
    return a.epsilon(delta)


@pytest.mark.parametrize("budget_eps", [2.0, 5.0])
def test_step_loop_stops_exactly_at_the_certified_boundary(budget_eps):
    budget = PrivacyBudget(epsilon=budget_eps, delta=1e-5)
    acct = PrivacyAccountant(budget=budget)
    n = 0
    with pytest.raises(BudgetExceeded, match="nothing recorded"):
        for _ in range(100_000):
            acct.step(sigma=1.0, sample_rate=0.02)
            n += 1
    m = SubsampledGaussian(sigma=1.0, sample_rate=0.02)
    assert acct.ledger.total_count == n
    assert _eps([(m, n)], 1e-5) <= budget_eps < _eps([(m, n + 1)], 1e-5)
    assert acct.epsilon(1e-5) <= budget_eps


def test_allowance_does_not_survive_another_mechanism():
    budget = PrivacyBudget(epsilon=4.0, delta=1e-6)
    acct = PrivacyAccountant(budget=budget)
    acct.step(sigma=1.0, sample_rate=0.02, steps=10)  # certifies an allowance for this step
    acct.compose(Gaussian(sigma=5.0), 3)               # spends budget elsewhere
    g = SubsampledGaussian(sigma=1.0, sample_rate=0.02)
    n = acct.ledger.total_count - 3
    while True:
        try:
            acct.step(sigma=1.0, sample_rate=0.02, steps=50)
        except BudgetExceeded:
            break
        n += 50
    entries = [(g, n), (Gaussian(sigma=5.0), 3)]
    assert _eps(entries, 1e-6) <= 4.0 < _eps([(g, n + 50), (Gaussian(sigma=5.0), 3)], 1e-6)


def test_refusal_records_nothing_and_large_requests_are_checked():
    acct = PrivacyAccountant(budget=PrivacyBudget(epsilon=1.0, delta=1e-5))
    acct.compose(Laplace(scale=4.0), 2)
    before = acct.ledger
    with pytest.raises(BudgetExceeded):
        acct.compose(Laplace(scale=4.0), 10)
    assert acct.ledger == before
    acct.compose(Laplace(scale=4.0), 1)
    assert acct.epsilon(1e-5) <= 1.0


@pytest.mark.parametrize("boundary", [0, 1, 2, 3, 5, 63, 64, 65, 700, 1000, 1023, 1024, 5000])
@pytest.mark.parametrize("limit", [1, 7, 700, 1024, 3000])
def test_largest_count_equals_brute_force(boundary, limit):
    """The shared doubling/bisection search (budget allowance, max_steps) never returns a count that does
    not fit, also when the limit cuts the doubling short (max_steps used to return the limit unchecked)."""
    from accountant._search import largest_count

    seen = []

    def fits(n):
        seen.append(n)
        return n <= boundary

    got = largest_count(fits, limit)
    assert got == max((n for n in range(1, limit + 1) if n <= boundary), default=0)
    assert all(n <= limit for n in seen)
