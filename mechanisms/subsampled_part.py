"""The subsampled Gaussian's P-measure of the privacy loss split by the output x into a core and a big
part with smooth weights (:class:`SubsampledGaussianPart`): the two mechanisms whose contour integrals
add up to the whole in the near-atomic split of :mod:`conversions.split`.  The math is in
:mod:`mechanisms.subsampled`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._poisson_kernels import _add_peak, sg_log_mgf_in_window, sg_search_range, sg_window
from ._sg_line_kernels import NUFFT_MIN_NODES
from .base import Mechanism, as_complex_array, check_direction
from .sg_envelope import sg_envelope, shift_cost
from .subsampled import (
    _OP_CF,
    _OP_CS,
    _OP_EXP,
    _OP_LW,
    _OP_ROT,
    _SPAN,
    SubsampledGaussian,
    sg_log_mgf_real,
    sg_phase_error,
    sg_quadrature,
)

#: the line kernel's NUFFT path (``mgf_line_cost``), unit of ``mgf_cost``: per grid point the spreading,
#: per (FFT length x log2 of it) and per node the finishing log / exp / atan2
_OP_SPREAD, _OP_FFT, _OP_NODE = 1.2, 0.1, 4.0


@dataclass(frozen=True)
class SubsampledGaussianPart(Mechanism):
    """One part of the subsampled Gaussian's P-measure of the privacy loss, split by the output x.

    With x the output (unit-sensitivity scale), the remove pair's P-measure of the loss is
    e^{l(x)} N(0, 1)(dx) pushed through x -> l(x) and the add pair's is N(0, 1)(dx) pushed through
    x -> -l(x) (see :class:`SubsampledGaussian`).  The split weight w_core(x) = Phi((x_cut - x) / tau),
    w_big(x) = Phi((x - x_cut) / tau) = 1 - w_core(x) cuts that measure into two non-negative measures
    that add up to it: the *core* (small losses |L| <~ l(x_cut)) and the *big* part (the rare large
    losses).  Each is a sub-probability measure; ``log_mgf`` is log E_P[w(x) e^{s L}] (so the two
    MGFs add up to the mechanism's), with the same quadrature and declared error as the unsplit MGF
    and a decay envelope built the same way on the weighted density.

    Not a mechanism of its own (not registered, never composed by users): the characteristic-function
    route composes the parts separately when the loss is near-atomic (:mod:`conversions.split`).
    """

    sigma: float
    sample_rate: float
    sensitivity: float
    x_cut: float
    tau: float
    part: int

    name = "subsampled_gaussian_part"
    symmetric = False
    tight = False
    pld_available = True
    relations = ("add_remove",)
    field_checks = SubsampledGaussian.field_checks

    def __post_init__(self):
        super().__post_init__()
        if not (0.0 < self.sample_rate < 1.0):
            raise ValueError(f"sample_rate must lie in (0, 1) for a split, got {self.sample_rate!r}")
        if not (isinstance(self.x_cut, int | float) and math.isfinite(self.x_cut)):
            raise ValueError(f"x_cut must be a finite number, got {self.x_cut!r}")
        if not (isinstance(self.tau, int | float) and 1e-3 <= self.tau <= 10.0):
            raise ValueError(f"tau must lie in [1e-3, 10], got {self.tau!r}")
        if self.part not in (0, 1):
            raise ValueError(f"part must be 0 (core) or 1 (big), got {self.part!r}")
        # log M at real points (and the cost hints and windows), memoised for the life of this
        # (query-local, never user-facing) object: the line searches of the split's passes revisit the
        # same points
        object.__setattr__(self, "_real", {})

    @property
    def mu(self) -> float:
        return self.sensitivity / self.sigma

    @property
    def log_mgf_error(self) -> float:
        return 2e-13

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        """The line kernel's phase rounding (:func:`mechanisms.subsampled.sg_phase_error`)."""
        return sg_phase_error(c, t_max, self._kernel_args(direction))

    def _dx(self) -> float:
        return min(0.125, 0.25 / self.mu, 0.25 * self.tau)

    def _sig_max(self) -> float:
        """Largest l'(x) / mu over the x-range where the part's integrand matters (the core's weight
        ends ~ one unit past x_cut; the big part reaches the Gaussian tail, where l' -> mu)."""
        if self.part == 1:
            return 1.0
        q, mu = self.sample_rate, self.mu
        y = math.log(q) + mu * (self.x_cut + 1.0) - 0.5 * mu**2 - math.log1p(-q)
        return 1.0 if y > 0.0 else math.exp(y)

    def mgf_cost(self, t_max: float, c: float = 0.0, direction: str = "remove") -> float:
        """Cost hint per point s with Re s = c, |Im s| <= t_max: the larger of the typical cost and a bound
        on the kernels' work at this c (:meth:`_work_bound`), in the unit of the unsplit kernel's hint
        (~ one of its points: an exp, a log and a cos/sin).

        Typical: one call scans the window (~600 + 120 / tau points) and integrates on a grid of step
        min(dx, 0.5 / (t l')) over ~30 units of x; nodes on one line (the contour's grids; t_max > 0)
        share the scans and the grid and cost a complex rotation per grid point (~1/16 of a point).
        (l' <= mu: at lines far above the saddle the tilt pushes even the core's window to where l' ~ mu,
        so the phase rate is bounded by t mu, not by the slope at the cut.)  The typical cost ignores c:
        the window and the step of far lines are not in it.
        """
        key = ("cost", float(t_max), float(c), direction)  # (memoised: the meter charges revisited points)
        got = self._real.get(key)
        if got is not None:
            return got
        rate = 2.0 * t_max * self.mu
        points = 30.0 * max(1.0 / self._dx(), rate) * max(1.0, self.mu / 8.0)
        typical = points + 600.0 + 120.0 / self.tau if t_max == 0.0 else points / 16.0 + 16.0
        out = self._real[key] = max(typical, self._work_bound(t_max, c, direction, typical))
        return out

    # -------------------------------------------------- cost bounds (the kernels' work at a given c)
    def _cf_zone(self) -> tuple[float, float]:
        """The x-range where the weight takes its continued fraction (37 <= -z <= 40, ``log_ndtr``; above
        z = -37 it is an erfc, below -40 the Mills ratio's asymptotic series, charged at ``_OP_LW`` like
        the leading term it replaced although it costs ~9 ns a call more: a time estimate, not a bound
        on anything certified)."""
        xcut, tau = float(self.x_cut), float(self.tau)
        if self.part == 0:
            return xcut + 37.0 * tau, xcut + 40.0 * tau
        return xcut - 40.0 * tau, xcut - 37.0 * tau

    def _grid_cost(self, a: float, b: float, n: float) -> float:
        """l(x) and the weight at n equally spaced points of [a, b] (those in ``_cf_zone`` at their cost)."""
        za, zb = self._cf_zone()
        overlap = min(b, zb) - max(a, za)
        n_cf = 0.0 if overlap < 0.0 else min(n, overlap * (n - 1.0) / (b - a) + 1.0) if b > a else n
        return n * _OP_LW + n_cf * _OP_CF

    def _scan_cost(self, wr: float, lo: float, hi: float) -> float:
        """The two passes of ``_weighted_window`` over its coarse range [lo, hi] and its fine range."""
        lo2, hi2, n_f = self._fine_range(wr)
        return 2.0 * self._grid_cost(lo, hi, 601.0) + 2.0 * self._grid_cost(lo2, hi2, n_f + 1.0)

    def _fine_range(self, wr: float) -> tuple[float, float, int]:
        """``_weighted_window``'s fine scan: [lo2, hi2] around the weight's edge in n_f steps."""
        xcut, tau = float(self.x_cut), float(self.tau)
        lo2 = xcut - 12.0 * tau - 1.0
        hi2 = xcut + max(wr, 0.0) * self.mu * tau * tau + 12.0 * tau + 1.0
        return lo2, hi2, int(min(4000.0, math.ceil(4.0 * (hi2 - lo2) / tau)))

    def _work_bound(self, t_max: float, c: float, direction: str, typical: float) -> float:
        """Upper bound on the work per point of ``log_mgf`` at Re s = c >= 0, |Im s| <= t_max.

        The kernels (``sg_log_mgf``'s weighted branch, ``sg_line_log_mgf``), with w = s + 1
        (remove) or -s (add): the window scans of ``_weighted_window`` (l(x) and the weight at 2 x 601
        coarse and 2 (n_f + 1) fine points, ``_scan_cost``); then a trapezoid grid of m + 1 <=
        max(65, W / dx + 2) points over the window [a, b] they find (W = b - a, measured by
        ``_part_window``), with 1/dx = max(1/dx_max, 2 |Im w| mu sig, 2 sqrt(1 + |Re w| mu^2 s2)) (sig,
        s2: the sigmoid and its curvature term at b + 1, the kernels' rule).  A point alone (t_max = 0:
        ``sg_log_mgf``) costs the scans and, per grid point, l(x), the weight, an exp and a cos/sin.  On
        a line (t_max > 0), per node: a rotation (and a 16th of an exact cos/sin) per grid point, a 64th
        of the grid's l(x), weight and exp (one grid per 64 nodes) and a 256th of the scans (one per call:
        a call with fewer nodes is under-counted by at most one scan, ~1 ms).  Operation costs
        (``_OP_*``) were measured relative to the unsplit kernel's unit and rounded up; the weight's
        continued fraction (up to 60 chained divisions) is charged where the points fall in its zone.
        When the bound with the kernels' whole scan ranges as the window and sig = 1 is below
        ``typical``, that is returned without measuring the window.
        """
        wr = -abs(c) if direction == "add" else abs(c) + 1.0

        def cost(a: float, b: float, sig: float, scans: float) -> float:
            n = self._grid_points(a, b, t_max, wr, sig)
            grid = self._grid_cost(a, b, n)
            if t_max == 0.0:
                return scans + grid + n * (_OP_EXP + _OP_CS)
            return n * _OP_ROT + (grid + n * _OP_EXP) / 64.0 + scans / 256.0

        lo, hi = self._mgf_range(wr)
        scans = self._scan_cost(wr, lo, hi)
        lo2, hi2, _ = self._fine_range(wr)
        step = (hi - lo) / 600.0
        if cost(min(lo, lo2) - step, max(hi, hi2) + step, 1.0, scans) <= typical:
            return typical
        a, b = self._part_window(wr, lo, hi, _SPAN)
        return cost(a, b, self._sigmoid_past(b), scans)

    def _grid_points(self, a: float, b: float, t_max: float, wr: float, sig: float) -> float:
        """The kernels' trapezoid points on the window [a, b] for |Im w| <= t_max, Re w = wr
        (``_work_bound``: max(65, W / dx + 2), the step from the oscillation and curvature terms)."""
        mu = self.mu
        s2 = sig * (1.0 - sig) if sig <= 0.5 else 0.25
        inv_dx = max(1.0 / self._dx(), 2.0 * t_max * mu * sig, 2.0 * math.sqrt(1.0 + abs(wr) * mu * mu * s2))
        return max(65.0, (b - a) * inv_dx + 2.0)

    def _sigmoid_past(self, b: float) -> float:
        """The kernels' sigmoid at the window's top + 1 (the weight of the mu-shifted component there)."""
        mu, q = self.mu, self.sample_rate
        y = math.log(q) + mu * (b + 1.0) - 0.5 * mu * mu - math.log1p(-q)
        return 1.0 / (1.0 + math.exp(-y)) if y > -700 else 0.0

    def mgf_line_cost(self, n: int, t_max: float, c: float = 0.0, direction: str = "remove") -> float:
        """Cost of one ``log_mgf`` call at n equally spaced nodes on the line Re s = c >= 0, |Im s| <= t_max
        (unit of :meth:`mgf_cost`; what the contour's work meter charges for a chunk of its grid).

        From ``NUFFT_MIN_NODES`` nodes the line kernel (``sg_line_log_mgf``) sums all of them by the
        type-1 NUFFT on one x-grid: the window scans, then per grid point l(x), the weight, an exp, a
        cos/sin pair and the Gaussian spreading (``_OP_SPREAD``: 26 multiply-adds and two exps), an FFT
        of M < 8 n points (M log2 M at ``_OP_FFT``) and per node a log, an exp and an atan2
        (``_OP_NODE``).  The grid is the uniform one of ``_work_bound`` on the measured window (the
        kernel's pieces, when it splits the grid, hold at most as many points).  Measured against the
        per-point kernel's rate (13-17 ns per unit at q = 1e-5..0.02, sigma = 0.3..1): 2048 nodes to
        |t| = 300 took 10-14 ns per unit of this model, but 0.2-0.5 ns per unit of n x ``mgf_cost``,
        which keeps the per-point kernel's hint per node (the contour's plans still use that hint).
        Fewer nodes: n x ``mgf_cost`` (blocks of 64 with rotations, as that hint counts them)."""
        if n < NUFFT_MIN_NODES:
            return n * self.mgf_cost(t_max, c, direction)
        wr = -abs(c) if direction == "add" else abs(c) + 1.0
        lo, hi = self._mgf_range(wr)
        scans = self._scan_cost(wr, lo, hi)
        a, b = self._part_window(wr, lo, hi, _SPAN)
        pts = self._grid_points(a, b, t_max, wr, self._sigmoid_past(b))
        fft = 8.0 * n * math.log2(8.0 * n)
        return (scans + self._grid_cost(a, b, pts) + pts * (_OP_EXP + 2.0 * _OP_CS + _OP_SPREAD)
                + fft * _OP_FFT + n * _OP_NODE)

    def _mgf_range(self, wr: float) -> tuple[float, float]:
        """The coarse scan range of the MGF kernels for Re w = wr (around the add peak for wr <= 0)."""
        return sg_search_range(wr, self.sample_rate, self.mu, _SPAN)

    def _part_window(self, wr: float, lo: float, hi: float, span: float) -> tuple[float, float]:
        """The x-window [a, b] that the kernels integrate for Re w = wr, coarse range [lo, hi] and
        ``span``: ``_weighted_window`` itself (through ``sg_window``).  Memoised with the exponent's
        maximum, so that :meth:`log_mgf_real` at that point integrates without scanning again."""
        key = ("window", wr, lo, hi, span)
        got = self._real.get(key)
        if got is None:
            got = self._real[key] = sg_window(wr, self.sample_rate, self.mu, lo, hi, float(self.x_cut),
                                              float(self.tau), int(self.part), span)
        return got[1], got[2]

    def _env_dx(self) -> float:
        return min(0.004, 0.04 / self.mu, self.tau / 16.0)

    def envelope_cost(self, c: float, direction: str = "remove") -> float:
        """Cost of ``log_envelope_fn(c, direction)`` (unit of :meth:`mgf_cost`): the larger of the typical
        cost (a few walks over ~40 units of x at the envelope's step) and a bound on the work at this c.

        Bound (``sg_envelope_constants`` with the weight, then :func:`sg_envelope`): the window scans
        (``_scan_cost``), four passes over the grid of step dx = ``_env_dx`` on the window [a, b] that
        ``_weighted_window`` finds (span 120; ``_part_window``): l(x), the weight and up to two exps per
        point; three bin-aligned walks of the loss (the fine bins of V, 16384; the histogram and the
        bulk window's, 8192 each), a walk over nb bins visiting at most W / dx + nb + 2 cells (l(x), the
        weight, an exp) and nb + 2 bin-edge pre-images (~ an l(x) each); 2 x 8000 units for the FFTs and
        array passes of the curvature bands.  The weight's continued fraction is charged on the grid
        points in its zone and, for the walks' per-bin cells, by the zone's share of the window's loss
        range (a cell's share of the loss range is what gives it a bin of its own; for the bulk-window
        histogram this is an estimate: at most ~8192 x 11 units more, ~5 ms, when the bulk lies in the
        weight's far tail).  Plus the contour-shift bound over the unsplit range (``shift_cost``).
        """
        mu, dx = self.mu, self._env_dx()
        typical = 8.0 * 40.0 / dx * max(1.0, mu / 8.0)
        add = direction == "add"
        wr = -abs(c) if add else abs(c) + 1.0
        q, xcut = self.sample_rate, float(self.x_cut)
        lq, l1q = math.log(q), math.log1p(-q)

        def cost(a: float, b: float, scans: float, cf_share: float) -> float:
            n = (b - a) / dx + 2.0
            passes = 4.0 * (self._grid_cost(a, b, n) + 2.0 * n * _OP_EXP)
            bins = 16384.0 + 2.0 * 8192.0
            hist = (3.0 * (self._grid_cost(a, b, n) + (n + 2.0) * _OP_EXP)
                    + bins * (_OP_LW * 2.0 + _OP_EXP + cf_share * _OP_CF))
            return scans + passes + hist + 2.0 * 8000.0

        if add:  # (the kernel's range: around the add peak)
            xp = _add_peak(abs(c), q, mu, lq, l1q)
            lo, hi = xp - 16.0 - 2.0 * mu, xp + 16.0 + 3.0 * mu
        else:
            lo, hi = -(16.0 + wr * mu) - 2.0 * mu, 16.0 + wr * mu + 3.0 * mu
        lo, hi = min(lo, xcut - 1.0), max(hi, xcut + 1.0)
        scans = self._scan_cost(wr, lo, hi)
        lo2, hi2, _ = self._fine_range(wr)
        step = (hi - lo) / 600.0
        shift = shift_cost(hi - lo, mu, float(self.tau))  # (the contour-shift bound, on the whole range)
        if cost(min(lo, lo2) - step, max(hi, hi2) + step, scans, 1.0) <= typical:
            return typical + shift
        a, b = self._part_window(wr, lo, hi, 120.0)
        za, zb = max(a, self._cf_zone()[0]), min(b, self._cf_zone()[1])
        loss = np.logaddexp(l1q, lq + mu * np.array([a, b, za, zb]) - 0.5 * mu * mu)
        share = 0.0 if za >= zb else min(1.0, (loss[3] - loss[2]) / max(loss[1] - loss[0], 1e-300))
        return max(typical, cost(a, b, scans, share)) + shift

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        return sg_quadrature(s, self._kernel_args(direction))

    def _kernel_args(self, direction: str) -> tuple:
        return (self.sample_rate, self.mu, direction == "add", self._dx(), _SPAN, float(self.x_cut),
                float(self.tau), int(self.part))

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        key = (float(c), direction)
        v = self._real.get(key)
        if v is None:
            check_direction(direction)
            args = self._kernel_args(direction)
            # the work meter's cost bound usually measured this point's window already (_part_window):
            # then only the integration runs (the kernel's own scan would find the same window)
            wr = -float(c) if direction == "add" else float(c) + 1.0
            win = self._real.get(("window", wr, *self._mgf_range(wr), _SPAN)) if c >= 0.0 else None
            if win is None:
                v = sg_log_mgf_real(c, args)
            else:
                v = sg_log_mgf_in_window(float(c), *args[:4], *win, *args[5:])
            self._real[key] = v
        return v

    def mass(self, direction: str = "remove") -> float:
        """The part's total mass, in closed form: E[Phi((a - X) / tau)] = Phi((a - m) / sqrt(1 + tau^2))
        for X ~ N(m, 1), with P = (1 - q) N(0, 1) + q N(mu, 1) (remove) or N(0, 1) (add)."""
        check_direction(direction)
        sgn = 1.0 if self.part == 0 else -1.0
        r = math.sqrt(1.0 + self.tau**2)
        def cdf(m: float) -> float:
            return 0.5 * math.erfc(-sgn * (self.x_cut - m) / r / math.sqrt(2.0))
        if direction == "add":
            return cdf(0.0)
        return (1.0 - self.sample_rate) * cdf(0.0) + self.sample_rate * cdf(self.mu)

    def total_variation(self, direction: str = "remove") -> float | None:
        return None

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        """t -> log of a bound on |M_part(c + it')| for all |t'| >= t (the subsampled Gaussian's envelope
        construction on the part's weighted density, on a grid fine enough for the weight)."""
        check_direction(direction)
        return sg_envelope(c, self.sample_rate, self.mu, direction == "add", self._env_dx(),
                           float(self.x_cut), float(self.tau), int(self.part))

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)
