"""Calibration results as numbers, and the Opacus-style forms (epochs, batch_size / dataset_size).

References: the mu-GDP closed form (sample rate 1: T Gaussian steps are sqrt(T)/sigma-GDP; solved here
with scipy), Opacus' documented convention steps = int(epochs / sample_rate), exact integer arithmetic,
and fresh accountants for the minimality checks (a value 1e-3 closer to the boundary must fail).
"""

from __future__ import annotations

import math
import numbers

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from accountant import PrivacyAccountant
from accountant.calibration import (
    Calibration,
    StepsCalibration,
    calibrate_sigma,
    dpsgd_schedule,
    max_sample_rate,
    max_steps,
)


def _eps(sigma, q, steps, delta=1e-5, method="auto"):
    acct = PrivacyAccountant().step(sigma=float(sigma), sample_rate=q, steps=int(steps))
    return acct.epsilon(delta, method=method)


@pytest.fixture(scope="module")
def cal():
    return calibrate_sigma(2.0, 1e-5, 0.02, 200, method="rdp")  # (the fast route keeps the tests short)


def test_calibration_is_a_float(cal):
    v = cal.value
    assert float(cal) == v and isinstance(cal, numbers.Real) and isinstance(cal, Calibration)
    assert 2 * cal == 2 * v and cal * 2 == 2 * v and cal / 4 == v / 4 and 1 / cal == 1 / v
    assert cal + 1 == v + 1 and 1 - cal == 1 - v and cal ** 2 == v ** 2 and -cal == -v and abs(cal) == v
    assert cal == v and cal != v + 1 and cal < v + 1e-9 and cal > v - 1e-9 and cal <= v and cal >= v
    assert hash(cal) == hash(v) and {cal: 1}[v] == 1
    assert f"{cal:.3f}" == f"{v:.3f}" and format(cal, "e") == format(v, "e") and f"{cal}" == f"{v}"
    assert round(cal, 2) == round(v, 2) and math.floor(cal) == math.floor(v)
    assert np.asarray(cal) == v and np.float64(cal) == v and float(np.sqrt(np.asarray(cal))) == math.sqrt(v)
    assert "certified epsilon" in str(cal) and cal.parameter == "sigma" and cal.epsilon <= cal.target_epsilon
    with pytest.raises(TypeError):
        cal + "a"
    # usable wherever dpcert takes a real number
    acct = PrivacyAccountant().step(sigma=cal, sample_rate=0.02, steps=200)
    assert acct.epsilon(1e-5) <= 2.0


def test_steps_calibration_is_an_int():
    s = max_steps(1.0, 1e-5, sigma=2.0, sample_rate=0.01)
    assert isinstance(s, StepsCalibration) and isinstance(s, numbers.Integral)
    n = s.value
    assert int(s) == n and len(range(s)) == n and s + 1 == n + 1 and isinstance(s + 1, int)
    assert f"{s:d}" == str(n)
    acct = PrivacyAccountant().step(sigma=2.0, sample_rate=0.01, steps=s)
    assert acct.ledger.total_count == n
    # minimal: one more step exceeds the target
    assert _eps(2.0, 0.01, n) <= 1.0 < _eps(2.0, 0.01, n + 1)


def test_positional_and_keyword_forms_agree(cal):
    same = calibrate_sigma(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.02, steps=200, method="rdp")
    assert same == cal
    e = calibrate_sigma(2.0, 1e-5, sample_rate=0.02, epochs=4, method="rdp")  # int(4 / 0.02) = 200 (Opacus)
    assert e.details["steps"] == int(4 / 0.02) == 200 and e == cal
    b = calibrate_sigma(2.0, 1e-5, epochs=4, batch_size=50, dataset_size=2500, method="rdp")
    assert b.details == {"batch_size": 50, "dataset_size": 2500, "epochs": 4.0, "steps": 200,
                         "sample_rate": 0.02}
    assert b == cal


def test_steps_from_epochs_conventions():
    # Opacus' float int(epochs / sample_rate) with a sample_rate, the exact floor with batch/dataset sizes
    q, t, _ = dpsgd_schedule(0.07, epochs=7)
    assert (q, t) == (0.07, int(7 / 0.07))
    q, t, d = dpsgd_schedule(batch_size=7, dataset_size=100, epochs=7)
    assert t == 100 and q == 7 / 100
    _, t, _ = dpsgd_schedule(batch_size=256, dataset_size=60000, epochs=2.5)
    assert t == (5 * 60000) // (2 * 256)


def test_gaussian_closed_form_and_minimality():
    """Sample rate 1: T steps of sigma are sqrt(T)/sigma-GDP; the calibrated sigma must be safe and within
    rtol of the closed-form root, and 1e-3 less noise must exceed the target."""
    t, target, delta = 10, 1.0, 1e-5

    def gdp_delta(mu, e):
        return norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2)

    sigma_star = brentq(lambda s: gdp_delta(math.sqrt(t) / s, target) - delta, 0.5, 50.0, xtol=1e-14)
    c = calibrate_sigma(target, delta, epochs=t, sample_rate=1.0)
    assert c.details["steps"] == t
    assert sigma_star <= c.value <= sigma_star * (1 + 2e-4)
    assert gdp_delta(math.sqrt(t) / (c.value * (1 - 1e-3)), target) > delta


def test_minimality_with_batch_form():
    c = calibrate_sigma(3.0, 1e-5, epochs=2, batch_size=100, dataset_size=2000, method="rdp")
    assert _eps(c, 0.05, 40, method="rdp") <= 3.0 < _eps(c.value * (1 - 1e-3), 0.05, 40, method="rdp")
    s = max_steps(3.0, 1e-5, sigma=c, batch_size=100, dataset_size=2000, method="rdp")
    assert s >= 40 and s.details["epochs"] == s.value * 100 / 2000
    assert _eps(c, 0.05, s, method="rdp") <= 3.0 < _eps(c, 0.05, s + 1, method="rdp")
    # the tight route (auto) on a full-batch run (closed form): 1e-3 less noise exceeds the target
    c = calibrate_sigma(3.0, 1e-5, epochs=20, batch_size=50, dataset_size=50)
    assert c.details["steps"] == 20
    assert _eps(c, 1.0, 20) <= 3.0 < _eps(c.value * (1 - 1e-3), 1.0, 20)


def test_max_sample_rate_with_dataset_size():
    r = max_sample_rate(1.5, 1e-5, sigma=1.2, steps=300, dataset_size=1000)
    b = r.details["batch_size"]
    assert b == math.floor(r.value * 1000 + 1e-9) and b / 1000 <= r.value
    assert r.details["batch_epsilon"] <= 1.5 and _eps(1.2, b / 1000, 300) <= 1.5
    assert _eps(1.2, r.value, 300) <= 1.5 < _eps(1.2, r.value * (1 + 1e-3), 300)


@pytest.mark.parametrize("kwargs,match", [
    (dict(sample_rate=0.01, steps=10, epochs=1), "steps or epochs"),
    (dict(sample_rate=0.01, batch_size=10, dataset_size=100, steps=5), "sample_rate or batch_size"),
    (dict(batch_size=10, steps=5), "batch_size and dataset_size"),
    (dict(batch_size=200, dataset_size=100, steps=5), "batch_size"),
    (dict(sample_rate=0.01, epochs=0.001), "less than one step"),
    (dict(sample_rate=0.01, epochs=-1), "epochs"),
    (dict(sample_rate=0.01, steps=10, target_delta=1e-6), "delta or target_delta"),
])
def test_bad_forms_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        calibrate_sigma(1.0, 1e-5, **kwargs)


def test_missing_arguments():
    with pytest.raises(TypeError, match="sample_rate"):
        calibrate_sigma(1.0, 1e-5, steps=10)
    with pytest.raises(TypeError, match="steps"):
        calibrate_sigma(1.0, 1e-5, 0.01)
    with pytest.raises(TypeError, match="delta"):
        calibrate_sigma(1.0, sample_rate=0.01, steps=10)
