"""IPv6 and BIG TCP segmentation (ipv6_gso_segment, tcp6_gso_segment, ipv6_hopopt_jumbo_remove)."""
import ipaddress

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import segment_ref as ref

from offloadkit import codes
from offloadkit.codes import ACK, CWR, FIN, PSH
from offloadkit.engine import segment as sg
from offloadkit.trace import Trace

SRC6 = list(ipaddress.IPv6Address("2001:2::1:1").packed)
DST6 = list(ipaddress.IPv6Address("2001:2::2:2").packed)


def sp6(payload_len, gso_size, ext=0, jumbo=False, **kw):
    """A one-row IPv6 super-packet with timestamps (tcp_hlen 32) and ``ext`` extension-header bytes."""
    ip_hlen = 40 + ext + (8 if jumbo else 0)
    cols = dict(ip_version=[6], src_ip6=[SRC6], dst_ip6=[DST6], ip_hlen=[ip_hlen], hbh_jumbo=[jumbo],
                payload_len=[payload_len], gso_size=[gso_size], tcp_hlen=[32], opt_ts=[True], tsval=[7],
                tsecr=[9], ip_len=[ip_hlen + 32 + payload_len], flags=[ACK | PSH], seq=[1000], ack=[5],
                sport=[5201], dport=[40000], window=[235], tos=[0x28], ttl=[63], flow_label=[0xABCDE],
                time_ns=[123], frame=[7], ip_id=[0], ip_csum=[0])
    cols.update({k: [v] for k, v in kw.items()})
    return Trace.from_columns(**cols)


def col(t, name):
    return t.columns[name].tolist()


def ipv6_payload_length_field(t):
    """What each row's IPv6 header says: ip_len - 40, or 0 above 65535 (a jumbogram)."""
    plen = t.ip_len.astype(np.int64) - 40
    return np.where(plen > 0xFFFF, 0, plen).tolist()


def test_ipv6_split_copies_traffic_class_flow_label_hop_limit_and_has_no_ip_id():
    o = sg.segment(sp6(3000, 1428))
    assert col(o, "payload_len") == [1428, 1428, 144]
    assert col(o, "seq") == [1000, 2428, 3856]
    assert ipv6_payload_length_field(o) == [1460, 1460, 176]        # 32 + payload
    assert col(o, "ip_len") == [1500, 1500, 216]
    assert col(o, "flow_label") == [0xABCDE] * 3 and col(o, "tos") == [0x28] * 3 and col(o, "ttl") == [63] * 3
    assert col(o, "ip_id") == [0] * 3 and col(o, "ip_csum") == [0] * 3
    assert col(o, "flags") == [ACK, ACK, ACK | PSH]
    assert col(o, "ip_version") == [6] * 3 and col(o, "frame") == [7] * 3


def test_ipv6_flag_rules_as_ipv4():
    o = sg.segment(sp6(3000, 1000, flags=ACK | PSH | FIN | CWR))
    assert col(o, "flags") == [ACK | CWR, ACK, ACK | PSH | FIN]


def test_ipv6_extension_headers_are_carried_by_every_segment():
    o = sg.segment(sp6(3000, 1420, ext=8))           # e.g. a destination-options header
    assert col(o, "ip_hlen") == [48] * 3
    assert ipv6_payload_length_field(o) == [8 + 32 + 1420, 8 + 32 + 1420, 8 + 32 + 160]


def test_big_tcp_ipv6_80000_bytes_becomes_55_full_segments_and_the_remainder():
    """The issue's check: an 80,000-byte BIG TCP packet (payload length 0 + jumbo HBH) at MSS 1440."""
    t = sp6(80000, 1440, jumbo=True)
    assert ipv6_payload_length_field(t) == [0]                    # a jumbogram on the wire
    o = sg.segment(t)
    assert len(o) == 56
    assert col(o, "payload_len") == [1440] * 55 + [80000 - 55 * 1440]
    assert col(o, "ip_hlen") == [40] * 56                           # the HBH is gone from every segment
    assert col(o, "hbh_jumbo") == [False] * 56
    assert ipv6_payload_length_field(o) == [32 + 1440] * 55 + [32 + 800]
    assert col(o, "seq")[-1] == 1000 + 55 * 1440
    assert col(sg.segment(t, gso_size=1440), "payload_len") == col(o, "payload_len")


def test_jumbo_header_kept_below_gro_legacy_max_size():
    """ipv6_has_hopopt_jumbo acts only above GRO_LEGACY_MAX_SIZE (65536 bytes)."""
    o = sg.segment(sp6(3000, 1440, jumbo=True))
    assert col(o, "ip_hlen") == [48] * 3 and col(o, "hbh_jumbo") == [True] * 3
    assert not sg.ipv6_has_hopopt_jumbo(6, True, sg.GRO_LEGACY_MAX_SIZE)
    assert sg.ipv6_has_hopopt_jumbo(6, True, sg.GRO_LEGACY_MAX_SIZE + 1)
    assert not sg.ipv6_has_hopopt_jumbo(4, True, 100000) and not sg.ipv6_has_hopopt_jumbo(6, False, 100000)


def test_big_tcp_ipv4_total_length_zero():
    """IPv4 BIG TCP: total length 0 on the super-packet, the real one on every segment."""
    t = Trace.from_columns(payload_len=[100000], gso_size=[1448], tcp_hlen=[32], opt_ts=[True],
                           ip_len=[100052], flags=[ACK | PSH], seq=[1], ip_id=[7], src_ip=[0xC6120101],
                           dst_ip=[0xC6120202])
    o = sg.segment(t, tx_csum=False)
    assert len(o) == 70 and col(o, "payload_len")[-1] == 100000 - 69 * 1448
    assert set(col(o, "ip_len")[:-1]) == {1500}
    assert col(o, "ip_id") == [(7 + k) & 0xFFFF for k in range(70)]
    for r in ref.trace_rows(o):
        assert r["ip_csum"] == ref.ip_csum(r)


@pytest.mark.parametrize("tx_csum", [True, False])
def test_ipv6_checksums_verify_over_real_bytes(tx_csum):
    o = sg.segment(sp6(3000, 1428), tx_csum=tx_csum)
    for r in ref.trace_rows(o):
        seg = ref.tcp_header_bytes(r, r["tcp_csum"]) + bytes(r["payload_len"])
        pseudo = ref.pseudo_header(r, len(seg))
        assert len(pseudo) == 40                                           # RFC 8200 8.1 layout
        if tx_csum:
            assert r["csum_state"] == codes.CSUM_PARTIAL and r["tcp_csum"] == ref.ones_sum(pseudo)
        else:
            assert r["csum_state"] == codes.CSUM_NONE and ref.ones_sum(pseudo + seg) == 0xFFFF


def test_rtl8139_models_segment_ipv6_in_software():
    """8139cp has no TSO6: the stack segments IPv6 first (descriptor MSS, no flag quirk, full checksums)."""
    o = sg.segment(sp6(2880, 1440, flags=ACK | PSH), nic="rtl8139-legacy")
    assert col(o, "payload_len") == [1440, 1440]
    assert col(o, "flags") == [ACK, ACK | PSH]
    assert col(o, "csum_state") == [codes.CSUM_NONE] * 2


@st.composite
def traces6(draw):
    n = draw(st.integers(1, 8))
    ints = lambda lo, hi: draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    addr = st.lists(st.integers(0, 255), min_size=16, max_size=16)
    ext = draw(st.lists(st.sampled_from([0, 0, 8, 16]), min_size=n, max_size=n))
    jumbo = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    pay = ints(0, 120000)
    thl = draw(st.lists(st.sampled_from([20, 32, 44]), min_size=n, max_size=n))
    ip_hlen = [40 + e + 8 * j for e, j in zip(ext, jumbo)]
    return Trace.from_columns(
        ip_version=6, src_ip6=[draw(addr) for _ in range(n)], dst_ip6=[draw(addr) for _ in range(n)],
        ip_hlen=ip_hlen, hbh_jumbo=jumbo, payload_len=pay, tcp_hlen=thl,
        ip_len=[h + t + p for h, t, p in zip(ip_hlen, thl, pay)],
        gso_size=draw(st.lists(st.sampled_from([0, 8, 536, 1428, 1440, 8928, 65000]), min_size=n, max_size=n)),
        opt_ts=True, tsval=ints(0, 2**32 - 1), tsecr=ints(0, 2**32 - 1), flags=ints(0, 0x1FF),
        seq=ints(0, 2**32 - 1), ack=ints(0, 2**32 - 1), sport=ints(0, 65535), dport=ints(0, 65535),
        window=ints(0, 65535), tos=ints(0, 255), ttl=ints(1, 255), flow_label=ints(0, 0xFFFFF),
        gso_type=draw(st.lists(st.sampled_from([0, codes.GSO_TCP_ACCECN]), min_size=n, max_size=n)),
        frame=np.arange(n))


@settings(max_examples=40, deadline=None)
@given(traces6(), st.sampled_from(["sw-gso", "hw-tso", "rtl8139-fixed"]), st.booleans())
def test_ipv6_kernel_equals_reference_and_properties(t, nic, tx_csum):
    o = sg.segment(t, nic=nic, tx_csum=tx_csum)
    want = ref.segment_rows(ref.trace_rows(t), nic=nic, tx_csum=tx_csum)
    got = ref.trace_rows(o)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for k in ref.ROW_FIELDS[:-1]:
            assert g[k] == w[k], (k, g, w)
    for i in range(len(t)):
        segs = o[o.frame == i]
        assert int(segs.payload_len.sum()) == int(t.payload_len[i])                 # bytes conserved
        for name in ("flow_label", "tos", "ttl", "src_ip6", "dst_ip6", "ip_id"):
            assert (segs.columns[name] == t.columns[name][i]).all()                  # copied
        if len(segs) > 1:
            assert (segs.ip_len <= 0xFFFF + 40).all() and not segs.hbh_jumbo[segs.ip_len > 65536].any()
            removed = bool(t.hbh_jumbo[i]) and int(t.ip_len[i]) > sg.GRO_LEGACY_MAX_SIZE
            assert (segs.ip_hlen == int(t.ip_hlen[i]) - 8 * removed).all()
            assert (segs.ip_len == segs.ip_hlen.astype(int) + segs.tcp_hlen + segs.payload_len).all()
