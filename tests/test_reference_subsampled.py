"""Self-tests of the T-fold subsampled-Gaussian reference (tests/reference_subsampled.py), then the library's
certificates checked against it (certified upper >= reference >= certified lower bound)."""

import math

import mpmath as mp
import pytest
import reference as REF
import reference_subsampled as R

DIRS = ("remove", "add")


# ------------------------------------------------------------------------------------- self-tests
@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("q,sigma", [(0.01, 1.1), (0.3, 0.7), (1.0, 1.0)])
def test_T1_closed_form_equals_direct_quadrature(direction, q, sigma):
    """The k = 1 closed form (used inside every T) equals the direct 1-D quadrature of
    E_P[(1 - e^{eps - L})_+], including negative eps and eps beyond the add direction's loss range."""
    for eps in (-0.3, 0.0, 0.004, 0.05, 0.3, 1.5):
        a = R.sg_delta_ref(eps, sigma, q, 1, direction, as_mpf=True)
        b = R.sg_delta_quad1(eps, sigma, q, direction)
        assert float(a) == pytest.approx(b, rel=1e-14, abs=1e-300)
        # and the oracle already in tests/reference.py (written separately)
        c = REF.subsampled_gaussian_delta_single(eps, q, sigma, direction)
        assert float(a) == pytest.approx(c, rel=1e-14, abs=1e-300)


@pytest.mark.parametrize("direction", DIRS)
@pytest.mark.parametrize("T", [1, 2, 3])
def test_q1_is_the_gaussian_mechanism(direction, T):
    """q = 1: T steps of the Gaussian with mu = 1/sigma are the Gaussian with mu sqrt(T) (closed form
    Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2), Balle & Wang 2018)."""
    sigma = 1.3
    for eps in (0.0, 0.5, 2.0):
        ref = REF.gaussian_delta(eps, math.sqrt(T) / sigma)
        assert R.sg_delta_ref(eps, sigma, 1.0, T, direction, method="float") == pytest.approx(ref, rel=1e-13)
        if T <= 2 and eps == 0.5:
            v = R.sg_delta_ref(eps, sigma, 1.0, T, direction, method="mpmath")
            assert v == pytest.approx(ref, rel=1e-13)


@pytest.mark.parametrize("T", [1, 2])
def test_small_q_limit(T):
    """q -> 0: delta(0) -> 0; delta(0) <= T q erf(1/(2 sqrt 2 sigma)) (union bound on the T-fold TV;
    equality at T = 1, the exact TV of the pair)."""
    sigma = 1.0
    tv1 = math.erf(1 / (2 * math.sqrt(2) * sigma))
    prev = 1.0
    for q in (1e-2, 1e-4, 1e-6):
        for d in DIRS:
            v = R.sg_delta_ref(0.0, sigma, q, T, d, method="float")
            assert v <= T * q * tv1 * (1 + 1e-12)
            if T == 1:
                assert v == pytest.approx(q * tv1, rel=1e-12)
            assert v < prev
        prev = v
    assert R.sg_delta_ref(0.0, sigma, 0.0, T) == 0.0


@pytest.mark.parametrize("direction,eps,tol", [("remove", 0.5, 1e-11), ("add", 0.3, 1e-9)])
def test_T2_equals_mgf_inversion(direction, eps, tol):
    """T = 2 by the output-space recursion (mpmath) equals the numerical inversion of M(z)^2 along
    Re z = 1 (an unrelated route: Laplace inversion; truncation at t = 100 leaves ~1e-12 / ~3e-10)."""
    ref = R.sg_delta_ref(eps, 1.0, 0.5, 2, direction)
    mgf = R.sg_delta_mgf(eps, 1.0, 0.5, 2, direction, t_max=100.0, nt=400)
    assert mgf == pytest.approx(ref, rel=tol)


@pytest.mark.slow
@pytest.mark.parametrize("eps,sigma,q", [(0.2, 1.0, 0.2), (1.0, 0.7, 0.2)])
def test_T2_equals_mgf_inversion_slow(eps, sigma, q):
    ref = R.sg_delta_ref(eps, sigma, q, 2)
    assert R.sg_delta_mgf(eps, sigma, q, 2, t_max=400.0, nt=1600) == pytest.approx(ref, rel=2e-9)


def test_T2_precision_increase():
    """dps 30 vs dps 45 (error estimate of the mpmath route): agreement far below the declared 1e-20."""
    with mp.workdps(60):
        a = R.sg_delta_ref(0.3, 1.1, 0.01, 2, dps=30, as_mpf=True)
        b = R.sg_delta_ref(0.3, 1.1, 0.01, 2, dps=45, as_mpf=True)
        assert abs(a - b) <= mp.mpf("1e-20") * b


@pytest.mark.parametrize("direction,eps,q,sigma", [("remove", 0.3, 0.01, 1.1), ("add", 0.005, 0.01, 1.1),
                                                   ("remove", 1.0, 0.5, 0.5), ("add", 0.2, 0.2, 0.8)])
def test_float_route(direction, eps, q, sigma):
    """The float64 route equals the mpmath route at T = 2 (1e-13) and is stable under node refinement
    (panels halved, 20 instead of 12 nodes) at T = 3 (1e-12): its declared error."""
    a = R.sg_delta_ref_np(eps, sigma, q, 2, direction)
    assert a == pytest.approx(R.sg_delta_ref(eps, sigma, q, 2, direction, method="mpmath"), rel=1e-13)
    if direction == "remove" and q == 0.01:
        b = R.sg_delta_ref_np(eps, sigma, q, 3, direction)
        c = R.sg_delta_ref_np(eps, sigma, q, 3, direction, panel=0.25, n=20)
        assert b == pytest.approx(c, rel=1e-12)


@pytest.mark.slow
def test_T3_float_equals_mpmath():
    """The nested mpmath tanh-sinh (minutes) equals the float route at T = 3."""
    m = R.sg_delta_ref(0.3, 1.1, 0.01, 3, "remove", dps=15, method="mpmath")
    assert R.sg_delta_ref_np(0.3, 1.1, 0.01, 3, "remove") == pytest.approx(m, rel=1e-12)


@pytest.mark.parametrize("T", [2, 3])
def test_within_fft_bracket(T):
    """Inside the rigorous FFT bracket of tests/reference.py (a third, lattice-based method)."""
    for d, eps in (("remove", 0.3), ("add", 0.005)):
        lo, hi = REF.subsampled_gaussian_delta(eps, 0.01, 1.1, T, d)
        v = R.sg_delta_ref(eps, 1.1, 0.01, T, d)
        assert lo * (1 - 1e-12) <= v <= hi * (1 + 1e-12)


def test_known_value_spec08():
    """Near-atomic reference table (dp-accounting PLD at grid 1e-5): q = 0.01, sigma = 1.1, T = 1, delta =
    1e-5 -> eps = 0.142291 (6 digits, max over
    the directions; the remove direction is the larger)."""
    e = R.sg_eps_ref(1e-5, 1.1, 0.01, 1, "max")
    assert round(e, 6) == 0.142291
    assert e == R.sg_eps_ref(1e-5, 1.1, 0.01, 1, "remove")
    # the root really is a root (to the reference accuracy)
    assert R.sg_delta_ref(e, 1.1, 0.01, 1, "remove") == pytest.approx(1e-5, rel=1e-10)


def test_eps_ref_inverts_delta():
    for d in DIRS:
        e = R.sg_eps_ref(1e-3, 0.8, 0.2, 2, d)
        assert R.sg_delta_ref(e, 0.8, 0.2, 2, d, method="mpmath") == pytest.approx(1e-3, rel=1e-10)


def test_reference_bad_input():
    with pytest.raises(ValueError, match="T must be"):
        R.sg_delta_ref(0.1, 1.0, 0.1, 4)
    with pytest.raises(ValueError, match="direction"):
        R.sg_delta_ref(0.1, 1.0, 0.1, 1, "both")
    with pytest.raises(ValueError, match="sigma"):
        R.sg_delta_ref(0.1, 0.0, 0.1, 1)


# ------------------------------------------------------------------------------------- the library
def _ref_delta_max(eps, sigma, q, T):
    # the float route (checked against the mpmath route above to 1e-13) keeps the default run short
    return max(R.sg_delta_ref(eps, sigma, q, T, d, method="float") for d in DIRS)


# (q, sigma, T, eps, delta): near-atomic (q = 0.01), moderate, and q = 1
GRID = [(0.01, 1.1, 1, 0.1, 1e-5), (0.01, 1.1, 3, 0.2, 1e-5), (0.2, 0.8, 2, 1.0, 1e-5),
        (0.5, 1.0, 2, 1.0, 1e-3)]
GRID_SLOW = [(q, s, T, e, d) for q in (0.001, 0.05, 0.3) for s in (0.6, 1.0, 2.0) for T in (1, 2, 3)
             for e, d in ((0.05, 1e-3), (0.5, 1e-6))]


def _check_library(q, sigma, T, eps, delta):
    import accountant

    acct = accountant.PrivacyAccountant().step(sigma=sigma, sample_rate=q, steps=T)
    # delta query
    c = acct.certificate(epsilon=eps)
    ref = _ref_delta_max(eps, sigma, q, T)
    assert c.delta >= ref * (1 - 1e-11)
    if c.lower_bound is not None:
        assert c.lower_bound <= ref * (1 + 1e-11)
    # epsilon query: delta is decreasing in eps, so eps_upper >= eps_true <=> delta_ref(eps_upper) <= delta
    c = acct.certificate(delta=delta)
    assert _ref_delta_max(c.epsilon, sigma, q, T) <= delta * (1 + 1e-11)
    if c.lower_bound is not None and c.lower_bound > 0:  # (eps >= 0: a lower bound 0 is always valid)
        assert _ref_delta_max(c.lower_bound, sigma, q, T) >= delta * (1 - 1e-11)


@pytest.mark.parametrize("q,sigma,T,eps,delta", GRID)
def test_library_brackets_reference(q, sigma, T, eps, delta):
    _check_library(q, sigma, T, eps, delta)


@pytest.mark.slow
@pytest.mark.parametrize("q,sigma,T,eps,delta", GRID_SLOW)
def test_library_brackets_reference_slow(q, sigma, T, eps, delta):
    _check_library(q, sigma, T, eps, delta)


def test_tiny_delta_relative_accuracy():
    """Far-tail values (delta ~ 1e-53 .. 1e-127): mp.quad's absolute stopping rule is neutralised by the
    integrand scaling, and the float route widens its x-range; all routes agree relatively."""
    for eps in (1.0, 5.0):
        a = R.sg_delta_quad1(eps, 2.0, 0.001)
        b = R.sg_delta_ref(eps, 2.0, 0.001, 1)
        assert a == pytest.approx(b, rel=1e-13)
    m = R.sg_delta_ref(1.0, 2.0, 0.001, 2, method="mpmath")
    f = R.sg_delta_ref(1.0, 2.0, 0.001, 2, method="float")
    assert 1e-54 < m < 1e-52
    assert f == pytest.approx(m, rel=1e-12)
