"""DPCertAccountant and accountant.opacus without Opacus: Opacus' IAccountant semantics, independent
epsilon references, and register()/unregister() against small stand-in modules that mirror Opacus'
public layout (1.4-1.5: hard-coded ``create_accountant`` chain; >= 1.6: ``register_accountant``).

The tests with the real Opacus are in tests/test_opacus.py (skipped when Opacus is absent).
"""

from __future__ import annotations

import abc
import math
import pickle
import sys
import types
from collections import OrderedDict

import pytest
from reference_subsampled import sg_eps_ref

import accountant.opacus as aop
from accountant import PrivacyAccountant
from accountant.opacus_adapter import DPCertAccountant


# --------------------------------------------------------------------------- epsilon: independent checks
@pytest.mark.parametrize("sigma, q, steps", [(1.0, 0.5, 2), (2.0, 0.2, 1), (0.8, 0.1, 2)])
def test_epsilon_brackets_the_mpmath_reference(sigma, q, steps):
    """T-fold Poisson-subsampled Gaussian, add/remove (max of the two directions), by quadrature
    (tests/reference_subsampled.py, ~1e-12 absolute): certified lower <= reference <= certified upper."""
    acct = DPCertAccountant()
    for _ in range(steps):
        acct.step(noise_multiplier=sigma, sample_rate=q)
    ref = sg_eps_ref(1e-5, sigma, q, steps, direction="max")
    cert = acct.certificate(1e-5)
    assert acct.get_epsilon(1e-5) == cert.epsilon
    assert cert.lower_bound - 1e-9 <= ref <= cert.epsilon + 1e-9
    assert cert.epsilon - ref <= 1e-3 * ref  # and tight


def test_empty_history_spends_nothing_and_epsilon_grows_with_steps():
    acct = DPCertAccountant()
    assert len(acct) == 0 and acct.get_epsilon(1e-5) == 0.0
    eps = []
    for _ in range(3):
        for _ in range(10):
            acct.step(noise_multiplier=1.0, sample_rate=0.05)
        eps.append(acct.get_epsilon(1e-5))
    assert eps[0] < eps[1] < eps[2]
    # composition: the history is the ledger (rows are the same steps in any split)
    split = DPCertAccountant()
    split.history = [(1.0, 0.05, 12), (1.0, 0.05, 18)]
    assert split.get_epsilon(1e-5) == pytest.approx(eps[2], rel=1e-6)


# --------------------------------------------------------------------------- Opacus' history semantics
def test_step_merges_equal_consecutive_steps_like_opacus():
    acct = DPCertAccountant()
    for nm, q in [(1.0, 0.01)] * 3 + [(1.2, 0.01)] * 2 + [(1.0, 0.01)]:
        acct.step(noise_multiplier=nm, sample_rate=q)
    assert acct.history == [(1.0, 0.01, 3), (1.2, 0.01, 2), (1.0, 0.01, 1)]
    assert len(acct) == 6
    assert acct.mechanism() == DPCertAccountant.mechanism() == "dpcert"


@pytest.mark.parametrize("nm, q, exc", [(0.0, 0.01, ValueError), (-1.0, 0.01, ValueError),
                                        (math.nan, 0.01, ValueError), (1.0, 0.0, ValueError),
                                        (1.0, 1.5, ValueError), ("1", 0.01, TypeError),
                                        (1.0, None, TypeError)])
def test_bad_step_names_the_parameter_and_records_nothing(nm, q, exc):
    acct = DPCertAccountant()
    acct.step(noise_multiplier=1.0, sample_rate=0.01)
    with pytest.raises(exc, match="noise_multiplier" if q == 0.01 else "sample_rate"):
        acct.step(noise_multiplier=nm, sample_rate=q)
    assert acct.history == [(1.0, 0.01, 1)]


def test_state_dict_round_trip_and_copy_semantics():
    acct = DPCertAccountant()
    for _ in range(5):
        acct.step(noise_multiplier=1.1, sample_rate=0.02)
    sd = acct.state_dict()
    assert isinstance(sd, OrderedDict) and sd["mechanism"] == "dpcert" and sd["history"] == acct.history
    sd["history"].append((9.9, 0.5, 1))  # a deep copy, as Opacus' IAccountant.state_dict
    assert acct.history == [(1.1, 0.02, 5)]
    dest = {"other": 1}
    assert acct.state_dict(dest) is dest and dest["other"] == 1 and "history" in dest
    other = DPCertAccountant()
    other.load_state_dict(acct.state_dict())
    assert other.history == acct.history and other.get_epsilon(1e-5) == acct.get_epsilon(1e-5)
    clone = pickle.loads(pickle.dumps(other))  # after a query too (the cached ledger is not pickled)
    assert clone.history == acct.history and clone.get_epsilon(1e-5) == acct.get_epsilon(1e-5)
    # Opacus' checkpoints of a bare history (no "mechanism") and lists instead of tuples load too
    other.load_state_dict({"history": [[1.1, 0.02, 5]]})
    assert other.history == [(1.1, 0.02, 5)]


@pytest.mark.parametrize("sd, match", [(None, "empty"), ({}, "empty"), ({"mechanism": "dpcert"}, "history"),
                                       ({"history": [], "mechanism": "rdp"}, "'rdp'"),
                                       ({"history": [(1.0, 0.01, 5), (1.0, 0.01, -1)]}, "entry 1"),
                                       ({"history": [(1.0, 0.01, 5), (1.0, 0.01)]}, "entry 1"),
                                       ({"history": "rows"}, "history")])
def test_load_state_dict_rejects_bad_input_and_is_all_or_nothing(sd, match):
    acct = DPCertAccountant()
    acct.step(noise_multiplier=2.0, sample_rate=0.1)
    before = acct.get_epsilon(1e-5)
    with pytest.raises((ValueError, TypeError), match=match):
        acct.load_state_dict(sd)
    assert acct.history == [(2.0, 0.1, 1)] and acct.get_epsilon(1e-5) == before


def test_history_assignment_as_get_noise_multiplier_does_it():
    """Opacus' get_noise_multiplier sets ``accountant.history = [(sigma, q, steps)]`` then asks epsilon."""
    acct = DPCertAccountant()
    acct.history = [(1.0, 0.05, 40)]
    ref = PrivacyAccountant().step(sigma=1.0, sample_rate=0.05, steps=40).epsilon(1e-5)
    assert acct.get_epsilon(delta=1e-5) == ref and len(acct) == 40
    acct.history = [(2.0, 0.05, 40)]
    assert acct.get_epsilon(delta=1e-5) < ref
    with pytest.raises(ValueError, match="entry 0"):
        acct.history = [(0.0, 0.05, 40)]
    # in-place edits (Opacus' own accountants pop/append history) are seen at the next query
    acct.history[-1] = (1.0, 0.05, 40)
    assert acct.get_epsilon(1e-5) == ref


def test_get_epsilon_options():
    acct = DPCertAccountant(method="rdp")
    acct.history = [(1.0, 0.05, 40)]
    tight = acct.get_epsilon(1e-5, method="auto")
    assert acct.get_epsilon(1e-5) >= tight  # the RDP route is an upper bound of the tightest one
    # keyword options of Opacus' peers / of make_private_with_epsilon are ignored
    assert acct.get_epsilon(1e-5, method="auto", eps_error=0.5, alphas=[2, 3], poisson_sampling=True) == tight
    with pytest.raises(TypeError, match="positional"):
        acct.get_epsilon(1e-5, 0.01)
    with pytest.raises(ValueError, match="delta"):
        acct.get_epsilon(0.0)
    eps, order = acct.get_privacy_spent(delta=1e-5, method="auto")
    assert eps == tight and math.isnan(order)


def test_optimizer_hook_counts_accumulated_iterations():
    class StandInOptimizer:  # the two attributes of opacus.optimizers.DPOptimizer the hook reads
        noise_multiplier = 1.3
        accumulated_iterations = 2

    acct = DPCertAccountant()
    hook = acct.get_optimizer_hook_fn(sample_rate=0.01)
    hook(StandInOptimizer())
    hook(StandInOptimizer())
    assert acct.history == [(1.3, 0.02, 2)]


# --------------------------------------------------------------------------- register() with stand-ins
class _StandInIAccountant(abc.ABC):
    """Mirrors opacus.accountants.IAccountant's abstract interface."""

    @abc.abstractmethod
    def __init__(self):
        self.history = []

    @abc.abstractmethod
    def step(self, *, noise_multiplier, sample_rate): ...

    @abc.abstractmethod
    def get_epsilon(self, delta, *args, **kwargs): ...

    @abc.abstractmethod
    def __len__(self): ...

    @classmethod
    @abc.abstractmethod
    def mechanism(cls): ...


def _stand_in_opacus(monkeypatch, *, with_registry: bool) -> types.SimpleNamespace:
    """Fake ``opacus``, ``opacus.accountants`` (+ ``.utils``, ``.registry``) and ``opacus.privacy_engine``
    with Opacus' import-by-name layout, installed in sys.modules for this test only."""

    class StandInRDP(_StandInIAccountant):
        def __init__(self):
            self.history = []

        def step(self, *, noise_multiplier, sample_rate):
            self.history.append((noise_multiplier, sample_rate, 1))

        def get_epsilon(self, delta, *args, **kwargs):
            return 1.0

        def __len__(self):
            return len(self.history)

        @classmethod
        def mechanism(cls):
            return "rdp"

    opacus = types.ModuleType("opacus")
    acc = types.ModuleType("opacus.accountants")
    acc.IAccountant = _StandInIAccountant
    acc.RDPAccountant = StandInRDP
    if with_registry:
        reg = types.ModuleType("opacus.accountants.registry")
        reg._ACCOUNTANTS = {"rdp": StandInRDP}

        def register_accountant(mechanism, accountant, force=False):
            if mechanism in reg._ACCOUNTANTS and not force:
                raise ValueError("already registered")
            reg._ACCOUNTANTS[mechanism] = accountant

        def create_accountant(mechanism):
            if mechanism in reg._ACCOUNTANTS:
                return reg._ACCOUNTANTS[mechanism]()
            raise ValueError(f"Unexpected accounting mechanism: {mechanism}")

        register_accountant.__module__ = create_accountant.__module__ = reg.__name__
        reg.register_accountant, reg.create_accountant = register_accountant, create_accountant
        acc.register_accountant, acc.registry = register_accountant, reg
        monkeypatch.setitem(sys.modules, reg.__name__, reg)
    else:
        def create_accountant(mechanism):  # Opacus 1.4-1.5: a hard-coded chain
            if mechanism == "rdp":
                return StandInRDP()
            raise ValueError(f"Unexpected accounting mechanism: {mechanism}")
    acc.create_accountant = create_accountant

    utils = types.ModuleType("opacus.accountants.utils")
    utils.create_accountant = create_accountant  # imported by name, as Opacus does

    def get_noise_multiplier(*, target_epsilon, target_delta, sample_rate, epochs=None, steps=None,
                             accountant="rdp", epsilon_tolerance=0.01, **kwargs):
        a = utils.create_accountant(mechanism=accountant)
        a.history = [(1.0, sample_rate, steps)]
        return ("original", a.get_epsilon(delta=target_delta, **kwargs))

    utils.get_noise_multiplier = get_noise_multiplier
    acc.utils = utils
    pe = types.ModuleType("opacus.privacy_engine")
    pe.create_accountant, pe.get_noise_multiplier = create_accountant, get_noise_multiplier

    class PrivacyEngine:
        def __init__(self, *, accountant="prv"):
            self.accountant = pe.create_accountant(mechanism=accountant)

        def noise_for(self, **kw):  # what make_private_with_epsilon does
            return pe.get_noise_multiplier(accountant=self.accountant.mechanism(), **kw)

    pe.PrivacyEngine = PrivacyEngine
    opacus.accountants, opacus.privacy_engine, opacus.PrivacyEngine = acc, pe, PrivacyEngine
    for mod in (opacus, acc, utils, pe):
        monkeypatch.setitem(sys.modules, mod.__name__, mod)
    return types.SimpleNamespace(opacus=opacus, acc=acc, utils=utils, pe=pe,
                                 create=create_accountant, gnm=get_noise_multiplier)


@pytest.fixture
def clean_registration():
    aop.unregister()
    yield
    aop.unregister()


@pytest.mark.parametrize("with_registry", [True, False])
def test_register_with_stand_in_opacus(monkeypatch, clean_registration, with_registry):
    fake = _stand_in_opacus(monkeypatch, with_registry=with_registry)
    with pytest.raises(ValueError, match="dpcert"):
        fake.pe.PrivacyEngine(accountant="dpcert")
    cls = aop.register()
    assert aop.register() is cls and aop.is_registered()  # idempotent
    engine = fake.pe.PrivacyEngine(accountant="dpcert")
    assert isinstance(engine.accountant, (_StandInIAccountant)) and isinstance(engine.accountant,
                                                                               DPCertAccountant)
    assert engine.accountant.mechanism() == "dpcert"
    assert fake.pe.PrivacyEngine(accountant="rdp").accountant.mechanism() == "rdp"  # others untouched
    assert fake.utils.get_noise_multiplier(target_epsilon=1, target_delta=1e-5, sample_rate=0.1, steps=3,
                                           accountant="rdp") == ("original", 1.0)
    if with_registry:  # nothing patched: the registry did it
        assert fake.acc.create_accountant is fake.create and fake.pe.create_accountant is fake.create
    else:
        assert fake.acc.create_accountant is not fake.create and fake.pe.create_accountant is not fake.create
    # get_noise_multiplier for "dpcert" (as make_private_with_epsilon calls it): certified calibration
    sigma = engine.noise_for(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.05, epochs=2)
    eps = PrivacyAccountant().step(sigma=sigma, sample_rate=0.05, steps=40).epsilon(1e-5)
    assert 2.0 - 0.01 <= eps <= 2.0
    aop.unregister()
    assert not aop.is_registered()
    for mod in (fake.acc, fake.utils, fake.pe):
        assert mod.create_accountant is fake.create
    assert fake.utils.get_noise_multiplier is fake.gnm and fake.pe.get_noise_multiplier is fake.gnm
    with pytest.raises(ValueError, match="dpcert"):
        fake.pe.PrivacyEngine(accountant="dpcert")
    if with_registry:
        assert "dpcert" not in fake.acc.registry._ACCOUNTANTS


def test_register_without_calibration_patches_nothing_on_a_registry(monkeypatch, clean_registration):
    """calibration=False: Opacus' own bisection runs over our certified epsilon via the history setter."""
    fake = _stand_in_opacus(monkeypatch, with_registry=True)
    aop.register(calibration=False)
    assert fake.utils.get_noise_multiplier is fake.gnm and fake.pe.get_noise_multiplier is fake.gnm
    tag, eps = fake.utils.get_noise_multiplier(target_epsilon=1, target_delta=1e-5, sample_rate=0.05,
                                               steps=40, accountant="dpcert")
    assert tag == "original"
    assert eps == PrivacyAccountant().step(sigma=1.0, sample_rate=0.05, steps=40).epsilon(1e-5)
    aop.register(calibration=True)  # switching re-registers
    assert fake.utils.get_noise_multiplier is not fake.gnm


def test_register_without_opacus_says_how_to_install(monkeypatch, clean_registration):
    for name in ("opacus", "opacus.accountants", "opacus.accountants.utils", "opacus.privacy_engine"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails as if Opacus were absent
    with pytest.raises(ImportError, match="pip install"):
        aop.register()
    assert not aop.is_registered()


def test_get_noise_multiplier_arguments():
    kw = dict(target_epsilon=2.0, target_delta=1e-5, sample_rate=0.05, accountant="dpcert")
    with pytest.raises(ValueError, match="EITHER"):
        aop.get_noise_multiplier(**kw)
    with pytest.raises(ValueError, match="EITHER"):
        aop.get_noise_multiplier(**kw, epochs=2, steps=40)
    with pytest.raises(ValueError, match="epsilon_tolerance"):
        aop.get_noise_multiplier(**kw, steps=40, epsilon_tolerance=0.0)
    with pytest.raises(ValueError, match="sample_rate"):
        aop.get_noise_multiplier(**{**kw, "sample_rate": 0.0}, steps=40)
    # epochs -> int(epochs / sample_rate) steps, as Opacus; the loose tolerance is honoured too
    s_ep = aop.get_noise_multiplier(**kw, epochs=2, epsilon_tolerance=0.5)
    eps = PrivacyAccountant().step(sigma=s_ep, sample_rate=0.05, steps=40).epsilon(1e-5)
    assert 1.5 <= eps <= 2.0
