"""Private linear regression by one posterior sample (OPS) with generalized PTR (Redberg, Zhu & Wang 2023,
Sec. 5.1; docs/derivations/generalized-ptr.md §5).

Mechanism (Redberg, Zhu & Wang 2023, Example 4.5 / 5.2; Wang 2018): rows ||x_i|| <= B_X, |y_i| <= B_Y,
proposal lambda > 0, inverse noise scale gamma > 0; sample

    theta ~ p(theta) ∝ exp(-(gamma/2)(||Y - X theta||^2 + lambda ||theta||^2)),
    i.e. theta ~ N(theta_lambda, (gamma H)^{-1}),  H = X^T X + lambda I,  theta_lambda = H^{-1} X^T Y.

Neighbouring relation: add/remove one record (x, y).

Per-instance loss (our derivation, docs/derivations/generalized-ptr.md §5: an exact reduction that replaces
the printed Thm 5.1, see below).  For a pair
(Z, Z + z) the privacy loss of OPS depends on theta only through the residual r = y - x^T theta:
log p_Z/p_{Z+z} = gamma r^2/2 - gamma r_0^2/(2(1+mu)) - log(1+mu)/2 with r_0 = y - x^T theta_lambda(Z),
mu = x^T H_Z^{-1} x.  With a = sqrt(gamma) r_0 the two output laws of sqrt(gamma) r are
N(a, mu) and N(a/(1+mu), mu/(1+mu)), and Gaussian tails (|Z| <= z = Phi^{-1}(1 - delta/2) w.p. 1 - delta)
bound both directions of the loss:

    eps(a, mu; delta) = a^2 mu / (2 (1 + mu)) + |a| sqrt(mu) z + mu max(z^2, 1) / 2          (upper bound)

which is increasing in |a| and mu.  Data-dependent DP at Z = (X, Y) (every add *and* remove neighbour):
with lambda_min = lambda_min(X^T X), R = B_Y + B_X ||theta_lambda(Z)|| (so L = B_X R is the paper's local
Lipschitz constant), Weyl and Sherman-Morrison give for the worst neighbour (a removal)

    mu <= mu_r = B_X^2 / max(lambda, lambda + lambda_min - B_X^2),   |r_0| <= R (1 + mu_r),
    eps_gamma(Z) = eps(sqrt(gamma) R (1 + mu_r), mu_r; delta),

decreasing in lambda_min and increasing in R.  ``gamma*`` solving eps_gamma = eps is the positive root of
a quadratic in sqrt(gamma) (closed form; infeasible iff mu_r max(z^2, 1)/2 >= eps).

Private statistics (Alg 7, releases calibrated with the analytic Gaussian, Balle & Wang 2018):
* lambda_min(X^T X): sensitivity B_X^2 (Weyl), released as a lower bound (clipped at 0);
* log R = log(B_Y + B_X ||theta_lambda||): global sensitivity log(1 + B_X^2/lambda) (ours: by
  Sherman-Morrison |r(Z)| and ||theta(Z+z) - theta(Z)|| give R(Z+z)/R(Z) in
  [1/(1 + B_X^2/lambda_min(H_Z)), 1 + B_X^2/lambda_min(H_Z)] and lambda_min(H_Z) >= lambda), released as
  an upper bound.  Using this global bound avoids the nested PTR step of the paper's Lemma D.2 noise
  (whose proof is in Wang 2018, not in the paper).

**Printed Thm 5.1 is not a valid data-dependent DP bound** (found while testing;
docs/derivations/generalized-ptr.md §5): its cross term sqrt(gamma L^2 log(2/delta)/lambda*) and quadratic
term log(2/delta) B_X^2/(2 lambda*) correspond to a Gaussian tail P[|Z| > t] <= 2 e^{-t^2}, which is false,
and it ignores removal neighbours (lambda_min can drop by B_X^2).  Exact privacy profiles exceed its delta
(tests/test_regression_ptr.py gives an add-neighbour and a remove-neighbour counterexample), so it is not
implemented here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import ndtri

from conversions.gaussian_dp import calibrate_gaussian_mu
from mechanisms import validation as V

from .ptr import DataDependentLoss, PTRResult, StatRelease, generalized_ptr


def _z(delta: float) -> float:
    return float(-ndtri(delta / 2.0))


def ops_pdp_epsilon(a, mu, delta: float) -> np.ndarray:
    """Per-instance epsilon bound of OPS for one (add) pair with scaled residual a and leverage mu.

    eps = a^2 mu/(2(1+mu)) + |a| sqrt(mu) z + mu max(z^2, 1)/2, z = Phi^{-1}(1 - delta/2).  Upper bound on
    the smallest eps with both hockey-stick divergences <= delta (module docstring); vectorised.
    """
    d = V.delta(delta)
    a = np.abs(np.asarray(a, dtype=float))
    mu = np.asarray(mu, dtype=float)
    if np.any(mu < 0):
        raise ValueError("leverage mu must be >= 0")
    z = _z(d)
    return a * a * mu / (2.0 * (1.0 + mu)) + a * np.sqrt(mu) * z + mu * max(z * z, 1.0) / 2.0


def _worst_neighbour(lam: float, lambda_min, log_r, bx: float):
    lm = np.maximum(np.asarray(lambda_min, dtype=float), 0.0)
    mu_r = bx * bx / np.maximum(lam, lam + lm - bx * bx)
    resid = np.exp(np.asarray(log_r, dtype=float)) * (1.0 + mu_r)
    return mu_r, resid


def ops_data_dependent_epsilon(gamma, *, lam: float, lambda_min, log_r, bound_x: float,
                               delta: float) -> np.ndarray:
    """Data-dependent DP epsilon (w.r.t. ``delta``) of OPS at a dataset with statistics (lambda_min, log R).

    Upper bound over all add/remove neighbours (module docstring).  Vectorised over ``gamma`` and the
    statistics; non-increasing in ``lambda_min``, non-decreasing in ``log_r`` and ``gamma``.
    """
    lam = V.positive("lam", lam)
    bx = V.positive("bound_x", bound_x)
    g = np.asarray(gamma, dtype=float)
    if np.any(g < 0):
        raise ValueError("gamma must be >= 0")
    mu_r, resid = _worst_neighbour(lam, lambda_min, log_r, bx)
    return ops_pdp_epsilon(np.sqrt(g) * resid, mu_r, delta)


def ops_gamma_star(epsilon: float, *, lam: float, lambda_min, log_r, bound_x: float, delta: float):
    """Largest gamma with ``ops_data_dependent_epsilon(gamma) <= epsilon`` (closed form; NaN if none).

    With u = sqrt(gamma): A u^2 + B u + C = 0, A = R'^2 mu/(2(1+mu)), B = R' sqrt(mu) z,
    C = mu max(z^2, 1)/2 - epsilon (R' = R (1 + mu_r), mu = mu_r); infeasible iff C >= 0.  The root is
    shrunk by a relative 1e-12 so that the loss at gamma* never exceeds epsilon by rounding.
    """
    eps = V.positive("epsilon", epsilon)
    lam = V.positive("lam", lam)
    bx = V.positive("bound_x", bound_x)
    d = V.delta(delta)
    mu, resid = _worst_neighbour(lam, lambda_min, log_r, bx)
    z = _z(d)
    a = resid * resid * mu / (2.0 * (1.0 + mu))
    b = resid * np.sqrt(mu) * z
    c = mu * max(z * z, 1.0) / 2.0 - eps
    with np.errstate(invalid="ignore"):
        u = (2.0 * (-c)) / (b + np.sqrt(b * b - 4.0 * a * c))  # stable form of (-b + sqrt(b^2 - 4ac))/(2a)
    u = np.where(c < 0, u * (1.0 - 1e-12), np.nan)
    out = u * u
    return float(out) if np.ndim(out) == 0 else out


def ops_statistics(X, y, *, lam: float, bound_x: float, bound_y: float) -> dict:
    """Private sufficient statistics {lambda_min, log_r} and the ridge solution (checks the domain).

    Raises ``ValueError`` if a row norm exceeds ``bound_x`` or a label exceeds ``bound_y`` (the privacy
    analysis depends on these public bounds).
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, d) and y (n,), got {X.shape} and {y.shape}")
    lam = V.positive("lam", lam)
    bx = V.positive("bound_x", bound_x)
    by = V.positive("bound_y", bound_y)
    if np.any(np.linalg.norm(X, axis=1) > bx * (1 + 1e-12)):
        raise ValueError(f"every row of X must have norm <= bound_x = {bx}")
    if np.any(np.abs(y) > by * (1 + 1e-12)):
        raise ValueError(f"every label must satisfy |y| <= bound_y = {by}")
    xtx = X.T @ X
    h = xtx + lam * np.eye(X.shape[1])
    theta = np.linalg.solve(h, X.T @ y)
    lmin = float(max(np.linalg.eigvalsh(xtx)[0], 0.0))
    return {"lambda_min": lmin, "log_r": float(math.log(by + bx * np.linalg.norm(theta))),
            "theta": theta, "hessian": h}


@dataclass(frozen=True)
class OPSPlan:
    """Public parameters of one OPS-PTR call (Alg 7).

    The two statistic releases share the test budget (test_epsilon, test_delta): both get the same
    noise multiplier nu, so their composition is sqrt(2) nu-GDP, calibrated exactly (analytic Gaussian).
    ``false_positive`` delta' is split equally between them.
    """

    lam: float
    epsilon: float
    delta: float
    test_epsilon: float
    test_delta: float
    false_positive: float
    bound_x: float = 1.0
    bound_y: float = 1.0

    def __post_init__(self):
        object.__setattr__(self, "lam", V.positive("lam", self.lam))
        object.__setattr__(self, "epsilon", V.positive("epsilon", self.epsilon))
        object.__setattr__(self, "delta", V.delta(self.delta))
        object.__setattr__(self, "test_epsilon", V.positive("test_epsilon", self.test_epsilon))
        object.__setattr__(self, "test_delta", V.delta(self.test_delta, "test_delta"))
        object.__setattr__(self, "false_positive", V.delta(self.false_positive, "false_positive"))
        object.__setattr__(self, "bound_x", V.positive("bound_x", self.bound_x))
        object.__setattr__(self, "bound_y", V.positive("bound_y", self.bound_y))

    def releases(self) -> list[StatRelease]:
        nu = calibrate_gaussian_mu(self.test_epsilon, self.test_delta) / math.sqrt(2.0)
        s1 = self.bound_x**2
        s2 = math.log1p(self.bound_x**2 / self.lam)
        fp = self.false_positive / 2.0
        return [StatRelease("lambda_min", sensitivity=s1, noise_scale=s1 / nu, failure_prob=fp,
                            direction="lower", clip=0.0),
                StatRelease("log_r", sensitivity=s2, noise_scale=s2 / nu, failure_prob=fp, direction="upper")]

    def loss(self) -> DataDependentLoss:
        def fn(stats, gamma):
            return ops_data_dependent_epsilon(gamma, lam=self.lam, lambda_min=stats["lambda_min"],
                                              log_r=stats["log_r"], bound_x=self.bound_x, delta=self.delta)

        return DataDependentLoss(function=fn, monotone={"lambda_min": "decreasing", "log_r": "increasing"},
                                 delta=self.delta)

    def gamma_star(self, bounds) -> float | None:
        g = ops_gamma_star(self.epsilon, lam=self.lam, lambda_min=bounds["lambda_min"], log_r=bounds["log_r"],
                           bound_x=self.bound_x, delta=self.delta)
        return None if not (isinstance(g, float) and math.isfinite(g) and g > 0) else g


def ops_sample(theta: np.ndarray, hessian: np.ndarray, gamma: float, rng: np.random.Generator) -> np.ndarray:
    """One draw of N(theta, (gamma H)^{-1}) (Cholesky H = L L^T; theta + L^{-T} z / sqrt(gamma))."""
    chol = np.linalg.cholesky(hessian)
    z = rng.standard_normal(theta.shape[0])
    return theta + np.linalg.solve(chol.T, z) / math.sqrt(gamma)


def ops_ptr(X, y, plan: OPSPlan, rng: np.random.Generator, gamma: float | None = None) -> PTRResult:
    """OPS with generalized PTR (Alg 7): private bounds of (lambda_min, log R), then gamma*, then sample.

    With ``gamma=None`` the proposal is lambda and gamma is calibrated from the public bounds
    (uniform-bound mode; bottom iff infeasible); otherwise the fixed proposal (lambda, gamma) is tested.
    Certificate: (epsilon + eps_hat, test_delta + max(delta, false_positive)) with eps_hat <=
    plan.test_epsilon (certified by the accountant).
    """
    st = ops_statistics(X, y, lam=plan.lam, bound_x=plan.bound_x, bound_y=plan.bound_y)

    def run(g, gen):
        return ops_sample(st["theta"], st["hessian"], g, gen)

    def calibrate(bounds, eps, phi):
        return plan.gamma_star(bounds)

    return generalized_ptr({"lambda_min": st["lambda_min"], "log_r": st["log_r"]}, loss=plan.loss(),
                           releases=plan.releases(), phi=gamma, epsilon=plan.epsilon, run=run, rng=rng,
                           test_delta=plan.test_delta, calibrate=None if gamma is not None else calibrate,
                           relation="add_remove")
