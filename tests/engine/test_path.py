"""Encapsulation overheads and per-hop MTU checks (engine/path.py)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from numba import njit

from offloadkit import codes
from offloadkit.codes import DROP_MTU_ICMP, DROP_MTU_SILENT, ENC_MPLS, ENC_PPPOE, ENC_VLAN, ENC_VXLAN
from offloadkit.engine import path as pa
from offloadkit.engine.segment import segment
from offloadkit.trace import Trace


def test_overheads():
    assert pa.encap_overhead_bytes(0, 0) == 0
    assert pa.encap_overhead_bytes(ENC_VLAN, 0) == 4
    assert pa.encap_overhead_bytes(ENC_MPLS, 0) == 4 and pa.encap_overhead_bytes(ENC_MPLS, 3) == 12
    assert pa.encap_overhead_bytes(ENC_PPPOE, 0) == 8
    assert pa.encap_overhead_bytes(ENC_VXLAN, 0) == 50
    assert pa.encap_overhead_bytes(ENC_VLAN | ENC_PPPOE, 0) == 12
    assert Hop_ip(ENC_PPPOE) == 1492 and Hop_ip(ENC_VXLAN) == 1450


def Hop_ip(encap):
    return pa.Hop(1500, encap=encap).ip_mtu_bytes


def test_pppoe_black_hole_report_000():
    """1448 + 1432 from the buggy NIC: the 1500-byte segment dies silently on the PPPoE hop."""
    t = Trace.from_columns(ip_len=[1500, 1484, 1492, 1493], df=[True, True, True, False])
    out = pa.apply_hop(t, pa.Hop(1500, encap=ENC_PPPOE))
    assert out.drop.tolist() == [DROP_MTU_SILENT, 0, 0, 0]          # non-DF passes (no fragmentation model)
    icmp = pa.apply_hop(t, pa.Hop(1500, encap=ENC_PPPOE, icmp=True))
    assert icmp.drop.tolist() == [DROP_MTU_ICMP, 0, 0, 0]
    assert pa.pass_hop(t, pa.Hop(1500, encap=ENC_PPPOE)).ip_len.tolist() == [1484, 1492, 1493]
    assert len(pa.delivered(out)) == 3


def test_packet_encap_counts_and_existing_drops_kept():
    t = Trace.from_columns(ip_len=[1496, 1497, 1000], encap=[ENC_MPLS, ENC_MPLS, 0], mpls_labels=[1, 1, 0],
                           drop=[0, 0, codes.DROP_QUEUE_FULL])
    out = pa.apply_hop(t, pa.Hop(1500))
    assert out.drop.tolist() == [0, DROP_MTU_SILENT, codes.DROP_QUEUE_FULL]
    two = pa.apply_hop(t, pa.Hop(1500, encap=ENC_MPLS, mpls_labels=2))     # the hop pushes a second label
    assert two.drop.tolist() == [DROP_MTU_SILENT, DROP_MTU_SILENT, codes.DROP_QUEUE_FULL]


def test_segments_then_hop():
    t = Trace.from_columns(payload_len=[2880], gso_size=[1440], tcp_hlen=[32], ip_len=[2932])
    for nic, dropped in (("rtl8139-legacy", [DROP_MTU_SILENT, 0]), ("rtl8139-fixed", [0, 0])):
        out = pa.apply_hop(segment(t, nic=nic), pa.Hop(1500, encap=ENC_PPPOE))
        assert out.drop.tolist() == dropped


@pytest.mark.parametrize("kw,message", [
    (dict(mtu_bytes=40), "Hop MTU 40 is outside 68..65535"),
    (dict(mtu_bytes=1500.0), "Hop mtu_bytes must be an integer"),
    (dict(encap=0x40), "unknown bits"),
    (dict(encap=ENC_MPLS, mpls_labels=0), "mpls_labels 0 is outside 1..16"),
    (dict(mtu_bytes=100, encap=ENC_VXLAN), r"Hop MTU 100 minus VXLAN \(50\) leaves 50 bytes for IP"),
])
def test_hop_validation(kw, message):
    with pytest.raises(ValueError, match=message):
        pa.Hop(**kw)


def test_apply_hop_needs_a_hop():
    with pytest.raises(ValueError, match="needs a Hop"):
        pa.apply_hop(Trace.empty(1), 1500)


@njit
def _sim(ip_len):
    return pa.mtu_drop_reason(ip_len, True, 0, 0, 1500, ENC_PPPOE, 1, False)


def test_mtu_check_callable_from_njit():
    assert _sim(1492) == 0 and _sim(1493) == DROP_MTU_SILENT


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(40, 9000), min_size=1, max_size=30), st.integers(68, 9000),
       st.sampled_from([0, ENC_VLAN, ENC_PPPOE, ENC_MPLS | ENC_VLAN]), st.booleans())
def test_drop_iff_over_mtu(lens, mtu, encap, icmp):
    try:
        hop = pa.Hop(mtu, encap=encap, icmp=icmp)
    except ValueError:
        return
    t = Trace.from_columns(ip_len=lens)
    out = pa.apply_hop(t, hop)
    over = np.asarray(lens) > hop.ip_mtu_bytes
    assert np.array_equal(out.drop != 0, over)
    assert set(out.drop[over].tolist()) <= {DROP_MTU_ICMP if icmp else DROP_MTU_SILENT}


def test_warmup_runs():
    pa.warmup()
