"""The "where does it break" panels: Run computes the grid, the heatmap shows the library's rows."""
import functools

import pytest

from offloadkit.sim.scenario import Scenario
from offloadkit.ui import sweep as S


def small_panel(**kw):
    base = functools.partial(Scenario.simple, rate_bps=50_000_000, rtt_ns=10_000_000, bytes_per_flow=60_000)
    return S.SweepPanel("t", base, {"mss": [536, 1448], "path_mtu": [1400, 1500]}, "mss", "path_mtu",
                        S.GOODPUT_MBPS, toggles={"tso": S.toggle("TSO", True)}, scheduler="sync",
                        tips=("retransmits",), **kw)


def test_run_draws_the_rows():
    p = small_panel()
    assert "not computed yet" in str(p.chart.chart.to_dict())
    df = p.run()
    assert p.error is None and len(df) == 4 and df.tso.all()
    assert (p.progress.value, p.progress.max) == (4, 4)
    cells = p.chart.chart.to_dict()["data"]["values"]
    assert [(c["x"], c["y"]) for c in cells] == list(zip(df.mss, df.path_mtu))
    assert [c["v"] for c in cells] == pytest.approx((df.goodput_bps / 1e6).tolist())
    # MSS 1448 over a 1400-byte hop that drops silently: nothing arrives, the cell is 0
    black_hole = df[(df.mss == 1448) & (df.path_mtu == 1400)]
    assert black_hole.goodput_bps.iloc[0] == 0 and cells[2]["v"] == 0
    p.toggles["tso"].value = False
    p.button.click()                                   # what the Run button does
    assert not p.rows.tso.any() and p.progress.value == 4


def test_static_copy_shows_the_heatmap():
    p = small_panel()
    assert "not computed yet" in p.static_html() and p.static_html().count("<svg") == 1
    p.run()
    page = p._repr_mimebundle_()["text/html"]
    assert page.count("<svg") == 1 and "4 points on 1 worker(s)" in page and "not computed" not in page


def test_bad_grid_is_shown_not_raised():
    p = small_panel()
    p.grid["mss"] = [9000]
    assert p.run() is None
    assert "does not fit in MTU" in p.error and "does not fit" in p.status.value
    assert not p.button.disabled


def test_notebook_panels():
    for name, n in (("intro", 36), ("rtl8139", 25), ("splice", 42)):
        p = S.panel(name, scheduler="sync")
        assert p.progress.max == n and "Run sweep" in p.status.value
    with pytest.raises(ValueError, match="no sweep panel"):
        S.panel("nope")


def test_heatmap_blank_for_nan():
    spec = S.heatmap([{"a": 1, "b": 2, "goodput_bps": float("nan")}], "a", "b", S.GOODPUT_MBPS).to_dict()
    assert spec["data"]["values"] == [{"x": 1, "y": 2, "v": None}]
