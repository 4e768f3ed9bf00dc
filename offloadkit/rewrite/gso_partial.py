"""UDP-tunnel GSO_PARTIAL: the stack fixes the outer headers once, the device cuts the inner TCP.

A device with ``NETIF_F_GSO_PARTIAL`` and the tunnel type in its ``gso_partial_features`` (ixgbe,
i40e, ice: ``NETIF_F_GSO_UDP_TUNNEL[_CSUM]``) gets from ``skb_segment`` not one skb per segment but,
for a super-packet of ``L`` payload bytes at gso_size ``mss``, ``p = L // mss``:

- ``p > 1``: one GSO skb of ``p * mss`` bytes (``gso_segs = p``, ``SKB_GSO_PARTIAL``) and, when
  ``L % mss``, a tail of the remainder, a plain segment; ``p <= 1``: plain segmentation;
- the partial skb's headers hold ONE full segment's lengths: inner IPv4 total length / IPv6 payload
  length (``inet_gso_segment``/``ipv6_gso_segment``: ``gso_size + data_offset``), outer UDP length
  (``__skb_udp_tunnel_segment``), outer IP length; IPv4 IDs (inner and outer) ``id0`` on it and
  ``id0 + p`` on the tail (``id += gso_segs``); TCP: seq0, FIN/PSH cleared unless there is no tail,
  checksum the pseudo-header sum over all ``p * mss`` bytes (``tcp_gso_segment``: ``mss *= gso_segs``);
  outer UDP checksum: ``gso_make_checksum`` with both pseudo-headers over the whole lengths, which is
  one full segment's LCO value, because the outer UDP length and the inner TCP length cancel.

``stage="stack"`` gives these skbs (what GSO_PARTIAL leaves, what tcpdump sees on the sending host);
``stage="wire"`` the frames the hardware makes of them: it treats everything from the outer UDP header
to the inner TCP header as a static block ("like IP options", ixgbe/ixgbevf "Add support for GSO
partial"), so per segment k < p: the outer IP length of the segment and outer IPv4 ID ``id0 + k``;
the block copied unchanged -- the outer UDP length and checksum of segment 0 on every segment, the
inner IPv4 ID ``id0`` on every segment (why those drivers ask for ``NETIF_F_TSO_MANGLEID`` for an
inner IPv4 header); inner TCP seq, flags and the full checksum per segment. The tail is as software
GSO writes it. veth has no GSO_PARTIAL, so the lab cannot show either stage (docs: the tunnel notes).
"""
from __future__ import annotations

import struct

from ..io.records import Record
from ..packet.csum import fold, pseudo_sum
from ..packet.decode import decode
from .segment import segment_records
from .tunnel import IPPROTO_UDP, gso_make_checksum

STAGES = ("stack", "wire")


def gso_partial_segments(rec: Record, mss: int, stage: str = "wire") -> list[Record]:
    """One tunnelled TCP super-packet through a GSO_PARTIAL device (see the module doc): the partial
    skb and tail (``stage="stack"``) or the frames on the wire (``"wire"``). Inner TCP checksums are
    full (the device computes them) except the partial skb's, which is CHECKSUM_PARTIAL."""
    if stage not in STAGES:
        raise ValueError(f"stage {stage!r}: choose one of {', '.join(STAGES)}")
    got = decode(rec.linktype, rec.data, rec.orig_len, rec.fcs)
    if rec.fcs:
        raise ValueError("gso_partial_segments takes frames without an FCS")
    if isinstance(got, str) or got[1].udp < 0:
        raise ValueError("gso_partial_segments takes a UDP-tunnelled (VXLAN, GENEVE) TCP packet")
    row, lay = got
    segs = segment_records([rec], mss, nic="hw-tso", tx_csum=False).records
    p = row["payload_len"] // mss
    if p <= 1:
        return segs
    tail = segs[p:]
    if stage == "wire":
        return [_with_block(s, segs[0].data, lay) for s in segs[:p]] + tail
    return [_partial_skb(segs[:p], lay, row, last=not tail)] + tail


def _with_block(seg: Record, first: bytes, lay) -> Record:
    """Segment ``seg`` with segment 0's bytes from the outer UDP header to the inner TCP header."""
    data = seg.data[:lay.udp] + first[lay.udp:lay.tcp] + seg.data[lay.tcp:]
    return Record(seg.frame, seg.time_ns, seg.linktype, data, seg.orig_len, seg.fcs)


def _partial_skb(segs: list[Record], lay, row: dict, last: bool) -> Record:
    """The GSO_PARTIAL skb covering ``segs``: segment 0's headers, their payloads, the kernel's TCP
    and outer UDP checksums over the whole length."""
    first = segs[0].data
    payload = b"".join(s.data[lay.pay:] for s in segs)
    tcp_len = lay.thl + sum(s.orig_len - lay.pay for s in segs)
    data = bytearray(first[:lay.pay]) + payload
    if last:                                  # no tail: the partial skb keeps the super-packet's flags
        data[lay.tcp + 13] = row["flags"] & 0xFF
    isrc, idst = _addrs(first, lay.ip, lay.ver)
    struct.pack_into("!H", data, lay.tcp + 16, fold(pseudo_sum(isrc, idst, tcp_len)))
    if struct.unpack_from("!H", first, lay.udp + 6)[0]:
        osrc, odst = _addrs(first, lay.outer, lay.outer_ver)
        udp_whole = lay.tcp - lay.udp + tcp_len
        struct.pack_into("!H", data, lay.udp + 6, fold(pseudo_sum(osrc, odst, udp_whole, IPPROTO_UDP)))
        check = gso_make_checksum(bytes(data[lay.udp:lay.tcp]), fold(pseudo_sum(isrc, idst, tcp_len)))
        struct.pack_into("!H", data, lay.udp + 6, check)
    s0 = segs[0]
    return Record(s0.frame, s0.time_ns, s0.linktype, bytes(data), lay.tcp + tcp_len, s0.fcs)


def _addrs(buf: bytes, ip: int, ver: int) -> tuple[bytes, bytes]:
    if ver == 6:
        return bytes(buf[ip + 8:ip + 24]), bytes(buf[ip + 24:ip + 40])
    return bytes(buf[ip + 12:ip + 16]), bytes(buf[ip + 16:ip + 20])
