"""The one frame decoder: captured bytes -> Trace row fields and where each header sits.

``decode(linktype, buf, orig_len, fcs)`` walks the link header (``link.LINKTYPES``),
VLAN/QinQ tags, MPLS label stacks, PPPoE sessions, one IPIP level, one UDP tunnel over
IPv4 or IPv6 (VXLAN on UDP 4789/8472, GENEVE on 6081 with its options; the inner Ethernet frame), IPv4 and IPv6 (hop-by-hop, routing,
destination and first-fragment extension headers) down to TCP. It returns
``(row, layout)``: ``row`` the Trace columns it read (TCP options parsed,
checksum verdict ``csum_bad``/``csum_state`` as tcpdump gives it), ``layout`` the
byte offsets a rewriter patches. Anything it cannot read is a one-phrase
reason string instead, never an exception.

Packets cut by the snaplen keep their headers (``truncated``; payload length
from the IP header); an IP total length of 0 (a TSO packet captured before
segmentation) takes the length from the frame's original length. A frame that
ends in an FCS (the link-type word's F bit, pcapng ``if_fcslen``) is read
without it. The numba fast path in ``io.capture`` decodes the common
Ethernet/IPv4/TCP case the same way and is tested against this function.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .. import codes
from .csum import tcp_checksums, tcpdump_verdict
from .link import AF_INET6, ETH_P_TEB, ETHERTYPES, GENEVE_PORT, LINKTYPES, PPP_PROTOCOLS, VXLAN_PORTS
from .tcp_options import parse_options

MAX_ORIG_LEN = 1 << 24        # larger "original lengths" are corrupt records (BIG TCP stays below)
MAX_IP_HLEN = 255             # the Trace's ip_hlen column is one byte
IPV6_EXT_WALKED = (0, 43, 60)  # hop-by-hop, routing, destination options (ipv6_gso_pull_exthdrs)
IPV6_FRAGMENT = 44
IPV6_TLV_JUMBO = 0xC2
HOP_JUMBO_HLEN = 8            # struct hop_jumbo_hdr: next header, 0, IPV6_TLV_JUMBO, 4, jumbo length
MAX_IPV6_EXT = 8


@dataclass
class Layout:
    """Where the headers of one decoded frame are (byte offsets into the frame, -1: absent)."""

    ip: int = -1           # the (inner) IP header
    ver: int = 0
    ihl: int = 0           # IP header bytes, IPv6 extension headers included
    tcp: int = -1
    thl: int = 0
    pay: int = -1          # first TCP payload byte
    outer: int = -1        # outer IP header of IPIP or a UDP tunnel
    outer_ver: int = 0
    udp: int = -1          # a UDP tunnel's (VXLAN, GENEVE) outer UDP header
    pppoe: int = -1        # PPPoE session header (its length field covers the IP datagram)
    tags: tuple[int, int] = (-1, -1)    # VLAN tag bytes [start, end)
    ext6: tuple[int, int] = (-1, -1)    # IPv6 extension header bytes [start, end)
    frag6: bool = False    # an IPv6 fragment header (offset 0) was walked
    ip_len_zero: bool = False
    frame_len: int = 0     # captured bytes after the FCS was taken off
    orig_len: int = 0      # original length after the FCS was taken off
    notes: list = field(default_factory=list)


def _be16(b, o):
    return b[o] << 8 | b[o + 1]


def decode(linktype: int, buf: bytes, orig_len: int, fcs: int = 0):
    """(row, Layout) of one captured frame, or the reason it is not a TCP packet the kit reads."""
    orig_len = min(max(orig_len, len(buf)), MAX_ORIG_LEN)
    if fcs:
        orig_len = max(orig_len - fcs, 0)
        buf = buf[:orig_len]
    buf = bytes(buf)
    lay = Layout(frame_len=len(buf), orig_len=orig_len)
    row = {"encap": 0, "vlan_tci": -1, "mpls_labels": 0, "vni": -1, "outer_udp_csum": -1}
    if linktype not in LINKTYPES:
        return "unsupported link type"
    _, hlen, how = LINKTYPES[linktype]
    n = len(buf)
    if n < max(hlen, 1):
        return "frame shorter than its link header"
    if how == "ether":
        got = _ether(buf, 0, lay, row)
    elif how.startswith("ethertype@"):
        got = _ethertype(buf, hlen, _be16(buf, int(how[10:])), lay, row)
    elif how == "ipv4":
        got = _ip(buf, 0, 4, lay, row)
    elif how == "ipv6":
        got = _ip(buf, 0, 6, lay, row)
    elif how == "version":
        got = _ip(buf, 0, buf[0] >> 4, lay, row)
    else:
        fam = struct.unpack(">I" if how == "af-be" else "<I", buf[:4])[0]
        if fam > 0xFFFF:
            fam = struct.unpack(">I", buf[:4])[0]
        ver = 4 if fam == 2 else 6 if fam in AF_INET6 else 0
        got = _ip(buf, 4, ver, lay, row) if ver else "not IP"
    if isinstance(got, str):
        return got
    return row, lay


def _ether(buf, off, lay, row):
    if len(buf) < off + 14:
        return "frame shorter than its link header"
    return _ethertype(buf, off + 14, _be16(buf, off + 12), lay, row)


def _ethertype(buf, off, et, lay, row):
    n = len(buf)
    while True:
        kind = ETHERTYPES.get(et)
        if kind == "vlan":
            if n < off + 4:
                return "frame cut inside its VLAN tag"
            if row["vlan_tci"] < 0:
                row["vlan_tci"] = _be16(buf, off)
                lay.tags = (off, off + 4)
            else:
                lay.tags = (lay.tags[0], off + 4)
            row["encap"] |= codes.ENC_VLAN
            et = _be16(buf, off + 2)
            off += 4
        elif kind == "mpls":
            row["encap"] |= codes.ENC_MPLS
            while True:
                if n < off + 4:
                    return "frame cut inside its MPLS labels"
                row["mpls_labels"] = min(row["mpls_labels"] + 1, 255)
                bos = buf[off + 2] & 1
                off += 4
                if bos:
                    break
            if n < off + 1:
                return "frame cut after its MPLS labels"
            ver = buf[off] >> 4
            if ver not in (4, 6):
                return "MPLS payload is not IP"
            return _ip(buf, off, ver, lay, row)
        elif kind == "pppoe":
            if n < off + 8:
                return "frame cut inside its PPPoE header"
            row["encap"] |= codes.ENC_PPPOE
            et = PPP_PROTOCOLS.get(_be16(buf, off + 6))
            if lay.pppoe < 0:
                lay.pppoe = off
            off += 8
            if et is None:
                return "PPP payload is not IP"
        elif kind == "ipv4":
            return _ip(buf, off, 4, lay, row)
        elif kind == "ipv6":
            return _ip(buf, off, 6, lay, row)
        else:
            return "not IP"


def _ip(buf, off, ver, lay, row):
    if ver == 4:
        return _ipv4(buf, off, lay, row)
    if ver == 6:
        return _ipv6(buf, off, lay, row)
    return "not IP"


def _ipv4(buf, off, lay, row):
    n = len(buf)
    if n < off + 20:
        return "frame cut inside its IP header"
    ihl = (buf[off] & 15) * 4
    if buf[off] >> 4 != 4 or ihl < 20:
        return "bad IPv4 header"
    if n < off + ihl:
        return "frame cut inside its IP header"
    ip_len = _be16(buf, off + 2)
    frag = _be16(buf, off + 6)
    proto = buf[off + 9]
    if frag & 0x1FFF:
        return "IP fragment"
    l4 = off + ihl
    if proto == 4 and lay.outer < 0 and not frag & 0x2000:          # IPIP: one level
        lay.outer, lay.outer_ver = off, 4
        return _ipv4(buf, l4, lay, row)
    if proto == 17:
        return _udp(buf, off, 4, l4, lay, row)
    if proto != 6:
        return "not TCP"
    zero = ip_len == 0
    if zero:
        ip_len = max(lay.orig_len - off, 0)
    elif ip_len < ihl:
        return "bad IPv4 header"
    row.update(ip_version=4, src_ip=struct.unpack(">I", buf[off + 12:off + 16])[0],
               dst_ip=struct.unpack(">I", buf[off + 16:off + 20])[0], ip_id=_be16(buf, off + 4),
               ttl=buf[off + 8], tos=buf[off + 1], df=bool(frag & 0x4000), frag=frag & 0xBFFF,
               ip_hlen=ihl, ip_len=ip_len, ip_csum=_be16(buf, off + 10))
    lay.ip, lay.ver, lay.ihl, lay.ip_len_zero = off, 4, ihl, zero
    return _tcp(buf, off, l4, ip_len - ihl, buf[off + 12:off + 16], buf[off + 16:off + 20], lay, row)


def _ipv6(buf, off, lay, row):
    n = len(buf)
    if n < off + 40:
        return "frame cut inside its IP header"
    if buf[off] >> 4 != 6:
        return "bad IPv6 header"
    plen6 = _be16(buf, off + 4)
    nh = buf[off + 6]
    zero = plen6 == 0
    if zero:
        plen6 = max(lay.orig_len - off - 40, 0)
    l4 = off + 40
    jumbo = (zero and nh == 0 and n >= off + 48 and buf[off + 41] == 0 and buf[off + 42] == IPV6_TLV_JUMBO
             and buf[off + 43] == 4)      # BIG TCP: the hop-by-hop jumbo header (RFC 2675)
    for _ in range(MAX_IPV6_EXT):
        if nh in IPV6_EXT_WALKED:
            if n < l4 + 2:
                return "frame cut inside an IPv6 extension header"
            ln = (buf[l4 + 1] + 1) * 8
        elif nh == IPV6_FRAGMENT:
            if n < l4 + 8:
                return "frame cut inside an IPv6 extension header"
            if _be16(buf, l4 + 2) & 0xFFF8:
                return "IP fragment"
            lay.frag6 = True
            ln = 8
        else:
            break
        nh = buf[l4]
        l4 += ln
    ext = l4 - off - 40
    if nh == 17:
        return _udp(buf, off, 6, l4, lay, row)
    if nh != 6:
        return "not TCP"
    if 40 + ext > MAX_IP_HLEN:
        return "IPv6 extension headers longer than 215 bytes"
    src, dst = buf[off + 8:off + 24], buf[off + 24:off + 40]
    row.update(ip_version=6, src_ip6=list(src), dst_ip6=list(dst), ttl=buf[off + 7],
               tos=(_be16(buf, off) >> 4) & 0xFF, df=True, ip_hlen=40 + ext, ip_len=40 + plen6,
               flow_label=struct.unpack_from("!I", buf, off)[0] & 0xFFFFF, hbh_jumbo=jumbo)
    lay.ip, lay.ver, lay.ihl, lay.ip_len_zero = off, 6, 40 + ext, zero
    if ext:
        lay.ext6 = (off + 40, l4)
    return _tcp(buf, off, l4, plen6 - ext, src, dst, lay, row)


def _udp(buf, ip_off, ver, l4, lay, row):
    """A UDP tunnel over IPv4 or IPv6: VXLAN (4789/8472) or GENEVE (6081, with its options)."""
    n = len(buf)
    if n < l4 + 8 or row["encap"] & (codes.ENC_VXLAN | codes.ENC_GENEVE):
        return "not TCP"
    dport = _be16(buf, l4 + 2)
    if dport in VXLAN_PORTS:
        if n < l4 + 16:
            return "frame cut inside its VXLAN header"
        if not buf[l4 + 8] & 0x08:
            return "not TCP"
        row["encap"] |= codes.ENC_VXLAN
        inner, proto = l4 + 16, ETH_P_TEB
    elif dport == GENEVE_PORT:
        if n < l4 + 16:
            return "frame cut inside its GENEVE header"
        if buf[l4 + 8] >> 6:
            return "not TCP"                  # GENEVE version other than 0
        inner = l4 + 16 + (buf[l4 + 8] & 0x3F) * 4
        proto = _be16(buf, l4 + 10)
        row["encap"] |= codes.ENC_GENEVE
    else:
        return "not TCP"
    row["vni"] = struct.unpack(">I", buf[l4 + 12:l4 + 16])[0] >> 8
    row["outer_udp_csum"] = _be16(buf, l4 + 6)
    if lay.outer < 0:
        lay.outer, lay.outer_ver = ip_off, ver
    lay.udp = l4
    lay.tags = (-1, -1)
    if proto == ETH_P_TEB:
        return _ether(buf, inner, lay, row)
    if ETHERTYPES.get(proto) in ("ipv4", "ipv6"):
        return _ethertype(buf, inner, proto, lay, row)
    return "not TCP"


def _tcp(buf, ip_off, t, seg_len, src, dst, lay, row):
    n = len(buf)
    if n < t + 20:
        return "frame cut before the end of the TCP header (snaplen too small)"
    sport, dport, seq, ack, off, fl, win, csum, urp = struct.unpack(">HHIIBBHHH", buf[t:t + 20])
    thl = (off >> 4) * 4
    if thl < 20:
        return "bad TCP header length"
    plen = max(seg_len - thl, 0)
    opt_end = min(t + thl, n)
    truncated = n < t + thl or n - (t + thl) < plen
    row.update(sport=sport, dport=dport, seq=seq, ack=ack, flags=fl | (off & 1) << 8, window=win,
               urg_ptr=urp, tcp_hlen=thl, payload_len=plen, tcp_csum=csum, truncated=truncated,
               l2_bytes=ip_off, csum_bad=False, csum_state=0)
    row.update(parse_options(buf[t + 20:opt_end]))
    lay.tcp, lay.thl, lay.pay = t, thl, t + thl
    if n >= t + thl:
        hdr = buf[t:t + 16] + b"\0\0" + buf[t + 18:t + thl]
        whole = not truncated and not row.get("frag", 0) & 0x2000
        payload = buf[t + thl:t + thl + plen] if whole else b""
        correct, partial = tcp_checksums(src, dst, hdr, payload, plen)
        if whole and tcpdump_verdict(csum, correct) is not None:
            if csum == partial:
                row["csum_state"] = codes.CSUM_PARTIAL
            else:
                row["csum_bad"] = True
        elif not whole and csum == partial:
            row["csum_state"] = codes.CSUM_PARTIAL
    return row


def payload_bytes(buf: bytes, row: dict, lay: Layout) -> bytes:
    """The captured payload bytes of a decoded frame (b"" when its TCP header was cut)."""
    if lay.pay < 0 or lay.pay > lay.frame_len:
        return b""
    return bytes(buf[lay.pay:min(lay.pay + row["payload_len"], lay.frame_len)])
