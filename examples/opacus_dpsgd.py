"""DP-SGD with Opacus, accounted by dpcert: ``PrivacyEngine(accountant="dpcert")``.

Run:  python examples/opacus_dpsgd.py  [--epochs 2] [--target-epsilon 2] [--sigma S] [--json]
(needs ``pip install torch opacus``; a few seconds on a CPU)

A logistic-regression model is trained on 1000 synthetic points (10 features, 2 classes) with Poisson
sampling at rate 0.05 (20 steps per epoch).  The noise multiplier is calibrated by
``make_private_with_epsilon`` (dpcert's certified calibration) unless ``--sigma`` is given.  After
each epoch the script prints dpcert's certified epsilon (upper bound) and its certified lower bound,
next to Opacus' RDP and PRV accountants run on the same history.
"""

from __future__ import annotations

import argparse
import json
import warnings

N, D, BATCH, DELTA = 1000, 10, 50, 1e-5


def run(epochs: int = 2, target_epsilon: float = 2.0, sigma: float | None = None, seed: int = 0,
        out=print) -> dict:
    """Train, and return ``{"noise_multiplier", "sample_rate", "epochs": [row per epoch]}``; each row has
    ``epoch, steps, dpcert, dpcert_lower, rdp, prv, accuracy``."""
    import torch
    from opacus import PrivacyEngine
    from opacus.accountants import PRVAccountant, RDPAccountant
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from accountant.opacus import register

    register()  # once: "dpcert" becomes an Opacus accounting mechanism

    torch.manual_seed(seed)
    x = torch.randn(N, D)
    w = torch.randn(D)
    y = (x @ w + 0.5 * torch.randn(N) > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH)
    model = nn.Linear(D, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus' "secure RNG off" and torch hook notices
        engine = PrivacyEngine(accountant="dpcert")
        if sigma is None:
            model, optimizer, loader = engine.make_private_with_epsilon(
                module=model, optimizer=optimizer, data_loader=loader, target_epsilon=target_epsilon,
                target_delta=DELTA, epochs=epochs, max_grad_norm=1.0)
        else:
            model, optimizer, loader = engine.make_private(
                module=model, optimizer=optimizer, data_loader=loader, noise_multiplier=sigma,
                max_grad_norm=1.0)
    q = 1.0 / len(loader)
    out(f"noise multiplier {optimizer.noise_multiplier:.6g}, sample rate {q:g}, "
        f"{len(loader)} steps per epoch, delta {DELTA:g}")
    out(f"{'epoch':>5} {'steps':>6} {'dpcert':>9} {'(lower)':>9} {'opacus RDP':>11} {'opacus PRV':>11} "
        f"{'accuracy':>9}")
    loss_fn = nn.CrossEntropyLoss()
    rows = []
    for epoch in range(1, epochs + 1):
        model.train()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for xb, yb in loader:  # Poisson batches: every step is accounted, even an empty one
                optimizer.zero_grad()
                loss_fn(model(xb), yb).backward()
                optimizer.step()
        with torch.no_grad():
            acc = float((model(x).argmax(1) == y).float().mean())
        cert = engine.accountant.certificate(DELTA)
        rdp, prv = RDPAccountant(), PRVAccountant()
        rdp.history = list(engine.accountant.history)
        prv.history = list(engine.accountant.history)
        row = {"epoch": epoch, "steps": len(engine.accountant), "dpcert": engine.get_epsilon(DELTA),
               "dpcert_lower": cert.lower_bound, "rdp": rdp.get_epsilon(DELTA), "prv": prv.get_epsilon(DELTA),
               "accuracy": acc}
        rows.append(row)
        out(f"{epoch:>5} {row['steps']:>6} {row['dpcert']:>9.4f} {row['dpcert_lower']:>9.4f} "
            f"{row['rdp']:>11.4f} {row['prv']:>11.4f} {acc:>9.3f}")
    return {"noise_multiplier": float(optimizer.noise_multiplier), "sample_rate": q,
            "history": [list(h) for h in engine.accountant.history], "epochs": rows}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--target-epsilon", type=float, default=2.0)
    ap.add_argument("--sigma", type=float, default=None, help="fixed noise multiplier (skips calibration)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the result as JSON (no table)")
    args = ap.parse_args(argv)
    res = run(args.epochs, args.target_epsilon, args.sigma, args.seed,
              out=(lambda line: None) if args.json else print)
    if args.json:
        print(json.dumps(res))


if __name__ == "__main__":
    main()
