"""delta(eps) of a composition from its summed log-MGF, by inversion along a shifted line.

Source: Laplace inversion of (1 - e^{-u})_+ along the line Re s = c (our derivation,
docs/derivations/shifted-line-inversion.md); on the imaginary axis it is the characteristic-function
accountant of Zhu, Dong & Wang 2022.  The error analysis below is ours and every term of it is tested
against closed forms.  The route's parts: ``contour_terms`` (limits, result types), ``contour_pld``
(the composed log-MGF), ``contour_quadrature`` (plan, grid, error terms), ``contour_roots`` (eps(delta)).

Identity.  For the finite part of the P-measure of the composed privacy loss L (MGF M(s) = E[e^{sL}]),
and any c > 0 with M(c) < inf,

    delta_fin(eps) = E[(1 - e^{eps - L})_+]
                   = (1/2pi) int Re[ M(c + it) e^{-(c + it) eps} / ((c + it)(c + 1 + it)) ] dt.

The total is delta(eps) = p_inf + delta_atoms(eps) + delta_F(eps) + delta_R(eps):

* p_inf = 1 - prod_j (1 - p_inf,j)^{k_j} is the composed infinite-loss mass (exact);
* the atoms of the composed measure are enumerated exactly (``conversions.atoms``);
* F, the terms with one to three exponential-piece factors times atoms, is integrated in closed form
  (``conversions.pieces``; Laplace);
* only the absolutely continuous remainder R (MGF M - prod_j A_j^{k_j} - F) is integrated
  numerically, so the integrand decays and lattice mechanisms cost nothing.

Numerics (all bounds rigorous, added on the safe side):

* trapezoid rule with step h on [0, U].  By Poisson summation the untruncated rule equals
  sum_m e^{2 pi c m / h} delta_R(eps + 2 pi m / h): every aliasing term is >= 0, so the rule
  over-estimates, by at most
      A = kappa(c') M(c') e^{-c' eps} / (e^{2pi(c'-c)/h} - 1)                    (m >= 1, any c' > c)
        + min(M_R(0) / (e^{2 pi c/h} - 1), kappa(c/2) M(c/2) e^{-c eps/2} / (e^{pi c/h} - 1))
  with kappa(x) = x^x / (1 + x)^{1 + x} (pointwise (1 - e^{-u})_+ <= kappa(x) e^{x u}).
* truncation at U: |tail| <= e^{-c eps} env_R(U) / (pi U), with env_R a non-increasing bound on
  |M_R(c + it)| built from the mechanisms' envelopes:
  prod_j (A_j(c) + C_j(c, t))^{k_j} - prod_j A_j(c)^{k_j}.
* floating point: the sum of moduli times a bound on the relative error of each node (exponent
  rounding, phase rounding, mechanisms' declared log-MGF error).

c is the saddle point of log M(c) - c eps - log(c (c + 1)) (there the integrand has the size of
delta, which gives relative accuracy down to delta ~ 1e-300).
"""

from __future__ import annotations

import math

from .contour_pld import ComposedPLD

# The route lives in contour_terms / contour_pld / contour_quadrature / contour_roots; this module holds the
# drivers and re-exports the parts that ``conversions.split``, ``conversions.contour_family`` and the tests
# reach through it (``noqa``: some are not used here).
from .contour_quadrature import _add_up, _best_plan, _check_plan, _combine, _exp_up, _Grid, _Plan, _plan  # noqa: F401, E402
from .contour_roots import (  # noqa: F401, E402
    _chernoff_eps_opt,
    _chernoff_margin,
    _memo,
    _minimize_bounded,
    _root_bracket,
    _solve,
)
from .contour_terms import (  # noqa: F401, E402
    _EVAL_CHUNK,
    _U64,
    DEFAULT_RTOL,
    MAX_NODES,
    QUERY_TIME_LIMIT,
    QUERY_WORK_LIMIT,
    WORK_BUDGET,
    DeltaBounds,
    EpsilonBounds,
    WorkLimitReached,
    WouldBeCapped,
    _floor,
    _log_kappa,
)

_LIMIT_WARNING = ("the characteristic-function route reached its per-query work limit; the bracket is "
                  "the {what} bound, valid but loose")
# what the fallback may still spend on a Chernoff bound after the limit was reached
_FALLBACK_WORK, _FALLBACK_TIME = 2.0e6, 0.5
_TINY = 5e-324  # the smallest positive double


def _metered(pld: ComposedPLD, work_limit: float, fn, time_limit: float = QUERY_TIME_LIMIT):
    """``fn()`` under the per-query meter; None when it reached the limit (or, for the fallbacks' own
    small budget, could not be evaluated).  A bracket result records the work it used in its details."""
    pld.start_query(work_limit, time_limit)
    try:
        res = fn()
    except WorkLimitReached:
        return None
    except (ValueError, ArithmeticError):
        if work_limit == _FALLBACK_WORK:
            return None
        raise
    finally:
        left = pld._work_left
        pld.stop_query()
    if isinstance(res, (DeltaBounds, EpsilonBounds)):
        res.details["work"] = work_limit - left
    return res


def _cheap_chernoff_margin(pld: ComposedPLD, c: float, eps: float, log_value: float) -> float:
    """Rounding allowance of a float Chernoff exponent log kappa(c) + log M(c) - c eps without new MGF
    evaluations: |log M(c)| <= |value| + |log kappa(c)| + |c eps|, and a few ulps per summand."""
    lk = abs(_log_kappa(c))
    mag = abs(log_value) + lk + abs(c * eps)
    return 64.0 * _U64 * (len(pld.entries) + 4.0) * (1.0 + lk + mag + abs(c * eps))


def chernoff_delta_upper(pld: ComposedPLD, eps: float) -> float | None:
    """The optimised Chernoff bound on delta(eps) of one direction, p_inf + kappa(c) M(c) e^{-c eps} at
    the saddle line, rounded up (the declared MGF error and the exponent's rounding added; never 0: the
    Chernoff value may underflow while the true delta is positive; capped at 1).  An upper bound only;
    None when it costs more than the fallback budget (``_FALLBACK_WORK``, ``_FALLBACK_TIME``)."""
    def chernoff() -> float:
        c = pld.saddle(eps)
        log_ch = pld.chernoff_log_delta(c, eps) + pld.mgf_err_at(c)
        return log_ch + _cheap_chernoff_margin(pld, c, eps, log_ch)

    log_ch = _metered(pld, _FALLBACK_WORK, chernoff, _FALLBACK_TIME)
    if log_ch is None:
        return None
    return max(min(1.0, (pld.p_inf + math.exp(min(log_ch, 0.0))) * (1.0 + 8 * _U64)), _TINY)


def chernoff_epsilon_upper(pld: ComposedPLD, delta: float) -> float | None:
    """The optimised Chernoff bound on eps(delta) of one direction, min_c of (log kappa(c) + log M(c) -
    log(delta - p_inf)) / c, rounded up (the declared MGF error and a few ulps of the exponent's summands
    added).  An upper bound only; None when it is not finite or costs more than the fallback budget."""
    opt = _metered(pld, _FALLBACK_WORK, lambda: _chernoff_eps_opt(pld, delta - pld.p_inf), _FALLBACK_TIME)
    if opt is None or not math.isfinite(opt[0]):
        return None
    hi, c_ch = opt
    slack = _cheap_chernoff_margin(pld, c_ch, hi, math.log(delta - pld.p_inf)) / c_ch
    return max(0.0, (hi + (pld.mgf_err_at(c_ch) / c_ch + slack)) * (1.0 + 8 * _U64))


def delta_bounds(pld: ComposedPLD, eps: float, rtol: float = DEFAULT_RTOL, *,
                 skip_if_capped: bool = False, work_limit: float | None = None) -> DeltaBounds:
    """Certified bracket on delta(eps) of the composed pair (one direction).

    ``skip_if_capped=True`` raises :class:`WouldBeCapped` after planning (no grid evaluated) when the
    contour would need more than the work cap (the router then prefers the discretised-PLD route).
    Bounded work: past ``work_limit`` (default :data:`QUERY_WORK_LIMIT`; or :data:`QUERY_TIME_LIMIT`,
    a wall-clock backstop for mechanisms whose cost hints are off) the bracket is the
    Chernoff bound (or, if even that is too costly, the total-variation / trivial bound) with
    ``details["work_limit"] = True`` and a warning in ``details["warning"]``.
    """
    res = _metered(pld, QUERY_WORK_LIMIT if work_limit is None else work_limit,
                   lambda: _delta_bounds(pld, eps, rtol, skip_if_capped))
    if res is not None:
        return res
    up = 1.0 if (pld.tv_bound is None or eps < 0.0) else pld.tv_bound
    what = "total-variation" if up < 1.0 else "trivial"
    ch = chernoff_delta_upper(pld, eps)
    if ch is not None and ch < up:
        up, what = ch, "Chernoff"
    lo = min(max(_floor(eps), pld.p_inf * (1.0 - 8 * _U64)), up)  # (p_inf rounded down)
    return DeltaBounds(eps, up, lo, up, pld.direction,
                       {"work_limit": True, "warning": _LIMIT_WARNING.format(what=what)})


def _delta_bounds(pld: ComposedPLD, eps: float, rtol: float, skip_if_capped: bool = False) -> DeltaBounds:
    if not pld.entries:
        f = _floor(eps)
        return DeltaBounds(eps, f, f, min(1.0, f * (1.0 + 8 * _U64)), pld.direction)
    if pld.purely_atomic:
        est, lo, up, det = _combine(pld, None, eps)
        return DeltaBounds(eps, est, max(lo, _floor(eps)), up, pld.direction, {"exact": True})
    far = _far_tail(pld, eps)
    if far is not None:
        return far
    c = pld.saddle(eps)
    log_target = pld.chernoff_log_delta(c, eps) + math.log(rtol) - math.log(1e3)
    for i in range(4):
        grid = _Grid(pld, _check_plan(pld, _best_plan(pld, eps, log_target), skip_if_capped and i == 0, rtol))
        est, lo, up, det = _combine(pld, grid, eps)
        capped = pld.work(grid.u_trunc, grid.h, grid.c) > WORK_BUDGET / 2
        if up - lo <= rtol * max(est, 1e-300) or est <= 0.0 or capped:
            break
        log_target = math.log(max(est, 1e-300)) + math.log(rtol) - math.log(8.0)
    lo = max(lo, _floor(eps))
    if pld.tv_bound is not None and eps >= 0.0:
        up = min(up, pld.tv_bound)
        lo = min(lo, up)
    # the Chernoff bound of the same pair is rigorous too: never certify anything weaker (its float
    # evaluation is rounded up by a few ulps of the summands' size)
    log_ch = pld.chernoff_log_delta(c, eps) + pld.mgf_err_at(c)
    if log_ch < 0.0:
        log_ch += _chernoff_margin(pld, c, eps)
        up = min(up, _add_up(pld.p_inf * (1.0 + 64 * _U64), _exp_up(log_ch)))
        lo = min(lo, up)
    return DeltaBounds(eps, min(max(est, lo), up), lo, up, pld.direction, det)


#: lines tried by :func:`_far_tail` (moderate: every mechanism's MGF is cheap there)
_FAR_TAIL_LINES = (1.0, 4.0, 16.0)


def _far_tail(pld: ComposedPLD, eps: float) -> DeltaBounds | None:
    """The bracket [p_inf, p_inf + 5e-324] (rounded outwards) when the Chernoff bound of the finite part,
    delta_fin(eps) <= kappa(c) M(c) e^{-c eps} (an upper bound, with the declared log-MGF error and the
    float rounding of the exponent added), is below the smallest positive float on one of a few
    moderate lines c: then no float lies strictly between the finite part's delta and 0, and the saddle
    search (which probes lines up to c = 1e5, where e.g. the subsampled Gaussian's quadrature costs
    seconds per point) and the contour are not needed.  None otherwise.

    A line is evaluated only if it can pass: log M is convex with log M(-1) <= 0 (M(-1) = E_Q[...] <= 1)
    and log M(0) = log(1 - p_inf), so log M(c) >= (c + 1) log(1 - p_inf) for c >= 0; ordinary queries
    (eps below ~50) are thus decided without evaluating any MGF."""
    log_tiny = math.log(_TINY) - 1.0
    for c in _FAR_TAIL_LINES:
        if c >= pld.max_order:
            break
        lm0 = math.log1p(-pld.p_inf) if pld.p_inf < 1.0 else -math.inf
        if _log_kappa(c) + (c + 1.0) * lm0 - c * eps >= log_tiny + 1.0:
            continue  # (cannot pass at this line; a margin of 1 for rounding)
        log_ch = pld.chernoff_log_delta(c, eps) + pld.mgf_err_at(c)
        if log_ch < log_tiny:
            log_ch += _chernoff_margin(pld, c, eps)
        if log_ch < log_tiny:
            up = _add_up(pld.p_inf * (1.0 + 64 * _U64), _exp_up(log_ch))
            lo = min(max(_floor(eps), pld.p_inf * (1.0 - 8 * _U64)), up)
            est = min(max(_floor(eps), pld.p_inf), up)  # (the finite part's delta rounds to nothing)
            return DeltaBounds(eps, est, lo, up, pld.direction,
                               {"c": c, "reason": "Chernoff bound underflow"})
    return None





def epsilon_bounds(pld: ComposedPLD, delta: float, rtol: float = DEFAULT_RTOL, *,
                   skip_if_capped: bool = False, work_limit: float | None = None) -> EpsilonBounds:
    """Certified eps(delta) for one direction: smallest eps >= 0 with delta_upper(eps) <= delta.

    ``skip_if_capped`` and bounded work as :func:`delta_bounds`: past the limits the answer is the
    optimised Chernoff bound (or ``inf`` when even that is too costly), with ``details["work_limit"]``
    and a warning.
    """
    res = _metered(pld, QUERY_WORK_LIMIT if work_limit is None else work_limit,
                   lambda: _epsilon_bounds(pld, delta, rtol, skip_if_capped))
    if res is not None:
        return res
    upper, what = math.inf, "trivial"
    ch = chernoff_epsilon_upper(pld, delta)
    if ch is not None:
        upper, what = ch, "Chernoff"
    return EpsilonBounds(delta, upper, 0.0, upper, pld.direction,
                         {"work_limit": True, "warning": _LIMIT_WARNING.format(what=what)})


def _epsilon_bounds(pld: ComposedPLD, delta: float, rtol: float,
                    skip_if_capped: bool = False) -> EpsilonBounds:
    if delta <= pld.p_inf:
        return EpsilonBounds(delta, math.inf, math.inf, math.inf, pld.direction,
                             {"reason": "delta <= infinite-loss mass"})
    if not pld.entries:
        return EpsilonBounds(delta, 0.0, 0.0, 0.0, pld.direction)
    if pld.tv_bound is not None and pld.tv_bound <= delta:
        # delta(0) <= TV cap <= delta: eps = 0 is certified (and no eps is smaller)
        return EpsilonBounds(delta, 0.0, 0.0, 0.0, pld.direction, {"reason": "total-variation cap"})
    if pld.purely_atomic:
        comb = _memo(lambda e: _combine(pld, None, e))

        def up_fn(e):
            return comb(e)[2]

        def lo_fn(e):
            return comb(e)[1]

        # delta(eps) is continuous (kinks at the atom losses): bracketed root finding, no contour
        # the optimised Chernoff bound gives the start and the slope of the root search
        hi, c_ch = _chernoff_eps_opt(pld, delta - pld.p_inf)
        return _solve(pld, delta, up_fn, lo_fn, hi, {"exact": True}, slope=c_ch)
    # the Chernoff bound of the composed pair, optimised over c, gives a valid bracket and the line
    d_fin = delta - pld.p_inf
    hi, c_ch = _chernoff_eps_opt(pld, d_fin)
    eps_ref = hi
    details: dict = {}
    result = None
    for i in range(3):
        plan = _best_plan(pld, eps_ref, math.log(delta) + math.log(rtol) - math.log(8.0), c_hint=c_ch)
        grid = _Grid(pld, _check_plan(pld, plan, skip_if_capped and i == 0, rtol))

        comb = _memo(lambda e, _g=grid: _combine(pld, _g, e))

        def up_fn(e, _c=comb):
            return _c(e)[2]

        def lo_fn(e, _c=comb):
            return _c(e)[1]

        try:
            result = _solve(pld, delta, up_fn, lo_fn, hi, details, slope=c_ch)
        except FloatingPointError:
            if result is not None:
                break
            # the contour's bracket is too wide to certify anything below the Chernoff bound (e.g. a
            # Gaussian pair with mu = 1e8, where the float error bound exceeds 1): that bound stands
            result = EpsilonBounds(delta, hi, 0.0, hi, pld.direction, {"reason": "Chernoff bound only"})
            break
        det = comb(result.upper)[3]
        details = {**det, "chernoff_eps": hi}
        if result.upper - result.lower <= 1e3 * rtol * max(result.upper, 1e-12) or result.upper == 0.0:
            break
        if pld.work(grid.u_trunc, grid.h, grid.c) > WORK_BUDGET / 4:
            break  # the work cap shaped this grid: a new line would cost as much and gain little
        eps_ref = result.upper
    assert result is not None
    # the optimised Chernoff bound of the same pair (hi, including the log-MGF error) is rigorous too
    upper = min(result.upper, hi + pld.mgf_err_at(c_ch) / c_ch)
    return EpsilonBounds(delta, min(result.estimate, upper), min(result.lower, upper), upper,
                         pld.direction, {**result.details, **details})
