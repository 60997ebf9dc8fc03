"""Integer-valued noise: discrete Gaussian, discrete Laplace (two-sided geometric) and Skellam.

Each mechanism adds integer noise Y to an integer-valued query f with |f(D) - f(D')| <= Delta
(``sensitivity``, a positive integer) under the accountant's neighbouring relation (add/remove or
replace-one: only the bound Delta matters).  The dominating pair is P = law(Y), Q = law(Y + Delta)
(a shift by d < Delta is dominated: checked by enumeration in the tests for every d <= Delta); all three
noises are symmetric, so the swapped pair has the same privacy-loss law and ``symmetric = True``.

The privacy loss L(x) = log p(x) / p(x - Delta) lives on a lattice, so the characteristic-function
route composes the atoms *exactly* (:mod:`conversions.atoms`).  Discrete Gaussian and Skellam noise have
infinitely many atoms: the atoms are enumerated while their log-mass is above ``LOG_TAIL`` (-690, the
accountant's own pruning floor) and the remaining probability (a rigorous upper bound) is reported as
``infinite_loss_mass`` (moving mass to an infinite loss only increases delta: the bound stays an upper
bound).  At the default floor this mass is below 1e-290 and changes no printed digit.

DiscreteGaussian(sigma, sensitivity)
    Y ~ N_Z(0, sigma^2), P(Y = x) = e^{-x^2/(2 sigma^2)} / Z (Canonne, Kamath & Steinke 2020, "The
    Discrete Gaussian for Differential Privacy").  Loss on x in Z: L(x) = (Delta^2 - 2 Delta x) / (2 sigma^2).

    * RDP, exact for real alpha > 1 (derived here, it refines CKS 2020 Prop. 5 / Cor. 9):
          eps(alpha) = alpha Delta^2 / (2 sigma^2) + log(Z((1 - alpha) Delta) / Z(0)) / (alpha - 1),
      Z(theta) = sum_x e^{-(x - theta)^2 / (2 sigma^2)}; Z(theta) <= Z(0) (Poisson summation), so the CKS
      bound alpha Delta^2 / (2 sigma^2) ((Delta / sigma)^2 / 2-zCDP) is the cap.  The theta-function
      ratio is evaluated with a certified truncation and rounded up.
    * delta(eps): CKS 2020 Thm 7, P[X > eps sigma^2/Delta - Delta/2] - e^eps P[X > eps sigma^2/Delta +
      Delta/2] for X ~ N_Z(0, sigma^2), which the exact atoms reproduce.

DiscreteLaplace(scale, sensitivity)
    Y ~ Lap_Z(t), P(Y = x) = (1 - r)/(1 + r) r^{|x|}, r = e^{-1/t} (Inusah & Kozubowski 2006; as a DP
    mechanism Ghosh, Roughgarden & Sundararajan 2012 ("geometric mechanism"); CKS 2020 section 2.3).
    Exactly Delta + 1 atoms: L = Delta/t with mass 1/(1 + r), L = -Delta/t with mass r^Delta/(1 + r), and
    L = (Delta - 2x)/t with mass (1 - r) r^x/(1 + r) for 0 < x < Delta.  Pure (Delta/t)-DP; the RDP curve
    is log M(alpha - 1)/(alpha - 1) of these atoms (exact); for Delta = 1 the pair *is* binary randomized
    response with eps = 1/t.

Skellam(mu, sensitivity)
    Y = N_1 - N_2, N_i ~ Poisson(mu/2) independent, so Var Y = mu (the parametrisation of Agarwal,
    Kairouz & Liu 2021, "The Skellam Mechanism for Differentially Private Federated Learning");
    P(Y = k) = e^{-mu} I_|k|(mu).

    * RDP: AKL 2021 Thm 3.5 with Delta_1 = Delta_2 = Delta, for integer alpha > 1,
          eps(alpha) <= alpha Delta^2/(2 mu)
                        + min(((2 alpha - 1) Delta^2 + 6 Delta)/(4 mu^2), 3 Delta/(2 mu)),
      and for fractional alpha the linear interpolation of (alpha - 1) eps(alpha) between the integer
      neighbours (convexity of the cumulant; Mironov 2017).  An upper bound, checked against the exact
      divergence (mpmath) in the tests.
    * PLD: the pmf from Miller's backward recurrence I_{m-1} = (2m/mu) I_m + I_{m+1} (non-negative terms
      only), normalised by the sum of the pmf itself, run from both ends of the certified bracket of
      I_{N+1}/I_N; masses are rounded up and losses set to the upper end of their certified bracket, so
      the atoms are a dominating pair of the Skellam pair (hence ``tight = False``: a lower bound of the
      cf route is the dominating pair's, off from the Skellam pair's by the bracket width ~1e-12).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from . import validation as V
from ._discrete_kernels import (
    atoms_log1p_expm1,
    atoms_log_mgf,
    atoms_log_mgf_real,
    bessel_backward,
)
from ._numerics import ceil_fraction, div_up, mul_up
from ._rdp_kernels import rr_k_curve
from .base import as_complex_array, check, check_direction
from .lattice import AtomicMechanism as _AtomicPLD
from .registry import register

__all__ = ["DiscreteGaussian", "DiscreteLaplace", "Skellam", "LOG_TAIL", "MAX_LATTICE_ATOMS"]

U = 2.0 ** -53
LOG_TAIL = -690.0  # atoms of log-mass below this are not enumerated (their mass is infinite_loss_mass)
MAX_LATTICE_ATOMS = 1 << 18  # beyond this the enumerated window is narrowed (the tail mass grows)
#: the discrete Gaussian's window |x| <= 2^17 holds all but 2 Phi(-3.35) ~ 8e-4 of its mass up to this sigma
DG_MAX_SIGMA = (MAX_LATTICE_ATOMS // 2 + 1) / 3.35
_NEGLIGIBLE_TAIL = 1e-250  # below this the reported tail mass changes no float result
#: an integer L1 sensitivity in [1, 10^6] (the lattice noises with a bounded pure epsilon)
_LATTICE_SENSITIVITY = check(V.integer, low=1, high=10**6)


# ------------------------------------------------------------------------------------ helpers
def _atoms_rdp(alpha: np.ndarray, losses: np.ndarray, w: np.ndarray, cap: float) -> np.ndarray:
    """Upper bound on log(sum_i w_i e^{(alpha-1) l_i}) / (alpha - 1) for atoms of total mass 1, capped.

    Small s = alpha - 1 (s max|l| <= 1): log1p of sum w expm1(s l) (no cancellation as s -> 0); larger s:
    max-shifted log-sum-exp.  The rounding (n + 8 ulps of the summed magnitudes, a few ulps of the log) is
    added before the division, so the result is an upper bound on the exact value.
    """
    out = np.empty(alpha.shape)
    lmax = float(np.max(np.abs(losses))) if losses.size else 0.0
    logw = np.log(w)
    n = losses.size
    for i, a in np.ndenumerate(alpha):
        if not math.isfinite(a):
            out[i] = cap
            continue
        s = a - 1.0
        if s * lmax <= 1.0:
            val, mag = atoms_log1p_expm1(s, losses, w)
            err = (n + 8.0) * U * mag / max(math.exp(val), 0.5) + 4 * U * abs(val)
        else:
            val = atoms_log_mgf_real(s, losses, logw)
            err = (n + 8.0) * U * (1.0 + abs(val) + s * lmax)
        out[i] = min(cap, max(0.0, (val + err) / s * (1.0 + 4 * U)))
    return out


def _interpolate_cgf_upper(alpha: np.ndarray, eps_int) -> np.ndarray:
    """eps(alpha) from integer-order upper bounds by linear interpolation of K(a) = (a - 1) eps(a) (K(1) = 0):
    K is convex, so the chord over [floor, ceil] lies above it (Mironov 2017; van Erven & Harremoes 2014)."""
    out = np.empty(alpha.shape)
    for i, a in np.ndenumerate(alpha):
        if not math.isfinite(a):
            out[i] = float(eps_int(math.inf))
            continue
        lo, hi = math.floor(a), math.ceil(a)
        if lo == hi:
            out[i] = float(eps_int(lo))
            continue
        k_lo = 0.0 if lo <= 1 else (lo - 1) * float(eps_int(lo))
        k_hi = (hi - 1) * float(eps_int(hi))
        f = a - lo
        out[i] = ((1.0 - f) * k_lo + f * k_hi) / (a - 1.0) * (1.0 + 4 * U)
    return out


class _LatticeNoise(_AtomicPLD):
    """Shared PLD plumbing: atoms from ``_lattice()`` = (losses, log-masses, tail mass, declared error)."""

    pld_available = True
    symmetric = True

    def _lattice(self) -> tuple[np.ndarray, np.ndarray, float, float]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _atoms(self) -> tuple[np.ndarray, np.ndarray]:
        l, lw, _, _ = self._lattice()
        return l, np.exp(lw)

    @property
    def infinite_loss_mass(self) -> float:
        """Upper bound on the probability of the atoms not enumerated (treated as infinite loss)."""
        return self._lattice()[2]

    @property
    def log_mgf_error(self) -> float:
        return self._lattice()[3]

    def _atom_mass_rel_err(self) -> float:
        # the log-masses' declared error bounds the masses' relative error too (a cell of 1.2e-253 was
        # 1.7e-13 off with only the summation counted; found by a stress run against mpmath)
        return 1.01 * self._lattice()[3]

    def _exponent_bounds(self, direction: str = "remove") -> tuple[float, float]:
        # (the cached lattice's losses: no masses exponentiated)
        l = self._lattice()[0]
        return float(np.max(np.abs(l))), float(np.max(self._atom_positions(l)[1], initial=0.0))

    def mgf_cost(self, t_max: float) -> float:
        # one node costs n exp/cos/sin evaluations (~30 ns each): ~3 n closed-form (Gaussian) node units
        return max(1.0, 3.0 * self._lattice()[0].size)

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        l, lw, _, _ = self._lattice()
        flat = np.ascontiguousarray(s).ravel()
        re, im = atoms_log_mgf(np.ascontiguousarray(flat.real), np.ascontiguousarray(flat.imag), l, lw)
        return (re + 1j * im).reshape(s.shape)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        check_direction(direction)
        l, lw, _, _ = self._lattice()
        return float(atoms_log_mgf_real(float(c), l, lw))

    def total_variation(self, direction: str = "remove") -> float:
        """delta(0) = sum_x (p(x) - q(x))_+ from the atoms plus the tail mass (an upper bound)."""
        check_direction(direction)
        l, lw, p_inf, err = self._lattice()
        pos = l > 0
        tv = float(np.sum(np.exp(lw[pos]) * -np.expm1(-l[pos])))
        return min(1.0, tv * (1.0 + 1e-12 + 2 * err) + p_inf + 1e-300)


# ------------------------------------------------------------------------------------ discrete Gaussian
@functools.lru_cache(maxsize=64)
def _dg_lattice(sigma: float, delta: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    s2 = sigma * sigma
    x_max = int(math.floor(sigma * math.sqrt(-2.0 * LOG_TAIL)))
    x_max = min(x_max, MAX_LATTICE_ATOMS // 2)
    x = np.arange(-x_max, x_max + 1, dtype=float)
    log_u = -(x * x) / (2.0 * s2)  # unnormalised log-masses (x^2 exact below 2^53, one division)
    z_kept = math.fsum(np.exp(log_u).tolist())  # Z_kept <= Z (correctly rounded sum)
    # sum_{|x| > X} e^{-x^2/(2 s2)} <= 2 e^{-(X+1)^2/(2 s2)} / (1 - e^{-(2X+3)/(2 s2)}) (ratio of
    # consecutive terms e^{-(2x+1)/(2 s2)} <= e^{-(2X+3)/(2 s2)} for x >= X + 1)
    tail = 2.0 * math.exp(-((x_max + 1.0) ** 2) / (2.0 * s2)) / -math.expm1(-(2.0 * x_max + 3.0) / (2.0 * s2))
    log_z = math.log(z_kept)
    logw = log_u - log_z  # masses normalised by Z_kept >= their exact values by a factor <= 1 + tail
    losses = (float(delta) * (float(delta) - 2.0 * x)) / (2.0 * s2)
    p_inf = min(1.0, tail / z_kept * (1.0 + 1e-12))
    # floating point: one rounding per log-mass term plus the log of the fsum (relative)
    err = 8.0 * U * (1.0 + float(np.max(np.abs(logw)))) + (x.size + 8.0) * U
    return losses, logw, p_inf, err


@functools.lru_cache(maxsize=64)
def _dg_loss_err(sigma: float, delta: int) -> np.ndarray:
    """Bounds on |computed - real| of ``_dg_lattice``'s losses Delta (Delta - 2x) / (2 sigma^2) (sigma the
    float parameter): 0 where every step is exact (Dekker's products: sigma^2, the numerator (integers
    < 2^53 times an integer), and the quotient times 2 sigma^2 giving back the numerator; e.g. sigma = 1),
    else 4 u |L|: the numerator, sigma^2 and the division round by u each, (1 + u)^2 / (1 - u) - 1 < 3.01 u.
    (A loss at sigma = 0.445, Delta = 7 sat an ulp off -441.7488830417919, its 1.9e-281 in the wrong cell.)"""
    from ._numerics import two_product

    losses = _dg_lattice(sigma, delta)[0]
    x_max = (losses.size - 1) // 2
    d = float(delta)
    s2, e2, ok2 = two_product(sigma, sigma)
    num, en, okn = two_product(d, d - 2.0 * np.arange(-x_max, x_max + 1, dtype=float))
    back, eq, okq = two_product(losses, 2.0 * s2)
    exact = bool(ok2 and e2 == 0.0) & okn & (en == 0.0) & okq & (eq == 0.0) & (back == num)
    return np.where(exact, 0.0, 4.0 * U * np.abs(losses))


def _log_theta_ratio_upper(theta: float, sigma: float, dtheta: float) -> float:
    """Upper bound on log(Z(theta)/Z(0)) <= 0, Z(theta) = sum_{x in Z} e^{-(x - theta)^2/(2 sigma^2)}.

    ``dtheta`` bounds the error of ``theta`` itself.  sigma >= 1/2: Poisson summation,
    Z(theta)/Z(0) = 1 - 4 S/D with S = sum_k q^{k^2} sin^2(pi k theta), D = 1 + 2 sum_k q^{k^2},
    q = e^{-2 pi^2 sigma^2} (12 terms; dropping the rest of S only raises the ratio, D's tail is added).
    sigma < 1/2: direct sums over |x| <= 40 (the rest is below e^{-3000}).
    """
    th = theta - math.floor(theta)
    if sigma >= 0.5:
        lq = -2.0 * math.pi**2 * sigma * sigma
        k = np.arange(1, 13, dtype=float)
        qk = np.exp(lq * k * k)
        s = float(np.sum(qk * np.sin(math.pi * k * th) ** 2))
        d = 1.0 + 2.0 * float(np.sum(qk)) + 2.0 * math.exp(lq * 169.0) / (1.0 - math.exp(lq * 27.0))
        val = math.log1p(-4.0 * s * (1.0 - 1e-14) / (d * (1.0 + 1e-14)))
        q1 = math.exp(lq)
        # |d/dtheta log Z(theta)| <= 4 pi sum_k k q^{k^2} / (1 - 4 sum q^{k^2})
        #                         <= 4 pi q (1 + 1e-3) / (1 - 4.1 q)
        slope = 4.0 * math.pi * q1 * 1.01 / max(1.0 - 4.1 * q1, 0.5)
        return min(0.0, val + 8.0 * U * abs(val) + slope * dtheta)
    xs = np.arange(-40, 42, dtype=float)
    a = -((xs - th) ** 2) / (2.0 * sigma * sigma)
    b = -(xs * xs) / (2.0 * sigma * sigma)
    num = math.fsum(np.exp(a).tolist()) + 1e-300
    den = math.fsum(np.exp(b).tolist())
    val = math.log(num) - math.log(den)
    slope = 42.0 / (sigma * sigma)  # |d/dtheta log Z| <= max |x - theta| / sigma^2 over the weight's support
    return min(0.0, val + 8.0 * U * (1.0 + abs(math.log(num)) + abs(math.log(den))) + slope * dtheta)


@register
@dataclass(frozen=True)
class DiscreteGaussian(_LatticeNoise):
    """Discrete Gaussian noise N_Z(0, sigma^2) on an integer query of sensitivity ``sensitivity``.

    Parameters
    ----------
    sigma : float
        Scale parameter sigma > 0 of P(Y = x) proportional to e^{-x^2 / (2 sigma^2)} (its variance is
        slightly below sigma^2).
    sensitivity : int, default 1
        Integer sensitivity Delta >= 1 (|f(D) - f(D')| <= Delta).

    Notes
    -----
    Exact privacy-loss lattice (Canonne, Kamath & Steinke 2020); exact RDP (module docstring).  Not pure
    DP.  ``infinite_loss_mass`` is the (rigorously bounded) probability of the atoms beyond the
    enumerated window, below 1e-290 unless sigma > ~3500 (then the window is capped at 2^18 atoms); sigma
    is limited to ``DG_MAX_SIGMA`` (~3.9e4), where that mass reaches ~1e-3.
    """

    sigma: float
    sensitivity: int = 1

    name = "discrete_gaussian"
    field_checks = {"sigma": V.positive, "sensitivity": check(V.integer, low=1)}

    def __post_init__(self):
        super().__post_init__()
        if self.sigma > 1e12:
            raise ValueError(f"sigma must be <= 1e12 (the lattice window would be meaningless), "
                             f"got {self.sigma!r}")
        if self.sensitivity / self.sigma > 1e6:
            raise ValueError(f"sensitivity / sigma must be <= 1e6, got sigma={self.sigma!r}, "
                             f"sensitivity={self.sensitivity!r}")
        if self.sigma > DG_MAX_SIGMA:
            # (past it the 2^18-atom window leaves > 1e-3 of the mass outside, counted as infinite loss:
            # no delta below that could be certified, and at sigma ~ 2e5 that mass reached 1)
            raise ValueError(f"sigma must be <= {DG_MAX_SIGMA:.6g} (the enumerated lattice of "
                             f"{MAX_LATTICE_ATOMS} atoms would leave more than 1e-3 of the noise's mass "
                             f"outside it), got {self.sigma!r}")

    @property
    def tight(self) -> bool:  # type: ignore[override]
        """The enumerated atoms are the exact pair unless the tail mass is visible in floating point."""
        return self.infinite_loss_mass <= _NEGLIGIBLE_TAIL

    @property
    def mu(self) -> float:
        """Delta / sigma (the mechanism is (mu^2 / 2)-zCDP, CKS 2020)."""
        return self.sensitivity / self.sigma

    def _lattice(self):
        return _dg_lattice(self.sigma, self.sensitivity)

    def _atom_positions(self, losses: np.ndarray):
        """The float losses with their rounding bounds (``_dg_loss_err``) and, for atoms next to an edge,
        their real losses Delta (Delta - 2x) / (2 sigma^2) as Fractions."""
        d, x_max = self.sensitivity, (losses.size - 1) // 2
        s2 = 2 * Fraction(self.sigma) ** 2
        return (losses, _dg_loss_err(self.sigma, d),
                lambda js: [Fraction(d * (d - 2 * (int(j) - x_max))) / s2 for j in js])

    def rdp(self, alpha) -> np.ndarray:
        """Exact RDP alpha mu^2/2 + log(Z((1 - alpha) Delta)/Z(0))/(alpha - 1), rounded up (module
        docstring)."""
        al = V.alphas(alpha)
        out = np.empty(al.shape)
        # Delta^2 / (2 sigma^2) and alpha times it, each rounded up
        half_mu2 = ceil_fraction(Fraction(self.sensitivity) ** 2 / (2 * Fraction(self.sigma) ** 2))
        d = float(self.sensitivity)
        for i, a in np.ndenumerate(al):
            if not math.isfinite(a):
                out[i] = math.inf
                continue
            cks = mul_up(a, half_mu2)  # >= alpha Delta^2 / (2 sigma^2), the cap
            th = -(a - 1.0) * d
            dth = 4.0 * U * abs(th)
            lr = _log_theta_ratio_upper(th, self.sigma, dth)
            q = lr / (a - 1.0)  # (a - 1 is exact for a < 2^53; the quotient and the sum round once each)
            v = cks + q
            out[i] = min(cks, max(0.0, math.nextafter(v + 2.0 * U * (abs(v) + abs(q)), math.inf)))
        return out


# ------------------------------------------------------------------------------------ discrete Laplace
@functools.lru_cache(maxsize=64)
def _dlap_lattice(scale: float, delta: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    inv = 1.0 / scale
    log_r = -inv
    log_1pr = math.log1p(math.exp(log_r))
    losses = [delta * inv]
    logw = [-log_1pr]
    if delta > 1:
        xs = np.arange(1, delta, dtype=float)
        log_1mr = math.log(-math.expm1(log_r))
        losses.extend(((delta - 2.0 * xs) * inv).tolist())
        logw.extend((log_1mr + xs * log_r - log_1pr).tolist())
    losses.append(-delta * inv)
    logw.append(delta * log_r - log_1pr)
    l, lw = np.array(losses), np.array(logw)
    err = 8.0 * U * (1.0 + float(np.max(np.abs(lw))))
    return l, lw, 0.0, err


@functools.lru_cache(maxsize=64)
def _dlap_loss_err(scale: float, delta: int) -> np.ndarray:
    """Bounds on |computed - real| of ``_dlap_lattice``'s losses k / t (k = Delta - 2x, t the float scale),
    computed as k fl(1 / t): 0 where both steps are exact (Dekker: fl(1 / t) t = 1, k fl(1 / t) exact;
    e.g. t = 1 or 0.5), else 3 u |L| (two roundings, (1 + u)^2 - 1 < 2.01 u).  (At t = 0.193, Delta = 2 the
    float loss lay an ulp off -10.349694471615928, its 3.2e-5 in the wrong cell.)"""
    from ._numerics import two_product

    losses = _dlap_lattice(scale, delta)[0]
    inv = 1.0 / scale
    one, e1, ok1 = two_product(inv, scale)
    _, ek, okk = two_product(float(delta) - 2.0 * np.arange(delta + 1, dtype=float), inv)
    exact = bool(ok1 and e1 == 0.0 and one == 1.0) & okk & (ek == 0.0)
    return np.where(exact, 0.0, 3.0 * U * np.abs(losses))


@register
@dataclass(frozen=True)
class DiscreteLaplace(_LatticeNoise):
    """Discrete Laplace (two-sided geometric) noise P(Y = x) proportional to e^{-|x| / scale}.

    Parameters
    ----------
    scale : float
        t > 0 (dp-accounting's ``DiscreteLaplaceDpEvent`` uses noise_parameter = 1/t).
    sensitivity : int, default 1
        Integer sensitivity Delta >= 1.

    Notes
    -----
    Delta + 1 atoms (module docstring); pure (Delta/scale)-DP; exact RDP from the atoms.
    """

    scale: float
    sensitivity: int = 1

    name = "discrete_laplace"
    field_checks = {"scale": V.positive, "sensitivity": _LATTICE_SENSITIVITY}

    def __post_init__(self):
        super().__post_init__()
        if self.sensitivity / self.scale > 700.0:
            raise ValueError(f"sensitivity / scale must be <= 700 (pure epsilon), got scale={self.scale!r}, "
                             f"sensitivity={self.sensitivity!r}")

    @property
    def pure_epsilon(self) -> float:
        """Delta / scale, rounded up (the smallest float >= the exact ratio)."""
        return div_up(float(self.sensitivity), self.scale)

    def _lattice(self):
        return _dlap_lattice(self.scale, self.sensitivity)

    def _atom_positions(self, losses: np.ndarray):
        """The float losses with their rounding bounds (``_dlap_loss_err``) and, for atoms next to an
        edge, their real losses (Delta - 2x) / t as Fractions."""
        d, t = self.sensitivity, Fraction(self.scale)
        return losses, _dlap_loss_err(self.scale, d), lambda js: [Fraction(d - 2 * int(j)) / t for j in js]

    def _rr_power(self):
        return None

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        if self.sensitivity == 1:
            # the pair is binary randomized response with eps = 1/scale (closed form at eps rounded up,
            # itself rounded up)
            flat = np.ascontiguousarray(al.ravel(), dtype=float)
            return rr_k_curve(flat, self.pure_epsilon, 2).reshape(al.shape)
        l, lw, _, _ = self._lattice()
        return _atoms_rdp(al, l, np.exp(lw), self.pure_epsilon)


# ------------------------------------------------------------------------------------ Skellam
def _skellam_log_j(z: float, n_top: int) -> tuple[np.ndarray, np.ndarray]:
    """log J_m (m = 0..n_top) from both ends of the bracket of r_N = I_{N+1}(z)/I_N(z):
    z/(2(N+1) + z) < r_N < z/(2(N+1))."""
    lo = z / (2.0 * (n_top + 1) + z) * (1.0 - 4 * U)
    hi = z / (2.0 * (n_top + 1)) * (1.0 + 4 * U)
    return bessel_backward(z, n_top, lo), bessel_backward(z, n_top, hi)


@functools.lru_cache(maxsize=32)
def _skellam_lattice(mu: float, delta: int) -> tuple[np.ndarray, np.ndarray, float, float]:
    z = mu  # Bessel argument 2 sqrt(lambda_1 lambda_2) with lambda_i = mu / 2
    n_top = int(60.0 * math.sqrt(mu) + 4 * delta + 300)
    while True:
        ja, jb = _skellam_log_j(z, n_top)
        # log S, S = J_0 + 2 sum_{m >= 1} J_m (beyond N: <= J_N r_N / (1 - r_N), r_N < z / (2 (N + 1)))
        # per run: log S with S = J_0 + 2 sum_{m >= 1} J_m over m <= N (a lower bound: the mass beyond N is
        # left out), so J_m / S is an upper bound of that run's pmf; the exact pmf lies between the runs
        log_p = np.full(ja.shape, -np.inf)
        for lj in (ja, jb):
            m0 = float(np.max(lj))
            e = np.exp(lj - m0)
            log_s = m0 + math.log(2.0 * math.fsum(e.tolist()) - float(e[0]))
            log_p = np.maximum(log_p, lj - log_s)
        if log_p[-1] < LOG_TAIL - 40.0:
            break
        n_top *= 2
        if n_top > 50_000_000:
            raise ValueError(f"mu={mu!r} is too large for the Skellam lattice")
    # floating point of the recurrence: <= 3 ulps per step relative, plus the rescaling's log additions
    fp = (3.0 * (n_top + 2) + 16.0) * U + 4.0 * U * float(max(np.max(np.abs(ja)), np.max(np.abs(jb))))
    kmax = int(np.max(np.nonzero(log_p >= LOG_TAIL)[0]))
    kmax = min(kmax, MAX_LATTICE_ATOMS // 2, n_top - delta - 1)
    ks = np.arange(-kmax, kmax + 1)
    lpk = log_p[np.abs(ks)] + fp
    # losses L(k) = log J_|k| - log J_|k - Delta|: the ratio is monotone in the start value, so the two
    # runs bracket it; keep the upper end plus the rounding (a dominating pair)
    la = ja[np.abs(ks)] - ja[np.abs(ks - delta)]
    lb = jb[np.abs(ks)] - jb[np.abs(ks - delta)]
    losses = np.maximum(la, lb) + 2.0 * fp * (1.0 + np.abs(la))
    # tail beyond the window (both sides): p(kmax + 1 + j) <= p(kmax + 1) r^j with r = r_{kmax+1} < 1
    # (I_{m+1}/I_m is decreasing in m), r bounded by the runs' ratio at kmax + 1
    i1 = kmax + 1
    r_up = math.exp(float(max(ja[i1 + 1] - ja[i1], jb[i1 + 1] - jb[i1])) + fp)
    p_next = math.exp(float(log_p[i1]) + fp)
    tail = 2.0 * p_next / max(1.0 - r_up, 1e-300) if r_up < 1.0 else 1.0
    p_inf = min(1.0, tail * (1.0 + 1e-12) + 1e-300)
    err = 8.0 * U * (1.0 + float(np.max(np.abs(lpk)))) + (ks.size + 8.0) * U
    return losses.astype(float), lpk.astype(float), p_inf, err


def skellam_rdp_akl(alpha: float, mu: float, delta: float) -> float:
    """Agarwal, Kairouz & Liu 2021 Thm 3.5 (Delta_1 = Delta_2 = Delta), integer alpha > 1, variance mu."""
    a = float(alpha)
    return a * delta**2 / (2.0 * mu) + min(((2.0 * a - 1.0) * delta**2 + 6.0 * delta) / (4.0 * mu**2),
                                           3.0 * delta / (2.0 * mu))


@register
@dataclass(frozen=True)
class Skellam(_LatticeNoise):
    """Skellam noise Poisson(mu/2) - Poisson(mu/2) (variance ``mu``) on an integer query.

    Parameters
    ----------
    mu : float
        Variance of the noise, > 0 (Agarwal, Kairouz & Liu 2021's parameter).
    sensitivity : int, default 1
        Integer sensitivity Delta >= 1 (L1 = L2 sensitivity of a scalar query).

    Notes
    -----
    RDP: the published AKL 2021 bound (an upper bound).  PLD: certified atoms of a dominating pair
    (module docstring), exact up to ~1e-12 relative; ``tight = False``.
    """

    mu: float
    sensitivity: int = 1

    name = "skellam"
    tight = False
    field_checks = {"mu": V.positive, "sensitivity": _LATTICE_SENSITIVITY}

    def __post_init__(self):
        super().__post_init__()
        if not 1e-6 <= self.mu <= 1e10:
            raise ValueError(f"mu must lie in [1e-6, 1e10], got {self.mu!r}")

    def _lattice(self):
        return _skellam_lattice(self.mu, self.sensitivity)

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        d = float(self.sensitivity)

        def at_int(a):
            if not math.isfinite(a):
                return math.inf
            return skellam_rdp_akl(a, self.mu, d) * (1.0 + 4 * U)

        return _interpolate_cgf_upper(al, at_int)
