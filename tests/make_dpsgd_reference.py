"""Generate ``tests/data/dpsgd_reference.json``: independent reference values for DP-SGD settings (the T-fold
Poisson-subsampled Gaussian, add/remove relation) computed with ``tests/reference_dpsgd.py``.

For every setting (q, sigma, T, delta) and both directions:

* ``eps``: eps_T(delta) by MGF inversion on the saddle line (default discretisation, A);
* the accuracy check: the same root on a *different line* (c x 0.6) with every discretisation refined at
  once (x-step x 0.6, x-rule tolerance 1e-50 instead of 1e-45, every t-panel limit halved, the march
  continued to twice its stopping point), B; the declared error is max(10 |A - B|, 4 ulp(A)) -- the
  two runs share no node, so their difference measures the discretisation and truncation error;
* ``delta`` at two epsilons around the answer (for the library's delta-query brackets).

Run from the repository root (``python tests/make_dpsgd_reference.py [--only 0,3] [--out PATH]``);
minutes per setting on one core.  The JSON records the method, precision, checks, timings and date.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import mpmath as mp  # noqa: E402
import reference_dpsgd as R  # noqa: E402

#: (q, sigma, T, delta): the lead's DP-SGD regimes, then the spec-08 value and a few more
SETTINGS = [
    (1e-5, 1.0, 10**5, 1e-8),
    (1e-6, 1.0, 10**5, 1e-5),
    (1e-5, 0.4, 10**5, 1e-5),
    (1e-3, 0.8, 100, 1e-5),
    (1e-4, 1.0, 10, 1e-12),
    (1e-4, 0.5, 10**4, 1e-5),
    (1e-6, 1.0, 10**4, 1e-5),
    (1e-4, 1.0, 10**5, 1e-12),
    (1e-4, 2.0, 10**4, 1e-5),
    (1e-5, 1.0, 10**7, 1e-8),
    (1e-6, 1.0, 10**7, 1e-5),
    (1e-4, 0.5, 10**7, 1e-5),
    (1e-3, 2.0, 10**6, 1e-10),
    (1e-3, 1.0, 100, 1e-5),
    (1e-3, 0.5, 100, 1e-5),
    (3e-4, 0.7, 3 * 10**4, 1e-7),
    (1e-5, 2.0, 10**7, 1e-6),
]

ALT = {"c_factor": 0.6, "hscale": 0.6, "xdigits": 50, "wscale": 0.5, "tmax_factor": 2.0}
#: ``--quick-add``: the add direction's check on another line with the default discretisation (cheaper;
#: the add line sits at its saddle, cancellation ~1, and its full checks agreed to ~1e-34)
ALT_ADD = {"c_factor": 0.6, "hscale": 1.0, "xdigits": 45, "wscale": 1.0, "tmax_factor": 1.0}


def _ulp(x: float) -> float:
    return math.ulp(x) if x != 0 else 0.0


def one(q, sigma, T, delta, log=print, quick_add=False, acc=None) -> dict:
    acc = acc or {}
    engines = {}
    rec = {"q": q, "sigma": sigma, "T": T, "delta": delta, "eps": {}, "eps_str": {}, "eps_err": {},
           "check": {}, "diag": {}, "time_s": {}}
    for d in ("remove", "add"):
        t0 = time.time()
        a = R.eps_ref(delta, sigma, q, T, d, **acc)
        t1 = time.time()
        alt = ALT if (d == "remove" or not quick_add) else ALT_ADD
        b = R.eps_ref(delta, sigma, q, T, d, c=a.c * alt["c_factor"], hscale=alt["hscale"],
                      xdigits=alt["xdigits"], wscale=alt["wscale"], tmax_factor=alt["tmax_factor"],
                      eps_guess=a.value, refine_only=True, rtol=acc.get("rtol", 1e-25),
                      hf_tol=acc.get("hf_tol", R.HF_TOL))
        engines[d] = a.extra["engine"], a.extra["plan"]
        t2 = time.time()
        diff = abs(a.value_mp - b.value_mp)
        err = max(10 * float(diff), 4 * _ulp(a.value))
        rec["eps"][d] = a.value
        rec["eps_str"][d] = mp.nstr(a.value_mp, 22)
        rec["eps_err"][d] = err
        rec["check"][d] = {"eps_alt": mp.nstr(b.value_mp, 22), "abs_diff": float(diff), "c_alt": b.c,
                           "alt": alt, "t_nodes_alt": b.t_nodes, "x_nodes_alt": b.x_nodes,
                           "t_max_alt": b.t_max}
        rec["diag"][d] = {"c": a.c, "x_nodes": a.x_nodes, "t_nodes": a.t_nodes, "t_max": a.t_max,
                          "tail_est": a.tail_est, "cancellation": a.cancellation, "slope": a.extra["slope"],
                          "x_step": a.extra["h"], "rejected_panels": a.extra["rejected"]}
        rec["time_s"][d] = {"eps": round(t1 - t0, 1), "check": round(t2 - t1, 1)}
        log(f"  {d}: eps = {rec['eps_str'][d]}  (alt {rec['check'][d]['eps_alt']}, |diff| {float(diff):.2e}, "
            f"c {a.c:.4g}/{b.c:.4g}, nodes {a.t_nodes}/{b.t_nodes}, R {a.cancellation:.3g}, "
            f"{t1 - t0:.0f}+{t2 - t1:.0f} s)")
    em = max(rec["eps"].values())
    rec["eps_max"] = em
    rec["eps_max_err"] = rec["eps_err"][max(rec["eps"], key=rec["eps"].get)]
    pts = sorted({float(f"{em * f:.6g}") for f in (0.99, 1.01)})
    rec["delta_points"] = []
    dvals = {}
    for d in ("remove", "add"):
        t0 = time.time()
        eng, (lo, hi) = engines[d]
        if lo <= pts[0] and pts[-1] <= hi:  # inside the eps root's line (planned for [lo, hi]): reuse it
            dvals[d] = []
            for e in pts:
                v, dv, absn = eng.delta(e)
                dvals[d].append(R.RefResult(float(v), v, d, eng.c, eng.xr.K, len(eng.line.t), eng.line.t_max,
                                            eng.line.tail_est, float(absn / abs(v)), {}))
        else:
            dvals[d] = R.deltas_ref(pts, sigma, q, T, d)
        rec["time_s"][d]["delta"] = round(time.time() - t0, 1)
    for i, e in enumerate(pts):
        row = {"eps": e}
        for d in ("remove", "add"):
            r = dvals[d][i]
            row[d] = r.value
            row[d + "_str"] = mp.nstr(r.value_mp, 22)
            # delta error: the eps check's agreement in delta terms (10 |eps_A - eps_B| |slope| / delta),
            # carried over (the same rules on a line planned at these points), at least 1e-15
            rel = 10 * rec["check"][d]["abs_diff"] * abs(rec["diag"][d]["slope"]) / delta
            row[d + "_rel_err"] = max(rel, 1e-15)
        row["max"] = max(row["remove"], row["add"])
        rec["delta_points"].append(row)
        log(f"  delta({e}) = remove {row['remove_str']}, add {row['add_str']}")
    return rec


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default=None, help="comma-separated setting indices")
    ap.add_argument("--quick-add", action="store_true", help="cheaper check run for the add direction")
    ap.add_argument("--rtol", type=float, default=1e-25, help="t-truncation tolerance (relative to delta)")
    ap.add_argument("--hf-tol", type=float, default=R.HF_TOL, help="high-frequency guard")
    ap.add_argument("--xdigits", type=int, default=45, help="x-rule tolerance 10^-xdigits")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                                                  "dpsgd_reference.json"))
    args = ap.parse_args(argv)
    idx = range(len(SETTINGS)) if args.only is None else [int(i) for i in args.only.split(",")]
    doc = {"generated": datetime.date.today().isoformat(),
           "generator": "tests/make_dpsgd_reference.py",
           "method": ("MGF inversion delta_T(eps) = (1/pi) int_0^inf Re[M(c+it)^T e^{-(c+it)eps} / "
                      "((c+it)(c+1+it))] dt; M by the trapezoid rule on the shifted line x + i theta s^2 "
                      "(theta = pi/2 remove, -pi/4 add) in fixed point (2^-192), t by composite 20-point "
                      "Gauss-Legendre panels with phase/modulus/high-frequency limits; eps by Newton "
                      "(tests/reference_dpsgd.py)"),
           "mp_dps": R.DPS, "fixed_point_bits": R.PBITS, "gl_nodes": R.NGL, "hf_tol": R.HF_TOL,
           "x_digits": 45, "t_rtol": 1e-25, "check_run": ALT,
           "error_rule": "eps_err = max(10 |eps_A - eps_B|, 4 ulp): A default, B other line + all refined",
           "settings": []}
    if os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        have = {(s["q"], s["sigma"], s["T"], s["delta"]): s for s in old.get("settings", [])}
    else:
        have = {}
    for i in idx:
        q, s, T, d = SETTINGS[i]
        print(f"[{i}] q={q} sigma={s} T={T} delta={d}", flush=True)
        t0 = time.time()
        acc = {"rtol": args.rtol, "hf_tol": args.hf_tol, "xdigits": args.xdigits}
        rec = one(q, s, T, d, log=lambda m: print(m, flush=True), quick_add=args.quick_add, acc=acc)
        rec["accuracy_settings"] = {**acc, "quick_add": args.quick_add}
        rec["total_time_s"] = round(time.time() - t0, 1)
        have[(q, s, T, d)] = rec
        doc["settings"] = [have[k] for k in sorted(have, key=lambda k: [tuple(x) for x in SETTINGS].index(k)
                                                   if k in SETTINGS else 99)]
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
