"""Robust reading of real captures: pcap (µs/ns) and pcapng, every link type ``packet.link`` lists.

``read_capture(path)`` never raises on a bad file: it returns the TCP packets it
could read plus messages (one of them, ``error``, says why reading stopped early).
``read_records(path)`` gives every record undecoded, for the rewriters; and
:func:`write_capture` writes records back: a classic pcap when they share one
link type and their times fit, pcapng otherwise (each packet keeps its own link
type, nothing is relabelled).

Formats are ``io.pcap`` and ``io.pcapng``; frames are decoded by
``packet.decode``. Fast path: a plain Ethernet pcap is walked by numba kernels
over the file's bytes; the kernel decodes Ethernet(+VLAN)/IPv4/TCP itself and
leaves every other record to ``packet.decode``, which is also the whole slow
path (tests/reference/pcap_ref.py is the dpkt reference both are tested against).
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .. import codes
from ..errors import UsageError
from ..packet.decode import decode, payload_bytes
from ..packet.fast import FAST_COLUMNS, decode_eth_ipv4_tcp
from ..packet.link import LINKTYPE_ETHERNET, supported, supported_names
from ..trace import Trace
from . import pcap, pcapng
from .batch import Batch, read_batch
from .flows import assign_flows
from .records import (
    ERR_BAD_CAPLEN,
    STDIO,
    CaptureResult,
    Record,
    Stats,
    clamp_time,
    read_input,
    walk_error,
)


def warmup() -> None:
    """Compile the fast-path kernels on a two-packet capture."""
    import os
    import tempfile
    t = Trace.from_columns(seq=[1, 2], payload_len=[0, 10], flags=codes.ACK, opt_ts=True, sack_n=[0, 1])
    fd, name = tempfile.mkstemp(suffix=".pcap")
    os.close(fd)
    try:
        pcap.write_pcap(name, t)
        read_capture(name)
    finally:
        os.unlink(name)


# -- decoding records -----------------------------------------------------------------------
def _decode_into(rows, payloads, stats: Stats, rec: Record, with_payload: bool):
    if not supported(rec.linktype):
        stats.unsupported[rec.linktype] = stats.unsupported.get(rec.linktype, 0) + 1
        return
    got = decode(rec.linktype, rec.data, rec.orig_len, rec.fcs)
    if isinstance(got, str):
        stats.skip(got)
        return
    row, lay = got
    if lay.ip_len_zero:
        stats.ip_len_zero += 1
    row["frame"] = rec.frame
    row["time_ns"] = clamp_time(rec.time_ns)
    rows.append(row)
    if with_payload:
        payloads.append(payload_bytes(rec.data, row, lay))


def _finish(trace: Trace, payloads, stats: Stats, res: CaptureResult, with_payload: bool):
    """Attach flows, notes and the payloads to the result."""
    stats.truncated += int(trace.truncated.sum()) if len(trace) else 0
    if with_payload:
        res.payloads = payloads or []
    res.trace = assign_flows(trace)
    res.trace.meta.update(format=res.format, linktypes=list(res.linktypes))
    res.messages = stats.notes() + res.messages
    if res.error:
        res.messages.append(res.error)
    return res


def _read_pcap(raw: bytes, res: CaptureResult, stats: Stats, fast: bool, with_payload: bool):
    data = np.frombuffer(raw, dtype=np.uint8)
    h = pcap.Header(raw)
    h.fill(res)
    if not h.complete:
        return _finish(Trace.empty(), [], stats, res, with_payload)
    empty = np.empty(0, np.int64)
    n, end, err = pcap.walk_pcap(data, 24, h.swapped, h.rec_hdr, h.maxcap, False, empty, empty, empty, empty,
                                 empty)
    off, cap, orig, sec, frac = (np.empty(n, np.int64) for _ in range(5))
    pcap.walk_pcap(data, 24, h.swapped, h.rec_hdr, h.maxcap, True, off, cap, orig, sec, frac)
    res.records = n
    if err:
        bad = None
        if err == ERR_BAD_CAPLEN:
            bad = struct.unpack(h.endian + "I", raw[end + 8:end + 12])[0]
        res.error = walk_error(err, n, end, bad)
    return _read_arrays(data, off, cap, np.maximum(orig, cap), sec * 1_000_000_000 + frac * h.mult,
                        np.full(n, h.linktype, np.int32), np.full(n, h.fcs, np.int32),
                        np.arange(1, n + 1, dtype=np.int64), res, stats, fast, with_payload)


def _read_arrays(data, off, cap, orig, times, linktype, fcs, frames, res, stats, fast, with_payload):
    trace, payloads = decode_arrays(data, off, cap, orig, times, linktype, fcs, frames, res, stats, fast,
                                    with_payload)
    return _finish(trace, payloads, stats, res, with_payload)


def decode_arrays(data, off, cap, orig, times, linktype, fcs, frames, res: CaptureResult, stats: Stats,
                  fast: bool = True, with_payload: bool = False) -> tuple[Trace, list[bytes] | None]:
    """The TCP packets of walked records as a Trace in record order (no flows yet), and their
    payload bytes if asked: Ethernet (no FCS) records by the numba decoder, the rest by
    ``packet.decode``. ``data``: the uint8 array the offsets point into."""
    n = len(off)
    rows: list[dict] = []
    payloads: list[bytes] = []
    fast_trace = None
    fast_payloads = None
    todo = np.arange(n)
    eth = (linktype == LINKTYPE_ETHERNET) & (fcs == 0)
    if fast and n and eth.any():
        t = Trace.empty(n)
        cols = t.columns
        status = np.empty(n, np.uint8)
        decode_eth_ipv4_tcp(data, off, cap, orig, status, *[cols[k] for k in FAST_COLUMNS])
        status[~eth] = 2
        cols["time_ns"][:] = times
        cols["frame"][:] = frames
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
            fast_payloads = [data[a:b].tobytes() if b > a else b"" for a, b in zip(st.tolist(), en.tolist())]
    for j in todo.tolist():
        o, c = int(off[j]), int(cap[j])
        rec = Record(int(frames[j]), int(times[j]), int(linktype[j]), data[o:o + c].tobytes(), int(orig[j]),
                     int(fcs[j]))
        _decode_into(rows, payloads, stats, rec, with_payload)
    slow = Trace.from_rows(rows)
    parts = [t for t in (fast_trace, slow) if t is not None and len(t)]
    if len(parts) == 2:
        trace = Trace.concat(parts)
        order = np.argsort(trace.frame, kind="stable")
        trace = trace[order]
    else:
        trace = parts[0] if parts else Trace.empty()
        order = np.arange(len(trace))
    if not with_payload:
        return trace, None
    allp = (fast_payloads or []) + payloads
    return trace, [allp[j] for j in order.tolist()] if len(trace) else []


def read_capture(path, with_payload: bool = False, fast: bool = True) -> CaptureResult:
    """Read the TCP packets of a pcap or pcapng file; never raises on bad contents.

    path: a file name, or the file's bytes. with_payload: also return the captured
    payload bytes of each row (``result.payloads``). fast=False forces the Python
    decoder for every record. A missing or unreadable file raises ValueError.
    """
    raw, name = read_input(path)
    stats = Stats()
    res = CaptureResult(None)
    if len(raw) < 4:
        res.error = f"{name} is {len(raw)} bytes long: too short to be a pcap or pcapng file."
    elif pcap.is_pcap(raw):
        return _read_pcap(raw, res, stats, fast, with_payload)
    elif raw[:4] == pcapng.MAGIC:
        data, off, cap, orig, times, lt, fcs, frames = pcapng.packet_arrays(raw, res, stats)
        return _read_arrays(data, off, cap, orig, times, lt, fcs, frames, res, stats, fast, with_payload)
    else:
        res.error = f"{name} is not a pcap or pcapng file (it starts with bytes {raw[:4].hex()})."
    return _finish(Trace.empty(), [], stats, res, with_payload)


def read_records(path) -> tuple[list[Record], CaptureResult]:
    """Every packet record of a pcap/pcapng file, whatever its protocol, in file order.

    For tools that rewrite captures (write them back with :func:`write_capture`).
    The CaptureResult carries format, link types and the error message of a damaged
    file (its ``trace`` is empty). Raises ValueError only for an unreadable path.
    """
    raw, name = read_input(path)
    res = CaptureResult(Trace.empty())
    stats = Stats()
    if len(raw) >= 4 and raw[:4] == pcapng.MAGIC:
        out = list(pcapng.records(raw, res, stats))
    elif pcap.is_pcap(raw):
        out = list(pcap.records(raw, res))
    else:
        out = []
        res.error = f"{name} is not a pcap or pcapng file"
    res.records = len(out)
    res.messages = stats.notes()
    if res.error:
        res.messages.append(res.error)
    return out, res


def load_records(path) -> tuple[list[Record], CaptureResult]:
    """:func:`read_records` for a command: a file it cannot use is one UsageError line.

    Refused: a missing path, a directory, a file that is not pcap/pcapng, one whose
    interfaces all have link types the kit does not read. A damaged file keeps the
    records before the damage (``res.error`` says where)."""
    check_path(path)
    records, res = read_records(path)
    check_loaded(path, res, len(records))
    return records, res


def load_batch(path) -> tuple[Batch, CaptureResult]:
    """:func:`load_records` as a :class:`io.batch.Batch` (the same checks, the same one-line refusals)."""
    check_path(path)
    batch, res = read_batch(path)
    check_loaded(path, res, len(batch))
    return batch, res


def check_path(path) -> None:
    """A missing path or a directory is one UsageError line."""
    p = Path(path)
    if str(path) != STDIO and not p.exists():
        raise UsageError(f"{path}: no such file")
    if p.is_dir():
        raise UsageError(f"{path} is a directory, not a pcap or pcapng file")


def check_loaded(path, res: CaptureResult, n: int) -> None:
    """Refuse (one UsageError line) what :func:`load_records` refuses; ``n``: the records read."""
    if res.format == "unknown":
        raise UsageError(f"{path} is not a pcap or pcapng file (it does not start with a pcap or pcapng "
                         f"header)")
    if res.linktypes and not any(supported(lt) for lt in res.linktypes):
        lts = ", ".join(str(lt) for lt in sorted(set(res.linktypes)))
        raise UsageError(f"{path} has link type {lts}; offloadkit reads {supported_names()}")
    if res.error and not n:
        raise UsageError(f"{path} cannot be read: {res.error}")


def write_capture(path, records: list[Record], like: CaptureResult) -> str:
    """Write ``records`` in the format of the capture ``like`` describes, if it can hold them.

    A classic pcap (``like``'s resolution and snaplen) when every record has the
    same link type and FCS length and a time in 1970..2106; pcapng otherwise.
    Returns the format written ("pcap", "pcap-ns" or "pcapng")."""
    kinds = {(r.linktype, r.fcs) for r in records}
    if not kinds:
        kinds = {(like.linktype, like.fcs[0] if like.fcs else 0)}
    snaplen = min(max(like.snaplen, 1), pcap.SNAPLEN)
    if len(kinds) == 1 and all(pcap.fits(r.time_ns) for r in records):
        (lt, fcs), = kinds
        pcap.write_records(path, records, lt, snaplen, like.nano, fcs)
        return "pcap-ns" if like.nano else "pcap"
    pcapng.write_records(path, records, snaplen, like.nano)
    return "pcapng"
