"""Issue 2 acceptance: Laplace, randomized response (binary and k-ary), PureDP and ApproxDP compositions.

References (all in ``tests/reference.py``, independent of the library):

* ``laplace_delta``: the EXACT k-fold Laplace privacy profile, from an exact piecewise-polynomial convolution
  of the privacy-loss measure in decimal arithmetic (no FFT, no discretisation);
* ``kov_delta``: the optimal composition theorem of Kairouz, Oh & Viswanath (2015, Thm 3.3), continuous-eps
  form (Murtagh & Vadhan 2016);
* ``rr_delta_enumerate`` / ``kary_rr_delta``: direct enumeration of the k-fold output distributions of
  binary and k-ary randomized response.

The cf route composes lattice mechanisms exactly (atoms enumerated), so those must agree to float precision.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest
import reference as ref

from accountant import PrivacyAccountant
from mechanisms import ApproxDP, Laplace, PureDP, RandomizedResponse

TINY = 1e-12  # absolute float slack for the exactly-composed lattice mechanisms


def _acct(mech, k):
    return PrivacyAccountant().compose(mech, times=k)


# -------------------------------------------------------------------------------- Laplace

# (b, k, eps): k = 1, 2 at large delta are the slowest library queries (~2 s each): few points there.
LAPLACE_CASES = [
    (1.0, 1, 0.3),
    (1.0, 2, 0.5),
    (1.0, 10, 1.0),
    (1.0, 100, 3.0),
    (1.0, 100, 10.0),
    (5.0, 100, 0.6),
    (5.0, 100, 3.0),
]


@pytest.mark.parametrize("b,k,eps", LAPLACE_CASES)
def test_laplace_cf_delta_matches_exact_convolution(b, k, eps):
    """cf delta(eps) within 1e-6 absolute of the exact k-fold profile; the certified bracket contains it."""
    exact = ref.laplace_delta(eps, b, k)
    cert = _acct(Laplace(scale=b), k).certificate(epsilon=eps, method="cf")
    assert abs(cert.delta - exact) <= 1e-6
    assert cert.lower_bound is not None
    assert cert.lower_bound <= exact <= cert.delta, (cert.lower_bound, exact, cert.delta)


def test_laplace_single_closed_form_and_beyond_support():
    """k = 1: delta = 1 - e^{(eps - a)/2} on [0, a] (docs/derivations/laplace.md) and 0 beyond a = Delta /
    b."""
    acct = _acct(Laplace(scale=2.0), 1)  # a = 0.5
    eps = 0.2
    closed = -math.expm1((eps - 0.5) / 2)
    cert = acct.certificate(epsilon=eps, method="cf")
    assert cert.lower_bound <= closed <= cert.delta
    assert cert.delta == pytest.approx(closed, abs=1e-9)
    beyond = acct.certificate(epsilon=0.6, method="cf")  # pure 0.5-DP: delta(0.6) = 0
    assert beyond.delta <= 1e-300
    assert acct.epsilon(1e-9) <= 0.5 * (1 + 1e-9)  # never worse than the pure-DP bound


def test_laplace_cf_epsilon_matches_exact_inverse():
    """eps(delta) for 100 x Laplace(b = 10) against a bisection on the exact profile."""
    b, k, delta = 10.0, 100, 1e-5
    with mp.workdps(30):
        lo, hi = mp.mpf(0), mp.mpf(k / b)  # delta(k a) = 0 < target, delta(0) > target
        for _ in range(45):
            mid = (lo + hi) / 2
            if ref.laplace_delta(mid, b, k) > delta:
                lo = mid
            else:
                hi = mid
        exact_lo, exact_hi = float(lo), float(hi)
    cert = _acct(Laplace(scale=b), k).certificate(delta=delta, method="cf")
    assert cert.epsilon >= exact_lo
    assert cert.lower_bound <= exact_hi
    assert cert.epsilon == pytest.approx(exact_hi, rel=1e-6)


@pytest.mark.parametrize("scale", [7.0])
def test_laplace_sensitivity_scaling(scale):
    """Only b / Delta matters (the pair depends on a = Delta / b only)."""
    base = _acct(Laplace(scale=5.0), 100)
    scaled = _acct(Laplace(scale=5.0 * scale, sensitivity=scale), 100)
    for method in ("cf", "rdp", "rdp_classic"):
        want = base.epsilon(1e-6, method=method)
        assert scaled.epsilon(1e-6, method=method) == pytest.approx(want, rel=1e-9)
    assert scaled.delta(1.0, method="cf") == pytest.approx(base.delta(1.0, method="cf"), rel=1e-9)


def test_laplace_rdp_route_never_below_exact():
    """RDP route (both rules) is an upper bound on the exact profile; improved <= classic."""
    b, k = 5.0, 100
    acct = _acct(Laplace(scale=b), k)
    for eps in (0.6, 3.0):
        exact = ref.laplace_delta(eps, b, k)
        d_rdp = acct.delta(eps, method="rdp")
        d_cls = acct.delta(eps, method="rdp_classic")
        assert exact <= d_rdp <= d_cls * (1 + 1e-12)


# -------------------------------------------------------------------------------- randomized response

RR_EPS = [0.0, 0.3, 1.0, 2.5, 6.0]


@pytest.mark.parametrize("k", [1, 2, 5, 20, 60])
@pytest.mark.parametrize("eps0", [0.5, 1.0, 2.0])
def test_binary_rr_composition_equals_kov_and_enumeration(eps0, k):
    """k-fold binary RR: cf delta(eps) == KOV formula == brute-force enumeration."""
    acct = _acct(RandomizedResponse(epsilon=eps0), k)
    for eps in RR_EPS:
        kov = ref.kov_delta(eps, eps0, 0.0, k)
        enum = ref.rr_delta_enumerate(eps, eps0, k)
        assert kov == pytest.approx(enum, abs=1e-14)
        cert = acct.certificate(epsilon=eps, method="cf")
        assert cert.delta == pytest.approx(enum, abs=TINY), eps
        assert cert.lower_bound <= enum + TINY
        # PureDP(eps0) is accounted by the same dominating pair
    pure = _acct(PureDP(epsilon=eps0), k)
    assert pure.delta(1.0, method="cf") == pytest.approx(ref.rr_delta_enumerate(1.0, eps0, k), abs=TINY)


@pytest.mark.parametrize("kcat,k", [(3, 1), (3, 7), (5, 4), (5, 12), (10, 6)])
def test_kary_rr_composition_equals_enumeration(kcat, k):
    """k-ary RR composed k times: cf route == trinomial enumeration of the output distribution."""
    eps0 = 1.0
    acct = _acct(RandomizedResponse(epsilon=eps0, k=kcat), k)
    for eps in (0.0, 0.5, 2.0, 4.0):
        exact = ref.kary_rr_delta(eps, eps0, kcat, k)
        cert = acct.certificate(epsilon=eps, method="cf")
        assert cert.delta == pytest.approx(exact, abs=TINY)
        assert cert.lower_bound <= exact + TINY


@pytest.mark.parametrize("eps0,delta0", [(0.5, 1e-3), (1.0, 1e-6), (0.1, 0.01)])
@pytest.mark.parametrize("k", [1, 3, 10, 25])
def test_approxdp_composition_equals_kov(eps0, delta0, k):
    """k-fold (eps0, delta0)-DP blocks: cf delta(eps) == KOV optimal composition (continuous eps)."""
    acct = _acct(ApproxDP(eps0, delta0), k)
    for eps in (0.0, 0.7, 2.0, 5.0):
        exact = ref.kov_delta(eps, eps0, delta0, k)
        cert = acct.certificate(epsilon=eps, method="cf")
        assert cert.delta == pytest.approx(exact, abs=TINY)
        assert cert.lower_bound <= exact + TINY
    # delta below the infinite-loss mass 1 - (1 - delta0)^k: no finite eps
    p_inf = -math.expm1(k * math.log1p(-delta0))
    assert acct.epsilon(p_inf * 0.5, method="cf") == math.inf


def _kov_epsilon(delta, eps0, delta0, k, dps=30):
    """eps(delta) of the KOV profile by bisection (mpmath); returns a (lo, hi) bracket of width 1e-13."""
    with mp.workdps(dps):
        lo, hi = mp.mpf(0), mp.mpf(k * eps0)
        if ref.kov_delta(0, eps0, delta0, k) <= delta:
            return 0.0, 0.0
        while hi - lo > mp.mpf("1e-13"):
            mid = (lo + hi) / 2
            if ref.kov_delta(mid, eps0, delta0, k, as_mpf=True) > delta:
                lo = mid
            else:
                hi = mid
        return float(lo), float(hi)


@pytest.mark.parametrize("eps0,delta0,k,delta", [(1.0, 0.0, 20, 1e-3), (0.5, 0.0, 5, 1e-2),
                                                 (0.5, 1e-4, 10, 1e-2), (0.2, 1e-6, 50, 1e-3)])
def test_discrete_epsilon_matches_kov_inverse(eps0, delta0, k, delta):
    """eps(delta) of RR / ApproxDP compositions equals the inverse of the KOV profile."""
    mech = RandomizedResponse(epsilon=eps0) if delta0 == 0.0 else ApproxDP(eps0, delta0)
    lo, hi = _kov_epsilon(delta, eps0, delta0, k)
    cert = _acct(mech, k).certificate(delta=delta, method="cf")
    assert cert.epsilon == pytest.approx(hi, abs=1e-10)
    assert cert.epsilon >= lo - 1e-12
    assert cert.lower_bound <= hi + 1e-12


def test_atomic_upper_bound_is_never_below_exact():
    """The certified delta of an exactly composed lattice must be >= the exact value (soundness, no slack)."""
    acct = _acct(RandomizedResponse(epsilon=1.0), 20)
    for eps in (0.0, 0.3, 1.0, 2.5):
        exact = ref.rr_delta_enumerate(eps, 1.0, 20, as_mpf=True)
        cert = acct.certificate(epsilon=eps, method="cf")
        assert mp.mpf(cert.delta) + mp.mpf(cert.error) >= exact, eps


@pytest.mark.parametrize("mech,k", [(RandomizedResponse(epsilon=1.0), 20), (ApproxDP(0.5, 1e-3), 10),
                                    (RandomizedResponse(epsilon=0.7, k=4), 8)])
def test_discrete_rdp_route_never_below_exact(mech, k):
    acct = _acct(mech, k)
    for eps in (0.5, 2.0):
        exact = acct.certificate(epsilon=eps, method="cf")  # exact (lattice) value, checked above
        d_rdp = acct.delta(eps, method="rdp")
        assert exact.lower_bound <= d_rdp <= acct.delta(eps, method="rdp_classic") * (1 + 1e-12)


def test_split_batches_give_same_certificate():
    """k copies of RR(eps0) and RR(eps0) composed in two batches give the same certificate."""
    a = _acct(RandomizedResponse(epsilon=0.4), 30)
    rr = RandomizedResponse(epsilon=0.4)
    b = PrivacyAccountant().compose(rr, 12).compose(rr, 18)
    assert a.certificate(delta=1e-4, method="cf") == b.certificate(delta=1e-4, method="cf")


# -------------------------------------------------------------------------------- fixed-size batches

def test_sampled_without_replacement_amplification_and_composition():
    """Amplification by subsampling of an (eps, delta) block (Balle, Barthe & Gaboardi 2018): (log(1 +
    g(e^eps - 1)),
    g delta) under replace-one; k-fold = KOV."""
    from mechanisms import SampledWithoutReplacement

    for eps, delta, g in [(2.0, 1e-6, 0.01), (0.5, 0.0, 0.3), (800.0, 1e-9, 1e-3), (1.0, 1e-3, 1.0)]:
        m = SampledWithoutReplacement(epsilon=eps, delta=delta, sample_rate=g)
        with mp.workdps(40):
            want = mp.log(1 + mp.mpf(g) * mp.expm1(mp.mpf(eps)))
        assert m.amplified_epsilon == pytest.approx(float(want), rel=1e-14)
        assert m.amplified_delta == pytest.approx(g * delta, rel=1e-15)
    assert SampledWithoutReplacement(epsilon=3.0, delta=0.1, sample_rate=0.0).amplified_epsilon == 0.0
    m = SampledWithoutReplacement(epsilon=2.0, delta=1e-7, sample_rate=0.02)
    k = 20
    acct = PrivacyAccountant(relation="replace_one").compose(m, times=k)
    for e in (0.5, 1.0, 2.0):
        exact = ref.kov_delta(e, m.amplified_epsilon, m.amplified_delta, k)
        got = acct.certificate(epsilon=e, method="cf")
        assert got.delta == pytest.approx(exact, rel=1e-9, abs=TINY)
        assert got.bound == "upper bound"  # the four-point pair is not the step's own pair
    # the amplification is a replace-one theorem: refused under add/remove, and bad input is named
    with pytest.raises(ValueError, match="replace_one"):
        PrivacyAccountant().compose(m)
    with pytest.raises(ValueError, match="sample_rate"):
        SampledWithoutReplacement(epsilon=1.0, delta=0.0, sample_rate=1.5)
    with pytest.raises(ValueError, match="delta"):
        SampledWithoutReplacement(epsilon=1.0, delta=1.0, sample_rate=0.5)
    # saved state rebuilds it through the registry
    from mechanisms import from_dict
    assert from_dict(m.to_dict()) == m
