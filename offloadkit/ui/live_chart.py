"""``LiveChart``: altair's JupyterChart that redraws a data-only change without re-embedding.

Assigning ``JupyterChart.chart`` sends the new spec, and altair's JavaScript then
re-embeds the whole view (vega-lite compile, vega parse, a new SVG): 50-150 ms
in the browser per chart. Most dashboard recomputes change only the rows of
the spec's named ``datasets`` (new packet sizes, a new rate), not its shape. So
``LiveChart`` runs altair's own JavaScript with one change: when a new spec
differs from the one on screen only in the values of its datasets, each changed
dataset is replaced through a Vega changeset (``view.change``: remove all,
insert the new rows) and the view re-runs; any other change re-embeds as before.

The Python side is unchanged: ``.chart`` is reassigned and ``spec`` is always the
whole current spec, so a new view of the widget (a reload, a second output)
embeds what is current. The JavaScript is bundled offline like the rest
(``offline.bundle``).
"""
from __future__ import annotations

import altair as alt
from altair.jupyter.jupyter_chart import load_js_src

from .offline import bundle

# (altair's line, what replaces it): each must occur exactly once in altair's index.js
_PATCHES = (
    ("    let finalize;\n",
     "    let finalize, shownApi = null, shownSpec = null;\n"),
    ("        if (finalize != null) {\n          finalize();\n        }\n",
     "        if (finalize != null) {\n          finalize();\n        }\n        shownApi = null;\n"),
    ("        finalize = api.finalize;\n",
     "        finalize = api.finalize;\n        shownApi = api;\n"
     "        shownSpec = structuredClone(model.get(\"spec\"));\n"),
    ("    model.on('change:spec', reembed);\n",
     "    const onSpec = async () => {\n"
     "        const next = model.get(\"spec\");\n"
     "        if (shownApi == null || shownSpec == null || next == null || !sameShape(shownSpec, next)) {\n"
     "            await reembed();\n"
     "            return;\n"
     "        }\n"
     "        const api = shownApi;\n"
     "        for (const [name, rows] of Object.entries(next.datasets ?? {})) {\n"
     "            if (JSON.stringify(rows) !== JSON.stringify(shownSpec.datasets[name])) {\n"
     "                api.view.change(name, api.view.changeset().remove(() => true)"
     ".insert(structuredClone(rows)));\n"
     "            }\n"
     "        }\n"
     "        shownSpec = structuredClone(next);\n"
     "        await api.view.runAsync();\n"
     "    };\n"
     "    model.on('change:spec', onSpec);\n"),
)

_SAME_SHAPE = """
// The two specs differ at most in the rows of their named datasets (same dataset names).
function sameShape(a, b) {
    const da = a.datasets ?? {}, db = b.datasets ?? {};
    const ka = Object.keys(da).sort(), kb = Object.keys(db).sort();
    if (JSON.stringify(ka) !== JSON.stringify(kb)) return false;
    const strip = (s) => JSON.stringify({...s, datasets: null});
    return strip(a) === strip(b);
}
"""


def live_source() -> str:
    """altair's JupyterChart JavaScript with the data-only update path."""
    src = load_js_src()
    for old, new in _PATCHES:
        if src.count(old) != 1:
            raise RuntimeError(f"altair {alt.__version__}: its JupyterChart JavaScript changed; "
                               f"offloadkit.ui.live_chart cannot patch {old.strip()!r}")
        src = src.replace(old, new)
    return src + _SAME_SHAPE


class LiveChart(alt.JupyterChart):
    """A JupyterChart whose data-only changes are drawn without re-embedding (offline JavaScript)."""

    _esm = ""   # set by enable_live() before the first instance

    def __init__(self, chart, **kwargs):
        enable_live()
        super().__init__(chart, **kwargs)


def enable_live() -> None:
    """Bundle (or load from the disk cache) LiveChart's JavaScript, once per process."""
    if not LiveChart._esm:
        LiveChart._esm = bundle(live_source(), "livechart")
        LiveChart._is_offline = True


def warmup() -> None:
    """Build the cached bundle (called by ``python -m offloadkit.warmup``)."""
    enable_live()
