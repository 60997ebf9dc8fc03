"""PATE with generalized PTR (Redberg, Zhu & Wang 2023, Alg. 4) on synthetic teacher votes, and its
certificate.

Run:  python examples/ptr_pate.py   (about 2 s)

400 teachers vote on 100 public queries with 10 classes.  The labels are released only if a private
upper bound of their data-dependent RDP (GNSS release) certifies eps_sigma1 <= eps'.  The certificate
(eps' + eps_hat, delta) depends on public parameters only, so the same entry goes into the ledger
whether the labels were released or not.
"""

import numpy as np

from accountant import PrivacyAccountant
from accountant.adaptive.pate_ptr import PATEPTRParameters, gnmax_data_independent_epsilon, pate_ptr


def synthetic_votes(consensus: str, rng, queries=100, teachers=400, classes=10):
    lo, hi = (300, 390) if consensus == "high" else (100, 150)
    votes = np.zeros((queries, classes), dtype=np.int64)
    for i in range(queries):
        top = int(rng.integers(lo, hi))
        rest = np.minimum(rng.multinomial(teachers - top, np.ones(classes - 1) / (classes - 1)), top - 1)
        rest[0] += teachers - top - rest.sum()
        votes[i] = rng.permutation(np.concatenate([[top], rest]))
    return votes


def main() -> None:
    rng = np.random.default_rng(2023)
    sigma_1, test_eps, budget, delta = 40.0, 1.0, 3.0, 1e-5
    p = PATEPTRParameters.from_budget(test_eps, delta)
    print(f"Alg-4 parameters: alpha={p.alpha:.3f} sigma_s=sigma_2={p.sigma_s:.3f} beta={p.beta:.5f} "
          f"delta_2={p.delta_2:g}")
    print(f"data-independent GNMax (100 queries, sigma={sigma_1:g}): "
          f"eps = {gnmax_data_independent_epsilon(100, sigma_1, delta):.4f} at delta={delta:g}")
    acct = PrivacyAccountant()
    for consensus in ("high", "low"):
        votes = synthetic_votes(consensus, rng)
        res = pate_ptr(votes, sigma_1=sigma_1, test_epsilon=test_eps, budget_epsilon=budget, delta=delta,
                       rng=rng)
        acc = (np.mean(res.labels == votes.argmax(axis=1)) if res.passed else float("nan"))
        print(f"\n{consensus}-consensus votes: released eps_sigma1 = {res.epsilon_sigma1:.4f} "
              f"-> {'labels released' if res.passed else 'bottom (not released)'}"
              + (f", agreement with plurality {acc:.2%}" if res.passed else ""))
        m = res.mechanism
        print(f"  certificate: ({m.total_epsilon:.4f}, {m.total_delta:g})-DP  "
              f"[eps' = {m.epsilon:g} + certified test eps_hat = {m.test_epsilon:.4f} "
              f"<= nominal {test_eps:g}]")
        acct.compose(m)
    print("\nboth runs composed in one ledger:")
    print(acct.certificate(delta=2.5e-5))


if __name__ == "__main__":
    main()
