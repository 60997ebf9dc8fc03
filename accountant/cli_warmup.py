"""``dpcert warmup``: compile (or load) the numba kernels once after an install (:mod:`accountant.warmup`)."""

from __future__ import annotations

import argparse

from . import cli, warmup


def cmd_warmup(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise cli.CLIError(f"unrecognized arguments: {' '.join(extra)}")
    return warmup.run(quiet=bool(args.quiet or getattr(args, "quiet_global", False)))


def _register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("warmup", help="compile the numerical kernels once (after an install)",
                       description=warmup.__doc__.split("\n\n")[1])
    cli._quiet(p)
    cli.COMMANDS["warmup"] = cmd_warmup


cli._EXTRA_COMMANDS.append(_register)
