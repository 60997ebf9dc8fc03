"""Selection by score: exponential mechanism, report-noisy-max, permute-and-flip, bounded range.

A mechanism is eps-*bounded range* (eps-BR; Durfee & Rogers 2019, Def. 3.1) if for all neighbours
the privacy loss log(p(y)/q(y)) takes values in an interval [t - eps, t] (some t in [0, eps]); eps-BR
implies eps-DP and is the sharper description of selection mechanisms:

* the exponential mechanism calibrated to eps-DP -- sampling y with probability proportional to
  exp(eps u(D, y) / (2 Delta)) for scores of sensitivity Delta (McSherry & Talwar 2007), or
  exp(eps u(D, y) / Delta) for scores that are monotone in the data set -- is eps-BR (Durfee & Rogers
  2019, Lemma 3.2; the log-partition term only shifts the interval);
* report-noisy-max with Gumbel noise is the exponential mechanism (Gumbel-max trick);
* report-noisy-max with Laplace or exponential noise, and permute-and-flip (McKenna & Sheldon 2020;
  = report-noisy-max with exponential noise, Ding, Kifer et al. 2021), calibrated to eps-DP, are
  accounted as pure eps-DP (randomized response, the exact dominating pair of eps-DP: Kairouz, Oh &
  Viswanath 2015).

Accounting of an eps-BR mechanism (derived here; every step is checked numerically in the tests).

* The pair of a single eps-BR mechanism with loss range [t - eps, t] is a post-processing of the binary
  pair B_t: losses t (P-mass p_t) and t - eps (P-mass 1 - p_t), p_t = (e^eps - e^t)/(e^eps - 1)
  (a pair whose likelihood ratio lies in [a, b] is a garbling of the binary pair with ratios a, b;
  Dong, Durfee & Rogers 2020 reduce BR composition to these "generalized randomized response" pairs).
* RDP (exact supremum over t, closed form): with c = e^{-(alpha - 1) eps}, E = e^eps,
      D_alpha(B_t) = log(u^{alpha-1} (E - c - (1 - c) u) / (E - 1)) / (alpha - 1),  u = e^t,
  is log-concave in u and maximal at u* = (alpha - 1)(E - c) / (alpha (1 - c)) (clipped to [1, E]); the
  curve is min(that, alpha eps^2 / 8) (the eps^2/8-zCDP bound of Cesar & Rogers 2021, Lemma 3.4
  there, used only where rounding of the closed form would dominate).  Upper bound for any eps-BR
  mechanism, attained by some B_t at each single alpha.
* Dominating pair for the characteristic-function route.  The hockey-stick profile of the family is
      sup_t delta_{B_t}(x) = 1 - e^x (x <= -eps),   (e^{eps/2} - e^{x/2})^2 / (e^eps - 1)  (|x| <= eps),
  0 (x >= eps)  [for y = e^x in (y, yE]: the sup over u of (E - u)(1 - y/u) is at u = sqrt(yE)],
  a convex, C^1 profile, hence the profile of one pair: its privacy loss has the P-density
      f(l) = e^{eps/2} e^{l/2} / (2 (e^eps - 1))   on [-eps, eps]   (no atoms),
  log M(s) = s eps + log(eps / (1 - e^{-eps})) + log g((2s + 1) eps), g(w) = (1 - e^{-w})/w.  Every
  B_t is a garbling of it, so every eps-BR mechanism is f-DP for its trade-off function, and adaptive
  composition of f-DP (Dong, Roth & Su 2022, Thm 3.2) makes the k-fold product of this pair a valid
  dominating pair of any adaptive composition of eps-BR mechanisms.  Exact for one use (the profile is
  the supremum); for compositions an upper bound (the optimal adaptive composition of Dong, Durfee &
  Rogers 2020 can be smaller), hence ``tight = False``.  The pair is symmetric (L -> -L under Q).
  delta(0) = tanh(eps / 4).
"""

from __future__ import annotations

import cmath
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from . import validation as V
from ._numerics import _g_scalar
from .base import Delegating, Mechanism, as_complex_array, check, check_direction
from .randomized_response import PureDP
from .registry import register

__all__ = ["BoundedRange", "BoundedRangeMechanism", "ExponentialMechanism", "ReportNoisyMax",
           "PermuteAndFlip", "br_rdp"]

U = 2.0 ** -53
NOISES = ("gumbel", "laplace", "exponential")
MAX_EPS = 500.0
#: the calibration epsilon of every plug-in here, in [0, MAX_EPS]
_EPSILON = check(V.real, low=0.0, high=MAX_EPS)


@njit(cache=True)
def _br_log_mgf_kernel(s: np.ndarray, eps: float, log_norm: float) -> np.ndarray:  # pragma: no cover
    out = np.empty_like(s)
    for i in range(s.size):
        z = s[i]
        out[i] = z * eps + log_norm + cmath.log(_g_scalar((2.0 * z + 1.0) * eps))
    return out


def _log_g(w: float) -> float:
    """log g(w), g(w) = (1 - e^{-w}) / w for real w > 0, by the kernels' own g (:func:`_g_scalar`: a series
    below 0.1), so that log M(0) = log g(eps) - log g(eps) is exactly 0."""
    return math.log(_g_scalar(complex(w)).real)


def _log_norm(eps: float) -> float:
    """log(eps / (1 - e^{-eps})) = -log g(eps), without the cancellation of log(eps) - log(1 - e^{-eps})
    (that form lost 31 ulps of log M at eps ~ 1e-12: log M(0) was -3.1e-15 at eps = 1e-8)."""
    return -_log_g(eps)


def br_rdp(alpha: float, eps: float) -> float:
    """sup over t of D_alpha(B_t) for an eps-BR mechanism (module docstring), rounded up."""
    if eps == 0.0:
        return 0.0
    if not math.isfinite(alpha):
        return eps
    s = alpha - 1.0
    cz = eps * eps / 8.0 * alpha * (1.0 + 4 * U)  # Cesar & Rogers 2021: eps^2/8-zCDP
    one_m_c = -math.expm1(-s * eps)  # 1 - c
    big_e_m1 = math.expm1(eps)  # E - 1
    a_minus = big_e_m1 + one_m_c  # E - c
    log_u = math.log(s) + math.log(a_minus) - math.log(alpha) - math.log(one_m_c)
    log_u = min(max(log_u, 0.0), eps)  # u in [1, E]
    u = math.exp(log_u)
    rest = a_minus - one_m_c * u  # E - c - (1 - c) u > 0 on [1, E)
    if rest <= 0.0:
        return 0.0 if log_u >= eps else min(cz, eps)
    val = log_u + (math.log(rest) - math.log(big_e_m1)) / s
    err = 16 * U * (abs(log_u) + (abs(math.log(rest)) + abs(math.log(big_e_m1)) + 1.0) / s + 1.0)
    return max(0.0, min(cz, eps, val + err))


class BoundedRange(Mechanism):
    """Shared curves of eps-BR mechanisms (module docstring); subclasses set ``epsilon``."""

    pld_available = True
    symmetric = True
    tight = False
    #: the RDP curve is the per-order supremum over the family {B_t}; the PLD pair dominates the whole
    #: family and has a larger Renyi divergence (both are valid; see the module docstring)
    rdp_below_pair = True
    epsilon: float
    field_checks = {"epsilon": _EPSILON}

    @property
    def br_epsilon(self) -> float:
        """The bounded-range parameter (the loss range)."""
        return self.epsilon

    @property
    def pure_epsilon(self) -> float:
        return self.br_epsilon

    @property
    def log_mgf_error(self) -> float:
        """The closed form's rounding beyond the ulps of its own terms (s eps, log g; what the routes allow
        for every closed form): log g(eps) and log g((2s + 1) eps) carry a few ulps each, 6.2 ulps of
        log M at most over 3000 random (eps, c) against mpmath; declared 16 ulps (0 at eps = 0)."""
        return 16.0 * U if self.br_epsilon > 0.0 else 0.0

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        e = self.br_epsilon
        out = np.empty(al.shape)
        for i, a in np.ndenumerate(al):
            out[i] = br_rdp(float(a), e)
        return out

    # ---- the dominating pair: P-density e^{eps/2} e^{l/2} / (2 (e^eps - 1)) on [-eps, eps]
    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        e = self.br_epsilon
        if e == 0.0:
            return np.zeros(s.shape, dtype=complex)
        flat = np.ascontiguousarray(s).ravel()
        return _br_log_mgf_kernel(flat, e, _log_norm(e)).reshape(s.shape)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        check_direction(direction)
        e = self.br_epsilon
        if e == 0.0:
            return 0.0
        return c * e + _log_norm(e) + _log_g((2.0 * c + 1.0) * e)

    def pld_atoms(self, direction: str = "remove"):
        check_direction(direction)
        if self.br_epsilon == 0.0:
            return np.array([0.0]), np.array([1.0])
        return np.empty(0), np.empty(0)

    def pld_exp_pieces(self, direction: str = "remove"):
        check_direction(direction)
        e = self.br_epsilon
        if e == 0.0:
            return None
        log_w = e / 2.0 - math.log(2.0) - math.log(math.expm1(e))
        return np.array([-e]), np.array([e]), np.array([log_w]), np.array([0.5])

    def pld_cell_masses(self, edges, direction: str = "remove"):
        check_direction(direction)
        if self.br_epsilon == 0.0:
            from ._cells import atoms_cell_masses

            return atoms_cell_masses(edges, [0.0], [1.0])
        return super().pld_cell_masses(edges, direction)

    def total_variation(self, direction: str = "remove") -> float:
        """tanh(eps / 4) (the profile at x = 0), rounded up."""
        check_direction(direction)
        return min(1.0, math.tanh(self.br_epsilon / 4.0) * (1.0 + 4 * U))

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        """|M(c + it)| <= min(M(c), e^{c eps} (1 + e^{-(2c+1) eps}) / (|(2c + 1) + 2it| (1 - e^{-eps})))."""
        check_direction(direction)
        e = self.br_epsilon
        if e == 0.0:
            return lambda t: -math.inf
        m_c = self.log_mgf_real(c)
        b = 2.0 * c + 1.0
        log_num = c * e + math.log1p(math.exp(-b * e)) - math.log(-math.expm1(-e))

        def env(t: float) -> float:
            return min(m_c, log_num - math.log(math.hypot(b, 2.0 * t))) + 4 * U * (1.0 + abs(m_c))

        return env


@register
@dataclass(frozen=True)
class ExponentialMechanism(BoundedRange):
    """Exponential mechanism calibrated to ``epsilon``-DP (eps-bounded range; McSherry & Talwar 2007).

    Sampling y with probability proportional to exp(eps u(D, y) / (2 Delta)) (scores of sensitivity Delta),
    or exp(eps u(D, y) / Delta) when the scores are monotone in the data set; both are eps-DP and eps-BR.
    (With exp(eps u / (2 Delta)) and monotone scores the mechanism is (eps/2)-BR: pass eps/2.)

    Parameters
    ----------
    epsilon : float
        The eps of the calibration, in [0, 500].

    Notes
    -----
    RDP: exact supremum over the BR family; cf/PLD: the BR dominating pair (module docstring).  Upper
    bounds for compositions (``tight = False``).
    """

    epsilon: float

    name = "exponential_mechanism"


@register
@dataclass(frozen=True)
class BoundedRangeMechanism(BoundedRange):
    """Any ``epsilon``-bounded-range mechanism (Durfee & Rogers 2019): the privacy loss lies in an interval
    of length eps.  Accounted by the BR family's RDP and dominating pair (module docstring)."""

    epsilon: float

    name = "bounded_range"


@register
@dataclass(frozen=True)
class ReportNoisyMax(Delegating):
    """Report-noisy-max calibrated to ``epsilon``-DP: argmax_y (u(D, y) + Z_y).

    Parameters
    ----------
    epsilon : float
        The DP calibration: Gumbel or exponential noise of scale 2 Delta / eps (Delta / eps for monotone
        scores), Laplace noise of scale 2 Delta / eps (Delta / eps for monotone scores; Dwork & Roth 2014,
        Claim 3.9 for counting queries).
    noise : {"gumbel", "laplace", "exponential"}
        "gumbel" is the exponential mechanism (eps-BR, :class:`ExponentialMechanism`'s curves);
        "laplace" and "exponential" (= permute-and-flip) are accounted as pure eps-DP (randomized
        response).
    """

    epsilon: float
    noise: str = "gumbel"

    name = "report_noisy_max"
    tight = False
    field_checks = {"epsilon": _EPSILON, "noise": check(V.one_of, options=NOISES)}

    def dominating(self) -> Mechanism:
        """Gumbel noise: the exponential mechanism's (eps-BR) curves; else pure eps-DP."""
        if self.noise == "gumbel":
            return ExponentialMechanism(self.epsilon)
        return PureDP(self.epsilon)


@register
@dataclass(frozen=True)
class PermuteAndFlip(Delegating):
    """Permute-and-flip (McKenna & Sheldon 2020, Thm 1) calibrated to ``epsilon``-DP: candidates in random
    order, each accepted with probability exp(eps (u - u*) / (2 Delta)) (Delta / eps scale for monotone
    scores).  Pure eps-DP, accounted by randomized response (exact pair of eps-DP)."""

    epsilon: float

    name = "permute_and_flip"
    tight = False
    field_checks = {"epsilon": _EPSILON}

    def dominating(self) -> Mechanism:
        """Pure eps-DP (randomized response)."""
        return PureDP(self.epsilon)
