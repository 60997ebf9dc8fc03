"""Private ridge regression by one posterior sample (OPS) with generalized PTR, plus selection over lambda.

Run:  python examples/private_regression.py   (a few seconds)

Data: n = 20000 points in the unit ball of R^5, labels in [-1, 1].  For a proposed lambda the test
privately releases a lower bound of lambda_min(X^T X) and an upper bound of log(B_Y + B_X ||theta_lambda||),
calibrates the inverse noise scale gamma* so that the data-dependent epsilon bound is <= eps, and samples
theta ~ N(theta_lambda, (gamma* (X^T X + lambda I))^{-1}).
Certificate: (eps + eps_hat, delta_hat + max(delta, delta')).  Then Alg 3 picks lambda from a grid by
random stopping with a public validation set.
"""

import numpy as np

from accountant import PrivacyAccountant
from accountant.adaptive.ptr_regression import OPSPlan, ops_ptr
from accountant.adaptive.ptr_selection import ptr_select, selection_budget

THETA = np.array([0.4, -0.3, 0.2, 0.1, -0.25])


def make_data(n, rng, theta=THETA):
    X = rng.normal(size=(n, theta.size))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = np.clip(X @ theta + 0.05 * rng.normal(size=n), -1.0, 1.0)
    return X, y


def main() -> None:
    rng = np.random.default_rng(7)
    X, y = make_data(20000, rng)
    Xv, yv = make_data(2000, rng)
    ridge = np.linalg.solve(X.T @ X + np.eye(5), X.T @ y)
    print(f"non-private ridge validation MSE: {np.mean((Xv @ ridge - yv) ** 2):.5f}")

    plan = OPSPlan(lam=50.0, epsilon=1.0, delta=1e-6, test_epsilon=0.5, test_delta=1e-6, false_positive=1e-6)
    res = ops_ptr(X, y, plan, rng)
    m = res.mechanism
    print(f"\nsingle proposal lambda={plan.lam:g}: passed={res.passed}, gamma*={res.phi:.4g}, "
          f"released loss bound={res.loss_bound:.4f}")
    if res.passed:
        print(f"  validation MSE of the private sample: {np.mean((Xv @ res.output - yv) ** 2):.5f}")
    print(f"  certificate: ({m.total_epsilon:.4f}, {m.total_delta:g})-DP")
    print(" ", PrivacyAccountant().compose(m).certificate(delta=m.total_delta * 1.0001))

    # Alg 3: lambda by random stopping; total budget (2, 1e-5)
    grid = list(np.geomspace(10, 1000, 8))
    gamma_stop, delta_2 = 0.1, 1e-6
    es, ds = selection_budget(2.0, 1e-5, gamma_stop, delta_2)
    kw = {"epsilon": es / 2, "delta": ds / 3, "test_epsilon": es / 2 * (1 - 1e-9), "test_delta": ds / 3,
          "false_positive": ds / 3}
    sel = ptr_select(grid, lambda lam, g: ops_ptr(X, y, OPSPlan(lam=lam, **kw), g),
                     lambda th: -float(np.mean((Xv @ th - yv) ** 2)), epsilon_star=es, delta_star=ds,
                     stop_prob=gamma_stop, delta_2=delta_2, rng=rng)
    print(f"\nselection over {len(grid)} lambdas ({sel.calls} PTR calls, per call ({es:.4f}, {ds:.3g})): "
          f"chose lambda={sel.phi:.4g}, validation MSE {-sel.score:.5f}")
    print(f"  certificate: ({sel.mechanism.pure_epsilon:.4f}, {sel.mechanism.infinite_loss_mass:.3g})-DP "
          f"[{sel.mechanism.describe()}]")


if __name__ == "__main__":
    main()
