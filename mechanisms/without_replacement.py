"""Sampling without replacement: a uniformly random batch of fixed size m out of n (replace-one).

Source: Balle, Barthe & Gaboardi 2018, Thm 9 (quoted without proof after Lemma 2.2.2 of the Zhu 2023
thesis): if a mechanism M is (eps, delta)-DP under the replace-one relation, then M run on a uniformly
random subset of size m of the n records (sampling rate gamma = m / n) is

    (log(1 + gamma (e^eps - 1)),  gamma delta)-DP      under replace-one.

dpcert has no RDP or privacy-loss-distribution result for this sampling scheme (Wang, Balle &
Kasiviswanathan 2019 is not implemented), so a fixed-batch step is accounted here only through that
(eps', delta') guarantee: its four-point dominating pair (as :class:`~mechanisms.ApproxDP`), which the
characteristic-function route composes exactly (Kairouz-Oh-Viswanath).  This is an **upper bound**:
much looser than Poisson sampling with :class:`~mechanisms.SubsampledGaussian`, whose accounting is
tight.  Use it when the training loop really draws fixed-size batches without replacement.

The base guarantee must hold under replace-one: for a Gaussian sum of clipped gradients (clip norm C)
the replace-one L2 sensitivity is 2C.  Compute the base (eps, delta) of one step with an accountant
using ``relation="replace_one"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from . import validation as V
from ._numerics import mul_up
from .lattice import FourPointPair
from .registry import register

_U = 2.0 ** -53


@register
@dataclass(frozen=True)
class SampledWithoutReplacement(FourPointPair):
    """An (``epsilon``, ``delta``)-DP step (replace-one) run on a uniformly random fixed-size batch.

    Parameters
    ----------
    epsilon : float
        The base mechanism's epsilon under replace-one, >= 0.
    delta : float
        The base mechanism's delta under replace-one, in [0, 1).
    sample_rate : float
        Batch size over dataset size, gamma = m / n in [0, 1].

    The step is (``amplified_epsilon``, ``amplified_delta``)-DP under replace-one (upper bound; see the
    module docstring for the source).  Only valid in an accountant with ``relation="replace_one"``.
    """

    epsilon: float
    delta: float
    sample_rate: float

    name = "sampled_without_replacement"
    tight = False  # the four-point pair of the amplified guarantee, not the step's own pair
    relations = ("replace_one",)
    field_checks = {"epsilon": V.nonnegative, "delta": V.half_open_unit, "sample_rate": V.probability}

    @property
    def amplified_epsilon(self) -> float:
        """log(1 + gamma (e^eps - 1)), computed as log1p(gamma expm1(eps)) (no overflow for large eps),
        rounded up above the real value.  eps <= 700: y = gamma expm1(eps) is relatively within 3 u (expm1
        2 u, libm's ulp doubled; the product u), which moves log1p(y) by <= 3 u y / (1 + y) <= 3 u log1p(y),
        and log1p adds 2 u: <= 5.1 u of the value, so 8 u and one step are added.  eps > 700 (log gamma +
        eps + log1p(t), t = (1 - gamma) e^-eps / gamma): log 2 u |log gamma|, the sums u (|log gamma| +
        eps) each, t within 4 u and log1p(t) <= t <= 1: 8 u (|log gamma| + eps + 1) and one step.  Exact at
        gamma = 0, gamma = 1 and eps = 0."""
        g, e = self.sample_rate, self.epsilon
        if g == 0.0 or e == 0.0:
            return 0.0
        if g == 1.0:
            return e
        if e > 700.0:  # log(gamma e^eps (1 + (1 - gamma) e^{-eps} / gamma)) without overflow
            lg = math.log(g)
            v = lg + e + math.log1p((1.0 - g) * math.exp(-e) / g)
            return math.nextafter(v + 8.0 * _U * (abs(lg) + e + 1.0), math.inf)
        v = math.log1p(g * math.expm1(e))
        return math.nextafter(v * (1.0 + 8.0 * _U), math.inf)

    @property
    def amplified_delta(self) -> float:
        """gamma delta, rounded up (the smallest float >= the exact product)."""
        return mul_up(self.sample_rate, self.delta)

    @property
    def pure_epsilon(self) -> float:
        return self.amplified_epsilon

    @property
    def infinite_loss_mass(self) -> float:
        return self.amplified_delta

