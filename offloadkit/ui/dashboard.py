"""The generic live dashboard: ipywidgets controls, altair JupyterChart views.

A report dashboard is a small module that gives :class:`Dashboard` its controls,
a ``compute(values) -> result`` function calling the library, one chart builder
per view (``result -> altair chart``) and a one-line readout.

Contract (exercised by ``tests/test_dashboard*.py``):

- ``controls``: ipywidgets keyed by name; ``charts``: one persistent
  ``altair.JupyterChart`` per view, whose ``.chart`` is reassigned on recompute.
- Recomputation is synchronous, in the control's observer: once
  ``dash.controls[name].value = x`` returns, ``dash.result`` and every chart
  reflect ``x``.
- ``error``: the message shown, or None. A ``ValueError`` from the library (an
  invalid combination such as an MSS the MTU cannot carry) is shown in the
  dashboard's message area instead of a traceback; ``result`` then keeps the
  last good result (None if there never was one) and the charts keep showing it.
  Any other exception is shown the same way, prefixed "internal error", and kept
  in ``last_exception``.
"""
from __future__ import annotations

import html
from contextlib import contextmanager
from typing import Any, Callable, Mapping

import altair as alt
import ipywidgets as W

from .offline import enable_offline
from .views import VegaLite, message_chart

ChartBuilder = Callable[[Any], "alt.TopLevelMixin"]


# SVG keeps marks and text in the DOM (queryable by the browser tests, crisp for
# students); our charts are small, so it costs nothing over canvas.
EMBED_OPTIONS = {"renderer": "svg", "actions": False}


def live_chart(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """What to assign to ``JupyterChart.chart``: a builder's VegaLite as is; any other altair
    chart as a VegaLite of its unvalidated dict (validation belongs in the tests, not the live loop)."""
    return chart if isinstance(chart, VegaLite) else VegaLite(chart.to_dict(validate=False))


class Dashboard:
    """Controls + live charts + a readout + a message area, as one displayable object."""

    def __init__(self, title: str, controls: Mapping[str, W.ValueWidget],
                 compute: Callable[[dict], Any], views: Mapping[str, ChartBuilder], *,
                 readout: Callable[[Any], str] | None = None,
                 notes: Callable[[Any], str | None] | None = None,
                 static_html: Callable[[Any], str] | None = None,
                 description: str = "", layout: list[list[str]] | None = None):
        enable_offline()
        self.title = title
        self.controls: dict[str, W.ValueWidget] = dict(controls)
        self._compute = compute
        self.views: dict[str, ChartBuilder] = dict(views)   # name -> result -> chart
        self._readout_fn = readout
        self._notes_fn = notes
        self._static_fn = static_html
        self.result: Any = None
        self.error: str | None = None
        self.last_exception: BaseException | None = None
        self.recomputes = 0

        self.message = W.HTML(value="", layout=W.Layout(min_height="1.5em"))
        self.message.add_class("offloadkit-message")
        self.readout = W.Label(value="")
        self.readout.add_class("offloadkit-readout")
        self.charts: dict[str, alt.JupyterChart] = {
            name: alt.JupyterChart(message_chart("no result yet"), embed_options=dict(EMBED_OPTIONS))
            for name in self.views}
        for name, chart in self.charts.items():
            chart.add_class(f"offloadkit-chart-{name}")
        for name, ctl in self.controls.items():   # stable hooks for the browser tests
            ctl.add_class(f"offloadkit-control-{name}")
        self._layout = layout or [[name] for name in self.views]
        self._widget: W.VBox | None = None
        self._description = description
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
        unknown = set(values) - set(self.controls)
        if unknown:
            raise ValueError(f"no control {sorted(unknown)}; this dashboard has {sorted(self.controls)}")
        with self._held():
            for name, value in values.items():
                self.controls[name].value = value
        self.recompute()

    @contextmanager
    def _held(self):
        self._holding = True
        try:
            yield
        finally:
            self._holding = False

    _holding = False

    def _on_change(self, change) -> None:
        if not self._holding:
            self.recompute()

    def recompute(self) -> None:
        """Run the model on the current values and redraw every view."""
        self.recomputes += 1
        try:
            result = self._compute(self.values)
            charts = {name: build(result) for name, build in self.views.items()}
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
            self.charts[name].chart = live_chart(chart)
        self.readout.value = readout
        self.message.value = (f'<div class="offloadkit-note" style="color:#555">{html.escape(notes)}</div>'
                              if notes else "")

    def _show_error(self, message: str, exc: BaseException) -> None:
        self.error, self.last_exception = message, exc
        kept = " The charts still show the last valid setting." if self.result is not None else ""
        self.message.value = ('<div class="offloadkit-error" style="color:#b00020"><b>'
                              f'&#9888; {html.escape(message)}</b>{kept}</div>')

    # -- display ------------------------------------------------------------
    @property
    def widget(self) -> W.VBox:
        """The whole dashboard as one ipywidgets VBox (built on first use)."""
        if self._widget is None:
            rows = [W.HBox([self.charts[n] for n in row if n in self.charts],
                           layout=W.Layout(overflow="auto", max_width="100%")) for row in self._layout]
            head = [W.HTML(f"<h3 style='margin:0'>{html.escape(self.title)}</h3>")]
            if self._description:
                head.append(W.HTML(self._description))
            box = W.HBox(list(self.controls.values()), layout=W.Layout(flex_flow="row wrap"))
            self._widget = W.VBox([*head, box, self.message, self.readout, *rows])
            self._widget.add_class("offloadkit-dashboard")
        return self._widget

    def chart_svgs(self) -> dict[str, str]:
        """Every view as it is drawn now, as inline SVG (rendered by vl-convert, no browser)."""
        import vl_convert
        return {name: vl_convert.vegalite_to_svg(chart.chart.to_dict(validate=False))
                for name, chart in self.charts.items()}

    def static_html(self) -> str:
        """A kernel-free snapshot (title, message, readout, extra such as the tcpdump excerpts,
        every chart as inline SVG): what a stored notebook shows where widgets cannot render
        (the docs site, GitHub, nbviewer without widget state)."""
        extra = self._static_fn(self.result) if self._static_fn and self.result is not None else ""
        charts = "".join(f"<div class='offloadkit-static-chart offloadkit-static-{html.escape(name)}' "
                         f"style='overflow-x:auto;max-width:100%'>{svg}</div>"
                         for name, svg in self.chart_svgs().items())
        return (f"<div class='offloadkit-static'><b>{html.escape(self.title)}</b> "
                f"<i>(live dashboard: run the notebook to use it)</i>{self.message.value}"
                f"<div>{html.escape(self.readout.value)}</div>{extra}{charts}</div>")

    def _repr_mimebundle_(self, **kwargs):
        bundle = self.widget._repr_mimebundle_(**kwargs)
        bundle["text/plain"] = repr(self)
        bundle["text/html"] = self.static_html()
        return bundle

    def __repr__(self) -> str:
        state = f"error={self.error!r}" if self.error else "ok"
        return f"<Dashboard {self.title!r}: {len(self.controls)} controls, {len(self.charts)} charts, {state}>"


# -- control factories: the same look in every dashboard ----------------------
_WIDE = {"description_width": "initial"}


def int_slider(description: str, value: int, lo: int, hi: int, step: int = 1) -> W.IntSlider:
    """An integer slider that recomputes on release (``continuous_update=False``)."""
    return W.IntSlider(value=value, min=lo, max=hi, step=step, description=description,
                       continuous_update=False, style=_WIDE, layout=W.Layout(width="330px"))


def toggle(description: str, value: bool) -> W.Checkbox:
    return W.Checkbox(value=value, description=description, indent=False,
                      layout=W.Layout(width="auto", margin="0 12px 0 0"))


def choice(description: str, options, value) -> W.Dropdown:
    return W.Dropdown(options=options, value=value, description=description, style=_WIDE,
                      layout=W.Layout(width="auto"))


def control_values(ctl: W.ValueWidget, n: int = 12) -> list:
    """Values to try on a control (tests, benchmarks): both states of a toggle, every option of a
    dropdown, ``n`` values spread over a slider's range plus a few next to its current value."""
    if isinstance(ctl.value, bool):
        return [not ctl.value, ctl.value]
    if hasattr(ctl, "options") and not hasattr(ctl, "min"):
        return [o[1] if isinstance(o, tuple) else o for o in ctl.options]
    lo, hi, step = ctl.min, ctl.max, getattr(ctl, "step", 1) or 1
    vals = {int(round((lo + (hi - lo) * k / (n - 1)) / step) * step) for k in range(n)}
    vals |= {ctl.value - step * k for k in (1, 2, 3) if ctl.value - step * k >= lo}
    return sorted(v for v in vals if lo <= v <= hi)


def apply_overrides(controls: Mapping[str, W.ValueWidget], overrides: Mapping[str, Any]) -> None:
    """Set initial control values; a name or value the control cannot take is a ValueError."""
    for name, value in overrides.items():
        if name not in controls:
            raise ValueError(f"no control {name!r}; this dashboard has {sorted(controls)}")
        ctl = controls[name]
        lo, hi = getattr(ctl, "min", None), getattr(ctl, "max", None)
        if lo is not None and not (lo <= value <= hi):
            raise ValueError(f"{name}={value} is outside the control's range {lo}..{hi}")
        try:
            ctl.value = value
        except Exception as e:  # traitlets.TraitError for a dropdown value not among the options
            raise ValueError(f"{name}={value!r}: {e}") from None
