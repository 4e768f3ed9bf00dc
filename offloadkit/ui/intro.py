"""The "intro" dashboard: one super-packet through segmentation, a hop, and GRO.

The model is :func:`offloadkit.sim.one_packet.one_packet` (usable on its own in
notebook cells); every control is one of its arguments, with the same name.
"""
from __future__ import annotations

from ..sim.one_packet import ENCAPS, IP_VERSIONS, NICS, POINTS, OnePacket, max_mss, one_packet
from . import views
from .controls import choice, control
from .dashboard import Dashboard


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
    return (f"wire: {sizes_text(wire)} B · dropped: {r.dropped_count} · receiver stack: "
            f"{len(recv)} packet{'s' if len(recv) != 1 else ''} ({sizes_text(recv)} B) · "
            f"software checksums: {n_pass} pass{'es' if n_pass != 1 else ''}, {r.passes.total_bytes()} B · "
            f"efficiency {100 * r.efficiency:.1f} %")


def static_html(r: OnePacket) -> str:
    """tcpdump lines per capture point as HTML (the stored notebook's fallback)."""
    return views.excerpt_html(r.lines, {p: r.packets(p) for p in POINTS})


def size_rules(r: OnePacket) -> list[tuple[str, int]]:
    """Reference lines for the sizes chart: the MSS, and the largest payload the hop carries."""
    mss, fits = r.settings["mss"], r.hop_payload_limit
    if mss == fits:
        return [(f"MSS {mss} = hop limit", mss)]
    return [(f"MSS {mss}", mss), (f"hop carries ≤ {fits}", fits)]


def compute(v: dict) -> OnePacket:
    return one_packet(**v)


VIEWS = {
    "sizes": lambda r: views.segment_sizes(r.trace, POINTS, rules=size_rules(r)),
    "checksum": lambda r: views.checksum_passes(r.passes_by_place()),
}
def trace_panel(r: OnePacket, max_lines: int = 8) -> str:
    """The first packets' tcpdump lines per point (only those are printed: a write of 64 KB is hundreds)."""
    heads = {p: r.lines.head(p, max_lines) for p in POINTS}
    return views.excerpt_html({p: lines for p, (lines, _) in heads.items()}, {p: r.packets(p) for p in POINTS},
                              max_lines=max_lines, hidden={p: r.packets(p) - n for p, (_, n) in heads.items()},
                              fixed=True)


TEXTS = {"trace": trace_panel}

DESCRIPTION = ("<p style='margin:2px 0 6px 0;max-width:100%'>One TCP write of <i>payload</i> bytes leaves "
               "the sender (MSS = TCP payload bytes per segment), crosses one link of the given MTU inside the "
               "chosen encapsulation, and reaches the receiver's GRO. The MSS slider ends at what the MTU "
               "carries. <i>Efficiency</i>: TCP payload delivered / bytes on the sender's link (Ethernet "
               "framing included). Move a control: everything below is recomputed by "
               "<code>offloadkit.sim.one_packet</code>.</p>")


def build(**overrides) -> Dashboard:
    """``dashboard("intro", mss=..., mtu=..., payload=..., tso=..., gro=..., tx_csum=..., rx_csum=...,
    nic=..., encap=..., ip_version=...)``: the arguments of ``one_packet``."""
    controls = {
        "mss": control("mss", 1448, 88, max_mss(9000)),
        "mtu": control("mtu", 1500, 576, 9000),
        "payload": control("payload", 2880, 100, 64000),
        "tso": control("tso", True, label="TSO/GSO"),
        "gro": control("gro", True, where="receiver"),
        "tx_csum": control("tx_csum", True, where="sender"),
        "rx_csum": control("rx_csum", True, where="receiver"),
        "nic": choice("NIC", [(label, name) for name, label in NICS.items()], "hw-tso"),
        "encap": choice("encapsulation", list(ENCAPS), "none"),
        "ip_version": control("ip_version", 4, options=list(IP_VERSIONS.items())),
    }
    return Dashboard("Offloads 101: one super-packet, end to end", controls, compute, VIEWS, texts=TEXTS,
                     readout=readout, notes=lambda r: " ".join(r.notes) or None, static_html=static_html,
                     description=DESCRIPTION, mss_max=lambda v: max_mss(v["mtu"], v["ip_version"]), overrides=overrides,
                     layout=[["trace"], ["sizes", "checksum"]])
