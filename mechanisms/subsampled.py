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
      Near-atomic laws (small q and sigma: the tilted mass crowds within ~q e^{-mu^2} of log(1 - q),
      finer than the bands resolve, and TV / t only acts past t ~ 1e7 or overflows) take the split
      bound: split at an output x_k, one side bounded by its mass, the other by parts,
      |M(c + it)| / M(c) <= m_k + (f(x_k) + TV of f on that side) / |t|, minimised over 256 points x_k
      and both sides (same margins).  At q = 1e-3, sigma = 0.3, T = 1e5 this took a contour from its
      node cap (4097 nodes, a 1 % bracket, 2.7 s) to 129 nodes (13 ms, 3e-8).  Far out (past the
      curvature regime, where the other bounds fall like 1/t) the contour-shift bound: the x-integral
      of M moved to Im x = y inside the strip of analyticity |Im x| < pi / mu of l, where e^{itl}
      becomes e^{-t |Im l(x + iy)|}, |M(c + it)| <= int |integrand(x + iy)| dx (module
      ``sg_envelope``); a split's big part at t = 1000: e^-32 of M(c) instead of e^-4.6 (true ~e^-34).
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
from ._numerics import mul_up_array
from ._poisson_kernels import (
    poisson_rdp_int,
    sg_log_mgf,
    sg_phase_moment,
    sg_search_range,
    sg_window,
)
from ._sg_line_kernels import sg_line_log_mgf
from .base import Mechanism, as_complex_array, check_direction
from .gaussian import gaussian_rdp_upper
from .registry import register
from .sg_envelope import sg_envelope, shift_cost

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
_U = 2.0**-53


def sg_phase_error(c: float, t_max: float, args: tuple) -> float:
    """The line kernels' phase rounding on Re s = c, |Im s| <= ``t_max``, relative to M(c) (the form of
    ``log_mgf_error``); ``args`` the kernels' arguments after the points (:func:`sg_quadrature`).

    Each grid term g_i e^{i t l_i}.  The loss l = logaddexp(log(1 - q), b), b = log q + mu x - mu^2/2,
    is off by at most 4 u sig (|log q| + mu |x| + mu^2/2) + 2 u (|l| + |log(1 - q)| + 2): b's rounding
    (two ulps of its terms) reaches l through dl/db = sig = l'(x) / mu (the sigmoid of b - log(1 - q);
    <= 2 sig on the branch b > log(1 - q), where sig > 1/2), and exp, log1p, the final sum and
    log(1 - q) itself add ulps of their sizes.  The phase products t l (direct path) or t_mid l, h l
    and the reduction mod 2 pi amplified by the mode |k'| (NUFFT path) add at most 3 u t |l|; the trig
    calls and rotations 64 u.  Summed with the weights g_i and divided by sum g_i = M(c) on the grid:
    u (t_max (E[5 |l| + 4 sig (|log q| + mu |x| + mu^2/2)] + 2 |log(1 - q)| + 4) + 64), the expectation
    under the weights (``sg_phase_moment``, on the real point's grid of the same window; x 1.1 for the
    line grids' different step).  Measured need: at t ~ 1200, |l| ~ 8 the direct path was off by
    2.4e-13 of M(c) against a 30-digit reference, more than the constant declared error 2e-13 alone."""
    if not t_max > 0.0:
        return 0.0
    q = args[0]
    moment = sg_phase_moment(float(c), *args)
    if not math.isfinite(moment):  # (never a NaN error bound: the routes treat this as a failed line)
        raise FloatingPointError(f"non-finite phase-rounding weight of the subsampled Gaussian at c = {c}")
    return _U * (t_max * (1.1 * moment + 2.0 * abs(math.log1p(-q)) + 4.0) + 64.0) * (1.0 + 1e-9)


def _interpolate_cgf(alpha: np.ndarray, int_eps) -> np.ndarray:
    """eps at real alpha > 1 by linear interpolation of K(a) = (a - 1) eps(a) between integers (R10).

    ``int_eps(ints)`` returns eps at integer orders >= 2 (int64 array), upper bounds.  K(1) = 0, so alpha
    in (1, 2) gives eps(2) (monotonicity).  The values at integers are returned as they are; between
    them the interpolation (two products, a sum and a division: < 4 ulps) is rounded up by 4 ulps and
    one step, so an upper bound stays one.
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
    with np.errstate(invalid="ignore"):
        v = ((1.0 - frac) * k_lo + frac * k_hi) / (af - 1.0)
        v = np.where(v > 0.0, np.nextafter(v * (1.0 + 4.0 * 2.0**-53), np.inf), v)
    at_int = np.array([table.get(x, math.inf) if x >= 2 else math.inf for x in lo.tolist()])
    out[fin] = np.where(hi == lo, at_int, v)
    return out


def sg_quadrature(s: np.ndarray, args: tuple) -> np.ndarray:
    """log M at the complex points ``s`` by the trapezoid kernels (``args``: the kernels' arguments after
    the points, ``(q, mu, add, dx_max, span, xcut, tau, part)``): nodes on one line (one real part, the
    contour's grids) by ``sg_line_log_mgf``, other points one by one by ``sg_log_mgf``."""
    flat = s.ravel()
    if flat.size > 1 and np.all(flat.real == flat[0].real):
        re, im = sg_line_log_mgf(float(flat[0].real), np.ascontiguousarray(flat.imag), *args)
    else:
        re, im = np.empty(flat.size), np.empty(flat.size)
        sg_log_mgf(np.ascontiguousarray(flat.real), np.ascontiguousarray(flat.imag), *args, re, im)
    return (re + 1j * im).reshape(s.shape)


def sg_log_mgf_real(c: float, args: tuple) -> float:
    """log M at one real point ``c`` by the per-point kernel (``args`` as in :func:`sg_quadrature`): the
    line searches' scalar calls, the same value as ``sg_quadrature`` at [c] without its array handling."""
    re, im = np.empty(1), np.empty(1)
    sg_log_mgf(np.array([float(c)]), np.zeros(1), *args, re, im)
    return float(re[0])


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
        q = self.sample_rate
        if q == 0.0:
            return np.zeros(a.shape)
        out = gaussian_rdp_upper(a.astype(float), self.sensitivity, self.sigma)
        exact = a <= self.rdp_exact_max
        if q == 1.0 or not np.any(exact):
            return out
        ae = a[exact]
        ell = np.arange(int(ae.max()) + 1, dtype=float)
        # K(l) = l (l - 1) Delta^2 / (2 sigma^2), rounded up (the kernel's summands increase with K)
        kv = mul_up_array(ell * (ell - 1.0), gaussian_rdp_upper(1.0, self.sensitivity, self.sigma))
        out[exact] = np.minimum(poisson_rdp_int(ae, q, kv, 0), out[exact])
        return out

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        if self.sample_rate == 0.0:
            return np.zeros(al.shape)
        cap = gaussian_rdp_upper(al, self.sensitivity, self.sigma)
        return np.minimum(_interpolate_cgf(al, self.rdp_int), cap)

    # ---------------------------------------------------------------- PLD
    @property
    def log_mgf_error(self) -> float:
        return 0.0 if self.sample_rate in (0.0, 1.0) else 2e-13

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        """The line kernel's phase rounding (:func:`sg_phase_error`); 0 for the closed forms q = 0, 1."""
        if self.sample_rate in (0.0, 1.0):
            return 0.0
        return sg_phase_error(c, t_max, self._kernel_args(direction))

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

        Nodes on one line (the contour's grids) are evaluated by the line kernel ``sg_line_log_mgf``
        (shared grid, phases by rotation) at a fraction of this cost: the hint stays the per-point
        kernel's, an over-estimate (safe for the meter) that keeps the contour's plans as they were.
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
        0 for wr > 0, around the add peak for wr <= 0), measured by the kernel's own scan
        (``sg_window``: one coarse step each side), plus one more coarse step each side (margin)."""
        q, mu = self.sample_rate, self.mu
        lo, hi = sg_search_range(wr, q, mu, _SPAN)
        step = (hi - lo) / 600.0
        _, a, b = sg_window(wr, q, mu, lo, hi, 0.0, 1.0, -1, _SPAN)
        if not (math.isfinite(a) and math.isfinite(b) and a < b):
            return hi - lo + 4.0 * step, hi + 2.0 * step  # (float trouble: the whole coarse range)
        return (b - a) + 2.0 * step, b + step

    def _dx(self) -> float:
        return min(0.125, 0.25 / self.mu)

    def envelope_cost(self, c: float, direction: str = "remove") -> float:
        """The envelope's fine grid (step dx = min(0.004, 0.04/mu)) is walked a few times: ~256 units per
        node of a 30-wide grid, or 16 units per node (three passes and two bin-aligned walks, a margin of
        two) of the grid's real width (``sg_envelope_constants``: 2 (16 + (c + 1) mu) + 5 mu for remove,
        growing with c; 32 + 5 mu around the add peak) when that is larger; the walks' per-bin work
        (3 x 8192 bins: a pre-image and a cell each, ~6e4 units) lies far inside the first term.  Plus
        the contour-shift bound on that width (:func:`mechanisms.sg_envelope.shift_cost`)."""
        dx = min(0.004, 0.04 / self.mu)
        if direction == "add":
            width = 32.0 + 5.0 * self.mu
        else:
            width = 2.0 * (16.0 + (abs(c) + 1.0) * self.mu) + 5.0 * self.mu
        walks = max(256.0 * 30.0 / dx * max(1.0, self.mu / 8.0), 16.0 * width / dx)
        return walks + shift_cost(width, self.mu)

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        q, mu = self.sample_rate, self.mu
        if q == 0.0:
            return np.zeros(s.shape, dtype=complex)
        if q == 1.0:
            # remove: the Gaussian pair; add: the swapped Gaussian pair has the same loss law
            return s * (s + 1.0) * (mu**2 / 2.0)
        return sg_quadrature(s, self._kernel_args(direction))

    def _kernel_args(self, direction: str) -> tuple:
        return (self.sample_rate, self.mu, direction == "add", self._dx(), _SPAN, 0.0, 1.0, -1)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        check_direction(direction)
        if self.sample_rate in (0.0, 1.0):
            return super().log_mgf_real(c, direction)
        return sg_log_mgf_real(c, self._kernel_args(direction))

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

    def pld_loss_floor(self, direction: str = "remove") -> float:
        """A lower bound on the privacy loss of every outcome: log(1 - q) (one ulp lower) for remove,
        where l(x) = log(1 - q + q e^{mu x - mu^2/2}) > log(1 - q); -inf for add (L = -l(x) is unbounded
        below) and for q = 1 (the Gaussian loss); 0 for q = 0 (the atom L = 0)."""
        check_direction(direction)
        q = self.sample_rate
        if q == 0.0:
            return 0.0
        if direction == "add" or q == 1.0:
            return -math.inf
        return math.nextafter(math.log1p(-q), -math.inf)

    def pld_upper_tail(self, level: float, direction: str = "remove"):
        """Certified bounds ``(p_lo, p_up, q_lo, q_up)`` on P(L > level) and Q(L > level) of the dominating
        pair (P, Q) (remove: P = (1 - q) N(0, 1) + q N(mu, 1), Q = N(0, 1)), or ``None`` (add, q in {0, 1}).

        L > level iff x > x(level) (the loss is increasing in x); P's mass there is the remove cell above
        ``level`` and Q's the add direction's cell L' = -l(x) <= -level (Q = N(0, 1) is the add pair's P;
        the loss has no atoms for 0 < q < 1), both exact Phi tails with ``sg_cells``' error bounds."""
        check_direction(direction)
        from ._cells import sg_cells

        q, mu = self.sample_rate, self.mu
        if direction == "add" or not (0.0 < q < 1.0) or not math.isfinite(level):
            return None
        m, e = sg_cells(np.array([float(level)]), q, mu, False)
        mq, eq = sg_cells(np.array([-float(level)]), q, mu, True)
        return (max(float(m[1] - e[1]), 0.0), min(float(m[1] + e[1]), 1.0),
                max(float(mq[0] - eq[0]), 0.0), min(float(mq[0] + eq[0]), 1.0))

    def pld_cell_offsets(self, edges: np.ndarray, direction: str = "remove"):
        """Bounds on E[L - e_{i-1} | cell i] / Delta_i from the convexity of the loss in x and the
        Gaussian shape of x inside the cell (``mechanisms._cell_offsets.sg_offsets``; Gaussian for q = 1,
        ``None`` for the atom q = 0)."""
        check_direction(direction)
        from ._cell_offsets import gaussian_loss_offsets, sg_offsets
        from ._cells import check_edges

        e = check_edges(edges)
        q, mu = self.sample_rate, self.mu
        if q == 0.0:
            return None
        if q == 1.0:
            return gaussian_loss_offsets(e, mu)
        return sg_offsets(e, q, mu, direction == "add")

    def pld_cell_q_masses(self, edges: np.ndarray, direction: str = "remove"):
        """Masses of the loss cells under Q (remove: Q = N(0, 1); add: Q = (1 - q) N(0, 1) + q N(mu, 1)),
        i.e. E_P[e^{-L}; cell] on the finite cells, with per-cell error bounds (``sg_q_cells_x``: the
        same inverse map and normal CDF differences as ``pld_cell_masses``); ``None`` for q in {0, 1}
        (the Gaussian's cell offsets are exact to second order already)."""
        from ._cells import sg_q_cells_x

        xs = self._edges_x(edges, direction)
        return None if xs is None else sg_q_cells_x(*xs)

    def pld_cells_and_q_masses(self, edges: np.ndarray, direction: str = "remove"):
        """``(m, err, mq, err_q)``: ``pld_cell_masses`` and ``pld_cell_q_masses`` in one pass (the inverse
        loss map is evaluated once per edge); ``None`` for q in {0, 1}."""
        from ._cells import sg_cells_x, sg_q_cells_x

        xs = self._edges_x(edges, direction)
        return None if xs is None else (*sg_cells_x(*xs), *sg_q_cells_x(*xs))

    def _edges_x(self, edges: np.ndarray, direction: str):
        """``(x, eta, q, mu, add)``: the edges' x with their rounding bounds and the kernels' remaining
        arguments (``mechanisms._cells.sg_edges_x``); ``None`` for q in {0, 1}."""
        check_direction(direction)
        from ._cells import check_edges, sg_edges_x

        e = check_edges(edges)
        q, mu = self.sample_rate, self.mu
        if q in (0.0, 1.0):
            return None
        add = direction == "add"
        return (*sg_edges_x(e, q, mu, add), q, mu, add)

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
