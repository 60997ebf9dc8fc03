"""``dpcert report``: the certified epsilon trajectory of a run (e.g. per epoch), as a table, JSON or plot."""

from __future__ import annotations

import argparse

from . import cli
from .privacy_accountant import METHODS, PrivacyAccountant


def _run_accountant(args: argparse.Namespace, extra: list[str]) -> PrivacyAccountant:
    if args.mechanism:
        # --sigma / --sample-rate given with --mechanism are that mechanism's own parameters
        if args.steps is not None:
            raise cli.CLIError("with --mechanism give the number of compositions as --times")
        extra = list(extra)
        for opt, val in (("--sigma", args.sigma), ("--sample-rate", args.sample_rate)):
            if val is not None:
                extra += [opt, repr(float(val))]
        return cli._accountant(args, extra)
    dpsgd = any(v is not None for v in (args.sigma, args.sample_rate, args.steps))
    if dpsgd:
        if args.state or args.mechanism or extra:
            raise cli.CLIError("give a DP-SGD run (--sigma, --sample-rate, --steps), --mechanism or --state")
        if args.sigma is None or args.sample_rate is None or args.steps is None:
            raise cli.CLIError("a DP-SGD run needs --sigma, --sample-rate and --steps")
        return PrivacyAccountant().step(sigma=args.sigma, sample_rate=args.sample_rate, steps=args.steps)
    return cli._accountant(args, extra)


def cmd_report(args: argparse.Namespace, extra: list[str]) -> int:
    acct = _run_accountant(args, extra)
    if (args.every is None) == (args.at is None):
        raise cli.CLIError("give --every N (compositions per epoch) or --at T1 T2 ...")
    rep = acct.report(delta=args.delta, every=args.every, steps=args.at, method=args.method)
    print(rep.to_json() if args.json else rep)
    if args.plot:
        rep.plot(args.plot)
        if not args.json:
            print(f"plot written to {args.plot}")
    return 0


def _register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="certified epsilon after every epoch (or given step counts) of a run",
                       epilog=cli.MECHANISM_HELP,
                       description="The certified epsilon(delta) trajectory of a run: after every --every "
                                   "compositions (one epoch) and at the end, or at the counts given with "
                                   "--at.  The run is a DP-SGD run (--sigma, --sample-rate, --steps), "
                                   "--times uses of --mechanism, or a saved --state (whose composition "
                                   "order is the ledger's).  Each point is a certified upper bound.")
    cli._common(p)
    p.add_argument("--sigma", "--noise-multiplier", dest="sigma", type=cli.number,
                   help="DP-SGD noise multiplier")
    p.add_argument("--sample-rate", type=cli.number, help="DP-SGD Poisson sample rate")
    p.add_argument("--steps", "-T", type=cli.integer, help="DP-SGD steps")
    p.add_argument("--delta", type=cli.number, required=True, help="target delta in (0, 1)")
    p.add_argument("--every", type=cli.integer, metavar="N", help="compositions per epoch (a point every N)")
    p.add_argument("--at", type=cli.integer, nargs="+", metavar="T", help="step counts to report at")
    p.add_argument("--method", default="auto", choices=METHODS, help="conversion route (default auto)")
    p.add_argument("--plot", metavar="FILE", help="also draw the trajectory to FILE (.png/.svg/.pdf; "
                                                  "needs matplotlib)")
    cli.COMMANDS["report"] = cmd_report


cli._EXTRA_COMMANDS.append(_register)
