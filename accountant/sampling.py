"""How a DP-SGD step is accounted for each batch sampler (``PrivacyAccountant.step(sampling=...)``).

============== ================================= ======================================== ==================
sampling       batches                           add/remove                               replace-one
============== ================================= ======================================== ==================
"poisson"      each record independently, q      SubsampledGaussian(sigma, q, C) (tight)  not supported
"fixed_size"   a uniform b-subset every step     FixedSizeGaussian: the Poisson pair with  symmetrised pair
                                                 q = b/n and shift 2C (tight)             (upper bound)
"balls_in_bins" each record in k of t steps per  k = 1: BallsInBinsGaussian per epoch   not supported
               epoch (a uniform k-subset),       (RDP; pair tight); k > 1:
               independently                     RandomAllocationGaussian (RDP upper bound,
                                                 Feldman & Shenfeld's reduction to k 1-of-t/k)
"shuffle"      a permutation per epoch, t        ShuffledGaussian per epoch (zero-out):   shift 2C
               consecutive batches               mu-GDP upper bound + lower bound
============== ================================= ======================================== ==================

t = ``steps_per_epoch`` (default ceil(n / b); for balls-in-bins with k = ``steps_per_record`` steps per
record, ceil(k n / b), so that the mean batch size is b).  Per-epoch mechanisms are charged when an
epoch *starts* (a partial epoch costs a full one in the upper bound and is left out of the lower bound); the
accountant keeps the number of steps into the current epoch per configuration.
"""

from __future__ import annotations

import math

from mechanisms import _validate as V
from mechanisms.base import Mechanism

SAMPLINGS = ("poisson", "fixed_size", "shuffle", "balls_in_bins")
_ALIASES = {"poisson": "poisson", "fixed_size": "fixed_size", "fixed": "fixed_size",
            "without_replacement": "fixed_size", "sampling_without_replacement": "fixed_size",
            "shuffle": "shuffle", "shuffling": "shuffle", "random_reshuffling": "shuffle",
            "balls_in_bins": "balls_in_bins", "balls_and_bins": "balls_in_bins",
            "random_allocation": "balls_in_bins"}
PER_EPOCH = ("shuffle", "balls_in_bins")


def normalise_sampling(sampling) -> str:
    """The canonical sampling name (``ValueError`` listing the valid ones otherwise)."""
    if not isinstance(sampling, str):
        raise TypeError(f"sampling must be a string, one of {SAMPLINGS}, got {type(sampling).__name__}")
    key = sampling.strip().lower().replace("-", "_").replace(" ", "_")
    if key not in _ALIASES:
        raise ValueError(f"sampling must be one of {SAMPLINGS}, got {sampling!r}")
    return _ALIASES[key]


def _sizes(batch_size, dataset_size) -> tuple[int, int]:
    if batch_size is None or dataset_size is None:
        raise TypeError("this sampling needs batch_size and dataset_size")
    n = V.integer("dataset_size", dataset_size, low=1)
    b = V.integer("batch_size", batch_size, low=1)
    if b > n:
        raise ValueError(f"batch_size must be <= dataset_size, got batch_size={b} > dataset_size={n}")
    return b, n


def steps_per_epoch(batch_size, dataset_size, steps_per_epoch=None) -> int:
    """t: ``steps_per_epoch`` if given, else ceil(dataset_size / batch_size)."""
    if steps_per_epoch is not None:
        return V.integer("steps_per_epoch", steps_per_epoch, low=1, high=10**9)
    b, n = _sizes(batch_size, dataset_size)
    return -(-n // b)


def step_mechanism(sampling: str, relation: str, sigma: float, *, sample_rate=None, batch_size=None,
                   dataset_size=None, sensitivity: float = 1.0,
                   steps_per_epoch_=None, steps_per_record=None) -> tuple[Mechanism, int | None]:
    """(mechanism, t) for one step (Poisson, fixed-size) or one epoch of t steps (shuffle, balls-in-bins).

    ``t`` is None for per-step mechanisms.  ``steps_per_record`` (k, balls-in-bins only, default 1): each
    record is used in a uniformly random k-subset of the epoch's t steps.  Raises ``ValueError`` naming
    the parameter for bad input and for combinations that have no certified analysis here.
    """
    sampling = normalise_sampling(sampling)
    k = 1
    if steps_per_record is not None:
        k = V.integer("steps_per_record", steps_per_record, low=1, high=10**9)
        if sampling != "balls_in_bins" and k != 1:
            raise ValueError(f"steps_per_record applies to sampling='balls_in_bins' only (got sampling="
                             f"{sampling!r}, steps_per_record={k})")
    if sampling == "poisson":
        from mechanisms.subsampled import SubsampledGaussian

        if relation != "add_remove":
            raise ValueError("sampling='poisson' is certified under relation='add_remove' only")
        if sample_rate is None:
            b, n = _sizes(batch_size, dataset_size)
            sample_rate = b / n
        elif batch_size is not None or dataset_size is not None:
            raise ValueError("give either sample_rate or batch_size and dataset_size, not both")
        return SubsampledGaussian(sigma=sigma, sample_rate=sample_rate, sensitivity=sensitivity), None
    if sample_rate is not None:
        raise ValueError(f"sampling={sampling!r} takes batch_size and dataset_size, not sample_rate")
    b, n = _sizes(batch_size, dataset_size)
    if sampling == "fixed_size":
        from mechanisms.fixed_size import FixedSizeGaussian, FixedSizeGaussianReplaceOne

        cls = FixedSizeGaussian if relation == "add_remove" else FixedSizeGaussianReplaceOne
        return cls(sigma=sigma, batch_size=b, dataset_size=n, sensitivity=sensitivity), None
    t = steps_per_epoch(b, n, steps_per_epoch_) if k == 1 or steps_per_epoch_ is not None \
        else steps_per_epoch(b, k * n)
    if k > t:
        raise ValueError(f"steps_per_record must be <= the number of steps per epoch, got steps_per_record="
                         f"{k} > steps_per_epoch={t}")
    if sampling == "shuffle":
        from mechanisms.shuffling import ShuffledGaussian, ShuffledGaussianReplaceOne

        cls = ShuffledGaussian if relation == "add_remove" else ShuffledGaussianReplaceOne
        return cls(sigma=sigma, num_steps=t, sensitivity=sensitivity), t
    from mechanisms.random_allocation import BallsInBinsGaussian, RandomAllocationGaussian

    if relation != "add_remove":
        raise ValueError("sampling='balls_in_bins' is certified under relation='add_remove' only")
    if k == 1:
        return BallsInBinsGaussian(sigma=sigma, num_steps=t, sensitivity=sensitivity), t
    return RandomAllocationGaussian(sigma=sigma, num_steps=t, steps_per_record=k, sensitivity=sensitivity), t


def epochs_charged(progress: int, steps: int, t: int) -> tuple[int, int]:
    """(new epochs to charge, progress after) when ``steps`` more steps run with ``progress`` steps into
    the current epoch (0: no epoch open).  An epoch is charged when its first step runs."""
    total = progress + steps
    new = -(-total // t) - (-(-progress // t))
    return new, total % t


def epoch_count(steps: int, t: int) -> tuple[int, bool]:
    """(epochs started by ``steps`` steps, whether the last one is partial)."""
    return -(-steps // t), steps % t != 0


__all__ = ["SAMPLINGS", "PER_EPOCH", "normalise_sampling", "step_mechanism", "steps_per_epoch",
           "epochs_charged", "epoch_count", "math"]
