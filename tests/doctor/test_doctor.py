"""offloadkit.doctor on synthetic captures: each signature found, healthy traffic left alone."""
from __future__ import annotations

import numpy as np
import pytest
from test_doctor_flows import on_wire, transfer, with_resends

from offloadkit import codes as C
from offloadkit.doctor import Finding, diagnose, diagnose_file
from offloadkit.engine.gro import GroParams, gro
from offloadkit.io.pcap import write_pcap
from offloadkit.resources import data_dir
from offloadkit.sim.scenario import Hop
from offloadkit.trace import Trace


def doc(tmp_path, trace: Trace, name: str = "cap.pcap", **hints):
    path = tmp_path / name
    write_pcap(path, trace)
    return diagnose_file(path, **hints)


def only(d, kind) -> Finding:
    fs = [f for f in d.findings if f.kind == kind]
    assert len(fs) == 1, [f.kind for f in d.findings]
    return fs[0]


def assert_healthy(d):
    assert d.alarms() == [], [(f.kind, f.message) for f in d.alarms()]


# -- healthy traffic ---------------------------------------------------------------------
def test_healthy_1448_transfer_on_the_wire(tmp_path):
    wire = on_wire(transfer(seg=1448, k=4, side="wire"))
    d = doc(tmp_path, wire)
    assert_healthy(d)
    assert "super-packets" not in d.kinds() and "black-hole" not in d.kinds()
    fs = only(d, "flow-stats").evidence
    assert fs["retransmitted_packets"] == 0 and fs["dup_acks"] == 0
    assert fs["bytes"] == 60 * 4 * 1448
    # 60 super-packets of 4*1448 bytes, 1 ms apart, the last ACK 0.3 ms after the last one
    assert fs["goodput_bps"] == pytest.approx(60 * 4 * 1448 * 8 / (59e-3 + 0.3e-3), rel=1e-3)


def test_sender_side_tso_capture_is_explained_not_alarmed(tmp_path):
    d = doc(tmp_path, transfer(seg=1448, k=10, side="sender", partial=True))
    assert_healthy(d)
    f = only(d, "super-packets")
    assert "above segmentation" in f.message
    assert f.evidence["largest_payload"] == 14480 and f.evidence["segment_size"] == 1448
    assert f.evidence["wire_segments_estimate"] == 600
    assert f.evidence["frames"][0] == 4            # SYN, SYN-ACK, ACK, then the first super-packet
    off = only(d, "checksum-offload")
    assert off.evidence["partial"] == 60
    assert d.flows[0]["side"] == "sender"


def test_receiver_side_gro_aggregates(tmp_path):
    wire = on_wire(transfer(seg=1448, k=8, side="receiver"))
    after = gro(wire, GroParams()).out
    d = doc(tmp_path, after)
    assert_healthy(d)
    f = only(d, "aggregates")
    assert "after GRO/LRO" in f.message
    assert f.evidence["exact_multiples"] == f.evidence["packets"] > 0
    assert "no-aggregation" not in d.kinds()


def test_pmtud_that_works_is_not_a_black_hole(tmp_path):
    """1448-byte segments dropped (ICMP), resent at 1440 once the ICMP arrived, then the sender
    uses 1440: no alarm. (The same drops with 1448s still sent after the resends are a black hole.)"""
    first = on_wire(transfer(n_super=3, seg=1448, k=2, side="wire"))
    before, _ = with_resends(first, Hop(mtu=1500, encap=("pppoe",), icmp=True), 1440, delay_ns=3_000_000)
    t_end = int(before.time_ns.max())
    rest = on_wire(transfer(n_super=40, seg=1440, k=2, side="wire"))
    rest = rest[rest.payload_len > 0]
    shift = int(first.seq_end[first.payload_len > 0].max()) - int(rest.seq[0])
    rest = rest.replace(seq=(rest.seq.astype(np.int64) + shift) & 0xFFFFFFFF, time_ns=rest.time_ns + t_end)
    d = doc(tmp_path, Trace.concat([before, rest]))
    assert "black-hole" not in d.kinds()
    assert_healthy(d)


# -- report 000: rtl8139 ------------------------------------------------------------------
@pytest.fixture(scope="module")
def rtl():
    """MSS 1452 + timestamps = 1440; 2880-byte TSO skbs cut 1448/1432 by the old QEMU; PPPoE drops 1448s."""
    guest = transfer(n_super=40, seg=1440, k=2, peer_mss=1452, side="wire", partial=True)
    wire = on_wire(guest, nic="rtl8139-legacy")
    before, after = with_resends(wire, Hop(mtu=1500, encap=("pppoe",)), 1440)
    return guest, wire, before, after


def test_rtl8139_segment_sizes_against_negotiated_mss(tmp_path, rtl):
    _, wire, _, _ = rtl
    d = doc(tmp_path, wire)
    f = only(d, "mss-mismatch")
    assert f.severity == "error"
    ev = f.evidence
    assert ev["mss_option"] == 1452 and ev["allowed_payload"] == 1440 and ev["timestamps"]
    assert ev["sizes"] == {1448: 40} and ev["partner_size"] == 1432 and ev["recut_pairs"] == 40
    assert "1448/1432" in f.message and "1440" in f.message and "report 000" in f.message
    assert ev["frames"][0] == 4


def test_rtl8139_black_hole_before_the_hop(tmp_path, rtl):
    _, _, before, _ = rtl
    d = doc(tmp_path, before)
    f = only(d, "black-hole")
    assert f.severity == "error"
    ev = f.evidence
    assert ev["lost_size"] == 1448 and ev["resent_size"] == 1440 and ev["events"] == 40
    assert ev["lost_ip_len"] == 1500 and ev["resent_ip_len"] == 1492
    assert ev["large_resent"] == ev["large_sent"] == 40
    ex = ev["examples"][0]
    assert ex["size"] == 1448 and ex["resent_size"] == 1440 and ex["resent_frame"] > ex["frame"]
    assert "mss-mismatch" in d.kinds()


def test_rtl8139_black_hole_seen_after_the_hop(tmp_path, rtl):
    _, _, _, after = rtl
    d = doc(tmp_path, after)
    f = only(d, "black-hole")
    assert f.evidence["hole_size"] == 1448 and f.evidence["holes"] == 40
    assert f.evidence["filled_by_size"] == 1440


@pytest.mark.parametrize("sack", [True, False])
def test_rtl8139_seen_from_the_guest(tmp_path, rtl, sack):
    """Above segmentation: every super-packet's first MSS is resent alone. With SACK, the receiver
    reported the second piece (1448..2880) before the resend: only the head was lost (report 000)."""
    guest, _, _, _ = rtl
    sup = guest[(guest.payload_len > 0)]
    re = sup.replace(payload_len=np.full(len(sup), 1440), time_ns=sup.time_ns + 400_000,
                     ip_len=np.full(len(sup), 1492), gso_size=np.zeros(len(sup)), gso_segs=np.zeros(len(sup)))
    g = guest
    if sack:
        acks = np.flatnonzero((g.direction == 1) & (g.time_ns > sup.time_ns[0]))
        start = sup.seq.astype(np.int64)
        sk = np.zeros((len(g), 8), np.uint32)
        sk[acks, 0], sk[acks, 1] = (start + 1448) & 0xFFFFFFFF, (start + 2880) & 0xFFFFFFFF
        a = g.ack.copy()
        a[acks] = start
        sn = np.zeros(len(g), np.uint8)
        sn[acks] = 1
        g = g.replace(ack=a, sack=sk, sack_n=sn, tcp_hlen=np.where(sn > 0, 44, g.tcp_hlen))
    d = doc(tmp_path, Trace.concat([g, re]).sort_by_time())
    f = only(d, "black-hole")
    assert f.evidence["large_resent"] == 40 and f.evidence["resent_size"] == 1440
    assert "super-packets" in d.kinds()
    if sack:
        assert f.evidence["sacked_later_part"] == 40
        assert "Only the first segment" in f.message and "report 000" in f.message
    else:
        assert f.evidence["sacked_later_part"] is None and "no SACK blocks" in f.message


def test_fixed_nic_gives_no_alarm(tmp_path, rtl):
    guest, _, _, _ = rtl
    wire = on_wire(guest, nic="rtl8139-fixed")
    assert set(wire.payload_len[wire.payload_len > 0].tolist()) == {1440}
    assert_healthy(doc(tmp_path, wire))


# -- report 002: no aggregation -------------------------------------------------------------
def vxlan_inner(n=100):
    """1398-byte segments (inner MTU 1450, MSS option 1410) at the receiver, never merged."""
    return on_wire(transfer(n_super=n // 4, seg=1398, k=4, peer_mss=1410, own_mss=1410, side="receiver"))


def test_no_aggregation_is_info_without_hint_and_warning_with_gro_on(tmp_path):
    d = doc(tmp_path, vxlan_inner())
    f = only(d, "no-aggregation")
    assert f.severity == "info" and "if GRO is on" in f.message
    assert f.evidence["max_payload"] == 1398 and f.evidence["ip_len"] == 1450
    assert "1450 = 1500 - 50" in f.message
    d_on = diagnose_file(tmp_path / "cap.pcap", gro="on")
    assert only(d_on, "no-aggregation").severity == "warning"
    assert "no-aggregation" not in diagnose_file(tmp_path / "cap.pcap", gro="off").kinds()


def test_vxlan_encapsulated_capture_names_the_tunnel_gate(tmp_path):
    inner = vxlan_inner()
    t = inner.replace(encap=np.full(len(inner), C.ENC_VXLAN), vni=np.full(len(inner), 99),
                      outer_udp_csum=np.zeros(len(inner)))
    f = only(doc(tmp_path, t), "no-aggregation")
    assert f.evidence["vxlan_packets"] == 100 and f.evidence["outer_udp_csum_zero"] == 100
    assert "report 002" in f.message


def test_aggregated_receiver_has_no_no_aggregation_finding(tmp_path):
    after = gro(vxlan_inner(), GroParams()).out
    assert after.payload_len.max() > 1398
    assert "no-aggregation" not in doc(tmp_path, after).kinds()


def test_sender_capture_never_gets_no_aggregation(tmp_path):
    t = on_wire(transfer(n_super=25, seg=1398, k=4, peer_mss=1410, side="sender"))
    assert "no-aggregation" not in doc(tmp_path, t).kinds()


# -- checksums -----------------------------------------------------------------------------
def test_bad_checksums_at_the_receiver_are_corruption(tmp_path):
    wire = on_wire(transfer(n_super=10, seg=1448, k=2, side="receiver"))
    bad = np.zeros(len(wire), bool)
    data_rows = np.flatnonzero(wire.payload_len > 0)
    bad[data_rows[[1, 5, 7]]] = True
    d = doc(tmp_path, wire.replace(csum_bad=bad, tcp_csum=np.where(bad, 0x1234, 0)))
    f = only(d, "checksum-corruption")
    assert f.severity == "error" and f.evidence["packets"] == 3
    assert f.evidence["frames"] == [int(x) + 1 for x in data_rows[[1, 5, 7]]]


def test_same_checksums_on_the_sender_are_offload(tmp_path):
    t = on_wire(transfer(n_super=10, seg=1448, k=2, side="sender"))
    bad = (t.payload_len > 0) & (np.arange(len(t)) % 2 == 0)
    d = doc(tmp_path, t.replace(csum_bad=bad, tcp_csum=np.where(bad, 0x1234, 0)))
    assert "checksum-corruption" not in d.kinds()
    assert only(d, "checksum-offload").evidence["other_wrong"] == int(bad.sum())
    assert_healthy(d)


def test_side_hint_overrides_inference(tmp_path):
    t = on_wire(transfer(n_super=10, seg=1448, k=2, side="wire"))
    bad = t.payload_len > 0
    write_pcap(tmp_path / "c.pcap", t.replace(csum_bad=bad, tcp_csum=np.where(bad, 0x1234, 0)))
    assert "checksum-unverified" in diagnose_file(tmp_path / "c.pcap").kinds()
    assert "checksum-corruption" in diagnose_file(tmp_path / "c.pcap", side="receiver").kinds()
    assert "checksum-offload" in diagnose_file(tmp_path / "c.pcap", side="sender").kinds()


# -- statistics ------------------------------------------------------------------------------
def test_retransmissions_dup_acks_and_sack_holes(tmp_path):
    wire = on_wire(transfer(n_super=20, seg=1000, k=2, peer_mss=1012, side="sender"))
    data = np.flatnonzero(wire.payload_len > 0)
    lost = data[10]
    hole_start = int(wire.seq[lost])
    hole_end = int(wire.seq_end[lost])
    acks = np.flatnonzero((wire.direction == 1) & (wire.time_ns > wire.time_ns[lost]))
    a = wire.ack.astype(np.int64).copy()
    sack_n = np.zeros(len(wire), np.uint8)
    sack = np.zeros((len(wire), 8), np.uint32)
    for i in acks[:4]:
        a[i] = hole_start
        sack_n[i] = 1
        sack[i, :2] = (hole_end, int(wire.ack[i]))
    t = wire.replace(ack=a, sack_n=sack_n, sack=sack, opt_sackok=np.ones(len(wire)),
                     tcp_hlen=np.where(sack_n > 0, 44, wire.tcp_hlen))
    resend = t[[lost]].replace(time_ns=t.time_ns[[acks[3]]] + 1000)
    d = doc(tmp_path, Trace.concat([t, resend]).sort_by_time())
    fs = only(d, "flow-stats").evidence
    assert fs["retransmitted_packets"] == 1 and fs["retransmitted_bytes"] == 1000
    # the ACK of the previous super-packet already acked up to the hole: 4 duplicates follow it
    assert fs["dup_acks"] == 4 and fs["sack_holes"] == 1 and fs["largest_sack_hole"] == 1000
    assert_healthy(d)


def test_heavy_retransmission_is_reported(tmp_path, rtl):
    _, _, before, _ = rtl
    d = doc(tmp_path, before)
    f = only(d, "retransmissions")
    assert f.evidence["retransmitted_packets"] == 40


# -- robustness ------------------------------------------------------------------------------
def test_truncated_capture_is_diagnosed_on_what_was_read(tmp_path, rtl):
    _, wire, before, _ = rtl
    write_pcap(tmp_path / "full.pcap", before)
    raw = (tmp_path / "full.pcap").read_bytes()
    (tmp_path / "cut.pcap").write_bytes(raw[: len(raw) * 2 // 3 + 7])
    d = diagnose_file(tmp_path / "cut.pcap")
    dmg = only(d, "capture-damaged")
    assert dmg.severity == "warning" and dmg.evidence["packets_read"] == d.packets
    assert 0 < d.packets < len(before)
    assert "black-hole" in d.kinds() and "mss-mismatch" in d.kinds()


def test_unreadable_input_raises_value_error(tmp_path):
    (tmp_path / "junk.pcap").write_bytes(b"this is not a capture at all")
    with pytest.raises(ValueError, match="not a pcap"):
        diagnose_file(tmp_path / "junk.pcap")
    with pytest.raises(ValueError):
        diagnose_file(tmp_path / "missing.pcap")


def test_empty_and_tiny_traces():
    assert diagnose(Trace.empty()).kinds() == {"no-tcp"}
    one = on_wire(transfer(n_super=1, seg=1448, k=1))
    for i in range(len(one)):
        d = diagnose(one[i:i + 1])
        assert d.alarms() == []


@pytest.mark.parametrize("v6", [False, True])
def test_ipv6_and_wrapping_sequence_numbers(tmp_path, v6):
    t = on_wire(transfer(n_super=30, seg=1428, k=2, peer_mss=1440, own_mss=1440, side="wire"))
    # start just below 2**32 so the transfer wraps
    t = t.replace(seq=(t.seq.astype(np.int64) + (2**32 - 1_000_000 - 30_000)) & 0xFFFFFFFF,
                  ack=np.where(t.direction == 1, (t.ack.astype(np.int64) + 2**32 - 1_030_000) & 0xFFFFFFFF, t.ack))
    if v6:
        a6 = np.frombuffer(bytes.fromhex("20010db8000000000000000000000001"), np.uint8)
        b6 = a6.copy()
        b6[-1] = 2
        src = np.where((t.direction == 0)[:, None], a6, b6)
        dst = np.where((t.direction == 0)[:, None], b6, a6)
        t = t.replace(ip_version=np.full(len(t), 6), src_ip6=src, dst_ip6=dst, ip_hlen=np.full(len(t), 40),
                      ip_len=40 + t.tcp_hlen.astype(np.int64) + t.payload_len)
    d = doc(tmp_path, t)
    assert_healthy(d)
    assert d.mtu == 1500            # MSS option 1440 + 60 (IPv6) or + 40 (IPv4, the larger SYN option wins)
    fs = only(d, "flow-stats").evidence
    assert fs["retransmitted_packets"] == 0 and fs["holes_at_capture"] == 0
    assert fs["bytes"] == 30 * 2 * 1428
    # 1436-byte segments: over the MSS (1440 - 12 = 1428); over the MTU too with IPv6 (40 + 32 + 1436)
    big = t.replace(payload_len=np.where(t.payload_len > 0, 1436, 0))
    big = big.replace(ip_len=(40 if v6 else 20) + big.tcp_hlen.astype(np.int64) + big.payload_len,
                      seq=t.seq[0] + np.cumsum(np.concatenate([[0], big.payload_len[:-1]])) * (big.direction == 0)
                      + t.seq * (big.direction == 1))
    kinds = doc(tmp_path, big, "big.pcap").kinds()
    assert ("super-packets" in kinds) if v6 else ("mss-mismatch" in kinds)


def test_json_shape(tmp_path, rtl):
    import json
    _, wire, _, _ = rtl
    d = doc(tmp_path, wire)
    js = json.loads(json.dumps(d.to_dict()))
    assert js["worst"] == "error" and js["packets"] == len(wire)
    for f in js["findings"]:
        assert set(f) == {"kind", "severity", "message", "evidence"}
        assert f["severity"] in ("info", "warning", "error")
    assert js["flows"][0]["flow"] == 0


def test_bad_hints_are_value_errors():
    t = transfer(n_super=2)
    with pytest.raises(ValueError, match="sender"):
        diagnose(t, side="middle")
    with pytest.raises(ValueError, match="MTU"):
        diagnose(t, mtu=20)


def test_many_flows_are_summarised(tmp_path):
    one = vxlan_inner(64)
    parts = []
    for k in range(8):
        port = np.where(one.direction == 0, 41000 + k, 5201)
        parts.append(one.replace(sport=port, dport=np.where(one.direction == 0, 5201, 41000 + k),
                                 time_ns=one.time_ns + k * 10**9))
    d = doc(tmp_path, Trace.concat(parts))
    noagg = [f for f in d.findings if f.kind == "no-aggregation"]
    assert len(noagg) == 5 and noagg[0].evidence["more_flows"] == 3
    assert len([f for f in d.findings if f.kind == "flow-stats"]) == 5
    assert only(d, "flows").evidence["flows"] == 8
    assert len(d.flows) == 8 and all(r["bytes"] == 64 * 1398 for r in d.flows)


# -- a capture holding a single GSO packet -------------------------------------------------
def _lone_tso_packet(partial: bool) -> Trace:
    t = transfer(n_super=1, seg=1448, k=5, side="sender", partial=partial)
    return t[(t.direction == 0) & (t.payload_len > 0)]          # no handshake, no ACK: just the packet


def test_a_lone_tso_packet_with_a_pseudo_header_checksum_is_a_super_packet_not_a_jumbo_frame(tmp_path):
    lone = _lone_tso_packet(partial=True)
    assert len(lone) == 1 and int(lone.payload_len[0]) == 7240
    d = doc(tmp_path, lone)
    assert d.mtu == 1500 and "jumbo" not in d.mtu_from
    f = only(d, "super-packets")
    assert f.evidence["largest_payload"] == 7240 and f.evidence["segment_size"] == 1448
    assert f.evidence["wire_segments_estimate"] == 5


def test_the_same_packet_with_a_full_checksum_may_still_be_a_jumbo_frame(tmp_path):
    d = doc(tmp_path, _lone_tso_packet(partial=False))
    assert "jumbo" in d.mtu_from and d.mtu == 7240 + 52


def test_ipv6_link_mtu_counts_the_ipv6_header():
    """A 6.18 IPv6 transfer at MTU 1500 (MSS option 1440): 1440 + 60 bytes of IPv6/TCP headers."""
    d = diagnose_file(data_dir() / "captures" / "ipv6" / "v6-ts-mtu1500" / "rcv.pcap")
    assert d.mtu == 1500 and "60 bytes of IPv6/TCP" in d.mtu_from, d.mtu_from
