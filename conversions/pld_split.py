"""Discretised PLD conditioned on the number of large steps: the near-atomic, few-step regime.

Where one step's privacy loss is nearly an atom at 0 with a thin tail (Poisson subsampling at a small
rate q, few steps, tiny delta), the tilted FFT of :mod:`conversions.pld` puts almost all of the tilted
mass on the atom and on the top of its window, far from eps: its floating-point and mass-error terms,
relative to that total, swamp the tiny delta (q = 1e-4, sigma = 1, T = 10, delta = 1e-12: the plain
grid certifies [0.017, 0.067]).  Conditioning removes the atom from the tail's computation.

Split one step's loss law mu (one direction) at a cut l_c into sub-measures mu_c = mu restricted to
L <= l_c and mu_b = mu restricted to L > l_c (masses w_c + w_b = 1).  Then, exactly,

    mu^{*T} = sum_{j=0}^{T} C(T, j) mu_c^{*(T-j)} * mu_b^{*j},
    delta(eps) = sum_j C(T, j) D_j(eps),   D_j(eps) = int (1 - e^{eps - s})_+ d(mu_c^{*(T-j)} * mu_b^{*j})(s),

and 0 <= D_j <= w_c^{T-j} w_b^j.  Each D_j with j <= J is bracketed by the certified discretised PLD of
:mod:`conversions.pld` applied to the composition of the two sub-measures (its couplings, window,
tilt and error terms hold for sub-probability measures: nothing in them uses a total mass of 1, and
mass that leaves the grid at the top is counted at +inf), each term with its own grid and tilt; the
terms j > J are bounded by their total mass R_J = sum_{j > J} C(T, j) w_c^{T-j} w_b^j (upper bound
only).  D_0 = 0 exactly for eps >= T l_c (mu_c lives on L <= l_c).  Upper bound:
sum_{j <= J} C(T, j) min(D_j^up, w_c^{T-j} w_b^j) + R_J; lower bound: sum_{j <= J} C(T, j) D_j^lo.

The large part's long upper tail (its grid would reach losses far above eps, where the point cap then
coarsens every term) is taken out in closed form where the mechanism allows it
(:mod:`conversions.pld_tail`): for eps <= eps_max (the caller's certified upper end) the split is
applied to the loss law restricted to L <= top (the large part becomes cut < L <= top) and the rest of
delta is P^T(A) - e^eps Q^T(A) exactly.  Measured: q = 1e-4, sigma = 1, T = 100, delta = 1e-12: the
large part's grid ends at 0.097 instead of 0.42, the one-large-step term is no longer capped (45 ms
instead of 0.25-0.4 s) and eps is bracketed in [0.067422, 0.067501] (before: [0.067396, 0.067517], 1.2 s).

Neighbouring relation: that of the mechanism's dominating pair (one direction per call).  Result: a
rigorous bracket; it is intersected with the plain grid's bracket by the caller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from mechanisms.base import Mechanism

from .pld_eval import _run, _solve_between
from .pld_grid import _ranges
from .pld_tail import LossTail, loss_tail

#: at most this many large steps are composed explicitly (the rest is bounded by its mass)
MAX_TERMS = 12
#: the split is tried for ledgers of one mechanism used at most this many times
MAX_STEPS = 100_000
#: each term's grid is capped at this many points (bounded work: a capped term is still certified)
MAX_POINTS = 1 << 19


@dataclass(frozen=True, eq=False)
class _LossPart(Mechanism):
    """The sub-measure of ``base``'s privacy-loss law (one direction) on L <= cut (``big=False``) or on
    L > cut (``big=True``): cell masses only, for :mod:`conversions.pld` (no RDP curve: the base class's
    ``rdp`` raises ``UnsupportedRoute``).  Not a plug-in."""

    base: Mechanism = None  # type: ignore[assignment]
    cut: float = 0.0
    big: bool = False
    #: the large part holds cut < L <= top (the mass above ``top`` is the split's closed-form tail); both
    #: parts of a split carry it (the core only inserts it into its edges, to share the memo)
    top: float = math.inf
    #: the part L <= cut offers the base's cell offsets (bounds on the cells' splits; the cell holding the
    #: cut gets [0, its share of the cell]); the Q-masses are offered by both parts where the base has them
    offsets: bool = False
    #: shared by the two parts of one split: the base's last four cell-mass and Q-mass results (both
    #: parts of a term ask for the same grids, the cut inserted), so that each is computed once
    memo: dict = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    name = "loss_part"
    pld_available = True

    @property
    def infinite_loss_mass(self) -> float:
        return self.base.infinite_loss_mass if self.big and self.top == math.inf else 0.0

    @property
    def max_mgf_order(self) -> float:
        return self.base.max_mgf_order

    def describe(self) -> str:
        top = f" and L <= {self.top:g}" if self.big and self.top < math.inf else ""
        return f"{'L > ' if self.big else 'L <= '}{self.cut:g}{top} part of {self.base.describe()}"

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        """The base's masses on the edges with the cut (and a finite ``top``) inserted, exact up to the
        base's error bounds: each refined cell (lo_i, up_i] lies on one side of every inserted end and is
        added to the cell of ``edges`` that holds it (the first edge >= up_i), if it belongs to this part
        (core: lo_i < cut; large part: cut <= lo_i < top).  Both parts of a split insert the same ends, so
        the second reads the first one's base masses from ``memo``."""
        return self._restricted(self._base_masses, edges, direction)

    def pld_cell_q_masses(self, edges: np.ndarray, direction: str = "remove"):
        """The base's Q-masses restricted to this part, as ``pld_cell_masses`` (a cell cut by ``cut`` or
        ``top`` keeps its part's share: its loss still lies between the cell's ends); ``None`` when
        the base has none."""
        if getattr(self.base, "pld_cell_q_masses", None) is None:
            return None
        return self._restricted(self._base_q_masses, edges, direction)

    def _restricted(self, masses, edges: np.ndarray, direction: str):
        """``masses(edges with the part's ends inserted)`` gathered onto the cells of ``edges`` that
        belong to this part (None when ``masses`` gives None)."""
        e = np.asarray(edges, dtype=float)
        e2 = e
        # (pos[i] = searchsorted(e, e2[i]): the original edges keep their index when e increases strictly)
        fast = e.size > 0 and bool(np.isfinite(e[-1])) and bool(np.all(e[1:] > e[:-1]))
        pos = np.arange(e.size) if fast else None
        for end in (self.cut, self.top) if self.top < math.inf else (self.cut,):
            at = int(np.searchsorted(e2, end, side="left"))
            e2 = np.insert(e2, at, end)
            if fast:
                pos = np.insert(pos, at, int(np.searchsorted(e, end, side="left")))
        res = masses(e2, direction)
        if res is None:
            return None
        m, err = res
        m = np.asarray(m, dtype=float)
        err = np.broadcast_to(np.asarray(err, dtype=float), m.shape)
        lower = np.concatenate([[-math.inf], e2])  # refined cell i = (lower[i], upper[i]]
        upper = np.concatenate([e2, [math.inf]])
        keep = ((lower >= self.cut) & (lower < self.top)) if self.big else (lower < self.cut)
        idx = (np.concatenate([pos, [e.size]]) if fast  # (upper = +inf: the top cell e.size)
               else np.searchsorted(e, upper, side="left"))
        return (np.bincount(idx[keep], weights=m[keep], minlength=e.size + 1),
                np.bincount(idx[keep], weights=err[keep], minlength=e.size + 1))

    def _base_masses(self, edges: np.ndarray, direction: str):
        """``base.pld_cell_masses(edges, direction)``, from ``memo`` when the other part asked for the
        same edges (compared exactly)."""
        return self._memoised("cells", self.base.pld_cell_masses, edges, direction)

    def _base_q_masses(self, edges: np.ndarray, direction: str):
        """``base.pld_cell_q_masses(edges, direction)``, shared through ``memo`` like the masses (both
        parts of a term ask for the Q-masses on the same refined edges)."""
        return self._memoised("q_cells", self.base.pld_cell_q_masses, edges, direction)

    def _memoised(self, kind: str, fn, edges: np.ndarray, direction: str):
        done = self.memo.get(kind, []) if self.memo is not None else []
        for d, e, res in done:
            if d == direction and e.shape == edges.shape and np.array_equal(e, edges):
                return res
        res = fn(edges, direction)
        if self.memo is not None:
            self.memo[kind] = [(direction, edges, res)] + done[:3]
        return res

    def pld_cell_offsets(self, edges: np.ndarray, direction: str = "remove"):
        if self.big or not self.offsets:
            return None  # round-up cells (few steps: T Delta is affordable)
        base = self.base.pld_cell_offsets(edges, direction)
        if base is None:
            return None
        lo, hi = (np.array(a, dtype=float) for a in base)
        e = np.asarray(edges, dtype=float)
        k = int(np.searchsorted(e, self.cut, side="left"))  # cell k = (e[k - 1], e[k]] holds the cut
        if 1 <= k < e.size:  # (the part's loss in that cell lies in (e[k - 1], cut]; cells above: no mass)
            share = (self.cut - e[k - 1]) / (e[k] - e[k - 1]) if e[k] > e[k - 1] else 1.0
            lo[k], hi[k] = 0.0, min(1.0, share * (1 + 1e-12) + 1e-15)
        return lo, hi

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        return self.base.log_mgf_real(c, direction)  # (estimates only: an upper bound of the part's)


def _log_binom(t: int, j: int) -> float:
    return math.lgamma(t + 1.0) - math.lgamma(j + 1.0) - math.lgamma(t - j + 1.0)


def truncated_entries(entries, direction: str, eps_max: float) -> tuple[list, LossTail | None]:
    """(entries for the grid, tail): a ledger of one mechanism with the closed-form tail above top
    (:func:`conversions.pld_tail.loss_tail`) as its loss law restricted to L <= top, else unchanged."""
    if len(entries) != 1:
        return list(entries), None
    mech, t = entries[0]
    tail = loss_tail(mech, t, direction, eps_max)
    if tail is None:
        return list(entries), None
    return [(_LossPart(base=mech, cut=tail.top, big=False, offsets=True), t)], tail


class SplitPLD:
    """delta_up(eps) / delta_lo(eps) of ``times`` uses of ``mech`` (one direction) by conditioning on
    the number of steps whose loss exceeds ``cut``; terms tilted at ``eps_ref``.  With a finite
    ``eps_max`` (and the mechanism's hooks), the losses above ``top`` are the closed-form tail (module
    docstring)."""

    def __init__(self, mech: Mechanism, times: int, direction: str, cut: float, eps_ref: float,
                 delta_ref: float, rtol: float, width: float, max_points: int,
                 eps_max: float = math.inf):
        t = int(times)
        self.times, self.cut = t, cut
        self.tail = loss_tail(mech, t, direction, eps_max, above=cut)
        self.top = math.inf if self.tail is None else self.tail.top
        m, err = mech.pld_cell_masses(np.array([cut] if self.tail is None else [cut, self.top]),
                                      direction)
        err = np.broadcast_to(np.asarray(err, dtype=float), np.shape(m))
        # upper bounds of both parts' masses (the large part also holds the infinite-loss mass, unless
        # it is bounded above: then that mass is in the tail)
        w_c = min(1.0, float(m[0] + err[0]) * (1 + 1e-12))
        w_b = min(1.0, float(m[1] + err[1] + (mech.infinite_loss_mass if self.tail is None else 0.0))
                  * (1 + 1e-12))
        if not (0.0 < w_b < 1.0) or w_c <= 0.0:
            raise ValueError("loss split: the cut leaves an empty part")
        lw_c, lw_b = math.log(w_c), math.log(w_b)
        # log C(T, j) by lgamma: a few ulps of each of three terms <= lgamma(T + 1) in size, allowed
        # generously (this only widens the bracket by ~1e-12 (1 + lgamma(T + 1)) relative)
        self.log_c_err = 1e-12 * (1.0 + math.lgamma(t + 1.0))

        def log_mass(j: int) -> float:  # upper bound on C(T, j) w_c^{T-j} w_b^j (log)
            body = (t - j) * lw_c + j * lw_b
            return _log_binom(t, j) + body + self.log_c_err + 4 * 2.0**-52 * (abs(body) + 1.0)

        target = math.log(1e-4 * rtol * delta_ref)
        j_max = 0
        while j_max < min(t, MAX_TERMS) and log_mass(j_max + 1) > target:
            j_max += 1
        # the remainder: the terms decrease at least geometrically past j_max (ratio rho)
        if j_max < t:
            rho = (t - j_max - 1) / (j_max + 2.0) * w_b / (1.0 - w_b) if w_b < 1 else math.inf
            if not rho < 0.5:
                raise ValueError("loss split: the large part is not rare enough")
            self.rem = math.exp(log_mass(j_max + 1)) / (1.0 - rho) * (1 + 1e-12)
        else:
            self.rem = 0.0
        memo: dict = {}
        core = _LossPart(base=mech, cut=cut, big=False, top=self.top, memo=memo)
        big = _LossPart(base=mech, cut=cut, big=True, top=self.top, memo=memo)
        self.terms = []  # (j, C(T, j) as float (rounded up / down), evaluator or None, mass bound)
        for j in range(j_max + 1):
            lc = _log_binom(t, j)
            c_up = math.exp(lc + self.log_c_err) * (1 + 1e-15)  # C(T, j) rounded up / down
            c_dn = math.exp(lc - self.log_c_err) * (1 - 1e-15)
            mass = math.exp(log_mass(j) - lc + self.log_c_err)  # bound on D_j (lc may be low)
            ents = ([(core, t - j)] if t > j else []) + ([(big, j)] if j else [])
            ev = None
            if j > 0 or t * cut > 0.5 * eps_ref:  # (D_0 = 0 for eps >= T cut: no grid needed)
                ranges = _ranges(ents, direction, rtol, delta_ref, 1.0)
                # bounded work: a term whose composed span needs far more than the point cap at the
                # target step would only give a capped (wide) bracket -- the split does not pay here
                span = ranges[-1][1] - ranges[-1][0]  # (the last entry: the large part when j > 0)
                if span / (width / t) > 8.0 * max_points:
                    raise ValueError("loss split: the grid would exceed its point cap")
                ev = _run(ents, direction, width, ranges, eps_ref, max_points, rtol, 0.0, delta_ref,
                          1.0, scale=c_up)
            self.terms.append((j, c_up, c_dn, ev, mass))

    def upper(self, eps: float) -> float:
        tot = self.rem + (0.0 if self.tail is None else self.tail.delta(eps, True))
        for j, c_up, _, ev, mass in self.terms:
            if j == 0 and eps >= self.times * self.cut:
                d = 0.0  # (mu_c^{*T} lives on L <= T cut)
            else:
                d = mass if ev is None else ev.upper(eps)
                if not d <= mass:  # (also a NaN: the mass bound is always valid)
                    d = mass
            tot += c_up * d
        return min(1.0, tot * (1 + 1e-12))

    def lower(self, eps: float) -> float:
        tot = 0.0 if self.tail is None else self.tail.delta(eps, False)
        for _j, _, c_dn, ev, _ in self.terms:
            d = ev.lower(eps) if ev is not None else 0.0
            if d > 0.0:  # (a NaN certifies nothing: dropped)
                tot += c_dn * d
        return tot * (1 - 1e-12)

    @property
    def points(self) -> int:
        return max((ev.c.n for _, _, _, ev, _ in self.terms if ev is not None), default=0)


#: the split is tried only for delta at most this: the tilted grid's failure it cures (error terms that
#: swamp a tiny delta) is a tiny-delta effect; at larger delta the plain grid's width is its resolution,
#: which the split does not improve (q = 1e-3, sigma = 0.8, T = 100, delta = 1e-5: +2.5 s, no gain)
MAX_DELTA = 1e-7


def split_applicable(entries, delta: float = 0.0) -> bool:
    """One mechanism (with cell masses), used 1..MAX_STEPS times, at delta <= MAX_DELTA."""
    return (len(entries) == 1 and 1 <= entries[0][1] <= MAX_STEPS and delta <= MAX_DELTA
            and getattr(entries[0][0], "pld_available", False))


def _build(entries, direction, eps_ref, delta_ref, rtol, max_points, shrink: float = 0.8,
           eps_max: float = math.inf):
    mech, t = entries[0]
    width = shrink * max(rtol * eps_ref, 0.1 * rtol)
    return SplitPLD(mech, t, direction, 0.5 * eps_ref, eps_ref, delta_ref, rtol, width,
                    min(max_points, MAX_POINTS), eps_max)


def split_epsilon_bracket(entries, delta: float, direction: str, rtol: float, lo: float, up: float,
                          max_points: int) -> tuple[float, float, dict] | None:
    """A certified (lower, upper) eps(delta) by the split, started from the bracket [lo, up] of the plain
    grid (two passes: the first tilted at the certified upper end, the second at the middle of the
    bracket so far); None when the split does not apply here.  The caller intersects it with its own
    bracket.  (Tilted at the plain grid's middle, q = 1e-4, sigma = 1, T = 100, delta = 1e-12 ended at
    0.0674887 from [0.0205, 0.0795] and 0.0674578 from [0.0171, 0.1085]; at the upper end 0.0674564.)"""
    best_lo, best_up, info = lo, up, {}
    for shrink in (0.8, 0.4):  # (the second pass, if needed, on a grid twice as fine)
        # the first pass at the certified upper end (the plain grid's lower end is the looser one, by its
        # error terms at tiny delta), the second at the middle of the split's own bracket
        mid = 0.5 * (best_lo + best_up) if shrink < 0.8 else best_up
        ref = mid if math.isfinite(best_up) else max(best_lo, 1e-6)
        if not ref > 0.0:
            break
        try:
            # (the large part is bounded above where eps <= best_up: the root lies below it)
            sp = _build(entries, direction, ref, delta, rtol, max_points, shrink, best_up)
        except ValueError:
            break  # (the split does not apply here, or not at a finer grid: keep what it gave)
        hi = best_up if math.isfinite(best_up) else 4.0 * ref
        while sp.upper(hi) > delta and hi < 1e3:
            hi *= 2.0
        if sp.upper(hi) > delta:
            break
        new_lo, new_up = _solve_between(sp.upper, sp.lower, delta, 0.0, hi)
        best_lo, best_up = max(best_lo, new_lo), min(best_up, new_up)
        info = {"split_cut": sp.cut, "split_terms": len(sp.terms), "split_points": sp.points,
                "split_remainder": sp.rem}
        if best_up - best_lo <= max(rtol * best_up, 0.1 * rtol):
            break
    if not info:
        return None
    return min(best_lo, best_up), best_up, info


def split_delta_bracket(entries, eps: float, direction: str, rtol: float, eps_ref: float,
                        delta_ref: float, max_points: int) -> tuple[float, float, dict] | None:
    """A certified (lower, upper) delta(eps) by the split, tilted at ``eps``; None when it does not
    apply here."""
    if not eps > 0.0:
        return None
    try:
        sp = _build(entries, direction, eps, max(delta_ref, 1e-300), rtol, max_points, eps_max=eps)
    except ValueError:
        return None
    lo, up = sp.lower(eps), sp.upper(eps)
    return min(lo, up), up, {"split_cut": sp.cut, "split_terms": len(sp.terms),
                             "split_points": sp.points, "split_remainder": sp.rem}
