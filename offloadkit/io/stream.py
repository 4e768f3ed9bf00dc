"""A classic pcap read and written in chunks: memory independent of the capture's size.

:func:`open_pcap_stream` reads the file (a path, ``-`` for stdin, gzip undone)
block by block and yields :class:`io.batch.Batch` chunks of at most ``chunk``
records, walked by the numba record walker; a damaged file yields the records
before the damage and leaves the sentence in ``CaptureResult.error``, as
``read_batch`` does. ``io.batch.PcapWriter`` writes chunks to a pcap as they come.
A pcapng (``open_pcap_stream(path, chunk, pcapng=True)``) is read the same way: the
block walker of ``io.pcapng`` walks the complete blocks of each block read, its
state (byte order, interfaces) carried to the next, the cut block's bytes too.
Other inputs are not streamed (``open_pcap_stream`` returns None).
"""
from __future__ import annotations

import gzip
import io
import sys
import zlib
from typing import Iterator

import numpy as np

from . import pcap, pcapng
from .batch import Batch
from .records import ERR_BAD_CAPLEN, ERR_NONE, GZIP_MAGIC, STDIO, CaptureResult, Stats, walk_error

BLOCK = 1 << 23          # bytes read at a time
CHUNK = 1 << 16          # records per chunk
_PCAPNG_MAGIC = pcapng.MAGIC


def _open(path):
    if isinstance(path, (bytes, bytearray, memoryview)):     # an upload: the capture's bytes
        f = io.BytesIO(bytes(path))
    elif str(path) == STDIO:
        f = sys.stdin.buffer
    else:
        try:
            f = open(path, "rb")
        except OSError as e:
            raise ValueError(f"cannot read capture {path}: {e.strerror or e}") from None
    if not hasattr(f, "peek"):
        f = io.BufferedReader(f)
    head = f.peek(2)[:2]
    return gzip.GzipFile(fileobj=f) if head == GZIP_MAGIC else f


class PcapStream:
    """The chunks of one pcap file (iterate once); ``result`` is complete when the iteration ends."""

    def __init__(self, f, head: bytes, chunk: int):
        self.f, self.chunk = f, chunk
        self.h = pcap.Header(head)
        self.result = CaptureResult(None)
        self.h.fill(self.result)

    def __iter__(self) -> Iterator[Batch]:
        h, res = self.h, self.result
        buf = b""
        base = 24                 # file offset of buf[0]
        n = 0
        eof = False
        empty = np.empty(0, np.int64)
        while not eof:
            try:
                more = self.f.read(BLOCK)
            except (OSError, EOFError, zlib.error):
                more = b""
                res.error = "the gzip stream is damaged or cut"
            eof = not more
            buf += more
            data = np.frombuffer(buf, np.uint8)
            k, end, err = pcap.walk_pcap(data, 0, h.swapped, h.rec_hdr, h.maxcap, False, empty, empty, empty, empty,
                                         empty)
            if err != ERR_NONE and not eof and err != ERR_BAD_CAPLEN:
                err = ERR_NONE                       # a record continues in the next block
            off, cap, orig, sec, frac = (np.empty(k, np.int64) for _ in range(5))
            pcap.walk_pcap(data, 0, h.swapped, h.rec_hdr, h.maxcap, True, off, cap, orig, sec, frac)
            times = sec * 1_000_000_000 + frac * h.mult
            orig = np.maximum(orig, cap)
            for a in range(0, k, self.chunk):
                b = min(a + self.chunk, k)
                yield Batch(data, off[a:b], cap[a:b], orig[a:b], times[a:b], np.full(b - a, h.linktype, np.int32),
                            np.full(b - a, h.fcs, np.int32), np.arange(n + a + 1, n + b + 1, dtype=np.int64))
            n += k
            if err != ERR_NONE:
                bad = int.from_bytes(buf[end + 8:end + 12], "big" if h.swapped else "little") \
                    if err == ERR_BAD_CAPLEN else None
                res.error = walk_error(err, n, base + end, bad)
                break
            buf = buf[end:]
            base += end
        if res.error and not res.error.endswith("."):
            res.error = f"{res.error}: the capture ends there; {n} packet records were read before it."
        res.records = n
        if res.error:
            res.messages.append(res.error)


class PcapngStream:
    """The chunks of one pcapng file (iterate once), as :class:`PcapStream` gives a pcap's: the
    records, ``result`` and damage sentence of ``read_batch``. ``stats``: the walker's notes
    (malformed blocks, unknown interfaces), complete when the iteration ends."""

    def __init__(self, f, head: bytes, chunk: int):
        self.f, self.head, self.chunk = f, head, chunk
        self.result = CaptureResult(None)
        self.stats = Stats()
        self.walk = pcapng.BlockWalk(self.result, self.stats)

    def __iter__(self) -> Iterator[Batch]:
        res, w = self.result, self.walk
        buf = self.head
        base = 0                  # file offset of buf[0]
        eof = gzip_cut = False
        while not eof:
            try:
                more = self.f.read(BLOCK)
            except (OSError, EOFError, zlib.error):
                more, gzip_cut = b"", True
            eof = not more
            buf += more
            arrays, end = w.walk(buf, base, eof)
            data, *cols = arrays
            for a in range(0, len(cols[0]), self.chunk):
                yield Batch(data, *(c[a:a + self.chunk] for c in cols))
            if w.error is not None:
                break
            buf = buf[end:]
            base += end
        w.finish()
        if res.error is None and gzip_cut:
            res.error = f"the gzip stream is damaged or cut: the capture ends there; {w.frames} packet " \
                        f"records were read before it."
        res.messages = self.stats.notes() + ([res.error] if res.error else [])


def open_pcap_stream(path, chunk: int = CHUNK, pcapng: bool = False):
    """(a :class:`PcapStream`, None) for a classic pcap (plain or gzip, ``-`` for stdin, or its
    bytes), with ``pcapng`` (a :class:`PcapngStream`, None) for a pcapng too; else (None, what
    ``read_batch`` reads: the path, or the bytes stdin gave).

    Raises ValueError naming the file when it cannot be opened."""
    f = _open(path)
    head = f.read(24)
    if pcap.is_pcap(head) and len(head) == 24:
        return PcapStream(f, head, chunk), None
    if pcapng and head[:4] == _PCAPNG_MAGIC:
        return PcapngStream(f, head, chunk), None
    if str(path) == STDIO:
        return None, head + f.read()
    f.close()
    return None, path
