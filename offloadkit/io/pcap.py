"""Classic pcap files: the header, the record walkers (Python and numba) and the writers.

Reading: micro- and nanosecond files, both byte orders, the "modified"
(Kuznetsov) variant; the link-type word's FCS flag is split off by
``packet.link``. Writing: :func:`write_records` writes raw records
(little-endian, the resolution asked for) and refuses a timestamp that a pcap
cannot hold (seconds outside 0..2^32-1) in one sentence;
:func:`offloadkit.io.capture.write_capture` picks pcapng for those instead.
:func:`write_pcap` exports a Trace (frames built by ``packet.build``).
"""
from __future__ import annotations

import struct
from typing import Iterator

import numpy as np
from ..packet.jit import njit

from ..packet.build import PAYLOAD_SOURCE, SNAPLEN, frames
from ..packet.link import LINKTYPE_ETHERNET, linktype_field, split_linktype_field
from ..trace import Trace
from .records import (
    ERR_BAD_CAPLEN,
    ERR_SHORT_DATA,
    ERR_SHORT_HEADER,
    MAX_CAPLEN,
    CaptureResult,
    Record,
    walk_error,
    write_output,
)

# magic (as read little-endian) -> (ns per timestamp fraction unit, record header bytes)
PCAP_MAGICS = {0xA1B2C3D4: (1000, 16), 0xA1B23C4D: (1, 16), 0xA1B2CD34: (1000, 24)}
MAX_PCAP_SECONDS = (1 << 32) - 1


def is_pcap(head: bytes) -> bool:
    if len(head) < 4:
        return False
    return struct.unpack("<I", head[:4])[0] in PCAP_MAGICS or struct.unpack(">I", head[:4])[0] in PCAP_MAGICS


class Header:
    """A pcap file header: byte order, resolution, record header size, snaplen, link type, FCS bytes."""

    def __init__(self, data: bytes):
        le = struct.unpack("<I", data[:4])[0]
        self.swapped = le not in PCAP_MAGICS
        magic = struct.unpack(">I", data[:4])[0] if self.swapped else le
        self.mult, self.rec_hdr = PCAP_MAGICS[magic]
        self.endian = ">" if self.swapped else "<"
        self.format = "pcap" if self.mult == 1000 else "pcap-ns"
        self.complete = len(data) >= 24
        self.snaplen, field = struct.unpack(self.endian + "II", data[16:24]) if self.complete else (0, 1)
        self.linktype, self.fcs = split_linktype_field(field)
        self.maxcap = max(MAX_CAPLEN, min(self.snaplen, 1 << 24))

    def fill(self, res: CaptureResult) -> None:
        res.format = self.format
        if not self.complete:
            res.error = "the file ends inside its 24-byte pcap header: no packets."
            return
        res.linktypes, res.fcs, res.snaplen = [self.linktype], [self.fcs], self.snaplen


def records(data: bytes, res: CaptureResult) -> Iterator[Record]:
    """The packet records of a pcap file's bytes, in file order (fills ``res``)."""
    h = Header(data)
    h.fill(res)
    if not h.complete:
        return
    rec = struct.Struct(h.endian + "IIII")
    pos, n, size = 24, 0, len(data)
    while pos < size:
        if pos + h.rec_hdr > size:
            res.error = walk_error(ERR_SHORT_HEADER, n, pos)
            break
        sec, frac, cap, orig = rec.unpack_from(data, pos)
        if cap > h.maxcap:
            res.error = walk_error(ERR_BAD_CAPLEN, n, pos, cap)
            break
        if pos + h.rec_hdr + cap > size:
            res.error = walk_error(ERR_SHORT_DATA, n, pos)
            break
        n += 1
        yield Record(n, sec * 1_000_000_000 + frac * h.mult, h.linktype,
                     data[pos + h.rec_hdr:pos + h.rec_hdr + cap], max(orig, cap), h.fcs)
        pos += h.rec_hdr + cap
    res.records = n


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


def fits(time_ns: int) -> bool:
    """True if a classic pcap can hold this timestamp (unsigned 32-bit seconds)."""
    return 0 <= time_ns // 1_000_000_000 <= MAX_PCAP_SECONDS


def header_bytes(linktype: int, snaplen: int, nano: bool, fcs: int = 0) -> bytes:
    """The 24-byte little-endian file header :func:`write_records` writes."""
    return struct.pack("<IHHiIII", 0xA1B23C4D if nano else 0xA1B2C3D4, 2, 4, 0, 0, snaplen, linktype_field(linktype, fcs))


def write_records(path, records, linktype: int = LINKTYPE_ETHERNET, snaplen: int = SNAPLEN,
                  nano: bool = False, fcs: int = 0) -> int:
    """Write raw records ``(time_ns, captured bytes, original length)`` (or :class:`Record`)
    as a little-endian pcap; returns the count.

    A timestamp before 1970 or after 2106 raises ValueError naming it (write pcapng instead)."""
    if not 0 < snaplen <= SNAPLEN:
        raise ValueError(f"snaplen {snaplen} is out of range: use 1..{SNAPLEN}")
    parts = [header_bytes(linktype, snaplen, nano, fcs)]
    rec = struct.Struct("<IIII")
    for r in records:
        t, data, orig = (r.time_ns, r.data, r.orig_len) if hasattr(r, "data") else r
        if not fits(int(t)):
            raise ValueError(f"timestamp {int(t)} ns is outside what a pcap file holds (1970..2106); "
                             f"write pcapng instead")
        sec, frac = divmod(int(t), 1_000_000_000)
        data = bytes(data)[:snaplen]
        parts.append(rec.pack(sec, frac if nano else frac // 1000, len(data),
                              min(max(int(orig), len(data)), 0xFFFFFFFF)))
        parts.append(data)
    write_output(path, b"".join(parts))
    return (len(parts) - 1) // 2


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
