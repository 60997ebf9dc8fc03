"""Direct lattice convolution of atoms (conversions.lattice_atoms) against the generic outer-product path
and against an independent mpmath convolution of the discrete Gaussian pmf."""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference_mechlib as R

from accountant import PrivacyAccountant
from conversions import atoms as A
from conversions.atoms import convolve_lattice
from conversions.lattice_atoms import lattice_of
from mechanisms import DiscreteGaussian


def _outer(a, b):
    losses = np.add.outer(a.losses, b.losses).ravel()
    logw = np.add.outer(a.logw, b.logw).ravel()
    return A._merge_prune(losses, logw, 0.0, 0.0)


def test_matches_outer_product_and_brackets():
    rng = np.random.default_rng(1)
    h = 0.037
    for _ in range(5):
        na, nb = rng.integers(70, 120, size=2)
        la = 0.3 + h * rng.choice(400, size=na, replace=False) + rng.uniform(-1e-13, 1e-13, na)
        lb = -1.1 + h * rng.choice(300, size=nb, replace=False)
        a = A.single(la, rng.random(na) / na)
        b = A.single(lb, rng.random(nb) / nb)
        got = convolve_lattice(a, b)
        ref = _outer(a, b)
        assert got is not None
        order = np.argsort(ref.losses)
        np.testing.assert_allclose(got.losses, ref.losses[order], rtol=0, atol=2e-12)
        np.testing.assert_allclose(got.logw, ref.logw[order], rtol=0, atol=1e-12)
        for eps in (-0.5, 0.2, 2.0):
            lo, up = A.log_delta_bounds(got, eps)
            v = A.log_delta(ref, eps)
            assert lo <= v + 1e-12 and v <= up + 1e-12


def test_not_a_lattice():
    assert lattice_of(np.array([0.0, 1.0, math.sqrt(2)])) is None
    assert lattice_of(np.array([0.0, 0.5, 1.5])) is not None


def test_discrete_gaussian_many_fold_is_exact():
    eps = 1.2
    exact = float(R.dg_delta_composed(eps, 3.0, 1, 6))
    c = PrivacyAccountant().compose(DiscreteGaussian(3.0), times=6).certificate(epsilon=eps)
    assert c.method == "cf" and c.bound == "exact"
    assert c.lower_bound <= exact * (1 + 1e-12) and exact <= c.delta <= exact * (1 + 1e-9)


@pytest.mark.slow
def test_discrete_gaussian_large_composition_bracket():
    c = PrivacyAccountant().compose(DiscreteGaussian(5.0), times=1000).certificate(delta=1e-6)
    assert c.bound == "exact" and c.epsilon - c.lower_bound <= 1e-8 * c.epsilon
