"""Argument checks shared by all mechanisms (and by every public entry point): every failure names the
parameter and its valid range.  Public: plug-ins validate their fields with these helpers."""

from __future__ import annotations

import math
import numbers

import numpy as np


def real(name: str, value, *, low: float = -math.inf, high: float = math.inf,
         low_open: bool = False, high_open: bool = False, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking type, finiteness and the interval.

    Raises ``TypeError`` for non-numbers (including bools) and ``ValueError`` naming ``name`` and the
    valid interval otherwise.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise ValueError(f"{name} must be finite, got {v!r}")
    lo_ok = v > low if low_open else v >= low
    hi_ok = v < high if high_open else v <= high
    if not (lo_ok and hi_ok):
        lb = "(" if low_open else "["
        hb = ")" if (high_open or math.isinf(high)) else "]"
        lb = "(" if (low_open or math.isinf(low)) else lb
        raise ValueError(f"{name} must lie in {lb}{low:g}, {high:g}{hb}, got {v!r}")
    return v


def positive(name: str, value) -> float:
    """A finite real number > 0."""
    return real(name, value, low=0.0, low_open=True)


def nonnegative(name: str, value) -> float:
    """A finite real number >= 0."""
    return real(name, value, low=0.0)


def half_open_unit(name: str, value) -> float:
    """A real number in [0, 1) (e.g. the delta of an (eps, delta) block: 0 allowed, 1 vacuous)."""
    return real(name, value, low=0.0, high=1.0, high_open=True)


def open_unit(name: str, value) -> float:
    """A real number in (0, 1)."""
    return real(name, value, low=0.0, high=1.0, low_open=True, high_open=True)


def one_of(name: str, value, *, options: tuple):
    """``value`` itself if it equals one of ``options`` (a tuple), else ``ValueError`` listing them."""
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def probability(name: str, value, *, open_low: bool = False, open_high: bool = False) -> float:
    """A real number in [0, 1] (ends optionally open)."""
    return real(name, value, low=0.0, high=1.0, low_open=open_low, high_open=open_high)


def integer(name: str, value, *, low: int = 0, high: int | None = None) -> int:
    """An integer (Python or numpy) >= low (and <= high)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    v = int(value)
    if v < low or (high is not None and v > high):
        hi = "10^18" if high == MAX_COUNT else high
        rng = f"in [{low}, {hi}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be an integer {rng}, got {_fmt_int(v)}")
    return v


def _fmt_int(v: int) -> str:
    """``v`` in full if short, else ~10^k (no float overflow, no int-to-str digit limit)."""
    if abs(v) < 10**15:
        return str(v)
    return f"{'-' if v < 0 else ''}~1e{math.log10(abs(v)):.0f}"


# Largest composition count accepted anywhere (one ledger entry, DP-SGD steps, ...).  Extreme counts
# (10^15 steps) are valid inputs: every route does bounded work and answers with a valid bound; beyond
# 10^18 a count is almost surely a unit mistake (and near 2^63 integer arithmetic would overflow).
MAX_COUNT = 10**18


def count(name: str, value) -> int:
    """A composition count: an integer in [0, MAX_COUNT] (10^18); integral floats are accepted."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be an integer in [0, 10^18], got {value!r}")
    return integer(name, value, low=0, high=MAX_COUNT)


def alphas(alpha, *, name: str = "alpha") -> np.ndarray:
    """RDP orders as a float array; every order must be > 1 (``inf`` allowed) and not NaN."""
    a = np.asarray(alpha, dtype=float)
    if np.isnan(a).any():
        raise ValueError(f"{name} must not contain NaN")
    if (a <= 1.0).any():
        raise ValueError(f"{name} (Renyi order) must be > 1, got min {a.min()!r}")
    return a


def delta(value, name: str = "delta") -> float:
    """A target delta in the open interval (0, 1)."""
    return real(name, value, low=0.0, high=1.0, low_open=True, high_open=True)


def epsilon(value, name: str = "epsilon", *, allow_negative: bool = False) -> float:
    """A target epsilon >= 0 (or any real if ``allow_negative``), finite."""
    if allow_negative:
        return real(name, value)
    return real(name, value, low=0.0)
