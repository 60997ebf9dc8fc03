"""The largest of an epoch's releases, binned: a lower-bound pair for shuffling and balls-in-bins.

For explicit neighbouring datasets, the t releases of one epoch (in units of the noise, y = x / sigma)
are MoG(m) = (1/t) sum_i N(m e_i, I_t) for a dataset-dependent shift m: the record sits in a uniformly
random batch i, which is shifted by m relative to the others (after subtracting a public constant):

* balls-in-bins, add/remove: m = mu (the record, gradient +C) versus m = 0 (absent);
* shuffling, zero-out (Chua, Ghazi, Kamath, Kumar, Manurangsi, Sinha & Zhang 2024, "How private are
  DP-SGD implementations?", ICML -- their lower-bound datasets): all other records with gradient -C,
  the record +C versus a null record: m = 2 mu versus m = mu;
* shuffling, replace-one: the record +C versus -C (others -C): m = 2 mu versus m = 0.

(mu = C / sigma.)  The largest release M = max_i y_i is a post-processing, with CDF
F_m(x) = Phi(x - m) Phi(x)^{t-1}; binning M (edges x_0 < ... < x_K, two tail bins) is a further
post-processing.  So the pair (law of the bin under P, under Q) satisfies, by data processing,
H_a(bin(P) || bin(Q)) <= H_a(P || Q) for every a >= 0 and, composed over independent epochs, the
composed profile of the binned pair is a **lower bound** on the mechanism's privacy profile.  This is
Chua et al.'s "cube" set {max_t x_t <= C} construction, composed over epochs through the PLD of the
statistic as they do; binning replaces their discretisation.

``MaxStatisticPair`` is an atomic privacy-loss distribution used only for lower bounds: bin masses are
normal-CDF differences in log space (a per-bin relative error bound, at least ``MASS_REL_ERR``; checked
against mpmath in tests/test_max_statistic.py) and every atom's loss is moved *down* by a bound on its
rounding error, which can only lower the composed delta computed from the first distribution (delta(eps) =
E_P[(1 - e^{eps - S})_+] is non-decreasing in every step's loss).  Not registered: it is not an upper
bound on anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from scipy.special import log_ndtr

from . import validation as V
from .base import Mechanism, check, check_direction
from .randomized_response import _AtomicPLD

#: relative error bound of a bin mass (log_ndtr and the expm1 difference; a 100x margin over the measured)
MASS_REL_ERR = 1e-10
#: bin width of the largest release (noise units)
BIN_WIDTH = 1.0 / 128.0


def _log_cdf(x: np.ndarray, m: float, t: int) -> np.ndarray:
    """log F_m(x) = log Phi(x - m) + (t - 1) log Phi(x)."""
    return log_ndtr(x - m) + (t - 1) * log_ndtr(x)


def _log_bin_masses(edges: np.ndarray, m: float, t: int) -> tuple[np.ndarray, np.ndarray]:
    """log masses of the bins (-inf, x_0], (x_0, x_1], ..., (x_K, inf) under MoG(m), and a bound on
    the relative error of each mass.

    lf = log F is a sum of t log_ndtr values (each within a few ulps, relative), so its absolute error
    is <= 8 u |lf| + 8 u; a bin mass F_{j+1} (1 - e^{-d}), d = lf_{j+1} - lf_j > 0, then has relative
    error <= err(lf_{j+1}) + (err(lf_j) + err(lf_{j+1})) / d x (d / (1 - e^{-d})) / ... bounded by
    (err_j + err_{j+1}) (1 + 1/d) + 8 u; the top bin 1 - F(x_K) = -expm1(lf_K) similarly.
    """
    u = 2.0**-53
    lf = _log_cdf(edges, m, t)
    elf = 8.0 * u * (np.abs(lf) + 1.0)
    d = lf[1:] - lf[:-1]
    with np.errstate(divide="ignore", invalid="ignore"):
        inner = lf[1:] + np.log(-np.expm1(-d))
        top = np.log(-np.expm1(lf[-1]))  # 1 - F(x_K)
        rel_inner = (elf[:-1] + elf[1:]) * (1.0 + 1.0 / d) + 8.0 * u
        rel_top = elf[-1] * (1.0 + 1.0 / abs(lf[-1])) + 8.0 * u
    rel = np.concatenate([[elf[0] + 8.0 * u], rel_inner, [rel_top]])
    rel = np.where(np.isfinite(rel), rel, 1.0)
    return np.concatenate([[lf[0]], inner, [top]]), np.maximum(rel, MASS_REL_ERR)


@dataclass(frozen=True)
class MaxStatisticPair(_AtomicPLD):
    """Binned largest release of one epoch: P = MoG(``mu_p``), Q = MoG(``mu_q``) over ``num_steps`` steps.

    ``remove`` is (P, Q), ``add`` the swap.  Lower bounds only (module docstring).
    """

    mu_p: float
    mu_q: float
    num_steps: int

    name = "max_statistic_pair"
    symmetric = False
    tight = True
    pld_available = True
    relations = ("add_remove", "replace_one")
    field_checks = {"mu_p": V.nonnegative, "mu_q": V.nonnegative,
                    "num_steps": check(V.integer, low=1, high=10**9)}

    @cached_property
    def _bins(self) -> tuple[np.ndarray, np.ndarray]:
        """(log P-masses, log Q-masses) of the bins."""
        t = self.num_steps
        hi_m = max(self.mu_p, self.mu_q)
        # the largest of t standard normals sits near sqrt(2 log t); cover F down to ~e^-60 and the
        # upper tails down to ~e^-60 of both distributions
        lo = -8.0 if t == 1 else float(_inverse_low(t))
        hi = max(hi_m, math.sqrt(2.0 * math.log(max(t, 2)))) + 12.0
        edges = np.arange(lo, hi + BIN_WIDTH, BIN_WIDTH)
        return _log_bin_masses(edges, self.mu_p, t), _log_bin_masses(edges, self.mu_q, t)

    def _direction_atoms(self, direction: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(losses moved down by their error bound, P-masses, relative error bounds of the masses)."""
        (lp, rp), (lq, rq) = self._bins
        if direction == "add":
            lp, lq, rp, rq = lq, lp, rq, rp
        keep = np.isfinite(lp) & (lp > -700.0)
        lp, lq, rp, rq = lp[keep], lq[keep], rp[keep], rq[keep]
        loss = lp - lq  # +inf where the Q-mass underflowed: cap it at a safe finite value below the truth
        loss = np.where(np.isfinite(loss), loss, 700.0)
        # the true loss is >= the computed one minus its rounding bound (both relative mass errors, as
        # log errors, plus the rounding of the subtraction); moving the atoms down only lowers delta
        eta = 2.0 * (rp + rq) + 4.0 * 2.0**-53 * (np.abs(lp) + np.abs(lq))
        return loss - eta, np.exp(lp), rp

    def _atoms(self) -> tuple[np.ndarray, np.ndarray]:
        return self._direction_atoms("remove")[:2]

    def pld_atoms(self, direction: str = "remove"):
        check_direction(direction)
        return self._direction_atoms(direction)[:2]

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        from ._numerics import discrete_log_mgf

        return discrete_log_mgf(s, *self._direction_atoms(direction)[:2])

    @property
    def log_mgf_error(self) -> float:
        worst = max(float(self._direction_atoms(d)[2].max()) for d in ("remove", "add"))
        return 2.0 * worst

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        check_direction(direction)
        from ._cells import atoms_cell_masses

        loss, w, rel = self._direction_atoms(direction)
        m, err = atoms_cell_masses(edges, loss, w)
        m_err, _ = atoms_cell_masses(edges, loss, w * rel)  # the masses' own errors, per cell
        return m, err + m_err

    def rdp(self, alpha) -> np.ndarray:  # not used for bounds (lower-bound pair); kept for completeness
        al = V.alphas(alpha)
        from ._numerics import discrete_log_mgf

        out = np.full(al.shape, np.inf)
        fin = np.isfinite(al)
        for d in ("remove", "add"):
            l, w = self._direction_atoms(d)[:2]
            s = al[fin] - 1.0
            v = np.real(discrete_log_mgf(s.astype(complex), l, w)) / s
            out[fin] = np.where(np.isinf(out[fin]), v, np.maximum(out[fin], v))
        return out

    def total_variation(self, direction: str = "remove") -> float | None:
        return None


def _inverse_low(t: int) -> float:
    """x with t log Phi(x) ~ -60 (the largest of t normals lies above x with probability 1 - e^-60)."""
    from scipy.special import ndtri

    p = math.exp(-60.0 / t)
    return float(ndtri(p)) - 0.5


def attained_lower_mechanism(mech: Mechanism):
    """The mechanism's lower-bound pair if it declares one (``attained_lower_pair``), the mechanism itself
    if its own pair is attained (``tight``), else None."""
    fn = getattr(mech, "attained_lower_pair", None)
    if fn is not None:
        return fn()
    return mech if mech.tight else None
