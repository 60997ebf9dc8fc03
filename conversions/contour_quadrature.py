"""Characteristic-function route (:mod:`conversions.contour`): the quadrature plan (line c, step h,
truncation U), the node grid and the certified combination of its error terms (module docstring of
:mod:`conversions.contour`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mechanisms._numerics import log_expm1_float as _log_expm1

from . import atoms as atoms_mod
from . import pieces as pieces_mod
from ._kernels import PHASE_ANCHOR, grid_assemble, trapezoid_sum
from .contour_pld import ComposedPLD
from .contour_terms import (
    _U64,
    DEFER_PREDICTED_REL,
    MAX_NODES,
    WORK_BUDGET,
    WouldBeCapped,
    _log_kappa,
)


def _check_plan(pld: ComposedPLD, plan: _Plan, skip_if_capped: bool, rtol: float) -> _Plan:
    if skip_if_capped and plan.log_short + math.log(rtol) > math.log(DEFER_PREDICTED_REL):
        raise WouldBeCapped(f"the contour cannot reach its accuracy within the work cap ({plan.nodes} "
                            "nodes planned)")
    return plan


@dataclass(frozen=True)
class _Plan:
    c: float
    h: float
    cp: float
    u: float
    h_from_upper: bool = False  # the step is set by the aliasing of the lines above c
    log_short: float = -math.inf  # log(truncation bound / its target) at u: > 0 when the caps bound u

    @property
    def nodes(self) -> int:
        return int(math.ceil(self.u / self.h)) + 1


def _aliasing_step(x: float) -> float:
    """Smallest y with e^y - 1 >= e^x (so a geometric aliasing sum stays below the target)."""
    return math.log1p(math.exp(x)) if x < 700 else x


def _plan(pld: ComposedPLD, c: float, eps_ref: float, log_target: float,
          budget: float = WORK_BUDGET) -> _Plan | None:
    """Step h (aliasing bound) and truncation U (envelope bound) for the line Re s = c; U stops doubling
    before the line's work would exceed ``budget`` (units of ``ComposedPLD.work``)."""
    lm = pld.log_mgf_real
    shift = lm(c)
    if not math.isfinite(shift):
        return None
    lam = log_target - math.log(4.0)
    best = None
    # far lines matter for bounded losses, where log M(c') grows only linearly and allows large steps
    cands = ({c * f for f in (1.25, 1.5, 2.0, 3.0, 10.0, 30.0)}
             | {c + d for d in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 32.0, 128.0, 512.0)})
    for cp in sorted(cands):
        if cp >= pld.max_order:
            continue
        b = _log_kappa(cp) + lm(cp) - cp * eps_ref
        if not math.isfinite(b):
            continue
        h = 2.0 * math.pi * (cp - c) / max(_aliasing_step(b - lam), 1e-12)
        if best is None or h > best[0]:
            best = (h, cp)
    if best is None:
        return None
    h_up, cp = best
    h_low1 = 2 * math.pi * c / max(_aliasing_step(pld.log_mass_r - lam), 1e-12)
    b2 = _log_kappa(c / 2) + lm(c / 2) - c * eps_ref / 2
    h_low2 = math.pi * c / max(_aliasing_step(b2 - lam), 1e-12)
    h = min(h_up, max(h_low1, h_low2))
    scale_log = shift - c * eps_ref
    u = max(8 * h, 1e-3)
    while True:
        log_t = pld.log_env_r(c, u) - shift - math.log(math.pi * u) + scale_log
        if log_t <= lam or 2.0 * u / h > MAX_NODES or pld.work(2.0 * u, h, c) > budget:
            break  # (the next doubling would exceed the node or work cap: stop below it)
        u *= 2.0
    return _Plan(c, h, cp, min(u, h * MAX_NODES), h_up < max(h_low1, h_low2), log_t - lam)


def _best_plan(pld: ComposedPLD, eps_ref: float, log_target: float,
               c_hint: float | None = None, error_floor: bool = False,
               budget: float = WORK_BUDGET) -> _Plan:
    """:func:`_fewest_nodes_plan`; with ``error_floor``, moved up to a line where the declared MGF errors
    can meet the target (:func:`_above_error_floor`: for far tails, where the floor is near delta
    itself; at ordinary targets, far below the accuracy asked for, it would only cost nodes)."""
    plan = _fewest_nodes_plan(pld, eps_ref, log_target, c_hint, budget)
    return _above_error_floor(pld, plan, eps_ref, log_target, budget) if error_floor else plan


def _above_error_floor(pld: ComposedPLD, plan: _Plan, eps_ref: float, log_target: float,
                       budget: float = WORK_BUDGET) -> _Plan:
    """The declared MGF errors limit the accuracy on the line Re s = c to about
    expm1(err(c)) M(c) e^{-c eps} / (2c) (the nodes' kernel weights 1/|s (s + 1)| sum to at most
    ~1/(2c)): far below the line's Chernoff scale (far tails, many steps of a numerical kernel) that
    floor can exceed the target, and then no node count helps.  Higher lines lower it while
    log M(c) - c eps falls: the first of the lines c 2^(k/4), k = 1..12, whose floor meets the target,
    else the lowest floor (the plan unchanged when its floor already meets the target)."""
    lam = log_target - math.log(4.0)

    def floor(c: float) -> float:
        err = math.expm1(min(pld.mgf_err_at(c, plan.u), 700.0))
        lm = pld.log_mgf_real(c)
        if not err > 0.0 or not math.isfinite(lm):
            return -math.inf if err <= 0.0 else math.inf
        return math.log(err) + lm - c * eps_ref - math.log(2.0 * c)

    f0 = floor(plan.c)
    if f0 <= lam:
        return plan
    best_c, best_f = plan.c, f0
    for k in range(1, 13):
        c = plan.c * 2.0 ** (k / 4.0)
        if c >= pld.max_order * 0.98:
            break
        f = floor(c)
        if f < best_f:
            best_c, best_f = c, f
        if f <= lam or f > best_f + 1.0:
            break
    if best_c == plan.c:
        return plan
    p = _plan(pld, best_c, eps_ref, log_target, budget)
    return plan if p is None else p


def _fewest_nodes_plan(pld: ComposedPLD, eps_ref: float, log_target: float,
                       c_hint: float | None = None, budget: float = WORK_BUDGET) -> _Plan:
    """Among lines near the saddle point, the one needing the fewest nodes.

    Lines far above the saddle make the integrand much larger than delta (floating-point error grows
    with that ratio), so only lines whose integrand scale is within 1e4 of the saddle's are considered.
    ``c_hint`` (e.g. the Chernoff-optimal line) starts a local saddle search instead of a global one.
    """
    c0 = pld.saddle(eps_ref) if c_hint is None else pld.saddle_near(eps_ref, c_hint)
    # snap to a 2^(1/4) grid: lines a few % off the saddle are as good, and a refinement pass at a
    # nearby eps then reuses the per-line envelope constants (costly for numerical mechanisms)
    c_snap = 2.0 ** (round(4.0 * math.log2(c0)) / 4.0)
    if c_snap < pld.max_order * 0.98:
        c0 = c_snap

    def g(c: float) -> float:
        return pld.log_mgf_real(c) - c * eps_ref - math.log(c * (c + 1.0))

    g0 = g(c0)
    best = _plan(pld, c0, eps_ref, log_target, budget)
    if best is not None and best.nodes > 128 and best.h_from_upper:
        # the aliasing step shrinks fast above the saddle when M grows steeply (subsampled Gaussian
        # at small q): when that bound sets the step, one or two grid steps below often need far
        # fewer nodes
        for f in (2.0 ** -0.25, 2.0 ** -0.5):
            c = c0 * f
            if g(c) - g0 > math.log(1e4):
                break
            p = _plan(pld, c, eps_ref, log_target, budget)
            if p is None or p.nodes >= best.nodes:
                break
            best = p
    if best is not None and best.nodes <= 2048 and pld.work(best.u, best.h, best.c) <= budget / 2:
        return best  # the line is cheap and uncapped: skip the wider search (each plan costs envelopes)
    for c in sorted({c0 * f for f in (2.0, 4.0)} | {1.0, 2.0, 4.0}):
        if c <= 0 or c >= pld.max_order or (c != c0 and g(c) - g0 > math.log(1e4)):
            continue
        p = _plan(pld, c, eps_ref, log_target, budget)
        if p is not None and (best is None or p.nodes < best.nodes):
            best = p
    if best is None:
        raise ValueError("the composed MGF is infinite just above the contour; cannot invert")
    return best


class _Grid:
    """Nodes and pre-computed integrand values on the line Re s = c (independent of eps)."""

    def __init__(self, pld: ComposedPLD, plan: _Plan):
        self.pld = pld
        c = self.c = plan.c
        self.h, self.cp = plan.h, plan.cp
        self.capped = plan.log_short > 0.0  # (the work or node cap, not the target, set U)
        lm = pld.log_mgf_real
        self.shift = lm(c)
        self.log_kappa_mcp = _log_kappa(self.cp) + lm(self.cp)
        self.log_mass_r = pld.log_mass_r
        self.log_kappa_mhalf = _log_kappa(c / 2) + lm(c / 2)
        n = plan.nodes - 1
        self.t = self.h * np.arange(n + 1, dtype=float)
        self.u_trunc = float(self.t[-1] + self.h)  # first omitted node
        s = c + 1j * self.t
        log_a = pld.log_atoms_j(s) if pld.has_atoms else None
        log_c = pld.log_pieces_j(s) if pld.closed_terms else None
        n_j = len(pld.entries)
        lm = np.empty((n_j, s.size), dtype=complex)
        for j, v in enumerate(pld.log_mgf_j(s, log_a, log_c)):
            lm[j] = v
        # R = M - A - F in one pass (rounding is relative to the terms' moduli, not the difference)
        self.r_re, self.r_im = np.empty(s.size), np.empty(s.size)
        counts = np.asarray(pld._counts, dtype=float)
        if pld.has_atoms:
            la = np.zeros((n_j, s.size), dtype=complex)
            for j, v in enumerate(log_a):
                la[j] = v
            lc = np.zeros((n_j, s.size if log_c else 1), dtype=complex)
            for j, v in (log_c or {}).items():
                lc[j] = v
            mag_max, sum_kern, sum_kern_mag = grid_assemble(
                lm, counts, float(self.shift), float(c), self.t, self.r_re, self.r_im, la, lc,
                *pld.term_matrices)
        else:  # (no atoms: no closed-form terms either; the kernel without its atoms part)
            mag_max, sum_kern, sum_kern_mag = grid_assemble(
                lm, counts, float(self.shift), float(c), self.t, self.r_re, self.r_im)
        self.sum_kern = sum_kern * self.h / math.pi
        self.sum_kern_mag = sum_kern_mag * self.h / math.pi
        self.log_env_u = pld.log_env_r(c, self.u_trunc)
        self.mgf_err = pld.mgf_err_at(c, float(self.t[-1]))
        self.node_log_err = 4 * _U64 * (mag_max + abs(self.shift) + 10.0) + self.mgf_err
        if not np.all(np.isfinite(self.r_re)) or not np.all(np.isfinite(self.r_im)):
            raise FloatingPointError("non-finite log-MGF values on the contour")

    def delta_r(self, eps: float) -> tuple[float, float, float, float]:
        """(log scale, S, lower error, upper error) with delta_R in [e^scale (S - lo), e^scale (S + up)]."""
        c, h = self.c, self.h
        s, sa = trapezoid_sum(self.t, self.r_re, self.r_im, c, float(eps))
        s *= h / math.pi
        sa *= h / math.pi
        log_scale = self.shift - c * eps
        trunc = math.exp(self.log_env_u - self.shift) / (math.pi * self.u_trunc)
        # aliasing, relative to e^{log_scale}
        a_up = math.exp(min(self.log_kappa_mcp - self.cp * eps - log_scale
                            - _log_expm1(2 * math.pi * (self.cp - c) / h), 700))
        a_lo1 = self.log_mass_r - log_scale - _log_expm1(2 * math.pi * c / h)
        a_lo2 = self.log_kappa_mhalf - c * eps / 2 - log_scale - _log_expm1(math.pi * c / h)
        a_lo = math.exp(min(min(a_lo1, a_lo2), 700))
        # floating point: every node term carries a relative error (exponent and phase rounding,
        # summation) w.r.t. the magnitudes before the M - A subtraction; the mechanisms' declared
        # log-MGF errors are relative to M(Re s), i.e. bounded by expm1(err) on the scaled line.
        phase = _U64 * 4 * (self.u_trunc * abs(eps) + abs(c * eps))
        # (exponents capped at 700: beyond, the error bound is astronomically large, i.e. the bracket
        # becomes the trivial [0, 1] instead of an OverflowError, e.g. for GNMax(sigma=1e-8))
        rel = (math.expm1(min(self.node_log_err - self.mgf_err + phase, 700.0))
               + _U64 * (self.t.size + 4.0 + 4.0 * PHASE_ANCHOR))  # (+ the phase rotations)
        fp = (self.sum_kern_mag * rel + self.sum_kern * math.expm1(min(self.mgf_err, 700.0))
              + sa * 4 * _U64)
        return log_scale, s, trunc + a_up + a_lo + fp, trunc + fp


def _exp_up(lx: float) -> float:
    """An upper bound on e^{lx} (true value of the float lx), capped at 1: exp's rounding (< 1 ulp, also
    for subnormal results) covered by a relative margin and one step up."""
    if lx >= 0.0:
        return 1.0
    if lx == -math.inf:
        return 0.0
    return min(1.0, math.nextafter(math.exp(lx) * (1.0 + 4.0 * _U64), math.inf))


def _exp_dn(lx: float) -> float:
    """A lower bound on e^{lx}, in [0, 1]."""
    if lx == -math.inf:
        return 0.0
    return max(0.0, math.nextafter(math.exp(min(lx, 0.0)) * (1.0 - 4.0 * _U64), 0.0))


def _add_up(*xs: float) -> float:
    """An upper bound on the exact sum of non-negative floats (each addition rounds by <= 1/2 ulp)."""
    tot = math.fsum(xs)
    return math.nextafter(tot, math.inf) if tot > 0.0 else 0.0


def _combine(pld: ComposedPLD, grid: _Grid | None, eps: float) -> tuple[float, float, float, dict]:
    """(estimate, lower, upper) of delta(eps) for one direction.

    delta = p_inf + delta_atoms (exact) + delta_R (contour, bracketed); delta_R >= 0 always.  Every
    floating-point step rounds the upper end up and the lower end down (``_exp_up``, ``_exp_dn``,
    the atoms' ``log_delta_bounds``); lower <= upper <= 1 always.
    """
    def unscale(x: float, up: bool) -> float:  # x * e^{log_scale} in [0, 1], rounded up or down
        if x <= 0.0:
            return 0.0
        lx = math.log(x) + log_scale
        m = 2.0 * _U64 * (abs(math.log(x)) + abs(log_scale) + 1.0)  # rounding of the log and the sum
        return _exp_up(lx + m) if up else _exp_dn(lx - m)

    log_floor = -math.inf
    if grid is not None:
        log_scale, s, lo_err, up_err = grid.delta_r(eps)
        r_est, r_up, r_lo = unscale(s, False), unscale(s + up_err, True), unscale(s - lo_err, False)
        # exact parts whose whole mass is below e^-32 (1.3e-14) of the contour part are not
        # integrated (nor enumerated): their delta, between 0 and that mass, widens the bracket on the
        # upper side by a relative 1e-14 at most per part, far below the target accuracy
        if r_up > 0.0:
            log_floor = math.log(r_up) - 32.0
    # p_inf = -expm1(log_keep): log_keep is a sum of k_j log1p(-p_j) (a few ulps each, relative)
    p_up = p_lo = base = pld.p_inf
    if base > 0.0:
        p_up = base * (1.0 + 8.0 * _U64 * (len(pld.entries) + 2.0))
        p_lo = base * (1.0 - 8.0 * _U64 * (len(pld.entries) + 2.0))
    base_up, base_lo = [p_up], [p_lo]
    extra_up = extra_lo = 0.0
    if pld.atoms is not None and pld.atoms_exact:
        if pld.atoms_log_mass < log_floor:
            extra_up = _exp_up(pld.atoms_log_mass + pld.atoms.log_err + 1e-12)
        else:
            la = atoms_mod.log_delta(pld.atoms, eps)
            if la > -math.inf:
                base += math.exp(la)
            # exact atoms bracketed: losses within loss_err (and merged ones moved up by merge_shift),
            # log-masses within log_err, the kernel's rounding
            a_lo, a_up = atoms_mod.log_delta_bounds(pld.atoms, eps)
            base_up.append(_exp_up(a_up))
            base_lo.append(_exp_dn(a_lo))
        # pruned atoms (upper side)
        extra_up += pld.atoms.dropped_mass
        if pld.closed_terms:
            lf, f_up, _ = pieces_mod.log_delta(pld.closed_terms, eps, log_floor, side=1)
            lf_lo, _, f_lo = pieces_mod.log_delta(pld.closed_terms, eps, log_floor, side=-1)
            if lf > -math.inf:
                base += math.exp(lf)
                base_up.append(_exp_up(lf))
            if lf_lo > -math.inf:
                base_lo.append(_exp_dn(lf_lo))
            extra_up += f_up
            extra_lo += f_lo
    details: dict = {}
    b_up = _add_up(*base_up, extra_up)
    b_lo = math.nextafter(max(math.fsum(base_lo) - extra_lo, 0.0), 0.0)
    if grid is None:
        upper = min(1.0, b_up)
        lower = min(b_lo, upper)
        return min(max(base, lower), upper), lower, upper, details
    details = {"c": grid.c, "h": grid.h, "nodes": int(grid.t.size), "U": grid.u_trunc,
               "error_rel": (r_up - r_lo) / max(base + r_est, 1e-300), "truncation_capped": grid.capped}
    upper = min(1.0, _add_up(b_up, r_up))
    lower = min(math.nextafter(b_lo + r_lo, 0.0) if b_lo + r_lo > 0.0 else 0.0, upper)
    est = min(max(base + r_est, lower), upper)
    return est, lower, upper, details
