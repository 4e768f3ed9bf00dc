"""The outer headers of one UDP-tunnel (VXLAN, GENEVE) GSO segment, as ``__skb_udp_tunnel_segment`` writes them.

The inner packet is cut as a plain one (``rewrite.segment``); then, per segment ``k``:

- outer UDP length ``uh->len = skb->len - udp_offset`` (the whole segment from the UDP header);
- outer IPv4 (``inet_gso_segment``): total length, ID ``id0 + k``, header checksum; outer IPv6
  (``ipv6_gso_segment``): payload length; traffic class, flow label, hop limit copied;
- outer UDP checksum: 0 stays 0 (``SKB_GSO_UDP_TUNNEL``: VXLAN ``noudpcsum``, IPv6
  ``udp6zerocsumtx``). With ``SKB_GSO_UDP_TUNNEL_CSUM`` (the super-packet carries the
  CHECKSUM_PARTIAL pseudo-header sum) the kernel first writes the segment's pseudo-header sum,
  ``~csum_fold(partial + htonl(len))``, then ``gso_make_checksum`` sums the bytes from the outer
  UDP header to the inner TCP header on top of ``SKB_GSO_CB(skb)->csum``, which the inner
  ``tcp_gso_segment`` left at the complement of the inner pseudo-header sum
  (``gso_reset_checksum``/``gso_make_checksum``). The outer checksum is therefore the one the
  datagram has once the inner TCP checksum is filled in: local checksum offload (LCO,
  Documentation/networking/checksum-offloads.rst), right even while the inner segment is still
  CHECKSUM_PARTIAL. A result of 0 is written 0xFFFF (CSUM_MANGLED_0).

Why the engine's Trace has no per-segment outer checksum: the LCO value sums the outer addresses,
the UDP source port, the tunnel header, the inner Ethernet header and the inner IP header bytes.
A Trace row has none of the outer ones (a capture's are bytes, kept by this rewriter; a model's
are ``packet.build``'s synthetic constants), so the engine could only compute a value for the
builder's made-up outer header, a second copy of it. What the engine's rules need of the outer
checksum is whether it is zero (``outer_udp_csum``: the flow key of udp_gro_receive and the GRO
checksum gates), and a segment keeps that of its super-packet.
"""
from __future__ import annotations

import struct

from ..packet.csum import fold, ip_header_checksum, ones_sum, pseudo_sum

IPPROTO_UDP = 17
CSUM_MANGLED_0 = 0xFFFF


def udp_tunnel_segment_header(l2: bytearray, outer: int, outer_ver: int, udp: int, ip_len: int, k: int,
                              inner_ip: bytes, inner_src: bytes, inner_dst: bytes, inner_l4_len: int) -> None:
    """Segment k's outer IP and UDP headers, in place in ``l2`` (the frame up to the inner IP header).

    ``outer``/``udp``: offsets of the outer IP and UDP headers; ``ip_len``: the inner IP datagram's
    length; ``inner_ip``: the segment's inner IP header bytes (length, ID and checksum patched);
    ``inner_l4_len``: its TCP header + payload bytes (the inner pseudo-header length).
    """
    ulen = len(l2) - udp + ip_len
    struct.pack_into("!H", l2, udp + 4, ulen & 0xFFFF)
    if outer_ver == 6:
        struct.pack_into("!H", l2, outer + 4, (len(l2) - outer - 40 + ip_len) & 0xFFFF)
        src, dst = bytes(l2[outer + 8:outer + 24]), bytes(l2[outer + 24:outer + 40])
    else:
        oid = struct.unpack_from("!H", l2, outer + 4)[0]
        struct.pack_into("!HH", l2, outer + 2, (len(l2) - outer + ip_len) & 0xFFFF, (oid + k) & 0xFFFF)
        struct.pack_into("!H", l2, outer + 10, 0)
        struct.pack_into("!H", l2, outer + 10, ip_header_checksum(bytes(l2[outer:outer + (l2[outer] & 0x0F) * 4])))
        src, dst = bytes(l2[outer + 12:outer + 16]), bytes(l2[outer + 16:outer + 20])
    if struct.unpack_from("!H", l2, udp + 6)[0] == 0:
        return                                            # SKB_GSO_UDP_TUNNEL: no outer checksum
    struct.pack_into("!H", l2, udp + 6, fold(pseudo_sum(src, dst, ulen, IPPROTO_UDP)))
    inner_pseudo = fold(pseudo_sum(inner_src, inner_dst, inner_l4_len))
    struct.pack_into("!H", l2, udp + 6, gso_make_checksum(bytes(l2[udp:]) + bytes(inner_ip), inner_pseudo))


def gso_make_checksum(outer_to_inner_l4: bytes, inner_pseudo: int) -> int:
    """``gso_make_checksum`` for the outer UDP header: the bytes from the outer UDP header (its check
    field holding the pseudo-header sum) to the inner TCP header, on top of ``~inner_pseudo``
    (``SKB_GSO_CB(skb)->csum`` after the inner segment); 0 becomes CSUM_MANGLED_0."""
    check = (~fold(ones_sum(outer_to_inner_l4, 0xFFFF - inner_pseudo))) & 0xFFFF
    return check or CSUM_MANGLED_0
