"""Renyi-DP curve -> (epsilon, delta), optimised over continuous alpha: the public face of the RDP route.

Rules (both valid upper bounds for every alpha > 1; a non-optimal alpha only costs tightness):

* ``classic`` (Mironov 2017, "Renyi differential privacy", Prop. 3):
      eps(delta) = min_alpha  eps(alpha) + log(1/delta) / (alpha - 1)
* ``improved`` (Balle, Barthe, Gaboardi, Hsu & Sato 2020, "Hypothesis testing interpretations and
  Renyi differential privacy", Thm 21; Canonne, Kamath & Steinke 2020):
      eps(delta) = min_alpha  eps(alpha) + log((alpha - 1)/alpha) - (log delta + log alpha)/(alpha - 1)

The implementation lives at the bottom of the floor order, :mod:`mechanisms._rdp_conversion`, because
a plug-in's own analysis uses it too (the stage-wise SVT certifies each stage by converting the stage's
RDP curve); this module is where the conversions and the accountant take it from.
"""

from __future__ import annotations

from mechanisms._rdp_conversion import (
    RULES,
    SAFETY_REL,
    RDPConversion,
    default_orders,
    delta_from_rdp,
    eps_at_orders,
    eps_from_rdp,
)

__all__ = ["RULES", "SAFETY_REL", "RDPConversion", "default_orders", "delta_from_rdp", "eps_at_orders",
           "eps_from_rdp"]
