"""Routes: the ways of turning a ledger into a certified (epsilon, delta) bracket.

A route is a small object with a public ``name`` (what ``method=`` selects and the certificate names),
``applies(ledger)`` and two queries that return a :class:`conversions.bracket.Bracket`::

    route.epsilon(ledger, delta, ctx) -> Bracket     # epsilon at this delta
    route.delta(ledger, epsilon, ctx) -> Bracket     # delta at this epsilon

``ctx`` (:class:`QueryContext`) carries the accountant's accuracy target and its per-ledger caches.
:data:`ROUTES` is the ordered list ``method="auto"`` walks (tightest first); a new route is one class and
one :func:`register_route` call.  Several routes may share a public name (the closed forms are all
"exact"): ``method=NAME`` uses the first of them that applies.

Every route must be sound on its own: ``upper`` at least the true value of the composed dominating pair,
``lower`` (when given) at most it.  The accountant only picks the smallest upper bound and the largest
lower bound among the routes it evaluated.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from conversions import (
    contour,
    dominated,
    lower_bounds,
    pld,
    rdp_to_dp,
    split,
)
from conversions.bracket import Bracket
from conversions.contour_terms import query_clock

from .ledger import Ledger
from .route_count import SampleCountRoute
from .route_errors import RouteDeferred, RouteTimedOut, RouteUnavailable  # noqa: F401 (part of this module's API)
from .route_exact import (  # noqa: F401 (part of this module's API)
    GaussianExactRoute,
    LaplaceExactRoute,
    SingleUseExactRoute,
    SubsampledGaussianExactRoute,
)


@dataclass
class QueryContext:
    """What a route may use besides the ledger: the target accuracy and the accountant's caches.

    ``cache`` lives as long as the ledger is unchanged (the accountant clears it on every composition),
    so a route can keep expensive per-ledger objects there (the cf route keeps its composed PLDs)."""

    rtol: float
    cache: dict = field(default_factory=dict)
    #: set by ``method="auto"`` when a later numerical route exists: a route whose plan predicts a
    #: capped (slow and wide) answer may raise :class:`RouteDeferred` instead of running
    skip_if_capped: bool = False
    #: work limit (contour units) of a numerical route's query; None: the route's own default
    work_limit: float | None = None
    #: work limit of the cf route's near-atomic split (its whole query, every part contour; None: as above)
    split_work_limit: float | None = None
    #: the query's time limit as a ``conversions.contour_terms.query_clock()`` value (thread CPU seconds;
    #: set by ``method="auto"``): the numerical routes stop refining when they predict to pass it and
    #: return their certified bracket, flagged ``details["time_limit"]``
    deadline: float | None = None
    #: a certified lower bound on the query's answer found by earlier routes (set by ``method="auto"``): a
    #: direction whose cheap upper bound is below it cannot matter (:mod:`conversions.dominated`)
    lower: float | None = None


@runtime_checkable
class Route(Protocol):
    """The route contract (see the module docstring)."""

    name: str

    def applies(self, ledger: Ledger) -> bool: ...

    def epsilon(self, ledger: Ledger, delta: float, ctx: QueryContext) -> Bracket: ...

    def delta(self, ledger: Ledger, epsilon: float, ctx: QueryContext) -> Bracket: ...


def ledger_for(route: Route, ledger: Ledger) -> Ledger:
    """The ledger a route evaluates: its numeric view (:meth:`Ledger.numeric_view`: delegating wrappers
    replaced by the mechanisms they are accounted by), or the ledger itself for a route that reads what
    a wrapper declares for itself (``on_wrappers = True``, e.g. a single-use exact profile)."""
    return ledger if getattr(route, "on_wrappers", False) else ledger.numeric_view()


def directions(ledger: Ledger) -> tuple[str, ...]:
    """The dominating-pair directions to evaluate (``Ledger.directions``)."""
    return ledger.directions


# ---------------------------------------------------------------------------------------------- exact
def _decline_costly(items, max_cost: float, why: str) -> None:
    """RouteUnavailable (``why``) when some mechanism's MGF at 0 costs more than ``max_cost`` units."""
    for m, _ in items:
        if m.mgf_cost(0.0) > max_cost:
            raise RouteUnavailable(f"{m.describe()}: {why}")


# ---------------------------------------------------------------------------------------------- numerical
class CharacteristicFunctionRoute:
    """Shifted-line inversion of the composed MGF with exact atoms and closed-form low-order terms
    (:mod:`conversions.contour`); the worst of the dominating-pair directions.

    Near-atomic ledgers (DP-SGD at small sample rates: the plan of the plain contour predicts a capped,
    wide answer) are split (:mod:`conversions.split`): the subsampled Gaussian's core and big parts are
    composed on contours of their own, at a relative accuracy of ``SPLIT_RTOL`` in delta.  If the split
    cannot answer either, the route defers (under ``auto``) or runs the plain contour.
    """

    name = "cf"
    numerical = True
    #: accuracy (relative, in delta) of the split contours; a plain contour's eps or delta bracket wider
    #: than this (relative) is also tried by the split
    SPLIT_RTOL = 1e-4
    #: ... and so is an eps bracket wider than this whose line the work cap truncated
    #: (``truncation_capped``: the truncation term, not the target, set its width; where the declared MGF
    #: errors set it, e.g. q = 0.01, sigma = 20, T = 1e7, the split cannot do better; delta queries keep
    #: ``SPLIT_RTOL``).  Regimes sweep: q = 0.02, sigma = 0.6, T = 100, delta = 1e-3: [3.3117486,
    #: 3.3117534] -> [3.31175096, 3.31175103] (below dp-accounting's 3.3117512), 8 -> 49 ms
    SPLIT_POLISH_RTOL = 1e-6
    #: under ``auto``, a capped ledger with fewer split steps than this defers to the discretised PLD
    #: first (cheap and tight for few steps) and is split only if that bracket is still wider than the
    #: target; with more steps it is split at once (measured: at 100 steps as fast as the PLD and ~100x
    #: narrower than its 1e-3; at 10 steps ~4x slower)
    SPLIT_FIRST_STEPS = 100
    #: ... and so does one whose steps touch an example at most this often in expectation (sum of k q):
    #: its composed loss is near-atomic, the split's remainder contour is capped (a 2-20 % bracket in
    #: 0.1-0.2 s) and the PLD, with the loss's tail in closed form, meets the target (regimes sweep:
    #: q = 1e-5, T = 100: 259 -> 80 ms, 159 -> 20 ms; q = 1e-6, T = 1000: 268 -> 185 ms; no certificate
    #: changed).  Raised from 1e-3 to 3e-2 (sum k q = 0.01: q = 1e-4, T = 100; q = 1e-5, T = 1000; q =
    #: 1e-6, T = 1e4): q = 1e-4, T = 100 at sigma = 0.8 (a 2 % contour bracket) 175 -> 31 ms, sigma = 0.5
    #: 160 -> 48 ms (the PLD's upper end lower), sigma = 1 at delta = 1e-12 (a 0.0044-0.24 contour
    #: bracket) 180 -> 91-107 ms; looser by 1.7e-3 and 1.2e-4 relative at q = 1e-5, sigma = 1, T = 1000
    #: (delta = 1e-8) and q = 1e-4, sigma = 2, T = 100, both ~1/2 and ~3/4 of dp-accounting's value
    #: Such a ledger's plain contour is not even planned (its plan was capped on every one of them in the
    #: regimes sweep: the loss's near-atom at log(1 - q) keeps |M(c + it)| from decaying for |t| < ~1/q).
    SPLIT_FIRST_HITS = 3e-2
    #: ... while one whose steps touch an example at least this often in expectation is split at once
    #: with fewer steps too: its loss is far from atomic, the split's contours are exact-grade and as fast
    #: as the PLD (regimes sweep, q = 0.1, sigma = 0.5, T = 10: PLD [12.256959, 12.261246] in 33 ms, the
    #: split [12.2612393081, 12.2612393638] in 35 ms, below dp-accounting's 12.26123937)
    SPLIT_NOW_HITS = 1.0
    #: a contour evaluates the MGFs more often than this (a line search, a grid): a work limit too small for
    #: that many at the cheapest point is declined at once (sigma << 1: ~0.8 s into it for a trivial bound)
    MIN_EVALUATIONS = 128

    def applies(self, ledger: Ledger) -> bool:
        return ledger.pld_available

    @staticmethod
    def _pld(ledger: Ledger, direction: str, ctx: QueryContext) -> contour.ComposedPLD:
        key = ("cf_pld", direction)
        if key not in ctx.cache:
            ctx.cache[key] = contour.ComposedPLD(ledger.items(), direction)
        return ctx.cache[key]

    @staticmethod
    def _worst(ledger: Ledger, res: list) -> Bracket:
        worst = max(res, key=lambda r: r.upper)
        lower = max(r.lower for r in res) if ledger.tight else None
        # "exact"/"bracketed" describe the pair; for mechanisms not attaining their pair it is an upper bound
        if not ledger.tight:
            kind = "upper bound"
        else:
            kind = "exact" if worst.details.get("exact") else "bracketed"
        det = {"direction": worst.direction, **{k: (float(v) if isinstance(v, float) else v)
                                                  for k, v in worst.details.items()
                                                  if isinstance(v, (int, float, str, bool))}}
        warns = sorted({r.details["warning"] for r in res if r.details.get("warning")})
        if warns:
            det["warning"] = "; ".join(warns)
        if any(r.details.get("time_limit") for r in res):
            det["time_limit"] = True  # (a direction cut short by the time limit, the worst one or not)
        return Bracket(float(worst.upper), None if lower is None else float(lower),
                       float(max(r.estimate for r in res)), kind, det)

    def _split(self, split_fn, ledger: Ledger, value: float, direction: str, ctx: QueryContext):
        """(the near-atomic split's bracket for one direction or None when it cannot answer, the work it
        used).  A failure is remembered for the ledger and query with the work limit it had: a re-run does
        not repeat it unless it has a larger limit (a deferred re-run under ``auto``); one at the query's
        time limit is not remembered."""
        key = ("cf_split_failed", split_fn.__name__, value, direction)
        limit = ctx.work_limit if ctx.split_work_limit is None else ctx.split_work_limit
        limit = contour.QUERY_WORK_LIMIT if limit is None else limit
        if key in ctx.cache and ctx.cache[key][1] >= limit:
            return None, ctx.cache[key][0]
        stats: dict = {}
        try:
            # (capped part contours still give certified, if wider, brackets: the split answers with
            # them rather than deferring; auto then also asks the routes after this one)
            return split_fn(ledger.items(), value, direction, max(ctx.rtol, self.SPLIT_RTOL),
                            skip_if_capped=False, work_limit=limit, stats=stats,
                            deadline=ctx.deadline), stats.get("work", 0.0)
        except (contour.WouldBeCapped, contour.WorkLimitReached, ValueError, ArithmeticError):
            if ctx.deadline is not None and query_clock() >= ctx.deadline:
                return None, stats.get("work", 0.0)  # (the time limit: not a property of the ledger)
            ctx.cache[key] = (stats.get("work", 0.0), limit)
            return None, ctx.cache[key][0]

    def _run(self, fn, split_fn, ledger: Ledger, value: float, ctx: QueryContext) -> Bracket:
        items = ledger.items()
        if ctx.work_limit is not None:
            _decline_costly(items, ctx.work_limit / self.MIN_EVALUATIONS,
                            "a contour costs more than the query's work limit")
        can_split = split.splittable(items)
        # (auto defers few-step ledgers, and those whose steps touch an example rarely, to the PLD)
        steps = sum(k for m, k in items if split.is_split_entry(m))
        hits = sum(k * m.sample_rate for m, k in items if split.is_split_entry(m))
        rare = can_split and hits <= self.SPLIT_FIRST_HITS
        # (a delta query on such a ledger splits at once: the PLD's delta grid is set by the target alone,
        # T Delta ~ rtol, and it ran 0.4-3.5 s, capped, where the split answers in 0.02-0.2 s)
        split_now = can_split and (not ctx.skip_if_capped or (rare and fn is contour.delta_bounds) or (
            (steps >= self.SPLIT_FIRST_STEPS or hits >= self.SPLIT_NOW_HITS) and not rare))

        def one(d: str):
            pld_d = self._pld(ledger, d, ctx)
            try:
                # (within the total-variation cap the contour answers eps = 0 at once, before any plan)
                if rare and not (fn is contour.epsilon_bounds and pld_d.tv_bound is not None
                                 and pld_d.tv_bound <= value):
                    # near-atomic (see SPLIT_FIRST_HITS): the plain contour's plan is capped, so it is
                    # not made (~10-20 ms); the split or the PLD answers
                    raise contour.WouldBeCapped(f"near-atomic ledger (sum k q = {hits:.3g} <= "
                                                f"{self.SPLIT_FIRST_HITS:g}): the plain contour is not "
                                                "planned")
                r = fn(pld_d, value, ctx.rtol, skip_if_capped=ctx.skip_if_capped or can_split,
                       work_limit=ctx.work_limit)
                polish = fn is contour.epsilon_bounds and r.details.get("truncation_capped")
                tol = self.SPLIT_POLISH_RTOL if polish else self.SPLIT_RTOL
                if split_now and r.upper - r.lower > tol * abs(r.upper):
                    # the plan looked fine but the bracket came out wide (e.g. q = 1e-4, T = 1e6,
                    # delta = 1e-12), or the work cap truncated the contour: the split may do better;
                    # both brackets are certified, so their intersection is too
                    s, _ = self._split(split_fn, ledger, value, d, ctx)
                    if s is not None:
                        r = dominated.intersect(r, s)
            except contour.WouldBeCapped as exc:
                r, used = self._split(split_fn, ledger, value, d, ctx) if split_now else (None, 0.0)
                if r is None:
                    if ctx.skip_if_capped:
                        # (deferred for rare hits: the split is known to be wide here, see SPLIT_FIRST_HITS)
                        raise RouteDeferred(str(exc), exact_grade=not rare) from None
                    # the plain contour, with what the failed split left of the work limit
                    limit = contour.QUERY_WORK_LIMIT if ctx.work_limit is None else ctx.work_limit
                    r = fn(pld_d, value, ctx.rtol, skip_if_capped=False,
                           work_limit=max(limit - used, 0.25 * limit))
            return r

        query = "epsilon" if fn is contour.epsilon_bounds else "delta"
        return self._worst(ledger, dominated.each_direction(items, directions(ledger), query, value, one,
                                                            ctx.lower))

    def epsilon(self, ledger: Ledger, delta: float, ctx: QueryContext) -> Bracket:
        return self._run(contour.epsilon_bounds, split.split_epsilon_bounds, ledger, delta, ctx)

    def delta(self, ledger: Ledger, epsilon: float, ctx: QueryContext) -> Bracket:
        return self._run(contour.delta_bounds, split.split_delta_bounds, ledger, epsilon, ctx)


class DiscretisedPLDRoute:
    """Discretised privacy-loss distribution composed by FFT (:mod:`conversions.pld`): cells split
    between their lattice ends ("connect the dots": exact Q-masses or offset bounds) give an upper bound
    exact to second order in Delta, and the same vector shifted by T*Delta the lower bound (or, at many
    steps, by one Chernoff deviation ~ Delta sqrt(T log(1/beta) / 2)); truncation, FFT wrap-around and
    rounding are bounded on the safe side.  Fast and tight
    where the loss is near-atomic (few steps at small sample rates, tiny noise); the bracket is about
    ``PLD_RTOL`` wide.  The worst of the dominating-pair directions."""

    name = "pld"
    numerical = True
    #: target relative width of the bracket (the grid step is chosen from it)
    PLD_RTOL = 1e-3
    #: ``method="auto"`` skips this route when the bracket so far is already narrower than this
    #: (relative): its own bracket is about that wide, so it cannot be expected to improve the answer,
    #: and at extreme queries it is the slow route (eps = 60 at delta ~ 1e-96: ~10 s for no gain)
    auto_skip_rtol = PLD_RTOL

    def applies(self, ledger: Ledger) -> bool:
        return ledger.pld_available

    def _rtol(self, ctx: QueryContext) -> float:
        return max(ctx.rtol, self.PLD_RTOL)

    #: the route evaluates each mechanism's MGF a few dozen times (tilt and window planning): beyond this
    #: cost hint per call (units of ``Mechanism.mgf_cost``) it declines instead of working for minutes
    MAX_MGF_COST = 1e6

    @classmethod
    def _check(cls, ledger: Ledger, ctx: QueryContext) -> list:
        items = ledger.items()
        _decline_costly(items, cls.MAX_MGF_COST, "its loss distribution is too costly to evaluate for the "
                        "discretised PLD")
        key = ("pld_applicable",)
        if key not in ctx.cache:
            ctx.cache[key] = pld.pld_applicable(items)
        if not ctx.cache[key]:
            raise RouteUnavailable("the discretised-PLD route needs the loss distribution's cell masses "
                                   "of every mechanism (pld_cell_masses)")
        return items

    def _run(self, fn, ledger: Ledger, value: float, ctx: QueryContext) -> Bracket:
        items = self._check(ledger, ctx)
        try:
            query, rtol = ("epsilon" if fn is pld.pld_epsilon_bounds else "delta"), self._rtol(ctx)
            if query == "epsilon":  # (a direction stops refining once it cannot change the answer)
                res = dominated.each_direction(items, directions(ledger), query, value, lambda d, ceil: fn(
                    items, value, d, rtol, deadline=ctx.deadline, stop_below=ceil), ctx.lower, True)
            else:
                res = dominated.each_direction(items, directions(ledger), query, value, lambda d: fn(
                    items, value, d, rtol, deadline=ctx.deadline), ctx.lower)
        except pld.FirstPassAbandoned as exc:
            raise RouteTimedOut(str(exc)) from None
        except (OverflowError, ZeroDivisionError) as exc:
            # outside the range the discretisation handles (e.g. eps ~ 1e6): no answer, never a wrong one
            raise RouteUnavailable(f"the discretised PLD overflowed at this query ({exc})") from None
        return CharacteristicFunctionRoute._worst(ledger, res)

    def epsilon(self, ledger: Ledger, delta: float, ctx: QueryContext) -> Bracket:
        return self._pure_cap(self._run(pld.pld_epsilon_bounds, ledger, delta, ctx), ledger, delta)

    @staticmethod
    def _pure_cap(b: Bracket, ledger: Ledger, delta: float) -> Bracket:
        """The ledger's pure-DP bound sum_j k_j eps_j (rounded up) also bounds eps(delta) once delta is at
        least the infinite-loss mass: where the grid cannot certify an end next to the loss's largest
        atom (Laplace x 3 at delta = 4e-5: upper = inf), the trivial bound is the answer."""
        pure = ledger.pure_epsilon
        if not (math.isfinite(pure) and delta >= ledger.infinite_loss_mass and b.upper > pure):
            return b
        pure = math.nextafter(pure * (1.0 + 4.0 * (len(ledger) + 1) * 2.0**-53), math.inf)
        if b.upper <= pure:
            return b
        lower = None if b.lower is None else min(b.lower, pure)
        return Bracket(pure, lower, min(max(b.estimate, lower or 0.0), pure), b.kind,
                       {**b.details, "pure_dp_cap": True})

    def delta(self, ledger: Ledger, epsilon: float, ctx: QueryContext) -> Bracket:
        return self._run(pld.pld_delta_bounds, ledger, epsilon, ctx)


class RDPRoute:
    """Composed RDP curve converted to (epsilon, delta), optimised over continuous alpha
    (:mod:`conversions.rdp_to_dp`): ``rule="improved"`` (Balle et al. 2020, Thm 21) or ``"classic"``
    (Mironov 2017, Prop. 3).  An upper bound only; applies to every ledger."""

    #: ``auto`` skips it within this relative width (it could gain less; it is slow at high orders).
    #: The conversion of an RDP curve is loose by far more than this: in the regimes sweep (264 DP-SGD
    #: settings) it ran on 24 brackets 1e-4..5e-2 wide, 8-36 ms each, and never gave the answer
    auto_skip_rtol = 1e-3

    def __init__(self, name: str, rule: str):
        self.name = name
        self.rule = rule

    def applies(self, ledger: Ledger) -> bool:
        return True

    def epsilon(self, ledger: Ledger, delta: float, ctx: QueryContext) -> Bracket:
        r = rdp_to_dp.eps_from_rdp(ledger.rdp, delta, pure_eps=ledger.pure_epsilon,
                                   inf_mass=ledger.infinite_loss_mass, rule=self.rule)
        return Bracket.upper_only(r.value, self._details(ledger, r))

    def delta(self, ledger: Ledger, epsilon: float, ctx: QueryContext) -> Bracket:
        r = rdp_to_dp.delta_from_rdp(ledger.rdp, epsilon, pure_eps=ledger.pure_epsilon,
                                     inf_mass=ledger.infinite_loss_mass, rule=self.rule)
        return Bracket.upper_only(r.value, self._details(ledger, r))

    def _details(self, ledger: Ledger, r: rdp_to_dp.RDPConversion) -> dict:
        det = {"alpha": r.alpha, "rule": self.rule}
        cap = ledger.rdp_exact_max
        if math.isfinite(r.alpha) and r.alpha >= cap - 1.0:
            # bounded work: past the cap some curve is a cheaper upper bound (an optimum near it is held)
            det["warning"] = (f"the RDP optimum lies at or above order {cap:g}, where some mechanism's RDP "
                              "is a cheaper upper bound (bounded work); the bound is valid but may be loose")
        return det


# ---------------------------------------------------------------------------------------------- registry
#: The routes in the order ``method="auto"`` tries them: closed forms, then the numerical routes from the
#: tightest to the loosest.  ``auto`` never evaluates ``rdp_classic`` (never better than ``rdp``).
ROUTES: list[Route] = [
    GaussianExactRoute(),
    LaplaceExactRoute(),
    SubsampledGaussianExactRoute(),
    SingleUseExactRoute(),
    SampleCountRoute(),
    CharacteristicFunctionRoute(),
    DiscretisedPLDRoute(),
    RDPRoute("rdp", "improved"),
    RDPRoute("rdp_classic", "classic"),
]
#: Public names never tried by ``method="auto"`` (dominated by another route).
AUTO_EXCLUDED = {"rdp_classic"}


def register_route(route: Route, *, before: str | None = None) -> None:
    """Add ``route`` to :data:`ROUTES`, before the first route named ``before`` (default: at the end).

    Plug-ins contribute exact closed forms this way (``before="cf"``); a route must satisfy the
    :class:`Route` protocol and be sound on every ledger for which ``applies`` is true."""
    if not isinstance(route, Route) or not isinstance(getattr(route, "name", None), str) or not route.name:
        raise TypeError("route must have a non-empty str 'name' and applies/epsilon/delta methods")
    if route.name == "auto":
        raise ValueError("'auto' is reserved for the route selection")
    if before is None:
        ROUTES.append(route)
        return
    for i, r in enumerate(ROUTES):
        if r.name == before:
            ROUTES.insert(i, route)
            return
    raise ValueError(f"no route named {before!r}; routes: {route_names()}")


def unregister_route(route: Route) -> None:
    """Remove a route added with :func:`register_route`."""
    ROUTES.remove(route)


def route_names() -> tuple[str, ...]:
    """Public route names in order, without repeats."""
    return tuple(dict.fromkeys(r.name for r in ROUTES))


def methods() -> tuple[str, ...]:
    """Valid ``method=`` values: "auto" and every route name."""
    return ("auto",) + route_names()


def applicable(ledger: Ledger) -> list[Route]:
    """The routes that apply to ``ledger`` (each judged on :func:`ledger_for`), one per public name (the
    first that applies), in order."""
    out: dict[str, Route] = {}
    view = ledger.numeric_view()
    for r in ROUTES:
        if r.name not in out and r.applies(ledger if getattr(r, "on_wrappers", False) else view):
            out[r.name] = r
    return list(out.values())


def statistic_lower(ledger: Ledger, query: str, value: float, hint: float | None = None) -> float | None:
    """A certified lower bound from a post-processing statistic (:mod:`conversions.lower_bounds`: the
    maximum, or the sum, of the released outputs), for ledgers of (subsampled) Gaussian mechanisms;
    None where it does not apply.  The worst case over directions is at least each direction's bound.
    ``hint`` (epsilon queries): an estimate of the answer, e.g. the routes' upper bound, where the root
    search starts (work only; ignored unless finite and > 0)."""
    if not ledger.tight:
        return None
    ledger = ledger.numeric_view()
    if query == "epsilon":
        ok = hint is not None and math.isfinite(hint) and hint > 0.0
        fn = functools.partial(lower_bounds.epsilon_lower, eps_hint=hint if ok else None)
    else:
        fn = lower_bounds.delta_lower
    try:
        vals = [float(fn(ledger.items(), value, d)) for d in directions(ledger)]
    except (ValueError, TypeError, ArithmeticError):  # not a Gaussian-family ledger, or out of range
        return None
    return max(vals) if vals else None


def empty_ledger_bracket(query: str, value: float) -> Bracket:
    """Nothing composed: epsilon(delta) = 0 and delta(epsilon) = max(0, 1 - e^eps) (identical outputs)."""
    if query == "epsilon":
        return Bracket(0.0, 0.0, 0.0, "exact")
    d = -math.expm1(value) if value < 0 else 0.0  # (no overflow for large epsilon)
    return Bracket(d, d, d, "exact")
