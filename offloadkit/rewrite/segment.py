"""A capture's super-packets through GSO: what ``offloadkit segment`` writes.

Every IPv4 or IPv6 TCP packet (not tunnelled) whose payload exceeds ``mss`` is replaced
by the segments ``engine.segment`` produces for gso_size ``mss`` (Linux software
GSO or a ``--nic`` model); every other record is copied byte for byte; order is
kept and the segments share the packet's timestamp. Frames are decoded by
``packet.decode``, so every link type and encapsulation the kit reads works:

- payload length = IP total length - IP header - TCP header, so header-only
  captures (``tcpdump -s 96``) work; IP total length 0 (a captured TSO packet)
  takes the length from the frame's original length;
- each segment reuses the packet's own link, IP (with options) and TCP header
  bytes (with options), patched: IP total length, ID and header checksum, TCP
  seq, flags and checksum, a PPPoE session's length; its original length is
  the segment's real length and its captured bytes are the headers plus
  whatever of its payload the input record had (an FCS is recomputed);
- IPv6: the payload length is patched, the extension headers are copied, and a
  BIG TCP packet's hop-by-hop jumbo header (payload length 0) is taken out of
  every segment (``ipv6_hopopt_jumbo_remove``); IPv4 BIG TCP (total length 0)
  gets each segment's real total length;
- UDP tunnels (VXLAN, GENEVE; IPv4 or IPv6 outer, IPv4 or IPv6 inner; ``skb_udp_tunnel_segment``):
  the inner packet is cut as a plain one and each segment's outer headers are what
  ``rewrite.tunnel`` writes (outer length, IPv4 ID + k, UDP length, outer UDP checksum 0 or
  the LCO value). IPIP super-packets are copied and counted (``SegmentRun.unsegmented``),
  and the verb says so;
- TCP checksum: PARTIAL segments (``sw-gso`` with TX checksum offload) carry the
  pseudo-header sum, as tcpdump sees it on the sending host; the others the full
  checksum over the real payload bytes (of a zero payload where it was not captured);
- packets the device drops (``drop-gso``) are left out.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..codes import CSUM_PARTIAL, DROP_NONE, GSO_TCP_FIXEDID
from ..engine.segment import HOP_JUMBO_HLEN, segment
from ..io.records import Record
from ..packet.csum import fold, ip_header_checksum, ones_sum, pseudo_sum
from ..packet.decode import Layout, decode
from ..packet.link import append_fcs
from .tunnel import udp_tunnel_segment_header
from ..trace import FIELDS, Trace

HEADER_COLUMNS = ("tos", "ip_id", "df", "frag", "ttl", "src_ip", "dst_ip", "sport", "dport", "seq", "ack",
                  "flags", "window", "urg_ptr", "payload_len", "ip_len", "ip_hlen", "tcp_hlen", "ip_version",
                  "src_ip6", "dst_ip6", "flow_label", "hbh_jumbo")


@dataclass
class SegmentRun:
    """What :func:`segment_records` did."""

    records: list
    super_packets: int
    segments: int
    dropped: int
    unsegmented: int = 0      # super-packets copied whole: IPIP (not modelled yet)


def super_packet(rec: Record, mss: int):
    """(row, layout) of a record that GSO would segment at ``mss``, "tunnel" for an IPIP
    super-packet (not segmented yet), else None."""
    got = decode(rec.linktype, rec.data, rec.orig_len, rec.fcs)
    if isinstance(got, str):
        return None
    row, lay = got
    if row["payload_len"] <= mss or row.get("frag", 0) & 0x2000 or lay.pay > lay.frame_len:
        return None
    if lay.outer >= 0 and lay.udp < 0:
        return "tunnel"
    return (row, lay) if lay.ver in (4, 6) else None


def segment_records(records: list[Record], mss: int, nic: str = "sw-gso", tx_csum: bool = True,
                    fixed_id: bool = False, progress=iter) -> SegmentRun:
    """The output records of ``records`` segmented at gso_size ``mss`` (``progress`` wraps the read loop)."""
    heads = {}
    tunnelled = 0
    for i, rec in enumerate(progress(records)):
        got = super_packet(rec, mss)
        if got == "tunnel":
            tunnelled += 1
        elif got is not None:
            heads[i] = got
    idx = sorted(heads)
    if idx:
        cols = {k: [heads[i][0].get(k, FIELDS[k][1] if not FIELDS[k][2] else [0] * FIELDS[k][2][0])
                    for i in idx] for k in HEADER_COLUMNS}
        trace = Trace.from_columns(frame=np.asarray(idx, dtype=np.int64),
                                   gso_type=GSO_TCP_FIXEDID if fixed_id else 0, **cols)
    else:
        trace = Trace.empty()
    segs = segment(trace, gso_size=mss, nic=nic, tx_csum=tx_csum)
    by_frame: dict[int, list[int]] = {}
    for j, f in enumerate(segs.frame.tolist()):
        by_frame.setdefault(f, []).append(j)
    s = {k: segs.columns[k].tolist() for k in ("payload_len", "ip_len", "ip_id", "seq", "flags", "csum_state",
                                               "drop", "ip_hlen")}
    out = []
    run = SegmentRun(out, len(idx), 0, 0, tunnelled)
    for i, rec in enumerate(records):
        rows = by_frame.get(i)
        if rows is None:
            out.append(rec)
            continue
        if s["drop"][rows[0]] != DROP_NONE:
            run.dropped += 1
            continue
        row, lay = heads[i]
        for k, j in enumerate(rows):
            out.append(_segment_record(rec, row, lay, s, j, k))
        run.segments += len(rows)
    return run


def _segment_record(rec: Record, row: dict, lay: Layout, s: dict, j: int, k: int) -> Record:
    buf = rec.data[:lay.frame_len]
    l3, ihl, thl = lay.ip, lay.ihl, lay.thl
    t = l3 + ihl
    pay = s["payload_len"][j]
    ip_len = s["ip_len"][j]
    l2 = bytearray(buf[:l3])
    if lay.pppoe >= 0:
        struct.pack_into("!H", l2, lay.pppoe + 4, (ip_len + 2) & 0xFFFF)
    if lay.ver == 6:
        iph = ipv6_segment_header(buf[l3:t], s["ip_hlen"][j], ip_len)
        src, dst = buf[l3 + 8:l3 + 24], buf[l3 + 24:l3 + 40]
    else:
        iph = bytearray(buf[l3:t])
        struct.pack_into("!HH", iph, 2, ip_len if ip_len <= 0xFFFF else 0, s["ip_id"][j])
        struct.pack_into("!H", iph, 10, 0)
        struct.pack_into("!H", iph, 10, ip_header_checksum(bytes(iph)))
        src, dst = buf[l3 + 12:l3 + 16], buf[l3 + 16:l3 + 20]
    if lay.udp >= 0:
        udp_tunnel_segment_header(l2, lay.outer, lay.outer_ver, lay.udp, ip_len, k, bytes(iph), src, dst,
                                  thl + pay)
    tcph = bytearray(buf[t:t + thl])
    struct.pack_into("!I", tcph, 4, s["seq"][j])
    f = s["flags"][j]
    tcph[12] = (tcph[12] & 0xFE) | ((f >> 8) & 1)
    tcph[13] = f & 0xFF
    struct.pack_into("!H", tcph, 16, 0)
    offset = (s["seq"][j] - row["seq"]) & 0xFFFFFFFF
    have = max(len(buf) - t - thl - offset, 0)
    known = buf[t + thl + offset:t + thl + offset + min(pay, have)]
    pseudo = pseudo_sum(src, dst, thl + pay)
    if s["csum_state"][j] == CSUM_PARTIAL:
        check = fold(pseudo)
    else:
        check = (~fold(ones_sum(bytes(known), ones_sum(bytes(tcph), pseudo)))) & 0xFFFF
    struct.pack_into("!H", tcph, 16, check)
    data, orig = append_fcs(bytes(l2) + bytes(iph) + bytes(tcph) + bytes(known), l3 + ip_len, rec.fcs)
    return Record(rec.frame, rec.time_ns, rec.linktype, data, orig, rec.fcs)


def ipv6_segment_header(hdr: bytes, ip_hlen: int, ip_len: int) -> bytearray:
    """A segment's IPv6 header and extension headers: payload length patched; when the engine took
    the jumbo HBH out (``ip_hlen`` 8 bytes shorter), its 8 bytes are dropped and its next header
    moves into the fixed header (``ipv6_hopopt_jumbo_remove``)."""
    out = bytearray(hdr)
    if ip_hlen == len(hdr) - HOP_JUMBO_HLEN:
        out = bytearray(hdr[:40]) + bytearray(hdr[40 + HOP_JUMBO_HLEN:])
        out[6] = hdr[40]
    struct.pack_into("!H", out, 4, ip_len - 40)
    return out
