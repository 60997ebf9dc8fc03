"""The decay envelope of the subsampled Gaussian (and of its split parts) for the characteristic-function
route: t -> log of a bound on |M(c + it')| for every |t'| >= t, the truncation bound of the contour.

The bound (documented in :mod:`mechanisms.subsampled`) combines, on the e^{cL}-tilted loss law:
TV / |t| (integration by parts), the curvature bands 1 - 2 t^2 V(pi / t) / pi^2 from the tilted loss
histogram, and the split bound m_k + C_k / |t| at outputs x_k (near-atomic laws).  The constants come
from the kernels of :mod:`mechanisms._sg_envelope_kernels`.
"""

from __future__ import annotations

import math

import numpy as np

from ._numerics import log_expm1_float
from ._sg_envelope_kernels import sg_envelope_constants, sg_loss_histogram


def _curvature_bands(u_min: float, b: float, hist: np.ndarray, total: float,
                     t_max: float) -> tuple[np.ndarray, np.ndarray]:
    """Band edges t_0 < ... < t_K = t_max and V_k <= E[(X - X')^2; |X - X'| <= pi / t_k] (X, X' iid).

    From a histogram with bin width b whose masses lie inside their bins (the envelope kernels' walk is
    aligned to the bins): a pair of bins at index distance d is at distance in [(d - 1) b, (d + 1) b],
    so V(r) >= 2 sum_{2 <= d, (d + 1) b <= r} ((d - 1) b)^2 P(d) with P the autocorrelation of the
    normalised masses (FFT; its rounding error is subtracted).  V_k holds for
    every t <= t_k; band 0 (t <= t_0) covers all pairs.
    """
    n = hist.size
    p = hist / max(total, float(hist.sum()), 1e-300)
    f = np.fft.rfft(p, 2 * n)
    ac = np.fft.irfft(f * np.conj(f), 2 * n)[:n]
    ac = np.maximum(ac - 1e-13 * math.log2(2 * n), 0.0)
    d = np.arange(n, dtype=float)
    w = np.where(d >= 2, ((d - 1.0) * b) ** 2, 0.0)
    cum = 2.0 * np.cumsum(w * ac)
    t_full = math.pi / ((n + 1) * b)  # r = pi / t_full covers every pair
    edges = [t_max]
    while edges[-1] > t_full and len(edges) < 80:
        edges.append(edges[-1] / math.sqrt(2.0))
    edges = np.array(edges[::-1])
    dmax = np.floor(math.pi / edges / b) - 1.0
    idx = np.minimum(dmax, n - 1).astype(np.int64)
    v = np.where(dmax >= 2, cum[np.maximum(idx, 0)], 0.0)
    return edges, v


def _x_of_loss(ell: float, q: float, mu: float) -> float:
    """The output x with l(x) = ell, l(x) = log(1 - q + q e^{mu x - mu^2/2}) (increasing; -inf at or
    below log(1 - q))."""
    l1q = math.log1p(-q)
    d = ell - l1q
    if not d > 0.0:
        return -math.inf
    y = l1q + log_expm1_float(d) - math.log(q)
    return y / mu + mu / 2.0


def _bulk_window(u_min: float, b: float, hist: np.ndarray, total: float) -> tuple[float, float] | None:
    """[u_lo, u_hi] around the 0.5 %..99.5 % quantiles of a histogram's mass (one bin of margin), when that
    window spans at most 1/64 of the histogram (else None: the histogram resolves the bulk already)."""
    tot = float(hist.sum())
    if not tot > 0.0:
        return None
    cum = np.cumsum(hist) / tot
    k_lo = int(np.searchsorted(cum, 0.005))
    k_hi = int(np.searchsorted(cum, 0.995))
    if k_hi - k_lo + 3 > hist.size // 64:
        return None
    return u_min + (k_lo - 1) * b, u_min + (k_hi + 2) * b


def _merge_bands(e1: np.ndarray, v1: np.ndarray, e2: np.ndarray,
                 v2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bands of two ``_curvature_bands`` results (both ending at the same t_max) merged: on every band of
    the union of the edges, the larger of the two lower bounds valid at its right end (V(pi / t) is
    non-increasing in t, and each result's V_k holds for every t <= its own t_k)."""
    edges = np.union1d(e1, e2)

    def at(e: np.ndarray, v: np.ndarray) -> np.ndarray:
        k = np.searchsorted(e, edges)
        return np.where(k < e.size, v[np.minimum(k, e.size - 1)], 0.0)

    return edges, np.maximum(at(e1, v1), at(e2, v2))


#: outputs x_k at which the envelope's split bound is evaluated (evenly over the envelope's x-grid)
SPLIT_CUTS = 256


def _split_bound(cuts: np.ndarray, mass: float):
    """t -> min over the split points x_k and both sides of m_k + C_k / t: a bound on |M(c + it')| / M(c)
    for every |t'| >= t (each term falls with t').

    For the tilted law split at x_k, the part on one side has |int| <= its mass m_k, and the other
    side's integral, by parts in the loss variable u (f -> 0 at its far end), is at most
    (f(x_k) + TV of f on that side) / |t| = C_k / |t|.  Margins as for the other constants of the
    envelope: the mass on the integrated side is taken 10 % smaller (m_k = 1 - 0.9 (1 - mass_k), with
    a grid cell of extra mass already in mass_k) and C_k 10 % larger."""
    m = np.concatenate([cuts[:, 0], cuts[:, 2]]) / mass
    with np.errstate(invalid="ignore", over="ignore"):
        k = 1.1 * np.concatenate([cuts[:, 1], cuts[:, 3]]) / mass
    m = 1.0 - 0.9 * (1.0 - np.minimum(m, 1.0))
    ok = np.isfinite(m) & np.isfinite(k) & (m < 1.0)
    m, k = m[ok], k[ok]
    if m.size == 0:
        return None

    def bound(t: float) -> float:
        return float(np.min(m + k / t)) if t > 0.0 else 1.0

    return bound


def sg_envelope(c: float, q: float, mu: float, add: bool, dx: float, xcut: float = 0.0, tau: float = 1.0,
                part: int = -1):
    """t -> log of a bound on |M(c + it')| for all |t'| >= t, for the subsampled Gaussian (0 < q < 1) or,
    with ``part`` >= 0, for one part of its split P-measure (see :class:`SubsampledGaussian`'s
    ``log_envelope_fn`` for the bound; the same construction on the part's weighted density): the
    smaller of the TV / curvature-band bound and the split bound (:func:`_split_bound`, which keeps
    a near-atomic law's bound below 1 where the bands' resolution and TV / t both fail)."""
    hist = np.zeros(1 << 13)
    cuts = np.zeros((SPLIT_CUTS, 4))
    log_mc, tv_norm, v_fine, gmax, total, u_min, b, x_first, x_last = sg_envelope_constants(
        c, q, mu, add, dx, xcut, tau, part, np.zeros(1 << 14), hist, cuts)
    split = _split_bound(cuts, total)
    if not math.isfinite(tv_norm):
        # the loss density's total variation overflowed (tiny sigma: the density in the loss variable
        # exceeds e^700 near log(1 - q)); keep the split bound (the spike on its mass side), else only
        # the trivial bound |M(c + it)| <= M(c)
        if split is None:
            return lambda t: log_mc
        return lambda t: log_mc + math.log(min(1.0, split(abs(t))) + 1e-300)
    if not math.isfinite(v_fine):
        v_fine = 0.0  # V >= 0 always holds (a smaller V only weakens the bound)
    tv_norm *= 1.1
    t_max = 2.0 * tv_norm / 1.1
    edges, v_band = _curvature_bands(u_min, b, hist, total, t_max)
    if part >= 0:
        # a split part's tilted law can hold its bulk in a few bins of the full-range histogram (a
        # narrow core next to a tail reaching the cut): a second, fine histogram over the bulk's window
        # (pairs outside it dropped, which only lowers V) resolves it; per band the larger V holds
        window = _bulk_window(u_min, b, hist, total)
        if window is not None:
            # walk only the outputs x whose loss falls in the window (the loss is monotone in x)
            xs = sorted(_x_of_loss(-u if add else u, q, mu) for u in window)
            x_a, x_b = max(x_first, xs[0] - dx), min(x_last, xs[1] + dx)
            if x_a < x_b:
                fine = np.zeros(1 << 13)
                b_fine = sg_loss_histogram(c, q, mu, add, dx, gmax, *window, x_a, x_b, xcut, tau, part, fine)
                edges, v_band = _merge_bands(edges, v_band,
                                             *_curvature_bands(window[0], b_fine, fine, total, t_max))
    v_band = 0.9 * np.maximum(v_band, v_fine)
    with np.errstate(over="ignore", invalid="ignore"):  # t^2 V beyond float range: near bound 0
        curv = np.where(v_band > 0.0, np.r_[0.0, edges[:-1]] ** 2 * v_band, 0.0)
    near_at = np.sqrt(np.maximum(0.0, 1.0 - 2.0 * curv / math.pi**2))
    far_cap = tv_norm / t_max
    if split is not None:
        # per band, the smaller of the curvature bound and the split bound at the band's left end (both
        # hold for every t' in the band); past t_max the split bound at t_max caps TV / t'
        left = np.r_[0.0, edges[:-1]]
        near_at = np.minimum(near_at, [split(t) for t in left])
        far_cap = min(far_cap, split(t_max))
    # suffix maxima of the bands' left-end values (the sup of near over t' >= the band's start)
    suffix = np.maximum.accumulate(near_at[::-1])[::-1]

    def env(t: float) -> float:
        t = abs(t)
        if t >= t_max:
            val = tv_norm / t if split is None else min(tv_norm / t, split(t))
        else:
            k = int(np.searchsorted(edges, t))  # band k: (edges[k-1], edges[k]]
            near = math.sqrt(max(0.0, 1.0 - 2.0 * t * t * v_band[k] / math.pi**2))
            if split is not None:
                near = min(near, split(t))
            later = suffix[k + 1] if k + 1 < suffix.size else 0.0
            val = max(near, later, far_cap)
        return log_mc + math.log(min(1.0, val) + 1e-300)

    return env
