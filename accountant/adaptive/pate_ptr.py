"""PATE with generalized PTR: data-dependent RDP of GNMax, its smooth sensitivity, and Alg 4.

Sources: Papernot, Song, Mironov, Raghunathan, Talwar & Erlingsson, "Scalable private learning with
PATE" (ICLR 2018): Thm 6 + Prop 7 + Prop 10 (data-dependent RDP), Algs 3-5 / Prop 13 (smooth
sensitivity); Redberg, Zhu & Wang 2023, "Generalized PTR": Alg 4, Lemma 5.5, Thm 5.6 / D.10, D.11, read with
the fixes of docs/derivations/generalized-ptr.md §6 (eps_2 = mu_2 / sigma_1^2, beta = 0.2/alpha, smooth
sensitivity of RDP_sigma1 itself, the profile extended to distance K, conditions C5/C6 enforced).

Neighbouring relation: one teacher changes its votes ("vote change": in every query histogram one
unit of mass moves between two classes; the vote vector has L2 sensitivity sqrt(2)).  A record-level
add/remove or replace changes at most one teacher, so the certificates hold for both record relations.

Data-dependent RDP of one GNMax answer argmax_j(n_j + N(0, sigma^2)) (Thm 6, *outgoing* direction
D_alpha(M(X) || M(X')) for every neighbour X' of X -- enough for generalized PTR,
docs/derivations/generalized-ptr.md):

    q~ = min( sum_{j != i*} Phibar((n_{i*} - n_j) / (sqrt(2) sigma)),  1 - 1/C )         (Prop 7)
    mu_2 = sigma sqrt(log(1/q~)),  mu_1 = mu_2 + 1,  eps_1 = mu_1/sigma^2,  eps_2 = mu_2/sigma^2
    valid iff mu_1 >= alpha, mu_2 > 1, -log q~ > eps_2 and
              log q~ <= (mu_2 - 1) eps_2 - mu_2 (log(mu_1/(mu_1-1)) + log(mu_2/(mu_2-1)))
    A = (1 - q~)/(1 - (q~ e^{eps_2})^{(mu_2-1)/mu_2}),  B = e^{eps_1}/q~^{1/(mu_1-1)}
    RDP <= min(alpha/sigma^2, log((1-q~) A^{alpha-1} + q~ B^{alpha-1})/(alpha-1)) if valid,
    RDP <= alpha/sigma^2 otherwise.

All in log space.  The function released by PTR is the *piecewise* bound of Papernot et al.'s smooth
sensitivity analysis, ``rdp_pw(q) = alpha/sigma^2 if log q >= log q0 else RDP_dd(q)``, where q0 is the
crossing point; under condition C5 it equals the checked bound above.  Its local sensitivity is bounded
by Alg 3 (bl(q) / bu(q): smallest / largest q~ one vote change can reach), and the maximum over the
distance-d ball by walking the histogram towards q0 (Algs 4-5).  That profile is a valid upper bound only
when conditions C5 (RDP_dd non-decreasing on (0, q0)) and C6 (RDP(bu(q)) - RDP_dd(q) non-decreasing on
(0, bl(q0))) hold; :func:`check_conditions` verifies them numerically on a dense log-q grid covering
every q~ reachable with K teachers, and :func:`smooth_sensitivity` refuses otherwise
(docs/derivations/generalized-ptr.md §6: they fail e.g. for (K, sigma, alpha) = (30, 3, 8)).

Alg 4 (PATE-PTR, :func:`pate_ptr`) releases the labels iff
eps' >= eps_sigma1 = U + log(1/delta_mech)/(alpha-1), where U is the (beta, sigma_s, sigma_2)-GNSS upper
bound of RDP_sigma1(alpha, X) = sum_i rdp_pw(q~_i).
Certificate (tight Thm 4.3): (eps' + eps_hat, delta_hat + max(delta_mech, delta_2)) with eps_hat the
test's certified epsilon from its exact GNSS RDP curve (:class:`mechanisms.gnss.GNSSUpperBound`);
with the Alg-4 split delta_hat = delta_mech = delta_2 = delta/2 this is (eps' + eps_hat, delta)
(Thm 5.6), and on the Alg-4 parameter manifold eps_hat <= the nominal test budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import log_ndtr, ndtri_exp

from mechanisms import validation as V
from mechanisms.gnss import GNSSRelease, GNSSUpperBound
from mechanisms.ptr import GeneralizedPTR

from .ptr import BOTTOM, releases_cost

_LOG_CONDITION_GRID = 3000


# ---------------------------------------------------------------------------- votes and q~
def validate_votes(votes, num_teachers: int | None = None) -> tuple[np.ndarray, int]:
    """Vote histograms as an int64 (T, C) array and the number of teachers K.

    Every count must be a non-negative integer, C >= 2, and every row sum <= K (K defaults to the
    largest row sum).  Raises ``ValueError``/``TypeError`` naming the problem.
    """
    arr = np.asarray(votes)
    numeric = np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    if arr.dtype == bool or not numeric:
        raise TypeError(f"votes must be an array of non-negative integers, got dtype {arr.dtype}")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] < 2 or arr.shape[0] < 1:
        raise ValueError(f"votes must be a (queries, classes) array with >= 2 classes, got shape {arr.shape}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.round(arr)):
            raise ValueError("votes must be non-negative integers (got non-integer or non-finite counts)")
    if np.any(arr < 0):
        raise ValueError("votes must be non-negative integers (got a negative count)")
    out = arr.astype(np.int64)
    sums = out.sum(axis=1)
    k = int(sums.max()) if num_teachers is None else V.integer("num_teachers", num_teachers, low=1)
    if k < 1:
        raise ValueError("votes must contain at least one vote")
    if np.any(sums > k):
        raise ValueError(f"a vote histogram sums to {int(sums.max())} > num_teachers = {k}")
    return out, k


def log_q_tilde(votes, sigma: float) -> np.ndarray:
    """log q~ per query (Prop 7 union bound, capped at log(1 - 1/C)); ties broken to the first index.

    Upper bound on log P[noisy argmax != argmax].  Exact log-space evaluation (``log_ndtr``).
    """
    sigma = V.positive("sigma", sigma)
    v, _ = validate_votes(votes)
    return _log_q_tilde(v.astype(float), sigma)


def _log_q_tilde(v: np.ndarray, sigma: float) -> np.ndarray:
    c = v.shape[1]
    top = v.max(axis=1, keepdims=True)
    gaps = top - v
    idx = np.argmax(v, axis=1)
    terms = log_ndtr(-gaps / (math.sqrt(2.0) * sigma))
    terms[np.arange(v.shape[0]), idx] = -np.inf
    m = terms.max(axis=1, keepdims=True)
    lq = np.log(np.exp(terms - m).sum(axis=1)) + m[:, 0]
    return np.minimum(lq, math.log1p(-1.0 / c))


def _log1mexp(x: np.ndarray) -> np.ndarray:
    """log(1 - e^x) for x <= 0 (``-inf`` at 0)."""
    x = np.asarray(x, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(x < -0.6931471805599453, np.log1p(-np.exp(x)), np.log(-np.expm1(x)))


# ---------------------------------------------------------------------------- Thm 6
def _rdp_dd_formula(logq: np.ndarray, sigma: float, alpha: float) -> np.ndarray:
    """Thm 6 expression without validity checks (log space); requires logq < 0 and mu_2 > 1."""
    logq = np.asarray(logq, dtype=float)
    s2 = sigma * sigma
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mu2 = sigma * np.sqrt(-logq)
        mu1 = mu2 + 1.0
        eps1 = mu1 / s2
        eps2 = mu2 / s2
        log1q = _log1mexp(logq)
        log_a = (alpha - 1.0) * (log1q - _log1mexp((logq + eps2) * (1.0 - 1.0 / mu2)))
        log_b = (alpha - 1.0) * (eps1 - logq / (mu1 - 1.0))
        out = np.logaddexp(log1q + log_a, logq + log_b) / (alpha - 1.0)
    return np.where(np.isneginf(logq), 0.0, out)


def _dd_valid(logq: np.ndarray, sigma: float, alpha: float) -> np.ndarray:
    logq = np.asarray(logq, dtype=float)
    s2 = sigma * sigma
    with np.errstate(divide="ignore", invalid="ignore"):
        mu2 = sigma * np.sqrt(-logq)
        mu1 = mu2 + 1.0
        eps2 = mu2 / s2
        cond3 = logq <= (mu2 - 1.0) * eps2 - mu2 * (np.log(mu1 / (mu1 - 1.0)) + np.log(mu2 / (mu2 - 1.0)))
        ok = (mu1 >= alpha) & (mu2 > 1.0) & cond3 & (-logq > eps2)
    return ok & np.isfinite(logq)


def rdp_gnmax_data_independent(sigma: float, alpha) -> np.ndarray:
    """alpha / sigma^2: data-independent RDP of one GNMax answer (vote L2 sensitivity sqrt(2)). Exact."""
    sigma = V.positive("sigma", sigma)
    return V.alphas(alpha) / sigma**2


def rdp_gnmax_data_dependent(log_q, sigma: float, alpha: float) -> np.ndarray:
    """Thm 6 data-dependent RDP bound per query, with its validity checks (upper bound, outgoing direction).

    Parameters
    ----------
    log_q : array_like
        log q~ per query (:func:`log_q_tilde`); ``-inf`` means a deterministic answer (RDP 0).
    sigma : float
        GNMax noise standard deviation, > 0.
    alpha : float
        One Renyi order > 1.

    Returns
    -------
    ndarray
        min(alpha/sigma^2, Thm-6 value) where the conditions hold, alpha/sigma^2 elsewhere, 0 at q~ = 0.
    """
    sigma = V.positive("sigma", sigma)
    alpha = float(V.alphas([alpha])[0])
    lq = np.asarray(log_q, dtype=float)
    if np.any(lq > 0) or np.any(np.isnan(lq)):
        raise ValueError("log_q must be <= 0")
    ind = alpha / sigma**2
    ok = _dd_valid(lq, sigma, alpha)
    dd = np.where(ok, _rdp_dd_formula(np.where(ok, lq, -1.0), sigma, alpha), ind)
    out = np.where(ok, np.minimum(dd, ind), ind)
    return np.where(np.isneginf(lq), 0.0, out)


# ---------------------------------------------------------------------------- smooth sensitivity
def log_q0(sigma: float, alpha: float) -> float:
    """log q0: below it the data-dependent bound beats alpha/sigma^2 (as in the public analysis code of
    Papernot et al. 2018, ``compute_logq0_gnmax``).

    Root of RDP_dd(log q) = alpha/sigma^2 bracketed below the natural upper bound
    min(-(1 + 1/sigma)^2, -((alpha - 0.99)/sigma)^2, -1/sigma^2); the validity conditions are checked
    at the returned point.
    """
    sigma = V.positive("sigma", sigma)
    alpha = float(V.alphas([alpha])[0])
    ind = alpha / sigma**2

    def diff(lq: float) -> float:
        return float(_rdp_dd_formula(np.array([lq]), sigma, alpha)[0]) - ind

    ub = min(-(1.0 + 1.0 / sigma) ** 2, -((alpha - 0.99) / sigma) ** 2, -1.0 / sigma**2)
    if not bool(_dd_valid(np.array([ub]), sigma, alpha)[0]):
        raise ValueError(f"Thm 6 validity conditions fail at the natural bound for sigma={sigma}, "
                         f"alpha={alpha}")
    if diff(ub) < 0:
        return ub
    lb = 2.0 * ub
    while diff(lb) > 0:
        if lb < -1e6:
            raise ValueError("could not bracket log q0 (sigma too small for this order?)")
        lb *= 1.5
    from scipy.optimize import brentq  # (imported on use: slow to import)

    root = brentq(diff, lb, ub, xtol=1e-13, rtol=1e-14)
    # the data-dependent branch is used strictly below log q0: move the switch point down a hair so the
    # piecewise function never exceeds alpha/sigma^2 by round-off
    root = root - 1e-12 * abs(root)
    if not bool(_dd_valid(np.array([root]), sigma, alpha)[0]):
        raise ValueError("Thm 6 validity conditions fail at log q0")
    return float(root)


def _log_bl(logq: np.ndarray, sigma: float, c: int) -> np.ndarray:
    """log of the smallest q~ reachable by one vote change: (C-1) Phi(Phi^{-1}(q/(C-1)) - sqrt(2)/sigma)."""
    w = ndtri_exp(np.minimum(logq - math.log(c - 1), 0.0))
    return math.log(c - 1) + log_ndtr(w - math.sqrt(2.0) / sigma)


def _log_bu(logq: np.ndarray, sigma: float, c: int) -> np.ndarray:
    """log of the largest q~ reachable by one vote change, capped at 0."""
    w = ndtri_exp(np.minimum(logq - math.log(c - 1), 0.0))
    return np.minimum(0.0, math.log(c - 1) + log_ndtr(w + math.sqrt(2.0) / sigma))


def _rdp_pw(logq: np.ndarray, sigma: float, alpha: float, lq0: float) -> np.ndarray:
    logq = np.asarray(logq, dtype=float)
    ind = alpha / sigma**2
    below = logq < lq0
    dd = _rdp_dd_formula(np.where(below, logq, lq0 - 1.0), sigma, alpha)
    return np.where(below, dd, ind)


def rdp_gnmax_piecewise(log_q, sigma: float, alpha: float) -> np.ndarray:
    """The released data-dependent RDP per query: alpha/sigma^2 if log q~ >= log q0 else Thm 6 (no min).

    Equals :func:`rdp_gnmax_data_dependent` when condition C5 holds (checked by :func:`check_conditions`),
    hence a valid upper bound; it is the function whose smooth sensitivity is computed.
    """
    sigma = V.positive("sigma", sigma)
    alpha = float(V.alphas([alpha])[0])
    return _rdp_pw(np.asarray(log_q, dtype=float), sigma, alpha, log_q0(sigma, alpha))


def _local_sensitivity(logq: np.ndarray, sigma: float, alpha: float, c: int, lq0: float,
                       lq1: float) -> np.ndarray:
    """Alg 3 (Prop 13): upper bound on the local sensitivity of rdp_pw at log q~ (vectorised)."""
    logq = np.asarray(logq, dtype=float)
    lq = np.where((logq >= lq1) & (logq <= lq0), lq1, logq)
    b = _rdp_pw(lq, sigma, alpha, lq0)
    up = _rdp_pw(_log_bu(lq, sigma, c), sigma, alpha, lq0)
    lo = _rdp_pw(_log_bl(lq, sigma, c), sigma, alpha, lq0)
    return np.maximum(up - b, b - lo)


def check_conditions(sigma: float, num_classes: int, alpha: float, num_teachers: int) -> tuple[bool, bool]:
    """Numerical check of Papernot et al.'s conditions C5 and C6 for (sigma, C, alpha).

    C5: RDP_dd(q) non-decreasing on (q_min, q0) and Thm 6's validity conditions hold there (the released
    piecewise function uses the formula below q0); C6: RDP_pw(bu(q)) - RDP_dd(q) non-decreasing on
    (q_min, bl(q0)), where q_min is below every q~ reachable with ``num_teachers`` votes (and below bl
    of it).  Checked on a dense grid in log(-log q) with a relative tolerance of 1e-9; this mirrors the
    reference implementation's numerical check (it is not a proof).
    """
    sigma = V.positive("sigma", sigma)
    c = V.integer("num_classes", num_classes, low=2)
    k = V.integer("num_teachers", num_teachers, low=1)
    alpha = float(V.alphas([alpha])[0])
    lq0 = log_q0(sigma, alpha)
    unan = np.zeros((1, c))
    unan[0, 0] = k
    lq_min = float(_log_q_tilde(unan, sigma)[0])
    lq_min = min(lq_min, float(_log_bl(np.array([lq_min]), sigma, c)[0])) - 1.0
    lq_min = min(lq_min, 2.0 * lq0)
    grid = -np.geomspace(-lq_min, -lq0, _LOG_CONDITION_GRID)  # increasing log q, from lq_min to lq0
    f5 = _rdp_dd_formula(grid, sigma, alpha)
    tol = 1e-9 * max(1.0, float(np.nanmax(np.abs(f5))))
    # C5, plus Thm 6's validity conditions everywhere below q0 (rdp_pw uses the formula unchecked there)
    c5 = bool(np.all(np.isfinite(f5))) and bool(np.all(np.diff(f5) >= -tol))
    c5 = c5 and bool(np.all(_dd_valid(grid[:-1], sigma, alpha)))
    if not c5:
        return False, False
    lbl = float(_log_bl(np.array([lq0]), sigma, c)[0])
    g = grid[grid < lbl]
    if g.size < 2:
        g = -np.geomspace(-lq_min, -lbl, _LOG_CONDITION_GRID)
    f6 = _rdp_pw(_log_bu(g, sigma, c), sigma, alpha, lq0) - _rdp_dd_formula(g, sigma, alpha)
    c6 = bool(np.all(np.isfinite(f6))) and bool(np.all(np.diff(f6) >= -tol))
    return c5, c6


def local_sensitivity_profile(votes, sigma: float, alpha: float,
                              num_teachers: int | None = None) -> np.ndarray:
    """Per-query upper bounds on max LS of rdp_pw over histograms within d vote changes, d = 0..K.

    Returns an array of shape (T, K + 1).  Valid only under C5/C6 (not checked here; see
    :func:`smooth_sensitivity`).  Vectorised over queries (Algs 4-5 of Papernot et al., extended to
    d = K; entries beyond the walk are the global maximum ``LS(log q1)``).
    """
    sigma = V.positive("sigma", sigma)
    alpha = float(V.alphas([alpha])[0])
    v, k = validate_votes(votes, num_teachers)
    t, c = v.shape
    lq0 = log_q0(sigma, alpha)
    lq1 = float(_log_bl(np.array([lq0]), sigma, c)[0])
    plateau = float(_local_sensitivity(np.array([lq1]), sigma, alpha, c, lq0, lq1)[0])
    res = np.full((t, k + 1), plateau)
    vs = -np.sort(-v.astype(float), axis=1)
    lq = _log_q_tilde(vs, sigma)
    inside = (lq >= lq1) & (lq <= lq0)
    left = lq > lq0
    res[:, 0] = np.where(inside, plateau, _local_sensitivity(lq, sigma, alpha, c, lq0, lq1))
    active = np.where(left, (lq > lq0) & (vs[:, 1] > 0), (~inside) & (lq < lq1))
    for d in range(1, k + 1):
        if not active.any():
            break
        a_left = active & left
        a_right = active & ~left
        vs[a_left, 0] += 1.0
        vs[a_left, 1] -= 1.0
        vs[a_right, 0] -= 1.0
        vs[a_right, 1] += 1.0
        vs[active] = -np.sort(-vs[active], axis=1)
        lq_new = _log_q_tilde(vs[active], sigma)
        lq[active] = lq_new
        res[active, d] = _local_sensitivity(lq_new, sigma, alpha, c, lq0, lq1)
        active = np.where(left, active & (lq > lq0) & (vs[:, 1] > 0), active & (lq < lq1))
    return res


def smooth_sensitivity(votes, sigma: float, alpha: float, beta: float,
                       num_teachers: int | None = None) -> float:
    """beta-smooth sensitivity of RDP_sigma(alpha, X) = sum_i rdp_pw(q~_i) (upper bound, > 0).

    SS = max_{d = 0..K} e^{-beta d} sum_i LS_i[d] where LS_i[d] is the profile of
    :func:`local_sensitivity_profile` (the local sensitivity of a sum is at most the sum of the local
    sensitivities; all histograms are within K vote changes).  Raises ``ValueError`` if C5/C6 fail.
    """
    beta = V.positive("beta", beta)
    v, k = validate_votes(votes, num_teachers)
    c5, c6 = check_conditions(sigma, v.shape[1], alpha, k)
    if not (c5 and c6):
        raise ValueError(f"conditions C5/C6 fail for sigma={sigma}, C={v.shape[1]}, alpha={alpha} "
                         f"(C5={c5}, C6={c6}): the smooth-sensitivity profile would not be an upper bound; "
                         "use the data-independent bound")
    prof = local_sensitivity_profile(v, sigma, alpha, k).sum(axis=0)
    ss = float(np.max(np.exp(-beta * np.arange(k + 1)) * prof))
    if not (ss > 0 and math.isfinite(ss)):
        raise ValueError(f"smooth sensitivity must be finite and > 0, got {ss!r}")
    return ss


# ---------------------------------------------------------------------------- Alg 4
@dataclass(frozen=True)
class PATEPTRParameters:
    """Alg 4 parameters (Redberg, Zhu & Wang 2023, with the fixes of docs/derivations/generalized-ptr.md §6).

    alpha = 2 log(2/delta)/eps_hat + 1, sigma_s = sigma_2 = sqrt((3 alpha + 2)/eps_hat),
    delta_2 = delta/2, beta = 0.2/alpha (not 0.2/eps_hat), so log(2/delta)/(alpha-1) = eps_hat/2.
    """

    alpha: float
    sigma_s: float
    sigma_2: float
    beta: float
    delta_2: float

    def __post_init__(self):
        object.__setattr__(self, "alpha", float(V.alphas([self.alpha])[0]))
        if not math.isfinite(self.alpha):
            raise ValueError("alpha must be finite")
        object.__setattr__(self, "sigma_s", V.positive("sigma_s", self.sigma_s))
        object.__setattr__(self, "sigma_2", V.positive("sigma_2", self.sigma_2))
        object.__setattr__(self, "beta", V.positive("beta", self.beta))
        object.__setattr__(self, "delta_2", V.real("delta_2", self.delta_2, low=0.0, high=1.0, low_open=True,
                                                   high_open=True))
        if self.alpha * self.beta >= 0.5:
            raise ValueError(f"alpha * beta = {self.alpha * self.beta:.4g} must be < 1/2 (Lemma 5.5 range; "
                             "the GNSS release has no RDP bound there)")

    @classmethod
    def from_budget(cls, test_epsilon: float, delta: float) -> PATEPTRParameters:
        e = V.positive("test_epsilon", test_epsilon)
        d = V.delta(delta)
        alpha = 2.0 * math.log(2.0 / d) / e + 1.0
        s = math.sqrt((3.0 * alpha + 2.0) / e)
        return cls(alpha=alpha, sigma_s=s, sigma_2=s, beta=0.2 / alpha, delta_2=d / 2.0)

    @property
    def gnss(self) -> GNSSUpperBound:
        return GNSSUpperBound(beta=self.beta, sigma_s=self.sigma_s, sigma_2=self.sigma_2,
                              delta_2=self.delta_2)


def rdp_to_dp_single(rdp: float, alpha: float, delta: float, rule: str = "classic") -> float:
    """eps from RDP at one order: classic ``rdp + log(1/delta)/(alpha-1)`` (Lemma D.7) or the improved
    rule ``rdp + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha-1)`` (Balle et al. 2020).

    Valid pairwise, so it also converts a data-dependent RDP value into a data-dependent DP value.
    """
    a = float(V.alphas([alpha])[0])
    d = V.delta(delta)
    if rule == "classic":
        return rdp + math.log(1.0 / d) / (a - 1.0)
    if rule == "improved":
        return rdp + math.log1p(-1.0 / a) - (math.log(d) + math.log(a)) / (a - 1.0)
    raise ValueError(f"rule must be 'classic' or 'improved', got {rule!r}")


@dataclass(frozen=True)
class PATEPTRResult:
    """Outcome of Alg 4.

    Attributes
    ----------
    labels : ndarray or BOTTOM
        Noisy GNMax labels (one per query) if the test passed.
    passed : bool
    mechanism : GeneralizedPTR
        Certificate (public; identical whether or not the test passed): compose into the ledger.
    epsilon_sigma1 : float
        The released upper bound of the labels' DP epsilon (public).
    release : GNSSRelease
        The public GNSS outputs (mu, U).
    parameters : PATEPTRParameters
    fallback : bool
        True if C5/C6 failed and the data-independent bound was used instead (no data-dependent test).
    details : dict
        Public diagnostics (test RDP at alpha, eps_hat, nominal test budget).
    """

    labels: Any
    passed: bool
    mechanism: GeneralizedPTR
    epsilon_sigma1: float
    release: GNSSRelease | None
    parameters: PATEPTRParameters
    fallback: bool = False
    details: dict = field(default_factory=dict)


def gnmax_data_independent_epsilon(num_queries: int, sigma: float, delta: float) -> float:
    """T/sigma^2 + 2 sqrt(T log(1/delta))/sigma: the classic RDP conversion of T alpha/sigma^2 at the optimal
    alpha = 1 + sigma sqrt(log(1/delta)/T) (upper bound; the "Gaussian mechanism" curve of the paper's Fig.
    2)."""
    t = V.integer("num_queries", num_queries, low=1)
    s = V.positive("sigma", sigma)
    return t / s**2 + 2.0 * math.sqrt(t * math.log(1.0 / V.delta(delta))) / s


def gnmax_labels(votes: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """argmax_j(n_j + N(0, sigma^2)) per query."""
    v = np.asarray(votes, dtype=float)
    return np.argmax(v + rng.normal(0.0, sigma, v.shape), axis=1)


def pate_ptr(votes, *, sigma_1: float, test_epsilon: float, budget_epsilon: float, delta: float,
             rng: np.random.Generator, num_teachers: int | None = None,
             parameters: PATEPTRParameters | None = None, conversion: str = "classic") -> PATEPTRResult:
    """PATE with generalized PTR (Redberg, Zhu & Wang 2023, Alg 4, Thm 5.6;
    docs/derivations/generalized-ptr.md §6).

    Parameters
    ----------
    votes : array_like, shape (T, C)
        Teachers' vote histograms (private), non-negative integers.
    sigma_1 : float
        GNMax noise standard deviation, > 0.
    test_epsilon : float
        Nominal test budget eps_hat (sets the Alg-4 parameters unless ``parameters`` is given).
    budget_epsilon : float
        eps': the labels are released iff the private upper bound eps_sigma1 <= eps'.
    delta : float
        Total delta, split delta_hat = delta_mech = delta_2 = delta/2.
    rng : numpy.random.Generator
        Independent streams are spawned for the labels and for the test.
    conversion : {"classic", "improved"}
        RDP -> DP rule for the labels' data-dependent bound at the single order alpha.

    Returns
    -------
    PATEPTRResult
        Certificate ``GeneralizedPTR(eps', delta/2, eps_hat, delta/2, delta/2)`` = (eps' + eps_hat, delta),
        eps_hat certified from the exact GNSS RDP curve (<= ``test_epsilon``).
    """
    s1 = V.positive("sigma_1", sigma_1)
    eps_b = V.positive("budget_epsilon", budget_epsilon)
    d = V.delta(delta)
    v, k = validate_votes(votes, num_teachers)
    params = parameters if parameters is not None else PATEPTRParameters.from_budget(test_epsilon, d)
    half = d / 2.0
    gen_test, gen_labels = rng.spawn(2)
    c5, c6 = check_conditions(s1, v.shape[1], params.alpha, k)
    if not (c5 and c6):
        # data-independent fallback (C5/C6 fail): a public decision, no data-dependent test
        eps_ind = gnmax_data_independent_epsilon(v.shape[0], s1, d)
        passed = eps_ind <= eps_b
        labels = gnmax_labels(v, s1, gen_labels) if passed else BOTTOM
        mech = GeneralizedPTR(epsilon=eps_b, delta=d)
        return PATEPTRResult(labels=labels, passed=passed, mechanism=mech, epsilon_sigma1=eps_ind,
                             release=None, parameters=params, fallback=True,
                             details={"C5": c5, "C6": c6})
    gnss = params.gnss
    test_rdp = float(gnss.rdp([params.alpha])[0])
    eps_hat = releases_cost([gnss], half)
    mech = GeneralizedPTR(epsilon=eps_b, delta=half, test_epsilon=eps_hat, test_delta=half,
                          false_positive=params.delta_2)
    # private part
    labels_all = gnmax_labels(v, s1, gen_labels)
    lq = _log_q_tilde(v.astype(float), s1)
    r = float(np.sum(rdp_gnmax_piecewise(lq, s1, params.alpha)))
    ss = smooth_sensitivity(v, s1, params.alpha, params.beta, k)
    rel = gnss.release(r, ss, gen_test)
    eps_s1 = rdp_to_dp_single(rel.upper, params.alpha, half, conversion)
    passed = eps_b >= eps_s1
    return PATEPTRResult(labels=labels_all if passed else BOTTOM, passed=bool(passed), mechanism=mech,
                         epsilon_sigma1=float(eps_s1), release=rel, parameters=params,
                         details={"test_rdp_at_alpha": test_rdp, "test_epsilon_certified": eps_hat,
                                  "test_epsilon_nominal": float(test_epsilon)})
