"""The intro dashboard: contract, the model behind it, and the textbook cases."""
from __future__ import annotations

import altair as alt
import pytest
from hypothesis import given, settings, strategies as st

from offloadkit import codes, ui
from offloadkit.engine.segment import check_mss_fits
from offloadkit.ui import intro
from offloadkit.ui.intro import NICS, ENCAPS, one_packet

from dashboard_helpers import spec_rows, spec_texts


@pytest.fixture(scope="module")
def dash():
    return ui.dashboard("intro")


def chart_payloads(d, point):
    return [r["payload"] for r in spec_rows(d.charts["sizes"].spec) if r.get("point") == point]


def same_as_library(d):
    v = d.values
    expect = one_packet(mss=v["mss"], mtu=v["mtu"], payload=v["payload"], tso=v["tso"], gro_on=v["gro"],
                        csum_offload=v["csum_offload"], nic=v["nic"], encap=v["encap"])
    assert d.result.lines == expect.lines
    assert d.readout.value == intro.readout(expect)
    for point in intro.POINTS:
        assert chart_payloads(d, point) == expect.sizes(point, delivered_only=False)
    texts = spec_texts(d.charts["trace"].spec)
    head = d.charts["trace"].spec.get("title", {}).get("text", "").replace("every line starts with: ", "")
    for lines in expect.lines.values():
        for line in lines[:8]:
            assert line in texts or line[len(head) + 1:] in texts
    return expect


def test_contract(dash):
    assert {"mss", "mtu", "gro", "csum_offload", "tso", "nic", "encap", "payload"} <= set(dash.controls)
    assert set(dash.charts) == {"trace", "sizes", "checksum"}
    assert all(isinstance(c, alt.JupyterChart) for c in dash.charts.values())
    assert dash.error is None and dash.result.sizes("wire") == [1448, 1432]
    same_as_library(dash)


NEW_VALUES = {"mss": 1000, "mtu": 9000, "payload": 5000, "tso": False, "gro": False, "csum_offload": False,
              "nic": "rtl8139-legacy", "encap": "PPPoE"}


@pytest.mark.parametrize("name", list(NEW_VALUES))
def test_each_control_changes_result_and_charts(name):
    d = ui.dashboard("intro")
    before = {k: c.spec for k, c in d.charts.items()}
    old_result = d.result
    d.controls[name].value = NEW_VALUES[name]
    assert d.error is None, d.error
    assert d.result is not old_result
    assert d.result.settings[{"gro": "gro"}.get(name, name)] == NEW_VALUES[name]
    expect = same_as_library(d)
    if name != "nic":  # the NIC model alone changes nothing for a 1448-byte MSS
        assert any(d.charts[k].spec != before[k] for k in d.charts)
    assert expect.settings == d.result.settings


def test_invalid_mss_shows_the_library_message(dash):
    d = ui.dashboard("intro")
    d.controls["mss"].value = 1000
    good = d.result
    d.controls["mss"].value = 1460
    with pytest.raises(ValueError) as e:
        check_mss_fits(1460, 1500, timestamps=True)
    assert d.error == str(e.value) == ("MSS 1460 does not fit in MTU 1500: IPv4 (20) + TCP (20) + options (12) "
                                       "leave 1448")
    assert str(e.value) in d.message.value.replace("&#x27;", "'")
    assert d.result is good and chart_payloads(d, "wire") == [1000, 1000, 880]
    d.controls["mtu"].value = 1600
    assert d.error is None and d.result.sizes("wire") == [1460, 1420]


def test_report_000_case():
    r = one_packet(mss=1440, nic="rtl8139-legacy", encap="PPPoE")
    assert r.sizes("sender stack") == [2880] and int(r.at("sender stack").ip_len[0]) == 2932
    assert r.sizes("wire") == [1448, 1432] and list(r.at("wire").ip_len) == [1500, 1484]
    assert r.sizes("after hop") == [1432] and list(r.dropped.drop) == [codes.DROP_MTU_SILENT]
    fixed = one_packet(mss=1440, nic="rtl8139-fixed", encap="PPPoE")
    assert fixed.sizes("wire") == [1440, 1440] and fixed.sizes("after GRO") == [2880]
    workaround = one_packet(mss=1440, nic="rtl8139-legacy", encap="PPPoE", tso=False)
    assert workaround.sizes("sender stack") == [1440, 1440] and workaround.sizes("after GRO") == [2880]


def test_mtu_1492_black_hole_needs_a_smaller_mss():
    r = one_packet(mss=1448, encap="PPPoE")
    assert r.sizes("after hop") == [1432] and "1492" in " ".join(r.notes)
    assert one_packet(mss=1440, encap="PPPoE").sizes("after hop") == [1440, 1440]


def test_checksum_passes_by_place():
    assert one_packet().passes_by_place() == []
    off = one_packet(csum_offload=False)
    places = {r["place"]: r for r in off.passes_by_place()}
    assert set(places) == {codes.PASS_SW_GSO, codes.PASS_GRO_VALIDATE}
    assert places[codes.PASS_SW_GSO] == {"place": codes.PASS_SW_GSO, "count": 2, "bytes": 32 * 2 + 2880}
    assert not off.tso_effective and "TSO needs TX checksum offload" in off.notes[0]
    nogro = one_packet(csum_offload=False, gro_on=False, tso=False)
    assert {r["place"] for r in nogro.passes_by_place()} == {codes.PASS_CSUM_HELP, codes.PASS_STACK_RX}


def test_device_that_cannot_segment():
    r = one_packet(nic="drop-gso")
    assert r.sizes("wire") == [] and r.sizes("after GRO") == [] and r.efficiency == 0
    assert list(r.dropped.drop) == [codes.DROP_GSO_EPROTONOSUPPORT]
    assert one_packet(nic="drop-gso", tso=False).sizes("after GRO") == [2880]


def test_unknown_choices_are_value_errors():
    with pytest.raises(ValueError, match="unknown NIC"):
        one_packet(nic="e1000")
    with pytest.raises(ValueError, match="unknown encapsulation"):
        one_packet(encap="GRE")
    with pytest.raises(ValueError, match="payload"):
        one_packet(payload=70000)


@settings(max_examples=40, deadline=None)
@given(mtu=st.integers(576, 9000), mss_frac=st.floats(0.05, 1.0), payload=st.integers(100, 64000),
       tso=st.booleans(), gro_on=st.booleans(), csum=st.booleans(), nic=st.sampled_from(list(NICS)),
       encap=st.sampled_from(list(ENCAPS)))
def test_bytes_are_conserved(mtu, mss_frac, payload, tso, gro_on, csum, nic, encap):
    mss = max(200, int((mtu - 52) * mss_frac))
    r = one_packet(mss=mss, mtu=mtu, payload=payload, tso=tso, gro_on=gro_on, csum_offload=csum, nic=nic,
                   encap=encap)
    assert sum(r.sizes("sender stack", delivered_only=False)) == payload
    sent = sum(r.sizes("wire"))
    assert sent in (0, payload)
    assert sum(r.sizes("after GRO")) == sum(r.sizes("after hop")) <= sent
    assert len(r.sizes("after GRO")) <= len(r.sizes("after hop"))
    if not r.tso_effective or nic in ("hw-tso", "rtl8139-fixed"):
        assert all(x <= mss for x in r.sizes("wire"))
    if not gro_on:
        assert r.sizes("after GRO") == r.sizes("after hop")
    if csum:
        assert len(r.passes) == 0
    elif r.sizes("after GRO"):
        assert len(r.passes) > 0
