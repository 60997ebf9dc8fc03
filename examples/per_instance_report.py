"""Per-instance privacy reports for objective perturbation (Redberg & Wang 2021).

Run:  python examples/per_instance_report.py   (about 1 s)

Logistic regression by objective perturbation (Kifer et al.; (eps_1, delta)-DP).  Afterwards every
individual can evaluate a *published* report function on her own data point to learn a high-probability
upper bound of her ex-post per-instance privacy loss: the data-independent report is free; the
data-dependent report costs a noisy gradient and a GOE-noised Hessian (charged to the ledger).
"""

import numpy as np

from accountant import PrivacyAccountant
from accountant.adaptive.per_instance import (
    calibrate_report_noise,
    expost_log_ratio,
    objpert_mechanism,
    objpert_sigma,
    objpert_solve,
    release_data_dependent_report,
    report_data_independent,
    report_mechanisms,
)


def main() -> None:
    rng = np.random.default_rng(1)
    n, d, delta, rho = 3000, 3, 1e-6, 1e-3
    X = rng.normal(size=(n, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-X @ np.array([2.0, -1.0, 0.5]))), 1.0, -1.0)

    eps1 = 0.5
    sigma = objpert_sigma(eps1, delta)
    s2, s3 = calibrate_report_noise(0.3, 0.2, delta)
    lam = 200.0  # >= 2 sigma_3 tau_GOE and >= 2 beta / eps_1
    theta = objpert_solve(X, y, rng.normal(0, sigma, d), lam=lam, loss="logistic")
    report = release_data_dependent_report(X, y, theta, sigma=sigma, sigma_2=s2, sigma_3=s3, lam=lam, rho=rho,
                                           loss="logistic", rng=rng)
    acct = PrivacyAccountant().compose(objpert_mechanism(sigma, delta, lam=lam))
    for m in report_mechanisms(s2, s3):
        acct.compose(m)
    print(f"objective perturbation sigma={sigma:.3f}, lambda={lam:g}; release + report ledger:")
    print(" ", acct.certificate(delta=3 * delta))

    print("\n  individual   ex-post pDP (secret)   DATA-INDEP report   DATA-DEP report   (eps2+eps3 joint)")
    for i in (0, 1, 2, 3, 4):
        true = abs(float(expost_log_ratio(theta, X, y, X[i], y[i], sigma=sigma, lam=lam, loss="logistic",
                                          adding=False)))
        indep = float(report_data_independent(theta, X[i], y[i], sigma=sigma, lam=lam, rho=rho,
                                              loss="logistic"))
        dep = float(report.epsilon1_bar(X[i], y[i]))
        joint = float(report.individual_costs(X[i], y[i], delta)[2])
        print(f"  {i:10d}   {true:20.5f}   {indep:17.5f}   {dep:15.5f}   {joint:10.5f}")


if __name__ == "__main__":
    main()
