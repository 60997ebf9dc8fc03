"""Cost of per-epoch reports: the shared contour (``acct.report``) against standalone queries per point.

Run: ``python -m benchmarks.bench_report [--quick]``.  CPU time (``time.process_time``: the machine may
be shared), measured warm (every report is run once before it is timed).  Per case it prints, per
point: the report with the shared contour, the same report answered by standalone queries
(``shared=False``, what a loop of fresh accountants costs), the later half of the run alone (steady
state, after the near-atomic first epochs), one standalone query of the whole run, and the largest
distance of a shared point's upper bound from the standalone one in units of the standalone
bracket's width (at least 1e-9 relative).
"""

from __future__ import annotations

import sys
import time

from accountant import PrivacyAccountant
from mechanisms import Gaussian, Laplace


def _cases(quick: bool):
    yield "DP-SGD q=0.01 sigma=1.1 T=6000 every=100", \
        lambda: PrivacyAccountant().step(sigma=1.1, sample_rate=0.01, steps=6000), 100
    yield "DP-SGD q=0.05 sigma=0.8 T=2000 every=20", \
        lambda: PrivacyAccountant().step(sigma=0.8, sample_rate=0.05, steps=2000), 20
    if not quick:
        yield "DP-SGD q=0.001 sigma=1 T=1e5 every=1000", \
            lambda: PrivacyAccountant().step(sigma=1.0, sample_rate=0.001, steps=100_000), 1000
        yield "two phases q=0.01 sigma 1.1 -> 0.9 T=3000+3000 every=100", \
            lambda: (PrivacyAccountant().step(sigma=1.1, sample_rate=0.01, steps=3000)
                     .step(sigma=0.9, sample_rate=0.01, steps=3000)), 100

        def mixed():
            acct = PrivacyAccountant()
            for _ in range(50):
                acct.compose(Gaussian(3.0)).compose(Laplace(20.0))
            return acct

        yield "Gaussian(3) + Laplace(20) alternating, 100 uses, every=2", mixed, 2


def _fresh(acct: PrivacyAccountant) -> PrivacyAccountant:
    """A new accountant with the same ledger (no per-ledger caches: a standalone query)."""
    out = PrivacyAccountant(acct.relation, acct.rtol)
    for m, k in acct.ledger.items():
        out.compose(m, k)
    return out


def _cpu(fn) -> tuple[float, object]:
    fn()  # warm (numba kernels, scipy)
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def main(argv: list[str] | None = None) -> None:
    quick = "--quick" in (sys.argv[1:] if argv is None else argv)
    delta = 1e-5
    print(f"per-point CPU ms at delta={delta:g} (warm; process_time)")
    print(f"{'case':58s} {'pts':>4s} {'shared':>8s} {'standalone':>10s} {'ratio':>6s} "
          f"{'2nd half shared':>16s} {'2nd half standalone':>20s} {'ratio':>6s} {'1 query':>8s} "
          f"{'max dev':>8s}")
    for label, make, every in _cases(quick):
        acct = make()
        n_all = len(acct.report(delta, every=every).steps)
        t_sh, rep = _cpu(lambda a=acct, e=every: a.report(delta, every=e))
        t_sa, ref = _cpu(lambda a=acct, e=every: a.report(delta, every=e, shared=False))
        total = acct.ledger.total_count
        half = [t for t in rep.steps if t > total // 2]
        h_sh, _ = _cpu(lambda a=acct, s=half: a.report(delta, steps=s))
        h_sa, _ = _cpu(lambda a=acct, s=half: a.report(delta, steps=s, shared=False))
        one, _ = _cpu(lambda a=acct: _fresh(a).certificate(delta=delta))
        dev = 0.0
        for e, lo, e0, lo0 in zip(rep.epsilon, rep.lower, ref.epsilon, ref.lower, strict=True):
            width = max(e0 - (lo0 if lo0 is not None else e0), 1e-9 * e0)
            dev = max(dev, abs(e - e0) / width)
            assert lo is None or lo0 is None or (lo <= e0 and lo0 <= e), "brackets must overlap"
        print(f"{label:58s} {n_all:4d} {1e3 * t_sh / n_all:8.2f} {1e3 * t_sa / n_all:10.2f} "
              f"{t_sa / t_sh:6.1f} {1e3 * h_sh / len(half):16.2f} {1e3 * h_sa / len(half):20.2f} "
              f"{h_sa / h_sh:6.1f} {1e3 * one:8.2f} {dev:8.2f}", flush=True)
        for note in rep.notes:
            print(f"    note: {note}")


if __name__ == "__main__":
    main()
