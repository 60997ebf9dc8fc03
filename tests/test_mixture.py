"""GaussianMixture pair against mpmath quadrature and the subsampled-Gaussian oracle.

References: ``reference_mechlib.mixture_log_mgf`` / ``mixture_delta`` (mpmath quadrature of the densities,
split at the crossing points) and ``reference.subsampled_gaussian_delta`` (rigorous FFT bracket of the
k-fold subsampled Gaussian, the two-component special case)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import reference as ref
import reference_mechlib as R

from accountant import PrivacyAccountant
from mechanisms import GaussianMixture, registry
from mechanisms.conformance import check_mechanism

MIX = GaussianMixture(1.2, [0.0, 1.0, 2.0], [0.5, 0.3, 0.2])
W, MEANS = [0.5, 0.3, 0.2], [0.0, 1.0 / 1.2, 2.0 / 1.2]


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("s", [0.3, 2.0, 7.5])
def test_log_mgf_real_matches_quadrature(direction, s):
    exact = float(R.mixture_log_mgf(s, W, MEANS, direction))
    assert abs(MIX.log_mgf_real(s, direction) - exact) <= 1e-12 * (1 + abs(exact))


def test_log_mgf_complex_matches_quadrature():
    import mpmath as mp

    for direction in ("remove", "add"):
        for s in (1 + 3j, 0.5 + 12j):
            with mp.workdps(30):
                w = [mp.mpf(x) for x in W]
                c = [mp.mpf(x) for x in MEANS]
                z = mp.mpc(s)

                def f(x, w=w, c=c, z=z, direction=direction):
                    g = mp.fsum(wi * mp.exp(ci * x - ci * ci / 2) for wi, ci in zip(w, c, strict=True))
                    phi = mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi)
                    return phi * mp.exp((1 + z if direction == "remove" else -z) * mp.log(g))

                exact = complex(mp.quad(f, mp.linspace(-14, 18, 48)))
            got = complex(np.exp(MIX.log_mgf(np.array([s]), direction)[0]))
            scale = math.exp(MIX.log_mgf_real(s.real, direction))
            assert abs(got - exact) <= 1e-10 * scale


@pytest.mark.parametrize("alpha", [1.5, 2.0, 10.0, 64.0])
def test_rdp_is_max_over_directions(alpha):
    exact = max(float(R.mixture_log_mgf(alpha - 1, W, MEANS, d)) for d in ("remove", "add")) / (alpha - 1)
    v = float(MIX.rdp([alpha])[0])
    assert exact <= v <= exact * (1 + 1e-8) + 1e-12


@pytest.mark.parametrize("eps", [0.3, 1.0, 2.5])
def test_single_use_delta_bracket_contains_quadrature(eps):
    exact = max(float(R.mixture_delta(eps, W, MEANS, d)) for d in ("remove", "add"))
    c = PrivacyAccountant().compose(MIX).certificate(epsilon=eps)
    assert c.lower_bound <= exact <= c.delta
    assert c.delta <= exact * (1 + 1e-3)  # the discretised PLD's bracket (the cf envelope is 1/t here)


@pytest.mark.parametrize("q,sigma,k,eps", [(0.2, 2.0, 20, 0.5),
                                           pytest.param(0.01, 1.0, 100, 1.0, marks=pytest.mark.slow)])
def test_two_components_are_the_subsampled_gaussian(q, sigma, k, eps):
    m = GaussianMixture(sigma, [0.0, 1.0], [1 - q, q])
    c = PrivacyAccountant().compose(m, times=k).certificate(epsilon=eps)
    lo, hi = (max(ref.subsampled_gaussian_delta(eps, q, sigma, k, d)[i] for d in ("remove", "add"))
              for i in (0, 1))
    assert c.lower_bound <= hi and lo <= c.delta
    assert c.delta <= hi * (1 + 1e-6) + 1e-15


def test_composition_cf_and_pld_agree():
    acct = PrivacyAccountant().compose(MIX, times=50)
    cf = acct.certificate(epsilon=4.0, method="cf")
    pld = acct.certificate(epsilon=4.0, method="pld")
    assert cf.lower_bound <= pld.delta and pld.lower_bound <= cf.delta
    assert cf.delta <= cf.lower_bound * (1 + 1e-6)


def test_total_variation():
    exact = max(float(R.mixture_delta(0.0, W, MEANS, d)) for d in ("remove", "add"))
    assert exact <= MIX.total_variation() <= exact * (1 + 1e-9)


@pytest.mark.parametrize("mech", [MIX, GaussianMixture(1.0, [0.0, 1.0], [0.99, 0.01]),
                                  GaussianMixture(0.5, [1.0], [1.0]),
                                  GaussianMixture(2.0, [0.0, 0.0], [0.5, 0.5]),
                                  GaussianMixture(0.3, [0.5, 1.0, 3.0], [0.2, 0.3, 0.5])])
def test_conformance(mech):
    check_mechanism(mech)
    assert registry.from_dict(mech.to_dict()) == mech
    assert hash(mech) == hash(registry.from_dict(mech.to_dict()))


@pytest.mark.parametrize("kw,match", [
    ({"sigma": 1.0, "sensitivities": [1.0, -1.0], "probabilities": [0.5, 0.5]}, "sensitivities"),
    ({"sigma": 1.0, "sensitivities": [1.0], "probabilities": [0.5]}, "sum to 1"),
    ({"sigma": 1.0, "sensitivities": [1.0, 2.0], "probabilities": [1.0]}, "same length"),
    ({"sigma": 0.0, "sensitivities": [1.0], "probabilities": [1.0]}, "sigma"),
    ({"sigma": 1.0, "sensitivities": 1.0, "probabilities": [1.0]}, "lists"),
])
def test_bad_input(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        GaussianMixture(**kw)
