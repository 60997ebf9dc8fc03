"""The routes' exceptions (re-exported by :mod:`accountant.routes`; a module of their own so that route
classes kept in other modules can raise them without importing the registry)."""

from __future__ import annotations


class RouteDeferred(Exception):
    """A route declined to run because its plan predicts a costly, wide answer (auto tries it later)."""


class RouteUnavailable(ValueError):
    """A route found at query time that it cannot handle this ledger (auto moves on; ``method=`` it
    explicitly and this is the error)."""


class RouteTimedOut(Exception):
    """A route stopped by the query's time limit before it had any bracket (``method="auto"`` flags the
    certificate as cut short by the limit and goes on with the other routes' brackets)."""
