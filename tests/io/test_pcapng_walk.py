"""The numba pcapng block walker gives the records, messages and result fields of the Python walker."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from damage import cut_or_flip

from offloadkit.io import pcapng
from offloadkit.io.batch import read_batch
from offloadkit.io.records import CaptureResult, Stats

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted((ROOT / "tests/data").glob("*.pcapng"))


def both(raw: bytes):
    res, st = CaptureResult(None), Stats()
    want = [(r.frame, r.time_ns, r.linktype, bytes(r.data), r.orig_len, r.fcs) for r in pcapng.records(raw, res, st)]
    res2, st2 = CaptureResult(None), Stats()
    d, off, cap, orig, t, lt, fcs, fr = pcapng.packet_arrays(raw, res2, st2)
    got = [(int(a), int(b), int(c), d[o:o + k].tobytes(), int(g), int(f))
           for a, b, c, o, k, g, f in zip(fr, t, lt, off, cap, orig, fcs)]
    assert got == want
    for k in ("format", "linktypes", "fcs", "records", "error", "snaplen", "fine_times"):
        assert getattr(res2, k) == getattr(res, k), k
    assert st2.notes() == st.notes()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_fixtures(path):
    both(path.read_bytes())


@pytest.mark.parametrize("seed", range(40))
def test_damaged(seed):
    both(cut_or_flip((ROOT / "tests/data/multi_if.pcapng").read_bytes(), seed))


def test_read_batch_of_pcapng_equals_pcap(tmp_path):
    from offloadkit.io.capture import read_records
    src = ROOT / "offloadkit/data/captures/ts-mtu1500/router-in.pcap"
    recs, info = read_records(src)
    pcapng.write_records(tmp_path / "a.pcapng", recs, info.snaplen, nano=False)
    a, _ = read_batch(src)
    b, _ = read_batch(tmp_path / "a.pcapng")
    assert [a.data[o:o + c].tobytes() for o, c in zip(a.off, a.cap)] == \
           [b.data[o:o + c].tobytes() for o, c in zip(b.off, b.cap)]
    assert np.array_equal(a.time_ns, b.time_ns) and np.array_equal(a.frame, b.frame)


def _blk(e: str, btype: int, body: bytes) -> bytes:
    import struct
    body += b"\0" * (-len(body) % 4)
    return struct.pack(e + "II", btype, len(body) + 12) + body + struct.pack(e + "I", len(body) + 12)


def test_sections_byte_orders_and_old_blocks():
    import struct
    frame = bytes(range(60))
    out = b""
    for e, bom in (("<", b"\x4d\x3c\x2b\x1a"), (">", b"\x1a\x2b\x3c\x4d")):
        out += _blk(e, pcapng.SHB, bom + struct.pack(e + "HHq", 1, 0, -1))
        out += _blk(e, pcapng.IDB, struct.pack(e + "HHI", 1, 0, 40) + struct.pack(e + "HH", 9, 1) + b"\x09\0\0\0")
        out += _blk(e, pcapng.SPB, struct.pack(e + "I", 60) + frame)                      # cut to snaplen 40
        out += _blk(e, pcapng.PB, struct.pack(e + "HHIIII", 0, 0, 1, 7, 30, 60) + frame[:30])
        out += _blk(e, pcapng.EPB, struct.pack(e + "IIIII", 3, 0, 5, 30, 60) + frame[:30])   # no interface 3
        out += _blk(e, pcapng.EPB, struct.pack(e + "IIIII", 0, 0xFFFFFFFF, 5, 30, 60) + frame[:30])  # far future
        out += _blk(e, pcapng.PB, b"\0" * 8)                                                # malformed
    both(out)
