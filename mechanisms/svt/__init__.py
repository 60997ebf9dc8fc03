"""Sparse vector technique plug-ins (Zhu & Wang 2020; docs/derivations/sparse-vector.md); importing this
package registers them.

Registered names: ``laplace_svt`` (:class:`LaplaceSVT`), ``gaussian_svt`` (:class:`GaussianSVT`),
``generalized_svt`` (:class:`GeneralizedSVT`), ``stagewise_svt`` (:class:`StageWiseSVT`).
"""

from .core import (
    GaussianSVT,
    GeneralizedSVT,
    LaplaceSVT,
    laplace_rdp,
    log_binom_sum,
    log_moment_qplus,
    rr_rdp,
)
from .stagewise import StageWiseSVT, best_stagewise, kov_delta, kov_epsilon

__all__ = [
    "GeneralizedSVT", "GaussianSVT", "LaplaceSVT", "StageWiseSVT",
    "laplace_rdp", "log_binom_sum", "log_moment_qplus", "rr_rdp",
    "kov_delta", "kov_epsilon", "best_stagewise",
]
