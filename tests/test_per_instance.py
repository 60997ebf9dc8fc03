"""Per-instance privacy of objective perturbation and publishable privacy reports (Redberg & Wang 2021;
docs/derivations/per-instance.md).

Oracles: the 1-D output density of objective perturbation from its CDF P[theta^P <= t] = Phi(J'(t)/sigma)
differentiated numerically with mpmath; in d dimensions the change-of-variables density
phi_sigma(grad J) det grad^2 J evaluated with log-determinants; Monte-Carlo coverage of the reports over
fresh noise draws; exact Gaussian Renyi divergences of the GOE release on the upper-triangle coordinates.
"""

import math

import mpmath as mp
import numpy as np
import pytest

from accountant import PrivacyAccountant
from accountant.adaptive.per_instance import (
    calibrate_report_noise,
    expost_log_ratio,
    glm_derivatives,
    goe_quantile_bound,
    objective_gradient_hessian,
    objpert_epsilon,
    objpert_mechanism,
    objpert_sigma,
    objpert_solve,
    release_data_dependent_report,
    report_data_independent,
    report_mechanisms,
    sample_goe,
)
from mechanisms import ApproxDP, Gaussian


def _logistic_data(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X /= np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1.0)
    w = np.array([1.5, -1.0, 0.5, 0.2])[:d]
    y = np.where(rng.uniform(size=n) < 1 / (1 + np.exp(-X @ w)), 1.0, -1.0)
    return X, y


# ---------------------------------------------------------------------------- ex-post formula
def _density_1d_mp(t, x, y, lam, sigma, loss):
    """Density of theta^P at t (1-D): d/dt Phi(J'(t)/sigma), by mpmath numerical differentiation."""
    mp.mp.dps = 40

    def jprime(u):
        m = [xi * u for xi in x]
        if loss == "logistic":
            g = sum(-yi * xi / (1 + mp.exp(yi * mi)) for xi, yi, mi in zip(x, y, m, strict=True))
        else:
            g = sum((mi - yi) * xi for xi, yi, mi in zip(x, y, m, strict=True))
        return g + lam * u

    return mp.diff(lambda u: mp.ncdf(jprime(u) / sigma), mp.mpf(t))


@pytest.mark.parametrize("loss", ["logistic", "squared"])
def test_expost_formula_vs_1d_density(loss):
    x = [0.3, -0.8, 0.5, 0.9, -0.2]
    y = [1.0, -1.0, 1.0, 1.0, -1.0] if loss == "logistic" else [0.2, -0.5, 0.4, 0.9, -0.1]
    lam, sigma = 0.7, 1.3
    zx, zy = 0.6, -1.0 if loss == "logistic" else 0.8
    X = np.array(x)[:, None]
    for t in (-1.0, 0.0, 0.7, 2.0):
        p = _density_1d_mp(t, x, y, lam, sigma, loss)
        q_add = _density_1d_mp(t, x + [zx], y + [zy], lam, sigma, loss)
        got_add = float(
            expost_log_ratio([t], X, np.array(y), [zx], zy, sigma=sigma, lam=lam, loss=loss, adding=True)
        )
        assert got_add == pytest.approx(float(mp.log(p / q_add)), abs=1e-8)
        # removing: D contains z
        Xz, yz = np.vstack([X, [[zx]]]), np.append(y, zy)
        got_rem = float(
            expost_log_ratio([t], Xz, yz, [zx], zy, sigma=sigma, lam=lam, loss=loss, adding=False)
        )
        assert got_rem == pytest.approx(float(mp.log(q_add / p)), abs=1e-8)
        # symmetry
        assert got_rem == pytest.approx(-got_add, abs=1e-10)


def test_expost_formula_vs_logdet_density_3d():
    rng = np.random.default_rng(1)
    X, y = _logistic_data(n=40, d=3, seed=2)
    lam, sigma = 1.5, 2.0
    zx, zy = rng.normal(size=3) / 2, 1.0

    def logdens(theta, Xa, ya):
        g, h = objective_gradient_hessian(theta, Xa, ya, lam, "logistic")
        return -g @ g / (2 * sigma**2) + np.linalg.slogdet(h)[1]

    for _ in range(5):
        th = rng.normal(size=3)
        ref = logdens(th, X, y) - logdens(th, np.vstack([X, zx]), np.append(y, zy))
        got = float(expost_log_ratio(th, X, y, zx, zy, sigma=sigma, lam=lam, loss="logistic", adding=True))
        assert got == pytest.approx(ref, abs=1e-10)


def test_objpert_solver_first_order_condition():
    X, y = _logistic_data()
    b = np.random.default_rng(3).normal(0, 5.0, 2)
    th = objpert_solve(X, y, b, lam=1.0, loss="logistic")
    g, _ = objective_gradient_hessian(th, X, y, 1.0, "logistic")
    assert np.linalg.norm(g + b) < 1e-10 * max(1, np.linalg.norm(b))


def test_glm_derivatives():
    m = np.linspace(-5, 5, 101)
    f1, f2 = glm_derivatives(m, 1.0, "logistic")
    h = 1e-5
    num1 = (np.log1p(np.exp(-(m + h))) - np.log1p(np.exp(-(m - h)))) / (2 * h)
    np.testing.assert_allclose(f1, num1, atol=1e-8)
    assert f2.max() <= 0.25 + 1e-15 and np.all(np.abs(f1) <= 1)
    with pytest.raises(ValueError):
        glm_derivatives(m, 1.0, "hinge")


def test_logdet_lemma_and_thm8_bound():
    """det(H + f'' x x^T)/det H = 1 + f'' mu(x) and |log(1 + f'' mu)| <= -log(1 - f''||x||^2/lambda)."""
    rng = np.random.default_rng(4)
    for _ in range(300):
        X, y = _logistic_data(n=int(rng.integers(5, 40)), d=3, seed=int(rng.integers(1e6)))
        lam = 10 ** rng.uniform(-0.5, 1)
        th = rng.normal(size=3)
        _, h = objective_gradient_hessian(th, X, y, lam, "logistic")
        x = rng.normal(size=3)
        x /= max(np.linalg.norm(x), 1.0)
        _, f2 = glm_derivatives(x @ th, 1.0, "logistic")
        mu = x @ np.linalg.solve(h, x)
        lhs = np.linalg.slogdet(h + f2 * np.outer(x, x))[1] - np.linalg.slogdet(h)[1]
        assert lhs == pytest.approx(math.log1p(f2 * mu), abs=1e-10)
        assert abs(math.log1p(f2 * mu)) <= -math.log1p(-f2 * (x @ x) / lam) + 1e-12


# ---------------------------------------------------------------------------- reports, coverage
def _coverage(kind, rho, draws, seed):
    X, y = _logistic_data(n=60, d=2, seed=5)
    lam, sigma = 8.0, 2.0
    s2, s3 = 1.0, 0.5
    rng = np.random.default_rng(seed)
    targets = [(X[0], y[0], False), (np.array([0.6, -0.7]), 1.0, True), (X[7], y[7], False)]
    fails = np.zeros(len(targets))
    for _ in range(draws):
        b = rng.normal(0, sigma, 2)
        th = objpert_solve(X, y, b, lam=lam, loss="logistic")
        if kind == "dep":
            rep = release_data_dependent_report(
                X, y, th, sigma=sigma, sigma_2=s2, sigma_3=s3, lam=lam, rho=rho, loss="logistic", rng=rng
            )
        for k, (zx, zy, adding) in enumerate(targets):
            true = abs(
                float(
                    expost_log_ratio(th, X, y, zx, zy, sigma=sigma, lam=lam, loss="logistic", adding=adding)
                )
            )
            if kind == "indep":
                bar = float(
                    report_data_independent(th, zx, zy, sigma=sigma, lam=lam, rho=rho, loss="logistic")
                )
            else:
                bar = float(rep.epsilon1_bar(zx, zy))
            fails[k] += bar < true
    return fails / draws


def test_data_independent_report_coverage():
    rho, n = 0.1, 2000
    freq = _coverage("indep", rho, n, seed=6)
    assert np.all(freq <= rho + 3 * math.sqrt(rho * (1 - rho) / n))


def test_data_dependent_report_coverage():
    rho, n = 0.05, 1500
    # sigma_3 = 1: lambda = 8 < 2 sigma_3 tau_GOE(2, 1 - rho/2) = 2 (2 sqrt 2 + 2 sqrt(log 40)) ~ 13.3
    X, y = _logistic_data(n=60, d=2, seed=5)
    with pytest.raises(ValueError, match="GOE"):
        release_data_dependent_report(
            X,
            y,
            np.zeros(2),
            sigma=2.0,
            sigma_2=1.0,
            sigma_3=1.0,
            lam=8.0,
            rho=rho,
            loss="logistic",
            rng=np.random.default_rng(0),
        )
    rho = 0.1
    assert 2 * 0.5 * goe_quantile_bound(2, rho / 2) <= 8.0  # sigma_3 = 0.5 in _coverage
    freq = _coverage("dep", rho, n, seed=7)
    assert np.all(freq <= 3 * rho + 3 * math.sqrt(3 * rho * (1 - 3 * rho) / n))


def test_report_properties_and_errors():
    X, y = _logistic_data()
    th = np.array([0.5, -0.2])
    zx, zy = np.array([0.3, 0.4]), 1.0
    a = report_data_independent(th, zx, zy, sigma=2.0, lam=4.0, rho=0.05, loss="logistic")
    b = report_data_independent(th, zx, zy, sigma=2.0, lam=8.0, rho=0.05, loss="logistic")
    c = report_data_independent(th, zx, zy, sigma=2.0, lam=4.0, rho=0.01, loss="logistic")
    assert b < a < c  # more regularisation / less confidence -> smaller report
    # f'' mubar >= 1 is undefined (docs/derivations/per-instance.md section 2)
    with pytest.raises(ValueError, match="f''"):
        report_data_independent(
            np.zeros(2), np.array([1.0, 0.0]), 1.0, sigma=2.0, lam=0.2, rho=0.05, loss="logistic"
        )
    with pytest.raises(ValueError):
        report_data_independent(th, zx, zy, sigma=2.0, lam=4.0, rho=1.0, loss="logistic")
    with pytest.raises(ValueError, match="removing"):
        expost_log_ratio(
            np.zeros(1),
            np.zeros((1, 1)),
            np.zeros(1),
            [10.0],
            0.0,
            sigma=1.0,
            lam=1.0,
            loss="squared",
            adding=False,
        )
    # vectorised over many individuals
    many = report_data_independent(th, X, y, sigma=2.0, lam=4.0, rho=0.05, loss="logistic")
    assert many.shape == (len(y),) and np.all(many > 0)
    rep = release_data_dependent_report(
        X,
        y,
        th,
        sigma=2.0,
        sigma_2=0.5,
        sigma_3=0.5,
        lam=10.0,
        rho=0.05,
        loss="logistic",
        rng=np.random.default_rng(0),
    )
    assert rep.epsilon1_bar(X, y).shape == (len(y),)


# ---------------------------------------------------------------------------- costs
def test_goe_renyi_equals_gaussian_with_sensitivity_beta_over_sqrt2():
    """GOE noise sigma_3 W on a symmetric change E: Renyi divergence alpha ||E||_F^2/(4 sigma_3^2), on
    the independent upper-triangle coordinates (diagonal variance 2 sigma^2, off-diagonal sigma^2)."""
    rng = np.random.default_rng(8)
    s3, beta = 0.7, 0.25
    for _ in range(5):
        x = rng.normal(size=3)
        x /= np.linalg.norm(x)
        e = beta * np.outer(x, x)  # ||E||_F = beta (rank-one GLM Hessian change at f'' ||x||^2 = beta)
        iu = np.triu_indices(3)
        var = np.where(iu[0] == iu[1], 2 * s3**2, s3**2)
        for a in (2.0, 5.0):
            exact = float(np.sum(a * e[iu] ** 2 / (2 * var)))  # product of independent Gaussian shifts
            assert exact == pytest.approx(a * beta**2 / (4 * s3**2), rel=1e-12)
            assert Gaussian(sigma=s3, sensitivity=beta / math.sqrt(2)).rdp([a])[0] == pytest.approx(exact)
    w = np.stack([sample_goe(4, rng) for _ in range(4000)])
    assert np.allclose(w, np.transpose(w, (0, 2, 1)))
    assert np.var(w[:, 0, 0]) == pytest.approx(2.0, rel=0.1) and np.var(w[:, 0, 1]) == pytest.approx(
        1.0, rel=0.1
    )


def test_goe_quantile_bound_dominates_mc():
    # reference values (docs/derivations/per-instance.md section 3): conservative bound 6.290/8.085 (d=2),
    # 12.627/14.422 (d=21) at p = 0.05 / 1e-3
    assert goe_quantile_bound(2, 0.05) == pytest.approx(6.290, abs=1e-3)
    assert goe_quantile_bound(21, 1e-3) == pytest.approx(14.422, abs=1e-3)
    rng = np.random.default_rng(9)
    for d in (2, 21):
        lam1 = np.array([np.linalg.eigvalsh(sample_goe(d, rng))[-1] for _ in range(3000)])
        assert np.quantile(lam1, 0.95) <= goe_quantile_bound(d, 0.05)


def test_kifer_calibration_and_report_noise():
    # reference values: sigma = 10.958 at eps_1 = 1, 54.053 at eps_1 = 0.2 (delta = 1e-6, xi = 1)
    assert objpert_sigma(1.0, 1e-6) == pytest.approx(10.958, abs=1e-3)
    assert objpert_sigma(0.2, 1e-6) == pytest.approx(54.053, abs=1e-3)
    assert objpert_epsilon(objpert_sigma(0.37, 1e-6), 1e-6) == pytest.approx(0.37, rel=1e-12)
    with pytest.raises(ValueError, match="2 beta"):
        objpert_epsilon(10.958, 1e-6, lam=0.1)
    s2, s3 = calibrate_report_noise(0.7, 0.1, 1e-6)
    assert s2 == pytest.approx(5.8863, abs=1e-4) and s3 == pytest.approx(6.4178, abs=1e-4)
    # reference value: conservative GOE(21) quantile at 1 - rho/2 (rho = 1e-6) = 16.783 -> lambda >= 215.4
    assert goe_quantile_bound(21, 0.5e-6) == pytest.approx(16.783, abs=1e-3)
    assert 2 * s3 * goe_quantile_bound(21, 0.5e-6) == pytest.approx(215.4, abs=0.1)


def test_individual_costs_zcdp_conversion():
    # reference values: (xi, beta, sigma_2, sigma_3, delta) = (1, 0.25, 2, 1, 1e-6): rho = 0.140625,
    # eps = 2.928317
    rep = release_data_dependent_report(
        np.zeros((1, 2)),
        np.zeros(1),
        np.zeros(2),
        sigma=1.0,
        sigma_2=2.0,
        sigma_3=1.0,
        lam=20.0,
        rho=0.05,
        loss="squared",
        rng=np.random.default_rng(0),
    )
    zx = np.array(
        [0.5, 0.0]
    )  # squared loss at theta = 0: f' = -y, f'' = 1 -> |f'| ||x|| = 1, f'' ||x||^2 = 0.25
    e2, e3, joint = rep.individual_costs(zx, -2.0, 1e-6)
    rho = 1 / 8 + 0.25**2 / 4
    assert rho == pytest.approx(0.140625)
    assert float(joint) == pytest.approx(2.928317, abs=1e-6)
    assert float(joint) < float(e2) + float(e3)  # converting jointly is tighter


def test_ledger_of_objpert_and_report():
    sigma, lam = objpert_sigma(0.2, 1e-6), 10.0
    mech = objpert_mechanism(sigma, 1e-6, lam=lam)
    assert isinstance(mech, ApproxDP) and mech.epsilon == pytest.approx(0.2)
    s2, s3 = calibrate_report_noise(0.7, 0.1, 1e-6)
    acct = PrivacyAccountant().compose(mech)
    for m in report_mechanisms(s2, s3):
        acct.compose(m)
    # basic composition of the three parts: (0.2 + 0.7 + 0.1, 3e-6); the accountant is at least as good
    assert acct.epsilon(3e-6) <= 1.0 + 1e-9
