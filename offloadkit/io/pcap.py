"""pcap export of a Trace, and a minimal dpkt-based reader (the reference).

Packets are built by hand, byte by byte, so that checksums are exactly what the
trace says (dpkt would fill in any checksum whose field is 0):

- TCP checksum: ``csum_state == CSUM_PARTIAL`` -> the pseudo-header sum a NIC
  with TX checksum offload would complete (what tcpdump shows on the sender);
  ``csum_bad`` -> the ``tcp_csum`` column (made wrong if it happens to be right);
  otherwise the correct checksum over the payload written.
- IP header checksum: always correct.

The payload is synthetic (zeros) unless the caller supplies bytes per row.
TCP options are laid out as Linux ``tcp_options_write`` does (MSS, SACK-permitted,
timestamps, window scale, SACK blocks), padded with EOL up to ``tcp_hlen``.
A model super-packet whose IP total length exceeds 65535 is written with IP
total length 0, as captured TSO packets are.

The full multi-format reader is :mod:`offloadkit.io.capture`; :func:`read_pcap`
here is the small per-packet dpkt loop it is checked against. :func:`read_raw` /
:func:`write_raw` (class :class:`Pcap`) keep a classic pcap's records as raw bytes,
for the CLI verbs that rewrite captures (``segment``, ``gro``).
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable, Sequence, Union

import numpy as np

from .. import codes
from ..trace import MAX_SACK_BLOCKS, Trace

SNAPLEN = 262144
LINKTYPE_ETHERNET = 1
ETH_SRC = bytes.fromhex("020000000001")
ETH_DST = bytes.fromhex("020000000002")
VXLAN_PORT = 4789
VXLAN_OUTER_SRC = bytes([198, 18, 255, 1])
VXLAN_OUTER_DST = bytes([198, 18, 255, 2])
PAYLOAD_SOURCE = Union[None, Callable[[int], bytes], Sequence[bytes]]


# -- checksums ------------------------------------------------------------
def ones_sum(data: bytes, start: int = 0) -> int:
    """Unfolded one's-complement sum of ``data`` as big-endian 16-bit words."""
    if len(data) & 1:
        data = bytes(data) + b"\0"
    if len(data) > 256:
        return start + int(np.frombuffer(data, dtype=">u2").sum(dtype=np.uint64))
    return start + sum(struct.unpack(f"!{len(data) // 2}H", data))


def fold(s: int) -> int:
    """Fold a one's-complement sum to 16 bits (not complemented)."""
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def pseudo_sum(version: int, src: bytes, dst: bytes, tcp_len: int, proto: int = 6) -> int:
    """Unfolded sum of the TCP/UDP pseudo-header (src, dst, protocol, length)."""
    return ones_sum(src + dst) + proto + (tcp_len >> 16) + (tcp_len & 0xFFFF)


def tcp_checksums(version: int, src: bytes, dst: bytes, tcp_header: bytes, payload: bytes,
                  payload_len: int) -> tuple[int, int]:
    """(correct checksum, CHECKSUM_PARTIAL pseudo-header value) of a TCP segment.

    ``tcp_header`` has its checksum field zeroed; ``payload`` may be shorter than
    ``payload_len`` (the rest counts as zeros).
    """
    ph = pseudo_sum(version, src, dst, len(tcp_header) + payload_len)
    s = ones_sum(tcp_header, ph)
    if payload:
        s = ones_sum(payload, s)
    return (~fold(s)) & 0xFFFF, fold(ph)


def tcpdump_verdict(field: int, correct: int) -> int | None:
    """None if tcpdump says "(correct)", else the value it prints after "incorrect ->"."""
    s_without = fold((~correct) & 0xFFFF)        # the sum over everything but the field
    computed = (~fold(s_without + field)) & 0xFFFF
    if computed == 0:
        return None
    return fold(field + computed)


def tcp_field_value(state: int, bad: bool, column: int, correct: int, partial: int) -> int:
    """The checksum field a writer puts on the wire for one row (see module doc)."""
    if state == codes.CSUM_PARTIAL:
        return partial
    if bad:
        return column if tcpdump_verdict(column, correct) is not None else correct ^ 0xFFFF
    return correct


def ip_header_checksum(header: bytes) -> int:
    return (~fold(ones_sum(header))) & 0xFFFF


# -- TCP options ----------------------------------------------------------
def tcp_options(flags: int, mss: int, sackok: bool, ts: bool, tsval: int, tsecr: int,
                wscale: int, sack_n: int, sack: Sequence[int], tcp_hlen: int = 0) -> bytes:
    """TCP option bytes in Linux order, padded (EOL) to 4 bytes and to ``tcp_hlen`` - 20."""
    out = bytearray()
    if mss:
        out += struct.pack("!BBH", 2, 4, mss)
    if ts:
        out += b"\x04\x02" if sackok else b"\x01\x01"
        out += struct.pack("!BBII", 8, 10, tsval, tsecr)
    elif sackok:
        out += b"\x01\x01\x04\x02"
    if wscale >= 0:
        out += struct.pack("!BBBB", 1, 3, 3, wscale)
    room = 40 - len(out) - 4
    n = min(sack_n, MAX_SACK_BLOCKS, max(room, 0) // 8)
    if n:
        out += struct.pack("!BBBB", 1, 1, 5, 2 + 8 * n)
        out += struct.pack(f"!{2 * n}I", *[int(x) for x in sack[:2 * n]])
    want = max(len(out), min(max(tcp_hlen - 20, 0), 40))
    want = (want + 3) & ~3
    out += b"\0" * (want - len(out))
    return bytes(out)


# -- frame building -------------------------------------------------------
class _Rows:
    """Columns as Python lists (fast scalar access)."""

    def __init__(self, trace: Trace):
        self.c = {k: v.tolist() for k, v in trace.columns.items()}

    def __getitem__(self, key):
        return self.c[key]


def _payload_for(payload: PAYLOAD_SOURCE, i: int) -> bytes | None:
    if payload is None:
        return None
    return bytes(payload(i) if callable(payload) else payload[i])


def build_packet(r: _Rows, i: int, data: bytes | None, zeros: bool = True) -> tuple[bytes, bytes, int]:
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
    opts = tcp_options(flags, c["opt_mss"][i], c["opt_sackok"][i], c["opt_ts"][i], c["tsval"][i],
                       c["tsecr"][i], c["opt_wscale"][i], c["sack_n"][i], c["sack"][i], c["tcp_hlen"][i])
    thl = 20 + len(opts)
    tcp_wo = struct.pack("!HHIIBBHHH", c["sport"][i], c["dport"][i], c["seq"][i], c["ack"][i],
                         (thl // 4) << 4 | (flags >> 8 & 1), flags & 0xFF, c["window"][i], 0,
                         c["urg_ptr"][i]) + opts
    if version == 6:
        src, dst = bytes(c["src_ip6"][i]), bytes(c["dst_ip6"][i])
    else:
        src, dst = struct.pack("!I", c["src_ip"][i]), struct.pack("!I", c["dst_ip"][i])
    correct, partial = tcp_checksums(version, src, dst, tcp_wo, data, plen)
    field = tcp_field_value(c["csum_state"][i], c["csum_bad"][i], c["tcp_csum"][i], correct, partial)
    tcp = tcp_wo[:16] + struct.pack("!H", field) + tcp_wo[18:]
    if version == 6:
        seg_len = thl + plen
        tc = c["tos"][i]
        ip = struct.pack("!IHBB", 6 << 28 | tc << 20, seg_len if seg_len <= 0xFFFF else 0, 6,
                         c["ttl"][i]) + src + dst
        full = 40 + seg_len
    else:
        ihl = max(20, min(60, c["ip_hlen"][i] & ~3))
        full = ihl + thl + plen
        frag = (0x4000 if c["df"][i] else 0) | (c["frag"][i] & 0x3FFF)
        hdr = struct.pack("!BBHHHBBH4s4s", 0x40 | ihl // 4, c["tos"][i], full if full <= 0xFFFF else 0,
                          c["ip_id"][i], frag, c["ttl"][i], 6, 0, src, dst) + b"\0" * (ihl - 20)
        ip = hdr[:10] + struct.pack("!H", ip_header_checksum(hdr)) + hdr[12:]
    l2 = _l2_bytes(r, i, version, full)
    return l2, ip + tcp + data, full


def _l2_bytes(r: _Rows, i: int, version: int, ip_full_len: int) -> bytes:
    """Ethernet header and the row's encapsulations (VLAN, PPPoE, MPLS; VXLAN outermost)."""
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
    if enc & codes.ENC_VXLAN:
        vni = c["vni"][i]
        vx = struct.pack("!II", 0x08000000, (vni if vni >= 0 else 1) << 8)
        udp_len = 8 + len(vx) + len(frame_l2) + ip_full_len
        ip_len = 20 + udp_len
        oh = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len if ip_len <= 0xFFFF else 0, 0, 0x4000, 64, 17,
                         0, VXLAN_OUTER_SRC, VXLAN_OUTER_DST)
        oh = oh[:10] + struct.pack("!H", ip_header_checksum(oh)) + oh[12:]
        sport = 49152 + (c["sport"][i] ^ c["dport"][i]) % 16384
        # Outer UDP checksum: 0 (none) unless the row carries one; a nonzero column value
        # is written as given (computing it would need the whole inner frame).
        ucs = c["outer_udp_csum"][i]
        udp = struct.pack("!HHHH", sport, VXLAN_PORT, udp_len & 0xFFFF, ucs if ucs > 0 else 0)
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
    r = _Rows(trace)
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


def write_pcap(path, trace: Trace, payload: PAYLOAD_SOURCE = None, snaplen: int = SNAPLEN,
               header_only: bool = False, nano: bool = False) -> int:
    """Write ``trace`` as an Ethernet pcap; returns the number of packets written.

    payload: None (zeros), a callable ``row -> bytes`` or a sequence of bytes per
    row; fewer bytes than ``payload_len`` writes the record truncated (as captured).
    header_only: records hold the headers only (like ``tcpdump -s``), original
    length stays the full frame length. ``snaplen`` also caps each record.
    Timestamps are ``time_ns`` (nano=True writes a nanosecond pcap).
    """
    if not 0 < snaplen <= SNAPLEN:
        raise ValueError(f"snaplen {snaplen} is out of range: use 1..{SNAPLEN}")
    built = frames(trace, payload, header_only=header_only, snaplen=snaplen)
    return write_records(path, [(t, f, o) for t, (f, o) in zip(trace.time_ns.tolist(), built)],
                         LINKTYPE_ETHERNET, snaplen, nano)


def write_records(path, records, linktype: int = LINKTYPE_ETHERNET, snaplen: int = SNAPLEN,
                  nano: bool = False) -> int:
    """Write raw records ``(time_ns, captured bytes, original length)`` (or objects with
    ``time_ns``, ``data``, ``orig_len`` such as capture.Record) as a pcap; returns the count.

    Use it to pass packets through unchanged next to rebuilt ones (e.g. a frame's own
    L2 header + :func:`build_packet`'s IP datagram).
    """
    if not 0 < snaplen <= SNAPLEN:
        raise ValueError(f"snaplen {snaplen} is out of range: use 1..{SNAPLEN}")

    def stamped():
        for rec in records:
            t, data, orig = (rec.time_ns, rec.data, rec.orig_len) if hasattr(rec, "data") else rec
            sec, frac = divmod(int(t), 1_000_000_000)
            yield sec & 0xFFFFFFFF, frac if nano else frac // 1000, orig, bytes(data)[:snaplen]

    out, n = _pcap_bytes(nano, snaplen, linktype, stamped())
    Path(path).write_bytes(out)
    return n


# -- raw records: read and rewrite a classic pcap byte for byte ------------
PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
_RAW_MAGICS = {b"\xd4\xc3\xb2\xa1": ("<", False), b"\x4d\x3c\xb2\xa1": ("<", True),
               b"\xa1\xb2\xc3\xd4": (">", False), b"\xa1\xb2\x3c\x4d": (">", True)}


class Pcap:
    """A pcap file's header fields and raw records ``(ts_sec, ts_frac, orig_len, data)``."""

    def __init__(self, endian: str, nano: bool, version: tuple[int, int], snaplen: int, linktype_field: int,
                 records: list, truncated: bool):
        self.endian, self.nano, self.version = endian, nano, version
        self.snaplen, self.linktype_field = snaplen, linktype_field
        self.records, self.truncated = records, truncated

    @property
    def linktype(self) -> int:
        return self.linktype_field & 0x0FFFFFFF

    def time_ns(self, rec) -> int:
        """A record's timestamp in nanoseconds."""
        return rec[0] * 1_000_000_000 + (rec[1] if self.nano else rec[1] * 1000)

    def stamped(self, time_ns: int, orig_len: int, data: bytes) -> tuple:
        """A record ``(sec, frac, orig_len, data)`` at ``time_ns`` in this file's resolution."""
        sec, rem = divmod(time_ns, 1_000_000_000)
        return sec, rem if self.nano else rem // 1000, orig_len, data


def read_raw(path, pcapng: bool = False) -> Pcap:
    """A classic pcap file (µs or ns, either byte order, any link type) as raw records.

    A file that ends inside a record keeps its complete records (``truncated``).
    pcapng is refused with a hint to convert it, unless ``pcapng``: then its packets
    are read by :func:`offloadkit.io.capture.read_records` (ns resolution, the first
    interface's link type).
    """
    p = Path(path)
    if not p.exists():
        raise ValueError(f"{path}: no such file")
    if p.is_dir():
        raise ValueError(f"{path} is a directory, not a pcap file")
    data = p.read_bytes()
    if data[:4] == PCAPNG_MAGIC:
        if pcapng:
            return _read_raw_pcapng(path, data)
        raise ValueError(f"{path} is pcapng; convert it with 'editcap -F pcap {path} out.pcap' "
                         f"or capture with 'tcpdump -w' (classic pcap)")
    if len(data) < 24 or data[:4] not in _RAW_MAGICS:
        raise ValueError(f"{path} is not a pcap file (it does not start with a pcap header)")
    endian, nano = _RAW_MAGICS[data[:4]]
    vmaj, vmin, _, _, snaplen, linktype_field = struct.unpack_from(endian + "HHiIII", data, 4)
    rec = struct.Struct(endian + "IIII")
    records = []
    off, n = 24, len(data)
    truncated = False
    while off < n:
        if off + 16 > n:
            truncated = True
            break
        sec, frac, caplen, orig = rec.unpack_from(data, off)
        off += 16
        if off + caplen > n:
            truncated = True
            break
        records.append((sec, frac, max(orig, caplen), data[off:off + caplen]))
        off += caplen
    return Pcap(endian, nano, (vmaj, vmin), snaplen, linktype_field, records, truncated)


def _read_raw_pcapng(path, data: bytes) -> Pcap:
    from .capture import read_records
    recs, res = read_records(data)
    if not res.linktypes or (res.error and not recs):
        raise ValueError(f"{path}: not a readable pcapng file ({res.error or 'no interface description'})")
    pcap = Pcap("<", True, (2, 4), SNAPLEN, res.linktypes[0], [], bool(res.error))
    pcap.records = [pcap.stamped(r.time_ns, r.orig_len, r.data) for r in recs]
    return pcap


def write_raw(path, pcap: Pcap, records: list) -> None:
    """Write records ``(sec, frac, orig_len, data)`` with ``pcap``'s header fields (little-endian)."""
    Path(path).write_bytes(_pcap_bytes(pcap.nano, max(pcap.snaplen, 1), pcap.linktype_field, records)[0])


def _pcap_bytes(nano: bool, snaplen: int, linktype_field: int, records) -> tuple[bytes, int]:
    """(little-endian pcap file bytes, record count) of records ``(sec, frac, orig_len, data)``."""
    parts = [struct.pack("<IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype_field)]
    rec = struct.Struct("<IIII")
    for sec, frac, orig, data in records:
        parts.append(rec.pack(sec, frac, len(data), max(int(orig), len(data))))
        parts.append(data)
    return b"".join(parts), (len(parts) - 1) // 2


# -- dpkt reference reader ------------------------------------------------
def _parse_options(opts: bytes) -> dict:
    res = {"opt_mss": 0, "opt_sackok": False, "opt_ts": False, "tsval": 0, "tsecr": 0,
           "opt_wscale": -1, "sack_n": 0, "sack": [0] * (2 * MAX_SACK_BLOCKS)}
    k = 0
    while k < len(opts):
        kind = opts[k]
        if kind == 0:
            break
        if kind == 1:
            k += 1
            continue
        if k + 1 >= len(opts):
            break
        ln = opts[k + 1]
        if ln < 2 or k + ln > len(opts):
            break
        body = opts[k + 2:k + ln]
        if kind == 2 and ln == 4:
            res["opt_mss"] = struct.unpack("!H", body)[0]
        elif kind == 3 and ln == 3:
            res["opt_wscale"] = min(body[0], 127)
        elif kind == 4 and ln == 2:
            res["opt_sackok"] = True
        elif kind == 8 and ln == 10:
            res["opt_ts"] = True
            res["tsval"], res["tsecr"] = struct.unpack("!II", body)
        elif kind == 5 and (ln - 2) % 8 == 0:
            n = min((ln - 2) // 8, MAX_SACK_BLOCKS)
            res["sack_n"] = n
            res["sack"] = list(struct.unpack(f"!{2 * n}I", body[:8 * n])) + [0] * (2 * (MAX_SACK_BLOCKS - n))
        k += ln
    return res


def read_pcap(path, with_payload: bool = False):
    """Ethernet (VLAN) IPv4/IPv6 TCP packets of a pcap, one dpkt decode per packet.

    Header-only aware: payload length comes from the IP total length (from the
    frame when it is 0). Returns a Trace, or ``(Trace, list[bytes])`` with the
    captured payload bytes of each row when ``with_payload``. The reference for
    :func:`offloadkit.io.capture.read_capture`, which is the robust reader.
    """
    import dpkt

    rows: list[dict] = []
    payloads: list[bytes] = []
    with open(path, "rb") as f:
        try:
            reader = dpkt.pcap.Reader(f)
        except (ValueError, dpkt.NeedData) as e:
            raise ValueError(f"{path}: not a pcap file ({e})") from None
        frame = 0
        for ts, buf in safe_iter(reader):
            frame += 1
            row = _dpkt_row(buf, frame)
            if row is None:
                continue
            row["time_ns"] = _ts_ns(ts)
            payloads.append(row.pop("_payload"))
            rows.append(row)
    from .capture import _rows_to_trace
    trace = _rows_to_trace(rows) or Trace.empty()
    return (trace, payloads) if with_payload else trace


def safe_iter(reader):
    """Iterate a dpkt reader, stopping quietly at a truncated or malformed record."""
    import dpkt
    it = iter(reader)
    while True:
        try:
            yield next(it)
        except StopIteration:
            return
        except (dpkt.NeedData, dpkt.UnpackError, struct.error, ValueError):
            return


def _ts_ns(ts) -> int:
    from decimal import Decimal
    if isinstance(ts, Decimal):
        return int(ts * 1_000_000_000)
    return int(round(ts * 1_000_000)) * 1000


def _dpkt_row(buf: bytes, frame: int) -> dict | None:
    import dpkt

    try:
        eth = dpkt.ethernet.Ethernet(buf)
    except (dpkt.UnpackError, dpkt.NeedData):
        return None
    ip = eth.data
    row = {"frame": frame}
    tags = getattr(eth, "vlan_tags", None) or []
    labels = getattr(eth, "mpls_labels", None) or []
    l2 = 14 + 4 * len(tags) + 4 * len(labels)
    if tags:
        row["encap"] = codes.ENC_VLAN
        t = tags[0]
        row["vlan_tci"] = t.pri << 13 | t.cfi << 12 | t.id
    if labels:
        row["encap"] = row.get("encap", 0) | codes.ENC_MPLS
        row["mpls_labels"] = len(labels)
    if isinstance(ip, dpkt.ip.IP):
        if ip.p != 6 or ip.offset:
            return None
        ihl = ip.hl * 4
        ip_len = ip.len if ip.len else len(buf) - l2
        ipbuf = buf[l2:]
        src, dst = ip.src, ip.dst
        row.update(ip_version=4, src_ip=struct.unpack("!I", src)[0], dst_ip=struct.unpack("!I", dst)[0],
                   ip_id=ip.id, ttl=ip.ttl, tos=ip.tos, df=bool(ip.df),
                   frag=ip.mf << 13 | ip.offset >> 3,
                   ip_hlen=ihl, ip_len=ip_len, ip_csum=ip.sum)
        seg_total = ip_len - ihl
    elif isinstance(ip, dpkt.ip6.IP6):
        if ip.nxt != 6:
            return None
        ihl = 40
        ipbuf = buf[l2:]
        src, dst = ip.src, ip.dst
        plen6 = ip.plen if ip.plen else len(buf) - l2 - 40
        ip_len = 40 + plen6
        row.update(ip_version=6, src_ip6=list(src), dst_ip6=list(dst), ttl=ip.hlim, tos=ip.fc,
                   ip_hlen=40, ip_len=ip_len, df=True)
        seg_total = plen6
    else:
        return None
    row["l2_bytes"] = l2
    tcpb = ipbuf[ihl:]
    if len(tcpb) < 20:
        return None
    sport, dport, seq, ack, off, fl, win, csum, urp = struct.unpack("!HHIIBBHHH", tcpb[:20])
    thl = (off >> 4) * 4
    if thl < 20:
        return None
    flags = fl | (off & 1) << 8
    plen = max(seg_total - thl, 0)
    payload = bytes(tcpb[thl:thl + plen])
    row.update(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, window=win, urg_ptr=urp,
               tcp_hlen=thl, payload_len=plen, tcp_csum=csum, truncated=len(payload) < plen or len(tcpb) < thl)
    row.update(_parse_options(bytes(tcpb[20:thl])))
    if not row["truncated"] and row.get("frag", 0) == 0:
        correct, partial = tcp_checksums(row["ip_version"], bytes(src), bytes(dst),
                                         tcpb[:16] + b"\0\0" + tcpb[18:thl], payload, plen)
        if tcpdump_verdict(csum, correct) is not None:
            if csum == partial:
                row["csum_state"] = codes.CSUM_PARTIAL
            else:
                row["csum_bad"] = True
    elif len(tcpb) >= thl:
        _, partial = tcp_checksums(row["ip_version"], bytes(src), bytes(dst), tcpb[:16] + b"\0\0" + tcpb[18:thl],
                                   b"", plen)
        if csum == partial:
            row["csum_state"] = codes.CSUM_PARTIAL
    row["_payload"] = payload
    return row
