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
    progress = None if args.quiet else (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        results = audit_claims(claims, progress=progress)
    except ClaimError as exc:
        raise cli.CLIError(str(exc)) from None
    if args.json:
        print(results_to_json(results))
    else:
        print(format_table(results, markdown=args.markdown), end="")
    return exit_code(results)


def cmd_bench(args: argparse.Namespace, extra: list[str]) -> int:
    try:
        from benchmarks.__main__ import main as bench_main
    except ModuleNotFoundError as exc:  # pragma: no cover - installed without the benchmarks package
        raise cli.CLIError(f"the benchmark suite is not installed ({exc})") from None
    return bench_main(list(args.bench_args) + list(extra))


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
    b = sub.add_parser("bench", help="benchmark suite (same options as 'python -m benchmarks')",
                       add_help=False)
    b.add_argument("bench_args", nargs=argparse.REMAINDER)
    p = sub.add_parser("plot", help="plots: epsilon vs steps, privacy profile, RDP curve, f-DP trade-off")
    try:
        from .plots import add_arguments
    except ModuleNotFoundError:  # pragma: no cover - installed without the benchmarks package
        pass
    else:
        add_arguments(p)
    cli.COMMANDS.update(audit=cmd_audit, bench=cmd_bench, plot=cmd_plot)


cli._EXTRA_COMMANDS.append(_register)
