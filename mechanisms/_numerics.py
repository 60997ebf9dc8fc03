"""Numerical primitives shared by the mechanisms and the conversions (vectorised numpy, log space).

The bottom of the floor order (``mechanisms`` -> ``conversions`` -> ``accountant``): this module imports
nothing of dpcert, so every floor may use it.  Each primitive has its one home here.
"""

from __future__ import annotations

import cmath
import math
from fractions import Fraction

import numpy as np
from numba import njit
from scipy.special import log_ndtr

_U = 2.0 ** -53
#: scipy's log_ndtr is accurate to 4.2 ulps of (1 + |value|) (measured against mpmath on [-3000, 5]);
#: the bounds below allow 16
LOG_NDTR_ULPS = 16.0


# ---------------------------------------------------------------------------- directed rounding
def _ceil_to_float(x: float, exact: Fraction) -> float:
    """The float x (``exact`` rounded to nearest) moved up one step when it lies below ``exact``: the
    smallest float >= ``exact``."""
    return math.nextafter(x, math.inf) if Fraction(x) < exact else x


def add_up(*xs: float) -> float:
    """The smallest float >= the exact sum of the finite floats ``xs`` (``math.fsum`` rounds to nearest;
    one step up when that is below the exact rational sum).  An infinite or NaN summand is passed through
    ``fsum`` unchanged."""
    tot = math.fsum(xs)
    if not all(math.isfinite(x) for x in xs) or not math.isfinite(tot):
        return tot
    return _ceil_to_float(tot, sum((Fraction(x) for x in xs), Fraction(0)))


def mul_up(a: float, b: float) -> float:
    """The smallest float >= the exact product a b (finite a, b; ints allowed), else the float product."""
    x = float(a) * float(b) if isinstance(a, float) or isinstance(b, float) else float(a * b)
    if not (math.isfinite(x) and math.isfinite(a) and math.isfinite(b)):
        return x
    return _ceil_to_float(x, Fraction(a) * Fraction(b))


def ceil_fraction(exact: Fraction) -> float:
    """The smallest float >= the rational ``exact`` (``float`` of a Fraction rounds to nearest)."""
    return _ceil_to_float(float(exact), exact)


_VELTKAMP = 134217729.0  # 2^27 + 1: splits a double into two 26-bit halves
_SPLIT_MAX = 2.0**995
_PROD_MIN = 2.0**-960


def two_product(a, b) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p, e, ok) elementwise: p = fl(a b) and, where ok, e = a b - p exactly (Dekker 1971, as TwoProduct
    in Ogita, Rump & Oishi 2005: a and b split at 26 bits by Veltkamp's method, e = a_lo b_lo -
    (((p - a_hi b_hi) - a_lo b_hi) - a_hi b_lo), every step exact).  ok excludes what the identity needs
    excluded: |a|, |b| >= 2^995 (the split overflows), |p| < 2^-960 unless a or b is zero (the partial
    products underflow), non-finite values."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    with np.errstate(over="ignore", invalid="ignore"):
        p, e = _dekker(a, b)
    zero = (a == 0.0) | (b == 0.0)
    ok = zero | ((np.abs(a) < _SPLIT_MAX) & (np.abs(b) < _SPLIT_MAX) & (np.abs(p) >= _PROD_MIN)
                 & np.isfinite(p) & np.isfinite(e))
    return p, np.where(zero, 0.0, e), ok


def _dekker(a, b):
    """(fl(a b), the product's exact rounding error) by Veltkamp's split and Dekker's TwoProduct, on floats
    or numpy arrays alike (the same operations in the same order: :func:`two_product` on arrays, compiled
    as :func:`two_product_scalar` for numba kernels)."""
    p = a * b
    t = _VELTKAMP * a
    ah = t - (t - a)
    al = a - ah
    t = _VELTKAMP * b
    bh = t - (t - b)
    bl = b - bh
    return p, al * bl - (((p - ah * bh) - al * bh) - ah * bl)


#: (p, e) with p = fl(a b) and a b = p + e exactly, for two floats inside numba kernels: the same
#: TwoProduct as :func:`two_product` (its conditions: |a|, |b| < 2^995 and |p| >= 2^-960 or a zero
#: factor; unchecked here, the caller keeps its operands in that range)
two_product_scalar = njit(cache=True)(_dekker)


def mul_up_array(a, b) -> np.ndarray:
    """Elementwise the smallest float >= the exact product a b (float arrays, broadcast): the product's
    rounding error is computed exactly (:func:`two_product`) and the product moved one step up where it
    is positive.  Outside :func:`two_product`'s range (overflowing splits, products below 2^-960) a
    non-zero finite product is moved up unconditionally (then an upper bound, not always the smallest)."""
    p, e, ok = two_product(a, b)
    up = np.where(ok, e > 0.0, p != 0.0) & np.isfinite(p)
    return np.where(up, np.nextafter(p, np.inf), p)


def scale_up(k: float, v) -> np.ndarray:
    """k v for an array v and a factor k >= 0, rounded up (:func:`mul_up_array`; unchanged for k = 1)."""
    v = np.asarray(v, dtype=float)
    if k == 1:
        return v
    return mul_up_array(float(k), v)


def div_up(a: float, b: float) -> float:
    """The smallest float >= the exact quotient a / b (finite a, non-zero finite b)."""
    x = a / b
    if not (math.isfinite(x) and math.isfinite(a) and math.isfinite(b)):
        return x
    return _ceil_to_float(x, Fraction(a) / Fraction(b))


def log_ndtr_bounds(z, z_err=0.0) -> tuple[np.ndarray, np.ndarray]:
    """(log Phi(z), bound on |computed - log Phi(z_true)|) for arrays z with |z - z_true| <= z_err.

    log_ndtr's own error (``LOG_NDTR_ULPS`` ulps of 1 + |value|) plus z_err times the largest slope
    d log Phi / dz = phi(z) / Phi(z) (decreasing in z) on [z - z_err, z + z_err]: at most |z'| + 1 for
    z' = z - z_err <= 0 (Mills-ratio bound) and at most 2 phi(z') <= 0.8 for z' > 0 (Phi(z') >= 1/2).
    Exact (error 0) at z = +-inf.
    """
    z = np.asarray(z, dtype=float)
    ze = np.broadcast_to(np.asarray(z_err, dtype=float), z.shape)
    lz = np.asarray(log_ndtr(z), dtype=float)
    with np.errstate(invalid="ignore", over="ignore"):
        zl = z - ze
        slope = np.where(zl > 0.0, 0.8 * np.exp(-0.5 * np.minimum(zl, 1e150) ** 2) + 1e-300,
                         np.abs(zl) + 1.0)
        err = LOG_NDTR_ULPS * _U * (1.0 + np.abs(lz)) + ze * slope
    err = np.where(np.isinf(z), 0.0, err)
    return lz, err


def complex_logsumexp(log_terms: np.ndarray, axis: int = 0) -> np.ndarray:
    """log(sum(exp(z))) for complex z along ``axis`` with a real max-shift (no overflow).

    The branch of the imaginary part is irrelevant to the accountant: only exp(k * log) with integer
    k is ever used.
    """
    z = np.asarray(log_terms, dtype=complex)
    m = np.max(z.real, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    out = np.log(np.sum(np.exp(z - m), axis=axis)) + np.squeeze(m, axis=axis)
    return out


#: ulps of t (1 + |l|) by which a computed phase t l may differ from the exact one: the stored loss l is
#: accurate to 4 ulps of 1 + |l| (the atoms' contract, ``conversions.atoms.INPUT_ULPS``), the product t l
#: rounds by half an ulp, the rest is margin (the trig calls' own error is a constant, not t-growing)
PHASE_ULPS = 8.0


def phase_error(t_max: float, loss_span: float) -> float:
    """Phase rounding of a log-MGF kernel on Re s = c, |Im s| <= t_max, in the form of ``log_mgf_error``
    (relative to M(c)), when every phase it forms is t x with |x| <= ``loss_span`` and the terms' moduli
    on the line sum to at most M(c): |e^{ia} - e^{ib}| <= |a - b| gives
    ``PHASE_ULPS`` u t_max (1 + loss_span) (an upper bound; 0 at t_max = 0)."""
    if not t_max > 0.0:
        return 0.0
    return PHASE_ULPS * _U * t_max * (1.0 + loss_span) * (1.0 + 1e-9)


def atoms_phase_error(losses: np.ndarray, masses: np.ndarray, c: float, t_max: float) -> float:
    """Phase rounding of sum_i w_i e^{s l_i} (:func:`discrete_log_mgf`, the atoms kernels) on Re s = c,
    |Im s| <= t_max, relative to M(c) >= A(c) = sum_i w_i e^{c l_i} (form of ``log_mgf_error``).

    Term i's phase t l_i is off by at most ``PHASE_ULPS`` u t (1 + |l_i|); two atoms are summed as
    e^{s l_i} (1 + r e^{s (l_j - l_i)}), whose phases are up to |l_i| + |l_j|.  Weighted by the terms'
    moduli w_i e^{c l_i}: ``PHASE_ULPS`` u t_max (1 + E|L|) with E the tilted mean of |l| (of
    |l_i| + |l_j| for two atoms), rounded up.  An upper bound; 0 without atoms or at t_max = 0."""
    l = np.asarray(losses, dtype=float)
    w = np.asarray(masses, dtype=float)
    keep = w > 0
    l, w = l[keep], w[keep]
    if not t_max > 0.0 or l.size == 0:
        return 0.0
    if l.size <= 2:
        return phase_error(t_max, float(np.sum(np.abs(l))))
    with np.errstate(divide="ignore"):
        lw = np.log(w) + c * l
    a = np.exp(lw - np.max(lw))
    # a weighted mean of non-negative numbers: relative rounding <= (n + 4) u, far below the margin
    mean = float(np.sum(a * np.abs(l)) / np.sum(a)) * (1.0 + (l.size + 4.0) * _U)
    return phase_error(t_max, mean)


#: ulps of |c| max|l| by which the atoms kernels' real exponents log w_i + c l_i round (the product,
#: the sum, the max-shift, the final m + log(sum); 2.5 counted, the rest is margin)
EXPONENT_ULPS = 8.0


def atoms_exponent_error(c: float, loss_max: float, loss_err_max: float) -> float:
    """The |c|-growing error of sum_i w_i e^{s l_i} (the atoms kernels: ``discrete_log_mgf``,
    ``mechanisms._discrete_kernels``) on Re s = c, in the form of ``log_mgf_error`` (relative to M(c)).

    Term i's exponent c l_i is off by |c| |l~_i - l_i| <= |c| ``loss_err_max`` (the stored loss l~_i
    rounded from the real one) plus the rounding of log w_i + c l_i and of the shifts, ulps of
    |c l_i| + |log w_i| (the |log w| part is the mechanisms' constant ``log_mgf_error``): each term moves
    by a factor within e^{+-x}, x = |c| (``loss_err_max`` + ``EXPONENT_ULPS`` u ``loss_max``), so the sum
    by at most (e^x - 1) M(c) (|e^{s l}| = e^{c l}).  Not covered by a constant: DiscreteGaussian(0.05)
    at c = 200 was 1.6e-11 off (mpmath) against its constant 1.8e-13.  0 at c = 0."""
    return abs(c) * (loss_err_max + EXPONENT_ULPS * _U * loss_max) * (1.0 + 1e-9)


def discrete_log_mgf(s, losses: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """log sum_i w_i exp(s l_i) for complex s (array), finite atoms (l_i, w_i), w_i > 0."""
    s = np.asarray(s, dtype=complex)
    keep = masses > 0
    l, w = losses[keep], masses[keep]
    if l.size == 1:
        return math.log(w[0]) + s * l[0]
    if l.size == 2 and np.all(s.real == s.real.flat[0]):
        # log(w0 e^{s l0} + w1 e^{s l1}) = log w0 + s l0 + log1p(w1/w0 e^{s (l1 - l0)}), the atom with
        # the larger |term| on the line first so that the log1p argument has modulus <= 1
        c = float(s.real.flat[0])
        i, j = (0, 1) if math.log(w[0]) + c * l[0] >= math.log(w[1]) + c * l[1] else (1, 0)
        flat = np.ascontiguousarray(s).ravel()
        out = _two_atom_kernel(flat, math.log(w[i]), float(l[i]), math.log(w[j] / w[i]), float(l[j] - l[i]))
        return out.reshape(s.shape)
    terms = np.log(w)[:, None] + np.multiply.outer(l, s.ravel())
    return complex_logsumexp(terms, axis=0).reshape(s.shape)


def log_expm1(x: np.ndarray) -> np.ndarray:
    """log(exp(x) - 1) for x > 0, stable for tiny and large x; -inf for x <= 0 (vectorised numpy; the
    compiled scalar form is :func:`log_expm1_scalar`)."""
    x = np.asarray(x, dtype=float)
    out = np.full(x.shape, -np.inf)
    pos = x > 0
    big = pos & (x > 30)
    small = pos & ~big
    out[big] = x[big] + np.log1p(-np.exp(-x[big]))
    out[small] = np.log(np.expm1(x[small]))
    return out


def log_expm1_float(x: float) -> float:
    """log(e^x - 1) for a Python float x > 0 (-inf for x <= 0): the same formula as
    :func:`log_expm1_scalar`, evaluated by the ``math`` module (no compiled dispatch)."""
    if x <= 0.0:
        return -math.inf
    return x + math.log1p(-math.exp(-x)) if x > 30.0 else math.log(math.expm1(x))


@njit(cache=True)
def log_expm1_scalar(x: float) -> float:
    """log(e^x - 1) for x > 0 (-inf for x <= 0), compiled: x + log1p(-e^{-x}) above 30, else log(expm1(x))."""
    if x <= 0.0:
        return -math.inf
    if x > 30.0:
        return x + math.log1p(-math.exp(-x))
    return math.log(math.expm1(x))


@njit(cache=True)
def _g_scalar(w: complex) -> complex:
    """(1 - e^{-w}) / w; the series sum_{n>=0} (-w)^n / (n+1)! below |w| = 0.1 (removable singularity;
    12 terms leave a relative remainder < 0.1^12 / 13! ~ 1e-22)."""
    if abs(w) < 0.1:
        acc = 0j
        term = 1.0 + 0j
        fact = 1.0
        for n in range(12):
            fact *= n + 1
            acc += term / fact
            term = term * (-w)
        return acc
    return (1.0 - cmath.exp(-w)) / w


@njit(cache=True)
def _g_kernel(w: np.ndarray) -> np.ndarray:
    out = np.empty_like(w)
    for i in range(w.size):
        out[i] = _g_scalar(w[i])
    return out


@njit(cache=True)
def complex_logaddexp(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log(e^x + e^y) elementwise for complex x, y (1-d): the term of larger real part first, then
    log|1 + z| = log1p(u (2 + u) + v^2) / 2, arg(1 + z) = atan2(v, 1 + u) with |z| <= 1."""
    out = np.empty_like(x)
    for i in range(x.size):
        a, b = x[i], y[i]
        if b.real > a.real:
            a, b = b, a
        if a.real == -np.inf:
            out[i] = a
            continue
        z = cmath.exp(b - a)
        u, v = z.real, z.imag
        out[i] = a + complex(0.5 * math.log1p(u * (2.0 + u) + v * v), math.atan2(v, 1.0 + u))
    return out


def one_minus_exp_over(w) -> np.ndarray:
    """g(w) = (1 - e^{-w}) / w for complex w, with a series near 0 (removable singularity)."""
    w = np.asarray(w, dtype=complex)
    return _g_kernel(np.ascontiguousarray(w).ravel()).reshape(w.shape)


@njit(cache=True)
def laplace_log_mgf_kernel(s: np.ndarray, a: float) -> np.ndarray:
    """log M(s) = s a + log[1/2 + e^{-a} e^{-2 s a} / 2 + (a/2) g((2 s + 1) a)] (Laplace, a = Delta/b)."""
    out = np.empty_like(s)
    for i in range(s.size):
        z = s[i]
        br = 0.5 + 0.5 * cmath.exp(-a - 2.0 * z * a) + 0.5 * a * _g_scalar((2.0 * z + 1.0) * a)
        out[i] = z * a + cmath.log(br)
    return out


@njit(cache=True)
def _two_atom_kernel(s: np.ndarray, lw_i: float, l_i: float, lw_ratio: float, dl: float) -> np.ndarray:
    """log w_i + s l_i + log(1 + e^{lw_ratio + s dl}) with |e^{lw_ratio + s dl}| <= 1 on the line:
    log|1 + z| = log1p(x (2 + x) + y^2) / 2 and arg(1 + z) = atan2(y, 1 + x) (no cancellation)."""
    out = np.empty_like(s)
    for i in range(s.size):
        z = cmath.exp(lw_ratio + s[i] * dl)
        x, y = z.real, z.imag
        re = 0.5 * math.log1p(x * (2.0 + x) + y * y)
        im = math.atan2(y, 1.0 + x)
        out[i] = lw_i + s[i] * l_i + complex(re, im)
    return out


def exp_pieces_log_mgf(s, lo: np.ndarray, hi: np.ndarray, logw: np.ndarray,
                       rate: np.ndarray) -> np.ndarray:
    """log sum_q int_{lo_q}^{hi_q} e^{logw_q + rate_q l} e^{s l} dl for complex s (array).

    Each integral is e^{(s + r) hi} (hi - lo) g((s + r)(hi - lo)) with g of :func:`one_minus_exp_over`
    (exact; no cancellation for Re(s + r) >= 0).
    """
    s = np.asarray(s, dtype=complex)
    flat = s.ravel()
    if len(lo) == 1:
        z = s + rate[0]
        width = hi[0] - lo[0]
        return logw[0] + z * hi[0] + math.log(width) + np.log(one_minus_exp_over(z * width))
    terms = []
    for a, b, lw, r in zip(lo, hi, logw, rate, strict=True):
        z = flat + r
        width = b - a
        terms.append(lw + z * b + math.log(width) + np.log(one_minus_exp_over(z * width)))
    return complex_logsumexp(np.array(terms), axis=0).reshape(s.shape)


# ---------------------------------------------------------------------------- binomial coefficients
_STIRLING_TABLE_MAX = 30


def stirlerr(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(stirlerr(n), error bound) for integers n >= 1: log(n!) - (n + 1/2) log n + n - log(2 pi)/2.

    n > 30: the Stirling series 1/(12n) - 1/(360n^3) + 1/(1260n^5) - 1/(1680n^7), truncation error
    < 1/(1188 n^9) < 1e-16 (alternating series); n <= 30: from log(n!) with n! exact (an integer below
    2^108, rounded once), error a few ulps of the terms (<= 200 ulps absolute, bounded below)."""
    n = np.asarray(n, dtype=float)
    out = np.empty(n.shape)
    err = np.empty(n.shape)
    big = n > _STIRLING_TABLE_MAX
    nb = n[big]
    inv = 1.0 / nb
    inv2 = inv * inv
    out[big] = inv * (1.0 / 12.0 - inv2 * (1.0 / 360.0 - inv2 * (1.0 / 1260.0 - inv2 / 1680.0)))
    err[big] = 1e-16 + 4.0 * _U * out[big]
    small = ~big
    if small.any():
        ns = n[small].astype(np.int64)
        out[small] = _STIRLERR_SMALL[ns]
        err[small] = 400.0 * _U
    return out, err


def _stirlerr_small_table() -> np.ndarray:
    t = np.zeros(_STIRLING_TABLE_MAX + 1)
    for i in range(1, _STIRLING_TABLE_MAX + 1):
        t[i] = math.log(float(math.factorial(i))) - (i + 0.5) * math.log(i) + i - 0.5 * math.log(2 * math.pi)
    return t


_STIRLERR_SMALL = _stirlerr_small_table()


def log_binomial_coefficients(k: int, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log C(k, j), absolute error bound) for integers 0 <= j <= k < 2^53 (array j).

    log C(k, j) = stirlerr(k) - stirlerr(j) - stirlerr(k - j) - j log(j/k) - (k - j) log((k - j)/k)
    + (1/2) log(k / (2 pi j (k - j))) for 0 < j < k (Stirling's formula with the exact remainder
    stirlerr; Loader 2000), 0 at j = 0 and j = k.  Every term is computed to a few ulps of its own
    size, and no term exceeds k log 2 + O(log k) in size, so the error bound is about 10 ulps of
    k log 2 (versus ulps of k log k for differences of lgamma values).
    """
    j = np.asarray(j, dtype=np.int64)
    out = np.zeros(j.shape)
    err = np.zeros(j.shape)
    inner = (j > 0) & (j < k)
    if not inner.any():
        return out, err
    ji = j[inner].astype(float)
    kf = float(k)
    mi = kf - ji
    sk, ek = stirlerr(np.array([kf]))
    sj, ej = stirlerr(ji)
    sm, em = stirlerr(mi)
    tj = ji * np.log(ji / kf)
    tm = mi * np.log(mi / kf)
    half = 0.5 * np.log(kf / (2.0 * math.pi * ji * mi))
    out[inner] = sk[0] - sj - sm - tj - tm + half
    # j/k is rounded (relative u), so log(j/k) is off by <= u absolute before its own rounding: the
    # products carry j u + (k - j) u = k u, plus a few ulps of each term and of the sum
    err[inner] = ek[0] + ej + em + 8.0 * _U * (np.abs(tj) + np.abs(tm) + np.abs(half) + 1.0) + 2.0 * _U * kf
    return out, err
