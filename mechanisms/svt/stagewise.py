"""Stage-wise SVT (Alg. 12): RDP inside each stage, optimal (eps, delta) composition across stages.

Source: Zhu & Wang 2020 (= Zhu 2023 thesis, Thms 7.2.9, 7.2.10, Remarks 7.2.11-12); the numerical
recipe of docs/derivations/sparse-vector.md §3 (the theorems themselves only give O(.)):

1. each of the m = ceil(c / c') stages is a generalized SVT with cut-off c' (the last, with the
   remainder c~ <= c', is dominated by the same curve) and per-stage cap k'_max; its RDP curve is that of
   :class:`~mechanisms.svt.GeneralizedSVT` (Thm 7.2.7 without resampling, c' units of (7.1)/(7.2) with it);
2. per stage, (eps_s, delta') from the RDP curve by the RDP -> DP rule (``stage_rule``: "improved"
   = Balle et al. 2020, Thm 21, or "classic" = Mironov 2017, Prop. 3, the thesis' rule; both upper bounds);
3. the run is the m-fold adaptive composition of (eps_s, delta')-DP blocks, dominated by the m-fold
   product of the four-point pair (Kairouz, Oh & Viswanath 2015): infinite loss with mass
   1 - (1 - delta')^m, otherwise RR(eps_s)^m.  The accountant composes that pair exactly (characteristic
   function route) or by its conditional RDP m * RR_eps_s(alpha) plus the failure mass.

Stage counts use ceil(c / c'), not c / c' (docs/derivations/sparse-vector.md, P12).  Never uses the Remark
7.2.12 conjecture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from numba import njit

from .. import validation as V
from .._numerics import mul_up, scale_up
from .._rdp_conversion import eps_from_rdp
from .._rdp_kernels import rr_k_curve
from ..base import check, field_ref
from ..lattice import AtomicMechanism, rr_power_atoms, rr_power_mass_rel_err
from ..registry import register
from .core import RR_ATOMS_MAX, GeneralizedSVT

STAGE_RULES = ("improved", "classic")


# ----------------------------------------------------------------------------- KOV composition
@njit(cache=True)
def _log_delta_rr(eps0: float, m: int, eps: float) -> float:  # pragma: no cover - compiled
    """log of the hockey-stick divergence H_{e^eps}(RR(eps0)^m || RR(eps0)^m swapped) (-inf if 0).

    delta_RR(eps) = sum_l C(m, l) [e^{(m-l) eps0} - e^{eps + l eps0}]_+ / (1 + e^{eps0})^m.
    """
    lnorm = m * (eps0 + math.log1p(math.exp(-eps0)))  # m log(1 + e^{eps0})
    lg = math.lgamma(m + 1.0)
    mx = -math.inf
    vals = np.empty(m + 1)
    for ell in range(m + 1):
        loss = (m - 2.0 * ell) * eps0
        if loss > eps:
            v = (lg - math.lgamma(ell + 1.0) - math.lgamma(m - ell + 1.0) + (m - ell) * eps0 - lnorm
                 + math.log(-math.expm1(eps - loss)))
        else:
            v = -math.inf
        vals[ell] = v
        if v > mx:
            mx = v
    if mx == -math.inf:
        return -math.inf
    acc = 0.0
    for ell in range(m + 1):
        if vals[ell] > -math.inf:
            acc += math.exp(vals[ell] - mx)
    return mx + math.log(acc)


def kov_delta(eps0: float, delta0: float, m: int, eps: float) -> float:
    """Exact delta(eps) of the m-fold composition of (eps0, delta0)-DP mechanisms (KOV 2015).

    delta = 1 - (1 - delta0)^m (1 - delta_RR(eps)) with delta_RR the hockey-stick divergence of
    RR(eps0)^m (docs/derivations/sparse-vector.md §3 step 3).  Tight for the worst case (the four-point pair).
    """
    eps0 = V.real("eps0", eps0, low=0.0)
    delta0 = V.real("delta0", delta0, low=0.0, high=1.0)
    m = V.integer("m", m, low=1)
    eps = V.real("eps", eps, low=0.0, allow_inf=True)
    if math.isinf(eps):
        return -math.expm1(m * math.log1p(-delta0)) if delta0 < 1 else 1.0
    ld = _log_delta_rr(eps0, m, eps)
    d_rr = math.exp(ld) if ld > -math.inf else 0.0
    if delta0 >= 1.0:
        return 1.0
    return -math.expm1(m * math.log1p(-delta0) + math.log1p(-min(d_rr, 1.0)))


def kov_epsilon(eps0: float, delta0: float, m: int, delta: float) -> float:
    """Smallest eps with ``kov_delta(eps0, delta0, m, eps) <= delta`` (upper end of a bisection bracket).

    ``inf`` when delta < 1 - (1 - delta0)^m (the failure mass alone exceeds the target).
    """
    delta = V.delta(delta)
    if kov_delta(eps0, delta0, m, math.inf) > delta:
        return math.inf
    if kov_delta(eps0, delta0, m, 0.0) <= delta:
        return 0.0
    lo, hi = 0.0, m * eps0  # delta_RR(m eps0) = 0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if kov_delta(eps0, delta0, m, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


# -------------------------------------------------------------------------------- the plug-in
@register
@dataclass(frozen=True)
class StageWiseSVT(AtomicMechanism):
    """Stage-wise generalized SVT (Alg. 12) certified as m = ceil(c/c') (eps_s, delta')-DP stages.

    Parameters
    ----------
    threshold_noise, threshold_scale, query_noise, query_scale, sensitivity, nonnegative, threshold
        As in :class:`~mechanisms.svt.GeneralizedSVT` (noise families, scales, Delta, Q+ flag, public T).
    cutoff : int
        Total cut-off c >= 1.
    stage_cutoff : int
        Per-stage cut-off 1 <= c' <= c.
    stage_delta : float
        delta' in (0, 1) of each stage's RDP -> (eps_s, delta') conversion.
    stage_max_length : int or None
        Per-stage cap k'_max (required unless the stage bound holds for unbounded length).
    resample : bool
        Threshold noise redrawn after every top (then c' is an analysis parameter only, Remark 7.2.11).
    stage_rule : {"improved", "classic"}
        RDP -> DP rule of step 2 ("classic" reproduces the thesis' numbers).

    Notes
    -----
    An (eps, delta) block: ``infinite_loss_mass`` = 1 - (1 - delta')^m, conditional RDP m RR_{eps_s}(alpha),
    pure (conditional) epsilon m eps_s; the characteristic-function route composes it exactly (KOV).
    Upper bound, data-independent, adaptive queries.
    """

    threshold_noise: str
    threshold_scale: float
    query_noise: str
    query_scale: float
    cutoff: int
    stage_cutoff: int
    stage_delta: float
    sensitivity: float = 1.0
    stage_max_length: int | None = None
    resample: bool = False
    nonnegative: bool = False
    threshold: float | None = None
    stage_rule: str = "improved"

    name = "stagewise_svt"
    tight: ClassVar[bool] = False
    field_checks = {"cutoff": check(V.integer, label="cutoff (total c)", low=1),
                    "stage_cutoff": check(V.integer, label="stage_cutoff (c')", low=1,
                                          high=field_ref("cutoff")),
                    "stage_delta": V.open_unit, "stage_rule": check(V.one_of, options=STAGE_RULES)}

    @property
    def pld_available(self) -> bool:  # type: ignore[override]
        """The stages' atoms RR(eps_s)^m are enumerated for the characteristic-function route only up to
        ``RR_ATOMS_MAX`` stages (beyond, the RDP route alone: bounded work, still certified)."""
        return self.stages <= RR_ATOMS_MAX

    def __post_init__(self):
        super().__post_init__()
        # the stage (a GeneralizedSVT) checks and normalises the remaining fields
        stage = GeneralizedSVT(self.threshold_noise, self.threshold_scale, self.query_noise, self.query_scale,
                               self.sensitivity, self.stage_cutoff, self.resample, self.stage_max_length,
                               self.nonnegative, self.threshold)
        for f in ("threshold_scale", "query_scale", "sensitivity", "resample", "nonnegative", "threshold"):
            object.__setattr__(self, f, getattr(stage, f))
        object.__setattr__(self, "stage_max_length", stage.max_length)
        eps_s = eps_from_rdp(stage.rdp, self.stage_delta, pure_eps=stage.pure_epsilon,
                             rule=self.stage_rule).value
        object.__setattr__(self, "_stage", stage)
        object.__setattr__(self, "_eps_s", float(eps_s))

    # ------------------------------------------------------------------ derived quantities
    @property
    def stage_mechanism(self) -> GeneralizedSVT:
        """The per-stage generalized SVT (cut-off c', cap k'_max)."""
        return self._stage  # type: ignore[attr-defined]

    @property
    def stages(self) -> int:
        """m = ceil(c / c')."""
        return -(-self.cutoff // self.stage_cutoff)

    @property
    def stage_epsilon(self) -> float:
        """eps_s: the per-stage (eps_s, delta') guarantee from the stage RDP curve (upper bound)."""
        return self._eps_s  # type: ignore[attr-defined]

    def epsilon(self, delta: float) -> float:
        """KOV-optimal eps(delta) of this run alone (exact composition of the m stage guarantees)."""
        return kov_epsilon(self.stage_epsilon, self.stage_delta, self.stages, delta)

    # ------------------------------------------------------------------ contract
    @property
    def infinite_loss_mass(self) -> float:
        """1 - (1 - delta')^m = -expm1(m log1p(-delta')) rounded up past its rounding: log1p (2 u, libm's
        ulp doubled) and the product move X = m log1p(-delta') by <= 3.01 u |X|, hence p by <= 3.02 u
        |X| e^X <= 3.02 u p (y e^-y <= 1 - e^-y), and expm1 adds 2 u: p (1 + 8 u) rounded up is >= p."""
        p = -math.expm1(self.stages * math.log1p(-self.stage_delta))
        return min(1.0, math.nextafter(p * (1.0 + 8.0 * 2.0**-53), math.inf))

    def _atom_mass_rel_err(self) -> float:
        """The RR power's masses (``rr_power_mass_rel_err``) against the pair whose finite part is
        (1 - p_inf) RR(eps_s)^m with ``infinite_loss_mass`` rounded up: their e^{log_scale} is the real
        (1 - delta')^m, larger by (p_inf - p) / (1 - p) <= 16 u p_inf / (1 - p_inf) (capped at 1: the
        finite masses are then all within themselves of 0)."""
        eps, m, log_scale = self._rr_power()
        p = self.infinite_loss_mass
        shift = min(1.0, 16.0 * 2.0**-53 * p / (1.0 - p)) if p < 1.0 else 1.0
        return rr_power_mass_rel_err(eps, m, log_scale, 4.0 * 2.0**-53 * abs(log_scale) + 1.01 * shift)

    @property
    def pure_epsilon(self) -> float:
        """m eps_s, rounded up."""
        return mul_up(self.stages, self.stage_epsilon)

    def rdp(self, alpha) -> np.ndarray:
        """Conditional RDP m * RR_{eps_s}(alpha) (the failure mass is ``infinite_loss_mass``), rounded up."""
        al = V.alphas(alpha)
        vals = rr_k_curve(np.ascontiguousarray(al.ravel()), self.stage_epsilon, 2)
        return scale_up(self.stages, vals).reshape(al.shape)

    def _atoms(self) -> tuple[np.ndarray, np.ndarray]:
        return rr_power_atoms(self.stage_epsilon, self.stages, self.stages * math.log1p(-self.stage_delta))

    def _rr_power(self) -> tuple[float, int, float] | None:
        return self.stage_epsilon, self.stages, self.stages * math.log1p(-self.stage_delta)


def best_stagewise(threshold_noise: str, threshold_scale: float, query_noise: str, query_scale: float, *,
                   cutoff: int, delta: float, stage_cutoffs=None, fractions=None, sensitivity: float = 1.0,
                   stage_max_length: int | None = None, resample: bool = True, nonnegative: bool = False,
                   threshold: float | None = None,
                   stage_rule: str = "improved") -> tuple[float, StageWiseSVT]:
    """Search the analysis parameters of a stage-wise certificate for one run (Remark 7.2.11).

    Tries every c' in ``stage_cutoffs`` (default: 1, 2, 5, 10, 20, 50, ... <= c, plus c; only meaningful
    with ``resample=True`` and no stage cap, where Alg. 12 is the same algorithm for every c'; otherwise
    ``stage_cutoffs`` must be exactly [c'], the c' the run actually uses, else ValueError) and every
    split delta' = f delta / m for f in ``fractions``.
    Returns (eps, mechanism) with the smallest KOV eps at ``delta``; every candidate is a valid upper
    bound, so the search only affects tightness.
    """
    delta = V.delta(delta)
    same_algorithm = resample and stage_max_length is None
    if not same_algorithm:
        # without resampling (or with a stage cap) the stage cut-off c' is part of the algorithm that
        # runs: searching over c' would certify a different algorithm than the one run
        if stage_cutoffs is None or len(list(stage_cutoffs)) != 1:
            raise ValueError("stage_cutoffs must be exactly [c'] (the stage cut-off the run uses) when "
                             "resample=False or stage_max_length is given: there c' defines the algorithm, "
                             f"so it cannot be searched (got stage_cutoffs={stage_cutoffs!r})")
    if stage_cutoffs is None:
        cand = [1]
        k = 1
        while True:
            nxt = [x * k for x in (2, 5, 10)]
            cand += [x for x in nxt if x <= cutoff]
            k *= 10
            if k > cutoff:
                break
        stage_cutoffs = sorted(set(cand + [cutoff]))
    if fractions is None:
        fractions = np.linspace(0.05, 0.95, 19)
    best: tuple[float, StageWiseSVT] | None = None
    for cp in stage_cutoffs:
        m = -(-cutoff // int(cp))
        for f in fractions:
            mech = StageWiseSVT(threshold_noise, threshold_scale, query_noise, query_scale, cutoff, int(cp),
                                float(f) * delta / m, sensitivity, stage_max_length, resample, nonnegative,
                                threshold, stage_rule)
            eps = mech.epsilon(delta)
            if best is None or eps < best[0]:
                best = (eps, mech)
    assert best is not None
    return best
