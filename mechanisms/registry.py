"""Name -> mechanism class registry, with third-party plug-ins from entry points.

Saved state and the CLI rebuild mechanisms from ``{"name": ..., "params": {...}}``.  Rebuilding only
calls the registered class's constructor with JSON values (numbers, strings, lists, nested mechanism
dicts); it never imports a module named by the data and never unpickles anything.

Third-party packages register mechanisms with an entry point in the group ``dpcert.mechanisms``::

    [project.entry-points."dpcert.mechanisms"]
    my_mech = "my_package.module:MyMechanism"
"""

from __future__ import annotations

import numbers
from importlib import metadata
from typing import Any

from .base import Mechanism

ENTRY_POINT_GROUP = "dpcert.mechanisms"
_REGISTRY: dict[str, type[Mechanism]] = {}
_entry_points_loaded = False


def register(cls: type[Mechanism]) -> type[Mechanism]:
    """Class decorator: make ``cls`` constructible by its ``name``."""
    if not isinstance(cls, type) or not issubclass(cls, Mechanism):
        raise TypeError(f"only Mechanism subclasses can be registered, got {cls!r}")
    if not cls.name:
        raise ValueError(f"{cls.__name__} must define a non-empty class attribute 'name'")
    other = _REGISTRY.get(cls.name)
    if other is not None and other is not cls and other.__qualname__ != cls.__qualname__:
        raise ValueError(f"mechanism name {cls.name!r} is already registered by {other.__qualname__}")
    _REGISTRY[cls.name] = cls
    return cls


def unregister(cls: type[Mechanism]) -> None:
    """Remove a class added with :func:`register` (tests and examples clean up with it)."""
    if _REGISTRY.get(getattr(cls, "name", None)) is not cls:
        raise ValueError(f"{cls!r} is not registered")
    del _REGISTRY[cls.name]


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    try:
        eps = metadata.entry_points(group=ENTRY_POINT_GROUP)
    except Exception:  # pragma: no cover - broken environments
        return
    for ep in eps:
        try:
            cls = ep.load()
        except Exception:  # a broken plug-in must not break the accountant
            continue
        if isinstance(cls, type) and issubclass(cls, Mechanism) and cls.name not in _REGISTRY:
            register(cls)


def get(name: str) -> type[Mechanism]:
    """The class registered under ``name`` (``ValueError`` listing the known names otherwise)."""
    if not isinstance(name, str):
        raise TypeError(f"mechanism name must be a string, got {type(name).__name__}")
    if name not in _REGISTRY:
        _load_entry_points()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; known: {', '.join(sorted(_REGISTRY))}") from None


def available() -> list[str]:
    """Sorted names of all registered mechanisms (built-in and plug-ins)."""
    _load_entry_points()
    return sorted(_REGISTRY)


def _check_json_value(path: str, v: Any) -> None:
    if v is None or isinstance(v, (str, bool, numbers.Real)):
        return
    if isinstance(v, list):
        for i, x in enumerate(v):
            _check_json_value(f"{path}[{i}]", x)
        return
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                raise ValueError(f"{path}: keys must be strings")
            _check_json_value(f"{path}.{k}", x)
        return
    raise ValueError(f"{path}: unsupported value of type {type(v).__name__}")


def from_dict(d: Any) -> Mechanism:
    """Rebuild a mechanism from ``{"name": str, "params": dict}`` (as written by ``to_dict``)."""
    if not isinstance(d, dict) or set(d) != {"name", "params"}:
        raise ValueError(f"mechanism spec must be a dict with keys 'name' and 'params', got {d!r}")
    if not isinstance(d["params"], dict):
        raise ValueError("mechanism 'params' must be a dict")
    _check_json_value("params", d["params"])
    cls = get(d["name"])
    try:
        return cls.from_params(dict(d["params"]))
    except TypeError as exc:
        raise ValueError(f"bad parameters for mechanism {d['name']!r}: {exc}") from None
