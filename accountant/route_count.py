"""The sample-count route (``method="count"``): an upper bound for DP-SGD at small noise
(:mod:`conversions.count_gaussian`), registered in :data:`accountant.routes.ROUTES`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conversions import count_gaussian
from conversions.bracket import Bracket
from mechanisms.subsampled import SubsampledGaussian

from .route_errors import RouteUnavailable

if TYPE_CHECKING:
    from .ledger import Ledger
    from .routes import QueryContext


class SampleCountRoute:
    """T Poisson-subsampled Gaussian steps (one rate q and one mu = sensitivity / sigma, add/remove):
    delta(eps) <= sum_k Bin(k; T, q) delta_G(eps; sqrt(k) mu), conditioning on the number of sampled
    steps (joint convexity of the hockey-stick divergence; :mod:`conversions.count_gaussian`).  An upper
    bound only, a few ms; it ignores the amplification by mixing, so ``method="auto"`` evaluates it only
    for mu >= ``AUTO_MIN_MU`` (sigma <= 1/8 at unit sensitivity), where a sampled step's loss dwarfs
    that amplification and the numerical routes' grids are capped by the loss span (q = 0.01,
    sigma = 0.00985, T = 1000: 1.34e5, where the discretised PLD gave 1.0e6 and RDP 5.2e6)."""

    name = "count"
    #: ``method="auto"`` evaluates the route only from this mu on (``auto_applies``)
    AUTO_MIN_MU = 8.0

    @staticmethod
    def _params(ledger: Ledger) -> tuple[float, float, int] | None:
        items = ledger.items()
        if not items or any(type(m) is not SubsampledGaussian for m, _ in items):
            return None
        q, mu = items[0][0].sample_rate, items[0][0].mu
        if any(m.sample_rate != q or m.mu != mu for m, _ in items):
            return None
        return q, mu, sum(k for _, k in items)

    def applies(self, ledger: Ledger) -> bool:
        return self._params(ledger) is not None

    def auto_applies(self, ledger: Ledger) -> bool:
        p = self._params(ledger)
        return p is not None and p[1] >= self.AUTO_MIN_MU

    def _run(self, fn, ledger: Ledger, value: float) -> Bracket:
        p = self._params(ledger)
        if p is None:
            raise RouteUnavailable("the sample-count route needs Poisson-subsampled Gaussian steps of one "
                                   "sample rate and one noise multiplier")
        try:
            up, det = fn(value, *p)
        except ValueError as exc:  # (too many sample counts to sum: bounded work)
            raise RouteUnavailable(str(exc)) from exc
        return Bracket.upper_only(up, det)

    def epsilon(self, ledger: Ledger, delta: float, ctx: QueryContext) -> Bracket:
        return self._run(count_gaussian.epsilon_upper, ledger, delta)

    def delta(self, ledger: Ledger, epsilon: float, ctx: QueryContext) -> Bracket:
        return self._run(count_gaussian.delta_upper, ledger, epsilon)
