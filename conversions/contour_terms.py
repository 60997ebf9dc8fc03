"""Characteristic-function route (:mod:`conversions.contour`): limits, result types and small log-space
helpers shared by its modules."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

DEFAULT_RTOL = 1e-8
MAX_NODES = 1 << 21
# total work cap per grid: sum over distinct mechanisms of (node cost hint) x nodes.  When it binds the
# truncation point is lowered and the (rigorous) bracket simply gets wider.
WORK_BUDGET = float(1 << 24)
_U64 = 1.1102230246251565e-16
# per-query limits of the whole cf query (one direction): mechanism work units (``mgf_cost`` x nodes, the
# deterministic meter) and wall-clock seconds (a backstop for mechanisms whose cost hint is off).  When
# either is reached the query returns the best certified bracket it has (the Chernoff bound, or the
# trivial one) with ``details["work_limit"]`` set: never a hang.
QUERY_WORK_LIMIT = 1.0e8
QUERY_TIME_LIMIT = 30.0


def query_clock() -> float:
    """The clock of the callers' time limits (``deadline`` arguments): CPU seconds of the calling thread
    (``time.thread_time``), so other processes' load (a training loop on the same machine, a test run on
    the other core) does not change how far a query gets; the wall-clock backstop ``QUERY_TIME_LIMIT``
    stays on ``time.monotonic``."""
    return time.thread_time()


def time_left(deadline: float | None) -> float:
    """Seconds until ``deadline`` (a :func:`query_clock` value; None: no deadline) within the wall-clock
    backstop ``QUERY_TIME_LIMIT``; never negative."""
    limit = QUERY_TIME_LIMIT
    if deadline is not None:
        limit = min(limit, deadline - query_clock())
    return max(limit, 0.0)


_EVAL_CHUNK = 4096  # nodes per mechanism call, so the meter is checked between chunks


class WorkLimitReached(RuntimeError):
    """The per-query work or time limit of the characteristic-function route was reached."""


class WouldBeCapped(RuntimeError):
    """Raised with ``skip_if_capped=True`` when the planned contour cannot reach its truncation target
    within the node and work caps (a wide bracket: near-atomic losses); the caller then prefers another
    route.  Costs only the plan."""


# with skip_if_capped, a plan whose truncation error (predicted from its shortfall) exceeds this fraction
# of delta is not evaluated
DEFER_PREDICTED_REL = 1e-4


def _log_kappa(x: float) -> float:
    return x * math.log(x) - (1.0 + x) * math.log1p(x)



def _phi(w: float, n: int) -> float:
    """e^w - sum_{m<n} w^m / m! for w >= 0 (series below 1, rounded up)."""
    if w < 1.0:
        # terms fall by w / (m + 1) < 1/3: stop once the tail (< the last term) is far below 1e-14
        term = w ** n / math.factorial(n)
        tot = term
        m = n
        while term > 1e-17 * tot:
            m += 1
            term *= w / m
            tot += term
        return tot * (1.0 + 1e-14)
    term = tot = 1.0
    for m in range(1, n):
        term *= w / m
        tot += term
    return math.exp(w) - tot


def _log_sub(a: float, b: float) -> float:
    """log(e^a - e^b), ``-inf`` when b >= a."""
    if b == -math.inf:
        return a
    if b >= a:
        return -math.inf
    return a + math.log(-math.expm1(b - a))


@dataclass(frozen=True)
class DeltaBounds:
    """delta(eps) with a rigorous bracket: ``lower <= delta_true <= upper`` (for the pair)."""

    epsilon: float
    estimate: float
    lower: float
    upper: float
    direction: str = "remove"
    details: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class EpsilonBounds:
    """eps(delta): ``upper`` is certified (delta(upper) <= target); ``lower`` satisfies
    delta_lower(lower) >= target, so the pair's true eps(delta) lies in [lower, upper]."""

    delta: float
    estimate: float
    lower: float
    upper: float
    direction: str = "remove"
    details: dict = field(default_factory=dict, compare=False)


def _floor(eps: float) -> float:
    """(1 - e^eps)_+, the smallest possible delta at eps (0 for eps >= 0; no overflow), rounded down."""
    return 0.0 if eps >= 0.0 else -math.expm1(eps) * (1.0 - 4 * _U64)
