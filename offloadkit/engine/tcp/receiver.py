"""The receiver: NAPI polls, GRO, reassembly and (delayed) ACKs.

NAPI polls ``napi_delay_ns`` after the first packet of a batch, up to
``napi_budget`` packets; GRO merges contiguous in-order segments of a flow
with equal TSval and consecutive IP IDs, up to 64 KB; a shorter or PSH
segment closes the aggregate; everything is flushed at the end of the poll
(when the budget ran out with packets left, only those held since an earlier
jiffy, HZ 1000). LRO ignores TSval/IP ID. TCP: reassembly (rcv_nxt +
out-of-order intervals), an ACK per delivered packet when it is out of order,
fills a hole, in quick-ACK mode or more than one full segment is unacked;
otherwise the delayed-ACK timer (``tcp_enter_quickack_mode`` on duplicate
data; with ``P_OFO_QUICK``, Linux < 4.18, on out-of-order data too). SACK
blocks (3 with timestamps, else 4), most recently changed first. ACKs return
over the reverse path's propagation delay, without loss.
"""
from __future__ import annotations

import numpy as np
from ...packet.jit import njit

from ...codes import GRO_END_OF_POLL, GRO_MERGED, PSH
from ..gro_rules import (KIND_OFF, dev_gro_receive_kind, inet_gro_flush, inet_gro_flush_id, skb_gro_receive,
                         tcp_gro_flag_mask, tcp_gro_receive_close, tcp_gro_receive_flush, tcp_gro_receive_mss,
                         tcp_gro_receive_new)
from .layout import (AK_ACK, AK_FLOW, AK_N, AK_S0, AK_TSECR, EV_ACK, EV_DELACK, EV_POLL, FP_EXTRA_RTT, F_DACK_AT,
                     F_DACK_EVT, F_DELIVERED, F_DONE_NS, F_H_AGE, F_H_CNT, F_H_END, F_H_FIRST, F_H_FLAGS, F_H_IPID,
                     F_H_LISTED, F_H_SEQ, F_H_TS, F_MSS, F_ON, F_OSTAMP, F_QUICK, F_RCV_MSS, F_RCV_NXT, F_RCV_WUP,
                     F_TOTAL, F_TS_RECENT, GRO_MODE_GRO, GRO_MODE_OFF, G_ACKS, G_DELIV, G_DONE_FLOWS, G_GRO_PKTS,
                     G_LAST_DONE, G_NAPI, G_NHELD, G_RXH, G_RXT, INF, PK_FLAGS, PK_FLOW, PK_IPID, PK_LEN, PK_SEQ,
                     PK_TS, P_BUDGET, P_DELACK, P_DELACK_NS, P_GRO, P_GRO_MAX, P_NPOINTS, P_OCAP, P_OFO_QUICK,
                     P_QUICK, P_REV_DELAY, P_RWND, P_RXCAP, P_SACK, P_THL, P_TS, R_FLAGS, R_FLOW, R_GRO, R_GSO_SEGS,
                     R_GSO_SIZE, R_IPID, R_IPLEN, R_LEN, R_SEQ, R_TSVAL)
from .world import ak_alloc, heap_push, pk_free, rec_ack, rec_pkt, rec_row


# -- the receiver ---------------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def send_ack(W, f, now):
    P = W.P
    F = W.F
    aid = ak_alloc(W)
    if aid < 0:
        return
    AK = W.AK
    AK[aid, AK_FLOW] = f
    AK[aid, AK_ACK] = F[f, F_RCV_NXT]
    AK[aid, AK_TSECR] = F[f, F_TS_RECENT] if P[P_TS] else 0
    nb = 0
    if P[P_SACK]:
        maxb = 3 if P[P_TS] else 4
        base = f * P[P_OCAP]
        on = F[f, F_ON]
        last = np.int64(INF)
        while nb < maxb:
            best = -1
            bt = np.int64(-1)
            for k in range(on):
                t = W.O[base + k, 2]
                if t < last and t > bt:
                    bt = t
                    best = k
            if best < 0:
                break
            AK[aid, AK_S0 + 2 * nb] = W.O[base + best, 0]
            AK[aid, AK_S0 + 2 * nb + 1] = W.O[base + best, 1]
            nb += 1
            last = bt
    AK[aid, AK_N] = nb
    F[f, F_RCV_WUP] = F[f, F_RCV_NXT]
    if F[f, F_QUICK] > 0:
        F[f, F_QUICK] -= 1
    F[f, F_DACK_AT] = -1
    W.G[G_ACKS] += 1
    last_point = P[P_NPOINTS] - 1
    rec_ack(W, last_point, now, aid)
    heap_push(W, now + P[P_REV_DELAY] + W.FP[f, FP_EXTRA_RTT], EV_ACK, aid, 0)


@njit(cache=True, nogil=True, _nrt=False)
def _ooo_insert(W, f, s, e):
    """Add [s, e) to the out-of-order intervals (sorted, disjoint); stamp the block it lands in."""
    P = W.P
    F = W.F
    base = f * P[P_OCAP]
    n = F[f, F_ON]
    F[f, F_OSTAMP] += 1
    stamp = F[f, F_OSTAMP]
    # first interval with right >= s
    i = 0
    while i < n and W.O[base + i, 1] < s:
        i += 1
    j = i
    ns = s
    ne = e
    while j < n and W.O[base + j, 0] <= e:
        ns = min(ns, W.O[base + j, 0])
        ne = max(ne, W.O[base + j, 1])
        j += 1
    removed = j - i
    if removed == 0:
        if n >= P[P_OCAP]:
            return
        for k in range(n, i, -1):
            W.O[base + k, 0] = W.O[base + k - 1, 0]
            W.O[base + k, 1] = W.O[base + k - 1, 1]
            W.O[base + k, 2] = W.O[base + k - 1, 2]
        n += 1
    elif removed > 1:
        for k in range(j, n):
            W.O[base + k - removed + 1, 0] = W.O[base + k, 0]
            W.O[base + k - removed + 1, 1] = W.O[base + k, 1]
            W.O[base + k - removed + 1, 2] = W.O[base + k, 2]
        n -= removed - 1
    W.O[base + i, 0] = ns
    W.O[base + i, 1] = ne
    W.O[base + i, 2] = stamp
    F[f, F_ON] = n


@njit(cache=True, nogil=True, _nrt=False)
def _enter_quickack(W, f):
    """tcp_enter_quickack_mode -> tcp_incr_quickack: quick = max(quick, min(rcv_wnd / (2 rcv_mss), max)),
    at least 2 when the window holds less than two segments."""
    P = W.P
    F = W.F
    q = P[P_RWND] // (2 * F[f, F_RCV_MSS])
    if q == 0:
        q = 2
    q = min(q, P[P_QUICK])
    if q > F[f, F_QUICK]:
        F[f, F_QUICK] = q


@njit(cache=True, nogil=True, _nrt=False)
def _rcv_data(W, f, seq, end, tsval, now):
    """tcp_data_queue + __tcp_ack_snd_check for one post-GRO packet."""
    P = W.P
    F = W.F
    ack_now = False
    rcv = F[f, F_RCV_NXT]
    had_ooo = F[f, F_ON] > 0
    seg_len = end - seq
    if seg_len > F[f, F_RCV_MSS] and seg_len <= F[f, F_MSS]:
        F[f, F_RCV_MSS] = seg_len
    if end <= rcv:
        ack_now = True                                              # duplicate (D-SACK)
        _enter_quickack(W, f)
    elif seq <= rcv:
        if seq < rcv and P[P_OFO_QUICK]:
            _enter_quickack(W, f)                                   # partial packet (< 4.18)
        new = end
        base = f * P[P_OCAP]
        n = F[f, F_ON]
        k = 0
        while k < n and W.O[base + k, 0] <= new:
            new = max(new, W.O[base + k, 1])
            k += 1
        if k > 0:
            for j in range(k, n):
                W.O[base + j - k, 0] = W.O[base + j, 0]
                W.O[base + j - k, 1] = W.O[base + j, 1]
                W.O[base + j - k, 2] = W.O[base + j, 2]
            F[f, F_ON] = n - k
        F[f, F_RCV_NXT] = new
        F[f, F_TS_RECENT] = tsval
        F[f, F_DELIVERED] += new - rcv
        W.G[G_DELIV] += new - rcv
        if F[f, F_TOTAL] >= 0 and new >= F[f, F_TOTAL] and F[f, F_DONE_NS] < 0:
            F[f, F_DONE_NS] = now
            W.G[G_DONE_FLOWS] += 1
            W.G[G_LAST_DONE] = now
        if had_ooo:
            ack_now = True
    else:
        if P[P_OFO_QUICK]:
            _enter_quickack(W, f)                                   # out of order (< 4.18)
        _ooo_insert(W, f, seq, end)
        ack_now = True
    if not ack_now:
        if F[f, F_QUICK] > 0 or P[P_DELACK] == 0:
            ack_now = True
        elif F[f, F_RCV_NXT] - F[f, F_RCV_WUP] > F[f, F_RCV_MSS]:
            ack_now = True
    if ack_now:
        send_ack(W, f, now)
    elif F[f, F_DACK_AT] < 0:
        at = now + P[P_DELACK_NS]
        F[f, F_DACK_AT] = at
        if F[f, F_DACK_EVT] < 0 or at < F[f, F_DACK_EVT]:
            if heap_push(W, at, EV_DELACK, f, 0):
                F[f, F_DACK_EVT] = at


@njit(cache=True, nogil=True, _nrt=False)
def _gro_deliver(W, f, reason, now):
    """Hand the flow's held aggregate to TCP and record it at the receiver point."""
    F = W.F
    cnt = F[f, F_H_CNT]
    if cnt == 0:
        return
    F[f, F_H_CNT] = 0
    W.G[G_GRO_PKTS] += 1
    s = F[f, F_H_SEQ]
    e = F[f, F_H_END]
    r = rec_row(W, W.P[P_NPOINTS] - 1, now)
    if r >= 0:
        R = W.REC
        R[r, R_FLOW] = f
        R[r, R_SEQ] = s
        R[r, R_LEN] = e - s
        R[r, R_FLAGS] = F[f, F_H_FLAGS]
        R[r, R_IPID] = F[f, F_H_IPID]
        R[r, R_TSVAL] = F[f, F_H_TS]
        R[r, R_IPLEN] = 20 + W.P[P_THL] + e - s
        R[r, R_GSO_SIZE] = F[f, F_H_FIRST] if cnt > 1 else 0
        R[r, R_GSO_SEGS] = cnt if cnt > 1 else 0
        R[r, R_GRO] = reason
    _rcv_data(W, f, s, e, F[f, F_H_TS], now)


@njit(cache=True, nogil=True, _nrt=False)
def _gro_start(F, f, s, ln, fl, ipid, ts):
    """The flow's held aggregate becomes this one packet."""
    F[f, F_H_CNT] = 1
    F[f, F_H_SEQ] = s
    F[f, F_H_END] = s + ln
    F[f, F_H_FIRST] = ln
    F[f, F_H_FLAGS] = fl
    F[f, F_H_IPID] = ipid
    F[f, F_H_TS] = ts


@njit(cache=True, nogil=True, _nrt=False)
def _gro_receive(W, pid, now):
    """One arriving packet through GRO: merge, hold or deliver, by the rules of ``engine.gro_rules``
    (the batch GRO's). One held aggregate per flow; LRO ignores TSval and IP ID."""
    P = W.P
    F = W.F
    PK = W.PK
    f = PK[pid, PK_FLOW]
    s = PK[pid, PK_SEQ]
    ln = PK[pid, PK_LEN]
    fl = PK[pid, PK_FLAGS]
    ts = PK[pid, PK_TS]
    ipid = PK[pid, PK_IPID]
    mode = P[P_GRO]
    if mode == GRO_MODE_OFF:
        _gro_start(F, f, s, ln, fl, ipid, ts)
        _gro_deliver(W, f, dev_gro_receive_kind(KIND_OFF), now)
        return
    cnt = F[f, F_H_CNT]
    if cnt > 0:
        gro = mode == GRO_MODE_GRO
        optk = ts // 1_000_000 if gro else 0                     # the TSval option (ms clock)
        head_optk = F[f, F_H_TS] // 1_000_000 if gro else 0
        reason = tcp_gro_receive_flush(tcp_gro_flag_mask(False), fl, F[f, F_H_FLAGS], 0, 0, ln, s, F[f, F_H_END],
                                       0, 0, 0, 0,
                                       optk, head_optk)
        if reason == GRO_MERGED and gro:
            reason = inet_gro_flush(0, 0, inet_gro_flush_id(ipid, F[f, F_H_IPID], cnt, False), False)
        if reason == GRO_MERGED:
            reason = tcp_gro_receive_mss(ln, F[f, F_H_FIRST], 0)
        if reason == GRO_MERGED:
            reason = skb_gro_receive(20 + P[P_THL] + F[f, F_H_END] - F[f, F_H_SEQ], ln, P[P_GRO_MAX])
        if reason == GRO_MERGED:
            F[f, F_H_END] = s + ln
            F[f, F_H_CNT] = cnt + 1
            F[f, F_H_FLAGS] |= fl & PSH
            close = tcp_gro_receive_close(fl, ln, F[f, F_H_FIRST], 1, 0)
            if close != GRO_MERGED:
                _gro_deliver(W, f, close, now)
            return
        _gro_deliver(W, f, reason, now)
    _gro_start(F, f, s, ln, fl, ipid, ts)
    F[f, F_H_AGE] = now
    close = tcp_gro_receive_new(fl, ln, 1, 0, False)
    if close != GRO_MERGED:
        _gro_deliver(W, f, close, now)
    elif F[f, F_H_LISTED] == 0:
        F[f, F_H_LISTED] = 1                          # the poll's flush visits only flows on this list
        W.HELD[W.G[G_NHELD]] = f
        W.G[G_NHELD] += 1


@njit(cache=True, nogil=True, _nrt=False)
def _flush_held(W, now, old_only):
    """Deliver the held aggregates at the end of a poll, flows in ascending order (as the kernel's
    bucket walk for one flow per bucket); ``old_only``: only those held since an earlier jiffy."""
    G = W.G
    F = W.F
    H = W.HELD
    n = G[G_NHELD]
    for i in range(1, n):                             # insertion sort: a handful of flows per poll
        x = H[i]
        j = i - 1
        while j >= 0 and H[j] > x:
            H[j + 1] = H[j]
            j -= 1
        H[j + 1] = x
    jiffy = now // 1_000_000
    keep = 0
    for i in range(n):
        f = H[i]
        if F[f, F_H_CNT] > 0 and (not old_only or F[f, F_H_AGE] // 1_000_000 < jiffy):
            _gro_deliver(W, f, GRO_END_OF_POLL, now)
        if F[f, F_H_CNT] > 0:
            H[keep] = f
            keep += 1
        else:
            F[f, F_H_LISTED] = 0
    G[G_NHELD] = keep


@njit(cache=True, nogil=True, _nrt=False)
def poll(W, now):
    """A NAPI poll: up to budget packets through GRO, then flush every held aggregate."""
    P = W.P
    G = W.G
    cap = P[P_RXCAP]
    k = 0
    while k < P[P_BUDGET] and G[G_RXH] < G[G_RXT]:
        pid = W.RXQ[G[G_RXH] % cap]
        G[G_RXH] += 1
        rec_pkt(W, P[P_NPOINTS], now, pid, 0, 0, 0, 0)              # the hidden "rx" point: GRO input
        _gro_receive(W, pid, now)
        pk_free(W, pid)
        k += 1
    # budget used up (__napi_poll, HZ 1000): only aggregates held since an earlier jiffy; else all
    _flush_held(W, now, k >= P[P_BUDGET] and G[G_RXH] < G[G_RXT])
    if G[G_RXH] < G[G_RXT]:
        heap_push(W, now, EV_POLL, 0, 0)
    else:
        G[G_NAPI] = 0
