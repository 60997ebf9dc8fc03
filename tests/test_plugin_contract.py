"""The plug-in contract of :mod:`mechanisms.base`: declared field checks and the delegation hook.

References: the mu-GDP closed form delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)
(Dong, Roth & Su 2022, Cor. 2.13) evaluated with scipy and inverted with brentq, independently of the
package; the error messages are the documented format of :mod:`mechanisms.validation`, written out.
"""

from __future__ import annotations

import dataclasses
import importlib
import math
import pkgutil
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.stats import norm

import mechanisms
from accountant import PrivacyAccountant
from mechanisms import Gaussian
from mechanisms import validation as V
from mechanisms._delegate import _Delegating
from mechanisms.base import Delegating, Mechanism, apply_checks, check, field_ref


# ------------------------------------------------------------------------------ the mu-GDP reference
def _gdp_delta(eps: float, mu: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def _gdp_epsilon(delta: float, mu: float) -> float:
    return brentq(lambda e: _gdp_delta(e, mu) - delta, 0.0, 10.0 * mu * mu + 50.0, xtol=1e-15, rtol=1e-15)


# ------------------------------------------------------------------------------ a delegating plug-in
@dataclass(frozen=True)
class _NoisyArgmax(Delegating):
    """Third-party mechanism (one class, no core edits): the argmax of a histogram with Gaussian noise
    ``sigma`` per count and L2 sensitivity ``clip``; post-processing of the Gaussian mechanism, so the
    Gaussian pair dominates it (an upper bound: ``tight = False``)."""

    sigma: float
    clip: float = 1.0

    name = "test_noisy_argmax"
    tight = False
    field_checks = {"sigma": V.positive, "clip": V.positive}

    def dominating(self) -> Gaussian:
        return Gaussian(self.sigma, self.clip)


@pytest.mark.parametrize("sigma,clip,k,delta",
                         [(3.0, 1.0, 50, 1e-6), (0.8, 2.0, 3, 1e-5), (40.0, 1.5, 1000, 1e-9)])
def test_delegating_plugin_gets_the_exact_route(sigma, clip, k, delta):
    acct = PrivacyAccountant().compose(_NoisyArgmax(sigma, clip), k)
    assert acct._valid_methods()[:3] == ["exact", "cf", "pld"]
    mu = math.sqrt(k) * clip / sigma
    ref = _gdp_epsilon(delta, mu)
    c = acct.certificate(delta=delta)
    assert c.method == "exact"
    assert ref * (1 - 1e-12) <= c.epsilon <= ref * (1 + 1e-9)
    # the dominating pair is not attained by the argmax: no lower bound is claimed
    assert c.lower_bound is None and c.bound == "upper bound"
    d = acct.certificate(epsilon=1.0)
    assert d.method == "exact"
    assert _gdp_delta(1.0, mu) * (1 - 1e-12) <= d.delta <= _gdp_delta(1.0, mu) * (1 + 1e-9)


@pytest.mark.parametrize("sigma,k", [(2.0, 20), (1.0, 1)])
def test_delegating_plugin_gets_the_cf_route(sigma, k):
    acct = PrivacyAccountant().compose(_NoisyArgmax(sigma), k)
    mu = math.sqrt(k) / sigma
    c = acct.certificate(delta=1e-5, method="cf")
    ref = _gdp_epsilon(1e-5, mu)
    assert c.method == "cf"
    assert ref * (1 - 1e-12) <= c.epsilon <= ref * (1 + 1e-3)
    d = acct.certificate(epsilon=0.5, method="cf")
    assert _gdp_delta(0.5, mu) * (1 - 1e-12) <= d.delta <= _gdp_delta(0.5, mu) * (1 + 1e-3) + 1e-12


def test_delegating_plugin_has_the_dominating_curves_but_its_own_identity():
    m, g = _NoisyArgmax(2.0, 0.5), Gaussian(2.0, 0.5)
    a = np.array([1.5, 2.0, 32.0])
    np.testing.assert_array_equal(m.rdp(a), a * (0.25**2 / 2))  # Mironov 2017: alpha mu^2 / 2
    assert m.gdp_mu == 0.25 and m.pld_available and m.symmetric
    assert m.total_variation() == g.total_variation()
    assert not m.exact_profile  # the single-use profile is not forwarded (not attained by the argmax)
    assert m.name == "test_noisy_argmax" and not m.tight
    with pytest.raises(ValueError, match=r"sigma must lie in \(0, inf\), got -1.0"):
        _NoisyArgmax(-1.0)


def test_delegating_without_dominating_fails_clearly():
    @dataclass(frozen=True)
    class _Broken(Delegating):
        x: float = 1.0

    with pytest.raises(NotImplementedError, match="_Broken must define dominating"):
        _Broken().rdp([2.0])


def test_old_private_delegation_name_still_works():
    @dataclass(frozen=True)
    class _Old(_Delegating):
        sigma: float

        def _inner(self) -> Mechanism:
            return Gaussian(self.sigma)

    assert isinstance(_Old(2.0), Delegating)
    assert _Old(2.0).dominating() == Gaussian(2.0)
    np.testing.assert_array_equal(_Old(2.0).rdp([3.0]), [3.0 / 8.0])


# ------------------------------------------------------------------------------ declared field checks
@dataclass(frozen=True)
class _Checked(Mechanism):
    sigma: float
    steps: int
    cap: int | None = None
    mode: str = "a"
    rate: float = 0.5

    name = "test_checked"
    field_checks = {"sigma": V.positive, "steps": check(V.integer, low=1),
                    "cap": check(V.integer, low=0, high=field_ref("steps"), optional=True),
                    "mode": check(V.one_of, options=("a", "b")),
                    "rate": check(V.probability, label="rate (q)")}


@dataclass(frozen=True)
class _CheckedCross(_Checked):
    """A cross-field check after the declared ones: sees the normalised values."""

    def __post_init__(self):
        super().__post_init__()
        if self.sigma * self.steps > 100:
            raise ValueError(f"sigma * steps must be <= 100, got {self.sigma * self.steps!r}")


def test_declared_checks_normalise_values():
    m = _Checked(2, np.int64(3), cap=3.0, rate=np.float64(0.25))
    assert (m.sigma, m.steps, m.cap, m.rate) == (2.0, 3, 3, 0.25)
    assert type(m.sigma) is float and type(m.steps) is int and type(m.cap) is int and type(m.rate) is float
    assert _Checked(1.0, 2).cap is None


@pytest.mark.parametrize("kwargs,exc,message", [
    ({"sigma": -1.0, "steps": 2}, ValueError, "sigma must lie in (0, inf), got -1.0"),
    ({"sigma": "x", "steps": 2}, TypeError, "sigma must be a real number, got str 'x'"),
    ({"sigma": 1.0, "steps": 0}, ValueError, "steps must be an integer >= 1, got 0"),
    ({"sigma": 1.0, "steps": 1.5}, TypeError, "steps must be an integer, got float 1.5"),
    ({"sigma": 1.0, "steps": 5, "cap": 6}, ValueError, "cap must be an integer in [0, 5], got 6"),
    ({"sigma": 1.0, "steps": 5, "mode": "c"}, ValueError, "mode must be one of ('a', 'b'), got 'c'"),
    ({"sigma": 1.0, "steps": 5, "rate": 2}, ValueError, "rate (q) must lie in [0, 1], got 2.0"),
    # the first failing check in declaration order decides
    ({"sigma": -1.0, "steps": 0, "mode": "c"}, ValueError, "sigma must lie in (0, inf), got -1.0"),
    ({"sigma": 1.0, "steps": 0, "mode": "c"}, ValueError, "steps must be an integer >= 1, got 0"),
])
def test_declared_checks_messages_and_order(kwargs, exc, message):
    with pytest.raises(exc) as info:
        _Checked(**kwargs)
    assert str(info.value) == message


def test_cross_field_checks_run_after_the_declared_ones():
    with pytest.raises(ValueError, match="steps must be an integer >= 1"):
        _CheckedCross(60.0, 0)  # the declared check first, although the product is also too large
    with pytest.raises(ValueError, match=r"sigma \* steps must be <= 100, got 120.0"):
        _CheckedCross(60, 2)
    assert _CheckedCross(50, 2).sigma == 50.0


def test_apply_checks_on_plain_values():
    from types import SimpleNamespace

    checks = {"n": check(V.integer, low=1), "b": check(V.integer, low=1, high=field_ref("n"))}
    p = SimpleNamespace(n=10.0, b=3)
    apply_checks(p, checks)
    assert (p.n, p.b) == (10, 3) and type(p.n) is int
    with pytest.raises(ValueError, match=r"b must be an integer in \[1, 10\], got 11"):
        apply_checks(SimpleNamespace(n=10, b=11), checks)


def _all_mechanism_classes() -> list[type]:
    for mod in pkgutil.walk_packages(mechanisms.__path__, "mechanisms."):
        importlib.import_module(mod.name)
    out, todo = [], [Mechanism]
    while todo:
        c = todo.pop()
        for s in c.__subclasses__():
            todo.append(s)
            if dataclasses.is_dataclass(s) and s.__module__.startswith("mechanisms"):
                out.append(s)
    return out


def test_every_declared_check_names_a_field():
    classes = _all_mechanism_classes()
    assert len(classes) >= 40
    for cls in classes:
        fields = [f.name for f in dataclasses.fields(cls)]
        assert set(cls.field_checks) <= set(fields), (cls.__name__, set(cls.field_checks) - set(fields))
        for chk in cls.field_checks.values():
            assert callable(chk)



def test_readme_field_checks_example_runs():
    """The README's plug-in contract example is valid code with the documented behaviour."""
    import re
    from pathlib import Path

    from mechanisms import registry

    text = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = re.search(r"\*\*Field checks, declared once\.\*\*.*?```python\n(.*?)```", text, re.S).group(1)
    code = "\n".join(line[2:] for line in block.splitlines())
    ns = {"Mechanism": Mechanism, "check": check, "field_ref": field_ref, "V": V, "dataclass": dataclass,
          "register": registry.register, "__name__": __name__}
    exec(compile(code, "README plug-in contract", "exec"), ns)
    cls = ns["MyMechanism"]
    try:
        m = cls(2, 3.0, cap=3)
        assert (m.sigma, m.steps, m.cap) == (2.0, 3, 3) and type(m.steps) is int
        with pytest.raises(ValueError, match=r"cap must be an integer in \[0, 3\], got 4"):
            cls(2, 3, cap=4)
        assert registry.from_dict(m.to_dict()) == m
    finally:
        registry.unregister(cls)


def test_conformance_checks_the_declared_field_checks():
    from mechanisms.conformance import check_mechanism

    def _rdp(self, alpha):
        return 0.1 * np.asarray(alpha, dtype=float)

    @dataclass(frozen=True)
    class _Drifting(Mechanism):
        x: float
        name = "test_drifting"
        field_checks = {"x": lambda name, v: float(v) + 1.0}  # not idempotent: a second pass moves x
        rdp = _rdp

    @dataclass(frozen=True)
    class _Typo(Mechanism):
        x: float
        name = "test_typo"
        field_checks = {"x": V.positive, "y": V.positive}
        rdp = _rdp

        def __post_init__(self):  # (skips the declared checks, which would fail on the missing field)
            pass

    rep = check_mechanism(_Drifting(1.0), strict=False)
    assert "declared field checks" in rep.checks
    assert any("not idempotent" in p and "'x'" in p for p in rep.problems)
    rep = check_mechanism(_Typo(1.0), strict=False)
    assert any("field_checks name no field: ['y']" in p for p in rep.problems)
    from mechanisms import registry

    registry.register(_NoisyArgmax)
    try:
        assert check_mechanism(_NoisyArgmax(2.0)).ok
    finally:
        registry.unregister(_NoisyArgmax)
