"""Timing and tightness of the discretised-PLD route on the near-atomic rows of spec 08 section 1.

``python -m benchmarks.bench_pld`` prints, per row and direction, the certified eps bracket at
delta = 1e-5 (Poisson-subsampled Gaussian, add/remove), its width and the warm median of 5 query times.
The reference eps (remove dominates) is spec 08's table value (6 digits).
"""

from __future__ import annotations

import statistics
import time

from conversions.pld import pld_epsilon_bounds
from mechanisms.subsampled import SubsampledGaussian

ROWS = [(0.01, 1.1, 1, 0.142291), (0.01, 1.1, 10, 0.271736), (0.001, 1.0, 100, 0.055165),
        (0.001, 0.5, 100, 2.108645)]


def run(delta: float = 1e-5, repeats: int = 5) -> list[dict]:
    out = []
    for q, sigma, steps, ref in ROWS:
        ents = [(SubsampledGaussian(sigma, q), steps)]
        for direction in ("remove", "add"):
            pld_epsilon_bounds(ents, delta, direction)  # warm-up (numba caches, allocations)
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                b = pld_epsilon_bounds(ents, delta, direction)
                times.append(time.perf_counter() - t0)
            out.append({"q": q, "sigma": sigma, "T": steps, "direction": direction, "ref": ref,
                        "lower": b.lower, "upper": b.upper, "ms": 1e3 * statistics.median(times),
                        "N": b.details["fft_points"], "capped": b.details["capped"]})
    return out


def main() -> None:
    for r in run():
        w = r["upper"] - r["lower"]
        print(f"q={r['q']:<6} sigma={r['sigma']:<4} T={r['T']:<4} {r['direction']:<6} "
              f"[{r['lower']:.6f}, {r['upper']:.6f}] width={w:.2e} ({w / r['upper']:.1e} rel) "
              f"ref={r['ref']} {r['ms']:.0f} ms N={r['N']} capped={r['capped']}")


if __name__ == "__main__":
    main()
