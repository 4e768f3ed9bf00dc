""""Where does it break?": a sweep computed on demand, drawn as a heatmap.

A :class:`SweepPanel` holds a Run button, a progress bar, optional toggles (fixed
values of the sweep, e.g. TSO and GRO) and one persistent LiveChart. Pressing
Run calls ``offloadkit.sweep`` (on the embedded dask cluster by default) and
redraws the heatmap of the chosen figure over the grid's two names. The
notebooks' panels: :func:`panel` ``("intro")`` (MSS x path MTU), ``("rtl8139")``
(MSS clamp x PPPoE MTU), ``("splice")`` (sessions x cache size).
"""
from __future__ import annotations

import functools
import html
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import ipywidgets as W

from ..sim.scenario import Scenario
from ..sweep import sweep
from .dashboard import EMBED_OPTIONS, Dashboard, live_chart, toggle
from .live_chart import LiveChart
from .views import VegaLite, message_chart


@dataclass(frozen=True)
class Measure:
    """The figure a heatmap colours by: a column, a scale to its unit, a title."""

    column: str
    scale: float
    title: str
    fmt: str = ".3g"


GOODPUT_MBPS = Measure("goodput_bps", 1e-6, "goodput, Mbit/s")
GOODPUT_KBPS = Measure("goodput_bps", 1e-3, "goodput, kbit/s")
GOODPUT_GBPS = Measure("goodput_bps", 1e-9, "goodput, Gbit/s")


def heatmap(rows: Sequence[Mapping], x: str, y: str, measure: Measure, *, x_title: str | None = None,
            y_title: str | None = None, tips: Sequence[str] = (), width: int = 380) -> VegaLite:
    """Cells over ``x`` x ``y`` coloured (and labelled) by ``measure``; NaN cells are left blank."""
    values = []
    for r in rows:
        v = r[measure.column]
        cell = {"x": r[x], "y": r[y], "v": None if v is None or (isinstance(v, float) and math.isnan(v))
                else v * measure.scale}
        cell.update({t: r[t] for t in tips})
        values.append(cell)
    enc = {"x": {"field": "x", "type": "ordinal", "title": x_title or x},
           "y": {"field": "y", "type": "ordinal", "title": y_title or y, "sort": "descending"}}
    tooltip = [{"field": "x", "type": "ordinal", "title": x_title or x},
               {"field": "y", "type": "ordinal", "title": y_title or y},
               {"field": "v", "type": "quantitative", "title": measure.title, "format": measure.fmt}]
    tooltip += [{"field": t, "type": "nominal"} for t in tips]
    return VegaLite({
        "data": {"values": values}, "width": width, "height": 24 * len({r[y] for r in rows}) + 10,
        "encoding": enc,
        "layer": [
            {"mark": {"type": "rect"},
             "encoding": {"color": {"field": "v", "type": "quantitative", "title": measure.title,
                                    "scale": {"scheme": "viridis", "zero": True}},
                          "tooltip": tooltip}},
            {"mark": {"type": "text", "fontSize": 10},
             "encoding": {"text": {"field": "v", "type": "quantitative", "format": measure.fmt},
                          "color": {"value": "white"}}},
        ]})


class SweepPanel:
    """Button + progress bar + toggles + heatmap; ``run()`` is what the button does."""

    def __init__(self, title: str, base, grid: Mapping[str, Sequence], x: str, y: str, measure: Measure, *,
                 toggles: Mapping[str, W.Checkbox] | None = None, scheduler=None, x_title: str | None = None,
                 y_title: str | None = None, tips: Sequence[str] = (), description: str = ""):
        self.title, self.base, self.grid = title, base, dict(grid)
        self.x, self.y, self.measure, self.tips = x, y, measure, tuple(tips)
        self.x_title, self.y_title = x_title, y_title
        self.toggles = dict(toggles or {})
        self.scheduler = scheduler
        self.rows = None            # the last sweep's DataFrame
        self.error: str | None = None
        n = self.n_points
        self.button = W.Button(description="Run sweep", icon="play", button_style="primary")
        self.button.add_class("offloadkit-sweep-run")
        self.progress = W.IntProgress(value=0, min=0, max=n, description=f"0/{n}",
                                      layout=W.Layout(width="320px"))
        self.status = W.HTML(value=f"{n} points; press <b>Run sweep</b> to compute them.")
        self.status.add_class("offloadkit-sweep-status")
        self.chart = LiveChart(message_chart("not computed yet: press Run sweep"), embed_options=dict(EMBED_OPTIONS))
        self.chart.add_class("offloadkit-sweep-chart")
        self.button.on_click(lambda _b: self.run())
        self._description = description
        self._widget: W.VBox | None = None

    def points_grid(self) -> dict:
        """The grid with each toggle as a one-value dimension."""
        return {**self.grid, **{name: [bool(t.value)] for name, t in self.toggles.items()}}

    @property
    def n_points(self) -> int:
        return math.prod(len(v) for v in self.points_grid().values())

    def _on_progress(self, done: int, total: int) -> None:
        self.progress.max, self.progress.value = total, done
        self.progress.description = f"{done}/{total}"

    def run(self):
        """Sweep the grid at the toggles' values and redraw; a ValueError is shown, not raised."""
        self.button.disabled = True
        self.progress.value = 0
        self.status.value = "running ..."
        try:
            df = sweep(self.base, self.points_grid(), self.scheduler, progress=self._on_progress)
        except (ValueError, ImportError) as e:        # a bad grid, or no dask: pip install 'offloadkit[dask]'
            self.error = str(e) if isinstance(e, ValueError) else \
                f"the sweep needs dask ({e.name} is missing): pip install 'offloadkit[dask]'"
            self.status.value = f'<span style="color:#b00020">&#9888; {html.escape(self.error)}</span>'
            return None
        finally:
            self.button.disabled = False
        self.rows, self.error = df, None
        self.chart.chart = live_chart(heatmap(df.to_dict("records"), self.x, self.y, self.measure,
                                              x_title=self.x_title, y_title=self.y_title, tips=self.tips))
        self.status.value = f"{len(df)} points on {df.worker.nunique()} worker(s)"
        return df

    @property
    def widget(self) -> W.VBox:
        if self._widget is None:
            head = [W.HTML(f"<h4 style='margin:0'>{html.escape(self.title)}</h4>")]
            if self._description:
                head.append(W.HTML(self._description))
            row = W.HBox([self.button, *self.toggles.values(), self.progress])
            self._widget = W.VBox([*head, row, self.status, self.chart])
            self._widget.add_class("offloadkit-sweep")
        return self._widget

    @property
    def charts(self) -> dict:
        return {"heatmap": self.chart}

    chart_svgs = Dashboard.chart_svgs                 # the dashboards' SVG rendering and mime bundle, as they are
    _repr_mimebundle_ = Dashboard._repr_mimebundle_

    def static_html(self, charts: bool = True) -> str:
        """A kernel-free snapshot: title, status and the heatmap as drawn now, as inline SVG
        (``charts=False``: without it, as ``Dashboard.static_html``)."""
        svg = (f"<div class='offloadkit-static-chart' style='overflow-x:auto;max-width:100%'>"
               f"{self.chart_svgs()['heatmap']}</div>") if charts else ""
        return (f"<div class='offloadkit-static'><b>{html.escape(self.title)}</b> "
                f"<i>(live sweep: run the notebook and press Run sweep)</i><div>{self.status.value}</div>"
                f"{svg}</div>")

    def __repr__(self) -> str:
        return f"<SweepPanel {self.title!r}: {self.n_points} points>"


# -- the notebooks' panels ------------------------------------------------------------
def intro(scheduler=None) -> SweepPanel:
    """00: goodput over MSS x path MTU (no ICMP: oversize packets vanish), TSO and GRO toggles."""
    base = functools.partial(Scenario.simple, rate_bps=100_000_000, rtt_ns=20_000_000, bytes_per_flow=1_000_000)
    return SweepPanel("Where does it break? Goodput over MSS x path MTU", base,
                      {"mss": [536, 900, 1200, 1380, 1440, 1448], "path_mtu": [1280, 1400, 1420, 1480, 1492, 1500]},
                      "mss", "path_mtu", GOODPUT_MBPS, toggles={"tso": toggle("TSO/GSO", True),
                                                                 "gro": toggle("GRO", True)},
                      scheduler=scheduler, x_title="MSS, bytes", y_title="path MTU, bytes",
                      tips=("retransmits", "drops"),
                      description="1 MB over 100 Mbit/s, 20 ms; the hop silently drops packets over its MTU.")


def rtl8139(scheduler=None) -> SweepPanel:
    """01: the report's download over MSS clamp x PPPoE MTU."""
    return SweepPanel("Where does it break? MSS clamp x PPPoE MTU", ("rtl8139", "broken"),
                      {"mss_clamp": [1360, 1400, 1440, 1452, 1460], "path_mtu": [1440, 1460, 1480, 1492, 1500]},
                      "mss_clamp", "path_mtu", GOODPUT_KBPS, toggles={"tso": toggle("guest TSO", True)},
                      scheduler=scheduler, x_title="MSS clamp, bytes", y_title="PPPoE path MTU, bytes",
                      tips=("retransmits", "rtos"),
                      description="Report 000's guest behind the 8139cp, at each clamp and PPPoE MTU.")


def splice(scheduler=None) -> SweepPanel:
    """04: the splice proxy's rate over sessions x last-level cache size."""
    return SweepPanel("Where does it break? Sessions x cache size", ("splice", "broken"),
                      {"sessions": [200, 400, 600, 800, 1000, 1400, 2000],
                       "cache_bytes": [2e6, 4e6, 6e6, 8e6, 12e6, 16e6]},
                      "sessions", "cache_bytes", GOODPUT_GBPS, toggles={}, scheduler=scheduler,
                      x_title="sessions", y_title="cache, bytes", tips=("bottleneck", "cpu"),
                      description="Report 003's proxy: where the sessions' working set overflows the cache.")


PANELS: dict[str, Callable[..., SweepPanel]] = {"intro": intro, "rtl8139": rtl8139, "splice": splice}


def panel(name: str, scheduler=None) -> SweepPanel:
    """The "where does it break" panel of a notebook: ``"intro"``, ``"rtl8139"`` or ``"splice"``."""
    if name not in PANELS:
        raise ValueError(f"no sweep panel {name!r}; available: {', '.join(PANELS)}")
    return PANELS[name](scheduler)


