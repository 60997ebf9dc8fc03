"""Claims for :mod:`accountant.audit`: reading claim files (JSON / TOML), checking every field, and
rebuilding the composition a claim describes in a :class:`~accountant.PrivacyAccountant` (the claim
format is documented in :mod:`accountant.audit`); loading the mechanism plug-ins claims may name."""

from __future__ import annotations

import importlib
import json
import math
import os
import pkgutil
from typing import Any

from mechanisms import _validate as V
from mechanisms import registry
from mechanisms.base import RELATIONS, Mechanism

from .privacy_accountant import METHODS, PrivacyAccountant

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
    # (an audit is reproducible: no time limit, the same certificate on every machine)
    acct = PrivacyAccountant(relation=relation, time_limit=None)
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
