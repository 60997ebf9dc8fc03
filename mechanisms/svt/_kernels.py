"""numba kernels of the sparse-vector curves (hot loops only; the math is documented in :mod:`.core`).

Noise kinds used by the kernels: ``GAUSS`` (RDP a * alpha, ``a = sens^2 / (2 sigma^2)``) and ``LAP``
(Laplace RDP with normalised sensitivity ``a = sens / b``; Mironov 2017, Table II).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .._rdp_kernels import laplace_rdp_scalar

GAUSS = 0
LAP = 1

_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_SQRT2 = math.sqrt(2.0)
_INV_SQRT_PI = 1.0 / math.sqrt(math.pi)
_SQRT_PI_2 = math.sqrt(0.5 * math.pi)
# safety margin (added in log space) on numerically integrated moments: covers float rounding of the sums
LOG_MOMENT_SAFETY = 1e-9


@njit(cache=True)
def noise_rdp_scalar(kind: int, a: float, alpha: float) -> float:  # pragma: no cover - compiled
    """RDP of a noise-adding mechanism of the given kind (see module docstring)."""
    if kind == GAUSS:
        if math.isinf(alpha):
            return math.inf if a > 0.0 else 0.0
        return alpha * a
    return laplace_rdp_scalar(alpha, a)


# ------------------------------------------------------------------- transfer-theorem style bounds
@njit(cache=True)
def transfer_bound_scalar(alpha: float, k1: int, a1: float, k2: int, a2: float, cmult: float,
                          log_len: float) -> float:  # pragma: no cover - compiled
    """eps_rho(alpha) + cmult * eps_nu(alpha) + log_len / (alpha - 1) ((7.1) / Thm 7.2.7 of Zhu & Wang
    2020)."""
    v = noise_rdp_scalar(k1, a1, alpha) + cmult * noise_rdp_scalar(k2, a2, alpha)
    if not math.isinf(alpha):
        v += log_len / (alpha - 1.0)
    return v


@njit(cache=True)
def transfer_argmin_upper(k1: int, a1: float, k2: int, a2: float, cmult: float,
                          log_len: float) -> float:  # pragma: no cover - compiled
    """An order alpha_hat >= argmin of the (7.1)-type bound g (g is non-decreasing beyond alpha_hat).

    g(alpha) = [H(alpha) + log_len]/(alpha - 1) with H convex and H(1) = 0 (sum of (alpha-1) times RDP
    curves, i.e. of cumulant generating functions), so g is unimodal: it is the slope of the chord from
    (1, -log_len) to the convex graph of H.  Golden-section search on log(alpha - 1); the upper end of
    the final bracket is returned.  Any alpha_hat is *sound* for the envelope (see ``transfer_curve``);
    alpha_hat >= argmin only makes the envelope exactly monotone.
    """
    if log_len <= 0.0:
        return 1.0
    lo = -30.0
    hi = 40.0
    gr = 0.5 * (math.sqrt(5.0) - 1.0)
    x1 = hi - gr * (hi - lo)
    x2 = lo + gr * (hi - lo)
    f1 = transfer_bound_scalar(1.0 + math.exp(x1), k1, a1, k2, a2, cmult, log_len)
    f2 = transfer_bound_scalar(1.0 + math.exp(x2), k1, a1, k2, a2, cmult, log_len)
    for _ in range(120):
        if f1 <= f2:
            hi = x2
            x2 = x1
            f2 = f1
            x1 = hi - gr * (hi - lo)
            f1 = transfer_bound_scalar(1.0 + math.exp(x1), k1, a1, k2, a2, cmult, log_len)
        else:
            lo = x1
            x1 = x2
            f1 = f2
            x2 = lo + gr * (hi - lo)
            f2 = transfer_bound_scalar(1.0 + math.exp(x2), k1, a1, k2, a2, cmult, log_len)
        if hi - lo < 1e-12:
            break
    return 1.0 + math.exp(hi)


@njit(cache=True)
def transfer_curve(alpha: np.ndarray, k1: int, a1: float, k2: int, a2: float, cmult: float,
                   log_len: float, envelope: bool) -> np.ndarray:  # pragma: no cover - compiled
    """(7.1)-type bound at every order; with ``envelope`` the monotone envelope g(max(alpha, alpha_hat)).

    Sound because the true Renyi divergence is non-decreasing in alpha: a bound valid at
    alpha' >= alpha is valid at alpha.
    """
    out = np.empty(alpha.shape[0])
    ahat = transfer_argmin_upper(k1, a1, k2, a2, cmult, log_len) if envelope else 1.0
    for i in range(alpha.shape[0]):
        al = alpha[i]
        if al < ahat:
            al = ahat
        out[i] = transfer_bound_scalar(al, k1, a1, k2, a2, cmult, log_len)
    return out


@njit(cache=True)
def pure_query_curve(alpha: np.ndarray, k1: int, a1: float,
                     eps_nu_inf: float) -> np.ndarray:  # pragma: no cover - compiled
    """(7.3): eps_rho(alpha) + eps_nu(inf); non-decreasing in alpha."""
    out = np.empty(alpha.shape[0])
    for i in range(alpha.shape[0]):
        out[i] = noise_rdp_scalar(k1, a1, alpha[i]) + eps_nu_inf
    return out


# ----------------------------------------- Q+ moment (docs/derivations/sparse-vector.md §2)
@njit(cache=True)
def log_norm_sf(x: float) -> float:  # pragma: no cover - compiled
    """log(1 - Phi(x)) = log Phi(-x) for every real x (erfc; continued fraction for erfcx when x > 28)."""
    y = x / _SQRT2
    if y < 0.0:
        return math.log1p(-0.5 * math.erfc(-y))
    if y < 20.0:
        return math.log(0.5 * math.erfc(y))
    f = y
    for k in range(40, 0, -1):
        f = y + 0.5 * k / f
    return math.log(0.5 * _INV_SQRT_PI / f) - y * y


@njit(cache=True)
def _ell(z: float, t: float, s1: float, s2: float, g: float) -> float:  # pragma: no cover - compiled
    # log of the integrand: log N(z; 0, s1^2) - g log(1 - Phi((t + z)/s2))
    return -0.5 * (z / s1) ** 2 - _LOG_SQRT_2PI - math.log(s1) - g * log_norm_sf((t + z) / s2)


@njit(cache=True)
def _dell(z: float, t: float, s1: float, s2: float, g: float) -> float:  # pragma: no cover - compiled
    x = (t + z) / s2
    h = math.exp(-0.5 * x * x - _LOG_SQRT_2PI - log_norm_sf(x))  # inverse Mills ratio
    return -z / (s1 * s1) + g * h / s2


@njit(cache=True)
def _trapezoid_side(zs, step, t, s1, s2, g, lmax, drop, nmax, s_all, s_even):  # pragma: no cover - compiled
    """Walk the nodes zs + i step, i = 1, 2, ..., adding e^{l - lmax} to ``s_all`` (every node) and to
    ``s_even`` (even i), and stop at an even index once l is below lmax - drop (or at i = nmax).
    Returns (last i, e^{l - lmax} at the last node, s_all, s_even)."""
    i = 0
    li = lmax
    while True:
        i += 1
        li = _ell(zs + i * step, t, s1, s2, g)
        v = math.exp(li - lmax)
        s_all += v
        if i % 2 == 0:
            s_even += v
            if li < lmax - drop or i >= nmax:
                break
    return i, math.exp(li - lmax), s_all, s_even


@njit(cache=True)
def log_moment_qplus(t: float, s1: float, s2: float, g: float) -> float:  # pragma: no cover - compiled
    """Upper bound on log M_g, M_g = int N(z; 0, s1^2) (1 - Phi((t + z)/s2))^{-g} dz.

    +inf when g s1^2 >= s2^2 (the integral diverges) or g <= 0 is not admissible.  The log-integrand l is
    strictly concave with l'' <= -1/s~^2, s~ = (1/s1^2 - g/s2^2)^{-1/2} (the inverse Mills ratio h has
    0 < h' < 1).  Trapezoid rule with step s1/4 from the mode until l drops 60 below its maximum; the
    error is bounded by |T_h - T_2h| (T_2h's error dominates T_h's by a huge factor for this analytic,
    Gaussian-tailed integrand), the tails beyond the last nodes by the concavity bound
    int_0^inf e^{l(z_e) - s t - t^2/(2 s~^2)} dt <= e^{l(z_e)} min(1/s, s~ sqrt(pi/2)), s = |l'(z_e)|;
    a relative margin LOG_MOMENT_SAFETY is added for float rounding.
    """
    if not (g > 0.0):
        return math.inf
    curv = 1.0 / (s1 * s1) - g / (s2 * s2)
    if curv <= 0.0:
        return math.inf
    st = 1.0 / math.sqrt(curv)
    # mode: l' strictly decreasing; bracket then bisect
    lo = 0.0
    hi = 0.0
    step = s1
    if _dell(0.0, t, s1, s2, g) > 0.0:
        hi = step
        while _dell(hi, t, s1, s2, g) > 0.0:
            lo = hi
            step *= 2.0
            hi = lo + step
    else:
        lo = -step
        while _dell(lo, t, s1, s2, g) < 0.0:
            hi = lo
            step *= 2.0
            lo = hi - step
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid == lo or mid == hi:
            break
        if _dell(mid, t, s1, s2, g) > 0.0:
            lo = mid
        else:
            hi = mid
    zs = 0.5 * (lo + hi)
    lmax = _ell(zs, t, s1, s2, g)
    h = 0.25 * s1
    drop = 60.0
    nmax = 200000
    # node i = 0 (value e^{l - lmax} = 1, even), then the right side, then the left side
    nr, fr, s_all, s_even = _trapezoid_side(zs, h, t, s1, s2, g, lmax, drop, nmax, 1.0, 1.0)
    nl, fl, s_all, s_even = _trapezoid_side(zs, -h, t, s1, s2, g, lmax, drop, nmax, s_all, s_even)
    # trapezoid: end nodes get weight 1/2
    t_h = h * (s_all - 0.5 * (fr + fl))
    t_2h = 2.0 * h * (s_even - 0.5 * (fr + fl))
    err = abs(t_h - t_2h)
    sq = st * _SQRT_PI_2
    dr = -_dell(zs + nr * h, t, s1, s2, g)
    dl = _dell(zs - nl * h, t, s1, s2, g)
    tail_r = fr * (min(1.0 / dr, sq) if dr > 0.0 else sq)
    tail_l = fl * (min(1.0 / dl, sq) if dl > 0.0 else sq)
    total = t_h + err + tail_r + tail_l
    return lmax + math.log(total) + LOG_MOMENT_SAFETY


@njit(cache=True)
def log_moment_table(t: float, s1: float, s2: float, gammas: np.ndarray) -> np.ndarray:  # pragma: no cover
    out = np.empty(gammas.shape[0])
    for j in range(gammas.shape[0]):
        out[j] = log_moment_qplus(t, s1, s2, gammas[j])
    return out


@njit(cache=True)
def qplus_term(alpha: float, g: float, logm: float, a: float, e: float,
               envelope: bool) -> float:  # pragma: no cover - compiled
    """(7.2) with Gaussian noises at one Hoelder exponent g (docs/derivations/sparse-vector.md §2).

    eps(alpha) = (g* alpha - 1) alpha a / (alpha - 1) + alpha e + logm / (g (alpha - 1)),
    g* = g/(g-1), a = sens^2/(2 s1^2) (eps_rho(l) = a l), e = 2 sens^2 / s2^2 (eps_nu at 2 sens).
    With u = alpha - 1 this is A u + B + K/u, A = g* a + e, B = (2 g* - 1) a + e, K = (g* - 1) a + logm/g,
    minimised at u* = sqrt(K/A); the envelope evaluates it at max(u, u*) (non-decreasing, sound).
    """
    if math.isinf(alpha):
        return math.inf
    if math.isinf(logm):
        return math.inf
    gs = g / (g - 1.0)
    aa = gs * a + e
    bb = (2.0 * gs - 1.0) * a + e
    kk = (gs - 1.0) * a + logm / g
    u = alpha - 1.0
    if envelope:
        us = math.sqrt(kk / aa)
        if u < us:
            u = us
    return aa * u + bb + kk / u


@njit(cache=True)
def _interp_logm(g: float, gammas: np.ndarray, logm: np.ndarray, j: int) -> float:  # pragma: no cover
    # chord through (gammas[j], logm[j]) and (gammas[j+1], logm[j+1]): an upper bound of the convex
    # function g -> log M_g (log of a moment E[Y^g] of Y = E[K|z] >= 1 is a cumulant generating function)
    w = (g - gammas[j]) / (gammas[j + 1] - gammas[j])
    return (1.0 - w) * logm[j] + w * logm[j + 1]


@njit(cache=True)
def _qplus_refined(alpha: float, gammas: np.ndarray, logm: np.ndarray, a: float, e: float, envelope: bool,
                   j: int) -> float:  # pragma: no cover - compiled
    # golden-section search over g in [gammas[j-1], gammas[j+1]] with the chord upper bound of log M_g
    n = gammas.shape[0]
    lo = gammas[j - 1] if j > 0 else gammas[0]
    hi = gammas[j + 1] if j + 1 < n else gammas[n - 1]
    if not (hi > lo) or n < 2:
        return math.inf
    gr = 0.5 * (math.sqrt(5.0) - 1.0)
    best = math.inf
    x1 = hi - gr * (hi - lo)
    x2 = lo + gr * (hi - lo)
    f1 = _qplus_at(alpha, x1, gammas, logm, a, e, envelope, j)
    f2 = _qplus_at(alpha, x2, gammas, logm, a, e, envelope, j)
    for _ in range(30):
        if f1 <= f2:
            hi = x2
            x2 = x1
            f2 = f1
            x1 = hi - gr * (hi - lo)
            f1 = _qplus_at(alpha, x1, gammas, logm, a, e, envelope, j)
        else:
            lo = x1
            x1 = x2
            f1 = f2
            x2 = lo + gr * (hi - lo)
            f2 = _qplus_at(alpha, x2, gammas, logm, a, e, envelope, j)
        best = min(best, f1, f2)
    return best


@njit(cache=True)
def _qplus_at(alpha: float, g: float, gammas: np.ndarray, logm: np.ndarray, a: float, e: float,
              envelope: bool, j0: int) -> float:  # pragma: no cover - compiled
    # g lies in [gammas[j0 - 1], gammas[j0 + 1]]: pick the segment containing it
    n = gammas.shape[0]
    j = j0 if g >= gammas[j0] else j0 - 1
    if j < 0:
        j = 0
    if j > n - 2:
        j = n - 2
    return qplus_term(alpha, g, _interp_logm(g, gammas, logm, j), a, e, envelope)


@njit(cache=True)
def qplus_curve(alpha: np.ndarray, gammas: np.ndarray, logm: np.ndarray, a: float, e: float,
                envelope: bool) -> np.ndarray:  # pragma: no cover - compiled
    """min over Hoelder exponents g of ``qplus_term`` (any admissible g gives a valid bound).

    First the tabulated exponents (exact upper bounds of log M_g), then a golden-section refinement
    between the neighbours of the best node, with log M_g replaced by the chord through the adjacent
    tabulated values -- an upper bound because g -> log M_g is convex -- so every candidate is sound.
    """
    n = gammas.shape[0]
    # per-exponent coefficients of A u + B + K/u (independent of alpha)
    aa = np.empty(n)
    bb = np.empty(n)
    kk = np.empty(n)
    us = np.empty(n)
    for j in range(n):
        gs = gammas[j] / (gammas[j] - 1.0)
        aa[j] = gs * a + e
        bb[j] = (2.0 * gs - 1.0) * a + e
        kk[j] = (gs - 1.0) * a + logm[j] / gammas[j]
        us[j] = math.sqrt(kk[j] / aa[j]) if envelope else 0.0
    out = np.empty(alpha.shape[0])
    for i in range(alpha.shape[0]):
        if math.isinf(alpha[i]) or n == 0:
            out[i] = math.inf
            continue
        u0 = alpha[i] - 1.0
        best = math.inf
        jb = 0
        for j in range(n):
            u = u0 if u0 > us[j] else us[j]
            v = aa[j] * u + bb[j] + kk[j] / u
            if v < best:
                best = v
                jb = j
        if math.isfinite(best) and n >= 2:
            r = _qplus_refined(alpha[i], gammas, logm, a, e, envelope, jb)
            if r < best:
                best = r
        out[i] = best
    return out
