"""The loop's recorded rows (``REC``, columns ``R_*``) as Trace columns, in one pass.

``rows_to_columns`` writes recorded row ``rows[j]`` into row ``dest[j]`` of the
Trace columns it is given: sequence numbers and timestamps from the per-flow
offsets (ISNs, TSval bases), the header fields the loop does not keep (addresses,
ports, window, option length), the capture point's framing and checksum state.
``offloadkit.sim.simulate`` allocates the Trace and calls it once per part.
"""
from __future__ import annotations

import numpy as np
from ...packet.jit import njit

from ...codes import CSUM_NONE, GSO_TCPV4
from .layout import (R_ACK, R_DIR, R_DROP, R_FLAGS, R_FLOW, R_GRO, R_GSOX, R_GSO_SEGS, R_GSO_SIZE, R_IPID, R_IPLEN, R_LEN,
                     R_POINT, R_SACK0, R_SACKN, R_SEQ, R_TIME, R_TSECR, R_TSVAL)

U32 = np.int64(0xFFFFFFFF)


@njit(cache=True, nogil=True, inline="always")
def data_timestamps_ms(tv, half_rtt_ns):
    """The TSval and TSecr clocks (ms, before the flows' bases) of a data packet sent at ``tv`` ns: the
    sender's clock, and the receiver's clock half a base RTT earlier (its last ACK's TSval)."""
    return tv // 1_000_000, max(tv - half_rtt_ns, 0) // 1_000_000


@njit(cache=True, nogil=True)
def rows_to_columns(R, rows, dest, isn_s, isn_r, ts_s, ts_r, half_rtt_ns, timestamps, rwin, point_l2, point_encap,
                    point_csum, sender_ip, receiver_ip, dport, data_window, time_ns, point, direction, flow, src_ip,
                    dst_ip, sport, dport_col, seq, ack, payload_len, flags, window, tcp_hlen, opt_ts, tsval, tsecr,
                    sack_n, sack, ip_id, ip_len, l2_bytes, encap, gso_size, gso_segs, gso_type, csum_state, drop,
                    gro_reason):
    """Recorded row ``rows[j]`` -> row ``dest[j]`` of the output columns (Trace dtypes)."""
    for j in range(len(rows)):
        r = rows[j]
        i = dest[j]
        f = R[r, R_FLOW]
        pt = R[r, R_POINT]
        data = R[r, R_DIR] == 0
        nb = R[r, R_SACKN]
        tv = R[r, R_TSVAL]
        time_ns[i] = R[r, R_TIME]
        point[i] = pt
        direction[i] = R[r, R_DIR]
        flow[i] = f
        if data:
            src_ip[i] = sender_ip
            dst_ip[i] = receiver_ip
            sport[i] = 40000 + f
            dport_col[i] = dport
            seq[i] = (isn_s[f] + 1 + R[r, R_SEQ]) & U32
            ack[i] = (isn_r[f] + 1) & U32
            window[i] = data_window
            tv_ms, te_ms = data_timestamps_ms(tv, half_rtt_ns)
            tsval[i] = (ts_s[f] + tv_ms) & U32
            tsecr[i] = (ts_r[f] + te_ms) & U32
            csum_state[i] = point_csum[pt]
        else:
            src_ip[i] = receiver_ip
            dst_ip[i] = sender_ip
            sport[i] = dport
            dport_col[i] = 40000 + f
            seq[i] = (isn_r[f] + 1) & U32
            ack[i] = (isn_s[f] + 1 + R[r, R_ACK]) & U32
            window[i] = rwin
            tsval[i] = (ts_r[f] + tv // 1_000_000) & U32
            tsecr[i] = (ts_s[f] + R[r, R_TSECR] // 1_000_000) & U32
            csum_state[i] = CSUM_NONE
        for k in range(sack.shape[1]):
            sack[i, k] = (isn_s[f] + 1 + R[r, R_SACK0 + k]) & U32 if nb > k // 2 else 0
        sack_n[i] = nb
        tcp_hlen[i] = 20 + (12 if timestamps else 0) + (4 + 8 * nb if nb > 0 else 0)
        opt_ts[i] = timestamps
        payload_len[i] = R[r, R_LEN]
        flags[i] = R[r, R_FLAGS]
        ip_id[i] = R[r, R_IPID] & 0xFFFF
        ip_len[i] = R[r, R_IPLEN]
        l2_bytes[i] = point_l2[pt]
        encap[i] = point_encap[pt]
        if R[r, R_GSO_SEGS] > 1:
            gso_size[i] = R[r, R_GSO_SIZE]
            gso_segs[i] = R[r, R_GSO_SEGS]
            gso_type[i] = GSO_TCPV4 | R[r, R_GSOX]
        else:
            gso_size[i] = 0
            gso_segs[i] = 0
            gso_type[i] = 0
        drop[i] = R[r, R_DROP]
        gro_reason[i] = R[r, R_GRO]


@njit(cache=True, nogil=True)
def record_order(R, npoints):
    """Recorded rows by capture point, then time, then recording order: a counting sort by point (rows
    are recorded nearly in time order), then a stable sort of the few points whose times go back."""
    n = len(R)
    start = np.zeros(npoints + 1, np.int64)
    for r in range(n):
        start[R[r, R_POINT] + 1] += 1
    for p in range(npoints):
        start[p + 1] += start[p]
    at = start[:npoints].copy()
    out = np.empty(n, np.int64)
    for r in range(n):
        p = R[r, R_POINT]
        out[at[p]] = r
        at[p] += 1
    for p in range(npoints):
        a, b = start[p], start[p + 1]
        for j in range(a + 1, b):
            if R[out[j], R_TIME] < R[out[j - 1], R_TIME]:
                seg = out[a:b].copy()
                t = np.empty(b - a, np.int64)
                for k in range(b - a):
                    t[k] = R[seg[k], R_TIME]
                o = np.argsort(t, kind="mergesort")
                for k in range(b - a):
                    out[a + k] = seg[o[k]]
                break
    return out


OUT_COLUMNS = ("time_ns", "point", "direction", "flow", "src_ip", "dst_ip", "sport", "dport", "seq", "ack",
               "payload_len", "flags", "window", "tcp_hlen", "opt_ts", "tsval", "tsecr", "sack_n", "sack", "ip_id",
               "ip_len", "l2_bytes", "encap", "gso_size", "gso_segs", "gso_type", "csum_state", "drop", "gro_reason")
