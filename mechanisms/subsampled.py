"""Poisson subsampling (add/remove relation): the subsampled Gaussian and a general RDP transform.

Poisson sampling keeps each record independently with probability q (``sample_rate``).  All results
here hold for the add/remove relation only (Zhu & Wang 2019); sampling without replacement with a
fixed batch size is a different mechanism (replace-one relation) and is not covered by these formulas
(see :mod:`mechanisms.without_replacement` for its (eps, delta)-level amplification).

SubsampledGaussian(sigma, sample_rate, sensitivity)
    One DP-SGD step with noise multiplier sigma / sensitivity.  With mu = sensitivity / sigma:

    * RDP (Zhu & Wang 2019 = Thm 2.3.4 of Zhu's 2023 thesis; Mironov, Talwar & Zhang 2019; exact for
      integer alpha >= 2, the tight bound):
          eps(alpha) = log sum_{l=0}^{alpha} C(alpha,l) (1-q)^{alpha-l} q^l e^{l(l-1) mu^2/2} / (alpha - 1),
      evaluated in the all-positive expm1 form (docs/derivations/subsampling.md) in log space, stable
      for alpha up to 1e5 and q down to 1e-12.  This is the remove direction, which dominates add for
      the Gaussian at every order (Mironov, Talwar & Zhang 2019; checked by quadrature in the tests).
      Fractional alpha: linear interpolation of the convex CGF (alpha - 1) eps(alpha) between integers
      -- an upper bound.
    * Dominating pairs (Zhu, Dong & Wang 2022): remove ((1-q) N(0,1) + q N(mu,1), N(0,1)); add is the swap.
      Both are tight.  log M(s) has no closed form: it is computed by a trapezoid rule in the output
      variable x (geometric convergence, the integrand being analytic in |Im x| < pi / mu), with a
      declared error of ``log_mgf_error`` relative to M(Re s), validated against mpmath in the tests.
    * Decay envelope for the characteristic-function route: |M(c + it)| <= TV(f_c) / |t| where f_c is the
      e^{cL}-tilted density of the loss (integration by parts), and for smaller t the curvature bound
      |M|^2 / M(c)^2 <= 1 - 2 t^2 V(pi / t) / pi^2 with V(r) = E[(X - X')^2; |X - X'| <= r] bounded on
      bands of t from the tilted loss histogram; TV and V come from fine grids with 10 % margins.
    * Total variation (delta(0) of both pairs): q erf(mu / (2 sqrt 2)), exact.

PoissonSubsampled(base, sample_rate)
    Any mechanism with an RDP curve (no infinite-loss mass).  Integer alpha (Zhu & Wang 2019):
    tight L(alpha) when ``base.poisson_tight`` (Gaussian, Laplace: Thm 2.3.4), otherwise
    min{G(alpha) (Thm 2.3.1), max(L(alpha), -log(1-q)) (R11.3)}; then the caps min with eps_base(alpha)
    (R11.1) and the pure-DP amplification log(1 + q(e^{eps_inf} - 1)) (R11.2, Lemma 2.2.2).  Upper bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._numerics import log_expm1_float
from ._poisson_kernels import _add_peak, poisson_rdp_int, sg_log_mgf, sg_part_line_log_mgf
from ._sg_envelope_kernels import sg_envelope_constants, sg_loss_histogram
from ._sl_kernels import sl_middle_log_mgf, sl_middle_tv
from .base import Mechanism, as_complex_array, check_direction
from .registry import from_dict, register

#: integer RDP orders above this are not summed exactly (the binomial sum costs O(alpha) per order: an
#: order grid growing to alpha = 1e8 took minutes); there the base mechanism's RDP, an upper bound
#: (subsampling never increases Renyi divergence: joint convexity of exp((alpha - 1) D_alpha)), is used
RDP_EXACT_MAX = 100_000
_SPAN = 80.0  # the MGF integrand is dropped where it is below e^{-80} times its maximum
# work of the split parts' kernels (SubsampledGaussianPart's cost bounds), in the unit of the unsplit
# kernel's cost hint (~ one of its points), measured with numba microbenchmarks against that unit and
# rounded up: l(x) and the weight (0.22 + 0.77); the extra of the weight's continued fraction (up to 60
# chained divisions, 10.7 at z = -8; it now runs only for 37 <= -z <= 40, with ~22 terms); an exp
# (0.14); a cos/sin pair (0.21); a complex rotation (0.022)
# plus a 16th of an exact cos/sin, per grid point and node of the line kernel
_OP_LW, _OP_CF, _OP_EXP, _OP_CS, _OP_ROT = 1.1, 11.0, 0.15, 0.25, 0.04


def _curvature_bands(u_min: float, b: float, hist: np.ndarray, total: float,
                     t_max: float) -> tuple[np.ndarray, np.ndarray]:
    """Band edges t_0 < ... < t_K = t_max and V_k <= E[(X - X')^2; |X - X'| <= pi / t_k] (X, X' iid).

    From a histogram with bin width b: a pair of bins at index distance d is at distance in
    [(d - 1) b, (d + 1) b], so V(r) >= 2 sum_{2 <= d, (d + 1) b <= r} ((d - 1) b)^2 P(d) with P the
    autocorrelation of the normalised masses (FFT; its rounding error is subtracted).  V_k holds for
    every t <= t_k; band 0 (t <= t_0) covers all pairs.
    """
    n = hist.size
    p = hist / max(total, float(hist.sum()), 1e-300)
    f = np.fft.rfft(p, 2 * n)
    ac = np.fft.irfft(f * np.conj(f), 2 * n)[:n]
    ac = np.maximum(ac - 1e-13 * math.log2(2 * n), 0.0)
    d = np.arange(n, dtype=float)
    w = np.where(d >= 2, ((d - 1.0) * b) ** 2, 0.0)
    cum = 2.0 * np.cumsum(w * ac)
    t_full = math.pi / ((n + 1) * b)  # r = pi / t_full covers every pair
    edges = [t_max]
    while edges[-1] > t_full and len(edges) < 80:
        edges.append(edges[-1] / math.sqrt(2.0))
    edges = np.array(edges[::-1])
    dmax = np.floor(math.pi / edges / b) - 1.0
    idx = np.minimum(dmax, n - 1).astype(np.int64)
    v = np.where(dmax >= 2, cum[np.maximum(idx, 0)], 0.0)
    return edges, v


def _x_of_loss(ell: float, q: float, mu: float) -> float:
    """The output x with l(x) = ell, l(x) = log(1 - q + q e^{mu x - mu^2/2}) (increasing; -inf at or
    below log(1 - q))."""
    l1q = math.log1p(-q)
    d = ell - l1q
    if not d > 0.0:
        return -math.inf
    y = l1q + log_expm1_float(d) - math.log(q)
    return y / mu + mu / 2.0


def _bulk_window(u_min: float, b: float, hist: np.ndarray, total: float) -> tuple[float, float] | None:
    """[u_lo, u_hi] around the 0.5 %..99.5 % quantiles of a histogram's mass (one bin of margin), when that
    window spans at most 1/64 of the histogram (else None: the histogram resolves the bulk already)."""
    tot = float(hist.sum())
    if not tot > 0.0:
        return None
    cum = np.cumsum(hist) / tot
    k_lo = int(np.searchsorted(cum, 0.005))
    k_hi = int(np.searchsorted(cum, 0.995))
    if k_hi - k_lo + 3 > hist.size // 64:
        return None
    return u_min + (k_lo - 1) * b, u_min + (k_hi + 2) * b


def _merge_bands(e1: np.ndarray, v1: np.ndarray, e2: np.ndarray,
                 v2: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bands of two ``_curvature_bands`` results (both ending at the same t_max) merged: on every band of
    the union of the edges, the larger of the two lower bounds valid at its right end (V(pi / t) is
    non-increasing in t, and each result's V_k holds for every t <= its own t_k)."""
    edges = np.union1d(e1, e2)

    def at(e: np.ndarray, v: np.ndarray) -> np.ndarray:
        k = np.searchsorted(e, edges)
        return np.where(k < e.size, v[np.minimum(k, e.size - 1)], 0.0)

    return edges, np.maximum(at(e1, v1), at(e2, v2))


def _interpolate_cgf(alpha: np.ndarray, int_eps) -> np.ndarray:
    """eps at real alpha > 1 by linear interpolation of K(a) = (a - 1) eps(a) between integers (R10).

    ``int_eps(ints)`` returns eps at integer orders >= 2 (int64 array).  K(1) = 0, so alpha in (1, 2)
    gives eps(2) (monotonicity).  Exact at integers.
    """
    a = np.asarray(alpha, dtype=float)
    out = np.full(a.shape, np.inf)
    fin = np.isfinite(a)
    af = a[fin]
    lo = np.floor(af).astype(np.int64)
    hi = np.ceil(af).astype(np.int64)
    need = np.unique(np.concatenate([lo[lo >= 2], hi[hi >= 2]]))
    table = dict(zip(need.tolist(), int_eps(need).tolist(), strict=True)) if need.size else {}

    def k_of(n: np.ndarray) -> np.ndarray:
        return np.array([0.0 if x <= 1 else (x - 1) * table[x] for x in n.tolist()])

    k_lo, k_hi = k_of(lo), k_of(hi)
    frac = af - lo
    k = np.where(hi == lo, k_lo, (1.0 - frac) * k_lo + frac * k_hi)
    out[fin] = k / (af - 1.0)
    return out


def sg_envelope(c: float, q: float, mu: float, add: bool, dx: float, xcut: float = 0.0, tau: float = 1.0,
                part: int = -1):
    """t -> log of a bound on |M(c + it')| for all |t'| >= t, for the subsampled Gaussian (0 < q < 1) or,
    with ``part`` >= 0, for one part of its split P-measure (see :class:`SubsampledGaussian`'s
    ``log_envelope_fn`` for the bound; the same construction on the part's weighted density)."""
    hist = np.zeros(1 << 13)
    log_mc, tv_norm, v_fine, gmax, total, u_min, b, x_first, x_last = sg_envelope_constants(
        c, q, mu, add, dx, xcut, tau, part, np.zeros(1 << 14), hist)
    if not math.isfinite(tv_norm):
        # the loss density's total variation overflowed (tiny sigma: the density in the loss variable
        # exceeds e^700 near log(1 - q)); keep only the trivial bound |M(c + it)| <= M(c)
        return lambda t: log_mc
    if not math.isfinite(v_fine):
        v_fine = 0.0  # V >= 0 always holds (a smaller V only weakens the bound)
    tv_norm *= 1.1
    t_max = 2.0 * tv_norm / 1.1
    edges, v_band = _curvature_bands(u_min, b, hist, total, t_max)
    if part >= 0:
        # a split part's tilted law can hold its bulk in a few bins of the full-range histogram (a
        # narrow core next to a tail reaching the cut): a second, fine histogram over the bulk's window
        # (pairs outside it dropped, which only lowers V) resolves it; per band the larger V holds
        window = _bulk_window(u_min, b, hist, total)
        if window is not None:
            # walk only the outputs x whose loss falls in the window (the loss is monotone in x)
            xs = sorted(_x_of_loss(-u if add else u, q, mu) for u in window)
            x_a, x_b = max(x_first, xs[0] - dx), min(x_last, xs[1] + dx)
            if x_a < x_b:
                fine = np.zeros(1 << 13)
                b_fine = sg_loss_histogram(c, q, mu, add, dx, gmax, *window, x_a, x_b, xcut, tau, part, fine)
                edges, v_band = _merge_bands(edges, v_band,
                                             *_curvature_bands(window[0], b_fine, fine, total, t_max))
    v_band = 0.9 * np.maximum(v_band, v_fine)
    with np.errstate(over="ignore", invalid="ignore"):  # t^2 V beyond float range: near bound 0
        curv = np.where(v_band > 0.0, np.r_[0.0, edges[:-1]] ** 2 * v_band, 0.0)
    near_at = np.sqrt(np.maximum(0.0, 1.0 - 2.0 * curv / math.pi**2))
    # suffix maxima of the bands' left-end values (the sup of near over t' >= the band's start)
    suffix = np.maximum.accumulate(near_at[::-1])[::-1]
    far_cap = tv_norm / t_max

    def env(t: float) -> float:
        t = abs(t)
        if t >= t_max:
            val = tv_norm / t
        else:
            k = int(np.searchsorted(edges, t))  # band k: (edges[k-1], edges[k]]
            near = math.sqrt(max(0.0, 1.0 - 2.0 * t * t * v_band[k] / math.pi**2))
            later = suffix[k + 1] if k + 1 < suffix.size else 0.0
            val = max(near, later, far_cap)
        return log_mc + math.log(min(1.0, val) + 1e-300)

    return env


@register
@dataclass(frozen=True)
class SubsampledGaussian(Mechanism):
    """Poisson-subsampled Gaussian mechanism (one DP-SGD step), add/remove relation.

    Parameters
    ----------
    sigma : float
        Noise standard deviation (the noise multiplier when ``sensitivity`` is the clipping norm 1), > 0.
    sample_rate : float
        Poisson sampling probability q in [0, 1].
    sensitivity : float, default 1.0
        L2 sensitivity of the summed query (clipping norm), > 0.
    """

    sigma: float
    sample_rate: float
    sensitivity: float = 1.0

    name = "subsampled_gaussian"
    symmetric = False
    tight = True
    pld_available = True
    relations = ("add_remove",)
    field_checks = {"sigma": V.positive, "sample_rate": V.probability, "sensitivity": V.positive}

    @property
    def mu(self) -> float:
        return self.sensitivity / self.sigma

    # ---------------------------------------------------------------- RDP
    #: orders above this get the Gaussian's RDP alpha mu^2 / 2 (an upper bound; :data:`RDP_EXACT_MAX`)
    rdp_exact_max = RDP_EXACT_MAX

    def rdp_int(self, alphas) -> np.ndarray:
        """Exact RDP at integer orders 2..``rdp_exact_max`` (tight formula, remove direction; Mironov,
        Talwar & Zhang 2019, Thm 11); above, the unsubsampled Gaussian's alpha mu^2 / 2 (upper bound)."""
        a = np.asarray(alphas, dtype=np.int64)
        q, mu2 = self.sample_rate, self.mu**2
        if q == 0.0:
            return np.zeros(a.shape)
        out = a * mu2 / 2.0
        exact = a <= self.rdp_exact_max
        if q == 1.0 or not np.any(exact):
            return out
        ae = a[exact]
        ell = np.arange(int(ae.max()) + 1, dtype=float)
        kv = ell * (ell - 1.0) * mu2 / 2.0
        out[exact] = np.minimum(poisson_rdp_int(ae, q, kv, 0), out[exact])
        return out

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        if self.sample_rate == 0.0:
            return np.zeros(al.shape)
        return np.minimum(_interpolate_cgf(al, self.rdp_int), al * self.mu**2 / 2.0)

    # ---------------------------------------------------------------- PLD
    @property
    def log_mgf_error(self) -> float:
        return 0.0 if self.sample_rate in (0.0, 1.0) else 2e-13

    def mgf_cost(self, t_max: float, c: float = 0.0, direction: str = "remove") -> float:
        """Cost hint per point (units of ~8 quadrature nodes): the larger of the typical cost and a bound
        on the kernel's work on the line Re s = c >= 0 (or at the real point c), |Im s| <= t_max.

        Typical: an x-grid of ~30/dx points, refined where the oscillation |t| mu exceeds 1/(2 dx); for
        mu > 8 the range of x that matters also grows with mu (measured: 0.09 s per call at mu = 1000).
        Bound (``sg_log_mgf``): with w = s + 1 or -s (|Re w| <= c + 1), 3 x 601 coarse points (half a
        node each: one l(x), no exp/cos/sin) and at
        most W / dx + 64 nodes, where W is the window found by the coarse scan (one coarse step each
        side) inside max(2 (14 + |Re w| mu) + mu, 2 (14 + sqrt(2 span))), and 1/dx <= 1/dx_max +
        2 |Im w| mu + sqrt(4 + |Re w| mu^2) (oscillation, curvature).  At large c the window is a few
        coarse steps but the step shrinks like 1 / (mu sqrt(c)): the work grows without bound (seconds
        per call at c = 1e5, mu = 5), which the typical cost (independent of c) would hide from the
        route's work meter.  When the closed-form window makes the bound exceed the typical cost, the
        window is measured by the kernel's coarse scan (``_window``).  The add direction (Re w = -c <= 0)
        integrates a fixed window around its peak x_p (``_add_peak``), and its curvature and oscillation
        terms use the sigmoid at the window's top + 1 (the kernel's rule), not its bound 1.
        """
        mu = self.mu
        typical = (30.0 / self._dx()) * max(1.0, mu / 8.0) + 30.0 * t_max * mu
        wr = abs(c) + 1.0
        inv_dx = 1.0 / self._dx() + 2.0 * t_max * mu + math.sqrt(4.0 + wr * mu * mu)
        fixed = 2.0 * (14.0 + math.sqrt(2.0 * _SPAN))  # the window of Re w <= 0 (around the add peak)
        width = max(2.0 * (14.0 + wr * mu) + mu, fixed) * (1.0 + 1.0 / 300.0)
        extra = 64.0 + 0.5 * 3 * 601
        if (width * inv_dx + extra) / 8.0 > typical and 0.0 < self.sample_rate < 1.0:
            if direction == "add":
                q = self.sample_rate
                width, top = self._window(-abs(c))
                y = math.log(q) + mu * (top + 1.0) - 0.5 * mu * mu - math.log1p(-q)
                sig = 1.0 / (1.0 + math.exp(-y)) if y > -700 else 0.0
                s2 = sig * (1.0 - sig) if sig <= 0.5 else 0.25
                inv_dx = (1.0 / self._dx() + 2.0 * t_max * mu * sig
                          + 2.0 * math.sqrt(1.0 + abs(c) * mu * mu * s2))
            else:
                width = max(self._window(wr)[0], fixed * (1.0 + 1.0 / 300.0))
        return max(typical, (width * inv_dx + extra) / 8.0)

    def _window(self, wr: float) -> tuple[float, float]:
        """(width, top) of the x-window that ``sg_log_mgf`` integrates for Re w = wr (the region where
        -x^2/2 + wr l(x) is within ``_SPAN`` of its maximum on the kernel's 601-point coarse grid: around
        0 for wr > 0, around the add peak for wr <= 0), one coarse step each side plus one more for the
        rounding of this numpy replica of the scan."""
        q, mu = self.sample_rate, self.mu
        lq, l1q = math.log(q), math.log1p(-q)
        if wr > 0.0:
            lo, hi = -(14.0 + wr * mu), 14.0 + wr * mu + mu
        else:
            xp = _add_peak(-wr, q, mu, lq, l1q)
            lo, hi = xp - 14.0 - math.sqrt(2.0 * _SPAN), xp + 14.0 + math.sqrt(2.0 * _SPAN)
        step = (hi - lo) / 600.0
        x = lo + step * np.arange(601)
        with np.errstate(over="ignore", invalid="ignore"):
            f = -0.5 * x * x + wr * np.logaddexp(l1q, lq + mu * x - 0.5 * mu * mu)
        inside = np.nonzero(f > np.max(f) - _SPAN)[0]
        if not (np.all(np.isfinite(f)) and inside.size):
            return hi - lo + 4.0 * step, hi + 2.0 * step  # (float trouble: the whole coarse range)
        return float(x[inside[-1]] - x[inside[0]]) + 4.0 * step, float(x[inside[-1]]) + 2.0 * step

    def _dx(self) -> float:
        return min(0.125, 0.25 / self.mu)

    def envelope_cost(self, c: float, direction: str = "remove") -> float:
        """The envelope's fine grid (step dx = min(0.004, 0.04/mu)) is walked a few times: ~256 units per
        node of a 30-wide grid, or 16 units per node (four passes, a margin of four) of the grid's real
        width (``sg_envelope_constants``: 2 (16 + (c + 1) mu) + 5 mu for remove, growing with c;
        32 + 5 mu around the add peak) when that is larger."""
        dx = min(0.004, 0.04 / self.mu)
        if direction == "add":
            width = 32.0 + 5.0 * self.mu
        else:
            width = 2.0 * (16.0 + (abs(c) + 1.0) * self.mu) + 5.0 * self.mu
        return max(256.0 * 30.0 / dx * max(1.0, self.mu / 8.0), 16.0 * width / dx)

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        q, mu = self.sample_rate, self.mu
        if q == 0.0:
            return np.zeros(s.shape, dtype=complex)
        if q == 1.0:
            # remove: the Gaussian pair; add: the swapped Gaussian pair has the same loss law
            return s * (s + 1.0) * (mu**2 / 2.0)
        flat = s.ravel()
        re, im = np.empty(flat.size), np.empty(flat.size)
        sg_log_mgf(np.ascontiguousarray(flat.real), np.ascontiguousarray(flat.imag), q, mu,
                   direction == "add", self._dx(), _SPAN, 0.0, 1.0, -1, re, im)
        return (re + 1j * im).reshape(s.shape)

    def total_variation(self, direction: str = "remove") -> float:
        """TV((1 - q) N(0, 1) + q N(mu, 1), N(0, 1)) = q erf(mu / (2 sqrt 2)) (exact, both directions)."""
        check_direction(direction)
        return self.sample_rate * math.erf(self.mu / (2.0 * math.sqrt(2.0)))

    def pld_atoms(self, direction: str = "remove") -> tuple[np.ndarray, np.ndarray]:
        if self.sample_rate == 0.0:
            return np.array([0.0]), np.array([1.0])
        return np.empty(0), np.empty(0)

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        """Cells of the loss (exact CDF differences of the output x; per-cell error bounds).

        The loss is monotone in x: remove, L = l(x) = log(1 - q + q e^{mu x - mu^2/2}) increasing, x under
        P = (1-q) N(0,1) + q N(mu,1); add, L = -l(x) decreasing, x under N(0,1).  Each edge is mapped to
        x(l) = (log(1-q) + log expm1(l - log(1-q)) - log q) / mu + mu/2 (-inf at or below log(1-q)), and
        the masses are mixtures of normal CDF differences (``mechanisms._cells.sg_cells``; the rounding
        of the inverse map is bounded and included).  q = 1 is the Gaussian, q = 0 the atom L = 0.
        """
        check_direction(direction)
        from ._cells import atoms_cell_masses, check_edges, gaussian_loss_cells, sg_cells

        e = check_edges(edges)
        q, mu = self.sample_rate, self.mu
        if q == 0.0:
            return atoms_cell_masses(e, [0.0], [1.0])
        if q == 1.0:
            return gaussian_loss_cells(e, mu)
        return sg_cells(e, q, mu, direction == "add")

    def pld_cell_offsets(self, edges: np.ndarray, direction: str = "remove"):
        """Bounds on E[L - e_{i-1} | cell i] / Delta_i from the convexity of the loss in x and the
        Gaussian shape of x inside the cell (``mechanisms._cells.sg_offsets``; Gaussian for q = 1,
        ``None`` for the atom q = 0)."""
        check_direction(direction)
        from ._cells import check_edges, gaussian_loss_offsets, sg_offsets

        e = check_edges(edges)
        q, mu = self.sample_rate, self.mu
        if q == 0.0:
            return None
        if q == 1.0:
            return gaussian_loss_offsets(e, mu)
        return sg_offsets(e, q, mu, direction == "add")

    def pld_cells_and_offsets(self, edges: np.ndarray, direction: str = "remove"):
        """``(m, err, lo, hi)``: ``pld_cell_masses`` and ``pld_cell_offsets`` in one pass (the inverse loss
        map is evaluated once per edge); ``None`` where the offsets are not available."""
        check_direction(direction)
        from ._cells import check_edges, sg_cells_x, sg_edges_x, sg_offsets_x

        e = check_edges(edges)
        q, mu = self.sample_rate, self.mu
        if q == 0.0:
            return None
        if q == 1.0:
            return (*self.pld_cell_masses(e, direction), *self.pld_cell_offsets(e, direction))
        add = direction == "add"
        xs, etas = sg_edges_x(e, q, mu, add)
        m, err = sg_cells_x(xs, etas, q, mu, add)
        lo, hi = sg_offsets_x(e, xs, etas, q, mu, add)
        return m, err, lo, hi

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        """t -> log of a bound on |M(c + it')| for all |t'| >= t (see :func:`sg_envelope` and
        ``_sg_envelope_kernels.sg_envelope_constants``).

        With X, X' iid from the e^{cL}-tilted loss law and 1 - cos y >= 2 y^2 / pi^2 on |y| <= pi,
        |M(c+it)|^2 / M(c)^2 = E cos(t (X - X')) <= 1 - 2 t^2 V(r) / pi^2
        with V(r) = E[(X - X')^2; |X - X'| <= r], for every r <= pi / t.  V(r) is bounded below on
        bands of t (r = pi / band edge) from a loss histogram (autocorrelation by FFT), and at
        r = pi / t_max from fine bins around the median;
        beyond t_max = 2 TV / M(c): |M| / M(c) <= TV / (M(c) t).  The returned function is the
        running maximum over t' >= t (non-increasing).  Safety margins: TV x 1.1, V x 0.9 (grid
        discretisation of the masses).
        """
        check_direction(direction)
        q, mu = self.sample_rate, self.mu
        if q == 0.0:
            return lambda t: -math.inf
        if q == 1.0:
            return lambda t: (c * c + c - t * t) * mu**2 / 2.0
        return sg_envelope(c, q, mu, direction == "add", min(0.004, 0.04 / mu))

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)


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
        # log M at real points, memoised for the life of this (query-local, never user-facing) object:
        # the line searches of the split's passes revisit the same points
        object.__setattr__(self, "_real", {})

    @property
    def mu(self) -> float:
        return self.sensitivity / self.sigma

    @property
    def log_mgf_error(self) -> float:
        return 2e-13

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
        rate = 2.0 * t_max * self.mu
        points = 30.0 * max(1.0 / self._dx(), rate) * max(1.0, self.mu / 8.0)
        typical = points + 600.0 + 120.0 / self.tau if t_max == 0.0 else points / 16.0 + 16.0
        return max(typical, self._work_bound(t_max, c, direction, typical))

    # -------------------------------------------------- cost bounds (the kernels' work at a given c)
    def _cf_zone(self) -> tuple[float, float]:
        """The x-range where the weight takes its continued fraction (37 <= -z <= 40, ``log_ndtr``; above
        z = -37 it is an erfc, below -40 the leading asymptotic term)."""
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

        The kernels (``sg_log_mgf``'s weighted branch, ``sg_part_line_log_mgf``), with w = s + 1
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
        mu = self.mu
        wr = -abs(c) if direction == "add" else abs(c) + 1.0
        wi = t_max  # (|Im w| = |Im s|)

        def cost(a: float, b: float, sig: float, scans: float) -> float:
            s2 = sig * (1.0 - sig) if sig <= 0.5 else 0.25
            inv_dx = max(1.0 / self._dx(), 2.0 * wi * mu * sig, 2.0 * math.sqrt(1.0 + abs(wr) * mu * mu * s2))
            n = max(65.0, (b - a) * inv_dx + 2.0)
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
        y = math.log(self.sample_rate) + mu * (b + 1.0) - 0.5 * mu * mu - math.log1p(-self.sample_rate)
        return cost(a, b, 1.0 / (1.0 + math.exp(-y)) if y > -700 else 0.0, scans)

    def _mgf_range(self, wr: float) -> tuple[float, float]:
        """The coarse scan range of the MGF kernels for Re w = wr (around the add peak for wr <= 0)."""
        if wr <= 0.0:
            q = self.sample_rate
            xp = _add_peak(-wr, q, self.mu, math.log(q), math.log1p(-q))
            return xp - 14.0 - math.sqrt(2.0 * _SPAN), xp + 14.0 + math.sqrt(2.0 * _SPAN)
        return -(14.0 + wr * self.mu), 14.0 + wr * self.mu + self.mu

    def _part_window(self, wr: float, lo: float, hi: float, span: float) -> tuple[float, float]:
        """An interval holding the x-window that ``_weighted_window`` finds for Re w = wr, coarse range
        [lo, hi] and ``span`` (a numpy replica: the points of its coarse and fine scans where
        -x^2/2 + wr l(x) + log w(x) is within span + 1 of the scans' maximum (one unit of slack for the
        replica's rounding), each widened by two steps of its scan (the kernel: one)).  Memoised."""
        key = ("window", wr, lo, hi, span)
        got = self._real.get(key)
        if got is not None:
            return got
        from scipy.special import log_ndtr

        q, mu, xcut, tau = self.sample_rate, self.mu, float(self.x_cut), float(self.tau)
        lq, l1q = math.log(q), math.log1p(-q)
        lo2, hi2, n_f = self._fine_range(wr)
        step, step2 = (hi - lo) / 600.0, (hi2 - lo2) / n_f
        xc, xf = lo + step * np.arange(601), lo2 + step2 * np.arange(n_f + 1)

        def f(x: np.ndarray) -> np.ndarray:
            z = (xcut - x) / tau if self.part == 0 else (x - xcut) / tau
            with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                return (-0.5 * x * x + wr * np.logaddexp(l1q, lq + mu * x - 0.5 * mu * mu)
                        + np.where(z > 9.0, 0.0, log_ndtr(z)))

        fc, ff = f(xc), f(xf)
        level = max(np.max(fc), np.max(ff)) - span - 1.0
        # (the kernel leaves the coarse points inside the fine range to the fine scan; points within a
        # fine step of its ends are kept here, against the rounding of the range test)
        inner = (xc > lo2 + step2) & (xc < hi2 - step2)
        found = ((xc, (fc > level) & ~inner, step), (xf, ff > level, step2))
        ends = [x[k] + sgn * 2.0 * h for x, k, h in found for sgn in (-1.0, 1.0) if np.any(k)]
        if np.all(np.isfinite(fc)) and np.all(np.isfinite(ff)) and ends:
            out = float(min(np.min(e) for e in ends)), float(max(np.max(e) for e in ends))
        else:  # (float trouble, or nothing found: both scan ranges)
            out = min(lo, lo2) - 2.0 * step, max(hi, hi2) + 2.0 * step
        self._real[key] = out
        return out

    def _env_dx(self) -> float:
        return min(0.004, 0.04 / self.mu, self.tau / 16.0)

    def envelope_cost(self, c: float, direction: str = "remove") -> float:
        """Cost of ``log_envelope_fn(c, direction)`` (unit of :meth:`mgf_cost`): the larger of the typical
        cost (a few walks over ~40 units of x at the envelope's step) and a bound on the work at this c.

        Bound (``sg_envelope_constants`` with the weight, then :func:`sg_envelope`): the window scans
        (``_scan_cost``), four passes over the grid of step dx = ``_env_dx`` on the window [a, b] that
        ``_weighted_window`` finds (span 120; ``_part_window``): l(x), the weight and up to two exps per
        point; two loss histograms, each walking at most W / dx + 2 x 8192 + 4 cells (two l(x), the
        weight, two exps); 2 x 8000 units for the FFTs and array passes of the curvature bands.  The
        weight's continued fraction is charged on the grid points in its zone and, for the histograms'
        refined cells (the 2 x 8192), by the zone's share of the window's loss range (a cell's share of
        the loss range is what refines it; for the second, bulk-window histogram this is an estimate: at
        most ~2 x 8192 x 11 units more, ~10 ms, when the bulk lies in the weight's far tail).
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
            cells = n + 2.0 * 8192.0 + 4.0
            hist = 2.0 * (self._grid_cost(a, b, n) + n * _OP_LW + cells * 2.0 * _OP_EXP
                          + 2.0 * 8192.0 * (_OP_LW * 2.0 + cf_share * _OP_CF))
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
        if cost(min(lo, lo2) - step, max(hi, hi2) + step, scans, 1.0) <= typical:
            return typical
        a, b = self._part_window(wr, lo, hi, 120.0)
        za, zb = max(a, self._cf_zone()[0]), min(b, self._cf_zone()[1])
        loss = np.logaddexp(l1q, lq + mu * np.array([a, b, za, zb]) - 0.5 * mu * mu)
        share = 0.0 if za >= zb else min(1.0, (loss[3] - loss[2]) / max(loss[1] - loss[0], 1e-300))
        return max(typical, cost(a, b, scans, share))

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        flat = s.ravel()
        args = (self.sample_rate, self.mu, direction == "add", self._dx(), _SPAN, float(self.x_cut),
                float(self.tau), int(self.part))
        if flat.size > 1 and np.all(flat.real == flat[0].real):  # nodes on one line: the line kernel
            re, im = sg_part_line_log_mgf(float(flat[0].real), np.ascontiguousarray(flat.imag), *args)
        else:
            re, im = np.empty(flat.size), np.empty(flat.size)
            sg_log_mgf(np.ascontiguousarray(flat.real), np.ascontiguousarray(flat.imag), *args, re, im)
        return (re + 1j * im).reshape(s.shape)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        key = (float(c), direction)
        v = self._real.get(key)
        if v is None:
            v = self._real[key] = float(self.log_mgf(np.array([complex(c)]), direction)[0].real)
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


def _rdp_base(name: str, base: Mechanism) -> Mechanism:
    """The base mechanism of :class:`PoissonSubsampled`: a Mechanism without infinite-loss mass."""
    if not isinstance(base, Mechanism):
        raise TypeError(f"{name} must be a Mechanism, got {type(base).__name__}")
    if base.infinite_loss_mass > 0:
        raise ValueError(f"{name} must have no infinite-loss mass (delta); subsample an (eps, delta) "
                         "guarantee with ApproxDP(log1p(q*expm1(eps)), q*delta) instead")
    return base


@register
@dataclass(frozen=True)
class PoissonSubsampled(Mechanism):
    """Poisson subsampling with rate ``sample_rate`` of any mechanism ``base`` that has an RDP curve.

    RDP only (upper bound; see the module docstring).  ``base`` must have no infinite-loss mass: for an
    (eps, delta) guarantee use Lemma 2.2.2 directly, ``ApproxDP(log1p(q expm1(eps)), q delta)``.
    """

    base: Mechanism
    sample_rate: float

    name = "poisson_subsampled"
    symmetric = False
    tight = False
    relations = ("add_remove",)

    field_checks = {"base": _rdp_base, "sample_rate": V.probability}

    @classmethod
    def from_params(cls, params: dict) -> PoissonSubsampled:
        p = dict(params)
        p["base"] = from_dict(p["base"])
        return cls(**p)

    @property
    def pure_epsilon(self) -> float:
        e = self.base.pure_epsilon
        return math.log1p(self.sample_rate * math.expm1(e)) if math.isfinite(e) else math.inf

    #: orders above this get the base mechanism's RDP (an upper bound; :data:`RDP_EXACT_MAX`)
    rdp_exact_max = RDP_EXACT_MAX

    def rdp_int(self, alphas, mode: str = "auto") -> np.ndarray:
        """RDP at integer orders >= 2; ``mode`` in {"auto", "tight", "general"} (general = Thm 2.3.1);
        above ``rdp_exact_max`` the base mechanism's RDP (an upper bound)."""
        a = np.asarray(alphas, dtype=np.int64)
        q = self.sample_rate
        if q == 0.0:
            return np.zeros(a.shape)
        base_at = np.asarray(self.base.rdp(a.astype(float)), dtype=float)
        if q == 1.0:
            return base_at
        exact = a <= self.rdp_exact_max
        if not np.all(exact):
            out = base_at.copy()
            if np.any(exact):
                out[exact] = self.rdp_int(a[exact], mode)
            pe = self.pure_epsilon
            return np.minimum(out, pe) if math.isfinite(pe) else out
        amax = int(a.max())
        ell = np.arange(2, amax + 1, dtype=float)
        kv = np.zeros(amax + 1)
        kv[2:] = (ell - 1.0) * np.asarray(self.base.rdp(ell), dtype=float)
        kv[2:] = np.maximum.accumulate(kv[2:])  # CGF of a valid curve is non-decreasing; keep monotone
        tight = mode == "tight" or (mode == "auto" and getattr(self.base, "poisson_tight", False))
        lval = poisson_rdp_int(a, q, kv, 0)
        if tight:
            val = lval
        else:
            gval = poisson_rdp_int(a, q, kv, 1)
            val = np.minimum(gval, np.maximum(lval, -math.log1p(-q)))
        val = np.minimum(val, base_at)
        pe = self.pure_epsilon
        return np.minimum(val, pe) if math.isfinite(pe) else val

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        if self.sample_rate == 0.0:
            return np.zeros(al.shape)
        out = _interpolate_cgf(al, self.rdp_int)
        fin = np.isfinite(al)
        out[fin] = np.minimum(out[fin], np.asarray(self.base.rdp(al[fin]), dtype=float))
        out[~fin] = self.pure_epsilon
        return np.minimum(out, self.pure_epsilon)


@register
@dataclass(frozen=True)
class SubsampledLaplace(Mechanism):
    """Poisson-subsampled Laplace mechanism (add/remove), with both dominating pairs (Zhu, Dong & Wang 2022).

    With a = sensitivity / scale and r(x) = e^{(2x - 1) a} the likelihood ratio of Lap(1) to Lap(0) in
    units of the sensitivity (clipped to [e^{-a}, e^{a}]), the remove pair is
    ((1-q) Lap(0) + q Lap(1), Lap(0)) and the add pair its swap.  Under Q = Lap(0) the loss of the remove
    pair is l(x) = log(1 - q + q r(x)): an atom log(1-q+qe^{-a}) (Q-mass 1/2), an atom
    log(1-q+qe^{a}) (Q-mass e^{-a}/2), and a smooth part on x in (0, 1).  M(s) = E_Q[(1-q+qr)^{s+1}]
    (remove) and E_Q[(1-q+qr)^{-s}] (add); the smooth part by composite Gauss-Legendre quadrature.
    RDP: the tight Poisson-subsampled Laplace curve (``PoissonSubsampled``; Laplace satisfies (2.2)).
    """

    scale: float
    sample_rate: float
    sensitivity: float = 1.0

    name = "subsampled_laplace"
    symmetric = False
    tight = True
    pld_available = True
    relations = ("add_remove",)
    field_checks = {"scale": V.positive, "sample_rate": V.open_unit, "sensitivity": V.positive}

    @property
    def a(self) -> float:
        return self.sensitivity / self.scale

    def _as_poisson(self) -> PoissonSubsampled:
        from .laplace import Laplace

        return PoissonSubsampled(Laplace(self.scale, self.sensitivity), self.sample_rate)

    def rdp(self, alpha) -> np.ndarray:
        return self._as_poisson().rdp(alpha)

    @property
    def pure_epsilon(self) -> float:
        return self._as_poisson().pure_epsilon

    @property
    def log_mgf_error(self) -> float:
        return 1e-13

    def mgf_cost(self, t_max: float, c: float = 0.0, direction: str = "remove") -> float:
        """10-point Gauss-Legendre panels, (|Im w| + |Re w|) a / 2 + a + 5 of them at most (w = s + 1 or
        -s; ``sl_middle_log_mgf``), walked twice: the typical cost (average over [0, t_max] at small
        |Re s|) or a quarter of that bound at |Re s| <= c, whichever is larger."""
        a = self.a
        typical = 10.0 * (4.0 + a * t_max / 4.0)
        bound = 2.0 * 10.0 * ((t_max + abs(c) + 1.0) * a / 2.0 + a + 5.0)
        return max(typical, bound / 4.0)

    def _atom_losses(self) -> tuple[float, float]:
        q, a = self.sample_rate, self.a
        return math.log1p(q * math.expm1(-a)), math.log1p(q * math.expm1(a))

    def pld_atoms(self, direction: str = "remove") -> tuple[np.ndarray, np.ndarray]:
        check_direction(direction)
        q, a = self.sample_rate, self.a
        lo, hi = self._atom_losses()
        if direction == "remove":  # P' = (1-q) Lap(0) + q Lap(1)
            return np.array([lo, hi]), np.array([(1 - q) / 2 + q * math.exp(-a) / 2,
                                                 (1 - q) * math.exp(-a) / 2 + q / 2])
        return np.array([-lo, -hi]), np.array([0.5, 0.5 * math.exp(-a)])  # under Q = Lap(0)

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        flat = s.ravel()
        q, a = self.sample_rate, self.a
        lo, hi = self._atom_losses()
        w = flat + 1.0 if direction == "remove" else -flat
        # atoms written under Q: masses 1/2 and e^{-a}/2 at exponents w*lo, w*hi
        t_lo = math.log(0.5) + w * lo
        t_hi = math.log(0.5) - a + w * hi
        mre, mim = sl_middle_log_mgf(np.ascontiguousarray(flat.real), np.ascontiguousarray(flat.imag),
                                     q, a, direction == "add")
        terms = np.stack([t_lo, t_hi, mre + 1j * mim])
        from ._numerics import complex_logsumexp

        return complex_logsumexp(terms, axis=0).reshape(s.shape)

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        """Cells of the loss: the two atoms (``pld_atoms``, on-edge atoms go below) plus the closed-form
        masses of the continuous part over the inverse image of each cell (``mechanisms._cells.sl_cells``;
        per-cell error bounds)."""
        check_direction(direction)
        from ._cells import atoms_cell_masses, check_edges, sl_cells

        e = check_edges(edges)
        ma, ea = atoms_cell_masses(e, *self.pld_atoms(direction))
        mc, ec = sl_cells(e, self.sample_rate, self.a, direction == "add")
        return ma + mc, ea + ec + 2.0**-53 * (ma + mc)

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        """t -> log bound on |C(c + it')|, |t'| >= t: min(C(c), 1.1 (f(lo) + f(hi) + TV f) / t)."""
        check_direction(direction)
        q, a = self.sample_rate, self.a
        mre, _ = sl_middle_log_mgf(np.array([float(c)]), np.array([0.0]), q, a, direction == "add")
        log_c0 = float(mre[0])
        log_b = math.log(1.1 * sl_middle_tv(float(c), q, a, direction == "add", 20000))
        return lambda t: log_c0 if t <= 0 else min(log_c0, log_b - math.log(t))

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)
