"""Packet records as arrays: one byte buffer plus per-record offset, lengths, time, link type, FCS.

A :class:`Batch` is what the rewriters (``gro``, ``segment``) work on: numba
kernels walk its arrays, Python touches it only for records the fast paths
leave over (:meth:`Batch.record` gives one as a :class:`Record`). ``read_batch``
fills it from a pcap (the numba record walker, no copy of the bytes) or a pcapng
(the block walker); ``write_batch`` writes one back as ``io.capture.write_capture``
would write its records (a pcap written by a numba kernel when it can hold them,
else pcapng).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import njit

from ..packet.fast import FAST_COLUMNS, decode_eth_ipv4_tcp
from ..packet.link import LINKTYPE_ETHERNET
from ..trace import ColumnBuffer, Trace
from . import pcap, pcapng
from .records import ERR_BAD_CAPLEN, STDIO, CaptureResult, Record, Stats, read_input, walk_error

WRITE_CHUNK = 1 << 16      # records per write


@dataclass
class Batch:
    """Records as arrays: ``data[off[i]:off[i] + cap[i]]`` is record i's captured bytes."""

    data: np.ndarray        # uint8
    off: np.ndarray         # int64
    cap: np.ndarray         # int64
    orig: np.ndarray        # int64, >= cap
    time_ns: np.ndarray     # int64
    linktype: np.ndarray    # int32
    fcs: np.ndarray         # int32: FCS bytes at the end of each frame
    frame: np.ndarray       # int64: 1-based record number in the input

    def __len__(self) -> int:
        return len(self.off)

    def record(self, i: int) -> Record:
        o, c = int(self.off[i]), int(self.cap[i])
        return Record(int(self.frame[i]), int(self.time_ns[i]), int(self.linktype[i]),
                      self.data[o:o + c].tobytes(), int(self.orig[i]), int(self.fcs[i]))

    def decode_plain(self, fast_path: bool = True, buf: ColumnBuffer | None = None) -> tuple[Trace, np.ndarray]:
        """(Trace of every record, mask of the plain ones): records of Ethernet without FCS whose
        IPv4/TCP headers ``packet.fast`` decoded (no VLAN tag, no tunnel). The other rows are
        left at their defaults, for ``packet.decode`` (all of them when ``fast_path`` is False).
        ``buf``: the Trace's columns are made in it (valid until its next use)."""
        n = len(self)
        trace = buf.trace(n) if buf is not None else Trace.empty(n)
        c = trace.columns
        status = np.full(n, 2, np.uint8)
        if n:
            decode_eth_ipv4_tcp(self.data, self.off, self.cap, self.orig, status, *[c[k] for k in FAST_COLUMNS])
        plain = (status == 0) & (self.linktype == LINKTYPE_ETHERNET) & (self.fcs == 0) & (c["encap"] == 0)
        return trace, plain & fast_path

    def slice(self, a: int, b: int) -> "Batch":
        """Records a..b-1 (views: the bytes are not copied)."""
        return Batch(self.data, self.off[a:b], self.cap[a:b], self.orig[a:b], self.time_ns[a:b], self.linktype[a:b],
                     self.fcs[a:b], self.frame[a:b])

    def records(self) -> list[Record]:
        return [self.record(i) for i in range(len(self))]

    def take(self, idx) -> "Batch":
        """Records ``idx``, their bytes copied into a (read-only) buffer of their own."""
        idx = np.asarray(idx, np.int64)
        cap = self.cap[idx]
        off = np.zeros(len(idx), np.int64)
        np.cumsum(cap[:-1], out=off[1:])
        src = np.repeat(self.off[idx] - off, cap) + np.arange(int(cap.sum()), dtype=np.int64)
        return Batch(_read_only(self.data[src]), off, cap, self.orig[idx], self.time_ns[idx], self.linktype[idx], self.fcs[idx],
                     self.frame[idx])

    @classmethod
    def concat(cls, parts: list["Batch"]) -> "Batch":
        """The records of ``parts`` in order, in one new read-only buffer (each part's span copied once)."""
        datas, offs, pos = [], [], 0
        for b in parts:
            lo = int(b.off.min()) if len(b) else 0
            hi = int((b.off + b.cap).max()) if len(b) else 0
            datas.append(b.data[lo:hi])
            offs.append(b.off - lo + pos)
            pos += hi - lo
        data = np.concatenate(datas) if datas else np.zeros(0, np.uint8)
        return cls(_read_only(data), *(np.concatenate(a) if a else np.zeros(0, dt) for a, dt in (
            (offs, np.int64), ([b.cap for b in parts], np.int64), ([b.orig for b in parts], np.int64),
            ([b.time_ns for b in parts], np.int64), ([b.linktype for b in parts], np.int32),
            ([b.fcs for b in parts], np.int32), ([b.frame for b in parts], np.int64))))

    @classmethod
    def of_records(cls, recs: list[Record]) -> "Batch":
        """A batch holding copies of ``recs``' bytes."""
        n = len(recs)
        cap = np.fromiter((len(r.data) for r in recs), np.int64, n)
        off = np.zeros(n, np.int64)
        if n:
            off[1:] = np.cumsum(cap)[:-1]
        data = np.frombuffer(b"".join(bytes(r.data) for r in recs), np.uint8) if n else np.zeros(0, np.uint8)
        return cls(data, off, cap, np.fromiter((r.orig_len for r in recs), np.int64, n),
                   np.fromiter((r.time_ns for r in recs), np.int64, n),
                   np.fromiter((r.linktype for r in recs), np.int32, n),
                   np.fromiter((r.fcs for r in recs), np.int32, n),
                   np.fromiter((r.frame for r in recs), np.int64, n))


def _read_only(data: np.ndarray) -> np.ndarray:
    """Record bytes as the readers give them (read-only: the kernels are compiled for that type only)."""
    data.flags.writeable = False
    return data


def _pcap_batch(raw: bytes, res: CaptureResult) -> Batch:
    data = np.frombuffer(raw, np.uint8)
    h = pcap.Header(raw)
    h.fill(res)
    if not h.complete:
        return Batch.of_records([])
    empty = np.empty(0, np.int64)
    n, end, err = pcap.walk_pcap(data, 24, h.swapped, h.rec_hdr, h.maxcap, False, empty, empty, empty, empty, empty)
    off, cap, orig, sec, frac = (np.empty(n, np.int64) for _ in range(5))
    pcap.walk_pcap(data, 24, h.swapped, h.rec_hdr, h.maxcap, True, off, cap, orig, sec, frac)
    if err:
        bad = None
        if err == ERR_BAD_CAPLEN:
            bad = int.from_bytes(raw[end + 8:end + 12], "big" if h.swapped else "little")
        res.error = walk_error(err, n, end, bad)
    res.records = n
    return Batch(data, off, cap, np.maximum(orig, cap), sec * 1_000_000_000 + frac * h.mult,
                 np.full(n, h.linktype, np.int32), np.full(n, h.fcs, np.int32), np.arange(1, n + 1, dtype=np.int64))


def read_batch(path) -> tuple[Batch, CaptureResult]:
    """:func:`io.capture.read_records` as a :class:`Batch` (same records, same result fields)."""
    raw, name = read_input(path)
    res = CaptureResult(None)
    stats = Stats()
    if len(raw) >= 4 and raw[:4] == pcapng.MAGIC:
        batch = Batch(*pcapng.packet_arrays(raw, res, stats))
    elif pcap.is_pcap(raw):
        batch = _pcap_batch(raw, res)
    else:
        batch = Batch.of_records([])
        res.error = f"{name} is not a pcap or pcapng file"
    res.records = res.records if res.format == "pcapng" else len(batch)
    res.messages = stats.notes()
    if res.error:
        res.messages.append(res.error)
    return batch, res


@njit(cache=True)
def pcap_body(data, off, cap, orig, time_ns, snaplen, nano, out):
    """Write the pcap records (little-endian 16-byte headers + bytes) into ``out``; returns bytes written."""
    p = 0
    for i in range(len(off)):
        c = min(cap[i], snaplen)
        o = max(orig[i], c)
        if o > 0xFFFFFFFF:
            o = 0xFFFFFFFF
        sec = time_ns[i] // 1_000_000_000
        frac = time_ns[i] - sec * 1_000_000_000
        if not nano:
            frac //= 1000
        for k, v in enumerate((sec, frac, c, o)):
            for j in range(4):
                out[p + 4 * k + j] = (v >> (8 * j)) & 0xFF
        p += 16
        out[p:p + c] = data[off[i]:off[i] + c]
        p += c
    return p


def pcap_kind(b: Batch, like: CaptureResult) -> tuple[int, int] | None:
    """(link type, FCS bytes) of the classic pcap that holds ``b``, or None when it takes pcapng
    (several link types or FCS lengths, or a time outside 1970..2106)."""
    kinds = {(k >> 8, k & 0xFF) for k in np.unique((b.linktype.astype(np.int64) << 8) | b.fcs).tolist()}
    if not kinds:
        kinds = {(like.linktype, like.fcs[0] if like.fcs else 0)}
    fits = not len(b) or (0 <= int(b.time_ns.min()) // 1_000_000_000
                          and int(b.time_ns.max()) // 1_000_000_000 <= pcap.MAX_PCAP_SECONDS)
    return next(iter(kinds)) if len(kinds) == 1 and fits else None


def pcap_writer(path, kind: tuple[int, int], like: CaptureResult) -> "PcapWriter":
    """The :class:`PcapWriter` :func:`write_batch` uses for ``like``'s records of ``kind``."""
    return PcapWriter(path, kind[0], min(max(like.snaplen, 1), pcap.SNAPLEN), bool(like.nano), kind[1])


def write_batch(path, b: Batch, like: CaptureResult) -> str:
    """Write ``b`` as :func:`io.capture.write_capture` writes records; returns the format written."""
    snaplen = min(max(like.snaplen, 1), pcap.SNAPLEN)
    kind = pcap_kind(b, like)
    if kind is not None:
        w = pcap_writer(path, kind, like)
        try:
            for a in range(0, len(b), WRITE_CHUNK):
                w.write(b.slice(a, a + WRITE_CHUNK))
        finally:
            w.close()
        return "pcap-ns" if like.nano else "pcap"
    pcapng.write_records(path, b.records(), snaplen, like.nano)
    return "pcapng"


class PcapWriter:
    """Writes chunks to a little-endian pcap (a path or ``-``) as they come."""

    def __init__(self, path, linktype: int, snaplen: int, nano: bool, fcs: int = 0):
        self.stdout = str(path) == STDIO
        self.f = sys.stdout.buffer if self.stdout else open(Path(path), "wb")
        self.snaplen, self.nano = snaplen, nano
        self.out = np.empty(0, np.uint8)         # the records' bytes, reused from write to write
        self.f.write(pcap.header_bytes(linktype, snaplen, nano, fcs))

    def write(self, b: Batch) -> None:
        if not len(b):
            return
        if int(b.time_ns.min()) < 0 or int(b.time_ns.max()) // 1_000_000_000 > pcap.MAX_PCAP_SECONDS:
            raise ValueError("a timestamp is outside what a pcap file holds (1970..2106)")
        size = 16 * len(b) + int(np.minimum(b.cap, self.snaplen).sum())
        if len(self.out) < size:
            self.out = np.empty(max(size, 2 * len(self.out)), np.uint8)
        pcap_body(b.data, b.off, b.cap, b.orig, b.time_ns, self.snaplen, self.nano, self.out)
        self.f.write(memoryview(self.out)[:size])

    def close(self) -> None:
        self.f.flush()
        if not self.stdout:
            self.f.close()
