"""LiveChart: altair's JupyterChart JavaScript with the data-only update path, bundled offline.

The JavaScript itself runs in tests/browser/test_live_chart_browser.py; here: the patch
applies to the installed altair, the bundle imports nothing from the network, and the
dashboards' charts are LiveCharts whose spec is always the whole current spec.
"""
from __future__ import annotations

import altair as alt

from offloadkit import ui
from offloadkit.ui.live_chart import _PATCHES, LiveChart, live_source
from offloadkit.ui.offline import is_offline_bundle


def test_patch_applies_to_this_altair():
    src = live_source()
    for _, new in _PATCHES:
        assert new in src
    assert "model.on('change:spec', reembed)" not in src
    assert "function sameShape" in src and "api.view.change(name" in src


def test_bundle_is_offline_and_differs_from_altairs():
    d = ui.dashboard("intro")
    chart = d.charts["sizes"]
    assert isinstance(chart, LiveChart) and isinstance(chart, alt.JupyterChart)
    assert is_offline_bundle(chart._esm) and "sameShape" in chart._esm
    assert chart._esm != alt.JupyterChart._esm


def test_spec_is_the_whole_current_spec_after_a_data_only_change():
    d = ui.dashboard("rtl8139")
    before = d.charts["stevens"].spec
    d.controls["mss"].value = 1300
    after = d.charts["stevens"].spec
    assert after == d.charts["stevens"].chart.to_dict()
    assert after["datasets"] != before["datasets"]                     # new rows ...
    assert {k: v for k, v in after.items() if k != "datasets"} == \
        {k: v for k, v in before.items() if k != "datasets"}        # ... same shape: the browser changesets it
