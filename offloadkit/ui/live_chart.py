"""``LiveChart``: a Vega-Lite widget that redraws a data-only change without re-embedding, altair-free.

A dashboard recompute mostly changes the rows of a spec's named ``datasets`` (new
packet sizes, a new rate), not its shape. ``LiveChart`` syncs the two parts as
separate widget traits: ``shape`` (the spec without its datasets) and the datasets
as one JSON text (ipywidgets walks every list and dict of a synced value looking
for binary buffers: 600 rows of a Stevens graph cost 15-20 ms that way, a string
nothing). Assigning ``.chart`` sends only the part that changed, so a data-only change
carries no marks, encodings or config; in the browser each changed dataset is
changed in place through a Vega changeset (``view.change``: the shown tuples paired
with the new rows by position, fields that differ modified, the rest removed or
inserted), so vega keeps the marks and their SVG elements, and the view re-runs.
A new shape re-embeds (vega-lite compile, a new SVG).

The widget is an anywidget with its own few lines of JavaScript around
vega-embed (bundled offline by vl-convert, cached on disk: ``offline.bundle``),
so a dashboard imports neither altair (about 50 MB resident) nor vl-convert.
``.chart`` takes a :class:`~offloadkit.ui.views.VegaLite` or anything with
``to_dict()`` (an altair chart); ``spec`` is the whole current spec.
"""
from __future__ import annotations

import json

import anywidget
import traitlets

from .offline import bundle

JS = """
async function render({ model, el }) {
    let api = null, shownShape = null, shownData = null, queue = Promise.resolve();
    const stamp = (x) => JSON.stringify(x ?? null);
    const embed = async () => {
        if (api != null) { api.finalize(); api = null; }
        const shape = model.get("shape"), datasets = JSON.parse(model.get("datasets_json") || "{}");
        shownShape = stamp(shape);
        shownData = Object.fromEntries(Object.entries(datasets).map(([k, v]) => [k, stamp(v)]));
        if (shape == null) { el.replaceChildren(); return; }
        const spec = structuredClone({...shape, datasets});
        try {
            api = await vegaEmbed(el, spec, structuredClone(model.get("embed_options")) ?? undefined);
        } catch (error) {
            el.innerHTML = '<div style="color:red;"><p>JavaScript Error: ' + error.message + '</p></div>';
        }
    };
    // The shape is unchanged and the dataset names are the same: changesets; otherwise re-embed.
    const update = async () => {
        const datasets = JSON.parse(model.get("datasets_json") || "{}");
        const names = Object.keys(datasets).sort();
        if (api == null || stamp(model.get("shape")) !== shownShape
                || stamp(names) !== stamp(Object.keys(shownData).sort())) {
            await embed();
            return;
        }
        let changed = false;
        for (const name of names) {
            const s = stamp(datasets[name]);
            if (s !== shownData[name]) {
                api.view.change(name, changeset(api.view.data(name), datasets[name]));
                shownData[name] = s;
                changed = true;
            }
        }
        if (changed) await api.view.runAsync();
    };
    // The shown tuples become the new rows in place, paired by position: a field that differs is
    // modified, extra tuples removed, extra rows inserted. Vega keeps the marks (and their SVG
    // elements) of tuples it keeps, so a change redraws attributes instead of rebuilding the chart.
    const changeset = (tuples, rows) => {
        const cs = api.view.changeset(), gone = new Set(), n = Math.min(tuples.length, rows.length);
        for (let i = 0; i < n; i++) {
            const t = tuples[i], r = rows[i], keys = Object.keys(r);
            if (keys.length !== Object.keys(t).length || keys.some((k) => !(k in t))) {
                gone.add(t);
                cs.insert(structuredClone(r));
                continue;
            }
            for (const k of keys) {
                if (t[k] !== r[k] && stamp(t[k]) !== stamp(r[k])) cs.modify(t, k, structuredClone(r[k]));
            }
        }
        for (let i = n; i < tuples.length; i++) gone.add(tuples[i]);
        if (gone.size) cs.remove((t) => gone.has(t));
        if (rows.length > n) cs.insert(structuredClone(rows.slice(n)));
        return cs;
    };
    // The first embed and one update per state message (a new shape and its datasets arrive
    // together), strictly in order; an error is shown and does not stop the updates after it.
    const run = (step) => {
        queue = queue.then(step).catch((error) => {
            el.innerHTML = '<div style="color:red;"><p>JavaScript Error: ' + error.message + '</p></div>';
            api = null;
        });
        return queue;
    };
    const onChange = () => run(update);
    model.on("change", onChange);
    await run(embed);
    return () => { model.off("change", onChange); if (api != null) api.finalize(); };
}
export default { render };
"""


def _scalar(value):
    """A numpy scalar as its Python value (what Jupyter's own JSON encoder does with it)."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"a chart dataset holds {type(value).__name__}, which JSON cannot carry")


class LiveChart(anywidget.AnyWidget):
    """One persistent chart of a dashboard: assign ``.chart``; data-only changes are drawn in place."""

    _esm = ""   # set by enable_live() before the first instance
    shape = traitlets.Dict(allow_none=True, default_value=None).tag(sync=True)
    datasets_json = traitlets.Unicode("{}").tag(sync=True)
    embed_options = traitlets.Dict().tag(sync=True)

    def __init__(self, chart, embed_options: dict | None = None, **kwargs):
        enable_live()
        super().__init__(embed_options=dict(embed_options or {}), **kwargs)
        self._chart, self.datasets = None, {}
        self.chart = chart

    @property
    def chart(self):
        """What is shown (the last assigned chart)."""
        return self._chart

    @chart.setter
    def chart(self, chart) -> None:
        spec = dict(chart.to_dict())
        datasets = spec.pop("datasets", {})
        self._chart = chart
        with self.hold_sync():
            if spec != self.shape:
                self.shape = spec
            if datasets != self.datasets:
                self.datasets = datasets       # what is shown (Python side)
                self.datasets_json = json.dumps(datasets, separators=(",", ":"), allow_nan=False, default=_scalar)

    @property
    def spec(self) -> dict:
        """The whole current spec (shape and datasets)."""
        return {**self.shape, "datasets": self.datasets} if self.datasets else dict(self.shape or {})


def enable_live() -> None:
    """Bundle (or load from the disk cache) LiveChart's JavaScript, once per process."""
    if not LiveChart._esm:
        LiveChart._esm = bundle(JS, "livechart")


def warmup() -> None:
    """Build the cached bundle (called by ``python -m offloadkit.warmup``)."""
    enable_live()
