"""With the real Opacus: PrivacyEngine(accountant="dpcert"), make_private_with_epsilon, get_noise_multiplier,
checkpoints, and the end-to-end example (examples/opacus_dpsgd.py).

Skipped only when Opacus (and torch) are absent; run with
``pip install torch opacus && python -m pytest tests/test_opacus.py``.

References (independent of dpcert): Opacus' RDP accountant is an upper bound that is looser than the
tight privacy profile of the Poisson-subsampled Gaussian, so dpcert's certified epsilon must be below
it; Opacus' PRV accountant is a peer numerical method (upper estimate with its default ``eps_error``
0.01), so its value must lie within PRV_TOL of dpcert's certified bracket [lower, upper].  A PRV value
below dpcert's certified lower bound is reported as a warning (dpcert's bound is not loosened for it).
"""

from __future__ import annotations

import json
import pathlib
import pickle
import runpy
import warnings

import pytest

pytest.importorskip("torch")
opacus = pytest.importorskip("opacus")

import opacus.accountants as oa  # noqa: E402
import opacus.accountants.utils as ou  # noqa: E402
import opacus.privacy_engine as ope  # noqa: E402
from opacus import PrivacyEngine  # noqa: E402
from opacus.accountants import PRVAccountant, RDPAccountant  # noqa: E402

import accountant.opacus as aop  # noqa: E402
from accountant import PrivacyAccountant  # noqa: E402
from accountant.opacus_adapter import DPCertAccountant  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
DELTA = 1e-5
PRV_TOL = 0.02  # 2 x Opacus' default PRV eps_error (0.01), absolute in epsilon


def _engine(mechanism: str) -> PrivacyEngine:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Secure RNG turned off"
        return PrivacyEngine(accountant=mechanism)


def _check_against_peers(history, dpcert: float, lower: float, label: str) -> tuple[float, float]:
    rdp, prv = RDPAccountant(), PRVAccountant()
    rdp.history, prv.history = list(history), list(history)
    e_rdp, e_prv = rdp.get_epsilon(DELTA), prv.get_epsilon(DELTA)
    assert lower <= dpcert < e_rdp, (label, lower, dpcert, e_rdp)
    assert lower - PRV_TOL <= e_prv <= dpcert + PRV_TOL, (label, lower, dpcert, e_prv)
    if e_prv < lower:
        warnings.warn(f"{label}: Opacus PRV epsilon {e_prv!r} is below dpcert's certified lower bound "
                      f"{lower!r}", stacklevel=2)
    return e_rdp, e_prv


@pytest.fixture
def registered():
    aop.unregister()
    aop.register()
    yield
    aop.unregister()


# --------------------------------------------------------------------------- the example, end to end
def test_example_runs_end_to_end_and_sits_between_peers(capsys):
    """``python examples/opacus_dpsgd.py --json``, run in this process (torch is already imported)."""
    script = runpy.run_path(str(ROOT / "examples" / "opacus_dpsgd.py"), run_name="opacus_dpsgd_example")
    script["main"](["--json"])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = res["epochs"]
    assert [r["epoch"] for r in rows] == [1, 2]
    assert [r["steps"] for r in rows] == [20, 40]  # sample rate 1/20: 20 Poisson steps per epoch
    assert res["sample_rate"] == pytest.approx(0.05)
    hist = [tuple(h) for h in res["history"]]
    assert hist == [(res["noise_multiplier"], res["sample_rate"], 40)]
    for r in rows:
        h = [(res["noise_multiplier"], res["sample_rate"], r["steps"])]
        e_rdp, e_prv = _check_against_peers(h, r["dpcert"], r["dpcert_lower"], f"epoch {r['epoch']}")
        assert r["rdp"] == pytest.approx(e_rdp) and r["prv"] == pytest.approx(e_prv, abs=1e-6)
    assert rows[0]["dpcert"] < rows[1]["dpcert"]
    # make_private_with_epsilon(target 2, 2 epochs, default epsilon_tolerance 0.01), certified
    assert 2.0 - 0.01 <= rows[1]["dpcert"] <= 2.0
    assert rows[1]["accuracy"] > 0.7  # it did train


# --------------------------------------------------------------------------- PrivacyEngine integration
def test_privacy_engine_uses_dpcert(registered):
    engine = _engine("dpcert")
    acct = engine.accountant
    assert isinstance(acct, oa.IAccountant) and isinstance(acct, DPCertAccountant)
    assert acct.mechanism() == "dpcert" and len(acct) == 0 and engine.get_epsilon(DELTA) == 0.0
    hook = acct.get_optimizer_hook_fn(sample_rate=0.01)

    class Optim:  # what the hook reads from a DPOptimizer
        noise_multiplier, accumulated_iterations = 0.9, 1

    for _ in range(300):
        hook(Optim())
    assert acct.history == [(0.9, 0.01, 300)]
    cert = acct.certificate(DELTA)
    assert engine.get_epsilon(DELTA) == cert.epsilon
    _check_against_peers(acct.history, cert.epsilon, cert.lower_bound, "hook")
    assert _engine("prv").accountant.mechanism() == "prv"  # the built-in ones are untouched
    clone = pickle.loads(pickle.dumps(acct))  # the lazily built class pickles (module __getattr__)
    assert type(clone) is type(acct) and clone.history == acct.history


@pytest.mark.parametrize("sigma, q, steps", [(0.8, 0.01, 1000), (2.0, 0.2, 100), (1.1, 0.004, 15000)])
def test_dpcert_between_its_lower_bound_and_opacus_rdp(sigma, q, steps):
    acct = DPCertAccountant()
    acct.history = [(sigma, q, steps)]
    cert = acct.certificate(DELTA)
    _check_against_peers(acct.history, cert.epsilon, cert.lower_bound, f"sigma={sigma} q={q} T={steps}")


def test_checkpoint_round_trip_through_privacy_engine(registered, tmp_path):
    import torch

    module = torch.nn.Linear(3, 2)
    engine = _engine("dpcert")
    engine.accountant.history = [(1.0, 0.02, 50), (1.5, 0.02, 10)]
    engine.save_checkpoint(path=tmp_path / "ck.pt", module=module)
    fresh = _engine("dpcert")
    fresh.load_checkpoint(path=tmp_path / "ck.pt", module=torch.nn.Linear(3, 2))
    assert fresh.accountant.history == engine.accountant.history
    assert fresh.get_epsilon(DELTA) == engine.get_epsilon(DELTA)
    # Opacus' semantics: another mechanism's checkpoint is refused (and the history is kept)
    other = _engine("rdp")
    other.accountant.history = [(1.0, 0.02, 5)]
    other.save_checkpoint(path=tmp_path / "rdp.pt", module=module)
    with pytest.raises(ValueError, match="'rdp'"):
        fresh.load_checkpoint(path=tmp_path / "rdp.pt", module=torch.nn.Linear(3, 2))
    assert fresh.accountant.history == engine.accountant.history


# --------------------------------------------------------------------------- noise calibration
def _certified(sigma: float, q: float, steps: int) -> float:
    return PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=steps).epsilon(DELTA)


@pytest.mark.filterwarnings("ignore:Optimal order is the largest alpha")
def test_get_noise_multiplier_is_certified_and_beats_rdp(registered):
    q, epochs, target = 0.02, 1, 2.0
    steps = int(epochs / q)
    sigma = ou.get_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=q, epochs=epochs,
                                    accountant="dpcert")
    assert ope.get_noise_multiplier is ou.get_noise_multiplier  # make_private_with_epsilon sees the same
    eps = _certified(sigma, q, steps)
    assert target - 0.01 <= eps <= target  # Opacus' epsilon_tolerance semantics, on the certified bound
    sigma_rdp = ou.get_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=q,
                                        epochs=epochs, accountant="rdp")
    assert sigma <= sigma_rdp * (1 + 1e-3)  # tighter accounting needs no more noise
    # (a looser epsilon_tolerance and the argument checks: tests/test_opacus_adapter.py)


def test_opacus_own_bisection_over_dpcert_without_patching():
    """register(calibration=False): only the registry entry; Opacus' bisection still gives a sigma whose
    certified epsilon is within its tolerance below the target."""
    aop.unregister()
    original = ou.get_noise_multiplier
    try:
        aop.register(calibration=False)
        assert ou.get_noise_multiplier is original and ope.get_noise_multiplier is original
        q, steps, target = 0.05, 40, 2.0
        sigma = ou.get_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=q, steps=steps,
                                        accountant="dpcert")
        assert target - 0.01 <= _certified(sigma, q, steps) <= target
        best = aop.get_noise_multiplier(target_epsilon=target, target_delta=DELTA, sample_rate=q,
                                        steps=steps, accountant="dpcert")
        assert best <= sigma * (1 + 1e-3)
    finally:
        aop.unregister()


def test_register_is_reversible_on_real_opacus():
    aop.unregister()
    before = (oa.create_accountant, ou.create_accountant, ope.create_accountant, ou.get_noise_multiplier,
              ope.get_noise_multiplier)
    aop.register()
    aop.register()
    assert aop.is_registered()
    aop.unregister()
    assert not aop.is_registered()
    after = (oa.create_accountant, ou.create_accountant, ope.create_accountant, ou.get_noise_multiplier,
             ope.get_noise_multiplier)
    assert all(a is b for a, b in zip(before, after, strict=True))
    with pytest.raises(ValueError, match="dpcert"):
        _engine("dpcert")


def test_pre_registry_opacus_path_on_real_opacus(monkeypatch):
    """Opacus 1.4-1.5 had no register_accountant: hide it and check the create_accountant wrapper path."""
    aop.unregister()
    monkeypatch.delattr(oa, "register_accountant")
    originals = (oa.create_accountant, ou.create_accountant, ope.create_accountant)
    try:
        aop.register()
        assert ope.create_accountant is not originals[2]
        assert isinstance(_engine("dpcert").accountant, DPCertAccountant)
        assert _engine("rdp").accountant.mechanism() == "rdp"
    finally:
        aop.unregister()
    assert (oa.create_accountant, ou.create_accountant, ope.create_accountant) == originals
    with pytest.raises(ValueError, match="dpcert"):
        _engine("dpcert")
