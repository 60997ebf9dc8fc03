"""Laplace mechanism M(D) = f(D) + Lap(0, b), L1 sensitivity Delta; a = Delta / b.

Dominating pair (tight, symmetric): P = Lap(0, b), Q = Lap(Delta, b).  The privacy loss under P has
two atoms and a continuous part (spec 02 section 2.2, spec 02b):

    L = +a with mass 1/2,   L = -a with mass e^{-a}/2,   density (1/4) e^{(l - a)/2} on (-a, a).

* RDP (Mironov 2017; spec 01 R3), exact for real alpha > 1:
  eps(alpha) = log[alpha/(2alpha-1) e^{(alpha-1)a} + (alpha-1)/(2alpha-1) e^{-alpha a}] / (alpha-1).
* log MGF (spec 02b, entire in s), exact:
  M(s) = e^{s a} [ 1/2 + e^{-a} e^{-2 s a} / 2 + (a/2) g((2s + 1) a) ],  g(w) = (1 - e^{-w}) / w.
* Pure DP: eps = a.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import _validate as V
from .base import Mechanism, as_complex_array, check_direction
from .registry import register


def _g(w: np.ndarray) -> np.ndarray:
    """(1 - e^{-w}) / w for complex w, with a series near 0 (removable singularity)."""
    w = np.asarray(w, dtype=complex)
    out = np.empty_like(w)
    small = np.abs(w) < 0.1
    ws = w[small]
    # 1 - w/2 + w^2/6 - w^3/24 + ... = sum_{n>=0} (-w)^n / (n+1)!
    acc = np.zeros_like(ws)
    term = np.ones_like(ws)
    for n in range(12):
        acc += term / math.factorial(n + 1)
        term = term * (-ws)
    out[small] = acc
    wl = w[~small]
    out[~small] = (1.0 - np.exp(-wl)) / wl
    return out


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

    def __post_init__(self):
        object.__setattr__(self, "scale", V.positive("scale", self.scale))
        object.__setattr__(self, "sensitivity", V.positive("sensitivity", self.sensitivity))

    @property
    def a(self) -> float:
        """Normalised sensitivity Delta / b (= the pure-DP epsilon)."""
        return self.sensitivity / self.scale

    @property
    def pure_epsilon(self) -> float:
        return self.a

    def rdp(self, alpha) -> np.ndarray:
        al = V.alphas(alpha)
        a = self.a
        out = np.full(al.shape, a)
        fin = np.isfinite(al)
        x = al[fin]
        val = np.logaddexp(np.log(x / (2 * x - 1)) + (x - 1) * a, np.log((x - 1) / (2 * x - 1)) - x * a)
        # the exact value never exceeds a; clip float noise at large alpha
        out[fin] = np.minimum(val / (x - 1), a)
        return out

    def log_mgf(self, s, direction: str = "remove") -> np.ndarray:
        check_direction(direction)
        s = as_complex_array(s)
        a = self.a
        bracket = 0.5 + 0.5 * np.exp(-a - 2.0 * s * a) + 0.5 * a * _g((2.0 * s + 1.0) * a)
        return s * a + np.log(bracket)

    def pld_atoms(self, direction: str = "remove") -> tuple[np.ndarray, np.ndarray]:
        a = self.a
        return np.array([a, -a]), np.array([0.5, 0.5 * math.exp(-a)])

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        a = self.a
        # C(c) (the t = 0 value, valid for every t) and the 1/|t| decay bound, both times e^{c a}
        g_real = float(np.real(_g(np.array([(2 * c + 1) * a]))[0]))
        log_c0 = math.log(0.5 * a * g_real)
        log_decay = math.log1p(math.exp(-(2 * c + 1) * a)) - math.log(2.0 * math.hypot(2 * c + 1, 2 * t))
        return c * a + min(log_c0, log_decay)
