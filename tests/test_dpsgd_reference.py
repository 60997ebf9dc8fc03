"""DP-SGD (Poisson-subsampled Gaussian, add/remove) at small sample rates and many steps: the library's
certified brackets against an independent high-precision reference.

The reference (``tests/reference_dpsgd.py``: MGF inversion with a shifted complex x-line and Gauss-Legendre
t-panels in exact fixed-point arithmetic, no library code) is too slow to run for every setting in the
default run, so its values are stored in ``tests/data/dpsgd_reference.json`` by
``tests/make_dpsgd_reference.py`` (which records the method, precision, accuracy checks and date); the
slow tests recompute some of them live so the stored numbers stay honest.

Containment checks: a certified epsilon bracket must satisfy lower <= eps_true <= upper, and a delta
bracket lower <= delta_true <= upper.  The reference's own error (``eps_err``: ten times the disagreement
of two runs with different lines and every discretisation refined, at least 4 ulp) is allowed on the side
that keeps each assertion a *necessary* condition for soundness; it is ~1e-15 relative, far below every
bracket's width.
"""

from __future__ import annotations

import json
import math
import os

import mpmath as mp
import pytest
import reference_dpsgd as R
import reference_subsampled as RS

DATA_PATH = os.path.join(os.path.dirname(__file__), "data", "dpsgd_reference.json")
with open(DATA_PATH) as _f:
    DATA = json.load(_f)
SETS = DATA["settings"]


def _sid(s: dict) -> str:
    return f"q{s['q']:g}-s{s['sigma']:g}-T{s['T']:g}-d{s['delta']:g}"


# ===================================================================================== reference self-tests
@pytest.mark.parametrize("lam,sigma,q", [(3, 1.0, 1e-3), (10, 1.0, 1e-5), (5, 2.0, 1e-6),
                                         pytest.param(20, 0.8, 1e-4, marks=pytest.mark.slow),
                                         pytest.param(4, 0.4, 1e-5, marks=pytest.mark.slow)])
def test_x_rule_equals_integer_order_closed_form(lam, sigma, q):
    """M_remove(lam - 1) = E_Q[(p/q)^lam] by the shifted-line trapezoid rule equals the binomial closed form
    (Mironov, Talwar & Zhang 2019) to 1e-40 relative."""
    with mp.workdps(70):
        a = R.log_mgf(lam - 1, sigma, q, "remove")
        b = mp.log(R.remove_mgf_integer(lam, sigma, q))
        assert abs(a - b) <= mp.mpf("1e-40") * max(1, abs(b))


def _mgf_real_line(s, sigma, q, direction):
    """M(s) by tanh-sinh on the *real* x-line (no contour shift): E_N(0, s^2)[(1 + u)^a]."""
    with mp.workdps(40):
        s, sg, qq = mp.mpc(s), mp.mpf(sigma), mp.mpf(q)
        a = s + 1 if direction == "remove" else -s

        def f(x):
            u = qq * mp.expm1((2 * x - 1) / (2 * sg * sg))
            return mp.npdf(x, 0, sg) * mp.exp(a * mp.log1p(u))

        pts = [-mp.inf] + [mp.mpf(v) / 2 for v in range(-30, 61)] + [mp.inf]
        return mp.quad(f, pts)


@pytest.mark.parametrize("direction,s", [("remove", (2.0, 3.0)),
                                         pytest.param("add", (1.5, 4.0), marks=pytest.mark.slow),
                                         pytest.param("remove", (0.3, 11.0), marks=pytest.mark.slow)])
def test_shifted_line_equals_real_line(direction, s):
    """The contour shift of the x-rule (Cauchy) changes nothing: M(c + it) on the shifted line equals the
    real-line quadrature (mpmath tanh-sinh, 0.5-wide pieces) to 1e-25 relative."""
    z = mp.mpc(*s)
    with mp.workdps(60):
        a = mp.exp(R.log_mgf(z, 1.0, 1e-3, direction))
        b = _mgf_real_line(z, 1.0, 1e-3, direction)
        assert abs(a - b) <= mp.mpf("1e-25") * abs(b)


def test_T1_closed_form_is_a_profile():
    """The T = 1 closed form used below equals the independent one in tests/reference_subsampled.py."""
    for d in ("remove", "add"):
        for eps in (0.0, 0.01, 0.3, 1.2):
            a = R.delta_T1_closed(eps, 1.3, 0.2, d)
            b = RS.sg_delta_ref(eps, 1.3, 0.2, 1, d, as_mpf=True)
            assert abs(a - b) <= mp.mpf("1e-25") * max(b, mp.mpf("1e-300"))


@pytest.mark.slow
@pytest.mark.parametrize("direction,eps", [("remove", 1.0), ("add", 0.2)])
def test_inversion_T1_equals_closed_form(direction, eps):
    """The whole inversion machinery at T = 1 (the hardest case for it: no decay from T) equals the closed
    form (Gaussian CDFs at the loss threshold)."""
    r = R.delta_ref(eps, 1.5, 0.5, 1, direction, rtol=1e-10, hf_tol=1e-16)
    ex = R.delta_T1_closed(eps, 1.5, 0.5, direction)
    assert abs(r.value_mp - ex) <= mp.mpf("1e-11") * ex


@pytest.mark.slow
@pytest.mark.parametrize("T,direction,eps,q,sigma", [(2, "remove", 0.5, 0.2, 1.2),
                                                     (3, "remove", 0.3, 0.1, 1.5),
                                                     (2, "add", 0.1, 0.2, 1.2)])
def test_inversion_equals_output_space_reference(T, direction, eps, q, sigma):
    """T = 2, 3 against tests/reference_subsampled.py (nested quadrature in the output space: an unrelated
    method)."""
    r = R.delta_ref(eps, sigma, q, T, direction, rtol=1e-10, hf_tol=1e-16)
    ex = RS.sg_delta_ref(eps, sigma, q, T, direction, as_mpf=True)
    assert abs(r.value_mp - ex) <= mp.mpf("1e-11") * ex


@pytest.mark.slow
def test_two_lines_agree():
    """Any line c > 0 gives the same delta (the integrand differs completely): c at the saddle vs c / 3."""
    q, sigma, T, eps = 1e-3, 1.0, 1000, 0.3
    a = R.delta_ref(eps, sigma, q, T, "remove", rtol=1e-20)
    b = R.delta_ref(eps, sigma, q, T, "remove", rtol=1e-20, c=a.c / 3, wscale=0.5, hscale=0.7)
    assert abs(a.value_mp - b.value_mp) <= mp.mpf("1e-18") * a.value_mp


def test_reference_bad_input():
    with pytest.raises(ValueError, match="sigma"):
        R.delta_ref(0.1, 0.0, 0.1, 5)
    with pytest.raises(ValueError, match="q must"):
        R.delta_ref(0.1, 1.0, 1.0, 5)
    with pytest.raises(ValueError, match="T must"):
        R.eps_ref(1e-5, 1.0, 0.1, 2.5)
    with pytest.raises(ValueError, match="direction"):
        R.eps_ref(1e-5, 1.0, 0.1, 5, "both")
    with pytest.raises(ValueError, match="delta"):
        R.eps_ref(0.0, 1.0, 0.1, 5)


# ===================================================================================== the stored values
def test_json_provenance():
    for k in ("generated", "generator", "method", "mp_dps", "fixed_point_bits", "gl_nodes", "check_run",
              "error_rule", "settings"):
        assert k in DATA
    assert len(SETS) >= 2


@pytest.mark.parametrize("s", SETS, ids=_sid)
def test_json_accuracy_checks(s):
    """Every stored eps comes with a passed accuracy check: the second run (other line, everything refined)
    agrees within the declared error, which is tiny (<= 1e-12 relative: the tests below are meaningful)."""
    for d in ("remove", "add"):
        eps, err = s["eps"][d], s["eps_err"][d]
        assert s["check"][d]["abs_diff"] * 10 <= err
        assert err <= 1e-12 * max(eps, 1e-300)
        assert float(mp.mpf(s["eps_str"][d])) == eps
        assert s["check"][d]["c_alt"] != s["diag"][d]["c"]
        full = s["check"][d].get("eps_full_accuracy_run")  # a separate run at the tightest tolerances
        if full is not None:
            assert abs(float(mp.mpf(full) - mp.mpf(s["eps_str"][d]))) <= err
    assert s["eps_max"] == max(s["eps"].values())
    if s["q"] < 1:  # the add loss is at most -log(1 - q) per step
        assert s["eps"]["add"] < -s["T"] * math.log1p(-s["q"])


@pytest.mark.parametrize("s", [s for s in SETS if s["delta_points"]], ids=_sid)
def test_json_delta_points_consistent(s):
    """delta is decreasing, and the stored eps is where delta crosses the target: delta(0.99 eps) >
    delta > delta(1.01 eps) for the direction that attains the max (an internal consistency check of the
    eps and delta entries, computed on different lines)."""
    pts = s["delta_points"]
    assert pts[0]["eps"] < s["eps_max"] < pts[-1]["eps"]
    assert pts[0]["max"] > s["delta"] > pts[-1]["max"]
    for d in ("remove", "add"):
        assert pts[0][d] >= pts[-1][d]


SPEC08 = [s for s in SETS if (s["q"], s["sigma"], s["T"], s["delta"]) == (1e-3, 2.0, 10**6, 1e-10)]


@pytest.mark.parametrize("s", SPEC08, ids=_sid)
def test_spec08_value(s):
    """High-precision reference: sigma = 2, q = 1e-3, T = 1e6, delta = 1e-10 -> eps = 3.323027795 (remove),
    3.310208557 (add), an mpmath inversion written separately (the live recomputation is in the slow
    suite)."""
    assert round(s["eps"]["remove"], 9) == 3.323027795
    assert round(s["eps"]["add"], 9) == 3.310208557


LIVE = [s for s in SETS if (s["q"], s["sigma"], s["T"], s["delta"]) in
        {(1e-5, 1.0, 10**5, 1e-8), (1e-6, 1.0, 10**5, 1e-5), (1e-4, 2.0, 10**4, 1e-5)}]


@pytest.mark.slow
@pytest.mark.parametrize("s", LIVE, ids=_sid)
def test_json_recomputed_live(s):
    """The stored values are what the reference computes (both directions, the stored accuracy settings)."""
    acc = {k: v for k, v in s.get("accuracy_settings", {}).items() if k in ("rtol", "hf_tol", "xdigits")}
    for d in ("remove", "add"):
        r = R.eps_ref(s["delta"], s["sigma"], s["q"], s["T"], d, **acc)
        assert abs(r.value - s["eps"][d]) <= s["eps_err"][d]


@pytest.mark.slow
def test_spec08_value_live():
    r = R.eps_ref(1e-10, 2.0, 1e-3, 10**6, "remove")
    assert round(r.value, 9) == 3.323027795
    a = R.eps_ref(1e-10, 2.0, 1e-3, 10**6, "add")
    assert round(a.value, 9) == 3.310208557


# ===================================================================================== the library
def _acct(s):
    import accountant

    return accountant.PrivacyAccountant().step(sigma=s["sigma"], sample_rate=s["q"], steps=s["T"])


def _check_eps_bracket(lower, upper, s, what):
    ref, err = s["eps_max"], s["eps_max_err"]
    assert upper >= ref - err, f"{what}: certified eps {upper!r} < reference {ref!r} (+-{err:.1e}) UNSOUND"
    if lower is not None:
        assert lower <= ref + err, f"{what}: lower bound {lower!r} > reference {ref!r} (+-{err:.1e}) UNSOUND"


def _check_delta_bracket(lower, upper, ref, rel, what):
    assert upper >= ref * (1 - rel), f"{what}: certified delta {upper!r} < reference {ref!r} -- UNSOUND"
    if lower is not None:
        assert lower <= ref * (1 + rel), f"{what}: lower bound {lower!r} > reference {ref!r} -- UNSOUND"


#: settings checked in the default run (method="cf" and the split directly: a few seconds each); every
#: setting, every route (auto, cf, pld) and the delta queries run in the slow suite
FAST = [(1e-5, 1.0, 10**5, 1e-8), (1e-6, 1.0, 10**4, 1e-5)]
FAST_SETS = [s for s in SETS if (s["q"], s["sigma"], s["T"], s["delta"]) in FAST]


@pytest.mark.parametrize("s", FAST_SETS, ids=_sid)
def test_cf_certificate_contains_reference(s):
    c = _acct(s).certificate(delta=s["delta"], method="cf")
    _check_eps_bracket(c.lower_bound, c.epsilon, s, "cf")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["auto", "cf", "pld"])
@pytest.mark.parametrize("s", SETS, ids=_sid)
def test_certificate_contains_reference(s, method):
    c = _acct(s).certificate(delta=s["delta"], method=method)
    _check_eps_bracket(c.lower_bound, c.epsilon, s, f"{method} ({c.method})")


def _delta_query(s, method):
    acct = _acct(s)
    for row in s["delta_points"]:
        rel = max(row["remove_rel_err"], row["add_rel_err"])
        c = acct.certificate(epsilon=row["eps"], method=method)
        _check_delta_bracket(c.lower_bound, c.delta, row["max"], rel, f"{method} delta({row['eps']})")


@pytest.mark.parametrize("s", FAST_SETS[:1], ids=_sid)
def test_cf_delta_certificate_contains_reference(s):
    _delta_query(s, "cf")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["auto", "cf"])
@pytest.mark.parametrize("s", SETS, ids=_sid)
def test_delta_certificate_contains_reference(s, method):
    _delta_query(s, method)


def _entries(s):
    from mechanisms.subsampled import SubsampledGaussian

    return [(SubsampledGaussian(s["sigma"], s["q"]), s["T"])]


def _split_eps(s, direction):
    """conversions.split directly, one direction (the route only uses the split in some cases)."""
    from conversions import split

    r = split.split_epsilon_bounds(_entries(s), s["delta"], direction)
    ref, err = s["eps"][direction], s["eps_err"][direction]
    assert r.upper >= ref - err, f"split {direction}: upper {r.upper!r} < reference {ref!r} -- UNSOUND"
    assert r.lower <= ref + err, f"split {direction}: lower {r.lower!r} > reference {ref!r} -- UNSOUND"


def _split_delta(s, direction):
    from conversions import split

    for row in s["delta_points"]:
        ref = row[direction]
        r = split.split_delta_bounds(_entries(s), row["eps"], direction)
        _check_delta_bracket(r.lower, r.upper, ref, row[direction + "_rel_err"], f"split {direction} delta")


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("s", FAST_SETS, ids=_sid)
def test_split_bounds_contain_reference(s, direction):
    _split_eps(s, direction)


def test_split_polish_narrows_and_keeps_the_reference(monkeypatch):
    """The split's polishing pass (``POLISH_RTOL``, run on cheaply answered eps queries): at q = 1e-3,
    sigma = 0.8, T = 100 (remove; 1.6e-5 relative wide without it) the polished bracket holds the
    independent reference, lies inside the unpolished one, and is within 1e-6 relative."""
    from conversions import split

    s = next(x for x in SETS if (x["q"], x["sigma"], x["T"], x["delta"]) == (1e-3, 0.8, 100, 1e-5))
    ref, err = s["eps"]["remove"], s["eps_err"]["remove"]
    monkeypatch.setattr(split, "POLISH_WORK", -1.0)
    plain = split.split_epsilon_bounds(_entries(s), s["delta"], "remove", 1e-4)  # (the cf route's rtol)
    monkeypatch.setattr(split, "POLISH_WORK", math.inf)
    polished = split.split_epsilon_bounds(_entries(s), s["delta"], "remove", 1e-4)
    assert polished.lower <= ref + err and polished.upper >= ref - err
    assert plain.lower <= polished.lower <= polished.upper <= plain.upper
    assert plain.upper - plain.lower > 1e-5 * plain.upper  # (it had something to do)
    assert polished.upper - polished.lower <= 1e-6 * polished.upper


@pytest.mark.slow
@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("s", SETS, ids=_sid)
def test_split_bounds_contain_reference_all(s, direction):
    _split_eps(s, direction)
    _split_delta(s, direction)


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_pld_near_atomic_tiny_rate_contains_reference_per_direction(direction):
    """q = 1e-6, T = 1e4: every step's loss lies within ~1e-3 of 0.  The discretised PLD's grid range
    (probed again inside a range of a few probe cells) and its FFT window (started where the tilted
    mass below is certified negligible, instead of a damping length of 1.6e6 points) keep the grid
    short; its bracket must hold the reference's value for each direction, and reach the absolute
    1e-4 target without the cap (it was capped at 1.6e6 points before)."""
    from conversions import pld

    s = next(x for x in SETS if (x["q"], x["sigma"], x["T"], x["delta"]) == (1e-6, 1.0, 10**4, 1e-5))
    r = pld.pld_epsilon_bounds(_entries(s), s["delta"], direction)
    ref, err = s["eps"][direction], s["eps_err"][direction]
    assert r.upper >= ref - err, f"pld {direction}: upper {r.upper!r} < reference {ref!r} -- UNSOUND"
    assert r.lower <= ref + err, f"pld {direction}: lower {r.lower!r} > reference {ref!r} -- UNSOUND"
    # the upper end within 1 % of the reference (the split cells: exact to second order); the lower end
    # one Chernoff deviation below it, the bracket within the absolute target
    assert r.upper - r.lower <= 1e-4 and r.upper <= 1.01 * ref + err and r.lower > 0.4 * ref
    assert not r.details["capped"] and r.details["fft_points"] <= 1 << 18


def test_tiny_rate_certifies_eps_zero_exactly_where_delta_at_zero_is_below_delta():
    """q = 1e-6, sigma = 1, T = 100: delta(0) = TV(P^T, Q^T) ~ q sqrt(T Var Y) / sqrt(2 pi), far below
    the sum of the steps' TVs (3.8e-5): the MGF-inversion reference gives 5.14e-6 in both directions, so
    eps(1e-5) = 0 exactly (the connect-the-dots PLD certifies 0; its cells moved up whole gave 2.9e-5),
    and at delta = 4e-6 < delta(0) no certificate may claim 0."""
    from accountant import PrivacyAccountant

    d0 = [R.deltas_ref([0.0], 1.0, 1e-6, 100, d)[0].value for d in ("remove", "add")]
    assert all(4e-6 < v < 1e-5 for v in d0), d0
    acct = PrivacyAccountant().step(sigma=1.0, sample_rate=1e-6, steps=100)
    assert acct.certificate(delta=1e-5).epsilon == 0.0
    assert acct.certificate(delta=4e-6).epsilon > 0.0


def test_split_stops_at_the_absolute_target_for_small_eps(monkeypatch):
    """q = 1e-6, sigma = 1, T = 1e4, remove (eps ~ 1.4e-4): the split's first integrated pass meets the
    absolute target (``EPS_ATOL`` = 1e-4, used for eps < 0.1); it stops there, with a bracket holding the
    reference, where without the absolute target two more passes (twice the work) gave nothing."""
    from conversions import split

    s = next(x for x in SETS if (x["q"], x["sigma"], x["T"], x["delta"]) == (1e-6, 1.0, 10**4, 1e-5))
    ref = s["eps"]["remove"]
    stats: dict = {}
    r = split.split_epsilon_bounds(_entries(s), s["delta"], "remove", stats=stats)
    assert r.lower <= ref <= r.upper and r.upper - r.lower <= split.EPS_ATOL
    monkeypatch.setattr(split, "EPS_ATOL", 0.0)
    stats0: dict = {}
    r0 = split.split_epsilon_bounds(_entries(s), s["delta"], "remove", stats=stats0)
    assert r0.lower <= ref <= r0.upper
    assert stats0["work"] > 1.5 * stats["work"] and r0.upper - r0.lower >= 0.5 * (r.upper - r.lower)


# ============================================================== the peer's failures, confirmed
PEERS_PATH = os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks", "results",
                          "sweep_regimes_peers.json")


def _peer_failures():
    if not os.path.exists(PEERS_PATH):
        return []
    with open(PEERS_PATH) as f:
        rows = json.load(f)["rows"]
    return [r for r in rows if r.get("peer_below_our_lower")]


def _gauss_delta(eps, mu):
    """delta(eps) of the mu-GDP Gaussian pair (closed form, Balle & Wang 2018), in mpmath."""
    eps, mu = mp.mpf(eps), mp.mpf(mu)
    return mp.ncdf(-eps / mu + mu / 2) - mp.exp(eps) * mp.ncdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("row", _peer_failures(), ids=lambda r: f"q{r['q']:g}-s{r['sigma']:g}-T{r['T']:g}")
def test_peer_values_below_our_lower_bound_are_invalid(row):
    """Every setting of the committed peer sweep where dp-accounting's epsilon is below our certified
    lower bound: the independent reference gives delta(peer's eps) > delta, so the peer's value is not
    an (eps, delta) guarantee (and our lower bound is consistent).  q = 1: the Gaussian mechanism's
    closed form; otherwise the MGF-inversion reference (remove direction; the worst-case delta is at
    least that)."""
    q, sigma, T, delta, peer = row["q"], row["sigma"], int(row["T"]), row["delta"], row["peer"]
    if q == 1.0:
        d = float(_gauss_delta(peer, mp.sqrt(T) / sigma))
    else:
        d = R.deltas_ref([peer], sigma, q, T, "remove", rtol=1e-10)[0].value
    assert d > delta * (1 + 1e-6), (row, d)
