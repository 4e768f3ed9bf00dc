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
from ..io.batch import Batch
from ..io.records import Record
from ..packet.csum import fold, ip_header_checksum, ones_sum, pseudo_sum
from ..packet.decode import Layout, decode
from ..packet.link import append_fcs
from ..trace import Trace
from .segment_fast import build_segments
from .tunnel import udp_tunnel_segment_header

HEADER_COLUMNS = ("tos", "ip_id", "df", "frag", "ttl", "src_ip", "dst_ip", "sport", "dport", "seq", "ack",
                  "flags", "window", "urg_ptr", "payload_len", "ip_len", "ip_hlen", "tcp_hlen", "ip_version",
                  "src_ip6", "dst_ip6", "flow_label", "hbh_jumbo")


@dataclass
class SegmentRun:
    """What :func:`segment_batch` did (``records``: a Batch; a list from :func:`segment_records`)."""

    records: Batch | list
    super_packets: int
    segments: int
    dropped: int
    unsegmented: int = 0      # super-packets copied whole: IPIP (not modelled yet)
    packets: int = 0          # input records
    written: int = 0          # output records


MAX_CHUNK_SEGMENTS = 1 << 16


def _bounded(chunks, mss: int):
    """The chunks cut so that none makes more than about ``MAX_CHUNK_SEGMENTS`` segments (a record of
    original length L makes at most L // mss + 1): memory follows the chunk, not the super-packets."""
    for b in chunks:
        est = np.cumsum(b.orig // max(mss, 1) + 1)
        if not len(est) or est[-1] <= MAX_CHUNK_SEGMENTS:
            yield b
            continue
        cuts = np.searchsorted(est, np.arange(MAX_CHUNK_SEGMENTS, int(est[-1]), MAX_CHUNK_SEGMENTS), side="right")
        for a, e in zip(np.concatenate(([0], cuts)), np.concatenate((cuts, [len(b)]))):
            if e > a:
                yield b.slice(int(a), int(e))


def segment_stream(chunks, write, mss: int, nic: str = "sw-gso", tx_csum: bool = True, fixed_id: bool = False,
                   progress=None) -> SegmentRun:
    """:func:`segment_batch` chunk by chunk (GSO has no state between packets): each chunk's output
    goes to ``write``; returns the totals (``records`` None)."""
    total = SegmentRun(None, 0, 0, 0)
    for chunk in _bounded(chunks, mss):
        run = segment_batch(chunk, mss, nic, tx_csum, fixed_id, progress)
        write(run.records)
        total.super_packets += run.super_packets
        total.segments += run.segments
        total.dropped += run.dropped
        total.unsegmented += run.unsegmented
        total.packets += len(chunk)
        total.written += len(run.records)
    return total


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


def segment_batch(b: Batch, mss: int, nic: str = "sw-gso", tx_csum: bool = True, fixed_id: bool = False,
                  progress=None, fast_path: bool = True) -> SegmentRun:
    """The output records of ``b`` segmented at gso_size ``mss`` (``progress``: a ``commands.progress`` counter).

    Plain Ethernet/IPv4/TCP records are decoded and their segments written by numba
    kernels (``rewrite.segment_fast``); the others (all when ``fast_path`` is False: the
    reference the fast path is tested against) go through :func:`super_packet`."""
    n = len(b)
    full, fast = b.decode_plain(fast_path)
    c = full.columns
    head = fast & (c["payload_len"] > mss) & ((c["frag"] & 0x2000) == 0) & \
        (14 + c["ip_hlen"].astype(np.int64) + c["tcp_hlen"] <= b.cap)
    slow = np.nonzero(~fast)[0]
    if progress is not None:
        progress.update(n - len(slow))
    heads = {}
    tunnelled = 0
    for i in slow.tolist():
        got = super_packet(b.record(i), mss)
        if got == "tunnel":
            tunnelled += 1
        elif got is not None:
            heads[i] = got
            head[i] = True
        if progress is not None:
            progress.update(1)
    if heads:
        rows = list(heads)
        st = Trace.from_rows([{k: heads[i][0][k] for k in HEADER_COLUMNS if k in heads[i][0]} for i in rows])
        for k in HEADER_COLUMNS:
            c[k][rows] = st.columns[k]
    idx = np.nonzero(head)[0]
    trace = Trace.from_columns(frame=idx, gso_type=GSO_TCP_FIXEDID if fixed_id else 0,
                               **{k: c[k][idx] for k in HEADER_COLUMNS}) if len(idx) else Trace.empty()
    segs = segment(trace, gso_size=mss, nic=nic, tx_csum=tx_csum)
    sf = segs.frame
    if len(sf) > 1 and (np.diff(sf) < 0).any():
        segs = segs[np.argsort(sf, kind="stable")]
        sf = segs.frame
    count = np.bincount(sf, minlength=n).astype(np.int64) if len(sf) else np.zeros(n, np.int64)
    first = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64) if n else np.zeros(0, np.int64)
    dropped = np.zeros(n, np.bool_)
    has = np.nonzero(count)[0]
    dropped[has] = segs.drop[first[has]] != DROP_NONE          # the device drops the whole packet
    sc = {k: segs.columns[k] for k in ("payload_len", "ip_len", "ip_id", "seq", "flags", "csum_state", "drop",
                                       "ip_hlen")}
    side = _side_segments(b, heads, dropped, first, count, sc)
    args = (b.data, b.off, b.cap, b.orig, fast, first, count, dropped, c["ip_hlen"], c["tcp_hlen"], c["seq"],
            sc["payload_len"], sc["ip_len"], sc["ip_id"], sc["seq"], sc["flags"], sc["csum_state"], *side)
    # one pass into room for the most it can write: a segment is its headers plus its share of the payload captured
    room = int(b.cap.sum()) + int((count * (14 + c["ip_hlen"].astype(np.int64) + c["tcp_hlen"])).sum()) + len(side[0])
    buf = np.empty(room, np.uint8)
    o_off, o_cap, o_orig, o_src = (np.empty(int(np.maximum(count, 1).sum()), np.int64) for _ in range(4))
    m, size = build_segments(*args, buf, o_off, o_cap, o_orig, o_src, True)
    o_off, o_cap, o_orig, o_src = o_off[:m], o_cap[:m], o_orig[:m], o_src[:m]
    out = Batch(buf[:size], o_off, o_cap, o_orig, b.time_ns[o_src], b.linktype[o_src], b.fcs[o_src], b.frame[o_src])
    done = ~dropped & (count > 0)
    return SegmentRun(out, len(idx), int(count[done].sum()), int(dropped.sum()), tunnelled, n, len(out))


def _side_segments(b: Batch, heads: dict, dropped, first, count, sc: dict):
    """(bytes, offset, captured, original length) per segment row of the super-packets Python decoded."""
    m = len(sc["seq"])
    s_off, s_cap, s_orig = (np.zeros(m, np.int64) for _ in range(3))
    parts = []
    pos = 0
    if heads:
        sc = {k: v.tolist() for k, v in sc.items()}     # Python ints for the byte patching
    for i, (row, lay) in heads.items():
        if dropped[i]:
            continue
        rec = b.record(i)
        for k, j in enumerate(range(int(first[i]), int(first[i] + count[i]))):
            r = _segment_record(rec, row, lay, sc, j, k)
            parts.append(r.data)
            s_off[j], s_cap[j], s_orig[j] = pos, len(r.data), int(r.orig_len)
            pos += len(r.data)
    side = np.frombuffer(b"".join(parts), np.uint8) if parts else np.zeros(0, np.uint8)
    return side, s_off, s_cap, s_orig


def segment_records(records: list[Record], mss: int, nic: str = "sw-gso", tx_csum: bool = True,
                    fixed_id: bool = False) -> SegmentRun:
    """:func:`segment_batch` of a list of records (``run.records`` is a list too)."""
    run = segment_batch(Batch.of_records(records), mss, nic, tx_csum, fixed_id)
    run.records = run.records.records()
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
