"""``simulate(scenario) -> Result``: run the TCP event loop and assemble what it saw.

The loop (``engine.tcp``) records packets as integer rows; here they become
one :class:`~offloadkit.trace.Trace` with a capture point per stage:
``scenario.point_names`` = sender (super-packets as TCP built them), wire
(after the NIC segmented them), one per hop (as the packet leaves the hop),
receiver (what the stack sees after GRO, and the ACKs it sends).

Rows with ``drop != 0`` are packets dropped at that point (a tcpdump there
would not show them): GSO failures at the sender point, MTU/queue/random
losses at a hop point. ACK rows have ``direction == 1``.

The receiver's data rows are rebuilt with the kernel-exact GRO module
(``engine.gro``) from the packets each NAPI poll took, so reasons and
aggregate boundaries follow the spec; the loop's own GRO model (which clocks
the ACKs) is kept in ``Result.loop_receiver`` for comparison.
"""
from __future__ import annotations

import warnings as _warnings
from dataclasses import dataclass, field

import numpy as np

from .. import codes
from ..engine import csum_math
from ..engine import tcp as K
from ..engine.gro import GroParams, gro
from .ipv6 import as_ipv6
from .pack import pack
from .scenario import Hop, Scenario
from ..trace import MAX_SACK_BLOCKS, Trace

SENDER_IP = 0xC6120001      # 198.18.0.1
RECEIVER_IP = 0xC6130001    # 198.19.0.1
DPORT = 5201
DATA_WINDOW = 502
OVERFLOW_NAMES = {1: "event heap", 2: "packet pool", 4: "ACK pool", 8: "receive queue", 16: "event limit"}


@dataclass(frozen=True, eq=False)
class HopStats:
    name: str
    in_packets: int
    in_bytes: int
    out_packets: int
    out_bytes: int
    dropped_packets: int
    dropped_bytes: int

    @property
    def in_transit_bytes(self) -> int:
        """Payload bytes still queued or on the link when the run stopped."""
        return self.in_bytes - self.out_bytes - self.dropped_bytes


@dataclass(frozen=True, eq=False)
class Result:
    """What one simulation run produced. Byte counts are TCP payload bytes."""

    scenario: Scenario
    trace: Trace                      # every capture point (``trace.at(name)``)
    goodput_bps: float                # in-order bytes delivered to the receiving sockets per second
    delivered_bytes: int
    duration_ns: int                  # run length: the duration, or until the last flow completed
    completion_ns: np.ndarray         # per flow: time the last byte arrived in order (-1: not done)
    flow_delivered_bytes: np.ndarray  # per flow
    retransmits: int                  # segments (MSS units) retransmitted, TLP probes included
    retransmit_packets: int           # packets (skbs) carrying retransmissions
    tlp_probes: int
    rtos: int
    recoveries: int                   # fast-recovery episodes
    drops: dict                       # codes.DROP_NAMES name -> packets
    drop_bytes: dict                  # name -> payload bytes
    hops: tuple                       # HopStats per hop
    sent_packets: int                 # packets TCP handed to the NIC (super-packets count once)
    sent_bytes: int                   # payload bytes TCP sent, retransmissions included
    wire_packets: int
    wire_bytes: int
    nic_dropped_bytes: int
    received_packets: int             # packets arriving at the receiver NIC
    gro_packets: int                  # packets the loop's GRO model handed to TCP
    acks: int
    icmp_messages: int
    events: int
    series_time_ns: np.ndarray        # sampling instants
    series_delivered_bytes: np.ndarray
    series_cwnd: np.ndarray           # [flow, sample] segments
    series_ssthresh: np.ndarray       # [flow, sample] segments (huge before the first loss)
    mss_bytes: int
    loop_receiver: Trace = field(repr=False, default=None)
    retransmission: np.ndarray = field(repr=False, default=None)   # per trace row: a retransmitted packet
    warnings: tuple = ()

    @property
    def partial(self) -> bool:
        """True when the run stopped early or lost packets to a full pool: its numbers are incomplete."""
        return any(w.startswith("PARTIAL") for w in self.warnings)

    # -- views ------------------------------------------------------------
    def at(self, point: str) -> Trace:
        """The packets seen at one capture point."""
        return self.trace.at(point)

    @property
    def traces(self) -> dict[str, Trace]:
        """One Trace per capture point, in path order."""
        return {p: self.at(p) for p in self.points}

    @property
    def points(self) -> tuple[str, ...]:
        return self.scenario.point_names

    @property
    def duration_s(self) -> float:
        return self.duration_ns / 1e9

    @property
    def bottleneck_bps(self) -> int:
        return self.scenario.bottleneck_bps

    def retransmissions(self, point: str) -> Trace:
        """The retransmitted packets (and TLP probes) seen at ``point``, dropped ones included.

        Known from the sender up to the last hop; the receiver's aggregates are not marked.
        """
        code = self.trace.point_code(point)
        return self.trace[(self.trace.point == code) & self.retransmission]

    def segment_sizes(self, point: str, direction: int = 0, delivered_only: bool = True) -> dict[int, int]:
        """Payload length -> packet count at ``point`` (data direction, not dropped by default)."""
        t = self.at(point)
        keep = (t.direction == direction) & (t.payload_len > 0)
        if delivered_only:
            keep &= t.drop == codes.DROP_NONE
        vals, cnt = np.unique(t.payload_len[keep], return_counts=True)
        return {int(v): int(c) for v, c in zip(vals, cnt)}

    def summary(self) -> dict:
        """JSON-ready numbers (the CLI's ``--json``)."""
        return {
            "goodput_bps": self.goodput_bps,
            "delivered_bytes": self.delivered_bytes,
            "duration_s": self.duration_s,
            "retransmits": self.retransmits,
            "retransmit_packets": self.retransmit_packets,
            "tlp_probes": self.tlp_probes,
            "rtos": self.rtos,
            "recoveries": self.recoveries,
            "drops": dict(self.drops),
            "drop_bytes": dict(self.drop_bytes),
            "events": self.events,
            "mss_bytes": self.mss_bytes,
            "bottleneck_bps": self.bottleneck_bps,
            "completion_s": [float(c) / 1e9 if c >= 0 else None for c in self.completion_ns],
            "hops": [{"name": h.name, "in_bytes": h.in_bytes, "out_bytes": h.out_bytes,
                      "dropped_bytes": h.dropped_bytes, "in_transit_bytes": h.in_transit_bytes}
                     for h in self.hops],
            "segment_sizes": {p: {str(k): v for k, v in self.segment_sizes(p).items()} for p in self.points},
            "partial": self.partial,
            "warnings": list(self.warnings),
        }


def run(sc: Scenario) -> K.World:
    """Run the loop; returns the World of arrays (for tests and tools that want the raw state)."""
    W = K.make_world(*pack(sc))
    K.run_kernel(W)
    return W


# -- turning rows into Traces ----------------------------------------------------

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
    t = Trace.from_columns(
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
    return as_ipv6(t, SENDER_IP) if sc.ip_version == 6 else t


def _flow_constants(sc: Scenario):
    rng = np.random.default_rng(sc.seed)
    isn_s = rng.integers(0, 2**32, sc.flows, dtype=np.int64)
    isn_r = rng.integers(0, 2**32, sc.flows, dtype=np.int64)
    ts_s = rng.integers(0, 2**31, sc.flows, dtype=np.int64)
    ts_r = rng.integers(0, 2**31, sc.flows, dtype=np.int64)
    return isn_s, isn_r, ts_s, ts_r


def assemble(sc: Scenario, W: K.World) -> Result:
    G = W.G
    nh = len(sc.path)
    names = sc.point_names
    npts = len(names)
    nrows = int(W.G[K.G_RECTOT])
    R = W.REC[:nrows]
    rec_time, rec_point = R[:, K.R_TIME], R[:, K.R_POINT]
    isn_s, isn_r, ts_s, ts_r = _flow_constants(sc)
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
    keep = ~rx_rows & ~recv_data

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
    # kernel-exact GRO over what each NAPI poll took (one poll = one timestamp)
    if len(rx):
        ip_c, tcp_c = csum_math.trace_checksums(rx, True)
        rx = rx.replace(ip_csum=ip_c, tcp_csum=tcp_c)
    rxp = sc.receiver
    params = GroParams(enabled=rxp.gro or rxp.lro, napi_budget=rxp.napi_budget, poll_gap_ns=0,
                       max_size=rxp.gro_max_size, rx_csum=rxp.rx_csum, verify_ip_csum=False,
                       hz=1000)                   # the loop's NAPI model flushes old packets at HZ 1000
    recv = (gro(rx, params).out if len(rx) else rx).with_point(names[-1])
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

    flows_done = W.F[:, K.F_DONE_NS].copy()
    delivered = int(G[K.G_DELIV])
    if sc.duration_ns is not None and (None in sc.flow_bytes or (flows_done < 0).any()):
        duration = int(sc.duration_ns)
    elif (flows_done >= 0).all():
        duration = int(flows_done.max())
    else:
        duration = int(G[K.G_NOW])
    goodput = delivered * 8e9 / duration if duration > 0 else 0.0
    drops = {codes.DROP_NAMES[c]: int(W.DROPS[c, 0]) for c in codes.DROP_NAMES if c and W.DROPS[c, 0]}
    drop_bytes = {codes.DROP_NAMES[c]: int(W.DROPS[c, 1]) for c in codes.DROP_NAMES if c and W.DROPS[c, 0]}
    hops = tuple(HopStats(h.name, *[int(v) for v in W.HS[i, :K.HS_LEN]]) for i, h in enumerate(sc.path))
    k = int(G[K.G_SMPN])
    warnings = []
    ov = int(G[K.G_OVERFLOW])
    if ov:
        full = ", ".join(name for bit, name in OVERFLOW_NAMES.items() if ov & bit)
        warnings.append(f"PARTIAL RESULT: the simulation ran out of room ({full}); the numbers are incomplete. "
                        f"Simulate less (bytes, duration, flows) or report the scenario as a bug")
    if None not in sc.flow_bytes and sc.duration_ns is None and (flows_done < 0).any():
        warnings.append("a flow did not finish within one hour of simulated time")
    return Result(
        scenario=sc, trace=trace, goodput_bps=goodput, delivered_bytes=delivered, duration_ns=duration,
        completion_ns=flows_done, flow_delivered_bytes=W.F[:, K.F_DELIVERED].copy(),
        retransmits=int(G[K.G_RETX_UNITS]), retransmit_packets=int(G[K.G_RETX_PKTS]),
        tlp_probes=int(G[K.G_TLPS]), rtos=int(G[K.G_RTOS]), recoveries=int(G[K.G_RECOV]),
        drops=drops, drop_bytes=drop_bytes, hops=hops, sent_packets=int(G[K.G_SENT_PKTS]),
        sent_bytes=int(G[K.G_SENT_BYTES]), wire_packets=int(G[K.G_WIRE_PKTS]), wire_bytes=int(G[K.G_WIRE_BYTES]),
        nic_dropped_bytes=int(G[K.G_NIC_DROP_BYTES]), received_packets=int(G[K.G_RX_PKTS]),
        gro_packets=int(G[K.G_GRO_PKTS]), acks=int(G[K.G_ACKS]), icmp_messages=int(G[K.G_ICMPS]),
        events=int(G[K.G_EVENTS]), series_time_ns=W.SM[0, :k].copy(), series_delivered_bytes=W.SM[1, :k].copy(),
        series_cwnd=W.SM[2:2 + sc.flows, :k].copy(), series_ssthresh=W.SM[2 + sc.flows:, :k].copy(),
        mss_bytes=sc.mss_bytes,
        loop_receiver=loop_recv, retransmission=retx, warnings=tuple(warnings),
    )


def simulate(scenario: Scenario, trace: bool = True) -> Result:
    """Simulate ``scenario``: TCP flows through the sender's offloads, the path and the receiver.

    Parameters
    ----------
    scenario : Scenario
        The flows, the sender's NIC, the hops and the receiver.
    trace : bool
        Record packet traces (default). ``False``: statistics only, the same as ``trace_limit=0``.

    Returns
    -------
    Result
        Goodput, drops, retransmissions and the packets at every capture point
        (``result.at(point)``, ``result.segment_sizes(point)``). ``result.partial`` is True (and a
        RuntimeWarning is raised) when the run ran out of room or time.

    Raises
    ------
    ValueError
        If ``scenario`` is not a :class:`Scenario`, or the run cannot fit (``sim.pack.check_feasible``).
    """
    if not isinstance(scenario, Scenario):
        raise ValueError(f"simulate() needs a Scenario, not {type(scenario).__name__}")
    if not trace:
        scenario = scenario.replace(trace_limit=0)
    result = assemble(scenario, run(scenario))
    for w in result.warnings:
        if w.startswith("PARTIAL"):
            _warnings.warn(w, RuntimeWarning, stacklevel=2)
    return result


def warmup() -> None:
    """Compile the TCP loop with a tiny scenario (and load it from the cache afterwards)."""
    simulate(Scenario(path=(Hop(rate_bps=10_000_000, delay_ns=1_000_000, loss=0.01),), bytes_per_flow=30_000,
                      trace_limit=50))
