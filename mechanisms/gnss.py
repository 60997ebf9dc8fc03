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
v_l = l v2 + (1-l) v1 (finite iff v_l > 0).

The supremum over c is evaluated as a proven upper bound, rounding included, by the interval bounds
and branch and bound of :mod:`mechanisms._gnss_kernels` (the derivation is its module docstring).

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

from . import validation as V
from ._gnss_kernels import _GOLDEN_ITERS, _GRID, _MAX_EVALS, _gnss_certified_kernel
from .base import Mechanism
from .gaussian import gaussian_rdp_upper
from .registry import register


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
    """Worst-case RDP of core GNSS at orders ``alpha``, certified (no l*beta < 1/2 restriction).

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
        A proven upper bound of the sup over all (f, beta-smooth S) and neighbours of D_alpha (both
        orders of the pair), rounding included (:mod:`mechanisms._gnss_kernels`): a branch and
        bound whose intervals' bounds come from each term's monotonicity and from the quasi-convexity of
        each direction on each side of c = 0.  It exceeds the exact supremum (attained by the class) by
        the rounding allowance only, about 32 ulps of the terms (measured <= 2e-13 relative).
        ``+inf`` for alpha >= 1/(1 - e^{-2 beta}) where the divergence is infinite (and where the
        rounding cannot exclude it, within a few ulps of that order), for beta >= 20 (infinite for every
        order) and for alpha >= 2^900.
    """
    beta, sigma = _check_beta_sigma(beta, sigma)
    a = V.alphas(alpha)
    flat = np.ascontiguousarray(a.ravel(), dtype=float)
    out = np.full(flat.shape, np.inf)
    fin = np.isfinite(flat)
    if fin.any():
        out[fin] = _gnss_certified_kernel(flat[fin], beta, sigma, _GRID, _GOLDEN_ITERS, _MAX_EVALS, True)
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
    ``rdp`` is a certified upper bound of the exact worst case over the class (module docstring), within
    ~32 ulps, for alpha * beta < 1/2 and ``+inf`` beyond.  Not pure DP.
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
