"""Dominated directions (:mod:`conversions.dominated`): a direction whose Chernoff bound lies below the
other direction's certified lower bound is not refined.

Checks: the Chernoff bound against the Gaussian pair's closed form (mpmath) and against another route's
certified lower bound of the same direction; the certificate with the shortcut equals the certificate
with both directions evaluated in full (an invariant: the shortcut may only save work).
"""

from __future__ import annotations

import math

import pytest
import reference as ref

from accountant import PrivacyAccountant
from conversions import dominated, pld
from mechanisms import Gaussian, SubsampledGaussian


def _gauss_delta_mp(eps: float, mu: float):
    return ref.gaussian_delta(eps, mu, as_mpf=True)


@pytest.mark.parametrize("sigma,steps", [(1.0, 1), (3.0, 50), (0.7, 4)])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_chernoff_upper_is_above_the_gaussian_closed_form(sigma, steps, direction):
    entries = [(Gaussian(sigma=sigma), steps)]
    mu = math.sqrt(steps) / sigma
    for delta in (1e-3, 1e-8):
        up = dominated.chernoff_upper(entries, "epsilon", delta, direction)
        assert up is not None
        assert _gauss_delta_mp(up, mu) <= delta  # eps(delta) <= up
        assert _gauss_delta_mp(up * 0.5, mu) > delta  # and not useless
    for eps in (0.1, 2.0):
        up = dominated.chernoff_upper(entries, "delta", eps, direction)
        assert up is not None and up >= _gauss_delta_mp(eps, mu)


@pytest.mark.parametrize("q,sigma,steps", [(1e-3, 0.5, 100), (1e-2, 1.0, 30)])
def test_chernoff_upper_is_above_the_pld_lower_bound(q, sigma, steps):
    entries = [(SubsampledGaussian(sigma=sigma, sample_rate=q), steps)]
    for direction in ("remove", "add"):
        up = dominated.chernoff_upper(entries, "epsilon", 1e-5, direction)
        ref = pld.pld_epsilon_bounds(entries, 1e-5, direction, 1e-3)
        assert up is not None and up >= ref.lower


def _cert(q, sigma, steps, query, value, method):
    acct = PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=steps)
    if query == "epsilon":
        return acct.certificate(delta=value, method=method)
    return acct.certificate(epsilon=value, method=method)


@pytest.mark.parametrize("method", ["cf", "pld", "auto"])
@pytest.mark.parametrize("q,sigma,steps,query,value", [
    (1e-3, 0.5, 100, "epsilon", 1e-5),  # add eps ~0.07, remove eps ~2.1
    (1e-3, 0.8, 100, "epsilon", 1e-5),
    (1e-3, 0.5, 100, "delta", 1.5),
])
def test_shortcut_leaves_the_certificate_unchanged(monkeypatch, q, sigma, steps, query, value, method):
    calls = []
    orig = dominated.chernoff_upper

    def spy(*args):
        up = orig(*args)
        calls.append(up)
        return up

    monkeypatch.setattr(dominated, "chernoff_upper", spy)
    fast = _cert(q, sigma, steps, query, value, method)
    assert calls, "the second direction was not checked for domination"
    monkeypatch.setattr(dominated, "chernoff_upper", lambda *a: None)
    full = _cert(q, sigma, steps, query, value, method)
    assert (fast.epsilon, fast.delta, fast.lower_bound) == (full.epsilon, full.delta, full.lower_bound)
    assert fast.lower_bound is not None
    if sigma == 0.5:  # (the add direction is far below the remove direction: the shortcut was taken)
        assert calls[-1] is not None and calls[-1] <= fast.lower_bound
        assert fast.details.get("dominated_directions") == "add"


def _pld_runner(entries):
    """(run(direction) -> the discretised PLD's eps(1e-5) bracket, the list of directions it ran)."""
    ran = []

    def run(d):
        ran.append(d)
        return pld.pld_epsilon_bounds(entries, 1e-5, d, 1e-3)

    return run, ran


def test_dominated_direction_gets_a_zero_based_bracket():
    entries = [(SubsampledGaussian(sigma=0.5, sample_rate=1e-3), 100)]
    run, ran = _pld_runner(entries)
    res = dominated.each_direction(entries, ("remove", "add"), "epsilon", 1e-5, run)
    assert ran == ["remove"]
    add = res[1]
    assert add.direction == "add" and add.lower == 0.0 and add.details["dominated"]
    assert add.upper <= res[0].lower
    # a first direction with lower bound 0 never makes the second one dominated
    res = dominated.each_direction(entries, ("add", "remove"), "epsilon", 1e-5, run)
    assert ran == ["remove", "add", "remove"]


def test_floor_from_another_route_makes_a_direction_dominated():
    # a certified lower bound from elsewhere (here the remove direction's, by the discretised PLD) lets
    # even the first direction evaluated be skipped when its Chernoff bound is below it
    entries = [(SubsampledGaussian(sigma=0.5, sample_rate=1e-3), 100)]
    floor = pld.pld_epsilon_bounds(entries, 1e-5, "remove", 1e-3).lower
    run, ran = _pld_runner(entries)
    res = dominated.each_direction(entries, ("add", "remove"), "epsilon", 1e-5, run, floor)
    assert ran == ["remove"]
    assert res[0].direction == "add" and res[0].lower == 0.0 and res[0].upper <= floor
    assert res[1].lower >= floor * (1 - 1e-12)


def test_chernoff_upper_declines_ledgers_without_a_loss_distribution():
    from mechanisms import ZCDP

    m = ZCDP(rho=0.5)
    assert not m.pld_available
    assert dominated.chernoff_upper([(m, 2)], "epsilon", 1e-5, "remove") is None


def test_chernoff_upper_never_rounds_a_positive_delta_to_zero():
    # far in the tail the Chernoff value underflows while the true delta (mpmath) is still positive:
    # the bound must stay above it (the contour fallback's floor, shared)
    entries = [(Gaussian(sigma=1.0), 1)]
    for eps in (800.0, 1e4):
        up = dominated.chernoff_upper(entries, "delta", eps, "remove")
        truth = _gauss_delta_mp(eps, 1.0)
        assert truth > 0 and up is not None and up > 0.0 and up >= truth
