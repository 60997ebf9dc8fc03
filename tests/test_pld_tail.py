"""The loss's upper tail in closed form for the discretised PLD (``conversions.pld_tail``), against the
independent T = 2 mpmath reference of ``tests/test_pld_split.py`` and the exact tail masses."""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
from test_pld_split import _tails_mp, delta_t2

from conversions import pld_tail
from conversions.pld import pld_epsilon_bounds
from mechanisms import Laplace, SubsampledGaussian


@pytest.mark.parametrize("q,sigma,delta", [(1e-4, 0.5, 1e-8), (1e-3, 0.4, 1e-6), (1e-5, 0.3, 1e-5),
                                           (0.01, 0.5, 1e-6)])
def test_plain_grid_with_the_tail_brackets_the_two_step_truth(q, sigma, delta):
    """Small sigma (a loss tail far above eps): the passes after the first take the tail above
    top = eps_max - floor in closed form; delta_true(lower) >= delta >= delta_true(upper) (40 digits)."""
    r = pld_epsilon_bounds([(SubsampledGaussian(sigma=sigma, sample_rate=q), 2)], delta, "remove")
    assert "loss_tail_top" in r.details
    assert 0.0 < r.lower and r.upper - r.lower <= max(1e-3 * r.upper, 1e-4)
    assert float(delta_t2(r.upper, q, sigma)) <= delta <= float(delta_t2(r.lower, q, sigma))


@pytest.mark.parametrize("q,sigma,eps", [(1e-4, 0.5, 0.7), (1e-3, 0.4, 3.8), (1e-5, 0.3, 0.001),
                                         (1e-4, 1.0, 0.036), (0.01, 0.5, 4.6)])
def test_delta_query_with_the_tail_brackets_the_two_step_truth(q, sigma, eps):
    """A delta query takes the tail above top = eps - floor from its first pass: delta_lo <= delta_true <=
    delta_up (40 digits), and the bracket meets the 1e-3 target."""
    from conversions.pld import pld_delta_bounds

    r = pld_delta_bounds([(SubsampledGaussian(sigma=sigma, sample_rate=q), 2)], eps, "remove")
    truth = float(delta_t2(eps, q, sigma))
    assert "loss_tail_top" in r.details
    assert r.lower <= truth <= r.upper and r.upper - r.lower <= 1e-3 * r.upper


@pytest.mark.parametrize("sigma,q,steps,delta", [(0.8, 1e-3, 99, 1e-5), (0.6, 1e-3, 99, 1e-6),
                                                  (0.5, 1e-3, 100, 1e-5), (0.8, 3e-3, 99, 1e-8)])
def test_tail_with_mean_rounding_overlaps_the_contour(sigma, q, steps, delta):
    """~100 steps: the tail's grid (the loss law below top, mean-preserving rounding) against the
    contour route, an independent method (the MGF integrated on a line) that is ~1e-5 tight here: both
    brackets are certified, so they must overlap; the PLD's meets the 1e-3 target."""
    from accountant import PrivacyAccountant

    r = pld_epsilon_bounds([(SubsampledGaussian(sigma=sigma, sample_rate=q), steps)], delta, "remove")
    assert "loss_tail_top" in r.details and r.details["lower_shift"] == "chernoff"
    acct = PrivacyAccountant(time_limit=None).step(sigma=sigma, sample_rate=q, steps=steps)
    cf = acct.certificate(delta=delta, method="cf")
    assert cf.details["direction"] == "remove" and cf.epsilon - cf.lower_bound <= 1e-4 * cf.epsilon
    assert r.lower <= cf.epsilon and cf.lower_bound <= r.upper
    assert r.upper - r.lower <= 1e-3 * r.upper


def test_tail_delta_is_the_exact_contribution_above_top():
    """``LossTail.delta`` brackets (1 - (1 - p)^T) - e^eps (1 - (1 - q)^T) with the mpmath tail masses,
    for eps <= eps_max; past eps_max the upper end stays at its eps_max value and the lower end is 0."""
    q, sigma, t, eps_max = 1e-4, 0.5, 20, 0.6
    mech = SubsampledGaussian(sigma=sigma, sample_rate=q)
    tail = pld_tail.loss_tail(mech, t, "remove", eps_max)
    assert tail.top >= eps_max - (t - 1) * math.log1p(-q)  # (every other step's loss > log(1 - q))
    p_ref, q_ref = _tails_mp(tail.top, q, sigma)
    with mp.workdps(40):
        for e in (0.0, 0.3, eps_max):
            want = (1 - (1 - p_ref) ** t) - mp.exp(mp.mpf(e)) * (1 - (1 - q_ref) ** t)
            assert tail.delta(e, False) <= want <= tail.delta(e, True)
            assert tail.delta(e, True) - tail.delta(e, False) <= 1e-9 * want
    assert tail.delta(2 * eps_max, True) == tail.delta(eps_max, True) and tail.delta(2 * eps_max, False) == 0


def test_no_tail_without_a_loss_floor():
    """The add direction (loss unbounded below), mechanisms without the hooks and an infinite eps_max
    give no tail: the grid is unchanged."""
    mech = SubsampledGaussian(sigma=0.5, sample_rate=1e-3)
    assert pld_tail.loss_tail(mech, 10, "add", 1.0) is None
    assert pld_tail.loss_tail(mech, 10, "remove", math.inf) is None
    assert pld_tail.loss_tail(Laplace(scale=1.0), 10, "remove", 1.0) is None
    r = pld_epsilon_bounds([(mech, 10)], 1e-6, "add")
    assert "loss_tail_top" not in r.details


def test_tail_evaluator_adds_the_tail_and_keeps_the_floor():
    """upper = grid upper + tail upper (capped at 1), lower = grid lower + tail lower; below eps = 0 the
    lower bound is the whole measure's 1 - e^eps (the grid's floor would not hold for mu_lo)."""
    tail = pld_tail.LossTail(3, 0.5, 0.4, 1e-3, 1.1e-3, 5e-4, 5.5e-4)

    class _Grid:
        hi_ok = 7.0

        def upper(self, eps):
            return 0.25

        def lower(self, eps):
            return 0.125

    ev = pld_tail.TailEvaluator(_Grid(), tail)
    for e in (0.0, 0.2, 0.4, 0.9):
        assert ev.upper(e) == min(1.0, 0.25 + tail.delta(e, True))
        assert ev.lower(e) == 0.125 + tail.delta(e, False)
    assert ev.lower(-0.5) == pytest.approx(-np.expm1(-0.5)) and ev.lower(-0.5) <= -np.expm1(-0.5)
    assert ev.hi_ok == 7.0


@pytest.mark.slow
def test_plain_grid_with_the_tail_against_the_dpsgd_reference_at_t100():
    """q = 1e-5, sigma = 0.4, T = 100, delta = 1e-5 (a regimes-sweep setting the capped grid left 2.6 %
    wide in 1.2 s): with the tail the bracket is ~5e-4 relative; the MGF-inversion reference of
    tests/reference_dpsgd.py confirms both ends, delta_ref(lower) >= delta >= delta_ref(upper) (measured
    1.000186e-5 and 9.99665e-6; ~4 minutes)."""
    import reference_dpsgd as R

    r = pld_epsilon_bounds([(SubsampledGaussian(sigma=0.4, sample_rate=1e-5), 100)], 1e-5, "remove")
    assert "loss_tail_top" in r.details and r.upper - r.lower <= 1e-4
    lo_ref, up_ref = R.deltas_ref([r.lower, r.upper], 0.4, 1e-5, 100, "remove")
    assert lo_ref.value >= 1e-5 >= up_ref.value


def test_tail_at_huge_epsilon_does_not_overflow():
    """sigma << 1 puts eps (and eps_max) far beyond exp's range: e^eps (1 - (1 - q)^T) is formed in log
    space; the bounds stay ordered and valid (q = 6.7e-4, sigma = 0.0055, T = 2: a query that raised an
    OverflowError; its upper end is checked against the T = 2 reference)."""
    tail = pld_tail.LossTail(2, 900.0, 850.0, 1e-12, 1.1e-12, 0.0, 1e-320)
    for e in (0.0, 850.0, 5000.0):
        assert 0.0 <= tail.delta(e, False) <= tail.delta(e, True) <= 2.3e-12
    q, sigma, delta = 6.741147274400611e-4, 5.477698253844125e-3, 2.961451017779387e-12
    r = pld_epsilon_bounds([(SubsampledGaussian(sigma=sigma, sample_rate=q), 2)], delta, "remove")
    assert math.isfinite(r.upper) and 0.0 <= r.lower <= r.upper
    assert float(delta_t2(r.upper, q, sigma)) <= delta


@pytest.mark.parametrize("eps", [-0.5, -1e-3, 0.0])
def test_delta_query_at_negative_and_zero_epsilon(eps):
    """A delta query at eps <= 0 (top would fall into the loss's bulk for eps < 0: no tail there; a
    query that raised 'no mass on the finite cells'): the bracket holds the T = 2 reference."""
    from conversions.pld import pld_delta_bounds

    q, sigma = 3.5465860271830185e-4, 0.43488050082685614
    r = pld_delta_bounds([(SubsampledGaussian(sigma=sigma, sample_rate=q), 2)], eps, "remove")
    truth = float(delta_t2(eps, q, sigma))
    assert r.lower <= truth <= r.upper
    if eps < 0.0:
        assert "loss_tail_top" not in r.details


def test_a_nan_or_out_of_range_tail_mass_gives_no_tail():
    """A mechanism whose tail bounds come back NaN or outside [0, 1] gets no tail (the grid is used as it
    is): a NaN must never enter delta's bounds, where max(NaN, 0) would pass it on."""

    class _Bad:
        def __init__(self, masses):
            self.masses = masses

        def pld_loss_floor(self, direction):
            return -1e-3

        def pld_upper_tail(self, level, direction):
            return self.masses

    good = (1e-9, 2e-9, 1e-10, 2e-10)
    assert pld_tail.loss_tail(_Bad(good), 10, "remove", 0.5) is not None
    for bad in ((math.nan, 2e-9, 1e-10, 2e-10), (1e-9, math.nan, 1e-10, 2e-10),
                (1e-9, 2e-9, math.nan, 2e-10), (1e-9, 2e-9, 1e-10, 1.5), (-1e-9, 2e-9, 1e-10, 2e-10)):
        assert pld_tail.loss_tail(_Bad(bad), 10, "remove", 0.5) is None
