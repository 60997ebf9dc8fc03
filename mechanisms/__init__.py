"""Mechanism plug-ins: each a frozen dataclass of parameters with pure, vectorised curve methods.

See :mod:`mechanisms.base` for the contract (the base classes ``Mechanism`` and ``Delegating``, field checks
declared with ``check`` / ``field_ref``) and :mod:`mechanisms.registry` for plug-in registration.
"""

from .banded_amplified import AmplifiedBandedMF, AmplifiedBandedToeplitzMF
from .base import DIRECTIONS, RELATIONS, Delegating, Mechanism, UnsupportedRoute, check, field_ref
from .discrete import DiscreteGaussian, DiscreteLaplace, Skellam
from .gaussian import Gaussian
from .gaussian_pair import GaussianPair
from .gnmax import GNMax, SubsampledGNMax
from .gnss import GNSS, GNSSUpperBound
from .laplace import Laplace
from .matrix import MatrixMechanism, TreeAggregation
from .mixture import GaussianMixture
from .poisson_subsampled import PoissonSubsampled, SubsampledLaplace
from .private_knn import PrivateKNN
from .ptr import GeneralizedPTR, PTRRenyi
from .random_allocation import BallsInBinsGaussian, RandomAllocationGaussian
from .randomized_response import ApproxDP, PureDP, RandomizedResponse
from .registry import available, from_dict, get, register
from .score_selection import BoundedRangeMechanism, ExponentialMechanism, PermuteAndFlip, ReportNoisyMax
from .screening import NoisyScreening, SubsampledNoisyScreening
from .selection import (
    HardStopSelection,
    KnownThresholdSelection,
    RandomStoppingSelection,
    TruncatedRandomStoppingSelection,
)
from .subsampled import SubsampledGaussian
from .svt import GaussianSVT, GeneralizedSVT, LaplaceSVT, StageWiseSVT
from .without_replacement import SampledWithoutReplacement
from .zcdp import ZCDP

__all__ = [
    "DIRECTIONS", "RELATIONS", "Mechanism", "Delegating", "UnsupportedRoute", "check", "field_ref",
    "Gaussian", "Laplace", "RandomizedResponse", "PureDP", "ApproxDP",
    "SubsampledGaussian", "SubsampledLaplace", "PoissonSubsampled", "SampledWithoutReplacement",
    "BallsInBinsGaussian", "RandomAllocationGaussian",
    "GNMax", "SubsampledGNMax", "NoisyScreening", "SubsampledNoisyScreening", "PrivateKNN",
    "RandomStoppingSelection", "TruncatedRandomStoppingSelection", "HardStopSelection",
    "KnownThresholdSelection", "LaplaceSVT", "GaussianSVT", "GeneralizedSVT", "StageWiseSVT",
    "GNSS", "GNSSUpperBound", "GeneralizedPTR", "PTRRenyi",
    "DiscreteGaussian", "DiscreteLaplace", "Skellam", "ZCDP",
    "ExponentialMechanism", "BoundedRangeMechanism", "ReportNoisyMax", "PermuteAndFlip", "GaussianMixture",
    "MatrixMechanism", "TreeAggregation", "AmplifiedBandedMF", "AmplifiedBandedToeplitzMF",
    "GaussianPair",
    "available", "from_dict", "get", "register",
]
