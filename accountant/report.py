"""Privacy reports: the certified epsilon(delta) trajectory of a run (e.g. after every epoch).

The accountant keeps the order of composition as runs ``[(mechanism, count)]`` (a training loop that
calls ``step`` with the same parameters is one run).  The point after ``t`` compositions is the ledger
of the first ``t`` of them, certified like any query: each epsilon is a certified upper bound for the
prefix of the run it names (never an extrapolation).  The true epsilon is non-decreasing along the run
(dropping the later outputs is post-processing), so a certified value below the previous one would mean
a defect; it is reported in ``notes`` (and warned about), never smoothed away.

Cost: one certified query per point (the same answer as a fresh accountant holding that prefix); only
process-level state is shared (warm numba kernels).  Ledgers of Gaussian mechanisms take the closed
form (microseconds per point); DP-SGD takes ~0.05-0.5 s per point.  Trying the previous point's
route first was measured to save nothing (``auto`` already stops after the contour route when it is
tight), so it is not done; a cheaper trajectory would need the contour plan to be shared across counts
(not implemented).  For a loaded state file the composition order of the saved part is
not known (state files keep counts), nor is it kept past ``MAX_HISTORY_RUNS`` runs (memory bound):
the points then follow the ledger's order and ``order`` says so.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mechanisms import validation as V

from ._figure import figure


class NonMonotoneReportWarning(RuntimeWarning):
    """A certified epsilon decreased along the run (a defect to report: the truth never decreases)."""


@dataclass(frozen=True)
class PrivacyReport:
    """The certified epsilon(delta) trajectory of a run.

    Attributes
    ----------
    delta : float
    steps : tuple of int
        Number of compositions (in composition order) at each point.
    epsilon : tuple of float
        Certified upper bound on epsilon(delta) of the first ``steps[i]`` compositions.
    lower : tuple of (float or None)
        Certified lower bound on the true epsilon of the worst-case pair, where known.
    methods : tuple of str
        The route that certified each point.
    every : int or None
        Compositions per epoch, when the points were asked for as every ``every`` compositions.
    order : str
        "composition" (the run's order) or "ledger" (order unknown: a loaded state file).
    """

    delta: float
    steps: tuple[int, ...]
    epsilon: tuple[float, ...]
    lower: tuple[float | None, ...]
    methods: tuple[str, ...]
    every: int | None
    relation: str
    ledger: tuple[str, ...]
    order: str = "composition"
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def epochs(self) -> tuple[float, ...] | None:
        """``steps / every`` (None without ``every``)."""
        return None if not self.every else tuple(t / self.every for t in self.steps)

    def to_dict(self) -> dict[str, Any]:
        def num(x):
            if x is None:
                return None
            return x if math.isfinite(x) else ("inf" if x > 0 else "nan")

        pts = []
        for i, t in enumerate(self.steps):
            p = {"step": t, "epsilon": num(self.epsilon[i]), "lower_bound": num(self.lower[i]),
                 "method": self.methods[i]}
            if self.every:
                p["epoch"] = t / self.every
            pts.append(p)
        return {"format": "dpcert-report", "delta": self.delta, "relation": self.relation,
                "every": self.every, "order": self.order, "ledger": list(self.ledger), "points": pts,
                "seconds": self.seconds, "notes": list(self.notes)}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    def __str__(self) -> str:
        head = f"{'epoch':>8} " if self.every else ""
        rel = self.relation.replace("_", "/")
        lines = [f"certified epsilon at delta = {self.delta:g} ({rel} neighbours)",
                 f"{head}{'step':>10} {'epsilon':>12} {'lower bound':>12}  method"]
        for i, t in enumerate(self.steps):
            ep = f"{t / self.every:>8.4g} " if self.every else ""
            lo = "" if self.lower[i] is None else f"{self.lower[i]:.6g}"
            lines.append(f"{ep}{t:>10d} {self.epsilon[i]:>12.6g} {lo:>12}  {self.methods[i]}")
        if self.order != "composition":
            lines.append("(composition order unknown: points follow the ledger's order)")
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def plot(self, path: str | None = None, *, ax=None):
        """Certified epsilon against epochs (or steps), with the lower bounds where known.

        Returns the matplotlib Figure (``path``: also saved there; the format from its suffix).  Needs
        matplotlib (``pip install 'dpcert[plot]'``).
        """
        fig = None
        if ax is None:
            fig = figure()
            ax = fig.add_subplot()
        x = self.epochs if self.every else self.steps
        ax.plot(x, self.epsilon, "-", marker="o", ms=3, label="certified epsilon (upper bound)")
        lows = [(xi, lo) for xi, lo in zip(x, self.lower, strict=True) if lo is not None]
        if lows:
            ax.plot([a for a, _ in lows], [b for _, b in lows], ":", color="grey",
                    label="certified lower bound")
        ax.set_xlabel("epoch" if self.every else "number of compositions (steps)")
        ax.set_ylabel(f"epsilon at delta = {self.delta:g}")
        ax.set_title("privacy over the run: " + "; ".join(self.ledger), fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        fig = fig if fig is not None else ax.figure
        if path is not None:
            fig.savefig(path, dpi=120)
        return fig


def _points(total: int, every: int | None, steps: Sequence[int] | None) -> list[int]:
    if (every is None) == (steps is None):
        raise TypeError("give every= (compositions per epoch) or steps= (a list of counts), not both")
    if every is not None:
        every = V.integer("every", every, low=1)
        pts = list(range(every, total + 1, every))
        if not pts or pts[-1] != total:
            pts.append(total)
        return pts
    if isinstance(steps, (str, bytes)) or not isinstance(steps, Sequence):
        raise TypeError(f"steps must be a list of integers, got {type(steps).__name__}")
    pts = sorted({V.integer("steps", t, low=1, high=total) for t in steps})
    if not pts:
        raise ValueError("steps must list at least one count")
    return pts


def prefix(runs: list[tuple[Any, int]], t: int) -> list[tuple[Any, int]]:
    """The first ``t`` compositions of ``runs`` (merged per mechanism, first-use order)."""
    out: dict = {}
    left = t
    for m, k in runs:
        if left <= 0:
            break
        take = min(k, left)
        out[m] = out.get(m, 0) + take
        left -= take
    return list(out.items())


def trajectory(acct, delta: float, *, every: int | None = None, steps: Sequence[int] | None = None,
               method: str = "auto") -> PrivacyReport:
    """Certified epsilon(``delta``) after every ``every`` compositions (and at the end), or after each
    count in ``steps``, for the run recorded in ``acct`` (a :class:`PrivacyAccountant`)."""
    delta = V.delta(delta)
    runs = acct._history_entries()
    exact_order = getattr(acct, "_history_exact", False) and acct._history_consistent()
    total = sum(k for _, k in runs)
    if total == 0:
        raise ValueError("nothing composed yet: the report needs at least one composition")
    pts = _points(total, every, steps)
    t0 = time.perf_counter()
    eps, lows, meths, notes = [], [], [], []
    for t in pts:
        a = acct._empty_like()
        for m, k in prefix(runs, t):
            a._ledger.add(m, k)
        cert = a.certificate(delta=delta, method=method)
        if eps and cert.epsilon < eps[-1]:
            msg = (f"certified epsilon decreased from {eps[-1]:.9g} (step {pts[len(eps) - 1]}) to "
                   f"{cert.epsilon:.9g} (step {t}): please report this (the truth never decreases)")
            notes.append(msg)
            warnings.warn(f"dpcert report: {msg}", NonMonotoneReportWarning, stacklevel=3)
        eps.append(float(cert.epsilon))
        lows.append(None if cert.lower_bound is None else float(cert.lower_bound))
        meths.append(cert.method)
    summary = tuple(f"{k} x {m.describe()}" for m, k in runs)
    return PrivacyReport(delta=delta, steps=tuple(pts), epsilon=tuple(eps), lower=tuple(lows),
                         methods=tuple(meths), every=every, relation=acct.relation, ledger=summary,
                         order="composition" if exact_order else "ledger",
                         seconds=time.perf_counter() - t0, notes=tuple(notes))
