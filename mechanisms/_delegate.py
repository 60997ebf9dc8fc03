"""A mechanism accounted by the curves of another one (its dominating pair).

``_Delegating`` forwards every curve method of :mod:`mechanisms.base` to ``self._inner()`` (a mechanism
whose dominating pair dominates this one's, e.g. report-noisy-max with Laplace noise -> pure eps-DP, or
GNMax -> the Gaussian pair).  Subclasses keep their own parameters, name, ``tight`` flag and docstring;
only the math is shared, so a route available for the inner mechanism is available for the outer one.
"""

from __future__ import annotations

from .base import Mechanism


class _Delegating(Mechanism):
    """Curves of ``_inner()``; ``tight`` stays the subclass's (the inner pair may not be attained)."""

    def _inner(self) -> Mechanism:  # pragma: no cover - abstract
        raise NotImplementedError

    # flags read on instances by the ledger and the routes
    @property
    def pld_available(self) -> bool:  # type: ignore[override]
        return self._inner().pld_available

    @property
    def symmetric(self) -> bool:  # type: ignore[override]
        return self._inner().symmetric

    @property
    def poisson_tight(self) -> bool:  # type: ignore[override]
        return self._inner().poisson_tight

    @property
    def rdp_below_pair(self) -> bool:
        return bool(getattr(self._inner(), "rdp_below_pair", False))

    # curves
    def rdp(self, alpha):
        return self._inner().rdp(alpha)

    @property
    def pure_epsilon(self) -> float:
        return self._inner().pure_epsilon

    @property
    def infinite_loss_mass(self) -> float:
        return self._inner().infinite_loss_mass

    @property
    def gdp_mu(self) -> float | None:
        return self._inner().gdp_mu

    @property
    def max_mgf_order(self) -> float:
        return self._inner().max_mgf_order

    @property
    def log_mgf_error(self) -> float:
        return self._inner().log_mgf_error

    def mgf_cost(self, t_max: float) -> float:
        return self._inner().mgf_cost(t_max)

    def envelope_cost(self, c: float) -> float:
        return self._inner().envelope_cost(c)

    def log_mgf(self, s, direction: str = "remove"):
        return self._inner().log_mgf(s, direction)

    def log_mgf_real(self, c: float, direction: str = "remove") -> float:
        return self._inner().log_mgf_real(c, direction)

    def pld_atoms(self, direction: str = "remove"):
        return self._inner().pld_atoms(direction)

    def pld_cell_masses(self, edges, direction: str = "remove"):
        return self._inner().pld_cell_masses(edges, direction)

    def pld_cell_offsets(self, edges, direction: str = "remove"):
        return self._inner().pld_cell_offsets(edges, direction)

    def pld_exp_pieces(self, direction: str = "remove"):
        return self._inner().pld_exp_pieces(direction)

    def total_variation(self, direction: str = "remove"):
        return self._inner().total_variation(direction)

    def log_continuous_envelope(self, c: float, t: float, direction: str = "remove") -> float:
        return self._inner().log_continuous_envelope(c, t, direction)

    def log_envelope_fn(self, c: float, direction: str = "remove"):
        return self._inner().log_envelope_fn(c, direction)

    def __getattr__(self, name: str):
        # optional fast paths of the inner mechanism (e.g. ``pld_cells_and_offsets``)
        if name == "pld_cells_and_offsets":
            inner = self._inner()
            fn = getattr(inner, name, None)
            if fn is not None:
                return fn
        raise AttributeError(name)
