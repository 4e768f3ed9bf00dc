"""The event loop: flow start, periodic sampling and ``run_kernel``, which dispatches events.

``run_kernel(W)`` pops events from the heap until every flow is done (or the
scenario's end time or event limit), calling the sender, hops and receiver;
``sample`` records cwnd/in-flight per flow at the sampling interval. Under
``NUMBA_DISABLE_JIT=1`` the same code runs as plain Python with the same
results (``tests/reference/tcp_ref.py`` does that for one loop only).
"""
from __future__ import annotations

import numpy as np
from ...packet.jit import njit

from .hops import hop_arrive
from .layout import (AK_FLOW, EV_ACK, EV_DELACK, EV_HOP, EV_ICMP, EV_POLL, EV_REO, EV_SAMPLE, EV_START, EV_TIMER,
                     FF_EPOCH, FF_WMAX, FP_EXTRA_RTT, FP_START_NS, FP_TOTAL, F_CWND, F_DACK_AT, F_DACK_EVT, F_DONE_NS,
                     F_HS_END, F_IPID, F_LAST_CLOSE, F_LEN, F_MAXOUT_SEQ, F_MIN_RTT, F_MSS, F_QUICK, F_RACK_U, F_RACK_X, F_RCV_MSS,
                     F_REO_EVT, F_RTO, F_RTTVAR, F_SRTT, F_SSTHRESH, F_TAT, F_TEVT, F_TKIND, F_TLP_HIGH, F_TOTAL,
                     G_AK_FRESH, G_ATOP, G_DELIV, G_DONE_FLOWS, G_EVENTS, G_FTOP, G_HN, G_NOW, G_OVERFLOW, G_PK_FRESH,
                     G_SMPN, G_SMP_INT, G_TSTOP, HEAP_SHIFT, INF, P_BASE_RTT, P_END_NS, P_FLOWS, P_IW, P_MAX_EVENTS, P_MAX_RTO,
                     P_MIN_RTO, P_MSS, P_QUICK, P_REC_LIMIT, P_SAMPLE_NS, P_TOTAL, SMP_CAP, TK_NONE)
from .mtu import tcp_mtup_init
from .receiver import poll, send_ack, trace_end
from .sender import arm, on_ack, on_icmp, on_reo, on_timer, send, set_timer
from .world import heap_pop, heap_push, push_free, rec_ack


# -- sampling ------------------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def _sample(W, now):
    G = W.G
    P = W.P
    k = G[G_SMPN]
    if k >= SMP_CAP:
        # keep every other sample, double the interval
        for j in range(SMP_CAP // 2):
            W.SM[0, j] = W.SM[0, 2 * j]
            W.SM[1, j] = W.SM[1, 2 * j]
            for f in range(P[P_FLOWS]):
                W.SM[2 + f, j] = W.SM[2 + f, 2 * j]
                W.SM[2 + W.P[P_FLOWS] + f, j] = W.SM[2 + W.P[P_FLOWS] + f, 2 * j]
        k = SMP_CAP // 2
        G[G_SMP_INT] *= 2
    W.SM[0, k] = now
    W.SM[1, k] = G[G_DELIV]
    for f in range(P[P_FLOWS]):
        W.SM[2 + f, k] = W.F[f, F_CWND]
        W.SM[2 + W.P[P_FLOWS] + f, k] = min(W.F[f, F_SSTHRESH], np.int64(1) << 40)
    G[G_SMPN] = k + 1


# -- the loop --------------------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def _init(W):
    P = W.P
    F = W.F
    G = W.G
    G[G_FTOP] = G[G_PK_FRESH] = W.FREE.shape[0]       # free stacks 0..n-1, written only as indices return
    G[G_ATOP] = G[G_AK_FRESH] = W.AFREE.shape[0]
    G[G_SMP_INT] = P[P_SAMPLE_NS]
    for f in range(P[P_FLOWS]):
        base_rtt = max(P[P_BASE_RTT] + W.FP[f, FP_EXTRA_RTT], 1000)
        for k in range(F_LEN):
            F[f, k] = 0
        F[f, F_TOTAL] = W.FP[f, FP_TOTAL]
        F[f, F_MSS] = P[P_MSS]
        tcp_mtup_init(W, f)
        F[f, F_CWND] = P[P_IW]
        F[f, F_SSTHRESH] = INF
        F[f, F_SRTT] = base_rtt                       # from the handshake
        F[f, F_RTTVAR] = base_rtt // 2
        F[f, F_MIN_RTT] = base_rtt
        F[f, F_RTO] = min(base_rtt + max(2 * base_rtt, P[P_MIN_RTO]), P[P_MAX_RTO])
        F[f, F_TLP_HIGH] = -1
        F[f, F_TEVT] = -1
        F[f, F_RACK_X] = -1
        F[f, F_RACK_U] = -1
        F[f, F_HS_END] = -1
        F[f, F_REO_EVT] = -1
        F[f, F_DONE_NS] = -1
        F[f, F_QUICK] = P[P_QUICK]
        F[f, F_DACK_AT] = -1
        F[f, F_DACK_EVT] = -1
        F[f, F_RCV_MSS] = P[P_MSS]
        F[f, F_IPID] = (f * 7919 + 1) & 0xFFFF
        F[f, F_MAXOUT_SEQ] = 0
        F[f, F_LAST_CLOSE] = -1                      # no packet delivered yet (GRO_FIRST)
        W.FF[f, FF_WMAX] = 0.0
        W.FF[f, FF_EPOCH] = 0.0
        heap_push(W, W.FP[f, FP_START_NS], EV_START, f, 0)
    if P[P_SAMPLE_NS] > 0:
        heap_push(W, 0, EV_SAMPLE, 0, 0)
    G[G_TSTOP] = P[P_REC_LIMIT] == 0


@njit(cache=True, nogil=True, _nrt=False)
def run_kernel(W):
    """Run the event loop until no event is left, every flow is done, or P_END_NS."""
    P = W.P
    F = W.F
    G = W.G
    _init(W)
    end = P[P_END_NS]
    nflows = P[P_FLOWS]
    while G[G_HN] > 0:
        t = W.H[0, 0] >> HEAP_SHIFT
        if t > end:
            break
        if G[G_EVENTS] >= P[P_MAX_EVENTS]:
            G[G_OVERFLOW] |= 16
            break
        t, kind, a, b = heap_pop(W)
        G[G_EVENTS] += 1
        G[G_NOW] = t
        if kind == EV_HOP:
            hop_arrive(W, a, b, t)
        elif kind == EV_ACK:
            f = W.AK[a, AK_FLOW]
            on_ack(W, f, a, t)
            rec_ack(W, 0, t, a)
            push_free(G, G_ATOP, W.AFREE, a)
        elif kind == EV_POLL:
            poll(W, t)
        elif kind == EV_TIMER:
            f = a
            if F[f, F_TEVT] == t:
                F[f, F_TEVT] = -1
            else:
                continue                                   # superseded by an earlier one
            if F[f, F_TKIND] == TK_NONE:
                continue
            if F[f, F_TAT] > t:
                arm(W, f, F[f, F_TKIND], F[f, F_TAT])   # pushed back meanwhile
                continue
            on_timer(W, f, t)
        elif kind == EV_DELACK:
            f = a
            if F[f, F_DACK_EVT] == t:
                F[f, F_DACK_EVT] = -1
            else:
                continue
            if F[f, F_DACK_AT] < 0:
                continue
            if F[f, F_DACK_AT] > t:
                if heap_push(W, F[f, F_DACK_AT], EV_DELACK, f, 0):
                    F[f, F_DACK_EVT] = F[f, F_DACK_AT]
                continue
            send_ack(W, f, t)
        elif kind == EV_START:
            send(W, a, t)
            set_timer(W, a, t)
        elif kind == EV_ICMP:
            on_icmp(W, a, b, t)
        elif kind == EV_REO:
            if F[a, F_REO_EVT] != t:
                continue
            F[a, F_REO_EVT] = -1
            on_reo(W, a, t)
        elif kind == EV_SAMPLE:
            _sample(W, t)
            if G[G_DONE_FLOWS] < nflows or P[P_TOTAL] < 0:
                heap_push(W, t + G[G_SMP_INT], EV_SAMPLE, 0, 0)
    if P[P_SAMPLE_NS] > 0:
        _sample(W, min(G[G_NOW], end))
    trace_end(W)
    return G[G_EVENTS]
