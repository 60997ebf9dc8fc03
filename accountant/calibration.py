"""Noise calibration and the inverse problems for DP-SGD (Poisson-subsampled Gaussian).

All solvers search a *certified* epsilon (an upper bound), so their answers are safe: the returned
sigma (or steps, or sample rate) gives certified epsilon <= target.  They rely on monotonicity:
epsilon decreases in sigma and increases in the number of steps and in the sample rate (the dominating
pairs are ordered in each parameter).  Bisection in log space; sigma and the sample rate are resolved
to a relative tolerance ``rtol`` (default 1e-4), steps exactly.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

from mechanisms import validation as V

from ._search import bisect_log, illinois_log, largest_count
from .privacy_accountant import PrivacyAccountant


@dataclass(frozen=True)
class Calibration:
    """Result of a calibration: the parameter found and the certified epsilon it gives.

    Usable as the number it found (``value``): ``float(c)``, arithmetic (``2 * c``, ``c / 2``, ...),
    comparisons with numbers (``c < 1.2``, ``c == c.value``), ``format(c, ".3f")`` / f-strings, numpy
    (``np.asarray(c)``) and any dpcert argument that takes a real number (``acct.step(sigma=c, ...)``);
    the result of arithmetic is a plain number.  The fields keep the details; ``str(c)`` summarises
    them.  Step counts (:func:`max_steps`) are :class:`StepsCalibration`, usable as an ``int``.
    """

    parameter: str
    value: float
    epsilon: float
    target_epsilon: float
    delta: float
    evaluations: int
    #: how the DP-SGD parameters were derived (e.g. steps from epochs), when they were
    details: dict = field(default_factory=dict, compare=False)

    # ---------------------------------------------------------------- the number
    def _num(self):
        return self.value

    def __float__(self) -> float:
        return float(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        return np.asarray(self._num(), dtype=dtype)

    def __format__(self, spec: str) -> str:
        return format(self._num(), spec)

    def __str__(self) -> str:
        return (f"{self.parameter} = {self._num()} (certified epsilon {self.epsilon:.6g}, target "
                f"{self.target_epsilon:.6g}, delta {self.delta:.3g}; {self.evaluations} evaluations)")

    def __hash__(self) -> int:
        return hash(self._num())  # equal to the value it compares equal to

    def __eq__(self, other):
        if isinstance(other, Calibration):
            return (self.parameter, self.value, self.epsilon, self.target_epsilon, self.delta) == (
                other.parameter, other.value, other.epsilon, other.target_epsilon, other.delta)
        o = _other(other)
        return NotImplemented if o is NotImplemented else self._num() == o

    def __lt__(self, other):
        o = _other(other)
        return NotImplemented if o is NotImplemented else self._num() < o

    def __le__(self, other):
        o = _other(other)
        return NotImplemented if o is NotImplemented else self._num() <= o

    def __gt__(self, other):
        o = _other(other)
        return NotImplemented if o is NotImplemented else self._num() > o

    def __ge__(self, other):
        o = _other(other)
        return NotImplemented if o is NotImplemented else self._num() >= o

    # arithmetic on the value (plain numbers out)
    def __add__(self, o):
        return _op(operator.add, self._num(), o)

    def __radd__(self, o):
        return _op(operator.add, o, self._num())

    def __sub__(self, o):
        return _op(operator.sub, self._num(), o)

    def __rsub__(self, o):
        return _op(operator.sub, o, self._num())

    def __mul__(self, o):
        return _op(operator.mul, self._num(), o)

    def __rmul__(self, o):
        return _op(operator.mul, o, self._num())

    def __truediv__(self, o):
        return _op(operator.truediv, self._num(), o)

    def __rtruediv__(self, o):
        return _op(operator.truediv, o, self._num())

    def __floordiv__(self, o):
        return _op(operator.floordiv, self._num(), o)

    def __rfloordiv__(self, o):
        return _op(operator.floordiv, o, self._num())

    def __mod__(self, o):
        return _op(operator.mod, self._num(), o)

    def __rmod__(self, o):
        return _op(operator.mod, o, self._num())

    def __pow__(self, o):
        return _op(operator.pow, self._num(), o)

    def __rpow__(self, o):
        return _op(operator.pow, o, self._num())

    def __neg__(self):
        return -self._num()

    def __pos__(self):
        return +self._num()

    def __abs__(self):
        return abs(self._num())

    def __round__(self, ndigits=None):
        return round(self._num(), ndigits)

    def __trunc__(self):
        return math.trunc(self._num())

    def __floor__(self):
        return math.floor(self._num())

    def __ceil__(self):
        return math.ceil(self._num())

    @property
    def real(self):
        return self._num()

    @property
    def imag(self):
        return 0

    def conjugate(self):
        return self._num()


@dataclass(frozen=True, eq=False)
class StepsCalibration(Calibration):
    """A calibrated step count: also usable as an ``int`` (``range(c)``, ``acct.step(..., steps=c)``)."""

    def _num(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return int(self.value)

    __hash__ = Calibration.__hash__
    __eq__ = Calibration.__eq__


numbers.Real.register(Calibration)
numbers.Integral.register(StepsCalibration)


def _other(o):
    if isinstance(o, Calibration):
        return o._num()
    if isinstance(o, numbers.Real) or hasattr(o, "__float__") and hasattr(o, "dtype"):
        return o
    return NotImplemented


def _op(fn, a, b):
    a, b = (_other(a) if isinstance(a, Calibration) else a), (_other(b) if isinstance(b, Calibration) else b)
    if not isinstance(a, numbers.Number) and not hasattr(a, "dtype"):
        return NotImplemented
    if not isinstance(b, numbers.Number) and not hasattr(b, "dtype"):
        return NotImplemented
    return fn(a, b)


def dpsgd_schedule(sample_rate: float | None = None, steps: int | None = None, *, epochs: float | None = None,
                   batch_size: int | None = None, dataset_size: int | None = None,
                   need_steps: bool = True) -> tuple[float, int | None, dict]:
    """(sample_rate, steps, details) from either form, as Opacus' ``get_noise_multiplier`` reads them.

    * ``sample_rate`` or ``batch_size`` / ``dataset_size`` (Poisson rate q = batch_size / dataset_size,
      the expected batch size over the dataset size);
    * ``steps`` or ``epochs``: steps = floor(epochs / q).  With ``sample_rate`` this is Opacus'
      ``int(epochs / sample_rate)`` in floating point (so the same runs get the same number of steps:
      ``epochs=7, sample_rate=0.07`` gives 99, as in Opacus); with ``batch_size`` / ``dataset_size`` it
      is the exact integer floor(epochs * dataset_size / batch_size) (``epochs=7``, 7 out of 100: 100).
    """
    details: dict = {}
    if batch_size is not None or dataset_size is not None:
        if sample_rate is not None:
            raise ValueError("give either sample_rate or batch_size and dataset_size, not both")
        if batch_size is None or dataset_size is None:
            raise ValueError("batch_size and dataset_size go together "
                             "(sample_rate = batch_size / dataset_size)")
        n = V.integer("dataset_size", dataset_size, low=1)
        b = V.integer("batch_size", batch_size, low=1, high=n)
        q = b / n
        details.update(batch_size=b, dataset_size=n)
    else:
        if sample_rate is None:
            raise TypeError("give sample_rate (or batch_size and dataset_size)")
        q = V.probability("sample_rate", sample_rate, open_low=True)
        b = n = None
    if epochs is not None:
        if steps is not None:
            raise ValueError("give either steps or epochs, not both")
        ep = V.real("epochs", epochs, low=0.0, low_open=True)
        if n is not None:
            t = math.floor(Fraction(ep) * n / b)
        else:
            t = int(ep / q)
        if t < 1:
            raise ValueError(f"epochs={ep:g} at sample rate {q:g} is less than one step "
                             "(steps = floor(epochs / sample_rate) must be >= 1)")
        steps = t
        details.update(epochs=ep, steps=t)
    elif steps is None and need_steps:
        raise TypeError("give steps (or epochs)")
    details["sample_rate"] = q
    return q, steps, details


def _dpsgd_accountant(sigma: float, sample_rate: float, steps: int,
                      sampler: dict | None = None) -> PrivacyAccountant:
    """An accountant holding ``steps`` DP-SGD steps; ``sampler`` (keyword arguments of
    :meth:`PrivacyAccountant.step` plus ``relation``) selects a batch sampler other than Poisson."""
    if sampler is None:
        acct = PrivacyAccountant()
        acct.step(sigma=sigma, sample_rate=sample_rate, steps=steps)
    else:
        kw = dict(sampler)
        acct = PrivacyAccountant(relation=kw.pop("relation"))
        acct.step(sigma=sigma, steps=steps, **kw)
    return acct


def _dpsgd_eps(sigma: float, sample_rate: float, steps: int, delta: float, method: str,
               sampler: dict | None = None) -> float:
    """Certified epsilon of ``steps`` DP-SGD steps (``_dpsgd_accountant``)."""
    return _dpsgd_accountant(sigma, sample_rate, steps, sampler).epsilon(delta, method=method)


def _sampler(sampling: str, relation: str, batch_size, dataset_size, steps_per_epoch,
             steps_per_record=None) -> dict | None:
    """None for Poisson under add/remove (the default path), else the step() keywords of the sampler."""
    from .sampling import normalise_sampling

    sampling = normalise_sampling(sampling)
    if steps_per_record is not None and sampling != "balls_in_bins":
        raise ValueError("steps_per_record applies to sampling='balls_in_bins' only")
    if sampling == "poisson" and relation == "add_remove":
        if steps_per_epoch is not None:
            raise ValueError("steps_per_epoch applies to sampling='shuffle' or 'balls_in_bins' only")
        return None
    if batch_size is None or dataset_size is None:
        raise TypeError(f"sampling={sampling!r} needs batch_size and dataset_size")
    out = {"sampling": sampling, "relation": relation, "batch_size": batch_size,
           "dataset_size": dataset_size, "steps_per_epoch": steps_per_epoch}
    if steps_per_record is not None:
        out["steps_per_record"] = steps_per_record
    return out


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


def _target_delta(delta, target_delta) -> float:
    if target_delta is not None:
        if delta is not None and delta != target_delta:
            raise ValueError("give either delta or target_delta (Opacus' name), not both")
        delta = target_delta
    if delta is None:
        raise TypeError("give delta (or target_delta)")
    return V.delta(delta)


def _cheap_bound_within(sigma: float, sample_rate: float, steps: int, delta: float, target: float,
                        sampler: dict | None) -> bool:
    """Whether a cheap certified bound already puts ``method="auto"``'s epsilon at ``sigma`` within
    ``target``, so that a search can take that decision without running auto (a few ms instead of up to
    ~0.7 s at tiny sigma, where auto also runs numerical routes that cannot help).

    The cheap bounds are those of auto's own candidates among RDP and the sample-count bound.  Auto
    returns the smallest upper bound of the routes it runs, and skips such a route only when the bracket
    it has is within ``auto_skip_rtol`` (relative; or a tenth of it absolute, for small epsilon) or
    ``AUTO_SKIP_RTOL`` of a certified lower bound (``accountant.route_choice``): then its answer is at
    most bound / (1 - r) or bound + r / 10 (r the largest of those tolerances).  A bound at most
    target (1 - 2 r) - r / 5 therefore decides "within the target" exactly as auto would; otherwise auto
    runs."""
    from . import route_choice

    acct = _dpsgd_accountant(sigma, sample_rate, steps, sampler)
    names = {r.name: r for r in route_choice.auto_candidates(acct._ledger)}
    cheap = [names[n] for n in ("count", "rdp") if n in names]
    if not cheap:
        return False
    r = max([route_choice.AUTO_SKIP_RTOL] + [getattr(x, "auto_skip_rtol", 0.0) for x in cheap])
    limit = target * (1.0 - 2.0 * r) - 0.2 * r
    for route in cheap:
        try:
            if acct.certificate(delta=delta, method=route.name).epsilon <= limit:
                return True
        except (ValueError, ArithmeticError):  # (a cheap route that cannot answer decides nothing)
            continue
    return False


def calibrate_sigma(target_epsilon: float, delta: float | None = None, sample_rate: float | None = None,
                    steps: int | None = None, *, epochs: float | None = None, batch_size: int | None = None,
                    dataset_size: int | None = None, target_delta: float | None = None,
                    method: str | None = None, rtol: float = 1e-4,
                    progress: bool | Callable[[str], None] = False, sampling: str = "poisson",
                    relation: str = "add_remove", steps_per_epoch: int | None = None,
                    steps_per_record: int | None = None) -> Calibration:
    """Smallest noise multiplier sigma whose certified epsilon(delta) after ``steps`` DP-SGD steps
    with Poisson sample rate ``sample_rate`` is <= ``target_epsilon`` (to relative tolerance ``rtol``:
    sigma * (1 - rtol) gives epsilon > target).

    ``sampling`` ("poisson", "fixed_size", "shuffle", "balls_in_bins"; see :mod:`accountant.sampling`)
    and ``relation`` calibrate for the batch sampler the training code really uses; the samplers other
    than Poisson need ``batch_size`` and ``dataset_size`` (epochs then count ceil(n / b) steps each
    unless ``steps_per_epoch`` is given).  For "shuffle" the certified epsilon is the no-amplification
    upper bound (:mod:`mechanisms.shuffling`).  ``steps_per_record`` = k calibrates balls-in-bins with
    each record in k of the epoch's steps (epochs then count ceil(k n / b) steps unless
    ``steps_per_epoch`` is given).

    Like Opacus' ``get_noise_multiplier``, the run may be given as ``epochs`` instead of ``steps`` and
    as ``batch_size`` and ``dataset_size`` instead of ``sample_rate`` (see :func:`dpsgd_schedule` for
    how steps are derived: Opacus' ``int(epochs / sample_rate)``); ``target_delta`` is an alias of
    ``delta``.  The result is usable as a float (:class:`Calibration`).

    A bracket is found with the fast RDP route (its epsilon is an upper bound of the tighter route's,
    so the RDP-calibrated sigma is a valid upper end), then refined with ``method`` ("auto" by default:
    the tightest certified route, chosen per evaluation).  Under "auto", halvings after the first are
    decided by a cheap certified bound where it decides as auto would (``_cheap_bound_within``; the
    answer is the same); ``evaluations`` counts the full certified queries (RDP and ``method``).
    """
    target = V.real("target_epsilon", target_epsilon, low=0.0, low_open=True)
    delta = _target_delta(delta, target_delta)
    sampler = _sampler(sampling, relation, batch_size, dataset_size, steps_per_epoch, steps_per_record)
    if sampler is not None and epochs is not None:
        from .sampling import steps_per_epoch as _spe

        if steps is not None:
            raise ValueError("give either steps or epochs, not both")
        ep = V.real("epochs", epochs, low=0.0, low_open=True)
        if steps_per_record is not None and steps_per_epoch is None:  # mean batch size b: t = ceil(k n / b)
            per_epoch = _spe(batch_size, V.integer("steps_per_record", steps_per_record, low=1)
                             * V.integer("dataset_size", dataset_size, low=1))
        else:
            per_epoch = _spe(batch_size, dataset_size, steps_per_epoch)
        steps = math.ceil(Fraction(ep) * per_epoch)
        q, _, details = dpsgd_schedule(None, steps, batch_size=batch_size, dataset_size=dataset_size)
        details.update(epochs=ep, steps=steps)
    else:
        q, steps, details = dpsgd_schedule(sample_rate, steps, epochs=epochs, batch_size=batch_size,
                                           dataset_size=dataset_size)
    if sampler is not None:
        details.update(sampling=sampler["sampling"], relation=sampler["relation"])
    steps = V.integer("steps", steps, low=1, high=V.MAX_COUNT)
    method = _default_method(method)
    show = _printer(progress)
    evals = 0

    seen: dict[float, float] = {}  # sigma -> certified epsilon with ``method``

    def eps_at(sig: float, m: str = method) -> float:
        nonlocal evals
        if m == method and sig in seen:
            return seen[sig]
        evals += 1
        e = _dpsgd_eps(sig, q, steps, delta, m, sampler)
        if m == method:
            seen[sig] = e
        if show:
            show(f"  [{evals}] sigma={sig:.8g} epsilon={e:.8g} ({m})")
        return e

    def ok(sig: float, m: str = method) -> bool:
        return eps_at(sig, m) <= target

    hi = 1.0
    while not ok(hi, "rdp"):
        hi *= 2.0
        if hi > 1e8:
            raise ValueError(f"no sigma <= 1e8 reaches epsilon {target} at delta {delta}")
    if method != "rdp" and not ok(hi):  # pragma: no cover - rdp is never tighter than cf
        raise AssertionError("RDP-calibrated sigma failed the tighter route")
    lo = hi / 2.0
    # after one halving within the target, the next ones are first checked by a cheap bound, which takes
    # the same decision as auto when it decides (``_cheap_bound_within``): a target far above the RDP
    # bound at sigma = 1 (e.g. 1e6 at q = 0.01, T = 1000: 9 halvings, 2.6 -> 1.4 s) halves many times
    cheap_first = False
    while True:
        by_cheap = cheap_first and _cheap_bound_within(lo, q, steps, delta, target, sampler)
        if not (by_cheap or ok(lo)):
            break
        if show and by_cheap:
            show(f"  [cheap] sigma={lo:.8g}: a cheap certified bound (RDP or sample count) is within target")
        cheap_first = method == "auto"
        hi, lo = lo, lo / 2.0
        if lo < 1e-6:
            raise ValueError("target epsilon is reached with vanishing noise; check the parameters")
    # (certified epsilon falls smoothly with sigma: interpolation finds the switch in ~6 checks where the
    # bisection took ~14; the bracket invariant and the stopping rule are the same)
    _, sigma = illinois_log(eps_at, target, lo, hi, rtol / 2)
    eps = eps_at(sigma)
    return Calibration("sigma", sigma, eps, target, delta, evals, details)


def max_steps(target_epsilon: float, delta: float | None = None, sigma: float | None = None,
              sample_rate: float | None = None, *, batch_size: int | None = None,
              dataset_size: int | None = None, target_delta: float | None = None,
              method: str | None = None, limit: int = 10**9,
              progress: bool | Callable[[str], None] = False) -> StepsCalibration:
    """Largest number of DP-SGD steps (at most ``limit``) whose certified epsilon is <= ``target_epsilon``
    (0 if none).  ``batch_size`` / ``dataset_size`` may replace ``sample_rate``; ``details["epochs"]``
    is then steps * batch_size / dataset_size (the epochs the step count covers).  Usable as an int."""
    target = V.real("target_epsilon", target_epsilon, low=0.0, low_open=True)
    delta = _target_delta(delta, target_delta)
    if sigma is None:
        raise TypeError("give sigma")
    sigma = V.positive("sigma", sigma)
    q, _, details = dpsgd_schedule(sample_rate, None, batch_size=batch_size, dataset_size=dataset_size,
                                   need_steps=False)
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
    if "dataset_size" in details:
        details["epochs"] = n * details["batch_size"] / details["dataset_size"]
    if n == 0:
        return StepsCalibration("steps", 0, math.inf, target, delta, evals, details)
    return StepsCalibration("steps", n, _dpsgd_eps(sigma, q, n, delta, method), target, delta, evals + 1,
                            details)


def max_sample_rate(target_epsilon: float, delta: float | None = None, sigma: float | None = None,
                    steps: int | None = None, *, dataset_size: int | None = None,
                    target_delta: float | None = None, method: str | None = None, rtol: float = 1e-4,
                    progress: bool | Callable[[str], None] = False) -> Calibration:
    """Largest Poisson sample rate whose certified epsilon is <= ``target_epsilon`` (to ``rtol``).

    With ``dataset_size`` N, ``details["batch_size"]`` is the largest batch size B with B / N <= that
    rate (exact floor) and ``details["batch_epsilon"]`` the certified epsilon at rate B / N (<= the
    target, epsilon being non-decreasing in the rate).  The step count is fixed: epochs would tie the
    number of steps to the rate, and epsilon need not be monotone in the rate then.
    """
    target = V.real("target_epsilon", target_epsilon, low=0.0, low_open=True)
    delta = _target_delta(delta, target_delta)
    if sigma is None or steps is None:
        raise TypeError("give sigma and steps")
    sigma = V.positive("sigma", sigma)
    steps = V.integer("steps", steps, low=1, high=V.MAX_COUNT)
    n_data = None if dataset_size is None else V.integer("dataset_size", dataset_size, low=1)
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

    def result(q: float, eps: float, n_evals: int) -> Calibration:
        details: dict = {}
        if n_data is not None:
            b = math.floor(Fraction(q) * n_data)
            details.update(dataset_size=n_data, batch_size=b,
                           batch_epsilon=_dpsgd_eps(sigma, b / n_data, steps, delta, method) if b else 0.0)
        return Calibration("sample_rate", q, eps, target, delta, n_evals, details)

    if ok(1.0):
        return result(1.0, _dpsgd_eps(sigma, 1.0, steps, delta, method), evals)
    lo = 0.5
    while not ok(lo):
        lo /= 2.0
        if lo < 1e-12:
            return result(0.0, 0.0, evals)
    # largest ok value: the predicate "not ok" switches from False (lo) to True (hi)
    lo, _ = bisect_log(lambda q: not ok(q), lo, min(1.0, lo * 2.0), rtol / 2)
    return result(lo, _dpsgd_eps(sigma, lo, steps, delta, method), evals + 1)
