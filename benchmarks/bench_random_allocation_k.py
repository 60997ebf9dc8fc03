"""Random k-out-of-t allocation: certified epsilon bracket vs sigma and k, next to Poisson sampling.

``python -m benchmarks.bench_random_allocation_k``

Mean batch size b = 256 of n = 60000 records, 10 epochs, delta = 1e-5, clipping norm 1.  Each record is
used in k uniformly random steps of every epoch (t = ceil(k n / b) steps per epoch); the Poisson column is
Poisson sampling with the same mean participation (q = k / t, 10 t steps).  The balls-in-bins bracket is
[certified lower bound, certified upper bound] (:class:`mechanisms.RandomAllocationGaussian`, the
Feldman & Shenfeld reduction; k = 1 is :class:`mechanisms.BallsInBinsGaussian`).  Prints a table and the
seconds per certificate.
"""

from __future__ import annotations

import time

from accountant import PrivacyAccountant

N, B, EPOCHS, DELTA = 60000, 256, 10, 1e-5


def row(sigma: float, k: int) -> tuple[float, float, float, float]:
    t = -(-k * N // B)
    a = PrivacyAccountant()
    a.step(sigma=sigma, batch_size=B, dataset_size=N, sampling="balls_in_bins", steps=EPOCHS * t,
           steps_per_record=k)
    t0 = time.perf_counter()
    c = a.certificate(delta=DELTA)
    sec = time.perf_counter() - t0
    p = PrivacyAccountant()
    p.step(sigma=sigma, sample_rate=k / t, steps=EPOCHS * t)
    return c.lower_bound, c.epsilon, p.certificate(delta=DELTA).epsilon, sec


def main() -> None:
    print("| sigma | k | t | balls-in-bins [lower, upper] | Poisson q = k/t | seconds |")
    print("|---|---|---|---|---|---|")
    for sigma in (0.8, 1.0, 1.7, 3.0):
        for k in (1, 2, 4):
            lo, up, po, sec = row(sigma, k)
            print(f"| {sigma} | {k} | {-(-k * N // B)} | [{lo:.3g}, {up:.4g}] | {po:.4g} | {sec:.1f} |",
                  flush=True)


if __name__ == "__main__":
    main()
