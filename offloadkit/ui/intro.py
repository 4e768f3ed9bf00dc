"""The "intro" dashboard: one super-packet through segmentation, a hop, and GRO.

:func:`one_packet` is the model behind it, usable on its own in notebook cells::

    r = one_packet(mss=1440, nic="rtl8139-legacy", encap="PPPoE")
    r.sizes("wire")        # [1448, 1432]: QEMU cut at 1500 - 20 - 32
    r.lines["after hop"]   # tcpdump -n -S -t lines; the 1500-byte packet is gone

The story, stage by stage (capture point names in quotes):

1. TCP hands the driver one ``payload``-byte packet. With TSO on (which Linux
   only allows with TX checksum offload) it stays one super-packet with
   gso_size = ``mss`` and the NIC cuts it (``nic`` model). With TSO on but
   checksum offload off, the kernel turns TSO off and segments in software
   (GSO, with a software checksum per segment). With TSO/GSO off, TCP builds
   MSS-sized packets itself. "sender stack" is what tcpdump on the sender
   prints: the tap sits after software GSO but before the NIC, so only
   hardware TSO shows the super-packet there.
2. "wire": the frames the NIC sends (a device that cannot segment drops the
   super-packet here).
3. "after hop": one link of MTU ``mtu`` carrying the packets inside
   ``encap`` (which eats into the MTU: PPPoE leaves 1492 of 1500). DF packets
   that do not fit are dropped silently (a PMTUD black hole).
4. "after GRO": what tcpdump on the receiver prints, after GRO (if on) with
   the receiver NIC validating checksums (``csum_offload``) or not.

Software checksum passes are counted by place (engine.checksum.CsumPasses).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import codes
from ..engine import checksum
from ..engine.gro import GroParams, GroResult, gro
from ..engine.path import apply_hop
from ..engine.segment import check_mss_fits, segment, tcp_options_bytes
from ..io.tcpdump import render
from ..sim.scenario import Hop
from ..trace import Trace
from . import views
from .dashboard import Dashboard, apply_overrides, choice, int_slider, toggle

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
ETH_OVERHEAD_BYTES = 14 + 4 + 8 + 12   # header, FCS, preamble, inter-frame gap
MAX_PAYLOAD = 65535 - IP_HLEN - TCP_HLEN - 12
SENDER_IP, RECEIVER_IP = 0xC6120001, 0xC6120102   # 198.18.0.1 -> 198.18.1.2 (benchmarking range)


@dataclass(frozen=True, eq=False)
class OnePacket:
    """The result: every capture point's packets, tcpdump lines and the checksum work."""

    settings: dict
    trace: Trace                       # all capture points (POINTS), dropped packets included
    lines: dict[str, list[str]]        # tcpdump -n -S -t lines of the packets seen at each point
    passes: checksum.CsumPasses        # software checksum passes, sender and receiver
    gro: GroResult
    tso_effective: bool
    hop: Hop
    notes: list[str] = field(default_factory=list)

    def at(self, point: str) -> Trace:
        return self.trace.at(point)

    def sizes(self, point: str, delivered_only: bool = True) -> list[int]:
        """TCP payload bytes of the packets at ``point`` (dropped ones excluded by default)."""
        t = self.at(point)
        if delivered_only:
            t = t[t.drop == codes.DROP_NONE]
        return [int(x) for x in t.payload_len]

    def ip_lengths(self, point: str, delivered_only: bool = True) -> list[int]:
        """IP total lengths of the packets at ``point`` (dropped ones excluded by default)."""
        t = self.at(point)
        if delivered_only:
            t = t[t.drop == codes.DROP_NONE]
        return [int(x) for x in t.ip_len]

    @property
    def hop_payload_limit(self) -> int:
        """The largest TCP payload (with timestamps) that fits the hop: IP MTU - 20 - 32."""
        return self.hop.ip_mtu_bytes - IP_HLEN - TCP_HLEN - tcp_options_bytes(timestamps=True)

    @property
    def dropped(self) -> Trace:
        t = self.at("after hop")
        w = self.at("wire")
        return Trace.concat([w[w.drop != 0], t[t.drop != 0]])

    @property
    def delivered_bytes(self) -> int:
        return int(self.at("after GRO").payload_len.sum())

    @property
    def wire_bytes(self) -> int:
        """Bytes the sender's link carries, Ethernet preamble, FCS and gap included."""
        w = self.at("wire")
        sent = w[w.drop == 0]
        return int((sent.ip_len.astype(np.int64) + ETH_OVERHEAD_BYTES).sum())

    @property
    def efficiency(self) -> float:
        """Delivered TCP payload / bytes on the sender's link."""
        return self.delivered_bytes / self.wire_bytes if self.wire_bytes else 0.0

    def passes_by_place(self) -> list[dict]:
        """[{place, count, bytes}] per software checksum place, in PASS_* order."""
        rows = []
        for place in sorted(set(int(p) for p in self.passes.place)):
            sel = self.passes.place == place
            rows.append({"place": place, "count": int(sel.sum()), "bytes": int(self.passes.nbytes[sel].sum())})
        return rows


def super_packet(payload: int, mss: int) -> Trace:
    """The sender's TCP packet: one ``payload``-byte skb (gso_size ``mss`` when TSO/GSO builds it)."""
    if not 1 <= payload <= MAX_PAYLOAD:
        raise ValueError(f"payload {payload} bytes is outside 1..{MAX_PAYLOAD} (one IP packet is at most 64 KB)")
    segs = -(-payload // mss)
    opts = tcp_options_bytes(timestamps=True)
    t = Trace.from_columns(
        points=("sender stack",), seq=1, ack=1, payload_len=payload, flags=codes.ACK | codes.PSH,
        window=502, tcp_hlen=TCP_HLEN + opts, opt_ts=True, tsval=100, tsecr=200,
        ip_len=IP_HLEN + TCP_HLEN + opts + payload, ip_id=4242, src_ip=SENDER_IP, dst_ip=RECEIVER_IP,
        sport=40000, dport=5001, gso_size=mss if segs > 1 else 0, gso_segs=segs if segs > 1 else 0,
        gso_type=codes.GSO_TCPV4 if segs > 1 else 0, csum_state=codes.CSUM_PARTIAL)
    return checksum.fill_checksums(t)


def _on_wire(t: Trace) -> Trace:
    """Segments as they leave the NIC: the NIC completed any CHECKSUM_PARTIAL checksum."""
    return checksum.fill_checksums(t.replace(csum_state=np.where(
        t.csum_state == codes.CSUM_PARTIAL, codes.CSUM_NONE, t.csum_state)))


def one_packet(mss: int = 1448, mtu: int = 1500, payload: int = 2880, tso: bool = True, gro_on: bool = True,
               csum_offload: bool = True, nic: str = "hw-tso", encap: str = "none") -> OnePacket:
    """Send one ``payload``-byte TCP write through the sender, one hop and the receiver."""
    if nic not in NICS:
        raise ValueError(f"unknown NIC {nic!r}; choose one of {', '.join(NICS)}")
    if encap not in ENCAPS:
        raise ValueError(f"unknown encapsulation {encap!r}; choose one of {', '.join(ENCAPS)}")
    check_mss_fits(mss, mtu, timestamps=True)
    hop = Hop(mtu=int(mtu), encap=(encap.lower(),) if ENCAPS[encap] else ())
    notes = []
    sp = super_packet(int(payload), int(mss))
    gso = bool(tso) and bool(sp.gso_size[0] > 0)
    tso_hw = gso and csum_offload
    passes = []
    if tso_hw:                                  # the NIC segments; tcpdump on the sender sees the super-packet
        sender = sp
        wire = segment(sp, nic=nic)
    elif gso:                                   # TSO needs TX checksum offload: software GSO
        notes.append("TSO needs TX checksum offload: with checksum offload off the kernel turns TSO off "
                     "(ethtool: 'tcp-segmentation-offload: off [requested on]') and segments in software.")
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
        passes.append(checksum.tx_checksum(wire, device_can_csum=csum_offload))
        sender = wire
    if nic != "hw-tso" and not tso_hw:
        notes.append(f"The NIC model ({NICS[nic]}) only matters when it does the segmenting (TSO on).")
    wire = _on_wire(wire)
    sent = wire[wire.drop == codes.DROP_NONE]
    hop_t = apply_hop(sent, hop.mtu, hop.encap_bits, hop.icmp, hop.mpls_labels)
    arrived = hop_t[hop_t.drop == codes.DROP_NONE]
    g = gro(arrived, GroParams(enabled=bool(gro_on), rx_csum="unnecessary" if csum_offload else "none",
                               poll_gap_ns=None))
    passes += [g.passes, checksum.stack_rx_passes(g.out)]
    trace = Trace.concat([sender.with_point(POINTS[0]), wire.with_point(POINTS[1]),
                          hop_t.with_point(POINTS[2]), g.out.with_point(POINTS[3])])
    trace = Trace(trace.columns, POINTS, trace.meta)
    seen = {POINTS[0]: sender[sender.drop == codes.DROP_NONE], POINTS[1]: sent, POINTS[2]: arrived, POINTS[3]: g.out}
    lines = {p: render(t, relative=False, time=False) for p, t in seen.items()}
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
    settings = dict(mss=mss, mtu=mtu, payload=payload, tso=tso, gro=gro_on, csum_offload=csum_offload,
                    nic=nic, encap=encap)
    return OnePacket(settings, trace, lines, checksum.CsumPasses.concat(passes), g, bool(tso_hw), hop, notes)


# -- the dashboard ---------------------------------------------------------------
def sizes_text(sizes: list[int]) -> str:
    """[1448, 1448, 1448, 288] -> '3×1448 + 288'."""
    parts, i = [], 0
    while i < len(sizes):
        j = i
        while j < len(sizes) and sizes[j] == sizes[i]:
            j += 1
        parts.append(f"{j - i}×{sizes[i]}" if j - i > 1 else str(sizes[i]))
        i = j
    return " + ".join(parts) or "nothing"


def readout(r: OnePacket) -> str:
    """The one-line summary under the controls (the browser tests read it)."""
    wire = r.sizes("wire")
    recv = r.sizes("after GRO")
    n_pass = len(r.passes)
    return (f"wire: {sizes_text(wire)} B · dropped: {len(r.dropped)} · receiver stack: "
            f"{len(recv)} packet{'s' if len(recv) != 1 else ''} ({sizes_text(recv)} B) · "
            f"software checksums: {n_pass} pass{'es' if n_pass != 1 else ''}, {r.passes.total_bytes()} B · "
            f"efficiency {100 * r.efficiency:.1f} %")


def static_html(r: OnePacket) -> str:
    """tcpdump lines per capture point as HTML (the stored notebook's fallback)."""
    import html
    parts = [f"<p><b>{html.escape(p)}</b></p><pre>{html.escape(chr(10).join(lines) or '(no packets)')}</pre>"
             for p, lines in r.lines.items()]
    return "".join(parts)


def size_rules(r: OnePacket) -> list[tuple[str, int]]:
    """Reference lines for the sizes chart: the MSS, and the largest payload the hop carries."""
    mss, fits = r.settings["mss"], r.hop_payload_limit
    if mss == fits:
        return [(f"MSS {mss} = hop limit", mss)]
    return [(f"MSS {mss}", mss), (f"hop carries ≤ {fits}", fits)]


def compute(v: dict) -> OnePacket:
    return one_packet(mss=v["mss"], mtu=v["mtu"], payload=v["payload"], tso=v["tso"], gro_on=v["gro"],
                      csum_offload=v["csum_offload"], nic=v["nic"], encap=v["encap"])


VIEWS = {
    "trace": lambda r: views.trace_text(r.lines, max_lines=8, font_size=9),
    "sizes": lambda r: views.segment_sizes(r.trace, POINTS, rules=size_rules(r)),
    "checksum": lambda r: views.checksum_passes(r.passes_by_place()),
}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:980px'>One TCP write of <i>payload</i> bytes leaves "
               "the sender (MSS = payload bytes per segment), crosses one link of the given MTU inside the "
               "chosen encapsulation, and reaches the receiver's GRO. Drops are red. Move a control: "
               "everything below is recomputed by <code>offloadkit</code>.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("intro", mss=..., mtu=..., payload=..., tso=..., gro=..., csum_offload=..., nic=..., encap=...)``."""
    controls = {
        "mss": int_slider("MSS", 1448, 200, 9000),
        "mtu": int_slider("MTU", 1500, 576, 9000),
        "payload": int_slider("payload", 2880, 100, 64000),
        "tso": toggle("TSO/GSO", True),
        "gro": toggle("GRO", True),
        "csum_offload": toggle("checksum offload", True),
        "nic": choice("NIC", [(label, name) for name, label in NICS.items()], "hw-tso"),
        "encap": choice("encapsulation", list(ENCAPS), "none"),
    }
    apply_overrides(controls, overrides)
    return Dashboard("Offloads 101: one super-packet, end to end", controls, compute, VIEWS,
                     readout=readout, notes=lambda r: " ".join(r.notes) or None, static_html=static_html,
                     description=DESCRIPTION,
                     layout=[["trace"], ["sizes", "checksum"]])
