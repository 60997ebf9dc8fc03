"""How ``method="auto"`` (and a named method) picks the certified answer of a query: the routes in
:data:`accountant.routes.ROUTES` order, skip rules, deferral of a numerical route whose plan predicts a
slow and wide answer, and the best certified lower bound (routes, post-processing statistics, attained
pairs)."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

from conversions.bracket import Bracket
from conversions.contour_terms import query_clock

from . import routes

if TYPE_CHECKING:  # annotations only (privacy_accountant imports this module)
    from .privacy_accountant import PrivacyAccountant

# "auto" stops evaluating routes once the best certified bound is within this relative distance of a
# certified lower bound on the truth: no valid bound from another route can be smaller than that
# lower bound, so the remaining routes could improve the answer by less than this fraction.
AUTO_SKIP_RTOL = 1e-6
# ... or, for a delta query, within this absolute distance (the smallest normal float: below it a float
# has no relative accuracy left to improve); a route with a coarser resolution of its own
# (``auto_skip_rtol``, e.g. the discretised PLD's 1e-3) is skipped within that relative distance (for
# epsilon also within 0.1 x that absolute, the PLD's own target for eps < 0.1, when within 10 x relative)
AUTO_SKIP_ATOL_DELTA = sys.float_info.min
# work limit of the contour route under "auto" (~2-4 s; explicit method="cf" gets the route's default)
AUTO_WORK_LIMIT = 2.5e7
# a route that deferred itself (its plan predicted a capped contour) is re-run only if the bracket of the
# routes after it is wider than this (relative) or, for an epsilon query, than DEFER_ATOL_EPS
DEFER_RTOL = 1e-3
DEFER_ATOL_EPS = 1e-4
# ... and then with this work limit: the routes after it left a wide bracket, so the near-atomic split
# gets the room it needs for few steps at tiny delta (q = 1e-3, sigma = 2, T = 10, delta = 1e-10: the
# remove direction's split uses 3.1e7 units, ~1 s, and narrows [0.0139, 0.0156] to 1e-3 relative)
DEFERRED_WORK_LIMIT = 5e7
# the default time limit of an "auto" query (CPU seconds of the querying thread, so other processes' load
# does not count; ``PrivacyAccountant(time_limit=...)``): past it no further numerical route is started
# and the discretised PLD and the near-atomic split stop refining; the best certified bracket so far is
# returned with a warning.  A step already running finishes (bounded by its route's own work limit; a
# discretised-PLD pass is abandoned once its grid is built past the limit), so a query may overrun the
# limit by about one step
AUTO_TIME_LIMIT = 2.0
# a route that defers gives way to the discretised PLD only when that route's predicted cost
# (``conversions.pld.pld_cost`` units, measured at 10-130 ns each) is below this: the sigma = 0.3 chains
# (T >= 1000, 3.6e7-6.3e7 units, 1.2-2.5 s for a bracket 0.2-7 % wide) run the deferred contour first
# (0.1 s, 1 %)
PLD_DEFER_COST = 3e7
# ... but only once the best certified bracket is within this relative width: a wider one (e.g. only the
# RDP bound so far) goes on to the next route, bounded by the routes' own work limits
TIME_LIMIT_RTOL = 0.1
# the post-processing statistic's lower bound (~10-30 ms) is tried when the routes' bracket is wider than
# the target, or for ledgers of at most this many steps when it is wider than DEFER_RTOL relative (an
# absolute-only target met): in the regimes sweep it beat the routes' lower bound only there (T <= 10;
# T >= 100: 0 of 209).  At dd325c2, run on every T <= 10 ledger, it raised the lower end in 2 of the 30
# distinct T = 10 settings (q = 1e-4, sigma = 2: a bracket 17 % wide, now 9.7 %; sigma = 1, delta = 1e-12:
# 4.3e-4 wide, now 2.8e-4 -- no longer tried: within 1e-3 relative) and cost 20-30 ms in each of the others
STATISTIC_STEPS = 10
_TIME_WARNING = ("the query reached its time limit ({limit:g} s) before {what}; the bracket is certified "
                 "but may be wider than the target (PrivacyAccountant(time_limit=None) lifts the limit)")


def _within_target(query: str, upper: float, lower: float) -> bool:
    """Whether a bracket meets auto's width target (``DEFER_RTOL`` relative, or for epsilon
    ``DEFER_ATOL_EPS`` absolute): a time limit that stopped the query then needs no warning."""
    if not math.isfinite(upper):
        return False
    return upper - lower <= max(DEFER_RTOL * abs(upper), DEFER_ATOL_EPS if query == "epsilon" else 0.0)


def auto_candidates(ledger) -> list[routes.Route]:
    """The routes ``method="auto"`` walks: :func:`accountant.routes.applicable` but
    :data:`~accountant.routes.AUTO_EXCLUDED` and those whose optional ``auto_applies(ledger)`` declines
    (a route valid in general but worth trying only on some ledgers: the sample-count bound at small
    noise)."""
    return [r for r in routes.applicable(ledger) if r.name not in routes.AUTO_EXCLUDED
            and getattr(r, "auto_applies", lambda _: True)(routes.ledger_for(r, ledger))]


def select(acct: PrivacyAccountant, method: str, query: str, value: float,
           compare: bool = False) -> tuple[str, Bracket, dict]:
    """Evaluate ``method`` (or, for "auto", the applicable routes) and pick the smallest bound.

    "auto" walks :data:`accountant.routes.ROUTES` (exact, cf, pld, rdp) and stops once the best
    bound is within ``AUTO_SKIP_RTOL`` of the best certified lower bound (every valid bound is at
    least that lower bound, so no later route can do better by more; for delta also within
    ``AUTO_SKIP_ATOL_DELTA``, the smallest normal float; a route with a coarser resolution of its own,
    ``auto_skip_rtol`` (the discretised PLD: 1e-3), is skipped within that, and
    ``details["skip_reasons"]`` says so).  A numerical route whose plan
    predicts a slow, wide answer defers to the next one and is re-run (with bounded work) only if the
    bracket is then still wider than ``DEFER_RTOL``; a route that fails on the query leaves it to
    the others (both noted in ``details["route_notes"]``).  ``compare=True`` evaluates all.
    """
    valid = routes.methods()
    if method not in valid:
        raise ValueError(f"method must be one of {valid}, got {method!r}")
    ctx = routes.QueryContext(acct.rtol, acct._cache)

    def run(route: routes.Route) -> Bracket:
        if not acct._ledger:
            return routes.empty_ledger_bracket(query, value)
        fn = route.epsilon if query == "epsilon" else route.delta
        out = fn(routes.ledger_for(route, acct._ledger), value, ctx)
        if out.lower is not None and not acct._ledger.tight and not getattr(route, "on_wrappers", False):
            # a pair that is not attained has no certified lower bound from its curves (every route
            # already says so; this keeps a new one from claiming it).  A route reading the wrapper's own
            # declarations (a single-use profile) has its own attainment flag.
            out = out.with_lower(None)
        return out

    if method != "auto":
        if not acct._ledger:
            return method, routes.empty_ledger_bracket(query, value), {}
        chosen = run(acct._route_by_name(method))
        if chosen.lower is None:
            att = acct._attained_lower(query, value)
            if att is not None:
                chosen = chosen.with_lower(min(att, chosen.upper))
        if not compare:
            return method, chosen, {}
        # compare with a fixed method: every applicable route is evaluated and listed, the
        # certificate stays the requested method's
        cands = {method: chosen.upper}
        for route in routes.applicable(acct._ledger):
            if route.name not in cands and route.name not in routes.AUTO_EXCLUDED:
                try:
                    cands[route.name] = run(route).upper
                except (routes.RouteUnavailable, ValueError, ArithmeticError):
                    continue
        return method, chosen, cands
    ctx.work_limit = AUTO_WORK_LIMIT  # auto has other routes to fall back on: a tighter limit
    ctx.split_work_limit = DEFERRED_WORK_LIMIT  # (the split's whole query, from its first run)
    time_limit = getattr(acct, "time_limit", AUTO_TIME_LIMIT)
    if time_limit is not None and not compare:
        ctx.deadline = query_clock() + time_limit
    timed_out: list[str] = []
    results: dict[str, Bracket] = {}
    skipped: list[str] = []
    reasons: list[str] = []  # (for skips other than the AUTO_SKIP_RTOL rule)
    notes: list[str] = []
    lower = None
    few = sum(int(k) for _, k in acct._ledger.items()) <= STATISTIC_STEPS
    stat_tried = False
    exact_grade: set[str] = set()  # deferred routes expected to beat an absolute-only bracket when re-run

    def statistic(lower: float | None, best_val: float) -> float | None:
        """``lower`` raised to the output statistic's certified lower bound where that is higher."""
        stat = routes.statistic_lower(acct._ledger, query, value, best_val)
        if stat is not None and (lower is None or stat > lower):
            notes.append("lower bound from the max/sum statistic of the outputs")
            return min(stat, best_val)
        return lower

    queue = [(r, False) for r in auto_candidates(acct._ledger)]
    while queue:
        route, was_deferred = queue.pop(0)
        best_val = min((r.upper for r in results.values()), default=math.inf)
        if was_deferred and not compare and lower is not None and math.isfinite(best_val):
            # its plan predicted a capped contour: re-run it (bounded work) only if the routes after it
            # left the bracket wider than the target width
            tol = max(DEFER_RTOL * abs(best_val), DEFER_ATOL_EPS if query == "epsilon" else 0.0)
            split_pld = any("split_terms" in (r.details or {}) for r in results.values())
            if split_pld and route.name in exact_grade:
                # the discretised PLD needed its large-step split (round-up cells, T Delta wide): the
                # deferred contour, exact-grade where its own split works, gets the relative test only
                # (not where it deferred because its split is known to be wide: rare hits)
                tol = DEFER_RTOL * abs(best_val)
            if best_val - lower > tol and few and not stat_tried:
                # (few steps: the statistic below runs anyway; first, since it may close the gap: q = 1e-5,
                # sigma = 0.4, T = 10 -- 94 ms of deferred contour that gave nothing)
                lower, stat_tried = statistic(lower, best_val), True
            if best_val - lower <= tol:
                skipped.append(route.name)
                continue
        if results and not compare and lower is not None and math.isfinite(best_val):
            # no valid bound is below ``lower``: a later route can improve the answer by at most the
            # bracket's width; a route whose own bracket is ``auto_skip_rtol`` wide cannot be expected
            # to improve a narrower one, and below the smallest normal float a delta has nothing left
            gap = best_val - lower
            own_rtol = getattr(route, "auto_skip_rtol", 0.0)
            # (its resolution: own_rtol relative, and for epsilon 0.1 own_rtol absolute, the discretised
            # PLD's own target for eps < 0.1: q = 1e-5, sigma = 1, T = 1000, delta = 1e-8 ran it for 0.4 s
            # after the contour's [0.0018702, 0.0018760] and got [0.0018353, 0.0019128]; the absolute
            # part only within 10 x the relative one, since the PLD often beats its target: at q = 1e-6,
            # sigma = 1, T = 100 it narrows the contour's [0, 3.02e-5] to [0, 2.94e-5])
            own_atol = 0.1 * own_rtol if query == "epsilon" and gap <= 10 * own_rtol * abs(best_val) else 0.0
            atol = AUTO_SKIP_ATOL_DELTA if query == "delta" else 0.0
            if gap <= max(AUTO_SKIP_RTOL * abs(best_val), atol):
                skipped.append(route.name)
                if gap > AUTO_SKIP_RTOL * abs(best_val):
                    reasons.append(f"{route.name}: the bracket is below the smallest normal float")
                continue
            if gap <= max(own_rtol * abs(best_val), own_atol):
                skipped.append(route.name)
                reasons.append(f"{route.name}: the bracket is narrower than the route's resolution "
                               f"(relative {own_rtol:g}" + (f", absolute {own_atol:g})" if own_atol else ")"))
                continue
        if not compare and math.isfinite(results["exact"].upper if "exact" in results else math.inf) \
                and getattr(route, "numerical", False):
            # the numerical routes evaluate the same dominating pairs as the closed form (which has no
            # lower bound only because the pairs are not attained, e.g. GNMax): they cannot beat it
            skipped.append(route.name)
            continue
        if (results and getattr(route, "numerical", False) and ctx.deadline is not None
                and lower is not None and math.isfinite(best_val)
                and best_val - lower <= TIME_LIMIT_RTOL * abs(best_val)
                and query_clock() >= ctx.deadline):
            # the time limit: no further numerical route is started (a cheap one, e.g. RDP, still runs)
            skipped.append(route.name)
            timed_out.append(route.name)
            continue
        # a route that predicts an expensive, wide answer gives way to the next one, and is run in
        # full afterwards only if the bracket is still wider than the target
        ctx.skip_if_capped = (not compare and not was_deferred
                              and any(getattr(r, "numerical", False) for r, _ in queue))
        ctx.work_limit = DEFERRED_WORK_LIMIT if was_deferred else AUTO_WORK_LIMIT
        ctx.lower = None if compare else lower
        try:
            r = results[route.name] = run(route)
        except routes.RouteDeferred as exc:
            if getattr(exc, "exact_grade", True):
                exact_grade.add(route.name)
            if queue and queue[0][0].name == "pld" and _pld_cost(acct, queue[0][0], ctx) > PLD_DEFER_COST:
                notes.append(f"{route.name} not deferred ({exc}): the discretised PLD is predicted costlier "
                             "(or cannot run)")
                queue.insert(0, (route, True))
                continue
            notes.append(f"{route.name} deferred ({exc})")
            queue.insert(min(1, len(queue)), (route, True))
            continue
        except routes.RouteTimedOut as exc:
            timed_out.append(route.name)
            notes.append(f"{route.name} stopped by the time limit ({exc})")
            continue
        except routes.RouteUnavailable as exc:
            notes.append(f"{route.name} unavailable ({exc})")
            continue
        except (ValueError, ArithmeticError) as exc:
            # a numerical route that cannot handle this query leaves the answer to the others (the
            # error is kept in the notes; with no route left the query fails below)
            if route.name == "rdp" and not results:
                raise
            notes.append(f"{route.name} failed ({type(exc).__name__}: {exc})")
            continue
        finally:
            ctx.skip_if_capped = False
        if r.lower is not None:
            lower = r.lower if lower is None else max(lower, r.lower)
    if not results:
        results["rdp"] = run(acct._route_by_name("rdp"))
    best_val = min(r.upper for r in results.values())
    few_wide = few and lower is not None and best_val - lower > DEFER_RTOL * abs(best_val)
    done = lower is not None and (best_val - lower <= AUTO_SKIP_RTOL * abs(best_val)
                                  or (_within_target(query, best_val, lower) and not few_wide))
    if not stat_tried and not done:
        # the routes left a gap: a post-processing statistic may certify a better lower bound
        lower = statistic(lower, best_val)
    elif stat_tried and lower is not None:
        lower = min(lower, best_val)  # (a route run after the statistic may have lowered the upper end)
    if lower is None:
        att = acct._attained_lower(query, value)
        if att is not None:
            lower = min(att, best_val)
            notes.append("lower bound from explicit neighbouring datasets (attained pairs)")
    best = min(results, key=lambda m: results[m].upper)
    chosen = results[best]
    # routes the time limit stopped early (they only set the flag; the warning is decided here, once),
    # also those whose (looser) bracket was not chosen: the answer might have been narrower without the
    # limit, and the certificate says so
    cut = sorted(m for m, r in results.items() if (r.details or {}).get("time_limit"))
    if timed_out or cut:
        names = ", ".join(sorted(set(timed_out)))
        if timed_out:
            reasons.append(f"{names}: the query's time limit ({time_limit:g} s)")
        chosen = chosen.with_details(time_limit=True)
        if lower is None or not _within_target(query, chosen.upper, lower):
            what = " and ".join(x for x in (f"running {names}" if names else "",
                                            f"{', '.join(cut)} finished refining" if cut else "") if x)
            warn = _TIME_WARNING.format(limit=time_limit, what=what)
            if chosen.details.get("warning"):
                warn = chosen.details["warning"] + "; " + warn
            chosen = chosen.with_details(warning=warn)
    if skipped:
        chosen = chosen.with_details(skipped_routes=",".join(skipped))
    if reasons:
        chosen = chosen.with_details(skip_reasons="; ".join(reasons))
    if notes:
        chosen = chosen.with_details(route_notes="; ".join(notes))
    chosen = chosen.with_lower(lower if lower is not None else chosen.lower)
    return best, chosen, {m: r.upper for m, r in results.items()}


def _pld_cost(acct: PrivacyAccountant, route: routes.Route, ctx: routes.QueryContext) -> float:
    """``conversions.pld.pld_cost`` of ``route`` (the discretised PLD) on the accountant's ledger, worst
    direction (inf where it does not apply or cannot be predicted).  The route's own check runs first:
    it declines mechanisms whose MGF is too costly to evaluate before the prediction evaluates any."""
    from conversions import pld

    ledger = routes.ledger_for(route, acct._ledger)
    try:
        items = route._check(ledger, ctx)
        return max(pld.pld_cost(items, d, route._rtol(ctx)) for d in routes.directions(ledger))
    except (ValueError, ArithmeticError):  # (RouteUnavailable is a ValueError)
        return math.inf
