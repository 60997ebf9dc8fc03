"""Speed of the generalized-PTR plug-ins (issue 5): GNSS RDP, PATE smooth sensitivity, end-to-end runs.

Timings are measured in this run (best of ``repeat`` after a warm-up) and printed as a table; nothing
is asserted.

    python -m benchmarks.bench_ptr
"""

from __future__ import annotations

import time

import numpy as np

ORDERS = 1.0 + np.geomspace(1e-2, 60.0, 100)


def _best(fn, repeat: int) -> float:
    """Best of ``repeat`` wall-clock timings of ``fn()``, after one warm-up call (numba compilation, OS
    caches)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _votes(queries: int, teachers: int, classes: int, rng) -> np.ndarray:
    v = np.zeros((queries, classes), dtype=np.int64)
    top = rng.integers(int(0.25 * teachers), int(0.95 * teachers), queries)
    v[:, 0] = top
    for i in range(queries):
        v[i, 1:] = rng.multinomial(teachers - top[i], np.ones(classes - 1) / (classes - 1))
    return v


def rows(repeat: int = 5) -> list[tuple[str, float]]:
    from accountant.adaptive.pate_ptr import (
        PATEPTRParameters,
        check_conditions,
        local_sensitivity_profile,
        log_q_tilde,
        pate_ptr,
        rdp_gnmax_data_dependent,
    )
    from accountant.adaptive.per_instance import objpert_solve, report_data_independent
    from accountant.adaptive.ptr_binary import binary_rnm_envelope
    from accountant.adaptive.ptr_regression import OPSPlan, ops_ptr
    from mechanisms import Gaussian, Laplace
    from mechanisms.gnss import GNSS, GNSSUpperBound
    from mechanisms.ptr import GeneralizedPTR, PTRRenyi

    rng = np.random.default_rng(0)
    out: list[tuple[str, float]] = []
    g = GNSS(sigma=15.0, beta=0.001)
    out.append(("GNSS exact RDP, 100 orders", _best(lambda: g.rdp(ORDERS), repeat)))
    ub = GNSSUpperBound(beta=0.004, sigma_s=17.4, sigma_2=17.4, delta_2=5e-6)
    out.append(("GNSS upper-bound release RDP, 100 orders", _best(lambda: ub.rdp(ORDERS), repeat)))
    m = GeneralizedPTR(epsilon=1.0, delta=1e-6, test_epsilon=0.5, test_delta=1e-6, false_positive=1e-6)
    out.append(("GeneralizedPTR RDP, 100 orders", _best(lambda: m.rdp(ORDERS), repeat)))
    r = PTRRenyi(test=Laplace(2.0), budget=Gaussian(3.0, 1.0), worst_case=Gaussian(3.0, 4.0),
                 false_positive=1e-6)
    out.append(("PTRRenyi (corrected Thm B.5) RDP, 100 orders", _best(lambda: r.rdp(ORDERS), repeat)))
    v = _votes(100, 400, 10, rng)
    p = PATEPTRParameters.from_budget(1.0, 1e-5)
    lq = log_q_tilde(v, 40.0)
    out.append(("Thm 6 data-dependent RDP, 100 queries",
                _best(lambda: rdp_gnmax_data_dependent(lq, 40.0, p.alpha), repeat)))
    out.append(("C5/C6 condition check (K=400, C=10)", _best(lambda: check_conditions(40.0, 10, p.alpha, 400),
                                                             repeat)))
    out.append(("LS profile, T=100 queries, K=400, C=10",
                _best(lambda: local_sensitivity_profile(v, 40.0, p.alpha, 400), repeat)))
    out.append(("PATE-PTR end to end (T=100, K=400, C=10)",
                _best(lambda: pate_ptr(v, sigma_1=40.0, test_epsilon=1.0, budget_epsilon=3.0, delta=1e-5,
                                       rng=np.random.default_rng(1)), repeat)))
    n, d = 20000, 10
    X = rng.normal(size=(n, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    y = np.clip(X @ rng.normal(size=d) / 4, -1, 1)
    plan = OPSPlan(lam=50.0, epsilon=1.0, delta=1e-6, test_epsilon=0.5, test_delta=1e-6, false_positive=1e-6)
    out.append((f"OPS-PTR end to end (n={n}, d={d})",
                _best(lambda: ops_ptr(X, y, plan, np.random.default_rng(2)), repeat)))
    out.append(("binary RNM envelope, 10^4 gaps",
                _best(lambda: binary_rnm_envelope(np.arange(10_000), 1.0, 1e-6), repeat)))
    Xl = X[:2000]
    yl = np.where(Xl[:, 0] > 0, 1.0, -1.0)
    out.append(("objective perturbation solve (n=2000, d=10)",
                _best(lambda: objpert_solve(Xl, yl, rng.normal(0, 5, d), lam=5.0, loss="logistic"), repeat)))
    th = objpert_solve(Xl, yl, rng.normal(0, 5, d), lam=5.0, loss="logistic")
    out.append(("DATA-INDEP report for 10^5 individuals",
                _best(lambda: report_data_independent(th, np.tile(Xl, (50, 1)), np.tile(yl, 50), sigma=5.0,
                                                      lam=5.0, rho=1e-3, loss="logistic"), repeat)))
    return out


def main() -> None:
    print(f"{'benchmark':50s} {'time (best)':>14s}")
    for name, t in rows():
        unit = f"{t * 1e3:10.3f} ms"
        print(f"{name:50s} {unit:>14s}")


if __name__ == "__main__":
    main()
