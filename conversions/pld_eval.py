"""Discretised PLD (:mod:`conversions.pld`), part 4: one composition (grid, tilt, window: ``_run``),
delta_up(eps) / delta_lo(eps) from its composed vector (suffix sums), and the certified eps(delta)
bracket by bisection.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from numba import njit

from .contour_terms import query_clock
from .pld_fft import _compose, _Composed, _scaled
from .pld_grid import U, _lo_eta, _plan
from .pld_tilt import _blocks, _saddle, _sp_epsilon


@njit(cache=True)
def _suffix_kernel(nu, fa_blk, fb_blk, fa_in, fb_in, first_blk):  # pragma: no cover - compiled
    """Suffix sums of a = nu fa, b = nu fb (fa = fa_blk[block] fa_in[offset], 256-entry blocks; blocks
    below first_blk count as 0) and the suffix sums of |a| and |b|, all from each index up.  One pass
    from the top; recursive summation (error <= gamma_N x the sums of moduli from that index up)."""
    n = nu.shape[0]
    nb = fa_blk.shape[0]
    ga = np.zeros(n)
    gb = np.zeros(n)
    abs_a = np.zeros(n)
    abs_b = np.zeros(n)
    acc_a = 0.0
    acc_b = 0.0
    sa = 0.0
    sb = 0.0
    for blk in range(nb - 1, -1, -1):
        start = blk * 256
        stop = min(n, start + 256)
        for i in range(stop - 1, start - 1, -1):
            if blk >= first_blk:
                a = nu[i] * (fa_blk[blk] * fa_in[i - start])
                b = nu[i] * (fb_blk[blk] * fb_in[i - start])
                acc_a += a
                acc_b += b
                sa += abs(a)
                sb += abs(b)
            ga[i] = acc_a
            gb[i] = acc_b
            abs_a[i] = sa
            abs_b[i] = sb
    return ga, gb, abs_a, abs_b



class _Evaluator:
    """delta_up(eps) and delta_lo(eps) from one composed vector (suffix sums, O(log N) per query).

    With a_s = nu_s e^{-theta (s - r)}, b_s = a_s e^{-(s - r)} (r = eps_ref, a fixed reference):
    sum_{s > eps} (1 - e^{eps - s}) mu(s) = C e^{-theta r} [A(eps) - e^{eps - r} B(eps)],
    A, B the suffix sums over s > eps.  Rounding: the exponentials (relative u (|exponent| + 4) each,
    bounded by the largest exponent), the suffix sums (gamma_N times the sum of moduli).
    """

    def __init__(self, comp: _Composed, eps_ref: float):
        self.c = comp
        n = comp.nu.size
        s = (comp.first + np.arange(n)) * comp.step  # exact lattice losses
        self.s = s
        th = comp.theta
        if abs(comp.log_c - th * eps_ref) > 300.0:  # keep C e^{-theta r} representable
            eps_ref = comp.log_c / th
        self.eps_ref = eps_ref
        # entries with an exponent above 700 cannot be represented: eps below s_min is not evaluable
        d0 = float(s[0]) - eps_ref
        # e^{-c (s - r)} on the lattice as (block factor) x (in-block factor), 256-entry blocks:
        # 2 exps per block instead of one per entry; each product has relative error <= 3u
        nb = -(-n // 256)
        j = np.arange(256) * comp.step
        blk = np.arange(nb) * (256 * comp.step) + d0
        bad = np.nonzero(-(th + 1.0) * blk > 700.0)[0]  # blocks whose factor would overflow
        first_ok = min(n, 256 * (int(bad[-1]) + 1)) if bad.size else 0
        fa_blk = np.exp(np.minimum(-th * blk, 700.0))
        fb_blk = np.exp(np.minimum(-(th + 1.0) * blk, 700.0))
        with np.errstate(under="ignore"):
            fa_in = np.exp(-th * j)
            fb_in = np.exp(-(th + 1.0) * j)
        self.ga, self.gb, abs_a, abs_b = _suffix_kernel(comp.nu, fa_blk, fb_blk, fa_in, fb_in,
                                                        first_ok // 256)
        abs_a *= 1.0 + 4.0 * n * U  # (in place: two vectors of the window's length)
        abs_b *= 1.0 + 4.0 * n * U
        self.abs_a, self.abs_b = abs_a, abs_b
        smax = float(np.max(np.abs(s))) + abs(eps_ref)
        self.rel = U * (2 * abs(comp.log_c) + 2 * (th + 1) * smax + 2 * th * abs(eps_ref) + 24.0) + 2 * n * U
        self.lo_ok = float(s[first_ok]) if first_ok < n else math.inf  # eps >= lo_ok is evaluable
        self.shift_lo = comp.t_total * comp.step if math.isnan(comp.shift_lo) else comp.shift_lo
        self.hi_ok = float(s[-1])
        self.whole = None  # an evaluator of the whole-cell vector: a second lower end (``_run``)

    def _core(self, eps: float, upper: bool) -> tuple[float, float]:
        """(window sum over s > eps of (1 - e^{eps - s}) mu(s), its rounding bound); eps >= lo_ok."""
        c = self.c
        k = int(np.searchsorted(self.s, eps, side="right"))  # first s > eps
        if k >= self.s.size:
            return 0.0, 0.0
        lead = c.log_c - c.theta * self.eps_ref
        if lead > 700:
            return (math.inf, math.inf) if upper else (0.0, math.inf)
        scale = math.exp(lead)
        de = eps - self.eps_ref
        # (the moduli from k up, not from k's 256-block: below eps the FFT's noise floor times
        # e^{theta (r - s)} can dwarf the sum at a large tilt, theta = 300 near a support's top)
        mag_a, mag_b = float(self.abs_a[k]), float(self.abs_b[k])
        if de > 700:  # e^{eps - r} B overflows: bound (1 - e^{eps - s}) by 1 (upper) or 0 (lower)
            val = float(self.ga[k]) if upper else 0.0
            return val * scale, mag_a * self.rel * scale
        e1 = math.exp(de)
        val = float(self.ga[k]) - e1 * float(self.gb[k])
        mag = mag_a + e1 * mag_b
        return val * scale, (mag * self.rel + 4 * U * abs(val)) * scale

    def _scale(self, eps: float) -> float:
        """C e^{-theta eps}: converts tilted l1 errors into delta errors at eps."""
        x = self.c.log_c - self.c.theta * eps
        return math.exp(x) if x < 700 else math.inf

    def upper(self, eps: float) -> float:
        c = self.c
        if eps < self.lo_ok:  # mass below the window could lie above eps: nothing certified here
            return 1.0
        core, rnd = self._core(eps, True)
        err = _scaled(self._scale(eps), c.c_model + c.c_fft)  # (tilted l1 errors in delta units)
        out = math.exp(c.log_out_up) if c.log_out_up > -math.inf else 0.0
        up = c.p_inf_up + max(core, 0.0) + rnd + err + out
        return min(1.0, up * (1 + 1e-12) + 1e-300)

    def lower(self, eps: float) -> float:
        c = self.c
        # the lower coupling is the same vector shifted by T Delta, or (Chernoff bound of the split's
        # deviations, ``pld_grid._lo_log_tail``) delta >= delta_Y(eps + eta) - beta.  Round the sum up.
        e2 = math.nextafter(eps + self.shift_lo, math.inf)
        floor = -math.expm1(eps) if eps < 0 else 0.0
        if e2 < self.lo_ok:
            return max(c.p_inf, floor * (1 - 1e-15))
        core, rnd = self._core(e2, False)
        sc = self._scale(e2)
        junk_hi = math.exp(c.log_junk_hi) if c.log_junk_hi > -math.inf else 0.0
        below = 0.0
        if c.log_junk_lo > -math.inf:  # (in logs: C e^{-theta eps} may overflow where the junk is tiny)
            x = c.log_c - c.theta * e2 + c.log_junk_lo
            below = math.exp(x) * (1 + 1e-12) if x < 709.0 else math.inf
        if c.log_damp > -math.inf:
            below = min(below, 1.01 * math.exp(c.log_damp))
        err = _scaled(sc, c.c_model + c.c_fft + c.c_cell0 + junk_hi * (1 + 1e-10)) + below * (1 + 1e-10)
        lo = c.p_inf + core - rnd - err - c.beta_lo
        lo = lo * (1 - 1e-12) if lo > 0 else lo
        if self.whole is not None:  # (both are certified lower ends)
            lo = max(lo, self.whole.lower(eps))
        return max(lo, floor * (1 - 1e-15))

    def evaluable(self, eps: float) -> bool:
        return self.lo_ok <= eps <= self.hi_ok


def _solve(ev: _Evaluator, delta: float) -> tuple[float, float]:
    """(lower, upper) eps >= 0 from one evaluator.

    upper: a point with delta_up(upper) <= delta (+inf if none is certified here); delta_up is
    non-increasing, so the smallest such point is found by bisection.  lower: a point with
    delta_lo(lower) > delta (0 if none): delta_lo is not monotone (its error terms grow like
    e^{-theta eps} at small eps), so a grid of 128 points is scanned for the largest such point, then
    refined by bisection towards the next grid point.  Both functions cost O(log N) per call.
    """
    lo_ok = max(ev.lo_ok + 1e-14 * (1 + abs(ev.lo_ok)), 0.0)
    # (the lower end evaluates the vector at eps + shift_lo: its window ends shift_lo below the upper's)
    return _solve_between(ev.upper, ev.lower, delta, lo_ok, ev.hi_ok, ev.hi_ok - ev.shift_lo)


def _solve_between(delta_up, delta_lo, delta: float, lo_ok: float, hi_ok: float,
                   hi_lo: float | None = None) -> tuple[float, float]:
    """``_solve`` for any certified pair of functions eps -> delta_up(eps) (non-increasing) and
    eps -> delta_lo(eps), evaluable on [lo_ok, hi_ok] (the lower end on [lo_ok, hi_lo] when given; also
    the large-step split's sums)."""
    hi_lo = hi_ok if hi_lo is None else min(hi_lo, hi_ok)

    def f_up(e):
        return delta_up(e) - delta

    def f_lo(e):
        return delta_lo(e) - delta

    if f_up(0.0) <= 0.0:
        upper = 0.0
    elif hi_ok <= lo_ok or f_up(hi_ok) > 0:
        upper = math.inf
    elif f_up(lo_ok) <= 0:
        upper = lo_ok  # certified; the true root may be lower (not evaluable on this window)
    else:
        upper = _bisect(f_up, lo_ok, hi_ok, True)
    lower = 0.0
    top = min(hi_lo, upper) if math.isfinite(upper) else hi_lo
    if top > lo_ok:
        grid = np.linspace(lo_ok, top, 129)
        vals = np.array([f_lo(float(e)) for e in grid])
        pos = np.nonzero(vals > 0)[0]
        if pos.size:
            i = int(pos[-1])
            lower = float(grid[i])
            if i + 1 < grid.size:
                lower = _bisect(f_lo, lower, float(grid[i + 1]), False)
    return lower, upper


def _bisect(f, a: float, b: float, want_right: bool) -> float:
    """Bisection keeping f(a) > 0 and f(b) <= 0: returns b (f <= 0) for want_right, else a (f > 0);
    stops at relative width 1e-12 (the functions are cheap)."""
    for _ in range(200):
        m = 0.5 * (a + b)
        if m <= a or m >= b:
            break
        if f(m) > 0:  # want_right: keep f(b) <= 0; else keep f(a) > 0 (strict: delta_lo(a) > delta)
            a = m
        else:
            b = m
        if b - a <= 1e-12 * max(1.0, abs(b)):
            break
    return b if want_right else a


def _run(entries, direction, width, ranges, eps_tilt, max_points, rtol, a_loss, delta_ref, theta_fb,
         delta_sp=None, deadline=None, scale=1.0):
    """One composition: grid, tilt (saddle at eps_tilt, or the Chernoff order theta_fb when eps_tilt is
    None or beyond the support), window from a_loss up.  With ``delta_sp``, the tilt point is the
    saddle-point estimate of eps(delta_sp) from this grid when there is one (``_sp_epsilon``).  With a
    ``deadline`` (a ``query_clock()`` value), None once it has passed after a grid is built (a pass can
    rebuild its grid up to eight times: the Chernoff lower end's refinement, a window too long);
    the caller keeps the bracket it has.  ``scale``: the factor the caller multiplies this delta by
    (the split's binomial coefficients): the lower end's Chernoff term beta is divided by it."""

    def late() -> bool:
        return deadline is not None and query_clock() > deadline

    log_dref = math.log(max(delta_ref, 1e-300))
    # the lower end by the Chernoff bound of the split's deviations when every mechanism bounds its
    # splits from both sides and sqrt(T) beats T (eta_lo ~ Delta sqrt(T log(1/beta) / 2))
    tot = sum(k for _, k in entries)
    log_beta = math.log(max(delta_ref, 1e-300) * rtol * 0.1) - math.log(scale)
    div = min(float(tot), 0.75 * math.sqrt(tot * -log_beta)) if _split_known(entries, direction) else None
    t_compose = 0.0  # time in the composition (FFT) proper; the rest (cells, tilt) scales with the grid
    t_start = query_clock()
    for attempt in range(4):
        plan = _plan(entries, direction, width, ranges, max_points, div)
        if late():
            return None
        if div is not None and div < tot and not plan.capped:
            # the split's biases (second order in Delta) can dominate eta when the loss is strongly
            # curved: refine Delta once (at most to the shift T Delta)
            eta = _lo_eta(plan.steps, plan.step, log_beta)
            if eta > 1.2 * width:
                div = min(div * eta / (0.9 * width), float(tot))
                plan = _plan(entries, direction, width, ranges, max_points, div)
                if late():
                    return None
        blocks_list = [_blocks(st, plan.step) for st in plan.steps]
        theta, ref = math.nan, a_loss
        sp = _sp_epsilon(blocks_list, [st.k for st in plan.steps], delta_sp) if delta_sp else math.nan
        if math.isfinite(sp) and sp > a_loss:
            eps_tilt = sp
        if eps_tilt is not None:
            theta, ref = _saddle(blocks_list, [st.k for st in plan.steps], eps_tilt), eps_tilt
        if not math.isfinite(theta):
            theta, ref = theta_fb, a_loss
        # a smaller tilt shortens the window when the tilted upper tail is long (near-atomic steps);
        # accept it while it amplifies the (tiny) tilted error terms by at most 1e5 relative to delta
        need, _ = _compose(plan, theta, max_points, rtol * 1e-3, a_loss, log_dref, plan_only=True,
                           blocks=blocks_list)
        if need > (1 << 16):
            th = theta
            for _ in range(4):
                th *= 0.5
                need2, log_c2 = _compose(plan, th, max_points, rtol * 1e-3, a_loss, log_dref,
                                         plan_only=True, blocks=blocks_list)
                if log_c2 - th * max(a_loss, 0.0) - log_dref > math.log(1e5) or need2 > 0.8 * need:
                    break
                theta, need = th, need2
        if need > max_points and attempt < 3:
            width *= 1.2 * need / max_points  # the window is too long: coarser grid, wider bracket
            continue
        if late():
            return None
        t0 = query_clock()
        comp = _compose(plan, theta, max_points, rtol * 1e-3, a_loss, log_dref, regrid=attempt < 3,
                        blocks=blocks_list)
        t_compose += query_clock() - t0
        if isinstance(comp, _Composed):
            comp = dataclasses.replace(comp, capped=comp.capped or attempt > 0)
            eta = _lo_eta(plan.steps, plan.step, log_beta)
            if eta < tot * plan.step:
                comp = dataclasses.replace(comp, shift_lo=eta, beta_lo=math.exp(log_beta) * (1 + 1e-12))
            ev = _Evaluator(comp, ref)
            if (math.isnan(comp.shift_lo) or 2.0 * comp.shift_lo > tot * plan.step) \
                    and all(st.whole is not None for st in plan.steps):
                # the lower end T Delta below the split's vector is ~T Delta below the truth (the split
                # is exact to second order); the whole cells moved up give it ~T Delta / 2 below, which
                # also beats a Chernoff shift eta > T Delta / 2 (few steps)
                ev.whole = _whole_cells(plan, theta, max_points, rtol, a_loss, log_dref, ref)
            ev.blocks, ev.ks, ev.sp = blocks_list, [st.k for st in plan.steps], sp
            ev.t_grid = max(query_clock() - t_start - t_compose, 0.0)  # (the _Clock's grid part)
            return ev
        width *= 1.2 * comp / max_points  # the window was too long: coarser grid, wider bracket
    raise AssertionError("unreachable")


def _whole_cells(plan, theta, max_points, rtol, a_loss, log_dref, ref) -> _Evaluator | None:
    """The evaluator of the whole-cell round-up vectors on the same lattice and tilt (None when their
    window would need another grid): its lower end, delta_Y(eps + T Delta) with Y >= L the upper edge of
    every cell, is a second certified lower end, above the split's (Y_split <= Y_whole)."""
    steps = tuple(dataclasses.replace(st, m=st.whole[0], err=st.whole[1], lo_tail=None, whole=None)
                  for st in plan.steps)
    comp = _compose(dataclasses.replace(plan, steps=steps), theta, max_points, rtol * 1e-3, a_loss,
                    log_dref)
    return _Evaluator(comp, ref) if isinstance(comp, _Composed) else None


def _split_known(entries, direction: str) -> bool:
    """Every mechanism bounds its cells' splits from both sides (Q-masses or cell offsets)."""
    for m, _ in entries:
        try:
            fn = getattr(m, "pld_cell_q_masses", None)
            if fn is not None and fn(np.array([0.0, 1.0]), direction) is not None:
                continue
            if m.pld_cell_offsets(np.array([0.0, 1.0]), direction) is None:
                return False
        except Exception:  # noqa: BLE001 - no usable split bounds: the shift T Delta instead
            return False
    return True
