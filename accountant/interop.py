"""dp-accounting interoperability: a drop-in accountant for ``DpEvent`` trees, and event translation.

dp-accounting users change one import::

    # from dp_accounting.pld import PLDAccountant as Accountant
    from accountant.interop import DpEventAccountant as Accountant

    acct = Accountant()                       # add/remove neighbours, like dp-accounting's default
    acct.compose(PoissonSampledDpEvent(q, GaussianDpEvent(sigma)), count=steps)
    acct.get_epsilon(target_delta=1e-5)       # certified upper bound (dpcert)
    acct.certificate(delta=1e-5)              # the full certificate, with a lower bound where known

Events are read duck-typed (class name and public attributes, :mod:`accountant.dp_event`), so
dp-accounting is not a dependency; jax-privacy and TF Privacy produce the same events.  The event
semantics, neighbouring relations and the few refusals are tabulated in :mod:`accountant.dp_event`.
"""

from __future__ import annotations

import math
import numbers

from conversions import contour

from .certificate import Certificate
from .dp_event import (
    NonPrivateEventError,
    UnsupportedEventError,
    _dp_accounting,
    _relation,
    event_name,
    is_dp_event,
    ledger_to_dp_event,
    mechanism_to_dp_event,
    module_of,
    translate,
)
from .privacy_accountant import PrivacyAccountant

__all__ = ["DpEventAccountant", "NonPrivateEventError", "UnsupportedEventError", "event_name", "is_dp_event",
           "ledger_to_dp_event", "mechanism_to_dp_event", "translate"]


class DpEventAccountant:
    """dp-accounting's ``PrivacyAccountant`` interface on top of a dpcert :class:`PrivacyAccountant`.

    Parameters
    ----------
    neighboring_relation : dp-accounting ``NeighboringRelation`` or {"add_remove", "replace_one"}
        ``ADD_OR_REMOVE_ONE`` (default) or ``REPLACE_ONE``; ``REPLACE_SPECIAL`` is not supported.
    method : str
        dpcert route for the queries ("auto": the smallest certified bound).
    rtol : float
        Accuracy target of the characteristic-function route.
    without_replacement_delta : float, optional
        Base delta for ``SampledWithoutReplacementDpEvent`` around a non-pure-DP event (see
        :mod:`accountant.dp_event`).

    Notes
    -----
    Follows dp-accounting's contract: ``supports(event)`` is False for ``UnsupportedDpEvent`` and for
    events without a translation; ``compose`` of such an event raises :class:`UnsupportedEventError`
    (a ``ValueError``; dp-accounting raises its own ``UnsupportedEventError``) and records nothing; a
    ``NonPrivateDpEvent`` is accepted and makes ``get_epsilon`` return ``inf`` and ``get_delta`` 1, as
    dp-accounting requires of every accountant (``certificate()`` then raises
    :class:`NonPrivateEventError`).  Every epsilon/delta is a dpcert certified upper bound.
    """

    def __init__(self, neighboring_relation="add_remove", *, method: str = "auto",
                 rtol: float = contour.DEFAULT_RTOL, without_replacement_delta: float | None = None):
        self._relation_arg = neighboring_relation
        self._acct = PrivacyAccountant(relation=_relation(neighboring_relation), rtol=rtol)
        self.method = method
        self.without_replacement_delta = without_replacement_delta
        self._events: list[list] = []  # [event, count] runs, for the ``ledger`` event
        self._non_private = False

    # ------------------------------------------------------------------ dp-accounting interface
    @property
    def neighboring_relation(self):
        """The relation as given at construction (a dp-accounting enum member or a dpcert name)."""
        return self._relation_arg

    def _entries(self, event):
        return translate(event, self._acct.relation,
                         without_replacement_delta=self.without_replacement_delta)

    def supports(self, event) -> bool:
        """True iff ``event`` can be composed (``NonPrivateDpEvent`` included, as in dp-accounting)."""
        try:
            self._entries(event)
        except NonPrivateEventError:
            return True
        except (UnsupportedEventError, ValueError, TypeError):
            return False
        return True

    def compose(self, event, count: int = 1) -> DpEventAccountant:
        """Record ``count`` uses of ``event``; returns self (chainable)."""
        if not is_dp_event(event):
            raise TypeError(f"event must be a dp-accounting DpEvent, got {type(event).__name__}")
        if isinstance(count, bool) or not isinstance(count, numbers.Integral) or count < 1:
            raise ValueError(f"count must be a positive integer, got {count!r}")
        count = int(count)
        try:
            entries = self._entries(event)
        except NonPrivateEventError:
            self._non_private = True
            entries = None
        if entries:
            self._acct._compose_entries([(m, k * count) for m, k in entries])
        if event_name(event) != "NoOpDpEvent":
            if self._events and self._events[-1][0] == event:
                self._events[-1][1] += count
            else:
                self._events.append([event, count])
        return self

    def get_epsilon(self, target_delta: float) -> float:
        """Certified epsilon at ``target_delta`` (``inf`` after a ``NonPrivateDpEvent``)."""
        if self._non_private:
            return math.inf
        return self._acct.epsilon(target_delta, method=self.method)

    def get_delta(self, target_epsilon: float) -> float:
        """Certified delta at ``target_epsilon`` (1 after a ``NonPrivateDpEvent``)."""
        if self._non_private:
            return 1.0
        return self._acct.delta(target_epsilon, method=self.method)

    @property
    def ledger(self):
        """The composed event (dp-accounting's ``DpEventBuilder`` form: runs of equal events become
        ``SelfComposedDpEvent``; several runs a ``ComposedDpEvent``; nothing a ``NoOpDpEvent``), built
        with the classes of the composed events' own module (dp-accounting's if it is importable)."""
        mod = module_of(e for e, _ in self._events)
        if mod is None:
            mod = _dp_accounting(None)
        events = [e if k == 1 else mod.SelfComposedDpEvent(event=e, count=k) for e, k in self._events]
        if not events:
            return mod.NoOpDpEvent()
        return events[0] if len(events) == 1 else mod.ComposedDpEvent(events=events)

    # ------------------------------------------------------------------ dpcert extras
    @property
    def accountant(self) -> PrivacyAccountant:
        """The underlying dpcert accountant (its ledger holds the translated mechanisms)."""
        return self._acct

    def certificate(self, **kwargs) -> Certificate:
        """dpcert certificate (see :meth:`PrivacyAccountant.certificate`); ``method`` defaults to the
        accountant's."""
        if self._non_private:
            raise NonPrivateEventError("a NonPrivateDpEvent was composed: no finite certificate exists")
        kwargs.setdefault("method", self.method)
        return self._acct.certificate(**kwargs)

    def report(self, delta: float, every: int | None = None, **kwargs):
        """Certified epsilon trajectory of the composed events (see :meth:`PrivacyAccountant.report`)."""
        if self._non_private:
            raise NonPrivateEventError("a NonPrivateDpEvent was composed: no finite certificate exists")
        kwargs.setdefault("method", self.method)
        return self._acct.report(delta, every, **kwargs)

    def __repr__(self) -> str:
        np_note = ", non-private" if self._non_private else ""
        return f"DpEventAccountant({self._acct!r}{np_note})"
