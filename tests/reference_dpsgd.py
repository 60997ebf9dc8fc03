"""Independent high-precision reference for DP-SGD: the T-fold Poisson-subsampled Gaussian at large T and
small sample rate q (T up to 1e7, q down to 1e-6).

Nothing here imports from ``accountant/``, ``mechanisms/`` or ``conversions/``; no code or numerical
shortcut of the library's contour / split routes is used (different x-rule, different t-rule, different
arithmetic).

Pair (sensitivity 1, noise s = sigma), add/remove relation:

* remove: P = (1-q) N(0, s^2) + q N(1, s^2), Q = N(0, s^2), per-step loss L(x) = log(1 + u(x)) with
  u(x) = q (e^{Y} - 1), Y = (2x - 1) / (2 s^2);
* add: the swap, P = N(0, s^2), loss -L(x).

Both per-step MGFs are expectations under N(0, s^2) (for remove, p(x) = phi(x)(1 + u(x))):

    M(s) = E_P[e^{s L}] = E_{N(0, s^2)}[(1 + u(x))^a],   a = s + 1 (remove),  a = -s (add).

Privacy profile of T i.i.d. steps (Laplace inversion of (1 - e^{eps - x})_+, whose two-sided Laplace
transform is e^{z x} / (z (z + 1)), Re z > 0):

    delta_T(eps) = (1/pi) int_0^inf Re[ M(c + it)^T e^{-(c + it) eps} / ((c + it)(c + 1 + it)) ] dt,  c > 0.

Numerics (all in exact integer / mpmath arithmetic; every discretisation is checked by refinement in the
self-tests and in ``tests/make_dpsgd_reference.py``):

1. x-rule.  M(c + it) is the trapezoid rule on the *horizontally shifted* line x + i y (Cauchy: the
   integrand is entire in x except for branch points at Im x = (2k + 1) pi s^2, where 1 + u = 0; on
   0 < Im x < pi s^2 the factor 1 + u stays in the upper half plane, so the principal power continues the
   real-line values, and the Gaussian makes the vertical end segments vanish).  Shift y = theta s^2 with
   theta = pi/2 (remove) / -pi/4 (add), chosen so that Im(a) Im(log(1 + u)) >= 0: every node's modulus is
   bounded by its t = 0 value, and at large t the oscillating factor e^{it L} becomes a decaying one
   (e^{-t q e^Y} in the near-atomic core, e^{-t |theta|} in the tail) -- no oscillatory x-integral at
   any t.  Step h from the strip of analyticity (half-width 0.45 pi s^2 (remove) / pi s^2 / 4 (add),
   on which |1 + u|^{Re a} is bounded by its real-line values (remove) / by (1 - q)^{-c} (add)):
   the rule's error is ~ e^{-2 pi d / h} x (envelope), h is set to make it ~10^-(xdigits); nodes whose
   modulus bound is below 10^-(xdigits) are dropped.  M is summed directly (no subtraction): absolute
   error ~1e-45 in M, so T log M keeps ~1e-38 absolute accuracy up to T = 1e7.
   Arithmetic: x-node data in mpmath, the per-t sums in fixed point (Python integers scaled by 2^P,
   P = 192 bits), which is exact up to one rounding per product.
2. t-rule.  Composite Gauss-Legendre (n = 20 nodes per panel) on panels [t, t + w] marched from t = 0,
   w a power of two limited by (i) half the distance to the kernel's poles (w <= max(t, c) / 2), (ii) a
   phase change of the integrand <= 1.5 pi per panel, (iii) a log-modulus change <= 6 per panel; a
   panel failing (ii)/(iii) is recomputed at half width.  Marching stops when the tail estimate
   e^{-c eps} |M(c + it)|^T / (pi t) is below ``rtol x delta`` at two consecutive panel ends (the tail
   beyond is *estimated*, not bounded: the self-tests double t_max and report the change).
3. line c: the minimiser of T log M(c) - c eps - log(c (c + 1)) (the integrand then has the size of the
   Chernoff bound), capped where M(c) is dominated by the far Gaussian tail; any c > 0 gives the same
   value (self-test).  The cancellation ratio R = sum |terms| / delta is reported: with mpmath at
   ``dps`` digits the value keeps ~dps - log10(R) - log10(T) digits of the integrand's precision.

Accuracy (measured, see ``tests/data/dpsgd_reference.json``): relative 1e-15 or better on delta at the
DP-SGD settings, i.e. eps to ~1e-15 relative / absolute, limited by the t-truncation estimate.

Also :func:`delta_T1_closed` (T = 1, normal CDFs at the loss threshold) for the self-check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import mpmath as mp
import numpy as np

__all__ = ["delta_ref", "deltas_ref", "eps_ref", "eps_ref_max", "log_mgf", "delta_T1_closed", "RefResult",
           "remove_mgf_integer"]

#: fixed-point scale (bits) of the per-t sums
PBITS = 192
#: Gauss-Legendre nodes per t-panel
NGL = 20
#: a node of the x-rule whose share of M^T exceeds this is a frequency the t-panels must resolve
HF_TOL = 1e-40
#: mpmath working precision (decimal digits) of everything outside the fixed-point sums
DPS = 60


def _check(sigma, q, T, direction):
    if not (isinstance(sigma, (int, float)) and sigma > 0 and math.isfinite(sigma)):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    if not (0 < q < 1):
        raise ValueError(f"q must be in (0, 1), got {q!r}")
    if int(T) != T or T < 1:
        raise ValueError(f"T must be a positive integer, got {T!r}")
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")


# ------------------------------------------------------------------------------------ Gauss-Legendre
_GL: dict = {}


def _gauss_legendre(n: int):
    """Nodes and weights of the n-point Gauss-Legendre rule on [-1, 1] at DPS + 20 digits (Newton on the
    three-term recurrence)."""
    if n in _GL:
        return _GL[n]
    with mp.workdps(DPS + 20):
        xs, ws = [], []
        for i in range(1, n + 1):
            x = mp.cos(mp.pi * (i - mp.mpf(1) / 4) / (n + mp.mpf(1) / 2))
            for _ in range(100):
                p0, p1 = mp.mpf(1), x
                for k in range(1, n):
                    p0, p1 = p1, ((2 * k + 1) * x * p1 - k * p0) / (k + 1)
                dp = n * (x * p1 - p0) / (x * x - 1)
                dx = p1 / dp
                x -= dx
                if abs(dx) < mp.mpf(10) ** (-(DPS + 15)):
                    break
            p0, p1 = mp.mpf(1), x
            for k in range(1, n):
                p0, p1 = p1, ((2 * k + 1) * x * p1 - k * p0) / (k + 1)
            dp = n * (x * p1 - p0) / (x * x - 1)
            xs.append(x)
            ws.append(2 / ((1 - x * x) * dp * dp))
    _GL[n] = (xs, ws)
    return _GL[n]


# ------------------------------------------------------------------------------------ fixed point
def _fx(v: mp.mpf) -> int:
    """round(v 2^PBITS) as a Python integer."""
    return int(mp.nint(mp.ldexp(v, PBITS)))


def _fxc(z) -> tuple[int, int]:
    z = mp.mpc(z)
    return _fx(z.real), _fx(z.imag)


def _unfx(re: int, im: int, bits: int) -> mp.mpc:
    """(re + i im) 2^-bits as an mpc (rounded to the working precision)."""
    return mp.mpc(mp.ldexp(mp.mpf(int(re)), -bits), mp.ldexp(mp.mpf(int(im)), -bits))


# ------------------------------------------------------------------------------------ the x-rule
class _XRule:
    """Trapezoid nodes for M(c + it) = sum_k w_k (1 + u_k)^a on the shifted line (module docstring)."""

    def __init__(self, sigma: float, q: float, direction: str, c: float, xdigits: int = 45,
                 hscale: float = 1.0):
        self.sigma, self.q, self.direction, self.c = float(sigma), float(q), direction, float(c)
        self.add = direction == "add"
        s = self.sigma
        theta = -math.pi / 4 if self.add else math.pi / 2
        d = math.pi * s * s / 4 if self.add else 0.45 * math.pi * s * s  # strip half-width in x
        a0 = -self.c if self.add else self.c + 1.0
        self.a0, self.sgn = a0, (-1 if self.add else 1)  # a = a0 + sgn i t
        lt = xdigits * math.log(10.0)
        # envelope of the integrand on the real line (log), float64: log phi(x) + a0 log(1 + u(x))
        xs = np.arange(-60.0 * s - 2.0, 60.0 * s + (0.0 if self.add else self.c) + 60.0, s / 8.0)
        yv = (2.0 * xs - 1.0) / (2.0 * s * s)
        with np.errstate(over="ignore"):
            lg = np.where(yv < 30.0, np.log1p(q * np.expm1(np.minimum(yv, 30.0))),
                          yv + math.log(q) + np.log1p((1.0 - q) * np.exp(-np.maximum(yv, 30.0)) / q))
        shift_gain = (theta * s) ** 2 / 2.0  # |phi(x + i y)| = phi(x) e^{theta^2 s^2 / 2}
        env = -0.5 * (xs / s) ** 2 - math.log(s * math.sqrt(2 * math.pi)) + a0 * lg + shift_gain
        self.log_env_max = float(env.max())
        keep = env > -lt - 8.0 + min(0.0, self.log_env_max)
        lo, hi = float(xs[keep].min()) - s, float(xs[keep].max()) + s
        # strip bound: on the strip the integrand is at most e^{far-edge Gaussian gain} x envelope
        # (remove) / x (1 - q)^{-c} on |Im log| <= pi/2 (add); rule error ~ 2 e^{-2 pi d / h} x that
        far = ((abs(theta) * s * s + d) / s) ** 2 / 2.0
        budget = lt + far + max(self.log_env_max, 0.0) + (self.c * -math.log1p(-q) if self.add else 0.0)
        self.h = hscale * 2.0 * math.pi * d / budget
        n = int(math.ceil((hi - lo) / self.h))
        with mp.workprec(PBITS + 64):
            y = mp.mpf(theta) * s * s
            s2 = mp.mpf(s) ** 2
            norm = 1 / (mp.mpf(s) * mp.sqrt(2 * mp.pi))
            h = mp.mpf(self.h)
            qq = mp.mpf(q)
            xs_mp, ells, eks = [], [], []
            cut = mp.mpf(10) ** (-xdigits) * h  # per-node drop threshold (|w e^{a0 ell}|)
            dropped = mp.mpf(0)
            for k in range(n + 1):
                x = mp.mpc(mp.mpf(lo) + k * h, y)
                yy = (2 * x - 1) / (2 * s2)
                u = qq * mp.expm1(yy)
                ell = mp.log(1 + u)  # principal branch: 1 + u stays off the negative axis (docstring)
                w = h * norm * mp.exp(-x * x / (2 * s2))
                e = w * mp.exp(a0 * ell)
                if abs(e) < cut:
                    dropped += abs(e)
                    continue
                xs_mp.append(x)
                ells.append(ell)
                eks.append(e)
            self.dropped = dropped
            self.K = len(ells)
            self.ells = ells
            # per-node frequency |Re ell_k| and log-modulus decay rate |Im ell_k|: M(c + it) is the sum of
            # damped exponentials E_k e^{sgn i t ell_k}, |.| = |E_k| e^{-t |Im ell_k|} (for the t-rule)
            self.freq = np.array([abs(float(e.real)) for e in ells])
            self.damp = np.array([abs(float(e.imag)) for e in ells])
            self.logabsE = np.array([float(mp.log(abs(e))) for e in eks])
            self.E = [_fxc(e) for e in eks]
            self.Ere = np.array([e[0] for e in self.E], dtype=object)
            self.Eim = np.array([e[1] for e in self.E], dtype=object)
            self.m0 = mp.fsum(eks)  # M(c) (t = 0)
        self._tables: dict = {}
        self._steps: dict = {}

    def _direct(self, tau) -> tuple[np.ndarray, np.ndarray]:
        with mp.workprec(PBITS + 64):
            vals = [_fxc(mp.exp(mp.mpc(0, self.sgn) * tau * ell)) for ell in self.ells]
        return np.array([v[0] for v in vals], dtype=object), np.array([v[1] for v in vals], dtype=object)

    def _pow2_factor(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Fixed-point e^{sgn i 2^k ell_k}: by squaring the nearest cached smaller power (a few ulps of
        2^-PBITS per squaring), else directly."""
        r = self._steps.get(k)
        if r is None:
            below = [j for j in self._steps if k - 24 <= j < k]
            if below:
                j = max(below)
                re, im = self._steps[j]
                for _ in range(k - j):
                    re, im = (re * re - im * im) >> PBITS, (2 * re * im) >> PBITS
                r = (re, im)
            else:
                r = self._direct(mp.ldexp(mp.mpf(1), k))
            self._steps[k] = r
        return r

    def factors(self, tau) -> tuple[np.ndarray, np.ndarray]:
        """Fixed-point e^{sgn i tau ell_k} for every node: tau a power of two or a sum of two (cached
        powers, one product), else directly (mpmath)."""
        tau = mp.mpf(tau)
        if tau > 0:
            m, e = mp.frexp(tau)  # tau = m 2^e, 1/2 <= m < 1
            k1 = int(e) - 1
            rest = tau - mp.ldexp(mp.mpf(1), k1)
            if rest == 0:
                return self._pow2_factor(k1)
            m2, e2 = mp.frexp(rest)
            if m2 == mp.mpf(1) / 2:
                ar, ai = self._pow2_factor(k1)
                br, bi = self._pow2_factor(int(e2) - 1)
                return (ar * br - ai * bi) >> PBITS, (ar * bi + ai * br) >> PBITS
        return self._direct(tau)

    def panel_table(self, w) -> tuple[np.ndarray, np.ndarray]:
        """(n x K) fixed-point e^{sgn i (w/2)(1 + g_m) ell_k}: the Gauss-Legendre nodes g_m of a width-w
        panel,
        measured from its left end (every factor has modulus <= 1, so fixed point loses nothing); w a power
        of two: squared from the nearest cached narrower table, else directly."""
        w = mp.mpf(w)
        m, e = mp.frexp(w)
        k = int(e) - 1
        if m != mp.mpf(1) / 2:
            raise ValueError("panel widths are powers of two")
        r = self._tables.get(k)
        if r is None:
            below = [j for j in self._tables if k - 24 <= j < k]
            if below:
                j = max(below)
                re, im = self._tables[j]
                for _ in range(k - j):
                    re, im = (re * re - im * im) >> PBITS, (2 * re * im) >> PBITS
                r = (re, im)
            else:
                g, _ = _gauss_legendre(NGL)
                re, im = [], []
                for gm in g:
                    a, b = self._direct(w / 2 * (1 + gm))
                    re.append(a)
                    im.append(b)
                r = (np.array(re, dtype=object), np.array(im, dtype=object))
            self._tables[k] = r
        return r

    def mgf_direct(self, s) -> mp.mpc:
        """M(s) at any complex s (mpmath, node by node; for self-tests)."""
        with mp.workprec(PBITS + 64):
            s = mp.mpc(s)
            a = s + 1 if not self.add else -s
            tot = mp.mpc(0)
            for (er, ei), ell in zip(self.E, self.ells, strict=True):
                e = _unfx(er, ei, PBITS)
                tot += e * mp.exp((a - self.a0) * ell)
            return tot


# ------------------------------------------------------------------------------------ the t-rule
@dataclass
class _Line:
    """Values of G(t) = M(c + it)^T / ((c + it)(c + 1 + it)) at the Gauss-Legendre nodes of the panels."""

    t: list = field(default_factory=list)  # nodes (mpf)
    wt: list = field(default_factory=list)  # weights (mpf)
    G: list = field(default_factory=list)  # values (mpc)
    panels: int = 0
    rejected: int = 0
    t_max: float = 0.0
    tail_est: float = 0.0  # e^{-c eps} |G(t_max)| t_max / pi at the planning eps (estimate of the cut tail)


def _log_g(xr: _XRule, T: int, c, Mvals, tvals):
    out = []
    for M, t in zip(Mvals, tvals, strict=True):
        z = mp.mpc(c, t)
        out.append(T * mp.log(M) - mp.log(z * (z + 1)))
    return out


def _panel(xr: _XRule, T: int, t0, w, C):
    """Values on the panel [t0, t0 + w] given C_k = e^{sgn i t0 ell_k} (fixed point)."""
    Cre, Cim = C
    ECre = (xr.Ere * Cre - xr.Eim * Cim) >> PBITS
    ECim = (xr.Ere * Cim + xr.Eim * Cre) >> PBITS
    Gre, Gim = xr.panel_table(w)
    sre = Gre.dot(ECre) - Gim.dot(ECim)
    sim = Gre.dot(ECim) + Gim.dot(ECre)
    g, gw = _gauss_legendre(NGL)
    half = mp.mpf(w) / 2
    tvals = [t0 + half * (1 + gm) for gm in g]
    wvals = [half * wm for wm in gw]
    Mvals = [_unfx(a, b, 2 * PBITS) for a, b in zip(sre, sim, strict=True)]
    return tvals, wvals, _log_g(xr, T, xr.c, Mvals, tvals)


def _pow2_floor(v: float) -> float:
    return 2.0 ** math.floor(math.log2(v))


def _build_line(xr: _XRule, T: int, eps_plan: tuple[float, float], tol_abs, moments, wscale=1.0,
                tmax_factor=1.0, hf_tol=HF_TOL, max_nodes=4_000_000) -> _Line:
    """March Gauss-Legendre panels from t = 0 (module docstring, item 2).  ``moments`` = (m1, m2): the
    first two derivatives of log M at c (initial phase rate and width), ``wscale`` < 1 refines every
    width limit, ``tmax_factor`` > 1 continues the march past the stopping point (the t_max check)."""
    c = mp.mpf(xr.c)
    m1, m2 = moments
    line = _Line()
    ea, eb = eps_plan
    # phase rate of G at t = 0: T m1 - (1/c + 1/(c+1)); log-modulus curvature T m2
    om0 = abs(T * m1 - 1 / xr.c - 1 / (xr.c + 1.0)) + max(abs(ea), abs(eb))
    ts = 1.0 / math.sqrt(max(T * m2, 1e-300))
    om_reg = om0
    w = min(0.5 * xr.c, 1.2 * math.pi / max(om0, 1e-300), 3.0 * ts) * wscale
    w = _pow2_floor(max(w, 1e-12))
    t0 = mp.mpf(0)
    one = 1 << PBITS
    C = (np.array([one] * xr.K, dtype=object), np.array([0] * xr.K, dtype=object))  # e^{sgn i t0 ell_k}
    prev_lg = None
    ok_ends = 0
    stop_t = None
    with mp.workprec(PBITS + 64):
        ec = mp.exp(-c * min(ea, eb))
        log_m_prev = float(mp.log(abs(xr.m0)))
        while True:
            # high-frequency guard: every node whose share of M^T (T |E_k| e^{-t |Im ell_k|} / |M|) exceeds
            # HF_TOL is a frequency |Re ell_k| present in the integrand; the panel must resolve it
            sig = math.log(T) + xr.logabsE - float(t0) * xr.damp - log_m_prev > math.log(hf_tol)
            om_hf = float(xr.freq[sig].max()) if np.any(sig) else 0.0
            wl = 1.5 * math.pi * wscale / max(om_hf + om_reg, 1e-300)
            if w > wl and w > 1e-9:
                w = _pow2_floor(max(wl, 1e-12))
            tv, wv, lg = _panel(xr, T, t0, w, C)
            # checks: phase change of G e^{-it eps} for eps at both planning ends, and log-modulus change
            ph = [mp.im(v) for v in lg]
            unwr = [ph[0]]
            for p in ph[1:]:
                dp = p - unwr[-1]
                dp -= 2 * mp.pi * mp.nint(dp / (2 * mp.pi))
                unwr.append(unwr[-1] + dp)
            dph = unwr[-1] - unwr[0]
            span = tv[-1] - tv[0]
            dphase = max(abs(dph - ea * span), abs(dph - eb * span)) * w / span
            mods = [mp.re(v) for v in lg]
            dmod = (max(mods) - min(mods)) * w / span
            jump = abs(float(mods[0] - prev_lg)) if prev_lg is not None else 0.0  # aliasing guard
            if (dphase > 1.5 * math.pi * wscale or dmod > 6.0 * wscale or jump > 6.0) and w > 1e-9:
                line.rejected += 1
                w /= 2.0
                continue
            line.panels += 1
            log_m_prev = float((mp.re(lg[-1]) + mp.log(abs(mp.mpc(c, tv[-1]) * (mp.mpc(c, tv[-1]) + 1)))) / T)
            line.t.extend(tv)
            line.wt.extend(wv)
            line.G.extend(mp.exp(v) for v in lg)
            prev_lg = mods[-1]
            t_end = t0 + w
            # tail estimate: e^{-c eps} |M(c + it)|^T int_t^inf dt' / (c^2 + t'^2) / pi at the last node
            tl = tv[-1]
            zl = mp.mpc(c, tl)
            logmT = mods[-1] + mp.log(abs(zl * (zl + 1)))
            tail = ec * mp.exp(logmT) * (mp.pi / 2 - mp.atan(tl / c)) / (c * mp.pi)
            if stop_t is None:
                ok_ends = ok_ends + 1 if tail < tol_abs else 0
                if ok_ends >= 2:
                    stop_t = t_end
                    line.tail_est = float(tail)
            if stop_t is not None and t_end >= stop_t * tmax_factor:
                line.t_max = float(t_end)
                line.tail_est = float(tail)
                break
            if len(line.t) > max_nodes:
                raise RuntimeError(f"t-rule exceeded {max_nodes} nodes at t = {float(t_end):.4g} "
                                   f"(|M|^T = {float(mp.exp(logmT)):.3g})")
            # next width: pole distance, phase rate, log-modulus slope (from this panel), doubling at most
            om = abs(float(dph) / float(span)) + max(abs(ea), abs(eb))
            om_reg = om
            sl = abs(float(mods[-1] - mods[0]) / float(span))
            wn = min(2.0 * w, 0.5 * max(float(t_end), xr.c) * wscale,
                     1.2 * math.pi / max(om, 1e-300) * wscale, 4.0 / max(sl, 1e-300) * wscale)
            wn = _pow2_floor(max(wn, 1e-12))
            # advance the left-end factor: C(t0 + w) = C(t0) e^{sgn i w ell}
            sr, si = xr.factors(mp.mpf(w))
            Cre, Cim = C
            C = ((Cre * sr - Cim * si) >> PBITS, (Cre * si + Cim * sr) >> PBITS)
            t0 = t_end
            w = wn
    return line


def _delta_on_line(line: _Line, c, eps, deriv=False):
    """(1/pi) sum_j w_j Re[G_j e^{-(c + i t_j) eps}] (and its eps-derivative); also the cancellation ratio."""
    with mp.workprec(PBITS + 64):
        eps = mp.mpf(eps)
        c = mp.mpf(c)
        tot, dtot, absn = mp.mpf(0), mp.mpf(0), mp.mpf(0)
        for t, w, G in zip(line.t, line.wt, line.G, strict=True):
            cs, sn = mp.cos_sin(t * eps)
            e = mp.mpc(cs, -sn)
            v = G * e
            tot += w * v.real
            absn += w * abs(v)
            if deriv:
                dtot -= w * (mp.mpc(c, t) * v).real
        f = mp.exp(-c * eps) / mp.pi
        return tot * f, dtot * f, absn * f


# ------------------------------------------------------------------------------------ line choice
def _logm_float(sigma, q, direction, c):
    """(log M(c), m1, m2) in float64 on the real line (for choosing c and planning only)."""
    s = float(sigma)
    add = direction == "add"
    a0 = -c if add else c + 1.0
    h = min(0.02, s * s / 8.0)
    # remove: the tilted law reaches out to x ~ c + 1 (the far Gaussian tail); add: (1 + u)^{-c} only damps
    x = np.arange(-40.0 * s, 40.0 * s + (0.0 if add else c) + 40.0, h)
    y = (2.0 * x - 1.0) / (2.0 * s * s)
    with np.errstate(over="ignore"):
        ell = np.where(y < 30.0, np.log1p(q * np.expm1(np.minimum(y, 30.0))),
                       y + math.log(q) + np.log1p((1.0 - q) * np.exp(-np.maximum(y, 30.0)) / q))
    lw = -0.5 * (x / s) ** 2 + a0 * ell
    mx = lw.max()
    p = np.exp(lw - mx)
    Z = p.sum()
    lnorm = math.log(h / (s * math.sqrt(2 * math.pi)))
    logm = mx + math.log(Z) + lnorm
    lv = -ell if add else ell
    m1 = float(np.dot(p, lv) / Z)
    m2 = float(np.dot(p, (lv - m1) ** 2) / Z)
    return logm, m1, m2


def _choose_c(sigma, q, T, direction, eps):
    """Minimiser of T log M(c) - c eps - log(c (c + 1)) over [1e-3, c_cap] (bisection on the derivative
    T m1(c) - eps - 1/c - 1/(c + 1), increasing: the objective is convex)."""
    # remove: past c ~ s^2 log(1/q) the far Gaussian tail (losses ~ Y + log q, frequencies ~ c / s^2 in t)
    # takes a growing share of M(c)^T, which the t-panels must then resolve; the integrand's size hardly
    # changes there, so the line is capped
    c_cap = 1e6 if direction == "add" else sigma * sigma * math.log(1.0 / q) + 0.5

    def fp(c):
        _, m1, _ = _logm_float(sigma, q, direction, c)
        return T * m1 - eps - 1.0 / c - 1.0 / (c + 1.0)

    lo, hi = 1e-3, c_cap
    if fp(hi) < 0:
        return hi
    if fp(lo) > 0:
        return lo
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        if fp(mid) > 0:
            hi = mid
        else:
            lo = mid
        if hi / lo < 1.01:
            break
    return math.sqrt(lo * hi)


# ------------------------------------------------------------------------------------ public API
@dataclass
class RefResult:
    """A reference value with its diagnostics."""

    value: float
    value_mp: object
    direction: str
    c: float
    x_nodes: int
    t_nodes: int
    t_max: float
    tail_est: float
    cancellation: float  # sum of |terms| / |value|
    extra: dict = field(default_factory=dict)


class _Engine:
    """One (pair, T, direction, c) with its x-rule and a t-rule planned for an eps range."""

    def __init__(self, sigma, q, T, direction, c, eps_plan, tol_abs, xdigits=45, hscale=1.0, wscale=1.0,
                 tmax_factor=1.0, hf_tol=HF_TOL):
        self.c = float(c)
        self.xr = _XRule(sigma, q, direction, self.c, xdigits, hscale)
        _, m1, m2 = _logm_float(sigma, q, direction, self.c)
        self.line = _build_line(self.xr, int(T), eps_plan, tol_abs, (m1, m2), wscale, tmax_factor, hf_tol)

    def delta(self, eps, deriv=False):
        return _delta_on_line(self.line, self.c, eps, deriv)


def _chernoff_scale(sigma, q, T, direction, eps, c):
    lm, _, _ = _logm_float(sigma, q, direction, c)
    return math.exp(min(700.0, T * lm - c * eps - math.log(c * (c + 1.0))))


def deltas_ref(eps_list, sigma, q, T, direction="remove", rtol=1e-25, c=None, xdigits=45, hscale=1.0,
               wscale=1.0, tmax_factor=1.0, hf_tol=HF_TOL) -> list[RefResult]:
    """Reference delta_T(eps) (one direction) at every eps of ``eps_list`` from one line planned for their
    range (module docstring).  Pass 1 (t-tolerance 1e-12 x the Chernoff-size scale, x-rule 1e-30) finds the
    smallest value, pass 2 plans the line with t-tolerance ``rtol`` x that value.

    ``c`` the line (default: the saddle at the largest eps); ``xdigits``/``hscale`` the x-rule (h is
    multiplied by hscale), ``wscale`` every t-panel limit, ``tmax_factor`` the continuation past the
    stopping point -- for the refinement checks; ``hf_tol`` the high-frequency guard (:data:`HF_TOL`).
    """
    _check(sigma, q, T, direction)
    eps_list = [float(e) for e in eps_list]
    top = -T * math.log1p(-q) if direction == "add" else math.inf
    live = [e for e in eps_list if e < top]
    out = {}
    if live:
        a, b = min(live), max(live)
        cc = c if c is not None else _choose_c(sigma, q, T, direction, b)
        scale = _chernoff_scale(sigma, q, T, direction, a, cc)
        eng = _Engine(sigma, q, T, direction, cc, (a, b), mp.mpf(scale) * mp.mpf(10) ** -12, 30, hf_tol=1e-20)
        vmin = min(eng.delta(e)[0] for e in live)
        if vmin > 0:
            eng = _Engine(sigma, q, T, direction, cc, (a, b), vmin * mp.mpf(rtol), xdigits, hscale, wscale,
                          tmax_factor, hf_tol)
        ln = eng.line
        for e in live:
            v, dv, absn = eng.delta(e, deriv=True)
            out[e] = RefResult(float(v), v, direction, float(cc), eng.xr.K, len(ln.t), ln.t_max, ln.tail_est,
                               float(absn / abs(v)) if v != 0 else math.inf,
                               {"h": eng.xr.h, "panels": ln.panels, "rejected": ln.rejected,
                                "slope": float(dv),
                                "x_dropped": float(eng.xr.dropped)})
    res = []
    for e in eps_list:
        if e in out:
            res.append(out[e])
        else:  # the add loss is <= -log(1 - q) per step: delta is exactly 0 above T (-log(1 - q))
            res.append(RefResult(0.0, mp.mpf(0), direction, 0.0, 0, 0, 0.0, 0.0, 0.0, {"reason": "exact 0"}))
    return res


def delta_ref(eps, sigma, q, T, direction="remove", **kw) -> RefResult:
    """Reference delta_T(eps) (one direction): :func:`deltas_ref` at one point."""
    return deltas_ref([eps], sigma, q, T, direction, **kw)[0]


def _root_on(eng: _Engine, delta, a, b, x0):
    """Safeguarded Newton for delta(eps) = ``delta`` on [a, b] (delta decreasing); None if not bracketed."""
    with mp.workprec(PBITS + 64):
        a, b, x = mp.mpf(a), mp.mpf(b), mp.mpf(x0)
        fa = eng.delta(a)[0] - delta
        fb = eng.delta(b)[0] - delta
        if fa < 0:
            return None, "below"
        if fb > 0:
            return None, "above"
        if not a < x < b:
            x = (a + b) / 2
        for _ in range(200):
            v, dv, _ = eng.delta(x, deriv=True)
            f = v - delta
            if f > 0:
                a = x
            else:
                b = x
            xn = x - f / dv if dv < 0 else (a + b) / 2
            if not a < xn < b:
                xn = (a + b) / 2
            tiny = mp.mpf(10) ** -45
            if abs(xn - x) <= tiny * max(abs(x), mp.mpf(10) ** -30) or b - a <= tiny * abs(b):
                return xn, "ok"
            x = xn
        return x, "ok"


def eps_ref(delta, sigma, q, T, direction="remove", rtol=1e-25, c=None, xdigits=45, hscale=1.0, wscale=1.0,
            tmax_factor=1.0, eps_guess=None, refine_only=False, hf_tol=HF_TOL) -> RefResult:
    """Reference eps_T(delta) (one direction, eps >= 0): the root of delta_T(eps) = ``delta`` by safeguarded
    Newton on a cached line (delta_T is smooth and strictly decreasing where positive).  Round 0 plans one
    rough line (t-tolerance 1e-12 delta, x-rule 1e-30) for eps in [0, b], b the Chernoff bound (doubled
    until it brackets), and finds the root there; round 1 re-plans at that root (range +-2 %) at full
    accuracy (``refine_only``: round 1 only, from ``eps_guess``).

    The eps error is the delta error divided by |d delta / d eps| (``extra["slope"]``).
    """
    _check(sigma, q, T, direction)
    if not 0 < delta < 1:
        raise ValueError(f"delta must be in (0, 1), got {delta!r}")
    top = -T * math.log1p(-q) if direction == "add" else math.inf
    hist = []
    if refine_only:
        if eps_guess is None:
            raise ValueError("refine_only needs eps_guess")
        x = eps_guess
    else:  # round 0: one rough line for [0, b], b an upper bound (Chernoff), doubled until it brackets
        if eps_guess is None:  # the Chernoff bound can be very loose here: start from the Gaussian limit
            b = min(_eps_guess(delta, sigma, q, T, direction) / 0.9, 2.0 * _eps_gauss(delta, sigma, q, T))
        else:
            b = 2.0 * eps_guess
        b = min(b, 0.999 * top)
        for _ in range(30):
            a = b * 1e-6
            cc = c if c is not None else _choose_c(sigma, q, T, direction, b)
            eng = _Engine(sigma, q, T, direction, cc, (0.0, b), mp.mpf(delta) * mp.mpf(10) ** -12, 30,
                          hf_tol=1e-20)
            x, why = _root_on(eng, delta, a, b, 0.5 * b)
            hist.append((a, b, why))
            if why == "ok":
                break
            if why == "below":
                raise RuntimeError(f"eps below {a:.3g}: not supported")
            b = min(2.0 * b, 0.5 * (b + top)) if math.isfinite(top) else 2.0 * b
        else:
            raise RuntimeError(f"no bracket found: {hist}")
    e1 = float(x)
    for _ in range(3):  # round 1: re-plan at the root
        a, b = e1 * 0.98, min(e1 * 1.02, 0.5 * (e1 + top)) if math.isfinite(top) else e1 * 1.02
        cc = c if c is not None else _choose_c(sigma, q, T, direction, e1)
        eng = _Engine(sigma, q, T, direction, cc, (a, b), mp.mpf(delta) * mp.mpf(rtol), xdigits, hscale,
                      wscale, tmax_factor, hf_tol)
        x, why = _root_on(eng, delta, a, b, e1)
        hist.append((a, b, why))
        if why == "ok":
            break
        e1 = e1 * (0.9 if why == "below" else 1.1)
    else:
        raise RuntimeError(f"round 1 failed: {hist}")
    v, dv, absn = eng.delta(x, deriv=True)
    ln = eng.line
    return RefResult(float(x), x, direction, float(cc), eng.xr.K, len(ln.t), ln.t_max, ln.tail_est,
                     float(absn / abs(v)), {"h": eng.xr.h, "panels": ln.panels, "rejected": ln.rejected,
                                            "slope": float(dv), "delta_at_root": float(v), "rounds": hist,
                                            "eps_round0": float(e1), "x_dropped": float(eng.xr.dropped),
                                            "engine": eng, "plan": (a, b)})


def _eps_guess(delta, sigma, q, T, direction):
    """Chernoff-bound epsilon (an upper bound, via the float64 log-MGF) shrunk a little: a starting point."""
    best = math.inf
    c_hi = 1e5 if direction == "add" else 40.0 + 4 * sigma * sigma * math.log(1 / q)
    for c in np.geomspace(1e-2, c_hi, 80):
        lm, _, _ = _logm_float(sigma, q, direction, float(c))
        kappa = c * math.log(c) - (c + 1) * math.log1p(c)
        best = min(best, (T * lm + kappa - math.log(delta)) / c)
    g = max(best, 1e-12)
    return 0.9 * g


def _eps_gauss(delta, sigma, q, T):
    """eps of the mu-GDP profile with mu^2 = T q^2 (e^{1/s^2} - 1) (the central-limit Gaussian of T steps)."""
    from scipy import optimize, special

    mu = math.sqrt(T * math.expm1(1.0 / sigma**2)) * q

    def f(e):
        return special.ndtr(-e / mu + mu / 2) - math.exp(e) * special.ndtr(-e / mu - mu / 2) - delta

    if f(0.0) <= 0:
        return 1e-9
    hi = max(mu, 1e-9)
    while f(hi) > 0:
        hi *= 2
    return optimize.brentq(f, 0.0, hi, xtol=1e-15)


def eps_ref_max(delta, sigma, q, T, **kw) -> tuple[float, RefResult, RefResult]:
    """(max over the two directions, remove result, add result)."""
    r = eps_ref(delta, sigma, q, T, "remove", **kw)
    a = eps_ref(delta, sigma, q, T, "add", **kw)
    return max(r.value, a.value), r, a


def log_mgf(s, sigma, q, direction="remove", c=None, xdigits=45) -> mp.mpc:
    """log M(s) by the x-rule (line Re s used for the rule unless ``c`` is given)."""
    _check(sigma, q, 1, direction)
    s = mp.mpc(s)
    xr = _XRule(sigma, q, direction, float(s.real) if c is None else c, xdigits)
    with mp.workprec(PBITS + 64):
        return mp.log(xr.mgf_direct(s))


def remove_mgf_integer(lam: int, sigma, q) -> mp.mpf:
    """Closed form E_Q[(p/q)^lam] = M_remove(lam - 1) = sum_k C(lam, k) (1-q)^{lam-k} q^k e^{k(k-1)/(2 s^2)}
    (binomial expansion of (1 - q + q e^Y)^lam, E_Q[e^{kY}] = e^{k(k-1)/(2 s^2)}; Mironov, Talwar, Zhang
    2019, Rényi differential privacy of the sampled Gaussian mechanism)."""
    with mp.workdps(DPS):
        s2 = mp.mpf(sigma) ** 2
        qq = mp.mpf(q)
        return mp.fsum(mp.binomial(lam, k) * (1 - qq) ** (lam - k) * qq ** k * mp.exp(k * (k - 1) / (2 * s2))
                       for k in range(lam + 1))


def delta_T1_closed(eps, sigma, q, direction="remove") -> mp.mpf:
    """Exact one-step delta_1(eps) (normal CDFs at the loss threshold x*: L(x) > eps  <=>  x > x*).

    remove: P(L > e) - e^e Q(L > e) = q Phi((1 - x*)/s) - (e^e - 1 + q) Phi(-x*/s),
    x* = s^2 log((e^e - 1 + q)/q) + 1/2, and 1 - e^e for e^e <= 1 - q (L > e everywhere);
    add (loss -L > e  <=>  x < x*(-e)): Phi(x*/s)(1 - e^e (1 - q)) - e^e q Phi((x* - 1)/s), 0 for
    e >= -log(1 - q).
    """
    with mp.workdps(DPS):
        e, s, qq = mp.mpf(eps), mp.mpf(sigma), mp.mpf(q)
        if direction == "remove":
            r = mp.expm1(e) + qq
            if r <= 0:
                return -mp.expm1(e)
            xs = s * s * mp.log(r / qq) + mp.mpf(1) / 2
            return max(mp.mpf(0), qq * mp.ncdf((1 - xs) / s) - r * mp.ncdf(-xs / s))
        r = mp.expm1(-e) + qq
        if r <= 0:
            return mp.mpf(0)
        xs = s * s * mp.log(r / qq) + mp.mpf(1) / 2
        r = mp.ncdf(xs / s) * (1 - mp.exp(e) * (1 - qq)) - mp.exp(e) * qq * mp.ncdf((xs - 1) / s)
        return max(mp.mpf(0), r)
