"""Link types and ethertypes: the one table of what the kit reads, scapy ``bind_layers`` style.

``LINKTYPES`` maps a pcap/pcapng link type to (name, link-header length, how the
network layer is found); ``ETHERTYPES`` maps an ethertype to the layer it carries.
The pcap file header's link-type word (and pcapng's ``if_fcslen``) may say that
every frame ends in an Ethernet FCS: :func:`split_linktype_field` separates the
link type from that flag (draft-ietf-opsawg-pcap, "LinkType and additional
information": bits 0-15 link type, bit 26 F, bits 28-31 FCS length in 16-bit words).
"""
from __future__ import annotations

import zlib

# link type -> (name, bytes in front of the network layer, how that layer is named)
#   "ether": an Ethernet header; "ethertype@N": a 16-bit ethertype at offset N;
#   "version": the IP version nibble; "ipv4"/"ipv6": fixed; "af-le"/"af-be": a 4-byte address family.
LINKTYPES: dict[int, tuple[str, int, str]] = {
    0: ("NULL (BSD loopback)", 4, "af-host"),
    1: ("Ethernet", 14, "ether"),
    12: ("raw IP", 0, "version"),
    14: ("raw IP", 0, "version"),
    101: ("raw IP", 0, "version"),
    108: ("OpenBSD loopback", 4, "af-be"),
    113: ("Linux cooked (SLL)", 16, "ethertype@14"),
    228: ("raw IPv4", 0, "ipv4"),
    229: ("raw IPv6", 0, "ipv6"),
    276: ("Linux cooked v2 (SLL2)", 20, "ethertype@0"),
}
LINKTYPE_ETHERNET = 1

# ethertype -> what follows
ETHERTYPES: dict[int, str] = {
    0x0800: "ipv4", 0x86DD: "ipv6",
    0x8100: "vlan", 0x88A8: "vlan", 0x9100: "vlan",
    0x8847: "mpls", 0x8848: "mpls",
    0x8864: "pppoe",
}
# PPP protocol (in a PPPoE session) -> ethertype it stands for
PPP_PROTOCOLS = {0x0021: 0x0800, 0x0057: 0x86DD, 0x0281: 0x8847}
# BSD loopback address families that mean IPv6 (they differ per OS)
AF_INET6 = (10, 24, 28, 30)
VXLAN_PORTS = (4789, 8472)
GENEVE_PORT = 6081
ETH_P_TEB = 0x6558      # GENEVE's protocol type for an inner Ethernet frame

LINKTYPE_MASK = 0x03FFFFFF
FCS_FLAG = 0x04000000


def split_linktype_field(field: int) -> tuple[int, int]:
    """(link type, FCS bytes at the end of every frame) of a pcap header's link-type word."""
    fcs = ((field >> 28) & 0xF) * 2 if field & FCS_FLAG else 0
    return field & LINKTYPE_MASK, fcs


def linktype_field(linktype: int, fcs_bytes: int) -> int:
    """The pcap header word for ``linktype`` whose frames end in ``fcs_bytes`` FCS bytes."""
    if not fcs_bytes:
        return linktype
    return linktype | FCS_FLAG | ((fcs_bytes // 2) & 0xF) << 28


def supported(linktype: int) -> bool:
    return linktype in LINKTYPES


def linktype_name(lt: int) -> str:
    return f"{LINKTYPES[lt][0] if lt in LINKTYPES else 'unsupported'} ({lt})"


def supported_names() -> str:
    """The link types the kit reads, for messages."""
    return ", ".join(sorted({name for name, _, _ in LINKTYPES.values()}))


def append_fcs(frame: bytes, orig_len: int, fcs: int) -> tuple[bytes, int]:
    """(frame, original length) with ``fcs`` FCS bytes put back on a rebuilt frame.

    A complete frame gets its CRC-32 (IEEE 802.3, little-endian on the wire; other
    FCS lengths are zero-filled); a frame cut by the snaplen only counts them."""
    if not fcs:
        return frame, orig_len
    if len(frame) == orig_len:
        crc = zlib.crc32(frame).to_bytes(4, "little") if fcs == 4 else bytes(fcs)
        frame = frame + crc
    return frame, orig_len + fcs
