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
def log_laplace_grid(mu, u):  # pragma: no cover - compiled
    """(log L(u), log(1 - L(u))) for L(u) = E exp(-u X), X = exp(mu Z - mu^2/2), on an array u >= 0.

    Trapezoid rule in z with step 1/64 on [-12, 12 + 2 mu] (the integrand phi(z) e^{-u X(z)} is entire
    and decays like phi(z) on the left, doubly exponentially on the right); 1 - L(u) is computed from
    -expm1(-u X(z)) so that it keeps full relative accuracy for small u.
    """
    h = 1.0 / 64.0
    lo = -12.0 - mu
    hi = 12.0 + 2.0 * mu
    nz = int(math.ceil((hi - lo) / h))
    n = u.shape[0]
    out_l = np.empty(n)
    out_1ml = np.empty(n)
    c0 = 1.0 / math.sqrt(2.0 * math.pi)
    for i in range(n):
        acc = 0.0
        acc1 = 0.0
        for k in range(nz + 1):
            z = lo + k * h
            w = 0.5 if (k == 0 or k == nz) else 1.0
            ph = c0 * math.exp(-0.5 * z * z) * w
            ux = u[i] * math.exp(mu * z - 0.5 * mu * mu)
            e = math.exp(-ux)
            acc += ph * e
            acc1 += ph * (-math.expm1(-ux))
        acc *= h
        acc1 *= h
        out_l[i] = math.log(acc) if acc > 0.0 else -np.inf
        out_1ml[i] = math.log(acc1) if acc1 > 0.0 else -np.inf
    return out_l, out_1ml
