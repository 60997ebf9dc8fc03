"""The near-atomic split's per-query budget (:mod:`conversions.split`): one work and time meter shared by
every pass and both parts of a query."""

from __future__ import annotations

import time

from . import contour as C
from .contour_terms import query_clock


class _Meter:
    """One work and time budget for a whole split query (every pass, both parts): the contours' meters
    are started with what is left and charged back after each step (``stats["work"]``: the work used).
    The caller's ``deadline`` (a ``query_clock()`` value) only limits refinements of an answered query:
    the query itself is bounded by the work limit and the backstop ``QUERY_TIME_LIMIT``."""

    def __init__(self, work_limit: float | None, stats: dict | None = None, deadline: float | None = None):
        self.left = self.limit = C.QUERY_WORK_LIMIT if work_limit is None else float(work_limit)
        self.backstop = time.monotonic() + C.QUERY_TIME_LIMIT
        self.deadline = deadline
        #: set once the query has a certified bracket: from then on the caller's deadline applies too
        #: (a refinement past it is cut short and the bracket stands)
        self.answered = False
        self.cut_short = False  # a refinement was cut short by the deadline
        self.stats = {} if stats is None else stats
        self.stats["work"] = 0.0
        #: the work used in the per-point hint's units (``ComposedPLD._charge``): what the polishing gate
        #: ``conversions.split.POLISH_WORK`` was calibrated in (a line's hint, n x ``mgf_cost``, charges
        #: every node the per-point kernel's work, ~30x the line kernel's)
        self.hint_work = 0.0

    def _past_deadline(self) -> bool:
        return self.answered and self.deadline is not None and query_clock() >= self.deadline

    def run(self, plds, fn):
        t_left = self.backstop - time.monotonic()
        if self.answered and self.deadline is not None:
            t_left = min(t_left, self.deadline - query_clock())
        if self.left <= 0.0 or t_left <= 0.0:
            self.cut_short = self.cut_short or self._past_deadline()
            raise C.WorkLimitReached("the near-atomic split reached its per-query work or time limit")
        for p in plds:
            p.start_query(self.left, t_left)
        try:
            return fn()
        except C.WorkLimitReached:
            self.cut_short = self.cut_short or self._past_deadline()
            raise
        finally:
            used = sum(self.left - p._work_left for p in plds)
            self.hint_work += sum(p.hint_used for p in plds)
            for p in plds:
                p.stop_query()
            self.left -= used
            self.stats["work"] = self.limit - self.left

    def mark(self, details: dict) -> dict:
        """``details`` with ``time_limit = True`` when a refinement was cut short (the caller,
        ``accountant.route_choice``, decides whether the bracket then needs a warning)."""
        if self.cut_short:
            details["time_limit"] = True
        return details
