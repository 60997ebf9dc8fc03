"""``dpcert audit``, ``dpcert bench`` and ``dpcert plot`` subcommands.

Examples::

    dpcert audit                        # the shipped published claims; exit 1 if one is understated
    dpcert audit claims.toml --json > audit.json
    dpcert bench --quick                                      # benchmark suite (python -m benchmarks)
    dpcert plot --sample-rate 0.01 --sigma 1.1 --steps 10000 --delta 1e-5 --out plots/
"""

from __future__ import annotations

import argparse
import sys

from . import cli
from .audit import (
    PUBLISHED_CLAIMS,
    ClaimError,
    audit_claims,
    exit_code,
    format_table,
    load_claims,
    results_to_json,
)


def cmd_audit(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise cli.CLIError(f"unexpected arguments {extra}")
    try:
        claims = load_claims(args.claims or PUBLISHED_CLAIMS)
    except ClaimError as exc:
        raise cli.CLIError(str(exc)) from None
    if args.only:
        wanted = set(args.only)
        claims = [c for c in claims if c.get("id") in wanted]
        missing = wanted - {c.get("id") for c in claims}
        if missing:
            raise cli.CLIError(f"no claim with id {', '.join(sorted(missing))}")
    quiet = args.quiet or getattr(args, "quiet_global", False)
    progress = None if quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        results = audit_claims(claims, progress=progress)
    except ClaimError as exc:
        raise cli.CLIError(str(exc)) from None
    if args.json:
        print(results_to_json(results))
    else:
        print(format_table(results, markdown=args.markdown), end="")
    return exit_code(results)


BENCH_FROM_SOURCE = ("the benchmark suite runs from a source checkout of dpcert: "
                     "'git clone <dpcert repository> && cd dpcert && python -m benchmarks --quick' "
                     "(it is not part of the installed package)")


def _source_benchmarks():
    """The ``benchmarks`` package of the source tree this ``accountant`` was imported from, or None.

    Never imports an unrelated top-level ``benchmarks`` package from elsewhere on ``sys.path``.
    """
    import importlib
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    src = root / "benchmarks"
    if not (src / "__main__.py").is_file() or not (src / "suite.py").is_file():
        return None
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    try:
        mod = importlib.import_module("benchmarks.__main__")
    except ModuleNotFoundError:
        return None
    if Path(mod.__file__).resolve().parent != root / "benchmarks":
        return None
    return mod


def bench_passthrough(argv: list[str]) -> int:
    """``dpcert bench ARGS`` == ``python -m benchmarks ARGS`` (from a source checkout only)."""
    mod = _source_benchmarks()
    if mod is None:
        if argv and argv[0] in ("-h", "--help"):
            print(f"usage: dpcert bench [python -m benchmarks options]\n\n{BENCH_FROM_SOURCE}.")
            return 0
        raise cli.CLIError(BENCH_FROM_SOURCE)
    try:
        return mod.main(list(argv))
    except SystemExit as exc:  # argparse of the suite: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2


def cmd_bench(args: argparse.Namespace, extra: list[str]) -> int:
    return bench_passthrough(list(args.bench_args) + list(extra))


def cmd_plot(args: argparse.Namespace, extra: list[str]) -> int:
    try:
        from . import plots
    except ModuleNotFoundError as exc:  # pragma: no cover
        raise cli.CLIError(f"the plotting module is not installed ({exc})") from None
    try:
        return plots.cli_main(args, extra)
    except plots.MissingMatplotlib as exc:
        raise cli.CLIError(str(exc)) from None


def _register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("audit", help="check published (epsilon, delta) claims against certificates")
    a.add_argument("claims", nargs="?", default=None,
                   help="claims file (.json, or .toml); default: the published claims shipped with dpcert")
    a.add_argument("--json", action="store_true", help="machine-readable output")
    a.add_argument("--markdown", action="store_true", help="markdown table")
    a.add_argument("--only", nargs="+", metavar="ID", help="audit only these claim ids")
    a.add_argument("--quiet", "-q", action="store_true", help="no progress lines on stderr")
    a.epilog = "Exit code: 0 all claims consistent, 1 a claim is understated, 2 invalid input."
    b = sub.add_parser("bench", help="benchmark suite, from a source checkout (same options as "
                                     "'python -m benchmarks': --quick, --only, --out, ...)",
                       add_help=False)
    b.add_argument("bench_args", nargs=argparse.REMAINDER,
                   help="options of 'python -m benchmarks' (see 'dpcert bench --help')")
    cli.PASSTHROUGH["bench"] = bench_passthrough
    p = sub.add_parser("plot", help="plots: epsilon vs steps, privacy profile, RDP curve, f-DP trade-off")
    try:
        from .plots import add_arguments
    except ModuleNotFoundError:  # pragma: no cover - installed without the benchmarks package
        pass
    else:
        add_arguments(p)
    cli.COMMANDS.update(audit=cmd_audit, bench=cmd_bench, plot=cmd_plot)


cli._EXTRA_COMMANDS.append(_register)
