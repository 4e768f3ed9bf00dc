"""Congestion control (the ns-3 TcpCongestionOps part): NewReno and CUBIC with HyStart.

``cc_ssthresh`` is the ssthresh on loss, ``cong_avoid`` grows the cwnd per
ACK (slow start, then Reno's additive increase or CUBIC's cubic function in
the per-flow floats FF), ``hystart`` is HyStart's delay detection (its
ACK-train detection is not modelled). Spec §3.
"""
from __future__ import annotations

import numpy as np
from ...packet.jit import njit

from .layout import (CC_CUBIC, CC_NEWRENO, FF_EPOCH, FF_K, FF_ORIGIN, FF_WEST, FF_WMAX, FP_CC, F_CWND, F_CWND_CNT,
                     F_HS_CNT, F_HS_CURR, F_HS_END, F_HS_FOUND, F_MAXOUT, F_MIN_RTT, F_SND_NXT, F_SND_UNA,
                     F_SSTHRESH, INF)


# -- congestion control ------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def cc_ssthresh(W, f):
    """ssthresh after a loss; CUBIC also records W_max (fast convergence)."""
    F = W.F
    FF = W.FF
    cwnd = F[f, F_CWND]
    if W.FP[f, FP_CC] == CC_CUBIC:
        if cwnd < FF[f, FF_WMAX]:
            FF[f, FF_WMAX] = cwnd * (1.0 + 0.7) / 2.0
        else:
            FF[f, FF_WMAX] = cwnd
        FF[f, FF_EPOCH] = 0.0
        return max(np.int64(cwnd * 717 // 1024), 2)
    return max(cwnd // 2, 2)


@njit(cache=True, nogil=True, _nrt=False)
def _cong_avoid_ai(F, f, w, acked):
    """tcp_cong_avoid_ai: one more segment per ``w`` acked."""
    if F[f, F_CWND_CNT] >= w:
        F[f, F_CWND_CNT] = 0
        F[f, F_CWND] += 1
    F[f, F_CWND_CNT] += acked
    if F[f, F_CWND_CNT] >= w:
        d = F[f, F_CWND_CNT] // w
        F[f, F_CWND_CNT] -= d * w
        F[f, F_CWND] += d


@njit(cache=True, nogil=True, _nrt=False)
def cong_avoid(W, f, acked, now):
    F = W.F
    FF = W.FF
    if acked <= 0:
        return
    # grow only when cwnd-limited (tcp_is_cwnd_limited)
    if F[f, F_CWND] < F[f, F_SSTHRESH]:
        if F[f, F_CWND] >= 2 * F[f, F_MAXOUT]:
            return
        grow = min(acked, F[f, F_SSTHRESH] - F[f, F_CWND])
        F[f, F_CWND] += grow
        acked -= grow
        if acked <= 0:
            return
    elif F[f, F_MAXOUT] < F[f, F_CWND]:
        return
    cwnd = F[f, F_CWND]
    if W.FP[f, FP_CC] == CC_NEWRENO:
        _cong_avoid_ai(F, f, cwnd, acked)
        return
    # CUBIC (RFC 8312, Linux bictcp_update with C = 0.4, beta = 0.7)
    if FF[f, FF_EPOCH] <= 0.0:
        FF[f, FF_EPOCH] = float(now)
        if cwnd < FF[f, FF_WMAX]:
            FF[f, FF_K] = ((FF[f, FF_WMAX] - cwnd) / 0.4) ** (1.0 / 3.0)
            FF[f, FF_ORIGIN] = FF[f, FF_WMAX]
        else:
            FF[f, FF_K] = 0.0
            FF[f, FF_ORIGIN] = float(cwnd)
        FF[f, FF_WEST] = float(cwnd)
    t = (now - FF[f, FF_EPOCH] + F[f, F_MIN_RTT]) / 1e9
    target = FF[f, FF_ORIGIN] + 0.4 * (t - FF[f, FF_K]) ** 3
    if target > cwnd:
        cnt = cwnd / (target - cwnd)
    else:
        cnt = 100.0 * cwnd
    # TCP friendliness: the Reno estimate grows 3(1-beta)/(1+beta) per RTT
    FF[f, FF_WEST] += acked * (3.0 * 0.3 / 1.7) / FF[f, FF_WEST]
    if FF[f, FF_WEST] > cwnd:
        cnt = min(cnt, cwnd / (FF[f, FF_WEST] - cwnd))
    w = max(np.int64(cnt), 2)
    _cong_avoid_ai(F, f, w, acked)


@njit(cache=True, nogil=True, _nrt=False)
def hystart(W, f, rtt):
    """CUBIC HyStart, delay detection (bictcp_acked / hystart_update): leave slow start when the
    minimum RTT of a round's first 8 samples exceeds min_rtt + clamp(min_rtt / 8, 4 ms, 16 ms)."""
    F = W.F
    if F[f, F_HS_FOUND] or F[f, F_CWND] >= F[f, F_SSTHRESH]:
        return
    if F[f, F_SND_UNA] > F[f, F_HS_END]:                   # a new round (bictcp_hystart_reset)
        F[f, F_HS_END] = F[f, F_SND_NXT]
        F[f, F_HS_CURR] = INF
        F[f, F_HS_CNT] = 0
    if F[f, F_CWND] < 16:                                   # hystart_low_window
        return
    if rtt < F[f, F_HS_CURR]:
        F[f, F_HS_CURR] = rtt
    if F[f, F_HS_CNT] < 8:
        F[f, F_HS_CNT] += 1
    elif F[f, F_HS_CURR] > F[f, F_MIN_RTT] + min(max(F[f, F_MIN_RTT] >> 3, 4_000_000), 16_000_000):
        F[f, F_HS_FOUND] = 1
        F[f, F_SSTHRESH] = F[f, F_CWND]
