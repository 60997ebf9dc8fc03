"""Noisy screening, its Poisson-subsampled form and the Private-kNN composite (Zhu, Yu & Wang 2020,
"Private-kNN"; = Zhu 2023 thesis, ch. 4).

Noisy screening M_s (Zhu, Yu & Wang 2020; thesis Sec. 4.3) releases one bit:
``pass = 1[t + Z > T]`` with Z ~ N(0, sigma^2), where t is an integer statistic of the data (the
largest vote count of a k-nearest-neighbour histogram) that changes by at most 1 between
neighbouring datasets and lies in [t_min, t_max].  Write pi(t) = Phi((t - T) / sigma).

* Data-independent RDP (thesis Thm 4.3.1, its garbled brackets reconstructed in
  docs/derivations/noisy-screening.md §1; upper bound):
      eps_s(alpha) = max_{(p, q) in S} D_alpha(Bern(p) || Bern(q)),
      S = {(pi(t), pi(t')) : t, t' integers in [t_min, t_max], |t - t'| = 1}  (both orders).
  The thesis' set {(pi(t), pi(t +- 1)) : t_min <= t <= t_max} also contains the two pairs
  (t_min, t_min - 1) and (t_max, t_max + 1), whose partner lies outside the statistic's range and
  can never occur; dropping them is valid and never increases the bound.  The values differ only at
  large orders (identical to 11 digits for alpha <= 128 at the CIFAR-10
  configuration, 0.07 % lower at alpha = 256, 0.4 % lower at alpha = inf), and the Poisson-subsampled
  form below then equals this curve at gamma = 1.  Valid for alpha in (1, inf];
  O(t_max - t_min) per order (numba kernel with rigorous pruning, ``_screening_kernels``).
* **Range of t** (docs/derivations/noisy-screening.md §1).  The thesis uses t_min = ceil(k / c), which holds
  only if the dataset the kNN votes are computed on has at least k records.  Under Poisson subsampling this
  fails and the thesis bound is violated (brute-force counterexample in the tests).  The default
  here is t_min = 0, valid for every dataset; :meth:`NoisyScreening.thesis_range` gives the thesis
  setting for unsubsampled use on datasets of >= k records.
* Poisson-subsampled screening, exact form (our derivation, docs/derivations/noisy-screening.md §2;
  re-checked in the tests by brute-force enumeration of all subsets of tiny kNN datasets): with q = pi(t),
  p = pi(t'), p' = (1 - gamma) q + gamma p,
      eps_sub(alpha) = max_{t, t' in [t_min, t_max], |t - t'| = 1} max{D_alpha(Bern(p') || Bern(q)),
                                                                      D_alpha(Bern(q) || Bern(p'))}.
  Valid (upper bound, add/remove neighbours) for every real alpha > 1 by joint quasi-convexity of
  the Renyi divergence (van Erven & Harremoës 2014).  The "tight" binomial form (Zhu & Wang 2019,
  thesis Thm 2.3.4; its condition (2.2) is unproven for the screening bit) and the general bound
  (thesis Thm 2.3.1) are available from
  :func:`subsampled_screening_rdp` for comparison only.
* Neighbouring relation: the kNN max-vote statistic changes by at most 1 under add/remove and under
  replace-one (one record enters or leaves the k nearest neighbours), so :class:`NoisyScreening` supports
  both; the subsampled forms are for add/remove with Poisson sampling only.

The data-dependent curve (docs/derivations/noisy-screening.md §3) is a function of the realised statistic t
and is **not** a DP statement by itself (it must be released through PTR/smooth sensitivity): see
:meth:`NoisyScreening.rdp_data_dependent` and :func:`max_votes`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from . import validation as V
from ._numerics import log_ndtr_bounds
from ._profile import hockey_bounds_array
from ._screening_kernels import log_ndtr_array, max_binary_kl, mixture_pairs
from ._screening_max_kernels import max_binary_rdp, max_binary_rdp_prep, max_binary_rdp_scan
from .base import Mechanism, apply_checks, check, check_direction, field_ref
from .gnmax import poisson_subsampled_rdp
from .lattice import AtomicMechanism
from .registry import register
from .screening_envelope import PLD_RANGE_SIGMAS, _envelope_atoms

__all__ = [
    "NoisyScreening", "SubsampledNoisyScreening",
    "screening_rdp", "screening_rdp_data_dependent", "subsampled_screening_rdp", "max_votes",
]

SUBSAMPLE_METHODS = ("exact", "tight", "general")
U = 2.0 ** -53


# --------------------------------------------------------------------------- pair construction
def _log_pass_probs(sigma: float, threshold: float, lo: int,
                    hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """log pi(t), log(1 - pi(t)) for t = lo..hi (log Phi(z), log Phi(-z) computed separately) and bounds
    on their errors: z = (t - T) / sigma rounds twice (4 ulps of |z| allowed), log Phi is accurate to
    ``LOG_NDTR_ULPS`` ulps of 1 + |value| (:func:`mechanisms._numerics.log_ndtr_bounds`)."""
    t = np.arange(lo, hi + 1, dtype=float)
    z = (t - threshold) / sigma
    ze = 4.0 * U * np.abs(z)
    return (log_ndtr_array(z), log_ndtr_array(-z), log_ndtr_bounds(z, ze)[1], log_ndtr_bounds(-z, ze)[1])


def _push_atom(la: np.ndarray, lb: np.ndarray, ea: np.ndarray, er: np.ndarray):
    """One atom (log a, log b) of a Bernoulli pair moved outwards so that the kernels' term
    a [expm1mx(beta r) + beta expm1mx(-r)] (r = log(a / b); module doc of ``_screening_kernels``) bounds
    the exact atom's from above at every order, given bounds ``ea`` on the error of log a and ``er`` on
    that of r.  log a goes up by ``ea`` plus 8 ulps of 1 + |log a| + |r| + |log |r|| (the kernels' rounding
    in log space is relative to these magnitudes); |r| goes up by d = ``er`` + 8 ulps of |r| (rounding
    proportional to beta |r|) + 2 ulps of 1 + |log a| + |log b| (the kernel forms r = log a - log b anew):
    the term is increasing in |r| on either side of 0, and where |r| <= d (sign unknown) r = 3 d covers
    both sides (the term is ~ beta (1 + beta) r^2 / 2 there).  a = 0 (its term is beta b): b up;
    b = 0 < a (infinite divergence): unchanged."""
    with np.errstate(invalid="ignore", divide="ignore"):
        r = la - lb
        ar = np.abs(r)
        big = np.minimum(np.abs(np.log(ar)), 750.0)
        la_new = la + ea + 8.0 * U * (1.0 + np.abs(la) + ar + big)
        d = er + 8.0 * U * ar + 2.0 * U * (1.0 + np.abs(la) + np.abs(lb))
        r_new = np.where(ar > d, r + np.sign(r) * d, 3.0 * d)
        lb_new = la_new - r_new
    zero_a, zero_b = la == -np.inf, lb == -np.inf
    la_new = np.where(zero_a | zero_b, la, la_new)
    lb_new = np.where(zero_a, lb + er + 8.0 * U * (1.0 + np.abs(lb)), np.where(zero_b, lb, lb_new))
    return la_new, lb_new


def _pushed(lp, lpb, lq, lqb, ep, epb, erp, erpb) -> tuple[np.ndarray, ...]:
    """The kernel's inputs (logs of p, 1 - p, q, 1 - q) with both atoms moved outwards (:func:`_push_atom`;
    ``ep``, ``epb`` bound the errors of log p, log(1 - p), ``erp``, ``erpb`` those of the two log-ratios):
    every order's divergence of these inputs bounds the exact pair's from above."""
    lp2, lq2 = _push_atom(lp, lq, ep, erp)
    lpb2, lqb2 = _push_atom(lpb, lqb, epb, erpb)
    return lp2, lpb2, lq2, lqb2


def _screening_pairs(sigma: float, threshold: float, t_min: int, t_max: int):
    """Ordered pairs (p, q) = (pi(t), pi(t')) for all feasible t, t' in [t_min, t_max], |t - t'| = 1.

    Returned as arrays of logs (p, 1-p, q, 1-q), moved outwards by their rounding (:func:`_pushed`).
    Both orders of every adjacent pair are included.
    """
    lp, lpb, ep, epb = _log_pass_probs(sigma, threshold, t_min, t_max)
    n = t_max - t_min  # number of adjacent pairs
    lo = np.arange(n)
    ip = np.concatenate([lo, lo + 1])
    iq = np.concatenate([lo + 1, lo])
    return _pushed(lp[ip], lpb[ip], lp[iq], lpb[iq], ep[ip], epb[ip], ep[ip] + ep[iq], epb[ip] + epb[iq])


def _mixture_ratio_error(r: np.ndarray, rm: np.ndarray, e_r: np.ndarray, gamma: float) -> np.ndarray:
    """Error bound of rm = log((1 - gamma) + gamma e^r) (``log_mix_ratio``) for r off by ``e_r``: its slope
    gamma e^{r - rm} <= 1 times ``e_r``, plus its rounding (log1p(gamma expm1(r)) for r <= 1: 4 ulps of
    |rm|; else a log-sum-exp: 4 ulps of the summands' size)."""
    lg = math.log(gamma)
    l1g = abs(math.log1p(-gamma)) if gamma < 1.0 else 0.0
    with np.errstate(invalid="ignore", over="ignore"):
        slope = np.where(np.isneginf(r), 0.0, np.minimum(1.0, np.exp(lg + r - rm) * 1.01))
        rnd = np.where(r <= 1.0, 4.0 * U * np.abs(rm), 4.0 * U * (np.abs(rm) + abs(lg) + l1g + np.abs(r)))
    return slope * e_r + rnd + 1e-300


def _subsampled_pairs(sigma: float, threshold: float, t_min: int, t_max: int, gamma: float):
    """Ordered pairs of the exact subsampled form restricted to feasible t, t': (p', q) and (q, p').

    q = pi(t), p = pi(t'), p' = (1 - gamma) q + gamma p for t, t' in [t_min, t_max], |t - t'| = 1.  log p'
    = log q + rm, rm = log((1 - gamma) + gamma e^r) a function of r = log(p / q) only, so the log-ratio of
    the atom (p', q) carries rm's error (:func:`_mixture_ratio_error`) and log p' that plus log q's; the
    pairs are moved outwards by these bounds (:func:`_pushed`).
    """
    lp_all, lpb_all, ep_all, epb_all = _log_pass_probs(sigma, threshold, t_min, t_max)
    n = t_max - t_min
    lo = np.arange(n)
    iq = np.concatenate([lo, lo + 1])
    ip = np.concatenate([lo + 1, lo])
    lq, lqb, eq, eqb = lp_all[iq], lpb_all[iq], ep_all[iq], epb_all[iq]
    lp, lpb, ep, epb = lp_all[ip], lpb_all[ip], ep_all[ip], epb_all[ip]
    lmix, lmixb = mixture_pairs(lp, lpb, lq, lqb, gamma)
    with np.errstate(invalid="ignore"):
        er = _mixture_ratio_error(lp - lq, lmix - lq, ep + eq, gamma)
        erb = _mixture_ratio_error(lpb - lqb, lmixb - lqb, epb + eqb, gamma)
    # both directions: D(p' || q) and D(q || p')
    return _pushed(np.concatenate([lmix, lq]), np.concatenate([lmixb, lqb]),
                   np.concatenate([lq, lmix]), np.concatenate([lqb, lmixb]),
                   np.concatenate([eq + er, eq]), np.concatenate([eqb + erb, eqb]),
                   np.concatenate([er, er]), np.concatenate([erb, erb]))


def _round_up(alpha: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """The kernel's maximum over (moved) pairs rounded up by its evaluation's rounding beyond the inputs'
    magnitudes (covered by :func:`_push_atom`): expm1mx, the sums, log1p and the division (relative 64 u),
    the terms log(beta) (ulps of |log beta|); the max-divergence (alpha = inf) is one subtraction."""
    beta = alpha - 1.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(np.isinf(beta), 2.0 * U, 16.0 * U * (4.0 + np.abs(np.log(beta))))
    v = vals * (1.0 + rel)
    return np.where(v > 0.0, np.nextafter(v, np.inf), v)


def _curve(alpha, pairs) -> np.ndarray:
    a = V.alphas(alpha)
    if pairs[0].size == 0:  # constant statistic: the output law does not depend on the data
        return np.zeros(a.shape)
    flat = np.ascontiguousarray(a.ravel(), dtype=float)
    out = _round_up(flat, max_binary_rdp(flat, *[np.ascontiguousarray(x) for x in pairs]))
    return out.reshape(a.shape)


# Repeated queries on the same mechanism (an eps(delta) query evaluates the curve 5-10 times) reuse the
# pairs, the kernel's O(#pairs) preparation and every order already evaluated: key -> (pairs, prep,
# {alpha: value}).  A few mechanisms are kept (the values are exact functions of the key).
_CURVE_CACHE: dict = {}
_CURVE_CACHE_SIZE = 8
_ORDER_CACHE_SIZE = 1 << 16


def _cached_curve(alpha, key: tuple, make_pairs) -> np.ndarray:
    """:func:`_curve` with the pairs built by ``make_pairs()``, memoised under ``key``."""
    a = V.alphas(alpha)
    entry = _CURVE_CACHE.get(key)
    if entry is None:
        pairs = tuple(np.ascontiguousarray(x) for x in make_pairs())
        prep = max_binary_rdp_prep(*pairs) if pairs[0].size else None
        entry = (pairs, prep, {})
        if len(_CURVE_CACHE) >= _CURVE_CACHE_SIZE:
            _CURVE_CACHE.pop(next(iter(_CURVE_CACHE)))
        _CURVE_CACHE[key] = entry
    pairs, prep, seen = entry
    if prep is None:
        return np.zeros(a.shape)
    flat = np.ascontiguousarray(a.ravel(), dtype=float)
    missing = np.unique(np.array([x for x in flat.tolist() if x not in seen], dtype=float))
    if missing.size:
        vals = _round_up(missing, max_binary_rdp_scan(missing, *pairs, *prep))
        if len(seen) + missing.size > _ORDER_CACHE_SIZE:
            seen.clear()
        seen.update(zip(missing.tolist(), vals.tolist(), strict=True))
    return np.array([seen[x] for x in flat.tolist()], dtype=float).reshape(a.shape)


#: the screening parameters, checked in this order: sigma > 0, threshold finite, k >= 1, 0 <= t_min <= k
_SCREENING_CHECKS = {"sigma": V.positive, "threshold": V.real, "k": check(V.integer, low=1),
                     "t_min": check(V.integer, low=0, high=field_ref("k"))}


def _check_screening(sigma, threshold, k, t_min):
    p = SimpleNamespace(sigma=sigma, threshold=threshold, k=k, t_min=t_min)
    apply_checks(p, _SCREENING_CHECKS)
    return p.sigma, p.threshold, p.k, p.t_min


# --------------------------------------------------------------------------- plain functions
def screening_rdp(alpha, sigma: float, threshold: float, k: int, t_min: int = 0) -> np.ndarray:
    """Data-independent RDP of noisy screening (Zhu 2023 thesis, Thm 4.3.1;
    docs/derivations/noisy-screening.md §1); upper bound.

    Parameters
    ----------
    alpha : array_like
        Renyi orders, real > 1 (``inf`` gives the pure-DP epsilon).
    sigma : float
        Screening noise standard deviation sigma_1 > 0 (vote units).
    threshold : float
        Screening threshold T (finite, vote units).
    k : int
        Largest value of the statistic (number of neighbours), >= 1.
    t_min : int, default 0
        Smallest value of the statistic; 0 is valid for every dataset (docs/derivations/noisy-screening.md
        §1).

    Returns
    -------
    ndarray
        max over S of D_alpha(Bern(p) || Bern(q)), same shape as ``alpha``.
    """
    sigma, threshold, k, t_min = _check_screening(sigma, threshold, k, t_min)
    return _curve(alpha, _screening_pairs(sigma, threshold, t_min, k))


def screening_rdp_data_dependent(alpha, t, sigma: float, threshold: float, t_min: int | None = None,
                                 t_max: int | None = None) -> np.ndarray:
    """Data-dependent screening RDP at the realised statistic ``t`` (thesis Def. 4.2.1;
    docs/derivations/noisy-screening.md §3).

    eps_s(alpha; t) = max over t' in {t - 1, t + 1} (restricted to [t_min, t_max] when given) and both
    orders of D_alpha between Bern(pi(t)) and Bern(pi(t')).  This is a function of private data: it is
    **not** a DP guarantee unless the statistic is released privately (PTR / smooth sensitivity,
    docs/derivations/generalized-ptr.md).

    Returns an array of shape ``np.shape(t) + np.shape(alpha)``.
    """
    sigma = V.positive("sigma", sigma)
    threshold = V.real("threshold", threshold)
    a = V.alphas(alpha)
    tt = np.asarray(t)
    if tt.dtype.kind not in "iu":
        if tt.dtype.kind != "f" or not np.all(np.isfinite(tt)) or not np.all(tt == np.round(tt)):
            raise TypeError("t (the realised vote maximum) must be integer-valued")
    tt = tt.astype(np.int64)
    lo = -np.inf if t_min is None else V.integer("t_min", t_min, low=0)
    hi = np.inf if t_max is None else V.integer("t_max", t_max, low=0)
    if tt.size and (tt.min() < max(lo, 0) or tt.max() > hi):
        raise ValueError(f"t must lie in the statistic's range [{max(lo, 0)}, {hi}]")
    flat_t = tt.ravel()
    flat_a = np.ascontiguousarray(a.ravel(), dtype=float)
    out = np.zeros((flat_t.size, flat_a.size))
    for i, ti in enumerate(flat_t):
        ti = int(ti)
        lp, lpb, ep, epb = _log_pass_probs(sigma, threshold, ti - 1, ti + 1)
        partners = [j for j, u in ((0, ti - 1), (2, ti + 1)) if lo <= u <= hi]
        if not partners:
            continue
        ip = np.array([1] * len(partners) + partners)
        iq = np.array(partners + [1] * len(partners))
        pairs = _pushed(lp[ip], lpb[ip], lp[iq], lpb[iq], ep[ip], epb[ip], ep[ip] + ep[iq], epb[ip] + epb[iq])
        out[i] = _round_up(flat_a, max_binary_rdp(flat_a, *pairs))
    return out.reshape(tt.shape + a.shape)


def subsampled_screening_rdp(alpha, sigma: float, threshold: float, k: int, sample_rate: float,
                             t_min: int = 0, method: str = "exact") -> np.ndarray:
    """RDP of Poisson-subsampled noisy screening (add/remove neighbours).

    Parameters
    ----------
    alpha : array_like
        Renyi orders > 1.
    sigma, threshold, k, t_min
        As in :func:`screening_rdp`.
    sample_rate : float
        Poisson sampling probability gamma in [0, 1].
    method : {"exact", "tight", "general"}
        ``"exact"`` (default): docs/derivations/noisy-screening.md §2, a proven upper bound for every real
        alpha > 1.
        ``"tight"``: the tight binomial form (Zhu & Wang 2019; thesis Thm 2.3.4) applied to the
        screening curve at integer orders with CGF interpolation (docs/derivations/subsampling.md);
        **not proven** for the screening bit and provided only to reproduce the thesis' Fig. 4.5.
        ``"general"``: thesis Thm 2.3.1, valid but very loose here.

    Returns
    -------
    ndarray of the same shape as ``alpha``.
    """
    sigma, threshold, k, t_min = _check_screening(sigma, threshold, k, t_min)
    gamma = V.probability("sample_rate", sample_rate)
    if method not in SUBSAMPLE_METHODS:
        raise ValueError(f"method must be one of {SUBSAMPLE_METHODS}, got {method!r}")
    a = V.alphas(alpha)
    if gamma == 0.0:
        return np.zeros(a.shape)
    if method == "exact":
        return _curve(a, _subsampled_pairs(sigma, threshold, t_min, k, gamma))
    base = _screening_pairs(sigma, threshold, t_min, k)
    return poisson_subsampled_rdp(a, lambda x: _curve(x, base), gamma, method)


def max_votes(votes) -> np.ndarray:
    """The screening statistic t = max_i n_i for vote histograms (last axis = classes).

    Data-dependent quantity (docs/derivations/noisy-screening.md §3): never publish it or a function of it
    without a private release.
    """
    v = np.asarray(votes)
    if v.ndim == 0 or v.shape[-1] == 0:
        raise ValueError("votes must have a non-empty last axis (one count per class)")
    if v.dtype.kind not in "iu":
        if not np.all(np.isfinite(v)) or not np.all(v == np.round(v)):
            raise ValueError("vote counts must be integers")
    if (v < 0).any():
        raise ValueError("vote counts must be non-negative")
    return v.max(axis=-1).astype(np.int64)


# --------------------------------------------------------------------------- plug-ins
@register
@dataclass(frozen=True)
class NoisyScreening(AtomicMechanism):
    """Noisy screening 1[t + N(0, sigma^2) > threshold] of a max-vote statistic t in [t_min, k].

    Parameters
    ----------
    sigma : float
        Noise standard deviation sigma_1 > 0.
    threshold : float
        Threshold T (finite).
    k : int
        Number of neighbours = largest possible value of t, >= 1.
    t_min : int, default 0
        Smallest possible value of t.  0 is valid for every dataset; the thesis' ceil(k / c) is valid
        only for datasets of at least k records (see :meth:`thesis_range`,
        docs/derivations/noisy-screening.md §1).

    Notes
    -----
    ``rdp`` is the data-independent curve of thesis Thm 4.3.1 (Zhu, Yu & Wang 2020), an upper bound valid for
    add/remove and replace-one neighbours (|Delta t| <= 1 for the kNN max vote under both).  It is not
    attained by one neighbouring pair at every order, so ``tight = False``.

    Characteristic-function / PLD routes: the upper envelope
    H(eps) = max(0, max_t max(pi(t+1) - e^eps pi(t), (1 - pi(t)) - e^eps (1 - pi(t+1))))
    of the hockey-stick curves of all adjacent pairs is the hockey-stick curve of an atomic pair
    (docs/derivations/noisy-screening.md §5; Zhu, Dong & Wang 2022, "Optimal accounting of differential
    privacy via characteristic function", Def. 3.3.1 / Lemma 3.3.3 and Thm 3.3.4 of Zhu's 2023 thesis for
    dominating pairs and their adaptive composition): its ROC curve is the chordal interpolation of the
    Gaussian one, Phi^{-1}(w) = Phi^{-1}(u) + 1/sigma, through the 2 (k - t_min) points the pairs
    contribute (:func:`_envelope_atoms`).  It dominates every
    neighbouring pair, so its compositions bound adaptive compositions of screening (upper bounds:
    ``tight = False``; its Renyi divergences exceed the family's per-order supremum ``rdp``, hence
    ``rdp_below_pair``).  One use is exact: the single-use exact route (``exact_delta``) evaluates the
    envelope max_pairs (P(S) - e^eps Q(S)) directly, each of its lines attained by a neighbouring pair
    (``exact_profile_attained``).
    """

    sigma: float
    threshold: float
    k: int
    t_min: int = 0

    name = "noisy_screening"
    tight = False
    rdp_below_pair = True

    @property
    def pld_available(self) -> bool:  # type: ignore[override]
        """The envelope pair (cf / PLD routes) when the statistic's range stays within ``PLD_RANGE_SIGMAS``
        noise deviations of the threshold.  Beyond, the envelope's first atom (the merged far tail, P-mass
        ~e^-650) carries a loss of order (range / sigma)^2 / 2 that the numerical routes cannot resolve:
        RDP only (the single-use exact route still applies)."""
        return max(self.threshold - self.t_min, self.k + 1 - self.threshold) <= PLD_RANGE_SIGMAS * self.sigma

    field_checks = _SCREENING_CHECKS

    @classmethod
    def thesis_range(cls, sigma: float, threshold: float, k: int, num_classes: int) -> NoisyScreening:
        """The thesis' range t >= ceil(k / c): valid only without subsampling on >= k records."""
        c = V.integer("num_classes", num_classes, low=1)
        kk = V.integer("k", k, low=1)
        return cls(sigma=sigma, threshold=threshold, k=kk, t_min=-(-kk // c))

    def _pairs(self):
        return _screening_pairs(self.sigma, self.threshold, self.t_min, self.k)

    def rdp(self, alpha) -> np.ndarray:
        return _cached_curve(alpha, ("screen", self.sigma, self.threshold, self.t_min, self.k), self._pairs)

    @property
    def pure_epsilon(self) -> float:
        return float(self.rdp(np.array([math.inf]))[0])

    def kl(self) -> float:
        """The alpha -> 1 limit (max KL divergence over S), a lower end of the RDP curve."""
        return float(max_binary_kl(*self._pairs()))

    def rdp_data_dependent(self, alpha, t) -> np.ndarray:
        """Data-dependent RDP at realised statistic(s) ``t`` in [t_min, k] (not private by itself)."""
        return screening_rdp_data_dependent(alpha, t, self.sigma, self.threshold, self.t_min, self.k)

    def pass_probability(self, t) -> np.ndarray:
        """P[pass] = Phi((t - threshold) / sigma) (utility helper)."""
        from scipy.special import ndtr

        return ndtr((np.asarray(t, dtype=float) - self.threshold) / self.sigma)

    # ---------------------------------------------------------------- the atomic dominating pair
    def _atoms(self) -> tuple[np.ndarray, np.ndarray]:
        l, w, _ = _envelope_atoms(self.sigma, self.threshold, self.t_min, self.k)
        return l, w

    @property
    def log_mgf_error(self) -> float:
        """Relative error of the atoms' masses (normal interval probabilities in log space)."""
        return _envelope_atoms(self.sigma, self.threshold, self.t_min, self.k)[2]

    def mgf_cost(self, t_max: float) -> float:
        # one node costs one exp/cos/sin per atom (~3 closed-form node units each, as the discrete Gaussian)
        return max(1.0, 3.0 * self._atoms()[0].size)

    def pld_cell_masses(self, edges, direction: str = "remove"):
        m, err = super().pld_cell_masses(edges, direction)
        return m, err + m * math.expm1(self.log_mgf_error)

    @property
    def exact_profile(self) -> bool:
        return True

    @property
    def exact_profile_attained(self) -> bool:
        return True

    def exact_delta(self, epsilon: float, direction: str = "remove") -> tuple[float, float]:
        """Certified (lower, upper) of delta(eps) = max over adjacent pairs and sets S of
        P(S) - e^eps Q(S) for one use (both directions: the family is closed under swapping).

        The maximum over S of a pair of Bernoullis is attained at S = {pass} or {fail} (or none), i.e.
        at the points (u, w) = (Phi(z_t), Phi(z_{t+1})) and (Phi(-z_{t+1}), Phi(-z_t)), so
        delta = max(0, max_points (w - e^eps u)), each term in log space with the rounding of z."""
        from . import validation as V

        check_direction(direction)
        eps = V.epsilon(epsilon)
        if self.k == self.t_min:
            return 0.0, 0.0
        t = np.arange(self.t_min, self.k, dtype=float)
        za = (t - self.threshold) / self.sigma
        zb = (t + 1.0 - self.threshold) / self.sigma
        zu = np.concatenate([za, -zb])
        zw = np.concatenate([zb, -za])
        lu, eu = log_ndtr_bounds(zu, 4.0 * U * np.abs(zu))
        lw, ew = log_ndtr_bounds(zw, 4.0 * U * np.abs(zw))
        lo, hi = hockey_bounds_array(lw, ew, lu, eu, eps)
        return float(np.max(lo)), float(np.max(hi))


@register
@dataclass(frozen=True)
class SubsampledNoisyScreening(Mechanism):
    """Noisy screening on a Poisson subsample (rate ``sample_rate``), in the exact subsampled form.

    The form and its proof: docs/derivations/noisy-screening.md §2.

    Parameters as :class:`NoisyScreening`, plus ``sample_rate`` gamma in [0, 1].  The RDP is a proven
    upper bound for every real alpha > 1 under add/remove neighbours (Poisson sampling); the pure-DP
    end is the alpha = inf value of the same formula.  t_min defaults to 0, which is required here:
    a Poisson subsample can have fewer than k records (docs/derivations/noisy-screening.md §1).
    """

    sigma: float
    threshold: float
    k: int
    sample_rate: float
    t_min: int = 0

    name = "subsampled_noisy_screening"
    tight = False
    relations = ("add_remove",)
    field_checks = {**_SCREENING_CHECKS, "sample_rate": V.probability}

    def rdp(self, alpha) -> np.ndarray:
        if self.sample_rate == 0.0:
            return np.zeros(V.alphas(alpha).shape)
        key = ("subsampled", self.sigma, self.threshold, self.t_min, self.k, self.sample_rate)
        return _cached_curve(alpha, key, lambda: _subsampled_pairs(self.sigma, self.threshold, self.t_min,
                                                                   self.k, self.sample_rate))

    @property
    def pure_epsilon(self) -> float:
        return float(self.rdp(np.array([math.inf]))[0])
