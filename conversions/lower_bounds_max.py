"""The max statistic of :mod:`conversions.lower_bounds`: M = max of the normalised outputs, its CDFs
under both members of the pair on a grid with certified error, and the eps it certifies."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr, ndtr

from ._lower_steps import _U, _certified_eps, _Steps, step_log_rel_err

_GRID = 2048
_LOG_TINY = -745.0  # masses below e^-745 are not resolved by the grid (only tightness is affected)
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


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
        if eps <= 700.0:
            eq = math.exp(eps) * (1.0 + 4 * _U) * q_hi * (1.0 + 4 * _U)
        elif q_hi <= 0.0:
            eq = 0.0
        else:  # e^eps Q_hi in log space (e^eps alone overflows past eps ~ 709: tiny sigma), rounded up
            lg = eps + math.log(q_hi)
            eq = math.exp(min(lg, 709.0)) * (1.0 + 8 * _U * (abs(eps) + abs(math.log(q_hi)) + 2.0))
        val = p_lo - eq
        val -= abs(val) * 2 * _U
        return max(0.0, val), a_set


def _max_epsilon_lower(stat: _MaxStatistic, delta: float, eps_hint: float | None = None) -> float:
    """The max statistic's certified lower bound on eps(delta): the root of delta_M(eps) = delta located
    by Brent's method (from ``eps_hint``, an estimate of eps(delta) such as a route's upper bound, when
    given: the bracket is then searched downwards from it in steps growing 8x from 1e-3 eps_hint, else
    by doubling from [0, 1]), then certified on the sets at the root and at the bracket's lower end.
    Only the work depends on the hint; the value returned is certified either way."""

    def g(e: float) -> float:
        return stat.delta_lower(e)[0] - delta

    if g(0.0) <= 0.0:
        return 0.0
    lo, hi = 0.0, 1.0
    hinted = eps_hint is not None and 0.0 < eps_hint < 1e4
    if hinted and not g(eps_hint) > 0.0:
        hi, step = eps_hint, 1e-3 * eps_hint
        while hi - step > 0.0 and not g(hi - step) > 0.0:
            hi, step = hi - step, 8.0 * step
        lo = max(hi - step, 0.0)  # (g(0) > 0 was checked)
    else:
        if hinted:
            lo, hi = eps_hint, 2.0 * eps_hint
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
