"""Epsilon versus sigma for the batch samplers training code really uses, at fixed (b, n, epochs).

``python -m benchmarks.bench_sampling [--quick] [--no-peers] [--out DIR]``

For each noise multiplier sigma it certifies, at delta = 1e-5, one DP-SGD run of ``epochs`` epochs with
batch size b out of n records (t = ceil(n / b) steps per epoch), clipping norm 1:

* ``poisson``       -- Poisson sampling, q = b / n, t x epochs steps (dpcert ``auto``: bracket);
* ``fixed_size``    -- a uniform batch of exactly b every step, add/remove (the Poisson pair with shift 2);
* ``balls_in_bins`` -- every record in one uniform step per epoch (RDP upper bound; lower bound from the
  binned largest release);
* ``shuffle``       -- a permutation per epoch cut into t batches (zero-out): no-amplification upper bound
  and the lower bound of Chua et al. (2024)'s datasets;
* ``fixed_size_replace_one`` -- fixed-size batches under replace-one (symmetrised pair).

Peers, side by side where one implements the same sampler: dp-accounting's PLD (pessimistic,
discretisation 1e-4) and RDP accountants for Poisson, its RDP ``SampledWithoutReplacementDpEvent``
(replace-one, Wang, Balle & Kasiviswanathan 2019) for fixed-size batches under replace-one.  dp-accounting
0.6 has no random-allocation / balls-in-bins or shuffling accountant (checked: its ``dp_event`` module).

Writes ``results/sampling.json``, ``results/sampling.md`` and ``results/sampling.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DELTA = 1e-5


def _dpcert(sampling: str, sigma: float, b: int, n: int, epochs: int, relation: str = "add_remove") -> dict:
    from accountant import PrivacyAccountant

    t = -(-n // b)
    acct = PrivacyAccountant(relation=relation)
    t0 = time.perf_counter()
    if sampling == "poisson":
        acct.step(sigma=sigma, sample_rate=b / n, steps=t * epochs)
    else:
        acct.step(sigma=sigma, batch_size=b, dataset_size=n, sampling=sampling, steps=t * epochs)
    c = acct.certificate(delta=DELTA)
    return {"upper": c.epsilon, "lower": c.lower_bound, "method": c.method,
            "seconds": round(time.perf_counter() - t0, 3)}


def _peer_poisson(sigma: float, b: int, n: int, epochs: int) -> dict:
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant
    from dp_accounting.rdp import rdp_privacy_accountant

    t = -(-n // b)
    ev = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(b / n, dp_accounting.GaussianDpEvent(sigma)), t * epochs)
    pld = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(ev)
    rdp = rdp_privacy_accountant.RdpAccountant()
    rdp.compose(ev)
    return {"pld": pld.get_epsilon(DELTA), "rdp": rdp.get_epsilon(DELTA)}


def _peer_wor_replace_one(sigma: float, b: int, n: int, epochs: int) -> dict:
    import dp_accounting
    from dp_accounting.rdp import rdp_privacy_accountant

    t = -(-n // b)
    # replace-one shift of a sum of clipped gradients is 2C: the Gaussian event's noise multiplier is sigma/2
    ev = dp_accounting.SelfComposedDpEvent(
        dp_accounting.SampledWithoutReplacementDpEvent(n, b, dp_accounting.GaussianDpEvent(sigma / 2.0)),
        t * epochs)
    rdp = rdp_privacy_accountant.RdpAccountant(
        neighboring_relation=dp_accounting.NeighboringRelation.REPLACE_ONE)
    rdp.compose(ev)
    return {"rdp": rdp.get_epsilon(DELTA)}


def run(quick: bool, peers: bool) -> dict:
    b, n, epochs = (250, 10000, 5) if quick else (256, 60000, 10)
    sigmas = [0.7, 1.0, 2.0] if quick else [0.6, 0.8, 1.0, 1.3, 1.7, 2.2, 3.0]
    rows = []
    for s in sigmas:
        row: dict = {"sigma": s}
        for samp in ("poisson", "fixed_size", "balls_in_bins", "shuffle"):
            row[samp] = _dpcert(samp, s, b, n, epochs)
            print(f"sigma={s} {samp}: {row[samp]}", file=sys.stderr, flush=True)
        row["fixed_size_replace_one"] = _dpcert("fixed_size", s, b, n, epochs, "replace_one")
        if peers:
            try:
                row["dp_accounting_poisson"] = _peer_poisson(s, b, n, epochs)
                row["dp_accounting_wor_replace_one"] = _peer_wor_replace_one(s, b, n, epochs)
            except ImportError:
                pass
        rows.append(row)
    return {"delta": DELTA, "batch_size": b, "dataset_size": n, "epochs": epochs,
            "steps_per_epoch": -(-n // b), "rows": rows}


def _f(x) -> str:
    return "-" if x is None else (f"{x:.3f}" if math.isfinite(x) else "inf")


def markdown(doc: dict) -> str:
    head = ("| sigma | Poisson [lower, upper] | dp-acc. PLD / RDP (Poisson) | fixed size (add/remove) | "
            "balls-in-bins [lower, upper] | shuffle [lower, upper] | fixed size replace-one | "
            "dp-acc. RDP WOR replace-one |")
    lines = [f"b = {doc['batch_size']}, n = {doc['dataset_size']}, {doc['epochs']} epochs of "
             f"{doc['steps_per_epoch']} steps, delta = {doc['delta']:g}, clipping norm 1.", "", head,
             "|" + "---|" * 8]
    for r in doc["rows"]:
        pa = r.get("dp_accounting_poisson", {})
        pw = r.get("dp_accounting_wor_replace_one", {})
        lines.append(
            f"| {r['sigma']:g} | [{_f(r['poisson']['lower'])}, {_f(r['poisson']['upper'])}] | "
            f"{_f(pa.get('pld'))} / {_f(pa.get('rdp'))} | {_f(r['fixed_size']['upper'])} | "
            f"[{_f(r['balls_in_bins']['lower'])}, {_f(r['balls_in_bins']['upper'])}] | "
            f"[{_f(r['shuffle']['lower'])}, {_f(r['shuffle']['upper'])}] | "
            f"{_f(r['fixed_size_replace_one']['upper'])} | {_f(pw.get('rdp'))} |")
    return "\n".join(lines) + "\n"


def plot(doc: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = [r["sigma"] for r in doc["rows"]]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(s, [r["poisson"]["upper"] for r in doc["rows"]], "k-o", label="Poisson (certified)")
    ax.plot(s, [r["balls_in_bins"]["upper"] for r in doc["rows"]], "b-s", label="balls-in-bins upper (RDP)")
    ax.plot(s, [r["balls_in_bins"]["lower"] for r in doc["rows"]], "b:", label="balls-in-bins lower")
    lo = [r["shuffle"]["lower"] for r in doc["rows"]]
    ax.fill_between(s, lo, [r["shuffle"]["upper"] for r in doc["rows"]], color="r", alpha=0.2,
                    label="shuffle: [lower, upper]")
    ax.plot(s, lo, "r-^", label="shuffle lower (Chua et al. datasets)")
    ax.plot(s, [r["fixed_size"]["upper"] for r in doc["rows"]], "g-d", label="fixed size (add/remove)")
    if "dp_accounting_poisson" in doc["rows"][0]:
        ax.plot(s, [r["dp_accounting_poisson"]["pld"] for r in doc["rows"]], "kx",
                label="dp-accounting PLD (Poisson)")
    ax.set_yscale("log")
    ax.set_xlabel("noise multiplier sigma")
    ax.set_ylabel(f"epsilon at delta = {doc['delta']:g}")
    ax.set_title(f"b={doc['batch_size']}, n={doc['dataset_size']}, {doc['epochs']} epochs")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.bench_sampling",
                                description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-peers", action="store_true")
    p.add_argument("--out", default=str(ROOT / "results"))
    a = p.parse_args(argv)
    doc = run(a.quick, not a.no_peers)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "sampling_quick" if a.quick else "sampling"
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / f"{stem}.md").write_text(markdown(doc))
    plot(doc, out / f"{stem}.png")
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
