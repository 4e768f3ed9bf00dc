"""The five report dashboards: the Dashboard contract for every report id.

Every control changes the result; an invalid combination shows the library's
message (no exception, the last good result kept); the charts' specs carry
the values the controls asked for; the rates shown come from the model and
from ``load_facts``.
"""
from __future__ import annotations

import altair as alt
import numpy as np
import pytest
from altair.utils.schemapi import validate_jsonschema

from offloadkit import reports, ui
from offloadkit.reports import load_facts
from offloadkit.ui.live_chart import LiveChart

from dashboard_helpers import spec_rows

IDS = ("rtl8139", "mpls", "vxlan", "splice", "vlan-nat")
CONTROLS = {"rtl8139": {"mss", "path_mtu", "gro", "tx_csum", "tso", "gso", "nic"},
            "mpls": {"mss", "mtu", "gro", "tx_csum", "tso", "gso", "mpls", "drop_reason", "segmenter"},
            "vxlan": {"mss", "mtu", "gro", "rx_csum", "outer_udp_csum", "sessions"},
            "splice": {"mss", "mtu", "aggregation", "sessions", "allocs_per_rx_skb"},
            "vlan-nat": {"mss", "mtu", "gro", "rx_csum", "tx_csum", "conntrack_checksum", "tso", "sessions"}}


def other_option(ctl):
    return next(o[1] for o in ctl.options if o[1] != ctl.value)


# a valid new value for each numeric control (booleans are flipped, dropdowns take another option)
NEW_VALUE = {"mss": lambda d: d.controls["mss"].value - 100,
             "mtu": lambda d: min(d.controls["mtu"].value + 100, d.controls["mtu"].max),
             "path_mtu": lambda d: d.controls["path_mtu"].value - 100,
             "sessions": lambda d: 8 if d.controls["sessions"].value < 8 else 300}

# where a control only matters in another setting, the test moves it there
CONTEXT = {("vxlan", "sessions"): {"rx_csum": "unnecessary"}}   # without tunnel GRO there is nothing to interleave

_CACHE: dict = {}


def dash(report_id):
    """One dashboard per id for the read-only tests (building one costs a calibration)."""
    if report_id not in _CACHE:
        _CACHE[report_id] = ui.dashboard(report_id)
    return _CACHE[report_id]


def signature(d):
    """What a student sees change: the readout, the notes, the tcpdump lines, the rates, the sizes."""
    r = d.result
    sizes = tuple(tuple(sorted(zip(*np.unique(r.run.at(p).payload_len, return_counts=True))))
                  for p in r.run.points)
    return (d.readout.value, tuple(r.notes), tuple((p, tuple(v)) for p, v in r.lines.items()),
            tuple((x["case"], x["label"]) for x in r.rates), sizes, d.message.value)


@pytest.mark.parametrize("report_id", IDS)
def test_registered_with_one_control_per_preset_knob(report_id):
    d = dash(report_id)
    assert report_id in ui.available()
    assert set(d.controls) == CONTROLS[report_id]
    knobs = reports.get(report_id).KNOBS
    assert set(d.controls) <= set(knobs), "every control is a knob of the preset, with the same name"
    for name, ctl in d.controls.items():
        if hasattr(ctl, "options"):
            for _, value in ctl.options:
                knobs[name].check(name, value)
    assert d.error is None, d.error
    assert all(isinstance(c, LiveChart) for c in d.charts.values())
    assert {"sizes", "throughput"} <= set(d.charts) and set(d.text_panels) == {"trace"}
    assert ("stevens" in d.charts) == (report_id in ("rtl8139", "mpls"))
    assert ("cpu" in d.charts) == (report_id in ("vxlan", "splice", "vlan-nat"))


@pytest.mark.parametrize("report_id", IDS)
def test_every_control_changes_the_result(report_id):
    d = ui.dashboard(report_id)
    defaults = dict(d.values)
    for name, ctl in d.controls.items():
        d.set(**{**defaults, **CONTEXT.get((report_id, name), {})})   # each control moved alone
        before = signature(d)
        new = (NEW_VALUE[name](d) if name in NEW_VALUE else other_option(ctl) if hasattr(ctl, "options")
               else (not ctl.value))
        ctl.value = new
        assert d.error is None, f"{report_id}: {name}={new}: {d.error}"
        assert d.result.settings[name] == new
        assert signature(d) != before, f"{report_id}: changing {name} to {new} changed nothing"


@pytest.mark.parametrize("report_id", IDS)
def test_the_whole_mss_track_is_valid(report_id):
    d = ui.dashboard(report_id)
    ctl = d.controls["mss"]
    mtu = 1500 if report_id == "rtl8139" else d.controls["mtu"].value   # rtl8139: the guest NIC's MTU
    assert ctl.max == mtu - 52
    for mss in (ctl.min, (ctl.min + ctl.max) // 2, ctl.max):
        ctl.value = mss
        assert d.error is None and d.result.settings["mss"] == mss, (mss, d.error)
    ctl.value = ctl.max + 1                       # the slider cannot leave its track
    assert ctl.value == ctl.max and d.error is None
    if "mtu" in d.controls:
        d.controls["mtu"].value = 1200            # lowering the MTU carries the MSS down, with a note
        assert ctl.value == ctl.max == 1148 and d.error is None
        assert "carried down" in d.message.value


@pytest.mark.parametrize("report_id", IDS)
def test_charts_are_valid_vega_lite(report_id):
    d = dash(report_id)
    schema = alt.vegalite.v6.schema.core.load_schema()
    for name, chart in d.charts.items():
        validate_jsonschema(chart.spec, schema)


@pytest.mark.parametrize("report_id,mss", [("rtl8139", 1400), ("mpls", 1300), ("vxlan", 1300), ("splice", 1300),
                                           ("vlan-nat", 1300)])
def test_charts_reflect_the_mss(report_id, mss):
    d = ui.dashboard(report_id, mss=mss)
    assert d.error is None
    assert f"length {mss}" in d.text_panels["trace"].value
    sizes = {row.get("payload", row.get("size")) for row in spec_rows(d.charts["sizes"].spec)}
    assert mss in sizes
    d.controls["mss"].value = mss - 200
    sizes = {row.get("payload", row.get("size")) for row in spec_rows(d.charts["sizes"].spec)}
    assert mss - 200 in sizes and f"length {mss - 200}" in d.text_panels["trace"].value


@pytest.mark.parametrize("report_id", IDS)
def test_throughput_chart_holds_the_model_and_the_report(report_id):
    d = dash(report_id)
    rows = spec_rows(d.charts["throughput"].spec)
    mine = [r for r in rows if r["case"] == "your settings"]
    assert len(mine) == 1 and mine[0]["source"] == "model"
    scale = {"rtl8139": 8e3, "mpls": 1e6, "vxlan": 1e9, "splice": 1e9, "vlan-nat": 1e6}[report_id]
    got = d.result.run.info["wire_rate_bps"] if report_id == "splice" else d.result.goodput_bps
    assert mine[0]["value"] == pytest.approx(got / scale)
    reported = {(r["lo"], r["hi"]) for r in rows if r["source"] == "report"}
    facts = load_facts(report_id)
    wanted = set()
    for t in facts.targets.values():
        rep = t.reported
        if t.unit in ("KB/s", "Mb/s", "Gb/s") and "fixed" not in t.quantity:
            wanted.add(tuple(float(x) for x in rep) if isinstance(rep, tuple) else (float(rep), float(rep)))
    assert wanted and wanted <= reported, (wanted, reported)


def test_rtl8139_shows_the_reports_sizes_and_the_fix():
    d = ui.dashboard("rtl8139")
    macvtap = {r["payload"] for r in spec_rows(d.charts["sizes"].spec) if r.get("point") == "macvtap"}
    assert {1448, 1432} <= macvtap
    d.controls["nic"].value = "hw-tso"
    macvtap = {r["payload"] for r in spec_rows(d.charts["sizes"].spec) if r.get("point") == "macvtap"}
    assert macvtap == {1440}
    d.controls["tx_csum"].value = False
    assert "TSO needs TX checksum offload" in d.message.value


def test_rtl8139_mss_is_the_payload_the_preset_sends():
    m = reports.get("rtl8139")
    d = ui.dashboard("rtl8139", mss=1400, nic="hw-tso")
    assert max(d.result.run.result.segment_sizes("macvtap")) == 1400      # no +12 / -12 on the way
    assert m.peer_clamp({"mss": 1400, "mss_clamp": 1452}) == 1412
    assert m.peer_clamp({"mss": None, "mss_clamp": 1452}) == 1452


def test_mpls_drop_reason_and_the_fix():
    d = ui.dashboard("mpls")
    assert "EPROTONOSUPPORT" in d.readout.value
    d.controls["drop_reason"].value = "EINVAL"
    assert "EINVAL" in d.readout.value and "EPROTONOSUPPORT" not in d.readout.value
    d.controls["segmenter"].value = "sw-gso"
    assert d.result.goodput_bps > 1e9


def test_mpls_gro_off_jump_is_explained():
    d = ui.dashboard("mpls")
    d.controls["gro"].value = False
    assert d.result.goodput_bps > 1e8 and "GRO off at the receiver" in d.message.value


def test_mpls_live_run_simulates_the_start_and_says_so():
    d = ui.dashboard("mpls", mss=1300, gro=False)
    assert d.result.run.duration_s == 1.0 and d.result.extra["full_s"] == 10
    assert "over 10 s (the first 1 s simulated, then its steady rate)" in d.readout_text
    assert "in the 1 s simulated: drops" in d.readout_text


def test_vxlan_matches_the_preset():
    m = reports.get("vxlan")
    d = ui.dashboard("vxlan")
    assert d.result.goodput_bps == pytest.approx(m.run("broken").goodput_bps)
    d.controls["rx_csum"].value = "unnecessary"
    assert d.result.goodput_bps == pytest.approx(m.run("bnx2x").goodput_bps)
    d.controls["gro"].value = False
    assert d.result.goodput_bps == pytest.approx(m.run("gro_off").goodput_bps)


def test_trace_headings_count_packets_not_lines():
    d = dash("vxlan")                           # a VXLAN frame prints two lines (outer, inner)
    nic = d.result.window.at("nic")
    assert f"nic ({len(nic)} packets)" in d.text_panels["trace"].value
    assert len(d.result.lines["nic"]) == 2 * len(nic)


@pytest.mark.parametrize("report_id", IDS)
def test_every_trace_panel_heading_counts_the_packets_it_prints(report_id):
    from offloadkit.sim.one_packet import marked_lines
    d = dash(report_id)
    for point, lines in d.result.lines.items():      # vlan-nat's lan panel once said "(0 packets)"
        assert len(marked_lines(d.result.window.at(point))) == len(lines) > 0, point
