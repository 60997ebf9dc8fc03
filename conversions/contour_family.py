"""Contour inversion for a family of compositions of the same mechanisms with different counts.

A trajectory (epsilon after every epoch of a run) asks for eps(delta) of the ledgers
sum_j k_j^(i) log M_j, i = 1, 2, ..., whose mechanisms are the same and whose counts grow.  Everything
the shifted-line inversion (:mod:`conversions.contour`) spends its time on is a per-mechanism quantity
that does not depend on the counts:

* the real log-MGFs log M_j(c) (line searches, the aliasing bounds at c', c/2, the Chernoff bound);
* the envelope functions t -> log sup_{|t'| >= t} |C_j(c + it')| of a line (numerical for the
  subsampled Gaussian: the costliest single step of a query);
* the complex log-MGFs at the nodes c + i h n, n = 0, 1, ... (a trapezoid grid).

:class:`SharedTerms` keeps them for one direction across the family's queries, and :class:`FamilyPLD`
(a :class:`~conversions.contour.ComposedPLD` with one point's counts) reads them from there.  So that
the values recur, the choices a query is free to make are taken from fixed grids:

* the line c from the grid 2^(n/4) (the standalone query snaps it there too), found by a walk on that
  grid from the Chernoff line instead of a continuous search; the previous member's line is kept when
  the nodes it still needs cost less than the new line's and its integrand is at most twice the
  saddle line's (or its bracket at the design point is well inside the accuracy target anyway);
* the Chernoff line from the grid 2^(n/16), walked from the previous member's;
* the trapezoid step h rounded down to H 2^-r, H the first step used on that line (the nodes of a
  step are every 2^r-th node of a step 2^r times finer: one cached array serves both, and a finer
  step computes only the new half of its nodes);
* the plan's design point: the previous members' answers extrapolated to this one (the standalone
  query plans at the Chernoff bound, about 10 % above the answer for DP-SGD).

These choices are free parameters of the error analysis: any line c in the domain, any step h and
truncation U give a rigorous bracket (the aliasing, truncation and floating-point terms are evaluated
for the chosen c, h, U at the eps being tested, whatever the design point was), and a finer step only
shrinks the aliasing term.  Every error term is recomputed for each point with its own counts (from
the cached per-mechanism values, which are the very numbers the mechanism returns for those arguments),
so each point's bracket is certified exactly as a standalone query's is; only its last digits may
differ from the standalone answer (another line and step).

The result of :func:`family_epsilon_bounds` is what :func:`conversions.contour.epsilon_bounds` returns
for the same composition and direction (remove or add: the dominating pair of the mechanisms' own
neighbouring relation): ``upper`` a certified upper bound on eps(delta) of the pair, ``lower`` a
certified lower bound; the inversion identity and its error analysis are those of
:mod:`conversions.contour` (shifted-line inversion of the composed MGF with rigorous aliasing,
truncation and rounding terms).  The family query never falls back on its own: a plan that would be
capped (near-atomic losses), the work limit, or a numerical failure raise, and the caller answers that
point with a standalone query.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from mechanisms.base import Mechanism, check_direction

from . import contour as C

#: grids of the line searches: c = 2^(n / _LINE_STEPS) for the contour, 2^(n / _CHERNOFF_STEPS) for the
#: Chernoff bound (a multiple, so that the contour's lines are among the Chernoff search's)
_LINE_STEPS = 4
_CHERNOFF_STEPS = 16
_C_MIN = 1e-6
_MAX_WALK = 48
#: cached node values (complex, per mechanism) above which the node cache is emptied (memory bound)
MAX_CACHED_NODES = 1 << 22


class SharedTerms:
    """Per-mechanism, count-independent values of one direction, shared by a family's queries.

    Keys are the mechanisms themselves (frozen dataclasses: equal parameters give equal values).
    ``calls`` counts the mechanism calls made (the cache misses: real log-MGFs, envelope functions,
    node arrays) and ``work`` their cost hints (``mgf_cost`` units, the contour's deterministic work
    meter), for benchmarks and tests.
    """

    def __init__(self, direction: str = "remove"):
        check_direction(direction)
        self.direction = direction
        self._real: dict = {}
        self._env: dict = {}
        self._nodes: dict = {}  # (mechanism, c) -> {h: complex array of log M at c + i h n}
        self._base: dict = {}  # c -> the first step used on line c
        self._n_nodes = 0
        self.calls = {"real": 0, "envelope": 0, "nodes": 0}
        self.work = 0.0

    def _charge(self, charge, units: float) -> None:
        self.work += units
        charge(units)

    def real(self, m: Mechanism, c: float, charge) -> float:
        key = (m, c)
        v = self._real.get(key)
        if v is None:
            self._charge(charge, m.mgf_cost(0.0))
            v = self._real[key] = m.log_mgf_real(c, self.direction)
            self.calls["real"] += 1
        return v

    def envelope(self, m: Mechanism, c: float, charge):
        key = (m, c)
        fn = self._env.get(key)
        if fn is None:
            self._charge(charge, m.envelope_cost(c))
            fn = self._env[key] = m.log_envelope_fn(c, self.direction)
            self.calls["envelope"] += 1
        return fn

    def step(self, c: float, h: float) -> float:
        """The step to use on line c for a plan asking for ``h``: the largest H 2^-r <= h, with H the
        first step used on this line (so all steps of a line share nodes), H itself at first use."""
        base = self._base.setdefault(c, h)
        r = math.ceil(math.log2(base / h))
        hs = math.ldexp(base, -r)
        while hs > h:  # (log2 rounding)
            hs = hs / 2.0
        while hs * 2.0 <= h:
            hs = hs * 2.0
        return hs

    def _known(self, m: Mechanism, c: float, h: float, n: int):
        """(values, mask of the nodes k < n of step h that the cache holds) or (a slice, None) when a
        cached grid holds them all."""
        grids = self._nodes.get((m, c), {})
        for hf, vals in grids.items():
            r = _pow2_ratio(h, hf)
            if r is not None and (n - 1) * r < vals.size:
                return vals[::r][:n], None
        vals = np.empty(n, dtype=complex)
        known = np.zeros(n, dtype=bool)
        for hc, cv in grids.items():
            r = _pow2_ratio(hc, h)
            if r is not None:
                k = min(cv.size, (n - 1) // r + 1)
                vals[:k * r:r] = cv[:k]
                known[:k * r:r] = True
        return vals, known

    def missing_cost(self, m: Mechanism, c: float, h: float, n: int) -> float:
        """Estimated cost (``mgf_cost`` units) of the nodes k < n of step h on line c not yet cached."""
        _, known = self._known(m, c, h, n)
        if known is None:
            return 0.0
        return float(np.count_nonzero(~known)) * m.mgf_cost(h * (n - 1))

    def nodes(self, m: Mechanism, c: float, h: float, n: int, charge) -> np.ndarray:
        """log M(c + i h k), k = 0..n-1.

        Served from a cached grid of step h / 2^r when one is long enough; otherwise computed, except
        the nodes a cached grid of step h 2^r (r >= 0) already holds (h k and (h 2^r) (k / 2^r) are
        one rounding of the same real number: the same nodes).
        """
        if self._n_nodes + n > MAX_CACHED_NODES:
            self._nodes.clear()
            self._n_nodes = 0
        vals, known = self._known(m, c, h, n)
        if known is None:
            return vals
        todo = np.flatnonzero(~known)
        if todo.size:
            t = h * todo.astype(float)  # (== (h * arange(n))[todo], element by element)
            vals[todo] = _evaluate(m, c + 1j * t, self.direction, lambda u: self._charge(charge, u))
            self.calls["nodes"] += 1
        grids = self._nodes.setdefault((m, c), {})
        old = grids.get(h)
        if old is None or old.size < n:  # (always: a long enough grid of step h is served above)
            self._n_nodes += n - (0 if old is None else old.size)
            vals.setflags(write=False)  # (handed out as views: nobody may change the cache)
            grids[h] = vals
        return vals


def _pow2_ratio(a: float, b: float) -> int | None:
    """2^r when a = 2^r b exactly for an integer r >= 0, else None."""
    r = a / b
    if not r >= 1.0:
        return None
    e = round(math.log2(r))
    return 1 << e if e >= 0 and math.ldexp(b, e) == a else None


def _evaluate(m: Mechanism, s: np.ndarray, direction: str, charge) -> np.ndarray:
    """m.log_mgf on s in chunks, charging the per-query meter before each (as ComposedPLD.log_mgf_j)."""
    parts = []
    for i in range(0, s.size, C._EVAL_CHUNK):
        chunk = s[i:i + C._EVAL_CHUNK]
        charge(chunk.size * m.mgf_cost(float(np.max(np.abs(chunk.imag)))))
        parts.append(np.asarray(m.log_mgf(chunk, direction), dtype=complex))
    return np.concatenate(parts) if parts else np.empty(0, dtype=complex)


def _grid_key(s: np.ndarray) -> tuple[float, float] | None:
    """(c, h) when s is exactly c + i h k, k = 0..n-1 (a trapezoid grid as ``_Grid`` builds it)."""
    if s.ndim != 1 or s.size < 2:
        return None
    t = s.imag
    h = float(t[1])
    c = float(s.real[0])
    if t[0] != 0.0 or not h > 0.0 or not np.all(s.real == c):
        return None
    if not np.array_equal(t, h * np.arange(s.size, dtype=float)):
        return None
    return c, h


class FamilyPLD(C.ComposedPLD):
    """A :class:`~conversions.contour.ComposedPLD` (one member of a family) whose per-mechanism values
    come from ``shared`` (a :class:`SharedTerms` of the same direction).

    Every composed quantity (sums with this member's counts, atoms, closed-form terms, error terms) is
    computed as in the parent class; only mechanism evaluations are cached, so the values are the same
    numbers the parent would compute (bit for bit, for the same arguments).
    """

    def __init__(self, entries: Sequence[tuple[Mechanism, int]], direction: str, shared: SharedTerms):
        if shared.direction != direction:
            raise ValueError(f"shared terms are for direction {shared.direction!r}, not {direction!r}")
        self.shared = shared
        super().__init__(entries, direction)

    def log_mgf_real(self, c: float) -> float:
        if c >= self.max_order:
            return math.inf
        v = 0.0
        for m, k in self.entries:
            lm = self.shared.real(m, c, self._charge)
            if lm == -math.inf:
                return -math.inf
            v += k * lm
        return v if not math.isnan(v) else math.inf

    def _env_fn(self, m: Mechanism, c: float):
        return self.shared.envelope(m, c, self._charge)

    def log_mgf_j(self, s: np.ndarray, log_a=None, log_c=None) -> list[np.ndarray]:
        from mechanisms._numerics import complex_logaddexp

        s = np.asarray(s, dtype=complex)
        key = _grid_key(s)
        if key is None:
            return super().log_mgf_j(s, log_a, log_c)
        c, h = key
        out = []
        for j, (m, _) in enumerate(self.entries):
            if log_c is not None and log_a is not None and j in log_c:
                out.append(complex_logaddexp(log_a[j], log_c[j]))
            else:
                out.append(self.shared.nodes(m, c, h, s.size, self._charge))
        return out

    def chernoff_margin(self, c: float, eps: float) -> float:
        """``contour._chernoff_margin`` from the cached values (the same bound)."""
        mag = sum(k * abs(self.shared.real(m, c, self._charge)) for m, k in self.entries)
        return 16.0 * C._U64 * (len(self.entries) + 4.0) * (1.0 + abs(C._log_kappa(c)) + mag + abs(c * eps))

    def _walk(self, f, n0: int, steps: int) -> int | None:
        """A local minimum of f(2^(n / steps)) over the integers n with 2^(n / steps) in [1e-6, cmax],
        walking downhill from n0 (None when n0 is outside, f is not finite there, or the walk takes
        more than ``_MAX_WALK`` steps)."""
        cmax = min(self.max_order * 0.98, 1e5)
        lo, hi = math.ceil(steps * math.log2(_C_MIN)), math.floor(steps * math.log2(cmax))
        if not lo <= n0 <= hi:
            return None
        vals: dict = {}

        def val(n: int) -> float:
            if n not in vals:
                v = f(2.0 ** (n / steps)) if lo <= n <= hi else math.inf
                vals[n] = v if not math.isnan(v) else math.inf
            return vals[n]

        if not math.isfinite(val(n0)):
            return None
        n = n0
        d = -1 if val(n0 - 1) < val(n0) else 1
        for _ in range(_MAX_WALK):
            if not val(n + d) < val(n):
                return n
            n += d
        return None  # (far from the start: the caller's continuous search is cheaper)

    def saddle_near(self, eps: float, c_start: float) -> float:
        """The saddle line on the grid 2^(n/4) (where ``_best_plan`` snaps it), by a walk from
        ``c_start``'s grid point; the parent's search when the walk fails."""
        def g(c: float) -> float:
            return self.log_mgf_real(c) - c * eps - math.log(c * (c + 1.0))

        n0 = round(_LINE_STEPS * math.log2(c_start))
        n = self._walk(g, n0, _LINE_STEPS)
        return super().saddle_near(eps, c_start) if n is None else _line(n)


def chernoff_eps_grid(pld: FamilyPLD, d_fin: float, c_start: float | None) -> tuple[float, float]:
    """``contour._chernoff_eps_opt`` with the line from the grid 2^(n/16), walked from ``c_start`` (or
    from the optimum of a continuous search): (a rigorous eps bound, its line)."""
    ld = math.log(d_fin)

    def f(c: float) -> float:
        v = (C._log_kappa(c) + pld.log_mgf_real(c) - ld) / c
        return v if math.isfinite(v) else math.inf

    if c_start is None:
        _, c_start = C._chernoff_eps_opt(pld, d_fin)
    n = pld._walk(f, round(_CHERNOFF_STEPS * math.log2(c_start)), _CHERNOFF_STEPS)
    if n is None:
        return C._chernoff_eps_opt(pld, d_fin)
    c = 2.0 ** (n / _CHERNOFF_STEPS)
    fx = f(c)
    margin = (pld.chernoff_margin(c, 0.0) + 4.0 * C._U64 * abs(ld)) / c
    return max(fx + margin + 4.0 * C._U64 * abs(fx), 0.0), c


def _line(n: int) -> float:
    """The n-th line of the grid 2^(n/4) (always computed the same way: cache keys recur)."""
    return 2.0 ** (n / _LINE_STEPS)


def _best_line_plan(pld: FamilyPLD, eps_ref: float, log_target: float, n0: int) -> C._Plan:
    """``contour._best_plan`` over lines of the grid 2^(n/4) only: the saddle's grid line ``n0``, one or
    two grid steps below it when the upper aliasing bound sets a small step, and twice and four times
    the saddle line and 1, 2, 4 when the plan is large (the same candidates as the standalone query's,
    computed as grid points so that their values are shared)."""
    def g(c: float) -> float:
        return pld.log_mgf_real(c) - c * eps_ref - math.log(c * (c + 1.0))

    c0 = _line(n0)
    g0 = g(c0)
    best = C._plan(pld, c0, eps_ref, log_target)
    if best is not None and best.nodes > 128 and best.h_from_upper:
        for dn in (1, 2):
            c = _line(n0 - dn)
            if g(c) - g0 > math.log(1e4):
                break
            p = C._plan(pld, c, eps_ref, log_target)
            if p is None or p.nodes >= best.nodes:
                break
            best = p
    if best is not None and best.nodes <= 2048 and pld.work(best.u, best.h) <= C.WORK_BUDGET / 2:
        return best
    for n in sorted({n0 + 4, n0 + 8, 0, 4, 8}):
        c = _line(n)
        if c >= pld.max_order or (n != n0 and g(c) - g0 > math.log(1e4)):
            continue
        p = C._plan(pld, c, eps_ref, log_target)
        if p is not None and (best is None or p.nodes < best.nodes):
            best = p
    if best is None:
        raise ValueError("the composed MGF is infinite just above the contour; cannot invert")
    return best


#: the previous member's line is kept when its uncached nodes cost less than the best line's (a new
#: line costs envelopes and nodes) and its integrand is at most this factor above the saddle line's
#: (floating-point error grows with it) ...
_KEEP_LINE_RATIO = 2.0
#: ... or its bracket at the design point is within this fraction of the accuracy target anyway
_KEEP_LINE_REL = 1.0 / 8.0
#: new nodes costing less than this (``mgf_cost`` units; ~10 ms of the subsampled Gaussian's) are cheap:
#: a kept line needing only these is not compared with the best line
CHEAP_WORK = 1e5


def _snap_step(pld: FamilyPLD, plan: C._Plan) -> C._Plan:
    """The plan with its step rounded down to the line's family of steps H 2^-r (a finer step only
    shrinks the aliasing term), unless that would exceed the node cap."""
    hs = pld.shared.step(plan.c, plan.h)
    if hs < plan.h and math.ceil(plan.u / hs) + 1 <= C.MAX_NODES:
        plan = dataclasses.replace(plan, h=hs)
    return plan


def _node_cost(pld: FamilyPLD, plan: C._Plan) -> float:
    """Estimated cost of the nodes of ``plan`` not yet cached (the mechanisms evaluated on the grid)."""
    closed = pld._closed_set if (pld.closed_terms and pld.has_atoms) else set()
    return sum(pld.shared.missing_cost(m, plan.c, plan.h, plan.nodes)
               for j, (m, _) in enumerate(pld.entries) if j not in closed)


def _plan_grid(pld: FamilyPLD, plan: C._Plan, excess: float, eps_ref: float, rtol: float) -> C._Grid | None:
    """The grid of a plan on a line other than the saddle's when it is accurate enough: the excess of
    its integrand over the saddle line's is at most ``_KEEP_LINE_RATIO``, or its bracket at the design
    point is within ``_KEEP_LINE_REL`` of the accuracy target (else None)."""
    grid = C._Grid(pld, plan)
    if excess <= math.log(_KEEP_LINE_RATIO):
        return grid
    _, s, lo, up = grid.delta_r(eps_ref)
    return grid if s > 0.0 and lo + up <= _KEEP_LINE_REL * rtol * s else None


def _excess_fn(pld: FamilyPLD, eps_ref: float, n0: int):
    """n -> g(line n) - g(line n0), g(c) = log M(c) - c eps_ref - log(c (c + 1)) (inf off the domain)."""
    def g(c: float) -> float:
        return pld.log_mgf_real(c) - c * eps_ref - math.log(c * (c + 1.0))

    g0 = g(_line(n0))

    def excess(n: int) -> float:
        c = _line(n)
        if c >= pld.max_order or c < _C_MIN:
            return math.inf
        v = g(c) - g0
        return v if not math.isnan(v) else math.inf

    return excess


def _family_grid(pld: FamilyPLD, eps_ref: float, log_target: float, c_hint: float, warm: dict,
                 rtol: float, check: bool) -> C._Grid:
    """The grid of one member: on the previous member's line when that is cheaper and accurate enough,
    else on the best grid line (as the standalone plan); ``check``: raise WouldBeCapped for a capped
    plan of the best line."""
    n0 = round(_LINE_STEPS * math.log2(pld.saddle_near(eps_ref, c_hint)))
    excess = _excess_fn(pld, eps_ref, n0)
    keep = None
    prev = warm.get("line")
    if prev is not None and prev != n0 and excess(prev) <= math.log(1e3):
        p = C._plan(pld, _line(prev), eps_ref, log_target)
        if p is not None and p.log_short <= 0.0:
            keep = _snap_step(pld, p)
    best = None
    if keep is None or _node_cost(pld, keep) > CHEAP_WORK:
        # (a kept line whose new nodes are cheap needs no comparison)
        best = _snap_step(pld, C._check_plan(pld, _best_line_plan(pld, eps_ref, log_target, n0),
                                             check and keep is None, rtol))
        if keep is not None and _node_cost(pld, keep) >= _node_cost(pld, best):
            keep = None
    if keep is not None:
        grid = _plan_grid(pld, keep, excess(prev), eps_ref, rtol)
        if grid is not None:
            return grid
        if best is not None:
            C._check_plan(pld, best, check, rtol)
    if best is None:
        best = _snap_step(pld, C._check_plan(pld, _best_line_plan(pld, eps_ref, log_target, n0), check, rtol))
    warm["line"] = round(_LINE_STEPS * math.log2(best.c))
    return C._Grid(pld, best)


def _extrapolate(history: list, x: float) -> float:
    """The quadratic (or linear) through the last points (size, eps) of ``history`` at ``x``, a little
    below (``inf`` without two points; never below the last eps: eps grows with the composition)."""
    if len(history) < 2:
        return math.inf
    pts = history[-3:]
    est = 0.0
    for i, (xi, yi) in enumerate(pts):
        w = 1.0
        for j, (xj, _) in enumerate(pts):
            if j != i:
                if xj == xi:
                    return math.inf
                w *= (x - xj) / (xi - xj)
        est += w * yi
    return max(est * (1.0 - 1e-3), pts[-1][1]) if math.isfinite(est) else math.inf


def family_epsilon_bounds(pld: FamilyPLD, delta: float, rtol: float = C.DEFAULT_RTOL, *,
                          warm: dict | None = None,
                          work_limit: float = C.QUERY_WORK_LIMIT) -> C.EpsilonBounds:
    """Certified eps(delta) of one family member (one direction), as ``contour.epsilon_bounds``.

    ``warm`` (a dict kept by the caller across the family, one per direction) carries the previous
    member's Chernoff line, so the searches start there.  Raises :class:`contour.WouldBeCapped` when
    the contour cannot reach its accuracy within the caps, :class:`contour.WorkLimitReached` past
    ``work_limit``: the caller answers such members with a standalone query.
    """
    warm = {} if warm is None else warm
    pld.start_query(work_limit)
    try:
        res = _family_epsilon_bounds(pld, delta, rtol, warm)
    finally:
        left = pld._work_left
        pld.stop_query()
    res.details["work"] = work_limit - left
    return res


def _family_epsilon_bounds(pld: FamilyPLD, delta: float, rtol: float, warm: dict) -> C.EpsilonBounds:
    if delta <= pld.p_inf or not pld.entries or (pld.tv_bound is not None and pld.tv_bound <= delta) \
            or pld.purely_atomic:
        return C._epsilon_bounds(pld, delta, rtol)  # (no contour: closed cases, exact atoms)
    d_fin = delta - pld.p_inf
    hi, c_ch = chernoff_eps_grid(pld, d_fin, warm.get("c_chernoff"))
    warm["c_chernoff"] = c_ch
    # the design point of the plan: the previous members' answers extrapolated to this one (the
    # standalone query starts from the Chernoff bound, often far above: a plan for a larger eps
    # underestimates the aliasing at the answer), kept below the Chernoff bound
    size = float(sum(pld._counts))
    eps_ref = min(hi, _extrapolate(warm.get("history", []), size))
    details: dict = {}
    result = None
    for i in range(3):
        grid = _family_grid(pld, eps_ref, math.log(delta) + math.log(rtol) - math.log(8.0), c_ch, warm,
                            rtol, i == 0)
        comb = C._memo(lambda e, _g=grid: C._combine(pld, _g, e))

        def up_fn(e, _c=comb):
            return _c(e)[2]

        def lo_fn(e, _c=comb):
            return _c(e)[1]

        try:
            result = C._solve(pld, delta, up_fn, lo_fn, hi, details, slope=c_ch)
        except FloatingPointError:
            if result is not None:
                break
            raise
        details = {**comb(result.upper)[3], "chernoff_eps": hi}
        if result.upper - result.lower <= 1e3 * rtol * max(result.upper, 1e-12) or result.upper == 0.0:
            break
        if pld.work(grid.u_trunc, grid.h) > C.WORK_BUDGET / 4:
            break
        eps_ref = result.upper
    assert result is not None
    upper = min(result.upper, hi + pld.mgf_err_at(c_ch) / c_ch)
    if math.isfinite(upper):
        warm["history"] = [*warm.get("history", [])[-2:], (size, upper)]
    return C.EpsilonBounds(delta, min(result.estimate, upper), min(result.lower, upper), upper,
                           pld.direction, {**result.details, **details})
