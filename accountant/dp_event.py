"""Translation between dp-accounting ``DpEvent`` trees and dpcert ledger entries (both directions).

dp-accounting (Google's ``dp_accounting`` package, also the event format of jax-privacy and TF Privacy)
describes a private computation as a tree of ``DpEvent`` objects.  This module reads such a tree
**duck-typed**, by class name and public attributes, so dp-accounting is never imported to read events
(its ``to_named_tuple()`` form, with ``class_name`` and the same fields, is read too).  Only
:func:`ledger_to_dp_event` (export) imports it, and only when called.

Semantics (dp-accounting 0.6, ``dp_event.py`` and its PLD accountant, which define each event under
each neighbouring relation; every translation below is exact unless marked "upper bound"):

=================================================  ===============================  ====================
event                                              add_remove                       replace_one
=================================================  ===============================  ====================
``GaussianDpEvent(noise_multiplier=s)``            ``Gaussian(s, sensitivity=1)``   ``Gaussian(s, 2)``
``LaplaceDpEvent(noise_multiplier=b)``             ``Laplace(b, sensitivity=1)``    ``Laplace(b, 2)`` [1]
``RandomizedResponseDpEvent(p, k)``                refused (not defined)            ``RandomizedResponse``
                                                                                    ``(log(1+k(1-p)/p), k)``
``PoissonSampledDpEvent(q, Gaussian s)``           ``SubsampledGaussian(s, q)``     refused [2]
``PoissonSampledDpEvent(q, Laplace b)``            ``SubsampledLaplace(b, q)``      refused [2]
``PoissonSampledDpEvent(q, other single event)``   ``PoissonSubsampled(m, q)`` (RDP upper bound)
``SampledWithoutReplacementDpEvent(n, m, e)``      refused (not defined)            ``SampledWithout``
                                                                                    ``Replacement`` [3]
``DiscreteLaplaceDpEvent(a, C)``                   ``DiscreteLaplace(1/a, C)`` [4]  ``DiscreteLaplace``
                                                                                    ``(1/a, 2C)`` [1]
``ZCDpEvent(rho, xi)``                             ``ZCDP(rho, xi)``                ``ZCDP(rho, xi)``
``MixtureOfGaussiansDpEvent(s, c, p)``             ``GaussianMixture(s, c, p)``     refused [5]
``SingleEpochTreeAggregationDpEvent(s, n)``        ``TreeAggregation(s, max n)``    refused [6]
``SelfComposedDpEvent(e, count)``                  ``count`` uses of ``e``
``ComposedDpEvent(events)``                        each event in turn
``NoOpDpEvent``                                    nothing
``NonPrivateDpEvent``                              :class:`NonPrivateEventError` (no finite guarantee)
``UnsupportedDpEvent`` and any other class         :class:`UnsupportedEventError`
=================================================  ===============================  ====================

* Gaussian / Laplace: values with ||v_i|| <= C and noise of scale s C; the sum moves by at most C when a
  record is added or removed and by 2C when one is replaced (dp-accounting's PLD accountant uses the
  pair N(-C, s^2 C^2), N(C, s^2 C^2) for REPLACE_ONE, i.e. distance 2C).  Note that dp-accounting's
  *RDP* accountant reads ``GaussianDpEvent`` under REPLACE_ONE with distance C (alpha / (2 s^2)); dpcert
  takes the event's documented meaning (distance 2C), which is the larger, safe one.
* Randomized response: with probability 1 - p the true bucket, else a uniform one of k buckets, so
  P(true) = 1 - p + p/k and P(other) = p/k: k-ary randomized response with e^eps = 1 + k(1 - p)/p
  (eps rounded up; a larger eps dominates).  ``num_buckets = 1`` or ``p = 1`` release nothing;
  ``p = 0`` is non-private.  dp-accounting defines it for REPLACE_ONE only.
* [1] dp-accounting refuses Laplace under REPLACE_ONE; dpcert uses the replace-one sensitivity 2C.
* [2] Poisson subsampling is accounted under add/remove only (the relation of Poisson subsampling, Zhu &
  Wang 2019).
  ``PoissonSampledDpEvent(q, Composed/SelfComposed of Gaussians)`` is one Gaussian query with
  s_eff = (sum_i s_i^-2)^(-1/2) (a joint Gaussian release; Mironov, Talwar & Zhang 2019, section 3),
  rounded down (less noise is the safe side).
* [3] Fixed-size batches of m out of n: the inner event's certified (eps, delta) under replace-one, then
  amplification to (log(1 + gamma (e^eps - 1)), gamma delta) with gamma = m / n rounded up (Balle,
  Barthe & Gaboardi 2018, Thm 9; :class:`mechanisms.SampledWithoutReplacement`).  An **upper bound**,
  looser than dp-accounting's RDP analysis (Wang, Balle & Kasiviswanathan 2019), which dpcert does not
  implement.  A pure-DP inner event (Laplace, randomized response) uses delta = 0; any other needs the
  base ``without_replacement_delta``.
* [4] Discrete Laplace: noise with P(z) proportional to e^{-a |z|} on integer sums of L1 sensitivity C, i.e.
  dpcert's ``DiscreteLaplace(scale=1/a, sensitivity=C)``; 1/a is rounded down (less noise is the safe side).
  dp-accounting refuses it under REPLACE_ONE; dpcert uses the replace-one sensitivity 2C, as for Laplace.
* zCDP: a (xi, rho)-zCDP guarantee (RDP xi + rho alpha) is a statement under whichever relation the
  mechanism was analysed; it is read as given under both.
* [5] Mixture of Gaussians (Choquette-Choo et al. 2023): the pair N(0, s^2) vs sum_i p_i N(c_i, s^2), defined
  by dp-accounting for ADD_OR_REMOVE_ONE only; dpcert accounts both orders of it (add and remove).
* [6] Single-epoch tree aggregation (Kairouz et al. 2021, App. D): each record in at most one leaf across
  all trees, so the worst record lies in the deepest tree: one Gaussian of mu = sqrt(ceil(log2(n + 1)))/s,
  n the largest step count (``TreeAggregation(sigma=s, steps=max n)``).  dp-accounting defines it under
  REPLACE_SPECIAL (a record replaced by a zero record), which moves each node by at most C like add/remove;
  dpcert reads it under add_remove and refuses replace_one (sensitivity 2C, not a TreeAggregation).
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Iterable
from fractions import Fraction

from mechanisms import validation as V
from mechanisms.base import Mechanism

#: Composition-level events and the names this module knows (others are unsupported).
KNOWN_EVENTS = ("NoOpDpEvent", "NonPrivateDpEvent", "UnsupportedDpEvent", "GaussianDpEvent", "LaplaceDpEvent",
                "RandomizedResponseDpEvent", "PoissonSampledDpEvent", "SampledWithoutReplacementDpEvent",
                "DiscreteLaplaceDpEvent", "ZCDpEvent", "MixtureOfGaussiansDpEvent",
                "SingleEpochTreeAggregationDpEvent", "SelfComposedDpEvent", "ComposedDpEvent")
_ULP = 2.0 ** -52
_MAX_DEPTH = 200


class UnsupportedEventError(ValueError):
    """The event (or a sub-event, named in the message) has no dpcert translation under this relation."""


class NonPrivateEventError(ValueError):
    """The event tree contains a ``NonPrivateDpEvent`` (or a parameter that makes an event non-private):
    no finite (epsilon, delta) guarantee exists."""


def event_name(event: object) -> str | None:
    """The dp-accounting class name of ``event`` (a ``DpEvent`` or its ``to_named_tuple()`` form), or
    None for anything else.  Duck-typed: no import of dp-accounting."""
    cls = getattr(event, "class_name", None)
    if cls is not None and hasattr(event, "_fields"):
        name = cls.decode() if isinstance(cls, bytes) else cls
        return name if isinstance(name, str) and name.endswith("DpEvent") else None
    name = type(event).__name__
    if name.endswith("DpEvent") and not isinstance(event, Mechanism):
        return name
    return None


def is_dp_event(obj: object) -> bool:
    """True for objects that look like dp-accounting events (see :func:`event_name`)."""
    return event_name(obj) is not None


def _field(event: object, attr: str, name: str):
    try:
        return getattr(event, attr)
    except AttributeError:
        raise UnsupportedEventError(
            f"{name} has no attribute {attr!r} (not a dp-accounting {name}?)") from None


def _relation(relation) -> str:
    """dpcert relation name from a dpcert string or a dp-accounting ``NeighboringRelation`` member."""
    if isinstance(relation, str) and relation in ("add_remove", "replace_one"):
        return relation
    name = getattr(relation, "name", relation)
    table = {"ADD_OR_REMOVE_ONE": "add_remove", "REPLACE_ONE": "replace_one"}
    if name in table:
        return table[name]
    if name == "REPLACE_SPECIAL":
        raise ValueError("neighboring relation REPLACE_SPECIAL is not supported by dpcert; use "
                         "ADD_OR_REMOVE_ONE ('add_remove') or REPLACE_ONE ('replace_one')")
    raise ValueError(f"relation must be 'add_remove', 'replace_one' or a dp-accounting NeighboringRelation "
                     f"(ADD_OR_REMOVE_ONE, REPLACE_ONE), got {relation!r}")


def _up(x: float, ulps: float = 8.0) -> float:
    """``x`` rounded up by a few ulps (covers the rounding of a short float formula)."""
    return math.nextafter(x * (1.0 + ulps * _ULP), math.inf) if x > 0 else x


def _noise(event: object, name: str, attr: str = "noise_multiplier") -> float:
    v = _field(event, attr, name)
    v = V.real(f"{name}.{attr}", v, low=0.0, allow_inf=True)
    if v == 0.0:
        raise NonPrivateEventError(f"{name}.{attr} = 0 releases the data without noise (non-private)")
    if math.isinf(v):
        raise UnsupportedEventError(f"{name}.{attr} = inf: drop the event (it releases nothing) instead")
    return v


class _Translator:
    """Walks an event tree and collects ledger entries ``[(mechanism, count)]`` in order."""

    def __init__(self, relation, without_replacement_delta: float | None = None):
        self.relation = _relation(relation)
        self.wor_delta = None if without_replacement_delta is None else V.delta(
            without_replacement_delta, "without_replacement_delta")
        self.out: list[tuple[Mechanism, int]] = []

    def _emit(self, mech: Mechanism, count: int) -> None:
        if count:
            if self.out and self.out[-1][0] == mech:
                self.out[-1] = (mech, self.out[-1][1] + count)
            else:
                self.out.append((mech, count))

    def run(self, event: object, count: int = 1, depth: int = 0) -> None:
        name = event_name(event)
        if name is None:
            raise TypeError(f"expected a dp-accounting DpEvent, got {type(event).__name__}")
        if depth > _MAX_DEPTH:
            raise UnsupportedEventError(f"event tree nested deeper than {_MAX_DEPTH} levels")
        if name == "NoOpDpEvent":
            return
        if name == "NonPrivateDpEvent":
            raise NonPrivateEventError("NonPrivateDpEvent: the computation is not differentially private, "
                                       "so no finite (epsilon, delta) certificate exists")
        if name == "SelfComposedDpEvent":
            k = V.integer("SelfComposedDpEvent.count", _field(event, "count", name), low=0, high=V.MAX_COUNT)
            self.run(_field(event, "event", name), count * k, depth + 1)
            return
        if name == "ComposedDpEvent":
            events = _field(event, "events", name)
            if isinstance(events, (str, bytes)) or not isinstance(events, Iterable):
                raise TypeError("ComposedDpEvent.events must be a list of events, got "
                                f"{type(events).__name__}")
            for e in events:
                self.run(e, count, depth + 1)
            return
        for m, k in self.single(event, name, depth):
            self._emit(m, count * k)

    # ------------------------------------------------------------------ leaves
    def single(self, event: object, name: str, depth: int) -> list[tuple[Mechanism, int]]:
        """Ledger entries of one non-composition event (empty when it releases nothing)."""
        from mechanisms import Gaussian, Laplace, RandomizedResponse

        rel = self.relation
        if name == "GaussianDpEvent":
            return [(Gaussian(sigma=_noise(event, name), sensitivity=1.0 if rel == "add_remove" else 2.0), 1)]
        if name == "LaplaceDpEvent":
            return [(Laplace(scale=_noise(event, name), sensitivity=1.0 if rel == "add_remove" else 2.0), 1)]
        if name == "RandomizedResponseDpEvent":
            if rel != "replace_one":
                raise UnsupportedEventError(
                    "RandomizedResponseDpEvent is defined for the replace-one relation only (dp-accounting "
                    "refuses it under ADD_OR_REMOVE_ONE); use relation='replace_one'")
            p = V.probability(f"{name}.noise_parameter", _field(event, "noise_parameter", name))
            k = V.integer(f"{name}.num_buckets", _field(event, "num_buckets", name), low=1)
            if k == 1 or p == 1.0:
                return []  # the output does not depend on the input
            if p == 0.0:
                raise NonPrivateEventError(
                    f"{name}.noise_parameter = 0 outputs the true bucket (non-private)")
            return [(RandomizedResponse(epsilon=_up(math.log1p(k * (1.0 - p) / p)), k=k), 1)]
        if name in ("DiscreteLaplaceDpEvent", "ZCDpEvent", "MixtureOfGaussiansDpEvent",
                    "SingleEpochTreeAggregationDpEvent"):
            return self.wave2(event, name)
        if name == "PoissonSampledDpEvent":
            return self.poisson(event, name, depth)
        if name == "SampledWithoutReplacementDpEvent":
            return self.without_replacement(event, name, depth)
        if name == "UnsupportedDpEvent":
            raise UnsupportedEventError("UnsupportedDpEvent: the computation has no DP description to "
                                       "account")
        raise UnsupportedEventError(
            f"{name} has no dpcert translation (supported: {', '.join(KNOWN_EVENTS)})")

    def wave2(self, event: object, name: str) -> list[tuple[Mechanism, int]]:
        """Discrete Laplace, zCDP, mixture-of-Gaussians and single-epoch tree-aggregation events."""
        from mechanisms import ZCDP, DiscreteLaplace, GaussianMixture, TreeAggregation

        rel = self.relation
        if name == "ZCDpEvent":
            rho = V.real(f"{name}.rho", _field(event, "rho", name), low=0.0)
            xi = V.real(f"{name}.xi", getattr(event, "xi", 0.0), low=0.0)
            return [] if rho == 0.0 and xi == 0.0 else [(ZCDP(rho=rho, xi=xi), 1)]
        if name == "DiscreteLaplaceDpEvent":
            a = V.real(f"{name}.noise_parameter", _field(event, "noise_parameter", name), low=0.0)
            c = V.integer(f"{name}.sensitivity", _field(event, "sensitivity", name), low=0)
            if c == 0:
                return []
            if a == 0.0 or math.isinf(a):
                raise NonPrivateEventError(f"{name}.noise_parameter = {a!r} adds no noise (non-private)")
            scale = 1.0 / a
            if Fraction(scale) > 1 / Fraction(a):  # less noise is the safe side
                scale = math.nextafter(scale, 0.0)
            return [(DiscreteLaplace(scale=scale, sensitivity=c if rel == "add_remove" else 2 * c), 1)]
        if rel != "add_remove":
            raise UnsupportedEventError(
                f"{name} is defined for the add/remove relation (dp-accounting: ADD_OR_REMOVE_ONE or "
                "REPLACE_SPECIAL) only; use relation='add_remove'")
        if name == "MixtureOfGaussiansDpEvent":
            sd = V.real(f"{name}.standard_deviation", _field(event, "standard_deviation", name), low=0.0)
            sens = [float(x) for x in _field(event, "sensitivities", name)]
            probs = [float(x) for x in _field(event, "sampling_probs", name)]
            if all(x == 0.0 for x in sens):
                return []
            if sd == 0.0:
                raise NonPrivateEventError(f"{name}.standard_deviation = 0 adds no noise (non-private)")
            return [(GaussianMixture(sigma=sd, sensitivities=sens, probabilities=probs), 1)]
        nm = _noise(event, name)
        counts = _field(event, "step_counts", name)
        counts = [counts] if isinstance(counts, int | float) else list(counts)
        if not counts:
            raise ValueError(f"{name}.step_counts must be a positive integer or a non-empty list of them")
        steps = [V.integer(f"{name}.step_counts", n, low=0) for n in counts]
        if max(steps) == 0:
            return []
        return [(TreeAggregation(sigma=nm, steps=max(steps)), 1)]

    def _effective_gaussian(self, event: object, depth: int) -> float | None:
        """s_eff = (sum_i count_i s_i^-2)^-1/2 of a tree of Gaussian events, None if it is not one.

        Each node adds at most a few roundings; ``self.nodes`` counts them for the caller's margin."""
        self.nodes = getattr(self, "nodes", 0) + 1
        name = event_name(event)
        if depth > _MAX_DEPTH:
            raise UnsupportedEventError(f"event tree nested deeper than {_MAX_DEPTH} levels")
        if name == "GaussianDpEvent":
            s = _noise(event, name)
            return s
        if name == "SelfComposedDpEvent":
            k = V.integer("SelfComposedDpEvent.count", _field(event, "count", name), low=0, high=V.MAX_COUNT)
            s = self._effective_gaussian(_field(event, "event", name), depth + 1)
            if s is None:
                return None
            return math.inf if k == 0 else s / math.sqrt(k)
        if name == "ComposedDpEvent":
            inv = 0.0
            for e in _field(event, "events", name):
                s = self._effective_gaussian(e, depth + 1)
                if s is None:
                    return None
                inv += 0.0 if math.isinf(s) else s ** -2
            return math.inf if inv == 0.0 else inv ** -0.5
        return None

    def poisson(self, event: object, name: str, depth: int) -> list[tuple[Mechanism, int]]:
        from mechanisms.poisson_subsampled import PoissonSubsampled, SubsampledLaplace
        from mechanisms.subsampled import SubsampledGaussian

        q = V.probability(f"{name}.sampling_probability", _field(event, "sampling_probability", name))
        inner = _field(event, "event", name)
        if q == 0.0:
            return []
        if q == 1.0:  # every record is in the sample: the inner event itself
            sub = _Translator(self.relation, self.wor_delta)
            sub.run(inner, 1, depth + 1)
            return sub.out
        if self.relation != "add_remove":
            raise UnsupportedEventError(
                "PoissonSampledDpEvent: dpcert accounts Poisson subsampling under the add/remove relation "
                "only; use relation='add_remove'")
        inner_name = event_name(inner)
        if inner_name == "NonPrivateDpEvent":
            raise NonPrivateEventError("PoissonSampledDpEvent of a NonPrivateDpEvent is not private")
        if inner_name == "NoOpDpEvent":
            return []
        if inner_name == "LaplaceDpEvent":
            return [(SubsampledLaplace(scale=_noise(inner, inner_name), sample_rate=q), 1)]
        self.nodes = 0
        s = self._effective_gaussian(inner, depth + 1)
        if s is not None:
            if math.isinf(s):
                return []
            if inner_name != "GaussianDpEvent":
                # less noise is the safe side: <= 4 roundings (pow, product, sum, root) per node
                s = math.nextafter(s * (1.0 - (8.0 + 4.0 * self.nodes) * _ULP), 0.0)
            return [(SubsampledGaussian(sigma=s, sample_rate=q), 1)]
        sub = _Translator(self.relation, self.wor_delta)
        sub.run(inner, 1, depth + 1)
        if not sub.out:
            return []
        if len(sub.out) != 1 or sub.out[0][1] != 1:
            raise UnsupportedEventError(
                f"PoissonSampledDpEvent: the sampled event {inner_name} composes several mechanisms on one "
                "sample; dpcert supports one mechanism (or Gaussians only) inside a Poisson sample")
        base = sub.out[0][0]
        try:
            return [(PoissonSubsampled(base=base, sample_rate=q), 1)]
        except (ValueError, TypeError) as exc:
            raise UnsupportedEventError(f"PoissonSampledDpEvent of {inner_name}: {exc}") from None

    def without_replacement(self, event: object, name: str, depth: int) -> list[tuple[Mechanism, int]]:
        from mechanisms import SampledWithoutReplacement

        if self.relation != "replace_one":
            raise UnsupportedEventError(
                "SampledWithoutReplacementDpEvent is defined for the replace-one relation (a fixed dataset "
                "size); use relation='replace_one'")
        n = V.integer(f"{name}.source_dataset_size", _field(event, "source_dataset_size", name), low=1)
        m = V.integer(f"{name}.sample_size", _field(event, "sample_size", name), low=0, high=n)
        inner = _field(event, "event", name)
        if m == 0:
            return []
        sub = _Translator(self.relation, self.wor_delta)
        sub.run(inner, 1, depth + 1)
        if m == n or not sub.out:  # the sample is the whole dataset (a set): the inner event itself
            return sub.out
        from .privacy_accountant import PrivacyAccountant

        acct = PrivacyAccountant(relation="replace_one")
        for mech, k in sub.out:
            acct.compose(mech, k)
        led = acct.ledger
        pure = led.pure_epsilon
        if math.isfinite(pure) and led.infinite_loss_mass == 0.0:
            eps, delta = _up(pure, 4.0 * len(led) + 8.0), 0.0
        elif self.wor_delta is not None:
            eps, delta = acct.epsilon(self.wor_delta), self.wor_delta
        else:
            raise UnsupportedEventError(
                f"{name}: the sampled event is not pure DP, so dpcert needs the base delta of its "
                "(eps, delta) guarantee to amplify: pass without_replacement_delta=... (e.g. a tenth of "
                "your target delta)")
        if not math.isfinite(eps):
            raise NonPrivateEventError(f"{name}: the sampled event has no finite epsilon at delta {delta:g}")
        gamma = m / n
        if Fraction(gamma) < Fraction(m, n):  # a larger rate is the safe side
            gamma = min(1.0, math.nextafter(gamma, 2.0))
        return [(SampledWithoutReplacement(epsilon=eps, delta=delta, sample_rate=gamma), 1)]


def translate(event: object, relation="add_remove", *,
              without_replacement_delta: float | None = None) -> list[tuple[Mechanism, int]]:
    """dpcert ledger entries ``[(mechanism, count), ...]`` equivalent to a dp-accounting event tree.

    Parameters
    ----------
    event : DpEvent
        A dp-accounting event (or its ``to_named_tuple()`` form); read by class name and attributes.
    relation : {"add_remove", "replace_one"} or dp-accounting ``NeighboringRelation``
        The neighbouring relation the event is read under (see the module docstring's table).
    without_replacement_delta : float, optional
        Base delta for ``SampledWithoutReplacementDpEvent`` around a non-pure-DP event.

    Raises
    ------
    NonPrivateEventError
        The tree contains a ``NonPrivateDpEvent`` (or a zero noise parameter).
    UnsupportedEventError
        An event with no translation under ``relation`` (``UnsupportedDpEvent``, unknown classes, ...).
    TypeError
        ``event`` is not a dp-accounting event.
    """
    t = _Translator(relation, without_replacement_delta)
    try:
        t.run(event)
    except RecursionError:
        raise UnsupportedEventError("event tree nested too deeply") from None
    return t.out


# ---------------------------------------------------------------------------------------------- export
def _dp_accounting(module: object = None):
    """The module providing the event classes: ``module`` if given, else dp-accounting (ImportError with an
    install hint when it is missing)."""
    if module is not None:
        return module
    try:
        # the event module: every event class (the package top level re-exports only some of them)
        return importlib.import_module("dp_accounting.dp_event")
    except ImportError:
        raise ImportError("to_dp_event() builds dp-accounting objects: pip install dp-accounting "
                          "(or pip install 'dpcert[peers]')") from None


def module_of(events: Iterable[object]):
    """The module that defines the classes of ``events`` when it also provides ``ComposedDpEvent``,
    ``SelfComposedDpEvent`` and ``NoOpDpEvent`` (dp-accounting's ``dp_event`` or a stand-in), else None.
    Looks in ``sys.modules`` only (no import)."""
    for e in events:
        mod = sys.modules.get(type(e).__module__)
        if mod is not None and all(hasattr(mod, c) for c in ("ComposedDpEvent", "SelfComposedDpEvent",
                                                               "NoOpDpEvent")):
            return mod
    return None


def mechanism_to_dp_event(mech: Mechanism, relation: str = "add_remove", module: object = None):
    """The dp-accounting event equivalent to one use of ``mech`` under ``relation``.

    Raises ``ValueError`` naming the mechanism when it has no exact dp-accounting equivalent.
    """
    from mechanisms import Gaussian, Laplace, RandomizedResponse
    from mechanisms.poisson_subsampled import PoissonSubsampled, SubsampledLaplace
    from mechanisms.subsampled import SubsampledGaussian

    relation = _relation(relation)
    dpa = _dp_accounting(module)
    unit = 1.0 if relation == "add_remove" else 2.0  # the sensitivity one dp-accounting event stands for
    kind = type(mech)
    if kind is Gaussian:
        return dpa.GaussianDpEvent(noise_multiplier=mech.sigma * unit / mech.sensitivity)
    if kind is Laplace:
        return dpa.LaplaceDpEvent(noise_multiplier=mech.scale * unit / mech.sensitivity)
    if kind is RandomizedResponse and relation == "replace_one":
        # e^eps = 1 + k (1 - p) / p  <=>  p = k / (e^eps + k - 1)
        p = 0.0 if mech.epsilon > 700 else mech.k / (math.expm1(mech.epsilon) + mech.k)
        return dpa.RandomizedResponseDpEvent(noise_parameter=p, num_buckets=mech.k)
    from mechanisms import ZCDP, DiscreteLaplace, GaussianMixture, TreeAggregation

    if kind is ZCDP and mech.delta == 0.0:
        return dpa.ZCDpEvent(rho=mech.rho, xi=mech.xi)
    if kind is DiscreteLaplace and (relation == "add_remove" or mech.sensitivity % 2 == 0):
        a = 1.0 / mech.scale
        if Fraction(a) < 1 / Fraction(mech.scale):  # a larger parameter (less noise) is the safe side
            a = math.nextafter(a, math.inf)
        c = mech.sensitivity if relation == "add_remove" else mech.sensitivity // 2
        return dpa.DiscreteLaplaceDpEvent(noise_parameter=a, sensitivity=c)
    if relation == "add_remove":
        if kind is GaussianMixture:
            return dpa.MixtureOfGaussiansDpEvent(standard_deviation=mech.sigma,
                                                 sensitivities=list(mech.sensitivities),
                                                 sampling_probs=list(mech.probabilities))
        if kind is TreeAggregation and (mech.restart or mech.epochs == 1):
            tree = dpa.SingleEpochTreeAggregationDpEvent(noise_multiplier=mech.sigma, step_counts=mech.steps)
            return tree if mech.epochs == 1 else dpa.SelfComposedDpEvent(event=tree, count=mech.epochs)
        if kind is SubsampledGaussian:
            return dpa.PoissonSampledDpEvent(
                sampling_probability=mech.sample_rate,
                event=dpa.GaussianDpEvent(noise_multiplier=mech.sigma / mech.sensitivity))
        if kind is SubsampledLaplace:
            return dpa.PoissonSampledDpEvent(
                sampling_probability=mech.sample_rate,
                event=dpa.LaplaceDpEvent(noise_multiplier=mech.scale / mech.sensitivity))
        if kind is PoissonSubsampled:
            return dpa.PoissonSampledDpEvent(sampling_probability=mech.sample_rate,
                                             event=mechanism_to_dp_event(mech.base, relation, dpa))
        from mechanisms import AmplifiedBandedMF, AmplifiedBandedToeplitzMF

        if kind in (AmplifiedBandedMF, AmplifiedBandedToeplitzMF) and mech.tight:
            # one participation is exactly the subsampled Gaussian of the largest column norm (attained:
            # ``tight``); jax_privacy's amplified_bandmf_event builds the same event
            return mechanism_to_dp_event(mech.dp_sgd_equivalent()[0], relation, dpa)
    raise ValueError(f"{mech.describe()} has no dp-accounting DpEvent equivalent under the {relation!r} "
                     "relation (exported: gaussian, laplace, subsampled_gaussian, subsampled_laplace, "
                     "poisson_subsampled of those, zcdp with delta = 0, discrete_laplace, and under "
                     "add_remove gaussian_mixture, tree_aggregation with restarts and the amplified banded "
                     "factorisations whose bound is attained; randomized_response under replace_one)")


def ledger_to_dp_event(entries: Iterable[tuple[Mechanism, int]], relation: str = "add_remove",
                       module: object = None):
    """A dp-accounting event for ledger entries ``[(mechanism, count)]``: one entry -> the event (or a
    ``SelfComposedDpEvent`` for count > 1), several -> a ``ComposedDpEvent``, none -> ``NoOpDpEvent``.

    Builds dp-accounting's own classes (``module`` overrides, for stand-ins); ``ImportError`` with an
    install hint if dp-accounting is missing, ``ValueError`` for an entry without an equivalent.
    """
    dpa = _dp_accounting(module)
    events = []
    for mech, k in entries:
        if not k:
            continue
        e = mechanism_to_dp_event(mech, relation, dpa)
        events.append(e if k == 1 else dpa.SelfComposedDpEvent(event=e, count=int(k)))
    if not events:
        return dpa.NoOpDpEvent()
    return events[0] if len(events) == 1 else dpa.ComposedDpEvent(events=events)
