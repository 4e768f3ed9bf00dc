"""The five report notebooks in JupyterLab, in a real browser, offline.

For each notebook, in the session's JupyterLab: open it, run every cell above
"Try it on a real kernel" (that cell runs the kernel lab as root and is skipped
here; nbval and the kernel tests cover it), wait for the kernel to be idle; the
dashboard renders its charts (SVG), the readout is what the library computes,
moving the MSS slider updates it to the library's value, no console error, no
request outside localhost. The slider-release -> updated-chart latency is printed.
"""
from __future__ import annotations

import shutil
import statistics

import pytest

from conftest import NOTEBOOK, ROOT
from offloadkit import ui
from test_intro_browser import ARM_TIMER
from test_report_notebooks import CHARTS, NEW_MSS, NOTEBOOKS, SCREENSHOTS, set_slider, wait_readout

pytestmark = pytest.mark.browser
SKIPPED_CELL = "section_text("   # the "try it on a real kernel" cell: real namespaces, ~25 s as root
LATENCIES: list[float] = []

RUN_UP_TO_KERNEL_LAB = """async (skip) => {
    const app = window.jupyterapp;
    const w = app.shell.currentWidget;
    await w.context.ready;
    await w.sessionContext.ready;
    app.shell.collapseLeft();
    const cells = w.content.widgets;
    const stop = cells.findIndex(c => c.model.type === 'code' && c.model.sharedModel.getSource().includes(skip));
    if (stop < 0) throw new Error('no kernel-lab cell in ' + w.context.path);
    await app.commands.execute('notebook:clear-all-cell-outputs');
    w.content.activeCellIndex = stop;
    await app.commands.execute('notebook:run-all-above');
    return stop;
}"""
IDLE_UP_TO = """(stop) => {
    const w = window.jupyterapp.shell.currentWidget;
    const k = w.sessionContext.session && w.sessionContext.session.kernel;
    if (!k || k.status !== 'idle') return false;
    return w.content.widgets.slice(0, stop).filter(c => c.model.type === 'code')
        .every(c => c.model.executionCount !== null && c.model.executionCount > 0);
}"""


@pytest.fixture(scope="module")
def lab_reports(lab, workdir):
    """The session's JupyterLab, with scratch copies of the report notebooks beside the intro."""
    for nb in NOTEBOOKS.values():
        shutil.copy(ROOT / "notebooks" / nb, workdir / "notebooks" / nb)
    yield lab
    if LATENCIES:
        print(f"\nJupyterLab reports: slider release -> updated trace chart: median "
              f"{statistics.median(LATENCIES):.0f} ms, max {max(LATENCIES):.0f} ms over {len(LATENCIES)} moves")


@pytest.mark.parametrize("report_id", list(NOTEBOOKS))
def test_report_notebook_in_jupyterlab(lab_reports, watched, report_id):
    page = watched.page
    page.goto(lab_reports.url.replace(f"/{NOTEBOOK}?", f"/{NOTEBOOKS[report_id]}?reset&"))
    page.wait_for_function("(p) => { const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;"
                           " return w && w.sessionContext && w.context && w.context.path === p; }",
                           arg=NOTEBOOKS[report_id], timeout=90_000)
    stop = page.evaluate(RUN_UP_TO_KERNEL_LAB, SKIPPED_CELL)
    page.wait_for_function(IDLE_UP_TO, arg=stop, timeout=120_000, polling=250)
    assert page.evaluate("(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model.executionCount",
                         stop) is None, "the kernel-lab cell ran"
    assert page.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']").count() == 0
    assert page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']").count() == 0
    page.wait_for_selector(".offloadkit-dashboard .offloadkit-text-trace pre", timeout=60_000)
    for name in CHARTS[report_id]:
        page.wait_for_selector(f".offloadkit-chart-{name} svg", timeout=30_000)
    assert page.locator(".offloadkit-dashboard svg.marks").count() >= len(CHARTS[report_id])

    d = ui.dashboard(report_id)                       # what the library computes, in this process
    assert d.error is None, f"the {report_id} dashboard itself fails: {d.error}"
    wait_readout(page, d.readout_text)
    throughput = page.locator(".offloadkit-chart-throughput svg").text_content()
    assert "your settings" in throughput and d.result.rates[0]["label"] in throughput

    for mss in (NEW_MSS[report_id], NEW_MSS[report_id] - 100):
        page.evaluate(ARM_TIMER, f"length {mss}")
        set_slider(page, "mss", mss)
        LATENCIES.append(page.evaluate("() => window.__okWait"))
        d.controls["mss"].value = mss
        assert d.error is None
        wait_readout(page, d.readout_text)
    dash = page.locator(".offloadkit-dashboard")
    page.set_viewport_size({"width": 1440, "height": int(dash.bounding_box()["height"]) + 250})  # all of it
    dash.scroll_into_view_if_needed()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    dash.screenshot(path=str(SCREENSHOTS / f"report-{report_id}-lab.png"))

    assert "Traceback" not in page.locator(".offloadkit-dashboard").inner_text()
    assert watched.external == [], f"requests outside localhost: {watched.external}"
    assert watched.errors == [], f"console errors: {watched.errors}"
    page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.shutdown()")
