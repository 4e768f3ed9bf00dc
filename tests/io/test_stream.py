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


CAPTURES = sorted([*(ROOT / "offloadkit/data/captures").rglob("*.pcap*"), *(ROOT / "tests/data").glob("*.pcap*")])
TUNNELS = [p for p in CAPTURES if p.parent.parent.name in ("tunnel", "vxlan") or p.name == "vxlan.pcap"]


def gro_in_chunks(b: Batch, chunk: int, limit: int | None = None):
    """(records written, totals) of gro_stream over ``b``'s first ``limit`` records cut every ``chunk``."""
    from offloadkit.rewrite.gro import gro_stream
    n = len(b) if limit is None else min(limit, len(b))
    parts = []
    run = gro_stream((b.slice(a, min(a + chunk, n)) for a in range(0, n, chunk)), lambda o: parts.extend(records(o)))
    return parts, run


@pytest.mark.parametrize("chunk,limit", [(7, 80), (1 << 16, None)])
def test_gro_chunk_size_does_not_change_the_bytes(chunk, limit):
    """Every shipped capture and test capture (chunks of 7: their first 80 records)."""
    from offloadkit.rewrite.gro import gro_batch
    assert len(CAPTURES) > 60 and len(TUNNELS) >= 6
    for path in CAPTURES:
        b, _ = read_batch(path)
        b = b.slice(0, limit or len(b))
        whole = gro_batch(b)
        parts, run = gro_in_chunks(b, chunk)
        assert parts == records(whole.batch), path
        assert run.reason_counts() == whole.reason_counts() and run.checksum_bytes == whole.checksum_bytes, path
        assert (run.packets, run.written) == (len(b), len(whole.batch))


def test_gro_one_record_chunks_give_the_same_bytes():
    """Chunks of one record: the first 50 records of every tunnel capture, 12 of the others."""
    from offloadkit.rewrite.gro import gro_batch
    merged = 0
    for path in CAPTURES:
        b, _ = read_batch(path)
        limit = 50 if path in TUNNELS else 12
        whole = gro_batch(b.slice(0, limit))
        parts, run = gro_in_chunks(b, 1, limit)
        assert parts == records(whole.batch), path
        assert run.reason_counts() == whole.reason_counts(), path
        merged += run.merged
    assert merged > 50                             # packets held across chunk boundaries were merged


def test_gro_state_crosses_chunks_as_one_run():
    """The kernel's state between chunks: held packets, poll count, time and flow ids (engine level)."""
    from offloadkit.engine.gro import GroParams, GroState, gro, prepare, run_kernel
    from offloadkit.rewrite.gro import batch_to_trace
    b, _ = read_batch(SRC)
    trace, hints, _ = batch_to_trace(b)
    params = GroParams()
    whole = gro(trace, params, hints)
    state = GroState.new(params)
    prep = prepare(trace, params, hints, state)
    reasons = []
    for a in range(0, len(b), 50):               # every row kept: S_ROW stays a row of the whole trace
        sub = {k: (v[:a + 50] if isinstance(v, np.ndarray) and len(v) == len(b) else v) for k, v in prep.items()}
        r, _, _ = run_kernel(sub, params, state, a, a + 50 >= len(b), np.arange(min(a + 50, len(b))))
        reasons.append(r[a:])
    assert np.array_equal(np.concatenate(reasons), whole.reasons)
