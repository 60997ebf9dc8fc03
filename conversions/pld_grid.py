"""Discretised PLD (:mod:`conversions.pld`), part 1: argument checks, the lattice, each entry's loss range
and its rounded step vector (cell masses and error bounds); the grid plan.

The method and its error analysis are in the docstring of :mod:`conversions.pld` and in
docs/derivations/discretised-pld.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mechanisms.base import Mechanism

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
#: at most this many zoomed probes when the range spans under 1/64 of the probe grid
_ZOOMS = 3


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
    j_lo, j_hi = _select(edges, m, logm, theta_ref, tgt_lo, tgt_hi)
    for _ in range(_ZOOMS):
        # a range of a few probe cells (losses on a scale far below the probe's: q = 1e-6, where every
        # step's loss lies within 1e-3 of 0 on a grid of 4.9e-4 cells): probe again inside it, so the
        # grid (and the composed support, T times as long) is not mostly empty cells
        a, b = float(edges[j_lo]), float(edges[j_hi])
        if j_hi - j_lo > _PROBE // 64 or not b - a > 1e-9 * max(abs(a), abs(b)):
            break
        edges = np.linspace(a, b, _PROBE + 1)
        m, _ = _masses(mech, edges, direction)
        with np.errstate(divide="ignore"):
            logm = _lse(np.log(m[:-1]) + theta_ref * edges)
        j_lo, j_hi = _select(edges, m, logm, theta_ref, tgt_lo, tgt_hi)
    return float(edges[j_lo]), float(edges[j_hi])


def _select(edges: np.ndarray, m: np.ndarray, logm: float, theta_ref: float, tgt_lo: float,
            tgt_hi: float) -> tuple[int, int]:
    """The probe-edge indices (lo, hi) of :func:`_probe_range`'s rules on the masses ``m`` of
    ``edges`` (m[0] = P(L <= e_0), m[-1] = P(e_last < L < inf)); logm: log of the tilted normaliser."""
    cdf = np.cumsum(m[:-1])  # P(L <= e_j)
    with np.errstate(divide="ignore", invalid="ignore"):  # (inf - inf at extreme tilts: NaN, never "ok")
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
    return j_lo, j_hi


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
    # bounds (mu, v2) on the mean and the second moment of the conditional bias b(L) = E[Y - L | L] of
    # the split (loss units, cells 1..n-1): the Chernoff bound of the lower end (``_lo_log_tail``);
    # None where the split is not known from both sides
    lo_tail: tuple | None = None
    # the whole-cell round-up vector and its errors where the split differs (the lower end's second
    # composition at few steps: Y - Delta <= L with Y the upper end of every cell)
    whole: tuple | None = None

    @property
    def n(self) -> int:
        return self.m.size


def _make_step(mech: Mechanism, k: int, direction: str, step: float, lo: float, hi: float) -> _Step:
    """Round-up cells on the lattice edges, each split between its two ends (:func:`_dots_vector`) by
    the cell's Q-mass (optional hook ``pld_cell_q_masses``) or else its offset bounds
    (``pld_cell_offsets``); whole cells up when the mechanism offers neither."""
    i_lo = math.floor(lo / step)
    i_hi = max(math.ceil(hi / step), i_lo + 1)
    edges = np.arange(i_lo, i_hi + 1, dtype=float) * step
    both = getattr(mech, "pld_cells_and_q_masses", None)
    both = both(edges, direction) if both is not None else None
    if both is not None:
        m, err = _check_masses(mech, edges, both[0], both[1])
        qm = both[2:]
    else:
        m, err = _masses(mech, edges, direction)
        qm = getattr(mech, "pld_cell_q_masses", None)
        qm = qm(edges, direction) if qm is not None else None
    pi = pi_lo = u_lo = None
    n = m.size - 1
    if qm is not None:
        mq, err_q = _check_masses(mech, edges, *qm)
        pi, pi_lo = _split_from_q(m, err, mq, err_q, edges, step)
        # E[u | cell] >= E[1 - e^{-u} | cell] = pi (1 - e^{-Delta}) (u = L - a), in units of Delta
        u_lo = pi_lo * (-math.expm1(-step) / step * (1.0 - 4.0 * U))
    if pi is None or float(np.sum(m[1:n] * (pi - pi_lo)[1:])) > 1e-3 * float(np.sum(m[1:n])):
        # no Q-masses, or cells too narrow for them (their float error over 1 - e^{-Delta}: q = 1e-6):
        # the offset bounds, alone or cell by cell with the Q-masses' where tighter
        off = mech.pld_cell_offsets(edges, direction)
        if off is not None:
            rlo, rhi = _check_offsets(mech, m, off)
            # pi >= E[u] / Delta (1 - e^{-u} >= u (1 - e^{-Delta}) / Delta on [0, Delta])
            pi_o, lo_o = _split_from_offsets(rhi, step), rlo[:n]
            pi = pi_o if pi is None else np.minimum(pi, pi_o)
            pi_lo = lo_o if pi_lo is None else np.minimum(np.maximum(pi_lo, lo_o), pi)
            u_lo = lo_o if u_lo is None else np.maximum(u_lo, lo_o)
    e0, e_top = _end_errors(err)
    v, verr = _dots_vector(m, err, pi)
    tail = None if pi is None else _bias_moments(m, err, pi, pi_lo, u_lo, step)
    whole = None if pi is None else _dots_vector(m, err, None)
    return _Step(k, mech.infinite_loss_mass, i_lo, v, verr, float(m[-1]), e_top, float(m[0]) + e0, tail,
                 whole)


def _end_errors(err) -> tuple[float, float]:
    """Error bounds of cell 0 and of the top cell (a scalar err bounds every cell)."""
    return (float(err), float(err)) if np.ndim(err) == 0 else (float(err[0]), float(err[-1]))


def _check_offsets(mech: Mechanism, m: np.ndarray, off):
    rlo, rhi = (np.asarray(a, dtype=float) for a in off)
    if rlo.shape != m.shape or rhi.shape != m.shape or not (np.all(rlo >= 0) and np.all(rhi <= 1)
                                                          and np.all(rlo <= rhi)):
        raise ValueError(f"{mech.describe()}: pld_cell_offsets returned invalid bounds")
    return rlo, rhi


def _split_from_offsets(rhi: np.ndarray, step: float) -> np.ndarray:
    """pi_i >= (1 - e^{-r_i Delta}) / (1 - e^{-Delta}) for r_i <= rhi_i (cells 1..n-1; cell 0: 1)."""
    n = rhi.size - 1
    pi = np.ones(n)
    with np.errstate(over="ignore", invalid="ignore"):
        pi[1:] = np.minimum(np.expm1(-rhi[1:n] * step) / math.expm1(-step) * (1.0 + 16.0 * U), 1.0)
    return np.where(np.isfinite(pi), pi, 1.0)


def _split_from_q(m: np.ndarray, err, mq: np.ndarray, err_q, edges: np.ndarray, step: float):
    """Bounds (pi_hi, pi_lo) on pi_i = E[1 - e^{a_i - L} | cell i] / (1 - e^{-Delta}) from the cell's P-
    and Q-masses: E_P[e^{a - L}; cell] = e^a Q(cell), so pi_i = (1 - e^{a_i} Q_i / P_i) / (1 - e^{-Delta});
    the masses' error bounds taken on each side, the float operations by 32 u absolute in the numerator
    (e^{a} Q / P <= 1 up to the errors; numpy's exp within 4 ulp), the division and expm1 by 8 u
    relative.  Cells 1..n-1; cell 0 (and any cell without P-mass): pi_hi = 1, pi_lo = 0."""
    n = m.size - 1
    pi, pi_lo = np.ones(n), np.zeros(n)
    m_c, mq_c = m[1:n], mq[1:n]
    e_c = err[1:n] if np.ndim(err) else float(err)
    eq_c = err_q[1:n] if np.ndim(err_q) else float(err_q)
    den = -math.expm1(-step)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        ea = np.exp(edges[: n - 1])  # (inf past loss 709: that cell's split is then 1)
        hi = (1.0 - ea * (np.maximum(mq_c - eq_c, 0.0) / (m_c + e_c)) + 32.0 * U) / den * (1.0 + 8.0 * U)
        lo = (1.0 - ea * ((mq_c + eq_c) / (m_c - e_c)) - 32.0 * U) / den * (1.0 - 8.0 * U)
    ok = m_c > 0
    pi[1:] = np.where(ok & np.isfinite(hi), np.clip(hi, 0.0, 1.0), 1.0)
    pi_lo[1:] = np.where(ok & (m_c > e_c) & np.isfinite(lo), np.clip(lo, 0.0, 1.0), 0.0)
    return pi, np.minimum(pi_lo, pi)


def _dots_vector(m: np.ndarray, err, pi: np.ndarray | None):
    """Cells split between their two lattice ends ("connect the dots", Doroshenko et al. 2022), a
    mean-preserving spread of e^{-L}: the upper coupling of the round-up cells, exact to second order.

    Cell i = (a, b], b = a + Delta (i = 1..n-1; n = m.size - 1) sends the fraction pi_i of its mass to b
    and the rest to a, cell 0 all to e_0, the top cell to +inf.  With u = L - a in [0, Delta], sending L
    to b with probability (1 - e^{-u}) / (1 - e^{-Delta}) keeps E[e^{-Y} | L] = e^{-L}; since
    f_eps(s) = (1 - e^{eps} e^{-s})_+ is convex in e^{-s}, Jensen (one step at a time, the others fixed)
    gives E f_eps(S_Y) >= E f_eps(S).  The split's cell average is pi_i = E[1 - e^{-u} | cell] /
    (1 - e^{-Delta}); any pi'_i >= pi_i moves more mass up, which only increases E f_eps (f is
    non-decreasing), so certified upper bounds on pi_i keep the upper bound.  Every Y satisfies
    Y - Delta <= L on cells 1.., so the lower coupling (shift T Delta, cell 0 dropped) holds unchanged.
    Returns (vector on y_0..y_{n-1}, per-point error bounds); pi = None: every cell up whole.
    """
    n = m.size - 1
    if pi is None:
        return m[:n], (err[:n] if np.ndim(err) else float(err))
    up = m[:n] * pi
    dn = m[:n] - up  # >= 0 (pi <= 1); cell 0 keeps nothing below
    v = up.copy()
    v[:-1] += dn[1:]
    if np.ndim(err) == 0:
        return v, float(err) + 4.0 * U * float(np.sum(v))
    e = np.asarray(err, dtype=float)[:n]
    verr = e * pi
    verr[:-1] += e[1:] * (1.0 - pi[1:])
    return v, verr + 4.0 * U * v


def _bias_moments(m: np.ndarray, err, pi: np.ndarray, pi_lo: np.ndarray, u_lo: np.ndarray,
                  step: float) -> tuple | None:
    """(mu, v2): bounds on E[b] and E[b^2] of the split's conditional bias b(L) = E[Y - L | L] under the
    law of L given cells 1..n-1 (loss units), for the Chernoff bound of the lower end.

    A coupling with the law of the split: given L = a + u in cell i, Y = b with probability
    rho(L) = p(u) + c_i (1 - p(u)) / (1 - pi_i), p(u) = (1 - e^{-u}) / (1 - e^{-Delta}) (the exact
    split), c_i = pi'_i - pi_i >= 0 (pi_i = E[p | cell], pi'_i the split used): rho in [p, 1] has cell
    mean pi'_i.  So b = rho Delta - u >= p Delta - u >= 0, b <= Delta, and
    b <= Delta (max_u (p(u) - u / Delta) + c_i / (1 - pi_i)) <= Delta (Delta^2 / (8 (1 - e^{-Delta}))
    + (pi'_i - pi_lo_i) / (1 - pi'_i)) (the max of a function vanishing at both ends, by its second
    derivative); E[b | cell] = pi'_i Delta - E[u | cell] <= (pi'_i - u_lo_i) Delta (and <= max b);
    E b^2 <= max b x E b.
    """
    n = m.size - 1
    w = m[1:n]
    sw = float(np.sum(w))
    tot_err = float(np.sum(err[1:n])) if np.ndim(err) else float(err)
    f1_lo = sw * (1 - 2 * n * U) - tot_err  # the true mass of cells 1..n-1, from below
    if not f1_lo > 0:
        return None
    g = step * step / (8.0 * -math.expm1(-step)) * (1 + 1e-9)
    with np.errstate(divide="ignore", invalid="ignore"):
        bmax = np.minimum(g + (pi[1:] - pi_lo[1:n]) / (1.0 - pi[1:]), 1.0)
    bmax = np.where(np.isfinite(bmax), bmax, 1.0)
    b1 = np.minimum(np.maximum(pi[1:] - u_lo[1:n], 0.0), bmax)  # E[b | cell] <= max b too
    # the masses are known to tot_err in l1 (and both factors are <= 1); float sums add n u sum
    rnd = 2 * n * U * sw
    mu = (float(np.sum(w * b1)) + tot_err + rnd) / f1_lo
    v2 = (float(np.sum(w * (bmax * b1))) + tot_err + rnd) / f1_lo
    return mu * step * (1 + 4 * U), v2 * step * step * (1 + 4 * U)


def _lo_log_tail(steps, step: float, eta: float) -> float:
    """log of a bound on P(sum_j D_j > eta) for D = Y - L of the split, under the laws given cells 1..n-1.

    Given L, D takes two values Delta apart with mean b(L), so Hoeffding's lemma gives
    E[e^{lam D} | L] <= e^{lam b(L) + lam^2 Delta^2 / 8}, and with 0 <= b <= Delta (``_bias_moments``),
    E e^{lam b} <= exp(lam mu + lam^2 e^{lam Delta} V2 / 2) (from e^x <= 1 + x + x^2 e^{|x|} / 2).  Chernoff
    over the T independent steps: for lam > 0,
        log P <= -lam (eta - sum_j k_j mu_j) + lam^2 sum_j k_j (Delta^2/8 + e^{lam Delta} V2_j / 2),
    minimised over a few lam (each lam gives a valid bound).
    """
    t = eta - sum(st.k * st.lo_tail[0] for st in steps)
    b = sum(st.k * st.lo_tail[1] for st in steps) / 2.0
    if t <= 0:
        return 0.0
    a = sum(st.k for st in steps) * step * step / 8.0
    lam0 = t / (2.0 * (a + b))
    best = 0.0
    for f in (0.6, 0.8, 0.9, 1.0):
        lam = lam0 * f
        best = min(best, -lam * t + lam * lam * (a + math.exp(lam * step) * b))
    return best * (1 - 1e-12)


def _lo_eta(steps, step: float, log_beta: float) -> float:
    """Smallest eta (on a 1% ladder) with ``_lo_log_tail`` <= log_beta; inf without the bias bounds."""
    if any(st.lo_tail is None for st in steps):
        return math.inf
    m = -sum(st.k * st.lo_tail[0] for st in steps)
    b = sum(st.k * st.lo_tail[1] for st in steps) / 2.0
    a = sum(st.k for st in steps) * step * step / 8.0
    t = math.sqrt(4.0 * (a + b) * -log_beta)
    eta = max(t - m, 0.0)
    for _ in range(200):
        if _lo_log_tail(steps, step, eta) <= log_beta:
            return eta
        eta = eta * 1.01 + 1e-3 * step
    return math.inf

# ----------------------------------------------------------------------------------------- plan
@dataclass(frozen=True)
class _Plan:
    direction: str
    step: float
    steps: tuple
    capped: bool


def _ranges(entries, direction, rtol, delta_ref, theta_ref):
    tot = sum(k for _, k in entries)
    tgt_hi = max(rtol * delta_ref * 1e-2 / tot, 1e-300)
    tgt_lo = rtol * 1e-4 / tot
    return [_probe_range(m, direction, theta_ref, tgt_lo, tgt_hi) for m, _ in entries]


def _plan(entries, direction: str, width: float, ranges, max_points: int, div: float | None = None) -> _Plan:
    """Grid step Delta = width / div (div = T for the shift T Delta of the lower end, ~0.75
    sqrt(T log(1/beta)) where its Chernoff bound applies; rounded down to c 2^e) and the per-entry
    vectors; the cap raises Delta."""
    tot = sum(k for _, k in entries)
    step = _lattice_step(width / (tot if div is None else div))
    span = max(hi - lo for lo, hi in ranges)
    capped = False
    if span / step > max_points:
        step = _lattice_step(span / max_points)
        capped = True
    steps = tuple(_make_step(m, k, direction, step, lo, hi) for (m, k), (lo, hi) in
                  zip(entries, ranges, strict=True))
    return _Plan(direction, step, steps, capped)
