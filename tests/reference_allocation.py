"""Independent exact references for random k-out-of-t allocation with Gaussian steps (tiny t).

Nothing here imports from ``accountant/``, ``mechanisms/`` or ``conversions/``.

The attaining datasets (the other records with zero gradient, the record with gradient +C) give, in
units of the noise (mu = C / sigma), the pair

    P = (1 / C(t, k)) sum_{|S| = k} N(mu 1_S, I_t)      (record present),    Q = N(0, I_t).

With X_j = exp(mu z_j - mu^2 / 2) (z ~ Q) the likelihood ratio is L = P / Q = e_k(X) / C(t, k), e_k the
k-th elementary symmetric polynomial.  More generally any "product of group means" pair (the composed
pair of the reduction, one step drawn uniformly in each of several disjoint groups) has a likelihood
ratio that is a multilinear polynomial in X_1, ..., X_t; everything below only uses that.

* ``log_moment_exact(t, k, mu, a)``: log E_Q[L^a] for integer a >= 1, exactly: e_k(X)^a is expanded by
  dynamic programming over the count vectors c (c_j = how many of the a factors use step j; exact
  integer multiplicities) and E_Q[prod X_j^{c_j}] = exp(mu^2 sum_j c_j (c_j - 1) / 2); summed in mpmath.
  This is (a - 1) D_a(P || Q), the remove direction.
* ``hockey_stick(lr, t, mu, eps, direction)``: delta(eps) = E_Q[(L - e^eps)_+] (remove) or
  E_Q[(1 - e^eps L)_+] (add).  L = A + B X_t is affine in the last coordinate, so the inner expectation
  over z_t is a closed form (call/put prices of a log-normal: E[(X - c)_+] = Phi(mu - z_c) - c Phi(-z_c),
  E[(c - X)_+] = c Phi(z_c) - Phi(z_c - mu), z_c = (log c + mu^2 / 2) / mu); the outer (t - 1)-dimensional
  expectation of this smooth function is a trapezoid sum in z (Gaussian weight), whose step is halved
  until two successive values agree (the difference is returned as the error estimate).
* ``add_log_moment(lr, t, mu, beta)``: log E_Q[L^-beta] (= beta D_{1+beta}(Q || P), the add direction) by
  the t-dimensional trapezoid rule, same step-halving control.  The integrand is analytic in the strip
  |Im z_j| < pi / (2 k mu) (Re e_k > 0 there), so the rule converges geometrically.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import mpmath as mp
import numpy as np
from scipy.special import log_ndtr, ndtr

__all__ = ["log_moment_exact", "allocation_lr", "groups_lr", "hockey_stick", "add_log_moment"]


def log_moment_exact(t: int, k: int, mu, a: int):
    """log E_Q[(e_k(X) / C(t, k))^a] (mpmath, exact up to the working precision)."""
    subsets = list(itertools.combinations(range(t), k))
    states: dict[tuple[int, ...], int] = {tuple([0] * t): 1}
    for _ in range(a):
        nxt: dict[tuple[int, ...], int] = defaultdict(int)
        for c, n in states.items():
            for s in subsets:
                cc = list(c)
                for j in s:
                    cc[j] += 1
                nxt[tuple(cc)] += n
        states = nxt
    mu2 = mp.mpf(mu) ** 2
    tot = mp.fsum(n * mp.exp(mu2 * sum(cj * (cj - 1) for cj in c) / 2) for c, n in states.items())
    return mp.log(tot) - a * mp.log(math.comb(t, k))


def _esym(x: np.ndarray, k: int) -> np.ndarray:
    """e_k of the last axis of x (recursion e_j <- e_j + x_i e_{j-1})."""
    e = [np.ones(x.shape[:-1])] + [np.zeros(x.shape[:-1]) for _ in range(k)]
    for i in range(x.shape[-1]):
        xi = x[..., i]
        for j in range(k, 0, -1):
            e[j] = e[j] + xi * e[j - 1]
    return e[k]


def allocation_lr(t: int, k: int):
    """L(x) = e_k(x) / C(t, k) for the k-out-of-t pair."""
    c = math.comb(t, k)
    return lambda x: _esym(x, k) / c


def groups_lr(sizes: list[int]):
    """L(x) = prod_g mean(x over group g) for the composition of 1-out-of-|g| allocations over
    consecutive disjoint groups (the reduction's pair)."""
    def lr(x):
        out = np.ones(x.shape[:-1])
        i = 0
        for s in sizes:
            out = out * x[..., i:i + s].mean(axis=-1)
            i += s
        return out
    return lr


def _grid(h: float, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    n = int(math.ceil((hi - lo) / h))
    z = np.linspace(lo, hi, n + 1)
    hh = (hi - lo) / n
    w = np.full(n + 1, hh) * np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    w[0] *= 0.5
    w[-1] *= 0.5
    return z, w


def _call(c: np.ndarray, mu: float) -> np.ndarray:
    """E[(X - c)_+], X = exp(mu Z - mu^2/2)."""
    out = 1.0 - c
    pos = c > 0
    zc = (np.log(np.where(pos, c, 1.0)) + mu * mu / 2) / mu
    out = np.where(pos, ndtr(mu - zc) - np.where(pos, c, 0.0) * ndtr(-zc), out)
    return out


def _put(c: np.ndarray, mu: float) -> np.ndarray:
    """E[(c - X)_+] (0 for c <= 0)."""
    pos = c > 0
    cc = np.where(pos, c, 1.0)
    zc = (np.log(cc) + mu * mu / 2) / mu
    val = cc * np.exp(log_ndtr(zc)) - np.exp(log_ndtr(zc - mu))
    return np.where(pos, np.maximum(val, 0.0), 0.0)


def _hs_once(lr, t: int, mu: float, eps: float, direction: str, h: float, half: float) -> float:
    z, w = _grid(h, -half, half)
    x = np.exp(mu * z - mu * mu / 2)
    a = math.exp(eps)
    tot = 0.0
    d = t - 1
    # loop over the first coordinate, vectorise the remaining d - 1 (<= 3 dimensions in use)
    rest = np.stack(np.meshgrid(*([x] * (d - 1)), indexing="ij"), axis=-1).reshape(-1, d - 1) \
        if d > 1 else np.zeros((1, 0))
    wrest = np.ones(1)
    for _ in range(d - 1):
        wrest = np.multiply.outer(wrest, w).reshape(-1)
    for x1, w1 in zip(x, w, strict=True):
        base = np.concatenate([np.full((rest.shape[0], 1), x1), rest], axis=1)
        zero = np.concatenate([base, np.zeros((base.shape[0], 1))], axis=1)
        one = np.concatenate([base, np.ones((base.shape[0], 1))], axis=1)
        aa = lr(zero)
        bb = lr(one) - aa
        if direction == "remove":
            val = np.where(bb > 0, bb * _call((a - aa) / np.where(bb > 0, bb, 1.0), mu),
                           np.maximum(aa - a, 0.0))
        else:
            val = np.where(bb > 0, a * bb * _put((1.0 - a * aa) / np.where(bb > 0, a * bb, 1.0), mu),
                           np.maximum(1.0 - a * aa, 0.0))
        tot += w1 * float(np.dot(wrest, val))
    return tot


def hockey_stick(lr, t: int, mu: float, eps: float, direction: str = "remove",
                 h0: float = 0.2, tol: float = 1e-9, hmin: float = 0.02) -> tuple[float, float]:
    """(delta(eps), error estimate) of the pair with likelihood ratio ``lr`` (t >= 2 dimensions)."""
    half = 9.0 + 2.0 * mu
    prev = _hs_once(lr, t, mu, eps, direction, h0, half)
    h = h0
    while True:
        h /= 2
        cur = _hs_once(lr, t, mu, eps, direction, h, half)
        err = abs(cur - prev)
        if err <= tol * max(cur, 1e-300) or h / 2 < hmin:
            return cur, err
        prev = cur


def _add_once(lr, t: int, mu: float, beta: float, h: float, k: int) -> float:
    lo, hi = -10.0 - beta * k * mu, 10.0 + mu
    z, w = _grid(h, lo, hi)
    x = np.exp(mu * z - mu * mu / 2)
    lw = np.log(w)
    # log-sum-exp over the t-dimensional grid, first coordinate looped
    rest = np.stack(np.meshgrid(*([x] * (t - 1)), indexing="ij"), axis=-1).reshape(-1, t - 1)
    lrest = np.zeros(1)
    for _ in range(t - 1):
        lrest = np.add.outer(lrest, lw).reshape(-1)
    terms = []
    for x1, l1 in zip(x, lw, strict=True):
        pts = np.concatenate([np.full((rest.shape[0], 1), x1), rest], axis=1)
        v = l1 + lrest - beta * np.log(lr(pts))
        m = float(v.max())
        terms.append(m + math.log(float(np.exp(v - m).sum())))
    terms = np.array(terms)
    m = float(terms.max())
    return m + math.log(float(np.exp(terms - m).sum()))


def add_log_moment(lr, t: int, mu: float, beta: float, k: int, h0: float = 0.4,
                   tol: float = 1e-10) -> tuple[float, float]:
    """(log E_Q[L^-beta], error estimate) by the t-dimensional trapezoid rule (step halving)."""
    prev = _add_once(lr, t, mu, beta, h0, k)
    h = h0
    while True:
        h /= 2
        cur = _add_once(lr, t, mu, beta, h, k)
        err = abs(cur - prev)
        if err <= tol or h < 0.05:
            return cur, err
        prev = cur
