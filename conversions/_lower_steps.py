"""Shared parts of the certified lower bounds (:mod:`conversions.lower_bounds`): the ledger as groups of
homogeneous Gaussian / subsampled-Gaussian steps, argument checks and the safe-side eps of a set."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

_U = 2.0**-52  # unit roundoff bound used for outward rounding (2 u, generous)


def step_log_rel_err(z, q) -> np.ndarray:
    """Declared bound on the relative error of the computed log G_i (one step's CDF, see the docstring
    of :mod:`conversions.lower_bounds`): 8 u (z^2 + 64 + |log q|), z = the largest |standardised
    argument| of the step's normal CDFs.  scipy's ndtr / log_ndtr lose ~z^2 ulps to the rounding of
    their argument (measured <= 1000 ulps at |z| = 39; tests/test_lower_bounds.py checks the whole
    log G_i against mpmath with a 4x margin); log q enters through logaddexp of log q + log_ndtr."""
    with np.errstate(divide="ignore"):
        lq = np.minimum(np.abs(np.log(q)), 750.0)
    return 8.0 * _U * (np.asarray(z) ** 2 + 64.0 + lq)


@dataclass(frozen=True)
class _Steps:
    """Homogeneous groups of steps: normalised noise s, sampling rate q, count k (numpy arrays)."""

    s: np.ndarray
    q: np.ndarray
    k: np.ndarray


def _steps_from_entries(entries) -> _Steps:
    """Accept a Ledger, an iterable of (mechanism, count) pairs, or of mechanisms (count 1)."""
    from mechanisms.gaussian import Gaussian
    from mechanisms.subsampled import SubsampledGaussian

    if hasattr(entries, "items") and callable(entries.items):
        entries = entries.items()
    if not isinstance(entries, Iterable):
        raise TypeError(f"entries must be a Ledger or an iterable of (mechanism, count), got "
                        f"{type(entries).__name__}")
    groups: dict[tuple[float, float], float] = {}  # identical (s, q) steps merged: k adds up
    for e in entries:
        mech, cnt = (e if isinstance(e, tuple) else (e, 1))
        if isinstance(cnt, bool) or not isinstance(cnt, (int, np.integer)) or cnt < 0:
            raise ValueError(f"entry count must be an integer >= 0, got {cnt!r}")
        if isinstance(mech, SubsampledGaussian):
            qi = float(mech.sample_rate)
        elif isinstance(mech, Gaussian):
            qi = 1.0
        else:
            raise ValueError("entries must all be SubsampledGaussian or Gaussian mechanisms for the "
                             f"max-statistic lower bound, got {type(mech).__name__}")
        if cnt == 0 or qi == 0.0:
            continue  # q = 0: P_i = Q_i, the step changes neither CDF's ratio structure (drop it)
        key = (float(mech.sigma) / float(mech.sensitivity), qi)
        groups[key] = groups.get(key, 0.0) + float(cnt)
    return _Steps(np.array([g[0] for g in groups]), np.array([g[1] for g in groups]),
                  np.array(list(groups.values())))


def _check_direction(direction: str) -> bool:
    if direction not in ("remove", "add"):
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")
    return direction == "add"


def _check_eps(eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)):
        raise TypeError(f"eps must be a real number, got {type(eps).__name__}")
    eps = float(eps)
    if not math.isfinite(eps):
        raise ValueError(f"eps must be finite, got {eps}")
    return eps


def _empty_delta(eps: float) -> float:
    """(1 - e^eps)_+ rounded down: delta of identical P and Q (empty ledger, or q = 0 only)."""
    return max(0.0, -math.expm1(eps) * (1.0 - 4 * _U))


def _certified_eps(p_lo: float, q_hi: float, delta: float) -> float | None:
    """The eps with P(A) - e^eps Q(A) = delta for a set A with certified masses P(A) >= p_lo and
    Q(A) <= q_hi, rounded down and verified with the same bounds (so delta_true(eps) >= delta); None if
    the set certifies nothing."""
    if p_lo <= delta or q_hi <= 0.0:
        return None
    num = (p_lo - delta) * (1.0 - 4 * _U)
    cand = math.log(num) - math.log(q_hi)
    cand -= 8 * _U * (abs(math.log(num)) + abs(math.log(q_hi))) + 1e-300
    if (p_lo - math.exp(cand) * (1.0 + 4 * _U) * q_hi * (1.0 + 4 * _U)) * (1.0 - 2 * _U) >= delta:
        return cand
    return None


def homogeneous(st: _Steps, what: str) -> tuple[float, float, int]:
    """(s, q, T) of a ledger of one kind of step, for the statistics that need it (``what`` names the
    statistic in the error)."""
    if st.s.size > 1:
        raise ValueError(f"{what} needs a homogeneous ledger (every step the same sigma / sensitivity and "
                         f"sample_rate), got {st.s.size} different steps")
    n = float(st.k[0])
    if n > 2.0**53:
        raise ValueError(f"total step count must be <= 2**53, got {n}")
    return float(st.s[0]), float(st.q[0]), int(n)
