"""Generalized propose-test-release (PTR): data-dependent losses made publishable by a private test.

Source: Redberg, Zhu & Wang, "Generalized PTR" (AISTATS 2023; seed 000, thesis seed 004 ch. 6), as
corrected by spec 04.  Notation: a proposal ``phi`` parameterises a mechanism M_phi whose privacy loss is
a *data-dependent* function eps_phi(X) (w.r.t. a fixed delta, spec 04 section 1.2: for every neighbour
X' of X, P[M(X) in S] <= e^{eps_phi(X)} P[M(X') in S] + delta), or eps_phi(alpha, X) in RDP form.

DP route (Thm 4.3, spec 04 sections 2.2-2.3) -- the default.  Run M_phi only if a test T passes, where

1. T is (eps_hat, delta_hat)-DP (any neighbouring relation the loss is stated for);
2. false positives are rare: for every X with eps_phi(X) > eps, P[T(X) = 1] <= delta';
3. the coins of T and of M_phi are independent and phi is fixed before the data are seen.

Then the algorithm (including its output "bottom" when the test fails) is

    (eps + eps_hat,  delta_hat + max(delta, delta'))-DP                 (proof of Thm 4.3, L516)

The paper's statement ``delta + delta_hat + delta'`` is looser; it is available with ``combine="sum"``.
The certificate depends on public parameters only and is issued whether or not the test passed.
:class:`GeneralizedPTR` is that certificate as a registered mechanism: an (eps, delta)-DP block
accounted by the four-point dominating pair (like :class:`mechanisms.randomized_response.ApproxDP`), so
it composes exactly with everything else in the ledger.

Tests provided here:

* private upper bound of the loss from private one-sided bounds of its sufficient statistics
  (Thm 4.7 recipe 1, :class:`StatRelease` + :class:`DataDependentLoss` + :func:`generalized_ptr`):
  each statistic is released with Gaussian or Laplace noise shifted by the exact noise quantile, so a
  release is on the wrong side with probability exactly ``failure_prob``; delta' is their sum (union
  bound) and (eps_hat, delta_hat) is the accountant's composition of the releases;
* distance test (section 2.3a, :func:`ptr_distance_test`): pass iff gamma(X) + Lap(1/eps_hat) >
  log(1/delta_tilde)/eps_hat, cost (eps_hat, 0), delta' = delta_tilde / 2;
* classic PTR (Dwork & Lei; Alg 1, :func:`classic_ptr`) as the special case M_phi = f + Lap(beta/eps):
  certificate (2 eps, delta/2) (spec 04 R-02; the paper states the looser (2 eps, delta)).

RDP route (spec 04 section 2.6, :class:`PTRRenyi`).  The paper's Thm B.5 is **false** as printed (spec 04
section 2.6: alpha = 10, delta' = 1e-5, eps_tilde = 1, eps(alpha) = 0.1 has exact RDP 0.7210 while Thm B.5
claims 0.1123).  We implement the corrected bound: with A = exp((alpha - 1) eps_hat(alpha)),

    pass line:  eps_hat(alpha) + eps(alpha)
    fail line:  log(A + max(A - (1 - delta')^alpha, 0) (exp((alpha - 1) eps_tilde(alpha)) - 1)) / (alpha - 1)
    RDP <= min( max(pass, fail),  eps_hat(alpha) + eps_tilde(alpha) ),

where eps_tilde is a data-independent worst-case RDP of M_phi (required finite).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.special import ndtri

from . import validation as V
from ._numerics import log_expm1
from .base import RELATIONS, Mechanism
from .gaussian import Gaussian
from .laplace import Laplace
from .lattice import DiscreteMechanism, rr_atoms
from .registry import from_dict, register

COMBINE_RULES = ("max", "sum")


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


# ---------------------------------------------------------------------------- DP route
def ptr_total_delta(delta: float, test_delta: float, false_positive: float, combine: str = "max") -> float:
    """delta of the Gen-PTR certificate: ``test_delta + max(delta, false_positive)`` (or the paper's sum).

    ``combine="max"`` is what the proof of Thm 4.3 (seed 000 L464-516) establishes; ``"sum"`` is the
    theorem as printed (``delta + delta_hat + delta'``).
    """
    if combine not in COMBINE_RULES:
        raise ValueError(f"combine must be one of {COMBINE_RULES}, got {combine!r}")
    if combine == "max":
        return test_delta + max(delta, false_positive)
    return test_delta + delta + false_positive


@register
@dataclass(frozen=True)
class GeneralizedPTR(DiscreteMechanism):
    """Certificate of one generalized-PTR release (Thm 4.3 with the tight delta), as a ledger entry.

    Parameters
    ----------
    epsilon : float
        Budget eps of the data-dependent loss: M_phi is run only if the test certifies
        eps_phi(X) <= epsilon.  >= 0.
    delta : float, default 0
        The delta w.r.t. which eps_phi is a data-dependent DP function, in [0, 1).
    test_epsilon, test_delta : float, default 0
        (eps_hat, delta_hat): DP parameters of the test, eps_hat >= 0, delta_hat in [0, 1).
    false_positive : float, default 0
        delta': P[test passes] for any X with eps_phi(X) > epsilon, in [0, 1).
    combine : {"max", "sum"}
        ``"max"``: delta_total = delta_hat + max(delta, delta') (proved); ``"sum"``: as printed.
    relation : {"any", "add_remove", "replace_one"}
        Neighbouring relation the data-dependent loss and the test are stated for (``"any"``: the
        caller's relation, e.g. PATE's vote change covers both record relations).  The accountant refuses
        to compose the certificate under another relation (spec 04 P-15).

    Notes
    -----
    The whole algorithm (output or bottom) is (epsilon + test_epsilon, delta_total)-DP; it is accounted
    by the four-point dominating pair of an (eps, delta)-DP mechanism (exact composition by the
    characteristic-function route; the RDP route uses the conditional randomized-response curve).
    ``tight = False``: a concrete PTR algorithm need not attain the dominating pair.
    """

    epsilon: float
    delta: float = 0.0
    test_epsilon: float = 0.0
    test_delta: float = 0.0
    false_positive: float = 0.0
    combine: str = "max"
    relation: str = "any"

    name = "generalized_ptr"
    tight = False

    def __post_init__(self):
        object.__setattr__(self, "epsilon", V.real("epsilon", self.epsilon, low=0.0))
        object.__setattr__(self, "delta", V.real("delta", self.delta, low=0.0, high=1.0, high_open=True))
        object.__setattr__(self, "test_epsilon", V.real("test_epsilon", self.test_epsilon, low=0.0))
        object.__setattr__(self, "test_delta", V.real("test_delta", self.test_delta, low=0.0, high=1.0,
                                                      high_open=True))
        object.__setattr__(self, "false_positive", V.real("false_positive", self.false_positive, low=0.0,
                                                          high=1.0, high_open=True))
        if self.combine not in COMBINE_RULES:
            raise ValueError(f"combine must be one of {COMBINE_RULES}, got {self.combine!r}")
        if self.relation != "any" and self.relation not in RELATIONS:
            raise ValueError(f"relation must be 'any' or one of {RELATIONS}, got {self.relation!r}")
        if self.total_delta >= 1.0:
            raise ValueError(f"total delta {self.total_delta!r} of the PTR certificate must be < 1 "
                             "(test_delta + max(delta, false_positive))")

    @property
    def relations(self) -> tuple[str, ...]:  # type: ignore[override]
        return RELATIONS if self.relation == "any" else (self.relation,)

    @property
    def total_epsilon(self) -> float:
        """eps + eps_hat."""
        return self.epsilon + self.test_epsilon

    @property
    def total_delta(self) -> float:
        """delta_hat + max(delta, delta') (or the sum with ``combine="sum"``)."""
        return ptr_total_delta(self.delta, self.test_delta, self.false_positive, self.combine)

    @property
    def pure_epsilon(self) -> float:
        return self.total_epsilon

    @property
    def infinite_loss_mass(self) -> float:
        return self.total_delta

    def _atoms(self):
        l, w = rr_atoms(self.total_epsilon, 2)
        return l, w * (1.0 - self.total_delta)


# ---------------------------------------------------------------------------- RDP route
def ptr_rdp_corrected(alpha, test_rdp, budget_rdp, worst_rdp, false_positive: float) -> np.ndarray:
    """Corrected RDP bound of generalized PTR (spec 04 section 2.6, replaces the false Thm B.5).

    Parameters
    ----------
    alpha : array_like
        Orders > 1 (finite).
    test_rdp : array_like
        eps_hat(alpha): RDP of the test in both directions.
    budget_rdp : array_like
        eps(alpha): the test guarantees P[T(X) = 1] <= delta' whenever eps_phi(alpha, X) > eps(alpha)
        (``+inf`` where no such guarantee is claimed).
    worst_rdp : array_like
        eps_tilde(alpha): data-independent RDP of M_phi (outgoing divergence for every dataset).
    false_positive : float
        delta' in [0, 1).

    Returns
    -------
    ndarray
        An upper bound on the RDP of the whole algorithm (derivation in the module docstring; the
        fail line uses a_0 >= (1 - delta')^alpha and a_0 + a_1 <= A for a_t = P_T(t)^alpha Q_T(t)^{1-alpha}).
    """
    a = V.alphas(alpha)
    fp = V.real("false_positive", false_positive, low=0.0, high=1.0, high_open=True)
    eh, eb, ew = (np.broadcast_to(np.asarray(x, dtype=float), a.shape) for x in (test_rdp, budget_rdp,
                                                                                  worst_rdp))
    if np.any(~np.isfinite(a)):
        raise ValueError("ptr_rdp_corrected needs finite orders")
    am1 = a - 1.0
    base = eh + ew  # always valid: eps_phi(alpha, X) <= eps_tilde(alpha), composition with the test
    log_a = am1 * eh
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_one_minus = a * math.log1p(-fp) if fp > 0 else np.zeros_like(a)
        # log(A - (1 - delta')^alpha), -inf where non-positive
        diff = log_one_minus - log_a
        log_excess = np.where(diff < 0, log_a + np.log(-np.expm1(np.minimum(diff, -1e-300))), -np.inf)
        log_em1 = log_expm1(am1 * ew)
        fail = np.logaddexp(log_a, log_excess + log_em1) / am1
    passing = eh + eb
    out = np.maximum(passing, fail)
    out = np.where(np.isfinite(eb), out, base)
    return np.minimum(out, base)


@register
@dataclass(frozen=True)
class PTRRenyi(Mechanism):
    """Generalized PTR accounted by RDP with the corrected bound (spec 04 section 2.6 / 4.3).

    Parameters
    ----------
    test : Mechanism
        The test's release (its RDP curve is eps_hat(alpha); it must have no infinite-loss mass).
    budget : Mechanism
        A mechanism whose RDP curve is the budget eps(alpha) that the test certifies: for every
        alpha (in ``budget_orders`` if given), eps_phi(alpha, X) <= eps(alpha) or P[T(X) = 1] <= delta'.
        E.g. for Gaussian noise sigma with a tested local sensitivity <= b: ``Gaussian(sigma, b)``.
    worst_case : Mechanism
        Data-independent RDP of M_phi (eps_tilde(alpha)); must be finite where the bound is used.
    false_positive : float
        delta' in [0, 1).
    budget_orders : list of float, optional
        Orders at which the test's guarantee holds (default: all orders).  At other orders the
        bound is eps_hat + eps_tilde (composition with the worst case).

    Notes
    -----
    Upper bound (``tight = False``); RDP only (``pld_available = False``).
    """

    test: Mechanism
    budget: Mechanism
    worst_case: Mechanism
    false_positive: float
    budget_orders: tuple | None = None

    name = "ptr_renyi"
    tight = False

    def __post_init__(self):
        for f in ("test", "budget", "worst_case"):
            m = getattr(self, f)
            if not isinstance(m, Mechanism):
                raise TypeError(f"{f} must be a Mechanism, got {type(m).__name__}")
            if m.infinite_loss_mass > 0:
                raise ValueError(f"{f} must have no infinite-loss mass for the RDP route "
                                 f"(got {m.infinite_loss_mass!r}); use the DP route (GeneralizedPTR)")
        object.__setattr__(self, "false_positive", V.real("false_positive", self.false_positive, low=0.0,
                                                          high=1.0, high_open=True))
        if self.budget_orders is not None:
            orders = tuple(float(V.alphas([o])[0]) for o in self.budget_orders)
            if not orders:
                raise ValueError("budget_orders must be non-empty (or None for all orders)")
            object.__setattr__(self, "budget_orders", orders)

    def rdp(self, alpha) -> np.ndarray:
        a = V.alphas(alpha)
        out = np.full(a.shape, np.inf)
        fin = np.isfinite(a)
        if not fin.any():
            return out
        af = a[fin]
        eh = np.asarray(self.test.rdp(af), dtype=float)
        ew = np.asarray(self.worst_case.rdp(af), dtype=float)
        eb = np.asarray(self.budget.rdp(af), dtype=float)
        if self.budget_orders is not None:
            sel = np.zeros(af.shape, dtype=bool)
            for o in self.budget_orders:
                sel |= np.isclose(af, o, rtol=1e-12, atol=0.0)
            eb = np.where(sel, eb, np.inf)
        out[fin] = ptr_rdp_corrected(af, eh, eb, ew, self.false_positive)
        return out

    @property
    def pure_epsilon(self) -> float:
        return self.test.pure_epsilon + max(self.worst_case.pure_epsilon, self.budget.pure_epsilon)

    def params(self) -> dict[str, Any]:
        out = super().params()
        if self.budget_orders is not None:
            out["budget_orders"] = list(self.budget_orders)
        return out

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> PTRRenyi:
        p = dict(params)
        for f in ("test", "budget", "worst_case"):
            if isinstance(p.get(f), dict):
                p[f] = from_dict(p[f])
        if p.get("budget_orders") is not None:
            p["budget_orders"] = tuple(p["budget_orders"])
        return cls(**p)


# ---------------------------------------------------------------------------- tests
@dataclass(frozen=True)
class StatRelease:
    """Private one-sided confidence bound of one sufficient statistic (spec 04 section 2.3b, recipe 1).

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
        """Refuse releases whose bound direction disagrees with the loss's monotonicity (spec 04 4.2)."""
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
    from accountant import PrivacyAccountant

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
    """Generalized PTR with a private upper bound of the loss (Alg 2 + Thm 4.7, spec 04 section 4.2).

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
        delta rule of the certificate (see :func:`ptr_total_delta`).
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
    """Generalized PTR with the distance test (spec 04 section 2.3a).

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
    """Classic PTR (Dwork & Lei 2009; seed 000 Alg 1 / Thm 3.4) as a special case of generalized PTR.

    Releases ``value + Lap(beta/epsilon)`` iff ``distance + Lap(1/epsilon) > log(1/delta)/epsilon``,
    where ``distance`` = D_beta(X) = min{d(X, X'') : LS(X'') > beta}.  With M_phi = f + Lap(phi),
    phi = beta/epsilon, eps_phi(X) = LS(X)/phi > epsilon iff LS(X) > beta (Example 4.2), so Thm 4.3
    with the distance test gives the certificate (2 epsilon, delta/2) (spec 04 R-02; Thm 3.4 states the
    looser (2 epsilon, delta)).
    """
    b = V.positive("beta", beta)
    e = V.positive("epsilon", epsilon)
    d = V.real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    v = V.real("value", value)
    return ptr_distance_test(distance, run=lambda phi, g: v + g.laplace(0.0, phi), phi=b / e,
                             epsilon=e, test_epsilon=e, delta_tilde=d, rng=rng)
