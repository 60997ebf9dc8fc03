"""Speed of the sparse-vector plug-ins: RDP curve on a 100-order grid after warm-up (target <= 1 ms).

Run: ``python -m benchmarks.bench_svt``.  Prints, per mechanism, the construction time (which includes
the Q+ moment table) and the median / best time of one ``rdp`` call on 100 orders, measured in this run.
"""

from __future__ import annotations

import time

import numpy as np

from mechanisms.svt import GaussianSVT, GeneralizedSVT, LaplaceSVT, StageWiseSVT

ORDERS = np.concatenate([1.0 + np.geomspace(1e-3, 1.0, 20), np.geomspace(2.05, 1e4, 80)])


def _cases():
    return [
        ("laplace_svt c=1", lambda: LaplaceSVT(0.1, 0.2)),
        ("laplace_svt c=5 resample cap=1e3",
         lambda: LaplaceSVT(0.1, 0.2, cutoff=5, resample=True, max_length=1000)),
        ("laplace_svt c=10 no resample cap", lambda: LaplaceSVT(0.1, 0.2, cutoff=10, max_length=10_000)),
        ("gaussian_svt c=1 cap=1e5 (7.1)", lambda: GaussianSVT(210, 420, max_length=100_000)),
        ("gaussian_svt c=10 cap (Thm 7.2.7)", lambda: GaussianSVT(20, 40, cutoff=10, max_length=1000)),
        ("gaussian_svt Q+ unbounded (7.2)", lambda: GaussianSVT(210, 420, nonnegative=True, threshold=1000)),
        ("gaussian_svt Q+ c=100 resample",
         lambda: GaussianSVT(1, 2, cutoff=100, resample=True, nonnegative=True, threshold=3.0)),
        ("generalized hybrid (7.3)", lambda: GeneralizedSVT("gaussian", 5.0, "laplace", 10.0)),
        ("stagewise_svt c=100 c'=10", lambda: StageWiseSVT("gaussian", 210, "gaussian", 420, 100, 10, 1e-9,
                                                           resample=True, nonnegative=True, threshold=1000)),
    ]


def _time_call(fn, reps: int = 200) -> tuple[float, float]:
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts)), float(np.min(ts))


def main() -> None:
    # warm-up: load/compile every numba kernel once
    for _, make in _cases():
        make().rdp(ORDERS)
    print(f"SVT RDP curve on {ORDERS.size} orders (target <= 1 ms per call after warm-up)")
    print(f"{'mechanism':40s} {'construct ms':>13s} {'rdp median ms':>14s} {'rdp best ms':>12s}")
    for label, make in _cases():
        t0 = time.perf_counter()
        m = make()
        build = time.perf_counter() - t0
        m.rdp(ORDERS)
        med, best = _time_call(lambda m=m: m.rdp(ORDERS))
        print(f"{label:40s} {build * 1e3:13.3f} {med * 1e3:14.4f} {best * 1e3:12.4f}")


if __name__ == "__main__":
    main()
