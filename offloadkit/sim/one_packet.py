"""One TCP write through segmentation, one hop and GRO: the intro's pipeline.

    r = one_packet(mss=1440, nic="rtl8139-legacy", encap="PPPoE")
    r.sizes("wire")        # [1448, 1432]: QEMU cut at 1500 - 20 - 32
    r.lines["after hop"]   # tcpdump -n -S -t lines; the 1500-byte packet is marked dropped

The story, stage by stage (capture point names in quotes; spec: kernel-offload-spec.md
sections on TSO/GSO, GRO and checksum offload):

1. "sender stack": TCP hands the driver one ``payload``-byte packet. With TSO on
   (which Linux only allows with TX checksum offload, ``scenario.tso_requires_tx_csum``) it
   stays one super-packet with gso_size = ``mss`` and the NIC cuts it (``nic``
   model). TSO requested without ``tx_csum``: software GSO, a software checksum
   per segment. TSO/GSO off: TCP builds MSS-sized packets itself. tcpdump on the
   sender sits after software GSO, before the NIC.
2. "wire": the frames the NIC sends (a device that cannot segment drops here).
3. "after hop": one link of MTU ``mtu`` carrying the packets inside ``encap``;
   DF packets that do not fit are dropped silently (a PMTUD black hole).
4. "after GRO": what tcpdump on the receiver prints, after GRO (if on), the
   receiver NIC validating checksums (``rx_csum``) or not.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .. import codes
from ..engine import checksum
from ..engine import gro as engine_gro
from ..engine.gro import GroParams, GroResult
from ..engine.path import apply_hop
from ..engine.segment import check_mss_fits, mss_from_mtu, segment, tcp_options_bytes
from ..io.tcpdump import render
from .scenario import Hop, rx_csum_mode, tso_requires_tx_csum
from ..trace import Trace

POINTS = ("sender stack", "wire", "after hop", "after GRO")
NICS = {
    "hw-tso": "hardware TSO (honours the MSS)",
    "rtl8139-legacy": "QEMU rtl8139 before 7.2 (report 000)",
    "rtl8139-fixed": "QEMU rtl8139 7.2+ (fixed)",
    "drop-gso": "cannot segment: MPLS w/o inner protocol (report 001)",
}
ENCAPS = {"none": 0, "VLAN": codes.ENC_VLAN, "MPLS": codes.ENC_MPLS, "PPPoE": codes.ENC_PPPOE,
          "VXLAN": codes.ENC_VXLAN}
IP_HLEN, TCP_HLEN = 20, 20
IP_VERSIONS = {"IPv4": 4, "IPv6": 6}
ETH_OVERHEAD_BYTES = 14 + 4 + 8 + 12   # header, FCS, preamble, inter-frame gap
MAX_PAYLOAD = 65535 - IP_HLEN - TCP_HLEN - 12
SENDER_IP, RECEIVER_IP = 0xC6120001, 0xC6120102   # 198.18.0.1 -> 198.18.1.2 (benchmarking range)
SENDER_IP6 = list(bytes.fromhex("20010002000100000000000000000001"))     # 2001:2:1::1 -> 2001:2:2::2
RECEIVER_IP6 = list(bytes.fromhex("20010002000200000000000000000002"))
TSO_NEEDS_TX_CSUM = ("TSO needs TX checksum offload: without it Linux turns TSO off "
                     "('tcp-segmentation-offload: off [requested on]') and GSO segments in software.")


def ip_hlen(ip_version: int) -> int:
    """IP header bytes of the intro's packets: 20 (IPv4) or 40 (IPv6)."""
    if ip_version not in (4, 6):
        raise ValueError(f"ip_version {ip_version!r}: choose 4 or 6.")
    return 40 if ip_version == 6 else IP_HLEN


def max_mss(mtu: int, ip_version: int = 4) -> int:
    """The largest MSS (payload bytes, timestamps on) an ``mtu``-byte IPv4 or IPv6 packet carries."""
    return mss_from_mtu(int(mtu), timestamps=True, ip_hlen=ip_hlen(ip_version))


def packet_lines(t: Trace) -> list[list[str]]:
    """Per packet of ``t``, its ``tcpdump -n -S -t`` lines (an encapsulated packet: outer line, then the
    inner one); a dropped packet gets its drop reason after its line."""
    if len(t) == 0:
        return []
    return [(line + (f"  ✗ dropped here ({codes.DROP_NAMES.get(int(d), d)})" if d else "")).split("\n")
            for line, d in zip(render(t, relative=False, time=False), t.drop)]


def marked_lines(t: Trace) -> list[str]:
    """``tcpdump -n -S -t`` lines of ``t``; a dropped packet gets its drop reason after its line."""
    return [line for lines in packet_lines(t) for line in lines]


class PointLines(Mapping):
    """{point: ``marked_lines`` of its packets}, each point printed when first read; ``head`` prints
    only the first packets (a live view shows a few lines of hundreds of packets)."""

    def __init__(self, by_point: Mapping[str, Trace]):
        self._by_point, self._lines = by_point, {}

    def __getitem__(self, point: str) -> list[str]:
        if point not in self._lines:
            self._lines[point] = marked_lines(self._by_point[point])
        return self._lines[point]

    def __iter__(self):
        return iter(self._by_point)

    def __len__(self) -> int:
        return len(self._by_point)

    def head(self, point: str, max_lines: int) -> tuple[list[str], int]:
        """(the lines of the first whole packets at ``point`` that fit ``max_lines``, at least one;
        how many packets they are)."""
        lines, n = [], 0
        for rows in packet_lines(self._by_point[point][:max_lines]):
            if n and len(lines) + len(rows) > max_lines:
                break
            lines += rows
            n += 1
        return lines, n

    def __repr__(self) -> str:
        return f"PointLines({', '.join(self._by_point)})"


@dataclass(frozen=True, eq=False)
class OnePacket:
    """The result: every capture point's packets, tcpdump lines and the checksum work."""

    settings: dict
    trace: Trace                       # all capture points (POINTS), dropped packets included
    lines: Mapping[str, list[str]]     # tcpdump lines of every packet at each point, drops marked (PointLines)
    passes: checksum.CsumPasses        # software checksum passes, sender and receiver
    gro: GroResult
    tso_effective: bool
    hop: Hop
    notes: list[str] = field(default_factory=list)
    by_point: dict[str, Trace] = field(default_factory=dict)   # the same packets, per point (no copies)

    def at(self, point: str) -> Trace:
        return self.by_point[point] if point in self.by_point else self.trace.at(point)

    def packets(self, point: str) -> int:
        """Packets seen at ``point``, dropped ones included (what the trace panel heading counts)."""
        return len(self.at(point))

    def sizes(self, point: str, delivered_only: bool = True) -> list[int]:
        """TCP payload bytes of the packets at ``point`` (dropped ones excluded by default)."""
        t = self.at(point)
        v = t.payload_len[t.drop == codes.DROP_NONE] if delivered_only else t.payload_len
        return [int(x) for x in v]

    def ip_lengths(self, point: str, delivered_only: bool = True) -> list[int]:
        """IP total lengths of the packets at ``point`` (dropped ones excluded by default)."""
        t = self.at(point)
        v = t.ip_len[t.drop == codes.DROP_NONE] if delivered_only else t.ip_len
        return [int(x) for x in v]

    @property
    def hop_payload_limit(self) -> int:
        """The largest TCP payload (with timestamps) that fits the hop: IP MTU - 20 - 32."""
        return (self.hop.ip_mtu_bytes - ip_hlen(self.settings.get("ip_version", 4)) - TCP_HLEN
                - tcp_options_bytes(timestamps=True))

    @property
    def dropped(self) -> Trace:
        t = self.at("after hop")
        w = self.at("wire")
        return Trace.concat([w[w.drop != 0], t[t.drop != 0]])

    @property
    def dropped_count(self) -> int:
        """Packets dropped on the wire or at the hop."""
        return int((self.at("wire").drop != 0).sum() + (self.at("after hop").drop != 0).sum())

    @property
    def delivered_bytes(self) -> int:
        return int(self.at("after GRO").payload_len.sum())

    @property
    def wire_bytes(self) -> int:
        """Bytes the sender's link carries, Ethernet preamble, FCS and gap included."""
        w = self.at("wire")
        return int((w.ip_len[w.drop == 0].astype(np.int64) + ETH_OVERHEAD_BYTES).sum())

    @property
    def efficiency(self) -> float:
        """Efficiency: TCP payload delivered to the receiver / bytes on the sender's link
        (IP packets plus 38 bytes of Ethernet header, FCS, preamble and gap per frame)."""
        return self.delivered_bytes / self.wire_bytes if self.wire_bytes else 0.0

    def passes_by_place(self) -> list[dict]:
        """[{place, count, bytes}] per software checksum place, in PASS_* order."""
        rows = []
        for place in sorted({int(p) for p in self.passes.place}):
            sel = self.passes.place == place
            rows.append({"place": place, "count": int(sel.sum()), "bytes": int(self.passes.nbytes[sel].sum())})
        return rows


def super_packet(payload: int, mss: int, ip_version: int = 4) -> Trace:
    """The sender's TCP packet: one ``payload``-byte skb (gso_size ``mss`` when TSO/GSO builds it)."""
    ihl = ip_hlen(ip_version)
    if not 1 <= payload <= MAX_PAYLOAD:
        raise ValueError(f"payload {payload} bytes is outside 1..{MAX_PAYLOAD} (one IP packet is at most 64 KB); "
                         f"choose a smaller payload.")
    segs = -(-payload // mss)
    opts = tcp_options_bytes(timestamps=True)
    t = Trace.from_columns(
        points=("sender stack",), seq=1, ack=1, payload_len=payload, flags=codes.ACK | codes.PSH,
        window=502, tcp_hlen=TCP_HLEN + opts, opt_ts=True, tsval=100, tsecr=200,
        ip_len=ihl + TCP_HLEN + opts + payload, ip_id=4242 if ip_version == 4 else 0, sport=40000, dport=5001,
        gso_size=mss if segs > 1 else 0, gso_segs=segs if segs > 1 else 0, csum_state=codes.CSUM_PARTIAL,
        gso_type=(codes.GSO_TCPV4 if ip_version == 4 else codes.GSO_TCPV6) if segs > 1 else 0,
        **({"src_ip": SENDER_IP, "dst_ip": RECEIVER_IP} if ip_version == 4 else
           {"ip_version": 6, "ip_hlen": ihl, "src_ip6": [SENDER_IP6], "dst_ip6": [RECEIVER_IP6]}))
    return checksum.fill_checksums(t)


def _on_wire(t: Trace) -> Trace:
    """Segments as they leave the NIC: the NIC completed any CHECKSUM_PARTIAL checksum."""
    return checksum.fill_checksums(t.replace(csum_state=np.where(
        t.csum_state == codes.CSUM_PARTIAL, codes.CSUM_NONE, t.csum_state)))


def one_packet(mss: int = 1448, mtu: int = 1500, payload: int = 2880, tso: bool = True, gro: bool = True,
               tx_csum: bool = True, rx_csum: bool = True, nic: str = "hw-tso", encap: str = "none",
               ip_version: int = 4) -> OnePacket:
    """Send one ``payload``-byte TCP write through the sender, one hop and the receiver.

    ``ip_version`` 6: a 40-byte IPv6 header (no IP ID); the rtl8139 models have no TSO6, so the
    stack segments IPv6 in software before them (``engine.segment.cp_tso_family``).
    ``tx_csum``: the sender NIC's TX checksum offload; ``rx_csum``: the receiver
    NIC's RX checksum offload (CHECKSUM_UNNECESSARY, else GRO and TCP sum in software).
    """
    if nic not in NICS:
        raise ValueError(f"unknown NIC {nic!r}; choose one of {', '.join(NICS)}.")
    if encap not in ENCAPS:
        raise ValueError(f"unknown encapsulation {encap!r}; choose one of {', '.join(ENCAPS)}.")
    check_mss_fits(mss, mtu, timestamps=True, ip_hlen=ip_hlen(ip_version))
    hop = Hop(mtu=int(mtu), encap=(encap.lower(),) if ENCAPS[encap] else ())
    notes = []
    sp = super_packet(int(payload), int(mss), int(ip_version))
    gso = bool(tso) and bool(sp.gso_size[0] > 0)
    tso_hw = gso and tso_requires_tx_csum(tso, tx_csum)
    passes = []
    if tso_hw:                                  # the NIC segments; tcpdump on the sender sees the super-packet
        sender = sp
        wire = segment(sp, nic=nic)
    elif gso:                                   # TSO needs TX checksum offload: software GSO
        notes.append(TSO_NEEDS_TX_CSUM)
        if nic == "drop-gso":
            wire = segment(sp, nic="drop-gso")
        else:
            wire = segment(sp, nic="sw-gso", tx_csum=False)
            passes.append(checksum.sw_gso_passes(sp, device_can_csum=False))
        sender = wire
    else:                                       # TCP builds MSS-sized packets itself
        wire = segment(sp, gso_size=int(mss), nic="sw-gso", tx_csum=True) if sp.payload_len[0] > mss else sp
        wire = wire.replace(gso_size=np.zeros(len(wire)), gso_segs=np.zeros(len(wire)),
                            gso_type=np.zeros(len(wire)))
        passes.append(checksum.tx_checksum(wire, device_can_csum=bool(tx_csum)))
        sender = wire
    if nic != "hw-tso" and not tso_hw:
        notes.append(f"The NIC model ({NICS[nic]}) only matters when it does the segmenting (TSO on).")
    wire = _on_wire(wire)
    sent = wire[wire.drop == codes.DROP_NONE]
    hop_t = apply_hop(sent, hop.mtu, hop.encap_bits, hop.icmp, hop.mpls_labels)
    arrived = hop_t[hop_t.drop == codes.DROP_NONE]
    g = engine_gro.gro(arrived, GroParams(enabled=bool(gro), rx_csum=rx_csum_mode(rx_csum), poll_gap_ns=None))
    passes += [g.passes, checksum.stack_rx_passes(g.out)]
    trace = Trace.concat([sender.with_point(POINTS[0]), wire.with_point(POINTS[1]),
                          hop_t.with_point(POINTS[2]), g.out.with_point(POINTS[3])])
    trace = Trace(trace.columns, POINTS, trace.meta)
    seen = {POINTS[0]: sender, POINTS[1]: wire, POINTS[2]: hop_t, POINTS[3]: g.out}
    lines = PointLines(seen)
    n_wire_drop = int((wire.drop != 0).sum())
    if n_wire_drop:
        reason = codes.DROP_NAMES[int(wire.drop[wire.drop != 0][0])]
        notes.append(f"The device could not segment the {int(sp.payload_len[0])}-byte packet and dropped it "
                     f"({reason}): nothing reached the wire.")
    n_hop_drop = int((hop_t.drop != 0).sum())
    if n_hop_drop:
        big = int(hop_t.ip_len[hop_t.drop != 0].max())
        notes.append(f"{n_hop_drop} packet(s) of up to {big} IP bytes did not fit the hop: MTU {mtu} "
                     f"- {encap if encap != 'none' else 'no encapsulation'} ({hop.encap_overhead_bytes}) leaves "
                     f"{hop.ip_mtu_bytes}; dropped silently (no ICMP: a PMTUD black hole).")
    settings = {"mss": mss, "mtu": mtu, "payload": payload, "tso": tso, "gro": gro, "tx_csum": tx_csum,
                "rx_csum": rx_csum, "nic": nic, "encap": encap, "ip_version": ip_version}
    return OnePacket(settings, trace, lines, checksum.CsumPasses.concat(passes), g, bool(tso_hw), hop, notes,
                     {p: t.with_point(p) for p, t in seen.items()})
