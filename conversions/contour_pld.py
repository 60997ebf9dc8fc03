"""Characteristic-function route (:mod:`conversions.contour`): ``ComposedPLD``, the summed log-MGF of a
composition (one direction), its atoms, closed-form pieces, envelopes and the per-query work meter."""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Sequence

import numpy as np

from mechanisms.base import Mechanism, check_direction, cost_hint, envelope_cost

from . import atoms as atoms_mod
from . import pieces as pieces_mod
from .contour_roots import _minimize_bounded
from .contour_terms import (
    _EVAL_CHUNK,
    QUERY_TIME_LIMIT,
    QUERY_WORK_LIMIT,
    WorkLimitReached,
    _log_kappa,
    _log_sub,
    _phi,
)

#: lattice of :meth:`ComposedPLD.saddle_near`: c = 2^(n / _SADDLE_LATTICE)
_SADDLE_LATTICE = 16


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
        # entries whose declared error depends on the line (conversions.split_remainder.Remainder)
        self._err_at = [(m, k) for m, k in self.entries if hasattr(m, "log_mgf_error_at")]
        self._err_at_cache: dict = {}
        self.max_order = min([m.max_mgf_order for m, _ in self.entries], default=math.inf)
        self._env_cache: dict = {}  # per-line envelope functions of this composition (query-local)
        self._work_left = math.inf  # per-query meter (start_query); unlimited outside queries
        self.hint_used = 0.0  # (the same work in the per-point hint's units: _charge)
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

    def mgf_err_at(self, c: float, t_max: float = 0.0) -> float:
        """The declared log-MGF error (sum_j k_j err_j) on the line Re s = c (nodes up to |Im s| = t_max;
        t_max = 0: the real point c): ``mgf_err``, an entry's line-dependent error where it declares one
        (``log_mgf_error_at(c, direction)``), plus the entries' line-dependent rounding
        (``log_mgf_phase_error(c, t_max)``: phases growing with t, and at any t_max exponents growing with
        |c|, e.g. the atoms kernels' rounded positions) and, with t_max > 0, that of the atoms and pieces
        evaluated here."""
        key = (c, t_max)
        v = self._err_at_cache.get(key)
        if v is None:
            v = self.mgf_err + sum(k * (m.log_mgf_error_at(c, self.direction) - m.log_mgf_error)
                                   for m, k in self._err_at)
            v += sum(k * m.log_mgf_phase_error(c, t_max, self.direction) for m, k in self.entries)
            if t_max > 0.0:
                v += self._own_phase_error(c, t_max)
            if math.isnan(v):  # (never a NaN error bound, from any mechanism: the line counts as failed)
                raise FloatingPointError(f"a NaN declared log-MGF error on the line Re s = {c}")
            self._err_at_cache[key] = v
        return v

    def _own_phase_error(self, c: float, t_max: float) -> float:
        """Line-dependent rounding of the atoms A_j (when subtracted: ``has_atoms``) and exponential
        pieces C_j this class evaluates on the line itself (``log_atoms_j``, ``log_pieces_j``, M_j = A_j +
        C_j for the closed-form entries): sum_j k_j of :func:`atoms_phase_error` plus
        :func:`atoms_exponent_error` (positions within the atoms' contract, ``INPUT_ULPS`` ulps of
        1 + |l|) and, for pieces, of ``phase_error`` over twice the largest |loss| of the entry's atoms and
        piece ends."""
        from mechanisms._numerics import atoms_exponent_error, atoms_phase_error, phase_error

        from .atoms import INPUT_ULPS

        v = 0.0
        for j, ((l, w), (_, k)) in enumerate(zip(self._atoms_j, self.entries, strict=True)):
            if self.has_atoms and len(l):
                lmax = float(np.max(np.abs(l)))
                v += k * (atoms_phase_error(l, w, c, t_max)
                          + atoms_exponent_error(c, lmax, INPUT_ULPS * 2.0**-53 * (1.0 + lmax)))
            if j in self._closed_set:
                lo, hi = self._pieces_j[j][:2]
                span = max(float(np.max(np.abs(lo))), float(np.max(np.abs(hi))),
                           float(np.max(np.abs(l))) if len(l) else 0.0)
                v += k * phase_error(t_max, 2.0 * span)
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
        self.hint_used = 0.0

    def stop_query(self) -> None:
        self._work_left = math.inf
        self._deadline = math.inf

    def _charge(self, units: float, hint: float | None = None) -> None:
        """Charge ``units`` to the query's meter; ``hint_used`` tallies the same work in the per-point
        hint's units (``hint``: a line chunk's n x ``mgf_cost``, which the split's polishing gate
        ``POLISH_WORK`` was calibrated in; elsewhere the same as ``units``)."""
        self.hint_used += units if hint is None else hint
        self._work_left -= units
        if self._work_left < 0.0 or time.monotonic() > self._deadline:
            raise WorkLimitReached("the characteristic-function route reached its per-query work limit")

    def work(self, u: float, h: float, c: float = 0.0) -> float:
        """Estimated cost of evaluating the composed MGF at the nodes c + i t, t = 0, h, ..., u."""
        return (u / h + 1.0) * sum(cost(u, c, self.direction) for cost in self._costs)

    def _chunk_cost(self, j: int, m: Mechanism, chunk: np.ndarray) -> float:
        """The meter's charge for one mechanism call at ``chunk``: ``mgf_line_cost`` where the mechanism
        has one and the points are equally spaced on one line (a contour grid: the line kernels sum all
        nodes at once), else the per-point hint times the points; and that hint (units, hint)."""
        t_c = float(np.max(np.abs(chunk.imag))), float(np.max(np.abs(chunk.real)))
        hint = chunk.size * self._costs[j](*t_c, self.direction)
        line = getattr(m, "mgf_line_cost", None)
        if line is not None and chunk.size > 1 and np.all(chunk.real == chunk[0].real):
            t = chunk.imag - chunk[0].imag
            k = np.arange(chunk.size)
            if np.all(np.abs(t - k * t[1]) <= 1e-12 * (np.abs(chunk.imag) + 1.0)):
                return line(chunk.size, t_c[0], float(chunk[0].real), self.direction), hint
        return hint, hint

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
                    self._charge(*self._chunk_cost(j, m, chunk))
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
        """:meth:`saddle` on the lattice c = 2^(n/16) (a 4.4 % step; 5 % accuracy suffices: the line is
        snapped to the 2^(1/4) grid, every 4th lattice point) by a local search from ``c_start``'s lattice
        point: downhill with doubling steps until the value rises, then bisection of the bracket on the
        integers, until both neighbours are no lower.  The lattice makes revisits exact (the mechanisms
        memoise their real-axis values by c), so a search started at its own answer costs 3 memoised
        points.  Falls back to the bounded search when g is not finite at the start or the walk reaches
        the range's end."""
        cmax = min(self.max_order * 0.98, 1e5)
        steps = _SADDLE_LATTICE
        lo, hi = math.ceil(steps * math.log2(1e-6)), math.floor(steps * math.log2(cmax))
        vals: dict = {}

        def g(n: int) -> float:
            v = vals.get(n)
            if v is None:
                c = 2.0 ** (n / steps)
                v = self.log_mgf_real(c) - c * eps - math.log(c * (c + 1.0)) if lo <= n <= hi else math.inf
                v = vals[n] = v if not math.isnan(v) else math.inf
            return v

        m = min(max(round(steps * math.log2(c_start)), lo + 1), hi - 1)
        if hi - lo < 2 or not math.isfinite(g(m)):
            return self.saddle(eps)
        if g(m + 1) < g(m):
            d = 1
        elif g(m - 1) < g(m):
            d = -1
        else:
            return 2.0 ** (m / steps)
        # march downhill with doubling steps: [a, b] brackets a lattice minimum at m
        a, step = m, 1
        while True:
            nxt = min(max(m + d * step, lo), hi)
            if nxt == m:
                return self.saddle(eps)  # (the walk reached the range's end)
            if not g(nxt) < g(m):
                break
            a, m, step = m, nxt, 2 * step
        a, b = min(a, nxt), max(a, nxt)
        while b - a > 2:
            p = (a + m) // 2 if m - a > b - m else (m + b + 1) // 2
            if g(p) < g(m):
                a, b, m = (a, m, p) if p < m else (m, b, p)
            elif p < m:
                a = p
            else:
                b = p
        return 2.0 ** (m / steps)

    def chernoff_log_delta(self, c: float, eps: float) -> float:
        """log of kappa(c) M(c) e^{-c eps}: a rigorous bound on delta_fin(eps)."""
        return _log_kappa(c) + self.log_mgf_real(c) - c * eps
