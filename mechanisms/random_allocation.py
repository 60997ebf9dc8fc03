"""Random allocation ("balls-in-bins"): every record is used in exactly one (or k) of t steps per epoch.

One epoch of DP-SGD with balls-in-bins batching: each record is placed in one of the t steps uniformly
at random, independently of the other records (batch sizes are random, mean n / t); step j releases the
sum of its batch's gradients clipped to L2 norm C plus N(0, sigma^2 I).  Relation: add/remove (for this
sampler identical to "zero-out", replacing the record by one with zero gradient: the other records'
allocation does not depend on it).  mu = C / sigma.

Dominating pair of one epoch (the t releases together; Chua, Ghazi, Harrison, Leeman, Kamath, Kumar,
Manurangsi, Sinha & Zhang 2025, "Balls-and-bins sampling for DP-SGD", AISTATS -- the pair of the
adaptive batch linear query mechanism with the balls-and-bins sampler; Feldman & Shenfeld 2025,
"Privacy amplification by random allocation" -- the same pair for any base mechanism):

    remove:  P_t = (1/t) sum_i N(mu e_i, I_t),   Q_t = N(0, I_t);     add: the swap.

Both are attained (other records with zero gradient), so the bound is tight at the level of the pair.
With X_i = e^{mu z_i - mu^2/2} (z ~ Q_t) the likelihood ratio is P_t / Q_t = (X_1 + ... + X_t) / t = S / t.

RDP (the curve is the worse of the two directions):

* remove, integer alpha (Feldman & Shenfeld 2025, the Renyi divergence of random allocation with the
  Gaussian mechanism; exact):  e^{(alpha-1) eps} = E_Q[(S/t)^alpha] = t^-alpha alpha! [z^alpha] f(z)^t with
  f(z) = sum_j e^{j (j-1) mu^2 / 2} z^j / j! (the multinomial expansion over the t coordinates), evaluated
  by binary powering of the truncated series in log space (``mechanisms._allocation_kernels``; all terms
  positive, rounding error bounded and added).  Fractional alpha: linear interpolation of the convex
  CGF (alpha - 1) eps(alpha) between integers (an upper bound).
* add, any real alpha > 1 (derived here; exact up to quadrature):  with beta = alpha - 1,
  e^{beta eps} = E_Q[(S/t)^-beta] = (1 / Gamma(beta)) int_0^inf v^{beta-1} L(v/t)^t dv,
  L(u) = E[e^{-u X}] (the Gamma-function identity y^-beta = Gamma(beta)^-1 int u^{beta-1} e^{-uy} du and
  independence of the X_i).  L is computed by the trapezoid rule in z and the v-integral by the
  trapezoid rule in log v (both geometrically convergent for these analytic integrands); the declared
  error ``ADD_LOG_ERROR`` (validated against mpmath in tests/test_random_allocation.py) is added.
* both capped by the Gaussian mechanism's alpha mu^2 / 2 (each record is used once per epoch).

k of t steps per epoch (``RandomAllocationGaussian``): each record is placed in a uniformly random
k-subset of the t steps (independently of the other records).  Upper bound by the reduction of Feldman
& Shenfeld 2025 ("Privacy amplification by random allocation", arXiv 2502.08202: random k-out-of-t
allocation is dominated by the k-fold composition of random 1-out-of-floor(t/k) allocation), in the
refined form with the remainder (Feldman & Shenfeld 2026, "Efficient privacy loss accounting for
subsampling and random allocation", arXiv 2602.17284): with m = floor(t/k), r = t - k m,

    (k-of-t allocation)  <=  (1-of-m allocation)^{(k - r)}  (x)  (1-of-(m+1) allocation)^{r}.

Why (the reduction's argument): cut a uniformly random permutation of the t steps into k - r groups of m
and r groups of m + 1 and use the record in one uniform step of each group, independently; the set of
used steps is exchangeable and always of size k, hence a uniform k-subset.  Revealing the partition (a
mixture with the same weights on both sides: joint convexity) leaves k random allocations over disjoint
groups of steps.  For the attaining (non-adaptive) datasets these are independent and the pair is
exactly the product of the one-step pairs; that the same product dominates adaptively chosen steps
(groups interleaved in time) is the cited theorem's part (stated there for adaptive compositions of
steps each dominated by the Gaussian pair, add/remove relation).  RDP of the composition is the sum over
the groups, per direction, of the 1-of-m curves above (``BallsInBinsGaussian.remove_rdp`` /
``add_rdp``), each capped by the Gaussian alpha mu^2 / 2: an **upper bound** (not attained for 1 < k <
t).  k = t gives m = 1: exactly the k-fold Gaussian alpha k mu^2 / 2, which is also the always-sound cap
without amplification (given the k-subset the record enters exactly k Gaussian releases; joint
convexity).  The lower bound is the sum of the t releases of the attaining datasets (others with zero
gradient): N(k C, t sigma^2) against N(0, t sigma^2), the Gaussian pair with mu' = k mu / sqrt(t) (a
post-processing: certified, exact at k = t).  Checked against exact computations of the k-of-t pair
((1/C(t,k)) sum_S N(mu 1_S, I_t) versus N(0, I_t)) for t <= 5 in tests/test_random_allocation_k.py.

Composition over epochs is the ledger count (the record's allocations in different epochs are
independent).  A partial epoch is charged as a full one (its releases are a post-processing of a full
epoch's).  Certified lower bounds use ``attained_lower_pair``: the per-epoch pair of the largest of the
t releases (a post-processing of the attained pair, see :mod:`mechanisms.max_statistic`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy.special import gammaln

from . import validation as V
from ._allocation_kernels import log_laplace_grid, log_power_moments
from .base import Mechanism, check, field_ref
from .gaussian import gaussian_rdp_upper
from .registry import register

#: declared absolute error of log E_Q[(S/t)^-beta] from the two quadratures (validated against mpmath)
ADD_LOG_ERROR = 1e-9
_Y_STEP = 1.0 / 32.0
_FINE = 0.5  # fine step 0.5 / sqrt(max |f''|) for the narrow peaks of large orders


@lru_cache(maxsize=64)
def _remove_log_moments(mu: float, t: int, amax: int) -> tuple[np.ndarray, np.ndarray]:
    """log E_Q[(S/t)^a] for a = 0..amax and an absolute error bound (rounded up)."""
    lm, err = log_power_moments(mu, t, amax)
    a = np.arange(amax + 1, dtype=float)
    val = lm - a * math.log(t)
    return val, err + 4.0 * 2.0**-53 * (np.abs(val) + a * math.log(t) + 1.0)


def _g_of_y(mu: float, t: int, ys: np.ndarray) -> np.ndarray:
    """G(y) = t log L(e^y / t) (log L = log1p(-(1 - L)) where 1 - L is small, for accuracy)."""
    log_l, log_1ml = log_laplace_grid(mu, np.exp(ys) / t)
    one_minus = np.exp(log_1ml)
    return np.where(one_minus < 0.5, t * np.log1p(-np.minimum(one_minus, 0.5)), t * log_l)


_Y_LO, _Y_HI = -170.0, 60.0


@lru_cache(maxsize=64)
def _coarse(mu: float, t: int) -> tuple[np.ndarray, np.ndarray]:
    """G on the fixed grid y in [-170, 60], step ``_Y_STEP`` (shared by every order)."""
    ys = np.arange(_Y_LO, _Y_HI + _Y_STEP / 2, _Y_STEP)
    return ys, _g_of_y(mu, t, ys)


def _add_log_moment_one(mu: float, t: int, beta: float) -> float:
    """log E_Q[(S/t)^-beta] for one beta >= 0.5, or +inf when the integrand's mass is not inside the
    fixed y-window (very large beta: the caller then uses the Gaussian cap).

    Trapezoid rule in y = log v of exp(beta y + G(y)) / Gamma(beta) over the window where the integrand
    exceeds e^-90 of its maximum, with step min(1/32, 0.5 / sqrt(max |f''|)) (the peak's width in y is
    about |f''|^-1/2; the trapezoid error of a peak of width w with step h is ~ exp(-2 pi^2 w^2 / h^2)).
    Outside [-170, 60]: on the left the integrand is <= e^{beta y} (G <= 0), a mass below e^-85 of the
    total; on the right the window must end where the integrand has fallen by e^-200 and is decreasing
    (slope <= -1), else +inf is returned.
    """
    ys, g = _coarse(mu, t)
    f = beta * ys + g
    top = float(f.max())
    if not f[-1] < top - 200.0:
        return math.inf
    if f[-1] > -np.inf and not (f[-1] - f[-33]) / (ys[-1] - ys[-33]) <= -1.0:
        return math.inf
    inside = np.nonzero(f > top - 90.0)[0]
    i0, i1 = max(int(inside[0]) - 1, 0), min(int(inside[-1]) + 1, ys.size - 1)
    # step from the largest curvature of the log-integrand over the window (peak width ~ |f''|^-1/2)
    seg = f[max(i0 - 1, 0):i1 + 2]
    curv = float(np.max(np.abs(np.diff(seg, 2)))) / _Y_STEP**2 if seg.size >= 3 else 0.0
    h = min(_Y_STEP, _FINE / math.sqrt(max(curv, 1e-300)))
    if h >= _Y_STEP:
        yf, ff = ys[i0:i1 + 1], f[i0:i1 + 1]
        step = _Y_STEP
    else:
        a, b = ys[i0], ys[i1]
        n = max(int(math.ceil((b - a) / h)), 8)
        yf = np.linspace(a, b, n + 1)
        ff = beta * yf + _g_of_y(mu, t, yf)
        step = (b - a) / n
    m = float(ff.max())
    w = np.exp(ff - m)
    tot = (w.sum() - 0.5 * (w[0] + w[-1])) * step
    return m + math.log(tot) - float(gammaln(beta))


def _add_log_moment(mu: float, t: int, beta: np.ndarray) -> np.ndarray:
    """log E_Q[(S/t)^-beta] for beta >= 0.5 (array), plus ``ADD_LOG_ERROR``."""
    b = np.asarray(beta, dtype=float)
    cache: dict[float, float] = {}
    out = np.empty(b.shape)
    for i, x in enumerate(b.ravel().tolist()):
        if x not in cache:
            cache[x] = _add_log_moment_one(mu, t, x)
        out.flat[i] = cache[x]
    return out + ADD_LOG_ERROR


@register
@dataclass(frozen=True)
class BallsInBinsGaussian(Mechanism):
    """One epoch of DP-SGD with balls-in-bins batching (random allocation, each record in 1 of t steps).

    Parameters
    ----------
    sigma : float
        Noise standard deviation (the noise multiplier when ``sensitivity`` is 1), > 0.
    num_steps : int
        t, the number of steps (batches) per epoch, >= 1.
    sensitivity : float, default 1.0
        Clipping norm C (the add/remove sensitivity of one step's sum), > 0.

    RDP only (upper bound; module docstring).  One ledger use = one epoch of t releases.
    """

    sigma: float
    num_steps: int
    sensitivity: float = 1.0

    name = "balls_in_bins_gaussian"
    symmetric = False
    tight = True
    relations = ("add_remove",)

    field_checks = {"sigma": V.positive, "num_steps": check(V.integer, low=1, high=10**9),
                    "sensitivity": V.positive}

    @classmethod
    def example(cls) -> BallsInBinsGaussian:
        """A representative instance (conformance checks)."""
        return cls(sigma=1.2, num_steps=5)

    @property
    def mu(self) -> float:
        return self.sensitivity / self.sigma

    # ---------------------------------------------------------------- RDP
    def remove_cgf_int(self, alphas) -> np.ndarray:
        """(alpha - 1) D_alpha(P_t || Q_t) at integer orders >= 1 (exact, rounding bound added)."""
        a = np.asarray(alphas, dtype=np.int64)
        amax = int(a.max()) if a.size else 2
        amax = max(amax, 2)
        vals, errs = _remove_log_moments(self.mu, self.num_steps, amax)
        return vals[a] + errs[a]

    #: integer orders up to this are evaluated exactly (O(alpha^2 log t)); larger orders use the cap
    REMOVE_MAX_ORDER = 1024

    def remove_rdp(self, alpha) -> np.ndarray:
        """D_alpha(P_t || Q_t): exact at integers, CGF interpolation between them (upper bound); orders
        above ``REMOVE_MAX_ORDER`` get the Gaussian cap alpha mu^2 / 2."""
        al = V.alphas(alpha)
        out = gaussian_rdp_upper(al, self.sensitivity, self.sigma)
        fin = np.isfinite(al) & (al <= self.REMOVE_MAX_ORDER)
        if not fin.any():
            return out
        af = al[fin]
        lo = np.floor(af).astype(np.int64)
        hi = np.ceil(af).astype(np.int64)
        need = np.unique(np.concatenate([lo, hi, [2]]))
        kmax = int(need.max())
        k = self.remove_cgf_int(np.arange(kmax + 1))
        k[:2] = 0.0  # K(0) = K(1) = 0 exactly (total mass / mean of the likelihood ratio)
        frac = af - lo
        kk = np.where(hi == lo, k[lo], (1.0 - frac) * k[lo] + frac * k[hi])
        out[fin] = kk / (af - 1.0)
        return out

    def add_rdp(self, alpha) -> np.ndarray:
        """D_alpha(Q_t || P_t) by the Gamma-function integral (module docstring); orders in (1, 1.5) use
        the value at 1.5 (Renyi divergence is non-decreasing in the order)."""
        al = V.alphas(alpha)
        out = np.full(al.shape, np.inf)
        fin = np.isfinite(al)
        if fin.any():
            a = np.maximum(al[fin], 1.5)
            beta = a - 1.0
            if self.num_steps == 1:  # the Gaussian pair
                out[fin] = gaussian_rdp_upper(a, self.sensitivity, self.sigma)
            else:
                out[fin] = _add_log_moment(self.mu, self.num_steps, beta) / beta
        return out

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        cap = gaussian_rdp_upper(al, self.sensitivity, self.sigma)
        if self.num_steps == 1:
            return cap
        return np.minimum(np.maximum(self.remove_rdp(al), self.add_rdp(al)), cap)

    # ---------------------------------------------------------------- lower bounds
    def attained_lower_pair(self):
        """The per-epoch pair of the largest release (a post-processing of the attained pair (P_t, Q_t)):
        its composition is a certified lower bound on this mechanism's privacy profile."""
        from .max_statistic import MaxStatisticPair

        return MaxStatisticPair(mu_p=self.mu, mu_q=0.0, num_steps=self.num_steps)


#: 2^-52: relative rounding margin added to sums of upper bounds (each sum has a few terms)
_ULP = 2.0**-52


@register
@dataclass(frozen=True)
class RandomAllocationGaussian(Mechanism):
    """One epoch of DP-SGD with random k-out-of-t allocation (each record in k of t steps, uniformly).

    Parameters
    ----------
    sigma : float
        Noise standard deviation (the noise multiplier when ``sensitivity`` is 1), > 0.
    num_steps : int
        t, the number of steps (batches) per epoch, >= 1.
    steps_per_record : int
        k, the number of steps each record is used in per epoch, 1 <= k <= t.
    sensitivity : float, default 1.0
        Clipping norm C (the add/remove sensitivity of one step's sum), > 0.

    RDP only, **upper bound** (module docstring): the reduction of Feldman & Shenfeld (2025; remainder
    form 2026) to k random 1-out-of-m / 1-out-of-(m + 1) allocations, m = floor(t / k), composed
    direction by direction; relation add/remove.  k = 1 is :class:`BallsInBinsGaussian` (same curve);
    k = t is exactly the k-fold Gaussian mechanism.  One ledger use = one epoch of t releases.
    """

    sigma: float
    num_steps: int
    steps_per_record: int
    sensitivity: float = 1.0

    name = "random_allocation_gaussian"
    symmetric = False
    tight = False
    relations = ("add_remove",)

    field_checks = {"sigma": V.positive, "num_steps": check(V.integer, low=1, high=10**9),
                    "steps_per_record": check(V.integer, low=1, high=field_ref("num_steps")),
                    "sensitivity": V.positive}

    @classmethod
    def example(cls) -> RandomAllocationGaussian:
        """A representative instance (conformance checks): 2 of 7 steps, groups of 3 and 4."""
        return cls(sigma=1.2, num_steps=7, steps_per_record=2)

    @property
    def mu(self) -> float:
        return self.sensitivity / self.sigma

    def groups(self) -> tuple[tuple[int, int], ...]:
        """((group size, number of groups), ...): k - r groups of m = floor(t / k) steps and r groups of
        m + 1 steps, r = t - k m."""
        k, t = self.steps_per_record, self.num_steps
        m, r = divmod(t, k)
        return tuple((size, n) for size, n in ((m, k - r), (m + 1, r)) if n > 0)

    def _parts(self) -> list[tuple[BallsInBinsGaussian, int]]:
        return [(BallsInBinsGaussian(sigma=self.sigma, num_steps=size, sensitivity=self.sensitivity), n)
                for size, n in self.groups()]

    def remove_rdp(self, alpha) -> np.ndarray:
        """Upper bound on D_alpha(P || Q) (record present vs absent): the sum over the groups of the
        1-of-m remove curves, each capped by the Gaussian alpha mu^2 / 2 (rounded up)."""
        al = V.alphas(alpha)
        cap = gaussian_rdp_upper(al, self.sensitivity, self.sigma)
        tot = np.zeros(al.shape)
        for part, n in self._parts():
            tot = tot + n * np.minimum(part.remove_rdp(al), cap)
        return tot * (1.0 + _ULP * (len(self.groups()) + 2))

    def add_rdp(self, alpha) -> np.ndarray:
        """Upper bound on D_alpha(Q || P) (record absent vs present): as ``remove_rdp`` with the add
        curves (orders in (1, 1.5) use the value at 1.5, as for one group)."""
        al = V.alphas(alpha)
        cap = gaussian_rdp_upper(al, self.sensitivity, self.sigma)
        tot = np.zeros(al.shape)
        for part, n in self._parts():
            tot = tot + n * np.minimum(part.add_rdp(al), cap)
        return tot * (1.0 + _ULP * (len(self.groups()) + 2))

    def rdp(self, alpha) -> np.ndarray:
        """Worse of the two directions; k = t returns the k-fold Gaussian alpha k mu^2 / 2 exactly, and
        every order is capped by it (the un-amplified bound)."""
        al = V.alphas(alpha)
        k = self.steps_per_record
        if self.num_steps == k:  # every step uses the record: the k-fold Gaussian (exact)
            return gaussian_rdp_upper(al, self.sensitivity, self.sigma, k)
        if k == 1:
            return BallsInBinsGaussian(sigma=self.sigma, num_steps=self.num_steps,
                                       sensitivity=self.sensitivity).rdp(al)
        cap = gaussian_rdp_upper(al, self.sensitivity, self.sigma, k)
        return np.minimum(np.maximum(self.remove_rdp(al), self.add_rdp(al)), cap)

    @property
    def gdp_mu(self) -> float | None:
        """k = t: the pair is exactly the Gaussian pair with mu sqrt(k); None otherwise."""
        if self.num_steps == self.steps_per_record:
            return self.mu * math.sqrt(self.steps_per_record)
        return None

    def attained_lower_pair(self):
        """A certified lower-bound pair: the sum of the epoch's t releases for the attaining datasets
        (others with zero gradient) is N(k C, t sigma^2) with the record and N(0, t sigma^2) without, the
        Gaussian pair with mu' = k mu / sqrt(t) (a post-processing of the outputs).  k = 1 uses the
        largest release (:class:`BallsInBinsGaussian`), which is stronger there."""
        from .gaussian import Gaussian

        k, t = self.steps_per_record, self.num_steps
        if k == 1:
            return BallsInBinsGaussian(sigma=self.sigma, num_steps=t,
                                       sensitivity=self.sensitivity).attained_lower_pair()
        # sigma' = sigma sqrt(t) / k for sensitivity C; rounded up (a larger sigma' is a weaker pair)
        return Gaussian(sigma=self.sigma * math.sqrt(t) / k * (1.0 + 4 * 2.0**-53),
                        sensitivity=self.sensitivity)
