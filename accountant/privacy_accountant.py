"""The user-facing accountant: compose mechanisms symbolically, certify (epsilon, delta) on demand."""

from __future__ import annotations

import math
import os
import warnings

import numpy as np

from conversions import contour
from conversions.bracket import Bracket
from mechanisms import validation as V
from mechanisms.base import RELATIONS, Mechanism

from . import routes
from .budget import BudgetExceeded, PrivacyBudget, check_budget
from .certificate import Certificate
from .ledger import Ledger
from .route_choice import (  # noqa: F401 (the auto rules, also read by tests and reports)
    AUTO_SKIP_ATOL_DELTA,
    AUTO_SKIP_RTOL,
    AUTO_TIME_LIMIT,
    AUTO_WORK_LIMIT,
    DEFER_ATOL_EPS,
    DEFER_RTOL,
    DEFERRED_WORK_LIMIT,
    select,
)
from .state import atomic_write_text, dump_state, load_state

#: The built-in ``method=`` values; routes registered later (:func:`accountant.routes.register_route`)
#: are accepted too.
METHODS = routes.methods()
# composition order kept for report(): at most this many runs (a run = consecutive uses of one mechanism)
MAX_HISTORY_RUNS = 100_000
class VacuousBoundWarning(UserWarning):
    """A certificate is trivial (epsilon = inf or delta = 1) because a mechanism has no finite bound."""


class NumericalRangeError(ValueError, FloatingPointError):
    """A query whose computation leaves the float range (extreme parameters): no certificate is given."""


class AccuracyWarning(UserWarning):
    """A certificate is valid but looser than requested (e.g. a route reached its per-query work limit);
    the reason is in ``certificate.details["warning"]``."""


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
    time_limit : float or None, default 2.0
        CPU seconds (of the querying thread: other processes' load does not count) a ``method="auto"``
        query may spend before it stops starting further numerical routes and refinements; the best
        certified bracket found so far is then returned, with ``details["time_limit"] = True`` and,
        when it is wider than the 1e-3 target, a warning (:class:`AccuracyWarning`).  A step already
        running finishes (each route bounds its own work), so a query can overrun the limit by about
        one step.  ``None``: no time limit (the routes' own work limits only); the answer is then the
        same on every machine.  Named methods (``method="cf"`` etc.) are never time-limited.

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
                 budget: PrivacyBudget | None = None, time_limit: float | None = AUTO_TIME_LIMIT):
        if relation not in RELATIONS:
            raise ValueError(f"relation must be one of {RELATIONS}, got {relation!r}")
        self.relation = relation
        self.rtol = V.real("rtol", rtol, low=1e-14, high=1e-2)
        self.time_limit = None if time_limit is None else V.real("time_limit", time_limit, low=0.0,
                                                                 high=1e6, low_open=True)
        if budget is not None and not isinstance(budget, PrivacyBudget):
            raise TypeError("budget must be a PrivacyBudget")
        self.budget = budget
        self._ledger = Ledger()
        self._cache: dict = {}  # per-ledger route caches (cleared on every composition)
        self._last_step: tuple | None = None
        # certified budget allowance: {mechanism: further uses known to keep epsilon within the budget}
        self._allowance: dict[Mechanism, int] = {}
        # the order of composition, as runs [mechanism, count] (for report(); not saved in state files)
        self._history: list[list] = []
        self._history_exact = True

    # ------------------------------------------------------------------ composition
    @property
    def ledger(self) -> Ledger:
        """A copy of the symbolic ledger."""
        return self._ledger.copy()

    def compose(self, mechanism: Mechanism, times: int = 1) -> PrivacyAccountant:
        """Record ``times`` uses of ``mechanism`` (O(1); nothing is evaluated).

        ``mechanism`` may also be a dp-accounting ``DpEvent`` tree (read duck-typed under this
        accountant's relation; see :mod:`accountant.dp_event` for the translation and its refusals).
        Raises :class:`BudgetExceeded` (recording nothing) if a budget is set and would be exceeded.
        """
        if not isinstance(mechanism, Mechanism):
            from .dp_event import is_dp_event, translate

            if is_dp_event(mechanism):
                times = V.count("times", times)
                return self._compose_entries([(m, k * times) for m, k in translate(mechanism, self.relation)])
            raise TypeError(f"mechanism must be a mechanisms.Mechanism, got {type(mechanism).__name__}")
        times = V.count("times", times)
        if self.relation not in mechanism.relations:
            raise ValueError(f"{mechanism.describe()} is not defined under the {self.relation!r} relation "
                             f"(supported: {mechanism.relations})")
        if self.budget is not None and times:
            self._check_budget(mechanism, times)
        self._ledger.add(mechanism, times)
        self._after_add(mechanism, times)
        self._last_step = None
        return self

    def _compose_entries(self, entries: list[tuple[Mechanism, int]]) -> PrivacyAccountant:
        """Record several ledger entries at once: all or nothing (budget and count limits are checked
        for the whole set first)."""
        entries = [(m, V.count("times", k)) for m, k in entries if k]
        if len(entries) == 1:
            return self.compose(*entries[0])
        if not entries:
            return self
        trial = PrivacyAccountant(self.relation, self.rtol, time_limit=self.time_limit)
        trial._ledger = self._ledger.copy()
        for m, k in entries:
            if self.relation not in m.relations:
                raise ValueError(f"{m.describe()} is not defined under the {self.relation!r} relation "
                                 f"(supported: {m.relations})")
            trial._ledger.add(m, k)  # raises (recording nothing here) past the count limit
        if self.budget is not None:
            e = trial.epsilon(self.budget.delta)
            if e > self.budget.epsilon:
                raise BudgetExceeded(
                    f"composing {'; '.join(f'{k} x {m.describe()}' for m, k in entries)} would give epsilon "
                    f"{e:.6g} > budget {self.budget.epsilon:.6g} at delta {self.budget.delta:.3g}; "
                    "nothing recorded")
        for m, k in entries:
            self._ledger.add(m, k)
            self._after_add(m, k)
        self._last_step = None
        return self

    def to_dp_event(self):
        """The ledger as a dp-accounting ``DpEvent`` (``SelfComposedDpEvent`` per entry with count > 1,
        a ``ComposedDpEvent`` of several entries, ``NoOpDpEvent`` when empty), in composition order.

        Raises ``ImportError`` (with an install hint) without dp-accounting and ``ValueError`` naming any
        entry without a dp-accounting equivalent (see :func:`accountant.dp_event.mechanism_to_dp_event`).
        """
        from .dp_event import ledger_to_dp_event

        return ledger_to_dp_event(self._history_entries(), self.relation)

    def _empty_like(self) -> PrivacyAccountant:
        """A new, empty accountant with this one's relation and accuracy target (no budget)."""
        return PrivacyAccountant(self.relation, self.rtol, time_limit=self.time_limit)

    @staticmethod
    def _auto_rules() -> tuple[float, float]:
        """(``AUTO_SKIP_RTOL``, ``AUTO_WORK_LIMIT``): when ``auto`` stops after a route, and its work
        limit per numerical query (the report's shared contour follows the same rules)."""
        return AUTO_SKIP_RTOL, AUTO_WORK_LIMIT

    def _history_entries(self) -> list[tuple[Mechanism, int]]:
        """The composition order as runs ``[(mechanism, count)]`` (the ledger's order where unknown: a
        loaded state file's entries come first, in the ledger's order, then what was composed since)."""
        if self._history_consistent():
            return [(m, k) for m, k in self._history]
        return self._ledger.items()

    def _history_consistent(self) -> bool:
        totals: dict[Mechanism, int] = {}
        for m, k in getattr(self, "_history", []):
            totals[m] = totals.get(m, 0) + k
        return totals == dict(self._ledger.items())

    def report(self, delta: float, every: int | None = None, *, steps=None, method: str = "auto",
               shared: bool = True):
        """The certified epsilon(``delta``) trajectory over the run: after every ``every`` compositions
        (and at the end), or at the given ``steps`` (counts of compositions, in composition order).

        Returns an :class:`accountant.report.PrivacyReport` (table ``str``, ``to_dict``/``to_json``,
        ``plot``); see :func:`accountant.report.trajectory` for the method and its cost.
        """
        from .report import trajectory

        return trajectory(self, delta, every=every, steps=steps, method=method, shared=shared)

    def _after_add(self, mechanism: Mechanism, times: int) -> None:
        """Bookkeeping after ``times`` uses of ``mechanism`` were recorded."""
        if times:
            self._cache.clear()
            hist = self.__dict__.setdefault("_history", [])
            if hist and (hist[-1][0] is mechanism or hist[-1][0] == mechanism):
                hist[-1][1] += times
            elif len(hist) < MAX_HISTORY_RUNS:
                hist.append([mechanism, times])
            else:  # bounded memory: reports fall back to the ledger's order (and say so)
                hist.clear()
                self._history_exact = False
        # an allowance holds for the ledger it was computed on plus uses of its own mechanism only
        left = self._allowance.get(mechanism, 0) - times
        self._allowance = {mechanism: left} if left > 0 else {}

    def _check_budget(self, mechanism: Mechanism, times: int) -> None:
        """Raise :class:`BudgetExceeded` unless ``times`` more uses of ``mechanism`` fit the budget
        (:func:`accountant.budget.check_budget`)."""
        check_budget(self, mechanism, times)

    def _copy_with(self, mechanism: Mechanism, times: int) -> PrivacyAccountant:
        trial = PrivacyAccountant(self.relation, self.rtol, time_limit=self.time_limit)
        trial._ledger = self._ledger.copy()
        trial._ledger.add(mechanism, times)
        return trial

    def step(self, sigma: float | None = None, sample_rate: float | None = None, steps: int = 1, *,
             noise_multiplier: float | None = None, sensitivity: float = 1.0,
             batch_size: int | None = None, dataset_size: int | None = None, sampling: str = "poisson",
             steps_per_epoch: int | None = None, steps_per_record: int | None = None) -> PrivacyAccountant:
        """Record ``steps`` DP-SGD steps with noise multiplier ``sigma`` and clipping norm ``sensitivity``.

        ``sampling`` says how the training code forms its batches (:mod:`accountant.sampling`):
        ``"poisson"`` (default: every record independently with probability ``sample_rate``, or
        ``batch_size / dataset_size``), ``"fixed_size"`` (a uniformly random batch of exactly
        ``batch_size`` records every step), ``"shuffle"`` (a random permutation per epoch cut into
        ``steps_per_epoch`` = ceil(n / b) consecutive batches) or ``"balls_in_bins"`` (every record in one
        uniformly random step per epoch, or in ``steps_per_record`` = k uniformly random steps of the
        ``steps_per_epoch`` (default ceil(k n / b)); k > 1 is an upper bound, Feldman & Shenfeld 2025).
        Shuffle and balls-in-bins are charged per epoch: an epoch is charged in full when its first step
        is recorded.

        O(1) per call: repeated calls with the same parameters only increment a counter; with a
        budget, only the first call (and a call past the certified allowance) runs tight queries.
        ``noise_multiplier`` is accepted as an alias of ``sigma`` (Opacus naming).
        """
        if noise_multiplier is not None:
            if sigma is not None and sigma != noise_multiplier:
                raise ValueError("give either sigma or noise_multiplier, not both")
            sigma = noise_multiplier
        if steps_per_record is not None and sampling == "poisson":
            raise ValueError("steps_per_record applies to sampling='balls_in_bins' only")
        if sampling != "poisson" or sample_rate is None:
            if sigma is None:
                raise TypeError("step() needs sigma (or noise_multiplier)")
            if sampling == "poisson" and batch_size is None and dataset_size is None:
                raise TypeError("step() needs sigma (or noise_multiplier) and sample_rate (or batch_size "
                                "and dataset_size)")
            return self._step_sampled(sigma, sample_rate, steps, sensitivity, batch_size, dataset_size,
                                      sampling, steps_per_epoch, steps_per_record)
        if sigma is None:
            raise TypeError("step() needs sigma (or noise_multiplier) and sample_rate")
        steps = V.count("steps", steps)
        key = (sigma, sample_rate, sensitivity)
        if self._last_step is not None and self._last_step[0] == key:
            mech = self._last_step[1]
            if steps:
                if self.budget is not None:
                    self._check_budget(mech, steps)  # O(1) within the certified allowance
                self._ledger.add(mech, steps)  # checks the entry's total against the count limit
                self._after_add(mech, steps)
            return self
        from mechanisms.subsampled import SubsampledGaussian

        mech = SubsampledGaussian(sigma=sigma, sample_rate=sample_rate, sensitivity=sensitivity)
        self.compose(mech, steps)
        if steps and mech in self._ledger._counts:
            self._last_step = (key, mech)
        return self

    def _step_sampled(self, sigma, sample_rate, steps, sensitivity, batch_size, dataset_size, sampling,
                      steps_per_epoch, steps_per_record=None) -> PrivacyAccountant:
        """``step`` for the non-default samplers (see :mod:`accountant.sampling`)."""
        from . import sampling as S

        mech, t = S.step_mechanism(sampling, self.relation, sigma, sample_rate=sample_rate,
                                   batch_size=batch_size, dataset_size=dataset_size,
                                   sensitivity=sensitivity, steps_per_epoch_=steps_per_epoch,
                                   steps_per_record=steps_per_record)
        steps = V.count("steps", steps)
        if t is None:
            return self.compose(mech, steps)
        progress = self.__dict__.setdefault("_epoch_progress", {})
        new, after = S.epochs_charged(progress.get(mech, 0), steps, t)
        self.compose(mech, new)  # raises (recording nothing) past the budget
        if steps:
            progress[mech] = after
            if not new:  # the epoch in progress advanced: the lower bound may change
                for key in [k for k in self._cache if isinstance(k, tuple) and k[:1] == ("attained_lower",)]:
                    del self._cache[key]
        return self

    def _partial_epochs(self) -> dict:
        """{per-epoch mechanism: 1} for the epochs charged but not completed (left out of lower bounds)."""
        return {m: 1 for m, p in getattr(self, "_epoch_progress", {}).items() if p}

    # ------------------------------------------------------------------ curves
    def rdp(self, alpha) -> np.ndarray:
        """Composed RDP curve at orders ``alpha`` (> 1)."""
        return self._ledger.rdp(alpha)

    def _valid_methods(self) -> list[str]:
        """Names of the routes that apply to this ledger, in the order "auto" tries them."""
        return [r.name for r in routes.applicable(self._ledger)]

    def _route_by_name(self, method: str) -> routes.Route:
        for r in routes.applicable(self._ledger):
            if r.name == method:
                return r
        hint = (" (the closed forms cover compositions of Gaussian mechanisms, one Poisson-subsampled "
                "Gaussian step, and one use of one Laplace mechanism or of one mechanism with an exact "
                "single-use profile: a one-dimensional Gaussian pair, a Gaussian mixture, noisy screening)"
                ) if method == "exact" else ""
        raise ValueError(f"method {method!r} is not available for this ledger "
                         f"(available: {self._valid_methods()}){hint}")

    def _select(self, method: str, query: str, value: float,
                compare: bool = False) -> tuple[str, Bracket, dict]:
        """The certified answer of a query by ``method`` (:func:`accountant.route_choice.select`)."""
        return select(self, method, query, value, compare)

    def _attained_lower(self, query: str, value: float) -> float | None:
        """Certified lower bound from the entries' attained pairs (:mod:`accountant.attained`), cached."""
        key = ("attained_lower", query, value)
        if key not in self._cache:
            from .attained import lower_bound

            self._cache[key] = lower_bound(self._ledger.items(), query, value, self._partial_epochs())
        return self._cache[key]

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
        tightest first (exact closed form, characteristic function, discretised PLD, RDP; see
        :meth:`_select` for deferral and failures); a route is skipped
        only when the best bound so far is within ``AUTO_SKIP_RTOL`` (1e-6, relative) of a certified
        lower bound on the true value, which no valid bound can undercut, or within a route's own
        coarser resolution (the discretised PLD: 1e-3), or (delta) when both are below the smallest
        normal float (the skipped routes are named in ``details["skipped_routes"]``, the last two
        reasons given in ``details["skip_reasons"]``).  ``compare=True`` evaluates every valid route.
        """
        if (delta is None) == (epsilon is None):
            raise ValueError("give exactly one of delta= or epsilon=")
        if not isinstance(compare, bool):
            raise TypeError(f"compare must be True or False, got {compare!r}")
        if delta is not None:
            delta = V.delta(delta)
            name, r, cands = self._guarded(method, "epsilon", delta, compare)
            _warn(r)
            return Certificate(epsilon=r.upper, delta=delta, method=name, error=r.error,
                               lower_bound=r.lower, bound=r.kind, relation=self.relation,
                               query="epsilon", ledger=tuple(self._ledger.summary()), candidates=cands,
                               details=self._explain(r.details, not math.isfinite(r.upper), "epsilon = inf"))
        epsilon = V.epsilon(epsilon)
        name, r, cands = self._guarded(method, "delta", epsilon, compare)
        _warn(r)
        return Certificate(epsilon=epsilon, delta=r.upper, method=name,
                           error=max(r.upper - r.estimate, 0.0), lower_bound=r.lower, bound=r.kind,
                           relation=self.relation, query="delta", ledger=tuple(self._ledger.summary()),
                           candidates=cands, details=self._explain(r.details, r.upper >= 1.0, "delta = 1"))

    def _guarded(self, method: str, query: str, value: float, compare: bool):
        """:meth:`_select`, with float-range failures (overflow, division by zero, NaN stops) turned into
        :class:`NumericalRangeError` (a ValueError naming the query and the ledger)."""
        try:
            return self._select(method, query, value, compare)
        except (OverflowError, ZeroDivisionError, FloatingPointError) as exc:
            if isinstance(exc, NumericalRangeError):
                raise
            raise NumericalRangeError(
                f"cannot certify {query} at {'delta' if query == 'epsilon' else 'epsilon'}={value!r} for "
                f"[{'; '.join(self._ledger.summary())}]: the computation left the "
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
        doc = {"relation": self.relation, "rtol": self.rtol, "time_limit": self.time_limit,
               "budget": None if self.budget is None else {"epsilon": self.budget.epsilon,
                                                            "delta": self.budget.delta},
               "ledger": self._ledger.to_list()}
        progress = [{"mechanism": m.to_dict(), "steps": p}
                    for m, p in getattr(self, "_epoch_progress", {}).items() if p]
        if progress:  # steps into the current epoch of per-epoch samplers (shuffle, balls-in-bins)
            doc["epoch_progress"] = progress
        return doc

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
            acct = cls(relation=relation, rtol=doc.get("rtol", contour.DEFAULT_RTOL), budget=budget,
                       time_limit=doc.get("time_limit", AUTO_TIME_LIMIT))
            acct._ledger = Ledger.from_list(doc.get("ledger", []))
            acct._epoch_progress = _load_progress(doc.get("epoch_progress", []))
            acct._history = [[m, k] for m, k in acct._ledger.items()]
            acct._history_exact = False  # state files keep counts, not the composition order
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


def _load_progress(rows) -> dict:
    """``epoch_progress`` of a state file: [{"mechanism": spec, "steps": int >= 0}] -> {mechanism: steps}."""
    from mechanisms.registry import from_dict

    if not isinstance(rows, list):
        raise ValueError("state 'epoch_progress' must be a list of {'mechanism', 'steps'} entries")
    out: dict = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or set(row) != {"mechanism", "steps"}:
            raise ValueError(f"epoch_progress[{i}] must have keys 'mechanism' and 'steps'")
        k = row["steps"]
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"epoch_progress[{i}].steps must be an integer >= 0, got {k!r}")
        out[from_dict(row["mechanism"])] = k
    return out


def _warn(bracket: Bracket) -> None:
    if bracket.details.get("warning"):
        warnings.warn(f"dpcert: {bracket.details['warning']}", AccuracyWarning, stacklevel=3)
