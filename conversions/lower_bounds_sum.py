"""The sum statistic of :mod:`conversions.lower_bounds` (homogeneous ledgers): S = K + N(0, T s^2),
K ~ Bin(T, q), its half-line masses with certified error, and the eps they certify."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtr

from ._lower_steps import _U, _certified_eps, _Steps, homogeneous

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
    return _SumStatistic(*homogeneous(st, "sum_statistic_delta_lower"), add)
