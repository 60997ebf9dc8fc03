"""Discrete mechanisms: k-ary randomized response, generic pure eps-DP and (eps, delta)-DP blocks.

All three have a lattice privacy-loss distribution (atoms only), so the characteristic-function
accountant composes them *exactly* by enumerating the atoms (this reproduces the optimal composition
theorem of Kairouz, Oh & Viswanath 2015 for the (eps, delta) block).

k-ary randomized response with parameter eps reports the true value with probability e^eps / Z and
each other value with probability 1 / Z, Z = e^eps + k - 1.  For inputs x != x' the privacy loss
under P = M(x) is +eps (mass e^eps / Z), -eps (mass 1 / Z) and 0 (mass (k - 2) / Z).  The pair is
symmetric and tight; RDP(alpha) = log M(alpha - 1) / (alpha - 1) exactly (Mironov 2017,
Table II, for k = 2).

A generic eps-DP mechanism is dominated by binary randomized response with the same eps (Kairouz et
al. 2015), which is what ``PureDP`` accounts.  A generic (eps, delta)-DP mechanism is dominated by the
four-point pair of Kairouz, Oh & Viswanath (2015): infinite loss with mass delta, and (1 - delta) times binary
randomized response otherwise; ``ApproxDP`` accounts that pair (its ``rdp`` is the conditional curve,
see ``mechanisms.base``).
"""

from __future__ import annotations

from dataclasses import dataclass

from . import validation as V
from .base import check
from .lattice import (
    AtomicMechanism,
    DiscreteMechanism,
    FourPointPair,
    rr_atoms,
    rr_mass_rel_err,
    rr_power_atoms,
)
from .registry import register

# Deprecated aliases of the lattice bases under their old private names (for plug-ins and branches
# written before :mod:`mechanisms.lattice`); new code imports the public names from there.
_AtomicPLD = AtomicMechanism
_DiscreteMechanism = DiscreteMechanism
_rr_atoms = rr_atoms
__all__ = ["RandomizedResponse", "PureDP", "ApproxDP", "rr_power_atoms"]


@register
@dataclass(frozen=True)
class RandomizedResponse(DiscreteMechanism):
    """k-ary randomized response (``k`` >= 2 categories) with privacy parameter ``epsilon`` >= 0."""

    epsilon: float
    k: int = 2

    name = "randomized_response"
    field_checks = {"epsilon": V.nonnegative, "k": check(V.integer, low=2)}

    @property
    def pure_epsilon(self) -> float:
        return self.epsilon

    def _atoms(self):
        return rr_atoms(self.epsilon, self.k)

    def _atom_mass_rel_err(self) -> float:
        return rr_mass_rel_err(self.epsilon, self.k)

    def _rr_k(self) -> int | None:
        return self.k


@register
@dataclass(frozen=True)
class PureDP(DiscreteMechanism):
    """Any ``epsilon``-DP mechanism, accounted by its worst case (binary randomized response)."""

    epsilon: float

    name = "pure_dp"
    field_checks = {"epsilon": V.nonnegative}

    @property
    def pure_epsilon(self) -> float:
        return self.epsilon

    def _atoms(self):
        return rr_atoms(self.epsilon, 2)

    def _atom_mass_rel_err(self) -> float:
        return rr_mass_rel_err(self.epsilon, 2)

    def _rr_k(self) -> int | None:
        return 2


@register
@dataclass(frozen=True)
class ApproxDP(FourPointPair):
    """Any (``epsilon``, ``delta``)-DP mechanism, accounted by the four-point dominating pair.

    ``delta`` must lie in [0, 1); it is the infinite-loss mass of the pair.
    """

    epsilon: float
    delta: float

    name = "approx_dp"
    field_checks = {"epsilon": V.nonnegative, "delta": V.half_open_unit}

    @property
    def pure_epsilon(self) -> float:
        # alpha -> inf end of the *conditional* curve (the failure mass is infinite_loss_mass)
        return self.epsilon

    @property
    def infinite_loss_mass(self) -> float:
        return self.delta

