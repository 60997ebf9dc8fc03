"""Privacy reports: the certified epsilon(delta) trajectory of a run (e.g. after every epoch).

The accountant keeps the order of composition as runs ``[(mechanism, count)]`` (a training loop that
calls ``step`` with the same parameters is one run).  The point after ``t`` compositions is the ledger
of the first ``t`` of them, certified like any query: each epsilon is a certified upper bound for the
prefix of the run it names (never an extrapolation).  The true epsilon is non-decreasing along the run
(dropping the later outputs is post-processing), so a certified value below the previous one would mean
a defect; it is reported in ``notes`` (and warned about), never smoothed away.

Cost.  Points whose standalone query would start with the characteristic-function route (``cf``: no
closed form applies) share the contour's per-mechanism values across the run
(:mod:`conversions.contour_family`: real log-MGFs, line envelopes and node values do not depend on the
counts; lines, steps and the Chernoff search are taken from fixed grids so that they recur, and each
point's plan starts from the previous point's).  Every error term is still evaluated for the point's
own counts, so each point is a certified bracket for its prefix, as a standalone query's is, and
agrees with it to within the standalone bracket's width (both brackets are certified, so they
overlap); the method column says "cf (shared)".  A point is answered by a standalone query (method
"... (standalone)", and a note) when its shared plan would be capped (near-atomic losses, e.g. the
first epochs of DP-SGD at small sample rates: the standalone query splits the loss), when the shared
bracket is wider than ``auto``'s stopping rule (``auto`` would go on to other routes), past the work
limit, or on a numerical failure; closed forms (Gaussian ledgers) and other methods are standalone
queries anyway.  ``shared=False`` answers every point with a standalone query.

Measured (``python -m benchmarks.bench_report``; CPU ms per point, warm, delta = 1e-5; whole report /
the later half of the run alone; the same points answered by standalone queries in brackets):

* DP-SGD q=0.01, sigma=1.1, every=100, T=6000: 18 (34) / 2.7 (17); one query of the whole run: 18;
* DP-SGD q=0.001, sigma=1, every=1000, T=1e5: 26 (60) / 5.4 (34); one query: 29;
* DP-SGD q=0.05, sigma=0.8, every=20, T=2000: 20 (56) / 2.5 (18); one query: 18;
* two phases, q=0.01, sigma 1.1 then 0.9, every=100, T=3000+3000: 16 (54) / 3.6 (32); one query: 29;
* Gaussian(3) and Laplace(20) alternating, every=2, 100 uses: 0.7 (0.7) / 0.6 (0.7) (a count-dependent
  exact-atom and closed-form-term part dominates there: nothing to share).

So once past the first epochs a point costs 6-9 times less than a standalone query (1.2-1.7 ms per
point over 200 points of the later half of these three DP-SGD runs); a whole report costs 2-3.5 times
less than a loop of standalone queries, and about one standalone query per point, because its first
(near-atomic) epochs are the costly ones for either method (standalone queries, or the first contour
with a large truncation).
For a loaded state file the composition order of the saved part is not known (state files keep
counts), nor is it kept past ``MAX_HISTORY_RUNS`` runs (memory bound): the points then follow the
ledger's order and ``order`` says so.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from conversions import contour, contour_family
from conversions.bracket import Bracket
from mechanisms import validation as V

from . import routes
from ._figure import figure
from .ledger import Ledger
from .route_choice import auto_candidates


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


class _Standalone(Exception):
    """This point is answered by a standalone query (the reason is the message)."""


class _SharedContour:
    """The characteristic-function route for the points of one report, sharing the contour's
    per-mechanism values across points (:mod:`conversions.contour_family`).

    A point goes this way when ``cf`` is the route the standalone query would try first (``auto``: no
    closed form applies) or the one asked for.  Its bracket is the worst over the dominating-pair
    directions, as :class:`~accountant.routes.CharacteristicFunctionRoute` forms it.  Under ``auto``
    it stands only when it is as tight as the standalone selection requires to stop after ``cf``
    (``AUTO_SKIP_RTOL``); otherwise, and when the plan would be capped (near-atomic losses: the
    standalone query splits the loss or takes the discretised PLD), past the work limit or on a
    numerical failure, the point is answered by a standalone query.
    """

    def __init__(self, rtol: float, method: str, auto_rules: tuple[float, float]):
        self.rtol = rtol
        self.method = method
        self.skip_rtol, auto_work = auto_rules
        self.work_limit = auto_work if method == "auto" else contour.QUERY_WORK_LIMIT
        self.shared: dict[str, contour_family.SharedTerms] = {}  # per direction
        self.warm: dict[str, dict] = {}

    def applies(self, ledger: Ledger) -> bool:
        """Whether the point goes this way (``cf`` is the route its standalone query would try first)."""
        if self.method not in ("auto", "cf"):
            return False
        if self.method == "auto":
            names = [r.name for r in auto_candidates(ledger)]
            return bool(names) and names[0] == "cf"
        return "cf" in [r.name for r in routes.applicable(ledger)]

    def point(self, ledger: Ledger, delta: float) -> Bracket:
        res = []
        for d in routes.directions(ledger):
            if d not in self.shared:
                self.shared[d] = contour_family.SharedTerms(d)
            sh = self.shared[d]
            try:
                pld = contour_family.FamilyPLD(ledger.items(), d, sh)
                res.append(contour_family.family_epsilon_bounds(
                    pld, delta, self.rtol, warm=self.warm.setdefault(d, {}), work_limit=self.work_limit))
            except contour.WouldBeCapped:
                raise _Standalone("the shared contour's plan would be capped (near-atomic loss)") from None
            except contour.WorkLimitReached:
                raise _Standalone("the shared contour reached its work limit") from None
            except (ValueError, ArithmeticError) as exc:
                raise _Standalone(f"the shared contour failed ({type(exc).__name__}: {exc})") from None
        b = routes.CharacteristicFunctionRoute._worst(ledger, res)
        if b.details.get("warning"):
            raise _Standalone(f"the shared contour warned ({b.details['warning']})")
        tight = b.lower is not None and b.upper - b.lower <= self.skip_rtol * abs(b.upper)
        if self.method == "auto" and not tight:
            raise _Standalone("the shared contour's bracket is wider than auto's stopping rule")
        return b


def trajectory(acct, delta: float, *, every: int | None = None, steps: Sequence[int] | None = None,
               method: str = "auto", shared: bool = True) -> PrivacyReport:
    """Certified epsilon(``delta``) after every ``every`` compositions (and at the end), or after each
    count in ``steps``, for the run recorded in ``acct`` (a :class:`PrivacyAccountant`).

    ``shared=False`` answers every point with a standalone query (the certificate of a fresh accountant
    holding that prefix); the default shares the contour's per-mechanism values across points (see the
    module docstring)."""
    delta = V.delta(delta)
    if not isinstance(shared, bool):
        raise TypeError(f"shared must be True or False, got {shared!r}")
    if method not in routes.methods():
        raise ValueError(f"method must be one of {routes.methods()}, got {method!r}")
    runs = acct._history_entries()
    exact_order = getattr(acct, "_history_exact", False) and acct._history_consistent()
    total = sum(k for _, k in runs)
    if total == 0:
        raise ValueError("nothing composed yet: the report needs at least one composition")
    pts = _points(total, every, steps)
    t0 = time.perf_counter()
    family = _SharedContour(acct.rtol, method, acct._auto_rules()) if shared else None
    eps, lows, meths, notes = [], [], [], []
    fallbacks: dict[str, list[int]] = {}
    for t in pts:
        ledger = Ledger()
        for m, k in prefix(runs, t):
            ledger.add(m, k)
        b = None
        tried = family is not None and family.applies(ledger)
        if tried:
            try:
                b = family.point(ledger, delta)
            except _Standalone as why:
                fallbacks.setdefault(str(why), []).append(t)
        if b is not None:
            up, lo, name = float(b.upper), (None if b.lower is None else float(b.lower)), "cf (shared)"
        else:
            a = acct._empty_like()
            a._ledger = ledger
            cert = a.certificate(delta=delta, method=method)
            up, lo = float(cert.epsilon), (None if cert.lower_bound is None else float(cert.lower_bound))
            name = cert.method + (" (standalone)" if tried else "")
        if eps and up < eps[-1]:
            msg = (f"certified epsilon decreased from {eps[-1]:.9g} (step {pts[len(eps) - 1]}) to "
                   f"{up:.9g} (step {t}): please report this (the truth never decreases)")
            notes.append(msg)
            warnings.warn(f"dpcert report: {msg}", NonMonotoneReportWarning, stacklevel=3)
        eps.append(up)
        lows.append(lo)
        meths.append(name)
    for why, ts in fallbacks.items():
        at = ", ".join(map(str, ts[:8])) + (", ..." if len(ts) > 8 else "")
        notes.append(f"standalone query at {len(ts)} point(s) (steps {at}): {why}")
    summary = tuple(f"{k} x {m.describe()}" for m, k in runs)
    return PrivacyReport(delta=delta, steps=tuple(pts), epsilon=tuple(eps), lower=tuple(lows),
                         methods=tuple(meths), every=every, relation=acct.relation, ledger=summary,
                         order="composition" if exact_order else "ledger",
                         seconds=time.perf_counter() - t0, notes=tuple(notes))
