"""Sparse vector technique (SVT): Laplace, Gaussian and generalized SVT with their RDP curves.

Source: Zhu & Wang 2020, "Improving sparse vector technique with Renyi differential privacy" (= Zhu
2023 thesis, ch. 7; its numbering below); the corrections and numerical recipes, and the numbered pitfalls
named below, are derived in docs/derivations/sparse-vector.md.

Algorithm (thesis Alg. 11): T^ = T + rho; for each adaptively chosen query q_i (global
sensitivity ``sensitivity`` = Delta under the accountant's neighbouring relation) output "top" if
q_i(D) + nu_i >= T^ and "bottom" otherwise; halt after ``cutoff`` = c tops or after ``max_length`` =
k_max queries; with ``resample`` the threshold noise is redrawn after every top.  rho and nu_i are
Laplace or Gaussian noise; eps_rho is the RDP of rho at sensitivity Delta and eps_nu the RDP of nu
at sensitivity **2 Delta** (P9).

Curves used (all data-independent upper bounds, valid for adaptively chosen queries and for both orders
of every neighbouring pair; none is attained, so ``tight = False``):

* (7.1) capped, c = 1:   eps_rho(a) + eps_nu(a) + log(k_max + 1)/(a - 1)           (Thm 7.2.1)
* Thm 7.2.7 (corrected, no "1 +"), c > 1 without resampling, capped:
                         eps_rho(a) + c eps_nu(a) + log sum_{j<=c} C(k_max, j)/(a - 1)
* (7.3) pure query noise, c = 1, any length:  eps_rho(a) + eps_nu(inf)   (hypothesis on eps_nu, P6)
* (7.2) Gaussian noises on non-negative queries Q+, c = 1, any length (Prop. 7.2.5;
  docs/derivations/sparse-vector.md §2), with the
  *correct* conditional mean E[K | rho = z] = 1/(1 - Phi((T + z)/sigma2)) (the printed Phi/(1-Phi)
  under-states it, P1) and the moment computed numerically (the printed closed form is violated for
  T < 0.36 sigma1, P2; its simplified RDP drops a factor (2a-1)/(2a-2), P3):
      min_{1<g<sigma2^2/sigma1^2} (g* a - 1) a Delta^2 / (2 (a-1) sigma1^2) + 2 a Delta^2/sigma2^2
                                   + log M_g(T, sigma1, sigma2) / (g (a - 1)),   g* = g/(g-1).
* Laplace noises: the mechanism is pure DP with eps_1 + c eps_2 (no resampling) or c (eps_1 + eps_2)
  (resampling) (Lemma 7.1.3), and every eps-DP mechanism has the RDP of randomized response RR(eps)
  (the "sinh" form of the thesis; tight pure-to-RDP conversion).
* ``resample`` with cut-off c: c-fold adaptive composition of the c = 1 mechanism with the run's cap
  i.e. c times the c = 1 curve.

The raw (7.1)/(7.2)/Thm 7.2.7 bounds are not monotone in the order; since the true Renyi divergence is
non-decreasing in the order, ``rdp`` returns the monotone envelope min_{a' >= a} bound(a'),
computed exactly from the unimodality of each bound, and the minimum over all valid curves.
The never-proved conjecture eps_rho(a) + c eps_nu(a) (Remark 7.2.12) and the under-reporting closed
form of Remark 7.2.8 are not used anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import ClassVar

import numpy as np

from .. import validation as V
from .._numerics import add_up, ceil_fraction, div_up, mul_up, scale_up, stirlerr
from .._rdp_kernels import rr_k_curve
from ..base import UnsupportedRoute, check
from ..laplace import laplace_rdp
from ..lattice import AtomicMechanism, rr_power_atoms, rr_rdp
from ..registry import register
from . import _kernels as K

__all__ = ["GeneralizedSVT", "LaplaceSVT", "GaussianSVT", "laplace_rdp", "rr_rdp", "log_binom_sum",
           "log_binom_sum_upper", "log_moment_qplus", "RR_ATOMS_MAX"]

NOISES = ("laplace", "gaussian")
# Hoelder exponents are restricted to g <= (1 - GAMMA_EDGE) sigma2^2/sigma1^2 so that the moment integral
# stays well resolved (P15); any admissible g gives a valid bound.
GAMMA_EDGE = 1.0 / 400.0
N_GAMMA = 128


RR_ATOMS_MAX = 1 << 22  # largest RR power whose atoms the characteristic-function route enumerates
_U = 2.0 ** -53
_LN2 = math.log(2.0)
_LOG_2PI = math.log(2.0 * math.pi)
_SUM_WINDOW = 1 << 17  # terms summed explicitly; the rest is bounded by a geometric series
_MAX_N = 10 ** 300
_EXACT_TERMS = 256  # sums of at most this many binomial coefficients are done in exact integers


def _log_comb_terms(n: int, j: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log C(n, j), absolute error bound) for integers 1 <= j <= n/2 (float array, j < 2^53), any
    integer n < 10^300: Stirling's formula with the exact remainders (Loader 2000),

        log C(n, j) = s(n) - s(j) - s(n-j) - j log(j/n) - (n-j) log1p(-j/n) + log(n / (2 pi j (n-j)))/2.

    The relative error 2u of j/n moves the entropy terms by <= 2u j (1 + log(n/j)); each term carries a
    few ulps of its own size."""
    nf = float(n)
    x = j / nf
    nmj = nf - j  # (rounded for n > 2^53: relative u, covered by the ulps of the terms)
    sn, en = stirlerr(np.array([nf]))
    sj, ej = stirlerr(j)
    sm, em = stirlerr(nmj)
    tj = j * np.log(x)
    tm = nmj * np.log1p(-x)
    half = 0.5 * (math.log(n) - _LOG_2PI - np.log(j) - np.log(nmj))
    val = sn[0] - sj - sm - tj - tm + half
    err = (en[0] + ej + em + 8.0 * _U * (np.abs(tj) + np.abs(tm) + np.abs(half) + 1.0)
           + 4.0 * _U * j * (1.0 + np.log(nf / j)))
    return val, err


def _log_binom_sum_bounds(n: int, c: int) -> tuple[float, float]:
    """(lower, upper) of log sum_{j=0}^{c} C(n, j) for 0 <= c <= n / 2.

    The terms increase in j (ratio C(n, j-1) / C(n, j) = j / (n - j + 1) < 1), so the top
    ``_SUM_WINDOW`` terms are summed explicitly and the rest is at most the last summed term times
    r / (1 - r), r = j_min / (n - j_min + 1)."""
    if c == 0:
        return 0.0, 0.0
    j_lo = max(1, c - _SUM_WINDOW + 1)
    j = np.arange(j_lo, c + 1, dtype=float)
    t, e = _log_comb_terms(n, j)
    if j_lo == 1:
        t = np.append(t, 0.0)  # j = 0
        e = np.append(e, 0.0)
    m = float(np.max(t))
    w = np.exp(t - m)
    part = math.fsum(w.tolist())
    lo = m + math.log(part)
    up_sum = part
    if j_lo > 1:
        r = j_lo / (n - j_lo + 1)
        up_sum += math.exp(float(t[0]) - m) * r / (1.0 - r)
    up = m + math.log(up_sum)
    emax = float(np.max(e))
    rnd = 8.0 * _U * (abs(m) + 1.0) + (t.size + 4.0) * _U
    return lo - emax - rnd, up + emax + rnd


def log_binom_sum_upper(n: int, c: int) -> float:
    """An upper bound on log sum_{j=0}^{min(c, n)} C(n, j), rigorous in floating point, for every
    integer n < 10^300 (no float conversion of n + 1 before differencing: exact for n >= 2^53 too).

    c >= n: n log 2; c > n/2: log(2^n - sum_{j < n - c} C(n, j)); c >= 2^52 (terms beyond exact float
    integers): the entropy bound sum_{j <= c} C(n, j) <= exp(n H(c/n)) (c <= n/2); otherwise the
    windowed sum of :func:`_log_binom_sum_bounds`.  Rounded up by a relative margin of a few ulps.
    """
    top = min(c, n)
    if top <= _EXACT_TERMS or (n - top <= _EXACT_TERMS and n <= 1 << 14):
        # exact integer sum (complement when top is close to n), then a correctly rounded-ish log
        if top <= _EXACT_TERMS:
            tot = sum(math.comb(n, j) for j in range(top + 1))
        else:
            tot = (1 << n) - sum(math.comb(n, j) for j in range(n - top))
        v = math.log(tot)
        return math.nextafter(v * (1.0 + 4.0 * _U), math.inf)
    if top == n:
        v = float(n) * _LN2
        return v * (1.0 + 4.0 * _U)
    if 2 * top > n:
        # complement: sum = 2^n - S', S' = sum_{j <= n - top - 1} C(n, j) >= e^{lower'}
        full = float(n) * _LN2 * (1.0 + 4.0 * _U)
        lo2 = _log_binom_sum_bounds(n, n - top - 1)[0] if n - top - 1 < 2 ** 52 else -math.inf
        if lo2 == -math.inf:
            return full
        v = full + math.log1p(-math.exp(min(lo2 - float(n) * _LN2 * (1.0 - 4.0 * _U), 0.0)))
        return min(v + 8.0 * _U * (abs(v) + 1.0), full)
    if top >= 2 ** 52:
        x = top / n
        v = -float(n) * (x * math.log(x) + (1.0 - x) * math.log1p(-x))
        return v + 8.0 * _U * abs(v) + 4.0 * _U * top * (1.0 + math.log(1.0 / x))
    return _log_binom_sum_bounds(n, top)[1]


def log_binom_sum(n: int, c: int) -> float:
    """log sum_{j=0}^{min(c, n)} C(n, j): log of the output-space size of capped SVT (Thm 7.2.7).

    Rounded up (it enters the privacy bound additively); valid for every integer n up to 10^300 (see
    :func:`log_binom_sum_upper`)."""
    n = V.integer("n", n, low=0)
    c = V.integer("c", c, low=0)
    if n >= _MAX_N:
        raise ValueError(f"n must be < 10**300, got {n!r}")
    return log_binom_sum_upper(int(n), int(c))


def log_moment_qplus(threshold: float, sigma1: float, sigma2: float, gamma: float) -> float:
    """Upper bound on log E_{z~N(0,sigma1^2)}[E[K | rho = z]^gamma] for Gaussian SVT on Q+
    (docs/derivations/sparse-vector.md §2).

    E[K | z] = 1/(1 - Phi((T + z)/sigma2)) is the worst-case (all queries 0) conditional mean stopping
    index, so M_gamma = int N(z; 0, sigma1^2) (1 - Phi((T + z)/sigma2))^{-gamma} dz.  Finite iff
    gamma sigma1^2 < sigma2^2; returns ``inf`` otherwise.  Numerical quadrature rounded up: trapezoid error
    estimate and rigorous (log-concavity) tail bounds are added (upper bound, not exact).
    """
    t = V.real("threshold", threshold)
    s1 = V.positive("sigma1", sigma1)
    s2 = V.positive("sigma2", sigma2)
    g = V.positive("gamma", gamma)
    return float(K.log_moment_qplus(t, s1, s2, g))


def _gamma_grid(sigma1: float, sigma2: float) -> np.ndarray:
    r2 = (sigma2 / sigma1) ** 2
    gmax = r2 * (1.0 - GAMMA_EDGE)
    if gmax <= 1.0:
        return np.empty(0)
    x = 1.0 / (1.0 + np.exp(-np.linspace(-8.0, 8.0, N_GAMMA)))  # logit-uniform: dense at both ends
    return 1.0 + (gmax - 1.0) * x


# ---------------------------------------------------------------------------------- evaluation plan
@dataclass(frozen=True)
class _Plan:
    """Everything the curves need, derived once from the parameters (not part of equality/serialisation)."""

    mult: int  # number of c = 1 units composed (resample) or 1
    c_eff: int  # cut-off of the analysed unit
    k_rho: int
    a_rho: float
    k_nu: int
    a_nu: float  # at sensitivity 2 Delta
    rr_eps: float  # pure epsilon of the unit (inf if none)
    pure_query: bool  # (7.3) applies
    log_len: float  # log of the output-count term (nan if uncapped)
    qplus: bool
    gammas: np.ndarray
    logm: np.ndarray


def _sum_up(v: np.ndarray) -> np.ndarray:
    """A curve made of a few rounded non-negative summands, rounded up (relative 16 ulps and one step)."""
    v = v * (1.0 + 16.0 * _U)
    return np.where(v > 0.0, np.nextafter(v, np.inf), v)


def _noise_param(kind: str, scale: float, sens: float) -> tuple[int, float]:
    """(kind, a): a = Delta^2 / (2 sigma^2) (Gaussian) or Delta / b (Laplace), the smallest float >= the
    exact value (every curve is increasing in a, so the rounded-up a gives upper bounds).  For a Laplace
    scale b = fl(Delta / eps) (``LaplaceSVT``), Delta / b lies within half an ulp of eps, so that a >= eps:
    the curves bound both the pair at the declared eps and the one at the float scale."""
    if kind == "gaussian":
        return K.GAUSS, ceil_fraction(Fraction(sens) ** 2 / (2 * Fraction(scale) ** 2))
    return K.LAP, div_up(sens, scale)


def _build_plan(tn: str, ts: float, qn: str, qs: float, sens: float, cutoff: int, resample: bool,
                kmax: int | None, nonneg: bool, threshold: float | None) -> _Plan:
    c_eff = 1 if (resample or cutoff == 1) else cutoff
    mult = cutoff if (resample and cutoff > 1) else 1
    k_rho, a_rho = _noise_param(tn, ts, sens)
    k_nu, a_nu = _noise_param(qn, qs, 2.0 * sens)
    rr_eps = add_up(a_rho, mul_up(c_eff, a_nu)) if (tn == "laplace" and qn == "laplace") else math.inf
    pure_query = qn == "laplace" and c_eff == 1
    log_len = log_binom_sum(kmax, c_eff) if kmax is not None else math.nan
    qplus = False
    gammas = logm = np.empty(0)
    if nonneg and tn == "gaussian" and qn == "gaussian" and c_eff == 1:
        if threshold is None:
            raise ValueError("threshold (the public SVT threshold T, finite real) is required for "
                             "nonnegative=True with Gaussian threshold and query noise "
                             "(docs/derivations/sparse-vector.md §2, P7)")
        if qs > ts:
            gammas = _gamma_grid(ts, qs)
            logm = K.log_moment_table(float(threshold), ts, qs, gammas)
            keep = np.isfinite(logm)
            gammas, logm = gammas[keep], logm[keep]
            qplus = gammas.size > 0
        elif kmax is None:
            raise ValueError(f"nonnegative Gaussian SVT without max_length needs query noise sigma2 > "
                             f"threshold noise sigma1 (Hoelder range 1 < gamma < sigma2^2/sigma1^2 is "
                             f"empty for sigma1={ts!r}, sigma2={qs!r}); give max_length or more query noise")
    if not (math.isfinite(rr_eps) or pure_query or kmax is not None or qplus):
        if c_eff > 1:
            why = ("c > 1 without resample and non-Laplace noise needs max_length (Thm 7.2.7); "
                   "use resample=True or give max_length")
        elif nonneg and tn == "gaussian" and qn == "gaussian":
            # the non-negative-queries (Q+) bound was requested but is empty here
            why = (f"nonnegative Gaussian SVT (queries in Q+, Prop. 7.2.5): no Hoelder exponent gamma in "
                   f"(1, sigma2^2/sigma1^2) = (1, {(qs / ts) ** 2:.6g}) has a finite moment bound for "
                   f"sigma1={ts!r}, sigma2={qs!r}, threshold={threshold!r} (the range is too narrow); "
                   f"give max_length or more query noise sigma2")
        else:
            why = ("Gaussian query noise on arbitrary queries Q(Delta) has no RDP bound for unbounded length "
                   "(docs/derivations/sparse-vector.md, P8); give max_length, or nonnegative=True with "
                   "Gaussian threshold noise and a threshold, or Laplace query noise")
        raise ValueError(f"no valid SVT privacy bound for this configuration: {why}")
    return _Plan(mult, c_eff, k_rho, a_rho, k_nu, a_nu, rr_eps, pure_query, log_len, qplus, gammas, logm)


def _flag(name: str, value, *, show_value: bool = True) -> bool:
    """A bool (Python or numpy), stored as a Python bool."""
    if not isinstance(value, (bool, np.bool_)):
        got = f"{type(value).__name__} {value!r}" if show_value else type(value).__name__
        raise TypeError(f"{name} must be a bool, got {got}")
    return bool(value)


_NOISE = check(V.one_of, options=NOISES)
#: the fields every SVT plug-in shares (after its two noise parameters), checked in this order
_COMMON_CHECKS = {
    "sensitivity": V.positive,
    "cutoff": check(V.integer, label="cutoff (c, number of tops before halting)", low=1),
    "resample": _flag,
    "max_length": check(V.integer, low=1, optional=True,
                        label="max_length (k_max, number of queries; >= 1, an empty query stream is not a "
                              "mechanism)"),
}
#: the fields of the non-negative-queries (Q+) bound
_QPLUS_CHECKS = {"nonnegative": check(_flag, show_value=False), "threshold": check(V.real, optional=True)}


class _SVTBase(AtomicMechanism):
    """Shared curve evaluation of all SVT plug-ins (subclasses set ``_plan`` in ``__post_init__``)."""

    tight: ClassVar[bool] = False
    symmetric: ClassVar[bool] = True

    _plan: _Plan

    def _scales(self) -> tuple[float, float]:
        """(threshold noise scale, query noise scale): Laplace scale b or Gaussian sigma."""
        return self.threshold_scale, self.query_scale

    def __post_init__(self):
        """Check the fields (``field_checks``) and derive the evaluation plan from the noise families
        (``threshold_noise``, ``query_noise``) and :meth:`_scales`."""
        super().__post_init__()
        ts, qs = self._scales()
        object.__setattr__(self, "_plan", _build_plan(
            self.threshold_noise, ts, self.query_noise, qs, self.sensitivity, self.cutoff, self.resample,
            self.max_length, getattr(self, "nonnegative", False), getattr(self, "threshold", None)))

    def as_generalized(self) -> GeneralizedSVT:
        """The same mechanism as a :class:`GeneralizedSVT`."""
        ts, qs = self._scales()
        return GeneralizedSVT(self.threshold_noise, ts, self.query_noise, qs, self.sensitivity, self.cutoff,
                              self.resample, self.max_length, getattr(self, "nonnegative", False),
                              getattr(self, "threshold", None))

    # ------------------------------------------------------------------ curves
    def rdp(self, alpha) -> np.ndarray:
        """RDP upper bound: min over the valid curves of their monotone envelopes, times the unit count.

        Data-independent, adaptive queries allowed, both orders of every neighbouring pair (for the
        relation under which ``sensitivity`` is the global sensitivity).  Non-decreasing in alpha.
        """
        al = V.alphas(alpha)
        x = np.ascontiguousarray(al.ravel())
        best = self._unit_curves(x, envelope=True)
        out = np.full(x.shape, np.inf)
        for v in best.values():
            out = np.minimum(out, v)
        return scale_up(self._plan.mult, out).reshape(al.shape)

    def rdp_bounds(self, alpha, envelope: bool = False) -> dict[str, np.ndarray]:
        """Each valid bound of the analysed *unit* separately (before multiplying by the unit count).

        Keys: ``"rr"`` (pure eps -> RR RDP), ``"7.3"``, ``"7.1"`` (c = 1, capped) or ``"thm727"`` (c > 1,
        capped), ``"7.2"`` (Q+).  With ``envelope=False`` the raw formulas (as stated in the thesis, useful
        for comparing with reference values); the Q+ entry is then minimised over the tabulated gammas.
        """
        al = V.alphas(alpha)
        x = np.ascontiguousarray(al.ravel())
        return {k: v.reshape(al.shape) for k, v in self._unit_curves(x, envelope).items()}

    def _unit_curves(self, x: np.ndarray, envelope: bool) -> dict[str, np.ndarray]:
        """The valid curves of one unit, each an upper bound: the RR curve is rounded up by its kernel; the
        others are sums of a few non-negative terms whose inputs are upper bounds (a_rho, a_nu, log_len,
        log M_g), rounded up here by a relative 16 ulps and one step (their sums rounded to nearest:
        (7.3) at alpha = inf, eps1 + eps2, was below the exact sum)."""
        p = self._plan
        out: dict[str, np.ndarray] = {}
        if math.isfinite(p.rr_eps):
            out["rr"] = rr_k_curve(x, p.rr_eps, 2)
        if p.pure_query:
            out["7.3"] = _sum_up(K.pure_query_curve(x, p.k_rho, p.a_rho, p.a_nu))
        if not math.isnan(p.log_len):
            key = "7.1" if p.c_eff == 1 else "thm727"
            out[key] = _sum_up(K.transfer_curve(x, p.k_rho, p.a_rho, p.k_nu, p.a_nu, float(p.c_eff),
                                                p.log_len, envelope))
        if p.qplus:
            out["7.2"] = _sum_up(K.qplus_curve(x, p.gammas, p.logm, p.a_rho, p.a_nu, envelope))
        return out

    @property
    def pure_epsilon(self) -> float:
        """eps_1 + c eps_2 (no resampling) or c (eps_1 + eps_2) (resampling) for Laplace noises, rounded up;
        else inf."""
        p = self._plan
        return mul_up(p.mult, p.rr_eps) if math.isfinite(p.rr_eps) else math.inf

    @property
    def infinite_loss_mass(self) -> float:
        return 0.0

    # ------------------------------------------------------------------ PLD (pure-DP configurations only)
    @property
    def pld_available(self) -> bool:  # type: ignore[override]
        """True for Laplace noises: dominated by RR(eps)^{x units} (pure DP; Kairouz et al. 2015), whose
        m + 1 atoms are enumerated only for m <= ``RR_ATOMS_MAX`` (beyond, the RDP route alone: bounded
        work and memory, still certified; e.g. cutoff = 1e12 with resample=True)."""
        return math.isfinite(self._plan.rr_eps) and self._plan.mult <= RR_ATOMS_MAX

    def _atoms(self) -> tuple[np.ndarray, np.ndarray]:
        p = self._plan
        if not math.isfinite(p.rr_eps):
            raise UnsupportedRoute(f"{self.describe()} is not pure DP; use method='rdp'")
        return rr_power_atoms(p.rr_eps, p.mult)

    def _rr_power(self) -> tuple[float, int, float] | None:
        p = self._plan
        return (p.rr_eps, p.mult, 0.0) if math.isfinite(p.rr_eps) else None


# ---------------------------------------------------------------------------------------- plug-ins
@register
@dataclass(frozen=True)
class GeneralizedSVT(_SVTBase):
    """Generalized SVT (Alg. 11) with Laplace or Gaussian threshold and query noise.

    Parameters
    ----------
    threshold_noise, query_noise : {"laplace", "gaussian"}
        Families of the threshold noise rho and of the per-query noise nu_i.
    threshold_scale, query_scale : float
        Laplace scale b or Gaussian standard deviation sigma of rho and nu_i (query units), > 0.
    sensitivity : float, default 1
        Global sensitivity Delta of every query (|q(D) - q(D')| <= Delta) under the accountant's relation.
    cutoff : int, default 1
        c >= 1: halt after c tops.
    resample : bool, default False
        Redraw the threshold noise after every top (then the run is c units of the c = 1 mechanism).
    max_length : int or None, default None
        k_max >= 1: halt after this many queries (None = unbounded stream).
    nonnegative : bool, default False
        Queries are in Q+(Delta) (q(D) >= 0 for all D); enables the unbounded-length Gaussian bound (7.2).
    threshold : float or None
        The public threshold T (finite); required (and used) only by the Q+ bound.  For per-query
        thresholds T_i pass max T_i (the moment is increasing in T; P7).

    Notes
    -----
    ``rdp`` is an upper bound (see the module docstring for the curves and their sources); ``pure_epsilon``
    is finite only for Laplace noises.  Configurations without any bound in the source (Gaussian query
    noise on Q(Delta) with unbounded length; c > 1 without resampling, non-Laplace noise and unbounded
    length) raise ``ValueError``.
    """

    threshold_noise: str
    threshold_scale: float
    query_noise: str
    query_scale: float
    sensitivity: float = 1.0
    cutoff: int = 1
    resample: bool = False
    max_length: int | None = None
    nonnegative: bool = False
    threshold: float | None = None

    name = "generalized_svt"
    field_checks = {"threshold_noise": _NOISE, "query_noise": _NOISE, "threshold_scale": V.positive,
                    "query_scale": V.positive, **_COMMON_CHECKS, **_QPLUS_CHECKS}


@register
@dataclass(frozen=True)
class LaplaceSVT(_SVTBase):
    """Standard SVT (Alg. 10): rho ~ Lap(Delta/eps1), nu_i ~ Lap(2 Delta/eps2), cut-off c.

    Parameters
    ----------
    epsilon1, epsilon2 : float
        Threshold and query privacy parameters, > 0 (noise scales Delta/eps1 and 2 Delta/eps2).
    sensitivity : float, default 1
        Global sensitivity Delta of the queries.
    cutoff : int, default 1
        c >= 1.
    resample : bool, default False
        Redraw the threshold noise after each top.
    max_length : int or None
        Optional cap on the number of queries (adds the (7.1)/Thm 7.2.7 curve to the minimum).

    Notes
    -----
    Pure DP (Lemma 7.1.3, Lyu et al. 2017): eps1 + c eps2 without resampling, c (eps1 + eps2) with it;
    the c = 1 bound eps1 + eps2 is attained (docs/derivations/sparse-vector.md §1).  RDP: the minimum of
    RR(pure eps) (tight conversion), (7.3) and, if capped, (7.1)/Thm 7.2.7; c units for ``resample``.
    """

    epsilon1: float
    epsilon2: float
    sensitivity: float = 1.0
    cutoff: int = 1
    resample: bool = False
    max_length: int | None = None

    name = "laplace_svt"
    threshold_noise: ClassVar[str] = "laplace"
    query_noise: ClassVar[str] = "laplace"
    field_checks = {"epsilon1": V.positive, "epsilon2": V.positive, **_COMMON_CHECKS}

    @property
    def threshold_scale(self) -> float:
        """Laplace scale of the threshold noise, Delta / eps1."""
        return self.sensitivity / self.epsilon1

    @property
    def query_scale(self) -> float:
        """Laplace scale of the query noise, 2 Delta / eps2."""
        return 2.0 * self.sensitivity / self.epsilon2


@register
@dataclass(frozen=True)
class GaussianSVT(_SVTBase):
    """Gaussian SVT: rho ~ N(0, sigma1^2), nu_i ~ N(0, sigma2^2) (Alg. 11 with Gaussian noises).

    Parameters
    ----------
    sigma1, sigma2 : float
        Standard deviations of the threshold and query noise (query units), > 0.
    sensitivity : float, default 1
        Global sensitivity Delta of the queries.
    cutoff : int, default 1
    resample : bool, default False
    max_length : int or None
        Cap k_max; required unless ``nonnegative`` (P8).
    nonnegative : bool, default False
        Queries in Q+(Delta): unbounded length allowed (c = 1 units, needs sigma2 > sigma1 and ``threshold``).
    threshold : float or None
        Public threshold T (finite), used by the Q+ bound.

    Notes
    -----
    RDP upper bounds: (7.1) with the cap, Thm 7.2.7 (c > 1, no resampling, capped), (7.2) with the
    numerically computed moment on Q+; c units for ``resample``.  Not pure DP.
    """

    sigma1: float
    sigma2: float
    sensitivity: float = 1.0
    cutoff: int = 1
    resample: bool = False
    max_length: int | None = None
    nonnegative: bool = False
    threshold: float | None = None

    name = "gaussian_svt"
    threshold_noise: ClassVar[str] = "gaussian"
    query_noise: ClassVar[str] = "gaussian"
    field_checks = {"sigma1": V.positive, "sigma2": V.positive, **_COMMON_CHECKS, **_QPLUS_CHECKS}

    def _scales(self) -> tuple[float, float]:
        return self.sigma1, self.sigma2
