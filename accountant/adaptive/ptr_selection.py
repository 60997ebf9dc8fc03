"""PTR with hyper-parameter selection by random stopping (Redberg, Zhu & Wang
2023, Alg 3 / Thm 4.6).

Algorithm: draw J ~ Geometric(gamma) on {1, 2, ...}, run min(J, T) independent generalized-PTR calls,
each with a proposal drawn uniformly (with replacement) from the candidates, score every output with a
*public* validation score (score(bottom) = -inf) and release only the best (output, proposal).  The
per-call certificate must be the same (eps*, delta*) for every candidate (the uniform draw then makes one
call a data-independent mixture of (eps*, delta*)-DP mechanisms); intermediate results stay hidden.

Guarantee: delegated to the private-selection plug-in :class:`mechanisms.selection.HardStopSelection`
(Liu & Talwar 2019, Thm 3.4 with corrected constants, docs/derivations/private-selection.md §2: (3 eps*, (1
+ e^{3 eps*}) (delta* E[min(J, T)] + (1 - gamma)^T)) with T = :func:`mechanisms.selection.hard_stop_steps`).
The paper's Thm 4.6 constants (3 eps* + 3 sqrt(2 delta*), sqrt(2 delta*) T + delta_2) rest on a proof that is
flawed (docs/derivations/private-selection.md §2) and are much looser for small
delta*; they are exposed for comparison only (:func:`liu_talwar_printed`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mechanisms import validation as V
from mechanisms.base import Mechanism
from mechanisms.ptr import GeneralizedPTR
from mechanisms.selection import HardStopSelection, hard_stop_steps

from .ptr import BOTTOM, PTRResult


def liu_talwar_printed(epsilon_star: float, delta_star: float, stop_prob: float,
                       delta_2: float) -> tuple[float, float]:
    """Thm 4.6 as printed (read as in Liu & Talwar 2019): (3 eps* + 3 sqrt(2 delta*), sqrt(2 delta*) T +
    delta_2).

    T = ceil(log(1/delta_2)/gamma).  Comparison only (module docstring); not used for certificates.
    """
    es = V.real("epsilon_star", epsilon_star, low=0.0)
    ds = V.real("delta_star", delta_star, low=0.0, high=1.0, high_open=True)
    g = V.real("stop_prob", stop_prob, low=0.0, high=1.0, low_open=True)
    d2 = V.real("delta_2", delta_2, low=0.0, high=1.0, low_open=True, high_open=True)
    t = max(1, math.ceil(math.log(1.0 / d2) / g - 1e-12))
    return 3.0 * es + 3.0 * math.sqrt(2.0 * ds), math.sqrt(2.0 * ds) * t + d2


def selection_mechanism(epsilon_star: float, delta_star: float, stop_prob: float,
                        delta_2: float) -> Mechanism:
    """The certificate of :func:`ptr_select` as a registered mechanism (``HardStopSelection``)."""
    return HardStopSelection(epsilon1=epsilon_star, delta1=delta_star, gamma=stop_prob,
                                          delta2=delta_2)


def selection_cutoff(epsilon_star: float, stop_prob: float, delta_2: float) -> int:
    """Hard stop T of the selection (least T with (1 + e^{3 eps*}) (1 - gamma)^T <= delta_2)."""
    return hard_stop_steps(epsilon_star, stop_prob, delta_2)


def selection_budget(epsilon_total: float, delta_total: float, stop_prob: float,
                     delta_2: float) -> tuple[float, float]:
    """Per-call (eps*, delta*) so that the selection certificate is within (epsilon_total, delta_total).

    eps* = epsilon_total/3 (rounded down) and delta* = (delta_total/(1 + e^{3 eps*}) - (1 - gamma)^T) /
    E[min(J, T)], checked against :func:`selection_mechanism`.  Requires delta_2 < delta_total.
    """
    et = V.positive("epsilon_total", epsilon_total)
    dt = V.delta(delta_total, "delta_total")
    d2 = V.real("delta_2", delta_2, low=0.0, high=dt, low_open=True, high_open=True)
    g = V.real("stop_prob", stop_prob, low=0.0, high=1.0, low_open=True)
    es = et / 3.0 * (1.0 - 1e-13)
    t = selection_cutoff(es, g, d2)
    tail = math.exp(t * math.log1p(-g)) if g < 1.0 else 0.0
    calls = -math.expm1(t * math.log1p(-g)) / g if g < 1.0 else 1.0
    ds = (dt / (1.0 + math.exp(3.0 * es)) - tail) / calls * (1.0 - 1e-12)
    if ds <= 0:
        raise ValueError("delta_total too small for this stop_prob / delta_2")
    guar = selection_mechanism(es, ds, g, d2)
    if guar.pure_epsilon > et or guar.infinite_loss_mass > dt:
        raise ValueError("could not fit the per-call budget (numerical)")
    return es, ds


@dataclass(frozen=True)
class SelectionResult:
    """Best of the random-stopping PTR calls.

    ``phi`` is the selected candidate, ``best`` the winning call's :class:`PTRResult` (its ``phi`` is the
    calibrated proposal actually used), ``mechanism`` the selection certificate.
    """

    output: Any
    phi: Any
    score: float
    calls: int
    mechanism: Mechanism
    best: PTRResult | None = None


def ptr_select(candidates: Sequence[Any], call: Callable[[Any, np.random.Generator], PTRResult],
               score: Callable[[Any], float], *, epsilon_star: float, delta_star: float, stop_prob: float,
               delta_2: float, rng: np.random.Generator) -> SelectionResult:
    """Alg 3: generalized PTR over random proposals with random stopping (hard stop).

    ``call(phi, rng)`` runs one generalized-PTR call and must return a :class:`PTRResult` whose
    certificate is at most (epsilon_star, delta_star) (checked).  ``score(output)`` uses public data only;
    bottom scores -inf.  Only the best (output, phi) is returned; ``calls`` (a data-independent random
    variable) is reported for diagnostics.
    """
    if not candidates:
        raise ValueError("candidates must be non-empty")
    mech = selection_mechanism(epsilon_star, delta_star, stop_prob, delta_2)
    cutoff = selection_cutoff(epsilon_star, stop_prob, delta_2)
    n_calls = min(int(rng.geometric(stop_prob)), cutoff)
    best: tuple[float, Any, Any, PTRResult | None] = (-math.inf, BOTTOM, None, None)
    for _ in range(n_calls):
        phi = candidates[int(rng.integers(len(candidates)))]
        res = call(phi, rng)
        if not isinstance(res, PTRResult):
            raise TypeError("call must return a PTRResult")
        cert = res.mechanism
        if not isinstance(cert, GeneralizedPTR):
            raise TypeError("each call's certificate must be a GeneralizedPTR")
        over_eps = cert.total_epsilon > epsilon_star * (1 + 1e-12)
        if over_eps or cert.total_delta > delta_star * (1 + 1e-12):
            raise ValueError(f"call certificate ({cert.total_epsilon:.6g}, {cert.total_delta:.3g}) exceeds "
                             f"the per-call budget ({epsilon_star:.6g}, {delta_star:.3g})")
        s = score(res.output) if res.passed else -math.inf
        if s > best[0]:
            best = (s, res.output, phi, res)
    return SelectionResult(output=best[1], phi=best[2], score=best[0], calls=n_calls, mechanism=mech,
                           best=best[3])
