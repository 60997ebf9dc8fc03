"""Characteristic-function route (:mod:`conversions.contour`): safe-side root finding for eps(delta)
(bracketing, smooth upper roots, snapping) and the bounded minimiser of the Chernoff exponent."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .contour_terms import _U64, EpsilonBounds, _log_kappa

if TYPE_CHECKING:  # annotations only (contour_pld imports this module)
    from .contour_pld import ComposedPLD
def _chernoff_margin(pld: ComposedPLD, c: float, eps: float) -> float:
    """Bound on the rounding error of the float Chernoff exponent log kappa(c) + log M(c) - c eps: a few
    ulps of each summand (log M(c) = sum_j k_j log M_j(c), each term and the sum rounded)."""
    mag = sum(k * abs(m.log_mgf_real(c, pld.direction)) for m, k in pld.entries)
    return 16.0 * _U64 * (len(pld.entries) + 4.0) * (1.0 + abs(_log_kappa(c)) + mag + abs(c * eps))


def _memo(fn):
    """fn with its results kept for this query (root finders revisit the same points)."""
    seen: dict = {}

    def wrapped(e: float):
        e = float(e)
        if e not in seen:
            seen[e] = fn(e)
        return seen[e]

    return wrapped


def _minimize_bounded(f, a: float, b: float, xatol: float) -> tuple[float, float]:
    """(x, f(x)) minimising a unimodal f on [a, b]: Brent's method (golden sections with parabolic
    steps), like scipy's bounded ``minimize_scalar`` but without its per-call overhead (this runs
    twice per query on functions costing a microsecond)."""
    golden = 0.3819660112501051
    x = w = v = a + golden * (b - a)
    fx = fw = fv = f(x)
    d = e = 0.0
    for _ in range(200):
        m = 0.5 * (a + b)
        tol1 = 1.5e-8 * abs(x) + xatol / 3.0
        tol2 = 2.0 * tol1
        if abs(x - m) <= tol2 - 0.5 * (b - a):
            break
        parabolic = False
        if abs(e) > tol1:
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            if abs(p) < abs(0.5 * q * e) and q * (a - x) < p < q * (b - x):
                e, d = d, p / q
                u = x + d
                if u - a < tol2 or b - u < tol2:
                    d = tol1 if x < m else -tol1
                parabolic = True
        if not parabolic:
            e = (b - x) if x < m else (a - x)
            d = golden * e
        u = x + (d if abs(d) >= tol1 else (tol1 if d > 0 else -tol1))
        fu = f(u)
        if fu <= fx:
            if u < x:
                b = x
            else:
                a = x
            v, fv, w, fw, x, fx = w, fw, x, fx, u, fu
        else:
            if u < x:
                a = u
            else:
                b = u
            if fu <= fw or w == x:
                v, fv, w, fw = w, fw, u, fu
            elif fu <= fv or v == x or v == w:
                v, fv = u, fu
    return x, fx


def _chernoff_eps_opt(pld: ComposedPLD, d_fin: float) -> tuple[float, float]:
    """min_c (log kappa(c) + log M(c) - log d) / c and its argmin (a rigorous eps bound)."""
    cmax = min(pld.max_order * 0.98, 1e5)
    ld = math.log(d_fin)

    def f(x: float) -> float:
        c = math.exp(x)
        v = (_log_kappa(c) + pld.log_mgf_real(c) - ld) / c
        return v if math.isfinite(v) else 1e300

    # any c gives a rigorous bound; near the optimum the value is flat (an error x in log c costs
    # O(x^2)), and the exact root is found later on the contour: 1e-4 is ample
    x, fx = _minimize_bounded(f, math.log(1e-6), math.log(cmax), 1e-4)
    c = float(math.exp(x))
    if fx >= 1e300:
        return max(float(fx), 0.0), c
    # round the float bound up: a few ulps of the exponent's summands, divided by c
    margin = (_chernoff_margin(pld, c, 0.0) + 4.0 * _U64 * abs(ld)) / c
    return max(float(fx) + margin + 4.0 * _U64 * abs(float(fx)), 0.0), c


def _bracket_above(f_up, hi: float) -> float:
    """A point >= hi where f_up <= 0 (f_up is non-increasing up to rounding)."""
    k = 0
    while f_up(hi) > 0.0:
        hi = hi * 1.5 + 1.0
        k += 1
        if k > 60:
            raise FloatingPointError("could not bracket eps(delta)")
    return hi


def _upper_root_smooth(f_up, hi: float, slope: float) -> float:
    """Smallest eps >= 0 with f_up(eps) <= 0 for a smooth f_up = log delta_up - log delta.

    Near the root log delta(eps) falls with slope about -c (c: the Chernoff-optimal line), so Newton
    steps with that slope from the Chernoff bound give a tight bracket in one or two calls.
    """
    b = _bracket_above(f_up, hi)
    tol = 1e-11 * max(1.0, b)
    a = None
    step = 0.0
    for _ in range(4):
        # overshoot slightly (and by half the tolerance) so that x lands below the root
        x = b + f_up(b) / max(slope, 1e-12) * 1.02 - 0.5 * tol
        if x <= 0.0:
            break
        if f_up(x) > 0.0:
            a = x
            break
        step = b - x
        b = x
    if a is None and step > 0.0:
        # still above the root after the Newton steps (which shrink geometrically): walk down
        d = max(step, tol)
        while a is None and b - d > 0.0:
            x = b - d
            if f_up(x) > 0.0:
                a = x
            else:
                b = x
                d *= 4.0
    if a is None:
        if f_up(0.0) <= 0.0:
            return 0.0
        a = 0.0
    return _root_bracket(f_up, a, f_up(a), b, f_up(b), tol)


def _root_bracket(f, a: float, fa: float, b: float, fb: float, tol: float) -> float:
    """b' with f(b') <= 0 and f > 0 somewhere in (b' - tol, b'], for f non-increasing, fa > 0 >= fb.

    Illinois regula falsi (superlinear on the near-linear log delta) that keeps the sign bracket, so
    its upper end is certified as it stands.  Trial points stay tol/4 inside the bracket so that the
    last steps straddle the root; after 40 steps (kinks of delta at atom losses) it bisects.
    """
    side = 0
    n = 0
    while b - a > tol:
        n += 1
        if n > 40 or not (fb < fa) or fb < -500.0:  # (-800: delta_up = 0, no slope to follow)
            x = 0.5 * (a + b)
        else:
            x = b - fb * (b - a) / (fb - fa)
        x = min(max(x, a + 0.25 * tol), b - 0.25 * tol)
        fx = f(x)
        if fx > 0.0:
            a, fa = x, fx
            if side == -1:
                fb *= 0.5
            side = -1
        else:
            b, fb = x, fx
            if side == 1:
                fa *= 0.5
            side = 1
    return b


def _snap_up(f_up, b: float) -> float:
    """The smallest point of the grid g Z (g a power of two near 1e-12 max(1, b)) at or below ``b`` with
    f_up <= 0 whose left neighbour has f_up > 0 (``b`` itself satisfies f_up(b) <= 0).

    The root finders stop anywhere within their tolerance, so two queries at nearby delta could return
    certified eps in the wrong order; on a fixed grid the answer is the first grid point of the set
    {f_up <= 0}, which only grows with delta: eps(delta) is then non-increasing in delta (for the same
    certified delta function, e.g. every purely atomic ledger)."""
    if not (b > 0.0 and math.isfinite(b)):
        return b
    # the root finders leave b within 1e-11 max(1, b) above the first point with f_up <= 0: a grid of
    # an eighth of that reaches it in at most 9 steps down (and adds at most g ~ 1e-12 b)
    g = 2.0 ** math.floor(math.log2(1e-11 * max(1.0, b) / 8.0))
    x = math.ceil(b / g) * g
    for _ in range(8):  # (x >= b; f_up non-increasing: f_up(x) <= 0 up to rounding)
        if f_up(x) <= 0.0:
            break
        x += g
    else:
        return b
    for _ in range(12):
        y = x - g
        if y < 0.0 or f_up(y) > 0.0:
            break
        x = y
    return x


def _solve(pld, delta, up_fn, lo_fn, hi: float, details, slope: float) -> EpsilonBounds:
    """eps bracket from the certified (``up_fn``) and lower (``lo_fn``) delta brackets; ``hi`` and
    ``slope``: the optimised Chernoff bound and its line (start and slope of the root search)."""
    ld = math.log(delta)

    def f_up(e):
        u = up_fn(e)
        return (math.log(u) if u > 0 else -800.0) - ld

    if not math.isfinite(hi):
        hi = 1.0
    eps_up = _snap_up(f_up, _upper_root_smooth(f_up, hi, slope))
    # lower bound: largest eps with delta_lower(eps) >= delta
    def f_lo(e):
        v = lo_fn(e)
        return (math.log(v) if v > 0 else -800.0) - ld

    if eps_up == 0.0:
        eps_lo = 0.0
    elif f_lo(eps_up) >= 0.0:
        eps_lo = eps_up
    else:
        # walk down from eps_up (the grid is accurate near its design point, not at eps = 0)
        d = 1e-9 * max(1.0, eps_up)
        a = eps_up - d
        while a > 0.0 and f_lo(a) < 0.0:
            d *= 4.0
            a = eps_up - d
        if a <= 0.0:
            a = 0.0
        if f_lo(a) < 0.0:
            eps_lo = 0.0
        elif eps_up - a <= 4.1e-9 * max(1.0, eps_up):
            eps_lo = a  # a bracket of relative width <= 4e-9 already: refining it is not worth the calls
        else:
            from scipy.optimize import brentq  # (imported here: rarely needed, slow to import)

            eps_lo = brentq(f_lo, a, eps_up, xtol=1e-13 * max(1.0, eps_up), rtol=1e-15, maxiter=300)
            step = 1e-14 * max(1.0, eps_lo)
            while eps_lo > 0 and f_lo(eps_lo) < 0.0:
                eps_lo = max(eps_lo - step, 0.0)
                step *= 2
    est = 0.5 * (eps_lo + eps_up)
    return EpsilonBounds(delta, est, eps_lo, eps_up, pld.direction, dict(details))
