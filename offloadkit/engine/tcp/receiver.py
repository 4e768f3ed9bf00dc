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

from ...codes import CWR, GRO_PURE_ACK, GRO_END_OF_POLL, GRO_MERGED, GRO_TABLE_FULL, GSO_TCP_ECN, GSO_TCP_FIXEDID, PSH
from ..gro_rules import (KIND_OFF, dev_gro_receive_kind, gro_start_reason, inet_gro_flush, inet_gro_flush_id,
                         inet_gro_id_fixed, skb_gro_receive, tcp_gro_flag_mask, tcp_gro_receive_close,
                         tcp_gro_receive_flush, tcp_gro_receive_mss, tcp_gro_receive_new)
from .layout import (AK_ACK, AK_FLOW, AK_N, AK_S0, AK_TSECR, EV_ACK, EV_DELACK, EV_POLL, FP_BUCKET, FP_EXTRA_RTT,
                     F_DACK_AT, F_DACK_EVT, F_DELIVERED, F_DONE_NS, F_H_AGE, F_H_CNT, F_H_END, F_H_FIRST, F_H_FIXED,
                     F_H_FLAGS, F_H_INB, F_H_IPID, F_H_LISTED, F_H_ORDER, F_H_REASON, F_H_SEQ, F_H_TS, F_LAST_CLOSE,
                     F_MSS, F_ON, F_OSTAMP, F_QUICK, F_RCV_MSS, F_RCV_NXT, F_RCV_WUP, F_TOTAL, F_TS_RECENT,
                     GRO_MAX_HELD, GRO_MODE_GRO, GRO_MODE_OFF, G_ACKS, G_BCOUNT, G_DELIV, G_DONE_FLOWS, G_GRO_PKTS,
                     G_HOLDS, G_LAST_DONE, G_NAPI, G_NHELD, G_RECN, G_RXH, G_RXT, G_TLAST, G_TNPOLL, G_TSTOP, INF,
                     PK_FLAGS, PK_FLOW, PK_IPID, PK_LEN, PK_SEQ, PK_TS, P_BASE_RTT, P_BUDGET, P_DELACK, P_DELACK_NS, P_GRO,
                     P_GRO_MAX, P_IPV4, P_NPOINTS, P_OCAP, P_OFO_QUICK, P_QUICK, P_REC_LIMIT, P_REC_RX, P_REV_DELAY, P_RWND,
                     P_RXCAP, P_SACK, P_THL, P_TS, R_FLAGS, R_FLOW, R_GRO, R_GSOX, R_GSO_SEGS, R_GSO_SIZE, R_IPID,
                     R_IPLEN, R_LEN, R_SEQ, R_TSVAL)
from .rows import data_timestamps_ms
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
def _rec_aggregate(W, f, point, now, reason, gsox):
    """Record the flow's held aggregate at ``point``: its head's header, merged length and GSO fields."""
    F = W.F
    r = rec_row(W, point, now)
    if r < 0:
        return
    cnt = F[f, F_H_CNT]
    s = F[f, F_H_SEQ]
    e = F[f, F_H_END]
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
    R[r, R_GSOX] = gsox if cnt > 1 else 0


@njit(cache=True, nogil=True, _nrt=False)
def _trace_aggregate(W, f, now):
    """The aggregate as the trace shows it at the receiver (the hidden point after "rx"): the reason of
    its head packet, as the batch GRO (``engine.gro``) reports it, and gro_complete's gso_type bits."""
    F = W.F
    gsox = (GSO_TCP_FIXEDID if F[f, F_H_FIXED] else 0) | (GSO_TCP_ECN if F[f, F_H_FLAGS] & CWR else 0)
    _rec_aggregate(W, f, W.P[P_NPOINTS] + 1, now, F[f, F_H_REASON], gsox)


@njit(cache=True, nogil=True, _nrt=False)
def _gro_deliver(W, f, reason, now, traced):
    """Hand the flow's held aggregate to TCP and record it at the receiver point (``traced``: and as the
    trace's receiver row, unless the end-of-poll walk recorded it already)."""
    F = W.F
    G = W.G
    cnt = F[f, F_H_CNT]
    if cnt == 0:
        return
    if traced and G[G_TSTOP] == 0:
        _trace_aggregate(W, f, now)
    _rec_aggregate(W, f, W.P[P_NPOINTS] - 1, now, reason, 0)
    F[f, F_LAST_CLOSE] = reason
    if F[f, F_H_INB]:
        F[f, F_H_INB] = 0
        G[G_BCOUNT + W.FP[f, FP_BUCKET]] -= 1
    F[f, F_H_CNT] = 0
    G[G_GRO_PKTS] += 1
    _rcv_data(W, f, F[f, F_H_SEQ], F[f, F_H_END], F[f, F_H_TS], now)


@njit(cache=True, nogil=True, _nrt=False)
def _gro_start(F, f, s, ln, fl, ipid, ts, reason):
    """The flow's held aggregate becomes this one packet (``reason``: why it heads a new aggregate)."""
    F[f, F_H_CNT] = 1
    F[f, F_H_SEQ] = s
    F[f, F_H_END] = s + ln
    F[f, F_H_FIRST] = ln
    F[f, F_H_FLAGS] = fl
    F[f, F_H_IPID] = ipid
    F[f, F_H_TS] = ts
    F[f, F_H_REASON] = reason
    F[f, F_H_FIXED] = 0


@njit(cache=True, nogil=True, _nrt=False)
def _gro_hold(W, f, now):
    """Hold the flow's new aggregate in its bucket; a full bucket completes its oldest [gro_flush_oldest]."""
    F = W.F
    G = W.G
    b = W.FP[f, FP_BUCKET]
    if G[G_BCOUNT + b] >= GRO_MAX_HELD:
        oldest = -1
        for i in range(G[G_NHELD]):
            g = W.HELD[i]
            if F[g, F_H_INB] and W.FP[g, FP_BUCKET] == b and (oldest < 0 or F[g, F_H_ORDER] < F[oldest, F_H_ORDER]):
                oldest = g
        _gro_deliver(W, oldest, GRO_TABLE_FULL, now, True)
    G[G_BCOUNT + b] += 1
    F[f, F_H_INB] = 1
    F[f, F_H_ORDER] = G[G_HOLDS]
    G[G_HOLDS] += 1
    F[f, F_H_AGE] = now
    if F[f, F_H_LISTED] == 0:
        F[f, F_H_LISTED] = 1                          # the poll's flush visits only flows on this list
        W.HELD[G[G_NHELD]] = f
        G[G_NHELD] += 1


@njit(cache=True, nogil=True, inline="always")
def _ts_option(tv, half_rtt_ns):
    """The timestamp option's bytes as one key: TSval and TSecr as the trace writes them (``rows``)."""
    a, b = data_timestamps_ms(tv, half_rtt_ns)
    return (a << 32) | b


@njit(cache=True, nogil=True, _nrt=False)
def _gro_receive(W, pid, now):
    """One arriving packet through GRO: merge, hold or deliver, by the rules of ``engine.gro_rules``
    (the batch GRO's). One held aggregate per flow, 8 per bucket; LRO ignores TSval and IP ID."""
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
        off = dev_gro_receive_kind(KIND_OFF)
        _gro_start(F, f, s, ln, fl, ipid, ts, off)
        _gro_deliver(W, f, off, now, True)
        return
    cnt = F[f, F_H_CNT]
    if cnt > 0:
        gro = mode == GRO_MODE_GRO
        optk = _ts_option(ts, P[P_BASE_RTT] // 2) if gro else 0
        head_optk = _ts_option(F[f, F_H_TS], P[P_BASE_RTT] // 2) if gro else 0
        reason = tcp_gro_receive_flush(tcp_gro_flag_mask(False), fl, F[f, F_H_FLAGS], 0, 0, ln, s, F[f, F_H_END],
                                       0, 0, 0, 0,
                                       optk, head_optk)
        if gro and P[P_IPV4] and reason != GRO_PURE_ACK:        # the IPv4 ID rule (no ID in IPv6)
            if inet_gro_id_fixed(ipid, F[f, F_H_IPID], cnt, True, False):
                F[f, F_H_FIXED] = 1
            net = inet_gro_flush(0, 0, inet_gro_flush_id(ipid, F[f, F_H_IPID], cnt, F[f, F_H_FIXED] != 0), False)
            if reason == GRO_MERGED:
                reason = net
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
                _gro_deliver(W, f, close, now, True)
            return
        _gro_deliver(W, f, reason, now, True)
    else:
        reason = gro_start_reason(ln, fl, F[f, F_LAST_CLOSE])
    _gro_start(F, f, s, ln, fl, ipid, ts, reason)
    close = tcp_gro_receive_new(fl, ln, 1, 0, False)
    if close != GRO_MERGED:
        _gro_deliver(W, f, close, now, True)
    else:
        _gro_hold(W, f, now)


@njit(cache=True, nogil=True, _nrt=False)
def _trace_flush(W, now, budget_used, queue_empty):
    """Record the held aggregates an end of poll flushes, in the batch GRO's order [__napi_poll,
    napi_complete_done -> __gro_flush]: buckets ascending, oldest first; budget used up: only those
    held since an earlier jiffy (HZ 1000); queue empty: all (both: the old ones, then the rest)."""
    F = W.F
    G = W.G
    S = W.HSORT
    m = 0
    for i in range(G[G_NHELD]):
        f = W.HELD[i]
        if F[f, F_H_INB]:
            key = (W.FP[f, FP_BUCKET] << 48) | F[f, F_H_ORDER]
            j = m - 1
            while j >= 0 and ((W.FP[S[j], FP_BUCKET] << 48) | F[S[j], F_H_ORDER]) > key:
                S[j + 1] = S[j]
                j -= 1
            S[j + 1] = f
            m += 1
    jiffy = now // 1_000_000
    for i in range(m):
        f = S[i]
        old = F[f, F_H_AGE] // 1_000_000 < jiffy
        if budget_used and old:
            _trace_aggregate(W, f, now)
    if queue_empty:
        for i in range(m):
            f = S[i]
            if not (budget_used and F[f, F_H_AGE] // 1_000_000 < jiffy):
                _trace_aggregate(W, f, now)


@njit(cache=True, nogil=True, _nrt=False)
def _flush_held(W, now, old_only):
    """Deliver the held aggregates at the end of a poll, flows in ascending order (the trace records them
    in the kernel's bucket order: ``_trace_flush``); ``old_only``: only those held since an earlier jiffy."""
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
            _gro_deliver(W, f, GRO_END_OF_POLL, now, False)
        if F[f, F_H_CNT] > 0:
            H[keep] = f
            keep += 1
        else:
            F[f, F_H_LISTED] = 0
    G[G_NHELD] = keep


@njit(cache=True, nogil=True, _nrt=False)
def trace_end(W):
    """At the end of the run: the aggregates still held close the trace, as the batch GRO's final flush
    after the last traced arrival (the "rx" point's last row) would."""
    G = W.G
    if G[G_TSTOP] == 0:
        _trace_flush(W, G[G_TLAST], G[G_TNPOLL] >= W.P[P_BUDGET], True)
        G[G_TSTOP] = 1


@njit(cache=True, nogil=True, _nrt=False)
def poll(W, now):
    """A NAPI poll: up to budget packets through GRO, then flush every held aggregate.

    The trace's receiver rows cover the packets the hidden "rx" point recorded: after its last
    row they end with that packet's poll flushed, as the batch GRO's input would end there."""
    P = W.P
    G = W.G
    cap = P[P_RXCAP]
    rx = G_RECN + P[P_NPOINTS]
    k = 0
    while k < P[P_BUDGET] and G[G_RXH] < G[G_RXT]:
        pid = W.RXQ[G[G_RXH] % cap]
        G[G_RXH] += 1
        traced = G[rx] < P[P_REC_LIMIT]
        if P[P_REC_RX]:
            rec_pkt(W, P[P_NPOINTS], now, pid, 0, 0, 0, 0)          # the hidden "rx" point: GRO input
        elif traced:
            G[rx] += 1                                              # counted only: the trace's input ends there
        _gro_receive(W, pid, now)
        pk_free(W, pid)
        k += 1
        if traced:
            G[G_TLAST] = now
            G[G_TNPOLL] = k
            if G[rx] == P[P_REC_LIMIT]:
                trace_end(W)
    # budget used up (__napi_poll, HZ 1000): only aggregates held since an earlier jiffy; else all
    more = G[G_RXH] < G[G_RXT]
    if G[G_TSTOP] == 0:
        _trace_flush(W, now, k >= P[P_BUDGET], not more)
    _flush_held(W, now, k >= P[P_BUDGET] and more)
    if more:
        heap_push(W, now, EV_POLL, 0, 0)
    else:
        G[G_NAPI] = 0
