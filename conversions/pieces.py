"""Closed-form low-order terms of compositions whose continuous parts are exponential pieces.

A mechanism may describe the continuous part of its privacy-loss measure (under P) exactly as
exponential pieces ``W e^{r l}`` on ``[lo, hi]`` (``Mechanism.pld_exp_pieces``; Laplace has one piece,
density (1/4) e^{(l - a)/2} on (-a, a), docs/derivations/laplace.md).  Write each factor's MGF as A_j + C_j
(atoms + continuous).  Expanding prod_j (A_j + C_j)^{k_j} by the number of continuous factors:

* order 0: prod_j A_j^{k_j}, the atoms (``conversions.atoms``, exact);
* order 1: sum_i k_i C_i A_i^{k_i - 1} prod_{j != i} A_j^{k_j}: a piece shifted by every atom;
* order 2: C(k_i, 2) C_i^2 (...) and k_i k_j C_i C_j (...): the convolution of two pieces of equal rate
  r is e^{r s} times a trapezoid in s (three linear segments) shifted by every atom;
* order 3 (at most two distinct piece mechanisms): the trapezoid convolved with a third piece is
  e^{r s} times a piecewise quadratic, kept in Bernstein form with non-negative coefficients
  (``triple_segments``).

On the contour these terms decay only like 1/|t|, 1/|t|^2 and 1/|t|^3 (the Fourier transforms of
densities with jumps and kinks), which is what makes Laplace-type compositions expensive to invert
numerically.  Here their contribution to delta(eps) = E[(1 - e^{eps - L})_+] is integrated exactly
(``_kernels``), so the contour only sees orders >= 4 (decay 1/|t|^4).  Source: our derivation (the
decomposition above into atoms plus an absolutely continuous remainder; docs/derivations/laplace.md);
the closed forms are tested against mpmath quadrature.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import atoms as atoms_mod

_GL_X, _GL_W = np.polynomial.legendre.leggauss(8)
MAX_SECOND_ORDER_FACTORS = 4  # distinct piece mechanisms; above this only order 1 is closed-form
MAX_THIRD_ORDER_FACTORS = 2  # ... and above this only orders 1 and 2


@dataclass(frozen=True)
class Segments:
    """Densities e^{logw + r s} lam(s) on [lo, hi], lam linear >= 0 (kind 0 flat = anchor,
    1 rising = s - anchor, 2 falling = anchor - s)."""

    kind: np.ndarray
    anchor: np.ndarray
    logw: np.ndarray
    rate: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


@dataclass(frozen=True)
class QuadSegments:
    """Densities e^{logw + r s} Q(s) on [lo, hi], Q(s) = b0 (1 - v)^2 + 2 b1 v (1 - v) + b2 v^2 with
    v = (s - lo)/(hi - lo) and b0, b1, b2 >= 0 (Bernstein form: non-negative, no cancellation)."""

    b0: np.ndarray
    b1: np.ndarray
    b2: np.ndarray
    logw: np.ndarray
    rate: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


@dataclass(frozen=True)
class ClosedTerm:
    """One closed-form term: atoms (with the multinomial coefficient ``e^{log_coef}`` in their weights)
    convolved with segments.  ``factors`` are the entry indices of its continuous factors (an index
    twice for C_i^2), ``exponents`` the power of each entry's atom MGF.

    The atoms are enumerated on first use (``atoms_fn``; None if there are too many): a term whose
    mass bound is negligible at the queried delta is never enumerated.  ``log_atoms_mass`` is the log
    of the total atom mass e^{log_coef} prod_j A_j(0)^{e_j} (exact, before any pruning)."""

    factors: tuple[int, ...]
    exponents: tuple[int, ...]
    log_coef: float
    atoms_fn: Callable[[], atoms_mod.Atoms | None] = field(compare=False, repr=False)
    segments: Segments | QuadSegments
    log_atoms_mass: float
    log_bound: float = field(init=False)  # log of a bound on the term's mass (>= its delta at any eps)

    def __post_init__(self):
        sg = self.segments
        if isinstance(sg, QuadSegments):
            peak = np.maximum(np.maximum(sg.b0, sg.b1), sg.b2)
        else:
            peak = np.where(sg.kind == 0, sg.anchor, np.where(sg.kind == 1, sg.hi - sg.anchor,
                                                               sg.anchor - sg.lo))
        with np.errstate(divide="ignore"):
            seg = np.log(np.maximum(peak, 0.0) * (sg.hi - sg.lo)) + sg.logw + sg.rate * sg.hi
        lb = -math.inf
        if seg.size:
            lb = self.log_atoms_mass + float(np.logaddexp.reduce(seg))
        object.__setattr__(self, "log_bound", lb)

    @functools.cached_property
    def atoms(self) -> atoms_mod.Atoms | None:
        return self.atoms_fn()


def check_pieces(pieces, what) -> tuple[np.ndarray, ...]:
    """Validated (lo, hi, logw, rate) arrays; ``what`` (a string, or an object with ``describe()``)
    names the mechanism in the error message."""
    lo, hi, logw, rate = (np.atleast_1d(np.asarray(x, dtype=float)) for x in pieces)
    ok_shape = lo.shape == hi.shape == logw.shape == rate.shape and lo.size > 0
    if not ok_shape or not (np.isfinite(lo).all() and np.isfinite(hi).all() and (hi > lo).all()
                            and ((rate >= 0) & (rate <= 1)).all() and not np.isnan(logw).any()):
        name = what if isinstance(what, str) else what.describe()
        if not ok_shape:
            raise ValueError(f"{name}: exponential pieces must be four arrays of one length")
        raise ValueError(f"{name}: invalid exponential pieces (need finite lo < hi, 0 <= rate <= 1)")
    return lo, hi, logw, rate


def first_order_segments(p) -> Segments:
    lo, hi, logw, rate = p
    return Segments(np.zeros(lo.size, dtype=np.int64), np.ones(lo.size), logw, rate, lo, hi)


def pair_segments(p1, p2) -> Segments | None:
    """Segments of the convolution of two piece lists (None unless every rate is equal)."""
    rates = np.concatenate([p1[3], p2[3]])
    if not np.all(rates == rates[0]):
        return None
    kind, anchor, logw, rate, lo, hi = [], [], [], [], [], []
    for a1, b1, w1 in zip(p1[0], p1[1], p1[2], strict=True):
        for a2, b2, w2 in zip(p2[0], p2[1], p2[2], strict=True):
            s0, s1 = a1 + a2, b1 + b2
            short, long_ = sorted((b1 - a1, b2 - a2))
            # rising on [s0, s0 + short], flat (= short) up to s0 + long, falling to s1
            for kd, anc, lo_, hi_ in ((1, s0, s0, s0 + short), (0, short, s0 + short, s0 + long_),
                                      (2, s1, s0 + long_, s1)):
                if hi_ > lo_:
                    kind.append(kd)
                    anchor.append(anc)
                    logw.append(w1 + w2)
                    rate.append(rates[0])
                    lo.append(lo_)
                    hi.append(hi_)
    return Segments(np.array(kind, dtype=np.int64), np.array(anchor), np.array(logw), np.array(rate),
                    np.array(lo), np.array(hi))


def _lam_at(kind: int, anchor: float, y: float) -> float:
    v = anchor if kind == 0 else (y - anchor if kind == 1 else anchor - y)
    return max(v, 0.0)


def triple_segments(pair: Segments, p3) -> QuadSegments | None:
    """Quadratic segments of (pair segments) * (pieces p3): None unless every rate is equal.

    A linear segment lam >= 0 on [s0, s1] convolved with a box [lo3, hi3] (width w) is
    f(x) = int_{L(x)}^{U(x)} lam, U = min(s1, x - lo3), L = max(s0, x - hi3): quadratic between the
    breakpoints s0 + lo3, s1 + lo3, s0 + hi3, s1 + hi3.  Its Bernstein coefficients on a piece
    [x_a, x_a + D] are f(x_a), f(x_a + D) and a middle one that is, case by case, a non-negative
    combination of lam values (so nothing cancels):
      U moving, L fixed:  f(x_a) + lam(U(x_a)) D / 2;     U fixed, L moving:  lam(s1) D / 2;
      both moving:        w (lam(L(x_a)) + lam(U(x_a + D))) / 2;               both fixed: f.
    The exponential factors combine as e^{r (y + z)} = e^{r x} (equal rates).
    """
    r3 = p3[3]
    if pair.rate.size and not (np.all(r3 == pair.rate[0]) and np.all(pair.rate == pair.rate[0])):
        return None
    b0, b1, b2, logw, rate, lo, hi = [], [], [], [], [], [], []
    for kd, anc, lw, r, s0, s1 in zip(pair.kind, pair.anchor, pair.logw, pair.rate, pair.lo, pair.hi,
                                      strict=True):
        for lo3, hi3, lw3 in zip(p3[0], p3[1], p3[2], strict=True):
            w = hi3 - lo3
            knots = sorted({s0 + lo3, s1 + lo3, s0 + hi3, s1 + hi3})

            def f(x, _kd=kd, _anc=anc, _s0=s0, _s1=s1, _lo3=lo3, _hi3=hi3):
                u = min(_s1, x - _lo3)
                low = max(_s0, x - _hi3)
                return 0.0 if u <= low else (u - low) * (_lam_at(_kd, _anc, low) + _lam_at(_kd, _anc, u)) / 2

            for xa, xb in zip(knots[:-1], knots[1:], strict=True):
                d = xb - xa
                if d <= 0.0:
                    continue
                mid = 0.5 * (xa + xb)
                u_moving = mid - lo3 < s1
                l_moving = mid - hi3 > s0
                fa, fb = f(xa), f(xb)
                if u_moving and not l_moving:
                    fm = fa + _lam_at(kd, anc, min(s1, xa - lo3)) * d / 2
                elif l_moving and not u_moving:
                    fm = _lam_at(kd, anc, s1) * d / 2
                elif u_moving and l_moving:
                    fm = w * (_lam_at(kd, anc, max(s0, xa - hi3)) + _lam_at(kd, anc, min(s1, xb - lo3))) / 2
                else:
                    fm = fa
                if max(fa, fm, fb) <= 0.0:
                    continue
                b0.append(fa)
                b1.append(fm)
                b2.append(fb)
                logw.append(lw + lw3)
                rate.append(r)
                lo.append(xa)
                hi.append(xb)
    return QuadSegments(*(np.array(v, dtype=float) for v in (b0, b1, b2, logw, rate, lo, hi)))


def build_terms(counts: list[int], atoms_j: list[tuple[np.ndarray, np.ndarray]],
                pieces_j: list, powers: dict | None = None,
                log_fact: np.ndarray | None = None,
                singles: dict | None = None) -> tuple[list[ClosedTerm], int]:
    """Closed-form terms of orders 1 (2 and 3 when every piece shares one rate; 3 only with at most
    ``MAX_THIRD_ORDER_FACTORS`` distinct piece mechanisms) and the order reached.

    ``pieces_j[j]`` is None for entries without exponential pieces; their continuous parts (and all
    cross terms with them) stay in the numerically inverted remainder.  Each term's atoms are
    enumerated only when first needed (:func:`log_delta`); a term whose atoms turn out too many to
    enumerate is bounded by its mass on the upper side (never dropped).
    """
    powers = {} if powers is None else powers  # (entry, exponent) -> Atoms, shared with the caller
    if log_fact is None or log_fact.size <= max(counts):
        log_fact = atoms_mod.shared_log_factorials(max(counts))

    singles = {} if singles is None else singles  # entry -> its own Atoms, shared with the caller

    def power(j: int, k: int):
        if (j, k) not in powers:
            if j not in singles:
                singles[j] = atoms_mod.single(*atoms_j[j])
            powers[j, k] = atoms_mod.power(singles[j], k, log_fact)
        return powers[j, k]

    def atoms_for(coef: float, minus: dict[int, int]) -> atoms_mod.Atoms | None:
        comp: atoms_mod.Atoms | None = atoms_mod.Atoms(np.array([0.0]), np.array([math.log(coef)]))
        for j, kj in enumerate(counts):
            pj = power(j, kj - minus.get(j, 0))
            comp = None if (pj is None or comp is None) else atoms_mod.convolve(comp, pj)
            if comp is None:
                return None
        # heaviest atoms first: the kernels then stop at the first atom whose every term is negligible
        order = np.argsort(-comp.logw, kind="stable")
        return dataclasses.replace(comp, losses=comp.losses[order], logw=comp.logw[order])

    log_a0 = [float(np.logaddexp.reduce(np.log(w[w > 0]))) if np.any(w > 0) else -math.inf
              for _, w in atoms_j]

    def term(factors: tuple[int, ...], minus: dict[int, int], coef: float, segs) -> ClosedTerm:
        exps = _exponents(counts, minus)
        log_mass = math.log(coef) + sum(e * la for e, la in zip(exps, log_a0, strict=True) if e)
        return ClosedTerm(factors, exps, math.log(coef), lambda: atoms_for(coef, minus), segs, log_mass)

    pis = [i for i, p in enumerate(pieces_j) if p is not None]
    terms: list[ClosedTerm] = []
    for i in pis:
        terms.append(term((i,), {i: 1}, counts[i], first_order_segments(pieces_j[i])))
    if not pis or len(pis) > MAX_SECOND_ORDER_FACTORS:
        return terms, 1
    second: list[ClosedTerm] = []
    pairs: dict = {}
    for a, i in enumerate(pis):
        for j in pis[a:]:
            if i == j and counts[i] < 2:
                continue
            segs = pairs[i, j] = pair_segments(pieces_j[i], pieces_j[j])
            if segs is None:
                return terms, 1
            minus = {i: 2} if i == j else {i: 1, j: 1}
            coef = counts[i] * (counts[i] - 1) / 2 if i == j else counts[i] * counts[j]
            second.append(term((i, j), minus, coef, segs))
    if len(pis) > MAX_THIRD_ORDER_FACTORS:
        return terms + second, 2
    third: list[ClosedTerm] = []
    for a, i in enumerate(pis):
        for b, j in enumerate(pis[a:], start=a):
            for m in pis[b:]:
                minus: dict[int, int] = {}
                for x in (i, j, m):
                    minus[x] = minus.get(x, 0) + 1
                if any(counts[x] < e for x, e in minus.items()):
                    continue  # C(k, e) = 0: no such term
                coef = math.prod(math.comb(counts[x], e) for x, e in minus.items())
                pair = pairs.get((i, j)) or pair_segments(pieces_j[i], pieces_j[j])
                segs3 = None if pair is None else triple_segments(pair, pieces_j[m])
                if segs3 is None:
                    return terms + second, 2
                third.append(term((i, j, m), minus, coef, segs3))
    return terms + second + third, 3


def _exponents(counts: list[int], minus: dict[int, int]) -> tuple[int, ...]:
    return tuple(k - minus.get(j, 0) for j, k in enumerate(counts))


def log_delta(terms: list[ClosedTerm], eps: float,
              log_floor: float = -math.inf, side: int = 0) -> tuple[float, float, float]:
    """(log delta of the closed-form terms at eps, upper-side error, lower-side error).

    Upper side: pruned atoms (mass times the segment mass <= 1), skipped negligible terms, rounding.
    Lower side: merged atoms moved their loss up by <= merge_shift (delta moves by <= that), rounding.
    A term whose mass bound lies below ``log_floor`` is not integrated: its delta (between 0 and that
    bound) only widens the bracket, by the bound, on the upper side.

    ``side`` = +1 / -1 evaluates each term at eps -/+ its atoms' ``loss_err`` (the exact losses lie
    within it of the computed ones, so this gives an upper / lower value); 0: at eps.
    """
    from ._kernels import quad_segments_log_delta, segments_log_delta

    tot = -math.inf
    up = lo = 0.0
    for term in terms:
        sg = term.segments
        if term.log_bound < log_floor or term.atoms is None:
            # negligible here (or not enumerable): its delta lies in [0, mass bound]
            up += math.exp(term.log_bound) * (1.0 + 1e-12)
            continue
        e_t = float(eps) - side * term.atoms.loss_err
        if isinstance(sg, QuadSegments):
            v, skipped = quad_segments_log_delta(term.atoms.losses, term.atoms.logw, sg.b0, sg.b1, sg.b2,
                                                 sg.logw, sg.rate, sg.lo, sg.hi, e_t, _GL_X, _GL_W)
        else:
            v, skipped = segments_log_delta(term.atoms.losses, term.atoms.logw, sg.kind, sg.anchor,
                                            sg.logw, sg.rate, sg.lo, sg.hi, e_t, _GL_X, _GL_W)
        if math.isnan(v) or math.isnan(skipped):
            raise FloatingPointError(f"closed-form delta is NaN at eps={eps!r}")
        tot = float(np.logaddexp(tot, v))
        up += term.atoms.dropped_mass + (math.exp(skipped) if skipped > -math.inf else 0.0)
        lo = max(lo, term.atoms.merge_shift)
        # the atoms' floating-point error (atoms.Atoms): log-masses within log_err (relative on this
        # term's delta); their loss error is handled by ``side``, or bounded by loss_err x mass
        err_t = math.expm1(min(term.atoms.log_err, 700.0)) * math.exp(v) if v > -math.inf else 0.0
        if side == 0:
            err_t += term.atoms.loss_err * math.exp(min(term.log_bound, 0.0))
        up += err_t
        lo += err_t
    if tot > -math.inf:
        val = math.exp(tot)
        up += 1e-13 * val  # a few ulps per non-negative term (cancellation-free forms)
        lo += 1e-13 * val
    return tot, up, lo


def term_log_mgf(term: ClosedTerm, s: np.ndarray, log_a: list[np.ndarray],
                 log_c: dict[int, np.ndarray]) -> np.ndarray:
    """log[coef prod_{i in factors} C_i(s) prod_j A_j(s)^{e_j}] at complex s.

    ``log_a[j]``: log A_j(s) (atoms of entry j); ``log_c[i]``: log C_i(s) (its pieces).
    """
    v = np.full(s.shape, term.log_coef, dtype=complex)
    for i in term.factors:
        v = v + log_c[i]
    for j, e in enumerate(term.exponents):
        if e:
            v = v + e * log_a[j]
    return v
