"""Mechanism library wave 2: dpcert's certified epsilon(delta) and time side by side with the peers that
implement the same mechanism, and with an exact reference where one exists.

Run: ``python -m benchmarks.bench_mechlib`` (a few minutes; peers are optional).  Writes
``benchmarks/results/mechlib.json`` and ``mechlib.md``.

Every library is timed in this process on a warm call (one untimed call first, so imports and numba
kernels are loaded; then the median of a few fresh queries, each building its accountant from
scratch).  References (independent of dpcert's routes):

* discrete Gaussian (one use): Canonne, Kamath & Steinke 2020 Thm 7 by mpmath enumeration;
* discrete Laplace with sensitivity 1: exact k-fold randomized response (it is the same pair);
* zCDP: the Canonne-Kamath-Steinke 2020 conversion minimised in mpmath;
* tree aggregation, matrix mechanism, GNMax, amplified banded MF with q = 1: the closed-form Gaussian
  profile of the composed mu (mpmath);
* Gaussian mixture, one use: mpmath quadrature of (p - e^eps q)_+ (both directions);
* noisy screening, one use: brute force over every adjacent Bernoulli pair and output set (mpmath);
* Gaussian mixture / Skellam / exponential mechanism compositions: no closed form (dpcert's own
  certified lower bound is shown where it has one).

A peer's value below the reference (or below dpcert's certified lower bound) is flagged: it is not a
valid upper bound.  Ratios are ``peer / dpcert`` (time: > 1 means dpcert is faster).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
import warnings
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results"
DELTA = 1e-6


def _time(fn, reps: int = 3) -> tuple[float, float]:
    fn()  # warm
    ts, val = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        val = fn()
        ts.append(time.perf_counter() - t0)
    return float(val), statistics.median(ts)


# ------------------------------------------------------------------------------------------ references
def _ref_gauss(mu: float) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import reference as ref

    return float(ref.gaussian_epsilon(DELTA, mu))


def _ref_dg(sigma: float) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import reference_mechlib as R

    return float(R.epsilon_from_delta(lambda e: R.dg_delta_single(e, sigma, 1, dps=30), DELTA, hi=60))


def _ref_rr(eps0: float, k: int) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import reference as ref
    import reference_mechlib as R

    return float(R.epsilon_from_delta(lambda e: ref.rr_delta_enumerate(e, eps0, k, as_mpf=True), DELTA,
                                      hi=k * eps0 + 1))


def _ref_zcdp(rho: float) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import reference_mechlib as R

    return float(R.epsilon_from_delta(lambda e: R.zcdp_delta(e, rho), DELTA, hi=200))


def _ref_mixture(sigma: float, sens: list, probs: list) -> float:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import reference_mechlib as R

    means = [c / sigma for c in sens]
    return float(R.epsilon_from_delta(
        lambda e: max(R.mixture_delta(e, probs, means, d, dps=20) for d in ("remove", "add")), DELTA,
        hi=10.0, iters=44))  # 6e-13 absolute: below the certified brackets


def _ref_screening(sigma: float, threshold: float, k: int, t_min: int = 0) -> float:
    import mpmath as mp

    pis = [mp.ncdf((mp.mpf(t) - threshold) / sigma) for t in range(t_min, k + 1)]

    def delta(e):
        ee = mp.e ** e
        best = mp.mpf(0)
        for a, b in zip(pis[:-1], pis[1:], strict=True):
            best = max(best, b - ee * a, (1 - a) - ee * (1 - b))  # S = pass / S = fail, worst order
        return best

    return float(mp.mpf(_ref_bisect(delta)))


def _ref_bisect(delta_fn, hi: float = 50.0, iters: int = 60):
    import mpmath as mp

    lo, hi = mp.mpf(0), mp.mpf(hi)
    if delta_fn(lo) <= DELTA:
        return lo
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if delta_fn(mid) > DELTA else (lo, mid)
    return hi


# ------------------------------------------------------------------------------------------ cases
def _banded_toeplitz(n: int, b: int) -> list:
    """The n x n lower-triangular b-banded Toeplitz matrix with coefficients 2^-j, column-normalised
    (every column of the first n - b + 1 has norm 1; the last b - 1 are shorter)."""
    coef = [0.5**j for j in range(b)]
    norm = math.sqrt(sum(c * c for c in coef))
    return [[coef[i - j] / norm if 0 <= i - j < b else 0.0 for j in range(n)] for i in range(n)]


def cases():
    from mechanisms import (
        ZCDP,
        AmplifiedBandedMF,
        AmplifiedBandedToeplitzMF,
        DiscreteGaussian,
        DiscreteLaplace,
        ExponentialMechanism,
        GaussianMixture,
        GNMax,
        MatrixMechanism,
        NoisyScreening,
        Skellam,
        SubsampledGNMax,
        TreeAggregation,
    )

    band = [[1.0 if 0 <= i - j < 4 else 0.0 for j in range(64)] for i in range(64)]
    bandmf = AmplifiedBandedMF(_banded_toeplitz(512, 8), 1.0, 0.05, 8)
    bandmf_small_q = AmplifiedBandedMF(_banded_toeplitz(512, 8), 0.8, 0.005, 8)
    bandmf_full = AmplifiedBandedMF([[r / 2.0 for r in row] for row in band], 1.5, 1.0, 4)
    toeplitz = AmplifiedBandedToeplitzMF([0.5**j for j in range(16)], 10_000, 1.0, 0.01, 16)
    return [
        # (label, mechanism, count, reference or None, {peer: callable})
        ("discrete_gaussian sigma=1 x1", DiscreteGaussian(1.0), 1, lambda: _ref_dg(1.0),
         {"autodp": lambda: _autodp("DiscreteGaussianMechanism", (1.0,), 1)}),
        ("discrete_gaussian sigma=5 x100", DiscreteGaussian(5.0), 100, None,
         {"autodp": lambda: _autodp("DiscreteGaussianMechanism", (5.0,), 100)}),
        ("discrete_laplace t=2 x20", DiscreteLaplace(2.0), 20, lambda: _ref_rr(0.5, 20),
         {"dp-accounting PLD": lambda: _dpa_pld("DiscreteLaplaceDpEvent", (0.5, 1), 20)}),
        ("discrete_laplace t=1.5 D=3 x5", DiscreteLaplace(1.5, 3), 5, None,
         {"dp-accounting PLD": lambda: _dpa_pld("DiscreteLaplaceDpEvent", (1 / 1.5, 3), 5)}),
        ("skellam mu=10 x1", Skellam(10.0), 1, None, {}),
        ("skellam mu=100 D=2 x4", Skellam(100.0, 2), 4, None, {}),
        ("zcdp rho=0.3 x5", ZCDP(0.3), 5, lambda: _ref_zcdp(1.5),
         {"dp-accounting RDP": lambda: _dpa_rdp("ZCDpEvent", (0.3,), 5),
          "autodp": lambda: _autodp("zCDP_Mechanism", (0.3,), 5)}),
        ("tree_aggregation sigma=3 steps=1000 epochs=4", TreeAggregation(3.0, 1000, 4), 1,
         lambda: _ref_gauss(math.sqrt(4 * 10) / 3.0),
         {"dp-accounting RDP": lambda: _dpa_rdp("SingleEpochTreeAggregationDpEvent", (3.0, 1000), 4,
                                                relation="REPLACE_SPECIAL")}),
        ("matrix_mechanism 4-banded 64x64, b=4 k=16", MatrixMechanism(band, 4.0, {"min_separation": 4,
                                                                                 "max_participations": 16}),
         1, lambda: _ref_gauss(math.sqrt(16 * 4) / 4.0), {}),
        # DP-BandMF with cyclic Poisson sampling: dp-accounting's event is what jax_privacy's
        # amplified_bandmf_event builds (the subsampled Gaussian, noise / max column norm, ceil(n/b) times)
        ("bandmf_cyclic_poisson n=512 b=8 q=0.05 sigma=1 (64 rounds)", bandmf, bandmf.rounds, None,
         {"dp-accounting PLD (jax_privacy event)": lambda: _dpa_pld_sg(1.0 / bandmf.column_norm, 0.05, 64),
          "dp-accounting RDP (jax_privacy event)": lambda: _dpa_rdp_sg(1.0 / bandmf.column_norm, 0.05, 64)}),
        ("bandmf_cyclic_poisson n=512 b=8 q=0.005 sigma=0.8 (64 rounds)", bandmf_small_q, 64, None,
         {"dp-accounting PLD (jax_privacy event)":
          lambda: _dpa_pld_sg(0.8 / bandmf_small_q.column_norm, 0.005, 64)}),
        ("bandmf_cyclic_poisson q=1 n=64 b=4 (16 rounds, = matrix_mechanism)", bandmf_full, 16,
         lambda: _ref_gauss(math.sqrt(16) / 1.5),
         {"dp-accounting PLD (jax_privacy event)":
          lambda: _dpa_pld_sg(1.5 / bandmf_full.column_norm, 1.0, 16)}),
        ("bandmf_toeplitz_cyclic_poisson n=10^4 b=16 q=0.01 sigma=1 (625 rounds)", toeplitz, toeplitz.rounds,
         None, {"dp-accounting PLD (jax_privacy event)":
                lambda: _dpa_pld_sg(1.0 / toeplitz.column_norm, 0.01, 625)}),
        ("exponential_mechanism eps=0.5 x10", ExponentialMechanism(0.5), 10, None,
         {"autodp": lambda: _autodp("ExponentialMechanism", (0.5,), 10)}),
        ("exponential_mechanism eps=0.1 x100", ExponentialMechanism(0.1), 100, None,
         {"autodp": lambda: _autodp("ExponentialMechanism", (0.1,), 100)}),
        ("gaussian_mixture 3 comps x50", GaussianMixture(1.2, [0.0, 1.0, 2.0], [0.5, 0.3, 0.2]), 50, None,
         {"dp-accounting PLD": lambda: _dpa_pld("MixtureOfGaussiansDpEvent", (1.2, [0.0, 1.0, 2.0],
                                                                              [0.5, 0.3, 0.2]), 50)}),
        ("gaussian_mixture 3 comps x1", GaussianMixture(1.2, [0.0, 1.0, 2.0], [0.5, 0.3, 0.2]), 1,
         lambda: _ref_mixture(1.2, [0.0, 1.0, 2.0], [0.5, 0.3, 0.2]),
         {"dp-accounting PLD": lambda: _dpa_pld("MixtureOfGaussiansDpEvent", (1.2, [0.0, 1.0, 2.0],
                                                                              [0.5, 0.3, 0.2]), 1)}),
        ("noisy_screening sigma=40 T=200 k=300 x1", NoisyScreening(40.0, 200.0, 300), 1,
         lambda: _ref_screening(40.0, 200.0, 300), {}),
        ("noisy_screening sigma=2 T=5 k=10 x3", NoisyScreening(2.0, 5.0, 10), 3, None, {}),
        ("gnmax sigma=40 x286", GNMax(40.0), 286, lambda: _ref_gauss(math.sqrt(286 * 2) / 40.0), {}),
        ("subsampled_gnmax sigma=25 q=0.15 x735", SubsampledGNMax(25.0, 0.15), 735, None,
         {"dp-accounting PLD": lambda: _dpa_pld_sg(25.0 / math.sqrt(2), 0.15, 735)}),
    ]


# ------------------------------------------------------------------------------------------ peers
def _autodp(name, args, k):
    from autodp import mechanism_zoo as z
    from autodp import transformer_zoo as tz

    def run():
        m = getattr(z, name)(*args)
        if k > 1:
            m = tz.Composition()([m], [k])
        return m.get_approxDP(DELTA)

    return run


def _dpa_pld(event, args, k):
    from dp_accounting import dp_event as E
    from dp_accounting.pld import pld_privacy_accountant as P

    def run():
        a = P.PLDAccountant()
        a.compose(E.SelfComposedDpEvent(getattr(E, event)(*args), k))
        return a.get_epsilon(DELTA)

    return run


def _dpa_pld_sg(noise_multiplier, q, k):
    from dp_accounting import dp_event as E
    from dp_accounting.pld import pld_privacy_accountant as P

    def run():
        a = P.PLDAccountant()
        a.compose(E.SelfComposedDpEvent(E.PoissonSampledDpEvent(q, E.GaussianDpEvent(noise_multiplier)), k))
        return a.get_epsilon(DELTA)

    return run


def _dpa_rdp_sg(noise_multiplier, q, k):
    from dp_accounting import dp_event as E
    from dp_accounting.rdp import rdp_privacy_accountant as R

    def run():
        a = R.RdpAccountant()
        a.compose(E.SelfComposedDpEvent(E.PoissonSampledDpEvent(q, E.GaussianDpEvent(noise_multiplier)), k))
        return a.get_epsilon(DELTA)

    return run


def _dpa_rdp(event, args, k, relation=None):
    from dp_accounting import dp_event as E
    from dp_accounting import privacy_accountant as PA
    from dp_accounting.rdp import rdp_privacy_accountant as R

    def run():
        rel = getattr(PA.NeighboringRelation, relation or "ADD_OR_REMOVE_ONE")
        a = R.RdpAccountant(neighboring_relation=rel)
        a.compose(E.SelfComposedDpEvent(getattr(E, event)(*args), k))
        return a.get_epsilon(DELTA)

    return run


# ------------------------------------------------------------------------------------------ driver
def run() -> dict:
    from accountant import PrivacyAccountant

    rows = []
    for label, mech, k, ref_fn, peers in cases():
        def ours(mech=mech, k=k):
            return PrivacyAccountant().compose(mech, times=k).certificate(delta=DELTA)

        cert = ours()
        val, t = _time(lambda: ours().epsilon)
        ref = ref_fn() if ref_fn is not None else None
        row = {"case": label, "dpcert": val, "dpcert_lower": cert.lower_bound, "method": cert.method,
               "bound": cert.bound, "dpcert_s": t, "reference": ref,
               "rel_err_vs_reference": None if ref is None else (val - ref) / ref, "peers": {}}
        for name, make in peers.items():
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    pv, pt = _time(make())
                floor = ref if ref is not None else cert.lower_bound
                row["peers"][name] = {"value": pv, "s": pt, "time_ratio": pt / t if t > 0 else None,
                                      "value_ratio": pv / val if val else None,
                                      "invalid": bool(floor is not None and pv < floor * (1 - 1e-9))}
            except Exception as exc:  # noqa: BLE001 - a peer failing is a benchmark result
                row["peers"][name] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        rows.append(row)
        print(f"{label}: {val:.6g} ({cert.method}, {t * 1e3:.1f} ms)", file=sys.stderr, flush=True)
    return {"delta": DELTA, "rows": rows}


def markdown(doc: dict) -> str:
    lines = [f"eps(delta = {doc['delta']:g}); time = median warm query.  ratio = peer / dpcert.", "",
             "| case | dpcert eps (route, bound) | time | reference | rel. err | peers (eps, time ratio) |",
             "|---|---|---|---|---|---|"]
    for r in doc["rows"]:
        ref = "" if r["reference"] is None else f"{r['reference']:.8g}"
        err = "" if r["rel_err_vs_reference"] is None else f"{r['rel_err_vs_reference']:.1e}"
        peers = []
        for name, p in r["peers"].items():
            if "error" in p:
                peers.append(f"{name}: error")
            else:
                flag = " INVALID" if p["invalid"] else ""
                peers.append(f"{name}: {p['value']:.6g}{flag} ({p['time_ratio']:.2g}x time)")
        lines.append(f"| {r['case']} | {r['dpcert']:.8g} ({r['method']}, {r['bound']}) | "
                     f"{r['dpcert_s'] * 1e3:.1f} ms | {ref} | {err} | {'; '.join(peers)} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    doc = run()
    OUT.mkdir(exist_ok=True)
    (OUT / "mechlib.json").write_text(json.dumps(doc, indent=2, default=str))
    text = markdown(doc)
    (OUT / "mechlib.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
