"""Near-atomic split of the subsampled Gaussian (conversions.split, mechanisms.subsampled parts).

References, all independent of the code under test:
* mpmath quadrature of the parts' weighted MGFs in the output x (and the closed-form part masses);
* the unsplit subsampled-Gaussian MGF (the parts must add up to it: a + b = M);
* mpmath's normal CDF for ``log_ndtr``;
* the plain contour route where it is tight (q = 4e-3, T = 1000: relative width 1e-8), and the
  discretised-PLD route (both certified: the brackets must intersect);
* the T <= 3 mpmath reference of ``tests/reference_subsampled.py``.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from reference_subsampled import sg_delta_ref

from accountant import PrivacyAccountant
from conversions import contour, pld, split
from mechanisms import SubsampledGaussian
from mechanisms._poisson_kernels import log_ndtr
from mechanisms.subsampled_part import SubsampledGaussianPart


def _mp_part_mgf(q, sigma, x_cut, tau, part, s, direction, dps=30):
    """E_P[w(x) e^{s L}] by mpmath quadrature in the output x (unit sensitivity)."""
    with mp.workdps(dps):
        q, mu = mp.mpf(q), 1 / mp.mpf(sigma)
        s = mp.mpc(s)

        def ell(x):
            return mp.log(1 - q + q * mp.exp(mu * x - mu * mu / 2))

        def w(x):
            z = (x_cut - x) / tau if part == 0 else (x - x_cut) / tau
            return mp.ncdf(z)

        def f(x):
            lx = ell(x)
            ex = (s + 1) * lx if direction == "remove" else -s * lx
            return mp.npdf(x) * w(x) * mp.exp(ex)

        pts = [-40, -10, x_cut - 8 * tau, x_cut - tau, x_cut, x_cut + tau, x_cut + 8 * tau, 20, 60]
        pts = sorted(set(float(p) for p in pts))
        return complex(mp.quad(f, pts, maxdegree=10))


# ------------------------------------------------------------------------------------ primitives
@pytest.mark.parametrize("z", [-1e3, -45.0, -38.5, -20.0, -8.01, -8.0, -7.99, -3.0, -1e-3, 0.0, 0.7, 5.0,
                               9.5])
def test_log_ndtr_matches_mpmath(z):
    with mp.workdps(40):
        exact = float(mp.log(mp.ncdf(z)))
    got = log_ndtr(z)
    assert abs(got - exact) <= 4e-16 * max(1.0, abs(exact))


def test_core_part_far_past_its_cut_matches_mpmath():
    """A core part whose tilt carries its mass 42 tau past the cut (q = 2.5e-4, sigma = 1.75, c = 196):
    the weight's log Phi ~ -880 sits at the integrand's peak.  The MGF matches mpmath quadrature within
    the declared error (it was 5.6e-4 high while log_ndtr took the leading asymptotic term past 40)."""
    q, sigma, x_cut, tau, c = 2.545659670236396e-4, 1.7504131047397438, 5.5107985, 0.4896888, 196.21616
    part = SubsampledGaussianPart(sigma, q, 1.0, x_cut, tau, 0)
    with mp.workdps(30):
        qq, mu = mp.mpf(q), 1 / mp.mpf(sigma)

        def f(x):
            ell = mp.log(1 - qq + qq * mp.exp(mu * x - mu * mu / 2))
            return mp.npdf(x) * mp.ncdf((x_cut - x) / tau) * mp.exp((c + 1) * ell)

        ref = float(mp.log(mp.quad(f, [-20, 0, 10, 20, 24, 26, 28, 32, 40, 60])))
    got = part.log_mgf_real(c)
    assert abs(got - ref) <= part.log_mgf_error, (got, ref)
    line = part.log_mgf(np.array([c + 0j, c + 0.5j]))  # (the line kernel: its node t = 0)
    assert abs(line[0].real - ref) <= part.log_mgf_error, (line[0], ref)


@pytest.mark.parametrize("q,sigma,x_cut,tau", [(1e-3, 0.8, 4.07, 0.123), (1e-5, 1.0, 6.6, 0.076),
                                               (0.05, 1.5, 1.0, 0.5)])
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_parts_add_up_to_the_mgf_and_match_mpmath(q, sigma, x_cut, tau, direction):
    sg = SubsampledGaussian(sigma=sigma, sample_rate=q)
    a = SubsampledGaussianPart(sigma, q, 1.0, x_cut, tau, 0)
    b = SubsampledGaussianPart(sigma, q, 1.0, x_cut, tau, 1)
    ss = np.array([0.0, 0.5, 3.0, 2.0 + 40.0j, 0.3 + 300.0j, 5.0 + 2000.0j])
    la, lb, lm = a.log_mgf(ss, direction), b.log_mgf(ss, direction), sg.log_mgf(ss, direction)
    for s, x, y, z in zip(ss, la, lb, lm, strict=True):
        scale = math.exp(sg.log_mgf_real(s.real, direction))  # errors are declared relative to M(Re s)
        assert abs(np.exp(x) + np.exp(y) - np.exp(z)) <= 1e-12 * scale
    # the masses have a closed form (Phi of the cut against each mixture component)
    for m in (a, b):
        assert math.exp(m.log_mgf_real(0.0, direction)) == pytest.approx(m.mass(direction), rel=1e-13)
    # against mpmath at a few points (both parts, relative to the part's value on the real line)
    for m in (a, b):
        for s in (1.0, 2.0 + 40.0j):
            ref = _mp_part_mgf(q, sigma, x_cut, tau, m.part, s, direction)
            got = complex(np.exp(m.log_mgf(np.array([s]), direction)[0]))
            scale = math.exp(m.log_mgf_real(float(np.real(s)), direction))
            assert abs(got - ref) <= 1e-12 * scale


def test_line_kernel_equals_pointwise_kernel():
    """Nodes on one line take the line kernel (shared grid, rotations): same values as one by one."""
    a = SubsampledGaussianPart(0.8, 1e-3, 1.0, 4.07, 0.123, 1)
    ts = np.arange(0.0, 800.0, 3.7)
    line = a.log_mgf(4.0 + 1j * ts)
    single = np.array([a.log_mgf(np.array([4.0 + 1j * t]))[0] for t in ts[::17]])
    scale = math.exp(a.log_mgf_real(4.0))
    assert np.max(np.abs(np.exp(line[::17]) - np.exp(single))) <= 1e-13 * scale


@pytest.mark.parametrize("direction", ["remove", "add"])
def test_real_point_after_the_cost_bound_equals_the_kernel(direction):
    """At a real point whose x-window the work meter's cost bound already measured, log M integrates on
    that window without scanning again: the value must be the scanning kernel's, bit for bit."""
    from mechanisms.subsampled import sg_log_mgf_real

    measured = 0
    for q, sigma, x_cut, tau, part in ((1e-3, 1.0, 1.5, 0.3, 0), (1e-4, 0.5, 3.0, 1.0, 1),
                                       (0.01, 0.8, 0.5, 0.05, 1)):
        for c in (0.0, 0.01, 0.7, 4.0, 60.0):
            fresh = SubsampledGaussianPart(sigma, q, 1.0, x_cut, tau, part)
            metered = SubsampledGaussianPart(sigma, q, 1.0, x_cut, tau, part)
            metered.mgf_cost(0.0, c, direction)  # (measures the window where its closed form is too loose)
            ref = sg_log_mgf_real(c, fresh._kernel_args(direction))
            assert fresh.log_mgf_real(c, direction) == ref
            assert metered.log_mgf_real(c, direction) == ref
            measured += any(k[0] == "window" for k in metered._real if isinstance(k, tuple))
    assert measured >= 5  # (the windowed path ran)


@pytest.mark.parametrize("part", [0, 1])
def test_part_envelope_bounds_the_mgf(part):
    """exp(envelope(t)) >= |M_part(c + it')| for t' >= t (checked on a fine grid of t'), where the
    quadrature resolves |M|: its value minus its declared errors (value and phase rounding, relative to
    M(c)); far out the envelope's contour-shift bound is below that floor (at c = 60 the tilted big part
    is ~ a Gaussian of the loss, |M| ~ M(c) e^{-t^2/2}; mpmath checks of that bound are in
    tests/test_subsampled.py)."""
    m = SubsampledGaussianPart(1.0, 1e-4, 1.0, 6.0, 0.08, part)
    for c in (2.0, 60.0):
        env = m.log_envelope_fn(c)
        ts = np.linspace(0.0, 5000.0, 2001)
        vals = m.log_mgf(c + 1j * ts).real
        running = np.maximum.accumulate(vals[::-1])[::-1]  # sup over t' >= t on the grid
        lmc = m.log_mgf_real(c)
        err = math.expm1(m.log_mgf_error + m.log_mgf_phase_error(c, float(ts[-1])))
        with np.errstate(divide="ignore"):
            resolved = np.log(np.maximum(np.exp(running - lmc) - err, 0.0)) + lmc
        bounds = np.array([env(t) for t in ts])
        assert np.all(bounds >= resolved - 1e-12)
        assert np.all(np.diff(bounds) <= 1e-12)


def test_remainder_mgf_and_envelope():
    """R = (a + b)^k - a^k: its log-MGF against mpmath at real s, and its envelope against |R(c + it)|."""
    sg = SubsampledGaussian(sigma=1.0, sample_rate=1e-4)
    sc = split.SplitComposition([(sg, 1000)], "remove", 0.05)
    rem = sc.remainder
    a, b, k = rem.a, rem.b, rem.k
    for c in (0.0, 3.0, 20.0):
        la, lb = a.log_mgf_real(c), b.log_mgf_real(c)
        with mp.workdps(50):
            ref = mp.log((mp.exp(la) + mp.exp(lb)) ** k - mp.exp(la) ** k)
        assert rem.log_mgf_real(c) == pytest.approx(float(ref), rel=1e-12, abs=1e-12)
    c = 3.0
    env = rem.log_envelope_fn(c)
    ts = np.linspace(0.0, 3000.0, 1501)
    vals = rem.log_mgf(c + 1j * ts).real
    running = np.maximum.accumulate(vals[::-1])[::-1]
    assert np.all(np.array([env(t) for t in ts]) >= running - 1e-9)
    # the complex log-MGF (computed without cancellation) against the same difference in 60 digits
    s = np.array([c + 5j, c + 50j, c + 500j, c + 1500j])
    la, lb, got = a.log_mgf(s), b.log_mgf(s), rem.log_mgf(s)
    with mp.workdps(60):
        for i in range(s.size):
            x, y = mp.exp(mp.mpc(la[i].real, la[i].imag)), mp.exp(mp.mpc(lb[i].real, lb[i].imag))
            ref = (x + y) ** k - x**k
            assert abs(complex(mp.exp(mp.mpc(got[i].real, got[i].imag)) / ref) - 1.0) <= 1e-11


def test_splittable():
    sg = SubsampledGaussian(sigma=1.0, sample_rate=1e-3)
    assert split.splittable([(sg, 10)])
    assert not split.splittable([(SubsampledGaussian(sigma=1.0, sample_rate=1.0), 10)])
    assert not split.splittable([(sg, 10), (SubsampledGaussian(sigma=2.0, sample_rate=1e-3), 5)])
    with pytest.raises(ValueError, match="cannot be split"):
        split.SplitComposition([(SubsampledGaussian(sigma=1.0, sample_rate=0.0), 1)], "remove", 0.1)


# ------------------------------------------------------------------------------------ certified brackets
@pytest.mark.parametrize("direction", ["remove", "add"])
def test_split_inside_the_tight_plain_contour(direction):
    """Where the plain contour is exact-grade (q = 4e-3, T = 1000), the split's bracket must overlap it
    (both are certified) and be narrow."""
    sg = SubsampledGaussian(sigma=1.0, sample_rate=4e-3)
    entries = [(sg, 1000)]
    plain = contour.delta_bounds(contour.ComposedPLD(entries, direction), 0.5, 1e-8)
    assert plain.upper - plain.lower <= 1e-7 * plain.upper
    r = split.split_delta_bounds(entries, 0.5, direction, 1e-5)
    assert r.lower <= plain.upper and plain.lower <= r.upper
    assert r.upper - r.lower <= 1e-4 * r.upper
    e = split.split_epsilon_bounds(entries, 1e-6, direction, 1e-5)
    pe = contour.epsilon_bounds(contour.ComposedPLD(entries, direction), 1e-6, 1e-8)
    assert e.lower <= pe.upper and pe.lower <= e.upper
    assert e.upper - e.lower <= 1e-3 * e.upper


@pytest.mark.parametrize("T", [1, 2, 3])
def test_split_contains_the_mpmath_reference_small_T(T):
    q, sigma, eps = 1e-3, 0.7, 0.3
    entries = [(SubsampledGaussian(sigma=sigma, sample_rate=q), T)]
    for direction in ("remove", "add"):
        try:
            r = split.split_delta_bounds(entries, eps, direction, 1e-4)
        except (contour.WouldBeCapped, contour.WorkLimitReached):
            continue  # (a split that cannot answer leaves the query to the other routes)
        ref = sg_delta_ref(eps, sigma, q, T, direction)
        assert r.lower <= ref * (1 + 1e-12) and ref * (1 - 1e-12) <= r.upper


@pytest.mark.parametrize("q,sigma,T,delta", [(1e-4, 2.0, 10_000, 1e-5), (1e-5, 1.0, 100_000, 1e-8),
                                             (1e-6, 1.0, 100_000, 1e-5)])
def test_split_overlaps_the_pld_route_and_is_narrower(q, sigma, T, delta):
    entries = [(SubsampledGaussian(sigma=sigma, sample_rate=q), T)]
    for direction in ("remove", "add"):
        s = split.split_epsilon_bounds(entries, delta, direction, 1e-4)
        p = pld.pld_epsilon_bounds(entries, delta, direction, 1e-3)
        assert s.lower <= p.upper and p.lower <= s.upper
        assert s.upper - s.lower <= 1e-3 * s.upper


def test_accountant_uses_the_split_in_the_small_q_corner_and_stays_monotone():
    """DP-SGD at q = 1e-5: the certificate comes from the split contour, is narrow, and the certified
    epsilon grows with the steps (the sweep found it falling before)."""
    prev = 0.0
    for T in (10_000, 100_000, 1_000_000):
        acct = PrivacyAccountant()
        acct.step(sigma=1.0, sample_rate=1e-5, steps=T)
        c = acct.certificate(delta=1e-8)
        assert c.lower_bound is not None and c.epsilon - c.lower_bound <= max(1e-3 * c.epsilon, 1e-4)
        assert c.epsilon > prev
        prev = c.epsilon


@pytest.mark.parametrize("chain", [
    ("T", (1e-6, 1.0, 1e-5), [10_000, 100_000, 1_000_000]),
    ("T", (1e-4, 1.0, 1e-12), [10_000, 100_000, 1_000_000]),
    ("q", (1.0, 100_000, 1e-8), [1e-6, 3e-6, 1e-5, 3e-5]),
    ("sigma", (1e-5, 100_000, 1e-5), [0.4, 0.5, 0.7, 1.0]),
])
def test_small_q_chains_are_monotone_and_narrow(chain):
    """The sweep's small-q chains (non-monotone before the split: wide brackets in both routes): certified
    epsilon non-decreasing in T and q, non-increasing in sigma, each bracket within the sweep's target
    (1e-3 relative, or 1e-4 absolute below 0.1) -- the true epsilon is monotone, and narrow brackets
    must inherit that order."""
    kind, fixed, values = chain
    prev = None
    for v in values:
        if kind == "T":
            q, sigma, delta = fixed
            T = v
        elif kind == "q":
            sigma, T, delta = fixed
            q = v
        else:
            q, T, delta = fixed
            sigma = v
        acct = PrivacyAccountant()
        acct.step(sigma=sigma, sample_rate=q, steps=T)
        c = acct.certificate(delta=delta)
        width = c.epsilon - c.lower_bound
        assert width <= 1e-3 * c.epsilon or (c.epsilon < 0.1 and width <= 1e-4), (v, c.epsilon, c.lower_bound)
        if prev is not None:
            assert (c.epsilon <= prev) if kind == "sigma" else (c.epsilon >= prev), (v, c.epsilon, prev)
        prev = c.epsilon


def test_wide_bracket_tries_higher_cuts_and_intersects():
    """q = 1e-4, sigma = 1, T = 1000, delta ~ 1e-12: no cut leaves a negligible remainder, and the rule's
    choice (the lowest cut, eps/2) gives a bracket 0.23 wide (relative); a higher cut's bracket, a
    different decomposition of the same delta, must overlap it, and their intersection is narrow."""
    entries = [(SubsampledGaussian(sigma=1.0, sample_rate=1e-4), 1000)]
    eps = 0.0955
    low = split.split_delta_bounds(entries, eps, "remove", 1e-4, ell_cut=eps / 2)
    high = split.split_delta_bounds(entries, eps, "remove", 1e-4, ell_cut=2 * eps)
    auto = split.split_delta_bounds(entries, eps, "remove", 1e-4)
    assert low.lower <= high.upper and high.lower <= low.upper  # both certified: they overlap
    assert low.lower <= auto.lower <= auto.upper <= low.upper  # the rule's bracket, intersected
    assert auto.lower <= high.upper and high.lower <= auto.upper  # (its own high-cut pass: same overlap)
    assert auto.upper - auto.lower <= 1e-3 * auto.upper < low.upper - low.lower


def test_capped_core_alone_is_followed_by_the_low_cut(monkeypatch):
    """q = 1e-3, sigma = 0.3, T = 100, delta = 1e-5 (remove): the rule's high cut leaves the remainder to
    its Chernoff bound, and the core, which then holds the big steps' losses, has its contour capped.
    Two passes at that cut gave [10.9956, 11.0845] (8e-3 relative), so auto ran the discretised PLD as
    well. The pass after such a one now takes the low cut, and the bracket is narrow. Both certified
    brackets overlap each other and the discretised PLD's (an independent route)."""
    entries = [(SubsampledGaussian(sigma=0.3, sample_rate=1e-3), 100)]
    r = split.split_epsilon_bounds(entries, 1e-5, "remove", 1e-4)
    assert r.upper - r.lower <= 1e-4 * r.upper
    monkeypatch.setattr(split, "_core_capped_alone", lambda *_: False)
    old = split.split_epsilon_bounds(entries, 1e-5, "remove", 1e-4)
    assert old.upper - old.lower > 1e-3 * old.upper  # (the case the rule is for)
    assert r.lower <= old.upper and old.lower <= r.upper
    p = pld.pld_epsilon_bounds(entries, 1e-5, "remove", 1e-3)
    assert r.lower <= p.upper and p.lower <= r.upper


def test_capped_core_alone_is_followed_by_the_low_cut_for_delta(monkeypatch):
    """The same ledger's delta(11): three passes at the high cut 22.6 (the core capped alone) left
    [9.87e-6, 1.09e-5], and auto then spent 1.5 s on the discretised PLD.  The delta query now follows
    such a pass with the low cut too: a bracket within 1e-3, overlapping the old one and the discretised
    PLD's (an independent route, at 1e-2)."""
    entries = [(SubsampledGaussian(sigma=0.3, sample_rate=1e-3), 100)]
    r = split.split_delta_bounds(entries, 11.0, "remove", 1e-4)
    assert r.upper - r.lower <= 1e-3 * r.upper
    p = pld.pld_delta_bounds(entries, 11.0, "remove", 1e-2)
    assert r.lower <= p.upper and p.lower <= r.upper
    monkeypatch.setattr(split, "_core_capped_alone", lambda *_: False)
    old = split.split_delta_bounds(entries, 11.0, "remove", 1e-4)
    assert old.upper - old.lower > 1e-2 * old.upper  # (the case the rule is for)
    assert r.lower <= old.upper and old.lower <= r.upper


def test_low_cut_with_a_negligible_core_gives_way_to_the_high_cut(monkeypatch):
    """q = 1e-4, sigma = 1, T = 1000, delta = 1e-12: at eps ~ 0.097 no cut leaves the remainder negligible.
    At the low cut eps/2 the core is negligible, so the remainder there is nearly the whole ledger: its
    bracket is over 1e-3 wide (it was 1.1e-2, and the high cut was then tried as well). The high cut is
    now taken at once: no part is integrated at a cut below eps/1.5, the bracket is narrow, its cut lies
    above eps, and the low cut's certified delta bracket at the certified eps holds delta (the truth
    lies in both)."""
    entries = [(SubsampledGaussian(sigma=1.0, sample_rate=1e-4), 1000)]
    cut_of: dict = {}
    integrated_at: list = []
    real_sc, real_pg = split.SplitComposition.__init__, split._PartGrid.__init__

    def sc_init(self, entries, direction, ell_cut):
        real_sc(self, entries, direction, ell_cut)
        cut_of[id(self.core)] = cut_of[id(self.rem)] = ell_cut

    def pg_init(self, pld_, eps_ref, log_target, skip, rtol, chernoff_only=False, *a, **k):
        real_pg(self, pld_, eps_ref, log_target, skip, rtol, chernoff_only, *a, **k)
        if not chernoff_only:
            integrated_at.append(cut_of[id(pld_)])

    monkeypatch.setattr(split.SplitComposition, "__init__", sc_init)
    monkeypatch.setattr(split._PartGrid, "__init__", pg_init)
    r = split.split_epsilon_bounds(entries, 1e-12, "remove", 1e-4)
    monkeypatch.undo()
    assert integrated_at and min(integrated_at) > r.upper / 1.5, integrated_at
    assert r.upper - r.lower <= 2e-4 * r.upper
    assert r.details["ell_cut"] > r.upper
    low = split.split_delta_bounds(entries, r.upper, "remove", 1e-4, ell_cut=split._grid_cut(r.upper / 2))
    assert low.upper - low.lower > 1e-3 * low.upper  # (the case the rule is for)
    assert low.lower <= 1e-12 * (1 + 1e-9)  # (delta(upper) <= 1e-12 is certified; low.lower <= the truth)


def test_tiny_delta_chain_through_the_wide_cut_corner():
    """The sweep's q = 1e-4, sigma = 1, delta = 1e-12 chain at T = 1000 (2.9e-2 relative before the higher
    cuts): within the width target, above the max-statistic lower bound, below the RDP bound, and
    monotone in T with its neighbours."""
    prev = 0.0
    for T in (100, 1000, 10_000):
        acct = PrivacyAccountant()
        acct.step(sigma=1.0, sample_rate=1e-4, steps=T)
        c = acct.certificate(delta=1e-12)
        assert c.epsilon > prev
        prev = c.epsilon
        if T == 1000:
            assert c.epsilon - c.lower_bound <= 1e-3 * c.epsilon
            assert c.epsilon <= acct.certificate(delta=1e-12, method="rdp").epsilon


def test_far_tail_delta_brackets_are_narrow():
    """delta(eps) ~ 1e-82..1e-89 of SG(2, 1e-4) x 1e4: a refinement pass at a high cut integrates a core
    whose accuracy floor (the declared MGF errors at the only lines where its MGF is finite) is delta
    itself, and its estimate used to steer the next pass: most eps near 1 came back as [0, Chernoff]
    (only eps = 1 was narrow).  Now such a pass forces the low cut, on lines above the error floor.
    Checked: every bracket within 3 %, above the independent max/sum-statistic lower bound
    (``conversions.lower_bounds.delta_lower``, a different construction), and decreasing in eps."""
    from conversions.lower_bounds import delta_lower

    entries = [(SubsampledGaussian(sigma=2.0, sample_rate=1e-4), 10_000)]
    prev = math.inf
    for eps in (0.9, 1.0, 1.2):
        r = split.split_delta_bounds(entries, eps, "remove", rtol=1e-3)
        assert 0.0 < r.lower <= r.upper <= 1.03 * r.lower, (eps, r.lower, r.upper)
        assert r.upper >= delta_lower(entries, eps, "remove"), eps
        assert r.upper < prev
        prev = r.upper


def test_eps_path_start_is_capped_by_the_chernoff_bound(monkeypatch):
    # the central-limit start can be far above the truth at small noise (q = 1e-3, sigma = 0.3, T = 1e5:
    # mu ~ 81, eps capped at 1e3 where the truth is ~153); the start is at most the whole ledger's
    # Chernoff bound, so even a start at 1e6 leads to the same narrow bracket, which overlaps the
    # discretised PLD's (an independent route)
    entries = [(SubsampledGaussian(sigma=0.3, sample_rate=1e-3), 100_000)]
    monkeypatch.setattr(split, "_clt_epsilon", lambda *_: 1e6)
    r = split.split_epsilon_bounds(entries, 1e-5, "remove", 1e-4)
    assert r.upper - r.lower <= 1e-4 * r.upper
    ref = pld.pld_epsilon_bounds(entries, 1e-5, "remove", 1e-3)
    assert r.lower <= ref.upper and ref.lower <= r.upper


@pytest.mark.parametrize("T", [100, 1000])
def test_stalled_split_still_overlaps_the_pld(T):
    # tiny eps at q = 1e-6: the split's brackets stay wide (its remove-direction lower bound is 0) and
    # it stops after two passes that do not halve them; what it returns is still certified, so it
    # overlaps the discretised PLD's bracket (an independent route)
    entries = [(SubsampledGaussian(sigma=1.0, sample_rate=1e-6), T)]
    s = split.split_epsilon_bounds(entries, 1e-5, "remove", 1e-4)
    p = pld.pld_epsilon_bounds(entries, 1e-5, "remove", 1e-3)
    assert 0.0 <= s.lower <= s.upper and s.lower <= p.upper and p.lower <= s.upper


def test_polish_plans_past_the_truncation_cap(monkeypatch):
    # q = 0.01, sigma = 0.5, T = 100 (remove): the polishing pass's core line stops doubling its truncation
    # U at the work budget, so with the ordinary budget the truncation term sets the width (~1.4e-6
    # relative); with ``POLISH_BUDGET`` the same pass is planned past it.  Both brackets are certified:
    # the polished one lies inside the other, is far narrower, and overlaps the discretised PLD's (an
    # independent route)
    entries = [(SubsampledGaussian(sigma=0.5, sample_rate=0.01), 100)]
    monkeypatch.setattr(split, "POLISH_BUDGET", contour.WORK_BUDGET)
    capped = split.split_epsilon_bounds(entries, 1e-5, "remove", 1e-4)  # (the cf route's rtol)
    monkeypatch.undo()
    polished = split.split_epsilon_bounds(entries, 1e-5, "remove", 1e-4)
    assert capped.upper - capped.lower > 1e-6 * capped.upper  # (the cap set the width)
    assert capped.lower <= polished.lower <= polished.upper <= capped.upper
    assert polished.upper - polished.lower <= 1e-7 * polished.upper
    p = pld.pld_epsilon_bounds(entries, 1e-5, "remove", 1e-3)
    assert polished.lower <= p.upper and p.lower <= polished.upper


def test_cf_route_splits_a_truncation_capped_contour():
    # q = 0.02, sigma = 0.6, T = 100, delta = 1e-3: the plain contour's plan is cut short by the work cap
    # (``truncation_capped``) and its bracket is ~1.4e-6 relative wide, below the split's usual trigger
    # (``SPLIT_RTOL``); the route then runs the split too and intersects (both certified).  The answer lies
    # inside the plain contour's bracket, is far narrower, and overlaps the discretised PLD's
    entries = [(SubsampledGaussian(sigma=0.6, sample_rate=0.02), 100)]
    plain = contour.epsilon_bounds(contour.ComposedPLD(entries, "remove"), 1e-3)
    assert plain.details["truncation_capped"]
    assert plain.upper - plain.lower > 1e-6 * plain.upper
    acct = PrivacyAccountant().step(sigma=0.6, sample_rate=0.02, steps=100)
    c = acct.certificate(delta=1e-3, method="cf")
    assert c.details["direction"] == "remove"
    assert plain.lower <= c.lower_bound <= c.epsilon <= plain.upper
    assert c.epsilon - c.lower_bound <= 1e-7 * c.epsilon
    p = pld.pld_epsilon_bounds(entries, 1e-3, "remove", 1e-3)
    assert c.lower_bound <= p.upper and p.lower <= c.epsilon
