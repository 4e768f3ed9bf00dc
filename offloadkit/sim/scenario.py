"""Scenario and its parts: what the TCP simulator (``offloadkit.sim.simulate``) runs.

Frozen dataclasses, validated on construction: a bad value raises a
``ValueError`` whose message says what to change. Units are in the field
names (``_ns``, ``_bps``, ``_bytes``); ``offloadkit.units`` turns "100Mbit",
"20ms", "100MB" into those units.

    Scenario(tcp=Tcp(mss_clamp=1452), nic=Nic(model="rtl8139-legacy"),
             path=(Hop("ppp", rate_bps=9_600_000, delay_ns=14_500_000, mtu=1492),),
             bytes_per_flow=2_000_000)
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import numpy as np

from ..codes import KERNELS, NEWEST_KERNEL  # noqa: F401  re-exported
from ..codes import DROP_GSO_EINVAL, DROP_GSO_EPROTONOSUPPORT, ENC_MPLS, ENC_PPPOE, ENC_VLAN, ENC_VXLAN
from ..engine.checksum import RX_CSUM_MODES
from ..engine.path import encap_overhead_bytes
from ..engine.segment import NIC_MODELS, TCP_MIN_SND_MSS, check_mss_fits, tcp_options_bytes

ETH_HLEN = 14
IP_HLEN = 20
IPV6_HLEN = 40
TCP_HLEN = 20
CC_NAMES = ("newreno", "cubic")
RX_CSUM_NAMES = tuple(m for m in RX_CSUM_MODES if m != "trace")
#: tbf burst of a byte-limited queue (``queue_bytes`` in :meth:`Scenario.simple`, the lab's ``--queue``)
TBF_BURST_BYTES = 65536
ENCAP_NAMES = {"vlan": ENC_VLAN, "mpls": ENC_MPLS, "pppoe": ENC_PPPOE, "vxlan": ENC_VXLAN}


def _check_int(name: str, value, lo: int, hi: int | None = None, hint: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, not {value!r}{hint}")
    if value < lo or (hi is not None and value > hi):
        rng = f"at least {lo}" if hi is None else f"between {lo} and {hi}"
        raise ValueError(f"{name} {value} must be {rng}{hint}")


def _check_bools(obj) -> None:
    """Every field declared ``bool`` holds True or False (not 'yes', not 1)."""
    for f in dataclasses.fields(obj):
        if f.type in ("bool", bool) and not isinstance(getattr(obj, f.name), (bool, np.bool_)):
            raise ValueError(f"{type(obj).__name__.lower()} {f.name} must be True or False, "
                             f"not {getattr(obj, f.name)!r}")


def tso_requires_tx_csum(tso: bool, tx_csum: bool) -> bool:
    """TSO as the kernel runs it: off without TX checksum offload (netdev_fix_features, "Dropping TSO
    features since no CSUM feature"); software GSO then segments instead."""
    return bool(tso) and bool(tx_csum)


def rx_csum_mode(csum_offload: bool) -> str:
    """The receive checksum state of a NIC with RX checksum offload on ("unnecessary": the NIC verified
    it, CHECKSUM_UNNECESSARY) or off ("none": the stack verifies it, CHECKSUM_NONE)."""
    return "unnecessary" if csum_offload else "none"


# -- the parts --------------------------------------------------------------

@dataclass(frozen=True)
class Tcp:
    """The TCP sender and receiver (Linux defaults).

    ``mss``: payload bytes per segment (``mss_now``/gso_size). None: from the
    sender NIC's MTU, the peer's ``mss_clamp`` and the options, as Linux does
    (MTU 1500 + timestamps -> 1448; clamp 1452 + timestamps -> 1440).
    ``psh_on_gso``: Linux >= 5.4 sets PSH on every GSO packet; 4.x does not.
    ``tso_retransmits``: Linux >= 4.7 retransmits up to cwnd - in_flight lost
    segments of one skb as a single TSO packet; older kernels split every
    retransmission to one MSS (report 000's 4.4 guest).
    ``tso_defer``: the form of ``tcp_tso_should_defer`` (present since 2.6):
    a cwnd-limited sender in Open state holds back a TSO skb until the room
    is a third of the window or a full autosized skb, unless the next ACK is
    not due soon, so an ACK clock sends bursts rather than 2-segment skbs.
    1: Linux 4.4-4.19 (defers only while the last write was in the current
    jiffy); 2: 4.20-6.17 (last write under 1 ms ago, tcp_wstamp_ns); 3: 6.18
    (the ACK is due within min(srtt/2, 1 ms) rather than srtt/2 since the
    oldest skb went out); 0: never defer.
    ``loss_timers``: the form of the loss-probe and RACK reordering timers
    (``engine.tcp.jiffies``): 0 Linux < 4.13, exact, PTO max(2 srtt, 10 ms);
    1 4.13-6.6, in ticks of HZ=250 plus 2 ticks; 2 6.7+, in ticks after
    adding 2 ms. At microsecond RTTs a probe or a reordering wait costs 4-8 ms.
    ``rto_timer``: 1 (Linux >= 4.8): the retransmission timer in ticks of
    HZ=250 (icsk_rto = jiffies(srtt + rttvar), doubled per backoff) on the
    non-cascading timer wheel, which rounds a timer 63+ ticks out up to 8
    ticks, 504+ up to 64 (``engine.tcp.jiffies.timer_expiry``): the 5th
    backed-off RTO of a 200 ms base fires ~6.3-6.6 s after the first send,
    not 6.2; 0: exact nanoseconds.
    ``rack_reo_timer``: Linux >= 4.11 arms RACK's reordering timer, so a loss
    revealed by a SACK is repaired after RTT + min_rtt/4 without waiting for
    another ACK, a probe or the RTO; 4.4-4.10 only look at ACK arrival.
    ``rack_time_based``: Linux >= 4.10 RACK marks a unit lost once a unit
    sent after it was delivered and it has waited RTT + min_rtt/4, in any
    state; 4.4-4.9 only in Recovery/Loss and only when a delivered unit was
    sent more than 1 ms (reo_wnd's floor) after it, however long ago.
    ``fack``: Linux <= 4.14 with tcp_fack=1 (its default) marks as lost every
    unit more than 3 below the highest SACKed one (fackets_out - reordering);
    without it (4.15+), a unit needs 3 SACKed units above it (RFC 6675).
    ``prr_ss_una``: in fast recovery below ssthresh, PRR sends one more than
    was delivered whenever snd_una advances and nothing new is lost (Linux
    >= 5.12); 4.3-5.11 only when the ACK covers retransmitted data and no
    retransmission was found lost, otherwise just what was delivered.
    ``ofo_quickack``: the receiver re-enters quick-ACK mode on every
    out-of-order or partial segment (Linux < 4.18; a3893637e1eb "tcp: do not
    force quickack when receiving out-of-order packets" removed it); in every
    version duplicate data does.
    ``mtu_probing``: ``net.ipv4.tcp_mtu_probing``: 0 off; 1 black-hole
    detection (``tcp_write_timeout``: once the RTOs have lasted
    ``tcp_model_timeout(retries1=3)`` = 15 x 200 ms, ``tcp_mtu_probing``
    turns probing on and the MSS drops to ``base_mss``), then probing
    (``tcp_mtu_probe``) searches the path MTU upwards; 2 probing from the start.
    ``base_mss``: ``net.ipv4.tcp_base_mss``, where ``tcp_mtup_init`` starts
    ``search_low``. :func:`kernel_rules` gives the version knobs of a Linux
    release (``Tcp(**kernel_rules("4.4"))``).
    """

    mss: int | None = None
    mss_clamp: int | None = None
    timestamps: bool = True
    sack: bool = True
    cc: str = "cubic"
    initial_cwnd: int = 10
    min_rto_ns: int = 200_000_000
    max_rto_ns: int = 120_000_000_000
    tlp: bool = True
    delayed_ack: bool = True
    delack_ns: int = 40_000_000
    quickacks: int = 16
    rwnd_bytes: int = 4 << 20
    psh_on_gso: bool = True
    tso_retransmits: bool = True
    tso_defer: int = 3
    loss_timers: int = 2
    rto_timer: int = 1
    rack_reo_timer: bool = True
    prr_ss_una: bool = True
    rack_time_based: bool = True
    fack: bool = False
    ofo_quickack: bool = False
    mtu_probing: int = 0
    base_mss: int = 1024

    def __post_init__(self):
        _check_bools(self)
        if self.mtu_probing not in (0, 1, 2) or isinstance(self.mtu_probing, bool):
            raise ValueError(f"mtu_probing {self.mtu_probing!r}: net.ipv4.tcp_mtu_probing is 0, 1 or 2")
        if self.loss_timers not in (0, 1, 2) or isinstance(self.loss_timers, bool):
            raise ValueError(f"loss_timers {self.loss_timers!r}: the TLP/RACK timer form is 0 (Linux < 4.13), "
                             "1 (4.13-6.6) or 2 (6.7+)")
        if self.rto_timer not in (0, 1) or isinstance(self.rto_timer, bool):
            raise ValueError(f"rto_timer {self.rto_timer!r}: the RTO timer form is 0 (exact) or 1 (jiffies on "
                             "the timer wheel, Linux >= 4.8)")
        if self.tso_defer not in (0, 1, 2, 3) or isinstance(self.tso_defer, bool):
            raise ValueError(f"tso_defer {self.tso_defer!r}: the tcp_tso_should_defer form is 0 (off), "
                             "1 (Linux 4.4-4.19), 2 (4.20-6.17) or 3 (6.18)")
        _check_int("base MSS", self.base_mss, 48, 65495, " (net.ipv4.tcp_base_mss, Linux uses 1024)")
        if self.cc not in CC_NAMES:
            raise ValueError(f"congestion control {self.cc!r} is not modelled; choose one of {', '.join(CC_NAMES)}")
        if self.mss is not None:
            _check_int("MSS", self.mss, 8, 65495, " (payload bytes per segment)")
        if self.mss_clamp is not None:
            _check_int("MSS clamp", self.mss_clamp, TCP_MIN_SND_MSS, 65495,
                       " (the MSS option value, without TCP options)")
        _check_int("initial cwnd", self.initial_cwnd, 1, 1000, " segments (Linux uses 10)")
        _check_int("min RTO", self.min_rto_ns, 1_000_000, 60_000_000_000, " ns (Linux uses 200 ms)")
        _check_int("max RTO", self.max_rto_ns, self.min_rto_ns, None, " ns (at least the min RTO)")
        _check_int("delayed-ACK timeout", self.delack_ns, 1_000, 1_000_000_000, " ns (Linux: 40 ms minimum)")
        _check_int("quick ACKs", self.quickacks, 0, 1_000_000)
        _check_int("receive window", self.rwnd_bytes, 1024, 1 << 30, " bytes")

    @property
    def options_bytes(self) -> int:
        return tcp_options_bytes(self.timestamps)

    @property
    def tcp_hlen(self) -> int:
        return TCP_HLEN + self.options_bytes


#: Linux releases whose TCP rules ``--kernel`` knows (the version knobs of Tcp change between them)


#: ``Tcp.tso_defer`` of the old-kernel report presets (000's 4.4 guest, 001's 4.6/4.7 hosts): they were
#: fitted without tcp_tso_should_defer, and with its 4.4 form (HZ=250) 000's TSO-on throughput falls from
#: the report's 70-80 KB/s to 52, so they keep it off until the rest of their 4.x rules are in the preset
REPORT_TSO_DEFER = 0


def kernel_rules(version: str | None = None) -> dict:
    """The Tcp version knobs of one Linux release, e.g. ``kernel_rules("4.9")`` (None: the newest).

    Each knob's first release is in the Tcp docstring; a release between two
    listed ones takes the older one's rules.
    """
    text = NEWEST_KERNEL if version is None else str(version).strip()
    m = re.fullmatch(r"(\d+)\.(\d+)(?:\.\d+)?", text)
    v = (int(m.group(1)), int(m.group(2))) if m else None
    if v is None or v < (4, 4) or v > tuple(map(int, NEWEST_KERNEL.split("."))):
        raise ValueError(f"kernel {version!r}: give a Linux release X.Y from 4.4 to {NEWEST_KERNEL} "
                         f"(e.g. {', '.join(KERNELS[::3])})")
    return {"tso_retransmits": v >= (4, 7), "tso_defer": 3 if v >= (6, 18) else 2 if v >= (4, 20) else 1,
            "loss_timers": 2 if v >= (6, 7) else 1 if v >= (4, 13) else 0, "rto_timer": int(v >= (4, 8)),
            "rack_time_based": v >= (4, 10), "rack_reo_timer": v >= (4, 11),
            "fack": v <= (4, 14), "ofo_quickack": v < (4, 18), "psh_on_gso": v >= (5, 4),
            "prr_ss_una": v >= (5, 12)}


def with_kernel(sc: "Scenario", version: str | None = None) -> "Scenario":
    """The same scenario with the TCP rules of another Linux release (``--kernel``)."""
    return sc.replace(tcp=dataclasses.replace(sc.tcp, **kernel_rules(version)))


@dataclass(frozen=True)
class Nic:
    """The sender's NIC: offloads and how the device segments (``engine.segment.NIC_MODELS``).

    With ``tso`` the device segments super-packets (its ``model`` rules);
    with only ``gso`` the kernel segments in software first (correct
    segments whatever the model, except ``drop-gso`` which cannot);
    with neither TCP builds one-MSS packets.
    """

    model: str = "hw-tso"
    tso: bool = True
    gso: bool = True
    tx_csum: bool = True
    mtu: int = 1500
    rate_bps: int = 10_000_000_000
    gso_max_size: int = 65536
    gso_max_segs: int = 65535
    drop_reason: str = "EPROTONOSUPPORT"
    legacy_mtu_bytes: int = 1500

    def __post_init__(self):
        if self.model not in NIC_MODELS:
            raise ValueError(f"unknown NIC model {self.model!r}; choose one of {', '.join(NIC_MODELS)}")
        _check_bools(self)
        if self.tso != tso_requires_tx_csum(self.tso, self.tx_csum):
            raise ValueError("TSO needs TX checksum offload (the kernel turns TSO off without it): "
                             "set tso=False or tx_csum=True")
        _check_int("NIC MTU", self.mtu, 68, 65535)
        _check_int("NIC rate", self.rate_bps, 1000, 10**13, " bit/s")
        _check_int("gso_max_size", self.gso_max_size, 1024, 512 * 1024, " bytes (Linux default 65536)")
        _check_int("gso_max_segs", self.gso_max_segs, 1, 65535)
        if self.drop_reason not in ("EPROTONOSUPPORT", "EINVAL"):
            raise ValueError(f"drop_reason {self.drop_reason!r}: use 'EPROTONOSUPPORT' (no mpls_gso module) "
                             f"or 'EINVAL' (mpls_gso loaded, inner protocol unset)")

    @property
    def drop_code(self) -> int:
        return DROP_GSO_EPROTONOSUPPORT if self.drop_reason == "EPROTONOSUPPORT" else DROP_GSO_EINVAL


@dataclass(frozen=True)
class Hop:
    """One link of the path: a FIFO queue, a serializer, a propagation delay, an MTU.

    ``mtu``: the MTU of the hop's carrier link, as in ``engine.path.apply_hop``:
    the hop's encapsulations ("vlan", "mpls", "pppoe", "vxlan") ride inside
    it, so PPPoE over a 1500-byte link forwards IP packets up to 1492 (the
    same as ``mtu=1492`` without encapsulation). A bigger (DF) packet is
    dropped, with an ICMP "fragmentation needed" back to the sender when
    ``icmp`` (PMTU discovery then lowers the sender's MSS) or silently.
    Serialization counts Ethernet (14) + encapsulation + IP bytes.
    ``loss``: random loss probability per packet.
    ``tbf_burst_bytes``: the queue is a tbf with this burst (its max_size): a
    GSO skb no bigger than it (qdisc_pkt_len: every segment's frame) is
    queued or dropped whole, as sch_tbf.c tbf_enqueue does with a forwarded
    super-packet; a bigger one is split by tbf_segment. 0: every segment
    alone (a device queue after segmentation).
    """

    name: str = "link"
    rate_bps: int = 100_000_000
    delay_ns: int = 10_000_000
    mtu: int = 1500
    encap: tuple[str, ...] = ()
    queue_packets: int | None = 1000
    queue_bytes: int | None = None
    loss: float = 0.0
    icmp: bool = False
    mpls_labels: int = 1
    tbf_burst_bytes: int = 0

    def __post_init__(self):
        if not isinstance(self.name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", self.name):
            raise ValueError(f"hop name {self.name!r}: use letters, digits, '-', '_' or '.'")
        _check_int(f"hop {self.name}: rate", self.rate_bps, 1000, 10**13, " bit/s")
        _check_int(f"hop {self.name}: delay", self.delay_ns, 0, 10**11, " ns")
        _check_int(f"hop {self.name}: MTU", self.mtu, 68, 65535, " (68 is the IPv4 minimum)")
        encap = (self.encap,) if isinstance(self.encap, str) else tuple(self.encap)
        for e in encap:
            if e not in ENCAP_NAMES:
                raise ValueError(f"hop {self.name}: unknown encapsulation {e!r}; use {', '.join(ENCAP_NAMES)}")
        object.__setattr__(self, "encap", encap)
        if self.queue_packets is None and self.queue_bytes is None:
            raise ValueError(f"hop {self.name}: give a queue size, queue_packets or queue_bytes")
        if self.queue_packets is not None:
            _check_int(f"hop {self.name}: queue", self.queue_packets, 1, 10_000_000, " packets")
        if self.queue_bytes is not None:
            _check_int(f"hop {self.name}: queue", self.queue_bytes, 1600, 10**10,
                       " bytes (at least one full-size frame)")
        _check_bools(self)
        if isinstance(self.loss, bool) or not isinstance(self.loss, (int, float)):
            raise ValueError(f"hop {self.name}: loss must be a number (a probability, e.g. 0.001), "
                             f"not {self.loss!r}")
        if not 0.0 <= float(self.loss) < 1.0:
            raise ValueError(f"hop {self.name}: loss {self.loss} must be a probability in [0, 1), e.g. 0.001")
        _check_int(f"hop {self.name}: MPLS labels", self.mpls_labels, 1, 16)
        _check_int(f"hop {self.name}: tbf burst", self.tbf_burst_bytes, 0, 10**10, " bytes (0: no tbf)")
        if self.ip_mtu_bytes < 68:
            raise ValueError(f"hop {self.name}: MTU {self.mtu} minus {self.encap_overhead_bytes} bytes of "
                             f"encapsulation leaves {self.ip_mtu_bytes} for IP; IPv4 needs at least 68")

    @property
    def encap_bits(self) -> int:
        bits = 0
        for e in self.encap:
            bits |= ENCAP_NAMES[e]
        return bits

    @property
    def encap_overhead_bytes(self) -> int:
        return int(encap_overhead_bytes(self.encap_bits, self.mpls_labels))

    @property
    def ip_mtu_bytes(self) -> int:
        """The largest IP packet this hop forwards (e.g. 1492 for PPPoE over 1500)."""
        return self.mtu - self.encap_overhead_bytes

    @property
    def frame_overhead_bytes(self) -> int:
        """Bytes a frame carries besides the IP packet: Ethernet plus encapsulations."""
        return ETH_HLEN + self.encap_overhead_bytes


@dataclass(frozen=True)
class Receiver:
    """The receiver's NIC and NAPI: GRO (or LRO), RX checksum state, poll batching.

    ``napi_delay_ns``: interrupt coalescing, the time from the first packet
    of a batch to the NAPI poll that takes up to ``napi_budget`` packets.
    """

    gro: bool = True
    lro: bool = False
    rx_csum: str = "unnecessary"
    napi_budget: int = 64
    napi_delay_ns: int = 20_000
    gro_max_size: int = 65536

    def __post_init__(self):
        _check_bools(self)
        if self.rx_csum not in RX_CSUM_NAMES:
            raise ValueError(f"RX checksum state {self.rx_csum!r}: use one of {', '.join(RX_CSUM_NAMES)}")
        _check_int("NAPI budget", self.napi_budget, 1, 4096, " packets per poll (Linux uses 64)")
        _check_int("NAPI delay", self.napi_delay_ns, 0, 100_000_000, " ns")
        _check_int("gro_max_size", self.gro_max_size, 1500, 512 * 1024, " bytes (Linux default 65536)")


@dataclass(frozen=True)
class Flow:
    """How one flow differs from the scenario's defaults (``Scenario.per_flow``), as ns-3 lets flows differ.

    ``bytes``: this flow's transfer (None: ``bytes_per_flow``); ``start_ns``:
    when it starts; ``extra_rtt_ns``: RTT on top of the path's (an access
    link's delay, added to the flow's ACK path); ``cc``: its congestion control
    (None: ``tcp.cc``).
    """

    bytes: int | None = None
    start_ns: int = 0
    extra_rtt_ns: int = 0
    cc: str | None = None

    def __post_init__(self):
        if self.bytes is not None:
            _check_int("flow bytes", self.bytes, 1, 10**13)
        _check_int("flow start", self.start_ns, 0, 3600 * 10**9, " ns")
        _check_int("flow extra RTT", self.extra_rtt_ns, 0, 10**11, " ns")
        if self.cc is not None and self.cc not in CC_NAMES:
            raise ValueError(f"flow congestion control {self.cc!r}: choose one of {', '.join(CC_NAMES)}")


@dataclass(frozen=True)
class Scenario:
    """Flows from a sender through its NIC and a path of hops to a receiver.

    Give ``bytes_per_flow`` (a finite transfer, run to completion) and/or
    ``duration_ns`` (simulated time). Capture-point names can follow a
    report (``sender_point="guest"``, ``wire_point="macvtap"``, ...).

    Parameters
    ----------
    tcp : Tcp
        The TCP sender and receiver (MSS, timestamps, the kernel's loss-recovery rules).
    nic : Nic
        The sender's NIC: TSO, GSO, TX checksum offload, MTU, rate.
    path : tuple of Hop
        The links in order; at least one (the bottleneck).
    receiver : Receiver
        GRO and receive checksum offload at the receiver.
    flows : int
        Concurrent flows (1-64).
    bytes_per_flow, duration_ns : int or None
        How much each flow sends, or for how long (simulated nanoseconds).
    seed : int
        Seed of the random numbers (initial sequence numbers, timestamps, random loss).
    sender_point, wire_point, receiver_point : str
        Names of the capture points.
    trace_limit : int
        Packets recorded per capture point (the first ones); statistics always cover the whole run.
    sample_ns : int or None
        Interval of the cwnd/delivery time series (None: about 1000 samples over the run).
    per_flow : tuple of Flow
        One :class:`Flow` per flow when flows differ (size, start, RTT, congestion control).
    ip_version : int
        4, or 6: a 40-byte IPv6 header on every packet (MSS 1428 with timestamps at MTU 1500), no IP ID.
    """

    tcp: Tcp = field(default_factory=Tcp)
    nic: Nic = field(default_factory=Nic)
    path: tuple[Hop, ...] = field(default_factory=lambda: (Hop(),))
    receiver: Receiver = field(default_factory=Receiver)
    flows: int = 1
    bytes_per_flow: int | None = None
    duration_ns: int | None = None
    seed: int = 1
    sender_point: str = "sender"
    wire_point: str = "wire"
    receiver_point: str = "receiver"
    trace_limit: int = 20_000
    sample_ns: int | None = None
    per_flow: tuple[Flow, ...] = ()
    ip_version: int = 4

    def __post_init__(self):
        path = (self.path,) if isinstance(self.path, Hop) else tuple(self.path)
        object.__setattr__(self, "path", path)
        if not path:
            raise ValueError("the path needs at least one hop (the bottleneck link)")
        for part, cls in ((self.tcp, Tcp), (self.nic, Nic), (self.receiver, Receiver)):
            if not isinstance(part, cls):
                raise ValueError(f"{cls.__name__.lower()} must be a {cls.__name__}, not {type(part).__name__}")
        for h in path:
            if not isinstance(h, Hop):
                raise ValueError(f"path entries must be Hop objects, not {type(h).__name__}")
        _check_int("flows", self.flows, 1, 64)
        object.__setattr__(self, "per_flow", tuple(self.per_flow))
        if self.per_flow and (len(self.per_flow) != self.flows
                              or not all(isinstance(f, Flow) for f in self.per_flow)):
            raise ValueError(f"per_flow: give one Flow per flow ({self.flows}), not {len(self.per_flow)} entries")
        if self.bytes_per_flow is not None:
            _check_int("bytes per flow", self.bytes_per_flow, 1, 10**13)
        if None in self.flow_bytes and self.duration_ns is None:
            raise ValueError("say how much to send: bytes_per_flow (e.g. 10_000_000) or duration_ns")
        if self.duration_ns is not None:
            _check_int("duration", self.duration_ns, 1000, 3600 * 10**9, " ns (at most one hour)")
        _check_int("seed", self.seed, 0, 2**63 - 1)
        if self.ip_version not in (4, 6):
            raise ValueError(f"ip_version {self.ip_version!r}: choose 4 or 6")
        if self.ip_version == 6 and self.nic.model.startswith("rtl8139"):
            raise ValueError(f"NIC model {self.nic.model} with IPv6: 8139cp offers TSO for IPv4 only (no TSO6), "
                             f"so the stack segments IPv6 in software; use nic 'sw-gso' or 'hw-tso'")
        _check_int("trace limit", self.trace_limit, 0, 50_000_000, " packets per capture point")
        if self.sample_ns is not None:
            _check_int("sample interval", self.sample_ns, 1000, None, " ns")
        names = self.point_names
        if len(set(names)) != len(names):
            raise ValueError(f"capture point names must differ: {names}")
        # MSS: given, or from the NIC MTU and the clamp; it must fit in the NIC MTU.
        opts = self.tcp.options_bytes
        if self.tcp.mss is not None:
            check_mss_fits(self.tcp.mss, self.nic.mtu, timestamps=self.tcp.timestamps, ip_hlen=self.ip_hlen)
        units = self.flows * (self.tcp.rwnd_bytes // max(self.mss_bytes, 1))
        if units > 4_000_000:
            raise ValueError(f"{self.flows} flow(s) x a {self.tcp.rwnd_bytes}-byte receive window of "
                             f"{self.mss_bytes}-byte segments is {units} segments in flight: too many to "
                             f"simulate; lower rwnd_bytes or flows, or raise the MSS")
        for h in self.path:
            frame = min(self.nic.mtu, h.ip_mtu_bytes) + h.frame_overhead_bytes
            if h.queue_bytes is not None and h.queue_bytes < frame:
                raise ValueError(f"hop {h.name}: a {h.queue_bytes}-byte queue cannot hold one {frame}-byte "
                                 f"frame (every packet would be dropped); give at least {frame} bytes")
        if self.mss_bytes < 8:
            raise ValueError(f"MTU {self.nic.mtu} leaves {self.mss_bytes} payload bytes per segment; "
                             f"use an MTU of at least {self.ip_hlen + TCP_HLEN + opts + 48}")

    @property
    def ip_hlen(self) -> int:
        """Bytes of the IP header on every packet: 20 (IPv4, no options) or 40 (IPv6)."""
        return IPV6_HLEN if self.ip_version == 6 else IP_HLEN

    @property
    def mss_bytes(self) -> int:
        """Payload bytes per segment the sender uses at the start (``mss_now``)."""
        if self.tcp.mss is not None:
            return self.tcp.mss
        mss = self.nic.mtu - self.ip_hlen - TCP_HLEN
        if self.tcp.mss_clamp is not None:
            mss = min(mss, self.tcp.mss_clamp)
        return max(mss, TCP_MIN_SND_MSS) - self.tcp.options_bytes

    @property
    def flow_bytes(self) -> tuple[int | None, ...]:
        """Bytes each flow sends (None: until the duration ends)."""
        return tuple(self.flow(i).bytes for i in range(self.flows))

    def flow(self, i: int) -> Flow:
        """Flow ``i`` with the scenario's defaults filled in."""
        f = self.per_flow[i] if self.per_flow else Flow()
        return Flow(bytes=f.bytes if f.bytes is not None else self.bytes_per_flow, start_ns=f.start_ns,
                    extra_rtt_ns=f.extra_rtt_ns, cc=f.cc or self.tcp.cc)

    @property
    def point_names(self) -> tuple[str, ...]:
        """Capture points in path order: sender, wire, one per hop, receiver."""
        return (self.sender_point, self.wire_point, *(h.name for h in self.path), self.receiver_point)

    @property
    def base_rtt_ns(self) -> int:
        """Round-trip propagation delay (no queueing, no serialization)."""
        return 2 * sum(h.delay_ns for h in self.path)

    @property
    def bottleneck_bps(self) -> int:
        return min([self.nic.rate_bps] + [h.rate_bps for h in self.path])

    def replace(self, **changes) -> "Scenario":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def simple(cls, rate_bps: int = 100_000_000, rtt_ns: int = 20_000_000, loss: float = 0.0,
               mss: int | None = None, mtu: int = 1500, path_mtu: int | None = None, tso: bool = True,
               gso: bool | None = None, gro: bool = True, nic: str = "hw-tso", cc: str = "cubic",
               duration_ns: int | None = None, bytes_per_flow: int | None = None, flows: int = 1,
               seed: int = 1, queue_packets: int | None = None, icmp: bool = False, queue_bytes: int | None = None,
               kernel: str | None = None, mtu_probing: int = 0, **scenario) -> "Scenario":
        """One bottleneck hop of ``rate_bps`` and ``rtt_ns``; the NIC runs at max(rate, 1 Gbit/s).

        The default queue holds one bandwidth-delay product (at least 100 packets), capped at what
        the flows' receive windows can put in flight (a bigger queue never fills); ``queue_bytes``
        alone makes it a byte limit (a tbf ``limit`` with a :data:`TBF_BURST_BYTES` burst, which
        queues GSO skbs whole: ``Hop.tbf_burst_bytes``). ``kernel``: the TCP rules of that Linux
        release (:func:`kernel_rules`, default the newest).
        """
        if queue_packets is None and queue_bytes is None:
            bdp_pkts = rate_bps * rtt_ns // 8 // 10**9 // max(mtu, 576)
            payload = mss or min(mtu, path_mtu or mtu) - IP_HLEN - TCP_HLEN - tcp_options_bytes(True)
            in_flight = flows * Tcp().rwnd_bytes // max(payload, 8) + 64
            queue_packets = int(max(100, min(bdp_pkts, in_flight)))
        hop = Hop("path", rate_bps=rate_bps, delay_ns=rtt_ns // 2, mtu=mtu if path_mtu is None else path_mtu,
                  loss=loss, queue_packets=queue_packets, queue_bytes=queue_bytes, icmp=icmp,
                  tbf_burst_bytes=TBF_BURST_BYTES if queue_bytes is not None and queue_packets is None else 0)
        tcp = Tcp(mss=mss, cc=cc, mtu_probing=mtu_probing, **kernel_rules(kernel))
        return cls(tcp=tcp, nic=Nic(model=nic, tso=tso, gso=tso if gso is None else gso,
                                                     mtu=mtu, rate_bps=max(rate_bps, 1_000_000_000)),
                   path=(hop,), receiver=Receiver(gro=gro), flows=flows, bytes_per_flow=bytes_per_flow,
                   duration_ns=duration_ns, seed=seed, **scenario)
