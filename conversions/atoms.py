"""Exact composition of the atomic (lattice) part of privacy-loss distributions.

The P-measure of a mechanism's privacy loss is split into finite atoms and an absolutely continuous
remainder.  The product of the atomic parts over a composition is itself a finite set of atoms; this
module enumerates it exactly (binomial / multinomial masses in log space), merging equal losses.  For
randomized response and (eps, delta) blocks this *is* the optimal composition theorem (Kairouz, Oh &
Viswanath 2015): no numerical integration is involved.

Atoms whose log-mass falls below ``LOG_PRUNE`` (1e-300 relative to nothing: an absolute floor) are
dropped; their total mass is returned so that callers add it to the upper bound of delta.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

LOG_PRUNE = -690.0  # exp(-690) ~ 1e-300
MAX_ATOMS = 400_000  # above this we stop separating atoms (the contour still handles them)
MERGE_DECIMALS = 11  # losses equal to 1e-11 are merged onto the larger loss (safe side)


@dataclass(frozen=True)
class Atoms:
    """A finite sub-probability measure on the real line, masses in log space."""

    losses: np.ndarray
    logw: np.ndarray
    dropped_mass: float = 0.0  # total mass of pruned atoms (bound), added to delta's upper bound
    merge_shift: float = 0.0  # max |loss shift| applied by merging (for the error report)

    @property
    def size(self) -> int:
        return int(self.losses.shape[0])


def _merge_prune(losses: np.ndarray, logw: np.ndarray, dropped: float, shift: float) -> Atoms:
    if losses.size == 0:
        return Atoms(losses, logw, dropped, shift)
    keys = np.round(losses, MERGE_DECIMALS)
    order = np.argsort(keys, kind="stable")
    keys, losses, logw = keys[order], losses[order], logw[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    # merged loss = max loss of the group (moving mass to a larger loss only increases delta)
    counts = np.diff(np.r_[starts, keys.size])
    new_l = np.maximum.reduceat(losses, starts)
    shift = max(shift, float(np.max(new_l - np.minimum.reduceat(losses, starts))))
    m = np.maximum.reduceat(logw, starts)
    new_w = m + np.log(np.add.reduceat(np.exp(logw - np.repeat(m, counts)), starts))
    keep = new_w >= LOG_PRUNE
    if not keep.all():
        dropped += float(np.sum(np.exp(new_w[~keep])))
        # exp underflows to 0 for masses < 1e-308; count those as 1e-300 each (safe side)
        dropped += 1e-300 * float(np.count_nonzero(~keep))
    return Atoms(new_l[keep], new_w[keep], dropped, shift)


def single(losses: np.ndarray, masses: np.ndarray) -> Atoms:
    losses = np.asarray(losses, dtype=float)
    masses = np.asarray(masses, dtype=float)
    pos = masses > 0
    return _merge_prune(losses[pos], np.log(masses[pos]), 0.0, 0.0)


def convolve(a: Atoms, b: Atoms) -> Atoms | None:
    """Atoms of the product measure (losses add); ``None`` if the support would be too large."""
    if a.size * b.size > 40 * MAX_ATOMS:
        return None
    losses = np.add.outer(a.losses, b.losses).ravel()
    logw = np.add.outer(a.logw, b.logw).ravel()
    # dropped mass of a product: (Wa + da)(Wb + db) - Wa Wb <= da*(Wb+db) + db*(Wa+da), Wa, Wb <= 1
    dropped = a.dropped_mass + b.dropped_mass + a.dropped_mass * b.dropped_mass
    out = _merge_prune(losses, logw, dropped, max(a.merge_shift, b.merge_shift))
    if out.size > MAX_ATOMS:
        return None
    return out


def power(a: Atoms, k: int) -> Atoms | None:
    """k-fold product of an atomic measure (binomial closed form for two atoms)."""
    if k == 0:
        return Atoms(np.array([0.0]), np.array([0.0]))
    if a.size == 0:
        return a
    if a.size == 1:
        return _merge_prune(a.losses * k, a.logw * k, 0.0, 0.0)
    if a.size == 2:
        j = np.arange(k + 1, dtype=float)
        logc = gammaln(k + 1.0) - gammaln(j + 1.0) - gammaln(k - j + 1.0)
        logw = logc + j * a.logw[0] + (k - j) * a.logw[1]
        losses = j * a.losses[0] + (k - j) * a.losses[1]
        keep = logw >= LOG_PRUNE
        dropped = float(np.sum(np.exp(logw[~keep]))) + 1e-300 * float(np.count_nonzero(~keep))
        if np.count_nonzero(keep) > MAX_ATOMS:
            return None
        return _merge_prune(losses[keep], logw[keep], dropped, 0.0)
    # general: binary powering with merging
    result: Atoms | None = None
    base: Atoms | None = a
    kk = k
    while kk > 0 and base is not None:
        if kk & 1:
            result = base if result is None else convolve(result, base)
            if result is None:
                return None
        kk >>= 1
        if kk:
            base = convolve(base, base)
    return result if base is not None else None


def log_delta(atoms: Atoms, eps: float) -> float:
    """log sum_i w_i (1 - e^{eps - l_i})_+ over the kept atoms."""
    from ._kernels import atoms_log_delta

    if atoms.size == 0:
        return -math.inf
    return float(atoms_log_delta(atoms.losses, atoms.logw, float(eps)))
