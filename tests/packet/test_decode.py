"""packet/: the link-type word, the one decoder's edge cases, TCP options round trip."""
import struct
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from offloadkit.packet import build, link
from offloadkit.packet import decode as D
from offloadkit.packet.csum import ip_header_checksum, tcp_checksums, verifies
from offloadkit.packet.tcp_options import options_bytes, parse_options
from offloadkit.trace import Trace

SRC, DST = bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2])


def ipv4(proto: int, body: bytes, src=SRC, dst=DST, total=None) -> bytes:
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(body) if total is None else total, 7, 0x4000, 64, proto,
                    0, src, dst)
    return h[:10] + struct.pack("!H", ip_header_checksum(h)) + h[12:] + body


def tcp(payload: bytes, src=SRC, dst=DST, opts=b"") -> bytes:
    thl = 20 + len(opts)
    h = struct.pack("!HHIIBBHHH", 40000, 5201, 1000, 1, thl // 4 << 4, 0x18, 512, 0, 0) + opts
    c, _ = tcp_checksums(src, dst, h, payload, len(payload))
    return h[:16] + struct.pack("!H", c) + h[18:] + payload


def eth(l3: bytes, ethertype: int = 0x0800) -> bytes:
    return build.ETH_DST + build.ETH_SRC + struct.pack("!H", ethertype) + l3


def test_linktype_word_splits_off_the_fcs_flag():
    assert link.split_linktype_field(0x04000001) == (1, 0)          # F set, FCS length 0 words
    assert link.split_linktype_field(0x24000001) == (1, 4)          # 2 words = 4 bytes
    assert link.split_linktype_field(113) == (113, 0)
    for lt, fcs in ((1, 4), (1, 0), (276, 2)):
        assert link.split_linktype_field(link.linktype_field(lt, fcs)) == (lt, fcs)


def test_ethernet_fcs_is_taken_off_before_decoding():
    frame = eth(ipv4(6, tcp(b"x" * 100)))
    with_fcs = frame + zlib.crc32(frame).to_bytes(4, "little")
    row, lay = D.decode(1, with_fcs, len(with_fcs), fcs=4)
    assert row["payload_len"] == 100 and not row["csum_bad"] and not row["truncated"]
    assert lay.orig_len == len(frame) == lay.frame_len
    row2, _ = D.decode(1, with_fcs, len(with_fcs))                 # read as if there were no FCS
    assert row2["payload_len"] == 100 and lay.orig_len + 4 == len(with_fcs)
    assert link.append_fcs(frame, len(frame), 4) == (with_fcs, len(with_fcs))


def test_ipip_and_vxlan_decode_the_inner_flow():
    inner = ipv4(6, tcp(b"y" * 10))
    row, lay = D.decode(1, eth(ipv4(4, inner, src=bytes([198, 18, 9, 1]))), 0)
    assert (lay.outer, lay.ip, row["src_ip"], row["payload_len"]) == (14, 34, 0xC6120001, 10)
    vx = struct.pack("!HHHH", 50000, 4789, 8 + 8 + 14 + len(inner), 0) + struct.pack("!II", 0x08000000, 42 << 8)
    row, lay = D.decode(1, eth(ipv4(17, vx + eth(inner))), 0)
    assert (row["vni"], lay.outer, lay.udp, lay.ip, row["l2_bytes"]) == (42, 14, 34, 64, 64)


def test_long_ipv6_extension_headers_are_a_reason_not_a_crash():
    hop = bytes([6, 30]) + bytes(30 * 8 + 6)                        # 248 bytes of hop-by-hop options
    seg = tcp(b"", SRC, DST)
    ip6 = struct.pack("!IHBB", 6 << 28, len(hop) + len(seg), 0, 64) + bytes(16) + bytes(16) + hop + seg
    assert D.decode(229, ip6, len(ip6)) == "IPv6 extension headers longer than 215 bytes"


def test_ip_total_length_zero_takes_the_frame_length_even_when_absurd():
    frame = eth(ipv4(6, tcp(b"z" * 20), total=0))
    row, lay = D.decode(1, frame, 0xFFFFFFFF)
    assert lay.ip_len_zero and row["ip_len"] == D.MAX_ORIG_LEN - 14 and row["truncated"]


def test_decode_never_raises_on_prefixes_of_a_frame():
    frame = eth(struct.pack("!HH", 100, 0x0800) + ipv4(6, tcp(b"q" * 30, opts=b"\x01\x01\x08\x0a" + bytes(8))),
                0x8100)
    for k in range(len(frame) + 1):
        got = D.decode(1, frame[:k], len(frame))
        assert isinstance(got, (str, tuple))
    assert D.decode(1, frame, len(frame))[0]["vlan_tci"] == 100


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 65535), st.booleans(), st.booleans(), st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1),
       st.integers(-1, 14), st.integers(0, 4), st.lists(st.integers(0, 2**32 - 1), min_size=8, max_size=8))
def test_options_written_are_read_back(mss, sackok, ts, tsval, tsecr, wscale, sack_n, sack):
    b = options_bytes(mss, sackok, ts, tsval, tsecr, wscale, sack_n, sack)
    assert len(b) % 4 == 0 and len(b) <= 40
    got = parse_options(b)
    assert (got["opt_mss"], got["opt_sackok"], got["opt_ts"], got["opt_wscale"]) == (mss, sackok, ts, wscale)
    if ts:
        assert (got["tsval"], got["tsecr"]) == (tsval, tsecr)
    n = got["sack_n"]
    assert n <= sack_n and got["sack"][:2 * n] == sack[:2 * n]
    if sack_n and not ts and not mss and wscale < 0:
        assert n == sack_n


def test_built_frames_decode_to_their_rows():
    t = Trace.from_columns(seq=[5, 6], payload_len=[0, 40], flags=0x10, opt_ts=True, tsval=[1, 2],
                           tcp_hlen=32, ip_len=[52, 92], src_ip=0xC6120001, dst_ip=0xC6120002)
    for i, (frame, orig) in enumerate(build.frames(t)):
        row, lay = D.decode(1, frame, orig)
        assert (row["seq"], row["payload_len"], row["tsval"], row["tcp_hlen"]) == (5 + i, [0, 40][i], 1 + i, 32)
        assert verifies(frame[lay.ip:lay.ip + lay.ihl]) and not row["csum_bad"]
