"""numba kernels of a type-1 non-uniform FFT by Gaussian gridding, with a rigorous error bound.

For complex weights a_i at real phases theta_i and ``nm`` output modes,

    F(k) = sum_i a_i exp(i k' theta_i),   k' = k - floor(nm / 2),  k = 0 .. nm - 1  (|k'| <= nm / 2).

Method (Dutt & Rokhlin 1993; Greengard & Lee 2004, "Accelerating the nonuniform fast Fourier
transform", SIAM Review 46): spread each a_i onto the M points theta_m = 2 pi m / M of the circle (M
the power of 2 in [4 nm, 8 nm), oversampling R = M / nm >= 4) with the periodic Gaussian
G(phi) = sum_l exp(-(phi - 2 pi l)^2 / (4 tau)), whose Fourier coefficients are
c_j = sqrt(tau / pi) exp(-j^2 tau); the unnormalised inverse DFT of the grid is
X(k') = M sum_l c_{k' + l M} F(k' + l M), so F(k') = X(k') / (M c_{k'}) up to

* aliasing, the terms l != 0: at most A * 2 e^{-tau M (M - nm)} / (1 - e^{-tau M^2}), with
  A = sum_i |a_i|;
* truncation, each source spread only to the grid points at offsets -msp .. msp + 1 from the grid
  point below it, the rest of G (every lattice point farther than (msp + 1) Delta, Delta = 2 pi / M)
  dropped: at most A * e^{tau nm^2 / 4} / (M sqrt(tau / pi)) * 2 e^{-((msp + 1) Delta)^2 / (4 tau)} /
  (1 - e^{-(msp + 1) Delta^2 / (2 tau)}).

tau = beta / M^2 with beta = pi (msp + 1) / (1 - 1 / (2 R)) balances the two (both ~
e^{-2.7 (msp + 1)} at R = 4); :func:`nufft1_error` evaluates the bound (~5e-16 at msp = 12, relative to
A).  The oversampling keeps the deconvolution's amplification of rounding at e^{tau nm^2 / 4} =
e^{beta / (4 R^2)} <= 2.1, so rounding adds ~ 2 (2 msp + 2 + log2 M) ulps of A.  Cost: a few exps per
source, 2 msp + 2 multiply-adds per source and an FFT of M points, instead of nm multiply-adds per
source for the direct sum.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_HELPER = {"cache": True, "no_cpython_wrapper": True}

#: one-sided spreading width (grid points): the algorithmic error bound is ~5e-16 of sum |a_i|
NU_SPREAD = 12


@njit(cache=True)
def _grid_size(nm):  # pragma: no cover - compiled
    """M: the power of 2 in [4 nm, 8 nm)."""
    m = 4
    while m < 4 * nm:
        m *= 2
    return m


@njit(cache=True)
def _tau(nm, m, msp):  # pragma: no cover - compiled
    r = m / nm
    return math.pi * (msp + 1) / (1.0 - 0.5 / r) / (m * m)


@njit(cache=True)
def nufft1_error(nm, msp=NU_SPREAD):  # pragma: no cover - compiled
    """The bound on |computed F(k) - F(k)| / sum_i |a_i| of :func:`nufft1` (module docstring; rounding
    not included)."""
    m = _grid_size(nm)
    tau = _tau(nm, m, msp)
    dlt = 2.0 * math.pi / m
    alias = 2.0 * math.exp(-tau * m * (m - nm)) / (1.0 - math.exp(-tau * m * m))
    far = (msp + 1) * dlt
    trunc = (math.exp(tau * nm * nm / 4.0) / (m * math.sqrt(tau / math.pi)) * 2.0
             * math.exp(-far * far / (4.0 * tau)) / (1.0 - math.exp(-far * dlt / (2.0 * tau))))
    return alias + trunc


@njit(**_HELPER)
def _ifft_pow2(re, im):  # pragma: no cover - compiled
    """In place: x_k <- sum_m x_m exp(+2 pi i k m / n), n = len(re) a power of 2 (radix-2, decimation in
    time; twiddles by exact cos/sin)."""
    n = re.shape[0]
    j = 0
    for i in range(1, n):
        bit = n >> 1
        while j & bit:
            j ^= bit
            bit >>= 1
        j |= bit
        if i < j:
            re[i], re[j] = re[j], re[i]
            im[i], im[j] = im[j], im[i]
    half = n // 2
    wr = np.empty(max(half, 1))
    wi = np.empty(max(half, 1))
    for k in range(half):
        ang = 2.0 * math.pi * k / n
        wr[k] = math.cos(ang)
        wi[k] = math.sin(ang)
    size = 2
    while size <= n:
        hs = size // 2
        step = n // size
        for start in range(0, n, size):
            for k in range(hs):
                tr = wr[k * step]
                ti = wi[k * step]
                a = start + k
                b = a + hs
                xr = re[b] * tr - im[b] * ti
                xi = re[b] * ti + im[b] * tr
                re[b] = re[a] - xr
                im[b] = im[a] - xi
                re[a] += xr
                im[a] += xi
        size *= 2


@njit(**_HELPER)
def nufft1(a_re, a_im, theta, nm, out_re, out_im, msp=NU_SPREAD):  # pragma: no cover - compiled
    """out[k] = sum_i a_i exp(i (k - floor(nm / 2)) theta_i), k = 0 .. nm - 1 (module docstring);
    ``out_re``/``out_im`` of length >= nm."""
    m = _grid_size(nm)
    mask = m - 1
    tau = _tau(nm, m, msp)
    dlt = 2.0 * math.pi / m
    e3 = np.empty(msp + 2)
    for d in range(msp + 2):
        e3[d] = math.exp(-(d * dlt) ** 2 / (4.0 * tau))
    gre = np.zeros(m)
    gim = np.zeros(m)
    two_pi = 2.0 * math.pi
    for i in range(a_re.shape[0]):
        ar = a_re[i]
        ai = a_im[i]
        if ar == 0.0 and ai == 0.0:
            continue
        th = theta[i]
        th -= two_pi * math.floor(th / two_pi)
        u = th / dlt
        m0 = int(math.floor(u))
        frac = (u - m0) * dlt  # the source sits frac in [0, Delta) above grid point m0
        e1 = math.exp(-frac * frac / (4.0 * tau))
        e2 = math.exp(frac * dlt / (2.0 * tau))
        # offsets d >= 0: distance d Delta - frac, weight e1 e3[d] e2^d
        p = e1
        for d in range(msp + 2):
            w = p * e3[d]
            idx = (m0 + d) & mask
            gre[idx] += w * ar
            gim[idx] += w * ai
            p *= e2
        # offsets -d < 0: distance d Delta + frac, weight e1 e3[d] e2^-d
        inv = 1.0 / e2
        p = e1 * inv
        for d in range(1, msp + 1):
            w = p * e3[d]
            idx = (m0 - d) & mask
            gre[idx] += w * ar
            gim[idx] += w * ai
            p *= inv
    _ifft_pow2(gre, gim)
    norm = m * math.sqrt(tau / math.pi)
    for k in range(nm):
        kk = k - nm // 2
        idx = kk & mask
        scale = math.exp(kk * kk * tau) / norm
        out_re[k] = gre[idx] * scale
        out_im[k] = gim[idx] * scale


@njit(cache=True)
def nufft1_py(a_re, a_im, theta, nm, msp=NU_SPREAD):  # pragma: no cover - compiled
    """:func:`nufft1` callable from Python (tests): returns (out_re, out_im) of length ``nm``."""
    out_re = np.empty(nm)
    out_im = np.empty(nm)
    nufft1(a_re, a_im, theta, nm, out_re, out_im, msp)
    return out_re, out_im


@njit(cache=True)
def ifft_pow2_py(re, im):  # pragma: no cover - compiled
    """:func:`_ifft_pow2` callable from Python (tests): transforms copies, returns them."""
    r = re.copy()
    i = im.copy()
    _ifft_pow2(r, i)
    return r, i
