"""Routes as objects and the certified-result type.

Checks against independent references: the mu-GDP closed form evaluated in mpmath, and the tight
privacy profile of pure eps-DP (randomized response, Kairouz et al. 2015) for the example route.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath as mp
import numpy as np
import pytest

from accountant import PrivacyAccountant, routes
from conversions.bracket import Bracket
from mechanisms import Gaussian, Laplace, PureDP, RandomizedResponse, SubsampledGaussian
from mechanisms.base import Mechanism


def _gdp_delta_mp(eps: float, mu: float) -> float:
    mp.mp.dps = 40
    e, m = mp.mpf(eps), mp.mpf(mu)
    return float(mp.ncdf(-e / m + m / 2) - mp.exp(e) * mp.ncdf(-e / m - m / 2))


# ---------------------------------------------------------------------------------------------- Bracket
def test_bracket_kinds_and_error():
    b = Bracket.exact(1.0 + 1e-12, 1.0 - 1e-12, 1.0)
    assert b.kind == "exact" and b.error == pytest.approx(1e-12)
    u = Bracket.upper_only(2.5, {"alpha": 3.0})
    assert u.lower is None and u.error == 0.0 and u.kind == "upper bound"
    assert Bracket.upper_only(math.inf).error == math.inf
    with pytest.raises(ValueError, match="kind"):
        Bracket(1.0, 0.5, 0.7, "approximately")
    with pytest.raises(FloatingPointError):
        Bracket(math.nan, 0.5, 0.7, "bracketed")
    assert b.with_lower(0.5).lower == 0.5 and b.with_details(x=1).details == {"x": 1}


# ---------------------------------------------------------------------------------------------- registry
def test_route_order_and_methods():
    names = routes.route_names()
    assert names[:5] == ("exact", "count", "cf", "pld", "rdp") and "rdp_classic" in names
    assert routes.methods()[0] == "auto"
    for r in routes.ROUTES:
        assert isinstance(r, routes.Route)
    acct = PrivacyAccountant().compose(Gaussian(sigma=2.0), 3)
    assert acct._valid_methods() == ["exact", "cf", "pld", "rdp", "rdp_classic"]
    acct = PrivacyAccountant().compose(Laplace(scale=2.0), 1)
    assert acct._valid_methods()[0] == "exact"
    acct = PrivacyAccountant().compose(Laplace(scale=2.0), 2)
    assert "exact" not in acct._valid_methods()


def test_register_route_rejects_bad_routes():
    with pytest.raises(TypeError):
        routes.register_route(object())
    with pytest.raises(ValueError, match="reserved"):
        routes.register_route(_PureBasicRoute("auto"))
    with pytest.raises(ValueError, match="no route named"):
        routes.register_route(_PureBasicRoute("basic"), before="nonexistent")


# ------------------------------------------------------------------------ a plug-in exact route
@dataclass(frozen=True)
class _SumQueryGaussian(Mechanism):
    """Third-party mechanism: a Gaussian sum query, noise sigma, clipping norm c (one file, no core edits)."""

    sigma: float
    clip: float = 1.0
    name = "test_sum_query_gaussian"

    def rdp(self, alpha):
        return np.asarray(alpha, dtype=float) * (self.clip / self.sigma) ** 2 / 2

    @property
    def pure_epsilon(self) -> float:
        return math.inf

    @property
    def gdp_mu(self) -> float:
        return self.clip / self.sigma


@pytest.mark.parametrize("eps", [0.0, 0.5, 2.0, 5.0])
def test_plugin_gdp_hook_gets_the_exact_route(eps):
    acct = PrivacyAccountant().compose(_SumQueryGaussian(sigma=3.0, clip=2.0), 4)
    acct.compose(Gaussian(sigma=1.5), 2)
    mu = math.sqrt(4 * (2.0 / 3.0) ** 2 + 2 * (1 / 1.5) ** 2)
    cert = acct.certificate(epsilon=eps)
    assert cert.method == "exact" and cert.bound == "exact"
    ref = _gdp_delta_mp(eps, mu)
    assert cert.lower_bound <= ref <= cert.delta
    assert cert.delta == pytest.approx(ref, rel=1e-12)


# ------------------------------------------------------------------------ a new numerical route
class _PureBasicRoute:
    """Example route: basic composition of pure DP. A ledger that is eps_tot-DP (eps_tot = sum k_j eps_j)
    has delta(eps) <= (e^eps_tot - e^eps) / (1 + e^eps_tot) for eps <= eps_tot (the tight profile of
    eps_tot-randomized response dominates every eps_tot-DP pair; Kairouz, Oh & Viswanath 2015)."""

    def __init__(self, name: str = "basic"):
        self.name = name

    def applies(self, ledger) -> bool:
        return math.isfinite(ledger.pure_epsilon) and ledger.infinite_loss_mass == 0.0

    def delta(self, ledger, epsilon, ctx):
        e = ledger.pure_epsilon
        d = 0.0 if epsilon >= e else (math.exp(e) - math.exp(epsilon)) / (1 + math.exp(e))
        return Bracket.upper_only(min(1.0, d * (1 + 1e-14)))

    def epsilon(self, ledger, delta, ctx):
        e = ledger.pure_epsilon
        # smallest eps with (e^E - e^eps)/(1 + e^E) <= delta, rounded up
        x = math.exp(e) - delta * (1 + math.exp(e))
        eps = max(0.0, math.log(x)) if x > 0 else 0.0
        return Bracket.upper_only(min(e, eps * (1 + 1e-14) + 1e-300))


def test_new_route_is_one_class_and_one_registration():
    route = _PureBasicRoute()
    routes.register_route(route, before="rdp")
    try:
        acct = PrivacyAccountant().compose(RandomizedResponse(epsilon=0.5), 3)
        assert "basic" in acct._valid_methods()
        c = acct.certificate(epsilon=0.4, method="basic")
        assert c.method == "basic" and c.bound == "upper bound"
        # sound: the exact lattice delta of 3-fold RR(0.5) (binomial enumeration) is below it
        p = math.exp(0.5) / (1 + math.exp(0.5))
        exact = 0.0
        for k in range(4):
            loss = 0.5 * (2 * k - 3)
            w = math.comb(3, k) * p**k * (1 - p) ** (3 - k)
            exact += max(0.0, w * (1 - math.exp(0.4 - loss)))
        assert exact <= c.delta
        full = acct.certificate(epsilon=0.4, compare=True)
        assert "basic" in full.candidates and full.delta == min(full.candidates.values())
        assert PrivacyAccountant().compose(Gaussian(sigma=1.0)).certificate(delta=1e-5).method == "exact"
    finally:
        routes.unregister_route(route)
    assert "basic" not in routes.route_names()
    with pytest.raises(ValueError, match="method must be one of"):
        PrivacyAccountant().compose(PureDP(epsilon=1.0)).certificate(delta=1e-5, method="basic")


def test_unavailable_method_names_the_valid_routes():
    acct = PrivacyAccountant().compose(SubsampledGaussian(sigma=1.0, sample_rate=0.1), 10)
    names = r"\['count', 'cf', 'pld', 'rdp', 'rdp_classic'\]"
    with pytest.raises(ValueError, match=r"available: " + names + r".*closed forms"):
        acct.certificate(delta=1e-5, method="exact")


def test_auto_skips_rdp_only_where_it_could_not_improve_the_answer():
    """``method="auto"`` skips the RDP route once the bracket is within its ``auto_skip_rtol`` (1e-4):
    the RDP bound is at least the true epsilon, which is at least the certified lower bound, so the
    skip costs at most that fraction.  At sigma = 10 the RDP curve is the slow part of the query (high
    orders); the RDP route run on its own must not beat the auto answer by more than the skip rtol."""
    acct = PrivacyAccountant().step(sigma=10.0, sample_rate=1e-3, steps=100)
    cert = acct.certificate(delta=1e-5)
    assert "rdp" in cert.details["skipped_routes"].split(",")
    assert cert.epsilon - cert.lower_bound <= 1e-4 * cert.epsilon
    rdp = acct.certificate(delta=1e-5, method="rdp")
    assert cert.epsilon <= rdp.epsilon * (1.0 + 1e-4)
    assert cert.lower_bound <= rdp.epsilon  # (the RDP bound is an upper bound: above every lower bound)


def test_auto_skips_the_pld_within_its_absolute_resolution_for_small_epsilon(monkeypatch):
    """For eps < 0.1 the discretised PLD aims at 0.1 x its rtol absolute (1e-4): ``auto`` skips it when the
    bracket is already within that and within 10 x its relative resolution (q = 1e-5, sigma = 1,
    T = 1000, delta = 1e-8: the contour's bracket is ~6e-6 wide at eps ~ 0.0019, 3e-3 relative).  The
    PLD run alone must not beat that answer by more than its resolution.  (Such a ledger, q T = 0.01,
    now defers the contour to the PLD: the contour is made to split at once, as it did before, to reach
    the rule.)"""
    from accountant.routes import CharacteristicFunctionRoute

    monkeypatch.setattr(CharacteristicFunctionRoute, "SPLIT_FIRST_HITS", 1e-3)
    acct = PrivacyAccountant().step(sigma=1.0, sample_rate=1e-5, steps=1000)
    cert = acct.certificate(delta=1e-8)
    assert cert.method == "cf" and "pld" in cert.details["skipped_routes"].split(",")
    assert "absolute 0.0001" in cert.details["skip_reasons"]
    assert cert.epsilon - cert.lower_bound <= 1e-4 and cert.epsilon < 0.1
    pld = acct.certificate(delta=1e-8, method="pld")
    assert cert.epsilon <= pld.epsilon + 1e-4
    assert pld.lower_bound <= cert.epsilon and cert.lower_bound <= pld.epsilon  # (both certified)


def test_auto_skips_rdp_within_its_resolution_and_it_would_not_have_won():
    """``auto`` skips the RDP route once the bracket is within 1e-3 relative (its ``auto_skip_rtol``):
    q = 1e-4, sigma = 1, T = 1000, delta = 1e-12, where the contour's bracket is ~1e-4 relative.  Run
    alone, the RDP bound is far above that answer (it could not have improved it)."""
    acct = PrivacyAccountant().step(sigma=1.0, sample_rate=1e-4, steps=1000)
    cert = acct.certificate(delta=1e-12)
    assert cert.method == "cf" and "rdp" in cert.details["skipped_routes"].split(",")
    assert cert.epsilon - cert.lower_bound <= 1e-3 * cert.epsilon
    rdp = acct.certificate(delta=1e-12, method="rdp")
    assert rdp.epsilon > 2.0 * cert.epsilon and rdp.epsilon >= cert.lower_bound


def test_near_atomic_ledgers_skip_the_plain_contour_plan(monkeypatch):
    """A ledger touching an example at most ``SPLIT_FIRST_HITS`` times in expectation (q = 1e-5,
    sigma = 0.4, T = 1000: sum k q = 0.01) is near-atomic: its plain contour is not planned at all (the
    plan, ~10-20 ms, was capped on every such ledger of the regimes sweep).  The answer is still
    certified: it brackets the discretised PLD's answer, an independent route."""
    from conversions import contour

    def no_plan(*a, **k):
        raise AssertionError("the plain contour was planned")

    acct = PrivacyAccountant().step(sigma=0.4, sample_rate=1e-5, steps=1000)
    pld = acct.certificate(delta=1e-5, method="pld")
    monkeypatch.setattr(contour, "epsilon_bounds", no_plan)  # (the plain contour; the split is apart)
    cert = acct.certificate(delta=1e-5)
    assert cert.method == "cf" and cert.details.get("split") is True
    assert "near-atomic ledger" in cert.details["route_notes"]
    assert cert.lower_bound <= pld.epsilon and pld.lower_bound <= cert.epsilon  # (both certified)
    assert cert.epsilon - cert.lower_bound <= 1e-3 * cert.epsilon


def test_near_atomic_ledger_within_total_variation_answers_zero_on_every_route():
    """q = 1e-6, sigma = 1, T = 10: the composed total variation is at most T q TV(N(1, 1), N(0, 1)) =
    1e-5 (2 Phi(1/2) - 1) < delta = 1e-5, so eps = 0 is certified (the contour's total-variation cap,
    reached before any plan; the split, asked first by ``method="cf"`` for a near-atomic ledger, answers
    the same)."""
    from scipy.stats import norm

    acct = PrivacyAccountant().step(sigma=1.0, sample_rate=1e-6, steps=10)
    assert 10 * 1e-6 * (2.0 * norm.cdf(0.5) - 1.0) < 1e-5
    for method in ("auto", "cf"):
        cert = acct.certificate(delta=1e-5, method=method)
        assert cert.epsilon == 0.0 and cert.details.get("reason") == "total-variation cap"


def test_near_atomic_delta_queries_split_first():
    """A delta query on a near-atomic ledger is not deferred to the discretised PLD: its delta grid is set
    by the target alone (T Delta ~ rtol), not by the query's eps, and at q = 1e-4, sigma = 2, T = 100,
    eps = 9.576e-4 it ran 2.4 s (capped) before the split answered in ~20 ms.  The split's bracket is
    within auto's target and meets the PLD's (an independent route, here at 1e-2)."""
    from conversions import pld

    acct = PrivacyAccountant().step(sigma=2.0, sample_rate=1e-4, steps=100)
    eps = 9.575901970801822e-4
    cert = acct.certificate(epsilon=eps)
    assert cert.method == "cf" and cert.details.get("split") is True
    assert "pld" in cert.details.get("skipped_routes", "").split(",")
    assert cert.delta - cert.lower_bound <= 1e-3 * cert.delta
    p = pld.pld_delta_bounds(acct._ledger.items(), eps, "remove", 1e-2)
    assert cert.lower_bound <= p.upper and p.lower <= cert.delta
