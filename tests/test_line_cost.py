"""The work meter's charge for a contour grid's line (``mgf_line_cost``) against the line kernel's own
grid, and the meter's choice between the line cost and the per-point hint.

References: the kernel's point counts (``sg_line_points``: the points it actually sums, independent of
the cost model) and the per-point hint ``mgf_cost``, which the meter used for every chunk before."""

from __future__ import annotations

import numpy as np
import pytest

from accountant import PrivacyAccountant
from conversions.contour_pld import ComposedPLD
from conversions.split_remainder import Remainder
from mechanisms._sg_line_kernels import NUFFT_MIN_NODES, sg_line_points
from mechanisms.subsampled import _OP_CS, _OP_EXP, _OP_LW
from mechanisms.subsampled_part import _OP_NODE, _OP_SPREAD, SubsampledGaussianPart

PARTS = [(0.4, 1e-5, 5.05, 0.099, 0), (0.3, 1e-3, 4.0, 0.2, 0), (1.0, 1e-4, 3.0, 0.5, 1),
         (0.6, 0.02, 2.0, 0.05, 1), (0.8, 1e-3, 4.07, 0.123, 1)]


@pytest.mark.parametrize("direction", ["remove", "add"])
@pytest.mark.parametrize("sigma, q, x_cut, tau, part", PARTS)
def test_line_cost_covers_the_line_kernels_grid(sigma, q, x_cut, tau, part, direction):
    """From ``NUFFT_MIN_NODES`` nodes the charge covers, per point of the kernel's uniform x-grid (at least
    the points it sums: its pieces use fewer), l(x) and the weight, an exp, a cos/sin pair and the
    spreading, and per node the finishing operations; below that it is the per-point hint per node."""
    m = SubsampledGaussianPart(sigma, q, 1.0, x_cut, tau, part)
    args = m._kernel_args(direction)
    for c in (0.5, 2.0, 16.0, 60.0):
        for t_max in (30.0, 300.0, 3000.0):
            uniform, pieces = sg_line_points(c, t_max, *args)
            assert pieces <= uniform
            for n in (NUFFT_MIN_NODES, 257, 4096):
                cost = m.mgf_line_cost(n, t_max, c, direction)
                per_point = _OP_LW + _OP_EXP + 2.0 * _OP_CS + _OP_SPREAD
                assert cost >= uniform * per_point + n * _OP_NODE, (c, t_max, n, uniform)
            few = NUFFT_MIN_NODES - 1
            assert m.mgf_line_cost(few, t_max, c, direction) == few * m.mgf_cost(t_max, c, direction)


def test_line_cost_is_far_below_the_per_point_hint_on_long_lines():
    """The reason for the line cost: the per-point hint charges every node a rotation per grid point, the
    NUFFT sums all nodes on one grid (q = 1e-3, sigma = 0.3, 4096 nodes to |t| = 900: the hint was 36x
    the kernel's time at the per-point rate, which stopped the polishing pass at the work limit)."""
    m = SubsampledGaussianPart(0.3, 1e-3, 1.0, 4.0, 0.2, 0)
    line = m.mgf_line_cost(4096, 900.0, 0.6)
    assert 20.0 * line < 4096 * m.mgf_cost(900.0, 0.6)
    # and it grows with the nodes and the grid (|t|), never below the scans
    assert m.mgf_line_cost(4096, 900.0, 0.6) > m.mgf_line_cost(1024, 900.0, 0.6) > 0.0
    assert m.mgf_line_cost(1024, 900.0, 0.6) > m.mgf_line_cost(1024, 90.0, 0.6)


def test_meter_charges_grids_by_the_line_cost_and_other_points_by_the_hint():
    """``ComposedPLD`` charges an equally spaced chunk on one line by ``mgf_line_cost`` (the remainder's:
    both parts' and the combination), and scattered points by n x ``mgf_cost``."""
    a = SubsampledGaussianPart(0.5, 1e-3, 1.0, 4.0, 0.2, 0)
    b = SubsampledGaussianPart(0.5, 1e-3, 1.0, 4.0, 0.2, 1)
    for mech in (a, Remainder(a, b, 100)):
        pld = ComposedPLD([(mech, 1)], "remove")
        pld.start_query(1e9)
        ts = np.arange(300) * 1.7
        for pts, expect in ((2.0 + 1j * ts, mech.mgf_line_cost(300, float(ts[-1]), 2.0, "remove")),
                            (2.0 + 1j * (ts + 0.3 * np.sin(ts)), None),
                            (np.linspace(1.0, 3.0, 300) + 1j * ts, None)):
            if expect is None:
                t_c = float(np.max(np.abs(pts.imag))), float(np.max(np.abs(pts.real)))
                expect = 300 * mech.mgf_cost(*t_c, "remove")
            left = pld._work_left
            pld.log_mgf_j(pts)
            assert left - pld._work_left == pytest.approx(expect, rel=1e-6)


def test_a_cheap_split_query_with_long_lines_is_polished(monkeypatch):
    """q = 1e-3, sigma = 0.3, T = 1000: the split answers with two long core lines (4096-node chunks).
    Charged the per-point hint per node they looked like ~2.4e7 units and the query was not polished
    (``POLISH_WORK``); at their line cost the query has used under ``POLISH_METERED_WORK`` and gets the
    polishing pass, whose bracket is ~1e3 times narrower.  Both brackets are certified: the polished one
    lies inside the unpolished one and meets the discretised PLD's (an independent route)."""
    from conversions import split

    acct = PrivacyAccountant().step(sigma=0.3, sample_rate=1e-3, steps=1000)
    cert = acct.certificate(delta=1e-5)
    assert cert.method == "cf" and cert.details.get("split") is True
    assert cert.epsilon - cert.lower_bound <= 1e-7 * cert.epsilon
    monkeypatch.setattr(split, "POLISH_METERED_WORK", 0.0)  # (as the gate was: not polished)
    rough = acct.certificate(delta=1e-5)
    assert rough.epsilon - rough.lower_bound > 100.0 * (cert.epsilon - cert.lower_bound)
    assert rough.lower_bound <= cert.lower_bound <= cert.epsilon <= rough.epsilon
    pld = acct.certificate(delta=1e-5, method="pld")
    assert pld.lower_bound <= cert.epsilon and cert.lower_bound <= pld.epsilon
