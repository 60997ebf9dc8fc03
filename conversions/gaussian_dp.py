"""Exact privacy profile of the Gaussian mechanism / mu-Gaussian DP (Balle & Wang 2018).

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),    valid for every real eps,

where mu = sqrt(sum_j k_j (Delta_j / sigma_j)^2) for any composition of Gaussian mechanisms (the
composition of mu_j-GDP mechanisms is sqrt(sum mu_j^2)-GDP, Dong, Roth & Su 2019).  Exact; the only
error is floating point, which is bounded and reported (``GAUSS_REL_ERR``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.special import log_ndtr

# relative floating-point error of log_delta: log_ndtr is accurate to a few ulps; the subtraction
# loses about log10(|a|/mu) digits (a = -eps/mu + mu/2).  We bound it generously.
GAUSS_REL_ERR = 1e-13


def gaussian_log_delta(eps: float, mu: float) -> float:
    """log delta(eps) for mu-GDP (``-inf`` if delta underflows to 0 only when it truly is < 1e-308)."""
    if mu <= 0:
        raise ValueError(f"mu must be > 0, got {mu!r}")
    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    la = float(log_ndtr(a))
    lb = float(log_ndtr(b))
    x = eps + lb - la  # log of e^eps Phi(b) / Phi(a), always < 0
    if x >= 0.0:  # rounding at the level of 1e-16; delta is at the noise floor
        x = -1e-300
    return la + math.log(-math.expm1(x))


def gaussian_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP (exact closed form)."""
    return math.exp(gaussian_log_delta(eps, mu))


def gaussian_error_factor(eps: float, mu: float) -> float:
    """Relative error bound of ``gaussian_delta`` at (eps, mu) (float-point only)."""
    a = abs(-eps / mu + mu / 2.0)
    return GAUSS_REL_ERR * (1.0 + a / mu)


def gaussian_epsilon(delta: float, mu: float) -> tuple[float, float]:
    """Smallest eps >= 0 with delta(eps) <= ``delta`` for mu-GDP, rounded up; returns (eps, err).

    ``err`` bounds eps - eps_true (root-finding tolerance plus the floating-point error of delta).
    The returned eps satisfies delta(eps) * (1 + relative error) <= ``delta``.
    """
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    ld = math.log(delta)

    def f(e: float) -> float:
        return gaussian_log_delta(e, mu) + math.log1p(gaussian_error_factor(e, mu)) - ld

    if f(0.0) <= 0.0:
        return 0.0, 0.0
    hi = mu * mu / 2.0 + mu * math.sqrt(2.0 * math.log(1.0 / delta)) + 1.0  # classic RDP bound + 1
    while f(hi) > 0.0:
        hi *= 2.0
    xtol = 1e-14 * max(1.0, hi)
    root = brentq(f, 0.0, hi, xtol=xtol, rtol=1e-15, maxiter=500)
    eps = root
    step = max(xtol, 1e-15 * max(1.0, root))
    while f(eps) > 0.0:  # make the bound safe: move up until the certified delta is <= target
        eps += step
        step *= 2.0
    # lower end: the largest eps at which even the smallest possible delta still exceeds the target
    def f_lo(e: float) -> float:
        return gaussian_log_delta(e, mu) + math.log1p(-gaussian_error_factor(e, mu)) - ld

    if f_lo(0.0) <= 0.0:
        lo = 0.0
    else:
        lo = brentq(f_lo, 0.0, eps, xtol=xtol, rtol=1e-15, maxiter=500)
        step = max(xtol, 1e-15 * max(1.0, lo))
        while lo > 0.0 and f_lo(lo) < 0.0:
            lo = max(lo - step, 0.0)
            step *= 2.0
    return float(eps), float(max(eps - lo, 0.0))


def gaussian_delta_array(eps, mu: float) -> np.ndarray:
    return np.array([gaussian_delta(float(e), mu) for e in np.atleast_1d(eps)])
