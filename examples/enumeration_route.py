"""A new numerical route in one file: brute-force enumeration of small atomic ledgers.

When every mechanism of a ledger has a purely atomic privacy-loss distribution
(:class:`mechanisms.lattice.AtomicMechanism`: randomized response, (eps, delta) blocks, unary encoding,
...), the composition's loss distribution under P is the convolution of the atoms, and

    delta(eps) = p_inf + sum_L w_L (1 - e^(eps - L))_+,    p_inf = 1 - prod_j (1 - p_inf,j)^(k_j)

(the hockey-stick divergence written over the privacy loss; Koskela, Jalko & Honkela 2020).
This route enumerates the support directly: losses as exact rationals (sums of the doubles the
mechanisms report, so equal losses merge exactly) and masses at 256 bits (products and sums of
positive numbers: relative error < 2^-230).  It is a toy next to the cf route (which composes atoms in
closed form and also handles continuous parts): it declines ledgers whose support would exceed
``MAX_SUPPORT``.

Input accuracy: the mechanisms' own atoms are taken to be accurate to the convention of
:mod:`conversions.atoms` (``INPUT_ULPS`` ulps of 1 + |loss| in each loss and log-mass, plus 2 ulps of
|log mass| and the declared ``log_mgf_error``); over n uses these add up to ``eta`` in the loss and
``lam`` in the log-mass, and since x -> (1 - e^(eps - x))_+ is non-decreasing and 1-Lipschitz in the
loss, evaluating at the losses +/- eta with masses times e^(+/- lam) brackets the exact profile.

Register it with one line, ``routes.register_route(EnumerationRoute(), before="cf")``; then
``method="enumerate"`` selects it and ``method="auto"`` tries it (before cf, which it then skips when
the bracket is already narrow).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np

from accountant import routes
from accountant._search import bisect_log
from conversions.atoms import INPUT_ULPS
from conversions.bracket import Bracket
from mechanisms.lattice import AtomicMechanism

__all__ = ["EnumerationRoute"]

_U = 2.0 ** -53
_RHO = mpmath.mpf(2) ** -200  # relative allowance for the 256-bit arithmetic
_TINY = 2.0 ** -500  # the smallest positive epsilon the search resolves


class EnumerationRoute:
    """Exact enumeration of the composed atoms of a small, purely atomic ledger (module docstring)."""

    name = "enumerate"
    numerical = True
    #: the largest support (distinct composed losses) the route enumerates
    MAX_SUPPORT = 2_000

    def applies(self, ledger) -> bool:
        return all(isinstance(m, AtomicMechanism) and m.pld_available for m, _ in ledger.items())

    # ------------------------------------------------------------------ composition
    def _composed(self, ledger, direction: str, ctx) -> tuple[list, mpmath.mpf, float, float]:
        """(sorted [(loss as Fraction, mass)], p_inf, eta, lam) of the composition, cached per ledger."""
        key = ("enumerate", direction)
        if key in ctx.cache:
            return ctx.cache[key]
        dist = {Fraction(0): mpmath.mpf(1)}
        finite = mpmath.mpf(1)
        eta = lam = 0.0
        for m, k in ledger.items():
            losses, masses = m.pld_atoms(direction)
            keep = masses > 0
            losses, masses = losses[keep], masses[keep]
            big_l = float(np.max(np.abs(losses))) if losses.size else 0.0
            big_w = float(np.max(np.abs(np.log(masses)))) if masses.size else 0.0
            eta += k * INPUT_ULPS * _U * (1.0 + big_l)
            lam += k * (INPUT_ULPS * _U * (1.0 + big_l) + 2.0 * _U * big_w + m.log_mgf_error)
            finite *= (1 - mpmath.mpf(m.infinite_loss_mass)) ** k
            one = [(Fraction(float(x)), mpmath.mpf(float(w))) for x, w in zip(losses, masses, strict=True)]
            for _ in range(k):
                nxt: dict = {}
                for x, w in dist.items():
                    for y, v in one:
                        nxt[x + y] = nxt.get(x + y, 0) + w * v
                if len(nxt) > self.MAX_SUPPORT:
                    raise routes.RouteUnavailable(f"the composed support exceeds {self.MAX_SUPPORT} losses")
                dist = nxt
        out = (sorted(dist.items()), 1 - finite, eta, lam)
        ctx.cache[key] = out
        return out

    @staticmethod
    def _profile(comp, eps: float) -> tuple[mpmath.mpf, mpmath.mpf]:
        """(lower, upper) of delta(eps) for the exact atoms (module docstring)."""
        atoms, p_inf, eta, lam = comp
        lo = up = mpmath.mpf(0)
        for x, w in reversed(atoms):  # largest losses first: stop at the first loss below eps - eta
            d = mpmath.mpf(x.numerator) / x.denominator - eps
            if d + eta <= 0:
                break
            up += w * -mpmath.expm1(-(d + eta))
            if d - eta > 0:
                lo += w * -mpmath.expm1(-(d - eta))
        return p_inf + lo * mpmath.exp(-lam) * (1 - _RHO), p_inf + up * mpmath.exp(lam) * (1 + _RHO)

    # ------------------------------------------------------------------ queries
    def _worst(self, ledger, per_direction: list[tuple[float, float, float]]) -> Bracket:
        up = max(b[1] for b in per_direction)
        est = max(b[2] for b in per_direction)
        if not ledger.tight:
            return Bracket.upper_only(up)
        return Bracket.exact(up, max(b[0] for b in per_direction), est)

    def delta(self, ledger, epsilon: float, ctx) -> Bracket:
        res = []
        with mpmath.workprec(256):
            for d in routes.directions(ledger):
                lo, up = self._profile(self._composed(ledger, d, ctx), epsilon)
                f_up, f_lo = float(up), float(lo)
                f_up = math.nextafter(f_up, math.inf) if f_up < up else f_up
                f_lo = math.nextafter(f_lo, -math.inf) if f_lo > lo else f_lo
                res.append((max(f_lo, 0.0), min(f_up, 1.0), float((lo + up) / 2)))
        return self._worst(ledger, res)

    def epsilon(self, ledger, delta: float, ctx) -> Bracket:
        with mpmath.workprec(256):
            res = [self._epsilon_one(self._composed(ledger, d, ctx), delta)
                   for d in routes.directions(ledger)]
        return self._worst(ledger, res)

    def _epsilon_one(self, comp, delta: float) -> tuple[float, float, float]:
        """(lower, upper, estimate) of epsilon(delta) for one direction."""
        if comp[1] >= delta:  # the infinite-loss mass alone exceeds delta: no finite epsilon
            return math.inf, math.inf, math.inf
        top = float(max(comp[0][-1][0], 0)) + 1.0  # delta(top) = p_inf < delta
        # bisection down to adjacent doubles: the upper end is a point where the upper profile is <= delta,
        # the lower end one where the lower profile is >= delta (an answer below _TINY is reported as
        # [0, _TINY])
        up = self._search(lambda e: self._profile(comp, e)[1] <= delta, top)[1]
        lo = self._search(lambda e: self._profile(comp, e)[0] < delta, up)[0]
        return lo, up, 0.5 * (lo + up)

    @staticmethod
    def _search(switched, hi: float) -> tuple[float, float]:
        """[lo, hi] around the switch of a monotone predicate on [0, hi] (True at hi), adjacent doubles."""
        if switched(0.0):
            return 0.0, 0.0
        if switched(_TINY):
            return 0.0, _TINY
        return bisect_log(switched, _TINY, hi, 0.0)
