"""Exact composition of the atomic (lattice) part of privacy-loss distributions.

The P-measure of a mechanism's privacy loss is split into finite atoms and an absolutely continuous
remainder.  The product of the atomic parts over a composition is itself a finite set of atoms; this
module enumerates it exactly (binomial / multinomial masses in log space), merging equal losses.  For
randomized response and (eps, delta) blocks this *is* the optimal composition theorem (Kairouz, Oh &
Viswanath 2015): no numerical integration is involved.

Atoms whose log-mass falls below ``LOG_PRUNE`` (1e-300 relative to nothing: an absolute floor) are
dropped; their total mass is returned so that callers add it to the upper bound of delta.

Floating point.  Every ``Atoms`` carries two rigorous error bounds that grow through ``single``,
``power``, ``convolve`` and merging: ``log_err`` (every kept log-mass is within it of the exact
log-mass of the composition of the mechanisms' exact atoms, so masses carry a relative error
<= expm1(log_err)) and ``loss_err`` (every loss is within it of the exact loss).  The input atoms of a
mechanism are taken to be accurate to ``INPUT_ULPS`` ulps of (1 + |loss|) plus 2 ulps of |log mass| plus
its declared ``log_mgf_error`` (closed forms built from exp / log1p of the parameters, e.g. randomized
response's log-masses eps - log(e^eps + k - 1) lose ulps of eps).  Binomial
coefficients are evaluated as log C(k, j) = stirlerr terms - j log(j/k) - (k-j) log((k-j)/k) +
0.5 log(k / (2 pi j (k-j))) (no lgamma(k) of size k log k to cancel), so the rounding error is a few
ulps of k log 2 instead of k log k.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from mechanisms._numerics import log_binomial_coefficients

from . import lattice_atoms as LA

LOG_PRUNE = -690.0  # exp(-690) ~ 1e-300
#: above this many atoms we stop separating them (the contour still handles them).  Raised from 4e5:
#: 1000 x RR(1) + 1000 x RR(0.7317) (two incommensurate lattices, 1.0e6 atoms) was left to a capped
#: contour and the PLD (delta(10) in [0.99999974, 1], 0.34 s); enumerated, it is exact ([1 - 5e-12, 1],
#: 86 ms).  The outer products before merging stay bounded by ``MAX_OUTER``
MAX_ATOMS = 2_000_000
#: the largest outer product of two atom sets formed before merging (16e6 pairs, ~0.3 GB in flight)
MAX_OUTER = 16_000_000
#: the longest dense lattice a lattice convolution fills (``convolve_lattice``)
MAX_LATTICE = 1_600_000
_PRUNED_MASS = 3e-300  # > e^{LOG_PRUNE} = 2.2e-300: a bound on the mass of each pruned atom
MERGE_DECIMALS = 11  # losses equal to 1e-11 are merged onto the larger loss (safe side)
_U = 2.0 ** -53  # unit roundoff
INPUT_ULPS = 4.0  # accuracy of the mechanisms' own atoms: ulps of (1 + |loss|), plus 2 ulps of |log mass|


@dataclass(frozen=True)
class Atoms:
    """A finite sub-probability measure on the real line, masses in log space."""

    losses: np.ndarray
    logw: np.ndarray
    dropped_mass: float = 0.0  # total mass of pruned atoms (bound), added to delta's upper bound
    merge_shift: float = 0.0  # max |loss shift| applied by merging (for the error report)
    log_err: float = 0.0  # bound on |log-mass - exact log-mass| of every kept atom (floating point)
    loss_err: float = 0.0  # bound on |loss - exact loss| of every kept atom (floating point)

    @property
    def size(self) -> int:
        return int(self.losses.shape[0])


def _max_abs(x: np.ndarray) -> float:
    return float(np.max(np.abs(x))) if x.size else 0.0


def _merge_prune(losses: np.ndarray, logw: np.ndarray, dropped: float, shift: float,
                 log_err: float = 0.0, loss_err: float = 0.0) -> Atoms:
    if losses.size == 0:
        return Atoms(losses, logw, dropped, shift, log_err, loss_err)
    keys = np.round(losses, MERGE_DECIMALS)
    if keys.size == 1 or np.all(keys[1:] > keys[:-1]) or np.all(keys[1:] < keys[:-1]):
        # already distinct (e.g. a binomial power): nothing to merge
        keep = logw >= LOG_PRUNE
        if not keep.all():
            dropped += _PRUNED_MASS * float(np.count_nonzero(~keep))
        return Atoms(losses[keep], logw[keep], dropped, shift, log_err, loss_err)
    order = np.argsort(keys, kind="stable")
    keys, losses, logw = keys[order], losses[order], logw[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    # merged loss = max loss of the group (moving mass to a larger loss only increases delta)
    counts = np.diff(np.r_[starts, keys.size])
    new_l = np.maximum.reduceat(losses, starts)
    shift = max(shift, float(np.max(new_l - np.minimum.reduceat(losses, starts))))
    m = np.maximum.reduceat(logw, starts)
    new_w = m + np.log(np.add.reduceat(np.exp(logw - np.repeat(m, counts)), starts))
    # log-sum-exp of a group of n: n + 3 roundings relative, plus the final addition
    log_err += _U * (float(np.max(counts)) + 4.0 + _max_abs(new_w) + _max_abs(m))
    keep = new_w >= LOG_PRUNE
    if not keep.all():
        dropped += _PRUNED_MASS * float(np.count_nonzero(~keep))
    return Atoms(new_l[keep], new_w[keep], dropped, shift, log_err, loss_err)


def _merge_prune_sorted(losses: np.ndarray, logw: np.ndarray, dropped: float, shift: float,
                        log_err: float = 0.0, loss_err: float = 0.0) -> Atoms:
    """Prune only (the losses are known to be distinct)."""
    keep = logw >= LOG_PRUNE
    if not keep.all():
        dropped += _PRUNED_MASS * float(np.count_nonzero(~keep))
        losses, logw = losses[keep], logw[keep]
    return Atoms(losses, logw, dropped, shift, log_err, loss_err)


def single(losses: np.ndarray, masses: np.ndarray, declared_log_err: float = 0.0) -> Atoms:
    """Atoms of one mechanism (masses > 0 kept).  ``declared_log_err``: the mechanism's own declared
    log-MGF error, added to the input floating-point error (see the module docstring)."""
    losses = np.asarray(losses, dtype=float)
    masses = np.asarray(masses, dtype=float)
    pos = masses > 0
    l, lw = losses[pos], np.log(masses[pos])
    log_err = INPUT_ULPS * _U * (1.0 + _max_abs(l)) + 2.0 * _U * _max_abs(lw) + declared_log_err
    loss_err = 2.0 * _U * _max_abs(l)
    return _merge_prune(l, lw, 0.0, 0.0, log_err, loss_err)


def convolve_lattice(a, b):
    """Product of two :class:`Atoms` on a common lattice (:mod:`conversions.lattice_atoms`), or None (not a
    lattice / too big)."""
    la = LA.lattice_of(a.losses)
    if la is None:
        return None
    lb = LA.lattice_of(b.losses, la[1])
    if lb is None:
        return None
    a0, h, na_, dev_a = la
    b0, _, nb_, dev_b = lb
    sa, sb = int(na_.max()) + 1, int(nb_.max()) + 1
    if float(sa) * float(sb) > LA.MAX_WORK or sa + sb - 1 > MAX_LATTICE:
        return None
    da = LA._dense(na_, np.ascontiguousarray(a.logw), sa)
    db = LA._dense(nb_, np.ascontiguousarray(b.logw), sb)
    lw = LA._log_convolve(da, db)
    idx = np.flatnonzero(lw >= LOG_PRUNE)
    pruned = int(np.count_nonzero(np.isfinite(lw) & (lw < LOG_PRUNE)))
    losses = (a0 + b0) + h * idx.astype(float)
    logw = lw[idx]
    if logw.size > MAX_ATOMS:
        return None
    terms = float(min(sa, sb))
    dropped = a.dropped_mass + b.dropped_mass + a.dropped_mass * b.dropped_mass + _PRUNED_MASS * pruned
    max_abs_w = float(np.max(np.abs(logw))) if logw.size else 0.0
    log_err = a.log_err + b.log_err + LA._U * (terms + 6.0 + 2.0 * max_abs_w)
    max_abs_l = float(np.max(np.abs(losses))) if losses.size else 0.0
    loss_err = a.loss_err + b.loss_err + dev_a + dev_b + 4.0 * LA._U * (max_abs_l + abs(a0) + abs(b0))
    return Atoms(losses, logw, dropped, max(a.merge_shift, b.merge_shift), log_err, loss_err)


def convolve(a: Atoms, b: Atoms) -> Atoms | None:
    """Atoms of the product measure (losses add); ``None`` if the support would be too large.

    Large products of atoms on a common lattice (integer-valued noise) are convolved directly on the
    lattice (:mod:`conversions.lattice_atoms`: O(n_a + n_b) atoms instead of n_a n_b before merging).
    """
    if a.size > 1 and b.size > 1 and a.size * b.size > 4096:
        lat = convolve_lattice(a, b)
        if lat is not None:
            return lat
    if a.size * b.size > MAX_OUTER:
        return None
    if a.size == 1 or b.size == 1:
        one, other = (a, b) if a.size == 1 else (b, a)
        dropped = a.dropped_mass + b.dropped_mass + a.dropped_mass * b.dropped_mass
        # a point mass only shifts and scales: no merging needed
        losses, logw = other.losses + one.losses[0], other.logw + one.logw[0]
        return _merge_prune_sorted(losses, logw, dropped, max(a.merge_shift, b.merge_shift),
                                   a.log_err + b.log_err + _U * _max_abs(logw),
                                   a.loss_err + b.loss_err + _U * _max_abs(losses))
    losses = np.add.outer(a.losses, b.losses).ravel()
    logw = np.add.outer(a.logw, b.logw).ravel()
    # dropped mass of a product: (Wa + da)(Wb + db) - Wa Wb <= da*(Wb+db) + db*(Wa+da), Wa, Wb <= 1
    dropped = a.dropped_mass + b.dropped_mass + a.dropped_mass * b.dropped_mass
    out = _merge_prune(losses, logw, dropped, max(a.merge_shift, b.merge_shift),
                       a.log_err + b.log_err + _U * _max_abs(logw),
                       a.loss_err + b.loss_err + _U * _max_abs(losses))
    if out.size > MAX_ATOMS:
        return None
    return out


def log_factorials(n: int) -> np.ndarray:
    """log(j!) for j = 0..n (scipy's gammaln, accurate to a few ulps)."""
    return gammaln(np.arange(n + 1, dtype=float) + 1.0)


def shared_log_factorials(n: int) -> np.ndarray | None:
    """A log(j!) table to share between several powers up to n, or None when n is so large that
    each power builds only its own window of atoms (``_binomial_power``)."""
    return log_factorials(n) if n <= _WINDOW_FROM else None


def power(a: Atoms, k: int, log_fact: np.ndarray | None = None) -> Atoms | None:
    """k-fold product of an atomic measure (binomial closed form for two atoms).

    ``log_fact`` (optional, length > k): a table of log(j!) shared by several powers.
    """
    if k == 0:
        return Atoms(np.array([0.0]), np.array([0.0]))
    if a.size == 0:
        return a
    if a.size == 1:
        lk, wk = a.losses * k, a.logw * k
        return _merge_prune(lk, wk, 0.0, 0.0, k * a.log_err + _U * _max_abs(wk),
                            k * a.loss_err + _U * _max_abs(lk))
    if a.size == 2:
        return _binomial_power(a, k, log_fact)
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


_WINDOW_FROM = 2048  # above this many atoms, locate the unpruned window before building arrays


def _binomial_power(a: Atoms, k: int, log_fact: np.ndarray | None) -> Atoms | None:
    """k-fold power of two atoms: atom j (j = 0..k) has loss j l0 + (k - j) l1 and mass
    C(k, j) w0^j w1^(k - j).  Atoms below e^{LOG_PRUNE} are pruned (each adds _PRUNED_MASS to
    ``dropped_mass``).  The log-masses are concave in j, so for large k only the window where they
    exceed the floor is built (and nothing at all when the total (w0 + w1)^k is below it)."""
    lw0, lw1 = float(a.logw[0]), float(a.logw[1])
    log_tot = k * float(np.logaddexp(lw0, lw1))
    if log_tot + k * a.log_err < LOG_PRUNE - 1.0:  # every atom (and their sum) is below the floor
        return Atoms(np.empty(0), np.empty(0), _PRUNED_MASS * float(k + 1), 0.0)
    lo_j, hi_j = 0, k
    if k > _WINDOW_FROM:
        lgk = math.lgamma(k + 1.0)

        def logw_at(j: int) -> float:
            return lgk - math.lgamma(j + 1.0) - math.lgamma(k - j + 1.0) + j * lw0 + (k - j) * lw1

        # the mode of the binomial weights: floor((k + 1) p), p = w0 / (w0 + w1)
        mode = min(k, max(0, int((k + 1) / (1.0 + math.exp(lw1 - lw0)))))
        if logw_at(mode) >= LOG_PRUNE:
            # bisection on each side (increasing on [0, mode], decreasing on [mode, k]); one atom of
            # margin on each side absorbs the rounding of logw_at
            lo, hi = 0, mode
            while lo < hi:
                mid = (lo + hi) // 2
                if logw_at(mid) >= LOG_PRUNE:
                    hi = mid
                else:
                    lo = mid + 1
            lo_j = max(lo - 1, 0)
            lo, hi = mode, k
            while lo < hi:
                mid = (lo + hi + 1) // 2
                if logw_at(mid) >= LOG_PRUNE:
                    lo = mid
                else:
                    hi = mid - 1
            hi_j = min(lo + 1, k)
    if hi_j - lo_j + 1 > MAX_ATOMS:
        return None  # too many atoms to enumerate (huge k): they stay in the contour's integrand
    ji = np.arange(lo_j, hi_j + 1)
    j = ji.astype(float)
    logc, logc_err = log_binomial_coefficients(k, ji)
    t0, t1 = j * lw0, (k - j) * lw1
    logw = logc + t0 + t1
    l0, l1 = j * a.losses[0], (k - j) * a.losses[1]
    losses = l0 + l1
    keep = logw >= LOG_PRUNE
    # the atoms outside the window are below the floor too (concavity)
    dropped = _PRUNED_MASS * float(np.count_nonzero(~keep) + (k + 1 - j.size))
    if np.count_nonzero(keep) > MAX_ATOMS:
        return None
    # floating point: the inputs' errors times the exponents, the coefficients' error, the products
    # and the two additions (2 ulps of the summands' magnitudes)
    log_err = k * a.log_err + float(np.max(logc_err + 2.0 * _U * (np.abs(logc) + np.abs(t0) + np.abs(t1)),
                                           initial=0.0))
    loss_err = k * a.loss_err + 2.0 * _U * float(np.max(np.abs(l0) + np.abs(l1), initial=0.0))
    if abs(float(a.losses[0]) - float(a.losses[1])) > 1e-9:
        # consecutive losses differ by |l0 - l1|: already distinct after rounding, nothing to merge
        return Atoms(losses[keep], logw[keep], dropped, 0.0, log_err, loss_err)
    return _merge_prune(losses[keep], logw[keep], dropped, 0.0, log_err, loss_err)


def kernel_rel_err(n: int) -> float:
    """Relative floating-point error bound of :func:`log_delta` over n atoms: per term exp, expm1, log
    and the rounding of eps - l (a few ulps; (1 - e^x) is well conditioned in x <= 0), the compensated
    sum (2u + n^2 u^2 ... bounded by 2u + 4 n u^2 for n u < 0.01), the final log and exp."""
    return 16.0 * _U + 4.0 * n * _U * _U


def log_delta(atoms: Atoms, eps: float) -> float:
    """log sum_i w_i (1 - e^{eps - l_i})_+ over the kept atoms (floating point; see
    :func:`log_delta_bounds` for a rigorous bracket of the exact composition)."""
    from ._kernels import atoms_log_delta

    if atoms.size == 0:
        return -math.inf
    return float(atoms_log_delta(atoms.losses, atoms.logw, float(eps)))


def log_delta_bounds(atoms: Atoms, eps: float, extra_shift: float = 0.0) -> tuple[float, float]:
    """(lower, upper) of log sum_i w_i (1 - e^{eps - l_i})_+ for the *exact* atoms of the composition.

    Exact losses lie within ``loss_err`` of the computed ones (and, for the lower side, up to
    ``merge_shift + extra_shift`` below them): delta is non-increasing in eps, and shifting every loss
    by s is the same as evaluating at eps - s, so the computed sum at eps -/+ shift brackets the exact
    one; log-masses lie within ``log_err``, and the kernel's own rounding is ``kernel_rel_err``.
    """
    if atoms.size == 0:
        return -math.inf, -math.inf
    rel = math.log1p(kernel_rel_err(atoms.size))
    s_up = atoms.loss_err
    s_lo = atoms.loss_err + atoms.merge_shift + extra_shift
    up = log_delta(atoms, eps - s_up) if s_up > 0.0 else log_delta(atoms, eps)
    lo = log_delta(atoms, eps + s_lo) if s_lo > 0.0 else (up if s_up == 0.0 else log_delta(atoms, eps))
    up = up + atoms.log_err + rel + 4.0 * _U * abs(up) if up > -math.inf else up
    lo = lo - atoms.log_err - rel - 4.0 * _U * abs(lo) if lo > -math.inf else lo
    return lo, up
