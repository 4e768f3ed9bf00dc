"""Oracle: TCP inside VXLAN, segmented by the real kernel (``skb_udp_tunnel_segment``).

Committed captures (offloadkit/data/captures/vxlan/, ``grid.COMMITTED_VXLAN``):
the sender's VXLAN super-packets at router ingress, and the router's egress
after software tunnel GSO (``tx-udp_tnl-segmentation off``). The inner
segments must be what ``engine.segment`` makes of the inner super-packets
(inner headers as for a plain segment). The outer headers per segment are
checked as kernel facts and against ``offloadkit segment``: outer UDP length =
inner IP length + 30, outer IPv4 total length = UDP length + 20, outer IP IDs
consecutive from the super-packet's, outer UDP source port and VNI copied, and
the outer UDP checksum 0 without ``udpcsum``. With it (SKB_GSO_UDP_TUNNEL_CSUM)
the super-packet carries the CHECKSUM_PARTIAL pseudo-header sum and every
segment the LCO value of ``gso_make_checksum`` (``rewrite.tunnel``): the
checksum the datagram has once the inner TCP checksum is filled in, not the
segment's pseudo-header sum.
"""
from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from offloadkit.engine.segment import segment
from offloadkit.lab import oracle
from offloadkit.lab.grid import COMMITTED_VXLAN, load_case
from offloadkit.lab.packets import ip_to_int, read_headers, udp_tunnel_inner

CAPS = Path(__file__).resolve().parents[2] / "offloadkit" / "data" / "captures" / "vxlan"
CASES = sorted(COMMITTED_VXLAN)
FIELDS = ("ip_id", "ack", "window", "tsval", "tsecr", "tcp_hlen", "vni", "l2_bytes")


def outer_headers(path, sender_ip: str) -> list[dict]:
    """Outer IPv4/UDP fields and the inner seq/length of every data frame the sender tunnelled."""
    import dpkt
    rows = []
    with open(path, "rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            vx = udp_tunnel_inner(buf)
            if vx is None:
                continue
            inner = vx[0]
            ip = inner[14:]
            ihl = (ip[0] & 0x0F) * 4
            if ip[9] != 6 or struct.unpack("!I", ip[12:16])[0] != ip_to_int(sender_ip):
                continue
            tot, iid = struct.unpack("!HH", ip[2:6])
            tsport, seq = struct.unpack("!H", ip[ihl:ihl + 2])[0], struct.unpack("!I", ip[ihl + 4:ihl + 8])[0]
            thl = (ip[ihl + 12] >> 4) * 4
            if tot - ihl - thl <= 0:
                continue
            o = 14
            u = o + (buf[o] & 0x0F) * 4
            otot, oid = struct.unpack("!HH", buf[o + 2:o + 6])
            sport, _, ulen, ucsum = struct.unpack("!HHHH", buf[u:u + 8])
            osrc, odst = struct.unpack("!II", buf[o + 12:o + 20])
            rows.append(dict(outer_src=osrc, outer_dst=odst, outer_len=otot, outer_id=oid, outer_df=bool(buf[o + 6] & 0x40), udp_sport=sport,
                             udp_len=ulen, udp_csum=ucsum, vni=vx[1], inner_len=tot, inner_id=iid, seq=seq, sport=tsport,
                             payload=tot - ihl - thl))
    return rows


def outer_udp_pseudo(r: dict) -> int:
    """Folded, not complemented, IPv4 pseudo-header sum of a UDP datagram (~udp_v4_check(len, s, d, 0))."""
    s = sum(v >> 16 for v in (r["outer_src"], r["outer_dst"])) + sum(v & 0xFFFF for v in (r["outer_src"], r["outer_dst"]))
    s += 17 + r["udp_len"]
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return s


def _read(c, point):
    return read_headers(c["paths"][point], point, c["sender_ip"])[0]


def test_committed_vxlan_captures_are_complete():
    assert {p.parent.name for p in CAPS.glob("*/settings.json")} == set(CASES)
    assert sum(f.stat().st_size for f in CAPS.glob("*/*.pcap")) < 2**19
    for name in CASES:
        c = load_case(CAPS / name)
        assert c["settings"]["tunnel"] == "vxlan"
        for point, s in c["capture_stats"].items():
            assert s["captured"] == s["received"] and s["dropped"] == 0, f"{name} {point}: {s}"


@pytest.mark.parametrize("name", CASES)
def test_udp_tunnel_inner_segments_equal_the_kits(name):
    """MTU 1500 - 50 (VXLAN) - 40 - 12 = 1398; the inner packets cut as plain segments."""
    c = load_case(CAPS / name)
    eg = _read(c, "router-out")
    mss = oracle.gso_size_from_egress(eg)
    assert mss == c["expected_gso_size"] == 1398
    ing = _read(c, "router-in")
    assert (ing[(ing.direction == 0)].payload_len > mss).sum() >= 3
    kit = segment(ing, gso_size=mss)
    rep = oracle.compare_segment_traces(kit, np.ones(len(kit), dtype=bool), eg, FIELDS)
    assert rep.ok and rep.matched == rep.egress_packets > 50, rep.summary()


@pytest.mark.parametrize("name", CASES)
def test_vxlan_outer_headers_per_segment_kernel_facts(name):
    c = load_case(CAPS / name)
    ing = outer_headers(c["paths"]["router-in"], c["sender_ip"])
    eg = outer_headers(c["paths"]["router-out"], c["sender_ip"])
    supers = [r for r in ing if r["payload"] > 1398]
    assert len(supers) >= 3
    checked = 0
    for sp in supers:
        n = -(-sp["payload"] // 1398)                 # its segments: the next n inner IP IDs of its flow
        segs = sorted((r for r in eg if r["sport"] == sp["sport"] and (r["inner_id"] - sp["inner_id"]) % 2**16 < n),
                      key=lambda r: (r["inner_id"] - sp["inner_id"]) % 2**16)
        assert [(r["seq"] - sp["seq"]) % 2**32 for r in segs] == [1398 * k for k in range(n)]
        assert sum(r["payload"] for r in segs) == sp["payload"]
        assert sp["udp_len"] == sp["inner_len"] + 30 and sp["outer_len"] == sp["udp_len"] + 20
        for k, r in enumerate(segs):
            assert r["udp_len"] == r["inner_len"] + 8 + 8 + 14              # UDP + VXLAN + inner Ethernet
            assert r["outer_len"] == r["udp_len"] + 20                      # outer IPv4, no options
            assert r["outer_id"] == (sp["outer_id"] + k) & 0xFFFF           # outer ID per segment
            assert r["inner_id"] == (sp["inner_id"] + k) & 0xFFFF           # inner ID per segment
            assert r["udp_sport"] == sp["udp_sport"] and r["vni"] == sp["vni"] == 42
            assert r["outer_df"] == sp["outer_df"]
            checked += 1
        csums = [r["udp_csum"] for r in segs]
        if c["settings"]["tunnel_csum"]:
            # the super-packet carries the CHECKSUM_PARTIAL pseudo-header sum; each segment its LCO
            # value (checked against the kit below), the same for equal lengths, not its pseudo sum
            assert sp["udp_csum"] == outer_udp_pseudo(sp)
            assert 0 not in csums and all(x != outer_udp_pseudo(r) for x, r in zip(csums, segs))
            by_len = {}
            for r in segs:
                assert by_len.setdefault(r["udp_len"], r["udp_csum"]) == r["udp_csum"]
        else:
            assert sp["udp_csum"] == 0 and set(csums) == {0}
    assert checked > 50


@pytest.mark.parametrize("name", CASES)
def test_segment_verb_equals_kernel_vxlan_egress(name, tmp_path):
    """``offloadkit segment`` on VXLAN super-packets: the kernel's egress, inner fields (lab reader)
    and outer IPv4/UDP headers alike, the outer UDP checksum (0, or LCO with udpcsum) included;
    the outer IP checksums verify."""
    from kit_cli import run_verb

    from offloadkit.lab.packets import inet_csum_ok
    c = load_case(CAPS / name)
    out = tmp_path / "kit.pcap"
    code, err = run_verb(["segment", c["paths"]["router-in"], out, "--mss", 1398])
    assert code == 0 and "copied whole" not in err, err
    rep = oracle.compare_segmentation(out, c["paths"]["router-out"], c["sender_ip"], FIELDS)
    assert rep.ok and rep.matched == rep.egress_packets > 300, rep.summary()
    key = lambda r: (r["sport"], r["seq"], r["inner_id"])  # noqa: E731
    kit = {key(r): r for r in outer_headers(out, c["sender_ip"])}
    eg = outer_headers(c["paths"]["router-out"], c["sender_ip"])
    for r in eg:
        got = kit[key(r)]
        for f in ("outer_len", "outer_id", "outer_df", "udp_sport", "udp_len", "udp_csum", "vni"):
            assert got[f] == r[f], (f, got, r)
    assert (len({r["udp_csum"] for r in eg}) > 1) == c["settings"]["tunnel_csum"]
    import dpkt
    with open(out, "rb") as f:
        frames = [bytes(b) for _, b in dpkt.pcap.Reader(f)]
    outer = [b[14:14 + (b[14] & 0x0F) * 4] for b in frames if udp_tunnel_inner(b) is not None]
    assert len(outer) > 300 and all(inet_csum_ok(h) for h in outer)
