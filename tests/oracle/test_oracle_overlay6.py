"""Oracle: IPv6 TCP inside VXLAN, over the IPv4 and the IPv6 underlay, segmented and aggregated by the real kernel.

Committed captures (offloadkit/data/captures/overlay6/, ``grid.COMMITTED_OVERLAY6``): the sender's
VXLAN super-packets (inner IPv6 2001:2:3::1 -> 2001:2:3::2) at router ingress, the router's egress
after software tunnel GSO (``__skb_udp_tunnel_segment`` -> ``ipv6_gso_segment``/``tcp6_gso_segment``
on the inner packet) and the receiver's underlay after udp tunnel GRO. ``offloadkit segment`` on the
ingress must equal the egress packet for packet -- inner sequence, payload length, flags, IPv6
payload length, flow label, traffic class, hop limit -- and per segment the outer headers: IPv4
total length and ID (id0 + k) or IPv6 payload length and flow label, UDP length, source port and
checksum. ``vxlan6-v6in6-label-ts-mtu1500`` sets ``flowlabel 0x12345`` on the vxlan device: every
outer header carries it, the kit copies it to every segment, and GRO keys on it (ipv6_gro_receive's
``first_word & htonl(0xF00FFFFF)``).
"""
from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest
from tunnel_oracle import UNDERLAY_RECEIVER, segment_equals_egress

from offloadkit.lab import oracle
from offloadkit.lab.grid import COMMITTED_OVERLAY6, load_case
from offloadkit.lab.packets import udp_tunnel_inner

CAPS = Path(__file__).resolve().parents[2] / "offloadkit" / "data" / "captures" / "overlay6"
CASES = sorted(COMMITTED_OVERLAY6)
INNER_FIELDS = ("ip_len", "flow_label", "tos", "ttl", "ack", "window", "tsval", "tsecr", "tcp_hlen", "vni",
                "l2_bytes", "outer_udp_csum")
LABEL = 0x12345


def mss(c) -> int:
    """1500 - outer IP - UDP 8 - VXLAN 8 - inner Ethernet 14 - inner IPv6 40 - TCP 20 - timestamps 12."""
    return 1500 - (40 if c["settings"]["ip_version"] == 6 else 20) - 30 - 40 - 32


def outer_rows(path) -> list[dict]:
    """Per tunnelled IPv6 TCP data frame: outer IP/UDP fields and the inner (sport, seq, TSval) key."""
    import dpkt
    rows = []
    with open(path, "rb") as f:
        for i, (_, buf) in enumerate(dpkt.pcap.Reader(f)):
            vx = udp_tunnel_inner(buf)
            if vx is None or vx[0][12:14] != b"\x86\xdd" or vx[0][14 + 6] != 6:
                continue
            ip6 = vx[0][14:]
            thl = (ip6[40 + 12] >> 4) * 4
            plen6 = struct.unpack("!H", ip6[4:6])[0]
            if plen6 - thl <= 0:
                continue
            r = dict(frame=i, inner_plen6=plen6, payload=plen6 - thl,
                     key=(struct.unpack("!H", ip6[40:42])[0], struct.unpack("!I", ip6[44:48])[0],
                          ip6[64:68]))         # + TSval (nop nop TS): a retransmission has the same seq
            if buf[12:14] == b"\x86\xdd":
                u = 14 + 40
                r.update(outer_len=struct.unpack("!H", buf[18:20])[0], outer_id=None,
                         flow_label=struct.unpack("!I", buf[14:18])[0] & 0xFFFFF, outer_dst=buf[38:54])
            else:
                u = 14 + (buf[14] & 0x0F) * 4
                r.update(outer_len=struct.unpack("!H", buf[16:18])[0], outer_id=struct.unpack("!H", buf[18:20])[0],
                         flow_label=None, outer_dst=buf[30:34])
            r["udp_sport"], _, r["udp_len"], r["udp_csum"] = struct.unpack("!HHHH", buf[u:u + 8])
            rows.append(r)
    return rows


def test_committed_overlay6_captures_are_complete():
    assert {p.parent.name for p in CAPS.glob("*/settings.json")} == set(CASES)
    assert sum(f.stat().st_size for f in CAPS.glob("*/*.pcap")) < 600 * 1024
    for name in CASES:
        c = load_case(CAPS / name)
        s = c["settings"]
        assert s["tunnel"] == "vxlan" and s["overlay_ip_version"] == 6 and c["sender_ip"] == "2001:2:3::1"
        assert c["expected_gso_size"] == mss(c)
        for point, st in c["capture_stats"].items():
            assert st["captured"] == st["received"] and st["dropped"] == 0, f"{name} {point}: {st}"


@pytest.mark.parametrize("name", CASES)
def test_segment_verb_equals_kernel_egress_ipv6_inside_vxlan(name, tmp_path):
    c = load_case(CAPS / name)
    m = mss(c)
    kit, egress = segment_equals_egress(c, m, INNER_FIELDS, outer_rows, tmp_path)
    assert len(egress) > 200 and max(r["payload"] for r in egress) == m
    v6 = c["settings"]["ip_version"] == 6
    for r in egress:
        got = kit[r["key"]]
        assert r["udp_len"] == 8 + 8 + 14 + 40 + r["inner_plen6"]
        assert r["outer_len"] == r["udp_len"] + (0 if v6 else 20)
        for f in ("inner_plen6", "outer_len", "outer_id", "flow_label", "udp_sport", "udp_len", "udp_csum"):
            assert got[f] == r[f], (f, got, r)
    if v6:      # the vxlan device's flowlabel, the same on every segment of every GSO skb
        label = int(c["settings"]["tunnel_flowlabel"] or 0)
        assert {r["flow_label"] for r in egress} == {label}
        assert 0 not in {r["udp_csum"] for r in egress}       # tunnel_csum: LCO per segment
    else:       # outer IPv4: ID id0 + k along each super-packet (inet_gso_segment), noudpcsum
        assert {r["udp_csum"] for r in egress} == {0}
        bulk = max({r["udp_sport"] for r in egress}, key=[r["udp_sport"] for r in egress].count)
        ids = [r["outer_id"] for r in egress if r["udp_sport"] == bulk]
        assert sum((b - a) & 0xFFFF == 1 for a, b in zip(ids, ids[1:])) > len(ids) // 2


@pytest.mark.parametrize("name", CASES)
def test_gro_verb_equals_kernel_udp_tunnel_gro_ipv6_inside(name, tmp_path):
    """``offloadkit gro`` on what reached the receiver's underlay vs the receiver's capture after
    udp_gro_receive -> vxlan_gro_receive -> ipv6_gro_receive -> tcp6_gro_receive: the same
    aggregates, outer and inner lengths, outer flow label and outer checksum."""
    from kit_cli import run_verb
    c = load_case(CAPS / name)
    ver = c["settings"]["ip_version"]
    arrived = oracle.arrivals(c["paths"]["router-out"], tmp_path / "arrived.pcap", UNDERLAY_RECEIVER[ver])
    out = tmp_path / "gro.pcap"
    code, err = run_verb(["gro", arrived, out])
    assert code == 0, err
    rep = oracle.compare_gro(out, c["paths"]["rcv"], c["paths"]["router-out"], c["sender_ip"])
    assert rep.exact and rep.kernel_aggregates >= 20, rep.summary()
    fam = socket.AF_INET6 if ver == 6 else socket.AF_INET
    to_rcv = socket.inet_pton(fam, UNDERLAY_RECEIVER[ver])
    kit = {r["key"]: r for r in outer_rows(out)}
    ker = [r for r in outer_rows(c["paths"]["rcv"]) if r["outer_dst"] == to_rcv]
    assert len(ker) >= 20 and max(r["payload"] for r in ker) > 10 * mss(c)
    for r in ker:
        got = kit[r["key"]]
        for f in ("inner_plen6", "outer_len", "flow_label", "udp_len", "udp_csum"):
            assert got[f] == r[f], (f, got, r)


def test_gro_keys_on_the_outer_ipv6_flow_label(tmp_path):
    """One segment in the middle of a kernel aggregate given another outer flow label (UDP checksum
    patched to stay valid) is no longer the same flow: it comes out of ``gro`` alone, with its label,
    and the aggregate is cut around it."""
    import dpkt
    from kit_cli import run_verb
    c = load_case(CAPS / "vxlan6-v6in6-label-ts-mtu1500")
    arrived = Path(oracle.arrivals(c["paths"]["router-out"], tmp_path / "arrived.pcap", UNDERLAY_RECEIVER[6]))
    base = tmp_path / "base.pcap"
    assert run_verb(["gro", arrived, base])[0] == 0
    segs = {r["frame"]: r for r in outer_rows(arrived)}
    big = max(outer_rows(base), key=lambda r: r["payload"])
    inside = [r for r in segs.values() if r["key"][0] == big["key"][0]
              and big["key"][1] < r["key"][1] < big["key"][1] + big["payload"]]
    victim = inside[len(inside) // 2]
    with open(arrived, "rb") as f:
        recs = list(dpkt.pcap.Reader(f))
    relabelled = tmp_path / "relabelled.pcap"
    with open(relabelled, "wb") as f:
        w = dpkt.pcap.Writer(f, nano=True)
        for i, (ts, buf) in enumerate(recs):
            if i == victim["frame"]:
                b = bytearray(buf)
                word = struct.unpack_from("!I", b, 14)[0]
                struct.pack_into("!I", b, 14, (word & ~0xFFFFF) | (LABEL ^ 0x1))
                # the flow label is outside the UDP pseudo-header: the outer checksum stays valid
                buf = bytes(b)
            w.writepkt(buf, ts)
    out = tmp_path / "gro.pcap"
    assert run_verb(["gro", relabelled, out])[0] == 0
    got = outer_rows(out)
    alone = [r for r in got if r["key"] == victim["key"]]
    assert len(alone) == 1 and alone[0]["payload"] == victim["payload"] and alone[0]["flow_label"] == LABEL ^ 0x1
    assert all(r["flow_label"] == LABEL for r in got if r["key"] != victim["key"])
    assert len(got) > len(outer_rows(base))
