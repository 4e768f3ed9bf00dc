"""Notebook 06: the doctor on a capture of your own, its findings shown with their evidence as charts.

:func:`explore` diagnoses one capture (a path, the bytes of an upload, or the name
of a stored capture such as ``"ts-mss536/rcv"``) and returns a
:class:`CaptureReport`: the findings, three charts (segment sizes per direction
and capture side, a time-sequence graph with retransmissions, how many wire
segments each captured packet stands for: where segmentation or aggregation
happened) and the report notebook whose pathology matches. It displays as HTML
with the charts as inline SVG, so a stored notebook reads without a kernel.
:func:`explorer` adds a file upload and a picker of ``data/captures``.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..doctor import Diagnosis, diagnose_file
from ..resources import data_dir
from ..trace import Trace
from .svg import svgs
from .views import VegaLite, message_chart, time_sequence


def _f(field: str, kind: str, **extra) -> dict:
    return {"field": field, "type": kind, **extra}


SIDES = {"sender": "capture at the data sender", "receiver": "capture at the data receiver",
         "unknown": "capture side unknown"}
DIRECTIONS = {0: "data", 1: "ACKs / reverse"}
SHAPE_COLORS = {"one segment": "#4c78a8", "super-packet (before segmentation)": "#f58518",
                "aggregate (after GRO/LRO)": "#54a24b"}

# finding kind -> (notebook, why it matches); the first kind found wins
MATCHES = [
    ("mss-mismatch", "01-rtl8139-tso-mss.ipynb",
     "segments larger than the peer's MSS allows: a NIC cutting TSO packets at its own size (report 000)"),
    ("black-hole", "00-offloads-101.ipynb",
     "segments lost at the same size again and again: a path-MTU black hole (section 6.2; report 000 too)"),
    ("no-aggregation", "03-vxlan-gro.ipynb",
     "a bulk flow arriving one segment per packet where GRO could merge (report 002)"),
    ("checksum-corruption", "00-offloads-101.ipynb",
     "wrong checksums on received packets: what checksum offload does and does not explain (section 6.3)"),
    ("retransmissions", "02-mpls-gso.ipynb",
     "a large share of retransmitted bytes: how TCP limps on when packets are dropped (report 001)"),
    ("aggregates", "00-offloads-101.ipynb",
     "packets larger than the link: the capture was taken after GRO (sections 3-4 and 6.5)"),
    ("super-packets", "00-offloads-101.ipynb",
     "packets larger than the link: the capture was taken above TSO/GSO (sections 3-4)"),
]


def stored_captures() -> list[str]:
    """The captures shipped in ``data/captures``, as ``"<run>/<point>"`` names."""
    root = data_dir() / "captures"
    return sorted(f"{p.parent.name}/{p.stem}" for p in root.glob("*/*.pcap*"))


def resolve(source) -> tuple[object, str]:
    """(what ``diagnose_file`` reads, a display name) for a path, bytes or a stored capture name."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source), "uploaded capture"
    name = str(source)
    if name in stored_captures():
        path = next((data_dir() / "captures" / name).parent.glob(f"{Path(name).name}.pcap*"))
        return path, name
    path = Path(name)
    if not path.is_file():
        raise ValueError(f"{name}: no such file; give a pcap/pcapng path or one of: {', '.join(stored_captures())}")
    return path, path.name


@dataclass(eq=False)
class CaptureReport:
    """A capture's diagnosis, its evidence charts and the matching notebook."""

    name: str
    diagnosis: Diagnosis
    trace: Trace
    charts: dict
    match: tuple[str, str] | None

    def __repr__(self) -> str:
        return (f"<CaptureReport {self.name}: {self.diagnosis.packets} packets, findings "
                f"{', '.join(sorted(self.diagnosis.kinds()))}>")

    def _repr_html_(self) -> str:
        d = self.diagnosis
        rows = "".join(f"<li><b>{html.escape(f.severity)}</b> <code>{html.escape(f.kind)}</code>: "
                       f"{html.escape(f.message)}</li>" for f in d.findings)
        match = (f"<p><b>Matching notebook:</b> <code>{html.escape(self.match[0])}</code>: "
                 f"{html.escape(self.match[1])}.</p>" if self.match else
                 "<p>No report notebook matches these findings: the capture looks healthy.</p>")
        drawn = "".join(f"<div style='overflow-x:auto;max-width:100%'>{svg}</div>"
                        for svg in svgs({k: c.to_dict() for k, c in self.charts.items()}).values())
        return (f"<div class='offloadkit-capture'><h4>{html.escape(self.name)}: {d.packets} TCP packets, "
                f"link MTU {d.mtu} ({html.escape(d.mtu_from)})</h4><ul>{rows}</ul>{match}{drawn}</div>")


def side_labels(d: Diagnosis) -> dict[int, str]:
    """Flow number -> where the doctor places the capture for that flow."""
    return {int(r["flow"]): SIDES.get(str(r.get("side", "unknown")), str(r.get("side"))) for r in d.flows}


def size_chart(t: Trace, d: Diagnosis, top: int = 24) -> VegaLite:
    """Packets per payload size, per direction (colour) and capture side (column)."""
    if len(t) == 0:
        return message_chart("no TCP packets")
    sides = side_labels(d)
    keep = t.payload_len > 0
    counts: dict[tuple[str, str, int], int] = {}
    for flow, dirn, size in zip(t.flow[keep], t.direction[keep], t.payload_len[keep]):
        key = (sides.get(int(flow), SIDES["unknown"]), DIRECTIONS.get(int(dirn), "other"), int(size))
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return message_chart("no packet carries payload")
    common = sorted(counts.items(), key=lambda kv: -kv[1])[:top]
    rows = [{"side": s, "direction": dn, "size": sz, "count": c} for (s, dn, sz), c in common]
    return VegaLite({
        "data": {"name": "sizes"}, "mark": {"type": "bar"}, "datasets": {"sizes": rows},
        "encoding": {"x": _f("size", "ordinal", title="TCP payload (bytes)", sort="ascending"),
                     "y": _f("count", "quantitative", title="packets"),
                     "color": _f("direction", "nominal", scale={"domain": list(DIRECTIONS.values()),
                                                                "range": ["#4c78a8", "#9d9d9d"]},
                                 legend={"title": None, "orient": "top"}),
                     "column": _f("side", "nominal", title=None),
                     "tooltip": [_f("side", "nominal"), _f("direction", "nominal"), _f("size", "ordinal"),
                                 _f("count", "quantitative")]},
        "width": 360, "height": 180, "title": {"text": "segment sizes per direction and capture side",
                                               "anchor": "start"}})


def segment_size(d: Diagnosis) -> int:
    """The wire segment size the doctor found (super-packets/aggregates evidence), or 0."""
    for f in d.findings:
        g = f.evidence.get("segment_size") if isinstance(f.evidence, dict) else None
        if g:
            return int(g)
    return 0


def shape_chart(t: Trace, d: Diagnosis, max_points: int = 2000) -> VegaLite:
    """Wire segments per captured data packet over time: above 1 is a super-packet or an aggregate."""
    g = segment_size(d)
    data = t[(t.direction == 0) & (t.payload_len > 0)]
    if len(data) == 0 or g == 0:
        return message_chart("every data packet is one segment: no segmentation or aggregation above this "
                             "capture point" if len(data) else "no data packets", width=520)
    sides = side_labels(d)
    segs = -(-data.payload_len.astype(np.int64) // g)
    at_sender = np.array([sides.get(int(f)) == SIDES["sender"] for f in data.flow])
    shape = np.where(segs <= 1, "one segment", np.where(at_sender, "super-packet (before segmentation)",
                                                        "aggregate (after GRO/LRO)"))
    t_ms = (data.time_ns - data.time_ns.min()) / 1e6
    step = max(1, int(np.ceil(len(data) / max_points)))
    rows = [{"t_ms": float(t_ms[i]), "segments": int(segs[i]), "shape": str(shape[i]),
             "payload": int(data.payload_len[i])} for i in range(0, len(data), step)]
    return VegaLite({
        "data": {"name": "shape"}, "mark": {"type": "point", "filled": True}, "datasets": {"shape": rows},
        "encoding": {"x": _f("t_ms", "quantitative", title="time (ms)"),
                     "y": _f("segments", "quantitative", title=f"wire segments of {g} bytes"),
                     "color": _f("shape", "nominal", scale={"domain": list(SHAPE_COLORS),
                                                            "range": list(SHAPE_COLORS.values())},
                                 legend={"title": None, "orient": "top"}),
                     "tooltip": [_f("t_ms", "quantitative"), _f("payload", "quantitative"),
                                 _f("segments", "quantitative"), _f("shape", "nominal")]},
        "width": 520, "height": 180,
        "title": {"text": "where segmentation or aggregation happened", "anchor": "start"}})


def busiest_flow(t: Trace) -> Trace:
    """The packets of the flow carrying the most payload."""
    if len(t) == 0:
        return t
    flows, inv = np.unique(t.flow, return_inverse=True)
    volume = np.bincount(inv, weights=t.payload_len.astype(np.float64))
    return t[t.flow == flows[int(volume.argmax())]]


def matching_notebook(d: Diagnosis) -> tuple[str, str] | None:
    """The report notebook whose pathology the findings show (first match in MATCHES)."""
    kinds = d.kinds()
    return next(((nb, why) for kind, nb, why in MATCHES if kind in kinds), None)


def explore(source) -> CaptureReport:
    """Diagnose ``source`` (a path, an upload's bytes, or a stored capture name) and chart the evidence."""
    what, name = resolve(source)
    d = diagnose_file(what)
    t = d.trace if d.trace is not None else Trace.empty()
    charts = {"sizes": size_chart(t, d), "time-sequence": time_sequence(busiest_flow(t), None, width=520, height=220),
              "shape": shape_chart(t, d)}
    return CaptureReport(name, d, t, charts, matching_notebook(d))


class CaptureExplorer:
    """The upload + picker widget; displayed, it also carries the current report as static HTML."""

    def __init__(self, initial: str = "ts-mss536/rcv"):
        import ipywidgets as W
        self.pick = W.Dropdown(options=stored_captures(), value=initial, description="stored capture",
                               style={"description_width": "initial"})
        self.upload = W.FileUpload(accept=".pcap,.pcapng,.cap", multiple=False, description="upload a pcap/pcapng")
        self.view = W.HTML(layout=W.Layout(overflow="auto", max_width="100%"))
        self.report: CaptureReport | None = None
        self.error: str | None = None
        self.pick.observe(lambda ch: self.show(ch["new"]), names="value")
        self.upload.observe(self._on_upload, names="value")
        self.widget = W.VBox([W.HBox([self.pick, self.upload]), self.view])
        self.show(initial)

    def _on_upload(self, change) -> None:
        if change["new"]:
            self.show(bytes(change["new"][0]["content"]))

    def show(self, source) -> None:
        """Diagnose ``source`` and show its report (a bad file: one line saying what to do)."""
        try:
            self.report, self.error = explore(source), None
            self.view.value = self.report._repr_html_()
        except ValueError as e:
            self.error = f"cannot read that capture: {e}. Upload a pcap or pcapng file, or pick a stored capture."
            self.view.value = f"<p style='color:#b00020'>{html.escape(self.error)}</p>"

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = f"<CaptureExplorer: {self.report.name if self.report else self.error}>"
        bundle["text/html"] = self.view.value
        return bundle


def explorer(initial: str = "ts-mss536/rcv") -> CaptureExplorer:
    """A file upload and a picker of the stored captures; the report of the chosen one below them."""
    return CaptureExplorer(initial)
