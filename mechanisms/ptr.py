"""Generalized propose-test-release (PTR): data-dependent losses made publishable by a private test.

Source: Redberg, Zhu & Wang 2023, "Generalized PTR" (= Zhu 2023 thesis, ch. 6), with the corrections
derived in docs/derivations/generalized-ptr.md.  Notation: a proposal ``phi`` parameterises a mechanism
M_phi whose privacy loss is a *data-dependent* function eps_phi(X) (w.r.t. a fixed delta, the paper's Def.
4.1: for every neighbour X' of X, P[M(X) in S] <= e^{eps_phi(X)} P[M(X') in S] + delta), or eps_phi(alpha,
X) in RDP form.

DP route (Thm 4.3; docs/derivations/generalized-ptr.md §§1-2) -- the default.  Run M_phi only if a test T
passes, where

1. T is (eps_hat, delta_hat)-DP (any neighbouring relation the loss is stated for);
2. false positives are rare: for every X with eps_phi(X) > eps, P[T(X) = 1] <= delta';
3. the coins of T and of M_phi are independent and phi is fixed before the data are seen.

Then the algorithm (including its output "bottom" when the test fails) is

    (eps + eps_hat,  delta_hat + max(delta, delta'))-DP                 (proof of Thm 4.3;
    docs/derivations/generalized-ptr.md §1)

The paper's statement ``delta + delta_hat + delta'`` is looser; it is available with ``combine="sum"``.
The certificate depends on public parameters only and is issued whether or not the test passed.
:class:`GeneralizedPTR` is that certificate as a registered mechanism: an (eps, delta)-DP block
accounted by the four-point dominating pair (like :class:`mechanisms.randomized_response.ApproxDP`), so
it composes exactly with everything else in the ledger.

The tests and pipelines that produce these certificates from data (private upper bounds of the loss,
the distance test, classic PTR) are data algorithms: :mod:`accountant.adaptive.ptr`.

RDP route (docs/derivations/generalized-ptr.md §3, :class:`PTRRenyi`).  The paper's Thm B.5 is **false** as
printed (alpha = 10, delta' = 1e-5, eps_tilde = 1, eps(alpha) = 0.1 has exact RDP 0.7210 while Thm B.5
claims 0.1123).  We implement the corrected bound: with A = exp((alpha - 1) eps_hat(alpha)),

    pass line:  eps_hat(alpha) + eps(alpha)
    fail line:  log(A + max(A - (1 - delta')^alpha, 0) (exp((alpha - 1) eps_tilde(alpha)) - 1)) / (alpha - 1)
    RDP <= min( max(pass, fail),  eps_hat(alpha) + eps_tilde(alpha) ),

where eps_tilde is a data-independent worst-case RDP of M_phi (required finite).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import validation as V
from ._numerics import add_up, log_expm1
from .base import RELATIONS, Mechanism, check
from .lattice import FourPointPair
from .registry import from_dict, register

COMBINE_RULES = ("max", "sum")


def _relation(name: str, relation: str) -> str:
    """A neighbouring relation of :data:`mechanisms.base.RELATIONS`, or "any"."""
    if relation != "any" and relation not in RELATIONS:
        raise ValueError(f"{name} must be 'any' or one of {RELATIONS}, got {relation!r}")
    return relation


def _rdp_component(name: str, m: Mechanism) -> Mechanism:
    """A mechanism of the RDP route: no infinite-loss mass."""
    if not isinstance(m, Mechanism):
        raise TypeError(f"{name} must be a Mechanism, got {type(m).__name__}")
    if m.infinite_loss_mass > 0:
        raise ValueError(f"{name} must have no infinite-loss mass for the RDP route "
                         f"(got {m.infinite_loss_mass!r}); use the DP route (GeneralizedPTR)")
    return m


def _orders(name: str, orders) -> tuple[float, ...]:
    """Renyi orders > 1 as a non-empty tuple of floats."""
    out = tuple(float(V.alphas([o])[0]) for o in orders)
    if not out:
        raise ValueError(f"{name} must be non-empty (or None for all orders)")
    return out


# ---------------------------------------------------------------------------- DP route
def ptr_total_delta(delta: float, test_delta: float, false_positive: float, combine: str = "max") -> float:
    """delta of the Gen-PTR certificate: ``test_delta + max(delta, false_positive)`` (or the paper's sum).

    ``combine="max"`` is what the proof of Thm 4.3 establishes (docs/derivations/generalized-ptr.md §1);
    ``"sum"`` is the theorem as printed (``delta + delta_hat + delta'``).  Rounded up (the smallest float
    >= the exact sum).
    """
    V.one_of("combine", combine, options=COMBINE_RULES)
    if combine == "max":
        return add_up(test_delta, max(delta, false_positive))
    return add_up(test_delta, delta, false_positive)


@register
@dataclass(frozen=True)
class GeneralizedPTR(FourPointPair):
    """Certificate of one generalized-PTR release (Thm 4.3 with the tight delta), as a ledger entry.

    Parameters
    ----------
    epsilon : float
        Budget eps of the data-dependent loss: M_phi is run only if the test certifies
        eps_phi(X) <= epsilon.  >= 0.
    delta : float, default 0
        The delta w.r.t. which eps_phi is a data-dependent DP function, in [0, 1).
    test_epsilon, test_delta : float, default 0
        (eps_hat, delta_hat): DP parameters of the test, eps_hat >= 0, delta_hat in [0, 1).
    false_positive : float, default 0
        delta': P[test passes] for any X with eps_phi(X) > epsilon, in [0, 1).
    combine : {"max", "sum"}
        ``"max"``: delta_total = delta_hat + max(delta, delta') (proved); ``"sum"``: as printed.
    relation : {"any", "add_remove", "replace_one"}
        Neighbouring relation the data-dependent loss and the test are stated for (``"any"``: the
        caller's relation, e.g. PATE's vote change covers both record relations).  The accountant refuses
        to compose the certificate under another relation (docs/derivations/generalized-ptr.md §8).

    Notes
    -----
    The whole algorithm (output or bottom) is (epsilon + test_epsilon, delta_total)-DP; it is accounted
    by the four-point dominating pair of an (eps, delta)-DP mechanism (exact composition by the
    characteristic-function route; the RDP route uses the conditional randomized-response curve).
    ``tight = False``: a concrete PTR algorithm need not attain the dominating pair.
    """

    epsilon: float
    delta: float = 0.0
    test_epsilon: float = 0.0
    test_delta: float = 0.0
    false_positive: float = 0.0
    combine: str = "max"
    relation: str = "any"

    name = "generalized_ptr"
    tight = False
    field_checks = {"epsilon": V.nonnegative, "delta": V.half_open_unit, "test_epsilon": V.nonnegative,
                    "test_delta": V.half_open_unit, "false_positive": V.half_open_unit,
                    "combine": check(V.one_of, options=COMBINE_RULES), "relation": _relation}

    def __post_init__(self):
        super().__post_init__()
        if self.total_delta >= 1.0:
            raise ValueError(f"total delta {self.total_delta!r} of the PTR certificate must be < 1 "
                             "(test_delta + max(delta, false_positive))")

    @property
    def relations(self) -> tuple[str, ...]:  # type: ignore[override]
        return RELATIONS if self.relation == "any" else (self.relation,)

    @property
    def total_epsilon(self) -> float:
        """eps + eps_hat, rounded up (the smallest float >= the exact sum)."""
        return add_up(self.epsilon, self.test_epsilon)

    @property
    def total_delta(self) -> float:
        """delta_hat + max(delta, delta') (or the sum with ``combine="sum"``)."""
        return ptr_total_delta(self.delta, self.test_delta, self.false_positive, self.combine)

    @property
    def pure_epsilon(self) -> float:
        return self.total_epsilon

    @property
    def infinite_loss_mass(self) -> float:
        return self.total_delta



# ---------------------------------------------------------------------------- RDP route
def ptr_rdp_corrected(alpha, test_rdp, budget_rdp, worst_rdp, false_positive: float) -> np.ndarray:
    """Corrected RDP bound of generalized PTR (docs/derivations/generalized-ptr.md §3; replaces the false
    Thm B.5).

    Parameters
    ----------
    alpha : array_like
        Orders > 1 (finite).
    test_rdp : array_like
        eps_hat(alpha): RDP of the test in both directions.
    budget_rdp : array_like
        eps(alpha): the test guarantees P[T(X) = 1] <= delta' whenever eps_phi(alpha, X) > eps(alpha)
        (``+inf`` where no such guarantee is claimed).
    worst_rdp : array_like
        eps_tilde(alpha): data-independent RDP of M_phi (outgoing divergence for every dataset).
    false_positive : float
        delta' in [0, 1).

    Returns
    -------
    ndarray
        An upper bound on the RDP of the whole algorithm (derivation in the module docstring; the
        fail line uses a_0 >= (1 - delta')^alpha and a_0 + a_1 <= A for a_t = P_T(t)^alpha Q_T(t)^{1-alpha}).
    """
    a = V.alphas(alpha)
    fp = V.real("false_positive", false_positive, low=0.0, high=1.0, high_open=True)
    eh, eb, ew = (np.broadcast_to(np.asarray(x, dtype=float), a.shape) for x in (test_rdp, budget_rdp,
                                                                                  worst_rdp))
    if np.any(~np.isfinite(a)):
        raise ValueError("ptr_rdp_corrected needs finite orders")
    am1 = a - 1.0
    base = eh + ew  # always valid: eps_phi(alpha, X) <= eps_tilde(alpha), composition with the test
    log_a = am1 * eh
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_one_minus = a * math.log1p(-fp) if fp > 0 else np.zeros_like(a)
        # log(A - (1 - delta')^alpha), -inf where non-positive
        diff = log_one_minus - log_a
        log_excess = np.where(diff < 0, log_a + np.log(-np.expm1(np.minimum(diff, -1e-300))), -np.inf)
        log_em1 = log_expm1(am1 * ew)
        fail = np.logaddexp(log_a, log_excess + log_em1) / am1
    passing = eh + eb
    out = np.maximum(passing, fail)
    out = np.where(np.isfinite(eb), out, base)
    return np.minimum(out, base)


@register
@dataclass(frozen=True)
class PTRRenyi(Mechanism):
    """Generalized PTR accounted by RDP with the corrected bound (Thm B.5 corrected).

    The corrected bound and the counterexample to Thm B.5: docs/derivations/generalized-ptr.md §3.

    Parameters
    ----------
    test : Mechanism
        The test's release (its RDP curve is eps_hat(alpha); it must have no infinite-loss mass).
    budget : Mechanism
        A mechanism whose RDP curve is the budget eps(alpha) that the test certifies: for every
        alpha (in ``budget_orders`` if given), eps_phi(alpha, X) <= eps(alpha) or P[T(X) = 1] <= delta'.
        E.g. for Gaussian noise sigma with a tested local sensitivity <= b: ``Gaussian(sigma, b)``.
    worst_case : Mechanism
        Data-independent RDP of M_phi (eps_tilde(alpha)); must be finite where the bound is used.
    false_positive : float
        delta' in [0, 1).
    budget_orders : list of float, optional
        Orders at which the test's guarantee holds (default: all orders).  At other orders the
        bound is eps_hat + eps_tilde (composition with the worst case).

    Notes
    -----
    Upper bound (``tight = False``); RDP only (``pld_available = False``).
    """

    test: Mechanism
    budget: Mechanism
    worst_case: Mechanism
    false_positive: float
    budget_orders: tuple | None = None

    name = "ptr_renyi"
    tight = False
    field_checks = {"test": _rdp_component, "budget": _rdp_component, "worst_case": _rdp_component,
                    "false_positive": V.half_open_unit, "budget_orders": check(_orders, optional=True)}

    def rdp(self, alpha) -> np.ndarray:
        a = V.alphas(alpha)
        out = np.full(a.shape, np.inf)
        fin = np.isfinite(a)
        if not fin.any():
            return out
        af = a[fin]
        eh = np.asarray(self.test.rdp(af), dtype=float)
        ew = np.asarray(self.worst_case.rdp(af), dtype=float)
        eb = np.asarray(self.budget.rdp(af), dtype=float)
        if self.budget_orders is not None:
            sel = np.zeros(af.shape, dtype=bool)
            for o in self.budget_orders:
                sel |= np.isclose(af, o, rtol=1e-12, atol=0.0)
            eb = np.where(sel, eb, np.inf)
        out[fin] = ptr_rdp_corrected(af, eh, eb, ew, self.false_positive)
        return out

    @property
    def pure_epsilon(self) -> float:
        return self.test.pure_epsilon + max(self.worst_case.pure_epsilon, self.budget.pure_epsilon)

    def params(self) -> dict[str, Any]:
        out = super().params()
        if self.budget_orders is not None:
            out["budget_orders"] = list(self.budget_orders)
        return out

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> PTRRenyi:
        p = dict(params)
        for f in ("test", "budget", "worst_case"):
            if isinstance(p.get(f), dict):
                p[f] = from_dict(p[f])
        if p.get("budget_orders") is not None:
            p["budget_orders"] = tuple(p["budget_orders"])
        return cls(**p)
