"""Fixed-size batches (sampling without replacement): one DP-SGD step on a uniformly random b-subset.

A step draws a batch of exactly b = ``batch_size`` of the n = ``dataset_size`` records uniformly (without
replacement), sums their gradients clipped to L2 norm C = ``sensitivity`` and adds N(0, sigma^2 I).
Write gamma = b / n and mu = 2 C / sigma.  Both relations see a shift of 2C, not C: when the differing
record is in the batch, the coupled batch of the neighbouring dataset holds a *different* record in its
place (gradient difference up to 2C), unlike Poisson sampling where the record is simply absent.

Add/remove (``FixedSizeGaussian``; n and b public, D' = D minus one record, b records drawn from each)
    Dominating pairs (Zhu, Dong & Wang 2022, "Optimal accounting of differential privacy via
    characteristic function", AISTATS; Zhu's thesis Thm 3.3.5(2)): with (P, Q) a dominating pair of the
    base step under replace-one, remove ((1 - gamma) Q + gamma P, Q), add its swap.  For the Gaussian sum
    (P, Q) = (N(mu, 1), N(0, 1)): exactly the pairs of the Poisson-subsampled Gaussian with rate gamma and
    sensitivity 2C (``SubsampledGaussian(sigma, gamma, 2C)``), for every order alpha >= 0 of the
    hockey-stick divergence H_alpha.  Derivation (the thesis states it without proof; checked here):
    M(D) = (1 - gamma) mu_0 + gamma mu_1 and M(D') = mu_0, where coupling the batch R u {y} of D' with
    R u {x} of D (R a uniform (b-1)-subset, y uniform among the rest) makes mu_0, mu_1 mixtures of
    replace-one neighbours A_c, B_c; by joint convexity, for alpha >= 1 - gamma,
        H_alpha(M(D) || M(D')) <= E_c H_alpha((1 - gamma) A_c + gamma B_c || A_c)
                                = gamma E_c H_{1 + (alpha - 1)/gamma}(B_c || A_c)
                               <= gamma H_{1 + (alpha - 1)/gamma}(N(mu) || N(0)),
    and below 1 - gamma both sides equal 1 - alpha.  The pair is attained (all other records at -C, the
    differing record at +C), so the bound is **tight**.  Neighbours of sizes (n, n + 1) have the rate
    b / (n + 1) < gamma, which the same pair covers (a smaller rate is a post-processing of a larger one).
    Brute force: tests/test_fixed_size.py enumerates every batch of small datasets and compares exact
    hockey-stick divergences for alpha in (0, inf).

Replace-one (``FixedSizeGaussianReplaceOne``; D, D' of size n differing in one record)
    M(D) = (1 - gamma) mu_0 + gamma mu_1, M(D') = (1 - gamma) mu_0 + gamma mu_1'.  With
    (A, B) = ((1 - gamma) N(0, 1) + gamma N(mu, 1), N(0, 1)), every ordered pair of neighbours has
    H_alpha <= H_alpha(A || B) for alpha >= 1 (advanced joint convexity: Balle, Barthe & Gaboardi 2018,
    "Privacy amplification by subsampling: tight analyses via couplings and divergences", NeurIPS), with
    equality for the datasets "others at -C, x at +C, x' at -C".  The relation is symmetric and
    H_alpha(X || Y) = 1 - alpha + alpha H_{1/alpha}(Y || X), so for alpha < 1 the supremum over neighbours
    is 1 - alpha + alpha H_{1/alpha}(A || B) = H_alpha(B || A), attained by the swapped datasets.  The
    least pair dominating one step for *all* alpha >= 0 (what composition needs) is therefore the
    symmetrisation S of (A, B): the pair with trade-off function min(f, f^{-1})** of Dong, Roth & Su
    (2022, "Gaussian differential privacy", JRSS-B, Thm 4.2, C_gamma(f) for subsampling without
    replacement).  Neither (A, B) nor (B, A) dominates on its own (the brute force in the tests shows
    H_alpha of a neighbouring pair above H_alpha(A || B) for alpha < 1), so taking the worse of a "remove"
    and an "add" composition is **not** valid under replace-one (Lebeda, Regehr, Kamath & Steinke 2024,
    "Avoiding pitfalls for privacy accounting of subsampled mechanisms under composition").  The privacy
    loss of S under its first distribution (derived here) is

        the loss of (A, B) under A restricted to (0, inf)  +  the loss of (B, A) under B restricted to
        (-inf, 0)  +  an atom at 0 of mass a_0 = 1 - A(L > 0) - B(L > 0) = (1 - gamma) erf(mu / (2 sqrt 2)).

    (S is symmetric, H_alpha(S) = H_alpha(A || B) for alpha >= 1, both measures have mass 1.)  With
    l(x) = log(1 - gamma + gamma e^{mu x - mu^2/2}) (>= 0 iff x >= mu/2) its MGF is
        M(s) = a_0 + int_{mu/2}^inf phi(x) [e^{(s+1) l(x)} + e^{-s l(x)}] dx,
    computed by Gauss-Legendre panels (``mechanisms._fixed_size_kernels``; declared error validated
    against mpmath in the tests).  RDP: eps(alpha) = log M(alpha - 1) / (alpha - 1) (exact for S) up to
    order 32, and a closed-form upper bound beyond (``_rdp_bound``).  The composition of S is an **upper
    bound** (S is optimal per step but not attained by one pair of datasets across steps);
    ``attained_lower_pair`` gives the remove pair (A, B), whose composition is attained, for certified
    lower bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._fixed_size_kernels import half_line_log_j, half_line_tv
from .base import Delegating, Mechanism, as_complex_array, check, check_direction, field_ref
from .gaussian import gaussian_rdp_upper
from .registry import register
from .subsampled import SubsampledGaussian, _interpolate_cgf

_SPAN = 80.0


def _batch_size(name: str, value, *, dataset_size: int) -> int:
    """An integer batch size b with 1 <= b <= n (``dataset_size``, already checked)."""
    b = V.integer(name, value, low=1)
    if b > dataset_size:
        raise ValueError(f"{name} must be <= dataset_size, got {name}={b} > dataset_size={dataset_size}")
    return b


class _FixedSizeStep(Mechanism):
    """The parameters of both relations: sigma, batch size b, dataset size n (1 <= b <= n) and clipping
    norm C, checked once here."""

    field_checks = {"sigma": V.positive, "dataset_size": check(V.integer, low=1),
                    "batch_size": check(_batch_size, dataset_size=field_ref("dataset_size")),
                    "sensitivity": V.positive}

    @property
    def sample_rate(self) -> float:
        """gamma = b / n."""
        return self.batch_size / self.dataset_size


@register
@dataclass(frozen=True)
class FixedSizeGaussian(_FixedSizeStep, Delegating):
    """One DP-SGD step on a uniformly random batch of exactly ``batch_size`` of ``dataset_size`` records.

    Add/remove relation (n and b public).  Exactly the dominating pairs of
    ``SubsampledGaussian(sigma, batch_size / dataset_size, 2 * sensitivity)`` (see the module docstring:
    tight, both directions): every curve is that pair's (:class:`mechanisms.base.Delegating`).

    Parameters
    ----------
    sigma : float
        Noise standard deviation (the noise multiplier when ``sensitivity`` is 1), > 0.
    batch_size, dataset_size : int
        b and n, 1 <= b <= n.
    sensitivity : float, default 1.0
        Clipping norm C of one record's gradient (the pair uses the shift 2C), > 0.
    """

    sigma: float
    batch_size: int
    dataset_size: int
    sensitivity: float = 1.0

    name = "fixed_size_gaussian"
    symmetric = False
    tight = True
    pld_available = True
    relations = ("add_remove",)

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "_pair", SubsampledGaussian(self.sigma, self.sample_rate,
                                                             2.0 * self.sensitivity))

    @property
    def poisson_pair(self) -> SubsampledGaussian:
        """The Poisson-subsampled Gaussian with exactly this step's dominating pairs."""
        return self._pair  # type: ignore[attr-defined]

    def dominating(self) -> SubsampledGaussian:
        return self._pair  # type: ignore[attr-defined]

    def rdp_int(self, alphas) -> np.ndarray:
        return self._pair.rdp_int(alphas)


@register
@dataclass(frozen=True)
class FixedSizeGaussianReplaceOne(_FixedSizeStep):
    """One DP-SGD step on a uniformly random batch of exactly b of n records, replace-one relation.

    Accounted by the symmetrised pair S of ((1 - gamma) N(0, 1) + gamma N(mu, 1), N(0, 1)),
    gamma = b / n, mu = 2 C / sigma (module docstring): the least dominating pair of one step; its
    composition is an upper bound.  Parameters as :class:`FixedSizeGaussian`.
    """

    sigma: float
    batch_size: int
    dataset_size: int
    sensitivity: float = 1.0

    name = "fixed_size_gaussian_replace_one"
    symmetric = True
    tight = False
    pld_available = True
    relations = ("replace_one",)

    @property
    def mu(self) -> float:
        return 2.0 * self.sensitivity / self.sigma

    def attained_lower_pair(self) -> SubsampledGaussian:
        """The remove pair (A, B) as a mechanism: attained by explicit datasets at every step, so its
        composed privacy profile is a lower bound on this mechanism's (used for certified lower bounds)."""
        return SubsampledGaussian(self.sigma, self.sample_rate, 2.0 * self.sensitivity)

    @property
    def atom_mass(self) -> float:
        """a_0 = (1 - gamma) erf(mu / (2 sqrt 2)): the mass of the loss 0."""
        return (1.0 - self.sample_rate) * math.erf(self.mu / (2.0 * math.sqrt(2.0)))

    def _trivial(self) -> bool:
        return self.sample_rate == 1.0 or self.mu == 0.0

    # ---------------------------------------------------------------- PLD / MGF
    @property
    def log_mgf_error(self) -> float:
        return 1e-12

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        """The half-line kernels' t-growing rounding on Re s = c, |Im s| <= t_max (form of
        ``log_mgf_error``; each half line's moduli integrate to at most M(c)).  On the window [mu/2, b]
        of ``_range`` (|x| <= b, |l| <= L = |log q| + mu b + mu^2/2 + |log(1 - q)| + 1): the phase
        t l(x) inherits l's rounding, 3 ulps of |log q| + mu x + mu^2/2 (the exponent) plus 2 of |l|
        and 2 (log1p, exp), and the product's half ulp of t L; the nodes x + (1 + g) h / 2 are off by
        ulps of b, which moves the integrand by t mu ulps of b (its phase's slope is t l' <= t mu); the
        panels x += h leave gaps or overlaps of ulps of b per panel, and there are at most
        t mu / 3 + ... panels per unit of x (h >= 3 / (t l'), the t-free part being in the constant).
        Together u t_max (3 (|log q| + mu b + mu^2/2) + 2.5 L + 2 + 1.4 mu b), times 1.1; the larger of
        the two half lines (w = s + 1 and -s).  An upper bound (measured errors are ~500x below it)."""
        if not t_max > 0.0 or self.sample_rate == 1.0 or self.mu == 0.0:
            return 0.0
        from ._fixed_size_kernels import _range

        q, mu = self.sample_rate, self.mu
        lq, l1q = math.log(q), math.log1p(-q)
        worst = 0.0
        for wr in (c + 1.0, -c):
            b = float(_range(wr, lq, l1q, mu, _SPAN)[1])
            e = abs(lq) + mu * b + 0.5 * mu * mu
            big_l = e + abs(l1q) + 1.0
            worst = max(worst, 3.0 * e + 2.5 * big_l + 2.0 + 1.4 * mu * b)
        return 1.1 * 2.0**-53 * t_max * worst

    def mgf_cost(self, t_max: float) -> float:
        return 20.0 * (4.0 + (t_max + 2.0) * self.mu * (self.mu + 8.0))

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        if self.sample_rate == 1.0:  # S = the Gaussian pair (already symmetric): L ~ N(mu^2/2, mu^2)
            return s * (s + 1.0) * (self.mu**2 / 2.0)
        flat = s.ravel()
        q, mu = self.sample_rate, self.mu
        w1 = flat + 1.0
        w2 = -flat
        r1, i1 = half_line_log_j(np.ascontiguousarray(w1.real), np.ascontiguousarray(w1.imag), q, mu, _SPAN)
        r2, i2 = half_line_log_j(np.ascontiguousarray(w2.real), np.ascontiguousarray(w2.imag), q, mu, _SPAN)
        from ._numerics import complex_logsumexp

        a0 = self.atom_mass
        la = np.full(flat.shape, math.log(a0) if a0 > 0 else -np.inf, dtype=complex)
        terms = np.stack([r1 + 1j * i1, r2 + 1j * i2, la])
        return complex_logsumexp(terms, axis=0).reshape(s.shape)

    def pld_atoms(self, direction: str = "remove") -> tuple[np.ndarray, np.ndarray]:
        check_direction(direction)
        a0 = self.atom_mass
        if self.sample_rate == 1.0 or a0 <= 0.0:
            return np.empty(0), np.empty(0)
        return np.array([0.0]), np.array([a0])

    def total_variation(self, direction: str = "remove") -> float:
        """H_1 of S = H_1(A || B) = gamma erf(mu / (2 sqrt 2)) (exact)."""
        check_direction(direction)
        return self.sample_rate * math.erf(self.mu / (2.0 * math.sqrt(2.0)))

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        """Cells of S's loss: the remove pair's masses on (0, inf), the add pair's on (-inf, 0) and the
        atom at 0 (exact CDF differences of ``mechanisms._cells.sg_cells`` on the edges clipped at 0)."""
        check_direction(direction)
        from ._cells import atoms_cell_masses, check_edges, gaussian_loss_cells, sg_cells

        e = check_edges(edges)
        q, mu = self.sample_rate, self.mu
        if q == 1.0:
            return gaussian_loss_cells(e, mu)
        # positive part: cells of the edges (0, max(e, 0)); the first cell (-inf, 0] is dropped
        ep = np.concatenate([[0.0], np.maximum(e, 0.0)])
        mp_, errp = sg_cells(ep, q, mu, False)
        # negative part: cells of (min(e, 0), 0); the last cell (0, inf) is dropped
        en = np.concatenate([np.minimum(e, 0.0), [0.0]])
        mn, errn = sg_cells(en, q, mu, True)
        ma, erra = atoms_cell_masses(e, *self.pld_atoms(direction))
        m = mp_[1:] + mn[:-1] + ma
        err = errp[1:] + errn[:-1] + erra + 2.0**-53 * m * 3.0
        return m, err

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        """t -> log bound on |M_cont(c + it')|, |t'| >= t: min(M_cont(c), 1.1 V / t), with V the total
        variation (jumps at 0 included) of the e^{cL}-tilted continuous loss density (integration by
        parts), from a fine grid (10 % margin)."""
        check_direction(direction)
        q, mu = self.sample_rate, self.mu
        if q == 1.0:
            return lambda t: (c * c + c - t * t) * mu**2 / 2.0
        w = np.array([c + 1.0, -c])
        lr, _ = half_line_log_j(w, np.zeros(2), q, mu, _SPAN)
        log_cont = float(np.logaddexp(lr[0], lr[1]))
        tvs = []
        for side in (1, -1):
            first, tv, scale = half_line_tv(float(c), q, mu, side, 1 << 15)
            tvs.append(math.log(first + tv) + scale if first + tv > 0 else -math.inf)
        log_v = math.log(1.1) + float(np.logaddexp(tvs[0], tvs[1]))
        return lambda t: log_cont if t <= 0 else min(log_cont, log_v - math.log(t))

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)

    # ---------------------------------------------------------------- RDP
    #: orders above this use the cheap bound of :meth:`_rdp_bound` (the quadrature costs O(alpha^2 mu^2))
    QUAD_MAX_ORDER = 32.0

    def _rdp_exact(self, alpha: np.ndarray) -> np.ndarray:
        """log M(alpha - 1) / (alpha - 1) with the declared MGF error added (alpha > 1, finite)."""
        s = alpha - 1.0
        lm = np.real(self.log_mgf(s.astype(complex)))
        return (lm + self.log_mgf_error) / s

    def _rdp_bound(self, alpha: np.ndarray) -> np.ndarray:
        """An upper bound for every order: with B = N(0, 1), r = e^{l(x)} <= 1 below mu/2 and >= 1 above,
        M(alpha - 1) = a_0 + E_B[r^alpha; x > mu/2] + E_B[r^{1-alpha}; x > mu/2]
                     <= a_0 + E_B[r^alpha] + Phi(-mu/2),
        and E_B[r^alpha] = e^{(alpha-1) eps_P(alpha)} with eps_P the Poisson-subsampled Gaussian's RDP
        (rate gamma, sensitivity 2C; exact at integers, interpolated CGF in between: an upper bound)."""
        k = (alpha - 1.0) * np.asarray(self.attained_lower_pair().rdp(alpha), dtype=float)
        extra = math.log(self.atom_mass + 0.5 * math.erfc(self.mu / (2.0 * math.sqrt(2.0))))
        return np.logaddexp(k, extra) * (1.0 + 1e-15) / (alpha - 1.0)

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        out = np.full(al.shape, np.inf)
        if self.sample_rate == 1.0:
            return gaussian_rdp_upper(al, 2.0 * self.sensitivity, self.sigma)
        fin = np.isfinite(al)
        if fin.any():
            a = al[fin]
            val = np.minimum(self._rdp_bound(a), gaussian_rdp_upper(a, 2.0 * self.sensitivity, self.sigma))
            small = a <= self.QUAD_MAX_ORDER
            if small.any():
                val[small] = np.minimum(val[small], self._rdp_exact(a[small]))
            out[fin] = val
        return out

__all__ = ["FixedSizeGaussian", "FixedSizeGaussianReplaceOne", "_interpolate_cgf"]
