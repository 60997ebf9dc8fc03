"""Lattice mechanisms: privacy-loss distributions made of finitely many atoms (no continuous part).

The bases every such plug-in derives from, and the randomized-response primitives they share:

* :class:`AtomicMechanism`: the PLD methods (log-MGF, atoms, cell masses) of a mechanism whose loss in
  both directions is the finite set ``_atoms()``; an RR(eps)^m power may declare itself through
  ``_rr_power()`` for a closed-form MGF.  The characteristic-function route composes atoms exactly
  (for randomized response and (eps, delta) blocks this is the optimal composition theorem of
  Kairouz, Oh & Viswanath 2015).
* :class:`DiscreteMechanism`: adds the RDP curve log E[e^{(alpha-1) L}] / (alpha - 1) of the atoms, in
  closed form for k-ary randomized response (``_rr_k()``).
* :func:`rr_atoms`, :func:`rr_power_atoms`, :func:`rr_rdp`: randomized response's atoms, the atoms of
  its m-fold composition and its RDP curve.

Subclasses: :mod:`mechanisms.randomized_response` (``RandomizedResponse``, ``PureDP``, ``ApproxDP``),
``GeneralizedPTR``, ``SampledWithoutReplacement``, the sparse-vector plug-ins, ...
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from . import validation as V
from ._numerics import (
    atoms_exponent_error,
    atoms_phase_error,
    discrete_log_mgf,
    log_binomial_coefficients,
    phase_error,
)
from ._rdp_kernels import rr_k_curve
from .base import Mechanism, UnsupportedRoute, check_direction

__all__ = ["AtomicMechanism", "DiscreteMechanism", "FourPointPair", "atoms_rdp_upper", "rr_atoms",
           "rr_power_atoms", "rr_rdp"]

_U = 2.0 ** -53
_INPUT_ULPS = 4.0  # accuracy of stored losses, ulps of 1 + |l| (= conversions.atoms.INPUT_ULPS)


def rr_rdp(alpha, epsilon: float, k: int = 2) -> np.ndarray:
    """RDP of k-ary randomized response RR(eps) (k = 2: the tight RDP of a generic eps-DP mechanism).

    eps(alpha) = log[(e^{alpha eps} + e^{-(alpha-1) eps} + k - 2) / (e^eps + k - 1)] / (alpha - 1)
    (Mironov 2017, Table II, for k = 2), evaluated without cancellation as alpha -> 1 and rounded up by a
    few ulps (an upper bound, exact up to that margin); eps(inf) = eps.  Vectorised over alpha > 1.
    """
    al = V.alphas(alpha)
    e = V.real("epsilon", epsilon, low=0.0)
    return _rr_curve(al, e, V.integer("k", k, low=2))


def _rr_curve(al: np.ndarray, eps: float, k: int) -> np.ndarray:
    flat = np.ascontiguousarray(al.ravel(), dtype=float)
    return rr_k_curve(flat, eps, k).reshape(al.shape)


def rr_atoms(eps: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Atoms (losses, masses) of k-ary randomized response RR(eps): losses eps, -eps (and 0 for k > 2)
    with masses e^eps / Z, 1 / Z ((k - 2) / Z), Z = e^eps + k - 1 (exact)."""
    # masses from a numerically safe normalisation (eps may be large)
    logz = eps + math.log1p((k - 1) * math.exp(-eps))
    losses = [eps, -eps]
    logw = [eps - logz, -logz]
    if k > 2:
        losses.append(0.0)
        logw.append(math.log(k - 2) - logz)
    if eps == 0.0:  # all losses are 0: a single atom of mass 1
        return np.array([0.0]), np.array([1.0])
    return np.array(losses), np.exp(np.array(logw))


def rr_mass_rel_err(eps: float, k: int) -> float:
    """Bound on the relative floating-point error of :func:`rr_atoms`' masses.

    log Z = eps + log1p((k - 1) e^{-eps}) is off by <= u (2 log Z + 2 log k + 4) (exp, the product, log1p
    and the sum, 1 ulp each), each log-mass by that plus u |log w| + 2 u log k, and exp adds 2 u; with
    log Z <= eps + log k and |log w| <= eps + 2 log k, all of it is <= u (2 eps + 7 log k + 5), doubled
    (libm's few ulps).  Measured against mpmath: 3.3e-15 at eps = 25.9, k = 4 (this bound: 1.5e-14)."""
    return 2.0 * 2.0**-53 * (2.0 * abs(eps) + 7.0 * math.log(k) + 5.0)


def float_at_least(x: Fraction) -> float:
    """The smallest float >= the rational x (int / int true division is correctly rounded; one step up
    when it rounded down).  For a pair parameter that the floats round: a randomized-response pair at a
    larger epsilon (or an infinite-loss mass at a larger value) dominates the one at the real value."""
    f = x.numerator / x.denominator
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def rr_power_mass_rel_err(eps: float, m: int, log_scale: float = 0.0, log_scale_err: float = 0.0) -> float:
    """Bound on the relative floating-point error of every mass of :func:`rr_power_atoms`.

    Mass j is exp(X_j), X_j = ((log_scale + log C(m, j)) + (m - j) log p) + j log q, log p = -log1p(e^-eps)
    (|log p| = P <= log 2), log q = log p - eps.  With exp, log1p within 2 u relative (1 ulp, doubled):
    e^-eps and log1p give |d log p| <= 2 u e^-eps + 2 u P <= 4 u; log q adds u (eps + P); the products
    (exact integer factors) add their factors' errors times m - j, j and u of themselves: <= 4 u m +
    2 u m (eps + P); log C(m, j) is within ``log_binomial_coefficients``' own bound, <= 3 x 400 u (stirlerr)
    + 8 u (m log 2 + log(m + 1) + 3) + 2 u m (0 for m <= 1: exact); the three additions u of a partial sum
    each, <= 3 u (|log_scale| + m log 2 + m (eps + P)); ``log_scale_err`` bounds log_scale's own error.
    The mass is then within expm1(|dX|) (1 + 2 u) + 2 u <= 1.01 (|dX| + 2 u) relatively (|dX| < 1e-3).
    Measured against mpmath (m = 225, eps = 8.08): 1.7e-13 on a far-tail atom; this bound: 1.6e-12.
    """
    mf = float(m)
    a = abs(eps) + math.log(2.0)
    e_c = 0.0
    if m > 1:
        e_c = 1200.0 * _U + 8.0 * _U * (mf * math.log(2.0) + math.log(mf + 1.0) + 3.0) + 2.0 * _U * mf
    dx = (log_scale_err + e_c + 4.0 * _U * mf + 2.0 * _U * mf * a
          + 3.0 * _U * (abs(log_scale) + mf * math.log(2.0) + mf * a))
    return 1.01 * (dx + 2.0 * _U)


def rr_power_atoms(eps: float, m: int, log_scale: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Atoms of the privacy loss of m-fold binary randomized response RR(eps), masses times e^log_scale.

    Losses (m - 2j) eps with binomial masses C(m, j) p^{m-j} q^j, p = e^eps / (1 + e^eps), q = 1 - p
    (exact; log space).  eps = 0 gives the single atom 0.  (Fresh copies of :func:`_rr_power_atoms`'
    cached arrays: the PLD asks for the same atoms for every cell query, its cell masses and offsets.)
    """
    l, w = _rr_power_atoms(float(eps), int(m), float(log_scale))
    return l.copy(), w.copy()


@functools.lru_cache(maxsize=2)
def _rr_power_atoms(eps: float, m: int, log_scale: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`rr_power_atoms`, computed once per (eps, m, log_scale) (up to 4M atoms: the binomial
    log-coefficients cost ~0.1 s per million); read-only."""
    l, w = _rr_power_atoms_of(eps, m, log_scale)
    l.setflags(write=False)
    w.setflags(write=False)
    return l, w


def _rr_power_atoms_of(eps: float, m: int, log_scale: float) -> tuple[np.ndarray, np.ndarray]:
    if eps == 0.0:
        return np.array([0.0]), np.array([math.exp(log_scale)])
    ji = np.arange(m + 1)
    j = ji.astype(float)
    log_c = log_binomial_coefficients(m, ji)[0]  # (a few ulps of m log 2; see AtomicMechanism.log_mgf_error)
    log_p = -math.log1p(math.exp(-eps))
    log_q = -eps + log_p
    return (m - 2.0 * j) * eps, np.exp(log_scale + log_c + (m - j) * log_p + j * log_q)


@functools.lru_cache(maxsize=2)
def _rr_power_placement(eps: float, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``mechanisms._cells.product_placement`` of :func:`rr_power_atoms`' losses (m - 2j) eps (cached:
    up to 4M atoms, asked for at every cell query of the PLD's range probes)."""
    from ._cells import product_placement

    place, err = product_placement(m - 2.0 * np.arange(m + 1, dtype=float), eps)
    place.setflags(write=False)
    err.setflags(write=False)
    return place, err


class AtomicMechanism(Mechanism):
    """PLD methods of a mechanism whose privacy loss (both directions) is the finite set ``_atoms()``."""

    def _atoms(self) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - abstract
        raise UnsupportedRoute(f"{type(self).__name__} must define its atoms")

    def _rr_power(self) -> tuple[float, int, float] | None:
        """(eps, m, log_scale) when the atoms are ``rr_power_atoms(eps, m, log_scale)``, i.e. e^{log_scale}
        RR(eps)^m (closed-form MGF), else None.  eps is the pair's own float (a real value rounded by the
        floats must be rounded up first: :func:`float_at_least`); log_scale is taken to be within 4 u
        |log_scale| of its real value (m log1p(-delta'): 3 u)."""
        return None

    @property
    def log_mgf_error(self) -> float:
        """The atoms' masses' own relative error (``_atom_mass_rel_err``; it bounds |M~ - M| relative to
        M(Re s)), and for an RR(eps)^m power (eps > 0) at least the floating-point error of the closed form
        log_scale + m log M_RR(s): 32 ulps of m (1 + eps) + |log_scale|, which covers m times randomized
        response's mass error (:func:`rr_mass_rel_err`, <= u (4 eps + 20)) and the kernel's rounding (also
        for m = 1, where it was 0: log M(0) came out 1.8e-15 above 0 at eps = 34)."""
        pw = self._rr_power()
        own = 1.01 * self._atom_mass_rel_err()  # (relative mass errors bound M's, relative to M(Re s))
        if pw is None or pw[0] == 0.0:
            return own
        eps, m, log_scale = pw
        return max(own, 32.0 * _U * (m * (1.0 + eps) + abs(log_scale)))

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        """The atoms kernels' line-dependent rounding on Re s = c, |Im s| <= t_max (form of
        ``log_mgf_error``; also at t_max = 0, the real point c): the phases,
        :func:`mechanisms._numerics.atoms_phase_error` over ``pld_atoms(direction)``, plus the exponents'
        |c|-growing part, :func:`mechanisms._numerics.atoms_exponent_error` with the positions' rounding
        bound of ``_atom_positions`` (DiscreteGaussian's 4 u |L|: log M(200) of DiscreteGaussian(0.05)
        was 1.6e-11 off against the constant 1.8e-13).  For an RR(eps)^m power, m times the two-atom
        bounds (m log M_RR(s): phases t eps and 2 t eps per factor, exact losses +-eps)."""
        pw = self._rr_power()
        if pw is not None and pw[0] > 0.0:
            return pw[1] * (phase_error(t_max, 3.0 * pw[0]) + atoms_exponent_error(c, pw[0], 0.0))
        loss_max, loss_err = self._exponent_bounds(direction)
        out = atoms_exponent_error(c, loss_max, loss_err)
        if t_max > 0.0:
            out += atoms_phase_error(*self.pld_atoms(direction), c, t_max)
        return out

    def _exponent_bounds(self, direction: str = "remove") -> tuple[float, float]:
        """(max |l|, max |l~ - l|) over the losses of ``pld_atoms(direction)``: their largest size and
        the largest rounding of their positions (``_atom_positions``' loss_err; 0 where exact)."""
        l = np.asarray(self.pld_atoms(direction)[0], dtype=float)
        if l.size == 0:
            return 0.0, 0.0
        err = self._atom_positions(l)[1]
        return float(np.max(np.abs(l))), float(np.max(err, initial=0.0))

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        pw = self._rr_power()
        if pw is not None and pw[0] > 0.0:
            # e^{log_scale} (p e^{s eps} + q e^{-s eps})^m: O(1) per node whatever m (enumerating the
            # m + 1 atoms at every contour node cost O(m) time and memory: 366 GiB for m = 1e6)
            eps, m, log_scale = pw
            l, w = rr_atoms(eps, 2)
            s_arr = np.asarray(s, dtype=complex)
            one = np.asarray(discrete_log_mgf(s_arr, l, w), dtype=complex)
            return log_scale + m * one.real + 1j * (m * one.imag)
        l, w = self._atoms()
        return discrete_log_mgf(s, l, w)

    def pld_atoms(self, direction: str = "remove") -> tuple[np.ndarray, np.ndarray]:
        check_direction(direction)
        return self._atoms()

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return -math.inf

    def _atom_mass_rel_err(self) -> float:
        """Bound on the relative floating-point error of ``_atoms()``' masses (their closed forms): for an
        RR(eps)^m power :func:`rr_power_mass_rel_err` (up to 782x the summation's rounding alone on a
        far-tail cell at m = 225, eps = 8.08, found against mpmath), else 0 unless a subclass declares it
        (randomized response: :func:`rr_mass_rel_err`)."""
        pw = self._rr_power()
        if pw is None:
            return 0.0
        return rr_power_mass_rel_err(pw[0], pw[1], pw[2], 4.0 * _U * abs(pw[2]))

    def _atom_positions(self, losses: np.ndarray):
        """(positions, loss_err, exact_losses) placing ``_atoms()``' losses in their real cells
        (``mechanisms._cells.atoms_cell_masses``): by default the losses themselves, exact.  An RR(eps)^m
        power's products (m - 2j) eps are placed exactly from their rounding residuals
        (``mechanisms._cells.product_placement``; -10 eps one ulp off put a whole atom of 8e-5 in the
        wrong cell), its real losses (m - 2j) eps as rationals for the rest."""
        pw = self._rr_power()
        if pw is None or pw[0] == 0.0:
            return losses, 0.0, None
        place, err = _rr_power_placement(pw[0], pw[1])
        eps, m = Fraction(pw[0]), pw[1]
        return place, err, lambda js: [(m - 2 * int(j)) * eps for j in js]

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        """Histogram of the atoms (exact up to the rounding of summed masses, the masses' own error
        ``_atom_mass_rel_err`` and the positions' ``_atom_positions``; see ``Mechanism``)."""
        check_direction(direction)
        from ._cells import atoms_cell_masses

        l, w = self._atoms()
        place, loss_err, exact = self._atom_positions(l)
        return atoms_cell_masses(edges, place, w, loss_err=loss_err, mass_rel_err=self._atom_mass_rel_err(),
                                 exact_losses=exact)

    def pld_cell_offsets(self, edges: np.ndarray, direction: str = "remove"):
        """Where the atoms sit inside the cells of :meth:`pld_cell_masses` (the smallest and largest
        offsets of each cell's atoms: ``mechanisms._cells.atoms_cell_offsets``), so that the PLD splits a
        cell between its edges instead of moving it up whole (an atom placed one ulp above a grid point,
        at its real position, moved a full step: 1e-4 relative for LaplaceSVT(0.1, 0.9) x 4; the PLD's
        upper end of DiscreteGaussian(2.142) x 50 at delta = 1e-6 went from 20.52899 to 20.51922, the
        contour's being 20.51921).  ``None`` for a subclass with its own cell masses."""
        check_direction(direction)
        if type(self).pld_cell_masses is not AtomicMechanism.pld_cell_masses:
            return None
        from ._cells import atoms_cell_offsets

        l, _ = self._atoms()
        place, loss_err, exact = self._atom_positions(l)
        return atoms_cell_offsets(edges, place, loss_err=loss_err, exact_losses=exact)


class DiscreteMechanism(AtomicMechanism):
    """Shared implementation for mechanisms whose PLD is a finite set of atoms (RDP from the atoms)."""

    pld_available = True

    def _rr_k(self) -> int | None:
        """k when the conditional atoms are those of k-ary randomized response RR(``pure_epsilon``)
        (closed-form RDP)."""
        return None

    def rdp(self, alpha) -> np.ndarray:
        """RDP of the conditional atoms, an upper bound: the closed form of k-ary randomized response
        (``_rr_k``, rounded up), else :func:`atoms_rdp_upper` (certified), both capped at ``pure_epsilon``."""
        al = V.alphas(alpha)
        k = self._rr_k()
        if k is not None:
            # closed form, accurate as alpha -> 1 and for tiny eps, rounded up
            return _rr_curve(al, float(self.pure_epsilon), int(k))
        l, w = self._atoms()
        return atoms_rdp_upper(al, l, w, self.pure_epsilon, self._atom_mass_rel_err())


class FourPointPair(DiscreteMechanism):
    """The four-point dominating pair of an (eps, delta) guarantee (``ApproxDP``, ``GeneralizedPTR``,
    ``SampledWithoutReplacement``): binary randomized response RR(``pure_epsilon``) on the finite part,
    its masses times 1 - ``infinite_loss_mass``."""

    def _atoms(self) -> tuple[np.ndarray, np.ndarray]:
        l, w = rr_atoms(self.pure_epsilon, 2)
        return l, w * (1.0 - self.infinite_loss_mass)

    def _atom_mass_rel_err(self) -> float:
        # randomized response's closed forms, then 1 - p_inf and the product (4 u; at eps = 33.3 the
        # masses were 3.5e-15 off relatively, counted as 0, also in log_mgf_error)
        return rr_mass_rel_err(self.pure_epsilon, 2) + 4.0 * _U

    def _rr_k(self) -> int | None:
        return 2  # the conditional curve is binary randomized response's, RR(pure_epsilon)


def atoms_rdp_upper(alpha: np.ndarray, losses: np.ndarray, masses: np.ndarray, cap: float,
                    mass_rel_err: float = 0.0) -> np.ndarray:
    """Upper bound on the RDP log(M(s)) / s, s = alpha - 1, of finite atoms (l_i, w_i) > 0 normalised to
    mass 1 (the conditional law: M(s) = sum_i w_i e^{s l_i} / W, W = sum_i w_i), capped at ``cap``
    (>= the largest loss; alpha = inf gives ``cap``).  Certified, not a rounded estimate:

    * each stored loss may be off by ``INPUT_ULPS`` = 4 ulps of 1 + |l| (the atoms' contract,
      :mod:`conversions.atoms`) and each mass by the relative ``mass_rel_err``: their worst case,
      e^{s l} <= e^{s l~} e^{s d} and w <= w~ (1 + rho) / (1 - rho) relative to W, is evaluated;
    * M - 1 = sum_i w_i expm1(s l_i) / W (exact; accurate as s -> 0 and for tiny losses, where the
      plain log-sum-exp returned 0 for a positive divergence), rounding bounded by (n + 8) u times the
      sum of the terms' moduli; for large s l the max-shifted log-sum-exp with (n + 8) u (1 + |terms|);
      the smaller of the two bounds is kept;
    * the result is rounded up (relative 4 u and one step), never below 0.
    """
    l = np.asarray(losses, dtype=float)
    w = np.asarray(masses, dtype=float)
    keep = w > 0
    l, w = l[keep], w[keep]
    big_w = math.fsum(w.tolist())  # (correctly rounded)
    rho = mass_rel_err * (1.0 + 1e-6)
    ratio = w / big_w
    w_up = ratio * ((1.0 + rho) / (1.0 - rho)) * (1.0 + 8.0 * _U)  # (W, the quotients and factors rounded)
    w_lo = ratio * ((1.0 - rho) / (1.0 + rho)) * (1.0 - 8.0 * _U)
    dl = _INPUT_ULPS * _U * (1.0 + np.abs(l))
    logw = np.log(w_up) + 2.0 * _U * (1.0 + np.abs(np.log(w_up)))
    lmax = float(np.max(np.abs(l))) if l.size else 0.0
    dl_max = float(np.max(dl, initial=0.0))
    out = np.empty(alpha.shape)
    for i, a in np.ndenumerate(alpha):
        if not math.isfinite(a):
            out[i] = cap
            continue
        s = a - 1.0
        lsum = _log_sum_exp_upper(s, l + dl, logw, lmax)
        if s * (lmax + dl_max) <= 700.0:
            lsum = min(lsum, _log1p_expm1_upper(s, l, dl, w_up, w_lo))
        v = max(lsum, 0.0) / s
        out[i] = min(cap, math.nextafter(v * (1.0 + 4.0 * _U), math.inf))
    return out


def _log1p_expm1_upper(s: float, l: np.ndarray, dl: np.ndarray, w_up: np.ndarray,
                       w_lo: np.ndarray) -> float:
    """Upper bound on log M(s) from M - 1 = sum_i w_i expm1(s l_i) / W (see :func:`atoms_rdp_upper`):
    e^{s l} - 1 <= expm1(s l~) + e^{s l~} expm1(s d); the normalised masses' upper ends ``w_up`` on the
    non-negative parts, their lower ends ``w_lo`` on the negative ones."""
    em = np.expm1(s * l)
    shift = (1.0 + em) * np.expm1(s * dl)
    terms = np.where(em >= 0.0, w_up * (em + shift), w_lo * em + w_up * shift)
    mag = float(np.sum(np.abs(terms)))
    x = math.fsum(terms.tolist()) + (l.size + 8.0) * _U * mag
    if x <= -1.0:
        return -math.inf
    return math.log1p(x) * (1.0 + 2.0 * _U) + 1e-300 if x > 0.0 else math.log1p(x)


def _log_sum_exp_upper(s: float, l_up: np.ndarray, logw_up: np.ndarray, lmax: float) -> float:
    """Upper bound on log sum_i e^{logw_i + s l_i} (losses and log-masses already pushed up): max-shifted
    sum, rounding (n + 8) u (1 + max |term| + s max|l|)."""
    t = logw_up + s * l_up
    m = float(np.max(t))
    acc = math.fsum(np.exp(t - m).tolist())
    v = m + math.log(acc)
    return v + (l_up.size + 8.0) * _U * (1.0 + float(np.max(np.abs(t))) + abs(v) + s * lmax)
