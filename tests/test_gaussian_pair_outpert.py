"""GaussianPair (two Gaussians, different covariances) and the per-instance privacy of GLM output
perturbation.

References: ``reference_mechlib.gaussian_pair_delta_1d`` (exact delta of two 1-D Gaussians by normal CDFs
over the quadratic region {L > eps}, mpmath); the 1-D logistic optimum found by bracketing the derivative
(scipy brentq), independent of the library's Newton solver."""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference as ref
import reference_mechlib as R
from scipy.optimize import brentq
from scipy.special import expit

from accountant import PrivacyAccountant
from accountant.adaptive.output_perturbation import output_perturbation_pair, report_e1
from mechanisms import GaussianPair, registry
from mechanisms.conformance import check_mechanism


@pytest.mark.parametrize("d,a", [(0.7, 1.3), (0.5, 0.8)])
@pytest.mark.parametrize("eps", [0.3, 1.0])
def test_one_dimensional_pair_matches_cdf_reference(d, a, eps):
    exact = max(float(R.gaussian_pair_delta_1d(eps, d, a, s)) for s in ("remove", "add"))
    c = PrivacyAccountant().compose(GaussianPair([d], [a])).certificate(epsilon=eps)
    assert c.lower_bound <= exact <= c.delta <= exact * (1 + 1e-6)


def test_equal_covariances_is_the_gaussian_mechanism():
    m = GaussianPair([0.6, 0.8], [1.0, 1.0])
    assert m.gdp_mu == pytest.approx(1.0)
    c = PrivacyAccountant().compose(m, times=3).certificate(delta=1e-6)
    exact = ref.gaussian_epsilon(1e-6, math.sqrt(3))
    assert c.method == "exact" and exact <= c.epsilon <= exact * (1 + 1e-9)


def test_from_gaussians_is_affine_invariant():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(3, 3))
    s1 = a @ a.T + np.eye(3)
    b = rng.normal(size=(3, 3))
    s2 = b @ b.T + np.eye(3)
    m1, m2 = rng.normal(size=3), rng.normal(size=3)
    p = GaussianPair.from_gaussians(m1, s1, m2, s2)
    t = rng.normal(size=(3, 3)) + 3 * np.eye(3)  # an invertible affine map keeps the pair's profile
    q = GaussianPair.from_gaussians(t @ m1 + 1.0, t @ s1 @ t.T, t @ m2 + 1.0, t @ s2 @ t.T)
    for s in (0.5 + 0j, 1.0 + 3j):
        for d in ("remove", "add"):
            assert p.log_mgf(np.array([s]), d)[0] == pytest.approx(q.log_mgf(np.array([s]), d)[0], rel=1e-8)


def test_rdp_matches_closed_form_renyi_divergence():
    """The standard Renyi divergence of two 1-D Gaussians (variances v1, v2, v_a = alpha v2 + (1 - alpha) v1):
    alpha d^2 / (2 v_a) - log(v_a / (v1^(1 - alpha) v2^alpha)) / (2 (alpha - 1)), both orders."""
    d, a, alpha = 0.4, 1.5, 2.5
    v1, v2 = 1.0, 1.0 / a
    va = alpha * v2 + (1 - alpha) * v1
    exact_rem = (alpha * d * d / (2 * va)
                 - math.log(va / (v1 ** (1 - alpha) * v2 ** alpha)) / (2 * (alpha - 1)))
    va2 = alpha * v1 + (1 - alpha) * v2
    exact_add = (alpha * d * d / (2 * va2)
                 - math.log(va2 / (v2 ** (1 - alpha) * v1 ** alpha)) / (2 * (alpha - 1)))
    v = float(GaussianPair([d], [a]).rdp([alpha])[0])
    assert max(exact_rem, exact_add) <= v <= max(exact_rem, exact_add) * (1 + 1e-12)


def _logistic_1d(xs, ys, lam):
    def grad(t):
        return float(np.sum(-ys * xs * expit(-ys * xs * t))) + lam * t

    t = brentq(grad, -50, 50, xtol=1e-15)
    h = float(np.sum(xs * xs * expit(xs * t) * expit(-xs * t))) + lam
    return t, h


@pytest.mark.parametrize("adding", [True, False])
def test_output_perturbation_pair_one_dimensional(adding):
    rng = np.random.default_rng(5)
    xs = rng.uniform(-1, 1, 40)
    ys = np.sign(xs + 0.3 * rng.normal(size=40))
    lam, gamma = 1.5, 4.0
    zx, zy = (0.9, -1.0) if adding else (xs[3], ys[3])
    t1, h1 = _logistic_1d(xs, ys, lam)
    xs2, ys2 = (np.append(xs, zx), np.append(ys, zy)) if adding else (np.delete(xs, 3), np.delete(ys, 3))
    t2, h2 = _logistic_1d(xs2, ys2, lam)
    d, a = (t2 - t1) * math.sqrt(gamma * h1), h2 / h1
    pair = output_perturbation_pair(xs[:, None], ys, [zx], zy, lam=lam, gamma=gamma, loss="logistic",
                                    adding=adding)
    assert pair.shifts[0] == pytest.approx(d, rel=1e-7) and pair.precisions[0] == pytest.approx(a, rel=1e-9)
    eps = 0.2
    exact = max(float(R.gaussian_pair_delta_1d(eps, d, a, s)) for s in ("remove", "add"))
    c = PrivacyAccountant().compose(pair).certificate(epsilon=eps)
    assert c.delta == pytest.approx(exact, rel=1e-5)


def test_report_e1_dominates_exact_pdp_on_random_instances():
    rng = np.random.default_rng(3)
    for trial in range(6):
        n, d = 60, 2
        X = rng.normal(size=(n, d))
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1))[:, None]
        y = np.sign(X @ np.array([1.0, -0.5]) + 0.3 * rng.normal(size=n))
        lam, gamma, delta = 2.0, (0.5, 2.0, 8.0)[trial % 3], 1e-4
        adding = trial % 2 == 0
        z = (rng.normal(size=d) / 2, 1.0) if adding else (X[0], y[0])
        pair = output_perturbation_pair(X, y, z[0], z[1], lam=lam, gamma=gamma, loss="logistic",
                                        adding=adding)
        exact = PrivacyAccountant().compose(pair).certificate(delta=delta).epsilon
        assert exact <= float(report_e1(z[0], lam=lam, gamma=gamma, delta=delta))


def test_conformance_and_json():
    for m in (GaussianPair([0.7], [1.3]), GaussianPair([0.3, 0.1, 0.2], [1.1, 0.9, 1.0]),
              GaussianPair([1.0], [1.0])):
        check_mechanism(m)
        assert registry.from_dict(m.to_dict()) == m


@pytest.mark.parametrize("kw,match", [({"shifts": [1.0], "precisions": [0.0]}, "precisions"),
                                      ({"shifts": [1.0, 2.0], "precisions": [1.0]}, "same length"),
                                      ({"shifts": "a", "precisions": [1.0]}, "lists")])
def test_bad_input(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        GaussianPair(**kw)


def test_output_perturbation_bad_input():
    with pytest.raises(ValueError, match="not a row"):
        output_perturbation_pair(np.eye(2), [1.0, -1.0], [0.5, 0.5], 1.0, lam=1.0, gamma=1.0, loss="logistic",
                                 adding=False)
    with pytest.raises(ValueError, match="delta"):
        report_e1([0.5, 0.5], lam=1.0, gamma=1.0, delta=0.9)
