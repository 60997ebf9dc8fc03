"""Bounds on where the privacy loss sits inside each PLD cell (the ``pld_cell_offsets`` hook): the
discretised PLD's cell splits for mechanisms without Q-masses, and their lower end.  The cells and the
inverse loss maps are those of :mod:`mechanisms._cells`."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._cells import U, check_edges, sg_edges_x


# ----------------------------------------------------------------------------------------- cell offsets
# Bounds on the conditional mean position of the loss inside each cell, r_i = E[L - e_{i-1} | cell i] /
# (e_i - e_{i-1}) in [0, 1] (the ``pld_cell_offsets`` hook: bounds on the discretised PLD's cell splits).
#
# Within a cell, x (the mechanism's output in noise units) runs over an interval of width w; with
# s in [0, 1] the position inside it, each Gaussian component's density is proportional to
# exp(-alpha s - (w^2/2) s^2), alpha = (distance of the s = 0 end from the component's mean) x w (signed).
# Monotone likelihood ratios against the truncated exponential laws e^{-r s} on [0, 1] give
#     t_e(alpha + w^2) <= E[s | cell] <= t_e(alpha),   t_e(r) = 1/r - 1/expm1(r)   (mean of e^{-r s}),
# for every component, hence for their mixture.  The loss l(s) = L(x(s)) - e_{i-1} runs from 0 to Delta:
# linear (Gaussian), convex (subsampled Gaussian, remove) or concave (add).  Convex: the chord gives
# E l <= Delta E[s], the tangents at both ends E l >= S_a w E[s] and E l >= Delta - S_b w (1 - E[s]);
# concave: the reverse.  S_a, S_b are the slopes dL/dx at the cell ends, in closed form from the edge
# losses.  The rounding of the x edges (eta) widens w and alpha; every float step is covered by a 1e-12
# absolute margin on r (the computed quantities are O(1) with relative errors of a few ulps).
@njit(cache=True)
def _t_exp(r):  # pragma: no cover - compiled
    """Mean of the density proportional to e^{-r s} on [0, 1] (decreasing in r); abs. error < 1e-13."""
    if abs(r) < 1e-2:
        return 0.5 - r / 12.0 + r * r * r / 720.0 - r**5 / 30240.0
    if r < 0.0:
        return 1.0 - _t_exp(-r)
    if r > 700.0:
        return 1.0 / r
    return 1.0 / r - 1.0 / math.expm1(r)


@njit(cache=True)
def _t_bounds(alphas, nc, w, eta, dist):  # pragma: no cover - compiled
    """(lo, hi) on E[s | cell] for the mixture of nc components: alphas[c] = dist[c] * w computed,
    dist[c] the s = 0 end's signed distance from component c's mean (error <= eta), w the width."""
    w_hi = w + eta
    lo = 1.0
    hi = 0.0
    for c in range(nc):
        a = alphas[c]
        da = abs(dist[c]) * eta + w_hi * eta + 4.0 * U * (abs(a) + 1.0)
        t1 = _t_exp(a + da + w_hi * w_hi)
        t2 = _t_exp(a - da)
        if t1 < lo:
            lo = t1
        if t2 > hi:
            hi = t2
    return max(lo - 1e-12, 0.0), min(hi + 1e-12, 1.0)


@njit(cache=True)
def sg_offsets(edges, q, mu, add):  # pragma: no cover - compiled
    """Offset bounds (lo, hi), length n + 1, for the subsampled-Gaussian loss (0 < q < 1); cells 0 and n
    (unbounded) get the trivial [0, 1], as does any cell with an infinite x end."""
    xs, etas = sg_edges_x(edges, q, mu, add)
    return sg_offsets_x(edges, xs, etas, q, mu, add)


@njit(cache=True)
def sg_offsets_x(edges, xs, etas, q, mu, add):  # pragma: no cover - compiled
    """``sg_offsets`` from the edges' x (edge order; decreasing in i for add)."""
    n = edges.shape[0]
    l1q = math.log1p(-q)
    rlo = np.zeros(n + 1)
    rhi = np.ones(n + 1)
    al = np.empty(2)
    dist = np.empty(2)
    # slopes |dL/dx| at the edges: remove mu (1 - (1-q) e^{-e}), add mu (1 - (1-q) e^{e}), i.e.
    # -mu expm1(l1q -+ e).  The argument is off by <= da = 2u (|l1q| + |e| + |arg|) (l1q, the sum), which
    # moves the slope by <= mu da e^{max(arg, 0) + da}; expm1 and the product add 4u |slope|
    s_lo = np.empty(n)
    s_hi = np.empty(n)
    for i in range(n):
        arg = l1q + edges[i] if add else l1q - edges[i]
        sl = -mu * math.expm1(arg)
        da = 2.0 * U * (abs(l1q) + abs(edges[i]) + abs(arg))
        de = 1.01 * mu * da * math.exp(min(max(arg, 0.0), 700.0)) + 4.0 * U * abs(sl)
        s_lo[i] = sl - de
        s_hi[i] = sl + de
    for i in range(1, n):
        d = edges[i] - edges[i - 1]
        if d <= 0.0:
            continue
        if add:
            xa, xb = xs[i], xs[i - 1]  # x_bot (loss e_i), x_top (loss e_{i-1})
            if xa == -math.inf or xb == -math.inf:
                continue
            w = xb - xa
            eta = etas[i] + etas[i - 1]
            if w <= eta:
                continue
            dist[0] = -xb  # s from x_top downwards: density exp(x_top w s - ...), alpha = -x_top w
            al[0] = dist[0] * w
            tlo, thi = _t_bounds(al, 1, w, eta, dist)
            # slopes |dL/dx| at the ends: mu (1 - (1-q) e^{e}) = -mu expm1(l1q + e)
            s_top = s_hi[i - 1]
            s_bot = s_lo[i]
            if s_bot < 0.0:
                continue
            # concave: the chord is below (r >= E[s]); the end tangents are above
            hi = min(1.0, s_top * (w + eta) * thi / d, 1.0 - s_bot * max(w - eta, 0.0) * (1.0 - thi) / d)
            rlo[i] = max(tlo - 1e-12, 0.0)
            rhi[i] = min(max(hi + 1e-12, rlo[i]), 1.0)
        else:
            xa, xb = xs[i - 1], xs[i]
            if xa == -math.inf:
                continue
            w = xb - xa
            eta = etas[i] + etas[i - 1]
            if w <= eta:
                continue
            dist[0] = xa
            dist[1] = xa - mu
            al[0] = dist[0] * w
            al[1] = dist[1] * w
            tlo, thi = _t_bounds(al, 2, w, eta, dist)
            s_a = s_lo[i - 1]
            s_b = s_hi[i]
            w_lo = max(w - eta, 0.0)
            # convex: the chord is above (r <= E[s]); the end tangents are below
            lo = max(0.0, s_a * w_lo * tlo / d if s_a > 0.0 else 0.0,
                     1.0 - s_b * (w + eta) * (1.0 - tlo) / d)
            rlo[i] = max(lo - 1e-12, 0.0)
            rhi[i] = min(max(thi + 1e-12, rlo[i]), 1.0)
    return rlo, rhi


def gaussian_loss_offsets(edges: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray]:
    """Offset bounds for L ~ N(mu^2/2, mu^2): L = mu z + mu^2/2 is linear in z ~ N(0, 1), so r = E[s]."""
    e = check_edges(edges)
    z = (e - 0.5 * mu * mu) / mu
    dz = 2.0 * U * (np.abs(e) + 0.5 * mu * mu) / mu + 2.0 * U * np.abs(z)
    return _gauss_offsets(z, dz)


@njit(cache=True)
def _gauss_offsets(z, dz):  # pragma: no cover - compiled
    n = z.shape[0]
    rlo = np.zeros(n + 1)
    rhi = np.ones(n + 1)
    al = np.empty(1)
    dist = np.empty(1)
    for i in range(1, n):
        w = z[i] - z[i - 1]
        eta = dz[i] + dz[i - 1]
        if w <= eta:
            continue
        dist[0] = z[i - 1]
        al[0] = dist[0] * w
        rlo[i], rhi[i] = _t_bounds(al, 1, w, eta, dist)
    return rlo, rhi
