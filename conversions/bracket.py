"""The certified-result type every route returns: a bracket ``lower <= truth <= upper``.

A route answers one query -- epsilon for a delta, or delta for an epsilon -- about the composed
dominating pair of a ledger.  Its answer is a :class:`Bracket`: a certified upper bound (the number a
certificate states), an optional certified lower bound on the true value of the pair, the best
estimate in between, and what kind of statement it is.  The accountant turns the winning bracket into a
:class:`accountant.Certificate`; nothing else carries bounds between the numerics and the certificate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

KINDS = ("exact", "bracketed", "upper bound")


@dataclass(frozen=True)
class Bracket:
    """A certified answer: ``lower <= true value <= upper`` (``lower`` None when unknown).

    Attributes
    ----------
    upper : float
        Certified upper bound of the queried quantity (epsilon or delta), already rounded to the safe
        side; ``inf`` when nothing finite is certified.
    lower : float or None
        Certified lower bound on the true value of the dominating pair, or None when the route has none.
    estimate : float
        Best estimate, ``lower <= estimate <= upper`` where those are known.
    kind : {"exact", "bracketed", "upper bound"}
        "exact": a closed form up to float error; "bracketed": upper and lower bounds from a numerical
        route; "upper bound": only ``upper`` is certified (e.g. RDP conversions, or mechanisms whose
        dominating pair is not attained).
    details : dict
        Route-specific facts (the optimal order, the contour line, the direction, ...), JSON-ready values.
    """

    upper: float
    lower: float | None
    estimate: float
    kind: str
    details: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if math.isnan(self.upper) or (self.lower is not None and math.isnan(self.lower)):
            raise FloatingPointError("a bracket bound is NaN")

    @classmethod
    def upper_only(cls, value: float, details: dict[str, Any] | None = None) -> Bracket:
        """Only an upper bound is known (RDP conversions): estimate = upper, no lower bound."""
        return cls(value, None, value, "upper bound", dict(details or {}))

    @classmethod
    def exact(cls, upper: float, lower: float, estimate: float,
              details: dict[str, Any] | None = None) -> Bracket:
        """A closed form evaluated in floating point: the bounds are the value plus/minus its error."""
        return cls(upper, lower, estimate, "exact", dict(details or {}))

    @property
    def error(self) -> float:
        """Certified value minus the best estimate (``inf`` when the upper bound is infinite)."""
        if not math.isfinite(self.upper):
            return math.inf
        return max(self.upper - self.estimate, 0.0)

    def with_lower(self, lower: float | None) -> Bracket:
        """The same bracket with another certified lower bound (e.g. the best over several routes)."""
        return Bracket(self.upper, lower, self.estimate, self.kind, self.details)

    def with_details(self, **extra: Any) -> Bracket:
        return Bracket(self.upper, self.lower, self.estimate, self.kind, {**self.details, **extra})
