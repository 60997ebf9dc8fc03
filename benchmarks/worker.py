"""Benchmark worker: runs one library's tasks in a fresh process and reports JSON lines on stdout.

``python -m benchmarks.worker LIB [--cold]`` reads a JSON list of tasks on stdin.  Protocol lines start
with ``@@BENCH `` (libraries may print their own output):

* ``{"event": "import", "seconds": s}`` -- time to import the library (the adapter's constructor);
* ``{"event": "start", "i": i}`` then ``{"event": "result", "i": i, ...}`` per task.

Timing: ``first_s`` is the first call of the task in this process; ``warm_s`` the median of repeated
calls after it (each call rebuilds the accountant: a full query, never a cached answer).  Warnings raised
by the library are recorded, exceptions are reported as crashes (the worker goes on).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import warnings

MARK = "@@BENCH "


def emit(obj: dict) -> None:
    sys.stdout.write(MARK + json.dumps(obj, default=_jsonable) + "\n")
    sys.stdout.flush()


def _jsonable(x):
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, tuple)):
        return list(x)
    return str(x)


def _clean(v):
    """JSON-safe numbers (inf/nan as strings)."""
    if isinstance(v, float):
        if v != v:
            return "nan"
        if v in (float("inf"), float("-inf")):
            return "inf" if v > 0 else "-inf"
        return v
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if hasattr(v, "item"):
        return _clean(v.item())
    return v


def run_task(adapter, task: dict) -> dict:
    from benchmarks.peers import NotApplicable

    kind, params = task["kind"], dict(task.get("params", {}))
    fn = getattr(adapter, kind, None)
    if fn is None:
        return {"status": "n/a"}
    if kind == "step_loop":
        params["clock"] = time.perf_counter
    caught: list[str] = []
    with warnings.catch_warnings(record=True) as wlist:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        try:
            out = fn(**params)
        except NotApplicable:
            return {"status": "n/a"}
        except Exception as exc:  # noqa: BLE001 - a peer's crash is a result
            return {"status": "crash", "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                    "first_s": time.perf_counter() - t0,
                    "warnings": sorted({str(w.message)[:160] for w in wlist})[:5]}
        first = time.perf_counter() - t0
        warm: list[float] = []
        budget, max_first = task.get("warm_budget_s", 1.0), task.get("warm_max_first_s", 10.0)
        if kind != "step_loop" and first <= max_first:
            t_start = time.perf_counter()
            while len(warm) < 20 and (not warm or time.perf_counter() - t_start < budget):
                t1 = time.perf_counter()
                fn(**params)
                warm.append(time.perf_counter() - t1)
        caught = sorted({f"{w.category.__name__}: {str(w.message)[:160]}" for w in wlist})[:5]
    res = {"status": "ok", "first_s": first, "warnings": caught}
    if warm:
        res.update(warm_s=statistics.median(warm), n_warm=len(warm))
    res.update({k: _clean(v) for k, v in out.items()})
    return res


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    lib, cold = argv[0], "--cold" in argv
    tasks = json.loads(sys.stdin.read())
    t0 = time.perf_counter()
    from benchmarks.peers import LIBRARIES

    adapter = LIBRARIES[lib]()
    emit({"event": "import", "seconds": time.perf_counter() - t0})
    for i, task in enumerate(tasks):
        emit({"event": "start", "i": i})
        if cold:
            task = dict(task, warm_max_first_s=-1.0)
        emit({"event": "result", "i": i, **run_task(adapter, task)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
