"""Conversions from symbolic privacy curves to certified (epsilon, delta).

* :mod:`conversions.rdp_to_dp` -- RDP curve -> (eps, delta), classic and improved rules, continuous alpha.
* :mod:`conversions.contour` -- summed log-MGF / characteristic function -> delta(eps) and eps(delta)
  with rigorous two-sided error bounds (shifted-line inversion, exact atoms).
* :mod:`conversions.gaussian_dp` -- exact Gaussian / mu-GDP privacy profile.
* :mod:`conversions.atoms` -- exact composition of lattice privacy-loss distributions.

The names below are loaded on first use (PEP 562), so importing the package itself is cheap.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "ComposedPLD": ".contour", "DeltaBounds": ".contour", "EpsilonBounds": ".contour",
    "delta_bounds": ".contour", "epsilon_bounds": ".contour",
    "gaussian_delta": ".gaussian_dp", "gaussian_epsilon": ".gaussian_dp",
    "gaussian_log_delta": ".gaussian_dp",
    "RDPConversion": ".rdp_to_dp", "default_orders": ".rdp_to_dp", "delta_from_rdp": ".rdp_to_dp",
    "eps_from_rdp": ".rdp_to_dp",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'conversions' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value
