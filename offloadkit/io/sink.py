"""A rewriting verb's input and output (``gro``, ``segment``): IN read chunk by chunk
(:func:`open_input`), OUT a pcap written chunk by chunk as it comes when one holds the
records, else a pcapng written at the end (:class:`OutputSink`, :func:`run_into`)."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from typing import Iterator

from ..errors import UsageError
from .batch import Batch, pcap_kind, pcap_writer, read_batch, write_batch
from .capture import check_loaded, check_path
from .records import STDIO, CaptureResult
from .stream import CHUNK, PcapStream, open_pcap_stream


@dataclass
class VerbInput:
    """IN as chunks: ``kind`` is what :class:`OutputSink` takes; ``total`` the records when known
    (input read whole), ``first`` the first chunk (None: no records)."""

    chunks: Iterator[Batch]
    info: CaptureResult
    kind: object
    total: int | None
    first: Batch | None


def open_input(path) -> VerbInput:
    """A classic pcap or a pcapng (plain or gzip, ``-`` for stdin) streamed chunk by chunk; other
    input read whole and cut in chunks. What cannot be read is one UsageError line naming ``path``."""
    check_path(path)
    stream, source = open_pcap_stream(path, pcapng=True)
    if stream is None:
        batch, info = read_batch(source)
        check_loaded(path, info, len(batch))
        chunks = (batch.slice(a, a + CHUNK) for a in range(0, len(batch), CHUNK))
        return VerbInput(chunks, info, pcap_kind(batch, info), len(batch), batch.slice(0, CHUNK) if len(batch) else None)
    info = stream.result
    check_loaded(path, info, 1)
    chunks = iter(stream)
    first = next(chunks, None)
    check_loaded(path, info, int(first is not None))
    kind = (info.linktype, info.fcs[0] if info.fcs else 0) if isinstance(stream, PcapStream) else "check"
    return VerbInput(chain([first], chunks) if first is not None else iter(()), info, kind, None, first)


def run_into(path, inp: VerbInput, run):
    """(``run(chunks, write)``'s result, the format written to ``path``): ``run`` reads ``inp``'s
    chunks and passes its output chunks to ``write``; an :class:`OutputSink` writes them."""
    sink = OutputSink(path, inp.info, inp.kind)
    try:
        result = run(sink.inputs(inp.chunks), sink.write)
    except BaseException:
        sink.abort()
        raise
    return result, sink.close()


class OutputSink:
    """Where a verb's output goes: a pcap of ``kind`` (link type, FCS) written as it comes; pcapng,
    written at the end, when ``kind`` is None (the input mixes link types or has times a pcap
    cannot hold). ``kind`` "check" (a streamed pcapng): the kind of the input's chunks, checked
    as they are read; the output is held (up to HOLD bytes) until the input ends or it is
    committed to a pcap, read back and held if a later chunk does not fit it (a later interface
    of another link type or a finer time resolution; refused in one line when OUT is stdout)."""

    HOLD = 1 << 23

    def __init__(self, path, info, kind):
        self.path, self.info, self.kind = path, info, kind
        self.held, self.held_bytes, self.writer, self.like = [], 0, None, None
        self.check = kind == "check"
        if not self.check and kind is not None:
            self._commit()

    def _commit(self):
        self.writer = pcap_writer(self.path, self.kind, self.info)
        self.like = (self.info.snaplen, self.info.nano)
        for b in self.held:
            self.writer.write(b)
        self.held, self.held_bytes = [], 0

    def inputs(self, chunks):
        first = True
        for c in chunks:
            if self.check:
                k = pcap_kind(c, self.info)
                if first:
                    self.kind, first = k, False
                if k != self.kind or k is None or (self.writer is not None and self._moved()):
                    self._give_up()
            yield c

    def _moved(self) -> bool:
        return self.like != (self.info.snaplen, self.info.nano)

    def _give_up(self):
        """Stop writing a pcap: what was written is read back and held with what follows."""
        self.check, self.kind = False, None
        if self.writer is not None:
            self.writer.close()
            self.writer = None
            if str(self.path) == STDIO:
                raise UsageError("the input's link types or time resolution change after the first "
                                 f"{self.HOLD >> 20} MB of output already written to stdout as a pcap; "
                                 "give OUT a file name")
            self.held = [read_batch(self.path)[0], *self.held]

    def write(self, b):
        if self.writer is not None:
            self.writer.write(b)
            return
        self.held.append(b)
        self.held_bytes += int(b.cap.sum()) + 16 * len(b)
        if self.check and self.held_bytes > self.HOLD:
            self._commit()

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.close()

    def close(self) -> str:
        if self.kind == "check":                     # no packets: the kind the file describes
            self.kind = (self.info.linktype, self.info.fcs[0] if self.info.fcs else 0)
        if self.writer is not None and self.check and self._moved():
            self._give_up()
        if self.writer is None and self.kind is not None:
            self._commit()
        if self.writer is not None:
            self.writer.close()
            return "pcap-ns" if self.info.nano else "pcap"
        return write_batch(self.path, Batch.concat(self.held), self.info)
