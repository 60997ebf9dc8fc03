"""Noise calibration for SVT: the smallest noise scale whose certified epsilon meets a target.

Every SVT curve of :mod:`mechanisms.svt.core` is non-increasing in the noise scale when the ratio between
query and threshold noise is fixed (Zhu & Wang 2020, "Improving sparse vector technique with Renyi
differential privacy": the bounds depend on the scales through Delta / b and Delta^2 / sigma^2; for the
Q+ bound this holds for T >= 0, since the moment depends on T / sigma1 only and increases with it).  The
search is a bisection on log(scale) (:func:`accountant._search.bisect_log`) that keeps the invariant
"the upper end certifies epsilon <= target", so the returned mechanism is always on the safe side (even
where monotonicity fails, e.g. Q+ with T < 0, it is valid, only possibly not the smallest).

The certified epsilon is the accountant's: by default its RDP route (``rule="improved"``: route
``rdp``, Balle et al. 2020; ``"classic"``: route ``rdp_classic``, Mironov 2017), as in earlier versions;
``method="auto"`` (or ``"cf"``, ...) uses the tighter routes, which can only certify less.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from mechanisms import validation as V
from mechanisms.base import Mechanism
from mechanisms.svt import GaussianSVT, LaplaceSVT

from ._search import bisect_log
from .privacy_accountant import PrivacyAccountant

__all__ = ["certified_epsilon", "calibrate_scale", "calibrate_laplace_svt", "calibrate_gaussian_svt"]

#: the accountant's RDP route for each conversion rule
RDP_ROUTES = {"improved": "rdp", "classic": "rdp_classic"}


def certified_epsilon(mechanism: Mechanism, delta: float, times: int = 1, rule: str = "improved",
                      method: str | None = None) -> float:
    """Certified eps(delta) of ``times`` adaptive uses of ``mechanism`` (upper bound).

    ``method=None``: the accountant's RDP route with conversion ``rule`` ("improved" or "classic");
    otherwise the named route or ``"auto"`` (:meth:`accountant.PrivacyAccountant.epsilon`).
    ``delta = 0`` asks for the pure-DP epsilon (``inf`` if the mechanism is not pure DP).
    """
    times = V.integer("times", times, low=1)
    if delta == 0:
        if mechanism.infinite_loss_mass > 0:
            return math.inf
        return times * mechanism.pure_epsilon
    delta = V.delta(delta)
    if method is None:
        if rule not in RDP_ROUTES:
            raise ValueError(f"rule must be one of {tuple(RDP_ROUTES)}, got {rule!r}")
        method = RDP_ROUTES[rule]
    relation = "add_remove" if "add_remove" in mechanism.relations else mechanism.relations[0]
    return PrivacyAccountant(relation=relation).compose(mechanism, times).epsilon(delta, method=method)


def calibrate_scale(make: Callable[[float], Mechanism], epsilon: float, delta: float = 0.0, *,
                    times: int = 1, rule: str = "improved", rtol: float = 1e-8,
                    start: float = 1.0, method: str | None = None) -> Mechanism:
    """Smallest scale s (to relative ``rtol``) with certified eps(``make(s)``, delta) <= ``epsilon``.

    ``make`` maps a scale > 0 to a mechanism whose privacy improves with the scale.  Returns the
    mechanism at the upper end of the final bracket (certified <= target).  ``ValueError`` if no scale
    up to 1e300 meets the target (e.g. a target below an additive delta-floor).  ``rule`` / ``method``
    choose the certified epsilon (:func:`certified_epsilon`).
    """
    epsilon = V.real("epsilon (target)", epsilon, low=0.0, low_open=True)
    if delta != 0:
        delta = V.delta(delta)
    rtol = V.real("rtol", rtol, low=1e-14, high=0.1)

    def ok(s: float) -> bool:
        return certified_epsilon(make(s), delta, times, rule, method) <= epsilon

    hi = V.positive("start", start)
    while not ok(hi):
        hi *= 4.0
        if hi > 1e300:
            raise ValueError(f"no noise scale meets epsilon <= {epsilon} at delta = {delta}")
    lo = hi / 4.0
    while ok(lo):
        hi = lo
        lo /= 4.0
        if lo < 1e-300:
            return make(hi)
    _, hi = bisect_log(ok, lo, hi, rtol)
    return make(hi)


def calibrate_laplace_svt(epsilon: float, delta: float = 0.0, *, sensitivity: float = 1.0, cutoff: int = 1,
                          resample: bool = False, max_length: int | None = None, scale_ratio: float = 2.0,
                          times: int = 1, rule: str = "improved", rtol: float = 1e-8,
                          method: str | None = None) -> LaplaceSVT:
    """Laplace SVT with threshold scale b1 as small as possible and query scale b2 = ``scale_ratio`` b1.

    eps1 = Delta / b1, eps2 = 2 Delta / b2 (Alg. 10).  ``delta = 0`` calibrates the pure guarantee
    (eps1 + c eps2, or c (eps1 + eps2) with resampling); otherwise the certified epsilon at ``delta`` of
    :func:`certified_epsilon` (``rule`` / ``method``).
    ``rtol``: relative width of the final bisection bracket (the result is always on the safe side).
    """
    ratio = V.positive("scale_ratio", scale_ratio)
    sens = V.positive("sensitivity", sensitivity)

    def make(b1: float) -> LaplaceSVT:
        return LaplaceSVT(sens / b1, 2.0 * sens / (ratio * b1), sens, cutoff, resample, max_length)

    return calibrate_scale(make, epsilon, delta, times=times, rule=rule, rtol=rtol,  # type: ignore[return-value]
                           method=method)


def calibrate_gaussian_svt(epsilon: float, delta: float, *, sensitivity: float = 1.0, cutoff: int = 1,
                           resample: bool = False, max_length: int | None = None, nonnegative: bool = False,
                           threshold: float | None = None, sigma_ratio: float = 2.0, times: int = 1,
                           rule: str = "improved", rtol: float = 1e-8,
                           method: str | None = None) -> GaussianSVT:
    """Gaussian SVT with sigma1 as small as possible and sigma2 = ``sigma_ratio`` sigma1 (delta > 0).

    Bisection on log(sigma1) to relative ``rtol``; the returned sigma1 certifies eps <= target.
    """
    ratio = V.positive("sigma_ratio", sigma_ratio)
    delta = V.delta(delta)
    sens = V.positive("sensitivity", sensitivity)

    def make(s1: float) -> GaussianSVT:
        return GaussianSVT(s1, ratio * s1, sens, cutoff, resample, max_length, nonnegative, threshold)

    return calibrate_scale(make, epsilon, delta, times=times, rule=rule, rtol=rtol,  # type: ignore[return-value]
                           method=method)
