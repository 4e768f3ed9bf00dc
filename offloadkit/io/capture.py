"""Robust reading of real captures: pcap (µs/ns) and pcapng, many link types and encapsulations.

``read_capture(path)`` never raises on a bad file: it returns the TCP packets it
could read plus messages (one of them, ``error``, says why reading stopped early).

Supported: pcap (micro/nanosecond, both byte orders, the "modified" Kuznetsov
variant) and pcapng (several sections and interfaces, each with its own link
type, ``if_tsresol`` and ``if_tsoffset``); link types Ethernet (1), Linux cooked
SLL (113) and SLL2 (276), raw IP (101, 12, 14, 228, 229), BSD loopback (0, 108);
VLAN/QinQ, MPLS label stacks, PPPoE sessions, VXLAN (UDP 4789/8472: the inner
flow is read, ``vni`` and ``outer_udp_csum`` recorded); IPv4 and IPv6 TCP.
Packets cut by the snaplen keep their headers (``truncated`` set; payload length
from the IP header); IP total length 0 (captured TSO) takes the length from the
frame.

Fast path: a plain pcap is walked by numba kernels over the file's bytes; the
kernel decodes Ethernet(+VLAN)/IPv4/TCP itself and leaves every other record to
the Python decoder, which is also the whole slow path. The dpkt loop in
:func:`offloadkit.io.pcap.read_pcap` is the reference both are tested against.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numba import njit

from .. import codes
from ..trace import FIELDS, Trace
from .pcap import _parse_options, tcp_checksums, tcpdump_verdict

LINKTYPE_NAMES = {0: "NULL (BSD loopback)", 1: "Ethernet", 12: "raw IP", 14: "raw IP", 101: "raw IP",
                  108: "OpenBSD loopback", 113: "Linux cooked (SLL)", 228: "raw IPv4", 229: "raw IPv6",
                  276: "Linux cooked v2 (SLL2)"}
SUPPORTED_LINKTYPES = frozenset(LINKTYPE_NAMES)
MAX_CAPLEN = 262144
MAX_ORIG_LEN = 1 << 24        # larger "original lengths" are corrupt records (BIG TCP stays below)
VXLAN_PORTS = (4789, 8472)
PCAP_MAGICS = {0xA1B2C3D4: (1000, 16), 0xA1B23C4D: (1, 16), 0xA1B2CD34: (1000, 24)}

# record-walker error codes (shared by the numba and Python walkers)
ERR_NONE, ERR_SHORT_HEADER, ERR_BAD_CAPLEN, ERR_SHORT_DATA = 0, 1, 2, 3


def linktype_name(lt: int) -> str:
    return f"{LINKTYPE_NAMES.get(lt, 'unsupported')} ({lt})"


@dataclass
class CaptureResult:
    """What :func:`read_capture` found. ``error`` is None when the whole file was read."""

    trace: Trace | None
    format: str = "unknown"
    linktypes: list[int] = field(default_factory=list)   # per interface
    records: int = 0                                      # packet records read (all protocols)
    messages: list[str] = field(default_factory=list)     # notes, then the error if any
    error: str | None = None
    fast_path: bool = False
    payloads: list[bytes] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class _Stats:
    def __init__(self):
        self.skipped: dict[str, int] = {}
        self.truncated = 0
        self.ip_len_zero = 0
        self.unsupported: dict[int, int] = {}

    def skip(self, reason: str, n: int = 1):
        self.skipped[reason] = self.skipped.get(reason, 0) + n


# -- per-frame decoding (Python; the slow path and the fast path's fallback) --------------
def _be16(b, o):
    return b[o] << 8 | b[o + 1]


def decode_frame(linktype: int, buf: bytes, orig_len: int):
    """Decode one captured frame: a row dict (``_payload``: captured payload bytes) or a skip reason."""
    n = len(buf)
    row = {"encap": 0, "vlan_tci": -1, "mpls_labels": 0, "vni": -1, "outer_udp_csum": -1}
    if linktype == 1:
        return _ether(buf, 0, n, orig_len, row)
    if linktype == 113:
        if n < 16:
            return "frame shorter than its link header"
        return _ethertype(buf, 16, _be16(buf, 14), orig_len, row)
    if linktype == 276:
        if n < 20:
            return "frame shorter than its link header"
        return _ethertype(buf, 20, _be16(buf, 0), orig_len, row)
    if linktype == 228:
        return _ip(buf, 0, 4, orig_len, row)
    if linktype == 229:
        return _ip(buf, 0, 6, orig_len, row)
    if linktype in (101, 12, 14):
        if n < 1:
            return "frame shorter than its link header"
        return _ip(buf, 0, buf[0] >> 4, orig_len, row)
    if linktype in (0, 108):
        if n < 4:
            return "frame shorter than its link header"
        fam = struct.unpack(">I" if linktype == 108 else "<I", buf[:4])[0]
        if linktype == 0 and fam > 0xFFFF:
            fam = struct.unpack(">I", buf[:4])[0]
        ver = 4 if fam == 2 else 6 if fam in (10, 24, 28, 30) else 0
        return _ip(buf, 4, ver, orig_len, row) if ver else "not IP"
    return "unsupported link type"


def _ether(buf, off, n, orig_len, row):
    if n < off + 14:
        return "frame shorter than its link header"
    return _ethertype(buf, off + 14, _be16(buf, off + 12), orig_len, row)


def _ethertype(buf, off, et, orig_len, row):
    n = len(buf)
    while True:
        if et in (0x8100, 0x88A8, 0x9100):
            if n < off + 4:
                return "frame cut inside its VLAN tag"
            if row["vlan_tci"] < 0:
                row["vlan_tci"] = _be16(buf, off)
            row["encap"] |= codes.ENC_VLAN
            et = _be16(buf, off + 2)
            off += 4
        elif et in (0x8847, 0x8848):
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
            return _ip(buf, off, ver, orig_len, row)
        elif et == 0x8864:
            if n < off + 8:
                return "frame cut inside its PPPoE header"
            row["encap"] |= codes.ENC_PPPOE
            ppp = _be16(buf, off + 6)
            off += 8
            if ppp == 0x0021:
                return _ip(buf, off, 4, orig_len, row)
            if ppp == 0x0057:
                return _ip(buf, off, 6, orig_len, row)
            if ppp == 0x0281:
                et = 0x8847
                continue
            return "PPP payload is not IP"
        elif et == 0x0800:
            return _ip(buf, off, 4, orig_len, row)
        elif et == 0x86DD:
            return _ip(buf, off, 6, orig_len, row)
        else:
            return "not IP"


def _ip(buf, off, ver, orig_len, row):
    n = len(buf)
    if ver == 4:
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
        if proto == 17:
            return _udp(buf, off, l4, orig_len, row)
        if proto != 6:
            return "not TCP"
        zero = ip_len == 0
        if zero:
            ip_len = max(orig_len - off, 0)
        elif ip_len < ihl:
            return "bad IPv4 header"
        row.update(ip_version=4, src_ip=struct.unpack(">I", buf[off + 12:off + 16])[0],
                   dst_ip=struct.unpack(">I", buf[off + 16:off + 20])[0], ip_id=_be16(buf, off + 4),
                   ttl=buf[off + 8], tos=buf[off + 1], df=bool(frag & 0x4000), frag=frag & 0xBFFF,
                   ip_hlen=ihl, ip_len=ip_len, ip_csum=_be16(buf, off + 10), _ip_len_zero=zero)
        src, dst = bytes(buf[off + 12:off + 16]), bytes(buf[off + 16:off + 20])
        return _tcp(buf, off, l4, ip_len - ihl, 4, src, dst, row)
    if ver == 6:
        if n < off + 40:
            return "frame cut inside its IP header"
        if buf[off] >> 4 != 6:
            return "bad IPv6 header"
        plen6 = _be16(buf, off + 4)
        nh = buf[off + 6]
        zero = plen6 == 0
        if zero:
            plen6 = max(orig_len - off - 40, 0)
        l4 = off + 40
        ext = 0
        for _ in range(8):
            if nh in (0, 43, 60):
                if n < l4 + 2:
                    return "frame cut inside an IPv6 extension header"
                ln = (buf[l4 + 1] + 1) * 8
                nh = buf[l4]
            elif nh == 44:
                if n < l4 + 8:
                    return "frame cut inside an IPv6 extension header"
                if _be16(buf, l4 + 2) & 0xFFF8:
                    return "IP fragment"
                ln = 8
                nh = buf[l4]
            else:
                break
            l4 += ln
            ext += ln
        tc = (_be16(buf, off) >> 4) & 0xFF
        src, dst = bytes(buf[off + 8:off + 24]), bytes(buf[off + 24:off + 40])
        if nh == 17:
            return _udp(buf, off, l4, orig_len, row)
        if nh != 6:
            return "not TCP"
        row.update(ip_version=6, src_ip6=list(src), dst_ip6=list(dst), ttl=buf[off + 7], tos=tc,
                   df=True, ip_hlen=40 + ext, ip_len=40 + plen6, _ip_len_zero=zero)
        return _tcp(buf, off, l4, plen6 - ext, 6, src, dst, row)
    return "not IP"


def _udp(buf, ip_off, l4, orig_len, row):
    n = len(buf)
    if n < l4 + 8:
        return "not TCP"
    dport = _be16(buf, l4 + 2)
    if dport not in VXLAN_PORTS or row["encap"] & codes.ENC_VXLAN:
        return "not TCP"
    if n < l4 + 16:
        return "frame cut inside its VXLAN header"
    if not buf[l4 + 8] & 0x08:
        return "not TCP"
    row["encap"] |= codes.ENC_VXLAN
    row["vni"] = struct.unpack(">I", buf[l4 + 12:l4 + 16])[0] >> 8
    row["outer_udp_csum"] = _be16(buf, l4 + 6)
    inner = l4 + 16
    return _ether(buf, inner, n, orig_len, row)


def _tcp(buf, ip_off, t, seg_len, version, src, dst, row):
    n = len(buf)
    if n < t + 20:
        return "frame cut before the end of the TCP header (snaplen too small)"
    sport, dport, seq, ack, off, fl, win, csum, urp = struct.unpack(">HHIIBBHHH", buf[t:t + 20])
    thl = (off >> 4) * 4
    if thl < 20:
        return "bad TCP header length"
    plen = max(seg_len - thl, 0)
    opt_end = min(t + thl, n)
    avail = max(n - (t + thl), 0)
    truncated = n < t + thl or avail < plen
    row.update(sport=sport, dport=dport, seq=seq, ack=ack, flags=fl | (off & 1) << 8, window=win,
               urg_ptr=urp, tcp_hlen=thl, payload_len=plen, tcp_csum=csum, truncated=truncated,
               l2_bytes=ip_off, csum_bad=False, csum_state=0)
    row.update(_parse_options(bytes(buf[t + 20:opt_end])))
    if n >= t + thl:
        hdr = bytes(buf[t:t + 16]) + b"\0\0" + bytes(buf[t + 18:t + thl])
        payload = bytes(buf[t + thl:t + thl + plen])
        whole = not truncated and not row.get("frag", 0) & 0x2000
        correct, partial = tcp_checksums(version, src, dst, hdr, payload if whole else b"", plen)
        if whole and tcpdump_verdict(csum, correct) is not None:
            if csum == partial:
                row["csum_state"] = codes.CSUM_PARTIAL
            else:
                row["csum_bad"] = True
        elif not whole and csum == partial:
            row["csum_state"] = codes.CSUM_PARTIAL
        row["_payload"] = payload
    else:
        row["_payload"] = b""
    return row


# -- numba fast path for plain pcap ------------------------------------------------------
@njit(cache=True)
def _u32(data, o, swapped):
    if swapped:
        return (np.uint32(data[o]) << 24) | (np.uint32(data[o + 1]) << 16) | (np.uint32(data[o + 2]) << 8) \
            | np.uint32(data[o + 3])
    return (np.uint32(data[o + 3]) << 24) | (np.uint32(data[o + 2]) << 16) | (np.uint32(data[o + 1]) << 8) \
        | np.uint32(data[o])


@njit(cache=True)
def walk_pcap(data, start, swapped, rec_hdr, maxcap, fill, off, cap, orig, sec, frac):
    """Walk pcap records from ``start``: (records, end offset, error code). ``fill``: store them."""
    size = data.size
    pos = start
    n = 0
    err = 0
    while pos < size:
        if pos + rec_hdr > size:
            err = 1
            break
        c = np.int64(_u32(data, pos + 8, swapped))
        o = np.int64(_u32(data, pos + 12, swapped))
        if c > maxcap:
            err = 2
            break
        if pos + rec_hdr + c > size:
            err = 3
            break
        if fill:
            off[n] = pos + rec_hdr
            cap[n] = c
            orig[n] = o
            sec[n] = _u32(data, pos, swapped)
            frac[n] = _u32(data, pos + 4, swapped)
        n += 1
        pos += rec_hdr + c
    return n, pos, err


@njit(cache=True)
def _be16n(data, o):
    return (np.int64(data[o]) << 8) | np.int64(data[o + 1])


@njit(cache=True)
def _be32n(data, o):
    return (np.int64(data[o]) << 24) | (np.int64(data[o + 1]) << 16) | (np.int64(data[o + 2]) << 8) \
        | np.int64(data[o + 3])


@njit(cache=True)
def _fold(s):
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


@njit(cache=True)
def decode_eth_ipv4_tcp(data, off, cap, orig, status, src_ip, dst_ip, sport, dport, seq, ack, payload_len,
                        flags, window, urg_ptr, tcp_hlen, opt_mss, opt_sackok, opt_ts, tsval, tsecr,
                        opt_wscale, sack_n, sack, ip_id, ttl, tos, df, frag, ip_hlen, ip_len, ip_csum,
                        l2_bytes, encap, vlan_tci, tcp_csum, csum_bad, csum_state, truncated):
    """Decode Ethernet(+VLAN)/IPv4/TCP records in place.

    status: 0 decoded, 1 not TCP, 3 not IP, 2 left to the Python decoder."""
    for i in range(off.size):
        b = off[i]
        c = np.int64(cap[i])
        status[i] = 2
        if c < 14:
            continue
        et = _be16n(data, b + 12)
        p = np.int64(14)
        tci = -1
        enc = 0
        while et == 0x8100 or et == 0x88A8 or et == 0x9100:
            if c < p + 4:
                break
            if tci < 0:
                tci = _be16n(data, b + p)
            enc |= 1
            et = _be16n(data, b + p + 2)
            p += 4
        if et == 0x8100 or et == 0x88A8 or et == 0x9100:
            continue
        if et == 0x86DD or et == 0x8847 or et == 0x8848 or et == 0x8864:
            continue
        if et != 0x0800:
            status[i] = 3
            continue
        if c < p + 20:
            continue
        vihl = data[b + p]
        ihl = np.int64(vihl & 15) * 4
        if (vihl >> 4) != 4 or ihl < 20 or c < p + ihl:
            continue
        proto = data[b + p + 9]
        fr = _be16n(data, b + p + 6)
        if fr & 0x1FFF:
            continue
        if proto == 17:
            if c >= p + ihl + 4:
                d = _be16n(data, b + p + ihl + 2)
                if d != 4789 and d != 8472:
                    status[i] = 1
            continue
        if proto != 6:
            status[i] = 1
            continue
        il = _be16n(data, b + p + 2)
        if il < ihl:
            continue
        t = p + ihl
        if c < t + 20:
            continue
        thl = np.int64(data[b + t + 12] >> 4) * 4
        if thl < 20:
            continue
        # decoded: fill the row
        status[i] = 0
        encap[i] = enc
        vlan_tci[i] = tci
        l2_bytes[i] = p
        ip_hlen[i] = ihl
        ip_len[i] = il
        tos[i] = data[b + p + 1]
        ip_id[i] = _be16n(data, b + p + 4)
        df[i] = (fr & 0x4000) != 0
        frag[i] = fr & 0xBFFF
        ttl[i] = data[b + p + 8]
        ip_csum[i] = _be16n(data, b + p + 10)
        sa = _be32n(data, b + p + 12)
        da = _be32n(data, b + p + 16)
        src_ip[i] = sa
        dst_ip[i] = da
        sport[i] = _be16n(data, b + t)
        dport[i] = _be16n(data, b + t + 2)
        seq[i] = _be32n(data, b + t + 4)
        ack[i] = _be32n(data, b + t + 8)
        fl = np.int64(data[b + t + 13]) | (np.int64(data[b + t + 12] & 1) << 8)
        flags[i] = fl
        window[i] = _be16n(data, b + t + 14)
        cs = _be16n(data, b + t + 16)
        tcp_csum[i] = cs
        urg_ptr[i] = _be16n(data, b + t + 18)
        tcp_hlen[i] = thl
        plen = il - ihl - thl
        if plen < 0:
            plen = 0
        payload_len[i] = plen
        oend = t + thl
        if oend > c:
            oend = c
        avail = c - (t + thl)
        if avail < 0:
            avail = 0
        trunc = c < t + thl or avail < plen
        truncated[i] = trunc
        # options
        k = t + 20
        while k < oend:
            kind = data[b + k]
            if kind == 0:
                break
            if kind == 1:
                k += 1
                continue
            if k + 1 >= oend:
                break
            ln = np.int64(data[b + k + 1])
            if ln < 2 or k + ln > oend:
                break
            if kind == 2 and ln == 4:
                opt_mss[i] = _be16n(data, b + k + 2)
            elif kind == 3 and ln == 3:
                ws = data[b + k + 2]
                opt_wscale[i] = ws if ws < 127 else 127
            elif kind == 4 and ln == 2:
                opt_sackok[i] = True
            elif kind == 8 and ln == 10:
                opt_ts[i] = True
                tsval[i] = _be32n(data, b + k + 2)
                tsecr[i] = _be32n(data, b + k + 6)
            elif kind == 5 and (ln - 2) % 8 == 0:
                nb = (ln - 2) // 8
                if nb > sack.shape[1] // 2:
                    nb = sack.shape[1] // 2
                sack_n[i] = nb
                for j in range(2 * nb):
                    sack[i, j] = _be32n(data, b + k + 2 + 4 * j)
                for j in range(2 * nb, sack.shape[1]):
                    sack[i, j] = 0
            k += ln
        # checksum
        if c >= t + thl:
            seg = thl + plen
            ph = (sa >> 16) + (sa & 0xFFFF) + (da >> 16) + (da & 0xFFFF) + 6 + (seg >> 16) + (seg & 0xFFFF)
            partial = _fold(ph)
            whole = (not trunc) and (fr & 0x2000) == 0
            if whole:
                s = ph
                e = t + seg
                j = t
                while j + 1 < e:
                    if j != t + 16:
                        s += (np.int64(data[b + j]) << 8) | np.int64(data[b + j + 1])
                    j += 2
                if j < e:
                    s += np.int64(data[b + j]) << 8
                correct = (~_fold(s)) & 0xFFFF
                s_without = _fold((~correct) & 0xFFFF)
                computed = (~_fold(s_without + cs)) & 0xFFFF
                if computed != 0:
                    if cs == partial:
                        csum_state[i] = 3
                    else:
                        csum_bad[i] = True
            elif cs == partial:
                csum_state[i] = 3


_FAST_COLUMNS = ("src_ip", "dst_ip", "sport", "dport", "seq", "ack", "payload_len", "flags", "window",
                 "urg_ptr", "tcp_hlen", "opt_mss", "opt_sackok", "opt_ts", "tsval", "tsecr", "opt_wscale",
                 "sack_n", "sack", "ip_id", "ttl", "tos", "df", "frag", "ip_hlen", "ip_len", "ip_csum",
                 "l2_bytes", "encap", "vlan_tci", "tcp_csum", "csum_bad", "csum_state", "truncated")


def warmup() -> None:
    """Compile the fast-path kernels on a two-packet capture."""
    from .pcap import write_pcap
    import os
    import tempfile
    t = Trace.from_columns(seq=[1, 2], payload_len=[0, 10], flags=codes.ACK, opt_ts=True, sack_n=[0, 1])
    fd, name = tempfile.mkstemp(suffix=".pcap")
    os.close(fd)
    try:
        write_pcap(name, t)
        read_capture(name)
    finally:
        os.unlink(name)


# -- file walking --------------------------------------------------------------------------
def _rows_to_trace(rows: list[dict]) -> Trace | None:
    if not rows:
        return None
    present = set().union(*rows)
    cols = {}
    for k in FIELDS:
        if k in present:
            dflt = FIELDS[k][1] if not FIELDS[k][2] else [FIELDS[k][1]] * FIELDS[k][2][0]
            cols[k] = np.asarray([r.get(k, dflt) for r in rows], dtype=FIELDS[k][0])
    return Trace.from_columns(**cols)


def _finish(rows, fast_trace, fast_payloads, stats: _Stats, res: CaptureResult, with_payload: bool):
    """Merge fast and slow rows in frame order, attach notes and flows."""
    payloads = [r.pop("_payload", b"") for r in rows]
    for r in rows:
        if r.pop("_ip_len_zero", False):
            stats.ip_len_zero += 1
    slow = _rows_to_trace(rows)
    parts = [t for t in (fast_trace, slow) if t is not None and len(t)]
    if len(parts) == 2:
        trace = Trace.concat(parts)
        order = np.argsort(trace.frame, kind="stable")
        trace = trace[order]
    else:
        trace = parts[0] if parts else Trace.empty()
        order = np.arange(len(trace))
    stats.truncated = int(trace.truncated.sum()) if len(trace) else 0
    if with_payload:
        allp = (fast_payloads or []) + payloads
        res.payloads = [allp[j] for j in order.tolist()] if len(trace) else []
    res.trace = assign_flows(trace)
    res.trace.meta.update(format=res.format, linktypes=list(res.linktypes))
    notes = []
    if stats.truncated:
        notes.append(f"{stats.truncated} packets were cut by the capture's snaplen: their headers are used "
                     f"and their payload lengths come from the IP header (column 'truncated').")
    if stats.ip_len_zero:
        notes.append(f"{stats.ip_len_zero} packets had IP total length 0 (captured before TSO/GSO "
                     f"segmentation): their length was taken from the frame.")
    for lt, k in stats.unsupported.items():
        notes.append(f"{k} packets on an interface with unsupported link type {lt} were skipped "
                     f"(offloadkit reads {', '.join(sorted(set(LINKTYPE_NAMES.values())))}).")
    for reason, k in sorted(stats.skipped.items()):
        notes.append(f"{k} packets skipped: {reason}.")
    res.messages = notes + res.messages
    if res.error:
        res.messages.append(res.error)
    return res


def _decode_into(rows, stats, linktype, buf, orig_len, frame, ts_ns):
    orig_len = min(orig_len, MAX_ORIG_LEN)
    ts_ns = min(max(ts_ns, -(1 << 63)), (1 << 63) - 1)
    if linktype not in SUPPORTED_LINKTYPES:
        stats.unsupported[linktype] = stats.unsupported.get(linktype, 0) + 1
        return
    got = decode_frame(linktype, buf, orig_len)
    if isinstance(got, str):
        stats.skip(got)
        return
    got["frame"] = frame
    got["time_ns"] = ts_ns
    rows.append(got)


def _walk_error(err: int, n: int, pos: int, cap: int | None = None) -> str:
    done = f"{n} packet records were read before it"
    if err == ERR_SHORT_HEADER:
        return f"the file ends inside the header of packet record {n + 1} (offset {pos}): " \
               f"the capture is truncated; {done}."
    if err == ERR_BAD_CAPLEN:
        return f"packet record {n + 1} (offset {pos}) claims a captured length of {cap} bytes, more than " \
               f"any capture allows: the file is corrupt from there; {done}."
    return f"the file ends inside the data of packet record {n + 1} (offset {pos}): " \
           f"the capture is truncated; {done}."


def _read_pcap(data: np.ndarray, res: CaptureResult, stats: _Stats, fast: bool, with_payload: bool):
    raw = bytes(data[:24])
    le = struct.unpack("<I", raw[:4])[0]
    if le in PCAP_MAGICS:
        swapped, magic = False, le
    else:
        swapped, magic = True, struct.unpack(">I", raw[:4])[0]
    mult, rec_hdr = PCAP_MAGICS[magic]
    endian = ">" if swapped else "<"
    res.format = "pcap" if mult == 1000 else "pcap-ns"
    if len(raw) < 24:
        res.error = f"the file ends inside its 24-byte pcap header ({len(raw)} bytes): no packets."
        return _finish([], None, None, stats, res, with_payload)
    _, _, _, _, snaplen, lt_field = struct.unpack(endian + "HHiIII", raw[4:24])
    linktype = lt_field & 0x03FFFFFF
    res.linktypes = [linktype]
    maxcap = max(MAX_CAPLEN, min(snaplen, 1 << 24))
    arr = data
    empty = np.empty(0, np.int64)
    n, end, err = walk_pcap(arr, 24, swapped, rec_hdr, maxcap, False, empty, empty, empty, empty, empty)
    off = np.empty(n, np.int64)
    cap = np.empty(n, np.int64)
    orig = np.empty(n, np.int64)
    sec = np.empty(n, np.int64)
    frac = np.empty(n, np.int64)
    walk_pcap(arr, 24, swapped, rec_hdr, maxcap, True, off, cap, orig, sec, frac)
    res.records = n
    if err:
        bad = None
        if err == ERR_BAD_CAPLEN:
            bad = struct.unpack(endian + "I", bytes(arr[end + 8:end + 12]))[0]
        res.error = _walk_error(err, n, end, bad)
    orig = np.maximum(orig, cap)
    times = sec * 1_000_000_000 + frac * mult
    rows: list[dict] = []
    fast_trace = None
    fast_payloads = None
    todo = np.arange(n)
    if fast and linktype == 1 and n:
        t = Trace.empty(n)
        cols = t.columns
        status = np.empty(n, np.uint8)
        decode_eth_ipv4_tcp(arr, off, cap, orig, status, *[cols[k] for k in _FAST_COLUMNS])
        cols["time_ns"][:] = times
        cols["frame"][:] = np.arange(1, n + 1)
        keep = status == 0
        fast_trace = t if keep.all() else t[keep] if keep.any() else None
        for code, reason in ((1, "not TCP"), (3, "not IP")):
            nskip = int((status == code).sum())
            if nskip:
                stats.skip(reason, nskip)
        todo = np.nonzero(status == 2)[0]
        res.fast_path = True
        if with_payload and fast_trace is not None:
            idx = np.nonzero(keep)[0]
            st = off[idx] + fast_trace.l2_bytes + fast_trace.ip_hlen + fast_trace.tcp_hlen
            en = np.minimum(st + fast_trace.payload_len, off[idx] + cap[idx])
            fast_payloads = [bytes(arr[a:b]) if b > a else b"" for a, b in zip(st.tolist(), en.tolist())]
    if linktype not in SUPPORTED_LINKTYPES:
        stats.unsupported[linktype] = len(todo)
    else:
        for j in todo.tolist():
            o, c = int(off[j]), int(cap[j])
            _decode_into(rows, stats, linktype, bytes(arr[o:o + c]), int(orig[j]), j + 1, int(times[j]))
    return _finish(rows, fast_trace, fast_payloads, stats, res, with_payload)


def _tsresol_ns(ts: int, resol: int, offset_s: int) -> int:
    if resol & 0x80:
        ns = (ts * 1_000_000_000) >> (resol & 0x7F)
    else:
        e = resol & 0x7F
        ns = ts * 10 ** (9 - e) if e <= 9 else ts // 10 ** (e - 9)
    return ns + offset_s * 1_000_000_000


def _pcapng_records(data: bytes, res: CaptureResult, stats: _Stats):
    """Packets of a pcapng file: (frame, linktype, time_ns, captured bytes, original length)."""
    res.format = "pcapng"
    size = len(data)
    pos = 0
    endian = "<"
    ifaces: list[list[int]] = []           # [linktype, snaplen, tsresol, tsoffset]
    frame = 0
    bad_iface = 0
    while pos < size:
        if pos + 12 > size:
            res.error = f"the file ends inside a block header (offset {pos}): the capture is truncated; " \
                        f"{frame} packets were read before it."
            break
        btype = struct.unpack(endian + "I", data[pos:pos + 4])[0]
        if btype == 0x0A0D0D0A:
            bom = data[pos + 8:pos + 12]
            if bom == b"\x4d\x3c\x2b\x1a":
                endian = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                endian = ">"
            else:
                res.error = f"section header at offset {pos} has no valid byte-order magic: the file is " \
                            f"corrupt from there; {frame} packets were read before it."
                break
            ifaces = []
        blen = struct.unpack(endian + "I", data[pos + 4:pos + 8])[0]
        if blen < 12 or blen % 4:
            res.error = f"block at offset {pos} has an invalid length {blen}: the file is corrupt from " \
                        f"there; {frame} packets were read before it."
            break
        if pos + blen > size:
            res.error = f"the file ends inside a {blen}-byte block at offset {pos}: the capture is " \
                        f"truncated; {frame} packets were read before it."
            break
        if struct.unpack(endian + "I", data[pos + blen - 4:pos + blen])[0] != blen:
            res.error = f"block at offset {pos} has mismatched length fields: the file is corrupt from " \
                        f"there; {frame} packets were read before it."
            break
        body = data[pos + 8:pos + blen - 4]
        if btype == 0x0A0D0D0A:
            if len(body) < 16:
                res.error = f"section header at offset {pos} is too short: the file is corrupt from there; " \
                            f"{frame} packets were read before it."
                break
        elif btype == 1:
            if len(body) < 8:
                res.error = f"interface description at offset {pos} is too short: the file is corrupt " \
                            f"from there; {frame} packets were read before it."
                break
            lt, _, snap = struct.unpack(endian + "HHI", body[:8])
            resol, tsoff = 6, 0
            k = 8
            while k + 4 <= len(body):
                code, ln = struct.unpack(endian + "HH", body[k:k + 4])
                if code == 0 or k + 4 + ln > len(body):
                    break
                val = body[k + 4:k + 4 + ln]
                if code == 9 and ln >= 1:
                    resol = val[0]
                elif code == 14 and ln >= 8:
                    tsoff = struct.unpack(endian + "q", val[:8])[0]
                k += 4 + ((ln + 3) & ~3)
            ifaces.append([lt, snap, resol, tsoff])
            res.linktypes.append(lt)
        elif btype in (6, 2, 3):
            frame += 1
            if btype == 3:
                if len(body) < 4:
                    stats.skip("malformed packet block")
                    pos += blen
                    continue
                iface = 0
                orig = struct.unpack(endian + "I", body[:4])[0]
                cap = min(orig, len(body) - 4)
                if ifaces and ifaces[0][1]:
                    cap = min(cap, ifaces[0][1])
                ts_raw, pkt = None, body[4:4 + cap]
            else:
                if len(body) < 20:
                    stats.skip("malformed packet block")
                    pos += blen
                    continue
                if btype == 6:
                    iface, hi, lo, cap, orig = struct.unpack(endian + "IIIII", body[:20])
                else:
                    iface, _, hi, lo, cap, orig = struct.unpack(endian + "HHIIII", body[:20])
                if cap > len(body) - 20:
                    res.error = f"packet block at offset {pos} claims {cap} captured bytes but holds " \
                                f"{len(body) - 20}: the file is corrupt from there; {frame - 1} packets " \
                                f"were read before it."
                    frame -= 1
                    break
                ts_raw, pkt = (hi << 32) | lo, body[20:20 + cap]
            if iface >= len(ifaces):
                bad_iface += 1
            else:
                lt, _, resol, tsoff = ifaces[iface]
                ts = _tsresol_ns(ts_raw, resol, tsoff) if ts_raw is not None else 0
                yield frame, lt, ts, pkt, max(orig, len(pkt))
        pos += blen
    res.records = frame
    if bad_iface:
        stats.skip("packet refers to an interface the file does not describe", bad_iface)


def _read_pcapng(data: bytes, res: CaptureResult, stats: _Stats, with_payload: bool):
    rows: list[dict] = []
    for frame, lt, ts, pkt, orig in _pcapng_records(data, res, stats):
        _decode_into(rows, stats, lt, pkt, orig, frame, ts)
    return _finish(rows, None, None, stats, res, with_payload)


def read_capture(path, with_payload: bool = False, fast: bool = True) -> CaptureResult:
    """Read the TCP packets of a pcap or pcapng file; never raises on bad contents.

    path: a file name, or the file's bytes. with_payload: also return the captured
    payload bytes of each row (``result.payloads``). fast=False forces the Python
    decoder for every record. A missing or unreadable file raises ValueError.
    """
    if isinstance(path, (bytes, bytearray, memoryview)):
        data = np.frombuffer(bytes(path), dtype=np.uint8).copy()
        p = Path("<bytes>")
    else:
        p = Path(path)
        try:
            data = np.fromfile(p, dtype=np.uint8)
        except OSError as e:
            raise ValueError(f"cannot read capture {path}: {e.strerror or e}") from None
    stats = _Stats()
    res = CaptureResult(None)
    head = bytes(data[:4])
    if len(head) < 4:
        res.error = f"{p.name} is {len(data)} bytes long: too short to be a pcap or pcapng file."
        return _finish([], None, None, stats, res, with_payload)
    le, be = struct.unpack("<I", head)[0], struct.unpack(">I", head)[0]
    if le in PCAP_MAGICS or be in PCAP_MAGICS:
        return _read_pcap(data, res, stats, fast, with_payload)
    if le == 0x0A0D0D0A:
        return _read_pcapng(data.tobytes(), res, stats, with_payload)
    res.error = f"{p.name} is not a pcap or pcapng file (it starts with bytes {head.hex()})."
    return _finish([], None, None, stats, res, with_payload)


@dataclass
class Record:
    """One packet record of a capture file, undecoded."""

    frame: int          # 1-based packet number
    time_ns: int
    linktype: int
    data: bytes         # the captured bytes
    orig_len: int       # the packet's length on the wire


def read_records(path) -> tuple[list[Record], CaptureResult]:
    """Every packet record of a pcap/pcapng file, whatever its protocol, in file order.

    For tools that rewrite captures (e.g. ``offloadkit segment`` passing non-TCP
    packets through unchanged; write them back with :func:`offloadkit.io.pcap.write_records`).
    The CaptureResult carries format, link types and the error message of a damaged
    file (its ``trace`` is empty). Raises ValueError only for an unreadable path.
    """
    if isinstance(path, (bytes, bytearray, memoryview)):
        data = bytes(path)
    else:
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise ValueError(f"cannot read capture {path}: {e.strerror or e}") from None
    res = CaptureResult(Trace.empty())
    stats = _Stats()
    out: list[Record] = []
    le = struct.unpack("<I", data[:4])[0] if len(data) >= 4 else None
    be = struct.unpack(">I", data[:4])[0] if len(data) >= 4 else None
    if le == 0x0A0D0D0A:
        res.format = "pcapng"
        for frame, lt, ts, pkt, orig in _pcapng_records(data, res, stats):
            out.append(Record(frame, min(max(ts, -(1 << 63)), (1 << 63) - 1), lt, bytes(pkt), orig))
    elif le in PCAP_MAGICS or be in PCAP_MAGICS:
        swapped = le not in PCAP_MAGICS
        mult, rec_hdr = PCAP_MAGICS[be if swapped else le]
        res.format = "pcap" if mult == 1000 else "pcap-ns"
        if len(data) < 24:
            res.error = f"the file ends inside its 24-byte pcap header ({len(data)} bytes): no packets."
        else:
            e = ">" if swapped else "<"
            snaplen, lt_field = struct.unpack(e + "II", data[16:24])
            lt = lt_field & 0x03FFFFFF
            res.linktypes = [lt]
            maxcap = max(MAX_CAPLEN, min(snaplen, 1 << 24))
            pos, n = 24, 0
            while pos < len(data):
                if pos + rec_hdr > len(data):
                    res.error = _walk_error(ERR_SHORT_HEADER, n, pos)
                    break
                sec, frac, cap, orig = struct.unpack(e + "IIII", data[pos:pos + 16])
                if cap > maxcap:
                    res.error = _walk_error(ERR_BAD_CAPLEN, n, pos, cap)
                    break
                if pos + rec_hdr + cap > len(data):
                    res.error = _walk_error(ERR_SHORT_DATA, n, pos)
                    break
                n += 1
                out.append(Record(n, sec * 1_000_000_000 + frac * mult, lt,
                                  data[pos + rec_hdr:pos + rec_hdr + cap], max(orig, cap)))
                pos += rec_hdr + cap
    else:
        res.error = "not a pcap or pcapng file"
    res.records = len(out)
    if res.error:
        res.messages.append(res.error)
    return out, res


# -- flows --------------------------------------------------------------------------------
def assign_flows(trace: Trace) -> Trace:
    """Set ``flow`` (connections numbered by first appearance) and ``direction``
    (0: the side that sends more payload bytes, ties: the side of the flow's first packet)."""
    n = len(trace)
    if n == 0:
        return trace
    v6 = trace.ip_version == 6
    a = (trace.src_ip.astype(np.uint64) << np.uint64(16)) | trace.sport.astype(np.uint64)
    b = (trace.dst_ip.astype(np.uint64) << np.uint64(16)) | trace.dport.astype(np.uint64)
    if v6.any():
        for arr, ip6, port in ((a, trace.src_ip6, trace.sport), (b, trace.dst_ip6, trace.dport)):
            h = np.frombuffer(np.ascontiguousarray(ip6[v6]).tobytes(), dtype=">u8").reshape(-1, 2)
            mixed = (h[:, 0] * np.uint64(0x9E3779B97F4A7C15)) ^ h[:, 1]
            arr[v6] = (mixed << np.uint64(16)) | port[v6].astype(np.uint64) | np.uint64(1 << 63)
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    keys = np.empty(n, dtype=[("lo", "u8"), ("hi", "u8")])
    keys["lo"], keys["hi"] = lo, hi
    _, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(len(first), np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    flow = rank[inv.ravel()]
    side = (a != lo).astype(np.int64)                   # 0: the lower endpoint sends
    nbytes = np.bincount(flow * 2 + side, weights=trace.payload_len.astype(np.float64),
                         minlength=2 * len(first)).reshape(-1, 2)
    first_side = side[np.sort(first)]                    # per flow in rank order
    data_side = np.where(nbytes[:, 0] > nbytes[:, 1], 0, np.where(nbytes[:, 1] > nbytes[:, 0], 1, first_side))
    direction = (side != data_side[flow]).astype(np.uint8)
    return trace.replace(flow=flow.astype(np.int32), direction=direction)
