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

import importlib
import json
import math
import os
import pkgutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from mechanisms import _validate as V
from mechanisms import registry
from mechanisms.base import RELATIONS, Mechanism

from .privacy_accountant import METHODS, PrivacyAccountant

VERDICTS = ("consistent", "understated", "inconclusive", "unsupported", "error")

SUPPORTED_SAMPLING = ("poisson", "full_batch", "fixed_size", "shuffle", "balls_in_bins")
_SAMPLING_ALIASES = {"poisson": "poisson", "poisson_subsampling": "poisson", "poisson_sampling": "poisson",
                     "full_batch": "full_batch", "none": "full_batch", "full": "full_batch",
                     "shuffle": "shuffle", "shuffling": "shuffle", "random_reshuffling": "shuffle",
                     "fixed_batch": "fixed_size", "fixed_size": "fixed_size",
                     "without_replacement": "fixed_size", "sampling_without_replacement": "fixed_size",
                     "balls_in_bins": "balls_in_bins", "balls_and_bins": "balls_in_bins",
                     "random_allocation": "balls_in_bins"}
# schemes we know and cannot certify (yet): a clear "unsupported" instead of a number for another algorithm
_UNSUPPORTED_SAMPLING = {
    "with_replacement": "sampling with replacement",
    "cyclic": "cyclic (deterministic) batches",
    "tree_aggregation": "tree aggregation (DP-FTRL)",
    "dp_ftrl": "tree aggregation (DP-FTRL)",
}

_CORE_KEYS = {"id", "citation", "source", "notes", "epsilon", "delta", "relation", "method", "dpsgd",
              "mechanisms", "mechanism", "times", "implementation_sampling", "url", "reported_by",
              "claimed_accountant", "tags"}


class ClaimError(ValueError):
    """A claim (or claims file) is structurally invalid."""


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


class _Unsupported(Exception):
    pass


# ---------------------------------------------------------------------------------------------- plug-ins
def load_mechanism_plugins() -> dict[str, str]:
    """Import every public module of the ``mechanisms`` package so that plug-ins register themselves.

    Returns ``{module: error message}`` for modules that failed to import (a broken or half-written
    plug-in must not break the audit or the benchmarks; its mechanisms are then reported as absent).
    """
    import mechanisms

    failed: dict[str, str] = {}
    for info in pkgutil.iter_modules(mechanisms.__path__, "mechanisms."):
        if info.name.rsplit(".", 1)[-1].startswith("_"):
            continue
        try:
            importlib.import_module(info.name)
        except Exception as exc:  # noqa: BLE001 - report, never crash
            failed[info.name] = f"{type(exc).__name__}: {exc}"
    return failed


# ---------------------------------------------------------------------------------------------- parsing
#: The published claims shipped with the package (``dpcert audit`` with no file audits them).
PUBLISHED_CLAIMS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "claims", "published.json")


def load_claims(path: str | os.PathLike) -> list[dict]:
    """Read a claims file (``.json`` or ``.toml``): a list of claims or ``{"claims": [...]}``.

    TOML needs :mod:`tomllib` (Python >= 3.11) or the ``tomli`` package on Python 3.10.
    Raises :class:`ClaimError` with the file name on any syntax or structure problem.
    """
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError as exc:
        raise ClaimError(f"cannot read claims file {path!r}: {exc.strerror or exc}") from None
    if path.lower().endswith(".toml"):
        try:
            import tomllib  # type: ignore[import-not-found]
        except ModuleNotFoundError:  # pragma: no cover - Python 3.10
            try:
                import tomli as tomllib  # type: ignore[import-not-found,no-redef]
            except ModuleNotFoundError:
                raise ClaimError("reading TOML claims needs Python >= 3.11 (tomllib) or "
                                 "'pip install tomli' on Python 3.10; or give the claims as JSON") from None
        try:
            doc = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ClaimError(f"{path}: invalid TOML: {exc}") from None
    else:
        try:
            doc = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ClaimError(f"{path}: invalid JSON: {exc}") from None
    claims = doc.get("claims") if isinstance(doc, dict) else doc
    if not isinstance(claims, list):
        raise ClaimError(f"{path}: expected a list of claims or an object with a 'claims' list")
    for i, c in enumerate(claims):
        check_claim(c, i)
    return claims


def _num(claim: dict, key: str, where: str) -> float:
    v = claim.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ClaimError(f"{where}: '{key}' must be a number, got {v!r}")
    return float(v)


def check_claim(claim: Any, index: int = 0) -> None:
    """Structural validation of one claim (values are checked when the mechanism is built)."""
    where = f"claim {index}"
    if not isinstance(claim, dict):
        raise ClaimError(f"{where}: must be an object, got {type(claim).__name__}")
    if "id" in claim:
        where = f"claim {index} ({claim['id']!r})"
    for key in ("epsilon", "delta"):
        if key not in claim:
            raise ClaimError(f"{where}: missing '{key}' (the published guarantee)")
        _num(claim, key, where)
    if claim["epsilon"] < 0 or math.isnan(claim["epsilon"]):
        raise ClaimError(f"{where}: 'epsilon' must be >= 0")
    if not 0.0 <= claim["delta"] < 1.0:
        raise ClaimError(f"{where}: 'delta' must lie in [0, 1)")
    kinds = [k for k in ("dpsgd", "mechanisms", "mechanism") if k in claim]
    if len(kinds) != 1:
        raise ClaimError(f"{where}: give exactly one of 'dpsgd', 'mechanisms' or 'mechanism'")
    if "method" in claim and claim["method"] not in METHODS:
        raise ClaimError(f"{where}: 'method' must be one of {METHODS}")
    if "relation" in claim and not isinstance(claim["relation"], str):
        raise ClaimError(f"{where}: 'relation' must be a string")
    if kinds[0] == "dpsgd":
        phases = claim["dpsgd"] if isinstance(claim["dpsgd"], list) else [claim["dpsgd"]]
        if not phases or not all(isinstance(p, dict) for p in phases):
            raise ClaimError(f"{where}: 'dpsgd' must be an object or a non-empty list of objects")
    elif kinds[0] == "mechanisms":
        ms = claim["mechanisms"]
        if not isinstance(ms, list) or not ms:
            raise ClaimError(f"{where}: 'mechanisms' must be a non-empty list")
        for j, m in enumerate(ms):
            if not isinstance(m, dict) or "name" not in m:
                raise ClaimError(f"{where}: mechanisms[{j}] must be an object with a 'name'")
            if not isinstance(m.get("params", {}), dict):
                raise ClaimError(f"{where}: mechanisms[{j}].params must be an object")
    else:
        m = claim["mechanism"]
        if not isinstance(m, dict) or "name" not in m:
            raise ClaimError(f"{where}: 'mechanism' must be an object with a 'name'")


def _phase_steps(p: dict, q: float, where: str) -> int:
    if "steps" in p and "epochs" in p:
        raise ClaimError(f"{where}: give either 'steps' or 'epochs'")
    if "steps" in p:
        s = p["steps"]
        if isinstance(s, float) and s.is_integer():
            s = int(s)
        if isinstance(s, bool) or not isinstance(s, int) or s < 0:
            raise ValueError(f"{where}: steps must be an integer >= 0, got {s!r}")
        return s
    if "epochs" in p:
        e = _num(p, "epochs", where)
        if e < 0:
            raise ValueError(f"{where}: epochs must be >= 0")
        if "steps_per_epoch" in p:
            spe = p["steps_per_epoch"]
            if isinstance(spe, bool) or not isinstance(spe, int) or spe < 1:
                raise ValueError(f"{where}: steps_per_epoch must be an integer >= 1")
            return int(round(e * spe))
        return int(round(e / q))
    raise ClaimError(f"{where}: a DP-SGD phase needs 'steps' or 'epochs'")


def _phase_rate(p: dict, where: str) -> float:
    if "sample_rate" in p:
        if "batch_size" in p:
            raise ClaimError(f"{where}: give either 'sample_rate' or 'batch_size' + 'dataset_size'")
        q = _num(p, "sample_rate", where)
    elif "batch_size" in p and "dataset_size" in p:
        b, n = _num(p, "batch_size", where), _num(p, "dataset_size", where)
        if not (0 < b <= n):
            raise ValueError(f"{where}: need 0 < batch_size <= dataset_size, got {b:g} and {n:g}")
        q = b / n
    else:
        raise ClaimError(f"{where}: a DP-SGD phase needs 'sample_rate' or 'batch_size' and 'dataset_size'")
    if not (0.0 < q <= 1.0):
        raise ValueError(f"{where}: sample rate must lie in (0, 1], got {q!r}")
    return q


def _sampled_phase(acct: PrivacyAccountant, p: dict, scheme: str, sigma: float, sens: float,
                   where: str) -> None:
    """One DP-SGD phase with fixed-size, shuffled or balls-in-bins batches (:mod:`accountant.sampling`).

    Fixed-size batches need ``batch_size`` and ``dataset_size``.  Shuffling and balls-in-bins depend on
    the number of batches per epoch t only: ``steps_per_epoch`` if given, else ceil(n / b), else
    ceil(1 / sample_rate).
    """
    relation = acct.relation
    if scheme == "balls_in_bins" and relation != "add_remove":
        raise _Unsupported("balls-in-bins batching is certified under add/remove neighbours only")
    if "batch_size" in p and "dataset_size" in p:
        b = V.integer(f"{where}: batch_size", p["batch_size"], low=1)
        n = V.integer(f"{where}: dataset_size", p["dataset_size"], low=1)
        if b > n:
            raise ValueError(f"{where}: need batch_size <= dataset_size, got {b} and {n}")
        q = b / n
    elif scheme == "fixed_size":
        raise ValueError(f"{where}: fixed-size batches need 'batch_size' and 'dataset_size'")
    else:
        q = _phase_rate(p, where)
        b = n = None
    k = 1
    if "steps_per_record" in p:  # random k-out-of-t allocation
        if scheme != "balls_in_bins":
            raise ValueError(f"{where}: steps_per_record applies to sampling 'balls_in_bins' only")
        k = V.integer(f"{where}: steps_per_record", p["steps_per_record"], low=1)
    t = p.get("steps_per_epoch")
    if t is None:  # the mean batch size is k n / t
        t = -(-(k * n) // b) if n is not None else math.ceil(k / q - 1e-9)
    t = V.integer(f"{where}: steps_per_epoch", t, low=1)
    steps = _phase_steps(p, q / k, where)  # epochs: k / q steps each (k = 1: 1 / q, as for Poisson)
    if b is None:  # only t matters for shuffling and balls-in-bins
        b, n = 1, t
    kw = {"steps_per_record": k} if k != 1 else {}
    acct.step(sigma=sigma, steps=steps, batch_size=b, dataset_size=n, sampling=scheme, sensitivity=sens,
              steps_per_epoch=t, **kw)


def _scheme(raw: object) -> str:
    scheme_raw = str(raw).lower().replace("-", "_").replace(" ", "_")
    if scheme_raw in _UNSUPPORTED_SAMPLING:
        raise _Unsupported(
            f"unsupported sampling scheme {raw!r}: dpcert certifies Poisson, fixed-size, shuffled and "
            f"balls-in-bins batches; {_UNSUPPORTED_SAMPLING[scheme_raw]} needs a different analysis "
            "(not implemented), so no number is given")
    scheme = _SAMPLING_ALIASES.get(scheme_raw)
    if scheme is None:
        raise _Unsupported(f"unknown sampling scheme {raw!r} (supported: poisson, full_batch, fixed_size, "
                           "shuffle, balls_in_bins)")
    return scheme


def build_accountant(claim: dict, sampling: str | None = None) -> PrivacyAccountant:
    """The accountant holding the composition a claim describes.

    ``sampling`` replaces every DP-SGD phase's sampling scheme (the claim "as implemented").  Raises
    ``_Unsupported`` for schemes/mechanisms dpcert cannot certify, ``ValueError``/``TypeError`` for
    invalid parameter values.
    """
    relation = claim.get("relation", "add_remove")
    if relation not in RELATIONS:
        raise _Unsupported(f"neighbouring relation {relation!r} is not supported (supported: {RELATIONS})")
    acct = PrivacyAccountant(relation=relation)
    if "dpsgd" in claim:
        from mechanisms.gaussian import Gaussian
        from mechanisms.subsampled import SubsampledGaussian

        phases = claim["dpsgd"] if isinstance(claim["dpsgd"], list) else [claim["dpsgd"]]
        for i, p in enumerate(phases):
            where = f"dpsgd[{i}]" if len(phases) > 1 else "dpsgd"
            scheme = _scheme(p.get("sampling", "poisson") if sampling is None else sampling)
            if "sigma" in p and "noise_multiplier" in p:
                raise ClaimError(f"{where}: give either 'sigma' or 'noise_multiplier'")
            if "sigma" not in p and "noise_multiplier" not in p:
                raise ClaimError(f"{where}: missing 'noise_multiplier'")
            sigma = _num(p, "sigma" if "sigma" in p else "noise_multiplier", where)
            sens = _num(p, "sensitivity", where) if "sensitivity" in p else 1.0
            if scheme in ("fixed_size", "shuffle", "balls_in_bins"):
                _sampled_phase(acct, p, scheme, sigma, sens, where)
                continue
            q = 1.0 if scheme == "full_batch" and "sample_rate" not in p and "batch_size" not in p \
                else _phase_rate(p, where)
            steps = _phase_steps(p, q, where)
            if scheme == "full_batch" and q != 1.0:
                raise ValueError(f"{where}: full-batch training needs sample rate 1, got {q!r}")
            if relation != "add_remove" and q < 1.0:
                raise _Unsupported("Poisson-subsampled DP-SGD is certified under add/remove neighbours only; "
                                   f"relation {relation!r} is not supported")
            if q == 1.0:
                acct.compose(Gaussian(sigma=sigma, sensitivity=sens), steps)
            else:
                acct.compose(SubsampledGaussian(sigma=sigma, sample_rate=q, sensitivity=sens), steps)
        return acct
    specs = claim["mechanisms"] if "mechanisms" in claim else [
        dict(claim["mechanism"], times=claim.get("times", claim["mechanism"].get("times", 1)))]
    for j, spec in enumerate(specs):
        name = spec["name"]
        try:
            cls = registry.get(name)
        except ValueError:
            raise _Unsupported(f"mechanism {name!r} is not registered in this installation "
                               "(plug-in missing?)") from None
        params = dict(spec.get("params", {}))
        try:
            mech = cls.from_params(params)
        except TypeError as exc:
            raise ValueError(f"mechanisms[{j}] {name!r}: {exc}") from None
        if not isinstance(mech, Mechanism):  # pragma: no cover - registry guarantees it
            raise TypeError(f"{name!r} did not build a Mechanism")
        times = spec.get("times", 1)
        if relation not in mech.relations:
            raise _Unsupported(f"{mech.describe()} is not defined under the {relation!r} relation")
        acct.compose(mech, times)
    return acct


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
