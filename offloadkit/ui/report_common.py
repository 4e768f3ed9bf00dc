"""What the five report dashboards share: the common controls, tcpdump excerpts, readouts.

A report dashboard (``report_<id>.py``) turns its controls into one call of the
report's preset, ``offloadkit.reports.get(id).run("broken", **knobs)``, each
control one knob of the same name, and shows the result with the builders of
``views`` and ``report_views``. Nothing shown is typed in here: packet sizes, rates and CPU
shares come from the model, the report's numbers from ``load_facts``.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from .. import codes
from ..reports.table import format_rate, round_text
from ..sim.one_packet import marked_lines, max_mss
from ..trace import Trace
from .views import excerpt_html

U32 = 1 << 32


@dataclass(eq=False)
class ReportView:
    """One recompute of a report dashboard: the run and everything the views show."""

    report: str
    settings: dict                       # the dashboard's control values
    run: Any                             # the preset's PresetRun (or an equivalent)
    lines: dict[str, list[str]]          # tcpdump lines per capture point (the excerpt)
    window: Trace                        # the packets behind the sizes chart, all points
    rates: list[dict]                    # rows for report_views.rate_comparison
    notes: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    goodput: float | None = None         # the goodput shown, when it is not the run's own (a longer run's)

    @property
    def goodput_bps(self) -> float:
        return float(self.run.goodput_bps if self.goodput is None else self.goodput)


# -- tcpdump excerpts ---------------------------------------------------------------
def _after(seq: np.ndarray, start: int) -> np.ndarray:
    """seq >= start in 32-bit sequence space."""
    return ((seq.astype(np.int64) - int(start)) % U32) < (U32 >> 1)


def data_window(t: Trace, n: int, start_seq: int | None = None, delivered_only: bool = False) -> Trace:
    """The first ``n`` data-direction packets at one point (from ``start_seq`` on)."""
    keep = (t.direction == 0) & (t.payload_len > 0)
    if delivered_only:
        keep &= t.drop == codes.DROP_NONE
    if start_seq is not None:
        keep &= _after(t.seq, start_seq)
    return t[np.nonzero(keep)[0][:n]]


def relative(t: Trace, base_seq: int, base_ack: int) -> Trace:
    """Sequence and ack numbers relative to the connection's first data byte (1), as tcpdump prints them."""
    return t.replace(seq=((t.seq.astype(np.int64) - base_seq + 1) % U32).astype(np.uint32),
                     ack=((t.ack.astype(np.int64) - base_ack + 1) % U32).astype(np.uint32))


_OPTIONS = re.compile(r"options \[[^\]]*\], ")


def tcpdump_lines(t: Trace, base_seq: int | None = None, base_ack: int | None = None,
                  options: bool = False) -> list[str]:
    """``tcpdump -n -t`` lines, drops marked (``sim.one_packet.marked_lines``), sequence numbers
    relative to ``base_seq``/``base_ack``. ``options=False`` leaves out the TCP options (the
    timestamps), to keep two panels side by side."""
    if len(t) and base_seq is not None:
        t = relative(t, base_seq, base_ack if base_ack is not None else int(t.ack[0]))
    lines = marked_lines(t)
    return lines if options else [_OPTIONS.sub("", line) for line in lines]


def excerpt(trace: Trace | Mapping[str, Trace], points: Sequence[str], n: int = 8, start_seq: int | None = None,
            extra_rows: Mapping[str, Trace] | None = None, relative_seq: bool = True,
            rewrite: Callable[[Trace], Trace] | None = None) -> tuple[dict[str, list[str]], Trace]:
    """(tcpdump lines per point, the window of packets) for the first ``n`` data packets
    at each point from ``start_seq``, plus ``extra_rows`` (e.g. the first retransmission).
    ``trace``: a Trace with every point, or {point: its packets} (saves re-selecting).
    ``rewrite``: applied to the window's rows before they are printed (e.g. the report's
    connection numbering, ``reports.rtl8139.established``)."""
    ats = trace if isinstance(trace, Mapping) else {p: trace.at(p) for p in points}
    first = None
    for p in points:
        w = data_window(ats[p], 1)
        if len(w):
            first = w
            break
    parts = []
    for p in points:                        # each point's rows, then its extra rows: one concat in all
        parts.append(data_window(ats[p], n, start_seq).with_point(p))
        more = (extra_rows or {}).get(p)
        if more is not None and len(more):
            parts.append(more.with_point(p))
    window = Trace.concat(parts)            # its points: every part's, in order of appearance; renumber
    points = tuple(points)
    code = np.array([points.index(q) if q in points else 0 for q in window.points], dtype=np.uint8)
    window = Trace({**window.columns, "point": code[window.point]}, points, window.meta)
    shown = rewrite(window) if rewrite is not None else window
    if first is not None and relative_seq and len(window):
        base = rewrite(first) if rewrite is not None else first
        shown = relative(shown, int(base.seq[0]), int(base.ack[0]))
    code = shown.point
    lines = {}
    for k, p in enumerate(points):          # a point's rows are contiguous: slices, no copies
        rows = np.flatnonzero(code == k)
        lines[p] = tcpdump_lines(shown[int(rows[0]):int(rows[-1]) + 1] if len(rows) else shown[:0])
    return lines, window


# -- readouts and snapshots -----------------------------------------------------
def sizes_text(counts: Mapping[int, int], top: int = 4) -> str:
    """{1448: 203, 1432: 203, 1440: 1388} -> '1388×1440, 203×1432, 203×1448'."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{c}×{s}" for s, c in items[:top])
    return text + (f" (+{len(items) - top} other sizes)" if len(items) > top else "") if items else "nothing"


def recorded_sizes_text(res, point: str) -> str:
    """The sizes leaving ``point`` ('1388×1440, 203×1432 B'), said to be the first ``trace_limit``
    packets when the run's trace limit cut that point (a live view records a window)."""
    limit = res.scenario.trace_limit
    cut = f"the first {limit} packets recorded: " if len(res.at(point)) >= limit else ""
    return f"{cut}{sizes_text(res.segment_sizes(point))} B"


def size_counts(t: Trace, delivered_only: bool = True) -> dict[int, int]:
    """Payload size -> packets, data direction, at one point."""
    keep = (t.direction == 0) & (t.payload_len > 0)
    if delivered_only:
        keep &= t.drop == codes.DROP_NONE
    v, c = np.unique(t.payload_len[keep], return_counts=True)
    return {int(a): int(b) for a, b in zip(v, c)}


def mtu_room_note(mss: int, mtu: int) -> str | None:
    """A note when the MTU has room to spare beyond the MSS (the presets reject an MSS that does not fit)."""
    room = max_mss(mtu) - int(mss)
    if room > 0:
        return (f"MTU {mtu} has room for {int(mss) + room} payload bytes per segment; the MSS sends {mss} "
                f"({room} unused).")
    return None


def profile_rows(result, case: str, top: int = 10, context: str | None = None) -> list[dict]:
    """The model's ``perf top``: its ``top`` symbols (idle excluded) as rows for ``views.cpu_profile``
    (``CpuResult.symbol_cycles``: the same shares as ``profile()``, without building a table)."""
    cpus = result.host.perf_cpus if context is None else result.host.contexts[context]
    total = result.host.clock_hz * cpus
    cyc = sorted(result.symbol_cycles(context=context).items(), key=lambda kv: -kv[1][0])[:top]
    return [{"symbol": s, "share": float(c / total), "case": case} for s, (c, _, _) in cyc]


def drops_text(drops: Mapping[str, int]) -> str:
    """{'over MTU, dropped silently': 203, 'queue full': 0} -> '203 over MTU, dropped silently'."""
    return ", ".join(f"{n} {why}" for why, n in drops.items() if n) or "none"


def packet_counts(window: Trace) -> dict[str, int]:
    """Packets per capture point of an excerpt's window (the trace panel headings)."""
    return {p: len(window.at(p)) for p in window.points}


def excerpt_panel(r: ReportView, max_lines: int) -> str:
    """The tcpdump excerpt of a report dashboard as text panels."""
    return excerpt_html(r.lines, packet_counts(r.window), max_lines=max_lines, fixed=True)


def static_html(r: ReportView) -> str:
    """The kernel-free snapshot: tcpdump lines per point and the rates."""
    rows = "".join(f"<li>{html.escape(row['case'])}: {html.escape(row['label'])}</li>" for row in r.rates)
    return excerpt_html(r.lines, packet_counts(r.window), max_lines=50) + (f"<ul>{rows}</ul>" if rows else "")


def rate_row(case: str, source: str, value: float | None, label: str, lo: float | None = None,
             hi: float | None = None) -> dict:
    """A row for ``report_views.rate_comparison`` (value in the report's unit)."""
    return {"case": case, "source": source, "value": value, "lo": lo if lo is not None else value,
            "hi": hi if hi is not None else value, "label": label}


def report_rate(case: str, fact_value, unit_label: str) -> dict:
    """The report's measurement (a number or a (lo, hi) range from ``load_facts``) as a row."""
    if isinstance(fact_value, (tuple, list)):
        lo, hi = (float(x) for x in fact_value)
        return rate_row(case, "report", (lo + hi) / 2, f"{round_text(lo, 4)}–{round_text(hi, 4)} {unit_label}",
                        lo, hi)
    v = float(fact_value)
    return rate_row(case, "report", v, f"{round_text(v, 4)} {unit_label}")


def model_rate(case: str, value: float, unit_label: str, digits: int = 3) -> dict:
    return rate_row(case, "model", float(value), f"{round_text(value, digits)} {unit_label}")




__all__ = ["ReportView", "excerpt", "data_window", "tcpdump_lines", "sizes_text", "size_counts", "mtu_room_note",
           "profile_rows", "drops_text", "recorded_sizes_text", "static_html", "rate_row", "report_rate", "model_rate", "round_text",
           "format_rate", "packet_counts", "excerpt_panel"]
