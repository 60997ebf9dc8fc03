"""Individual Renyi filters (privacy odometers with per-record budgets) and the Ind-KNN charging rule.

Sources: Feldman & Zrnic 2021 (Cor. 3.3); Zhu et al. 2023 (Ind-KNN; = Zhu 2023 thesis, ch. 5);
derivation notes in docs/derivations/individual-filter.md.

**Individual RDP** (thesis Def. 5.2.2): a step A_t has individual RDP rho_t^(i)(alpha) for record i if
D<->_alpha(A_t(S) || A_t(S_{-i})) <= rho_t^(i)(alpha) for every dataset S containing record i (both
directions; add/remove of that record).  Example (thesis Lemma 5.2.3): a Gaussian linear query
sum_j q(z_j) + N(0, sigma^2 I) has rho^(i)(alpha) = alpha ||q(z_i)||^2 / (2 sigma^2).

**Filter** (thesis Algorithm 2 / Thm 5.2.4 = Feldman & Zrnic 2021, Cor. 3.3): before each
step, every record whose accumulated individual RDP plus this step's loss would exceed the budget
G(alpha) is removed from the step's input; the others are charged.  If the losses rho_t^(i) are fixed
before step t (they may depend on earlier outputs) and the step runs on the admitted records only,
the whole adaptively chosen composition is (alpha, G(alpha))-RDP under add/remove of one record, for
every alpha at which the budget is enforced -- however many steps are run.

Two budget modes:

* ``orders=None`` ("linear" mode, Ind-KNN): losses are linear in alpha, rho^(i)(alpha) = alpha c_i, and
  the budget is B in "RDP per unit alpha" units; one float per record; the guarantee is
  (alpha, alpha B)-RDP for **every** alpha > 1 (thesis Thm 5.3.2).
* ``orders`` given: losses and budgets are tracked on that grid of orders (an (n, m) array); the
  guarantee is (alpha_j, G_j)-RDP at each grid order, hence eps(alpha) <= G_j for alpha <= alpha_j
  (RDP is non-decreasing in alpha) -- the curve used for the certificate.

The certificate converts the budget curve with :func:`conversions.rdp_to_dp.eps_from_rdp` (RDP route only:
a zCDP-type budget does **not** imply the Gaussian privacy profile, docs/derivations/individual-filter.md §3).

The per-record state (remaining budgets, retirements) is private: never publish it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from conversions import rdp_to_dp
from mechanisms import validation as V

from ._filter_kernels import (
    _CHARGE_INFLATE,
    _ERR_DUP,
    _ERR_RANGE,
    _admit_grid,
    _admit_linear,
    _indknn_charge,
    _indknn_select,
    _next_generation,
)
from .certificate import Certificate

__all__ = [
    "IndividualRenyiFilter", "IndKNNFilter", "IndKNNStep",
    "gaussian_individual_rdp", "budget_for_epsilon", "epsilon_for_budget", "default_sigma1",
]



# --------------------------------------------------------------------------- helpers
def gaussian_individual_rdp(alpha, norms, sigma: float) -> np.ndarray:
    """Individual RDP of a Gaussian linear query (Zhu 2023 thesis, Lemma 5.2.3), upper bound.

    rho^(i)(alpha) = alpha ||q(z_i)||^2 / (2 sigma^2) for per-record contribution norms ``norms``.
    Returns shape ``np.shape(norms) + np.shape(alpha)``.
    """
    a = V.alphas(alpha)
    s = V.positive("sigma", sigma)
    nr = np.asarray(norms, dtype=float)
    if not np.all(np.isfinite(nr)) or (nr < 0).any():
        raise ValueError("norms must be finite and non-negative")
    return np.multiply.outer(nr**2 / (2.0 * s * s), a)


def epsilon_for_budget(budget: float, delta: float, rule: str = "classic") -> float:
    """Certified epsilon of (alpha, alpha B)-RDP for all alpha: B + 2 sqrt(B log(1/delta)) (classic rule)."""
    b = V.real("budget", budget, low=0.0)
    d = V.delta(delta)
    if b == 0.0:
        return 0.0
    return rdp_to_dp.eps_from_rdp(lambda a: np.asarray(a) * b, d, rule=rule).value


def budget_for_epsilon(epsilon: float, delta: float, rule: str = "classic") -> float:
    """Largest B with (alpha, alpha B)-RDP => (epsilon, delta)-DP (docs/derivations/individual-filter.md §3).

    Classic: B = (sqrt(log(1/delta) + epsilon) - sqrt(log(1/delta)))^2.  ``rule="improved"``: bisection
    on :func:`epsilon_for_budget` (result rounded down, i.e. safe).
    """
    e = V.real("epsilon", epsilon, low=0.0, low_open=True)
    d = V.delta(delta)
    ld = math.log(1.0 / d)
    b_classic = (math.sqrt(ld + e) - math.sqrt(ld)) ** 2
    if rule == "classic":
        # exact inverse, shaved by 1e-9 so that the certified epsilon_for_budget(B) (which carries a
        # relative safety margin for float error) stays <= epsilon
        return b_classic * (1.0 - 1e-9)
    if rule != "improved":
        raise ValueError(f"rule must be 'classic' or 'improved', got {rule!r}")
    lo, hi = b_classic * (1.0 - 1e-9), b_classic
    while epsilon_for_budget(hi, d, "improved") <= e:
        lo, hi = hi, hi * 2.0
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if epsilon_for_budget(mid, d, "improved") <= e:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * hi:
            break
    return lo


def default_sigma1(num_queries: int, budget: float) -> float:
    """The thesis' count-noise rule sigma1 = sqrt(T / (6 B)) (Zhu 2023 thesis, ch. 5, "Hyper-parameters
    of Ind-KNN"; a tunable default)."""
    t = V.integer("num_queries", num_queries, low=1)
    b = V.positive("budget", budget)
    return math.sqrt(t / (6.0 * b))


def _as_ids(ids, n: int, check_range: bool = True) -> np.ndarray:
    arr = np.asarray(ids)
    if arr.ndim != 1:
        raise ValueError("ids must be a 1-d array of record indices")
    if arr.size == 0:
        return np.empty(0, dtype=np.int64)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"ids must be integers, got dtype {arr.dtype}")
    arr = np.ascontiguousarray(arr.astype(np.int64, copy=False))
    if check_range:
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi >= n:
            raise ValueError(f"record ids must lie in [0, {n - 1}], got range [{lo}, {hi}]")
    return arr


def _raise_kernel_error(err: np.ndarray, n: int, what: str) -> None:
    code, where = int(err[0]), int(err[1])
    if code == _ERR_RANGE:
        raise ValueError(f"record ids must lie in [0, {n - 1}], got {where}")
    if code == _ERR_DUP:
        raise ValueError(f"record id {where} appears twice in one step")
    raise ValueError(f"{what} (entry {where})")


# --------------------------------------------------------------------------- generic filter
class IndividualRenyiFilter:
    """Per-record Renyi filter (Feldman & Zrnic 2021; thesis Algorithm 2, Thm 5.2.4).

    Parameters
    ----------
    n_records : int
        Number of private records (ids 0 .. n_records - 1).
    budget : float or array_like or callable
        ``orders=None``: B > 0, the per-unit-alpha budget (guarantee (alpha, alpha B) for all alpha).
        Otherwise G(alpha_j) > 0 at every grid order: a scalar (same at every order), an array of
        shape (m,) or a callable ``G(orders) -> array``.
    orders : array_like, optional
        Grid of Renyi orders (> 1, finite, increasing) on which losses are tracked.

    Notes
    -----
    Memory: ``n_records`` floats (linear mode) or ``n_records * m`` floats (grid mode).  Updates
    are O(#ids * m) numba loops.  The caller must (i) compute each record's loss for the step from
    public information (earlier outputs, the step's definition), (ii) run the step on the records
    :meth:`admit` returns True for, and only those.
    """

    def __init__(self, n_records: int, budget, orders=None):
        self.n_records = V.integer("n_records", n_records, low=1)
        if orders is None:
            self.orders = None
            self._budget_lin = V.positive("budget", budget)
            self._budget = np.array([self._budget_lin])
            self._spent = np.zeros(self.n_records)
        else:
            o = V.alphas(orders, name="orders").astype(float).ravel()
            if o.size == 0 or not np.all(np.isfinite(o)) or np.any(np.diff(o) <= 0):
                raise ValueError("orders must be a non-empty increasing array of finite orders > 1")
            self.orders = o
            g = budget(o) if callable(budget) else budget
            g = np.broadcast_to(np.asarray(g, dtype=float), o.shape).copy()
            if not np.all(np.isfinite(g)) or (g <= 0).any():
                raise ValueError("budget must be finite and > 0 at every order")
            if np.any(np.diff(g) < 0):
                raise ValueError("budget G(alpha) must be non-decreasing in alpha (RDP curves are)")
            self._budget = g
            self._budget_lin = None
            self._spent = np.zeros((self.n_records, o.size))
        self._stamp = np.zeros(self.n_records, dtype=np.uint8)
        self._step = 0

    # ---------------------------------------------------------------- charging
    @property
    def linear(self) -> bool:
        """True in linear mode (losses alpha c_i, budget alpha B)."""
        return self.orders is None

    def _check_losses(self, losses, k: int) -> np.ndarray:
        arr = np.asarray(losses, dtype=float)
        shape = (k,) if self.linear else (k, self.orders.size)
        if arr.shape != shape:
            if not self.linear and arr.shape == (k,):
                raise ValueError(f"grid mode needs losses of shape {shape} (one per record and order)")
            raise ValueError(f"losses must have shape {shape}, got {arr.shape}")
        return np.ascontiguousarray(arr)  # finiteness and sign are checked inside the kernel

    def admit(self, ids, losses) -> np.ndarray:
        """One filter step: charge and admit every record whose total stays within budget.

        Parameters
        ----------
        ids : array_like of int
            Distinct records that take part in the step (records not listed are charged nothing
            and must not influence the step).
        losses : array_like
            Linear mode: shape (k,), the coefficients c_i of rho^(i)(alpha) = alpha c_i.  Grid mode:
            shape (k, m), rho^(i)(alpha_j).

        Returns
        -------
        ndarray of bool, shape (k,)
            True for records admitted (and charged); False for refused records, which must be
            left out of the step (they are not charged).
        """
        idx = _as_ids(ids, self.n_records, check_range=False)
        loss = self._check_losses(losses, idx.size)
        gen = _next_generation(self)
        out = np.empty(idx.size, dtype=np.bool_)
        err = np.zeros(2, dtype=np.int64)
        if self.linear:
            r = _admit_linear(self._spent, float(self._budget_lin), idx, loss, self._stamp, gen, out, err)
        else:
            r = _admit_grid(self._spent, self._budget, idx, loss, self._stamp, gen, out, err)
        if r < 0:  # nothing was charged
            _raise_kernel_error(err, self.n_records, "losses must be finite and non-negative")
        return out

    def individual_losses(self, curve: Callable, stats) -> np.ndarray:
        """Evaluate a per-record individual-RDP curve ``curve(alpha, stats) -> (k, len(alpha))``.

        Grid mode: evaluated on :attr:`orders`.  Linear mode: the curve must be linear in alpha
        (checked at alpha = 2, 3, 10); returns the coefficients c_i.
        """
        st = np.asarray(stats)
        if self.linear:
            probe = np.array([2.0, 3.0, 10.0])
            vals = np.asarray(curve(probe, st), dtype=float)
            if vals.ndim != 2 or vals.shape[1] != 3:
                raise ValueError("curve(alpha, stats) must return shape (len(stats), len(alpha))")
            c = vals[:, 0] / 2.0
            if not np.allclose(vals, np.multiply.outer(c, probe), rtol=1e-9, atol=0.0):
                raise ValueError("linear mode needs losses linear in alpha; give the filter an order grid")
            return c
        vals = np.asarray(curve(self.orders, st), dtype=float)
        if vals.ndim != 2 or vals.shape[1] != self.orders.size:
            raise ValueError("curve(alpha, stats) must return shape (len(stats), len(alpha))")
        return vals

    def admit_curve(self, ids, curve: Callable, stats) -> np.ndarray:
        """:meth:`admit` with losses from :meth:`individual_losses` (``stats`` aligned with ``ids``)."""
        return self.admit(ids, self.individual_losses(curve, stats))

    # ---------------------------------------------------------------- private state (do not publish)
    def remaining(self, ids=None) -> np.ndarray:
        """Remaining budget per record (linear: B - spent; grid: G - spent per order).  PRIVATE."""
        sl = slice(None) if ids is None else _as_ids(ids, self.n_records)
        if self.linear:
            return self._budget_lin - self._spent[sl]
        return self._budget[None, :] - self._spent[sl]

    def spent(self, ids=None) -> np.ndarray:
        """Accumulated individual RDP per record (copy).  PRIVATE."""
        sl = slice(None) if ids is None else _as_ids(ids, self.n_records)
        return np.array(self._spent[sl], copy=True)

    # ---------------------------------------------------------------- guarantee
    def rdp(self, alpha) -> np.ndarray:
        """The guarantee: alpha B (linear mode) or G at the smallest grid order >= alpha (inf above)."""
        a = V.alphas(alpha)
        if self.linear:
            return a * self._budget_lin
        j = np.searchsorted(self.orders, a, side="left")
        out = np.full(a.shape, np.inf)
        ok = j < self.orders.size
        out[ok] = self._budget[j[ok]]
        return out

    def _describe(self) -> str:
        if self.linear:
            return (f"individual Renyi filter over {self.n_records} records: "
                    f"(alpha, alpha*{self._budget_lin:.6g})-RDP for all alpha")
        return (f"individual Renyi filter over {self.n_records} records: budget on {self.orders.size} orders "
                f"[{self.orders[0]:.4g}, {self.orders[-1]:.4g}]")

    def certificate(self, delta: float, rule: str = "improved") -> Certificate:
        """(epsilon, delta) certificate of the filtered composition (add/remove one record).

        Independent of the number of steps run.  RDP conversion only (docs/derivations/individual-filter.md
        §3).
        """
        d = V.delta(delta)
        pure = math.inf
        res = rdp_to_dp.eps_from_rdp(self.rdp, d, pure_eps=pure, rule=rule,
                                     alpha_max=1e4 if self.linear else float(self.orders[-1]))
        return Certificate(epsilon=res.value, delta=d, method="rdp", error=0.0, lower_bound=None,
                           bound="upper bound", relation="add_remove", query="epsilon",
                           ledger=(self._describe(),),
                           details={"alpha": res.alpha, "rule": rule, "filter": "individual_renyi"})

    def epsilon(self, delta: float, rule: str = "improved") -> float:
        return self.certificate(delta, rule).epsilon


# --------------------------------------------------------------------------- Ind-KNN
@dataclass(frozen=True)
class IndKNNStep:
    """Released quantities of one Ind-KNN step (all public) plus the selected ids (private).

    Attributes
    ----------
    selected : ndarray of int
        Records that contributed (private: do not release).
    weights : ndarray
        Clipped kernel weights w_i of the selected records (private).
    count : float
        Released noisy neighbour count K_t after clamping to ``k_min`` (public).
    """

    selected: np.ndarray
    weights: np.ndarray
    count: float


class IndKNNFilter:
    """Ind-KNN (thesis Algorithm 4, reconstructed in docs/derivations/individual-filter.md §2) with its
    individual Renyi filter.

    Every record starts with budget B ("RDP per unit alpha").  At each query, a record is selected iff
    its kernel weight kappa_i >= tau (computed by the caller from public query and the record) and its
    remaining budget z_i >= c1 = 1/(2 sigma1^2).  Then K_t = |Sel| + N(0, sigma1^2) (clamped to k_min,
    post-processing) is released, every selected record pays c1, contributes
    w_i = min(kappa_i, sigma2 sqrt(2 K_t z_i)) times its one-hot label, and pays w_i^2 / (2 sigma2^2 K_t)
    (<= its remaining budget).  The label is argmax(sum_i w_i y_i + N(0, sigma2^2 K_t I)).

    Guarantee (thesis Thm 5.3.2): (alpha, alpha B)-RDP for all alpha, whatever the number of
    queries; certificate via :meth:`certificate`.  Selection must compare each record's own weight with
    the fixed tau (top-k selection is not allowed, docs/derivations/individual-filter.md §2).  The remaining
    budgets are private state.

    Parameters
    ----------
    n_records : int
    budget : float
        B > 0 in RDP-per-unit-alpha units (see :func:`budget_for_epsilon`).
    sigma1 : float
        Count noise (e.g. :func:`default_sigma1`).
    sigma2 : float
        Label-noise multiplier (the label noise std is sigma2 sqrt(K_t)).
    tau : float
        Minimum kernel weight in (0, 1].
    k_min : float, default 1
        Clamp of the released count (K_t <= 0 would make the noise undefined; a post-processing).
    """

    def __init__(self, n_records: int, budget: float, sigma1: float, sigma2: float, tau: float,
                 k_min: float = 1.0):
        self.n_records = V.integer("n_records", n_records, low=1)
        self.budget = V.positive("budget", budget)
        self.sigma1 = V.positive("sigma1", sigma1)
        self.sigma2 = V.positive("sigma2", sigma2)
        self.tau = V.real("tau", tau, low=0.0, high=1.0, low_open=True)
        self.k_min = V.positive("k_min", k_min)
        self.c1 = 0.5 / (self.sigma1 * self.sigma1) * _CHARGE_INFLATE
        self._z = np.full(self.n_records, self.budget)
        self._stamp = np.zeros(self.n_records, dtype=np.uint8)
        self._step = 0

    def _run(self, ids, kappas, rng, count_noise):
        idx = _as_ids(ids, self.n_records, check_range=False)
        kap = np.ascontiguousarray(np.asarray(kappas, dtype=float))
        if kap.shape != idx.shape:
            raise ValueError(f"kappas must have the shape of ids {idx.shape}, got {kap.shape}")
        gen = _next_generation(self)
        pos = np.empty(idx.size, dtype=np.int64)
        err = np.zeros(2, dtype=np.int64)
        n_sel = int(_indknn_select(self._z, idx, kap, self.tau, self.c1, self._stamp, gen, pos, err))
        if n_sel < 0:
            _raise_kernel_error(err, self.n_records, "kernel weights must lie in [0, 1]")
        noise = rng.normal(0.0, self.sigma1) if count_noise is None else float(count_noise)
        k_noisy = max(n_sel + noise, self.k_min)
        weights = np.empty(n_sel)
        _indknn_charge(self._z, idx, kap, pos, n_sel, self.c1, self.sigma2, k_noisy, weights)
        pos = pos[:n_sel]
        return pos, IndKNNStep(idx[pos], weights, float(k_noisy))

    def step(self, ids, kappas, rng: np.random.Generator | None = None,
             count_noise: float | None = None) -> IndKNNStep:
        """Select, release the noisy count and charge (thesis Algorithm 4 lines 4-9).

        Parameters
        ----------
        ids : array_like of int
            Distinct candidate records for this query (e.g. all records, or an LSH bucket union).
        kappas : array_like of float
            Their kernel weights kappa(x_i, q_t) in [0, 1].
        rng : numpy.random.Generator
            Source of the count noise (required unless ``count_noise`` is given).
        count_noise : float, optional
            Use this value instead of drawing N(0, sigma1^2) (reproducible tests).
        """
        if rng is None and count_noise is None:
            raise ValueError("give rng (a numpy Generator) or count_noise")
        return self._run(ids, kappas, rng, count_noise)[1]

    def predict(self, ids, kappas, labels, n_classes: int,
                rng: np.random.Generator) -> tuple[int, IndKNNStep]:
        """One query: :meth:`step`, then argmax(sum_i w_i onehot(y_i) + N(0, sigma2^2 K_t I)) (line 11)."""
        c = V.integer("n_classes", n_classes, low=2)
        lab = np.asarray(labels)
        if lab.shape != np.shape(ids):
            raise ValueError("labels must align with ids")
        if lab.size and (lab.dtype.kind not in "iu" or lab.min() < 0 or lab.max() >= c):
            raise ValueError(f"labels must be integers in [0, {c - 1}]")
        pos, st = self._run(ids, kappas, rng, None)
        votes = np.bincount(lab[pos].astype(np.int64), weights=st.weights, minlength=c).astype(float)
        votes += rng.normal(0.0, self.sigma2 * math.sqrt(st.count), size=c)
        return int(np.argmax(votes)), st

    def remaining(self, ids=None) -> np.ndarray:
        """Remaining budget z_i (PRIVATE: never publish)."""
        sl = slice(None) if ids is None else _as_ids(ids, self.n_records)
        return np.array(self._z[sl], copy=True)

    def rdp(self, alpha) -> np.ndarray:
        """The guarantee alpha B (all alpha > 1)."""
        return V.alphas(alpha) * self.budget

    def certificate(self, delta: float, rule: str = "improved") -> Certificate:
        """(epsilon, delta) from (alpha, alpha B)-RDP (add/remove); independent of the number of queries."""
        d = V.delta(delta)
        res = rdp_to_dp.eps_from_rdp(self.rdp, d, rule=rule)
        return Certificate(epsilon=res.value, delta=d, method="rdp", error=0.0, lower_bound=None,
                           bound="upper bound", relation="add_remove", query="epsilon",
                           ledger=(f"Ind-KNN over {self.n_records} records, budget B={self.budget:.6g} "
                                   f"(sigma1={self.sigma1:.6g}, sigma2={self.sigma2:.6g}, "
                                   f"tau={self.tau:.6g})",),
                           details={"alpha": res.alpha, "rule": rule, "filter": "ind_knn"})
