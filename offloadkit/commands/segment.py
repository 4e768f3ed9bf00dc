"""``offloadkit segment IN.pcap OUT.pcap --mss N``: segment a capture's super-packets.

Every IPv4 TCP packet whose payload exceeds N is replaced by the segments
Linux software GSO (or the chosen ``--nic`` model) produces for gso_size N;
every other record is copied byte for byte; order is kept and the segments
share the packet's timestamp. The rules are ``engine.segment``'s; this module
only reads and patches bytes:

- payload length = IP total length - IP header - TCP header, so headers-only
  captures (``tcpdump -s 96``) work; an IP total length of 0 (a captured TSO
  packet) means "take it from the frame's original length";
- each segment reuses the packet's own link, IP (with options) and TCP
  header bytes (with options), patched: IP total length, ID and header
  checksum, TCP seq, flags and checksum; the record's original length is
  the segment's real length and its captured bytes are the headers plus
  whatever of the segment's payload the input record had;
- TCP checksum: ``sw-gso`` with TX checksum offload (the default) writes the
  pseudo-header sum of a CHECKSUM_PARTIAL segment, as tcpdump sees it on
  the sending host; ``--no-tx-csum`` and the device models write the full
  checksum over the real payload bytes. A segment whose payload was not
  captured gets the full checksum of a zero payload (no tool can verify a
  truncated record);
- ``drop-gso`` leaves out the packets the device drops.

Link types: Ethernet (VLAN/QinQ, MPLS and PPPoE session headers are walked;
the PPPoE length is patched), Linux cooked v1/v2 (``tcpdump -i any``) and raw
IPv4. pcapng input is refused with a hint to convert it.
"""
from __future__ import annotations

import json
import struct
import sys

import numpy as np

from ..codes import CSUM_PARTIAL, DROP_NONE, GSO_TCP_FIXEDID
from ..engine import csum_math
from ..engine.segment import NIC_MODELS, check_gso_size, segment
from ..io.pcap import Pcap, read_raw, write_raw
from ..trace import Trace

LINK_ETHERNET, LINK_RAW, LINK_SLL, LINK_IPV4, LINK_SLL2, LINK_RAW_ALT = 1, 101, 113, 228, 276, 12
LINK_NAMES = "Ethernet (1), Linux cooked (113, 276) and raw IP (12, 101, 228)"
ETH_P_IP, ETH_P_8021Q, ETH_P_8021AD, ETH_P_QINQ, ETH_P_MPLS, ETH_P_PPPOE = \
    0x0800, 0x8100, 0x88A8, 0x9100, 0x8847, 0x8864


def configure(parser) -> None:
    parser.add_argument("input", metavar="IN.pcap", help="capture with super-packets (e.g. taken before a TSO-off device)")
    parser.add_argument("output", metavar="OUT.pcap", help="where to write the segmented capture")
    parser.add_argument("--mss", required=True, metavar="N",
                        help="gso_size: TCP payload bytes per segment (MTU 1500 with timestamps: 1448)")
    parser.add_argument("--nic", default="sw-gso", choices=list(NIC_MODELS),
                        help="who segments (default sw-gso: Linux software GSO; rtl8139-legacy: old QEMU)")
    parser.add_argument("--no-tx-csum", action="store_true",
                        help="no TX checksum offload: write full TCP checksums instead of the pseudo-header sum")
    parser.add_argument("--fixed-id", action="store_true",
                        help="SKB_GSO_TCP_FIXEDID: every segment keeps the packet's IP ID")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def run(args) -> int:
    try:
        mss = int(str(args.mss), 10)
    except ValueError:
        raise ValueError(f"--mss {args.mss!r} is not a whole number of bytes") from None
    check_gso_size(mss)
    pcap = read_pcap(args.input)
    out, stats = segment_records(pcap, mss, nic=args.nic, tx_csum=not args.no_tx_csum,
                                 fixed_id=args.fixed_id)
    write_raw(args.output, pcap, out)
    if pcap.truncated:
        print(f"offloadkit segment: warning: {args.input} ends inside a packet record; "
              f"used the {len(pcap.records)} complete records", file=sys.stderr)
    csum = "partial" if args.nic == "sw-gso" and not args.no_tx_csum else "full"
    if getattr(args, "json", False):
        print(json.dumps({"input": str(args.input), "output": str(args.output), "packets": len(pcap.records),
                          "super_packets": stats["super"], "segments": stats["segments"],
                          "dropped": stats["dropped"], "written": len(out), "mss": mss, "nic": args.nic,
                          "tcp_checksum": csum, "input_truncated": pcap.truncated}))
        return 0
    csum = "pseudo-header (PARTIAL)" if csum == "partial" else "full"
    dropped = f", dropped {stats['dropped']}" if stats["dropped"] else ""
    print(f"{args.input}: {len(pcap.records)} packets, {stats['super']} over MSS {mss} -> "
          f"{stats['segments']} segments ({args.nic}, {csum} TCP checksums{dropped}); "
          f"wrote {len(out)} packets to {args.output}")
    return 0


# -- pcap records ----------------------------------------------------------

def read_pcap(path) -> Pcap:
    """:func:`offloadkit.io.pcap.read_raw`, refusing link types segment cannot walk."""
    pcap = read_raw(path)
    if pcap.linktype not in (LINK_ETHERNET, LINK_RAW, LINK_RAW_ALT, LINK_SLL, LINK_IPV4, LINK_SLL2):
        raise ValueError(f"{path} has link type {pcap.linktype}; segment understands {LINK_NAMES}")
    return pcap


# -- header parsing ----------------------------------------------------------

def l3_offset(linktype: int, buf: bytes) -> tuple[int, int]:
    """(offset of the IPv4 header or -1, offset of a PPPoE header to patch or -1)."""
    if linktype in (LINK_RAW, LINK_RAW_ALT, LINK_IPV4):
        return (0, -1) if buf[:1] and buf[0] >> 4 == 4 else (-1, -1)
    if linktype == LINK_SLL:
        return (16, -1) if len(buf) >= 16 and struct.unpack_from("!H", buf, 14)[0] == ETH_P_IP else (-1, -1)
    if linktype == LINK_SLL2:
        return (20, -1) if len(buf) >= 20 and struct.unpack_from("!H", buf, 0)[0] == ETH_P_IP else (-1, -1)
    if len(buf) < 14:
        return -1, -1
    off, etype = 14, struct.unpack_from("!H", buf, 12)[0]
    pppoe = -1
    while True:
        if etype in (ETH_P_8021Q, ETH_P_8021AD, ETH_P_QINQ) and len(buf) >= off + 4:
            etype = struct.unpack_from("!H", buf, off + 2)[0]
            off += 4
        elif etype == ETH_P_PPPOE and len(buf) >= off + 8 and pppoe < 0:
            if struct.unpack_from("!H", buf, off + 6)[0] != 0x0021:      # PPP protocol: IPv4
                return -1, -1
            pppoe = off
            off += 8
            etype = ETH_P_IP
        elif etype == ETH_P_MPLS:
            while len(buf) >= off + 4:
                bottom = buf[off + 2] & 1
                off += 4
                if bottom:
                    break
            return (off, pppoe) if len(buf) > off and buf[off] >> 4 == 4 else (-1, -1)
        else:
            break
    return (off, pppoe) if etype == ETH_P_IP else (-1, -1)


def parse_tcp4(linktype: int, buf: bytes, orig_len: int) -> dict | None:
    """Header fields of an IPv4 TCP record (None for anything else or a cut TCP header)."""
    l3, pppoe = l3_offset(linktype, buf)
    if l3 < 0 or len(buf) < l3 + 20:
        return None
    vihl, tos, tot, ip_id, frag, ttl, proto = struct.unpack_from("!BBHHHBB", buf, l3)
    ihl = (vihl & 0xF) * 4
    if vihl >> 4 != 4 or ihl < 20 or proto != 6 or frag & 0x3FFF:
        return None
    t = l3 + ihl
    if len(buf) < t + 20:
        return None
    thl = (buf[t + 12] >> 4) * 4
    if thl < 20 or len(buf) < t + thl:
        return None
    ip_len = tot if tot else orig_len - l3
    payload = ip_len - ihl - thl
    if payload < 0:
        return None
    sport, dport, seq, ack = struct.unpack_from("!HHII", buf, t)
    window, _, urg = struct.unpack_from("!HHH", buf, t + 14)
    flags = ((buf[t + 12] & 1) << 8) | buf[t + 13]
    src, dst = struct.unpack_from("!II", buf, l3 + 12)
    return dict(l3=l3, pppoe=pppoe, ihl=ihl, thl=thl, ip_len=ip_len, payload_len=payload, tos=tos,
                ip_id=ip_id, df=bool(frag & 0x4000), frag=frag & 0xBFFF, ttl=ttl, src_ip=src, dst_ip=dst,
                sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=window, urg_ptr=urg)


# -- segmentation of records --------------------------------------------------

def segment_records(pcap: Pcap, mss: int, nic: str = "sw-gso", tx_csum: bool = True,
                    fixed_id: bool = False) -> tuple[list, dict]:
    """The output records and counts {'super', 'segments', 'dropped'}."""
    heads = {}
    for i, (_, _, orig, buf) in enumerate(pcap.records):
        h = parse_tcp4(pcap.linktype, buf, orig)
        if h is not None and h["payload_len"] > mss:
            heads[i] = h
    idx = sorted(heads)
    cols = {k: [heads[i][k] for i in idx] for k in ("tos", "ip_id", "df", "frag", "ttl", "src_ip", "dst_ip",
                                                     "sport", "dport", "seq", "ack", "flags", "window",
                                                     "urg_ptr", "payload_len", "ip_len")}
    trace = Trace.from_columns(frame=np.asarray(idx, dtype=np.int64),
                               ip_hlen=[heads[i]["ihl"] for i in idx], tcp_hlen=[heads[i]["thl"] for i in idx],
                               gso_type=GSO_TCP_FIXEDID if fixed_id else 0, **cols) if idx else Trace.empty()
    segs = segment(trace, gso_size=mss, nic=nic, tx_csum=tx_csum)
    by_frame: dict[int, list[int]] = {}
    for j, f in enumerate(segs.frame.tolist()):
        by_frame.setdefault(f, []).append(j)
    s = {k: v.tolist() for k, v in segs.columns.items() if v.ndim == 1}
    out = []
    stats = {"super": len(idx), "segments": 0, "dropped": 0}
    for i, rec in enumerate(pcap.records):
        rows = by_frame.get(i)
        if rows is None:
            out.append(rec)
            continue
        if s["drop"][rows[0]] != DROP_NONE:
            stats["dropped"] += 1
            continue
        for j in rows:
            out.append(_segment_record(rec, heads[i], s, j))
        stats["segments"] += len(rows)
    return out, stats


def _sum(b: bytes) -> int:
    return int(csum_math.csum_bytes(np.frombuffer(b, dtype=np.uint8), 0, len(b))) if b else 0


def _segment_record(rec, h: dict, s: dict, j: int):
    sec, frac, _, buf = rec
    l3, ihl, thl = h["l3"], h["ihl"], h["thl"]
    t = l3 + ihl
    pay = s["payload_len"][j]
    ip_len = s["ip_len"][j]
    l2 = bytearray(buf[:l3])
    if h["pppoe"] >= 0:
        struct.pack_into("!H", l2, h["pppoe"] + 4, (ip_len + 2) & 0xFFFF)
    iph = bytearray(buf[l3:t])
    struct.pack_into("!HH", iph, 2, ip_len if ip_len <= 0xFFFF else 0, s["ip_id"][j])
    struct.pack_into("!H", iph, 10, 0)
    struct.pack_into("!H", iph, 10, (~csum_math.fold16(_sum(bytes(iph)))) & 0xFFFF)
    tcph = bytearray(buf[t:t + thl])
    struct.pack_into("!I", tcph, 4, s["seq"][j])
    f = s["flags"][j]
    tcph[12] = (tcph[12] & 0xFE) | ((f >> 8) & 1)
    tcph[13] = f & 0xFF
    struct.pack_into("!H", tcph, 16, 0)
    offset = (s["seq"][j] - h["seq"]) & 0xFFFFFFFF
    have = max(len(buf) - t - thl - offset, 0)
    known = buf[t + thl + offset:t + thl + offset + min(pay, have)]
    pseudo = csum_math.pseudo_sum(h["src_ip"], h["dst_ip"], thl + pay)
    if s["csum_state"][j] == CSUM_PARTIAL:
        check = csum_math.fold16(pseudo)
    else:
        check = csum_math.csum_finish(pseudo + _sum(bytes(tcph)) + _sum(known))
    struct.pack_into("!H", tcph, 16, int(check))
    data = bytes(l2) + bytes(iph) + bytes(tcph) + known
    return sec, frac, l3 + ip_len, data
