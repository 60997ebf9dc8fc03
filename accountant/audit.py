"""Audit published (epsilon, delta) guarantees against certificates recomputed from their parameters.

A *claim* is a published guarantee plus the parameters it was computed for.  For each claim the audit
rebuilds the composition in a :class:`~accountant.PrivacyAccountant`, asks for a certificate at the
claimed delta and compares:

* **consistent**   -- claimed epsilon >= our certified upper bound (the claim is a valid guarantee);
* **understated**  -- claimed epsilon < our certified *lower* bound (the worst-case neighbouring pair of
  the stated mechanism violates the claim: the published guarantee cannot be right for those
  parameters);
* **inconclusive** -- in between (or no lower bound is known, e.g. RDP-only or non-tight mechanisms);
* **unsupported**  -- the claim uses something dpcert cannot certify (shuffling, fixed-size batches,
  tree aggregation, a mechanism plug-in that is not installed, replace-one DP-SGD ...): we say so
  instead of printing a number for a different algorithm;
* **error**        -- the claim's parameters are invalid (the message names the parameter).

``slack = claimed / upper - 1`` says how loose a consistent claim is (0 = exactly our bound).

Claim format (JSON object, or a TOML table in a ``[[claims]]`` array)::

    {"id": "abadi2016-ma", "citation": "...", "source": "Sec. 3.1", "notes": "...",
     "epsilon": 1.26, "delta": 1e-5, "relation": "add_remove", "method": "auto",
     "dpsgd": {"sample_rate": 0.01, "noise_multiplier": 4, "steps": 10000, "sampling": "poisson"}}

``dpsgd`` (a dict, or a list of dicts for a schedule of phases) takes ``sample_rate`` or
``batch_size`` + ``dataset_size`` (q = batch / n), ``noise_multiplier`` (alias ``sigma``), ``steps`` or
``epochs`` (steps = epochs * ``steps_per_epoch`` if given, else round(epochs / q)), optional
``sensitivity`` (default 1) and ``sampling`` (default ``"poisson"``; ``"balls_in_bins"`` also takes
``steps_per_record`` = k, each record in k uniform steps of every epoch).  Instead of ``dpsgd`` a claim
may give ``mechanisms``: a list of ``{"name": registry name, "params": {...}, "times": k}`` (or a single
``mechanism`` plus ``times``).  A published delta of 0 is audited against the pure-DP epsilon.

The lower bound is the certified lower bound of the *stated mechanism's worst-case dominating pair*
(see :class:`~accountant.Certificate`); an "understated" verdict therefore means the stated parameters
cannot give the stated guarantee for the algorithm as analysed (all iterates released, Poisson
sampling, add/remove neighbours), not that a specific trained model leaks more.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .claim_spec import (  # noqa: F401 (the claim API is part of the audit module's)
    _CORE_KEYS,
    PUBLISHED_CLAIMS,
    SUPPORTED_SAMPLING,
    ClaimError,
    _Unsupported,
    build_accountant,
    check_claim,
    load_claims,
    load_mechanism_plugins,
)

VERDICTS = ("consistent", "understated", "inconclusive", "unsupported", "error")


@dataclass(frozen=True)
class AuditResult:
    """Outcome of auditing one claim.

    Attributes
    ----------
    id, citation, source, notes : str
        Taken from the claim.
    claimed_epsilon, delta : float
        The published guarantee.
    verdict : str
        One of :data:`VERDICTS`.
    upper, lower : float or None
        Our certified epsilon upper bound and (when known) certified lower bound at ``delta``.
    method : str or None
        The certificate's route ("cf", "rdp", "exact", "pure").
    slack : float or None
        ``claimed_epsilon / upper - 1`` (0 when the claim equals our bound; negative when below it).
    reason : str
        Why a claim is unsupported / in error, or a one-line explanation of the verdict.
    warnings : list of str
        Caveats (e.g. the published implementation sampled differently from what was accounted).
    ledger : list of str
        The composition that was certified.
    seconds : float
        Wall time of the certificate.
    """

    id: str
    citation: str
    claimed_epsilon: float
    delta: float
    verdict: str
    upper: float | None = None
    lower: float | None = None
    method: str | None = None
    slack: float | None = None
    numerical_error: float | None = None
    bound: str | None = None
    reason: str = ""
    source: str = ""
    notes: str = ""
    warnings: list = field(default_factory=list)
    ledger: list = field(default_factory=list)
    candidates: dict = field(default_factory=dict)
    seconds: float = 0.0
    #: the claim audited against the sampling its code really uses (``implementation_sampling``):
    #: {"sampling", "verdict", "upper", "lower", "method", "ledger", "reason"}; empty when not applicable
    as_implemented: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("upper", "lower", "slack", "numerical_error", "claimed_epsilon"):
            v = d[k]
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = "inf" if v > 0 else ("-inf" if v < 0 else "nan")
        d["candidates"] = {k: (v if math.isfinite(v) else "inf") for k, v in self.candidates.items()}
        d["as_implemented"] = {k: ("inf" if isinstance(v, float) and math.isinf(v) else v)
                               for k, v in self.as_implemented.items()}
        return d


# ---------------------------------------------------------------------------------------------- audit
def _verdict(claimed: float, upper: float, lower: float | None) -> tuple[str, str]:
    if claimed >= upper:
        return "consistent", "claimed epsilon >= certified upper bound"
    if lower is not None and claimed < lower:
        return "understated", "claimed epsilon < certified lower bound of the worst-case pair"
    if lower is None:
        return "inconclusive", "claimed epsilon < certified upper bound; no lower bound known for this ledger"
    return "inconclusive", "claimed epsilon between the certified lower and upper bounds"


def audit_claim(claim: dict, index: int = 0) -> AuditResult:
    """Audit one claim (see the module docstring for the format and the verdicts)."""
    check_claim(claim, index)
    cid = str(claim.get("id", f"claim-{index}"))
    claimed, delta = float(claim["epsilon"]), float(claim["delta"])
    common = dict(id=cid, citation=str(claim.get("citation", "")), claimed_epsilon=claimed, delta=delta,
                  source=str(claim.get("source", "")), notes=str(claim.get("notes", "")))
    warnings: list[str] = []
    impl = claim.get("implementation_sampling")
    as_impl: dict = {}
    if impl and str(impl).lower() not in ("poisson", "poisson_subsampling"):
        as_impl = _audit_as_implemented(claim, str(impl), float(claim["epsilon"]), float(claim["delta"]))
        what = (f"as implemented it is {as_impl['verdict']} (certified bracket [{_f(as_impl.get('lower'))}, "
                f"{_f(as_impl.get('upper'))}])" if as_impl.get("upper") is not None
                else f"as implemented: {as_impl.get('reason', 'no certificate')}")
        warnings.append(f"the published implementation samples by {impl!r}; the certificate (like the "
                        f"published accounting) covers the analysed sampling; {what}")
    unknown = sorted(set(claim) - _CORE_KEYS)
    if unknown:
        warnings.append(f"ignored keys: {', '.join(unknown)}")
    t0 = time.perf_counter()
    try:
        acct = build_accountant(claim)
        ledger = acct.ledger.summary()
        if delta == 0.0:
            upper = float(acct.ledger.pure_epsilon)
            lower, method, err, bound, cands = None, "pure", 0.0, "upper bound", {}
        else:
            cert = acct.certificate(delta=delta, method=claim.get("method", "auto"), compare=True)
            upper, lower, method = float(cert.epsilon), cert.lower_bound, cert.method
            err, bound, cands = cert.error, cert.bound, dict(cert.candidates)
    except _Unsupported as exc:
        return AuditResult(verdict="unsupported", reason=str(exc), warnings=warnings,
                           seconds=time.perf_counter() - t0, **common)
    except ClaimError:
        raise
    except (ValueError, TypeError) as exc:
        return AuditResult(verdict="error", reason=f"invalid parameters: {exc}", warnings=warnings,
                           seconds=time.perf_counter() - t0, **common)
    secs = time.perf_counter() - t0
    lower = None if lower is None else float(lower)
    verdict, reason = _verdict(claimed, upper, lower)
    if math.isfinite(upper) and upper > 0:
        slack = claimed / upper - 1.0
    else:
        slack = 0.0 if claimed == upper else (-1.0 if math.isinf(upper) else math.inf)
    return AuditResult(verdict=verdict, upper=upper, lower=lower, method=method, slack=slack,
                       numerical_error=err, bound=bound, reason=reason, warnings=warnings,
                       ledger=list(ledger), candidates=cands, seconds=secs, as_implemented=as_impl, **common)


def _audit_as_implemented(claim: dict, impl: str, claimed: float, delta: float) -> dict:
    """The claim's DP-SGD phases re-certified with the implementation's sampling scheme."""
    out: dict = {"sampling": impl}
    if "dpsgd" not in claim:
        out["reason"] = "implementation_sampling applies to DP-SGD claims only"
        return out
    try:
        acct = build_accountant(claim, sampling=impl)
        if delta == 0.0:
            out["reason"] = "delta = 0: no sampled DP-SGD run is pure DP"
            return out
        cert = acct.certificate(delta=delta)
    except _Unsupported as exc:
        out["reason"] = str(exc)
        return out
    except (ValueError, TypeError) as exc:
        out["reason"] = f"invalid parameters for the implemented sampling: {exc}"
        return out
    lower = None if cert.lower_bound is None else float(cert.lower_bound)
    verdict, reason = _verdict(claimed, float(cert.epsilon), lower)
    out.update(verdict=verdict, upper=float(cert.epsilon), lower=lower, method=cert.method,
               ledger=list(acct.ledger.summary()), reason=reason)
    return out


def audit_claims(claims: Iterable[dict], progress: Callable[[str], None] | None = None,
                 load_plugins: bool = True) -> list[AuditResult]:
    """Audit every claim in order; ``progress`` receives one line per claim (e.g. ``print`` to stderr).

    Structural problems raise :class:`ClaimError` before anything is computed.
    """
    claims = list(claims)
    for i, c in enumerate(claims):
        check_claim(c, i)
    if load_plugins:
        load_mechanism_plugins()
    out = []
    n = len(claims)
    for i, c in enumerate(claims):
        if progress is not None:
            progress(f"[{i + 1}/{n}] auditing {c.get('id', f'claim-{i}')} ...")
        r = audit_claim(c, i)
        out.append(r)
        if progress is not None:
            progress(f"[{i + 1}/{n}] {r.id}: {r.verdict} ({r.seconds:.2f} s)")
    return out


def exit_code(results: Sequence[AuditResult]) -> int:
    """1 if any claim is understated, else 2 if any claim has invalid parameters, else 0."""
    if any(r.verdict == "understated" for r in results):
        return 1
    if any(r.verdict == "error" for r in results):
        return 2
    return 0


# ---------------------------------------------------------------------------------------------- output
def _f(x: float | None, fmt: str = ".4g") -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "inf"
    return format(x, fmt)


def format_table(results: Sequence[AuditResult], markdown: bool = False) -> str:
    """A readable table (plain text, or GitHub markdown with ``markdown=True``)."""
    head = ["claim", "claimed eps", "delta", "certified eps", "lower bound", "method", "verdict", "slack"]
    rows = []
    for r in results:
        slack = "-" if r.slack is None else (f"{100 * r.slack:+.2f}%" if math.isfinite(r.slack) else "inf")
        rows.append([r.id, _f(r.claimed_epsilon), _f(r.delta, ".3g"), _f(r.upper), _f(r.lower),
                     r.method or "-", r.verdict, slack])
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    else:
        widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(head)]
        fmt = "  ".join(f"{{:<{w}}}" for w in widths)
        lines = [fmt.format(*head), fmt.format(*("-" * w for w in widths))]
        lines += [fmt.format(*row) for row in rows]
    notes = []
    for r in results:
        if r.verdict in ("unsupported", "error"):
            notes.append(f"{r.id}: {r.reason}")
        elif r.verdict == "inconclusive" and r.lower is not None:
            notes.append(f"{r.id}: inconclusive, the truth lies in [{_f(r.lower)}, {_f(r.upper)}]")
        for w in r.warnings:
            notes.append(f"{r.id}: note: {w}")
    counts = {v: sum(r.verdict == v for r in results) for v in VERDICTS}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    out = "\n".join(lines)
    if notes:
        out += "\n\n" + "\n".join(("- " if markdown else "  ") + n for n in notes)
    return out + f"\n\n{len(results)} claims: {summary}." + ("" if markdown else "\n")


def results_to_json(results: Sequence[AuditResult]) -> str:
    return json.dumps({"format": "dpcert-audit", "results": [r.to_dict() for r in results]}, indent=2,
                      allow_nan=False)


def stderr_progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
