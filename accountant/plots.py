"""Plots of a composition's privacy: epsilon vs steps, privacy profile delta(eps), RDP curve, f-DP trade-off,
and the certified trajectory of a run (upper and lower bound per epoch, :mod:`accountant.report`).

matplotlib is the optional ``plot`` extra (``pip install 'dpcert[plot]'``); it is imported lazily, only
when a figure is drawn, and a missing install raises :class:`MissingMatplotlib` with that instruction.
Figures are built with the object-oriented API (``matplotlib.figure.Figure`` + the Agg canvas), so no
global pyplot state or interactive backend is touched.  Every ``plot_*`` function returns the Figure;
:func:`save_figure` writes PNG and/or SVG.

Every plotted epsilon / delta is a dpcert *certified upper bound* at its point.  The trade-off curve
is derived from the certified privacy profile by the standard conversion (Dong, Roth & Su 2022,
Prop. 2.12 read backwards; Zhu 2023 thesis, Table 3.1): a mechanism that is (eps, delta(eps))-DP
for every eps in a grid E has trade-off function

    beta(a) >= max_{eps in E} max(0, 1 - delta(eps) - e^eps a, e^-eps (1 - delta(eps) - a)),

type I error a in [0, 1] against type II error beta.  Each term is the trade-off function f_{eps,delta}
of one (eps, delta) guarantee, so the maximum over any finite grid is a valid (conservative) lower bound
on the true trade-off curve (higher = more private); it is convex and non-increasing in a, being a
maximum of convex non-increasing functions.  Uses certified delta upper bounds, so it errs on the
safe side.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from accountant import PrivacyAccountant
from mechanisms.base import Mechanism

from ._figure import MissingMatplotlib as MissingMatplotlib  # re-exported: plots raise it
from ._figure import figure as _figure

DEFAULT_METHODS = ("cf", "rdp", "rdp_classic", "exact")


def _accountant(mechanism: Mechanism, times: int, relation: str = "add_remove") -> PrivacyAccountant:
    return PrivacyAccountant(relation=relation).compose(mechanism, times)


def _noop(_: str) -> None:
    return None


# ------------------------------------------------------------------------------------------- data
def eps_vs_steps(mechanism: Mechanism, steps: Sequence[int], delta: float,
                 methods: Sequence[str] = DEFAULT_METHODS, relation: str = "add_remove",
                 progress: Callable[[str], None] = _noop) -> dict[str, np.ndarray]:
    """Certified epsilon(delta) after ``t`` compositions of ``mechanism`` for each ``t`` in ``steps``.

    Returns ``{method: array}`` for every method in ``methods`` that is available for this mechanism
    (e.g. "exact" only for Gaussian ledgers, "cf" only with a privacy-loss distribution).
    """
    steps = [int(t) for t in steps]
    probe = PrivacyAccountant(relation=relation).compose(mechanism, max(1, steps[0]))
    valid = [m for m in methods if m in probe._valid_methods()]
    out = {m: np.empty(len(steps)) for m in valid}
    for i, t in enumerate(steps):
        acct = _accountant(mechanism, t, relation)
        for m in valid:
            out[m][i] = acct.certificate(delta=delta, method=m).epsilon
        progress(f"  eps vs steps: {i + 1}/{len(steps)} (steps={t})")
    return out


def privacy_profile(acct: PrivacyAccountant, eps_grid: Sequence[float], method: str = "auto",
                    progress: Callable[[str], None] = _noop) -> np.ndarray:
    """Certified delta(eps) (upper bounds) on ``eps_grid``."""
    eps_grid = np.asarray(eps_grid, dtype=float)
    out = np.empty(eps_grid.shape)
    for i, e in enumerate(eps_grid):
        out[i] = acct.certificate(epsilon=float(e), method=method).delta
        progress(f"  privacy profile: {i + 1}/{len(eps_grid)}")
    return out


def tradeoff_from_profile(eps: Sequence[float], delta: Sequence[float],
                          type1: Sequence[float]) -> np.ndarray:
    """Lower bound on the f-DP trade-off function from (eps, delta(eps)) pairs (see module docstring).

    ``type1``: type I errors a in [0, 1].  Returns beta(a), clipped to [0, 1 - a] (the trade-off
    function of a perfectly private mechanism is 1 - a, so no valid bound exceeds it).
    """
    e = np.asarray(eps, dtype=float)[None, :]
    d = np.asarray(delta, dtype=float)[None, :]
    a = np.asarray(type1, dtype=float)[:, None]
    if np.any(e < 0) or np.any((d < 0) | (d > 1)):
        raise ValueError("need eps >= 0 and delta in [0, 1]")
    with np.errstate(over="ignore"):
        t1 = 1.0 - d - np.exp(e) * a
    t2 = np.exp(-e) * (1.0 - d - a)
    beta = np.max(np.maximum(0.0, np.maximum(t1, t2)), axis=1)
    return np.minimum(beta, 1.0 - a[:, 0])


def default_eps_grid(acct: PrivacyAccountant, delta: float, points: int = 24) -> np.ndarray:
    """0 .. 1.5 x eps(delta) (at least 1), ``points`` values."""
    e_hi = acct.epsilon(delta, method="rdp") if acct.ledger else 1.0
    top = max(1.0, 1.5 * e_hi) if math.isfinite(e_hi) else 10.0
    return np.linspace(0.0, top, points)


# ------------------------------------------------------------------------------------------- figures
def plot_eps_vs_steps(mechanism: Mechanism, steps: Sequence[int], delta: float,
                      methods: Sequence[str] = DEFAULT_METHODS, relation: str = "add_remove",
                      data: dict[str, np.ndarray] | None = None,
                      progress: Callable[[str], None] = _noop):
    """Epsilon(delta) against the number of compositions, one line per accounting method."""
    fig = _figure()
    if data is None:
        data = eps_vs_steps(mechanism, steps, delta, methods, relation, progress)
    ax = fig.add_subplot()
    names = {"cf": "dpcert characteristic function (certified)", "rdp": "RDP, improved conversion",
             "rdp_classic": "RDP, classic conversion", "exact": "exact (Gaussian DP)"}
    styles = {"cf": "-", "rdp": "--", "rdp_classic": ":", "exact": "-."}
    for m, vals in data.items():
        ax.plot(list(steps), vals, styles.get(m, "-"), marker="o", ms=3, label=names.get(m, m))
    ax.set_xlabel("number of compositions (training steps)")
    ax.set_ylabel(f"certified epsilon at delta = {delta:g}")
    ax.set_title(f"epsilon vs steps: {mechanism.describe()}", fontsize=9)
    ax.set_xscale("log" if min(steps) > 0 and max(steps) / min(steps) > 50 else "linear")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_privacy_profile(acct: PrivacyAccountant, eps_grid: Sequence[float] | None = None,
                         delta: float = 1e-5, method: str = "auto", profile: np.ndarray | None = None,
                         progress: Callable[[str], None] = _noop):
    """The privacy profile delta(eps) (log scale), certified upper bounds."""
    fig = _figure()
    eps_grid = default_eps_grid(acct, delta) if eps_grid is None else np.asarray(eps_grid, dtype=float)
    if profile is None:
        profile = privacy_profile(acct, eps_grid, method, progress)
    ax = fig.add_subplot()
    ax.plot(eps_grid, profile, "-", marker="o", ms=3, label=f"certified delta(eps) [{method}]")
    ax.set_yscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("delta(epsilon)")
    ax.set_title("privacy profile: " + "; ".join(acct.ledger.summary()), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_rdp_curve(acct: PrivacyAccountant, alphas: Sequence[float] | None = None):
    """The composed RDP curve eps(alpha) (log-log)."""
    fig = _figure()
    alphas = np.geomspace(1.05, 512.0, 80) if alphas is None else np.asarray(alphas, dtype=float)
    vals = np.asarray(acct.rdp(alphas), dtype=float)
    ax = fig.add_subplot()
    ax.plot(alphas, vals, "-", label="composed RDP eps(alpha)")
    ax.set_xscale("log")
    if np.all(vals[np.isfinite(vals)] > 0):
        ax.set_yscale("log")
    ax.set_xlabel("Renyi order alpha")
    ax.set_ylabel("RDP epsilon(alpha)")
    ax.set_title("RDP curve: " + "; ".join(acct.ledger.summary()), fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def plot_tradeoff(acct: PrivacyAccountant, eps_grid: Sequence[float] | None = None, delta: float = 1e-5,
                  profile: np.ndarray | None = None, points: int = 201,
                  progress: Callable[[str], None] = _noop):
    """f-DP trade-off curve (type I vs type II error) from the certified privacy profile."""
    fig = _figure(figsize=(5.2, 5.0))
    eps_grid = default_eps_grid(acct, delta) if eps_grid is None else np.asarray(eps_grid, dtype=float)
    if profile is None:
        profile = privacy_profile(acct, eps_grid, progress=progress)
    a = np.linspace(0.0, 1.0, points)
    beta = tradeoff_from_profile(eps_grid, profile, a)
    ax = fig.add_subplot()
    ax.plot(a, 1.0 - a, ":", color="grey", label="perfect privacy (1 - alpha)")
    ax.plot(a, beta, "-", label="trade-off lower bound (from certified profile)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_aspect("equal")
    ax.set_xlabel("type I error alpha")
    ax.set_ylabel("type II error beta")
    ax.set_title("f-DP trade-off: " + "; ".join(acct.ledger.summary()), fontsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def save_figure(fig, stem: str | Path, formats: Sequence[str] = ("png", "svg")) -> list[Path]:
    """Write ``fig`` as ``stem.<fmt>`` for each format; returns the paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    out = []
    for fmt in formats:
        if fmt not in ("png", "svg", "pdf"):
            raise ValueError(f"format must be png, svg or pdf, got {fmt!r}")
        path = stem.with_suffix("." + fmt)
        fig.savefig(path, format=fmt, dpi=120)
        out.append(path)
    return out


def report_steps(times: int, every: int | None, points: int) -> dict:
    """The points of a trajectory plot: ``every=`` (a point per epoch and at the end) when given, else
    ``points`` counts spread evenly over 1..``times`` (always ending at ``times``)."""
    if every is not None:
        return {"every": every}
    n = max(1, min(points, times))
    return {"steps": sorted({max(1, round(times * (i + 1) / n)) for i in range(n)})}


def plot_report(acct: PrivacyAccountant, delta: float, every: int | None = None, points: int = 12):
    """The certified epsilon(delta) trajectory of the run in ``acct``: upper and lower bound after every
    ``every`` compositions (an epoch; else ``points`` evenly spread counts), from
    :meth:`PrivacyAccountant.report` (each point certified for its prefix of the run)."""
    rep = acct.report(delta, **report_steps(acct.ledger.total_count, every, points))
    return rep.plot()


#: every plot kind; ``DEFAULT_KINDS`` are drawn when none are asked for
KINDS = ("steps", "profile", "rdp", "tradeoff", "report")
DEFAULT_KINDS = ("steps", "profile", "rdp", "tradeoff")


def make_plots(mechanism: Mechanism, times: int, delta: float, outdir: str | Path,
               formats: Sequence[str] = ("png", "svg"), kinds: Sequence[str] = DEFAULT_KINDS,
               points: int = 12, relation: str = "add_remove", prefix: str = "dpcert",
               progress: Callable[[str], None] = _noop, every: int | None = None) -> list[Path]:
    """Draw and save the requested plots for ``times`` compositions of ``mechanism`` (``every``: the
    compositions per epoch of the ``report`` kind)."""
    unknown = set(kinds) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown plot kinds {sorted(unknown)}; choose from {KINDS}")
    outdir = Path(outdir)
    acct = _accountant(mechanism, times, relation)
    written: list[Path] = []
    if "steps" in kinds:
        progress("plot: epsilon vs steps")
        steps = np.unique(np.geomspace(1, times, points).round().astype(int)) if times > 1 else np.array([1])
        fig = plot_eps_vs_steps(mechanism, steps, delta, relation=relation, progress=progress)
        written += save_figure(fig, outdir / f"{prefix}_eps_vs_steps", formats)
    profile = eps_grid = None
    if "profile" in kinds or "tradeoff" in kinds:
        progress("plot: privacy profile")
        eps_grid = default_eps_grid(acct, delta, points=max(points, 8))
        profile = privacy_profile(acct, eps_grid, progress=progress)
    if "profile" in kinds:
        written += save_figure(plot_privacy_profile(acct, eps_grid, delta, profile=profile),
                               outdir / f"{prefix}_privacy_profile", formats)
    if "rdp" in kinds:
        progress("plot: RDP curve")
        written += save_figure(plot_rdp_curve(acct), outdir / f"{prefix}_rdp_curve", formats)
    if "tradeoff" in kinds:
        progress("plot: f-DP trade-off")
        written += save_figure(plot_tradeoff(acct, eps_grid, delta, profile=profile),
                               outdir / f"{prefix}_tradeoff", formats)
    if "report" in kinds:
        progress("plot: certified trajectory (report)")
        written += save_figure(plot_report(acct, delta, every, points), outdir / f"{prefix}_report", formats)
    return written
