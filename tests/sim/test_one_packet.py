"""The intro's one-packet pipeline (sim/one_packet.py): the textbook cases and conservation."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from offloadkit import codes
from offloadkit.sim.one_packet import ENCAPS, NICS, max_mss, one_packet
from offloadkit.sim.scenario import rx_csum_mode, tso_requires_tx_csum


def test_tx_and_rx_checksum_are_separate():
    tx_off = one_packet(tx_csum=False)
    assert not tx_off.tso_effective and {r["place"] for r in tx_off.passes_by_place()} == {codes.PASS_SW_GSO}
    rx_off = one_packet(rx_csum=False)
    assert rx_off.tso_effective and {r["place"] for r in rx_off.passes_by_place()} == {codes.PASS_GRO_VALIDATE}


def test_the_two_kernel_rules_and_the_mss_limit():
    assert tso_requires_tx_csum(True, True) and not tso_requires_tx_csum(True, False) and not tso_requires_tx_csum(False, True)
    assert (rx_csum_mode(True), rx_csum_mode(False)) == ("unnecessary", "none")
    assert max_mss(1500) == 1448 and max_mss(1492) == 1440
    one_packet(mss=max_mss(1000), mtu=1000)
    with pytest.raises(ValueError, match="does not fit"):
        one_packet(mss=max_mss(1000) + 1, mtu=1000)


def test_dropped_packets_are_in_the_lines_and_counted():
    r = one_packet(mss=1448, encap="PPPoE")
    assert r.packets("after hop") == 2 and len(r.lines["after hop"]) == 2
    assert "dropped here" in r.lines["after hop"][0]
    d = one_packet(nic="drop-gso")
    assert d.packets("wire") == 1 and "dropped here" in d.lines["wire"][0]


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
    off = one_packet(tx_csum=False, rx_csum=False)
    places = {r["place"]: r for r in off.passes_by_place()}
    assert set(places) == {codes.PASS_SW_GSO, codes.PASS_GRO_VALIDATE}
    assert places[codes.PASS_SW_GSO] == {"place": codes.PASS_SW_GSO, "count": 2, "bytes": 32 * 2 + 2880}
    assert not off.tso_effective and "TSO needs TX checksum offload" in off.notes[0]
    nogro = one_packet(tx_csum=False, rx_csum=False, gro=False, tso=False)
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
       tso=st.booleans(), gro=st.booleans(), tx_csum=st.booleans(), rx_csum=st.booleans(), nic=st.sampled_from(list(NICS)),
       encap=st.sampled_from(list(ENCAPS)))
def test_bytes_are_conserved(mtu, mss_frac, payload, tso, gro, tx_csum, rx_csum, nic, encap):
    mss = max(200, int((mtu - 52) * mss_frac))
    r = one_packet(mss=mss, mtu=mtu, payload=payload, tso=tso, gro=gro, tx_csum=tx_csum, rx_csum=rx_csum, nic=nic,
                   encap=encap)
    assert sum(r.sizes("sender stack", delivered_only=False)) == payload
    sent = sum(r.sizes("wire"))
    assert sent in (0, payload)
    assert sum(r.sizes("after GRO")) == sum(r.sizes("after hop")) <= sent
    assert len(r.sizes("after GRO")) <= len(r.sizes("after hop"))
    if not r.tso_effective or nic in ("hw-tso", "rtl8139-fixed"):
        assert all(x <= mss for x in r.sizes("wire"))
    if not gro:
        assert r.sizes("after GRO") == r.sizes("after hop")
    if tx_csum and rx_csum:
        assert len(r.passes) == 0
    elif r.sizes("after GRO") and not rx_csum:
        assert len(r.passes) > 0
