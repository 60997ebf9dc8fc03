"""The pair of two multivariate Gaussians with different means AND covariances, in closed form.

GaussianPair(shifts, precisions)
    Canonical coordinates: P = N(0, I_d), Q = N(delta, diag(1/a)) (a_i > 0 the precisions of Q,
    delta the shifts).  Any pair N(m1, S1) vs N(m2, S2) (S1, S2 positive definite) is an invertible affine
    image of a canonical one: whiten by S1^{-1/2} and rotate to the eigenvectors of
    A = S1^{1/2} S2^{-1} S1^{1/2} (:meth:`GaussianPair.from_gaussians`; the eigendecomposition is done in
    floating point and its rounding is not part of the certified error).  Uses: per-instance privacy of
    output perturbation with data-dependent (Hessian-shaped) noise
    (:mod:`accountant.adaptive.output_perturbation`),
    Gaussian mechanisms whose noise covariance depends on the data.

    Privacy loss under P, v ~ N(0, I): L = sum_i [k_i v_i^2 / 2 + beta_i v_i + kappa_i] with
    k_i = a_i - 1, beta_i = -a_i delta_i, kappa_i = a_i delta_i^2 / 2 - log(a_i) / 2 (a sum of independent
    non-central chi-square terms).  Its MGF (exact; the non-central chi-square MGF):

        log M(s) = sum_i [ s kappa_i - log(1 - s k_i) / 2 + s^2 beta_i^2 / (2 (1 - s k_i)) ],

    for complex s with Re(1 - s k_i) > 0 (principal logarithm); "add" is the swapped pair,
    log M_add(s) = log M(-1 - s) (E_Q[(q/p)^s] = E_P[(q/p)^{s+1}]).  RDP: log M(alpha - 1)/(alpha - 1) and
    log M(-alpha)/(alpha - 1), the max of the two, exact (+inf beyond the orders where they exist).
    Decay envelope: |M(c + it)| itself, which is non-increasing in |t| (each factor's modulus is:
    |1 - s k|^2 = (1 - c k)^2 + t^2 k^2 grows, and
    Re[s^2/(1 - s k)] = (c^2 p - t^2 (1 + c k))/(p^2 + t^2 k^2), p = 1 - c k > 0, has t^2-derivative of
    the sign of -p).  No atoms, no cell masses (characteristic-
    function and RDP routes).  Symmetric only when a = 1.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._pairs import ContinuousUnlessTrivial
from .base import as_complex_array, check_direction
from .registry import register

__all__ = ["GaussianPair"]

U = 2.0 ** -53


def _log_modulus_terms(cc: float, p: np.ndarray, k: np.ndarray, b2: np.ndarray, t):
    """Per coordinate, -log|1 - s k| / 2 + Re(s^2 / (1 - s k)) beta^2 / 2 at s = cc + it (log|M(s)| is
    their sum plus sum cc kappa; p = 1 - cc k, b2 = beta^2; t a scalar or a column of values), and
    |1 - s k|^2."""
    tt = t * t
    mod2 = p * p + tt * k * k
    re_frac = (cc * cc * p - tt * (1.0 + cc * k)) / mod2
    return -0.25 * np.log(mod2) + 0.5 * b2 * re_frac, mod2


@register
@dataclass(frozen=True)
class GaussianPair(ContinuousUnlessTrivial):
    """P = N(0, I_d) vs Q = N(shifts, diag(1 / precisions)) (canonical form of two Gaussians).

    Parameters
    ----------
    shifts : list of float
        delta_i (finite), 1 <= d <= 10000.
    precisions : list of float
        a_i > 0 (a_i = 1 everywhere: the Gaussian mechanism with mu = |delta|).
    """

    shifts: list
    precisions: list

    name = "gaussian_pair"
    pld_available = True
    symmetric = False

    def __post_init__(self):
        if not isinstance(self.shifts, (list, tuple)) or not isinstance(self.precisions, (list, tuple)):
            raise TypeError("shifts and precisions must be lists of numbers")
        if not 1 <= len(self.shifts) <= 10000 or len(self.shifts) != len(self.precisions):
            raise ValueError("shifts and precisions must have the same length in [1, 10000]")
        sh = [V.real(f"shifts[{i}]", v) for i, v in enumerate(self.shifts)]
        pr = [V.positive(f"precisions[{i}]", v) for i, v in enumerate(self.precisions)]
        if max(abs(x) for x in sh) > 1e6 or max(pr) > 1e12 or min(pr) < 1e-12:
            raise ValueError("shifts must be <= 1e6 in size and precisions in [1e-12, 1e12]")
        object.__setattr__(self, "shifts", sh)
        object.__setattr__(self, "precisions", pr)

    def __hash__(self):
        return hash((self.name, tuple(self.shifts), tuple(self.precisions)))

    @classmethod
    def from_gaussians(cls, m1, cov1, m2, cov2) -> GaussianPair:
        """The canonical pair of N(m1, cov1) vs N(m2, cov2) (floating-point eigendecomposition)."""
        m1, m2 = np.atleast_1d(np.asarray(m1, dtype=float)), np.atleast_1d(np.asarray(m2, dtype=float))
        s1, s2 = np.atleast_2d(np.asarray(cov1, dtype=float)), np.atleast_2d(np.asarray(cov2, dtype=float))
        w1, u1 = np.linalg.eigh(0.5 * (s1 + s1.T))
        if w1[0] <= 0:
            raise ValueError("cov1 must be positive definite")
        half = (u1 * np.sqrt(w1)) @ u1.T  # S1^{1/2}
        inv_half = (u1 / np.sqrt(w1)) @ u1.T  # S1^{-1/2}
        a_mat = half @ np.linalg.solve(0.5 * (s2 + s2.T), half)
        a, v = np.linalg.eigh(0.5 * (a_mat + a_mat.T))
        if a[0] <= 0:
            raise ValueError("cov2 must be positive definite")
        delta = v.T @ (inv_half @ (m2 - m1))
        return cls(delta.tolist(), a.tolist())

    # ---------------------------------------------------------------- internals
    @functools.cached_property
    def _arrays(self):
        a = np.asarray(self.precisions, dtype=float)
        d = np.asarray(self.shifts, dtype=float)
        k = a - 1.0
        beta = -a * d
        kappa = 0.5 * a * d * d - 0.5 * np.log(a)
        return k, beta, kappa

    def _log_m(self, s: np.ndarray) -> np.ndarray:
        """log M_remove(s) for complex s (array), -inf + nan-free; +inf real part outside the domain."""
        k, beta, kappa = self._arrays
        s = np.asarray(s, dtype=complex)
        flat = s.ravel()[:, None]
        one = 1.0 - flat * k[None, :]
        bad = np.any(one.real <= 0.0, axis=1)
        with np.errstate(all="ignore"):
            quad = flat * flat * (beta * beta)[None, :] / (2.0 * one)
            terms = flat * kappa[None, :] - 0.5 * np.log(one) + quad
            out = np.sum(terms, axis=1)
        out = np.where(bad, complex(math.inf, 0.0), out)
        return out.reshape(s.shape)

    def _order_limits(self) -> tuple[float, float]:
        k, _, _ = self._arrays
        pos, neg = k[k > 0], k[k < 0]
        rem = float(np.min(1.0 / pos)) if pos.size else math.inf
        add = float(np.min(1.0 / -neg)) - 1.0 if neg.size else math.inf
        return rem, add

    # ---------------------------------------------------------------- curves
    @property
    def max_mgf_order(self) -> float:
        return min(self._order_limits())

    @property
    def log_mgf_error(self) -> float:
        k, beta, kappa = self._arrays
        return 16.0 * U * float(len(self.shifts)) * (1.0 + float(np.max(np.abs(kappa)) + np.max(beta * beta)))

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        """The closed form's rounding on Re s = c, |Im s| <= t_max, relative to M(c) (form of
        ``log_mgf_error``).  Each term of log M(s) is rounded to ulps of its own modulus, and those grow
        with t (|s kappa|, |s^2 beta^2 / (2 (1 - s k))| ~ t), while the terms' sum |log M(s)| may not
        (cancellation), so the constant error and the contour's per-node ulps of |log M| do not cover
        it: measured 2.2e-14 of M(c) at t = 3.9e5 (shift 0.5, precision 0.8; a 30-digit reference),
        8.8x the constant.  Bound: the error of log M(s) is at most u (16 + 2 log2(d + 1)) S(t), with S
        the sum over coordinates of |s| (|a d^2| + |log a|) / 2 (kappa and its rounding), (|log|1 - sk||
        + pi/2) / 2, R |s|^2 beta^2 / (2 |1 - sk|) and R, where R = 2 + |c' k| / p bounds the relative
        error of 1 - s k against its modulus (>= max(p, |t k|), p = 1 - c' k, c' = c or -1 - c).  Times
        |M(s)| / M(c) (non-increasing in t: the exact envelope): the maximum over the cells of a
        geometric grid of [0, t_max] of S at the cell's top times |M| at its bottom.  An upper bound."""
        if not t_max > 0.0 or self._trivial:
            return 0.0
        k, beta, _ = self._arrays
        a = np.asarray(self.precisions, dtype=float)
        d = np.asarray(self.shifts, dtype=float)
        cc = c if direction == "remove" else -1.0 - c
        p = 1.0 - cc * k
        if not np.all(p > 0.0):
            return math.inf
        ts = np.concatenate([[0.0], np.geomspace(t_max * 1e-9, t_max, 128)])
        t0, t1 = ts[:-1, None], ts[1:, None]
        s1 = np.hypot(cc, t1)
        den = np.maximum(p, np.abs(t0 * k))
        b2 = beta * beta
        at_0, mod2_0 = _log_modulus_terms(cc, p, k, b2, t0)  # (and |1 - s k|^2 at the cells' ends)
        mod2_1 = p * p + t1 * t1 * k * k
        lg = 0.5 * np.maximum(np.abs(np.log(mod2_0)), np.abs(np.log(mod2_1))) + 0.5 * math.pi
        r = 2.0 + np.abs(cc * k) / p
        terms = (0.5 * s1 * (a * d * d + np.abs(np.log(a))) + 0.5 * lg
                 + r * s1 * s1 * beta * beta / (2.0 * den) + r)
        big_s = np.sum(terms, axis=1)
        # log |M(c + i t0)| - log M(c) (the envelope's terms, module docstring; <= 0), rounded up by
        # 1e-12 of the terms' moduli
        at_c, _ = _log_modulus_terms(cc, p, k, b2, 0.0)
        scale = np.sum(np.abs(at_0) + np.abs(at_c), axis=1)
        log_mod = np.sum(at_0 - at_c, axis=1) + 1e-12 * (1.0 + scale)
        mods = np.exp(np.minimum(log_mod, 0.0))
        x = U * (16.0 + 2.0 * math.log2(len(k) + 1.0)) * big_s
        worst = float(np.max(mods * np.expm1(np.minimum(x, 700.0))))
        return worst * (1.0 + 1e-6)

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        return self._log_m(s if direction == "remove" else -1.0 - s)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        check_direction(direction)
        v = self._log_m(np.array([complex(c if direction == "remove" else -1.0 - c)]))[0]
        return float(v.real)

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        rem, add = self._order_limits()
        out = np.empty(al.shape)
        err = self.log_mgf_error
        for i, a in np.ndenumerate(al):
            s = a - 1.0
            if not math.isfinite(a) or s >= rem or s >= add:
                out[i] = math.inf if not self._trivial else 0.0
                continue
            v = max(self.log_mgf_real(s, "remove"), self.log_mgf_real(s, "add"))
            out[i] = max(0.0, (v + err) / s * (1.0 + 4 * U))
        return out

    @property
    def _trivial(self) -> bool:
        return all(x == 0.0 for x in self.shifts) and all(a == 1.0 for a in self.precisions)

    @property
    def gdp_mu(self) -> float | None:
        """mu = |delta| when every precision is 1 (the pair is then exactly the Gaussian mechanism's)."""
        if all(a == 1.0 for a in self.precisions):
            return math.sqrt(math.fsum(x * x for x in self.shifts))
        return None

    def _density_envelope_fn(self, c: float, direction: str):
        """t -> log |M(c + it)| (exact, non-increasing in |t|; module docstring)."""
        err = self.log_mgf_error
        k, beta, kappa = self._arrays
        cc = c if direction == "remove" else -1.0 - c
        p = 1.0 - cc * k
        const = float(np.sum(cc * kappa))
        b2 = beta * beta

        def env(t: float) -> float:
            return const + float(np.sum(_log_modulus_terms(cc, p, k, b2, t)[0])) + err

        return env

    # ---------------------------------------------------------------- exact profile of one use (d = 1)
    @property
    def exact_profile(self) -> bool:
        """One-dimensional pairs: the region {L > eps} is bounded by the roots of a quadratic."""
        return len(self.shifts) == 1 and not self._trivial

    def _quad_sign(self, v: float, sgn: float, eps: float) -> int:
        """Certified sign of f(v) = sgn L(v) - eps (+1, -1, or 0 when the rounding cannot decide)."""
        a, d = self.precisions[0], self.shifts[0]
        k, beta, kappa = (float(x[0]) for x in self._arrays)
        f = sgn * (0.5 * k * v * v + beta * v + kappa) - eps
        err = 16.0 * U * (0.5 * abs(k) * v * v + abs(beta * v) + 0.5 * a * d * d + 0.5 * abs(math.log(a))
                          + abs(eps) + 1.0) + 1e-300
        return 1 if f > err else (-1 if f < -err else 0)

    def _roots(self, sgn: float, eps: float):
        """Certified description of A = {sgn L > eps} (L(v) = k v^2/2 + beta v + kappa, v ~ P = N(0, 1)):
        (kind, inner, outer, approx), each a list of intervals, with union(inner) <= A <= union(outer)
        (``approx`` an uncertified estimate of A).  Root brackets are verified by the sign of f at both
        ends (convexity / concavity of f then fixes its sign beyond them)."""
        k, beta, kappa = (float(x[0]) for x in self._arrays)
        a2, a1, a0 = 0.5 * sgn * k, sgn * beta, sgn * kappa - eps
        inf = math.inf

        def bracket(r: float, left_sign: int) -> tuple[float, float] | None:
            """[lo, hi] around the root r with certified signs f(lo) = left_sign, f(hi) = -left_sign."""
            w = 8.0 * U * (1.0 + abs(r))
            for _ in range(60):
                lo, hi = r - w, r + w
                if self._quad_sign(lo, sgn, eps) == left_sign and self._quad_sign(hi, sgn, eps) == -left_sign:
                    return lo, hi
                w *= 4.0
            return None

        if a2 == 0.0:
            if a1 == 0.0:
                s = self._quad_sign(0.0, sgn, eps)
                return ([(-inf, inf)] if s > 0 else []), ([] if s < 0 else [(-inf, inf)]), \
                    ([(-inf, inf)] if a0 > 0 else [])
            r = -a0 / a1
            br = bracket(r, -1 if a1 > 0 else 1)
            approx = [(r, inf)] if a1 > 0 else [(-inf, r)]
            if br is None:
                return [], [(-inf, inf)], approx
            return ([(br[1], inf)] if a1 > 0 else [(-inf, br[0])]), \
                ([(br[0], inf)] if a1 > 0 else [(-inf, br[1])]), approx
        disc = a1 * a1 - 4.0 * a2 * a0
        if disc > 0.0:
            sq = math.sqrt(disc)
            qq = -0.5 * (a1 + math.copysign(sq, a1))  # stable roots: q / a2 and a0 / q
            r1, r2 = (qq / a2, a0 / qq) if qq != 0.0 else (0.0, 0.0)
            r1, r2 = min(r1, r2), max(r1, r2)
        else:
            r1 = r2 = -a1 / (2.0 * a2)
        if a2 > 0:  # f convex: A = (-inf, r1) u (r2, inf)
            approx = [(-inf, r1), (r2, inf)] if disc > 0.0 else [(-inf, inf)]
            b1, b2 = (bracket(r1, 1), bracket(r2, -1)) if disc > 0.0 else (None, None)
            if b1 is None or b2 is None:
                return [], [(-inf, inf)], approx
            outer = [(-inf, inf)] if b1[1] >= b2[0] else [(-inf, b1[1]), (b2[0], inf)]
            return [(-inf, b1[0]), (b2[1], inf)], outer, approx
        # f concave: A = (r1, r2) or empty
        if disc <= 0.0:
            if self._quad_sign(r1, sgn, eps) < 0:  # the maximum is negative: A is empty
                return [], [], []
            w = 1.0 + abs(r1)  # a neighbourhood of the vertex with certified negative ends
            for _ in range(60):
                if self._quad_sign(r1 - w, sgn, eps) < 0 and self._quad_sign(r1 + w, sgn, eps) < 0:
                    return [], [(r1 - w, r1 + w)], []
                w *= 2.0
            return [], [(-inf, inf)], []
        approx = [(r1, r2)]
        b1, b2 = bracket(r1, -1), bracket(r2, 1)
        if b1 is None or b2 is None:
            return [], [(-inf, inf)], approx
        inner = [(b1[1], b2[0])] if b1[1] < b2[0] else []
        return inner, [(b1[0], b2[1])], approx

    def _log_measure(self, intervals, under_q: bool) -> tuple[float, float]:
        """(log mass, error bound) of a union of disjoint intervals under P = N(0, 1) or Q = N(d, 1/a)
        (the coordinates sqrt(a)(v - d) carry 4 ulps)."""
        from ._profile import log_normal_mass, log_sum_bounds

        a, d = self.precisions[0], self.shifts[0]
        sa = math.sqrt(a)
        terms = []
        for lo, hi in intervals:
            if under_q:
                zl = -math.inf if lo == -math.inf else sa * (lo - d)
                zh = math.inf if hi == math.inf else sa * (hi - d)
                terms.append(log_normal_mass(zl, zh, 4.0 * U * abs(zl) if math.isfinite(zl) else 0.0,
                                             4.0 * U * abs(zh) if math.isfinite(zh) else 0.0))
            else:
                terms.append(log_normal_mass(lo, hi))
        return log_sum_bounds(terms)

    def exact_delta(self, epsilon: float, direction: str = "remove") -> tuple[float, float]:
        """Certified (lower, upper) of delta(eps) for one use of a one-dimensional pair (eps >= 0).

        remove: A = {L > eps} under (P, Q); add: A = {-L > eps} under (Q, P); L quadratic, so A is a
        half-line, two tails or an interval between the roots.  Upper bound: the first measure of the
        certified outer set minus e^eps times the second measure of the inner set; lower bound: the
        same difference on the (uncertified) computed set; differences in log space
        (:mod:`mechanisms._profile`)."""
        from ._profile import hockey_bounds

        check_direction(direction)
        eps = V.epsilon(epsilon)
        if not self.exact_profile:
            return super().exact_delta(eps, direction)
        add = direction == "add"
        inner, outer, approx = self._roots(-1.0 if add else 1.0, eps)

        def diff(first_set, second_set, which: int) -> float:
            lp, ep = self._log_measure(first_set, under_q=add)
            lq, eq = self._log_measure(second_set, under_q=not add)
            return hockey_bounds(lp, ep, lq, eq, eps)[which]

        up = diff(outer, inner, 1)
        low = diff(approx, approx, 0) if approx else 0.0
        return min(low, up), up

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)
