"""The doctor's streaming reader gives what read_capture gives, whatever the chunk size and format."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from offloadkit.doctor import diagnose_file
from offloadkit.doctor.context import COLUMNS
from offloadkit.doctor.reader import read_columns
from offloadkit.io import capture, pcapng
from offloadkit.io.flows import FlowNumbering, assign_flows

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CAPS = ROOT / "offloadkit" / "data" / "captures"
FILES = [DATA / "multi_if.pcapng", DATA / "vlan.pcap", DATA / "eth_non_tcp.pcap", DATA / "sll.pcap",
         CAPS / "ts-mss536" / "rcv.pcap", CAPS / "ts-mtu1500" / "router-in.pcap"]


def sorted_columns(t, names):
    order = np.lexsort((t.direction, t.flow))
    return {k: t.columns[k][order] for k in names}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
@pytest.mark.parametrize("chunk", [3, 1 << 16])
def test_columns_equal_read_capture(path, chunk):
    ref = capture.read_capture(path)
    full, res = read_columns(path, chunk=chunk)
    assert res.messages == ref.messages and res.error == ref.error and res.records == ref.records
    for k, col in ref.trace.columns.items():
        assert np.array_equal(full.columns[k], col), k
    kept, _ = read_columns(path, COLUMNS, chunk=chunk)
    assert set(kept.columns) == set(COLUMNS)
    for k, col in sorted_columns(ref.trace, COLUMNS).items():
        assert np.array_equal(kept.columns[k], col), k


def test_pcapng_gz_and_damaged_pcap(tmp_path):
    src = CAPS / "ts-mss536" / "rcv.pcap"
    recs, info = capture.read_records(src)
    ng = tmp_path / "c.pcapng"
    pcapng.write_records(ng, recs, info.snaplen, nano=False)
    gz = tmp_path / "c.pcapng.gz"
    gz.write_bytes(gzip.compress(ng.read_bytes()))
    want = diagnose_file(src).to_dict()
    for p in (ng, gz):
        got = diagnose_file(p, keep_trace=False).to_dict()
        assert got["findings"] == want["findings"] and got["flows"] == want["flows"]
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(src.read_bytes()[:-7])
    d, ref = diagnose_file(cut, keep_trace=False), diagnose_file(cut)
    assert d.trace is None and d.to_dict() == ref.to_dict() and "capture-damaged" in d.kinds()
    junk = tmp_path / "junk.pcap"
    junk.write_bytes(b"not a capture at all")
    with pytest.raises(ValueError, match="not a pcap or pcapng"):
        diagnose_file(junk, keep_trace=False)


def test_flow_numbering_across_chunks_equals_assign_flows():
    t = capture.read_capture(CAPS / "ts-mtu1500" / "router-in.pcap").trace
    numbering = FlowNumbering()
    got = [numbering.add(t[a:a + 5]) for a in range(0, len(t), 5)]
    flow = np.concatenate([f for f, _ in got])
    direction = numbering.directions(flow, np.concatenate([s for _, s in got]))
    whole = assign_flows(t)
    assert np.array_equal(flow, whole.flow) and np.array_equal(direction, whole.direction)
