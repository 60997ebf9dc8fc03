"""Conformance check of a mechanism plug-in against the contract of :mod:`mechanisms.base`.

``check_mechanism(mech)`` runs cheap, implementation-independent invariants that every plug-in must
satisfy whatever its math (they catch sign errors, wrong directions, unnormalised atoms, broken
serialisation); it does not prove a curve correct -- that needs an independent reference:

* JSON round trip: ``registry.from_dict(json.loads(json.dumps(mech.to_dict())))`` equals ``mech``;
* declared field checks (``field_checks``): each names a field, and the stored values pass them
  unchanged (the checks normalise once: a second pass is the identity, type included);
* scalar properties: ``infinite_loss_mass`` in [0, 1], ``pure_epsilon`` >= 0;
* RDP: values >= 0 and non-decreasing in alpha where finite (Renyi divergences are non-decreasing in the
  order; van Erven & Harremoes 2014, Thm 3);
* log-MGF (mechanisms with a PLD, both directions): for real s = alpha - 1 the cumulant of the pair is
  (alpha - 1) D_alpha(P || Q) restricted to finite losses, so ``log_mgf_real(alpha - 1) <=
  (alpha - 1) rdp(alpha)`` up to the declared error (skipped for mechanisms with ``rdp_below_pair``:
  their guarantee is a family of pairs, the RDP curve is the per-order supremum over the family and the
  PLD pair dominates the whole family, e.g. bounded-range selection); ``log_mgf`` at real s agrees
  with ``log_mgf_real``;
  log M(0) <= log(1 - infinite_loss_mass) (the finite part is a sub-probability);
* envelope: ``log_envelope_fn(c)`` is non-increasing in t and bounds |M(c + it) - A(c + it)| at
  sampled t (A the atoms' MGF);
* ``total_variation`` in [0, 1] (when given) and at least the atoms' exact delta(0) contribution;
* ``pld_cell_masses`` (when given): non-negative, summing to 1 - infinite_loss_mass within their error;
* exact single-use profile (``exact_profile``): ``exact_delta`` brackets lie in [0, 1] with lower <= upper,
  are non-increasing in eps and at eps = 0 below ``total_variation`` (when given).

It is self-contained (numpy only) so that third-party plug-ins can run it in their own tests.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from .base import DIRECTIONS, Mechanism, UnsupportedRoute, apply_checks

__all__ = ["ConformanceError", "ConformanceReport", "check_mechanism", "example", "DEFAULT_ALPHAS",
           "EXAMPLE_PARAMS"]

DEFAULT_ALPHAS = np.array([1.01, 1.1, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0, 128.0,
                           256.0])
_REL = 1e-9


#: representative parameters of the built-in mechanisms (for ``example``: the all-registry conformance
#: test and the route listing of ``dpcert mechanisms``); a plug-in may instead define ``example()``
EXAMPLE_PARAMS: dict[str, dict] = {
    "approx_dp": {"epsilon": 1.0, "delta": 1e-6},
    "fixed_size_gaussian": {"sigma": 1.0, "batch_size": 64, "dataset_size": 6400},
    "fixed_size_gaussian_replace_one": {"sigma": 1.0, "batch_size": 64, "dataset_size": 6400},
    "shuffled_gaussian": {"sigma": 1.0, "num_steps": 100},
    "shuffled_gaussian_replace_one": {"sigma": 1.0, "num_steps": 100},
    "bounded_range": {"epsilon": 1.0},
    "discrete_gaussian": {"sigma": 2.0},
    "discrete_laplace": {"scale": 2.0},
    "exponential_mechanism": {"epsilon": 1.0},
    "gaussian": {"sigma": 1.0},
    "gaussian_mixture": {"sigma": 1.0, "sensitivities": [0.0, 1.0], "probabilities": [0.9, 0.1]},
    "gaussian_pair": {"shifts": [0.5, 0.2], "precisions": [1.2, 0.9]},
    "gaussian_svt": {"sigma1": 2.0, "sigma2": 4.0, "cutoff": 1, "max_length": 100},
    "generalized_ptr": {"epsilon": 1.0, "delta": 1e-6, "test_epsilon": 0.5, "test_delta": 1e-6,
                        "false_positive": 1e-6},
    "generalized_svt": {"threshold_noise": "gaussian", "threshold_scale": 1.0, "query_noise": "laplace",
                        "query_scale": 2.0},
    "gnmax": {"sigma": 40.0},
    "gnss": {"sigma": 1.0, "beta": 0.3},
    "gnss_upper_bound": {"beta": 0.01, "sigma_s": 15.0, "sigma_2": 15.0, "delta_2": 1e-3},
    "hard_stop_selection": {"epsilon1": 0.5, "delta1": 1e-9, "gamma": 0.1, "delta2": 1e-6},
    "known_threshold_selection": {"epsilon1": 0.5, "gamma": 0.01, "max_steps": 100},
    "laplace": {"scale": 1.0},
    "laplace_svt": {"epsilon1": 0.5, "epsilon2": 0.5},
    "matrix_mechanism": {"C": [[1.0, 0.0], [1.0, 1.0]], "sigma": 1.0},
    "noisy_screening": {"sigma": 75.0, "threshold": 180.0, "k": 300},
    "permute_and_flip": {"epsilon": 1.0},
    "poisson_subsampled": {"base": {"name": "laplace", "params": {"scale": 2.0}}, "sample_rate": 0.1},
    "private_knn": {"sigma_screen": 75.0, "threshold": 180.0, "k": 300, "sigma_answer": 25.0,
                    "sample_rate": 0.15, "num_queries": 1000, "answer_cap": 735},
    "ptr_renyi": {"test": {"name": "laplace", "params": {"scale": 2.0}},
                  "budget": {"name": "gaussian", "params": {"sigma": 3.0}},
                  "worst_case": {"name": "gaussian", "params": {"sigma": 3.0, "sensitivity": 4.0}},
                  "false_positive": 1e-6},
    "pure_dp": {"epsilon": 1.0},
    "random_stopping_selection": {"epsilon1": 0.5, "gamma": 0.01},
    "randomized_response": {"epsilon": 1.0, "k": 3},
    "report_noisy_max": {"epsilon": 1.0},
    "sampled_without_replacement": {"epsilon": 1.0, "delta": 1e-6, "sample_rate": 0.01},
    "skellam": {"mu": 10.0},
    "stagewise_svt": {"threshold_noise": "laplace", "threshold_scale": 1.0, "query_noise": "laplace",
                      "query_scale": 2.0, "cutoff": 10, "stage_cutoff": 1, "stage_delta": 1e-9},
    "subsampled_gaussian": {"sigma": 1.0, "sample_rate": 0.01},
    "subsampled_gnmax": {"sigma": 25.0, "sample_rate": 0.15},
    "subsampled_laplace": {"scale": 1.0, "sample_rate": 0.1},
    "subsampled_noisy_screening": {"sigma": 75.0, "threshold": 180.0, "k": 300, "sample_rate": 0.15},
    "tree_aggregation": {"sigma": 1.0, "steps": 16},
    "truncated_random_stopping_selection": {"epsilon1": 0.5, "gamma": 0.01, "max_steps": 1000},
    "zcdp": {"rho": 0.5},
}


def example(name_or_cls) -> Mechanism | None:
    """A representative instance of a registered mechanism: its class's ``example()`` if defined, else
    :data:`EXAMPLE_PARAMS`, else the all-defaults constructor; None if none of these works."""
    from .registry import from_dict, get

    cls = get(name_or_cls) if isinstance(name_or_cls, str) else name_or_cls
    ex = getattr(cls, "example", None)
    try:
        if callable(ex):
            return ex()
        if cls.name in EXAMPLE_PARAMS:
            return from_dict({"name": cls.name, "params": EXAMPLE_PARAMS[cls.name]})
        return cls()
    except Exception:  # noqa: BLE001 - no representative instance
        return None


class ConformanceError(AssertionError):
    """A mechanism violates the contract; the message lists every failed check."""


@dataclass
class ConformanceReport:
    """What was checked (``checks``) and what failed (``problems``, empty when the mechanism conforms)."""

    mechanism: str
    checks: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _tol(x: float, extra: float = 0.0) -> float:
    return _REL * (1.0 + abs(x)) + extra


def check_mechanism(mech: Mechanism, *, alphas=None, strict: bool = True,
                    check_envelope: bool = True) -> ConformanceReport:
    """Run the contract checks on ``mech`` (see the module docstring).

    Parameters
    ----------
    mech : Mechanism
    alphas : array of orders > 1, optional (default ``DEFAULT_ALPHAS``)
    strict : raise :class:`ConformanceError` listing the problems (default) instead of only reporting
    check_envelope : also sample the continuous envelope (a few MGF evaluations per line)

    Returns
    -------
    ConformanceReport
    """
    if not isinstance(mech, Mechanism):
        raise TypeError(f"mech must be a Mechanism, got {type(mech).__name__}")
    rep = ConformanceReport(mech.describe())
    al = np.asarray(DEFAULT_ALPHAS if alphas is None else alphas, dtype=float)
    _check_json(mech, rep)
    _check_field_checks(mech, rep)
    _check_scalars(mech, rep)
    rdp = _check_rdp(mech, al, rep)
    if mech.pld_available:
        _check_mgf(mech, al, rdp, rep)
        if check_envelope:
            _check_envelope(mech, rep)
        _check_cells(mech, rep)
    _check_tv(mech, rep)
    _check_exact_profile(mech, rep)
    if strict and rep.problems:
        raise ConformanceError(f"{rep.mechanism}: " + "; ".join(rep.problems))
    return rep


def _check_json(mech: Mechanism, rep: ConformanceReport) -> None:
    from .registry import from_dict

    rep.checks.append("json round trip")
    try:
        text = json.dumps(mech.to_dict(), allow_nan=False)
        back = from_dict(json.loads(text))
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        rep.problems.append(f"JSON round trip failed: {type(exc).__name__}: {exc}")
        return
    if back != mech or back.to_dict() != mech.to_dict():
        rep.problems.append(f"JSON round trip changed the mechanism: {back.describe()} != {mech.describe()}")


def _check_field_checks(mech: Mechanism, rep: ConformanceReport) -> None:
    checks = type(mech).field_checks
    if not checks or not dataclasses.is_dataclass(mech):
        return
    rep.checks.append("declared field checks")
    values = {f.name: getattr(mech, f.name) for f in dataclasses.fields(mech)}
    unknown = [k for k in checks if k not in values]
    if unknown:
        rep.problems.append(f"field_checks name no field: {unknown}")
        return
    again = SimpleNamespace(**values)
    try:
        apply_checks(again, checks)
    except (TypeError, ValueError) as exc:
        rep.problems.append(f"the stored values fail their own field checks: {exc}")
        return
    moved = [k for k, v in values.items() if k in checks
             and (type(getattr(again, k)) is not type(v) or getattr(again, k) != v)]
    if moved:
        rep.problems.append(f"field checks are not idempotent (a second pass changes {moved})")


def _check_scalars(mech: Mechanism, rep: ConformanceReport) -> None:
    rep.checks.append("scalar properties")
    p = mech.infinite_loss_mass
    if not 0.0 <= p <= 1.0:
        rep.problems.append(f"infinite_loss_mass {p!r} outside [0, 1]")
    e = mech.pure_epsilon
    if not (e >= 0.0):
        rep.problems.append(f"pure_epsilon {e!r} is negative or NaN")


def _check_rdp(mech: Mechanism, al: np.ndarray, rep: ConformanceReport) -> np.ndarray | None:
    try:
        v = np.asarray(mech.rdp(al), dtype=float)
    except UnsupportedRoute:
        return None
    rep.checks.append("rdp >= 0, non-decreasing")
    if v.shape != al.shape:
        rep.problems.append(f"rdp returned shape {v.shape} for orders of shape {al.shape}")
        return None
    if np.isnan(v).any():
        rep.problems.append("rdp returned NaN")
        return v
    if (v < 0).any():
        rep.problems.append(f"rdp negative at alpha={al[v < 0].tolist()}")
    fin = np.isfinite(v)
    for i in range(1, v.size):
        if fin[i - 1] and fin[i] and v[i] < v[i - 1] - _tol(v[i - 1]):
            rep.problems.append(f"rdp decreases between alpha={al[i - 1]:g} ({v[i - 1]!r}) and "
                                f"alpha={al[i]:g} ({v[i]!r})")
            break
        if not fin[i - 1] and fin[i]:
            rep.problems.append(f"rdp is infinite at alpha={al[i - 1]:g} but finite at {al[i]:g}")
            break
    return v


def _check_mgf(mech: Mechanism, al: np.ndarray, rdp, rep: ConformanceReport) -> None:
    rep.checks.append("log-mgf vs rdp, log M(0) <= log(1 - p_inf)")
    err = float(mech.log_mgf_error)
    p_inf = mech.infinite_loss_mass
    top = mech.max_mgf_order
    for d in DIRECTIONS:
        try:
            m0 = mech.log_mgf_real(0.0, d)
        except UnsupportedRoute as exc:
            rep.problems.append(f"pld_available but log_mgf_real raised: {exc}")
            return
        cap = math.log1p(-p_inf) if p_inf < 1.0 else -math.inf
        if m0 > cap + _tol(cap, 4 * err + 1e-12):
            rep.problems.append(f"{d}: log M(0) = {m0!r} exceeds log(1 - infinite_loss_mass) = {cap!r}")
        # a mechanism whose pairs form a family may state an RDP curve (the per-order supremum over the
        # family) below the Renyi divergence of the single pair that dominates the whole family
        family = bool(getattr(mech, "rdp_below_pair", False))
        if family and "rdp below the pair's (family supremum): not compared" not in rep.checks:
            rep.checks.append("rdp below the pair's (family supremum): not compared")
        for a, r in zip(al.tolist(), (rdp if rdp is not None else [None] * al.size), strict=True):
            s = a - 1.0
            if s >= top:
                continue
            lm = mech.log_mgf_real(s, d)
            lc = complex(np.asarray(mech.log_mgf(np.array([complex(s)]), d)).ravel()[0])
            if math.isfinite(lm) and abs(lc.real - lm) > _tol(lm, 4 * err + 1e-10 * (1 + s)):
                rep.problems.append(f"{d}: log_mgf({s:g}) = {lc.real!r} but log_mgf_real = {lm!r}")
                break
            if r is not None and not family and math.isfinite(r) and math.isfinite(lm):
                bound = s * r
                if lm > bound + _tol(bound, 10 * err + 1e-9 * (1 + s)):
                    rep.problems.append(f"{d}: log M({s:g}) = {lm!r} > (alpha - 1) rdp(alpha) = {bound!r} "
                                        f"at alpha={a:g}")
                    break


def _check_envelope(mech: Mechanism, rep: ConformanceReport) -> None:
    rep.checks.append("envelope non-increasing and >= |M - A|")
    ts = np.array([0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 100.0])
    top = mech.max_mgf_order
    err = float(mech.log_mgf_error)
    for d in DIRECTIONS:
        l, w = mech.pld_atoms(d)
        l, w = np.asarray(l, dtype=float), np.asarray(w, dtype=float)
        for c in (0.25, 1.0, 3.0):
            if c >= top:
                continue
            env = mech.log_envelope_fn(c, d)
            vals = [float(env(t)) for t in ts]
            if any(math.isnan(v) for v in vals):
                rep.problems.append(f"{d}: envelope NaN at c={c}")
                return
            for i in range(1, len(vals)):
                if vals[i] > vals[i - 1] + _tol(vals[i - 1]):
                    rep.problems.append(f"{d}: envelope increases in t at c={c} "
                                        f"(t={ts[i - 1]:g} -> {ts[i]:g})")
                    return
            s = c + 1j * ts
            # everything relative to M(c) (no overflow): |M - A| / M(c) against env / M(c)
            log_scale = mech.log_mgf_real(c, d)
            lm = np.asarray(mech.log_mgf(s, d), dtype=complex)
            rel = np.exp(lm - log_scale)
            if l.size:
                with np.errstate(divide="ignore"):
                    lw = np.log(w)
                rel = rel - np.sum(np.exp(lw[:, None] + np.multiply.outer(l, s) - log_scale), axis=0)
            slack = 1e-9 + 4 * err
            for t, mv, v in zip(ts, rel, vals, strict=True):
                bound = math.exp(v - log_scale) if v > -math.inf else 0.0
                if abs(mv) > bound + slack:
                    rep.problems.append(f"{d}: |M - A|(c={c}, t={t:g}) / M(c) = {abs(mv)!r} exceeds the "
                                        f"envelope / M(c) = {bound!r}")
                    return


def _check_cells(mech: Mechanism, rep: ConformanceReport) -> None:
    edges = np.linspace(-5.0, 5.0, 41)
    for d in DIRECTIONS:
        res = mech.pld_cell_masses(edges, d)
        if res is None:
            return
        if "pld cell masses" not in rep.checks:
            rep.checks.append("pld cell masses")
        m, err = res
        m = np.asarray(m, dtype=float)
        tot_err = float(np.sum(err)) if np.ndim(err) else float(err)
        if (m < -tot_err - 1e-300).any():
            rep.problems.append(f"{d}: negative cell masses")
        target = 1.0 - mech.infinite_loss_mass
        if abs(float(np.sum(m)) - target) > tot_err + 1e-9:
            rep.problems.append(f"{d}: cell masses sum to {float(np.sum(m))!r}, expected {target!r}")


def _check_exact_profile(mech: Mechanism, rep: ConformanceReport) -> None:
    if not getattr(mech, "exact_profile", False):
        return
    rep.checks.append("exact profile")
    eps_grid = (0.0, 0.1, 0.5, 1.0, 2.0, 4.0)
    for d in DIRECTIONS:
        vals = [mech.exact_delta(e, d) for e in eps_grid]
        for e, (lo, hi) in zip(eps_grid, vals, strict=True):
            if not 0.0 <= lo <= hi <= 1.0:
                rep.problems.append(f"{d}: exact_delta({e}) = ({lo!r}, {hi!r}) is not a bracket in [0, 1]")
                return
        his = [v[1] for v in vals]
        los = [v[0] for v in vals]
        if any(lo_next > hi_prev for hi_prev, lo_next in zip(his, los[1:], strict=False)):
            rep.problems.append(f"{d}: exact_delta increases in eps: {vals!r}")
        tv = mech.total_variation(d)
        if tv is not None and vals[0][0] > tv + _tol(tv):
            rep.problems.append(f"{d}: exact_delta(0) lower end {vals[0][0]!r} above total_variation {tv!r}")


def _check_tv(mech: Mechanism, rep: ConformanceReport) -> None:
    for d in DIRECTIONS:
        try:
            tv = mech.total_variation(d)
        except UnsupportedRoute:
            return
        if tv is None:
            continue
        if "total variation" not in rep.checks:
            rep.checks.append("total variation")
        if not 0.0 <= tv <= 1.0:
            rep.problems.append(f"{d}: total_variation {tv!r} outside [0, 1]")
            return
        if mech.pld_available:
            # delta(0) >= the atoms' own contribution sum_{l > 0} w (1 - e^{-l}) (+ p_inf)
            l, w = mech.pld_atoms(d)
            l, w = np.asarray(l, dtype=float), np.asarray(w, dtype=float)
            part = float(np.sum(w[l > 0] * -np.expm1(-l[l > 0]))) + mech.infinite_loss_mass
            if tv < part - _tol(part):
                rep.problems.append(f"{d}: total_variation {tv!r} below the atoms' delta(0) {part!r}")
