"""Trace rows -> frame bytes: the builder behind pcap export and the tcpdump-text oracle.

Packets are built by hand, byte by byte, so that checksums are exactly what the
trace says:

- TCP checksum: ``csum_state == CSUM_PARTIAL`` -> the pseudo-header sum a NIC
  with TX checksum offload would complete (what tcpdump shows on the sender);
  ``csum_bad`` -> the ``tcp_csum`` column (made wrong if it happens to be right);
  otherwise the correct checksum over the payload written.
- IP header checksum: always correct.

The payload is synthetic (zeros) unless the caller supplies bytes per row. TCP
options are laid out by :func:`offloadkit.packet.tcp_options.options_bytes`. A
model super-packet whose IP total length exceeds 65535 is written with IP total
length 0, as captured TSO packets are (IPv6: payload length 0 and the hop-by-hop jumbo
header, as BIG TCP writes it; flow label and traffic class from the row). Encapsulations (VLAN, PPPoE, MPLS; VXLAN or
GENEVE outermost) come from the ``encap`` column.
"""
from __future__ import annotations

import struct
from typing import Callable, Sequence, Union

from .. import codes
from ..trace import Trace
from .csum import ip_header_checksum, tcp_checksums, tcp_field_value
from .decode import HOP_JUMBO_HLEN, IPV6_TLV_JUMBO
from .link import ETH_P_TEB
from .tcp_options import options_bytes

SNAPLEN = 262144
ETH_SRC = bytes.fromhex("020000000001")
ETH_DST = bytes.fromhex("020000000002")
VXLAN_PORT = 4789
GENEVE_PORT = 6081
VXLAN_OUTER_SRC = bytes([198, 18, 255, 1])
VXLAN_OUTER_DST = bytes([198, 18, 255, 2])
PAYLOAD_SOURCE = Union[None, Callable[[int], bytes], Sequence[bytes]]
IPPROTO_TCP = 6


# -- frame building -------------------------------------------------------
class Rows:
    """Columns as Python lists (fast scalar access)."""

    def __init__(self, trace: Trace):
        self.c = {k: v.tolist() for k, v in trace.columns.items()}

    def __getitem__(self, key):
        return self.c[key]


def _payload_for(payload: PAYLOAD_SOURCE, i: int) -> bytes | None:
    if payload is None:
        return None
    return bytes(payload(i) if callable(payload) else payload[i])


def build_packet(r: Rows, i: int, data: bytes | None, zeros: bool = True) -> tuple[bytes, bytes, int]:
    """(L2+encapsulation bytes, IP datagram headers+known payload, full IP datagram length).

    ``data`` is the row's payload (None: zeros of ``payload_len``, appended only if ``zeros``).
    """
    c = r.c
    plen = int(c["payload_len"][i])
    if plen < 0:
        raise ValueError(f"row {i}: negative payload_len {plen}")
    if data is None:
        data = bytes(plen) if zeros else b""
    elif len(data) > plen:
        raise ValueError(f"row {i}: {len(data)} payload bytes supplied for a packet whose "
                         f"payload_len is {plen}")
    version = c["ip_version"][i]
    flags = c["flags"][i]
    opts = options_bytes(c["opt_mss"][i], c["opt_sackok"][i], c["opt_ts"][i], c["tsval"][i],
                       c["tsecr"][i], c["opt_wscale"][i], c["sack_n"][i], c["sack"][i], c["tcp_hlen"][i])
    thl = 20 + len(opts)
    tcp_wo = struct.pack("!HHIIBBHHH", c["sport"][i], c["dport"][i], c["seq"][i], c["ack"][i],
                         (thl // 4) << 4 | (flags >> 8 & 1), flags & 0xFF, c["window"][i], 0,
                         c["urg_ptr"][i]) + opts
    if version == 6:
        src, dst = bytes(c["src_ip6"][i]), bytes(c["dst_ip6"][i])
    else:
        src, dst = struct.pack("!I", c["src_ip"][i]), struct.pack("!I", c["dst_ip"][i])
    correct, partial = tcp_checksums(src, dst, tcp_wo, data, plen)
    field = tcp_field_value(c["csum_state"][i], c["csum_bad"][i], c["tcp_csum"][i], correct, partial)
    tcp = tcp_wo[:16] + struct.pack("!H", field) + tcp_wo[18:]
    if version == 6:
        ip, full = ipv6_header(c["tos"][i], c["flow_label"][i], c["ttl"][i], src, dst, thl + plen,
                               bool(c["hbh_jumbo"][i]))
    else:
        ihl = max(20, min(60, c["ip_hlen"][i] & ~3))
        full = ihl + thl + plen
        frag = (0x4000 if c["df"][i] else 0) | (c["frag"][i] & 0x3FFF)
        hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl // 4, c["tos"][i], full if full <= 0xFFFF else 0,
                          c["ip_id"][i], frag, c["ttl"][i], 6, 0, src, dst) + b"\0" * (ihl - 20)
        ip = hdr[:10] + struct.pack("!H", ip_header_checksum(hdr)) + hdr[12:]
    l2 = _l2_bytes(r, i, version, full)
    return l2, ip + tcp + data, full


def ipv6_header(tclass: int, flow_label: int, hop_limit: int, src: bytes, dst: bytes, tcp_len: int,
                jumbo: bool) -> tuple[bytes, int]:
    """(IPv6 header bytes, full datagram length) of a TCP packet: traffic class, flow label, hop limit;
    a BIG TCP packet (``jumbo``: the row's ``hbh_jumbo``) gets payload length 0 and the 8-byte
    hop-by-hop jumbo header ``ip6_xmit`` inserts (jumbo length = HBH + TCP bytes); other rows over
    65535 TCP bytes payload length 0 alone, as a TSO packet captured before the device."""
    word0 = 6 << 28 | (tclass & 0xFF) << 20 | (flow_label & 0xFFFFF)
    if not jumbo:
        return (struct.pack("!IHBB", word0, tcp_len if tcp_len <= 0xFFFF else 0, IPPROTO_TCP, hop_limit)
                + src + dst, 40 + tcp_len)
    hbh = struct.pack("!BBBBI", IPPROTO_TCP, 0, IPV6_TLV_JUMBO, 4, HOP_JUMBO_HLEN + tcp_len)
    return struct.pack("!IHBB", word0, 0, 0, hop_limit) + src + dst + hbh, 40 + HOP_JUMBO_HLEN + tcp_len


def _l2_bytes(r: Rows, i: int, version: int, ip_full_len: int) -> bytes:
    """Ethernet header and the row's encapsulations (VLAN, PPPoE, MPLS; VXLAN or GENEVE outermost)."""
    c = r.c
    enc = c["encap"][i]
    ethertype = 0x86DD if version == 6 else 0x0800
    inner = b""
    if enc & codes.ENC_MPLS:
        n = max(1, c["mpls_labels"][i])
        for k in range(n):
            inner += struct.pack("!I", (16 + k) << 12 | (1 << 8 if k == n - 1 else 0) | 64)
        ethertype = 0x8847
    if enc & codes.ENC_PPPOE:
        ppp = {0x0800: 0x0021, 0x86DD: 0x0057, 0x8847: 0x0281}[ethertype]
        inner = struct.pack("!BBHHH", 0x11, 0, 1, len(inner) + ip_full_len + 2, ppp) + inner
        ethertype = 0x8864
    if enc & codes.ENC_VLAN:
        tci = c["vlan_tci"][i]
        inner = struct.pack("!HH", tci if tci >= 0 else 100, ethertype) + inner
        ethertype = 0x8100
    frame_l2 = ETH_DST + ETH_SRC + struct.pack("!H", ethertype) + inner
    if enc & (codes.ENC_VXLAN | codes.ENC_GENEVE):
        vni = c["vni"][i]
        if enc & codes.ENC_VXLAN:
            vx, port = struct.pack("!II", 0x08000000, (vni if vni >= 0 else 1) << 8), VXLAN_PORT
        else:                    # GENEVE without options, an inner Ethernet frame (ETH_P_TEB)
            vx, port = struct.pack("!BBHI", 0, 0, ETH_P_TEB, (vni if vni >= 0 else 1) << 8), GENEVE_PORT
        udp_len = 8 + len(vx) + len(frame_l2) + ip_full_len
        ip_len = 20 + udp_len
        oh = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len if ip_len <= 0xFFFF else 0, 0, 0x4000, 64, 17,
                         0, VXLAN_OUTER_SRC, VXLAN_OUTER_DST)
        oh = oh[:10] + struct.pack("!H", ip_header_checksum(oh)) + oh[12:]
        sport = 49152 + (c["sport"][i] ^ c["dport"][i]) % 16384
        # Outer UDP checksum: 0 (none) unless the row carries one; a nonzero column value
        # is written as given (computing it would need the whole inner frame).
        ucs = c["outer_udp_csum"][i]
        udp = struct.pack("!HHHH", sport, port, udp_len & 0xFFFF, ucs if ucs > 0 else 0)
        frame_l2 = ETH_DST + ETH_SRC + b"\x08\x00" + oh + udp + vx + frame_l2
    return frame_l2


def frames(trace: Trace, payload: PAYLOAD_SOURCE = None, l2_headers: Sequence[bytes] | None = None,
           header_only: bool = False, snaplen: int = SNAPLEN) -> list[tuple[bytes, int]]:
    """(captured frame bytes, original length) for every row, as :func:`write_pcap` builds them.

    l2_headers: per row, bytes to put in front of the IP datagram instead of the
    synthetic Ethernet/encapsulation header (e.g. the first ``l2_bytes`` bytes of the
    captured frame a segment came from; used verbatim, so PPPoE/VXLAN length fields
    are not updated). Pair with :func:`write_records` to mix rebuilt and untouched packets.
    """
    r = Rows(trace)
    out = []
    for i in range(len(trace)):
        data = _payload_for(payload, i)
        l2, body, ip_full = build_packet(r, i, data, zeros=not header_only)
        if l2_headers is not None:
            l2 = bytes(l2_headers[i])
        known = 0 if data is None and header_only else r["payload_len"][i] if data is None else len(data)
        frame = l2 + body
        orig = len(l2) + ip_full
        cap = len(frame) - known if header_only else len(frame)
        out.append((frame[:min(cap, snaplen, orig)], orig))
    return out
