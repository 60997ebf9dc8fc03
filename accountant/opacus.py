"""Opacus integration: ``PrivacyEngine(accountant="dpcert")`` after one call to :func:`register`.

>>> from accountant.opacus import register
>>> register()                                       # doctest: +SKIP
>>> engine = opacus.PrivacyEngine(accountant="dpcert")  # doctest: +SKIP

Importing this module does not import Opacus (or torch); :func:`register` does, and raises ImportError
if Opacus is absent.  :func:`register` is idempotent and :func:`unregister` undoes exactly what it did.

What it relies on / what it changes (Opacus >= 1.4)
----------------------------------------------------
1. The accountant class.  :func:`opacus_accountant_class` builds (once per Opacus ``IAccountant``)
   ``OpacusDPCertAccountant(DPCertAccountant, opacus.accountants.IAccountant)``, so
   ``isinstance(engine.accountant, IAccountant)`` holds; every method comes from
   :class:`accountant.opacus_adapter.DPCertAccountant` (epsilon = dpcert certified upper bound).
2. The name "dpcert".  ``PrivacyEngine.__init__`` and ``get_noise_multiplier`` obtain their accountant
   from ``create_accountant(mechanism)``.

   * Opacus >= 1.6 has a registry: we call its public ``opacus.accountants.register_accountant("dpcert",
     cls)``.  Nothing is patched.  :func:`unregister` removes the entry from the registry dict
     ``opacus.accountants.registry._ACCOUNTANTS`` (Opacus offers no public removal; only our own entry
     is removed).
   * Opacus 1.4 - 1.5.x has no registry: ``create_accountant`` is a hard-coded ``if mechanism == "rdp"
     ... elif "gdp" ... elif "prv"`` chain, imported *by name* into ``opacus.accountants.utils`` and
     ``opacus.privacy_engine``.  We replace the attribute ``create_accountant`` in those three modules
     (``opacus.accountants``, ``opacus.accountants.utils``, ``opacus.privacy_engine``) by a wrapper that
     returns our accountant for "dpcert" and calls the original for every other name.  :func:`unregister`
     puts the originals back.
3. Noise calibration (only with ``register(calibration=True)``, the default).  Opacus'
   ``get_noise_multiplier(..., accountant=name)`` is a fixed bisection over ``accountant.get_epsilon``
   with no hook for the search.  Without patching it already works for "dpcert" (via item 2; our
   ``history`` setter accepts its ``accountant.history = [...]``), and the sigma it returns has certified
   epsilon <= target.  With ``calibration=True`` we replace the attribute ``get_noise_multiplier`` in
   ``opacus.accountants.utils`` and ``opacus.privacy_engine`` (which ``make_private_with_epsilon`` calls
   by its module-global name) by :func:`get_noise_multiplier` below, which sends ``accountant="dpcert"``
   to dpcert's certified calibration (:func:`accountant.calibration.calibrate_sigma`) and every other
   accountant to the original function, unchanged.  :func:`unregister` puts the originals back.  Code
   that bound ``get_noise_multiplier`` itself before :func:`register` keeps Opacus' bisection (still
   certified, as said).

No other Opacus attribute is touched.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

from mechanisms import validation as V

from .opacus_adapter import MECHANISM, DPCertAccountant

__all__ = ["register", "unregister", "is_registered", "opacus_accountant_class", "get_noise_multiplier"]

# what register() did, so that it is idempotent and unregister() undoes exactly that:
# {"registry": dict or None, "cls": class, "patched": [(module, attribute, original, replacement)]}
_STATE: dict[str, Any] = {}
_CLASSES: dict[type, type] = {}  # Opacus IAccountant -> our subclass of it


def _import_opacus():
    try:
        import opacus.accountants as oa
        import opacus.accountants.utils as ou
        import opacus.privacy_engine as ope
    except ImportError as exc:
        raise ImportError("accountant.opacus.register() needs Opacus (>= 1.4): pip install 'dpcert[opacus]' "
                          f"or pip install opacus ({exc})") from exc
    return oa, ou, ope


def opacus_accountant_class() -> type:
    """``OpacusDPCertAccountant``: :class:`DPCertAccountant` that also subclasses Opacus' ``IAccountant``.

    Built on first use (importing Opacus); the same class is returned afterwards.
    """
    oa, _, _ = _import_opacus()
    base = oa.IAccountant
    cls = _CLASSES.get(base)
    if cls is None:
        cls = type("OpacusDPCertAccountant", (DPCertAccountant, base), {
            "__module__": __name__,
            "__doc__": "dpcert's certified accountant as an Opacus ``IAccountant`` (mechanism 'dpcert').",
        })
        _CLASSES[base] = cls
    return cls


def __getattr__(name: str) -> Any:  # PEP 562: the class exists once Opacus is importable (and pickles)
    if name == "OpacusDPCertAccountant":
        return opacus_accountant_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def get_noise_multiplier(*, target_epsilon: float, target_delta: float, sample_rate: float,
                         epochs: int | None = None, steps: int | None = None, accountant: str = MECHANISM,
                         epsilon_tolerance: float = 0.01, **kwargs: Any) -> float:
    """Opacus' ``get_noise_multiplier`` with dpcert's certified calibration for ``accountant="dpcert"``.

    Same signature and conventions as ``opacus.accountants.utils.get_noise_multiplier``: give exactly one
    of ``epochs`` (then ``steps = int(epochs / sample_rate)``, as Opacus) or ``steps``; the answer sigma
    satisfies ``target_epsilon - epsilon_tolerance <= epsilon(sigma) <= target_epsilon``, where
    epsilon(sigma) is here dpcert's *certified upper bound* at ``target_delta`` (so the privacy guarantee
    holds, not only the estimate).  Computed by :func:`accountant.calibration.calibrate_sigma` (relative
    tolerance 1e-3 on sigma, refined tenfold while the epsilon gap is above ``epsilon_tolerance``).
    ``method=`` in ``kwargs`` selects the dpcert route; other ``kwargs`` (which
    ``make_private_with_epsilon`` forwards) are ignored.  Any other ``accountant`` is passed to Opacus'
    original function unchanged (Opacus needed then).
    """
    if accountant != MECHANISM:
        original = _STATE.get("gnm_original")
        if original is None:
            _, ou, _ = _import_opacus()
            original = ou.get_noise_multiplier
            if getattr(original, "_dpcert_wrapper", False):
                original = original._dpcert_original
        return original(target_epsilon=target_epsilon, target_delta=target_delta, sample_rate=sample_rate,
                        epochs=epochs, steps=steps, accountant=accountant,
                        epsilon_tolerance=epsilon_tolerance, **kwargs)
    from .calibration import calibrate_sigma

    if (steps is None) == (epochs is None):
        raise ValueError("get_noise_multiplier takes as input EITHER a number of steps or a number of epochs")
    q = V.probability("sample_rate", sample_rate, open_low=True)
    if steps is None:
        ep = V.real("epochs", epochs, low=0.0, low_open=True)
        steps = int(ep / q)  # Opacus' convention
        if steps < 1:
            raise ValueError(f"epochs / sample_rate must give at least one step, got {ep!r} / {q!r}")
    steps = V.integer("steps", steps, low=1, high=V.MAX_COUNT)
    tol = V.real("epsilon_tolerance", epsilon_tolerance, low=0.0, low_open=True)
    method = kwargs.get("method")
    rtol = 1e-3  # sigma to 0.1 %: the epsilon gap is then far below Opacus' default tolerance 0.01
    while True:
        cal = calibrate_sigma(target_epsilon=target_epsilon, delta=target_delta, sample_rate=q, steps=steps,
                              method=method, rtol=rtol)
        gap = float(target_epsilon) - cal.epsilon
        if gap <= tol:
            return float(cal.value)
        if rtol <= 1e-10:
            warnings.warn(f"dpcert get_noise_multiplier: certified epsilon {cal.epsilon!r} at sigma "
                          f"{float(cal.value)!r} stays more than epsilon_tolerance={tol!r} below the target "
                          f"{target_epsilon!r} (the certified epsilon jumps there); returning this sigma, "
                          "which is safe", stacklevel=2)
            return float(cal.value)
        rtol /= 10.0


def _create_wrapper(original, cls):
    def create_accountant(mechanism: str):
        if mechanism == MECHANISM:
            return cls()
        return original(mechanism=mechanism)

    create_accountant._dpcert_wrapper = True  # type: ignore[attr-defined]
    create_accountant._dpcert_original = original  # type: ignore[attr-defined]
    create_accountant.__doc__ = original.__doc__
    return create_accountant


def _gnm_wrapper(original):
    def wrapped(*, accountant: str = "rdp", **kwargs: Any) -> float:
        if accountant == MECHANISM:
            return get_noise_multiplier(accountant=accountant, **kwargs)
        return original(accountant=accountant, **kwargs)

    wrapped.__name__ = "get_noise_multiplier"
    wrapped.__qualname__ = "get_noise_multiplier"
    wrapped.__doc__ = original.__doc__
    wrapped._dpcert_wrapper = True  # type: ignore[attr-defined]
    wrapped._dpcert_original = original  # type: ignore[attr-defined]
    return wrapped


def _patch(patched: list, module, attr: str, replacement) -> None:
    original = getattr(module, attr)
    setattr(module, attr, replacement)
    patched.append((module, attr, original, replacement))


def register(*, calibration: bool = True) -> type:
    """Make ``"dpcert"`` an Opacus accounting mechanism; returns the accountant class.

    After this, ``PrivacyEngine(accountant="dpcert")``, ``make_private_with_epsilon`` on such an engine
    and ``opacus.accountants.utils.get_noise_multiplier(..., accountant="dpcert")`` work (Opacus >= 1.4).
    ``calibration=True`` also routes ``get_noise_multiplier`` for "dpcert" to dpcert's certified
    calibration (see the module docstring for exactly what is changed).  Calling it again is a no-op
    (with a different ``calibration`` it re-registers).  ImportError if Opacus is not installed.
    """
    if not isinstance(calibration, bool):
        raise TypeError(f"calibration must be True or False, got {calibration!r}")
    if _STATE:
        if _STATE["calibration"] == calibration:
            return _STATE["cls"]
        unregister()
    oa, ou, ope = _import_opacus()
    cls = opacus_accountant_class()
    patched: list = []
    registry = previous = None
    if callable(getattr(oa, "register_accountant", None)):  # Opacus >= 1.6
        registry = sys.modules.get(getattr(oa.register_accountant, "__module__", ""), None)
        table = getattr(registry, "_ACCOUNTANTS", None)
        previous = table.get(MECHANISM) if isinstance(table, dict) else None
        oa.register_accountant(MECHANISM, cls, force=True)
    else:  # Opacus 1.4 - 1.5: hard-coded chain, imported by name in two more modules
        original = oa.create_accountant
        wrapper = _create_wrapper(original, cls)
        for mod in (oa, ou, ope):
            if getattr(mod, "create_accountant", None) is original:
                _patch(patched, mod, "create_accountant", wrapper)
    gnm_original = None
    if calibration:
        gnm_original = ou.get_noise_multiplier
        wrapped = _gnm_wrapper(gnm_original)
        for mod in (ou, ope):
            if getattr(mod, "get_noise_multiplier", None) is gnm_original:
                _patch(patched, mod, "get_noise_multiplier", wrapped)
    _STATE.update(cls=cls, registry=registry, previous=previous, patched=patched, calibration=calibration,
                  gnm_original=gnm_original)
    return cls


def unregister() -> None:
    """Undo :func:`register` (no-op if not registered).

    Removes our registry entry (restoring an entry "dpcert" that was there before, if any) and restores
    every attribute it replaced (an attribute that someone else has replaced since is left alone).
    """
    if not _STATE:
        return
    cls = _STATE["cls"]
    registry = _STATE["registry"]
    if registry is not None:
        table = getattr(registry, "_ACCOUNTANTS", None)
        if isinstance(table, dict) and table.get(MECHANISM) is cls:
            if _STATE["previous"] is None:
                del table[MECHANISM]
            else:
                table[MECHANISM] = _STATE["previous"]
    for module, attr, original, replacement in reversed(_STATE["patched"]):
        if getattr(module, attr, None) is replacement:
            setattr(module, attr, original)
    _STATE.clear()


def is_registered() -> bool:
    """Whether Opacus' ``create_accountant("dpcert")`` currently gives our accountant."""
    if not _STATE:
        return False
    oa = sys.modules.get("opacus.accountants")
    if oa is None:
        return False
    try:
        return isinstance(oa.create_accountant(mechanism=MECHANISM), _STATE["cls"])
    except ValueError:
        return False
