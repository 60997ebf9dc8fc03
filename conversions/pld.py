"""Certified discretised privacy-loss distribution (PLD): delta(eps) and eps(delta) by FFT composition.

Source: discretised PLDs composed by FFT in the style of Koskela, Jalko & Honkela 2020 (narrow brackets as
in Doroshenko et al. 2022 and Gopi, Lee & Wutschitz 2021), with our own coupling argument and error
analysis, written out in docs/derivations/discretised-pld.md.
Neighbouring relation: whatever the mechanisms' dominating pairs encode (add/remove for the Poisson-
subsampled ones); one ``direction`` per call.  Result: a rigorous bracket (lower <= truth <= upper).

Identity.  delta(eps) = P(S = inf) + E_P[f_eps(S); S finite], f_eps(x) = (1 - e^{eps - x})_+, with
S = sum of the steps' losses L (independent under P).  f_eps is non-decreasing.

Discretisation (one lattice y = i Delta for every entry, Delta = c 2^e with c in {1, 1.25, 1.5, 1.75},
so every edge i Delta is an exact float).  For entry j the cells (e_{i-1}, e_i] of the grid
e_i = (lo_j + i) Delta, i = 0..n_j - 1, get their exact masses from ``pld_cell_masses``; the cell
(-inf, e_0] is cell 0 and the cell (e_{n-1}, inf) is the "top".
* Upper coupling Y_up ("connect the dots", Doroshenko et al. 2022, our own argument): cell i = (a, b]
  sends a fraction pi_i of its mass to b and the rest to a (cell 0 -> e_0, top -> +inf), with pi_i a
  certified upper bound on E[1 - e^{a - L} | cell] / (1 - e^{-Delta}) from the cell's Q-mass
  (``pld_cell_q_masses``: E_P[e^{a - L}; cell] = e^a Q(cell)) or its offset bounds; pi_i = 1 (the
  whole cell up, Y_up >= L) for mechanisms with neither.  The exact split keeps E[e^{-Y} | L] = e^{-L}
  and f_eps(s) = (1 - e^eps e^{-s})_+ is convex in e^{-s}, so by Jensen (a step at a time) and the
  monotonicity of f_eps, delta <= 1 - prod_j (1 - p_inf_j - top_j)^{k_j} + E[f_eps(S_up); all finite],
  now exact to second order in Delta (``pld_grid._dots_vector``).
* Lower coupling Y_lo = Y_up - Delta on cells 1..n-1, cell 0 and top dropped (f >= 0).  Y_lo <= L and
  S_lo = S_up - T Delta on the kept event, so delta >= p_inf_total + E[f_{eps + T Delta}(S_up); kept],
  and the composed kept measure differs from the composed U0 (all finite cells) by at most the hybrid
  bound below with the cell-0 masses (``corr0``).  With the split, S_up is ~T Delta / 2 lower than the
  whole cells moved up would give, so where this shift is in use, or the Chernoff shift eta below is
  larger than T Delta / 2 (few steps), the whole-cell vector is composed too (same lattice and tilt)
  and its own lower end is taken where higher (``pld_eval._whole_cells``; q = 0.02, sigma = 0.6, T = 10,
  delta = 1e-3: [1.4962286, 1.4968230] -> [1.4965212, 1.4968230]).

The lower end at sqrt(T) cost (used when every mechanism bounds its splits from both sides, by
Q-masses or cell offsets, and 0.75 sqrt(T log(1/beta)) < T; in the spirit of the mean-preserving
randomised rounding of Gopi, Lee & Wutschitz 2021, here for the split itself).  With D = Y_up - L,
S_up = S + sum D, and on the kept cells f_eps(S) >= f_{eps + eta}(S_up) where sum D <= eta:
    delta(eps) >= p_inf + E[f_{eps + eta}(S_up); cells 1..] - P(sum D > eta; cells 1..)
(0 <= f <= 1).  Given L, D takes two values Delta apart with a conditional mean b(L) in [0, Delta]
that is second order in Delta (``pld_grid._bias_moments``), so Chernoff with Hoeffding's lemma
(``_lo_log_tail``: log E e^{lam D} <= lam mu + lam^2 (Delta^2/8 + e^{|lam| Delta} V2/2), mu and V2
bounds on the mean and second moment of b) makes the tail <= beta = 0.1 rtol delta_ref at
eta ~ Delta sqrt(T log(1/beta) / 2) + T mean bias; the lower end uses min(eta, T Delta).  Only bias
bounds enter (in loss units): an error in the split never becomes a mass error multiplied by T.
(This replaced a nearest-point rounding with a certified mean, which needed a Chernoff bound on both
ends, ~ Delta sqrt(2 T log(1/beta)) in all: the same grid now gives half the bracket and an upper end
exact to second order.)

Tilting and FFT.  With theta > 0 near the saddle point of the query, every step vector is tilted:
x_i = m_i e^{theta y_i} / M_j (M_j = sum_i m_i e^{theta y_i}), so the composed measure is
mu(s) = C e^{-theta s Delta} nu(s), C = prod_j M_j^{k_j}, nu = *_j x_j^{*k_j}.  nu is computed by a
length-N real FFT (x_hat_j^{k_j} elementwise, products over entries): a cyclic convolution, i.e. nu
folded modulo N onto the window [A, A + N).  Error terms (all added on the safe side):
* out-of-window ("junk") mass: nu(S not in window) <= Chernoff bounds from the vectors' own exact MGFs
  (computed on 64-cell blocks, each bounded by the smaller of its top (t > 0) / bottom (t < 0) edge
  form and Hoeffding's lemma around the block's mean, which only increases the bound).  Upper: only
  the untilted mass above the window is missing (f <= 1);
  lower: the folded junk inside the window is subtracted, at most C e^{-theta eps} nu(outside).
* mechanisms' mass errors: per-cell bounds err_i, tilted: tau_j = sum_i err_i e^{theta y_i} / M_j (a scalar
  err is used as err * max_i e^{theta y_i} / M_j); plus the rounding of the tilt itself.  Hybrid argument
  (the composed error of T = sum k_j factors): for non-negative measures a_j, b_j with
  ||a_j - b_j||_1 <= tau_j and ||a_j||_1, ||b_j||_1 <= S_j + tau_j, replacing one factor at a time,
      || *_j a_j^{*k_j} - *_j b_j^{*k_j} ||_1 <= sum over the T replacements of
          ||a - b||_1 x prod of the other T - 1 norms   (Young: ||u * v||_1 <= ||u||_1 ||v||_1)
      <= prod_l (S_l + tau_l)^{k_l} x sum_j k_j tau_j / (S_j + tau_j).
  Since |f_eps(s) e^{-theta s Delta}| <= e^{-theta eps}, the delta error is <= C e^{-theta eps} x that.
* floating point of the FFT: the forward transform of a real vector x has ||err||_2 <= c_N ||F x||_2 =
  c_N sqrt(N) ||x||_2 with c_N = 16 u (log2 N + 4): Higham (2002, Thm 24.2) gives log2 N eta / (1 - ..)
  with eta = mu + gamma_4 (sqrt 2 + mu) ~ 7.7 u for radix 2 and accurate twiddles (mu <= 2u); we take
  8 u per stage, +4 stages for the real-input pre/post-processing and mixed radices, and a factor 2.
  Each |x_hat| <= S_j, so |(x_hat + e)^k - x_hat^k| <= k |e| (S_j + 2E)^{k-1} (E = ||e||_2 >= |e|), the
  power (binary powering, ``_cpow``) is rounded by <= |z^k| ((1 + sqrt5 u)^{k-1} - 1) (x1.01), the
  products across entries by 2 J u; the inverse transform adds c_N ||Z||_2 / sqrt N and Parseval turns
  the 2-norm error of the spectrum into sum_j |err_j| <= sqrt(N) ||err||_2 / sqrt(N) per output.
* the final sums: exp of the untilt exponent (relative u (|K| + 2 theta |s| Delta + 4)) and the
  cumulative sums (gamma_N of the sum of moduli).
"""

from __future__ import annotations

import math

import numpy as np

from mechanisms.base import check_direction

from .contour import DeltaBounds, EpsilonBounds
from .contour_terms import query_clock, time_left
from .pld_eval import _Evaluator, _run, _solve, _split_known
from .pld_grid import (
    DEFAULT_MAX_POINTS,
    _check_entries,
    _check_max_points,
    _check_rtol,
    _lattice_step,
    _log_kappa,
    _ranges,
)
from .pld_split import split_applicable, split_delta_bracket, split_epsilon_bracket, truncated_entries
from .pld_tail import TailEvaluator
from .pld_tilt import _saddle


# ----------------------------------------------------------------------------------------- public API
def pld_applicable(entries) -> bool:
    """True when every mechanism gives cell masses (tiny probe grid) and the list is non-empty."""
    try:
        ents = _check_entries(entries)
    except (TypeError, ValueError):
        return False
    if not ents:
        return False
    for m, _ in ents:
        if not getattr(m, "pld_available", False):
            return False
        try:
            res = m.pld_cell_masses(np.array([-1.0, 0.0, 1.0]), "remove")
        except Exception:  # noqa: BLE001 - any failure means "not applicable"
            return False
        if res is None:
            return False
    return True


def _chernoff_curve(entries, direction):
    """(c, K(c)) on a geometric grid of orders, K = sum_j k_j log M_j(c) (the mechanisms' exact MGFs)."""
    out = []
    for c in np.geomspace(1e-2, 300.0, 50):
        if any(c >= m.max_mgf_order for m, _ in entries):
            continue
        try:
            kc = sum(k * m.log_mgf_real(float(c), direction) for m, k in entries)
        except Exception:  # noqa: BLE001 - a failing order is skipped (estimates only)
            continue
        if math.isfinite(kc):
            out.append((float(c), kc))
    return out


def _chernoff_eps(curve, delta_fin: float) -> tuple[float, float]:
    """Rough (eps, order) with delta_fin = min_c kappa(c) M(c) e^{-c eps} (an estimate, never certified)."""
    best, arg = math.inf, 1.0
    for c, kc in curve:
        v = (kc + _log_kappa(c) - math.log(delta_fin)) / c
        if v < best:
            best, arg = v, c
    return max(best, 0.0) if math.isfinite(best) else 1.0, arg


def _chernoff_delta(curve, eps: float) -> tuple[float, float]:
    best, arg = 0.0, 1.0
    for c, kc in curve:
        v = kc + _log_kappa(c) - c * eps
        if v < best:
            best, arg = v, c
    return math.exp(best), arg


def _details(ev: _Evaluator, passes: int) -> dict:
    c = ev.c
    return {"route": "pld", "grid_step": c.step, "fft_points": c.n, "theta": c.theta,
            "width_loss": ev.shift_lo, "lower_shift": "T Delta" if math.isnan(c.shift_lo) else "chernoff",
            "err_model": c.c_model, "err_fft": c.c_fft,
            "log_junk_hi": c.log_junk_hi, "log_junk_lo": c.log_junk_lo,
            "log_damp": c.log_damp, "err_cell0": c.c_cell0, "p_inf_upper": c.p_inf_up,
            "log_out_upper": c.log_out_up, "capped": c.capped, "passes": passes}


class FirstPassAbandoned(Exception):
    """The deadline passed while the first pass built its grid: no bracket (``method="auto"``, the only
    caller with a deadline, has the other routes' brackets; the first pass of the sigma = 0.3 chains
    took 1.7-2.5 s for a bracket 7 % wide where the deferred contour gives 1 % in 0.12 s)."""


#: past the absolute target (eps < 0.1: 0.1 rtol), one refinement towards the relative one (rtol x eps)
#: runs if its predicted FFT window (``_growth``: an overestimate, by 3-12x in the regimes sweep) and
#: per-entry grid are at most these sizes: 4-12 ms at T = 10 in the sweep (a grid of 1.5e5 cells took
#: 21 ms, one of 3.6e5 at T = 100 took 100 ms); q = 1e-5, sigma = 0.4, T = 10: [0.0025123, 0.0025475]
#: -> [0.0025212, 0.0025214] in 4 ms
CHEAP_FFT = 1 << 20
CHEAP_CELLS = 1 << 17
#: an eps bracket within its target gets one more pass at this fraction of it when that pass is cheap
#: (``CHEAP_FFT``, ``CHEAP_CELLS``): the grid halves, and the upper end moves towards the truth
POLISH_FACTOR = 0.5


class _Clock:
    """The time limit of a PLD query: a refinement pass runs only if it is predicted to end before the
    deadline.  Its cost is predicted from the previous pass's two parts (``_run`` times them): the
    per-entry grids (cell masses and tilt blocks), which grow with the number of cells, and the
    composition, which grows with the FFT window (``_growth``); a capped grid does not grow.  Each
    growth counts at most 16x: a pass of a few ms is mostly fixed costs (at q = 1e-5, sigma = 0.4,
    T = 10 a 3 ms pass and an uncapped growth predicted 2.6 s for a pass that takes ~0.3 s), and a
    pass still building its grid at the deadline is abandoned anyway (``_run``).  ``stopped``
    records that a pass or the split was skipped."""

    def __init__(self, deadline: float | None):
        self.deadline = deadline
        self.last = 0.0
        self.last_grid = 0.0
        self.stopped = False

    def timed(self, fn, *args, **kwargs):
        t0 = query_clock()
        out = fn(*args, **kwargs)
        self.last = query_clock() - t0
        self.last_grid = min(getattr(out, "t_grid", self.last), self.last)
        return out

    def allows(self, growth: tuple[float, float] = (1.0, 1.0)) -> bool:
        """Whether a pass whose (FFT, grid) growth over the last one is ``growth`` fits the deadline."""
        if self.deadline is None:
            return True
        fft, grid = (min(max(g, 1.0), 16.0) for g in growth)
        cost = self.last_grid * grid + (self.last - self.last_grid) * 1.1 * fft
        ok = cost <= time_left(self.deadline)
        self.stopped = self.stopped or not ok
        return ok

    def mark(self, details: dict) -> dict:
        """``details`` with ``time_limit = True`` when a pass or the split was skipped (the caller,
        ``accountant.route_choice``, decides whether the bracket then needs a warning)."""
        if self.stopped:
            details["time_limit"] = True
        return details


def _growth(ev: _Evaluator, old_width: float, new_width: float, ranges,
            max_points: int) -> tuple[float, float]:
    """(FFT, grid) growth of a pass at bracket ``new_width`` after ``ev`` (at ``old_width``): the FFT
    window grows with the width ratio up to ``max_points``; the per-entry grids (~ span / step cells)
    with it too, up to the cap's step span / max_points (x 2: both steps are rounded down to the
    lattice c 2^e).  Measured: q = 1e-5, sigma = 0.4, T = 1000, delta = 1e-5: a second pass 280x finer
    on a window already near the cap took 3.5 s after a 0.15 s first pass (FFT growth alone: 1.6)."""
    if ev.c.capped:
        return 1.0, 1.0
    ratio = old_width / new_width
    span = max(hi - lo for lo, hi in ranges)
    return min(ratio, max_points / ev.c.n), min(2.0 * ratio, ev.c.step * max_points / span)


def _extra(ev: _Evaluator, lo: float, up: float) -> float:
    """The part of a pass's eps bracket [lo, up] not due to the rounding shifts (the error terms)."""
    return max((up - lo) - ev.shift_lo, 0.0) if math.isfinite(up) else math.inf


def _grid_entries(ents, direction: str, eps_max: float, rtol: float, delta_ref: float, theta_ref: float):
    """(entries for the grid, the closed-form tail or None, their ranges): the loss law above
    top = eps_max - (T - 1) floor in closed form (:mod:`conversions.pld_tail`; valid for eps <= eps_max)
    where the mechanism allows it and that shortens the grid (the tail does not reach into the grid's
    range otherwise), else the entries as they are."""
    full = _ranges(ents, direction, rtol, delta_ref, theta_ref)
    grid_ents, tail = truncated_entries(ents, direction, eps_max)
    if tail is None:
        return ents, None, full
    ranges = _ranges(grid_ents, direction, rtol, delta_ref, theta_ref)
    if not ranges[0][1] < full[0][1]:
        return ents, None, full
    return grid_ents, tail, ranges


def _no_finer(ev: _Evaluator, ranges, max_points: int) -> bool:
    """Whether a new pass could not have a grid finer than the last one (``ev``) by more than ~10%: its
    step is at least the capped one of the loss span, _lattice_step(span / max_points)
    (``pld_grid._plan``), and, since the FFT window is about as long in loss units, at least ~1.2 N / max
    times the last step when the window is capped (``pld_eval._run``).  Such a pass only repeats the
    grid (measured: q = 1e-3, sigma = 0.8, T = 100, remove: the same bracket again in 1.9 s)."""
    span = max(hi - lo for lo, hi in ranges)
    return _lattice_step(span / max_points) >= ev.c.step or ev.c.n >= 0.75 * max_points


def _prepare(entries, direction, rtol, max_points):
    check_direction(direction)
    rtol = _check_rtol(rtol)
    max_points = _check_max_points(max_points)
    ents = _check_entries(entries)
    if ents and not pld_applicable(ents):
        raise ValueError("entries: the pld route needs pld_cell_masses for every mechanism")
    if sum(k for _, k in ents) > MAX_STEPS:
        # (the FFT powers' rounding bound, (1 + sqrt5 u)^{T - 1} - 1, is then over 0.5 %: a bracket of
        # nothing, after ~1 s of grids -- 1e15 steps)
        raise ValueError(f"entries: the pld route composes at most {MAX_STEPS:.0e} steps")
    return ents, rtol, max_points


#: the most steps the route composes (beyond, its floating-point bound alone is over 0.5 % relative)
MAX_STEPS = 10**13


def pld_delta_bounds(entries, eps: float, direction: str = "remove", rtol: float = 1e-3, *,
                     max_points: int = DEFAULT_MAX_POINTS, deadline: float | None = None) -> DeltaBounds:
    """Certified bracket on delta(eps) of the composition (one direction) by the discretised PLD.

    Parameters
    ----------
    entries : sequence of (Mechanism, count) whose mechanisms implement ``pld_cell_masses``.
    eps : finite real.
    direction : {"remove", "add"}.
    rtol : target relative width of the bracket, in [1e-9, 0.5].
    max_points : cap on the FFT length and on each entry's grid (a capped query gives a wider, still
        certified bracket with ``details["capped"] = True``).
    deadline : a ``contour_terms.query_clock()`` value (the caller's time limit), or None.  A
        refinement pass (or the near-atomic split) predicted to end after it is skipped, one still
        building its grid when it passes is abandoned, and the still certified bracket carries
        ``details["time_limit"] = True``; if it passes while the first pass builds its grid,
        :class:`FirstPassAbandoned` is raised (no bracket yet)
        (``method="auto"`` adds a warning when it is wider than its target).

    Returns
    -------
    DeltaBounds with lower <= delta(eps) <= upper (rigorous; module docstring), ``details`` holding
    the grid step, FFT length, tilt and error terms.
    """
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not math.isfinite(eps):
        raise ValueError(f"eps must be a finite real number, got {eps!r}")
    eps = float(eps)
    ents, rtol, max_points = _prepare(entries, direction, rtol, max_points)
    if not ents:
        f = -math.expm1(eps) if eps < 0 else 0.0
        return DeltaBounds(eps, f, f * (1 - 1e-15), f, direction, {"route": "pld"})
    curve = _chernoff_curve(ents, direction)
    d_ch, c_ch = _chernoff_delta(curve, eps)
    p_inf = -math.expm1(sum(k * math.log1p(-m.infinite_loss_mass) for m, k in ents))
    d_ref = max(d_ch * 1e-2, 1e-300) + p_inf
    # the loss law above top = eps - (T - 1) floor in closed form where that shortens the grid
    grid_ents, tail, ranges = _grid_entries(ents, direction, eps, rtol, d_ref, 0.5 * c_ch)
    # the delta bracket is about exp((1 + theta) T Delta) wide: aim T Delta at rtol / (2 + theta)
    width = 0.9 * rtol / (2.0 + c_ch)
    clock = _Clock(deadline)
    ev = clock.timed(_run, grid_ents, direction, width, ranges, eps, max_points, rtol, eps, d_ref, c_ch,
                     deadline=deadline)
    if ev is None:
        raise FirstPassAbandoned("the deadline passed while the first pass built its grid")
    ev = ev if tail is None else TailEvaluator(ev, tail)
    lo, up = ev.lower(eps), ev.upper(eps)
    passes = 1
    for _ in range(2):
        if up - lo <= rtol * up or ev.c.capped:
            break
        new_width = 0.9 * rtol / (2.0 + ev.c.theta) / (4.0 if passes > 1 else 1.0)
        # ranges again for the tilt found and the delta now known (the top mass must be << delta)
        if lo > 0:
            d_ref = lo
        ranges = _ranges(grid_ents, direction, rtol, d_ref, 0.5 * ev.c.theta)
        if _no_finer(ev, ranges, max_points) or not clock.allows(_growth(ev, width, new_width, ranges,
                                                                         max_points)):
            break
        width = new_width
        nxt = clock.timed(_run, grid_ents, direction, width, ranges, eps, max_points, rtol, eps, d_ref,
                          ev.c.theta, deadline=deadline)
        if nxt is None:  # (the deadline passed while the pass built its grid)
            clock.stopped = True
            break
        ev = nxt if tail is None else TailEvaluator(nxt, tail)
        lo, up = max(lo, ev.lower(eps)), min(up, ev.upper(eps))
        passes += 1
    lo = min(lo, up)
    details = _details(ev, passes)
    if tail is not None:
        details["loss_tail_top"] = tail.top
    if up - lo > rtol * up and split_applicable(ents, up) and clock.allows():
        # near-atomic steps: condition on the number of large steps (conversions.pld_split)
        res = split_delta_bracket(ents, eps, direction, rtol, eps, d_ref, max_points)
        if res is not None:
            lo, up = max(lo, res[0]), min(up, res[1])
            lo = min(lo, up)
            details.update(res[2])
    return DeltaBounds(eps, 0.5 * (lo + up), lo, up, direction, clock.mark(details))


def pld_epsilon_bounds(entries, delta: float, direction: str = "remove", rtol: float = 1e-3, *,
                       max_points: int = DEFAULT_MAX_POINTS, deadline: float | None = None,
                       stop_below: float = 0.0) -> EpsilonBounds:
    """Certified eps(delta) for one direction by the discretised PLD.

    ``upper`` satisfies delta_upper(upper) <= delta (so the pair is (upper, delta)-DP), ``lower``
    satisfies delta_lower(lower) >= delta (no eps below it is valid); both are >= 0.  Target width:
    (upper - lower) <= rtol * upper, or <= 0.1 rtol absolute when eps < 0.1 (then one more pass towards
    the relative target when it is predicted cheap: ``CHEAP_FFT``, ``CHEAP_CELLS``).  Parameters (and the
    ``deadline``) as in ``pld_delta_bounds``; ``delta`` in (0, 1).  An eps whose certification fails
    (window, cap) is reported as upper = inf rather than guessed.  ``stop_below``: refinement stops once
    the certified upper end is at most this (a certified lower bound on another direction's eps, so
    this direction cannot change the worst-direction answer; :func:`conversions.dominated.each_direction`).
    """
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    delta = float(delta)
    if isinstance(stop_below, bool) or not isinstance(stop_below, int | float) or not stop_below >= 0.0:
        raise ValueError(f"stop_below must be a real number >= 0, got {stop_below!r}")
    ents, rtol, max_points = _prepare(entries, direction, rtol, max_points)
    if not ents:
        return EpsilonBounds(delta, 0.0, 0.0, 0.0, direction, {"route": "pld"})
    p_inf = -math.expm1(sum(k * math.log1p(-m.infinite_loss_mass) for m, k in ents))
    if delta <= p_inf:
        return EpsilonBounds(delta, math.inf, math.inf, math.inf, direction,
                             {"route": "pld", "reason": "delta <= infinite-loss mass"})
    curve = _chernoff_curve(ents, direction)
    eps_ch, c_ch = _chernoff_eps(curve, delta - p_inf)
    ranges = _ranges(ents, direction, rtol, delta, 0.5 * c_ch)
    # pass 1: a grid 16x coarser than the target, tilted at the Chernoff estimate, window from eps = 0
    clock = _Clock(deadline)
    width = 16 * 0.9 * max(rtol * eps_ch, 0.1 * rtol)
    ev = clock.timed(_run, ents, direction, width, ranges, eps_ch, max_points, rtol, 0.0, delta, c_ch,
                     delta_sp=delta - p_inf, deadline=deadline)
    if ev is None:
        raise FirstPassAbandoned("the deadline passed while the first pass built its grid")
    lo, up = _solve(ev, delta)
    passes, last_w = 1, up - lo
    extra = _extra(ev, lo, up)
    split_ok = split_applicable(ents, delta)
    atol = 0.1 * rtol
    refined = polished = False
    for _ in range(4):
        met = passes > 1 and up - lo <= rtol * up
        if up <= stop_below or passes > 1 and (ev.c.capped or met and (polished or refined)):
            break
        # the target met: one more pass at half the width when it is cheap (``POLISH_FACTOR``)
        polish = met
        polished = polished or polish
        # the absolute target met (eps < 0.1): refine towards the relative one only while a pass is cheap
        cheap_only = (passes > 1 and up - lo <= atol) or polish
        if cheap_only and refined:
            break  # (one such pass: a second one cost 93 ms at q = 1e-4, sigma = 2, T = 10)
        refined = refined or (cheap_only and not polish)
        r_eff = POLISH_FACTOR * rtol if polish else rtol
        goal = r_eff * up if cheap_only else max(r_eff * up, atol)
        if split_ok and lo > 0 and math.isfinite(extra) and extra > goal:
            # the error terms alone (not the rounding shifts) exceed the target although the pass found
            # a lower bound (its tilt sits near the root), and a finer grid only adds cells to them: the
            # split below answers (measured: q = 1e-4, sigma = 1, T = 100, delta = 1e-12: a second pass
            # of 1.8e6 points, 0.4 s, as wide as the first).  (Without a lower bound the width may be
            # the tilt's: q = 1e-5, sigma = 1, T = 10, delta = 1e-8 narrows from 1.5e-3 to 4e-5.)
            break
        est = lo if lo > 0 else (up if math.isfinite(up) else eps_ch)
        # tilt where the root is: the bracket's middle, or (no lower found yet) the saddle-point
        # estimate of the last grid, or the certified upper end
        tilt = 0.5 * (lo + up) if (lo > 0 and math.isfinite(up)) else est
        a_next = max(lo - 1e-9, 0.0)
        sp = getattr(ev, "sp", math.nan)
        if lo == 0 and math.isfinite(sp) and 0 < sp < est:
            est = tilt = sp
            a_next = 0.5 * sp
        theta_hint = _saddle(ev.blocks, ev.ks, tilt)
        if not math.isfinite(theta_hint):
            theta_hint = ev.c.theta
        # grid ranges for this tilt (the lower cut depends on it), then the target grid; the loss law
        # above top = up - (T - 1) floor in closed form where that shortens the grid
        grid_ents, tail, ranges = _grid_entries(ents, direction, up, rtol, delta, 0.5 * theta_hint)
        target = r_eff * est if cheap_only else max(r_eff * est, atol)
        prev_width = width
        width = 0.8 * target  # leaves room for the error terms (~10% of the bracket at 1e-3)
        if passes > 1:
            # the eps bracket = the rounding shifts + the rest (error terms, which grow with the number
            # of cells): aim the shifts at what the rest leaves, or halve when it leaves little
            room = target - 1.5 * extra
            width = 0.95 * room if room > 0.25 * target else 0.9 * target / 2.0 ** (passes - 1)
        if passes > 1 and _no_finer(ev, ranges, max_points):
            break
        growth = _growth(ev, prev_width, width, ranges, max_points)
        if cheap_only and (ev.c.n * growth[0] > CHEAP_FFT
                           or growth[1] * max(b - a for a, b in ranges) / ev.c.step > CHEAP_CELLS):
            break
        if not clock.allows(growth):
            break
        nxt = clock.timed(_run, grid_ents, direction, width, ranges, tilt, max_points, rtol, a_next,
                          delta, theta_hint, deadline=deadline)
        if nxt is None:  # (the deadline passed while the pass built its grid)
            clock.stopped = True
            break
        ev = nxt if tail is None else TailEvaluator(nxt, tail)
        lo2, up2 = _solve(ev, delta)
        extra = _extra(ev, lo2, up2)
        lo, up = max(lo, lo2), min(up, up2)
        passes += 1
        if math.isfinite(last_w) and not up2 - lo2 < last_w:
            # a finer grid that gave no narrower bracket (the error terms or the window, not the step,
            # limit it): a finer one again only costs more (measured: q = 1e-3, sigma = 1, T = 10,
            # delta = 1e-8: passes 3 and 4 of 1.1e6 and 1.9e6 points, 0.27 s, both with lower bound 0)
            break
        last_w = up2 - lo2
    lo = min(lo, up)
    details = _details(ev, passes)
    if isinstance(ev, TailEvaluator):
        details["loss_tail_top"] = ev.tail.top
    if not (up - lo <= max(rtol * up, atol) or up <= stop_below) and split_ok and clock.allows():
        # near-atomic steps: condition on the number of large steps (conversions.pld_split)
        res = split_epsilon_bracket(ents, delta, direction, rtol, lo, up, max_points)
        if res is not None:
            lo, up = max(lo, res[0]), min(up, res[1])
            lo = min(lo, up)
            details.update(res[2])
    est = 0.5 * (lo + up) if math.isfinite(up) else lo
    return EpsilonBounds(delta, est, lo, up, direction, clock.mark(details))


def pld_cost(entries, direction: str = "remove", rtol: float = 1e-3, eps_hint: float | None = None) -> float:
    """Predicted work of a PLD eps query: 10 x grid cells (mass evaluations) + N log2 N per FFT pass.

    Cheap (probe grids of 4097 points per entry and the mechanisms' log-MGFs; no FFT).  ``eps_hint``
    sets the grid step (default: a Chernoff estimate of eps at delta = 1e-5).  ``inf`` when the route
    does not apply.
    """
    check_direction(direction)
    rtol = _check_rtol(rtol)
    ents = _check_entries(entries)
    if not ents:
        return 0.0
    if not pld_applicable(ents) or sum(k for _, k in ents) > MAX_STEPS:
        return math.inf
    eps_ch, c_hint = _chernoff_eps(_chernoff_curve(ents, direction), 1e-5)
    if eps_hint is None:
        eps_hint = eps_ch
    tot = sum(k for _, k in ents)
    div = 0.75 * math.sqrt(tot * -math.log(1e-6 * rtol))  # the Chernoff lower end at delta ~ 1e-5
    if div >= tot or not _split_known(ents, direction):
        div = tot
    step = _lattice_step(0.9 * max(rtol * eps_hint, 0.1 * rtol) / div)
    ranges = _ranges(ents, direction, rtol, 1e-5, 0.5 * c_hint)
    cells = sum((hi - lo) / step for lo, hi in ranges)
    span = sum(k * (hi - lo) / step for (lo, hi), (_, k) in zip(ranges, ents, strict=True))
    n = min(span, 4.0 * max(cells, 1.0), float(DEFAULT_MAX_POINTS))
    return float(10.0 * cells + n * math.log2(max(n, 2.0)) * (1 + len(ents)))


__all__ = ["FirstPassAbandoned", "pld_applicable", "pld_cost", "pld_delta_bounds", "pld_epsilon_bounds"]
