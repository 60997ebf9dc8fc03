"""Noisy screening's atomic envelope pair (Zhu 2023 thesis, Def. 3.3.1, Lemma 3.3.3, Thm 3.3.4): the
vertices of the pass-probability envelope and their atoms, which give the cf / PLD routes a dominating
pair; derivation in docs/derivations/noisy-screening.md, used by :mod:`mechanisms.screening`."""

from __future__ import annotations

import math

import numpy as np
from scipy.special import log_ndtr

U = 2.0 ** -53


# --------------------------------------------------------------------------- the dominating pair
_ENV_CACHE: dict = {}
_ENV_CACHE_SIZE = 16
_LOG_TINY = -650.0  # leading / trailing atoms are merged until the end atoms have P-mass >= e^{-650}
PLD_RANGE_SIGMAS = 35.0  # envelope pair offered when |t - T| <= 35 sigma on the range of t (no tail merge)
_W_FLOOR = -36.0  # normal coordinate of the merged leading vertex (log Phi(-36) = -652.4)
_LOG_MIN_ATOM = -700.0  # every P-atom must have a normal (not subnormal) mass
_MERGE_ULPS = 1e6  # coordinates closer than this many ulps are merged (their interval masses lose digits)


def _envelope_vertices(sigma: float, threshold: float, t_min: int, t_max: int):
    """Vertices of the upper ROC envelope of all adjacent pairs, as normal coordinates (u, w) (docs/
    derivations/noisy-screening.md §5): the pair (Bern(pi(t + 1)), Bern(pi(t))) contributes the point
    (Phi(z_t), Phi(z_{t+1})) and the swapped pair the point (Phi(-z_{t+1}), Phi(-z_t)), z_t = (t - T) / sigma.
    All lie on the Gaussian trade-off curve w = Phi(u + 1/sigma), so every point is a vertex.

    Floating point: the vertices are sorted by their computed u (fl is monotone, so the order agrees
    with the exact one up to ties), u is rounded down and w up by the rounding of z, the far tails are
    cut (below) and nearly coincident vertices i, i+1 are merged into (u_i, w_{i+1}) (which dominates
    both): every true vertex is dominated (u' <= u, w' >= w) by a returned one, so the pair built on them
    dominates the envelope."""
    n = t_max - t_min
    t = np.arange(t_min, t_max, dtype=float)
    za = (t - threshold) / sigma  # z_t
    zb = (t + 1.0 - threshold) / sigma  # z_{t+1}
    u = np.concatenate([za, -zb])
    w = np.concatenate([zb, -za])
    order = np.argsort(u, kind="stable")
    u, w = u[order], w[order]
    if n == 0:
        return u, w
    # outward rounding of the coordinates (z = (t - T) / sigma carries <= 2 ulps)
    u = u - 4.0 * U * np.abs(u) - 1e-300
    w = w + 4.0 * U * np.abs(w) + 1e-300
    # trailing vertices with a P-tail 1 - Phi(w) below e^{-650}: replaced by (u_j1, +inf) at the first such
    # vertex j1 (it dominates them all); the atom after it then has P-mass 0 (its Q-mass is P-null, which
    # only a set S containing it could use, at a cost), so every P-atom keeps a representable mass.
    # (Done before the merging below, which then runs on the few thousand vertices that matter.)
    tail = np.asarray(log_ndtr(-w), dtype=float)
    far = tail < _LOG_TINY
    if far.any():
        j1 = int(np.argmax(far))
        u = u[:j1 + 1]
        w = np.concatenate([w[:j1], [math.inf]])
    # leading vertices 0..j0-1 whose P-mass Phi(w) is below e^{-650}: replaced by the one vertex
    # (u_0, max(w_0..w_{j0-1}, -36)) (log Phi(-36) = -652.4), which dominates them all and costs at most
    # e^{-650} of P-mass (w is sorted with u up to rounding; the merging below absorbs any inversion)
    lw = np.asarray(log_ndtr(w), dtype=float)
    j0 = int(np.argmax(lw >= _LOG_TINY)) if (lw >= _LOG_TINY).any() else w.size
    if j0 > 0:
        w_first = max(float(np.max(w[:j0])), _W_FLOOR)
        u = np.concatenate([u[:1], u[j0:]])
        w = np.concatenate([[w_first], w[j0:]])
    # nearly coincident vertices i, i + 1 (closer than the merge gap in u or w, or w out of order) become
    # (u_i, max(w_i, w_{i+1}))
    keep_u, keep_w = [float(u[0])], [float(w[0])]
    for ui, wi in zip(u[1:].tolist(), w[1:].tolist(), strict=True):
        gap = _MERGE_ULPS * U * (1.0 + abs(ui))
        if ui - keep_u[-1] <= gap or wi - keep_w[-1] <= gap:
            keep_w[-1] = max(keep_w[-1], wi)  # (u_i, w_{i+1}) dominates both vertices
            continue
        keep_u.append(ui)
        keep_w.append(wi)
    u = np.array(keep_u)
    w = np.array(keep_w)
    return u, w


def _envelope_atoms(sigma: float, threshold: float, t_min: int, t_max: int):
    """(losses, P-masses, log-mass error) of the atomic dominating pair whose trade-off curve is the
    chordal interpolation of :func:`_envelope_vertices` (same for both directions: the family of pairs is
    closed under swapping).  Atom j has Q-mass Phi(u_{j+1}) - Phi(u_j) and P-mass Phi(w_{j+1}) - Phi(w_j)
    (u_0 = w_0 = -inf, u_{n+1} = w_{n+1} = inf), evaluated in log space
    (:func:`mechanisms._profile.log_normal_mass`); the losses are rounded up by their errors (larger losses
    with the same masses dominate), the masses' relative error is returned as the log-mass error."""
    key = (sigma, threshold, t_min, t_max)
    hit = _ENV_CACHE.get(key)
    if hit is not None:
        return hit
    from ._profile import log_normal_mass

    if t_max == t_min:
        out = (np.array([0.0]), np.array([1.0]), 0.0)
    else:
        u, w = _envelope_vertices(sigma, threshold, t_min, t_max)
        ue = np.concatenate([[-math.inf], u, [math.inf]])
        we = np.concatenate([[-math.inf], w, [math.inf]])
        lq = [log_normal_mass(a, b) for a, b in zip(ue[:-1].tolist(), ue[1:].tolist(), strict=True)]
        lp = [log_normal_mass(a, b) for a, b in zip(we[:-1].tolist(), we[1:].tolist(), strict=True)]
        lpv = np.array([v for v, _ in lp])
        lqv = np.array([v for v, _ in lq])
        err_p = np.array([e for _, e in lp])
        err_q = np.array([e for _, e in lq])
        keep = np.isfinite(lpv)  # the dropped atoms have P-mass exactly 0 (w_j = w_{j+1} = inf)
        ok = np.all(lpv[keep] > _LOG_MIN_ATOM) and np.all(np.isfinite(err_p[keep]) & np.isfinite(err_q[keep]))
        if not ok:
            raise ArithmeticError("noisy screening: an atom of the dominating pair is not representable "
                                  "(P-mass below e^-700 or all digits lost); use the RDP route")
        loss = lpv[keep] - lqv[keep]
        loss = np.nextafter(loss + (err_p[keep] + err_q[keep]) + 4.0 * U * (np.abs(loss) + 1.0), np.inf)
        mass = np.exp(lpv[keep])
        out = (loss, mass, float(np.max(err_p[keep])) + 4.0 * U)
    if len(_ENV_CACHE) >= _ENV_CACHE_SIZE:
        _ENV_CACHE.pop(next(iter(_ENV_CACHE)))
    _ENV_CACHE[key] = out
    return out
