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

import numpy as np
from ..packet.jit import njit

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


# -- the numba block walker -------------------------------------------------------------------
W_OK, W_SHORT_HEADER, W_NO_BOM, W_BAD_LEN, W_CUT_BLOCK, W_MISMATCH, W_SHORT_SHB, W_SHORT_IDB, W_BAD_CAP = range(9)


@njit(cache=True)
def _u32(d, o, big):
    if big:
        return (np.int64(d[o]) << 24) | (np.int64(d[o + 1]) << 16) | (np.int64(d[o + 2]) << 8) | np.int64(d[o + 3])
    return (np.int64(d[o + 3]) << 24) | (np.int64(d[o + 2]) << 16) | (np.int64(d[o + 1]) << 8) | np.int64(d[o])


@njit(cache=True)
def walk_blocks(d, st, idb_pos, idb_big, idb_first, p_off, p_cap, p_orig, p_iface, p_ts, p_has_ts, p_frame):
    """Walk a pcapng's blocks: (packets, frames, idbs, malformed, bad_iface, error code, error offset,
    value, value2, big, base, snap0).

    ``st``: the state the walk starts from (a piece of a file continues the walk of the pieces
    before it): [big-endian section, interfaces so far, the section's first interface, its snaplen,
    frames so far]; the returned big, base and snap0 (with idbs and frames) are the state at the
    returned offset. Fills per packet (EPB/PB/SPB on a described interface): data offset, captured
    and original length, global interface number (IDBs counted over all sections), raw timestamp;
    per new interface (indexed from ``st[1]``): its block's offset, byte order, whether it is its
    section's first."""
    size = d.size
    pos = 0
    big = st[0] != 0
    nidb0 = st[1]
    nidb = nidb0
    base = st[2]      # global number of the section's first interface
    snap0 = st[3]     # the section's first interface's snaplen
    n = 0
    frame = st[4]
    malformed = 0
    bad = 0
    err, val, val2 = W_OK, 0, 0
    while pos < size:
        if pos + 12 > size:
            err = W_SHORT_HEADER
            break
        btype = _u32(d, pos, big)
        if btype == SHB:
            b0, b1, b2, b3 = d[pos + 8], d[pos + 9], d[pos + 10], d[pos + 11]
            if b0 == 0x4D and b1 == 0x3C and b2 == 0x2B and b3 == 0x1A:
                big = False
            elif b0 == 0x1A and b1 == 0x2B and b2 == 0x3C and b3 == 0x4D:
                big = True
            else:
                err = W_NO_BOM
                break
            base = nidb
            snap0 = 0
        blen = _u32(d, pos + 4, big)
        if blen < 12 or blen % 4:
            err, val = W_BAD_LEN, blen
            break
        if pos + blen > size:
            err, val = W_CUT_BLOCK, blen
            break
        if _u32(d, pos + blen - 4, big) != blen:
            err, val = W_MISMATCH, blen
            break
        body = pos + 8
        blen_body = blen - 12
        if btype == SHB:
            if blen_body < 16:
                err = W_SHORT_SHB
                break
        elif btype == IDB:
            if blen_body < 8:
                err = W_SHORT_IDB
                break
            if nidb - nidb0 < len(idb_pos):
                idb_pos[nidb - nidb0] = pos
                idb_big[nidb - nidb0] = big
                idb_first[nidb - nidb0] = nidb == base
            if nidb == base:
                snap0 = _u32(d, body + 4, big)
            nidb += 1
        elif btype == EPB or btype == PB or btype == SPB:
            frame += 1
            if btype == SPB:
                if blen_body < 4:
                    malformed += 1
                    pos += blen
                    continue
                iface = 0
                orig = _u32(d, body, big)
                cap = min(orig, blen_body - 4)
                if nidb > base and snap0:
                    cap = min(cap, snap0)
                start, ts, has = body + 4, np.int64(0), False
            else:
                if blen_body < 20:
                    malformed += 1
                    pos += blen
                    continue
                if btype == EPB:
                    iface = _u32(d, body, big)
                else:
                    iface = (_u32(d, body, big) >> 16) if big else (_u32(d, body, big) & 0xFFFF)
                hi, lo = _u32(d, body + 4, big), _u32(d, body + 8, big)
                cap, orig = _u32(d, body + 12, big), _u32(d, body + 16, big)
                if cap > blen_body - 20:
                    frame -= 1
                    err, val, val2 = W_BAD_CAP, cap, blen_body - 20
                    break
                start, ts, has = body + 20, (hi << 32) | lo, True
            if iface >= nidb - base:
                bad += 1
            else:
                if n < len(p_off):
                    p_off[n] = start
                    p_cap[n] = cap
                    p_orig[n] = max(orig, cap)
                    p_iface[n] = base + iface
                    p_ts[n] = ts
                    p_has_ts[n] = has
                    p_frame[n] = frame
                n += 1
        pos += blen
    return n, frame, nidb, malformed, bad, err, pos, val, val2, big, base, snap0


def walk_error_text(code: int, pos: int, value: int, held: int, frame: int) -> str:
    """The sentence :func:`records` gives for a walker error."""
    text = {W_SHORT_HEADER: f"the file ends inside a block header (offset {pos}): the capture is truncated",
            W_NO_BOM: f"section header at offset {pos} has no valid byte-order magic: the file is corrupt from there",
            W_BAD_LEN: f"block at offset {pos} has an invalid length {value}: the file is corrupt from there",
            W_CUT_BLOCK: f"the file ends inside a {value}-byte block at offset {pos}: the capture is truncated",
            W_MISMATCH: f"block at offset {pos} has mismatched length fields: the file is corrupt from there",
            W_SHORT_SHB: f"section header at offset {pos} is too short: the file is corrupt from there",
            W_SHORT_IDB: f"interface description at offset {pos} is too short: the file is corrupt from there",
            W_BAD_CAP: f"packet block at offset {pos} claims {value} captured bytes but holds "
                       f"{held}: the file is corrupt from there"}[code]
    return f"{text}; {frame} packets were read before it."


class BlockWalk:
    """A pcapng walked piece by piece (or whole, as one final piece): the walker's state between
    pieces (section byte order, interfaces, frames) and ``res`` filled as :func:`records` fills it."""

    def __init__(self, res: CaptureResult, stats: Stats):
        self.res, self.stats = res, stats
        self.st = np.zeros(5, np.int64)   # big-endian, interfaces, section's first interface, its snaplen, frames
        self.ifaces: list[list[int]] = []
        self.malformed = self.bad = 0
        self.error: str | None = None
        res.format = "pcapng"

    @property
    def frames(self) -> int:
        return int(self.st[4])

    def walk(self, data: bytes, base: int, final: bool):
        """The packets of ``data``'s complete blocks (``data`` starts at file offset ``base`` with a
        block): ((uint8 data, offset, captured, original, time_ns, linktype, fcs, frame), end). ``end``:
        the offset in ``data`` of the first block not walked, a block cut by the piece's end when
        ``final`` is False; else the damage, whose sentence is then in ``error``."""
        d = np.frombuffer(data, np.uint8)
        e64, eb = np.empty(0, np.int64), np.empty(0, np.bool_)
        st = self.st
        n, _, nidb, *_ = walk_blocks(d, st, e64, eb, eb, e64, e64, e64, e64, e64, eb, e64)
        new = nidb - int(st[1])
        idb_pos, idb_big, idb_first = np.empty(new, np.int64), np.empty(new, np.bool_), np.empty(new, np.bool_)
        off, cap, orig, iface, ts, frames = (np.empty(n, np.int64) for _ in range(6))
        has = np.empty(n, np.bool_)
        n, frame, nidb, malformed, bad, err, pos, val, held, big, sbase, snap0 = walk_blocks(
            d, st, idb_pos, idb_big, idb_first, off, cap, orig, iface, ts, has, frames)
        self.st = np.array([big, nidb, sbase, snap0, frame], np.int64)
        self.malformed += malformed
        self.bad += bad
        res = self.res
        for p, be, first in zip(idb_pos.tolist(), idb_big.tolist(), idb_first.tolist()):
            endian = ">" if be else "<"
            blen = struct.unpack(endian + "I", data[p + 4:p + 8])[0]
            f = _interface(data[p + 8:p + blen - 4], endian)
            self.ifaces.append(f)
            res.linktypes.append(f[0])
            res.fcs.append(f[4])
            if first and f[1]:
                res.snaplen = f[1]
            res.fine_times |= tsresol_ns(1_000_000, f[2], 0) < 1_000_000_000
        if err != W_OK and (final or err not in (W_SHORT_HEADER, W_CUT_BLOCK)):
            self.error = walk_error_text(err, base + pos, val, held, frame)
        ifaces = self.ifaces
        lt = np.array([f[0] for f in ifaces] or [0], np.int32)[iface]
        fcs = np.array([f[4] for f in ifaces] or [0], np.int32)[iface]
        return (d, off, cap, orig, _times(ts, has, iface, ifaces), lt, fcs, frames), pos

    def finish(self) -> None:
        """Fill ``res.error``, ``res.records`` and the notes once the last piece is walked."""
        if self.error is not None:
            self.res.error = self.error
        self.res.records = self.frames
        if self.malformed:
            self.stats.skip("malformed packet block", self.malformed)
        if self.bad:
            self.stats.skip("packet refers to an interface the file does not describe", self.bad)


def packet_arrays(data: bytes, res: CaptureResult, stats: Stats):
    """The packets of a pcapng's bytes as arrays (numba block walk): (uint8 data, offset, captured,
    original, time_ns, linktype, fcs, frame) with ``res`` filled as :func:`records` fills it."""
    w = BlockWalk(res, stats)
    arrays, _ = w.walk(data, 0, True)
    w.finish()
    return arrays


def _times(ts, has, iface, ifaces):
    """Nanosecond times of raw timestamps (vectorised for the usual µs/ns interfaces)."""
    out = np.zeros(len(ts), np.int64)
    for k, f in enumerate(ifaces):
        sel = np.nonzero((iface == k) & has)[0]
        if not len(sel):
            continue
        resol, tsoff = f[2], f[3]
        raw = ts[sel]
        if resol in (6, 9) and tsoff == 0 and (raw >= 0).all() and raw.max() < (1 << 62) // 1000:
            out[sel] = raw * (1000 if resol == 6 else 1)
        else:
            out[sel] = [clamp_time(tsresol_ns(int(t) & 0xFFFFFFFFFFFFFFFF, resol, tsoff)) for t in raw.tolist()]
    return out
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
