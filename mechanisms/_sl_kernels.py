"""numba kernels of the Poisson-subsampled Laplace mechanism
(:class:`mechanisms.poisson_subsampled.SubsampledLaplace`): the log-MGF and total variation of the continuous
middle part of its loss law."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._poisson_kernels import _logaddexp


@njit(cache=True)
def sl_middle_log_mgf(s_re, s_im, q, a, add):  # pragma: no cover - compiled
    """log of the middle (continuous) part of the subsampled-Laplace MGF, x in (0, 1) (unit sensitivity).

    Remove: int_0^1 q0(x) (1 - q + q r(x))^{s+1} dx; add: exponent -s.  q0(x) = (a/2) e^{-a x} is the
    Lap(0, 1/a) density, r(x) = e^{(2x - 1) a}.  Composite Gauss-Legendre (10 points per panel) with
    enough panels to resolve the oscillation exp(i t L(x)), L ranging over an interval of length <= 2a.
    """
    # 10-point Gauss-Legendre on [-1, 1]
    gx = np.array([-0.9739065285171717, -0.8650633666889845, -0.6794095682990244, -0.4333953941292472,
                   -0.1488743389816312, 0.1488743389816312, 0.4333953941292472, 0.6794095682990244,
                   0.8650633666889845, 0.9739065285171717])
    gw = np.array([0.0666713443086881, 0.1494513491505806, 0.2190863625159820, 0.2692667193099963,
                   0.2955242247147529, 0.2955242247147529, 0.2692667193099963, 0.2190863625159820,
                   0.1494513491505806, 0.0666713443086881])
    lq = math.log(q)
    l1q = math.log1p(-q)
    n = s_re.shape[0]
    out_re = np.empty(n)
    out_im = np.empty(n)
    for j in range(n):
        if add:
            wr = -s_re[j]
            wi = -s_im[j]
        else:
            wr = s_re[j] + 1.0
            wi = s_im[j]
        # resolve both the oscillation (|Im w| l' <= 2a|Im w|) and the exponential growth of
        # e^{Re w l(x) - a x} (rate <= a + 2a|Re w|): ~ 1/4 of a period or e-fold per panel of 10 nodes
        panels = int(math.ceil((abs(wi) + abs(wr)) * 2.0 * a / 4.0 + a)) + 4
        h = 1.0 / panels
        # max of the real exponent over the nodes, for scaling
        fmax = -np.inf
        for p in range(panels):
            for g in range(10):
                x = (p + 0.5 + 0.5 * gx[g]) * h
                y = lq + (2.0 * x - 1.0) * a
                ell = _logaddexp(l1q, y)
                f = -a * x + wr * ell
                if f > fmax:
                    fmax = f
        acc_re = 0.0
        acc_im = 0.0
        for p in range(panels):
            for g in range(10):
                x = (p + 0.5 + 0.5 * gx[g]) * h
                y = lq + (2.0 * x - 1.0) * a
                ell = _logaddexp(l1q, y)
                mag = math.exp(-a * x + wr * ell - fmax) * gw[g] * 0.5 * h
                acc_re += mag * math.cos(wi * ell)
                acc_im += mag * math.sin(wi * ell)
        out_re[j] = math.log(math.sqrt(acc_re * acc_re + acc_im * acc_im)) + fmax + math.log(0.5 * a)
        out_im[j] = math.atan2(acc_im, acc_re)
    return out_re, out_im


@njit(cache=True)
def sl_middle_tv(c, q, a, add, npts):  # pragma: no cover - compiled
    """(end values + TV) of the middle part's tilted density in the loss variable, for |C(c+it)| <= . / |t|.

    Integration by parts on (lo, hi): |int f(l) e^{itl} dl| <= (f(lo) + f(hi) + TV(f)) / |t|.
    """
    lq = math.log(q)
    l1q = math.log1p(-q)
    wr = -c if add else c + 1.0
    tv = 0.0
    prev = 0.0
    first = 0.0
    for i in range(npts + 1):
        x = i / npts
        y = lq + (2.0 * x - 1.0) * a
        ell = _logaddexp(l1q, y)
        # L'(x) = 2 a q r / (1 - q + q r) = 2a exp(y - ell)
        lf = math.log(0.5 * a) - a * x + wr * ell - (math.log(2.0 * a) + y - ell)
        f = math.exp(lf)
        if i == 0:
            first = f
        else:
            tv += abs(f - prev)
        prev = f
    return first + prev + tv
