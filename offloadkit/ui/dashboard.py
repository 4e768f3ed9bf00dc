"""The generic live dashboard: ipywidgets controls, live Vega-Lite views (no altair import).

A report dashboard is a small module that gives :class:`Dashboard` its controls,
a ``compute(values) -> result`` function calling the library, one chart builder
per view (``result -> altair chart``) and a one-line readout.

Contract (exercised by ``tests/test_dashboard*.py``):

- ``controls``: ipywidgets keyed by name; ``charts``: one persistent
  :class:`~offloadkit.ui.live_chart.LiveChart` per view (the browser redraws a change of data
  only without re-embedding), whose ``.chart`` is reassigned on recompute, only when it changed.
- Recomputation is synchronous, in the control's observer: once
  ``dash.controls[name].value = x`` returns, ``dash.result`` and every chart
  reflect ``x``.
- ``error``: the message shown, or None. A ``ValueError`` from the library (an
  invalid combination such as an MSS the MTU cannot carry) is shown in the
  dashboard's message area instead of a traceback; ``result`` then keeps the
  last good result (None if there never was one) and the charts keep showing it.
  Any other exception is shown the same way, prefixed "internal error", and kept
  in ``last_exception``.
- ``texts``: panels of plain HTML text (the tcpdump excerpts): cheap to redraw,
  they wrap and scroll inside their box.
- ``mss_max``: values -> the largest valid MSS. The MSS slider's maximum follows
  it, and a change that lowers it below the MSS carries the MSS down (with a note),
  so no position of the slider is an invalid setting.
- ``busy``: a "recomputing" indicator, shown while the model runs.
"""
from __future__ import annotations

import html
import os
from contextlib import contextmanager
from typing import Any, Callable, Mapping

import ipywidgets as W

from .controls import apply_overrides, choice, control_values, int_slider, toggle
from .live_chart import LiveChart
from .svg import svgs
from .views import VegaLite, message_chart

ChartBuilder = Callable[[Any], VegaLite]


# SVG keeps marks and text in the DOM (queryable by the browser tests, crisp for
# students); our charts are small, so it costs nothing over canvas.
EMBED_OPTIONS = {"renderer": "svg", "actions": False}


def live_chart(chart) -> VegaLite:
    """What to assign to ``LiveChart.chart``: a builder's VegaLite as is; an altair chart
    as a VegaLite of its unvalidated dict (validation belongs in the tests, not the live loop)."""
    return chart if isinstance(chart, VegaLite) else VegaLite(chart.to_dict(validate=False))


STATIC_CHARTS_ENV = "OFFLOADKIT_STATIC_CHARTS"


def static_charts() -> bool:
    """Does a displayed dashboard carry its charts as SVG for stored notebooks? Yes, unless
    ``$OFFLOADKIT_STATIC_CHARTS`` is 0 (Binder's ``start`` sets it: a live session needs no snapshot)."""
    return os.environ.get(STATIC_CHARTS_ENV, "1").strip() != "0"


class Dashboard:
    """Controls + live charts + text panels + a readout + a message area, as one displayable object."""

    def __init__(self, title: str, controls: Mapping[str, W.ValueWidget],
                 compute: Callable[[dict], Any], views: Mapping[str, ChartBuilder], *,
                 texts: Mapping[str, Callable[[Any], str]] | None = None,
                 readout: Callable[[Any], str] | None = None,
                 notes: Callable[[Any], str | None] | None = None,
                 static_html: Callable[[Any], str] | None = None,
                 mss_max: Callable[[dict], int] | None = None,
                 overrides: Mapping[str, Any] | None = None,
                 description: str = "", layout: list[list[str]] | None = None):
        self.title = title
        self.controls: dict[str, W.ValueWidget] = dict(controls)
        self._compute = compute
        self.views: dict[str, ChartBuilder] = dict(views)   # name -> result -> chart
        self.texts: dict[str, Callable[[Any], str]] = dict(texts or {})
        self._readout_fn = readout
        self._notes_fn = notes
        self._static_fn = static_html
        self._mss_max = mss_max
        self.result: Any = None
        self.error: str | None = None
        self.last_exception: BaseException | None = None
        self.recomputes = 0
        self.carried: str | None = None     # the note of the last MSS carried down
        self.readout_text = ""              # the readout as plain text (``readout`` shows it as HTML)

        self.message = W.HTML(value="", layout=W.Layout(min_height="1.5em"))
        self.message.add_class("offloadkit-message")
        self.busy = W.HTML(value="", layout=W.Layout(min_height="1.2em"))
        self.busy.add_class("offloadkit-busy")
        self.readout = W.HTML(value="", layout=W.Layout(max_width="100%"))
        self.readout.add_class("offloadkit-readout")
        self.charts: dict[str, LiveChart] = {
            name: LiveChart(message_chart("no result yet"), embed_options=dict(EMBED_OPTIONS))
            for name in self.views}
        for name, chart in self.charts.items():
            chart.add_class(f"offloadkit-chart-{name}")
        self.text_panels: dict[str, W.HTML] = {
            name: W.HTML(value="", layout=W.Layout(max_width="100%", overflow="auto")) for name in self.texts}
        for name, panel in self.text_panels.items():
            panel.add_class(f"offloadkit-text-{name}")
        for name, ctl in self.controls.items():   # stable hooks for the browser tests
            ctl.add_class(f"offloadkit-control-{name}")
        self._layout = layout or [[name] for name in [*self.texts, *self.views]]
        self._widget: W.VBox | None = None
        self._description = description
        if overrides:
            with self._held():
                self._follow_mss(strict=False)
                apply_overrides(self.controls, {k: v for k, v in overrides.items() if k != "mss"})
                self._follow_mss(strict=False)
                apply_overrides(self.controls, {k: v for k, v in overrides.items() if k == "mss"})
        self._follow_mss(strict=True)
        self.recompute()
        for ctl in self.controls.values():
            ctl.observe(self._on_change, names="value")

    # -- state --------------------------------------------------------------
    @property
    def values(self) -> dict[str, Any]:
        """The controls' current values, by name."""
        return {name: ctl.value for name, ctl in self.controls.items()}

    def set(self, **values) -> None:
        """Set several controls, recomputing once at the end."""
        self.carried = None
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(f"no control {sorted(unknown)}; this dashboard has {sorted(self.controls)}")
        with self._held():
            for name, value in values.items():
                if name != "mss":
                    self.controls[name].value = value
            self._follow_mss(strict=False)
            if "mss" in values:
                self.controls["mss"].value = values["mss"]
        self.recompute()

    @contextmanager
    def _held(self):
        self._holding = True
        try:
            yield
        finally:
            self._holding = False

    _holding = False

    def _follow_mss(self, strict: bool) -> None:
        """Set the MSS slider's maximum to what the current MTU carries; carry the MSS down to it.
        ``strict``: an MSS above the maximum is a ValueError (a bad override), not carried."""
        if self._mss_max is None or "mss" not in self.controls:
            return
        ctl = self.controls["mss"]
        top = int(self._mss_max(self.values))
        if top < ctl.min:
            raise ValueError(f"this MTU carries at most {top} payload bytes per segment, below the MSS slider's "
                             f"minimum {ctl.min}; raise the MTU.")
        if strict and ctl.value > top:
            raise ValueError(f"mss={ctl.value} does not fit: the MTU carries at most {top} payload bytes per "
                             f"segment; give mss <= {top} or a larger mtu.")
        was = ctl.value
        with self._held():
            if top < was:
                ctl.value = top
                self.carried = f"MSS carried down from {was} to {top}: the most this MTU carries."
            ctl.max = top

    def _on_change(self, change) -> None:
        if self._holding:
            return
        self.carried = None
        if change["owner"] is not self.controls.get("mss"):
            self._follow_mss(strict=False)
        self.recompute()

    def recompute(self) -> None:
        """Run the model on the current values and redraw every view."""
        self.recomputes += 1
        self.busy.value = "<span style='color:#555'>&#8987; recomputing&#8230;</span>"
        try:
            self._recompute()
        finally:
            self.busy.value = ""

    def _recompute(self) -> None:
        try:
            result = self._compute(self.values)
            charts = {name: build(result) for name, build in self.views.items()}
            texts = {name: build(result) for name, build in self.texts.items()}
            readout = self._readout_fn(result) if self._readout_fn else ""
            notes = self._notes_fn(result) if self._notes_fn else None
        except ValueError as e:
            self._show_error(str(e), e)
            return
        except Exception as e:  # a bug, not a bad setting: still no traceback for the student
            self._show_error(f"internal error ({type(e).__name__}): {e}", e)
            return
        self.result, self.error, self.last_exception = result, None, None
        for name, chart in charts.items():
            chart = live_chart(chart)
            if chart != self.charts[name].chart:
                self.charts[name].chart = chart
        for name, text in texts.items():
            if self.text_panels[name].value != text:
                self.text_panels[name].value = text
        self.readout_text = readout
        self.readout.value = f"<div style='white-space:normal;overflow-wrap:anywhere'>{html.escape(readout)}</div>"
        notes = " ".join(n for n in (self.carried, notes) if n)
        self.message.value = (f'<div class="offloadkit-note" style="color:#555">{html.escape(notes)}</div>'
                              if notes else "")

    def _show_error(self, message: str, exc: BaseException) -> None:
        self.error, self.last_exception = message, exc
        kept = " The charts still show the last valid setting." if self.result is not None else ""
        self.message.value = ('<div class="offloadkit-error" style="color:#b00020"><b>'
                              f'&#9888; {html.escape(message)}</b>{kept}</div>')

    # -- display ------------------------------------------------------------
    def _panel(self, name: str) -> W.Widget:
        return self.text_panels[name] if name in self.text_panels else self.charts[name]

    @property
    def widget(self) -> W.VBox:
        """The whole dashboard as one ipywidgets VBox (built on first use)."""
        if self._widget is None:
            rows = [W.HBox([self._panel(n) for n in row if n in self.charts or n in self.text_panels],
                           layout=W.Layout(flex_flow="row wrap", overflow="auto", max_width="100%"))
                    for row in self._layout]
            head = [W.HTML(f"<h3 style='margin:0'>{html.escape(self.title)}</h3>")]
            if self._description:
                head.append(W.HTML(self._description, layout=W.Layout(max_width="100%")))
            box = W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap", max_width="100%"))
            self._widget = W.VBox([*head, box, self.busy, self.message, self.readout, *rows],
                                  layout=W.Layout(max_width="100%", overflow="hidden"))
            self._widget.add_class("offloadkit-dashboard")
        return self._widget

    def chart_svgs(self) -> dict[str, str]:
        """Every view as it is drawn now, as inline SVG (vl-convert in a child process, no browser)."""
        return svgs({name: chart.spec for name, chart in self.charts.items()})

    def static_html(self, charts: bool = True) -> str:
        """A kernel-free snapshot (title, message, readout, extra such as the tcpdump excerpts,
        every chart as inline SVG): what a stored notebook shows where widgets cannot render
        (the docs site, GitHub, nbviewer without widget state). ``charts=False``: no SVGs (a live
        session needs none; rendering them starts a child process, ``ui.svg``)."""
        extra = self._static_fn(self.result) if self._static_fn and self.result is not None else ""
        drawn = self.chart_svgs().items() if charts else ()
        charts = "".join(f"<div class='offloadkit-static-chart offloadkit-static-{html.escape(name)}' "
                         f"style='overflow-x:auto;max-width:100%'>{svg}</div>" for name, svg in drawn)
        return (f"<div class='offloadkit-static'><b>{html.escape(self.title)}</b> "
                f"<i>(live dashboard: run the notebook to use it)</i>{self.message.value}"
                f"{self.readout.value}{extra}{charts}</div>")

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)
        bundle["text/html"] = self.static_html(charts=static_charts())
        return bundle

    def __repr__(self) -> str:
        state = f"error={self.error!r}" if self.error else "ok"
        return f"<Dashboard {self.title!r}: {len(self.controls)} controls, {len(self.charts)} charts, {state}>"


__all__ = ["Dashboard", "EMBED_OPTIONS", "live_chart", "int_slider", "toggle", "choice", "control_values",
           "apply_overrides"]
