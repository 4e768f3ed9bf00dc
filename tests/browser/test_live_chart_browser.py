"""LiveChart in Chromium: a data-only change is drawn in place, a change of shape re-embeds.

Voila serves notebook 01 (rtl8139). Every chart's <svg> is tagged in the page; after
an MSS change that only changes rows, the same <svg> elements are still there and show
the library's new values (the rule label, the "your settings" rate); after a change that
adds a layer (a second reference line), the sizes chart is a new <svg> with the new text.
Also exercised: tests/browser/latency.py, the benchmark's browser half (no timing asserted).
"""
from __future__ import annotations

import pytest

from conftest import voila_folder_server   # the browser fixtures of this folder
from latency import timed_change
from offloadkit import ui

pytestmark = pytest.mark.browser
NOTEBOOK = "01-rtl8139-tso-mss.ipynb"

TAG = "() => document.querySelectorAll('[class*=offloadkit-chart-] svg.marks').forEach(e => e.__okTag = 1)"
KEPT = """() => Object.fromEntries(Array.from(document.querySelectorAll('[class*=offloadkit-chart-]')).map(c =>
    [c.className.match(/offloadkit-chart-(\\S+)/)[1], !!(c.querySelector('svg.marks') || {}).__okTag]))"""


@pytest.fixture(scope="module")
def rtl_voila(tmp_path_factory, playwright_browser):
    server = voila_folder_server(tmp_path_factory.mktemp("live-chart"), [NOTEBOOK])
    yield server
    server.stop()


def chart_text(page, name: str) -> str:
    return page.locator(f".offloadkit-chart-{name} svg").text_content()


def test_data_only_changes_are_drawn_in_place(rtl_voila, watched):
    page = watched.page
    page.goto(rtl_voila.url.format(nb=NOTEBOOK), timeout=180_000)
    page.wait_for_selector(".offloadkit-dashboard .offloadkit-text-trace pre", timeout=180_000)
    for name in ("sizes", "throughput", "stevens"):
        page.wait_for_selector(f".offloadkit-chart-{name} svg", timeout=120_000)
    d = ui.dashboard("rtl8139")
    assert d.values["mss"] == d.result.extra["hop_payload"]     # one reference line: "MSS = PPPoE limit"

    page.evaluate(TAG)
    d.controls["mss"].value = 1300
    assert timed_change(page, "mss", 1300, timeout_ms=180_000) > 0
    assert page.evaluate(KEPT)["sizes"] is False                # two reference lines now: a new layer, re-embedded
    assert "MSS 1300" in chart_text(page, "sizes")

    page.evaluate(TAG)
    d.controls["mss"].value = 1200
    timed_change(page, "mss", 1200, timeout_ms=180_000)
    assert page.evaluate(KEPT) == {"sizes": True, "throughput": True, "stevens": True}   # changesets, no re-embed
    assert "MSS 1200" in chart_text(page, "sizes") and "MSS 1300" not in chart_text(page, "sizes")
    assert d.result.rates[0]["label"] in chart_text(page, "throughput")
    # the tuples were changed in place (modified, removed, inserted): one tick per row the kernel sent
    ticks = len(d.charts["stevens"].spec["datasets"]["segments"])
    assert page.locator(".offloadkit-chart-stevens g.mark-rule.role-mark line").count() == ticks
    assert watched.external == [] and watched.errors == []
