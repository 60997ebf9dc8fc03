"""Private-kNN (Zhu, Yu & Wang 2020): the noisy-screening release of a kNN vote as one plug-in;
the screening analysis is in :mod:`mechanisms.screening`."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import validation as V
from ._numerics import mul_up, scale_up
from .base import Mechanism, check, field_ref
from .gnmax import subsampled_gaussian_rdp
from .registry import register
from .screening import _SCREENING_CHECKS, SubsampledNoisyScreening


@register
@dataclass(frozen=True)
class PrivateKNN(Mechanism):
    """Private-kNN labelling: ``num_queries`` screenings + at most ``answer_cap`` answers.

    Zhu, Yu & Wang 2020 (thesis Sec. 4.3).

    Per public query: a fresh Poisson subsample (rate ``sample_rate``) -> kNN votes -> noisy screening
    (``sigma_screen``, ``threshold``); if it passes and fewer than ``answer_cap`` answers were given, a
    **fresh, independent** Poisson subsample -> kNN votes -> Gaussian noisy argmax (``sigma_answer``,
    L2 sensitivity ``answer_sensitivity``, default sqrt(2) for a neighbour swap).  RDP (upper bound,
    add/remove):

        eps(alpha) = num_queries * eps_sub,screen(alpha) + answer_cap * eps_sub,GNMax(alpha),

    with the exact subsampled screening curve (docs/derivations/noisy-screening.md §2) and the tight
    Poisson-subsampled Gaussian (valid for Gaussian noise, thesis Prop. 2.3.6).  The number of answered
    queries is random; charging the cap ``answer_cap`` **fixed before the run** is valid by the Renyi filter
    argument (Feldman & Zrnic 2021, Cor. 3.3; thesis Thm 5.2.4): the per-query costs are chosen adaptively
    but their sum is at most this curve almost surely (docs/derivations/noisy-screening.md §4).  Accounting
    with the realised number of answers is an ex-post statement and is not what this mechanism certifies.
    If one subsample feeds both steps (the public code's shortcut) this accounting does not apply.

    Parameters
    ----------
    sigma_screen, threshold, k, t_min
        Screening parameters (see :class:`NoisyScreening`; t_min = 0 is required under subsampling).
    sigma_answer : float
        GNMax noise standard deviation sigma_2 > 0.
    sample_rate : float
        Poisson sampling rate gamma in (0, 1].
    num_queries : int
        Number of queries screened (>= 1).
    answer_cap : int
        Pre-committed maximum number of answered queries, 0 <= answer_cap <= num_queries.
    answer_sensitivity : float, default sqrt(2)
        L2 sensitivity of the vote histogram fed to GNMax.
    """

    sigma_screen: float
    threshold: float
    k: int
    sigma_answer: float
    sample_rate: float
    num_queries: int
    answer_cap: int
    t_min: int = 0
    answer_sensitivity: float = math.sqrt(2.0)

    name = "private_knn"
    tight = False
    relations = ("add_remove",)
    # the screening checks (sigma_screen reported as "sigma"), then the answering step's
    field_checks = {"sigma_screen": check(V.positive, label="sigma"),
                    **{k: c for k, c in _SCREENING_CHECKS.items() if k != "sigma"},
                    "sigma_answer": V.positive, "sample_rate": check(V.probability, open_low=True),
                    "num_queries": check(V.integer, low=1),
                    "answer_cap": check(V.integer, low=0, high=field_ref("num_queries")),
                    "answer_sensitivity": V.positive}

    @property
    def screening(self) -> SubsampledNoisyScreening:
        """One subsampled screening step."""
        return SubsampledNoisyScreening(self.sigma_screen, self.threshold, self.k, self.sample_rate,
                                        self.t_min)

    def screening_rdp(self, alpha) -> np.ndarray:
        """RDP of one subsampled screening step."""
        return self.screening.rdp(alpha)

    def answer_rdp(self, alpha) -> np.ndarray:
        """RDP of one subsampled GNMax answer."""
        return subsampled_gaussian_rdp(alpha, self.sigma_answer, self.sample_rate, self.answer_sensitivity)

    def rdp(self, alpha) -> np.ndarray:
        """num_queries x screening + answer_cap x answers, each product and the sum rounded up."""
        a = V.alphas(alpha)
        out = scale_up(self.num_queries, self.screening_rdp(a))
        if self.answer_cap:
            out = out + scale_up(self.answer_cap, self.answer_rdp(a))
            out = np.where(out > 0.0, np.nextafter(out, np.inf), out)
        return out

    @property
    def pure_epsilon(self) -> float:
        if self.answer_cap:
            return math.inf
        return mul_up(self.num_queries, self.screening.pure_epsilon)
