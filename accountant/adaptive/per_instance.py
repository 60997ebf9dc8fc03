"""Per-instance privacy of objective perturbation and privately publishable privacy reports.

Source: Redberg & Wang 2021, "Privately publishable per-instance privacy", restated and corrected in
docs/derivations/per-instance.md.  Neighbouring relation: add/remove one data point z = (x, y); everything is
for a fixed dataset D and individual z (per-instance DP, pDP).

Objective perturbation (Alg 1): theta^P = argmin_theta J(theta; D) + b^T theta, b ~ N(0, sigma^2 I_d),
J(theta; D) = sum_i f(x_i^T theta; y_i) + (lambda/2) ||theta||^2 (GLM loss f, r = 0, unconstrained).
Kifer, Smith & Thakurta (2012) Thm 5 as restated by Redberg & Wang (docs/derivations/per-instance.md §1, the
printed "sigma" read as the variance): with ||grad l|| <= xi,
f'' ||x||^2 <= beta, lambda >= 2 beta/eps_1 and sigma = xi sqrt(8 log(2/delta) + 4 eps_1)/eps_1 the
release is (eps_1, delta)-DP (:func:`objpert_epsilon`, ledger entry ``ApproxDP(eps_1, delta)``).

Ex-post pDP (Thm 6 / Cor 7 with an explicit sign, docs/derivations/per-instance.md §2; exact for GLMs).  For
D' = D +- z (s = +1 adding, -1 removing), H = grad^2 J(theta; D) (contains z's term when removing),
G_D = grad J(theta; D) (= -b at theta^P), mu(x) = x^T H^{-1} x:

    log p_D(theta)/p_D'(theta) = -log(1 + s f'' mu(x)) + f'^2 ||x||^2/(2 sigma^2) + s f' G_D^T x / sigma^2,

f', f'' at (x^T theta; y).  The ex-post loss is its absolute value (:func:`expost_log_ratio`).  It must not
be published raw (the paper's Example 4: it leaks Q(D)); only the report *functions* below are publishable.

DATA-INDEP report (zero extra privacy cost; depends only on theta^P and the querying z):
    eps1bar(z) = -log(1 - f'' ||x||^2/lambda) + f'^2 ||x||^2/(2 sigma^2) + |f'| ||x|| q/sigma,
    q = Phi^{-1}(1 - rho/2),
valid w.p. >= 1 - rho for each fixed (D, z) (|b^T x| is N(0, sigma^2 ||x||^2) whatever theta^P is).

DATA-DEP report (Alg 2; releases g^P = grad J(theta^P; D) + N(0, sigma_2^2 I) and H^P = H + sigma_3 W,
W ~ GOE(d)):
    gbar = min(|f' (g^P)^T x| + sigma_2 |f'| ||x|| q, sigma |f'| ||x|| q),  q = Phi^{-1}(1 - rho/2)
    mubar = min(3/2 x^T (H^P)^{-1} x, ||x||^2/lambda)
    eps1bar(z) = -log(1 - f'' mubar) + f'^2 ||x||^2/(2 sigma^2) + gbar/sigma^2,
valid w.p. >= 1 - 3 rho when lambda >= 2 sigma_3 tau_GOE(1 - rho/2) (then H/2 <= H^P <= 3H/2).  The first
argument of the min carries an absolute value (the paper omits it, docs/derivations/per-instance.md §3).
tau_GOE is the conservative quantile 2 sqrt(d) + 2 sqrt(log(1/p)) of lambda_1(GOE(d)) (ours,
docs/derivations/per-instance.md §3). Costs: the gradient release is a Gaussian mechanism of L2 sensitivity
xi; the GOE release is equivalent to a Gaussian mechanism of sensitivity beta/sqrt(2) (Renyi divergence
alpha ||E||_F^2/(4 sigma_3^2)). Per-individual costs (zCDP) rho_2(z) = f'^2 ||x||^2/(2 sigma_2^2), rho_3(z)
= f''^2 ||x||^4/(4 sigma_3^2), converted by eps(z; delta) = rho + 2 sqrt(rho log(1/delta)) (Thm 10.2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, ndtri

from conversions.gaussian_dp import calibrate_gaussian_mu
from mechanisms import validation as V
from mechanisms.gaussian import Gaussian
from mechanisms.randomized_response import ApproxDP

LOSSES = ("logistic", "squared")


# ---------------------------------------------------------------------------- GLM losses
def glm_derivatives(margin, y, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """(f'(m; y), f''(m; y)) for ``loss`` in {"logistic", "squared"} (vectorised).

    logistic f = log(1 + e^{-y m}): f' = -y sig(-y m), f'' = y^2 sig(y m) sig(-y m) (<= 1/4 for |y| <= 1);
    squared f = (m - y)^2/2: f' = m - y, f'' = 1.
    """
    m = np.asarray(margin, dtype=float)
    yy = np.asarray(y, dtype=float)
    if loss == "logistic":
        return -yy * expit(-yy * m), yy * yy * expit(yy * m) * expit(-yy * m)
    if loss == "squared":
        return m - yy, np.ones(np.broadcast(m, yy).shape)
    raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")


def _glm_value(margin, y, loss: str) -> np.ndarray:
    m = np.asarray(margin, dtype=float)
    yy = np.asarray(y, dtype=float)
    if loss == "logistic":
        return np.logaddexp(0.0, -yy * m)
    return 0.5 * (m - yy) ** 2


def objective_gradient_hessian(theta, X, y, lam: float, loss: str) -> tuple[np.ndarray, np.ndarray]:
    """grad J(theta; D) and grad^2 J(theta; D) for J = sum_i f(x_i^T theta; y_i) + lam/2 ||theta||^2."""
    X = np.asarray(X, dtype=float)
    th = np.asarray(theta, dtype=float)
    f1, f2 = glm_derivatives(X @ th, y, loss)
    g = X.T @ f1 + lam * th
    h = (X * f2[:, None]).T @ X + lam * np.eye(X.shape[1])
    return g, h


def objpert_solve(X, y, b, *, lam: float, loss: str, tol: float = 1e-10, max_iter: int = 200) -> np.ndarray:
    """theta^P = argmin J(theta; D) + b^T theta by damped Newton (unconstrained, strictly convex).

    Stops when ||grad J + b|| <= ``tol`` * scale, scale = max(1, ||b||, sum_i |f'_i| ||x_i||, lam ||theta||)
    (the size of the terms whose cancellation defines the optimum).  Raises ``RuntimeError`` otherwise:
    the pDP formulas assume the exact minimiser (docs/derivations/per-instance.md §2).
    """
    X = np.asarray(X, dtype=float)
    b = np.asarray(b, dtype=float)
    lam = V.positive("lam", lam)
    th = np.zeros(X.shape[1])
    norms = np.linalg.norm(X, axis=1)

    def obj(t):
        return float(np.sum(_glm_value(X @ t, y, loss)) + 0.5 * lam * t @ t + b @ t)

    def residual(t):
        g, h = objective_gradient_hessian(t, X, y, lam, loss)
        f1, _ = glm_derivatives(X @ t, y, loss)
        scale = max(1.0, float(np.linalg.norm(b)), float(np.abs(f1) @ norms), lam * float(np.linalg.norm(t)))
        return g + b, h, scale

    for _ in range(max_iter):
        g, h, scale = residual(th)
        if np.linalg.norm(g) <= tol * scale:
            return th
        step = np.linalg.solve(h, g)
        t = 1.0
        f0 = obj(th)
        slack = 1e-12 * (1.0 + abs(f0))  # round-off level: accept full Newton steps near the optimum
        while obj(th - t * step) > f0 - 1e-4 * t * (g @ step) + slack and t > 1e-10:
            t *= 0.5
        th = th - t * step
    g, _, scale = residual(th)
    if np.linalg.norm(g) > tol * scale:
        raise RuntimeError(f"objective perturbation did not converge (residual {np.linalg.norm(g):.3g})")
    return th


def objpert_epsilon(sigma: float, delta: float, *, xi: float = 1.0, smoothness: float = 0.25,
                    lam: float | None = None) -> float:
    """eps_1 of objective perturbation (Kifer Thm 5): sigma^2 = xi^2 (8 log(2/delta) + 4 eps_1)/eps_1^2.

    Positive root eps_1 = (4 xi^2 + sqrt(16 xi^4 + 32 sigma^2 xi^2 log(2/delta)))/(2 sigma^2).  If ``lam``
    is given, checks lam >= 2 smoothness/eps_1 (raises otherwise).  Compose ``ApproxDP(eps_1, delta)``.
    """
    s = V.positive("sigma", sigma)
    d = V.delta(delta)
    x = V.positive("xi", xi)
    ld = math.log(2.0 / d)
    e1 = (4 * x * x + math.sqrt(16 * x**4 + 32 * s * s * x * x * ld)) / (2 * s * s)
    if lam is not None and V.positive("lam", lam) < 2.0 * V.positive("smoothness", smoothness) / e1:
        raise ValueError(f"lambda = {lam} < 2 beta/eps_1 = {2 * smoothness / e1:.6g}: Thm 5 does not apply")
    return e1


def objpert_sigma(eps1: float, delta: float, xi: float = 1.0) -> float:
    """sigma = xi sqrt(8 log(2/delta) + 4 eps_1)/eps_1 (Kifer et al. Thm 5, the standard deviation;
    docs/derivations/per-instance.md §1)."""
    e = V.positive("eps1", eps1)
    return V.positive("xi", xi) * math.sqrt(8.0 * math.log(2.0 / V.delta(delta)) + 4.0 * e) / e


def objpert_mechanism(sigma: float, delta: float, *, lam: float, xi: float = 1.0,
                      smoothness: float = 0.25) -> ApproxDP:
    """The objective-perturbation release as a ledger entry (an (eps_1, delta) block)."""
    return ApproxDP(epsilon=objpert_epsilon(sigma, delta, xi=xi, smoothness=smoothness, lam=lam), delta=delta)


# ---------------------------------------------------------------------------- ex-post pDP
def expost_log_ratio(theta, X, y, z_x, z_y, *, sigma: float, lam: float, loss: str, adding) -> np.ndarray:
    """Signed ex-post log density ratio log p_D(theta)/p_{D +- z}(theta) (Cor 7, explicit sign).

    Parameters
    ----------
    theta : (d,) array
        The released output theta^P.
    X, y : arrays
        The dataset D itself (contains z when ``adding`` is False).
    z_x, z_y : arrays
        One individual (d,), () or several (m, d), (m,).
    adding : bool or bool array
        True if z is not in D (D' = D + z), False if z in D (D' = D - z).

    Returns
    -------
    ndarray
        Exact log ratio; the ex-post pDP is its absolute value.  Raises if 1 + s f'' mu <= 0.
    """
    s_ = V.positive("sigma", sigma)
    g, h = objective_gradient_hessian(theta, X, y, V.positive("lam", lam), loss)
    zx = np.atleast_2d(np.asarray(z_x, dtype=float))
    zy = np.atleast_1d(np.asarray(z_y, dtype=float))
    sign = np.where(np.atleast_1d(np.asarray(adding, dtype=bool)), 1.0, -1.0)
    f1, f2 = glm_derivatives(zx @ np.asarray(theta, dtype=float), zy, loss)
    mu = np.einsum("ij,ij->i", zx, np.linalg.solve(h, zx.T).T)
    arg = sign * f2 * mu
    if np.any(arg <= -1.0):
        raise ValueError("1 + s f'' mu(x) <= 0: z is not in D (removing requires z in D)")
    xx = np.einsum("ij,ij->i", zx, zx)
    out = -np.log1p(arg) + f1 * f1 * xx / (2 * s_ * s_) + sign * f1 * (zx @ g) / (s_ * s_)
    return out if out.size > 1 else out.reshape(np.shape(z_y))


def _quantile(rho: float) -> float:
    return float(-ndtri(V.real("rho", rho, low=0.0, high=1.0, low_open=True, high_open=True) / 2.0))


def _eps1bar(f1, f2, xx, mubar, gbar, sigma):
    a = f2 * mubar
    if np.any(a >= 1.0):
        raise ValueError("f'' * mubar >= 1: the report is undefined for this individual (raise lambda)")
    return -np.log1p(-a) + f1 * f1 * xx / (2 * sigma * sigma) + gbar / (sigma * sigma)


def report_data_independent(theta_p, z_x, z_y, *, sigma: float, lam: float, rho: float,
                            loss: str) -> np.ndarray:
    """DATA-INDEP report eps1bar(z) (zero privacy cost): >= ex-post pDP w.p. >= 1 - rho per (D, z)."""
    s_ = V.positive("sigma", sigma)
    lam = V.positive("lam", lam)
    q = _quantile(rho)
    zx = np.atleast_2d(np.asarray(z_x, dtype=float))
    zy = np.atleast_1d(np.asarray(z_y, dtype=float))
    f1, f2 = glm_derivatives(zx @ np.asarray(theta_p, dtype=float), zy, loss)
    xx = np.einsum("ij,ij->i", zx, zx)
    gbar = s_ * np.abs(f1) * np.sqrt(xx) * q
    out = _eps1bar(f1, f2, xx, xx / lam, gbar, s_)
    return out if out.size > 1 else out.reshape(np.shape(z_y))


def goe_quantile_bound(d: int, p: float) -> float:
    """Conservative (1 - p)-quantile of lambda_1(GOE(d)): 2 sqrt(d) + 2 sqrt(log(1/p))
    (docs/derivations/per-instance.md §3).

    lambda_1 is sqrt(2)-Lipschitz in the Gaussian entries and E lambda_1 <= 2 sqrt(d) (upper bound).
    """
    d = V.integer("d", d, low=1)
    p = V.real("p", p, low=0.0, high=1.0, low_open=True, high_open=True)
    return 2.0 * math.sqrt(d) + 2.0 * math.sqrt(math.log(1.0 / p))


def sample_goe(d: int, rng: np.random.Generator) -> np.ndarray:
    """W = (G + G^T)/sqrt(2): off-diagonal N(0, 1), diagonal N(0, 2)."""
    g = rng.standard_normal((d, d))
    return (g + g.T) / math.sqrt(2.0)


def report_mechanisms(sigma_2: float, sigma_3: float, *, xi: float = 1.0,
                      smoothness: float = 0.25) -> list[Gaussian]:
    """The DATA-DEP report's releases as ledger entries.

    ``[Gaussian(sigma_2, xi), Gaussian(sigma_3, beta/sqrt(2))]`` (gradient release, GOE Hessian release).
    """
    return [Gaussian(sigma=sigma_2, sensitivity=V.positive("xi", xi)),
            Gaussian(sigma=sigma_3, sensitivity=V.positive("smoothness", smoothness) / math.sqrt(2.0))]


def calibrate_report_noise(eps2: float, eps3: float, delta: float, *, xi: float = 1.0,
                           smoothness: float = 0.25) -> tuple[float, float]:
    """(sigma_2, sigma_3) making the gradient release (eps2, delta)-DP and the GOE release (eps3, delta)-DP.

    Analytic Gaussian calibration (Balle & Wang 2018; e.g. sigma_2 = 5.8863 at eps2 = 0.7, sigma_3 = 6.4178 at
    eps3 = 0.1, beta = 1/4, delta = 1e-6).
    """
    s2 = V.positive("xi", xi) / calibrate_gaussian_mu(eps2, delta)
    s3 = V.positive("smoothness", smoothness) / math.sqrt(2.0) / calibrate_gaussian_mu(eps3, delta)
    return s2, s3


@dataclass(frozen=True, eq=False)
class DataDependentReport:
    """The published DATA-DEP report (Alg 2): public releases plus the function eps~(z).

    Attributes
    ----------
    theta_p, g_p, h_p : arrays
        theta^P, the noisy gradient g^P and the GOE-noised Hessian H^P (all public).
    sigma, sigma_2, sigma_3, lam, rho : float
    loss : str
    """

    theta_p: np.ndarray
    g_p: np.ndarray
    h_p: np.ndarray
    sigma: float
    sigma_2: float
    sigma_3: float
    lam: float
    rho: float
    loss: str

    def epsilon1_bar(self, z_x, z_y) -> np.ndarray:
        """eps1bar(z) >= ex-post pDP of theta^P w.p. >= 1 - 3 rho for each fixed (D, z)."""
        q = _quantile(self.rho)
        zx = np.atleast_2d(np.asarray(z_x, dtype=float))
        zy = np.atleast_1d(np.asarray(z_y, dtype=float))
        f1, f2 = glm_derivatives(zx @ self.theta_p, zy, self.loss)
        xx = np.einsum("ij,ij->i", zx, zx)
        nx = np.sqrt(xx)
        gbar = np.minimum(np.abs(f1 * (zx @ self.g_p)) + self.sigma_2 * np.abs(f1) * nx * q,
                          self.sigma * np.abs(f1) * nx * q)
        mubar = xx / self.lam
        eig = np.linalg.eigvalsh(0.5 * (self.h_p + self.h_p.T))
        if eig[0] > 0:
            lev = np.einsum("ij,ij->i", zx, np.linalg.solve(self.h_p, zx.T).T)
            mubar = np.minimum(1.5 * lev, mubar)
        out = _eps1bar(f1, f2, xx, mubar, gbar, self.sigma)
        return out if out.size > 1 else out.reshape(np.shape(z_y))

    def individual_costs(self, z_x, z_y, delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(eps2(z), eps3(z), joint eps23(z)) at ``delta``: zCDP rho -> rho + 2 sqrt(rho log(1/delta))."""
        d = V.delta(delta)
        zx = np.atleast_2d(np.asarray(z_x, dtype=float))
        zy = np.atleast_1d(np.asarray(z_y, dtype=float))
        f1, f2 = glm_derivatives(zx @ self.theta_p, zy, self.loss)
        xx = np.einsum("ij,ij->i", zx, zx)
        r2 = f1 * f1 * xx / (2 * self.sigma_2**2)
        r3 = f2 * f2 * xx * xx / (4 * self.sigma_3**2)
        ld = math.log(1.0 / d)

        def conv(r):
            out = r + 2.0 * np.sqrt(r * ld)
            return out if out.size > 1 else out.reshape(np.shape(z_y))

        return conv(r2), conv(r3), conv(r2 + r3)


def release_data_dependent_report(X, y, theta_p, *, sigma: float, sigma_2: float, sigma_3: float,
                                  lam: float, rho: float, loss: str,
                                  rng: np.random.Generator) -> DataDependentReport:
    """Release g^P and H^P at theta^P (Alg 2) and return the publishable report.

    Requires lam >= 2 sigma_3 tau with tau = :func:`goe_quantile_bound` (d, rho/2) (raises otherwise).
    Charge :func:`report_mechanisms` (sigma_2, sigma_3) to the ledger.
    """
    s_ = V.positive("sigma", sigma)
    s2 = V.positive("sigma_2", sigma_2)
    s3 = V.positive("sigma_3", sigma_3)
    lam = V.positive("lam", lam)
    r = V.real("rho", rho, low=0.0, high=1.0, low_open=True, high_open=True)
    th = np.asarray(theta_p, dtype=float)
    d = th.shape[0]
    need = 2.0 * s3 * goe_quantile_bound(d, r / 2.0)
    if lam < need:
        raise ValueError(f"lambda = {lam} < 2 sigma_3 tau_GOE(1 - rho/2) = {need:.6g}: the 3/2 leverage "
                         "approximation is not guaranteed")
    g, h = objective_gradient_hessian(th, X, y, lam, loss)
    g_p = g + rng.normal(0.0, s2, d)
    h_p = h + s3 * sample_goe(d, rng)
    return DataDependentReport(theta_p=th, g_p=g_p, h_p=h_p, sigma=s_, sigma_2=s2, sigma_3=s3, lam=lam,
                               rho=r, loss=loss)
