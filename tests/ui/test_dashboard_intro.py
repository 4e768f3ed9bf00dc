"""The intro dashboard: contract, the model behind it, and the textbook cases."""
from __future__ import annotations

import html

import pytest

from offloadkit import ui
from offloadkit.sim.one_packet import one_packet
from offloadkit.ui import intro
from offloadkit.ui.live_chart import LiveChart

from dashboard_helpers import spec_rows


@pytest.fixture(scope="module")
def dash():
    return ui.dashboard("intro")


def chart_payloads(d, point):
    return [r["payload"] for r in spec_rows(d.charts["sizes"].spec) if r.get("point") == point]


def same_as_library(d):
    v = d.values
    expect = one_packet(**v)
    assert d.result.lines == expect.lines
    assert html.escape(intro.readout(expect)) in d.readout.value
    for point in intro.POINTS:
        assert chart_payloads(d, point) == expect.sizes(point, delivered_only=False)
    text = html.unescape(d.text_panels["trace"].value)
    for point, lines in expect.lines.items():
        assert f"{point} ({expect.packets(point)} packet" in text
        for line in lines[:8]:
            assert line.split(": ", 1)[-1] in text
    return expect


def test_contract(dash):
    assert set(dash.controls) == {"mss", "mtu", "gro", "tx_csum", "rx_csum", "tso", "nic", "encap", "payload",
                                  "ip_version"}
    assert set(dash.charts) == {"sizes", "checksum"} and set(dash.text_panels) == {"trace"}
    assert all(isinstance(c, LiveChart) for c in dash.charts.values())
    assert dash.error is None and dash.result.sizes("wire") == [1448, 1432]
    same_as_library(dash)


NEW_VALUES = {"mss": 1000, "mtu": 9000, "payload": 5000, "tso": False, "gro": False, "tx_csum": False,
              "rx_csum": False, "nic": "rtl8139-legacy", "encap": "PPPoE"}


@pytest.mark.parametrize("name", list(NEW_VALUES))
def test_each_control_changes_result_and_charts(name):
    d = ui.dashboard("intro")
    before = {k: c.spec for k, c in d.charts.items()} | {k: p.value for k, p in d.text_panels.items()}
    old_result = d.result
    d.controls[name].value = NEW_VALUES[name]
    assert d.error is None, d.error
    assert d.result is not old_result
    assert d.result.settings[name] == NEW_VALUES[name]
    expect = same_as_library(d)
    if name != "nic":  # the NIC model alone changes nothing for a 1448-byte MSS
        now = {k: c.spec for k, c in d.charts.items()} | {k: p.value for k, p in d.text_panels.items()}
        assert any(now[k] != before[k] for k in now)
    assert expect.settings == d.result.settings


def test_the_mss_slider_ends_at_what_the_mtu_carries():
    d = ui.dashboard("intro")
    assert d.controls["mss"].max == 1448
    d.controls["mss"].value = 1000
    d.controls["mtu"].value = 9000
    assert d.controls["mss"].max == 8948 and d.controls["mss"].value == 1000
    d.controls["mss"].value = 8948
    assert d.error is None and d.result.sizes("wire") == [2880]
    d.controls["mtu"].value = 1000          # carries the MSS down, with a note, never an error
    assert d.controls["mss"].value == d.controls["mss"].max == 948 and d.error is None
    assert "carried down from 8948 to 948" in d.message.value
    for mss in range(d.controls["mss"].min, d.controls["mss"].max + 1, 97):   # the whole track is valid
        d.controls["mss"].value = mss
        assert d.error is None, (mss, d.error)


def test_an_override_that_does_not_fit_names_the_control():
    with pytest.raises(ValueError, match=r"mss=1460 is outside the control.s range 88..1448"):
        ui.dashboard("intro", mss=1460)
    assert ui.dashboard("intro", mtu=1600, mss=1460).result.sizes("wire") == [1460, 1420]


def test_a_big_write_prints_only_the_lines_shown():
    r = one_packet(payload=40000, mss=1000, mtu=1500)
    full = r.lines["wire"]                                        # every packet's lines
    head, n = r.lines.head("wire", 8)
    assert n == 8 and head == full[:8] and len(full) == 40
    text = html.unescape(intro.trace_panel(r))
    assert "wire (40 packets)" in text and "... 32 more packets" in text


def test_the_head_holds_whole_packets():
    from offloadkit import reports
    from offloadkit.sim.one_packet import PointLines
    nic = reports.get("vxlan").run("broken").at("nic")[:20]          # VXLAN: outer line, inner line
    lines = PointLines({"nic": nic})
    head, n = lines.head("nic", 7)
    assert n == 3 and head == lines["nic"][:6] and len(lines["nic"]) == 40
    assert lines.head("nic", 1) == (lines["nic"][:2], 1)             # at least one packet
