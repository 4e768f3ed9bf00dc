"""io.stream: a pcapng read in pieces (blocks cut by the pieces' ends) gives the records, result and
damage sentence of the whole-file reader; gro and doctor read it so."""
from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest
from damage import cut_or_flip

from offloadkit.io import pcapng, stream
from offloadkit.io.batch import read_batch
from offloadkit.io.capture import read_capture, read_records

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for d in ("offloadkit/data", "tests") for p in (ROOT / d).rglob("*.pcapng*"))
MULTI = ROOT / "tests/data/multi_if.pcapng"
SRC = ROOT / "offloadkit/data/captures/ts-mss536/rcv.pcap"
FIELDS = ("format", "linktypes", "fcs", "records", "error", "snaplen", "fine_times", "messages")


def records(b):
    return [(int(f), int(t), b.data[o:o + c].tobytes(), int(g), int(lt), int(k)) for f, t, o, c, g, lt, k in
            zip(b.frame, b.time_ns, b.off, b.cap, b.orig, b.linktype, b.fcs)]


def same_as_whole(path_or_raw, tmp_path, block, monkeypatch, chunk=7):
    if isinstance(path_or_raw, bytes):
        raw, path = path_or_raw, tmp_path / "in.pcapng"
        path.write_bytes(raw)
    else:
        path = path_or_raw
    monkeypatch.setattr(stream, "BLOCK", block)
    s, _ = stream.open_pcap_stream(path, chunk, pcapng=True)
    assert isinstance(s, stream.PcapngStream)
    got = []
    for b in s:
        assert 0 < len(b) <= chunk
        got += records(b)
    whole, res = read_batch(path)
    assert got == records(whole)
    for k in FIELDS:
        assert getattr(s.result, k) == getattr(res, k), k
    return s.result


def _blk(e: str, btype: int, body: bytes) -> bytes:
    body += b"\0" * (-len(body) % 4)
    return struct.pack(e + "II", btype, len(body) + 12) + body + struct.pack(e + "I", len(body) + 12)


def sections() -> bytes:
    """Two sections (little- then big-endian), interfaces of their own, SPB/PB/EPB, an unknown
    interface, a far-future time and a malformed block."""
    frame = bytes(range(60))
    out = b""
    for e, bom, lt in (("<", b"\x4d\x3c\x2b\x1a", 1), (">", b"\x1a\x2b\x3c\x4d", 113)):
        out += _blk(e, pcapng.SHB, bom + struct.pack(e + "HHq", 1, 0, -1))
        out += _blk(e, pcapng.IDB, struct.pack(e + "HHI", lt, 0, 40) + struct.pack(e + "HH", 9, 1) + b"\x09\0\0\0")
        out += _blk(e, pcapng.IDB, struct.pack(e + "HHI", 1, 0, 0))
        out += _blk(e, pcapng.SPB, struct.pack(e + "I", 60) + frame)
        out += _blk(e, pcapng.PB, struct.pack(e + "HHIIII", 1, 0, 1, 7, 30, 60) + frame[:30])
        out += _blk(e, pcapng.EPB, struct.pack(e + "IIIII", 3, 0, 5, 30, 60) + frame[:30])
        out += _blk(e, pcapng.EPB, struct.pack(e + "IIIII", 0, 0xFFFFFFFF, 5, 30, 60) + frame[:30])
        out += _blk(e, pcapng.EPB, struct.pack(e + "IIIII", 1, 0, 9, 60, 60) + frame)
        out += _blk(e, pcapng.PB, b"\0" * 8)
    return out


@pytest.mark.parametrize("block", [100, 4096])
def test_every_pcapng_in_pieces(tmp_path, monkeypatch, block):
    assert len(FILES) >= 2
    for path in FILES:
        same_as_whole(path, tmp_path, block, monkeypatch)
    res = same_as_whole(sections(), tmp_path, block, monkeypatch)
    assert res.linktypes == [1, 1, 113, 1] and res.messages


def test_gzip_and_one_piece(tmp_path, monkeypatch):
    gz = tmp_path / "m.pcapng.gz"
    gz.write_bytes(gzip.compress(MULTI.read_bytes()))
    for block in (100, 1 << 23):
        monkeypatch.setattr(stream, "BLOCK", block)
        s, _ = stream.open_pcap_stream(gz, 1 << 16, pcapng=True)
        whole, res = read_batch(MULTI)
        assert [r for b in s for r in records(b)] == records(whole) and s.result.messages == res.messages
    assert stream.open_pcap_stream(MULTI)[0] is None           # pcap only unless asked


@pytest.mark.parametrize("seed", range(24))
def test_damaged_in_pieces(tmp_path, monkeypatch, seed):
    raw = cut_or_flip(sections() + MULTI.read_bytes()[:800] if seed % 3 == 2 else MULTI.read_bytes(), seed)
    for block in (100, 4096):
        same_as_whole(raw, tmp_path, block, monkeypatch, chunk=3)


def test_damaged_gzip_keeps_the_packets_before(tmp_path, monkeypatch):
    """Cut, or a bad CRC (the read that meets it gives nothing): the packets before, the cut block's
    sentence (as io.stream's pcap reader; the gzip's only when the blocks read end whole)."""
    gz = bytearray(gzip.compress(MULTI.read_bytes()))
    whole = records(read_batch(MULTI)[0])
    monkeypatch.setattr(stream, "BLOCK", 100)
    p = tmp_path / "bad.pcapng.gz"
    p.write_bytes(gz[:len(gz) * 2 // 3])
    s, _ = stream.open_pcap_stream(p, 5, pcapng=True)
    got = [r for b in s for r in records(b)]
    assert got == whole[:len(got)] and "the capture is truncated" in s.result.error
    gz[-8] ^= 0xFF
    p.write_bytes(gz)
    s, _ = stream.open_pcap_stream(p, 5, pcapng=True)
    got = [r for b in s for r in records(b)]
    assert got == whole[:len(got)] and len(got) >= len(whole) - 1
    assert s.result.error.endswith(f"; {len(got)} packets were read before it.")   # the cut block's sentence
    assert s.result.messages[-1] == s.result.error


def pcapng_of(src: Path, tmp_path: Path) -> Path:
    recs, info = read_records(src)
    ng = tmp_path / (src.stem + ".pcapng.gz")
    raw = tmp_path / "x.pcapng"
    pcapng.write_records(raw, recs, info.snaplen, nano=False)
    ng.write_bytes(gzip.compress(raw.read_bytes()))
    return ng


@pytest.mark.parametrize("hold", [1 << 23, 3000])
def test_gro_pcapng_gz_gives_the_bytes_of_its_pcap(tmp_path, monkeypatch, hold):
    from offloadkit.cli import main
    from offloadkit.io.sink import OutputSink
    monkeypatch.setattr(stream, "BLOCK", 4096)
    monkeypatch.setattr(OutputSink, "HOLD", hold)
    ng = pcapng_of(SRC, tmp_path)
    assert main(["gro", str(SRC), str(tmp_path / "a.pcap")]) == 0
    assert main(["gro", str(ng), str(tmp_path / "b.pcap")]) == 0
    assert (tmp_path / "a.pcap").read_bytes() == (tmp_path / "b.pcap").read_bytes()


def test_gro_mixed_link_types_after_the_first_output(tmp_path, monkeypatch):
    """An interface of another link type after output was committed to a pcap: read back, pcapng out."""
    from offloadkit.cli import main
    from offloadkit.io.sink import OutputSink
    recs, info = read_records(SRC)
    sll = [r for r in read_records(ROOT / "tests/data/sll.pcap")[0]]
    for r in sll:
        r.time_ns = recs[-1].time_ns + 1000
    mixed = tmp_path / "mixed.pcapng"
    pcapng.write_records(mixed, recs + sll, info.snaplen, nano=True)
    outs = []
    for hold in (1 << 23, 100):
        monkeypatch.setattr(OutputSink, "HOLD", hold)
        monkeypatch.setattr(stream, "BLOCK", 1 << 23 if hold > 100 else 4096)
        out = tmp_path / f"o{hold}.pcapng"
        assert main(["gro", str(mixed), str(out)]) == 0
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] and outs[0][:4] == pcapng.MAGIC
    lts = {r.linktype for r in read_records(tmp_path / "o100.pcapng")[0]}
    assert len(lts) == 2


def test_doctor_reads_pcapng_in_pieces(tmp_path, monkeypatch):
    from offloadkit.doctor.reader import read_columns
    monkeypatch.setattr(stream, "BLOCK", 100)
    for path in (MULTI, pcapng_of(SRC, tmp_path)):
        ref = read_capture(path)
        full, res = read_columns(path, chunk=5)
        assert res.messages == ref.messages and res.error == ref.error and res.records == ref.records
        for k, col in ref.trace.columns.items():
            assert np.array_equal(full.columns[k], col), k


def test_segment_pcapng_gz_streams_the_bytes_of_its_pcap(tmp_path, monkeypatch):
    """segment reads a pcapng.gz in blocks (io.sink) and writes what it writes for the pcap."""
    from offloadkit.cli import main
    from offloadkit.io.sink import OutputSink
    src = ROOT / "offloadkit/data/captures/ts-mtu1500/router-in.pcap"
    monkeypatch.setattr(stream, "BLOCK", 4096)
    monkeypatch.setattr(OutputSink, "HOLD", 3000)
    ng = pcapng_of(src, tmp_path)
    assert main(["segment", str(src), str(tmp_path / "a.pcap"), "--mss", "536"]) == 0
    assert main(["segment", str(ng), str(tmp_path / "b.pcap"), "--mss", "536"]) == 0
    assert (tmp_path / "a.pcap").read_bytes() == (tmp_path / "b.pcap").read_bytes()
    assert len(read_batch(tmp_path / "a.pcap")[0]) > len(read_batch(src)[0])
