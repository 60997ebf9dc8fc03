"""Binary report-noisy-max with generalized PTR (Redberg, Zhu & Wang 2023, Example C.1 /
Thm C.2; docs/derivations/generalized-ptr.md §4).

Mechanism: two counts n_0, n_1 (add/remove one voter: t = n_1 - n_0 moves by +-1), output
argmax_i (n_i + Lap(1/eps)) with independent noise.  With Z = L_0 - L_1 (difference of two Lap(1/eps)),
P[Z > s] = (2 + eps s) e^{-eps s} / 4 for s >= 0, so for t >= 0

    p(t) := P[M(X) = 0] = (2 + eps t) e^{-eps t} / 4,        and p(-t) = 1 - p(t).      (exact)

Data-dependent DP of this two-outcome mechanism w.r.t. delta (our derivation,
docs/derivations/generalized-ptr.md §4): for P = (p(t), 1 - p(t)) and Q = (p(u), 1 - p(u)), u = t +- 1, and
e >= 0 at most one outcome has P_i > e^e Q_i, so H_{e^e}(P || Q) <= delta iff e >= log((P_i - delta)/Q_i)
for both i; hence

    eps_delta(t) = max(0, max_{u = t +- 1} max_i max(log((P_i - delta)/Q_i), log((Q_i - delta)/P_i)))

(exact, closed form; terms with P_i <= delta are dropped).  The *pure* loss (delta = 0) increases with the
gap toward eps (eps = 10 gives 8.208 at t = 0, 9.990 at t = 100), so "lower-bound the gap
and plug in" is only valid for the monotone envelope epsbar(t) = sup_{|u| >= |t|} eps_delta(u) of the
approximate loss, which is exactly computable: eps_delta(u) = 0 once p(|u| - 1) <= delta.

Gen-PTR (the paper's algorithm 1 of App. C, with its dropped minus sign restored): t^p = |t| -
log(1/delta)/eps_t + Lap(1/eps_t) (an eps_t-DP lower bound of the gap, wrong side w.p. delta/2), eps^p =
epsbar(ceil(t^p)), release iff eps^p <= eps'.  Certificate: (eps_t + eps', max(delta_0, delta/2)) (tight Thm
4.3).
"""

from __future__ import annotations

import math

import numpy as np

from mechanisms import validation as V

from .ptr import DataDependentLoss, PTRResult, StatRelease, generalized_ptr


def _log_p(t: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(log P[M = 0], log P[M = 1]) at integer gaps t = n_1 - n_0 (any sign), in log space."""
    t = np.asarray(t, dtype=float)
    a = np.abs(t) * eps
    log_small = np.log(2.0 + a) - a - math.log(4.0)  # log p(|t|) <= log(1/2)
    log_big = np.log1p(-np.exp(log_small))
    lp0 = np.where(t >= 0, log_small, log_big)
    lp1 = np.where(t >= 0, log_big, log_small)
    return lp0, lp1


def binary_rnm_probability(t, epsilon: float) -> np.ndarray:
    """P[M(X) = 0] = p(t) for gap t = n_1 - n_0 (exact)."""
    eps = V.positive("epsilon", epsilon)
    return np.exp(_log_p(np.asarray(t, dtype=float), eps)[0])


def _eps_pair(lp: tuple, lq: tuple, delta: float) -> np.ndarray:
    out = np.zeros(np.broadcast(lp[0], lq[0]).shape)
    for i in (0, 1):
        pi, qi = lp[i], lq[i]
        with np.errstate(divide="ignore", invalid="ignore"):
            if delta > 0:
                a = np.where(pi > math.log(delta), pi + np.log1p(-delta * np.exp(-pi)) - qi, -np.inf)
                b = np.where(qi > math.log(delta), qi + np.log1p(-delta * np.exp(-qi)) - pi, -np.inf)
            else:
                a = pi - qi
                b = qi - pi
        out = np.maximum(out, np.maximum(a, b))
    return out


def binary_rnm_dd_epsilon(t, epsilon: float, delta: float = 0.0) -> np.ndarray:
    """Exact data-dependent epsilon (w.r.t. ``delta``) of binary report-noisy-max at gap ``t``.

    Two-sided (both orders of every neighbouring pair t -> t +- 1).  ``delta = 0`` gives the pure
    data-dependent epsilon (Thm C.2; docs/derivations/generalized-ptr.md §4: log p(t)/p(t+1) = eps + log(1 -
    eps/(2 + eps (t+1))).
    """
    eps = V.positive("epsilon", epsilon)
    d = V.real("delta", delta, low=0.0, high=1.0, high_open=True)
    t = np.asarray(t, dtype=float)
    lp = _log_p(t, eps)
    out = np.zeros(t.shape)
    for du in (-1.0, 1.0):
        out = np.maximum(out, _eps_pair(lp, _log_p(t + du, eps), d))
    return out


def binary_rnm_envelope(t, epsilon: float, delta: float) -> np.ndarray:
    """epsbar(t) = sup_{|u| >= |t|, u integer} eps_delta(u): non-increasing in |t| (valid plug-in loss).

    ``delta`` must be > 0 (the pure loss has no useful envelope).  Exact: eps_delta(u) = 0 for all
    |u| > u_max where p(u_max - 1) <= delta.
    """
    eps = V.positive("epsilon", epsilon)
    d = V.real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    t = np.abs(np.asarray(t, dtype=float))
    if np.any(t != np.floor(t)):
        raise ValueError("gaps t must be integers (use ceil of a real lower bound)")
    # smallest u_max with p(u_max - 1) <= delta
    u = 1
    while float(np.exp(_log_p(np.array([u - 1.0]), eps)[0][0])) > d:
        u = 2 * u
    table_u = np.arange(0, u + 2, dtype=float)
    vals = binary_rnm_dd_epsilon(table_u, eps, d)
    env = np.maximum.accumulate(vals[::-1])[::-1]  # sup over |u'| >= u
    idx = np.minimum(t, table_u[-1]).astype(np.int64)
    return np.where(t > table_u[-1], 0.0, env[idx])


def binary_vote_loss(epsilon: float, delta_0: float) -> DataDependentLoss:
    """The monotone plug-in loss: eps^p = epsbar(ceil(gap lower bound)), w.r.t. delta_0."""
    eps = V.positive("epsilon", epsilon)
    d0 = V.real("delta_0", delta_0, low=0.0, high=1.0, low_open=True, high_open=True)

    def fn(stats, phi):
        g = np.maximum(np.ceil(np.asarray(stats["gap"], dtype=float)), 0.0)
        return binary_rnm_envelope(g, eps, d0)

    return DataDependentLoss(function=fn, monotone={"gap": "decreasing"}, delta=d0)


def binary_vote_ptr(n0: int, n1: int, *, epsilon: float, test_epsilon: float, budget_epsilon: float,
                    delta: float, delta_0: float, rng: np.random.Generator) -> PTRResult:
    """Gen-PTR for binary voting (the paper's algorithm 1 of App. C; docs/derivations/generalized-ptr.md §4).

    Releases argmax_i(n_i + Lap(1/epsilon)) iff epsbar(ceil(t^p)) <= ``budget_epsilon``, where
    t^p = |n_1 - n_0| - log(1/delta)/test_epsilon + Lap(1/test_epsilon).  Certificate
    ``GeneralizedPTR(budget_epsilon, delta_0, test_epsilon, 0, delta/2)``.
    """
    n0 = V.integer("n0", n0, low=0)
    n1 = V.integer("n1", n1, low=0)
    eps = V.positive("epsilon", epsilon)
    et = V.positive("test_epsilon", test_epsilon)
    d = V.real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    rel = StatRelease("gap", sensitivity=1.0, noise_scale=1.0 / et, failure_prob=d / 2.0,
                      direction="lower", noise="laplace")

    def run(phi, g):
        return int(np.argmax([n0 + g.laplace(0.0, 1.0 / eps), n1 + g.laplace(0.0, 1.0 / eps)]))

    return generalized_ptr({"gap": float(abs(n1 - n0))}, loss=binary_vote_loss(eps, delta_0), releases=[rel],
                           phi=eps, epsilon=budget_epsilon, run=run, rng=rng, relation="add_remove")
