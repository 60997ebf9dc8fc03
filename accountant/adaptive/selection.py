"""Private selection over candidates certified by the accountant (Liu & Talwar 2019).

The selection guarantees themselves are mechanisms (:mod:`mechanisms.selection`); what needs the
accountant is turning a candidate -- a mechanism, a whole training run (an accountant's ledger) or a
certificate -- into the (epsilon1, delta1) those guarantees take.
"""

from __future__ import annotations

import math
from typing import Any

from mechanisms import validation as V
from mechanisms.base import Mechanism
from mechanisms.selection import RandomStoppingSelection

from ..certificate import Certificate
from ..privacy_accountant import PrivacyAccountant

__all__ = ["candidate_guarantee", "random_stopping_from_candidate"]


def candidate_guarantee(candidate: Any, delta1: float | None = None) -> tuple[float, float]:
    """(epsilon1, delta1) of one candidate run, from a mechanism, an accountant or a certificate.

    * a :class:`~mechanisms.base.Mechanism` with finite ``pure_epsilon`` and no ``delta1``: (pure eps, 0);
    * otherwise ``delta1`` is required and epsilon1 is the certified epsilon at ``delta1`` of the
      mechanism (composed once) or of the accountant's ledger (a whole training run);
    * a certificate: its (epsilon, delta).
    """
    if isinstance(candidate, Certificate):
        return float(candidate.epsilon), float(candidate.delta)
    if isinstance(candidate, Mechanism):
        if delta1 is None and math.isfinite(candidate.pure_epsilon) and candidate.infinite_loss_mass == 0.0:
            return float(candidate.pure_epsilon), 0.0
        rel = "add_remove" if "add_remove" in candidate.relations else candidate.relations[0]
        acct = PrivacyAccountant(relation=rel).compose(candidate)
    elif isinstance(candidate, PrivacyAccountant):
        acct = candidate
    else:
        raise TypeError("candidate must be a Mechanism, a PrivacyAccountant or a Certificate")
    if delta1 is None:
        raise ValueError("delta1 is required for a candidate without a pure-DP guarantee")
    d1 = V.delta(delta1, "delta1")
    return float(acct.epsilon(d1)), d1


def random_stopping_from_candidate(candidate: Any, gamma: float,
                                   delta1: float | None = None) -> RandomStoppingSelection:
    """Random-stopping selection (:class:`mechanisms.selection.RandomStoppingSelection`) over runs of
    ``candidate``, with (epsilon1, delta1) from :func:`candidate_guarantee`.

    (Was ``RandomStoppingSelection.from_candidate``: a mechanism plug-in cannot use the accountant.)
    """
    e1, d1 = candidate_guarantee(candidate, delta1)
    return RandomStoppingSelection(e1, gamma, d1)
