"""LiveChart: the altair-free Vega-Lite widget; a data-only change sends only the datasets.

The JavaScript itself runs in tests/browser/test_live_chart_browser.py; here: the bundle
imports nothing from the network, ``.chart`` splits a spec into shape and datasets and
sends only the part that changed, and a process that builds a dashboard imports neither
altair nor vl-convert.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import altair as alt

from offloadkit import ui
from offloadkit.ui.live_chart import LiveChart
from offloadkit.ui.offline import SCHEMA_URL, is_offline_bundle
from offloadkit.ui.views import VegaLite


def bars(rows, mark="bar"):
    return VegaLite({"data": {"name": "d"}, "mark": mark, "datasets": {"d": rows},
                     "encoding": {"x": {"field": "i", "type": "ordinal"}, "y": {"field": "v", "type": "quantitative"}}})


def sent(chart):
    """The names of the synced traits each assignment changes."""
    seen = []
    chart.observe(lambda ch: seen.append(ch["name"]), names=["shape", "datasets_json"])
    return seen


def test_bundle_is_offline():
    chart = LiveChart(bars([{"i": 0, "v": 1}]))
    assert is_offline_bundle(chart._esm) and "api.view.change(name" in chart._esm


def test_a_data_only_change_sends_only_the_datasets():
    chart = LiveChart(bars([{"i": 0, "v": 1}]), embed_options={"renderer": "svg"})
    seen = sent(chart)
    chart.chart = bars([{"i": 0, "v": 2}, {"i": 1, "v": 3}])
    assert seen == ["datasets_json"]
    assert chart.spec == chart.chart.to_dict() and json.loads(chart.datasets_json) == \
        {"d": [{"i": 0, "v": 2}, {"i": 1, "v": 3}]}
    chart.chart = bars([{"i": 0, "v": 2}, {"i": 1, "v": 3}], mark="point")     # a new shape, the same rows
    assert seen == ["datasets_json", "shape"] and chart.shape["mark"] == "point"
    chart.chart = bars([{"i": 0, "v": 2}, {"i": 1, "v": 3}], mark="point")     # nothing new: nothing sent
    assert seen == ["datasets_json", "shape"]


def test_an_altair_chart_is_accepted_and_the_schema_is_altairs():
    chart = LiveChart(alt.Chart(alt.Data(values=[{"a": 1}])).mark_bar().encode(x="a:Q"))
    assert chart.shape["mark"]["type"] == "bar" and SCHEMA_URL == alt.SCHEMA_URL


def test_spec_is_the_whole_current_spec_after_a_data_only_change():
    d = ui.dashboard("rtl8139")
    before = d.charts["stevens"].spec
    d.controls["mss"].value = 1300
    after = d.charts["stevens"].spec
    assert after == d.charts["stevens"].chart.to_dict()
    assert after["datasets"] != before["datasets"]                     # new rows ...
    assert {k: v for k, v in after.items() if k != "datasets"} == \
        {k: v for k, v in before.items() if k != "datasets"}        # ... same shape: the browser changesets it


def test_a_dashboard_imports_neither_altair_nor_vl_convert():
    code = ("import sys; from offloadkit import ui; d = ui.dashboard('intro'); d.controls['mss'].value = 1000; "
            "print(sorted(m for m in ('altair', 'vl_convert', 'jsonschema') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=dict(os.environ))
    assert out.stdout.strip().splitlines()[-1] == "[]"
