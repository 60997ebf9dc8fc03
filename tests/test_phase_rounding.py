"""Phase rounding of the atoms / closed-form kernels at large |Im s|, against 30-digit references.

The characteristic-function route evaluates log-MGFs on lines s = c + i t with t up to ~1e5.  A kernel
forming e^{i t l} from rounded losses l is off by ~ulps of t |l|, which outgrows a constant declared
error (``log_mgf_error``); ``log_mgf_phase_error(c, t_max)`` must cover the rest.  The references
below are built from the mechanisms' definitions in mpmath (not from the kernels' formulas), and each
case first shows that the constant alone is NOT enough at the largest t (the gap the term closes).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from mechanisms import DiscreteGaussian, Laplace, SubsampledGaussian
from mechanisms._numerics import (
    atoms_phase_error,
    discrete_log_mgf,
    exp_pieces_log_mgf,
    phase_error,
)
from mechanisms.svt.stagewise import StageWiseSVT

mp.mp.dps = 30


def _rel_err(log_value: complex, ref: mp.mpc, ref_c: mp.mpf) -> float:
    """|exp(log_value) - ref| / ref_c (the contract's form: relative to M(Re s))."""
    return float(abs(mp.exp(mp.mpc(log_value)) - ref) / abs(ref_c))


def test_rr_power_phase_rounding_vs_closed_form():
    """StageWiseSVT = e^{log_scale} RR(eps)^m: m log M_RR(s) loses ~m ulps of t eps per node.  Reference:
    the RR pair's MGF (p e^{s eps} + (1 - p) e^{-s eps})^m, p = e^eps / (1 + e^eps), in mpmath."""
    m = StageWiseSVT("laplace", 1.0, "laplace", 2.0, cutoff=50, stage_cutoff=1, stage_delta=1e-20)
    eps, k, log_scale = m._rr_power()
    e = mp.mpf(eps)
    p = mp.exp(e) / (1 + mp.exp(e))

    def ref(s):
        s = mp.mpc(s)
        return mp.exp(mp.mpf(log_scale)) * (p * mp.exp(s * e) + (1 - p) * mp.exp(-s * e)) ** k

    c = 0.5
    ref_c = ref(c)
    const = m.log_mgf_error
    for t in (1e3, 1e4, 1e5):
        s = complex(c, t)
        err = _rel_err(complex(m.log_mgf(np.array([s]))[0]), ref(s), ref_c)
        assert err <= math.expm1(const + m.log_mgf_phase_error(c, t)), (t, err)
    assert err > 100 * math.expm1(const)  # (t = 1e5: 1.4e-9 against the constant 5.3e-13)
    # at t = 0 only the exponents' |c|-growing part remains (m times |c| 8 ulps of eps), 0 at c = 0
    assert m.log_mgf_phase_error(c, 0.0) == pytest.approx(k * c * 8 * 2.0**-53 * eps, rel=1e-6)
    assert m.log_mgf_phase_error(0.0, 0.0) == 0.0


def test_discrete_gaussian_phase_rounding_vs_definition():
    """DiscreteGaussian(0.7): the loss (Delta^2 - 2 x Delta) / (2 sigma^2) under P(x) ~ e^{-x^2/(2 sigma^2)},
    summed over x in mpmath (every atom above 1e-300 included)."""
    sigma = 0.7
    m = DiscreteGaussian(sigma=sigma)
    sg2 = 2 * mp.mpf(sigma) ** 2
    xs = range(-60, 61)
    z = mp.fsum(mp.exp(-mp.mpf(x) ** 2 / sg2) for x in xs)

    def ref(s):
        s = mp.mpc(s)
        return mp.fsum(mp.exp(-mp.mpf(x) ** 2 / sg2 + s * (1 - 2 * mp.mpf(x)) / sg2) for x in xs) / z

    c = 1.0
    ref_c = ref(c)
    const = m.log_mgf_error
    worst = 0.0
    for t in (1e3, 1e4, 3e4, 1e5):
        s = complex(c, t)
        err = _rel_err(complex(m.log_mgf(np.array([s]))[0]), ref(s), ref_c)
        assert err <= math.expm1(const + m.log_mgf_phase_error(c, t)), (t, err)
        worst = max(worst, err / math.expm1(const))
    assert worst > 2.0  # the constant alone fails (1.6e-11 against 6.2e-13 at t = 1e5)


def test_atoms_and_pieces_kernels_used_by_the_contour():
    """The contour evaluates each mechanism's atoms A_j (``discrete_log_mgf``) and exponential pieces
    C_j (``exp_pieces_log_mgf``) itself; their phase rounding is ``atoms_phase_error`` /
    ``phase_error`` over twice the largest |loss|.  References: the sums and integrals in mpmath."""
    rng = np.random.default_rng(3)
    losses = np.sort(rng.uniform(-3.0, 3.0, 40)) * (1 + 1e-3 * rng.standard_normal(40))
    masses = rng.dirichlet(np.ones(40)) * 0.9
    c = 0.7
    ref_c = mp.fsum(mp.mpf(float(w)) * mp.exp(c * mp.mpf(float(v)))
                    for v, w in zip(losses, masses, strict=True))
    for t in (1e4, 1e5, 1e6):
        s = complex(c, t)
        ref = mp.fsum(mp.mpf(float(w)) * mp.exp(mp.mpc(s) * mp.mpf(float(v)))
                      for v, w in zip(losses, masses, strict=True))
        err = _rel_err(complex(discrete_log_mgf(np.array([s]), losses, masses)[0]), ref, ref_c)
        bound = atoms_phase_error(losses, masses, c, t) + 64 * 2.0**-53
        assert err <= bound, (t, err, bound)
    # Laplace(a)'s continuous part: density e^{(l - a)/2} / 4 on (-a, a)
    a = 3.7
    lap = Laplace(scale=1.0 / a)
    lo, hi, logw, rate = lap.pld_exp_pieces("remove")
    assert math.isclose(float(hi[0]), a)

    def ref_piece(s):
        z = mp.mpc(s) + mp.mpf(float(rate[0]))
        h, g = mp.mpf(float(hi[0])), mp.mpf(float(lo[0]))
        return mp.exp(mp.mpf(float(logw[0]))) * (mp.exp(z * h) - mp.exp(z * g)) / z

    ref_c = ref_piece(c)
    for t in (1e4, 1e5, 1e6):
        s = complex(c, t)
        val = complex(exp_pieces_log_mgf(np.array([s]), lo, hi, logw, rate)[0])
        err = _rel_err(val, ref_piece(s), ref_c)
        assert err <= phase_error(t, 2.0 * a) + 64 * 2.0**-53, (t, err)


def test_phase_error_forms():
    """0 at t = 0; linear in t; the pure-DP default covers phases of loss differences (2 eps)."""
    assert phase_error(0.0, 5.0) == 0.0
    assert math.isclose(phase_error(2e4, 1.0), 2 * phase_error(1e4, 1.0))
    lap = Laplace(scale=0.5)
    assert lap.log_mgf_phase_error(1.0, 1e4) == phase_error(1e4, 2.0 * lap.pure_epsilon)
    assert atoms_phase_error(np.empty(0), np.empty(0), 1.0, 1e4) == 0.0


def test_gaussian_pair_phase_rounding_vs_closed_form():
    """GaussianPair: the terms of log M(s) grow with t while their sum need not, so the constant error
    fails at large t (8.8x at t = 3.9e5, 65x for shift 30, precision 1e-6 at t = 1e6).  Reference: the
    non-central chi-square MGF sum_i [s kappa_i - log(1 - s k_i)/2 + s^2 beta_i^2 / (2 (1 - s k_i))] in
    mpmath from the pair's parameters (checked against direct integration of the densities by the
    audit, 2e-17)."""
    from mechanisms import GaussianPair

    def ref_log_m(shifts, precs, s):
        tot = mp.mpc(0)
        for d, a in zip(shifts, precs, strict=True):
            d, a = mp.mpf(d), mp.mpf(a)
            k, beta, kappa = a - 1, -a * d, a * d * d / 2 - mp.log(a) / 2
            one = 1 - s * k
            tot += s * kappa - mp.log(one) / 2 + s * s * beta * beta / (2 * one)
        return tot

    worst = 0.0
    for shifts, precs, c, ts in (([0.5], [0.8], 1.0, (3.9e4, 3.9e5, 1.2e6)),
                                 ([30.0], [1e-6], 0.5, (1e2, 1e4, 1e6))):
        m = GaussianPair(shifts, precs)
        log_mc = ref_log_m(shifts, precs, mp.mpc(c)).real
        const = m.log_mgf_error
        for t in ts:
            val = complex(m.log_mgf(np.array([complex(c, t)]))[0])
            ref = ref_log_m(shifts, precs, mp.mpc(c, t))
            err = float(abs(mp.exp(mp.mpc(val) - log_mc) - mp.exp(ref - log_mc)))
            assert err <= math.expm1(const + m.log_mgf_phase_error(c, t)), (shifts, t, err)
            worst = max(worst, err / math.expm1(const))
        assert m.log_mgf_phase_error(c, 0.0) == 0.0
    assert worst > 8.0  # the constant alone fails


def _gl_integral(f, a: float, b: float, panels: int):
    """int_a^b f by 20-point Gauss-Legendre on equal panels, in mpmath (f analytic, each panel short)."""
    xs, ws = np.polynomial.legendre.leggauss(20)
    xs = [mp.mpf(float(v)) for v in xs]
    ws = [mp.mpf(float(v)) for v in ws]
    a, b = mp.mpf(a), mp.mpf(b)
    h = (b - a) / panels
    tot = mp.mpc(0)
    for k in range(panels):
        mid = a + (k + mp.mpf(0.5)) * h
        tot += sum(w * f(mid + h / 2 * x) for x, w in zip(xs, ws, strict=True)) * h / 2
    return tot


def test_mixture_and_fixed_size_kernels_vs_quadrature():
    """The trapezoid (mixture) and half-line Gauss-Legendre (fixed-size, replace-one) kernels at a
    contour node far up the line stay within their declared error plus the phase-rounding term.
    References: the defining integrals M(s) = int phi(x) g(x)^{1+s} dx (mixture, remove) and
    a_0 + int_{mu/2}^inf phi(x) [e^{(s+1) l(x)} + e^{-s l(x)}] dx (fixed size) in mpmath, on panels
    where the phase turns by < 2.5 rad (25 digits; the integrands beyond the ends are below 1e-40)."""
    from mechanisms import GaussianMixture
    from mechanisms.fixed_size import FixedSizeGaussianReplaceOne

    mp.mp.dps = 25
    try:
        mix = GaussianMixture(1.0, [0.0, 1.0], [0.99, 0.01])
        c, t = 2.0, 150.0

        def log_g(x):
            return mp.log(mp.mpf("0.99") + mp.mpf("0.01") * mp.exp(x - mp.mpf(0.5)))

        def integrand(s):
            return lambda x: mp.exp(-x * x / 2 + (1 + s) * log_g(x)) / mp.sqrt(2 * mp.pi)

        ref_c = _gl_integral(integrand(mp.mpf(c)), -14.0, 20.0, 64)
        ref = _gl_integral(integrand(mp.mpc(c, t)), -14.0, 20.0, 2400)
        err = _rel_err(complex(mix.log_mgf(np.array([complex(c, t)]))[0]), ref, ref_c)
        assert err <= math.expm1(mix.log_mgf_error + mix.log_mgf_phase_error(c, t)), err
        assert err < 1e-13  # (measured 2e-15: the reference resolves the kernel's own accuracy)
        assert mix.log_mgf_phase_error(c, t) > 0.0 == mix.log_mgf_phase_error(c, 0.0)

        fs = FixedSizeGaussianReplaceOne(sigma=1.0, batch_size=100, dataset_size=10000)  # q 0.01, mu 2
        q, mu = mp.mpf(fs.sample_rate), mp.mpf(fs.mu)
        c, t = 2.0, 100.0

        def ell(x):
            return mp.log(1 - q + q * mp.exp(mu * x - mu * mu / 2))

        def fs_ref(s):
            f = lambda x: mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi) * (  # noqa: E731
                mp.exp((s + 1) * ell(x)) + mp.exp(-s * ell(x)))
            return mp.mpf(fs.atom_mass) + _gl_integral(f, float(mu / 2), 16.0, 64 if s.imag == 0 else 2400)

        ref_c = fs_ref(mp.mpc(c))
        err = _rel_err(complex(fs.log_mgf(np.array([complex(c, t)]))[0]), fs_ref(mp.mpc(c, t)), ref_c)
        assert err <= math.expm1(fs.log_mgf_error + fs.log_mgf_phase_error(c, t)), err
        assert err < 1e-13
    finally:
        mp.mp.dps = 30


def test_a_nan_declared_error_fails_the_line_not_the_bound(monkeypatch):
    """Whatever mechanism declares a NaN phase-rounding error, ``ComposedPLD.mgf_err_at`` raises
    (FloatingPointError: the contour line counts as failed) instead of carrying the NaN into the node
    error terms, where min/max comparisons would silently drop it.  The accountant then answers from
    another route: a finite certificate that overlaps the unpatched one (both certified)."""
    from accountant import PrivacyAccountant
    from conversions.contour_pld import ComposedPLD
    from mechanisms import SubsampledGaussian

    def query():
        return PrivacyAccountant().step(sigma=1.1, sample_rate=0.01, steps=1000).certificate(delta=1e-5)

    ref = query()
    monkeypatch.setattr(SubsampledGaussian, "log_mgf_phase_error",
                        lambda self, c, t_max, direction="remove": float("nan"))
    pld = ComposedPLD([(SubsampledGaussian(sigma=1.1, sample_rate=0.01), 1000)])
    for t_max in (0.0, 100.0):  # (the real point too: the term also carries |c|-growing rounding)
        with pytest.raises(FloatingPointError):
            pld.mgf_err_at(2.0, t_max)
    got = query()
    assert math.isfinite(got.epsilon) and math.isfinite(got.lower_bound)
    assert got.lower_bound <= ref.epsilon and ref.lower_bound <= got.epsilon


def _dg_reference_atoms(sigma: float, d: int, x_max: int):
    """DiscreteGaussian's enumerated atoms from the definition: losses Delta (Delta - 2x) / (2 sigma^2)
    and masses e^{-x^2 / (2 sigma^2)} / Z, Z summed 200 terms past the window (the rest < 1e-300)."""
    s2 = 2 * mp.mpf(sigma) ** 2
    z = mp.fsum(mp.exp(-mp.mpf(x) ** 2 / s2) for x in range(-x_max - 200, x_max + 201))
    return [(mp.mpf(d * (d - 2 * x)) / s2, mp.exp(-mp.mpf(x) ** 2 / s2) / z)
            for x in range(-x_max, x_max + 1)]


def _dlap_reference_atoms(t: float, d: int):
    """DiscreteLaplace's Delta + 1 atoms from the definition (module docstring of mechanisms.discrete)."""
    t = mp.mpf(t)
    r = mp.exp(-1 / t)
    out = [(d / t, 1 / (1 + r))]
    out += [((d - 2 * x) / t, (1 - r) * r**x / (1 + r)) for x in range(1, d)]
    return out + [(-d / t, r**d / (1 + r))]


@pytest.mark.parametrize("kind, param, d", [
    ("dg", 0.05, 1), ("dg", 0.2, 1), ("dg", 0.445, 7), ("dg", 1.0, 3),
    ("dlap", 0.02, 1), ("dlap", 0.193, 2), ("dlap", 0.03, 5),
])
def test_lattice_log_mgf_at_large_real_c_vs_definition(kind, param, d):
    """log M(c) of DiscreteGaussian / DiscreteLaplace at real c up to 200, against the atoms of their
    definitions in 50-digit mpmath: |computed - exact| (``log_mgf_real`` and ``log_mgf`` at c + 0i) stays
    within the declared ``log_mgf_error`` + ``log_mgf_phase_error(c, 0)`` at every c, the constant alone
    does not (the rounded positions, 4 u |L| for the discrete Gaussian, move log M by ~|c| u |L|: 1.6e-11
    at c = 200 for sigma = 0.05 against the constant 1.8e-13), and the bound is within 100x of the worst
    error observed (not vacuous)."""
    from mechanisms import DiscreteGaussian, DiscreteLaplace

    with mp.workdps(50):
        if kind == "dg":
            m = DiscreteGaussian(sigma=param, sensitivity=d)
            atoms = _dg_reference_atoms(param, d, (m._lattice()[0].size - 1) // 2)
        else:
            m = DiscreteLaplace(scale=param, sensitivity=d)
            atoms = _dlap_reference_atoms(param, d)
        worst_ratio, worst_vs_const = 0.0, 0.0
        for c in (1.0, 5.0, 20.0, 50.0, 100.0, 200.0):
            exact = mp.log(mp.fsum(w * mp.exp(mp.mpf(c) * l) for l, w in atoms))
            declared = m.log_mgf_error + m.log_mgf_phase_error(c, 0.0)
            for got in (m.log_mgf_real(c), complex(m.log_mgf(np.array([complex(c)]))[0]).real):
                err = float(abs(mp.mpf(got) - exact))
                assert err <= declared, (c, err, declared)
                worst_ratio = max(worst_ratio, err / declared)
                worst_vs_const = max(worst_vs_const, err / m.log_mgf_error)
    assert worst_ratio >= 0.01, worst_ratio  # (observed 0.08-0.12 of the bound)
    assert worst_vs_const > 1.0, worst_vs_const  # the constant alone fails at some c (1.4x to 88x)


def test_composed_pld_adds_the_exponent_error_on_real_points_and_lines():
    """``ComposedPLD.mgf_err_at`` carries the entries' |c|-growing error at the real point (t_max = 0, the
    Chernoff bounds) as well as on lines (t_max > 0, the quadrature, with the atoms it evaluates itself:
    positions within ``INPUT_ULPS`` ulps of 1 + |l|)."""
    from conversions.atoms import INPUT_ULPS
    from conversions.contour_pld import ComposedPLD
    from mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian
    from mechanisms._numerics import EXPONENT_ULPS

    dg = DiscreteGaussian(sigma=0.2)
    lmax = float(np.max(np.abs(dg._lattice()[0])))  # 187.5
    pld = ComposedPLD([(dg, 3), (Gaussian(sigma=1.0), 2)])
    c = 100.0
    per_dg = c * (4.0 + EXPONENT_ULPS) * 2.0**-53 * lmax  # positions 4 u |L| plus the exponents' rounding
    assert pld.mgf_err_at(c) == pytest.approx(pld.mgf_err + 3 * per_dg, rel=1e-6)
    assert pld.mgf_err_at(0.0) == pld.mgf_err
    # a purely atomic composition: the route evaluates the atoms A_j itself on the lines
    dl = DiscreteLaplace(scale=0.5)
    pld = ComposedPLD([(dg, 3), (dl, 2)])
    assert pld.has_atoms
    t = 50.0
    own = (pld.mgf_err_at(c, t) - pld.mgf_err - 3 * dg.log_mgf_phase_error(c, t)
           - 2 * dl.log_mgf_phase_error(c, t))
    want = 0.0
    for m, k in ((dg, 3), (dl, 2)):
        l, w = m.pld_atoms()
        lm = float(np.max(np.abs(l)))
        pos = c * (INPUT_ULPS * (1 + lm) + EXPONENT_ULPS * lm) * 2.0**-53
        want += k * (atoms_phase_error(l, w, c, t) + pos)
    assert own == pytest.approx(want, rel=1e-6)


def _sg_log_mgf_reference(q: float, mu: float, c: float, add: bool) -> mp.mpf:
    """log E_N(0,1)[(1 - q + q e^{mu x - mu^2/2})^w] with w = c + 1 (remove: E_P[e^{cL}]) or -c (add), by
    mpmath quadrature at 40 digits around the integrand's peak (found on a grid of step 1/4)."""
    with mp.workdps(40):
        qm, mum, w = mp.mpf(q), mp.mpf(mu), (-c if add else c + 1)

        def lg(x):
            return -x**2 / 2 + w * mp.log(1 - qm + qm * mp.exp(mum * x - mum**2 / 2))

        xs = [mp.mpf(i) / 4 for i in range(-400, int(4 * (abs(w) * mu + 50)))]
        peak = max(xs, key=lg)
        top = lg(peak)
        pts = [-mp.inf] + [peak + k for k in (-40, -20, -10, -5, -2, 0, 2, 5, 10, 20, 40)] + [mp.inf]
        val = mp.quad(lambda x: mp.exp(lg(x) - top), pts) / mp.sqrt(2 * mp.pi)
        return top + mp.log(val)


@pytest.mark.parametrize("q, sigma, c, add", [(1e-3, 0.3, 20.0, False), (1e-3, 0.3, 100.0, False),
                                              (1e-2, 0.5, 100.0, False), (1e-2, 0.5, 1000.0, False),
                                              (1e-5, 0.4, 100.0, False), (0.5, 2.0, 300.0, False),
                                              (0.5, 2.0, 1000.0, True), (0.1, 1.0, 1000.0, True)])
def test_subsampled_gaussian_log_mgf_at_large_real_c_vs_quadrature(q, sigma, c, add):
    """The subsampled Gaussian's log M(c) far out on the real axis (log M up to ~2e6) against a 40-digit
    quadrature.  Its exponents -x^2/2 + w l(x) round by ulps of their size, which grows with c and is
    not in the constant ``log_mgf_error`` (2e-13): the characteristic-function route covers it with its
    rounding margin of 4 ulps of |log M| per node (``node_log_err``, with |shift| on top) and 16 (n + 4)
    ulps in its Chernoff caps.  This pins that contract: the error stays within the constant plus 4 ulps
    of |log M| (measured at most 0.88 of it, at q = 1e-3, sigma = 0.3, c = 100)."""
    m = SubsampledGaussian(sigma=sigma, sample_rate=q)
    d = "add" if add else "remove"
    got = m.log_mgf_real(c, d)
    ref = _sg_log_mgf_reference(q, 1.0 / sigma, c, add)
    assert abs(got - float(ref)) <= m.log_mgf_error + 4.0 * 2.0**-53 * abs(got)
