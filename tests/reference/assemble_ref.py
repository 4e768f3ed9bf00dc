"""The simulate() trace assembly as it was before the receiver trace was assembled in one pass
and before the loop recorded the receiver's aggregates itself (round 5): the batch GRO re-run.

Kept as the reference that ``offloadkit.sim.simulate.assemble`` must equal row for row
(``tests/sim/test_assemble.py``): the same rows through ``_rows_to_trace`` per part, the
batch GRO over the hidden "rx" point, ``Trace.concat`` and a stable time sort.
"""
from __future__ import annotations

import numpy as np

from offloadkit import codes
from offloadkit.engine import csum_math
from offloadkit.engine import tcp as K
from offloadkit.sim.scenario import Scenario
from offloadkit.engine.gro import GroParams, gro
from offloadkit.sim.scenario import Receiver
from offloadkit.sim.simulate import DATA_WINDOW, DPORT, RECEIVER_IP, SENDER_IP, Result, flow_constants, result_of
from offloadkit.trace import MAX_SACK_BLOCKS, Trace


def _u32(x) -> np.ndarray:
    return (np.asarray(x, dtype=np.int64) & 0xFFFFFFFF).astype(np.uint32)


def _rows_to_trace(sc: Scenario, C: np.ndarray, points: tuple[str, ...], isn_s, isn_r, ts_s, ts_r,
                   point_l2: np.ndarray, point_encap: np.ndarray, point_csum: np.ndarray) -> Trace:
    """Rows (recorded columns ``C[R_*]``, one recorded row per column of ``C``) as a Trace."""
    n = C.shape[1]
    flow = C[K.R_FLOW]
    d = C[K.R_DIR]
    data = d == 0
    pt = C[K.R_POINT]
    nb = C[K.R_SACKN]
    seq_off = C[K.R_SEQ]
    ack_off = C[K.R_ACK]
    seq = np.where(data, isn_s[flow] + 1 + seq_off, isn_r[flow] + 1)
    ack = np.where(data, isn_r[flow] + 1, isn_s[flow] + 1 + ack_off)
    tsval_ms = C[K.R_TSVAL] // 1_000_000
    tsval = np.where(data, ts_s[flow] + tsval_ms, ts_r[flow] + tsval_ms)
    half = sc.base_rtt_ns // 2
    tsecr = np.where(data, ts_r[flow] + np.maximum(C[K.R_TSVAL] - half, 0) // 1_000_000,
                     ts_s[flow] + C[K.R_TSECR] // 1_000_000)
    sack = np.zeros((n, 2 * MAX_SACK_BLOCKS), np.uint32)
    for k in range(2 * MAX_SACK_BLOCKS):
        v = C[K.R_SACK0 + k]
        sack[:, k] = np.where(nb > k // 2, _u32(isn_s[flow] + 1 + v), 0)
    opts = (12 if sc.tcp.timestamps else 0) + np.where(nb > 0, 4 + 8 * nb, 0)
    gso = C[K.R_GSO_SEGS] > 1
    rwin = min(sc.tcp.rwnd_bytes >> 7, 65535)
    return Trace.from_columns(
        points=points,
        time_ns=C[K.R_TIME], point=pt, direction=d, flow=flow,
        src_ip=np.where(data, SENDER_IP, RECEIVER_IP), dst_ip=np.where(data, RECEIVER_IP, SENDER_IP),
        sport=np.where(data, 40000 + flow, DPORT), dport=np.where(data, DPORT, 40000 + flow),
        seq=_u32(seq), ack=_u32(ack), payload_len=C[K.R_LEN], flags=C[K.R_FLAGS],
        window=np.where(data, DATA_WINDOW, rwin), tcp_hlen=20 + opts, opt_ts=sc.tcp.timestamps,
        tsval=_u32(tsval), tsecr=_u32(tsecr), sack_n=nb, sack=sack, ip_id=C[K.R_IPID] & 0xFFFF,
        ip_len=C[K.R_IPLEN], l2_bytes=point_l2[pt], encap=point_encap[pt],
        gso_size=np.where(gso, C[K.R_GSO_SIZE], 0), gso_segs=np.where(gso, C[K.R_GSO_SEGS], 0),
        gso_type=np.where(gso, codes.GSO_TCPV4, 0), csum_state=np.where(data, point_csum[pt], codes.CSUM_NONE),
        drop=C[K.R_DROP], gro_reason=C[K.R_GRO],
    )


def receiver_gro(rx: Trace, receiver: Receiver) -> Trace:
    """The kernel-exact GRO (``engine.gro``) over what each NAPI poll of the loop's receiver took
    (one poll = one timestamp), the packets' checksums correct as they left the wire."""
    if not len(rx):
        return rx
    ip_c, tcp_c = csum_math.trace_checksums(rx, True)
    params = GroParams(enabled=receiver.gro or receiver.lro, napi_budget=receiver.napi_budget, poll_gap_ns=0,
                       max_size=receiver.gro_max_size, rx_csum=receiver.rx_csum, verify_ip_csum=False,
                       hz=1000)                   # the loop's NAPI model flushes old packets at HZ 1000
    return gro(rx.replace(ip_csum=ip_c, tcp_csum=tcp_c), params).out


def assemble(sc: Scenario, W: K.World) -> Result:
    nh = len(sc.path)
    names = sc.point_names
    npts = len(names)
    nrows = int(W.G[K.G_RECTOT])
    R = W.REC[:nrows]
    rec_time, rec_point = R[:, K.R_TIME], R[:, K.R_POINT]
    isn_s, isn_r, ts_s, ts_r = flow_constants(sc)
    rx_name = "_rx"
    points = names + (rx_name,)
    l2 = np.array([14, 14] + [h.frame_overhead_bytes for h in sc.path] + [14, 14], np.int16)
    enc = np.array([0, 0] + [h.encap_bits for h in sc.path] + [0, 0], np.uint8)
    sw_partial = (not sc.nic.tso) and sc.nic.gso and sc.nic.tx_csum
    csum = np.array([codes.CSUM_PARTIAL if sc.nic.tx_csum else codes.CSUM_NONE,
                     codes.CSUM_PARTIAL if sw_partial else codes.CSUM_NONE] + [codes.CSUM_NONE] * nh
                    + [codes.CSUM_NONE, codes.CSUM_NONE], np.uint8)
    recv_code = npts - 1
    rx_rows = rec_point == npts                     # the hidden point: what each NAPI poll took
    recv_data = (rec_point == recv_code) & (R[:, K.R_DIR] == 0)
    keep = (rec_point < npts) & ~recv_data         # (the loop's own receiver aggregates, point npts + 1, unused)

    def columns_of(mask):
        """The recorded rows under ``mask`` by point, then time, as one contiguous row per column (R_*)."""
        idx = np.flatnonzero(mask)
        idx = idx[np.lexsort((idx, rec_time[idx], rec_point[idx]))]
        return np.ascontiguousarray(R[idx].T)

    def trace_of(mask, C=None):
        C = columns_of(mask) if C is None else C
        return _rows_to_trace(sc, C, points, isn_s, isn_r, ts_s, ts_r, l2, enc, csum)

    loop_recv = trace_of(recv_data).with_point(names[-1])
    rx = trace_of(rx_rows)
    recv = receiver_gro(rx, sc.receiver).with_point(names[-1])
    C_keep = columns_of(keep)
    others = trace_of(keep, C_keep)
    if len(others):
        # header checksums as a capture would show them: the pseudo-header sum while CHECKSUM_PARTIAL
        ip_c, full_c = csum_math.trace_checksums(others, True)
        _, pseudo_c = csum_math.trace_checksums(others, False)
        others = others.replace(ip_csum=ip_c, tcp_csum=np.where(others.csum_state == codes.CSUM_PARTIAL,
                                                                  pseudo_c, full_c))
    # rows are by point, then time; only the receiver point mixes two sources (its ACKs, GRO's output)
    k = int(np.searchsorted(others.point, recv_code))
    tail = Trace.concat([others[k:], recv])
    by_time = np.lexsort((np.arange(len(tail)), tail.time_ns))
    trace = Trace.concat([others[:k], tail[by_time]])
    trace = Trace(trace.columns, tuple(names), {"scenario": sc})     # the hidden point's rows are gone
    retx_keep = C_keep[K.R_RETX] != 0
    retx = np.concatenate([retx_keep[:k], np.concatenate([retx_keep[k:], np.zeros(len(recv), bool)])[by_time]])

    return result_of(sc, W, trace, loop_recv, retx)
