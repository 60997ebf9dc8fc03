"""Shuffling: a random permutation per epoch, then consecutive batches (what most DP-SGD code does).

One epoch: the n records are permuted uniformly at random and cut into t consecutive batches; step j
releases the sum of batch j's gradients clipped to L2 norm C plus N(0, sigma^2 I).  mu = C / sigma.
The dataset size is fixed, so the neighbouring relations are

* ``ShuffledGaussian``: add/remove read as *zero-out* (the record is replaced by a null record whose
  gradient is 0; Kairouz, McMahan, Song, Thakkar, Thakurta & Xu 2021, "Practical and private (deep)
  learning without sampling or shuffling", ICML; Chua et al. 2024 below).  Under a literal add/remove
  the partition of the other records changes with n, which no analysis here covers;
* ``ShuffledGaussianReplaceOne``: replace-one (substitution).

Upper bound (proved here; it holds for any permutation distribution, also a fixed order).  Couple the
permutations of the two datasets on the differing record's slot.  Given the permutation, the epoch is an
adaptive composition of t Gaussian steps in which only the step holding the slot has different means,
by at most C (zero-out) or 2C (replace-one); such a composition is dominated by one Gaussian pair
N(m, 1) vs N(0, 1), m = mu resp. 2 mu, for every order of the hockey-stick divergence, and a mixture over
the common permutation is dominated by the same pair (joint convexity).  So one epoch is m-GDP, E epochs
(adaptively composed) sqrt(E) m-GDP: the "deterministic batches" bound of Chua, Ghazi, Kamath, Kumar,
Manurangsi, Sinha & Zhang (2024, "How private are DP-SGD implementations?", ICML).  **No amplification by
shuffling is claimed**: no published theorem gives a better certified bound for shuffle-then-partition
with adaptive Gaussian steps.  In particular the random-allocation (balls-in-bins) bounds do not cover
shuffling: there the other records' batches are independent of the record's, here the record's batch
has one other record fewer, which the lower-bound datasets below exploit (tests/test_shuffling.py
exhibits parameters where the shuffling lower bound exceeds the balls-in-bins upper bound).

Lower bound (Chua et al. 2024, Sec. 4: explicit datasets).  All other records have gradient -C.  After
subtracting the public constant b C from every batch sum, the batch holding the differing record is
shifted by g + C (g its gradient) and all others are centred: the epoch releases MoG(m) = (1/t) sum_i
N(m e_i, I) with m = 2 mu (record +C) against m = mu (null record, zero-out) or m = 0 (record -C,
replace-one).  The binned largest release of each epoch (:mod:`mechanisms.max_statistic`) gives the
certified lower bound; epochs are independent (a fresh permutation per epoch).

One ledger use = one epoch (t releases; a partial epoch is charged as a full one for the upper bound and
left out of the lower bound).  The upper bound holds for any permutation scheme (a fresh permutation per
epoch, one permutation reused by every epoch, or a fixed order).  The lower bound composes independent
epochs, i.e. it is for a fresh permutation per epoch ("dynamic" shuffling, Chua et al. 2024, "Scalable
DP-SGD: shuffling vs. Poisson subsampling", NeurIPS, Thm 3.8); for a permutation reused across epochs
("persistent", their Thm 3.5) it is not claimed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import validation as V
from .base import Mechanism, check
from .gaussian import Gaussian
from .max_statistic import MaxStatisticPair
from .registry import register


class _EpochGaussian(Mechanism):
    """Shared part: one epoch accounted as the Gaussian pair with shift ``_shift`` C (upper bound)."""

    sigma: float
    num_steps: int
    sensitivity: float
    _shift = 1.0  # the Gaussian pair's shift in units of C
    _lower_q_shift = 1.0  # the lower-bound pair's MoG(m) for Q, m in units of mu

    symmetric = True
    tight = False  # the Gaussian pair dominates but is not attained (the lower bound is separate)
    pld_available = True

    field_checks = {"sigma": V.positive, "num_steps": check(V.integer, low=1, high=10**9),
                    "sensitivity": V.positive}

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "_pair", Gaussian(self.sigma, self._shift * self.sensitivity))

    @property
    def mu(self) -> float:
        return self.sensitivity / self.sigma

    def attained_lower_pair(self) -> MaxStatisticPair:
        """Chua et al. (2024)'s datasets: MoG(2 mu) vs MoG(mu) (zero-out) or MoG(0) (replace-one), the
        binned largest release per epoch (module docstring; its compositions are lower bounds)."""
        return MaxStatisticPair(mu_p=2.0 * self.mu, mu_q=self._lower_q_shift * self.mu,
                                num_steps=self.num_steps)

    @property
    def gdp_mu(self) -> float:
        return self._pair.gdp_mu  # type: ignore[attr-defined]

    def rdp(self, alpha) -> np.ndarray:
        return self._pair.rdp(alpha)  # type: ignore[attr-defined]

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        return self._pair.log_mgf(s, direction)  # type: ignore[attr-defined]

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        return self._pair.log_mgf_real(c, direction)  # type: ignore[attr-defined]

    def pld_cell_masses(self, edges, direction: str = "remove"):
        return self._pair.pld_cell_masses(edges, direction)  # type: ignore[attr-defined]

    def pld_cell_offsets(self, edges, direction: str = "remove"):
        return self._pair.pld_cell_offsets(edges, direction)  # type: ignore[attr-defined]

    def total_variation(self, direction: str = "remove") -> float:
        return self._pair.total_variation(direction)  # type: ignore[attr-defined]

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self._pair.log_continuous_envelope(c, t, direction)  # type: ignore[attr-defined]


@register
@dataclass(frozen=True)
class ShuffledGaussian(_EpochGaussian):
    """One epoch of shuffled, partitioned DP-SGD (``num_steps`` batches), add/remove read as zero-out.

    Upper bound: mu-GDP per epoch, mu = sensitivity / sigma (module docstring); lower bound:
    ``attained_lower_pair``.

    Parameters
    ----------
    sigma : float
        Noise standard deviation (the noise multiplier when ``sensitivity`` is 1), > 0.
    num_steps : int
        t, the number of batches per epoch, >= 1.
    sensitivity : float, default 1.0
        Clipping norm C, > 0.
    """

    sigma: float
    num_steps: int
    sensitivity: float = 1.0

    name = "shuffled_gaussian"
    relations = ("add_remove",)
    _shift = 1.0
    _lower_q_shift = 1.0


@register
@dataclass(frozen=True)
class ShuffledGaussianReplaceOne(_EpochGaussian):
    """One epoch of shuffled, partitioned DP-SGD, replace-one relation (shift 2C).

    Upper bound: (2 mu)-GDP per epoch; lower bound: MoG(2 mu) vs MoG(0) (``attained_lower_pair``).
    Parameters as :class:`ShuffledGaussian`.
    """

    sigma: float
    num_steps: int
    sensitivity: float = 1.0

    name = "shuffled_gaussian_replace_one"
    relations = ("replace_one",)
    _shift = 2.0
    _lower_q_shift = 0.0
