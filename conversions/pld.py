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
* Upper coupling Y_up: cell i -> e_i (cell 0 -> e_0, mass moved up), top -> +inf.  Y_up >= L, so
  delta <= 1 - prod_j (1 - p_inf_j - top_j)^{k_j} + E[f_eps(S_up); all finite].
* Lower coupling Y_lo = Y_up - Delta on cells 1..n-1, cell 0 and top dropped (f >= 0).  Y_lo <= L and
  S_lo = S_up - T Delta on the kept event, so delta >= p_inf_total + E[f_{eps + T Delta}(S_up); kept],
  and the composed kept measure differs from the composed U0 (all finite cells) by at most the hybrid
  bound below with the cell-0 masses (``corr0``).

Nearest-point rounding with a certified mean (used instead when every mechanism implements
``pld_cell_offsets`` and 1.45 sqrt(T log(1/beta)) < T; in the spirit of the mean-preserving randomised
rounding of Gopi, Lee & Wutschitz 2021, but deterministic, so the lattice law is exactly a vector of cell
masses).  The cells are re-cut at the midpoints y_j + Delta/2 and every cell goes to its lattice point
(cell 0 (-inf, y_0] -> y_0; the top and L = inf excluded as above), so D = Y - L lies, given its cell, in
an interval of length <= Delta, and its conditional mean b_j = (y - E_{j-1}) - r_j d_j is bracketed by
certified bounds on the conditional offset r_j = E[L - E_{j-1} | cell j] / d_j (``pld_cell_offsets``:
second order in Delta for smooth losses).  With S_Y = S + sum D:
    delta(eps) <= P(top or inf) + E[f_{eps - eta_up}(S_Y); finite] + P(sum D < -eta_up; finite),
    delta(eps) >= p_inf + E[f_{eps + eta_lo}(S_Y); cells 1..] - P(sum D > eta_lo; cells 1..)
(f_eps non-decreasing, 0 <= f <= 1).  The tails by Chernoff with Hoeffding's lemma per cell
(``_rr_log_tail``): log E e^{lam D} <= lam mu + lam^2 (Delta^2/8 + e^{|lam| Delta} V2/2), mu and V2
bounds on the mean and second moment of the cell biases.  eta_up, eta_lo make both tails
<= beta = 0.1 rtol delta_ref, so the loss bracket is ~ Delta sqrt(2 T log(1/beta)) + T |mean bias| instead
of T Delta.  Only bias bounds enter (in loss units): an error in the offsets never becomes a mass
(total-variation) error multiplied by T.

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

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from mechanisms.base import Mechanism, check_direction

from .contour import DeltaBounds, EpsilonBounds

U = 2.0**-53
_PROBE = 4096
_BLOCK = 64
DEFAULT_MAX_POINTS = 1 << 21


# ----------------------------------------------------------------------------------------- helpers
def _check_entries(entries) -> list[tuple[Mechanism, int]]:
    out = []
    try:
        items = list(entries)
    except TypeError:
        raise TypeError("entries must be a sequence of (Mechanism, count) pairs") from None
    for item in items:
        if not (isinstance(item, tuple | list) and len(item) == 2):
            raise TypeError(f"entries must hold (Mechanism, count) pairs, got {item!r}")
        m, k = item
        if not isinstance(m, Mechanism):
            raise TypeError(f"entries: expected a Mechanism, got {type(m).__name__}")
        if isinstance(k, bool) or int(k) != k or int(k) < 0:
            raise ValueError(f"entries: count must be an integer >= 0, got {k!r}")
        if int(k) > 0:
            out.append((m, int(k)))
    return out


def _check_rtol(rtol) -> float:
    if not (isinstance(rtol, int | float) and 1e-9 <= rtol <= 0.5):
        raise ValueError(f"rtol must lie in [1e-9, 0.5], got {rtol!r}")
    return float(rtol)


def _check_max_points(n) -> int:
    if isinstance(n, bool) or int(n) != n or not (1 << 10) <= int(n) <= (1 << 27):
        raise ValueError(f"max_points must be an integer in [2**10, 2**27], got {n!r}")
    return int(n)


def _lattice_step(target: float) -> float:
    """Largest c 2^e <= target with c in {1, 1.25, 1.5, 1.75}: i * step is exact for |i| < 2^50."""
    e = math.floor(math.log2(target))
    base = 2.0**e
    for c in (1.75, 1.5, 1.25, 1.0):
        if c * base <= target:
            return c * base
    return base


def _masses(mech: Mechanism, edges: np.ndarray, direction: str):
    res = mech.pld_cell_masses(edges, direction)
    if res is None:
        raise ValueError(f"{mech.describe()} has no cell masses (pld_cell_masses returned None)")
    return _check_masses(mech, edges, *res)


def _check_masses(mech: Mechanism, edges: np.ndarray, m, err):
    m = np.asarray(m, dtype=float)
    if m.shape != (edges.size + 1,) or not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError(f"{mech.describe()}: pld_cell_masses returned invalid masses")
    if np.ndim(err) == 0:
        err = float(err)
        if not (math.isfinite(err) and err >= 0):
            raise ValueError(f"{mech.describe()}: pld_cell_masses returned an invalid error {err!r}")
    else:
        err = np.asarray(err, dtype=float)
        if err.shape != m.shape or not np.all(err >= 0) or not np.all(np.isfinite(err)):
            raise ValueError(f"{mech.describe()}: pld_cell_masses returned invalid error bounds")
    return m, err


def _lse(logw: np.ndarray) -> float:
    mx = float(np.max(logw))
    if mx == -math.inf:
        return -math.inf
    return mx + math.log(float(np.sum(np.exp(logw - mx))))


def _log_kappa(x: float) -> float:
    """log of kappa(x) = x^x / (1 + x)^{1 + x}: (1 - e^{-u})_+ <= kappa(x) e^{x u} for x > 0."""
    return x * math.log(x) - (1.0 + x) * math.log1p(x)


# ----------------------------------------------------------------------------------------- ranges
def _probe_range(mech: Mechanism, direction: str, theta_ref: float, tgt_lo: float,
                 tgt_hi: float) -> tuple[float, float]:
    """Losses (lo, hi) for the grid of one entry, from exact cell masses on a 4097-point probe grid
    (widened by doubling until both tails are small):

    * hi: P(L > hi) <= tgt_hi (that mass goes to +inf in the upper bound: it must be tiny);
    * lo: P(L <= lo) e^{theta_ref lo} / M(theta_ref) <= tgt_lo -- the mass below lo is moved up to lo
      in the upper coupling (no error) and dropped in the lower one, where it costs its tilted mass.
    Only the efficiency depends on these choices, never the soundness.
    """
    a, b = -1.0, 1.0
    for _ in range(80):
        edges = np.linspace(a, b, _PROBE + 1)
        m, _ = _masses(mech, edges, direction)
        with np.errstate(divide="ignore"):
            logm = _lse(np.log(m[:-1]) + theta_ref * edges)
        grow_lo = m[0] > 0 and math.log(m[0]) + theta_ref * a - logm > math.log(tgt_lo)
        grow_hi = m[-1] > tgt_hi
        if not (grow_lo or grow_hi):
            break
        w = b - a
        if grow_lo:
            a -= w
        if grow_hi:
            b += w
    else:
        raise ValueError(f"{mech.describe()}: loss distribution tails too heavy for the PLD route")
    cdf = np.cumsum(m[:-1])  # P(L <= e_j)
    with np.errstate(divide="ignore"):
        tilted = np.log(cdf) + theta_ref * edges - logm
    sf = np.cumsum(m[::-1])[::-1][1:]  # P(e_j < L < inf)
    ok_lo = np.nonzero(tilted <= math.log(tgt_lo))[0]
    j_lo = int(ok_lo[-1]) if ok_lo.size else 0
    # tilted is not monotone in general: take the last edge below which every edge is fine
    bad = np.nonzero(tilted[: j_lo + 1] > math.log(tgt_lo))[0]
    if bad.size:
        j_lo = max(int(bad[0]) - 1, 0)
    # at a large theta_ref the tilted law can sit far above the bulk of P (e.g. Poisson-subsampled
    # losses at small q: P concentrates near log(1 - q) while the tilted mass lives in the far tail);
    # keep the bulk on the finite cells (lo below the median) so cells 1.. carry mass
    j_med = int(np.searchsorted(cdf, 0.5, side="left"))  # first edge with P(L <= e_j) >= 1/2
    j_lo = min(j_lo, max(j_med - 1, 0))
    j_hi = int(np.searchsorted(-sf, -tgt_hi, side="left"))  # first j with sf <= tgt_hi
    j_hi = min(max(j_hi, j_lo + 1), edges.size - 1)
    return float(edges[j_lo]), float(edges[j_hi])


# ----------------------------------------------------------------------------------------- steps
@dataclass(frozen=True)
class _Step:
    """One ledger entry on the lattice: cells 0..n-1 at y = (lo + i) Delta, top mass above."""

    k: int
    p_inf: float
    lo: int
    m: np.ndarray
    err: np.ndarray | float
    top: float
    top_err: float
    m0: float = 0.0  # cell-0 mass + its error bound (the lower bound drops cell 0)
    # mean-preserving rounding (None: round-up cells): conditional means of D = Y - L per step, in loss
    # units -- upper: lower bound over cells 0..n-1 (cell 0 as min(D, Delta)); lower: upper bound over
    # cells 1..n-1; and bounds on the conditional second moments of the cell biases
    rr: tuple | None = None

    @property
    def n(self) -> int:
        return self.m.size


def _make_step(mech: Mechanism, k: int, direction: str, step: float, lo: float, hi: float,
               rr: bool = False) -> _Step:
    i_lo = math.floor(lo / step)
    i_hi = max(math.ceil(hi / step), i_lo + 1)
    if rr:  # rounding to the nearest lattice point: edges y_0, then y_j + Delta/2 (exact floats)
        n = i_hi - i_lo + 1
        edges = np.empty(n + 1)
        edges[0] = i_lo * step
        edges[1:] = (i_lo + np.arange(n) + 0.5) * step
    else:
        edges = np.arange(i_lo, i_hi + 1, dtype=float) * step
    both = getattr(mech, "pld_cells_and_offsets", None) if rr else None
    both = both(edges, direction) if both is not None else None
    if both is not None:
        m, err = _check_masses(mech, edges, both[0], both[1])
    else:
        m, err = _masses(mech, edges, direction)
    p_inf = mech.infinite_loss_mass
    if np.ndim(err) == 0:
        e0, e_top, err_c = float(err), float(err), float(err)
    else:
        e0, e_top, err_c = float(err[0]), float(err[-1]), err[:-1]
    if not rr:
        return _Step(k, p_inf, i_lo, m[:-1], err_c, float(m[-1]), e_top, float(m[0]) + e0)
    off = both[2:] if both is not None else mech.pld_cell_offsets(edges, direction)
    if off is None:
        raise ValueError(f"{mech.describe()} has no cell offsets (pld_cell_offsets returned None)")
    rlo, rhi = (np.asarray(a, dtype=float) for a in off)
    if rlo.shape != m.shape or rhi.shape != m.shape or not (np.all(rlo >= 0) and np.all(rhi <= 1)
                                                          and np.all(rlo <= rhi)):
        raise ValueError(f"{mech.describe()}: pld_cell_offsets returned invalid bounds")
    return _rounded_step(k, p_inf, i_lo, edges, m, err, rlo, rhi, step, e0, e_top)


def _rounded_step(k, p_inf, i_lo, edges, m, err, rlo, rhi, step, e0, e_top) -> _Step:
    """Rounding to the nearest lattice point (see ``_rr_log_tail``).

    Lattice y_j = (i_lo + j) Delta, j = 0..n-1; edges E_0 = y_0, E_j = y_{j-1} + Delta/2 (j = 1..n).  Cell 0
    (-inf, y_0] and cell 1 (y_0, y_0 + Delta/2] go to y_0, cell j >= 2 to y_{j-1}; the top cell is excluded
    (upper: +inf, lower: dropped).  Inside cell j (>= 1) D = Y - L lies in an interval of length
    d_j <= Delta and its conditional mean b_j = (Y_j - E_{j-1}) - r_j d_j is bracketed by the offset bounds
    r_j in [rlo_j, rhi_j].  Cell 0 has D >= 0 (upper bound only; truncated to [0, Delta/2]).
    """
    n = m.size - 2
    v = m[1:n + 1].copy()
    v[0] += m[0]
    if np.ndim(err) == 0:
        verr = float(err) + 4.0 * U * float(np.sum(v))
        tot_err = float(err)
    else:
        verr = err[1:n + 1] + 4.0 * U * v
        verr[0] += err[0]
        tot_err = float(np.sum(err[:-1]))
    d = np.diff(edges) / step  # cell widths in units of Delta (1/2 for cell 1, else 1)
    tgt = np.empty(n)  # Y - E_{j-1} for cells j = 1..n, in units of Delta
    tgt[0] = 0.0
    tgt[1:] = 0.5
    b_lo = tgt - rhi[1:n + 1] * d  # cell biases, units of Delta, cells 1..n
    b_hi = tgt - rlo[1:n + 1] * d
    b2 = np.maximum(b_lo * b_lo, b_hi * b_hi)
    w = m[1:n + 1]
    sw = float(np.sum(w))
    f1_lo = sw * (1 - 2 * n * U) - tot_err  # bounds on the true mass of cells 1..n
    f1_hi = sw * (1 + 2 * n * U) + tot_err
    f0_lo = f1_lo + float(m[0]) * (1 - 2 * U)  # ... and of cells 0..n
    f0_hi = f1_hi + float(m[0]) * (1 + 2 * U)
    if f1_lo <= 0:
        raise ValueError("pld: no mass on the finite cells")
    # numerators: the masses are known to tot_err in l1 and |b| <= 1/2; float sums add n u sum|w b|
    rnd = 2 * n * U * sw
    num_up = float(np.sum(w * b_lo)) - tot_err - rnd  # cell 0 adds E[min(D, Delta/2)] >= 0
    num_lo = float(np.sum(w * b_hi)) + tot_err + rnd
    s_b2 = float(np.sum(w * b2)) + tot_err + rnd
    mu_up = num_up / (f0_lo if num_up < 0 else f0_hi)
    mu_lo = num_lo / (f1_lo if num_lo > 0 else f1_hi)
    v2_up = (s_b2 + 0.25 * (float(m[0]) + e0)) / f0_lo
    v2_lo = s_b2 / f1_lo
    rr = (mu_up * step, v2_up * step * step, mu_lo * step, v2_lo * step * step)
    return _Step(k, p_inf, i_lo, v, verr, float(m[-1]), e_top, float(m[0]) + e0, rr)


def _rr_log_tail(steps, step: float, eta: float, upper: bool) -> float:
    """log of a bound on P(sum_j D_j < -eta) (upper) or P(sum_j D_j > eta) (lower), D = Y - L.

    Given its cell i, D = Y - L lies in an interval of length <= Delta (nearest rounding), so Hoeffding's
    lemma gives E[e^{lam D} | i] <= e^{lam b_i + lam^2 Delta^2 / 8}, and with |b_i| <= Delta,
    sum_i m_i e^{lam b_i} <= exp(lam mu + lam^2 e^{|lam| Delta} V2 / 2) (mu = E b_I, V2 >= E b_I^2; from
    e^x <= 1 + x + x^2 e^{|x|} / 2).  Chernoff over the T independent steps (conditional laws on the kept
    cells): for lam > 0,
        log P <= -lam (eta +- sum_j k_j mu_j) + lam^2 sum_j k_j (Delta^2/8 + e^{lam Delta} V2_j / 2),
    minimised over a few lam (each lam gives a valid bound).  Cell 0 (upper) uses min(D, Delta/2) <= D.
    """
    if upper:
        t = eta + sum(st.k * st.rr[0] for st in steps)
        b = sum(st.k * st.rr[1] for st in steps) / 2.0
    else:
        t = eta - sum(st.k * st.rr[2] for st in steps)
        b = sum(st.k * st.rr[3] for st in steps) / 2.0
    if t <= 0:
        return 0.0
    a = sum(st.k for st in steps) * step * step / 8.0
    lam0 = t / (2.0 * (a + b))
    best = 0.0
    for f in (0.6, 0.8, 0.9, 1.0):
        lam = lam0 * f
        best = min(best, -lam * t + lam * lam * (a + math.exp(lam * step) * b))
    return best * (1 - 1e-12)


def _rr_eta(steps, step: float, log_beta: float, upper: bool) -> float:
    """Smallest eta (on a 1% ladder) with ``_rr_log_tail`` <= log_beta."""
    if upper:
        m = sum(st.k * st.rr[0] for st in steps)
        b = sum(st.k * st.rr[1] for st in steps) / 2.0
    else:
        m = -sum(st.k * st.rr[2] for st in steps)
        b = sum(st.k * st.rr[3] for st in steps) / 2.0
    a = sum(st.k for st in steps) * step * step / 8.0
    t = math.sqrt(4.0 * (a + b) * -log_beta)
    eta = max(t - m, 0.0)
    for _ in range(200):
        if _rr_log_tail(steps, step, eta, upper) <= log_beta:
            return eta
        eta = eta * 1.01 + 1e-3 * step
    return math.inf


def _blocks(st: _Step, step: float):
    """64-cell blocks for rigorous cheap MGF bounds: (masses, bottom y, top y, mean y, h, merr).

    For the block's masses on [a, b] with mean mu, E[e^{c Y}; block] <= M_b min(e^{c top}, e^{c mu +
    c^2 h}) with h = (b - a)^2 / 8 (Hoeffding's lemma; top = b for c >= 0, a for c < 0).  The mean is
    computed in floating point: |mu - mu_float| <= merr (a generous 1e-13 relative margin), and it
    enters as + |c| merr.  The mean form keeps the location of T composed blocks exact (the top-edge
    form alone is off by up to T x 64 cells, which ruins windows and tilts when T is large and the
    losses are small).
    """
    n = st.n
    nb = -(-n // _BLOCK)
    pad = np.zeros(nb * _BLOCK)
    pad[:n] = st.m
    first = st.lo + np.arange(nb) * _BLOCK
    ylo = first * step
    yhi = np.minimum(first + _BLOCK - 1, st.lo + n - 1) * step
    pm = pad.reshape(nb, _BLOCK)
    raw = pm.sum(axis=1)
    bm = raw * (1.0 + _BLOCK * U)
    off = np.arange(_BLOCK) * step  # y_i - ylo_b (exact multiples of the lattice step)
    with np.errstate(invalid="ignore", divide="ignore"):
        mo = (pm @ off) / raw
        mo2 = (pm @ (off * off)) / raw
    mo = np.where(raw > 0, mo, 0.0)
    mu = np.clip(ylo + mo, ylo, yhi)
    var = np.where(raw > 0, np.maximum(mo2 - mo * mo, 0.0), 0.0)
    h = (yhi - ylo) ** 2 / 8.0
    merr = 1e-13 * np.maximum(np.abs(ylo), np.abs(yhi)) + 1e-300
    return bm, ylo, yhi, mu, h, merr, var


def _log_mgf_blocks(blocks, t: float) -> float:
    """Upper bound on log sum_i m_i e^{t y_i} from the blocks (see ``_blocks``)."""
    bm, ylo, yhi, mu, h, merr, _ = blocks
    y = yhi if t >= 0 else ylo
    z = np.minimum(t * y, t * mu + t * t * h + abs(t) * merr)
    with np.errstate(divide="ignore"):
        return _lse(np.log(bm) + z) + 1e-12


def _kt_grid(blocks_list, ks, logms, cs: np.ndarray) -> np.ndarray:
    """sum_j k_j (log M_j(c) - logm_j) for every c in cs, upper bounds from the blocks (vectorised
    ``_log_mgf_blocks``)."""
    out = np.zeros(cs.size)
    cs = np.ascontiguousarray(cs, dtype=float)
    for (bm, ylo, yhi, mu, h, merr, _), k, lm in zip(blocks_list, ks, logms, strict=True):
        keep = bm > 0
        with np.errstate(divide="ignore"):
            lb = np.log(bm[keep])
        out += k * (_kt_kernel(lb, ylo[keep], yhi[keep], mu[keep], h[keep], merr[keep], cs)
                     + 1e-12 - lm)
    return out


@njit(cache=True)
def _kt_kernel(lb, ylo, yhi, mu, h, merr, cs):  # pragma: no cover - compiled
    """log sum_b exp(lb_b + min(c y_b, c mu_b + c^2 h_b + |c| merr_b)) for each c (y_b = yhi_b for
    c >= 0, ylo_b below): two passes (max, then the sum).  The sequential sum of nb terms, each with an
    exp rounded by <= 2u, is within a relative 2 (nb + 4) u of the exact one: added to the log."""
    nb = lb.shape[0]
    out = np.empty(cs.shape[0])
    for i in range(cs.shape[0]):
        c = cs[i]
        ac = abs(c)
        mx = -np.inf
        for b in range(nb):
            y = yhi[b] if c >= 0 else ylo[b]
            z = min(c * y, c * mu[b] + c * c * h[b] + ac * merr[b])
            z += lb[b]
            if z > mx:
                mx = z
        acc = 0.0
        if mx == -np.inf:
            out[i] = -np.inf
            continue
        for b in range(nb):
            y = yhi[b] if c >= 0 else ylo[b]
            z = min(c * y, c * mu[b] + c * c * h[b] + ac * merr[b])
            acc += math.exp(z + lb[b] - mx)
        out[i] = mx + math.log(acc) + 2.0 * (nb + 4) * 1.1102230246251565e-16
    return out


def _tilt_moments(blocks_list, ks, theta: float) -> tuple[float, float]:
    """Mean and variance of the theta-tilted composed sum (block means and variances, the tilt applied
    per block: only to choose a tilt and a window)."""
    mean = var = 0.0
    for (bm, _, _, y, _, _, vb), k in zip(blocks_list, ks, strict=True):
        with np.errstate(divide="ignore"):
            lw = np.log(bm) + theta * y
        lw -= np.max(lw)
        w = np.exp(lw)
        w /= w.sum()
        mu = float(np.sum(w * y))
        mean += k * mu
        var += k * float(np.sum(w * ((y - mu) ** 2 + vb)))
    return mean, var


def _tilt_stats(blocks_list, ks, theta: float) -> tuple[float, float, float]:
    """(K(theta), mean, variance) of the composed sum under the theta-tilt, from the blocks' means
    (approximate: only to choose a tilt, a window and a starting estimate)."""
    log_k = mean = var = 0.0
    for (bm, _, _, y, _, _, vb), k in zip(blocks_list, ks, strict=True):
        with np.errstate(divide="ignore"):
            lw = np.log(bm) + theta * y
        mx = float(np.max(lw))
        w = np.exp(lw - mx)
        sw = float(w.sum())
        w /= sw
        mu = float(np.sum(w * y))
        log_k += k * (mx + math.log(sw))
        mean += k * mu
        var += k * float(np.sum(w * ((y - mu) ** 2 + vb)))
    return log_k, mean, var


def _sp_epsilon(blocks_list, ks, delta: float) -> float:
    """Saddle-point estimate of eps(delta) (nan if none): with theta the tilt, K, m, v as in
    ``_tilt_stats``, delta(m) ~ e^{K - theta m} / (theta (theta + 1) sqrt(2 pi v)) (the tilted sum taken
    as normal around its mean, f_eps integrated against it).  An estimate only: it places the window
    and the tilt of the certified passes, never a bound."""
    target = math.log(delta)

    def g(th: float) -> tuple[float, float]:
        log_k, m, v = _tilt_stats(blocks_list, ks, th)
        if not (v > 0 and math.isfinite(log_k)):
            return math.nan, m
        return log_k - th * m - math.log(th * (th + 1.0)) - 0.5 * math.log(2 * math.pi * v) - target, m

    lo, hi = 1e-3, 1.0
    glo, m_lo = g(lo)
    if not math.isfinite(glo) or glo <= 0:
        return math.nan
    ghi, m = g(hi)
    while ghi > 0 and hi < 1e7:
        lo, hi = hi, hi * 4.0
        ghi, m = g(hi)
    if not (ghi <= 0):
        return math.nan
    for _ in range(60):
        mid = math.sqrt(lo * hi)
        gm, m = g(mid)
        if not math.isfinite(gm):
            return math.nan
        if gm > 0:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.001:
            break
    return max(m, 0.0)


def _saddle(blocks_list, ks, eps: float) -> float:
    """theta > 0 with K'(theta) = eps + 1/theta + 1/(theta + 1) (the tilt that centres E[f_eps(S)])."""

    def g(th: float) -> float:
        return _tilt_moments(blocks_list, ks, th)[0] - eps - 1.0 / th - 1.0 / (th + 1.0)

    lo, hi = 1e-3, 1.0
    if g(lo) > 0:
        return lo
    while g(hi) < 0 and hi < 1e4:
        lo, hi = hi, hi * 4
    if g(hi) < 0:
        return math.nan  # eps beyond the support: no saddle
    for _ in range(40):
        mid = math.sqrt(lo * hi)
        if g(mid) < 0:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1.01:
            break
    return math.sqrt(lo * hi)


# ----------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class _Plan:
    direction: str
    step: float
    steps: tuple
    capped: bool
    rr: bool = False


def _ranges(entries, direction, rtol, delta_ref, theta_ref):
    tot = sum(k for _, k in entries)
    tgt_hi = max(rtol * delta_ref * 1e-2 / tot, 1e-300)
    tgt_lo = rtol * 1e-4 / tot
    return [_probe_range(m, direction, theta_ref, tgt_lo, tgt_hi) for m, _ in entries]


def _plan(entries, direction: str, width: float, ranges, max_points: int, div: float | None = None,
          rr: bool = False) -> _Plan:
    """Grid step Delta = width / div (div = T for round-up cells, ~2 sqrt(T log(1/beta)) for the
    mean-preserving rounding; rounded down to c 2^e) and the per-entry vectors; the cap raises Delta."""
    tot = sum(k for _, k in entries)
    step = _lattice_step(width / (tot if div is None else div))
    span = max(hi - lo for lo, hi in ranges)
    capped = False
    if span / step > max_points:
        step = _lattice_step(span / max_points)
        capped = True
    steps = tuple(_make_step(m, k, direction, step, lo, hi, rr) for (m, k), (lo, hi) in
                  zip(entries, ranges, strict=True))
    return _Plan(direction, step, steps, capped, rr)


# ----------------------------------------------------------------------------------------- composition
def _cpow(z: np.ndarray, k: int) -> np.ndarray:
    """z^k elementwise by binary powering (right to left).

    Each complex product is rounded with relative error <= sqrt5 u (Brent, Percival & Zimmermann
    2007).  The square z^{2^j} carries (1 + sqrt5 u)^{2^j - 1}, and the result multiplies the squares of
    the set bits of k with one product each, so the total relative error is <= (1 + sqrt5 u)^{k-1} - 1
    (the exponents add up to sum over set bits of (2^j - 1) + (#bits - 1) = k - 1).
    """
    result = None
    base = z
    while True:
        if k & 1:
            result = base.copy() if result is None else result * base
        k >>= 1
        if not k:
            return result
        base = base * base



@dataclass(frozen=True)
class _Composed:
    step: float
    theta: float
    first: int  # lattice index of window position 0
    nu: np.ndarray  # folded tilted composed measure on the window (computed)
    log_c: float  # K = sum_j k_j log M_j
    t_total: int
    p_inf: float  # true infinite-loss mass (lower)
    p_inf_up: float  # infinite + top masses (upper)
    c_model: float  # tilted l1 error: mass errors + tilt rounding (hybrid bound)
    c_fft: float  # tilted sum of |float error| of the window
    log_junk_hi: float  # log tilted mass of the unfolded measure above the window
    log_junk_lo: float  # log tilted mass below the window
    log_damp: float  # log e^{-theta N Delta} (damping of the folded mass from below), -inf if none
    log_out_up: float  # log of the untilted mass above the window
    c_cell0: float  # tilted l1 mass of the terms with a cell-0 factor (lower only)
    n: int
    capped: bool
    # evaluation shifts: upper at eps - shift_up (+ beta_up), lower at eps + shift_lo (- beta_lo)
    shift_up: float = 0.0
    shift_lo: float = math.nan  # nan: T Delta (round-up cells)
    beta_up: float = 0.0
    beta_lo: float = 0.0


def _compose(plan: _Plan, theta: float, max_points: int, tol_junk: float, a_loss: float,
             log_delta_ref: float, regrid: bool = False, plan_only: bool = False, blocks=None):
    import scipy.fft as sfft  # (imported on use: slow to import)

    step = plan.step
    steps = plan.steps
    ks = [st.k for st in steps]
    t_total = sum(ks)
    blocks_list = [_blocks(st, step) for st in steps] if blocks is None else blocks
    # ---- tilt each step vector (log space), with the rounding of the tilt and the mechanisms' errors
    xs, logms, taus, sums, w0s = [], [], [], [], []
    if plan_only:  # window planning only: the normalisers from the blocks suffice
        with np.errstate(divide="ignore"):
            logms = [_log_mgf_blocks(b, theta) for b in blocks_list]
    for st in steps if not plan_only else ():
        y = (st.lo + np.arange(st.n)) * step
        with np.errstate(divide="ignore"):
            lw = np.log(st.m) + theta * y
        logm = _lse(lw)
        arg = theta * y - logm
        x = st.m * np.exp(arg)
        rho = U * (2.0 * np.abs(arg) + 6.0)
        with np.errstate(over="ignore", divide="ignore"):
            if np.ndim(st.err) == 0:
                terr = st.err * math.exp(min(float(np.max(arg)), 709.0)) if st.err > 0 else 0.0
                if float(np.max(arg)) > 709.0 and st.err > 0:
                    terr = math.inf
            else:
                terr = float(np.sum(np.exp(np.log(st.err) + arg)))
        tau = 1.01 * (terr + float(np.sum(x * rho)))
        s = float(np.sum(x)) * (1 + st.n * U)
        xs.append(x)
        logms.append(logm)
        taus.append(tau)
        sums.append(s)
        w0s.append(st.m0 * math.exp(float(arg[0])) * 1.01)
    log_c = sum(k * lm for k, lm in zip(ks, logms, strict=True))
    prod_norm = math.exp(sum(k * math.log(s + t) for k, s, t in zip(ks, sums, taus, strict=True))) \
        if not plan_only else 1.0
    c_model = prod_norm * sum(k * t / (s + t) for k, s, t in zip(ks, sums, taus, strict=False))
    c_cell0 = prod_norm * sum(k * w / (s + t) for k, s, t, w in zip(ks, sums, taus, w0s, strict=False))
    # ---- window: composed span, or mean +- spread of the tilted sum, widened until the junk is small
    base = sum(st.k * st.lo for st in steps)  # lattice index of relative position 0
    span_tot = sum(st.k * (st.n - 1) for st in steps) + 1

    t_grid = np.geomspace(1e-3, 1e6, 46)
    kt_up = list(_kt_grid(blocks_list, ks, logms, theta + t_grid))
    kt_dn = list(_kt_grid(blocks_list, ks, logms, theta - t_grid))

    def log_tail(b_rel: float, upper: bool) -> float:
        """log of a Chernoff bound on nu(S_rel >= b_rel) (upper) or nu(S_rel < b_rel) (lower),
        the best over a geometric grid of t (every t gives a valid bound)."""
        b_loss = (b_rel + base) * step
        if upper:
            vals = [k_ - t * b_loss for t, k_ in zip(t_grid, kt_up, strict=True)]
        else:
            vals = [k_ + t * b_loss for t, k_ in zip(t_grid, kt_dn, strict=True)]
        return min(0.0, min(vals))

    # window [a_rel, a_rel + n) (relative lattice indices).  Folded mass from above lands where
    # f_eps(s) C e^{-theta s} <= C e^{-theta eps} (only s > eps counts); folded mass from below A is
    # damped: at window position s_w it is e^{-theta j N Delta} mu(s_w - jN), in total
    # <= e^{-theta N Delta} mu(S < A) (j >= 1).  Option 1 starts at the support bottom (no mass below),
    # option 2 at the lowest loss of interest with N >= the damping length.
    a_want = max(0, min(span_tot - 1, math.floor(a_loss / step) - base - 1))
    # junk enters delta as C e^{-theta eps} nu(...) <= e^{K - theta a_loss} nu(...): aim it at
    # tol_junk x delta_ref
    log_tol = min(0.0, math.log(tol_junk) + log_delta_ref - (log_c - theta * max(a_loss, 0.0)))
    # smallest b with a certified tail <= tol: min over t of (K(t) - log tol) / t
    b_loss = min((k_ - log_tol) / t for t, k_ in zip(t_grid, kt_up, strict=True))
    b_rel = float(min(span_tot, max(math.ceil(b_loss / step - base), a_want + 16)))
    n_damp = math.ceil((-math.log(tol_junk) - log_delta_ref) / (theta * step)) + 1
    n1 = b_rel  # option 1: from the support bottom
    n2 = max(b_rel - a_want, min(n_damp, b_rel))  # option 2
    if n1 <= n2:
        a_rel, need = 0, int(n1)
    else:
        a_rel, need = int(a_want), int(n2)
    if plan_only:
        return need, log_c
    capped = plan.capped
    if need > max_points:
        if regrid:
            return need  # the caller coarsens the grid (a window this long is not affordable)
        need, capped = max_points, True
    n_fft = min(sfft.next_fast_len(max(need, 16), real=True), max_points)
    if a_rel + n_fft > span_tot:
        a_rel = max(0, span_tot - n_fft)
    b_top = a_rel + n_fft
    lt_hi = log_tail(b_top, True) if b_top < span_tot else -math.inf
    lt_lo = log_tail(a_rel, False) if a_rel > 0 else -math.inf
    log_damp = -theta * n_fft * step if a_rel > 0 else -math.inf
    log_out = min(0.0, lt_hi + log_c - theta * (b_top + base) * step) if b_top < span_tot else -math.inf
    # ---- FFT composition with float-error bounds
    n = n_fft
    c_n = 16.0 * U * (math.log2(n) + 4.0)
    spec = None
    err_terms = []  # (2-norm error of this entry's power, bound on |power|) per entry
    for x, st, s in zip(xs, steps, sums, strict=True):
        # cell i of entry j sits at lattice lo_j + i; the copies' lo_j add up to `base`, so relative to
        # base the entry vector occupies positions 0..n_j - 1, folded modulo n (cyclic convolution)
        if st.n > n:
            folded = np.bincount(np.arange(st.n) % n, weights=x, minlength=n)
        else:
            folded = np.zeros(n)
            folded[:st.n] = x
        xh = sfft.rfft(folded)
        norm2 = math.sqrt(_sumsq(folded) * (1 + n * U))
        e_in = c_n * math.sqrt(n) * norm2  # ||err of xh||_2 (full spectrum) >= max |err|
        k = st.k
        pw = _cpow(xh, k)
        # binary powering: relative error <= (1 + sqrt5 u)^{k-1} - 1 (module docstring), + underflow
        rel_pow = math.expm1((k - 1) * math.log1p(math.sqrt(5.0) * U)) * 1.01
        pw_norm = math.sqrt(_sumsq(pw) * (1 + n * U))
        r_pow_2 = math.sqrt(2.0) * (rel_pow * pw_norm + math.sqrt(n) * 1e-300)
        prop = k * e_in * (s + 2.0 * e_in) ** (k - 1) if k > 1 else e_in
        bound_mod = (s + 2.0 * e_in) ** k
        err_terms.append((prop + r_pow_2, bound_mod))
        spec = pw if spec is None else spec * pw
    j = len(steps)
    bounds = [b for _, b in err_terms]
    tot_prod = math.prod(bounds)
    spec_err = sum(e * tot_prod / b for e, b in err_terms)
    spec_norm = math.sqrt(2.0 * _sumsq(spec) * (1 + n * U))  # >= the full-spectrum 2-norm
    spec_err += 2.0 * j * U * spec_norm
    nu = sfft.irfft(spec, n)
    # sum_j |err_j| <= sqrt(N) ||err||_2; ||F^{-1} v||_2 = ||v||_2 / sqrt(N)
    c_fft = (spec_err + c_n * spec_norm) * 1.01
    # unfold: window position w holds relative index a_rel + ((w - a_rel) mod n)
    shift = a_rel % n
    nu = np.roll(nu, -shift)
    p_keep = sum(st.k * math.log1p(-st.p_inf) if st.p_inf < 1 else -math.inf for st in steps)
    p_inf = -math.expm1(p_keep) if p_keep > -math.inf else 1.0
    keep_up = 0.0
    for st in steps:
        f = 1.0 - st.p_inf - (st.top + st.top_err)
        keep_up += st.k * math.log1p(-(st.p_inf + st.top + st.top_err)) if f > 0 else -math.inf
    p_inf_up = min(1.0, (-math.expm1(keep_up) if keep_up > -math.inf else 1.0) * (1 + 1e-12))
    return _Composed(step, theta, base + a_rel, nu, log_c, t_total, p_inf * (1 - 1e-12), p_inf_up,
                     c_model, c_fft, lt_hi, lt_lo, log_damp, log_out, c_cell0, n, capped)


# ----------------------------------------------------------------------------------------- evaluation
@njit(cache=True)
def _sumsq(z):  # pragma: no cover - compiled
    """sum |z_i|^2 (real or complex array), one pass (relative rounding <= N u, absorbed by the x1.01
    margins of the callers)."""
    acc = 0.0
    for i in range(z.shape[0]):
        acc += z[i].real * z[i].real + z[i].imag * z[i].imag
    return acc


@njit(cache=True)
def _suffix_kernel(nu, fa_blk, fb_blk, fa_in, fb_in, first_blk):  # pragma: no cover - compiled
    """Suffix sums of a = nu fa, b = nu fb (fa = fa_blk[block] fa_in[offset], 256-entry blocks; blocks
    below first_blk count as 0) and, per block, the suffix sums of |a| and |b| from that block up.
    One pass from the top; recursive summation (error <= gamma_N x the sums of moduli)."""
    n = nu.shape[0]
    nb = fa_blk.shape[0]
    ga = np.zeros(n)
    gb = np.zeros(n)
    abs_a = np.zeros(nb)
    abs_b = np.zeros(nb)
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
        abs_a[blk] = sa
        abs_b[blk] = sb
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
        self.abs_a = abs_a * (1.0 + 4.0 * n * U)
        self.abs_b = abs_b * (1.0 + 4.0 * n * U)
        smax = float(np.max(np.abs(s))) + abs(eps_ref)
        self.rel = U * (2 * abs(comp.log_c) + 2 * (th + 1) * smax + 2 * th * abs(eps_ref) + 24.0) + 2 * n * U
        self.lo_ok = float(s[first_ok]) if first_ok < n else math.inf  # eps >= lo_ok is evaluable
        self.shift_lo = comp.t_total * comp.step if math.isnan(comp.shift_lo) else comp.shift_lo
        self.hi_ok = float(s[-1])

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
        if de > 700:  # e^{eps - r} B overflows: bound (1 - e^{eps - s}) by 1 (upper) or 0 (lower)
            val = float(self.ga[k]) if upper else 0.0
            return val * scale, float(self.abs_a[k // 256]) * self.rel * scale
        e1 = math.exp(de)
        val = float(self.ga[k]) - e1 * float(self.gb[k])
        mag = float(self.abs_a[k // 256]) + e1 * float(self.abs_b[k // 256])
        return val * scale, (mag * self.rel + 4 * U * abs(val)) * scale

    def _scale(self, eps: float) -> float:
        """C e^{-theta eps}: converts tilted l1 errors into delta errors at eps."""
        x = self.c.log_c - self.c.theta * eps
        return math.exp(x) if x < 700 else math.inf

    def upper(self, eps: float) -> float:
        c = self.c
        if c.shift_up > 0:  # mean-preserving rounding: delta <= delta_Y(eps - eta) + beta
            eps = math.nextafter(eps - c.shift_up, -math.inf)
        if eps < self.lo_ok:  # mass below the window could lie above eps: nothing certified here
            return 1.0
        core, rnd = self._core(eps, True)
        err = self._scale(eps) * (c.c_model + c.c_fft)
        out = math.exp(c.log_out_up) if c.log_out_up > -math.inf else 0.0
        up = c.p_inf_up + max(core, 0.0) + rnd + err + out + c.beta_up
        return min(1.0, up * (1 + 1e-12) + 1e-300)

    def lower(self, eps: float) -> float:
        c = self.c
        # round-up cells: the lower coupling is the same vector shifted by T Delta; mean-preserving
        # rounding: delta >= delta_Y(eps + eta) - beta.  Round the sum up.
        e2 = math.nextafter(eps + self.shift_lo, math.inf)
        floor = -math.expm1(eps) if eps < 0 else 0.0
        if e2 < self.lo_ok:
            return max(c.p_inf, floor * (1 - 1e-15))
        core, rnd = self._core(e2, False)
        sc = self._scale(e2)
        junk_hi = math.exp(c.log_junk_hi) if c.log_junk_hi > -math.inf else 0.0
        below = sc * math.exp(c.log_junk_lo) if c.log_junk_lo > -math.inf else 0.0
        if c.log_damp > -math.inf:
            below = min(below, 1.01 * math.exp(c.log_damp))
        err = sc * (c.c_model + c.c_fft + c.c_cell0 + junk_hi * (1 + 1e-10)) + below * (1 + 1e-10)
        lo = c.p_inf + core - rnd - err - c.beta_lo
        lo = lo * (1 - 1e-12) if lo > 0 else lo
        return max(lo, floor * (1 - 1e-15))

    def evaluable(self, eps: float) -> bool:
        return self.lo_ok <= eps <= self.hi_ok


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


def _run(entries, direction, width, ranges, eps_tilt, max_points, rtol, a_loss, delta_ref, theta_fb,
         delta_sp=None):
    """One composition: grid, tilt (saddle at eps_tilt, or the Chernoff order theta_fb when eps_tilt is
    None or beyond the support), window from a_loss up.  With ``delta_sp``, the tilt point is the
    saddle-point estimate of eps(delta_sp) from this grid when there is one (``_sp_epsilon``)."""
    log_dref = math.log(max(delta_ref, 1e-300))
    # mean-preserving rounding when every mechanism bounds its cell offsets and sqrt(T) beats T
    tot = sum(k for _, k in entries)
    log_beta = math.log(max(delta_ref, 1e-300) * rtol * 0.1)
    div_rr = 1.45 * math.sqrt(tot * -log_beta)  # eta_up + eta_lo ~ Delta sqrt(2 T log(1/beta))
    rr = div_rr < tot and _rr_available(entries, direction)
    a_req = a_loss
    for attempt in range(4):
        plan = _plan(entries, direction, width, ranges, max_points, div_rr if rr else None, rr)
        if rr and not plan.capped:
            # the cell biases (T x mean bias, second order in Delta) can dominate the shifts when the
            # loss is strongly curved: refine Delta once, or fall back to round-up cells (T Delta)
            tot_eta = (_rr_eta(plan.steps, plan.step, log_beta, True)
                       + _rr_eta(plan.steps, plan.step, log_beta, False))
            if tot_eta > 1.2 * width:
                div2 = div_rr * tot_eta / (0.9 * width)
                if div2 < tot:
                    div_rr = div2
                    plan = _plan(entries, direction, width, ranges, max_points, div_rr, rr)
                else:
                    rr = False
                    plan = _plan(entries, direction, width, ranges, max_points)
        if rr:  # the upper bound is evaluated at eps - eta (eta ~ Delta div / 2): widen the window
            a_loss = a_req - plan.step * div_rr
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
        comp = _compose(plan, theta, max_points, rtol * 1e-3, a_loss, log_dref, regrid=attempt < 3,
                        blocks=blocks_list)
        if isinstance(comp, _Composed):
            comp = dataclasses.replace(comp, capped=comp.capped or attempt > 0)
            if rr:
                eta_up = _rr_eta(plan.steps, plan.step, log_beta, True)
                eta_lo = _rr_eta(plan.steps, plan.step, log_beta, False)
                beta = math.exp(log_beta) * (1 + 1e-12)
                comp = dataclasses.replace(comp, shift_up=eta_up, shift_lo=eta_lo, beta_up=beta,
                                           beta_lo=beta)
            ev = _Evaluator(comp, ref)
            ev.blocks, ev.ks, ev.sp = blocks_list, [st.k for st in plan.steps], sp
            return ev
        width *= 1.2 * comp / max_points  # the window was too long: coarser grid, wider bracket
    raise AssertionError("unreachable")


def _rr_available(entries, direction: str) -> bool:
    for m, _ in entries:
        try:
            if m.pld_cell_offsets(np.array([0.0, 1.0]), direction) is None:
                return False
        except Exception:  # noqa: BLE001 - no usable offsets: round-up cells instead
            return False
    return True


def _details(ev: _Evaluator, passes: int) -> dict:
    c = ev.c
    return {"route": "pld", "grid_step": c.step, "fft_points": c.n, "theta": c.theta,
            "width_loss": ev.shift_lo + c.shift_up, "rounding": "mean" if c.shift_up > 0 else "up",
            "err_model": c.c_model, "err_fft": c.c_fft,
            "log_junk_hi": c.log_junk_hi, "log_junk_lo": c.log_junk_lo,
            "log_damp": c.log_damp, "err_cell0": c.c_cell0, "p_inf_upper": c.p_inf_up,
            "log_out_upper": c.log_out_up, "capped": c.capped, "passes": passes}


def _prepare(entries, direction, rtol, max_points):
    check_direction(direction)
    rtol = _check_rtol(rtol)
    max_points = _check_max_points(max_points)
    ents = _check_entries(entries)
    if ents and not pld_applicable(ents):
        raise ValueError("entries: the pld route needs pld_cell_masses for every mechanism")
    return ents, rtol, max_points


def pld_delta_bounds(entries, eps: float, direction: str = "remove", rtol: float = 1e-3, *,
                     max_points: int = DEFAULT_MAX_POINTS) -> DeltaBounds:
    """Certified bracket on delta(eps) of the composition (one direction) by the discretised PLD.

    Parameters
    ----------
    entries : sequence of (Mechanism, count) whose mechanisms implement ``pld_cell_masses``.
    eps : finite real.
    direction : {"remove", "add"}.
    rtol : target relative width of the bracket, in [1e-9, 0.5].
    max_points : cap on the FFT length and on each entry's grid (a capped query gives a wider, still
        certified bracket with ``details["capped"] = True``).

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
    ranges = _ranges(ents, direction, rtol, max(d_ch * 1e-2, 1e-300) + p_inf, 0.5 * c_ch)
    # the delta bracket is about exp((1 + theta) T Delta) wide: aim T Delta at rtol / (2 + theta)
    width = 0.9 * rtol / (2.0 + c_ch)
    d_ref = max(d_ch * 1e-2, 1e-300) + p_inf
    ev = _run(ents, direction, width, ranges, eps, max_points, rtol, eps, d_ref, c_ch)
    lo, up = ev.lower(eps), ev.upper(eps)
    passes = 1
    for _ in range(2):
        if up - lo <= rtol * up or ev.c.capped:
            break
        width = 0.9 * rtol / (2.0 + ev.c.theta) / (4.0 if passes > 1 else 1.0)
        # ranges again for the tilt found and the delta now known (the top mass must be << delta)
        if lo > 0:
            d_ref = lo
        ranges = _ranges(ents, direction, rtol, d_ref, 0.5 * ev.c.theta)
        ev = _run(ents, direction, width, ranges, eps, max_points, rtol, eps, d_ref, ev.c.theta)
        lo, up = max(lo, ev.lower(eps)), min(up, ev.upper(eps))
        passes += 1
    lo = min(lo, up)
    return DeltaBounds(eps, 0.5 * (lo + up), lo, up, direction, _details(ev, passes))


def pld_epsilon_bounds(entries, delta: float, direction: str = "remove", rtol: float = 1e-3, *,
                       max_points: int = DEFAULT_MAX_POINTS) -> EpsilonBounds:
    """Certified eps(delta) for one direction by the discretised PLD.

    ``upper`` satisfies delta_upper(upper) <= delta (so the pair is (upper, delta)-DP), ``lower``
    satisfies delta_lower(lower) >= delta (no eps below it is valid); both are >= 0.  Target width:
    (upper - lower) <= rtol * upper, or <= 0.1 rtol absolute when eps < 0.1.  Parameters as in
    ``pld_delta_bounds``; ``delta`` in (0, 1).  An eps whose certification fails (window, cap) is
    reported as upper = inf rather than guessed.
    """
    if isinstance(delta, bool) or not isinstance(delta, int | float) or not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    delta = float(delta)
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
    ev = _run(ents, direction, 16 * 0.9 * max(rtol * eps_ch, 0.1 * rtol), ranges, eps_ch, max_points,
              rtol, 0.0, delta, c_ch, delta_sp=delta - p_inf)
    lo, up = _solve(ev, delta)
    passes, extra = 1, math.inf
    for _ in range(3):
        if passes > 1 and (up - lo <= max(rtol * up, 0.1 * rtol) or ev.c.capped):
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
        # grid ranges for this tilt (the lower cut depends on it), then the target grid
        ranges = _ranges(ents, direction, rtol, delta, 0.5 * theta_hint)
        target = max(rtol * est, 0.1 * rtol)
        width = 0.8 * target  # leaves room for the error terms (~10% of the bracket at 1e-3)
        if passes > 1:
            # the eps bracket = the rounding shifts + the rest (error terms, which grow with the number
            # of cells): aim the shifts at what the rest leaves, or halve when it leaves little
            room = target - 1.5 * extra
            width = 0.95 * room if room > 0.25 * target else 0.9 * target / 2.0 ** (passes - 1)
        ev = _run(ents, direction, width, ranges, tilt, max_points, rtol, a_next, delta, theta_hint)
        lo2, up2 = _solve(ev, delta)
        extra = max((up2 - lo2) - (ev.shift_lo + ev.c.shift_up), 0.0) if math.isfinite(up2) else math.inf
        lo, up = max(lo, lo2), min(up, up2)
        passes += 1
    lo = min(lo, up)
    est = 0.5 * (lo + up) if math.isfinite(up) else lo
    return EpsilonBounds(delta, est, lo, up, direction, _details(ev, passes))


def _solve(ev: _Evaluator, delta: float) -> tuple[float, float]:
    """(lower, upper) eps >= 0 from one evaluator.

    upper: a point with delta_up(upper) <= delta (+inf if none is certified here); delta_up is
    non-increasing, so the smallest such point is found by bisection.  lower: a point with
    delta_lo(lower) > delta (0 if none): delta_lo is not monotone (its error terms grow like
    e^{-theta eps} at small eps), so a grid of 128 points is scanned for the largest such point, then
    refined by bisection towards the next grid point.  Both functions cost O(log N) per call.
    """
    lo_ok = max(ev.lo_ok + ev.c.shift_up * (1 + 1e-12) + 1e-14 * (1 + abs(ev.lo_ok)), 0.0)
    hi_ok = ev.hi_ok - ev.shift_lo

    def f_up(e):
        return ev.upper(e) - delta

    def f_lo(e):
        return ev.lower(e) - delta

    if f_up(0.0) <= 0.0:
        upper = 0.0
    elif hi_ok <= lo_ok or f_up(hi_ok) > 0:
        upper = math.inf
    elif f_up(lo_ok) <= 0:
        upper = lo_ok  # certified; the true root may be lower (not evaluable on this window)
    else:
        upper = _bisect(f_up, lo_ok, hi_ok, True)
    lower = 0.0
    top = min(hi_ok, upper) if math.isfinite(upper) else hi_ok
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
    if not pld_applicable(ents):
        return math.inf
    eps_ch, c_hint = _chernoff_eps(_chernoff_curve(ents, direction), 1e-5)
    if eps_hint is None:
        eps_hint = eps_ch
    tot = sum(k for _, k in ents)
    div = 1.45 * math.sqrt(tot * -math.log(1e-6 * rtol))  # mean-preserving rounding at delta ~ 1e-5
    if div >= tot or not _rr_available(ents, direction):
        div = tot
    step = _lattice_step(0.9 * max(rtol * eps_hint, 0.1 * rtol) / div)
    ranges = _ranges(ents, direction, rtol, 1e-5, 0.5 * c_hint)
    cells = sum((hi - lo) / step for lo, hi in ranges)
    span = sum(k * (hi - lo) / step for (lo, hi), (_, k) in zip(ranges, ents, strict=True))
    n = min(span, 4.0 * max(cells, 1.0), float(DEFAULT_MAX_POINTS))
    return float(10.0 * cells + n * math.log2(max(n, 2.0)) * (1 + len(ents)))


__all__ = ["pld_applicable", "pld_cost", "pld_delta_bounds", "pld_epsilon_bounds"]
