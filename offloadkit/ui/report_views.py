"""Chart builders of the report dashboards (the generic ones live in ``views``).

Same rules as ``views``: plain data in, a Vega-Lite dict wrapped in
``VegaLite`` out, small datasets, no altair object API in the live loop.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from .. import codes
from ..trace import Trace
from .views import SIZE_TITLES, VegaLite, channel, fate_color, message_chart, tooltips


def rate_comparison(rows: Sequence[Mapping], unit: str, *, log: bool = False, width: int = 420,
                    title: str | None = None) -> VegaLite:
    """The model's rates next to the report's measurements, in the report's unit.

    ``rows``: ``case``, ``source`` ("model" or "report"), ``value``, ``lo``/``hi``
    (a reported range; equal to ``value`` otherwise) and ``label`` (the text shown).
    A case may have only a model row (your settings) or only a report row.
    ``log``: a log axis, for rates that differ by orders of magnitude.
    """
    data = [{"case": str(r["case"]), "source": str(r["source"]), "value": float(r["value"]),
             "lo": float(r["lo"]), "hi": float(r["hi"]), "label": str(r["label"])}
            for r in rows if r.get("value") is not None]
    if not data:
        return message_chart("no rates to show", width=width)
    cases = list(dict.fromkeys(r["case"] for r in data))
    if log:   # bars need a baseline inside a log scale's domain: a decade below the smallest value
        if min(r["lo"] for r in data) <= 0:
            raise ValueError("a log-scale rate chart needs positive rates")
        lo_dom = 10.0 ** np.floor(np.log10(min(r["lo"] for r in data)))
        hi_dom = 10.0 ** np.ceil(np.log10(max(r["hi"] for r in data) * 1.5))
        scale = {"type": "log", "domain": [float(lo_dom), float(hi_dom)]}
    else:
        lo_dom, scale = 0.0, {"zero": True}
    for r in data:
        r["base"] = float(lo_dom)
    x = channel("value", "quantitative", title=unit, scale=scale, **({"axis": {"format": "~g"}} if log else {}))
    pos = {"y": channel("case", "nominal", sort=cases, title=None, axis={"labelLimit": 260}),
           "yOffset": channel("source", "nominal", sort=["model", "report"])}
    color = fate_color("source", ["model", "report"])
    layers = [
        {"mark": {"type": "bar"}, "encoding": {**pos, "x": x, "x2": {"field": "base"}, "color": color,
                                               "tooltip": tooltips("case:N", "source:N", "label:N")}},
        {"transform": [{"filter": "datum.lo != datum.hi"}],
         "mark": {"type": "bar", "height": 3, "color": "#333"},
         "encoding": {**pos, "x": channel("lo", "quantitative", scale=scale), "x2": {"field": "hi"}}},
        {"mark": {"type": "text", "align": "left", "dx": 4, "fontSize": 10},
         "encoding": {**pos, "x": channel("hi", "quantitative", scale=scale), "text": channel("label", "nominal")}},
    ]
    spec = {"data": {"name": "rates"}, "layer": layers, "width": width,
            "height": max(len(cases), 1) * 40, "datasets": {"rates": data}}
    if title:
        spec["title"] = {"text": title, "anchor": "start"}
    return VegaLite(spec)


def size_counts_chart(trace: Trace | Mapping[str, Trace], points: Sequence[str], *, measure: str = "payload",
                      top: int = 8, width: int = 560, height: int = 180, title: str | None = None) -> VegaLite:
    """Packets per size at each capture point over a whole run (counted with numpy).

    ``trace``: every point in one Trace, or {point: its packets} (no whole-run Trace built).
    The ``top`` most frequent sizes per point are shown; dropped packets are red.
    """
    if measure not in SIZE_TITLES:
        raise ValueError(f"measure must be one of {sorted(SIZE_TITLES)}, not {measure!r}")
    rows = []
    column = {"payload": "payload_len", "ip_len": "ip_len", "wire": "wire_len"}[measure]
    for p in points:
        t = trace[p] if isinstance(trace, Mapping) else trace
        sel = (t.direction == 0) & (t.payload_len > 0)          # column masks: no Trace copies
        if not isinstance(trace, Mapping):
            sel &= t.point == t.points.index(p)
        values = getattr(t, column)[sel]
        fate = np.where(t.drop[sel] != codes.DROP_NONE, 1, 0)
        key = values.astype(np.int64) * 2 + fate
        k, c = np.unique(key, return_counts=True)
        order = np.argsort(-c, kind="stable")[:top]
        for j in order:
            rows.append({"point": p, "size": int(k[j] // 2), "fate": "dropped" if k[j] % 2 else "delivered",
                         "count": int(c[j])})
    if not rows:
        return message_chart("no data packets", width=width)
    spec = {"data": {"name": "sizes"},
            "layer": [{"mark": {"type": "bar"},
                       "encoding": {"x": channel("size", "ordinal", title=SIZE_TITLES[measure], axis={"labelAngle": 0}),
                                    "y": channel("count", "quantitative", title="packets (linear axis)"),
                                    "color": fate_color("fate", ["delivered", "dropped"]),
                                    "tooltip": tooltips("point:N", "size:O", "fate:N", "count:Q")}},
                      {"mark": {"type": "text", "dy": -5, "fontSize": 9},
                       "encoding": {"x": channel("size", "ordinal"), "y": channel("count", "quantitative"),
                                    "text": channel("count", "quantitative")}}],
            "datasets": {"sizes": rows}}
    facet = {"facet": {"column": channel("point", "nominal", sort=list(points), title=None,
                                    header={"labelFontSize": 12})},
             "spec": {**spec, "width": max(width // max(len(points), 1) - 20, 90), "height": height},
             "data": spec["data"], "datasets": spec["datasets"], "resolve": {"scale": {"x": "independent"}}}
    del facet["spec"]["data"], facet["spec"]["datasets"]
    if title:
        facet["title"] = {"text": title, "anchor": "start"}
    return VegaLite(facet)
