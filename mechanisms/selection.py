"""Private selection from private candidates (Liu & Talwar, STOC 2019; corrections in
docs/derivations/private-selection.md).

Setting (the paper's Sec. 1-2; docs/derivations/private-selection.md §0): a *candidate oracle* Q(D) draws a
candidate (from a data-independent law), runs it on the data and returns (x, q) = (candidate output, score).
If every candidate run is eps1-DP (resp. (eps1, delta1)-DP) then so is one call of Q.  The selection
algorithms call Q a random number of times and release **only the final output** (intermediate draws and the
number of calls must stay hidden).  Ties between scores must be broken by a fixed, data-independent order
(the proofs compare "better" and "equal" events).  The neighbouring relation is the candidates' relation.

Guarantees implemented here (all upper bounds; J = number of candidate calls):

=====================================  ==========================================================
variant                                 guarantee
=====================================  ==========================================================
random stopping (Alg. 2), geometric     pure 3 eps1 (Thm 3.2); (eps1, delta1) candidates:
                                        (3 eps1, 1 - E[(1-delta1)^J]) = (3 eps1,
                                        delta1 / (gamma + delta1 (1 - gamma)))  [derived, see below]
truncated random stopping, T calls      pure 3 eps1 + log(U / L) with u = T (1-gamma)^T,
                                        U = 1 + u / gamma, L = 1 - u - (1-gamma)^T (1 + T / (e (T-1)))
                                        [Thm 3.5's proof with its slack removed; <= 3 eps1 + 3 eps0 at
                                        the paper's T]; with delta1: delta = 1 - E[(1-delta1)^min(J,T)]
hard stop (Thm 3.4 parametrisation)     (3 eps1, 1 - E[(1-delta1)^min(J,T)] + (1 + e^{3 eps1})(1-gamma)^T)
                                        with T the least integer making the last term <= delta2
known threshold (Alg. 1), cap T         pure 2 eps1 + eps0(gamma, T) (Thm 3.1(b), eps0 from the
                                        proof's own inequalities, docs/derivations/private-selection.md §4);
                                        delta1 > 0: delta = min(Thm 3.1(c), (1 + e^eps) delta1 E[min(J,T)])
=====================================  ==========================================================

**Correction to Thm 3.4 (hard stop with (eps1, delta1) candidates).**  The paper's proof rests on
Lemma E.2/E.3, which are false as stated (docs/derivations/private-selection.md §2): E.3 bounds
Pr_{Q|B^c}[S] by Pr_Q[S] (wrong by a factor 1/(1 - Q(B)); counterexample P = point mass on a, Q = uniform on
{a, b}, B = {b}: P|B^c = Q|B^c but P is not (0, 0)-close to Q) and the event of E.2 only controls one
direction of the likelihood ratio.  We replace it by a proof that needs no such lemma.  By the
simulation theorem of Kairouz, Oh & Viswanath (2015), an (eps1, delta1)-close pair is a
post-processing K of the four-point pair, so P = delta1 K(e_0) + (1 - delta1) P' and
Q = delta1 K(e_3) + (1 - delta1) Q' with (P', Q') = K(RR(eps1)) pure eps1-close: every candidate
draw is, independently, "good" (a draw from P' resp. Q') with the same probability 1 - delta1 for
D and D'.  For Alg. 2 the number of calls J is independent of the draws, so with
c = E[(1 - delta1)^J]:  A(P) = c A(P') + (1 - c) X and A(Q) >= c A(Q'), whence
A(P)(E) <= c e^eps A(Q')(E) + 1 - c <= e^eps A(Q)(E) + (1 - c), eps the pure guarantee of the same
variant.  A hard stop compared with the untruncated algorithm adds (1 + e^{3 eps1}) Pr[J > T].
This gives delta ~ delta1 E[J] (the paper's is sqrt(2 delta1) T + delta2) and keeps eps = 3 eps1;
it also gives the untruncated random-stopping result for approximate-DP candidates, which the
paper does not state.  For Alg. 1 the stopping time depends on the draws; there we use the
paper's Thm 3.1(c) (direct proof, no Lemma E.2) or the cruder coupling bound
(1 + e^eps) delta1 E[#calls] (total-variation distance delta1 per call), whichever is smaller.

Pure results are accounted as randomized response (``PureDP``, the exact dominating pair of a pure
eps-DP mechanism); (eps, delta) results as the four-point (eps, delta) block (``ApproxDP``), i.e.
``infinite_loss_mass = delta`` and the conditional RR(eps) curve (see :mod:`mechanisms.base`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from .base import Mechanism, UnsupportedRoute, check
from .randomized_response import ApproxDP, PureDP
from .registry import register

__all__ = [
    "SelectionGuarantee",
    "random_stopping_guarantee", "truncated_random_stopping_guarantee", "hard_stop_guarantee",
    "known_threshold_guarantee", "truncation_steps", "hard_stop_steps", "known_threshold_steps",
    "known_threshold_epsilon0",
    "RandomStoppingSelection", "TruncatedRandomStoppingSelection", "HardStopSelection",
    "KnownThresholdSelection",
]


@dataclass(frozen=True)
class SelectionGuarantee:
    """(epsilon, delta) of a private selection, with compute-cost facts (not privacy costs).

    Attributes
    ----------
    epsilon, delta : float
        The selection's output is (epsilon, delta)-DP (delta = 0: pure DP).  Upper bound.
    max_calls : float
        Hard cap on candidate calls (``inf`` if unbounded; the number of calls is a.s. finite).
    expected_calls : float
        Upper bound on the expected number of candidate calls.
    source : str
        Theorem / derivation used.
    """

    epsilon: float
    delta: float
    max_calls: float
    expected_calls: float
    source: str

    def as_mechanism(self) -> Mechanism:
        """The guarantee as a composable block (``PureDP`` if delta = 0, else ``ApproxDP``)."""
        if self.delta == 0.0:
            return PureDP(self.epsilon)
        return ApproxDP(self.epsilon, self.delta)


# --------------------------------------------------------------------------- validation helpers
_GAMMA = check(V.probability, open_low=True)  # a stopping probability in (0, 1]
_STEPS = check(V.integer, low=1)  # a cap on the number of candidate runs, >= 1


def _eps1(x) -> float:
    return V.nonnegative("epsilon1", x)


def _delta1(x) -> float:
    return V.half_open_unit("delta1", x)


def _gamma(x) -> float:
    return _GAMMA("gamma", x)


def _steps(x, name: str = "max_steps") -> int:
    return _STEPS(name, x)


def _expected_truncated(gamma: float, steps: float) -> float:
    """E[min(J, T)] for J ~ Geometric(gamma) on {1, 2, ...}: (1 - (1-gamma)^T) / gamma."""
    if math.isinf(steps):
        return 1.0 / gamma
    if gamma == 1.0:
        return 1.0
    return -math.expm1(steps * math.log1p(-gamma)) / gamma


def _tv_delta(eps: float, delta1: float, calls: float, extra: float = 0.0) -> float:
    """(1 + e^eps) (delta1 calls + extra): total-variation coupling bound (module docstring)."""
    if delta1 == 0.0 and extra == 0.0:
        return 0.0
    return min(1.0, (1.0 + math.exp(eps)) * (delta1 * calls + extra))


def _bad_draw_mass(delta1: float, gamma: float, steps: float) -> float:
    """1 - E[(1 - delta1)^min(J, T)], J ~ Geometric(gamma): probability that some used draw is 'bad'.

    E[s^min(J,T)] = sum_{j<T} (1-gamma)^{j-1} gamma s^j + (1-gamma)^{T-1} s^T
                 = gamma s (1 - r^{T-1}) / (1 - r) + (1-gamma)^{T-1} s^T,  r = (1 - gamma) s;
    for T = inf: gamma s / (1 - r), so 1 - E = delta1 / (gamma + delta1 (1 - gamma)).
    """
    if delta1 == 0.0:
        return 0.0
    if math.isinf(steps):
        return min(1.0, delta1 / (gamma + delta1 * (1.0 - gamma)))
    t = int(steps)
    # 1 - E computed as a sum of non-negative terms to avoid cancellation:
    # 1 - E = sum_{j<T} P(J=j)(1 - s^j) + P(J>=T)(1 - s^T)
    log1ms = math.log1p(-delta1)
    if t <= 20000:
        j = np.arange(1, t, dtype=float)
        pj = gamma * np.exp((j - 1.0) * math.log1p(-gamma)) if gamma < 1.0 else (j == 1).astype(float)
        term = float(np.sum(pj * -np.expm1(j * log1ms)))
        tail = math.exp((t - 1) * math.log1p(-gamma)) if gamma < 1.0 else float(t == 1)
        return min(1.0, term + tail * -math.expm1(t * log1ms))
    # long caps: two upper bounds without cancellation -- the untruncated value (min(J, T) <= J) and
    # the union bound delta1 E[min(J, T)] (1 - s^j <= j delta1)
    untruncated = delta1 / (gamma + delta1 * (1.0 - gamma))
    return min(1.0, untruncated, delta1 * _expected_truncated(gamma, t))


def _check_delta(d: float, what: str) -> float:
    if not d < 1.0:
        raise ValueError(f"{what}: the resulting delta {d:.3g} is >= 1 (vacuous); use a smaller delta1 or "
                         f"a larger gamma")
    return d


# --------------------------------------------------------------------------- plain functions
def random_stopping_guarantee(epsilon1: float, gamma: float, delta1: float = 0.0) -> SelectionGuarantee:
    """Liu-Talwar Alg. 2 with geometric stopping: release the best of J ~ Geometric(gamma) candidates.

    Parameters
    ----------
    epsilon1 : float
        Each candidate call is epsilon1-DP (>= 0).
    gamma : float
        Stopping probability after each call, in (0, 1]; E[#calls] = 1 / gamma.
    delta1 : float, default 0
        Candidates' delta (>= 0, < 1).

    Returns
    -------
    SelectionGuarantee
        delta1 = 0: pure 3 epsilon1 (Thm 3.2, tight in the limit, docs/derivations/private-selection.md §1).
        delta1 > 0: (3 epsilon1, delta1 / (gamma + delta1 (1 - gamma))) <= (3 epsilon1, delta1 / gamma)
        (derived in the module docstring; not in the paper).  Upper bounds.

    Examples
    --------
    >>> g = random_stopping_guarantee(0.5, gamma=0.01)
    >>> (g.epsilon, g.delta)
    (1.5, 0.0)
    """
    e1, g, d1 = _eps1(epsilon1), _gamma(gamma), _delta1(delta1)
    eps = 3.0 * e1
    if d1 == 0.0:
        return SelectionGuarantee(eps, 0.0, math.inf, 1.0 / g, "Liu-Talwar Thm 3.2")
    d = _check_delta(_bad_draw_mass(d1, g, math.inf), "random stopping")
    return SelectionGuarantee(eps, d, math.inf, 1.0 / g,
                              "Liu-Talwar Thm 3.2 + mixture coupling (dpcert correction)")


def truncation_steps(gamma: float, epsilon0: float) -> int:
    """Thm 3.5's cap T = ceil((1/gamma)(ln A + ln ln A)), A = 2 (1+gamma)^2 / (epsilon0 gamma^2).

    ``epsilon0`` in (0, 1/2).  ln A is computed directly (A can overflow).
    """
    g = _gamma(gamma)
    e0 = V.real("epsilon0", epsilon0, low=0.0, high=0.5, low_open=True, high_open=True)
    log_a = math.log(2.0) + 2.0 * math.log1p(g) - math.log(e0) - 2.0 * math.log(g)
    steps = math.ceil((log_a + math.log(log_a)) / g)
    # the proof needs T (1-gamma)^T <= epsilon0 gamma / (1+gamma)^2: assert it explicitly
    lhs = math.log(steps) + steps * math.log1p(-g) if g < 1.0 else -math.inf
    if lhs > math.log(e0 * g) - 2.0 * math.log1p(g) + 1e-12:
        raise ArithmeticError("Thm 3.5 cap does not satisfy T(1-gamma)^T <= eps0 gamma/(1+gamma)^2")
    return max(int(steps), 2)


def _truncated_pure_excess(gamma: float, steps: int) -> float:
    """log(U/L) of the truncated random-stopping bound (module table); inf if L <= 0."""
    if steps == 1:
        return -math.inf  # a single call: post-processing, eps1
    if gamma == 1.0:
        return 0.0  # J = 1 always
    log_tail = steps * math.log1p(-gamma)  # log (1-gamma)^T
    tail = math.exp(log_tail)
    u = steps * tail
    upper = math.log1p(u / gamma)
    low = 1.0 - u - tail * (1.0 + steps / (math.e * (steps - 1.0)))
    if not low > 0.0:
        return math.inf
    return upper - math.log(low)


def truncated_random_stopping_guarantee(epsilon1: float, gamma: float, max_steps: int,
                                        delta1: float = 0.0) -> SelectionGuarantee:
    """Alg. 2 truncated at ``max_steps`` = T calls (J = min(Geometric(gamma), T)).

    Pure part (Thm 3.5, proof of App. A.2 with its slack removed, valid for every T >= 2):
    epsilon = 3 epsilon1 + log(1 + u/gamma) - log(1 - u - (1-gamma)^T (1 + T/(e (T-1)))), u = T (1-gamma)^T;
    a ``ValueError`` is raised if the logarithm's argument is not positive (T too small).  At the
    paper's T (:func:`truncation_steps`) this is <= 3 epsilon1 + log((1+eps0)/(1-eps0))
    <= 3 epsilon1 + 3 eps0.
    T = 1 is a single call (epsilon1, delta1).  delta1 > 0: delta = 1 - E[(1 - delta1)^min(J, T)]
    <= delta1 E[min(J, T)] (module docstring).
    """
    e1, g, d1 = _eps1(epsilon1), _gamma(gamma), _delta1(delta1)
    t = _steps(max_steps)
    calls = _expected_truncated(g, t)
    if t == 1:
        return SelectionGuarantee(e1, d1, 1.0, 1.0, "single call (post-processing)")
    excess = _truncated_pure_excess(g, t)
    if math.isinf(excess):
        raise ValueError(f"max_steps={t} is too small for gamma={g:g}: the truncation bound is vacuous; "
                         f"use at least truncation_steps(gamma, epsilon0) calls")
    eps = 3.0 * e1 + excess
    d = _check_delta(_bad_draw_mass(d1, g, t), "truncated random stopping")
    return SelectionGuarantee(eps, d, float(t), calls, "Liu-Talwar Thm 3.5 (slack removed)"
                              + (" + mixture coupling" if d1 else ""))


def hard_stop_steps(epsilon1: float, gamma: float, delta2: float) -> int:
    """Least T with (1 + e^{3 epsilon1}) (1 - gamma)^T <= delta2 (hard-stop cap, corrected Thm 3.4)."""
    e1, g = _eps1(epsilon1), _gamma(gamma)
    d2 = V.real("delta2", delta2, low=0.0, high=1.0, low_open=True, high_open=True)
    if g == 1.0:
        return 1
    need = math.log(d2) - math.log1p(math.exp(3.0 * e1))
    return max(1, math.ceil(need / math.log1p(-g)))


def hard_stop_guarantee(epsilon1: float, delta1: float, gamma: float, delta2: float) -> SelectionGuarantee:
    """Alg. 2 with a hard stop for (epsilon1, delta1)-DP candidates (Thm 3.4, corrected).

    T = :func:`hard_stop_steps` and
    (3 epsilon1, 1 - E[(1-delta1)^min(J,T)] + (1 + e^{3 epsilon1})(1-gamma)^T),
    the last term <= ``delta2`` (module docstring; replaces the paper's
    (3 epsilon1 + 3 sqrt(2 delta1), sqrt(2 delta1) T + delta2), whose proof is flawed).
    """
    e1, d1, g = _eps1(epsilon1), _delta1(delta1), _gamma(gamma)
    t = hard_stop_steps(e1, g, delta2)
    calls = _expected_truncated(g, t)
    eps = 3.0 * e1
    tail = math.exp(t * math.log1p(-g)) if g < 1.0 else 0.0
    d = _check_delta(min(1.0, _bad_draw_mass(d1, g, t) + (1.0 + math.exp(eps)) * tail), "hard stop")
    return SelectionGuarantee(eps, d, float(t), calls, "Liu-Talwar Thm 3.4 (corrected by coupling)")


def known_threshold_epsilon0(gamma: float, max_steps: int | None) -> float:
    """eps0(gamma, T) = max{-ln(1 - (1-gamma)^T), ln(1 + (1-gamma)^T / (e (T-1) gamma))}
    (docs/derivations/private-selection.md §4).

    The two inequalities of the proof of Thm 3.1(b) with the paper's sufficient condition on T
    removed; valid for every integer T >= 2 (0 for T = None, i.e. no cap).
    """
    g = _gamma(gamma)
    if max_steps is None:
        return 0.0
    t = _steps(max_steps)
    if t < 2:
        raise ValueError("max_steps must be >= 2 for the known-threshold bound (T = 1 is one call)")
    if g == 1.0:
        return 0.0
    log_tail = t * math.log1p(-g)
    a = -math.log(-math.expm1(log_tail))
    b = math.log1p(math.exp(log_tail) / (math.e * (t - 1.0) * g))
    return max(a, b)


def known_threshold_steps(gamma: float, epsilon0: float) -> int:
    """Alg. 1's cap T = ceil(max{(1/gamma) ln(2/epsilon0), 1 + 1/(e gamma)}), epsilon0 in (0, 1] (Thm 3.1)."""
    g = _gamma(gamma)
    e0 = V.real("epsilon0", epsilon0, low=0.0, high=1.0, low_open=True)
    return max(2, math.ceil(max(math.log(2.0 / e0) / g, 1.0 + 1.0 / (math.e * g))))


def known_threshold_guarantee(epsilon1: float, gamma: float, max_steps: int | None = None,
                              delta1: float = 0.0) -> SelectionGuarantee:
    """Alg. 1 (known threshold tau, gamma-coin after each below-threshold draw, at most T draws).

    Pure: 2 epsilon1 + eps0(gamma, T) (Thm 3.1(b); eps0 from :func:`known_threshold_epsilon0`, which is
    <= the paper's eps0 whenever the paper's condition on T holds).  delta1 > 0: delta =
    min((2 + e^{eps0}) e^{2 epsilon1} delta1 / gamma  [Thm 3.1(c), <= 3 e^{2 eps1 + eps0} delta1 / gamma],
        (1 + e^{epsilon}) delta1 (1 - (1-gamma)^T) / gamma  [coupling, module docstring]).
    ``max_steps=None``: no cap (halts a.s. because gamma > 0); max_steps = 1: one call (epsilon1, delta1).
    """
    e1, g, d1 = _eps1(epsilon1), _gamma(gamma), _delta1(delta1)
    if max_steps is not None and _steps(max_steps) == 1:
        return SelectionGuarantee(e1, d1, 1.0, 1.0, "single call (post-processing)")
    e0 = known_threshold_epsilon0(g, max_steps)
    eps = 2.0 * e1 + e0
    cap = math.inf if max_steps is None else float(max_steps)
    calls = _expected_truncated(g, cap)
    d = 0.0
    if d1 > 0.0:
        paper = (2.0 + math.exp(e0)) * math.exp(2.0 * e1) * d1 / g
        d = _check_delta(min(paper, _tv_delta(eps, d1, calls)), "known threshold")
    return SelectionGuarantee(eps, d, cap, calls, "Liu-Talwar Thm 3.1")


# --------------------------------------------------------------------------- plug-ins
class _SelectionMechanism(Mechanism):
    """Shared behaviour: the guarantee is accounted as PureDP(eps) or ApproxDP(eps, delta)."""

    tight = False
    pld_available = True

    def __post_init__(self):
        super().__post_init__()
        self.guarantee()  # raises when the resulting delta is vacuous

    def guarantee(self) -> SelectionGuarantee:  # pragma: no cover - abstract
        raise UnsupportedRoute(f"{type(self).__name__} must define guarantee()")

    def _block(self) -> Mechanism:
        return self.guarantee().as_mechanism()

    def rdp(self, alpha) -> np.ndarray:
        return self._block().rdp(alpha)

    @property
    def pure_epsilon(self) -> float:
        return self.guarantee().epsilon

    @property
    def infinite_loss_mass(self) -> float:
        return self.guarantee().delta

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        return self._block().log_mgf(s, direction)

    def pld_atoms(self, direction: str = "remove"):
        return self._block().pld_atoms(direction)

    def pld_cell_masses(self, edges, direction: str = "remove"):
        return self._block().pld_cell_masses(edges, direction)

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return -math.inf


@register
@dataclass(frozen=True)
class RandomStoppingSelection(_SelectionMechanism):
    """Best of a Geometric(``gamma``) number of candidate runs (Liu-Talwar Alg. 2).

    Parameters
    ----------
    epsilon1 : float
        Each candidate run is (epsilon1, delta1)-DP.
    gamma : float
        Stopping probability in (0, 1].
    delta1 : float, default 0
        Candidates' delta.

    See :func:`random_stopping_guarantee` for the guarantee (pure 3 epsilon1 if delta1 = 0).
    """

    epsilon1: float
    gamma: float
    delta1: float = 0.0

    name = "random_stopping_selection"
    field_checks = {"epsilon1": V.nonnegative, "gamma": _GAMMA, "delta1": V.half_open_unit}

    def guarantee(self) -> SelectionGuarantee:
        return random_stopping_guarantee(self.epsilon1, self.gamma, self.delta1)


@register
@dataclass(frozen=True)
class TruncatedRandomStoppingSelection(_SelectionMechanism):
    """Alg. 2 stopped after at most ``max_steps`` candidate runs (Thm 3.5, slack removed).

    Use :meth:`from_epsilon0` for the paper's parametrisation T = T(gamma, epsilon0).
    """

    epsilon1: float
    gamma: float
    max_steps: int
    delta1: float = 0.0

    name = "truncated_random_stopping_selection"
    field_checks = {"epsilon1": V.nonnegative, "gamma": _GAMMA, "max_steps": _STEPS,
                    "delta1": V.half_open_unit}

    def guarantee(self) -> SelectionGuarantee:
        return truncated_random_stopping_guarantee(self.epsilon1, self.gamma, self.max_steps, self.delta1)

    @classmethod
    def from_epsilon0(cls, epsilon1: float, gamma: float, epsilon0: float,
                      delta1: float = 0.0) -> TruncatedRandomStoppingSelection:
        return cls(epsilon1, gamma, truncation_steps(gamma, epsilon0), delta1)


@register
@dataclass(frozen=True)
class HardStopSelection(_SelectionMechanism):
    """Alg. 2 with a hard stop for (epsilon1, delta1)-DP candidates (Thm 3.4, corrected constants)."""

    epsilon1: float
    delta1: float
    gamma: float
    delta2: float

    name = "hard_stop_selection"
    field_checks = {"epsilon1": V.nonnegative, "delta1": V.half_open_unit, "gamma": _GAMMA,
                    "delta2": V.open_unit}

    def guarantee(self) -> SelectionGuarantee:
        return hard_stop_guarantee(self.epsilon1, self.delta1, self.gamma, self.delta2)


@register
@dataclass(frozen=True)
class KnownThresholdSelection(_SelectionMechanism):
    """Alg. 1: first candidate with score >= a fixed threshold, gamma-coin stopping, cap ``max_steps``.

    ``max_steps=None`` means no cap.  Use :meth:`from_epsilon0` for the paper's T(gamma, epsilon0).
    """

    epsilon1: float
    gamma: float
    max_steps: int | None = None
    delta1: float = 0.0

    name = "known_threshold_selection"
    field_checks = {"epsilon1": V.nonnegative, "gamma": _GAMMA,
                    "max_steps": check(V.integer, low=1, optional=True), "delta1": V.half_open_unit}

    def guarantee(self) -> SelectionGuarantee:
        return known_threshold_guarantee(self.epsilon1, self.gamma, self.max_steps, self.delta1)

    @classmethod
    def from_epsilon0(cls, epsilon1: float, gamma: float, epsilon0: float,
                      delta1: float = 0.0) -> KnownThresholdSelection:
        return cls(epsilon1, gamma, known_threshold_steps(gamma, epsilon0), delta1)
