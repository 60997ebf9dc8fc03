"""Discretised PLD (:mod:`conversions.pld`), part 2: 64-cell blocks of the step vectors, their certified
log-MGFs (Chernoff tails of the composed vector) and the saddle-point tilt.

See the docstring of :mod:`conversions.pld` for how these enter the certified bracket.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from .pld_grid import _BLOCK, U, _lse, _Step


def _blocks(st: _Step, step: float):
    """64-cell blocks for rigorous cheap MGF bounds: (masses, bottom y, top y, mean y, h, merr).

    For the block's masses on [a, b] with mean mu, E[e^{c Y}; block] <= M_b min(e^{c top}, e^{c mu +
    c^2 h}) with h = (b - a)^2 / 8 (Hoeffding's lemma; top = b for c >= 0, a for c < 0).  The mean is
    computed in floating point: |mu - mu_float| <= merr (a generous 1e-13 relative margin), and it
    enters as + |c| merr.  The mean form keeps the location of T composed blocks exact (the top-edge
    form alone is off by up to T x 64 cells, which ruins windows and tilts when T is large and the
    losses are small).
    """
    n = st.n
    nb = -(-n // _BLOCK)
    pad = np.zeros(nb * _BLOCK)
    pad[:n] = st.m
    first = st.lo + np.arange(nb) * _BLOCK
    ylo = first * step
    yhi = np.minimum(first + _BLOCK - 1, st.lo + n - 1) * step
    pm = pad.reshape(nb, _BLOCK)
    raw = pm.sum(axis=1)
    bm = raw * (1.0 + _BLOCK * U)
    off = np.arange(_BLOCK) * step  # y_i - ylo_b (exact multiples of the lattice step)
    with np.errstate(invalid="ignore", divide="ignore"):
        mo = (pm @ off) / raw
        mo2 = (pm @ (off * off)) / raw
    mo = np.where(raw > 0, mo, 0.0)
    mu = np.clip(ylo + mo, ylo, yhi)
    var = np.where(raw > 0, np.maximum(mo2 - mo * mo, 0.0), 0.0)
    h = (yhi - ylo) ** 2 / 8.0
    merr = 1e-13 * np.maximum(np.abs(ylo), np.abs(yhi)) + 1e-300
    return bm, ylo, yhi, mu, h, merr, var


def _log_mgf_blocks(blocks, t: float) -> float:
    """Upper bound on log sum_i m_i e^{t y_i} from the blocks (see ``_blocks``)."""
    bm, ylo, yhi, mu, h, merr, _ = blocks
    y = yhi if t >= 0 else ylo
    z = np.minimum(t * y, t * mu + t * t * h + abs(t) * merr)
    with np.errstate(divide="ignore"):
        return _lse(np.log(bm) + z) + 1e-12


def _kt_grid(blocks_list, ks, logms, cs: np.ndarray) -> np.ndarray:
    """sum_j k_j (log M_j(c) - logm_j) for every c in cs, upper bounds from the blocks (vectorised
    ``_log_mgf_blocks``)."""
    out = np.zeros(cs.size)
    cs = np.ascontiguousarray(cs, dtype=float)
    for (bm, ylo, yhi, mu, h, merr, _), k, lm in zip(blocks_list, ks, logms, strict=True):
        keep = bm > 0
        with np.errstate(divide="ignore"):
            lb = np.log(bm[keep])
        with np.errstate(invalid="ignore"):  # (inf - inf at extreme tilts: NaN, which the planners skip)
            out += k * (_kt_kernel(lb, ylo[keep], yhi[keep], mu[keep], h[keep], merr[keep], cs)
                         + 1e-12 - lm)
    return out


@njit(cache=True)
def _kt_kernel(lb, ylo, yhi, mu, h, merr, cs):  # pragma: no cover - compiled
    """log sum_b exp(lb_b + min(c y_b, c mu_b + c^2 h_b + |c| merr_b)) for each c (y_b = yhi_b for
    c >= 0, ylo_b below): two passes (max, then the sum).  The sequential sum of nb terms, each with an
    exp rounded by <= 2u, is within a relative 2 (nb + 4) u of the exact one: added to the log."""
    nb = lb.shape[0]
    out = np.empty(cs.shape[0])
    for i in range(cs.shape[0]):
        c = cs[i]
        ac = abs(c)
        mx = -np.inf
        for b in range(nb):
            y = yhi[b] if c >= 0 else ylo[b]
            z = min(c * y, c * mu[b] + c * c * h[b] + ac * merr[b])
            z += lb[b]
            if z > mx:
                mx = z
        acc = 0.0
        if mx == -np.inf:
            out[i] = -np.inf
            continue
        for b in range(nb):
            y = yhi[b] if c >= 0 else ylo[b]
            z = min(c * y, c * mu[b] + c * c * h[b] + ac * merr[b])
            acc += math.exp(z + lb[b] - mx)
        out[i] = mx + math.log(acc) + 2.0 * (nb + 4) * 1.1102230246251565e-16
    return out


def _tilt_moments(blocks_list, ks, theta: float) -> tuple[float, float]:
    """Mean and variance of the theta-tilted composed sum (block means and variances, the tilt applied
    per block: only to choose a tilt and a window)."""
    mean = var = 0.0
    for (bm, _, _, y, _, _, vb), k in zip(blocks_list, ks, strict=True):
        with np.errstate(divide="ignore", invalid="ignore"):  # (an infinite tilt: NaN moments, no tilt)
            lw = np.log(bm) + theta * y
            lw -= np.max(lw)
        w = np.exp(lw)
        w /= w.sum()
        mu = float(np.sum(w * y))
        mean += k * mu
        var += k * float(np.sum(w * ((y - mu) ** 2 + vb)))
    return mean, var


def _tilt_stats(blocks_list, ks, theta: float) -> tuple[float, float, float]:
    """(K(theta), mean, variance) of the composed sum under the theta-tilt, from the blocks' means
    (approximate: only to choose a tilt, a window and a starting estimate)."""
    log_k = mean = var = 0.0
    for (bm, _, _, y, _, _, vb), k in zip(blocks_list, ks, strict=True):
        with np.errstate(divide="ignore"):
            lw = np.log(bm) + theta * y
        mx = float(np.max(lw))
        w = np.exp(lw - mx)
        sw = float(w.sum())
        w /= sw
        mu = float(np.sum(w * y))
        log_k += k * (mx + math.log(sw))
        mean += k * mu
        var += k * float(np.sum(w * ((y - mu) ** 2 + vb)))
    return log_k, mean, var


def _sp_epsilon(blocks_list, ks, delta: float) -> float:
    """Saddle-point estimate of eps(delta) (nan if none): with theta the tilt, K, m, v as in
    ``_tilt_stats``, delta(m) ~ e^{K - theta m} / (theta (theta + 1) sqrt(2 pi v)) (the tilted sum taken
    as normal around its mean, f_eps integrated against it).  An estimate only: it places the window
    and the tilt of the certified passes, never a bound."""
    target = math.log(delta)

    def g(th: float) -> tuple[float, float]:
        log_k, m, v = _tilt_stats(blocks_list, ks, th)
        if not (v > 0 and math.isfinite(log_k)):
            return math.nan, m
        return log_k - th * m - math.log(th * (th + 1.0)) - 0.5 * math.log(2 * math.pi * v) - target, m

    lo, hi = 1e-3, 1.0
    glo, m_lo = g(lo)
    if not math.isfinite(glo) or glo <= 0:
        return math.nan
    ghi, m = g(hi)
    while ghi > 0 and hi < 1e7:
        lo, hi = hi, hi * 4.0
        ghi, m = g(hi)
    if not (ghi <= 0):
        return math.nan
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        gm, m = g(mid)
        if not math.isfinite(gm):
            return math.nan
        if gm > 0:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.001:
            break
    return max(m, 0.0)


def _saddle(blocks_list, ks, eps: float) -> float:
    """theta > 0 with K'(theta) = eps + 1/theta + 1/(theta + 1) (the tilt that centres E[f_eps(S)])."""

    def g(th: float) -> float:
        return _tilt_moments(blocks_list, ks, th)[0] - eps - 1.0 / th - 1.0 / (th + 1.0)

    lo, hi = 1e-3, 1.0
    if g(lo) > 0:
        return lo
    while g(hi) < 0 and hi < 1e4:
        lo, hi = hi, hi * 4
    if g(hi) < 0:
        return math.nan  # eps beyond the support: no saddle
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if g(mid) < 0:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.01:
            break
    return math.sqrt(lo * hi)
