"""The five report notebooks as Voila apps in a real browser, offline.

One Voila server serves a scratch copy of the notebooks; for each notebook the
dashboard renders its charts (SVG), the readout is what the library computes,
moving the MSS slider updates it to the library's value for that MSS, nothing
overflows the dashboard's box at 1366x768, a drag of the MSS slider across its
whole track never lands on an invalid value, and there is no console error and
no request outside localhost.
"""
from __future__ import annotations

import pytest

from conftest import (SCREENSHOTS, assert_nothing_overflows, voila_folder_server,  # the browser fixtures of this folder
                      drag_mss_across_the_track)
from offloadkit import ui

pytestmark = pytest.mark.browser

NOTEBOOKS = {"rtl8139": "01-rtl8139-tso-mss.ipynb", "mpls": "02-mpls-gso.ipynb", "vxlan": "03-vxlan-gro.ipynb",
             "splice": "04-splice-sessions.ipynb", "vlan-nat": "05-vlan-gro-nat.ipynb"}
NEW_MSS = {"rtl8139": 1400, "mpls": 1300, "vxlan": 1300, "splice": 1300, "vlan-nat": 1300}
CHARTS = {"rtl8139": ("sizes", "throughput", "stevens"), "mpls": ("sizes", "throughput", "stevens"),
          "vxlan": ("sizes", "throughput", "cpu"), "splice": ("sizes", "throughput", "cpu"),
          "vlan-nat": ("sizes", "throughput", "cpu")}


@pytest.fixture(scope="module")
def report_voila(tmp_path_factory, playwright_browser):
    server = voila_folder_server(tmp_path_factory.mktemp("report-notebooks"), NOTEBOOKS.values())
    yield server
    server.stop()


def readout(page) -> str:
    return page.locator(".offloadkit-readout").inner_text().strip()


def wait_readout(page, want: str) -> None:
    page.wait_for_function("(want) => { const e = document.querySelector('.offloadkit-readout');"
                           " return e && e.textContent.trim() === want; }", arg=want, timeout=30_000)


def set_slider(page, name, value):
    box = page.locator(f".offloadkit-control-{name} .widget-readout")
    box.fill(str(value))
    box.press("Enter")


@pytest.mark.parametrize("report_id", list(NOTEBOOKS))
def test_report_notebook_in_voila(report_voila, watched, report_id):
    page = watched.page
    page.goto(report_voila.url.format(nb=NOTEBOOKS[report_id]), timeout=180_000)
    page.wait_for_selector(".offloadkit-dashboard .offloadkit-text-trace pre", timeout=180_000)
    for name in CHARTS[report_id]:
        page.wait_for_selector(f".offloadkit-chart-{name} svg", timeout=30_000)
    d = ui.dashboard(report_id)                       # what the library computes, in this process
    assert d.error is None, f"the {report_id} dashboard itself fails: {d.error}"
    wait_readout(page, d.readout_text)
    dash = page.locator(".offloadkit-dashboard")
    dash.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    dash.screenshot(path=str(SCREENSHOTS / f"report-{report_id}-voila.png"))
    throughput = page.locator(".offloadkit-chart-throughput svg").text_content()
    assert "your settings" in throughput and d.result.rates[0]["label"] in throughput

    mss = NEW_MSS[report_id]
    set_slider(page, "mss", mss)
    d.controls["mss"].value = mss
    wait_readout(page, d.readout_text)
    assert f"length {mss}" in page.locator(".offloadkit-text-trace").text_content()

    assert_nothing_overflows(page)
    assert drag_mss_across_the_track(page, steps=4) == []      # the MSS slider ends at what the MTU carries
    assert "Traceback" not in page.content()
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    assert watched.external == [], f"requests outside localhost: {watched.external}"
    assert watched.errors == [], f"console errors: {watched.errors}"
