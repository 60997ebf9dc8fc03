"""Matrix-factorisation mechanisms: sensitivity against brute force over participation patterns, tree
aggregation against an explicitly built tree matrix, and the certificate against the closed-form Gaussian
profile (``reference.gaussian_epsilon``)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import reference as ref

from accountant import PrivacyAccountant
from mechanisms import MatrixMechanism, TreeAggregation, registry
from mechanisms.conformance import check_mechanism
from mechanisms.matrix import matrix_sensitivity


def _brute(c, b, k):
    """max over b-separated S, |S| <= k, of sum_{i,j in S} |G_ij| (an upper bound on the squared
    sensitivity; equal to it when G_S >= 0), and the exact value max_S sum G_S for G >= 0."""
    c = np.asarray(c, dtype=float)
    g = c.T @ c
    n = c.shape[1]
    best = 0.0
    for r in range(1, k + 1):
        for s in itertools.combinations(range(n), r):
            if all(s[i + 1] - s[i] >= b for i in range(len(s) - 1)):
                best = max(best, float(np.sum(np.abs(g[np.ix_(s, s)]))))
    return best


def _tree_matrix(n):
    """The complete dyadic blocks [j 2^l, (j + 1) 2^l) inside [0, n) as rows (interval indicators)."""
    rows = []
    size = 1
    while size <= n:
        for start in range(0, n - size + 1, size):
            r = [0.0] * n
            for j in range(start, start + size):
                r[j] = 1.0
            rows.append(r)
        size *= 2
    return rows


@pytest.mark.parametrize("seed", range(12))
def test_sensitivity_brackets_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, b, k = int(rng.integers(3, 9)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    kind = seed % 3
    if kind == 0:
        c = np.tril(np.ones((n, n)))
    elif kind == 1:
        c = np.tril(rng.random((n, n))) * (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) < b)
    else:
        c = rng.normal(size=(n + 2, n))
    up, lo, exact = matrix_sensitivity(c, b, k)
    br = _brute(c, b, k)
    assert up >= br * (1 - 1e-12)
    if kind < 2:  # G >= 0: the brute-force value is the sensitivity itself
        assert lo <= br * (1 + 1e-12)
        assert exact and up <= br * (1 + 1e-12)


def test_prefix_sum_matrix_single_participation():
    """C = lower-triangular ones (prefix sums): column 0 has norm sqrt(n)."""
    m = MatrixMechanism(np.tril(np.ones((10, 10))).tolist(), sigma=3.0)
    assert m.sensitivity == pytest.approx(math.sqrt(10), rel=1e-14) and m.sensitivity_exact
    c = PrivacyAccountant().compose(m).certificate(delta=1e-6)
    assert c.method == "exact"
    exact = ref.gaussian_epsilon(1e-6, math.sqrt(10) / 3.0)
    assert exact <= c.epsilon <= exact * (1 + 1e-9)


@pytest.mark.parametrize("steps,epochs,b", [(8, 2, 8), (8, 3, 1), (16, 2, 5)])
def test_tree_without_restart_matches_explicit_tree_matrix(steps, epochs, b):
    n = steps * epochs
    t = TreeAggregation(1.0, steps, epochs, restart=False, min_separation=b)
    c = _tree_matrix(n)
    up, lo, _ = matrix_sensitivity(c, b, epochs)
    assert t.sensitivity ** 2 == pytest.approx(up, rel=1e-12)
    assert t.sensitivity ** 2 >= _brute(c, b, epochs) * (1 - 1e-12) if n <= 16 else True


def test_tree_with_restart_closed_form():
    for steps, epochs in ((1, 1), (16, 1), (17, 3), (1000, 5)):
        t = TreeAggregation(2.0, steps, epochs)
        depth = math.ceil(math.log2(steps + 1))  # complete blocks containing the first leaf
        assert t.sensitivity ** 2 == pytest.approx(epochs * depth, rel=1e-14)
        assert t.gdp_mu == pytest.approx(math.sqrt(epochs * depth) / 2.0, rel=1e-14)
    # explicit matrices give the same sensitivity (also when n is not a power of two)
    assert matrix_sensitivity(_tree_matrix(16), 16, 1)[0] == pytest.approx(5.0)
    expect = TreeAggregation(1.0, 11).sensitivity ** 2
    assert matrix_sensitivity(_tree_matrix(11), 11, 1)[0] == pytest.approx(expect)


def test_large_tree_bound_is_valid():
    t = TreeAggregation(1.0, 1000, 5, restart=False, min_separation=1000)
    assert not t.tight
    depth = math.ceil(math.log2(5001))
    assert t.sensitivity ** 2 >= 5 * depth  # at least the diagonal


@pytest.mark.parametrize("mech", [
    MatrixMechanism(np.tril(np.ones((6, 6))).tolist(), 2.0, {"min_separation": 2, "max_participations": 2}),
    MatrixMechanism([[1.0, 0.0], [0.5, 1.0]], 1.0),
    TreeAggregation(1.5, 64, 3),
    TreeAggregation(1.5, 8, 2, restart=False, min_separation=4),
])
def test_conformance(mech):
    check_mechanism(mech)
    assert registry.from_dict(mech.to_dict()) == mech


@pytest.mark.parametrize("kw,match", [
    ({"C": [[1.0, 2.0], [3.0]], "sigma": 1.0}, "rectangular"),
    ({"C": [[0.0]], "sigma": 1.0}, "non-zero"),
    ({"C": [[1.0]], "sigma": -1.0}, "sigma"),
    ({"C": [[1.0, 1.0]], "sigma": 1.0, "participation": {"min_separation": 0}}, "min_separation"),
    ({"C": [[1.0, 1.0]], "sigma": 1.0, "participation": {"every": 2}}, "participation"),
    ({"C": "eye", "sigma": 1.0}, "C must"),
])
def test_bad_input(kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        MatrixMechanism(**kw)


def test_tree_bad_input():
    with pytest.raises(ValueError, match="min_separation"):
        TreeAggregation(1.0, 8, 2, restart=True, min_separation=3)
    with pytest.raises((ValueError, TypeError), match="steps"):
        TreeAggregation(1.0, 0)
