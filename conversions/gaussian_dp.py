"""Exact privacy profile of the Gaussian mechanism / mu-Gaussian DP (Balle & Wang 2018).

    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),    valid for every real eps,

where mu = sqrt(sum_j k_j (Delta_j / sigma_j)^2) for any composition of Gaussian mechanisms (the
composition of mu_j-GDP mechanisms is sqrt(sum mu_j^2)-GDP, Dong, Roth & Su 2019).  Exact; the only
error is floating point, which is bounded and reported (``GAUSS_REL_ERR``).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr

from mechanisms import validation as V
from mechanisms._numerics import LOG_NDTR_ULPS as _LOG_NDTR_ULPS
from mechanisms._numerics import log_ndtr_bounds

_U = 2.0 ** -53  # unit roundoff
# kept for backward compatibility: the smallest relative error ever reported
GAUSS_REL_ERR = 1e-13


def _log_ndtr_err(z: float, lz: float) -> float:
    """Bound on |computed log Phi(z) - log Phi(z_true)| when z carries a relative rounding error 2u:
    log_ndtr's own error plus the sensitivity |d log Phi / dz| <= |z| + 1 times |dz| <= 2u |z|."""
    return _LOG_NDTR_ULPS * _U * (1.0 + abs(lz)) + 2.0 * _U * abs(z) * (abs(z) + 1.0)


def gaussian_log_delta_bounds(eps: float, mu: float, mu_rel_err: float = 0.0) -> tuple[float, float, float]:
    """(lower, estimate, upper) of log delta(eps) for mu-GDP, rigorous in floating point.

    The subtraction Phi(a) - e^eps Phi(b) is done as log Phi(a) + log(1 - e^x), x = eps + log Phi(b) -
    log Phi(a) < 0: an absolute error e_x of x becomes a relative error e_x / (e^{|x| - e_x} - 1) of
    delta, which the bounds include, as well as log_ndtr's own error and the rounding of a and b.
    ``mu_rel_err`` is a bound on the relative error of ``mu`` itself (e.g. accumulated when mu is
    computed from a ledger); since d delta / d mu = phi(a) (standard normal density at a), it adds
    phi(a) |d mu| / delta to the relative error.  Upper bound, exact lower bound: closed form (Balle &
    Wang 2018, Thm 8; Dong, Roth & Su 2019 for mu-GDP).
    """
    if mu <= 0:
        raise ValueError(f"mu must be > 0, got {mu!r}")
    a = -eps / mu + mu / 2.0
    b = -eps / mu - mu / 2.0
    la = float(log_ndtr(a))
    lb = float(log_ndtr(b))
    ea, eb = _log_ndtr_err(a, la), _log_ndtr_err(b, lb)
    x = eps + lb - la  # log of e^eps Phi(b) / Phi(a), < 0 in exact arithmetic
    ex = ea + eb + 4.0 * _U * (abs(eps) + abs(lb) + abs(la))
    up_plain = la + ea  # delta <= Phi(a) always
    if x + ex >= 0.0:
        # delta at the floating-point noise floor: only the trivial bracket [0, Phi(a)] is certain
        return -math.inf, min(la, up_plain), up_plain
    ld = la + math.log(-math.expm1(x))
    den = -(x + ex)
    err = ea + (ex / math.expm1(den) if den < 700.0 else 0.0) + 4.0 * _U * (1.0 + abs(ld))
    if mu_rel_err > 0.0:
        # log(phi(a) dmu / delta), with delta >= e^{ld - err}
        log_phi_a = -0.5 * a * a - 0.5 * math.log(2.0 * math.pi)
        r = log_phi_a + math.log(mu * mu_rel_err) - (ld - err)
        err += 1.01 * math.exp(r) if r < 700.0 else math.inf
    return ld - err, ld, min(ld + err, up_plain)


def gaussian_log_delta_upper_array(eps: float, mus: np.ndarray) -> np.ndarray:
    """Upper bounds on log delta(eps) of mu-GDP for an array of mu > 0: the formula of the upper end of
    :func:`gaussian_log_delta_bounds` (``mu_rel_err`` = 0), vectorised over mu for the sums of many
    Gaussian profiles (:mod:`conversions.count_gaussian`), with the arguments' rounding carried by
    :func:`mechanisms._numerics.log_ndtr_bounds` (its slope bound is sharper for positive arguments, so
    the result is never looser than the scalar's).  Upper bound."""
    a = -eps / mus + mus / 2.0
    b = -eps / mus - mus / 2.0
    # a and b carry a relative rounding error of ~2u: z_err = 2u |z|
    la, ea = log_ndtr_bounds(a, 2.0 * _U * np.abs(a))
    lb, eb = log_ndtr_bounds(b, 2.0 * _U * np.abs(b))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        x = eps + lb - la  # log(e^eps Phi(b) / Phi(a)) < 0
        ex = ea + eb + 4.0 * _U * (abs(eps) + np.abs(lb) + np.abs(la))
        plain = la + ea  # delta_G <= Phi(a)
        den = -(x + ex)
        ld = la + np.log(-np.expm1(np.minimum(x, 0.0)))
        rel = np.where(den < 700.0, ex / np.expm1(np.clip(den, 1e-300, 700.0)), 0.0)
        up = ld + ea + rel + 4.0 * _U * (1.0 + np.abs(ld))
        out = np.where(den > 0.0, np.minimum(up, plain), plain)
    return np.where(np.isnan(out), plain, out)


def gaussian_log_delta(eps: float, mu: float) -> float:
    """log delta(eps) for mu-GDP (estimate; see :func:`gaussian_log_delta_bounds` for the bracket)."""
    return gaussian_log_delta_bounds(eps, mu)[1]


def gaussian_delta(eps: float, mu: float) -> float:
    """delta(eps) of mu-GDP (exact closed form)."""
    return math.exp(gaussian_log_delta(eps, mu))


def gaussian_delta_bounds(eps: float, mu: float, mu_rel_err: float = 0.0) -> tuple[float, float, float]:
    """(lower, estimate, upper) of delta(eps) for mu-GDP: ``lower <= delta_true <= upper`` in floating
    point, including the rounding of exp (also in the subnormal range: the upper end is never 0 when
    delta > 0, the lower end is stepped one float down)."""
    llo, lest, lup = gaussian_log_delta_bounds(eps, mu, mu_rel_err)
    up = 1.0 if lup >= 0.0 else min(1.0, math.nextafter(math.exp(lup) * (1.0 + 4.0 * _U), math.inf))
    lo = max(0.0, math.nextafter(math.exp(min(llo, 0.0)) * (1.0 - 4.0 * _U), 0.0)) if llo > -math.inf else 0.0
    est = min(max(math.exp(min(lest, 0.0)), lo), up)
    return lo, est, up


def gaussian_error_factor(eps: float, mu: float, mu_rel_err: float = 0.0) -> float:
    """Relative error bound of ``gaussian_delta`` at (eps, mu) (floating point only)."""
    llo, lest, lup = gaussian_log_delta_bounds(eps, mu, mu_rel_err)
    return math.expm1(min(max(lup - lest, lest - llo), 700.0)) + 4.0 * _U


def gaussian_epsilon(delta: float, mu: float, mu_rel_err: float = 0.0) -> tuple[float, float]:
    """Smallest eps >= 0 with delta(eps) <= ``delta`` for mu-GDP, rounded up; returns (eps, err).

    ``err`` bounds eps - eps_true (root-finding tolerance plus the floating-point error of delta).
    The returned eps satisfies upper(delta(eps)) <= ``delta`` (:func:`gaussian_log_delta_bounds`, with
    ``mu_rel_err`` the relative error of ``mu``).
    """
    from scipy.optimize import brentq  # (imported on use: slow to import)

    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    # log(delta) is rounded: compare against a target moved by its rounding, on the safe side
    ld = math.log(delta)
    ld_up, ld_lo = ld - 2.0 * _U * abs(ld), ld + 2.0 * _U * abs(ld)

    def f(e: float) -> float:
        return gaussian_log_delta_bounds(e, mu, mu_rel_err)[2] - ld_up

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
        v = gaussian_log_delta_bounds(e, mu, mu_rel_err)[0]
        return max(v, -1e300) - ld_lo

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


def calibrate_gaussian_mu(epsilon: float, delta: float) -> float:
    """Largest mu with mu-GDP being (epsilon, delta)-DP (the analytic Gaussian mechanism).

    A Gaussian mechanism with L2 sensitivity s and noise ``s / mu`` is then (epsilon, delta)-DP by its
    exact privacy profile (Balle & Wang 2018, "Improving the Gaussian mechanism for differential
    privacy", Thm 8; module docstring).  Root finding, then a walk toward the safe side: the returned
    mu satisfies delta(epsilon) <= delta (a lower bound of the largest such mu).
    """
    eps = V.real("epsilon", epsilon, low=0.0, low_open=True)
    dl = V.delta(delta)

    def f(mu: float) -> float:
        return math.log(gaussian_delta(eps, mu)) - math.log(dl)

    hi = 1.0
    while f(hi) < 0:
        hi *= 2.0
    lo = hi / 2.0
    while f(lo) > 0:
        lo /= 2.0
    from scipy.optimize import brentq  # (imported on use: slow to import)

    mu = brentq(f, lo, hi, xtol=1e-15, rtol=1e-14)
    while f(mu) > 0:
        mu *= 1.0 - 1e-12
    return mu
