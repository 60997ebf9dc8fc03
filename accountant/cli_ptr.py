"""``dpcert ptr`` subcommands: generalized propose-test-release certificates and PATE-PTR.

Examples::

    dpcert ptr certificate --epsilon 1 --delta 1e-6 --test-epsilon 0.5 --test-delta 1e-6 --false-positive 1e-6
    dpcert ptr classic --epsilon 0.5 --delta 1e-6
    dpcert ptr pate-params --test-epsilon 1 --delta 1e-5
    dpcert ptr pate --votes votes.json --sigma1 40 --test-epsilon 1 --budget-epsilon 3 --delta 1e-5 --seed 0
    dpcert ptr select-budget --epsilon-total 2 --delta-total 1e-5 --stop-prob 0.05 --delta2 1e-6

``--state FILE`` (certificate, classic, pate) adds the released mechanism's certificate to a saved
accountant state (created if missing), so PTR releases compose with everything else in that ledger.
"""

from __future__ import annotations

import argparse
import json
import math
import os

import numpy as np

from . import cli
from .privacy_accountant import PrivacyAccountant

_num, _int = cli.number, cli.integer


def _record(args: argparse.Namespace, mech) -> PrivacyAccountant | None:
    if not getattr(args, "state", None):
        return None
    acct = PrivacyAccountant.load(args.state) if os.path.exists(args.state) else PrivacyAccountant()
    acct.compose(mech)
    acct.save(args.state)
    return acct


def _emit_block(args: argparse.Namespace, mech, extra: dict) -> int:
    acct = PrivacyAccountant().compose(mech)
    cert = acct.certificate(delta=min(max(mech.total_delta, 1e-300) * (1 + 1e-9), 0.999999))
    doc = {"mechanism": mech.to_dict(), "epsilon": mech.total_epsilon, "delta": mech.total_delta, **extra}
    state = _record(args, mech)
    if state is not None:
        doc["state"] = args.state
        doc["state_ledger"] = list(state.ledger.summary())
    if args.json:
        print(json.dumps(doc, indent=2, allow_nan=False))
    else:
        print(f"{mech.describe()}")
        print(f"  certificate: ({mech.total_epsilon:.6g}, {mech.total_delta:.6g})-DP   "
              f"[accountant: eps {cert.epsilon:.6g} at delta {cert.delta:.3g}]")
        for k, v in extra.items():
            print(f"  {k}: {v}")
        if state is not None:
            print(f"  recorded in {args.state}: {'; '.join(state.ledger.summary())}")
    return 0


def cmd_certificate(args: argparse.Namespace) -> int:
    from mechanisms.ptr import GeneralizedPTR

    kw = {"epsilon": args.epsilon, "delta": args.delta, "test_epsilon": args.test_epsilon,
          "test_delta": args.test_delta, "false_positive": args.false_positive}
    mech = GeneralizedPTR(**kw, combine=args.combine)
    paper = GeneralizedPTR(**kw, combine="sum")
    return _emit_block(args, mech, {"delta_as_printed_in_thm_4_3": paper.total_delta})


def cmd_classic(args: argparse.Namespace) -> int:
    from mechanisms.ptr import GeneralizedPTR

    if not (0 < args.delta < 1) or args.epsilon <= 0:
        raise cli.CLIError("need epsilon > 0 and 0 < delta < 1")
    mech = GeneralizedPTR(epsilon=args.epsilon, test_epsilon=args.epsilon, false_positive=args.delta / 2)
    return _emit_block(args, mech, {"threshold_log(1/delta)/epsilon": math.log(1 / args.delta) / args.epsilon,
                                    "paper_statement": f"({2 * args.epsilon:g}, {args.delta:g})"})


def cmd_pate_params(args: argparse.Namespace) -> int:
    from accountant.adaptive.pate_ptr import PATEPTRParameters

    p = PATEPTRParameters.from_budget(args.test_epsilon, args.delta)
    g = p.gnss
    a = np.array([p.alpha])
    eps_hat = PrivacyAccountant().compose(g).epsilon(args.delta / 2)
    doc = {"alpha": p.alpha, "sigma_s": p.sigma_s, "sigma_2": p.sigma_2, "beta": p.beta, "delta_2": p.delta_2,
           "test_rdp_exact_at_alpha": float(g.rdp(a)[0]),
           "test_rdp_lemma_5_5_at_alpha": float(g.lemma55_rdp(a)[0]),
           "test_epsilon_certified": eps_hat, "test_epsilon_nominal": args.test_epsilon}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        for k, v in doc.items():
            print(f"{k:30s} {v:.6g}")
    return 0


def _load_votes(path: str) -> np.ndarray:
    if path.endswith(".npy"):
        return np.load(path, allow_pickle=False)
    if path.endswith(".json"):
        with open(path) as fh:
            doc = json.load(fh)
        return np.asarray(doc["votes"] if isinstance(doc, dict) else doc)
    return np.loadtxt(path, delimiter=",", ndmin=2)


def cmd_pate(args: argparse.Namespace) -> int:
    from accountant.adaptive.pate_ptr import pate_ptr

    votes = _load_votes(args.votes)
    res = pate_ptr(votes, sigma_1=args.sigma1, test_epsilon=args.test_epsilon,
                   budget_epsilon=args.budget_epsilon, delta=args.delta,
                   rng=np.random.default_rng(args.seed), num_teachers=args.num_teachers,
                   conversion=args.conversion)
    if args.labels_out and res.passed:
        with open(args.labels_out, "w") as fh:
            json.dump({"labels": [int(x) for x in res.labels]}, fh)
    extra = {"passed": res.passed, "epsilon_sigma1_released": res.epsilon_sigma1,
             "fallback_data_independent": res.fallback, **{k: v for k, v in res.details.items()
                                                          if isinstance(v, (int, float, bool))}}
    if res.release is not None:
        extra.update(mu=res.release.mu, rdp_upper_bound=res.release.upper)
    return _emit_block(args, res.mechanism, extra)


def cmd_select_budget(args: argparse.Namespace) -> int:
    from accountant.adaptive.ptr_selection import liu_talwar_printed, selection_budget, selection_cutoff

    es, ds = selection_budget(args.epsilon_total, args.delta_total, args.stop_prob, args.delta2)
    paper = list(liu_talwar_printed(es, ds, args.stop_prob, args.delta2))
    doc = {"epsilon_star": es, "delta_star": ds, "cutoff": selection_cutoff(es, args.stop_prob, args.delta2),
           "paper_thm_4_6_at_same_per_call_budget": paper}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(f"per-call budget: eps* = {es:.6g}, delta* = {ds:.6g} (hard stop T = {doc['cutoff']})")
        p = doc["paper_thm_4_6_at_same_per_call_budget"]
        print(f"  (Thm 4.6 as printed would give ({p[0]:.6g}, {p[1]:.3g}) for the same per-call budget)")
    return 0


_SUBS = {"certificate": cmd_certificate, "classic": cmd_classic, "pate-params": cmd_pate_params,
         "pate": cmd_pate, "select-budget": cmd_select_budget}


def cmd_ptr(args: argparse.Namespace, extra: list[str]) -> int:
    if extra:
        raise cli.CLIError(f"unexpected arguments {extra}")
    if not getattr(args, "ptr_command", None):
        raise cli.CLIError(f"give a ptr subcommand: {', '.join(_SUBS)}")
    return _SUBS[args.ptr_command](args)


def _register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ptr", help="generalized propose-test-release certificates and PATE-PTR")
    ps = p.add_subparsers(dest="ptr_command")

    c = ps.add_parser("certificate",
                      help="(eps + eps_hat, delta_hat + max(delta, delta'))-DP of one PTR release")
    c.add_argument("--epsilon", type=_num, required=True, help="budget eps of the data-dependent loss")
    c.add_argument("--delta", type=_num, default=0.0, help="delta of the data-dependent loss")
    c.add_argument("--test-epsilon", type=_num, required=True, help="eps_hat of the test, >= 0")
    c.add_argument("--test-delta", type=_num, default=0.0, help="delta_hat of the test (default 0)")
    c.add_argument("--false-positive", type=_num, required=True,
                   help="delta': false-positive rate of the test")
    c.add_argument("--combine", choices=["max", "sum"], default="max",
                   help="delta_hat + max(delta, delta') (tight, default) or delta_hat + delta + delta' "
                        "(Thm 4.3 as printed)")

    k = ps.add_parser("classic", help="classic PTR (Laplace test and release): (2 eps, delta/2)")
    k.add_argument("--epsilon", type=_num, required=True, help="epsilon of the Laplace test and release, > 0")
    k.add_argument("--delta", type=_num, required=True, help="failure probability delta in (0, 1)")

    pp = ps.add_parser("pate-params", help="Alg-4 parameters and the exact GNSS test cost")
    pp.add_argument("--test-epsilon", type=_num, required=True, help="epsilon budget of the GNSS test, > 0")
    pp.add_argument("--delta", type=_num, required=True, help="delta in (0, 1)")

    pa = ps.add_parser("pate", help="run PATE with generalized PTR on a vote file (.npy, .json or .csv)")
    pa.add_argument("--votes", required=True, metavar="FILE",
                    help="teacher vote histograms: .npy, .json ({'votes': [[...], ...]} or a list) or .csv")
    pa.add_argument("--sigma1", type=_num, required=True, help="GNMax noise standard deviation")
    pa.add_argument("--test-epsilon", type=_num, required=True, help="epsilon budget of the GNSS test, > 0")
    pa.add_argument("--budget-epsilon", type=_num, required=True,
                    help="eps': release iff eps_sigma1 <= eps'")
    pa.add_argument("--delta", type=_num, required=True, help="delta in (0, 1)")
    pa.add_argument("--num-teachers", type=_int, help="number of teachers (default: the largest vote total)")
    pa.add_argument("--seed", type=_int, help="random seed (default: fresh randomness)")
    pa.add_argument("--conversion", choices=["classic", "improved"], default="classic",
                    help="RDP-to-DP conversion rule (default classic)")
    pa.add_argument("--labels-out", help="write the released labels to this JSON file")

    s = ps.add_parser("select-budget", help="per-call budget of PTR with random-stopping selection")
    s.add_argument("--epsilon-total", type=_num, required=True, help="total epsilon budget, > 0")
    s.add_argument("--delta-total", type=_num, required=True, help="total delta budget in (0, 1)")
    s.add_argument("--stop-prob", type=_num, required=True, help="stopping probability gamma in (0, 1)")
    s.add_argument("--delta2", type=_num, required=True, help="delta_2 of the hard stop, in (0, 1)")

    for q in (c, k, pp, pa, s):
        q.add_argument("--json", action="store_true", help="machine-readable output")
    for q in (c, k, pa):
        q.add_argument("--state",
                       help="add the certificate to this accountant state file (created if missing)")
    cli.COMMANDS["ptr"] = cmd_ptr


cli._EXTRA_COMMANDS.append(_register)
