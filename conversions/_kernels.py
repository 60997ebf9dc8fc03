"""numba kernels of the characteristic-function route (hot loops only; the math lives in contour.py)."""

from __future__ import annotations

import cmath
import math

import numpy as np
from numba import njit

PHASE_ANCHOR = 32  # exact cos/sin every this many nodes; rotations in between


@njit(cache=True)
def trapezoid_sum(t, r_re, r_im, c, eps):  # pragma: no cover - compiled
    """Sum_{n>=0}' Re[R_n e^{-i t_n eps} / ((c + i t_n)(c + 1 + i t_n))] and the sum of moduli.

    The n = 0 term has weight 1/2 (one side of a symmetric trapezoid rule; the integrand at -t is the
    complex conjugate).  Returns (signed sum, absolute sum); the caller multiplies by h / pi.

    The nodes are equally spaced (t_n = n h): e^{-i t_n eps} is computed exactly every PHASE_ANCHOR
    nodes and by rotations with e^{-i h eps} in between, which adds at most ~3 PHASE_ANCHOR ulps of
    relative error per node (the caller adds 4 PHASE_ANCHOR ulps to its rounding bound).
    """
    s = 0.0
    sa = 0.0
    cc = c * (c + 1.0)
    b = 2.0 * c + 1.0
    n_t = t.shape[0]
    h = t[1] - t[0] if n_t > 1 else 0.0
    c1 = math.cos(h * eps)
    s1 = math.sin(h * eps)
    co = 1.0
    si = 0.0
    for n in range(n_t):
        tn = t[n]
        zr = cc - tn * tn
        zi = tn * b
        den = zr * zr + zi * zi
        if n % PHASE_ANCHOR == 0:
            ph = tn * eps
            co = math.cos(ph)
            si = math.sin(ph)
        else:
            co, si = co * c1 - si * s1, si * c1 + co * s1
        wr = r_re[n] * co + r_im[n] * si
        wi = r_im[n] * co - r_re[n] * si
        val = (wr * zr + wi * zi) / den
        mag = math.sqrt((r_re[n] * r_re[n] + r_im[n] * r_im[n]) / den)
        if n == 0:
            val *= 0.5
            mag *= 0.5
        s += val
        sa += mag
    return s, sa


@njit(cache=True)
def atoms_log_delta(losses, logw, eps):  # pragma: no cover - compiled
    """log sum_i w_i (1 - e^{eps - l_i})_+ (``-inf`` if no atom lies above eps)."""
    m = -np.inf
    n = losses.shape[0]
    vals = np.empty(n)
    for i in range(n):
        if losses[i] > eps:
            vals[i] = logw[i] + math.log(-math.expm1(eps - losses[i]))
            if vals[i] > m:
                m = vals[i]
        else:
            vals[i] = -np.inf
    if m == -np.inf:
        return -np.inf
    # Neumaier-compensated sum of positive terms: relative error <= 2u + O(n u^2) (callers add
    # ATOMS_DELTA_REL_ERR), instead of the n u of a plain running sum
    acc = 0.0
    comp = 0.0
    for i in range(n):
        if vals[i] > -np.inf:
            x = math.exp(vals[i] - m)
            t = acc + x
            if abs(acc) >= abs(x):
                comp += (acc - t) + x
            else:
                comp += (x - t) + acc
            acc = t
    return m + math.log(acc + comp)


@njit(cache=True)
def _e1(x):  # pragma: no cover - compiled
    """(1 - e^{-x}) / x for x >= 0 (1 at 0)."""
    if x < 1e-8:
        return 1.0 - 0.5 * x
    return -math.expm1(-x) / x


@njit(cache=True)
def _e2(x):  # pragma: no cover - compiled
    """(1 - e^{-x}(1 + x)) / x^2 = sum_{n>=2} (-1)^n (n-1) x^{n-2} / n!  for x >= 0 (1/2 at 0)."""
    if x < 0.5:
        acc = 0.0
        term = 0.5  # x^{n-2} / n! at n = 2
        sign = 1.0
        for n in range(2, 26):
            acc += sign * (n - 1) * term
            term *= x / (n + 1)
            sign = -sign
        return acc
    return (-math.expm1(-x) - x * math.exp(-x)) / (x * x)


@njit(cache=True)
def _e3(x):  # pragma: no cover - compiled
    """(x - 1 + e^{-x}) / x^2 = sum_{n>=2} (-1)^n x^{n-2} / n!  for x >= 0 (1/2 at 0)."""
    if x < 0.5:
        acc = 0.0
        term = 0.5
        sign = 1.0
        for n in range(2, 26):
            acc += sign * term
            term *= x / (n + 1)
            sign = -sign
        return acc
    return (x + math.expm1(-x)) / (x * x)


@njit(cache=True)
def _kj(r, d, gl_x, gl_w):  # pragma: no cover - compiled
    """(K_1, K_y, K_{D-y}, J_1, J_y, J_{D-y}) of :func:`_segment_integral` for rate r, length d > 0."""
    rd = r * d
    k0 = d * _e1(rd)
    k1 = d * d * _e2(rd)
    k2 = d * d * _e3(rd)
    if d >= 1.0:
        sd = (1.0 - r) * d
        er = math.exp(-rd)
        j0 = k0 - er * d * _e1(sd)
        j1 = k1 - er * d * d * _e3(sd)
        j2 = k2 - er * d * d * _e2(sd)
    else:
        j0 = 0.0
        j1 = 0.0
        j2 = 0.0
        half = 0.5 * d
        for n in range(gl_x.shape[0]):
            y = half * (gl_x[n] + 1.0)
            f = gl_w[n] * half * math.exp(-r * y) * (-math.expm1(-(d - y)))
            j0 += f
            j1 += f * y
            j2 += f * (d - y)
    return k0, k1, k2, j0, j1, j2


@njit(cache=True)
def _segment_value(kind, anchor, low, hi, v0, k0, k1, k2, j0, j1, j2):  # pragma: no cover - compiled
    c1 = -math.expm1(-v0)
    c2 = math.exp(-v0)
    a0 = c1 * k0 + c2 * j0
    if kind == 0:
        return anchor * a0
    if kind == 1:
        return (low - anchor) * a0 + c1 * k2 + c2 * j2
    return (anchor - hi) * a0 + c1 * k1 + c2 * j1


@njit(cache=True)
def _segment_integral(kind, anchor, r, lo, hi, theta, gl_x, gl_w):  # pragma: no cover - compiled
    """int_{lo}^{hi} e^{r (s - hi)} lam(s) (1 - e^{theta - s})_+ ds for one linear-exponential segment.

    lam(s) = anchor (kind 0, flat), s - anchor (kind 1, rising), anchor - s (kind 2, falling); lam >= 0
    on [lo, hi], 0 <= r <= 1.  With L = max(lo, theta), D = hi - L, v0 = L - theta and s = hi - y,
    (1 - e^{theta - s}) = (1 - e^{-v0}) + e^{-v0} (1 - e^{-(D - y)}) and lam(hi - y) is a combination
    with non-negative coefficients of 1, y and D - y, so the integral is a non-negative combination of
        K_p = int_0^D p(y) e^{-r y} dy,  J_p = int_0^D p(y) e^{-r y} (1 - e^{-(D - y)}) dy,
    p in {1, y, D - y}: K_p in closed form, J_p in closed form for D >= 1 (mild cancellation) and by
    8-point Gauss-Legendre for D < 1 (entire integrand; error < 1e-17 relative).
    """
    if theta >= hi:
        return 0.0
    low = max(lo, theta)
    d = hi - low
    if d <= 0.0:
        return 0.0
    k0, k1, k2, j0, j1, j2 = _kj(r, d, gl_x, gl_w)
    return _segment_value(kind, anchor, low, hi, low - theta, k0, k1, k2, j0, j1, j2)


_NO_F = np.empty(0)  # placeholders for the segment fields the other kind does not use
_NO_I = np.empty(0, dtype=np.int64)


@njit(cache=True)
def _atoms_segments_sum(losses, logw, quad, kind, anchor, b0, b1, b2, slogw, rate, lo, hi, cq, full, eps,
                        gl_x, gl_w):  # pragma: no cover - compiled
    """The atoms x segments sum shared by :func:`segments_log_delta` (linear segments: ``kind``,
    ``anchor``) and :func:`quad_segments_log_delta` (quadratic: ``b0, b1, b2``).

    ``cq[q]``: log bound on segment q's mass (up to the atom weight), ``full[q]``: its K, J integrals
    over the whole segment.  Returns (log of the sum, log of a bound on the skipped terms).
    """
    n = losses.shape[0]
    p = lo.shape[0]
    m = -np.inf
    acc = 0.0  # sum of exp(v - m)
    skip_max = -np.inf
    n_skip = 0
    cmax = np.max(cq) if p > 0 else -np.inf
    heaviest_first = True
    for i in range(1, n):
        if logw[i] > logw[i - 1]:
            heaviest_first = False
            break
    for i in range(n):
        if heaviest_first and logw[i] + cmax < m - 36.0:
            # atoms come heaviest first: every remaining term is below the skipping threshold
            n_skip += (n - i) * p
            if logw[i] + cmax > skip_max:
                skip_max = logw[i] + cmax
            break
        for q in range(p):
            theta = eps - losses[i]
            if theta >= hi[q] or (quad and cq[q] == -np.inf):
                continue
            ub = logw[i] + cq[q]
            if ub < m - 36.0:
                n_skip += 1
                if ub > skip_max:
                    skip_max = ub
                continue
            if quad:
                if theta <= lo[q]:
                    val = _quad_value(b0[q], b1[q], b2[q], lo[q] - theta, full[q, 0], full[q, 1],
                                      full[q, 2], full[q, 3], full[q, 4], full[q, 5])
                else:
                    val = _quad_integral(b0[q], b1[q], b2[q], rate[q], lo[q], hi[q], theta, gl_x, gl_w)
            elif theta <= lo[q]:
                val = _segment_value(kind[q], anchor[q], lo[q], hi[q], lo[q] - theta, full[q, 0],
                                     full[q, 1], full[q, 2], full[q, 3], full[q, 4], full[q, 5])
            else:
                val = _segment_integral(kind[q], anchor[q], rate[q], lo[q], hi[q], theta, gl_x, gl_w)
            if not val > 0.0:
                if math.isnan(val):  # never drop a NaN silently (it would lower delta)
                    return np.nan, np.nan
                continue
            v = logw[i] + slogw[q] + rate[q] * hi[q] + math.log(val)
            if v > m:
                acc = acc * math.exp(m - v) + 1.0
                m = v
            else:
                acc += math.exp(v - m)
    out = -np.inf if m == -np.inf else m + math.log(acc)
    skipped = -np.inf if n_skip == 0 else skip_max + math.log(n_skip)
    return out, skipped


@njit(cache=True)
def segments_log_delta(losses, logw, kind, anchor, slogw, rate, lo, hi, eps, gl_x, gl_w):
    # pragma: no cover - compiled
    """log sum_{i,q} w_i int g_q(u) (1 - e^{eps - l_i - u})_+ du and log of a bound on skipped terms.

    Atoms (l_i, w_i) convolved with segments g_q(u) = e^{slogw_q + r_q u} lam_q(u) on [lo_q, hi_q].
    A term is skipped when its upper bound w_i e^{slogw + r hi} max(lam) (hi - lo) is below e^{-36}
    times the largest term found so far; (number skipped) x (largest skipped bound) is returned as a
    bound on their sum (add it to delta).  Segments lying wholly above eps - l_i share their K, J.
    A NaN term makes both results NaN (the caller raises).
    """
    p = lo.shape[0]
    cq = np.empty(p)
    full = np.empty((p, 6))
    for q in range(p):
        if kind[q] == 0:
            lmax = anchor[q]
        elif kind[q] == 1:
            lmax = hi[q] - anchor[q]
        else:
            lmax = anchor[q] - lo[q]
        cq[q] = slogw[q] + rate[q] * hi[q] + math.log(lmax * (hi[q] - lo[q]))
        _put6(full[q], _kj(rate[q], hi[q] - lo[q], gl_x, gl_w))
    return _atoms_segments_sum(losses, logw, False, kind, anchor, _NO_F, _NO_F, _NO_F, slogw, rate, lo,
                               hi, cq, full, eps, gl_x, gl_w)


@njit(cache=True)
def _put6(row, v):  # pragma: no cover - compiled
    """row[i] = v[i], i < 6 (the K and J integrals of one segment into its row of the table)."""
    for i in range(6):
        row[i] = v[i]


@njit(cache=True, no_cpython_wrapper=True)
def _scaled(k, z):  # pragma: no cover - compiled
    """k * z for real k >= 0 and complex z, component-wise (k * (-inf + i y) stays -inf + i k y)."""
    return complex(k * z.real, k * z.imag)


@njit(cache=True)
def grid_assemble(lm, counts, shift, c, t, r_re, r_im, la=None, lc=None, coefs=None, fmult=None, emult=None):
    # pragma: no cover - compiled
    """Remainder MGF R = M - A - F on the nodes c + i t, scaled by e^{-shift}, in one pass.

    ``lm[j]``, ``la[j]``, ``lc[j]``: log M_j, log A_j (atoms), log C_j (pieces) of entry j at the nodes;
    M = prod_j M_j^{k_j}, A = prod_j A_j^{k_j} (when the atoms ``la`` are given), F = sum over the
    closed-form terms of e^{coef} prod_j C_j^{fmult[t, j]} A_j^{emult[t, j]}.  Writes Re R, Im R to
    ``r_re``, ``r_im`` and returns (max_n sum_j |k_j log M_j|, sum_n' kern_n, sum_n' kern_n (|M| + |A| +
    sum_t |F_t|)) with kern = 1 / |s (s + 1)| and the n = 0 node at weight 1/2 (the rounding of the
    differences is relative to the terms' moduli).  Without atoms (``la=None``, the default) the atoms
    part is not compiled at all (a smaller kernel on the path of the first query).
    """
    n_j = lm.shape[0]
    n = t.shape[0]
    mag_max = 0.0
    sum_kern = 0.0
    sum_kern_mag = 0.0
    for i in range(n):
        logm = 0j
        mag = 0.0
        for j in range(n_j):
            v = _scaled(counts[j], lm[j, i])
            logm += v
            mag += abs(v)
        if mag > mag_max:
            mag_max = mag
        r = cmath.exp(logm - shift)
        mod = abs(r)
        if la is not None:
            lsum = 0j
            for j in range(n_j):
                lsum += _scaled(counts[j], la[j, i])
            a = cmath.exp(lsum - shift)
            r -= a
            mod += abs(a)
            for q in range(coefs.shape[0]):
                v = complex(coefs[q] - shift, 0.0)
                for j in range(n_j):
                    if fmult[q, j]:
                        v += _scaled(fmult[q, j], lc[j, i])
                    if emult[q, j]:
                        v += _scaled(emult[q, j], la[j, i])
                f = cmath.exp(v)
                r -= f
                mod += abs(f)
        r_re[i] = r.real
        r_im[i] = r.imag
        s = complex(c, t[i])
        kern = 1.0 / abs(s * (s + 1.0))
        if i == 0:
            kern *= 0.5
        sum_kern += kern
        sum_kern_mag += kern * mod
    return mag_max, sum_kern, sum_kern_mag


# ------------------------------------------------------------------------- quadratic segments
@njit(cache=True)
def _bern_g(x):  # pragma: no cover - compiled
    """(G0, G1, G2) = int_0^1 beta(u) e^{-x u} du for beta = u^2, 2u(1-u), (1-u)^2 and x >= 0.

    Below x = 2 the series sum_j (-x)^j / j! int u^{n+j} (1-u)^m du (Beta integrals; 40 terms leave
    < 2^40/40! relative, alternating terms at most e^2 times the sum); above, the closed forms
    (2 - e^{-x}(x^2 + 2x + 2)) / x^3, 2 (x - 2 + e^{-x}(x + 2)) / x^3, (x^2 - 2x + 2 - 2e^{-x}) / x^3
    (the first cancels at most 3x at x = 2, the others not at all).
    """
    if x < 2.0:
        g0 = 0.0
        g1 = 0.0
        g2 = 0.0
        term = 1.0
        for j in range(40):
            g0 += term / (j + 3.0)
            g1 += term * 2.0 / ((j + 2.0) * (j + 3.0))
            g2 += term * 2.0 / ((j + 1.0) * (j + 2.0) * (j + 3.0))
            term *= -x / (j + 1.0)
        return g0, g1, g2
    e = math.exp(-x)
    x3 = x * x * x
    return ((2.0 - e * (x * x + 2.0 * x + 2.0)) / x3, 2.0 * (x - 2.0 + e * (x + 2.0)) / x3,
            ((x - 1.0) * (x - 1.0) + 1.0 - 2.0 * e) / x3)


@njit(cache=True)
def _quad_kj(r, d, gl_x, gl_w):  # pragma: no cover - compiled
    """(K_0, K_1, K_2, J_0, J_1, J_2): K_i = int_0^d B_i e^{-r y} dy, J_i = int_0^d B_i e^{-r y}
    (1 - e^{-(d - y)}) dy, with B_0 = (y/d)^2, B_1 = 2 (y/d)(1 - y/d), B_2 = (1 - y/d)^2 (the Bernstein
    basis of the segment seen from its top).  J by the reflection u -> 1 - u for d >= 1 (mild
    cancellation, like the linear case) and by 8-point Gauss-Legendre for d < 1 (entire integrand)."""
    x = r * d
    g0, g1, g2 = _bern_g(x)
    k0 = d * g0
    k1 = d * g1
    k2 = d * g2
    if d >= 1.0:
        h0, h1, h2 = _bern_g((1.0 - r) * d)
        er = math.exp(-x)
        j0 = k0 - d * er * h2
        j1 = k1 - d * er * h1
        j2 = k2 - d * er * h0
    else:
        j0 = 0.0
        j1 = 0.0
        j2 = 0.0
        half = 0.5 * d
        for n in range(gl_x.shape[0]):
            u = 0.5 * (gl_x[n] + 1.0)
            y = d * u
            f = gl_w[n] * half * math.exp(-r * y) * (-math.expm1(-(d - y)))
            j0 += f * u * u
            j1 += f * 2.0 * u * (1.0 - u)
            j2 += f * (1.0 - u) * (1.0 - u)
    return k0, k1, k2, j0, j1, j2


@njit(cache=True)
def _quad_value(c0, c1, c2, v0, k0, k1, k2, j0, j1, j2):  # pragma: no cover - compiled
    a = -math.expm1(-v0)
    b = math.exp(-v0)
    # c_0 multiplies (1 - v)^2 = (y/d)^2 = B_0 (y measured down from the top), c_2 multiplies v^2 = B_2
    return c0 * (a * k0 + b * j0) + c1 * (a * k1 + b * j1) + c2 * (a * k2 + b * j2)


@njit(cache=True)
def _quad_integral(b0, b1, b2, r, lo, hi, theta, gl_x, gl_w):  # pragma: no cover - compiled
    """int_lo^hi e^{r (s - hi)} Q(s) (1 - e^{theta - s})_+ ds, Q = sum_i b_i binom(2,i) v^i (1-v)^(2-i),
    v = (s - lo)/(hi - lo), b_i >= 0.  Above low = max(lo, theta) Q is re-expanded on [low, hi] by de
    Casteljau subdivision (non-negative combinations), then split as in :func:`_segment_integral`."""
    if theta >= hi:
        return 0.0
    low = max(lo, theta)
    d = hi - low
    if d <= 0.0:
        return 0.0
    tau = (low - lo) / (hi - lo)
    om = d / (hi - lo)  # 1 - tau without cancellation near the top
    c0 = om * om * b0 + 2.0 * tau * om * b1 + tau * tau * b2
    c1 = om * b1 + tau * b2
    k0, k1, k2, j0, j1, j2 = _quad_kj(r, d, gl_x, gl_w)
    return _quad_value(c0, c1, b2, low - theta, k0, k1, k2, j0, j1, j2)


@njit(cache=True)
def quad_segments_log_delta(losses, logw, b0, b1, b2, slogw, rate, lo, hi, eps, gl_x, gl_w):
    # pragma: no cover - compiled
    """:func:`segments_log_delta` for quadratic segments e^{slogw + r s} Q_q(s) on [lo_q, hi_q] (Q_q in
    Bernstein form with coefficients b0, b1, b2 >= 0).  Same skipping rule and NaN propagation."""
    p = lo.shape[0]
    cq = np.empty(p)
    full = np.empty((p, 6))
    for q in range(p):
        bmax = max(b0[q], max(b1[q], b2[q]))
        cq[q] = slogw[q] + rate[q] * hi[q] + math.log(bmax * (hi[q] - lo[q])) if bmax > 0.0 else -np.inf
        _put6(full[q], _quad_kj(rate[q], hi[q] - lo[q], gl_x, gl_w))
    return _atoms_segments_sum(losses, logw, True, _NO_I, _NO_F, b0, b1, b2, slogw, rate, lo, hi, cq,
                               full, eps, gl_x, gl_w)


def warm_up() -> None:
    """Compile (or load from cache) every kernel once."""
    t = np.linspace(0.0, 1.0, 4)
    trapezoid_sum(t, np.ones(4), np.zeros(4), 0.5, 0.1)
    atoms_log_delta(np.array([1.0, -1.0]), np.array([-0.5, -1.5]), 0.2)
    one = np.array([1.0])
    x, w = np.polynomial.legendre.leggauss(8)
    segments_log_delta(np.array([0.0]), np.array([0.0]), np.array([0]), one, -one, 0.5 * one, -one, one,
                       0.1, x, w)
    quad_segments_log_delta(np.array([0.0]), np.array([0.0]), one, one, one, -one, 0.5 * one, -one, one,
                            0.1, x, w)
