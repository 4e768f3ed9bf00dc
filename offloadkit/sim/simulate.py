"""``simulate(scenario) -> Result``: run the TCP event loop and assemble what it saw.

The loop (``engine.tcp``) records packets as integer rows; here they become
one :class:`~offloadkit.trace.Trace` (one numba pass, ``engine.tcp.rows``, writes
each row into its place) with a capture point per stage:
``scenario.point_names`` = sender (super-packets as TCP built them), wire
(after the NIC segmented them), one per hop (as the packet leaves the hop),
receiver (what the stack sees after GRO, and the ACKs it sends).

Rows with ``drop != 0`` are packets dropped at that point (a tcpdump there
would not show them): GSO failures at the sender point, MTU/queue/random
losses at a hop point. ACK rows have ``direction == 1``.

The receiver's data rows are the aggregates of the loop's GRO (``engine.tcp.receiver``,
the rules of ``engine.gro_rules``), recorded as the batch GRO (``engine.gro``) would
report them over the packets the hidden "rx" point recorded: the head packet's reason,
the end-of-poll order of the kernel's buckets, the checksum state. ``Result.loop_receiver``
keeps the same aggregates with the reason that closed each (what TCP was handed).
"""
from __future__ import annotations

import functools
import warnings as _warnings
from dataclasses import dataclass, field

import numpy as np

from .. import codes
from ..engine import checksum, csum_math
from ..engine import tcp as K
from ..engine.tcp.rows import OUT_COLUMNS, record_order, rows_to_columns
from .addresses import DPORT, RECEIVER_IP, SENDER_IP
from .ipv6 import as_ipv6, ipv6_partial_check
from .pack import pack
from .scenario import Hop, Receiver, Scenario
from ..trace import FIELDS, Trace

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
    loop_rows: object = field(repr=False, default=None)       # () -> loop_receiver, or that Trace
    retransmission: np.ndarray = field(repr=False, default=None)   # per trace row: a retransmitted packet
    warnings: tuple = ()

    @functools.cached_property
    def loop_receiver(self) -> Trace:
        """The receiver's aggregates as the loop's GRO handed them to TCP (the reason that closed each),
        built when first asked for."""
        return self.loop_rows() if callable(self.loop_rows) else self.loop_rows

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


def run(sc: Scenario, rx_rows: bool = False) -> K.World:
    """Run the loop; returns the World of arrays (for tests and tools that want the raw state).
    ``rx_rows``: also record what each NAPI poll took (the hidden "rx" point, for the reference assembly)."""
    W = K.make_world(*pack(sc, rx_rows))
    K.run_kernel(W)
    return W


# -- turning rows into Traces ----------------------------------------------------

def flow_constants(sc: Scenario):
    """Per flow: the sender's and receiver's ISNs and TSval bases, drawn from the scenario's seed."""
    rng = np.random.default_rng(sc.seed)
    isn_s = rng.integers(0, 2**32, sc.flows, dtype=np.int64)
    isn_r = rng.integers(0, 2**32, sc.flows, dtype=np.int64)
    ts_s = rng.integers(0, 2**31, sc.flows, dtype=np.int64)
    ts_r = rng.integers(0, 2**31, sc.flows, dtype=np.int64)
    return isn_s, isn_r, ts_s, ts_r


def _row_constants(sc: Scenario) -> tuple:
    """What ``rows_to_columns`` needs besides the rows: flow offsets, header fields, each point's framing
    (the named points, the hidden "rx" point, then the receiver's aggregates as the trace shows them)."""
    nh = len(sc.path)
    l2 = np.array([14, 14] + [h.frame_overhead_bytes for h in sc.path] + [14, 14, 14], np.int64)
    enc = np.array([0, 0] + [h.encap_bits for h in sc.path] + [0, 0, 0], np.int64)
    sw_partial = (not sc.nic.tso) and sc.nic.gso and sc.nic.tx_csum
    csum = np.array([codes.CSUM_PARTIAL if sc.nic.tx_csum else codes.CSUM_NONE,
                     codes.CSUM_PARTIAL if sw_partial else codes.CSUM_NONE] + [codes.CSUM_NONE] * nh
                    + [codes.CSUM_NONE, codes.CSUM_NONE, received_csum(sc.receiver)[0]], np.int64)
    rwin = min(sc.tcp.rwnd_bytes >> 7, 65535)
    return (*flow_constants(sc), sc.base_rtt_ns // 2, bool(sc.tcp.timestamps), rwin, l2, enc, csum,
            SENDER_IP, RECEIVER_IP, DPORT, DATA_WINDOW)


def received_csum(receiver: Receiver) -> tuple[int, int]:
    """(ip_summed, csum_level) of a packet GRO delivered unmerged: what the NIC reports for a correct
    packet (``receiver.rx_csum``), after GRO's validation [skb_gro_checksum_validate] when GRO is on.
    An aggregate is CHECKSUM_PARTIAL [tcp_gro_complete]."""
    st, lv = checksum.rx_state_one(checksum.RX_MODE_CODES[receiver.rx_csum], codes.CSUM_NONE, 0, False, False)
    if receiver.gro or receiver.lro:
        _, _, _, st, lv = checksum.validate_one(st, lv, False, False, 0, 0, 0, True)
    return int(st), int(lv)


def _fill(cols: dict, R: np.ndarray, rows: np.ndarray, dest: np.ndarray, consts: tuple) -> None:
    """Recorded row ``rows[j]`` into row ``dest[j]`` of ``cols``, the rows read in recording order
    (sequential reads, scattered writes: three times faster than reading in trace order)."""
    to = np.full(len(R), -1, np.int64)
    to[rows] = dest
    seq = np.flatnonzero(to >= 0)
    rows_to_columns(R, seq, to[seq], *consts, *[cols[c] for c in OUT_COLUMNS])


def _new_trace(n: int, points: tuple) -> Trace:
    """A Trace of ``n`` rows for ``rows_to_columns`` to fill: its columns uninitialised, the others defaults."""
    cols = {name: np.empty((n, *shape), dtype) if name in OUT_COLUMNS else
            np.zeros((n, *shape), dtype) if default == 0 else np.full((n, *shape), default, dtype)
            for name, (dtype, default, shape) in FIELDS.items()}      # zeros: pages the OS maps when read
    return Trace(cols, points)


def _rows_trace(R: np.ndarray, rows: np.ndarray, points: tuple, consts: tuple) -> Trace:
    t = _new_trace(len(rows), points)
    _fill(t.columns, R, rows, np.arange(len(rows)), consts)
    return t


def assemble(sc: Scenario, W: K.World) -> Result:
    """The Result of a finished loop: every capture point's rows as one Trace, and the counters.

    The receiver's data rows are the aggregates the loop's GRO recorded as the trace shows them (the
    hidden point after "rx", ``engine.tcp.receiver``); its ACKs come first at equal times."""
    names = sc.point_names
    npts = len(names)
    R = W.REC[:int(W.G[K.G_RECTOT])]
    consts = _row_constants(sc)
    recv_code = npts - 1
    order = record_order(R, npts + 2)
    pt, data = R[order, K.R_POINT], R[order, K.R_DIR] == 0
    k = int(np.count_nonzero(pt < recv_code))
    keep = order[(pt < recv_code) | ((pt == recv_code) & ~data)]    # by point, then time; the receiver's ACKs last
    loop_rows = order[(pt == recv_code) & data]
    agg = order[pt == npts + 1]
    # the receiver point mixes two sources: its ACKs and GRO's output, by time (ACKs first at equal times)
    acks = keep[k:]
    by_time = np.argsort(np.concatenate([R[acks, K.R_TIME], R[agg, K.R_TIME]]), kind="stable")
    at = np.empty(len(by_time), np.int64)
    at[by_time] = np.arange(k, k + len(by_time))
    dest_keep = np.concatenate([np.arange(k), at[:len(acks)]])
    dest_recv = at[len(acks):]
    trace = _new_trace(len(keep) + len(agg), names)
    trace.meta["scenario"] = sc
    cols = trace.columns
    _fill(cols, R, np.concatenate([keep, agg]), np.concatenate([dest_keep, dest_recv]), consts)
    cols["point"][dest_recv] = recv_code
    merged = dest_recv[cols["gso_segs"][dest_recv] > 1]
    cols["csum_state"][merged] = codes.CSUM_PARTIAL
    level = received_csum(sc.receiver)[1]
    if level:
        cols["csum_level"][dest_recv] = level
        cols["csum_level"][merged] = 0
    if sc.ip_version == 6:
        trace = as_ipv6(trace, SENDER_IP)
        cols = trace.columns
    if len(trace):
        # header checksums as a capture would show them: the pseudo-header sum while CHECKSUM_PARTIAL
        ip_c, tcp_c = csum_math.trace_checksums(trace, True)
        part = np.flatnonzero(cols["csum_state"] == codes.CSUM_PARTIAL)
        pseudo = np.zeros(len(part), np.uint16)
        csum_math.tcp_pseudo_kernel(cols["src_ip"][part], cols["dst_ip"][part], cols["tcp_hlen"][part],
                                    cols["payload_len"][part], pseudo)
        if sc.ip_version == 6:
            pseudo = ipv6_partial_check(cols["src_ip6"][part], cols["dst_ip6"][part],
                                        cols["tcp_hlen"][part].astype(np.int64) + cols["payload_len"][part])
        tcp_c[part] = pseudo
        cols["ip_csum"], cols["tcp_csum"] = ip_c, tcp_c
    retx = np.zeros(len(trace), bool)
    retx[dest_keep] = R[keep, K.R_RETX] != 0

    return result_of(sc, W, trace, functools.partial(_loop_receiver, sc, R, loop_rows, consts), retx)


def _loop_receiver(sc: Scenario, R: np.ndarray, rows: np.ndarray, consts: tuple) -> Trace:
    """The receiver point's aggregates as the loop handed them to TCP, each with the reason that closed it."""
    t = _rows_trace(R, rows, sc.point_names + ("_rx",), consts).with_point(sc.point_names[-1])
    return as_ipv6(t, SENDER_IP) if sc.ip_version == 6 else t


def result_of(sc: Scenario, W: K.World, trace: Trace, loop_receiver, retransmission: np.ndarray) -> Result:
    """The Result of a run: its counters and series from ``W``, with the assembled traces."""
    G = W.G
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
        loop_rows=loop_receiver, retransmission=retransmission, warnings=tuple(warnings),
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
