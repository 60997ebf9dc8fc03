"""The log-space primitives of ``mechanisms._numerics`` (their one home) against 60-digit mpmath."""

import math

import mpmath as mp
import numpy as np
import pytest

from mechanisms._numerics import log_expm1, log_expm1_float, log_expm1_scalar

XS = [1e-300, 1e-30, 1e-12, 1e-6, 0.01, 0.5, 1.0, 5.0, 29.9, 30.0, 30.1, 50.0, 700.0, 1e5, 1e300]


def _exact(x: float) -> float:
    with mp.workdps(60):
        return float(mp.log(mp.expm1(mp.mpf(x)))) if x < 1e5 else float(
            mp.mpf(x) + mp.log1p(-mp.exp(-mp.mpf(x))))


@pytest.mark.parametrize("x", XS)
def test_log_expm1_forms_agree_with_mpmath(x):
    ref = _exact(x)
    tol = 4e-16 * max(1.0, abs(ref))
    for got in (log_expm1_float(x), log_expm1_scalar(x), float(log_expm1(np.array([x]))[0])):
        assert abs(got - ref) <= tol, (x, got, ref)


@pytest.mark.parametrize("x", [0.0, -1e-300, -1.0, -math.inf])
def test_log_expm1_is_minus_infinity_at_and_below_zero(x):
    assert log_expm1_float(x) == -math.inf
    assert log_expm1_scalar(x) == -math.inf
    assert log_expm1(np.array([x]))[0] == -math.inf


def test_the_three_forms_agree_to_an_ulp():
    """The Python, compiled and vectorised forms evaluate one formula; only the libraries' last-bit
    rounding of log / expm1 differs (numpy's vectorised log is not the C library's)."""
    xs = np.geomspace(1e-20, 1e3, 257)
    a = np.array([log_expm1_float(float(x)) for x in xs])
    for other in (np.array([log_expm1_scalar(float(x)) for x in xs]), log_expm1(xs)):
        assert np.max(np.abs(a - other) / np.maximum(1.0, np.abs(a))) <= 4.5e-16
