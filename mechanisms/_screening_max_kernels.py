"""numba kernels of noisy screening's RDP: the maximum over the binary pairs (pass-probability pairs of
the screened and unscreened counts) of the binary Renyi divergence, with block / super-block pruning by
certified bounds, and the full scan that tests the pruning.  The math is in :mod:`mechanisms.screening`
and docs/derivations/noisy-screening.md."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._screening_kernels import _INF, _kl_atom, _logaddexp, atom_const, binary_rdp, expm1mx

_SQRT1_2 = 0.7071067811865476
_HALF_LOG_2PI = 0.9189385332046728
_LOG2 = 0.6931471805599453

_LIN_FLOOR = -300.0  # atoms with log-mass below this are evaluated in log space


@njit(cache=True)
def max_binary_rdp(alpha: np.ndarray, lp: np.ndarray, lpb: np.ndarray, lq: np.ndarray,
                   lqb: np.ndarray) -> np.ndarray:
    """max over pairs j of D_alpha(Bern(p_j) || Bern(q_j)) for every alpha (O(#pairs) per order).

    Per pair, s = sum_atoms a [expm1mx(beta r) + beta expm1mx(-r)] (module doc) is evaluated in
    linear space when all four masses exceed e^-300 and beta r < 700 (no overflow or underflow is
    then possible), otherwise in log space by :func:`binary_rdp`.

    Exact evaluation is skipped for a pair whose rigorous upper bound cannot beat the best value
    found so far.  With K_j(beta) = beta D_{1+beta} = log E_P[e^{beta L}] (L the privacy loss, taking
    the two values r1 = log(p/q), r2 = log((1-p)/(1-q))), Hoeffding's lemma under the tilted law at
    an anchor beta0 <= beta gives
        K_j(beta) <= K_j(beta0) + (beta - beta0) K_j'(beta0) + (beta - beta0)^2 (r1 - r2)^2 / 8,
    with K_j(0) = 0, K_j'(0) = KL_j as the initial anchor and every exact evaluation re-anchoring the
    pair (orders are visited in ascending order); D_inf,j bounds every order.  The search starts
    from the previous order's maximiser.  The result equals a full scan's maximum (tested against
    :func:`max_binary_rdp_full`).  Equals ``max_binary_rdp_scan(alpha, lp, lpb, lq, lqb,
    *max_binary_rdp_prep(lp, lpb, lq, lqb))``; callers evaluating the same pairs repeatedly keep the
    O(#pairs) preparation.
    """
    return max_binary_rdp_scan(alpha, lp, lpb, lq, lqb, *max_binary_rdp_prep(lp, lpb, lq, lqb))


_BLOCK = 32
_SUPER = 32  # blocks per super-block (a second level of the same bounds)


@njit(cache=True)
def _group_skip(beta, best, g, gdinf, gkl, ghoef, gfin, gmag, grmag, gb0, gm1, gm2, gr1, gr2, gr1min,
                gr2min, gva, grp, lo, hi, lp, lpb, lq, lqb):  # pragma: no cover - compiled
    """True when no pair lo <= j < hi of group g can beat ``best`` at order 1 + beta (see the scan):
    min(D_inf, KL + beta H) over the group; the second-order bound
    D <= KL + (beta / 2) sum_atoms a r^2 e^{beta max(r, 0)} (from log(1 + s) <= s and
    e^y - 1 - y <= (y^2 / 2) e^{max(y, 0)}; tight as alpha -> 1 and for pairs of tiny mass), with
    ``gva`` = max_j log sum_atoms a r^2 and ``grp`` = max_j max(r, 0); then the anchored two-point
    bound (refreshed here)."""
    ubb = gdinf[g]
    if beta < _INF:
        hb = gkl[g] + beta * ghoef[g]
        if hb < ubb:
            ubb = hb
        if gva[g] > -_INF:
            lv = math.log(0.5 * beta) + gva[g] + beta * grp[g]
            if lv < 700.0:
                vb = gkl[g] + math.exp(lv) * (1.0 + 1e-12)
                if vb < ubb:
                    ubb = vb
    if ubb * (1.0 + 1e-9) + 1e-300 <= best:
        return True
    if not (gfin[g] and 0.0 < beta < _INF and best > 0.0):
        return False
    marg = 1e-13 * (gmag[g] + beta * grmag[g]) + 1e-300
    if gb0[g] >= 0.0:
        db = beta - gb0[g]
        if db >= 0.0:
            kb = _logaddexp(gm1[g] + db * gr1[g], gm2[g] + db * gr2[g])
        else:
            kb = _logaddexp(gm1[g] + db * gr1min[g], gm2[g] + db * gr2min[g])
        if (kb + marg) / beta * (1.0 + 1e-9) <= best:
            return True
    # refresh the group's maxima at this order and test again
    m1 = -_INF
    m2 = -_INF
    for q in range(lo, hi):
        m1 = max(m1, lp[q] + beta * (lp[q] - lq[q]))
        m2 = max(m2, lpb[q] + beta * (lpb[q] - lqb[q]))
    gb0[g] = beta
    gm1[g] = m1
    gm2[g] = m2
    return (_logaddexp(m1, m2) + marg) / beta * (1.0 + 1e-9) <= best


@njit(cache=True)
def _super_arrays(bdinf, bkl, bhoef, bfin, br1, br2, bmag, brmag, br1min, br2min, bva,
                  brp):  # pragma: no cover - compiled
    """Per-super-block maxima (minima for the smallest slopes) of the block constants."""
    nblk = bdinf.shape[0]
    ns = (nblk + _SUPER - 1) // _SUPER
    sdinf = np.zeros(ns)
    skl = np.zeros(ns)
    shoef = np.zeros(ns)
    sfin = np.ones(ns, dtype=np.bool_)
    sr1 = np.full(ns, -_INF)
    sr2 = np.full(ns, -_INF)
    smag = np.zeros(ns)
    srmag = np.zeros(ns)
    sr1min = np.full(ns, _INF)
    sr2min = np.full(ns, _INF)
    sva = np.full(ns, -_INF)
    srp = np.zeros(ns)
    for b in range(nblk):
        g = b // _SUPER
        sdinf[g] = max(sdinf[g], bdinf[b])
        skl[g] = max(skl[g], bkl[b])
        shoef[g] = max(shoef[g], bhoef[b])
        sfin[g] = sfin[g] and bfin[b]
        sr1[g] = max(sr1[g], br1[b])
        sr2[g] = max(sr2[g], br2[b])
        smag[g] = max(smag[g], bmag[b])
        srmag[g] = max(srmag[g], brmag[b])
        sr1min[g] = min(sr1min[g], br1min[b])
        sr2min[g] = min(sr2min[g], br2min[b])
        sva[g] = max(sva[g], bva[b])
        srp[g] = max(srp[g], brp[b])
    return sdinf, skl, shoef, sfin, sr1, sr2, smag, srmag, sr1min, sr2min, np.full(ns, -1.0), np.zeros(ns), \
        np.zeros(ns), sva, srp


@njit(cache=True)
def max_binary_rdp_prep(lp: np.ndarray, lpb: np.ndarray, lq: np.ndarray, lqb: np.ndarray):
    """Per-pair and per-block constants of :func:`max_binary_rdp` (independent of the orders)."""
    npair = lp.shape[0]
    cp = np.empty(npair)
    cpb = np.empty(npair)
    kl = np.empty(npair)
    hoef = np.empty(npair)
    dinf = np.empty(npair)
    lin = np.empty(npair, dtype=np.bool_)
    pp = np.empty(npair)
    ppb = np.empty(npair)
    r1s = np.empty(npair)
    r2s = np.empty(npair)
    e12 = np.empty(npair)
    for j in range(npair):
        dinf[j] = binary_rdp(_INF, lp[j], lpb[j], lq[j], lqb[j], 0.0, 0.0)
        lin[j] = min(min(lp[j], lpb[j]), min(lq[j], lqb[j])) > _LIN_FLOOR
        if lin[j]:
            r1 = lp[j] - lq[j]
            r2 = lpb[j] - lqb[j]
            hoef[j] = (r1 - r2) * (r1 - r2) / 8.0
            pp[j] = math.exp(lp[j])
            ppb[j] = math.exp(lpb[j])
            r1s[j] = r1
            r2s[j] = r2
            e12[j] = pp[j] * expm1mx(-r1) + ppb[j] * expm1mx(-r2)  # = KL (module doc)
            kl[j] = e12[j]
            cp[j] = 0.0  # log-space constants are only needed if the linear path overflows
            cpb[j] = 0.0
        else:
            cp[j] = atom_const(lp[j], lq[j])
            cpb[j] = atom_const(lpb[j], lqb[j])
            kl[j] = _kl_atom(lp[j], lq[j]) + _kl_atom(lpb[j], lqb[j])
            hoef[j] = _INF
            if lp[j] > -_INF and lpb[j] > -_INF:
                r1 = lp[j] - lq[j]
                r2 = lpb[j] - lqb[j]
                hoef[j] = (r1 - r2) * (r1 - r2) / 8.0
            elif lp[j] == -_INF or lpb[j] == -_INF:
                hoef[j] = 0.0  # one-point law under P: the loss is constant
    # blocks of pairs with a common (anchor-free) bound, so that far-away blocks are skipped at once:
    # max_j D_j(beta) <= min(max_j D_inf,j, max_j KL_j + beta max_j H_j)
    bs = _BLOCK
    nblk = (npair + bs - 1) // bs
    bdinf = np.zeros(nblk)
    bkl = np.zeros(nblk)
    bhoef = np.zeros(nblk)
    # second block bound, from the exact two-point form K_j(beta) = logaddexp(lp_j + beta r1_j,
    # lpb_j + beta r2_j): max_j K_j(beta) <= logaddexp(M1 + (beta - b0) R1, M2 + (beta - b0) R2) for
    # beta >= b0, with M1 = max_j (lp_j + b0 r1_j), R1 = max_j r1_j (same for the second atom) and b0
    # the last order at which the block's maxima were refreshed (the orders ascend, so the bound stays
    # tight); plus a float margin of 1e-13 of the terms' size.  Blocks with a -inf log-mass skip it.
    bfin = np.ones(nblk, dtype=np.bool_)
    br1 = np.full(nblk, -_INF)
    br2 = np.full(nblk, -_INF)
    bmag = np.zeros(nblk)
    brmag = np.zeros(nblk)
    br1min = np.full(nblk, _INF)
    br2min = np.full(nblk, _INF)
    bva = np.full(nblk, -_INF)
    brp = np.zeros(nblk)
    for j in range(npair):
        b = j // bs
        bdinf[b] = max(bdinf[b], dinf[j])
        bkl[b] = max(bkl[b], kl[j])
        bhoef[b] = max(bhoef[b], hoef[j])
        if lp[j] > -_INF and lpb[j] > -_INF and lq[j] > -_INF and lqb[j] > -_INF:
            r1 = lp[j] - lq[j]
            r2 = lpb[j] - lqb[j]
            br1[b] = max(br1[b], r1)
            br2[b] = max(br2[b], r2)
            br1min[b] = min(br1min[b], r1)
            br2min[b] = min(br2min[b], r2)
            # log(p r1^2 + (1-p) r2^2) (a bound: each log term rounded up by a relative 1e-12)
            va = _logaddexp(lp[j] + 2.0 * math.log(abs(r1)) if r1 != 0.0 else -_INF,
                            lpb[j] + 2.0 * math.log(abs(r2)) if r2 != 0.0 else -_INF)
            if va > -_INF:
                va += 1e-12 * (1.0 + abs(va))
            bva[b] = max(bva[b], va)
            brp[b] = max(brp[b], max(r1, r2, 0.0))
            bmag[b] = max(bmag[b], abs(lp[j]) + abs(lpb[j]) + abs(lq[j]) + abs(lqb[j]))
            brmag[b] = max(brmag[b], abs(r1) + abs(r2))
        else:
            bfin[b] = False
    # block anchors of the two-point bound and the last maximiser: state kept across calls (updated
    # in place by the scan; every stored value is a valid bound at any order, see the scan)
    bb0 = np.full(nblk, -1.0)
    bm1 = np.zeros(nblk)
    bm2 = np.zeros(nblk)
    hint = np.zeros(1, dtype=np.int64)
    sup = _super_arrays(bdinf, bkl, bhoef, bfin, br1, br2, bmag, brmag, br1min, br2min, bva, brp)
    return (cp, cpb, kl, hoef, dinf, lin, pp, ppb, r1s, r2s, e12, bdinf, bkl, bhoef, bfin, br1, br2, bmag,
            brmag, br1min, br2min, bb0, bm1, bm2, hint, bva, brp) + sup


@njit(cache=True)
def max_binary_rdp_scan(alpha, lp, lpb, lq, lqb, cp, cpb, kl, hoef, dinf, lin, pp, ppb, r1s, r2s, e12,
                        bdinf, bkl, bhoef, bfin, br1, br2, bmag, brmag, br1min, br2min, bb0, bm1, bm2,
                        hint, bva, brp, sdinf, skl, shoef, sfin, sr1, sr2, smag, srmag, sr1min, sr2min, sb0,
                        sm1, sm2, sva, srp):  # pragma: no cover - compiled
    """The order loop of :func:`max_binary_rdp` on prepared constants (see there).

    The block anchors (bb0, bm1, bm2) and the maximiser hint persist between calls: for an order
    below a block's anchor b0 the bound uses the block's smallest slopes, max_j (a_j + beta s_j) <=
    M(b0) - (b0 - beta) min_j s_j, so it is valid at every order."""
    npair = lp.shape[0]
    bs = _BLOCK
    # anchors for the local Hoeffding bound (orders are processed in ascending order):
    # K_j(b) <= K_j(b0) + (b - b0) K_j'(b0) + (b - b0)^2 H_j for b >= b0, K = beta * D.
    anc_b = np.zeros(npair)
    anc_k = np.zeros(npair)
    anc_g = kl.copy()
    order = np.argsort(alpha)
    out = np.empty(alpha.shape[0])
    jstart = min(max(hint[0], 0), npair - 1)
    for ii in range(alpha.shape[0]):
        i = order[ii]
        beta = alpha[i] - 1.0
        best = -1.0
        jbest = jstart
        jj = -1
        while jj < npair:
            jj += 1
            if jj == 0:
                j = jstart
            else:
                j = jj - 1
                sbs = bs * _SUPER
                if j % sbs == 0:
                    g = j // sbs
                    if _group_skip(beta, best, g, sdinf, skl, shoef, sfin, smag, srmag, sb0, sm1, sm2, sr1,
                                   sr2, sr1min, sr2min, sva, srp, j, min(npair, j + sbs), lp, lpb, lq, lqb):
                        jj += sbs - 1  # skip the whole super-block (the loop adds the final 1)
                        continue
                if j % bs == 0:
                    b = j // bs
                    if _group_skip(beta, best, b, bdinf, bkl, bhoef, bfin, bmag, brmag, bb0, bm1, bm2, br1,
                                   br2, br1min, br2min, bva, brp, j, min(npair, j + bs), lp, lpb, lq, lqb):
                        jj += bs - 1  # skip the whole block
                        continue
                if j == jstart:
                    continue
                ub = dinf[j]
                if beta < _INF:
                    db = beta - anc_b[j]
                    h = (anc_k[j] + db * anc_g[j] + db * db * hoef[j]) / beta
                    if h < ub:
                        ub = h
                if ub * (1.0 + 1e-9) + 1e-300 <= best:
                    continue
            v = -1.0
            if lin[j] and beta < _INF:
                x1 = beta * r1s[j]
                x2 = beta * r2s[j]
                if x1 < 700.0 and x2 < 700.0:
                    m1 = expm1mx(x1)
                    m2 = expm1mx(x2)
                    sv = pp[j] * m1 + ppb[j] * m2 + beta * e12[j]
                    if sv < 1e300:
                        kv = math.log1p(sv)
                        v = kv / beta
                        w1 = pp[j] * (m1 + 1.0 + x1)
                        w2 = ppb[j] * (m2 + 1.0 + x2)
                        g = (w1 * r1s[j] + w2 * r2s[j]) / (w1 + w2)
                        anc_b[j] = beta
                        anc_k[j] = kv
                        anc_g[j] = g + 1e-12 * (abs(r1s[j]) + abs(r2s[j]))
            if v < 0.0:
                if jj > 0 and beta < _INF and lp[j] > -_INF and lpb[j] > -_INF and lq[j] > -_INF:
                    # cheap log-space bound K <= logaddexp(lp + beta r1, lpb + beta r2) + float margin
                    r1 = lp[j] - lq[j]
                    r2 = lpb[j] - lqb[j]
                    ka = _logaddexp(lp[j] + beta * r1, lpb[j] + beta * r2)
                    marg = 1e-13 * (abs(lp[j]) + abs(lpb[j]) + abs(lq[j]) + abs(lqb[j])
                                    + beta * (abs(r1) + abs(r2))) + 1e-300
                    if (ka + marg) / beta * (1.0 + 1e-9) <= best:
                        continue
                if lin[j]:
                    v = binary_rdp(beta, lp[j], lpb[j], lq[j], lqb[j], atom_const(lp[j], lq[j]),
                                   atom_const(lpb[j], lqb[j]))
                else:
                    v = binary_rdp(beta, lp[j], lpb[j], lq[j], lqb[j], cp[j], cpb[j])
            if v > best:
                best = v
                jbest = j
        out[i] = max(best, 0.0)
        jstart = jbest
    hint[0] = jstart
    return out


@njit(cache=True)
def max_binary_rdp_full(alpha: np.ndarray, lp: np.ndarray, lpb: np.ndarray, lq: np.ndarray,
                        lqb: np.ndarray) -> np.ndarray:
    """Same as :func:`max_binary_rdp` by a full scan (no pruning); used to test the pruning."""
    npair = lp.shape[0]
    out = np.empty(alpha.shape[0])
    for i in range(alpha.shape[0]):
        beta = alpha[i] - 1.0
        best = 0.0
        for j in range(npair):
            v = binary_rdp(beta, lp[j], lpb[j], lq[j], lqb[j], atom_const(lp[j], lq[j]),
                           atom_const(lpb[j], lqb[j]))
            if v > best:
                best = v
        out[i] = best
    return out
