"""step(sampling=...), DPCertAccountant(sampling=...), the CLI's --sampling and calibrate_sigma(sampling=).

Independent references: closed forms (the per-epoch Gaussian of shuffling is mu-GDP; fixed-size batches
under add/remove have exactly the pair of the Poisson-subsampled Gaussian with rate b/n and shift 2, so
their certificate equals that one's), and monotonicity/scaling invariants.
"""

from __future__ import annotations

import json
import math

import pytest
from scipy.optimize import brentq
from scipy.stats import norm

from accountant import PrivacyAccountant
from accountant.calibration import calibrate_sigma
from accountant.cli import main
from accountant.opacus_adapter import DPCertAccountant
from mechanisms import SubsampledGaussian


def _gdp_eps(mu, delta):
    f = lambda e: norm.cdf(-e / mu + mu / 2) - math.exp(e) * norm.cdf(-e / mu - mu / 2) - delta  # noqa: E731
    return brentq(f, 0.0, 200.0, xtol=1e-14)


def test_default_step_unchanged():
    a, b = PrivacyAccountant(), PrivacyAccountant()
    a.step(sigma=1.1, sample_rate=0.01, steps=100)
    b.compose(SubsampledGaussian(1.1, 0.01), 100)
    assert a.ledger == b.ledger
    c = PrivacyAccountant()
    c.step(sigma=1.1, batch_size=10, dataset_size=1000, steps=100)  # poisson with q = b / n
    assert c.ledger == b.ledger


def test_shuffle_epochs_are_gdp():
    acct = PrivacyAccountant()
    acct.step(sigma=2.0, batch_size=64, dataset_size=6400, sampling="shuffle", steps=300)  # 3 epochs
    assert acct.ledger.items()[0][1] == 3
    assert abs(acct.epsilon(1e-6) - _gdp_eps(math.sqrt(3) / 2.0, 1e-6)) < 1e-9


def test_fixed_size_equals_doubled_poisson():
    a, b = PrivacyAccountant(), PrivacyAccountant()
    a.step(sigma=3.0, batch_size=50, dataset_size=5000, sampling="fixed_size", steps=500)
    b.step(sigma=1.5, sample_rate=0.01, steps=500)  # shift 2 at sigma 3 == shift 1 at sigma 1.5
    assert a.epsilon(1e-5) == pytest.approx(b.epsilon(1e-5), rel=1e-9)


@pytest.mark.parametrize("kw,exc,match", [
    ({"sampling": "shufle", "batch_size": 1, "dataset_size": 10}, ValueError, "sampling must be one of"),
    ({"sampling": "shuffle"}, TypeError, "batch_size and dataset_size"),
    ({"sampling": "shuffle", "batch_size": 11, "dataset_size": 10}, ValueError, "batch_size must be <="),
    ({"sampling": "shuffle", "sample_rate": 0.1, "batch_size": 1, "dataset_size": 10}, ValueError,
     "not sample_rate"),
    ({"sampling": "balls_in_bins", "batch_size": 1, "dataset_size": 10, "steps_per_epoch": 0}, ValueError,
     "steps_per_epoch"),
    ({"sampling": "poisson"}, TypeError, "sample_rate"),
])
def test_bad_input(kw, exc, match):
    with pytest.raises(exc, match=match):
        PrivacyAccountant().step(sigma=1.0, **kw)


def test_relation_checks():
    with pytest.raises(ValueError, match="add_remove"):
        PrivacyAccountant(relation="replace_one").step(sigma=1.0, batch_size=1, dataset_size=10,
                                                        sampling="balls_in_bins")
    with pytest.raises(ValueError, match="add_remove"):
        PrivacyAccountant(relation="replace_one").step(sigma=1.0, sample_rate=0.1, sampling="poisson",
                                                        batch_size=None)


def test_steps_per_epoch_override_and_budget():
    from accountant import BudgetExceeded, PrivacyBudget

    acct = PrivacyAccountant(budget=PrivacyBudget(3.0, 1e-5))
    acct.step(sigma=2.0, batch_size=10, dataset_size=100, sampling="shuffle", steps_per_epoch=5, steps=5)
    assert acct.ledger.items()[0][0].num_steps == 5
    with pytest.raises(BudgetExceeded):
        acct.step(sigma=2.0, batch_size=10, dataset_size=100, sampling="shuffle", steps_per_epoch=5,
                  steps=500)
    assert acct.ledger.items()[0][1] == 1  # nothing recorded


def test_dpcert_accountant_shuffle():
    a = DPCertAccountant(sampling="shuffle", dataset_size=1000)
    for _ in range(20):
        a.step(noise_multiplier=2.0, sample_rate=0.1)
    ((m, k),) = a.accountant.ledger.items()
    assert k == 2 and m.num_steps == 10
    assert a.get_epsilon(1e-5) == pytest.approx(_gdp_eps(math.sqrt(2) / 2.0, 1e-5), abs=1e-9)
    with pytest.raises(TypeError, match="dataset_size"):
        DPCertAccountant(sampling="shuffle")
    assert "shuffle" in repr(a)


def test_cli_sampling(capsys):
    assert main(["dpsgd", "--sigma", "2", "--batch-size", "100", "--dataset-size", "1000", "--epochs", "3",
                 "--delta", "1e-6", "--sampling", "shuffle", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["steps"] == 30
    assert doc["ledger"] == ["3 x shuffled_gaussian(sigma=2, num_steps=10, sensitivity=1)"]
    assert doc["epsilon"] == pytest.approx(_gdp_eps(math.sqrt(3) / 2, 1e-6), abs=1e-9)
    assert doc["lower_bound"] is not None and doc["lower_bound"] < doc["epsilon"]


def test_calibrate_sigma_sampling():
    c = calibrate_sigma(2.0, 1e-5, batch_size=100, dataset_size=10000, epochs=2, sampling="shuffle",
                        rtol=1e-3)
    # shuffling's bound is sqrt(2)/sigma-GDP: the calibrated sigma solves it
    want = math.sqrt(2) / brentq(lambda mu: _gdp_eps(mu, 1e-5) - 2.0, 0.1, 5.0)
    assert want <= c.value <= want * 1.002
    assert c.details["sampling"] == "shuffle" and c.epsilon <= 2.0
    cf = calibrate_sigma(2.0, 1e-5, batch_size=100, dataset_size=10000, steps=200, sampling="fixed_size",
                         rtol=1e-3)
    cp = calibrate_sigma(2.0, 1e-5, sample_rate=0.01, steps=200, rtol=1e-3)
    assert cf.value == pytest.approx(2 * cp.value, rel=2e-3)
