"""Hops between sender and receiver: MTU check, tail-drop FIFO, serialization, loss, delay.

``hop_arrive``: the MTU check (``engine.path.mtu_drop_reason``: silent or
ICMP), a tail-drop FIFO (packets and/or bytes), serialization at the hop rate
(frame = IP + Ethernet + encapsulation), random loss (the frame is sent, then
lost) and the propagation delay to the next hop or the receiver's queue.
"""
from __future__ import annotations

from ...packet.jit import njit

from ...codes import DROP_MTU_ICMP, DROP_NONE, DROP_QUEUE_FULL, DROP_RANDOM_LOSS
from ..path import mtu_drop_reason
from .layout import (EV_HOP, EV_ICMP, EV_POLL, G_ICMPS, G_NAPI, G_OVERFLOW, G_RXH, G_RXT, G_RX_BYTES, G_RX_PKTS,
                     HP_DELAY, HP_ENCAP, HP_ICMP, HP_LABELS, HP_MTU, HP_OVER, HP_QBYTES, HP_QPKTS, HP_RATE, HP_WHOLE, HQ_BUSY,
                     HQ_BYTES, HQ_FDROP, HQ_FOLLOW, HQ_HEAD, HQ_N, HS_DROP_BYTES, HS_DROP_PKTS, HS_IN_BYTES, HS_IN_PKTS, HS_OUT_BYTES,
                     HS_OUT_PKTS, PK_FLOW, PK_IPLEN, PK_LEN, PK_SKB_LEN, PK_SKB_SEGS, P_NAPI_DELAY, P_NHOPS, P_QCAP, P_RXCAP)
from .world import heap_push, pk_free, rand, rec_pkt, ser_ns


# -- hops ------------------------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def tbf_enqueue(W, pid, h, wire):
    """Whether the hop's FIFO takes this segment (sch_tbf.c tbf_enqueue, then bfifo's byte limit).

    With ``HP_WHOLE`` (the tbf's max_size, its burst) a forwarded GSO skb no
    bigger than that is enqueued or dropped whole: its first segment is
    checked with the skb's qdisc_pkt_len (every segment's frame), the rest
    follow that verdict. A bigger skb is split by tbf_segment and each
    segment checked alone, as every segment is without ``HP_WHOLE``.
    """
    HP = W.HP
    HQS = W.HS
    PK = W.PK
    if HP[h, HP_WHOLE] > 0 and HQS[h, HQ_FOLLOW] > 0 and PK[pid, PK_SKB_SEGS] == 0:
        HQS[h, HQ_FOLLOW] -= 1
        return HQS[h, HQ_FDROP] == 0 and HQS[h, HQ_N] < W.P[P_QCAP]
    HQS[h, HQ_FOLLOW] = 0
    need = wire
    n = PK[pid, PK_SKB_SEGS]
    if HP[h, HP_WHOLE] > 0 and n > 1:
        skb = PK[pid, PK_SKB_LEN] + n * (wire - PK[pid, PK_LEN])
        if skb <= HP[h, HP_WHOLE]:
            need = skb
            HQS[h, HQ_FOLLOW] = n - 1
    full = ((HP[h, HP_QPKTS] > 0 and HQS[h, HQ_N] >= HP[h, HP_QPKTS])
            or (HP[h, HP_QBYTES] > 0 and HQS[h, HQ_BYTES] + need > HP[h, HP_QBYTES])
            or HQS[h, HQ_N] >= W.P[P_QCAP])
    HQS[h, HQ_FDROP] = 1 if full else 0
    return not full


@njit(cache=True, nogil=True, _nrt=False)
def hop_arrive(W, pid, h, now):
    P = W.P
    G = W.G
    PK = W.PK
    nh = P[P_NHOPS]
    if h > 0:
        W.HS[h - 1, HS_OUT_PKTS] += 1                 # it left hop h - 1 (counted on arrival)
        W.HS[h - 1, HS_OUT_BYTES] += PK[pid, PK_LEN]
    if h >= nh:
        # the receiver's RX ring; NAPI polls after the interrupt delay
        G[G_RX_PKTS] += 1
        G[G_RX_BYTES] += PK[pid, PK_LEN]
        cap = P[P_RXCAP]
        if G[G_RXT] - G[G_RXH] >= cap:
            G[G_OVERFLOW] |= 8
            pk_free(W, pid)
            return
        W.RXQ[G[G_RXT] % cap] = pid
        G[G_RXT] += 1
        if G[G_NAPI] == 0:
            G[G_NAPI] = 1
            heap_push(W, now + P[P_NAPI_DELAY], EV_POLL, 0, 0)
        return
    HP = W.HP
    HST = W.HS
    HQS = W.HS
    ln = PK[pid, PK_LEN]
    HST[h, HS_IN_PKTS] += 1
    HST[h, HS_IN_BYTES] += ln
    iplen = PK[pid, PK_IPLEN]
    drop = mtu_drop_reason(iplen, True, 0, 0, HP[h, HP_MTU], HP[h, HP_ENCAP], HP[h, HP_LABELS],
                           HP[h, HP_ICMP] != 0)
    wire = iplen + HP[h, HP_OVER]
    qc = P[P_QCAP]
    if drop == DROP_NONE:
        while HQS[h, HQ_N] > 0 and W.HQ[h, HQS[h, HQ_HEAD], 0] <= now:
            HQS[h, HQ_BYTES] -= W.HQ[h, HQS[h, HQ_HEAD], 1]
            HQS[h, HQ_HEAD] = (HQS[h, HQ_HEAD] + 1) % qc
            HQS[h, HQ_N] -= 1
        if not tbf_enqueue(W, pid, h, wire):
            drop = DROP_QUEUE_FULL
    if drop != DROP_NONE:
        rec_pkt(W, 2 + h, now, pid, drop, 0, 0, 0)
        HST[h, HS_DROP_PKTS] += 1
        HST[h, HS_DROP_BYTES] += ln
        W.DROPS[drop, 0] += 1
        W.DROPS[drop, 1] += ln
        if drop == DROP_MTU_ICMP:
            back = 0
            for j in range(h + 1):
                back += HP[j, HP_DELAY]
            G[G_ICMPS] += 1
            mtu_ip = HP[h, HP_MTU] - (wire - iplen - 14)
            heap_push(W, now + back, EV_ICMP, PK[pid, PK_FLOW], mtu_ip)
        pk_free(W, pid)
        return
    start = max(now, HQS[h, HQ_BUSY])
    done = start + ser_ns(wire, HP[h, HP_RATE])
    HQS[h, HQ_BUSY] = done
    tail = (HQS[h, HQ_HEAD] + HQS[h, HQ_N]) % qc
    W.HQ[h, tail, 0] = done
    W.HQ[h, tail, 1] = wire
    HQS[h, HQ_N] += 1
    HQS[h, HQ_BYTES] += wire
    if W.HL[h] > 0.0 and rand(W.G) < W.HL[h]:
        rec_pkt(W, 2 + h, done, pid, DROP_RANDOM_LOSS, 0, 0, 0)
        HST[h, HS_DROP_PKTS] += 1
        HST[h, HS_DROP_BYTES] += ln
        W.DROPS[DROP_RANDOM_LOSS, 0] += 1
        W.DROPS[DROP_RANDOM_LOSS, 1] += ln
        pk_free(W, pid)
        return
    t_out = done + HP[h, HP_DELAY]
    rec_pkt(W, 2 + h, t_out, pid, 0, 0, 0, 0)
    heap_push(W, t_out, EV_HOP, pid, h + 1)
