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
import math
import os
import re
import sys
from collections.abc import Callable, Sequence

from mechanisms import registry

from ._version import __version__
from .privacy_accountant import METHODS, PrivacyAccountant

COMMANDS: dict[str, Callable[[argparse.Namespace, list[str]], int]] = {}


class CLIError(Exception):
    pass


# a negative number (also -1e-5, -.5, -inf, -nan) is a value, never an option
_NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|infinity|nan)$", re.IGNORECASE)


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error message (exit 2) and negative numbers accepted as values."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER

    def error(self, message: str):
        one_line = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {one_line} (see '{self.prog} --help')\n")


class Number(float):
    """A float that remembers the text it was parsed from (exact arithmetic on user input)."""

    text: str

    def __new__(cls, text: str):
        try:
            self = super().__new__(cls, text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        self.text = text.strip()
        return self


def number(text: str) -> Number:
    return Number(text)


def integer(text: str) -> int:
    """An integer typed as digits (10**30 is fine: the range check comes later and names the option)."""
    t = text.strip().replace("_", "")
    if re.fullmatch(r"[-+]?\d+", t):
        digits = t.lstrip("+-")
        if len(digits) > 100:  # far out of any valid range (and beyond int()'s digit limit)
            return (-1 if t.startswith("-") else 1) * 10**100
        return int(t)
    try:  # 1e6, 2.0: integral decimals
        x = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not math.isfinite(x) or not x.is_integer():
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}")
    return int(x)


def progress_printer(args: argparse.Namespace, force: bool = False) -> Callable[[str], None] | None:
    """A line printer on stderr for long work: on when stderr is a terminal (or ``force``), off with -q."""
    if getattr(args, "quiet", False) or getattr(args, "quiet_global", False):
        return None
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not (tty or force):
        return None
    return lambda line: print(line, file=sys.stderr, flush=True)


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
        if key in params:
            raise CLIError(f"parameter --{key} given twice")
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
        return apply_time_limit(PrivacyAccountant.load(args.state), args)
    if not args.mechanism:
        raise CLIError("give --mechanism NAME (see 'dpcert mechanisms') or --state FILE")
    acct = apply_time_limit(PrivacyAccountant(relation=args.relation), args)
    acct.compose(_mechanism_from_args(args.mechanism, extra), args.times)
    return acct


def _emit(args: argparse.Namespace, cert) -> None:
    if args.json:
        print(cert.to_json())
        return
    print(cert)
    if getattr(args, "compare", False) and cert.candidates:
        what = "epsilon" if cert.query == "epsilon" else "delta"
        fmt = "{:.6g}" if what == "epsilon" else "{:.6g}"
        print(f"certified upper bounds on {what} by route (the certificate uses {cert.method}):")
        for name, val in sorted(cert.candidates.items(), key=lambda kv: (kv[1], kv[0])):
            mark = "  <- certificate" if name == cert.method else ""
            print(f"  {name:12s} {fmt.format(val)}{mark}")


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
        print(json.dumps({"alpha": [_json_num(float(a)) for a in args.alpha],
                          "rdp": [_json_num(float(v)) for v in vals]}))
    else:
        print(f"{'alpha':>12}  {'RDP epsilon(alpha)':>20}")
        for a, v in zip(args.alpha, vals, strict=True):
            print(f"{a:>12g}  {v:>20.10g}")
    return 0


def _json_num(x):
    """JSON has no inf/nan: they are written as the strings "inf", "-inf", "nan"."""
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return x


def mechanism_table() -> list[dict]:
    """Every registered mechanism: name, constructor parameters (with defaults) and a one-line summary."""
    out = []
    for name in registry.available():
        cls = registry.get(name)
        params = []
        if dataclasses.is_dataclass(cls):
            for f in dataclasses.fields(cls):
                item = {"name": f.name, "required": f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING}
                if f.default is not dataclasses.MISSING:
                    d = f.default
                    item["default"] = _json_num(d) if isinstance(d, (bool, int, float, str, type(None))) \
                        else repr(d)
                params.append(item)
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        out.append({"name": name, "parameters": params, "routes": mechanism_routes(cls), "description": doc})
    return out


def mechanism_routes(cls) -> list[str]:
    """The routes (``method=`` names) that apply to one use of a representative instance of ``cls``
    (``mechanisms.conformance.example``); from the class flags when no instance can be built."""
    from mechanisms.conformance import example

    from . import routes
    from .ledger import Ledger

    inst = example(cls)
    if inst is None:
        pld = getattr(cls, "pld_available", False) is True
        return ["cf", "pld", "rdp"] if pld else ["rdp"]
    led = Ledger()
    led.add(inst)
    return [r.name for r in routes.applicable(led) if r.name not in routes.AUTO_EXCLUDED]


def cmd_mechanisms(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise CLIError(f"unexpected arguments {extra}")
    table = mechanism_table()
    if args.json:
        print(json.dumps(table, indent=2, allow_nan=False))
        return 0
    for m in table:
        fields = [p["name"] + ("" if p["required"] or "default" not in p else f"={p['default']}")
                  for p in m["parameters"]]
        print(f"{m['name']:24s} {' '.join(fields):45s} [{','.join(m['routes'])}] {m['description']}")
    return 0


MECHANISM_HELP = """\
mechanism parameters:
  After --mechanism NAME, give each constructor parameter of that mechanism as
  '--<param> VALUE' (dashes or underscores: --sample-rate or --sample_rate); omitted
  parameters take their defaults.  'dpcert mechanisms' lists every mechanism with its
  parameters (NAME=default marks optional ones; --json for machine-readable output).
  A parameter whose name is also a query option (epsilon, delta) is spelled
  '--<param>-mech', e.g. --epsilon-mech 1 for randomized_response.  Values are read as
  integers, then floats, then true/false, else text.

examples:
  dpcert epsilon --mechanism gaussian --sigma 2 --times 100 --delta 1e-5
  dpcert epsilon -m subsampled_gaussian --sigma 1.1 --sample-rate 0.01 -k 1000 --delta 1e-5
  dpcert delta -m randomized_response --epsilon-mech 1 --times 20 --epsilon 3
  dpcert epsilon --state run.json --delta 1e-5 --compare
"""


def _common(p: argparse.ArgumentParser, mech: bool = True) -> None:
    if mech:
        p.add_argument("--mechanism", "-m", metavar="NAME",
                       help="registered mechanism name (list: 'dpcert mechanisms'); its parameters follow "
                            "as --<param> VALUE (see 'mechanism parameters' below)")
        p.add_argument("--times", "-k", type=integer, default=1, metavar="K",
                       help="number of times the mechanism is composed, integer in [0, 10^18] (default 1)")
        p.add_argument("--state", metavar="FILE",
                       help="query a saved accountant state file (PrivacyAccountant.save) instead of "
                            "--mechanism")
        p.add_argument("--relation", default="add_remove", choices=["add_remove", "replace_one"],
                       help="neighbouring relation (default add_remove)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    _quiet(p)


def _quiet(p: argparse.ArgumentParser, short: bool = True) -> None:
    flags = ["--quiet", "-q"] if short else ["--quiet"]
    p.add_argument(*flags, dest="quiet", action="store_true", help="no progress lines on stderr")


def _query_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--method", default="auto", choices=METHODS,
                   help="conversion route: auto (smallest certified bound over the valid routes; default), "
                        "cf (characteristic function), rdp / rdp_classic (Renyi DP), exact (closed form)")
    p.add_argument("--compare", action="store_true",
                   help=f"evaluate every valid route and show each route's certified {what} (with a fixed "
                        "--method the certificate stays that method's)")
    time_limit_option(p)


def time_limit_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--time-limit", type=number, default=None, metavar="SECONDS",
                   help="time limit of a --method auto query (default 2): past it the best certified "
                        "bracket so far is returned with a warning; 0 = no limit (the same answer on "
                        "every machine)")


def apply_time_limit(acct: PrivacyAccountant, args: argparse.Namespace) -> PrivacyAccountant:
    """Set ``--time-limit`` (if given) on ``acct``: seconds >= 0, 0 = no limit."""
    value = getattr(args, "time_limit", None)
    if value is not None:
        if not (value >= 0.0) or value > 1e6:
            raise CLIError(f"--time-limit must lie in [0, 1e6] seconds (0 = no limit), got {value!r}")
        acct.time_limit = None if value == 0.0 else float(value)
    return acct


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="dpcert", description="Certified differential-privacy accounting.",
               epilog="'dpcert COMMAND --help' explains each command.")
    p.add_argument("--version", action="version", version=f"dpcert {__version__}",
                   help="print the version and exit")
    p.add_argument("--quiet", "-q", dest="quiet_global", action="store_true",
                   help="no progress lines on stderr (any command)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    e = sub.add_parser("epsilon", help="certified epsilon for a delta", epilog=MECHANISM_HELP,
                       description="Certified epsilon (an upper bound) at a given delta for a composition.")
    _common(e)
    e.add_argument("--delta", type=number, required=True, help="target delta in (0, 1)")
    _query_options(e, "epsilon")
    d = sub.add_parser("delta", help="certified delta for an epsilon", epilog=MECHANISM_HELP,
                       description="Certified delta (an upper bound) at a given epsilon for a composition.")
    _common(d)
    d.add_argument("--epsilon", type=number, required=True, help="target epsilon >= 0")
    _query_options(d, "delta")
    r = sub.add_parser("rdp", help="composed RDP curve at given orders", epilog=MECHANISM_HELP,
                       description="Composed Renyi-DP curve (an upper bound) at the given orders.")
    _common(r)
    r.add_argument("--alpha", type=number, nargs="+", required=True, metavar="ALPHA",
                   help="Renyi orders > 1 (several allowed)")
    m = sub.add_parser("mechanisms", help="list the registered mechanisms and their parameters",
                       description="List every registered mechanism (built-in and plug-ins) with its "
                                   "constructor parameters; NAME=default marks optional ones.")
    _common(m, mech=False)
    COMMANDS.update(epsilon=cmd_epsilon, delta=cmd_delta, rdp=cmd_rdp, mechanisms=cmd_mechanisms)
    for extra_cmd in _EXTRA_COMMANDS:
        extra_cmd(sub)
    return p


# other modules add subcommands (dpsgd, calibrate, audit, bench, plot) through this hook
_EXTRA_COMMANDS: list[Callable[[argparse._SubParsersAction], None]] = []
# commands whose arguments are handed over unparsed: name -> function(list of arguments) -> exit code
PASSTHROUGH: dict[str, Callable[[list[str]], int]] = {}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _command_of(argv: list[str]) -> tuple[int, str | None]:
    """Index and name of the subcommand (the first word that is not a top-level option)."""
    for i, tok in enumerate(argv):
        if tok in ("-q", "--quiet"):
            continue
        return (i, tok) if not tok.startswith("-") else (i, None)
    return len(argv), None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``dpcert``: exit 0 on success, 2 on bad input (one line on stderr), 1 for audits
    that find an understated claim, 3 for an internal error."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _main(argv)
    except BrokenPipeError:  # e.g. 'dpcert mechanisms | head -3': the reader is gone, stop quietly
        _silence_stdout()
        return 0
    except KeyboardInterrupt:
        print("dpcert: interrupted", file=sys.stderr)
        return 130


def _silence_stdout() -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # pragma: no cover - stdout without a descriptor
        pass


def _main(argv: list[str]) -> int:
    import warnings

    _load_extensions()
    parser = build_parser()
    idx, name = _command_of(argv)
    if name in PASSTHROUGH:
        return _run(name, lambda: PASSTHROUGH[name](argv[idx + 1:]))
    try:
        args, extra = parser.parse_known_args(argv)
    except SystemExit as exc:  # --help, --version (0) or a usage error already printed (2)
        return exc.code if isinstance(exc.code, int) else 2
    if not args.command:
        parser.print_help()
        return 2

    def show(message, category, filename, lineno, file=None, line=None):
        print(f"dpcert {args.command}: warning: {_one_line(message)}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        return _run(args.command, lambda: COMMANDS[args.command](args, extra))


def _run(command: str, fn: Callable[[], int]) -> int:
    from .privacy_accountant import BudgetExceeded

    def fail(msg: str, code: int = 2) -> int:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        print(f"dpcert {command}: error: {msg}", file=sys.stderr)
        return code

    try:
        rc = fn()
        sys.stdout.flush()  # a closed pipe shows up here, not at interpreter exit
        return rc
    except BrokenPipeError:
        raise
    except (CLIError, ValueError, TypeError, ArithmeticError, RecursionError, BudgetExceeded) as exc:
        return fail(_one_line(exc))
    except OSError as exc:
        where = f" {exc.filename!r}" if exc.filename else ""
        return fail(f"{exc.strerror or _one_line(exc)}{':' if where else ''}{where}")
    except MemoryError:
        return fail("out of memory (the problem is too large)")
    except Exception as exc:
        if os.environ.get("DPCERT_TRACEBACK"):
            raise
        return fail(f"internal error ({type(exc).__name__}: {_one_line(exc)}); please report it "
                    "(DPCERT_TRACEBACK=1 shows the traceback)", 3)


def _load_extensions() -> None:
    import importlib

    for mod in ("accountant.cli_dpsgd", "accountant.cli_audit", "accountant.cli_ptr",
                "accountant.cli_report", "accountant.cli_warmup"):
        try:
            importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
