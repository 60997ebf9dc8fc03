"""Certified lower bounds on delta(eps) and eps(delta) by post-processing (the max statistic).

Setting: a composition of Poisson-subsampled Gaussian steps (add/remove relation), entry i having noise
sigma_i, sensitivity Delta_i, sampling rate q_i and count k_i (a plain Gaussian is q_i = 1).  In the
normalised outputs y = x / Delta_i the dominating pair of one step is (Zhu, Dong & Wang 2022, Thm 3.3.5 of
the thesis)

    remove:  P_i = (1 - q_i) N(0, s_i^2) + q_i N(1, s_i^2),   Q_i = N(0, s_i^2),   s_i = sigma_i / Delta_i;
    add:     the swap (P_i and Q_i exchanged).

Data processing (any statistic g of the outputs): H_{e^eps}(g(P) || g(Q)) <= H_{e^eps}(P || Q) = delta(eps).
We use the maximum M = max_j y_j over all T = sum_i k_i outputs (docs/derivations/lower-bounds.md), whose
CDFs are exact products (T enters only as an exponent):

    remove:  F_Q(m) = prod_i Phi(m / s_i)^{k_i},
             F_P(m) = prod_i [(1 - q_i) Phi(m / s_i) + q_i Phi((m - 1) / s_i)]^{k_i};
    add:     the same two functions with the roles of P and Q exchanged.

For any union A of intervals, P_M(A) - e^eps Q_M(A) <= delta(eps).  A is chosen as the set where the
density ratio of M exceeds e^eps (located on a grid of 2048 points and refined by Brent's method; the
location only affects tightness, never validity), so the bound is the exact hockey-stick divergence of
the statistic up to floating point: at T = 1 (M = y_1) it equals the true delta(eps).  In the add
direction the positive set is a lower interval {M < m*} ("no output stands out"); the add direction
uses the same statistic M with the roles of the two products exchanged (not the minimum: under both
pairs the likelihood ratio of one step is monotone in y, and for small q the record's presence shows in
the largest output, not the smallest).

Floating point (the result is certified): per step, log G_i (G_i the step CDF) is evaluated as
log1p(-Gbar_i) where Gbar_i <= 1/2, else as logaddexp of scipy ``log_ndtr`` terms; its relative error
is below ``step_log_rel_err(z, q)`` = 8 u (z^2 + 64 + |log q|) (scipy's ndtr / log_ndtr lose ~z^2 ulps
to the rounding of their argument; checked against mpmath with a 4x margin in
tests/test_lower_bounds.py).  The sum log F = sum_i k_i log G_i of same-signed terms keeps that
relative error (plus (n + 3) ulps), underflow of Gbar_i is covered by an absolute 1e-300 per step, and
every exp / expm1 / product / difference is rounded outward by a few ulps: P-masses down, Q-masses up,
the result down.

Source: our derivation (docs/derivations/lower-bounds.md; data processing inequality); the max statistic's
exact CDFs are elementary.  Lower bounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy.special import log_ndtr, ndtr

__all__ = ["max_statistic_delta_lower", "sum_statistic_delta_lower", "delta_lower", "epsilon_lower",
           "step_log_rel_err", "SUM_AUTO_MAX_TERMS"]

_U = 2.0**-52  # unit roundoff bound used for outward rounding (2 u, generous)


def step_log_rel_err(z, q) -> np.ndarray:
    """Declared bound on the relative error of the computed log G_i (one step's CDF, see the module
    docstring): 8 u (z^2 + 64 + |log q|), z = the largest |standardised argument| of the step's normal
    CDFs.  scipy's ndtr / log_ndtr lose ~z^2 ulps to the rounding of their argument (measured <= 1000
    ulps at |z| = 39; tests/test_lower_bounds.py checks the whole log G_i against mpmath with a 4x
    margin); log q enters through logaddexp of log q + log_ndtr."""
    with np.errstate(divide="ignore"):
        lq = np.minimum(np.abs(np.log(q)), 750.0)
    return 8.0 * _U * (np.asarray(z) ** 2 + 64.0 + lq)

_GRID = 2048
_LOG_TINY = -745.0  # masses below e^-745 are not resolved by the grid (only tightness is affected)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


@dataclass(frozen=True)
class _Steps:
    """Homogeneous groups of steps: normalised noise s, sampling rate q, count k (numpy arrays)."""

    s: np.ndarray
    q: np.ndarray
    k: np.ndarray


def _steps_from_entries(entries) -> _Steps:
    """Accept a Ledger, an iterable of (mechanism, count) pairs, or of mechanisms (count 1)."""
    from mechanisms.gaussian import Gaussian
    from mechanisms.subsampled import SubsampledGaussian

    if hasattr(entries, "items") and callable(entries.items):
        entries = entries.items()
    if not isinstance(entries, Iterable):
        raise TypeError(f"entries must be a Ledger or an iterable of (mechanism, count), got "
                        f"{type(entries).__name__}")
    groups: dict[tuple[float, float], float] = {}  # identical (s, q) steps merged: k adds up
    for e in entries:
        mech, cnt = (e if isinstance(e, tuple) else (e, 1))
        if isinstance(cnt, bool) or not isinstance(cnt, (int, np.integer)) or cnt < 0:
            raise ValueError(f"entry count must be an integer >= 0, got {cnt!r}")
        if isinstance(mech, SubsampledGaussian):
            qi = float(mech.sample_rate)
        elif isinstance(mech, Gaussian):
            qi = 1.0
        else:
            raise ValueError("entries must all be SubsampledGaussian or Gaussian mechanisms for the "
                             f"max-statistic lower bound, got {type(mech).__name__}")
        if cnt == 0 or qi == 0.0:
            continue  # q = 0: P_i = Q_i, the step changes neither CDF's ratio structure (drop it)
        key = (float(mech.sigma) / float(mech.sensitivity), qi)
        groups[key] = groups.get(key, 0.0) + float(cnt)
    return _Steps(np.array([g[0] for g in groups]), np.array([g[1] for g in groups]),
                  np.array(list(groups.values())))


def _check_direction(direction: str) -> bool:
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")
    return direction == "add"


def _check_eps(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise TypeError(f"eps must be a real number, got {type(eps).__name__}")
    eps = float(eps)
    if not math.isfinite(eps):
        raise ValueError(f"eps must be finite, got {eps}")
    return eps


class _MaxStatistic:
    """CDFs, densities and certified interval masses of M = max_j y_j under both measures of a direction.

    Internally "mix" is the mixture product (remove-P) and "gau" the Gaussian product (remove-Q); for the
    add direction P = gau, Q = mix.
    """

    def __init__(self, steps: _Steps, add: bool):
        self.st = steps
        self.add = add
        self.n_total = float(steps.k.sum())
        s = steps.s
        # every mass above e^-745 lies in [-40 s_max, 1 + 40 s_max] (Phi(-40) ~ 1e-350; T <= 1e15)
        lo, hi = -40.0 * s.max(), 1.0 + 40.0 * s.max()
        coarse = np.linspace(lo, hi, 1025)
        lfm, lfg = self.log_cdf(coarse, False), self.log_cdf(coarse, True)
        lsm, lsg = self.log_sf(coarse, False), self.log_sf(coarse, True)
        alive = (np.maximum(lfm, lfg) > _LOG_TINY) & (np.maximum(lsm, lsg) > _LOG_TINY)
        idx = np.flatnonzero(alive)
        if idx.size == 0:  # degenerate (cannot happen for s > 0); use the whole range
            a, b = lo, hi
        else:
            a, b = coarse[max(idx[0] - 1, 0)], coarse[min(idx[-1] + 1, coarse.size - 1)]
        self.grid = np.linspace(a, b, _GRID)
        self.ld_grid = self.log_density_ratio(self.grid)

    # ---------------------------------------------------------------- per-step pieces
    def _log_step_cdf(self, m: np.ndarray, gaussian: bool, with_error: bool = False):
        """log G_i(m), shape (n_types, len(m)); gaussian=True: log Phi(m/s_i) (remove-Q).

        With ``with_error`` also a bound on its relative error, ``step_log_rel_err(z, q)``.
        """
        s, q = self.st.s[:, None], self.st.q[:, None]
        z0, z1 = m[None, :] / s, (m[None, :] - 1.0) / s
        with np.errstate(divide="ignore"):
            if gaussian:
                gbar = ndtr(-z0)
                low = log_ndtr(z0)
            else:
                gbar = (1.0 - q) * ndtr(-z0) + q * ndtr(-z1)
                low = np.logaddexp(np.log1p(-q) + log_ndtr(z0), np.log(q) + log_ndtr(z1))
        val = np.where(gbar <= 0.5, np.log1p(-np.minimum(gbar, 0.5)), low)
        if not with_error:
            return val
        zmax = np.maximum(np.abs(z0), np.abs(z1)) if not gaussian else np.abs(z0)
        return val, step_log_rel_err(zmax, q)

    def _log_step_sf(self, m: np.ndarray, gaussian: bool) -> np.ndarray:
        """log Gbar_i(m) (not certified; used for locating the range only)."""
        s, q = self.st.s[:, None], self.st.q[:, None]
        z0, z1 = m[None, :] / s, (m[None, :] - 1.0) / s
        with np.errstate(divide="ignore"):
            if gaussian:
                return log_ndtr(-z0)
            return np.logaddexp(np.log1p(-q) + log_ndtr(-z0), np.log(q) + log_ndtr(-z1))

    def _log_step_pdf(self, m: np.ndarray, gaussian: bool) -> np.ndarray:
        s, q = self.st.s[:, None], self.st.q[:, None]
        z0, z1 = m[None, :] / s, (m[None, :] - 1.0) / s
        with np.errstate(divide="ignore"):
            if gaussian:
                return -0.5 * z0 * z0 - _HALF_LOG_2PI - np.log(s)
            return np.logaddexp(np.log1p(-q) - 0.5 * z0 * z0, np.log(q) - 0.5 * z1 * z1) \
                - _HALF_LOG_2PI - np.log(s)

    # ---------------------------------------------------------------- the statistic
    def log_cdf(self, m: np.ndarray, gaussian: bool) -> np.ndarray:
        return self.st.k @ self._log_step_cdf(m, gaussian)

    def log_sf(self, m: np.ndarray, gaussian: bool) -> np.ndarray:
        """log(1 - F) for range finding: log(-expm1(log F)), or the union bound where F rounds to 1."""
        lf = self.log_cdf(m, gaussian)
        with np.errstate(divide="ignore"):
            direct = np.log(-np.expm1(np.minimum(lf, -1e-300)))
            ub = np.max(np.log(self.st.k)[:, None] + self._log_step_sf(m, gaussian), axis=0)
        return np.where(lf < -1e-290, direct, ub)

    def log_density(self, m: np.ndarray, gaussian: bool) -> np.ndarray:
        """log f_M(m) = log F(m) + log sum_i k_i g_i(m) / G_i(m)."""
        lc = self._log_step_cdf(m, gaussian)
        lp = self._log_step_pdf(m, gaussian)
        terms = np.log(self.st.k)[:, None] + lp - lc
        mx = terms.max(axis=0)
        return self.st.k @ lc + mx + np.log(np.exp(terms - mx).sum(axis=0))

    def log_density_ratio(self, m: np.ndarray) -> np.ndarray:
        """log dP_M/dQ_M(m) for the direction."""
        r = self.log_density(m, False) - self.log_density(m, True)
        return -r if self.add else r

    # ---------------------------------------------------------------- certified masses
    def _cdf_sf_bounds(self, m: np.ndarray, gaussian: bool) -> tuple[np.ndarray, ...]:
        """(F_lo, F_hi, S_lo, S_hi) at the points m (+-inf allowed), S = 1 - F, each rounded outward.

        log F = sum_i k_i log G_i has relative error <= max_i eta_i + (n + 3) u (same-signed terms); the
        true log F lies in [lf (1 + rel) - (T + 1) 1e-300, lf (1 - rel)] (1e-300 per step: underflow of
        Gbar_i in log1p(-Gbar_i)).
        """
        m = np.asarray(m, dtype=float)
        fin = np.isfinite(m)
        lo = np.where(m > 0, 0.0, -np.inf)
        hi = lo.copy()
        if fin.any():
            lc, eta = self._log_step_cdf(m[fin], gaussian, with_error=True)
            lf = self.st.k @ lc
            rel = eta.max(axis=0) + (self.st.k.size + 3) * _U
            lo[fin] = lf * (1.0 + rel) - (self.n_total + 1.0) * 1e-300
            hi[fin] = np.minimum(lf * (1.0 - rel), 0.0)
        with np.errstate(over="ignore"):
            f_lo = np.exp(lo) * (1.0 - 4 * _U)
            f_hi = np.minimum(1.0, np.exp(hi) * (1.0 + 4 * _U))
            s_lo = np.maximum(0.0, -np.expm1(hi) * (1.0 - 4 * _U))
            s_hi = np.minimum(1.0, -np.expm1(lo) * (1.0 + 4 * _U))
        return f_lo, f_hi, s_lo, s_hi

    def interval_bounds(self, a: np.ndarray, b: np.ndarray, gaussian: bool) -> tuple[np.ndarray, np.ndarray]:
        """Certified [lo, hi] for the masses of the intervals (a_j, b_j] (a_j < b_j, infinite ends allowed):
        the better of the CDF and the survival-function differences, rounded outward."""
        n = len(a)
        fl, fh, sl, sh = self._cdf_sf_bounds(np.concatenate([a, b]), gaussian)
        lo = np.maximum(fl[n:] - fh[:n], sl[:n] - sh[n:])
        lo = np.maximum(0.0, lo - np.abs(lo) * 2 * _U)
        hi = np.minimum(fh[n:] - fl[:n], sh[:n] - sl[n:])
        hi = np.minimum(1.0, hi + np.abs(hi) * 2 * _U)
        return lo, hi

    def set_bounds(self, intervals: list[tuple[float, float]]) -> tuple[float, float]:
        """Certified (P_lo(A), Q_hi(A)) for A the union of the disjoint ``intervals``."""
        a = np.array([iv[0] for iv in intervals], dtype=float)
        b = np.array([iv[1] for iv in intervals], dtype=float)
        mix = self.interval_bounds(a, b, False)
        gau = self.interval_bounds(a, b, True)
        p, qq = (gau, mix) if self.add else (mix, gau)
        n = len(intervals) + 2
        return float(p[0].sum()) * (1.0 - n * _U), float(qq[1].sum()) * (1.0 + n * _U)

    # ---------------------------------------------------------------- the set A(eps)
    def positive_set(self, eps: float) -> list[tuple[float, float]]:
        """Union of intervals where log dP_M/dQ_M > eps (grid sign changes refined by Brent's method)."""
        g, r = self.grid, self.ld_grid - eps
        pos = r > 0
        if not pos.any():
            return []
        ch = np.flatnonzero(pos[1:] != pos[:-1])
        cuts = np.empty(0)
        if ch.size:
            # bracketed secant (regula falsi with the Illinois-free safeguard of staying in the cell):
            # the crossing's location only affects tightness, and only to second order
            a, b = g[ch], g[ch + 1]
            ra, rb = r[ch], r[ch + 1]
            ok = np.isfinite(ra) & np.isfinite(rb)
            ra, rb = np.where(ok, ra, -1.0), np.where(ok, rb, 1.0)
            for _ in range(4):
                c = a - ra * (b - a) / (rb - ra)
                c = np.clip(np.where(np.isfinite(c), c, 0.5 * (a + b)), a, b)
                rc = self.log_density_ratio(c) - eps
                rc = np.where(np.isfinite(rc), rc, 0.0)
                left = np.sign(rc) == np.sign(ra)
                a, ra = np.where(left, c, a), np.where(left, rc, ra)
                b, rb = np.where(left, b, c), np.where(left, rb, rc)
                done = rc == 0.0
                if done.all():
                    break
            cuts = np.where(np.abs(ra) < np.abs(rb), a, b)
            cuts = np.where(rc == 0.0, c, cuts)
        cuts = cuts.tolist()
        bounds = [-math.inf, *cuts, math.inf]
        state = bool(pos[0])
        out = []
        for i in range(len(bounds) - 1):
            if state:
                out.append((bounds[i], bounds[i + 1]))
            state = not state
        return out

    def delta_lower(self, eps: float) -> tuple[float, list]:
        a_set = self.positive_set(eps)
        if not a_set:
            return 0.0, a_set
        p_lo, q_hi = self.set_bounds(a_set)
        ee = math.exp(eps) * (1.0 + 4 * _U)
        val = p_lo - ee * q_hi * (1.0 + 4 * _U)
        val -= abs(val) * 2 * _U
        return max(0.0, val), a_set


def _empty_delta(eps: float) -> float:
    """(1 - e^eps)_+ rounded down: delta of identical P and Q (empty ledger, or q = 0 only)."""
    return max(0.0, -math.expm1(eps) * (1.0 - 4 * _U))


def max_statistic_delta_lower(entries, eps: float, direction: str = "remove") -> float:
    """Certified lower bound on delta(eps) of the composed dominating pair, from the max statistic.

    Parameters
    ----------
    entries : Ledger or iterable of (mechanism, count) or of mechanisms
        Every mechanism a :class:`mechanisms.subsampled.SubsampledGaussian` or a
        :class:`mechanisms.gaussian.Gaussian` (q = 1); add/remove relation.
    eps : float
        Any finite real.
    direction : {"remove", "add"}
        Which dominating pair (remove: P = mixture, Q = Gaussian; add: the swap).

    Returns
    -------
    float
        delta_M(eps) = sup_A P_M(A) - e^eps Q_M(A) for M = max of the normalised outputs (see the module
        docstring), rounded down: a certified **lower bound** on the true delta(eps); exact up to float
        at T = 1.  (1 - e^eps)_+ for an empty ledger (or all q = 0).
    """
    eps = _check_eps(eps)
    add = _check_direction(direction)
    st = _steps_from_entries(entries)
    if st.s.size == 0:
        return _empty_delta(eps)
    return _MaxStatistic(st, add).delta_lower(eps)[0]


def epsilon_lower(entries, delta: float, direction: str = "remove", statistic: str = "best") -> float:
    """Certified lower bound on eps(delta) = inf{eps >= 0 : delta(eps) <= delta}.

    ``statistic``: "max" (max statistic), "sum" (sum statistic; homogeneous ledgers only) or "best"
    (the larger of the two, the sum statistic only where the ledger is homogeneous).

    For a statistic and a set A with certified masses P_lo(A) > delta and Q_hi(A), the value
    eps_A = log((P_lo(A) - delta) / Q_hi(A)), rounded down, satisfies delta(eps_A) >= P(A) - e^{eps_A} Q(A)
    >= delta, hence eps(delta) >= eps_A (delta(.) is non-increasing).  Max statistic: A = the set where
    its density ratio exceeds e^eps*, eps* the root of delta_M(eps) = delta (Brent); sum statistic: the
    half line maximising eps_A.  The returned value is verified with the same certified masses.
    Returns 0.0 when no statistic certifies delta(0) >= delta (0 is always a valid lower bound on an
    eps(delta) >= 0).  Lower bound.
    """
    if isinstance(delta, bool) or not isinstance(delta, (int, float, np.integer, np.floating)):
        raise TypeError(f"delta must be a real number, got {type(delta).__name__}")
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ValueError(f"delta must be in (0, 1), got {delta}")
    add = _check_direction(direction)
    if statistic not in ("best", "max", "sum"):
        raise ValueError(f"statistic must be 'best', 'max' or 'sum', got {statistic!r}")
    st = _steps_from_entries(entries)
    if st.s.size == 0:
        return 0.0
    best = 0.0
    if statistic in ("best", "max"):
        best = _max_epsilon_lower(_MaxStatistic(st, add), delta)
    if statistic == "sum" or (statistic == "best" and _sum_auto(st)):
        best = max(best, _sum_statistic(st, add).epsilon_lower(delta))
    return best


def _max_epsilon_lower(stat: _MaxStatistic, delta: float) -> float:

    def g(e: float) -> float:
        return stat.delta_lower(e)[0] - delta

    if g(0.0) <= 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    while g(hi) > 0.0:
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:  # (cannot happen: e^eps Q_hi >= e^eps 1e-300 > 1 beyond eps = 691)
            return 0.0
    from scipy.optimize import brentq  # (imported on use: slow to import)

    # the final eps_A is stationary in the set's threshold, so a loose root suffices (error ~ xtol^2)
    root = brentq(g, lo, hi, xtol=1e-8, rtol=1e-10, maxiter=200)
    best = 0.0
    for e in (root, lo):
        a_set = stat.positive_set(e)
        if not a_set:
            continue
        cand = _certified_eps(*stat.set_bounds(a_set), delta)
        if cand is not None and cand > best:
            best = cand
    return best


def _certified_eps(p_lo: float, q_hi: float, delta: float) -> float | None:
    """The eps with P(A) - e^eps Q(A) = delta for a set A with certified masses P(A) >= p_lo and
    Q(A) <= q_hi, rounded down and verified with the same bounds (so delta_true(eps) >= delta); None if
    the set certifies nothing."""
    if p_lo <= delta or q_hi <= 0.0:
        return None
    num = (p_lo - delta) * (1.0 - 4 * _U)
    cand = math.log(num) - math.log(q_hi)
    cand -= 8 * _U * (abs(math.log(num)) + abs(math.log(q_hi))) + 1e-300
    if (p_lo - math.exp(cand) * (1.0 + 4 * _U) * q_hi * (1.0 + 4 * _U)) * (1.0 - 2 * _U) >= delta:
        return cand
    return None


# ==================================================================================================
# The sum statistic (homogeneous ledgers): S = sum_j y_j = K + N(0, T s^2), K ~ Bin(T, q)
# ==================================================================================================

_LOG_TAIL = 92.1  # binomial tails beyond the kept range have mass <= 2 e^-92.1 ~ 2e-40 (Bernstein)
#: "best" mode skips the sum statistic above this many binomial terms (~ 27 sqrt(T q (1 - q)); the cost
#: grows with it: ~1 ms per 10^4 terms and evaluation); it can still be asked for explicitly
SUM_AUTO_MAX_TERMS = 20000


class _SumStatistic:
    """S = sum of the T normalised outputs of a homogeneous ledger (all steps (s, q)).

    remove: P_S = sum_K b_K N(K, T s^2) with b_K = Bin(T, q) pmf, Q_S = N(0, T s^2); add: the swap.
    The density ratio of the remove pair, sum_K b_K exp(K (2 m - K) / (2 T s^2)), is increasing in m, so
    the optimal sets are (m*, inf) (remove) and (-inf, m*] (add).

    Certified pieces: the binomial weights come from the ratio recurrence
    b_{K+1} / b_K = (T - K) q / ((K + 1)(1 - q)) started at the mode with weight 1 and normalised by
    their sum; each step costs <= 4 ulps, so w_K has relative error <= 4 u |K - mode| (bound ``self.werr``),
    the kept range [K_lo, K_hi] leaves tails of mass <= ``self.tail`` (Bernstein: P(|K - Tq| >= t)
    <= 2 exp(-t^2 / (2 (Tq(1-q) + t/3)))), and each normal CDF value has relative error
    <= 8 u (3 min(z^2, 1600) + 64) (z^2 for the argument rounding, 3 z^2 also covers the rounding of
    s sqrt(T)), plus 1e-300 absolute per term.
    """

    def __init__(self, s: float, q: float, n: int, add: bool):
        self.add = add
        self.sd = s * math.sqrt(n)
        self.n = n
        if q >= 1.0:
            ks = np.array([float(n)])
            w = np.array([1.0])
            self.werr, self.tail = 0.0, 0.0
        else:
            mean, var = n * q, n * q * (1.0 - q)
            t = (2.0 * _LOG_TAIL / 3.0 + math.sqrt(4.0 * _LOG_TAIL**2 / 9.0 + 8.0 * _LOG_TAIL * var)) / 2.0
            k_lo, k_hi = max(0, math.floor(mean - t)), min(n, math.ceil(mean + t))
            self.tail = 2.0 * math.exp(-_LOG_TAIL) if (k_lo > 0 or k_hi < n) else 0.0
            mode = min(max(math.floor((n + 1) * q), k_lo), k_hi)
            r = q / (1.0 - q)
            up = np.arange(mode, k_hi, dtype=float)  # K -> K + 1 for K = mode .. k_hi - 1
            dn = np.arange(mode, k_lo, -1, dtype=float)  # K -> K - 1 for K = mode .. k_lo + 1
            with np.errstate(under="ignore"):
                w_up = np.cumprod((n - up) / (up + 1.0) * r)
                w_dn = np.cumprod(dn / (n - dn + 1.0) / r)
            w = np.concatenate([w_dn[::-1], [1.0], w_up])
            ks = np.arange(k_lo, k_hi + 1, dtype=float)
            self.werr = 4.0 * _U * (max(k_hi - mode, mode - k_lo) + 2)
        keep = w > 0.0
        self.n_dropped = int((~keep).sum())  # underflowed weights (each < 1e-300 relative to the mode)
        total = float(w[keep].sum())
        self.k = ks[keep]
        self.b = w[keep] / total  # rel. error <= werr (weights) + werr + n u (sum) + u (division)
        self.b_rel = 2.0 * self.werr + (self.k.size + 2) * _U
        self.logb = np.log(self.b)

    # ---------------------------------------------------------------- uncertified, for locating sets
    def log_ratio_remove(self, m: float) -> float:
        """log dP/dQ of the remove pair at S = m."""
        v = self.logb + self.k * (2.0 * m - self.k) / (2.0 * self.sd**2)
        mx = float(v.max())
        return mx + math.log(float(np.exp(v - mx).sum()))

    def crossing(self, level: float) -> float | None:
        """m with log_ratio_remove(m) = level; None if level is below the ratio's infimum (every m)."""
        inf_level = float(self.logb[0]) if self.k[0] == 0 else -math.inf
        if level <= inf_level:
            return None
        kmax = float(self.k[-1])
        if kmax == 0.0:
            return None
        lo, hi = -10.0 * self.sd, kmax + 10.0 * self.sd
        for _ in range(200):
            if self.log_ratio_remove(lo) < level:
                break
            lo -= (hi - lo)
        for _ in range(200):
            if self.log_ratio_remove(hi) > level:
                break
            hi += (hi - lo)
        from scipy.optimize import brentq  # (imported on use: slow to import)

        return brentq(lambda m: self.log_ratio_remove(m) - level, lo, hi, xtol=1e-12 * max(1.0, abs(lo)),
                      rtol=1e-15, maxiter=200)

    def _set_masses(self, m: float) -> tuple[float, float]:
        """Uncertified (P(A_m), Q(A_m)) for the direction's threshold set at m."""
        if self.add:
            return float(ndtr(m / self.sd)), float(self.b @ ndtr((m - self.k) / self.sd))
        return float(self.b @ ndtr((self.k - m) / self.sd)), float(ndtr(-m / self.sd))

    # ---------------------------------------------------------------- certified masses
    @staticmethod
    def _phi_rel(z: np.ndarray) -> np.ndarray:
        """Relative error bound of ndtr(z) (plus the 1e-300 absolute allowance used by the callers):
        ~z^2 ulps from the argument's rounding while |z| <= 40; beyond, ndtr is exactly 0 (covered by
        the absolute allowance) or 1 (error < 1e-300)."""
        return 8.0 * _U * (3.0 * np.minimum(np.asarray(z) ** 2, 1600.0) + 64.0)

    def set_bounds(self, m: float | None) -> tuple[float, float]:
        """Certified (P_lo(A), Q_hi(A)) for A = (m, inf) (remove) or (-inf, m] (add); m None: whole line."""
        if m is None:
            return 1.0 - 4 * _U, 1.0
        n_abs = (self.k.size + self.n_dropped + 2) * 1e-300  # underflow allowance
        # Gaussian side: Phi(z) with z = m / sd (add: P = Phi(z); remove: Q = Phi(-z))
        zg = m / self.sd if self.add else -m / self.sd
        g = float(ndtr(zg))
        g_rel = float(self._phi_rel(zg))
        # mixture side: sum_K b_K Phi(+-(m - K)/sd)
        zk = (m - self.k) / self.sd if self.add else (self.k - m) / self.sd
        phi = ndtr(zk)
        rel = float(self._phi_rel(zk).max()) + self.b_rel + (self.k.size + 2) * _U
        mix = float(self.b @ phi)
        mix_lo = max(0.0, mix * (1.0 - rel) - n_abs)
        mix_hi = min(1.0, mix * (1.0 + rel) + n_abs + self.tail)
        g_lo = max(0.0, g * (1.0 - g_rel) - 1e-300)
        g_hi = min(1.0, g * (1.0 + g_rel) + 1e-300)
        if self.add:
            return g_lo, mix_hi
        return mix_lo, g_hi

    def delta_lower(self, eps: float) -> float:
        level = -eps if self.add else eps
        m = self.crossing(level)
        if m is None:  # remove: the ratio exceeds e^eps everywhere -> A = R; add: nowhere
            if self.add:
                return 0.0
        p_lo, q_hi = self.set_bounds(m)
        ee = math.exp(eps) * (1.0 + 4 * _U)
        val = p_lo - ee * q_hi * (1.0 + 4 * _U)
        val -= abs(val) * 2 * _U
        return max(0.0, val)

    def epsilon_lower(self, delta: float) -> float:
        """max over thresholds m of log((P_lo(A_m) - delta) / Q_hi(A_m)) (certified at the final m)."""
        def neg_eps(m: np.ndarray) -> np.ndarray:
            """-(uncertified eps_A) at thresholds m (vectorised); infeasible m get a large finite value
            sloping towards feasibility (larger P(A))."""
            m = np.atleast_1d(np.asarray(m, dtype=float))
            if self.add:
                p = ndtr(m / self.sd)
                qq = ndtr((m[:, None] - self.k[None, :]) / self.sd) @ self.b
            else:
                p = ndtr((self.k[None, :] - m[:, None]) / self.sd) @ self.b
                qq = ndtr(-m / self.sd)
            ok = (p > delta) & (qq > 0.0)
            with np.errstate(divide="ignore", invalid="ignore"):
                val = -(np.log(np.where(ok, p - delta, 1.0)) - np.log(np.where(ok, qq, 1.0)))
            slope = (m if not self.add else -m) / self.sd
            return np.where(ok, val, 1e6 + slope)

        # coarse scan of the (uncertified) eps_A over thresholds, then Brent's bounded search around the best
        kmax = float(self.k[-1])
        grid = np.linspace(-8.0 * self.sd, kmax + 8.0 * self.sd, 41)
        vals = neg_eps(grid)
        j = int(np.argmin(vals))
        a, b = grid[max(j - 1, 0)], grid[min(j + 1, grid.size - 1)]
        from scipy.optimize import minimize_scalar  # (imported on use: slow to import)

        res = minimize_scalar(lambda x: float(neg_eps(x)[0]), bounds=(a, b), method="bounded",
                              options={"xatol": 1e-10 * max(1.0, self.sd)})
        best = 0.0
        for m in (float(res.x), float(grid[j])):
            cand = _certified_eps(*self.set_bounds(m), delta)
            if cand is not None and cand > best:
                best = cand
        return best


def _sum_auto(st: _Steps) -> bool:
    """Whether "best" mode uses the sum statistic: homogeneous ledger with a moderate binomial range."""
    if st.s.size != 1 or st.k[0] > 2.0**53:
        return False
    q = float(st.q[0])
    return 27.0 * math.sqrt(float(st.k[0]) * q * (1.0 - q)) + 200.0 <= SUM_AUTO_MAX_TERMS


def _sum_statistic(st: _Steps, add: bool) -> _SumStatistic:
    if st.s.size > 1:
        raise ValueError("sum_statistic_delta_lower needs a homogeneous ledger (every step the same "
                         f"sigma / sensitivity and sample_rate), got {st.s.size} different steps")
    n = float(st.k[0])
    if n > 2.0**53:
        raise ValueError(f"total step count must be <= 2**53, got {n}")
    return _SumStatistic(float(st.s[0]), float(st.q[0]), int(n), add)


def sum_statistic_delta_lower(entries, eps: float, direction: str = "remove") -> float:
    """Certified lower bound on delta(eps) from the sum statistic S = sum_j y_j (homogeneous ledgers).

    S is a Gaussian mixture over K ~ Bin(T, q): remove P_S = sum_K b_K N(K, T s^2), Q_S = N(0, T s^2);
    add: the swap.  The likelihood ratio of S is monotone, so delta_S(eps) = P_S(A) - e^eps Q_S(A) with
    A a half line at the crossing point; by data processing delta_S <= delta
    (docs/derivations/lower-bounds.md; good in the smooth regime T q^2 >> 1, where the max statistic is
    weak).  Exact at T = 1.  All masses are bounded with declared float errors (see :class:`_SumStatistic`)
    and rounded to the safe side.

    Raises ValueError unless every entry is the same (sigma / sensitivity, sample_rate) after merging.
    """
    eps = _check_eps(eps)
    add = _check_direction(direction)
    st = _steps_from_entries(entries)
    if st.s.size == 0:
        return _empty_delta(eps)
    return _sum_statistic(st, add).delta_lower(eps)


def delta_lower(entries, eps: float, direction: str = "remove") -> float:
    """The larger of the max-statistic and (homogeneous ledgers) sum-statistic lower bounds on delta(eps).
    Certified lower bound; arguments as :func:`max_statistic_delta_lower`."""
    eps = _check_eps(eps)
    add = _check_direction(direction)
    st = _steps_from_entries(entries)
    if st.s.size == 0:
        return _empty_delta(eps)
    v = _MaxStatistic(st, add).delta_lower(eps)[0]
    if _sum_auto(st):
        v = max(v, _sum_statistic(st, add).delta_lower(eps))
    return v
