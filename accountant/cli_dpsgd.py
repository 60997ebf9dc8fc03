"""``dpcert dpsgd`` and ``dpcert calibrate`` subcommands (DP-SGD; ``--sampling`` picks the batch sampler)."""

from __future__ import annotations

import argparse
import json
import math
from fractions import Fraction

from mechanisms import validation as V

from . import cli
from .calibration import calibrate_sigma, max_sample_rate, max_steps
from .privacy_accountant import METHODS, PrivacyAccountant


def _exact(x: float) -> Fraction:
    """The number the user typed (``cli.Number`` keeps the text), as an exact fraction."""
    text = getattr(x, "text", None)
    try:
        return Fraction(text) if text is not None else Fraction(x)
    except (ValueError, ZeroDivisionError):
        return Fraction(x)


def _rate_and_steps(args: argparse.Namespace) -> tuple[float | None, int | None, str | None]:
    """Sample rate q, number of steps and (when steps come from --epochs) how they were derived.

    steps = ceil(epochs / q), computed exactly from the numbers as typed: rounding up is the safe side
    (a run of that many steps costs at least as much privacy as the fractional number of steps).
    """
    q, steps, how = args.sample_rate, args.steps, None
    if steps is not None:
        steps = V.count("--steps", steps)
    if args.batch_size is not None or args.dataset_size is not None:
        if args.batch_size is None or args.dataset_size is None:
            raise cli.CLIError("--batch-size and --dataset-size go together")
        n = V.integer("--dataset-size", args.dataset_size, low=1)
        b = V.integer("--batch-size", args.batch_size, low=1, high=n)
        if q is not None:
            raise cli.CLIError("give either --sample-rate or --batch-size/--dataset-size")
        q = b / n
        exact_q = Fraction(b, n)
        q_text = f"({b} / {n})"
    elif q is not None:
        q = V.probability("--sample-rate", q)
        exact_q, q_text = _exact(args.sample_rate), f"{args.sample_rate:g}"
    if getattr(args, "sampling", "poisson") != "poisson":
        if args.batch_size is None:
            raise cli.CLIError(f"--sampling {args.sampling} needs --batch-size and --dataset-size")
        if args.epochs is not None:
            if steps is not None:
                raise cli.CLIError("give either --steps or --epochs")
            from .sampling import steps_per_epoch

            k = getattr(args, "steps_per_record", None)
            if k is not None and args.steps_per_epoch is None:  # mean batch size B: t = ceil(k N / B)
                t = steps_per_epoch(args.batch_size, V.integer("--steps-per-record", k, low=1)
                                    * V.integer("--dataset-size", args.dataset_size, low=1))
            else:
                t = steps_per_epoch(args.batch_size, args.dataset_size, args.steps_per_epoch)
            epochs = V.real("--epochs", args.epochs, low=0.0, low_open=True)
            ratio = _exact(args.epochs) * t
            steps = math.ceil(ratio)
            how = (f"steps = ceil(epochs x steps per epoch) = ceil({epochs:g} x {t}) = {steps}"
                   + ("" if ratio.denominator == 1 else " (rounded up: the safe side)"))
        return q, steps, how
    if args.epochs is not None:
        if steps is not None:
            raise cli.CLIError("give either --steps or --epochs")
        if q is None:
            raise cli.CLIError("--epochs needs the sample rate (--sample-rate, or --batch-size with "
                               "--dataset-size)")
        epochs = V.real("--epochs", args.epochs, low=0.0, low_open=True)
        if q == 0.0:
            raise cli.CLIError("--epochs needs a sample rate > 0")
        ratio = _exact(args.epochs) / exact_q
        steps = math.ceil(ratio)
        if steps > V.MAX_COUNT:
            raise cli.CLIError(f"--epochs {epochs:g} at sample rate {q:g} means {float(ratio):.3g} steps; "
                               f"the number of steps must be in [1, 10^18]")
        shown = str(ratio.numerator) if ratio.denominator == 1 else f"{float(ratio):.10g}"
        how = (f"steps = ceil(epochs / sample rate) = ceil({epochs:g} / {q_text}) = ceil({shown}) = {steps}"
               + ("" if ratio.denominator == 1 else " (rounded up: the safe side)"))
    return q, steps, how


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sample-rate", "-q", type=cli.number, metavar="Q",
                   help="Poisson sampling probability q in (0, 1]")
    p.add_argument("--steps", "-T", type=cli.integer, help="number of steps, integer in [0, 10^18]")
    p.add_argument("--epochs", type=cli.number,
                   help="epochs > 0 instead of --steps: steps = ceil(epochs / q), rounded up (the safe side) "
                        "and printed")
    p.add_argument("--batch-size", type=cli.integer,
                   help="expected batch size (with --dataset-size: q = batch-size / dataset-size)")
    p.add_argument("--dataset-size", type=cli.integer, help="dataset size n (with --batch-size)")
    p.add_argument("--sampling", default="poisson",
                   choices=["poisson", "fixed_size", "shuffle", "balls_in_bins"],
                   help="how the training code forms batches (default poisson; the others need "
                        "--batch-size and --dataset-size): fixed_size = a uniform batch of exactly B "
                        "records per step, shuffle = a permutation per epoch cut into ceil(N / B) "
                        "batches, balls_in_bins = every record in one uniform step per epoch (or in "
                        "--steps-per-record uniform steps)")
    p.add_argument("--relation", default="add_remove", choices=["add_remove", "replace_one"],
                   help="neighbouring relation (default add_remove; zero-out for shuffle)")
    p.add_argument("--steps-per-epoch", type=cli.integer, default=None,
                   help="batches per epoch for shuffle / balls_in_bins (default ceil(N / B), "
                        "ceil(K N / B) with --steps-per-record K)")
    p.add_argument("--steps-per-record", type=cli.integer, default=None, metavar="K",
                   help="balls_in_bins: every record in K uniformly random steps of each epoch, "
                        "1 <= K <= steps per epoch (default 1; K > 1 is an upper bound without a lower "
                        "bound beyond the sum of the releases)")
    p.add_argument("--delta", type=cli.number, required=True, help="target delta in (0, 1)")
    p.add_argument("--method", default="auto", choices=METHODS,
                   help="conversion route (default auto: the smallest certified bound)")
    cli.time_limit_option(p)
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.add_argument("--quiet", dest="quiet", action="store_true",
                   help="no progress or step-derivation lines on stderr ('-q' is --sample-rate here; "
                        "'dpcert -q ...' also works)")


def _with_run(doc: dict, q: float, steps: int, how: str | None) -> dict:
    doc = {**doc, "sample_rate": q, "steps": steps}
    if how:
        doc["steps_derivation"] = how
    return doc


def cmd_dpsgd(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise cli.CLIError(f"unexpected arguments {extra}")
    q, steps, how = _rate_and_steps(args)
    if q is None or steps is None or args.sigma is None:
        raise cli.CLIError("need --sigma, the sample rate (--sample-rate, or --batch-size with "
                           "--dataset-size) and the number of steps (--steps or --epochs)")
    acct = cli.apply_time_limit(PrivacyAccountant(relation=args.relation), args)
    if args.steps_per_record is not None and args.sampling != "balls_in_bins":
        raise cli.CLIError("--steps-per-record applies to --sampling balls_in_bins only")
    if args.sampling == "poisson" and args.relation == "add_remove":
        acct.step(sigma=args.sigma, sample_rate=q, steps=steps)
    else:
        kw = {} if args.steps_per_record is None else {"steps_per_record": args.steps_per_record}
        acct.step(sigma=args.sigma, steps=steps, batch_size=args.batch_size, dataset_size=args.dataset_size,
                  sampling=args.sampling, steps_per_epoch=args.steps_per_epoch, **kw)
    cert = acct.certificate(delta=args.delta, method=args.method)
    if args.json:
        print(json.dumps(_with_run(cert.to_dict(), q, steps, how), indent=2, allow_nan=False))
    else:
        if how:
            print(how)
        print(cert)
    return 0


def cmd_calibrate(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise cli.CLIError(f"unexpected arguments {extra}")
    q, steps, how = _rate_and_steps(args)
    method = None if args.method == "auto" else args.method
    if how and not args.json:
        print(how)
    progress = cli.progress_printer(args, force=args.progress)
    if args.solve == "sigma":
        if q is None or steps is None:
            raise cli.CLIError("calibrating sigma needs the sample rate and the number of steps")
        if args.sampling == "poisson" and args.relation == "add_remove":
            res = calibrate_sigma(args.target_epsilon, args.delta, q, steps, method=method, progress=progress)
        else:
            res = calibrate_sigma(args.target_epsilon, args.delta, None, steps, method=method,
                                  progress=progress, batch_size=args.batch_size,
                                  dataset_size=args.dataset_size, sampling=args.sampling,
                                  relation=args.relation,
                                  steps_per_epoch=args.steps_per_epoch,
                                  steps_per_record=args.steps_per_record)
    elif args.sampling != "poisson" or args.relation != "add_remove":
        raise cli.CLIError("--solve steps / sample-rate support --sampling poisson (add/remove) only")
    elif args.solve == "steps":
        if q is None or args.sigma is None:
            raise cli.CLIError("solving for steps needs --sigma and the sample rate")
        res = max_steps(args.target_epsilon, args.delta, args.sigma, q, method=method, progress=progress)
    else:
        if steps is None or args.sigma is None:
            raise cli.CLIError("solving for the sample rate needs --sigma and --steps")
        res = max_sample_rate(args.target_epsilon, args.delta, args.sigma, steps, method=method,
                              progress=progress)
    if args.json:
        doc = dict(res.__dict__)
        if how:
            doc["steps_derivation"] = how
        print(json.dumps({k: cli._json_num(v) for k, v in doc.items()}))
    else:
        print(f"{res.parameter} = {res.value:.8g} gives certified epsilon {res.epsilon:.6g} <= target "
              f"{res.target_epsilon:g} at delta {res.delta:g} ({res.evaluations} evaluations)")
    return 0


def _register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dpsgd", help="certified epsilon of a DP-SGD run (Poisson, fixed-size, shuffled or "
                                     "balls-in-bins batches)",
                       description="Certified epsilon of DP-SGD (every iterate released).  Give the sample "
                                   "rate with --sample-rate or --batch-size and --dataset-size, and the "
                                   "length with --steps or --epochs; --sampling says how the code forms "
                                   "its batches (default poisson).  Shuffled batches get a certified upper "
                                   "bound without amplification and a lower bound from explicit datasets.")
    p.add_argument("--sigma", "--noise-multiplier", dest="sigma", type=cli.number, required=True,
                   help="noise multiplier (noise standard deviation / clipping norm), > 0")
    _add_run_args(p)
    c = sub.add_parser("calibrate",
                       help="smallest sigma (or largest steps / sample rate) for a target epsilon",
                       description="Solve for the smallest noise multiplier (--solve sigma), the largest "
                                   "number of steps or the largest sample rate whose certified epsilon at "
                                   "--delta is <= --target-epsilon.  Progress goes to stderr on a "
                                   "terminal.")
    c.add_argument("--target-epsilon", type=cli.number, required=True, help="target epsilon > 0")
    c.add_argument("--solve", choices=["sigma", "steps", "sample-rate"], default="sigma",
                   help="the parameter to solve for (default sigma); the others must be given")
    c.add_argument("--sigma", "--noise-multiplier", dest="sigma", type=cli.number,
                   help="noise multiplier (for --solve steps / sample-rate)")
    c.add_argument("--progress", action="store_true",
                   help="print every evaluation on stderr even when it is not a terminal")
    _add_run_args(c)
    cli.COMMANDS.update(dpsgd=cmd_dpsgd, calibrate=cmd_calibrate)


cli._EXTRA_COMMANDS.append(_register)
