"""Per-epoch privacy reports (PrivacyAccountant.report, accountant.report, ``dpcert report``,
``dpcert plot --kinds report``).

Independent references: Gaussian runs against the mu-GDP closed form (scipy), also through the shared
contour (``method="cf"``); a Laplace + Gaussians run against delta(eps) = E_L[delta_G(eps - L)] over the
Laplace privacy loss L (mpmath, 30 digits).  Points of the shared contour are compared with separate
accountants built with the first k compositions in the order they were made (another line and step:
the brackets must overlap and agree to within the standalone bracket's width); the trajectory must be
non-decreasing (the truth is: dropping later outputs is post-processing).
"""

from __future__ import annotations

import json
import math
import warnings

import mpmath as mp
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from accountant import PrivacyAccountant
from accountant.cli import main
from accountant.report import NonMonotoneReportWarning, PrivacyReport, prefix
from conversions import contour, contour_family
from mechanisms import Gaussian, Laplace
from mechanisms.subsampled import SubsampledGaussian


def gdp_epsilon(mu: float, delta: float) -> float:
    def f(e):
        return norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta
    return brentq(f, 0.0, 100.0 + 10 * mu * mu, xtol=1e-14, rtol=1e-14)


def test_interleaved_gaussian_runs_follow_composition_order():
    g1, g2 = Gaussian(2.0), Gaussian(0.8)
    acct = PrivacyAccountant().compose(g1, 3).compose(g2, 2).compose(g1, 4)
    order = [g1] * 3 + [g2] * 2 + [g1] * 4
    rep = acct.report(delta=1e-6, steps=list(range(1, 10)))
    assert rep.order == "composition" and rep.steps == tuple(range(1, 10))
    for i, t in enumerate(rep.steps):
        sep = PrivacyAccountant()
        for m in order[:t]:
            sep.compose(m)
        assert rep.epsilon[i] == sep.epsilon(1e-6)
        mu = math.sqrt(sum(m.mu ** 2 for m in order[:t]))
        ref = gdp_epsilon(mu, 1e-6)
        assert ref <= rep.epsilon[i] <= ref * (1 + 1e-9)
        assert rep.lower[i] <= ref
    assert all(b >= a for a, b in zip(rep.epsilon, rep.epsilon[1:], strict=False))
    assert not rep.notes


def assert_agrees_with_standalone(eps: float, lower: float, sep: PrivacyAccountant, delta: float) -> None:
    """A shared-contour point against the standalone certificate of the same prefix: both brackets are
    certified, so they must overlap, and the point's upper bound must be within the standalone
    bracket's width (or 1e-9 relative) of the standalone upper bound."""
    cert = sep.certificate(delta=delta)
    assert lower is not None and cert.lower_bound is not None
    assert lower <= cert.epsilon and cert.lower_bound <= eps
    assert abs(eps - cert.epsilon) <= max(cert.epsilon - cert.lower_bound, 1e-9 * cert.epsilon)


def assert_non_decreasing(rep: PrivacyReport) -> None:
    assert all(b >= a for a, b in zip(rep.epsilon, rep.epsilon[1:], strict=False))
    assert not any("decreased" in n for n in rep.notes)


def test_dpsgd_loop_every_epoch_agrees_with_separate_accountants():
    acct = PrivacyAccountant()
    for _ in range(12):
        acct.step(sigma=2.0, sample_rate=0.1)
    rep = acct.report(delta=1e-5, every=5)
    assert rep.steps == (5, 10, 12) and rep.epochs == (1.0, 2.0, 2.4)
    assert set(rep.methods) == {"cf (shared)"} and not rep.notes
    for t, e, lo in zip(rep.steps, rep.epsilon, rep.lower, strict=True):
        sep = PrivacyAccountant().step(sigma=2.0, sample_rate=0.1, steps=t)
        assert_agrees_with_standalone(e, lo, sep, 1e-5)
        assert lo <= e
    assert rep.epsilon[0] < rep.epsilon[1] < rep.epsilon[2]
    # shared=False: every point is exactly the standalone certificate
    rep0 = acct.report(delta=1e-5, every=5, shared=False)
    for t, e in zip(rep0.steps, rep0.epsilon, strict=True):
        assert e == PrivacyAccountant().step(sigma=2.0, sample_rate=0.1, steps=t).epsilon(1e-5)
    assert set(rep0.methods) == {"cf"}


def test_phase_change_prefixes():
    a, b = SubsampledGaussian(1.5, 0.05), SubsampledGaussian(3.0, 0.05)
    acct = PrivacyAccountant().step(sigma=1.5, sample_rate=0.05, steps=6)
    acct.step(sigma=3.0, sample_rate=0.05, steps=6)
    assert prefix([(a, 6), (b, 6)], 9) == [(a, 6), (b, 3)]
    rep = acct.report(delta=1e-5, every=3)
    assert rep.steps == (3, 6, 9, 12)
    for i, ledger in enumerate(([(a, 3)], [(a, 6)], [(a, 6), (b, 3)], [(a, 6), (b, 6)])):
        sep = PrivacyAccountant()
        for m, k in ledger:
            sep.compose(m, k)
        assert_agrees_with_standalone(rep.epsilon[i], rep.lower[i], sep, 1e-5)
    assert_non_decreasing(rep)


def test_dpsgd_run_shares_the_contour(monkeypatch):
    # 40 epochs of DP-SGD: points agree with their standalone certificates, the trajectory grows, and
    # the per-mechanism values were shared (far fewer mechanism calls than points x directions)
    acct = PrivacyAccountant().step(sigma=1.1, sample_rate=0.02, steps=2000)
    made = []
    real = contour_family.SharedTerms.__init__

    def spy(self, *a, **k):
        real(self, *a, **k)
        made.append(self)

    monkeypatch.setattr(contour_family.SharedTerms, "__init__", spy)
    rep = acct.report(delta=1e-5, every=50)
    assert len(rep.steps) == 40 and rep.methods.count("cf (shared)") >= 36
    assert_non_decreasing(rep)
    for i in (5, 17, 39):
        sep = PrivacyAccountant().step(sigma=1.1, sample_rate=0.02, steps=rep.steps[i])
        assert_agrees_with_standalone(rep.epsilon[i], rep.lower[i], sep, 1e-5)
    assert len(made) == 2  # one per direction
    # (a standalone query builds at least one envelope and one node array per direction, and evaluates
    # the real log-MGF some 40 times)
    calls = {k: sum(f.calls[k] for f in made) for k in ("real", "envelope", "nodes")}
    n = len(rep.steps)
    assert calls["envelope"] < n / 2 and calls["nodes"] < n and calls["real"] < 10 * n


def test_gaussian_run_through_the_shared_contour_matches_mu_gdp():
    # method="cf": Gaussian ledgers go through the shared contour too; the closed form must lie in
    # every bracket, and the brackets are tight
    g1, g2 = Gaussian(4.0), Gaussian(1.5)
    acct = PrivacyAccountant().compose(g1, 3).compose(g2, 2).compose(g1, 25)
    order = [g1] * 3 + [g2] * 2 + [g1] * 25
    rep = acct.report(delta=1e-6, every=3, method="cf")
    assert set(rep.methods) == {"cf (shared)"}
    for t, e, lo in zip(rep.steps, rep.epsilon, rep.lower, strict=True):
        ref = gdp_epsilon(math.sqrt(sum(m.mu ** 2 for m in order[:t])), 1e-6)
        assert lo <= ref <= e <= ref * (1 + 1e-8)
    assert_non_decreasing(rep)


def _laplace_gaussian_delta(eps, mu, b):
    """delta(eps) of Laplace(b) (sensitivity 1) then a Gaussian of mu-GDP: E_L[delta_G(eps - L)] over
    the Laplace privacy loss L = (|x - 1| - |x|) / b, x ~ Lap(0, b) (atoms 1/b w.p. 1/2 and -1/b w.p.
    e^{-1/b} / 2, density in between), delta_G the mu-GDP profile (valid at every real argument)."""
    def dg(x):
        return mp.ncdf(-x / mu + mu / 2) - mp.exp(x) * mp.ncdf(-x / mu - mu / 2)

    a = 1 / b
    out = dg(eps - a) / 2 + mp.exp(-a) * dg(eps + a) / 2
    return out + mp.quad(lambda x: mp.exp(-x / b) / (2 * b) * dg(eps - (1 - 2 * x) / b), [0, 1])


def test_laplace_then_gaussians_against_a_30_digit_reference():
    acct = PrivacyAccountant().compose(Laplace(2.0)).compose(Gaussian(3.0), 30)
    rep = acct.report(delta=1e-6, every=3)
    assert set(rep.methods) == {"cf (shared)"}
    assert_non_decreasing(rep)
    with mp.workdps(30):
        for i in (0, 3, 10):
            t, e, lo = rep.steps[i], rep.epsilon[i], rep.lower[i]
            mu = mp.sqrt(t - 1) / 3

            def gap(x, mu=mu):
                return mp.log(_laplace_gaussian_delta(x, mu, mp.mpf(2))) - mp.log(mp.mpf("1e-6"))

            ref = float(mp.findroot(gap, (e * 0.999, e * 1.001), solver="secant", tol=1e-25))
            assert lo <= ref <= e <= ref * (1 + 1e-9)


def test_capped_points_fall_back_to_standalone_queries(monkeypatch):
    # a point whose shared plan would be capped is answered by the standalone query (which may split
    # the loss or take the discretised PLD) and the report says so
    acct = PrivacyAccountant().step(sigma=2.0, sample_rate=0.1, steps=9)
    real = contour_family.family_epsilon_bounds

    def fake(pld, *a, **k):
        if sum(pld._counts) == 6:
            raise contour.WouldBeCapped("test")
        return real(pld, *a, **k)

    monkeypatch.setattr(contour_family, "family_epsilon_bounds", fake)
    rep = acct.report(delta=1e-5, every=3)
    assert rep.methods == ("cf (shared)", "cf (standalone)", "cf (shared)")
    assert rep.epsilon[1] == PrivacyAccountant().step(sigma=2.0, sample_rate=0.1, steps=6).epsilon(1e-5)
    assert any("standalone query at 1 point(s) (steps 6)" in n and "capped" in n for n in rep.notes)
    assert "standalone" in str(rep) and rep.to_dict()["points"][1]["method"] == "cf (standalone)"


def test_outputs_table_json_dict():
    acct = PrivacyAccountant().compose(Gaussian(3.0), 6)
    rep = acct.report(delta=1e-5, every=2)
    assert isinstance(rep, PrivacyReport)
    text = str(rep)
    assert "epoch" in text and "lower bound" in text and len(text.splitlines()) == 2 + 3
    doc = json.loads(rep.to_json())
    assert doc["format"] == "dpcert-report" and doc["every"] == 2 and doc["delta"] == 1e-5
    assert [p["step"] for p in doc["points"]] == [2, 4, 6]
    assert [p["epoch"] for p in doc["points"]] == [1, 2, 3]
    assert [p["epsilon"] for p in doc["points"]] == list(rep.epsilon)
    assert rep.to_dict()["ledger"] == ["6 x gaussian(sigma=3, sensitivity=1)"]


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    rep = PrivacyAccountant().compose(Laplace(5.0), 4).report(delta=1e-5, every=1)
    fig = rep.plot(tmp_path / "r.png")
    assert (tmp_path / "r.png").stat().st_size > 0
    assert fig.axes[0].get_xlabel() == "epoch"


def test_bad_arguments():
    acct = PrivacyAccountant().compose(Gaussian(1.0), 5)
    with pytest.raises(TypeError, match="every"):
        acct.report(delta=1e-5)
    with pytest.raises(TypeError, match="every"):
        acct.report(delta=1e-5, every=1, steps=[1])
    with pytest.raises(ValueError, match="every"):
        acct.report(delta=1e-5, every=0)
    with pytest.raises(ValueError, match="steps"):
        acct.report(delta=1e-5, steps=[6])
    with pytest.raises(ValueError, match="delta"):
        acct.report(delta=2.0, every=1)
    with pytest.raises(ValueError, match="nothing composed"):
        PrivacyAccountant().report(delta=1e-5, every=1)


def test_loaded_state_uses_ledger_order(tmp_path):
    acct = PrivacyAccountant().compose(Gaussian(1.0), 2).compose(Gaussian(2.0), 2)
    acct.save(tmp_path / "s.json")
    rep = PrivacyAccountant.load(tmp_path / "s.json").report(delta=1e-5, every=1)
    assert rep.order == "ledger" and "order unknown" in str(rep)
    assert rep.epsilon == acct.report(delta=1e-5, every=1).epsilon  # same order here
    more = PrivacyAccountant.load(tmp_path / "s.json").compose(Gaussian(3.0)).compose(Gaussian(1.0))
    rep = more.report(delta=1e-5, every=1)  # saved part in ledger order, then the composition order
    assert rep.order == "ledger" and rep.steps == (1, 2, 3, 4, 5, 6)
    sep = PrivacyAccountant().compose(Gaussian(1.0), 2).compose(Gaussian(2.0), 2).compose(Gaussian(3.0))
    assert rep.epsilon[4] == sep.epsilon(1e-5) and rep.epsilon[5] == more.epsilon(1e-5)


def test_decrease_is_flagged_not_smoothed(monkeypatch):
    acct = PrivacyAccountant().compose(Gaussian(1.0), 3)
    real = PrivacyAccountant.certificate
    calls = []

    def fake(self, **kw):
        c = real(self, **kw)
        calls.append(1)
        if len(calls) == 2:  # pretend the second point came out below the first
            from dataclasses import replace
            c = replace(c, epsilon=0.0)
        return c

    monkeypatch.setattr(PrivacyAccountant, "certificate", fake)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        rep = acct.report(delta=1e-5, every=1)
    assert rep.epsilon[1] == 0.0 and rep.notes and "decreased" in rep.notes[0]
    assert any(issubclass(x.category, NonMonotoneReportWarning) for x in w)


def test_report_of_dp_events():
    from accountant.interop import DpEventAccountant

    @__import__("dataclasses").dataclass(frozen=True)
    class GaussianDpEvent:
        noise_multiplier: float

    d = DpEventAccountant().compose(GaussianDpEvent(2.0), 4)
    rep = d.report(delta=1e-5, every=2)
    assert rep.epsilon[-1] == d.get_epsilon(1e-5) and rep.steps == (2, 4)


def test_cli_report(capsys, tmp_path):
    assert main(["report", "--sigma", "2", "--sample-rate", "0.1", "--steps", "6", "--delta", "1e-5",
                 "--every", "3"]) == 0
    out = capsys.readouterr().out
    assert "epoch" in out and len(out.strip().splitlines()) == 4
    assert main(["report", "-m", "gaussian", "--sigma", "2", "-k", "4", "--delta", "1e-5", "--at", "1", "4",
                 "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [p["step"] for p in doc["points"]] == [1, 4]
    assert doc["points"][1]["epsilon"] == PrivacyAccountant().compose(Gaussian(2.0), 4).epsilon(1e-5)
    assert main(["report", "--sigma", "2", "--sample-rate", "0.1", "--steps", "6", "--delta", "1e-5"]) == 2
    assert "--every" in capsys.readouterr().err


def test_history_memory_is_bounded(monkeypatch):
    import accountant.privacy_accountant as pa

    monkeypatch.setattr(pa, "MAX_HISTORY_RUNS", 4)
    acct = PrivacyAccountant()
    for _ in range(6):
        acct.compose(Gaussian(1.0)).compose(Gaussian(2.0))
    assert len(acct._history) <= 4
    rep = acct.report(delta=1e-5, every=4)
    assert rep.order == "ledger" and rep.epsilon[-1] == acct.epsilon(1e-5)


def test_plot_kind_report(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from accountant import plots

    acct = PrivacyAccountant().compose(Gaussian(3.0), 6)
    fig = plots.plot_report(acct, 1e-5, every=2)
    up, lo = fig.axes[0].lines[0], fig.axes[0].lines[1]
    assert list(up.get_xdata()) == [1.0, 2.0, 3.0] and fig.axes[0].get_xlabel() == "epoch"
    for t, e, low in zip((2, 4, 6), up.get_ydata(), lo.get_ydata(), strict=True):
        ref = gdp_epsilon(math.sqrt(t) / 3.0, 1e-5)
        assert low <= ref <= e <= ref * (1 + 1e-9)
    # without every: --points counts spread over the run, ending at the last composition
    assert plots.report_steps(10, None, 4) == {"steps": [2, 5, 8, 10]}
    assert plots.report_steps(3, None, 12) == {"steps": [1, 2, 3]}
    out = tmp_path / "p"
    assert main(["plot", "--sigma", "2", "--sample-rate", "0.1", "--steps", "6", "--kinds", "report",
                 "--every", "3", "--out", str(out), "--formats", "png"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["dpsgd_report.png"]
    assert (out / "dpsgd_report.png").stat().st_size > 0
    assert main(["plot", "--mechanism", "gaussian", "--sigma", "2", "--times", "5", "--kinds", "report",
                 "rdp", "--points", "3", "--out", str(out), "--formats", "svg"]) == 0
    assert {"gaussian_report.svg", "gaussian_rdp_curve.svg"} <= {p.name for p in out.iterdir()}
    capsys.readouterr()
    assert main(["plot", "--sigma", "2", "--sample-rate", "0.1", "--steps", "6", "--every", "3",
                 "--out", str(out)]) == 2
    assert "--kinds report" in capsys.readouterr().err
    assert main(["plot", "--sigma", "2", "--sample-rate", "0.1", "--steps", "6", "--every", "0", "--kinds",
                 "report", "--out", str(out)]) == 2
    assert "--every" in capsys.readouterr().err
