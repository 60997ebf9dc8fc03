"""Poisson subsampling of other mechanisms (add/remove relation): :class:`PoissonSubsampled` (any base
with an RDP curve: the binomial RDP bounds of Zhu & Wang 2019) and :class:`SubsampledLaplace` (both
dominating pairs, Zhu, Dong & Wang 2022).  The subsampled Gaussian is in :mod:`mechanisms.subsampled`,
whose module docstring documents the formulas."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._numerics import mul_up_array
from ._poisson_kernels import poisson_rdp_int
from ._sl_kernels import sl_middle_log_mgf, sl_middle_tv
from .base import Mechanism, as_complex_array, check_direction
from .registry import from_dict, register
from .subsampled import RDP_EXACT_MAX, _interpolate_cgf


def _rdp_base(name: str, base: Mechanism) -> Mechanism:
    """The base mechanism of :class:`PoissonSubsampled`: a Mechanism without infinite-loss mass."""
    if not isinstance(base, Mechanism):
        raise TypeError(f"{name} must be a Mechanism, got {type(base).__name__}")
    if base.infinite_loss_mass > 0:
        raise ValueError(f"{name} must have no infinite-loss mass (delta); subsample an (eps, delta) "
                         "guarantee with ApproxDP(log1p(q*expm1(eps)), q*delta) instead")
    return base


@register
@dataclass(frozen=True)
class PoissonSubsampled(Mechanism):
    """Poisson subsampling with rate ``sample_rate`` of any mechanism ``base`` that has an RDP curve.

    RDP only (upper bound; see the module docstring).  ``base`` must have no infinite-loss mass: for an
    (eps, delta) guarantee use Lemma 2.2.2 directly, ``ApproxDP(log1p(q expm1(eps)), q delta)``.
    """

    base: Mechanism
    sample_rate: float

    name = "poisson_subsampled"
    symmetric = False
    tight = False
    relations = ("add_remove",)

    field_checks = {"base": _rdp_base, "sample_rate": V.probability}

    @classmethod
    def from_params(cls, params: dict) -> PoissonSubsampled:
        p = dict(params)
        p["base"] = from_dict(p["base"])
        return cls(**p)

    @property
    def pure_epsilon(self) -> float:
        """log(1 + q (e^eps - 1)) of the base's pure epsilon, rounded up (expm1, the product and log1p each
        round by < 1 ulp and log1p passes its argument's relative error on with a factor <= 1: 4 ulps and
        one step cover them; exact at q = 0 and q = 1)."""
        e, q = self.base.pure_epsilon, self.sample_rate
        if not math.isfinite(e):
            return math.inf
        if q == 0.0 or e == 0.0:
            return 0.0
        if q == 1.0:
            return e
        return math.nextafter(math.log1p(q * math.expm1(e)) * (1.0 + 4.0 * 2.0**-53), math.inf)

    #: orders above this get the base mechanism's RDP (an upper bound; :data:`RDP_EXACT_MAX`)
    rdp_exact_max = RDP_EXACT_MAX

    def rdp_int(self, alphas, mode: str = "auto") -> np.ndarray:
        """RDP at integer orders >= 2; ``mode`` in {"auto", "tight", "general"} (general = Thm 2.3.1);
        above ``rdp_exact_max`` the base mechanism's RDP (an upper bound)."""
        a = np.asarray(alphas, dtype=np.int64)
        q = self.sample_rate
        if q == 0.0:
            return np.zeros(a.shape)
        base_at = np.asarray(self.base.rdp(a.astype(float)), dtype=float)
        if q == 1.0:
            return base_at
        exact = a <= self.rdp_exact_max
        if not np.all(exact):
            out = base_at.copy()
            if np.any(exact):
                out[exact] = self.rdp_int(a[exact], mode)
            pe = self.pure_epsilon
            return np.minimum(out, pe) if math.isfinite(pe) else out
        amax = int(a.max())
        ell = np.arange(2, amax + 1, dtype=float)
        kv = np.zeros(amax + 1)
        kv[2:] = mul_up_array(ell - 1.0, np.asarray(self.base.rdp(ell), dtype=float))  # (rounded up)
        kv[2:] = np.maximum.accumulate(kv[2:])  # CGF of a valid curve is non-decreasing; keep monotone
        tight = mode == "tight" or (mode == "auto" and getattr(self.base, "poisson_tight", False))
        lval = poisson_rdp_int(a, q, kv, 0)
        if tight:
            val = lval
        else:
            gval = poisson_rdp_int(a, q, kv, 1)
            val = np.minimum(gval, np.maximum(lval, -math.log1p(-q)))
        val = np.minimum(val, base_at)
        pe = self.pure_epsilon
        return np.minimum(val, pe) if math.isfinite(pe) else val

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        if self.sample_rate == 0.0:
            return np.zeros(al.shape)
        out = _interpolate_cgf(al, self.rdp_int)
        fin = np.isfinite(al)
        out[fin] = np.minimum(out[fin], np.asarray(self.base.rdp(al[fin]), dtype=float))
        out[~fin] = self.pure_epsilon
        return np.minimum(out, self.pure_epsilon)


@register
@dataclass(frozen=True)
class SubsampledLaplace(Mechanism):
    """Poisson-subsampled Laplace mechanism (add/remove), with both dominating pairs (Zhu, Dong & Wang 2022).

    With a = sensitivity / scale and r(x) = e^{(2x - 1) a} the likelihood ratio of Lap(1) to Lap(0) in
    units of the sensitivity (clipped to [e^{-a}, e^{a}]), the remove pair is
    ((1-q) Lap(0) + q Lap(1), Lap(0)) and the add pair its swap.  Under Q = Lap(0) the loss of the remove
    pair is l(x) = log(1 - q + q r(x)): an atom log(1-q+qe^{-a}) (Q-mass 1/2), an atom
    log(1-q+qe^{a}) (Q-mass e^{-a}/2), and a smooth part on x in (0, 1).  M(s) = E_Q[(1-q+qr)^{s+1}]
    (remove) and E_Q[(1-q+qr)^{-s}] (add); the smooth part by composite Gauss-Legendre quadrature.
    RDP: the tight Poisson-subsampled Laplace curve (``PoissonSubsampled``; Laplace satisfies (2.2)).
    """

    scale: float
    sample_rate: float
    sensitivity: float = 1.0

    name = "subsampled_laplace"
    symmetric = False
    tight = True
    pld_available = True
    relations = ("add_remove",)
    field_checks = {"scale": V.positive, "sample_rate": V.open_unit, "sensitivity": V.positive}

    @property
    def a(self) -> float:
        return self.sensitivity / self.scale

    def _as_poisson(self) -> PoissonSubsampled:
        from .laplace import Laplace

        return PoissonSubsampled(Laplace(self.scale, self.sensitivity), self.sample_rate)

    def rdp(self, alpha) -> np.ndarray:
        return self._as_poisson().rdp(alpha)

    @property
    def pure_epsilon(self) -> float:
        return self._as_poisson().pure_epsilon

    @property
    def log_mgf_error(self) -> float:
        return 1e-13

    def log_mgf_phase_error(self, c: float, t_max: float, direction: str = "remove") -> float:
        """The phase rounding of the terms e^{i t l} (quadrature nodes and atoms), relative to M(c) (the
        terms' moduli sum to M(c)): l = logaddexp(log(1 - q), log q + (2x - 1) a), |l| <= a, is off by
        at most 4 u (|log q| + a + 1) + 2 u (a + |log(1 - q)| + 2) (as for the subsampled Gaussian,
        :func:`mechanisms.subsampled.sg_phase_error`), the products t l add u t a, the trig calls 64 u:
        u (t_max (7 a + 4 |log q| + 2 |log(1 - q)| + 8) + 64).  Measured against a 30-digit reference
        (q = 0.1, scale = 0.1, c = 2): 1.07e-13 of M(c) at t = 1000 and 1.07e-12 at t = 3000, above the
        constant 1e-13 alone."""
        if not t_max > 0.0:
            return 0.0
        q, a = self.sample_rate, self.a
        k = 7.0 * a + 4.0 * abs(math.log(q)) + 2.0 * abs(math.log1p(-q)) + 8.0
        return 2.0**-53 * (t_max * k + 64.0) * (1.0 + 1e-9)

    def mgf_cost(self, t_max: float, c: float = 0.0, direction: str = "remove") -> float:
        """10-point Gauss-Legendre panels, (|Im w| + |Re w|) a / 2 + a + 5 of them at most (w = s + 1 or
        -s; ``sl_middle_log_mgf``), walked twice: the typical cost (average over [0, t_max] at small
        |Re s|) or a quarter of that bound at |Re s| <= c, whichever is larger."""
        a = self.a
        typical = 10.0 * (4.0 + a * t_max / 4.0)
        bound = 2.0 * 10.0 * ((t_max + abs(c) + 1.0) * a / 2.0 + a + 5.0)
        return max(typical, bound / 4.0)

    def _atom_losses(self) -> tuple[float, float]:
        q, a = self.sample_rate, self.a
        return math.log1p(q * math.expm1(-a)), math.log1p(q * math.expm1(a))

    def _atom_loss_errors(self) -> np.ndarray:
        """Bounds on the rounding of ``_atom_losses`` (lo, hi): y = q expm1(+-a) is relatively within 3 u
        (expm1, the product), and log1p(y) within 2 u |log1p(y)| + 3 u |y| / (1 + y); doubled (libm's few
        ulps).  An edge within them of an atom leaves its cell unknown (``atoms_cell_masses``)."""
        q, a = self.sample_rate, self.a
        out = []
        for y in (q * math.expm1(-a), q * math.expm1(a)):
            out.append(2.0 * 2.0**-53 * (2.0 * abs(math.log1p(y)) + 3.0 * abs(y) / (1.0 + y)) + 1e-300)
        return np.array(out)

    def pld_atoms(self, direction: str = "remove") -> tuple[np.ndarray, np.ndarray]:
        check_direction(direction)
        q, a = self.sample_rate, self.a
        lo, hi = self._atom_losses()
        if direction == "remove":  # P' = (1-q) Lap(0) + q Lap(1)
            return np.array([lo, hi]), np.array([(1 - q) / 2 + q * math.exp(-a) / 2,
                                                 (1 - q) * math.exp(-a) / 2 + q / 2])
        return np.array([-lo, -hi]), np.array([0.5, 0.5 * math.exp(-a)])  # under Q = Lap(0)

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        flat = s.ravel()
        q, a = self.sample_rate, self.a
        lo, hi = self._atom_losses()
        w = flat + 1.0 if direction == "remove" else -flat
        # atoms written under Q: masses 1/2 and e^{-a}/2 at exponents w*lo, w*hi
        t_lo = math.log(0.5) + w * lo
        t_hi = math.log(0.5) - a + w * hi
        mre, mim = sl_middle_log_mgf(np.ascontiguousarray(flat.real), np.ascontiguousarray(flat.imag),
                                     q, a, direction == "add")
        terms = np.stack([t_lo, t_hi, mre + 1j * mim])
        from ._numerics import complex_logsumexp

        return complex_logsumexp(terms, axis=0).reshape(s.shape)

    def pld_cell_masses(self, edges: np.ndarray, direction: str = "remove"):
        """Cells of the loss: the two atoms (``pld_atoms``, on-edge atoms go below; an atom within its
        rounding of an edge counts in the error of both cells) plus the closed-form masses of the
        continuous part over the inverse image of each cell (``mechanisms._cells.sl_cells``; per-cell
        error bounds)."""
        check_direction(direction)
        from ._cells import atoms_cell_masses, check_edges, sl_cells

        e = check_edges(edges)
        # (the atoms' masses: (1 - q) / 2 + q e^{-a} / 2 and the like, a few ulps)
        ma, ea = atoms_cell_masses(e, *self.pld_atoms(direction), loss_err=self._atom_loss_errors(),
                                   mass_rel_err=8.0 * 2.0**-53)
        mc, ec = sl_cells(e, self.sample_rate, self.a, direction == "add")
        return ma + mc, ea + ec + 2.0**-53 * (ma + mc)

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        """t -> log bound on |C(c + it')|, |t'| >= t: min(C(c), 1.1 (f(lo) + f(hi) + TV f) / t)."""
        check_direction(direction)
        q, a = self.sample_rate, self.a
        mre, _ = sl_middle_log_mgf(np.array([float(c)]), np.array([0.0]), q, a, direction == "add")
        log_c0 = float(mre[0])
        log_b = math.log(1.1 * sl_middle_tv(float(c), q, a, direction == "add", 20000))
        return lambda t: log_c0 if t <= 0 else min(log_c0, log_b - math.log(t))

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)
