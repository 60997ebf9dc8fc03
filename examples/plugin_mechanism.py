"""A third-party mechanism with its own exact route, in one file: unary encoding.

Unary encoding is the local-DP frequency oracle of RAPPOR (Erlingsson, Pihur & Korolova 2014) and of
optimised unary encoding (OUE; Wang, Blocki, Li & Jha 2017, Sec. 4.3-4.4): a user holding a value
x in {1, ..., d} sends d bits, bit x being 1 with probability ``p`` and every other bit 1 with
probability ``q`` (0 < q < p < 1).  Basic RAPPOR is p = e^{e/2} / (1 + e^{e/2}), q = 1 - p; OUE is
p = 1/2, q = 1 / (1 + e^e); both are e-LDP.

Neighbouring relation: replace-one (one user's value x replaced by x').  Only bits x and x' change
their distribution, so the privacy loss of the pair (M(x), M(x')) under M(x) is the sum of two
independent bit losses: +E with mass a = p(1 - q), -E with mass c = (1 - p) q and 0 with mass
b = pq + (1 - p)(1 - q), where E = log(a / c) is the local epsilon.  The swapped pair gives the same
distribution (symmetric), and the pair is attained by any two values (tight).

The exact route: T reports of one user compose to the losses kE, k = -T..T, with trinomial masses

    w_k = sum_{i - j = k} T! / (i! j! (T - i - j)!) a^i c^j b^(T - i - j),

and the privacy profile is the hockey-stick divergence written over the privacy loss,
delta(eps) = sum_{kE > eps} w_k (1 - e^(eps - kE)) (Koskela, Jalko & Honkela 2020).  The route evaluates
it at 256-bit precision (mpmath) with explicit error allowances and rounds outward to doubles: a certified
bracket a few ulps wide.  epsilon(delta) is the exact inverse on the piece of the profile that contains
it (on [kE, (k + 1)E], delta(eps) = A_k - e^eps B_k with A_k = sum_{l > k} w_l,
B_k = sum_{l > k} w_l e^(-lE)), confirmed at both ends by the certified profile.

What a plug-in needs (run ``python examples/plugin_mechanism.py``):

* the mechanism: a frozen dataclass on a public base (here :class:`mechanisms.lattice.DiscreteMechanism`,
  which derives the PLD and the RDP curve from ``_atoms()``), registered with ``@register``, its field
  checks declared once in ``field_checks`` (:func:`mechanisms.base.check`);
* the exact route: an object with ``name``, ``applies``, ``epsilon``, ``delta`` returning a
  :class:`conversions.bracket.Bracket`, registered with one line,
  ``routes.register_route(UnaryEncodingExactRoute(), before="cf")``;
* ``mechanisms.conformance.check_mechanism`` for the contract's invariants.

A package ships the mechanism to other users through the entry point group ``dpcert.mechanisms``
(see :mod:`mechanisms.registry`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import mpmath
import numpy as np

from accountant import PrivacyAccountant, routes
from conversions.bracket import Bracket
from mechanisms import validation as V
from mechanisms.base import check, field_ref
from mechanisms.lattice import DiscreteMechanism
from mechanisms.registry import register

__all__ = ["UnaryEncoding", "UnaryEncodingExactRoute"]


@register
@dataclass(frozen=True)
class UnaryEncoding(DiscreteMechanism):
    """One unary-encoding report: the true value's bit is 1 w.p. ``p``, every other bit w.p. ``q``
    (0 < q < p < 1); replace-one relation, symmetric and tight (module docstring)."""

    p: float
    q: float

    name = "unary_encoding"
    relations = ("replace_one",)
    # checked in this order by the base class; q's upper end is the checked p
    field_checks = {"p": V.open_unit,
                    "q": check(V.real, low=0.0, high=field_ref("p"), low_open=True, high_open=True)}

    @classmethod
    def optimized(cls, epsilon: float) -> UnaryEncoding:
        """OUE (Wang et al. 2017): p = 1/2, q = 1 / (1 + e^epsilon)."""
        e = V.positive("epsilon", epsilon)
        return cls(0.5, 1.0 / (1.0 + math.exp(e)))

    @classmethod
    def example(cls) -> UnaryEncoding:
        """A representative instance (for the conformance check over the registry)."""
        return cls.optimized(1.0)

    @property
    def epsilon(self) -> float:
        """The loss E = log(p (1 - q) / ((1 - p) q)) of the atoms (floating point)."""
        return math.log(self.p) + math.log1p(-self.q) - math.log1p(-self.p) - math.log(self.q)

    @property
    def pure_epsilon(self) -> float:
        # E rounded up by a margin covering the four roundings of ``epsilon`` (an upper bound)
        return self.epsilon * (1.0 + 2.0 ** -48) + 2.0 ** -1000

    def _atoms(self):
        p, q, e = self.p, self.q, self.epsilon
        return np.array([e, 0.0, -e]), np.array([p * (1.0 - q), p * q + (1.0 - p) * (1.0 - q), (1.0 - p) * q])

    def total_variation(self, direction: str = "remove") -> float:
        """TV(M(x), M(x')) = a - c = p - q (rounded up)."""
        return min(1.0, math.nextafter(self.p - self.q, math.inf))


# ---------------------------------------------------------------------------------------------- the route
_PREC = 256  # bits of the mpmath evaluation
_RHO = mpmath.mpf(2) ** -200  # relative error allowance (products and sums of positive terms: < 2^-240)


def _up(x: mpmath.mpf) -> float:
    """The least double >= x."""
    f = float(x)
    return math.nextafter(f, math.inf) if f < x else f


def _down(x: mpmath.mpf) -> float:
    """The largest double <= x."""
    f = float(x)
    return math.nextafter(f, -math.inf) if f > x else f


class UnaryEncodingExactRoute:
    """Closed-form privacy profile of T reports of one :class:`UnaryEncoding` (module docstring).

    Floating point: p and q are exact doubles, so a, b, c are exact at 256 bits and every w_k is a sum of
    products of positive numbers (relative error < 2^-240 <= ``_RHO``).  The losses kE - eps are known
    to an absolute ``eta`` = 2^-240 (1 + |eps| + T E), and x -> (1 - e^-x)_+ is non-decreasing and
    1-Lipschitz, so evaluating at x +/- eta and scaling by 1 +/- ``_RHO`` brackets the exact profile.
    epsilon(delta) is the piece formula's value, moved outward by ulps until the certified profile
    confirms both ends.
    """

    name = "exact"
    #: the trinomial sum has (T + 1)(T + 2) / 2 terms: above this T the cf route (exact atoms) answers
    MAX_T = 200

    @classmethod
    def _spec(cls, ledger) -> tuple[UnaryEncoding, int] | None:
        items = ledger.items()
        if len(items) == 1 and type(items[0][0]) is UnaryEncoding and items[0][1] <= cls.MAX_T:
            return items[0]
        return None

    def applies(self, ledger) -> bool:
        return self._spec(ledger) is not None

    @classmethod
    def _atoms(cls, ledger, ctx) -> tuple[mpmath.mpf, list]:
        """(E, [(k, w_k) for k = T..-T]) at 256 bits, cached for the ledger."""
        key = ("unary_encoding_exact",)
        if ctx is not None and key in ctx.cache:
            return ctx.cache[key]
        m, t = cls._spec(ledger)
        p, q = mpmath.mpf(m.p), mpmath.mpf(m.q)
        a, c, b = p * (1 - q), (1 - p) * q, p * q + (1 - p) * (1 - q)
        pa, pc, pb = ([x ** i for i in range(t + 1)] for x in (a, c, b))
        w: dict[int, mpmath.mpf] = {}
        for i in range(t + 1):
            for j in range(t - i + 1):
                term = math.comb(t, i) * math.comb(t - i, j) * pa[i] * pc[j] * pb[t - i - j]
                w[i - j] = w.get(i - j, 0) + term
        out = (mpmath.log(a / c), [(k, w[k]) for k in range(t, -t - 1, -1)])
        if ctx is not None:
            ctx.cache[key] = out
        return out

    @staticmethod
    def _profile(big_e: mpmath.mpf, atoms: list, eps: float) -> tuple[mpmath.mpf, mpmath.mpf]:
        """(lower, upper) of delta(eps) = sum_k w_k (1 - e^(eps - kE))_+."""
        eta = mpmath.mpf(2) ** -240 * (1 + abs(eps) + len(atoms) * big_e)
        lo = up = mpmath.mpf(0)
        for k, w in atoms:
            x = k * big_e - eps
            if x + eta > 0:
                up += w * -mpmath.expm1(-(x + eta))
            if x - eta > 0:
                lo += w * -mpmath.expm1(-(x - eta))
        return lo * (1 - _RHO), up * (1 + _RHO)

    def delta(self, ledger, epsilon: float, ctx) -> Bracket:
        with mpmath.workprec(_PREC):
            big_e, atoms = self._atoms(ledger, ctx)
            lo, up = self._profile(big_e, atoms, epsilon)
            return Bracket.exact(min(1.0, _up(up)), _down(lo), float((lo + up) / 2), {"E": float(big_e)})

    def epsilon(self, ledger, delta: float, ctx) -> Bracket:
        with mpmath.workprec(_PREC):
            big_e, atoms = self._atoms(ledger, ctx)
            dl = mpmath.mpf(delta)
            a_sum = b_sum = eps = mpmath.mpf(0)
            for k, w in atoms:  # k = T, T - 1, ...: the profile at kE is a_sum - e^(kE) b_sum
                if k <= 0 or a_sum - mpmath.exp(k * big_e) * b_sum > dl:
                    # delta(eps) = a_sum - e^eps b_sum on [max(kE, 0), (k + 1)E], or eps = 0
                    if a_sum - b_sum > dl:
                        eps = mpmath.log((a_sum - dl) / b_sum)
                    break
                a_sum += w
                b_sum += w * mpmath.exp(-k * big_e)
            up, lo = _up(eps), _down(eps)
            for _ in range(64):  # certify: delta(up) <= delta (upper end), delta(lo) >= delta (lower end)
                if self._profile(big_e, atoms, up)[1] <= dl:
                    break
                up = math.nextafter(up, math.inf) + 4.0 * (up - lo)
            else:
                raise ArithmeticError("unary encoding: the epsilon bracket could not be certified")
            while lo > 0.0 and self._profile(big_e, atoms, lo)[0] < dl:
                lo = max(0.0, math.nextafter(lo, -math.inf) - 4.0 * (up - lo))
            return Bracket.exact(up, lo, float(eps), {"E": float(big_e)})


def main() -> None:
    route = UnaryEncodingExactRoute()
    routes.register_route(route, before="cf")  # the one registration line of the exact route
    try:
        acct = PrivacyAccountant(relation="replace_one").compose(UnaryEncoding.optimized(0.5), 20)
        for method in ("exact", "cf", "rdp"):
            c = acct.certificate(delta=1e-6, method=method)
            print(f"{method:>5}: ({c.epsilon:.10f}, {c.delta:g})-DP  [{c.bound}]")
        print("auto picks:", acct.certificate(delta=1e-6).method)
    finally:
        routes.unregister_route(route)


if __name__ == "__main__":
    main()
