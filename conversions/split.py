"""Near-atomic splitting for the characteristic-function route: core and big parts composed apart.

Why.  At small sample rates the subsampled Gaussian's privacy loss is *near-atomic*: almost all of its
mass sits in a band of width ~q around 0 (the core), and a tiny mass carries the large losses that make
epsilon.  The composed MGF then decays only for |t| >~ 1 / (q sqrt T) while the law spreads over O(1)
losses, so one contour needs ~1 / (q sqrt T) nodes of O(1) spacing (millions at q = 1e-5).  Split
apart, each part is easy: the core's sum is a narrow, smooth law (few nodes at a coarse spacing), and
the steps with a big loss are rare (their part of the integrand decays at the big part's own scale).

Identity.  Split every subsampled-Gaussian step's P-measure by its output x with the weights
w_core(x) = Phi((x* - x) / tau) and w_big = 1 - w_core (:class:`mechanisms.subsampled.
SubsampledGaussianPart`): M_j = a_j + b_j with a_j, b_j the MGFs of two non-negative measures.  The
composed measure prod_j (a_j + b_j)^{*k_j} (convolution powers) is then exactly the sum of two
non-negative measures,

    core measure   C = prod_j a_j^{*k_j}                     (every split step in its core part),
    remainder      R = prod_j (a_j + b_j)^{*k_j} - prod_j a_j^{*k_j}   (at least one big step),

and delta(eps) = int f_eps d(C + R) = delta_C(eps) + delta_R(eps) with f_eps(x) = (1 - e^{eps - x})_+
(the finite part; no infinite-loss mass is allowed in a split ledger).  Each of delta_C and delta_R is
the contour integral of a non-negative measure's MGF (``conversions.contour`` with its own line, step
and truncation: rigorous brackets, the contour's own error analysis).  The remainder's MGF is computed
without cancellation as R = prod a^k (exp(sum_j k_j log1p(b_j / a_j)) - 1), and its decay envelope,
from the monomial expansion (every term has at least one b factor, all coefficients >= 0), is
|R(c + it)| <= prod_j (A_j + B_j)^{k_j} - prod_j A_j^{k_j} with A_j, B_j the parts' envelopes.
Floating point: with each part's MGF within e x (its value on the real line), |Delta R| <=
2 (e^{T e} - 1) prod_j M_j(c)^{k_j} (both products moved by at most that much), i.e. a log-error
log1p(2 expm1(T e) M(c)^T / R(c)) relative to R(c) on the line Re s = c (``log_mgf_error_at``).
When delta_R's Chernoff bound is below a small fraction of the target accuracy, the remainder is not
integrated: its bracket is [0, Chernoff bound].

The bracket is therefore as rigorous as the contour's; only its cost changes.  Mechanisms other than
the subsampled Gaussian (Gaussian steps, any mechanism with a loss distribution and no infinite-loss
mass) enter both measures as they are.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from mechanisms._numerics import log_expm1_float as _log_expm1
from mechanisms.base import Mechanism, check_direction
from mechanisms.subsampled import SubsampledGaussian
from mechanisms.subsampled_part import SubsampledGaussianPart

from . import contour as C
from . import gaussian_dp
from .split_cuts import CUT_FACTORS, _grid_cut, _other_cuts
from .split_meter import _Meter
from .split_remainder import Remainder

U = 2.0**-53
#: the remainder is only bounded (not integrated) when its Chernoff bound is below this fraction of
#: the accuracy target (rtol x delta)
NEGLIGIBLE = 1.0
#: epsilon queries stop refining once the certified bracket is this narrow (relative)
EPS_RTOL = 1e-4
#: ... and give up once two integrated passes left it wider than this (relative) without halving it: in
#: the regimes sweep no such bracket was narrowed by further passes or cuts (tiny eps at tiny q, e.g.
#: q = 1e-6, sigma = 1, T = 100..1000, where the remove direction's lower bound stays 0; the discretised
#: PLD answers those), which cost up to 0.2 s
STALL_RTOL = 0.5
#: ... or once one integrated pass left it wider than this (its lower bound under 5 % of its upper):
#: none of those was narrowed by later passes in the sweep (q = 1e-6, sigma = 1, T = 100: 155 -> 114 ms)
STALL_FIRST_RTOL = 0.95
#: eps < 0.1: the queries also stop at this width (absolute; the PLD's and auto's target; q = 1e-6: -0.12 s)
EPS_ATOL = 1e-4
#: an eps query answered cheaply (at most ``POLISH_WORK`` units so far, ~40 ms, counted in the per-point
#: hint's units: ``split_meter._Meter.hint_work``; the meter itself charges lines their line cost) and
#: wider than this
#: (relative) gets one more integrated pass at its cut, planned at the upper end with a target
#: ``POLISH_RTOL / EPS_RTOL`` times smaller; its bracket is intersected with the answer (both certified,
#: so it never widens).  Regimes sweep: 19 upper ends lower (e.g. q = 0.01, sigma = 0.8, T = 100:
#: [1.5108109, 1.5108397] -> [1.51083752, 1.51083753]), none higher, +20-40 ms on the queries it runs
#: (without the work bound: 26 lower, but 6 more queries over 100 ms)
POLISH_RTOL = 1e-6
POLISH_WORK = 1e7
#: ... or at most this much metered work so far (~35 ms at the per-point kernel's 13-17 ns per unit; the
#: meter charges lines their NUFFT cost, ``mgf_line_cost``).  Regimes sweep: one more query polished, q =
#: 1e-3, sigma = 0.3, T = 1000: [18.1443924, 18.1446887] -> [18.14460999, 18.14461028], below
#: dp-accounting's 18.14461079 (its hint work, 2.4e7, is over ``POLISH_WORK``: its lines are long)
POLISH_METERED_WORK = 2.5e6
#: the polishing pass's part contours may plan up to this much work per line (``contour.WORK_BUDGET``,
#: 16x: the truncation U of a near-atomic core stops doubling at the budget, and then the truncation
#: term, not the target, sets the width).  Regimes sweep: 4 upper ends lower, none higher, none slower
#: (e.g. q = 0.01, sigma = 0.5, T = 100: [6.4762031, 6.4762124] -> [6.47620998, 6.47621001], below
#: dp-accounting's 6.4762102; q = 0.001, sigma = 0.5, T = 100: [2.1086452, 2.1086454] ->
#: [2.10864528, 2.10864532])
POLISH_BUDGET = 16.0 * C.WORK_BUDGET


def _eps_narrow(lo: float, up: float) -> bool:
    """Whether an eps bracket needs no further refinement (``EPS_RTOL``, ``EPS_ATOL``)."""
    return up - lo <= max(EPS_RTOL * max(up, 1e-12), EPS_ATOL if up < 0.1 else 0.0) or up == 0.0


# ------------------------------------------------------------------------------------ the split
def is_split_entry(m: Mechanism) -> bool:
    """Whether the split applies to this mechanism (a subsampled Gaussian with 0 < q < 1)."""
    return type(m) is SubsampledGaussian and 0.0 < m.sample_rate < 1.0


def splittable(entries: Sequence[tuple[Mechanism, int]]) -> bool:
    """Whether a ledger can be split: exactly one subsampled Gaussian entry with 0 < q < 1 (the rounding
    analysis of the remainder is for one split entry), every entry with a loss distribution and no
    infinite-loss mass."""
    n = 0
    for m, k in entries:
        if int(k) <= 0:
            continue
        if not m.pld_available or m.infinite_loss_mass > 0.0:
            return False
        n += is_split_entry(m)
    return n == 1


def cut_for(m: SubsampledGaussian, ell_cut: float) -> tuple[float, float]:
    """(x*, tau) with l(x*) = ell_cut (l(x) = log(1 - q + q e^{mu x - mu^2/2}), the loss magnitude at the
    output x) and a weight width tau = min(0.5, 0.5 / |x*|) (sharp enough that the big part starts
    near x*, smooth enough for a coarse quadrature)."""
    q, mu = m.sample_rate, m.mu
    l1q, lq = math.log1p(-q), math.log(q)
    ell = max(ell_cut, 1e-300)
    # l(x) = ell  <=>  q e^{y} = e^ell - (1 - q),  y = mu x - mu^2 / 2
    d = ell - l1q  # > 0
    y = l1q + _log_expm1(d) - lq
    x = y / mu + mu / 2.0
    x = min(max(x, -30.0), 60.0 + mu)
    return x, min(0.5, 0.5 / max(1.0, abs(x)))


class SplitComposition:
    """The core and remainder compositions of a ledger for one direction, cut at loss ``ell_cut``."""

    def __init__(self, entries: Sequence[tuple[Mechanism, int]], direction: str, ell_cut: float):
        check_direction(direction)
        self.direction = direction
        self.ell_cut = float(ell_cut)
        if not splittable(entries):
            raise ValueError("the ledger cannot be split: it needs exactly one subsampled Gaussian entry "
                             "with 0 < q < 1 and no infinite-loss mass")
        others = []
        for m, k in entries:
            if int(k) <= 0:
                continue
            if is_split_entry(m):
                x, tau = cut_for(m, ell_cut)
                a = SubsampledGaussianPart(m.sigma, m.sample_rate, m.sensitivity, x, tau, 0)
                b = SubsampledGaussianPart(m.sigma, m.sample_rate, m.sensitivity, x, tau, 1)
                self.cut, split_k = (x, tau), int(k)
            else:
                others.append((m, int(k)))
        self.core = C.ComposedPLD([(a, split_k)] + others, direction)
        self.remainder = Remainder(a, b, split_k)
        self.rem = C.ComposedPLD([(self.remainder, 1)] + others, direction)

    @property
    def plds(self) -> tuple[C.ComposedPLD, C.ComposedPLD]:
        return self.core, self.rem


def _clt_epsilon(entries, delta: float) -> float:
    """A starting point (no bound) for the reference epsilon: the mu-GDP epsilon with the central-limit
    mu of the ledger, mu^2 = sum q^2 k (e^{mu_j^2} - 1) over subsampled Gaussians (Dong, Roth & Su 2022,
    Thm 6) plus sum k mu_j^2 over entries reporting ``gdp_mu``; 1 when that is not finite."""
    mu2 = 0.0
    for m, k in entries:
        if is_split_entry(m):
            mu2 += k * m.sample_rate**2 * math.expm1(min(m.mu**2, 700.0))
        elif m.gdp_mu is not None:
            mu2 += k * m.gdp_mu**2
    try:
        eps = gaussian_dp.gaussian_epsilon(delta, math.sqrt(mu2))[0] if 0.0 < mu2 < 1e6 else 1.0
    except (ValueError, ArithmeticError):
        eps = 1.0
    return min(max(eps, 1e-9), 1e3) if math.isfinite(eps) else 1.0


def default_cut(eps_ref: float) -> float:
    """The loss at which to split: a quarter of the epsilon of interest (a single big step then carries a
    sizeable share of it, while the core's sum stays narrow)."""
    return max(eps_ref, 1e-9) / 4.0


# ------------------------------------------------------------------------------------ queries
def _add_up(a: float, b: float) -> float:
    s = a + b
    return min(1.0, math.nextafter(s, math.inf)) if s > 0.0 else 0.0


def _add_dn(a: float, b: float) -> float:
    s = a + b
    return max(0.0, math.nextafter(s, 0.0)) if s > 0.0 else 0.0


class _PartGrid:
    """One measure (core or remainder) evaluated on its own contour, or bounded by Chernoff alone."""

    def __init__(self, pld: C.ComposedPLD, eps_ref: float, log_target: float, skip_if_capped: bool,
                 rtol: float, chernoff_only: bool = False, c_hint: float | None = None,
                 error_floor: bool = False, budget: float = C.WORK_BUDGET):
        self.pld = pld
        self.grid = None
        self.c_ch = pld.saddle(eps_ref) if c_hint is None else pld.saddle_near(eps_ref, c_hint)
        self.log_ch0 = pld.chernoff_log_delta(self.c_ch, eps_ref)
        if not chernoff_only:
            plan = C._best_plan(pld, eps_ref, log_target, c_hint=self.c_ch, error_floor=error_floor,
                                budget=budget)
            self.grid = C._Grid(pld, C._check_plan(pld, plan, skip_if_capped, rtol))
        self._memo: dict = {}

    def chernoff_up(self, eps: float) -> float:
        """Rigorous upper bound on this measure's delta(eps): kappa(c) M(c) e^{-c eps} on the fixed line
        (rounded up: the declared MGF error and a few ulps of the exponent's summands)."""
        c = self.c_ch
        lx = self.pld.chernoff_log_delta(c, eps) + self.pld.mgf_err_at(c)
        lx += C._cheap_chernoff_margin(self.pld, c, eps, lx)
        return C._exp_up(lx) if lx < 0.0 else 1.0

    def bounds(self, eps: float) -> tuple[float, float, float]:
        """(estimate, lower, upper) of this measure's delta(eps)."""
        r = self._memo.get(eps)
        if r is None:
            if self.grid is None:
                up = self.chernoff_up(eps)
                r = (0.5 * up, 0.0, up)
            else:
                est, lo, up, _ = C._combine(self.pld, self.grid, eps)
                up = min(up, self.chernoff_up(eps))
                r = (min(est, up), min(lo, up), up)
            self._memo[eps] = r
        return r

    def details(self) -> dict:
        if self.grid is None:
            return {"c": self.c_ch, "nodes": 0}
        return {"c": self.grid.c, "h": self.grid.h, "nodes": int(self.grid.t.size), "U": self.grid.u_trunc}


def _parts(entries, direction: str, eps_ref: float, log_target: float, skip_if_capped: bool, rtol: float,
           ell_cut: float | None, meter: _Meter, chernoff_only: bool = False, hints: dict | None = None,
           error_floor: bool = False, budget: float = C.WORK_BUDGET):
    """(split, core, remainder) for a query near eps_ref (see ``CUT_FACTORS``); ``chernoff_only``: both
    parts bounded by their Chernoff bounds (a cheap, rigorous first pass).  ``hints`` (updated): the lines
    found by the previous pass, where the line searches start; ``error_floor``: integrated parts on lines
    where the declared MGF errors can meet the target (``contour._best_plan``); ``budget``: the work an
    integrated part's line may plan (``contour.WORK_BUDGET``)."""
    hints = {} if hints is None else hints
    tgt = log_target + math.log(NEGLIGIBLE)
    factors = CUT_FACTORS if ell_cut is None else (ell_cut / max(eps_ref, 1e-300),)
    n_factors = len(factors)
    for i, f in enumerate(factors):
        # cuts on a 2^(1/2) grid: passes at nearby reference epsilons share the parts (their memoised
        # MGF values) and the compositions (their per-line envelopes)
        cut = _grid_cut(max(eps_ref, 1e-9) * f)
        sc = hints.get(("split", cut))
        if sc is None:
            sc = hints["split", cut] = SplitComposition(entries, direction, cut)

        def plan(_sc=sc, _last=(i == n_factors - 1)):
            rem_ch = _PartGrid(_sc.rem, eps_ref, log_target, False, rtol, True, hints.get("rem"))
            hints["rem"] = rem_ch.c_ch
            if rem_ch.log_ch0 >= tgt and not _last:
                return None
            core_ch = _PartGrid(_sc.core, eps_ref, log_target, False, rtol, True, hints.get("core"))
            hints["core"] = core_ch.c_ch
            if chernoff_only:
                return _sc, core_ch, rem_ch
            if _last and ell_cut is None and core_ch.log_ch0 < tgt <= rem_ch.log_ch0:
                return _LOW_CUT_EMPTY
            core = (core_ch if core_ch.log_ch0 < tgt
                    else _PartGrid(_sc.core, eps_ref, log_target, skip_if_capped, rtol, False, core_ch.c_ch,
                                   error_floor, budget))
            rem = (rem_ch if rem_ch.log_ch0 < tgt
                   else _PartGrid(_sc.rem, eps_ref, log_target, skip_if_capped, rtol, False, rem_ch.c_ch,
                                  error_floor, budget))
            return _sc, core, rem

        out = meter.run(sc.plds, plan)
        if out is _LOW_CUT_EMPTY:
            # no cut left the remainder negligible, and at the low cut the core is: the remainder there is
            # nearly the whole ledger, whose contour the split was to avoid; the high cut, with both parts
            # integrated, splits it (measured: q = 1e-4, sigma = 1, T = 1000, delta = 1e-12: [0.0949,
            # 0.0960] at the low cut 0.044, [0.095413, 0.095423] at the high cut 0.177)
            return _parts(entries, direction, eps_ref, log_target, skip_if_capped, rtol,
                          _grid_cut(max(eps_ref, 1e-9) * max(CUT_FACTORS)), meter, chernoff_only, hints,
                          error_floor, budget)
        if out is not None:
            return out
    raise AssertionError("unreachable")


#: (``_parts``: the low cut's core is negligible while its remainder is not)
_LOW_CUT_EMPTY = object()


def _core_capped_alone(core: _PartGrid, rem: _PartGrid) -> bool:
    """Whether only the core was integrated (the remainder bounded by its Chernoff bound) and its
    contour's truncation was set by the node or work cap rather than by the target."""
    return rem.grid is None and core.grid is not None and core.grid.capped


def _bracket(core: _PartGrid, rem: _PartGrid, eps: float) -> tuple[float, float, float]:
    e1, l1, u1 = core.bounds(eps)
    e2, l2, u2 = rem.bounds(eps)
    up = _add_up(u1, u2)
    lo = min(_add_dn(l1, l2), up)
    return min(max(e1 + e2, lo), up), lo, up


def split_delta_bounds(entries, eps: float, direction: str = "remove", rtol: float = 1e-8, *,
                       skip_if_capped: bool = False, work_limit: float | None = None,
                       ell_cut: float | None = None, stats: dict | None = None,
                       deadline: float | None = None) -> C.DeltaBounds:
    """Certified bracket on delta(eps) (one direction) by the near-atomic split (module docstring).

    Raises :class:`conversions.contour.WouldBeCapped` (with ``skip_if_capped``) when a part's contour
    would be capped, and :class:`conversions.contour.WorkLimitReached` past the work limit: the caller
    then falls back to another route.  Past ``deadline`` (a ``query_clock()`` value, the caller's time
    limit) no refinement of a certified bracket is started or finished: that bracket is returned.
    ``stats`` (a dict, if given) receives the work used ("work"), also when the query fails.
    """
    full = C.ComposedPLD(entries, direction)
    if eps < 0.0 or not full.entries:
        raise ValueError("the split route answers eps >= 0 for a non-empty ledger")
    meter = _Meter(work_limit, stats, deadline)

    def start() -> float:
        c = full.saddle(eps)
        return full.chernoff_log_delta(c, eps) + math.log(rtol) - math.log(1e3)

    log_target = meter.run((full,), start)
    best = lo_all = up_all = None
    hints: dict = {}
    cut = ell_cut
    free = forced = 0  # passes at the rule's cuts (three at most, as before) and at the forced low cut
    while forced < 2 and (free < 3 or cut is not ell_cut):
        try:
            sc, core, rem = _parts(entries, direction, eps, log_target, skip_if_capped, rtol, cut, meter,
                                   hints=hints, error_floor=cut is not ell_cut)
            est, lo, up = meter.run(sc.plds, lambda _c=core, _r=rem: _bracket(_c, _r, eps))
        except C.WorkLimitReached:
            if best is None:
                raise
            break  # the limit came during a refinement: the certified bracket of the pass before stands
        if cut is ell_cut:
            free += 1
        else:
            forced += 1
        improved = best is None or up - lo < best[2] - best[1]
        if improved:
            best = (est, lo, up, sc, core, rem)
        # (every pass's bracket is certified: the answer is their intersection)
        lo_all, up_all = (lo, up) if lo_all is None else (max(lo_all, lo), min(up_all, up))
        meter.answered = True
        if up - lo <= rtol * max(est, 1e-300) or est <= 0.0:
            break
        if improved:
            log_target = math.log(max(est, 1e-300)) + math.log(rtol) - math.log(8.0)
        if ell_cut is None and cut is None and (not improved or _core_capped_alone(core, rem)):
            # a pass no narrower than the best: its estimate is no guide (far tails: the core's contour
            # at a high cut meets its error floor, its bracket reaching the core's Chernoff bound), so
            # integrate at the low cut (the last of CUT_FACTORS), twice at most (the second at the first
            # one's estimate); log_target is still the best pass's (set when it improved).  So too after
            # a pass whose core, integrated alone, had its contour capped, as split_epsilon_bounds does
            # (q = 1e-3, sigma = 0.3, T = 100, delta(11): three passes at the cut 22.6 and one at 45.3
            # left [9.87e-6, 1.089e-5] in 0.35 s, and auto then ran the PLD for 1.5 s; the low cut 5.66
            # gives [1.03806e-5, 1.03837e-5] in 43 ms)
            cut = _grid_cut(max(eps, 1e-9) * CUT_FACTORS[-1])
        elif not improved:
            break
    est, _, _, sc, core, rem = best
    lo, up = min(lo_all, up_all), up_all
    if ell_cut is None:
        def at_cut(cut):
            parts = _parts(entries, direction, eps, log_target, skip_if_capped, rtol, cut, meter, hints=hints)
            e2, l2, u2 = meter.run(parts[0].plds, lambda: _bracket(parts[1], parts[2], eps))
            return l2, u2, (e2, *parts)

        def narrow(lo_, up_, found, _est=est):
            e = _est if found is None else found[0]
            return up_ - lo_ <= rtol * max(e, 1e-300) or (found is None and e <= 0.0)

        lo, up, found = _other_cuts(eps, sc.ell_cut, lo, up, narrow, at_cut)
        if found is not None:
            est, sc, core, rem = found
    if full.tv_bound is not None:
        up = min(up, full.tv_bound)
        lo = min(lo, up)
    det = {"split": True, "ell_cut": sc.ell_cut, "core": core.details(), "remainder": rem.details(),
           "nodes": core.details()["nodes"] + rem.details()["nodes"]}
    return C.DeltaBounds(eps, min(max(est, lo), up), lo, up, direction, meter.mark(det))


def _polish(entries, direction: str, lo: float, up: float, log_target: float, skip_if_capped: bool,
            rtol: float, cut: float | None, meter: _Meter, hints: dict, solve) -> tuple[float, float]:
    """[lo, up] intersected with the bracket of one more integrated pass at ``cut`` (``POLISH_RTOL``,
    lines planned up to ``POLISH_BUDGET``), or unchanged when that pass cannot be integrated or meets
    the work or time limit."""
    try:
        sc, core, rem = _parts(entries, direction, up, log_target + math.log(POLISH_RTOL / EPS_RTOL),
                               skip_if_capped, rtol, cut, meter, hints=hints, budget=POLISH_BUDGET)
        r = meter.run(sc.plds, lambda: solve(core, rem, up))
    except (C.WouldBeCapped, C.WorkLimitReached):
        return lo, up
    lo, up = max(lo, r.lower), min(up, r.upper)
    return min(lo, up), up


def split_epsilon_bounds(entries, delta: float, direction: str = "remove", rtol: float = 1e-8, *,
                         skip_if_capped: bool = False, work_limit: float | None = None,
                         stats: dict | None = None, deadline: float | None = None) -> C.EpsilonBounds:
    """Certified eps(delta) (one direction) by the near-atomic split: the smallest eps >= 0 whose certified
    delta bracket's upper end is <= delta, and the lower end's root as the lower bound.

    The line, step and cut are planned at a reference epsilon: the split's Chernoff bound (cheap passes,
    both parts bounded by their own Chernoff bounds, which are much tighter than the whole ledger's at
    small sample rates) until it settles, then up to three integrated passes; the narrowest certified
    bracket is returned.  Failures and ``stats`` as :func:`split_delta_bounds`.
    """
    full = C.ComposedPLD(entries, direction)
    if not (0.0 < delta < 1.0) or not full.entries:
        raise ValueError("the split route answers 0 < delta < 1 for a non-empty ledger")
    if full.tv_bound is not None and full.tv_bound <= delta:
        return C.EpsilonBounds(delta, 0.0, 0.0, 0.0, direction, {"reason": "total-variation cap"})
    meter = _Meter(work_limit, stats, deadline)
    log_target = math.log(delta) + math.log(rtol) - math.log(8.0)
    best = None
    best_det: dict = {}

    def solve(core, rem, start: float):
        def up_fn(e):
            return _bracket(core, rem, e)[2]

        def lo_fn(e):
            return _bracket(core, rem, e)[1]
        # (log delta falls with slope about -c near the root: the core's line when it carries delta)
        slope = core.c_ch if core.log_ch0 >= rem.log_ch0 else rem.c_ch
        return C._solve(full, delta, up_fn, lo_fn, start, {}, slope=slope)

    # cheap passes: the split's Chernoff bound (rigorous, both parts bounded) at a cut near its own answer,
    # from the central-limit estimate until it settles (a few passes of ~10 ms): the reference for the
    # integrated passes (the whole ledger's Chernoff bound is far too loose at small rates).  The start is
    # at most that Chernoff bound (an upper bound on eps): the central-limit estimate can be far above the
    # truth at small noise (q = 1e-3, sigma = 0.3, T = 1e5: mu ~ 81, eps capped at 1e3, truth 153)
    eps_ref = _clt_epsilon(entries, delta)
    ch = meter.run((full,), lambda: C._chernoff_eps_opt(full, delta)[0])
    if math.isfinite(ch) and ch > 0.0:
        eps_ref = min(eps_ref, ch)
    hints: dict = {}
    seen: set = set()  # the cut grid points passes were planned at: a repeat is a cycle (two cuts whose
    for _ in range(10):  # answers point at each other, e.g. 0.475 <-> 0.695), which more passes only repeat
        key = _grid_cut(eps_ref)
        if key in seen:
            break
        seen.add(key)
        sc, core, rem = _parts(entries, direction, eps_ref, log_target, False, rtol, None, meter, True, hints)
        r = meter.run(sc.plds, lambda _c=core, _r=rem, _e=eps_ref: solve(_c, _r, _e))
        if best is None or r.upper < best.upper:
            best = r
        if not (0.0 < r.upper and abs(r.upper - eps_ref) > 0.1 * eps_ref):
            break
        eps_ref = r.upper
    eps_ref = best.upper
    integrated = False
    capped: Exception | None = None
    lo_all, up_all = best.lower, best.upper  # (every pass's bracket is certified: their intersection is)
    width, stalled, low = math.inf, False, False
    for _ in range(3):  # integrated passes (after a capped one, at a low cut: the core stays narrow)
        cut = 0.5 * eps_ref if (capped is not None and not integrated) or low else None
        try:
            try:
                sc, core, rem = _parts(entries, direction, eps_ref, log_target, skip_if_capped, rtol, cut,
                                       meter, hints=hints)
            except C.WouldBeCapped as exc:  # this cut or line cannot be integrated: try the next pass
                capped = exc
                continue
            r = meter.run(sc.plds, lambda _c=core, _r=rem, _e=eps_ref: solve(_c, _r, _e))
        except C.WorkLimitReached:
            if not integrated:
                raise
            break  # the limit came during a refinement: the narrowest certified bracket so far stands
        if not integrated or r.upper - r.lower < best.upper - best.lower or r.upper < best.lower:
            best = r
            best_det = {"split": True, "ell_cut": sc.ell_cut, "core": core.details(),
                        "remainder": rem.details(),
                        "nodes": core.details()["nodes"] + rem.details()["nodes"]}
        integrated = meter.answered = True
        lo_all, up_all = max(lo_all, r.lower), min(up_all, r.upper)
        lo_all = min(lo_all, up_all)
        if _eps_narrow(lo_all, up_all):
            break
        width, last_width = up_all - lo_all, width
        if width > STALL_RTOL * up_all and (width > 0.5 * last_width or width > STALL_FIRST_RTOL * up_all):
            stalled = True  # (wide and not halved, or no lower bound to speak of: see STALL_RTOL)
            break
        if cut is None and _core_capped_alone(core, rem):
            # the rule's high cut left the remainder to its Chernoff bound and the core's contour was cut
            # short by the node or work cap (the big steps' losses are in the core): the next pass takes
            # the low cut, where both parts are integrated (measured: q = 1e-3, sigma = 0.3, T = 100,
            # delta = 1e-5: two passes at the cut 22.6 gave [10.9956, 11.0845] in 55 ms, the low cut 5.66
            # [11.04039, 11.04071])
            low = True
        elif abs(r.upper - eps_ref) <= 0.05 * eps_ref or best.upper == eps_ref:
            break  # planned at the answer already (or at the same eps): another pass gives the same grid
        eps_ref = best.upper
    if not integrated:
        raise capped if capped is not None else C.WouldBeCapped("the split found no integrable cut")
    def at_cut(cut):
        sc, core, rem = _parts(entries, direction, eps_ref, log_target, skip_if_capped, rtol, cut, meter,
                               hints=hints)
        r = meter.run(sc.plds, lambda: solve(core, rem, eps_ref))
        det = {"split": True, "ell_cut": sc.ell_cut, "core": core.details(), "remainder": rem.details(),
               "nodes": core.details()["nodes"] + rem.details()["nodes"]}
        return r.lower, r.upper, (r.estimate, det)

    lo, up, found = _other_cuts(eps_ref, best_det.get("ell_cut"), lo_all, up_all,
                                lambda lo_, up_, _f: _eps_narrow(lo_, up_) or stalled, at_cut)
    est = best.estimate
    if found is not None:
        est, best_det = found
    cheap = meter.hint_work <= POLISH_WORK or meter.stats["work"] <= POLISH_METERED_WORK
    if not stalled and up - lo > POLISH_RTOL * up and cheap:
        lo, up = _polish(entries, direction, lo, up, log_target, skip_if_capped, rtol,
                         best_det.get("ell_cut"), meter, hints, solve)
    return C.EpsilonBounds(delta, min(max(est, lo), up), lo, up, direction,
                           meter.mark(dict(best_det)))
