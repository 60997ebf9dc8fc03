"""Independent brute-force references for batch sampling (fixed-size batches, balls-in-bins, shuffling).

Nothing here imports from ``accountant/``, ``mechanisms/`` or ``conversions/``.

A *dataset* is a list of scalar clipped gradients g_i in [-1, 1] (one coordinate suffices for the
worst cases of linear queries); one DP-SGD step releases the batch sum plus N(0, s^2) noise.  The output
law of a sampler is a finite Gaussian mixture, obtained by enumerating every batch assignment:

* fixed-size batches (sampling without replacement): every b-subset, weight 1 / C(n, b);
* balls-in-bins (random allocation, one epoch): every map records -> steps, weight t^-n;
* shuffling (random permutation, then t consecutive batches of size b): every permutation, weight 1/n!.

Exact hockey-stick divergences H_a(P || Q) = int (p - a q)_+ of one-dimensional mixtures are computed in
mpmath: the set {p > a q} is a finite union of intervals whose end points are found by bracketing on a
fine grid and refined by ``mp.findroot`` (bisection), and its masses are normal-CDF differences (closed
form).  Two-dimensional mixtures (t = 2 steps) are integrated as int dx_1 H_a(p(x_1, .) || q(x_1, .))
with the inner part exact (the same routine, weights depending on x_1) and the outer part by
``mp.quad``.  Integer-order Renyi moments E_Q[(P/Q)^k] of a mixture P against a single Gaussian Q are
closed forms (expansion of the k-th power: sums of exp(<m_i, m_j> / s^2) over k-tuples of components).
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import mpmath as mp

__all__ = ["Mixture", "hs1", "hs2", "hs2_float", "delta1", "wor_mixture", "wor_pair_add_remove",
           "wor_pair_replace_one", "bnb_mixture", "shuffle_mixture", "renyi_moment_vs_gaussian",
           "eps_from_delta_fn"]


class Mixture:
    """A finite mixture of N(mean, s^2 I) in d dimensions: {mean tuple: weight} (weights are mpf)."""

    def __init__(self, comps: dict, s):
        self.comps = {tuple(mp.mpf(c) for c in k): mp.mpf(w) for k, w in comps.items()}
        self.s = mp.mpf(s)
        tot = sum(self.comps.values())
        if abs(tot - 1) > mp.mpf(10) ** (-mp.mp.dps + 5):
            raise ValueError(f"weights sum to {tot}")

    @property
    def dim(self) -> int:
        return len(next(iter(self.comps)))

    def pdf(self, x):
        s = self.s
        tot = mp.mpf(0)
        for m, w in self.comps.items():
            d2 = sum((xi - mi) ** 2 for xi, mi in zip(x, m, strict=True))
            tot += w * mp.exp(-d2 / (2 * s * s))
        return tot / (mp.sqrt(2 * mp.pi) * s) ** len(x)


def _merge(items) -> dict:
    out: dict = defaultdict(lambda: mp.mpf(0))
    for m, w in items:
        out[m] += w
    return dict(out)


def _mass_1d(comps, s, intervals):
    tot = mp.mpf(0)
    for a, b in intervals:
        for m, w in comps:
            tot += w * (mp.ncdf((b - m) / s) - mp.ncdf((a - m) / s))
    return tot


def _bisect(f, a, b, it=None):
    """Root of f in [a, b] (f(a), f(b) of opposite signs) by bisection to the working precision."""
    fa = f(a) > 0
    it = it or int(mp.mp.prec + 20)
    for _ in range(it):
        m = (a + b) / 2
        if (f(m) > 0) == fa:
            a = m
        else:
            b = m
    return (a + b) / 2


def _positive_intervals(f, lo, hi, n=1200, max_changes=None):
    """Intervals where f > 0, f continuous with at most ``max_changes`` sign changes on the real line.

    Grid bracketing on [lo, hi] (outside it the sign is that of the end points), then bisection of every
    bracket.  Two zeros closer than a grid step would be missed; the grid step (< 0.05 s for the ranges
    used here) is far below the separation of zeros of these mixtures.
    """
    xs = [lo + (hi - lo) * i / n for i in range(n + 1)]
    pos = [f(x) > 0 for x in xs]
    brackets = [(xs[i], xs[i + 1]) for i in range(n) if pos[i] != pos[i + 1]]
    if max_changes is not None and len(brackets) > max_changes:
        raise ArithmeticError("more sign changes than the coefficients allow (precision too low?)")
    pts = [mp.ninf] + [_bisect(f, a, b) for a, b in brackets] + [mp.inf]
    out = []
    inside = pos[0]
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        if inside:
            out.append((a, b))
        inside = not inside
    return out


def _hs_1d_comps(pc, qc, s, alpha, lo=None, hi=None, grid=1200):
    """H_alpha of two 1-D mixtures given as lists of (mean, weight) with common s."""
    alpha = mp.mpf(alpha)
    means = [m for m, _ in pc] + [m for m, _ in qc]
    lo = min(means) - 12 * s - 4 if lo is None else lo
    hi = max(means) + 12 * s + 4 if hi is None else hi

    # p - alpha q = sum_k c_k phi(x - m_k): the Gaussian kernel is totally positive, so the number of
    # real zeros is at most the number of sign changes of the coefficients ordered by mean
    coef: dict = defaultdict(lambda: mp.mpf(0))
    for m, w in pc:
        coef[m] += w
    for m, w in qc:
        coef[m] -= alpha * w
    signs = [c > 0 for _, c in sorted(coef.items()) if c != 0]
    changes = sum(1 for u, v in zip(signs[:-1], signs[1:], strict=True) if u != v)
    terms = [(m, c) for m, c in coef.items() if c != 0]
    if not terms:
        return mp.mpf(0)
    if changes == 0:
        return max(mp.mpf(0), sum(c for _, c in terms))

    def f(x):  # sign of p - alpha q (log-scaled by the largest term to avoid underflow)
        lg = [(-(x - m) ** 2 / (2 * s * s), c) for m, c in terms]
        top = max(v for v, _ in lg)
        return sum(c * mp.exp(v - top) for v, c in lg)

    iv = _positive_intervals(f, lo, hi, n=grid, max_changes=changes)
    return max(mp.mpf(0), _mass_1d(pc, s, iv) - alpha * _mass_1d(qc, s, iv))


def hs1(P: Mixture, Q: Mixture, alpha):
    """Exact H_alpha(P || Q) = sup_A P(A) - alpha Q(A) for one-dimensional mixtures (alpha >= 0)."""
    if P.dim != 1 or Q.dim != 1:
        raise ValueError("hs1 needs one-dimensional mixtures")
    return _hs_1d_comps([(m[0], w) for m, w in P.comps.items()], [(m[0], w) for m, w in Q.comps.items()],
                        P.s, alpha)


def hs2(P: Mixture, Q: Mixture, alpha):
    """H_alpha(P || Q) for two-dimensional mixtures: outer mp.quad over x_1, inner part exact."""
    if P.dim != 2 or Q.dim != 2:
        raise ValueError("hs2 needs two-dimensional mixtures")
    s = P.s

    def inner(x1):
        pc = [(m[1], w * mp.npdf(x1, m[0], s)) for m, w in P.comps.items()]
        qc = [(m[1], w * mp.npdf(x1, m[0], s)) for m, w in Q.comps.items()]
        return _hs_1d_comps(pc, qc, s, alpha, grid=240)

    c1 = sorted({m[0] for m in P.comps} | {m[0] for m in Q.comps})
    lo, hi = c1[0] - 10 * s - 3, c1[-1] + 10 * s + 3
    pts = [lo] + [c for c in c1] + [hi]
    return mp.quad(inner, pts)


def delta1(P: Mixture, Q: Mixture, eps):
    """delta(eps) = H_{e^eps}(P || Q) for 1-D (exact) or 2-D (quadrature) mixtures."""
    a = mp.e ** mp.mpf(eps)
    return hs1(P, Q, a) if P.dim == 1 else hs2(P, Q, a)


def eps_from_delta_fn(dfn, delta, hi=50.0):
    """Smallest eps >= 0 with dfn(eps) <= delta (bisection; dfn non-increasing)."""
    lo_e, hi_e = mp.mpf(0), mp.mpf(hi)
    if dfn(lo_e) <= delta:
        return mp.mpf(0)
    for _ in range(60):
        mid = (lo_e + hi_e) / 2
        if dfn(mid) <= delta:
            hi_e = mid
        else:
            lo_e = mid
    return hi_e


# ---------------------------------------------------------------------------------------------- samplers
def wor_mixture(grads, b, s) -> Mixture:
    """One step on a uniformly random b-subset (sampling without replacement): sum + N(0, s^2)."""
    n = len(grads)
    subsets = list(itertools.combinations(range(n), b))
    w = mp.mpf(1) / len(subsets)
    return Mixture(_merge(((mp.mpf(sum(grads[i] for i in c)),), w) for c in subsets), s)


def wor_pair_add_remove(others, x, b, s):
    """(M(D), M(D')) for D = others + [x] (n records) and D' = others (n - 1 records), batch size b."""
    return wor_mixture(list(others) + [x], b, s), wor_mixture(list(others), b, s)


def wor_pair_replace_one(others, x, xp, b, s):
    """(M(D), M(D')) for D = others + [x], D' = others + [x'] (same size n), batch size b."""
    return wor_mixture(list(others) + [x], b, s), wor_mixture(list(others) + [xp], b, s)


def bnb_mixture(grads, t, s) -> Mixture:
    """One epoch of balls-in-bins: every record to a uniform step in [t], independently; t-dim output."""
    n = len(grads)
    w = mp.mpf(1) / mp.mpf(t) ** n
    items = []
    for assign in itertools.product(range(t), repeat=n):
        sums = [mp.mpf(0)] * t
        for i, a in enumerate(assign):
            sums[a] += grads[i]
        items.append((tuple(sums), w))
    return Mixture(_merge(items), s)


def shuffle_mixture(grads, t, s) -> Mixture:
    """One epoch of shuffling: a uniform permutation, then t consecutive batches of n / t records."""
    n = len(grads)
    if n % t:
        raise ValueError("n must be a multiple of t")
    b = n // t
    perms = list(itertools.permutations(range(n)))
    w = mp.mpf(1) / len(perms)
    items = []
    for p in perms:
        sums = tuple(mp.mpf(sum(grads[p[j * b + i]] for i in range(b))) for j in range(t))
        items.append((sums, w))
    return Mixture(_merge(items), s)


def renyi_moment_vs_gaussian(P: Mixture, k: int):
    """E_Q[(P/Q)^k] for Q = N(0, s^2 I) and integer k >= 1 (closed form over k-tuples of components)."""
    s2 = P.s ** 2
    comps = list(P.comps.items())
    tot = mp.mpf(0)
    for tup in itertools.product(range(len(comps)), repeat=k):
        w = mp.mpf(1)
        expo = mp.mpf(0)
        for i in tup:
            w *= comps[i][1]
        for a in range(k):
            for c in range(a + 1, k):
                ma, mc = comps[tup[a]][0], comps[tup[c]][0]
                expo += sum(u * v for u, v in zip(ma, mc, strict=True))
        tot += w * mp.exp(expo / s2)
    return tot



# ---------------------------------------------------------------------------------------------- float64
def _hs_1d_float(pc, qc, s, alpha, grid=200):
    """Float64 version of the exact 1-D hockey-stick divergence (brentq roots, ndtr masses)."""
    import numpy as np
    from scipy.optimize import brentq
    from scipy.special import ndtr

    coef: dict = defaultdict(float)
    for m, w in pc:
        coef[float(m)] += float(w)
    for m, w in qc:
        coef[float(m)] -= float(alpha) * float(w)
    terms = [(m, c) for m, c in coef.items() if c != 0.0]
    if not terms:
        return 0.0
    ms = np.array([m for m, _ in terms])
    cs = np.array([c for _, c in terms])

    def f(x):
        lg = -((x - ms) ** 2) / (2 * s * s)
        return float(np.sum(cs * np.exp(lg - lg.max())))

    lo, hi = ms.min() - 12 * s - 4, ms.max() + 12 * s + 4
    xs = np.linspace(lo, hi, grid + 1)
    lg = -((xs[:, None] - ms[None, :]) ** 2) / (2 * s * s)
    pos = list(np.sum(cs[None, :] * np.exp(lg - lg.max(axis=1, keepdims=True)), axis=1) > 0)
    pts = [-np.inf] + [brentq(f, xs[i], xs[i + 1], xtol=1e-14, rtol=1e-15)
                       for i in range(grid) if pos[i] != pos[i + 1]] + [np.inf]
    tot, inside = 0.0, pos[0]
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        if inside:
            for m, c in terms:
                tot += c * (ndtr((b - m) / s) - ndtr((a - m) / s))
        inside = not inside
    return max(tot, 0.0)


def hs2_float(P: Mixture, Q: Mixture, alpha) -> float:
    """H_alpha(P || Q) for 2-D mixtures in float64: outer scipy quad, inner part exact (1e-10 relative)."""
    import numpy as np
    from scipy.integrate import quad

    s = float(P.s)
    pcs = [((float(m[0]), float(m[1])), float(w)) for m, w in P.comps.items()]
    qcs = [((float(m[0]), float(m[1])), float(w)) for m, w in Q.comps.items()]

    def inner(x1):
        g = lambda m0: math.exp(-((x1 - m0) ** 2) / (2 * s * s)) / (math.sqrt(2 * math.pi) * s)  # noqa: E731
        return _hs_1d_float([(m[1], w * g(m[0])) for m, w in pcs], [(m[1], w * g(m[0])) for m, w in qcs],
                            s, float(alpha))

    c1 = sorted({m[0] for m, _ in pcs} | {m[0] for m, _ in qcs})
    pts = [c1[0] - 10 * s - 3] + c1 + [c1[-1] + 10 * s + 3]
    tot = 0.0
    for a, b in zip(pts[:-1], pts[1:], strict=True):
        if b > a:
            tot += quad(inner, a, b, epsabs=1e-14, epsrel=1e-12, limit=200)[0]
    return float(np.float64(tot))
