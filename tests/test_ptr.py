"""Generalized propose-test-release: certificates, exact privacy profiles, soundness by simulation.

Oracles are independent of the implementation: exact output distributions of whole PTR algorithms
evaluated with mpmath / numerical integration, the exact two-outcome mixture for the RDP route, the
optimal-composition formula of Kairouz et al. (tests/reference.py) and Monte-Carlo frequencies.
"""

import json
import math
from fractions import Fraction

import mpmath as mp
import numpy as np
import pytest
from reference import kov_delta
from scipy import integrate

from accountant import PrivacyAccountant
from accountant.adaptive.ptr import (
    BOTTOM,
    DataDependentLoss,
    StatRelease,
    classic_ptr,
    distance_test_passes,
    generalized_ptr,
    ptr_distance_test,
)
from accountant.adaptive.ptr_binary import (
    binary_rnm_dd_epsilon,
    binary_rnm_envelope,
    binary_rnm_probability,
    binary_vote_ptr,
)
from accountant.cli import main
from conversions.gaussian_dp import calibrate_gaussian_mu
from mechanisms import Gaussian, Laplace, from_dict
from mechanisms.ptr import GeneralizedPTR, PTRRenyi, ptr_rdp_corrected

MC_TRIALS = 200_000


def _mc_upper(p: float, n: int) -> float:
    """p + 4 standard errors (+ a floor for tiny p): an upper acceptance limit for a frequency."""
    return p + 4.0 * math.sqrt(p * (1 - p) / n) + 10.0 / n


# ---------------------------------------------------------------------------- certificate algebra
def test_certificate_tight_and_printed_delta():
    m = GeneralizedPTR(epsilon=1.0, delta=1e-6, test_epsilon=0.5, test_delta=2e-6, false_positive=3e-6)
    assert m.total_epsilon == 1.5
    assert m.total_delta == pytest.approx(2e-6 + 3e-6, rel=1e-15)  # delta_hat + max(delta, delta')
    p = GeneralizedPTR(1.0, 1e-6, 0.5, 2e-6, 3e-6, combine="sum")
    assert p.total_delta == pytest.approx(6e-6, rel=1e-15)  # Thm 4.3 as printed
    assert m.infinite_loss_mass == m.total_delta and m.pure_epsilon == 1.5
    # both the smallest floats >= the real sums: the float sum 2e-6 + 3e-6 lies an ulp below the real one
    assert Fraction(m.total_delta) >= Fraction(2e-6) + Fraction(3e-6) > Fraction(2e-6 + 3e-6)


@pytest.mark.parametrize("kwargs, msg", [
    ({"epsilon": 1.0, "false_positive": 1.0}, "false_positive"),
    ({"epsilon": 1.0, "false_positive": 1.5}, "false_positive"),
    ({"epsilon": -1.0}, "epsilon"),
    ({"epsilon": 1.0, "test_delta": 1.0}, "test_delta"),
    ({"epsilon": 1.0, "combine": "avg"}, "combine"),
    ({"epsilon": 1.0, "test_delta": 0.6, "false_positive": 0.5}, "total delta"),
    ({"epsilon": float("nan")}, "epsilon"),
])
def test_certificate_bad_inputs(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        GeneralizedPTR(**kwargs)


@pytest.mark.parametrize("kwargs", [
    {"failure_prob": 1.0}, {"failure_prob": 0.0}, {"noise_scale": 0.0}, {"sensitivity": -1.0},
    {"direction": "middle"}, {"noise": "cauchy"},
])
def test_stat_release_bad_inputs(kwargs):
    base = {"name": "s", "sensitivity": 1.0, "noise_scale": 1.0, "failure_prob": 0.1}
    base.update(kwargs)
    with pytest.raises(ValueError):
        StatRelease(**base)


def test_certificate_composes_like_optimal_composition():
    """k identical PTR blocks: the accountant's delta(eps) equals the KOV optimal composition formula."""
    m = GeneralizedPTR(epsilon=0.4, delta=1e-7, test_epsilon=0.1, test_delta=1e-7, false_positive=5e-8)
    e0, d0 = m.total_epsilon, m.total_delta
    acct = PrivacyAccountant().compose(m, times=5)
    for eps in (0.5, 1.5, 2.5):
        ref = kov_delta(eps, e0, d0, 5)
        got = acct.delta(eps)
        assert got >= ref * (1 - 1e-9)
        assert got <= ref * (1 + 1e-6) + 1e-15


def test_certificate_single_block_epsilon():
    m = GeneralizedPTR(epsilon=1.0, delta=1e-6, test_epsilon=0.3, test_delta=1e-6, false_positive=1e-6)
    acct = PrivacyAccountant().compose(m)
    # at delta = total delta the four-point pair gives exactly eps_total (never more)
    assert acct.epsilon(m.total_delta * (1 + 1e-9)) <= m.total_epsilon + 1e-9
    assert acct.epsilon(m.total_delta * (1 + 1e-9)) >= m.total_epsilon - 1e-6


def test_certificate_serialises_and_cli():
    m = GeneralizedPTR(epsilon=1.0, delta=1e-6, test_epsilon=0.3, test_delta=1e-6, false_positive=1e-6)
    assert from_dict(json.loads(json.dumps(m.to_dict()))) == m
    rc = main(["epsilon", "--mechanism", "generalized_ptr", "--epsilon-mech", "1", "--delta-mech", "1e-6",
               "--test-epsilon", "0.3", "--test-delta", "1e-6", "--false-positive", "1e-6",
               "--delta", "1e-5", "--json"])
    assert rc == 0


def test_certificate_independent_of_data_and_outcome():
    """Same public parameters, different data (pass and bottom branches) -> identical certificate."""
    loss = DataDependentLoss(lambda s, phi: s["ls"] / phi, {"ls": "increasing"})
    rel = [StatRelease("ls", sensitivity=1.0, noise_scale=0.5, failure_prob=1e-3, noise="laplace")]
    rng = np.random.default_rng(0)
    outs = []
    for ls in (0.1, 50.0):
        outs.append(generalized_ptr({"ls": ls}, loss=loss, releases=rel, phi=10.0, epsilon=1.0,
                                    run=lambda phi, g: g.laplace(0.0, phi), rng=rng))
    assert outs[0].passed and not outs[1].passed and outs[1].output is BOTTOM
    assert outs[0].mechanism == outs[1].mechanism
    assert repr(BOTTOM) == "⊥" and not BOTTOM


def test_direction_mismatch_refused():
    loss = DataDependentLoss(lambda s, phi: 1.0 / s["gap"], {"gap": "decreasing"})
    rel = [StatRelease("gap", sensitivity=1.0, noise_scale=1.0, failure_prob=1e-3, direction="upper")]
    with pytest.raises(ValueError, match="lower bound"):
        generalized_ptr({"gap": 3.0}, loss=loss, releases=rel, phi=None, epsilon=1.0,
                        run=lambda p, g: 0, rng=np.random.default_rng(0))
    rel_ok = [StatRelease("gap", 1.0, 1.0, 1e-3, direction="lower")]
    with pytest.raises(ValueError, match="missing"):
        generalized_ptr({}, loss=loss, releases=rel_ok, phi=None, epsilon=1.0, run=lambda p, g: 0,
                        rng=np.random.default_rng(0))
    with pytest.raises(ValueError, match="false-positive"):
        generalized_ptr({"a": 1.0, "b": 1.0},
                        loss=DataDependentLoss(lambda s, p: 0.0, {"a": "increasing", "b": "increasing"}),
                        releases=[StatRelease("a", 1, 1, 0.6), StatRelease("b", 1, 1, 0.6)], phi=None,
                        epsilon=1.0, run=lambda p, g: 0, rng=np.random.default_rng(0))


# ---------------------------------------------------------------------------- classic PTR, exact
def _chain_dataset():
    """A path graph of 'datasets' X_0..X_N (neighbours k ~ k+1) with a query f and its local sensitivity."""
    f = np.array([0, 1, 1, 2, 2, 3, 3, 4, 9, 9, 10, 10, 11, 11, 12, 12, 13, 14, 14, 15], dtype=float)
    ls = np.array([max(abs(f[k] - f[k - 1]) if k > 0 else 0, abs(f[k] - f[k + 1]) if k < len(f) - 1 else 0)
                   for k in range(len(f))])
    return f, ls


def _classic_profile(eps, delta, beta, k, kp, f, ls):
    """Exact hockey-stick H_{e^{2 eps}} between Alg 1's outputs at X_k and X_kp (bottom + Laplace density)."""
    bad = np.flatnonzero(ls > beta)
    dist = [int(np.min(np.abs(bad - j))) if bad.size else 10**9 for j in (k, kp)]
    thr = math.log(1 / delta) / eps

    def pass_prob(dd):  # P[dd + Lap(1/eps) > thr]
        x = (thr - dd) * eps
        return 0.5 * math.exp(-x) if x >= 0 else 1 - 0.5 * math.exp(x)

    pk, pkp = pass_prob(dist[0]), pass_prob(dist[1])
    b = beta / eps
    e2 = math.exp(2 * eps)
    out = max(0.0, (1 - pk) - e2 * (1 - pkp))

    def g(y):
        dk = pk * math.exp(-abs(y - f[k]) / b) / (2 * b)
        dkp = pkp * math.exp(-abs(y - f[kp]) / b) / (2 * b)
        return max(0.0, dk - e2 * dkp)

    lo, hi = min(f[k], f[kp]) - 60 * b, max(f[k], f[kp]) + 60 * b
    pts = sorted({f[k], f[kp]})
    val, _ = integrate.quad(g, lo, hi, points=pts, limit=400, epsabs=1e-13, epsrel=1e-10)
    return out + val


@pytest.mark.parametrize("eps, delta, beta", [(0.5, 1e-2, 1.0), (1.0, 1e-3, 1.0), (0.3, 0.05, 1.0)])
def test_classic_ptr_exact_profile_within_certificate(eps, delta, beta):
    f, ls = _chain_dataset()
    cert = classic_ptr(0.0, 3.0, beta=beta, epsilon=eps, delta=delta, rng=np.random.default_rng(1)).mechanism
    assert cert.total_epsilon == pytest.approx(2 * eps) and cert.total_delta == pytest.approx(delta / 2)
    worst = 0.0
    for k in range(len(f) - 1):
        for a, b in ((k, k + 1), (k + 1, k)):
            worst = max(worst, _classic_profile(eps, delta, beta, a, b, f, ls))
    assert worst <= cert.total_delta * (1 + 1e-7)
    assert worst >= 0.2 * cert.total_delta  # the delta/2 certificate is not vacuous here


def test_classic_ptr_runs_and_bottoms():
    rng = np.random.default_rng(3)
    far = classic_ptr(5.0, 1000.0, beta=1.0, epsilon=1.0, delta=1e-6, rng=rng)
    assert far.passed and isinstance(far.output, float)
    near = classic_ptr(5.0, 0.0, beta=1.0, epsilon=1.0, delta=1e-6, rng=rng)
    assert not near.passed and near.output is BOTTOM
    assert far.mechanism == near.mechanism
    with pytest.raises(ValueError):
        classic_ptr(5.0, 1.0, beta=0.0, epsilon=1.0, delta=1e-6, rng=rng)
    with pytest.raises(ValueError):
        classic_ptr(5.0, 1.0, beta=1.0, epsilon=1.0, delta=1.0, rng=rng)
    with pytest.raises(ValueError):
        classic_ptr(5.0, -1.0, beta=1.0, epsilon=1.0, delta=1e-3, rng=rng)


def test_distance_test_false_positive_by_simulation():
    """gamma = 0 (the proposal already fails at X): pass frequency <= delta_tilde / 2 (and ~ equal)."""
    rng = np.random.default_rng(11)
    for eh, dt in ((1.0, 0.02), (0.5, 0.002)):
        freq = float(np.mean(distance_test_passes(0.0, eh, dt, rng, size=MC_TRIALS)))
        assert freq <= _mc_upper(dt / 2, MC_TRIALS)
        assert freq >= dt / 2 - 4 * math.sqrt(dt / 2 / MC_TRIALS) - 10 / MC_TRIALS
    r = ptr_distance_test(0.0, run=lambda p, g: 1, phi=None, epsilon=1.0, test_epsilon=1.0, delta_tilde=0.1,
                          rng=rng)
    assert r.mechanism.false_positive == pytest.approx(0.05)


# ---------------------------------------------------------------------------- private upper bound, MC
@pytest.mark.parametrize("noise", ["laplace", "gaussian"])
def test_private_upper_bound_soundness_by_simulation(noise):
    """Insufficient proposals pass with frequency <= delta'; the released bound covers w.p. >= 1 - delta'."""
    fp = 0.01
    rel = StatRelease("ls", sensitivity=1.0, noise_scale=0.7, failure_prob=fp, noise=noise, direction="upper")
    loss = DataDependentLoss(lambda s, phi: np.asarray(s["ls"]) / phi, {"ls": "increasing"})
    rng = np.random.default_rng(5)
    phi, eps = 2.0, 1.0
    for true_ls in (2.0001, 2.5, 4.0):  # eps_phi = ls/phi > eps: insufficient
        bounds = {"ls": rel.release(true_ls, rng, size=MC_TRIALS)}
        passed = loss.function(bounds, phi) <= eps
        freq = float(np.mean(passed))
        assert freq <= _mc_upper(fp, MC_TRIALS)
        cover = float(np.mean(bounds["ls"] >= true_ls))
        assert cover >= 1 - _mc_upper(fp, MC_TRIALS)
        if true_ls == 2.0001:  # at the boundary the exact-quantile shift is tight
            assert freq >= fp - 4 * math.sqrt(fp / MC_TRIALS)


def test_lower_bound_release_and_clip():
    rel = StatRelease("lm", sensitivity=1.0, noise_scale=2.0, failure_prob=0.05, direction="lower", clip=0.0)
    rng = np.random.default_rng(2)
    b = rel.release(0.5, rng, size=MC_TRIALS)
    assert np.all(b >= 0.0)
    assert float(np.mean(b > 0.5)) <= _mc_upper(0.05, MC_TRIALS)
    assert rel.mechanism == Gaussian(sigma=2.0, sensitivity=1.0)
    lap = StatRelease("x", 1.0, 3.0, 0.05, noise="laplace")
    assert lap.mechanism == Laplace(scale=3.0, sensitivity=1.0)
    assert lap.shift == pytest.approx(3.0 * math.log(10.0))


def test_generalized_ptr_test_cost_from_accountant():
    rel = [StatRelease("a", 1.0, 2.0, 1e-4), StatRelease("b", 0.5, 1.0, 1e-4)]
    loss = DataDependentLoss(lambda s, p: s["a"] + s["b"], {"a": "increasing", "b": "increasing"},
                             delta=1e-6)
    r = generalized_ptr({"a": 0.0, "b": 0.0}, loss=loss, releases=rel, phi=None, epsilon=100.0,
                        run=lambda p, g: "out", rng=np.random.default_rng(0), test_delta=1e-6)
    # two Gaussians of mu = 0.5 each -> sqrt(0.5)-GDP; exact epsilon at 1e-6
    from reference import gaussian_epsilon
    ref = gaussian_epsilon(1e-6, math.sqrt(0.5))
    assert r.mechanism.test_epsilon == pytest.approx(ref, rel=1e-6)
    assert r.mechanism.test_epsilon >= ref * (1 - 1e-12)
    assert r.mechanism.false_positive == pytest.approx(2e-4)
    assert r.passed and r.output == "out"


def test_calibrate_gaussian_mu_matches_analytic_gaussian():
    # analytic Gaussian mechanism values by numerical integration (Balle & Wang 2018): (eps, sigma) = (0.5,
    # 2) -> 0.05244032, (1, 1) -> 0.1269367
    assert calibrate_gaussian_mu(0.5, 0.05244032) == pytest.approx(0.5, rel=1e-6)
    assert calibrate_gaussian_mu(1.0, 0.1269367) == pytest.approx(1.0, rel=1e-6)
    assert calibrate_gaussian_mu(2.0, 0.1190192) == pytest.approx(1 / 0.7, rel=1e-6)


# ---------------------------------------------------------------------------- binary voting, exact
def _mp_p(t, eps):
    t = mp.mpf(t)
    a = abs(t) * eps
    s = (2 + a) * mp.exp(-a) / 4
    return s if t >= 0 else 1 - s


def _mp_eps_delta(t, eps, delta):
    """Smallest e with all four hockey-sticks <= delta, by bisection on the exact divergence (mpmath)."""
    mp.mp.dps = 40
    P = [_mp_p(t, eps), 1 - _mp_p(t, eps)]

    def hs(A, B, e):
        return sum(max(mp.mpf(0), A[i] - mp.e**e * B[i]) for i in range(2))

    def worst(e):
        w = mp.mpf(0)
        for u in (t - 1, t + 1):
            Q = [_mp_p(u, eps), 1 - _mp_p(u, eps)]
            w = max(w, hs(P, Q, e), hs(Q, P, e))
        return w

    if worst(0) <= delta:
        return 0.0
    lo, hi = mp.mpf(0), mp.mpf(2 * eps + 5)
    for _ in range(80):
        mid = (lo + hi) / 2
        if worst(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return float(hi)


def test_binary_rnm_loss_reference_values():
    # docs/derivations/generalized-ptr.md section 4 (eps = 10): pure 8.208, 9.394, 9.625, 9.824, 9.906, 9.990
    # and at delta = 1e-5: 8.208, 9.318, 9.318, 0
    pure = binary_rnm_dd_epsilon([0, 1, 2, 5, 10, 100], 10.0)
    np.testing.assert_allclose(pure, [8.208, 9.394, 9.625, 9.824, 9.906, 9.990], atol=6e-4)
    approx = binary_rnm_dd_epsilon([0, 1, 2, 3, 5], 10.0, 1e-5)
    np.testing.assert_allclose(approx, [8.208, 9.318, 9.318, 0, 0], atol=6e-4)
    # P[Z > s] = (2 + s) e^{-s}/4 for the Laplace difference
    np.testing.assert_allclose(binary_rnm_probability([0, 0.5, 2, 7], 1.0),
                               [0.5, 0.3790816623, 0.1353352832, 0.0020517344], atol=1e-10)
    # log p(t)/p(t+1) = eps + log(1 - eps/(2 + eps (t+1))) is the pure loss for t >= 0
    for eps in (1.0, 10.0):
        for t in (0, 1, 2, 5, 10):
            ident = eps + math.log(1 - eps / (2 + eps * (t + 1)))
            assert binary_rnm_dd_epsilon([t], eps)[0] == pytest.approx(max(ident, abs(
                math.log((1 - _mp_p(t, eps)) / (1 - _mp_p(t - 1, eps))))), rel=1e-9)


@pytest.mark.parametrize("eps, delta", [(1.0, 1e-5), (2.0, 1e-6), (0.5, 1e-3)])
def test_binary_rnm_loss_vs_mpmath(eps, delta):
    ts = [0, 1, 2, 3, 5, 8, 13, 20]
    got = binary_rnm_dd_epsilon(ts, eps, delta)
    ref = [_mp_eps_delta(t, eps, delta) for t in ts]
    np.testing.assert_allclose(got, ref, atol=1e-9)
    env = binary_rnm_envelope(np.arange(0, 40), eps, delta)
    brute = [max(_mp_eps_delta(u, eps, delta) for u in range(t, 60)) for t in range(0, 40, 7)]
    np.testing.assert_allclose(env[::7], brute, atol=1e-9)
    assert np.all(np.diff(env) <= 1e-15)


def test_binary_vote_gen_ptr_exact_profile():
    """Binary vote with generalized PTR (docs/derivations/generalized-ptr.md section 1): eps=2, eps_t=1,
    eps'=0.5, delta=1e-5, delta_0=1e-6: t_min = 9, max false
    positive 1.84e-6 <= delta/2, exact delta(eps_t + eps') = 6.8e-11 <= certificate 5e-6.

    Those two numbers are for the rule "pass iff t^p >= t_min" (floor); the implementation uses the valid
    and tighter rule epsbar(ceil(t^p)) (an integer gap t >= t^p satisfies t >= ceil(t^p)), whose
    false-positive rate is exactly delta/2.  Both are checked against the exact output distribution."""
    eps, et, ep, delta, d0 = 2.0, 1.0, 0.5, 1e-5, 1e-6
    ts = range(0, 61)
    loss = {t: _mp_eps_delta(t, eps, d0) for t in range(0, 80)}
    env = {t: max(loss[u] for u in range(t, 80)) for t in ts}
    t_min = min(t for t in ts if env[t] <= ep)
    assert t_min == 9
    shift = math.log(1 / delta) / et

    def pass_prob(t, cut):  # P[|t| - shift + Lap(1/et) > cut]
        x = (cut - abs(t) + shift) * et
        return 0.5 * math.exp(-x) if x >= 0 else 1 - 0.5 * math.exp(x)

    cert = binary_vote_ptr(0, 0, epsilon=eps, test_epsilon=et, budget_epsilon=ep, delta=delta, delta_0=d0,
                           rng=np.random.default_rng(0)).mechanism
    assert cert.total_epsilon == pytest.approx(et + ep)
    assert cert.total_delta == pytest.approx(max(d0, delta / 2))
    e = math.exp(et + ep)
    profiles = {}
    for rule, cut in (("floor", t_min), ("ceil", t_min - 1)):
        fps = [pass_prob(t, cut) for t in ts if loss[t] > ep]
        assert max(fps) <= delta / 2 * (1 + 1e-12)

        def out(t, cut=cut):
            pp = pass_prob(t, cut)
            p0 = float(_mp_p(t, eps))
            return [1 - pp, pp * p0, pp * (1 - p0)]

        worst = 0.0
        for t in range(-60, 61):
            for u in (t - 1, t + 1):
                a, b = out(t), out(u)
                worst = max(worst, sum(max(0.0, a[i] - e * b[i]) for i in range(3)))
        assert worst <= cert.total_delta
        profiles[rule] = (max(fps), worst)
    assert profiles["floor"][0] == pytest.approx(1.84e-6, rel=2e-2)
    assert profiles["floor"][1] == pytest.approx(6.8e-11, rel=0.1)
    assert profiles["ceil"][0] == pytest.approx(delta / 2, rel=1e-9)
    # the implementation's decision rule is the ceil rule: simulate it at the worst gap t = t_min - 1
    rng = np.random.default_rng(4)
    passes = sum(binary_vote_ptr(0, t_min - 1, epsilon=eps, test_epsilon=et, budget_epsilon=ep, delta=0.2,
                                 delta_0=d0, rng=rng).passed for _ in range(4000))
    assert passes / 4000 <= _mc_upper(0.1, 4000)
    assert passes / 4000 >= 0.1 - 4 * math.sqrt(0.1 * 0.9 / 4000)


def test_binary_vote_ptr_runs():
    rng = np.random.default_rng(7)
    wins = [binary_vote_ptr(10, 200, epsilon=2.0, test_epsilon=1.0, budget_epsilon=0.5, delta=1e-5,
                            delta_0=1e-6, rng=rng) for _ in range(20)]
    assert all(w.passed and w.output == 1 for w in wins)
    tie = binary_vote_ptr(50, 51, epsilon=2.0, test_epsilon=1.0, budget_epsilon=0.5, delta=1e-5, delta_0=1e-6,
                          rng=rng)
    assert not tie.passed and tie.output is BOTTOM and tie.mechanism == wins[0].mechanism


# ---------------------------------------------------------------------------- RDP route
def _bern_rdp(p, q, a):
    return math.log(p**a * q ** (1 - a) + (1 - p) ** a * (1 - q) ** (1 - a)) / (a - 1)


def _thm_b5_printed(a, test_rdp, eps_a, eps_tilde, dp):
    inner = dp * math.exp((a - 1) * eps_tilde) + (1 - dp) * math.exp((a - 1) * eps_a)
    return test_rdp + math.log(inner) / (a - 1)


@pytest.mark.parametrize("a, dp, lr, et, ea, exact, corrected", [
    # docs/derivations/generalized-ptr.md section 3: (alpha, delta', log p/q, eps_tilde, eps(alpha)) ->
    # exact, corrected
    (10, 1e-5, 1.0, 1.0, 0.1, 0.7210, 0.7210),
    (10, 1e-5, 0.5, 1.0, 0.1, 0.2351, 0.2408),
    (20, 1e-6, 1.0, 0.5, 0.05, 0.7729, 0.7729),
    (5, 1e-3, 1.0, 2.0, 0.5, 1.2746, 1.2812),
])
def test_thm_b5_counterexamples(a, dp, lr, et, ea, exact, corrected):
    p, q = dp, dp * math.exp(-lr)
    th = max(_bern_rdp(p, q, a), _bern_rdp(q, p, a))
    ex = math.log((1 - p) ** a * (1 - q) ** (1 - a) + p**a * q ** (1 - a) * math.exp((a - 1) * et)) / (a - 1)
    assert ex == pytest.approx(exact, abs=6e-5)
    assert _thm_b5_printed(a, th, ea, et, dp) < ex  # the printed theorem under-reports
    got = float(ptr_rdp_corrected([a], th, ea, et, dp)[0])
    assert got >= ex
    assert got == pytest.approx(corrected, abs=6e-5)


def test_rdp_corrected_never_below_exact_random():
    rng = np.random.default_rng(9)
    n = 20000
    a = rng.uniform(1.5, 40, n)
    dp = 10 ** rng.uniform(-8, -1, n)
    p = dp * rng.uniform(0, 1, n)  # X fails: P[pass] <= delta'
    q = np.clip(p * np.exp(rng.uniform(-3, 3, n)), 1e-300, 0.999)
    et = rng.uniform(0, 3, n)
    d = et * rng.uniform(0, 1, n)  # D_alpha(M(X) || M(X')) <= eps_tilde
    ea = rng.uniform(0, 1, n)

    def lrdp(pp, qq):
        return np.logaddexp(a * np.log(pp) + (1 - a) * np.log(qq),
                            a * np.log1p(-pp) + (1 - a) * np.log1p(-qq)) / (a - 1)

    th = np.maximum(lrdp(p, q), lrdp(q, p))
    ex = np.logaddexp(a * np.log1p(-p) + (1 - a) * np.log1p(-q),
                      a * np.log(p) + (1 - a) * np.log(q) + (a - 1) * d) / (a - 1)
    idx = range(0, n, 20)  # one delta' per instance: scalar calls on a subset
    got = np.array([ptr_rdp_corrected([a[i]], th[i], ea[i], et[i], dp[i])[0] for i in idx])
    assert np.all(got >= ex[::20] - 1e-12 * (1 + np.abs(ex[::20])))
    # vectorised over orders with a common delta'
    dp0 = 1e-4
    p0 = dp0 * rng.uniform(0, 1, n)
    q0 = np.clip(p0 * np.exp(rng.uniform(-3, 3, n)), 1e-300, 0.999)
    th0 = np.maximum(lrdp(p0, q0), lrdp(q0, p0))
    ex0 = np.logaddexp(a * np.log1p(-p0) + (1 - a) * np.log1p(-q0),
                       a * np.log(p0) + (1 - a) * np.log(q0) + (a - 1) * d) / (a - 1)
    got0 = ptr_rdp_corrected(a, th0, ea, et, dp0)
    assert np.all(got0 >= ex0 - 1e-12 * (1 + np.abs(ex0)))


def test_ptr_renyi_mechanism():
    test = Laplace(scale=2.0)  # test on a distance / bound with sensitivity 1
    budget = Gaussian(sigma=3.0, sensitivity=1.0)  # tested local sensitivity <= 1
    worst = Gaussian(sigma=3.0, sensitivity=4.0)  # global sensitivity 4
    m = PTRRenyi(test=test, budget=budget, worst_case=worst, false_positive=1e-6)
    a = np.array([1.5, 2.0, 8.0, 32.0])
    ref = ptr_rdp_corrected(a, test.rdp(a), budget.rdp(a), worst.rdp(a), 1e-6)
    np.testing.assert_array_equal(m.rdp(a), ref)
    assert np.all(m.rdp(a) <= test.rdp(a) + worst.rdp(a))
    assert np.all(m.rdp(a) >= test.rdp(a) + budget.rdp(a))
    assert np.all(np.diff(m.rdp(np.linspace(1.1, 60, 50))) >= -1e-12)
    rt = from_dict(json.loads(json.dumps(m.to_dict())))
    assert rt == m
    m2 = PTRRenyi(test=test, budget=budget, worst_case=worst, false_positive=1e-6, budget_orders=[8.0])
    r2 = m2.rdp(a)
    assert r2[2] == m.rdp(a)[2]
    np.testing.assert_allclose(r2[[0, 1, 3]], (test.rdp(a) + worst.rdp(a))[[0, 1, 3]])
    assert from_dict(json.loads(json.dumps(m2.to_dict()))) == m2
    acct = PrivacyAccountant().compose(m, 3)
    assert acct.epsilon(1e-5) < PrivacyAccountant().compose(test, 3).compose(worst, 3).epsilon(1e-5)
    from mechanisms import ApproxDP
    with pytest.raises(ValueError, match="infinite-loss"):
        PTRRenyi(test=ApproxDP(1.0, 1e-6), budget=budget, worst_case=worst, false_positive=1e-6)
    with pytest.raises(ValueError):
        PTRRenyi(test=test, budget=budget, worst_case=worst, false_positive=1.0)


# ---------------------------------------------------------------------------- mixed ledger
def test_mixed_certificate_ptr_dpsgd_svt():
    """A PTR release + DP-SGD steps + an SVT compose; the result is within basic composition of the parts
    (sum of epsilons at the sum of deltas: basic composition of DP) and above each part."""
    ptr = GeneralizedPTR(epsilon=0.5, delta=1e-7, test_epsilon=0.2, test_delta=1e-7, false_positive=1e-7)
    try:
        from mechanisms.svt import LaplaceSVT

        svt = LaplaceSVT(epsilon1=0.3, epsilon2=0.3)
    except ImportError:  # pragma: no cover - SVT plug-in not installed
        svt = Laplace(scale=1 / 0.6)
    acct = PrivacyAccountant()
    acct.compose(ptr)
    try:
        acct.step(sigma=1.1, sample_rate=0.01, steps=200)
        sgd = PrivacyAccountant().step(sigma=1.1, sample_rate=0.01, steps=200)
    except ImportError:  # pragma: no cover - subsampling plug-in not installed
        acct.compose(Gaussian(sigma=10.0), 2)
        sgd = PrivacyAccountant().compose(Gaussian(sigma=10.0), 2)
    acct.compose(svt)
    d_sgd = 1e-6
    e_ptr = ptr.total_epsilon
    e_sgd = sgd.epsilon(d_sgd)
    e_svt = svt.pure_epsilon
    d_sum = ptr.total_delta + d_sgd
    eps = acct.epsilon(d_sum)
    assert eps <= e_ptr + e_sgd + e_svt + 1e-9
    assert eps >= max(e_sgd, e_svt, 0.0)
    # the PTR block's failure mass is carried into the ledger (delta_total = p + (1 - p) delta_rdp)
    assert acct.ledger.infinite_loss_mass >= ptr.total_delta * (1 - 1e-12)
    # RDP route: the ledger's curve is the sum of the parts (conditional curve for the PTR block)
    a = np.array([2.0, 8.0, 32.0])
    np.testing.assert_allclose(acct.rdp(a), ptr.rdp(a) + sgd.rdp(a) + svt.rdp(a), rtol=1e-12)
    cert = acct.certificate(delta=d_sum)
    assert any("generalized_ptr" in s for s in cert.ledger)


# ---------------------------------------------------------------------------- CLI
def test_cli_ptr_subcommands(tmp_path, capsys):
    import accountant.cli_ptr  # noqa: F401  (registers ``dpcert ptr`` until the lead loads it by default)

    rc = main(["ptr", "certificate", "--epsilon", "1", "--delta", "1e-6", "--test-epsilon", "0.5",
               "--test-delta", "1e-6", "--false-positive", "3e-6", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["epsilon"] == 1.5 and doc["delta"] == pytest.approx(4e-6)
    assert doc["delta_as_printed_in_thm_4_3"] == pytest.approx(5e-6)
    assert main(["ptr", "classic", "--epsilon", "0.5", "--delta", "1e-6", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["epsilon"] == 1.0 and doc["delta"] == pytest.approx(5e-7)
    assert main(["ptr", "pate-params", "--test-epsilon", "1", "--delta", "1e-5", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["alpha"] == pytest.approx(25.412, abs=1e-3) and doc["test_epsilon_certified"] <= 1.0
    assert main(["ptr", "select-budget", "--epsilon-total", "2", "--delta-total", "1e-5",
                 "--stop-prob", "0.05", "--delta2", "1e-6", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["epsilon_star"] <= 2 / 3 and doc["delta_star"] > 0
    rng = np.random.default_rng(0)
    votes = np.zeros((20, 5), dtype=int)
    votes[:, 0] = 90
    votes[:, 1:] = rng.multinomial(10, np.ones(4) / 4, size=20)
    vf = tmp_path / "votes.json"
    vf.write_text(json.dumps({"votes": votes.tolist()}))
    state = tmp_path / "state.json"
    labels = tmp_path / "labels.json"
    rc = main(["ptr", "pate", "--votes", str(vf), "--sigma1", "10", "--test-epsilon", "1",
               "--budget-epsilon", "3", "--delta", "1e-5", "--seed", "1", "--state", str(state),
               "--labels-out", str(labels), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["delta"] == pytest.approx(1e-5) and state.exists()
    if doc["passed"]:
        assert len(json.loads(labels.read_text())["labels"]) == 20
    assert PrivacyAccountant.load(state).ledger.total_count == 1
    assert main(["ptr"]) == 2
    assert main(["ptr", "certificate", "--epsilon", "1", "--test-epsilon", "0.5",
                 "--false-positive", "1.5"]) == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"votes": [[3, -1, 2]]}))
    assert main(["ptr", "pate", "--votes", str(bad), "--sigma1", "10", "--test-epsilon", "1",
                 "--budget-epsilon", "3", "--delta", "1e-5"]) == 2
    assert "non-negative integers" in capsys.readouterr().err


@pytest.mark.parametrize("script", ["ptr_pate.py", "private_regression.py", "per_instance_report.py"])
def test_examples_run_and_print_certificates(script, capsys):
    import pathlib
    import runpy

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / script
    runpy.run_path(str(path), run_name="__main__")
    out = capsys.readouterr().out
    assert "-DP" in out
