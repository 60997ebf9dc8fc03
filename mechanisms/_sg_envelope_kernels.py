"""numba kernels of the subsampled Gaussian's decay envelope
(:meth:`mechanisms.subsampled.SubsampledGaussian.log_envelope_fn`): the constants of the rigorous bound
on |M(c + it)| and the tilted loss histogram behind its bands.

The math is documented in :mod:`mechanisms.subsampled`; compile-cost rules as in
:mod:`mechanisms._poisson_kernels`."""

from __future__ import annotations

import cmath
import math

import numpy as np
from numba import njit

from ._numerics import log_expm1_scalar as _log_expm1
from ._poisson_kernels import _HELPER, _add_peak, _ell, _weighted_window, split_log_weight

_CACHE_POINTS = 1 << 22  # grid points whose per-point values the envelope constants keep (3 x 32 MB)


@njit(cache=True)
def sg_envelope_constants(c, q, mu, add, dx, xcut, tau, part, bins, hist, cuts,
                          cache_points=_CACHE_POINTS):  # pragma: no cover - compiled
    """Constants of a rigorous decay bound on |M(c + it)| / M(c) for the subsampled Gaussian, and the
    histogram of the tilted loss law behind its curvature bands.

    Returns (log M(c), TV, V, gmax, mass, u_lo, b, x_first, x_last) where, with nu the e^{cL}-tilted
    loss law normalised to mass 1,
    * TV = total variation of the tilted density (un-normalised), so |M(c+it)| <= TV / |t|;
    * V = a lower bound on E[(X - X')^2; |X - X'| <= r] for X, X' iid ~ nu, with r = pi / t_max and
      t_max = 2 TV / M(c); since 1 - cos y >= 2 y^2 / pi^2 on |y| <= pi,
      |M(c+it)|^2 / M(c)^2 = E cos(t (X - X')) <= 1 - 2 t^2 V / pi^2 for |t| <= t_max;
    * ``hist`` (zeros on entry) receives the tilted loss law on its length of equal bins of width b
      from u_lo (:func:`_loss_histogram` over [u_lo, u_hi] and [x_first, x_last], the loss and x ranges
      where the tilted density exceeds e^{-40} of its maximum ``gmax``); ``mass`` (same scale) is its
      normaliser.
    Mass and TV come from a fine trapezoid grid of step ``dx`` (the caller applies safety factors);
    ``bins`` (zeros on entry) is the work array of the fine bins of V, filled like ``hist`` by the
    bin-aligned walk of :func:`_loss_histogram` (every mass inside its bin).
    ``cuts`` (shape (K, 4)) receives the constants of the split bound at K outputs x_k spread evenly
    over the grid (:func:`_split_cuts`, same scale as ``mass``): splitting the tilted law at x_k into a
    part bounded by its mass and a part bounded by integration by parts,
    |M(c + it)| <= mass(one side of x_k) + (f(x_k) + TV of f on the other side) / |t|
    (f: the tilted density in the loss variable), for both sides; it holds where the whole TV is
    infinite (the density's spike near log(1 - q) at tiny sigma lies on the mass side).  When TV is not
    finite the histogram is not built (the caller keeps the split bound only).  ``part`` >= 0: the same
    for the split part's weighted density (``sg_log_mgf``); ``part`` = -1: no split.  Grids of at most
    ``cache_points`` points keep their per-point values between the passes (the same results bit for
    bit; a test compares both paths).

    The x-grid: the log density at x is -x^2/2 - log sqrt(2 pi) + w l(x) (+ the split weight) with
    w = c + 1 (remove) or -c (add), on lo + i dx, i = 0..m.
    """
    lq = math.log(q)
    l1q = math.log1p(-q)
    half_log_2pi = 0.5 * math.log(2.0 * math.pi)
    wr = -c if add else c + 1.0
    lo, hi = _env_range(c, q, mu, add, xcut, tau, part, lq, l1q)
    m = math.ceil((hi - lo) / dx)
    # the passes below walk the same grid; within _CACHE_POINTS the per-point loss and log density of
    # pass 1 (and the density of pass 2) are kept, so later passes repeat no transcendental (each value
    # is the one the streaming expression gives, bit for bit)
    cached = m + 1 <= cache_points
    n_cache = m + 1 if cached else 1
    ell_c = np.empty(n_cache)
    base_c = np.empty(n_cache)  # -x^2/2 - log sqrt(2 pi) + wr l(x); after pass 2 the density g
    sw_c = np.empty(n_cache if part >= 0 and cached else 1)
    gmax = -np.inf
    for i in range(m + 1):
        x = lo + i * dx
        ell = _ell(x, q, mu, lq, l1q)
        base = -0.5 * x * x - half_log_2pi + wr * ell
        sw = split_log_weight(x, xcut, tau, part)
        lg = base + sw
        if cached:
            ell_c[i] = ell
            base_c[i] = base
            if part >= 0:
                sw_c[i] = sw
        if lg > gmax:
            gmax = lg
    # pass 2: mass and TV of the density in the loss variable, and the range that matters
    mass = 0.0
    tv = 0.0
    prev = 0.0
    # the split bound's constants at every ``stride``-th point (slot k = i // stride): the mass before
    # the point, the density g and f there, and the TV of f since the previous slot's point
    n_cuts = cuts.shape[0]
    stride = max(1, (m + n_cuts) // n_cuts)
    seg_tv = 0.0
    f_first = 0.0
    u_lo = np.inf
    u_hi = -np.inf
    x_first = hi
    x_last = lo
    for i in range(m + 1):
        x = lo + i * dx
        if cached:
            ell = ell_c[i]
            lg = base_c[i] - gmax + (sw_c[i] if part >= 0 else 0.0)
        else:
            ell = _ell(x, q, mu, lq, l1q)
            lg = -0.5 * x * x - half_log_2pi + wr * ell - gmax + split_log_weight(x, xcut, tau, part)
        g = math.exp(lg)
        if cached:
            base_c[i] = g
        mass += g * dx
        if lg > -40.0:
            u = -ell if add else ell
            if u < u_lo:
                u_lo = u
            if u > u_hi:
                u_hi = u
            if x < x_first:
                x_first = x
            if x > x_last:
                x_last = x
        y = lq + mu * x - 0.5 * mu * mu
        log_lp = math.log(mu) - math.log1p(math.exp(l1q - y)) if y > l1q - 700 else math.log(mu) + y - l1q
        lf = lg - log_lp
        f = math.exp(lf) if lf < 700 else np.inf
        if i > 0:
            tv += abs(f - prev)
            seg_tv += abs(f - prev)
        else:
            f_first = f
        prev = f
        if i % stride == 0 and i // stride < n_cuts:
            k = i // stride
            cuts[k, 0] = mass - g * dx  # (mass already holds this point's cell)
            cuts[k, 1] = seg_tv
            cuts[k, 2] = f
            cuts[k, 3] = g
            seg_tv = 0.0
    tv += prev
    _split_cuts(cuts, m // stride + 1, mass, dx, f_first, seg_tv + prev)
    log_mc = gmax + math.log(mass)
    tv_norm = tv / mass  # TV / M(c)
    if not math.isfinite(tv_norm):
        return log_mc, tv_norm, 0.0, gmax, mass, u_lo, 1.0, x_first, x_last
    t_max = 2.0 * tv_norm
    r = math.pi / t_max
    # bins of width r/64 in a window around the median loss (dropping pairs only lowers V)
    nbins = bins.shape[0]
    cum = 0.0
    umed = 0.0
    for i in range(m + 1):
        if cached:
            ell = ell_c[i]
            cum += base_c[i] * dx
        else:
            x = lo + i * dx
            ell = _ell(x, q, mu, lq, l1q)
            cum += math.exp(-0.5 * x * x - half_log_2pi + wr * ell - gmax
                            + split_log_weight(x, xcut, tau, part)) * dx
        if cum >= 0.5 * mass:
            umed = -ell if add else ell
            break
    b = r / 64.0
    umin = umed - 0.5 * nbins * b
    # the bins' masses by the bin-aligned walk (each mass inside its bin; the grid's nodes would stand
    # for cells whose loss can spread over several bins of this width)
    _loss_histogram(c, q, mu, add, dx, gmax, umin, umin + nbins * b, x_first, x_last, xcut, tau, part, bins)
    bins /= mass
    # V >= sum over bin pairs at index distance d with (d + 1) b <= r of ((d - 1) b)^2 m_i m_j
    first = 0
    while first < nbins and bins[first] == 0.0:
        first += 1
    last = nbins - 1
    while last > first and bins[last] == 0.0:
        last -= 1
    # (one accumulator per distance, each summed in increasing i as a loop over i per d would, so the
    # same bits; the zero padding past ``last`` adds +0.0 to non-negative sums; the inner loop over d
    # has no carried dependence and vectorises: ~4x faster)
    n_used = last - first + 1
    padded = np.zeros(n_used + 64)
    padded[:n_used] = bins[first:last + 1]
    accs = np.zeros(64)
    for i in range(n_used):
        bi = padded[i]
        for d in range(2, 64):
            accs[d] += bi * padded[i + d]
    v = 0.0
    for d in range(2, 64):
        v += 2.0 * accs[d] * ((d - 1) * b) ** 2
    bh = _loss_histogram(c, q, mu, add, dx, gmax, u_lo, u_hi, x_first, x_last, xcut, tau, part, hist)
    return log_mc, tv_norm, v, gmax, mass, u_lo, bh, x_first, x_last


@njit(**_HELPER)
def _env_range(c, q, mu, add, xcut, tau, part, lq, l1q):  # pragma: no cover - compiled
    """The x-range [lo, hi] the envelope's grids cover: around the add peak (the log density is concave
    with curvature <= -1, so the mass lies within a few units of it), or [-(16 + w mu) - 2 mu,
    16 + w mu + 3 mu] for remove (w = c + 1); for a split part, the weighted density's window (as in
    ``sg_log_mgf``, with room for the e^-40 ranges)."""
    wr = -c if add else c + 1.0
    if add:
        xp = _add_peak(c, q, mu, lq, l1q)
        lo = xp - 16.0 - 2.0 * mu
        hi = xp + 16.0 + 3.0 * mu
    else:
        reach = 16.0 + abs(wr) * mu
        lo = -reach - 2.0 * mu
        hi = reach + 3.0 * mu
    if part >= 0:
        _, lo, hi = _weighted_window(wr, q, mu, lq, l1q, lo if lo < xcut - 1.0 else xcut - 1.0,
                                     hi if hi > xcut + 1.0 else xcut + 1.0, xcut, tau, part, 120.0)
    return lo, hi


@njit(cache=True)
def sg_env_range(c, q, mu, add, xcut, tau, part):  # pragma: no cover - compiled
    """:func:`_env_range` callable from Python (the shift bound's grid)."""
    return _env_range(c, q, mu, add, xcut, tau, part, math.log(q), math.log1p(-q))


@njit(cache=True)
def sg_shift_arrays(c, q, mu, add, xcut, tau, part, lo, dx, ys, a_out, b_out):  # pragma: no cover - compiled
    """The shifted-line integrand of the contour-shift bound (:func:`sg_shift_bound`) on the grid
    lo + i dx, i < a_out.shape[1] (the envelope's x-range, :func:`sg_env_range`), for each shift y in
    ``ys`` (0 < |y| < pi / mu; y > 0 for remove, y < 0 for add).

    The integrand F(z) = phi(z) e^{w l(z)} W(z) of M(s) (w = s + 1 or -s, l(z) = log(1 - q + q
    e^{mu z - mu^2/2}), W the split weight) is analytic in the strip |Im z| < pi / mu (there
    1 - q + q e^{...} stays off the negative axis, so the principal log is continuous) and decays
    like phi along it, so M(s) = int F(x + iy) dx and |M(c + it)| <= int e^{A_y(x) - t B_y(x)} dx with
        A_y(x) = -x^2/2 + y^2/2 - log sqrt(2 pi) + Re(w) Re l(x + iy) + log bound on |W(x + iy)|,
        B_y(x) = |Im l(x + iy)| (>= 0: Im l has the sign of y, and Im w = t or -t),
    written to a_out[j] and b_out[j].  The weight W(x) = Phi(u(x)) with u = (xcut - x) / tau (core) or
    (x - xcut) / tau (big) is bounded along the horizontal path: Phi(u + iv) = int_{-inf}^{u} phi(r + iv)
    dr and |phi(r + iv)| = phi(r) e^{v^2/2}, so |W(x + iy)| <= e^{y^2 / (2 tau^2)} Phi(u).
    """
    lq = math.log(q)
    l1q = math.log1p(-q)
    half_log_2pi = 0.5 * math.log(2.0 * math.pi)
    wr = -c if add else c + 1.0
    n = a_out.shape[1]
    for j in range(ys.shape[0]):
        y = ys[j]
        rot = complex(math.cos(mu * y), math.sin(mu * y))
        for i in range(n):
            x = lo + i * dx
            a = lq + mu * x - 0.5 * mu * mu
            m = a if a > l1q else l1q
            lz = m + cmath.log(math.exp(l1q - m) + math.exp(a - m) * rot)
            f = -0.5 * x * x + 0.5 * y * y - half_log_2pi + wr * lz.real
            if part >= 0:  # (split_log_weight: log Phi(u), or 0 >= it where Phi(u) > 1 - 1e-19)
                f += 0.5 * (y / tau) ** 2 + split_log_weight(x, xcut, tau, part)
            a_out[j, i] = f
            b_out[j, i] = abs(lz.imag)


@njit(cache=True)
def sg_shift_bound(t, a, b, dx):  # pragma: no cover - compiled
    """log of the contour-shift bound on |M(c + it')| for every t' >= t (each e^{-t B} falls with t):
    min over the rows y of log(1.1 x trapezoid of e^{A_y - t B_y}) (:func:`sg_shift_arrays`).

    A row counts only where the grid resolves its integrand g = e^{A - t B}: the second difference of
    log g at most 0.2 wherever g is within e^-30 of its maximum (peaks at least ~2 steps wide).  The
    trapezoid rule's error, -dx^2/12 int g'' with g'' = g ((log g)'' + (log g)'^2), can only be negative
    through the curvature term, which is then at most 0.2 / 12 < 2 % of the integral (the slopes only
    make it overestimate); the factor 1.1 is the envelope's margin for grid quantities.  Points more
    than 60 below the maximum count as e^-60 of it.  A row with a NaN anywhere is dropped (never read
    as a small point).  +inf when no row qualifies."""
    best = np.inf
    n = a.shape[1]
    for j in range(a.shape[0]):
        mx = -np.inf
        nan = False
        for i in range(n):
            v = a[j, i] - t * b[j, i]
            if v > mx:
                mx = v
            elif v != v:
                nan = True
        if nan or not math.isfinite(mx):
            continue
        acc = 0.0
        ok = True
        prev = 0.0
        prev2 = 0.0
        for i in range(n):
            v = a[j, i] - t * b[j, i]
            if i > 1 and max(v, prev, prev2) > mx - 30.0 and abs(v - 2.0 * prev + prev2) > 0.2:
                ok = False
                break
            e = math.exp(v - mx) if v > mx - 60.0 else 8.8e-27  # (e^-60 rounded up)
            acc += 0.5 * e if (i == 0 or i == n - 1) else e
            prev2 = prev
            prev = v
        if ok:
            val = mx + math.log(1.1 * acc * dx)
            if val < best:
                best = val
    return best


@njit(**_HELPER)
def _split_cuts(cuts, n, mass, dx, f_first, tail_tv):  # pragma: no cover - compiled
    """Turn the per-slot records of :func:`sg_envelope_constants` (rows 0..n-1: mass before x_k, TV of
    f since the previous slot, f(x_k), g(x_k)) into the split bound's constants, in place:
    (mass of x <= x_k, f(x_k) + TV of f on x >= x_k, mass of x >= x_k, f(x_k) + TV of f on x <= x_k),
    the masses with one cell g(x_k) dx of margin.  ``tail_tv``: the TV after the last slot including
    the closing f(x_end) (f -> 0 past the grid); ``f_first``: f at the grid's start.  Rows from n on
    (no slot) get the trivial constants (mass, inf, mass, inf).  A TV term is infinite only where
    its side holds an infinite f (an overflowed spike), never NaN."""
    n = min(n, cuts.shape[0])
    seg = cuts[:n, 1].copy()
    f = cuts[:n, 2].copy()
    suffix = tail_tv  # TV of f on x >= x_k: the segments after slot k and the tail (an infinite
    for k in range(n - 1, -1, -1):  # spike only reaches the sums over its own side, never a NaN)
        cuts[k, 1] = f[k] + suffix
        suffix += seg[k]
    prefix = f_first  # TV of f on x <= x_k: the start's jump and the segments up to slot k
    for k in range(n):
        prefix += seg[k]
        below, g = cuts[k, 0], cuts[k, 3]
        cuts[k, 0] = below + 2.0 * g * dx
        cuts[k, 2] = mass - below + g * dx
        cuts[k, 3] = f[k] + prefix
    for k in range(n, cuts.shape[0]):
        cuts[k, 0] = mass
        cuts[k, 1] = np.inf
        cuts[k, 2] = mass
        cuts[k, 3] = np.inf


@njit(**_HELPER)
def _x_of_u(u, add, q, mu, lq, l1q):  # pragma: no cover - compiled
    """The output x where the loss (remove) or its negative (add) equals u: l(x) = log(1 - q + q e^{mu x -
    mu^2/2}) inverted (-inf where l <= log(1 - q), which the loss never reaches)."""
    d = (-u if add else u) - l1q
    if not d > 0.0:
        return -np.inf
    return (l1q + _log_expm1(d) - lq) / mu + 0.5 * mu


@njit(**_HELPER)
def _loss_histogram(c, q, mu, add, dx, gmax, umin, umax, x_first, x_last, xcut, tau, part, hist):
    # pragma: no cover - compiled
    """Histogram of the e^{cL}-tilted loss law of the subsampled Gaussian (or of a split part, ``part``
    >= 0) on len(hist) equal bins of [umin, umax], added to ``hist``; returns the bin width b (1 when
    the range is empty).

    Takes the scale ``gmax`` and x range [x_first, x_last] of :func:`sg_envelope_constants` (same c, q,
    mu, add, dx): u = the loss (remove) or its negative (add), monotone in x.  The walk is aligned to
    the bins: the x-interval whose loss falls in bin k runs between the pre-images of the bin's edges
    (closed form, :func:`_x_of_u`), and its mass (trapezoid rule on at most ``dx`` wide cells; at a
    pre-image the loss is the edge's value, so its density costs one exp) goes to bin k only: every mass
    lies inside its bin, the premise of the curvature bands (pairs of bins at index distance d are
    (d - 1) b to (d + 1) b apart).  Densities below e^{-40} of ``gmax`` count as 0 (dropping mass only
    lowers the curvature bound built on it); the pre-images' rounding (~1 ulp of x) and the trapezoid
    rule's error (relative ~dx^2 |g''/g| / 12 per cell) are far inside the 10 % margin the caller takes
    on V.
    """
    lq = math.log(q)
    l1q = math.log1p(-q)
    half_log_2pi = 0.5 * math.log(2.0 * math.pi)
    wr = -c if add else c + 1.0
    nb = hist.shape[0]
    b = (umax - umin) / nb
    if not b > 0.0:
        return 1.0
    # walk the x-range where the tilted density matters (+- one grid step) in increasing x; u increases
    # with x (remove) or decreases (add), so the bins are met in order k = k0, k0 + step, ...
    x = x_first - dx
    x_end = x_last + dx
    step = -1 if add else 1
    ell = _ell(x, q, mu, lq, l1q)
    kf = math.floor(((-ell if add else ell) - umin) / b)
    k = int(kf) if -1.0 <= kf <= nb else (-1 if kf < 0 else nb)
    g = 0.0  # the density at x (needed once x is inside the histogram)
    inside = False
    while x < x_end:
        if (k >= nb and not add) or (k < 0 and add):
            break  # past the histogram: u only moves further away
        # the pre-image of the bin's far edge (before the first bin: of the histogram's near end)
        if add:
            edge = umax if k >= nb else umin + k * b
        else:
            edge = umin if k < 0 else umin + (k + 1) * b
        xe = _x_of_u(edge, add, q, mu, lq, l1q)
        if 0 <= k < nb and xe > x:
            if not inside:
                g = _density(x, ell, wr, gmax, half_log_2pi, xcut, tau, part)
                inside = True
            stop = xe if xe < x_end else x_end
            n = math.ceil((stop - x) / dx)
            h = (stop - x) / n
            acc = 0.5 * g
            for j in range(1, n):
                xj = x + j * h
                acc += _density(xj, _ell(xj, q, mu, lq, l1q), wr, gmax, half_log_2pi, xcut, tau, part)
            ell_stop = (-edge if add else edge) if stop == xe else _ell(stop, q, mu, lq, l1q)
            g = _density(stop, ell_stop, wr, gmax, half_log_2pi, xcut, tau, part)
            hist[k] += (acc + 0.5 * g) * h
            x = stop
        elif xe > x:
            # before the histogram: jump to its near end, where the loss is the edge's value
            x = xe if xe < x_end else x_end
            ell = -edge if add else edge
        if k < 0:
            k = 0
        elif k >= nb:
            k = nb - 1
        else:
            k += step
    return b


@njit(**_HELPER)
def _density(x, ell, wr, gmax, half_log_2pi, xcut, tau, part):  # pragma: no cover - compiled
    """The tilted density at x given its loss ``ell``, relative to e^{gmax} (0 below e^{-40})."""
    lg = -0.5 * x * x - half_log_2pi + wr * ell - gmax + split_log_weight(x, xcut, tau, part)
    return math.exp(lg) if lg > -40.0 else 0.0


@njit(cache=True)
def sg_loss_histogram(c, q, mu, add, dx, gmax, umin, umax, x_first, x_last, xcut, tau, part, hist):
    # pragma: no cover - compiled
    """:func:`_loss_histogram` callable from Python (a second histogram over a sub-window of the loss,
    e.g. a split part's bulk): fills ``hist`` (zeros on entry), returns the bin width."""
    return _loss_histogram(c, q, mu, add, dx, gmax, umin, umax, x_first, x_last, xcut, tau, part, hist)
