"""Report 000 (rtl8139) from the model: sizes at both capture points, the black hole, the
1-MSS retransmission, the throughputs, and the tcpdump lines against the seed's."""
from __future__ import annotations

import numpy as np
import pytest

from offloadkit import codes
from offloadkit.reports import rtl8139 as R
from offloadkit.reports import tcpsetup
from offloadkit.reports.facts import load_facts

F = load_facts("rtl8139")
T = F.targets


@pytest.fixture(scope="module")
def broken():
    return R.run("broken")


def test_guest_super_packets_and_macvtap_split(broken):
    sp, segs = R.first_super_packet(broken)
    mss = F.value("mss_clamp_bytes") - F.value("tcp_options_bytes")         # 1452 - 12 = 1440
    assert int(sp.payload_len[0]) == 2 * mss and sp.gso_size[0] == mss
    assert T["guest_tso_payload_bytes"].check(int(sp.payload_len[0]))
    assert T["guest_tso_ip_length_bytes"].check(int(sp.ip_len[0]))
    assert T["host_payload_large_bytes"].check(int(segs.payload_len[0]))
    assert T["host_payload_small_bytes"].check(int(segs.payload_len[1]))
    assert T["host_ip_length_large_bytes"].check(int(segs.ip_len[0]))
    assert T["host_ip_length_small_bytes"].check(int(segs.ip_len[1]))
    # alternating at macvtap: every multi-segment send becomes 1448 + 1432
    m = broken.at("macvtap")
    sizes = set(m.payload_len[(m.direction == 0) & (m.payload_len > 0)].tolist())
    assert {1448, 1432} <= sizes and all(s <= 1448 for s in sizes)


def test_only_the_1500_byte_packets_die_at_the_pppoe_hop(broken):
    ppp = broken.result.at("ppp")
    data = ppp[ppp.direction == 0]
    dropped = data[data.drop != codes.DROP_NONE]
    assert len(dropped) > 0 and set(dropped.drop.tolist()) == {codes.DROP_MTU_SILENT}
    assert T["dropped_ip_length_bytes"].check(int(np.unique(dropped.ip_len)[0]))
    assert (dropped.ip_len > F.value("pppoe_mtu_bytes")).all()
    passed = data[data.drop == codes.DROP_NONE]
    assert (passed.ip_len <= F.value("pppoe_mtu_bytes")).all()


def test_retransmission_is_one_mss_and_passes(broken):
    rtx = R.first_retransmission(broken.result.at("guest"))
    assert T["retransmit_payload_bytes"].check(int(rtx.payload_len[0]))
    assert T["retransmit_ip_length_bytes"].check(int(rtx.ip_len[0]))
    assert rtx.gso_segs[0] == 0                      # not a TSO packet: QEMU does not cut it


def test_throughputs():
    off, on, fixed = (R.run(v).info["goodput_kBps"] for v in ("workaround", "broken", "fixed"))
    assert T["throughput_tso_off_kBps"].check(off)
    assert T["throughput_tso_on_kBps"].check(on)
    assert T["throughput_fixed_tso_on_kBps"].check(fixed)
    assert off / on > 5                              # "around a factor of 10"


def test_gso_only_and_fixed_send_1440_on_the_wire():
    for v in ("fixed", "gso_only"):
        m = R.run(v).at("macvtap")
        sizes = set(m.payload_len[(m.direction == 0) & (m.payload_len > 0)].tolist())
        assert max(sizes) == F.value("e1000e_payload_bytes"), v


def test_link_rate_fit_solves_the_tso_off_cell():
    fit = R.calibrate()["link_rate_bps"]
    assert fit.target == "throughput_tso_off_kBps"
    off = R.run("workaround", rate_bps=fit.value).info["goodput_kBps"]
    assert off == pytest.approx(F.value("throughput_tso_off_kBps"), rel=1e-3)
    slower = R.run("workaround", rate_bps=fit.value / 2).info["goodput_kBps"]
    assert slower < 0.6 * off                        # the fit moves the number: it is a real parameter


@pytest.mark.parametrize("point", ["guest", "macvtap"])
def test_tcpdump_lines_match_the_seed_field_by_field(broken, point):
    model = R.model_excerpt(broken, point, point)
    assert tcpsetup.compare_lines(model, F.excerpts[point]) == []


def test_compare_lines_sees_a_difference():
    seed = list(F.excerpts["guest"])
    bad = [line.replace("length 2880", "length 2881") for line in seed]
    assert tcpsetup.compare_lines(bad, seed)
    assert tcpsetup.compare_lines(seed[:-2], seed)
    # ignored fields: timestamps, addresses, IP IDs, checksums
    same = [line.replace("17:36:07", "09:00:00").replace("id 38670", "id 1").replace("0x2c25", "0x0000")
            for line in seed]
    assert tcpsetup.compare_lines(same, seed) == []


def test_pmtu_discovery_cannot_help_the_legacy_nic():
    """With ICMP the guest learns MTU 1492, but its MSS is already 1440: QEMU still cuts 1448."""
    r = R.run("broken", icmp=True)
    assert codes.DROP_NAMES[codes.DROP_MTU_ICMP] in r.info["drops"]
    assert r.info["goodput_kBps"] < 0.3 * R.run("workaround").info["goodput_kBps"]
