"""numba kernels for Poisson subsampling: binomial RDP sums and the subsampled-Gaussian MGF quadrature.

The math is documented in :mod:`mechanisms.subsampled`; these are only the hot loops.

Compile cost: the subsampled-Gaussian kernels are on the path of the first DP-SGD query in a fresh
install (nothing cached yet), so they are kept cheap to compile: output arrays come from the caller (no
``np.empty``/``np.zeros`` overloads to compile), ``min``/``max``/``int`` are written as comparisons and
``math.trunc``/``math.ceil`` (same values), the envelope is one kernel, and helpers called only from
other kernels have no Python wrapper (``_HELPER``).  The split's weight parameters ``(xcut, tau, part)``
are ordinary arguments of the same kernels (``part = -1``: no split); callers pass every argument
explicitly, so each kernel compiles once.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._numerics import log_expm1_scalar as _log_expm1

LOG3 = math.log(3.0)

#: options of kernels called only from other kernels: no CPython wrapper to compile
_HELPER = {"cache": True, "no_cpython_wrapper": True}


@njit(**_HELPER)
def _log_k(l, k, mode):  # pragma: no cover - compiled
    """log(e^K - 1), or for mode 1 and l >= 3 log(3 e^K - 1) (K < 0 taken as 0)."""
    if k < 0.0:
        k = 0.0
    if mode == 1 and l >= 3:
        return LOG3 + k + math.log1p(-math.exp(-k) / 3.0)
    return _log_expm1(k)


@njit(**_HELPER)
def _log_term(a, l, k, lga, lq, l1q, mode):  # pragma: no cover - compiled
    """log of the l-th non-negative summand of A - 1 (expm1 form; mode 1 uses 3 e^K - 1 for l >= 3)."""
    lk = _log_k(l, k, mode)
    return lga - math.lgamma(l + 1.0) - math.lgamma(a - l + 1.0) + (a - l) * l1q + l * lq + lk


@njit(cache=True)
def poisson_rdp_int(alphas, q, kv, mode):  # pragma: no cover - compiled
    """eps_sub(alpha) for integer orders ``alphas`` (int64 array, each >= 2), rounded up.

    kv[l] = K(l) = (l - 1) eps_base(l) for l = 0..max(alphas) (kv[0] = kv[1] = 0), upper bounds (every
    summand increases with K).  mode 0: tight L(alpha) (Zhu 2023 thesis Thm 2.3.4, = Zhu & Wang 2019);
    mode 1: general G(alpha) (thesis Thm 2.3.1).  Uses the expm1 form (docs/derivations/subsampling.md
    section 1): all summands non-negative, full relative accuracy.  Upper bound: log(A - 1) is raised by
    a bound on every summand's rounding (below) and the sum's ((n + 2) ulps, n terms) and log's, and the
    result by 4 ulps and one step (log1p, exp and the division).

    A summand's rounding: each of its six parts (three lgamma, the products with log(1 - q) and log q,
    log(e^K - 1)) carries at most 8 ulps of its magnitude (lgamma and log expm1 a few ulps; log q and
    log(1 - q) half an ulp, times the integer exactly, then one rounding), the five additions one ulp of
    the running sum each: 16 ulps of the parts' magnitudes.  These are bounded uniformly in l: lgamma(l
    + 1) and lgamma(a - l + 1) by lgamma(a + 1) (integers, lgamma >= 0 and increasing there), the
    products by a |log q| and a |log(1 - q)|, and |log(e^K - 1)| by its largest value at l = 2, 3 and a
    (K is non-decreasing in l, so each form of ``_log_k`` is monotone in l).
    """
    out = np.empty(alphas.shape[0])
    lq = math.log(q)
    l1q = math.log1p(-q)
    for i in range(alphas.shape[0]):
        a = alphas[i]
        lga = math.lgamma(a + 1.0)
        m = -np.inf
        # first pass: max term
        for l in range(2, a + 1):
            if kv[l] == np.inf:
                m = np.inf
                break
            v = _log_term(a, l, kv[l], lga, lq, l1q, mode)
            if v > m:
                m = v
        if m == np.inf:
            out[i] = np.inf
            continue
        if m == -np.inf:
            out[i] = 0.0
            continue
        acc = 0.0
        for l in range(2, a + 1):
            v = _log_term(a, l, kv[l], lga, lq, l1q, mode)
            acc += math.exp(v - m)
        # (mode 1: l = 2 takes log(e^K - 1), l >= 3 log(3 e^K - 1), each monotone: l = 3 is an end too; a
        # summand with K = 0 is 0 and carries no error)
        lk_end = 0.0
        for l in (2, 3, a):
            if l <= a:
                x = abs(_log_k(l, kv[l], mode))
                if x < np.inf and x > lk_end:
                    lk_end = x
        err = 16.0 * 2.0 ** -53 * (3.0 * lga + a * (abs(lq) + abs(l1q)) + lk_end + 1.0)
        lam1 = m + math.log(acc)  # log(A - 1)
        # (the summands' own errors shift log(A - 1) by at most the largest, err; each exp(v - m) is within
        # 2 ulps of exp of its rounded argument, whose rounding adds |v - m| u, and t |v - m| <= 1/e for
        # t = e^{-(m - v)} <= 1; the sum of n <= a terms (n + 2) ulps, relative to acc >= 1: (3 a + 3) u in
        # log acc; log and the sum m + log one ulp each of 1 + |lam1|)
        lam1 += err + (3.0 * a + 3.0) * 2.0 ** -53 + 2.0 ** -52 * (abs(lam1) + abs(m) + 1.0)
        # log(1 + e^lam1) / (alpha - 1)
        if lam1 > 0:
            v = (lam1 + math.log1p(math.exp(-lam1))) / (a - 1.0)
        else:
            v = math.log1p(math.exp(lam1)) / (a - 1.0)
        out[i] = np.nextafter(v * (1.0 + 4.0 * 2.0 ** -53), np.inf)
    return out


@njit(**_HELPER)
def _logaddexp(a, b):  # pragma: no cover - compiled
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@njit(**_HELPER)
def _ell(x, q, mu, lq, l1q):  # pragma: no cover - compiled
    """l(x) = log(1 - q + q exp(mu x - mu^2/2)) = logaddexp(log(1-q), log q + mu x - mu^2/2)."""
    return _logaddexp(l1q, lq + mu * x - 0.5 * mu * mu)


_SQRT1_2 = math.sqrt(0.5)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@njit(**_HELPER)
def _log_ndtr(z):  # pragma: no cover - compiled
    """log Phi(z), Phi the standard normal CDF, to a few ulps in both tails.

    z > 0: log1p(-Phi(-z)); -37 < z <= 0: log(erfc(-z / sqrt2) / 2) (erfc is accurate in relative terms
    there, to ~4e-16 in the log, checked against mpmath); z <= -37: log phi(z) - log(continued fraction of
    the Mills ratio), Laplace's fraction Phi(-a) / phi(a) = 1 / (a + 1 / (a + 2 / (a + 3 / (a + ...)))),
    evaluated backwards (22 terms suffice there), and past a = 40 its asymptotic series to y^6.
    """
    if z > 0.0:
        return math.log1p(-0.5 * math.erfc(z * _SQRT1_2))
    if z > -37.0:
        return math.log(0.5 * math.erfc(-z * _SQRT1_2))
    a = -z
    if a > 40.0:
        # the asymptotic series of the Mills ratio, Phi(-a) / phi(a) = (1 - y + 3 y^2 - 15 y^3 + ...) / a
        # with y = 1 / a^2, to y^6 (the next term, 135135 y^7 < 5e-18, bounds the error): ~9 ns a call
        # more than its leading term, which was used here before and was log(1 + 1/a^2) ~ 6e-4 high --
        # the split weight is multiplied by the tilt e^{w l(x)}, which can lift a term with log Phi ~ -900
        # to the integrand's peak (a core part at c = 196, 42 tau past its cut)
        y = 1.0 / (a * a)
        p = 1.0 + y * (-1.0 + y * (3.0 + y * (-15.0 + y * (105.0 + y * (-945.0 + y * 10395.0)))))
        return -0.5 * a * a - _HALF_LOG_2PI - math.log(a / p)
    t = a
    nk = 20.0 + 2600.0 / (a * a)
    for k in range(60 if nk > 60.0 else math.trunc(nk), 0, -1):
        t = a + k / t
    return -0.5 * a * a - _HALF_LOG_2PI - math.log(t)


@njit(cache=True)
def log_ndtr(z):  # pragma: no cover - compiled
    """log Phi(z) (:func:`_log_ndtr`, callable from Python)."""
    return _log_ndtr(z)


@njit(**_HELPER)
def split_log_weight(x, xcut, tau, part):  # pragma: no cover - compiled
    """log of the split weight of the output x: part 0 (core) Phi((xcut - x) / tau), part 1 (big)
    Phi((x - xcut) / tau), part < 0 (no split) 0.  The two weights sum to 1 for every x.

    Where the weight is 1 to within 1e-19 (|z| > 9 on its upper side) it is taken as 1 (an error far
    below the declared quadrature error of the MGF).
    """
    if part < 0:
        return 0.0
    z = (xcut - x) / tau if part == 0 else (x - xcut) / tau
    if z > 9.0:
        return 0.0
    return _log_ndtr(z)


@njit(**_HELPER)
def _weighted_exponent(x, wr, q, mu, lq, l1q, xcut, tau, part):  # pragma: no cover - compiled
    """f(x) = -x^2/2 + wr l(x) + log w(x): the real exponent of a split part's MGF integrand."""
    return -0.5 * x * x + wr * _ell(x, q, mu, lq, l1q) + split_log_weight(x, xcut, tau, part)


@njit(**_HELPER)
def _walk_out(x, h, floor, wr, q, mu, lq, l1q, xcut, tau, part):  # pragma: no cover - compiled
    """x moved by h, 2h, 4h, ... (h signed: the direction) until the exponent there is <= floor (at most
    200 steps)."""
    for _ in range(200):
        if _weighted_exponent(x, wr, q, mu, lq, l1q, xcut, tau, part) <= floor:
            break
        x += h
        h *= 2.0
    return x


@njit(**_HELPER)
def _weighted_window(wr, q, mu, lq, l1q, lo, hi, xcut, tau, part, span):  # pragma: no cover - compiled
    """(fmax, a, b) for a split part: the maximum of the real exponent f(x) = -x^2/2 + wr l(x) + log w(x)
    and an interval [a, b] holding every x with f(x) > fmax - span.

    A coarse scan of [lo, hi] (the unsplit window) plus a fine scan (step tau/4) of the weight's edge
    [xcut - 12 tau - 1, xcut + max(wr, 0) mu tau^2 + 12 tau + 1] (the weight's Gaussian tail lets a
    tilt growing with x (wr > 0; l' <= mu) push mass at most ~ wr mu tau^2 past the edge; a tilt with
    wr <= 0 decreases in x and pushes none); coarse points inside the fine range are left to the fine
    scan, and each found point widens the interval by its scan's step.  Each end then walks outward until
    the exponent is below fmax - span there (the scans' ends need not be).
    """
    ncoarse = 600
    step = (hi - lo) / ncoarse
    lo2 = xcut - 12.0 * tau - 1.0
    hi2 = xcut + (wr if wr > 0.0 else 0.0) * mu * tau * tau + 12.0 * tau + 1.0
    nf = 4.0 * (hi2 - lo2) / tau
    nfine = 4000 if nf > 4000.0 else math.ceil(nf)
    step2 = (hi2 - lo2) / nfine
    # one evaluation per point (the exponent's values are kept for the second pass)
    fc = np.empty(ncoarse + 1)
    ff = np.empty(nfine + 1)
    fmax = -np.inf
    for i in range(ncoarse + 1):
        x = lo + i * step
        f = _weighted_exponent(x, wr, q, mu, lq, l1q, xcut, tau, part)
        fc[i] = f
        if f > fmax:
            fmax = f
    for i in range(nfine + 1):
        x = lo2 + i * step2
        f = _weighted_exponent(x, wr, q, mu, lq, l1q, xcut, tau, part)
        ff[i] = f
        if f > fmax:
            fmax = f
    a = np.inf
    b = -np.inf
    for i in range(ncoarse + 1):
        x = lo + i * step
        if lo2 <= x <= hi2:
            continue
        if fc[i] > fmax - span:
            if x - step < a:
                a = x - step
            if x + step > b:
                b = x + step
    for i in range(nfine + 1):
        x = lo2 + i * step2
        if ff[i] > fmax - span:
            if x - step2 < a:
                a = x - step2
            if x + step2 > b:
                b = x + step2
    if not a < b:
        a = lo
        b = hi
    # the scans need not reach fmax - span at their ends: past a cut beyond the coarse range the fine scan
    # stops 12 tau + 1 after the cut, where an exponent falling at slope ~15 is still within e^-24 of its
    # maximum (a big part at q = 1.9e-4, sigma = 4.37, c = 9.08 (add), cut at x = 15.35: its MGF was
    # 1.4e-10 low, another one 2.4e-8).  Walk each end outward (steps doubling from the fine step) until
    # the exponent is below fmax - span there; beyond the scanned ranges it is monotone (past the tilted
    # law's peak and the weight's edge), so nothing above the threshold is left outside
    b = _walk_out(b, step2, fmax - span, wr, q, mu, lq, l1q, xcut, tau, part)
    a = _walk_out(a, -step2, fmax - span, wr, q, mu, lq, l1q, xcut, tau, part)
    return fmax, a, b


@njit(cache=True)
def sg_window(wr, q, mu, lo, hi, xcut, tau, part, span):  # pragma: no cover - compiled
    """(fmax, a, b) of :func:`_mgf_window`: the exponent's maximum and the x-window the MGF kernels
    integrate for Re w = wr and search range [lo, hi] (a split part's ``_weighted_window`` for ``part``
    >= 0, else the unsplit coarse scan), for the cost hints (``SubsampledGaussian._window``,
    ``SubsampledGaussianPart._part_window``) and :func:`sg_log_mgf_in_window`."""
    return _mgf_window(wr, q, mu, math.log(q), math.log1p(-q), lo, hi, xcut, tau, part, span)


@njit(**_HELPER)
def _search_range(wr, q, mu, lq, l1q, span):  # pragma: no cover - compiled
    """Where the window search for the integrand exp(-x^2/2 + wr l(x)) looks: around the add peak for
    wr <= 0 (the exponent is concave with curvature <= -1), else [-(14 + wr mu), 14 + wr mu + mu]."""
    if wr <= 0.0:
        xp = _add_peak(-wr, q, mu, lq, l1q)
        return xp - 14.0 - math.sqrt(2.0 * span), xp + 14.0 + math.sqrt(2.0 * span)
    reach = 14.0 + abs(wr) * mu
    return -reach, reach + mu


@njit(cache=True)
def sg_search_range(wr, q, mu, span):  # pragma: no cover - compiled
    """:func:`_search_range` callable from Python: the coarse range the MGF kernels scan for Re w = wr,
    for the cost hints (``SubsampledGaussian._window``, ``SubsampledGaussianPart._mgf_range``) and the
    windows memoised for :func:`sg_log_mgf_in_window` (the kernels' own range, bit for bit)."""
    return _search_range(wr, q, mu, math.log(q), math.log1p(-q), span)


@njit(cache=True)
def sg_log_mgf(s_re, s_im, q, mu, add, dx_max, span, xcut, tau, part, out_re, out_im):
    # pragma: no cover - compiled
    """log E_{x~N(0,1)}[exp(w l(x))] for w = s + 1 (remove) or w = -s (add), s = s_re + i s_im, written
    to ``out_re + i out_im`` (arrays of the length of ``s_re``).

    Remove pair: P = (1-q)N(0,1) + q N(mu,1), Q = N(0,1): M(s) = E_Q[(p/q)^{s+1}].
    Add pair (swap): L' = -l(x) under Q = N(0,1): M(s) = E_Q[(p/q)^{-s}].
    Trapezoid rule in x (the integrand is analytic in |Im x| < pi/mu, so it converges geometrically)
    over the region where the real part of the exponent is within ``span`` of its maximum.

    ``part`` >= 0: the same integral with the split weight ``split_log_weight(x, xcut, tau, part)``
    inside (the MGF of the core (0) or big (1) part of the P-measure, split by the output x; the two
    parts add up to the whole MGF).  The weight is an entire function of x, so the rule still converges
    geometrically once the step is a fraction of ``tau``; the window search also covers the weight's
    edge.  ``part`` < 0 is the unsplit MGF (the same arithmetic as without the weight).
    """
    n = s_re.shape[0]
    lq = math.log(q)
    l1q = math.log1p(-q)
    for j in range(n):
        if add:
            wr = -s_re[j]
            wi = -s_im[j]
        else:
            wr = s_re[j] + 1.0
            wi = s_im[j]
        # locate the maximum of the real exponent -x^2/2 + wr l(x) on a coarse grid (add with wr <= 0:
        # the exponent is concave with curvature <= -1, so a window around its peak suffices)
        lo, hi = _search_range(wr, q, mu, lq, l1q, span)
        fmax, a, b = _mgf_window(wr, q, mu, lq, l1q, lo, hi, xcut, tau, part, span)
        out_re[j], out_im[j] = _integrate(wr, wi, q, mu, lq, l1q, fmax, a, b, dx_max, xcut, tau, part)


@njit(**_HELPER)
def _grid_step(a, b, dx):  # pragma: no cover - compiled
    """(m, step): the trapezoid grid a + i step, i = 0..m, of [a, b] with step <= dx and m >= 64."""
    m = math.ceil((b - a) / dx)
    if m < 64:
        m = 64
    return m, (b - a) / m


@njit(**_HELPER)
def _integrate(wr, wi, q, mu, lq, l1q, fmax, a, b, dx_max, xcut, tau, part):  # pragma: no cover - compiled
    """(Re, Im) of log E[exp(w l(x))] (times the split weight for ``part`` >= 0) by ``sg_log_mgf``'s
    trapezoid rule on the window [a, b], fmax the real exponent's maximum there (its scale)."""
    m, dx = _grid_step(a, b, _part_step(wi, wr, q, mu, lq, l1q, b, dx_max, tau, part))
    acc_re = 0.0
    acc_im = 0.0
    for i in range(m + 1):
        x = a + i * dx
        ell = _ell(x, q, mu, lq, l1q)
        f = -0.5 * x * x + wr * ell - fmax
        if part >= 0:
            f += split_log_weight(x, xcut, tau, part)
        mag = math.exp(f)
        ph = wi * ell
        wgt = 0.5 if (i == 0 or i == m) else 1.0
        acc_re += wgt * mag * math.cos(ph)
        acc_im += wgt * mag * math.sin(ph)
    acc_re *= dx
    acc_im *= dx
    modulus = math.sqrt(acc_re * acc_re + acc_im * acc_im)
    return math.log(modulus) + fmax - 0.5 * math.log(2.0 * math.pi), math.atan2(acc_im, acc_re)


@njit(cache=True)
def sg_log_mgf_in_window(c, q, mu, add, dx_max, fmax, a, b, xcut, tau, part):  # pragma: no cover - compiled
    """``sg_log_mgf`` at one real point s = c (the real part of its log) on a window (fmax, a, b) already
    found by :func:`sg_window` for this c (w = c + 1, or -c for add): the same value, without the scan."""
    wr = -c if add else c + 1.0
    re, _ = _integrate(wr, 0.0, q, mu, math.log(q), math.log1p(-q), fmax, a, b, dx_max, xcut, tau, part)
    return re


@njit(cache=True)
def sg_phase_moment(c, q, mu, add, dx_max, span, xcut, tau, part):  # pragma: no cover - compiled
    """sum_i g_i (5 |l_i| + 4 sig_i (|log q| + mu |x_i| + mu^2/2)) / sum_i g_i with the weights g_i of
    ``sg_log_mgf``'s trapezoid rule at the real point s = c (same window: the e^{cL}-tilted law of the
    kernels' measure), sig_i = l'(x_i) / mu: the phase-rounding weight of
    :func:`mechanisms.subsampled.sg_phase_error`."""
    lq = math.log(q)
    l1q = math.log1p(-q)
    wr = -c if add else c + 1.0
    lo, hi = _search_range(wr, q, mu, lq, l1q, span)
    fmax, a, b = _mgf_window(wr, q, mu, lq, l1q, lo, hi, xcut, tau, part, span)
    g, el, dx = _line_grid(0.0, wr, q, mu, lq, l1q, a, b, dx_max, fmax, xcut, tau, part, 1.0)
    s0 = 0.0
    s1 = 0.0
    for i in range(g.shape[0]):
        x = a + i * dx
        y = lq + mu * x - 0.5 * mu * mu - l1q
        sig = 1.0 / (1.0 + math.exp(-y)) if y > -700.0 else 0.0
        s0 += g[i]
        s1 += g[i] * (5.0 * abs(el[i]) + 4.0 * sig * (abs(lq) + mu * abs(x) + 0.5 * mu * mu))
    return s1 / s0


@njit(cache=True)  # (also called from Python: the cost hint of the add direction)
def _add_peak(c, q, mu, lq, l1q):  # pragma: no cover - compiled
    """argmax of -x^2/2 - c l(x) (add direction, c >= 0): the root of -x - c l'(x), in [-c mu, 0].

    The function is concave (l is convex), so bisection on its decreasing derivative is safe.
    """
    lo = -c * mu - 1.0
    hi = 0.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        y = lq + mu * mid - 0.5 * mu * mu - l1q
        lp = mu / (1.0 + math.exp(-y)) if y > -700 else 0.0
        if -mid - c * lp > 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@njit(**_HELPER)
def _part_step(wi, wr, q, mu, lq, l1q, b, dx_max, tau, part):  # pragma: no cover - compiled
    """The trapezoid step of ``sg_log_mgf`` for one node (phase rate, curvature, and for a split part
    (``part`` >= 0) the weight's scale ``tau``).

    Geometric convergence needs dx well below the strip pi/mu and the oscillation period.
    l'(x) = mu sig(y), l''(x) = mu^2 sig (1 - sig), y = log q + mu x - mu^2/2 - log(1 - q), are
    increasing in x while sig <= 1/2: their maxima over [a, b + 1] (one unit of margin for the complex
    strip) bound the phase rate |Im w| l' and the curvature |Re w| l'' that matter here (for small q
    both are far below the global maxima mu and mu^2 / 4 on the relevant region).  On far lines w l(x)
    has curvature up to |Re w| l'', which also limits the analyticity strip usable by the rule.
    """
    yb = lq + mu * (b + 1.0) - 0.5 * mu * mu - l1q
    sig = 1.0 / (1.0 + math.exp(-yb)) if yb > -700 else 0.0
    s2 = sig * (1.0 - sig) if sig <= 0.5 else 0.25
    osc = abs(wi) * mu * sig
    dx = dx_max
    if osc > 0:
        dx = min(dx, 0.5 / osc)
    dx = min(dx, 0.5 / math.sqrt(1.0 + abs(wr) * mu * mu * s2))
    return min(dx, 0.25 * tau) if part >= 0 else dx


@njit(**_HELPER)
def _mgf_window(wr, q, mu, lq, l1q, lo, hi, xcut, tau, part, span):  # pragma: no cover - compiled
    """(fmax, a, b): the maximum of the real exponent f(x) = -x^2/2 + wr l(x) (+ the split weight) and
    an interval [a, b] holding every x with f(x) > fmax - span, from the search range [lo, hi].

    A split part (``part`` >= 0): ``_weighted_window``.  Unsplit: a 601-point coarse scan; the window
    runs from the first to the last coarse point above fmax - span, with one coarse step of margin.
    """
    if part >= 0:
        return _weighted_window(wr, q, mu, lq, l1q, lo, hi, xcut, tau, part, span)
    ncoarse = 600
    step = (hi - lo) / ncoarse
    fmax = -np.inf
    for i in range(ncoarse + 1):
        x = lo + i * step
        f = -0.5 * x * x + wr * _ell(x, q, mu, lq, l1q)
        if f > fmax:
            fmax = f
    a = lo
    for i in range(ncoarse + 1):
        x = lo + i * step
        if -0.5 * x * x + wr * _ell(x, q, mu, lq, l1q) > fmax - span:
            a = x - step
            break
    b = hi
    for i in range(ncoarse, -1, -1):
        x = lo + i * step
        if -0.5 * x * x + wr * _ell(x, q, mu, lq, l1q) > fmax - span:
            b = x + step
            break
    return fmax, a, b


@njit(**_HELPER)
def _line_grid(tmax, wr, q, mu, lq, l1q, a, b, dx_max, fmax, xcut, tau, part, sgn):
    # pragma: no cover - compiled
    """(g, el, dx): the trapezoid grid of ``sg_log_mgf``'s rule for the nodes up to |t| = ``tmax`` on
    the window [a, b] -- weighted magnitudes g (relative to e^{fmax}) and phases per unit t, el =
    sgn l(x)."""
    m, dx = _grid_step(a, b, _part_step(tmax, wr, q, mu, lq, l1q, b, dx_max, tau, part))
    g = np.empty(m + 1)
    el = np.empty(m + 1)
    for i in range(m + 1):
        x = a + i * dx
        ell = _ell(x, q, mu, lq, l1q)
        f = -0.5 * x * x + wr * ell - fmax + split_log_weight(x, xcut, tau, part)
        wgt = 0.5 if (i == 0 or i == m) else 1.0
        g[i] = wgt * math.exp(f)
        el[i] = sgn * ell  # (add: the phase of e^{-i t l})
    return g, el, dx
