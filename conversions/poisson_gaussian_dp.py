"""Exact privacy profile of ONE Poisson-subsampled Gaussian mechanism (one DP-SGD step), via mu-GDP.

With noise N(0, sigma^2) on a sum of L2 sensitivity Delta, sample rate q and mu = Delta / sigma, the
dominating pairs of one step under add/remove are P = (1 - q) N(0, 1) + q N(mu, 1) against Q = N(0, 1)
("remove") and the swapped pair ("add").  The privacy loss is monotone in the output, so each profile
is a one-dimensional tail difference, and both reduce to the Gaussian (mu-GDP) profile
delta_G(v) = Phi(-v/mu + mu/2) - e^v Phi(-v/mu - mu/2) at a transformed epsilon:

    remove:  delta(eps) = q * delta_G(u),                 u = log(1 + (e^eps - 1) / q),
    add:     delta(eps) = (1 - e^eps (1 - q)) * delta_G(w),  w = log(q / (e^-eps - 1 + q)),
             and delta(eps) = 0 for eps >= -log(1 - q).

Derivation (ours): in the remove pair L(x) = log(1 - q + q e^{mu x - mu^2/2}) exceeds eps exactly when
mu x - mu^2/2 > u, i.e. x > x_u = u/mu + mu/2, and P(L > eps) - e^eps Q(L > eps) =
q Phi(mu - x_u) - (e^eps - 1 + q) Phi(-x_u) = q [Phi(mu - x_u) - e^u Phi(-x_u)] = q delta_G(u) since
e^eps - 1 + q = q e^u.  In the add pair the loss is -L(x) and the event is x < mu/2 - w/mu; with
1 - e^eps (1 - q) = e^eps q e^-w, P(-L > eps) - e^eps Q(-L > eps) = e^eps q [e^-w Phi(mu/2 - w/mu) -
Phi(-mu/2 - w/mu)] = e^eps q e^-w delta_G(w) = (1 - e^eps (1 - q)) delta_G(w).  The
remove identity is the tight amplification-by-subsampling profile of Balle, Barthe & Gaboardi (2018,
Thm 8 with the Gaussian pair) and Zhu, Dong & Wang (2022, Prop. 30); the tests check both directions
against mpmath integration of the mixture densities.

Exact for one step (the only error is floating point, carried as a certified bracket: the transformed
epsilon is widened by its rounding before the Gaussian profile's rigorous log-bounds
(:func:`conversions.gaussian_dp.gaussian_log_delta_bounds`) are evaluated, and the prefactors are
rounded outward).  Compositions (T >= 2 steps) have no such form and go through the numerical routes.
"""

from __future__ import annotations

import math

from .gaussian_dp import gaussian_log_delta_bounds

_U = 2.0 ** -53
# relative widening of a transformed epsilon (expm1, division, log1p: a few ulps each), generous
_ARG_REL = 64.0 * _U
_DIRECTIONS = ("remove", "add")
# log of the smallest subnormal float: an upper bound on log delta for deltas that underflow
_LOG_TINY = math.log(5e-324)


def _check(mu: float, q: float, direction: str) -> None:
    if not (math.isfinite(mu) and mu > 0.0):
        raise ValueError(f"mu = sensitivity / sigma must be finite and > 0, got {mu!r}")
    if not (0.0 < q <= 1.0):
        raise ValueError(f"sample_rate must lie in (0, 1], got {q!r}")
    if direction not in _DIRECTIONS:
        raise ValueError(f"direction must be 'remove' or 'add', got {direction!r}")


def _remove_arg(eps: float, q: float) -> tuple[float, float]:
    """(u_lo, u_hi) around u = log(1 + (e^eps - 1) / q) >= 0."""
    if eps > 700.0:  # e^eps overflows: u = eps - log q + log1p(-(1 - q) e^-eps), the last term ~ -1e-304
        u = eps - math.log(q)
    else:
        u = math.log1p(math.expm1(eps) / q)
    d = _ARG_REL * u + 4.0 * _U * (eps + abs(math.log(q)))
    return max(u - d, 0.0), u + d


def _add_arg(eps: float, q: float) -> tuple[float, float, float, float]:
    """(w_lo, w_hi, pf_lo, pf_hi): w = log(q / (e^-eps - 1 + q)) (inf when the denominator is <= 0) and
    the prefactor pf = 1 - e^eps (1 - q), each widened by its rounding."""
    g = q + math.expm1(-eps)  # e^-eps - 1 + q, absolute rounding error <= 4u (q + |expm1(-eps)|)
    eg = 4.0 * _U * (q + abs(math.expm1(-eps))) + 5e-324
    a = eps + math.log1p(-q) if q < 1.0 else -math.inf  # pf = -expm1(a)
    if a == -math.inf:
        pf_lo = pf_hi = 1.0
    else:
        ea = 4.0 * _U * (abs(eps) + abs(math.log1p(-q)))
        if a - ea >= 0.0:  # e^eps (1 - q) >= 1: the prefactor is <= 0, the add pair's delta is 0
            return math.inf, math.inf, 0.0, 0.0
        pf_hi = min(1.0, -math.expm1(a - ea) * (1.0 + 4.0 * _U))
        pf_lo = max(0.0, -math.expm1(a + ea) * (1.0 - 4.0 * _U))
    g_hi, g_lo = g + eg, g - eg
    if g_hi <= 0.0:
        return math.inf, math.inf, 0.0, 0.0
    w_lo = max(math.log(q / g_hi) * (1.0 - _ARG_REL) - 4.0 * _U, 0.0)
    w_hi = math.log(q / g_lo) * (1.0 + _ARG_REL) + 4.0 * _U if g_lo > 0.0 else math.inf
    return w_lo, w_hi, pf_lo, pf_hi


def log_delta_bounds(eps: float, mu: float, q: float, direction: str) -> tuple[float, float]:
    """(lower, upper) of log delta(eps) for one step in ``direction``; eps >= 0.  Certified in floating
    point: lower <= log delta_true <= upper (lower may be -inf)."""
    _check(mu, q, direction)
    if not (eps >= 0.0):
        raise ValueError(f"epsilon must be >= 0, got {eps!r}")
    mu_err = 2.0 * _U  # mu = Delta / sigma: one division
    if q == 1.0:  # the Gaussian pair itself
        lo, _, up = gaussian_log_delta_bounds(eps, mu, mu_err)
        return lo, up
    if direction == "remove":
        u_lo, u_hi = _remove_arg(eps, q)
        if -u_lo / mu + mu / 2.0 < -40.0:  # delta <= q Phi(-u/mu + mu/2) < 1e-349: below every float
            return -math.inf, _LOG_TINY
        up = gaussian_log_delta_bounds(u_lo, mu, mu_err)[2]
        lo = gaussian_log_delta_bounds(u_hi, mu, mu_err)[0] if math.isfinite(u_hi) else -math.inf
        lq = math.log(q)
        s = 4.0 * _U * (abs(lq) + abs(up) + (abs(lo) if math.isfinite(lo) else 0.0) + 1.0)
        return lq + lo - s, min(lq + up + s, 0.0)
    w_lo, w_hi, pf_lo, pf_hi = _add_arg(eps, q)
    if pf_hi <= 0.0 or w_lo == math.inf:  # eps >= -log(1 - q): the add pair's loss never exceeds eps
        return -math.inf, -math.inf
    up = _add_upper(w_lo, pf_hi, mu)
    if pf_lo <= 0.0 or not math.isfinite(w_hi):
        return -math.inf, up
    glo = gaussian_log_delta_bounds(w_hi, mu, mu_err)[0]
    lpf = math.log(pf_lo)
    s = 4.0 * _U * (abs(lpf) + (abs(glo) if math.isfinite(glo) else 0.0) + 1.0)
    return lpf + glo - s, up


def _add_upper(w_lo: float, pf_hi: float, mu: float) -> float:
    if pf_hi <= 0.0 or not math.isfinite(w_lo):
        return -math.inf
    if -w_lo / mu + mu / 2.0 < -40.0:  # delta <= Phi(-w/mu + mu/2) < 1e-349
        return _LOG_TINY
    gup = gaussian_log_delta_bounds(w_lo, mu, 2.0 * _U)[2]
    lpf = math.log(pf_hi)
    s = 4.0 * _U * (abs(lpf) + abs(gup) + 1.0)
    return min(lpf + gup + s, 0.0)


def delta_bounds(eps: float, mu: float, q: float, direction: str) -> tuple[float, float]:
    """(lower, upper) of delta(eps) for one step: lower <= delta_true <= upper in floating point."""
    llo, lup = log_delta_bounds(eps, mu, q, direction)
    up = 0.0 if lup == -math.inf else min(1.0, math.nextafter(math.exp(lup) * (1.0 + 4.0 * _U), math.inf))
    lo = 0.0
    if llo > -math.inf:
        lo = max(0.0, math.nextafter(math.exp(min(llo, 0.0)) * (1.0 - 4.0 * _U), 0.0))
    return lo, up


def epsilon_bounds(delta: float, mu: float, q: float, direction: str,
                   rtol: float = 1e-12) -> tuple[float, float]:
    """(lower, upper) of eps(delta) = the smallest eps >= 0 with delta(eps) <= ``delta``, for one step.

    ``upper`` is an eps whose certified delta upper bound is <= ``delta`` (so eps(delta) <= upper);
    ``lower`` is an eps whose certified delta lower bound exceeds ``delta`` (so eps(delta) > lower), or
    0.  Bisection on the certified log-bounds to ``rtol`` relative (plus 1e-300 absolute)."""
    _check(mu, q, direction)
    if not (0.0 < delta < 1.0):
        raise ValueError(f"delta must lie in (0, 1), got {delta!r}")
    ld = math.log(delta)
    ld_up, ld_lo = ld - 2.0 * _U * abs(ld), ld + 2.0 * _U * abs(ld)  # log's rounding, on the safe side

    def up_ok(e: float) -> bool:  # certified: delta(e) <= delta
        return log_delta_bounds(e, mu, q, direction)[1] <= ld_up

    def lo_above(e: float) -> bool:  # certified: delta(e) > delta
        return log_delta_bounds(e, mu, q, direction)[0] > ld_lo

    # upper end: the smallest e (to rtol) with up_ok(e)
    if up_ok(0.0):
        upper = 0.0
    else:
        lo, hi = 0.0, 1.0
        while not up_ok(hi):
            lo, hi = hi, 2.0 * hi
            if hi > 1e300:
                return 0.0, math.inf
        while hi - lo > rtol * hi + 1e-300:
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if up_ok(mid) else (mid, hi)
        upper = hi
    # lower end: the largest e (to rtol) with lo_above(e), searched below upper
    if upper == 0.0 or not lo_above(0.0):
        return 0.0, upper
    lo, hi = 0.0, upper
    if lo_above(hi):  # cannot happen for a consistent pair of bounds; stay safe
        return 0.0, upper
    while hi - lo > rtol * hi + 1e-300:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if lo_above(mid) else (lo, mid)
    return lo, upper
