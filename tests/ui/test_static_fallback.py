"""A displayed dashboard carries a kernel-free copy: readout, tcpdump text, every chart as SVG."""
from __future__ import annotations

import html

from offloadkit import ui


def test_intro_dashboard_mimebundle_reads_without_a_kernel():
    dash = ui.dashboard("intro", payload=4000)
    bundle = dash._repr_mimebundle_()
    page = bundle["text/html"]
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert page.count("<svg") == len(dash.charts) >= 2
    assert html.escape(dash.readout_text) in page
    first_line = dash.result.lines["wire"][0]          # the panels print the flow's common head once
    assert html.escape(first_line.split(": ", 1)[1]) in page


def test_svg_follows_the_controls():
    dash = ui.dashboard("intro")
    before = dash.chart_svgs()
    dash.set(payload=64000)
    after = dash.chart_svgs()
    assert set(before) == set(after) == set(dash.charts)
    assert before != after


def test_live_sessions_can_leave_the_svgs_out(monkeypatch):
    """Binder's start sets OFFLOADKIT_STATIC_CHARTS=0: the snapshot keeps its text, not the charts."""
    dash = ui.dashboard("intro", payload=4000)
    monkeypatch.setenv("OFFLOADKIT_STATIC_CHARTS", "0")
    page = dash._repr_mimebundle_()["text/html"]
    assert "<svg" not in page and html.escape(dash.readout_text) in page
    monkeypatch.setenv("OFFLOADKIT_STATIC_CHARTS", "1")
    assert dash._repr_mimebundle_()["text/html"].count("<svg") == len(dash.charts)
