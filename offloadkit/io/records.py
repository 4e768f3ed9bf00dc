"""What the capture readers return: raw records, the reading result, counters and error texts.

A :class:`Record` is one packet record of a pcap or pcapng file, undecoded, with
the link type and FCS length of its own interface. A :class:`CaptureResult`
says what :func:`offloadkit.io.capture.read_capture` found; ``error`` (None when
the whole file was read) is the one sentence that says why reading stopped.
"""
from __future__ import annotations

import gzip
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from ..packet.link import LINKTYPE_ETHERNET, supported_names
from ..trace import Trace

MAX_CAPLEN = 262144
TIME_NS_MIN, TIME_NS_MAX = -(1 << 63), (1 << 63) - 1

# record-walker error codes (shared by the numba and Python walkers)
ERR_NONE, ERR_SHORT_HEADER, ERR_BAD_CAPLEN, ERR_SHORT_DATA = 0, 1, 2, 3


@dataclass
class Record:
    """One packet record of a capture file, undecoded."""

    frame: int          # 1-based packet number
    time_ns: int
    linktype: int
    data: bytes         # the captured bytes
    orig_len: int       # the packet's length on the wire
    fcs: int = 0        # bytes of Ethernet FCS at the end of the frame (link-type word / if_fcslen)


@dataclass
class CaptureResult:
    """What :func:`read_capture` found. ``error`` is None when the whole file was read."""

    trace: Trace | None
    format: str = "unknown"                               # pcap, pcap-ns or pcapng
    linktypes: list[int] = field(default_factory=list)   # per interface
    fcs: list[int] = field(default_factory=list)         # per interface: FCS bytes per frame
    records: int = 0                                      # packet records read (all protocols)
    messages: list[str] = field(default_factory=list)     # notes, then the error if any
    error: str | None = None
    fast_path: bool = False
    payloads: list[bytes] | None = None
    snaplen: int = MAX_CAPLEN
    fine_times: bool = False                              # a pcapng interface keeps sub-microsecond times

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def nano(self) -> bool:
        """True when the file's timestamps are finer than microseconds."""
        return self.format == "pcap-ns" or (self.format == "pcapng" and self.fine_times)

    @property
    def linktype(self) -> int:
        """The first interface's link type (Ethernet when the file describes none)."""
        return self.linktypes[0] if self.linktypes else LINKTYPE_ETHERNET


class Stats:
    """Counters a reader keeps while decoding, turned into notes at the end."""

    def __init__(self):
        self.skipped: dict[str, int] = {}
        self.truncated = 0
        self.ip_len_zero = 0
        self.unsupported: dict[int, int] = {}

    def skip(self, reason: str, n: int = 1):
        self.skipped[reason] = self.skipped.get(reason, 0) + n

    def notes(self) -> list[str]:
        out = []
        if self.truncated:
            out.append(f"{self.truncated} packets were cut by the capture's snaplen: their headers are used "
                       f"and their payload lengths come from the IP header (column 'truncated').")
        if self.ip_len_zero:
            out.append(f"{self.ip_len_zero} packets had IP total length 0 (captured before TSO/GSO "
                       f"segmentation): their length was taken from the frame.")
        for lt, k in self.unsupported.items():
            out.append(f"{k} packets on an interface with unsupported link type {lt} were skipped "
                       f"(offloadkit reads {supported_names()}).")
        for reason, k in sorted(self.skipped.items()):
            out.append(f"{k} packets skipped: {reason}.")
        return out


def walk_error(err: int, n: int, pos: int, cap: int | None = None) -> str:
    """The sentence for a record walker's error code ``err`` at file offset ``pos``."""
    done = f"{n} packet records were read before it"
    if err == ERR_SHORT_HEADER:
        return f"the file ends inside the header of packet record {n + 1} (offset {pos}): " \
               f"the capture is truncated; {done}."
    if err == ERR_BAD_CAPLEN:
        return f"packet record {n + 1} (offset {pos}) claims a captured length of {cap} bytes, more than " \
               f"any capture allows: the file is corrupt from there; {done}."
    return f"the file ends inside the data of packet record {n + 1} (offset {pos}): " \
           f"the capture is truncated; {done}."


STDIO = "-"
GZIP_MAGIC = b"\x1f\x8b"


def read_input(path) -> tuple[bytes, str]:
    """(bytes, name for messages) of a capture: a path, ``-`` (stdin) or bytes; gzip is undone.

    Raises ValueError naming the file when it cannot be read; a damaged gzip stream is
    returned as it is (the readers then say it is not a capture)."""
    if isinstance(path, (bytes, bytearray, memoryview)):
        data, name = bytes(path), "<bytes>"
    elif str(path) == STDIO:
        data, name = sys.stdin.buffer.read(), "<stdin>"
    else:
        try:
            data, name = Path(path).read_bytes(), Path(path).name
        except OSError as e:
            raise ValueError(f"cannot read capture {path}: {e.strerror or e}") from None
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error):
            pass
    return data, name


def write_output(path, data: bytes) -> None:
    """Write a capture's bytes to a path or, for ``-``, to stdout."""
    if str(path) == STDIO:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        Path(path).write_bytes(data)


def clamp_time(ns: int) -> int:
    """A timestamp clamped to what an int64 column holds."""
    return min(max(ns, TIME_NS_MIN), TIME_NS_MAX)
