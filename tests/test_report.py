"""Per-epoch privacy reports (PrivacyAccountant.report, accountant.report, ``dpcert report``).

Every point is checked against a separate accountant built with the first k compositions in the order
they were made, and Gaussian runs against the mu-GDP closed form (scipy); the trajectory must be
non-decreasing (the truth is: dropping later outputs is post-processing).
"""

from __future__ import annotations

import json
import math
import warnings

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from accountant import PrivacyAccountant
from accountant.cli import main
from accountant.report import NonMonotoneReportWarning, PrivacyReport, prefix
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


def test_dpsgd_loop_every_epoch_matches_separate_accountants():
    acct = PrivacyAccountant()
    for _ in range(12):
        acct.step(sigma=2.0, sample_rate=0.1)
    rep = acct.report(delta=1e-5, every=5)
    assert rep.steps == (5, 10, 12) and rep.epochs == (1.0, 2.0, 2.4)
    for t, e, lo in zip(rep.steps, rep.epsilon, rep.lower, strict=True):
        sep = PrivacyAccountant().step(sigma=2.0, sample_rate=0.1, steps=t)
        assert e == sep.epsilon(1e-5)
        assert lo is not None and lo <= e
    assert rep.epsilon[0] < rep.epsilon[1] < rep.epsilon[2]


def test_phase_change_prefixes():
    a, b = SubsampledGaussian(1.5, 0.05), SubsampledGaussian(3.0, 0.05)
    acct = PrivacyAccountant().step(sigma=1.5, sample_rate=0.05, steps=6)
    acct.step(sigma=3.0, sample_rate=0.05, steps=6)
    assert prefix([(a, 6), (b, 6)], 9) == [(a, 6), (b, 3)]
    rep = acct.report(delta=1e-5, every=3)
    assert rep.steps == (3, 6, 9, 12)
    sep = PrivacyAccountant().compose(a, 6).compose(b, 3)
    assert rep.epsilon[2] == sep.epsilon(1e-5)
    assert all(y >= x for x, y in zip(rep.epsilon, rep.epsilon[1:], strict=False))


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
