"""Matrix-factorisation mechanisms (DP-FTRL, banded and tree factorisations) as one Gaussian release.

A matrix mechanism releases C X + Z for a stream X of n per-step contributions (rows clipped to L2 norm
``clip``), a strategy matrix C (m x n) and Z with i.i.d. N(0, sigma^2) entries (Denisov, McMahan, Rush,
Smith & Thakurta 2022; Choquette-Choo, McMahan, Rush & Thakurta 2023, "Multi-epoch matrix
factorization mechanisms for private machine learning").  A record that participates in the steps S
changes X by rows u_i (|u_i| <= clip, i in S), so C X changes by sum_{i in S} C_i u_i^T (C_i the columns)
with squared Frobenius norm sum_{i, j in S} G_ij <u_i, u_j>, G = C^T C.  The release is the Gaussian
mechanism with L2 sensitivity

    sens = clip * sqrt( max_{S allowed} max_{|u_i| <= 1} sum_{i,j in S} G_ij <u_i, u_j> ),

so it composes as ONE Gaussian of mu = sens / sigma (exact mu-GDP route through ``gdp_mu``;
add/remove or replace-one as the participation pattern is defined; ``MatrixMechanism`` delegates every
curve to ``Gaussian(sigma, sens)``).

Participation (Choquette-Choo et al. 2023, "b-min-sep"): at most k steps, any two at least b apart
(b = n, k = 1 is single participation).  The inner maximum is at most sum_{i,j in S} |G_ij| and equals
it when G_S >= 0 entrywise (all u_i equal); the outer maximum over S:

* b-banded C (G_ij = 0 whenever |i - j| >= b, checked on G): sens^2 = max over b-separated S, |S| <= k,
  of sum_{i in S} |C_i|^2 -- exact, by dynamic programming over the steps (O(n k));
* otherwise an upper bound by a separable relaxation: r_i = max over b-separated S' containing i of
  sum_{j in S'} |G_ij| (a DP per i), then max over b-separated S of sum_{i in S} r_i (O(n^2 k)).  A lower
  bound is the value of the maximising S itself; when they coincide and G_S >= 0 the sensitivity is
  exact and ``tight = True``.

TreeAggregation(sigma, steps, epochs=1, restart=True)
    The binary-tree (online) aggregation of DP-FTRL (Kairouz, McMahan, Song, Thakkar, Thakurta & Xu
    2021, App. D; Guha Thakurta & Smith 2013): every complete dyadic node (the sum over a block
    [j 2^l, (j + 1) 2^l) inside the n steps) gets N(0, sigma^2) noise; one contribution lies in at most
    depth = floor(log2 n) + 1 = ceil(log2(n + 1)) nodes (the first leaf attains it).  With ``restart`` a
    fresh tree of ``steps`` leaves per epoch and one participation per epoch: ``epochs`` independent
    Gaussians, mu^2 = epochs depth(steps) / sigma^2 (exact; epochs = 1 is dp-accounting's
    SingleEpochTreeAggregationDpEvent).  Without restart, one tree over steps x epochs leaves: G_ij =
    number of complete blocks containing both i and j, and the b-min-sep maximisation above (G >= 0;
    exact when the relaxation is attained; n <= 4096), or for larger trees the bound
    k depth + k (k - 1) (depth - ceil(log2(b + 1))) (leaves b apart share no block smaller than b + 1).

Amplification by sampling: these blocks assume every participation pattern allowed by (b, k) may occur
(no sampling randomness).  Cyclic Poisson sampling for a b-banded lower-triangular C (Choquette-Choo,
Ganesh, McKenna, McMahan, Rush, Guha Thakurta & Xu 2023, Sec. 5) is
:class:`mechanisms.banded_amplified.AmplifiedBandedMF`: ceil(n / b) Poisson-subsampled Gaussians with
the largest column norm.  Balls-in-bins sampling with a general C (Choquette-Choo et al. 2024, "Near
exact privacy amplification for matrix mechanisms") is NOT implemented: its published accounting is a
Monte Carlo estimate (a guarantee with high probability), not a certified bound.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from . import validation as V
from ._delegate import _Delegating
from .base import Mechanism, check
from .gaussian import Gaussian
from .registry import register

__all__ = ["MatrixMechanism", "TreeAggregation", "matrix_sensitivity", "MAX_COLUMNS"]

U = 2.0 ** -53
MAX_COLUMNS = 4096


@njit(cache=True)
def _best_separated(weights: np.ndarray, b: int, k: int) -> tuple[float, np.ndarray]:  # pragma: no cover
    """max sum_{i in S} w_i over S with |S| <= k and pairwise gaps >= b (w >= 0), and a maximiser.

    DP: best[i, j] = best value using positions <= i with j chosen; position i chosen implies the
    previous chosen position <= i - b.
    """
    n = weights.shape[0]
    best = np.zeros((n + 1, k + 1))  # best[i][j]: positions < i, at most j chosen
    take = np.zeros((n + 1, k + 1), dtype=np.bool_)
    for i in range(1, n + 1):
        for j in range(1, k + 1):
            skip = best[i - 1, j]
            prev = i - b
            cand = weights[i - 1] + (best[prev, j - 1] if prev >= 0 else 0.0)
            if prev < 0:
                cand = weights[i - 1]
            if cand > skip:
                best[i, j] = cand
                take[i, j] = True
            else:
                best[i, j] = skip
    # backtrack
    chosen = np.full(k, -1, dtype=np.int64)
    i, j, c = n, k, 0
    while i > 0 and j > 0:
        if take[i, j]:
            chosen[c] = i - 1
            c += 1
            i -= b
            j -= 1
            if i < 0:
                break
        else:
            i -= 1
    return best[n, k], chosen[:c]


@njit(cache=True)
def _best_separated_all(weights: np.ndarray, b: int, k: int) -> np.ndarray:  # pragma: no cover - compiled
    """[max sum_{i in S} w_i over b-separated S with |S| <= j for j = 0..k] (w >= 0)."""
    n = weights.shape[0]
    out = np.zeros(k + 1)
    if n == 0:
        return out
    best = np.zeros((n + 1, k + 1))
    for i in range(1, n + 1):
        for j in range(1, k + 1):
            prev = i - b
            cand = weights[i - 1] + (best[prev, j - 1] if prev >= 0 else 0.0)
            best[i, j] = max(best[i - 1, j], cand)
    for j in range(k + 1):
        out[j] = best[n, j]
    return out


@njit(cache=True)
def _row_relaxation(g_abs: np.ndarray, b: int, k: int) -> np.ndarray:  # pragma: no cover - compiled
    """r_i = max over b-separated S containing i, |S| <= k, of sum_{j in S} |G_ij| (per-row DP: the other
    points lie at <= i - b or >= i + b, each side b-separated)."""
    n = g_abs.shape[0]
    r = np.empty(n)
    for i in range(n):
        left = g_abs[i, : max(0, i - b + 1)].copy()
        right = g_abs[i, min(n, i + b):].copy()
        bl = _best_separated_all(left, b, k - 1)
        br_ = _best_separated_all(right, b, k - 1)
        top = 0.0
        for kl in range(k):
            v = bl[kl] + br_[k - 1 - kl]
            if v > top:
                top = v
        r[i] = g_abs[i, i] + top
    return r


def matrix_sensitivity(c, min_separation: int, max_participations: int) -> tuple[float, float, bool]:
    """(upper, lower, exact) bounds on max_S max_u |sum_{i in S} C_i u_i^T|_F^2 / clip^2 (the squared
    sensitivity per unit clip) for b-min-sep participation (module docstring); ``upper`` rounded up."""
    c = np.asarray(c, dtype=float)
    n = c.shape[1]
    b, k = int(min_separation), int(max_participations)
    g = c.T @ c
    g_abs = np.abs(g)
    gram_err = (c.shape[0] + 4.0) * U * np.sqrt(np.outer(np.diag(g), np.diag(g)))  # |dot| rounding
    idx = np.arange(n)
    far = np.abs(idx[:, None] - idx[None, :]) >= b
    # banded check on C itself (exact zero pattern): columns >= b apart have disjoint row supports
    supp = c != 0
    overlap = (supp.T.astype(np.int64) @ supp.astype(np.int64)) > 0
    banded = not np.any(overlap & far)
    if banded:
        diag = np.diag(g) + np.diag(gram_err)
        up, chosen = _best_separated(np.ascontiguousarray(diag), b, k)
        lo = float(np.sum(np.diag(g)[chosen]))
        return float(up) * (1.0 + 4 * U), lo, True
    ge = np.ascontiguousarray(g_abs + gram_err)
    r = _row_relaxation(ge, b, k)
    up, chosen = _best_separated(np.ascontiguousarray(r), b, k)
    sel = np.asarray(chosen, dtype=np.int64)
    lo_sub = g[np.ix_(sel, sel)]
    # a lower bound: all u_i equal (G_S >= 0) or mutually orthogonal (cross terms vanish)
    lo = float(np.sum(lo_sub)) if np.all(lo_sub >= 0) else float(np.sum(np.diag(lo_sub)))
    exact = bool(np.all(lo_sub >= 0)) and abs(float(up) - lo) <= 1e-9 * max(lo, 1e-300)
    return float(up) * (1.0 + (n + 8) * U), max(lo - float(np.sum(gram_err[np.ix_(sel, sel)])), 0.0), exact


@functools.lru_cache(maxsize=32)
def _cached_sensitivity(c_key: tuple, b: int, k: int) -> tuple[float, float, bool]:
    return matrix_sensitivity(np.array(c_key, dtype=float), b, k)


def _check_participation(n: int, participation) -> tuple[int, int]:
    if participation is None:
        return n, 1
    keys = {"min_separation", "max_participations"}
    if not isinstance(participation, dict) or not set(participation) <= keys:
        raise ValueError("participation must be a dict with keys 'min_separation' and 'max_participations'")
    b = V.integer("participation['min_separation']", participation.get("min_separation", n), low=1)
    k = V.integer("participation['max_participations']", participation.get("max_participations", 1), low=1,
                  high=n)
    return b, k


@register
@dataclass(frozen=True)
class MatrixMechanism(_Delegating):
    """C X + N(0, sigma^2) for a strategy matrix ``C`` (nested lists, m x n), as one Gaussian release.

    Parameters
    ----------
    C : list of lists of float
        Strategy (encoder) matrix, m rows, n <= 4096 columns (one per step).
    sigma : float
        Noise standard deviation per entry, > 0.
    participation : dict, optional
        ``{"min_separation": b, "max_participations": k}`` (default: single participation, b = n, k = 1).
    clip : float, default 1
        L2 bound on one step's contribution (a row of X).

    Notes
    -----
    ``sensitivity`` (module docstring) and ``sensitivity_exact``; ``gdp_mu`` = sensitivity / sigma.
    """

    C: list
    sigma: float
    participation: dict | None = None
    clip: float = 1.0

    name = "matrix_mechanism"
    field_checks = {"sigma": V.positive, "clip": V.positive}

    def __post_init__(self):
        super().__post_init__()
        c = self.C
        if not isinstance(c, (list, tuple)) or not c or not all(isinstance(r, (list, tuple)) for r in c):
            raise TypeError("C must be a non-empty list of rows (lists of numbers)")
        n = len(c[0])
        if not 1 <= n <= MAX_COLUMNS or any(len(r) != n for r in c):
            raise ValueError(f"C must be rectangular with 1..{MAX_COLUMNS} columns")
        arr = np.array(c, dtype=float)
        if not np.all(np.isfinite(arr)):
            raise ValueError("C must have finite entries")
        object.__setattr__(self, "C", [[float(x) for x in r] for r in c])
        p = None if self.participation is None else dict(self.participation)
        b, k = _check_participation(n, p)
        object.__setattr__(self, "participation", None if p is None else {"min_separation": b,
                                                                          "max_participations": k})
        if not np.any(arr != 0):
            raise ValueError("C must have a non-zero entry")

    def __hash__(self):
        p = self.participation
        return hash((self.name, tuple(tuple(r) for r in self.C), self.sigma, self.clip,
                     None if p is None else (p["min_separation"], p["max_participations"])))

    @property
    def _bk(self) -> tuple[int, int]:
        return _check_participation(len(self.C[0]), self.participation)

    @property
    def _sens(self) -> tuple[float, float, bool]:
        b, k = self._bk
        return _cached_sensitivity(tuple(tuple(r) for r in self.C), b, k)

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity of C X (an upper bound, rounded up; exact when ``sensitivity_exact``)."""
        return self.clip * math.sqrt(self._sens[0]) * (1.0 + 2 * U)

    @property
    def sensitivity_exact(self) -> bool:
        return self._sens[2]

    @property
    def tight(self) -> bool:  # type: ignore[override]
        return self.sensitivity_exact

    def _inner(self) -> Mechanism:
        return Gaussian(self.sigma, self.sensitivity)


def _tree_depth(n: int) -> int:
    """Most complete dyadic blocks of [0, n) containing one leaf: floor(log2 n) + 1."""
    return n.bit_length()


@njit(cache=True)
def _tree_gram(n: int, depth: int) -> np.ndarray:  # pragma: no cover - compiled
    """G_ij = number of complete dyadic blocks [j 2^l, (j+1) 2^l) within [0, n) containing leaves i and j."""
    g = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            c = 0
            for lev in range(depth):
                bi = i >> lev
                if bi == (j >> lev) and ((bi + 1) << lev) <= n:
                    c += 1
            g[i, j] = c
    return g


@register
@dataclass(frozen=True)
class TreeAggregation(_Delegating):
    """Binary-tree aggregation (DP-FTRL) with N(0, sigma^2) noise per node, as one Gaussian release.

    Parameters
    ----------
    sigma : float
        Noise standard deviation per node divided by the clip norm (the noise multiplier), > 0.
    steps : int
        Leaves per tree (steps per epoch), >= 1.
    epochs : int, default 1
        Number of passes; one participation per epoch.
    restart : bool, default True
        A fresh tree per epoch (then the epochs are independent Gaussians); False: one tree over all
        steps x epochs leaves.
    min_separation : int, optional
        Without restart: the least number of steps between two participations (default 1, the worst case
        for reshuffled epochs; ``steps`` for a fixed data order).
    """

    sigma: float
    steps: int
    epochs: int = 1
    restart: bool = True
    min_separation: int | None = None

    name = "tree_aggregation"
    field_checks = {"sigma": V.positive, "steps": check(V.integer, low=1, high=V.MAX_COUNT),
                    "epochs": check(V.integer, low=1, high=10**9)}

    def __post_init__(self):
        super().__post_init__()
        if not isinstance(self.restart, bool):
            raise TypeError(f"restart must be True or False, got {self.restart!r}")
        if self.min_separation is not None:
            b = V.integer("min_separation", self.min_separation, low=1)
            object.__setattr__(self, "min_separation", b)
            if self.restart:
                raise ValueError("min_separation applies only with restart=False")

    @functools.cached_property
    def _sens2(self) -> tuple[float, bool]:
        depth = _tree_depth(self.steps)
        if self.restart or self.epochs == 1:
            return float(self.epochs * depth) if self.restart else float(depth), True
        n = self.steps * self.epochs
        depth = _tree_depth(n)
        b = self.min_separation or 1
        k = self.epochs
        if n <= MAX_COLUMNS:
            g = _tree_gram(n, depth)
            r = _row_relaxation(np.ascontiguousarray(g), b, k)
            up, chosen = _best_separated(np.ascontiguousarray(r), b, k)
            sel = np.asarray(chosen, dtype=np.int64)
            lo = float(np.sum(g[np.ix_(sel, sel)]))
            return float(up), abs(float(up) - lo) <= 1e-9 * lo
        share = max(depth - math.ceil(math.log2(b + 1)), 0)
        return float(k * depth + k * (k - 1) * share), False

    @property
    def sensitivity(self) -> float:
        """sqrt of the squared sensitivity per unit clip (exact integers; see the module docstring)."""
        return math.sqrt(self._sens2[0]) * (1.0 + 2 * U)

    @property
    def tight(self) -> bool:  # type: ignore[override]
        return self._sens2[1]

    def _inner(self) -> Mechanism:
        return Gaussian(self.sigma, self.sensitivity)
