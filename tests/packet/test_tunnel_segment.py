"""UDP tunnels (VXLAN, GENEVE with options; IPv4 or IPv6 outer and inner): decode and per-segment outer headers.

Frames are built by hand with a real payload, so every checksum of every segment can be verified
with the plain algorithm: the outer UDP checksum the kit writes (LCO, ``rewrite.tunnel``) must verify
over the whole segment once the inner TCP checksum is full (``tx_csum=False``).
"""
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from offloadkit import codes
from offloadkit.io.records import Record
from offloadkit.packet import build
from offloadkit.packet import decode as D
from offloadkit.packet.csum import ip_header_checksum, ones_sum, pseudo_sum, tcp_checksums, verifies
from offloadkit.rewrite.segment import segment_records

V4 = (bytes([198, 18, 1, 1]), bytes([198, 18, 2, 2]))
V6 = (bytes.fromhex("20010002000100000000000000000001"), bytes.fromhex("20010002000200000000000000000002"))
IN4 = (bytes([198, 19, 0, 1]), bytes([198, 19, 0, 2]))
IN6 = (bytes.fromhex("20010002000300000000000000000001"), bytes.fromhex("20010002000300000000000000000002"))
TS_OPT = b"\x01\x01\x08\x0a" + bytes(8)


def ip(ver, proto, src, dst, body, ident=7, flow=0x12345):
    if ver == 6:
        return struct.pack("!IHBB", 6 << 28 | flow, len(body), proto, 64) + src + dst + body
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body), ident, 0x4000, 64, proto, 0, src, dst)
    return h[:10] + struct.pack("!H", ip_header_checksum(h)) + h[12:] + body


def tcp(src, dst, payload, seq=1000, flags=0x18):
    h = struct.pack("!HHIIBBHHH", 40000, 5201, seq, 1, 8 << 4, flags, 512, 0, 0) + TS_OPT
    c, _ = tcp_checksums(src, dst, h, payload, len(payload))
    return h[:16] + struct.pack("!H", c) + h[18:] + payload


def eth(l3, ver):
    return build.ETH_DST + build.ETH_SRC + struct.pack("!H", 0x86DD if ver == 6 else 0x0800) + l3


def tunnel_frame(kind, outer_ver, inner_ver, payload, csum, opt_words=0):
    isrc, idst = IN6 if inner_ver == 6 else IN4
    inner = eth(ip(inner_ver, 6, isrc, idst, tcp(isrc, idst, payload)), inner_ver)
    if kind == "vxlan":
        hdr, port = struct.pack("!II", 0x08000000, 42 << 8), 4789
    else:
        opts = bytes(4 * opt_words)
        hdr, port = struct.pack("!BBHI", opt_words, 0, 0x6558, 42 << 8) + opts, 6081
    osrc, odst = V6 if outer_ver == 6 else V4
    ulen = 8 + len(hdr) + len(inner)
    check = 0
    if csum:    # the CHECKSUM_PARTIAL pseudo-header sum, as the sender hands a super-packet over
        s = pseudo_sum(osrc, odst, ulen, 17)
        check = s if s <= 0xFFFF else (s & 0xFFFF) + (s >> 16)
        check = (check & 0xFFFF) + (check >> 16)
    udp = struct.pack("!HHHH", 50000, port, ulen, check) + hdr + inner
    return eth(ip(outer_ver, 17, osrc, odst, udp, ident=300), outer_ver)


SHAPES = [(k, o, i) for k in ("vxlan", "geneve") for o in (4, 6) for i in (4, 6)]


@pytest.mark.parametrize("kind,outer_ver,inner_ver", SHAPES)
def test_decode_reads_the_inner_flow_of_every_udp_tunnel(kind, outer_ver, inner_ver):
    frame = tunnel_frame(kind, outer_ver, inner_ver, bytes(100), True, opt_words=2)
    row, lay = D.decode(1, frame, len(frame))
    enc = codes.ENC_VXLAN if kind == "vxlan" else codes.ENC_GENEVE
    assert row["encap"] == enc and row["vni"] == 42 and row["payload_len"] == 100
    assert (lay.outer, lay.outer_ver, lay.udp, lay.ver) == (14, outer_ver, 14 + (40 if outer_ver == 6 else 20),
                                                            inner_ver)
    assert lay.ip == lay.udp + 16 + (8 if kind == "geneve" else 0) + 14


def test_geneve_other_versions_and_protocols_are_not_tcp():
    frame = bytearray(tunnel_frame("geneve", 4, 4, bytes(10), False))
    frame[14 + 20 + 8] |= 0x40                                    # version 1
    assert D.decode(1, bytes(frame), len(frame)) == "not TCP"


def outer_udp_verifies(frame):
    """The outer UDP checksum over the whole datagram (the standard algorithm)."""
    o = 14
    if frame[o] >> 4 == 6:
        src, dst, u = frame[o + 8:o + 24], frame[o + 24:o + 40], o + 40
    else:
        src, dst, u = frame[o + 12:o + 16], frame[o + 16:o + 20], o + 20
    ulen = struct.unpack_from("!H", frame, u + 4)[0]
    assert ulen == len(frame) - u
    return verifies(frame[u:], pseudo_sum(src, dst, ulen, 17))


@settings(max_examples=40, deadline=None)
@given(shape=st.sampled_from(SHAPES), csum=st.booleans(), opt_words=st.integers(0, 6),
       plen=st.integers(1400, 9000), mss=st.sampled_from([536, 1000, 1398]), seed=st.integers(0, 255))
def test_segmented_tunnel_frames_carry_the_kernels_outer_headers(shape, csum, opt_words, plen, mss, seed):
    kind, outer_ver, inner_ver = shape
    payload = bytes((seed + 7 * i) & 0xFF for i in range(plen))
    frame = tunnel_frame(kind, outer_ver, inner_ver, payload, csum, opt_words)
    run = segment_records([Record(0, 0, 1, frame, len(frame), 0)], mss, tx_csum=False)
    n = -(-plen // mss)
    assert run.super_packets == 1 and run.segments == len(run.records) == n
    got = b""
    for k, rec in enumerate(run.records):
        seg = rec.data
        assert len(seg) == rec.orig_len
        row, lay = D.decode(1, seg, len(seg))
        assert not row["csum_bad"] and row["payload_len"] == min(mss, plen - k * mss)
        got += seg[lay.pay:]
        o, u = lay.outer, lay.udp
        if outer_ver == 4:
            assert struct.unpack_from("!HH", seg, o + 2) == (len(seg) - o, 300 + k)
            assert ones_sum(seg[o:o + 20]) % 0xFFFF == 0
        else:
            assert struct.unpack_from("!H", seg, o + 4)[0] == len(seg) - o - 40
            assert struct.unpack_from("!I", seg, o)[0] & 0xFFFFF == 0x12345
        ucheck = struct.unpack_from("!H", seg, u + 6)[0]
        if csum:
            assert ucheck != 0 and outer_udp_verifies(seg)
        else:
            assert ucheck == 0
    assert got == payload
