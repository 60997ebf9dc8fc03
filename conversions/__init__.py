"""Conversions from symbolic privacy curves to certified (epsilon, delta).

* :mod:`conversions.rdp_to_dp` -- RDP curve -> (eps, delta), classic and improved rules, continuous alpha.
* :mod:`conversions.contour` -- summed log-MGF / characteristic function -> delta(eps) and eps(delta)
  with rigorous two-sided error bounds (shifted-line inversion, exact atoms).
* :mod:`conversions.gaussian_dp` -- exact Gaussian / mu-GDP privacy profile.
* :mod:`conversions.atoms` -- exact composition of lattice privacy-loss distributions.
"""

from .contour import ComposedPLD, DeltaBounds, EpsilonBounds, delta_bounds, epsilon_bounds
from .gaussian_dp import gaussian_delta, gaussian_epsilon, gaussian_log_delta
from .rdp_to_dp import RDPConversion, default_orders, delta_from_rdp, eps_from_rdp

__all__ = [
    "ComposedPLD", "DeltaBounds", "EpsilonBounds", "delta_bounds", "epsilon_bounds",
    "gaussian_delta", "gaussian_epsilon", "gaussian_log_delta",
    "RDPConversion", "default_orders", "delta_from_rdp", "eps_from_rdp",
]
