"""The routes' exceptions (re-exported by :mod:`accountant.routes`; a module of their own so that route
classes kept in other modules can raise them without importing the registry)."""

from __future__ import annotations


class RouteDeferred(Exception):
    """A route declined to run because its plan predicts a costly, wide answer (auto tries it later).

    ``exact_grade``: whether the route, re-run, is expected to beat a bracket of the routes after it that
    meets the target only absolutely (False: it deferred because its answer on this ledger is known to
    be wide, e.g. the contour at near-atomic loss laws)."""

    def __init__(self, message: str = "", exact_grade: bool = True):
        super().__init__(message)
        self.exact_grade = exact_grade


class RouteUnavailable(ValueError):
    """A route found at query time that it cannot handle this ledger (auto moves on; ``method=`` it
    explicitly and this is the error)."""


class RouteTimedOut(Exception):
    """A route stopped by the query's time limit before it had any bracket (``method="auto"`` flags the
    certificate as cut short by the limit and goes on with the other routes' brackets)."""
