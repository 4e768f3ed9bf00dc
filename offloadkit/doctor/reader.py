"""The doctor's capture reader: records decoded chunk by chunk as they are read.

A classic pcap (plain, gzip or stdin) is read block by block (``io.stream``), a
pcapng walked in one pass and decoded in chunks; each chunk is decoded by
``io.capture.decode_arrays`` (the numba decoder, ``packet.decode`` for the rest)
and numbered into flows (``io.flows.FlowNumbering``). Of each chunk only the
columns the checks read are kept (``columns``), so neither the file's bytes nor
a whole-capture Trace of every column is ever held. The result is what
``io.capture.read_capture`` gives for the same file: the same packets, flows,
directions, notes and error.
"""
from __future__ import annotations

import numpy as np

from ..io import pcapng
from ..io.batch import Batch
from ..io.capture import decode_arrays, read_capture
from ..io.flows import FlowNumbering
from ..io.records import CaptureResult, Stats, read_input
from ..io.stream import CHUNK, open_pcap_stream
from ..trace import Trace


def _pcapng_chunks(raw: bytes, res: CaptureResult, stats: Stats):
    b = Batch(*pcapng.packet_arrays(raw, res, stats))
    for a in range(0, len(b), CHUNK):
        yield b.slice(a, a + CHUNK)


def read_columns(path, columns: tuple[str, ...] | None = None, progress=None) -> tuple[Trace, CaptureResult]:
    """The TCP packets of a capture with ``flow`` and ``direction`` set, and the reading result.

    columns: the columns to keep (``flow`` and ``direction`` always); the Trace is then sorted
    by (flow, direction, capture order), as ``doctor.context.build`` sorts it. None keeps every
    column, in capture order. progress: told the packets of each chunk (``update(n)``).
    Raises ValueError only when the file cannot be opened."""
    stream, other = open_pcap_stream(path)
    stats = Stats()
    if stream is not None:
        res, chunks = stream.result, stream
    else:
        raw, _ = read_input(other)
        if raw[:4] != pcapng.MAGIC:
            res = read_capture(other)          # not a capture: its messages as read_capture words them
            return _kept(res.trace, columns), res
        res = CaptureResult(None)
        chunks = _pcapng_chunks(raw, res, stats)
    numbering = FlowNumbering()
    parts: list[dict] = []
    flows, sides = [], []
    for b in chunks:
        t, _ = decode_arrays(b.data, b.off, b.cap, b.orig, b.time_ns, b.linktype, b.fcs, b.frame, res, stats)
        if not len(t):
            continue
        stats.truncated += int(t.truncated.sum())
        f, s = numbering.add(t)
        flows.append(f)
        sides.append(s)
        parts.append(t.columns if columns is None else {k: t.columns[k] for k in columns})
        if progress is not None:
            progress.update(len(t))
    if stream is None and res.error:
        res.messages.append(res.error)
    res.messages = stats.notes() + res.messages
    flow = np.concatenate(flows) if flows else np.zeros(0, np.int32)
    direction = numbering.directions(flow, np.concatenate(sides)) if flows else np.zeros(0, np.uint8)
    del flows, sides
    names = list(parts[0]) if parts else []
    order = None if columns is None else np.lexsort((direction, flow))
    cols = {}
    for k in names:
        col = np.concatenate([p.pop(k) for p in parts])
        cols[k] = col if order is None else col[order]
    if not parts:
        cols = Trace.empty().columns
    cols["flow"] = flow if order is None else flow[order]
    cols["direction"] = direction if order is None else direction[order]
    trace = Trace(cols)
    trace.meta.update(format=res.format, linktypes=list(res.linktypes))
    return trace, res


def _kept(trace: Trace, columns) -> Trace:
    if columns is None or not len(trace):
        return trace
    order = np.lexsort((trace.direction, trace.flow))
    keep = {k: trace.columns[k][order] for k in (*columns, "flow", "direction")}
    return Trace(keep)
