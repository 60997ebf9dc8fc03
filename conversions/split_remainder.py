"""The remainder measure of the near-atomic split (:mod:`conversions.split`): (a + b)^{*k} - a^{*k}, the
composed steps with at least one big part, as one ledger entry with a log-MGF computed without
cancellation, its decay envelope and its floating-point error bound (the derivations are in the
docstrings of :mod:`conversions.split` and :class:`Remainder`)."""

from __future__ import annotations

import math

import numpy as np

from mechanisms._numerics import log_expm1_float as _log_expm1
from mechanisms.base import Mechanism, check_direction
from mechanisms.subsampled_part import SubsampledGaussianPart

U = 2.0**-53


# ------------------------------------------------------------------------------------ complex helpers
def _log1p_c(z: np.ndarray) -> np.ndarray:
    """log(1 + z) for complex z, accurate to a few ulps of |z| when |z| is small."""
    x, y = z.real, z.imag
    with np.errstate(over="ignore", invalid="ignore"):
        mod = 0.5 * np.log1p(2.0 * x + x * x + y * y)
    return mod + 1j * np.arctan2(y, 1.0 + x)


def _log_expm1_c(w: np.ndarray) -> np.ndarray:
    """log(e^w - 1) for complex w (principal branch of the log; any branch serves an MGF's log)."""
    a, b = w.real, w.imag
    out = np.empty(w.shape, dtype=complex)
    big = a > 1.0
    # e^w - 1 = e^w (1 - e^{-w}): log = w + log1p(-e^{-w})
    if np.any(big):
        wb = w[big]
        out[big] = wb + _log1p_c(-np.exp(-wb))
    sm = ~big
    if np.any(sm):
        aa, bb = a[sm], b[sm]
        re = np.expm1(aa) * np.cos(bb) - 2.0 * np.sin(0.5 * bb) ** 2
        im = np.exp(aa) * np.sin(bb)
        with np.errstate(divide="ignore"):
            out[sm] = np.log(np.hypot(re, im)) + 1j * np.arctan2(im, re)
    return out


# ------------------------------------------------------------------------------------ the remainder
class Remainder(Mechanism):
    """The non-negative measure (a + b)^{*k} - a^{*k} (at least one of the k steps in its big part) as a
    single ledger entry (count 1) for :class:`conversions.contour.ComposedPLD`.

    log MGF, without cancellation: with W = k log1p(b / a) (accurate for small b / a),
    log R = k log a + log(e^W - 1) when Re W <= 1, else k log(a + b) + log1p(-e^{-W}).
    Error (relative to R(c) on the line Re s = c, ``log_mgf_error_at``): R is a polynomial in (a, b),
    homogeneous of degree k with non-negative coefficients, so part values within e x a(c) and
    e x b(c) move it by at most ((1 + e)^k - 1) R(c); the rounding of the k-fold log sums adds a few
    ulps of k (|log a(c)| + |log b(c)| + 10) (at nodes where |log a| is larger, |R| is smaller than R(c)
    by more than that factor).
    """

    name = "split_remainder"
    pld_available = True
    tight = False
    symmetric = False

    def __init__(self, core: SubsampledGaussianPart, big: SubsampledGaussianPart, count: int):
        self.a, self.b, self.k = core, big, int(count)

    def describe(self) -> str:
        return f"remainder({self.k} x {self.a.describe()})"

    def params(self) -> dict:  # (never serialised: an internal object of one query)
        return {}

    @property
    def log_mgf_error(self) -> float:
        return self.k * self.a.log_mgf_error  # the line-independent part; see log_mgf_error_at

    def log_mgf_error_at(self, c: float, direction: str) -> float:
        """log-error bound relative to R(c) on the line Re s = c (class docstring)."""
        e = max(self.a.log_mgf_error, self.b.log_mgf_error)
        la, lb = self.a.log_mgf_real(c, direction), self.b.log_mgf_real(c, direction)
        mags = abs(la) + (abs(lb) if math.isfinite(lb) else 0.0) + 10.0
        return self.k * math.log1p(e) * (1.0 + 1e-9) + 32.0 * U * self.k * mags

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        """The parts' phase rounding carried through the polynomial: part values within (e + p_a) a(c)
        and (e + p_b) b(c) move R by at most ((1 + e + p)^k - 1) R(c), p = max(p_a, p_b), and
        k log1p(e + p) <= k log1p(e) + k p."""
        return self.k * max(self.a.log_mgf_phase_error(c, t_max, direction),
                            self.b.log_mgf_phase_error(c, t_max, direction))

    def mgf_cost(self, t_max: float, c: float = 0.0, direction: str = "remove") -> float:
        return self.a.mgf_cost(t_max, c, direction) + self.b.mgf_cost(t_max, c, direction)

    def mgf_line_cost(self, n: int, t_max: float, c: float = 0.0, direction: str = "remove") -> float:
        """Both parts' line costs (``SubsampledGaussianPart.mgf_line_cost``) and ~10 complex operations
        per node for the combination."""
        return (self.a.mgf_line_cost(n, t_max, c, direction) + self.b.mgf_line_cost(n, t_max, c, direction)
                + 10.0 * n)

    def envelope_cost(self, c: float, direction: str = "remove") -> float:
        return self.a.envelope_cost(c, direction) + self.b.envelope_cost(c, direction)

    def total_variation(self, direction: str = "remove") -> float | None:
        return None

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = np.asarray(s, dtype=complex)
        la, lb = self.a.log_mgf(s, direction), self.b.log_mgf(s, direction)
        k = self.k
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            d = lb - la
            small = d.real < 0.0  # |b| < |a|: log1p of b / a
            lm = np.where(small, la, lb) + _log1p_c(np.exp(np.where(small, d, -d)))  # log(a + b)
            w = np.where(small, k * _log1p_c(np.exp(np.where(small, d, 0.0))), k * (lm - la))
            out = np.empty(s.shape, dtype=complex)
            lo = w.real <= 1.0
            out[lo] = k * la[lo] + _log_expm1_c(w[lo])
            hi = ~lo
            out[hi] = k * lm[hi] + _log1p_c(-np.exp(-w[hi]))
        return out

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        la, lb = self.a.log_mgf_real(c, direction), self.b.log_mgf_real(c, direction)
        d = lb - la
        w = self.k * (math.log1p(math.exp(d)) if d < 30.0 else d + math.log1p(math.exp(-d)))
        return self.k * la + _log_expm1(w)

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        fa, fb = self.a.log_envelope_fn(c, direction), self.b.log_envelope_fn(c, direction)
        log_r = self.log_mgf_real(c, direction)
        k = self.k

        def env(t: float) -> float:
            # |R| <= (A + B)^k - A^k (every monomial has a b factor; all coefficients >= 0)
            la, lb = float(fa(t)), float(fb(t))
            if lb == -math.inf:
                return -math.inf
            if la == -math.inf:
                return min(k * lb, log_r)
            d = lb - la
            w = k * (math.log1p(math.exp(d)) if d < 30.0 else d + math.log1p(math.exp(-d)))
            return min(k * la + _log_expm1(w), log_r)

        return env

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)
