"""The benchmark suite: tightness and speed of dpcert side by side with other accountants.

Every library runs in its own fresh worker process (:mod:`benchmarks.worker`), sequentially (timings
never overlap), with a per-task time limit; a task that exceeds it is recorded as a timeout and the
worker is restarted for the remaining tasks.  A separate fresh process per library measures the *cold*
start: import + the first DP-SGD query (for dpcert this includes loading the cached numba kernels).

Sections (issue 2 and issue 3 "Speed", issue 6):

* ``gaussian`` / ``laplace`` -- epsilon(delta) of k-fold compositions; the Gaussian reference is the
  exact mu-GDP value computed here with mpmath (independent of dpcert), Laplace is compared with dpcert's
  certified [lower, upper] bracket;
* ``dpsgd`` -- the issue-3 settings (q, sigma, T); reference = dpcert's certified lower bound;
* ``schedule`` -- 100 distinct sigma values (100 steps each);
* ``step_loop`` -- 10^5 individual ``step()`` calls plus one query (time-limited for slow peers);
* ``calibration`` -- smallest sigma for a target epsilon; every peer's answer is checked with dpcert's
  certified epsilon (a sigma whose certified epsilon exceeds the target is an unsafe calibration);
* ``robustness`` -- epsilon over delta from 0.1 down to 1e-30 and a large-epsilon setting: values must
  be finite, non-negative, not below the certified lower bound and non-increasing in delta;
* ``plugins`` -- whatever data-adaptive mechanisms are registered when the suite runs (dpcert only);
* ``audit`` -- the shipped published-claims audit (full mode).

A peer's *failure* is: a crash, inf/NaN, a negative epsilon, an epsilon below dpcert's certified lower
bound (i.e. not a valid upper bound), a non-monotone profile, an unsafe calibration, a timeout, or a
warning it raised.  Ratios are measured in the same run: ``peer time / dpcert time`` (> 1: dpcert is
faster) and ``eps / reference`` (>= 1 for a valid upper bound).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import queue
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .peers import LIBRARIES, PEERS, availability
from .worker import MARK

ROOT = Path(__file__).resolve().parent
DPSGD_SETTINGS = [(0.01, 1.1, 10**4), (0.004, 1.1, 10**5), (0.1, 2.0, 10**3), (0.001, 0.8, 10**5),
                  (256 / 60000, 1.1, 14100)]
ROBUST_DELTAS = [1e-1, 1e-3, 1e-5, 1e-8, 1e-10, 1e-12, 1e-14, 1e-16, 1e-20, 1e-30]
# registered-name -> (params, times): examples for the data-adaptive plug-ins (taken when registered)
PLUGIN_EXAMPLES = {
    "poisson_subsampled": ({"base": {"name": "laplace", "params": {"scale": 2.0}}, "sample_rate": 0.9}, 10),
    "noisy_screening": ({"sigma": 75.0, "threshold": 180.0, "k": 300}, 1000),
    "subsampled_noisy_screening": ({"sigma": 75.0, "threshold": 180.0, "k": 300, "sample_rate": 0.15}, 1000),
    "private_knn": ({"sigma_screen": 75.0, "threshold": 180.0, "k": 300, "sigma_answer": 25.0,
                     "sample_rate": 0.15, "num_queries": 1000, "answer_cap": 735}, 1),
    "gnmax": ({"sigma": 40.0}, 286),
    "subsampled_gnmax": ({"sigma": 25.0, "sample_rate": 0.15}, 735),
    "laplace_svt": ({"epsilon1": 0.5, "epsilon2": 0.5, "cutoff": 1}, 10),
    "gaussian_svt": ({"sigma1": 2.0, "sigma2": 4.0, "cutoff": 1, "max_length": 100}, 10),
    "random_stopping_selection": ({"epsilon1": 0.5, "gamma": 0.01}, 1),
    "known_threshold_selection": ({"epsilon1": 0.5, "gamma": 0.01, "max_steps": 100}, 1),
    "generalized_ptr": ({"epsilon": 1.0, "delta": 1e-6, "test_epsilon": 0.5, "test_delta": 1e-6,
                         "false_positive": 1e-6}, 1),
}
CORE_MECHANISMS = {"gaussian", "laplace", "randomized_response", "pure_dp", "approx_dp",
                   "subsampled_gaussian", "sampled_without_replacement"}


@dataclass(frozen=True)
class Config:
    quick: bool
    timeout_s: float
    warm_budget_s: float
    warm_max_first_s: float
    loop_budget_s: float

    @classmethod
    def make(cls, quick: bool, timeout_s: float | None = None) -> Config:
        if quick:
            return cls(True, timeout_s or 10.0, 0.3, 2.0, 2.0)
        return cls(False, timeout_s or 120.0, 2.0, 15.0, 60.0)


def source_revision() -> str:
    """The code version benchmarked: ``git`` short hash (+``-dirty`` if dpcert's packages have uncommitted
    changes), else ``$DPCERT_REVISION`` (set it when running from an exported snapshot), else "unknown"."""
    try:
        rev = subprocess.run(["git", "-C", str(ROOT.parent), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if rev.returncode == 0 and rev.stdout.strip():
            st = subprocess.run(["git", "-C", str(ROOT.parent), "status", "--porcelain", "--", "accountant",
                                 "mechanisms", "conversions", "benchmarks"], capture_output=True, text=True,
                                timeout=10)
            return rev.stdout.strip() + ("-dirty" if st.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return os.environ.get("DPCERT_REVISION", "unknown")


def _progress_default(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------- tasks
def build_tasks(cfg: Config, plugin_names: list[str]) -> list[dict]:
    """The task list (each task: id, section, kind, label, params)."""
    q = cfg.quick
    tasks: list[dict] = []

    def add(section, kind, label, **params):
        tasks.append({"id": f"{section}:{label}", "section": section, "kind": kind, "label": label,
                      "params": params})

    for sigma, k in ([(1.0, 10)] if q else [(0.5, 1), (1.0, 10), (2.0, 1000), (10.0, 10**6)]):
        add("gaussian", "gaussian_eps", f"sigma={sigma:g} k={k}", sigma=sigma, k=k, delta=1e-5)
    for b, k in ([(2.0, 10)] if q else [(1.0, 1), (2.0, 10), (5.0, 100)]):
        add("laplace", "laplace_eps", f"b={b:g} k={k}", scale=b, k=k, delta=1e-5)
    for qq, s, t in (DPSGD_SETTINGS[2:3] if q else DPSGD_SETTINGS):
        add("dpsgd", "dpsgd_eps", f"q={qq:.4g} sigma={s:g} T={t}", q=qq, sigma=s, steps=t, delta=1e-5)
    n_sig = 5 if q else 100
    phases = [[0.8 + 1.0 * i / max(n_sig - 1, 1), 0.01, 100] for i in range(n_sig)]
    add("schedule", "schedule_eps", f"{n_sig} distinct sigma x 100 steps (q=0.01)", phases=phases, delta=1e-5)
    n_loop = 10**4 if q else 10**5
    add("step_loop", "step_loop", f"{n_loop} step() calls + 1 query", n=n_loop, sigma=1.1, q=0.01,
        delta=1e-5, budget_s=cfg.loop_budget_s)
    if not q:
        add("calibration", "calibrate", "sigma for eps=3 (delta=1e-5, q=0.01, T=1e4)", target=3.0, delta=1e-5,
            q=0.01, steps=10**4)
    deltas = [1e-5, 1e-14, 1e-30] if q else ROBUST_DELTAS
    add("robustness", "robust_eps", "q=0.01 sigma=1.1 T=1e4, delta 0.1..1e-30", q=0.01, sigma=1.1,
        steps=10**4, deltas=deltas)
    if not q:
        add("robustness", "robust_eps", "large eps: q=0.5 sigma=0.5 T=1000", q=0.5, sigma=0.5, steps=1000,
            deltas=[1e-5, 1e-10])
    names = [n for n in plugin_names if n in PLUGIN_EXAMPLES]
    for n in (names[:3] if q else names):
        params, times = PLUGIN_EXAMPLES[n]
        add("plugins", "plugin_eps", f"{n} x{times}", spec={"name": n, "params": params}, times=times,
            delta=1e-5)
    for t in tasks:
        t["warm_budget_s"], t["warm_max_first_s"] = cfg.warm_budget_s, cfg.warm_max_first_s
    return tasks


def supports(lib: str, kind: str) -> bool:
    return hasattr(LIBRARIES[lib], kind)


# ----------------------------------------------------------------------------------------- workers
def _reader(stream, q: queue.Queue) -> None:
    for line in stream:
        if line.startswith(MARK):
            try:
                q.put(json.loads(line[len(MARK):]))
            except json.JSONDecodeError:
                pass
    q.put(None)


def run_worker(lib: str, tasks: list[dict], timeout_s: float, cold: bool = False,
               progress: Callable[[str], None] = _progress_default) -> tuple[list[float], dict[str, dict]]:
    """Run ``tasks`` for ``lib`` in fresh processes; returns (import times, {task id: result})."""
    results: dict[str, dict] = {}
    imports: list[float] = []
    pending = list(tasks)
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3")
    while pending:
        with tempfile.TemporaryFile("w+") as err:
            cmd = [sys.executable, "-m", "benchmarks.worker", lib] + (["--cold"] if cold else [])
            proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                    cwd=str(ROOT.parent), env=env)
            proc.stdin.write(json.dumps(pending))
            proc.stdin.close()
            q: queue.Queue = queue.Queue()
            threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
            current = None
            deadline = time.monotonic() + timeout_s + 120.0  # import allowance
            finished = set()
            while True:
                try:
                    ev = q.get(timeout=max(0.05, deadline - time.monotonic()))
                except queue.Empty:
                    ev = "timeout"
                if ev is None or ev == "timeout":
                    break
                if ev["event"] == "import":
                    imports.append(ev["seconds"])
                    deadline = time.monotonic() + timeout_s
                elif ev["event"] == "start":
                    current = pending[ev["i"]]
                    deadline = time.monotonic() + timeout_s
                    progress(f"[bench] {lib}: {current['id']} ...")
                elif ev["event"] == "result":
                    t = pending[ev["i"]]
                    res = {k: v for k, v in ev.items() if k not in ("event", "i")}
                    results[t["id"]] = res
                    finished.add(ev["i"])
                    dt = res.get("warm_s", res.get("first_s"))
                    progress(f"[bench] {lib}: {t['id']} -> {res['status']}"
                             + (f" ({dt:.4g} s)" if isinstance(dt, float) else ""))
                    current = None
            if ev == "timeout":
                proc.kill()
            proc.wait()
            err.seek(0)
            tail = err.read()[-600:]
        if current is not None and current["id"] not in results:
            if ev == "timeout":
                results[current["id"]] = {"status": "timeout", "error": f"> {timeout_s:g} s (killed)"}
                progress(f"[bench] {lib}: {current['id']} -> timeout (> {timeout_s:g} s)")
            else:
                results[current["id"]] = {"status": "crash", "error": f"worker died: {tail.strip()[-300:]}"}
        elif not finished:
            # nothing ran: the worker failed (or hung) while importing -- every task fails the same way
            why = "import timed out" if ev == "timeout" else f"worker failed: {tail.strip()[-300:]}"
            for t in pending:
                results[t["id"]] = {"status": "crash", "error": why}
        pending = [t for t in pending if t["id"] not in results]
    return imports, results


# ----------------------------------------------------------------------------------------- references
def gaussian_exact_eps(mu: float, delta: float, digits: int = 40) -> float:
    """Exact epsilon(delta) of mu-GDP by mpmath bisection on
    delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) (Balle & Wang 2018; Dong et al. 2022)."""
    import mpmath as mp

    with mp.workdps(digits):
        m, d = mp.mpf(mu), mp.mpf(delta)

        def dlt(e):
            return mp.ncdf(-e / m + m / 2) - mp.e**e * mp.ncdf(-e / m - m / 2)

        if dlt(0) <= d:
            return 0.0
        lo, hi = mp.mpf(0), mp.mpf(1)
        while dlt(hi) > d:
            lo, hi = hi, hi * 2
        for _ in range(200):
            mid = (lo + hi) / 2
            if dlt(mid) > d:
                lo = mid
            else:
                hi = mid
            if hi - lo < mp.mpf(10) ** (-digits + 5) * max(1, hi):
                break
        return float(hi)


def _sanitize(x):
    """Strict-JSON copy (inf/nan as strings)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if x != x else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {str(k): _sanitize(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_sanitize(v) for v in x]
    return x


def _num(x):
    if isinstance(x, str) and x in ("inf", "-inf", "nan"):
        return float(x)
    return x


# ----------------------------------------------------------------------------------------- analysis
def _check_value(lib: str, v, lower: float | None, where: str, fails: list[str]) -> None:
    v = _num(v)
    if v is None:
        return
    if not isinstance(v, (int, float)) or math.isnan(v):
        fails.append(f"{where}: returned {v!r}")
    elif math.isinf(v):
        fails.append(f"{where}: returned inf")
    elif v < 0:
        fails.append(f"{where}: negative epsilon {v:.6g}")
    elif lower is not None and v < lower * (1 - 1e-9) - 1e-12:
        fails.append(f"{where}: epsilon {v:.6g} below the certified lower bound {lower:.6g} "
                     f"({100 * (v / lower - 1):+.3g}%): not a valid upper bound")


def analyse(tasks: list[dict], res: dict[str, dict[str, dict]], progress) -> tuple[dict, dict]:
    """Reference values per task and the failure list per library."""
    refs: dict[str, dict] = {}
    fails: dict[str, list[str]] = {lib: [] for lib in res}
    dp = res.get("dpcert", {})
    for t in tasks:
        p, tid = t["params"], t["id"]
        ref: dict = {}
        mine = dp.get(tid, {})
        if t["kind"] == "gaussian_eps":
            ex = gaussian_exact_eps(math.sqrt(p["k"]) / p["sigma"], p["delta"])
            ref = {"value": ex, "lower": ex, "kind": "exact (mpmath mu-GDP)"}
        elif t["kind"] in ("laplace_eps", "dpsgd_eps", "schedule_eps", "plugin_eps", "step_loop"):
            if mine.get("status") == "ok" and mine.get("lower") is not None:
                ref = {"value": _num(mine["lower"]), "lower": _num(mine["lower"]),
                       "kind": "dpcert certified lower bound"}
        elif t["kind"] == "robust_eps":
            ref = {"kind": "monotone in delta, finite, >= 0"}
        refs[tid] = ref
        for lib, rr in res.items():
            r = rr.get(tid)
            if r is None:
                continue
            where = f"{t['section']} [{t['label']}]"
            st = r.get("status")
            if st == "crash":
                fails[lib].append(f"{where}: crash: {r.get('error')}")
            elif st == "timeout":
                fails[lib].append(f"{where}: timeout {r.get('error')}")
            if r.get("warnings"):
                fails[lib].append(f"{where}: warnings: {'; '.join(r['warnings'])}")
            if st != "ok":
                continue
            if t["kind"] == "robust_eps":
                vals = [_num(v) for v in r["value"]]
                for d, v in zip(p["deltas"], vals, strict=True):
                    _check_value(lib, v, None, f"{where} delta={d:g}", fails[lib])
                fin = [(d, v) for d, v in zip(p["deltas"], vals, strict=True)
                       if isinstance(v, (int, float)) and math.isfinite(v)]
                for (d1, v1), (d2, v2) in zip(fin, fin[1:], strict=False):
                    if v2 < v1 * (1 - 1e-9):
                        fails[lib].append(f"{where}: not monotone: eps({d2:g}) = {v2:.6g} < eps({d1:g}) = "
                                          f"{v1:.6g}")
            elif t["kind"] == "calibrate":
                pass
            else:
                lower = ref.get("lower")
                _check_value(lib, r.get("value"), lower if lib != "dpcert" else None, where, fails[lib])
    # calibration: check each library's sigma with dpcert's certified epsilon
    from accountant import PrivacyAccountant

    for t in tasks:
        if t["kind"] != "calibrate":
            continue
        p = t["params"]
        for lib, rr in res.items():
            r = rr.get(t["id"])
            if not r or r.get("status") != "ok" or not isinstance(_num(r.get("value")), (int, float)):
                continue
            acct = PrivacyAccountant()
            acct.step(sigma=float(r["value"]), sample_rate=p["q"], steps=p["steps"])
            cert = acct.certificate(delta=p["delta"])
            r["dpcert_eps_at_sigma"] = cert.epsilon
            r["dpcert_lower_at_sigma"] = cert.lower_bound
            progress(f"[bench] check calibration of {lib}: sigma={r['value']:.6g} -> certified eps "
                     f"{cert.epsilon:.6g} (target {p['target']})")
            if cert.lower_bound is not None and cert.lower_bound > p["target"] * (1 + 1e-9):
                fails[lib].append(f"calibration: sigma={r['value']:.6g} gives certified epsilon >= "
                                  f"{cert.lower_bound:.6g} > target {p['target']}: unsafe calibration")
    return refs, fails


# ----------------------------------------------------------------------------------------- report
def _fmt_t(s) -> str:
    if not isinstance(s, (int, float)):
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.2g} µs"
    if s < 1:
        return f"{s * 1e3:.3g} ms"
    return f"{s:.3g} s"


def _cell_time(r: dict | None, base: float | None) -> str:
    if not r:
        return "n/a"
    st = r.get("status")
    if st == "n/a":
        return "n/a"
    if st == "timeout":
        return f"timeout ({r.get('error', '')})"
    if st == "crash":
        return "crash"
    t = r.get("warm_s", r.get("first_s"))
    cell = _fmt_t(t) + ("" if "warm_s" in r else " (1 run)")
    if base and isinstance(t, (int, float)) and t > 0:
        cell += f" ×{t / base:.3g}"
    return cell


def _cell_eps(r: dict | None, ref: float | None) -> str:
    if not r:
        return "n/a"
    st = r.get("status")
    if st != "ok":
        return {"n/a": "n/a", "timeout": "timeout", "crash": "crash"}.get(st, st)
    v = _num(r.get("value"))
    if not isinstance(v, (int, float)):
        return "-"
    cell = f"{v:.6g}"
    if ref and math.isfinite(v):
        cell += f" ({100 * (v / ref - 1):+.2g}%)"
    return cell


def markdown_report(doc: dict) -> str:
    meta, tasks, res, refs = doc["meta"], doc["tasks"], doc["results"], doc["references"]
    libs = [lib for lib in ["dpcert"] + PEERS if lib in res]
    out = [f"<!-- generated by `python -m benchmarks{' --quick' if meta['quick'] else ''}`; do not edit -->",
           f"### Benchmarks ({'quick' if meta['quick'] else 'full'} run, {meta['date']})", "",
           f"Code: dpcert revision {meta.get('revision', 'unknown')}. "
           f"Machine: {meta['machine']}; Python {meta['python']}. Versions: "
           + ", ".join(f"{k} {v}" for k, v in meta["versions"].items() if v) + ".",
           "Missing peers: " + (", ".join(meta["missing"]) or "none") + ".", "",
           "Times are the median of repeated warm calls (each call builds the accountant and answers one "
           "query; `(1 run)` = too slow to repeat); `×r` = that time / dpcert's time on the same task in "
           "this run (> 1: dpcert faster).", ""]

    def table(section: str, what: str) -> None:
        ts = [t for t in tasks if t["section"] == section]
        if not ts:
            return
        out.append("| task | " + " | ".join(libs) + " |")
        out.append("|---|" + "---|" * len(libs))
        for t in ts:
            mine = res.get("dpcert", {}).get(t["id"], {})
            base = mine.get("warm_s", mine.get("first_s"))
            if what == "time":
                cells = [_cell_time(res[lib].get(t["id"]), base if lib != "dpcert" else None) for lib in libs]
            else:
                ref = refs.get(t["id"], {}).get("value")
                cells = [_cell_eps(res[lib].get(t["id"]), ref) for lib in libs]
            label = t["label"] if what == "time" or ref is None else f"{t['label']} [ref {ref:.6g}]"
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        out.append("")

    out += ["#### Speed: epsilon(delta) queries", ""]
    for sec in ("gaussian", "laplace", "dpsgd", "schedule", "plugins"):
        if any(t["section"] == sec for t in tasks):
            out.append(f"*{sec}*")
            out.append("")
            table(sec, "time")
    out += ["#### Cold start (fresh process: import + first DP-SGD query)", "",
            "| library | import | first query | total |", "|---|---|---|---|"]
    for lib in libs:
        c = doc["cold"].get(lib)
        if c:
            out.append(f"| {lib} | {_fmt_t(c.get('import_s'))} | {_fmt_t(c.get('first_s'))} | "
                       f"{_fmt_t(c.get('total_s'))} |"
                       + ("" if c.get("status") == "ok" else f" {c.get('status')}"))
    out.append("")
    out += ["#### Tightness: epsilon at delta = 1e-5 (relative to the reference)", "",
            "Reference: Gaussian = exact mu-GDP value (mpmath, independent of dpcert); Laplace / DP-SGD / "
            "schedule = dpcert's certified lower bound (the true epsilon of the worst-case pair lies between "
            "it and any valid upper bound; a value below it is not a valid bound; where dpcert's own bracket "
            "is wide, the percentages overstate every library's looseness).", ""]
    for sec in ("gaussian", "laplace", "dpsgd", "schedule"):
        if any(t["section"] == sec for t in tasks):
            out.append(f"*{sec}*")
            out.append("")
            table(sec, "eps")
    ts = [t for t in tasks if t["section"] == "step_loop"]
    if ts:
        out += [f"#### Training loop: {ts[0]['label']}", "", "| library | calls done | loop time | "
                "per call | query result |", "|---|---|---|---|---|"]
        for lib in libs:
            r = res[lib].get(ts[0]["id"])
            if not r or r.get("status") != "ok":
                out.append(f"| {lib} | {r.get('status') if r else 'n/a'} | | | |")
                continue
            calls, loop = r.get("calls", 0), r.get("loop_s", 0.0)
            per = loop / calls if calls else None
            n = ts[0]["params"]["n"]
            note = "" if calls == n else f" (stopped after the time limit; extrapolated {_fmt_t(per * n)})"
            v = _num(r.get("value"))
            out.append(f"| {lib} | {calls}{note} | {_fmt_t(loop)} | {_fmt_t(per)} | "
                       f"{'-' if v is None else f'{v:.6g}'} |")
        out.append("")
    ts = [t for t in tasks if t["section"] == "calibration"]
    if ts:
        out += [f"#### Calibration: {ts[0]['label']}", "", "| library | time | sigma | dpcert certified eps "
                "at that sigma |", "|---|---|---|---|"]
        mine = res.get("dpcert", {}).get(ts[0]["id"], {})
        base = mine.get("warm_s", mine.get("first_s"))
        for lib in libs:
            r = res[lib].get(ts[0]["id"])
            if not r or r.get("status") != "ok":
                out.append(f"| {lib} | {_cell_time(r, None)} | | |")
                continue
            e = r.get("dpcert_eps_at_sigma")
            out.append(f"| {lib} | {_cell_time(r, base if lib != 'dpcert' else None)} | {r['value']:.6g} | "
                       f"{'-' if e is None else f'{e:.6g}'} |")
        out.append("")
    ts = [t for t in tasks if t["section"] == "robustness"]
    for t in ts:
        out += [f"#### Robustness: {t['label']}", "",
                "| delta | " + " | ".join(libs) + " |", "|---|" + "---|" * len(libs)]
        for j, d in enumerate(t["params"]["deltas"]):
            cells = []
            for lib in libs:
                r = res[lib].get(t["id"])
                if not r or r.get("status") != "ok":
                    cells.append(r.get("status", "n/a") if r else "n/a")
                else:
                    v = _num(r["value"][j])
                    cells.append(f"{v:.6g}" if isinstance(v, (int, float)) else str(v))
            out.append(f"| {d:g} | " + " | ".join(cells) + " |")
        out.append("")
    if doc.get("plugins"):
        pl = doc["plugins"]
        out += ["#### Data-adaptive plug-ins registered in this run", "",
                "Registered: " + (", ".join(pl["registered"]) or "none") + ". Benchmarked: "
                + (", ".join(pl["benchmarked"]) or "none") + ". Registered without an example: "
                + (", ".join(pl["no_example"]) or "none") + ". Expected but absent: "
                + (", ".join(pl["absent"]) or "none") + ".", ""]
        ts = [t for t in tasks if t["section"] == "plugins"]
        if ts:
            out += ["| mechanism | certified eps (delta=1e-5) | method | routes | lower bound | time |",
                    "|---|---|---|---|---|---|"]
            for t in ts:
                r = res.get("dpcert", {}).get(t["id"], {})
                if r.get("status") != "ok":
                    out.append(f"| {t['label']} | {r.get('status')}: {r.get('error', '')} | | | | |")
                    continue
                routes = ", ".join(f"{k} {float(_num(v)):.5g}" for k, v in r.get("routes", {}).items())
                lo = r.get("lower")
                out.append(f"| {t['label']} | {_num(r['value']):.6g} | {r.get('method')} | {routes} | "
                           f"{'-' if lo is None else f'{_num(lo):.6g}'} | {_cell_time(r, None)} |")
            out.append("")
    out += ["#### Failures (crashes, inf/NaN, negative or below the certified lower bound, non-monotone, "
            "unsafe calibration, timeouts, warnings)", ""]
    for lib in libs:
        fl = doc["failures"].get(lib, [])
        out.append(f"- **{lib}**: " + ("none" if not fl else f"{len(fl)}"))
        out += [f"  - {f}" for f in fl]
    out.append("")
    if doc.get("audit"):
        from accountant.audit import AuditResult, format_table

        out += ["#### Audit of the shipped published claims "
                "(`dpcert audit`, the claims in `accountant/claims/published.json`)", ""]
        rs = [AuditResult(**{**a, **{k: _num(a[k]) for k in ("upper", "lower", "slack", "numerical_error",
                                                             "claimed_epsilon")},
                             "candidates": {k: _num(v) for k, v in a.get("candidates", {}).items()}})
              for a in doc["audit"]]
        out.append(format_table(rs, markdown=True))
    return "\n".join(out) + "\n"


# ----------------------------------------------------------------------------------------- main
def run(quick: bool = True, out_dir: str | Path | None = None, use_peers: bool = True,
        only: list[str] | None = None, timeout_s: float | None = None, audit: bool | None = None,
        progress: Callable[[str], None] = _progress_default) -> dict:
    """Run the suite, write ``results[_quick].json`` and ``README_table[_quick].md``; return the document."""
    t_start = time.perf_counter()
    cfg = Config.make(quick, timeout_s)
    from accountant.audit import load_mechanism_plugins
    from mechanisms import registry

    broken = load_mechanism_plugins()
    registered = registry.available()
    plugin_names = [n for n in registered if n not in CORE_MECHANISMS]
    avail = availability()
    missing = [p for p in PEERS if not avail.get(p)]
    libs = ["dpcert"] + ([p for p in PEERS if avail.get(p)] if use_peers else [])
    progress(f"[bench] mode={'quick' if quick else 'full'}; libraries: {', '.join(libs)}; missing peers: "
             f"{', '.join(missing) or 'none'}" + ("" if use_peers else " (peers disabled)"))
    tasks = build_tasks(cfg, plugin_names)
    if only:
        tasks = [t for t in tasks if t["section"] in only]
    results: dict[str, dict] = {}
    imports: dict[str, list[float]] = {}
    for lib in libs:
        mine = [t for t in tasks if supports(lib, t["kind"])]
        if not mine:
            continue
        imports[lib], results[lib] = run_worker(lib, mine, cfg.timeout_s, progress=progress)
    cold: dict[str, dict] = {}
    if not only or "cold" in only:
        qq, s, tt = DPSGD_SETTINGS[2] if quick else DPSGD_SETTINGS[1]
        ctask = {"id": "cold", "section": "cold", "kind": "dpsgd_eps", "label": f"q={qq} sigma={s} T={tt}",
                 "params": {"q": qq, "sigma": s, "steps": tt, "delta": 1e-5}}
        for lib in (libs[:1] if quick else libs):
            progress(f"[bench] {lib}: cold start ...")
            imp, r = run_worker(lib, [ctask], cfg.timeout_s, cold=True, progress=lambda _: None)
            rr = r.get("cold", {})
            cold[lib] = {"status": rr.get("status"), "import_s": imp[0] if imp else None,
                         "first_s": rr.get("first_s"), "task": ctask["label"]}
            if imp and isinstance(rr.get("first_s"), float):
                cold[lib]["total_s"] = imp[0] + rr["first_s"]
            progress(f"[bench] {lib}: cold start {cold[lib].get('total_s', '-')} s")
    refs, fails = analyse(tasks, results, progress)
    for lib, c in cold.items():
        if c.get("status") not in ("ok", None):
            fails.setdefault(lib, []).append(f"cold start: {c.get('status')}")
    audit_rows = []
    if audit if audit is not None else (not quick and not only):
        from accountant.audit import PUBLISHED_CLAIMS, audit_claims, load_claims

        progress("[bench] auditing the published claims ...")
        audit_rows = [r.to_dict() for r in audit_claims(load_claims(PUBLISHED_CLAIMS),
                                                         progress=progress)]
    versions = {lib: avail.get(lib) for lib in LIBRARIES}
    doc = {
        "format": "dpcert-benchmark", "version": 1,
        "meta": {"quick": quick, "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                 "python": platform.python_version(), "revision": source_revision(),
                 "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
                 "versions": {k: v for k, v in versions.items() if not k.startswith("opacus_") or
                              k == "opacus_rdp"},
                 "missing": missing, "peers_enabled": use_peers, "timeout_s": cfg.timeout_s,
                 "broken_plugin_modules": broken, "seconds": None},
        "tasks": tasks, "results": results, "imports": imports, "cold": cold, "references": refs,
        "failures": fails, "audit": audit_rows,
        "plugins": {"registered": plugin_names,
                    "benchmarked": [t["label"] for t in tasks if t["section"] == "plugins"],
                    "no_example": [n for n in plugin_names if n not in PLUGIN_EXAMPLES],
                    "absent": [n for n in PLUGIN_EXAMPLES if n not in registered]},
    }
    if "opacus_rdp" in doc["meta"]["versions"]:
        doc["meta"]["versions"]["opacus"] = doc["meta"]["versions"].pop("opacus_rdp")
    doc["meta"]["seconds"] = round(time.perf_counter() - t_start, 1)
    out_dir = Path(out_dir) if out_dir is not None else ROOT / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if quick else ""
    (out_dir / f"results{suffix}.json").write_text(json.dumps(_sanitize(doc), indent=1, default=str,
                                                              allow_nan=False) + "\n")
    (out_dir / f"README_table{suffix}.md").write_text(markdown_report(doc))
    progress(f"[bench] done in {doc['meta']['seconds']} s; wrote {out_dir / f'results{suffix}.json'} and "
             f"{out_dir / f'README_table{suffix}.md'}")
    return doc
