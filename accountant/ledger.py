"""The symbolic ledger: ``{mechanism: count}``.  Composition never evaluates anything.

Composing k identical mechanisms increments one integer, so 10^6 steps cost the same as one.  All
curves are evaluated lazily by the conversions: RDP curves add (count * eps_j(alpha)), log-MGFs add
(count * log M_j(s)) and infinite-loss masses multiply (1 - p_inf = prod (1 - p_j)^{k_j}).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from mechanisms import validation as V
from mechanisms.base import Mechanism


class Ledger:
    """Insertion-ordered multiset of mechanisms."""

    __slots__ = ("_counts", "_tight")

    def __init__(self) -> None:
        self._counts: dict[Mechanism, int] = {}
        self._tight: bool | None = None  # set on a numeric view: the original ledger's flag

    def add(self, mechanism: Mechanism, times: int = 1) -> None:
        if not isinstance(mechanism, Mechanism):
            raise TypeError(f"mechanism must be a mechanisms.Mechanism, got {type(mechanism).__name__}")
        times = V.count("times", times)
        if times:
            total = self._counts.get(mechanism, 0) + times
            if total > V.MAX_COUNT:
                raise ValueError(f"the count of {mechanism.describe()} would reach {total}; a ledger entry "
                                 f"must stay in [0, 10^18]")
            self._counts[mechanism] = total

    def items(self) -> list[tuple[Mechanism, int]]:
        return list(self._counts.items())

    def __iter__(self) -> Iterator[tuple[Mechanism, int]]:
        return iter(self._counts.items())

    def __len__(self) -> int:
        return len(self._counts)

    def __bool__(self) -> bool:
        return bool(self._counts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ledger) and self._counts == other._counts

    def copy(self) -> Ledger:
        out = Ledger()
        out._counts = dict(self._counts)
        out._tight = self._tight
        return out

    def numeric_view(self) -> Ledger:
        """The same composition as the routes compute it: every delegating mechanism that forwards all
        its curves is replaced by the mechanism it is accounted by (:func:`mechanisms.base.accounted_as`;
        equal mechanisms merge, their counts add: the curves add either way), so type-specific routes
        apply to wrappers (e.g. one participation of an amplified banded MF is the subsampled Gaussian's
        one-step closed form).  ``tight`` stays this ledger's: a wrapper whose dominating pair is not
        attained (GNMax) keeps its certificates upper-only.  ``self`` when nothing is replaced (or a
        merged count would leave [0, 10^18])."""
        from mechanisms.base import accounted_as

        out: dict[Mechanism, int] = {}
        changed = False
        for m, k in self._counts.items():
            inner = accounted_as(m)
            changed = changed or inner is not m
            total = out.get(inner, 0) + k
            if total > V.MAX_COUNT:
                return self
            out[inner] = total
        if not changed:
            return self
        view = Ledger()
        view._counts = out
        view._tight = self.tight
        return view

    @property
    def total_count(self) -> int:
        return sum(self._counts.values())

    # ---------------------------------------------------------------- composed curves
    def rdp(self, alpha) -> np.ndarray:
        """Composed RDP curve sum_j k_j eps_j(alpha) (conditional curves for (eps, delta) blocks)."""
        a = V.alphas(alpha)
        out = np.zeros(a.shape)
        for m, k in self._counts.items():
            out = out + k * np.asarray(m.rdp(a), dtype=float)
        return out

    @property
    def rdp_exact_max(self) -> float:
        """Largest order at which every entry's RDP is its exact (tight) value; above it some entry
        answers a cheaper upper bound (``rdp_exact_max`` of a mechanism, e.g. the subsampled Gaussian's
        O(alpha) binomial sum)."""
        return float(min((getattr(m, "rdp_exact_max", math.inf) for m in self._counts), default=math.inf))

    @property
    def pure_epsilon(self) -> float:
        return float(sum(k * m.pure_epsilon for m, k in self._counts.items()))

    @property
    def infinite_loss_mass(self) -> float:
        log_keep = sum(k * math.log1p(-m.infinite_loss_mass) for m, k in self._counts.items())
        return max(0.0, -math.expm1(log_keep))

    @property
    def pld_available(self) -> bool:
        return all(m.pld_available for m in self._counts)

    @property
    def symmetric(self) -> bool:
        return all(m.symmetric for m in self._counts)

    @property
    def directions(self) -> tuple[str, ...]:
        """The dominating-pair directions to evaluate (one when every mechanism is symmetric)."""
        return ("remove",) if self.symmetric else ("remove", "add")

    @property
    def tight(self) -> bool:
        """Whether every entry's dominating pair is attained (lower bounds are certified only then)."""
        if self._tight is not None:
            return self._tight
        return all(m.tight for m in self._counts)

    @property
    def gaussian_mu(self) -> float | None:
        """mu of the composition when every entry reports a ``gdp_mu`` (mu-GDP composes as sqrt of the
        sum of squares, Dong, Roth & Su 2022, Cor. 2), else None."""
        if not self._counts:
            return None
        mus = [(m.gdp_mu, k) for m, k in self._counts.items()]
        if any(mu is None for mu, _ in mus):
            return None
        return math.sqrt(sum(k * mu**2 for mu, k in mus))

    # ---------------------------------------------------------------- serialisation
    def to_list(self) -> list[dict]:
        return [{"mechanism": m.to_dict(), "count": k} for m, k in self._counts.items()]

    @classmethod
    def from_list(cls, data: list) -> Ledger:
        from mechanisms.registry import from_dict

        if not isinstance(data, list):
            raise ValueError("ledger must be a list of {'mechanism', 'count'} entries")
        out = cls()
        for i, entry in enumerate(data):
            if not isinstance(entry, dict) or set(entry) != {"mechanism", "count"}:
                raise ValueError(f"ledger entry {i} must have keys 'mechanism' and 'count'")
            k = entry["count"]
            if isinstance(k, bool) or not isinstance(k, int):  # JSON: "100", 2.5, null, 1e400 are not counts
                raise ValueError(f"ledger[{i}].count must be an integer in [0, 10^18], got {k!r}")
            try:
                out.add(from_dict(entry["mechanism"]), V.count(f"ledger[{i}].count", k))
            except TypeError as exc:  # a malformed mechanism entry: the file is unusable, not a bug
                raise ValueError(f"ledger entry {i}: {exc}") from None
        return out

    def summary(self) -> list[str]:
        return [f"{k} x {m.describe()}" for m, k in self._counts.items()]

    def __repr__(self) -> str:
        return f"Ledger({'; '.join(self.summary()) or 'empty'})"
