"""What the five report dashboards share: the common controls, tcpdump excerpts, readouts.

A report dashboard (``report_<id>.py``) turns its controls into a call of the
report's preset (``offloadkit.reports.get(id)``) or of the engine functions the
preset uses, and shows the result with the builders of ``views`` and
``report_views``. Nothing shown is typed in here: packet sizes, rates and CPU
shares come from the model, the report's numbers from ``load_facts``.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .. import codes
from ..io.tcpdump import render
from ..trace import Trace
from .dashboard import int_slider, toggle
from .views import format_rate

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

    @property
    def goodput_bps(self) -> float:
        return float(self.run.goodput_bps)


def common_controls(mss: int, mtu: int, gro: bool, csum_offload: bool, *, mss_range=(200, 9000),
                    mtu_range=(576, 9000), gro_label: str = "GRO",
                    csum_label: str = "checksum offload") -> dict:
    """The four controls every dashboard has: ``mss``, ``mtu``, ``gro``, ``csum_offload``."""
    return {"mss": int_slider("MSS (payload)", mss, *mss_range),
            "mtu": int_slider("MTU", mtu, *mtu_range),
            "gro": toggle(gro_label, gro),
            "csum_offload": toggle(csum_label, csum_offload)}


def tag_controls(controls: Mapping) -> None:
    """CSS classes the browser tests find the controls by."""
    for name, ctl in controls.items():
        ctl.add_class(f"offloadkit-control-{name}")


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
    """``tcpdump -n -t`` lines; a dropped packet gets its drop reason after the line.
    ``options=False`` leaves out the TCP options (the timestamps), to keep two panels side by side."""
    if len(t) == 0:
        return []
    if base_seq is not None:
        t = relative(t, base_seq, base_ack if base_ack is not None else int(t.ack[0]))
    out = []
    for line, d in zip(render(t, relative=False, time=False), t.drop):
        if not options:
            line = _OPTIONS.sub("", line)
        line = line + (f"  ✗ dropped here ({codes.DROP_NAMES.get(int(d), d)})" if d else "")
        out.extend(line.split("\n"))      # an encapsulated packet: outer line, then the inner one
    return out


def excerpt(trace: Trace | Mapping[str, Trace], points: Sequence[str], n: int = 8, start_seq: int | None = None,
            extra_rows: Mapping[str, Trace] | None = None,
            relative_seq: bool = True) -> tuple[dict[str, list[str]], Trace]:
    """(tcpdump lines per point, the window of packets) for the first ``n`` data packets
    at each point from ``start_seq``, plus ``extra_rows`` (e.g. the first retransmission).
    ``trace``: a Trace with every point, or {point: its packets} (saves re-selecting)."""
    ats = trace if isinstance(trace, Mapping) else {p: trace.at(p) for p in points}
    first = None
    for p in points:
        w = data_window(ats[p], 1)
        if len(w):
            first = w
            break
    base_seq = int(first.seq[0]) if first is not None and relative_seq else None
    base_ack = int(first.ack[0]) if first is not None and relative_seq else None
    lines, parts = {}, []
    for p in points:
        w = data_window(ats[p], n, start_seq)
        more = (extra_rows or {}).get(p)
        if more is not None and len(more):
            w = Trace.concat([w, more])
        lines[p] = tcpdump_lines(w, base_seq, base_ack)
        parts.append(w.with_point(p))
    window = Trace.concat(parts)
    return lines, Trace(window.columns, tuple(points), window.meta)


# -- readouts and snapshots -----------------------------------------------------
def sizes_text(counts: Mapping[int, int], top: int = 4) -> str:
    """{1448: 203, 1432: 203, 1440: 1388} -> '1388×1440, 203×1432, 203×1448'."""
    items = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    text = ", ".join(f"{c}×{s}" for s, c in items[:top])
    return text + (f" (+{len(items) - top} other sizes)" if len(items) > top else "") if items else "nothing"


def size_counts(t: Trace, delivered_only: bool = True) -> dict[int, int]:
    """Payload size -> packets, data direction, at one point."""
    keep = (t.direction == 0) & (t.payload_len > 0)
    if delivered_only:
        keep &= t.drop == codes.DROP_NONE
    v, c = np.unique(t.payload_len[keep], return_counts=True)
    return {int(a): int(b) for a, b in zip(v, c)}


def mtu_room_note(mss: int, mtu: int) -> str | None:
    """The library's MSS check (ValueError when the MSS does not fit); a note when the MTU has room to spare."""
    from ..engine.segment import check_mss_fits
    room = check_mss_fits(int(mss), int(mtu), timestamps=True)
    if room > 0:
        return (f"MTU {mtu} has room for {int(mss) + room} payload bytes per segment; the MSS sends {mss} "
                f"({room} unused).")
    return None


def profile_rows(result, case: str, top: int = 10, context: str | None = None) -> list[dict]:
    """The model's ``perf top``: its ``top`` symbols (idle excluded) as rows for ``views.cpu_profile``."""
    p = result.profile(context=context)
    p = p[p.symbol != "[idle/other]"].head(top)
    return [{"symbol": s, "share": float(v), "case": case} for s, v in zip(p.symbol, p.share)]


def drops_text(drops: Mapping[str, int]) -> str:
    """{'over MTU, dropped silently': 203, 'queue full': 0} -> '203 over MTU, dropped silently'."""
    return ", ".join(f"{n} {why}" for why, n in drops.items() if n) or "none"


def static_html(r: ReportView) -> str:
    """The kernel-free snapshot: tcpdump lines per point and the rates."""
    parts = [f"<p><b>{html.escape(p)}</b></p><pre>{html.escape(chr(10).join(lines) or '(no packets)')}</pre>"
             for p, lines in r.lines.items()]
    rows = "".join(f"<li>{html.escape(row['case'])}: {html.escape(row['label'])}</li>" for row in r.rates)
    return "".join(parts) + (f"<ul>{rows}</ul>" if rows else "")


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


def round_text(v: float, digits: int = 3) -> str:
    """``digits`` significant digits, never an exponent: 30018.2 -> '30000', 72.71 -> '72.7', 0.6585 -> '0.659'."""
    r = float(f"{float(v):.{digits}g}")
    return str(int(round(r))) if abs(r) >= 10 ** (digits - 1) else f"{r:g}"


def model_rate(case: str, value: float, unit_label: str, digits: int = 3) -> dict:
    return rate_row(case, "model", float(value), f"{round_text(value, digits)} {unit_label}")




# -- notebook helpers: the reproduction table and the kernel lab -----------------------
def _cell(v, digits: int) -> str:
    if v is None:
        return "-"
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return f"{_cell(v[0], digits)}–{_cell(v[1], digits)}"
    if isinstance(v, (bool, np.bool_)):
        return "yes" if v else "no"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return round_text(v, digits)
    return str(v)


def reproduction_text(rep, digits: int = 3) -> str:
    """A ``Reproduction`` as a plain table with numbers rounded to ``digits`` significant
    digits (stable enough for a checked notebook cell)."""
    head = (f"{rep.report}: {sum(r.ok for r in rep.rows)}/{len(rep.rows)} within tolerance "
            f"({len(rep.fitted)} fitted, {len(rep.predicted)} predicted)")
    table = [["quantity", "unit", "report", "model", "tolerance", "ok", "role"]]
    for r in rep.rows:
        table.append([r.quantity, r.unit, _cell(r.reported, digits), _cell(r.model, digits),
                      r.tolerance.text(r.unit), "ok" if r.ok else "MISS", r.role])
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return "\n".join([head] + ["  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table])


def _top_sizes(hist: Mapping[int, int], n: int = 4, smallest: int = 64) -> str:
    items = [(s, c) for s, c in hist.items() if s >= smallest][:n]
    return ", ".join(f"{c}×{s}" for s, c in items) or "-"


def kernel_lab_text(experiments: Mapping[str, Any], budget_s: float = 25.0) -> str:
    """Run ``offloadkit.lab.compare.try_on_kernel`` for each labelled ``LabSettings`` and describe
    what the real kernel did (payload sizes per capture point, kernel beside the kit's engine,
    goodput). Where the lab cannot run (no root, no namespaces: Binder) the result is its one
    sentence of refusal. Experiments that would start after ``budget_s`` seconds are left out."""
    import dataclasses
    import tempfile
    import time
    from ..lab.compare import try_on_kernel

    t0, out = time.monotonic(), []
    for label, settings in experiments.items():
        left = budget_s - (time.monotonic() - t0)
        if left < 3:
            out.append(f"{label}: left out (the {budget_s:.0f} s budget of this cell is spent)")
            continue
        settings = dataclasses.replace(settings, iperf_timeout_s=min(settings.iperf_timeout_s, left))
        try:
            with tempfile.TemporaryDirectory(prefix="offloadkit-nb-") as tmp:
                r = try_on_kernel(settings, tmp)
        except (RuntimeError, OSError, ValueError) as e:   # a run that failed or timed out: say so, go on
            out.append(f"{label}: the lab run failed: {e}")
            continue
        if "skipped" in r:
            return f"Skipped: {r['skipped']}"
        out.append(f"{label}\n  goodput {format_rate(r['goodput_bps'])}, {r['retransmits']} retransmissions")
        out.append(f"  {'point':11s} {'kernel (payload bytes, most frequent)':40s} kit's engine on the same input")
        for p, hist in r["kernel"].items():
            out.append(f"  {p:11s} {_top_sizes(hist):40s} {_top_sizes(r['kit'].get(p, {}))}")
        for key in ("segmentation", "gro"):
            if key in r:
                out.append(f"  {key}: {'agrees' if r[key]['ok'] else 'DIFFERS'} ({r[key]['summary']})")
        out.extend(f"  note: {n}" for n in r.get("notes", []))
    out.append("(iperf3's control messages, under 64 bytes, are left out.)")
    return "\n".join(out)


__all__ = ["ReportView", "common_controls", "tag_controls", "excerpt", "data_window", "tcpdump_lines",
           "sizes_text", "size_counts", "mtu_room_note", "profile_rows", "drops_text", "static_html", "rate_row",
           "report_rate", "model_rate", "round_text", "reproduction_text", "kernel_lab_text", "format_rate"]
