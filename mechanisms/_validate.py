"""Deprecated alias of :mod:`mechanisms.validation` (same module object).

Kept only for code not yet updated: ``mechanisms/subsampled.py`` (reworked separately) and plug-ins or
branches written against the old private name.  Import :mod:`mechanisms.validation` instead.
"""

import sys

from . import validation

sys.modules[__name__] = validation
