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

from dashboard_helpers import spec_rows, spec_texts

IDS = ("rtl8139", "mpls", "vxlan", "splice", "vlan-nat")
COMMON = {"mss", "mtu", "gro", "csum_offload"}
OWN = {"rtl8139": {"tso", "gso", "nic_fixed"}, "mpls": {"tso", "gso", "mpls", "mpls_gso", "fixed_kernel"},
       "vxlan": {"inner_csum", "outer_udp_csum", "sessions"}, "splice": {"lro", "sessions", "shared_page"},
       "vlan-nat": {"conntrack_checksum", "tso", "sessions"}}
# a valid new value for each numeric control (booleans are flipped)
NEW_VALUE = {"mss": lambda d: d.controls["mss"].value - 100,
             "mtu": lambda d: min(d.controls["mtu"].value + 100, d.controls["mtu"].max),
             "sessions": lambda d: 8 if d.controls["sessions"].value < 8 else 300}

# where a control only matters in another setting, the test moves it there
CONTEXT = {("vxlan", "sessions"): {"inner_csum": True}}   # without tunnel GRO there is nothing to interleave

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
def test_registered_with_the_common_and_own_controls(report_id):
    d = dash(report_id)
    assert report_id in ui.available()
    assert set(d.controls) == COMMON | OWN[report_id]
    assert d.error is None, d.error
    assert all(isinstance(c, alt.JupyterChart) for c in d.charts.values())
    assert {"trace", "sizes", "throughput"} <= set(d.charts)
    assert ("stevens" in d.charts) == (report_id in ("rtl8139", "mpls"))
    assert ("cpu" in d.charts) == (report_id in ("vxlan", "splice", "vlan-nat"))


@pytest.mark.parametrize("report_id", IDS)
def test_every_control_changes_the_result(report_id):
    d = ui.dashboard(report_id)
    defaults = dict(d.values)
    for name, ctl in d.controls.items():
        d.set(**{**defaults, **CONTEXT.get((report_id, name), {})})   # each control moved alone
        before = signature(d)
        new = NEW_VALUE[name](d) if name in NEW_VALUE else (not ctl.value)
        ctl.value = new
        assert d.error is None, f"{report_id}: {name}={new}: {d.error}"
        assert d.result.settings[name] == new
        assert signature(d) != before, f"{report_id}: changing {name} to {new} changed nothing"


@pytest.mark.parametrize("report_id", IDS)
def test_invalid_mss_shows_the_library_message(report_id):
    d = ui.dashboard(report_id)
    good = d.result
    # the MTU the sender's MSS must fit: rtl8139's mtu control is the PPPoE hop, its guest NIC has 1500
    mtu = 1500 if report_id == "rtl8139" else d.controls["mtu"].value
    d.controls["mss"].value = mtu - 40            # no room left for the 12 bytes of timestamps
    assert d.error is not None and d.error.startswith(f"MSS {mtu - 40} does not fit in MTU {mtu}")
    assert "Traceback" not in d.message.value and "offloadkit-error" in d.message.value
    assert d.result is good                         # the last good result stays on screen
    d.controls["mss"].value = mtu - 52
    assert d.error is None and d.result.settings["mss"] == mtu - 52


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
    assert f"length {mss}" in " ".join(spec_texts(d.charts["trace"].spec))
    sizes = {row.get("payload", row.get("size")) for row in spec_rows(d.charts["sizes"].spec)}
    assert mss in sizes
    d.controls["mss"].value = mss - 200
    sizes = {row.get("payload", row.get("size")) for row in spec_rows(d.charts["sizes"].spec)}
    assert mss - 200 in sizes and f"length {mss - 200}" in " ".join(spec_texts(d.charts["trace"].spec))


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
    d.controls["nic_fixed"].value = True
    macvtap = {r["payload"] for r in spec_rows(d.charts["sizes"].spec) if r.get("point") == "macvtap"}
    assert macvtap == {1440}
    d.controls["csum_offload"].value = False
    assert "TSO needs TX checksum offload" in d.message.value


def test_mpls_drop_reason_follows_mpls_gso():
    d = ui.dashboard("mpls")
    assert "EPROTONOSUPPORT" in d.readout.value
    d.controls["mpls_gso"].value = True
    assert "EINVAL" in d.readout.value and "EPROTONOSUPPORT" not in d.readout.value
    d.controls["fixed_kernel"].value = True
    assert d.result.goodput_bps > 1e9


def test_vxlan_matches_the_preset_where_the_preset_has_the_nic():
    m = reports.get("vxlan")
    d = ui.dashboard("vxlan")
    assert d.result.goodput_bps == pytest.approx(m.run("broken").goodput_bps)
    d.controls["inner_csum"].value = True
    assert d.result.goodput_bps == pytest.approx(m.run("bnx2x").goodput_bps)
    d.controls["gro"].value = False
    assert d.result.goodput_bps == pytest.approx(m.run("gro_off").goodput_bps)


def test_splice_checksum_switch_is_fixed_and_says_why():
    d = ui.dashboard("splice")
    assert d.controls["csum_offload"].disabled
    d.controls["csum_offload"].value = False
    assert "no software-checksum path" in d.message.value


def test_reproduction_text_rounds_and_marks_misses():
    from offloadkit.reports import Reproduction, Tolerance
    from offloadkit.ui.report_common import reproduction_text, round_text
    rep = Reproduction("toy")
    rep.add("rate_Mbps", "Mb/s", 30000, 30047.73, Tolerance.rel(0.25), "fitted")
    rep.add("broken_Mbps", "Mb/s", (1, 10), 0.658464, Tolerance.exact(), "predicted")
    rep.add("errno", "errno", "EINVAL", "EINVAL", Tolerance.exact(), "predicted")
    text = reproduction_text(rep)
    assert text.splitlines()[0] == "toy: 2/3 within tolerance (1 fitted, 2 predicted)"
    assert "30000 " in text and "30047" not in text and "0.658 " in text and "1–10" in text
    assert "MISS" in text.splitlines()[3] and "e+" not in text
    assert [round_text(x) for x in (30047.73, 72.714, 0.658464, 6.65)] == ["30000", "72.7", "0.658", "6.65"]


def test_kernel_lab_text_says_why_it_is_skipped(monkeypatch):
    from offloadkit.lab.runner import LabSettings
    from offloadkit.ui.report_common import kernel_lab_text
    monkeypatch.setenv("OFFLOADKIT_LAB_FORCE_REFUSE", "1")
    text = kernel_lab_text({"A": LabSettings(bytes="1M"), "B": LabSettings(gro=False, bytes="1M")})
    assert text.startswith("Skipped: ") and "root" in text and len(text.splitlines()) == 1
