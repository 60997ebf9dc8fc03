"""Regime map of the discretised-PLD route over DP-SGD settings (Poisson-subsampled Gaussian).

``python -m benchmarks.bench_pld`` prints, per setting and direction, the certified eps bracket at the
given delta, its absolute and relative width, the warm median query time, the FFT length, whether the
grid was capped, the rounding used ("up": round-up cells, width T Delta; "mean": mean-preserving
rounding, width ~ Delta sqrt(T log 1/beta)) and, where the contour route is cheap (it plans under its
work cap), the contour route's bracket for comparison.  ``--quick`` runs the spec-08 rows only.
The "ok" column: width <= 1e-3 relative (or 1e-4 absolute when eps < 0.1) and <= 100 ms.
"""

from __future__ import annotations

import math
import statistics
import sys
import time

from conversions import contour
from conversions.pld import pld_epsilon_bounds
from mechanisms.subsampled import SubsampledGaussian

# near-atomic DP-SGD rows (q, sigma, T, delta) with reference epsilons (remove dominates)
SPEC_ROWS = [(0.01, 1.1, 1, 1e-5), (0.01, 1.1, 10, 1e-5), (0.01, 1.1, 1000, 1e-5), (0.001, 1.0, 100, 1e-5),
             (0.001, 0.5, 100, 1e-5)]
REFS = {(0.01, 1.1, 1, 1e-5): 0.142291, (0.01, 1.1, 10, 1e-5): 0.271736, (0.01, 1.1, 1000, 1e-5): 1.515362,
        (0.001, 1.0, 100, 1e-5): 0.055165, (0.001, 0.5, 100, 1e-5): 2.108645}

GRID = SPEC_ROWS + [
    (1.0, 1.0, 1, 1e-5), (1.0, 5.0, 1000, 1e-5), (0.1, 1.0, 10, 1e-5), (0.1, 2.0, 100, 1e-5),
    (0.1, 5.0, 1000, 1e-6), (0.01, 0.8, 100, 1e-5), (0.01, 1.0, 1000, 1e-5), (0.01, 2.0, 10000, 1e-5),
    (0.01, 0.5, 10, 1e-8), (0.001, 0.8, 1000, 1e-5), (0.001, 1.0, 10000, 1e-5), (0.001, 0.6, 1000, 1e-5),
    (0.001, 2.0, 100000, 1e-5), (0.001, 0.3, 100, 1e-5), (0.001, 20.0, 10**6, 1e-5),
    (1e-4, 0.5, 1000, 1e-5), (1e-4, 0.8, 10000, 1e-5), (1e-4, 1.0, 10**5, 1e-5), (1e-4, 0.4, 10**4, 1e-6),
    (1e-5, 0.4, 10**6, 1e-5), (1e-5, 0.6, 10**5, 1e-5), (1e-5, 1.0, 10**6, 1e-5), (1e-6, 0.3, 10**6, 1e-5),
    (1e-6, 0.5, 10**7, 1e-5), (0.01, 1.1, 100, 1e-12), (0.001, 1.0, 1000, 1e-2), (0.05, 3.0, 5000, 1e-5),
    (0.001, 2.0, 10**6, 1e-10),
]


def _contour(q, sigma, steps, delta, direction):
    try:
        pld = contour.ComposedPLD([(SubsampledGaussian(sigma, q), steps)], direction)
        t0 = time.perf_counter()
        b = contour.epsilon_bounds(pld, delta, 1e-3, skip_if_capped=True)
        return b.lower, b.upper, 1e3 * (time.perf_counter() - t0)
    except contour.WouldBeCapped:
        return None
    except Exception:  # noqa: BLE001 - a benchmark row never stops the table
        return None


def run(rows=GRID, repeats: int = 3, with_contour: bool = True) -> list[dict]:
    out = []
    for q, sigma, steps, delta in rows:
        ents = [(SubsampledGaussian(sigma, q), steps)]
        for direction in ("remove", "add"):
            try:
                pld_epsilon_bounds(ents, delta, direction)  # warm-up (numba caches, allocations)
                times = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    b = pld_epsilon_bounds(ents, delta, direction)
                    times.append(time.perf_counter() - t0)
            except Exception as exc:  # noqa: BLE001
                out.append({"q": q, "sigma": sigma, "T": steps, "delta": delta, "direction": direction,
                            "error": repr(exc)})
                continue
            row = {"q": q, "sigma": sigma, "T": steps, "delta": delta, "direction": direction,
                   "lower": b.lower, "upper": b.upper, "ms": 1e3 * statistics.median(times),
                   "N": b.details.get("fft_points"), "capped": b.details.get("capped"),
                   "rounding": b.details.get("rounding"), "ref": REFS.get((q, sigma, steps, delta))}
            if with_contour:
                row["contour"] = _contour(q, sigma, steps, delta, direction)
            out.append(row)
    return out


def _ok(r) -> bool:
    w = r["upper"] - r["lower"]
    if not math.isfinite(w):
        return False
    tight = w <= 1e-3 * r["upper"] or (r["upper"] < 0.1 and w <= 1e-4)
    return tight and r["ms"] <= 100.0


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    rows = SPEC_ROWS if "--quick" in argv else GRID
    print(f"{'q':>7} {'sigma':>5} {'T':>8} {'delta':>6} {'dir':<6} {'bracket':<25} {'width':>8} "
          f"{'rel':>7} {'ms':>6} {'N':>8} cap rnd  ok  contour / ref")
    for r in run(rows, with_contour="--no-contour" not in argv):
        head = f"{r['q']:>7g} {r['sigma']:>5g} {r['T']:>8g} {r['delta']:>6.0e} {r['direction']:<6}"
        if "error" in r:
            print(head, "ERROR", r["error"])
            continue
        w = r["upper"] - r["lower"]
        rel = w / r["upper"] if r["upper"] > 0 else math.nan
        extra = ""
        if r.get("contour"):
            lo, up, ms = r["contour"]
            extra = f"cf [{lo:.6f}, {up:.6f}] {ms:.0f} ms"
            if max(lo, r["lower"]) > min(up, r["upper"]):
                extra += " DISAGREE"  # two certified brackets must overlap
        if r.get("ref"):
            extra += f" ref {r['ref']}"
        print(f"{head} [{r['lower']:.6f}, {r['upper']:.6f}] {w:8.1e} {rel:7.1e} {r['ms']:6.0f} "
              f"{r['N']:>8} {'Y' if r['capped'] else 'n'}   {r['rounding']:<4} {'ok' if _ok(r) else '--'}  "
              f"{extra}", flush=True)


if __name__ == "__main__":
    main()
