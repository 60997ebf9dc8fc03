"""numba line kernel of the subsampled Gaussian's MGF: log M(c + it) for many nodes t on one line
Re s = c (the contour's grids), and the x-grids it sums on.

The trapezoid rule, window and step rule are those of ``_poisson_kernels.sg_log_mgf`` (math in
:mod:`mechanisms.subsampled`; compile-cost rules as in :mod:`mechanisms._poisson_kernels`).

Pieces (a smooth partition of unity).  The step rule ``_part_step`` takes the phase rate t l'(x) and the
curvature at the window's right end, where l'(x) = mu sig(...) is largest; at small q and large t that
step is far finer than the left of the window needs (q = 1e-5, sigma = 0.4, t = 3126: 6.4e-5 over a
window [-13, 7.2] whose left 16 units have l' < 2e-3 mu).  A long grid is therefore cut into pieces
with a partition of unity 1 = sum_k v_k(x):

    A_k(x) = Phi((x_k - x) / tau_k),  v_0 = A_0,  v_k = A_k - A_{k-1},  v_K = 1 - A_{K-1},

cuts x_0 < ... < x_{K-1} with widths tau_0 > ... > tau_{K-1}.  Each product v_k(x) times the integrand is
integrated by the same trapezoid rule on its own grid: piece k spans [x_{k-1} - Z tau_{k-1},
x_k + Z tau_k] (clipped to the window), with the rule's step at its right end and at most tau/4 of both
its cuts (h_k = tau_k / 4, tau_{k-1} = PIECE_RATIO tau_k).  Why the error stays the declared one:
* the pieces' integrals add up to the whole one exactly (the v_k telescope to 1);
* each v_k is entire and >= 0 on its span (A_k >= A_{k-1} up to x_k + Z tau_k, since
  x_k - x_{k-1} >= Z (tau_{k-1} - tau_k)), and outside its span |v_k| <= 2 Phi(-Z) ~ 2e-19: the
  truncation is negligible next to the declared 2e-13;
* each piece is the kind of integrand the rule is validated on: the unsplit or split-part integrand
  (itself a Phi-weighted one) times Phi-weights of width tau >= 4 h (the split parts' own condition), on
  a step obeying the rule at the piece's right end (the rule's phase rate and curvature grow with x);
* the pieces' weights are non-negative and sum to the whole integrand's, so relative errors e_k of
  the pieces give at most max e_k of M(c) in all (the form of ``log_mgf_error``).
The tests compare the piecewise sums with an extended-precision uniform-grid reference and with the one
grid (``tests/test_nufft.py``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._nufft_kernels import nufft1
from ._poisson_kernels import (
    _HELPER,
    _ell,
    _grid_step,
    _line_grid,
    _mgf_window,
    _part_step,
    _search_range,
    split_log_weight,
)

#: uniform line grids of at least this many points are cut into pieces (shorter ones keep the one grid)
PIECE_MIN_POINTS = 4096
#: step ratio of neighbouring pieces (and of their cuts' widths)
PIECE_RATIO = 4.0
#: a cut's weights are within Phi(-Z) ~ 1.1e-19 of 0 and 1 beyond Z tau of it
PIECE_Z = 9.0
#: at most this many cuts (a ratio of 4^12 between the finest and the coarsest step)
_MAX_CUTS = 12
_SQRT1_2 = math.sqrt(0.5)


@njit(**_HELPER)
def _reach(h, tmax, wr, q, mu, lq, l1q, a, b, dx_max, tau, part):  # pragma: no cover - compiled
    """The largest r in [a, b] whose rule step ``_part_step`` at r is >= h (the step is non-increasing in
    r: its phase rate and curvature grow with x), or -inf where even r = a gives a finer one."""
    if _part_step(tmax, wr, q, mu, lq, l1q, b, dx_max, tau, part) >= h:
        return b
    if _part_step(tmax, wr, q, mu, lq, l1q, a, dx_max, tau, part) < h:
        return -np.inf
    lo = a
    hi = b
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if _part_step(tmax, wr, q, mu, lq, l1q, mid, dx_max, tau, part) >= h:
            lo = mid
        else:
            hi = mid
    return lo


@njit(**_HELPER)
def _phi(z):  # pragma: no cover - compiled
    return 0.5 * math.erfc(-z * _SQRT1_2)


@njit(**_HELPER)
def _piece_span(k, n_cuts, a, b, h_fine, cut_x, cut_tau):  # pragma: no cover - compiled
    """(lo, hi, h): the span and step of piece k (left to right) among n_cuts + 1 pieces: between cut
    k - 1 and cut k (found right to left, at indices n_cuts - k and n_cuts - 1 - k), Z tau past each,
    clipped to the window [a, b]; step a quarter of its right cut's width (the last piece: ``h_fine``).
    The one definition of the pieces, for their count (``_piece_plan``) and their grids."""
    lo = a if k == 0 else max(a, cut_x[n_cuts - k] - PIECE_Z * cut_tau[n_cuts - k])
    hi = b if k == n_cuts else min(b, cut_x[n_cuts - 1 - k] + PIECE_Z * cut_tau[n_cuts - 1 - k])
    h = h_fine if k == n_cuts else 0.25 * cut_tau[n_cuts - 1 - k]
    return lo, hi, h


@njit(**_HELPER)
def _piece_plan(tmax, wr, q, mu, lq, l1q, a, b, dx_max, tau, part, piece_min, cut_x,
                cut_tau):  # pragma: no cover - compiled
    """(m, dx, h_fine, n_cuts, total): the one uniform grid a + i dx, i = 0..m (step ``h_fine`` of the
    rule at b, or finer), and the cuts of the pieces (``cut_x``, ``cut_tau`` filled right to left;
    n_cuts = 0: one grid) with their ``total`` number of points.  Pieces are planned only for grids of at
    least ``piece_min`` points, and kept only where they need fewer than 3/4 of the grid's points."""
    h_fine = _part_step(tmax, wr, q, mu, lq, l1q, b, dx_max, tau, part)
    m, dx = _grid_step(a, b, h_fine)
    n_cuts = 0
    if m + 1 >= piece_min:
        # cuts from the right: the piece left of a cut has PIECE_RATIO x the step of the piece right of it,
        # and reaches as far right as that step allows (its right end Z tau past the cut)
        h = h_fine
        while n_cuts < _MAX_CUTS:
            h_next = PIECE_RATIO * h
            if h_next > dx_max:
                break
            r = _reach(h_next, tmax, wr, q, mu, lq, l1q, a, b, dx_max, tau, part)
            tau_c = 4.0 * h_next
            x_c = r - PIECE_Z * tau_c
            if not x_c - PIECE_Z * tau_c > a:
                break
            cut_x[n_cuts] = x_c
            cut_tau[n_cuts] = tau_c
            n_cuts += 1
            h = h_next
    # (cuts were found right to left: cut j = n_cuts - 1 - k in left-to-right order k)
    total = 0
    if n_cuts > 0:
        for k in range(n_cuts + 1):
            lo_k, hi_k, h_k = _piece_span(k, n_cuts, a, b, h_fine, cut_x, cut_tau)
            total += _grid_step(lo_k, hi_k, h_k)[0] + 1
        if not 4 * total < 3 * (m + 1):
            n_cuts = 0
    return m, dx, h_fine, n_cuts, total


@njit(**_HELPER)
def _line_pieces(tmax, wr, q, mu, lq, l1q, a, b, dx_max, fmax, xcut, tau, part, sgn,
                 piece_min):  # pragma: no cover - compiled
    """(g, el, scale): the trapezoid sums of the line kernel for the nodes up to |t| = ``tmax`` on the
    window [a, b] are scale * sum_i g_i e^{i t el_i}: weighted magnitudes g (relative to e^{fmax}) and
    phases per unit t, el = sgn l(x).

    One uniform grid of ``sg_log_mgf``'s step (scale = the step), or the pieces' grids one after the
    other (:func:`_piece_plan`; each g_i carries its piece's step and weight v_k; scale = 1)."""
    cut_x = np.empty(_MAX_CUTS)
    cut_tau = np.empty(_MAX_CUTS)
    _, _, h_fine, n_cuts, total = _piece_plan(tmax, wr, q, mu, lq, l1q, a, b, dx_max, tau, part, piece_min,
                                              cut_x, cut_tau)
    if n_cuts == 0:  # (the one grid: the same step rule, so the same grid a + i dx, i = 0..m)
        return _line_grid(tmax, wr, q, mu, lq, l1q, a, b, dx_max, fmax, xcut, tau, part, sgn)
    g = np.empty(total)
    el = np.empty(total)
    j = 0
    for k in range(n_cuts + 1):
        # piece k between cut k-1 (left, A_{k-1}) and cut k (right, A_k); cut k is found at n_cuts - 1 - k
        left = n_cuts - k  # index of cut k-1 (valid for k >= 1)
        right = n_cuts - 1 - k  # index of cut k (valid for k < n_cuts)
        lo_k, hi_k, h_k = _piece_span(k, n_cuts, a, b, h_fine, cut_x, cut_tau)
        mk, hk = _grid_step(lo_k, hi_k, h_k)
        for i in range(mk + 1):
            x = lo_k + i * hk
            if k == n_cuts:
                v = _phi((x - cut_x[left]) / cut_tau[left])  # (1 - A_{K-1}, without cancellation)
            else:
                v = _phi((cut_x[right] - x) / cut_tau[right])
                if k > 0:
                    v -= _phi((cut_x[left] - x) / cut_tau[left])
                if v < 0.0:
                    v = 0.0  # (rounding only: v_k >= 0 on its span)
            ell = _ell(x, q, mu, lq, l1q)
            f = -0.5 * x * x + wr * ell - fmax + split_log_weight(x, xcut, tau, part)
            wgt = 0.5 if (i == 0 or i == mk) else 1.0
            g[j] = wgt * hk * v * math.exp(f)
            el[j] = sgn * ell
            j += 1
    return g, el, 1.0


#: lines with at least this many equally spaced nodes are summed by the type-1 NUFFT on one grid (measured
#: per line: 65 nodes at t <= 1.8e4 66 ms vs 123 ms direct, whose blocks of 64 need a second grid; 17
#: nodes 26 vs 19 ms)
NUFFT_MIN_NODES = 48


@njit(**_HELPER)
def _evenly_spaced(ts, start, stop):  # pragma: no cover - compiled
    h = ts[start + 1] - ts[start] if stop - start > 1 else 0.0
    for k in range(start + 1, stop):
        if abs((ts[k] - ts[start]) - (k - start) * h) > 1e-12 * (abs(ts[k]) + 1.0):
            return False
    return True


@njit(cache=True)
def sg_line_log_mgf(c, ts, q, mu, add, dx_max, span, xcut, tau, part,
                    nufft_min=NUFFT_MIN_NODES, piece_min=PIECE_MIN_POINTS):  # pragma: no cover - compiled
    """``sg_log_mgf`` (unsplit, ``part`` = -1, or of a split part 0 or 1) at s = c + i t for every t in
    ``ts`` (one line).

    The same trapezoid rule, window and step rule per node as ``sg_log_mgf`` (so the same declared
    error), organised for many nodes on one line: the window depends only on Re s = c and is found
    once.  The x-grid (:func:`_line_pieces`: one uniform grid, or, from ``piece_min`` points, the
    pieces of a partition of unity, each on the rule's step at its own right end) obeys the rule of
    the largest |t| its nodes have (a finer step than a node needs only lowers its error).  At least
    ``nufft_min`` equally spaced nodes t_k = t_0 + k h: one x-grid for the whole line, and the sums
    S_k = sum_i g_i e^{i t_k l_i} as a type-1 NUFFT (:mod:`mechanisms._nufft_kernels`: weights
    g_i e^{i t_mid l_i}, phases h l_i, algorithmic error <= 1e-15 of sum_i g_i, i.e. of M(c) on this
    grid, plus ~60 ulps of rounding -- far below the declared error).  Otherwise nodes are taken in
    blocks of 64, each block on the x-grid of its largest |t|; on that grid the magnitudes and losses
    are computed once, and the phases e^{i t l(x)} of equally spaced nodes by rotation with
    e^{i h l(x)}, re-anchored by exact cos/sin every 16 nodes (adds < 40 ulps relative to the sum of
    moduli, far below the declared error).
    """
    n = ts.shape[0]
    out_re = np.empty(n)
    out_im = np.empty(n)
    if n == 0:
        return out_re, out_im
    lq = math.log(q)
    l1q = math.log1p(-q)
    half_log_2pi = 0.5 * math.log(2.0 * math.pi)
    sgn = -1.0 if add else 1.0
    wr = -c if add else c + 1.0
    lo, hi = _search_range(wr, q, mu, lq, l1q, span)
    fmax, a, b = _mgf_window(wr, q, mu, lq, l1q, lo, hi, xcut, tau, part, span)
    if n >= nufft_min and _evenly_spaced(ts, 0, n):
        tmax = max(abs(ts[0]), abs(ts[n - 1]))
        g, el, dx = _line_pieces(tmax, wr, q, mu, lq, l1q, a, b, dx_max, fmax, xcut, tau, part, sgn,
                                 piece_min)
        h = ts[1] - ts[0]
        t_mid = ts[0] + (n // 2) * h
        m1 = g.shape[0]
        a_re = np.empty(m1)
        a_im = np.empty(m1)
        theta = np.empty(m1)
        for i in range(m1):
            ph = t_mid * el[i]
            a_re[i] = g[i] * math.cos(ph)
            a_im[i] = g[i] * math.sin(ph)
            theta[i] = h * el[i]
        s_re = np.empty(n)
        s_im = np.empty(n)
        nufft1(a_re, a_im, theta, n, s_re, s_im)
        for k in range(n):
            acc_re = s_re[k] * dx
            acc_im = s_im[k] * dx
            modulus = math.sqrt(acc_re * acc_re + acc_im * acc_im)
            out_re[k] = math.log(modulus) + fmax - half_log_2pi
            out_im[k] = math.atan2(acc_im, acc_re)
        return out_re, out_im
    blk = 64
    for start in range(0, n, blk):
        stop = min(n, start + blk)
        tmax = 0.0
        for k in range(start, stop):
            tmax = max(tmax, abs(ts[k]))
        g, el, dx = _line_pieces(tmax, wr, q, mu, lq, l1q, a, b, dx_max, fmax, xcut, tau, part, sgn,
                                 piece_min)
        m = g.shape[0] - 1
        # equally spaced nodes in this block: rotations
        h = ts[start + 1] - ts[start] if stop - start > 1 else 0.0
        even = _evenly_spaced(ts, start, stop)
        zr = np.empty(m + 1)
        zi = np.empty(m + 1)
        rr = np.empty(m + 1)
        ri = np.empty(m + 1)
        for k in range(start, stop):
            t = ts[k]
            anchor = (not even) or ((k - start) % 16 == 0)
            acc_re = 0.0
            acc_im = 0.0
            if anchor:
                for i in range(m + 1):
                    ph = t * el[i]
                    zr[i] = math.cos(ph)
                    zi[i] = math.sin(ph)
                    acc_re += g[i] * zr[i]
                    acc_im += g[i] * zi[i]
                if even and k == start:
                    for i in range(m + 1):
                        ph = h * el[i]
                        rr[i] = math.cos(ph)
                        ri[i] = math.sin(ph)
            else:
                for i in range(m + 1):
                    xr = zr[i] * rr[i] - zi[i] * ri[i]
                    xi = zr[i] * ri[i] + zi[i] * rr[i]
                    zr[i] = xr
                    zi[i] = xi
                    acc_re += g[i] * xr
                    acc_im += g[i] * xi
            acc_re *= dx
            acc_im *= dx
            modulus = math.sqrt(acc_re * acc_re + acc_im * acc_im)
            out_re[k] = math.log(modulus) + fmax - half_log_2pi
            out_im[k] = math.atan2(acc_im, acc_re)
    return out_re, out_im


@njit(cache=True)
def sg_line_points(c, tmax, q, mu, add, dx_max, span, xcut, tau, part,
                   piece_min=PIECE_MIN_POINTS):  # pragma: no cover - compiled
    """(points of the one uniform grid, points of the grid :func:`_line_pieces` builds: :func:`_piece_plan`)
    for the nodes up to |t| = ``tmax`` on the line Re s = c (the kernels' window): how much the pieces
    save."""
    lq = math.log(q)
    l1q = math.log1p(-q)
    wr = -c if add else c + 1.0
    lo, hi = _search_range(wr, q, mu, lq, l1q, span)
    _, a, b = _mgf_window(wr, q, mu, lq, l1q, lo, hi, xcut, tau, part, span)
    cut_x = np.empty(_MAX_CUTS)
    cut_tau = np.empty(_MAX_CUTS)
    m, _, _, n_cuts, total = _piece_plan(tmax, wr, q, mu, lq, l1q, a, b, dx_max, tau, part, piece_min, cut_x,
                                         cut_tau)
    return m + 1, (total if n_cuts > 0 else m + 1)
