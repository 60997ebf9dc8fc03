"""numba kernels for random allocation (balls-in-bins): moments of a mean of i.i.d. log-normals.

The math is documented in :mod:`mechanisms.random_allocation`; these are only the hot loops.  With
X = e^{mu Z - mu^2/2}, Z ~ N(0, 1), E[X^j] = e^{j (j - 1) mu^2 / 2}, and S = X_1 + ... + X_t (i.i.d.):

* ``log_power_moments``: log E[S^a] for every integer a = 0..amax, from the exponential generating
  function E[e^{zS}] "=" f(z)^t, f(z) = sum_j E[X^j] z^j / j!: E[S^a] = a! [z^a] f(z)^t.  The truncated
  power series f^t is computed by binary powering with log-space convolutions (all coefficients are
  positive: no cancellation).  Returns the values and a bound on their absolute rounding error.
* ``log_laplace_grid``: log L(u) and log(1 - L(u)) for L(u) = E[e^{-u X}] on a grid of u (trapezoid rule
  in z, whose error is geometrically small for this entire integrand; validated against mpmath).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

U = 2.0**-53


@njit(cache=True)
def _log_conv(a, ea, b, eb, amax):  # pragma: no cover - compiled
    """c_n = log sum_{j=0..n} exp(a_j + b_{n-j}), n = 0..amax, and an absolute error bound per n."""
    c = np.empty(amax + 1)
    ec = np.empty(amax + 1)
    for n in range(amax + 1):
        m = -np.inf
        emax = 0.0
        for j in range(n + 1):
            v = a[j] + b[n - j]
            if v > m:
                m = v
        if m == -np.inf:
            c[n] = -np.inf
            ec[n] = 0.0
            continue
        acc = 0.0
        for j in range(n + 1):
            v = a[j] + b[n - j]
            if v > -np.inf:
                acc += math.exp(v - m)
                e = ea[j] + eb[n - j] + U * (abs(v) + abs(m))  # inputs + rounding of the exponent
                if e > emax:
                    emax = e
        c[n] = m + math.log(acc)
        # exp: 1 ulp each, the sum of n + 1 positive terms: (n + 1) u, log: 1 ulp (relative to |c|)
        ec[n] = emax * 1.0000001 + (n + 4) * U + U * abs(c[n])
    return c, ec


@njit(cache=True)
def log_power_moments(mu, t, amax):  # pragma: no cover - compiled
    """(log E[S^a], abs. error bound) for a = 0..amax, S the sum of t i.i.d. X (module docstring)."""
    # log coefficients of f: log E[X^j] - log j!
    f = np.empty(amax + 1)
    ef = np.empty(amax + 1)
    for j in range(amax + 1):
        f[j] = 0.5 * j * (j - 1) * mu * mu - math.lgamma(j + 1.0)
        ef[j] = 4.0 * U * (abs(f[j]) + 1.0)
    # binary powering: res = f^t
    res = np.full(amax + 1, -np.inf)
    eres = np.zeros(amax + 1)
    res[0] = 0.0
    base = f.copy()
    ebase = ef.copy()
    k = t
    first = True
    while k > 0:
        if k & 1:
            if first:
                res = base.copy()
                eres = ebase.copy()
                first = False
            else:
                res, eres = _log_conv(res, eres, base, ebase, amax)
        k >>= 1
        if k > 0:
            base, ebase = _log_conv(base, ebase, base, ebase, amax)
    out = np.empty(amax + 1)
    eout = np.empty(amax + 1)
    for a in range(amax + 1):
        lg = math.lgamma(a + 1.0)
        out[a] = lg + res[a]
        eout[a] = eres[a] + 4.0 * U * (abs(lg) + abs(out[a]) + 1.0)
    return out, eout


@njit(cache=True)
def _laplace_peak(mu, u):  # pragma: no cover - compiled
    """argmax of the concave h(z) = -z^2/2 - u e^{mu z - mu^2/2} (bisection on the decreasing h')."""
    lo = -80.0
    while -lo - u * mu * math.exp(mu * lo - 0.5 * mu * mu) <= 0.0 and lo > -1e12:
        lo *= 2.0
    hi = 0.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        d = -mid - u * mu * math.exp(mu * mid - 0.5 * mu * mu)
        if d > 0.0:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


@njit(cache=True)
def log_laplace_grid(mu, u):  # pragma: no cover - compiled
    """(log L(u), log(1 - L(u))) for L(u) = E exp(-u X), X = exp(mu Z - mu^2/2), on an array u >= 0.

    log L: the log-integrand h(z) = -z^2/2 - u X(z) is concave with curvature <= -1, so its mass lies
    within +-16 of its maximiser z* (``_laplace_peak``; relative mass outside < e^-128); trapezoid rule
    with step min(1/32, 1/(4 mu)) on [z* - 16, z* + 16], summed in log space (no underflow for large u).
    The integrand is entire and e^{-u X} stays bounded in the strip |Im z| < pi / (2 mu), so the
    discretisation error is of order exp(-pi^2 / (mu h)) <= e^-39.
    1 - L = E[1 - e^{-u X}] (from -expm1, full relative accuracy for small u) on [-12 - mu, 12 + 2 mu],
    which holds the mass of phi(z) min(1, u X(z)); it is only used where it is below 1/2.
    """
    h0 = min(1.0 / 32.0, 0.25 / mu)
    log_c = -0.5 * math.log(2.0 * math.pi)
    n = u.shape[0]
    out_l = np.empty(n)
    out_1ml = np.empty(n)
    # 1 - L grid (fixed)
    lo1 = -12.0 - mu
    hi1 = 12.0 + 2.0 * mu
    n1 = int(math.ceil((hi1 - lo1) / h0))
    h1 = (hi1 - lo1) / n1
    nl = int(math.ceil(32.0 / h0))
    hl = 32.0 / nl
    terms = np.empty(nl + 1)
    for i in range(n):
        zs = _laplace_peak(mu, u[i])
        lo = zs - 16.0
        m = -np.inf
        for k in range(nl + 1):
            z = lo + k * hl
            lw = -0.6931471805599453 if (k == 0 or k == nl) else 0.0
            v = lw - 0.5 * z * z - u[i] * math.exp(mu * z - 0.5 * mu * mu)
            terms[k] = v
            if v > m:
                m = v
        acc = 0.0
        for k in range(nl + 1):
            acc += math.exp(terms[k] - m)
        out_l[i] = m + math.log(acc * hl) + log_c
        acc1 = 0.0
        for k in range(n1 + 1):
            z = lo1 + k * h1
            w = 0.5 if (k == 0 or k == n1) else 1.0
            ux = u[i] * math.exp(mu * z - 0.5 * mu * mu)
            acc1 += w * math.exp(log_c - 0.5 * z * z) * (-math.expm1(-ux))
        acc1 *= h1
        out_1ml[i] = math.log(acc1) if acc1 > 0.0 else -np.inf
    return out_l, out_1ml
