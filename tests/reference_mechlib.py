"""Independent mpmath oracles for the wave-2 mechanism library (discrete noise, zCDP, selection by score,
Gaussian mixtures, matrix mechanisms).

Nothing here imports ``accountant``, ``mechanisms`` or ``conversions``: every formula is re-derived from
the definitions (pmfs, densities) and evaluated by direct enumeration or quadrature in mpmath.

Conventions: privacy loss L = log(p/q) under P; delta(eps) = sum_x (p(x) - e^eps q(x))_+ (exact
hockey-stick divergence); eps(delta) by bisection on the exact delta.
"""

from __future__ import annotations

import functools

import mpmath as mp

# ---------------------------------------------------------------------------------------------------
# generic helpers
# ---------------------------------------------------------------------------------------------------


def pair_delta(eps, p: dict, q: dict):
    """sum_x (p(x) - e^eps q(x))_+ for two pmfs given as {x: mpf}."""
    ee = mp.exp(mp.mpf(eps))
    tot = mp.mpf(0)
    for x, px in p.items():
        v = px - ee * q.get(x, mp.mpf(0))
        if v > 0:
            tot += v
    return tot


def loss_delta(eps, atoms):
    """E[(1 - e^{eps - L})_+] for a list of (loss, mass) mpf pairs."""
    e = mp.mpf(eps)
    return mp.fsum(w * (1 - mp.exp(e - l)) for l, w in atoms if l > e)


def epsilon_from_delta(delta_fn, delta, lo=0.0, hi=50.0, iters=80):
    """Smallest eps with delta_fn(eps) <= delta by bisection (delta_fn non-increasing)."""
    d = mp.mpf(delta)
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    if delta_fn(lo) <= d:
        return lo
    for _ in range(iters):
        mid = (lo + hi) / 2
        if delta_fn(mid) > d:
            lo = mid
        else:
            hi = mid
    return hi


def compose_losses(atoms, k):
    """k-fold product of a finite loss measure [(loss, mass)], losses merged to 30 digits."""
    out = {mp.mpf(0): mp.mpf(1)}
    for _ in range(k):
        nxt: dict = {}
        for l1, w1 in out.items():
            for l2, w2 in atoms:
                key = mp.nstr(l1 + l2, 30)
                if key in nxt:
                    nxt[key] = (nxt[key][0], nxt[key][1] + w1 * w2)
                else:
                    nxt[key] = (l1 + l2, w1 * w2)
        out = {v[0]: v[1] for v in nxt.values()}
    return list(out.items())


# ---------------------------------------------------------------------------------------------------
# discrete Gaussian
# ---------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def dg_pmf(sigma, width=None):
    """{x: P(Y = x)} of N_Z(0, sigma^2) for |x| <= width (default 45 sigma + 10: the rest < 1e-400)."""
    s2 = mp.mpf(sigma) ** 2
    w = int(width if width is not None else 45 * float(sigma) + 10)
    un = {x: mp.exp(-mp.mpf(x) ** 2 / (2 * s2)) for x in range(-w, w + 1)}
    z = mp.fsum(un.values())
    return {x: v / z for x, v in un.items()}


def dg_delta_single(eps, sigma, sens=1, dps=40):
    """CKS 2020 Thm 7 evaluated by enumeration: P[X > eps s2/D - D/2] - e^eps P[X > eps s2/D + D/2]."""
    with mp.workdps(dps):
        p = dg_pmf(sigma)
        s2, d = mp.mpf(sigma) ** 2, mp.mpf(sens)
        e = mp.mpf(eps)
        a = e * s2 / d - d / 2
        b = e * s2 / d + d / 2
        return (mp.fsum(v for x, v in p.items() if x > a)
                - mp.exp(e) * mp.fsum(v for x, v in p.items() if x > b))


def dg_delta_shift(eps, sigma, shift, dps=40):
    """Exact delta of the pair (N_Z(0), N_Z(shift)) by the pmf definition."""
    with mp.workdps(dps):
        p = dg_pmf(sigma)
        q = {x + shift: v for x, v in p.items()}
        return pair_delta(eps, p, q)


@functools.lru_cache(maxsize=32)
def dg_atoms_composed(sigma, sens, k, dps=30):
    """Loss atoms of the k-fold pair: loss k D^2/(2 s2) - (D/s2) S, S = sum of k iid N_Z(0, s2)."""
    with mp.workdps(dps):
        p = dg_pmf(sigma, width=int(30 * float(sigma) + 8))
        dist = {0: mp.mpf(1)}
        for _ in range(k):
            nxt: dict = {}
            for s, w in dist.items():
                for x, v in p.items():
                    nxt[s + x] = nxt.get(s + x, mp.mpf(0)) + w * v
            dist = {s: w for s, w in nxt.items() if w > mp.mpf(10) ** (-(dps + 20))}
        s2, d = mp.mpf(sigma) ** 2, mp.mpf(sens)
        return tuple((k * d * d / (2 * s2) - d / s2 * s, w) for s, w in dist.items())


def dg_delta_composed(eps, sigma, sens, k, dps=30):
    """Exact k-fold delta of the discrete Gaussian pair (enumerated convolution)."""
    with mp.workdps(dps):
        return loss_delta(eps, dg_atoms_composed(sigma, sens, k, dps))


def dg_rdp(alpha, sigma, sens=1, dps=40):
    """D_alpha(N_Z(0) || N_Z(D)) by the sum over the pmfs."""
    with mp.workdps(dps):
        p = dg_pmf(sigma)
        a = mp.mpf(alpha)
        tot = mp.fsum(v ** a * p[x - sens] ** (1 - a) for x, v in p.items() if (x - sens) in p)
        return mp.log(tot) / (a - 1)


# ---------------------------------------------------------------------------------------------------
# discrete Laplace
# ---------------------------------------------------------------------------------------------------


def dlap_pmf(scale, width=None):
    t = mp.mpf(scale)
    r = mp.exp(-1 / t)
    w = int(width if width is not None else 120 * float(scale) + 20)  # the rest has mass < e^{-120}
    return {x: (1 - r) / (1 + r) * r ** abs(x) for x in range(-w, w + 1)}


@functools.lru_cache(maxsize=32)
def dlap_atoms(scale, sens, k=1, dps=40):
    """Loss atoms of the k-fold discrete Laplace pair, built from the pmf (losses by definition)."""
    with mp.workdps(dps):
        p = dlap_pmf(scale)
        atoms: dict = {}
        for x, v in p.items():
            if (x - sens) not in p:
                continue
            l0 = mp.log(v / p[x - sens])
            key = mp.nstr(l0, 30)
            atoms[key] = (l0, atoms.get(key, (l0, mp.mpf(0)))[1] + v)
        at = list(atoms.values())
        return tuple(compose_losses(at, k) if k > 1 else at)


def dlap_delta(eps, scale, sens, k=1, dps=40):
    """Exact k-fold delta of the discrete Laplace pair."""
    with mp.workdps(dps):
        return loss_delta(eps, dlap_atoms(scale, sens, k, dps))


def dlap_rdp(alpha, scale, sens, dps=40):
    with mp.workdps(dps):
        p = dlap_pmf(scale)
        a = mp.mpf(alpha)
        tot = mp.fsum(v ** a * p[x - sens] ** (1 - a) for x, v in p.items() if (x - sens) in p)
        return mp.log(tot) / (a - 1)


# ---------------------------------------------------------------------------------------------------
# Skellam: Poisson(mu/2) - Poisson(mu/2), pmf e^{-mu} I_|k|(mu)
# ---------------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=32)
def skellam_pmf(mu, width=None, dps=30):
    with mp.workdps(dps):
        m = mp.mpf(mu)
        w = int(width if width is not None else 40 * float(mu) ** 0.5 + 200)
        return {k: mp.exp(-m) * mp.besseli(abs(k), m) for k in range(-w, w + 1)}


@functools.lru_cache(maxsize=32)
def skellam_atoms(mu, sens, k=1, dps=30):
    with mp.workdps(dps):
        p = skellam_pmf(mu, None, dps)
        atoms = [(mp.log(v / p[x - sens]), v) for x, v in p.items()
                 if (x - sens) in p and v > mp.mpf(10) ** -60]
        return tuple(compose_losses(atoms, k) if k > 1 else atoms)


def skellam_delta(eps, mu, sens, k=1, dps=30):
    with mp.workdps(dps):
        return loss_delta(eps, skellam_atoms(mu, sens, k, dps))


def skellam_rdp(alpha, mu, sens, dps=30, width=None):
    """D_alpha(Sk || Sk + D) by direct summation (``width`` large enough for the order)."""
    with mp.workdps(dps):
        p = skellam_pmf(mu, width, dps)
        a = mp.mpf(alpha)
        tot = mp.fsum(v ** a * p[x - sens] ** (1 - a) for x, v in p.items() if (x - sens) in p)
        return mp.log(tot) / (a - 1)


# ---------------------------------------------------------------------------------------------------
# zCDP conversion (Canonne, Kamath & Steinke 2020, Cor. 13 form), by direct minimisation in mpmath
# ---------------------------------------------------------------------------------------------------


def zcdp_delta(eps, rho, dps=40):
    """min over alpha > 1 of exp((alpha - 1)(alpha rho - eps)) / alpha * (1 - 1/alpha)^(alpha - 1)
    (CKS 2020 Prop. 12 / Cor. 13 for the curve rho alpha), minimised by golden section in log(alpha - 1)."""
    with mp.workdps(dps):
        r, e = mp.mpf(rho), mp.mpf(eps)

        def f(x):
            a = 1 + mp.exp(x)
            return (a - 1) * (a * r - e) - mp.log(a) + (a - 1) * mp.log(1 - 1 / a)

        lo, hi = mp.mpf(-30), mp.mpf(30)
        g = (mp.sqrt(5) - 1) / 2
        for _ in range(300):
            x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
            if f(x1) < f(x2):
                hi = x2
            else:
                lo = x1
        return min(mp.mpf(1), mp.exp(f((lo + hi) / 2)))


# ---------------------------------------------------------------------------------------------------
# bounded range / exponential mechanism
# ---------------------------------------------------------------------------------------------------


def br_binary_pair(eps, t):
    """The binary pair B_t of an eps-BR mechanism (Dong, Durfee & Rogers 2020): losses t (P-mass p) and
    t - eps (P-mass 1 - p), p = (e^eps - e^t)/(e^eps - 1); as {outcome: (P, Q)}."""
    e, t = mp.mpf(eps), mp.mpf(t)
    p = (mp.exp(e) - mp.exp(t)) / (mp.exp(e) - 1)
    return {0: (p, p * mp.exp(-t)), 1: (1 - p, (1 - p) * mp.exp(e - t))}


def br_delta_sup(x, eps, grid=2000, dps=30):
    """sup over t in [0, eps] of delta_{B_t}(x) on a fine grid (a lower bound on the sup)."""
    with mp.workdps(dps):
        best = mp.mpf(0)
        for i in range(grid + 1):
            t = mp.mpf(eps) * i / grid
            pr = br_binary_pair(eps, t)
            d = pair_delta(x, {k: v[0] for k, v in pr.items()}, {k: v[1] for k, v in pr.items()})
            best = max(best, d)
        return best


def br_rdp_sup(alpha, eps, grid=4000, dps=30):
    """sup over t of D_alpha(B_t) on a grid (a lower bound on the sup)."""
    with mp.workdps(dps):
        a = mp.mpf(alpha)
        best = mp.mpf(0)
        for i in range(grid + 1):
            pr = br_binary_pair(eps, mp.mpf(eps) * i / grid)
            v = mp.log(mp.fsum(P ** a * Q ** (1 - a) for P, Q in pr.values() if P > 0)) / (a - 1)
            best = max(best, v)
        return best


def em_pair(scores_d, scores_dp, eps, sens=1):
    """Output pmfs of the exponential mechanism exp(eps u / (2 sens)) on two score vectors."""
    e = mp.mpf(eps)
    wp = [mp.exp(e * u / (2 * sens)) for u in scores_d]
    wq = [mp.exp(e * u / (2 * sens)) for u in scores_dp]
    zp, zq = mp.fsum(wp), mp.fsum(wq)
    return {i: w / zp for i, w in enumerate(wp)}, {i: w / zq for i, w in enumerate(wq)}


# ---------------------------------------------------------------------------------------------------
# Gaussian mixtures: P = sum_i w_i N(c_i, 1), Q = N(0, 1) (quadrature)
# ---------------------------------------------------------------------------------------------------


def mixture_log_mgf(s, weights, means, direction="remove", dps=30):
    """log E[e^{sL}] for the pair (P, Q) (remove) or (Q, P) (add), by mpmath quadrature in x."""
    with mp.workdps(dps):
        w = [mp.mpf(x) for x in weights]
        c = [mp.mpf(x) for x in means]
        s = mp.mpf(s)

        def g(x):
            return mp.fsum(wi * mp.exp(ci * x - ci * ci / 2) for wi, ci in zip(w, c, strict=True))

        def f(x):
            phi = mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi)
            return phi * (g(x) ** (1 + s) if direction == "remove" else g(x) ** (-s))

        cm = max(c)
        pts = [-mp.inf, -10, 0, cm, cm + 10 + float(s) * float(cm), mp.inf]
        return mp.log(mp.quad(f, pts))


def mixture_delta(eps, weights, means, direction="remove", dps=30):
    """delta(eps) = int (p - e^eps q)_+ for the mixture pair by quadrature (split at the crossing points)."""
    with mp.workdps(dps):
        w = [mp.mpf(x) for x in weights]
        c = [mp.mpf(x) for x in means]
        ee = mp.exp(mp.mpf(eps))

        def phi(x):
            return mp.exp(-x * x / 2) / mp.sqrt(2 * mp.pi)

        def p(x):
            return mp.fsum(wi * phi(x - ci) for wi, ci in zip(w, c, strict=True))

        a, b = (p, phi) if direction == "remove" else (phi, p)

        def h(x):
            v = a(x) - ee * b(x)
            return v if v > 0 else mp.mpf(0)

        # locate sign changes of a - e^eps b on a grid and integrate piecewise
        xs = [mp.mpf(-30) + i * mp.mpf(60) / 3000 for i in range(3001)]
        cuts = [-mp.inf]
        prev = a(xs[0]) - ee * b(xs[0])
        for x0, x1 in zip(xs[:-1], xs[1:], strict=True):
            cur = a(x1) - ee * b(x1)
            if (prev > 0) != (cur > 0):
                cuts.append(mp.findroot(lambda x: a(x) - ee * b(x), (x0, x1), solver="bisect"))
            prev = cur
        cuts.append(mp.inf)
        return mp.fsum(mp.quad(h, [cuts[i], cuts[i + 1]]) for i in range(len(cuts) - 1))


def br_rdp_sup_golden(alpha, eps, dps=40):
    """sup over t in [0, eps] of D_alpha(B_t) by golden-section search on t (the objective is unimodal:
    log-concave in u = e^t), endpoints included."""
    with mp.workdps(dps):
        a = mp.mpf(alpha)

        def f(t):
            pr = br_binary_pair(eps, t)
            return mp.log(mp.fsum(P ** a * Q ** (1 - a) for P, Q in pr.values() if P > 0)) / (a - 1)

        lo, hi = mp.mpf(0), mp.mpf(eps)
        g = (mp.sqrt(5) - 1) / 2
        for _ in range(200):
            x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
            if f(x1) < f(x2):
                lo = x1
            else:
                hi = x2
        return max(f((lo + hi) / 2), f(mp.mpf(0)), f(mp.mpf(eps) * (1 - mp.mpf(10) ** -30)))


def br_composed_delta(x, eps, ts, dps=40):
    """delta(x) of the product of the binary pairs B_t for t in ``ts`` (exact enumeration, 2^k outcomes
    merged by the number of 'low' outcomes per distinct t)."""
    with mp.workdps(dps):
        atoms = [(mp.mpf(0), mp.mpf(1))]
        for t in ts:
            pr = br_binary_pair(eps, t)
            step = [(mp.log(P / Q), P) for P, Q in pr.values() if P > 0]
            nxt: dict = {}
            for l1, w1 in atoms:
                for l2, w2 in step:
                    key = mp.nstr(l1 + l2, 25)
                    old = nxt.get(key, (l1 + l2, mp.mpf(0)))
                    nxt[key] = (old[0], old[1] + w1 * w2)
            atoms = list(nxt.values())
        return loss_delta(x, atoms)


# ---------------------------------------------------------------------------------------------------
# two one-dimensional Gaussians with different variances: P = N(0, 1), Q = N(d, 1/a)
# ---------------------------------------------------------------------------------------------------


def gaussian_pair_delta_1d(eps, d, a, direction="remove", dps=40):
    """Exact delta(eps) by normal CDFs over the region {L > eps} (a quadratic inequality in x).

    L(x) = log p/q = (a - 1) x^2 / 2 - a d x + a d^2 / 2 - log(a) / 2; "add" uses -L and the swapped
    measures."""
    with mp.workdps(dps):
        d, a, e = mp.mpf(d), mp.mpf(a), mp.mpf(eps)
        sq = 1 / mp.sqrt(a)
        sgn = 1 if direction == "remove" else -1
        # sgn * L(x) - eps = A x^2 + B x + C > 0
        A = sgn * (a - 1) / 2
        B = -sgn * a * d
        C = sgn * (a * d * d / 2 - mp.log(a) / 2) - e

        def pm(lo, hi):  # P(lo < X < hi), Q(lo < Y < hi)
            return (mp.ncdf(hi) - mp.ncdf(lo), mp.ncdf((hi - d) / sq) - mp.ncdf((lo - d) / sq))

        if A == 0:
            if B == 0:
                regions = [(-mp.inf, mp.inf)] if C > 0 else []
            else:
                r = -C / B
                regions = [(r, mp.inf)] if B > 0 else [(-mp.inf, r)]
        else:
            disc = B * B - 4 * A * C
            if disc <= 0:
                regions = [(-mp.inf, mp.inf)] if A > 0 else []
            else:
                r1 = (-B - mp.sqrt(disc)) / (2 * A)
                r2 = (-B + mp.sqrt(disc)) / (2 * A)
                lo, hi = min(r1, r2), max(r1, r2)
                regions = [(-mp.inf, lo), (hi, mp.inf)] if A > 0 else [(lo, hi)]
        tot = mp.mpf(0)
        for lo, hi in regions:
            p, q = pm(lo, hi)
            tot += (p - mp.exp(e) * q) if direction == "remove" else (q - mp.exp(e) * p)
        return tot
