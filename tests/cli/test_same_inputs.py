"""``segment``, ``gro`` and ``doctor`` read the same inputs the same way (one decoder):
pcap µs/ns, pcapng with several interfaces, Ethernet with an FCS; outputs keep each packet's link type."""
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest

from offloadkit.cli import main
from offloadkit.io import pcap, pcapng
from offloadkit.io.capture import read_capture, read_records
from offloadkit.io.records import Record
from offloadkit.packet import build
from offloadkit.packet.csum import ip_header_checksum, tcp_checksums

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURES = sorted(p for p in DATA.glob("*.pcap*") if not p.name.startswith("unsupported"))
SRC, DST = bytes([198, 18, 0, 1]), bytes([198, 18, 0, 2])


def super_packet(payload: int, seq: int = 1000) -> bytes:
    """An IPv4 TCP packet with ``payload`` bytes (no link header)."""
    body = bytes((i * 7) & 0xFF for i in range(payload))
    h = struct.pack("!HHIIBBHHH", 40000, 5201, seq, 1, 5 << 4, 0x18, 512, 0, 0)
    c, _ = tcp_checksums(SRC, DST, h, body, len(body))
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40 + payload, 1, 0x4000, 64, 6, 0, SRC, DST)
    return ip[:10] + struct.pack("!H", ip_header_checksum(ip)) + ip[12:] + h[:16] + struct.pack("!H", c) + h[18:] \
        + body


def eth(l3: bytes) -> bytes:
    return build.ETH_DST + build.ETH_SRC + b"\x08\x00" + l3


def sll2(l3: bytes) -> bytes:
    return struct.pack("!HHIHBB8s", 0x0800, 0, 2, 1, 0, 6, build.ETH_SRC + b"\0\0") + l3


def cli(*argv) -> int:
    return main([str(a) for a in argv])


def columns(trace, drop=("frame", "time_ns")):
    return {k: v for k, v in trace.columns.items() if k not in drop}


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_segment_gro_doctor_read_every_fixture_alike(tmp_path, path, capsys):
    before = read_capture(path)
    assert cli("segment", path, tmp_path / "s.pcap", "--mss", 65000) == 0   # nothing is over 65000 bytes
    assert cli("gro", path, tmp_path / "g.pcap", "--json") == 0
    capsys.readouterr()
    assert cli("doctor", path, "--json") == 0
    assert json.loads(capsys.readouterr().out)["packets"] == len(before.trace)
    same = read_capture(tmp_path / "s.pcap").trace
    for k, v in columns(before.trace).items():
        assert np.array_equal(v, columns(same)[k]), k
    grouped = read_capture(tmp_path / "g.pcap").trace
    assert int(grouped.payload_len.sum()) == int(before.trace.payload_len.sum())
    assert {r.linktype for r in read_records(tmp_path / "s.pcap")[0]} == {r.linktype for r in
                                                                        read_records(path)[0]}


def test_mixed_link_types_come_out_as_pcapng_every_packet_decodable(tmp_path, capsys):
    recs = [Record(1, 1_000_000_000, 1, eth(super_packet(3000)), 14 + 3040),
            Record(2, 1_000_100_000, 276, sll2(super_packet(3000, seq=4000)), 20 + 3040),
            Record(3, 1_000_200_000, 1, eth(super_packet(100, seq=7000)), 14 + 140)]
    pcapng.write_records(tmp_path / "in.pcapng", recs)
    assert cli("segment", tmp_path / "in.pcapng", tmp_path / "s.out", "--mss", 1000, "--json") == 0
    assert json.loads(capsys.readouterr().out)["format"] == "pcapng"
    out, info = read_records(tmp_path / "s.out")
    assert info.format == "pcapng" and [r.linktype for r in out] == [1, 1, 1, 276, 276, 276, 1]
    t = read_capture(tmp_path / "s.out")
    assert t.ok and not any("skipped" in m for m in t.messages)
    assert t.trace.payload_len.tolist() == [1000, 1000, 1000, 1000, 1000, 1000, 100]
    assert cli("gro", tmp_path / "s.out", tmp_path / "g.out", "--json") == 0
    g = json.loads(capsys.readouterr().out)
    got = read_capture(tmp_path / "g.out")
    assert g["format"] == "pcapng" and not any("skipped" in m for m in got.messages)
    assert sorted(got.trace.payload_len.tolist()) == [100, 3000, 3000]


def test_ethernet_with_fcs_is_read_alike_and_written_with_a_right_fcs(tmp_path, capsys):
    frames = [eth(super_packet(2896)), eth(super_packet(1448, seq=1000 + 2896))]
    recs = [(1_000_000_000 + i, f + zlib.crc32(f).to_bytes(4, "little"), len(f) + 4) for i, f in enumerate(frames)]
    pcap.write_records(tmp_path / "fcs.pcap", recs, fcs=4)
    assert struct.unpack_from("<I", (tmp_path / "fcs.pcap").read_bytes(), 20)[0] == 0x24000001
    r = read_capture(tmp_path / "fcs.pcap")
    assert r.trace.payload_len.tolist() == [2896, 1448] and not r.trace.csum_bad.any()
    assert cli("segment", tmp_path / "fcs.pcap", tmp_path / "s.pcap", "--mss", 1448, "--no-tx-csum") == 0
    assert cli("gro", tmp_path / "s.pcap", tmp_path / "g.pcap", "--json") == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["merged"] == 1   # PSH ends the first aggregate
    for name, sizes in (("s.pcap", [1448, 1448, 1448]), ("g.pcap", [2896, 1448])):
        out, info = read_records(tmp_path / name)
        assert info.linktypes == [1] and info.fcs == [4]
        for rec in out:
            assert zlib.crc32(rec.data[:-4]).to_bytes(4, "little") == rec.data[-4:]
        t = read_capture(tmp_path / name).trace
        assert t.payload_len.tolist() == sizes and not t.csum_bad.any()


@pytest.mark.parametrize("when_ns", [-5_000_000_000, (1 << 32) * 1_000_000_000 + 7])
def test_times_a_pcap_cannot_hold_are_written_as_pcapng(tmp_path, when_ns, capsys):
    pcapng.write_records(tmp_path / "in.pcapng", [Record(1, when_ns, 1, eth(super_packet(2000)), 2054)])
    assert cli("segment", tmp_path / "in.pcapng", tmp_path / "out", "--mss", 1000) == 0
    out, info = read_records(tmp_path / "out")
    assert info.format == "pcapng" and [r.time_ns for r in out] == [when_ns, when_ns]
    assert cli("gro", tmp_path / "out", tmp_path / "g", "--poll-gap", "none") == 0
    assert [r.time_ns for r in read_records(tmp_path / "g")[0]] == [when_ns]


def test_gzip_and_stdin_stdout(tmp_path, monkeypatch, capfdbinary):
    import gzip
    import io
    import sys
    src = DATA / "eth_us.pcap"
    (tmp_path / "in.pcap.gz").write_bytes(gzip.compress(src.read_bytes()))
    assert cli("gro", src, tmp_path / "a.pcap") == 0
    assert cli("gro", tmp_path / "in.pcap.gz", tmp_path / "b.pcap") == 0
    assert (tmp_path / "a.pcap").read_bytes() == (tmp_path / "b.pcap").read_bytes()
    capfdbinary.readouterr()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(src.read_bytes())))
    assert cli("gro", "-", "-") == 0
    out = capfdbinary.readouterr()
    assert out.out == (tmp_path / "a.pcap").read_bytes() and b"after GRO" in out.err


def test_progress_bar_goes_to_stderr_only(tmp_path, capfd):
    src = DATA / "eth_us.pcap"
    assert cli("segment", src, tmp_path / "a.pcap", "--mss", 500) == 0
    plain = capfd.readouterr()
    assert cli("segment", src, tmp_path / "b.pcap", "--mss", 500, "--progress") == 0
    with_bar = capfd.readouterr()
    assert with_bar.out.replace("b.pcap", "a.pcap") == plain.out
    assert (tmp_path / "a.pcap").read_bytes() == (tmp_path / "b.pcap").read_bytes()


@pytest.mark.parametrize("size", [0, 3, 10, 30])
def test_a_file_damaged_before_its_first_packet_is_refused_by_every_verb(tmp_path, size, capsys):
    bad = tmp_path / "bad.pcap"
    bad.write_bytes((DATA / "eth_us.pcap").read_bytes()[:size])
    for argv in (["segment", bad, tmp_path / "o", "--mss", 1000], ["gro", bad, tmp_path / "o"], ["doctor", bad]):
        assert cli(*argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "bad.pcap" in err[0]


def test_progress_on_doctor_and_export_leaves_stdout_alone(tmp_path, capfd):
    src = DATA / "eth_us.pcap"
    for args in (("doctor", src), ("export", "rtl8139", tmp_path / "x.pcap")):
        code = cli(*args)
        plain = capfd.readouterr()
        assert cli(*args, "--progress") == code
        assert capfd.readouterr().out == plain.out
