"""Per-instance privacy of GLM output perturbation with Hessian-shaped noise.

Mechanism (Redberg, Zhu & Wang 2023, "Generalized PTR", App. C.2; docs/derivations/generalized-ptr.md):
for a GLM objective
J(theta; D) = sum_i f(x_i^T theta; y_i) + (lambda/2) ||theta||^2 with minimiser theta*_D and Hessian
H_D = grad^2 J(theta*_D; D), release

    theta_hat = theta*_D + N(0, (gamma H_D)^{-1})        (gamma: inverse noise scale).

Neighbours: add/remove one point z = (x, y) (D' = D + z if ``adding``, else D - z).

* Exact per-instance pair: for fixed (D, z) the two output laws are the Gaussians
  N(theta*_D, (gamma H_D)^{-1}) and N(theta*_D', (gamma H_D')^{-1}); :func:`output_perturbation_pair`
  returns them as a :class:`mechanisms.gaussian_pair.GaussianPair`, whose characteristic-function / RDP
  routes give the per-instance (eps, delta) of that individual exactly (up to the numerical solution of
  the two optimisation problems, which is not part of the certified error: both are solved by Newton's
  method to a gradient residual of 1e-10 relative and checked).  It is the reference for any
  per-instance bound.
* Publishable report: :func:`report_e1` evaluates the per-instance bound of Thm E.1 (Redberg, Zhu & Wang)
  with the data-independent substitutions alpha >= lambda and ||x||^2_{H^{-1}} <= ||x||^2 / lambda
  (H >= lambda I): it depends only on ||x||, lambda, gamma and the loss constants (R, L, beta), so it
  is a function every individual can evaluate on her own data at no privacy cost:

      eps(z) = eps_0 (1 + log(2/delta)) + e^{R L |x| / lambda} [gamma L^2 |x|^2 / (2 lambda)
               + sqrt(gamma L^2 |x|^2 log(2/delta) / lambda)],
      eps_0 = e^{R L |x| / lambda} - 1 + 4 beta |x|^2 / lambda,        0 < delta < 2/e.

  Thm E.1's proof has a gap (its tail step treats a chi variable as half-normal);
  the tests check the bound against the exact pair above on random logistic instances (it held in every
  case, with a large margin) -- a numerical check, not a proof: the exact pair is the certified value.
  Logistic loss log(1 + e^{-y m}) with |y| <= 1: R = 1, L = 1, beta = 1/4 (Redberg, Zhu & Wang 2023,
  Example C.5).
"""

from __future__ import annotations

import math

import numpy as np

from mechanisms import validation as V
from mechanisms.gaussian_pair import GaussianPair

from .per_instance import LOSSES, objective_gradient_hessian, objpert_solve

__all__ = ["glm_optimum", "output_perturbation_pair", "report_e1", "LOSS_CONSTANTS"]

#: (R, L, beta): generalized self-concordance, Lipschitz constant of f in the margin, smoothness bound
LOSS_CONSTANTS = {"logistic": (1.0, 1.0, 0.25)}


def glm_optimum(X, y, *, lam: float, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """(theta*, H = grad^2 J(theta*)) for J = sum_i f(x_i^T theta; y_i) + lam/2 |theta|^2 (Newton)."""
    X = np.atleast_2d(np.asarray(X, dtype=float))
    theta = objpert_solve(X, y, np.zeros(X.shape[1]), lam=lam, loss=loss)
    _, h = objective_gradient_hessian(theta, X, y, lam, loss)
    return theta, h


def output_perturbation_pair(X, y, z_x, z_y, *, lam: float, gamma: float, loss: str,
                             adding: bool) -> GaussianPair:
    """The exact pair (release on D, release on D +- z) of output perturbation, as a GaussianPair.

    ``adding=False`` removes the first row of D equal to (z_x, z_y) (ValueError if there is none).
    """
    if loss not in LOSSES:
        raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
    lam = V.positive("lam", lam)
    gamma = V.positive("gamma", gamma)
    X = np.atleast_2d(np.asarray(X, dtype=float))
    y = np.atleast_1d(np.asarray(y, dtype=float))
    zx = np.asarray(z_x, dtype=float).ravel()
    zy = float(z_y)
    if adding:
        X2, y2 = np.vstack([X, zx]), np.append(y, zy)
    else:
        hit = np.flatnonzero(np.all(X == zx, axis=1) & (y == zy))
        if not hit.size:
            raise ValueError("adding=False: z is not a row of D")
        keep = np.ones(len(y), dtype=bool)
        keep[hit[0]] = False
        X2, y2 = X[keep], y[keep]
    t1, h1 = glm_optimum(X, y, lam=lam, loss=loss)
    t2, h2 = glm_optimum(X2, y2, lam=lam, loss=loss)
    return GaussianPair.from_gaussians(t1, np.linalg.inv(gamma * h1), t2, np.linalg.inv(gamma * h2))


def report_e1(z_x, *, lam: float, gamma: float, delta: float, loss: str = "logistic") -> np.ndarray:
    """Thm E.1's per-instance epsilon at ``delta`` with data-independent substitutions (module docstring).

    ``z_x``: one (d,) or several (m, d) feature vectors.  Published bound, checked numerically only.
    """
    if loss not in LOSS_CONSTANTS:
        raise ValueError(f"loss must be one of {tuple(LOSS_CONSTANTS)}, got {loss!r}")
    lam = V.positive("lam", lam)
    gamma = V.positive("gamma", gamma)
    d = V.real("delta", delta, low=0.0, high=2.0 / math.e, low_open=True, high_open=True)
    r, lip, beta = LOSS_CONSTANTS[loss]
    zx = np.atleast_2d(np.asarray(z_x, dtype=float))
    nx = np.linalg.norm(zx, axis=1)
    grow = np.exp(r * lip * nx / lam)
    eps0 = np.expm1(r * lip * nx / lam) + 4.0 * beta * nx * nx / lam
    lg = math.log(2.0 / d)
    w = gamma * lip * lip * nx * nx / lam
    out = eps0 * (1.0 + lg) + grow * (0.5 * w + np.sqrt(w * lg))
    return out if out.size > 1 else out.reshape(())
