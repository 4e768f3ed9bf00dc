"""Oracle: TCP inside VXLAN over an IPv6 underlay, segmented by the real kernel (``__skb_udp_tunnel_segment``).

Committed captures (offloadkit/data/captures/tunnel/, ``grid.COMMITTED_TUNNEL``): the sender's
VXLAN super-packets (outer IPv6 2001:2:1::1 -> 2001:2:2::2, inner IPv4) at router ingress and
the router's egress after software tunnel GSO. ``offloadkit segment`` on the ingress must equal
the egress packet for packet: inner fields (lab reader) and per segment the outer IPv6 payload
length and flow label, the outer UDP length, source port and checksum -- computed (LCO, the
IPv6 pseudo-header) by default, 0 with ``udp6zerocsumtx``.
"""
from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest
from tunnel_oracle import UNDERLAY_RECEIVER, segment_equals_egress

from offloadkit.lab import oracle
from offloadkit.lab.grid import COMMITTED_TUNNEL, load_case
from offloadkit.lab.packets import read_headers, udp_tunnel_inner

CAPS = Path(__file__).resolve().parents[2] / "offloadkit" / "data" / "captures" / "tunnel"
CASES = sorted(COMMITTED_TUNNEL)
FIELDS = ("ip_id", "ack", "window", "tsval", "tsecr", "tcp_hlen", "vni", "l2_bytes")
MSS = 1500 - 70 - 40 - 12            # outer IPv6 + UDP + VXLAN + inner Ethernet, inner IPv4 + TCP, timestamps


def outer_rows(path) -> list[dict]:
    """Outer IPv6/UDP fields and the inner (sport, seq, IP ID, payload) of every tunnelled TCP data frame."""
    import dpkt
    rows = []
    with open(path, "rb") as f:
        for _, buf in dpkt.pcap.Reader(f):
            vx = udp_tunnel_inner(buf)
            if vx is None or buf[12:14] != b"\x86\xdd" or vx[0][12:14] != b"\x08\x00":
                continue
            ip = vx[0][14:]
            ihl = (ip[0] & 0x0F) * 4
            if ip[9] != 6:
                continue
            tot, iid = struct.unpack("!HH", ip[2:6])
            thl = (ip[ihl + 12] >> 4) * 4
            if tot - ihl - thl <= 0:
                continue
            u = 14 + 40
            sport, _, ulen, ucsum = struct.unpack("!HHHH", buf[u:u + 8])
            rows.append(dict(plen6=struct.unpack("!H", buf[18:20])[0], flow_label=struct.unpack("!I", buf[14:18])[0]
                             & 0xFFFFF, udp_sport=sport, udp_len=ulen, udp_csum=ucsum, vni=vx[1], inner_len=tot, outer_dst=buf[38:54],
                             key=(struct.unpack("!H", ip[ihl:ihl + 2])[0], struct.unpack("!I", ip[ihl + 4:ihl + 8])[0],
                                  iid), payload=tot - ihl - thl))
    return rows


def test_committed_tunnel_captures_are_complete():
    assert {p.parent.name for p in CAPS.glob("*/settings.json")} == set(CASES)
    assert sum(f.stat().st_size for f in CAPS.glob("*/*.pcap")) < 2**19
    for name in CASES:
        c = load_case(CAPS / name)
        assert c["settings"]["tunnel"] == "vxlan" and c["settings"]["ip_version"] == 6
        assert c["expected_gso_size"] == MSS
        for point, s in c["capture_stats"].items():
            assert s["captured"] == s["received"] and s["dropped"] == 0, f"{name} {point}: {s}"


@pytest.mark.parametrize("name", CASES)
def test_segment_verb_equals_kernel_egress_over_ipv6_underlay(name, tmp_path):
    c = load_case(CAPS / name)
    eg = read_headers(c["paths"]["router-out"], "router-out", c["sender_ip"])[0]
    assert oracle.gso_size_from_egress(eg) == MSS
    kit, egress = segment_equals_egress(c, MSS, FIELDS, outer_rows, tmp_path)
    assert len(egress) > 200
    for r in egress:
        got = kit[r["key"]]
        assert r["udp_len"] == r["inner_len"] + 30 and r["plen6"] == r["udp_len"]
        for f in ("plen6", "flow_label", "udp_sport", "udp_len", "udp_csum", "vni"):
            assert got[f] == r[f], (f, got, r)
    csums = {r["udp_csum"] for r in egress}
    assert csums == {0} if not c["settings"]["tunnel_csum"] else 0 not in csums and len(csums) > 10
    assert {r["flow_label"] for r in egress} == {0}         # vxlan's default "flowlabel 0", copied per segment


GRO_CASES = [("vxlan", n) for n in ("vxlan-ts-mtu1500", "vxlan-csum-ts-mtu1500")] + [("tunnel", n) for n in CASES]


@pytest.mark.parametrize("sub,name", GRO_CASES)
def test_gro_verb_equals_kernel_udp_tunnel_gro(sub, name, tmp_path):
    """``offloadkit gro`` on what reached the receiver's underlay (router egress) vs the receiver's
    capture after udp_gro_receive -> vxlan_gro_receive -> inner TCP GRO: the same aggregates; over
    IPv6 also the outer payload length, UDP length and the outer checksum udp6_gro_complete leaves
    (the pseudo-header sum when there was one, else 0)."""
    from kit_cli import run_verb
    c = load_case(CAPS.parent / sub / name)
    arrived = oracle.arrivals(c["paths"]["router-out"], tmp_path / "arrived.pcap",
                              UNDERLAY_RECEIVER[c["settings"]["ip_version"]])
    out = tmp_path / "gro.pcap"
    code, err = run_verb(["gro", arrived, out])
    assert code == 0, err
    rep = oracle.compare_gro(out, c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert rep.exact and rep.kernel_aggregates >= 20, rep.summary()
    if c["settings"]["ip_version"] == 6:
        kit = {r["key"][:2]: r for r in outer_rows(out)}
        to_rcv = socket.inet_pton(socket.AF_INET6, UNDERLAY_RECEIVER[6])
        ker = [r for r in outer_rows(c["paths"]["rcv"]) if r["outer_dst"] == to_rcv]
        assert len(ker) >= 20 and max(r["payload"] for r in ker) > 10 * MSS
        for r in ker:
            got = kit[r["key"][:2]]
            for f in ("plen6", "udp_len", "udp_csum", "inner_len"):
                assert got[f] == r[f], (f, got, r)
