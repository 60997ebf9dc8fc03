"""The user-facing accountant: compose mechanisms symbolically, certify (epsilon, delta) on demand."""

from __future__ import annotations

import math
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from conversions import contour, gaussian_dp, laplace_dp, rdp_to_dp
from mechanisms import _validate as V
from mechanisms.base import RELATIONS, Mechanism

from .certificate import Certificate
from .ledger import Ledger
from .state import atomic_write_text, dump_state, load_state

METHODS = ("auto", "cf", "rdp", "rdp_classic", "exact")
# "auto" stops evaluating routes once the best certified bound is within this relative distance of a
# certified lower bound on the truth: no valid bound from another route can be smaller than that
# lower bound, so the remaining routes could improve the answer by less than this fraction.
AUTO_SKIP_RTOL = 1e-6


class VacuousBoundWarning(UserWarning):
    """A certificate is trivial (epsilon = inf or delta = 1) because a mechanism has no finite bound."""


class NumericalRangeError(ValueError, FloatingPointError):
    """A query whose computation leaves the float range (extreme parameters): no certificate is given."""


class BudgetExceeded(RuntimeError):
    """Raised when a composition would exceed the accountant's privacy budget (nothing is recorded)."""


@dataclass(frozen=True)
class PrivacyBudget:
    """A target (epsilon, delta): a filter that refuses any composition that would exceed it.

    The check uses the certified epsilon (an upper bound), so an accepted composition is guaranteed
    to be (epsilon, delta)-DP.
    """

    epsilon: float
    delta: float

    def __post_init__(self):
        object.__setattr__(self, "epsilon", V.real("budget epsilon", self.epsilon, low=0.0))
        object.__setattr__(self, "delta", V.delta(self.delta, "budget delta"))


@dataclass(frozen=True)
class _Route:
    value: float  # certified upper bound of the queried quantity
    lower: float | None  # lower bound on the true value (None if unknown)
    estimate: float
    bound: str
    details: dict = field(default_factory=dict)


class PrivacyAccountant:
    """Symbolic privacy ledger with certified conversions.

    Parameters
    ----------
    relation : {"add_remove", "replace_one"}
        Neighbouring relation; every mechanism's parameters (sensitivities) are read under it.
    rtol : float
        Target relative accuracy of the numerical (characteristic-function) route.
    budget : PrivacyBudget, optional
        If given, ``compose``/``step`` raise :class:`BudgetExceeded` instead of recording a
        composition whose certified epsilon at ``budget.delta`` would exceed ``budget.epsilon``.

    Examples
    --------
    >>> from mechanisms import Gaussian
    >>> acct = PrivacyAccountant()
    >>> acct.compose(Gaussian(sigma=2.0), times=100)
    PrivacyAccountant(relation='add_remove', ledger=[100 x gaussian(sigma=2, sensitivity=1)])
    >>> round(acct.epsilon(1e-5), 4)
    33.1037
    """

    def __init__(self, relation: str = "add_remove", rtol: float = contour.DEFAULT_RTOL,
                 budget: PrivacyBudget | None = None):
        if relation not in RELATIONS:
            raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
        self.relation = relation
        self.rtol = V.real("rtol", rtol, low=1e-14, high=1e-2)
        if budget is not None and not isinstance(budget, PrivacyBudget):
            raise TypeError("budget must be a PrivacyBudget")
        self.budget = budget
        self._ledger = Ledger()
        self._pld_cache: dict[str, contour.ComposedPLD] = {}
        self._last_step: tuple | None = None

    # ------------------------------------------------------------------ composition
    @property
    def ledger(self) -> Ledger:
        """A copy of the symbolic ledger."""
        return self._ledger.copy()

    def compose(self, mechanism: Mechanism, times: int = 1) -> PrivacyAccountant:
        """Record ``times`` uses of ``mechanism`` (O(1); nothing is evaluated).

        Raises :class:`BudgetExceeded` (recording nothing) if a budget is set and would be exceeded.
        """
        if not isinstance(mechanism, Mechanism):
            raise TypeError(f"mechanism must be a mechanisms.Mechanism, got {type(mechanism).__name__}")
        times = V.count("times", times)
        if self.relation not in mechanism.relations:
            raise ValueError(f"{mechanism.describe()} is not defined under the {self.relation!r} relation "
                             f"(supported: {mechanism.relations})")
        if self.budget is not None and times:
            trial = self._copy_with(mechanism, times)
            eps = trial.epsilon(self.budget.delta)
            if eps > self.budget.epsilon:
                raise BudgetExceeded(
                    f"composing {times} x {mechanism.describe()} would give epsilon {eps:.6g} > budget "
                    f"{self.budget.epsilon:.6g} at delta {self.budget.delta:.3g}; nothing recorded")
        self._ledger.add(mechanism, times)
        self._pld_cache.clear()
        self._last_step = None
        return self

    def _copy_with(self, mechanism: Mechanism, times: int) -> PrivacyAccountant:
        trial = PrivacyAccountant(self.relation, self.rtol)
        trial._ledger = self._ledger.copy()
        trial._ledger.add(mechanism, times)
        return trial

    def step(self, sigma: float | None = None, sample_rate: float | None = None, steps: int = 1, *,
             noise_multiplier: float | None = None, sensitivity: float = 1.0) -> PrivacyAccountant:
        """Record ``steps`` DP-SGD steps: Poisson-subsampled Gaussian with noise multiplier ``sigma``.

        O(1) per call: repeated calls with the same (sigma, sample_rate) only increment a counter.
        ``noise_multiplier`` is accepted as an alias of ``sigma`` (Opacus naming).
        """
        if noise_multiplier is not None:
            if sigma is not None and sigma != noise_multiplier:
                raise ValueError("give either sigma or noise_multiplier, not both")
            sigma = noise_multiplier
        if sigma is None or sample_rate is None:
            raise TypeError("step() needs sigma (or noise_multiplier) and sample_rate")
        steps = V.count("steps", steps)
        key = (sigma, sample_rate, sensitivity)
        if self._last_step is not None and self._last_step[0] == key and self.budget is None:
            mech = self._last_step[1]
            if steps:
                self._ledger.add(mech, steps)  # checks the entry's total against 10^12
                self._pld_cache.clear()
            return self
        from mechanisms.subsampled import SubsampledGaussian

        mech = SubsampledGaussian(sigma=sigma, sample_rate=sample_rate, sensitivity=sensitivity)
        self.compose(mech, steps)
        if steps and mech in self._ledger._counts:
            self._last_step = (key, mech)
        return self

    # ------------------------------------------------------------------ curves
    def rdp(self, alpha) -> np.ndarray:
        """Composed RDP curve at orders ``alpha`` (> 1)."""
        return self._ledger.rdp(alpha)

    def _pld(self, direction: str) -> contour.ComposedPLD:
        if direction not in self._pld_cache:
            self._pld_cache[direction] = contour.ComposedPLD(self._ledger.items(), direction)
        return self._pld_cache[direction]

    def _directions(self) -> tuple[str, ...]:
        return ("remove",) if self._ledger.symmetric else ("remove", "add")

    # ------------------------------------------------------------------ routes for eps(delta)
    def _valid_methods(self) -> list[str]:
        """Valid routes, in the order "auto" tries them (tightest and cheapest first)."""
        out = []
        if self._ledger.exact_form is not None:
            out.append("exact")
        if self._ledger.pld_available:
            out.append("cf")
        out += ["rdp", "rdp_classic"]
        return out

    def _exact_form(self) -> tuple[str, float]:
        form = self._ledger.exact_form
        if form is None:
            raise ValueError("method='exact' needs a closed-form ledger: Gaussian mechanisms only "
                             "(any number) or a single use of one Laplace mechanism")
        return form

    def _eps_route(self, method: str, delta: float) -> _Route:
        led = self._ledger
        if not led:
            return _Route(0.0, 0.0, 0.0, "exact")
        if method == "exact":
            kind, x = self._exact_form()
            if kind == "gaussian":
                eps, err = gaussian_dp.gaussian_epsilon(delta, x)
            else:
                eps, err = laplace_dp.laplace_epsilon(delta, x)
            return _Route(eps, max(eps - err, 0.0), eps - err / 2, "exact",
                          {"mu" if kind == "gaussian" else "a": x})
        if method in ("rdp", "rdp_classic"):
            rule = "improved" if method == "rdp" else "classic"
            r = rdp_to_dp.eps_from_rdp(led.rdp, delta, pure_eps=led.pure_epsilon,
                                       inf_mass=led.infinite_loss_mass, rule=rule)
            return _Route(r.value, None, r.value, "upper bound", {"alpha": r.alpha, "rule": rule})
        if method == "cf":
            return self._cf_route([contour.epsilon_bounds(self._pld(d), delta, self.rtol)
                                   for d in self._directions()])
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")

    def _cf_route(self, res: list) -> _Route:
        """Worst direction of the characteristic-function route (bounds per direction in ``res``)."""
        led = self._ledger
        worst = max(res, key=lambda r: r.upper)
        lower = max(r.lower for r in res) if led.tight else None
        # "exact"/"bracketed" describe the pair; for mechanisms not attaining their pair it is an upper bound
        if not led.tight:
            bound = "upper bound"
        else:
            bound = "exact" if worst.details.get("exact") else "bracketed"
        det = {"direction": worst.direction, **{k: v for k, v in worst.details.items()
                                                  if isinstance(v, (int, float, str, bool))}}
        return _Route(worst.upper, lower, max(r.estimate for r in res), bound, det)

    def _delta_route(self, method: str, eps: float) -> _Route:
        led = self._ledger
        if not led:
            d = -math.expm1(eps) if eps < 0 else 0.0
            return _Route(d, d, d, "exact")
        if method == "exact":
            kind, x = self._exact_form()
            if kind == "gaussian":
                d = gaussian_dp.gaussian_delta(eps, x)
                err = d * gaussian_dp.gaussian_error_factor(eps, x)
            else:
                d, err = laplace_dp.laplace_delta(eps, x)
            return _Route(min(1.0, d + err), max(d - err, 0.0), d, "exact",
                          {"mu" if kind == "gaussian" else "a": x})
        if method in ("rdp", "rdp_classic"):
            rule = "improved" if method == "rdp" else "classic"
            r = rdp_to_dp.delta_from_rdp(led.rdp, eps, pure_eps=led.pure_epsilon,
                                         inf_mass=led.infinite_loss_mass, rule=rule)
            return _Route(r.value, None, r.value, "upper bound", {"alpha": r.alpha, "rule": rule})
        if method == "cf":
            return self._cf_route([contour.delta_bounds(self._pld(d), eps, self.rtol)
                                   for d in self._directions()])
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")

    def _select(self, method: str, fn, compare: bool = False) -> tuple[str, _Route, dict]:
        """Evaluate ``method`` (or, for "auto", the valid routes) and pick the smallest bound.

        "auto" tries the routes tightest first (exact, cf, rdp) and stops once the best bound is
        within ``AUTO_SKIP_RTOL`` of the best certified lower bound (every valid bound is at least
        that lower bound, so no later route can do better by more); ``compare=True`` evaluates all.
        """
        if method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {method!r}")
        if method != "auto":
            if method not in self._valid_methods() and self._ledger:
                raise ValueError(f"method {method!r} is not available for this ledger "
                                 f"(available: {self._valid_methods()})")
            chosen = fn(method)
            if not compare:
                return method, chosen, {}
            # compare with a fixed method: every valid route is evaluated and listed, the certificate
            # stays the requested method's
            cands = {method: chosen.value}
            for m in self._valid_methods() if self._ledger else []:
                if m not in cands and m != "rdp_classic":
                    cands[m] = fn(m).value
            return method, chosen, cands
        routes: dict[str, _Route] = {}
        skipped: list[str] = []
        lower = None
        for m in self._valid_methods():
            if m == "rdp_classic":
                continue  # never better than "rdp"
            if routes and not compare and lower is not None:
                best_val = min(r.value for r in routes.values())
                if best_val - lower <= AUTO_SKIP_RTOL * abs(best_val):
                    skipped.append(m)
                    continue
            r = routes[m] = fn(m)
            if r.lower is not None:
                lower = r.lower if lower is None else max(lower, r.lower)
        if not routes:
            routes["rdp"] = fn("rdp")
        best = min(routes, key=lambda m: routes[m].value)
        chosen = routes[best]
        details = chosen.details
        if skipped:
            details = {**details, "skipped_routes": ",".join(skipped)}
        chosen = _Route(chosen.value, lower if lower is not None else chosen.lower, chosen.estimate,
                        chosen.bound, details)
        return best, chosen, {m: r.value for m, r in routes.items()}

    # ------------------------------------------------------------------ public queries
    def epsilon(self, delta: float, method: str = "auto") -> float:
        """Certified epsilon (upper bound) at ``delta`` in (0, 1)."""
        return self.certificate(delta=delta, method=method).epsilon

    def delta(self, epsilon: float, method: str = "auto") -> float:
        """Certified delta (upper bound) at ``epsilon`` >= 0."""
        return self.certificate(epsilon=epsilon, method=method).delta

    def certificate(self, *, delta: float | None = None, epsilon: float | None = None,
                    method: str = "auto", compare: bool = False) -> Certificate:
        """Certificate for eps(``delta``) or delta(``epsilon``) (give exactly one).

        ``method="auto"`` returns the smallest certified bound over the valid routes, naming the
        winner; the bounds of the routes it evaluated are listed in ``candidates``.  Routes are tried
        tightest first (exact closed form, then characteristic function, then RDP); a route is skipped
        only when the best bound so far is within ``AUTO_SKIP_RTOL`` (1e-6, relative) of a certified
        lower bound on the true value, which no valid bound can undercut (the skipped routes are
        named in ``details["skipped_routes"]``).  ``compare=True`` evaluates every valid route.
        """
        if (delta is None) == (epsilon is None):
            raise ValueError("give exactly one of delta= or epsilon=")
        if not isinstance(compare, bool):
            raise TypeError(f"compare must be True or False, got {compare!r}")
        if delta is not None:
            delta = V.delta(delta)
            name, r, cands = self._guarded(method, lambda m: self._eps_route(m, delta), compare,
                                           f"delta={delta!r}")
            trivial = not math.isfinite(r.value)
            return Certificate(epsilon=r.value, delta=delta, method=name,
                               error=max(r.value - r.estimate, 0.0) if math.isfinite(r.value) else math.inf,
                               lower_bound=r.lower, bound=r.bound, relation=self.relation,
                               query="epsilon", ledger=tuple(self._ledger.summary()), candidates=cands,
                               details=self._explain(r.details, trivial, "epsilon = inf"))
        epsilon = V.epsilon(epsilon)
        name, r, cands = self._guarded(method, lambda m: self._delta_route(m, epsilon), compare,
                                       f"epsilon={epsilon!r}")
        return Certificate(epsilon=epsilon, delta=r.value, method=name,
                           error=max(r.value - r.estimate, 0.0), lower_bound=r.lower, bound=r.bound,
                           relation=self.relation, query="delta", ledger=tuple(self._ledger.summary()),
                           candidates=cands, details=self._explain(r.details, r.value >= 1.0, "delta = 1"))

    def _guarded(self, method: str, fn, compare: bool, query: str):
        """:meth:`_select`, with float-range failures (overflow, division by zero, NaN stops) turned into
        :class:`NumericalRangeError` (a ValueError naming the query and the ledger)."""
        try:
            return self._select(method, fn, compare)
        except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
            if isinstance(exc, NumericalRangeError):
                raise
            raise NumericalRangeError(
                f"cannot certify {query} for [{'; '.join(self._ledger.summary())}]: the computation left the "
                f"float range ({type(exc).__name__}: {exc}); the parameters or the query value are too "
                "extreme") from exc

    def _explain(self, details: dict, trivial: bool, what: str) -> dict:
        """Add ``details["trivial_bound_reason"]`` (and warn) when the certificate is vacuous because a
        ledger entry has no finite bound, naming the entry and the condition it fails."""
        if not trivial:
            return details
        reasons = []
        for m, _ in self._ledger:
            why = m.unbounded_reason()
            if why:
                reasons.append(f"{m.describe()}: {why}")
        if not reasons:
            return details
        msg = f"vacuous certificate ({what}): " + "; ".join(reasons)
        warnings.warn(msg, VacuousBoundWarning, stacklevel=3)
        return {**details, "trivial_bound_reason": "; ".join(reasons)}

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> dict:
        return {"relation": self.relation, "rtol": self.rtol,
                "budget": None if self.budget is None else {"epsilon": self.budget.epsilon,
                                                             "delta": self.budget.delta},
                "ledger": self._ledger.to_list()}

    def save(self, path: str | os.PathLike) -> None:
        """Write the state as versioned JSON, atomically (a crash never leaves a partial file)."""
        atomic_write_text(path, dump_state(self.to_state()))

    @classmethod
    def from_state(cls, doc: dict) -> PrivacyAccountant:
        """Rebuild from :meth:`to_state`; ``ValueError`` (naming the field) for any malformed field.

        Everything is validated before the accountant is returned; nothing is shared with ``doc``.
        """
        if not isinstance(doc, dict):
            raise ValueError(f"state must be a JSON object, got {type(doc).__name__}")
        try:
            budget = doc.get("budget")
            if budget is not None:
                if not isinstance(budget, dict) or set(budget) != {"epsilon", "delta"}:
                    raise ValueError("state 'budget' must be null or {'epsilon', 'delta'}")
                budget = PrivacyBudget(budget["epsilon"], budget["delta"])
            relation = doc.get("relation", "add_remove")
            if not isinstance(relation, str):
                raise ValueError(f"state 'relation' must be one of {RELATIONS}, got {relation!r}")
            acct = cls(relation=relation, rtol=doc.get("rtol", contour.DEFAULT_RTOL), budget=budget)
            acct._ledger = Ledger.from_list(doc.get("ledger", []))
        except TypeError as exc:  # a field of the wrong JSON type: the state is unusable
            raise ValueError(f"invalid state: {exc}") from None
        except RecursionError:
            raise ValueError("invalid state: mechanisms nested too deeply") from None
        for m, _ in acct._ledger:
            if acct.relation not in m.relations:
                raise ValueError(f"{m.describe()} is not defined under relation {acct.relation!r}")
        return acct

    @classmethod
    def load(cls, path: str | os.PathLike) -> PrivacyAccountant:
        """Load a state file written by :meth:`save` (``ValueError`` if corrupted or too new)."""
        return cls.from_state(load_state(path))

    def __repr__(self) -> str:
        return f"PrivacyAccountant(relation={self.relation!r}, ledger=[{'; '.join(self._ledger.summary())}])"
