"""The regimes sweep: DP-SGD certificates over q x sigma x T x delta, with dp-accounting side by side.

``python -m benchmarks.sweep_regimes [--quick] [--every K] [--no-peers] [--peer-timeout S]
[--peers-from JSON] [--repeats N] [--out DIR]``

For each setting (Poisson-subsampled Gaussian, add/remove, ``method="auto"``) it records the certified
epsilon, the certified lower bound, the bracket width, the route auto chose and the warm query time
(the median of ``--repeats`` queries, default 3, each on a fresh accountant, after one warm-up query
that compiles the kernels), as CPU time of this process (``time.process_time``: the numeric core is
single-threaded, so it is the wall time on an idle core and stays meaningful on a shared machine) and as
wall time.
Three repeats, not two: on the 2-core VM the median of two (their mean) let one slow repeat carry a
query across 100 ms -- three runs at one revision counted 8, 5 and 7 queries over, two runs with three
repeats 4 and 4.
Settings come in chains over T (and a few over q and sigma), so the sweep also counts non-monotone
certificates: a certified epsilon that decreases while the true one cannot.

With dp-accounting installed (``pip install dp-accounting``, the ``peers`` extra), its pessimistic
connect-the-dots PLD at discretisation 1e-4 runs in a subprocess per setting with a timeout (its CPU
time is measured inside the subprocess around compose + get_epsilon, so Python start-up and imports do
not count against it); its value is reported next to ours, and where it falls *below our certified lower
bound* it is flagged as the peer's failure (it is then not an upper bound; the reference test
``tests/test_dpsgd_reference.py`` confirms one such case with an independent high-precision value). A
peer is a reference for speed and tightness, never for soundness.

``--peers-from`` takes the peer's values and times from an earlier run's JSON (settings it lacks run
the peer afresh): the peer is deterministic, and its full run takes ~40 min of the ~45.

Writes ``results/sweep_regimes.json`` and ``results/sweep_regimes.md`` (the README shows the summary).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent

# chains over T: (q, sigma, delta)
CHAINS_T = [
    (1e-6, 1.0, 1e-5), (1e-5, 0.4, 1e-5), (1e-5, 1.0, 1e-8), (1e-4, 0.5, 1e-5), (1e-4, 1.0, 1e-12),
    (1e-4, 2.0, 1e-5), (1e-3, 0.3, 1e-5), (1e-3, 0.5, 1e-5), (1e-3, 0.8, 1e-5), (1e-3, 1.0, 1e-8),
    (1e-3, 2.0, 1e-10), (1e-3, 5.0, 1e-5), (4e-3, 1.0, 1e-5), (1e-2, 0.5, 1e-5), (1e-2, 0.8, 1e-2),
    (1e-2, 1.1, 1e-5), (1e-2, 1.1, 1e-12), (1e-2, 2.0, 1e-5), (1e-2, 5.0, 1e-8), (1e-2, 20.0, 1e-5),
    (0.05, 1.0, 1e-5), (0.1, 0.5, 1e-5), (0.1, 1.0, 1e-8), (0.1, 3.0, 1e-5), (0.3, 1.0, 1e-5),
    (0.5, 2.0, 1e-6), (1.0, 1.0, 1e-5), (1.0, 5.0, 1e-10), (1.0, 20.0, 1e-12), (2e-2, 0.6, 1e-3),
]
STEPS = [1, 10, 100, 1000, 10**4, 10**5, 10**6, 10**7]
QUICK_STEPS = [1, 100, 10**4, 10**6]
# short chains over q and sigma at fixed T, delta = 1e-5
CHAINS_Q = [(sigma, steps, [1e-4, 1e-3, 3e-3, 1e-2, 3e-2, 0.1]) for sigma, steps in ((1.0, 1000), (0.8, 100))]
CHAINS_S = [(q, steps, [0.5, 0.7, 1.0, 1.5, 3.0, 10.0]) for q, steps in ((1e-2, 1000), (1e-3, 100))]

PEER_CODE = r"""
import sys, json
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
q, sigma, steps, delta = json.loads(sys.argv[1])
import time
t0 = time.process_time()
acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
acc.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)), int(steps))
eps = acc.get_epsilon(delta)
print(json.dumps([eps, 1e3 * (time.process_time() - t0)]))
"""


def _dpcert(q: float, sigma: float, steps: int, delta: float, repeats: int = 3) -> dict:
    from accountant import PrivacyAccountant

    def query():
        acct = PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=steps)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return acct.certificate(delta=delta)

    query()  # warm-up: compiles / loads the kernels of this route
    times, walls, cert = [], [], None
    for _ in range(repeats):
        t0, w0 = time.process_time(), time.perf_counter()
        cert = query()
        times.append(time.process_time() - t0)
        walls.append(time.perf_counter() - w0)
    lo = cert.lower_bound if cert.lower_bound is not None else 0.0
    up = cert.epsilon
    width = up - lo if math.isfinite(up) else math.inf
    ok = width <= 1e-3 * up or (up < 0.1 and width <= 1e-4)
    return {"epsilon": up, "lower": lo, "width": width, "rel_width": width / up if up > 0 else 0.0,
            "narrow": bool(ok), "route": cert.method, "ms": 1e3 * statistics.median(times),
            "wall_ms": 1e3 * statistics.median(walls),
            "warning": cert.details.get("warning", "")}


def _peer(q: float, sigma: float, steps: int, delta: float, timeout: float) -> dict:
    t0 = time.perf_counter()
    try:
        r = subprocess.run([sys.executable, "-c", PEER_CODE, json.dumps([q, sigma, steps, delta])],
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"peer": None, "peer_ms": None, "peer_note": f"timeout > {timeout:g} s"}
    ms = 1e3 * (time.perf_counter() - t0)
    if r.returncode != 0:
        return {"peer": None, "peer_ms": ms,
                "peer_note": (r.stderr.strip().splitlines() or ["error"])[-1][:80]}
    eps, cpu_ms = json.loads(r.stdout)
    return {"peer": float(eps), "peer_ms": cpu_ms, "peer_wall_ms": ms, "peer_note": ""}


def settings(quick: bool) -> list[tuple[str, float, float, int, float]]:
    steps = QUICK_STEPS if quick else STEPS
    out = [(f"T|{q}|{s}|{d}", q, s, t, d) for q, s, d in CHAINS_T for t in steps]
    out += [(f"q|{s}|{t}", q, s, t, 1e-5) for s, t, qs in CHAINS_Q for q in qs]
    out += [(f"s|{q}|{t}", q, s, t, 1e-5) for q, t, ss in CHAINS_S for s in ss]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.sweep_regimes", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="4 values of T per chain instead of 8")
    p.add_argument("--no-peers", action="store_true", help="dpcert only")
    p.add_argument("--peer-timeout", type=float, default=60.0, help="seconds per dp-accounting query")
    p.add_argument("--every", type=int, default=1, help="run every K-th setting only (a quick subset)")
    p.add_argument("--peers-from", default=None, help="reuse the peer's values from this earlier JSON")
    p.add_argument("--out", default=str(ROOT / "results"), help="output directory")
    p.add_argument("--repeats", type=int, default=3,
                   help="timed queries per setting (their median is reported)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats must be >= 1, got {args.repeats}")
    peers = not args.no_peers
    if peers:
        try:
            import dp_accounting  # noqa: F401
        except ImportError:
            print("dp-accounting is not installed: dpcert only (pip install dp-accounting)", file=sys.stderr)
            peers = False
    known: dict = {}
    if peers and args.peers_from:
        for r in json.loads(Path(args.peers_from).read_text())["rows"]:
            if "peer" in r:
                known[(r["q"], r["sigma"], r["T"], r["delta"])] = {
                    k: r[k] for k in ("peer", "peer_ms", "peer_wall_ms", "peer_note") if k in r}
    rows = []
    todo = settings(args.quick)[::max(1, args.every)]
    for i, (chain, q, s, t, d) in enumerate(todo):
        row = {"chain": chain, "q": q, "sigma": s, "T": t, "delta": d, **_dpcert(q, s, t, d, args.repeats)}
        if peers:
            row.update(known.get((q, s, t, d)) or _peer(q, s, t, d, args.peer_timeout))
            pv = row["peer"]
            row["peer_below_our_lower"] = bool(pv is not None and pv < row["lower"] * (1 - 1e-9))
            row["ours_above_peer"] = bool(pv is not None and row["epsilon"] > pv)
        rows.append(row)
        if sys.stderr.isatty() or os.environ.get("DPCERT_PROGRESS"):
            print(f"[{i + 1}/{len(todo)}] q={q:g} sigma={s:g} T={t:g} delta={d:g}: eps {row['epsilon']:.6g} "
                  f"[{row['lower']:.6g}] {row['route']} {row['ms']:.1f} ms", file=sys.stderr, flush=True)
    # monotonicity within chains (in the order listed: T, q increasing; sigma increasing -> eps decreasing)
    nonmono = []
    by_chain: dict[str, list[dict]] = {}
    for r in rows:
        by_chain.setdefault(r["chain"], []).append(r)
    for name, rs in by_chain.items():
        sign = -1.0 if name.startswith("s|") else 1.0
        for a, b in zip(rs, rs[1:], strict=False):
            if sign * (b["epsilon"] - a["epsilon"]) < 0:
                nonmono.append((name, a["T"], b["T"], a["epsilon"], b["epsilon"]))
    ms = sorted(r["ms"] for r in rows)
    summary = {
        "settings": len(rows), "median_ms": statistics.median(ms), "max_ms": ms[-1],
        "over_100ms": sum(m > 100 for m in ms), "narrow": sum(r["narrow"] for r in rows),
        "non_monotone": len(nonmono), "routes": {k: sum(r["route"] == k for r in rows)
                                                  for k in sorted({r["route"] for r in rows})},
    }
    if peers:  # (over distinct settings: the chains share a few)
        unique = _distinct(rows)
        summary["distinct_settings"] = len(unique)
        summary["peer_below_our_lower"] = sum(r.get("peer_below_our_lower", False) for r in unique)
        summary["ours_above_peer"] = sum(r.get("ours_above_peer", False) and not r.get("peer_below_our_lower")
                                         for r in unique)
        ratios = sorted(r["ms"] / r["peer_ms"] for r in unique if r.get("peer_ms"))
        summary["median_time_ratio"] = statistics.median(ratios) if ratios else None
        summary["peer_timeouts"] = sum(r.get("peer") is None for r in unique)
        summary["peers_from"] = args.peers_from
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep_regimes.json").write_text(json.dumps({"summary": summary, "non_monotone": nonmono,
                                                        "rows": rows}, indent=1))
    md = _markdown(summary, rows, nonmono, peers)
    (out / "sweep_regimes.md").write_text(md)
    print(md)
    return 0


def _distinct(rows: list[dict]) -> list[dict]:
    """One row per distinct (q, sigma, T, delta) (the chains share a few settings)."""
    return list({(r["q"], r["sigma"], r["T"], r["delta"]): r for r in rows}.values())


def _markdown(summary: dict, rows: list[dict], nonmono: list, peers: bool) -> str:
    lines = [f"Regimes sweep: {summary['settings']} DP-SGD settings (add/remove, auto). Warm query CPU time: "
             f"median {summary['median_ms']:.1f} ms, max {summary['max_ms']:.0f} ms, "
             f"{summary['over_100ms']} over 100 ms. Bracket within target (<= 1e-3 relative, or 1e-4 "
             f"absolute when eps < 0.1): {summary['narrow']}/{summary['settings']}. Non-monotone "
             f"certificates: {summary['non_monotone']}. Routes: "
             + ", ".join(f"{k} {v}" for k, v in summary["routes"].items()) + "."]
    if peers:
        lines.append(f"dp-accounting pessimistic PLD (1e-4), over the {summary['distinct_settings']} "
                     f"distinct settings: below our certified lower bound (peer not an upper bound) in "
                     f"{summary['peer_below_our_lower']}; ours above theirs (and theirs not below our lower "
                     f"bound) in {summary['ours_above_peer']}; no answer within the timeout in "
                     f"{summary['peer_timeouts']}. Median time ratio ours/theirs (CPU): "
                     + (f"{summary['median_time_ratio']:.3g}." if summary["median_time_ratio"] else "n/a."))
    lines += ["", "Worst settings by bracket width, then by time:", "",
              "| q | sigma | T | delta | certified eps | lower bound | rel. width | route | CPU ms |"
              + (" dp-accounting | its CPU ms |" if peers else ""),
              "|---|---|---|---|---|---|---|---|---|" + ("---|---|" if peers else "")]
    worst = sorted(rows, key=lambda r: -r["rel_width"])[:5] + sorted(rows, key=lambda r: -r["ms"])[:5]
    for r in worst:
        peer = ""
        if peers:
            peer = (f" {r['peer']:.6g} | {r['peer_ms']:.0f} |" if r.get("peer") is not None
                    else f" {r.get('peer_note', '')} | |")
        lines.append(f"| {r['q']:g} | {r['sigma']:g} | {r['T']:g} | {r['delta']:g} | {r['epsilon']:.6g} | "
                     f"{r['lower']:.6g} | {r['rel_width']:.2e} | {r['route']} | {r['ms']:.0f} |{peer}")
    if peers:
        unique = _distinct(rows)
        fail = [r for r in unique if r.get("peer_below_our_lower")]
        above = sorted((r for r in unique if r.get("ours_above_peer") and not r.get("peer_below_our_lower")),
                       key=lambda r: -(r["epsilon"] - r["peer"]) / r["peer"])
        if fail:
            lines += ["", "The peer below our certified lower bound (its value is not an upper bound):", "",
                      "| q | sigma | T | delta | lower bound | dp-accounting | below by (rel.) |",
                      "|---|---|---|---|---|---|---|"]
            lines += [f"| {r['q']:g} | {r['sigma']:g} | {r['T']:g} | {r['delta']:g} | {r['lower']:.10g} | "
                      f"{r['peer']:.10g} | {(r['lower'] - r['peer']) / r['lower']:.2e} |" for r in fail]
        if above:
            inside = sum(r["lower"] <= r["peer"] for r in above)
            lines += ["", f"Ours above the peer's value ({len(above)} settings; the peer inside our "
                      f"certified bracket in {inside}):", "",
                      "| q | sigma | T | delta | lower bound | certified eps | dp-accounting "
                      "| above by (rel.) | route |", "|---|---|---|---|---|---|---|---|---|"]
            lines += [f"| {r['q']:g} | {r['sigma']:g} | {r['T']:g} | {r['delta']:g} | {r['lower']:.10g} | "
                      f"{r['epsilon']:.10g} | {r['peer']:.10g} | "
                      f"{(r['epsilon'] - r['peer']) / r['peer']:.2e} | {r['route']} |" for r in above]
    if nonmono:
        lines += ["", "Non-monotone pairs: " + "; ".join(f"{c} {a}->{b}: {x:.6g} > {y:.6g}"
                                                       for c, a, b, x, y in nonmono[:10])]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
