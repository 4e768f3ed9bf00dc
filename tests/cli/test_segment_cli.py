"""``offloadkit segment``: pcaps built here byte by byte, checked with an independent checksum and tcpdump."""
import shutil
import struct
import subprocess

import numpy as np
import pytest
from reference.segment_ref import checksum, ones_sum

from offloadkit.cli import main

SRC, DST = bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2])
TS_OPTS = b"\x01\x01\x08\x0a" + struct.pack("!II", 3363137952, 1377914627)


def tcp_ip(payload: bytes, seq=1, flags=0x10, ip_id=25879, opts=TS_OPTS, tot_len=None, payload_len=None):
    """IPv4 + TCP bytes with right checksums; payload_len > len(payload) models a cut capture."""
    plen = len(payload) if payload_len is None else payload_len
    thl = 20 + len(opts)
    tcp = struct.pack("!HHIIBBHHH", 80, 61236, seq, 154, (thl // 4) << 4, flags, 235, 0, 0) + opts
    full_payload = payload + bytes(plen - len(payload))
    c = checksum(SRC + DST + struct.pack("!BBH", 0, 6, thl + plen) + tcp + full_payload)
    tcp = tcp[:16] + struct.pack("!H", c) + tcp[18:]
    total = 20 + thl + plen
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total if tot_len is None else tot_len, ip_id, 0x4000, 64, 6, 0,
                     SRC, DST)
    ip = ip[:10] + struct.pack("!H", checksum(ip)) + ip[12:]
    return ip + tcp + payload, total


def eth(l3: bytes, etype=0x0800, tags=()):
    hdr = b"\x04" * 6 + b"\x02" * 6
    for tci in tags:
        hdr += struct.pack("!HH", 0x8100, tci)
    return hdr + struct.pack("!H", etype) + l3


def write(path, records, linktype=1, nano=False, endian="<"):
    """records: (time_us_or_ns, data, orig_len)."""
    magic = 0xA1B23C4D if nano else 0xA1B2C3D4
    out = struct.pack(endian + "IHHiIII", magic, 2, 4, 0, 0, 262144, linktype)
    for t, data, orig in records:
        sec, frac = divmod(t, 10**9 if nano else 10**6)
        out += struct.pack(endian + "IIII", sec, frac, len(data), orig) + data
    path.write_bytes(out)


def read(path):
    b = path.read_bytes()
    nano = b[:4] == struct.pack("<I", 0xA1B23C4D)
    linktype = struct.unpack_from("<I", b, 20)[0]
    off, recs = 24, []
    while off < len(b):
        sec, frac, cap, orig = struct.unpack_from("<IIII", b, off)
        recs.append((sec, frac, orig, b[off + 16:off + 16 + cap]))
        off += 16 + cap
    return recs, nano, linktype


def fields(data: bytes, l3=14):
    ihl = (data[l3] & 0xF) * 4
    tot, ip_id = struct.unpack_from("!HH", data, l3 + 2)
    t = l3 + ihl
    seq = struct.unpack_from("!I", data, t + 4)[0]
    thl = (data[t + 12] >> 4) * 4
    return dict(tot=tot, id=ip_id, seq=seq, flags=data[t + 13], csum=struct.unpack_from("!H", data, t + 16)[0],
                payload=data[t + thl:], thl=thl, ihl=ihl, t=t)


def run(capsys, *args):
    code = main(["segment", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def payload():
    return bytes(np.random.default_rng(0).integers(0, 256, 2880, dtype=np.uint8))


def test_rtl8139_legacy_2880_gives_1448_and_1432(tmp_path, capsys, payload):
    l3, _ = tcp_ip(payload, ip_id=25879)
    write(tmp_path / "in.pcap", [(1_000_000, eth(l3), 14 + len(l3))])
    code, out, _ = run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1440, "--nic", "rtl8139-legacy")
    assert code == 0 and "2 segments" in out
    recs, _, _ = read(tmp_path / "out.pcap")
    f = [fields(r[3]) for r in recs]
    assert [len(x["payload"]) for x in f] == [1448, 1432]
    assert [x["tot"] for x in f] == [1500, 1484] and [r[2] for r in recs] == [1514, 1498]
    assert [x["id"] for x in f] == [25879, 25880] and [x["seq"] for x in f] == [1, 1449]
    assert f[0]["payload"] + f[1]["payload"] == payload


def test_full_checksums_payload_order_and_other_packets(tmp_path, capsys, payload):
    arp = eth(bytes(28), etype=0x0806)
    udp_ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 1, 0, 64, 17, 0, SRC, DST) + bytes(8)
    big, _ = tcp_ip(payload, flags=0x18 | 0x80, ip_id=65535, seq=2**32 - 100)
    ack, _ = tcp_ip(b"", seq=3000, ip_id=2)
    recs_in = [(1, arp, len(arp)), (2, eth(big), 14 + len(big)), (3, eth(udp_ip), 42), (4, eth(ack), 66)]
    write(tmp_path / "in.pcap", recs_in)
    code, _, _ = run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1000, "--no-tx-csum")
    assert code == 0
    recs, _, _ = read(tmp_path / "out.pcap")
    assert len(recs) == 6
    assert recs[0][3] == arp and recs[4][3] == eth(udp_ip) and recs[5][3] == eth(ack)
    segs = recs[1:4]
    assert all(r[1] == 2 for r in segs)                                     # shared timestamp
    f = [fields(r[3]) for r in segs]
    assert b"".join(x["payload"] for x in f) == payload
    assert [x["seq"] for x in f] == [2**32 - 100, 900, 1900]
    assert [x["id"] for x in f] == [65535, 0, 1]
    assert [x["flags"] for x in f] == [0x90, 0x10, 0x18]                   # CWR first, PSH last
    for r, x in zip(segs, f):
        d = r[3]
        assert ones_sum(d[14:34]) == 0xFFFF                                  # IP header verifies
        seg = d[x["t"]:]
        assert ones_sum(SRC + DST + struct.pack("!BBH", 0, 6, len(seg)) + seg) == 0xFFFF
        assert r[2] == len(d) == 14 + x["tot"]


def test_default_writes_partial_pseudo_header_sum(tmp_path, capsys, payload):
    l3, _ = tcp_ip(payload)
    write(tmp_path / "in.pcap", [(1, eth(l3), 14 + len(l3))])
    assert run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1448)[0] == 0
    recs, _, _ = read(tmp_path / "out.pcap")
    for r in recs:
        x = fields(r[3])
        tcp_len = len(r[3]) - x["t"]
        assert x["csum"] == ones_sum(SRC + DST + struct.pack("!BBH", 0, 6, tcp_len))


def test_header_only_capture_and_tso_zero_total_length(tmp_path, capsys):
    l3, total = tcp_ip(b"\x55" * 10, payload_len=4344)          # captured 10 payload bytes (tcpdump -s 76)
    tso, _ = tcp_ip(b"", payload_len=4344, tot_len=0, seq=4345)  # TSO frame: IP total length 0, headers only
    write(tmp_path / "in.pcap", [(1, eth(l3), 14 + total), (2, eth(tso), 14 + total)])
    assert run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1448, "--no-tx-csum")[0] == 0
    recs, _, _ = read(tmp_path / "out.pcap")
    assert len(recs) == 6
    assert [r[2] for r in recs] == [14 + 1500] * 6                           # original lengths right
    assert [len(r[3]) for r in recs] == [76, 66, 66, 66, 66, 66]             # headers (+ known payload)
    f = [fields(r[3]) for r in recs]
    assert [x["tot"] for x in f] == [1500] * 6
    assert [x["seq"] for x in f] == [1, 1449, 2897, 4345, 5793, 7241]
    assert all(ones_sum(r[3][14:34]) == 0xFFFF for r in recs)


@pytest.mark.parametrize("kind", ["vlan", "pppoe", "sll", "raw"])
def test_link_layers(tmp_path, capsys, payload, kind):
    l3, total = tcp_ip(payload)
    if kind == "vlan":
        frame, l2, lt = eth(l3, tags=(100, 200)), 22, 1
    elif kind == "pppoe":
        frame, l2, lt = eth(struct.pack("!BBHHH", 0x11, 0, 1, total + 2, 0x0021) + l3, etype=0x8864), 22, 1
    elif kind == "sll":
        frame, l2, lt = struct.pack("!HHH8sH", 0, 1, 6, b"\x02" * 8, 0x0800) + l3, 16, 113
    else:
        frame, l2, lt = l3, 0, 101
    write(tmp_path / "in.pcap", [(1, frame, len(frame))], linktype=lt)
    assert run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1448)[0] == 0
    recs, _, linktype = read(tmp_path / "out.pcap")
    assert linktype == lt
    f = [fields(r[3], l2) for r in recs]
    assert [len(x["payload"]) for x in f] == [1448, 1432]
    assert all(r[3][:max(l2 - 4, 0)] == frame[:max(l2 - 4, 0)] for r in recs)
    if kind == "pppoe":
        assert [struct.unpack_from("!H", r[3], 18)[0] for r in recs] == [1502, 1486]


def test_nanosecond_big_endian_input_keeps_timestamps(tmp_path, capsys, payload):
    l3, _ = tcp_ip(payload)
    write(tmp_path / "in.pcap", [(5_123_456_789, eth(l3), 14 + len(l3))], nano=True, endian=">")
    assert run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1448)[0] == 0
    recs, nano, _ = read(tmp_path / "out.pcap")
    assert nano and [(r[0], r[1]) for r in recs] == [(5, 123_456_789)] * 2


def test_drop_gso_leaves_out_multi_segment_packets(tmp_path, capsys, payload):
    big, _ = tcp_ip(payload)
    small, _ = tcp_ip(payload[:1000], seq=2881)
    write(tmp_path / "in.pcap", [(1, eth(big), 14 + len(big)), (2, eth(small), 14 + len(small))])
    code, out, _ = run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1448, "--nic", "drop-gso")
    assert code == 0 and "dropped 1" in out
    recs, _, _ = read(tmp_path / "out.pcap")
    assert [r[3] for r in recs] == [eth(small)]


def test_truncated_file_warns_and_keeps_complete_records(tmp_path, capsys, payload):
    l3, _ = tcp_ip(payload)
    write(tmp_path / "in.pcap", [(1, eth(l3), 14 + len(l3))] * 2)
    data = (tmp_path / "in.pcap").read_bytes()
    (tmp_path / "in.pcap").write_bytes(data[:-100])
    code, _, err = run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1448)
    assert code == 0 and "warning" in err
    assert len(read(tmp_path / "out.pcap")[0]) == 2


@pytest.mark.parametrize("case,message", [
    ("missing", "no such file"), ("text", "is not a pcap or pcapng file"), ("pcapng", "cannot be read"),
    ("mss0", "MSS 0 is out of range"), ("mss_big", "MSS 70000 is out of range"),
    ("mss_word", "is not a whole number"), ("linktype", "has link type 105"),
])
def test_errors_exit_2_with_one_line(tmp_path, capsys, case, message):
    good = tmp_path / "good.pcap"
    write(good, [])
    path, mss = good, "1448"
    if case == "missing":
        path = tmp_path / "nope.pcap"
    elif case == "text":
        path = tmp_path / "t.pcap"
        path.write_text("hello, not a capture\n")
    elif case == "pcapng":
        path = tmp_path / "x.pcapng"
        path.write_bytes(b"\x0a\x0d\x0d\x0a" + bytes(40))
    elif case == "linktype":
        path = tmp_path / "wifi.pcap"
        write(path, [], linktype=105)
    else:
        mss = {"mss0": "0", "mss_big": "70000", "mss_word": "many"}[case]
    code, out, err = run(capsys, path, tmp_path / "out.pcap", "--mss", mss)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
def test_tcpdump_reads_output_with_correct_checksums(tmp_path, capsys, payload):
    l3, _ = tcp_ip(payload, flags=0x18)
    write(tmp_path / "in.pcap", [(1, eth(l3), 14 + len(l3))])
    assert run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1000, "--no-tx-csum")[0] == 0
    p = subprocess.run(["tcpdump", "-n", "-v", "-r", str(tmp_path / "out.pcap")], capture_output=True, text=True,
                       timeout=60)
    text = p.stdout
    assert text.count("cksum") == 3 and text.count("(correct)") == 3, text
    assert "length 1000" in text and "length 880" in text and "Flags [P.]" in text


def test_json_summary(tmp_path, capsys, payload):
    import json
    l3, _ = tcp_ip(payload)
    write(tmp_path / "in.pcap", [(1, eth(l3), 14 + len(l3))])
    code, out, _ = run(capsys, tmp_path / "in.pcap", tmp_path / "out.pcap", "--mss", 1000, "--json")
    s = json.loads(out)
    assert code == 0 and (s["super_packets"], s["segments"], s["written"], s["tcp_checksum"]) == (1, 3, 3, "partial")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from offloadkit.io.records import Record  # noqa: E402
from offloadkit.rewrite.segment import segment_records  # noqa: E402


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 9000), st.integers(8, 3000), st.integers(0, 2**32 - 1), st.integers(0, 65535),
       st.sampled_from([b"", TS_OPTS, TS_OPTS + b"\x01\x01\x05\x0a" + bytes(8)]), st.integers(0, 100),
       st.booleans(), st.sampled_from(["sw-gso", "rtl8139-legacy", "rtl8139-fixed"]))
def test_records_property(plen, mss, seq, ip_id, opts, cut, tx_csum, nic):
    """Real payload split in order, lengths and original lengths right, every checksum verifies
    (or is the pseudo-header sum with tx csum), any captured prefix kept."""
    payload = bytes((i * 31 + 7) & 0xFF for i in range(plen))
    l3, total = tcp_ip(payload, seq=seq, ip_id=ip_id, opts=opts, flags=0x19)
    frame = eth(l3)
    keep = len(frame) - (plen * cut) // 100                      # capture cut inside the payload
    run = segment_records([Record(1, 1_000_002_000, 1, frame[:keep], len(frame))], mss, nic=nic, tx_csum=tx_csum)
    out = run.records
    got = b""
    expect_seq = seq
    for rec in out:
        orig, data = rec.orig_len, rec.data
        x = fields(data)
        assert orig == 14 + x["tot"] and len(data) <= orig
        assert ones_sum(data[14:34]) == 0xFFFF
        assert x["seq"] == expect_seq
        seg_len = x["tot"] - 20
        expect_seq = (expect_seq + seg_len - x["thl"]) % 2**32
        got += x["payload"]
        seg = data[x["t"]:]
        if len(seg) == seg_len and not (tx_csum and nic == "sw-gso" and len(out) > 1):
            assert ones_sum(SRC + DST + struct.pack("!BBH", 0, 6, seg_len) + seg) == 0xFFFF
    assert got == frame[14 + 20 + 20 + len(opts):keep][:len(got)] and payload.startswith(got)
    assert expect_seq == (seq + plen) % 2**32
    assert run.super_packets == (1 if plen > mss else 0)
