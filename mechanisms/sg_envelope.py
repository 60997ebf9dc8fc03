"""The decay envelope of the subsampled Gaussian (and of its split parts) for the characteristic-function
route: t -> log of a bound on |M(c + it')| for every |t'| >= t, the truncation bound of the contour.

The bound (documented in :mod:`mechanisms.subsampled`) combines, on the e^{cL}-tilted loss law:
TV / |t| (integration by parts), the curvature bands 1 - 2 t^2 V(pi / t) / pi^2 from the tilted loss
histogram, the split bound m_k + C_k / |t| at outputs x_k (near-atomic laws), and the contour-shift
bound int e^{A_y - t B_y} dx (the integrand moved to Im x = y inside its strip of analyticity, where
the phase turns into decay: :func:`_shift_bound`).  The constants come from the kernels of
:mod:`mechanisms._sg_envelope_kernels`.
"""

from __future__ import annotations

import math

import numpy as np

from ._numerics import log_expm1_float
from ._sg_envelope_kernels import (
    sg_env_range,
    sg_envelope_constants,
    sg_loss_histogram,
    sg_shift_arrays,
    sg_shift_bound,
)


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


def envelope_mass_margin(c: float, q: float, mu: float, add: bool, dx: float, xcut: float, tau: float,
                         part: int, log_mc: float) -> float:
    """What the envelope adds to its log M(c) (the bound's flat part, |M(c + it)| <= M(c)): the rounding
    of the grid sum, n - 1 additions of positive terms (relative (n + 8) u, doubled) over the n points
    of the envelope's x-range at step dx, and of log M itself (8 u |log M|).  Without it M(c) came out
    up to 6e-14 (relative) below mpmath's value, and one ulp below at log M ~ 3e4."""
    lo, hi = sg_env_range(c, q, mu, add, xcut, tau, part)
    return 2.0 * 2.0**-53 * ((hi - lo) / dx + 8.0) + 8.0 * 2.0**-53 * abs(log_mc)


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
    log_mc += envelope_mass_margin(c, q, mu, add, dx, xcut, tau, part, log_mc)
    split = _split_bound(cuts, total)
    if not math.isfinite(tv_norm):
        # the loss density's total variation overflowed (tiny sigma: the density in the loss variable
        # exceeds e^700 near log(1 - q)); keep the split bound (the spike on its mass side), else only
        # the trivial bound |M(c + it)| <= M(c)
        if split is None:
            return _with_shift(lambda t: log_mc, log_mc, SHIFT_T_MIN, c, q, mu, add, xcut, tau, part)
        return _with_shift(lambda t: log_mc + math.log(min(1.0, split(abs(t))) + 1e-300), log_mc,
                           SHIFT_T_MIN, c, q, mu, add, xcut, tau, part)
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

    # the shift only past the curvature regime (t >= t_max): before it the bands serve compositions of
    # many steps (a query at T = 1e5 spent 18 ms on shift bounds that changed nothing), while few steps
    # (a split's remainder: one big step) need decay far out, where only TV / t was left
    return _with_shift(env, log_mc, max(SHIFT_T_MIN, t_max), c, q, mu, add, xcut, tau, part)


#: shifts of the contour-shift bound: |y| = y_max 2^(-0.6 j), j < SHIFT_ROWS (a factor ~8 between the ends)
SHIFT_ROWS = 6
#: the contour-shift bound is evaluated for t >= this (below it the curvature bands are tight) ...
SHIFT_T_MIN = 32.0
#: ... and built (~2 ms) only once the other bounds leave log(|M| / M(c)) above -SHIFT_NEED: one
#: factor decaying that far suffices for any target (a split's remainder needs its big part's decay
#: alone), while the other bounds already serve compositions of many steps at small t
SHIFT_NEED = 30.0
#: the last grid point t = SHIFT_T_MIN 2^(SHIFT_GRID_MAX / 2) (~3.5e19) at which it is evaluated
SHIFT_GRID_MAX = 120


def _shift_dx(mu: float, tau: float | None) -> float:
    """The contour-shift bound's grid step (resolves the loss's bend, scale 1 / mu, and the weight's
    edge, scale tau; the rows that the grid does not resolve at a large t are dropped there)."""
    return min(0.02, 0.2 / mu) if tau is None else min(0.02, 0.2 / mu, tau / 8.0)


def shift_cost(width: float, mu: float, tau: float | None = None) -> float:
    """Work of the contour-shift bound on an x-range ``width`` wide (unit of the mechanisms' ``mgf_cost``,
    ~ an exp, a log and a cos/sin): ``SHIFT_ROWS`` x n complex logs (a unit each) and, per t grid point
    (two per octave, ~22 from SHIFT_T_MIN up to t = 1e4), two light passes over the rows (~0.1 unit per
    point; measured ~2 ns, with a unit ~70 ns)."""
    n = min(width / _shift_dx(mu, tau) + 1.0, float(1 << 15))
    return SHIFT_ROWS * n * (1.0 + 0.1 * 22.0)


def _shift_bound(c: float, q: float, mu: float, add: bool, xcut: float, tau: float, part: int):
    """t -> log of a bound on |M(c + it')| for every t' >= t by moving the x-integral of M into the
    complex plane (:func:`mechanisms._sg_envelope_kernels.sg_shift_arrays`): on the line Im x = y
    the factor e^{i t l(x)} becomes e^{-t |Im l(x + iy)|}, a decay with t, where the other bounds
    fall like 1/t at best.  Evaluated on the grid t_i = SHIFT_T_MIN 2^(i/2), i = 0, 1, ... in order: the
    bound at t is the smallest value at the grid points at or below t (each holds for every t' >= its
    own t_i), so it is non-increasing in t; +inf below ``SHIFT_T_MIN``.

    Shifts: remove y in (0, 0.95 pi / mu] (inside the strip of analyticity of l); add y in
    [-pi / (2 mu), 0) (where Re l(x + iy) >= log(1 - q), so the add tilt e^{-c Re l} stays bounded);
    both |y| <= sqrt(40) and, for a split part, |y| <= tau sqrt(40) (the Gaussian and the weight grow
    by at most e^{y^2/2} and e^{y^2 / (2 tau^2)} off the real line, so the envelope's x-range, where the
    real integrand is above e^-120 of its peak, still holds everything that matters)."""
    lo, hi = sg_env_range(c, q, mu, add, xcut, tau, part)
    dx = _shift_dx(mu, tau if part >= 0 else None)
    n = int(math.ceil((hi - lo) / dx)) + 1
    if n > 1 << 15:  # (bounded work: a coarser grid only lets fewer rows pass the resolution rule)
        n = 1 << 15
        dx = (hi - lo) / (n - 1)
    y_max = min((0.5 if add else 0.95) * math.pi / mu, math.sqrt(40.0))
    if part >= 0:
        y_max = min(y_max, tau * math.sqrt(40.0))
    ys = y_max * 2.0 ** (-0.6 * np.arange(SHIFT_ROWS))
    if add:
        ys = -ys
    a, b = np.empty((SHIFT_ROWS, n)), np.empty((SHIFT_ROWS, n))
    sg_shift_arrays(c, q, mu, add, xcut, tau, part, lo, dx, ys, a, b)
    cum: list[float] = []  # cum[i]: min of the bound over the grid points t_0..t_i (each holds past t_i)

    def bound(t: float) -> float:
        t = abs(t)
        if not t >= SHIFT_T_MIN:
            return math.inf
        if t >= SHIFT_T_MIN * 2.0 ** (SHIFT_GRID_MAX / 2.0):  # (also t = inf: the last grid point's
            k = SHIFT_GRID_MAX  # value holds there too, and the walk stays bounded)
        else:
            k = math.floor(2.0 * math.log2(t / SHIFT_T_MIN))
            if SHIFT_T_MIN * 2.0 ** (k / 2.0) > t:  # (the grid point at or below t)
                k -= 1
        while len(cum) <= k:  # a row the resolution rule drops at a larger t keeps its earlier value
            i = len(cum)
            v = float(sg_shift_bound(SHIFT_T_MIN * 2.0 ** (i / 2.0), a, b, dx))
            cum.append(min(v, cum[-1]) if cum else v)
        return cum[k]

    return bound


def _with_shift(env, log_mc: float, t_gate: float, c: float, q: float, mu: float, add: bool, xcut: float,
                tau: float, part: int):
    """``env`` and the contour-shift bound, the smaller; the latter is built on the first call at
    t >= ``t_gate`` where ``env`` has not decayed by ``SHIFT_NEED`` and used from then on (both bounds
    hold for every t' >= t, so either, and their minimum, is valid at every call)."""
    state: list = []

    def both(t: float) -> float:
        base = env(t)
        if abs(t) < t_gate:
            return base
        if not state:
            if base - log_mc <= -SHIFT_NEED:
                return base
            state.append(_shift_bound(c, q, mu, add, xcut, tau, part))
        return min(base, state[0](t))

    return both
