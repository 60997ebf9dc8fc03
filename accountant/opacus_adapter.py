"""Drop-in accountant for Opacus users (no dependency on Opacus).

:class:`DPCertAccountant` has the interface of Opacus' ``IAccountant`` (``opacus.accountants``):
``step(noise_multiplier=, sample_rate=)``, ``get_epsilon(delta)``, ``__len__``, ``mechanism()``,
``history``, ``state_dict()``, ``load_state_dict()``, ``get_optimizer_hook_fn(sample_rate)``, with
Opacus' semantics (see each method), so it replaces ``RDPAccountant`` / ``PRVAccountant`` in a
``PrivacyEngine`` or a training loop.  It is duck-typed: this module never imports Opacus.
:mod:`accountant.opacus` builds, on demand, a subclass that also inherits Opacus' ``IAccountant`` and
registers it under the name ``"dpcert"`` (``PrivacyEngine(accountant="dpcert")``).

Mechanism accounted: each row ``(noise_multiplier, sample_rate, steps)`` of ``history`` is ``steps``
DP-SGD steps, i.e. the Gaussian mechanism with noise multiplier ``sigma`` on a Poisson subsample of
rate ``q`` (sensitivity 1 after clipping), under the add/remove neighbouring relation -- the model of
Opacus' RDP and PRV accountants.  Every epsilon returned is a dpcert *certified upper bound*
(:meth:`accountant.privacy_accountant.PrivacyAccountant.epsilon`); :meth:`DPCertAccountant.certificate`
gives the full bracket (certified lower bound, route, error).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, MutableMapping
from copy import deepcopy
from typing import Any

from mechanisms import validation as V

from .certificate import Certificate
from .privacy_accountant import PrivacyAccountant

MECHANISM = "dpcert"

Row = tuple[float, float, int]


def _check_row(i: int | None, nm: Any, sr: Any, n: Any) -> Row:
    """Validate one history row: noise multiplier > 0 (finite), sample rate in (0, 1], steps >= 0."""
    where = "" if i is None else f"history[{i}] "
    nm = V.real(f"{where}noise_multiplier", nm, low=0.0, low_open=True)
    sr = V.probability(f"{where}sample_rate", sr, open_low=True)
    n = V.count(f"{where}steps", n)
    return nm, sr, n


def _check_history(rows: Any) -> list[Row]:
    """Validated copy of an Opacus history (all rows checked before anything is used)."""
    if isinstance(rows, (str, bytes)) or not isinstance(rows, (list, tuple)):
        raise TypeError(f"history must be a list of (noise_multiplier, sample_rate, steps) rows, "
                        f"got {type(rows).__name__}")
    out: list[Row] = []
    for i, entry in enumerate(rows):
        if isinstance(entry, (str, bytes)) or not isinstance(entry, (list, tuple)) or len(entry) != 3:
            raise ValueError(f"bad history entry {i} {entry!r}: "
                             "expected (noise_multiplier, sample_rate, steps)")
        try:
            out.append(_check_row(i, *entry))
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"bad history entry {i} {entry!r}: {exc}") from None
    return out


class DPCertAccountant:
    """Opacus-compatible accountant whose epsilon is a dpcert certified upper bound.

    Parameters
    ----------
    method : str
        dpcert route for :meth:`get_epsilon` ("auto": the tightest certified route; or "cf", "pld",
        "rdp"; see :meth:`accountant.privacy_accountant.PrivacyAccountant.certificate`).
    sampling : {"poisson", "fixed_size", "shuffle", "balls_in_bins"}
        How the data loader forms batches (default "poisson", Opacus' Poisson sampler).  Opacus' default
        ``DataLoader`` without ``poisson_sampling`` shuffles: declare ``sampling="shuffle"`` then.  The
        samplers other than Poisson need ``dataset_size``; each history row's batch size is
        round(sample_rate * dataset_size) (Opacus passes sample_rate = 1 / len(data_loader)).
    dataset_size : int, optional
        n, for the samplers other than Poisson.
    relation : {"add_remove", "replace_one"}
        Neighbouring relation (add/remove is read as zero-out for shuffled batches).
    steps_per_epoch : int, optional
        Batches per epoch for "shuffle" / "balls_in_bins" (default ceil(n / b)).
    steps_per_record : int, optional
        k for "balls_in_bins": every record in k uniformly random steps of each epoch (default 1).  With
        k > 1 the steps per epoch default to round(1 / sample_rate) (Opacus passes sample_rate =
        1 / len(data_loader)).

    Notes
    -----
    ``history`` is the source of truth, as in Opacus: a list of ``(noise_multiplier, sample_rate,
    steps)`` rows, consecutive equal steps merged.  Assigning it (as Opacus' ``get_noise_multiplier``
    and ``load_state_dict`` do) validates every row first; the dpcert ledger is rebuilt from the
    history when it changed (O(rows); nothing is evaluated until :meth:`get_epsilon`).
    """

    def __init__(self, method: str = "auto", *, sampling: str = "poisson", dataset_size: int | None = None,
                 relation: str = "add_remove", steps_per_epoch: int | None = None,
                 steps_per_record: int | None = None):
        if not isinstance(method, str):
            raise TypeError(f"method must be a string such as 'auto', got {type(method).__name__}")
        from .sampling import normalise_sampling

        self.method = method
        self.sampling = normalise_sampling(sampling)
        if relation not in ("add_remove", "replace_one"):
            raise ValueError(f"relation must be 'add_remove' or 'replace_one', got {relation!r}")
        self.relation = relation
        if self.sampling == "poisson" and relation != "add_remove":
            raise ValueError("sampling='poisson' is certified under relation='add_remove' only")
        if self.sampling != "poisson" and dataset_size is None:
            raise TypeError(f"sampling={self.sampling!r} needs dataset_size (the batch size is "
                            "round(sample_rate * dataset_size))")
        self.dataset_size = None if dataset_size is None else V.integer("dataset_size", dataset_size, low=1)
        self.steps_per_epoch = (None if steps_per_epoch is None
                                else V.integer("steps_per_epoch", steps_per_epoch, low=1))
        if steps_per_record is not None:
            steps_per_record = V.integer("steps_per_record", steps_per_record, low=1)
            if self.sampling != "balls_in_bins":
                raise ValueError("steps_per_record applies to sampling='balls_in_bins' only")
            if steps_per_record == 1:
                steps_per_record = None
        self.steps_per_record = steps_per_record
        self._history: list[Row] = []
        self._built: tuple[tuple[Row, ...], PrivacyAccountant] | None = None

    # ------------------------------------------------------------------ Opacus interface
    @classmethod
    def mechanism(cls) -> str:
        """Accounting mechanism name, ``"dpcert"`` (the key of Opacus' accountant registry)."""
        return MECHANISM

    @property
    def history(self) -> list[Row]:
        """``[(noise_multiplier, sample_rate, steps), ...]`` (Opacus' format)."""
        return self._history

    @history.setter
    def history(self, rows: Any) -> None:
        self._history = _check_history(rows)

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        """Record one DP-SGD step (merged into the last row when both parameters are equal, as Opacus does).

        ValueError/TypeError (naming the parameter) for a noise multiplier that is not > 0 and finite or
        a sample rate outside (0, 1]; nothing is recorded then.
        """
        nm, sr, _ = _check_row(None, noise_multiplier, sample_rate, 1)
        if self._history and self._history[-1][:2] == (nm, sr):
            self._history[-1] = (nm, sr, self._history[-1][2] + 1)
        else:
            self._history.append((nm, sr, 1))

    def __len__(self) -> int:
        """Number of steps taken so far."""
        return sum(int(n) for _, _, n in self._history)

    def get_epsilon(self, delta: float, *args: Any, **kwargs: Any) -> float:
        """Certified epsilon (upper bound) at ``delta`` for the steps so far (0 before any step).

        ``method=`` overrides the route.  Other keyword arguments are accepted and ignored: Opacus'
        ``make_private_with_epsilon`` forwards its own ``**kwargs`` here through ``get_noise_multiplier``,
        and peers' options (``alphas``, ``eps_error``, ``delta_error``) do not apply to a certified bound.
        """
        if args:
            raise TypeError(f"get_epsilon takes delta and keyword options only, got {len(args)} extra "
                            "positional argument(s)")
        return self.certificate(delta, method=kwargs.get("method")).epsilon

    def get_privacy_spent(self, *, delta: float, **kwargs: Any) -> tuple[float, float]:
        """``(epsilon, nan)``: Opacus' RDP accountant returns (epsilon, best order); no order here."""
        return self.get_epsilon(delta, **kwargs), math.nan

    def get_optimizer_hook_fn(self, sample_rate: float) -> Callable[[Any], None]:
        """Callback for ``DPOptimizer.attach_step_hook``: one step at ``sample_rate`` times the optimizer's
        ``accumulated_iterations`` (Opacus' convention for gradient accumulation), with its current
        ``noise_multiplier``."""
        def hook_fn(optim: Any) -> None:
            self.step(noise_multiplier=optim.noise_multiplier,
                      sample_rate=sample_rate * getattr(optim, "accumulated_iterations", 1))
        return hook_fn

    def state_dict(self, destination: MutableMapping | None = None) -> MutableMapping:
        """``{"history": copy of history, "mechanism": "dpcert"}`` written into ``destination`` (a new
        OrderedDict by default), as Opacus' ``IAccountant.state_dict``."""
        out: MutableMapping = OrderedDict() if destination is None else destination
        out["history"] = deepcopy(self._history)
        out["mechanism"] = self.mechanism()
        return out

    def load_state_dict(self, state_dict: Mapping) -> None:
        """Replace the history with ``state_dict["history"]`` (Opacus' ``IAccountant.load_state_dict``).

        ValueError for a None/empty state dict, a missing ``history`` or a ``mechanism`` other than
        "dpcert" (as Opacus; a state dict without ``mechanism`` is accepted).  All or nothing: every row is
        validated before anything is replaced, so a bad row (ValueError/TypeError naming the row) leaves
        this accountant exactly as it was.
        """
        if state_dict is None or not isinstance(state_dict, Mapping) or len(state_dict) == 0:
            raise ValueError("state dict is either None or empty and hence cannot be loaded into the "
                             "dpcert accountant")
        if "history" not in state_dict:
            raise ValueError("state_dict does not have the key `history`; cannot be loaded into the dpcert "
                             "accountant")
        mech = state_dict.get("mechanism", self.mechanism())
        if mech != self.mechanism():
            raise ValueError(f"state_dict of {mech!r} cannot be loaded into an accountant with mechanism "
                             f"{self.mechanism()!r} (as in Opacus); to account another accountant's steps "
                             "with dpcert, assign its history: acct.history = state_dict['history']")
        self.history = state_dict["history"]

    # ------------------------------------------------------------------ dpcert extras
    @property
    def accountant(self) -> PrivacyAccountant:
        """The dpcert accountant of the current history (certificates, save/load)."""
        key = tuple(self._history)
        if self._built is None or self._built[0] != key:
            rows = _check_history(list(key))  # the list may have been edited in place
            acct = PrivacyAccountant(relation=getattr(self, "relation", "add_remove"))
            sampling = getattr(self, "sampling", "poisson")
            for nm, sr, n in rows:
                if sampling == "poisson":
                    acct.step(sigma=nm, sample_rate=sr, steps=n)
                elif getattr(self, "steps_per_record", None) is not None:  # k of t steps per record
                    k = self.steps_per_record
                    b = max(1, min(self.dataset_size, round(sr * self.dataset_size * k)))
                    t = self.steps_per_epoch if self.steps_per_epoch is not None else max(k, round(1 / sr))
                    acct.step(sigma=nm, steps=n, batch_size=b, dataset_size=self.dataset_size,
                              sampling=sampling, steps_per_epoch=t, steps_per_record=k)
                else:
                    b = max(1, min(self.dataset_size, round(sr * self.dataset_size)))
                    acct.step(sigma=nm, steps=n, batch_size=b, dataset_size=self.dataset_size,
                              sampling=sampling, steps_per_epoch=self.steps_per_epoch)
            self._built = (key, acct)
        return self._built[1]

    def certificate(self, delta: float, *, method: str | None = None) -> Certificate:
        """dpcert certificate for epsilon at ``delta``: ``.epsilon`` (certified upper bound),
        ``.lower_bound`` (certified lower bound on the true epsilon of the worst-case pair), ``.method``."""
        return self.accountant.certificate(delta=delta, method=self.method if method is None else method)

    def __getstate__(self) -> dict:
        """Pickle/copy the history and the method; the cached ledger (with route caches) is rebuilt."""
        state = self.__dict__.copy()
        state["_built"] = None
        return state

    def __repr__(self) -> str:
        samp = getattr(self, "sampling", "poisson")
        extra = "" if samp == "poisson" else f", sampling={samp!r}, dataset_size={self.dataset_size}"
        return (f"{type(self).__name__}(method={self.method!r}{extra}, steps={len(self)}, "
                f"rows={len(self._history)})")
