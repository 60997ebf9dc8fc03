"""Discrete mechanisms: k-ary randomized response, generic pure eps-DP and (eps, delta)-DP blocks.

All three have a lattice privacy-loss distribution (atoms only), so the characteristic-function
accountant composes them *exactly* by enumerating the atoms (this reproduces the optimal composition
theorem of Kairouz, Oh & Viswanath 2015 for the (eps, delta) block).

k-ary randomized response with parameter eps reports the true value with probability e^eps / Z and
each other value with probability 1 / Z, Z = e^eps + k - 1.  For inputs x != x' the privacy loss
under P = M(x) is +eps (mass e^eps / Z), -eps (mass 1 / Z) and 0 (mass (k - 2) / Z).  The pair is
symmetric and tight; RDP(alpha) = log M(alpha - 1) / (alpha - 1) exactly (spec 01 R3 for k = 2).

A generic eps-DP mechanism is dominated by binary randomized response with the same eps (Kairouz et
al. 2015), which is what ``PureDP`` accounts.  A generic (eps, delta)-DP mechanism is dominated by the
four-point pair of spec 02 section 2.8: infinite loss with mass delta, and (1 - delta) times binary
randomized response otherwise; ``ApproxDP`` accounts that pair (its ``rdp`` is the conditional curve,
see ``mechanisms.base``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._numerics import discrete_log_mgf, log_binomial_coefficients
from .base import Mechanism, UnsupportedRoute, check_direction
from .registry import register


def _rr_atoms(eps: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    # masses from a numerically safe normalisation (eps may be large)
    logz = eps + math.log1p((k - 1) * math.exp(-eps))
    losses = [eps, -eps]
    logw = [eps - logz, -logz]
    if k > 2:
        losses.append(0.0)
        logw.append(math.log(k - 2) - logz)
    if eps == 0.0:  # all losses are 0: a single atom of mass 1
        return np.array([0.0]), np.array([1.0])
    return np.array(losses), np.exp(np.array(logw))


def rr_power_atoms(eps: float, m: int, log_scale: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Atoms of the privacy loss of m-fold binary randomized response RR(eps), masses times e^log_scale.

    Losses (m - 2j) eps with binomial masses C(m, j) p^{m-j} q^j, p = e^eps / (1 + e^eps), q = 1 - p
    (exact; log space).  eps = 0 gives the single atom 0.
    """
    if eps == 0.0:
        return np.array([0.0]), np.array([math.exp(log_scale)])
    ji = np.arange(m + 1)
    j = ji.astype(float)
    log_c = log_binomial_coefficients(m, ji)[0]  # (a few ulps of m log 2; see _AtomicPLD.log_mgf_error)
    log_p = -math.log1p(math.exp(-eps))
    log_q = -eps + log_p
    return (m - 2.0 * j) * eps, np.exp(log_scale + log_c + (m - j) * log_p + j * log_q)


class _AtomicPLD(Mechanism):
    """PLD methods of a mechanism whose privacy loss (both directions) is the finite set ``_atoms()``."""

    def _atoms(self) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - abstract
        raise UnsupportedRoute(f"{type(self).__name__} must define its atoms")

    def _rr_power(self) -> tuple[float, int, float] | None:
        """(eps, m, log_scale) when the atoms are e^{log_scale} RR(eps)^m (closed-form MGF), else None."""
        return None

    @property
    def log_mgf_error(self) -> float:
        """For an RR(eps)^m power: the floating-point error of m log M_RR(s) and of the m + 1 binomial
        atoms (log C(m, j) to ~10 ulps of m log 2, m-fold products of log-masses of size <= 1 + eps):
        32 ulps of m (1 + eps) + |log_scale|; 0 for the plain closed forms."""
        pw = self._rr_power()
        if pw is None or pw[1] <= 1:
            return 0.0
        eps, m, log_scale = pw
        return 32.0 * 2.0 ** -53 * (m * (1.0 + eps) + abs(log_scale))

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        pw = self._rr_power()
        if pw is not None and pw[0] > 0.0:
            # e^{log_scale} (p e^{s eps} + q e^{-s eps})^m: O(1) per node whatever m (enumerating the
            # m + 1 atoms at every contour node cost O(m) time and memory: 366 GiB for m = 1e6)
            eps, m, log_scale = pw
            l, w = _rr_atoms(eps, 2)
            s_arr = np.asarray(s, dtype=complex)
            one = np.asarray(discrete_log_mgf(s_arr, l, w), dtype=complex)
            return log_scale + m * one.real + 1j * (m * one.imag)
        l, w = self._atoms()
        return discrete_log_mgf(s, l, w)

    def pld_atoms(self, direction: str = "remove") -> tuple[np.ndarray, np.ndarray]:
        check_direction(direction)
        return self._atoms()

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return -math.inf

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        """Histogram of the atoms (exact up to the rounding of summed masses; see ``Mechanism``)."""
        check_direction(direction)
        from ._cells import atoms_cell_masses

        return atoms_cell_masses(edges, *self._atoms())


class _DiscreteMechanism(_AtomicPLD):
    """Shared implementation for mechanisms whose PLD is a finite set of atoms (RDP from the atoms)."""

    pld_available = True

    def _conditional_atoms(self) -> tuple[np.ndarray, np.ndarray]:
        l, w = self._atoms()
        return l, w / w.sum()

    def _rr_k(self) -> int | None:
        """k when the conditional atoms are those of k-ary randomized response (closed-form RDP)."""
        return None

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        k = self._rr_k()
        if k is not None:
            # closed form, accurate as alpha -> 1 and for tiny eps, rounded up (svt._kernels.rr_k_rdp_scalar)
            from .svt._kernels import rr_k_curve

            flat = np.ascontiguousarray(al.ravel(), dtype=float)
            return rr_k_curve(flat, float(self.epsilon), int(k)).reshape(al.shape)
        l, w = self._conditional_atoms()
        out = np.full(al.shape, self.pure_epsilon)
        fin = np.isfinite(al)
        s = al[fin] - 1.0
        val = np.real(discrete_log_mgf(s.astype(complex), l, w)) / s
        out[fin] = np.clip(val, 0.0, self.pure_epsilon)
        return out


@register
@dataclass(frozen=True)
class RandomizedResponse(_DiscreteMechanism):
    """k-ary randomized response (``k`` >= 2 categories) with privacy parameter ``epsilon`` >= 0."""

    epsilon: float
    k: int = 2

    name = "randomized_response"

    def __post_init__(self):
        object.__setattr__(self, "epsilon", V.real("epsilon", self.epsilon, low=0.0))
        object.__setattr__(self, "k", V.integer("k", self.k, low=2))

    @property
    def pure_epsilon(self) -> float:
        return self.epsilon

    def _atoms(self):
        return _rr_atoms(self.epsilon, self.k)

    def _rr_k(self) -> int | None:
        return self.k


@register
@dataclass(frozen=True)
class PureDP(_DiscreteMechanism):
    """Any ``epsilon``-DP mechanism, accounted by its worst case (binary randomized response)."""

    epsilon: float

    name = "pure_dp"

    def __post_init__(self):
        object.__setattr__(self, "epsilon", V.real("epsilon", self.epsilon, low=0.0))

    @property
    def pure_epsilon(self) -> float:
        return self.epsilon

    def _atoms(self):
        return _rr_atoms(self.epsilon, 2)

    def _rr_k(self) -> int | None:
        return 2


@register
@dataclass(frozen=True)
class ApproxDP(_DiscreteMechanism):
    """Any (``epsilon``, ``delta``)-DP mechanism, accounted by the four-point dominating pair.

    ``delta`` must lie in [0, 1); it is the infinite-loss mass of the pair.
    """

    epsilon: float
    delta: float

    name = "approx_dp"

    def __post_init__(self):
        object.__setattr__(self, "epsilon", V.real("epsilon", self.epsilon, low=0.0))
        object.__setattr__(self, "delta", V.real("delta", self.delta, low=0.0, high=1.0, high_open=True))

    @property
    def pure_epsilon(self) -> float:
        # alpha -> inf end of the *conditional* curve (the failure mass is infinite_loss_mass)
        return self.epsilon

    @property
    def infinite_loss_mass(self) -> float:
        return self.delta

    def _atoms(self):
        l, w = _rr_atoms(self.epsilon, 2)
        return l, w * (1.0 - self.delta)

    def _rr_k(self) -> int | None:
        return 2  # the conditional curve is binary randomized response's
