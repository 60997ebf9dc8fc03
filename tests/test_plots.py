"""Tests of the plots (accountant/plots.py, ``dpcert plot``) and a smoke test of the benchmark suite.

The figures are rendered to files and the returned matplotlib Figures are inspected: axes labelled, the
plotted data monotone where the math says so, and the values checked against independent closed forms
for the k-fold Gaussian mechanism (mu = sqrt(k) / sigma):
* RDP: alpha mu^2 / 2 (Mironov 2017);
* privacy profile: delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Balle & Wang 2018);
* trade-off function of mu-GDP: beta(a) = Phi(Phi^-1(1 - a) - mu) (Dong, Roth & Su 2022).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from scipy.stats import norm

pytest.importorskip("matplotlib")

from accountant import (
    PrivacyAccountant,  # noqa: E402
    plots,  # noqa: E402
)
from accountant.cli import main  # noqa: E402
from mechanisms import Gaussian, SubsampledGaussian  # noqa: E402

SIGMA, K, DELTA = 2.0, 20, 1e-5
MU = math.sqrt(K) / SIGMA


def gdp_delta(eps, mu):
    eps = np.asarray(eps, dtype=float)
    return norm.cdf(-eps / mu + mu / 2) - np.exp(eps) * norm.cdf(-eps / mu - mu / 2)


def line(fig, label_part: str):
    [ax] = fig.axes
    found = [ln for ln in ax.get_lines() if label_part in ln.get_label()]
    assert found, f"no line labelled {label_part!r}"
    return np.asarray(found[0].get_xdata(), float), np.asarray(found[0].get_ydata(), float)


def assert_labelled(fig):
    for ax in fig.axes:
        assert ax.get_xlabel().strip() and ax.get_ylabel().strip() and ax.get_title().strip()


def assert_file(path):
    data = path.read_bytes()
    assert len(data) > 1000
    if path.suffix == ".png":
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert b"<svg" in data[:2000]


@pytest.fixture(scope="module")
def acct():
    return PrivacyAccountant().compose(Gaussian(sigma=SIGMA), K)


def test_eps_vs_steps(tmp_path):
    steps = [1, 2, 5, 10, 20]
    fig = plots.plot_eps_vs_steps(Gaussian(sigma=SIGMA), steps, DELTA)
    assert_labelled(fig)
    [ax] = fig.axes
    assert len(ax.get_lines()) >= 3  # several methods
    for ln in ax.get_lines():
        y = np.asarray(ln.get_ydata(), float)
        assert np.all(np.diff(y) >= -1e-12), ln.get_label()  # eps non-decreasing in steps
    _, exact = line(fig, "exact")
    _, rdp = line(fig, "classic")
    for t, e_ex in zip(steps, exact, strict=True):
        e_true = _gdp_eps(math.sqrt(t) / SIGMA, DELTA)
        assert abs(e_ex - e_true) <= 1e-6 * e_true
    assert np.all(rdp >= exact)  # RDP conversion is never below the exact value
    for p in plots.save_figure(fig, tmp_path / "steps"):
        assert_file(p)


def _gdp_eps(mu, delta):
    from scipy.optimize import brentq

    return brentq(lambda e: gdp_delta(e, mu) - delta, 0.0, 200.0, xtol=1e-14, rtol=1e-14)


def test_privacy_profile(acct, tmp_path):
    grid = np.linspace(0.0, 12.0, 13)
    fig = plots.plot_privacy_profile(acct, grid, DELTA)
    assert_labelled(fig)
    x, y = line(fig, "delta")
    assert np.all(np.diff(y) <= 1e-15)  # delta(eps) non-increasing
    truth = gdp_delta(x, MU)
    ok = truth > 1e-12
    assert np.all(y[ok] >= truth[ok] * (1 - 1e-9))  # certified upper bounds
    assert np.all(y[ok] <= truth[ok] * (1 + 1e-5))  # and tight
    for p in plots.save_figure(fig, tmp_path / "profile", ("svg",)):
        assert_file(p)


def test_rdp_curve(acct):
    alphas = np.geomspace(1.1, 100.0, 30)
    fig = plots.plot_rdp_curve(acct, alphas)
    assert_labelled(fig)
    x, y = line(fig, "RDP")
    assert np.all(np.diff(y) >= 0)
    np.testing.assert_allclose(y, x * MU**2 / 2, rtol=1e-12)


def test_tradeoff_curve(acct, tmp_path):
    grid = np.linspace(0.0, 14.0, 57)
    fig = plots.plot_tradeoff(acct, grid, DELTA, points=101)
    assert_labelled(fig)
    a, beta = line(fig, "trade-off")
    assert np.all(np.diff(beta) <= 1e-15)  # non-increasing
    assert np.all(np.diff(beta, 2) >= -1e-9)  # convex
    assert np.all((beta >= 0) & (beta <= 1 - a + 1e-15))
    truth = norm.cdf(norm.ppf(1 - a) - MU)
    assert np.all(beta <= truth + 1e-9)  # a valid (conservative) lower bound on the trade-off function
    assert np.max(truth - beta) < 0.05  # and close to it
    for p in plots.save_figure(fig, tmp_path / "tradeoff"):
        assert_file(p)


def test_tradeoff_from_profile_pure_dp_closed_form():
    # a single (eps, 0) pair: f(a) = max(0, 1 - e^eps a, e^-eps (1 - a))
    a = np.linspace(0, 1, 11)
    got = plots.tradeoff_from_profile([1.0], [0.0], a)
    np.testing.assert_allclose(got, np.maximum.reduce([0 * a, 1 - math.e * a, (1 - a) / math.e]))
    with pytest.raises(ValueError):
        plots.tradeoff_from_profile([-1.0], [0.0], a)


def test_make_plots_and_cli(tmp_path, capsys):
    paths = plots.make_plots(SubsampledGaussian(sigma=1.0, sample_rate=0.5), 3, DELTA, tmp_path / "a",
                             kinds=("rdp",), points=3)
    assert [p.name for p in paths] == ["dpcert_rdp_curve.png", "dpcert_rdp_curve.svg"]
    out = tmp_path / "b"
    rc = main(["plot", "--mechanism", "gaussian", "--sigma", "2", "--times", "4", "--out", str(out),
               "--points", "3"])
    assert rc == 0
    files = sorted(p.name for p in out.iterdir())
    assert len(files) == 8 and all(f.startswith("gaussian_") for f in files)
    for f in out.iterdir():
        assert_file(f)
    assert main(["plot", "--out", str(out)]) == 2  # no mechanism and no DP-SGD parameters
    assert "error" in capsys.readouterr().err


def test_missing_matplotlib_is_a_clear_error(monkeypatch, acct, capsys):
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, mod, None)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(plots.MissingMatplotlib, match="pip install"):
        plots.plot_rdp_curve(acct)
    assert main(["plot", "--mechanism", "gaussian", "--sigma", "2"]) == 2
    assert "matplotlib" in capsys.readouterr().err


def test_benchmark_smoke():
    """One quick benchmark function in-process (the suite itself is not run by the tests)."""
    from benchmarks.peers import DPCert
    from benchmarks.suite import Config, build_tasks, gaussian_exact_eps
    from benchmarks.worker import run_task

    tasks = build_tasks(Config.make(quick=True), [])
    task = next(t for t in tasks if t["kind"] == "gaussian_eps")
    res = run_task(DPCert(), dict(task, warm_budget_s=0.0))
    assert res["status"] == "ok" and res["first_s"] > 0
    p = task["params"]
    exact = gaussian_exact_eps(math.sqrt(p["k"]) / p["sigma"], p["delta"])
    assert abs(exact - _gdp_eps(math.sqrt(p["k"]) / p["sigma"], p["delta"])) <= 1e-9 * exact
    assert abs(res["value"] - exact) <= 1e-6 * exact
