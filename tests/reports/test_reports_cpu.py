"""Reports 002 (vxlan), 003 (splice) and 004 (vlan-nat) from the CPU model: every target
asserted on the model's own output, plus the mechanism behind it."""
from __future__ import annotations

import pytest

from offloadkit import codes
from offloadkit.reports import splice, vlan_nat, vxlan
from offloadkit.reports.facts import load_facts

VX, SP, VN = (load_facts(r).targets for r in ("vxlan", "splice", "vlan-nat"))


# ------------------------------------------------------------------ vxlan (002)
def test_vxlan_tap_sizes_from_the_gro_gate():
    broken, agg = vxlan.run("broken"), vxlan.run("bnx2x")
    tap = broken.at("tap")
    assert VX["tap_packet_no_aggregation_bytes"].check(int(tap.payload_len.max()))
    assert int(tap.payload_len.min()) == int(tap.payload_len.max())           # "they're all 1398"
    assert len(tap) == len(broken.at("nic"))                                   # nothing merged
    assert VX["tap_packet_aggregated_max_bytes"].check(int(agg.at("tap").payload_len.max()))
    assert len(agg.at("tap")) * 10 < len(agg.at("nic"))
    # the tap sees inner packets: no VXLAN left
    assert not (broken.at("tap").encap & codes.ENC_VXLAN).any()
    assert (broken.at("nic").encap & codes.ENC_VXLAN).all()


def test_vxlan_rates_and_vhost_cpu():
    broken, agg = vxlan.run("broken"), vxlan.run("bnx2x")
    assert VX["rx_throughput_mlx4_Gbps"].check(broken.goodput_bps / 1e9)
    assert VX["rx_throughput_bnx2x_Gbps"].check(agg.goodput_bps / 1e9)
    assert broken.info["bottleneck"] == "vhost"
    assert VX["vhost_cpu_higher_mlx4"].check(broken.info["vhost_cpu"] > agg.info["vhost_cpu"])


def test_vxlan_fix_and_workaround_restore_aggregation():
    for v in ("fixed", "workaround"):
        r = vxlan.run(v)
        assert r.info["tap_payload_max"] > 10 * vxlan.run("broken").info["tap_payload_max"], v
        assert r.goodput_bps > vxlan.run("broken").goodput_bps
    assert vxlan.run("broken", tunnel_rule="new").info["tap_payload_max"] >= vxlan.run("broken").info["tap_payload_max"]


# ------------------------------------------------------------------ splice (003)
def test_splice_below_and_above_the_limit():
    below, above = splice.run("below"), splice.run("broken")
    assert SP["throughput_below_Gbps"].check(below.info["wire_rate_bps"] / 1e9)
    assert SP["cpu_below_pct"].check(100 * below.info["cpu"])
    assert below.info["bottleneck"] == "link" and above.info["bottleneck"] == "cpu"
    assert SP["throughput_above_Gbps"].check(above.info["wire_rate_bps"] / 1e9)
    assert SP["cpu_above_pct"].check(100 * above.info["cpu"])


def test_splice_cliff_in_the_window_and_moves_with_the_cache():
    c = splice.cliff()
    assert SP["cliff_sessions"].check(c)
    assert splice.cliff(cache_bytes=2 * 8388608) > 1.5 * c


def test_splice_allocation_share_rises():
    below, above = splice.run("below"), splice.run("broken")
    n_b = len(load_facts("splice").group("samples.below."))
    n_a = len(load_facts("splice").group("samples.above."))
    sb, sa = splice.alloc_share(below.result, n_b), splice.alloc_share(above.result, n_a)
    assert SP["alloc_share_below_pct"].check(100 * sb)
    assert sa > 2 * sb                                    # the report: 12 % -> 41.5 %


def test_splice_allocation_share_above_matches_the_seed():
    n_a = len(load_facts("splice").group("samples.above."))
    assert SP["alloc_share_above_pct"].check(100 * splice.alloc_share(splice.run("broken").result, n_a))


def test_splice_fix_and_gro_help_above_the_limit():
    base = splice.run("broken").goodput_bps
    assert splice.run("fixed").goodput_bps > base
    assert splice.run("gro").goodput_bps > base


# ------------------------------------------------------------------ vlan-nat (004)
@pytest.mark.parametrize("cell", list(vlan_nat.CELLS))
def test_vlan_nat_cells(cell):
    assert VN[vlan_nat.CELLS[cell]].check(vlan_nat.run(cell).goodput_bps / 1e6)


def test_vlan_nat_csum_shares_and_why():
    off, on = vlan_nat.run("gro_off_ct1"), vlan_nat.run("gro_on_ct1")
    assert VN["csum_partial_share_gro_off_pct"].check(100 * off.info["csum_partial_share"])
    assert VN["csum_partial_share_gro_on_pct"].check(100 * on.info["csum_partial_share"])
    assert vlan_nat.run("gro_off_ct0").info["csum_partial_share"] == 0
    assert vlan_nat.run("gro_off_ct0").info["bottleneck"] == "link"
    # GRO on: conntrack's setting no longer matters (GRO validated the checksum)
    assert vlan_nat.run("gro_on_ct0").goodput_bps == pytest.approx(vlan_nat.run("gro_on_ct1").goodput_bps, rel=0.02)


def test_vlan_nat_points_show_gro_and_software_gso():
    r = vlan_nat.run("broken")
    lan, fwd, wan = (r.at(p) for p in vlan_nat.POINTS)
    assert len(fwd) * 10 < len(lan) and len(wan) == len(lan)
    assert int(fwd.payload_len.max()) > 10 * int(lan.payload_len.max())
    off = vlan_nat.run("fixed")
    assert len(off.at("forward")) == len(off.at("lan"))


def test_vlan_nat_fits_are_solved_not_typed():
    fits = vlan_nat.calibrate()
    c = fits["csum_ns_per_byte"].value
    assert 3.0 < c < 4.5                                 # reports.md: ~3.5-4.2 ns/B per pass
    assert vlan_nat.run("gro_off_ct1").goodput_bps / 1e6 == pytest.approx(
        load_facts("vlan-nat").value("throughput_gro_off_ct1_Mbps"), rel=1e-6)
    unfitted = vlan_nat.run("gro_on_ct0", fitted=False).goodput_bps
    assert unfitted != pytest.approx(vlan_nat.run("gro_on_ct0").goodput_bps, rel=1e-6)
    assert vlan_nat.run("hw_csum").goodput_bps > vlan_nat.run("broken").goodput_bps
