"""What the Gaussian-family pairs with a density share (:class:`~mechanisms.gaussian_pair.GaussianPair`,
:class:`~mechanisms.mixture.GaussianMixture`): their privacy loss L = log(p/q) is absolutely continuous,
except for the trivial pair P = Q, whose loss is the single atom L = 0 of mass 1 (exact)."""

from __future__ import annotations

import math

import numpy as np

from .base import Mechanism, check_direction


class ContinuousUnlessTrivial(Mechanism):
    """Atoms and envelope of a pair whose loss has a density unless P = Q; subclasses define ``_trivial``
    (P = Q) and ``_density_envelope_fn(c, direction)`` (the envelope of the density part)."""

    _trivial: bool

    def _density_envelope_fn(self, c: float, direction: str):  # pragma: no cover - abstract
        raise NotImplementedError

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        """``t -> -inf`` for the trivial pair (no continuous part), else ``_density_envelope_fn``."""
        check_direction(direction)
        if self._trivial:
            return lambda t: -math.inf
        return self._density_envelope_fn(c, direction)

    def pld_atoms(self, direction: str = "remove"):
        """No atoms, or the single atom (0, 1) for the trivial pair (exact)."""
        check_direction(direction)
        if self._trivial:
            return np.array([0.0]), np.array([1.0])
        return np.empty(0), np.empty(0)
