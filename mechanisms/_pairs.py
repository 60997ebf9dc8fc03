"""What the Gaussian-family pairs with a density share (:class:`~mechanisms.gaussian_pair.GaussianPair`,
:class:`~mechanisms.mixture.GaussianMixture`): their privacy loss L = log(p/q) is absolutely continuous,
except for the trivial pair P = Q, whose loss is the single atom L = 0 of mass 1 (exact)."""

from __future__ import annotations

import numpy as np

from .base import Mechanism, check_direction


class ContinuousUnlessTrivial(Mechanism):
    """Atoms of a pair whose loss has a density unless P = Q; subclasses define ``_trivial`` (P = Q)."""

    _trivial: bool

    def pld_atoms(self, direction: str = "remove"):
        """No atoms, or the single atom (0, 1) for the trivial pair (exact)."""
        check_direction(direction)
        if self._trivial:
            return np.array([0.0]), np.array([1.0])
        return np.empty(0), np.empty(0)
