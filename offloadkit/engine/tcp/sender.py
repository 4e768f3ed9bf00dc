"""The sender: timers, TSO sizing, emitting through the NIC, ACK, timer and ICMP processing.

``send`` follows ``tcp_write_xmit``: super-packets of ``tcp_tso_segs`` MSS
(TSO autosizing, spec §2: ~1 ms of pacing rate plus the min-RTT bonus, capped
by gso_max_size - MAX_TCP_HEADER, at least 2 segments), limited by
``tcp_cwnd_test`` and the receive window; without TSO and GSO one MSS per
packet. ``emit`` hands a packet to the NIC (``engine.segment`` building
blocks): cut by the device (TSO), in software (GSO only) or dropped
(drop-gso); a 1-MSS packet is not GSO and passes every model unchanged.
Retransmissions are built as ``__tcp_retransmit_skb`` builds them (a run of
lost units of one skb, up to cwnd - in_flight and tso_segs units, Linux >=
4.7; one MSS with ``P_RTX_TSO = 0``). ``on_ack``: cumulative ACK, SACK, RTT
(Karn; timestamps), RTO = srtt + max(4 rttvar, min_rto) with backoff; TLP
(PTO = max(2 srtt, 10 ms)); RTO: cwnd 1, every unit lost. ``on_icmp``: PMTU
discovery lowers the MSS (units are split first, ``tcp_fragment``). MTU probing
(``mtu``): ``send`` sends the probes (``tcp_mtu_probe``), ``on_ack`` takes their
success, ``on_timer`` runs the black-hole detection of ``tcp_write_timeout``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ...codes import ACK, PSH
from ..segment import (NIC_DROP_GSO, NIC_SW_GSO, nic_chunk_size, nic_effective, segment_flags, segment_ip_id,
                       segment_payload, segments_for)
from .congestion import cc_ssthresh, cong_avoid, hystart
from .jiffies import JIFFY_NS, tcp_schedule_loss_probe
from .layout import (AK_ACK, AK_N, AK_S0, AK_TSECR, CC_CUBIC, EV_HOP, EV_TIMER, FF_EPOCH, FP_CC, F_BACKOFF, F_CWND,
                     F_CWND_CNT, F_DUPACKS, F_HIGH_LOST_U, F_HIGH_SACK_U, F_HIGH_SEQ, F_HS_FOUND, F_IPID, F_LOST,
                     F_MARK_PTR, F_MAXOUT, F_MTUP_ON, F_PMSS, F_PROBE_E, F_PROBE_MTU, F_PROBE_S, F_RTX_STAMP,
                     F_SEARCH_HI, F_SEARCH_LO, F_WSTAMP, P_MTU_PROBING, F_MAXOUT_SEQ, F_MIN_RTT, F_MSS, F_NXT_U, F_PRR_OUT, F_RACK_PTR, F_RETRANS,
                     F_RETX_UNITS, F_RTO, F_RTO_STREAK, F_RTTVAR, F_RTX_HINT, F_SACKED, F_SND_NXT, F_SND_UNA, F_SRTT,
                     F_SSTHRESH, F_STATE, F_TAT, F_TEVT, F_TKIND, F_TLP_HIGH, F_TLP_RETRANS, F_TOTAL, F_UNA_U, G_FTOP, G_HN,
                     G_NIC_BUSY, G_NIC_DROP_BYTES, G_NIC_DROP_PKTS, G_RETX_PKTS, G_RETX_UNITS, G_RTOS, G_SENT_BYTES,
                     G_SENT_PKTS, G_TLPS, G_WIRE_BYTES, G_WIRE_PKTS, INF, MAX_TCP_HEADER_1, PK_FLAGS, PK_FLOW,
                     PK_IPID, PK_IPLEN, PK_LEN, PK_RETX, PK_SEQ, PK_SKB_LEN, PK_SKB_SEGS, PK_TS, P_GSO, P_GSO_MAX_SEGS, P_GSO_MAX_SIZE,
                     P_MAX_RTO, P_MIN_RTO, P_NIC, P_NIC_RATE, P_PRR_UNA, P_PSH_GSO, P_RTX_TSO, P_RWND, P_SACK, P_THL,
                     P_LOSS_TIMERS, P_TLP, P_TS, P_TSO, P_TSO_DEFER, P_UCAP, ST_LOSS, ST_OPEN, ST_RECOVERY,
                     TK_NONE, TK_RTO, TK_TLP, UF_EVER,
                     UF_HEAD, UF_LOST, UF_RETRANS, UF_SACKED)
from .mtu import MTUP_BLACKHOLE_NS, TCP_PROBE_THRESHOLD, tcp_mtu_probing, tcp_mtup_probe_success, tcp_sync_mss
from .recovery import (find_unit, in_flight, mark_lost, mark_one, prr, rack_update, recovery_state, rto_at,
                       skip_sacked, split_unit, tcp_may_raise_cwnd, tcp_process_tlp_ack, tcp_try_keep_open)
from .world import heap_push, pk_alloc, pk_free, rec_pkt, ser_ns


# -- timers ------------------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def arm(W, f, kind, at):
    F = W.F
    F[f, F_TKIND] = kind
    F[f, F_TAT] = at
    if F[f, F_TEVT] < 0 or at < F[f, F_TEVT]:
        if heap_push(W, at, EV_TIMER, f, 0):
            F[f, F_TEVT] = at


@njit(cache=True, nogil=True, _nrt=False)
def set_timer(W, f, now):
    """tcp_set_xmit_timer: a loss probe in Open state (tcp_schedule_loss_probe: not in Disorder,
    Recovery or Loss), else the RTO; none when nothing is out."""
    F = W.F
    P = W.P
    out = F[f, F_NXT_U] - F[f, F_UNA_U]
    if out <= 0:
        F[f, F_TKIND] = TK_NONE
        return
    rto_due = rto_at(W, f, now)
    if P[P_TLP] and F[f, F_TLP_HIGH] < 0 and P[P_SACK] and tcp_try_keep_open(W, f):
        at = tcp_schedule_loss_probe(P[P_LOSS_TIMERS], now, F[f, F_SRTT], out == 1, P[P_MIN_RTO])
        if at < rto_due:
            arm(W, f, TK_TLP, at)
            return
    arm(W, f, TK_RTO, rto_due)


# -- the sender ---------------------------------------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def _tso_segs(W, f):
    """tcp_tso_segs: TSO autosizing (spec §2), at least 2 segments."""
    P = W.P
    F = W.F
    if P[P_TSO] == 0 and P[P_GSO] == 0:
        return np.int64(1)
    mss = F[f, F_MSS]
    cwnd = F[f, F_CWND]
    srtt = max(F[f, F_SRTT], 1000)
    ratio = 200 if cwnd < F[f, F_SSTHRESH] // 2 else 120
    rate = np.int64(float(mss) * cwnd * 1e9 / srtt * ratio / 100.0)      # sk_pacing_rate, bytes/s
    nbytes = rate >> 10
    gmax = P[P_GSO_MAX_SIZE] - MAX_TCP_HEADER_1
    r = (F[f, F_MIN_RTT] // 1000) >> 9
    if r < 32:
        nbytes += gmax >> r
    nbytes = min(nbytes, gmax)
    segs = max(nbytes // mss, 2)
    segs = min(segs, P[P_GSO_MAX_SEGS])
    half = P[P_RWND] // 2 // mss                                         # tcp_bound_to_half_wnd
    if half >= 1:
        segs = min(segs, half)
    return max(segs, np.int64(1))


@njit(cache=True, nogil=True, _nrt=False)
def _emit(W, f, now, seq, length, retx):
    """TCP hands a packet to the NIC: record it, segment it as the device does, queue it for hop 0."""
    P = W.P
    F = W.F
    PK = W.PK
    mss = F[f, F_MSS]
    thl = P[P_THL]
    segs = (length + mss - 1) // mss
    flags = ACK
    if segs > 1 and P[P_PSH_GSO]:
        flags |= PSH
    if F[f, F_TOTAL] >= 0 and seq + length >= F[f, F_TOTAL]:
        flags |= PSH
    ipid = F[f, F_IPID]
    F[f, F_IPID] = (ipid + segs) & 0xFFFF
    W.G[G_SENT_PKTS] += 1
    W.G[G_SENT_BYTES] += length
    F[f, F_WSTAMP] = now                                  # tp->tcp_wstamp_ns (4.4-4.19: lsndtime)
    # the super-packet as TCP built it (sender capture point)
    pid = pk_alloc(W)
    if pid < 0:
        return False
    PK[pid, PK_FLOW] = f
    PK[pid, PK_SEQ] = seq
    PK[pid, PK_LEN] = length
    PK[pid, PK_FLAGS] = flags
    PK[pid, PK_TS] = now
    PK[pid, PK_IPID] = ipid
    PK[pid, PK_RETX] = retx
    PK[pid, PK_IPLEN] = 20 + thl + length
    gso_size = mss if segs > 1 else 0
    code = P[P_NIC] if P[P_TSO] else NIC_SW_GSO
    if segs > 1 and P[P_NIC] == NIC_DROP_GSO:
        drop = W.NP[0]
        rec_pkt(W, 0, now, pid, drop, gso_size, segs, 0)
        W.G[G_NIC_DROP_PKTS] += 1
        W.G[G_NIC_DROP_BYTES] += length
        W.DROPS[drop, 0] += 1
        W.DROPS[drop, 1] += length
        pk_free(W, pid)
        return True
    rec_pkt(W, 0, now, pid, 0, gso_size, segs if segs > 1 else 0, 0)
    if segs > 1:
        chunk = nic_chunk_size(code, W.NP, mss, 20, thl)
        n = segments_for(length, chunk)
        ecode = nic_effective(code, mss)
    else:
        chunk = length
        n = 1
        ecode = code
    start = max(now, W.G[G_NIC_BUSY])
    for k in range(n):
        q = pid if k == 0 else pk_alloc(W)
        if q < 0:
            break
        pay = segment_payload(length, chunk, k, n)
        PK[q, PK_FLOW] = f
        PK[q, PK_SEQ] = seq + k * chunk
        PK[q, PK_LEN] = pay
        PK[q, PK_FLAGS] = segment_flags(flags, k, n, 0, ecode)
        PK[q, PK_TS] = now
        PK[q, PK_IPID] = segment_ip_id(ipid, k, 0, ecode)
        PK[q, PK_RETX] = retx
        PK[q, PK_IPLEN] = 20 + thl + pay
        PK[q, PK_SKB_SEGS] = n if k == 0 else 0
        PK[q, PK_SKB_LEN] = length if k == 0 else 0
        done = start + ser_ns(20 + thl + pay + 14, P[P_NIC_RATE])
        start = done
        rec_pkt(W, 1, done, q, 0, 0, 0, 0)
        W.G[G_WIRE_PKTS] += 1
        W.G[G_WIRE_BYTES] += pay
        heap_push(W, done, EV_HOP, q, 0)
    W.G[G_NIC_BUSY] = start
    return True


@njit(cache=True, nogil=True, _nrt=False)
def _tcp_mtu_probe(W, f, now):
    """tcp_mtu_probe: send one packet of the middle of [search_low, search_high] as new data.

    Returns 1 (sent), 0 (wait: the cwnd must drain first, nothing new goes out) or -1 (no probe now).
    """
    P = W.P
    F = W.F
    if not F[f, F_MTUP_ON] or F[f, F_PROBE_MTU] or F[f, F_STATE] != ST_OPEN or F[f, F_CWND] < 11:
        return -1
    hdr = 20 + P[P_THL]
    probe = ((F[f, F_SEARCH_HI] + F[f, F_SEARCH_LO]) >> 1) - hdr
    mss = F[f, F_MSS]
    if probe > F[f, F_SEARCH_HI] - hdr or F[f, F_SEARCH_HI] - F[f, F_SEARCH_LO] < TCP_PROBE_THRESHOLD:
        return -1                                        # tcp_mtu_check_reprobe: every 600 s only
    needed = probe + 4 * mss                             # (tp->reordering + 1) * mss_cache
    nxt = F[f, F_SND_NXT]
    total = F[f, F_TOTAL]
    if (total >= 0 and total - nxt < needed) or P[P_RWND] < needed:
        return -1
    if nxt + needed > F[f, F_SND_UNA] + P[P_RWND]:
        return 0
    infl = in_flight(F, f)
    if infl + 2 > F[f, F_CWND]:
        return 0 if infl > 0 else -1
    m = P[P_UCAP] - 1
    if F[f, F_NXT_U] + 1 - F[f, F_UNA_U] >= P[P_UCAP] or W.G[G_HN] + 200 > W.H.shape[0] or W.G[G_FTOP] < 200:
        return 0
    u = F[f, F_NXT_U]
    W.U[f, u & m, 0] = nxt
    W.U[f, u & m, 1] = nxt + probe
    W.U[f, u & m, 2] = UF_HEAD
    W.U[f, u & m, 3] = now
    F[f, F_NXT_U] += 1
    F[f, F_SND_NXT] = nxt + probe
    F[f, F_PRR_OUT] += 1
    F[f, F_MSS] = probe                                  # one packet of probe bytes, not a GSO packet
    _emit(W, f, now, nxt, probe, 0)
    F[f, F_MSS] = mss
    F[f, F_CWND] -= 1                                    # "we are sending effectively two packets"
    F[f, F_PROBE_MTU] = probe + hdr
    F[f, F_PROBE_S] = nxt
    F[f, F_PROBE_E] = nxt + probe
    return 1

#: Tcp.tso_defer's forms of tcp_tso_should_defer (0: not modelled)
TSO_DEFER_JIFFIES, TSO_DEFER_EDT, TSO_DEFER_ACK_1MS = 1, 2, 3
TCP_TSO_WIN_DIVISOR = 3          # net.ipv4.tcp_tso_win_divisor's default
NSEC_PER_MSEC = 1_000_000


@njit(cache=True, nogil=True, _nrt=False)
def tcp_tso_should_defer(W, f, now, segs, tso):
    """tcp_tso_should_defer: hold back a TSO skb of ``segs`` (> 1) segments for more cwnd room.

    Never in Recovery/Loss, nor when the last write is not recent (4.4-4.19:
    an earlier jiffy; 4.20+: over 1 ms ago, tcp_wstamp_ns). Send when the
    room min(cwnd - in_flight, receive window) takes a full ``tso``-segment
    skb, or the whole skb when it is not the last one, or a third of
    min(rwnd, cwnd) (tcp_tso_win_divisor); and when the next ACK is not due
    soon: the oldest unacked skb went out less than srtt/2 ago (before 6.18)
    or, in 6.18 ("fix tcp_tso_should_defer() vs large RTT"), the ACK it
    brings is due in over min(srtt/2, 1 ms). Otherwise defer: an ACK calls
    ``send`` again.
    """
    P = W.P
    F = W.F
    form = P[P_TSO_DEFER]
    if form == 0 or F[f, F_STATE] != ST_OPEN:
        return False
    last = F[f, F_WSTAMP]
    if form == TSO_DEFER_JIFFIES:
        if now // JIFFY_NS > last // JIFFY_NS:
            return False
    elif now - last > NSEC_PER_MSEC:
        return False
    mss = F[f, F_MSS]
    infl = in_flight(F, f)
    nxt = F[f, F_SND_NXT]
    send_win = F[f, F_SND_UNA] + P[P_RWND] - nxt
    limit = min(send_win, (F[f, F_CWND] - infl) * mss)
    if limit >= tso * mss:
        return False
    total = F[f, F_TOTAL]
    skb_len = segs * mss if total < 0 else min(segs * mss, total - nxt)
    if (total < 0 or total - nxt > skb_len) and limit >= skb_len:
        return False                                     # the middle of the queue: it will not grow
    if limit >= min(P[P_RWND], F[f, F_CWND] * mss) // TCP_TSO_WIN_DIVISOR:
        return False
    if F[f, F_NXT_U] <= F[f, F_UNA_U]:
        return False
    head = W.U[f, F[f, F_UNA_U] & (P[P_UCAP] - 1), 3]
    srtt = F[f, F_SRTT]
    if form == TSO_DEFER_ACK_1MS:
        return head + srtt - now <= min(srtt >> 1, NSEC_PER_MSEC)
    return now - head >= srtt >> 1


@njit(cache=True, nogil=True, _nrt=False)
def send(W, f, now):
    """tcp_xmit_retransmit_queue, then tcp_write_xmit. Returns the number of new-data packets sent."""
    return xmit(W, f, now, False)


@njit(cache=True, nogil=True, _nrt=False)
def xmit(W, f, now, push_one):
    """``send``; ``push_one``: a loss probe's tcp_write_xmit (no TSO deferral)."""
    P = W.P
    F = W.F
    m = P[P_UCAP] - 1
    sent = 0
    mss = F[f, F_MSS]
    tso = _tso_segs(W, f)
    # 1) retransmit lost units, one original skb (run) at a time
    if F[f, F_LOST] > 0:
        u = max(F[f, F_RTX_HINT], F[f, F_UNA_U])
        hi = min(F[f, F_HIGH_LOST_U], F[f, F_NXT_U])
        while u < hi:
            fl = W.U[f, u & m, 2]
            if (fl & UF_LOST) == 0 or (fl & (UF_RETRANS | UF_SACKED)) != 0:
                u += 1
                continue
            room = F[f, F_CWND] - in_flight(F, f)
            if room <= 0:
                break
            s0 = max(W.U[f, u & m, 0], F[f, F_SND_UNA])
            if W.U[f, u & m, 1] - s0 > mss:                  # bigger than the MSS since PMTU discovery
                if not split_unit(W, f, u, s0 + mss):
                    break
                hi = min(F[f, F_HIGH_LOST_U], F[f, F_NXT_U])
            k = 1
            lim = min(room, tso) if P[P_RTX_TSO] else 1        # Linux < 4.7: 1-MSS retransmits
            while k < lim and u + k < F[f, F_NXT_U]:
                g = W.U[f, (u + k) & m, 2]
                if (g & UF_HEAD) != 0 or (g & UF_LOST) == 0 or (g & (UF_RETRANS | UF_SACKED)) != 0:
                    break
                k += 1
            s = max(W.U[f, u & m, 0], F[f, F_SND_UNA])
            e = W.U[f, (u + k - 1) & m, 1]
            if W.G[G_HN] + 200 > W.H.shape[0] or W.G[G_FTOP] < 200:
                break
            # the run becomes its own skb (tcp_fragment): heads at both ends
            W.U[f, u & m, 2] |= UF_HEAD
            if u + k < F[f, F_NXT_U]:
                W.U[f, (u + k) & m, 2] |= UF_HEAD
            for j in range(u, u + k):
                W.U[f, j & m, 2] |= UF_RETRANS | UF_EVER
                W.U[f, j & m, 3] = now
            if u < F[f, F_RACK_PTR]:
                F[f, F_RACK_PTR] = u
            F[f, F_RETRANS] += k
            F[f, F_PRR_OUT] += k
            F[f, F_RETX_UNITS] += k
            W.G[G_RETX_UNITS] += k
            W.G[G_RETX_PKTS] += 1
            # a retransmission larger than the current MSS (after PMTU discovery) is a GSO packet
            _emit(W, f, now, s, e - s, 1)
            if u == F[f, F_UNA_U]:
                arm(W, f, TK_RTO, rto_at(W, f, now))     # the head went out again: restart the RTO
            u += k
        F[f, F_RTX_HINT] = u
    # 2) new data, after an MTU probe when one is due
    total = F[f, F_TOTAL]
    probed = _tcp_mtu_probe(W, f, now)
    if probed == 0:
        return sent
    sent += max(probed, 0)
    while total < 0 or F[f, F_SND_NXT] < total:
        infl = in_flight(F, f)
        cwnd = F[f, F_CWND]
        if infl >= cwnd:
            break
        quota = min(max(cwnd // 2, 1), cwnd - infl)                     # tcp_cwnd_test
        segs = min(quota, tso)
        want = tso if total < 0 else min(tso, (total - F[f, F_SND_NXT] + mss - 1) // mss)
        if want > 1 and not push_one and tcp_tso_should_defer(W, f, now, want, tso):
            break
        nxt = F[f, F_SND_NXT]
        wnd_end = F[f, F_SND_UNA] + P[P_RWND]
        left = (total - nxt) if total >= 0 else INF
        avail = wnd_end - nxt
        if avail < min(mss, left):
            break
        length = min(segs * mss, left, avail)
        if length > mss and length % mss != 0 and length < left:
            length -= length % mss                                       # no sub-MSS tail mid-stream
        n_units = (length + mss - 1) // mss
        if F[f, F_NXT_U] + n_units - F[f, F_UNA_U] >= P[P_UCAP]:
            break
        if W.G[G_HN] + 200 > W.H.shape[0] or W.G[G_FTOP] < 200:
            break
        for j in range(n_units):
            u = F[f, F_NXT_U] + j
            W.U[f, u & m, 0] = nxt + j * mss
            W.U[f, u & m, 1] = min(nxt + (j + 1) * mss, nxt + length)
            W.U[f, u & m, 2] = UF_HEAD if j == 0 else 0
            W.U[f, u & m, 3] = now
        F[f, F_NXT_U] += n_units
        F[f, F_SND_NXT] = nxt + length
        F[f, F_PRR_OUT] += n_units
        _emit(W, f, now, nxt, length, 0)
        sent += 1
    infl = in_flight(F, f)
    if infl > F[f, F_MAXOUT]:
        F[f, F_MAXOUT] = infl
    return sent


@njit(cache=True, nogil=True, _nrt=False)
def _rtt_sample(W, f, rtt):
    F = W.F
    P = W.P
    if rtt <= 0:
        rtt = 1
    if F[f, F_MIN_RTT] <= 0 or rtt < F[f, F_MIN_RTT]:
        F[f, F_MIN_RTT] = rtt
    if F[f, F_SRTT] <= 0:
        F[f, F_SRTT] = rtt
        F[f, F_RTTVAR] = rtt // 2
    else:
        d = abs(rtt - F[f, F_SRTT])
        F[f, F_RTTVAR] = (3 * F[f, F_RTTVAR] + d) // 4
        F[f, F_SRTT] = (7 * F[f, F_SRTT] + rtt) // 8
    F[f, F_RTO] = min(F[f, F_SRTT] + max(4 * F[f, F_RTTVAR], P[P_MIN_RTO]), P[P_MAX_RTO])
    F[f, F_BACKOFF] = 0


@njit(cache=True, nogil=True, _nrt=False)
def on_reo(W, f, now):
    """tcp_rack_reo_timeout: mark what has now waited long enough, recover, retransmit."""
    F = W.F
    prior = in_flight(F, f)
    was = F[f, F_STATE]
    mark_lost(W, f, now)
    if in_flight(F, f) != prior:
        if recovery_state(W, f, prior) == ST_RECOVERY and was != ST_RECOVERY:
            prr(W, f, 1, False)                          # tcp_enter_recovery + tcp_cwnd_reduction(sk, 1, 0)
        send(W, f, now)
    if F[f, F_TKIND] != TK_RTO:
        if F[f, F_NXT_U] > F[f, F_UNA_U]:
            arm(W, f, TK_RTO, rto_at(W, f, now))         # tcp_rearm_rto: never a loss probe here
        else:
            F[f, F_TKIND] = TK_NONE


@njit(cache=True, nogil=True, _nrt=False)
def on_ack(W, f, aid, now):
    """tcp_ack: cumulative ACK, SACK tagging, RTT, loss marking, recovery and cwnd."""
    P = W.P
    F = W.F
    AK = W.AK
    m = P[P_UCAP] - 1
    ack = AK[aid, AK_ACK]
    prior_infl = in_flight(F, f)
    acked_units = 0
    newly_sacked = 0
    retrans_acked = False                                 # FLAG_RETRANS_DATA_ACKED
    rtt = np.int64(-1)
    advanced = ack > F[f, F_SND_UNA]
    if advanced:
        while F[f, F_UNA_U] < F[f, F_NXT_U] and W.U[f, F[f, F_UNA_U] & m, 1] <= ack:
            u = F[f, F_UNA_U]
            fl = W.U[f, u & m, 2]
            if fl & UF_EVER:
                retrans_acked = True
            if fl & UF_SACKED:
                F[f, F_SACKED] -= 1
            else:
                acked_units += 1
                if fl & UF_LOST:
                    F[f, F_LOST] -= 1
                if fl & UF_RETRANS:
                    F[f, F_RETRANS] -= 1
                if (fl & UF_EVER) == 0:
                    rtt = now - W.U[f, u & m, 3]
                rack_update(W, f, u, W.U[f, u & m, 3], fl, now)
            F[f, F_UNA_U] = u + 1
        F[f, F_SND_UNA] = ack
        F[f, F_DUPACKS] = 0
        F[f, F_RTO_STREAK] = 0
        if F[f, F_UNA_U] < F[f, F_NXT_U]:
            # the head unit may now be partly acked: its first byte moves up (tcp_trim_head)
            W.U[f, F[f, F_UNA_U] & m, 2] |= UF_HEAD
        if F[f, F_PROBE_MTU] > 0 and ack >= F[f, F_PROBE_E]:
            tcp_mtup_probe_success(W, f)                 # tcp_clean_rtx_queue
    # SACK blocks
    n = AK[aid, AK_N]
    for b in range(n):
        left = AK[aid, AK_S0 + 2 * b]
        right = AK[aid, AK_S0 + 2 * b + 1]
        if right <= F[f, F_SND_UNA]:
            continue
        u = find_unit(W, f, max(left, F[f, F_SND_UNA]))
        nxt = F[f, F_NXT_U]
        while u < nxt:
            u = skip_sacked(W, f, u, nxt)
            if u >= nxt:
                break
            s = max(W.U[f, u & m, 0], F[f, F_SND_UNA])
            e = W.U[f, u & m, 1]
            if e > right:
                break
            if s >= left:
                fl = W.U[f, u & m, 2]
                W.U[f, u & m, 2] = (fl | UF_SACKED) & ~(UF_LOST | UF_RETRANS)
                W.U[f, u & m, 4] = u + 1
                F[f, F_SACKED] += 1
                if fl & UF_LOST:
                    F[f, F_LOST] -= 1
                if fl & UF_RETRANS:
                    F[f, F_RETRANS] -= 1
                newly_sacked += 1
                if u + 1 > F[f, F_HIGH_SACK_U]:
                    F[f, F_HIGH_SACK_U] = u + 1
                x = W.U[f, u & m, 3]
                if (fl & UF_EVER) == 0:
                    r2 = now - x
                    if rtt < 0 or r2 < rtt:
                        rtt = r2
                rack_update(W, f, u, x, fl, now)
            u += 1
    if not advanced and newly_sacked == 0 and F[f, F_NXT_U] > F[f, F_UNA_U]:
        F[f, F_DUPACKS] += 1
    # RTT: Karn sample from never-retransmitted units, else the timestamp echo
    if rtt < 0 and advanced and P[P_TS] and AK[aid, AK_TSECR] > 0:
        rtt = now - AK[aid, AK_TSECR]
    if rtt >= 0:
        _rtt_sample(W, f, rtt)
        if W.FP[f, FP_CC] == CC_CUBIC:
            hystart(W, f, rtt)
    delivered = acked_units + newly_sacked
    tcp_process_tlp_ack(W, f, ack, advanced or newly_sacked > 0)
    # loss detection
    if P[P_SACK] == 0 and F[f, F_STATE] == ST_RECOVERY and advanced and ack < F[f, F_HIGH_SEQ]:
        F[f, F_DUPACKS] = 3                                            # NewReno partial ACK: next hole
    prior_retrans = F[f, F_RETRANS]
    prior_lost = F[f, F_LOST]
    mark_lost(W, f, now)
    state = recovery_state(W, f, prior_infl)
    if state == ST_RECOVERY:
        if P[P_PRR_UNA]:
            ss_ok = advanced and F[f, F_LOST] == prior_lost                 # Linux >= 5.12
        else:
            ss_ok = retrans_acked and F[f, F_RETRANS] == prior_retrans      # 4.3-5.11: no FLAG_LOST_RETRANS
        prr(W, f, delivered, ss_ok)
    elif tcp_may_raise_cwnd(advanced):
        cong_avoid(W, f, delivered, now)
    if F[f, F_SND_UNA] >= F[f, F_MAXOUT_SEQ]:
        F[f, F_MAXOUT_SEQ] = F[f, F_SND_NXT] + 1
        F[f, F_MAXOUT] = in_flight(F, f)
    F[f, F_CWND] = max(min(F[f, F_CWND], 4 * P[P_UCAP]), 1)
    sent_new = send(W, f, now)
    # tcp_set_xmit_timer on FLAG_ACKED; a loss probe after new data in Open state
    if advanced or F[f, F_TKIND] == TK_NONE or (sent_new > 0 and F[f, F_STATE] == ST_OPEN):
        set_timer(W, f, now)
    if F[f, F_TOTAL] >= 0 and F[f, F_SND_UNA] >= F[f, F_TOTAL]:
        F[f, F_TKIND] = TK_NONE


@njit(cache=True, nogil=True, _nrt=False)
def tcp_send_loss_probe(W, f, now):
    """tcp_send_loss_probe: at most one outstanding probe; new data when the window allows (one
    MSS when the cwnd is full), else the last MSS again, a retransmission (tlp_retrans); then the RTO."""
    P = W.P
    F = W.F
    m = P[P_UCAP] - 1
    una = F[f, F_UNA_U]
    nxt = F[f, F_NXT_U]
    if F[f, F_TLP_HIGH] >= 0:
        arm(W, f, TK_RTO, rto_at(W, f, now))
        return
    total = F[f, F_TOTAL]
    wnd_end = F[f, F_SND_UNA] + P[P_RWND]
    nx = F[f, F_SND_NXT]
    left = (total - nx) if total >= 0 else INF
    sent = False
    if left > 0 and wnd_end - nx >= min(F[f, F_MSS], left) and nxt - una < P[P_UCAP] - 1:
        # new data, at most one MSS when the cwnd is full (push_one = 2)
        save = F[f, F_CWND]
        F[f, F_CWND] = max(F[f, F_CWND], in_flight(F, f) + 1)
        sent = xmit(W, f, now, True) > 0
        F[f, F_CWND] = save
        F[f, F_TLP_RETRANS] = 0
    else:
        u = nxt - 1                                   # the last MSS again
        if W.U[f, u & m, 1] - max(W.U[f, u & m, 0], F[f, F_SND_UNA]) > F[f, F_MSS]:
            if split_unit(W, f, u, W.U[f, u & m, 1] - F[f, F_MSS]):
                u += 1
        fl = W.U[f, u & m, 2]
        if (fl & UF_SACKED) == 0:
            W.U[f, u & m, 2] = fl | UF_EVER | UF_HEAD
            W.U[f, u & m, 3] = now
            if u < F[f, F_RACK_PTR]:
                F[f, F_RACK_PTR] = u
            s = max(W.U[f, u & m, 0], F[f, F_SND_UNA])
            F[f, F_RETX_UNITS] += 1
            W.G[G_RETX_UNITS] += 1
            W.G[G_RETX_PKTS] += 1
            _emit(W, f, now, s, W.U[f, u & m, 1] - s, 1)
            F[f, F_TLP_RETRANS] = 1
            sent = True
    if sent:
        W.G[G_TLPS] += 1
        F[f, F_TLP_HIGH] = F[f, F_SND_NXT]
    arm(W, f, TK_RTO, rto_at(W, f, now))


@njit(cache=True, nogil=True, _nrt=False)
def on_timer(W, f, now):
    P = W.P
    F = W.F
    m = P[P_UCAP] - 1
    kind = F[f, F_TKIND]
    F[f, F_TKIND] = TK_NONE
    una = F[f, F_UNA_U]
    nxt = F[f, F_NXT_U]
    if nxt <= una:
        return
    if kind == TK_TLP:
        tcp_send_loss_probe(W, f, now)
        return
    # RTO: tcp_write_timeout's black-hole detection, then tcp_enter_loss
    W.G[G_RTOS] += 1
    if F[f, F_RTO_STREAK] == 0:
        F[f, F_RTX_STAMP] = now                         # tp->retrans_stamp: the first retransmission
    elif P[P_MTU_PROBING] and now - F[f, F_RTX_STAMP] > MTUP_BLACKHOLE_NS:
        tcp_mtu_probing(W, f)
    if F[f, F_STATE] != ST_LOSS or F[f, F_RTO_STREAK] == 0:
        F[f, F_SSTHRESH] = cc_ssthresh(W, f)
    F[f, F_RTO_STREAK] += 1
    F[f, F_CWND] = 1
    F[f, F_CWND_CNT] = 0
    lost = 0
    for u in range(una, nxt):
        fl = W.U[f, u & m, 2]
        if (fl & UF_SACKED) == 0:
            W.U[f, u & m, 2] = (fl | UF_LOST) & ~UF_RETRANS
            lost += 1
    F[f, F_LOST] = lost
    F[f, F_RETRANS] = 0
    F[f, F_STATE] = ST_LOSS
    F[f, F_HIGH_SEQ] = F[f, F_SND_NXT]
    F[f, F_TLP_HIGH] = -1
    F[f, F_RTX_HINT] = una
    F[f, F_HIGH_LOST_U] = nxt
    F[f, F_MARK_PTR] = una
    F[f, F_RACK_PTR] = una
    F[f, F_BACKOFF] += 1
    W.FF[f, FF_EPOCH] = 0.0
    F[f, F_HS_FOUND] = 0                                    # bictcp_state(Loss): HyStart again
    send(W, f, now)
    arm(W, f, TK_RTO, rto_at(W, f, now))


@njit(cache=True, nogil=True, _nrt=False)
def on_icmp(W, f, mtu, now):
    """ICMP fragmentation needed: lower the MSS (PMTU discovery) and resend what no longer fits."""
    P = W.P
    F = W.F
    m = P[P_UCAP] - 1
    new = max(mtu - 20 - P[P_THL], 48)
    if new >= F[f, F_PMSS]:
        return
    F[f, F_PMSS] = new
    tcp_sync_mss(W, f)
    new = F[f, F_MSS]
    for u in range(F[f, F_UNA_U], F[f, F_NXT_U]):
        fl = W.U[f, u & m, 2]
        if (fl & (UF_SACKED | UF_LOST)) == 0 and W.U[f, u & m, 1] - W.U[f, u & m, 0] > new:
            mark_one(W, f, u)
    if F[f, F_LOST] > 0:
        if F[f, F_STATE] == ST_OPEN:
            F[f, F_STATE] = ST_LOSS                     # tcp_simple_retransmit: no cwnd reduction
            F[f, F_HIGH_SEQ] = F[f, F_SND_NXT]
        send(W, f, now)
        set_timer(W, f, now)
