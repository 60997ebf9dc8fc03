"""Delegating wrappers are accounted exactly as the mechanisms they forward to (the ledger's numeric view).

A :class:`mechanisms.base.Delegating` mechanism that overrides none of the forwarded curves has, by
construction, the same curves as its dominating mechanism; the routes that special-case a type (the
one-step subsampled-Gaussian closed form, the near-atomic splits) must therefore give it the same
certificate as that mechanism composed directly, while what the wrapper declares for itself (``tight``:
no lower bound for a pair that is not attained) is kept.  References: the certificate of the dominating
mechanism itself (a different ledger, reached by the public API), and the direct closed form of one
subsampled-Gaussian step (:mod:`conversions.poisson_gaussian_dp`).
"""

from __future__ import annotations

import warnings

import pytest

from accountant import PrivacyAccountant
from accountant.ledger import Ledger
from conversions import poisson_gaussian_dp
from mechanisms import AmplifiedBandedMF, AmplifiedBandedToeplitzMF, GNMax, SubsampledGaussian
from mechanisms.base import accounted_as
from mechanisms.fixed_size import FixedSizeGaussian


def _cert(mech, times, **query):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return PrivacyAccountant().compose(mech, times).certificate(**query)


TOEPLITZ = AmplifiedBandedToeplitzMF(coefficients=[1.0, 0.5], steps=4, sigma=1.2, sample_rate=0.1, bands=2)


def test_accounted_as_unwraps_pure_forwarders_only():
    sg = accounted_as(TOEPLITZ)
    assert type(sg) is SubsampledGaussian and sg == TOEPLITZ.dp_sgd_equivalent()[0]
    assert type(accounted_as(GNMax(sigma=2.0))).__name__ == "Gaussian"
    # a wrapper that overrides a forwarded flag keeps its own identity (its numbers may differ)
    fs = FixedSizeGaussian(sigma=1.0, batch_size=64, dataset_size=6400)
    assert accounted_as(fs) is fs
    plain = SubsampledGaussian(sigma=1.0, sample_rate=0.01)
    assert accounted_as(plain) is plain


def test_numeric_view_merges_counts_and_keeps_tight():
    sg, rounds = TOEPLITZ.dp_sgd_equivalent()
    led = Ledger()
    led.add(TOEPLITZ, rounds)
    led.add(sg, 3)
    view = led.numeric_view()
    assert view.items() == [(sg, rounds + 3)]
    assert view.tight == led.tight
    plain = Ledger()
    plain.add(sg, 2)
    assert plain.numeric_view() is plain  # nothing to unwrap: the same object
    gn = Ledger()
    gn.add(GNMax(sigma=2.0), 2)
    assert gn.tight is False and gn.numeric_view().tight is False  # the Gaussian inside is tight


@pytest.mark.parametrize("query", [{"delta": 1e-5}, {"epsilon": 1.0}])
@pytest.mark.parametrize("uses", [1, 2])
def test_tight_wrapper_gets_the_certificate_of_its_mechanism(query, uses):
    sg, _ = TOEPLITZ.dp_sgd_equivalent()
    assert TOEPLITZ.tight
    got = _cert(TOEPLITZ, uses, **query)
    ref = _cert(sg, uses, **query)
    assert (got.epsilon, got.delta, got.lower_bound, got.method) == (ref.epsilon, ref.delta, ref.lower_bound,
                                                                     ref.method)
    if uses == 1:  # the one-step closed form, reached through the wrapper
        assert got.method == "exact"


def test_one_use_matches_the_direct_closed_form():
    sg, _ = TOEPLITZ.dp_sgd_equivalent()
    mu = sg.sensitivity / sg.sigma
    ups = [poisson_gaussian_dp.epsilon_bounds(1e-5, mu, sg.sample_rate, d) for d in ("remove", "add")]
    c = _cert(TOEPLITZ, 1, delta=1e-5)
    assert c.epsilon == max(u[1] for u in ups)
    assert c.lower_bound <= c.epsilon


def test_wrapper_whose_pair_is_not_attained_stays_upper_only():
    # unequal column norms: the subsampled Gaussian of the largest norm dominates but is not attained
    m = AmplifiedBandedMF(C=[[1.0, 0, 0], [0.5, 0.8, 0], [0, 0.3, 1.0]], sigma=1.0, sample_rate=0.2, bands=2)
    assert not m.tight
    for uses in (1, m.rounds):
        c = _cert(m, uses, delta=1e-5)
        ref = _cert(m.dp_sgd_equivalent()[0], uses, delta=1e-5)
        assert c.lower_bound is None
        assert c.epsilon >= ref.lower_bound  # never below what the dominating pair certifies from below
    g = _cert(GNMax(sigma=2.0), 3, delta=1e-5)
    assert g.lower_bound is None
