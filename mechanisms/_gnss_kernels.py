"""numba kernels of core GNSS's certified worst-case RDP (:func:`mechanisms.gnss.gnss_rdp_exact`):
the supremum over the smooth-sensitivity log-ratio c in [-beta, beta] of the Renyi divergence of the two
directions of the Gaussian pair (module docstring of :mod:`mechanisms.gnss` for the closed form),
evaluated as a proven upper bound.

Certified evaluation.  Write u = e^{2c}, w = u - 1 = expm1(2c) (the variable
of the kernel: near c = 0 a float w carries far more digits of u than a float u), d = m_c^2/sigma^2 =
min(1, u)/sigma^2 (non-decreasing in u, continuous at u = 1), sigma normalised to 1 in the variances.
The two directions are, with l > 1,

    A: D_l(N(0, 1) || N(m_c, u)):  T1 = log(u)/2,  T2 = log(u/v_A)/(2(l-1)),  T3 = l d/(2 v_A),
       v_A = l u - (l-1) = 1 + l w   (increasing in u; finite iff v_A > 0);
    B: D_l(N(m_c, u) || N(0, 1)):  T1 = -log(u)/2, T2 = -log(v_B)/(2(l-1)),   T3 = l d/(2 v_B),
       v_B = l - (l-1) u = 1 - (l-1) w   (decreasing in u; finite iff v_B > 0).

Monotonicity of each term in u (hence in c), where v > 0:
A-T1 increases.  A-T2 decreases: d/du [u/v_A] = (v_A - l u)/v_A^2 = -(l-1)/v_A^2 < 0.  A-T3 decreases:
for u >= 1, d = 1/sigma^2 is constant and v_A increases; for u < 1, T3 = (l/(2 sigma^2)) u/v_A, decreasing
as just shown; the two pieces join continuously at u = 1.  B-T1 decreases.  B-T2 increases (v_B
decreases).  B-T3 increases: d is non-decreasing and 1/v_B increases, both positive.  Hence on
[u_a, u_b] (anywhere, also across u = 1), with v_A(u_a) > 0 and v_B(u_b) > 0 (v_A is smallest at
u_a, v_B at u_b, so v > 0 on the whole interval),

    sup F_A <= T1_A(u_b) + T2_A(u_a) + T3_A(u_a),     sup F_B <= T1_B(u_a) + T2_B(u_b) + T3_B(u_b),

and +inf is reported if v_A(u_a) <= 0 or v_B(u_b) <= 0 can hold (the *termwise bound*).

The termwise bound alone is loose by about (u_b - u_a)/(2u) (T1's slope) even where F is flat, so it
needs about F(1 + slack)/(slope) -wide intervals everywhere F is near its maximum: with beta = 1e-4,
sigma = 50, l = 1.001 it exhausts 10^5 splits and stays 0.25 % high.  A second lemma removes this:
*F_A and F_B are quasi-convex on each side of u = 1.*  Differentiating,

    F_A'(u) = l/(2 v_A) k_A(u),  k_A = (u-1)/u - (l-1)/(sigma^2 v_A) (u<1), (u-1)/u - l/(sigma^2 v_A) (u>1),
    F_B'(u) = l/(2 v_B) k_B(u),  k_B = (u-1)/u + l/(sigma^2 v_B) (u<1), (u-1)/u + (l-1)/(sigma^2 v_B) (u>1)

(T1 + T2 contribute l(u-1)/(2 u v) in both directions; checked against mpmath's numerical derivative in
tests/test_gnss_certified.py).  (u-1)/u = 1 - 1/u increases, -1/v_A increases, 1/v_B increases: each
k is increasing on each side of 1, so F' changes sign at most once there, from - to +, and F has no
interior maximum on an interval not containing u = 1 in its interior: sup over [u_a, u_b] =
max(F(u_a), F(u_b)) (and F(1) too when 1 is inside).  (Globally: k_A(1-) = -(l-1)/sigma^2 < 0 and
k_B(1+) = (l-1)/sigma^2 > 0, so the supremum over c is attained at c = -beta or c = +beta.)
The *interval bound* is the smaller of the termwise bound and this one (both are upper bounds).

Rounding.  Every quantity is evaluated at float endpoints w (exact inputs); the end nodes are
expm1(-+2 beta) moved two floats outwards (expm1 errs by < 1 ulp), so the cover contains
[e^{-2 beta} - 1, e^{2 beta} - 1].  v is computed with an error-free product (Dekker): l w = p + e exactly,
s = 1 + p (exact by Sterbenz when it cancels), v = s + e, so |v - v_true| <= r (|s| + |v|) (r = 2^-53; plus
|lm1 - (l-1)| |w| for l >= 2^53 in B, plus 2^-1000 for the subnormal range); the terms use a rigorous
lower bound v_lo of v (T2, T3 decrease in v).  T2 is evaluated as -log1p((l-1)w/u)/(2(l-1)) (A) or
-log1p(-(l-1)w)/(2(l-1)) (B) when v_lo >= u/2 (resp. 1/2), so its argument is >= -1/2 and its relative
error is <= 2 x 4r (argument) + 2r (log1p, < 1 ulp) + 2r (division); otherwise as log(u/v_lo) or
-log(v_lo), whose magnitude is >= log 2, relative error <= 6r.  T1 = +-log1p(w)/2 (<= 2r), T3 (<= 4r, with
an upward-rounded 1/sigma^2).  So every term is computed to <= 13r of itself, the two additions add <= 2r
of the sum of the terms' absolute values, and 32r (sum |T|) + 2^-1000 is added before one final step up
(``_combine_up``).  This assumes glibc's log, log1p, expm1 err by < 1 ulp (documented <= 1 ulp; numba
calls libm, SVML off).

Branch and bound (``_gnss_certified_kernel``): the certified bounds at the 401 grid nodes (c = 0 is one)
give a candidate; the 400 grid cells are covered by their interval bounds and any cell above candidate
(1 + 2^-36) is bisected (at most 10^5 splits per order; if the budget runs out the remaining cells'
bounds are used as they are).  The result is the largest bound in the final cover, >= sup F whatever the
candidate.  With the quasi-convexity bound every cell's bound is <= the largest node bound, so no cell is
split; the termwise-only mode (verification, with a golden-section search for the candidate) is tested
against it.  Measured against mpmath at 50 digits: never below, at most ~2e-13 relative above.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._numerics import two_product_scalar

_GRID = 401  # odd: c = 0 is a grid node
_GOLDEN_ITERS = 80
_U = 2.0**-53
#: the branch and bound proves sup F <= candidate * (1 + _SLACK_REL) (unless it runs out of work)
_SLACK_REL = 2.0**-36
#: ulps (of 2^-53) of the sum of the terms' absolute values allowed for the closed form's rounding; the
#: derivation (docstring of :func:`_combine_up`) needs 15
_ROUND_ULPS = 32.0
#: absolute floor of the rounding allowance (covers results in the subnormal range)
_TINY = 2.0**-1000
#: bisections allowed per order in the branch and bound
_MAX_EVALS = 100_000
_STACK = 4096
#: beta >= 20: e^{2 beta} > 2.3e17 > l/(l-1) for every float l > 1, the divergence is infinite
_BETA_INF = 20.0
#: orders above 2^900 are reported +inf (F >= F(c = 0) = l/(2 sigma^2): no finite use); below it the
#: error-free product of two_product_scalar is valid for every w in [-1, e^40]
_LAM_MAX = 2.0**900
@njit(cache=True)
def _inv_s2_up(sigma):  # pragma: no cover - compiled
    """An upper bound of 1/sigma^2 (two roundings of at most u each, covered by 1 + 4u; at least 2^-1000,
    which exceeds 1/sigma^2 whenever sigma^2 overflows or 1/sigma^2 leaves the normal range)."""
    v = (1.0 / (sigma * sigma)) * (1.0 + 4.0 * _U)
    return v if v > _TINY else _TINY


@njit(cache=True)
def _node_terms(w, lam, lm1, dl, inv_up):  # pragma: no cover - compiled
    """Upper estimates, at the float w = e^{2c} - 1 (u = 1 + w), of the decreasing part of direction A and
    of the increasing part of direction B (module docstring, "Certified evaluation"):

        G_A = log(u / v_A)/(2(l-1)) + l d/(2 v_A),   v_A = l u - (l-1) = 1 + l w,
        G_B = -log(v_B)/(2(l-1))   + l d/(2 v_B),   v_B = l - (l-1) u = 1 - (l-1) w,   d = min(1, u)/sigma^2,

    returned as (G_A, |T2_A| + |T3_A|, G_B, |T2_B| + |T3_B|); G = +inf where the lower bound of v is <= 0.
    Each computed term T satisfies T_true <= T + 13 r |T|, r = 2^-53 (module docstring, "Rounding").
    """
    m = 1.0 if w >= 0.0 else 1.0 + w  # min(1, u), rounded by <= u
    u = 1.0 + w
    # v_A = 1 + l w: l w = p + e exactly; 1 + p is exact when Sterbenz applies and rounds by <= u |s|
    # otherwise, so |v - v_true| <= u (|s| + |v|) (+ 2^-1000 for products in the subnormal range)
    p, e = two_product_scalar(lam, w)
    s = 1.0 + p
    v = s + e
    err = (_U * (abs(s) + abs(v)) + _TINY) * (1.0 + 8.0 * _U)
    vlo = (v - err) * (1.0 - 4.0 * _U)
    if vlo <= 0.0:
        ga = np.inf
        gaa = np.inf
    else:
        if vlo >= 0.5 * u:
            # log(u / v_A) = -log1p((l-1) w / u), argument >= -1/2: no cancellation
            t2 = -math.log1p(lm1 * w / u) / (2.0 * lm1)
        else:
            # log(u / v_A) <= log(u / vlo), which is >= log 2 here
            t2 = math.log(u / vlo) / (2.0 * lm1)
        t3 = lam * (m * inv_up) / (2.0 * vlo)
        ga = t2 + t3
        gaa = abs(t2) + abs(t3)
    # v_B = 1 - (l-1) w: (l-1) w = p + e exactly (lm1 = l - 1 exactly below 2^53, else off by <= dl)
    p, e = two_product_scalar(lm1, w)
    s = 1.0 - p
    v = s - e
    err = (_U * (abs(s) + abs(v)) + dl * abs(w) + _TINY) * (1.0 + 8.0 * _U)
    vlo = (v - err) * (1.0 - 4.0 * _U)
    if vlo <= 0.0:
        return ga, gaa, np.inf, np.inf
    if vlo >= 0.5:
        # log v_B = log1p(-(l-1) w), argument >= -1/2
        t2 = -math.log1p(-lm1 * w) / (2.0 * lm1)
    else:
        # -log v_B <= -log(vlo), |log vlo| >= log 2 here
        t2 = -math.log(vlo) / (2.0 * lm1)
    t3 = lam * (m * inv_up) / (2.0 * vlo)
    return ga, gaa, t2 + t3, abs(t2) + abs(t3)


@njit(cache=True)
def _combine_up(t1, g, gabs):  # pragma: no cover - compiled
    """An upper bound of T1_true + G_true from the computed T1 = +-log1p(w)/2 (relative error <= 2r,
    r = 2^-53) and G = T2 + T3 with |T2| + |T3| = gabs (each true term <= computed + 13 r |computed|):
    the two additions round by <= 2r (|T1| + gabs) more, so 15 r (|T1| + gabs) suffices; _ROUND_ULPS = 32
    doubles it (covering the rounding of this allowance too), 2^-1000 covers subnormal results, and the
    sum is moved one step up."""
    if not (g < np.inf):
        return np.inf
    tot = t1 + g
    return np.nextafter(tot + (_ROUND_ULPS * _U * (abs(t1) + gabs) + _TINY), np.inf)


@njit(cache=True)
def _bound(t1_a, t1_b, ga_a, gaa_a, gb_b, gba_b):  # pragma: no cover - compiled
    """Certified upper bound of F on [w_a, w_b] from its endpoints' terms (the termwise bound): direction
    A's increasing part T1_A = log1p(w)/2 at w_b plus its decreasing part G_A at w_a; direction B's
    increasing part G_B at w_b plus its decreasing part T1_B = -log1p(w)/2 at w_a."""
    a = _combine_up(t1_b, ga_a, gaa_a)
    b = _combine_up(-t1_a, gb_b, gba_b)
    return a if a > b else b


@njit(cache=True)
def _point_bound(w, lam, lm1, dl, inv_up):  # pragma: no cover - compiled
    """Certified upper bound of F at the float w (the interval [w, w])."""
    t1 = 0.5 * math.log1p(w)
    ga, gaa, gb, gba = _node_terms(w, lam, lm1, dl, inv_up)
    return _bound(t1, t1, ga, gaa, gb, gba)


@njit(cache=True)
def _termwise_bound(wa, wb, lam, inv_up):  # pragma: no cover - compiled
    """Certified upper bound of F(lam, .) over w = e^{2c} - 1 in [wa, wb] from the termwise monotonicity
    alone (floats -1 < wa <= wb <= e^40, 1 < lam < 2^900, inv_up >= 1/sigma^2 from :func:`_inv_s2_up`)."""
    lm1 = lam - 1.0
    dl = _U * lam if lam >= 9007199254740992.0 else 0.0
    ga, gaa, _gb, _gba = _node_terms(wa, lam, lm1, dl, inv_up)
    _ga, _gaa, gb, gba = _node_terms(wb, lam, lm1, dl, inv_up)
    return _bound(0.5 * math.log1p(wa), 0.5 * math.log1p(wb), ga, gaa, gb, gba)


@njit(cache=True)
def _interval_bound(wa, wb, lam, inv_up):  # pragma: no cover - compiled
    """Certified upper bound of F(lam, .) over w in [wa, wb]: the smaller of the termwise bound and the
    quasi-convexity bound max(F(wa), F(wb), F(0) if 0 is inside) (module docstring)."""
    lm1 = lam - 1.0
    dl = _U * lam if lam >= 9007199254740992.0 else 0.0
    q = _point_bound(wa, lam, lm1, dl, inv_up)
    v = _point_bound(wb, lam, lm1, dl, inv_up)
    if v > q:
        q = v
    if wa < 0.0 and 0.0 < wb:
        v = _point_bound(0.0, lam, lm1, dl, inv_up)
        if v > q:
            q = v
    t = _termwise_bound(wa, wb, lam, inv_up)
    return t if t < q else q


@njit(cache=True)
def _golden_max(lo, hi, lam, lm1, dl, inv_up, iters):  # pragma: no cover - compiled
    """Largest point bound seen by a golden-section search of c -> F(e^{2c} - 1) on [lo, hi] (a candidate)."""
    g = 0.6180339887498949
    a, b = lo, hi
    x1 = b - g * (b - a)
    x2 = a + g * (b - a)
    f1 = _point_bound(math.expm1(2.0 * x1), lam, lm1, dl, inv_up)
    f2 = _point_bound(math.expm1(2.0 * x2), lam, lm1, dl, inv_up)
    best = f1 if f1 > f2 else f2
    for _ in range(iters):
        if f1 < f2:
            a = x1
            x1 = x2
            f1 = f2
            x2 = a + g * (b - a)
            f2 = _point_bound(math.expm1(2.0 * x2), lam, lm1, dl, inv_up)
            if f2 > best:
                best = f2
        else:
            b = x2
            x2 = x1
            f2 = f1
            x1 = b - g * (b - a)
            f1 = _point_bound(math.expm1(2.0 * x1), lam, lm1, dl, inv_up)
            if f1 > best:
                best = f1
    return best


@njit(cache=True)
def _w_nodes(beta, ngrid):  # pragma: no cover - compiled
    """(c grid, w = e^{2c} - 1 nodes): the end nodes moved two floats outwards (expm1 errs by < 1 ulp), so
    [w_0, w_{n-1}] contains [e^{-2 beta} - 1, e^{2 beta} - 1]; the inner nodes are any non-decreasing
    floats, with w = 0 exactly at c = 0."""
    half = (ngrid - 1) // 2
    cs = np.empty(ngrid)
    ws = np.empty(ngrid)
    for k in range(ngrid):
        cs[k] = beta * (k - half) / half
        ws[k] = math.expm1(2.0 * cs[k])
    ws[0] = np.nextafter(np.nextafter(math.expm1(-2.0 * beta), -np.inf), -np.inf)
    ws[ngrid - 1] = np.nextafter(np.nextafter(math.expm1(2.0 * beta), np.inf), np.inf)
    ws[half] = 0.0
    for k in range(1, ngrid):
        if ws[k] < ws[k - 1]:
            ws[k] = ws[k - 1]
    return cs, ws


@njit(cache=True)
def _cell_bound(quasiconvex, t1_a, t1_b, ga_a, gaa_a, gb_b, gba_b, p_a, p_b):  # pragma: no cover
    """Bound of a cell [u_a, u_b] not containing 1 inside from its endpoints' terms and point bounds p_a,
    p_b: the termwise bound, and with ``quasiconvex`` also max(p_a, p_b) (the smaller is taken)."""
    t = _bound(t1_a, t1_b, ga_a, gaa_a, gb_b, gba_b)
    if quasiconvex:
        q = p_a if p_a > p_b else p_b
        if q < t:
            return q
    return t


@njit(cache=True)
def _gnss_certified_kernel(lams, beta, sigma, ngrid, iters, max_evals, quasiconvex):  # pragma: no cover
    """Per order: a candidate maximum, then a branch and bound over w that covers [u_0, u_{n-1}] by
    intervals whose certified bound is <= candidate (1 + _SLACK_REL), splitting the others (at most
    ``max_evals`` splits; then the remaining intervals' bounds are taken as they are).  Returns the
    largest bound of the final cover: >= sup F, whatever the candidate.

    ``quasiconvex`` (production): cell bounds use the quasi-convexity lemma too, every grid cell's bound is
    then <= the largest node value, which is the candidate: no golden search, no split.  Without it
    (verification mode): the candidate also gets a golden-section search around every grid local maximum
    and the cover is refined with the termwise bound alone."""
    n = lams.shape[0]
    out = np.empty(n)
    if beta >= _BETA_INF:
        out[:] = np.inf
        return out
    inv_up = _inv_s2_up(sigma)
    cs, ws = _w_nodes(beta, ngrid)
    t1s = np.empty(ngrid)
    for k in range(ngrid):
        t1s[k] = 0.5 * math.log1p(ws[k])
    ga = np.empty(ngrid)
    gaa = np.empty(ngrid)
    gb = np.empty(ngrid)
    gba = np.empty(ngrid)
    vals = np.empty(ngrid)
    m = _STACK + ngrid
    s_lo, s_hi, s_t1lo, s_t1hi = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    s_ga, s_gaa, s_gb, s_gba = np.empty(m), np.empty(m), np.empty(m), np.empty(m)
    s_plo, s_phi, s_bd = np.empty(m), np.empty(m), np.empty(m)
    for i in range(n):
        lam = lams[i]
        if not lam < _LAM_MAX:
            out[i] = np.inf
            continue
        lm1 = lam - 1.0
        dl = _U * lam if lam >= 9007199254740992.0 else 0.0
        best = -np.inf
        for k in range(ngrid):
            ga[k], gaa[k], gb[k], gba[k] = _node_terms(ws[k], lam, lm1, dl, inv_up)
            vals[k] = _bound(t1s[k], t1s[k], ga[k], gaa[k], gb[k], gba[k])
            if vals[k] > best:
                best = vals[k]
        if not best < np.inf:
            out[i] = np.inf
            continue
        if not quasiconvex:
            for k in range(ngrid):
                left = vals[k - 1] if k > 0 else -np.inf
                right = vals[k + 1] if k < ngrid - 1 else -np.inf
                if vals[k] >= left and vals[k] >= right:
                    if k > 0:
                        v = _golden_max(cs[k - 1], cs[k], lam, lm1, dl, inv_up, iters)
                        if v > best:
                            best = v
                    if k < ngrid - 1:
                        v = _golden_max(cs[k], cs[k + 1], lam, lm1, dl, inv_up, iters)
                        if v > best:
                            best = v
        thr = best * (1.0 + _SLACK_REL)
        top = 0
        for k in range(ngrid - 1):
            s_lo[top], s_hi[top], s_t1lo[top], s_t1hi[top] = ws[k], ws[k + 1], t1s[k], t1s[k + 1]
            s_ga[top], s_gaa[top], s_gb[top], s_gba[top] = ga[k], gaa[k], gb[k + 1], gba[k + 1]
            s_plo[top], s_phi[top] = vals[k], vals[k + 1]
            s_bd[top] = _cell_bound(quasiconvex, t1s[k], t1s[k + 1], ga[k], gaa[k], gb[k + 1], gba[k + 1],
                                    vals[k], vals[k + 1])
            top += 1
        res = -np.inf
        splits = 0
        while top > 0:
            top -= 1
            bd = s_bd[top]
            a = s_lo[top]
            b = s_hi[top]
            mid = a + 0.5 * (b - a)
            if bd <= thr or splits >= max_evals or top + 2 > m or not (a < mid and mid < b):
                if bd > res:
                    res = bd
                continue
            splits += 1
            t1m = 0.5 * math.log1p(mid)
            gam, gaam, gbm, gbam = _node_terms(mid, lam, lm1, dl, inv_up)
            pm = _bound(t1m, t1m, gam, gaam, gbm, gbam)
            t1a, t1b, plo, phi = s_t1lo[top], s_t1hi[top], s_plo[top], s_phi[top]
            ga_a, gaa_a, gb_b, gba_b = s_ga[top], s_gaa[top], s_gb[top], s_gba[top]
            # [a, mid]
            s_hi[top], s_t1hi[top], s_gb[top], s_gba[top], s_phi[top] = mid, t1m, gbm, gbam, pm
            s_bd[top] = _cell_bound(quasiconvex, t1a, t1m, ga_a, gaa_a, gbm, gbam, plo, pm)
            top += 1
            # [mid, b]
            s_lo[top], s_hi[top], s_t1lo[top], s_t1hi[top] = mid, b, t1m, t1b
            s_ga[top], s_gaa[top], s_gb[top], s_gba[top] = gam, gaam, gb_b, gba_b
            s_plo[top], s_phi[top] = pm, phi
            s_bd[top] = _cell_bound(quasiconvex, t1m, t1b, gam, gaam, gb_b, gba_b, pm, phi)
            top += 1
        out[i] = res
    return out
