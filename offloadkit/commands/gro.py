"""``offloadkit gro IN.pcap OUT.pcap``: aggregate a capture's packets as Linux GRO would.

IN's packets, in file order, arrive on one receive queue; a NAPI poll ends
after ``--napi-budget`` packets or when the next packet arrives more than
``--poll-gap`` after the previous one (the queue ran empty). A poll that ran
empty flushes every held packet (napi_complete_done); one that used its budget
flushes, with ``--hz`` >= 1000, only packets held since an earlier jiffy of the
capture's clock (``__napi_poll``: ``gro_flush_normal(gro, HZ >= 1000)``), and
everything below 1000. OUT holds what the stack sees after GRO
(``engine.gro``), in delivery order, timestamped when delivered.

Bytes:
- a packet delivered alone is copied byte for byte;
- a merged packet is the first packet's headers (link, IP, TCP with options)
  patched as ``inet_gro_complete``/``tcp4_gro_complete`` do: IP total length
  (IPv6 payload length; outer IPv4/UDP lengths of IPIP and VXLAN too), IP
  header checksum, FIN/PSH ORed in, TCP checksum = the pseudo-header sum of a
  CHECKSUM_PARTIAL packet (tcpdump on the receiving host shows the same);
  its payload is the merged packets' payload bytes, as far as captured, and
  its original length is the full merged length.

What the capture tells GRO:
- payload length = IP total length - headers, so header-only captures work;
  a total length of 0 (a captured TSO packet) is taken from the frame;
- a frame whose original length disagrees with the IP total length (payload
  missing on the wire, or Ethernet padding) sets GRO's CB.flush, as
  ``inet_gro_receive`` does;
- TCP checksums are verified on the real bytes when the whole segment was
  captured (a wrong one is ``csum_bad``: with ``--rx-csum none`` GRO sums it in
  software, it fails and the packet is delivered unmerged; a verifying NIC
  reports such a packet as CHECKSUM_NONE, with the same result). A checksum
  equal to the pseudo-header sum (captured on a host with TX offload) counts
  as right. Header-only records are trusted;
- IPv4 header checksums are verified on the real header bytes;
- TCP options are compared byte for byte (layout included), IPv6 extension
  headers (hop-by-hop, destination, routing) too; an IPv6 fragment header,
  another extension header, non-TCP packets and other link types are
  delivered at once, unmerged, like the kernel does for protocols without a
  GRO handler.

Link types: Ethernet (VLAN/QinQ tags, IPIP, VXLAN on UDP 4789), Linux cooked
v1/v2 and raw IP; pcapng input is read by ``offloadkit.io`` (first interface's
link type); OUT is always classic pcap.
"""
from __future__ import annotations

import hashlib
import struct
import sys

import numpy as np

from .. import codes
from ..engine.gro import GroHints, GroParams, gro
from ..io.pcap import Pcap, _parse_options, fold, ones_sum, read_raw, write_raw
from ..trace import FIELDS, Trace

LINK_ETHERNET, LINK_RAW_ALT, LINK_RAW, LINK_SLL, LINK_IPV4, LINK_IPV6, LINK_SLL2 = 1, 12, 101, 113, 228, 229, 276
VXLAN_PORT = 4789
RX_CHOICES = ("none", "unnecessary", "complete", "unnecessary-outer-only")


def configure(parser) -> None:
    parser.add_argument("input", metavar="IN.pcap", help="packets as they arrive at the receiving NIC")
    parser.add_argument("output", metavar="OUT.pcap", help="where to write what the stack sees after GRO")
    parser.add_argument("--napi-budget", type=int, default=64, metavar="N",
                        help="packets per NAPI poll (default 64, NAPI_POLL_WEIGHT); see --hz for what a "
                             "poll that uses it all flushes")
    parser.add_argument("--poll-gap", default="1ms", metavar="T",
                        help="a gap longer than this between two packets means the queue ran empty: the poll "
                             "ends and every held packet is flushed (default 1ms; units ns, us, ms, s; "
                             "'none' turns the rule off)")
    parser.add_argument("--hz", type=int, default=1000, metavar="HZ",
                        help="the receiver's CONFIG_HZ (default 1000). A poll that uses its whole budget "
                             "flushes only packets held since an earlier jiffy when HZ >= 1000, everything "
                             "when HZ < 1000 (e.g. Debian's 250); a poll that runs empty flushes everything")
    parser.add_argument("--rx-csum", default="unnecessary", choices=RX_CHOICES,
                        help="receive checksum offload of the NIC (default unnecessary)")
    parser.add_argument("--cwr-rule", default="old", choices=("old", "accecn"),
                        help="old: a CWR segment flushes (kernels up to 2025, default); accecn: CWR compared "
                             "like other flags")
    parser.add_argument("--max-size", type=int, default=65536, metavar="BYTES",
                        help="gro_max_size (default 65536: merged IP packets <= 65535; more is BIG TCP)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def parse_duration_ns(text: str) -> int | None:
    """'1ms' -> 1000000; bare numbers are seconds; 'none' -> None."""
    s = str(text).strip().lower()
    if s in ("none", "off", "inf"):
        return None
    for unit, mult in (("ns", 1), ("us", 1_000), ("µs", 1_000), ("ms", 1_000_000), ("s", 1_000_000_000)):
        if s.endswith(unit):
            num = s[: -len(unit)]
            break
    else:
        num, mult = s, 1_000_000_000
    try:
        v = float(num)
    except ValueError:
        raise ValueError(f"--poll-gap {text!r} is not a duration: write e.g. 1ms, 250us, 0.002s or none") from None
    if v < 0:
        raise ValueError(f"--poll-gap {text!r} is negative")
    return int(round(v * mult))


# -- parsing one frame ---------------------------------------------------------------

def _h(b: bytes) -> int:
    return int.from_bytes(hashlib.blake2b(b, digest_size=8).digest(), "big")


def _l3(linktype: int, buf: bytes):
    """(offset of the IP header, ethertype, vlan tci or -1) or None."""
    if linktype in (LINK_RAW, LINK_RAW_ALT, LINK_IPV4, LINK_IPV6):
        if not buf:
            return None
        v = buf[0] >> 4
        return (0, 0x0800 if v == 4 else 0x86DD if v == 6 else 0, -1)
    if linktype == LINK_SLL:
        return (16, struct.unpack_from("!H", buf, 14)[0], -1) if len(buf) >= 16 else None
    if linktype == LINK_SLL2:
        return (20, struct.unpack_from("!H", buf, 0)[0], -1) if len(buf) >= 20 else None
    if linktype != LINK_ETHERNET or len(buf) < 14:
        return None
    return _ether(buf, 0)


def _ether(buf: bytes, base: int):
    if len(buf) < base + 14:
        return None
    off, et = base + 14, struct.unpack_from("!H", buf, base + 12)[0]
    tci = -1
    while et in (0x8100, 0x88A8, 0x9100) and len(buf) >= off + 4:
        t = struct.unpack_from("!H", buf, off)[0]
        tci = t if tci < 0 else (tci << 16 | t) & 0x7FFFFFFF
        et = struct.unpack_from("!H", buf, off + 2)[0]
        off += 4
    return off, et, tci


class Frame:
    """Where things are in one record, for patching merged packets."""

    __slots__ = ("ip", "ver", "ihl", "tcp", "thl", "pay", "outer", "udp")

    def __init__(self):
        self.ip = self.ver = self.ihl = self.tcp = self.thl = self.pay = -1
        self.outer = -1   # offset of an outer IPv4 header (IPIP or VXLAN)
        self.udp = -1     # offset of the VXLAN outer UDP header


def parse(linktype: int, buf: bytes, orig_len: int) -> tuple[dict, dict, Frame]:
    """(trace row, hint values, frame offsets) of one record; unparsable -> no_handler."""
    row: dict = {}
    hint = {"no_handler": True, "soft_flush": False, "ip_csum_ok": True, "opt_key": 0, "flow_key": 0,
            "outer_net": -1, "outer_id": 0}
    fr = Frame()
    try:
        _parse(linktype, buf, orig_len, row, hint, fr)
    except (struct.error, IndexError, ValueError):
        hint["no_handler"] = True
    return row, hint, fr


def _parse(linktype, buf, orig_len, row, hint, fr):
    l3 = _l3(linktype, buf)
    if l3 is None:
        return
    off, et, tci = l3
    link_hdr = off if linktype != LINK_ETHERNET else 14   # counted as a 14-byte Ethernet header
    if tci >= 0:
        row["vlan_tci"] = tci
        row["encap"] = codes.ENC_VLAN
    flow_extra = b""
    if et == 0x0800 and len(buf) >= off + 20 and buf[off] >> 4 == 4:
        ihl = (buf[off] & 0xF) * 4
        proto = buf[off + 9]
        tot = struct.unpack_from("!H", buf, off + 2)[0]
        # IPIP: one level, the outer header's rules checked too (ipip_gro_receive)
        if proto == 4 and ihl == 20 and buf[off + 6] & 0x3F == 0 and buf[off + 7] == 0 and len(buf) >= off + 40:
            hint["outer_net"] = buf[off + 8] | buf[off + 1] << 8 | ((buf[off + 6] >> 6) & 1) << 16
            hint["outer_id"] = struct.unpack_from("!H", buf, off + 4)[0]
            hint["ip_csum_ok"] = fold(ones_sum(buf[off:off + 20])) == 0xFFFF
            flow_extra += buf[off + 12:off + 20]
            if tot and orig_len - off != tot:
                hint["soft_flush"] = True
            fr.outer = off
            off += 20
        elif proto == 17 and ihl == 20 and len(buf) >= off + 20 + 8 + 8 + 14:
            u = off + 20
            dport = struct.unpack_from("!H", buf, u + 2)[0]
            if dport == VXLAN_PORT and buf[u + 8] & 0x08:
                inner = _ether(buf, u + 16)
                if inner is not None and inner[1] == 0x0800:
                    row["vni"] = struct.unpack_from("!I", buf, u + 12)[0] >> 8
                    row["outer_udp_csum"] = struct.unpack_from("!H", buf, u + 6)[0]
                    row["encap"] = row.get("encap", 0) | codes.ENC_VXLAN
                    hint["ip_csum_ok"] = fold(ones_sum(buf[off:off + 20])) == 0xFFFF
                    flow_extra += buf[off + 12:off + 20] + buf[u:u + 2]
                    fr.outer, fr.udp = off, u
                    off, et = inner[0], inner[1]
    row["l2_bytes"] = off - link_hdr + 14
    if et == 0x0800 and len(buf) >= off + 20 and buf[off] >> 4 == 4:
        ihl = (buf[off] & 0xF) * 4
        tot = struct.unpack_from("!H", buf, off + 2)[0]
        frag = struct.unpack_from("!H", buf, off + 6)[0]
        if ihl < 20 or len(buf) < off + ihl:
            return
        if not tot:
            tot = orig_len - off
        elif orig_len - off != tot:
            hint["soft_flush"] = True
        row.update(ip_version=4, ip_hlen=ihl, ip_len=tot, tos=buf[off + 1],
                   ip_id=struct.unpack_from("!H", buf, off + 4)[0], df=bool(frag & 0x4000),
                   frag=frag & 0xBFFF, ttl=buf[off + 8], ip_csum=struct.unpack_from("!H", buf, off + 10)[0],
                   src_ip=struct.unpack_from("!I", buf, off + 12)[0], dst_ip=struct.unpack_from("!I", buf, off + 16)[0])
        if fr.outer < 0:
            hint["ip_csum_ok"] = fold(ones_sum(buf[off:off + ihl])) == 0xFFFF
        elif fold(ones_sum(buf[off:off + ihl])) != 0xFFFF:
            hint["ip_csum_ok"] = False
        if buf[off + 9] != 6:
            return
        src, dst = buf[off + 12:off + 16], buf[off + 16:off + 20]
        fr.ip, fr.ver, fr.ihl = off, 4, ihl
        l4, seg_len = off + ihl, tot - ihl
    elif et == 0x86DD and len(buf) >= off + 40 and buf[off] >> 4 == 6:
        w0 = struct.unpack_from("!I", buf, off)[0]
        plen = struct.unpack_from("!H", buf, off + 4)[0]
        if not plen:
            plen = orig_len - off - 40
        elif orig_len - off - 40 != plen:
            hint["soft_flush"] = True
        nxt, p = buf[off + 6], off + 40
        ext = b""
        while nxt in (0, 43, 60):                      # hop-by-hop, routing, destination: pulled
            if len(buf) < p + 8:
                return
            hl = (buf[p + 1] + 1) * 8
            ext += buf[p:p + hl]
            nxt = buf[p]
            p += hl
        row.update(ip_version=6, ip_hlen=p - off, ip_len=40 + plen, tos=(w0 >> 20) & 0xFF, ttl=buf[off + 7],
                   src_ip6=list(buf[off + 8:off + 24]), dst_ip6=list(buf[off + 24:off + 40]), df=True)
        flow_extra += struct.pack("!I", w0 & 0xF00FFFFF) + ext
        if nxt != 6:
            return
        src, dst = buf[off + 8:off + 24], buf[off + 24:off + 40]
        fr.ip, fr.ver, fr.ihl = off, 6, p - off
        l4, seg_len = p, 40 + plen - (p - off)
    else:
        return
    if len(buf) < l4 + 20:
        return
    sport, dport, seq, ack, offb, fl, win, csum, urp = struct.unpack_from("!HHIIBBHHH", buf, l4)
    thl = (offb >> 4) * 4
    if thl < 20 or len(buf) < l4 + thl or seg_len < thl:
        return
    plen = seg_len - thl
    opts = bytes(buf[l4 + 20:l4 + thl])
    row.update(sport=sport, dport=dport, seq=seq, ack=ack, flags=fl | (offb & 1) << 8, window=win, urg_ptr=urp,
               tcp_hlen=thl, payload_len=plen, tcp_csum=csum)
    row.update(_parse_options(opts))
    hint["opt_key"] = _h(opts)
    hint["flow_key"] = _h(flow_extra) if flow_extra else 0
    hint["no_handler"] = False
    fr.tcp, fr.thl, fr.pay = l4, thl, l4 + thl
    if len(buf) >= l4 + seg_len and not hint["soft_flush"]:
        proto_len = seg_len
        s = ones_sum(src) + ones_sum(dst) + 6 + (proto_len >> 16) + (proto_len & 0xFFFF)
        total = fold(s + ones_sum(buf[l4:l4 + seg_len]))
        partial = fold(s)
        if total != 0xFFFF and csum != partial:
            row["csum_bad"] = True
    elif len(buf) < l4 + seg_len:
        row["truncated"] = True


def records_to_trace(pcap: Pcap):
    """(Trace, GroHints, frames) for every record; non-TCP records become pass-through rows."""
    n = len(pcap.records)
    cols = {k: [] for k in FIELDS}
    defaults = {k: FIELDS[k][1] for k in FIELDS}
    hints = {k: [] for k in ("no_handler", "soft_flush", "ip_csum_ok", "opt_key", "flow_key", "outer_net",
                             "outer_id")}
    frames = []
    for i, rec in enumerate(pcap.records):
        row, hint, fr = parse(pcap.linktype, rec[3], rec[2])
        row["time_ns"] = pcap.time_ns(rec)
        row["frame"] = i
        for k in FIELDS:
            if k in ("src_ip6", "dst_ip6", "sack"):
                cols[k].append(row.get(k, [0] * (16 if k != "sack" else 8)))
            else:
                cols[k].append(row.get(k, defaults[k]))
        for k in hints:
            hints[k].append(hint[k])
        frames.append(fr)
    if n == 0:
        return Trace.empty(), None, frames
    trace = Trace.from_columns(**{k: np.asarray(v, dtype=FIELDS[k][0]) for k, v in cols.items()})
    gh = GroHints(no_handler=np.array(hints["no_handler"]), soft_flush=np.array(hints["soft_flush"]),
                  ip_csum_ok=np.array(hints["ip_csum_ok"]), opt_key=np.array(hints["opt_key"], np.uint64),
                  flow_key=np.array(hints["flow_key"], np.uint64), outer_net=np.array(hints["outer_net"], np.int64),
                  outer_id=np.array(hints["outer_id"], np.int64))
    return trace, gh, frames


# -- writing -------------------------------------------------------------------

def merged_record(pcap: Pcap, frames: list, rows: list[int], out_row: dict, time_ns: int):
    """Bytes of a merged packet: the first record's headers patched, payloads concatenated."""
    first = rows[0]
    rec = pcap.records[first]
    fr = frames[first]
    buf = bytearray(rec[3][:fr.pay])
    payload = bytearray()
    complete = True
    plen_total = 0
    for r in rows:
        f = frames[r]
        data = pcap.records[r][3]
        want = int(out_row["plens"][r])
        got = data[f.pay:f.pay + want]
        plen_total += want
        if complete:
            payload += got
            complete = len(got) == want
    delta = plen_total - int(out_row["plens"][first])
    ip = fr.ip
    if fr.ver == 4:
        tot = struct.unpack_from("!H", buf, ip + 2)[0] + delta
        struct.pack_into("!H", buf, ip + 2, tot if tot <= 0xFFFF else 0)
        struct.pack_into("!H", buf, ip + 10, 0)
        struct.pack_into("!H", buf, ip + 10, (~fold(ones_sum(bytes(buf[ip:ip + fr.ihl])))) & 0xFFFF)
        src, dst = bytes(buf[ip + 12:ip + 16]), bytes(buf[ip + 16:ip + 20])
    else:
        pl = struct.unpack_from("!H", buf, ip + 4)[0] + delta
        struct.pack_into("!H", buf, ip + 4, pl if pl <= 0xFFFF else 0)
        src, dst = bytes(buf[ip + 8:ip + 24]), bytes(buf[ip + 24:ip + 40])
    if fr.outer >= 0:
        o = fr.outer
        tot = struct.unpack_from("!H", buf, o + 2)[0] + delta
        struct.pack_into("!H", buf, o + 2, tot if tot <= 0xFFFF else 0)
        struct.pack_into("!H", buf, o + 10, 0)
        struct.pack_into("!H", buf, o + 10, (~fold(ones_sum(bytes(buf[o:o + 20])))) & 0xFFFF)
        if fr.udp >= 0:
            ulen = struct.unpack_from("!H", buf, fr.udp + 4)[0] + delta
            struct.pack_into("!H", buf, fr.udp + 4, ulen & 0xFFFF)
            if struct.unpack_from("!H", buf, fr.udp + 6)[0]:
                us = ones_sum(bytes(buf[o + 12:o + 20])) + 17 + ulen
                struct.pack_into("!H", buf, fr.udp + 6, fold(us))
    t = fr.tcp
    buf[t + 13] |= int(out_row["flor"]) & (codes.FIN | codes.PSH)
    tcp_len = fr.thl + plen_total
    ps = ones_sum(src) + ones_sum(dst) + 6 + (tcp_len >> 16) + (tcp_len & 0xFFFF)
    struct.pack_into("!H", buf, t + 16, fold(ps))
    data = bytes(buf) + bytes(payload)
    orig = fr.pay + plen_total
    return pcap.stamped(time_ns, orig, data)


def run(args) -> int:
    if args.napi_budget < 1:
        raise ValueError(f"--napi-budget {args.napi_budget}: a poll handles at least 1 packet (default 64)")
    params = GroParams(napi_budget=args.napi_budget, poll_gap_ns=parse_duration_ns(args.poll_gap),
                       rx_csum=args.rx_csum, cwr_rule=args.cwr_rule, max_size=args.max_size, hz=args.hz)
    pcap = read_raw(args.input, pcapng=True)
    trace, hints, frames = records_to_trace(pcap)
    res = gro(trace, params, hints)
    out = res.out
    groups: dict[int, list[int]] = {}
    for i, o in enumerate(res.out_row.tolist()):
        groups.setdefault(o, []).append(i)
    flor = (out.flags.astype(np.int64) & (codes.FIN | codes.PSH)).tolist()
    info = {"plens": trace.payload_len}
    recs = []
    for k in range(len(out)):
        rows = groups[k]
        t_ns = int(out.time_ns[k])
        if len(rows) == 1:
            r = pcap.records[rows[0]]
            recs.append(pcap.stamped(t_ns, r[2], r[3]))
        else:
            info["flor"] = flor[k]
            recs.append(merged_record(pcap, frames, rows, info, t_ns))
    write_raw(args.output, pcap, recs)
    merged = int((res.reasons == codes.GRO_MERGED).sum())
    summary = {"input": str(args.input), "output": str(args.output), "packets_in": len(trace),
               "packets_out": len(out), "merged": merged, "reasons": res.reason_counts(),
               "software_checksum_bytes": res.passes.total_bytes()}
    if args.json:
        import json
        print(json.dumps(summary))
    else:
        rs = ", ".join(f"{k} {v}" for k, v in sorted(summary["reasons"].items(), key=lambda kv: -kv[1]))
        print(f"{args.input}: {len(trace)} packets -> {len(out)} after GRO ({merged} merged; {rs}); "
              f"wrote {args.output}")
    if pcap.truncated:
        print(f"offloadkit gro: warning: {args.input} ends inside a packet record; used the complete records",
              file=sys.stderr)
    return 0
