"""Zero-concentrated DP blocks: a user's rho budget as a ledger entry.

ZCDP(rho, xi=0, delta=0)
    A mechanism that is (xi, rho)-zCDP (Bun & Steinke 2016, Def. 1.1; Dwork & Rothblum 2016):
    for every pair of neighbours and both orders of the pair,

        D_alpha(M(D) || M(D')) <= xi + rho alpha     for every real alpha > 1.

    With ``delta > 0`` it is delta-approximately (xi, rho)-zCDP (Bun & Steinke 2016, section 8): there are
    events of probability >= 1 - delta under each output distribution on which the conditional
    distributions satisfy the bound.  The curve is then the conditional one and ``delta`` the
    ``infinite_loss_mass``: for any set S, P(S) - e^eps Q(S) <= delta + (1 - delta) delta_rdp(eps) (proved
    by splitting P and Q on the events; it is the accountant's rule for (eps, delta) blocks), and
    approximate zCDP composes adaptively with the deltas combined as 1 - prod (1 - delta_j) (the joint
    event has probability >= prod (1 - delta_j) whatever the earlier outputs; Bun & Steinke 2016, section 8).

    Conversion to (eps, delta) is the accountant's RDP route, optimised over continuous alpha with the
    rule of Canonne, Kamath & Steinke 2020 (Prop. 12 / Cor. 13; = Balle et al. 2020, Thm 21):
    delta = min_alpha exp((alpha - 1)(xi + alpha rho - eps)) / alpha (1 - 1/alpha)^(alpha - 1).  It beats
    the classic eps = rho + 2 sqrt(rho log(1/delta)) (Bun & Steinke 2016, Prop. 1.3) everywhere.

    RDP only (a zCDP guarantee has no single dominating pair), an upper bound (``tight = False``); it
    composes with every other ledger entry through the RDP curves.

Helpers: :func:`zcdp_of_gaussian` (the Gaussian mechanism is (Delta^2 / (2 sigma^2))-zCDP, exact) and
:func:`zcdp_of_pure_dp` (eps-DP implies (eps^2 / 2)-zCDP, Bun & Steinke 2016, Prop. 1.4).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from .base import Mechanism, check
from .registry import register

__all__ = ["ZCDP", "zcdp_of_gaussian", "zcdp_of_pure_dp", "zcdp_epsilon_classic"]

U = 2.0 ** -53


@register
@dataclass(frozen=True)
class ZCDP(Mechanism):
    """A (``xi``, ``rho``)-zCDP block, optionally ``delta``-approximate (RDP xi + rho alpha).

    Parameters
    ----------
    rho : float
        rho >= 0 (the slope of the RDP curve).
    xi : float, default 0
        xi >= 0 (the offset; 0 for plain rho-zCDP).
    delta : float, default 0
        Failure probability of delta-approximate zCDP, in [0, 1).

    Examples
    --------
    >>> ZCDP(rho=0.5).rdp([2.0, 10.0])
    array([1., 5.])
    """

    rho: float
    xi: float = 0.0
    delta: float = 0.0

    name = "zcdp"
    tight = False
    field_checks = {"rho": check(V.real, low=0.0, high=1e150), "xi": check(V.real, low=0.0, high=1e150),
                    "delta": V.half_open_unit}

    def rdp(self, alpha) -> np.ndarray:
        """xi + rho alpha (the conditional curve when ``delta`` > 0), rounded up; +inf at alpha = inf
        unless rho = 0 (then xi: pure xi-DP)."""
        a = V.alphas(alpha)
        with np.errstate(invalid="ignore"):
            v = self.xi + self.rho * a
        v = np.where(np.isinf(a), math.inf if self.rho > 0 else self.xi, v)
        v = v * (1.0 + 2 * U)  # (the product and the sum: <= 2 ulps; this product rounds too: one step up)
        return np.where(v > 0.0, np.nextafter(v, np.inf), v)

    @property
    def pure_epsilon(self) -> float:
        return self.xi if self.rho == 0.0 else math.inf

    @property
    def infinite_loss_mass(self) -> float:
        return self.delta


def zcdp_of_gaussian(sigma: float, sensitivity: float = 1.0) -> ZCDP:
    """The Gaussian mechanism's zCDP block, rho = Delta^2 / (2 sigma^2) (Bun & Steinke 2016, Prop. 1.6;
    exact: its RDP curve is alpha rho).  Prefer ``Gaussian`` itself in a ledger (exact mu-GDP route)."""
    sigma = V.positive("sigma", sigma)
    sensitivity = V.positive("sensitivity", sensitivity)
    return ZCDP(rho=sensitivity**2 / (2.0 * sigma**2) * (1.0 + 4 * U))


def zcdp_of_pure_dp(epsilon: float) -> ZCDP:
    """eps-DP implies (eps^2 / 2)-zCDP (Bun & Steinke 2016, Prop. 1.4); ``PureDP`` is tighter in a ledger
    (its exact randomized-response curve), this is for stating a rho budget."""
    epsilon = V.real("epsilon", epsilon, low=0.0)
    return ZCDP(rho=epsilon**2 / 2.0 * (1.0 + 4 * U))


def zcdp_epsilon_classic(rho: float, delta: float) -> float:
    """eps = rho + 2 sqrt(rho log(1/delta)) (Bun & Steinke 2016, Prop. 1.3); an upper bound, looser than
    the accountant's conversion (kept for comparison and for users checking published numbers)."""
    rho = V.real("rho", rho, low=0.0)
    delta = V.delta(delta)
    return (rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))) * (1.0 + 8 * U)
