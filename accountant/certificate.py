"""Certificates: the immutable, serialisable result of a privacy query."""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from ._version import __version__

BOUND_KINDS = ("upper bound", "exact", "bracketed")


def _num(x: float) -> Any:
    """JSON-safe float (inf/nan as strings so the file stays strict JSON)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "inf" if x > 0 else ("-inf" if x < 0 else "nan")
    return x


def _unnum(x: Any) -> Any:
    if isinstance(x, str) and x in ("inf", "-inf", "nan"):
        return float(x)
    return x


@dataclass(frozen=True)
class Certificate:
    """A certified (epsilon, delta) guarantee for a ledger of mechanisms.

    Attributes
    ----------
    epsilon, delta : float
        The guarantee: the composed mechanism is (epsilon, delta)-DP under ``relation``.  ``epsilon``
        (or ``delta`` for a delta query) is rounded to the safe side and already includes ``error``.
    method : str
        The route that produced it (``"cf"`` characteristic function, ``"rdp"``, ``"exact"``).
    error : float
        Bound on the numerical slack in the certified quantity (epsilon for an epsilon query, delta
        for a delta query): certified value minus the best estimate.
    lower_bound : float or None
        A value the true epsilon (or delta) of the worst-case neighbouring pair is known to exceed,
        when every mechanism's dominating pair is tight; None otherwise.
    bound : str
        "exact" (closed form up to float error), "bracketed" (upper and lower bound known) or
        "upper bound".
    relation : str
        Neighbouring relation ("add_remove" or "replace_one").
    query : str
        "epsilon" (epsilon for a given delta) or "delta" (delta for a given epsilon).
    ledger : tuple of str
        Human-readable composition, e.g. ``("1000 x gaussian(sigma=2, sensitivity=1)",)``.
    candidates : dict
        Upper bounds from every route that was evaluated (for ``method="auto"``).
    """

    epsilon: float
    delta: float
    method: str
    error: float
    lower_bound: float | None
    bound: str
    relation: str
    query: str
    ledger: tuple[str, ...]
    candidates: dict = field(default_factory=dict)
    details: dict = field(default_factory=dict)
    version: str = __version__

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["ledger"] = list(self.ledger)
        d["format"] = "dpcert-certificate"
        return _jsonify(d)

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Certificate:
        if not isinstance(d, dict) or d.get("format") != "dpcert-certificate":
            raise ValueError("not a dpcert certificate")
        kw = {k: _unnum(v) for k, v in d.items() if k != "format"}
        names = {f.name for f in fields(cls)}
        required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
        if set(kw) - names or required - set(kw):
            raise ValueError(f"not a valid dpcert certificate: unknown fields {sorted(set(kw) - names)}, "
                             f"missing fields {sorted(required - set(kw))}")
        if not isinstance(kw["ledger"], list) or not isinstance(kw.get("candidates", {}), dict) \
                or not isinstance(kw.get("details", {}), dict):
            raise ValueError("not a valid dpcert certificate: 'ledger' must be a list and 'candidates', "
                             "'details' objects")
        kw["ledger"] = tuple(kw["ledger"])
        kw["candidates"] = {k: _unnum(v) for k, v in kw.get("candidates", {}).items()}
        return cls(**kw)

    def __str__(self) -> str:
        what = "epsilon" if self.query == "epsilon" else "delta"
        val = self.epsilon if self.query == "epsilon" else self.delta
        lb = ""
        if self.lower_bound is not None:
            lb = f"; the true {what} of the worst-case pair is at least {self.lower_bound:.6g}"
        comp = "; ".join(self.ledger) if self.ledger else "nothing"
        warn = f" Warning: {self.details['warning']}." if self.details.get("warning") else ""
        why = self.details.get("trivial_bound_reason") if isinstance(self.details, dict) else None
        why = f" No finite bound: {why}." if why else ""
        return (f"({self.epsilon:.6g}, {self.delta:.3g})-DP under {self.relation.replace('_', '/')} "
                f"neighbours [{self.bound}; method {self.method}; numerical error <= {self.error:.2g} "
                f"in {what} = {val:.6g}{lb}]. Composition: {comp}.{why} dpcert {self.version}.{warn}")


def _jsonify(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): _jsonify(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonify(v) for v in x]
    if isinstance(x, float):
        return _num(x)
    if hasattr(x, "item") and not isinstance(x, (str, bytes)):
        try:
            return _jsonify(x.item())
        except Exception:  # pragma: no cover
            return str(x)
    return x
