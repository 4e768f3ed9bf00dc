"""pcapng files: the block walker and the writer.

Reading handles several sections (either byte order) and interfaces, each with
its own link type, ``if_tsresol``, ``if_tsoffset`` and ``if_fcslen``; enhanced,
simple and obsolete packet blocks. A damaged file keeps the packets before the
damage and says where it is (``CaptureResult.error``).

Writing (:func:`write_records`) gives every link type found in the records its
own interface, nanosecond timestamps and an ``if_tsoffset`` when a timestamp is
before 1970, so a capture that mixes link types, or whose times do not fit a
classic pcap's 32-bit seconds, is written exactly.
"""
from __future__ import annotations

import struct
from typing import Iterable, Iterator

from .records import CaptureResult, Record, Stats, clamp_time, write_output

MAGIC = b"\x0a\x0d\x0d\x0a"
SHB, IDB, PB, SPB, EPB = 0x0A0D0D0A, 1, 2, 3, 6
OPT_TSRESOL, OPT_FCSLEN, OPT_TSOFFSET = 9, 13, 14


def tsresol_ns(ts: int, resol: int, offset_s: int) -> int:
    """A timestamp in ``if_tsresol`` units (plus ``if_tsoffset`` seconds) in nanoseconds."""
    if resol & 0x80:
        ns = (ts * 1_000_000_000) >> (resol & 0x7F)
    else:
        e = resol & 0x7F
        ns = ts * 10 ** (9 - e) if e <= 9 else ts // 10 ** (e - 9)
    return ns + offset_s * 1_000_000_000


def _interface(body: bytes, endian: str) -> list[int]:
    """[linktype, snaplen, tsresol, tsoffset, fcs bytes] of an interface description block."""
    lt, _, snap = struct.unpack(endian + "HHI", body[:8])
    resol, tsoff, fcs = 6, 0, 0
    k = 8
    while k + 4 <= len(body):
        code, ln = struct.unpack(endian + "HH", body[k:k + 4])
        if code == 0 or k + 4 + ln > len(body):
            break
        val = body[k + 4:k + 4 + ln]
        if code == OPT_TSRESOL and ln >= 1:
            resol = val[0]
        elif code == OPT_TSOFFSET and ln >= 8:
            tsoff = struct.unpack(endian + "q", val[:8])[0]
        elif code == OPT_FCSLEN and ln >= 1:
            fcs = val[0] if val[0] <= 16 else 0
        k += 4 + ((ln + 3) & ~3)
    return [lt, snap, resol, tsoff, fcs]


def records(data: bytes, res: CaptureResult, stats: Stats) -> Iterator[Record]:
    """The packet records of a pcapng file's bytes, in file order (fills ``res``)."""
    res.format = "pcapng"
    size = len(data)
    pos = 0
    endian = "<"
    ifaces: list[list[int]] = []
    frame = 0
    bad_iface = 0

    def fail(text):
        res.error = f"{text}; {frame} packets were read before it."

    while pos < size:
        if pos + 12 > size:
            fail(f"the file ends inside a block header (offset {pos}): the capture is truncated")
            break
        btype = struct.unpack(endian + "I", data[pos:pos + 4])[0]
        if btype == SHB:
            bom = data[pos + 8:pos + 12]
            if bom == b"\x4d\x3c\x2b\x1a":
                endian = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                endian = ">"
            else:
                fail(f"section header at offset {pos} has no valid byte-order magic: the file is corrupt "
                     f"from there")
                break
            ifaces = []
        blen = struct.unpack(endian + "I", data[pos + 4:pos + 8])[0]
        if blen < 12 or blen % 4:
            fail(f"block at offset {pos} has an invalid length {blen}: the file is corrupt from there")
            break
        if pos + blen > size:
            fail(f"the file ends inside a {blen}-byte block at offset {pos}: the capture is truncated")
            break
        if struct.unpack(endian + "I", data[pos + blen - 4:pos + blen])[0] != blen:
            fail(f"block at offset {pos} has mismatched length fields: the file is corrupt from there")
            break
        body = data[pos + 8:pos + blen - 4]
        if btype == SHB:
            if len(body) < 16:
                fail(f"section header at offset {pos} is too short: the file is corrupt from there")
                break
        elif btype == IDB:
            if len(body) < 8:
                fail(f"interface description at offset {pos} is too short: the file is corrupt from there")
                break
            ifaces.append(_interface(body, endian))
            res.linktypes.append(ifaces[-1][0])
            res.fcs.append(ifaces[-1][4])
            if len(ifaces) == 1 and ifaces[0][1]:
                res.snaplen = ifaces[0][1]
            res.fine_times |= tsresol_ns(1_000_000, ifaces[-1][2], 0) < 1_000_000_000
        elif btype in (EPB, PB, SPB):
            frame += 1
            if btype == SPB:
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
                if btype == EPB:
                    iface, hi, lo, cap, orig = struct.unpack(endian + "IIIII", body[:20])
                else:
                    iface, _, hi, lo, cap, orig = struct.unpack(endian + "HHIIII", body[:20])
                if cap > len(body) - 20:
                    frame -= 1
                    fail(f"packet block at offset {pos} claims {cap} captured bytes but holds "
                         f"{len(body) - 20}: the file is corrupt from there")
                    break
                ts_raw, pkt = (hi << 32) | lo, body[20:20 + cap]
            if iface >= len(ifaces):
                bad_iface += 1
            else:
                lt, _, resol, tsoff, fcs = ifaces[iface]
                ts = tsresol_ns(ts_raw, resol, tsoff) if ts_raw is not None else 0
                yield Record(frame, clamp_time(ts), lt, bytes(pkt), max(orig, len(pkt)), fcs)
        pos += blen
    res.records = frame
    if bad_iface:
        stats.skip("packet refers to an interface the file does not describe", bad_iface)


def _block(btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack("<II", btype, n) + body + struct.pack("<I", n)


def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def write_records(path, recs: Iterable[Record], snaplen: int = 262144, nano: bool = True) -> int:
    """Write records as pcapng (one interface per link type and FCS length); returns the count.

    Timestamps are nanoseconds (microseconds unless ``nano``); if any is before 1970 every interface gets an
    ``if_tsoffset`` of the earliest second, so nothing is clamped or wrapped.
    """
    recs = list(recs)
    first_s = min((r.time_ns // 1_000_000_000 for r in recs), default=0)
    tsoff = min(first_s, 0)
    ifaces: dict[tuple[int, int], int] = {}
    parts = [_block(SHB, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))]
    out = []
    for r in recs:
        key = (r.linktype, r.fcs)
        if key not in ifaces:
            ifaces[key] = len(ifaces)
            opts = _option(OPT_TSRESOL, b"\x09") if nano else b""
            if r.fcs:
                opts += _option(OPT_FCSLEN, bytes([r.fcs]))
            if tsoff:
                opts += _option(OPT_TSOFFSET, struct.pack("<q", tsoff))
            parts.append(_block(IDB, struct.pack("<HHI", r.linktype, 0, snaplen) + opts + b"\0\0\0\0"))
        data = bytes(r.data)[:snaplen]
        ts = r.time_ns - tsoff * 1_000_000_000
        ts = ts if nano else ts // 1000
        parts.append(_block(EPB, struct.pack("<IIIII", ifaces[key], ts >> 32, ts & 0xFFFFFFFF, len(data),
                                             min(max(r.orig_len, len(data)), 0xFFFFFFFF)) + data))
        out.append(1)
    write_output(path, b"".join(parts))
    return len(out)
