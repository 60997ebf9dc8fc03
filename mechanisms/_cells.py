"""Exact cell masses of privacy-loss distributions on a grid (the ``pld_cell_masses`` hook).

For sorted edges e_0 <= ... <= e_{n-1} the cells are (-inf, e_0], (e_{i-1}, e_i] (i = 1..n-1) and
(e_{n-1}, +inf); a mass vector m has n + 1 entries.  Masses are probabilities computed from CDF
differences (never density x width); every routine also returns a per-cell bound ``err_i`` on
|m_i - true_i| (floating point only: the formulas are exact), so that a user can weight the errors
(e.g. by an exponential tilt) instead of using only their sum.

Error model (validated against mpmath in ``tests/test_pld.py``):

* ``math.erfc`` (glibc, a few ulps) is given a relative error ``U_ERFC = 1e-13``; its argument z / sqrt2
  is rounded, which perturbs erfc relatively by up to 2 t^2 u (t = |z| / sqrt2, d log erfc / dt ~ -2t);
* exp / log / log1p / expm1: 1 ulp each in the derivation of the inverse loss map, counted with a
  factor 2 margin; results below 1e-300 carry an absolute error 1e-300 (subnormal range);
* a CDF difference has an error relative to the CDF values, ~1 / (z h) times the mass of a cell of width
  h at z: narrow cells (``NARROW_RHO``) take their normal masses from a Hermite series instead, with an
  error of a few ulps of the mass itself (``_narrow_mass``).
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction

import numpy as np
from numba import njit

from ._numerics import two_product

U = 2.0**-53
U_ERFC = 1e-13
_SQRT1_2 = 0.7071067811865476
_INV_SQRT_2PI = 0.3989422804014327
TINY_ABS = 1e-300
_SUBNORMAL = 2.0**-1074


def check_edges(edges) -> np.ndarray:
    """``edges`` as a contiguous float array: 1-D, length >= 1, finite, non-decreasing (ValueError)."""
    e = np.ascontiguousarray(np.asarray(edges, dtype=float))
    if e.ndim != 1 or e.size < 1:
        raise ValueError(f"edges must be a 1-D array of length >= 1, got shape {e.shape}")
    if not np.all(np.isfinite(e)):
        raise ValueError("edges must be finite")
    if e.size > 1 and np.any(np.diff(e) < 0):
        raise ValueError("edges must be sorted in non-decreasing order")
    return e


def product_placement(k, x) -> tuple[np.ndarray, np.ndarray]:
    """(positions, loss_err) that place the lattice losses fl(k x) (k exact floats, e.g. m - 2j) in their
    real cells: where :func:`two_product` gives the exact residual r = k x - fl(k x), the real loss lies
    strictly between fl(k x) and its float neighbour on r's side (round to nearest: |r| is at most half the
    spacing), so no edge but fl(k x) itself can separate them, and the real loss sits above that edge iff
    r > 0: fl(k x) moved one ulp up when r > 0 places it exactly (``atoms_cell_masses`` on these positions,
    no position error).  Elsewhere (outside Dekker's range) fl(k x) with u |fl(k x)| plus the subnormal
    spacing.  (The atom -10 eps one ulp below its real position put 8e-5 in the wrong cell.)"""
    p, e, ok = two_product(k, x)
    place = np.where(ok & (e > 0.0), np.nextafter(p, np.inf), p)
    return place, np.where(ok, 0.0, U * np.abs(p) * (1.0 + 2.0 * U) + _SUBNORMAL)


#: at most this many atoms next to an edge are placed by their exact rational losses (~3 us each)
EXACT_MAX = 1 << 16


def atoms_cell_masses(edges: np.ndarray, losses, masses, loss_err=0.0, mass_rel_err=0.0,
                      exact_losses=None) -> tuple[np.ndarray, np.ndarray]:
    """Histogram of finite atoms: an atom exactly on an edge goes to the cell below (L <= edge).

    Exact up to the rounding of the summed masses (relative (count + 1) u per cell), the masses' own
    relative error ``mass_rel_err`` (scalar or per atom: the floating point of their closed forms) and
    the atoms' positions: ``loss_err`` (scalar or per atom) bounds |computed loss - real loss|, and an
    atom whose interval [loss - loss_err, loss + loss_err] meets an edge may lie in any cell that interval
    meets (the 1-2 ulp rounding of a subsampled Laplace atom put half the mass one cell off; a discrete
    Laplace loss 1 ulp off its real k / t put 3e-5 there).  ``exact_losses`` (optional) maps indices of such
    atoms to their real losses as Fractions: up to ``EXACT_MAX`` of them are then placed exactly (an
    edge at the float 10.0 of the real 9.99999999999999944 = 1 / 0.1 costs nothing); otherwise their mass
    counts in the error of each cell the interval meets.  A mass below 1e-290 may be subnormal or have
    underflowed to 0 (exp of a closed form below -745), where a relative error says nothing: it carries
    the absolute ``TINY_ABS`` as well.
    """
    e = check_edges(edges)
    l = np.asarray(losses, dtype=float)
    w = np.asarray(masses, dtype=float)
    if l.size == 0:
        z = np.zeros(e.size + 1)
        return z, z.copy()
    idx, near, i_lo, i_hi = _atom_cells(e, l, loss_err, exact_losses)
    m = np.bincount(idx, weights=w, minlength=e.size + 1)
    cnt = np.bincount(idx, minlength=e.size + 1)
    rel = np.broadcast_to(np.asarray(mass_rel_err, dtype=float), w.shape)
    tiny = np.where(w < 1e-290, TINY_ABS, 0.0)
    err = m * (cnt + 1.0) * U + np.bincount(idx, weights=w * rel + tiny, minlength=e.size + 1)
    for j in near:
        err[i_lo[j]:i_hi[j] + 1] += w[j] * (1.0 + rel[j]) * (1.0 + 4.0 * U) + tiny[j]
    return m, err


def _atom_cells(e: np.ndarray, l: np.ndarray, loss_err, exact_losses):
    """(idx, near, i_lo, i_hi) of :func:`atoms_cell_masses`: each atom's cell (the real one where it was
    placed exactly), the atoms whose cell is uncertain (their position interval meets an edge and they
    were not placed exactly) and, for those, the first and last cells the interval meets."""
    idx = np.searchsorted(e, l, side="left")
    le = np.broadcast_to(np.asarray(loss_err, dtype=float), l.shape)
    near = np.empty(0, dtype=np.int64)
    i_lo = i_hi = idx
    if np.any(le > 0.0):
        # (an atom with no position error stays in its own cell, also on an edge: widening its empty
        # interval by an ulp would put an exact atom at 0 of mass 0.08 in two cells' errors)
        pos = le > 0.0
        i_lo = np.searchsorted(e, np.where(pos, np.nextafter(l - le, -np.inf), l), side="left")
        i_hi = np.searchsorted(e, np.where(pos, np.nextafter(l + le, np.inf), l), side="left")
        near = np.flatnonzero(i_lo != i_hi)
        if exact_losses is not None and 0 < near.size <= EXACT_MAX:
            # cell of the real loss x: the number of edges below it (exact rational comparisons)
            for j, x in zip(near.tolist(), exact_losses(near), strict=True):
                idx[j] = bisect.bisect_left(e, x, key=Fraction)
            near = near[:0]
    return idx, near, i_lo, i_hi


def atoms_cell_offsets(edges: np.ndarray, losses, loss_err=0.0,
                       exact_losses=None) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (lo, hi) on E[L - e_{i-1} | cell i] / (e_i - e_{i-1}) for the finite atoms of
    :func:`atoms_cell_masses` (same cells, same arguments): the conditional mean of a cell lies between
    its atoms' smallest and largest offsets, each taken over the atom's position interval [loss -
    loss_err, loss + loss_err] and rounded outwards (the two subtractions and the division: 4 ulps of
    the magnitudes over the width), clipped to [0, 1].  A cell that an atom of uncertain cell may reach
    gets [0, 1]; so do cells 0 and n and empty cells (ignored by callers).  Every atom counts, also one
    whose computed mass underflowed to 0 (its real mass is positive).  (Atoms have no spread within a
    cell: with these bounds the PLD's connect-the-dots split sends an atom just above an edge almost
    wholly to that edge, where whole cells rounded up moved it a full step.)"""
    e = check_edges(edges)
    l = np.asarray(losses, dtype=float)
    n = e.size
    lo, hi = np.zeros(n + 1), np.ones(n + 1)
    if l.size == 0 or n < 2:
        return lo, hi
    idx, near, i_lo, i_hi = _atom_cells(e, l, loss_err, exact_losses)
    le = np.broadcast_to(np.asarray(loss_err, dtype=float), l.shape)
    inner = (idx >= 1) & (idx <= n - 1)
    k = idx[inner]
    a, b = e[k - 1], e[k]
    width = b - a
    pos, err = l[inner], le[inner]
    slack = 4.0 * U * (np.abs(pos) + err + np.abs(a)) / width + 4.0 * U
    r_lo = (pos - err - a) / width - slack
    r_hi = (pos + err - a) / width + slack
    big = np.full(n + 1, np.inf)
    small = np.full(n + 1, -np.inf)
    np.minimum.at(big, k, r_lo)
    np.maximum.at(small, k, r_hi)
    filled = np.isfinite(big)
    lo = np.where(filled, np.clip(big, 0.0, 1.0), 0.0)
    hi = np.where(filled, np.clip(small, 0.0, 1.0), 1.0)
    for j in near:
        lo[i_lo[j]:i_hi[j] + 1] = 0.0
        hi[i_lo[j]:i_hi[j] + 1] = 1.0
    lo[0] = lo[n] = 0.0
    hi[0] = hi[n] = 1.0
    return lo, np.maximum(hi, lo)


@njit(cache=True)
def _phi_sides(z):  # pragma: no cover - compiled
    """(Phi(z), Phi(-z), relative error bound of both): one erfc on the small side, the other side as
    1 - small (>= 1/2, so its relative error is at most the small side's absolute error + u)."""
    if z == -math.inf:
        return 0.0, 1.0, 0.0
    if z == math.inf:
        return 1.0, 0.0, 0.0
    t = z * _SQRT1_2
    # (past |t| = 40 the small side is 0 in floating point and below 1e-690 in truth, under the cells'
    # absolute TINY_ABS: the argument's rounding no longer matters, and 2 t^2 u would overflow to inf for
    # |t| > 1e154, making inf x 0 = NaN error bounds)
    rel = U_ERFC + 2.0 * min(t * t, 1600.0) * U + 4.0 * U
    if z <= 0.0:
        lo = 0.5 * math.erfc(-t)  # Phi(z) <= 1/2
        return lo, 1.0 - lo, rel
    hi = 0.5 * math.erfc(t)  # Phi(-z) < 1/2
    return 1.0 - hi, hi, rel


#: a finite cell [a, b] with rho = (b - a) / 2 x (|mid| + 1) at most this has its mass from the Hermite
#: series (``_narrow_mass``), with an error relative to the mass itself; a wider one from CDF differences,
#: whose error is relative to the CDF values (at most ~1 / (a (b - a)) x the mass's: <= ~25 x here)
NARROW_RHO = 0.05
_N_SERIES = 6  # even terms k = 0..5 (He_0 .. He_10): the series' tail is below 4.49 rho^12 / (1 - rho)


@njit(cache=True)
def _narrow_mass(a, b):  # pragma: no cover - compiled
    """(N(0, 1)-mass of [a, b] for a narrow cell, its error bound), with an error relative to the mass.

    With mid = (a + b) / 2, H = (b - a) / 2 and the generating function e^{x t - t^2/2} =
    sum_n He_n(x) t^n / n! (probabilists' Hermite polynomials):

        int_a^b phi = phi(mid) int_{-H}^{H} e^{-mid s - s^2/2} ds
                    = phi(mid) 2H sum_k He_{2k}(mid) H^{2k} / (2k + 1)!        (odd terms cancel).

    Tail: |He_n(x)| <= P_n(|x|), the (non-negative) coefficients of e^{|x| t + t^2/2} = sum P_n t^n / n!,
    so sum_{n >= N} |He_n| H^n / n! <= F(R) (H / R)^N / (1 - H / R) for any R > H (each P_n R^n / n! <=
    F(R)); R = 1 / (|mid| + 1) gives F(R) <= e^{1.5} and H / R = rho.  Summed to N = 12 with rho <=
    NARROW_RHO = 0.05: tail <= 4.49 rho^12 / (1 - rho) <= 1.2e-15 (relative to phi(mid) 2H; the sum is
    >= 1 - 4.49 rho^2 / (1 - rho) >= 0.98).  Rounding: mid and mid^2 / 2 (phi relatively (2 mid^2 + 4) u),
    the recurrence He_{n+1} = x He_n - n He_{n-1} (|error| <= 3 n u P_n(|x|)), the terms and the sum:
    counted as (4 mid^2 + 64) u of phi(mid) 2H (>= the mass / 1.06).
    """
    mid = 0.5 * (a + b)
    hh = 0.5 * (b - a)
    x = mid
    h2 = hh * hh
    s = 1.0
    he_prev, he = 1.0, x  # He_0, He_1
    fact = 1.0  # (2k + 1)!
    hp = 1.0  # H^(2k)
    n = 1
    for k in range(1, _N_SERIES):
        # advance to He_{2k}: two recurrence steps
        he_prev, he = he, x * he - n * he_prev  # He_{n+1}
        n += 1
        he2k = he
        he_prev, he = he, x * he - n * he_prev  # He_{n+1} (odd, for the next step)
        n += 1
        hp *= h2
        fact *= (2.0 * k) * (2.0 * k + 1.0)
        s += he2k * hp / fact
    rho = hh * (abs(mid) + 1.0)
    tail = 4.49 * rho**12 / (1.0 - rho)
    base = _INV_SQRT_2PI * math.exp(-0.5 * mid * mid) * (2.0 * hh)
    m = base * s
    err = base * (tail + (4.0 * mid * mid + 64.0) * U)
    if m < 0.0:
        m = 0.0
    return m, err


@njit(cache=True)
def normal_cells(x, out_m, out_e, weight):  # pragma: no cover - compiled
    """Add weight x N(0, 1)-mass of the cells of the sorted points x (n of them; cells n + 1) to out_m,
    and its error bound to out_e.  Narrow finite cells (``NARROW_RHO``) by the Hermite series
    (``_narrow_mass``: an error relative to the cell's own mass); the others by upper-side differences
    (survival functions) whenever the cell's upper end is > 0, lower-side CDF differences otherwise: no
    cancellation beyond the inherent one."""
    n = x.shape[0]
    plo, phi_, prel = 0.0, 1.0, 0.0  # Phi and Phi-bar at the cell's lower end (-inf first)
    have_lower = True  # (a narrow cell leaves its upper end's erfc uncomputed: only a wide one needs it)
    for i in range(n + 1):
        if 0 < i < n and math.isfinite(x[i - 1]) and math.isfinite(x[i]) \
                and 0.5 * (x[i] - x[i - 1]) * (0.5 * abs(x[i] + x[i - 1]) + 1.0) <= NARROW_RHO:
            m, e = _narrow_mass(x[i - 1], x[i])
            have_lower = False
        else:
            if not have_lower:
                plo, phi_, prel = _phi_sides(x[i - 1])
            if i < n:
                clo, chi, crel = _phi_sides(x[i])
            else:
                clo, chi, crel = 1.0, 0.0, 0.0
            if i < n and x[i] <= 0.0:
                m = clo - plo
                e = crel * clo + prel * plo
            else:
                m = phi_ - chi
                e = crel * chi + prel * phi_
            if m < 0.0:
                m = 0.0
            plo, phi_, prel = clo, chi, crel
            have_lower = True
        out_m[i] += weight * m
        out_e[i] += weight * (e + 2.0 * U * m + TINY_ABS)


@njit(cache=True)
def _sg_x(d, dd, l1q, lq, mu):  # pragma: no cover - compiled
    """x(d) = (log(1 - q) + log(expm1(d)) - log q) / mu + mu / 2 for d > dd >= 0, and a bound on |x - x(d')|
    for every d' with |d' - d| <= dd, rounding included (``_sg_inverse``).

    g(d) = log(expm1(d)) is concave (g' = 1 / (1 - e^{-d}) decreases), so on [d - dd, d + dd] it moves
    by at most g'(d - dd) dd (not g'(d) dd: near d ~ dd the slope grows like 1 / d)."""
    if d > 30.0:
        g = d + math.log1p(-math.exp(-d))
    else:
        g = math.log(math.expm1(d))
    d_lo = d - dd
    gp = 1.0 / (1.0 - math.exp(-d_lo)) if d_lo > 30.0 else -1.0 / math.expm1(-d_lo)
    x = (l1q + g - lq) / mu + 0.5 * mu
    dg = gp * dd * (1.0 + 8.0 * U) + 2.0 * U * (abs(g) + 1.0)
    eta = (dg + 4.0 * U * (abs(l1q) + abs(g) + abs(lq) + 1.0)) / mu + 4.0 * U * (abs(x) + mu)
    return x, 2.0 * eta


@njit(cache=True)
def _sg_inverse(l, l1q, lq, mu):  # pragma: no cover - compiled
    """x with log(1 - q + q e^{mu x - mu^2/2}) = l, and a bound eta on the rounding error of x.

    x = (log(1-q) + log(expm1(l - log(1-q))) - log q) / mu + mu / 2; -inf when l <= log(1 - q).
    d = l - log(1 - q) is known to within dd (log1p's 2 ulps of log(1 - q), the subtraction's rounding).
    When d <= dd the edge may lie at the loss's floor log(1 - q) itself (x = -inf) or above it: with a
    large mu most of the mass sits within an ulp of the floor (sigma = 0.1, q = 1e-3: 88 % within 2.5e-20
    of it), so the edge's side of that mass is unknown.  Then (x_hi, inf) is returned, x_hi >= the true
    x: the caller takes the edge at x_hi and counts the mass of (-inf, x_hi] as that edge's error.
    """
    d = l - l1q
    dd = 4.0 * U * abs(l1q) + 2.0 * U * abs(d)
    if d + dd <= 0.0:
        return -math.inf, 0.0  # at or below the floor for sure: the exact x
    if d - dd <= 0.0:
        x_hi, e_hi = _sg_x(np.nextafter(d + dd, np.inf), 0.0, l1q, lq, mu)
        return x_hi + e_hi, math.inf
    return _sg_x(d, dd, l1q, lq, mu)


@njit(cache=True)
def sg_edges_x(edges, q, mu, add):  # pragma: no cover - compiled
    """x(e_i) (remove) or x(-e_i) (add) for every edge, in edge order, with rounding bounds."""
    n = edges.shape[0]
    lq = math.log(q)
    l1q = math.log1p(-q)
    x = np.empty(n)
    eta = np.empty(n)
    for i in range(n):
        x[i], eta[i] = _sg_inverse(-edges[i] if add else edges[i], l1q, lq, mu)
    return x, eta


@njit(cache=True)
def sg_cells(edges, q, mu, add):  # pragma: no cover - compiled
    """Cell masses of the subsampled-Gaussian privacy loss (0 < q < 1), see SubsampledGaussian."""
    xs, etas = sg_edges_x(edges, q, mu, add)
    return sg_cells_x(xs, etas, q, mu, add)


@njit(cache=True)
def sg_cells_x(xs, etas, q, mu, add):  # pragma: no cover - compiled
    """``sg_cells`` from the edges' x (edge order, from ``sg_edges_x``)."""
    return _sg_cells_under(xs, etas, q, mu, add, not add)


@njit(cache=True)
def sg_q_cells_x(xs, etas, q, mu, add):  # pragma: no cover - compiled
    """Masses of the same loss cells under the pair's other measure Q (remove: N(0, 1); add: the mixture
    (1 - q) N(0, 1) + q N(mu, 1)), i.e. E_P[e^{-L}; cell] on the finite cells; error bounds as in
    ``sg_cells_x``."""
    return _sg_cells_under(xs, etas, q, mu, add, add)


@njit(cache=True)
def _sg_cells_under(xs, etas, q, mu, add, mix):  # pragma: no cover - compiled
    """Loss cells (edge x's in edge order) under the mixture (mix) or N(0, 1), in loss order."""
    n = xs.shape[0]
    if add:  # L = -l(x) <= e  <=>  x >= x(-e); walk the edges backwards so x is increasing
        x = xs[::-1].copy()
        eta = etas[::-1].copy()
    else:
        x = xs
        eta = etas
    m = np.zeros(n + 1)
    e = np.zeros(n + 1)
    if mix:
        normal_cells(x, m, e, 1.0 - q)
        normal_cells(x - mu, m, e, q)
    else:
        normal_cells(x, m, e, 1.0)
    # rounding of the inverse map: the edge x_i is off by <= eta_i, which moves at most eta_i times the
    # largest density on [x - eta, x + eta] (each normal component at its point of that interval nearest
    # to its mean; exp's and the products' rounding: 8 u) across the edge.  eta_i = inf (``_sg_inverse``:
    # an edge at the loss's floor within rounding) means the true edge lies anywhere in [-inf, x_i]: the
    # whole mass of (-inf, x_i] may be on either side of it
    for i in range(n):
        if x[i] == -math.inf:
            continue
        if eta[i] == math.inf:
            below = _phi_sides(x[i])[0]
            if mix:
                below = (1.0 - q) * below + q * _phi_sides(x[i] - mu)[0]
            de = 1.01 * below + TINY_ABS
        else:
            z0 = max(abs(x[i]) - eta[i], 0.0)
            dens = math.exp(-0.5 * z0 * z0)
            if mix:
                z1 = max(abs(x[i] - mu) - eta[i], 0.0)
                dens = (1.0 - q) * dens + q * math.exp(-0.5 * z1 * z1)
            de = (1.0 + 8.0 * U) * _INV_SQRT_2PI * dens * eta[i] + TINY_ABS
        e[i] += de
        e[i + 1] += de
    if add:  # cells were built in increasing x = decreasing loss: reverse to loss order
        m = m[::-1].copy()
        e = e[::-1].copy()
    return m, e


def pieces_cell_masses(edges: np.ndarray, lo, hi, log_w, rate) -> tuple[np.ndarray, np.ndarray]:
    """Cell masses of a density sum_q exp(log_w_q + rate_q l) on [lo_q, hi_q] (closed form).

    int_a^b e^{w + r l} dl = e^{w + r a} expm1(r (b - a)) / r  (r > 0),  (b - a) e^w  (r = 0).
    Relative error: exp of an argument of size |w| + |r a| (absolute error u per unit), expm1, the
    difference b - a and the division: 8 u (|w| + |r a| + 4), counted twice.
    """
    e = check_edges(edges)
    n = e.size
    m = np.zeros(n + 1)
    err = np.zeros(n + 1)
    lo = np.atleast_1d(np.asarray(lo, float))
    hi = np.atleast_1d(np.asarray(hi, float))
    log_w = np.atleast_1d(np.asarray(log_w, float))
    rate = np.atleast_1d(np.asarray(rate, float))
    big = np.concatenate([[-np.inf], e, [np.inf]])
    for a0, b0, w, r in zip(lo, hi, log_w, rate, strict=True):
        a = np.clip(big[:-1], a0, b0)
        b = np.clip(big[1:], a0, b0)
        width = b - a
        if r > 0:
            val = np.exp(w + r * a) * np.expm1(r * width) / r
        else:
            val = np.exp(w) * width
        val = np.where(width > 0, val, 0.0)
        m += val
        err += val * 16.0 * U * (abs(w) + np.abs(r * a) + 4.0) + np.where(width > 0, TINY_ABS, 0.0)
    return m, err


def gaussian_loss_cells(edges: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """Cells of L ~ N(mu^2/2, mu^2) (the Gaussian mechanism's loss under P): z = (e - mu^2/2) / mu.

    Rounding of z: |dz| <= 2u (|e| + mu^2/2) / mu + 2u|z|, moving mass <= phi(z) |dz| per edge (x 1.01).
    """
    e = check_edges(edges)
    z = (e - 0.5 * mu * mu) / mu
    m = np.zeros(e.size + 1)
    err = np.zeros(e.size + 1)
    normal_cells(z, m, err, 1.0)
    dz = 2.0 * U * (np.abs(e) + 0.5 * mu * mu) / mu + 2.0 * U * np.abs(z)
    de = 1.01 * _INV_SQRT_2PI * np.exp(-0.5 * z * z) * dz + TINY_ABS
    err[:-1] += de
    err[1:] += de
    return m, err


def sl_cells(edges: np.ndarray, q: float, a: float, add: bool) -> tuple[np.ndarray, np.ndarray]:
    """Continuous part of the subsampled-Laplace loss on the cells (0 < q < 1, a = sensitivity / scale).

    Output x in units of the sensitivity, Lap(0) density (a/2) e^{-a|x|}; on 0 < x < 1 the remove loss is
    l(x) = log(1 - q + q e^{a(2x - 1)}) (increasing), x(l) = (log((e^l - (1-q)) / q) / a + 1) / 2.
    Remove: x ~ (1-q) Lap(0) + q Lap(1); add: L = -l(x), x ~ Lap(0).  Mass of x in (u, v) in (0, 1):
    Lap(0): (1/2) e^{-a u} (-expm1(-a (v - u))); Lap(1): (1/2) e^{-a (1 - v)} (-expm1(-a (v - u))).
    Errors: the inverse map (as in ``_sg_inverse``, with mu -> 2a) moves mass <= (a/2) eta per edge (the
    density is <= a/2; an edge within rounding of the floor log(1 - q): eta = its whole x range [0, x]);
    each closed-form mass has relative error <= 16 u (a + 4).
    """
    e = check_edges(edges)
    lq, l1q = math.log(q), math.log1p(-q)
    lv = -e[::-1] if add else e
    d = lv - l1q
    # d is known to within dd (log1p's 2 ulps of log(1 - q), the subtraction); an edge with |d| <= dd may
    # lie at the floor log(1 - q) or above it (``_sg_inverse``): there x is evaluated at d + dd (an upper
    # bound on the true x) and the whole of [0, x] counts as that edge's uncertainty
    dd = 4.0 * U * abs(l1q) + 2.0 * U * np.abs(d)
    below = d + dd <= 0.0
    amb = ~below & (d - dd <= 0.0)
    d_at = np.where(amb, np.nextafter(d + dd, np.inf), d)
    dd_at = np.where(amb, 0.0, dd)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        big = d_at > 30.0
        g = np.where(big, d_at + np.log1p(-np.exp(-np.where(big, d_at, 30.0))),
                     np.log(np.expm1(np.where(big, 1.0, np.maximum(d_at, 1e-300)))))
        # g = log(expm1(d)) is concave: on [d - dd, d + dd] its slope is at most g'(d - dd)
        d_lo = np.maximum(d_at - dd_at, 1e-300)
        gp = np.where(d_lo > 30.0, 1.0 / (1.0 - np.exp(-np.minimum(d_lo, 700.0))), 1.0 / -np.expm1(-d_lo))
    x = (l1q + g - lq) / (2.0 * a) + 0.5
    dg = gp * dd_at * (1.0 + 8.0 * U) + 2.0 * U * (np.abs(g) + 1.0)
    eta = 2.0 * ((dg + 4.0 * U * (abs(l1q) + np.abs(g) + abs(lq) + 1.0)) / (2.0 * a)
                 + 4.0 * U * (np.abs(x) + 1.0))
    x_hi = np.clip(x + eta, 0.0, 1.0)
    # outside (0, 1) the clipped end point is exact once the computed x is off by more than eta (for an
    # edge at the floor: once its upper bound is <= 0)
    exact = below | np.where(amb, x_hi <= 0.0, (x + eta <= 0.0) | (x - eta >= 1.0))
    x = np.where(below, 0.0, np.where(amb, x_hi, np.clip(x, 0.0, 1.0)))
    eta = np.where(exact, 0.0, np.where(amb, x_hi, eta))
    xs = np.concatenate([[0.0], x, [1.0]])  # cells in increasing x
    u, v = xs[:-1], xs[1:]
    w = np.maximum(v - u, 0.0)
    shrink = -np.expm1(-a * w)
    m = 0.5 * np.exp(-a * u) * shrink
    if not add:
        m = (1.0 - q) * m + q * 0.5 * np.exp(-a * (1.0 - v)) * shrink
    err = m * 16.0 * U * (a + 4.0) + np.where(w > 0, TINY_ABS, 0.0)
    de = 0.51 * a * eta
    err[:-1] += de
    err[1:] += de
    if add:
        m, err = m[::-1].copy(), err[::-1].copy()
    return m, err
