"""io.stream: a pcap read in blocks and chunks gives the records (and the damage sentence) read_batch gives."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from offloadkit.io import stream
from offloadkit.io.batch import Batch, read_batch
from offloadkit.rewrite.segment import segment_batch, segment_stream

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "offloadkit/data/captures/ts-mtu1500/router-in.pcap"


def records(b: Batch):
    return [(int(f), int(t), b.data[o:o + c].tobytes(), int(g)) for f, t, o, c, g in
            zip(b.frame, b.time_ns, b.off, b.cap, b.orig)]


@pytest.mark.parametrize("block,chunk", [(100, 1), (1000, 7), (1 << 23, 1 << 16)])
@pytest.mark.parametrize("cut", [0, 5, 30])
def test_chunks_equal_whole_file(tmp_path, monkeypatch, block, chunk, cut):
    raw = SRC.read_bytes()
    raw = raw[:len(raw) - cut] if cut else raw
    p = tmp_path / "in.pcap.gz"
    p.write_bytes(gzip.compress(raw))
    monkeypatch.setattr(stream, "BLOCK", block)
    s, _ = stream.open_pcap_stream(p, chunk)
    got = [r for b in s for r in records(b)]
    whole, res = read_batch(raw)
    assert got == records(whole)
    assert s.result.error == res.error and (res.error is not None) == bool(cut)


@pytest.mark.parametrize("chunk", [1, 7, 1 << 16])
def test_segment_chunk_size_does_not_change_the_bytes(tmp_path, chunk):
    s, _ = stream.open_pcap_stream(SRC, chunk)
    parts = []
    run = segment_stream(s, lambda b: parts.extend(records(b)), 536)
    whole = segment_batch(read_batch(SRC)[0], 536)
    assert parts == records(whole.records)
    assert (run.segments, run.super_packets, run.written) == (whole.segments, whole.super_packets, len(whole.records))


def test_writer_writes_what_write_batch_writes(tmp_path):
    from offloadkit.io.batch import PcapWriter, write_batch
    b, res = read_batch(SRC)
    write_batch(tmp_path / "a.pcap", b, res)
    w = PcapWriter(tmp_path / "b.pcap", res.linktype, res.snaplen, res.nano)
    for a in range(0, len(b), 10):
        w.write(Batch(b.data, b.off[a:a + 10], b.cap[a:a + 10], b.orig[a:a + 10], b.time_ns[a:a + 10],
                      b.linktype[a:a + 10], b.fcs[a:a + 10], b.frame[a:a + 10]))
    w.close()
    assert (tmp_path / "a.pcap").read_bytes() == (tmp_path / "b.pcap").read_bytes() == SRC.read_bytes()
    assert np.all(b.orig >= b.cap)


def test_super_packet_chunks_are_cut_by_their_segments(monkeypatch):
    from offloadkit.rewrite import segment as S
    monkeypatch.setattr(S, "MAX_CHUNK_SEGMENTS", 5)
    s, _ = stream.open_pcap_stream(SRC)
    parts = []
    run = segment_stream(s, lambda b: parts.extend(records(b)), 536)
    whole = segment_batch(read_batch(SRC)[0], 536)
    assert parts == records(whole.records) and run.segments == whole.segments
