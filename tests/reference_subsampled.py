"""Independent high-precision reference for the T-fold Poisson-subsampled Gaussian (T in {1, 2, 3}).

Nothing here imports from ``accountant/``, ``mechanisms/`` or ``conversions/``.  Everything is evaluated
with mpmath at ``dps`` decimal digits by quadrature in the *output* variables x_1..x_T.

Pair (sensitivity 1, noise s = sigma), add/remove relation:

* remove: P = (1-q) N(0, s^2) + q N(1, s^2), Q = N(0, s^2),
  loss L(x) = log(p(x)/q(x)) = log(1 - q + q e^{(2x-1)/(2s^2)}), increasing, L >= log(1-q);
* add (the swap): P = N(0, s^2), Q = (1-q) N(0, s^2) + q N(1, s^2), loss -L(x), <= -log(1-q).

Privacy profile of T i.i.d. steps: delta_T(eps) = E_P[(1 - e^{eps - L(x_1) - ... - L(x_T)})_+].

Method (Fubini on the last coordinate):
    delta_1(e)      = P(L > e) - e^e Q(L > e)              closed form (normal CDFs at the threshold x*),
    delta_{k+1}(e)  = int p(x) delta_k(e - L(x)) dx          (k = 1, 2),
so T = 1 is a closed form (also checked against the direct 1-D quadrature :func:`sg_delta_quad1`), T = 2
a 1-D tanh-sinh quadrature of closed forms and T = 3 a nested 2-D one.  delta_k(e) is C^infinity but not
analytic at e = j log(1-q) (remove) / e = -j log(1-q) (add), j = 1..k (the loss law is flat at its end
point); the x-range is split where e - L(x) hits those points and at the mixture centres 0, 1/2, 1.
Error: tanh-sinh with these splits converges double-exponentially; the self-tests
(tests/test_reference_subsampled.py) compare dps=30 against dps=45 (T = 2) and dps=20 against dps=30
(T = 3): agreement ~1e-25 / ~1e-15 relative.  Declared accuracy: 1e-20 relative (T <= 2, dps 30),
1e-12 relative (T = 3, dps 20, the default for T = 3).

Also: :func:`sg_delta_mgf` computes the same delta_T by an unrelated route (numerical inversion of the
moment generating function along a vertical line, spec 02b) for the cross-check of T = 2.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
from scipy import optimize as _opt
from scipy import special as _sp

__all__ = ["sg_delta_ref", "sg_eps_ref", "sg_delta_quad1", "sg_delta_mgf", "KNOWN_EPS_T1"]

#: near-atomic reference table (dp-accounting PLD at grid 1e-5, stable to 6 digits): (q, sigma, T, delta)
# -> eps,
#: max over the two directions.
KNOWN_EPS_T1 = {(0.01, 1.1, 1, 1e-5): 0.142291}


def _check(sigma, q, T, direction):
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma}")
    if not 0 <= q <= 1:
        raise ValueError(f"q must be in [0, 1], got {q}")
    if T not in (1, 2, 3):
        raise ValueError(f"T must be 1, 2 or 3, got {T}")
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")


class _Pair:
    """The one-step pair at the current mpmath precision."""

    def __init__(self, sigma, q, direction):
        self.s = mp.mpf(sigma)
        self.q = mp.mpf(q)
        self.add = direction == "add"
        self.l1q = mp.log1p(-self.q) if self.q < 1 else -mp.inf  # log(1-q)

    def p(self, x):
        """Density of P at x."""
        s, q = self.s, self.q
        n0 = mp.npdf(x, 0, s)
        if self.add:
            return n0
        return (1 - q) * n0 + q * mp.npdf(x, 1, s)

    def loss(self, x):
        """Privacy loss of the pair at output x."""
        s, q = self.s, self.q
        z = (2 * x - 1) / (2 * s * s)
        lv = mp.log1p(q * mp.expm1(z)) if z < 30 else z + mp.log(q) + mp.log1p((1 - q) * mp.exp(-z) / q)
        return -lv if self.add else lv

    def x_of_remove_loss(self, ell):
        """Inverse of the remove loss: x with log(1 - q + q e^{(2x-1)/(2s^2)}) = ell (ell > log(1-q))."""
        s, q = self.s, self.q
        return s * s * mp.log((mp.expm1(ell) + q) / q) + mp.mpf(1) / 2

    def delta1(self, e):
        """Exact one-step profile delta_1(e) for every real e."""
        s, q = self.s, self.q
        if q == 0:
            return -mp.expm1(e) if e < 0 else mp.mpf(0)
        if not self.add:
            if e <= self.l1q or mp.expm1(e) + q <= 0:
                return -mp.expm1(e)
            xs = self.x_of_remove_loss(e)
            r = q * mp.ncdf(-(xs - 1) / s) - (mp.expm1(e) + q) * mp.ncdf(-xs / s)
        else:
            if e >= -self.l1q or mp.expm1(-e) + q <= 0:
                return mp.mpf(0)
            xs = self.x_of_remove_loss(-e)  # -L(x) > e  <=>  x < xs
            r = mp.ncdf(xs / s) * (-mp.expm1(e) + mp.exp(e) * q) - mp.exp(e) * q * mp.ncdf((xs - 1) / s)
        return r if r > 0 else mp.mpf(0)

    def splits(self, e, k):
        """Split points for int p(x) delta_k(e - L(x)) dx (see the module docstring)."""
        s = self.s
        pts = {mp.mpf(0), mp.mpf(1) / 2, mp.mpf(1), -10 * s, 1 + 10 * s}
        if self.q < 1 and self.q > 0:
            for j in range(1, k + 1):
                if not self.add:  # e - L(x) = j log(1-q)  <=>  L(x) = e - j log(1-q) (> log(1-q) needed)
                    ell = e - j * self.l1q
                    if ell > self.l1q and mp.expm1(ell) + self.q > 0:
                        pts.add(self.x_of_remove_loss(ell))
                else:  # e + L(x) = -j log(1-q)  <=>  L(x) = -j log(1-q) - e
                    ell = -j * self.l1q - e
                    if ell > self.l1q and mp.expm1(ell) + self.q > 0:
                        pts.add(self.x_of_remove_loss(ell))
        return [-mp.inf] + sorted(pts) + [mp.inf]

    def delta(self, e, k):
        """delta_k(e) by the recursion delta_{k+1}(e) = int p(x) delta_k(e - L(x)) dx."""
        if k == 1:
            return self.delta1(e)
        return _scaled_quad(lambda x: self.p(x) * self.delta(e - self.loss(x), k - 1), self.splits(e, k - 1))


def _scaled_quad(f, pts):
    """mp.quad of f over the split points ``pts``, with f first divided by its largest value at the finite
    split points and their midpoints: mp.quad's stopping rule is an *absolute* tolerance 10^-dps, so an
    integrand of size 1e-53 would otherwise be accepted at a crude degree."""
    fin = [x for x in pts if mp.isfinite(x)]
    samples = fin + [(a + b) / 2 for a, b in zip(fin, fin[1:], strict=False)]
    scale = max(abs(f(x)) for x in samples) if samples else mp.mpf(0)
    if not scale > 0:
        scale = mp.mpf(1)
    return mp.quad(lambda x: f(x) / scale, pts) * scale


def _loss_np(x, s, q, add):
    z = (2.0 * x - 1.0) / (2.0 * s * s)
    with np.errstate(over="ignore", divide="ignore"):
        if q == 1.0:
            lv = z
        else:
            lv = np.where(z < 30.0, np.log1p(q * np.expm1(np.minimum(z, 30.0))),
                          z + math.log(q) + np.log1p((1.0 - q) * np.exp(-np.maximum(z, 30.0)) / q))
    return -lv if add else lv


def _log_u(e, q):
    """log(e^e - 1 + q) where positive (nan elsewhere), float64, stable for large e."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        big = e + np.log1p((q - 1.0) * np.exp(-np.maximum(e, 30.0)))
        small = np.log(np.expm1(np.minimum(e, 30.0)) + q)
    return np.where(e > 30.0, big, small)


def _delta1_np(e, s, q, add):
    """Closed-form one-step profile (float64, vectorised); same formulas as :meth:`_Pair.delta1`."""
    e = np.asarray(e, dtype=float)
    out = np.empty_like(e)
    lq = math.log(q)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if not add:
            lu = _log_u(e, q)
            low = ~(lu > -np.inf) | np.isnan(lu)
            out[low] = -np.expm1(e[low])
            xs = s * s * (lu[~low] - lq) + 0.5
            r = q * _sp.ndtr(-(xs - 1.0) / s) - np.exp(lu[~low] + _sp.log_ndtr(-xs / s))
            out[~low] = r
        else:
            lu = _log_u(-e, q)
            high = ~(lu > -np.inf) | np.isnan(lu)
            out[high] = 0.0
            xs = s * s * (lu[~high] - lq) + 0.5
            ee = e[~high]
            a = -np.expm1(ee + math.log1p(-q)) if q < 1 else 1.0
            r = _sp.ndtr(xs / s) * a - np.exp(ee + lq + _sp.log_ndtr((xs - 1.0) / s))
            out[~high] = r
    return np.maximum(out, 0.0)


_GL = {}


def _nodes(s, special, panel, n, zr=13.0):
    """Composite Gauss-Legendre nodes/weights on [-zr s, 1 + zr s] (P-mass outside <= 2 Phi(-zr); the
    callers widen zr until that is negligible relative to their result).

    Panels of width min(panel, s^2/2, s/2), plus a geometrically graded mesh (ratio 1/2, down to 2^-31)
    on both sides of every point of ``special`` (where the integrand behaves like a smooth function of
    log|x - c|; grading makes the rule converge there).
    """
    if n not in _GL:
        _GL[n] = np.polynomial.legendre.leggauss(n)
    g, gw = _GL[n]
    lo, hi = -zr * s, 1.0 + zr * s
    width = min(panel, 0.5 * s * s, 0.5 * s)
    pts = [np.arange(lo, hi, width), [hi, 0.0, 0.5, 1.0]]
    grade = width * 0.5 ** np.arange(32)
    for c in special:
        if lo < c < hi:
            pts.append(c + grade)
            pts.append(c - grade)
            pts.append([c])
    edges = np.unique(np.clip(np.concatenate(pts), lo, hi))
    a, b = edges[:-1, None], edges[1:, None]
    x = (0.5 * (b - a) * g + 0.5 * (a + b)).ravel()
    w = (0.5 * (b - a) * gw).ravel()
    return x, w


def _x_of_loss_np(ell, s, q, add):
    """x with loss(x) = ell (None if outside the loss range)."""
    v = -ell if add else ell
    if q < 1 and (v <= math.log1p(-q) or math.expm1(v) + q <= 0):
        return None
    lu = float(_log_u(np.array([v]), q)[0]) if q < 1 else v
    return s * s * (lu - math.log(q)) + 0.5


def _special(e, s, q, add, k):
    """x where e - L(x) = j log(1-q) (remove) / -j log(1-q) (add), j = 1..k: the points where
    delta_k(e - L(x)) is not analytic."""
    if q >= 1:
        return []
    out = []
    for j in range(1, k + 1):
        ell = e - j * math.log1p(-q) if not add else e + j * math.log1p(-q)
        xv = _x_of_loss_np(ell, s, q, add)
        if xv is not None:
            out.append(xv)
    return out


def _px(x, s, q, add):
    n0 = np.exp(-0.5 * (x / s) ** 2) / (s * math.sqrt(2 * math.pi))
    if add:
        return n0
    return (1.0 - q) * n0 + q * np.exp(-0.5 * ((x - 1.0) / s) ** 2) / (s * math.sqrt(2 * math.pi))


def _delta_k_np(e, s, q, add, k, panel, n):
    """delta_k(e) = int p(x) delta_{k-1}(e - L(x)) dx (float64 composite Gauss-Legendre)."""
    if k == 1:
        return float(_delta1_np(np.array([e]), s, q, add)[0])
    if add and q < 1 and e >= -k * math.log1p(-q):
        return 0.0  # the add loss is <= -log(1-q) per step: exactly 0
    zr = 13.0
    while True:
        x, w = _nodes(s, _special(e, s, q, add, k - 1), panel, n, zr)
        wp = w * _px(x, s, q, add)
        lx = _loss_np(x, s, q, add)
        if k == 2:
            val = float(np.dot(wp, _delta1_np(e - lx, s, q, add)))
        else:
            keep = wp > 1e-300
            val = float(sum(wi * _delta_k_np(e - li, s, q, add, k - 1, panel, n)
                            for wi, li in zip(wp[keep], lx[keep], strict=True)))
        # the integrand is <= p(x), so the dropped part is <= the P-mass outside [-zr s, 1 + zr s]
        if 2.0 * _sp.ndtr(-zr) <= 1e-17 * val or zr >= 38.0:
            return val
        zr = min(38.0, math.sqrt(2.0 * (math.log(2.0) + 17.0 * math.log(10.0)
                                        - math.log(max(val, 1e-300)))) + 1.0)


def sg_delta_ref_np(eps, sigma, q, T, direction="remove", panel=0.5, n=12):
    """delta_T(eps) for T in {1, 2, 3} in float64: the same recursion as the mpmath route,
    delta_k(e) = int p(x) delta_{k-1}(e - L(x)) dx, by composite Gauss-Legendre rules (``n`` nodes per
    panel, graded panels at the non-analytic points, see :func:`_nodes`), closed form at k = 1.  The
    x-range [-z s, 1 + z s] starts at z = 13 and is widened until the P-mass outside it is below 1e-17
    times the result (the integrand is at most p(x)); results below ~1e-300 are not resolved.
    Accuracy ~1e-13 relative (checked against the mpmath route at T = 2 and by node refinement at T = 3 in
    the self-tests).  The default route for T = 3.
    """
    _check(sigma, q, T, direction)
    s, q, add = float(sigma), float(q), direction == "add"
    if q == 0.0:
        return max(0.0, -math.expm1(eps))
    return _delta_k_np(float(eps), s, q, add, T, panel, n)


def sg_delta_ref(eps, sigma, q, T, direction="remove", dps=30, as_mpf=False, method=None):
    """Reference delta_T(eps) of the T-fold Poisson-subsampled Gaussian (sensitivity 1), T in {1, 2, 3}.

    ``method`` "mpmath" (default for T <= 2): the nested tanh-sinh recursion at ``dps`` digits (declared
    relative accuracy 1e-20 at dps 30; T = 3 takes minutes); "float" (default for T = 3):
    :func:`sg_delta_ref_np` (~1e-13 relative, < 2 s).  Any real ``eps``; returns a float (or the mpf
    with ``as_mpf=True`` for the mpmath route).
    """
    _check(sigma, q, T, direction)
    if q == 0:
        v = max(0.0, -float(mp.expm1(eps)))
        return mp.mpf(v) if as_mpf else v
    if method is None:
        method = "mpmath" if T <= 2 else "float"
    if method == "float":
        v = sg_delta_ref_np(float(eps), sigma, q, T, direction)
        return mp.mpf(v) if as_mpf else v
    if method != "mpmath":
        raise ValueError(f"method must be 'mpmath' or 'float', got {method!r}")
    with mp.workdps(dps + 10):
        pair = _Pair(sigma, q, direction)
        val = pair.delta(mp.mpf(eps), T)
        return val if as_mpf else float(val)


def sg_delta_quad1(eps, sigma, q, direction="remove", dps=30):
    """delta_1(eps) by direct quadrature of E_P[(1 - e^{eps - L(x)})_+] over x (no closed form used).

    The positive part is non-zero exactly where L(x) > eps (remove: x > x*; add: x < x*), so the range is
    cut at x* and tanh-sinh integrates an analytic integrand on each side.
    """
    _check(sigma, q, 1, direction)
    with mp.workdps(dps + 10):
        pr = _Pair(sigma, q, direction)
        e = mp.mpf(eps)

        def f(x):
            return pr.p(x) * -mp.expm1(e - pr.loss(x))

        s = pr.s
        base = [mp.mpf(0), mp.mpf(1) / 2, mp.mpf(1), -10 * s, 1 + 10 * s]
        if not pr.add:
            if pr.q == 1 or e > pr.l1q:
                xs = pr.x_of_remove_loss(e) if pr.q < 1 else s * s * e + mp.mpf(1) / 2
                near = [xs + s * c for c in (0.02, 0.1, 0.3, 1, 3)]  # the mass sits just above x*
                pts = [xs] + sorted({p for p in base if p > xs} | set(near)) + [mp.inf]
            else:
                pts = [-mp.inf] + sorted(base) + [mp.inf]
        else:
            if pr.q < 1 and e >= -pr.l1q:
                return 0.0
            xs = pr.x_of_remove_loss(-e) if pr.q < 1 else -s * s * e + mp.mpf(1) / 2
            near = [xs - s * c for c in (0.02, 0.1, 0.3, 1, 3)]
            pts = [-mp.inf] + sorted({p for p in base if p < xs} | set(near)) + [xs]
        return float(_scaled_quad(f, pts))


def sg_eps_ref(delta, sigma, q, T, direction="remove", method="float", dps=30, xtol=1e-13):
    """Reference eps_T(delta): the root of delta_T(eps) = ``delta`` (delta_T is continuous and strictly
    decreasing where positive) by Brent's method on a bracket found by doubling.

    ``method`` as in :func:`sg_delta_ref` ("float": ~1e-13 relative in delta, milliseconds for T <= 2,
    ~1 s per evaluation at T = 3; "mpmath": T <= 2 only in practice).  The eps error is ``xtol`` plus the
    delta error divided by |d delta / d eps| (>= delta at eps >= 0 for these pairs), i.e. ~1e-12
    absolute.  ``direction="max"`` returns the larger of the two directions (the add/remove epsilon).
    """
    if direction == "max":
        return max(sg_eps_ref(delta, sigma, q, T, d, method, dps, xtol) for d in ("remove", "add"))
    _check(sigma, q, T, direction)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta}")

    def f(e):
        return sg_delta_ref(e, sigma, q, T, direction, dps=dps, method=method) - delta

    lo, hi = -0.5, 1.0
    while f(lo) < 0:
        lo *= 2
    while f(hi) > 0:
        lo, hi = hi, 2 * hi
    return float(_opt.brentq(f, lo, hi, xtol=xtol, rtol=4 * np.finfo(float).eps))


def sg_delta_mgf(eps, sigma, q, T, direction="remove", c=1.0, t_max=200.0, h=None, nt=2000):
    """delta_T(eps) by inverting the MGF of the composed loss (spec 02b), a route independent of the
    output-space recursion above (float64 / complex128, vectorised):

        delta_T(eps) = 1/pi int_0^inf Re[ M(c + it)^T e^{-(c+it) eps} / ((c+it)(c+it+1)) ] dt,   c > 0,

    (Laplace inversion of (1 - e^{eps - x})_+ = (1/2 pi i) int e^{z (x - eps)} / (z (z+1)) dz), with
    M(z) = E_P[e^{z L(x)}] by the trapezoid rule in x with step ``h`` on [-14 s, 1 + 14 s] (integrand
    analytic in a strip and Gaussian-decaying: geometric convergence), the t-integral by composite
    Gauss-Legendre on [0, t_max] (``nt`` panels of 8 nodes) and the tail beyond ``t_max`` dropped (choose
    t_max where |M|^T / t^2 is negligible: small sigma, moderate q).
    """
    _check(sigma, q, 1, direction)
    s, add = float(sigma), direction == "add"
    if h is None:
        h = min(0.01, s * s * math.pi / (4.0 * t_max))
    x = np.arange(-14.0 * s, 1.0 + 14.0 * s + h, h)
    w = h * _px(x, s, float(q), add)
    lx = _loss_np(x, s, float(q), add)
    g, gw = np.polynomial.legendre.leggauss(8)
    edges = np.linspace(0.0, t_max, nt + 1)
    a, b = edges[:-1, None], edges[1:, None]
    t = (0.5 * (b - a) * g + 0.5 * (a + b)).ravel()
    tw = (0.5 * (b - a) * gw).ravel()
    tot = 0.0
    for i in range(0, t.size, 512):
        z = c + 1j * t[i:i + 512]
        m = np.exp(np.outer(z, lx)) @ w
        val = np.real(m**T * np.exp(-z * eps) / (z * (z + 1.0)))
        tot += float(np.dot(tw[i:i + 512], val))
    return tot / math.pi
