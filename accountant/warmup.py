"""``dpcert warmup`` (or ``python -m accountant.warmup``): compile the numba kernels once, after an install.

The numerical kernels are compiled on first use and cached on disk (``@njit(cache=True)``), so the first
query in a fresh install pays the compilation (a few seconds for a DP-SGD query).  This command runs one
small query per route family -- the characteristic-function route on a DP-SGD ledger (the README's main
command), the RDP route, the discretised PLD (one step, and few steps at a small sample rate), the
contour's near-atomic split (many steps at a small rate), the contour with exact atoms and closed-form pieces
(Laplace), and a purely atomic ledger (randomized response) -- so that later processes only load the
cached machine code.  The package build runs the same queries (``setup.py``), so an install built on this
machine already carries the cache; numba keys it on the source, Python and numba versions and the CPU,
and ignores (and rebuilds) a cache made for another.

Where the cache goes is numba's choice: ``__pycache__`` beside the installed sources when that directory
is writable, otherwise a per-user cache directory (e.g. ``~/.cache/numba``), or ``NUMBA_CACHE_DIR`` when
set.  A read-only install therefore still caches, per user.
"""

from __future__ import annotations

import argparse
import sys
import time


def _queries():
    """(label, thunk) pairs: one small certified query per route family."""
    from mechanisms import Laplace, RandomizedResponse, SubsampledGaussian

    from .privacy_accountant import PrivacyAccountant

    def acct(mech, times):
        return PrivacyAccountant().compose(mech, times)

    dpsgd = acct(SubsampledGaussian(sigma=1.1, sample_rate=0.01), 10_000)
    one_step = acct(SubsampledGaussian(sigma=0.8, sample_rate=1e-3), 1)
    few_steps = acct(SubsampledGaussian(sigma=0.8, sample_rate=1e-3), 100)
    small_rate = acct(SubsampledGaussian(sigma=1.0, sample_rate=1e-4), 1000)
    return [
        ("DP-SGD, characteristic-function route", lambda: dpsgd.certificate(delta=1e-5)),
        ("DP-SGD, RDP route", lambda: dpsgd.certificate(delta=1e-5, method="rdp")),
        ("one subsampled step, discretised PLD", lambda: one_step.certificate(delta=1e-5, method="pld")),
        ("few steps at a small rate, discretised PLD (connect-the-dots cells)",
         lambda: few_steps.certificate(delta=1e-5, method="pld")),
        ("many steps at a small rate, the contour's near-atomic split",
         lambda: small_rate.certificate(delta=1e-5, method="cf")),
        ("Laplace, contour with exact atoms", lambda: acct(Laplace(scale=1.0), 10).certificate(delta=1e-5)),
        ("randomized response, exact atoms",
         lambda: acct(RandomizedResponse(epsilon=0.5), 100).certificate(delta=1e-6)),
    ]


def cache_location() -> str:
    """Where numba caches the kernels of this install (numba's locator for one of them)."""
    from mechanisms._poisson_kernels import sg_log_mgf

    path = getattr(getattr(sg_log_mgf, "_cache", None), "_cache_path", None)
    return str(path) if path else "numba's default cache location"


def warm_up(verbose: bool = True) -> list[tuple[str, float]]:
    """Run the queries of :func:`_queries`; returns (label, seconds) per query."""
    out = []
    for label, fn in _queries():
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        out.append((label, dt))
        if verbose:
            print(f"{label}: {dt:.1f} s", flush=True)
    return out


def run(quiet: bool = False) -> int:
    """Warm up (printing one line per query unless ``quiet``) and name the cache; returns 0."""
    t = time.perf_counter()
    warm_up(verbose=not quiet)
    if not quiet:
        print(f"kernels compiled (or loaded) in {time.perf_counter() - t:.1f} s; "
              f"numba cache: {cache_location()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m accountant.warmup [-q]`` (the same as ``dpcert warmup``, registered by
    :mod:`accountant.cli_warmup`)."""
    p = argparse.ArgumentParser(prog="python -m accountant.warmup", description=__doc__.split("\n\n")[1])
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    return run(p.parse_args(argv).quiet)


if __name__ == "__main__":  # pragma: no cover - python -m accountant.warmup
    sys.exit(main())
