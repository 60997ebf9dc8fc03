"""The ``dpcert`` command.

Examples::

    dpcert epsilon --mechanism gaussian --sigma 2 --times 100 --delta 1e-5
    dpcert delta --mechanism laplace --scale 1 --times 10 --epsilon 3 --json
    dpcert rdp --mechanism randomized_response --epsilon-mech 1 --alpha 2 8 32
    dpcert epsilon --state run.json --delta 1e-5
    dpcert mechanisms

Mechanism parameters are given as ``--<param> value`` with the names of the mechanism's constructor
(dashes or underscores); ``dpcert mechanisms`` lists them.  A parameter that is also a query option
(``epsilon``/``delta``) is spelled ``--<param>-mech`` (e.g. ``--epsilon-mech 1`` for
``randomized_response``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Sequence

from mechanisms import registry

from ._version import __version__
from .privacy_accountant import METHODS, PrivacyAccountant

COMMANDS: dict[str, Callable[[argparse.Namespace, list[str]], int]] = {}


class CLIError(Exception):
    pass


def _coerce(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def _mechanism_from_args(name: str, extra: list[str]):
    cls = registry.get(name)
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    params: dict = {}
    i = 0
    while i < len(extra):
        tok = extra[i]
        if not tok.startswith("--") or i + 1 >= len(extra):
            raise CLIError(f"unexpected argument {tok!r}; mechanism parameters are '--name value'")
        key = tok[2:].replace("-", "_")
        if key.endswith("_mech"):
            key = key[: -len("_mech")]
        if key not in fields:
            raise CLIError(f"mechanism {name!r} has no parameter {key!r}; parameters: "
                           f"{', '.join(sorted(fields))}")
        params[key] = _coerce(extra[i + 1])
        i += 2
    try:
        return cls.from_params(params)
    except TypeError as exc:
        raise CLIError(f"bad parameters for {name!r}: {exc}") from None


def _accountant(args: argparse.Namespace, extra: list[str]) -> PrivacyAccountant:
    if args.state:
        if args.mechanism or extra:
            raise CLIError("give either --state or --mechanism, not both")
        return PrivacyAccountant.load(args.state)
    if not args.mechanism:
        raise CLIError("give --mechanism NAME (see 'dpcert mechanisms') or --state FILE")
    acct = PrivacyAccountant(relation=args.relation)
    acct.compose(_mechanism_from_args(args.mechanism, extra), args.times)
    return acct


def _emit(args: argparse.Namespace, cert) -> None:
    if args.json:
        print(cert.to_json())
    else:
        print(cert)


def cmd_epsilon(args: argparse.Namespace, extra: list[str]) -> int:
    acct = _accountant(args, extra)
    _emit(args, acct.certificate(delta=args.delta, method=args.method, compare=args.compare))
    return 0


def cmd_delta(args: argparse.Namespace, extra: list[str]) -> int:
    acct = _accountant(args, extra)
    _emit(args, acct.certificate(epsilon=args.epsilon, method=args.method, compare=args.compare))
    return 0


def cmd_rdp(args: argparse.Namespace, extra: list[str]) -> int:
    acct = _accountant(args, extra)
    vals = acct.rdp(args.alpha)
    if args.json:
        print(json.dumps({"alpha": list(map(float, args.alpha)), "rdp": [float(v) for v in vals]}))
    else:
        print(f"{'alpha':>12}  {'RDP epsilon(alpha)':>20}")
        for a, v in zip(args.alpha, vals, strict=True):
            print(f"{a:>12g}  {v:>20.10g}")
    return 0


def cmd_mechanisms(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise CLIError(f"unexpected arguments {extra}")
    for name in registry.available():
        cls = registry.get(name)
        fields = ([f"{f.name}" + ("" if f.default is dataclasses.MISSING else f"={f.default}")
                   for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else [])
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        print(f"{name:24s} {' '.join(fields):45s} {doc}")
    return 0


def _common(p: argparse.ArgumentParser, mech: bool = True) -> None:
    if mech:
        p.add_argument("--mechanism", "-m", help="mechanism name (see 'dpcert mechanisms')")
        p.add_argument("--times", "-k", type=int, default=1, help="number of compositions (default 1)")
        p.add_argument("--state", help="query a saved accountant state file instead")
        p.add_argument("--relation", default="add_remove", choices=["add_remove", "replace_one"])
    p.add_argument("--json", action="store_true", help="machine-readable output")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpcert", description="Certified differential-privacy accounting.")
    p.add_argument("--version", action="version", version=f"dpcert {__version__}")
    sub = p.add_subparsers(dest="command")
    e = sub.add_parser("epsilon", help="certified epsilon for a delta")
    _common(e)
    e.add_argument("--delta", type=float, required=True, help="target delta in (0, 1)")
    e.add_argument("--method", default="auto", choices=METHODS)
    e.add_argument("--compare", action="store_true",
                   help="with --method auto, evaluate every valid route (listed in 'candidates')")
    d = sub.add_parser("delta", help="certified delta for an epsilon")
    _common(d)
    d.add_argument("--epsilon", type=float, required=True, help="target epsilon >= 0")
    d.add_argument("--method", default="auto", choices=METHODS)
    d.add_argument("--compare", action="store_true",
                   help="with --method auto, evaluate every valid route (listed in 'candidates')")
    r = sub.add_parser("rdp", help="composed RDP curve at given orders")
    _common(r)
    r.add_argument("--alpha", type=float, nargs="+", required=True, help="Renyi orders > 1")
    m = sub.add_parser("mechanisms", help="list the registered mechanisms and their parameters")
    _common(m, mech=False)
    COMMANDS.update(epsilon=cmd_epsilon, delta=cmd_delta, rdp=cmd_rdp, mechanisms=cmd_mechanisms)
    for extra_cmd in _EXTRA_COMMANDS:
        extra_cmd(sub)
    return p


# other modules add subcommands (dpsgd, calibrate, audit, bench, plot) through this hook
_EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []


def main(argv: Sequence[str] | None = None) -> int:
    _load_extensions()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return COMMANDS[args.command](args, extra)
    except (CLIError, ValueError, TypeError) as exc:
        print(f"dpcert {args.command}: error: {exc}", file=sys.stderr)
        return 2


def _load_extensions() -> None:
    import importlib

    for mod in ("accountant.cli_dpsgd", "accountant.cli_audit", "accountant.cli_ptr"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
