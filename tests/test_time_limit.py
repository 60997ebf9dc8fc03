"""The time limit of ``method="auto"`` queries (``PrivacyAccountant(time_limit=...)``, default
``AUTO_TIME_LIMIT`` seconds): past it no further numerical route is started and the discretised PLD and
the near-atomic split stop refining.  The answer must stay a certified bracket: it is checked against
the unlimited computation (other grids, other routes: the two brackets must overlap, and the limited one
cannot be narrower), it is flagged and warned, and named methods and ``time_limit=None`` are untouched.
"""

from __future__ import annotations

import json
import math
import warnings

import pytest

from accountant import PrivacyAccountant
from accountant.privacy_accountant import AUTO_TIME_LIMIT, AccuracyWarning
from conversions import pld, split
from conversions.contour_terms import query_clock
from mechanisms.subsampled import SubsampledGaussian

# auto defers the contour (few steps at a small rate: fewer than the split-first threshold) and runs the
# discretised PLD (several passes), whose bracket meets the target; a first PLD pass alone takes ~0.05 s
SETTING = {"sigma": 0.8, "sample_rate": 1e-3, "steps": 99}
DELTA = 1e-5


# ... and where the deferred contour wins: the discretised PLD needs its large-step split there (round-up
# cells, ~2e-3 wide), so auto re-runs the contour (~3e-6 wide).  (At SETTING the PLD, with the loss's
# upper tail in closed form, meets the 1e-3 target by itself and auto keeps its answer.)
WIN_SETTING, WIN_DELTA = {"sigma": 2.0, "sample_rate": 1e-3, "steps": 99}, 1e-10


def _query(time_limit, method="auto", setting=None, delta=DELTA):
    acct = PrivacyAccountant(time_limit=time_limit).step(**(SETTING if setting is None else setting))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cert = acct.certificate(delta=delta, method=method)
    return cert, [w for w in caught if issubclass(w.category, AccuracyWarning)]


@pytest.fixture(scope="module")
def unlimited_win():
    cert, warned = _query(None, setting=WIN_SETTING, delta=WIN_DELTA)
    assert not warned and "time_limit" not in cert.details
    return cert


@pytest.fixture(scope="module")
def unlimited():
    from accountant.routes import CharacteristicFunctionRoute

    assert SETTING["steps"] < CharacteristicFunctionRoute.SPLIT_FIRST_STEPS  # (the deferral scenario)
    cert, warned = _query(None)
    assert not warned and "time_limit" not in cert.details
    return cert


@pytest.mark.parametrize("bad, exc", [(0.0, ValueError), (-1.0, ValueError), (math.nan, ValueError),
                                      (math.inf, ValueError), ("2", TypeError), (True, TypeError)])
def test_time_limit_is_validated(bad, exc):
    with pytest.raises(exc, match="time_limit"):
        PrivacyAccountant(time_limit=bad)


@pytest.mark.default_time_limit
def test_time_limit_survives_the_state_file():
    for value in (5.0, None):
        acct = PrivacyAccountant(time_limit=value).step(**SETTING)
        doc = json.loads(json.dumps(acct.to_state()))
        assert PrivacyAccountant.from_state(doc).time_limit == value
    # a state file written before the field existed gets the default
    doc = PrivacyAccountant().to_state()
    del doc["time_limit"]
    assert PrivacyAccountant.from_state(doc).time_limit == AUTO_TIME_LIMIT
    assert PrivacyAccountant().time_limit == AUTO_TIME_LIMIT


def test_a_tiny_time_limit_returns_a_certified_flagged_bracket(unlimited):
    cert, warned = _query(1e-6)
    assert cert.details.get("time_limit") is True
    assert "time limit" in cert.details["warning"] and warned
    # both are certified brackets of the same true epsilon (different grids and routes): they overlap,
    # and the unlimited one, which refines what the limited one stopped, is at least as narrow
    assert cert.lower_bound <= unlimited.epsilon and unlimited.lower_bound <= cert.epsilon
    assert cert.epsilon >= unlimited.epsilon
    assert cert.epsilon - cert.lower_bound >= unlimited.epsilon - unlimited.lower_bound
    # and it is still a useful answer (the first PLD pass), far below the RDP bound
    rdp = PrivacyAccountant().step(**SETTING).certificate(delta=DELTA, method="rdp").epsilon
    assert cert.epsilon < 0.5 * rdp


def test_named_methods_are_not_time_limited():
    limited, warned = _query(1e-6, method="pld")
    free, _ = _query(None, method="pld")
    assert "time_limit" not in limited.details and not warned
    assert (limited.epsilon, limited.lower_bound) == (free.epsilon, free.lower_bound)


def test_pld_stopped_before_refining_keeps_its_first_pass(monkeypatch):
    """Refinement passes predicted to end after the deadline are skipped: the first pass's bracket stands,
    flagged, overlapping the unlimited one and wider (the prediction is forced to refuse)."""
    items = [(SubsampledGaussian(sigma=SETTING["sigma"], sample_rate=SETTING["sample_rate"]),
              SETTING["steps"])]
    full = pld.pld_epsilon_bounds(items, DELTA, "remove", 1e-3)
    def refuse(self, growth=(1.0, 1.0)):
        self.stopped = True
        return False

    monkeypatch.setattr(pld._Clock, "allows", refuse)
    cut = pld.pld_epsilon_bounds(items, DELTA, "remove", 1e-3, deadline=query_clock() + 60.0)
    assert cut.details["time_limit"] is True and cut.details["passes"] == 1
    assert "time_limit" not in full.details and full.details["passes"] > 1
    assert cut.lower <= full.upper and full.lower <= cut.upper
    assert cut.upper - cut.lower > full.upper - full.lower


def test_pld_with_a_passed_deadline_gives_no_bracket_and_auto_goes_on(monkeypatch):
    """A deadline that passes while the first pass builds its grid leaves the PLD without a bracket
    (FirstPassAbandoned); under auto the route is noted as stopped by the limit, the certificate is
    flagged, and the other routes' bracket (certified: it overlaps the unlimited answer) is returned."""
    items = [(SubsampledGaussian(sigma=SETTING["sigma"], sample_rate=SETTING["sample_rate"]),
              SETTING["steps"])]
    with pytest.raises(pld.FirstPassAbandoned):
        pld.pld_epsilon_bounds(items, DELTA, "remove", 1e-3, deadline=query_clock() - 1.0)
    with pytest.raises(pld.FirstPassAbandoned):
        pld.pld_delta_bounds(items, 0.5, "remove", 1e-3, deadline=query_clock() - 1.0)
    free, _ = _query(None)

    def abandoned(*args, **kwargs):
        raise pld.FirstPassAbandoned("the deadline passed while the first pass built its grid")

    monkeypatch.setattr(pld, "pld_epsilon_bounds", abandoned)
    cert, _ = _query(AUTO_TIME_LIMIT)
    assert cert.method != "pld" and "pld stopped by the time limit" in cert.details["route_notes"]
    assert cert.details.get("time_limit") is True
    assert cert.lower_bound <= free.epsilon and free.lower_bound <= cert.epsilon


def test_a_deferring_contour_runs_first_when_the_pld_is_predicted_costlier(monkeypatch):
    """The contour's deferral to the discretised PLD is declined when that route's predicted cost exceeds
    PLD_DEFER_COST (forced to 0 here): the contour runs at once with the deferred work limit, and the
    answer is still a certified bracket overlapping the unlimited one."""
    import accountant.route_choice as rc

    free, _ = _query(None)
    monkeypatch.setattr(rc, "PLD_DEFER_COST", 0.0)
    cert, _ = _query(None)
    assert "cf not deferred" in cert.details.get("route_notes", "")
    assert cert.lower_bound <= free.epsilon and free.lower_bound <= cert.epsilon


def test_a_pld_pass_building_its_grid_past_the_deadline_is_abandoned(monkeypatch):
    """A refinement pass that the prediction let start but that is still building its grid when the
    deadline passes returns nothing (the query keeps the bracket it has, flagged): the prediction is
    forced to allow every pass and the deadline is already behind, so exactly the first pass stands."""
    items = [(SubsampledGaussian(sigma=SETTING["sigma"], sample_rate=SETTING["sample_rate"]),
              SETTING["steps"])]
    from conversions.pld_eval import _run

    # (the pass itself: None once its grid is built after the deadline)
    ranges = pld._ranges(items, "remove", 1e-3, DELTA, 1.0)
    assert _run(items, "remove", 0.05, ranges, 0.5, 1 << 16, 1e-3, 0.0, DELTA, 1.0,
                deadline=query_clock() - 1.0) is None
    full = pld.pld_epsilon_bounds(items, DELTA, "remove", 1e-3)
    monkeypatch.setattr(pld._Clock, "allows", lambda self, growth=(1.0, 1.0): True)
    real_run, calls = pld._run, []

    def first_pass_free(*args, **kwargs):  # (the deadline applies from the second pass on)
        calls.append(1)
        if len(calls) == 1:
            kwargs["deadline"] = None
        return real_run(*args, **kwargs)

    monkeypatch.setattr(pld, "_run", first_pass_free)
    cut = pld.pld_epsilon_bounds(items, DELTA, "remove", 1e-3, deadline=query_clock() - 1.0)
    assert len(calls) == 2 and cut.details["time_limit"] is True and cut.details["passes"] == 1
    assert cut.lower <= full.upper and full.lower <= cut.upper
    assert cut.upper - cut.lower > full.upper - full.lower


def test_pld_pass_prediction_counts_the_grid_growth():
    """The predicted cost of a refinement pass grows with its grid, not only with its FFT window: a pass
    whose window is near the point cap but whose step is far finer (q = 1e-5, sigma = 0.4, T = 1000:
    280x finer, 3.5 s after a 0.15 s first pass when only the window's growth, 1.6x, was counted) is
    predicted to cost far more than the window's growth alone."""
    from types import SimpleNamespace

    ev = SimpleNamespace(c=SimpleNamespace(capped=False, n=1_296_000, step=4.58e-5))
    fft, grid = pld._growth(ev, 0.0461, 0.000164, [(-0.5, 5.0)], 1 << 21)
    assert fft == pytest.approx((1 << 21) / 1_296_000)
    assert grid == pytest.approx(4.58e-5 * (1 << 21) / 5.5)  # (the cap's step bounds it)
    assert grid > 10 * fft
    clock = pld._Clock(query_clock() + 0.6)
    clock.last, clock.last_grid = 0.15, 0.05
    assert not clock.allows((fft, grid))  # 0.05 x 16 (the cap) + 0.1 x 1.1 x 1.6 > 0.6 s
    assert clock.allows((fft, 1.0))
    small = pld._Clock(query_clock() + 1.0)  # a pass of a few ms: each growth counts at most 16x
    small.last, small.last_grid = 0.003, 0.002
    assert small.allows((242.0, 1140.0))
    capped = SimpleNamespace(c=SimpleNamespace(capped=True, n=1 << 21, step=1e-5))
    assert pld._growth(capped, 1.0, 0.01, [(0.0, 1.0)], 1 << 21) == (1.0, 1.0)


def test_the_deferral_prediction_respects_the_pld_routes_own_decline(monkeypatch):
    """When the discretised PLD declines the ledger (e.g. an MGF too costly to evaluate), its cost is not
    predicted (that would evaluate the costly MGFs): the contour does not defer to it, and the answer is
    a certified bracket overlapping the unlimited one."""
    from accountant import routes
    from conversions import pld as pld_mod

    free, _ = _query(None)

    def declines(cls, ledger, ctx):
        raise routes.RouteUnavailable("declined (test)")

    def never(*args, **kwargs):
        raise AssertionError("pld_cost evaluated for a route that declines")

    monkeypatch.setattr(routes.DiscretisedPLDRoute, "_check", classmethod(declines))
    monkeypatch.setattr(pld_mod, "pld_cost", never)
    cert, _ = _query(None)
    assert "cf not deferred" in cert.details.get("route_notes", "")
    assert cert.lower_bound <= free.epsilon and free.lower_bound <= cert.epsilon


def test_split_with_a_passed_deadline_answers_and_stops_refining():
    # q = 1e-4, sigma = 1, T = 1000, delta = 1e-12: the split's first cut leaves a wide bracket and its
    # alternative cuts narrow it (tests/test_split.py); past the deadline the first answer stands
    items = [(SubsampledGaussian(sigma=1.0, sample_rate=1e-4), 1000)]
    full = split.split_epsilon_bounds(items, 1e-12, "remove", 1e-4, work_limit=5e7)
    cut = split.split_epsilon_bounds(items, 1e-12, "remove", 1e-4, work_limit=5e7,
                                     deadline=query_clock() - 1.0)
    assert cut.details.get("time_limit") is True and "time_limit" not in full.details
    assert cut.lower <= full.upper and full.lower <= cut.upper
    assert cut.upper - cut.lower >= full.upper - full.lower


def test_cli_time_limit(capsys):
    from accountant.cli import main

    argv = ["dpsgd", "--sigma", str(SETTING["sigma"]), "--sample-rate", str(SETTING["sample_rate"]),
            "--steps", str(SETTING["steps"]), "--delta", str(DELTA), "--json"]
    assert main([*argv, "--time-limit", "-1"]) == 2
    assert "--time-limit" in capsys.readouterr().err
    # 0 = no limit: the certificate is the unlimited one, with no time-limit flag
    assert main([*argv, "--time-limit", "0"]) == 0
    doc = json.loads(capsys.readouterr().out)
    free, _ = _query(None)
    assert doc["epsilon"] == free.epsilon and "time_limit" not in doc.get("details", {})


def test_the_limit_counts_this_threads_cpu_time_not_the_wall_clock():
    """A query waiting on other processes (or, here, sleeping) spends no CPU time of its thread: the
    deadline does not move, so the machine's load does not change how far a query gets."""
    from conversions.contour_terms import time_left

    deadline = query_clock() + 0.5
    import time

    time.sleep(0.6)
    assert time_left(deadline) > 0.4


def test_a_route_stopped_by_the_limit_marks_the_certificate_even_when_another_route_wins(monkeypatch,
                                                                                      unlimited_win):
    """The auto answer is the best of the routes; if the limit stopped one of them early (its looser
    bracket lost), the answer might have been narrower without the limit, and the certificate says so.
    WIN_SETTING: the contour defers, the discretised PLD answers, the deferred contour wins."""
    from accountant import routes

    unlimited = unlimited_win
    assert unlimited.method == "cf" and "pld" in unlimited.candidates
    real = routes.DiscretisedPLDRoute._run

    def stopped(self, fn, ledger, value, ctx):  # the PLD's bracket as if its refinement had been cut
        return real(self, fn, ledger, value, ctx).with_details(time_limit=True)

    monkeypatch.setattr(routes.DiscretisedPLDRoute, "_run", stopped)
    cert, _ = _query(600.0, setting=WIN_SETTING, delta=WIN_DELTA)
    assert cert.method == "cf" and "pld" in cert.candidates
    assert cert.details.get("time_limit") is True
    assert (cert.epsilon, cert.lower_bound) == (unlimited.epsilon, unlimited.lower_bound)


def test_a_direction_cut_short_flags_the_route_even_when_it_is_not_the_worst():
    """The routes report the worst of the add/remove directions; the time-limit flag of the other one
    must not be lost (route_choice reads it to mark the certificate)."""
    from accountant import routes
    from conversions.contour_terms import EpsilonBounds

    ledger = PrivacyAccountant().step(**SETTING)._ledger
    worst = EpsilonBounds(DELTA, 0.2, 0.19, 0.21, "remove", {})
    other = EpsilonBounds(DELTA, 0.1, 0.09, 0.11, "add", {"time_limit": True})
    out = routes.CharacteristicFunctionRoute._worst(ledger, [worst, other])
    assert out.upper == 0.21 and out.details["direction"] == "remove"
    assert out.details.get("time_limit") is True
    assert "time_limit" not in routes.CharacteristicFunctionRoute._worst(ledger, [worst]).details


def test_a_chosen_route_cut_short_within_target_is_flagged_but_not_warned(monkeypatch, unlimited_win):
    """The routes only flag a cut (``details["time_limit"]``); route_choice decides the warning, once:
    a bracket still within the width target (WIN_SETTING's contour: ~3e-6 relative) needs none."""
    from accountant import routes

    unlimited = unlimited_win

    real = routes.CharacteristicFunctionRoute._run

    def cut(self, fn, split_fn, ledger, value, ctx):  # the contour's bracket as if a refinement was cut
        return real(self, fn, split_fn, ledger, value, ctx).with_details(time_limit=True)

    monkeypatch.setattr(routes.CharacteristicFunctionRoute, "_run", cut)
    cert, warned = _query(600.0, setting=WIN_SETTING, delta=WIN_DELTA)
    assert cert.method == "cf" and cert.details.get("time_limit") is True
    assert (cert.epsilon, cert.lower_bound) == (unlimited.epsilon, unlimited.lower_bound)
    assert cert.epsilon - cert.lower_bound <= 1e-3 * cert.epsilon
    assert not warned and "warning" not in cert.details


def test_a_chosen_route_cut_short_outside_target_is_warned(monkeypatch):
    """... and a cut bracket wider than the target gets route_choice's warning (an upper end moved up
    by 1% is still a certified upper bound; the discretised PLD is kept out, so it is the answer)."""
    from accountant import routes
    from conversions.bracket import Bracket

    real = routes.CharacteristicFunctionRoute._run

    def cut(self, fn, split_fn, ledger, value, ctx):
        b = real(self, fn, split_fn, ledger, value, ctx)
        return Bracket(b.upper * 1.01, b.lower, b.estimate, b.kind, {**b.details, "time_limit": True})

    def unavailable(self, *args):
        raise routes.RouteUnavailable("kept out by the test")

    monkeypatch.setattr(routes.CharacteristicFunctionRoute, "_run", cut)
    monkeypatch.setattr(routes.DiscretisedPLDRoute, "_run", unavailable)
    acct = PrivacyAccountant(time_limit=600.0).step(sigma=1.0, sample_rate=0.05, steps=10_000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cert = acct.certificate(delta=DELTA)
    assert cert.method == "cf" and cert.details.get("time_limit") is True
    assert "time limit" in cert.details["warning"] and "cf finished refining" in cert.details["warning"]
    assert any(issubclass(w.category, AccuracyWarning) for w in caught)
