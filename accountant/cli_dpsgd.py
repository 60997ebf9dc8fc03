"""``dpcert dpsgd`` and ``dpcert calibrate`` subcommands (DP-SGD with Poisson sampling)."""

from __future__ import annotations

import argparse
import json

from . import cli
from .calibration import calibrate_sigma, max_sample_rate, max_steps
from .privacy_accountant import METHODS, PrivacyAccountant


def _rate_and_steps(args: argparse.Namespace) -> tuple[float, int]:
    q, steps = args.sample_rate, args.steps
    if args.batch_size is not None or args.dataset_size is not None:
        if args.batch_size is None or args.dataset_size is None:
            raise cli.CLIError("--batch-size and --dataset-size go together")
        if args.dataset_size <= 0 or args.batch_size <= 0 or args.batch_size > args.dataset_size:
            raise cli.CLIError("need 0 < batch-size <= dataset-size")
        if q is not None:
            raise cli.CLIError("give either --sample-rate or --batch-size/--dataset-size")
        q = args.batch_size / args.dataset_size
    if args.epochs is not None:
        if steps is not None:
            raise cli.CLIError("give either --steps or --epochs")
        if q is None:
            raise cli.CLIError("--epochs needs the sample rate")
        steps = int(round(args.epochs / q))
    return q, steps


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sample-rate", "-q", type=float, help="Poisson sampling probability")
    p.add_argument("--steps", "-T", type=int, help="number of steps")
    p.add_argument("--epochs", type=float, help="epochs (steps = epochs / sample rate)")
    p.add_argument("--batch-size", type=int, help="expected batch size (with --dataset-size)")
    p.add_argument("--dataset-size", type=int, help="dataset size n (sample rate = batch / n)")
    p.add_argument("--delta", type=float, required=True)
    p.add_argument("--method", default="auto", choices=METHODS)
    p.add_argument("--json", action="store_true")


def cmd_dpsgd(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise cli.CLIError(f"unexpected arguments {extra}")
    q, steps = _rate_and_steps(args)
    if q is None or steps is None or args.sigma is None:
        raise cli.CLIError("need --sigma, the sample rate and the number of steps")
    acct = PrivacyAccountant()
    acct.step(sigma=args.sigma, sample_rate=q, steps=steps)
    cert = acct.certificate(delta=args.delta, method=args.method)
    print(cert.to_json() if args.json else cert)
    return 0


def cmd_calibrate(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise cli.CLIError(f"unexpected arguments {extra}")
    q, steps = _rate_and_steps(args)
    method = None if args.method == "auto" else args.method
    if args.solve == "sigma":
        if q is None or steps is None:
            raise cli.CLIError("calibrating sigma needs the sample rate and the number of steps")
        res = calibrate_sigma(args.target_epsilon, args.delta, q, steps, method=method,
                              progress=args.progress)
    elif args.solve == "steps":
        if q is None or args.sigma is None:
            raise cli.CLIError("solving for steps needs --sigma and the sample rate")
        res = max_steps(args.target_epsilon, args.delta, args.sigma, q, method=method)
    else:
        if steps is None or args.sigma is None:
            raise cli.CLIError("solving for the sample rate needs --sigma and --steps")
        res = max_sample_rate(args.target_epsilon, args.delta, args.sigma, steps, method=method)
    if args.json:
        print(json.dumps(res.__dict__))
    else:
        print(f"{res.parameter} = {res.value:.8g} gives certified epsilon {res.epsilon:.6g} <= target "
              f"{res.target_epsilon:g} at delta {res.delta:g} ({res.evaluations} evaluations)")
    return 0


def _register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dpsgd", help="certified epsilon of a DP-SGD run (Poisson-subsampled Gaussian)")
    p.add_argument("--sigma", "--noise-multiplier", dest="sigma", type=float, required=True)
    _add_run_args(p)
    c = sub.add_parser("calibrate",
                       help="smallest sigma (or largest steps / sample rate) for a target epsilon")
    c.add_argument("--target-epsilon", type=float, required=True)
    c.add_argument("--solve", choices=["sigma", "steps", "sample-rate"], default="sigma")
    c.add_argument("--sigma", "--noise-multiplier", dest="sigma", type=float)
    c.add_argument("--progress", action="store_true", help="print every evaluation")
    _add_run_args(c)
    cli.COMMANDS.update(dpsgd=cmd_dpsgd, calibrate=cmd_calibrate)


cli._EXTRA_COMMANDS.append(_register)
