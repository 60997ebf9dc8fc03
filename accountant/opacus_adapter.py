"""Drop-in accountant for Opacus users (no dependency on Opacus).

It offers the method names of Opacus' accountants (``step(noise_multiplier=, sample_rate=)``,
``get_epsilon(delta)``, ``__len__``, ``mechanism()``, ``history``, ``state_dict()``,
``load_state_dict()``, ``get_optimizer_hook_fn(sample_rate)``), so it can replace
``opacus.accountants.RDPAccountant`` / ``PRVAccountant`` in a ``PrivacyEngine`` or a training loop.
Every epsilon it returns is a dpcert certified upper bound.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mechanisms import _validate as V

from .privacy_accountant import PrivacyAccountant


class DPCertAccountant:
    """Opacus-compatible wrapper around :class:`PrivacyAccountant` (Poisson sampling, add/remove)."""

    def __init__(self, method: str = "auto"):
        self.method = method
        self._acct = PrivacyAccountant()
        # Opacus keeps [(noise_multiplier, sample_rate, num_steps)], merging consecutive equal steps
        self.history: list[tuple[float, float, int]] = []

    @classmethod
    def mechanism(cls) -> str:
        return "dpcert"

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        self._acct.step(sigma=noise_multiplier, sample_rate=sample_rate, steps=1)
        if self.history and self.history[-1][:2] == (noise_multiplier, sample_rate):
            nm, sr, n = self.history[-1]
            self.history[-1] = (nm, sr, n + 1)
        else:
            self.history.append((noise_multiplier, sample_rate, 1))

    def get_epsilon(self, delta: float, **kwargs: Any) -> float:
        return self._acct.epsilon(delta, method=kwargs.get("method", self.method))

    def get_privacy_spent(self, *, delta: float, **kwargs: Any) -> tuple[float, float]:
        return self.get_epsilon(delta, **kwargs), float("nan")

    def __len__(self) -> int:
        return sum(n for _, _, n in self.history)

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        def hook_fn(optim: Any) -> None:
            self.step(noise_multiplier=optim.noise_multiplier,
                      sample_rate=sample_rate * getattr(optim, "accumulated_iterations", 1))
        return hook_fn

    def state_dict(self, destination: dict | None = None) -> dict:
        out = {} if destination is None else destination
        out["history"] = [list(h) for h in self.history]
        out["mechanism"] = self.mechanism()
        return out

    def load_state_dict(self, state_dict: dict) -> None:
        """Replace the history with ``state_dict["history"]``.

        All or nothing: every row is validated (and the new ledger built) before anything is replaced,
        so a bad row leaves this accountant exactly as it was (ValueError/TypeError naming the row).
        """
        if not isinstance(state_dict, dict) or "history" not in state_dict:
            raise ValueError("state_dict must contain 'history'")
        rows = state_dict["history"]
        if not isinstance(rows, (list, tuple)):
            raise TypeError(f"state_dict['history'] must be a list of (noise_multiplier, sample_rate, "
                            f"steps), got {type(rows).__name__}")
        acct = PrivacyAccountant()
        history: list[tuple[float, float, int]] = []
        for i, entry in enumerate(rows):
            if not isinstance(entry, (list, tuple)) or len(entry) != 3:
                raise ValueError(f"bad history entry {i} {entry!r}: "
                                 "expected (noise_multiplier, sample_rate, steps)")
            nm, sr, n = entry
            try:
                n = V.count(f"history[{i}] steps", n)
                acct.step(sigma=nm, sample_rate=sr, steps=n)
            except (TypeError, ValueError) as exc:
                raise type(exc)(f"bad history entry {i} {entry!r}: {exc}") from None
            history.append((nm, sr, n))
        self._acct, self.history = acct, history

    @property
    def accountant(self) -> PrivacyAccountant:
        """The underlying dpcert accountant (certificates, save/load)."""
        return self._acct
