"""Generalized propose-test-release as a data algorithm: private tests that make a data-dependent loss
publishable, returning the output (or bottom) and the certificate to compose.

The certificate (:class:`mechanisms.ptr.GeneralizedPTR`, Redberg, Zhu & Wang 2023, Thm 4.3 with the
tight delta) and the notation (proposal phi, data-dependent loss eps_phi(X)) are documented in
:mod:`mechanisms.ptr`.  Tests provided here:

* private upper bound of the loss from private one-sided bounds of its sufficient statistics
  (Thm 4.7 recipe 1, :class:`StatRelease` + :class:`DataDependentLoss` + :func:`generalized_ptr`):
  each statistic is released with Gaussian or Laplace noise shifted by the exact noise quantile, so a
  release is on the wrong side with probability exactly ``failure_prob``; delta' is their sum (union
  bound) and (eps_hat, delta_hat) is the accountant's composition of the releases;
* distance test (section 2.3a, :func:`ptr_distance_test`): pass iff gamma(X) + Lap(1/eps_hat) >
  log(1/delta_tilde)/eps_hat, cost (eps_hat, 0), delta' = delta_tilde / 2;
* classic PTR (Dwork & Lei; Alg 1, :func:`classic_ptr`) as the special case M_phi = f + Lap(beta/eps):
  certificate (2 eps, delta/2) (docs/derivations/generalized-ptr.md §2; the paper states the looser (2 eps,
  delta)).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtri

from mechanisms import validation as V
from mechanisms.base import Mechanism
from mechanisms.gaussian import Gaussian
from mechanisms.laplace import Laplace
from mechanisms.ptr import GeneralizedPTR

from ..privacy_accountant import PrivacyAccountant

__all__ = ["BOTTOM", "StatRelease", "DataDependentLoss", "PTRResult", "releases_cost", "generalized_ptr",
           "distance_test_threshold", "distance_test_passes", "ptr_distance_test", "classic_ptr"]


class _Bottom:
    """The PTR output when the test fails (singleton, falsy, prints as ``⊥``)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "⊥"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return (_Bottom, ())


BOTTOM = _Bottom()



@dataclass(frozen=True)
class StatRelease:
    """Private one-sided confidence bound of one sufficient statistic (Thm 4.7 recipe 1;
    docs/derivations/generalized-ptr.md §2).

    Releases ``value + noise + shift`` (``direction="upper"``) or ``value + noise - shift``
    (``"lower"``) where the shift is the exact (1 - failure_prob)-quantile of the noise, so the bound is
    on the wrong side with probability exactly ``failure_prob``.

    Parameters
    ----------
    name : str
        Statistic name (key in the stats mapping and in the public bounds).
    sensitivity : float
        Global sensitivity of the statistic under the loss's neighbouring relation (L1 = L2 for a
        scalar), > 0.
    noise_scale : float
        Gaussian standard deviation or Laplace scale b, > 0.
    failure_prob : float
        delta'_i in (0, 1).
    direction : {"upper", "lower"}
    noise : {"gaussian", "laplace"}
    clip : float, optional
        A public bound the true value is known to respect on the release side (e.g. lambda_min >= 0):
        lower bounds are raised to ``max(bound, clip)``, upper bounds lowered to ``min(bound, clip)``
        (post-processing; the coverage is unchanged).
    """

    name: str
    sensitivity: float
    noise_scale: float
    failure_prob: float
    direction: str = "upper"
    noise: str = "gaussian"
    clip: float | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError("StatRelease.name must be a non-empty string")
        object.__setattr__(self, "sensitivity", V.positive("sensitivity", self.sensitivity))
        object.__setattr__(self, "noise_scale", V.positive("noise_scale", self.noise_scale))
        object.__setattr__(self, "failure_prob", V.real("failure_prob", self.failure_prob, low=0.0,
                                                        high=1.0, low_open=True, high_open=True))
        if self.direction not in ("upper", "lower"):
            raise ValueError(f"direction must be 'upper' or 'lower', got {self.direction!r}")
        if self.noise not in ("gaussian", "laplace"):
            raise ValueError(f"noise must be 'gaussian' or 'laplace', got {self.noise!r}")
        if self.clip is not None:
            object.__setattr__(self, "clip", V.real("clip", self.clip))

    @property
    def mechanism(self) -> Mechanism:
        """The release as a registered mechanism (for the test's privacy cost)."""
        if self.noise == "gaussian":
            return Gaussian(sigma=self.noise_scale, sensitivity=self.sensitivity)
        return Laplace(scale=self.noise_scale, sensitivity=self.sensitivity)

    @property
    def shift(self) -> float:
        """(1 - failure_prob)-quantile of the noise (exact)."""
        p = self.failure_prob
        if self.noise == "gaussian":
            return float(-self.noise_scale * ndtri(p))
        return self.noise_scale * (-math.log(2.0 * p) if p <= 0.5 else math.log(2.0 * (1.0 - p)))

    def release(self, value, rng: np.random.Generator, size=None):
        """Public bound from the private ``value`` (float, or ``size`` draws as an array)."""
        v = np.asarray(value, dtype=float)
        if not np.all(np.isfinite(v)):
            raise ValueError(f"statistic {self.name!r} must be finite, got {value!r}")
        if self.noise == "gaussian":
            z = rng.normal(0.0, self.noise_scale, size)
        else:
            z = rng.laplace(0.0, self.noise_scale, size)
        if self.direction == "upper":
            out = v + z + self.shift
            if self.clip is not None:
                out = np.minimum(out, self.clip)
        else:
            out = v + z - self.shift
            if self.clip is not None:
                out = np.maximum(out, self.clip)
        return float(out) if size is None and np.ndim(out) == 0 else out


@dataclass(frozen=True, eq=False)
class DataDependentLoss:
    """A mechanism's data-dependent privacy loss eps_phi as a function of sufficient statistics.

    Parameters
    ----------
    function : callable
        ``function(stats, phi) -> eps_phi`` where ``stats`` maps statistic names to values (scalars or
        equally shaped arrays).  Must be a valid data-dependent DP loss w.r.t. ``delta`` when evaluated
        at the true statistics, and monotone as declared in ``monotone``.
    monotone : mapping
        ``{stat name: "increasing" | "decreasing"}``: the loss is non-decreasing (non-increasing) in
        that statistic, so an upper (lower) confidence bound of it gives an upper bound of the loss.
    delta : float, default 0
        The delta of the data-dependent DP statement, in [0, 1).
    """

    function: Callable[[Mapping[str, Any], Any], Any]
    monotone: Mapping[str, str]
    delta: float = 0.0

    def __post_init__(self):
        if not callable(self.function):
            raise TypeError("DataDependentLoss.function must be callable")
        for k, v in self.monotone.items():
            if v not in ("increasing", "decreasing"):
                raise ValueError(f"monotone[{k!r}] must be 'increasing' or 'decreasing', got {v!r}")
        object.__setattr__(self, "delta", V.real("delta", self.delta, low=0.0, high=1.0, high_open=True))

    def check_releases(self, releases: Sequence[StatRelease]) -> None:
        """Refuse releases whose bound direction disagrees with the loss's monotonicity."""
        names = [r.name for r in releases]
        if len(set(names)) != len(names):
            raise ValueError(f"duplicate statistic names in releases: {names}")
        if set(names) != set(self.monotone):
            raise ValueError(f"releases {sorted(names)} must cover exactly the loss statistics "
                             f"{sorted(self.monotone)}")
        for r in releases:
            need = "upper" if self.monotone[r.name] == "increasing" else "lower"
            if r.direction != need:
                raise ValueError(f"statistic {r.name!r}: the loss is {self.monotone[r.name]} in it, so the "
                                 f"release must be a {need} bound, got {r.direction!r}")


@dataclass(frozen=True)
class PTRResult:
    """Outcome of one generalized-PTR call.

    Attributes
    ----------
    output : Any
        M_phi(X), or :data:`BOTTOM` if the test failed.
    passed : bool
        Whether the test passed (public: it is a function of the released bounds).
    mechanism : Mechanism
        The certificate as a registered mechanism; compose it into the accountant's ledger.  It depends
        on public parameters only (identical whether or not the test passed).
    bounds : dict
        The public releases of the test (e.g. private confidence bounds of the statistics).
    loss_bound : float
        The released upper bound of eps_phi(X) (public; ``inf`` if no feasible proposal).
    phi : Any
        The proposal used (after calibration, public); None if calibration found no feasible one.
    """

    output: Any
    passed: bool
    mechanism: Mechanism
    bounds: dict = field(default_factory=dict)
    loss_bound: float = math.inf
    phi: Any = None

    def compose_into(self, accountant):
        """Record this release's certificate in ``accountant`` (returns the accountant)."""
        return accountant.compose(self.mechanism)


def releases_cost(mechanisms: Sequence[Mechanism], test_delta: float) -> float:
    """eps_hat of the composed test releases at ``test_delta`` (pure epsilon if ``test_delta == 0``).

    Uses the accountant's certified conversion (upper bound).
    """
    td = V.real("test_delta", test_delta, low=0.0, high=1.0, high_open=True)
    if not mechanisms:
        return 0.0
    if td == 0.0:
        eps = float(sum(m.pure_epsilon for m in mechanisms))
        if not math.isfinite(eps):
            raise ValueError("test_delta = 0 needs pure-DP test releases (e.g. Laplace noise)")
        return eps
    acct = PrivacyAccountant()
    for m in mechanisms:
        acct.compose(m)
    return float(acct.epsilon(td))


def _spawn(rng: np.random.Generator) -> tuple[np.random.Generator, np.random.Generator]:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    a, b = rng.spawn(2)
    return a, b


def generalized_ptr(stats: Mapping[str, float], *, loss: DataDependentLoss,
                    releases: Sequence[StatRelease], phi: Any, epsilon: float,
                    run: Callable[[Any, np.random.Generator], Any], rng: np.random.Generator,
                    test_delta: float = 0.0,
                    calibrate: Callable[[Mapping[str, float], float, Any], Any] | None = None,
                    combine: str = "max", relation: str = "any") -> PTRResult:
    """Generalized PTR with a private upper bound of the loss (Alg 2 + Thm 4.7;
    docs/derivations/generalized-ptr.md §2).

    Parameters
    ----------
    stats : mapping
        The private sufficient statistics (never returned).
    loss : DataDependentLoss
        eps_phi as a monotone function of ``stats``.
    releases : sequence of StatRelease
        One private one-sided bound per statistic, directions matching the loss's monotonicity.
    phi : Any
        The proposal (fixed before seeing the data, or chosen by a DP procedure accounted separately).
    epsilon : float
        Budget eps: M_phi runs iff the loss evaluated at the released bounds is <= epsilon.
    run : callable
        ``run(phi, rng) -> output``: the mechanism M_phi on the private data (its coins are an
        independent stream spawned from ``rng``).
    rng : numpy.random.Generator
    test_delta : float, default 0
        delta_hat at which the composed releases are converted to (eps_hat, delta_hat).
    calibrate : callable, optional
        ``calibrate(bounds, epsilon, phi) -> phi' | None``: choose the final proposal from the public
        bounds only (uniform-bound mode, Alg 5 / OPS gamma*); None means no feasible proposal (bottom).
    combine : {"max", "sum"}
        delta rule of the certificate (see :func:`mechanisms.ptr.ptr_total_delta`).
    relation : str
        Neighbouring relation of the loss and the releases (``GeneralizedPTR.relation``).

    Returns
    -------
    PTRResult
        With certificate ``GeneralizedPTR(epsilon, loss.delta, eps_hat, test_delta, sum of failure
        probabilities)``: (epsilon + eps_hat, test_delta + max(loss.delta, delta'))-DP.
    """
    eps = V.real("epsilon", epsilon, low=0.0)
    if not isinstance(loss, DataDependentLoss):
        raise TypeError("loss must be a DataDependentLoss")
    releases = list(releases)
    loss.check_releases(releases)
    missing = [r.name for r in releases if r.name not in stats]
    if missing:
        raise ValueError(f"stats is missing {missing}")
    fp = float(sum(r.failure_prob for r in releases))
    if fp >= 1.0:
        raise ValueError(f"false-positive rate (sum of failure probabilities) must be < 1, got {fp!r}")
    eps_hat = releases_cost([r.mechanism for r in releases], test_delta)
    mech = GeneralizedPTR(epsilon=eps, delta=loss.delta, test_epsilon=eps_hat, test_delta=test_delta,
                          false_positive=fp, combine=combine, relation=relation)
    test_rng, mech_rng = _spawn(rng)
    bounds = {r.name: r.release(stats[r.name], test_rng) for r in releases}
    if calibrate is not None:
        phi_final = calibrate(bounds, eps, phi)
        feasible = phi_final is not None
    else:
        phi_final, feasible = phi, True
    loss_bound = float(loss.function(bounds, phi_final)) if feasible else math.inf
    passed = feasible and loss_bound <= eps
    output = run(phi_final, mech_rng) if passed else BOTTOM
    return PTRResult(output=output, passed=bool(passed), mechanism=mech, bounds=bounds,
                     loss_bound=loss_bound, phi=phi_final)


def distance_test_threshold(test_epsilon: float, delta_tilde: float) -> float:
    """log(1/delta_tilde)/eps_hat: the distance test passes iff gamma + Lap(1/eps_hat) exceeds this."""
    e = V.positive("test_epsilon", test_epsilon)
    d = V.real("delta_tilde", delta_tilde, low=0.0, high=1.0, low_open=True, high_open=True)
    return math.log(1.0 / d) / e


def distance_test_passes(distance, test_epsilon: float, delta_tilde: float, rng: np.random.Generator,
                         size=None):
    """The distance test's decision: gamma + Lap(1/test_epsilon) > log(1/delta_tilde)/test_epsilon.

    ``size`` draws independent decisions (vectorised, for simulation).
    """
    dist = np.asarray(distance, dtype=float)
    if np.any(dist < 0) or not np.all(np.isfinite(dist)):
        raise ValueError("distance must be finite and >= 0")
    thr = distance_test_threshold(test_epsilon, delta_tilde)
    return dist + rng.laplace(0.0, 1.0 / test_epsilon, size) > thr


def ptr_distance_test(distance: float, *, run: Callable[[Any, np.random.Generator], Any], phi: Any,
                      epsilon: float, test_epsilon: float, delta_tilde: float, rng: np.random.Generator,
                      delta: float = 0.0, combine: str = "max", relation: str = "any") -> PTRResult:
    """Generalized PTR with the distance test (docs/derivations/generalized-ptr.md §2).

    ``distance`` = gamma(X) = min{d(X, X'') : eps_phi(X'') > epsilon} (sensitivity 1 under the
    dataset distance).  Pass iff gamma + Lap(1/test_epsilon) > log(1/delta_tilde)/test_epsilon.
    Cost (test_epsilon, 0); false positive delta_tilde / 2 (when gamma = 0 the pass probability is
    exactly P[Lap(1/e) > log(1/delta_tilde)/e] = delta_tilde/2).
    """
    dist = V.real("distance", distance, low=0.0)
    thr = distance_test_threshold(test_epsilon, delta_tilde)
    mech = GeneralizedPTR(epsilon=V.real("epsilon", epsilon, low=0.0), delta=delta,
                          test_epsilon=test_epsilon, test_delta=0.0, false_positive=delta_tilde / 2.0,
                          combine=combine, relation=relation)
    test_rng, mech_rng = _spawn(rng)
    noisy = dist + test_rng.laplace(0.0, 1.0 / test_epsilon)
    passed = bool(noisy > thr)
    output = run(phi, mech_rng) if passed else BOTTOM
    return PTRResult(output=output, passed=bool(passed), mechanism=mech, bounds={"distance": float(noisy)},
                     loss_bound=epsilon if passed else math.inf, phi=phi)


def classic_ptr(value: float, distance: float, *, beta: float, epsilon: float, delta: float,
                rng: np.random.Generator) -> PTRResult:
    """Classic PTR (Dwork & Lei 2009; Redberg, Zhu & Wang 2023, Alg 1 / Thm 3.4) as a special case of
    generalized PTR.

    Releases ``value + Lap(beta/epsilon)`` iff ``distance + Lap(1/epsilon) > log(1/delta)/epsilon``,
    where ``distance`` = D_beta(X) = min{d(X, X'') : LS(X'') > beta}.  With M_phi = f + Lap(phi),
    phi = beta/epsilon, eps_phi(X) = LS(X)/phi > epsilon iff LS(X) > beta (Example 4.2), so Thm 4.3
    with the distance test gives the certificate (2 epsilon, delta/2) (docs/derivations/generalized-ptr.md
    §2; Thm 3.4 states the looser (2 epsilon, delta)).
    """
    b = V.positive("beta", beta)
    e = V.positive("epsilon", epsilon)
    d = V.real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    v = V.real("value", value)
    return ptr_distance_test(distance, run=lambda phi, g: v + g.laplace(0.0, phi), phi=b / e,
                             epsilon=e, test_epsilon=e, delta_tilde=d, rng=rng)
