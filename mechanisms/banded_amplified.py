"""Amplified banded matrix factorisation (DP-BandMF with cyclic Poisson sampling) as subsampled Gaussians.

Source: Choquette-Choo, Ganesh, McKenna, McMahan, Rush, Guha Thakurta & Xu 2023, "(Amplified) Banded
Matrix Factorization: A unified approach to private training" (NeurIPS 2023), Section 5: the cyclic
Poisson sampling scheme and its amplification theorem (informal Theorem 1; formal Theorems 4 and 5): a
b-banded factorisation run for n steps has the privacy of DP-SGD with Poisson rate q run for ceil(n / b)
steps, with the noise multiplier divided by the largest column norm of C.  The statement and its proof
are re-derived below (the proof is ours; the tests check it against exact brute-force references).

Mechanism.  n steps; every record is put in one of b = ``bands`` groups, independently of the data and
of the other records (a fixed function of a record identifier, or uniformly at random: adding or
removing a record moves no other record to another group; a random group is a mixture over fixed ones,
covered by joint convexity); step i draws each record of group (i mod b) independently with
probability q (``sample_rate``), sums their contributions (each clipped to L2 norm ``clip``) into X_i,
and the run releases Y = C X + Z with C an n x n lower-triangular b-banded matrix (C_ri = 0 unless
0 <= r - i < b) and Z i.i.d. N(0, sigma^2) entries.  X_i may depend on the released rows of Y before
row i (adaptive training).  Relation: add/remove one record (Poisson sampling; as for
:class:`mechanisms.subsampled.SubsampledGaussian`).

Theorem.  With mu = clip max_i |C e_i| / sigma and k = ceil(n / b) (the most participations of one
record: steps g, g + b, g + 2b, ... < n for its group g), the run is dominated by the k-fold product of
the Poisson-subsampled Gaussian pair:

    remove:  ((1 - q) N(0, 1) + q N(mu, 1))^{(x) k}  vs  N(0, 1)^{(x) k};   add: the swap.

Proof.  Fix the differing record x, in group g, with participations at steps i_j = g + j b (j < k).
(1) Disjoint supports: column i_j of C is supported on the rows R_j = [i_j, i_j + b) (lower-triangular
and b-banded), and the R_j are pairwise disjoint; x's j-th contribution B_j u_j (B_j ~ Bernoulli(q),
|u_j| <= clip) enters Y only on the rows R_j.  (2) Adaptivity: given the rows of Y before R_j, the
other records' contributions to the rows R_j are computed row by row from earlier rows, so the block
Y_{R_j} is an invertible post-processing (the same map for both neighbours) of
W_j = C_{R_j, i_j} B_j u_j^T + Z_{R_j}, and u_j depends only on rows before R_j.  By rotation
invariance of Z, W_j is the subsampled Gaussian pair with shift |C e_{i_j}| |u_j| / sigma <= mu; the
rows outside the R_j carry no information on x.  (3) Unequal column norms: for mu' <= mu the kernel
K: y -> (mu'/mu) y + sqrt(1 - (mu'/mu)^2) N(0, 1) maps N(0, 1) to N(0, 1) and N(mu, 1) to N(mu', 1),
hence (1 - q) N(0, 1) + q N(mu, 1) to (1 - q) N(0, 1) + q N(mu', 1) (linearity): the pair of a smaller
shift is a post-processing of the pair of the largest column norm, which dominates every participation.
(4) The k blocks compose adaptively: the product of dominating pairs dominates the adaptive composition
(Zhu, Dong & Wang 2022, adaptive composition of dominating pairs; Zhu's 2023 thesis, Thm 3.3.4).  Where
C is not b-banded lower-triangular, step (1) fails: a column reaching into the next participation's
rows correlates the blocks (the tests show the output mixture is then no longer the product).

Exact or upper bound.  The pair is attained (``tight``) when some group with k participations has all
its columns at the largest norm (e.g. column-normalised C, the form the paper optimises): the other
records contribute zero and x a fixed vector, and the k blocks are then exactly the product above.
Otherwise (unequal norms) it is an upper bound.  The largest column norm is rounded up.

Ledger.  One use = one participation of a record (one cycle of b steps): a run of n steps is
``rounds`` = ceil(n / b) uses, ``acct.compose(m, times=m.rounds)``.  Every curve is that of
``SubsampledGaussian(sigma, sample_rate, sensitivity=clip * max column norm)`` (RDP, characteristic
function and PLD routes, and, through the ledger's numeric view, the routes that special-case the
subsampled Gaussian: its one-step closed form, the near-atomic splits); ``dp_sgd_equivalent()`` returns
that mechanism and the count.
:class:`AmplifiedBandedToeplitzMF` is the same mechanism for a banded Toeplitz C given by its first
column (O(b) memory, any n: the form in which banded strategies are optimised and deployed).
b = 1 with a diagonal C is DP-SGD (n uses of the subsampled Gaussian); q = 1 is the un-amplified
:class:`mechanisms.matrix.MatrixMechanism` with cyclic participation (one Gaussian of mu sqrt(k) for a
column-normalised C).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._delegate import _Delegating
from .base import Mechanism, check
from .matrix import MAX_COLUMNS
from .registry import register
from .subsampled import SubsampledGaussian

__all__ = ["AmplifiedBandedMF", "AmplifiedBandedToeplitzMF"]

U = 2.0 ** -53


def _check_banded(c: np.ndarray, bands: int) -> None:
    """ValueError naming C and the first offending entry unless C is lower-triangular with C_ri = 0 for
    r - i >= bands."""
    r, i = np.nonzero(c)
    upper = i > r
    if np.any(upper):
        j = int(np.argmax(upper))
        raise ValueError(f"C must be lower-triangular (C[r][i] = 0 for i > r), got C[{r[j]}][{i[j]}] = "
                         f"{c[r[j], i[j]]!r}")
    far = r - i >= bands
    if np.any(far):
        j = int(np.argmax(far))
        raise ValueError(f"C must be b-banded with b = bands = {bands} (C[r][i] = 0 for r - i >= bands), "
                         f"got C[{r[j]}][{i[j]}] = {c[r[j], i[j]]!r}")


class _CyclicPoissonBandMF(_Delegating):
    """Shared part: ``steps``, ``bands``, ``clip``, ``sigma``, ``sample_rate`` and ``_norms`` (the largest
    column norm rounded up, tight) come from the subclass; the curves are the subsampled Gaussian's."""

    name = ""
    relations = ("add_remove",)

    @property
    def rounds(self) -> int:
        """k = ceil(n / bands): the most participations of one record, the ledger count of one run."""
        return -(-self.steps // self.bands)

    @property
    def column_norm(self) -> float:
        """max_i |C e_i| (rounded up)."""
        return self._norms[0]

    @property
    def sensitivity(self) -> float:
        """clip * max column norm: the L2 shift of one participation (an upper bound, rounded up)."""
        return self.clip * self.column_norm * (1.0 + 2 * U)

    @property
    def tight(self) -> bool:  # type: ignore[override]
        return self._norms[1]

    def dp_sgd_equivalent(self) -> tuple[SubsampledGaussian, int]:
        """``(SubsampledGaussian(sigma, sample_rate, sensitivity), rounds)``: the ledger entry of the whole
        run in DP-SGD form (the same curves and upper bounds as composing this mechanism ``rounds`` times,
        and, when the pair is attained (``tight``), the same certificates, lower bounds included):
        ``acct.compose(*m.dp_sgd_equivalent())``.
        """
        return self._subsampled_gaussian, self.rounds

    @functools.cached_property
    def _subsampled_gaussian(self) -> SubsampledGaussian:
        # one instance per mechanism: the subsampled Gaussian keeps per-instance caches (grids, envelopes)
        return SubsampledGaussian(self.sigma, self.sample_rate, self.sensitivity)

    def _inner(self) -> Mechanism:
        return self._subsampled_gaussian


#: the checks both forms share (run by the base class, in this order, before the matrix checks)
_COMMON_CHECKS = {"sigma": V.positive, "sample_rate": check(V.probability, open_low=True),
                  "bands": check(V.integer, low=1, high=V.MAX_COUNT), "clip": V.positive}


@register
@dataclass(frozen=True)
class AmplifiedBandedMF(_CyclicPoissonBandMF):
    """Banded matrix factorisation with cyclic Poisson sampling (DP-BandMF), one participation per use.

    Parameters
    ----------
    C : list of lists of float
        The n x n strategy matrix (n <= 4096 steps), lower-triangular and b-banded: C[r][i] = 0 unless
        0 <= r - i < ``bands``.
    sigma : float
        Noise standard deviation per entry of C X + Z, > 0.
    sample_rate : float
        q in (0, 1]: each record of the active group is drawn independently with probability q.
    bands : int
        b >= 1, the number of groups (the cycle length of the sampling); C may have fewer bands.
    clip : float, default 1
        L2 bound on one record's contribution to a step.

    Notes
    -----
    Add/remove relation.  One ledger use is one participation; compose ``rounds`` = ceil(n / bands)
    uses for the run.  Curves of ``SubsampledGaussian(sigma, sample_rate, clip * max column norm)``
    (module docstring: theorem, proof, when it is exact).  A banded Toeplitz C of any size:
    :class:`AmplifiedBandedToeplitzMF`.
    """

    C: list
    sigma: float
    sample_rate: float
    bands: int
    clip: float = 1.0

    name = "bandmf_cyclic_poisson"
    field_checks = _COMMON_CHECKS

    def __post_init__(self):
        super().__post_init__()
        c = self.C
        if not isinstance(c, (list, tuple)) or not c or not all(isinstance(r, (list, tuple)) for r in c):
            raise TypeError("C must be a non-empty list of rows (lists of numbers)")
        n = len(c)
        if n > MAX_COLUMNS or any(len(r) != n for r in c):
            raise ValueError(f"C must be square (n x n) with 1 <= n <= {MAX_COLUMNS}, got {n} rows of "
                             f"lengths {sorted({len(r) for r in c})[:4]}")
        try:
            arr = np.array(c, dtype=float)
        except (TypeError, ValueError):
            raise TypeError("C must hold real numbers") from None
        if not np.all(np.isfinite(arr)):
            raise ValueError("C must have finite entries")
        if not np.any(arr != 0):
            raise ValueError("C must have a non-zero entry")
        _check_banded(arr, self.bands)
        object.__setattr__(self, "C", [[float(x) for x in r] for r in c])

    def __hash__(self):
        return hash((self.name, tuple(tuple(r) for r in self.C), self.sigma, self.sample_rate, self.bands,
                     self.clip))

    @classmethod
    def example(cls) -> AmplifiedBandedMF:
        """A column-normalised 2-banded 4 x 4 factorisation, q = 0.1 (conformance and route listing)."""
        a = 1.0 / math.sqrt(1.25)
        c = [[a, 0.0, 0.0, 0.0], [0.5 * a, a, 0.0, 0.0], [0.0, 0.5 * a, a, 0.0], [0.0, 0.0, 0.5 * a, 1.0]]
        return cls(C=c, sigma=1.0, sample_rate=0.1, bands=2)

    def describe(self) -> str:
        n = len(self.C)
        return (f"{self.name}(C={n}x{n}, sigma={self.sigma:.6g}, sample_rate={self.sample_rate:.6g}, "
                f"bands={self.bands}, clip={self.clip:.6g})")

    @property
    def steps(self) -> int:
        """n, the number of steps (the size of C)."""
        return len(self.C)

    @functools.cached_property
    def _norms(self) -> tuple[float, bool]:
        """(max column norm rounded up, tight): tight when a group with ``rounds`` participations has
        every one of its columns at the largest norm (up to the rounding of the computed norms)."""
        c = np.array(self.C, dtype=float)
        norms = np.sqrt(np.einsum("ri,ri->i", c, c))
        top = float(norms.max())
        n, b, k = self.steps, self.bands, self.rounds
        # a column holds at most min(b, n) non-zeros: the computed norm is within (terms + 4) u (relative)
        # of the exact one, so columns of equal exact norm agree to 2 (terms + 4) u
        terms = min(b, n)
        floor = top * (1.0 - 2.0 * (terms + 4) * U)
        tight = any(-(-(n - g) // b) == k and bool(np.all(norms[g::b] >= floor)) for g in range(min(b, n)))
        return top * (1.0 + (terms + 4) * U), tight


@register
@dataclass(frozen=True)
class AmplifiedBandedToeplitzMF(_CyclicPoissonBandMF):
    """DP-BandMF with a banded Toeplitz strategy C_ri = coefficients[r - i] (0 <= r - i < p), any n.

    Parameters
    ----------
    coefficients : list of float
        c_0, ..., c_{p-1}: the first column of C (the form banded strategies are optimised in); p <=
        ``bands`` once trailing zeros are dropped.
    steps : int
        n >= 1, the number of steps (C is n x n; its last columns are truncated).
    sigma, sample_rate, bands, clip
        As for :class:`AmplifiedBandedMF`.

    Notes
    -----
    The same mechanism as ``AmplifiedBandedMF`` with the explicit matrix (module docstring), in O(p)
    memory: column i has norm sqrt(sum_{j < min(p, n - i)} c_j^2), largest for column 0.
    """

    coefficients: list
    steps: int
    sigma: float
    sample_rate: float
    bands: int
    clip: float = 1.0

    name = "bandmf_toeplitz_cyclic_poisson"
    field_checks = {**_COMMON_CHECKS, "steps": check(V.integer, low=1, high=V.MAX_COUNT)}

    def __post_init__(self):
        super().__post_init__()
        c = self.coefficients
        if not isinstance(c, (list, tuple)) or not c:
            raise TypeError("coefficients must be a non-empty list of numbers")
        vals = [V.real(f"coefficients[{j}]", x) for j, x in enumerate(c)]
        nz = [j for j, x in enumerate(vals) if x != 0.0]
        if not nz:
            raise ValueError("coefficients must have a non-zero entry")
        if nz[-1] + 1 > self.bands:
            last = nz[-1]
            raise ValueError(f"bands must be >= the number of bands of C ({last + 1}: coefficients[{last}] = "
                             f"{vals[last]!r} is non-zero), got bands = {self.bands}")
        object.__setattr__(self, "coefficients", vals)

    def __hash__(self):
        return hash((self.name, tuple(self.coefficients), self.steps, self.sigma, self.sample_rate,
                     self.bands, self.clip))

    @classmethod
    def example(cls) -> AmplifiedBandedToeplitzMF:
        """4 bands, coefficients 2^-j, 1000 steps, q = 0.05."""
        return cls(coefficients=[1.0, 0.5, 0.25, 0.125], steps=1000, sigma=1.0, sample_rate=0.05, bands=4)

    @functools.cached_property
    def _norms(self) -> tuple[float, bool]:
        """(max column norm rounded up, tight): column i has the norm of the first min(p, n - i)
        coefficients; tight when the last column of some group with ``rounds`` participations (its
        shortest) has the full norm."""
        n, b, k = self.steps, self.bands, self.rounds
        p = min(len(self.coefficients), n)
        sq = np.cumsum(np.square(np.asarray(self.coefficients[:p], dtype=float)))  # sq[m - 1]: m terms
        top2 = float(sq[-1])
        tight = False
        for g in range(min(b, n)):
            if -(-(n - g) // b) == k:
                last = g + (k - 1) * b
                if float(sq[min(p, n - last) - 1]) >= top2:
                    tight = True
                    break
        return math.sqrt(top2) * (1.0 + (p + 4) * U), tight
