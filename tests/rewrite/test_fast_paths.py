"""The numba fast paths of ``gro`` and ``segment`` write exactly what the Python paths write.

Every capture the kit ships and every fixture, plus seeded byte-flipped copies of a
lab capture (odd checksums, lengths, flags), go through ``gro_batch`` and
``segment_batch`` twice: fast path on and off; the output records must be identical.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from offloadkit.engine.gro import KERNEL_ARGS, GroParams, GroState, prepare
from offloadkit.io.batch import Batch, read_batch
from offloadkit.rewrite.gro import batch_to_trace, gro_batch, plain_prepare
from offloadkit.trace import ColumnBuffer
from offloadkit.rewrite.segment import segment_batch

ROOT = Path(__file__).resolve().parents[2]
CAPTURES = sorted((ROOT / "offloadkit/data/captures").rglob("*.pcap")) + sorted((ROOT / "tests/data").glob("*.pcap*"))


def same(a: Batch, b: Batch) -> None:
    assert len(a) == len(b)
    assert [a.data[o:o + c].tobytes() for o, c in zip(a.off, a.cap)] == \
           [b.data[o:o + c].tobytes() for o, c in zip(b.off, b.cap)]
    for k in ("orig", "time_ns", "linktype", "fcs", "frame"):
        assert np.array_equal(getattr(a, k), getattr(b, k)), k


def check(batch: Batch) -> None:
    for params in (GroParams(), GroParams(rx_csum="none", poll_gap_ns=None, hz=250)):
        fast, slow = gro_batch(batch, params), gro_batch(batch, params, fast_path=False)
        same(fast.batch, slow.batch)
        assert np.array_equal(fast.reasons, slow.reasons)
    for mss, tx in ((1448, True), (536, False)):
        fast, slow = segment_batch(batch, mss, tx_csum=tx), segment_batch(batch, mss, tx_csum=tx, fast_path=False)
        same(fast.records, slow.records)
        assert (fast.super_packets, fast.segments, fast.dropped) == (slow.super_packets, slow.segments, slow.dropped)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: str(p.relative_to(ROOT)))
def test_fast_equals_python(path):
    batch, _ = read_batch(path)
    check(batch)


@pytest.mark.parametrize("seed", range(4))
def test_fast_equals_python_on_damaged_headers(seed):
    batch, _ = read_batch(ROOT / "offloadkit/data/captures/ts-mtu1500/router-in.pcap")
    rng = np.random.default_rng(seed)
    data = batch.data.copy()
    rows = rng.choice(len(batch), size=len(batch) // 3, replace=False)
    at = batch.off[rows] + rng.integers(14, 66, size=len(rows))     # IP and TCP header bytes
    data[at] = rng.integers(0, 256, size=len(rows))
    check(Batch(data, batch.off, batch.cap, batch.orig, batch.time_ns, batch.linktype, batch.fcs, batch.frame))


def plain_part(batch: Batch) -> Batch:
    """The records of ``batch`` that ``Batch.decode_plain`` decodes (a chunk of these takes ``plain_prepare``)."""
    return batch.take(np.nonzero(batch.decode_plain()[1])[0])


def check_plain(batch: Batch) -> None:
    """``plain_prepare`` gives every array ``prepare`` gives, and GRO the same records and reasons."""
    sub = plain_part(batch)
    if not len(sub):
        return
    for params in (GroParams(), GroParams(rx_csum="none", rx_hash="zero", tunnel_rule="new")):
        got = plain_prepare(sub, params, GroState.new(params), ColumnBuffer())
        assert got is not None
        trace, hints, _ = batch_to_trace(sub, None, False)
        want = prepare(trace, params, hints, GroState.new(params))
        for k in KERNEL_ARGS + ("n_tkeys",):
            if k in ("onet", "oid"):        # no outer header: empty on the plain path, -1 / 0 on the other
                assert (np.asarray(want[k]) == (-1 if k == "onet" else 0)).all() and not len(got[0][k])
                continue
            assert np.array_equal(np.asarray(got[0][k]), np.asarray(want[k])), k
        for k in ("place", "nbytes", "row"):
            assert np.array_equal(getattr(got[0]["_passes"], k), getattr(want["_passes"], k)), k
        fast, slow = gro_batch(sub, params), gro_batch(sub, params, fast_path=False)
        same(fast.batch, slow.batch)
        assert np.array_equal(fast.reasons, slow.reasons)


@pytest.mark.parametrize("path", [p for p in CAPTURES if "ts-mtu1500" in str(p) or "eth_" in p.name],
                         ids=lambda p: p.name)
def test_plain_prepare_equals_prepare(path):
    check_plain(read_batch(path)[0])


def test_plain_prepare_equals_prepare_on_damaged_headers():
    batch, _ = read_batch(ROOT / "offloadkit/data/captures/ts-mtu1500/router-in.pcap")
    rng = np.random.default_rng(7)
    data = batch.data.copy()
    rows = rng.choice(len(batch), size=len(batch) // 3, replace=False)
    at = batch.off[rows] + rng.integers(14, 66, size=len(rows))
    data[at] = rng.integers(0, 256, size=len(rows))
    check_plain(Batch(data, batch.off, batch.cap, batch.orig, batch.time_ns, batch.linktype, batch.fcs, batch.frame))
