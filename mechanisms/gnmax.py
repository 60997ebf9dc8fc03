"""Gaussian noisy argmax (GNMax) and its Poisson-subsampled form: data-independent plug-ins.

GNMax (Papernot et al. 2018; used by Zhu, Yu & Wang 2020 for Private-kNN) releases argmax_j (n_j + N(0,
sigma^2)) for a vote histogram n whose L2 sensitivity is Delta (Delta = sqrt(2) when one neighbour is
swapped for another of a different class: two counts move by one each; Delta = 1 when a vote is only added).

* RDP (upper bound, both directions, both relations as long as Delta bounds the L2 change):
      eps(alpha) = alpha Delta^2 / (2 sigma^2),
  the Gaussian mechanism's curve; argmax is post-processing, so the bound is generally not attained
  (``tight = False``).  The Gaussian pair N(Delta, sigma^2) vs N(0, sigma^2) dominates GNMax, so every
  route of the Gaussian mechanism applies (as a pessimistic representation): ``GNMax`` delegates its
  curves to ``Gaussian`` and reports ``gdp_mu`` (the exact mu-GDP route; an upper bound only).
* Poisson-subsampled GNMax (rate gamma, add/remove): the pairs of the Poisson-subsampled Gaussian
  dominate it, so ``SubsampledGNMax`` delegates to ``SubsampledGaussian`` (tight binomial RDP at integer
  alpha -- Zhu & Wang 2019; Zhu 2023 thesis, Thms 2.3.2/2.3.4 with Prop. 2.3.6; = Mironov, Talwar & Zhang 2019
  (docs/derivations/subsampling.md) --
  with CGF interpolation, and its characteristic-function and discretised-PLD routes).  Upper bounds.
  :func:`subsampled_gaussian_rdp` (the general binomial transform) is kept for other callers.

The data-dependent GNMax analysis (smooth sensitivity / PTR) is out of scope here (see
:mod:`accountant.adaptive.pate_ptr`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._numerics import log_expm1
from ._screening_kernels import subsampled_cgf_int
from .base import Delegating
from .gaussian import Gaussian
from .registry import register
from .subsampled import SubsampledGaussian

__all__ = ["GNMax", "SubsampledGNMax", "subsampled_gaussian_rdp", "poisson_subsampled_rdp"]

SQRT2 = math.sqrt(2.0)
# above this order the binomial sum (cost ~ alpha) is replaced by the (valid) unsubsampled curve
BINOMIAL_ORDER_LIMIT = 20000


MAX_MU = 1e100  # GNMax: largest sensitivity / sigma with finite float RDP and log-MGF values


def poisson_subsampled_rdp(alpha, base_rdp: Callable[[np.ndarray], np.ndarray], sample_rate: float,
                           method: str = "tight") -> np.ndarray:
    """Binomial Poisson-subsampling bound for a base RDP curve (docs/derivations/subsampling.md).

    Parameters
    ----------
    alpha : array_like
        Orders > 1 (``inf`` and orders above ``BINOMIAL_ORDER_LIMIT`` get the base curve, which is a
        valid upper bound because subsampling never increases the divergence).
    base_rdp : callable
        Base mechanism's RDP curve (vectorised).
    sample_rate : float
        Poisson rate gamma in [0, 1].
    method : {"tight", "general"}
        ``"tight"`` (thesis Thm 2.3.2/2.3.4): exact for mechanisms satisfying condition (2.2), e.g. the
        Gaussian (Prop. 2.3.6); **not** a proven bound for other mechanisms.  ``"general"`` (Thm 2.3.1):
        valid for every mechanism.

    Returns
    -------
    ndarray
        min(binomial bound with CGF interpolation, base curve), same shape as ``alpha``.
    """
    if method not in ("tight", "general"):
        raise ValueError(f"method must be 'tight' or 'general', got {method!r}")
    gamma = V.probability("sample_rate", sample_rate)
    a = V.alphas(alpha)
    flat = a.ravel()
    out = np.empty(flat.shape)
    base_all = np.asarray(base_rdp(flat), dtype=float)
    if gamma == 0.0:
        return np.zeros(a.shape)
    fin = np.isfinite(flat) & (flat <= BINOMIAL_ORDER_LIMIT)
    out[~fin] = base_all[~fin]
    if fin.any():
        af = flat[fin]
        lo = np.maximum(np.floor(af).astype(np.int64), 1)
        hi = np.maximum(np.ceil(af).astype(np.int64), 2)
        need = np.unique(np.concatenate([lo[lo >= 2], hi]))
        amax = int(need.max())
        ints = np.arange(2, amax + 1, dtype=float)
        eps_int = np.asarray(base_rdp(ints), dtype=float)
        log_em1 = np.full(amax + 1, -math.inf)
        log_em1[2:] = log_expm1((ints - 1.0) * eps_int)
        kv = subsampled_cgf_int(need.astype(np.int64), gamma, log_em1, method == "general")
        cgf = dict(zip(need.tolist(), kv.tolist(), strict=True))
        cgf[1] = 0.0
        klo = np.array([cgf[int(x)] for x in lo])
        khi = np.array([cgf[int(x)] for x in hi])
        w = np.where(hi == lo, 1.0, (af - lo) / np.maximum(hi - lo, 1))
        k_int = (1.0 - w) * klo + w * khi
        out[fin] = np.minimum(k_int / (af - 1.0), base_all[fin])
    return out.reshape(a.shape)


def subsampled_gaussian_rdp(alpha, sigma: float, sample_rate: float, sensitivity: float = 1.0) -> np.ndarray:
    """RDP of the Poisson-subsampled Gaussian mechanism (add/remove), upper bound on both directions.

    Tight binomial form at integer orders (exact there for the remove direction, thesis Thm 2.3.4 +
    Prop. 2.3.6), linear CGF interpolation in between, capped by alpha Delta^2 / (2 sigma^2).
    """
    sigma = V.positive("sigma", sigma)
    sensitivity = V.positive("sensitivity", sensitivity)
    c = sensitivity**2 / (2.0 * sigma**2)
    return poisson_subsampled_rdp(alpha, lambda x: np.asarray(x, dtype=float) * c, sample_rate, "tight")


@register
@dataclass(frozen=True)
class GNMax(Delegating):
    """Gaussian noisy argmax of a vote histogram: argmax_j (n_j + N(0, sigma^2)).

    Parameters
    ----------
    sigma : float
        Noise standard deviation per class, > 0 (vote units).
    sensitivity : float, default sqrt(2)
        L2 sensitivity of the histogram (sqrt(2) for a neighbour swap).

    Notes
    -----
    Accounted by the Gaussian pair N(Delta, sigma^2) vs N(0, sigma^2), which dominates GNMax (argmax is
    post-processing of the noisy histogram): RDP alpha Delta^2 / (2 sigma^2) (Mironov 2017), the exact
    mu-GDP route (``gdp_mu`` = Delta / sigma), the characteristic-function and discretised-PLD routes.
    All upper bounds for the argmax (``tight = False``: the pair is pessimistic for argmax).
    """

    sigma: float
    sensitivity: float = SQRT2

    name = "gnmax"
    tight = False
    field_checks = Gaussian.field_checks

    def __post_init__(self):
        super().__post_init__()
        # the Gaussian pair adds the check mu <= MAX_MU, with its own message
        object.__setattr__(self, "_pair", Gaussian(self.sigma, self.sensitivity))

    @property
    def mu(self) -> float:
        return self._pair.mu  # type: ignore[attr-defined]

    def dominating(self) -> Gaussian:
        """The Gaussian pair N(sensitivity, sigma^2) vs N(0, sigma^2) (dominates the argmax)."""
        return self._pair  # type: ignore[attr-defined]


@register
@dataclass(frozen=True)
class SubsampledGNMax(Delegating):
    """GNMax on a Poisson subsample with rate ``sample_rate`` (add/remove neighbours).

    Accounted by the Poisson-subsampled Gaussian's pairs (``SubsampledGaussian``: its tight RDP, the
    characteristic-function and discretised-PLD routes), which dominate the subsampled argmax; upper
    bounds (``tight = False``).
    """

    sigma: float
    sample_rate: float
    sensitivity: float = SQRT2

    name = "subsampled_gnmax"
    tight = False
    relations = ("add_remove",)
    field_checks = SubsampledGaussian.field_checks

    def dominating(self) -> SubsampledGaussian:
        """The Poisson-subsampled Gaussian's pairs (dominate the subsampled argmax)."""
        return SubsampledGaussian(self.sigma, self.sample_rate, self.sensitivity)
