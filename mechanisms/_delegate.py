"""Deprecated private name of the delegation hook, kept for modules not yet updated.

``_Delegating`` is :class:`mechanisms.base.Delegating` with the old abstract method ``_inner()`` in place
of ``dominating()``.  New code derives from :class:`mechanisms.base.Delegating` and defines
``dominating()``.
"""

from __future__ import annotations

from .base import Delegating, Mechanism


class _Delegating(Delegating):
    """:class:`mechanisms.base.Delegating` whose subclasses define ``_inner()`` (the old name)."""

    def _inner(self) -> Mechanism:  # pragma: no cover - abstract
        raise NotImplementedError

    def dominating(self) -> Mechanism:
        return self._inner()
