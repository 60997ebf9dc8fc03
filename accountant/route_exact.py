"""The closed-form routes (``method="exact"``): the Gaussian (mu-GDP) profile of Gaussian-family
compositions, one Laplace use, one Poisson-subsampled Gaussian step and the single-use exact profiles of
plug-ins; registered in :data:`accountant.routes.ROUTES` ahead of the numerical routes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conversions import gaussian_dp, laplace_dp, poisson_gaussian_dp
from conversions.bracket import Bracket
from mechanisms.laplace import Laplace
from mechanisms.subsampled import SubsampledGaussian

from .route_errors import RouteUnavailable

if TYPE_CHECKING:
    from .ledger import Ledger
    from .routes import QueryContext


class GaussianExactRoute:
    """Closed-form mu-GDP profile of a composition of Gaussian-family mechanisms (Dong, Roth & Su 2022,
    Cor. 2; Balle & Wang 2018, Thm 8): delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2) with
    mu^2 = sum_j k_j mu_j^2.  Applies when every entry reports ``gdp_mu`` (a plug-in hook); an upper
    bound only (no lower bound) when some entry does not attain its Gaussian pair (``tight = False``,
    e.g. GNMax)."""

    name = "exact"

    def applies(self, ledger: Ledger) -> bool:
        return ledger.gaussian_mu is not None

    @staticmethod
    def _mu_rel_err(ledger: Ledger) -> float:
        """Relative rounding error bound of the ledger's mu = sqrt(sum_j k_j mu_j^2) (each mu_j one
        rounding, squaring, scaling, an n-term sum and the square root)."""
        return (2.0 * len(ledger) + 8.0) * 2.0 ** -53

    def epsilon(self, ledger: Ledger, delta: float, ctx: QueryContext) -> Bracket:
        mu = ledger.gaussian_mu
        eps, err = gaussian_dp.gaussian_epsilon(delta, mu, self._mu_rel_err(ledger))
        if not ledger.tight:  # a dominating Gaussian pair that no datasets attain (e.g. GNMax): upper only
            return Bracket.upper_only(eps, {"mu": mu})
        return Bracket.exact(eps, max(eps - err, 0.0), eps - err / 2, {"mu": mu})

    def delta(self, ledger: Ledger, epsilon: float, ctx: QueryContext) -> Bracket:
        mu = ledger.gaussian_mu
        lo, d, up = gaussian_dp.gaussian_delta_bounds(epsilon, mu, self._mu_rel_err(ledger))
        if not ledger.tight:
            return Bracket.upper_only(up, {"mu": mu})
        return Bracket.exact(up, lo, d, {"mu": mu})


class LaplaceExactRoute:
    """One use of a Laplace mechanism with a = sensitivity / scale: delta(eps) = 1 - e^{(eps - a)/2} for
    0 <= eps <= a (the tight profile of the Laplace pair)."""

    name = "exact"

    @staticmethod
    def _a(ledger: Ledger) -> float | None:
        items = ledger.items()
        if len(items) != 1:
            return None
        ((m, k),) = items
        return m.a if type(m) is Laplace and k == 1 else None

    def applies(self, ledger: Ledger) -> bool:
        return self._a(ledger) is not None

    def epsilon(self, ledger: Ledger, delta: float, ctx: QueryContext) -> Bracket:
        a = self._a(ledger)
        eps, err = laplace_dp.laplace_epsilon(delta, a)
        return Bracket.exact(eps, max(eps - err, 0.0), eps - err / 2, {"a": a})

    def delta(self, ledger: Ledger, epsilon: float, ctx: QueryContext) -> Bracket:
        a = self._a(ledger)
        d, err = laplace_dp.laplace_delta(epsilon, a)
        return Bracket.exact(min(1.0, d + err), max(d - err, 0.0), d, {"a": a})


class SubsampledGaussianExactRoute:
    """One Poisson-subsampled Gaussian step (a single DP-SGD step, ``times = 1``): the exact profile of
    both add/remove dominating pairs through the Gaussian profile at a transformed epsilon
    (:mod:`conversions.poisson_gaussian_dp`); a certified bracket a few ulps wide, where the numerical
    routes are near-atomic and slow (q = 0.01, sigma = 1.1: the cf and pld brackets were 4e-4 wide)."""

    name = "exact"

    @staticmethod
    def _params(ledger: Ledger) -> tuple[float, float] | None:
        items = ledger.items()
        if len(items) != 1:
            return None
        ((m, k),) = items
        if type(m) is not SubsampledGaussian or k != 1:
            return None
        return m.sensitivity / m.sigma, m.sample_rate

    def applies(self, ledger: Ledger) -> bool:
        return self._params(ledger) is not None

    def _worst(self, ledger: Ledger, bounds, value: float) -> Bracket:
        """The worst direction's (lower, upper) from ``bounds(value, mu, q, direction)``; the lower end is
        the largest of the directions' lower ends (each bounds the worst case from below)."""
        mu, q = self._params(ledger)
        res = {d: bounds(value, mu, q, d) for d in ("remove", "add")}
        worst = max(res, key=lambda d: res[d][1])
        up = res[worst][1]
        det = {"mu": mu, "q": q, "direction": worst}
        if not ledger.tight:  # a wrapper whose pair is not attained (numeric view): upper bound only
            return Bracket.upper_only(up, det)
        lo = min(max(b[0] for b in res.values()), up)
        return Bracket.exact(up, lo, 0.5 * (lo + up), det)

    def epsilon(self, ledger: Ledger, delta: float, ctx: QueryContext) -> Bracket:
        return self._worst(ledger, poisson_gaussian_dp.epsilon_bounds, delta)

    def delta(self, ledger: Ledger, epsilon: float, ctx: QueryContext) -> Bracket:
        return self._worst(ledger, poisson_gaussian_dp.delta_bounds, epsilon)


class SingleUseExactRoute:
    """One use of one mechanism whose privacy profile has a closed form (the ``exact_profile`` /
    ``exact_delta`` plug-in hook of :class:`mechanisms.base.Mechanism`): delta(eps) = P(A) - e^eps Q(A),
    A = {L > eps}, evaluated by the mechanism with certified bounds (e.g. one-dimensional Gaussian pairs
    and mixtures: A is a union of intervals between certified roots; :mod:`mechanisms._profile`), the worst
    of the directions.  A lower bound is given when one use attains the profile
    (``exact_profile_attained``), else an upper bound only."""

    name = "exact"
    #: the profile is the wrapper's own declaration (``exact_profile``), not its dominating mechanism's
    on_wrappers = True

    @staticmethod
    def _mech(ledger: Ledger):
        items = ledger.items()
        if len(items) != 1:
            return None
        ((m, k),) = items
        return m if k == 1 and m.exact_profile else None

    def applies(self, ledger: Ledger) -> bool:
        return self._mech(ledger) is not None

    def _run(self, ledger: Ledger, query: str, value: float) -> Bracket:
        m = self._mech(ledger)
        if m is None:
            raise RouteUnavailable("the single-use exact route needs one use of one mechanism with an "
                                   "exact privacy profile")
        fn = m.exact_epsilon if query == "epsilon" else m.exact_delta
        res = [(d, *fn(value, d)) for d in ledger.directions]
        worst = max(res, key=lambda r: r[2])
        up, low = float(worst[2]), float(max(r[1] for r in res))
        det = {"direction": worst[0], "single_use": True}
        if not m.exact_profile_attained:
            return Bracket.upper_only(up, det)
        return Bracket.exact(up, min(low, up), 0.5 * (min(low, up) + up), det)

    def epsilon(self, ledger: Ledger, delta: float, ctx: QueryContext) -> Bracket:
        return self._run(ledger, "epsilon", delta)

    def delta(self, ledger: Ledger, epsilon: float, ctx: QueryContext) -> Bracket:
        return self._run(ledger, "delta", epsilon)
