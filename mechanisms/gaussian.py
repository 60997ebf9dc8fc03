"""Gaussian mechanism M(D) = f(D) + N(0, sigma^2 I), L2 sensitivity Delta.

Dominating pair (exact, tight): P = N(Delta, sigma^2), Q = N(0, sigma^2); with mu = Delta / sigma the
privacy loss is L ~ N(mu^2/2, mu^2) under P (symmetric: the add pair gives the same law).

* RDP (Mironov 2017, Table II): eps(alpha) = alpha mu^2 / 2 for every real alpha > 0. Exact.
* log MGF of the privacy loss N(mu^2/2, mu^2) (Dong, Roth & Su 2022; Zhu, Dong & Wang 2022): log M(s) = s (s
  + 1) mu^2 / 2, entire. Exact.
* Privacy profile (Balle & Wang 2018): delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
  i.e. the mechanism is mu-GDP; k-fold composition is sqrt(k) mu-GDP. Exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import validation as V
from ._numerics import ceil_fraction, mul_up_array
from .base import Mechanism, as_complex_array, check_direction
from .registry import register

MAX_MU = 1e100  # largest sensitivity / sigma with finite float RDP, log-MGF and composed mu


def gaussian_rdp_upper(alpha, sensitivity: float, sigma: float, k: int = 1) -> np.ndarray:
    """alpha k Delta^2 / (2 sigma^2), the RDP of k uses of the Gaussian mechanism, rounded up: the slope
    k Delta^2 / (2 sigma^2) is the smallest float >= its exact value and its product with alpha is rounded
    up (:func:`mechanisms._numerics.mul_up_array`); exact where the float product is.  (The float
    mu = Delta / sigma squared, ``alpha * mu**2 / 2``, could be 1.75 ulps short: GNMax, the Gaussian caps of
    the amplified curves.)"""
    h = ceil_fraction(k * Fraction(sensitivity) ** 2 / (2 * Fraction(sigma) ** 2))
    return mul_up_array(np.asarray(alpha, dtype=float), h)


@register
@dataclass(frozen=True)
class Gaussian(Mechanism):
    """Gaussian noise of standard deviation ``sigma`` on a query of L2 sensitivity ``sensitivity``.

    Parameters
    ----------
    sigma : float
        Noise standard deviation, > 0 (same units as the query).
    sensitivity : float, default 1.0
        L2 sensitivity of the query under the accountant's neighbouring relation, > 0.

    Examples
    --------
    >>> Gaussian(sigma=2.0).rdp([2.0, 10.0])
    array([0.25, 1.25])
    """

    sigma: float
    sensitivity: float = 1.0

    name = "gaussian"
    pld_available = True
    poisson_tight = True
    field_checks = {"sigma": V.positive, "sensitivity": V.positive}

    def __post_init__(self):
        super().__post_init__()
        if not self.sensitivity / self.sigma <= MAX_MU:
            # mu^2 (the RDP slope, the ledger's composed mu) overflows beyond this
            raise ValueError(f"sigma / sensitivity must be >= {1 / MAX_MU:g} (mu = sensitivity / sigma <= "
                             f"{MAX_MU:g}), got sigma={self.sigma!r}, sensitivity={self.sensitivity!r}")

    @property
    def mu(self) -> float:
        """Gaussian-DP parameter mu = sensitivity / sigma."""
        return self.sensitivity / self.sigma

    @property
    def gdp_mu(self) -> float:
        """The mechanism is exactly mu-GDP with mu = sensitivity / sigma (the closed-form route's hook)."""
        return self.mu

    def rdp(self, alpha) -> np.ndarray:
        """alpha Delta^2 / (2 sigma^2), rounded up (:func:`gaussian_rdp_upper`)."""
        return gaussian_rdp_upper(V.alphas(alpha), self.sensitivity, self.sigma)

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        return s * (s + 1.0) * (self.mu**2 / 2.0)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        check_direction(direction)
        return c * (c + 1.0) * (self.mu**2 / 2.0)

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        """Cells of L ~ N(mu^2/2, mu^2) under P (normal CDF differences on the accurate side; exact
        up to floating point, per-cell error bounds)."""
        check_direction(direction)
        from ._cells import gaussian_loss_cells

        return gaussian_loss_cells(edges, self.mu)

    def pld_cell_offsets(self, edges: np.ndarray, direction: str = "remove"):
        """Bounds on E[L - e_{i-1} | cell i] / Delta_i (L linear in a standard normal:
        ``mechanisms._cell_offsets.gaussian_loss_offsets``)."""
        check_direction(direction)
        from ._cell_offsets import gaussian_loss_offsets

        return gaussian_loss_offsets(edges, self.mu)

    def total_variation(self, direction: str = "remove") -> float:
        """TV(N(0, 1), N(mu, 1)) = 2 Phi(mu / 2) - 1 = erf(mu / (2 sqrt 2)) (exact)."""
        check_direction(direction)
        return math.erf(self.mu / (2.0 * math.sqrt(2.0)))

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        # |M(c + it)| = exp((c^2 + c - t^2) mu^2 / 2): exact modulus, decreasing in |t|.
        return (c * c + c - t * t) * self.mu**2 / 2.0
