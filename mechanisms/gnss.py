"""GNSS: Gaussian noise scaled by a smooth sensitivity, and the (beta, sigma_s, sigma_2)-GNSS upper bound.

Core GNSS (Papernot, Song, Mironov, Raghunathan, Talwar & Erlingsson 2018, Thm 23;
docs/derivations/generalized-ptr.md §6). Given a real function f, a beta-smooth upper bound S of its local
sensitivity (S(X) >= LS_f(X) and S(X) <= e^beta S(X') for neighbours) and a noise multiplier sigma, the
mechanism releases

    f(X) + S(X) * N(0, sigma^2).

Its RDP is computed here by the **exact worst case** over the whole class of such (f, S) (our derivation,
docs/derivations/generalized-ptr.md §6): normalising S(X) = 1, a neighbour has S(X') = e^c with c in [-beta,
beta] and
|f(X) - f(X')| <= min(S(X), S(X')) = m_c = min(1, e^c), so

    eps(lambda) = max_{c in [-beta, beta]} max( D_lambda(N(0, sigma^2) || N(m_c, e^{2c} sigma^2)),
                                                D_lambda(N(m_c, e^{2c} sigma^2) || N(0, sigma^2)) ),

with the closed form of the Renyi divergence between two univariate Gaussians
D_l(N(m1, v1) || N(m2, v2)) = log(v2/v1)/2 + log(v2/v_l)/(2(l-1)) + l (m1-m2)^2 / (2 v_l),
v_l = l v2 + (1-l) v1 (finite iff v_l > 0).  The maximum over c is found on a grid that contains
c = 0 (where m_c has a kink) and refined by golden-section search around every grid local maximum, in
a numba kernel.  The value is an upper bound for every (f, S) and is attained by the class (exact up to
the optimisation tolerance, which is made safe by a relative margin of 1e-9).

The printed closed form of Thm 23,
``eps_T23(l) = l e^{2 beta}/sigma^2 + (beta l - log(1 - 2 l beta)/2)/(l - 1)`` for 1 < l < 1/(2 beta),
**under-reports** the exact worst case when l * beta is close to 1/2 (sigma=15, beta=0.01,
l=45: exact 0.9147 vs 0.2404), so it is only exposed as a comparison (:func:`gnss_rdp_thm23`).
The mechanism therefore reports no bound (``+inf``) for orders with l * beta >= 1/2.

(beta, sigma_s, sigma_2)-GNSS (Redberg, Zhu & Wang 2023, Lemma 5.5 / D.9;
docs/derivations/generalized-ptr.md §6) releases a private high-probability *upper bound* of a
data-dependent quantity f(X) (e.g. a data-dependent RDP) from its beta-smooth sensitivity SS(X) > 0:

    mu = log SS(X) + beta sigma_2 Z_1 + sqrt(2 log(2/delta_2)) sigma_2 beta
    U  = f(X) + SS(X) sigma_s Z_2 + sigma_s sqrt(2 log(2/delta_2)) e^mu.

Privacy: mu is a Gaussian mechanism on log SS (global sensitivity beta, noise beta sigma_2), RDP
lambda/(2 sigma_2^2); f + SS sigma_s Z_2 is core GNSS; U is post-processing.  Total RDP
``eps_GNSS(lambda; beta, sigma_s) + lambda / (2 sigma_2^2)``.  Lemma 5.5's closed form
``(3 lambda + 2)/(2 sigma_s^2)`` (with sigma_2 = sigma_s) rests on a shortcut that Thm 23 does not imply
(docs/derivations/generalized-ptr.md §6); it is exposed only as a cross-check
(:meth:`GNSSUpperBound.lemma55_rdp`). Coverage: P[U >= f(X)] >= 1 - delta_2 (Gaussian tail e^{-t^2/2} twice
at delta_2/2).

Neighbouring relation: whatever relation f, S are defined under (the relation enters only through
S >= LS and the beta-smoothness of S).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from . import validation as V
from .base import Mechanism
from .gaussian import gaussian_rdp_upper
from .registry import register

_GRID = 401  # odd: c = 0 is a grid node
_GOLDEN_ITERS = 80
_SAFETY_REL = 1e-9


@njit(cache=True)
def _gauss_renyi(lam, dm2, v1, v2):  # pragma: no cover - compiled
    """D_lam(N(m1, v1) || N(m2, v2)) with (m1 - m2)^2 = dm2; +inf where the integral diverges."""
    vl = lam * v2 + (1.0 - lam) * v1
    if vl <= 0.0:
        return np.inf
    return 0.5 * math.log(v2 / v1) + math.log(v2 / vl) / (2.0 * (lam - 1.0)) + lam * dm2 / (2.0 * vl)


@njit(cache=True)
def _worst_pair(c, lam, inv_s2):  # pragma: no cover - compiled
    """max of both directions at smooth-bound log-ratio c (sigma normalised to 1)."""
    mc = math.exp(c) if c < 0.0 else 1.0
    dm2 = mc * mc * inv_s2
    u = math.exp(2.0 * c)
    a = _gauss_renyi(lam, dm2, 1.0, u)
    b = _gauss_renyi(lam, dm2, u, 1.0)
    return a if a > b else b


@njit(cache=True)
def _golden_max(lo, hi, lam, inv_s2, iters):  # pragma: no cover - compiled
    g = 0.6180339887498949
    a, b = lo, hi
    x1 = b - g * (b - a)
    x2 = a + g * (b - a)
    f1 = _worst_pair(x1, lam, inv_s2)
    f2 = _worst_pair(x2, lam, inv_s2)
    best = f1 if f1 > f2 else f2
    for _ in range(iters):
        if f1 < f2:
            a = x1
            x1 = x2
            f1 = f2
            x2 = a + g * (b - a)
            f2 = _worst_pair(x2, lam, inv_s2)
            if f2 > best:
                best = f2
        else:
            b = x2
            x2 = x1
            f2 = f1
            x1 = b - g * (b - a)
            f1 = _worst_pair(x1, lam, inv_s2)
            if f1 > best:
                best = f1
    return best


@njit(cache=True)
def _gnss_exact_kernel(lams, beta, sigma, ngrid, iters):  # pragma: no cover - compiled
    out = np.empty(lams.shape[0])
    inv_s2 = 1.0 / (sigma * sigma)
    half = (ngrid - 1) // 2
    cs = np.empty(ngrid)
    for k in range(ngrid):
        cs[k] = beta * (k - half) / half
    vals = np.empty(ngrid)
    for i in range(lams.shape[0]):
        lam = lams[i]
        best = -np.inf
        for k in range(ngrid):
            vals[k] = _worst_pair(cs[k], lam, inv_s2)
            if vals[k] > best:
                best = vals[k]
        if not np.isfinite(best):
            out[i] = np.inf
            continue
        for k in range(ngrid):
            left = vals[k - 1] if k > 0 else -np.inf
            right = vals[k + 1] if k < ngrid - 1 else -np.inf
            if vals[k] >= left and vals[k] >= right:
                if k > 0:
                    v = _golden_max(cs[k - 1], cs[k], lam, inv_s2, iters)
                    if v > best:
                        best = v
                if k < ngrid - 1:
                    v = _golden_max(cs[k], cs[k + 1], lam, inv_s2, iters)
                    if v > best:
                        best = v
        out[i] = best
    return out


def _beta_reason(beta: float) -> str | None:
    """The failing condition when beta >= 1/2 (no Renyi order > 1 with alpha * beta < 1/2)."""
    if beta < 0.5:
        return None
    return (f"GNSS RDP is bounded only for orders 1 < alpha < 1/(2 beta) = {1 / (2 * beta):.4g} "
            f"(alpha * beta < 1/2, Papernot et al. 2018 Thm 23), and beta = {beta:g} >= 1/2 "
            "leaves no such order: use beta < 1/2")


def _check_beta_sigma(beta, sigma, sigma_name: str = "sigma") -> tuple[float, float]:
    return V.positive("beta", beta), V.positive(sigma_name, sigma)


def gnss_rdp_exact(alpha, beta: float, sigma: float) -> np.ndarray:
    """Exact worst-case RDP of core GNSS at orders ``alpha`` (no l*beta < 1/2 restriction).

    Parameters
    ----------
    alpha : array_like
        Renyi orders > 1.
    beta : float
        Smoothness of the sensitivity bound, > 0.
    sigma : float
        Noise multiplier (the noise is S(X) * N(0, sigma^2)), > 0.

    Returns
    -------
    ndarray
        sup over all (f, beta-smooth S) and neighbours of D_alpha (both orders of the pair); ``+inf``
        for alpha >= 1/(1 - e^{-2 beta}) where the divergence is infinite.  Exact up to a relative
        safety margin of 1e-9 added to the numerical maximum.
    """
    beta, sigma = _check_beta_sigma(beta, sigma)
    a = V.alphas(alpha)
    flat = np.ascontiguousarray(a.ravel(), dtype=float)
    out = np.full(flat.shape, np.inf)
    fin = np.isfinite(flat)
    if fin.any():
        vals = _gnss_exact_kernel(flat[fin], beta, sigma, _GRID, _GOLDEN_ITERS)
        out[fin] = vals * (1.0 + _SAFETY_REL)
    return out.reshape(a.shape)


def gnss_rdp_thm23(alpha, beta: float, sigma: float) -> np.ndarray:
    """Papernot et al. (2018) Thm 23 as printed (``+inf`` outside 1 < alpha < 1/(2 beta)).

    NOT a valid bound near alpha*beta -> 1/2 (docs/derivations/generalized-ptr.md §6); exposed for
    comparison only.
    """
    beta, sigma = _check_beta_sigma(beta, sigma)
    a = V.alphas(alpha)
    out = np.full(a.shape, np.inf)
    ok = np.isfinite(a) & (2.0 * a * beta < 1.0)
    x = a[ok]
    out[ok] = x * math.exp(2 * beta) / sigma**2 + (beta * x - 0.5 * np.log1p(-2.0 * x * beta)) / (x - 1.0)
    return out


@register
@dataclass(frozen=True)
class GNSS(Mechanism):
    """Core GNSS f(X) + S(X) N(0, sigma^2) with a ``beta``-smooth sensitivity bound S.

    Parameters
    ----------
    sigma : float
        Noise multiplier, > 0.
    beta : float
        Smoothness parameter of S, > 0 (S(X) <= e^beta S(X') for neighbours).

    Notes
    -----
    ``rdp`` is the exact worst case over the class (module docstring) for alpha * beta < 1/2 and
    ``+inf`` beyond.  Not pure DP.
    """

    sigma: float
    beta: float

    name = "gnss"
    tight = False
    field_checks = {"sigma": V.positive, "beta": V.positive}

    def rdp(self, alpha) -> np.ndarray:
        a = V.alphas(alpha)
        out = np.full(a.shape, np.inf)
        ok = np.isfinite(a) & (a * self.beta < 0.5)
        if ok.any():
            out[ok] = gnss_rdp_exact(a[ok], self.beta, self.sigma)
        return out

    def thm23_rdp(self, alpha) -> np.ndarray:
        """Papernot et al. Thm 23 as printed (comparison only; see module docstring)."""
        return gnss_rdp_thm23(alpha, self.beta, self.sigma)

    def unbounded_reason(self) -> str | None:
        return _beta_reason(self.beta)


@dataclass(frozen=True)
class GNSSRelease:
    """Public output of a (beta, sigma_s, sigma_2)-GNSS release.

    Attributes
    ----------
    mu : float
        Private upper bound of log SS(X) (fails with probability <= delta_2 / 2).
    upper : float
        Private upper bound U of f(X) (P[U >= f(X)] >= 1 - delta_2).
    """

    mu: float
    upper: float


def gnss_tail(delta_2: float) -> float:
    """sqrt(2 log(2/delta_2)): the one-sided Gaussian tail multiplier used by Lemma 5.5 (Chernoff)."""
    return math.sqrt(2.0 * math.log(2.0 / delta_2))


@register
@dataclass(frozen=True)
class GNSSUpperBound(Mechanism):
    """The (beta, sigma_s, sigma_2)-GNSS release of a private upper bound (Lemma 5.5, corrected RDP).

    Parameters
    ----------
    beta : float
        Smoothness of the sensitivity bound, > 0.
    sigma_s : float
        Noise multiplier of the value release, > 0.
    sigma_2 : float
        Noise multiplier of the log-smooth-sensitivity release, > 0.
    delta_2 : float
        Coverage failure probability in (0, 1): P[U < f(X)] <= delta_2.  It is *not* a privacy
        parameter of this release (``infinite_loss_mass`` is 0); it becomes the false-positive rate
        delta' of a PTR test built on U.

    Notes
    -----
    ``rdp(l) = eps_GNSS_exact(l; beta, sigma_s) + l / (2 sigma_2^2)`` (upper bound; +inf for
    l * beta >= 1/2).
    """

    beta: float
    sigma_s: float
    sigma_2: float
    delta_2: float

    name = "gnss_upper_bound"
    tight = False
    field_checks = {"beta": V.positive, "sigma_s": V.positive, "sigma_2": V.positive, "delta_2": V.open_unit}

    def rdp(self, alpha) -> np.ndarray:
        """Upper bound: the core's curve plus alpha / (2 sigma_2^2) rounded up
        (:func:`mechanisms.gaussian.gaussian_rdp_upper`), their sum moved one step up (it rounds by at
        most half an ulp)."""
        a = V.alphas(alpha)
        core = GNSS(sigma=self.sigma_s, beta=self.beta).rdp(a)
        v = core + gaussian_rdp_upper(a, 1.0, self.sigma_2)
        return np.where(np.isfinite(v) & (v > 0.0), np.nextafter(v, np.inf), v)

    def unbounded_reason(self) -> str | None:
        return _beta_reason(self.beta)

    def lemma55_rdp(self, alpha) -> np.ndarray:
        """Lemma 5.5's printed value (3 l + 2)/(2 sigma_s^2) (cross-check only, needs sigma_2 = sigma_s)."""
        a = V.alphas(alpha)
        out = (3.0 * a + 2.0) / (2.0 * self.sigma_s**2)
        return np.where(a * self.beta < 0.5, out, np.inf)

    @property
    def failure_prob(self) -> float:
        """delta_2: probability that the released U is below f(X)."""
        return self.delta_2

    def release(self, value: float, smooth_sensitivity, rng: np.random.Generator, size=None):
        """Release (mu, U) for the private value f(X) with beta-smooth sensitivity SS(X) > 0.

        ``value`` and ``smooth_sensitivity`` are private; the returned :class:`GNSSRelease` is public.
        With ``size`` given, returns arrays of ``size`` independent releases (for simulation).
        """
        ss = np.asarray(smooth_sensitivity, dtype=float)
        if not np.all(np.isfinite(ss)) or np.any(ss <= 0):
            raise ValueError(f"smooth_sensitivity must be finite and > 0, got {smooth_sensitivity!r}")
        val = np.asarray(value, dtype=float)
        if not np.all(np.isfinite(val)):
            raise ValueError(f"value must be finite, got {value!r}")
        t = gnss_tail(self.delta_2)
        z1 = rng.standard_normal(size)
        z2 = rng.standard_normal(size)
        mu = np.log(ss) + self.beta * self.sigma_2 * z1 + t * self.sigma_2 * self.beta
        upper = val + ss * self.sigma_s * z2 + self.sigma_s * t * np.exp(mu)
        if size is None:
            return GNSSRelease(mu=float(mu), upper=float(upper))
        return GNSSRelease(mu=mu, upper=upper)
