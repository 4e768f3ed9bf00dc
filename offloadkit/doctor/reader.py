"""The doctor's capture reader: records decoded chunk by chunk as they are read.

A classic pcap or a pcapng (plain, gzip or stdin) is read block by block
(``io.stream``) and decoded in chunks; each chunk is decoded by
``io.capture.decode_arrays`` (the numba decoder, ``packet.decode`` for the rest)
and numbered into flows (``io.flows.FlowNumbering``). :func:`tally_capture` hands
each chunk to the doctor's :class:`~.accumulate.Accumulator` and keeps nothing of
it; :func:`read_columns` keeps the columns asked for, as one Trace. Both see what
``io.capture.read_capture`` gives for the same file: the same packets, flows,
directions, notes and error.
"""
from __future__ import annotations

import numpy as np

from ..io.capture import decode_arrays, read_capture
from ..io.flows import FlowNumbering
from ..io.records import CaptureResult, Stats
from ..io.stream import CHUNK, open_pcap_stream
from ..trace import Trace

FLOW_COLUMNS = ("flow", "direction")   # set from the whole capture, not per chunk


def chunks(path, progress=None, chunk: int = CHUNK):
    """(the TCP packets of each chunk as a Trace in capture order, ..., the reading result when
    done): a generator whose ``StopIteration`` value is the CaptureResult. Raises ValueError only
    when the file cannot be opened."""
    stream, other = open_pcap_stream(path, chunk, pcapng=True)
    if stream is None:
        res = read_capture(other)              # not a capture: its messages as read_capture words them
        if len(res.trace):
            yield res.trace
        return res
    res, stats = stream.result, Stats()
    for b in stream:
        t, _ = decode_arrays(b.data, b.off, b.cap, b.orig, b.time_ns, b.linktype, b.fcs, b.frame, res, stats)
        if not len(t):
            continue
        stats.truncated += int(t.truncated.sum())
        yield t
        if progress is not None:
            progress.update(len(t))
    for reason, k in getattr(stream, "stats", Stats()).skipped.items():   # the pcapng walker's notes
        stats.skip(reason, k)
    res.messages = stats.notes() + ([res.error] if res.error else [])
    return res


def tally_capture(path, acc, columns: tuple[str, ...], progress=None,
                  chunk: int = CHUNK) -> tuple[FlowNumbering, CaptureResult]:
    """Feed every chunk of a capture to ``acc`` (``acc.add(columns, flow, endpoint bit)``);
    the flow numbering (``data_side()``: per flow the data direction's endpoint bit) and the result."""
    numbering = FlowNumbering()
    it = chunks(path, progress, chunk)
    while True:
        try:
            t = next(it)
        except StopIteration as stop:
            return numbering, stop.value
        flow, side = numbering.add(t)
        acc.add({k: t.columns[k] for k in columns}, flow, side)


def read_columns(path, columns: tuple[str, ...] | None = None, progress=None,
                 chunk: int = CHUNK) -> tuple[Trace, CaptureResult]:
    """The TCP packets of a capture with ``flow`` and ``direction`` set, and the reading result.

    columns: the columns to keep (``flow`` and ``direction`` always); the Trace is then sorted
    by (flow, direction, capture order). None keeps every column, in capture order.
    progress: told the packets of each chunk (``update(n)``); chunk: records decoded at a time.
    Raises ValueError only when the file cannot be opened."""
    numbering = FlowNumbering()
    parts: list[dict] = []
    flows, sides = [], []
    it = chunks(path, progress, chunk)
    while True:
        try:
            t = next(it)
        except StopIteration as stop:
            res = stop.value
            break
        f, s = numbering.add(t)
        flows.append(f)
        sides.append(s)
        part = {k: v for k, v in t.columns.items() if k not in FLOW_COLUMNS and (columns is None or k in columns)}
        if "sack" in part:                 # SACK blocks kept only for the packets that carry some
            part["sack"] = _Sparse(np.flatnonzero(part["sack"].any(axis=1)), part["sack"])
        parts.append(part)
    if not parts:
        trace = Trace.empty()
    else:
        flow = np.concatenate(flows)
        direction = numbering.directions(flow, np.concatenate(sides))
        del flows, sides
        where = None                       # each packet's row in the result (None: capture order)
        if columns is not None:
            order = np.lexsort((direction, flow))
            where = np.empty_like(order)
            where[order] = np.arange(len(order))
            flow, direction = flow[order], direction[order]
        cols = {k: _gather(parts, k, where) for k in list(parts[0])}
        cols["flow"], cols["direction"] = flow, direction
        trace = Trace(cols)
    trace.meta.update(format=res.format, linktypes=list(res.linktypes))
    return trace, res


class _Sparse:
    """The rows ``idx`` of a chunk's column (the other rows hold the column's default, 0)."""

    def __init__(self, idx: np.ndarray, col: np.ndarray):
        self.idx, self.values, self.n = idx, col[idx], len(col)

    def __len__(self) -> int:
        return self.n


def _gather(parts: list[dict], k: str, where: np.ndarray | None) -> np.ndarray:
    """Column ``k`` of all chunks, each packet at its row ``where`` (freeing the chunks' copies as it goes).
    Sparse columns start from ``np.zeros``, whose untouched pages take no memory."""
    first = parts[0][k]
    sparse = isinstance(first, _Sparse)
    like = first.values if sparse else first
    n = sum(len(p[k]) for p in parts)
    out = (np.zeros if sparse else np.empty)((n, *like.shape[1:]), like.dtype)
    pos = 0
    for p in parts:
        col = p.pop(k)
        rows = np.arange(pos, pos + len(col)) if where is None else where[pos:pos + len(col)]
        if sparse:
            out[rows[col.idx]] = col.values
        elif where is None:
            out[pos:pos + len(col)] = col
        else:
            out[rows] = col
        pos += len(col)
    return out
