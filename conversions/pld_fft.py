"""Discretised PLD (:mod:`conversions.pld`), part 3: tilted FFT composition of the step vectors with
every error term (mass errors, tilt rounding, out-of-window mass, FFT floating point).

The error terms are derived in the docstring of :mod:`conversions.pld`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from .pld_grid import U, _lse, _Plan
from .pld_tilt import _blocks, _kt_grid, _log_mgf_blocks


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



def _scaled(scale: float, err: float) -> float:
    """``scale`` x ``err`` for a nonnegative error term, on the safe side: 0 when the term is exactly 0
    (whatever the scale, also inf), inf when the term is not finite (inf or NaN: 0 x inf is unknown, not
    0, when the scale underflowed; inf / inf inside a term gives NaN)."""
    if err == 0.0:
        return 0.0
    return math.inf if not math.isfinite(err) else scale * err


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
    # the lower end is evaluated at eps + shift_lo (- beta_lo): nan: T Delta; else the Chernoff eta
    shift_lo: float = math.nan
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
    # (beyond float range -- a huge tilt at an extreme query, e.g. eps = 800 -- the error terms are
    # infinite: the bracket is the trivial [0, 1], never an overflow)
    log_pn = 0.0 if plan_only else sum(k * math.log(s + t) for k, s, t in zip(ks, sums, taus, strict=True))
    prod_norm = math.exp(log_pn) if log_pn < 709.0 else math.inf
    c_model = _scaled(prod_norm, sum(k * t / (s + t) for k, s, t in zip(ks, sums, taus, strict=False)))
    c_cell0 = _scaled(prod_norm, sum(k * w / (s + t)
                                     for k, s, t, w in zip(ks, sums, taus, w0s, strict=False)))
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
    # option 3: from the highest start below which the tilted mass is certified <= tol (it folds into
    # the window; the lower bound subtracts it, ``log_junk_lo``) -- no damping length needed: short
    # when the tilted sum is narrow but theta Delta tiny (q = 1e-6, T = 1e4: 1.6e6 -> ~1e5 points)
    a_loss3 = max((log_tol - k_) / t for t, k_ in zip(t_grid, kt_dn, strict=True))
    a3 = min(a_want, math.floor(a_loss3 / step) - base) if math.isfinite(a_loss3) else 0
    n3 = b_rel - a3 if a3 > 0 else n1
    if n1 <= min(n2, n3):
        a_rel, need = 0, int(n1)
    elif n3 < n2:
        a_rel, need = int(a3), int(n3)
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
        lg = math.log(s + 2.0 * e_in)
        if k * lg > 700.0:  # (the power's bound overflows -- 4.5e16 steps: not a composition to run)
            raise ValueError(f"pld: the FFT error bound of {k} composed steps overflows")
        pw = _cpow(xh, k)
        # binary powering: relative error <= (1 + sqrt5 u)^{k-1} - 1 (conversions.pld docstring) + underflow
        rel_pow = math.expm1((k - 1) * math.log1p(math.sqrt(5.0) * U)) * 1.01
        pw_norm = math.sqrt(_sumsq(pw) * (1 + n * U))
        r_pow_2 = math.sqrt(2.0) * (rel_pow * pw_norm + math.sqrt(n) * 1e-300)
        prop = k * e_in * math.exp((k - 1) * lg) if k > 1 else e_in
        bound_mod = math.exp(k * lg)
        err_terms.append((prop + r_pow_2, bound_mod))
        spec = pw if spec is None else spec * pw
    j = len(steps)
    bounds = [b for _, b in err_terms]
    # (each error times the other entries' bounds; no division: a bound may underflow to 0)
    spec_err = sum(e * math.prod(bounds[:i] + bounds[i + 1:]) for i, (e, _) in enumerate(err_terms))
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
