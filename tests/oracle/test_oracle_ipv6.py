"""Oracle: the kit's IPv6 and BIG TCP segmentation equals the real kernel's, packet for packet.

Committed captures (offloadkit/data/captures/ipv6/, made by make_captures.py with
``offloadkit.lab.grid.COMMITTED_IPV6``): router-ingress super-packets through
``engine.segment`` must be the router's egress segments: seq, payload length,
flags, IPv6 payload length (``ip_len - 40``), flow label, traffic class, the
network header length (the BIG TCP jumbo HBH removed), ack, window, timestamps
and the CHECKSUM_PARTIAL pseudo-header sum (over the IPv6 pseudo-header).
The captures are read with the lab's dpkt reader, not the kit's. Live runs
(``-m kernel``, root) regenerate ``grid.LIVE_IPV6`` on this machine.
"""
from __future__ import annotations

import ipaddress
from pathlib import Path

import numpy as np
import pytest

from offloadkit.engine.segment import GRO_LEGACY_MAX_SIZE, segment
from offloadkit.lab import oracle, safety
from offloadkit.lab.grid import COMMITTED_IPV6, LIVE_IPV6, capture_case, load_case
from offloadkit.lab.packets import read_headers

CAPS = Path(__file__).resolve().parents[2] / "offloadkit" / "data" / "captures" / "ipv6"
CASES = sorted(COMMITTED_IPV6)
FIELDS = ("flow_label", "tos", "ip_hlen", "ack", "window", "tsval", "tsecr", "tcp_hlen", "tcp_csum")


def _read(c: dict, point: str):
    return read_headers(c["paths"][point], point, c["sender_ip"])[0]


def kit_segments(c: dict, mss: int | None = None):
    """The kit's segmentation of a case's router ingress (sw-gso with TX checksum offload, as a veth)."""
    ing = _read(c, "router-in")
    mss = mss or oracle.gso_size_from_egress(_read(c, "router-out"))
    return segment(ing, gso_size=mss)


def compare(c: dict, kit) -> oracle.SegmentationReport:
    return oracle.compare_segment_traces(kit, np.ones(len(kit), dtype=bool), _read(c, "router-out"), FIELDS)


def test_committed_ipv6_captures_are_there_complete_and_small():
    assert {p.parent.name for p in CAPS.glob("*/settings.json")} == set(CASES)
    total = sum(f.stat().st_size for f in CAPS.glob("*/*.pcap"))
    assert total < 1 * 2**20, f"IPv6 captures take {total} bytes (budget 1 MB)"
    for name in CASES:
        c = load_case(CAPS / name)
        assert c["settings"]["ip_version"] == 6 and c["sender_ip"].startswith("2001:2:")
        for point, s in c["capture_stats"].items():
            assert s["captured"] == s["received"] and s["dropped"] == 0, f"{name} {point}: lossy capture {s}"


@pytest.mark.parametrize("name", CASES)
def test_ipv6_egress_mss_is_what_tcp_picks(name):
    """Kernel fact: MTU 1500 with timestamps over IPv6 gives 1500 - 40 - 20 - 12 = 1428."""
    c = load_case(CAPS / name)
    assert oracle.gso_size_from_egress(_read(c, "router-out")) == c["expected_gso_size"]
    ing = _read(c, "router-in")
    data = ing[(ing.direction == 0) & (ing.payload_len > c["expected_gso_size"])]
    assert len(data) >= 3, "no super-packets: the case tests nothing"
    assert (data.ip_version == 6).all() and len(np.unique(data.flow_label)) >= 1


@pytest.mark.parametrize("name", [n for n in CASES if n != "v6-bigtcp-ptb-mtu1500"])
def test_ipv6_segment_equals_kernel_egress(name):
    c = load_case(CAPS / name)
    rep = compare(c, kit_segments(c))
    assert rep.ok, rep.summary()
    assert rep.matched == rep.egress_packets > 50


def test_big_tcp_jumbo_packets_are_segmented_without_the_hop_by_hop_header():
    """BIG TCP: ingress packets over 64 KB carry payload length 0 + the jumbo HBH; the kernel's and
    the kit's segments of them carry neither (ipv6_hopopt_jumbo_remove)."""
    c = load_case(CAPS / "v6-bigtcp-185000")
    ing = _read(c, "router-in")
    jumbo = ing[ing.hbh_jumbo]
    assert len(jumbo) >= 3 and (jumbo.ip_len > GRO_LEGACY_MAX_SIZE).all() and (jumbo.ip_hlen == 48).all()
    eg = _read(c, "router-out")
    kit = kit_segments(c)
    starts = set(jumbo.seq.tolist())
    for t in (eg, kit):
        d = t[(t.direction == 0) & (t.payload_len > 0)]
        assert (d.ip_hlen == 40).all() and not d.hbh_jumbo.any() and (d.ip_len <= 1500).all()
        assert starts <= set(d.seq.tolist())          # every jumbo packet was forwarded and cut
    rep = compare(c, kit)
    assert rep.ok and rep.matched > sum(int(p) // 1428 for p in jumbo.payload_len), rep.summary()


def test_big_tcp_across_an_mtu_1500_router_is_refused():
    """Kernel fact: ip6_forward's size check counts the 8-byte jumbo HBH in each segment
    (48 + 32 + 1428 > 1500), so at egress MTU 1500 no jumbo packet is forwarded whole: every one
    is retransmitted, while the 1508-byte egress case forwards them all."""
    c = load_case(CAPS / "v6-bigtcp-ptb-mtu1500")
    ing = _read(c, "router-in")
    d = ing[(ing.direction == 0) & (ing.payload_len > 0)]
    jumbo = d[d.hbh_jumbo]
    assert len(jumbo) >= 1 and c["retransmits"] > 0
    for seq, t in zip(jumbo.seq.tolist(), jumbo.time_ns.tolist()):
        assert ((d.seq == seq) & (d.time_ns > t)).any(), f"jumbo packet at seq {seq} was not retransmitted"
    ok = load_case(CAPS / "v6-bigtcp-185000")
    assert ok["retransmits"] == 0


def test_the_comparison_catches_a_wrong_ipv6_segmentation():
    """A kit that keeps the jumbo header, or cuts at the IPv4 MSS, does not pass."""
    c = load_case(CAPS / "v6-bigtcp-185000")
    kit = kit_segments(c)
    big = np.isin(kit.frame, _read(c, "router-in")[_read(c, "router-in").hbh_jumbo].frame)
    keep_hbh = kit.replace(ip_hlen=kit.ip_hlen + 8 * big, ip_len=kit.ip_len + 8 * big)
    assert not compare(c, keep_hbh).ok
    assert not compare(c, kit_segments(c, mss=1440)).ok
    assert not compare(c, kit.replace(flow_label=kit.flow_label ^ 1)).ok


live = pytest.mark.skipif(not safety.available(), reason="needs root, ip netns, iperf3 and tcpdump")


@pytest.mark.kernel
@live
@pytest.mark.parametrize("name", sorted(LIVE_IPV6))
def test_live_ipv6_segment_equals_kernel(name, tmp_path):
    capture_case(name, LIVE_IPV6[name], tmp_path)
    c = load_case(tmp_path / name)
    for point, s in c["capture_stats"].items():
        assert s["captured"] == s["received"] and s["dropped"] == 0, f"{point}: {s}"
    assert oracle.gso_size_from_egress(_read(c, "router-out")) == c["expected_gso_size"]
    rep = compare(c, kit_segments(c))
    assert rep.ok and rep.matched > 50, rep.summary()


# -- the same through ``offloadkit segment`` (bytes in, bytes out) ------------------------------

@pytest.mark.parametrize("name", ["v6-ts-mtu1500", "v6-bigtcp-185000"])
def test_segment_verb_equals_kernel_egress(name, tmp_path):
    """The issue's check: ``offloadkit segment`` on router ingress = the router's egress, read back
    from the bytes it wrote (the jumbo HBH gone, payload lengths and pseudo-header sums right)."""
    from kit_cli import run_verb
    c = load_case(CAPS / name)
    out = tmp_path / "kit.pcap"
    mss = oracle.gso_size_from_egress(_read(c, "router-out"))
    code, err = run_verb(["segment", c["paths"]["router-in"], out, "--mss", mss])
    assert code == 0, err
    rep = oracle.compare_segmentation(out, c["paths"]["router-out"], c["sender_ip"], FIELDS)
    assert rep.ok and rep.matched == rep.egress_packets > 300, rep.summary()


def _big_tcp_frame(payload: int) -> bytes:
    """A header-only Ethernet/IPv6 BIG TCP frame: payload length 0, hop-by-hop jumbo header, TCP + TS."""
    import struct
    tcp = struct.pack("!HHIIBBHHH", 40000, 5201, 1000, 1, 8 << 4, 0x18, 64, 0, 0) + \
        b"\x01\x01\x08\x0a" + struct.pack("!II", 7, 9)
    hbh = struct.pack("!BBBBI", 6, 0, 0xC2, 4, 8 + len(tcp) + payload)
    ip6 = struct.pack("!IHBB", 6 << 28 | 0x12345, 0, 0, 64) + bytes(SRC6) + bytes(DST6)
    return b"\x02" * 6 + b"\x04" * 6 + b"\x86\xdd" + ip6 + hbh + tcp


SRC6 = ipaddress.IPv6Address("2001:2::1").packed
DST6 = ipaddress.IPv6Address("2001:2::2").packed


def test_segment_verb_cuts_an_80000_byte_big_tcp_packet_into_55_full_segments_and_the_rest(tmp_path):
    from kit_cli import run_verb

    from offloadkit.io.pcap import write_records
    from offloadkit.io.records import Record
    frame = _big_tcp_frame(80000)
    src = tmp_path / "bigtcp.pcap"
    write_records(src, [Record(1, 1_000_000, 1, frame, 14 + 48 + 32 + 80000, 0)])
    out = tmp_path / "seg.pcap"
    code, err = run_verb(["segment", src, out, "--mss", 1440, "--no-tx-csum"])
    assert code == 0, err
    t, _ = read_headers(out)
    assert len(t) == 56
    assert t.payload_len.tolist() == [1440] * 55 + [800]
    assert (t.ip_hlen == 40).all() and not t.hbh_jumbo.any()
    assert (t.ip_len - 40).tolist() == [32 + 1440] * 55 + [32 + 800]     # IPv6 payload length per segment
    assert (t.flow_label == 0x12345).all() and t.seq.tolist()[-1] == 1000 + 55 * 1440
    assert (t.flags[:-1] == 0x10).all() and t.flags[-1] == 0x18


# -- GRO: the kit's ``offloadkit gro`` on what reached the receiver = the kernel's aggregates ----

GRO_CASES = [n for n in CASES if n != "v6-bigtcp-ptb-mtu1500"]


@pytest.mark.parametrize("name", GRO_CASES)
def test_ipv6_gro_equals_kernel_given_its_poll_ends(name, tmp_path):
    """ipv6_gro_receive + tcp6_gro_receive: the same aggregates as the receiver's GRO, boundary for
    boundary, with the same IPv6 payload length, flags, hop limit and window (poll ends read off the
    kernel's aggregates, as for IPv4: see offloadkit.lab.oracle)."""
    from kit_cli import run_verb
    c = load_case(CAPS / name)
    starts = oracle.kernel_poll_ends(c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    arrived = oracle.arrivals(c["paths"]["router-out"], tmp_path / "arrivals.pcap", c["receiver_ip"], starts)
    out = tmp_path / "gro.pcap"
    code, err = run_verb(["gro", arrived, out, *oracle.KERNEL_POLLS_GRO_ARGS])
    assert code == 0, err
    rep = oracle.compare_gro(out, c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert rep.exact and rep.coinciding >= 20, rep.summary()
    kit = _read({"paths": {"k": str(out)}, "sender_ip": c["sender_ip"]}, "k")
    assert set(kit.flow_label[kit.direction == 0].tolist()) <= set(_read(c, "rcv").flow_label.tolist())
