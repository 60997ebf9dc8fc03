"""Laplace mechanism M(D) = f(D) + Lap(0, b), L1 sensitivity Delta; a = Delta / b.

Dominating pair (tight, symmetric): P = Lap(0, b), Q = Lap(Delta, b).  The privacy loss under P has
two atoms and a continuous part (docs/derivations/laplace.md):

    L = +a with mass 1/2,   L = -a with mass e^{-a}/2,   density (1/4) e^{(l - a)/2} on (-a, a).

* RDP (Mironov 2017, Table II), exact for real alpha > 1:
  eps(alpha) = log[alpha/(2alpha-1) e^{(alpha-1)a} + (alpha-1)/(2alpha-1) e^{-alpha a}] / (alpha-1).
* log MGF (docs/derivations/laplace.md; entire in s), exact:
  M(s) = e^{s a} [ 1/2 + e^{-a} e^{-2 s a} / 2 + (a/2) g((2s + 1) a) ],  g(w) = (1 - e^{-w}) / w.
* Pure DP: eps = a.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._numerics import div_up, laplace_log_mgf_kernel
from ._rdp_kernels import laplace_curve
from .base import Mechanism, as_complex_array, check_direction
from .registry import register

__all__ = ["Laplace", "laplace_rdp"]


def laplace_rdp(alpha, a: float) -> np.ndarray:
    """RDP of the Laplace mechanism with normalised sensitivity ``a`` = sensitivity / scale.

    eps(alpha) = log[alpha/(2alpha-1) e^{(alpha-1)a} + (alpha-1)/(2alpha-1) e^{-alpha a}]/(alpha-1)
    (Mironov 2017, "Renyi differential privacy", Table II), eps(inf) = a; evaluated without
    cancellation and rounded up by a few ulps (an upper bound, exact up to that margin).  Vectorised
    over alpha > 1.
    """
    al = V.alphas(alpha)
    return _laplace_curve(al, V.real("a", a, low=0.0))


def _laplace_curve(al: np.ndarray, a: float) -> np.ndarray:
    flat = np.ascontiguousarray(al.ravel(), dtype=float)
    return laplace_curve(flat, a).reshape(al.shape)


@register
@dataclass(frozen=True)
class Laplace(Mechanism):
    """Laplace noise of scale ``scale`` (b) on a query of L1 sensitivity ``sensitivity``.

    Parameters
    ----------
    scale : float
        Laplace scale b > 0 (standard deviation is sqrt(2) b).
    sensitivity : float, default 1.0
        L1 sensitivity under the accountant's neighbouring relation, > 0.
    """

    scale: float
    sensitivity: float = 1.0

    name = "laplace"
    pld_available = True
    poisson_tight = True
    field_checks = {"scale": V.positive, "sensitivity": V.positive}

    @property
    def a(self) -> float:
        """Normalised sensitivity Delta / b (= the pure-DP epsilon), rounded up: the smallest float >= the
        real ratio (e.g. scale 0.1 gives a = 10.0 for the real 9.99999999999999944).  The routes account the
        pair at this float, which dominates the real pair (a larger shift of the same Laplace noise); the
        discretised PLD places the loss atoms +-a at it."""
        return div_up(self.sensitivity, self.scale)

    @property
    def pure_epsilon(self) -> float:
        return self.a

    def rdp(self, alpha) -> np.ndarray:
        return _laplace_curve(V.alphas(alpha), float(self.a))

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        return laplace_log_mgf_kernel(np.ascontiguousarray(s).ravel(), self.a).reshape(s.shape)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        check_direction(direction)
        a = self.a
        w = (2.0 * c + 1.0) * a
        g = -math.expm1(-w) / w if w > 1e-12 else 1.0 - 0.5 * w
        return c * a + math.log(0.5 + 0.5 * math.exp(-a - 2.0 * c * a) + 0.5 * a * g)

    def total_variation(self, direction: str = "remove") -> float:
        """TV(Lap(0, b), Lap(Delta, b)) = 1 - e^{-a/2} (exact; delta(0), docs/derivations/laplace.md)."""
        check_direction(direction)
        return -math.expm1(-0.5 * self.a)

    def pld_atoms(self, direction: str = "remove") -> tuple[np.ndarray, np.ndarray]:
        a = self.a
        return np.array([a, -a]), np.array([0.5, 0.5 * math.exp(-a)])

    def pld_exp_pieces(self, direction: str = "remove"):
        a = self.a
        # density (1/4) e^{(l - a)/2} on (-a, a): one exponential piece of rate 1/2
        return (np.array([-a]), np.array([a]), np.array([-0.5 * a - math.log(4.0)]), np.array([0.5]))

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self.log_envelope_fn(c, direction)(t)

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        """|C(c + it)| <= min(C(c), e^{c a} (1 + e^{-(2c+1) a}) / (2 |(2c+1) + 2it|)), C = continuous part."""
        check_direction(direction)
        a = self.a
        w = (2 * c + 1) * a
        g_real = -math.expm1(-w) / w if w > 1e-12 else 1.0 - 0.5 * w
        log_c0 = c * a + math.log(0.5 * a * g_real)
        log_num = c * a + math.log1p(math.exp(-w)) - math.log(2.0)
        b = 2 * c + 1

        def env(t: float) -> float:
            return min(log_c0, log_num - math.log(math.hypot(b, 2 * t)))

        return env
