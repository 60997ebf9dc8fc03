"""Speed of the data-adaptive plug-ins (issue 4): RDP curves and individual-filter updates.

Targets (issue 4): an RDP curve on a 100-order grid in <= 1 ms per mechanism after warm-up; a filter
update for 10^6 records in <= 50 ms.  Timings are measured in this run (best of ``repeat``) and
printed as a table; nothing is asserted.

    python -m benchmarks.bench_adaptive
"""

from __future__ import annotations

import numpy as np

from accountant.individual_filter import IndividualRenyiFilter, IndKNNFilter, budget_for_epsilon
from mechanisms.gnmax import GNMax, SubsampledGNMax
from mechanisms.private_knn import PrivateKNN
from mechanisms.screening import NoisyScreening, SubsampledNoisyScreening
from mechanisms.selection import (
    HardStopSelection,
    KnownThresholdSelection,
    RandomStoppingSelection,
    TruncatedRandomStoppingSelection,
)

from .bench_ptr import _best  # best of ``repeat`` timings after one warm-up call

ORDERS = 1.0 + np.geomspace(1e-2, 999.0, 100)  # 100 orders in (1.01, 1000]


def curve_rows(repeat: int = 20) -> list[tuple[str, float, float]]:
    mechs = [
        NoisyScreening(sigma=85.0, threshold=210.0, k=300),
        SubsampledNoisyScreening(sigma=85.0, threshold=210.0, k=300, sample_rate=0.25),
        NoisyScreening(sigma=5.0, threshold=210.0, k=300),
        SubsampledNoisyScreening(sigma=200.0, threshold=480.0, k=800, sample_rate=0.03),
        GNMax(sigma=20.0),
        SubsampledGNMax(sigma=20.0, sample_rate=0.2),
        PrivateKNN(85.0, 210.0, 300, 20.0, 0.2, 18000, 3877),
        RandomStoppingSelection(0.5, 0.01),
        TruncatedRandomStoppingSelection.from_epsilon0(0.5, 0.01, 0.1),
        HardStopSelection(0.5, 1e-10, 0.01, 1e-6),
        KnownThresholdSelection(0.5, 0.1, 50),
    ]
    rows = []
    for m in mechs:
        t = _best(lambda m=m: m.rdp(ORDERS), repeat)
        rows.append((m.describe()[:78], t * 1e3, 1.0))
    return rows


def filter_rows(n: int = 1_000_000, repeat: int = 5) -> list[tuple[str, float, float]]:
    rng = np.random.default_rng(0)
    rows = []
    c = rng.uniform(0.0, 1e-3, n)
    orders = np.array([2.0, 4.0, 8.0, 16.0, 32.0])
    loss = np.multiply.outer(c, orders)
    kap = rng.random(n)
    b = budget_for_epsilon(1.0, 1e-5)
    for label, ids in (("sorted ids", np.arange(n)), ("random order", rng.permutation(n))):
        lin = IndividualRenyiFilter(n, 1e9)
        t = _best(lambda lin=lin, ids=ids: lin.admit(ids, c), repeat)
        rows.append((f"linear filter admit, {n} records, {label}", t * 1e3, 50.0))
        grid = IndividualRenyiFilter(n, 1e9, orders=orders)
        t = _best(lambda grid=grid, ids=ids: grid.admit(ids, loss), repeat)
        rows.append((f"grid filter admit (5 orders), {n} records, {label}", t * 1e3, 50.0))
        knn = IndKNNFilter(n, b * 1e6, 50.0, 0.5, 0.5)
        t = _best(lambda knn=knn, ids=ids: knn.step(ids, kap, count_noise=0.0), repeat)
        rows.append((f"Ind-KNN step, {n} candidates (half selected), {label}", t * 1e3, 50.0))
    return rows


def main() -> None:
    print(f"RDP curves on a {ORDERS.size}-order grid (best of 20, after warm-up)")
    print(f"{'mechanism':80s} {'ms':>8s} {'target':>8s}")
    for name, ms, target in curve_rows():
        print(f"{name:80s} {ms:8.3f} {target:8.1f}")
    print()
    print("Individual filter updates (best of 5, after warm-up)")
    print(f"{'operation':80s} {'ms':>8s} {'target':>8s}")
    for name, ms, target in filter_rows():
        print(f"{name:80s} {ms:8.3f} {target:8.1f}")


if __name__ == "__main__":
    main()
