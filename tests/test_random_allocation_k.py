"""Random allocation with k > 1 of t steps per record (``RandomAllocationGaussian``, steps_per_record).

Independent references (tests/reference_allocation.py, no library code): the exact k-out-of-t pair
P = (1/C(t,k)) sum_S N(mu 1_S, I_t) vs Q = N(0, I_t) -- integer-order Renyi moments by exact expansion
(mpmath), add-direction Renyi moments and hockey-stick divergences by quadrature with the last
coordinate in closed form (log-normal call/put prices); the same quadrature of the reduction's composed
pair checks the cited theorem itself; closed forms of the Gaussian mechanism (k = t); invariants.
"""

from __future__ import annotations

import json
import math

import mpmath as mp
import numpy as np
import pytest
from reference_allocation import add_log_moment, allocation_lr, groups_lr, hockey_stick, log_moment_exact
from scipy.optimize import brentq
from scipy.stats import norm

from accountant import PrivacyAccountant
from accountant.calibration import calibrate_sigma
from accountant.cli import main
from accountant.opacus_adapter import DPCertAccountant
from mechanisms.random_allocation import BallsInBinsGaussian, RandomAllocationGaussian


def _gauss_delta(mu: float, eps: float) -> float:
    return float(norm.cdf(-eps / mu + mu / 2) - math.exp(eps) * norm.cdf(-eps / mu - mu / 2))


def _gauss_eps(mu: float, delta: float) -> float:
    return brentq(lambda e: _gauss_delta(mu, e) - delta, 0.0, 500.0, xtol=1e-14)


def _sizes(t: int, k: int) -> list[int]:
    m, r = divmod(t, k)
    return [m] * (k - r) + [m + 1] * r


def _cert(sigma, t, k, epochs=1, **q):
    acct = PrivacyAccountant()
    acct.compose(RandomAllocationGaussian(sigma=sigma, num_steps=t, steps_per_record=k), epochs)
    return acct.certificate(**q)


# ------------------------------------------------------------------------------------------ brute force
@pytest.mark.parametrize("t,k", [(3, 2), (4, 2), (4, 3)])
@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_remove_rdp_above_exact_integer_orders(t, k, sigma):
    """D_a(P || Q) of the exact k-of-t pair (expansion of e_k^a over count vectors, mpmath) <= the
    library's remove curve, a = 2..6."""
    mp.mp.dps = 30
    m = RandomAllocationGaussian(sigma=sigma, num_steps=t, steps_per_record=k)
    for a in range(2, 7):
        exact = float(log_moment_exact(t, k, 1.0 / sigma, a)) / (a - 1)
        got = float(m.remove_rdp(np.array([float(a)]))[0])
        assert got >= exact * (1 + 1e-12), (a, exact, got)


def test_add_rdp_above_exact_cheap():
    """D_2(Q || P), t = 3, k = 2, sigma = 1: 3-D trapezoid rule of E_Q[L^-1] (converged) <= library."""
    v, err = add_log_moment(allocation_lr(3, 2), 3, 1.0, 1.0, 2)
    m = RandomAllocationGaussian(sigma=1.0, num_steps=3, steps_per_record=2)
    got = float(m.add_rdp(np.array([2.0]))[0])
    assert err < 1e-9 and got >= v + err


def test_hockey_stick_t3_k2_cheap():
    """t = 3, k = 2, sigma = 1, eps = 1, both directions: exact delta of the k-of-t pair <= delta of the
    reduction's composed pair (the theorem) <= certified delta; certified lower bound <= exact."""
    exact = []
    for d in ("remove", "add"):
        ex, e1 = hockey_stick(allocation_lr(3, 2), 3, 1.0, 1.0, d, h0=0.2, hmin=0.05, tol=1e-7)
        red, e2 = hockey_stick(groups_lr(_sizes(3, 2)), 3, 1.0, 1.0, d, h0=0.2, hmin=0.05, tol=1e-7)
        assert ex + 10 * e1 + 1e-9 < red - 10 * e2 - 1e-9
        exact.append(ex)
    c = _cert(1.0, 3, 2, epsilon=1.0)
    assert c.delta >= max(exact)
    assert c.lower_bound <= min(exact)


@pytest.mark.slow
@pytest.mark.parametrize("t,k", [(5, 2), (5, 3), (5, 4)])
@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_remove_rdp_above_exact_t5(t, k, sigma):
    mp.mp.dps = 30
    m = RandomAllocationGaussian(sigma=sigma, num_steps=t, steps_per_record=k)
    for a in range(2, 9):
        exact = float(log_moment_exact(t, k, 1.0 / sigma, a)) / (a - 1)
        assert float(m.remove_rdp(np.array([float(a)]))[0]) >= exact * (1 + 1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_add_rdp_above_exact_t3(sigma):
    m = RandomAllocationGaussian(sigma=sigma, num_steps=3, steps_per_record=2)
    for a in (1.5, 2.0, 3.0, 5.0):
        v, err = add_log_moment(allocation_lr(3, 2), 3, 1.0 / sigma, a - 1.0, 2)
        assert err < 1e-8
        assert float(m.add_rdp(np.array([a]))[0]) >= (v + err) / (a - 1.0)


@pytest.mark.slow
@pytest.mark.parametrize("t,k,h0,hmin", [(3, 2, 0.2, 0.02), (4, 2, 0.4, 0.2), (4, 3, 0.4, 0.2)])
@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_hockey_stick_theorem_and_certificate(t, k, h0, hmin, sigma):
    """Both directions, eps in {0.25, 1, 3}: exact k-of-t delta <= reduction-pair delta (Feldman &
    Shenfeld's reduction, checked) and <= certified delta; the certified lower bound <= exact delta."""
    mu = 1.0 / sigma
    for eps in (0.25, 1.0, 3.0):
        exact = []
        for d in ("remove", "add"):
            ex, e1 = hockey_stick(allocation_lr(t, k), t, mu, eps, d, h0=h0, hmin=hmin)
            red, e2 = hockey_stick(groups_lr(_sizes(t, k)), t, mu, eps, d, h0=h0, hmin=hmin)
            assert ex + 10 * e1 <= red - 10 * e2, (d, eps, ex, red)
            exact.append(ex)
        c = _cert(sigma, t, k, epsilon=eps)
        assert c.delta >= max(exact) and c.lower_bound <= max(exact)


# ------------------------------------------------------------------------------------------ limits
@pytest.mark.parametrize("t", [1, 2, 5])
def test_k_equals_t_is_the_kfold_gaussian(t):
    """k = t: every step uses the record, the pair is exactly N(mu sqrt(t) ...): RDP alpha t mu^2 / 2 and
    the certificate brackets the closed-form Gaussian epsilon (3 epochs: mu sqrt(3 t))."""
    sigma = 1.5
    m = RandomAllocationGaussian(sigma=sigma, num_steps=t, steps_per_record=t)
    al = np.array([1.25, 2.0, 10.0, 100.0])
    # (rounded up: a few ulps above the float formula, never below it)
    assert np.all(m.rdp(al) >= al * (t / sigma**2) / 2.0)
    np.testing.assert_allclose(m.rdp(al), al * (t / sigma**2) / 2.0, rtol=2e-15, atol=0)
    c = _cert(sigma, t, t, epochs=3, delta=1e-6)
    ref = _gauss_eps(math.sqrt(3 * t) / sigma, 1e-6)
    assert c.lower_bound <= ref <= c.epsilon <= ref * (1 + 1e-6)


@pytest.mark.parametrize("t", [1, 3, 10, 100])
def test_k1_is_balls_in_bins(t):
    """k = 1 gives exactly the one-step curve and lower-bound pair; step(steps_per_record=1) records the
    same ledger as the default."""
    a = RandomAllocationGaussian(sigma=0.9, num_steps=t, steps_per_record=1)
    b = BallsInBinsGaussian(sigma=0.9, num_steps=t)
    al = np.array([1.5, 2.0, 3.5, 17.0, 300.0])
    assert np.array_equal(a.rdp(al), b.rdp(al))
    assert a.attained_lower_pair() == b.attained_lower_pair()
    x, y = PrivacyAccountant(), PrivacyAccountant()
    x.step(sigma=0.9, batch_size=10, dataset_size=10 * t, sampling="balls_in_bins", steps=3 * t)
    y.step(sigma=0.9, batch_size=10, dataset_size=10 * t, sampling="balls_in_bins", steps=3 * t,
           steps_per_record=1)
    assert x.ledger == y.ledger


def test_between_one_step_and_no_amplification():
    """Sanity of the bound: below the un-amplified k-fold Gaussian alpha k mu^2 / 2 and not below one
    1-of-t allocation's curve (k groups of at most t steps each, each group's curve >= the t-step one)."""
    al = np.array([1.5, 2.0, 4.0, 16.0])
    for t, k in [(20, 2), (10, 3)]:
        r = RandomAllocationGaussian(sigma=1.0, num_steps=t, steps_per_record=k).rdp(al)
        assert np.all(r <= al * k / 2.0)
        assert np.all(r >= BallsInBinsGaussian(sigma=1.0, num_steps=t).rdp(al) - 1e-12)


# ------------------------------------------------------------------------------------------ monotonicity
def test_monotone_in_epochs_sigma_and_t():
    e = [_cert(1.0, 20, 2, epochs=n, delta=1e-5).epsilon for n in (1, 5, 20)]
    assert all(a < b for a, b in zip(e, e[1:], strict=False))
    s = [_cert(sig, 20, 2, epochs=5, delta=1e-5).epsilon for sig in (0.7, 3.0)]
    assert s[0] > s[1]
    al = np.array([1.5, 2.0, 5.0, 40.0])
    r = [RandomAllocationGaussian(sigma=x, num_steps=20, steps_per_record=2).rdp(al) for x in (0.7, 1, 1.5)]
    assert np.all(r[0] > r[1]) and np.all(r[1] > r[2])
    prev = None
    for t in (4, 8, 9, 12, 40):
        r = RandomAllocationGaussian(sigma=1.0, num_steps=t, steps_per_record=4).rdp(al)
        if prev is not None:
            assert np.all(r <= prev * (1 + 1e-12))
        prev = r


# ------------------------------------------------------------------------------------------ API
def test_step_epochs_state_and_default_t():
    """t defaults to ceil(k n / b) (mean batch size b); epochs are charged when they start; the JSON
    state round-trips."""
    acct = PrivacyAccountant()
    acct.step(sigma=1.0, batch_size=20, dataset_size=100, sampling="balls_in_bins", steps=25,
              steps_per_record=2)
    ((m, n),) = acct.ledger.items()
    assert m == RandomAllocationGaussian(sigma=1.0, num_steps=10, steps_per_record=2) and n == 3
    c = acct.certificate(delta=1e-5)
    back = PrivacyAccountant.from_state(json.loads(json.dumps(acct.to_state())))
    assert back.ledger == acct.ledger
    assert back.certificate(delta=1e-5).epsilon == c.epsilon


@pytest.mark.parametrize("kw,exc,text", [
    ({"steps_per_record": 0}, ValueError, "steps_per_record"),
    ({"steps_per_record": -2}, ValueError, "steps_per_record"),
    ({"steps_per_record": 2.5}, TypeError, "steps_per_record"),
    ({"steps_per_record": True}, TypeError, "steps_per_record"),
    ({"steps_per_record": "2"}, TypeError, "steps_per_record"),
    ({"steps_per_record": 11, "steps_per_epoch": 10}, ValueError, "steps_per_record"),
    ({"steps_per_record": 2, "sampling": "shuffle"}, ValueError, "balls_in_bins"),
    ({"steps_per_record": 2, "sampling": "fixed_size"}, ValueError, "balls_in_bins"),
])
def test_bad_inputs(kw, exc, text):
    args = dict(sigma=1.0, batch_size=10, dataset_size=100, sampling="balls_in_bins", steps=5)
    args.update(kw)
    with pytest.raises(exc, match=text):
        PrivacyAccountant().step(**args)


def test_bad_inputs_mechanism_and_poisson():
    with pytest.raises(ValueError, match="steps_per_record"):
        RandomAllocationGaussian(sigma=1.0, num_steps=3, steps_per_record=4)
    with pytest.raises(ValueError, match="steps_per_record"):
        RandomAllocationGaussian(sigma=1.0, num_steps=3, steps_per_record=0)
    with pytest.raises(TypeError, match="steps_per_record"):
        RandomAllocationGaussian(sigma=1.0, num_steps=3, steps_per_record=1.5)
    with pytest.raises(ValueError, match="balls_in_bins"):
        PrivacyAccountant().step(sigma=1.0, sample_rate=0.1, steps=3, steps_per_record=2)
    with pytest.raises(ValueError, match="replace_one|add_remove"):
        PrivacyAccountant(relation="replace_one").step(sigma=1.0, batch_size=10, dataset_size=100,
                                                        sampling="balls_in_bins", steps_per_record=2)
    with pytest.raises(ValueError, match="balls_in_bins"):
        calibrate_sigma(1.0, 1e-5, steps=10, batch_size=10, dataset_size=100, sampling="shuffle",
                        steps_per_record=2)


def test_cli_and_opacus_adapter(capsys):
    assert main(["dpsgd", "--sigma", "1.5", "--batch-size", "20", "--dataset-size", "100", "--epochs", "3",
                 "--sampling", "balls_in_bins", "--steps-per-record", "2", "--delta", "1e-5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["steps"] == 30  # t = ceil(2 * 100 / 20) = 10 steps per epoch
    ref = _cert(1.5, 10, 2, epochs=3, delta=1e-5)
    assert doc["epsilon"] == ref.epsilon
    assert main(["dpsgd", "--sigma", "1.5", "--batch-size", "20", "--dataset-size", "100", "--steps", "3",
                 "--sampling", "shuffle", "--steps-per-record", "2", "--delta", "1e-5"]) != 0
    capsys.readouterr()
    acct = DPCertAccountant(sampling="balls_in_bins", dataset_size=100, steps_per_record=2)
    acct.history = [(1.5, 0.1, 30)]  # Opacus: sample_rate = 1 / len(data_loader) = 1 / 10
    assert acct.accountant.ledger == PrivacyAccountant().compose(
        RandomAllocationGaussian(sigma=1.5, num_steps=10, steps_per_record=2), 3).ledger
    with pytest.raises(ValueError, match="balls_in_bins"):
        DPCertAccountant(sampling="shuffle", dataset_size=100, steps_per_record=2)


def test_calibrate_sigma_k_equals_t():
    """k = t (each record in every step of the epoch): the calibrated sigma is that of the 4 t-fold
    Gaussian mechanism (closed form, scipy brentq), within the calibration tolerance."""
    kw = dict(batch_size=100, dataset_size=100, sampling="balls_in_bins", epochs=4, steps_per_epoch=3)
    s = float(calibrate_sigma(2.0, 1e-5, steps_per_record=3, **kw))
    s_gauss = brentq(lambda x: _gauss_eps(math.sqrt(12) / x, 1e-5) - 2.0, 0.5, 50.0)
    assert s_gauss * (1 - 1e-4) <= s <= s_gauss * (1 + 2e-4)


@pytest.mark.slow
def test_calibrate_sigma_k():
    """The calibrated sigma certifies the target; k = 2 needs more noise than k = 1 at the same t and
    epochs and no more than the un-amplified 2-fold Gaussian (closed form)."""
    kw = dict(batch_size=20, dataset_size=100, sampling="balls_in_bins", epochs=4, steps_per_epoch=10)
    s2 = calibrate_sigma(2.0, 1e-5, steps_per_record=2, **kw)
    s1 = calibrate_sigma(2.0, 1e-5, **kw)
    assert _cert(float(s2), 10, 2, epochs=4, delta=1e-5).epsilon <= 2.0
    assert float(s1) < float(s2)
    # 4 epochs x 2 Gaussian uses: mu = sqrt(8) / sigma; the sigma reaching eps = 2 exactly
    s_gauss = brentq(lambda s: _gauss_eps(math.sqrt(8) / s, 1e-5) - 2.0, 0.5, 50.0)
    assert float(s2) <= s_gauss * (1 + 1e-3)


def test_state_loads_in_a_fresh_process(tmp_path):
    """A saved ledger of balls-in-bins epochs (k = 1 and k = 2) loads in a new interpreter, where nothing
    imported mechanisms.random_allocation before the state is read (registration at package import)."""
    import subprocess
    import sys
    from pathlib import Path

    acct = PrivacyAccountant()
    acct.step(sigma=1.0, batch_size=20, dataset_size=100, sampling="balls_in_bins", steps=12,
              steps_per_record=2)
    acct.step(sigma=1.0, batch_size=20, dataset_size=100, sampling="balls_in_bins", steps=7)
    path = tmp_path / "state.json"
    acct.save(path)
    root = str(Path(__file__).resolve().parent.parent)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from accountant import PrivacyAccountant; "
            "a = PrivacyAccountant.load(sys.argv[2]); print(sorted(m.name for m, _ in a.ledger.items()))")
    out = subprocess.run([sys.executable, "-c", code, root, str(path)], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['balls_in_bins_gaussian', 'random_allocation_gaussian']"


def test_audit_claim_with_steps_per_record():
    """A claim whose loader places every record in 2 of the epoch's batches is audited against the k-of-t
    bound: same certificate as the accountant's; 'epochs' count ceil(k n / b) steps each."""
    from accountant.audit import audit_claim

    claim = {"id": "x", "citation": "c", "source": "s", "notes": "n", "epsilon": 100.0, "delta": 1e-5,
             "dpsgd": {"noise_multiplier": 1.5, "batch_size": 20, "dataset_size": 100, "epochs": 3,
                       "sampling": "balls_in_bins", "steps_per_record": 2}}
    res = audit_claim(claim)
    assert res.verdict == "consistent"
    assert res.upper == _cert(1.5, 10, 2, epochs=3, delta=1e-5).epsilon
    bad = json.loads(json.dumps(claim))
    bad["dpsgd"]["sampling"] = "shuffle"
    assert audit_claim(bad).verdict in ("error", "invalid", "unsupported")
