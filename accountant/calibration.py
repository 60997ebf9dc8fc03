"""Noise calibration and the inverse problems for DP-SGD (Poisson-subsampled Gaussian).

All solvers search a *certified* epsilon (an upper bound), so their answers are safe: the returned
sigma (or steps, or sample rate) gives certified epsilon <= target.  They rely on monotonicity:
epsilon decreases in sigma and increases in the number of steps and in the sample rate (the dominating
pairs are ordered in each parameter).  Bisection in log space; sigma and the sample rate are resolved
to a relative tolerance ``rtol`` (default 1e-4), steps exactly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from mechanisms import _validate as V

from ._search import largest_count
from .privacy_accountant import PrivacyAccountant


@dataclass(frozen=True)
class Calibration:
    """Result of a calibration: the parameter found and the certified epsilon it gives."""

    parameter: str
    value: float
    epsilon: float
    target_epsilon: float
    delta: float
    evaluations: int


def _dpsgd_eps(sigma: float, sample_rate: float, steps: int, delta: float, method: str) -> float:
    acct = PrivacyAccountant()
    acct.step(sigma=sigma, sample_rate=sample_rate, steps=steps)
    return acct.epsilon(delta, method=method)


def _printer(progress: bool | Callable[[str], None] | None) -> Callable[[str], None] | None:
    """``progress``: False/None (silent), True (print to stdout) or a function taking one line."""
    if progress is None or progress is False:
        return None
    if progress is True:
        return lambda line: print(line, flush=True)
    if not callable(progress):
        raise TypeError("progress must be a bool or a function of one string")
    return progress


def _default_method(method: str | None) -> str:
    return "auto" if method is None else method


def _bisect_log(f: Callable[[float], bool], lo: float, hi: float, rtol: float) -> tuple[float, float]:
    """Bracket [lo, hi] (log scale, hi / lo <= 1 + rtol/2) of the switch of a monotone predicate
    that is False at ``lo`` and True at ``hi``."""
    while hi / lo > 1.0 + rtol / 2:
        mid = math.sqrt(lo * hi)
        if f(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi


def calibrate_sigma(target_epsilon: float, delta: float, sample_rate: float, steps: int, *,
                    method: str | None = None, rtol: float = 1e-4,
                    progress: bool | Callable[[str], None] = False) -> Calibration:
    """Smallest noise multiplier sigma whose certified epsilon(delta) after ``steps`` DP-SGD steps
    with Poisson sample rate ``sample_rate`` is <= ``target_epsilon`` (to relative tolerance ``rtol``:
    sigma * (1 - rtol) gives epsilon > target).

    A bracket is found with the fast RDP route (its epsilon is an upper bound of the tighter route's,
    so the RDP-calibrated sigma is a valid upper end), then refined with ``method`` ("auto" by default:
    the tightest certified route, chosen per evaluation).
    """
    target = V.real("target_epsilon", target_epsilon, low=0.0, low_open=True)
    delta = V.delta(delta)
    q = V.probability("sample_rate", sample_rate, open_low=True)
    steps = V.integer("steps", steps, low=1, high=V.MAX_COUNT)
    method = _default_method(method)
    show = _printer(progress)
    evals = 0

    def ok(sig: float, m: str = method) -> bool:
        nonlocal evals
        evals += 1
        e = _dpsgd_eps(sig, q, steps, delta, m)
        if show:
            show(f"  [{evals}] sigma={sig:.8g} epsilon={e:.8g} ({m})")
        return e <= target

    hi = 1.0
    while not ok(hi, "rdp"):
        hi *= 2.0
        if hi > 1e8:
            raise ValueError(f"no sigma <= 1e8 reaches epsilon {target} at delta {delta}")
    if method != "rdp" and not ok(hi):  # pragma: no cover - rdp is never tighter than cf
        raise AssertionError("RDP-calibrated sigma failed the tighter route")
    lo = hi / 2.0
    while ok(lo):
        hi, lo = lo, lo / 2.0
        if lo < 1e-6:
            raise ValueError("target epsilon is reached with vanishing noise; check the parameters")
    _, sigma = _bisect_log(ok, lo, hi, rtol)
    eps = _dpsgd_eps(sigma, q, steps, delta, method)
    return Calibration("sigma", sigma, eps, target, delta, evals + 1)


def max_steps(target_epsilon: float, delta: float, sigma: float, sample_rate: float, *,
              method: str | None = None, limit: int = 10**9,
              progress: bool | Callable[[str], None] = False) -> Calibration:
    """Largest number of DP-SGD steps (at most ``limit``) whose certified epsilon is <= ``target_epsilon``
    (0 if none)."""
    target = V.real("target_epsilon", target_epsilon, low=0.0, low_open=True)
    delta = V.delta(delta)
    sigma = V.positive("sigma", sigma)
    q = V.probability("sample_rate", sample_rate, open_low=True)
    method = _default_method(method)
    show = _printer(progress)
    evals = 0

    def ok(t: int) -> bool:
        nonlocal evals
        evals += 1
        e = _dpsgd_eps(sigma, q, t, delta, method)
        if show:
            show(f"  [{evals}] steps={t} epsilon={e:.8g} ({method})")
        return e <= target

    n = largest_count(ok, limit)
    if n == 0:
        return Calibration("steps", 0, math.inf, target, delta, evals)
    return Calibration("steps", n, _dpsgd_eps(sigma, q, n, delta, method), target, delta, evals + 1)


def max_sample_rate(target_epsilon: float, delta: float, sigma: float, steps: int, *,
                    method: str | None = None, rtol: float = 1e-4,
                    progress: bool | Callable[[str], None] = False) -> Calibration:
    """Largest Poisson sample rate whose certified epsilon is <= ``target_epsilon`` (to ``rtol``)."""
    target = V.real("target_epsilon", target_epsilon, low=0.0, low_open=True)
    delta = V.delta(delta)
    sigma = V.positive("sigma", sigma)
    steps = V.integer("steps", steps, low=1, high=V.MAX_COUNT)
    method = _default_method(method)
    show = _printer(progress)
    evals = 0

    def ok(q: float) -> bool:
        nonlocal evals
        evals += 1
        e = _dpsgd_eps(sigma, q, steps, delta, method)
        if show:
            show(f"  [{evals}] sample_rate={q:.8g} epsilon={e:.8g} ({method})")
        return e <= target

    if ok(1.0):
        return Calibration("sample_rate", 1.0, _dpsgd_eps(sigma, 1.0, steps, delta, method), target, delta,
                           evals)
    lo = 0.5
    while not ok(lo):
        lo /= 2.0
        if lo < 1e-12:
            return Calibration("sample_rate", 0.0, 0.0, target, delta, evals)
    # largest ok value: the predicate "not ok" switches from False (lo) to True (hi)
    lo, _ = _bisect_log(lambda q: not ok(q), lo, min(1.0, lo * 2.0), rtol)
    return Calibration("sample_rate", lo, _dpsgd_eps(sigma, lo, steps, delta, method), target, delta,
                       evals + 1)
