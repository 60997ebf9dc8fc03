"""``python -m benchmarks`` (also ``dpcert bench``): the tightness and speed suite.

    python -m benchmarks --quick          # < 2 minutes: a few cases per section
    python -m benchmarks                  # full run (tens of minutes with every peer installed)
    python -m benchmarks --no-peers       # dpcert only
    python -m benchmarks --only dpsgd gaussian --out /tmp/bench

Writes ``benchmarks/results/results.json`` and ``README_table.md`` (``results_quick.json`` /
``README_table_quick.md`` with ``--quick``).  Peers (autodp, dp-accounting, prv-accountant, Opacus) are
used when installed (``pip install 'dpcert[peers]'``; Opacus needs torch); missing ones are listed.
Progress goes to stderr.  See :mod:`benchmarks.suite` for what is measured.
"""

from __future__ import annotations

import argparse
import sys

SECTIONS = ("gaussian", "laplace", "dpsgd", "schedule", "step_loop", "calibration", "robustness", "plugins",
            "cold")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description="dpcert benchmark suite")
    p.add_argument("--quick", action="store_true", help="small run (< 2 minutes)")
    p.add_argument("--no-peers", action="store_true", help="benchmark dpcert alone")
    p.add_argument("--only", nargs="+", choices=SECTIONS, help="run only these sections")
    p.add_argument("--out", help="output directory (default benchmarks/results)")
    p.add_argument("--timeout", type=float, help="time limit per task, seconds (default 10 quick / 120 full)")
    p.add_argument("--audit", dest="audit", action="store_true", default=None,
                   help="also audit the published claims (default in the full run)")
    p.add_argument("--no-audit", dest="audit", action="store_false")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .suite import run

    doc = run(quick=args.quick, out_dir=args.out, use_peers=not args.no_peers, only=args.only,
              timeout_s=args.timeout, audit=args.audit)
    if doc["meta"]["missing"]:
        print(f"missing peers (not benchmarked): {', '.join(doc['meta']['missing'])} -- "
              "pip install 'dpcert[peers]' (and torch + opacus for Opacus)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
