"""A general mixture-of-Gaussians dominating pair (correlated sampling, matrix mechanisms, MMCC).

GaussianMixture(sigma, sensitivities, probabilities)
    The pair P = sum_i p_i N(c_i, sigma^2), Q = N(0, sigma^2) with c_i >= 0 (the "mixture of Gaussians
    mechanism" of Choquette-Choo, Ganesh, Steinke & Thakurta 2024, "Privacy amplification for matrix
    mechanisms", whose amplified matrix-mechanism analysis reduces to such pairs; dp-accounting's
    ``MixtureOfGaussiansDpEvent``).  The Poisson-subsampled Gaussian is the case p = (1 - q, q),
    c = (0, Delta).  Add/remove relation: "remove" is the pair (P, Q), "add" the swapped (Q, P); both are
    reported (``symmetric = False``) and the accountant takes the worse.  ``tight = True``: the numbers
    are those of this pair; whether a mechanism attains it is the caller's reduction.

    In units of sigma (m_i = c_i / sigma), with g(x) = sum_i p_i exp(m_i x - m_i^2 / 2) = (dP/dQ)(x):
    L = log g(x), x ~ P (remove) and L = -log g(x), x ~ Q (add); L is monotone in x.

    * log MGF: M(s) = int phi(x) g(x)^{1+s} dx (remove), int phi(x) g(x)^{-s} dx (add), by the trapezoid
      rule.  The integrand is analytic in the strip |Im x| < pi / (2 max m_i) (there every term of g has
      argument in (-pi/2, pi/2), so Re g > 0, |g(x + iy)| <= g(x), |g| >= g(x) cos(m y) and |arg g| <= m |y|),
      so the rule's error is at most 2 K / (e^{2 pi y / h} - 1) relative to M(Re s), K = e^{y^2/2 + |t| m y}
      cos(m y)^{min(a, 0)} (Trefethen & Weideman 2014, Thm 5.1); the step h is chosen for 1e-15, and the
      range is truncated where Gaussian tail bounds of the integrand fall below e^{-40} times a lower
      bound of M.  Declared error ``log_mgf_error`` = 1e-10 (relative to M(Re s), as the subsampled
      Gaussian's; covers the rule, the truncation and the rounding of the sums).
    * RDP: max over both directions of log M(alpha - 1) / (alpha - 1) from the same rule at real s, plus
      its error, rounded up (exact up to that error, both directions, every real alpha > 1).
    * Decay envelope (characteristic-function route): integrating by parts in x,
      |M(c + it)| <= TV(H) / |t|, H = phi g^{a+1} / g' (a = 1 + c remove, -c add); H is monotone outside
      an interval given by bounds on (log H)' (g'/g and g''/g' are averages of the m_i), and its variation
      inside is bounded cell by cell with |(log H)''| <= 1 + (|a + 1| + 1) (max m - min m)^2 / 4.
    * Cells of the loss (discretised-PLD route): mixtures of normal CDF differences at the inverse loss
      map x(l), bracketed by bisection on the monotone log g (the masses' error bars include the
      bracket width and erfc's rounding).
    * total variation: sup_x P(X > x) - Q(X > x), at the root of g = 1 (bracketed), an upper bound.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._mixture_kernels import invert_log_g, trapezoid_log_mgf, trapezoid_log_mgf_many, tv_bound
from ._numerics import log_ndtr_bounds
from ._pairs import ContinuousUnlessTrivial
from .base import as_complex_array, check_direction
from .registry import register

__all__ = ["GaussianMixture"]

U = 2.0 ** -53
MGF_ERROR = 1e-10
_TARGET = 1e-15  # discretisation error of the trapezoid rule, relative to M(Re s)
_TAIL = 40.0  # truncation: integrand bounds below e^{-40} (< 5e-18) times a lower bound of M


@dataclass(frozen=True)
class _Shape:
    logw: np.ndarray
    m: np.ndarray
    m_max: float
    m_min: float
    m_min_pos: float
    w_top: float  # weight of the component with the largest m
    w_bottom: float  # weight of the component with the smallest m
    g0: float  # g(0) = sum w e^{-m^2/2}


@functools.lru_cache(maxsize=64)
def _shape(sigma: float, sens: tuple, probs: tuple) -> _Shape:
    w = np.array(probs, dtype=float)
    w = w / math.fsum(w.tolist())
    m = np.array(sens, dtype=float) / sigma
    keep = w > 0
    w, m = w[keep], m[keep]
    order = np.argsort(m)
    w, m = w[order], m[order]
    pos = m[m > 0]
    return _Shape(np.log(w), m, float(m[-1]), float(m[0]), float(pos[0]) if pos.size else 0.0,
                  float(np.sum(w[m == m[-1]])), float(np.sum(w[m == m[0]])),
                  float(np.sum(w * np.exp(-0.5 * m * m))))


def _log_phi_c(x: float) -> float:
    """log P(N(0,1) > x) (upper-tail), via erfc / its asymptotic bound for large x."""
    if x < 30.0:
        return math.log(0.5 * math.erfc(x / math.sqrt(2.0)))
    return -0.5 * x * x - math.log(x) - 0.5 * math.log(2.0 * math.pi)  # Mills ratio upper bound


@register
@dataclass(frozen=True)
class GaussianMixture(ContinuousUnlessTrivial):
    """The pair sum_i p_i N(c_i, sigma^2) vs N(0, sigma^2) (add/remove), c_i = ``sensitivities`` >= 0.

    Parameters
    ----------
    sigma : float
        Common standard deviation, > 0.
    sensitivities : list of float
        Component means c_i >= 0 (at least one > 0 unless the pair is trivial), at most 64 components.
    probabilities : list of float
        Mixture weights p_i >= 0 summing to 1 (within 1e-9; renormalised).

    Examples
    --------
    The Poisson-subsampled Gaussian with q = 0.01: ``GaussianMixture(1.0, [0.0, 1.0], [0.99, 0.01])``.
    """

    sigma: float
    sensitivities: list
    probabilities: list

    name = "gaussian_mixture"
    pld_available = True
    symmetric = False
    relations = ("add_remove",)
    field_checks = {"sigma": V.positive}

    def __post_init__(self):
        super().__post_init__()
        # the two lists are checked together (types and lengths first), then normalised
        sens = self.sensitivities
        probs = self.probabilities
        if not isinstance(sens, (list, tuple)) or not isinstance(probs, (list, tuple)):
            raise TypeError("sensitivities and probabilities must be lists of numbers")
        if not 1 <= len(sens) <= 64 or len(sens) != len(probs):
            raise ValueError(f"sensitivities and probabilities must have the same length in [1, 64], got "
                             f"{len(sens)} and {len(probs)}")
        sens = [V.real(f"sensitivities[{i}]", v, low=0.0) for i, v in enumerate(sens)]
        probs = [V.probability(f"probabilities[{i}]", v) for i, v in enumerate(probs)]
        tot = math.fsum(probs)
        if abs(tot - 1.0) > 1e-9:
            raise ValueError(f"probabilities must sum to 1 (within 1e-9), got {tot!r}")
        if max(s / self.sigma for s in sens) > 1e3:
            raise ValueError("sensitivities / sigma must be <= 1e3")
        object.__setattr__(self, "sensitivities", sens)
        object.__setattr__(self, "probabilities", probs)

    def __hash__(self):
        return hash((self.name, self.sigma, tuple(self.sensitivities), tuple(self.probabilities)))

    @property
    def _s(self) -> _Shape:
        return _shape(self.sigma, tuple(self.sensitivities), tuple(self.probabilities))

    @property
    def _trivial(self) -> bool:
        return self._s.m_max == 0.0

    # ---------------------------------------------------------------- quadrature plan
    def _plan(self, c, t, add: bool):
        """(h, x_lo, x_hi) for the trapezoid rule at s = c + it (module docstring); c, t scalars or arrays."""
        sh = self._s
        mm = sh.m_max
        c = np.asarray(c, dtype=float)
        t = np.abs(np.asarray(t, dtype=float))
        a = -c if add else 1.0 + c
        y = min(2.0, 0.25 * math.pi / mm)
        # log K = y^2/2 + |t| m y + min(a, 0) log cos(m y)  (a < 0: |g|^a <= (g cos(m y))^a)
        log_k = 0.5 * y * y + t * mm * y + np.minimum(a, 0.0) * math.log(math.cos(mm * y))
        h = 2.0 * math.pi * y / (log_k + math.log(2.0 / _TARGET) + 1.0)
        if add:
            # x >= 0: g >= g(0), M_add >= 1 (Jensen); x <= 0: g >= w_b e^{m_b x - m_b^2/2}
            x_hi = np.sqrt(2.0 * (c * max(-math.log(sh.g0), 0.0) + _TAIL)) + 1.0
            mb = sh.m_min
            x_lo = c * mb + np.sqrt(2.0 * (c * -math.log(sh.w_bottom) + c * (1 + c) * mb * mb / 2
                                           + _TAIL)) + 1.0
        else:
            # x >= 0: g <= e^{m_max x}; M >= w_top^a e^{a (a-1) m_max^2 / 2}
            x_hi = a * mm + np.sqrt(2.0 * (a * mm * mm / 2 + a * -math.log(sh.w_top) + _TAIL)) + 1.0
            # x <= 0: g <= 1, so the integrand is <= phi(x); M >= w_top^a
            x_lo = np.sqrt(2.0 * (a * -math.log(sh.w_top) + _TAIL)) + 1.0
        return h, -x_lo, x_hi

    def _log_mgf_one(self, c: float, t: float, add: bool) -> complex:
        sh = self._s
        h, x_lo, x_hi = (float(v) for v in self._plan(c, t, add))
        re, im = trapezoid_log_mgf(c, t, add, sh.logw, sh.m, h, x_lo, x_hi)
        return complex(re, im)

    # ---------------------------------------------------------------- curves
    @property
    def log_mgf_error(self) -> float:
        return 0.0 if self._trivial else MGF_ERROR

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        """The trapezoid kernel's t-growing rounding on Re s = c, |Im s| <= t_max, relative to M(c) (form
        of ``log_mgf_error``; the nodes' moduli phi g^a sum, times h, to M(c) within the rule's error).

        Per node x (units of sigma, m = max m_i, V = max|log w_i| + m |x| + m^2 / 2): log g(x) is off by
        at most 7 u V + (n_comp + 3) u (the exponents' products and sums, the shifted exps, the log),
        its phase t log g by t times that plus half an ulp of t (V + 1), and the node x_lo + j h by
        2 ulps of |x|, which turns the phase by 2 u t m |x| (its slope is t (log g)' <= t m): per node
        u t (7.5 V + 7.5 + n_comp + 2 m |x|), affine in |x|, averaged over the moduli with
        :func:`abs_x_moment` on the real line's grid (x 1.1 for that grid).  The sum of the n(t_max)
        nodes (h shrinks like 1/t) rounds by n u of the moduli' sum.  Total, times 1.1:
        u (t_max (7.5 (max|log w| + m^2/2 + 1) + n_comp + 9.5 m E|x|) + n(t_max) + 8).  An upper bound:
        10^3-10^5x above the errors measured against 36-digit references at the t_max real queries use
        (the constant 1e-10 covered those measurements too)."""
        if not t_max > 0.0 or self._trivial:
            return 0.0
        from ._mixture_kernels import abs_x_moment

        sh = self._s
        add = direction == "add"
        h0, lo, hi = (float(v) for v in self._plan(c, 0.0, add))
        ex = 1.1 * float(abs_x_moment(float(c), add, sh.logw, sh.m, h0, lo, hi))
        h_t = float(self._plan(c, t_max, add)[0])
        n_t = (hi - lo) / h_t + 2.0
        mm = sh.m_max
        alpha = 7.5 * (float(np.max(np.abs(sh.logw))) + 0.5 * mm * mm + 1.0) + len(sh.m)
        return 1.1 * U * (t_max * (alpha + 9.5 * mm * ex) + n_t + 8.0)

    def mgf_cost(self, t_max: float) -> float:
        if self._trivial:
            return 1.0
        h, lo, hi = (float(v) for v in self._plan(1.0, t_max, False))
        # a node costs ~n_x (n_comp + 3) exp/log/trig evaluations: ~n_x n_comp closed-form node units
        return max(1.0, (hi - lo) / h * (len(self.sensitivities) + 1.0))

    def envelope_cost(self, c: float) -> float:
        return 4096.0 * len(self.sensitivities) / 8.0

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        if self._trivial:
            return np.zeros(s.shape, dtype=complex)
        add = direction == "add"
        flat = s.ravel()
        c, t = np.ascontiguousarray(flat.real), np.ascontiguousarray(flat.imag)
        h, lo, hi = (np.ascontiguousarray(np.broadcast_to(v, c.shape), dtype=float)
                     for v in self._plan(c, t, add))
        sh = self._s
        re, im = trapezoid_log_mgf_many(c, t, add, sh.logw, sh.m, h, lo, hi)
        return (re + 1j * im).reshape(s.shape)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        check_direction(direction)
        if self._trivial:
            return 0.0
        return float(self._log_mgf_one(float(c), 0.0, direction == "add").real)

    def rdp(self, alpha) -> np.ndarray:
        """max over directions of log M(alpha - 1) / (alpha - 1) plus the declared error, rounded up."""
        al = V.alphas(alpha)
        out = np.empty(al.shape)
        for i, a in np.ndenumerate(al):
            if self._trivial:
                out[i] = 0.0
                continue
            if not math.isfinite(a):
                out[i] = math.inf
                continue
            s = a - 1.0
            v = max(self.log_mgf_real(s, "remove"), self.log_mgf_real(s, "add"))
            out[i] = max(0.0, (v + MGF_ERROR * 2) / s * (1.0 + 4 * U))
        return out

    def _density_envelope_fn(self, c: float, direction: str):
        """t -> min(log M(c), log(TV(H)) - log|t|) (module docstring), non-increasing in t."""
        sh = self._s
        add = direction == "add"
        a1 = (1.0 - c) if add else (2.0 + c)
        mp_ = sh.m_min_pos
        if a1 >= 0:
            x_l, x_r = a1 * sh.m_min - sh.m_max, a1 * sh.m_max - mp_
        else:
            x_l, x_r = a1 * sh.m_max - sh.m_max, a1 * sh.m_min - mp_
        spread = sh.m_max - sh.m_min
        lam = 1.0 + (abs(a1) + 1.0) * spread * spread / 4.0
        n_cells = int(min(200_000, max(64, (x_r - x_l) * max(lam, 1.0) * 400)))
        tv = tv_bound(a1, sh.logw, sh.m, x_l, x_r, n_cells, lam) * (1.0 + 1e-9) + 1e-300
        log_tv = math.log(tv)
        log_mc = self.log_mgf_real(c, direction) + MGF_ERROR

        def env(t: float) -> float:
            t = abs(t)
            return log_mc if t == 0.0 else min(log_mc, log_tv - math.log(t))

        return env

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)

    # ---------------------------------------------------------------- distribution of the loss
    def _x_of_log_g(self, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Bracket [x_lo, x_hi] of the root of log g(x) = target (increasing log g); (-inf, -inf) where the
        target is at or below inf log g (log of the zero-mean components' weight)."""
        sh = self._s
        zero = sh.m == 0.0
        floor = float(np.logaddexp.reduce(sh.logw[zero])) if zero.any() else -math.inf
        return invert_log_g(np.ascontiguousarray(targets, dtype=float), sh.logw, sh.m, floor)

    def _cdf_sf(self, x: np.ndarray, add: bool) -> tuple[np.ndarray, np.ndarray]:
        """(P(X <= x), P(X > x)) for X ~ P (remove) or Q (add), each from its own accurate side (ndtr of
        the lower tail); x = -inf gives (0, 1), +inf gives (1, 0)."""
        from scipy.special import ndtr

        sh = self._s
        x = np.asarray(x, dtype=float)
        if add:
            return ndtr(x), ndtr(-x)
        w = np.exp(sh.logw)
        f = np.sum(w[:, None] * ndtr(x[None, :] - sh.m[:, None]), axis=0)
        sf = np.sum(w[:, None] * ndtr(sh.m[:, None] - x[None, :]), axis=0)
        return f, sf

    def pld_cell_masses(self, edges, direction: str = "remove"):
        """Cells of L (module docstring).  Remove: L <= e iff x <= x(e), x ~ P; add: L <= e iff
        x >= x(-e), x ~ Q.  Each edge's probability F_k = P(L <= e_k) is bracketed using the root
        bracket (monotone CDFs) and computed from the accurate side (F or 1 - F); cell masses are
        differences on the side where both ends are below 1/2.  Errors: bracket + 1e-13 relative (ndtr)."""
        check_direction(direction)
        from ._cells import atoms_cell_masses, check_edges

        e = check_edges(edges)
        if self._trivial:
            return atoms_cell_masses(e, [0.0], [1.0])
        add = direction == "add"
        lo, hi = self._x_of_log_g(-e if add else e)
        f_lo, s_lo = self._cdf_sf(lo, add)
        f_hi, s_hi = self._cdf_sf(hi, add)
        if add:
            # P(L <= e) = Q(X >= x(-e)) = sf(x): in [sf(hi), sf(lo)];  P(L > e) = F(x) in [F(lo), F(hi)]
            low_lo, low_hi = s_hi, s_lo  # F_k = P(L <= e_k)
            up_lo, up_hi = f_lo, f_hi  # 1 - F_k
        else:
            low_lo, low_hi = f_lo, f_hi
            up_lo, up_hi = s_hi, s_lo
        low = 0.5 * (low_lo + low_hi)
        low_err = 0.5 * (low_hi - low_lo) + 1e-13 * low + 1e-300
        up = 0.5 * (up_lo + up_hi)
        up_err = 0.5 * (up_hi - up_lo) + 1e-13 * up + 1e-300
        n = e.size
        m = np.empty(n + 1)
        err = np.empty(n + 1)
        m[0], err[0] = low[0], low_err[0]
        m[n], err[n] = up[n - 1], up_err[n - 1]
        use_low = low[1:] <= 0.5
        d_low = low[1:] - low[:-1]
        d_up = up[:-1] - up[1:]
        m[1:n] = np.maximum(np.where(use_low, d_low, d_up), 0.0)
        err[1:n] = np.where(use_low, low_err[1:] + low_err[:-1], up_err[1:] + up_err[:-1])
        return m, err

    # ---------------------------------------------------------------- exact profile of one use
    @property
    def exact_profile(self) -> bool:
        return True

    def _log_tails(self, x: float, upper: bool) -> tuple[float, float]:
        """(log P(X > x) or log P(X < x), error bound) for X ~ the mixture P (units of sigma): a sum of
        normal tails of the components, each with the rounding of m_i and of m_i - x in its argument
        and the rounding of the normalised log-weights."""
        from ._profile import log_sum_bounds

        sh = self._s
        z = (sh.m - x) if upper else (x - sh.m)
        z_err = 2.0 * U * (np.abs(sh.m) + abs(x)) + 1e-300
        lz, ez = log_ndtr_bounds(z, z_err)
        w_err = 4.0 * U * (1.0 + np.abs(sh.logw))
        return log_sum_bounds(list(zip((sh.logw + lz).tolist(), (ez + w_err).tolist(), strict=True)))

    def exact_delta(self, epsilon: float, direction: str = "remove") -> tuple[float, float]:
        """Certified (lower, upper) of delta(eps) for one use (eps >= 0).

        L is monotone in x, so A = {L > eps} is a half-line: remove, A = (x*, inf) with log g(x*) = eps
        and delta = sum_i p_i Phi(m_i - x*) - e^eps Phi(-x*); add, A = (-inf, x**) with
        log g(x**) = -eps and delta = Phi(x**) - e^eps sum_i p_i Phi(x** - m_i) (empty A, delta = 0, when
        -eps is at or below inf log g = log of the zero-mean weight).  The root is bracketed
        (``invert_log_g``, verified by evaluation); the upper bound takes the two measures at opposite
        ends of the bracket, the lower bound both at one point (any half-line gives a lower bound);
        both differences in log space (:mod:`mechanisms._profile`)."""
        from ._profile import hockey_bounds

        check_direction(direction)
        eps = V.epsilon(epsilon)
        if self._trivial:
            return 0.0, 0.0
        sh = self._s
        add = direction == "add"
        target = -eps if add else eps
        zero = sh.m == 0.0
        floor = float(np.logaddexp.reduce(sh.logw[zero])) if zero.any() else -math.inf
        floor_err = 8.0 * U * (1.0 + abs(floor)) * (1.0 + len(sh.m)) if zero.any() else 0.0
        if target <= floor - floor_err:
            return 0.0, 0.0  # (add) the loss never exceeds eps: A is empty
        if target <= floor + floor_err:
            # within rounding of the floor: A lies left of the root of log g = floor + 2 floor_err
            xh = float(self._x_of_log_g(np.array([floor + 2.0 * floor_err + 4.0 * U * (1.0 + eps)]))[1][0])
            lq, eq = (float(v[0]) for v in log_ndtr_bounds(np.array([xh])))
            return 0.0, hockey_bounds(lq, eq, -math.inf, 0.0, eps)[1]
        lo, hi = self._x_of_log_g(np.array([target]))
        xl, xh = float(lo[0]), float(hi[0])
        xm = 0.5 * (xl + xh)

        def at(x_p: float, x_q: float):
            """log-measure of A's stand-in under the hockey-stick's first and second measures."""
            if add:  # first measure N(0, 1) on (-inf, x), second the mixture on (-inf, x)
                lp, ep = (float(v[0]) for v in log_ndtr_bounds(np.array([x_p])))
                lq, eq = self._log_tails(x_q, upper=False)
            else:  # first the mixture on (x, inf), second N(0, 1) on (x, inf)
                lp, ep = self._log_tails(x_p, upper=True)
                lq, eq = (float(v[0]) for v in log_ndtr_bounds(np.array([-x_q])))
            return lp, ep, lq, eq

        # upper: the first measure on the wider half-line, the second on the narrower one
        up = hockey_bounds(*(at(xh, xl) if add else at(xl, xh)), eps)[1]
        low = max(hockey_bounds(*at(x, x), eps)[0] for x in (xl, xm, xh))
        return min(low, up), up

    def total_variation(self, direction: str = "remove") -> float:
        """sup_x P(X > x) - Q(X > x), attained at g(x) = 1; an upper bound from the bracket of the root."""
        check_direction(direction)
        if self._trivial:
            return 0.0
        lo, hi = self._x_of_log_g(np.array([0.0]))
        if not np.isfinite(lo[0]):
            return 1.0
        p_tail = float(self._cdf_sf(lo, False)[1][0])  # P(X > x_lo) >= P(X > x0)
        q_tail = float(self._cdf_sf(hi, True)[1][0])  # Q(X > x_hi) <= Q(X > x0)
        return float(min(1.0, max(0.0, (p_tail - q_tail) * (1 + 1e-12) + 1e-15)))
