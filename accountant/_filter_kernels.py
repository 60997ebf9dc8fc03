"""numba kernels of :mod:`accountant.individual_filter`: id validation, admission against individual budgets
and the Ind-KNN selection / charging passes (one pass over memory each; errors returned as codes)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# relative inflation of computed charges: float rounding of a charge can never under-charge
_CHARGE_INFLATE = 1.0 + 2.0**-48

# --------------------------------------------------------------------------- numba kernels
# error codes returned by the kernels (validation is done inside the kernels: one pass over memory)
_ERR_RANGE, _ERR_DUP, _ERR_VALUE = 1, 2, 3


def _next_generation(obj) -> np.uint8:
    """Next duplicate-detection stamp in 1..255 (uint8 stamps keep the array cache-resident);
    the stamp array is cleared whenever the generation wraps around."""
    obj._step += 1
    gen = (obj._step - 1) % 255 + 1
    if gen == 1 and obj._step > 1:
        obj._stamp.fill(0)
    return np.uint8(gen)


@njit(cache=True)
def _validate_ids(n: int, ids: np.ndarray, stamp: np.ndarray, step: np.uint8, err: np.ndarray) -> bool:
    """Range and uniqueness of ``ids`` (stamping them with ``step``); on failure fill ``err``."""
    for j in range(ids.shape[0]):
        i = ids[j]
        if i < 0 or i >= n:
            err[0] = _ERR_RANGE
            err[1] = i
            return False
        if stamp[i] == step:
            err[0] = _ERR_DUP
            err[1] = i
            return False
        stamp[i] = step
    return True


@njit(cache=True)
def _losses_ok(x: np.ndarray, err: np.ndarray) -> bool:
    """All entries finite and >= 0 (branch-free scan; on failure, ``err`` gets the first bad index)."""
    bad = False
    for j in range(x.shape[0]):
        bad |= not (x[j] >= 0.0) or x[j] == np.inf
    if not bad:
        return True
    for j in range(x.shape[0]):
        if not (x[j] >= 0.0) or x[j] == np.inf:
            err[0] = _ERR_VALUE
            err[1] = j
            break
    return False


@njit(cache=True)
def _admit_linear(spent: np.ndarray, budget: float, ids: np.ndarray, losses: np.ndarray,
                  stamp: np.ndarray, step: np.uint8, out: np.ndarray, err: np.ndarray) -> np.int64:
    if not _losses_ok(losses.ravel(), err):
        return -1
    if not _validate_ids(spent.shape[0], ids, stamp, step, err):
        return -1
    n_ok = 0
    for j in range(ids.shape[0]):
        i = ids[j]
        new = spent[i] + losses[j] * _CHARGE_INFLATE
        if new <= budget:
            spent[i] = new
            out[j] = True
            n_ok += 1
        else:
            out[j] = False
    return n_ok


@njit(cache=True)
def _admit_grid(spent: np.ndarray, budget: np.ndarray, ids: np.ndarray, losses: np.ndarray,
                stamp: np.ndarray, step: np.uint8, out: np.ndarray, err: np.ndarray) -> np.int64:
    m = budget.shape[0]
    if not _losses_ok(losses.ravel(), err):
        err[1] //= m
        return -1
    if not _validate_ids(spent.shape[0], ids, stamp, step, err):
        return -1
    n_ok = 0
    for j in range(ids.shape[0]):
        i = ids[j]
        ok = True
        for a in range(m):  # branch-free so that the loop vectorises
            ok &= spent[i, a] + losses[j, a] * _CHARGE_INFLATE <= budget[a]
        out[j] = ok
        if ok:
            n_ok += 1
            for a in range(m):
                spent[i, a] += losses[j, a] * _CHARGE_INFLATE
    return n_ok


@njit(cache=True)
def _indknn_select(remaining: np.ndarray, ids: np.ndarray, kappas: np.ndarray, tau: float, c1: float,
                   stamp: np.ndarray, step: np.uint8, pos: np.ndarray, err: np.ndarray) -> np.int64:
    """Validate, then Sel = {i : kappa_i >= tau and z_i >= c1} (thesis Algorithm 4 lines 4-5; its
    rule z >= c1, where the text says z > c1).

    Writes the positions (indices into ``ids``) of the selected records to ``pos``; returns |Sel|.
    """
    bad = False
    for j in range(kappas.shape[0]):
        bad |= not (kappas[j] >= 0.0) or kappas[j] > 1.0
    if bad:
        for j in range(kappas.shape[0]):
            if not (kappas[j] >= 0.0 and kappas[j] <= 1.0):
                err[0] = _ERR_VALUE
                err[1] = j
                return -1
    if not _validate_ids(remaining.shape[0], ids, stamp, step, err):
        return -1
    n = 0
    for j in range(ids.shape[0]):
        if kappas[j] >= tau and remaining[ids[j]] >= c1:
            pos[n] = j
            n += 1
    return n


@njit(cache=True)
def _indknn_charge(remaining: np.ndarray, ids: np.ndarray, kappas: np.ndarray, pos: np.ndarray, n_sel: int,
                   c1: float, sigma2: float, k_noisy: float, weights: np.ndarray) -> None:
    """Thesis Algorithm 4 lines 7-9: pay c1, clip w = min(kappa, sigma2 sqrt(2 K z)), pay
    w^2/(2 sigma2^2 K)."""
    denom = 2.0 * sigma2 * sigma2 * k_noisy
    for jj in range(n_sel):
        j = pos[jj]
        i = ids[j]
        z = remaining[i] - c1  # >= 0: selection required remaining >= c1
        if z < 0.0:
            z = 0.0
        cap = sigma2 * math.sqrt(2.0 * k_noisy * z) * (1.0 - 1e-12)
        w = kappas[j]
        if w > cap:
            w = cap
        charge = w * w / denom * _CHARGE_INFLATE
        while charge > z and w > 0.0:  # never triggered in exact arithmetic; guards rounding
            w *= 1.0 - 1e-9
            charge = w * w / denom * _CHARGE_INFLATE
        weights[jj] = w
        remaining[i] = z - charge
