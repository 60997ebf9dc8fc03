"""The plug-in contract end to end: a new mechanism with its own exact route, and a new numerical route,
each one file (``examples/plugin_mechanism.py``, ``examples/enumeration_route.py``) plus one registration
line, with no edit of the library.

Independent references: the privacy profile computed by brute force over the *output* space of the
composed mechanisms (products of the per-report output distributions, hockey-stick divergence
sum_y max(0, P(y) - e^eps Q(y)) in 40-digit mpmath), which uses neither the privacy-loss atoms nor the
routes' formulas.  Everything registered here is unregistered afterwards.
"""

from __future__ import annotations

import importlib.util
import json
import math
import pathlib
import sys

import mpmath as mp
import pytest

from accountant import PrivacyAccountant, routes
from mechanisms import ApproxDP, Gaussian, RandomizedResponse, registry
from mechanisms.conformance import check_mechanism

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"dpcert_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # (dataclasses resolve the module by name)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def ex():
    """The two example modules (importing the first registers the mechanism: its one ``@register``)."""
    assert "unary_encoding" not in registry.available()
    plugin, enum = _load("plugin_mechanism"), _load("enumeration_route")
    yield plugin, enum
    registry.unregister(plugin.UnaryEncoding)
    for mod in (plugin, enum):
        sys.modules.pop(mod.__name__, None)


@pytest.fixture
def registered(ex):
    """The two routes, each registered with its one line, and removed afterwards."""
    plugin, enum = ex
    exact, brute = plugin.UnaryEncodingExactRoute(), enum.EnumerationRoute()
    routes.register_route(exact, before="cf")
    routes.register_route(brute, before="cf")
    yield plugin, enum
    routes.unregister_route(brute)
    routes.unregister_route(exact)


# ---------------------------------------------------------------------------------------------- references
def _product(pairs):
    """The composed pair (P, Q) of independent uses, each a pair of output distributions (lists)."""
    out_p, out_q = {(): mp.mpf(1)}, {(): mp.mpf(1)}
    for p, q in pairs:
        out_p = {k + (i,): v * p[i] for k, v in out_p.items() for i in range(len(p))}
        out_q = {k + (i,): v * q[i] for k, v in out_q.items() for i in range(len(q))}
    return out_p, out_q


def _hockey(pq, eps) -> mp.mpf:
    """delta(eps) = sum_y max(0, P(y) - e^eps Q(y)) (both orders of the pair: the larger)."""
    p, q = pq
    e = mp.exp(mp.mpf(eps))
    return max(mp.fsum(max(0, p[y] - e * q[y]) for y in p), mp.fsum(max(0, q[y] - e * p[y]) for y in p))


def _unary_pair(p: float, q: float, d: int):
    """Output distributions of d-bit unary encoding for the values 0 and 1 (bit vectors as integers)."""
    p, q = mp.mpf(p), mp.mpf(q)

    def dist(x):
        probs = []
        for y in range(2 ** d):
            pr = mp.mpf(1)
            for b in range(d):
                on = p if b == x else q
                pr *= on if (y >> b) & 1 else 1 - on
            probs.append(pr)
        return probs

    return dist(0), dist(1)


def _rr_pair(eps: float, k: int):
    e = mp.exp(mp.mpf(eps))
    z = e + k - 1
    return [e / z] + [1 / z] * (k - 1), [1 / z, e / z] + [1 / z] * (k - 2)


def _approx_pair(eps: float, delta: float):
    """The four-point pair of an (eps, delta)-DP block (Kairouz, Oh & Viswanath 2015)."""
    e, dl = mp.exp(mp.mpf(eps)), mp.mpf(delta)
    hi, lo = (1 - dl) * e / (1 + e), (1 - dl) / (1 + e)
    return [dl, hi, lo, 0], [0, lo, hi, dl]


def _eps_brackets_ok(pq, delta, cert):
    """The brute-force profile confirms the epsilon bracket: delta(upper) <= delta <= delta(lower)."""
    assert _hockey(pq, cert.epsilon) <= delta
    assert cert.lower_bound is not None and _hockey(pq, cert.lower_bound) >= delta


# ---------------------------------------------------------------------------------------------- the mechanism
def test_mechanism_contract_registry_and_validation(ex):
    plugin, _ = ex
    ue = plugin.UnaryEncoding
    assert "unary_encoding" in registry.available() and registry.get("unary_encoding") is ue
    for m in (ue.optimized(1.0), ue(0.75, 0.25), ue(0.9, 1e-3), ue.example()):
        check_mechanism(m)  # JSON round trip, RDP monotone, MGF vs RDP, TV in [0, 1], cell masses
        assert registry.from_dict(json.loads(json.dumps(m.to_dict()))) == m
    # the local epsilon of OUE is its parameter (Wang et al. 2017): E = log((1 - q) / q) at p = 1/2
    assert ue.optimized(0.7).epsilon == pytest.approx(0.7, rel=1e-15)
    # TV = p - q: the hockey-stick divergence at eps = 0, by brute force over 3-bit outputs
    assert ue(0.75, 0.25).total_variation() >= _hockey(_product([_unary_pair(0.75, 0.25, 3)]), 0.0)
    for bad in [dict(p=1.0, q=0.5), dict(p=0.5, q=0.5), dict(p=0.5, q=0.0), dict(p=0.5, q=-0.1)]:
        with pytest.raises(ValueError, match=r"\b[pq] must lie in"):
            ue(**bad)
    with pytest.raises(TypeError, match="p must be a real number"):
        ue("0.5", 0.1)
    with pytest.raises(ValueError, match="not defined under the 'add_remove' relation"):
        PrivacyAccountant().compose(ue.optimized(1.0))


def test_accountant_state_round_trip(ex, tmp_path):
    plugin, _ = ex
    acct = PrivacyAccountant(relation="replace_one").compose(plugin.UnaryEncoding(0.75, 0.25), 4)
    acct.compose(RandomizedResponse(epsilon=0.5), 2)
    path = tmp_path / "state.json"
    acct.save(path)
    back = PrivacyAccountant.load(path)
    assert back.ledger.items() == acct.ledger.items()
    assert back.certificate(delta=1e-6) == acct.certificate(delta=1e-6)


# ------------------------------------------------------------------------------------------ the exact route
@pytest.mark.parametrize("p, q, d, t", [(0.5, 0.25, 3, 2), (0.75, 0.25, 2, 5),
                                        (0.5, 1 / (1 + math.e ** 2), 2, 4), (0.6, 0.5, 2, 3)])
@pytest.mark.parametrize("eps", [0.0, 0.3, 1.5, 4.0])
def test_exact_route_matches_brute_force(registered, p, q, d, t, eps):
    plugin, _ = registered
    mp.mp.dps = 40
    ref_pair = _product([_unary_pair(p, q, d)] * t)
    acct = PrivacyAccountant(relation="replace_one").compose(plugin.UnaryEncoding(p, q), t)
    cert = acct.certificate(epsilon=eps, method="exact")
    assert cert.method == "exact" and cert.bound == "exact"
    ref = _hockey(ref_pair, eps)
    assert cert.lower_bound <= ref <= cert.delta
    assert cert.delta - cert.lower_bound <= 1e-15 * max(float(ref), 1e-300) + 1e-300
    for delta in (1e-9, 1e-3, 0.1):
        c = acct.certificate(delta=delta, method="exact")
        if c.epsilon > 0.0:
            _eps_brackets_ok(ref_pair, delta, c)
            assert c.epsilon - c.lower_bound <= 1e-14 * c.epsilon
        else:
            assert _hockey(ref_pair, 0.0) <= delta


def test_exact_route_is_chosen_and_agrees_with_cf(registered):
    plugin, _ = registered
    acct = PrivacyAccountant(relation="replace_one").compose(plugin.UnaryEncoding.optimized(0.5), 20)
    auto = acct.certificate(delta=1e-6)
    assert auto.method == "exact" and auto.bound == "exact"
    cf = acct.certificate(delta=1e-6, method="cf")  # both certified: the brackets intersect
    assert max(cf.lower_bound, auto.lower_bound) <= min(cf.epsilon, auto.epsilon)
    assert acct.certificate(delta=1e-6, method="rdp").epsilon >= auto.lower_bound
    # beyond MAX_T uses (or with another mechanism in the ledger) the route steps aside
    big = PrivacyAccountant(relation="replace_one").compose(plugin.UnaryEncoding.optimized(0.5),
                                                            plugin.UnaryEncodingExactRoute.MAX_T + 1)
    assert "exact" not in big._valid_methods()
    mixed = PrivacyAccountant(relation="replace_one").compose(plugin.UnaryEncoding.optimized(0.5), 2)
    mixed.compose(Gaussian(sigma=3.0))
    assert "exact" not in mixed._valid_methods()


# -------------------------------------------------------------------------------------- the numerical route
def _mixed(plugin):
    acct = PrivacyAccountant(relation="replace_one")
    acct.compose(RandomizedResponse(epsilon=0.5, k=3), 2).compose(plugin.UnaryEncoding(0.7, 0.2), 2)
    acct.compose(ApproxDP(epsilon=0.3, delta=1e-3))
    pq = _product([_rr_pair(0.5, 3)] * 2 + [_unary_pair(0.7, 0.2, 2)] * 2 + [_approx_pair(0.3, 1e-3)])
    return acct, pq


@pytest.mark.parametrize("eps", [0.0, 0.4, 1.0, 2.5])
def test_enumeration_route_matches_brute_force(registered, eps):
    plugin, _ = registered
    mp.mp.dps = 40
    acct, pq = _mixed(plugin)
    cert = acct.certificate(epsilon=eps, method="enumerate")
    assert cert.method == "enumerate"
    ref = _hockey(pq, eps)
    assert cert.lower_bound <= ref <= cert.delta
    assert cert.delta - cert.lower_bound <= 1e-12 * float(ref)
    for delta in (2e-3, 1e-2, 0.2):
        _eps_brackets_ok(pq, delta, acct.certificate(delta=delta, method="enumerate"))
    # below the infinite-loss mass (1e-3) no finite epsilon exists
    assert acct.certificate(delta=5e-4, method="enumerate").epsilon == math.inf


def test_enumeration_route_is_considered_by_auto(registered):
    plugin, _ = registered
    acct, _ = _mixed(plugin)
    auto = acct.certificate(delta=1e-2)
    # registered before cf: auto runs it first, and its bracket is narrow enough to skip the others
    assert auto.method == "enumerate" and "cf" in auto.details["skipped_routes"]
    full = acct.certificate(delta=1e-2, compare=True)
    assert {"enumerate", "cf", "rdp"} <= set(full.candidates)
    assert full.epsilon == min(full.candidates.values())
    # a ledger with a continuous mechanism is not atomic: the route does not apply
    assert "enumerate" not in PrivacyAccountant().compose(Gaussian(sigma=1.0), 2)._valid_methods()


def test_enumeration_route_declines_large_supports(registered):
    _, enum = registered
    acct = PrivacyAccountant()
    for e in (0.1, 0.2 ** 0.5, 0.3 ** 0.5):  # incommensurate losses: the support multiplies (25^3)
        acct.compose(RandomizedResponse(epsilon=e, k=3), 12)
    with pytest.raises(routes.RouteUnavailable, match="support exceeds"):
        acct.certificate(delta=1e-5, method="enumerate")
    cert = acct.certificate(delta=1e-5)
    assert cert.method != "enumerate" and "enumerate unavailable" in cert.details["route_notes"]


# ---------------------------------------------------------------------------------------------- clean-up
def test_example_runs_and_cleans_up(ex, capsys):
    plugin, _ = ex
    plugin.main()
    out = capsys.readouterr().out
    assert "exact" in out and "auto picks: exact" in out
    assert "enumerate" not in routes.route_names()
    assert not any(isinstance(r, plugin.UnaryEncodingExactRoute) for r in routes.ROUTES)
