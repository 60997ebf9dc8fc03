"""Individual Renyi filters and Ind-KNN (Feldman & Zrnic 2021; Zhu et al. 2023;
docs/derivations/individual-filter.md).

The budget invariant is checked by re-deriving every charge in the test from the released
quantities and the thesis' formulas (Lemma 5.3.1 / T10), independently of the filter's own state.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from accountant.individual_filter import (
    IndividualRenyiFilter,
    IndKNNFilter,
    budget_for_epsilon,
    default_sigma1,
    epsilon_for_budget,
    gaussian_individual_rdp,
)
from conversions.gaussian_dp import gaussian_epsilon


# --------------------------------------------------------------------------- Ind-KNN budget invariant
def _adversarial_run(n, steps, seed, budget=0.05, sigma2=0.05, tau=0.8, k_min=1.0):
    rng = np.random.default_rng(seed)
    sigma1 = default_sigma1(steps, budget)
    f = IndKNNFilter(n, budget, sigma1, sigma2, tau, k_min=k_min)
    c1 = 1.0 / (2.0 * sigma1**2)
    charged = np.zeros(n)
    never = rng.random(n) < 0.05  # records whose kernel weight is always below tau
    for t in range(steps):
        ids = rng.choice(n, size=int(rng.integers(n // 4, n)), replace=False)
        kap = np.where(rng.random(ids.size) < 0.7, 1.0 - rng.random(ids.size) * 1e-3, rng.random(ids.size))
        kap[never[ids]] = np.minimum(kap[never[ids]], tau * 0.999)
        # adversarial count noise: sometimes hugely negative so that K_t is clamped to k_min
        noise = -1e9 if t % 7 == 0 else float(rng.normal(0, sigma1))
        st = f.step(ids, kap, count_noise=noise)
        assert st.count >= k_min
        # independent recomputation of the selection and of every charge
        sel = set(st.selected.tolist())
        assert all(kap[j] >= tau for j, i in enumerate(ids) if i in sel)
        charged[st.selected] += c1 + st.weights**2 / (2 * sigma2**2 * st.count)
        w_kappa = dict(zip(ids.tolist(), kap.tolist(), strict=True))
        assert all(w <= w_kappa[i] + 1e-15 for i, w in zip(st.selected.tolist(), st.weights.tolist(),
                                                             strict=True))
    return f, charged, never, budget


def test_indknn_never_exceeds_budget_1e5_records():
    f, charged, never, budget = _adversarial_run(100_000, 60, seed=1)
    assert charged.max() <= budget * (1 + 1e-12)
    assert f.remaining().min() >= -1e-12 * budget
    assert np.all(charged[never] == 0.0)  # unselected records are never charged
    assert (charged > 0.9 * budget).sum() > 1000  # the run really exhausted budgets
    np.testing.assert_allclose(budget - f.remaining(), charged, rtol=1e-9, atol=1e-15)


def test_indknn_mutations_are_caught():
    """docs/derivations/individual-filter.md section 2: the printed Algorithm 5 line 12 and the 'z > 0'
    active rule overspend."""
    rng = np.random.default_rng(3)
    n, steps, budget, sigma2, tau = 3000, 600, 0.05, 0.6, 0.8
    sigma1 = default_sigma1(steps, budget)
    c1 = 1 / (2 * sigma1**2)
    feats = rng.normal(size=(n, 8))
    over = {}
    for rule in ("alg5_line12", "z_positive"):
        z = np.full(n, budget)
        spent = np.zeros(n)
        for _ in range(steps):
            q = rng.normal(size=8)
            kap = np.exp(-np.sum((feats - q) ** 2, axis=1) / 20.0)
            active = z > 0 if rule == "z_positive" else z >= c1
            sel = np.flatnonzero(active & (kap >= tau * 0.3))
            k = max(sel.size + rng.normal(0, sigma1), 30.0)
            z[sel] -= c1
            spent[sel] += c1
            if rule == "alg5_line12":
                g = np.minimum(kap[sel] ** 2 / (2 * sigma2**2 * k),
                               sigma2 * np.sqrt(2 * k * np.maximum(z[sel], 0)))
                w = kap[sel]  # unclipped contribution (line 15)
            else:
                w = np.minimum(kap[sel], sigma2 * np.sqrt(2 * k * np.maximum(z[sel], 0)))
                g = w**2 / (2 * sigma2**2 * k)
            z[sel] -= g
            spent[sel] += w**2 / (2 * sigma2**2 * k)  # the true individual RDP of the release
        over[rule] = spent.max() / budget
    assert over["alg5_line12"] > 1.2
    assert over["z_positive"] > 1.0


def test_unselected_record_has_no_influence():
    rng = np.random.default_rng(7)
    n, c = 500, 4
    labels = rng.integers(0, c, n)
    feats = rng.normal(size=(n, 5))
    queries = rng.normal(size=(40, 5))

    def run(extra: bool):
        m = n + 1 if extra else n
        f = IndKNNFilter(m, 0.08, 10.0, 0.5, 0.6)
        lab = np.append(labels, 0) if extra else labels
        out_rng = np.random.default_rng(123)
        res = []
        for q in queries:
            kap = np.exp(-np.sum((feats - q) ** 2, axis=1) / 4.0)
            if extra:
                kap = np.append(kap, 0.1)  # below tau for every query
            ids = np.arange(m)
            lbl, st = f.predict(ids, kap, lab, c, out_rng)
            res.append((lbl, st.count))
        return res, f

    a, _ = run(False)
    b, fb = run(True)
    assert a == b  # bit-identical outputs
    assert fb.remaining([n])[0] == 0.08


# --------------------------------------------------------------------------- generic filter
def test_generic_linear_filter_exact_decisions_1e5():
    rng = np.random.default_rng(11)
    n, budget = 100_000, 0.3
    f = IndividualRenyiFilter(n, budget)
    ledger = np.zeros(n)
    for _ in range(40):
        ids = rng.choice(n, size=n // 2, replace=False)
        c = rng.exponential(0.02, ids.size)
        ok = f.admit(ids, c)
        expect = ledger[ids] + c <= budget * (1 - 1e-12)
        border = np.abs(ledger[ids] + c - budget) <= 1e-12 * budget
        assert np.all(ok[~border] == expect[~border])
        ledger[ids[ok]] += c[ok]
        assert ledger.max() <= budget * (1 + 1e-12)
    np.testing.assert_allclose(f.spent(), ledger, rtol=1e-12, atol=1e-18)
    assert (ledger > 0.25).sum() > 1000


def test_generic_grid_filter_gaussian_losses():
    rng = np.random.default_rng(12)
    n, sigma = 20_000, 3.0
    orders = np.array([1.5, 2.0, 4.0, 8.0, 16.0, 64.0])
    budget = 0.05 * orders + 0.01 * orders**0.5  # any non-decreasing budget curve
    f = IndividualRenyiFilter(n, budget, orders=orders)
    ledger = np.zeros((n, orders.size))
    for _ in range(80):
        ids = rng.choice(n, size=n // 3, replace=False)
        norms = rng.uniform(0, 1, ids.size)
        ok = f.admit_curve(ids, lambda a, s: gaussian_individual_rdp(a, s, sigma), norms)
        loss = norms[:, None] ** 2 * orders[None, :] / (2 * sigma**2)  # Lemma 5.2.3, written out here
        ledger[ids[ok]] += loss[ok]
        assert np.all(ledger <= budget[None, :] * (1 + 1e-12))
        refused = ids[~ok]
        assert np.all(np.any(ledger[refused] + loss[~ok] > budget[None, :] * (1 - 1e-12), axis=1))
    # the certificate is at least the conversion at the grid orders (RDP >= budget curve there)
    cert = f.certificate(1e-5, rule="classic")
    ref = min(b + math.log(1e5) / (a - 1) for a, b in zip(orders, budget, strict=True))
    assert cert.epsilon == pytest.approx(ref, rel=1e-9)
    assert cert.method == "rdp" and cert.relation == "add_remove"


def test_duplicate_detection_survives_stamp_wraparound():
    f = IndividualRenyiFilter(5, 1e6)
    for _ in range(600):  # more steps than the 255 uint8 stamp generations
        assert f.admit([0, 1, 3], [1.0, 1.0, 1.0]).all()
    with pytest.raises(ValueError, match="twice"):
        f.admit([2, 4, 2], [1.0, 1.0, 1.0])
    assert f.admit([2], [1.0]).all() and f.spent()[2] == pytest.approx(1.0)
    np.testing.assert_allclose(f.spent(), [600, 600, 1, 600, 0], rtol=1e-12)


def test_linear_mode_curves_and_checks():
    f = IndividualRenyiFilter(10, 0.1)
    c = f.individual_losses(lambda a, s: gaussian_individual_rdp(a, s, 2.0), np.array([1.0, 0.5]))
    np.testing.assert_allclose(c, [1 / 8, 0.25 / 8])
    with pytest.raises(ValueError, match="linear"):
        f.individual_losses(lambda a, s: np.multiply.outer(s, a**2), np.array([1.0]))
    np.testing.assert_allclose(f.rdp([2.0, 10.0]), [0.2, 1.0])


# --------------------------------------------------------------------------- certificates
def test_certificate_depends_only_on_budget():
    b = budget_for_epsilon(1.0, 1e-5)
    short, long = IndKNNFilter(1000, b, 10.0, 0.5, 0.5), IndKNNFilter(1000, b, 10.0, 0.5, 0.5)
    rng = np.random.default_rng(0)
    for _ in range(10):
        short.step(np.arange(1000), rng.random(1000), rng)
    for _ in range(2000):
        long.step(np.arange(1000), rng.random(1000), rng)
    assert short.certificate(1e-5) == long.certificate(1e-5)
    # classic conversion of (alpha, alpha B): B + 2 sqrt(B log(1/delta)) at alpha* = 1 + sqrt(log(1/d)/B)
    cert = short.certificate(1e-5, rule="classic")
    assert cert.epsilon == pytest.approx(b + 2 * math.sqrt(b * math.log(1e5)), rel=1e-9)
    assert cert.epsilon <= 1.0 * (1 + 1e-11)
    assert cert.details["alpha"] == pytest.approx(1 + math.sqrt(math.log(1e5) / b), rel=1e-4)


@pytest.mark.parametrize("eps,delta,steps,b_std,sigma1,b_imp", [
    (0.5, 1e-5, 1000, 0.00531, 177.10, 0.00851),
    (1.0, 1e-5, 1000, 0.02082, 89.47, 0.03056),
    (2.0, 1e-5, 1000, 0.08005, 45.63, 0.10826),
    (2.0, 1e-5, 2000, 0.08005, 64.53, 0.10826),
    (1.0, 1e-6, 1000, 0.01747, 97.68, 0.02436),
])
def test_budget_table_and_round_trip(eps, delta, steps, b_std, sigma1, b_imp):
    """Reference values of the budget <-> (eps, delta) conversions (docs/derivations/individual-filter.md
    section 3)."""
    b = budget_for_epsilon(eps, delta)
    assert b == pytest.approx(b_std, abs=6e-6)
    assert default_sigma1(steps, b) == pytest.approx(sigma1, abs=6e-3)
    bi = budget_for_epsilon(eps, delta, rule="improved")
    assert bi == pytest.approx(b_imp, abs=6e-6)
    # round trips: the closed-form inverse (written out here) is exact; the returned budget is at
    # most that (rounded to the safe side) and certifies at most the target epsilon
    ld = math.log(1 / delta)
    b_exact = (math.sqrt(ld + eps) - math.sqrt(ld)) ** 2
    assert b_exact + 2 * math.sqrt(b_exact * ld) == pytest.approx(eps, rel=1e-12)
    assert b_exact * (1 - 1e-8) <= b <= b_exact
    assert epsilon_for_budget(b, delta) <= eps
    e_imp = epsilon_for_budget(bi, delta, "improved")
    assert eps - 1e-8 < e_imp <= eps


def test_gdp_shortcut_is_not_used():
    """docs/derivations/individual-filter.md section 3: rho-zCDP does not imply the Gaussian profile.
    Randomized response with
    eps0 = 1 is 1/2-zCDP yet delta(0) = 0.4621 > 0.3829 (Gaussian mu = 1); the filter certifies by RDP."""
    e0 = mp.mpf(1)
    al = [mp.mpf(1) + mp.mpf(10) ** (-k) for k in range(1, 6)]
    al += [mp.mpf(a) for a in (1.5, 2, 3, 5, 10, 50, 300)]
    rr = [mp.log((mp.sinh(a * e0) - mp.sinh((a - 1) * e0)) / mp.sinh(e0)) / (a - 1) for a in al]
    ratio = max(r / (a / 2) for r, a in zip(rr, al, strict=True))
    assert float(ratio) == pytest.approx(0.924, abs=1e-3)
    assert float((mp.e - 1) / (mp.e + 1)) == pytest.approx(0.4621, abs=1e-4)
    assert float(2 * mp.ncdf(0.5) - 1) == pytest.approx(0.3829, abs=1e-4)
    b = 0.5
    f = IndividualRenyiFilter(5, b)
    eps_gdp = gaussian_epsilon(1e-5, math.sqrt(2 * b))[0]
    assert f.certificate(1e-5).epsilon > eps_gdp * 1.05


# --------------------------------------------------------------------------- bad input
def test_bad_input():
    f = IndividualRenyiFilter(10, 0.1)
    with pytest.raises(ValueError, match="twice"):
        f.admit([1, 2, 1], [0.01, 0.01, 0.01])
    assert f.spent().max() == 0.0  # nothing charged by a refused call
    with pytest.raises(ValueError, match=r"\[0, 9\]"):
        f.admit([10], [0.01])
    with pytest.raises(ValueError, match="non-negative"):
        f.admit([1], [-0.01])
    with pytest.raises(ValueError, match="shape"):
        f.admit([1, 2], [0.01])
    with pytest.raises(TypeError, match="integers"):
        f.admit([1.5], [0.01])
    with pytest.raises(ValueError, match="budget"):
        IndividualRenyiFilter(10, 0.0)
    with pytest.raises(ValueError, match="budget"):
        IndividualRenyiFilter(10, math.inf)
    with pytest.raises(ValueError, match="increasing"):
        IndividualRenyiFilter(10, 0.1, orders=[4.0, 2.0])
    with pytest.raises(ValueError, match="non-decreasing"):
        IndividualRenyiFilter(10, [0.2, 0.1], orders=[2.0, 4.0])
    with pytest.raises(ValueError, match="shape"):
        IndividualRenyiFilter(10, 0.1, orders=[2.0, 4.0]).admit([1], [0.01])
    k = IndKNNFilter(10, 0.1, 5.0, 0.5, 0.5)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        k.step([1], [1.5], count_noise=0.0)
    with pytest.raises(ValueError, match="twice"):
        k.step([1, 1], [0.9, 0.9], count_noise=0.0)
    with pytest.raises(ValueError, match="rng"):
        k.step([1], [0.9])
    with pytest.raises(ValueError, match="tau"):
        IndKNNFilter(10, 0.1, 5.0, 0.5, 0.0)
    with pytest.raises(ValueError, match="sigma1"):
        IndKNNFilter(10, 0.1, -5.0, 0.5, 0.5)
    with pytest.raises(ValueError, match="labels"):
        k.predict([1, 2], [0.9, 0.9], [0, 5], 3, np.random.default_rng(0))
