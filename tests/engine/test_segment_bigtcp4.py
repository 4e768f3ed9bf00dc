"""IPv4 BIG TCP (Linux 6.3, "net: add IPv4 BIG TCP"): a GSO packet over 64 KB has IPv4 total length 0
(``iph_set_totlen``); ``inet_gso_segment`` writes every segment's real total length, ID + k and header
checksum. This kernel's iproute2 (6.1) cannot set ``gso_ipv4_max_size``, so the check is against the
spec on a generated packet: the 80,000-byte packet becomes 55 segments of 1440 and the remainder,
as the IPv6 one of tcpdump's corpus does (tests/oracle/test_oracle_ipv6.py)."""
import struct

from offloadkit.codes import ACK, PSH
from offloadkit.engine.segment import segment
from offloadkit.io.records import Record
from offloadkit.packet import build
from offloadkit.packet import decode as D
from offloadkit.packet.csum import ip_header_checksum, tcp_checksums, verifies
from offloadkit.rewrite.segment import segment_records
from offloadkit.trace import Trace

SRC, DST = bytes([198, 18, 1, 1]), bytes([198, 18, 2, 2])
TS = b"\x01\x01\x08\x0a" + struct.pack("!II", 7, 9)


def big_tcp4_frame(payload: bytes, ip_id=1000, seq=5000) -> bytes:
    h = struct.pack("!HHIIBBHHH", 40000, 5201, seq, 1, 8 << 4, ACK | PSH, 502, 0, 0) + TS
    _, partial = tcp_checksums(SRC, DST, h, payload, len(payload))
    tcp = h[:16] + struct.pack("!H", partial) + h[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 0, ip_id, 0x4000, 64, 6, 0, SRC, DST)   # total length 0
    ip = ip[:10] + struct.pack("!H", ip_header_checksum(ip)) + ip[12:]
    return build.ETH_DST + build.ETH_SRC + b"\x08\x00" + ip + tcp + payload


def test_ipv4_big_tcp_80000_bytes_becomes_55_full_segments_and_the_remainder():
    payload = bytes(i * 31 & 0xFF for i in range(80000))
    frame = big_tcp4_frame(payload)
    row, lay = D.decode(1, frame, len(frame))
    assert lay.ip_len_zero and row["payload_len"] == 80000 and row["ip_len"] == 80052
    run = segment_records([Record(1, 0, 1, frame, len(frame), 0)], 1440, tx_csum=False)
    assert run.super_packets == 1 and run.segments == 56
    got = b""
    for k, rec in enumerate(run.records):
        r, lay = D.decode(1, rec.data, rec.orig_len)
        plen = 1440 if k < 55 else 80000 - 55 * 1440
        assert r["payload_len"] == plen and r["ip_len"] == 20 + 32 + plen == rec.orig_len - 14
        assert r["ip_id"] == 1000 + k and r["seq"] == 5000 + 1440 * k and not r["csum_bad"]
        assert verifies(rec.data[14:34]) and not lay.ip_len_zero
        assert r["flags"] == (ACK | PSH if k == 55 else ACK)
        got += rec.data[lay.pay:]
    assert got == payload


def test_engine_ipv4_big_tcp_super_packet_segments():
    """In the Trace the super-packet's ip_len is its real length (80052); segments: IDs id0 + k, payload
    lengths 55 x 1440 + 800."""
    t = Trace.from_columns(payload_len=[80000], gso_size=[1440], tcp_hlen=[32], opt_ts=[True], ip_len=[80052],
                           flags=[ACK | PSH], seq=[1], ip_id=[1000])
    o = segment(t)
    assert o.payload_len.tolist() == [1440] * 55 + [800] and o.ip_len.max() == 1492
    assert o.ip_id.tolist() == [1000 + k for k in range(56)]
