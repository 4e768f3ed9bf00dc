"""Chart builders for the dashboards: plain data in, a Vega-Lite chart out.

Every builder is a pure function (no widgets), tested on its own and reused by
every report dashboard. Builders write the Vega-Lite dict directly and wrap it
in :class:`VegaLite` (no altair import): building the same chart through
altair's object API costs 50-150 ms per recompute (deep copies and schema
validation), more than the whole live budget. ``tests/test_dashboard_views.py``
validates every builder's output against the Vega-Lite schema instead.

Rows per chart stay small: traces are cut to a window of lines, large traces
are shown as histograms. Data travels as top-level named ``datasets``.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

import numpy as np

from ..codes import DROP_NAMES, PASS_NAMES
from ..reports.table import format_rate
from ..trace import Trace
from .offline import SCHEMA_URL

MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
# One colour-blind-safe palette (Okabe & Ito), one meaning per colour, in every notebook.
PALETTE = {"delivered": "#0072B2",        # blue: a packet that got through
           "dropped": "#D55E00",          # vermillion: a packet dropped at that point
           "retransmission": "#CC79A7",   # reddish purple: a retransmitted segment
           "model": "#009E73",            # bluish green: a number the model computed
           "report": "#999999",           # grey: a number the report measured
           "checksum": "#E69F00",         # orange: software checksum work
           "other": "#56B4E9"}            # sky blue: a comparison case (another NIC, another cell)
FATE_COLORS = PALETTE


class VegaLite:
    """A finished Vega-Lite spec: assignable to ``LiveChart.chart``; ``to_dict()`` returns the spec as is.
    Displayed on its own (a notebook cell), it is drawn by altair (imported then, not before)."""

    def __init__(self, spec: dict):
        self._spec = {"$schema": SCHEMA_URL, **spec}

    def to_dict(self, *args, **kwargs) -> dict:
        return self._spec

    def _repr_mimebundle_(self, *args, **kwargs):
        import altair as alt       # altair's renderer: whatever the notebook enabled
        return alt.renderers.get()(self._spec)

    def __eq__(self, other) -> bool:
        return isinstance(other, VegaLite) and self._spec == other._spec

    __hash__ = None


def channel(field: str, kind: str, **extra) -> dict:
    """A field channel: channel("point", "nominal", title=None)."""
    return {"field": field, "type": kind, **extra}


def tooltips(*fields: str) -> list[dict]:
    kinds = {"N": "nominal", "O": "ordinal", "Q": "quantitative"}
    return [channel(f.split(":")[0], kinds[f.split(":")[1]]) for f in fields]


def fate_color(field: str, domain: Sequence[str]) -> dict:
    return channel(field, "nominal", scale={"domain": list(domain), "range": [FATE_COLORS[d] for d in domain]},
              legend={"title": None, "orient": "top"})


def message_chart(message: str, *, width: int = 300, color: str = "#888", title: str | None = None) -> VegaLite:
    """One line of text where a chart would be (nothing to show, or not computed yet)."""
    spec = {"data": {"values": [{"m": message}]},
            "mark": {"type": "text", "align": "left", "fontSize": 12, "color": color},
            "encoding": {"x": {"value": 0}, "text": channel("m", "nominal")}, "width": width, "height": 30}
    if title:
        spec["title"] = {"text": title, "anchor": "start"}
    return VegaLite(spec)


def _fmt_bytes(n: float) -> str:
    return f"{int(n):,}".replace(",", " ")


# -- tcpdump text ------------------------------------------------------------
def common_head(lines: Iterable[str]) -> str:
    """The text up to and including the first ": " when every line starts with the same one, else ""."""
    heads = {line[:line.find(": ") + 2] if ": " in line else None for line in lines}
    return heads.pop() if len(heads) == 1 and None not in heads else ""


def trace_text(lines_by_point: Mapping[str, Sequence[str]], *, max_lines: int = 10,
               columns: int = 2, font_size: int = 10, strip_common: bool = True) -> VegaLite:
    """tcpdump lines per capture point, in panels side by side (``columns`` per row).

    With ``strip_common``, a head shared by every line (e.g. "IP 10.0.0.1.40000 >
    10.0.0.2.5001: ", one flow) is printed once in the title instead of on each line.
    """
    if not lines_by_point:
        return message_chart("(no capture points)")
    head = common_head(line for lines in lines_by_point.values() for line in lines[:max_lines]) \
        if strip_common else ""
    cut = len(head)
    longest = max((len(line) - cut for lines in lines_by_point.values() for line in lines[:max_lines]),
                  default=20)
    width = int(min(max(longest, 30) * 0.61 * font_size, 900)) + 8
    panels, datasets = [], {}
    for k, (point, lines) in enumerate(lines_by_point.items()):
        shown = [line[cut:] for line in lines[:max_lines]]
        if len(lines) > max_lines:
            shown.append(f"... {len(lines) - max_lines} more")
        shown = shown or ["(no packets)"]
        datasets[f"lines{k}"] = [{"row": i, "line": line} for i, line in enumerate(shown)]
        panels.append({
            "data": {"name": f"lines{k}"},
            "title": {"text": f"{point} ({len(lines)} packet{'s' if len(lines) != 1 else ''})",
                      "anchor": "start", "fontSize": 12},
            "mark": {"type": "text", "align": "left", "baseline": "middle", "font": MONO, "fontSize": font_size},
            "encoding": {"x": {"value": 0}, "y": channel("row", "ordinal", axis=None), "text": channel("line", "nominal")},
            "width": width, "height": len(shown) * (font_size + 5)})
    spec = {"concat": panels, "columns": columns, "config": {"view": {"stroke": None}}, "datasets": datasets}
    if head:
        spec["title"] = {"text": f"every line starts with: {head.rstrip()}", "anchor": "start", "fontSize": 11,
                         "font": MONO, "fontWeight": "normal", "color": "#555"}
    return VegaLite(spec)


def excerpt_html(lines_by_point: Mapping[str, Sequence[str]], counts: Mapping[str, int] | None = None, *,
                 max_lines: int = 10, strip_common: bool = True, hidden: Mapping[str, int] | None = None,
                 fixed: bool = False) -> str:
    """tcpdump lines per capture point as HTML text panels that wrap inside their box.

    ``counts``: packets per point for the headings (an encapsulated packet prints two
    lines); by default the number of lines. ``hidden``: packets per point whose lines were
    not printed at all (``OnePacket.lines.head``), said after the lines. A head shared by
    every line (one flow's "IP a.b > c.d: ") is printed once above the panels. ``fixed``
    (a live panel): every box is ``max_lines`` + 1 lines high whatever it holds, lines do not
    wrap (they scroll), so a recompute redraws the text without moving the charts below it.
    """
    import html
    if not lines_by_point:
        return "<i>(no capture points)</i>"
    head = common_head(line for lines in lines_by_point.values() for line in lines[:max_lines]) \
        if strip_common else ""
    cut = len(head)
    panels = []
    for point, lines in lines_by_point.items():
        n = counts[point] if counts is not None and point in counts else len(lines)
        shown = [line[cut:] for line in lines[:max_lines]]
        if len(lines) > max_lines:
            shown.append(f"... {len(lines) - max_lines} more lines")
        elif hidden and hidden.get(point):
            shown.append(f"... {hidden[point]} more packet{'s' if hidden[point] != 1 else ''}")
        body = html.escape("\n".join(shown) or "(no packets)")
        panels.append(f"<div style='flex:1 1 420px;min-width:0;max-width:100%'>"
                      f"<div style='font-weight:bold;font-size:12px'>{html.escape(point)} "
                      f"({n} packet{'s' if n != 1 else ''})</div>"
                      f"<pre style='{_pre(max_lines + 1) if fixed else _PRE}'>{body}</pre></div>")
    top = (f"<div style='font-family:{MONO};font-size:11px;color:#555'>every line starts with: "
           f"{html.escape(head.rstrip())}</div>") if head else ""
    return (f"<div class='offloadkit-excerpt' style='max-width:100%'>{top}"
            f"<div style='display:flex;flex-wrap:wrap;gap:4px 12px'>{''.join(panels)}</div></div>")


_PRE = (f"font-family:{MONO};font-size:11px;line-height:1.35;margin:2px 0;white-space:pre-wrap;"
        "overflow-wrap:anywhere;max-width:100%;overflow-x:auto")


def _pre(lines: int) -> str:
    """A <pre> style of a fixed ``lines`` high box: long lines scroll sideways, more lines down."""
    return (f"font-family:{MONO};font-size:11px;line-height:1.35;margin:2px 0;white-space:pre;"
            f"max-width:100%;box-sizing:content-box;height:{1.35 * lines:.2f}em;overflow:auto")


# -- segment sizes -----------------------------------------------------------
def packet_rows(trace: Trace, points: Iterable[str] | None = None) -> list[dict]:
    """One row per packet: point, index at that point, sizes and fate (column masks, no Trace copies)."""
    rows = []
    wire_all = trace.wire_len
    for point in points or trace.points:
        sel = np.nonzero(trace.point == trace.points.index(point))[0] if point in trace.points else []
        for i, k in enumerate(sel):
            d = int(trace.drop[k])
            rows.append({"point": point, "i": i, "payload": int(trace.payload_len[k]), "ip_len": int(trace.ip_len[k]),
                         "wire": int(wire_all[k]), "fate": "dropped" if d else "delivered",
                         "why": DROP_NAMES.get(d, str(d))})
    return rows


SIZE_TITLES = {"payload": "TCP payload (bytes)", "ip_len": "IP total length (bytes)", "wire": "frame (bytes)"}


def segment_sizes(trace: Trace, points: Sequence[str] | None = None, *, measure: str = "payload",
                  rules: Sequence[tuple[str, float]] = (), max_bars: int = 48,
                  width: int = 520, height: int = 200) -> VegaLite:
    """Bars of packet sizes per capture point (a histogram when there are many packets).

    ``measure``: "payload" (tcpdump's length), "ip_len" or "wire" (frame bytes).
    ``rules``: labelled reference lines, e.g. [("MSS 1440", 1440)].
    """
    if measure not in SIZE_TITLES:
        raise ValueError(f"measure must be one of {sorted(SIZE_TITLES)}, not {measure!r}")
    points = list(points or trace.points)
    rows = packet_rows(trace, points)
    per_point = max((sum(r["point"] == p for r in rows) for p in points), default=0)
    if per_point > max_bars:
        return size_histogram(rows, points, measure=measure, width=width, height=height)
    pos = {"x": channel("point", "nominal", sort=points, title=None, axis={"labelAngle": 0, "labelFontSize": 12}),
           "xOffset": channel("i", "ordinal"), "y": channel(measure, "quantitative", title=SIZE_TITLES[measure])}
    bars = {"mark": {"type": "bar"}, "encoding": {**pos, "color": fate_color("fate", ["delivered", "dropped"]),
                                                  "tooltip": tooltips("point:N", "i:O", "payload:Q", "ip_len:Q",
                                                                   "wire:Q", "why:N")}}
    labels = {"mark": {"type": "text", "dy": -6, "fontSize": 10},
              "encoding": {**pos, "text": channel(measure, "quantitative")}}
    # a size label per bar only where a bar is wide enough for it (4-5 digits at 10 px: ~30 px)
    fits = width / max(per_point * len(points), 1) >= 30
    layers = [{"data": {"name": "packets"}, "layer": [bars, labels] if fits else [bars]}]
    datasets = {"packets": rows}
    if rules:  # lines across the plot, labels to its right: the higher value's above its line, the next below
        ordered = sorted(rules, key=lambda r: -r[1])
        datasets["rules"] = [{"v": value, "label": label} for label, value in ordered]
        layers.append({"data": {"name": "rules"}, "mark": {"type": "rule", "strokeDash": [4, 3], "color": "#555"},
                       "encoding": {"y": channel("v", "quantitative")}})
        for k, (label, value) in enumerate(ordered):
            datasets[f"rule{k}"] = [{"v": value, "label": label}]
            above = k % 2 == 0
            layers.append({"data": {"name": f"rule{k}"},
                           "mark": {"type": "text", "align": "left", "dx": 4, "dy": -2 if above else 2,
                                    "color": "#555", "fontSize": 10, "baseline": "bottom" if above else "top"},
                           "encoding": {"y": channel("v", "quantitative"), "x": {"value": width},
                                        "text": channel("label", "nominal")}})
    return VegaLite({"layer": layers, "width": width, "height": height, "datasets": datasets})


def size_histogram(rows: list[dict], points: Sequence[str], *, measure: str = "payload",
                   width: int = 520, height: int = 200) -> VegaLite:
    """Packet counts per size and capture point (sizes aggregated here, not in the browser)."""
    counts: dict[tuple[str, int, str], int] = {}
    for r in rows:
        key = (r["point"], r[measure], r["fate"])
        counts[key] = counts.get(key, 0) + 1
    agg = [{"point": p, "size": s, "fate": f, "count": c} for (p, s, f), c in counts.items()]
    return VegaLite({
        "data": {"name": "sizes"}, "mark": {"type": "bar"},
        "encoding": {"x": channel("size", "ordinal", title=SIZE_TITLES[measure]),
                     "y": channel("count", "quantitative", title="packets"),
                     "color": fate_color("fate", ["delivered", "dropped"]),
                     "column": channel("point", "nominal", sort=list(points), title=None),
                     "tooltip": tooltips("point:N", "size:O", "fate:N", "count:Q")},
        "width": max(width // max(len(points), 1) - 20, 80), "height": height, "datasets": {"sizes": agg}})


# -- throughput --------------------------------------------------------------
def throughput_vs_report(rows: Sequence[Mapping], *, width: int = 420) -> VegaLite:
    """Model throughput next to the report's measurement.

    ``rows``: mappings with ``case`` (e.g. "TSO on"), ``source`` ("model" or
    "report") and ``bps``; a report row may be missing (nothing measured).
    """
    data = [{"case": r["case"], "source": r["source"], "bps": float(r["bps"]),
             "label": format_rate(float(r["bps"]))} for r in rows]
    cases = list(dict.fromkeys(r["case"] for r in data))
    pos = {"y": channel("case", "nominal", sort=cases, title=None),
           "yOffset": channel("source", "nominal", sort=["model", "report"]),
           "x": channel("bps", "quantitative", title="throughput (bit/s)", axis={"format": "~s"})}
    return VegaLite({
        "data": {"name": "rates"},
        "layer": [{"mark": {"type": "bar"}, "encoding": {**pos, "color": fate_color("source", ["model", "report"]),
                                                         "tooltip": tooltips("case:N", "source:N", "label:N")}},
                  {"mark": {"type": "text", "align": "left", "dx": 3, "fontSize": 10},
                   "encoding": {**pos, "text": channel("label", "nominal")}}],
        "width": width, "height": max(len(cases), 1) * 44, "datasets": {"rates": data}})


# -- time-sequence (Stevens) graph --------------------------------------------
def time_sequence(trace: Trace, point: str | None = None, *, max_points: int = 3000,
                  width: int = 520, height: int = 260) -> VegaLite:
    """Sequence number vs time for the data direction at one capture point.

    Each data segment is a vertical tick from ``seq`` to ``seq + length``;
    retransmissions (segments ending at or below the highest end sent before)
    and drops are coloured. Sequence numbers and times are relative to the first segment.
    """
    keep = (trace.direction == 0) & (trace.payload_len > 0)       # column masks: the five columns used, no Trace
    if point:
        keep &= trace.point == trace.point_code(point)
    sel = np.flatnonzero(keep)
    n = len(sel)
    if n == 0:
        return message_chart(f"no data segments at {point or 'this point'}", width=width)
    seq, time_ns = trace.seq[sel].astype(np.int64), trace.time_ns[sel]
    rel = (seq - seq[0]) % (1 << 32)
    rel = np.where(rel > (1 << 31), rel - (1 << 32), rel)
    end = rel + trace.payload_len[sel].astype(np.int64)
    prev_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], end[:-1]]))
    retrans = end <= prev_max
    fate = np.where(trace.drop[sel] != 0, "dropped", np.where(retrans, "retransmission", "delivered"))
    t_ms = (time_ns - time_ns[0]) / 1e6
    idx = np.arange(n)
    if n > max_points:  # keep every drop and retransmission, thin out the rest
        keep = (fate != "delivered") | (idx % int(np.ceil(n / max_points)) == 0)
        idx = idx[keep][:max_points]
    rows = [{"t_ms": t, "seq": s, "end": e, "fate": f}      # tolist(): Python numbers, no per-item conversion
            for t, s, e, f in zip(t_ms[idx].tolist(), rel[idx].tolist(), end[idx].tolist(), fate[idx].tolist())]
    return VegaLite({
        "data": {"name": "segments"}, "mark": {"type": "rule", "strokeWidth": 2},
        "encoding": {"x": channel("t_ms", "quantitative", title=f"time (ms) at {point or 'capture'}"),
                     "y": channel("seq", "quantitative", title="relative sequence number (bytes)",
                             axis={"format": "~s"}),
                     "y2": {"field": "end"},
                     "color": fate_color("fate", ["delivered", "retransmission", "dropped"]),
                     "tooltip": tooltips("t_ms:Q", "seq:Q", "end:Q", "fate:N")},
        "width": width, "height": height, "datasets": {"segments": rows}})


# -- CPU profile ---------------------------------------------------------------
def cpu_profile(rows: Sequence[Mapping], *, top: int = 12, width: int = 380) -> VegaLite:
    """perf-top style bars: ``rows`` of ``symbol`` and ``share`` (0..1), optional ``case``."""
    data = sorted(({"symbol": str(r["symbol"]), "share": float(r["share"]),
                    "case": str(r.get("case", "")), "label": f"{100 * float(r['share']):.1f} %"}
                   for r in rows), key=lambda r: -r["share"])
    symbols = list(dict.fromkeys(r["symbol"] for r in data))[:top]
    data = [r for r in data if r["symbol"] in symbols]
    pos = {"y": channel("symbol", "nominal", sort=symbols, title=None, axis={"labelFont": MONO, "labelLimit": 260}),
           "x": channel("share", "quantitative", title="share of cycles", axis={"format": "%"})}
    if any(r["case"] for r in data):
        pos["yOffset"] = channel("case", "nominal")
        cases = list(dict.fromkeys(r["case"] for r in data))
        rng = [PALETTE["model"] if k == 0 else PALETTE["report"] if c.startswith("report") else PALETTE["other"]
               for k, c in enumerate(cases)]
        pos["color"] = channel("case", "nominal", scale={"domain": cases, "range": rng},
                               legend={"title": None, "orient": "top", "labelLimit": 400})
    return VegaLite({
        "data": {"name": "profile"},
        "layer": [{"mark": {"type": "bar"}, "encoding": {**pos, "tooltip": tooltips("symbol:N", "case:N", "label:N")}},
                  {"mark": {"type": "text", "align": "left", "dx": 3, "fontSize": 10},
                   "encoding": {**pos, "text": channel("label", "nominal")}}],
        "width": width, "height": max(len(symbols), 1) * 22, "datasets": {"profile": data}})


# -- checksum passes ------------------------------------------------------------
def checksum_passes(rows: Sequence[Mapping], *, width: int = 360) -> VegaLite:
    """Software checksum passes by place: ``rows`` of ``place`` (a PASS_* code or a name),
    ``count`` and ``bytes``. No rows means no software checksum was computed."""
    title = "checksum passes in software"
    data = []
    for r in rows:
        place, count = r["place"], int(r["count"])
        name = PASS_NAMES.get(place, str(place)) if isinstance(place, (int, np.integer)) else str(place)
        data.append({"place": name, "count": count, "bytes": int(r["bytes"]),
                     "label": f"{count} pass{'es' if count != 1 else ''}, {_fmt_bytes(r['bytes'])} B"})
    if not any(d["count"] for d in data):
        return message_chart("no software checksum passes: the NICs did them all", width=width,
                             color="#2a7d2a", title=title)
    pos = {"y": channel("place", "nominal", title=None, axis={"labelLimit": 220}),
           "x": channel("bytes", "quantitative", title="bytes checksummed in software")}
    return VegaLite({
        "data": {"name": "passes"}, "title": {"text": title, "anchor": "start"},
        "layer": [{"mark": {"type": "bar", "color": PALETTE["checksum"]},
                   "encoding": {**pos, "tooltip": tooltips("place:N", "count:Q", "bytes:Q")}},
                  {"mark": {"type": "text", "align": "left", "dx": 3, "fontSize": 10},
                   "encoding": {**pos, "text": channel("label", "nominal")}}],
        "width": width, "height": max(len(data), 1) * 26, "datasets": {"passes": data}})
