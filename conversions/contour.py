"""delta(eps) of a composition from its summed log-MGF, by inversion along a shifted line.

Source: spec 02b (shifted-line inversion) and spec 02 section 3.3 (the same identity on a Renyi line);
the error analysis below is ours and every term of it is tested against closed forms.

Identity.  For the finite part of the P-measure of the composed privacy loss L (MGF M(s) = E[e^{sL}]),
and any c > 0 with M(c) < inf,

    delta_fin(eps) = E[(1 - e^{eps - L})_+]
                   = (1/2pi) int Re[ M(c + it) e^{-(c + it) eps} / ((c + it)(c + 1 + it)) ] dt.

The total is delta(eps) = p_inf + delta_atoms(eps) + delta_F(eps) + delta_R(eps):

* p_inf = 1 - prod_j (1 - p_inf,j)^{k_j} is the composed infinite-loss mass (exact);
* the atoms of the composed measure are enumerated exactly (``conversions.atoms``);
* F, the terms with one to three exponential-piece factors times atoms, is integrated in closed form
  (``conversions.pieces``; Laplace);
* only the absolutely continuous remainder R (MGF M - prod_j A_j^{k_j} - F) is integrated
  numerically, so the integrand decays and lattice mechanisms cost nothing.

Numerics (all bounds rigorous, added on the safe side):

* trapezoid rule with step h on [0, U].  By Poisson summation the untruncated rule equals
  sum_m e^{2 pi c m / h} delta_R(eps + 2 pi m / h): every aliasing term is >= 0, so the rule
  over-estimates, by at most
      A = kappa(c') M(c') e^{-c' eps} / (e^{2pi(c'-c)/h} - 1)                    (m >= 1, any c' > c)
        + min(M_R(0) / (e^{2 pi c/h} - 1), kappa(c/2) M(c/2) e^{-c eps/2} / (e^{pi c/h} - 1))
  with kappa(x) = x^x / (1 + x)^{1 + x} (pointwise (1 - e^{-u})_+ <= kappa(x) e^{x u}).
* truncation at U: |tail| <= e^{-c eps} env_R(U) / (pi U), with env_R a non-increasing bound on
  |M_R(c + it)| built from the mechanisms' envelopes:
  prod_j (A_j(c) + C_j(c, t))^{k_j} - prod_j A_j(c)^{k_j}.
* floating point: the sum of moduli times a bound on the relative error of each node (exponent
  rounding, phase rounding, mechanisms' declared log-MGF error).

c is the saddle point of log M(c) - c eps - log(c (c + 1)) (there the integrand has the size of
delta, which gives relative accuracy down to delta ~ 1e-300).
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mechanisms.base import Mechanism, check_direction, cost_hint, envelope_cost

from . import atoms as atoms_mod
from . import pieces as pieces_mod
from ._kernels import PHASE_ANCHOR, grid_assemble, trapezoid_sum

DEFAULT_RTOL = 1e-8
MAX_NODES = 1 << 21
# total work cap per grid: sum over distinct mechanisms of (node cost hint) x nodes.  When it binds the
# truncation point is lowered and the (rigorous) bracket simply gets wider.
WORK_BUDGET = float(1 << 24)
_U64 = 1.1102230246251565e-16
# per-query limits of the whole cf query (one direction): mechanism work units (``mgf_cost`` x nodes, the
# deterministic meter) and wall-clock seconds (a backstop for mechanisms whose cost hint is off).  When
# either is reached the query returns the best certified bracket it has (the Chernoff bound, or the
# trivial one) with ``details["work_limit"]`` set: never a hang.
QUERY_WORK_LIMIT = 1.0e8
QUERY_TIME_LIMIT = 30.0
_EVAL_CHUNK = 4096  # nodes per mechanism call, so the meter is checked between chunks


class WorkLimitReached(RuntimeError):
    """The per-query work or time limit of the characteristic-function route was reached."""


class WouldBeCapped(RuntimeError):
    """Raised with ``skip_if_capped=True`` when the planned contour cannot reach its truncation target
    within the node and work caps (a wide bracket: near-atomic losses); the caller then prefers another
    route.  Costs only the plan."""


# with skip_if_capped, a plan whose truncation error (predicted from its shortfall) exceeds this fraction
# of delta is not evaluated
DEFER_PREDICTED_REL = 1e-4


def _check_plan(pld: ComposedPLD, plan: _Plan, skip_if_capped: bool, rtol: float) -> _Plan:
    if skip_if_capped and plan.log_short + math.log(rtol) > math.log(DEFER_PREDICTED_REL):
        raise WouldBeCapped(f"the contour cannot reach its accuracy within the work cap ({plan.nodes} "
                            "nodes planned)")
    return plan


def _log_kappa(x: float) -> float:
    return x * math.log(x) - (1.0 + x) * math.log1p(x)


def _log_expm1(x: float) -> float:
    if x <= 0:
        return -math.inf
    return x + math.log1p(-math.exp(-x)) if x > 30 else math.log(math.expm1(x))


def _phi(w: float, n: int) -> float:
    """e^w - sum_{m<n} w^m / m! for w >= 0 (series below 1, rounded up)."""
    if w < 1.0:
        # terms fall by w / (m + 1) < 1/3: stop once the tail (< the last term) is far below 1e-14
        term = w ** n / math.factorial(n)
        tot = term
        m = n
        while term > 1e-17 * tot:
            m += 1
            term *= w / m
            tot += term
        return tot * (1.0 + 1e-14)
    term = tot = 1.0
    for m in range(1, n):
        term *= w / m
        tot += term
    return math.exp(w) - tot


def _log_sub(a: float, b: float) -> float:
    """log(e^a - e^b), ``-inf`` when b >= a."""
    if b == -math.inf:
        return a
    if b >= a:
        return -math.inf
    return a + math.log(-math.expm1(b - a))


@dataclass(frozen=True)
class DeltaBounds:
    """delta(eps) with a rigorous bracket: ``lower <= delta_true <= upper`` (for the pair)."""

    epsilon: float
    estimate: float
    lower: float
    upper: float
    direction: str = "remove"
    details: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True)
class EpsilonBounds:
    """eps(delta): ``upper`` is certified (delta(upper) <= target); ``lower`` satisfies
    delta_lower(lower) >= target, so the pair's true eps(delta) lies in [lower, upper]."""

    delta: float
    estimate: float
    lower: float
    upper: float
    direction: str = "remove"
    details: dict = field(default_factory=dict, compare=False)


class ComposedPLD:
    """The symbolic composition sum_j k_j log M_j for one direction, evaluated lazily.

    Parameters
    ----------
    entries : sequence of (mechanism, count)
        Mechanisms with ``pld_available``; counts are non-negative integers.
    direction : {"remove", "add"}
    """

    def __init__(self, entries: Sequence[tuple[Mechanism, int]], direction: str = "remove"):
        check_direction(direction)
        self.direction = direction
        self.entries = [(m, int(k)) for m, k in entries if int(k) > 0]
        self._counts = [k for _, k in self.entries]
        self._costs = [cost_hint(m) for m, _ in self.entries]  # (t, c, direction) -> cost per point
        for m, _ in self.entries:
            if not m.pld_available:
                raise ValueError(f"{m.describe()} has no privacy-loss distribution")
        self.log_keep = sum(k * math.log1p(-m.infinite_loss_mass) for m, k in self.entries)
        self.p_inf = max(0.0, -math.expm1(self.log_keep))
        self.mgf_err = sum(k * m.log_mgf_error for m, k in self.entries)
        # entries whose declared error depends on the line (conversions.split.Remainder)
        self._err_at = [(m, k) for m, k in self.entries if hasattr(m, "log_mgf_error_at")]
        self._err_at_cache: dict = {}
        self.max_order = min([m.max_mgf_order for m, _ in self.entries], default=math.inf)
        self._env_cache: dict = {}  # per-line envelope functions of this composition (query-local)
        self._work_left = math.inf  # per-query meter (start_query); unlimited outside queries
        self._deadline = math.inf
        # TV cap: delta(eps) <= TV(prod P, prod Q) <= 1 - prod_j (1 - TV_j)^{k_j} for eps >= 0
        tvs = [m.total_variation(direction) for m, _ in self.entries]
        for tv, (m, _) in zip(tvs, self.entries, strict=True):
            if tv is not None and not 0.0 <= tv <= 1.0:  # (also rejects NaN) a bad cap would be unsound
                raise ValueError(f"{m.describe()}: total_variation must lie in [0, 1], got {tv!r}")
        self.tv_bound: float | None = None
        if self.entries and all(tv is not None for tv in tvs):
            log_keep_tv = sum(k * math.log1p(-min(float(tv), 1.0)) if tv < 1.0 else -math.inf
                              for tv, (_, k) in zip(tvs, self.entries, strict=True))
            self.tv_bound = min(1.0, -math.expm1(log_keep_tv) * (1.0 + 1e-12))
        # atoms of each mechanism and of the composition
        self._atoms_j = []
        all_atomic = True
        for m, _ in self.entries:
            l, w = m.pld_atoms(direction)
            self._atoms_j.append((np.asarray(l, float), np.asarray(w, float)))
            if len(l) == 0:
                all_atomic = False
        self.has_atoms = all_atomic and bool(self.entries)
        self.atoms: atoms_mod.Atoms | None = None
        self.atoms_exact = False
        powers: dict = {}  # (entry, exponent) -> Atoms, reused by the closed-form terms below
        singles: dict = {}  # entry -> its own atoms
        log_fact = None
        if self.has_atoms:
            comp: atoms_mod.Atoms | None = atoms_mod.Atoms(np.array([0.0]), np.array([0.0]))
            log_fact = atoms_mod.shared_log_factorials(max(k for _, k in self.entries))
            for j, ((l, w), (m, k)) in enumerate(zip(self._atoms_j, self.entries, strict=True)):
                singles[j] = atoms_mod.single(l, w, m.log_mgf_error)
                pk = powers[j, k] = atoms_mod.power(singles[j], k, log_fact)
                comp = None if (pk is None or comp is None) else atoms_mod.convolve(comp, pk)
                if comp is None:
                    break
            self.atoms = comp
            self.atoms_exact = comp is not None
            # atoms that cannot be enumerated (too many distinct losses) stay in the contour's
            # integrand: subtracting their MGF there without adding their delta back would drop them
            self.has_atoms = self.atoms_exact
        # low-order terms (one to three continuous factors with exponential-piece densities, times
        # the atoms of every other factor) are integrated in closed form (conversions.pieces): they
        # are the slowly decaying (1/|t| to 1/|t|^3) part of the remainder
        self.closed_terms: list = []
        self.closed_order = 0
        self._pieces_j = [None] * len(self.entries)
        if self.atoms_exact:
            for j, (m, _) in enumerate(self.entries):
                pc = m.pld_exp_pieces(direction)
                if pc is not None:
                    self._pieces_j[j] = pieces_mod.check_pieces(pc, m)
            if any(p is not None for p in self._pieces_j):
                self.closed_terms, self.closed_order = pieces_mod.build_terms(
                    self._counts, self._atoms_j, self._pieces_j, powers, log_fact, singles)
        self._closed_set = {i for i, p in enumerate(self._pieces_j) if p is not None} \
            if self.closed_order else set()
        # no contour part: purely atomic, or atoms plus at most `closed_order` piece factors (only
        # possible when every factor has atoms; the envelope test can be costly, so ask only then)
        self.purely_atomic = False
        if self.atoms_exact:
            cont = [(j, k) for j, (m, k) in enumerate(self.entries)
                    if m.log_continuous_envelope(1.0, 0.0, direction) > -math.inf]
            n_cont = sum(k for _, k in cont)
            self.purely_atomic = n_cont == 0 or (
                n_cont <= self.closed_order and all(j in self._closed_set for j, _ in cont))

    def mgf_err_at(self, c: float) -> float:
        """The declared log-MGF error (sum_j k_j err_j) on the line Re s = c: ``mgf_err`` unless an entry
        declares a line-dependent error (``log_mgf_error_at(c, direction)``)."""
        if not self._err_at:
            return self.mgf_err
        v = self._err_at_cache.get(c)
        if v is None:
            v = self.mgf_err + sum(k * (m.log_mgf_error_at(c, self.direction) - m.log_mgf_error)
                                   for m, k in self._err_at)
            self._err_at_cache[c] = v
        return v

    @functools.cached_property
    def atoms_log_mass(self) -> float:
        """log of the total mass of the enumerated (kept) atoms (``-inf`` if none)."""
        if self.atoms is None or self.atoms.size == 0:
            return -math.inf
        return float(np.logaddexp.reduce(self.atoms.logw))

    @functools.cached_property
    def log_mass_r(self) -> float:
        """log of the mass outside the atoms, M(0) - A(0) (the finite part of the remainder and F)."""
        m0 = self.log_mgf_real(0.0)
        if not self.has_atoms:
            return m0
        return _log_sub(m0, float(self.log_atoms_mgf(np.array([0j]))[0].real))

    def log_pieces_j(self, s: np.ndarray) -> dict[int, np.ndarray]:
        """{j: log C_j(s)} for the entries whose continuous part is given as exponential pieces."""
        from mechanisms._numerics import exp_pieces_log_mgf

        s = np.asarray(s, dtype=complex)
        return {i: exp_pieces_log_mgf(s, *self._pieces_j[i]) for i in self._closed_set}

    @functools.cached_property
    def term_matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(log coefficients, factor multiplicities, atom exponents) of the closed-form terms: term q is
        e^{coef_q} prod_j C_j^{fmult[q, j]} A_j^{emult[q, j]}."""
        n_j = len(self.entries)
        coefs = np.array([t.log_coef for t in self.closed_terms], dtype=float)
        fmult = np.zeros((len(self.closed_terms), n_j), dtype=np.int64)
        emult = np.zeros((len(self.closed_terms), n_j), dtype=np.int64)
        for q, term in enumerate(self.closed_terms):
            for i in term.factors:
                fmult[q, i] += 1
            emult[q] = term.exponents
        return coefs, fmult, emult

    def closed_mgf_scaled(self, s: np.ndarray, shift: float = 0.0,
                          log_a: list[np.ndarray] | None = None,
                          log_c: dict[int, np.ndarray] | None = None) -> np.ndarray:
        """MGF of the closed-form low-order terms times e^{-shift} (each |term| <= M(Re s)); 0 if none."""
        s = np.asarray(s, dtype=complex)
        log_a = self.log_atoms_j(s) if log_a is None else log_a
        log_c = self.log_pieces_j(s) if log_c is None else log_c
        out = np.zeros(s.shape, dtype=complex)
        for term in self.closed_terms:
            out += np.exp(pieces_mod.term_log_mgf(term, s, log_a, log_c) - shift)
        return out

    def start_query(self, work_limit: float = QUERY_WORK_LIMIT, time_limit: float = QUERY_TIME_LIMIT) -> None:
        """Reset the per-query meter: mechanism evaluations beyond the limits raise WorkLimitReached."""
        self._work_left = work_limit
        self._deadline = time.monotonic() + time_limit

    def stop_query(self) -> None:
        self._work_left = math.inf
        self._deadline = math.inf

    def _charge(self, units: float) -> None:
        self._work_left -= units
        if self._work_left < 0.0 or time.monotonic() > self._deadline:
            raise WorkLimitReached("the characteristic-function route reached its per-query work limit")

    def work(self, u: float, h: float, c: float = 0.0) -> float:
        """Estimated cost of evaluating the composed MGF at the nodes c + i t, t = 0, h, ..., u."""
        return (u / h + 1.0) * sum(cost(u, c, self.direction) for cost in self._costs)

    # ------------------------------------------------------------------ MGF pieces
    def log_mgf_j(self, s: np.ndarray, log_a: list[np.ndarray] | None = None,
                  log_c: dict[int, np.ndarray] | None = None) -> list[np.ndarray]:
        """[log M_j(s)] for every entry (complex s, array).

        With the atoms' and pieces' log-MGFs of the closed-form entries at the same s (``log_a``,
        ``log_c``), those entries use M_j = A_j + C_j (exact by the ``pld_exp_pieces`` contract).
        """
        from mechanisms._numerics import complex_logaddexp

        s = np.asarray(s, dtype=complex)
        out = []
        for j, (m, _) in enumerate(self.entries):
            if log_c is not None and log_a is not None and j in log_c and s.ndim == 1:
                out.append(complex_logaddexp(log_a[j], log_c[j]))
            else:
                # in chunks, so the per-query meter is checked between mechanism calls
                flat, parts = s.ravel(), []
                for i in range(0, flat.size, _EVAL_CHUNK):
                    chunk = flat[i:i + _EVAL_CHUNK]
                    t_c = float(np.max(np.abs(chunk.imag))), float(np.max(np.abs(chunk.real)))
                    self._charge(chunk.size * self._costs[j](*t_c, self.direction))
                    parts.append(np.asarray(m.log_mgf(chunk, self.direction), dtype=complex))
                out.append(np.concatenate(parts).reshape(s.shape) if parts
                           else np.empty(s.shape, dtype=complex))
        return out

    def log_mgf(self, s: np.ndarray, log_a: list[np.ndarray] | None = None,
                log_c: dict[int, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(sum_j k_j log M_j(s), sum_j |k_j log M_j(s)|) for complex s (array); see :meth:`log_mgf_j`."""
        s = np.asarray(s, dtype=complex)
        tot = np.zeros(s.shape, dtype=complex)
        mag = np.zeros(s.shape)
        for lm, (_, k) in zip(self.log_mgf_j(s, log_a, log_c), self.entries, strict=True):
            v = k * lm.real + 1j * (k * lm.imag)  # keeps -inf + 0j (|M| underflow) free of NaN
            tot += v
            mag += np.abs(v)
        return tot, mag

    def log_mgf_real(self, c: float) -> float:
        if c >= self.max_order:
            return math.inf
        v = 0.0
        for (m, k), cost in zip(self.entries, self._costs, strict=True):
            self._charge(cost(0.0, c, self.direction))
            lm = m.log_mgf_real(c, self.direction)
            if lm == -math.inf:
                return -math.inf
            v += k * lm
        return v if not math.isnan(v) else math.inf

    def log_atoms_j(self, s: np.ndarray) -> list[np.ndarray]:
        """[log A_j(s)] for every entry (each mechanism's own atoms)."""
        from mechanisms._numerics import discrete_log_mgf

        s = np.asarray(s, dtype=complex)
        return [discrete_log_mgf(s, l, w) if len(l) else np.full(s.shape, -np.inf + 0j)
                for l, w in self._atoms_j]

    def log_atoms_mgf(self, s: np.ndarray, log_a: list[np.ndarray] | None = None) -> np.ndarray:
        """sum_j k_j log A_j(s) (``-inf`` real part when some mechanism has no atoms)."""
        s = np.asarray(s, dtype=complex)
        if not self.has_atoms:
            return np.full(s.shape, -np.inf + 0j)
        log_a = self.log_atoms_j(s) if log_a is None else log_a
        tot = np.zeros(s.shape, dtype=complex)
        for la, (_, k) in zip(log_a, self.entries, strict=True):
            tot += k * la
        return tot

    def _env_fn(self, m: Mechanism, c: float):
        key = (id(m), c)
        fn = self._env_cache.get(key)
        if fn is None:
            self._charge(envelope_cost(m, c, self.direction))
            fn = self._env_cache[key] = m.log_envelope_fn(c, self.direction)
        return fn

    def log_env_r(self, c: float, t: float) -> float:
        """log of a bound on |M_R(c + it')| for all |t'| >= t (non-increasing in t).

        M_R = prod_j (A_j + C_j)^{k_j} - prod_j A_j^{k_j} - F (F: the closed-form terms of orders 1 to
        n = ``closed_order`` <= 3).  Expanding the product, every remaining term is a monomial with
        non-negative coefficients in (A_j, C_j), so with |A_j(c + it)| <= a_j = A_j(c) and
        |C_j(c + it')| <= b_j = envelope_j(t):
        |M_R| <= prod_j a_j^{k_j} T,  T = prod_j (1 + x_j)^{k_j} - 1 - e_1 - ... - e_n,  x = b / a,
        e_d the elementary symmetric polynomial of degree d of the closed-form copies' x.  T is
        evaluated directly when that does not cancel and otherwise bounded, coefficient-wise from
        prod (1 + x)^k <= e^{sum k x}, by e^z (e^y - 1 - y) + (e^z - 1)(1 + y) (order 1) or
        phi_{n+1}(w) + sum_{d <= n} (w^d - y^d) / d! (orders n = 2, 3); y = sum_F k x, z = the rest,
        w = y + z, phi_n = e^w - sum_{<n}.
        """
        key = ("line", c)
        line = self._env_cache.get(key)
        if line is None:
            with np.errstate(divide="ignore"):  # (atoms of underflowed mass 0 contribute -inf)
                log_a = [float(np.logaddexp.reduce(np.log(w) + c * l)) if len(l) else -math.inf
                         for l, w in self._atoms_j]
            la = (sum(k * v for v, (_, k) in zip(log_a, self.entries, strict=True)) if self.has_atoms
                  else -math.inf)
            # |M_R(c+it)| <= (M - A)(c) for every t (R is a non-negative measure, part of M - A)
            fns = [self._env_fn(m, c) for m, _ in self.entries]
            line = self._env_cache[key] = (log_a, la, _log_sub(self.log_mgf_real(c), la), fns)
        log_a, la, m_r, fns = line
        log_b = [float(f(t)) for f in fns]
        fo = self._closed_set
        lx = [lb - la_j for lb, la_j in zip(log_b, log_a, strict=True)]
        if fo and max(lx) < 30.0:
            x = [math.exp(v) for v in lx]
            ks = self._counts
            big_s = 0.0
            y = z = 0.0
            for j, (k, xj) in enumerate(zip(ks, x, strict=True)):
                big_s += k * math.log1p(xj)
                if j in fo:
                    y += k * xj
                else:
                    z += k * xj
            if big_s > 30.0:  # T < e^S, and the subtracted terms are negligible at this size
                return min(la + big_s, m_r)
            em = math.expm1(big_s)
            order = self.closed_order
            if order >= 2:
                # the subtracted terms of order n are the elementary symmetric polynomials e_n of the
                # closed-form copies' x (prod_F (1 + x T)^k up to T^order; non-negative, no cancellation)
                e1 = e2 = e3 = 0.0
                for i in fo:
                    k, xi = ks[i], x[i]
                    c1 = k * xi
                    c2 = 0.5 * k * (k - 1) * xi * xi
                    c3 = k * (k - 1) * (k - 2) / 6.0 * xi * xi * xi
                    e1, e2, e3 = e1 + c1, e2 + e1 * c1 + c2, e3 + e2 * c1 + e1 * c2 + c3
                removed = e1 + e2 + (e3 if order >= 3 else 0.0)
                t1 = em - removed + 1e-13 * (em + removed)
                w = y + z
                if w < 700.0:
                    # coefficient-wise: e^w minus its pure-F monomials of degree <= order, where
                    # w^d - y^d = z (w^{d-1} + ... + y^{d-1}) has no cancellation
                    t2 = _phi(w, order + 1) + z * (1.0 + 0.5 * (w + y))
                    if order >= 3:
                        t2 += z * (w * w + w * y + y * y) / 6.0
                else:
                    t2 = math.inf
            else:
                t1 = em - y + 1e-13 * (em + y)
                t2 = (math.exp(z) * _phi(y, 2) + math.expm1(z) * (1.0 + y)
                      if max(y, z) < 700.0 else math.inf)
            tt = min(t1, t2)
            bound = la + math.log(tt) if tt > 0.0 else -math.inf
            return min(bound, m_r)
        lt = 0.0
        for lav, lb, (_, k) in zip(log_a, log_b, self.entries, strict=True):
            tot = float(np.logaddexp(lav, lb))
            if tot == -math.inf:
                return -math.inf
            lt += k * tot
        return min(_log_sub(lt, la), m_r)

    # ------------------------------------------------------------------ choice of the line
    def saddle(self, eps: float) -> float:
        """c > 0 minimising log M(c) - c eps - log(c (c + 1))."""
        cmax = min(self.max_order * 0.98, 1e5)

        def g(x: float) -> float:
            c = math.exp(x)
            v = self.log_mgf_real(c) - c * eps - math.log(c * (c + 1.0))
            return v if math.isfinite(v) else 1e300

        # the line is then snapped to a 2^(1/4) grid (a 19 % step in c): 1 % accuracy is ample
        x, _ = _minimize_bounded(g, math.log(1e-6), math.log(cmax), 1e-2)
        return float(math.exp(x))

    def saddle_near(self, eps: float, c_start: float) -> float:
        """:meth:`saddle` by a few Newton steps in log c from ``c_start`` (finite differences; falls back
        to the bounded search when the function is not convex there).  5 % accuracy suffices: the
        line is snapped to a 2^(1/4) grid."""
        cmax = min(self.max_order * 0.98, 1e5)

        def g(x: float) -> float:
            c = math.exp(x)
            return self.log_mgf_real(c) - c * eps - math.log(c * (c + 1.0))

        x = math.log(c_start)
        d = 0.02
        for _ in range(6):
            if not (math.log(1e-6) < x - d and x + d < math.log(cmax)):
                break
            g0, gp, gm = g(x), g(x + d), g(x - d)
            curv = (gp - 2.0 * g0 + gm) / (d * d)
            slope = (gp - gm) / (2.0 * d)
            if not (math.isfinite(curv) and math.isfinite(slope) and curv > 0.0):
                break
            step = max(min(-slope / curv, 1.0), -1.0)
            x += step
            if abs(step) < 0.01:
                return math.exp(x)
        return self.saddle(eps)

    def chernoff_log_delta(self, c: float, eps: float) -> float:
        """log of kappa(c) M(c) e^{-c eps}: a rigorous bound on delta_fin(eps)."""
        return _log_kappa(c) + self.log_mgf_real(c) - c * eps


@dataclass(frozen=True)
class _Plan:
    c: float
    h: float
    cp: float
    u: float
    h_from_upper: bool = False  # the step is set by the aliasing of the lines above c
    log_short: float = -math.inf  # log(truncation bound / its target) at u: > 0 when the caps bound u

    @property
    def nodes(self) -> int:
        return int(math.ceil(self.u / self.h)) + 1


def _aliasing_step(x: float) -> float:
    """Smallest y with e^y - 1 >= e^x (so a geometric aliasing sum stays below the target)."""
    return math.log1p(math.exp(x)) if x < 700 else x


def _plan(pld: ComposedPLD, c: float, eps_ref: float, log_target: float) -> _Plan | None:
    """Step h (aliasing bound) and truncation U (envelope bound) for the line Re s = c."""
    lm = pld.log_mgf_real
    shift = lm(c)
    if not math.isfinite(shift):
        return None
    lam = log_target - math.log(4.0)
    best = None
    # far lines matter for bounded losses, where log M(c') grows only linearly and allows large steps
    cands = ({c * f for f in (1.25, 1.5, 2.0, 3.0, 10.0, 30.0)}
             | {c + d for d in (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 32.0, 128.0, 512.0)})
    for cp in sorted(cands):
        if cp >= pld.max_order:
            continue
        b = _log_kappa(cp) + lm(cp) - cp * eps_ref
        if not math.isfinite(b):
            continue
        h = 2.0 * math.pi * (cp - c) / max(_aliasing_step(b - lam), 1e-12)
        if best is None or h > best[0]:
            best = (h, cp)
    if best is None:
        return None
    h_up, cp = best
    h_low1 = 2 * math.pi * c / max(_aliasing_step(pld.log_mass_r - lam), 1e-12)
    b2 = _log_kappa(c / 2) + lm(c / 2) - c * eps_ref / 2
    h_low2 = math.pi * c / max(_aliasing_step(b2 - lam), 1e-12)
    h = min(h_up, max(h_low1, h_low2))
    scale_log = shift - c * eps_ref
    u = max(8 * h, 1e-3)
    while True:
        log_t = pld.log_env_r(c, u) - shift - math.log(math.pi * u) + scale_log
        if log_t <= lam or 2.0 * u / h > MAX_NODES or pld.work(2.0 * u, h, c) > WORK_BUDGET:
            break  # (the next doubling would exceed the node or work cap: stop below it)
        u *= 2.0
    return _Plan(c, h, cp, min(u, h * MAX_NODES), h_up < max(h_low1, h_low2), log_t - lam)


def _best_plan(pld: ComposedPLD, eps_ref: float, log_target: float,
               c_hint: float | None = None) -> _Plan:
    """Among lines near the saddle point, the one needing the fewest nodes.

    Lines far above the saddle make the integrand much larger than delta (floating-point error grows
    with that ratio), so only lines whose integrand scale is within 1e4 of the saddle's are considered.
    ``c_hint`` (e.g. the Chernoff-optimal line) starts a local saddle search instead of a global one.
    """
    c0 = pld.saddle(eps_ref) if c_hint is None else pld.saddle_near(eps_ref, c_hint)
    # snap to a 2^(1/4) grid: lines a few % off the saddle are as good, and a refinement pass at a
    # nearby eps then reuses the per-line envelope constants (costly for numerical mechanisms)
    c_snap = 2.0 ** (round(4.0 * math.log2(c0)) / 4.0)
    if c_snap < pld.max_order * 0.98:
        c0 = c_snap

    def g(c: float) -> float:
        return pld.log_mgf_real(c) - c * eps_ref - math.log(c * (c + 1.0))

    g0 = g(c0)
    best = _plan(pld, c0, eps_ref, log_target)
    if best is not None and best.nodes > 128 and best.h_from_upper:
        # the aliasing step shrinks fast above the saddle when M grows steeply (subsampled Gaussian
        # at small q): when that bound sets the step, one or two grid steps below often need far
        # fewer nodes
        for f in (2.0 ** -0.25, 2.0 ** -0.5):
            c = c0 * f
            if g(c) - g0 > math.log(1e4):
                break
            p = _plan(pld, c, eps_ref, log_target)
            if p is None or p.nodes >= best.nodes:
                break
            best = p
    if best is not None and best.nodes <= 2048 and pld.work(best.u, best.h, best.c) <= WORK_BUDGET / 2:
        return best  # the line is cheap and uncapped: skip the wider search (each plan costs envelopes)
    for c in sorted({c0 * f for f in (2.0, 4.0)} | {1.0, 2.0, 4.0}):
        if c <= 0 or c >= pld.max_order or (c != c0 and g(c) - g0 > math.log(1e4)):
            continue
        p = _plan(pld, c, eps_ref, log_target)
        if p is not None and (best is None or p.nodes < best.nodes):
            best = p
    if best is None:
        raise ValueError("the composed MGF is infinite just above the contour; cannot invert")
    return best


class _Grid:
    """Nodes and pre-computed integrand values on the line Re s = c (independent of eps)."""

    def __init__(self, pld: ComposedPLD, plan: _Plan):
        self.pld = pld
        c = self.c = plan.c
        self.h, self.cp = plan.h, plan.cp
        lm = pld.log_mgf_real
        self.shift = lm(c)
        self.log_kappa_mcp = _log_kappa(self.cp) + lm(self.cp)
        self.log_mass_r = pld.log_mass_r
        self.log_kappa_mhalf = _log_kappa(c / 2) + lm(c / 2)
        n = plan.nodes - 1
        self.t = self.h * np.arange(n + 1, dtype=float)
        self.u_trunc = float(self.t[-1] + self.h)  # first omitted node
        s = c + 1j * self.t
        log_a = pld.log_atoms_j(s) if pld.has_atoms else None
        log_c = pld.log_pieces_j(s) if pld.closed_terms else None
        n_j = len(pld.entries)
        lm = np.empty((n_j, s.size), dtype=complex)
        for j, v in enumerate(pld.log_mgf_j(s, log_a, log_c)):
            lm[j] = v
        # R = M - A - F in one pass (rounding is relative to the terms' moduli, not the difference)
        self.r_re, self.r_im = np.empty(s.size), np.empty(s.size)
        counts = np.asarray(pld._counts, dtype=float)
        if pld.has_atoms:
            la = np.zeros((n_j, s.size), dtype=complex)
            for j, v in enumerate(log_a):
                la[j] = v
            lc = np.zeros((n_j, s.size if log_c else 1), dtype=complex)
            for j, v in (log_c or {}).items():
                lc[j] = v
            mag_max, sum_kern, sum_kern_mag = grid_assemble(
                lm, counts, float(self.shift), float(c), self.t, self.r_re, self.r_im, la, lc,
                *pld.term_matrices)
        else:  # (no atoms: no closed-form terms either; the kernel without its atoms part)
            mag_max, sum_kern, sum_kern_mag = grid_assemble(
                lm, counts, float(self.shift), float(c), self.t, self.r_re, self.r_im)
        self.sum_kern = sum_kern * self.h / math.pi
        self.sum_kern_mag = sum_kern_mag * self.h / math.pi
        self.log_env_u = pld.log_env_r(c, self.u_trunc)
        self.mgf_err = pld.mgf_err_at(c)
        self.node_log_err = 4 * _U64 * (mag_max + abs(self.shift) + 10.0) + self.mgf_err
        if not np.all(np.isfinite(self.r_re)) or not np.all(np.isfinite(self.r_im)):
            raise FloatingPointError("non-finite log-MGF values on the contour")

    def delta_r(self, eps: float) -> tuple[float, float, float, float]:
        """(log scale, S, lower error, upper error) with delta_R in [e^scale (S - lo), e^scale (S + up)]."""
        c, h = self.c, self.h
        s, sa = trapezoid_sum(self.t, self.r_re, self.r_im, c, float(eps))
        s *= h / math.pi
        sa *= h / math.pi
        log_scale = self.shift - c * eps
        trunc = math.exp(self.log_env_u - self.shift) / (math.pi * self.u_trunc)
        # aliasing, relative to e^{log_scale}
        a_up = math.exp(min(self.log_kappa_mcp - self.cp * eps - log_scale
                            - _log_expm1(2 * math.pi * (self.cp - c) / h), 700))
        a_lo1 = self.log_mass_r - log_scale - _log_expm1(2 * math.pi * c / h)
        a_lo2 = self.log_kappa_mhalf - c * eps / 2 - log_scale - _log_expm1(math.pi * c / h)
        a_lo = math.exp(min(min(a_lo1, a_lo2), 700))
        # floating point: every node term carries a relative error (exponent and phase rounding,
        # summation) w.r.t. the magnitudes before the M - A subtraction; the mechanisms' declared
        # log-MGF errors are relative to M(Re s), i.e. bounded by expm1(err) on the scaled line.
        phase = _U64 * 4 * (self.u_trunc * abs(eps) + abs(c * eps))
        # (exponents capped at 700: beyond, the error bound is astronomically large, i.e. the bracket
        # becomes the trivial [0, 1] instead of an OverflowError, e.g. for GNMax(sigma=1e-8))
        rel = (math.expm1(min(self.node_log_err - self.mgf_err + phase, 700.0))
               + _U64 * (self.t.size + 4.0 + 4.0 * PHASE_ANCHOR))  # (+ the phase rotations)
        fp = (self.sum_kern_mag * rel + self.sum_kern * math.expm1(min(self.mgf_err, 700.0))
              + sa * 4 * _U64)
        return log_scale, s, trunc + a_up + a_lo + fp, trunc + fp


def _exp_up(lx: float) -> float:
    """An upper bound on e^{lx} (true value of the float lx), capped at 1: exp's rounding (< 1 ulp, also
    for subnormal results) covered by a relative margin and one step up."""
    if lx >= 0.0:
        return 1.0
    if lx == -math.inf:
        return 0.0
    return min(1.0, math.nextafter(math.exp(lx) * (1.0 + 4.0 * _U64), math.inf))


def _exp_dn(lx: float) -> float:
    """A lower bound on e^{lx}, in [0, 1]."""
    if lx == -math.inf:
        return 0.0
    return max(0.0, math.nextafter(math.exp(min(lx, 0.0)) * (1.0 - 4.0 * _U64), 0.0))


def _add_up(*xs: float) -> float:
    """An upper bound on the exact sum of non-negative floats (each addition rounds by <= 1/2 ulp)."""
    tot = math.fsum(xs)
    return math.nextafter(tot, math.inf) if tot > 0.0 else 0.0


def _combine(pld: ComposedPLD, grid: _Grid | None, eps: float) -> tuple[float, float, float, dict]:
    """(estimate, lower, upper) of delta(eps) for one direction.

    delta = p_inf + delta_atoms (exact) + delta_R (contour, bracketed); delta_R >= 0 always.  Every
    floating-point step rounds the upper end up and the lower end down (``_exp_up``, ``_exp_dn``,
    the atoms' ``log_delta_bounds``); lower <= upper <= 1 always.
    """
    def unscale(x: float, up: bool) -> float:  # x * e^{log_scale} in [0, 1], rounded up or down
        if x <= 0.0:
            return 0.0
        lx = math.log(x) + log_scale
        m = 2.0 * _U64 * (abs(math.log(x)) + abs(log_scale) + 1.0)  # rounding of the log and the sum
        return _exp_up(lx + m) if up else _exp_dn(lx - m)

    log_floor = -math.inf
    if grid is not None:
        log_scale, s, lo_err, up_err = grid.delta_r(eps)
        r_est, r_up, r_lo = unscale(s, False), unscale(s + up_err, True), unscale(s - lo_err, False)
        # exact parts whose whole mass is below e^-32 (1.3e-14) of the contour part are not
        # integrated (nor enumerated): their delta, between 0 and that mass, widens the bracket on the
        # upper side by a relative 1e-14 at most per part, far below the target accuracy
        if r_up > 0.0:
            log_floor = math.log(r_up) - 32.0
    # p_inf = -expm1(log_keep): log_keep is a sum of k_j log1p(-p_j) (a few ulps each, relative)
    p_up = p_lo = base = pld.p_inf
    if base > 0.0:
        p_up = base * (1.0 + 8.0 * _U64 * (len(pld.entries) + 2.0))
        p_lo = base * (1.0 - 8.0 * _U64 * (len(pld.entries) + 2.0))
    base_up, base_lo = [p_up], [p_lo]
    extra_up = extra_lo = 0.0
    if pld.atoms is not None and pld.atoms_exact:
        if pld.atoms_log_mass < log_floor:
            extra_up = _exp_up(pld.atoms_log_mass + pld.atoms.log_err + 1e-12)
        else:
            la = atoms_mod.log_delta(pld.atoms, eps)
            if la > -math.inf:
                base += math.exp(la)
            # exact atoms bracketed: losses within loss_err (and merged ones moved up by merge_shift),
            # log-masses within log_err, the kernel's rounding
            a_lo, a_up = atoms_mod.log_delta_bounds(pld.atoms, eps)
            base_up.append(_exp_up(a_up))
            base_lo.append(_exp_dn(a_lo))
        # pruned atoms (upper side)
        extra_up += pld.atoms.dropped_mass
        if pld.closed_terms:
            lf, f_up, _ = pieces_mod.log_delta(pld.closed_terms, eps, log_floor, side=1)
            lf_lo, _, f_lo = pieces_mod.log_delta(pld.closed_terms, eps, log_floor, side=-1)
            if lf > -math.inf:
                base += math.exp(lf)
                base_up.append(_exp_up(lf))
            if lf_lo > -math.inf:
                base_lo.append(_exp_dn(lf_lo))
            extra_up += f_up
            extra_lo += f_lo
    details: dict = {}
    b_up = _add_up(*base_up, extra_up)
    b_lo = math.nextafter(max(math.fsum(base_lo) - extra_lo, 0.0), 0.0)
    if grid is None:
        upper = min(1.0, b_up)
        lower = min(b_lo, upper)
        return min(max(base, lower), upper), lower, upper, details
    details = {"c": grid.c, "h": grid.h, "nodes": int(grid.t.size), "U": grid.u_trunc,
               "error_rel": (r_up - r_lo) / max(base + r_est, 1e-300)}
    upper = min(1.0, _add_up(b_up, r_up))
    lower = min(math.nextafter(b_lo + r_lo, 0.0) if b_lo + r_lo > 0.0 else 0.0, upper)
    est = min(max(base + r_est, lower), upper)
    return est, lower, upper, details


def _floor(eps: float) -> float:
    """(1 - e^eps)_+, the smallest possible delta at eps (0 for eps >= 0; no overflow), rounded down."""
    return 0.0 if eps >= 0.0 else -math.expm1(eps) * (1.0 - 4 * _U64)


_LIMIT_WARNING = ("the characteristic-function route reached its per-query work limit; the bracket is "
                  "the {what} bound, valid but loose")
# what the fallback may still spend on a Chernoff bound after the limit was reached
_FALLBACK_WORK, _FALLBACK_TIME = 2.0e6, 0.5
_TINY = 5e-324  # the smallest positive double


def _metered(pld: ComposedPLD, work_limit: float, fn, time_limit: float = QUERY_TIME_LIMIT):
    """``fn()`` under the per-query meter; None when it reached the limit (or, for the fallbacks' own
    small budget, could not be evaluated).  A bracket result records the work it used in its details."""
    pld.start_query(work_limit, time_limit)
    try:
        res = fn()
    except WorkLimitReached:
        return None
    except (ValueError, ArithmeticError):
        if work_limit == _FALLBACK_WORK:
            return None
        raise
    finally:
        left = pld._work_left
        pld.stop_query()
    if isinstance(res, (DeltaBounds, EpsilonBounds)):
        res.details["work"] = work_limit - left
    return res


def _cheap_chernoff_margin(pld: ComposedPLD, c: float, eps: float, log_value: float) -> float:
    """Rounding allowance of a float Chernoff exponent log kappa(c) + log M(c) - c eps without new MGF
    evaluations: |log M(c)| <= |value| + |log kappa(c)| + |c eps|, and a few ulps per summand."""
    lk = abs(_log_kappa(c))
    mag = abs(log_value) + lk + abs(c * eps)
    return 64.0 * _U64 * (len(pld.entries) + 4.0) * (1.0 + lk + mag + abs(c * eps))


def delta_bounds(pld: ComposedPLD, eps: float, rtol: float = DEFAULT_RTOL, *,
                 skip_if_capped: bool = False, work_limit: float | None = None) -> DeltaBounds:
    """Certified bracket on delta(eps) of the composed pair (one direction).

    ``skip_if_capped=True`` raises :class:`WouldBeCapped` after planning (no grid evaluated) when the
    contour would need more than the work cap (the router then prefers the discretised-PLD route).
    Bounded work: past ``work_limit`` (default :data:`QUERY_WORK_LIMIT`; or :data:`QUERY_TIME_LIMIT`,
    a wall-clock backstop for mechanisms whose cost hints are off) the bracket is the
    Chernoff bound (or, if even that is too costly, the total-variation / trivial bound) with
    ``details["work_limit"] = True`` and a warning in ``details["warning"]``.
    """
    res = _metered(pld, QUERY_WORK_LIMIT if work_limit is None else work_limit,
                   lambda: _delta_bounds(pld, eps, rtol, skip_if_capped))
    if res is not None:
        return res
    up = 1.0 if (pld.tv_bound is None or eps < 0.0) else pld.tv_bound
    what = "total-variation" if up < 1.0 else "trivial"

    def chernoff() -> float:
        c = pld.saddle(eps)
        log_ch = pld.chernoff_log_delta(c, eps) + pld.mgf_err_at(c)
        return log_ch + _cheap_chernoff_margin(pld, c, eps, log_ch)

    log_ch = _metered(pld, _FALLBACK_WORK, chernoff, _FALLBACK_TIME)
    if log_ch is not None and log_ch < 0.0 and pld.p_inf + math.exp(log_ch) < up:
        # (never 0: the Chernoff value may underflow while the true delta is positive)
        up = max(min(1.0, (pld.p_inf + math.exp(log_ch)) * (1.0 + 8 * _U64)), _TINY)
        what = "Chernoff"
    lo = min(max(_floor(eps), pld.p_inf * (1.0 - 8 * _U64)), up)  # (p_inf rounded down)
    return DeltaBounds(eps, up, lo, up, pld.direction,
                       {"work_limit": True, "warning": _LIMIT_WARNING.format(what=what)})


def _delta_bounds(pld: ComposedPLD, eps: float, rtol: float, skip_if_capped: bool = False) -> DeltaBounds:
    if not pld.entries:
        f = _floor(eps)
        return DeltaBounds(eps, f, f, min(1.0, f * (1.0 + 8 * _U64)), pld.direction)
    if pld.purely_atomic:
        est, lo, up, det = _combine(pld, None, eps)
        return DeltaBounds(eps, est, max(lo, _floor(eps)), up, pld.direction, {"exact": True})
    far = _far_tail(pld, eps)
    if far is not None:
        return far
    c = pld.saddle(eps)
    log_target = pld.chernoff_log_delta(c, eps) + math.log(rtol) - math.log(1e3)
    for i in range(4):
        grid = _Grid(pld, _check_plan(pld, _best_plan(pld, eps, log_target), skip_if_capped and i == 0, rtol))
        est, lo, up, det = _combine(pld, grid, eps)
        capped = pld.work(grid.u_trunc, grid.h, grid.c) > WORK_BUDGET / 2
        if up - lo <= rtol * max(est, 1e-300) or est <= 0.0 or capped:
            break
        log_target = math.log(max(est, 1e-300)) + math.log(rtol) - math.log(8.0)
    lo = max(lo, _floor(eps))
    if pld.tv_bound is not None and eps >= 0.0:
        up = min(up, pld.tv_bound)
        lo = min(lo, up)
    # the Chernoff bound of the same pair is rigorous too: never certify anything weaker (its float
    # evaluation is rounded up by a few ulps of the summands' size)
    log_ch = pld.chernoff_log_delta(c, eps) + pld.mgf_err_at(c)
    if log_ch < 0.0:
        log_ch += _chernoff_margin(pld, c, eps)
        up = min(up, _add_up(pld.p_inf * (1.0 + 64 * _U64), _exp_up(log_ch)))
        lo = min(lo, up)
    return DeltaBounds(eps, min(max(est, lo), up), lo, up, pld.direction, det)


#: lines tried by :func:`_far_tail` (moderate: every mechanism's MGF is cheap there)
_FAR_TAIL_LINES = (1.0, 4.0, 16.0)


def _far_tail(pld: ComposedPLD, eps: float) -> DeltaBounds | None:
    """The bracket [p_inf, p_inf + 5e-324] (rounded outwards) when the Chernoff bound of the finite part,
    delta_fin(eps) <= kappa(c) M(c) e^{-c eps} (an upper bound, with the declared log-MGF error and the
    float rounding of the exponent added), is below the smallest positive float on one of a few
    moderate lines c: then no float lies strictly between the finite part's delta and 0, and the saddle
    search (which probes lines up to c = 1e5, where e.g. the subsampled Gaussian's quadrature costs
    seconds per point) and the contour are not needed.  None otherwise.

    A line is evaluated only if it can pass: log M is convex with log M(-1) <= 0 (M(-1) = E_Q[...] <= 1)
    and log M(0) = log(1 - p_inf), so log M(c) >= (c + 1) log(1 - p_inf) for c >= 0; ordinary queries
    (eps below ~50) are thus decided without evaluating any MGF."""
    log_tiny = math.log(_TINY) - 1.0
    for c in _FAR_TAIL_LINES:
        if c >= pld.max_order:
            break
        lm0 = math.log1p(-pld.p_inf) if pld.p_inf < 1.0 else -math.inf
        if _log_kappa(c) + (c + 1.0) * lm0 - c * eps >= log_tiny + 1.0:
            continue  # (cannot pass at this line; a margin of 1 for rounding)
        log_ch = pld.chernoff_log_delta(c, eps) + pld.mgf_err_at(c)
        if log_ch < log_tiny:
            log_ch += _chernoff_margin(pld, c, eps)
        if log_ch < log_tiny:
            up = _add_up(pld.p_inf * (1.0 + 64 * _U64), _exp_up(log_ch))
            lo = min(max(_floor(eps), pld.p_inf * (1.0 - 8 * _U64)), up)
            est = min(max(_floor(eps), pld.p_inf), up)  # (the finite part's delta rounds to nothing)
            return DeltaBounds(eps, est, lo, up, pld.direction,
                               {"c": c, "reason": "Chernoff bound underflow"})
    return None


def _chernoff_margin(pld: ComposedPLD, c: float, eps: float) -> float:
    """Bound on the rounding error of the float Chernoff exponent log kappa(c) + log M(c) - c eps: a few
    ulps of each summand (log M(c) = sum_j k_j log M_j(c), each term and the sum rounded)."""
    mag = sum(k * abs(m.log_mgf_real(c, pld.direction)) for m, k in pld.entries)
    return 16.0 * _U64 * (len(pld.entries) + 4.0) * (1.0 + abs(_log_kappa(c)) + mag + abs(c * eps))


def epsilon_bounds(pld: ComposedPLD, delta: float, rtol: float = DEFAULT_RTOL, *,
                   skip_if_capped: bool = False, work_limit: float | None = None) -> EpsilonBounds:
    """Certified eps(delta) for one direction: smallest eps >= 0 with delta_upper(eps) <= delta.

    ``skip_if_capped`` and bounded work as :func:`delta_bounds`: past the limits the answer is the
    optimised Chernoff bound (or ``inf`` when even that is too costly), with ``details["work_limit"]``
    and a warning.
    """
    res = _metered(pld, QUERY_WORK_LIMIT if work_limit is None else work_limit,
                   lambda: _epsilon_bounds(pld, delta, rtol, skip_if_capped))
    if res is not None:
        return res
    upper, what = math.inf, "trivial"
    opt = _metered(pld, _FALLBACK_WORK, lambda: _chernoff_eps_opt(pld, delta - pld.p_inf), _FALLBACK_TIME)
    if opt is not None and math.isfinite(opt[0]):
        hi, c_ch = opt
        slack = _cheap_chernoff_margin(pld, c_ch, hi, math.log(delta - pld.p_inf)) / c_ch
        upper, what = max(0.0, (hi + (pld.mgf_err_at(c_ch) / c_ch + slack)) * (1.0 + 8 * _U64)), "Chernoff"
    return EpsilonBounds(delta, upper, 0.0, upper, pld.direction,
                         {"work_limit": True, "warning": _LIMIT_WARNING.format(what=what)})


def _epsilon_bounds(pld: ComposedPLD, delta: float, rtol: float,
                    skip_if_capped: bool = False) -> EpsilonBounds:
    if delta <= pld.p_inf:
        return EpsilonBounds(delta, math.inf, math.inf, math.inf, pld.direction,
                             {"reason": "delta <= infinite-loss mass"})
    if not pld.entries:
        return EpsilonBounds(delta, 0.0, 0.0, 0.0, pld.direction)
    if pld.tv_bound is not None and pld.tv_bound <= delta:
        # delta(0) <= TV cap <= delta: eps = 0 is certified (and no eps is smaller)
        return EpsilonBounds(delta, 0.0, 0.0, 0.0, pld.direction, {"reason": "total-variation cap"})
    if pld.purely_atomic:
        comb = _memo(lambda e: _combine(pld, None, e))

        def up_fn(e):
            return comb(e)[2]

        def lo_fn(e):
            return comb(e)[1]

        # delta(eps) is continuous (kinks at the atom losses): bracketed root finding, no contour
        # the optimised Chernoff bound gives the start and the slope of the root search
        hi, c_ch = _chernoff_eps_opt(pld, delta - pld.p_inf)
        return _solve(pld, delta, up_fn, lo_fn, hi, {"exact": True}, slope=c_ch)
    # the Chernoff bound of the composed pair, optimised over c, gives a valid bracket and the line
    d_fin = delta - pld.p_inf
    hi, c_ch = _chernoff_eps_opt(pld, d_fin)
    eps_ref = hi
    details: dict = {}
    result = None
    for i in range(3):
        plan = _best_plan(pld, eps_ref, math.log(delta) + math.log(rtol) - math.log(8.0), c_hint=c_ch)
        grid = _Grid(pld, _check_plan(pld, plan, skip_if_capped and i == 0, rtol))

        comb = _memo(lambda e, _g=grid: _combine(pld, _g, e))

        def up_fn(e, _c=comb):
            return _c(e)[2]

        def lo_fn(e, _c=comb):
            return _c(e)[1]

        try:
            result = _solve(pld, delta, up_fn, lo_fn, hi, details, slope=c_ch)
        except FloatingPointError:
            if result is not None:
                break
            # the contour's bracket is too wide to certify anything below the Chernoff bound (e.g. a
            # Gaussian pair with mu = 1e8, where the float error bound exceeds 1): that bound stands
            result = EpsilonBounds(delta, hi, 0.0, hi, pld.direction, {"reason": "Chernoff bound only"})
            break
        det = comb(result.upper)[3]
        details = {**det, "chernoff_eps": hi}
        if result.upper - result.lower <= 1e3 * rtol * max(result.upper, 1e-12) or result.upper == 0.0:
            break
        if pld.work(grid.u_trunc, grid.h, grid.c) > WORK_BUDGET / 4:
            break  # the work cap shaped this grid: a new line would cost as much and gain little
        eps_ref = result.upper
    assert result is not None
    # the optimised Chernoff bound of the same pair (hi, including the log-MGF error) is rigorous too
    upper = min(result.upper, hi + pld.mgf_err_at(c_ch) / c_ch)
    return EpsilonBounds(delta, min(result.estimate, upper), min(result.lower, upper), upper,
                         pld.direction, {**result.details, **details})


def _memo(fn):
    """fn with its results kept for this query (root finders revisit the same points)."""
    seen: dict = {}

    def wrapped(e: float):
        e = float(e)
        if e not in seen:
            seen[e] = fn(e)
        return seen[e]

    return wrapped


def _minimize_bounded(f, a: float, b: float, xatol: float) -> tuple[float, float]:
    """(x, f(x)) minimising a unimodal f on [a, b]: Brent's method (golden sections with parabolic
    steps), like scipy's bounded ``minimize_scalar`` but without its per-call overhead (this runs
    twice per query on functions costing a microsecond)."""
    golden = 0.3819660112501051
    x = w = v = a + golden * (b - a)
    fx = fw = fv = f(x)
    d = e = 0.0
    for _ in range(200):
        m = 0.5 * (a + b)
        tol1 = 1.5e-8 * abs(x) + xatol / 3.0
        tol2 = 2.0 * tol1
        if abs(x - m) <= tol2 - 0.5 * (b - a):
            break
        parabolic = False
        if abs(e) > tol1:
            r = (x - w) * (fx - fv)
            q = (x - v) * (fx - fw)
            p = (x - v) * q - (x - w) * r
            q = 2.0 * (q - r)
            if q > 0.0:
                p = -p
            q = abs(q)
            if abs(p) < abs(0.5 * q * e) and q * (a - x) < p < q * (b - x):
                e, d = d, p / q
                u = x + d
                if u - a < tol2 or b - u < tol2:
                    d = tol1 if x < m else -tol1
                parabolic = True
        if not parabolic:
            e = (b - x) if x < m else (a - x)
            d = golden * e
        u = x + (d if abs(d) >= tol1 else (tol1 if d > 0 else -tol1))
        fu = f(u)
        if fu <= fx:
            if u < x:
                b = x
            else:
                a = x
            v, fv, w, fw, x, fx = w, fw, x, fx, u, fu
        else:
            if u < x:
                a = u
            else:
                b = u
            if fu <= fw or w == x:
                v, fv, w, fw = w, fw, u, fu
            elif fu <= fv or v == x or v == w:
                v, fv = u, fu
    return x, fx


def _chernoff_eps_opt(pld: ComposedPLD, d_fin: float) -> tuple[float, float]:
    """min_c (log kappa(c) + log M(c) - log d) / c and its argmin (a rigorous eps bound)."""
    cmax = min(pld.max_order * 0.98, 1e5)
    ld = math.log(d_fin)

    def f(x: float) -> float:
        c = math.exp(x)
        v = (_log_kappa(c) + pld.log_mgf_real(c) - ld) / c
        return v if math.isfinite(v) else 1e300

    # any c gives a rigorous bound; near the optimum the value is flat (an error x in log c costs
    # O(x^2)), and the exact root is found later on the contour: 1e-4 is ample
    x, fx = _minimize_bounded(f, math.log(1e-6), math.log(cmax), 1e-4)
    c = float(math.exp(x))
    if fx >= 1e300:
        return max(float(fx), 0.0), c
    # round the float bound up: a few ulps of the exponent's summands, divided by c
    margin = (_chernoff_margin(pld, c, 0.0) + 4.0 * _U64 * abs(ld)) / c
    return max(float(fx) + margin + 4.0 * _U64 * abs(float(fx)), 0.0), c


def _bracket_above(f_up, hi: float) -> float:
    """A point >= hi where f_up <= 0 (f_up is non-increasing up to rounding)."""
    k = 0
    while f_up(hi) > 0.0:
        hi = hi * 1.5 + 1.0
        k += 1
        if k > 60:
            raise FloatingPointError("could not bracket eps(delta)")
    return hi


def _upper_root_smooth(f_up, hi: float, slope: float) -> float:
    """Smallest eps >= 0 with f_up(eps) <= 0 for a smooth f_up = log delta_up - log delta.

    Near the root log delta(eps) falls with slope about -c (c: the Chernoff-optimal line), so Newton
    steps with that slope from the Chernoff bound give a tight bracket in one or two calls.
    """
    b = _bracket_above(f_up, hi)
    tol = 1e-11 * max(1.0, b)
    a = None
    step = 0.0
    for _ in range(4):
        # overshoot slightly (and by half the tolerance) so that x lands below the root
        x = b + f_up(b) / max(slope, 1e-12) * 1.02 - 0.5 * tol
        if x <= 0.0:
            break
        if f_up(x) > 0.0:
            a = x
            break
        step = b - x
        b = x
    if a is None and step > 0.0:
        # still above the root after the Newton steps (which shrink geometrically): walk down
        d = max(step, tol)
        while a is None and b - d > 0.0:
            x = b - d
            if f_up(x) > 0.0:
                a = x
            else:
                b = x
                d *= 4.0
    if a is None:
        if f_up(0.0) <= 0.0:
            return 0.0
        a = 0.0
    return _root_bracket(f_up, a, f_up(a), b, f_up(b), tol)


def _root_bracket(f, a: float, fa: float, b: float, fb: float, tol: float) -> float:
    """b' with f(b') <= 0 and f > 0 somewhere in (b' - tol, b'], for f non-increasing, fa > 0 >= fb.

    Illinois regula falsi (superlinear on the near-linear log delta) that keeps the sign bracket, so
    its upper end is certified as it stands.  Trial points stay tol/4 inside the bracket so that the
    last steps straddle the root; after 40 steps (kinks of delta at atom losses) it bisects.
    """
    side = 0
    n = 0
    while b - a > tol:
        n += 1
        if n > 40 or not (fb < fa) or fb < -500.0:  # (-800: delta_up = 0, no slope to follow)
            x = 0.5 * (a + b)
        else:
            x = b - fb * (b - a) / (fb - fa)
        x = min(max(x, a + 0.25 * tol), b - 0.25 * tol)
        fx = f(x)
        if fx > 0.0:
            a, fa = x, fx
            if side == -1:
                fb *= 0.5
            side = -1
        else:
            b, fb = x, fx
            if side == 1:
                fa *= 0.5
            side = 1
    return b


def _snap_up(f_up, b: float) -> float:
    """The smallest point of the grid g Z (g a power of two near 1e-12 max(1, b)) at or below ``b`` with
    f_up <= 0 whose left neighbour has f_up > 0 (``b`` itself satisfies f_up(b) <= 0).

    The root finders stop anywhere within their tolerance, so two queries at nearby delta could return
    certified eps in the wrong order; on a fixed grid the answer is the first grid point of the set
    {f_up <= 0}, which only grows with delta: eps(delta) is then non-increasing in delta (for the same
    certified delta function, e.g. every purely atomic ledger)."""
    if not (b > 0.0 and math.isfinite(b)):
        return b
    # the root finders leave b within 1e-11 max(1, b) above the first point with f_up <= 0: a grid of
    # an eighth of that reaches it in at most 9 steps down (and adds at most g ~ 1e-12 b)
    g = 2.0 ** math.floor(math.log2(1e-11 * max(1.0, b) / 8.0))
    x = math.ceil(b / g) * g
    for _ in range(8):  # (x >= b; f_up non-increasing: f_up(x) <= 0 up to rounding)
        if f_up(x) <= 0.0:
            break
        x += g
    else:
        return b
    for _ in range(12):
        y = x - g
        if y < 0.0 or f_up(y) > 0.0:
            break
        x = y
    return x


def _solve(pld, delta, up_fn, lo_fn, hi: float, details, slope: float) -> EpsilonBounds:
    """eps bracket from the certified (``up_fn``) and lower (``lo_fn``) delta brackets; ``hi`` and
    ``slope``: the optimised Chernoff bound and its line (start and slope of the root search)."""
    ld = math.log(delta)

    def f_up(e):
        u = up_fn(e)
        return (math.log(u) if u > 0 else -800.0) - ld

    if not math.isfinite(hi):
        hi = 1.0
    eps_up = _snap_up(f_up, _upper_root_smooth(f_up, hi, slope))
    # lower bound: largest eps with delta_lower(eps) >= delta
    def f_lo(e):
        v = lo_fn(e)
        return (math.log(v) if v > 0 else -800.0) - ld

    if eps_up == 0.0:
        eps_lo = 0.0
    elif f_lo(eps_up) >= 0.0:
        eps_lo = eps_up
    else:
        # walk down from eps_up (the grid is accurate near its design point, not at eps = 0)
        d = 1e-9 * max(1.0, eps_up)
        a = eps_up - d
        while a > 0.0 and f_lo(a) < 0.0:
            d *= 4.0
            a = eps_up - d
        if a <= 0.0:
            a = 0.0
        if f_lo(a) < 0.0:
            eps_lo = 0.0
        elif eps_up - a <= 4.1e-9 * max(1.0, eps_up):
            eps_lo = a  # a bracket of relative width <= 4e-9 already: refining it is not worth the calls
        else:
            from scipy.optimize import brentq  # (imported here: rarely needed, slow to import)

            eps_lo = brentq(f_lo, a, eps_up, xtol=1e-13 * max(1.0, eps_up), rtol=1e-15, maxiter=300)
            step = 1e-14 * max(1.0, eps_lo)
            while eps_lo > 0 and f_lo(eps_lo) < 0.0:
                eps_lo = max(eps_lo - step, 0.0)
                step *= 2
    est = 0.5 * (eps_lo + eps_up)
    return EpsilonBounds(delta, est, eps_lo, eps_up, pld.direction, dict(details))
