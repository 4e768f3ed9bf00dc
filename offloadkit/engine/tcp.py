"""Event-driven TCP flows, socket to socket through the offload engine (numba).

One njit event loop (``run_kernel``) over plain arrays: a binary heap of
events in a numpy array, packet and ACK pools, a per-flow scoreboard ring of
MSS units. ``offloadkit.sim.simulate`` packs a Scenario into these arrays and
turns the recorded rows into Traces.

Per flow, what the loop models (Linux, spec §1-§3):

- Sender: ``tcp_write_xmit`` builds super-packets of ``tcp_tso_segs`` MSS
  (TSO autosizing, spec §2: ~1 ms of pacing rate, plus the min-RTT bonus,
  capped by gso_max_size - MAX_TCP_HEADER and at least 2 segments), limited by
  ``tcp_cwnd_test`` (half the cwnd, cwnd - in_flight) and the receive window.
  Without TSO and GSO, one MSS per packet.
- The NIC (``engine.segment`` building blocks): a multi-segment packet is cut
  by the device (TSO: the NIC model's rule, e.g. rtl8139-legacy's 1448-byte
  chunks), in software (GSO only), or dropped (drop-gso). A 1-MSS packet is
  not GSO and passes every model unchanged: why report 000's and 001's
  single-MSS retransmissions get through. Segments leave at the NIC rate.
- Hops: MTU check (``engine.path.mtu_drop_reason``: silent or ICMP, PMTU
  discovery lowers the sender's MSS), tail-drop FIFO (packets and/or bytes),
  serialization at the hop rate (frame = IP + Ethernet + encapsulation), random
  loss (the frame is sent, then lost), propagation delay.
- Receiver NIC: NAPI polls ``napi_delay_ns`` after the first packet of a
  batch, up to ``napi_budget`` packets; GRO merges contiguous in-order
  segments of a flow with equal TSval and consecutive IP IDs, up to 64 KB; a
  shorter or PSH segment closes the aggregate; everything is flushed at the
  end of the poll (when the budget ran out with packets left, only those
  held since an earlier jiffy, HZ 1000). LRO ignores TSval/IP ID. (The kernel-exact GRO trace is
  rebuilt from the recorded arrivals by ``engine.gro`` afterwards.)
- Receiver TCP: reassembly (rcv_nxt + out-of-order intervals), an ACK per
  delivered packet when it is out of order, fills a hole, the receiver is in
  quick-ACK mode (first 16 ACKs) or more than one full segment is unacked;
  otherwise the delayed-ACK timer. Duplicate data re-enters quick-ACK mode
  (``tcp_enter_quickack_mode``: up to min(rwnd / 2 rcv_mss, 16) quick ACKs);
  with ``P_OFO_QUICK`` (Linux < 4.18) so does out-of-order or partial data.
  SACK blocks (3 with timestamps, else 4): the most recently changed block first. TSecr echoes the last in-order TSval.
  ACKs return over the reverse path's propagation delay, without loss.
- Sender ACK processing: cumulative ACK, SACK scoreboard per MSS unit (a unit
  counts as SACKed only when fully covered, as ``tcp_match_skb_to_sack``
  splits at MSS boundaries), RTT (Karn on units; with timestamps from the
  echo), RTO = srtt + max(4 rttvar, min_rto) with exponential backoff; loss
  marking: 3 SACKed units above (RFC 6675) or RACK (a unit sent before a
  delivered one and unacknowledged for its RTT + min_rtt/4; with
  ``P_REO_TIMER``, Linux >= 4.11, a timer fires when that time is up, else
  the next ACK finds it), 3 dupacks without SACK; with ``P_RACK_TIME = 0``
  (Linux 4.4-4.9) RACK only runs in Recovery/Loss and needs a delivered unit
  sent > 1 ms later; with ``P_FACK`` (Linux <= 4.14) all but 3 units below the
  highest SACK are lost; fast recovery with PRR (prior_cwnd; slow-start bound
  per ``P_PRR_UNA``: 5.12+ una advanced, else 4.3-5.11 retransmit acked); NewReno or CUBIC (HyStart delay detection); TLP (PTO = max(2 srtt,
  10 ms), 1.5 srtt + min_rto with one unit out; a new 1-MSS segment or the
  last MSS again); RTO: cwnd 1, every unit lost, slow start.
- Retransmissions are built as ``__tcp_retransmit_skb`` builds them: a run of
  lost units of one original skb, up to cwnd - in_flight and tso_segs units
  (Linux >= 4.7), so a retransmission is a GSO packet only when cwnd allows
  2+ units; with ``P_RTX_TSO = 0`` (Linux 4.4, report 000's guest) every
  retransmission is one MSS. Units bigger than the MSS after PMTU discovery
  are split first (``tcp_fragment``); a TLP probe is the last MSS.
- Timers: the RTO restarts when snd_una advances or the head is resent
  (``tcp_rearm_rto``), a loss probe is armed after new data in Open state.

Heap keys are ``time << 20 | insertion counter``: events at the same time run
in the order they were scheduled, so a run is deterministic (the counter
wraps after 2**20 events, still deterministically). Random loss uses an
xorshift128 stream seeded from the Scenario seed. Under
``NUMBA_DISABLE_JIT=1`` the same code runs as plain Python with the same
results (``tests/reference/tcp_ref.py`` does that for one loop only).

Not modelled: the handshake (connections start established, srtt = base RTT),
FIN, receive-window autotuning, TSQ/pacing of the sender, TSO deferral, ACK
loss and reverse-path queueing, D-SACK undo, HyStart's ACK-train detection.
"""
from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from ..codes import ACK, DROP_MTU_ICMP, DROP_NONE, DROP_QUEUE_FULL, DROP_RANDOM_LOSS, PSH
from ..codes import (GRO_END_OF_POLL, GRO_FLAGS, GRO_IP_RULE, GRO_OFF, GRO_OPTIONS_DIFFER, GRO_SEQ_GAP,
                     GRO_SIZE)
from .path import mtu_drop_reason
from .segment import (NIC_DROP_GSO, NIC_SW_GSO, nic_chunk_size, nic_effective, segment_flags, segment_ip_id,
                      segment_payload, segments_for)

# -- parameter vector P ------------------------------------------------------
(P_FLOWS, P_TOTAL, P_END_NS, P_MSS, P_THL, P_TS, P_SACK, P_CC, P_IW, P_MIN_RTO, P_MAX_RTO, P_TLP,
 P_DELACK, P_DELACK_NS, P_QUICK, P_RWND, P_TSO, P_GSO, P_NIC, P_NIC_RATE, P_GSO_MAX_SIZE, P_GSO_MAX_SEGS,
 P_GRO, P_BUDGET, P_NAPI_DELAY, P_GRO_MAX, P_REC_LIMIT, P_SAMPLE_NS, P_UCAP, P_OCAP, P_REV_DELAY,
 P_PSH_GSO, P_NHOPS, P_NPOINTS, P_PKCAP, P_AKCAP, P_HCAP, P_RXCAP, P_QCAP, P_BASE_RTT, P_MAX_EVENTS,
 P_SEED, P_RTX_TSO, P_REO_TIMER, P_PRR_UNA, P_RACK_TIME, P_FACK, P_OFO_QUICK, P_MTU_PROBING, P_BASE_MSS,
 P_LEN) = range(51)
CC_NEWRENO, CC_CUBIC = 0, 1
GRO_MODE_OFF, GRO_MODE_GRO, GRO_MODE_LRO = 0, 1, 2

# hop table HP columns
HP_RATE, HP_DELAY, HP_MTU, HP_OVER, HP_QPKTS, HP_QBYTES, HP_ICMP, HP_ENCAP, HP_LABELS, HP_LEN = range(10)

# global counters G
(G_HN, G_SEQNO, G_FTOP, G_ATOP, G_RXH, G_RXT, G_NAPI, G_NIC_BUSY, G_EVENTS, G_SMPN, G_SMP_INT,
 G_DONE_FLOWS, G_OVERFLOW, G_DELIV, G_LAST_DONE, G_RETX_UNITS, G_RETX_PKTS, G_TLPS, G_RTOS, G_RECOV,
 G_SENT_PKTS, G_SENT_BYTES, G_WIRE_PKTS, G_WIRE_BYTES, G_ACKS, G_NIC_DROP_PKTS, G_NIC_DROP_BYTES,
 G_RX_PKTS, G_RX_BYTES, G_GRO_PKTS, G_NOW, G_ICMPS, G_RECTOT, G_RNG, G_LEN) = tuple(range(33)) + (33, 37)
G_RECN = G_LEN               # rows recorded per capture point follow
MAX_POINTS = 40

# per-flow state F (int64)
(F_SND_UNA, F_SND_NXT, F_TOTAL, F_UNA_U, F_NXT_U, F_MSS, F_CWND, F_CWND_CNT, F_SSTHRESH, F_SRTT,
 F_RTTVAR, F_MIN_RTT, F_RTO, F_BACKOFF, F_STATE, F_HIGH_SEQ, F_SACKED, F_LOST, F_RETRANS, F_PRR_DELIV,
 F_PRR_OUT, F_RECOVER_FS, F_DUPACKS, F_TLP_HIGH, F_TKIND, F_TAT, F_TEVT, F_IPID, F_RTX_HINT,
 F_RTO_STREAK, F_RACK_X, F_MAXOUT, F_MAXOUT_SEQ, F_DONE_NS, F_RCV_NXT, F_RCV_WUP, F_QUICK, F_DACK_AT,
 F_DACK_EVT, F_TS_RECENT, F_RCV_MSS, F_ON, F_OSTAMP, F_H_CNT, F_H_SEQ, F_H_END, F_H_FIRST, F_H_FLAGS,
 F_H_IPID, F_H_TS, F_RETX_UNITS, F_DELIVERED, F_HIGH_SACK_U, F_MARK_PTR, F_RACK_PTR,
 F_HIGH_LOST_U, F_H_AGE, F_RACK_U, F_RACK_RTT, F_REO_EVT, F_HS_END, F_HS_CURR, F_HS_CNT, F_HS_FOUND,
 F_RACK_ADV, F_MTUP_ON, F_SEARCH_LO, F_SEARCH_HI, F_PROBE_MTU, F_PROBE_S, F_PROBE_E, F_PMSS,
 F_RTX_STAMP, F_LEN) = range(74)
# per-flow floats FF (CUBIC)
FF_WMAX, FF_EPOCH, FF_K, FF_ORIGIN, FF_WEST, FF_LEN = range(6)

ST_OPEN, ST_RECOVERY, ST_LOSS = 0, 1, 2
TK_NONE, TK_RTO, TK_TLP = 0, 1, 2

# unit flags
UF_SACKED, UF_LOST, UF_RETRANS, UF_EVER, UF_HEAD = 1, 2, 4, 8, 16

# packet pool PK and ACK pool AK columns
PK_FLOW, PK_SEQ, PK_LEN, PK_FLAGS, PK_TS, PK_IPID, PK_RETX, PK_IPLEN, PK_LEN_COLS = range(9)
AK_FLOW, AK_ACK, AK_TSECR, AK_N, AK_S0, AK_LEN_COLS = 0, 1, 2, 3, 4, 12

# events
EV_START, EV_HOP, EV_POLL, EV_ACK, EV_TIMER, EV_DELACK, EV_ICMP, EV_SAMPLE, EV_REO = range(9)

# recorded rows REC
(R_TIME, R_POINT, R_DIR, R_FLOW, R_SEQ, R_ACK, R_LEN, R_FLAGS, R_GSO_SIZE, R_GSO_SEGS, R_IPID, R_TSVAL,
 R_TSECR, R_DROP, R_GRO, R_IPLEN, R_RETX, R_SACKN, R_SACK0, R_COLS) = tuple(range(18)) + (18, 26)

# hop state HQS / stats HST
HS_IN_PKTS, HS_IN_BYTES, HS_OUT_PKTS, HS_OUT_BYTES, HS_DROP_PKTS, HS_DROP_BYTES, HS_LEN = range(7)
HQ_HEAD, HQ_N, HQ_BYTES, HQ_BUSY, HS_COLS = 7, 8, 9, 10, 11

N_DROP_CODES = 16
SMP_CAP = 2048
MAX_TCP_HEADER_1 = 321          # MAX_TCP_HEADER + 1 (sk_setup_caps)
INF = np.int64(1) << np.int64(62)
RACK_REO_WND_4X_NS = 1_000_000   # Linux 4.4-4.9 tcp_rack_mark_lost: reo_wnd = 1000 us (no reordering seen)
#: tcp_write_timeout's black-hole test: retransmits_timed_out(sk, sysctl_tcp_retries1 = 3, 0) waits
#: tcp_model_timeout(3, TCP_RTO_MIN) = ((2 << 3) - 1) * 200 ms since the first retransmission
#: (retrans_stamp is stamped after it went out), so with a 200 ms RTO it fires at the 5th RTO, ~6.2 s
MTUP_BLACKHOLE_NS = 15 * 200_000_000
TCP_PROBE_THRESHOLD = 8          # net.ipv4.tcp_probe_threshold: stop searching below 8 bytes of MTU
TCP_MIN_SND_MSS_ = 48            # net.ipv4.tcp_min_snd_mss and tcp_mtu_probe_floor
HEAP_SHIFT = 20                  # event times < 2**43 ns (2.4 hours)
HEAP_SEQ_MASK = (1 << 20) - 1

World = namedtuple("World", "P HP HL NP G H PK FREE AK AFREE F FF U O REC RXQ HQ HS DROPS SM")


# -- small building blocks ---------------------------------------------------

@njit(cache=True, _nrt=False)
def _rand(G):
    """xorshift128 on 32-bit words kept in int64 (identical in plain Python): uniform in [0, 1)."""
    m = np.int64(0xFFFFFFFF)
    a = G_RNG
    t = G[a] ^ ((G[a] << 11) & m)
    G[a] = G[a + 1]
    G[a + 1] = G[a + 2]
    G[a + 2] = G[a + 3]
    G[a + 3] = (G[a + 3] ^ (G[a + 3] >> 19)) ^ (t ^ (t >> 8))
    return G[a + 3] / 4294967296.0


@njit(cache=True, _nrt=False)
def ser_ns(nbytes, rate_bps):
    """Serialization time of ``nbytes`` at ``rate_bps``, rounded up to whole ns."""
    return (np.int64(nbytes) * 8_000_000_000 + rate_bps - 1) // rate_bps


@njit(cache=True, _nrt=False)
def _heap_push(W, t, kind, a, b):
    """Schedule an event. Heap rows are (key, value): key = time << 20 | insertion counter (FIFO among
    equal times, deterministic), value = kind | b << 4 | a << 24."""
    H = W.H
    G = W.G
    n = G[G_HN]
    if n >= H.shape[0]:
        G[G_OVERFLOW] |= 1
        return False
    key = (t << HEAP_SHIFT) | (G[G_SEQNO] & HEAP_SEQ_MASK)
    val = kind | (b << 4) | (a << 24)
    G[G_SEQNO] += 1
    i = n
    while i > 0:
        p = (i - 1) >> 1
        if H[p, 0] <= key:
            break
        H[i, 0] = H[p, 0]
        H[i, 1] = H[p, 1]
        i = p
    H[i, 0] = key
    H[i, 1] = val
    G[G_HN] = n + 1
    return True


@njit(cache=True, _nrt=False)
def _heap_pop(W):
    """Remove the earliest event; returns (time, kind, a, b)."""
    H = W.H
    G = W.G
    k0 = H[0, 0]
    v0 = H[0, 1]
    n = G[G_HN] - 1
    G[G_HN] = n
    if n > 0:
        lk = H[n, 0]
        lv = H[n, 1]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            ck = H[c, 0]
            if c + 1 < n and H[c + 1, 0] < ck:
                c += 1
                ck = H[c, 0]
            if lk <= ck:
                break
            H[i, 0] = ck
            H[i, 1] = H[c, 1]
            i = c
        H[i, 0] = lk
        H[i, 1] = lv
    return k0 >> HEAP_SHIFT, v0 & 15, v0 >> 24, (v0 >> 4) & 0xFFFFF


@njit(cache=True, _nrt=False)
def _pop_free(G, top, stack, overflow_bit):
    """An index from the free list ``stack`` holding ``G[top]`` entries; -1 (and an overflow flag) when empty."""
    if G[top] == 0:
        G[G_OVERFLOW] |= overflow_bit
        return -1
    G[top] -= 1
    return stack[G[top]]


@njit(cache=True, _nrt=False)
def _push_free(G, top, stack, idx):
    stack[G[top]] = idx
    G[top] += 1


@njit(cache=True, _nrt=False)
def _pk_alloc(W):
    return _pop_free(W.G, G_FTOP, W.FREE, 2)


@njit(cache=True, _nrt=False)
def _pk_free(W, pid):
    _push_free(W.G, G_FTOP, W.FREE, pid)


@njit(cache=True, _nrt=False)
def _ak_alloc(W):
    return _pop_free(W.G, G_ATOP, W.AFREE, 4)


@njit(cache=True, _nrt=False)
def _rec_row(W, point, t):
    """Index of a new recorded row at ``point``, or -1 when that point's limit is reached."""
    P = W.P
    G = W.G
    if G[G_RECN + point] >= P[P_REC_LIMIT]:
        return -1
    G[G_RECN + point] += 1
    r = G[G_RECTOT]
    G[G_RECTOT] = r + 1
    R = W.REC
    for k in range(R_COLS):
        R[r, k] = 0
    R[r, R_TIME] = t
    R[r, R_POINT] = point
    return r


@njit(cache=True, _nrt=False)
def _rec_pkt(W, point, t, pid, drop, gso_size, gso_segs, gro_reason):
    r = _rec_row(W, point, t)
    if r < 0:
        return
    R = W.REC
    PK = W.PK
    R[r, R_FLOW] = PK[pid, PK_FLOW]
    R[r, R_SEQ] = PK[pid, PK_SEQ]
    R[r, R_LEN] = PK[pid, PK_LEN]
    R[r, R_FLAGS] = PK[pid, PK_FLAGS]
    R[r, R_IPID] = PK[pid, PK_IPID]
    R[r, R_TSVAL] = PK[pid, PK_TS]
    R[r, R_IPLEN] = PK[pid, PK_IPLEN]
    R[r, R_RETX] = PK[pid, PK_RETX]
    R[r, R_DROP] = drop
    R[r, R_GSO_SIZE] = gso_size
    R[r, R_GSO_SEGS] = gso_segs
    R[r, R_GRO] = gro_reason
    R[r, R_ACK] = 0


@njit(cache=True, _nrt=False)
def _rec_ack(W, point, t, aid):
    r = _rec_row(W, point, t)
    if r < 0:
        return
    R = W.REC
    AK = W.AK
    f = AK[aid, AK_FLOW]
    R[r, R_DIR] = 1
    R[r, R_FLOW] = f
    R[r, R_ACK] = AK[aid, AK_ACK]
    R[r, R_FLAGS] = ACK
    R[r, R_TSVAL] = t
    R[r, R_TSECR] = AK[aid, AK_TSECR]
    n = AK[aid, AK_N]
    R[r, R_SACKN] = n
    for k in range(2 * n):
        R[r, R_SACK0 + k] = AK[aid, AK_S0 + k]
    thl = 20 + (12 if W.P[P_TS] else 0) + (4 + 8 * n if n > 0 else 0)
    R[r, R_IPLEN] = 20 + thl


# -- units (the sender's scoreboard ring) -----------------------------------

@njit(cache=True, _nrt=False)
def _in_flight(F, f):
    return (F[f, F_NXT_U] - F[f, F_UNA_U]) - F[f, F_SACKED] - F[f, F_LOST] + F[f, F_RETRANS]


@njit(cache=True, _nrt=False)
def _split_unit(W, f, u, at):
    """tcp_fragment after PMTU discovery: unit u becomes [start, at) and [at, end); O(window), rare."""
    F = W.F
    P = W.P
    m = P[P_UCAP] - 1
    nxt = F[f, F_NXT_U]
    if nxt + 1 - F[f, F_UNA_U] >= P[P_UCAP]:
        return False
    for v in range(nxt, u + 1, -1):
        for k in range(5):
            W.U[f, v & m, k] = W.U[f, (v - 1) & m, k]
        if W.U[f, v & m, 4] > u:
            W.U[f, v & m, 4] += 1
    fl = W.U[f, u & m, 2]
    W.U[f, (u + 1) & m, 0] = at
    W.U[f, (u + 1) & m, 1] = W.U[f, u & m, 1]
    W.U[f, (u + 1) & m, 2] = fl & ~UF_HEAD
    W.U[f, (u + 1) & m, 3] = W.U[f, u & m, 3]
    W.U[f, (u + 1) & m, 4] = u + 2
    W.U[f, u & m, 1] = at
    F[f, F_NXT_U] = nxt + 1
    if fl & UF_SACKED:
        F[f, F_SACKED] += 1
    if fl & UF_LOST:
        F[f, F_LOST] += 1
    if fl & UF_RETRANS:
        F[f, F_RETRANS] += 1
    for col in (F_HIGH_SACK_U, F_HIGH_LOST_U, F_MARK_PTR, F_RACK_PTR, F_RTX_HINT, F_RACK_U):
        if F[f, col] > u:
            F[f, col] += 1
    return True


@njit(cache=True, _nrt=False)
def _find_unit(W, f, seq):
    """First unit index whose end is > seq (units between una_u and nxt_u; binary search)."""
    F = W.F
    lo = F[f, F_UNA_U]
    hi = F[f, F_NXT_U]
    m = W.P[P_UCAP] - 1
    while lo < hi:
        mid = (lo + hi) >> 1
        if W.U[f, mid & m, 1] <= seq:
            lo = mid + 1
        else:
            hi = mid
    return lo


# -- congestion control ------------------------------------------------------

@njit(cache=True, _nrt=False)
def _cc_ssthresh(W, f):
    """ssthresh after a loss; CUBIC also records W_max (fast convergence)."""
    F = W.F
    FF = W.FF
    cwnd = F[f, F_CWND]
    if W.P[P_CC] == CC_CUBIC:
        if cwnd < FF[f, FF_WMAX]:
            FF[f, FF_WMAX] = cwnd * (1.0 + 0.7) / 2.0
        else:
            FF[f, FF_WMAX] = cwnd
        FF[f, FF_EPOCH] = 0.0
        return max(np.int64(cwnd * 717 // 1024), 2)
    return max(cwnd // 2, 2)


@njit(cache=True, _nrt=False)
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


@njit(cache=True, _nrt=False)
def _cong_avoid(W, f, acked, now):
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
    if W.P[P_CC] == CC_NEWRENO:
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


# -- timers ------------------------------------------------------------------

@njit(cache=True, _nrt=False)
def _arm(W, f, kind, at):
    F = W.F
    F[f, F_TKIND] = kind
    F[f, F_TAT] = at
    if F[f, F_TEVT] < 0 or at < F[f, F_TEVT]:
        if _heap_push(W, at, EV_TIMER, f, 0):
            F[f, F_TEVT] = at


@njit(cache=True, _nrt=False)
def _rto_eff(W, f):
    F = W.F
    r = F[f, F_RTO]
    for _ in range(F[f, F_BACKOFF]):
        r *= 2
        if r >= W.P[P_MAX_RTO]:
            return W.P[P_MAX_RTO]
    return min(r, W.P[P_MAX_RTO])


@njit(cache=True, _nrt=False)
def _set_timer(W, f, now):
    """tcp_set_xmit_timer: a loss probe in Open state, else the RTO; none when nothing is out."""
    F = W.F
    P = W.P
    out = F[f, F_NXT_U] - F[f, F_UNA_U]
    if out <= 0:
        F[f, F_TKIND] = TK_NONE
        return
    rto = _rto_eff(W, f)
    if P[P_TLP] and F[f, F_STATE] == ST_OPEN and F[f, F_TLP_HIGH] < 0 and P[P_SACK]:
        pto = max(2 * F[f, F_SRTT], 10_000_000)
        if out == 1:
            pto = max(pto, 3 * F[f, F_SRTT] // 2 + P[P_MIN_RTO])
        if pto < rto:
            _arm(W, f, TK_TLP, now + pto)
            return
    _arm(W, f, TK_RTO, now + rto)


# -- the sender ---------------------------------------------------------------

@njit(cache=True, _nrt=False)
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


@njit(cache=True, _nrt=False)
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
    # the super-packet as TCP built it (sender capture point)
    pid = _pk_alloc(W)
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
        _rec_pkt(W, 0, now, pid, drop, gso_size, segs, 0)
        W.G[G_NIC_DROP_PKTS] += 1
        W.G[G_NIC_DROP_BYTES] += length
        W.DROPS[drop, 0] += 1
        W.DROPS[drop, 1] += length
        _pk_free(W, pid)
        return True
    _rec_pkt(W, 0, now, pid, 0, gso_size, segs if segs > 1 else 0, 0)
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
        q = pid if k == 0 else _pk_alloc(W)
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
        done = start + ser_ns(20 + thl + pay + 14, P[P_NIC_RATE])
        start = done
        _rec_pkt(W, 1, done, q, 0, 0, 0, 0)
        W.G[G_WIRE_PKTS] += 1
        W.G[G_WIRE_BYTES] += pay
        _heap_push(W, done, EV_HOP, q, 0)
    W.G[G_NIC_BUSY] = start
    return True


@njit(cache=True, _nrt=False)
def _tcp_sync_mss(W, f):
    """tcp_sync_mss: the MSS of the path MTU, and with probing on at most that of search_low."""
    F = W.F
    hdr = 20 + W.P[P_THL]
    if F[f, F_SEARCH_HI] > F[f, F_PMSS] + hdr:
        F[f, F_SEARCH_HI] = F[f, F_PMSS] + hdr
    mss = F[f, F_PMSS]
    if F[f, F_MTUP_ON]:
        mss = min(mss, F[f, F_SEARCH_LO] - hdr)
    F[f, F_MSS] = max(mss, TCP_MIN_SND_MSS_)


@njit(cache=True, _nrt=False)
def _tcp_mtu_probing(W, f):
    """tcp_mtu_probing (black-hole detection, from tcp_write_timeout): turn probing on, or once on,
    halve search_low (at most tcp_base_mss, at least the probe floor), then tcp_sync_mss."""
    F = W.F
    hdr = 20 + W.P[P_THL]
    if not F[f, F_MTUP_ON]:
        F[f, F_MTUP_ON] = 1
    else:
        mss = (F[f, F_SEARCH_LO] - hdr) >> 1
        mss = max(min(W.P[P_BASE_MSS], mss), TCP_MIN_SND_MSS_)
        F[f, F_SEARCH_LO] = mss + hdr
    _tcp_sync_mss(W, f)


@njit(cache=True, _nrt=False)
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
    infl = _in_flight(F, f)
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


@njit(cache=True, _nrt=False)
def _tcp_mtup_probe_success(W, f):
    """tcp_mtup_probe_success: the probe was acked: cwnd rescaled to the bigger packets, search_low up."""
    F = W.F
    hdr = 20 + W.P[P_THL]
    F[f, F_CWND] = max(F[f, F_CWND] * (F[f, F_MSS] + hdr) // F[f, F_PROBE_MTU], 1)
    F[f, F_CWND_CNT] = 0
    if F[f, F_STATE] == ST_OPEN and F[f, F_SSTHRESH] < INF:      # tcp_current_ssthresh
        F[f, F_SSTHRESH] = max(F[f, F_SSTHRESH], (F[f, F_CWND] >> 1) + (F[f, F_CWND] >> 2))
    F[f, F_SEARCH_LO] = F[f, F_PROBE_MTU]
    F[f, F_PROBE_MTU] = 0
    _tcp_sync_mss(W, f)


@njit(cache=True, _nrt=False)
def _tcp_simple_retransmit(W, f, now):
    """tcp_simple_retransmit: mark what no longer fits the MSS lost and resend it, cwnd untouched."""
    P = W.P
    F = W.F
    m = P[P_UCAP] - 1
    for u in range(F[f, F_UNA_U], F[f, F_NXT_U]):
        fl = W.U[f, u & m, 2]
        if (fl & (UF_SACKED | UF_LOST)) == 0 and W.U[f, u & m, 1] - W.U[f, u & m, 0] > F[f, F_MSS]:
            _mark_one(W, f, u)
    if F[f, F_LOST] > 0:
        if F[f, F_STATE] == ST_OPEN:
            F[f, F_STATE] = ST_LOSS                      # no cwnd reduction
            F[f, F_HIGH_SEQ] = F[f, F_SND_NXT]
        _send(W, f, now)
        _set_timer(W, f, now)


@njit(cache=True, _nrt=False)
def _send(W, f, now):
    """tcp_xmit_retransmit_queue, then tcp_write_xmit. Returns the number of new-data packets sent."""
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
            room = F[f, F_CWND] - _in_flight(F, f)
            if room <= 0:
                break
            s0 = max(W.U[f, u & m, 0], F[f, F_SND_UNA])
            if W.U[f, u & m, 1] - s0 > mss:                  # bigger than the MSS since PMTU discovery
                if not _split_unit(W, f, u, s0 + mss):
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
                _arm(W, f, TK_RTO, now + _rto_eff(W, f))     # the head went out again: restart the RTO
            u += k
        F[f, F_RTX_HINT] = u
    # 2) new data, after an MTU probe when one is due
    total = F[f, F_TOTAL]
    probed = _tcp_mtu_probe(W, f, now)
    if probed == 0:
        return sent
    sent += max(probed, 0)
    while total < 0 or F[f, F_SND_NXT] < total:
        infl = _in_flight(F, f)
        cwnd = F[f, F_CWND]
        if infl >= cwnd:
            break
        quota = min(max(cwnd // 2, 1), cwnd - infl)                     # tcp_cwnd_test
        segs = min(quota, tso)
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
    infl = _in_flight(F, f)
    if infl > F[f, F_MAXOUT]:
        F[f, F_MAXOUT] = infl
    return sent


@njit(cache=True, _nrt=False)
def _mark_one(W, f, u):
    """tcp_mark_skb_lost: unit u is lost; a lost retransmission loses its RETRANS mark."""
    F = W.F
    m = W.P[P_UCAP] - 1
    fl = W.U[f, u & m, 2]
    if fl & UF_RETRANS:
        F[f, F_RETRANS] -= 1
        fl &= ~UF_RETRANS
    if (fl & UF_LOST) == 0:
        F[f, F_LOST] += 1
    W.U[f, u & m, 2] = fl | UF_LOST
    if u < F[f, F_RTX_HINT]:
        F[f, F_RTX_HINT] = u
    if u + 1 > F[f, F_HIGH_LOST_U]:
        F[f, F_HIGH_LOST_U] = u + 1


@njit(cache=True, _nrt=False)
def _mark_lost(W, f, now):
    """Loss marking: 3 SACKed units above (RFC 6675), RACK's time rule, or 3 dupacks without SACK.

    Both SACK rules advance a per-flow pointer, so each unit is looked at a
    bounded number of times (a retransmission moves the RACK pointer back).
    """
    P = W.P
    F = W.F
    m = P[P_UCAP] - 1
    una = F[f, F_UNA_U]
    nxt = F[f, F_NXT_U]
    if una >= nxt:
        return
    if P[P_SACK] == 0:
        if F[f, F_DUPACKS] >= 3:
            fl = W.U[f, una & m, 2]
            if (fl & (UF_LOST | UF_SACKED | UF_RETRANS)) == 0:
                _mark_one(W, f, una)
        return
    if F[f, F_SACKED] == 0:
        return
    # RFC 6675 IsLost: below the third-highest SACKed unit; FACK (Linux <= 4.14, tcp_fack=1):
    # fackets_out - reordering (3) head units, i.e. below the highest SACKed unit minus 2
    lo = max(F[f, F_MARK_PTR], una)
    l3 = np.int64(-1)
    if P[P_FACK]:
        l3 = min(F[f, F_HIGH_SACK_U], nxt) - 3
    else:
        u = min(F[f, F_HIGH_SACK_U], nxt) - 1
        cnt = 0
        while u >= lo:
            if W.U[f, u & m, 2] & UF_SACKED:
                cnt += 1
                if cnt == 3:
                    l3 = u
                    break
            u -= 1
    if l3 > lo:
        for v in range(lo, l3):
            if (W.U[f, v & m, 2] & (UF_SACKED | UF_LOST | UF_RETRANS)) == 0:
                _mark_one(W, f, v)
        F[f, F_MARK_PTR] = l3
    if P[P_RACK_TIME] == 0:
        _rack_mark_lost_4x(W, f)
        return
    # RACK: sent before the most recently sent delivered unit, and unacknowledged for rack_rtt + reo_wnd
    if F[f, F_RACK_U] >= 0:
        reo = F[f, F_MIN_RTT] // 4
        rx = F[f, F_RACK_X]
        ru = F[f, F_RACK_U]
        wait = np.int64(-1)
        u = max(F[f, F_RACK_PTR], una)
        while u < nxt:
            x = W.U[f, u & m, 3]
            if not (x < rx or (x == rx and u < ru)):
                break
            fl = W.U[f, u & m, 2]
            if (fl & UF_SACKED) == 0 and ((fl & UF_LOST) == 0 or (fl & UF_RETRANS) != 0):
                remaining = x + F[f, F_RACK_RTT] + reo - now
                if remaining > 0:
                    wait = remaining                      # tcp_rack_reo_timeout later
                    break
                _mark_one(W, f, u)
            u += 1
        F[f, F_RACK_PTR] = u
        if wait > 0 and P[P_REO_TIMER]:
            at = now + wait
            if F[f, F_REO_EVT] < 0 or at < F[f, F_REO_EVT]:
                if _heap_push(W, at, EV_REO, f, 0):
                    F[f, F_REO_EVT] = at


@njit(cache=True, _nrt=False)
def _rack_mark_lost_4x(W, f):
    """Linux 4.4-4.9 tcp_rack_mark_lost: only in Recovery/Loss and after RACK advanced; a unit is
    lost when a delivered unit was sent more than reo_wnd (1 ms) after it, whatever the time now.
    Scans from snd_una as the kernel does; stops at the first never-retransmitted unit sent at or
    after the RACK time (original data goes out in order)."""
    F = W.F
    m = W.P[P_UCAP] - 1
    if F[f, F_STATE] == ST_OPEN or F[f, F_RACK_ADV] == 0:
        return
    F[f, F_RACK_ADV] = 0
    rx = F[f, F_RACK_X]
    for u in range(F[f, F_UNA_U], F[f, F_NXT_U]):
        x = W.U[f, u & m, 3]
        fl = W.U[f, u & m, 2]
        if fl & UF_SACKED:
            continue
        if x < rx:
            if rx - x <= RACK_REO_WND_4X_NS:
                continue
            if (fl & UF_LOST) == 0 or (fl & UF_RETRANS) != 0:
                _mark_one(W, f, u)                         # a lost retransmission loses its RETRANS mark
        elif (fl & UF_EVER) == 0:
            break


@njit(cache=True, _nrt=False)
def _rack_update(W, f, u, x, fl, now):
    """tcp_rack_advance: remember the most recently sent delivered unit (ambiguous retransmits skipped)."""
    F = W.F
    if (fl & UF_EVER) != 0 and now - x < F[f, F_MIN_RTT]:
        return
    if x > F[f, F_RACK_X] or (x == F[f, F_RACK_X] and u > F[f, F_RACK_U]):
        F[f, F_RACK_X] = x
        F[f, F_RACK_U] = u
        F[f, F_RACK_RTT] = now - x
        F[f, F_RACK_ADV] = 1


@njit(cache=True, _nrt=False)
def _skip_sacked(W, f, u, limit):
    """First unit >= u that is not SACKed (or limit), with path compression over SACKed runs."""
    m = W.P[P_UCAP] - 1
    r = u
    while r < limit and (W.U[f, r & m, 2] & UF_SACKED) != 0:
        r = W.U[f, r & m, 4]
    v = u
    while v < r and (W.U[f, v & m, 2] & UF_SACKED) != 0:
        nx = W.U[f, v & m, 4]
        W.U[f, v & m, 4] = r
        v = nx
    return r


@njit(cache=True, _nrt=False)
def _hystart(W, f, rtt):
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


@njit(cache=True, _nrt=False)
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


@njit(cache=True, _nrt=False)
def _recovery_state(W, f, prior_infl):
    """Leave recovery/loss once high_seq is acked; enter fast recovery when units are lost."""
    F = W.F
    state = F[f, F_STATE]
    if state != ST_OPEN and F[f, F_SND_UNA] >= F[f, F_HIGH_SEQ]:
        if state == ST_RECOVERY and F[f, F_SSTHRESH] < INF:
            F[f, F_CWND] = max(F[f, F_SSTHRESH], 1)                    # tcp_end_cwnd_reduction
        F[f, F_STATE] = ST_OPEN
        state = ST_OPEN
    if (state == ST_OPEN and F[f, F_LOST] > 0 and F[f, F_PROBE_MTU] > 0
            and F[f, F_SND_UNA] == F[f, F_PROBE_S]):
        # MTU probe failure (tcp_fastretrans_alert): tcp_mtup_probe_failed, the cwnd back, and
        # tcp_simple_retransmit instead of a recovery
        F[f, F_SEARCH_HI] = F[f, F_PROBE_MTU] - 1
        F[f, F_PROBE_MTU] = 0
        F[f, F_CWND] += 1
        m = W.P[P_UCAP] - 1
        for u in range(F[f, F_UNA_U], F[f, F_NXT_U]):
            fl = W.U[f, u & m, 2]
            if (fl & (UF_SACKED | UF_LOST)) == 0 and W.U[f, u & m, 1] - W.U[f, u & m, 0] > F[f, F_MSS]:
                _mark_one(W, f, u)
        F[f, F_STATE] = ST_LOSS
        F[f, F_HIGH_SEQ] = F[f, F_SND_NXT]
        return ST_LOSS
    if state == ST_OPEN and F[f, F_LOST] > 0:
        F[f, F_STATE] = ST_RECOVERY                                    # tcp_enter_recovery (PRR)
        state = ST_RECOVERY
        F[f, F_HIGH_SEQ] = F[f, F_SND_NXT]
        F[f, F_SSTHRESH] = _cc_ssthresh(W, f)
        F[f, F_PRR_DELIV] = 0
        F[f, F_PRR_OUT] = 0
        F[f, F_RECOVER_FS] = max(F[f, F_CWND], 1)                        # tp->prior_cwnd
        F[f, F_TLP_HIGH] = -1
        W.G[G_RECOV] += 1
    return state


@njit(cache=True, _nrt=False)
def _prr(W, f, delivered, ss_ok):
    """tcp_cwnd_reduction: proportional rate reduction (RFC 6937), nothing when nothing was delivered.

    Above ssthresh: ssthresh * prr_delivered / prior_cwnd - prr_out. Below it, the slow-start
    reduction bound (one more than delivered) applies only when ``ss_ok`` (Linux 4.3-5.11: the ACK
    covered retransmitted data and no retransmission was found lost; >= 5.12: snd_una advanced and
    nothing was newly marked lost); otherwise the conservative bound, newly delivered units.
    """
    F = W.F
    if delivered <= 0:
        return
    F[f, F_PRR_DELIV] += delivered
    infl = _in_flight(F, f)
    ssth = F[f, F_SSTHRESH]
    if infl > ssth:
        sndcnt = (F[f, F_PRR_DELIV] * ssth + F[f, F_RECOVER_FS] - 1) // F[f, F_RECOVER_FS] - F[f, F_PRR_OUT]
    elif ss_ok:
        sndcnt = min(ssth - infl, max(F[f, F_PRR_DELIV] - F[f, F_PRR_OUT], delivered) + 1)
    else:
        sndcnt = min(ssth - infl, delivered)
    F[f, F_CWND] = infl + max(sndcnt, 1 if F[f, F_PRR_OUT] == 0 else 0)


@njit(cache=True, _nrt=False)
def _on_reo(W, f, now):
    """tcp_rack_reo_timeout: mark what has now waited long enough, recover, retransmit."""
    F = W.F
    prior = _in_flight(F, f)
    was = F[f, F_STATE]
    _mark_lost(W, f, now)
    if _in_flight(F, f) != prior:
        if _recovery_state(W, f, prior) == ST_RECOVERY and was != ST_RECOVERY:
            _prr(W, f, 1, False)                          # tcp_enter_recovery + tcp_cwnd_reduction(sk, 1, 0)
        _send(W, f, now)
    if F[f, F_TKIND] != TK_RTO:
        _set_timer(W, f, now)


@njit(cache=True, _nrt=False)
def _on_ack(W, f, aid, now):
    """tcp_ack: cumulative ACK, SACK tagging, RTT, loss marking, recovery and cwnd."""
    P = W.P
    F = W.F
    AK = W.AK
    m = P[P_UCAP] - 1
    ack = AK[aid, AK_ACK]
    prior_infl = _in_flight(F, f)
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
                _rack_update(W, f, u, W.U[f, u & m, 3], fl, now)
            F[f, F_UNA_U] = u + 1
        F[f, F_SND_UNA] = ack
        F[f, F_DUPACKS] = 0
        F[f, F_RTO_STREAK] = 0
        if F[f, F_TLP_HIGH] >= 0 and ack >= F[f, F_TLP_HIGH]:
            F[f, F_TLP_HIGH] = -1
        if F[f, F_UNA_U] < F[f, F_NXT_U]:
            # the head unit may now be partly acked: its first byte moves up (tcp_trim_head)
            W.U[f, F[f, F_UNA_U] & m, 2] |= UF_HEAD
        if F[f, F_PROBE_MTU] > 0 and ack >= F[f, F_PROBE_E]:
            _tcp_mtup_probe_success(W, f)                # tcp_clean_rtx_queue
    # SACK blocks
    n = AK[aid, AK_N]
    for b in range(n):
        left = AK[aid, AK_S0 + 2 * b]
        right = AK[aid, AK_S0 + 2 * b + 1]
        if right <= F[f, F_SND_UNA]:
            continue
        u = _find_unit(W, f, max(left, F[f, F_SND_UNA]))
        nxt = F[f, F_NXT_U]
        while u < nxt:
            u = _skip_sacked(W, f, u, nxt)
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
                _rack_update(W, f, u, x, fl, now)
            u += 1
    if not advanced and newly_sacked == 0 and F[f, F_NXT_U] > F[f, F_UNA_U]:
        F[f, F_DUPACKS] += 1
    # RTT: Karn sample from never-retransmitted units, else the timestamp echo
    if rtt < 0 and advanced and P[P_TS] and AK[aid, AK_TSECR] > 0:
        rtt = now - AK[aid, AK_TSECR]
    if rtt >= 0:
        _rtt_sample(W, f, rtt)
        if P[P_CC] == CC_CUBIC:
            _hystart(W, f, rtt)
    delivered = acked_units + newly_sacked
    # loss detection
    if P[P_SACK] == 0 and F[f, F_STATE] == ST_RECOVERY and advanced and ack < F[f, F_HIGH_SEQ]:
        F[f, F_DUPACKS] = 3                                            # NewReno partial ACK: next hole
    prior_retrans = F[f, F_RETRANS]
    prior_lost = F[f, F_LOST]
    _mark_lost(W, f, now)
    state = _recovery_state(W, f, prior_infl)
    if state == ST_RECOVERY:
        if P[P_PRR_UNA]:
            ss_ok = advanced and F[f, F_LOST] == prior_lost                 # Linux >= 5.12
        else:
            ss_ok = retrans_acked and F[f, F_RETRANS] == prior_retrans      # 4.3-5.11: no FLAG_LOST_RETRANS
        _prr(W, f, delivered, ss_ok)
    else:
        _cong_avoid(W, f, delivered, now)
    if F[f, F_SND_UNA] >= F[f, F_MAXOUT_SEQ]:
        F[f, F_MAXOUT_SEQ] = F[f, F_SND_NXT] + 1
        F[f, F_MAXOUT] = _in_flight(F, f)
    F[f, F_CWND] = max(min(F[f, F_CWND], 4 * P[P_UCAP]), 1)
    sent_new = _send(W, f, now)
    # tcp_set_xmit_timer on FLAG_ACKED; a loss probe after new data in Open state
    if advanced or F[f, F_TKIND] == TK_NONE or (sent_new > 0 and F[f, F_STATE] == ST_OPEN):
        _set_timer(W, f, now)
    if F[f, F_TOTAL] >= 0 and F[f, F_SND_UNA] >= F[f, F_TOTAL]:
        F[f, F_TKIND] = TK_NONE


@njit(cache=True, _nrt=False)
def _on_timer(W, f, now):
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
        W.G[G_TLPS] += 1
        total = F[f, F_TOTAL]
        wnd_end = F[f, F_SND_UNA] + P[P_RWND]
        nx = F[f, F_SND_NXT]
        left = (total - nx) if total >= 0 else INF
        if left > 0 and wnd_end - nx >= min(F[f, F_MSS], left) and nxt - una < P[P_UCAP] - 1:
            # new data, at most one MSS when the cwnd is full (push_one = 2)
            save = F[f, F_CWND]
            F[f, F_CWND] = max(F[f, F_CWND], _in_flight(F, f) + 1)
            _send(W, f, now)
            F[f, F_CWND] = save
        else:
            u = nxt - 1                                   # the last MSS again
            if W.U[f, u & m, 1] - max(W.U[f, u & m, 0], F[f, F_SND_UNA]) > F[f, F_MSS]:
                if _split_unit(W, f, u, W.U[f, u & m, 1] - F[f, F_MSS]):
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
        F[f, F_TLP_HIGH] = F[f, F_SND_NXT]
        _arm(W, f, TK_RTO, now + _rto_eff(W, f))
        return
    # RTO: tcp_write_timeout's black-hole detection, then tcp_enter_loss
    W.G[G_RTOS] += 1
    if F[f, F_RTO_STREAK] == 0:
        F[f, F_RTX_STAMP] = now                         # tp->retrans_stamp: the first retransmission
    elif P[P_MTU_PROBING] and now - F[f, F_RTX_STAMP] > MTUP_BLACKHOLE_NS:
        _tcp_mtu_probing(W, f)
    if F[f, F_STATE] != ST_LOSS or F[f, F_RTO_STREAK] == 0:
        F[f, F_SSTHRESH] = _cc_ssthresh(W, f)
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
    _send(W, f, now)
    _arm(W, f, TK_RTO, now + _rto_eff(W, f))


@njit(cache=True, _nrt=False)
def _on_icmp(W, f, mtu, now):
    """ICMP fragmentation needed: lower the MSS (PMTU discovery) and resend what no longer fits."""
    P = W.P
    F = W.F
    new = max(mtu - 20 - P[P_THL], 48)
    if new >= F[f, F_PMSS]:
        return
    F[f, F_PMSS] = new
    _tcp_sync_mss(W, f)
    _tcp_simple_retransmit(W, f, now)


# -- the receiver ---------------------------------------------------------------

@njit(cache=True, _nrt=False)
def _send_ack(W, f, now):
    P = W.P
    F = W.F
    aid = _ak_alloc(W)
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
    _rec_ack(W, last_point, now, aid)
    _heap_push(W, now + P[P_REV_DELAY], EV_ACK, aid, 0)


@njit(cache=True, _nrt=False)
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


@njit(cache=True, _nrt=False)
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


@njit(cache=True, _nrt=False)
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
        _send_ack(W, f, now)
    elif F[f, F_DACK_AT] < 0:
        at = now + P[P_DELACK_NS]
        F[f, F_DACK_AT] = at
        if F[f, F_DACK_EVT] < 0 or at < F[f, F_DACK_EVT]:
            if _heap_push(W, at, EV_DELACK, f, 0):
                F[f, F_DACK_EVT] = at


@njit(cache=True, _nrt=False)
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
    r = _rec_row(W, W.P[P_NPOINTS] - 1, now)
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


@njit(cache=True, _nrt=False)
def _gro_receive(W, pid, now):
    """One arriving packet through the GRO model (merge, hold or deliver)."""
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
        F[f, F_H_CNT] = 1
        F[f, F_H_SEQ] = s
        F[f, F_H_END] = s + ln
        F[f, F_H_FIRST] = ln
        F[f, F_H_FLAGS] = fl
        F[f, F_H_IPID] = ipid
        F[f, F_H_TS] = ts
        _gro_deliver(W, f, GRO_OFF, now)
        return
    cnt = F[f, F_H_CNT]
    if cnt > 0:
        reason = 0
        if s != F[f, F_H_END]:
            reason = GRO_SEQ_GAP
        elif ln > F[f, F_H_FIRST] or 20 + P[P_THL] + F[f, F_H_END] - F[f, F_H_SEQ] + ln >= P[P_GRO_MAX]:
            reason = GRO_SIZE
        elif mode == GRO_MODE_GRO and ts // 1_000_000 != F[f, F_H_TS] // 1_000_000:
            reason = GRO_OPTIONS_DIFFER
        elif mode == GRO_MODE_GRO and ipid != ((F[f, F_H_IPID] + cnt) & 0xFFFF):
            reason = GRO_IP_RULE
        if reason == 0:
            F[f, F_H_END] = s + ln
            F[f, F_H_CNT] = cnt + 1
            F[f, F_H_FLAGS] |= fl & PSH
            if fl & PSH:
                _gro_deliver(W, f, GRO_FLAGS, now)
            elif ln < F[f, F_H_FIRST]:
                _gro_deliver(W, f, GRO_SIZE, now)
            return
        _gro_deliver(W, f, reason, now)
    F[f, F_H_CNT] = 1
    F[f, F_H_SEQ] = s
    F[f, F_H_END] = s + ln
    F[f, F_H_FIRST] = ln
    F[f, F_H_FLAGS] = fl
    F[f, F_H_IPID] = ipid
    F[f, F_H_TS] = ts
    F[f, F_H_AGE] = now
    if fl & PSH:
        _gro_deliver(W, f, GRO_FLAGS, now)


@njit(cache=True, _nrt=False)
def _poll(W, now):
    """A NAPI poll: up to budget packets through GRO, then flush every held aggregate."""
    P = W.P
    G = W.G
    cap = P[P_RXCAP]
    k = 0
    while k < P[P_BUDGET] and G[G_RXH] < G[G_RXT]:
        pid = W.RXQ[G[G_RXH] % cap]
        G[G_RXH] += 1
        _rec_pkt(W, P[P_NPOINTS], now, pid, 0, 0, 0, 0)              # the hidden "rx" point: GRO input
        _gro_receive(W, pid, now)
        _pk_free(W, pid)
        k += 1
    if k >= P[P_BUDGET] and G[G_RXH] < G[G_RXT]:
        # budget used up (__napi_poll, HZ 1000): only aggregates held since an earlier jiffy
        jiffy = now // 1_000_000
        for f in range(P[P_FLOWS]):
            if W.F[f, F_H_CNT] > 0 and W.F[f, F_H_AGE] // 1_000_000 < jiffy:
                _gro_deliver(W, f, GRO_END_OF_POLL, now)
    else:
        for f in range(P[P_FLOWS]):
            _gro_deliver(W, f, GRO_END_OF_POLL, now)
    if G[G_RXH] < G[G_RXT]:
        _heap_push(W, now, EV_POLL, 0, 0)
    else:
        G[G_NAPI] = 0


# -- hops ------------------------------------------------------------------------

@njit(cache=True, _nrt=False)
def _hop_arrive(W, pid, h, now):
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
            _pk_free(W, pid)
            return
        W.RXQ[G[G_RXT] % cap] = pid
        G[G_RXT] += 1
        if G[G_NAPI] == 0:
            G[G_NAPI] = 1
            _heap_push(W, now + P[P_NAPI_DELAY], EV_POLL, 0, 0)
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
        if ((HP[h, HP_QPKTS] > 0 and HQS[h, HQ_N] >= HP[h, HP_QPKTS])
                or (HP[h, HP_QBYTES] > 0 and HQS[h, HQ_BYTES] + wire > HP[h, HP_QBYTES])
                or HQS[h, HQ_N] >= qc):
            drop = DROP_QUEUE_FULL
    if drop != DROP_NONE:
        _rec_pkt(W, 2 + h, now, pid, drop, 0, 0, 0)
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
            _heap_push(W, now + back, EV_ICMP, PK[pid, PK_FLOW], mtu_ip)
        _pk_free(W, pid)
        return
    start = max(now, HQS[h, HQ_BUSY])
    done = start + ser_ns(wire, HP[h, HP_RATE])
    HQS[h, HQ_BUSY] = done
    tail = (HQS[h, HQ_HEAD] + HQS[h, HQ_N]) % qc
    W.HQ[h, tail, 0] = done
    W.HQ[h, tail, 1] = wire
    HQS[h, HQ_N] += 1
    HQS[h, HQ_BYTES] += wire
    if W.HL[h] > 0.0 and _rand(W.G) < W.HL[h]:
        _rec_pkt(W, 2 + h, done, pid, DROP_RANDOM_LOSS, 0, 0, 0)
        HST[h, HS_DROP_PKTS] += 1
        HST[h, HS_DROP_BYTES] += ln
        W.DROPS[DROP_RANDOM_LOSS, 0] += 1
        W.DROPS[DROP_RANDOM_LOSS, 1] += ln
        _pk_free(W, pid)
        return
    t_out = done + HP[h, HP_DELAY]
    _rec_pkt(W, 2 + h, t_out, pid, 0, 0, 0, 0)
    _heap_push(W, t_out, EV_HOP, pid, h + 1)


# -- sampling ------------------------------------------------------------------

@njit(cache=True, _nrt=False)
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

@njit(cache=True, _nrt=False)
def _init(W):
    P = W.P
    F = W.F
    G = W.G
    for i in range(W.FREE.shape[0]):
        W.FREE[i] = i
    G[G_FTOP] = W.FREE.shape[0]
    for i in range(W.AFREE.shape[0]):
        W.AFREE[i] = i
    G[G_ATOP] = W.AFREE.shape[0]
    G[G_SMP_INT] = P[P_SAMPLE_NS]
    base_rtt = max(P[P_BASE_RTT], 1000)
    for f in range(P[P_FLOWS]):
        for k in range(F_LEN):
            F[f, k] = 0
        F[f, F_TOTAL] = P[P_TOTAL]
        F[f, F_MSS] = P[P_MSS]
        F[f, F_PMSS] = P[P_MSS]                       # tcp_mtup_init
        F[f, F_SEARCH_HI] = P[P_MSS] + 20 + P[P_THL]
        F[f, F_SEARCH_LO] = P[P_BASE_MSS] + 20 + P[P_THL]
        F[f, F_MTUP_ON] = P[P_MTU_PROBING] > 1
        _tcp_sync_mss(W, f)
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
        W.FF[f, FF_WMAX] = 0.0
        W.FF[f, FF_EPOCH] = 0.0
        _heap_push(W, 0, EV_START, f, 0)
    if P[P_SAMPLE_NS] > 0:
        _heap_push(W, 0, EV_SAMPLE, 0, 0)


@njit(cache=True, _nrt=False)
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
        t, kind, a, b = _heap_pop(W)
        G[G_EVENTS] += 1
        G[G_NOW] = t
        if kind == EV_HOP:
            _hop_arrive(W, a, b, t)
        elif kind == EV_ACK:
            f = W.AK[a, AK_FLOW]
            _on_ack(W, f, a, t)
            _rec_ack(W, 0, t, a)
            _push_free(G, G_ATOP, W.AFREE, a)
        elif kind == EV_POLL:
            _poll(W, t)
        elif kind == EV_TIMER:
            f = a
            if F[f, F_TEVT] == t:
                F[f, F_TEVT] = -1
            else:
                continue                                   # superseded by an earlier one
            if F[f, F_TKIND] == TK_NONE:
                continue
            if F[f, F_TAT] > t:
                _arm(W, f, F[f, F_TKIND], F[f, F_TAT])   # pushed back meanwhile
                continue
            _on_timer(W, f, t)
        elif kind == EV_DELACK:
            f = a
            if F[f, F_DACK_EVT] == t:
                F[f, F_DACK_EVT] = -1
            else:
                continue
            if F[f, F_DACK_AT] < 0:
                continue
            if F[f, F_DACK_AT] > t:
                if _heap_push(W, F[f, F_DACK_AT], EV_DELACK, f, 0):
                    F[f, F_DACK_EVT] = F[f, F_DACK_AT]
                continue
            _send_ack(W, f, t)
        elif kind == EV_START:
            _send(W, a, t)
            _set_timer(W, a, t)
        elif kind == EV_ICMP:
            _on_icmp(W, a, b, t)
        elif kind == EV_REO:
            if F[a, F_REO_EVT] != t:
                continue
            F[a, F_REO_EVT] = -1
            _on_reo(W, a, t)
        elif kind == EV_SAMPLE:
            _sample(W, t)
            if G[G_DONE_FLOWS] < nflows or P[P_TOTAL] < 0:
                _heap_push(W, t + G[G_SMP_INT], EV_SAMPLE, 0, 0)
    if P[P_SAMPLE_NS] > 0:
        _sample(W, min(G[G_NOW], end))
    return G[G_EVENTS]


# -- building the arrays ----------------------------------------------------------

def _pow2(n: int) -> int:
    p = 1
    while p < n:
        p <<= 1
    return p


def seed_words(seed: int) -> np.ndarray:
    """Four non-zero 32-bit xorshift128 words from a seed (splitmix64)."""
    words = []
    x = int(seed) & (2**64 - 1)
    for _ in range(4):
        x = (x + 0x9E3779B97F4A7C15) & (2**64 - 1)
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & (2**64 - 1)
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & (2**64 - 1)
        z ^= z >> 31
        words.append((z & 0xFFFFFFFF) or 1)
    return np.array(words, dtype=np.int64)


def make_world(P: np.ndarray, HP: np.ndarray, HL: np.ndarray, NP: np.ndarray) -> World:
    """Allocate every array the loop needs, sized from the parameter vector."""
    nf = int(P[P_FLOWS])
    nh = int(P[P_NHOPS])
    npts = int(P[P_NPOINTS])
    ucap = int(P[P_UCAP])
    ocap = int(P[P_OCAP])
    pkcap = int(P[P_PKCAP])
    akcap = int(P[P_AKCAP])
    rec_rows = int(P[P_REC_LIMIT]) * (npts + 1)
    i64 = np.int64
    G = np.zeros(G_LEN + MAX_POINTS, i64)
    G[G_RNG:G_RNG + 4] = seed_words(int(P[P_SEED]))
    return World(
        P=P, HP=HP, HL=HL, NP=NP, G=G, H=np.zeros((int(P[P_HCAP]), 2), i64),
        PK=np.zeros((pkcap, PK_LEN_COLS), i64), FREE=np.zeros(pkcap, i64),
        AK=np.zeros((akcap, AK_LEN_COLS), i64), AFREE=np.zeros(akcap, i64),
        F=np.zeros((nf, F_LEN), i64), FF=np.zeros((nf, FF_LEN), np.float64),
        U=np.zeros((nf, ucap, 5), i64), O=np.zeros((nf * ocap, 3), i64),
        REC=np.empty((max(rec_rows, 1), R_COLS), i64), RXQ=np.zeros(int(P[P_RXCAP]), i64),
        HQ=np.zeros((nh, int(P[P_QCAP]), 2), i64), HS=np.zeros((nh, HS_COLS), i64),
        DROPS=np.zeros((N_DROP_CODES, 2), i64), SM=np.zeros((2 + 2 * nf, SMP_CAP + 1), i64),
    )


def sizes(flows: int, mss_min: int, rwnd: int, queue_pkts_total: int, qcap: int, budget: int) -> dict:
    """Pool and ring capacities that the loop cannot outgrow for these parameters."""
    units = rwnd // max(mss_min, 8) + 4 * 64
    ucap = _pow2(2 * units + 64)
    pk = flows * (4 * units + 512) + queue_pkts_total + 4096
    return dict(ucap=ucap, ocap=units + 16, pkcap=pk, akcap=flows * (units + 64) + 1024,
                hcap=pk + flows * (units + 256) + 4096, rxcap=pk, qcap=qcap)


def warmup() -> None:
    """Compile the loop with a tiny scenario (and load it from the cache afterwards)."""
    from ..sim.simulate import simulate
    from ..sim.scenario import Hop, Scenario
    simulate(Scenario(path=(Hop(rate_bps=10_000_000, delay_ns=1_000_000, loss=0.01),), bytes_per_flow=30_000,
                      trace_limit=50))
