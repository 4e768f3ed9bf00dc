"""``offloadkit doctor``: diagnose offload pathologies in a capture, in plain words with evidence.

:func:`diagnose_file` reads a pcap/pcapng chunk by chunk with :mod:`.reader` (the packets
and messages :func:`offloadkit.io.capture.read_capture` gives; a damaged file is diagnosed
on the packets read, its reader message becoming a finding); :func:`diagnose` works on a
Trace. Every check reads tallies made as the packets go by (:mod:`.accumulate`), grouped
by (flow, direction) - see :mod:`.context` - so a capture is diagnosed in memory that does
not grow with it. The checks:

- ``super-packets`` / ``aggregates`` (info): packets over the link MTU, i.e. the
  capture was taken above TSO/GSO or after GRO/LRO (:mod:`.sizes`);
- ``mss-mismatch`` (error): segments larger than the receiver's MSS option allows,
  e.g. 1448/1432 where MSS 1452 with timestamps means 1440 (report 000);
  ``segment-size`` (info): consistently smaller segments (iperf3 -M);
- ``black-hole`` (error): segments resent smaller at the same sequence number,
  again and again, or the same-size piece missing at this point each time (:mod:`.loss`);
- ``no-aggregation`` (info; warning with ``gro="on"``): a bulk flow seen one
  segment per packet where GRO could have merged (report 002);
- ``checksum-offload`` / ``checksum-partial-received`` / ``checksum-unverified`` (info),
  ``checksum-corruption`` (error) (:mod:`.checksums`);
- ``flow-stats`` (info) per flow, ``retransmissions`` (warning when >= 5 % of the
  bytes) (:mod:`.stats`);
- ``capture-damaged`` (warning) and ``capture-note`` (info) from the reader.

Healthy traffic gives info findings only.
"""
from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..io.records import STDIO
from ..io.stream import CHUNK
from ..trace import Trace
from . import checksums, loss, sizes, stats
from .accumulate import Accumulator
from .context import CHUNK_COLUMNS, Context, Hints, build, finish
from .findings import SEVERITIES, Finding, plain
from .reader import read_columns, tally_capture

__all__ = ["Diagnosis", "Finding", "Hints", "diagnose", "diagnose_file"]


@dataclass
class Diagnosis:
    """The findings (most severe first), the per-flow table and what was read."""

    findings: list[Finding]
    flows: list[dict] = field(default_factory=list)
    packets: int = 0
    capture: str = ""
    mtu: int = 0
    mtu_from: str = ""
    trace: Trace | None = field(default=None, repr=False)   # the packets diagnosed

    def worst(self) -> str:
        return max((f.severity for f in self.findings), key=SEVERITIES.index, default="info")

    def kinds(self, severity: str | None = None) -> set[str]:
        return {f.kind for f in self.findings if severity is None or f.severity == severity}

    def alarms(self) -> list[Finding]:
        """Warnings and errors."""
        return [f for f in self.findings if f.severity != "info"]

    def to_dict(self) -> dict:
        return {"capture": self.capture, "packets": self.packets, "mtu": self.mtu, "mtu_from": self.mtu_from,
                "worst": self.worst(), "findings": [f.to_dict() for f in self.findings],
                "flows": [plain(r) for r in self.flows]}


def diagnose(trace: Trace, side: str | None = None, mtu: int | None = None, gro: str | None = None,
             notes: list[str] | None = None, error: str | None = None, capture: str = "",
             progress=None) -> Diagnosis:
    """Diagnose a Trace whose ``flow``/``direction`` columns are set (direction 0 = data).

    side: where the capture was taken ("sender"/"receiver"; None: inferred per flow).
    mtu: the link MTU (None: from the SYNs' MSS options, else 1500). gro: "on"/"off" if known.
    notes/error: the reader's messages, reported as findings. progress: a counter whose
    ``update(n)`` is told the packets each check has covered (``commands.progress.counter``).
    """
    hints = Hints(side=side, mtu=mtu, gro=gro)
    ctx = build(trace, hints) if len(trace) else None
    d = _diagnosis(ctx, hints, len(trace), notes, error, capture, progress)
    d.trace = trace
    return d


def _diagnosis(ctx: Context | None, hints: Hints, n: int, notes, error, capture: str, progress) -> Diagnosis:
    """The findings of the tallies ``ctx`` of ``n`` TCP packets and the reader's messages."""
    found: list[Finding] = []
    if error:
        found.append(Finding("capture-damaged", "warning",
                             f"The capture is damaged: {error} The diagnosis covers the {n} TCP packets "
                             f"read before that point.", {"reader_message": error, "packets_read": n}))
    for note in notes or []:
        if note != error:
            found.append(Finding("capture-note", "info", note, {"reader_message": note}))
    if ctx is None:
        found.append(Finding("no-tcp", "info", "No TCP packets to diagnose in this capture.", {}))
        return Diagnosis(found, [], 0, capture, hints.mtu or 0, "")
    checks = (sizes.super_packets, sizes.mss_mismatch, loss.black_hole, sizes.no_aggregation,
              checksums.checksum_findings)
    for check in checks:
        found += check(ctx)
        if progress is not None:
            progress.update(n // (len(checks) + 1))
    table = stats.flow_table(ctx)
    found += stats.stats_findings(ctx, table)
    found.sort(key=lambda f: -SEVERITIES.index(f.severity))
    return Diagnosis(found, table, n, capture, ctx.mtu, ctx.mtu_why)


def diagnose_file(path, side: str | None = None, mtu: int | None = None, gro: str | None = None,
                  progress=None, keep_trace: bool = True, chunk: int = CHUNK) -> Diagnosis:
    """Read a pcap/pcapng and diagnose it. Raises ValueError only if the file cannot be opened,
    is not a capture, or is damaged before its first packet record (nothing could be read:
    ``segment`` and ``gro`` refuse the same files). progress: as :func:`diagnose`; told the
    packets as they are read, then its ``total`` is set to twice that (reading is the first half).
    keep_trace: keep every column of the packets in ``Diagnosis.trace``; False keeps no packet
    (``trace`` is None): the checks' tallies are made chunk by chunk, in memory that does not
    grow with the capture (a capture whose later SYNs change the MTU or an MSS option is read
    twice; stdin is then copied to a temporary file first). chunk: records read at a time."""
    name = str(path) if not isinstance(path, (bytes, bytearray, memoryview)) else "<bytes>"
    hints = Hints(side=side, mtu=mtu, gro=gro)
    if keep_trace:
        trace, res = read_columns(path, None, progress, chunk)
        n = len(trace)
    else:
        with _rereadable(path) as src:
            def tally(mtu=None, mss=None, progress=None):
                acc = Accumulator(mtu=mtu, mss=mss)
                numbering, res = tally_capture(src, acc, CHUNK_COLUMNS, progress, chunk)
                return acc, numbering.data_side(), res
            acc, data_side, res = tally(hints.mtu, None, progress)
            n = acc.packets
            ctx = finish(lambda mtu, mss: tally(mtu, mss)[:2], hints, (acc, data_side)) if n else None
    if res.error and res.records == 0 and n == 0:
        raise ValueError(f"{Path(name).name}: {res.error}")
    if progress is not None:
        progress.total = 2 * n
    if keep_trace:
        d = diagnose(trace, side=side, mtu=mtu, gro=gro, notes=res.messages, error=res.error, capture=name,
                     progress=progress)
    else:
        d = _diagnosis(ctx, hints, n, res.messages, res.error, name, progress)
    if progress is not None:
        progress.update(progress.total - progress.n)
    return d


@contextlib.contextmanager
def _rereadable(path):
    """``path``, or for stdin (``-``) a temporary copy of it: a second count must read it again."""
    if str(path) != STDIO or isinstance(path, (bytes, bytearray, memoryview)):
        yield path
        return
    with tempfile.NamedTemporaryFile(prefix="offloadkit-doctor-", suffix=".cap") as tmp:
        shutil.copyfileobj(sys.stdin.buffer, tmp, 1 << 22)
        tmp.flush()
        yield tmp.name
