"""Loss detection and recovery (the ns-3 TcpRecoveryOps part), over the sender's unit ring.

The scoreboard is a ring of MSS units per flow (a unit counts as SACKed only
when fully covered, as ``tcp_match_skb_to_sack`` splits at MSS boundaries).
Loss marking: 3 SACKed units above (RFC 6675) or RACK (a unit sent before a
delivered one and unacknowledged for its RTT + min_rtt/4; with ``P_REO_TIMER``,
Linux >= 4.11, a timer fires when that time is up, else the next ACK finds
it), 3 dupacks without SACK; with ``P_RACK_TIME = 0`` (Linux 4.4-4.9) RACK only
runs in Recovery/Loss and needs a delivered unit sent > 1 ms later; with
``P_FACK`` (Linux <= 4.14) all but 3 units below the highest SACK are lost.
Fast recovery with PRR (prior_cwnd; slow-start bound per ``P_PRR_UNA``: 5.12+
una advanced, else 4.3-5.11 retransmit acked). Spec §3. The states the kit's
``ST_OPEN`` folds together (Open, Disorder: ``tcp_try_keep_open``), the end of a
loss-probe episode (``tcp_process_tlp_ack``) and ``tcp_may_raise_cwnd`` are here too.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from .congestion import cc_ssthresh
from .jiffies import inet_csk_rto_expiry, tcp_rack_reo_expiry
from .layout import (EV_REO, F_CWND, F_DUPACKS, F_HIGH_LOST_U, F_HIGH_SACK_U, F_HIGH_SEQ, F_LOST, F_MARK_PTR,
                     F_MIN_RTT, F_NXT_U, F_PRR_DELIV, F_PRR_OUT, F_RACK_ADV, F_RACK_PTR, F_RACK_RTT, F_RACK_U,
                     F_RACK_X, F_RECOVER_FS, F_REO_EVT, F_RETRANS, F_RTX_HINT, F_SACKED, F_SND_NXT, F_SND_UNA,
                     F_SSTHRESH, F_STATE, F_TLP_HIGH, F_UNA_U, G_RECOV, INF, P_FACK, P_LOSS_TIMERS, P_RACK_TIME, P_REO_TIMER,
                     P_SACK, P_UCAP, F_CWND_CNT, F_TLP_RETRANS, F_BACKOFF, F_RTO, F_TAT, F_TKIND, P_MAX_RTO, P_RTO_TIMER, TK_RTO, TK_TLP,
                     RACK_REO_WND_4X_NS, ST_OPEN, ST_RECOVERY, UF_EVER, UF_HEAD, UF_LOST, UF_RETRANS,
                     UF_SACKED, F_MSS, F_PROBE_MTU, F_PROBE_S, F_SEARCH_HI, ST_LOSS)
from .world import heap_push


# -- units (the sender's scoreboard ring) -----------------------------------

@njit(cache=True, nogil=True, _nrt=False)
def rto_at(W, f, now):
    """When the RTO armed now fires (tcp_reset_xmit_timer(ICSK_TIME_RETRANS, backed-off icsk_rto))."""
    return inet_csk_rto_expiry(W.P[P_RTO_TIMER], now, W.F[f, F_RTO], W.F[f, F_BACKOFF], W.P[P_MAX_RTO])


@njit(cache=True, nogil=True, _nrt=False)
def in_flight(F, f):
    return (F[f, F_NXT_U] - F[f, F_UNA_U]) - F[f, F_SACKED] - F[f, F_LOST] + F[f, F_RETRANS]


@njit(cache=True, nogil=True, _nrt=False)
def split_unit(W, f, u, at):
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


@njit(cache=True, nogil=True, _nrt=False)
def find_unit(W, f, seq):
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


@njit(cache=True, nogil=True, _nrt=False)
def mark_one(W, f, u):
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


@njit(cache=True, nogil=True, _nrt=False)
def mark_lost(W, f, now):
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
                mark_one(W, f, una)
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
                mark_one(W, f, v)
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
                mark_one(W, f, u)
            u += 1
        F[f, F_RACK_PTR] = u
        if wait > 0 and P[P_REO_TIMER]:
            at = tcp_rack_reo_expiry(P[P_LOSS_TIMERS], now, wait)
            if F[f, F_REO_EVT] < 0 or at < F[f, F_REO_EVT]:
                if heap_push(W, at, EV_REO, f, 0):
                    F[f, F_REO_EVT] = at
            if F[f, F_TKIND] == TK_TLP:
                # one retransmit timer (icsk_pending): arming ICSK_TIME_REO_TIMEOUT replaces the loss
                # probe; tcp_rack_reo_timeout then rearms the RTO
                F[f, F_TKIND] = TK_RTO
                F[f, F_TAT] = rto_at(W, f, now)


@njit(cache=True, nogil=True, _nrt=False)
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
                mark_one(W, f, u)                         # a lost retransmission loses its RETRANS mark
        elif (fl & UF_EVER) == 0:
            break


@njit(cache=True, nogil=True, _nrt=False)
def rack_update(W, f, u, x, fl, now):
    """tcp_rack_advance: remember the most recently sent delivered unit (ambiguous retransmits skipped)."""
    F = W.F
    if (fl & UF_EVER) != 0 and now - x < F[f, F_MIN_RTT]:
        return
    if x > F[f, F_RACK_X] or (x == F[f, F_RACK_X] and u > F[f, F_RACK_U]):
        F[f, F_RACK_X] = x
        F[f, F_RACK_U] = u
        F[f, F_RACK_RTT] = now - x
        F[f, F_RACK_ADV] = 1


@njit(cache=True, nogil=True, _nrt=False)
def skip_sacked(W, f, u, limit):
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


@njit(cache=True, nogil=True, _nrt=False)
def recovery_state(W, f, prior_infl):
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
                mark_one(W, f, u)
        F[f, F_STATE] = ST_LOSS
        F[f, F_HIGH_SEQ] = F[f, F_SND_NXT]
        return ST_LOSS
    if state == ST_OPEN and F[f, F_LOST] > 0:
        F[f, F_STATE] = ST_RECOVERY                                    # tcp_enter_recovery (PRR)
        state = ST_RECOVERY
        F[f, F_HIGH_SEQ] = F[f, F_SND_NXT]
        F[f, F_SSTHRESH] = cc_ssthresh(W, f)
        F[f, F_PRR_DELIV] = 0
        F[f, F_PRR_OUT] = 0
        F[f, F_RECOVER_FS] = max(F[f, F_CWND], 1)                        # tp->prior_cwnd
        F[f, F_TLP_HIGH] = -1
        W.G[G_RECOV] += 1
    return state


@njit(cache=True, nogil=True, _nrt=False)
def tcp_try_keep_open(W, f):
    """Whether the kernel's state is Open rather than Disorder (tcp_try_keep_open): no SACKed or
    lost segment (tcp_left_out) and no retransmission done (tcp_any_retrans_done: retrans_out, or
    the head skb was ever retransmitted). The kit's ST_OPEN holds both; loss probes need Open."""
    F = W.F
    if F[f, F_STATE] != ST_OPEN or F[f, F_SACKED] > 0 or F[f, F_LOST] > 0 or F[f, F_RETRANS] > 0:
        return False
    una = F[f, F_UNA_U]
    return una >= F[f, F_NXT_U] or (W.U[f, una & (W.P[P_UCAP] - 1), 2] & UF_EVER) == 0


@njit(cache=True, nogil=True, _nrt=False)
def tcp_may_raise_cwnd(data_acked):
    """tcp_may_raise_cwnd without reordering seen (tp->reordering at its default): the cwnd grows only
    on in-order delivery (RFC 5681), an ACK that advanced snd_una (FLAG_DATA_ACKED); SACK-only
    duplicate ACKs, as in Disorder behind a hole, raise nothing."""
    return data_acked


@njit(cache=True, nogil=True, _nrt=False)
def tcp_process_tlp_ack(W, f, ack, not_dup):
    """tcp_process_tlp_ack (5.9+, RFC 8985): the ACK that ends a loss-probe episode.

    An ACK below tlp_high_seq changes nothing. A probe of new data ends once acked. A probe that
    retransmitted old data ends with a cwnd reduction when the ACK passes tlp_high_seq (a loss was
    repaired: tcp_init_cwnd_reduction, CWR, tcp_end_cwnd_reduction, then Open again), or on a pure
    duplicate ACK (the original and the probe both arrived; the DSACK case); an ACK of exactly
    tlp_high_seq leaves the episode open, and no other probe goes out while it is.
    """
    F = W.F
    hi = F[f, F_TLP_HIGH]
    if hi < 0 or ack < hi:
        return
    if F[f, F_TLP_RETRANS] == 0:
        F[f, F_TLP_HIGH] = -1
    elif ack > hi:
        F[f, F_HIGH_SEQ] = F[f, F_SND_NXT]
        F[f, F_CWND_CNT] = 0
        F[f, F_SSTHRESH] = cc_ssthresh(W, f)
        F[f, F_CWND] = max(F[f, F_SSTHRESH], 1)
        F[f, F_TLP_HIGH] = -1
    elif not not_dup:
        F[f, F_TLP_HIGH] = -1


@njit(cache=True, nogil=True, _nrt=False)
def prr(W, f, delivered, ss_ok):
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
    infl = in_flight(F, f)
    ssth = F[f, F_SSTHRESH]
    if infl > ssth:
        sndcnt = (F[f, F_PRR_DELIV] * ssth + F[f, F_RECOVER_FS] - 1) // F[f, F_RECOVER_FS] - F[f, F_PRR_OUT]
    elif ss_ok:
        sndcnt = min(ssth - infl, max(F[f, F_PRR_DELIV] - F[f, F_PRR_OUT], delivered) + 1)
    else:
        sndcnt = min(ssth - infl, delivered)
    F[f, F_CWND] = infl + max(sndcnt, 1 if F[f, F_PRR_OUT] == 0 else 0)
