"""Shuffled batches: the certified bracket [lower, upper] against brute force, and what it implies.

References (tests/reference_sampling.py): every permutation of a small dataset enumerated (the epoch's
releases are a 2-D Gaussian mixture for t = 2 batches), hockey-stick divergences by quadrature.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest
from reference_sampling import hs2_float, shuffle_mixture
from scipy.stats import norm

from accountant import PrivacyAccountant
from mechanisms.shuffling import ShuffledGaussian, ShuffledGaussianReplaceOne


def _cert(sigma, n, b, epochs, eps, relation="add_remove"):
    acct = PrivacyAccountant(relation=relation)
    acct.step(sigma=sigma, batch_size=b, dataset_size=n, sampling="shuffle", steps=epochs * (-(-n // b)))
    return acct.certificate(epsilon=eps)


def _gauss_delta(mu, eps):
    return norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2)


@pytest.mark.parametrize("relation,x,xp", [("add_remove", 1.0, 0.0), ("replace_one", 1.0, -1.0)])
def test_bruteforce_lower_bound_datasets(relation, x, xp):
    """Chua et al.'s datasets (others at -1) with n = 4, b = 2: every permutation enumerated.  The
    certified lower bound is below the exact delta of these datasets, the upper bound above it."""
    sigma, n, b = 0.8, 4, 2
    s = mp.mpf(sigma)
    others = [-1.0] * (n - 1)
    P, Q = shuffle_mixture(others + [x], n // b, s), shuffle_mixture(others + [xp], n // b, s)
    for eps in (0.5, 1.5):
        exact = max(hs2_float(P, Q, math.exp(eps)), hs2_float(Q, P, math.exp(eps)))
        cert = _cert(sigma, n, b, 1, eps, relation)
        assert cert.lower_bound <= exact * (1 - 1e-5)
        assert cert.delta >= exact * (1 + 1e-5)


@pytest.mark.parametrize("others,x", [((0.5, -1.0, 0.2), 0.7), ((1.0, 1.0, -0.3), -1.0)])
def test_bruteforce_upper_bound_other_datasets(others, x):
    """Other datasets (zero-out: the record against a null record): exact delta <= certified upper."""
    sigma, n, b = 0.7, 4, 2
    s = mp.mpf(sigma)
    P, Q = shuffle_mixture(list(others) + [x], 2, s), shuffle_mixture(list(others) + [0.0], 2, s)
    for eps in (0.3, 1.0):
        exact = max(hs2_float(P, Q, math.exp(eps)), hs2_float(Q, P, math.exp(eps)))
        assert _cert(sigma, n, b, 1, eps).delta >= exact * (1 + 1e-5)


def test_upper_bound_is_the_gaussian_per_epoch():
    """E epochs: sqrt(E) mu-GDP (zero-out) / sqrt(E) 2 mu (replace-one), closed form; the bound is
    labelled an upper bound (the Gaussian pair is not attained)."""
    for rel, shift in (("add_remove", 1.0), ("replace_one", 2.0)):
        cert = _cert(1.5, 1000, 100, 4, 1.0, rel)
        want = _gauss_delta(shift * 2.0 / 1.5, 1.0)
        assert abs(cert.delta - want) <= 1e-12
        assert cert.bound == "upper bound" and cert.lower_bound < cert.delta


def test_shuffling_lower_bound_exceeds_balls_in_bins_upper_bound():
    """The random-allocation (balls-in-bins) analysis does not cover shuffling: at sigma = 1, 10 batches,
    5 epochs the certified shuffling lower bound is above the certified balls-in-bins upper bound."""
    acct_s, acct_b = PrivacyAccountant(), PrivacyAccountant()
    acct_s.step(sigma=1.0, batch_size=100, dataset_size=1000, sampling="shuffle", steps=50)
    acct_b.step(sigma=1.0, batch_size=100, dataset_size=1000, sampling="balls_in_bins", steps=50)
    lo_shuffle = acct_s.certificate(delta=1e-5).lower_bound
    up_bnb = acct_b.certificate(delta=1e-5).epsilon
    assert lo_shuffle > up_bnb + 1.0


def test_partial_epoch_and_state_round_trip(tmp_path):
    """An epoch is charged when it starts; the partial one is left out of the lower bound, also after
    saving and loading the state."""
    acct = PrivacyAccountant()
    for _ in range(15):  # 1.5 epochs of 10 batches
        acct.step(sigma=1.0, batch_size=10, dataset_size=100, sampling="shuffle")
    ((m, k),) = acct.ledger.items()
    assert isinstance(m, ShuffledGaussian) and m.num_steps == 10 and k == 2
    c = acct.certificate(delta=1e-5)
    one = PrivacyAccountant()
    one.step(sigma=1.0, batch_size=10, dataset_size=100, sampling="shuffle", steps=10)
    assert c.lower_bound == one.certificate(delta=1e-5).lower_bound  # only the complete epoch
    path = tmp_path / "s.json"
    acct.save(path)
    back = PrivacyAccountant.load(path)
    assert back.certificate(delta=1e-5).lower_bound == c.lower_bound
    back.step(sigma=1.0, batch_size=10, dataset_size=100, sampling="shuffle", steps=5)
    assert back.ledger.items()[0][1] == 2  # the second epoch completes, nothing new is charged
    two = PrivacyAccountant()
    two.step(sigma=1.0, batch_size=10, dataset_size=100, sampling="shuffle", steps=20)
    assert back.certificate(delta=1e-5).lower_bound == two.certificate(delta=1e-5).lower_bound


def test_mechanisms_and_relations():
    assert ShuffledGaussian(1.0, 10).relations == ("add_remove",)
    assert ShuffledGaussianReplaceOne(1.0, 10).relations == ("replace_one",)
    assert ShuffledGaussianReplaceOne(2.0, 10).gdp_mu == 1.0
    with pytest.raises(ValueError, match="num_steps"):
        ShuffledGaussian(1.0, 0)
    acct = PrivacyAccountant(relation="replace_one")
    acct.step(sigma=1.0, batch_size=5, dataset_size=20, sampling="shuffle")
    assert isinstance(acct.ledger.items()[0][0], ShuffledGaussianReplaceOne)
