"""``dpcert audit``, ``dpcert bench`` and ``dpcert plot`` subcommands.

Examples::

    dpcert audit                        # the shipped published claims; exit 1 if one is understated
    dpcert audit claims.toml --json > audit.json
    dpcert bench --quick                                      # benchmark suite (python -m benchmarks)
    dpcert plot --sample-rate 0.01 --sigma 1.1 --steps 10000 --delta 1e-5 --out plots/
    dpcert plot --sample-rate 0.01 --sigma 1.1 --steps 6000 --kinds report --every 100   # per epoch
"""

from __future__ import annotations

import argparse
import sys

from . import cli, plots
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


def _plot_arguments(p: argparse.ArgumentParser) -> None:
    """Options of ``dpcert plot``."""
    p.add_argument("--mechanism", "-m", help="mechanism name (with --<param> value ...); default: DP-SGD")
    p.add_argument("--times", "-k", type=int, help="number of compositions (with --mechanism)")
    p.add_argument("--sigma", "--noise-multiplier", dest="sigma", type=float, help="DP-SGD noise multiplier")
    p.add_argument("--sample-rate", "-q", type=float, help="DP-SGD Poisson sample rate")
    p.add_argument("--steps", "-T", type=int, help="DP-SGD steps")
    p.add_argument("--delta", type=float, default=1e-5, help="delta for epsilon plots (default 1e-5)")
    p.add_argument("--out", default="plots", help="output directory (default ./plots)")
    p.add_argument("--formats", nargs="+", default=["png", "svg"], choices=["png", "svg", "pdf"],
                   help="image formats (default png svg)")
    p.add_argument("--kinds", nargs="+", default=None, choices=list(plots.KINDS),
                   help="which plots (default: " + " ".join(plots.DEFAULT_KINDS) + "); 'report' draws the "
                        "certified trajectory (upper and lower bound after every --every compositions)")
    p.add_argument("--every", type=cli.integer, metavar="N",
                   help="compositions per epoch of the 'report' plot (default: --points counts spread "
                        "over the run)")
    p.add_argument("--points", type=int, default=12, help="points per curve (default 12)")
    p.add_argument("--relation", default="add_remove", choices=["add_remove", "replace_one"],
                   help="neighbouring relation (default add_remove)")


def _plot_main(args: argparse.Namespace, extra: list[str]) -> int:
    """``dpcert plot`` (options: :func:`_plot_arguments`)."""
    plots._figure()  # fail early and clearly when matplotlib is missing
    if args.mechanism:
        # --sigma / --sample-rate given with --mechanism are that mechanism's own parameters
        extra = list(extra)
        for opt, val in (("--sigma", args.sigma), ("--sample-rate", args.sample_rate)):
            if val is not None:
                extra += [opt, repr(val)]
        if args.steps is not None:
            raise cli.CLIError("with --mechanism give the number of compositions as --times")
        mech = cli._mechanism_from_args(args.mechanism, extra)
        times = args.times if args.times is not None else 1
        prefix = mech.name
    else:
        if extra:
            raise cli.CLIError(f"unexpected arguments {extra}")
        if args.sigma is None or args.sample_rate is None or args.steps is None:
            raise cli.CLIError("give --sigma, --sample-rate and --steps (DP-SGD) or --mechanism NAME")
        from mechanisms.subsampled import SubsampledGaussian

        mech = SubsampledGaussian(sigma=args.sigma, sample_rate=args.sample_rate)
        times = args.steps
        prefix = "dpsgd"
    if times < 1:
        raise cli.CLIError("need at least one composition")
    if args.points < 2:
        raise cli.CLIError("--points must be >= 2")
    kinds = list(plots.DEFAULT_KINDS) if args.kinds is None else args.kinds
    if args.every is not None:
        if "report" not in kinds:
            raise cli.CLIError("--every sets the epochs of the trajectory plot: add --kinds report")
        if args.every < 1:
            raise cli.CLIError(f"--every must be a positive number of compositions, got {args.every}")

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    paths = plots.make_plots(mech, times, args.delta, args.out, args.formats, kinds, args.points,
                             args.relation, prefix, progress, every=args.every)
    for path in paths:
        print(path)
    return 0


def cmd_plot(args: argparse.Namespace, extra: list[str]) -> int:
    try:
        return _plot_main(args, extra)
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
    p = sub.add_parser("plot", help="plots: epsilon vs steps, privacy profile, RDP curve, f-DP trade-off, "
                                    "per-epoch certified trajectory (--kinds report --every N)")
    _plot_arguments(p)
    cli.COMMANDS.update(audit=cmd_audit, bench=cmd_bench, plot=cmd_plot)


cli._EXTRA_COMMANDS.append(_register)
